"""GEV's served map past its support's end is no surer than the data's end run there.

A GEV shape ``xi < 0`` has ``F = 1`` past ``v = -1/xi`` (``xi > 0``: ``F = 0`` below
``v = -1/xi``). There the calibrator serves the rate of the highest (lowest) PAV block of the
fitted histogram plus the finite rule's pseudo-events (``glm_refit.end_run_bounds``), not the
add-``c`` bound about ``1/T`` from certainty. The bounds are checked against a PAV of the augmented
row, and every face against the others bit for bit.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression
from test_gev_compiled_refit import naive_end_runs

from streamcal import GEVCalibrator
from streamcal._kernels import glm_refit as _g


def pav_end_runs(pos, neg, c):
    """The lowest and highest rates of a weighted PAV of the non-empty buckets plus a pseudo-positive
    of weight ``c`` below them and a pseudo-negative above."""
    held = np.flatnonzero(pos + neg > 0)
    # each bucket as its positive and its negative part at the same position
    xs = np.concatenate(([-1.0], np.repeat(held.astype(float), 2), [held.size + 1e9]))
    ys = np.concatenate(([1.0], np.tile([1.0, 0.0], held.size), [0.0]))
    ws = np.concatenate(([c], np.column_stack((pos[held], neg[held])).ravel(), [c]))
    keep = ws > 0
    fit = IsotonicRegression().fit(xs[keep], ys[keep], sample_weight=ws[keep]).predict(xs[keep])
    return float(fit[0]), float(fit[-1])


@pytest.mark.parametrize("seed", range(6))
def test_end_run_bounds_are_the_augmented_pav_end_blocks(seed):
    rng = np.random.default_rng(seed)
    B = 40
    pos = np.where(rng.uniform(size=B) < 0.5, rng.uniform(0, 3, size=B), 0.0)
    neg = np.where(rng.uniform(size=B) < 0.6, rng.uniform(0, 5, size=B), 0.0)
    pos[np.arange(B) < 12] *= 0.1  # fewer positives low down
    c = [1.0, 0.5, 2.0][seed % 3]
    fit = np.zeros(_g.FIT_SIZE)
    _g.end_run_bounds(pos, neg, c, fit)
    low, high = pav_end_runs(pos, neg, c)
    assert fit[_g.FIT_RUN_LOW] == pytest.approx(low, rel=1e-12, abs=1e-14)
    assert fit[_g.FIT_RUN_HIGH] == pytest.approx(high, rel=1e-12, abs=1e-14)
    assert (fit[_g.FIT_RUN_LOW], fit[_g.FIT_RUN_HIGH]) == pytest.approx(naive_end_runs(pos, neg, c), rel=1e-12)


def _stream(n=3000, seed=3):
    """Scores whose top holds negatives: the truth rises to 0.8 and stays there."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.01, 0.97, size=n)
    y = (rng.uniform(size=n) < np.minimum(0.8, 1.2 * s**2)).astype(float)
    return s, y


def test_a_negative_shape_serves_no_surer_than_the_top_run_past_its_support():
    s, y = _stream()
    cal = GEVCalibrator(xi=-0.5, prior=None)
    cal.update(s, y)
    _, pos, neg = cal.histogram()
    _, high = pav_end_runs(pos, neg, 1.0)
    assert high < 0.9  # the data's top run holds negatives
    probes = np.array([0.975, 0.99, 0.999, 0.99999])
    p = cal.predict_proba(probes)
    beta = np.asarray(cal.coef_)
    v = beta[0] * np.log(probes / (1 - probes)) + beta[1]
    assert np.all(v > 2.0)  # past the support's end of xi = -0.5: the map itself is 1 there
    # the add-c bound would serve (T + 1) / (T + 2), within 1/T of 1: the end run's rate instead
    assert np.all(p <= high * (1 + 1e-12))
    assert np.allclose(p, high, rtol=1e-12)


def test_every_face_serves_the_same_bounded_bits():
    s, y = _stream(n=1500, seed=5)
    probes = np.array([0.3, 0.9, 0.99, 0.999])
    ref = GEVCalibrator()  # the exact default, xi="auto"
    p_pre, _ = ref.prequential(s, y)
    river = GEVCalibrator()
    p_river = np.empty(s.size)
    for i in range(s.size):
        p_river[i] = river.predict_proba_one({"s": float(s[i])})[True]
        river.learn_one({"s": float(s[i])}, bool(y[i]))
    assert np.array_equal(p_pre, p_river)
    arr = ref.predict_proba(probes)
    one = np.array([ref.predict_proba_one({"s": float(v)})[True] for v in probes])
    assert np.array_equal(arr, one)
    assert np.array_equal(arr, river.predict_proba(probes))
    assert np.array_equal(pickle.loads(pickle.dumps(ref)).predict_proba(probes), arr)
    assert np.array_equal(copy.deepcopy(ref).predict_proba(probes), arr)

