"""GEV's shapes refitted for the logistic member once the score prior is refuted (strength 0).

``GEVCalibrator()`` (``xi="auto"`` with the prior) refits its six shapes at strength 0 as the
shapes' refit without the member does, with two differences (``streamcal._kernels.glm_refit``,
``glm_refit_known``): its bounds take the tighter forms they take while the prior holds, and its
served shape's certificate bounds Taylor's remainder bucket by bucket from the row's power sums
(``_quartic_sum``). Any GEV refit in unit 1 also reads the histogram's rows over the buckets that
hold weight (``_held_range``, ``_held_sums``, ``end_run_bounds_range``) where it read their copy.
These tests check those pieces against their references (the copy, a sum in exact arithmetic), and
every prediction of long streams where the prior is refuted against a converged full refit while
the certificate serves most refits.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_gev_compiled_refit import naive_prior_refit_proba
from test_gev_served_certified import FELL_BACK, SERVED, TOL, _long_stream, served_state

from streamcal import GEVCalibrator
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _h
from streamcal.windows import CountWindow, Unbounded


def _random_row(rng, B):
    """A histogram's rows in unit 1: some buckets empty, whole or fractional weights."""
    held = rng.uniform(size=B) < rng.uniform(0.05, 0.9)
    lo, hi = sorted(rng.integers(0, B, 2))
    held[: lo] = False
    held[hi + 1 :] = False
    weights = rng.choice([1.0, 2.0, 0.5, 0.3, 1.7], size=(2, B)) * rng.integers(0, 4, size=(2, B))
    pos = np.where(held, weights[0], 0.0)
    neg = np.where(held & (pos + weights[1] > 0.0), weights[1], 0.0)
    return pos, neg


@pytest.mark.parametrize("seed", range(40))
def test_the_rows_over_the_held_range_give_the_copys_values_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    B = int(rng.choice([1, 2, 7, 64, 1024]))
    pos, neg = _random_row(rng, B)
    if seed % 3 == 0:  # mostly positives at the top: the end runs' suffix sums stop early there
        top = np.arange(B) >= B - max(1, B // 8)
        pos, neg = np.where(top & (pos + neg > 0), pos + neg, pos), np.where(top, 0.0, neg)
    x = np.sort(rng.normal(0.0, 3.0, B))
    x[rng.integers(0, B)] = x[min(B - 1, rng.integers(0, B))]  # ties, as the clipped logit's ends
    x = np.sort(x)
    c = float(rng.choice([0.5, 1.0, 1e-3]))
    sf = np.zeros(_h.SF_HEADER + 2 * B)
    sf[_h.SF_HEADER : _h.SF_HEADER + B] = pos
    sf[_h.SF_HEADER + B :] = neg
    held = np.flatnonzero(pos + neg > 0.0)
    steps = np.zeros(_g.STEP_HEADER)
    if held.size:  # a range of features holding every non-empty bucket's, maybe wider
        steps[_g.STEP_X_LO] = x[held[0]] - float(rng.choice([0.0, 0.0, 1.0]))
        steps[_g.STEP_X_HI] = x[held[-1]] + float(rng.choice([0.0, 0.0, 1.0]))
    else:
        steps[_g.STEP_X_LO], steps[_g.STEP_X_HI] = np.inf, -np.inf
    # the reference: the copy in real units, its totals and range, the end runs over every bucket
    pos_w, neg_w = np.full(B, 9.0), np.full(B, 9.0)
    t_pos, t_neg, lo, hi = _g._real_units(sf, B, 1.0, x, pos_w, neg_w)
    fit = np.zeros(_g.FIT_SIZE)
    _g.end_run_bounds(pos_w, neg_w, c, fit)
    for current in (True, False):
        j0, j1 = _g._held_range(steps, x, B, current)
        assert 0 <= j0 <= j1 <= B
        assert np.all((held >= j0) & (held < j1))
        powers = np.zeros(5)
        got = _g._held_sums(sf[_h.SF_HEADER : _h.SF_HEADER + B], sf[_h.SF_HEADER + B :], x, c, j0, j1, powers)
        assert got[:4] == (t_pos, t_neg, lo, hi)
        ours = np.zeros(_g.FIT_SIZE)
        _g.end_run_bounds_range(pos, neg, c, ours, got[4], got[0], got[1], j0, j1)
        assert ours[_g.FIT_RUN_LOW] == fit[_g.FIT_RUN_LOW]
        assert ours[_g.FIT_RUN_HIGH] == fit[_g.FIT_RUN_HIGH]
        n = pos + neg
        want = [float(np.sum(n * x**j)) for j in range(5)]
        np.testing.assert_allclose(powers, want, rtol=1e-12, atol=1e-12 * float(np.sum(n * (1 + x**4))))


@pytest.mark.parametrize("seed", range(60))
def test_the_quartic_sum_bounds_the_exact_sum_and_never_exceeds_the_largest_move(seed):
    rng = np.random.default_rng(seed)
    B = int(rng.integers(1, 40))
    x = rng.normal(float(rng.normal(0.0, 3.0)), float(rng.uniform(0.01, 4.0)), B)
    n = rng.choice([0.0, 0.5, 1.0, 3.0], B)
    d0, d1 = rng.normal(0.0, 1e-3, 2) * float(rng.choice([1.0, 1e-3, 1e3]))
    gone = float(rng.choice([0.0, 0.0, 2.0, 7.5]))
    delta = float(np.max(np.abs(d0 * x + d1))) * float(rng.choice([1.0, 1.5]))
    powers = np.array([float(np.sum(n * x**j)) for j in range(5)])
    got = _g._quartic_sum(powers, d0, d1, gone, delta)
    exact = sum(Fraction(float(w)) * (Fraction(float(d0)) * Fraction(float(v)) + Fraction(float(d1))) ** 4
                for w, v in zip(n, x, strict=True))  # fmt: skip
    exact += Fraction(gone) * Fraction(delta) ** 4
    assert Fraction(got) >= exact
    assert got <= (float(n.sum()) + gone) * delta**4 * (1 + 1e-6) + 1e-300


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(4000)])
def test_every_prediction_of_the_member_stays_within_the_tolerance_once_the_prior_is_refuted(window):
    scores, labels = _long_stream(6600, 21)
    cal = GEVCalibrator(window=window)
    cal.prequential(scores[:6000], labels[:6000])
    worst, states = 0.0, []
    for i in range(6000, scores.size):
        x = {"score": float(scores[i])}
        w = 60.0 if i % 97 == 0 else 1.0  # a heavy event now and then: the certificate refuses
        p = cal.predict_proba_one(x)[True]
        assert cal.prior_strength == 0.0  # the shapes serve
        assert cal.link_ == "gev"
        states.append(served_state(cal))
        worst = max(worst, abs(p - float(naive_prior_refit_proba(cal, scores[i : i + 1])[0])))
        cal.learn_one(x, bool(labels[i]), w=w)
    states = np.array(states)
    assert worst <= TOL
    assert np.mean(states == SERVED) >= 0.5  # the certificate serves most refits
    assert np.sum(states == FELL_BACK) >= 6  # and the passes serve where it does not
    assert np.all(np.isin(states, (SERVED, FELL_BACK)))
