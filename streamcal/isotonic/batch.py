"""Batch PAV, PAV-LLR and the batch isotonic calibrator.

Reference: Brümmer, N. and du Preez, J. *The PAV algorithm optimizes binary proper scoring
rules* (2013), cited below as Brümmer & du Preez.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal import _prior
from streamcal._kernels.pav import group_sorted_scores, pav_sorted
from streamcal._validation import (
    as_binary_labels,
    as_finite,
    as_nonneg_weights,
    check_same_length,
    check_scalar,
    keywords_named,
)

__all__ = ["IsotonicCalibrator", "pav", "pav_binary", "pav_llr"]

_TINY = float(np.finfo(np.float64).tiny)
_ONE_BELOW = 1.0 - float(np.finfo(np.float64).epsneg)  # the largest double below 1

# Range of the class weights of ``pav_binary`` (docs/limits.md).
MIN_CLASS_WEIGHT = 1e-100
MAX_CLASS_WEIGHT = 1e100


def _logit(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


# Extreme magnitudes. Weights (and values) are used exactly as given while every sum of them, and
# of their products, stays far inside the double range: then nothing here differs from the plain
# formulas. Beyond (sums that would pass 2**900, or, where asked, weights all below 2**-900, whose
# subnormal sums would round badly), they are first multiplied by a power of two: exact, except for
# entries that fall below the smallest double beside the largest (they weigh nothing beside it),
# and PAV's fit, a weighted mean, is the same for weights all scaled alike.
_SAFE_EXPONENT = 900


def _scale_exponent(values: np.ndarray, n: int, factor: float = 1.0, *, small_too: bool = False) -> int:
    """``k`` (an int) so that ``n * max|values| * factor * 2**k`` lies in (1/8, 1]; 0 while that
    product, without ``k``, stays within ``2**±_SAFE_EXPONENT`` (only its upper side unless
    ``small_too``)."""
    top = float(np.max(np.abs(values))) if values.size else 0.0
    if top == 0.0:
        return 0
    e = math.frexp(top)[1] + math.frexp(factor)[1] + max(n - 1, 0).bit_length()  # the product < 2**e
    if e <= _SAFE_EXPONENT and (e >= -_SAFE_EXPONENT or not small_too):
        return 0
    return -e


def _block_logit(fitted: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """``logit(fitted)``, where a fitted value rounded to 0 or 1 recomputed from its block's class
    sums: ``log(P) - log(N)``, finite when the block holds both classes.

    The runs of equal fitted values are PAV's blocks (groups of zero weight, which copy a
    neighbour's value, add nothing to the sums).
    """
    out = _logit(fitted)
    bad = ~np.isfinite(out)
    if bad.any():
        start = np.flatnonzero(np.concatenate(([True], fitted[1:] != fitted[:-1])))
        run = np.repeat(np.arange(start.size), np.diff(np.concatenate((start, [fitted.size]))))
        with np.errstate(divide="ignore"):
            block = np.log(np.add.reduceat(pos, start)) - np.log(np.add.reduceat(neg, start))
        out[bad] = block[run[bad]]
    return out


def pav(y, w=None, *, increasing: bool = True) -> np.ndarray:
    """Weighted isotonic regression of ``y`` in the given order (pool adjacent violators).

    Solves ``min Σ w_i (y_i − f_i)²`` subject to ``f_1 <= f_2 <= … <= f_n`` (or ``>=`` with
    ``increasing=False``). By Brümmer & du Preez the same ``f`` is optimal for *every* regular binary
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
    n = values.size
    kw = _scale_exponent(weights, n, small_too=True)  # sums of weights within the double range
    if kw:
        weights = np.ldexp(weights, kw)
    top_w = float(weights.max()) if n else 0.0
    ky = _scale_exponent(values, n, top_w)  # and sums of weights times values
    if ky:
        values = np.ldexp(values, ky)
    if not increasing:
        values = -values
    out = np.empty_like(values)
    pav_sorted(values, weights, out)
    if not increasing:
        out = -out
    if ky:
        out = np.ldexp(out, -ky)
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

    This is ``PAV_t((l_1, …, l_T), (v1, v2))`` of Brümmer & du Preez (eq. 6) with ``v1 = positive_weight``
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
        The class weights ``v1``, ``v2`` of Brümmer & du Preez (positive).

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
    check_scalar(positive_weight, "positive_weight", low=MIN_CLASS_WEIGHT, high=MAX_CLASS_WEIGHT)
    check_scalar(negative_weight, "negative_weight", low=MIN_CLASS_WEIGHT, high=MAX_CLASS_WEIGHT)
    if not w.any():
        msg = "`weights` must not all be zero."
        raise ValueError(msg)
    k = _scale_exponent(w, w.size, max(positive_weight, negative_weight), small_too=True)
    if k:
        w = np.ldexp(w, k)
    _, pos, neg, inverse = _group(s, y, w)
    fitted = _pav_groups(pos * positive_weight, neg * negative_weight)
    return fitted[inverse]


def pav_llr(scores, labels, weights=None, *, finite: bool = True) -> np.ndarray:
    """Calibrated log-likelihood ratios by PAV-LLR (Brümmer & du Preez, section 5, eq. 21).

    ``w_t = logit(PAV_t) − logit(T1/T)`` where ``T1/T`` is the (weighted) share of positives. The
    LLR does not depend on any prior: weighting the classes for a prior ``π`` and subtracting
    ``π`` gives the same values (Brümmer & du Preez, theorem 12).

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
    # the weights (and the pseudo-counts) in units of 2**-k; tiny weights are scaled up only
    # without pseudo-counts (beside a pseudo-count of 1 they weigh nothing anyway)
    k = _scale_exponent(w, w.size, small_too=not finite)
    if k:
        w = np.ldexp(w, k)
    _, pos, neg, inverse = _group(s, y, w)
    t1, t0 = float(pos.sum()), float(neg.sum())
    if finite:
        c = math.ldexp(1.0, k)  # the pseudo-count, 1 in the caller's units
        pos = np.concatenate(([c], pos, [0.0]))
        neg = np.concatenate(([0.0], neg, [c]))
        t1, t0 = t1 + c, t0 + c
        logit = _block_logit(_pav_groups(pos, neg), pos, neg)[1:-1]
    else:
        if not (t1 > 0.0 and t0 > 0.0):
            msg = (
                "`labels` must contain both classes (with positive weight) for the exact PAV-LLR "
                f"map; got a positive weight of {math.ldexp(t1, -k)!r} out of {math.ldexp(t1 + t0, -k)!r}. "
                "Use finite=True instead."
            )
            raise ValueError(msg)
        logit = _block_logit(_pav_groups(pos, neg), pos, neg)
    prior_logodds = math.log(t1) - math.log(t0)
    return logit[inverse] - prior_logodds


@keywords_named
class IsotonicCalibrator:
    """Batch isotonic (PAV) calibrator: probabilities and LLRs for new scores.

    ``fit`` pools tied scores and runs weighted PAV over the distinct scores (Brümmer & du
    Preez: the result is optimal for every regular binary proper scoring rule). New scores are
    mapped by linear interpolation between the fitted distinct scores (as scikit-learn's
    ``IsotonicRegression``) or by a right-continuous step; outside the fitted range the map is
    clipped to its end values. For a calibrator that learns from a stream, see
    :class:`streamcal.PAVCalibrator`; with one bucket per distinct score and the same
    ``finite_proba`` and ``llr_pseudo_count``, it serves the probabilities and LLRs of this
    calibrator fitted on its window.

    By default (``finite_proba=True``) the probabilities are never exactly 0 or 1: they follow
    the pseudo-count rule of the finite LLR (the BOSARIS rule of :func:`pav_llr`). The data are
    augmented with one pseudo-positive below every score and one pseudo-negative above, each of
    weight ``llr_pseudo_count``; PAV of the augmented data only pools a run of blocks at each
    end, so its map is the exact one clipped, ``clip(p, lo, hi)``, with ``lo``/``hi`` the rates of
    the two augmented end runs. The exact map gives 0 below every positive and 1 above every
    negative, which costs an infinite log loss the first time a new score falls on the wrong
    side; it is one switch away (``finite_proba=False``).

    Parameters
    ----------
    interpolation : {"linear", "step"}, default "linear"
        How scores between two fitted scores are mapped.
    finite_llr : bool, default True
        ``predict_llr`` uses the finite pseudo-count rule of :func:`pav_llr` (True) or the exact
        map, which may be ``±inf`` (False).
    finite_proba : bool, default True
        ``predict_proba`` serves the finite pseudo-count map (True), strictly inside (0, 1), or
        the exact PAV map (False).
    llr_pseudo_count : float, default 1.0
        Weight ``c`` of each pseudo-event of the finite rule (> 0), in the units of
        ``sample_weight``; the finite prior is ``(T1 + c) / (T + 2c)``.

    Attributes
    ----------
    thresholds_ : numpy.ndarray
        The distinct fitted scores (those with positive weight), increasing.
    proba_ : numpy.ndarray
        The PAV probability at each threshold (exact map).
    proba_finite_ : numpy.ndarray
        The probability at each threshold under the pseudo-count rule: ``proba_`` clipped to
        ``[lo, hi]``.
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
    >>> cal.predict_proba([0.0, 0.1, 0.5, 0.9, 1.0]).round(4).tolist()
    [0.0035, 0.0035, 0.2802, 0.7561, 0.9912]
    >>> IsotonicCalibrator(finite_proba=False).fit(scores, labels).predict_proba([0.0, 1.0]).tolist()
    [0.0, 1.0]
    >>> bool(np.all(np.diff(cal.predict_llr(np.linspace(0, 1, 50))) >= 0))
    True
    """

    def __init__(
        self,
        interpolation: str = "linear",
        finite_llr: bool = True,
        finite_proba: bool = True,
        llr_pseudo_count: float = 1.0,
    ):
        self.interpolation = interpolation
        self.finite_llr = finite_llr
        self.finite_proba = finite_proba
        self.llr_pseudo_count = llr_pseudo_count

    def _check_loaded_state(self) -> None:
        """The parameters and the fitted map of a restored calibrator (:mod:`streamcal.persist`)."""
        from streamcal import _state_check as c

        fitted = ("thresholds_", "proba_", "proba_finite_", "prior_", "_prior_finite")
        state = vars(self)
        logodds = ("_prior_logodds", "_prior_logodds_finite")
        params = ("interpolation", "finite_llr", "finite_proba", "llr_pseudo_count")
        c.need_keys(self, params, optional=fitted + logodds)
        c.need_params(self, lambda: check_scalar(self.interpolation, "interpolation", choices=("linear", "step")))
        c.need_bool(self.finite_llr, "finite_llr")
        c.need_bool(self.finite_proba, "finite_proba")
        c.need_params(self, lambda: check_scalar(self.llr_pseudo_count, "llr_pseudo_count", low=1e-100, high=1e100))
        for name in logodds:
            if name in state:
                # the exact prior's log-odds are infinite only when one class has no weight
                one_class = name == "_prior_logodds" and state.get("prior_") in (0.0, 1.0)
                c.need_float(state[name], name, finite=not one_class)
        present = [k for k in fitted if k in state]
        if not present:
            return
        if len(present) != len(fitted):
            c.fail(f"a fitted IsotonicCalibrator has all of {list(fitted)}; found only {present}.")
        t = c.need_array(self.thresholds_, "thresholds_", np.float64)
        if t.size == 0:
            c.fail("`thresholds_`: expected at least one fitted score; found none.")
        c.need_finite(t, "thresholds_")
        c.need_increasing(t, "thresholds_")
        for name in ("proba_", "proba_finite_"):
            a = c.need_array(state[name], name, np.float64, size=t.size)
            c.need_finite(a, name, low=0.0, high=1.0)
            c.need_increasing(a, name, strict=False)
        c.need_float(self.prior_, "prior_", 0.0, 1.0)
        c.need_float(self._prior_finite, "_prior_finite", 0.0, 1.0)
        if not 0.0 < self._prior_finite < 1.0:
            c.fail(f"`_prior_finite`: expected a value in (0, 1); found {self._prior_finite!r}.")

    def fit(self, scores, labels, sample_weight=None) -> IsotonicCalibrator:
        """Fit on scores and binary labels; returns ``self``."""
        check_scalar(self.interpolation, "interpolation", choices=("linear", "step"))
        check_scalar(self.finite_llr, "finite_llr", kind=(bool, np.bool_), choices=(True, False))
        check_scalar(self.finite_proba, "finite_proba", kind=(bool, np.bool_), choices=(True, False))
        check_scalar(self.llr_pseudo_count, "llr_pseudo_count", low=0.0, low_inclusive=False)
        s, y, w = _validate_binary(scores, labels, sample_weight, "sample_weight")
        if not w.any():
            msg = "`sample_weight` must not all be zero."
            raise ValueError(msg)
        k = _scale_exponent(w, w.size)  # weights (and pseudo-counts) in units of 2**-k
        if k:
            w = np.ldexp(w, k)
        unique, pos, neg, _ = _group(s, y, w, with_inverse=False)
        keep = (pos + neg) > 0.0
        unique, pos, neg = unique[keep], pos[keep], neg[keep]
        c = math.ldexp(float(self.llr_pseudo_count), k)  # the finite rule's pseudo-count, in units of 2**-k
        up = _scale_exponent(pos + neg, pos.size, small_too=True)  # the exact map: tiny weights scaled up
        proba = _pav_groups(np.ldexp(pos, up), np.ldexp(neg, up)) if up else _pav_groups(pos, neg)
        # PAV of the data plus the two pseudo-events: the values of its two end runs
        augmented = _pav_groups(np.concatenate(([c], pos, [0.0])), np.concatenate(([0.0], neg, [c])))
        t1, t0 = float(pos.sum()), float(neg.sum())
        self.thresholds_ = unique
        self.proba_ = proba
        self.proba_finite_ = np.clip(proba, augmented[1], augmented[-2])  # its ends are lo and hi
        self.prior_ = t1 / (t1 + t0)
        self._prior_finite = _prior.finite_prior(t1, t1 + t0, c)
        # log-odds of the priors from the class sums themselves: exact where the ratios round to 0 or 1
        with np.errstate(divide="ignore"):
            self._prior_logodds = float(np.log(t1) - np.log(t0))
        self._prior_logodds_finite = _prior.prior_logodds(t1, t0, c)
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

    def _finite_map(self, scores) -> np.ndarray:
        """The exact map clipped to the augmented end runs' values (``predict_proba`` by default)."""
        return np.clip(self._map(scores, self.proba_), self.proba_finite_[0], self.proba_finite_[-1])

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probability ``P(label = 1 | score)`` for each score."""
        self._check_fitted()
        if self.finite_proba:
            return self._finite_map(scores)
        return self._map(scores, self.proba_)

    def predict_llr(self, scores) -> np.ndarray:
        """Calibrated log-likelihood ratio for each score (prior-independent, natural log)."""
        self._check_fitted()
        if self.finite_llr:
            # within (0, 1) but for rounding with weights beyond 2**53 pseudo-counts: kept inside
            p = np.minimum(np.maximum(self._finite_map(scores), _TINY), _ONE_BELOW)
            prior_logodds = getattr(self, "_prior_logodds_finite", None)
            prior = self._prior_finite
        else:
            p = self._map(scores, self.proba_)
            prior_logodds = getattr(self, "_prior_logodds", None)
            prior = self.prior_
        if prior_logodds is None:  # fitted by a streamcal that did not keep the log-odds
            with np.errstate(divide="ignore"):
                prior_logodds = float(np.log(prior) - np.log1p(-prior))
        with np.errstate(divide="ignore", invalid="ignore"):
            return _logit(p) - prior_logodds
