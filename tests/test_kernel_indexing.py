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

