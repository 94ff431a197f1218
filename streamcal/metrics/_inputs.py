"""Input checks shared by the metric functions and the river metrics.

They build on :mod:`streamcal._validation` and add what only metrics need: a second array
checked against the length of ``labels``, LLR arrays that may hold ±inf but never NaN, and
the checks for one event of a river metric.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from streamcal._validation import (
    as_1d_float,
    as_binary_label,
    as_binary_labels,
    as_nonneg_weights,
    as_probabilities,
    as_real_array,
    is_real_number,
)


def check_length_as_labels(n: int, got: int, name: str) -> None:
    """Raise if ``name`` does not have as many elements as ``labels``."""
    if n != got:
        msg = f"`{name}` must have the same length as `labels` ({n}); got {got}."
        raise ValueError(msg)


def as_weights(weights, n: int) -> np.ndarray:
    """Sample weights (``None`` = unit weights): finite, non-negative, not all zero."""
    if weights is not None:
        raw = as_real_array(weights, "weights", what="a 1-d array of numbers")
        check_length_as_labels(n, 1 if raw.ndim == 0 else len(raw), "weights")
    w = as_nonneg_weights(weights, "weights", n)
    if not w.sum() > 0.0:
        msg = "`weights` must not all be zero; got a total weight of 0.0."
        raise ValueError(msg)
    return w


def labels_proba_weights(labels, proba, weights, proba_name: str = "proba"):
    """Validate (labels, probabilities, weights) of one metric call; return three float arrays."""
    y = as_binary_labels(labels, "labels")
    p = as_probabilities(proba, proba_name)
    check_length_as_labels(y.size, p.size, proba_name)
    w = as_weights(weights, y.size)
    return y, p, w


def as_not_nan(x, name: str) -> np.ndarray:
    """A new float64 array that may hold ±inf but no NaN (LLRs, scores)."""
    arr = as_1d_float(x, name)
    bad = np.isnan(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = f"`{name}` must not be NaN; got nan at position {i}."
        raise ValueError(msg)
    return arr


def require_both_classes(y: np.ndarray, w: np.ndarray, what: str) -> tuple[float, float]:
    """Return the positive and negative total weights; raise if either is zero."""
    w1 = float(np.sum(w[y == 1.0]))
    w0 = float(np.sum(w[y == 0.0]))
    if not (w1 > 0.0 and w0 > 0.0):
        msg = (
            f"{what} needs both classes with positive weight; got a positive weight of {w1!r} "
            f"and a negative weight of {w0!r} in `labels`."
        )
        raise ValueError(msg)
    return w1, w0


# --- one event of a river metric ---------------------------------------------------------


def event_label(y_true) -> bool:
    if y_true is True or y_true is False:
        return y_true
    try:
        return as_binary_label(y_true, "y_true")
    except ValueError as error:
        # labels such as "fraud" / "legit" (a CalibratedClassifier with pos_val="fraud"): say how to score them
        msg = (
            f"{str(error).rstrip('.')}. streamcal's metrics score bool or 0/1 labels "
            "against the probability of True: for other labels (a CalibratedClassifier with "
            "pos_val='fraud'), update them with (y == pos_val, proba[pos_val])."
        )
        raise ValueError(msg) from None


def is_bool_like(value) -> bool:
    """A bool (NumPy's too) or a number equal to 0 or 1: a label of the bool kind."""
    return isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Real) and value in (0, 1))


def check_pos_val(pos_val):
    """A metric's ``pos_val``: any hashable label but None and NaN (a dict ``y_pred`` is read at it)."""
    try:
        hash(pos_val)
    except TypeError:
        msg = f"`pos_val` must be a hashable label (such as True or 'fraud'); got {pos_val!r}."
        raise TypeError(msg) from None
    if pos_val is None or (isinstance(pos_val, numbers.Real) and math.isnan(pos_val)):
        msg = f"`pos_val` must be a label (such as True or 'fraud'); got {pos_val!r}."
        raise ValueError(msg)
    return pos_val


def metric_label(y_true, pos_val) -> bool:
    """Whether ``y_true`` is the positive label ``pos_val`` (river's ``y_true == pos_val``).

    With a bool or 0/1 ``pos_val`` every label must be a bool or 0/1: another label ("legit")
    would otherwise count as a negative without a word, which is the mark of a forgotten
    ``pos_val``. With any other ``pos_val``, every label but ``pos_val`` is a negative."""
    if pos_val is True:
        if y_true is True or y_true is False:
            return y_true
    elif not is_bool_like(pos_val):
        if y_true is None or (isinstance(y_true, numbers.Real) and math.isnan(y_true)):
            msg = f"`y_true` must be a class label; got {y_true!r}."
            raise ValueError(msg)
        try:
            return bool(y_true == pos_val)
        except (TypeError, ValueError):
            msg = f"`y_true` must be a class label that compares with `pos_val` = {pos_val!r}; got {y_true!r}."
            raise ValueError(msg) from None
    try:
        label = as_binary_label(y_true, "y_true")
    except ValueError as error:
        msg = (
            f"{str(error).rstrip('.')}. With `pos_val` = {pos_val!r} the labels are bools or 0/1: "
            f"for labels such as {y_true!r}, construct the metric with the positive label as "
            f"`pos_val` (for instance pos_val={y_true!r})."
        )
        raise ValueError(msg) from None
    return label is bool(pos_val)


def event_weight(w) -> float:
    if not is_real_number(w):
        msg = f"`w` must be a non-negative number; got {w!r} of type {type(w).__name__}."
        raise TypeError(msg)
    w = _float(w)
    if not (math.isfinite(w) and w >= 0.0):
        msg = f"`w` must be finite and non-negative; got {w!r}."
        raise ValueError(msg)
    return w


def _float(value) -> float:
    try:
        return float(value)
    except OverflowError:  # a Python int (or Fraction) beyond float64: as inf, refused by the callers
        return math.inf if value > 0 else -math.inf


def _dict_entry(y_pred: dict, what: str, pos_val):
    """The entry of a probability dict at ``pos_val``.

    river's models leave out the classes they have not learned, and river's metrics read such a
    class as probability 0: a dict without ``pos_val`` is read as 0 when its other classes'
    probabilities add up to 1, and refused otherwise (an empty dict too). With a bool (or 0/1)
    ``pos_val`` the keys must be bools."""
    if pos_val is True and True in y_pred and (len(y_pred) == 1 or (len(y_pred) == 2 and False in y_pred)):
        return y_pred[True]  # the common case: {False: 1 - p, True: p}
    if not y_pred or (is_bool_like(pos_val) and not set(y_pred) <= {True, False}):
        msg = (
            f"`y_pred` must be {what} or a dict of class probabilities, such as {{False: 1 - p, True: p}}, "
            f"keyed by labels of the kind of `pos_val` = {pos_val!r}; got a dict with the keys {list(y_pred)[:5]!r}."
        )
        raise ValueError(msg)
    if pos_val in y_pred:
        return y_pred[pos_val]
    if not _adds_up_to_one(y_pred.values()):
        shown = {k: y_pred[k] for k in list(y_pred)[:5]}
        msg = (
            f"`y_pred` must be {what} or a dict of class probabilities that add up to 1 (a class "
            f"missing from it, as `pos_val` = {pos_val!r} is, has probability 0); got {shown!r}."
        )
        raise ValueError(msg)
    return 0.0


def _adds_up_to_one(values) -> bool:
    """The values are real numbers whose sum is 1 to rounding (1e-6)."""
    total = 0.0
    for v in values:
        if v.__class__ is float:
            total += v
        elif is_real_number(v):
            total += _float(v)
        else:
            return False
    return abs(total - 1.0) <= 1e-6


def _event_number(y_pred, what: str, pos_val=True) -> float:
    if isinstance(y_pred, dict):
        y_pred = _dict_entry(y_pred, what, pos_val)
    if not is_real_number(y_pred):
        msg = f"`y_pred` must be {what} or a dict {{False: 1 - p, True: p}}; got {y_pred!r}."
        raise TypeError(msg)
    return _float(y_pred)


def event_proba(y_pred, pos_val=True) -> float:
    """The probability of the positive class ``pos_val`` in a river ``y_pred`` (a float or a
    proba dict)."""
    p = _event_number(y_pred, "a probability", pos_val)
    if not 0.0 <= p <= 1.0:
        msg = f"`y_pred` must be a probability in [0, 1]; got {p!r}."
        raise ValueError(msg)
    # the classes' probabilities must add up to 1 (to rounding): a dict that does not is not a
    # distribution, and reading its positive entry alone would hide that
    if isinstance(y_pred, dict) and len(y_pred) > 1 and pos_val in y_pred and not _adds_up_to_one(y_pred.values()):
        if set(y_pred) == {True, False}:
            q = y_pred[not bool(pos_val)]
            shown = f"{{False: {q!r}, True: {p!r}}}" if bool(pos_val) else f"{{False: {p!r}, True: {q!r}}}"
            msg = f"`y_pred` must be a dict {{False: 1 - p, True: p}}; got {shown}."
        else:
            msg = f"`y_pred` must be a dict of class probabilities that add up to 1; got {y_pred!r}."
        raise ValueError(msg)
    return p


def event_score(y_pred, pos_val=True) -> float:
    """A score (any real number, ±inf allowed, NaN not), or the positive probability of a dict."""
    s = _event_number(y_pred, "a score", pos_val)
    if math.isnan(s):
        msg = "`y_pred` must not be NaN; got nan."
        raise ValueError(msg)
    return s
