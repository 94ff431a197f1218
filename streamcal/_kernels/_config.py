"""The one place for numba JIT options, and for when the kernels run compiled.

Every kernel is compiled with ``cache=True`` (compiled code is reused across processes) and
``nogil=True``. ``fastmath`` is deliberately narrow: only ``nsz`` (signed zeros may be ignored).

- ``nnan``/``ninf`` (part of ``fastmath=True``) would fold away NaN and infinity checks, and
  PAV-LLR legitimately produces infinities.
- ``reassoc``, ``contract``, ``arcp`` and ``afn`` change rounding (sums reordered, fused
  multiply-adds, ``a/b`` as ``a*(1/b)``, approximate ``log``/``exp``). streamcal promises that
  incremental results equal batch results *exactly* and that kernels equal their ``naive_*``
  references, so summation order and rounding must be the ones the source states. The kernels
  here are branchy and memory-bound; these flags buy nothing measurable there.

Two tiers. Compiling the kernels a first call needs takes seconds on an empty numba cache, and
even a warm cache costs numba's start-up (importing numba and initialising its compiler, most
of a second) before the first compiled call. A process's first small calls therefore run the
kernels' own Python source in the Python interpreter, with numba not even imported: the
*interpreted* tier. Each call that may be interpreted states how many events it hands the
kernel (:func:`run`); while the process's allowance (``STREAMCAL_INTERPRETED_EVENTS``, default
:data:`DEFAULT_INTERPRETED_EVENTS`) covers a call, it runs interpreted; the first call it does
not cover, and every kernel call that states no events, switches the whole process to the
*compiled* tier for good (:func:`use_compiled_kernels`). The switch happens once: the rent
(interpreting, about 50 microseconds per event) is paid only until it would exceed the price of
buying (loading the compiled kernels), as in the ski-rental rule, so a process that goes on to
stream millions of events loses a fraction of a second, and one that calibrates a few thousand
never waits for numba at all.

The tiers give the same bits. The interpreted functions are the kernels' own code, with the
process's numpy scalars for numba's machine numbers (IEEE float64 and int64 arithmetic alike),
errors of floating-point arithmetic silenced as numba's ``error_model="numpy"`` leaves them,
and ``math`` replaced by :data:`_NUMBA_MATH`, whose functions return what numba's do where
Python's raise (``log(0.0)`` is ``-inf``, not an error), and ``math.pow(2.0, x)`` the C
library's ``exp2``, as LLVM compiles a power of the constant 2.0 (Python's ``pow`` rounds apart in
the last bit now and then): the kernels write the decay windows' factors so. ``tests/test_tiers.py`` runs every
window kind, weight kind and map through both tiers and compares the outputs and the saved
states bit for bit.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
import types

import numpy as np

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
# The kernels pass their callees no literal integers or booleans where they could pass a
# variable: numba compiles a callee once per literal value (see ``ipav._H0``). A variable a loop
# updates and a call reads starts from a NumPy value (``i = np.int64(0)``, not ``i = 0``): numba's
# first typing pass reaches the call before the loop's other assignments and would compile the
# callee for the literal start as well (``test_cold_start.py`` checks that the kernels of every
# method compile once).
#
# numba's on-disk cache of streamcal's kernels is stamped by the contents of their source files
# (``_cache_locator``), so that the caches ``pip install`` compiles into the wheel load after it.
#
# Developers: numba's on-disk cache of a kernel is invalidated by changes to the kernel's own
# source file only, not to the helpers it calls (inlined or not) in other modules. After
# editing ``histogram.py``, clear the cached kernels of the modules that call it:
# ``find streamcal -name '*.nbi' -delete -o -name '*.nbc' -delete``.


def jit(func=None, **overrides):
    """``numba.njit`` with streamcal's options; keyword ``overrides`` replace single options.

    Use as ``@jit`` or ``@jit(parallel=False)``. Until the process switches to compiled kernels
    the result is a :class:`Kernel`; after the switch, numba's dispatcher itself.
    """
    options = {**JIT_OPTIONS, **overrides}
    if func is None:
        return lambda f: _kernel(f, options)
    return _kernel(func, options)


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
def jit_noalloc(func=None, **overrides):
    """``jit`` for kernels that allocate no arrays: array reference counting compiled out."""
    return jit(func, **{_NO_ALLOC: True, **overrides})


def entry_point(kernel, *example_args):
    """``kernel``'s compiled function for the types of ``example_args``, without dispatch.

    Calling a numba dispatcher types every argument to pick the compiled version, which costs
    more than a per-event kernel's own work; the returned callable skips that. It trusts its arguments: pass
    exactly the types of ``example_args`` (same dtypes, contiguous arrays, Python floats).
    Switches the process to compiled kernels.
    """
    # the switch first: numba's first import then runs under the switch's lock, in one thread
    # (two threads importing numba at once can each see the other's half-initialised modules)
    dispatcher = compiled(kernel)
    import numba

    return dispatcher.compile(tuple(numba.typeof(a) for a in example_args))


# --- the two tiers ---------------------------------------------------------------------------

DEFAULT_INTERPRETED_EVENTS = 20_000
"""Events the interpreted tier may hand kernels in one process, by default.

About half a second of interpreted work (a first ``prequential`` of ``n`` events hands ``2n``:
the bucket search and the PAV loop each see every event), which is what loading the compiled
kernels from a warm cache costs: numba's import and start-up."""

_ENV = "STREAMCAL_INTERPRETED_EVENTS"
_NO_ALLOC = "_streamcal_no_alloc"  # the option ``jit_noalloc`` adds (numba's ``_nrt=False``)


def _allowance_from_environment() -> int:
    text = os.environ.get(_ENV, "").strip()
    if not text:
        return DEFAULT_INTERPRETED_EVENTS
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = -1
    if value < 0:
        msg = f"environment variable {_ENV}={text!r}: expected a whole number of events >= 0 (0: always compiled)."
        raise ValueError(msg)
    return value


_SWITCH = threading.Lock()  # guards the switch and the allowance; numba is first imported under it
_compiled = False  # True once the process runs compiled kernels (never False again)
_allowance = _allowance_from_environment()
_force_interpreted = False  # tests: interpret every call that states its events

# Held for the whole of each interpreted run of a river-face entry point, and by the array
# face while it marks a packed state busy: an interpreted entry point is then as indivisible,
# to other threads, as a compiled one holding the GIL (``PAVCalibrator``'s busy mark).
INTERPRETER_LOCK = threading.RLock()

_KERNELS: list[Kernel] = []
_KERNEL_OF_DISPATCHER: dict[int, Kernel] = {}  # id(numba dispatcher) -> its Kernel

#: Functions :func:`use_compiled_kernels` calls, in order and without arguments, before it
#: imports numba (a process that owns its start-up prepares it there: the command line).
BEFORE_SWITCH: list = []


class Kernel:
    """A kernel before the process compiles: its Python function and its JIT options.

    Calling it, or asking for any of numba's public attributes (``signatures``, ``compile``,
    ``targetoptions``), switches the process to compiled kernels and forwards to the
    dispatcher; :func:`run` instead runs ``py_func`` interpreted while the allowance lasts.
    """

    __slots__ = ("__dict__", "__weakref__", "dispatcher", "options", "py_func")

    def __init__(self, py_func, options: dict):
        self.py_func = py_func
        self.options = options
        self.dispatcher = None
        functools.update_wrapper(self, py_func)

    def __call__(self, *args):
        return compiled(self)(*args)

    def __getattr__(self, name: str):
        # numba's public attributes only: a probe for a private or special name (``hasattr`` by
        # a display hook, a copier, a memory walk) must not switch the process
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(compiled(self), name)

    def __repr__(self) -> str:
        return f"<streamcal kernel {self.__module__}.{self.__qualname__}>"


def _numba_options(options: dict) -> dict:
    import numba.core.options

    options = dict(options)
    if options.pop(_NO_ALLOC, False) and hasattr(numba.core.options.DefaultOptions, "_nrt"):
        # numba's private ``_nrt`` option, accepted by every numba since 0.19; where a numba
        # does not know it, the kernel compiles as with ``jit``
        options["_nrt"] = False
    return options


def _kernel(func, options: dict):
    kernel = Kernel(func, options)
    with _SWITCH:
        _KERNELS.append(kernel)
        if not _compiled:
            return kernel
    return _dispatcher_of(kernel)


def _dispatcher_of(kernel: Kernel):
    if kernel.dispatcher is None:
        import numba

        kernel.dispatcher = numba.njit(**_numba_options(kernel.options))(kernel.py_func)
        _KERNEL_OF_DISPATCHER[id(kernel.dispatcher)] = kernel
    return kernel.dispatcher


def is_compiled() -> bool:
    """Whether the process has switched to compiled kernels."""
    return _compiled


def use_compiled_kernels() -> None:
    """Switch the process to numba's compiled kernels, for good (a no-op after the first call).

    A process runs its first small calls interpreted, without numba, and switches by itself at
    the first call its allowance of interpreted events does not cover (``STREAMCAL_INTERPRETED_EVENTS``,
    default 20,000; docs/first_calls.md), or sets the allowance to 0. Both tiers give the same bits.

    Each kernel then compiles (on a fresh install) or loads from numba's cache at its first
    call: a first ``PAVCalibrator`` call after the switch costs a few seconds on a fresh
    install and most of a second after. :func:`streamcal.warmup` switches and runs those first
    calls at once, for a service's start-up.

    Examples
    --------
    >>> import streamcal
    >>> streamcal.use_compiled_kernels()
    >>> from streamcal._kernels import _config
    >>> _config.is_compiled()
    True
    """
    # Every kernel becomes a numba dispatcher, and every module of streamcal that holds a
    # ``Kernel`` by name holds the dispatcher instead, so compiled kernels call each other as
    # numba requires.
    global _compiled
    with _SWITCH:
        if _compiled:
            return
        for prepare in BEFORE_SWITCH:
            prepare()
        from streamcal._kernels import _cache_locator

        _cache_locator.install()  # the kernels' caches stamped by their sources' contents, before any is made
        import streamcal._kernels._indexing_compiled  # the PAV kernels' indexing, before any compile
        import streamcal._kernels._prefetch_compiled  # noqa: F401  (the hints' compiled forms, before any compile)

        for kernel in _KERNELS:
            _dispatcher_of(kernel)
        for name, module in list(sys.modules.items()):
            if module is None or not (name == "streamcal" or name.startswith("streamcal.")):
                continue
            for attr, value in list(vars(module).items()):
                if type(value) is Kernel:
                    setattr(module, attr, value.dispatcher)
        _compiled = True


def compiled(kernel):
    """The numba dispatcher of ``kernel`` (a :class:`Kernel` or a dispatcher), switching the
    process to compiled kernels first if need be."""
    if type(kernel) is not Kernel:
        return kernel
    if kernel.dispatcher is None or not _compiled:
        use_compiled_kernels()
    return kernel.dispatcher


def is_cached(kernel) -> bool:
    """Whether numba's on-disk cache holds compiled code for ``kernel`` (for any signature).
    Switches the process to compiled kernels. False where this numba keeps its cache otherwise
    than this reads it (``_cache._cache_file._index_path``, numba's private layout)."""
    try:
        return os.path.exists(compiled(kernel)._cache._cache_file._index_path)
    except AttributeError:
        return False


def switch_ahead(events: int, first_call=None) -> threading.Thread | None:
    """Start switching to compiled kernels on a worker thread, when a call handing kernels
    ``events`` events would not run interpreted; the started thread, or None.

    The thread switches (:func:`use_compiled_kernels`: numba's import) and then runs
    ``first_call`` (no arguments), a small call of a kernel the caller is about to use: numba's
    first compiled call, even of a kernel in its cache, loads numba's compiler registries (most
    of its start-up). A caller that knows it will stream many events starts it while it still
    opens its input, so that this start-up overlaps that work. A failure there is left to the
    caller's own first compiled call, which meets it again.
    """
    with _SWITCH:
        if _compiled or _force_interpreted or events <= _allowance:
            return None

    def switch() -> None:
        try:
            use_compiled_kernels()
            if first_call is not None:
                first_call()
        except Exception:  # the caller's own compiled call raises it again
            pass

    thread = threading.Thread(target=switch, name="streamcal-switch-ahead", daemon=True)
    thread.start()
    return thread


def may_interpret(events: int) -> bool:
    """Whether a call handing kernels ``events`` events runs interpreted; if so, its events
    are taken from the allowance."""
    global _allowance
    if _compiled:
        return False
    with _SWITCH:
        if _force_interpreted:
            return True
        if _compiled or events > _allowance:
            return False
        _allowance -= events
        return True


def run(kernel, events: int, *args):
    """``kernel(*args)``, interpreted if the allowance covers ``events`` more events.

    A call the allowance does not cover runs compiled, and switches the process to compiled
    kernels."""
    if may_interpret(events):
        return run_interpreted(kernel, *args)
    return kernel(*args)


def run_interpreted(kernel, *args):
    """``kernel(*args)`` in the interpreted tier, whatever the allowance: its Python source
    with numpy float64 scalars for Python floats and bools (numba's float64 arguments), numpy's
    floating-point errors silenced, and scalar results (alone or in a tuple) as Python numbers."""
    function = interpreted(kernel)
    args = tuple(np.float64(a) if type(a) is float or type(a) is bool else a for a in args)
    with np.errstate(all="ignore"):
        result = function(*args)
    if type(result) is tuple:  # a tuple of scalars, as a compiled kernel returns it: Python numbers
        return tuple(r.item() if isinstance(r, np.generic) else r for r in result)
    return result.item() if isinstance(result, np.generic) else result


NOT_RUN = object()
"""What :func:`try_entry_point` returns when the allowance is spent."""


def try_entry_point(kernel, *args):
    """A river-face entry point, interpreted, if the allowance covers one more event; else
    :data:`NOT_RUN`, and the caller runs it compiled.

    The decision and the run hold :data:`INTERPRETER_LOCK` together. Once a call is refused,
    every interpreted entry point has finished (each held the lock for its whole run) and none
    starts again (the allowance never grows), so compiled entry points, which rely on the GIL
    alone, never overlap an interpreted one."""
    with INTERPRETER_LOCK:
        if may_interpret(1):
            return run_interpreted(kernel, *args)
    return NOT_RUN


class _Interpreting:
    """``with interpreting():`` every call that states its events runs interpreted (tests)."""

    def __enter__(self):
        global _force_interpreted
        with _SWITCH:
            _force_interpreted = True

    def __exit__(self, *exc_info):
        global _force_interpreted
        with _SWITCH:
            _force_interpreted = False


def interpreting() -> _Interpreting:
    """A context in which every kernel call that states its events runs interpreted, even in a
    compiled process: the tests compare the tiers with it."""
    return _Interpreting()


def _kernel_behind(value) -> Kernel | None:
    if type(value) is Kernel:
        return value
    return _KERNEL_OF_DISPATCHER.get(id(value))


def _numba_int(x) -> int:
    """What numba's float-to-int64 conversion gives on x86-64: the nearest integer toward
    zero, or the "integer indefinite" -2**63 where that is out of range (and for NaN)."""
    if x != x or not (-(2.0**63) <= x < 2.0**63):
        return -(2**63)
    return int(x)


def _log(x):
    return math.log(x) if x > 0.0 else (-math.inf if x == 0.0 else math.nan)


def _log1p(x):
    return math.log1p(x) if x > -1.0 else (-math.inf if x == -1.0 else math.nan)


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sqrt(x):
    return math.sqrt(x) if x >= 0.0 else math.nan


def _c_exp2():
    """The C library's ``exp2`` as a Python function: ``math.exp2`` (Python 3.11 on), else through
    ``ctypes``; ``None`` where neither is there."""
    exp2 = getattr(math, "exp2", None)
    if exp2 is not None:
        return exp2
    try:
        import ctypes
        import ctypes.util

        c_exp2 = ctypes.CDLL(ctypes.util.find_library("m")).exp2
        c_exp2.restype = ctypes.c_double
        c_exp2.argtypes = (ctypes.c_double,)
    except (OSError, AttributeError, TypeError):
        return None
    return lambda x: c_exp2(float(x))


_C_EXP2 = _c_exp2()


def _pow(x, y):
    """``math.pow`` as a kernel computes it. The kernels call it with the constant base 2.0 only
    (the decay windows' factors), which LLVM computes by the C library's ``exp2``: its result
    differs from ``pow``'s in the last bit for about one argument in a thousand. Infinity where
    Python raises."""
    try:
        if x == 2.0 and _C_EXP2 is not None:
            return _C_EXP2(y)
        return math.pow(x, y)
    except OverflowError:
        return math.inf


_NUMBA_MATH = types.SimpleNamespace(**{k: v for k, v in vars(math).items() if not k.startswith("_")})
"""``math`` as numba compiles it: NaN or an infinity where Python's ``math`` raises."""
_NUMBA_MATH.log = _log
_NUMBA_MATH.log1p = _log1p
_NUMBA_MATH.exp = _exp
_NUMBA_MATH.sqrt = _sqrt
_NUMBA_MATH.pow = _pow
_NUMBA_MATH.floor = lambda x: _numba_int(math.floor(x)) if x == x and abs(x) < math.inf else _numba_int(x)
_NUMBA_MATH.ceil = lambda x: _numba_int(math.ceil(x)) if x == x and abs(x) < math.inf else _numba_int(x)

_NAMESPACES: dict[str, dict] = {}


def _namespace(module_name: str) -> dict:
    """The globals the interpreted kernels of module ``module_name`` run with: the module's own,
    with every kernel (or its dispatcher) replaced by its interpreted function and ``math`` by
    :data:`_NUMBA_MATH`."""
    namespace = _NAMESPACES.get(module_name)
    if namespace is None:
        namespace = dict(vars(sys.modules[module_name]))
        _NAMESPACES[module_name] = namespace  # before the kernels: modules that import each other
        namespace["math"] = _NUMBA_MATH
        for name, value in list(namespace.items()):
            kernel = _kernel_behind(value)
            if kernel is not None:
                namespace[name] = _function_in(kernel, _namespace(kernel.py_func.__module__))
    return namespace


def _function_in(kernel: Kernel, namespace: dict):
    function = kernel.__dict__.get("_interpreted")
    if function is None:
        source = kernel.py_func
        function = types.FunctionType(
            source.__code__, namespace, source.__name__, source.__defaults__, source.__closure__
        )
        kernel.__dict__["_interpreted"] = function
    return function


def interpreted(kernel):
    """The interpreted function of ``kernel`` (a :class:`Kernel` or its dispatcher)."""
    kernel = _kernel_behind(kernel)
    function = kernel.__dict__.get("_interpreted")
    if function is None:
        with INTERPRETER_LOCK:
            function = _function_in(kernel, _namespace(kernel.py_func.__module__))
    return function


def __getattr__(name: str):
    if name == "NO_REFCOUNT_OPTIONS":  # numba's options for ``jit_noalloc`` (imports numba)
        return _numba_options({_NO_ALLOC: True})
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
