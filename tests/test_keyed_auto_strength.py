"""``prior_strength="auto"``: the prior's weight is the global map's, up to what a key needs for a
shape of its own (the events holding ``SHAPE_POSITIVES`` positives at the global rate), so a key
with more evidence than that follows its own data however much traffic the global map has seen."""

from __future__ import annotations

import numpy as np

from streamcal import KeyedCalibrator
from streamcal._keyed_rows import SHAPE_POSITIVES


def _three_keys(n=60_000, seed=0):
    """Keys 0 and 1 calibrated; key 2's rate is 0.15 whatever the score."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 3, n)
    s = 1 / (1 + np.exp(-rng.normal(-2.0, 1.0, n)))
    return k, s, rng.uniform(size=n) < np.where(k == 2, 0.15, s)


def _log_loss(y, p):
    return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))


def test_a_key_with_much_evidence_follows_its_own_shape():
    k, s, y = _three_keys()
    pooled = KeyedCalibrator()
    p, _ = pooled.prequential(k, s, y)
    q, _ = KeyedCalibrator(prior_strength=0).prequential(k, s, y)
    served = pooled.predict_proba([2] * 4, [0.02, 0.1, 0.25, 0.45])
    assert served.min() > 0.12
    assert served.max() < 0.2  # before the bound: 0.09 to 0.28, the global map's shape
    late = (k == 2) & (np.arange(k.size) >= k.size // 2)
    assert _log_loss(y[late], p[late]) < 1.005 * _log_loss(y[late], q[late])  # before: 1.025x


def test_the_strength_is_the_global_weight_up_to_the_shape_bound():
    k, s, y = _three_keys()
    cal = KeyedCalibrator()
    cal.update(k, s, y)
    row = cal.global_calibrator.window_histogram.row()
    rate = row.pos.sum() / (row.pos.sum() + row.neg.sum())
    assert 0.8 * SHAPE_POSITIVES / rate < cal.strength <= 1.2 * SHAPE_POSITIVES / rate  # the rate at the refresh
