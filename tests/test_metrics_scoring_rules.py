"""Regular binary proper scoring rules (Brümmer & du Preez, 2013): closed forms, quadrature, and PAV optimality."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_partial_losses, naive_pav_stack, naive_threshold_cost

from streamcal.isotonic import pav
from streamcal.metrics import (
    BetaWeighting,
    ThresholdWeighting,
    beta_scoring_rule,
    brier_score,
    log_loss,
    partial_losses,
    proper_scoring_rule,
    threshold_cost,
)

# --- closed forms ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"), [(1.0, 1.0), (0.5, 0.5), (2.0, 0.7), (-0.5, 1.5), (1.5, -0.5), (-0.7, -0.4), (0.0, 0.0), (3.0, 4.0)]
)
def test_beta_closed_form_matches_quadrature(a, b):
    q = np.array([0.05, 0.2, 0.5, 0.77, 0.95])
    target, nontarget = partial_losses(q, BetaWeighting(a, b))
    for i, qi in enumerate(q):
        t, n = naive_partial_losses(qi, a, b)
        assert target[i] == pytest.approx(t, rel=1e-7)
        assert nontarget[i] == pytest.approx(n, rel=1e-7)


@pytest.mark.parametrize(("a", "b"), [(0.0, 0.6), (0.6, 0.0), (0.0, -0.3)])
def test_beta_quadrature_fallback_for_a_or_b_zero(a, b):
    q = np.array([0.05, 0.5, 0.95, 0.5])
    target, nontarget = partial_losses(q, BetaWeighting(a, b))
    for i, qi in enumerate(q):
        t, n = naive_partial_losses(qi, a, b)
        assert target[i] == pytest.approx(t, rel=1e-7)
        assert nontarget[i] == pytest.approx(n, rel=1e-7)


def test_beta_end_values():
    target, nontarget = partial_losses([0.0, 1.0], BetaWeighting(0.0, 0.0))
    assert target.tolist() == [math.inf, 0.0]
    assert nontarget.tolist() == [0.0, math.inf]
    target, nontarget = partial_losses([0.0, 1.0], BetaWeighting(1.0, 1.0))
    np.testing.assert_allclose(target, [3.0, 0.0])
    np.testing.assert_allclose(nontarget, [0.0, 3.0])
    target, nontarget = partial_losses([0.0, 1.0], BetaWeighting(-0.5, 0.5))
    assert target[0] == math.inf
    assert np.isfinite(nontarget[1])
    # the quadrature fallbacks (a = 0 or b = 0): infinite exactly at the divergent end
    target, nontarget = partial_losses([0.0, 0.4, 1.0], BetaWeighting(0.0, 0.7))
    assert target[0] == math.inf
    assert np.all(np.isfinite(target[1:]))
    assert np.all(np.isfinite(nontarget))
    target, nontarget = partial_losses([0.0, 0.4, 1.0], BetaWeighting(0.7, 0.0))
    assert nontarget[2] == math.inf
    assert np.all(np.isfinite(nontarget[:2]))
    assert np.all(np.isfinite(target))


def test_known_members(rng):
    p = rng.uniform(size=200)
    y = rng.uniform(size=200) < p
    w = rng.exponential(size=200)
    assert beta_scoring_rule(y, p, 0, 0, w) == pytest.approx(log_loss(y, p, w), rel=1e-12)
    assert beta_scoring_rule(y, p, 1, 1, w) == pytest.approx(3 * brier_score(y, p, w), rel=1e-12)
    assert beta_scoring_rule(y, p, 1, 1, w, normalize=False) == pytest.approx(brier_score(y, p, w) / 2, rel=1e-12)


def test_callable_weighting_matches_closed_form(rng):
    p = np.round(rng.uniform(size=40), 2)
    y = rng.uniform(size=40) < p
    for a, b in [(1.0, 1.0), (2.0, 0.5), (0.5, 3.0)]:
        closed = beta_scoring_rule(y, p, a, b)
        quad = proper_scoring_rule(y, p, lambda c, a=a, b=b: c ** (a - 1) * (1 - c) ** (b - 1))
        assert quad == pytest.approx(closed, rel=1e-8)


def test_callable_weighting_infinite_at_the_ends():
    target, nontarget = partial_losses([0.0, 0.5, 1.0], lambda c: 1 / (c * (1 - c)))
    assert target[0] == math.inf
    assert nontarget[2] == math.inf
    assert target[1] == pytest.approx(math.log(2), rel=1e-10)


def test_threshold_cost_matches_naive(rng):
    p = np.round(rng.uniform(size=300), 1)  # many values exactly on the threshold
    y = rng.uniform(size=300) < p
    for t in [0.1, 0.3, 0.5, 0.9]:
        assert threshold_cost(y, p, t) == pytest.approx(naive_threshold_cost(y, p, t), rel=1e-12)


def test_rules_are_proper(rng):
    """Expected cost under the true probability q is minimal at q (Brümmer & du Preez, 2013, lemma 6)."""
    grid = np.linspace(0.0, 1.0, 201)
    for weighting in [BetaWeighting(0.5, 2.0), BetaWeighting(-0.5, -0.5), ThresholdWeighting(0.3)]:
        target, nontarget = partial_losses(grid, weighting)
        for q in [0.1, 0.3, 0.62, 0.9]:
            with np.errstate(invalid="ignore"):
                expected = np.nan_to_num(q * target + (1 - q) * nontarget, nan=np.inf)
            at_q = partial_losses([q], weighting)
            assert q * at_q[0][0] + (1 - q) * at_q[1][0] <= expected.min() + 1e-12


# --- Brümmer and du Preez's theorem -------------------------------------------------------------------


def _random_rule(rng):
    kind = rng.integers(3)
    if kind == 0:
        return [(1.0, BetaWeighting(*rng.uniform(-0.9, 3.0, 2)))]
    if kind == 1:
        return [(1.0, ThresholdWeighting(float(rng.uniform(0.02, 0.98))))]
    # a mixture of thresholds and a Beta rule (convex combinations of RBPSRs are RBPSRs)
    alphas = rng.dirichlet(np.ones(3))
    return [
        (alphas[0], ThresholdWeighting(float(rng.uniform(0.02, 0.98)))),
        (alphas[1], ThresholdWeighting(float(rng.uniform(0.02, 0.98)))),
        (alphas[2], BetaWeighting(*rng.uniform(-0.9, 3.0, 2))),
    ]


def _objective(y, p, v, rule):
    """Paper 001 eq. (2): sum_t v(l_t) C(l_t, p_t)."""
    total = np.zeros(y.size)
    for alpha, weighting in rule:
        target, nontarget = partial_losses(p, weighting)
        total = total + alpha * np.where(y == 1, target, nontarget)
    with np.errstate(invalid="ignore"):
        return float(np.sum(np.where(v > 0, v * total, 0.0)))


@given(
    labels=st.lists(st.booleans(), min_size=1, max_size=30),
    seed=st.integers(0, 2**32 - 1),
)
def test_pav_is_optimal_for_every_rbpsr(labels, seed):
    """PAV's solution costs no more than random monotone perturbations of it, for random rules."""
    rng = np.random.default_rng(seed)
    y = np.array(labels, dtype=float)
    v1, v2 = rng.uniform(0.2, 5.0, 2)  # class weights (Brümmer & du Preez (2013) §2)
    v = np.where(y == 1, v1, v2) * rng.uniform(0.5, 2.0, y.size)  # and per-trial weights
    p_pav = naive_pav_stack(y, v)
    np.testing.assert_allclose(pav(y, v), p_pav, rtol=0, atol=1e-12)
    for _ in range(4):
        rule = _random_rule(rng)
        best = _objective(y, p_pav, v, rule)
        assert math.isfinite(best)
        for _ in range(5):
            kind = rng.integers(3)
            if kind == 0:  # jitter, then restore monotonicity by sorting
                other = np.sort(np.clip(p_pav + rng.normal(0, 0.1, y.size), 0, 1))
            elif kind == 1:  # a monotone distortion of the PAV values
                other = np.clip(p_pav, 0, 1) ** rng.uniform(0.3, 3.0)
            else:  # a mix with another monotone sequence
                lam = rng.uniform()
                other = (1 - lam) * p_pav + lam * np.sort(rng.uniform(size=y.size))
            assert np.all(np.diff(other) >= 0)
            assert _objective(y, other, v, rule) >= best - 1e-9 * (1 + abs(best))


# --- bad input -------------------------------------------------------------------------------


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"`a` must be a number in \(-1.0, inf\); got -1"):
        BetaWeighting(-1, 1)
    with pytest.raises(ValueError, match=r"`threshold` must be a number in \(0.0, 1.0\); got 1.0"):
        ThresholdWeighting(1.0)
    with pytest.raises(TypeError, match=r"`weighting` must be a BetaWeighting"):
        proper_scoring_rule([0, 1], [0.2, 0.4], "brier")
    with pytest.raises(ValueError, match=r"`proba`.*1.5 at position 1"):
        threshold_cost([0, 1], [0.2, 1.5], 0.5)
    with pytest.raises(ValueError, match=r"`labels`.*got 3 at position 0"):
        beta_scoring_rule([3, 1], [0.2, 0.5], 1, 1)
    with pytest.raises(ValueError, match=r"`weights`.*-2.0 at position 0"):
        beta_scoring_rule([0, 1], [0.2, 0.5], 1, 1, weights=[-2.0, 1.0])
