"""Batch PAV, PAV-LLR and the batch isotonic calibrator (paper 001)."""

from __future__ import annotations

import numpy as np

from streamcal._kernels.pav import group_sorted_scores, pav_sorted
from streamcal._validation import (
    as_binary_labels,
    as_finite,
    as_nonneg_weights,
    check_same_length,
    check_scalar,
)

__all__ = ["IsotonicCalibrator", "pav", "pav_binary", "pav_llr"]


def _logit(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def pav(y, w=None, *, increasing: bool = True) -> np.ndarray:
    """Weighted isotonic regression of ``y`` in the given order (pool adjacent violators).

    Solves ``min Σ w_i (y_i − f_i)²`` subject to ``f_1 <= f_2 <= … <= f_n`` (or ``>=`` with
    ``increasing=False``). By paper 001 the same ``f`` is optimal for *every* regular binary
    proper scoring rule when ``y`` holds 0/1 labels.

    Parameters
    ----------
    y : array-like of shape (n,)
        Finite values, in the order the constraint applies to.
    w : array-like of shape (n,), optional
        Finite non-negative weights; unit weights if omitted.
    increasing : bool, default True
        Fit a non-decreasing (True) or non-increasing (False) sequence.

    Returns
    -------
    numpy.ndarray of shape (n,)
        The fitted values; the inputs are not modified.

    Examples
    --------
    >>> from streamcal.isotonic import pav
    >>> pav([1.0, 3.0, 2.0, 4.0]).tolist()
    [1.0, 2.5, 2.5, 4.0]
    >>> pav([1.0, 3.0, 2.0], w=[1.0, 1.0, 3.0]).tolist()
    [1.0, 2.25, 2.25]
    """
    values = as_finite(y, "y")
    weights = as_nonneg_weights(w, "w", values.size)
    check_scalar(increasing, "increasing", kind=(bool, np.bool_), choices=(True, False))
    if not increasing:
        values = -values
    out = np.empty_like(values)
    pav_sorted(values, weights, out)
    if not increasing:
        out = -out
    return out


def _validate_binary(scores, labels, weights, weights_name: str = "weights"):
    s = as_finite(scores, "scores")
    y = as_binary_labels(labels, "labels")
    check_same_length(s.size, y.size, "labels")
    w = as_nonneg_weights(weights, weights_name, s.size)
    return s, y, w


def _group(s, y, w, *, with_inverse: bool = True):
    """Sort by score and sum class weights per distinct score.

    Returns ``(unique, pos, neg, inverse)`` where ``inverse[i]`` is the group of event i (None
    without ``with_inverse``). The order among tied scores does not matter: their weights are summed.
    """
    order = np.argsort(s)
    n = s.size
    unique = np.empty(n)
    pos = np.empty(n)
    neg = np.empty(n)
    g = group_sorted_scores(s[order], y[order], w[order], unique, pos, neg)
    unique, pos, neg = unique[:g], pos[:g], neg[:g]
    if not with_inverse:
        return unique, pos, neg, None
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.searchsorted(unique, s[order])
    return unique, pos, neg, inverse


def _pav_groups(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """PAV of the positive rate over score groups, each weighted by its total weight.

    Groups of zero total weight carry no evidence: they take the fitted value of the nearest
    weighted group to their left (to their right if there is none), which keeps the fit monotone.
    """
    total = pos + neg
    has = total > 0.0
    fitted = np.empty(pos.size)
    y = np.ascontiguousarray(pos[has] / total[has])
    fit = np.empty_like(y)
    pav_sorted(y, np.ascontiguousarray(total[has]), fit)
    fitted[has] = fit
    if not has.all():
        idx = np.flatnonzero(has)
        left = np.searchsorted(idx, np.arange(pos.size), side="right") - 1
        fitted[~has] = fit[np.maximum(left, 0)[~has]]
    return fitted


def pav_binary(
    scores,
    labels,
    weights=None,
    *,
    positive_weight: float = 1.0,
    negative_weight: float = 1.0,
) -> np.ndarray:
    """PAV-calibrated probabilities ``P(label = 1 | score)`` for each event, ties pooled.

    This is ``PAV_t((l_1, …, l_T), (v1, v2))`` of paper 001 (eq. 6) with ``v1 = positive_weight``
    and ``v2 = negative_weight``: events are sorted by score, events with equal scores share one
    value, and the result is the unique optimum of every regular binary proper scoring rule
    under the monotonicity constraint.

    Parameters
    ----------
    scores : array-like of shape (n,)
        Finite scores; only their order matters.
    labels : array-like of shape (n,)
        Binary labels (0/1 or False/True).
    weights : array-like of shape (n,), optional
        Non-negative sample weights.
    positive_weight, negative_weight : float, default 1.0
        The class weights ``v1``, ``v2`` of paper 001 (positive).

    Returns
    -------
    numpy.ndarray of shape (n,)
        The calibrated probability of each event, in the input order.

    Examples
    --------
    >>> from streamcal.isotonic import pav_binary
    >>> pav_binary([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]).tolist()
    [0.0, 0.5, 0.5, 1.0]
    """
    s, y, w = _validate_binary(scores, labels, weights)
    check_scalar(positive_weight, "positive_weight", low=0.0, low_inclusive=False)
    check_scalar(negative_weight, "negative_weight", low=0.0, low_inclusive=False)
    if w.sum() <= 0.0:
        msg = "`weights` must not all be zero."
        raise ValueError(msg)
    _, pos, neg, inverse = _group(s, y, w)
    fitted = _pav_groups(pos * positive_weight, neg * negative_weight)
    return fitted[inverse]


def pav_llr(scores, labels, weights=None, *, finite: bool = True) -> np.ndarray:
    """Calibrated log-likelihood ratios by PAV-LLR (paper 001 §5, eq. 21).

    ``w_t = logit(PAV_t) − logit(T1/T)`` where ``T1/T`` is the (weighted) share of positives. The
    LLR does not depend on any prior: weighting the classes for a prior ``π`` and subtracting
    ``π`` gives the same values (paper 001, theorem 12).

    The exact map (``finite=False``) gives ``−inf`` to scores below every positive and ``+inf``
    to scores above every negative. The default (``finite=True``) follows the BOSARIS rule: one
    pseudo-positive is placed below the lowest score and one pseudo-negative above the highest
    (each of weight 1), and the prior becomes ``(T1 + 1)/(T + 2)``. Every LLR is then finite and
    the order of the scores is never changed (equal scores share one LLR).

    Parameters
    ----------
    scores : array-like of shape (n,)
        Finite scores.
    labels : array-like of shape (n,)
        Binary labels. The exact map needs both classes; the finite one does not.
    weights : array-like of shape (n,), optional
        Non-negative sample weights.
    finite : bool, default True
        Use the finite pseudo-count rule (True) or the exact, possibly infinite, map (False).

    Returns
    -------
    numpy.ndarray of shape (n,)
        The calibrated LLR (natural log) of each event, in the input order.

    Examples
    --------
    >>> from streamcal.isotonic import pav_llr
    >>> pav_llr([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], finite=False).tolist()
    [-inf, 0.0, 0.0, inf]
    >>> pav_llr([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 0, 1, 0, 1, 1]).round(4).tolist()
    [-0.6931, -0.6931, 0.0, 0.0, 0.6931, 0.6931]
    """
    s, y, w = _validate_binary(scores, labels, weights)
    check_scalar(finite, "finite", kind=(bool, np.bool_), choices=(True, False))
    _, pos, neg, inverse = _group(s, y, w)
    # the class totals apart: t - t1 would lose a class whose weight is below t1's rounding
    t1, t0 = float(pos.sum()), float(neg.sum())
    if finite:
        pos = np.concatenate(([1.0], pos, [0.0]))
        neg = np.concatenate(([0.0], neg, [1.0]))
        t1, t0 = t1 + 1.0, t0 + 1.0
        fitted = _pav_groups(pos, neg)[1:-1]
    else:
        if not (t1 > 0.0 and t0 > 0.0):
            msg = (
                "`labels` must contain both classes (with positive weight) for the exact PAV-LLR "
                f"map; got a positive weight of {t1!r} and a negative weight of {t0!r}. Use "
                "finite=True instead."
            )
            raise ValueError(msg)
        fitted = _pav_groups(pos, neg)
    prior_logodds = np.log(t1) - np.log(t0)
    return _logit(fitted)[inverse] - prior_logodds


class IsotonicCalibrator:
    """Batch isotonic (PAV) calibrator: probabilities and LLRs for new scores.

    ``fit`` pools tied scores and runs weighted PAV over the distinct scores (paper 001: the
    result is optimal for every regular binary proper scoring rule). New scores are mapped by
    linear interpolation between the fitted distinct scores (as scikit-learn's
    ``IsotonicRegression``) or by a right-continuous step; outside the fitted range the map is
    clipped to its end values. For a calibrator that learns from a stream, see
    :class:`streamcal.PAVCalibrator`.

    Parameters
    ----------
    interpolation : {"linear", "step"}, default "linear"
        How scores between two fitted scores are mapped.
    finite_llr : bool, default True
        ``predict_llr`` uses the finite pseudo-count rule of :func:`pav_llr` (True) or the exact
        map, which may be ``±inf`` (False).

    Attributes
    ----------
    thresholds_ : numpy.ndarray
        The distinct fitted scores (those with positive weight), increasing.
    proba_ : numpy.ndarray
        The PAV probability at each threshold (exact map).
    proba_finite_ : numpy.ndarray
        The probability at each threshold under the pseudo-count rule.
    prior_ : float
        The weighted share of positives seen by ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.isotonic import IsotonicCalibrator
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=2000)
    >>> labels = rng.uniform(size=2000) < scores**2      # the true probability is score**2
    >>> cal = IsotonicCalibrator().fit(scores, labels)
    >>> cal.predict_proba([0.1, 0.5, 0.9]).round(1).tolist()
    [0.0, 0.3, 0.8]
    >>> bool(np.all(np.diff(cal.predict_llr(np.linspace(0, 1, 50))) >= 0))
    True
    """

    def __init__(self, interpolation: str = "linear", finite_llr: bool = True):
        self.interpolation = interpolation
        self.finite_llr = finite_llr

    def fit(self, scores, labels, sample_weight=None) -> IsotonicCalibrator:
        """Fit on scores and binary labels; returns ``self``."""
        check_scalar(self.interpolation, "interpolation", choices=("linear", "step"))
        check_scalar(self.finite_llr, "finite_llr", kind=(bool, np.bool_), choices=(True, False))
        s, y, w = _validate_binary(scores, labels, sample_weight, "sample_weight")
        unique, pos, neg, _ = _group(s, y, w, with_inverse=False)
        keep = (pos + neg) > 0.0
        if not keep.any():
            msg = "`sample_weight` must not all be zero."
            raise ValueError(msg)
        unique, pos, neg = unique[keep], pos[keep], neg[keep]
        proba = _pav_groups(pos, neg)
        proba_finite = _pav_groups(np.concatenate(([1.0], pos, [0.0])), np.concatenate(([0.0], neg, [1.0])))
        t1, t = float(pos.sum()), float(pos.sum() + neg.sum())
        self.thresholds_ = unique
        self.proba_ = proba
        self.proba_finite_ = proba_finite[1:-1]
        self.prior_ = t1 / t
        self._prior_finite = (t1 + 1.0) / (t + 2.0)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "thresholds_"):
            msg = "This IsotonicCalibrator is not fitted yet; call `fit` first."
            raise RuntimeError(msg)

    def _map(self, scores, values: np.ndarray) -> np.ndarray:
        s = as_finite(scores, "scores", allow_empty=True)
        if self.interpolation == "linear":
            return np.interp(s, self.thresholds_, values)
        idx = np.searchsorted(self.thresholds_, s, side="right") - 1
        return values[np.clip(idx, 0, values.size - 1)]

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probability ``P(label = 1 | score)`` for each score."""
        self._check_fitted()
        return self._map(scores, self.proba_)

    def predict_llr(self, scores) -> np.ndarray:
        """Calibrated log-likelihood ratio for each score (prior-independent, natural log)."""
        self._check_fitted()
        if self.finite_llr:
            p, prior = self._map(scores, self.proba_finite_), self._prior_finite
        else:
            p, prior = self._map(scores, self.proba_), self.prior_
        with np.errstate(divide="ignore"):
            return _logit(p) - (np.log(prior) - np.log1p(-prior))
