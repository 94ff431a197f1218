"""The one place for numba JIT options.

Every kernel is compiled with ``cache=True`` (compiled code is reused across processes) and
``nogil=True``. ``fastmath`` is deliberately narrow: only ``nsz`` (signed zeros may be ignored).

- ``nnan``/``ninf`` (part of ``fastmath=True``) would fold away NaN and infinity checks, and
  PAV-LLR legitimately produces infinities.
- ``reassoc``, ``contract``, ``arcp`` and ``afn`` change rounding (sums reordered, fused
  multiply-adds, ``a/b`` as ``a*(1/b)``, approximate ``log``/``exp``). streamcal promises that
  incremental results equal batch results *exactly* and that kernels equal their ``naive_*``
  references, so summation order and rounding must be the ones the source states. The kernels
  here are branchy and memory-bound; these flags buy nothing measurable there.
"""

from __future__ import annotations

import numba
import numba.core.options

FASTMATH_FLAGS = frozenset({"nsz"})

# ``forceinline`` is set (to False) so that a kernel called from a ``forceinline`` helper does
# not inherit the helper's True (numba passes unset options down to the functions a kernel calls).
# ``no_cfunc_wrapper``: no C-callable wrapper (for ``numba.cfunc``-style function pointers, which
# nothing here takes) is compiled for each kernel, which shortens every first compile. Calls from
# Python go through the other wrapper, which every kernel keeps.
JIT_OPTIONS = {
    "cache": True,
    "nogil": True,
    "fastmath": set(FASTMATH_FLAGS),
    "error_model": "numpy",
    "forceinline": False,
    "no_cfunc_wrapper": True,
}


# Helpers called once or twice per event from another kernel take ``forceinline=True``: LLVM
# inlines them into every caller (``alwaysinline``). Called instead, they would cost more than
# their bodies: a call between compiled functions passes each array as seven scalars and,
# unless compiled with ``jit_noalloc`` (below), increments and decrements its reference count
# (atomic operations); even without reference counts the passing of arrays as scalars is a
# large share of a per-event helper's cost. Each helper is typed and compiled once per
# signature; its callers link its compiled code and inline it. numba's own ``inline="always"``
# instead copies the helper's bytecode into every call site and types it there again (and
# recursively its own inlined helpers), which makes the first compile (a fresh install, an
# empty cache) longer, for the per-event helpers and for one-line ones alike. It is kept only
# for a helper that returns a view of an array argument, which a compiled function without
# reference counts cannot return (``ipav._map_section``).
#
# A helper compiled on its own still costs a numba pipeline and an LLVM module of its own, and
# numba's ``@overload`` builtins (``min``, ``max``, ``int``, ``x in (a, b)``) each compile one
# per argument types: the kernels on the first-call path write one-line helpers out and use
# comparisons and ``np.int64`` casts instead (``test_cold_start.py`` pins the count).
#
# The kernels pass their callees no literal integers where they could pass a variable: numba
# compiles a callee once per literal value (see ``ipav._H0``).
#
# Developers: numba's on-disk cache of a kernel is invalidated by changes to the kernel's own
# source file only, not to the helpers it calls (inlined or not) in other modules. After
# editing ``histogram.py``, clear the cached kernels of the modules that call it:
# ``find streamcal -name '*.nbi' -delete -o -name '*.nbc' -delete``.


def jit(func=None, **overrides):
    """``numba.njit`` with streamcal's options; keyword ``overrides`` replace single options.

    Use as ``@jit`` or ``@jit(parallel=False)``.
    """
    options = {**JIT_OPTIONS, **overrides}
    if func is None:
        return lambda f: numba.njit(**options)(f)
    return numba.njit(**options)(func)


# Reference counting. numba keeps a reference count on every array a compiled function holds:
# each array argument of an inlined helper is a new reference, taken and dropped by a call to
# ``NRT_incref`` / ``NRT_decref`` (an atomic operation). numba's pruning pass removes such pairs
# only when nothing branches or calls between them, which is rarely so in a kernel with loops
# and early returns, so in the per-event PAV kernel dozens of these calls would run per event,
# each dearer than most of the kernel's own arithmetic.
#
# A kernel that allocates no array (it writes into the arrays it is given, or into views of
# them) needs no count: the caller's arrays outlive the call. ``jit_noalloc`` compiles such
# kernels with numba's runtime off (its ``_nrt`` option: private, but accepted by every numba
# since 0.19; where a numba does not know it, the kernels compile as with ``jit``). A kernel
# compiled so that tries to allocate fails to compile (numba has no allocator to call), so a
# mistake cannot go unnoticed. Such kernels call only each other: the PAV kernels
# (``ipav.py``), the histogram and windows (``histogram.py``) and the replay plan (``plan.py``):
# per-event kernels. Elsewhere (the GEV kernels, say) the per-call cost is Python's, and the
# reference counts are not worth the private option.
NO_REFCOUNT_OPTIONS = {"_nrt": False} if hasattr(numba.core.options.DefaultOptions, "_nrt") else {}


def jit_noalloc(func=None, **overrides):
    """``jit`` for kernels that allocate no arrays: array reference counting compiled out."""
    return jit(func, **{**NO_REFCOUNT_OPTIONS, **overrides})


def entry_point(kernel, *example_args):
    """``kernel``'s compiled function for the types of ``example_args``, without dispatch.

    Calling a numba dispatcher types every argument to pick the compiled version, which costs
    more than a per-event kernel's own work; the returned callable skips that. It trusts its arguments: pass
    exactly the types of ``example_args`` (same dtypes, contiguous arrays, Python floats).
    """
    return kernel.compile(tuple(numba.typeof(a) for a in example_args))
