"""The score prior of the unkeyed calibrators: pseudo-counts added to the histogram row before
any map reads it, with a strength the evidence sets.

References first: ``naive_prior_strength`` (the Bayes factor of the prior against its logistic
recalibration, fitted by scipy's optimiser) and ``naive_augmented_row`` (row plus pseudo-counts,
in numpy); PAV's blocks must be the naive PAV of the augmented row, bit for bit.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from naive import naive_pav_bucket_blocks
from river_cases import river_loop
from scipy.optimize import minimize

import streamcal
from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator, _prior
from streamcal._kernels import histogram as H
from streamcal._kernels import ipav as K
from streamcal._kernels import prior as P
from streamcal.buckets import LogitGrid, UniformGrid
from streamcal.exceptions import StateFileError
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded


# ---------------------------------------------------------------------------- references
def naive_prior_strength(pos, neg, centres, probability_inputs, c=1.0):
    """``kappa`` from its definition: log-likelihoods of the prior and of its ridge-penalised
    logistic recalibration (scipy's BFGS), the BIC penalty, the cap and the floor."""
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    keep = pos + neg > 0.0
    n = float((pos + neg).sum())
    if n == 0.0:
        return P.KAPPA_MAX
    base = (pos.sum() + c) / (n + 2.0 * c)
    rate = np.clip(centres, P.RATE_LOW, P.RATE_HIGH) if probability_inputs else np.full(centres.size, base)
    pos, neg, rate, centres = pos[keep], neg[keep], rate[keep], centres[keep]
    off = np.log(rate) - np.log1p(-rate)
    x = off if probability_inputs else centres
    t = pos + neg
    mean = float((t * x).sum() / t.sum())
    sd = math.sqrt(float((t * (x - mean) ** 2).sum() / t.sum()))
    v = (x - mean) / sd if sd > 0 else np.zeros_like(x)

    def negloglik(ab):
        z = off + ab[0] + ab[1] * v
        return -(float((pos * -np.logaddexp(0, -z) + neg * -np.logaddexp(0, z)).sum()) - 0.5 * P.RIDGE * (ab @ ab))

    log_s = float((pos * np.log(rate)).sum() + (neg * np.log1p(-rate)).sum())
    log_d = -minimize(negloglik, np.zeros(2), method="BFGS", options={"gtol": 1e-10}).fun
    k = 2.0 if probability_inputs else 1.0
    kappa = math.exp(min(log_s - log_d + 0.5 * k * math.log(n + 1.0), math.log(P.KAPPA_MAX)))
    return kappa if kappa >= P.KAPPA_MIN else 0.0


def naive_augmented_row(pos, neg, centres, kappa, rate_base, floor, probability_inputs):
    """Row plus pseudo-counts: ``kappa (n_b + floor)`` pseudo-events per bucket at the prior's rate."""
    rate = np.clip(centres, P.RATE_LOW, P.RATE_HIGH) if probability_inputs else np.full(centres.size, rate_base)
    m = kappa * ((pos + neg) + floor)
    return pos + m * rate, neg + m * (1.0 - rate)


def prior_section(cal):
    pf, _ = cal.map_arrays()
    B = cal.centres.size
    o = K.pav_state_sizes_before_prior(B)
    return pf[o : o + K.PR_HEADER]


def rows(cal):
    sf, si = cal.window_histogram.arrays()
    B = int(si[H.SI_B])
    return sf[H.SF_HEADER : H.SF_HEADER + B], sf[H.SF_HEADER + B : H.SF_HEADER + 2 * B]


def observable(cal):
    """What the map's future outputs read: the blocks (through their links), the fitted values
    over the knots' span, the finite-LLR values and the prior's section. Values outside the
    blocks, never read, depend on the path taken (a long run of labels rebuilds once)."""
    pf, pi = cal.map_arrays()
    v = K.pav_blocks_view(pf, pi)
    blocks = []
    f = int(pi[K.PI_HEAD])
    while f != -1:
        blocks.append((f, int(v["bend"][f]), float(v["bpos"][f]), float(v["bneg"][f])))
        f = int(v["bnext"][f])
    span = slice(blocks[0][0], blocks[-1][1] + 1) if blocks else slice(0, 0)
    header = pf[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]].tolist()
    return blocks, v["fit"][span].tolist(), header, pf[K.pav_state_sizes_before_prior(cal.centres.size) :].tolist()


def rare_stream(n, seed, shift=0.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(-5.0, 1.3, n)
    y = rng.uniform(size=n) < 1 / (1 + np.exp(-z))
    return 1 / (1 + np.exp(-(z + shift))), y


def log_loss(p, y):
    return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))


# ---------------------------------------------------------------------------- the strength
@pytest.mark.parametrize("probability_inputs", [True, False])
@pytest.mark.parametrize("shift", [0.0, 0.4, 3.0])
def test_strength_kernel_matches_its_definition(probability_inputs, shift):
    rng = np.random.default_rng(int(10 * shift) + probability_inputs)
    B = 48
    centres = np.sort(rng.uniform(0.01, 0.6, B))
    n = rng.integers(0, 40, B).astype(float)
    truth = 1 / (1 + np.exp(-(np.log(centres / (1 - centres)) + shift)))
    pos = rng.binomial(n.astype(int), truth).astype(float)
    neg = n - pos
    neg[::7] = 0.0
    pos[::7] = 0.0  # empty buckets are no data
    kappa, pp, pn = _prior.score_prior(centres, pos, neg, probability_inputs, 1.0)
    want = naive_prior_strength(pos, neg, centres, probability_inputs)
    assert kappa == pytest.approx(want, rel=1e-5, abs=1e-300)
    base = (pos.sum() + 1.0) / (pos.sum() + neg.sum() + 2.0)
    ap, an = naive_augmented_row(pos, neg, centres, kappa, base, 1.0, probability_inputs)
    np.testing.assert_allclose(pos + pp, ap, rtol=1e-15)
    np.testing.assert_allclose(neg + pn, an, rtol=1e-15)


def test_strength_follows_the_evidence():
    # a calibrated score keeps a strong prior; a score off by 3 in log-odds loses it entirely
    s, y = rare_stream(20_000, seed=1)
    good = PAVCalibrator().update(s, y)
    assert good.prior_strength > 10.0
    s, y = rare_stream(20_000, seed=1, shift=3.0)
    bad = PAVCalibrator().update(s, y)
    assert bad.prior_strength == 0.0
    # with no strength left, the map is the window's own, to the bit
    exact = PAVCalibrator(prior=None).update(s, y)
    grid = np.geomspace(1e-6, 0.9, 200)
    np.testing.assert_array_equal(bad.predict_proba(grid), exact.predict_proba(grid))
    assert PAVCalibrator(prior=None).update(s, y).prior_strength == 0.0
    assert PAVCalibrator(finite_proba=False).update(s, y).prior_strength == 0.0


# ---------------------------------------------------------------------------- PAV: exact on row + prior
WINDOWS = [Unbounded(), CountWindow(60), TimeWindow(30.0), Decay(40.0), Decay(3.0)]


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("buckets", [LogitGrid(40, 1e-4, 1 - 1e-4), UniformGrid(24, 0.0, 1.0)], ids=repr)
def test_pav_blocks_are_the_pav_of_row_plus_prior_after_each_learn(window, buckets):
    rng = np.random.default_rng(3)
    n = 260
    s = rng.uniform(0.01, 0.99, n) ** 2
    y = rng.uniform(size=n) < np.where(np.arange(n) < n // 2, s, 0.2 + 0.3 * s)
    w = rng.choice([1.0, 1.0, 0.5, 2.0], n)
    t = np.cumsum(rng.exponential(1.0, n))
    cal = PAVCalibrator(buckets=buckets, window=window)
    probability_inputs = bool(buckets.probability_inputs)
    seen_strengths = set()
    for i in range(n):
        cal.learn_one({"s": float(s[i])}, bool(y[i]), w=float(w[i]), t=float(t[i]))
        sec = prior_section(cal)
        kappa = float(sec[K.PR_KAPPA])
        seen_strengths.add(kappa > 0.0)
        pos, neg = rows(cal)
        if kappa > 0.0:
            pos, neg = naive_augmented_row(
                pos, neg, cal.centres, kappa, float(sec[K.PR_RATE]), float(sec[K.PR_FLOOR]), probability_inputs
            )
        pf, pi = cal.map_arrays()
        v = K.pav_blocks_view(pf, pi)
        blocks = []
        f = int(pi[K.PI_HEAD])
        while f != -1:
            blocks.append((f, int(v["bend"][f]), v["bpos"][f], v["bneg"][f]))
            f = int(v["bnext"][f])
        assert blocks == naive_pav_bucket_blocks(pos, neg)  # bit for bit
        # and a from-scratch rebuild of the state gives the same arrays
        again = (pf.copy(), pi.copy())
        sf, si = cal.window_histogram.arrays()
        K.pav_rebuild_inplace(sf.copy(), si.copy(), *again)
        span = K.pav_state_sizes_before_prior(cal.centres.size)
        np.testing.assert_array_equal(again[0][span:], pf[span:])  # the prior's section
        np.testing.assert_array_equal(K.pav_field(again[0], cal.centres.size, K._FIT), K.pav_field(pf, cal.centres.size, K._FIT))
    assert True in seen_strengths


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(500), Decay(300.0)], ids=repr)
def test_pav_array_face_equals_the_river_face_with_the_prior(window):
    # ``update`` learns long runs into the histogram alone and refits the strength at the same
    # counts as the event-by-event loop; ``process`` and ``prequential`` equal the loop too
    s, y = rare_stream(3000, seed=5, shift=0.5)
    t = np.arange(3000.0)
    a, b = PAVCalibrator(window=window), PAVCalibrator(window=window)
    a.update(s[:1500], y[:1500], times=t[:1500])
    river_loop(b, s[:1500], y[:1500], np.ones(1500, dtype=int), np.ones(1500), t[:1500])
    assert observable(a) == observable(b)
    ops = np.where(np.arange(1500) % 100 < 70, 1, 2)
    p, llr = a.process(s[1500:], y[1500:], ops == 1, times=t[1500:])
    lp, lllr = river_loop(b, s[1500:], y[1500:], ops, np.ones(1500), t[1500:])
    at = ops == 2
    np.testing.assert_array_equal(p[at], lp[at])
    np.testing.assert_array_equal(llr[at], lllr[at])
    p, llr = a.prequential(s[:500], y[:500], times=3000.0 + t[:500])
    lp, lllr = river_loop(b, s[:500], y[:500], np.full(500, 3), np.ones(500), 3000.0 + t[:500])
    np.testing.assert_array_equal(p, lp)
    np.testing.assert_array_equal(llr, lllr)
    assert observable(a) == observable(b)


def test_pav_threads_equal_one_thread_with_the_prior():
    s, y = rare_stream(2**18 + 999, seed=6, shift=0.3)
    one, two = PAVCalibrator(window=50_000), PAVCalibrator(window=50_000, n_jobs=2)
    p1, l1 = one.prequential(s, y)
    p2, l2 = two.prequential(s, y)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(l1, l2)
    assert observable(one) == observable(two)


@pytest.mark.parametrize("make", [PAVCalibrator, ISplineCalibrator, PlattCalibrator, GEVCalibrator])
def test_maps_stay_monotone_with_the_prior(make):
    grid = np.geomspace(1e-6, 0.999, 400)
    for seed, shift in ((0, 0.0), (1, 0.6), (2, -1.5)):
        cal = make()
        s, y = rare_stream(1500, seed, shift)
        for lo in range(0, 1500, 300):
            cal.update(s[lo : lo + 300], y[lo : lo + 300])
            p = cal.predict_proba(grid)
            assert np.all(np.diff(p) >= 0.0)
            assert np.all((p > 0.0) & (p < 1.0))


# ---------------------------------------------------------------------------- what it is for
@pytest.mark.parametrize("make", [PAVCalibrator, ISplineCalibrator, PlattCalibrator])
def test_a_calibrated_rare_event_score_is_not_made_worse(make):
    s, y = rare_stream(3000, seed=11)
    p, _ = make().prequential(s, y)
    for n in (300, 1000, 3000):
        assert log_loss(p[:n], y[:n]) <= 1.01 * log_loss(s[:n], y[:n])
    p_exact, _ = make(prior=None).prequential(s, y)
    assert log_loss(p[:1000], y[:1000]) < log_loss(p_exact[:1000], y[:1000])


def test_a_strongly_miscalibrated_score_is_still_corrected():
    s, y = rare_stream(5000, seed=12, shift=3.0)
    for make in (PAVCalibrator, ISplineCalibrator, PlattCalibrator, GEVCalibrator):
        p, _ = make().prequential(s, y)
        assert log_loss(p[2000:], y[2000:]) < 0.8 * log_loss(s[2000:], y[2000:])


# ---------------------------------------------------------------------------- state
@pytest.mark.parametrize("make", [PAVCalibrator, ISplineCalibrator, PlattCalibrator, GEVCalibrator])
def test_save_load_and_pickle_keep_the_prior(make, tmp_path):
    s, y = rare_stream(1200, seed=13, shift=0.2)
    cal = make().update(s[:800], y[:800])
    path = tmp_path / "state.zip"
    streamcal.save(cal, path)
    for back in (streamcal.load(path), pickle.loads(pickle.dumps(cal))):
        assert back.prior == "auto"
        assert back.prior_strength == cal.prior_strength
        grid = np.geomspace(1e-5, 0.9, 50)
        np.testing.assert_array_equal(back.predict_proba(grid), cal.predict_proba(grid))
        back.update(s[800:], y[800:])
        twin = pickle.loads(pickle.dumps(cal)).update(s[800:], y[800:])
        np.testing.assert_array_equal(back.predict_proba(grid), twin.predict_proba(grid))


@pytest.mark.parametrize("make", [ISplineCalibrator, PlattCalibrator])
def test_states_saved_before_the_prior_load_without_it(make):
    s, y = rare_stream(600, seed=14)
    cal = make(prior=None).update(s, y)
    state = cal.__getstate__()
    del state["prior"], state["_prior_strength"]
    old = make.__new__(make)
    old.__setstate__(state)
    assert old.prior is None
    # the same histogram and map parameters: the same fit (up to the warm start's last bits)
    np.testing.assert_allclose(old.predict_proba([0.001, 0.01, 0.1]), cal.predict_proba([0.001, 0.01, 0.1]), rtol=1e-12)


def test_pav_state_saved_before_the_prior_loads_without_it():
    s, y = rare_stream(600, seed=15)
    cal = PAVCalibrator(prior=None).update(s, y)
    state = cal.__getstate__()
    del state["prior"]
    B = cal.centres.size
    state["_pf"] = state["_pf"][: K.pav_state_sizes_before_prior(B)].copy()  # format 2, before the prior
    old = PAVCalibrator.__new__(PAVCalibrator)
    old.__setstate__(state)
    assert old.prior is None
    grid = np.geomspace(1e-5, 0.9, 50)
    np.testing.assert_array_equal(old.predict_proba(grid), cal.predict_proba(grid))


def test_a_damaged_prior_section_is_refused():
    s, y = rare_stream(600, seed=16)
    cal = PAVCalibrator().update(s, y)
    o = K.pav_state_sizes_before_prior(cal.centres.size)
    for slot, value in ((K.PR_KAPPA, -1.0), (K.PR_KAPPA, math.nan), (K.PR_MODE, 2.0), (K.PR_RATE, 1.5), (K.PR_NEXT, math.inf)):
        state = cal.__getstate__()
        state["_pf"] = state["_pf"].copy()
        state["_pf"][o + slot] = value
        with pytest.raises(StateFileError):
            PAVCalibrator.__new__(PAVCalibrator).__setstate__(state)
    # the augmented row is checked against a rebuild
    state = cal.__getstate__()
    state["_pf"] = state["_pf"].copy()
    state["_pf"][o + K.PR_HEADER + 3] += 1.0
    with pytest.raises(StateFileError, match="do not match"):
        PAVCalibrator.__new__(PAVCalibrator).__setstate__(state)


def test_merge_refits_the_strength_to_the_merged_window():
    s, y = rare_stream(4000, seed=17, shift=0.4)
    a = PAVCalibrator().update(s[:2000], y[:2000])
    b = PAVCalibrator().update(s[2000:], y[2000:])
    merged = streamcal.merge([a, b])
    single = PAVCalibrator().update(s, y)
    for got, want in zip(merged.window_histogram.arrays(), single.window_histogram.arrays(), strict=True):
        np.testing.assert_array_equal(got, want)
    pos, neg = rows(merged)
    want = naive_prior_strength(pos, neg, merged.centres, True)
    assert merged.prior_strength == pytest.approx(want, rel=1e-5)
    # the merged blocks are PAV of the merged row plus its prior, as a fresh rebuild gives them
    kappa = merged.prior_strength
    sec = prior_section(merged)
    aug = naive_augmented_row(pos, neg, merged.centres, kappa, float(sec[K.PR_RATE]), float(sec[K.PR_FLOOR]), True)
    assert observable(merged)[0] == naive_pav_bucket_blocks(*aug)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("make", [PAVCalibrator, ISplineCalibrator, PlattCalibrator, GEVCalibrator])
@pytest.mark.parametrize("bad", ["yes", 1.0, True, "Auto"])
def test_bad_prior_names_the_argument_and_the_value(make, bad):
    with pytest.raises(ValueError, match=r"`prior` must be one of \['auto', None\]; got"):
        make(prior=bad)


def test_a_state_of_this_layout_without_its_prior_is_refused_not_guessed():
    s, y = rare_stream(600, seed=18)
    pav = PAVCalibrator().update(s, y)
    state = pav.__getstate__()
    del state["prior"]
    with pytest.raises(StateFileError, match="prior"):
        PAVCalibrator.__new__(PAVCalibrator).__setstate__(state)
    platt = PlattCalibrator().update(s, y)
    for gone in ("prior", "_prior_strength"):
        state = platt.__getstate__()
        del state[gone]
        with pytest.raises(StateFileError, match=gone):
            PlattCalibrator.__new__(PlattCalibrator).__setstate__(state)


def test_the_river_fast_path_equals_the_array_face_with_the_prior():
    # ``learn_one`` with a float score, a bool label and no time runs the packed entry point
    s, y = rare_stream(2000, seed=19, shift=0.3)
    a, b = PAVCalibrator(), PAVCalibrator()
    for score, label in zip(s.tolist(), y.tolist(), strict=True):
        a.learn_one({"s": score}, bool(label))
    b.update(s, y)
    assert a.prior_strength > 0.0
    assert observable(a) == observable(b)
    grid = np.geomspace(1e-5, 0.9, 40)
    assert [a.predict_proba_one({"s": float(v)})[True] for v in grid] == b.predict_proba(grid).tolist()
