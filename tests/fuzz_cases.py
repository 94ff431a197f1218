"""Strategies and checks shared by the fuzz suites (``tests/test_fuzz_*.py``).

A fuzz test feeds a public entry point generated input, good and bad, and asserts the contract
of every entry point: the call either succeeds with well-formed output (finite probabilities in
[0, 1], finite LLRs), or raises ``ValueError`` / ``TypeError`` whose message names the argument,
with the object's state byte-identical to before the call. Nothing else may escape.
"""

from __future__ import annotations

import math
import numbers
import os
import pickle
from decimal import Decimal
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

#: Multiplies every fuzz test's number of examples: ``STREAMCAL_FUZZ_SCALE=20`` for a long hunt
#: (the default keeps the suite fast; the examples are derandomized, so every run draws the same).
FUZZ_SCALE = int(os.environ.get("STREAMCAL_FUZZ_SCALE", "1"))

BIG_INT = 10**400  # a Python int beyond the float64 range

# Plain numbers at the edges of float64, and a few ordinary ones.
EDGE_FLOATS = [
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    1.0,
    0.5,
    -1.0,
    1e308,
    -1e308,
    5e-324,
    -5e-324,
    1e-300,
    2.0**53 + 1,
    1.0 - 2.0**-53,
    1.0 + 2.0**-52,
    0.999999999,
    1e-7,
    3.5,
    -7.25,
]

NUMPY_SCALAR_TYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.longdouble,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
]


@st.composite
def numpy_scalars(draw):
    """A NumPy scalar of one of many dtypes (values that do not fit wrap or become inf)."""
    kind = draw(st.sampled_from(NUMPY_SCALAR_TYPES))
    value = draw(st.sampled_from([0, 1, -1, 0.5, 2.5, 300, 1e5, -1e40, math.nan, math.inf]))
    with np.errstate(all="ignore"):
        try:
            return kind(value)
        except (OverflowError, ValueError):
            return kind(0)


# Scalars that are not real numbers, or are numbers of the wrong kind.
NOT_REAL = [
    "0.5",
    "nan",
    "1",
    "",
    b"0.5",
    None,
    True,
    False,
    np.True_,
    np.False_,
    complex(0.5, 0.0),
    complex(0.5, 1.0),
    np.complex64(0.5),
    Decimal("0.5"),
    Decimal("NaN"),
    np.datetime64("2024-01-01"),
    np.timedelta64(3, "s"),
    [0.5],
    (0.5,),
    {0.5},
    {"s": 0.5},
    object(),
    np.array([0.5, 0.25]),
]


def scalars(probability_heavy: bool = False):
    """One value where a number is expected: real numbers of every kind, edge values, and
    values that are not real numbers at all."""
    good = st.floats(0.0, 1.0) if probability_heavy else st.floats(-1e6, 1e6)
    return st.one_of(
        good,
        st.sampled_from(EDGE_FLOATS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(width=32),
        st.integers(-3, 3),
        st.sampled_from([BIG_INT, -BIG_INT, 2**63, -(2**63) - 1, 2**64]),
        st.fractions(min_value=Fraction(-3), max_value=Fraction(3), max_denominator=50),
        numpy_scalars(),
        st.sampled_from(NOT_REAL),
    )


def labels():
    """One value where a binary label is expected."""
    return st.one_of(
        st.booleans(),
        st.sampled_from([0, 1, 0.0, 1.0, np.True_, np.int8(1), np.float32(0.0), Fraction(1)]),
        st.sampled_from([2, -1, 0.5, math.nan, math.inf, "1", "True", None, b"1", 1 + 0j, Decimal(1), [1]]),
    )


def weights():
    """One value where a sample weight is expected."""
    return st.one_of(
        st.floats(0.0, 10.0),
        st.sampled_from([0.0, 1.0, 1e-300, 5e-324, 1e6, 2]),
        st.sampled_from([-1.0, -0.0, math.nan, math.inf, -math.inf, BIG_INT, True, "1", None, 1j, Decimal(1)]),
    )


def arrays(elements, *, min_size: int = 0, max_size: int = 6):
    """An array-like argument: a list of ``elements``, or a NumPy array, or a malformed one."""
    lists = st.lists(elements, min_size=min_size, max_size=max_size)

    def as_ndarray(values):
        try:
            return np.asarray(values)
        except (TypeError, ValueError, OverflowError):
            return values

    return st.one_of(
        lists,
        lists.map(tuple),
        lists.map(as_ndarray),
        st.builds(
            lambda n, dtype: np.zeros(n, dtype=dtype),
            st.integers(0, 4),
            st.sampled_from(["f8", "f4", "f2", "i8", "u1", "?", "c16", "U3", "O", "M8[s]", "m8[s]"]),
        ),
        st.sampled_from(
            [
                np.zeros((2, 2)),
                np.zeros((3, 1)),
                np.zeros((0, 3)),
                np.array(0.5),
                np.array([]),
                [[0.5, 0.25], [0.1]],
                [[0.5], [0.25]],
                "0.5, 0.25",
                b"\x00",
                None,
                0.5,
                {"a": 0.5},
                {0.5, 0.25},
                iter([0.5, 0.25]),
                np.array([0.5, 0.25])[::2],
                np.ma.masked_array([0.5, 0.7], mask=[False, True]),
            ]
        ),
    )


# --- an independent oracle: inputs that must be rejected ------------------------------------------


def leaves(x):
    """The scalars an array-like argument holds (a non-sequence is its own leaf)."""
    if isinstance(x, np.ma.MaskedArray):
        yield x  # masked arrays are refused as a whole
    elif isinstance(x, np.ndarray):
        if x.dtype.kind == "O":
            for v in x.reshape(-1):
                yield from leaves(v)
        else:
            values = x.tolist()  # Python scalars: str, bool, complex, datetime stay themselves
            yield from leaves(values) if isinstance(values, list) else [values]
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from leaves(v)
    else:
        yield x


def _real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_, np.timedelta64))


def _as_float(v) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def bad_numbers(x, *, low: float = -math.inf, high: float = math.inf, allow_inf: bool = False, allow_bool: bool = False) -> bool:
    """Whether ``x`` holds something other than real numbers in ``[low, high]`` (finite unless
    ``allow_inf``; no NaN; bools only with ``allow_bool``)."""
    for v in leaves(x):
        if allow_bool and isinstance(v, (bool, np.bool_)):
            continue
        if not _real(v):
            return True
        f = _as_float(v)
        if math.isnan(f) or (math.isinf(f) and not allow_inf) or not (low <= f <= high):
            return True
    return False


def bad_number(v, **kwargs) -> bool:
    """:func:`bad_numbers` for one value where a scalar is expected (any container is bad)."""
    return isinstance(v, (list, tuple, set, dict, np.ndarray)) or bad_numbers(v, **kwargs)


def non_real(x) -> bool:
    """Whether ``x`` holds anything that is not a real number (NaN and ±inf count as real)."""
    return any(not _real(v) for v in leaves(x))


def bad_labels(x) -> bool:
    """Whether ``x`` holds something other than binary labels (bools, or real numbers 0 / 1)."""
    for v in leaves(x):
        if isinstance(v, (bool, np.bool_)):
            continue
        if not _real(v) or v not in (0, 1):
            return True
    return False


def snapshot(obj) -> bytes:
    """The object's full state as bytes: equal before and after a call iff the call changed nothing."""
    return pickle.dumps(obj, protocol=5)


def names_argument(exc: BaseException, names) -> bool:
    """Whether the error message names one of the arguments (in backquotes, as every message does)."""
    text = str(exc)
    return any(f"`{name}" in text for name in names)


def call(obj, fn, names, *, ok=(ValueError, TypeError)):
    """Run ``fn()`` against the contract. Returns ``(result, None)`` or ``(None, error)``.

    A rejected call must raise one of ``ok`` naming one of ``names`` and leave ``obj`` (one
    object or a tuple of objects) exactly as it was.
    """
    objs = obj if isinstance(obj, tuple) else (obj,)
    before = [snapshot(o) for o in objs]
    error = None
    try:
        result = fn()
    except ok as exc:
        error = exc
    if error is None:
        return result, None
    assert names_argument(error, names), f"the error does not name any of {names}: {error!r}"
    for o, b in zip(objs, before, strict=True):
        assert snapshot(o) == b, f"a rejected call changed the state: {error!r}"
    return None, error


def assert_probabilities(p) -> None:
    arr = np.asarray(p, dtype=np.float64)
    assert np.isfinite(arr).all(), arr
    assert ((arr >= 0.0) & (arr <= 1.0)).all(), arr


def assert_finite(x) -> None:
    arr = np.asarray(x, dtype=np.float64)
    assert np.isfinite(arr).all(), arr
