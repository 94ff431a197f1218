"""Input checks shared by every public entry point.

Each function validates *before* anything is mutated and returns a fresh contiguous array
(never a view of the caller's data, so kernels may work in place on the result), except
``as_1d_float(..., copy=False)``, for callers that only read it, and :func:`as_1d_array`, the one
function that recognises the input forms (lists, ``(n, 1)`` arrays, pandas / polars / pyarrow
columns) and that every array conversion here goes through. Error messages name the argument,
the offending value and its position, in the style "`scores` must be finite; got nan at
position 3."
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "as_1d_array",
    "as_1d_float",
    "as_binary_labels",
    "as_event_float",
    "as_finite",
    "as_nonneg_weights",
    "as_probabilities",
    "as_real_array",
    "bad_score_message",
    "call_repr",
    "check_event_time",
    "check_event_weight",
    "check_learn_arrays",
    "check_refit_every",
    "check_same_length",
    "check_scalar",
    "fmt",
    "is_real_number",
    "keywords_named",
    "score_from_dict",
]


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def fmt(value) -> str:
    """``repr`` of a value as a user wrote it: numpy scalars shown as Python ones (``nan``, ``2``)."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def shown(value, source) -> str:
    """:func:`fmt` of an element of ``source``, or "a missing value (null / NA)" for a NaN that came
    from a column with ``to_numpy`` (pandas, polars, pyarrow), which turns its nulls into NaN."""
    column = not isinstance(source, np.ndarray) and callable(getattr(source, "to_numpy", None))
    if column and isinstance(value, (float, np.floating)) and value != value:
        return "a missing value (null / NA)"
    return fmt(value)


# the dtype of a 1-d float64 array that the array faces read without any conversion
_F8 = np.dtype(np.float64)


def as_1d_array(x, name: str, given=None) -> np.ndarray:
    """``x`` as a 1-d numpy array of its own dtype (no dtype conversion), or raise naming ``name``.

    The one place where the input forms of every array argument are recognised: a 1-d array, a
    list or tuple, a scalar (one element), an ``(n, 1)`` array (one column), a pandas or polars
    ``Series``, a one-column pandas or polars ``DataFrame`` (detected by their ``to_numpy``
    method, without importing either library; pyarrow arrays and tables too), or anything
    ``numpy.asarray`` takes. A multi-column array or frame is an error naming its shape; so is
    a masked array with masked values, and a ``str`` or ``bytes`` (not an array of numbers).

    Examples
    --------
    >>> import numpy as np
    >>> as_1d_array([[0.2], [0.7]], "scores").tolist()
    [0.2, 0.7]
    >>> as_1d_array(np.zeros((2, 3)), "scores")
    Traceback (most recent call last):
    ...
    ValueError: `scores` must be 1-d or a single column; got an array of shape (2, 3).
    """
    if type(x) is np.ndarray and x.ndim == 1:
        return x
    if isinstance(x, (str, bytes)):
        msg = f"`{name}` must be a 1-d array of numbers; got a {type(x).__name__}."
        raise TypeError(msg)
    if isinstance(x, np.ma.MaskedArray) and np.ma.is_masked(x):
        msg = f"`{name}` is a masked array with masked values; fill them (or drop them) first."
        raise ValueError(msg)
    kind = type(x if given is None else given).__name__  # ``given``: what the caller passed, for messages
    to_numpy = None if isinstance(x, np.ndarray) else getattr(x, "to_numpy", None)
    try:
        if callable(to_numpy):  # pandas / polars Series and DataFrames, pyarrow arrays and tables
            try:
                arr = np.asarray(to_numpy())
            except (TypeError, ValueError):  # pyarrow refuses a copy by default (nulls): numpy's way
                arr = np.asarray(x)
        else:
            arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        msg = f"`{name}` must be a 1-d array of numbers; could not convert it: {exc}"
        raise TypeError(msg) from None
    if arr.ndim == 1:
        return arr
    if arr.ndim == 0:
        return arr.reshape(1)
    if arr.ndim == 2 and arr.shape[1] == 1:
        return arr.reshape(-1)
    what = "an array" if kind in ("ndarray", "MaskedArray") else f"a {kind}"
    msg = f"`{name}` must be 1-d or a single column; got {what} of shape {arr.shape}."
    raise ValueError(msg)


def is_real_number(value) -> bool:
    """Whether ``value`` is one real number as the checks accept it: a Python or NumPy int or
    float, or any other :class:`numbers.Real` (``Fraction``), but not a bool (nor a NumPy
    ``timedelta64``, which NumPy registers as an integer)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_, np.timedelta64))


def _element_types(x, depth: int = 0) -> set:
    """The types of the leaves of nested lists / tuples (``x`` itself when it is neither)."""
    if not isinstance(x, (list, tuple)) or depth > 32:
        return {type(x)}
    types = set(map(type, x))
    if list in types or tuple in types:
        types -= {list, tuple}
        for item in x:
            if isinstance(item, (list, tuple)):
                types |= _element_types(item, depth + 1)
    return types


def as_real_array(x, name: str, *, allow_bool: bool = False, what: str = "an array of numbers") -> np.ndarray:
    """``x`` as an array (any shape; not converted to float, not copied if it is one) whose
    elements are all real numbers, or raise a TypeError naming ``name``.

    Accepted: integer and floating dtypes, and sequences / object arrays of
    :func:`is_real_number` values. Rejected, where ``np.array(x, dtype=float)`` would convert
    them silently or fail obscurely: strings (``"0.5"``), bytes, ``None``, ``Decimal``, complex
    numbers, datetimes, bools (unless ``allow_bool``: then as 0 / 1), and anything else.
    """
    if isinstance(x, (str, bytes)):
        msg = f"`{name}` must be {what}; got a {type(x).__name__}."
        raise TypeError(msg)
    kinds = "iufb" if allow_bool else "iuf"
    if isinstance(x, np.ma.MaskedArray):
        msg = f"`{name}` must be {what}; got a masked array (fill or drop its masked values first)."
        raise TypeError(msg)
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError, OverflowError) as exc:
            msg = f"`{name}` must be {what}; could not convert it: {exc}"
            raise TypeError(msg) from None
        if arr.dtype.kind in "iuf" and not allow_bool and isinstance(x, (list, tuple)):
            # numpy turns [0.5, True] into floats: a bool is only seen among the elements
            types = _element_types(x)
            if bool in types or np.bool_ in types:
                arr = np.asarray(x, dtype=object)
    if arr.dtype.kind in kinds:
        return arr
    if arr.dtype.kind == "O":
        flat = arr.reshape(-1)
        for i, value in enumerate(flat):
            if not (is_real_number(value) or (allow_bool and isinstance(value, (bool, np.bool_)))):
                msg = (
                    f"`{name}` must hold real numbers only; got {fmt(value)} of type "
                    f"{type(value).__name__}{_where(i, arr.shape)}."
                )
                raise TypeError(msg)
        return arr
    kind = {"b": "bools", "c": "complex numbers", "U": "strings", "S": "bytes", "M": "datetimes", "m": "timedeltas"}
    got = kind.get(arr.dtype.kind, f"values of dtype {arr.dtype}")
    msg = f"`{name}` must hold real numbers only; got {got} (dtype {arr.dtype})."
    if arr.dtype.kind in "US" and arr.size:  # the first element, as for object arrays
        msg = msg[:-1] + f", such as {fmt(arr.reshape(-1)[0].item())}{_where(0, arr.shape)}."
    if arr.dtype.kind == "b":
        msg += " Convert them with .astype(float) if they are meant as 0 / 1."
    raise TypeError(msg)


def _where(i: int, shape: tuple) -> str:
    """`` at position i`` of a flat index (``at index (r, c)`` in a 2-d array, nothing for 0-d)."""
    if len(shape) == 0:
        return ""
    if len(shape) == 1:
        return f" at position {i}"
    return f" at index {tuple(int(k) for k in np.unravel_index(i, shape))}"


def _to_float64(arr: np.ndarray, name: str, *, copy: bool) -> np.ndarray:
    """A checked real array (:func:`as_real_array`) as C-contiguous float64."""
    try:
        if copy:
            return np.array(arr, dtype=np.float64, copy=True, order="C")
        return np.asarray(arr, dtype=np.float64, order="C")  # numpy 1.x has no ``copy=None``
    except OverflowError:  # Python ints (or Fractions) beyond the float64 range
        flat = arr.reshape(-1)
        for i, value in enumerate(flat):
            try:
                float(value)
            except OverflowError:
                msg = f"`{name}` must hold numbers within the float64 range; got {fmt(value)}{_where(i, arr.shape)}."
                raise ValueError(msg) from None
        raise


def as_1d_float(x, name: str, *, allow_empty: bool = False, copy: bool = True) -> np.ndarray:
    """Return ``x`` as a new contiguous 1-d float64 array, or raise naming ``name``.

    Takes every form :func:`as_1d_array` recognises, holding real numbers (:func:`as_real_array`:
    floats and integers of any width, or objects that are real numbers; complex numbers,
    datetimes, time differences, strings, bytes, ``Decimal`` and bools are rejected with a
    ``TypeError`` naming ``name``).

    ``copy=False``: for a caller that only reads the result, ``x`` itself when it already is
    such an array and writeable (numba compiles separately for read-only arrays); this case
    costs a few type checks and makes no copy.
    """
    if (
        type(x) is np.ndarray
        and x.dtype is _F8
        and x.ndim == 1
        and x.flags.c_contiguous
        and x.flags.writeable
        and (x.size or allow_empty)
    ):
        return x.copy() if copy else x
    arr = as_1d_array(as_real_array(x, name, what="a 1-d array of numbers"), name, given=x)
    arr = _to_float64(arr, name, copy=copy)
    if not arr.flags.writeable:
        arr = arr.copy()
    if arr.size == 0 and not allow_empty:
        msg = f"`{name}` must not be empty."
        raise ValueError(msg)
    return arr


def as_finite(x, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """Return ``x`` as a new float64 array whose values are all finite."""
    arr = as_1d_float(x, name, allow_empty=allow_empty)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = _first_bad(bad)
        msg = f"`{name}` must be finite; got {shown(arr[i], x)} at position {i}."
        raise ValueError(msg)
    return arr


def as_probabilities(x, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """Return ``x`` as a new float64 array of values in [0, 1]."""
    arr = as_1d_float(x, name, allow_empty=allow_empty)
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # also catches NaN
    if bad.any():
        i = _first_bad(bad)
        msg = f"`{name}` must hold probabilities in [0, 1]; got {shown(arr[i], x)} at position {i}."
        raise ValueError(msg)
    return arr


def as_binary_labels(y, name: str = "labels", *, allow_empty: bool = False) -> np.ndarray:
    """Return labels as a new float64 array of 0.0 / 1.0.

    Accepts bools, the integers 0 and 1, and floats equal to 0 or 1. Anything else (2, -1, 0.5,
    NaN, strings) is rejected with its position.
    """
    if isinstance(y, (str, bytes)):
        msg = f"`{name}` must be a 1-d array of binary labels; got a {type(y).__name__}."
        raise TypeError(msg)
    raw = as_1d_array(y, name)
    if raw.size == 0 and not allow_empty:
        msg = f"`{name}` must not be empty."
        raise ValueError(msg)
    if raw.dtype == np.bool_:
        return raw.astype(np.float64)
    if raw.dtype.kind not in "iuf":
        # keep each element as the caller gave it (a list's 1 stays 1, not the string '1')
        raw = as_1d_array(np.asarray(y, dtype=object), name) if isinstance(y, (list, tuple)) else raw.astype(object)
        for i, value in enumerate(raw):
            if not _is_binary_scalar(value):
                msg = f"`{name}` must hold binary labels (0/1 or False/True); got {fmt(value)} at position {i}."
                raise ValueError(msg)
        return np.array([float(v) for v in raw], dtype=np.float64)
    arr = raw.astype(np.float64)
    bad = ~((arr == 0.0) | (arr == 1.0))
    if bad.any():
        i = _first_bad(bad)
        msg = f"`{name}` must hold binary labels (0/1 or False/True); got {shown(raw[i], y)} at position {i}."
        raise ValueError(msg)
    return arr


def _is_binary_scalar(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    if is_real_number(value):
        return value in (0, 1)
    return False


def _is_finite_real(value) -> bool:
    """Whether a real number is finite and within the float64 range."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def as_binary_label(y, name: str = "y") -> bool:
    """Validate one label for a river ``learn_one``; return it as a Python bool."""
    if not _is_binary_scalar(y):
        msg = f"`{name}` must be a binary label (0/1 or False/True); got {y!r}."
        raise ValueError(msg)
    return bool(y)


def as_nonneg_weights(w, name: str, n: int) -> np.ndarray:
    """Return sample weights as a new float64 array of ``n`` finite, non-negative values.

    ``None`` means unit weights.
    """
    if w is None:
        return np.ones(n, dtype=np.float64)
    arr = as_1d_float(w, name, allow_empty=True)
    check_same_length(n, arr.size, name)
    bad = ~(np.isfinite(arr) & (arr >= 0.0))
    if bad.any():
        i = _first_bad(bad)
        msg = f"`{name}` must be finite and non-negative; got {shown(arr[i], w)} at position {i}."
        raise ValueError(msg)
    return arr


def check_learn_arrays(
    n: int,
    labels,
    weights,
    times,
    learn: np.ndarray | None,
    *,
    max_weight: float,
    needs_times: bool,
    last_time: float,
    window_name: str,
    weights_name: str = "weights",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The array face's labels, weights and times, checked at the learn positions (``learn``, a
    bool mask, or None: every position) for ``n`` scores; full-length float64 arrays, zero where
    nothing is learned.

    Labels are binary; weights finite, non-negative and at most ``max_weight`` (default 1);
    times finite, and for a window that ``needs_times`` present, in order and not before
    ``last_time`` (``window_name`` names the window in the error).
    """
    if learn is None:
        y = as_binary_labels(labels, "labels", allow_empty=True)
        check_same_length(n, y.size, "labels")
        idx = None
    else:
        raw = as_1d_array(labels, "labels")
        check_same_length(n, raw.size, "labels")
        idx = np.flatnonzero(learn)
        y = np.zeros(n, dtype=np.float64)
        try:
            y[idx] = as_binary_labels(raw[idx], "labels", allow_empty=True)
        except ValueError:
            for i in idx:
                if not _is_binary(raw[i]):
                    got = shown(_plain(raw[i]), labels)
                    msg = f"`labels` must hold binary labels (0/1 or False/True); got {got} at position {i}."
                    raise ValueError(msg) from None
            raise
    if weights is None:
        w = np.ones(n, dtype=np.float64)
    else:
        w = as_1d_float(weights, weights_name, allow_empty=True)
        check_same_length(n, w.size, weights_name)
        bad = ~(np.isfinite(w) & (w >= 0.0))
        if idx is not None:
            bad &= learn
            w[~learn] = 0.0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            got = shown(float(w[i]), weights)
            msg = f"`{weights_name}` must be finite and non-negative; got {got} at position {i}."
            raise ValueError(msg)
        big = w > max_weight  # zero where nothing is learned
        if big.any():
            i = int(np.flatnonzero(big)[0])
            msg = (
                f"`{weights_name}` must be at most {max_weight:g} (the largest weight of one event); "
                f"got {float(w[i])!r} at position {i}."
            )
            raise ValueError(msg)
    if times is None:
        if needs_times and n and (idx is None or idx.size):
            msg = f"{window_name} needs event times: pass `times=`."
            raise ValueError(msg)
        t = np.zeros(n, dtype=np.float64)
    else:
        t = as_1d_float(times, "times", allow_empty=True)
        check_same_length(n, t.size, "times")
        pos = np.arange(n) if idx is None else idx
        tl = t[pos]
        bad = ~np.isfinite(tl)
        if bad.any():
            i = int(pos[np.flatnonzero(bad)[0]])
            msg = f"`times` must be finite; got {shown(float(t[i]), times)} at position {i}."
            raise ValueError(msg)
        if needs_times and tl.size:
            last = last_time
            if tl[0] < last:
                i = int(pos[0])
                msg = (
                    f"`times` must not go backwards; got {float(t[i])!r} at position {i} "
                    f"after the last learned time {last!r}."
                )
                raise ValueError(msg)
            back = tl[1:] < tl[:-1]
            if back.any():
                k = int(np.flatnonzero(back)[0]) + 1
                i, j = int(pos[k]), int(pos[k - 1])
                msg = (
                    f"`times` must not go backwards; got {float(t[i])!r} at position {i} "
                    f"after {float(t[j])!r} at position {j}."
                )
                raise ValueError(msg)
        if idx is not None:
            t[~learn] = 0.0
    return y, w, t


def _is_binary(value) -> bool:
    try:
        as_binary_label(value)
    except ValueError:
        return False
    return True


def _plain(value):
    """A NumPy scalar as the Python scalar it holds (for readable error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def check_refit_every(value) -> None:
    """``refit_every`` of a refitted calibrator: None (refit lazily) or an int >= 1."""
    if value is not None:
        check_scalar(value, "refit_every", numbers.Integral, low=1)


def check_same_length(expected: int, got: int, name: str) -> None:
    """Raise if ``name`` does not have ``expected`` elements."""
    if expected != got:
        msg = f"`{name}` must have the same length as the scores ({expected}); got {got}."
        raise ValueError(msg)


def _is_choice(value, choice) -> bool:
    """``value == choice`` of the same kind: ``1`` and ``1.0`` are not the choice ``True``."""
    if isinstance(choice, (bool, np.bool_)):
        same_kind = isinstance(value, (bool, np.bool_))
    else:
        same_kind = isinstance(value, type(choice)) and not isinstance(value, (bool, np.bool_))
    try:
        return same_kind and bool(value == choice)
    except (TypeError, ValueError):
        return False


def check_scalar(
    value,
    name: str,
    kind: type | tuple[type, ...] = numbers.Real,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    choices: Sequence | None = None,
):
    """Validate a scalar parameter, scikit-learn style: "`n_bins` must be an int in [2, inf); got 1."."""
    if choices is not None:
        if not any(_is_choice(value, c) for c in choices):
            msg = f"`{name}` must be one of {list(choices)!r}; got {fmt(value)}."
            raise ValueError(msg)
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    is_bool = isinstance(value, (bool, np.bool_, np.timedelta64))
    if is_bool or not isinstance(value, kinds):
        kind_name = " or ".join(k.__name__ for k in kinds).replace("Real", "float").replace("Integral", "int")
        article = "an" if kind_name[0] in "aeiou" else "a"
        msg = f"`{name}` must be {article} {kind_name}; got {fmt(value)} of type {type(value).__name__}."
        raise TypeError(msg)
    if isinstance(value, numbers.Real) and not _is_finite_real(value):
        msg = f"`{name}` must be finite; got {fmt(value)}."
        raise ValueError(msg)
    v = float(value) if isinstance(value, np.floating) else value  # a float32 compared with a bound beyond its range
    too_low = low is not None and (v < low if low_inclusive else v <= low)
    too_high = high is not None and (v > high if high_inclusive else v >= high)
    if too_low or too_high:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        opening = "[" if low_inclusive and low is not None else "("
        closing = "]" if high_inclusive and high is not None else ")"
        interval = f"{opening}{lo}, {hi}{closing}"
        kind_name = "an int" if all(k is numbers.Integral or k is int for k in kinds) else "a number"
        msg = f"`{name}` must be {kind_name} in {interval}; got {fmt(value)}."
        raise ValueError(msg)
    return value


@functools.lru_cache(maxsize=256)
def _init_signature(cls: type) -> inspect.Signature:
    """The signature of ``cls.__init__`` (read once per class: ``inspect`` takes a fraction of a
    millisecond each time)."""
    return inspect.signature(cls.__init__)


def call_repr(obj) -> str:
    """``Class(first=..., other=...)``: a parameter object as the call that makes it.

    The first constructor parameter is always shown, the others where they differ from their
    default; a tuple of more than 8 values is shortened (``(0.0, 0.1, ...11 values..., 1.0)``).
    River's calibrator ``repr`` shows its parameters through this (via ``str``).

    Examples
    --------
    >>> from streamcal.windows import CountWindow
    >>> call_repr(CountWindow(100_000))
    'CountWindow(n=100000)'
    """
    parts = []
    for name, param in _init_signature(type(obj)).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        value = getattr(obj, name)
        if parts and param.default is not param.empty and _same(value, param.default):
            continue
        if isinstance(value, tuple) and len(value) > 8:
            shown = f"({value[0]!r}, {value[1]!r}, ...{len(value)} values..., {value[-1]!r})"
        else:
            shown = repr(value)
        parts.append(f"{name}={shown}")
    return f"{type(obj).__name__}({', '.join(parts)})"


def _same(value, default) -> bool:
    try:
        return type(value) is type(default) and bool(value == default)
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------------------------
# the river face: one event's score, weight and time (the checks behind each calibrator's fast path)


def as_event_float(value, name: str) -> float:
    """``float(value)`` of a real number; a ValueError naming ``name`` when it is beyond float64."""
    try:
        return float(value)
    except OverflowError:
        msg = f"`{name}` must be a number within the float64 range; got {value!r}."
        raise ValueError(msg) from None


def bad_score_message(
    s: float, name: str, where: str, low: float, high: float, bucket_kind: str, source=None
) -> str:
    """The error of a score outside ``[low, high]`` (``where``: " at position i" or ""; ``source``:
    the array the score came from, which names a null as one)."""
    if not math.isfinite(s):
        return f"`{name}` must be finite; got {shown(s, source)}{where}."
    if low == 0.0 and high == 1.0:
        return (
            f"`{name}` must hold probabilities in [0, 1] for {bucket_kind} buckets; got "
            f"{s!r}{where}. For other scores (logits, margins) use buckets='quantile:N' (edges from the first "
            "scores), 'uniform:N:LOW:HIGH' with their range, or Edges."
        )
    return f"`{name}` must lie in [{low}, {high}] for {bucket_kind} buckets; got {s!r}{where}."


def score_from_dict(x, score_key, low: float, high: float, bucket_kind: str) -> float:
    """The score held by a river ``x`` dict: the value under ``score_key``, or its one value when
    ``score_key`` is None; a real number within ``[low, high]`` (a finite range, so also no ±inf
    or NaN). Errors name the key."""
    if type(x) is not dict and not isinstance(x, dict):
        msg = f"`x` must be a dict holding the score; got a {type(x).__name__}."
        raise TypeError(msg)
    if score_key is None:
        if len(x) != 1:
            msg = (
                f"`x` must hold exactly one value, the score, when `score_key` is None; got "
                f"{len(x)} keys: {list(x)[:5]!r}. Pass score_key= to name the score."
            )
            raise ValueError(msg)
        key = next(iter(x))
    else:
        key = score_key
        if key not in x:
            msg = f"`x` has no score under score_key={key!r}; its keys are {list(x)[:5]!r}."
            raise KeyError(msg)
    s = x[key]
    name = f"x[{key!r}]"
    if type(s) is not float:
        if not is_real_number(s):
            msg = f"`{name}` must be a real number (the score); got {s!r} of type {type(s).__name__}."
            raise TypeError(msg)
        s = as_event_float(s, name)
    if not (low <= s <= high):
        raise ValueError(bad_score_message(s, name, "", low, high, bucket_kind))
    return s


def check_event_weight(w, max_weight: float) -> float:
    """One event's weight ``w``: a real number in ``[0, max_weight]``."""
    if not is_real_number(w):
        msg = f"`w` must be a finite non-negative number; got {w!r} of type {type(w).__name__}."
        raise TypeError(msg)
    w = as_event_float(w, "w")
    if not (0.0 <= w < math.inf):
        msg = f"`w` must be finite and non-negative; got {w!r}."
        raise ValueError(msg)
    if w > max_weight:
        msg = f"`w` must be at most {max_weight:g} (the largest weight of one event); got {w!r}."
        raise ValueError(msg)
    return w


def check_event_time(t, last_time: float | None) -> float:
    """One event's time ``t``: a finite real number, not before ``last_time`` (None: no order)."""
    if not is_real_number(t):
        msg = f"`t` must be a finite number; got {t!r} of type {type(t).__name__}."
        raise TypeError(msg)
    t = as_event_float(t, "t")
    if not math.isfinite(t):
        msg = f"`t` must be a finite number; got {t!r}."
        raise ValueError(msg)
    if last_time is not None and t < last_time:
        msg = f"`t` must not go backwards; got {t!r} after the last learned time {last_time!r}."
        raise ValueError(msg)
    return t


# The array methods whose keywords ``keywords_named`` checks, and the names users give the weights:
# the streaming faces take ``weights=``, ``fit`` takes ``sample_weight=`` (scikit-learn's name).
_ARRAY_METHODS = (
    "fit",
    "update",
    "prequential",
    "process",
    "prequential_interval",
    "prequential_with_interval",
    "process_with_interval",
)
_WEIGHTS_NAMES = ("weights", "sample_weight", "sample_weights", "weight", "w")


def keywords_named(cls: type) -> type:
    """Class decorator: the array methods defined in ``cls`` refuse an unknown keyword argument
    with a ``TypeError`` that names the class the caller used (not the base that defines the
    method) and, for a weights keyword under another name, the one the method takes. The check
    runs before the method, so a refused call changes nothing."""
    for name in _ARRAY_METHODS:
        method = cls.__dict__.get(name)
        if method is not None and not hasattr(method, "__wrapped__"):
            setattr(cls, name, _known_keywords(method))
    return cls


def _known_keywords(method):
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    known = frozenset(p.name for p in inspect.signature(method).parameters.values() if p.kind in kinds)
    weights = next((n for n in _WEIGHTS_NAMES if n in known), None)

    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        if kwargs and not known.issuperset(kwargs):
            unknown = next(k for k in kwargs if k not in known)
            hint = ""
            if weights is not None and unknown in _WEIGHTS_NAMES:
                hint = f"; it takes the weights as {weights}="
            raise TypeError(
                f"{type(self).__name__}.{method.__name__}() got an unexpected keyword argument {unknown!r}{hint}"
            )
        return method(self, *args, **kwargs)

    return checked
