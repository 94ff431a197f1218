"""Calibration metrics as functions on arrays.

Every function takes ``labels`` first (scikit-learn's argument order), validates all of its
inputs before computing anything, and returns Python floats.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from streamcal._validation import as_binary_labels, check_scalar
from streamcal.metrics._inputs import (
    as_not_nan,
    as_weights,
    check_length_as_labels,
    labels_proba_weights,
    require_both_classes,
)

__all__ = [
    "brier_score",
    "calibration_loss",
    "cllr",
    "ece",
    "hosmer_lemeshow",
    "log_loss",
    "min_cllr",
]

_LN2 = math.log(2.0)


def brier_score(labels, proba, weights=None) -> float:
    """Brier score: the (weighted) mean squared difference between probability and label.

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels (0/1 or False/True).
    proba : array-like of shape (n,)
        Predicted probabilities of the positive class, in [0, 1].
    weights : array-like of shape (n,), optional
        Non-negative sample weights (not all zero); unit weights by default.

    Returns
    -------
    float
        ``sum(w * (proba - labels)**2) / sum(w)``, as scikit-learn's ``brier_score_loss``.

    Examples
    --------
    >>> from streamcal.metrics import brier_score
    >>> round(brier_score([0, 1, 1], [0.1, 0.8, 0.6]), 4)
    0.07
    """
    y, p, w = labels_proba_weights(labels, proba, weights)
    if weights is None:  # unit weights: the same sums without multiplying by 1.0
        return float(np.sum((p - y) ** 2) / float(y.size))
    return float(np.sum(w * (p - y) ** 2) / np.sum(w))


def log_loss(labels, proba, weights=None, *, eps: float | None = None) -> float:
    """Logarithmic loss (cross-entropy) in nats.

    The loss of one event is ``-log(p)`` for a positive and ``-log(1 - p)`` for a negative. By
    default nothing is clipped: a confident right prediction (``p = 1`` on a positive) costs
    exactly 0, a confident wrong one (``p = 0`` on a positive) costs ``inf``, and so does the mean
    if such an event has positive weight. That is the logarithmic rule of Brümmer & du Preez (2013)
    (``C(θ1, 0) = ∞``). Pass ``eps`` to clip ``proba`` into ``[eps, 1 - eps]`` first;
    ``eps=numpy.finfo(float).eps`` reproduces scikit-learn's ``log_loss``.

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels.
    proba : array-like of shape (n,)
        Probabilities of the positive class, in [0, 1].
    weights : array-like of shape (n,), optional
        Non-negative sample weights; unit weights by default.
    eps : float, optional
        Clip ``proba`` into ``[eps, 1 - eps]`` (``0 <= eps < 0.5``). Default: no clipping.

    Returns
    -------
    float
        ``sum(w * loss) / sum(w)``; may be ``inf``.

    Examples
    --------
    >>> from streamcal.metrics import log_loss
    >>> round(log_loss([0, 1, 1], [0.1, 0.8, 0.6]), 4)
    0.2798
    >>> log_loss([1], [0.0])
    inf
    >>> round(log_loss([1], [0.0], eps=1e-15), 3)
    34.539
    """
    y, p, w = labels_proba_weights(labels, proba, weights)
    if eps is not None:
        check_scalar(eps, "eps", low=0.0, high=0.5, high_inclusive=False)
        p = np.clip(p, eps, 1.0 - eps)
    loss = _log_losses(y, p)
    if weights is None:
        return float(np.sum(loss) / float(y.size))
    return _weighted_mean(loss, w)


def _log_losses(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(y == 1.0, -np.log(p), -np.log1p(-p))


def _weighted_mean(loss: np.ndarray, w: np.ndarray) -> float:
    """``sum(w * loss) / sum(w)`` where an infinite loss of weight 0 counts 0, not NaN."""
    with np.errstate(invalid="ignore"):
        contrib = np.where(w > 0.0, w * loss, 0.0)
    return float(np.sum(contrib) / np.sum(w))


def cllr(labels, llr, weights=None) -> float:
    """Cllr: the log-likelihood-ratio cost, in bits.

    ``Cllr = ½ [mean over positives of log2(1 + e^-llr) + mean over negatives of log2(1 + e^llr)]``
    — the logarithmic scoring rule at prior ½ applied to LLRs, averaged per class. A system that
    always outputs ``llr = 0`` scores exactly 1; a perfect one scores 0.

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels; both classes must be present (with positive weight).
    llr : array-like of shape (n,)
        Log-likelihood ratios (natural log) in favour of the positive class. ``±inf`` is allowed
        (a positive at ``+inf`` costs 0, a positive at ``-inf`` costs ``inf``); NaN is not.
    weights : array-like of shape (n,), optional
        Non-negative sample weights; the class means are weighted means.

    Returns
    -------
    float
        Cllr in bits; may be ``inf``.

    Examples
    --------
    >>> from streamcal.metrics import cllr
    >>> cllr([0, 1], [0.0, 0.0])
    1.0
    >>> round(cllr([0, 0, 1, 1], [-2.0, 0.5, 1.0, 3.0]), 4)
    0.5276
    """
    y = as_binary_labels(labels, "labels")
    x = as_not_nan(llr, "llr")
    check_length_as_labels(y.size, x.size, "llr")
    w = as_weights(weights, y.size)
    if weights is None:
        return _cllr_unit(y, x)
    return _cllr(y, x, w)


def _cllr_unit(y: np.ndarray, x: np.ndarray) -> float:
    """:func:`_cllr` for unit weights: each class's costs computed and summed on their own, in
    event order (the same sums, without the weights)."""
    positive = y == 1.0
    x_pos = x[positive]
    x_neg = x[~positive]
    if not (x_pos.size and x_neg.size):
        require_both_classes(y, np.ones(y.size), "Cllr")  # raises, naming the missing class
    pos = float(np.sum(np.logaddexp(0.0, -x_pos) / _LN2)) / float(x_pos.size)
    neg = float(np.sum(np.logaddexp(0.0, x_neg) / _LN2)) / float(x_neg.size)
    return 0.5 * (pos + neg)


def _cllr(y: np.ndarray, x: np.ndarray, w: np.ndarray) -> float:
    w1, w0 = require_both_classes(y, w, "Cllr")
    # log(1 + e^-x) for positives, log(1 + e^x) for negatives; logaddexp handles ±inf exactly
    cost = np.logaddexp(0.0, np.where(y == 1.0, -x, x)) / _LN2
    with np.errstate(invalid="ignore"):
        contrib = np.where(w > 0.0, w * cost, 0.0)
    pos = float(np.sum(contrib[y == 1.0])) / w1
    neg = float(np.sum(contrib[y == 0.0])) / w0
    return 0.5 * (pos + neg)


def min_cllr(labels, scores, weights=None) -> float:
    """minCllr: the Cllr of the scores after the best monotone calibration.

    The scores are mapped to LLRs by exact PAV-LLR (Brümmer & du Preez, 2013, §5;
    :func:`streamcal.isotonic.pav_llr` with ``finite=False``) and scored with :func:`cllr`. PAV-LLR
    is optimal for every proper scoring rule at every prior, so ``min_cllr <= cllr`` for any LLRs
    that increase with the scores; ``cllr - min_cllr`` is the calibration loss and ``min_cllr``
    the discrimination loss.

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels; both classes must be present (with positive weight).
    scores : array-like of shape (n,)
        Any scores that increase with the evidence for the positive class (probabilities, LLRs,
        raw model outputs). Only their order matters; ``±inf`` is allowed, NaN is not.
    weights : array-like of shape (n,), optional
        Non-negative sample weights.

    Returns
    -------
    float
        minCllr in bits, in [0, 1].

    Examples
    --------
    >>> from streamcal.metrics import min_cllr
    >>> min_cllr([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4])  # perfectly separated
    0.0
    >>> min_cllr([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4])
    0.5
    """
    y = as_binary_labels(labels, "labels")
    s = as_not_nan(scores, "scores")
    check_length_as_labels(y.size, s.size, "scores")
    w = as_weights(weights, y.size)
    require_both_classes(y, w, "minCllr")
    return _min_cllr(y, s, w)


def _min_cllr(y: np.ndarray, s: np.ndarray, w: np.ndarray) -> float:
    if bool(np.all(w == 1.0)):
        return _min_cllr_unit(y, s)
    from streamcal.isotonic.batch import pav_llr

    # PAV depends on the order of the scores only: ranks keep order and ties exactly and are
    # finite even where the scores are ±inf.
    # Events of weight 0 change neither the PAV solution of the others nor the Cllr: drop them.
    keep = w > 0.0
    y, s, w = y[keep], s[keep], w[keep]
    _, ranks = np.unique(s, return_inverse=True)
    llr = pav_llr(ranks.astype(np.float64), y, w, finite=False)
    return _cllr(y, np.asarray(llr, dtype=np.float64), w)


def _min_cllr_unit(y: np.ndarray, s: np.ndarray, work=None) -> float:
    """:func:`_min_cllr` for unit weights: the same PAV-LLR and the same sums, from one sort of
    the scores.

    PAV runs over the distinct sorted scores as in :func:`streamcal.isotonic.pav_llr` (tied
    scores pooled, each distinct score weighted by its number of events), reading each one's
    counts from the sorted scores (the positives' from the positives' sorted scores) as it
    reaches it. Its fitted values are constant over runs of distinct scores, its blocks; so are
    the LLRs and the costs of each class, which are computed once per block. One pass over the
    events finds each event's block (the last block whose lowest score is at or below its
    score, through a table over the scores' range) and writes its cost, by class, in event
    order; each class's costs are summed as :func:`_cllr` sums them: the result equals
    ``_min_cllr`` bit for bit. Two arrays of the window's length are written, the sorted scores
    and the costs (which first hold the positives' scores); ``work`` (a
    :class:`streamcal.metrics._window.WindowWork`) lends them and the blocks' arrays, else they
    are new.
    """
    from streamcal._kernels import _config
    from streamcal._kernels import metrics as _k
    from streamcal.isotonic.batch import _block_logit

    n = s.size
    s = np.ascontiguousarray(s, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)

    def array(name):
        return np.empty(n) if work is None else work.array(name, n)

    ordered = array("sorted")
    costs = array("costs")
    # the compiled radix sort (``costs`` its work until written below), else numpy's, in place
    if not (n >= _RADIX_MIN and _config.is_compiled() and _radix_sort(s, ordered, costs, work)):
        ordered[:] = s
        ordered.sort()
    ordered_pos = np.sort(costs[: _config.run(_k.positives, n, s, y, costs)])
    # per PAV block (the runs of equal fitted values: adjacent blocks' values differ); the
    # arrays are written only as far as the blocks go
    lowest, value, weight, block_pos, block_neg = (array(f"block {i}") for i in range(5))
    nb = _config.run(_k.pav_blocks_of_sorted, n, ordered, ordered_pos, lowest, value, weight, block_pos, block_neg)
    t1 = float(ordered_pos.size)
    t0 = float(n) - t1
    # each block's LLR as ``pav_llr`` computes it
    logit = _block_logit(value[:nb], block_pos[:nb], block_neg[:nb])
    llr = logit - (math.log(t1) - math.log(t0))
    cost_pos = np.logaddexp(0.0, -llr) / _LN2
    cost_neg = np.logaddexp(0.0, llr) / _LN2
    table = np.empty(32 * nb, dtype=np.int32)  # cells enough that few share a block boundary
    k = _config.run(
        _k.costs_in_event_order, n, s, y, np.ascontiguousarray(lowest[:nb]), cost_pos, cost_neg, table, costs
    )
    pos_sum = float(np.sum(costs[:k]))
    neg_sum = float(np.sum(costs[k:]))
    return 0.5 * (pos_sum / t1 + neg_sum / t0)


#: scores from which the radix sort replaces numpy's (below, its passes over the digits' buckets
#: cost more than the scores' own)
_RADIX_MIN = 4096


def _radix_sort(s: np.ndarray, out: np.ndarray, tmp: np.ndarray, work) -> bool:
    """``s`` (contiguous float64) sorted into ``out`` by the compiled radix sort (``tmp``: work of
    the same length); False, ``out`` unwritten, if ``s`` holds a NaN."""
    from streamcal._kernels import metrics as _k

    size = _k.RADIX_COUNTS
    counts = np.empty(size, dtype=np.int64) if work is None else work.array("radix", size, np.int64)
    return bool(_k.sort_float_bits(s.view(np.uint64), out.view(np.uint64), tmp.view(np.uint64), counts))


# up to this many bins, an event's bin is found by counting the bins' lower edges at or below its
# score, one vectorised comparison per edge; beyond, by binary search (on random scores a binary
# search costs about as much as 30 comparisons, its branches mispredicted)
_COUNTED_BLOCKS = 128


def _block_of(lowest: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The index of the last of ``lowest`` (sorted, ``lowest[0] <= x.min()``) at or below each x."""
    if lowest.size > min(_COUNTED_BLOCKS, 255):
        return np.searchsorted(lowest, x, side="right") - 1
    index = np.zeros(x.size, dtype=np.uint8)
    above = np.empty(x.size, dtype=bool)
    for start in lowest[1:]:
        np.greater_equal(x, start, out=above)
        index += above.view(np.uint8)
    return index


# --- binned metrics ----------------------------------------------------------------------


def uniform_bin_ids(proba: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-width bin of each probability: bin k is ``[k/n_bins, (k+1)/n_bins)``, the last is closed.

    The edges are ``k / n_bins`` rounded once (``numpy.arange(n_bins + 1) / n_bins``); the river
    metrics use the same edges, so both assign every value to the same bin.
    """
    edges = np.arange(n_bins + 1) / n_bins
    if n_bins > 64:
        return np.minimum(np.searchsorted(edges, proba, side="right") - 1, n_bins - 1)
    # the number of inner edges at or below each value: what the binary search finds
    return np.minimum(_block_of(edges[:-1], proba), n_bins - 1).astype(np.intp)


def quantile_bin_ids(proba: np.ndarray, w: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-mass bins: edges at the (weighted) ``k/n_bins`` quantiles of ``proba``.

    Edge k is the smallest value whose cumulative weight reaches ``k * W / n_bins`` (the inverted
    empirical CDF, as ``numpy.quantile(..., method="inverted_cdf")``; edges are data values).
    Bin 0 is ``[e_0, e_1]`` and bin k > 0 is ``(e_k, e_k+1]``: with unit weights and no ties,
    n events fall ``n / n_bins`` to a bin; equal values always share a bin, so with ties some
    bins stay empty. An event of weight 2 counts as two events.
    """
    keep = w > 0.0
    order = np.argsort(proba[keep], kind="stable")
    sorted_p = proba[keep][order]
    cum = np.cumsum(w[keep][order])
    targets = np.arange(1, n_bins) * cum[-1] / n_bins  # k * W first: exact for integer weights
    inner = sorted_p[np.minimum(np.searchsorted(cum, targets, side="left"), sorted_p.size - 1)]
    return np.searchsorted(inner, proba, side="left")


def _bin_ids(proba, w, n_bins, strategy):
    if strategy == "uniform":
        return uniform_bin_ids(proba, n_bins)
    return quantile_bin_ids(proba, w, n_bins)


def _check_bins(n_bins, strategy, name="n_bins"):
    check_scalar(n_bins, name, numbers.Integral, low=1)
    check_scalar(strategy, "strategy", choices=("uniform", "quantile"))


def ece(labels, proba, n_bins: int = 10, strategy: str = "uniform", weights=None) -> float:
    """Expected calibration error with equal-width or equal-mass bins.

    ``ECE = sum over bins b of (W_b / W) * |mean label in b - mean proba in b|`` (weighted means,
    ``W_b`` the weight in bin b, empty bins contribute 0).

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels.
    proba : array-like of shape (n,)
        Probabilities of the positive class, in [0, 1].
    n_bins : int, default 10
        Number of bins (>= 1).
    strategy : {"uniform", "quantile"}, default "uniform"
        ``"uniform"``: equal-width bins ``[k/n_bins, (k+1)/n_bins)`` (the last one closed).
        ``"quantile"``: equal-mass bins with edges at the weighted quantiles of ``proba``
        (inverted empirical CDF; ties share a bin, so bins can be empty).
    weights : array-like of shape (n,), optional
        Non-negative sample weights.

    Returns
    -------
    float
        The ECE, in [0, 1].

    Examples
    --------
    >>> from streamcal.metrics import ece
    >>> round(ece([0, 0, 1, 1], [0.1, 0.2, 0.7, 0.9]), 4)
    0.175
    >>> round(ece([0, 0, 1, 1], [0.1, 0.2, 0.7, 0.9], n_bins=2, strategy="quantile"), 4)
    0.175
    """
    y, p, w = labels_proba_weights(labels, proba, weights)
    _check_bins(n_bins, strategy)
    ids = _bin_ids(p, w, n_bins, strategy)
    if weights is None:
        sum_y = np.bincount(ids, weights=y, minlength=n_bins)
        sum_p = np.bincount(ids, weights=p, minlength=n_bins)
        return float(np.sum(np.abs(sum_y - sum_p)) / float(y.size))
    sum_y = np.bincount(ids, weights=w * y, minlength=n_bins)
    sum_p = np.bincount(ids, weights=w * p, minlength=n_bins)
    return float(np.sum(np.abs(sum_y - sum_p)) / np.sum(w))


def calibration_loss(labels, proba, weights=None, *, n_bins: int = 10) -> float:
    """The binned calibration loss of Agarwal et al. (ICML 2014, §4.2).

    Each event goes to one of 10 equal-width bins by its predicted probability (bin k is
    ``[k/10, (k+1)/10)``, the last one ``[0.9, 1]``); the fraction of positives in its bin is the
    event's "proxy" true probability ``η̃``; the loss is the mean squared difference
    ``(1/n) sum_i (p_i - η̃_i)**2``. (The paper's formula was lost in our copy of the text; this
    is the definition its prose describes, after Hernández-Orallo et al., 2012. Equivalently, the
    Brier score's calibration term plus the within-bin variance of the predictions.)

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels.
    proba : array-like of shape (n,)
        Probabilities of the positive class, in [0, 1].
    weights : array-like of shape (n,), optional
        Non-negative sample weights (weighted bin fractions and weighted mean).
    n_bins : int, default 10
        The paper uses 10.

    Returns
    -------
    float

    Examples
    --------
    >>> from streamcal.metrics import calibration_loss
    >>> round(calibration_loss([0, 1, 0, 1], [0.12, 0.18, 0.81, 0.85]), 5)
    0.11635
    """
    y, p, w = labels_proba_weights(labels, proba, weights)
    check_scalar(n_bins, "n_bins", numbers.Integral, low=1)
    ids = uniform_bin_ids(p, n_bins)
    unit = weights is None
    sum_w = (
        np.bincount(ids, minlength=n_bins).astype(np.float64) if unit else np.bincount(ids, weights=w, minlength=n_bins)
    )
    sum_y = np.bincount(ids, weights=y if unit else w * y, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(sum_w > 0.0, sum_y / sum_w, 0.0)
    if unit:
        return float(np.sum((p - frac[ids]) ** 2) / float(y.size))
    return float(np.sum(w * (p - frac[ids]) ** 2) / np.sum(w))


def hosmer_lemeshow(
    labels, proba, n_groups: int = 10, *, strategy: str = "quantile", weights=None
) -> tuple[float, float]:
    """The Hosmer–Lemeshow goodness-of-fit statistic and its chi-square p-value.

    Events are grouped by predicted probability; in each group g with ``n_g`` events, ``O1``
    observed and ``E1 = sum p`` expected positives (``O0``, ``E0`` likewise for negatives),
    ``HL = sum_g (O1 - E1)**2 / E1 + (O0 - E0)**2 / E0``. A term with ``E = 0`` counts 0 if
    ``O = 0`` too, else ``inf``. The p-value is ``chi2.sf(HL, dof)`` with
    ``dof = (number of non-empty groups) - 2``, i.e. ``n_groups - 2`` unless ties leave a group
    empty; it is NaN when ``dof < 1``.

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels.
    proba : array-like of shape (n,)
        Probabilities of the positive class, in [0, 1].
    n_groups : int, default 10
        Number of groups (>= 1; the p-value needs >= 3).
    strategy : {"quantile", "uniform"}, default "quantile"
        ``"quantile"``: the "deciles of risk" (Hosmer–Lemeshow's Ĉ), groups of equal mass with
        edges at quantiles of ``proba`` as in :func:`ece`. ``"uniform"``: fixed equal-width cut
        points (their Ĥ), the grouping the streaming :class:`HosmerLemeshow` keeps in O(n_groups).
    weights : array-like of shape (n,), optional
        Frequency weights (an event of weight 2 counts as two events). The chi-square
        reference distribution assumes counts.

    Returns
    -------
    (float, float)
        The statistic and the p-value.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.metrics import hosmer_lemeshow
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.05, 0.95, 2000)
    >>> y = rng.uniform(size=2000) < p          # calibrated: a large p-value
    >>> stat, pvalue = hosmer_lemeshow(y, p)
    >>> pvalue > 0.05
    True
    >>> stat, pvalue = hosmer_lemeshow(y, p**2)  # miscalibrated: a tiny one
    >>> pvalue < 1e-6
    True
    """
    y, p, w = labels_proba_weights(labels, proba, weights)
    _check_bins(n_groups, strategy, "n_groups")
    ids = _bin_ids(p, w, n_groups, strategy)
    return hl_from_sums(
        np.bincount(ids, weights=w, minlength=n_groups),
        np.bincount(ids, weights=w * y, minlength=n_groups),
        np.bincount(ids, weights=w * p, minlength=n_groups),
        np.bincount(ids, weights=w * (1.0 - y), minlength=n_groups),
        np.bincount(ids, weights=w * (1.0 - p), minlength=n_groups),
    )


def hl_from_sums(n, o1, e1, o0, e0) -> tuple[float, float]:
    """Hosmer–Lemeshow statistic and p-value from per-group totals (shared with the river metric)."""
    n, o1, e1, o0, e0 = (np.asarray(a, dtype=np.float64) for a in (n, o1, e1, o0, e0))
    nonempty = n > 0.0
    stat = float(np.sum(_chi_terms(o1[nonempty], e1[nonempty]) + _chi_terms(o0[nonempty], e0[nonempty])))
    dof = int(np.count_nonzero(nonempty)) - 2
    from scipy import stats  # here, not at import: scipy.stats takes most of a second to load

    pvalue = float(stats.chi2.sf(stat, dof)) if dof >= 1 else math.nan
    return stat, pvalue


def _chi_terms(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a tiny expected: inf, as it is
        terms = (observed - expected) ** 2 / expected
    return np.where(expected > 0.0, terms, np.where(observed > 0.0, np.inf, 0.0))
