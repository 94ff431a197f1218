"""Checks of a learner's state as a state file restores it (used by :mod:`streamcal.persist`).

A state file describes a learner as its attributes; :func:`streamcal.persist.load` recreates the
object without running its constructor, so nothing guarantees that the attributes agree with each
other. The compiled kernels trust that they do (array sizes, indices, counts): a learner whose
arrays disagree could make them read or write out of bounds. So every streamcal class checks the
state it was given before anything runs on it, and raises :class:`StateFileError` naming the
attribute, what was expected and what was found:

- classes with ``__setstate__`` (the streaming calibrators) call their ``_check_loaded_state``
  there, before any kernel runs (pickle and ``copy`` get the same checks);
- other classes that hold more than their parameters define ``_check_loaded_state`` too (the
  bucket and window strategies, the metrics, the batch isotonic calibrator), which
  :func:`check_loaded` runs once the attributes are set; this module knows none of the classes:
  it is the floor of the import graph, holding only the helpers the checks are written with;
- any other streamcal class following river's conventions (a ``river.base.Base``, whose constructor
  only stores and checks its parameters) gets :func:`check_like_fresh`: its parameters must build an
  object whose attributes the loaded ones match in name and type. Other streamcal classes (the
  replay machinery, file writers...) are refused: a state file cannot hold them.

The helpers below raise with messages such as "`_si` ring count: expected an int in [0, 300];
found 1000000000".
"""

from __future__ import annotations

import math

import numpy as np

from streamcal.exceptions import StateFileError

__all__ = [
    "check_like_fresh",
    "check_loaded",
    "fail",
    "need_array",
    "need_bool",
    "need_float",
    "need_int",
    "need_keys",
    "need_params",
]


def fail(msg: str):
    """Raise :class:`StateFileError` with ``msg``."""
    raise StateFileError(msg)


def brief(value) -> str:
    """A short description of a value for a message."""
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def need_keys(obj, expected, *, optional=()) -> None:
    """The object's attributes are exactly ``expected`` (plus any of ``optional``)."""
    have = set(vars(obj))
    expected = set(expected)
    missing = sorted(expected - have)
    # what is never saved (a lock, streamcal._locking) may be there, made anew by the restore
    extra = sorted(have - expected - set(optional) - set(getattr(obj, "_UNSAVED", ())))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        fail(f"the attributes do not match a {type(obj).__name__}: {'; '.join(parts)}.")


def need_bool(value, name: str) -> bool:
    if type(value) is not bool:
        fail(f"`{name}`: expected a bool; found {brief(value)}.")
    return value


def need_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """An int (not a bool) in ``[low, high]``."""
    if type(value) is not int or (low is not None and value < low) or (high is not None and value > high):
        interval = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        fail(f"`{name}`: expected an int in {interval}; found {brief(value)}.")
    return value


def need_float(value, name: str, low: float | None = None, high: float | None = None, *, finite: bool = True):
    """A float, finite (unless ``finite=False``) and in ``[low, high]``."""
    ok = type(value) is float and not math.isnan(value)
    if ok and finite:
        ok = math.isfinite(value)
    if ok and low is not None:
        ok = value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        what = "a finite float" if finite else "a float"
        bounds = "" if low is None and high is None else f" in [{low}, {high}]"
        fail(f"`{name}`: expected {what}{bounds}; found {brief(value)}.")
    return value


def need_array(value, name: str, dtype, *, ndim: int = 1, size: int | None = None, shape=None) -> np.ndarray:
    """A C-contiguous, writeable numpy array of exactly ``dtype`` (native byte order)."""
    dtype = np.dtype(dtype)
    if not (
        type(value) is np.ndarray
        and value.dtype == dtype
        and value.dtype.isnative
        and value.ndim == ndim
        and value.flags.c_contiguous
        and value.flags.writeable
        and value.flags.aligned
    ):
        fail(f"`{name}`: expected a C-contiguous {ndim}-d {dtype} array; found {brief(value)}.")
    if size is not None and value.size != size:
        fail(f"`{name}`: expected {size} values; found {value.size}.")
    if shape is not None and value.shape != tuple(shape):
        fail(f"`{name}`: expected shape {tuple(shape)}; found {value.shape}.")
    return value


def need_finite(a: np.ndarray, name: str, *, low: float | None = None, high: float | None = None) -> None:
    """Every value finite and in ``[low, high]``; the first bad position is named."""
    bad = ~np.isfinite(a)
    if low is not None:
        bad |= a < low
    if high is not None:
        bad |= a > high
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        bounds = "" if low is None and high is None else f" in [{low}, {high}]"
        fail(f"`{name}`: expected finite values{bounds}; found {a.reshape(-1)[i]!r} at position {i}.")


def need_increasing(a: np.ndarray, name: str, *, strict: bool = True) -> None:
    steps = np.diff(a)
    bad = ~(steps > 0) if strict else ~(steps >= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0]) + 1
        fail(
            f"`{name}`: expected {'strictly ' if strict else ''}increasing values; found {a[i]!r} at "
            f"position {i} after {a[i - 1]!r}."
        )


def need_params(obj, check) -> None:
    """Run a parameter check (a callable raising ``ValueError``/``TypeError``) as a state check."""
    try:
        check()
    except (TypeError, ValueError, OverflowError) as exc:
        fail(f"invalid parameters for {type(obj).__name__}: {exc}")


def same_float(a: float, b: float) -> bool:
    """Equal as float64 bits (NaN equal to NaN)."""
    return np.float64(a).tobytes() == np.float64(b).tobytes()


def close_to(loaded: np.ndarray, computed: np.ndarray, name: str, what: str) -> None:
    """``loaded`` equals ``computed`` to rounding (a value computed by numpy may differ in its last bits
    between machines)."""
    if loaded.shape != computed.shape or not np.allclose(loaded, computed, rtol=1e-12, atol=0.0):
        fail(f"`{name}` does not match {what}.")


# ---------------------------------------------------------------------------------------- dispatch
def check_loaded(obj) -> None:
    """Check a streamcal object whose attributes a state file has just set (no ``__setstate__``)."""
    method = getattr(type(obj), "_check_loaded_state", None)
    if method is not None:  # each class checks its own state; this module knows none of them
        method(obj)
        return
    from river import base

    if not isinstance(obj, base.Base):  # only river-style classes build without side effects
        fail(f"a state file cannot hold a {type(obj).__module__}.{type(obj).__qualname__}.")
    check_like_fresh(obj)


def _init_params(obj) -> dict:
    from streamcal._params import init_param_names

    state = vars(obj)
    return {k: state[k] for k in init_param_names(type(obj)) if k in state}


def check_like_fresh(obj, *, learned=(), unbounded=()) -> object:
    """The object's parameters build a fresh object (its constructor validates them), and every
    attribute of that fresh object is there with a value of the same type (arrays: the same dtype
    and number of dimensions; ``None`` in the fresh object: anything). Attributes in ``learned``
    may be missing (set by learning); the floats named in ``unbounded`` may be infinite where the
    fresh object's are finite (the class bounds them itself). Returns the fresh object."""
    cls = type(obj)
    params = _init_params(obj)
    try:
        fresh = cls(**params)
    except (TypeError, ValueError, OverflowError) as exc:
        fail(f"invalid parameters for {cls.__name__}: {exc}")
    state = vars(obj)
    missing = sorted(set(vars(fresh)) - set(state) - set(learned))
    if missing:
        fail(f"the attributes do not match a {cls.__name__}: missing {missing}.")
    for name, want in vars(fresh).items():
        if name in params or name not in state or want is None:
            continue
        _need_like(state[name], want, name, name in unbounded)
    return fresh


def _need_like(value, want, name: str, infinite: bool = False) -> None:
    """``value`` has the type of ``want``; fixed-size lists of scalars keep their length and types;
    a float is finite where ``want`` is, unless ``infinite``."""
    if isinstance(want, np.ndarray):
        if not (type(value) is np.ndarray and value.dtype == want.dtype and value.ndim == want.ndim):
            fail(f"`{name}`: expected a {want.ndim}-d {want.dtype} array; found {brief(value)}.")
        return
    if type(value) is not type(want):
        fail(f"`{name}`: expected a {type(want).__name__}; found {brief(value)}.")
    if type(want) is list and want:
        if len(value) != len(want):
            fail(f"`{name}`: expected {len(want)} values; found {len(value)}.")
        for i, (v, w) in enumerate(zip(value, want, strict=True)):
            _need_like(v, w, f"{name}[{i}]")
    if type(want) is float and not math.isfinite(value) and math.isfinite(want) and not (infinite and value == value):
        fail(f"`{name}`: expected a finite float; found {value!r}.")
