"""The PAV and histogram kernels' indexing without numba's negative-index fix-up
(``streamcal._kernels._indexing_compiled``) is theirs alone: other compiled code keeps Python's
meaning of a negative index. (``test_tiers.py`` checks that the PAV kernels give the interpreted
tier's values, bit for bit.)"""

from __future__ import annotations

import numpy as np

from streamcal._kernels import _config


def test_a_numba_function_outside_the_pav_kernels_still_wraps_negative_indices():
    _config.use_compiled_kernels()
    import numba

    @numba.njit
    def item(a, i):
        return a[i]

    @numba.njit
    def put(a, i, v):
        a[i] = v

    a = np.arange(5.0)
    assert item(a, -1) == 4.0
    assert item(a, -5) == 0.0
    put(a, -2, 9.0)
    assert a.tolist() == [0.0, 1.0, 2.0, 9.0, 4.0]



def test_the_pav_kernels_indexing_is_in_place_after_the_switch():
    """With the numba this runs on (whose ``fix_integer_index`` has the expected parameters) the
    replacement is installed once the process switches to compiled kernels."""
    import importlib

    import numba
    from numba.np import arrayobj

    from streamcal._kernels import _indexing_compiled as indexing

    _config.use_compiled_kernels()
    if indexing.NUMBA_FIX_INTEGER_INDEX is None or not indexing.replaceable(indexing.NUMBA_FIX_INTEGER_INDEX):
        return  # another numba: the kernels keep the fix-up (the same values), nothing is replaced
    assert arrayobj.fix_integer_index is indexing.fix_integer_index
    assert not indexing.replaceable(indexing.fix_integer_index)  # never wraps itself
    importlib.reload(indexing)  # a second import installs its own copy over numba's function, not over itself
    assert arrayobj.fix_integer_index is indexing.fix_integer_index
    assert indexing.fix_integer_index.numba_own is indexing.NUMBA_FIX_INTEGER_INDEX
    assert indexing.replaceable(indexing.NUMBA_FIX_INTEGER_INDEX)

    @numba.njit
    def item(a, i):
        return a[i]

    assert item(np.arange(3.0), -1) == 2.0
