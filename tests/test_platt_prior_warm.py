"""The score prior's warm refit (``streamcal._kernels.glm_refit.prior_strength_warm``).

While the score prior holds (its strength ``kappa`` above 0, from the first event on), every refit
of ``PlattCalibrator`` and ``GEVCalibrator`` fits the prior's logistic recalibration ``D`` again.
The compiled refit starts that fit from the previous one and certifies the maximum of ``D``'s
log-likelihood within ``PRIOR_WARM_TOL``; the prior kernel's cold start runs where it cannot.
Checked here: the warm strength against the prior kernel's (:func:`naive_prior_strength`, its
cold start, as the full refit runs it) on random histograms and starts; every prediction of
streams from the first event against a converged full refit; copies and saved states that
continue bit for bit; a state saved before the warm start existed.
"""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gev_compiled_refit import TOL, WINDOWS, naive_prior_refit_proba

from streamcal import GEVCalibrator, PlattCalibrator
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import prior as _kp
from streamcal.buckets import LogitGrid
from streamcal.exceptions import StateFileError


def naive_prior_strength(centres, pos, neg, identity, base_rate):
    """``kappa`` by the prior kernel from its cold start (``(a, b) = (0, 0)``)."""
    row = np.concatenate((pos, neg))
    return _kp.prior_strength(row, 0, centres.size, 1.0, centres, 0, 1, base_rate, identity)


def cold_fit(centres, pos, neg, identity, base_rate):
    """The prior kernel's fit as a warm start (``glm_refit.PRIOR_*``: ``[1, a, b, mean, scale]``
    and no predicted start)."""
    B = centres.size
    row = np.concatenate((pos, neg))
    ab = np.zeros(2)
    _kp.prior_strength_from(row, 0, B, 1.0, centres, 0, 1, base_rate, identity, ab)
    x = np.log(centres) - np.log1p(-centres) if identity else centres
    w = pos + neg
    mean = float(np.sum(w * x) / w.sum())
    var = float(np.sum(w * x * x) / w.sum() - mean * mean)
    start = np.zeros(_g.PRIOR_SIZE)
    start[:5] = (1.0, ab[0], ab[1], mean, 1.0 / math.sqrt(var) if var > 0 else 0.0)
    return start


@st.composite
def histograms(draw):
    B = draw(st.integers(2, 64))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    centres = np.sort(rng.uniform(1e-4, 1 - 1e-4, B))
    scale = 10.0 ** draw(st.floats(0.0, 4.0))
    n = rng.exponential(scale, B) * (rng.uniform(size=B) < draw(st.floats(0.2, 1.0)))
    slope, shift = draw(st.floats(0.3, 1.5)), draw(st.floats(-1.0, 1.0))
    rate = 1 / (1 + np.exp(-(slope * (np.log(centres) - np.log1p(-centres)) + shift)))
    pos = np.round(n * rate) if draw(st.booleans()) else n * rate
    return centres, pos, np.maximum(np.round(n) - pos, 0.0) if draw(st.booleans()) else n * (1 - rate)


@settings(max_examples=300, deadline=None)
@given(histograms(), st.floats(0.0, 0.2), st.booleans(), st.integers(0, 2**32 - 1))
def test_the_warm_strength_matches_the_prior_kernel(h, change, identity, seed):
    # the start is the kernel's fit on a histogram that differs by up to ``change`` of its weight
    # per bucket (an event or more): the warm refit either gives way (-1) or agrees with the
    # kernel's cold start within 1e-9 relative (the cold start is itself within rounding of the
    # optimum, so the two agree far inside that)
    centres, pos, neg = h
    if not (pos + neg).sum() > 0.0:
        return
    rng = np.random.default_rng(seed)
    base_rate = float((pos.sum() + 0.5) / ((pos + neg).sum() + 1.0))
    pos0 = pos * (1 + change * rng.uniform(-1, 1, pos.size))
    neg0 = neg * (1 + change * rng.uniform(-1, 1, neg.size))
    if not (pos0 + neg0).sum() > 0.0:
        return
    start = cold_fit(centres, pos0, neg0, identity, base_rate)
    if start[4] == 0.0:
        return
    pc = np.zeros((5, centres.size))
    _g.prior_cache_fill(centres, pc)
    out = np.zeros(_g.PRIOR_SIZE)
    row = np.concatenate((pos, neg))
    kappa = _g.prior_strength_warm(row, 0, centres.size, 1.0, centres, pc, base_rate, identity, start, out, False)
    ref = naive_prior_strength(centres, pos, neg, identity, base_rate)
    if kappa < 0.0:
        assert kappa == -1.0
        return
    if ref == 0.0 or kappa == 0.0:  # only at the cut-off: log kappa within rounding of log(KAPPA_MIN)
        assert max(ref, kappa) <= _kp.KAPPA_MIN * (1 + 1e-9)
    else:
        assert abs(math.log(kappa) - math.log(ref)) <= 1e-9
    assert out[0] == 1.0  # the next warm start
    assert out[4] > 0.0


def test_the_warm_refit_serves_from_one_event_to_the_next():
    # white box: after an event, the previous fit certifies the new strength (no cold start)
    rng = np.random.default_rng(3)
    B = 256
    centres = (np.arange(B) + 0.5) / B
    z = rng.normal(-1.5, 1.2, 3000)
    s = 1 / (1 + np.exp(-z))
    y = rng.uniform(size=z.size) < s
    b = np.minimum((s * B).astype(int), B - 1)
    pos = np.bincount(b, weights=y, minlength=B).astype(float)
    neg = np.bincount(b, weights=~y, minlength=B).astype(float)
    pc = np.zeros((5, B))
    _g.prior_cache_fill(centres, pc)
    start = cold_fit(centres, pos, neg, True, 0.5)
    served = 0
    for i in range(200):
        k = int(rng.integers(B))
        (pos if rng.uniform() < s.mean() else neg)[k] += 1.0
        out = np.zeros(_g.PRIOR_SIZE)
        row = np.concatenate((pos, neg))
        kappa = _g.prior_strength_warm(row, 0, B, 1.0, centres, pc, 0.5, True, start, out, False)
        if kappa >= 0.0:
            served += 1
            start = out
            ref = naive_prior_strength(centres, pos, neg, True, 0.5)
            assert abs(kappa - ref) <= 1e-9 * ref
    assert served == 200


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(sorted(WINDOWS)))
def test_every_prediction_from_the_first_event_matches_a_full_refit(seed, window):
    # the default prior from the first event (its strength above 0 at most refits, the warm
    # refit serving from the second on), the served probability against a converged cold full
    # refit of the histogram before each event. (GEV on such short windows: its shapes can tie,
    # see ``test_gev_compiled_refit``; it is checked on the long stream below.)
    rng = np.random.default_rng(seed)
    n = 80
    z = rng.normal(-1.0, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-(0.8 * z - 0.3)))
    times = np.cumsum(rng.exponential(1.0, n)) if WINDOWS[window].uses_times else None
    make = lambda: PlattCalibrator(buckets=LogitGrid(64), window=WINDOWS[window])  # noqa: E731
    cal, hist = make(), make()
    worst = 0.0
    for i in range(n):
        x = {"score": float(scores[i])}
        p = cal.predict_proba_one(x)[True]
        if hist.n_learned and hist.window_weight > 0.0:
            ref = naive_prior_refit_proba(hist, scores[i : i + 1])
            worst = max(worst, abs(p - float(ref[0])))
        t = None if times is None else float(times[i])
        cal.learn_one(x, bool(labels[i]), t=t)
        hist.learn_one(x, bool(labels[i]), t=t)
    assert worst <= TOL


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
def test_a_long_cold_stream_matches_a_full_refit_while_the_prior_holds(cls):
    # the default 1024-bucket grid on a calibrated stream: the prior holds (strength > 0) on
    # every refit; every fiftieth prediction against a converged full refit
    rng = np.random.default_rng(21)
    n = 1500
    z = rng.normal(-2.0, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=n) < scores
    cal = cls()
    proba, _ = cal.prequential(scores, labels)
    assert cal.prior_strength > 0.0
    worst = 0.0
    for i in range(50, n, 50):
        hist = cls().update(scores[:i], labels[:i])
        ref = naive_prior_refit_proba(hist, scores[i : i + 1])
        worst = max(worst, abs(float(proba[i]) - float(ref[0])))
    assert worst <= TOL


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
def test_a_copy_and_a_saved_state_continue_bit_for_bit_while_the_prior_holds(cls):
    rng = np.random.default_rng(5)
    z = rng.normal(-2.0, 1.5, 900)
    scores, labels = 1 / (1 + np.exp(-z)), rng.uniform(size=900) < 1 / (1 + np.exp(-z))
    cal = cls()
    cal.prequential(scores[:500], labels[:500])
    assert cal.prior_strength > 0.0
    twins = (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal)))
    a = cal.prequential(scores[500:], labels[500:])
    for twin in twins:
        b = twin.prequential(scores[500:], labels[500:])
        assert np.array_equal(a[0], b[0])
        assert np.array_equal(a[1], b[1])


def test_a_state_saved_before_the_warm_start_loads_and_continues():
    # without ``_glm_prior_start`` the first refit runs the prior kernel from its cold start
    rng = np.random.default_rng(6)
    z = rng.normal(-2.0, 1.5, 900)
    scores, labels = 1 / (1 + np.exp(-z)), rng.uniform(size=900) < 1 / (1 + np.exp(-z))
    cal = PlattCalibrator()
    cal.prequential(scores[:500], labels[:500])
    state = cal.__getstate__()
    del state["_glm_prior_start"], state["_glm_prior_start_size"]
    older = PlattCalibrator.__new__(PlattCalibrator)
    older.__setstate__(state)
    assert older._glm_prior_start[_g.PRIOR_VALID] == 0.0
    a, _ = cal.prequential(scores[500:], labels[500:])
    b, _ = older.prequential(scores[500:], labels[500:])
    assert float(np.max(np.abs(a - b))) <= TOL
    # one of the two alone is refused
    for name in ("_glm_prior_start", "_glm_prior_start_size"):
        state = cal.__getstate__()
        del state[name]
        with pytest.raises(StateFileError, match=name):
            PlattCalibrator.__new__(PlattCalibrator).__setstate__(state)


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
def test_the_interpreted_and_compiled_tiers_give_the_same_bits_while_the_prior_holds(cls):
    from streamcal._kernels import _config

    rng = np.random.default_rng(8)
    z = rng.normal(-2.0, 1.5, 300)
    scores, labels = 1 / (1 + np.exp(-z)), rng.uniform(size=300) < 1 / (1 + np.exp(-z))
    _config.use_compiled_kernels()
    cal = cls()
    compiled = cal.prequential(scores, labels)
    assert cal.prior_strength > 0.0
    with _config.interpreting():
        interpreted = cls().prequential(scores, labels)
    assert np.array_equal(compiled[0], interpreted[0])
    assert np.array_equal(compiled[1], interpreted[1])
