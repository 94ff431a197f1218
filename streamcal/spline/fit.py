"""The I-spline smoothing fit (Wu et al., 2012): constrained least squares on an I-spline basis.

Given scores ``s`` with labels ``c`` and weights ``w``, find the map

    f(s) = alpha_0 + sum_{i=1..q} alpha_i I_i(s)

minimising ``sum w (c - f(s))^2`` subject to ``alpha_i >= 0`` for every ``i`` *including*
``alpha_0``, and ``alpha_0 + sum alpha_i <= 1``. Because each ``I_i`` rises from 0 at the lowest
score to 1 at the highest, ``f`` runs from ``f(L) = alpha_0`` to ``f(U) = alpha_0 + sum alpha_i``:
it lies in [0, 1] exactly when ``alpha_0 >= 0`` and the sum is at most 1, so ``alpha_0 >= 0`` is
needed too (without it the fit can go below 0 at the lowest scores). This is the paper's space
Omega with the constant ``I_0 = 1`` as one of its basis functions.

The quadratic programme is small (``q + 1`` unknowns); it is solved exactly by an active-set
(Lawson-Hanson NNLS style) kernel on its normal equations, which are built in
``O(n order^2 + q^2)`` (see :mod:`streamcal._kernels.ispline`). Everything is fitted from weighted
*distinct* scores: a histogram of bucket centres with positive and negative weights is the same
problem as the events behind it, so the streaming calibrator refits from its bucket histogram.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from streamcal._kernels.ispline import (
    bspline_combination_clamped,
    ispline_gram_clamped,
    nnls_sum_capped_gram,
    nnls_sum_capped_gram_warm,
)
from streamcal._validation import (
    as_binary_labels,
    as_finite,
    as_nonneg_weights,
    check_same_length,
    check_scalar,
)
from streamcal.spline.basis import default_n_knots, knot_vector, quantile_knots

__all__ = ["ISplineMap", "fit_ispline", "fit_ispline_on_histogram", "warmup"]


@dataclass(frozen=True, eq=False)
class ISplineMap:
    """A fitted monotone I-spline map ``f(s) = coef[0] + sum_i coef[i] I_i(s)`` into [0, 1].

    Attributes
    ----------
    knots : ndarray
        The clamped knot vector (bounds repeated ``order + 1`` times).
    order : int
        Order of the M-splines; the I-splines have degree ``order``.
    coef : ndarray
        ``alpha_0, alpha_1, ..., alpha_q``: all >= 0 with sum <= 1.
    n_iter : int
        Subproblem solves the active-set kernel used.
    """

    knots: np.ndarray
    order: int
    coef: np.ndarray
    n_iter: int = 0
    bspline_coef: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        # f = sum_j beta_j B_{j, order + 1} with beta = cumsum(alpha): non-decreasing, in [0, 1]
        beta = np.minimum(np.cumsum(self.coef), 1.0)
        object.__setattr__(self, "bspline_coef", np.ascontiguousarray(beta))

    @property
    def interior_knots(self) -> np.ndarray:
        """The interior knots (without the repeated bounds)."""
        return self.knots[self.order + 1 : self.knots.size - self.order - 1]

    def predict(self, scores) -> np.ndarray:
        """Calibrated probabilities ``f(scores)``; constant beyond the fitted score range."""
        x = as_finite(scores, "scores", allow_empty=True)
        return evaluate_map(x, self.knots, self.order, self.bspline_coef)


def evaluate_map(x: np.ndarray, knots: np.ndarray, order: int, bspline_coef: np.ndarray):
    """Evaluate a fitted map at finite float64 ``x`` (no validation); result clipped into [0, 1]."""
    out = np.empty(x.size)
    bspline_combination_clamped(x, knots, order + 1, bspline_coef, out)
    return np.minimum(np.maximum(out, 0.0, out=out), 1.0, out=out)  # np.clip, without its wrapper


def _check_order_and_knots(order, n_knots, knots):
    check_scalar(order, "order", numbers.Integral, low=1)
    if n_knots is not None:
        check_scalar(n_knots, "n_knots", numbers.Integral, low=0)
    if knots is not None:
        inner = as_finite(knots, "knots", allow_empty=True)
        bad = np.flatnonzero(np.diff(inner) <= 0.0)
        if bad.size:
            i = int(bad[0]) + 1
            msg = f"`knots` must be strictly increasing; got {float(inner[i])!r} at position {i}."
            raise ValueError(msg)
        return inner
    return None


def fit_distinct(
    values: np.ndarray,
    weights: np.ndarray,
    means: np.ndarray,
    n_obs: float,
    order: int = 3,
    n_knots: int | None = None,
    knots: np.ndarray | None = None,
    free_hint: np.ndarray | None = None,
) -> ISplineMap:
    """Fit on sorted distinct ``values`` with positive ``weights`` and label ``means``.

    No validation.

    ``n_obs`` feeds the paper's knot count ``max(1, floor(n^(1/3) - 4))`` when neither ``n_knots``
    nor ``knots`` is given; the count is capped at ``len(values) - order - 1`` so that the basis
    does not outnumber the distinct scores. Given ``knots`` keep only those strictly inside the
    score range. ``free_hint`` (bool, one per coefficient) warm-starts the solver with the
    coefficients expected to be positive, e.g. the previous fit's; ignored if its size differs.
    """
    lower = float(values[0])
    upper = float(values[-1])
    if not upper > lower:  # one distinct score: a constant map
        upper = lower + max(1.0, abs(lower))
        interior = np.empty(0)
    elif knots is not None:
        interior = knots[(knots > lower) & (knots < upper)]
    else:
        wanted = default_n_knots(n_obs) if n_knots is None else int(n_knots)
        wanted = min(wanted, max(0, values.size - order - 1))
        interior = quantile_knots(values, weights, wanted)
    t = knot_vector(interior, lower, upper, order)
    p = t.size - order - 1
    gram = np.empty((p, p))
    rhs = np.empty(p)
    ispline_gram_clamped(values, weights, means, t, int(order), gram, rhs)
    coef = np.empty(p)
    if free_hint is not None and free_hint.size == p:
        n_iter = nnls_sum_capped_gram_warm(gram, rhs, 1.0, coef, free_hint.copy())
    else:
        n_iter = nnls_sum_capped_gram(gram, rhs, 1.0, coef)
    return ISplineMap(knots=t, order=int(order), coef=coef, n_iter=int(n_iter))


def aggregate_sorted(x: np.ndarray, pos: np.ndarray, neg: np.ndarray):
    """Merge equal scores: return sorted distinct scores with positive total weight, their total
    weights and label means ``pos / (pos + neg)``."""
    order_ = np.argsort(x)
    xs = x[order_]
    starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1])))
    values = xs[starts]
    pos_sum = np.add.reduceat(pos[order_], starts) if xs.size else np.empty(0)
    neg_sum = np.add.reduceat(neg[order_], starts) if xs.size else np.empty(0)
    total = pos_sum + neg_sum
    keep = total > 0.0
    values = np.ascontiguousarray(values[keep])
    total = np.ascontiguousarray(total[keep])
    means = np.ascontiguousarray(pos_sum[keep] / total)
    return values, total, means


def fit_ispline_on_histogram(
    centres, pos, neg, *, order: int = 3, n_knots: int | None = None, knots=None
) -> ISplineMap:
    """Fit the I-spline map to a score histogram: bucket centres with positive and negative weight.

    Each bucket contributes its label mean ``pos / (pos + neg)`` with weight ``pos + neg``, which is
    the same least-squares problem as the events in it if they all had the bucket's centre as
    score. Empty buckets are ignored. The paper's knot count uses ``n = sum(pos + neg)``.

    Parameters
    ----------
    centres : array-like
        Bucket centres (representative scores), finite, in any order.
    pos, neg : array-like
        Non-negative positive and negative weight per bucket; their total must be positive.
    order : int, default 3
        M-spline order; the I-splines have degree ``order`` (3: the paper's cubic I-splines).
    n_knots : int, optional
        Number of interior knots, at weighted score quantiles.
        Default: ``max(1, floor(n^(1/3) - 4))``.
    knots : array-like, optional
        Explicit strictly increasing interior knots (those outside the score range are dropped).

    Returns
    -------
    ISplineMap

    Examples
    --------
    >>> centres = [0.1, 0.3, 0.5, 0.7, 0.9]
    >>> fitted = fit_ispline_on_histogram(centres, [1, 2, 5, 8, 9], [9, 8, 5, 2, 1], n_knots=1)
    >>> fitted.predict([0.1, 0.5, 0.9]).round(3)
    array([0.088, 0.5  , 0.912])
    """
    inner = _check_order_and_knots(order, n_knots, knots)
    x = as_finite(centres, "centres")
    p = as_nonneg_weights(pos, "pos", x.size)
    n = as_nonneg_weights(neg, "neg", x.size)
    total = float(p.sum() + n.sum())
    if not total > 0.0:
        msg = f"`pos` and `neg` must hold some positive weight; got a total of {total!r}."
        raise ValueError(msg)
    values, weights, means = aggregate_sorted(x, p, n)
    return fit_distinct(values, weights, means, total, order, n_knots, inner)


def unit_scaled(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``(pos, neg, total, pos_total)`` of a histogram, the weights scaled by a power of two when
    their total is beyond ``2**±500``; the totals are the unscaled ones.

    The least-squares fit does not change when every weight is scaled alike; scaled, the solver's
    sums and products neither overflow nor lose their bits among subnormals.
    """
    pos_sum = pos.sum()
    total, pos_total = float(pos_sum + neg.sum()), float(pos_sum)
    if total > 0.0 and not 2.0**-500 < total < 2.0**500:
        k = -math.frexp(total)[1]
        pos, neg = np.ldexp(pos, k), np.ldexp(neg, k)
    return pos, neg, total, pos_total


def fit_scaled_histogram(centres, pos, neg, total, order, n_knots, inner, hint) -> ISplineMap:
    """:func:`fit_distinct` on the non-empty buckets of a :func:`unit_scaled` histogram: in Python,
    the steps the streaming I-spline calibrator's compiled refit takes (its reference)."""
    weight = pos + neg
    keep = weight > 0.0
    w = np.ascontiguousarray(weight[keep])
    means = np.ascontiguousarray(pos[keep] / w)
    return fit_distinct(np.ascontiguousarray(centres[keep]), w, means, total, order, n_knots, inner, hint)


def fit_ispline(
    scores, labels, sample_weight=None, *, order: int = 3, n_knots: int | None = None, knots=None
) -> ISplineMap:
    """Fit the I-spline map to raw events (scores, binary labels, optional weights).

    The paper's knot count uses ``n`` = the number of events with positive weight; knots sit at
    weighted score quantiles. See :func:`fit_ispline_on_histogram` for the parameters.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=500)
    >>> y = rng.random(500) < 1 / (1 + np.exp(-2 * s))
    >>> f = fit_ispline(s, y)
    >>> bool(np.all(np.diff(f.predict(np.linspace(-3, 3, 50))) >= 0))
    True
    """
    inner = _check_order_and_knots(order, n_knots, knots)
    x = as_finite(scores, "scores")
    y = as_binary_labels(labels, "labels")
    check_same_length(x.size, y.size, "labels")
    w = as_nonneg_weights(sample_weight, "sample_weight", x.size)
    if not w.sum() > 0.0:
        msg = "`sample_weight` must hold some positive weight; got all zeros."
        raise ValueError(msg)
    values, weights, means = aggregate_sorted(x, w * y, w * (1.0 - y))
    return fit_distinct(values, weights, means, float(np.count_nonzero(w)), order, n_knots, inner)


def warmup() -> None:
    """Compile (or load from numba's cache) every I-spline kernel, so later calls run at full speed.

    Examples
    --------
    >>> warmup()
    """
    from streamcal.spline.basis import ispline_basis, mspline_basis

    fitted = fit_ispline_on_histogram([0.0, 0.5, 1.0, 1.5, 2.0], [1, 2, 3, 4, 5], [5, 4, 3, 2, 1])
    fitted.predict([0.1, 3.0])
    ispline_basis([0.5], fitted.knots, fitted.order)
    mspline_basis([0.5], fitted.knots, fitted.order)
