"""GEV's score prior with its ``"spread"`` floor: the traffic's floor plus ``SPREAD_EVENTS``
events' weight over the whole grid.

No GEV link is the logistic one, so while the prior holds, GEV fits its nearest GEV map to the
score; with the prior's weight only where the data are, the first events (a few buckets) left the
two-parameter fit free to extrapolate far from the score. These tests check the floor's rule
against its Python reference, and what it is for: GEV near the score after its first events, within
1 % of a calibrated logistic score's log loss from the first event on, and a very bad score still
refuted at once (the naive-Bayes-like counterpart of the ISLR ``Caravan`` case).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamcal import GEVCalibrator, _prior
from streamcal._kernels import glm_refit as G
from streamcal._kernels import prior as P


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def logit(p):
    return np.log(p) - np.log1p(-p)


def log_loss_sum(p, y):
    return float(-np.sum(np.where(y, np.log(p), np.log1p(-p))))


@pytest.mark.parametrize("B", [16, 100, 1024])
@pytest.mark.parametrize("identity", [True, False])
def test_spread_floor_kernel_equals_its_python_rule(B, identity):
    rng = np.random.default_rng(B)
    centres = np.sort(rng.uniform(1e-6, 1.0 - 1e-6, B))
    pos = np.where(rng.uniform(size=B) < 0.1, rng.uniform(size=B), 0.0)
    neg = np.where(rng.uniform(size=B) < 0.2, 3.0 * rng.uniform(size=B), 0.0)
    kappa, c = 2.5, 1.0
    prior_pos, prior_neg = _prior.pseudo_counts(centres, pos, neg, kappa, identity, c, floor="spread")
    base_rate = (pos.sum() + c) / (pos.sum() + neg.sum() + 2.0 * c)
    kp, kn = pos.copy(), neg.copy()
    G.add_prior_pseudo_counts(kp, kn, kappa, centres, identity, base_rate, G.FLOOR_SPREAD, B)
    np.testing.assert_array_equal(kp, pos + prior_pos)
    np.testing.assert_array_equal(kn, neg + prior_neg)
    # the spread adds SPREAD_EVENTS events' weight (times kappa) to the traffic's floor
    tp, tn = _prior.pseudo_counts(centres, pos, neg, kappa, identity, c, floor="traffic")
    extra = (prior_pos + prior_neg).sum() - (tp + tn).sum()
    step = max(1, B // 64)
    thinned = int(np.count_nonzero(np.arange(B) % step == step // 2))
    assert extra == pytest.approx(kappa * P.SPREAD_EVENTS * step * thinned / B)


@pytest.mark.parametrize("events", [[0.03], [0.02, 0.03, 0.04]])
def test_first_events_leave_the_map_near_the_score(events):
    """After one to three negatives in a narrow range, the served log-odds stay within 0.5 of the
    score's over two decades of probability on both sides (the traffic's floor alone: up to 2.8)."""
    cal = GEVCalibrator()
    cal.update(np.array(events), np.zeros(len(events), dtype=bool))
    far = np.array([0.01, 0.1, 0.3, 0.6, 0.9])
    p = cal.predict_proba(far)
    assert np.abs(logit(p) - logit(far)).max() <= 0.5


def test_a_calibrated_logistic_score_is_not_made_worse_from_the_first_event():
    """A calibrated score at a 3.3 % base rate (the ISLR ``Default`` case's shape), eight streams
    pooled: GEV's exact default within 1 % of the raw score over the first 100 and 500 events
    (the traffic's floor alone: 1.036 over the first 100)."""
    for n in (100, 500):
        served = raw = 0.0
        for seed in range(8):
            rng = np.random.default_rng(seed)
            z = -4.3 + 1.7 * rng.normal(size=n)
            y = rng.uniform(size=n) < sigmoid(z)
            p, _ = GEVCalibrator().prequential(sigmoid(z), y)
            served += log_loss_sum(p, y)
            raw += log_loss_sum(sigmoid(z), y)
        assert served <= 1.01 * raw


def test_a_very_bad_score_is_refuted_as_without_the_prior():
    """Log-odds 25 times too spread and noisy (the naive-Bayes-like counterpart of ``Caravan``):
    the prior's strength is 0 after the first 50 events, and GEV's log loss over the first 500
    events is within 0.1 % of ``prior=None``'s and far below the raw score's."""
    rng = np.random.default_rng(3)
    z = rng.normal(-3.0, 1.0, 500)
    y = rng.uniform(size=500) < sigmoid(z)
    s = sigmoid(25.0 * (z + 3.0 + rng.normal(size=500)))
    p, _ = GEVCalibrator().prequential(s, y)
    q, _ = GEVCalibrator(prior=None).prequential(s, y)
    early = GEVCalibrator()
    early.update(s[:50], y[:50])
    assert early.prior_strength == 0.0
    assert log_loss_sum(p, y) <= 1.001 * log_loss_sum(q, y)
    assert log_loss_sum(p, y) < 0.2 * log_loss_sum(np.clip(s, 1e-15, 1 - 1e-15), y)
