"""``ISplineCalibrator``: I-spline smoothing calibration (paper 003) of binary scores."""

from __future__ import annotations

import numbers

import numpy as np

from streamcal._validation import (
    as_binary_labels,
    as_finite,
    as_nonneg_weights,
    check_same_length,
    check_scalar,
)
from streamcal.spline.fit import aggregate_sorted, evaluate_map, fit_distinct

__all__ = ["ISplineCalibrator"]


class ISplineCalibrator:
    """Smooth, monotone calibration of scores by I-spline least squares (paper 003).

    The calibrated probability is ``f(s) = alpha_0 + sum_i alpha_i I_i(s)`` with cubic (by default)
    I-splines ``I_i`` on knots at score quantiles, ``alpha >= 0`` and ``sum(alpha) <= 1``, fitted by
    weighted least squares of the labels: monotone, inside [0, 1] and smooth, and strictly
    increasing wherever some ``alpha_i > 0`` covers the score, so unlike isotonic regression it
    does not tie scores together (it keeps the ranking and the AUC there). The LLR is
    ``logit(f) - logit(prior)`` with ``prior`` the positive share of the training weight, made
    finite by one pseudo-positive and one pseudo-negative: ``p = (f W + 1) / (W + 2)`` and
    ``prior = (W1 + 1) / (W + 2)`` for training weight ``W``, of which ``W1`` is positive.

    Parameters
    ----------
    order : int, default 3
        Order of the M-splines; the I-splines have degree ``order`` (3: the paper's cubic ones).
    n_knots : int, optional
        Number of interior knots, placed at weighted score quantiles. Default: the paper's
        ``max(1, floor(n^(1/3) - 4))`` for ``n`` training events, capped so that the basis does not
        outnumber the distinct scores.
    knots : array-like, optional
        Explicit strictly increasing interior knots, overriding ``n_knots`` (knots outside the
        training score range are dropped).

    Attributes
    ----------
    knots_ : ndarray
        The clamped knot vector of the fitted map (``None`` before fitting).
    coef_ : ndarray
        ``alpha_0, ..., alpha_q`` (``None`` before fitting).

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal import ISplineCalibrator
    >>> rng = np.random.default_rng(7)
    >>> scores = rng.normal(size=2000)
    >>> labels = rng.random(2000) < 1 / (1 + np.exp(-(2 * scores - 1)))
    >>> cal = ISplineCalibrator().fit(scores, labels)
    >>> cal.predict_proba([-2.0, 0.0, 0.5, 2.0]).round(2)
    array([0.01, 0.28, 0.5 , 0.96])
    >>> bool(np.all(np.diff(cal.predict_llr(np.linspace(-3, 3, 61))) > 0))
    True

    References
    ----------
    Wu, Jiang, Kim, Ohno-Machado, *I-spline smoothing for calibrating predictive models*, AMIA Joint
    Summits on Translational Science (2012). Ramsay, *Monotone regression splines in action*,
    Statistical Science (1988).
    """

    def __init__(self, order: int = 3, n_knots: int | None = None, knots=None):
        self.order = order
        self.n_knots = n_knots
        self.knots = knots
        self._knots = None
        self._coef = None
        self._bspline_coef = None
        self._weight = 0.0
        self._pos_weight = 0.0

    # ------------------------------------------------------------------ fitting

    def _check_params(self):
        check_scalar(self.order, "order", numbers.Integral, low=1)
        if self.n_knots is not None:
            check_scalar(self.n_knots, "n_knots", numbers.Integral, low=0)
        if self.knots is None:
            return None
        inner = as_finite(self.knots, "knots", allow_empty=True)
        bad = np.flatnonzero(np.diff(inner) <= 0.0)
        if bad.size:
            i = int(bad[0]) + 1
            msg = f"`knots` must be strictly increasing; got {float(inner[i])!r} at position {i}."
            raise ValueError(msg)
        return inner

    def fit(self, scores, labels, sample_weight=None) -> ISplineCalibrator:
        """Fit the map to scores with binary labels (and optional non-negative weights).

        Replaces any earlier fit. Nothing changes if the input is rejected.
        """
        inner = self._check_params()
        x = as_finite(scores, "scores")
        y = as_binary_labels(labels, "labels")
        check_same_length(x.size, y.size, "labels")
        w = as_nonneg_weights(sample_weight, "sample_weight", x.size)
        total = float(w.sum())
        if not total > 0.0:
            msg = "`sample_weight` must hold some positive weight; got all zeros."
            raise ValueError(msg)
        values, weights, means = aggregate_sorted(x, w * y, w * (1.0 - y))
        fitted = fit_distinct(
            values, weights, means, float(np.count_nonzero(w)), self.order, self.n_knots, inner
        )
        self._knots = fitted.knots
        self._coef = fitted.coef
        self._bspline_coef = fitted.bspline_coef
        self._weight = total
        self._pos_weight = float(np.dot(w, y))
        return self

    # ------------------------------------------------------------------ prediction

    @property
    def knots_(self):
        return None if self._knots is None else self._knots.copy()

    @property
    def coef_(self):
        return None if self._coef is None else self._coef.copy()

    def _proba(self, x: np.ndarray) -> np.ndarray:
        if self._knots is None:
            return np.full(x.size, 0.5)
        return evaluate_map(x, self._knots, int(self.order), self._bspline_coef)

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probabilities of the positive class (0.5 everywhere before any fit)."""
        return self._proba(as_finite(scores, "scores", allow_empty=True))

    def predict_llr(self, scores) -> np.ndarray:
        """Calibrated finite log-likelihood ratios ``logit(p) - logit(prior)`` (0 before a fit)."""
        x = as_finite(scores, "scores", allow_empty=True)
        p = self._proba(x)
        total = self._weight
        p = (p * total + 1.0) / (total + 2.0)
        prior = (self._pos_weight + 1.0) / (total + 2.0)
        return np.log(p) - np.log1p(-p) - (np.log(prior) - np.log1p(-prior))
