"""Calibration per key (field-level errors): is each campaign, merchant or country calibrated, not
only the stream as a whole?

A global calibration can be right on average and wrong for every key: over-predicting for one
campaign and under-predicting for another cancel out. These functions look at each key's events
apart (Pan et al., "Field-aware Calibration: A Simple and Empirically Strong Method for Reliable
Probabilistic Predictions", WWW 2020; Wei et al., "Posterior Probability Matters: Doubly-Adaptive
Calibration for Neural Predictions in Online Advertising", SIGIR 2022).
"""

from __future__ import annotations

import numpy as np

from streamcal._keys import as_key_column
from streamcal.metrics._inputs import labels_proba_weights

__all__ = ["field_ece", "field_rce", "per_key_calibration"]


def _per_key_sums(keys, labels, proba, weights):
    y, p, w = labels_proba_weights(labels, proba, weights)
    column = as_key_column(keys, "keys", y.size)
    k = len(column.keys)
    codes = column.codes
    return (
        column.keys,
        np.bincount(codes, minlength=k),
        np.bincount(codes, weights=w, minlength=k),
        np.bincount(codes, weights=w * y, minlength=k),
        np.bincount(codes, weights=w * p, minlength=k),
    )


def per_key_calibration(keys, labels, proba, weights=None) -> dict:
    """Each key's events, positives and predicted positives, and their ratio.

    Parameters
    ----------
    keys : array-like of shape (n,)
        The key of each event: integers or strings (numpy, list, Arrow, pandas or polars).
    labels : array-like of shape (n,)
        Binary labels.
    proba : array-like of shape (n,)
        Predicted probabilities, in [0, 1].
    weights : array-like of shape (n,), optional
        Non-negative sample weights (not all zero).

    Returns
    -------
    dict of str to list or numpy.ndarray
        Columns, one row per key in sorted key order: ``key``, ``events`` (count), ``weight``
        (total weight), ``positives`` (weighted), ``predicted`` (the sum of the weighted
        probabilities) and ``ratio`` = predicted / positives (``inf`` for a key with predictions
        and no positive, ``nan`` for one with neither). A ratio above 1 over-predicts.

    Examples
    --------
    >>> from streamcal.metrics import per_key_calibration
    >>> table = per_key_calibration(["a", "b", "a", "b"], [1, 0, 0, 1], [0.6, 0.2, 0.6, 0.3])
    >>> table["key"], table["positives"].tolist(), table["ratio"].round(3).tolist()
    (['a', 'b'], [1.0, 1.0], [1.2, 0.5])
    """
    names, events, weight, pos, pred = _per_key_sums(keys, labels, proba, weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = pred / pos
    return {"key": names, "events": events, "weight": weight, "positives": pos, "predicted": pred, "ratio": ratio}


def field_rce(keys, labels, proba, weights=None) -> float:
    """Field-level relative calibration error: per key ``|Σ(y − p)| / Σy``, averaged with the
    keys' weights.

    This is a relative error of calibration in the large, key by key (a key whose predictions sum
    to 130 where 100 positives came has 0.3); it is not the relative cross-entropy that the same
    letters name elsewhere. Keys without a positive have no relative error and are left out (the
    average is over the others' weights); ``nan`` if no key has a positive.

    Parameters
    ----------
    keys, labels, proba, weights
        As in :func:`per_key_calibration`.

    Returns
    -------
    float

    Examples
    --------
    >>> from streamcal.metrics import field_rce
    >>> round(field_rce(["a", "b", "a", "b"], [1, 0, 0, 1], [0.6, 0.2, 0.6, 0.3]), 3)
    0.35
    """
    _, _, weight, pos, pred = _per_key_sums(keys, labels, proba, weights)
    has = pos > 0.0
    if not has.any():
        return float("nan")
    rel = np.abs(pos[has] - pred[has]) / pos[has]
    return float(np.sum(weight[has] * rel) / np.sum(weight[has]))


def field_ece(keys, labels, proba, weights=None) -> float:
    """Field-level expected calibration error: per key ``|mean(y) − mean(p)|``, averaged with the
    keys' weights.

    The expected calibration error with the keys as its bins: zero when every key's predictions
    add up to its positives, however miscalibrated the scores are within a key. Read it beside
    :func:`streamcal.metrics.ece`, which bins by the probability.

    Parameters
    ----------
    keys, labels, proba, weights
        As in :func:`per_key_calibration`.

    Returns
    -------
    float

    Examples
    --------
    >>> from streamcal.metrics import field_ece
    >>> round(field_ece(["a", "b", "a", "b"], [1, 0, 0, 1], [0.6, 0.2, 0.6, 0.3]), 3)
    0.175
    """
    _, _, weight, pos, pred = _per_key_sums(keys, labels, proba, weights)
    keep = weight > 0.0
    return float(np.sum(np.abs(pos[keep] - pred[keep])) / np.sum(weight[keep]))
