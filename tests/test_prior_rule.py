"""The compiled kernels and every calibrator follow the one prior / finite-LLR rule of ``streamcal._prior``."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal import ISplineCalibrator, PAVCalibrator, PlattCalibrator, _prior
from streamcal.buckets import LogitGrid, QuantileEdges
from streamcal.windows import CountWindow


def stream(n, seed):
    rng = np.random.default_rng(seed)
    scores = rng.uniform(0.01, 0.99, size=n)
    return scores, rng.uniform(size=n) < scores, rng.choice([1.0, 0.5, 2.0], size=n)


@pytest.mark.parametrize("c", [1.0, 0.25, 3.0])
@pytest.mark.parametrize("positive", [True, False])
def test_pav_kernel_serves_the_add_c_bound_on_a_one_class_window(c, positive):
    s, _, w = stream(200, 1)
    cal = PAVCalibrator(buckets=LogitGrid(n_buckets=64), llr_pseudo_count=c)
    cal.update(s, np.full(s.size, positive), weights=w)
    low, high = _prior.proba_bounds(float(w.sum()), c)
    p = cal.predict_proba(s)
    assert np.allclose(p, high if positive else low, rtol=1e-14, atol=0.0)
    assert all(cal.predict_proba_one({"s": float(v)})[True] == q for v, q in zip(s[:20], p[:20], strict=True))


@pytest.mark.parametrize("c", [1.0, 0.25, 3.0])
@pytest.mark.parametrize("interpolation", ["linear", "step"])
def test_pav_kernel_llr_is_the_logit_of_its_probability_minus_the_finite_prior(c, interpolation):
    s, y, w = stream(3000, 2)
    cal = PAVCalibrator(window=CountWindow(1000), interpolation=interpolation, llr_pseudo_count=c)
    cal.update(s, y, weights=w)
    _, pos, neg = cal.histogram()
    logodds = _prior.prior_logodds(float(pos.sum()), float(neg.sum()), c)
    grid = np.linspace(0.0, 1.0, 501)
    want = _prior.llr_from_proba(cal.predict_proba(grid), logodds)
    np.testing.assert_allclose(cal.predict_llr(grid), want, rtol=1e-12, atol=1e-12)
    one = [cal.predict_llr_one({"s": float(v)}) for v in grid[::25]]
    np.testing.assert_allclose(one, want[::25], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls", [ISplineCalibrator, PlattCalibrator])
def test_fitted_maps_are_bounded_by_the_rule(cls):
    s, _, w = stream(400, 3)
    c = 2.0
    cal = cls(llr_pseudo_count=c).update(s, np.ones(s.size, dtype=bool), weights=w)
    low, high = _prior.proba_bounds(float(w.sum()), c)
    p = cal.predict_proba(np.linspace(0.0, 1.0, 101))
    assert p.min() >= low
    assert p.max() <= high
    assert p.max() == high  # one class: the surest value the rule allows


@pytest.mark.parametrize("c", [1.0, 0.25, 3.0])
def test_the_warmup_prior_uses_the_pseudo_count(c):
    s, y, w = stream(30, 4)
    cal = PAVCalibrator(buckets=QuantileEdges(8, warmup=100), llr_pseudo_count=c)
    cal.update(s, y, weights=w)
    assert cal.n_buckets is None  # still buffering
    want = _prior.finite_prior(float(w[y].sum()), float(w.sum()), c)
    assert cal.predict_proba([0.3]).tolist() == [want]
    assert cal.predict_proba_one({"s": 0.3})[True] == want


def test_the_rule_in_numbers():
    assert _prior.finite_prior(3.0, 4.0, 1.0) == 4.0 / 6.0
    assert _prior.proba_bounds(4.0, 1.0) == (1.0 / 6.0, 5.0 / 6.0)
    assert _prior.add_one_bound(4.0) == _prior.proba_bounds(4.0, 1.0)[0]
    assert _prior.prior_logodds(3.0, 1.0, 1.0) == pytest.approx(np.log(2.0))
    assert _prior.smoothed(1.0, 4.0, 1.0) == 5.0 / 6.0
    assert np.isfinite(_prior.llr_from_proba(np.array([0.0, 1.0]), 0.0)).all()
