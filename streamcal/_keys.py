"""Keys of a keyed stream (a campaign, a merchant, a country): checked and coded once per call.

A key column may be a numpy array, a list, a pyarrow Array or ChunkedArray, or a pandas or polars
Series. Its keys are all integers or all strings; a missing key (None, null, NaN), a float, a
bool or any other kind is refused with an error naming the position, so that no event is ever
filed under a key its sender did not mean.
"""

from __future__ import annotations

import bisect
import numbers

import numpy as np

from streamcal._validation import fmt
from streamcal.exceptions import InvalidKeyError

__all__ = ["KeyColumn", "KeyedRiverChecks", "as_key_column", "check_key_kind"]


class KeyColumn:
    """A checked key column: ``codes[i]`` is the position of event ``i``'s key in ``keys``.

    ``keys`` holds each distinct key once, as a Python ``int`` or ``str``, sorted.
    """

    __slots__ = ("codes", "keys")

    def __init__(self, codes: np.ndarray, keys: list):
        self.codes = codes
        self.keys = keys

    def __len__(self) -> int:
        return int(self.codes.size)

    def code(self, key) -> int:
        """The position of ``key`` in ``keys`` (-1: not in the column); ``key`` is of the column's
        kind (an int or a str, as its keys are)."""
        i = bisect.bisect_left(self.keys, key)
        return i if i < len(self.keys) and self.keys[i] == key else -1


def check_key_kind(slot_of: dict, key) -> None:
    """Refuse ``key`` where a keyed calibrator holds keys of the other kind (ints, strings)."""
    if slot_of and type(key) is not type(next(iter(slot_of))):
        msg = f"`key` must be of the kind already learned ({type(next(iter(slot_of))).__name__}); got {fmt(key)}."
        raise InvalidKeyError(msg)


def _refuse(name: str, value, i: int, why: str):
    msg = f"`{name}` must hold integer or string keys; got {fmt(value)} at position {i} ({why})."
    raise InvalidKeyError(msg)


def _first_null(x) -> int:
    """The position of the first null of an Arrow, pandas or polars column (-1: none)."""
    mask = None
    if hasattr(x, "is_null") and callable(x.is_null):  # pyarrow and polars
        mask = x.is_null()
        if hasattr(mask, "to_numpy"):
            mask = mask.to_numpy(zero_copy_only=False) if "pyarrow" in type(mask).__module__ else mask.to_numpy()
    elif hasattr(x, "isna") and callable(x.isna):  # pandas
        mask = x.isna().to_numpy()
    if mask is None:
        return -1
    mask = np.asarray(mask, dtype=bool)
    return int(np.flatnonzero(mask)[0]) if mask.any() else -1


def _as_numpy(x, name: str) -> np.ndarray:
    """The column as a 1-d numpy array (nulls refused first)."""
    if isinstance(x, np.ndarray):
        arr = x
    elif isinstance(x, (list, tuple)):
        arr = np.empty(len(x), dtype=object)
        arr[:] = list(x)
    else:
        module = type(x).__module__.split(".")[0]
        if module not in ("pyarrow", "pandas", "polars"):
            what = "a 1-d array, list, Arrow array or pandas/polars Series of keys"
            msg = f"`{name}` must be {what}; got {type(x).__name__}."
            raise TypeError(msg)
        if module == "pandas" and getattr(x, "ndim", 1) == 2:
            if x.shape[1] != 1:
                msg = f"`{name}` must be one column of keys; got a DataFrame of {x.shape[1]} columns."
                raise ValueError(msg)
            x = x.iloc[:, 0]
        if module == "polars" and hasattr(x, "columns"):
            if len(x.columns) != 1:
                msg = f"`{name}` must be one column of keys; got a DataFrame of {len(x.columns)} columns."
                raise ValueError(msg)
            x = x.to_series()
        i = _first_null(x)
        if i >= 0:
            _refuse(name, None, i, "a missing key")
        arr = x.to_numpy(zero_copy_only=False) if module == "pyarrow" else x.to_numpy()
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        msg = f"`{name}` must be 1-d; got an array of shape {arr.shape}."
        raise ValueError(msg)
    return arr


def as_key_column(x, name: str = "keys", n: int | None = None, *, code: bool = True) -> KeyColumn:
    """Check a key column and code it (:class:`KeyColumn`); ``n``: the length it must have.

    ``code=False`` only checks: an integer or string numpy column then skips the coding (a sort)
    and returns ``codes=None`` with ``keys`` holding its first key alone (its kind)."""
    arr = _as_numpy(x, name)
    if n is not None and arr.size != n:
        msg = f"`{name}` must hold one key per event ({n}); got {arr.size}."
        raise ValueError(msg)
    kind = arr.dtype.kind
    if not code and kind in "iuU":
        return KeyColumn(None, [arr[0].item()] if arr.size else [])
    if kind in "iu":
        return _code_integers(arr)
    if kind == "U":
        uniques, codes = np.unique(arr, return_inverse=True)
        return KeyColumn(codes.astype(np.intp).reshape(-1), [str(v) for v in uniques.tolist()])
    if kind != "O":
        i = 0
        if kind == "f" and np.isnan(arr).any():
            i = int(np.flatnonzero(np.isnan(arr))[0])
            _refuse(name, float(arr[i]), i, "a missing key")
        what = {"f": "a float", "b": "a bool", "c": "a complex number"}.get(kind, f"a {arr.dtype} value")
        _refuse(name, arr[0].item() if arr.size else None, i, what)
    return _code_objects(arr, name)


def _code_integers(arr: np.ndarray) -> KeyColumn:
    """Code an integer key column: ``np.unique``'s sorted keys and inverse. Keys within a span of
    a few times the column's length (campaign or merchant ids) are coded through a table over the
    span, in linear time; wider ones are sorted."""
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        span = hi - lo + 1
        if span <= max(4 * arr.size, 1 << 16):
            # the offsets from the smallest key, in [0, span): computed in 64 bits (a narrower dtype
            # would wrap), unsigned for uint64 keys beyond int64's range
            wide = arr.astype(np.uint64 if arr.dtype == np.uint64 else np.int64)
            at = (wide - wide.dtype.type(lo)).astype(np.intp)
            present = np.zeros(span, dtype=bool)
            present[at] = True
            rank = np.cumsum(present, dtype=np.intp) - 1
            keys = (np.flatnonzero(present).astype(wide.dtype) + wide.dtype.type(lo)).tolist()
            return KeyColumn(rank[at], keys)
    uniques, codes = np.unique(arr, return_inverse=True)
    return KeyColumn(codes.astype(np.intp).reshape(-1), [int(v) for v in uniques.tolist()])


def _code_objects(arr: np.ndarray, name: str) -> KeyColumn:
    """Code an object array of keys: all ints or all strings, each one checked."""
    table: dict = {}
    codes = np.empty(arr.size, dtype=np.intp)
    family = None
    for i, value in enumerate(arr.tolist()):
        if isinstance(value, str):  # numpy's str_ too: the key is its str value
            this = str
            value = str(value)
        elif isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
            this = int
            value = int(value)
        elif value is None or (isinstance(value, float) and value != value):
            _refuse(name, value, i, "a missing key")
        else:
            _refuse(name, value, i, f"a {type(value).__name__}")
        if family is None:
            family = this
        elif this is not family:
            _refuse(name, value, i, f"the keys before it are {family.__name__}s: one kind of key per column")
        code = table.get(value)
        if code is None:
            code = table[value] = len(table)
        codes[i] = code
    keys = sorted(table)
    order = np.empty(len(keys), dtype=np.intp)  # first-seen code -> sorted position
    for position, key in enumerate(keys):
        order[table[key]] = position
    return KeyColumn(order[codes] if codes.size else codes, keys)


class KeyedRiverChecks:
    """What river's generic checks need of a keyed learner (a base, not used alone): its unit-test
    parameters and the checks that do not apply to it."""

    @classmethod
    def _unit_test_params(cls):
        # river's checks feed the Phishing dataset (9 features): an int-valued feature serves as
        # the key and a probability-valued one as the score
        yield {"key_key": "age_of_domain", "score_key": "is_popular"}

    def _unit_test_skips(self):
        return {
            # the input is one key and one score, read by `key_key` and `score_key`: features
            # that appear later or vanish are not inputs it could use or miss, and removing the
            # key or the score is an error naming it, not a degraded input
            "check_emerging_features",
            "check_disappearing_features",
            "check_radically_disappearing_features",
        }

