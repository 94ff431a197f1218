"""Input checks shared by the metric functions and the river metrics.

They build on :mod:`streamcal._validation` and add what only metrics need: a second array
checked against the length of ``labels``, LLR arrays that may hold ±inf but never NaN, and
the checks for one event of a river metric.
"""

from __future__ import annotations

import math

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


def _event_number(y_pred, what: str) -> float:
    if isinstance(y_pred, dict):
        if True not in y_pred or not set(y_pred) <= {True, False}:
            msg = (
                f"`y_pred` must be {what} or a dict {{False: 1 - p, True: p}}; got a dict with the "
                f"keys {list(y_pred)[:5]!r}."
            )
            raise ValueError(msg)
        y_pred = y_pred[True]
    if not is_real_number(y_pred):
        msg = f"`y_pred` must be {what} or a dict {{False: 1 - p, True: p}}; got {y_pred!r}."
        raise TypeError(msg)
    return _float(y_pred)


def event_proba(y_pred) -> float:
    """The probability of the positive class in a river ``y_pred`` (a float or a proba dict)."""
    p = _event_number(y_pred, "a probability")
    if not 0.0 <= p <= 1.0:
        msg = f"`y_pred` must be a probability in [0, 1]; got {p!r}."
        raise ValueError(msg)
    if isinstance(y_pred, dict) and False in y_pred:
        # the two classes' probabilities must add up to 1 (to rounding): a dict that does not is not
        # a distribution, and reading its True entry alone would hide that
        q = y_pred[False]
        if not is_real_number(q) or not abs(_float(q) + p - 1.0) <= 1e-6:
            msg = f"`y_pred` must be a dict {{False: 1 - p, True: p}}; got {{False: {q!r}, True: {p!r}}}."
            raise ValueError(msg)
    return p


def event_score(y_pred) -> float:
    """A score (any real number, ±inf allowed, NaN not), or the positive probability of a dict."""
    s = _event_number(y_pred, "a score")
    if math.isnan(s):
        msg = "`y_pred` must not be NaN; got nan."
        raise ValueError(msg)
    return s
