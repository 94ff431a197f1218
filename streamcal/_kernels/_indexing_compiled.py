"""Array indexing without the negative-index fix-up in the PAV and histogram kernels (imported
when the process switches to compiled kernels, before any kernel compiles).

numba lowers ``a[i]`` for a signed integer ``i`` as ``a[i + len(a)]`` when ``i < 0`` (Python's
wrap-around), a test and a select before every load and store. The kernels of
:mod:`streamcal._kernels.ipav` and :mod:`streamcal._kernels.histogram` index their flat state
arrays only by offsets that are never negative (a sentinel such as -1 is tested before it is
used as an index), so for the functions of these two modules the index is used as it is,
the lowering numba already applies to unsigned indices. Every other function, numba's own
included, keeps the fix-up. The values are the same either way; the per-event PAV kernel runs
faster without the tests on its address chains (see ``docs/benchmarks.md``, "Streaming PAV").

The interpreted tier runs the same source under Python's indexing, where these offsets
address the same elements.
"""

from __future__ import annotations

import inspect

from numba.core import types
from numba.np import arrayobj

# the LLVM names of the functions numba compiles from these modules start so (numba's
# Itanium-style mangling of ``streamcal._kernels.<module>``)
_MODULES = ("_ZN9streamcal8_kernels4ipav", "_ZN9streamcal8_kernels9histogram")

# numba's function (where a numba has none by this name, or one with other parameters, nothing is
# replaced and the kernels compile with the fix-up, giving the same values); a second import of
# this module (a reload) finds its own replacement installed and reads numba's function from it
_INSTALLED = getattr(arrayobj, "fix_integer_index", None)
NUMBA_FIX_INTEGER_INDEX = getattr(_INSTALLED, "numba_own", _INSTALLED)


def fix_integer_index(context, builder, idxty, idx, size):
    """numba's ``fix_integer_index``, without the fix-up in the functions of ``_MODULES``."""
    if idxty.signed and builder.function.name.startswith(_MODULES):
        return context.cast(builder, idx, idxty, types.intp)
    return NUMBA_FIX_INTEGER_INDEX(context, builder, idxty, idx, size)


def replaceable(function) -> bool:
    """Whether ``function`` is numba's ``fix_integer_index`` with the parameters this module calls it with."""
    try:
        names = tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False
    return function.__module__ == arrayobj.__name__ and names == ("context", "builder", "idxty", "idx", "size")


if NUMBA_FIX_INTEGER_INDEX is not None and replaceable(NUMBA_FIX_INTEGER_INDEX):
    fix_integer_index.numba_own = NUMBA_FIX_INTEGER_INDEX
    arrayobj.fix_integer_index = fix_integer_index
