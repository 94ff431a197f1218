"""Regular binary proper scoring rules (Brümmer & du Preez, 2013, §1.2) for a given weighting.

Paper 001 writes a regular binary proper scoring rule (RBPSR) through a probability density ρ
on [0, 1]:

    C(θ1, q) = ∫_q^1 ρ(c)/c dc          (cost of probability q when the label is positive)
    C(θ2, q) = ∫_0^q ρ(c)/(1 - c) dc    (cost when the label is negative)

Here a rule is given by a *weight function* w(c) (Buja et al., 2005), with ρ(c) ∝ c(1 - c) w(c):

    L1(q) = ∫_q^1 (1 - c) w(c) dc,      L0(q) = ∫_0^q c w(c) dc.

**Normalisation.** With ``normalize=True`` (the default) the costs are divided by
``Z = ∫_0^1 c(1 - c) w(c) dc`` so that ρ integrates to 1, exactly as in Brümmer & du Preez (2013): the Beta
weights ``a = b = 0`` (w = 1/(c(1 - c)), ρ = 1) then give the log loss in nats, and ``a = b = 1``
(ρ = 6c(1 - c)) gives 3 × the Brier score. With ``normalize=False`` the costs are the raw
integrals L1, L0 (``a = b = 1`` gives ½ × Brier). Threshold rules (ρ a Dirac at t) are
normalised by construction: a positive below or at t costs 1/t, a negative above t costs
1/(1 - t).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from streamcal._validation import as_probabilities, check_scalar
from streamcal.metrics._array import _weighted_mean
from streamcal.metrics._inputs import labels_proba_weights

__all__ = [
    "BetaWeighting",
    "ThresholdWeighting",
    "beta_scoring_rule",
    "partial_losses",
    "proper_scoring_rule",
    "threshold_cost",
]


class BetaWeighting:
    """The Beta family of weights ``w(c) = c**(a - 1) * (1 - c)**(b - 1)`` (Buja et al., 2005).

    ``a = b = 0`` is the logarithmic rule (log loss), ``a = b = 1`` the quadratic (Brier) rule,
    ``a = b = 1/2`` the boosting loss; large equal ``a = b`` approach the misclassification cost
    at ½, and ``a != b`` put the emphasis on one end (``a > b``: high probabilities). The rule is
    regular for ``a, b > -1``. Costs are evaluated in closed form with the regularised incomplete
    Beta function (and its recurrence for ``a`` or ``b`` in (-1, 0)); only ``a = 0`` with
    ``b != 0`` (or ``b = 0`` with ``a != 0``) falls back to quadrature for the side concerned.

    Parameters
    ----------
    a, b : float
        Exponents, both > -1.

    Examples
    --------
    >>> from streamcal.metrics import BetaWeighting, partial_losses
    >>> target, nontarget = partial_losses([0.25, 0.5], BetaWeighting(1, 1))
    >>> target.round(4).tolist(), nontarget.round(4).tolist()   # 3 (1 - q)**2 and 3 q**2
    ([1.6875, 0.75], [0.1875, 0.75])
    """

    def _check_loaded_state(self) -> None:
        # the constructor only checks and stores the parameters
        from streamcal import _state_check as c

        c.check_like_fresh(self)

    def __init__(self, a: float, b: float):
        self.a = check_scalar(a, "a", low=-1.0, low_inclusive=False)
        self.b = check_scalar(b, "b", low=-1.0, low_inclusive=False)

    def __repr__(self) -> str:
        return f"BetaWeighting(a={self.a!r}, b={self.b!r})"

    def __call__(self, c):
        c = np.asarray(c, dtype=np.float64)
        return c ** (self.a - 1.0) * (1.0 - c) ** (self.b - 1.0)

    def normaliser(self) -> float:
        """``Z = ∫ c(1 - c) w(c) dc = B(a + 1, b + 1)``."""
        from scipy import special

        return float(special.beta(self.a + 1.0, self.b + 1.0))

    def raw_partial_losses(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = float(self.a), float(self.b)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            target = _upper(q, a, b + 1.0)
            nontarget = _lower(q, a + 1.0, b)
        return target, nontarget


class ThresholdWeighting:
    """The threshold (Dirac) rule: the cost of Bayes decisions at probability threshold ``t``.

    ρ = δ(c - t). Probability q decides "positive" when ``q > t``: a positive with ``q <= t``
    (a miss) costs ``1/t``, a negative with ``q > t`` (a false alarm) costs ``1/(1 - t)``, all
    else costs 0. The costs ``1/t`` and ``1/(1 - t)`` make the rule a normalised RBPSR (ρ
    integrates to 1) and make both errors cost the same when ``q`` equals the true probability
    ``t``. Non-strict, discontinuous, not convex — and still optimised by PAV (Brümmer & du Preez, 2013).

    Parameters
    ----------
    threshold : float
        In (0, 1).

    Examples
    --------
    >>> from streamcal.metrics import ThresholdWeighting, partial_losses
    >>> target, nontarget = partial_losses([0.1, 0.25, 0.9], ThresholdWeighting(0.25))
    >>> target.tolist(), nontarget.round(4).tolist()
    ([4.0, 4.0, 0.0], [0.0, 0.0, 1.3333])
    """

    def _check_loaded_state(self) -> None:
        # the constructor only checks and stores the parameters
        from streamcal import _state_check as c

        c.check_like_fresh(self)

    def __init__(self, threshold: float):
        self.threshold = check_scalar(
            threshold, "threshold", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
        )

    def __repr__(self) -> str:
        return f"ThresholdWeighting(threshold={self.threshold!r})"

    def raw_partial_losses(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = float(self.threshold)
        target = np.where(q <= t, 1.0 / t, 0.0)
        nontarget = np.where(q > t, 1.0 / (1.0 - t), 0.0)
        return target, nontarget

    def normaliser(self) -> float:
        return 1.0


def partial_losses(proba, weighting, *, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The two partial losses of a proper scoring rule at each probability.

    Parameters
    ----------
    proba : array-like of shape (n,)
        Probabilities q in [0, 1] (empty allowed).
    weighting : BetaWeighting, ThresholdWeighting or callable
        The rule. A callable ``w(c)`` is a weight function on (0, 1), evaluated by adaptive
        quadrature (``scipy.integrate.quad``, one integral per gap between distinct
        probabilities, so the cost grows with the number of distinct values). Its integrals
        ``∫ (1 - c) w(c) dc`` near 0 and ``∫ c w(c) dc`` near 1 must be finite for the costs at
        ``q = 0`` (positive) and ``q = 1`` (negative) to be; use :class:`BetaWeighting` for
        rules such as the log loss whose costs there are infinite.
    normalize : bool, default True
        Divide by ``Z = ∫ c(1 - c) w(c) dc`` (Brümmer and du Preez's normalisation, ρ a density).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The cost when the label is positive, ``C(θ1, q)``, and when it is negative, ``C(θ2, q)``.

    Examples
    --------
    >>> from streamcal.metrics import BetaWeighting, partial_losses
    >>> target, nontarget = partial_losses([0.0, 0.5, 1.0], BetaWeighting(0, 0))  # log loss
    >>> target.round(4).tolist(), nontarget.round(4).tolist()
    ([inf, 0.6931, 0.0], [0.0, 0.6931, inf])
    """
    q = as_probabilities(proba, "proba", allow_empty=True)
    return _partial_losses(q, _check_weighting(weighting), normalize)


def _check_weighting(weighting):
    if isinstance(weighting, (BetaWeighting, ThresholdWeighting)) or callable(weighting):
        return weighting
    msg = (
        "`weighting` must be a BetaWeighting, a ThresholdWeighting or a callable weight "
        f"function w(c); got {weighting!r}."
    )
    raise TypeError(msg)


def _partial_losses(q: np.ndarray, weighting, normalize: bool):
    check_scalar(normalize, "normalize", choices=(True, False))
    if isinstance(weighting, (BetaWeighting, ThresholdWeighting)):
        target, nontarget = weighting.raw_partial_losses(q)
        z = weighting.normaliser()
    else:
        target, nontarget = _quad_partial_losses(q, weighting)
        z = _quad(lambda c: c * (1.0 - c) * weighting(c), 0.0, 1.0)
        if not (math.isfinite(z) and z > 0.0):
            msg = f"`weighting` must have a finite, positive ∫ c(1 - c) w(c) dc; got {z!r}."
            raise ValueError(msg)
    if normalize:
        target, nontarget = target / z, nontarget / z
    return target, nontarget


def proper_scoring_rule(labels, proba, weighting, weights=None, *, normalize: bool = True) -> float:
    """The mean cost of probabilities under a regular binary proper scoring rule (Brümmer & du Preez, 2013).

    Parameters
    ----------
    labels : array-like of shape (n,)
        Binary labels.
    proba : array-like of shape (n,)
        Probabilities of the positive class, in [0, 1].
    weighting : BetaWeighting, ThresholdWeighting or callable
        The rule (see :func:`partial_losses`).
    weights : array-like of shape (n,), optional
        Non-negative sample weights.
    normalize : bool, default True
        Paper 001's normalisation (ρ integrates to 1); see the module notes.

    Returns
    -------
    float
        ``sum(w * C(label, q)) / sum(w)``; may be ``inf``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.metrics import BetaWeighting, proper_scoring_rule
    >>> y, p = [0, 1, 1], [0.1, 0.8, 0.6]
    >>> round(proper_scoring_rule(y, p, BetaWeighting(0, 0)), 4)      # the log loss
    0.2798
    >>> round(proper_scoring_rule(y, p, lambda c: np.ones_like(c)), 4)  # 3 x the Brier score
    0.21
    """
    y, q, w = labels_proba_weights(labels, proba, weights)
    target, nontarget = _partial_losses(q, _check_weighting(weighting), normalize)
    return _weighted_mean(np.where(y == 1.0, target, nontarget), w)


def beta_scoring_rule(
    labels, proba, a: float, b: float, weights=None, *, normalize: bool = True
) -> float:
    """The Beta-family proper scoring rule, ``w(c) = c**(a - 1) (1 - c)**(b - 1)``, in closed form.

    Shorthand for ``proper_scoring_rule(labels, proba, BetaWeighting(a, b), ...)``.

    Examples
    --------
    >>> from streamcal.metrics import beta_scoring_rule
    >>> y, p = [0, 1, 1], [0.1, 0.8, 0.6]
    >>> round(beta_scoring_rule(y, p, 1, 1, normalize=False), 4)   # half the Brier score
    0.035
    >>> round(beta_scoring_rule(y, p, 2, 1), 4)   # emphasis on high probabilities
    0.3053
    """
    return proper_scoring_rule(labels, proba, BetaWeighting(a, b), weights, normalize=normalize)


def threshold_cost(labels, proba, threshold: float, weights=None) -> float:
    """The normalised misclassification cost of deciding "positive" when ``proba > threshold``.

    Misses cost ``1/threshold`` and false alarms ``1/(1 - threshold)`` (see
    :class:`ThresholdWeighting`).

    Examples
    --------
    >>> from streamcal.metrics import threshold_cost
    >>> threshold_cost([0, 1, 1, 0], [0.1, 0.8, 0.4, 0.6], 0.5)   # one miss, one false alarm
    1.0
    """
    return proper_scoring_rule(labels, proba, ThresholdWeighting(threshold), weights)


# --- closed forms ------------------------------------------------------------------------


def _upper(q: np.ndarray, p: float, s: float) -> np.ndarray:
    """``∫_q^1 c**(p-1) (1-c)**(s-1) dc`` for ``p > -1``, ``s > 0``."""
    from scipy import special

    if p > 0.0:
        return special.beta(p, s) * special.betaincc(p, s, q)
    if p < 0.0:
        # B_x(p, s) = ((p + s) B_x(p + 1, s) + x**p (1 - x)**s) / p, continued to p in (-1, 0)
        return (q**p * (1.0 - q) ** s - (p + s) * _upper(q, p + 1.0, s)) / (-p)
    if s == 1.0:
        return -np.log(q) + 0.0  # + 0.0: no -0.0 at q = 1
    return _quad_each(q, lambda c: c ** (p - 1.0) * (1.0 - c) ** (s - 1.0), upper=True)


def _lower(q: np.ndarray, p: float, s: float) -> np.ndarray:
    """``∫_0^q c**(p-1) (1-c)**(s-1) dc`` for ``p > 0``, ``s > -1``."""
    from scipy import special

    if s > 0.0:
        return special.beta(p, s) * special.betainc(p, s, q)
    if s < 0.0:
        # B_x(p, s) = ((p + s) B_x(p, s + 1) - x**p (1 - x)**s) / s, continued to s in (-1, 0)
        return (q**p * (1.0 - q) ** s - (p + s) * _lower(q, p, s + 1.0)) / (-s)
    if p == 1.0:
        return -np.log1p(-q)
    return _quad_each(q, lambda c: c ** (p - 1.0) * (1.0 - c) ** (s - 1.0), upper=False)


# --- quadrature --------------------------------------------------------------------------


def _quad(f: Callable, lo: float, hi: float) -> float:
    if hi <= lo:
        return 0.0
    from scipy import integrate

    return float(integrate.quad(lambda c: float(f(c)), lo, hi, limit=200)[0])


def _quad_each(q: np.ndarray, f: Callable, *, upper: bool) -> np.ndarray:
    """``∫_q^1 f`` (``upper``) or ``∫_0^q f`` at each q, one integral per gap between distinct q.

    Used for the Beta cases ``a = 0`` / ``b = 0`` only, where ``f`` is not integrable at 0
    (``upper``) or at 1: the integral reaching that end is infinite.
    """
    if q.size == 0:
        return np.zeros(0)
    uniq, inverse = np.unique(q, return_inverse=True)
    if upper:  # f is not integrable at 0: the integral from q = 0 is infinite
        pts = np.concatenate((uniq, [1.0]))
        gaps = np.array([_quad(f, pts[i], pts[i + 1]) if pts[i] > 0.0 else 0.0 for i in range(uniq.size)])
        values = np.cumsum(gaps[::-1])[::-1]
        if uniq[0] == 0.0:
            values[0] = np.inf
    else:  # f is not integrable at 1: the integral up to q = 1 is infinite
        pts = np.concatenate(([0.0], uniq))
        gaps = np.array([_quad(f, pts[i], pts[i + 1]) if pts[i + 1] < 1.0 else 0.0 for i in range(uniq.size)])
        values = np.cumsum(gaps)
        if uniq[-1] == 1.0:
            values[-1] = np.inf
    return values[inverse]


def _quad_partial_losses(q: np.ndarray, w: Callable) -> tuple[np.ndarray, np.ndarray]:
    """Partial losses of a weight function by quadrature over the gaps between distinct q."""
    if q.size == 0:
        return np.zeros(0), np.zeros(0)

    def f1(c):
        return (1.0 - c) * w(c)

    def f0(c):
        return c * w(c)

    uniq, inverse = np.unique(q, return_inverse=True)
    m = uniq.size
    # the positive's cost at q = 0 and the negative's at q = 1 may be infinite (e.g. log loss)
    top = np.concatenate((uniq, [1.0]))
    gaps1 = np.array(
        [
            (_quad_to_end if i == 0 and uniq[0] == 0.0 else _quad)(f1, top[i], top[i + 1])
            for i in range(m)
        ]
    )
    bottom = np.concatenate(([0.0], uniq))
    gaps0 = np.array(
        [
            (_quad_to_end if i == m - 1 and uniq[-1] == 1.0 else _quad)(
                f0, bottom[i], bottom[i + 1]
            )
            for i in range(m)
        ]
    )
    target = np.cumsum(gaps1[::-1])[::-1]
    nontarget = np.cumsum(gaps0)
    return target[inverse], nontarget[inverse]


def _quad_to_end(f: Callable, lo: float, hi: float) -> float:
    """An integral reaching 0 or 1 where ``f`` may not be integrable: ``inf`` unless quad converges."""
    if hi <= lo:
        return 0.0

    def safe(c: float) -> float:
        try:
            return float(f(c))
        except (ZeroDivisionError, OverflowError):
            return math.inf

    from scipy import integrate

    with warnings.catch_warnings(), np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        result = integrate.quad(safe, lo, hi, limit=200, full_output=1)
    converged = len(result) == 3  # quad appends a message when it did not converge
    value = float(result[0])
    return value if converged and math.isfinite(value) else math.inf
