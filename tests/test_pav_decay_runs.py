"""The finite-LLR end runs under decay: each run resumes at a point it kept, though the
pseudo-count grows in stored units with every event. After every event the clip values and
the prior odds equal, bit for bit, a loop that sums both runs from their ends
(``naive_end_runs``), the whole map equals a rebuild, and the outputs equal those of a copy
whose refresh starts from the ends; both tiers of kernels give the same bits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import PAVCalibrator, persist
from streamcal._kernels import _config
from streamcal._kernels import ipav as K
from streamcal._kernels.histogram import stored_unit
from streamcal.buckets import LogitGrid
from streamcal.windows import Decay


def naive_end_runs(sf, pf, pi):
    """``(lo, hi, inverse prior odds)`` of the finite-LLR rule: one pseudo-positive of weight
    ``c`` added to the first block and pooled rightwards while the blocks violate, one
    pseudo-negative added to the last and pooled leftwards, summed from the ends in that order.
    The inverse prior odds are 0 while the window holds no weight (the LLR is then 0)."""
    c = pf[K.PF_PSEUDO] * stored_unit(sf, sf[K.SF_KIND])
    total = sf[K.SF_T_NEG] + sf[K.SF_T_POS]
    odds = (sf[K.SF_T_NEG] + c) / (sf[K.SF_T_POS] + c) if total != 0.0 else 0.0
    v = K.pav_blocks_view(pf, pi)
    blocks = []
    f = int(pi[K.PI_HEAD])
    while f != -1:
        blocks.append((v["bpos"][f], v["bneg"][f]))
        f = int(v["bnext"][f])
    if not blocks:
        return 0.5, 0.5, odds
    lp, ln = blocks[0][0] + c, blocks[0][1]
    i = 1
    while i < len(blocks) and lp * (blocks[i][0] + blocks[i][1]) >= blocks[i][0] * (lp + ln):
        lp, ln = lp + blocks[i][0], ln + blocks[i][1]
        i += 1
    if i == len(blocks):
        return lp / (lp + (ln + c)), lp / (lp + (ln + c)), odds
    rp, rn = blocks[-1][0], blocks[-1][1] + c
    j = len(blocks) - 2
    while j >= i and blocks[j][0] * (rp + rn) >= rp * (blocks[j][0] + blocks[j][1]):
        rp, rn = blocks[j][0] + rp, blocks[j][1] + rn
        j -= 1
    if j < i and lp * (rp + rn) >= rp * (lp + ln):
        both = (lp + rp) / ((lp + rp) + (ln + rn))
        return both, both, odds
    return lp / (lp + ln), rp / (rp + rn), odds


def ties_in_the_left_run(sf, pf, pi):
    """How many additions of the left run (from its end) round a tie, within the binade of its
    first sum: the additions whose result depends on the sum's last bit."""
    c = pf[K.PF_PSEUDO] * stored_unit(sf, sf[K.SF_KIND])
    v = K.pav_blocks_view(pf, pi)
    f = int(pi[K.PI_HEAD])
    lp, ln = v["bpos"][f] + c, v["bneg"][f]
    top = math.ldexp(1.0, math.frexp(lp)[1])
    ties = 0
    f = int(v["bnext"][f])
    while f != -1:
        p, n = v["bpos"][f], v["bneg"][f]
        if not lp * (p + n) >= p * (lp + ln):
            break
        s = lp + p
        ties += int(s < top and abs(p - (s - lp)) == top * 2.0**-54)
        lp, ln = s, ln + n
        f = int(v["bnext"][f])
    return ties


def bits(values):
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def assert_map_equals_rebuild(cal):
    """The blocks, owners, fitted values and clip values equal a rebuild's, bit for bit (the
    stack scratch and the pending-change range aside)."""
    sf, si = cal.window_histogram.arrays()
    pf, pi = cal.map_arrays()
    again_f, again_i = pf.copy(), pi.copy()
    K.pav_rebuild_inplace(sf, si, again_f, again_i)
    B = int(pi[K.PI_B])
    scratch_f = slice(K.PF_HEADER + K._PF_RECORD * B, K.PF_HEADER + (K._PF_RECORD + K._STACK_RECORD) * B)
    scratch_i = slice(K.PI_HEADER + K._PI_RECORD * B, K.pav_state_sizes_before_knots(B))
    again_f[scratch_f] = pf[scratch_f]
    again_i[scratch_i] = pi[scratch_i]
    for name in (K.PI_CHG_LO, K.PI_CHG_HI, K.PI_DEP_LO, K.PI_DEP_HI):  # bookkeeping of the pending changes
        again_i[name] = pi[name]
    assert bits(again_f) == bits(pf)
    assert again_i.tolist() == pi.tolist()


def assert_refreshed_from_the_ends(cal):
    sf = cal.window_histogram.arrays()[0]
    pf, pi = cal.map_arrays()
    assert bits(pf[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]]) == bits(naive_end_runs(sf, pf, pi))
    again_f, again_i = pf.copy(), pi.copy()
    K.pav_refresh_extremes_inplace(sf, again_f, again_i, K.unset_runs())
    assert bits(again_f) == bits(pf)


def resume_points_set(cal):
    runs = K.packed_runs(cal.packed_state())
    return int(runs[K.RUN_LEFT] >= 0.0) + int(runs[K.RUN_RIGHT] >= 0.0)


def step_against_a_fresh_copy(cal, s, y, w, t):
    """Learn one event in ``cal`` (its end runs may resume) and in a copy restored from its bytes
    (no resume point: both runs from their ends); the outputs and maps agree bit for bit."""
    fresh = persist.from_bytes(persist.to_bytes(cal))
    got = cal.prequential([s], [y], weights=[w], times=[t])
    want = fresh.prequential([s], [y], weights=[w], times=[t])
    assert bits(got[0]) == bits(want[0])
    assert bits(got[1]) == bits(want[1])
    assert all(bits(a) == bits(b) for a, b in zip(cal.map_arrays(), fresh.map_arrays(), strict=True))
    grid = np.linspace(0.001, 0.999, 37)
    assert bits(cal.predict_proba(grid)) == bits(fresh.predict_proba(grid))
    assert bits(cal.predict_llr(grid)) == bits(fresh.predict_llr(grid))


@st.composite
def decay_streams(draw):
    n_buckets = draw(st.sampled_from([2, 5, 16, 64]))
    half_life = draw(st.sampled_from([1.0, 2.5, 7.0, 40.0, 300.0]))
    by = draw(st.sampled_from(["events", "time"]))
    weight = st.one_of(st.integers(1, 3).map(float), st.sampled_from([0.1, 1.0 / 3.0, 0.7, 2.5, 1e-3]))
    n = draw(st.integers(1, 60))
    scores = draw(st.lists(st.floats(0.002, 0.998), min_size=n, max_size=n))
    labels = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    weights = draw(st.lists(weight, min_size=n, max_size=n))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=n, max_size=n))
    return n_buckets, Decay(half_life=half_life, by=by), scores, labels, weights, np.cumsum(gaps)


@settings(max_examples=60, deadline=None)
@given(decay_streams(), st.sampled_from(["auto", None]), st.booleans())
def test_end_runs_under_decay_equal_a_refresh_from_the_ends_after_every_event(stream, prior, finite_proba):
    n_buckets, window, s, y, w, t = stream
    cal = PAVCalibrator(buckets=LogitGrid(n_buckets), window=window, prior=prior, finite_proba=finite_proba)
    for i in range(len(s)):
        step_against_a_fresh_copy(cal, s[i], y[i], w[i], t[i])
        assert_refreshed_from_the_ends(cal)
        assert_map_equals_rebuild(cal)


def click_stream(n, seed, fractional=True):
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.5, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    w = np.where(rng.uniform(size=n) < 0.5, rng.uniform(0.5, 1.5, size=n), 1.0) if fractional else np.ones(n)
    return s, y, w


@pytest.mark.parametrize("prior", ["auto", None])
@pytest.mark.parametrize("half_life", [20.0, 300.0, 3000.0])
def test_long_decay_stream_resumes_and_equals_a_refresh_from_the_ends(prior, half_life):
    """Hundreds of light blocks in each run (the prior's row over 256 buckets): the runs keep
    points after most events, and every event's values equal a refresh from the ends."""
    s, y, w = click_stream(1500, 3)
    cal = PAVCalibrator(buckets=LogitGrid(256), window=Decay(half_life=half_life), prior=prior)
    kept = 0
    for i in range(s.size):
        cal.prequential(s[i : i + 1], y[i : i + 1], weights=w[i : i + 1])
        assert_refreshed_from_the_ends(cal)
        kept += resume_points_set(cal)
    assert kept > s.size  # more than one point per event on average: the runs resume
    assert_map_equals_rebuild(cal)


def test_whole_weights_halving_each_event_sit_on_rounding_ties():
    """With a half-life of one event and whole weights, every stored weight is a whole number
    times a power of two, and the left run adds blocks that are odd multiples of half its sum's
    spacing: ties, which round to even by the sum's last bit. The stream meets them, and every
    event's values and outputs equal those of a refresh from the ends."""
    rng = np.random.default_rng(5)
    n = 400
    s = rng.uniform(0.01, 0.99, size=n)
    y = rng.uniform(size=n) < s
    w = rng.integers(1, 4, size=n).astype(float)
    cal = PAVCalibrator(buckets=LogitGrid(32), window=Decay(half_life=1.0), prior=None)
    ties = 0
    for i in range(n):
        step_against_a_fresh_copy(cal, s[i], y[i], w[i], float(i))
        assert_refreshed_from_the_ends(cal)
        sf = cal.window_histogram.arrays()[0]
        ties += ties_in_the_left_run(sf, *cal.map_arrays())
    assert ties > 0


def test_a_tie_ends_the_points_and_each_parity_rounds_it_its_own_way():
    """A run built on a tie, at the kernel: a first sum ``S0`` (spacing ``u``) and a block of
    ``u / 2`` round to ``S0`` when ``S0 / u`` is even and to ``S0 + u`` when odd. A point kept
    past that block would carry one parity's rounding to the other's sum; the refresh keeps
    none past it, and its values equal the loop from the ends for both parities."""
    cal = PAVCalibrator(buckets="uniform:8", window=Decay(half_life=1e6), prior=None)
    cal.prequential([0.05, 0.05, 0.45, 0.45, 0.95, 0.95], [False, False, True, False, True, True])
    sf = cal.window_histogram.arrays()[0]
    pf, pi = cal.map_arrays()
    v = K.pav_blocks_view(pf, pi)
    c = pf[K.PF_PSEUDO] * stored_unit(sf, sf[K.SF_KIND])
    head = int(pi[K.PI_HEAD])
    first = int(v["bnext"][head])
    assert first != -1
    assert int(v["bnext"][first]) != -1  # a block past the tie, pooled as well
    rounded = {}
    p_head = 1000.0
    while len(rounded) < 2:
        p_head = np.nextafter(p_head, 2000.0)
        s0 = p_head + c
        u = math.ldexp(1.0, math.frexp(s0)[1] - 53)
        pf_try, pi_try = pf.copy(), pi.copy()
        pf_try[K.BPOS + K._PF_RECORD * head] = p_head
        pf_try[K.BNEG + K._PF_RECORD * head] = 0.0
        pf_try[K.BPOS + K._PF_RECORD * first] = u / 2  # a tie: rounds to an even multiple of u
        pf_try[K.BNEG + K._PF_RECORD * first] = 0.0
        pi_try[K.PI_CHG_LO] = int(pi[K.PI_B])  # no pending change: a kept point would be used
        pi_try[K.PI_CHG_HI] = -1
        runs = K.unset_runs()
        K.pav_refresh_extremes_inplace(sf, pf_try, pi_try, runs)
        assert bits(pf_try[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]]) == bits(naive_end_runs(sf, pf_try, pi_try))
        assert runs[K.RUN_LEFT] <= first  # no point past the tie (-1: none)
        rounded[int(s0 / u) % 2] = (s0 + u / 2) - s0
    assert rounded == {0: 0.0, 1: u}  # the two parities round the tie apart


def test_a_pooling_test_that_rounding_decides_keeps_no_point_past_it():
    """A run whose first test ties in exact arithmetic: the first block ``(P0, u / 2)`` with
    ``S0 = P0 + c`` of spacing ``u``, then a block ``(p, 0)``. ``S0 + u / 2`` rounds to ``S0``
    when ``S0 / u`` is even (the test passes, the block pools) and up when odd (it fails). A
    point kept past that block at an even ``S0`` would skip the test at a larger, odd one; the
    margin keeps none there, and a refresh at the larger pseudo-count equals the loop from the
    ends."""
    cal = PAVCalibrator(buckets="uniform:8", window=Decay(half_life=1e6), prior=None)
    cal.prequential([0.05, 0.05, 0.45, 0.45, 0.95, 0.95], [False, False, True, False, True, True])
    sf = cal.window_histogram.arrays()[0]
    pf, pi = cal.map_arrays()
    v = K.pav_blocks_view(pf, pi)
    unit = stored_unit(sf, sf[K.SF_KIND])
    head = int(pi[K.PI_HEAD])
    first = int(v["bnext"][head])
    second = int(v["bnext"][first])
    p_head = 1000.0
    while True:  # an even S0
        s0 = p_head + pf[K.PF_PSEUDO] * unit
        u = math.ldexp(1.0, math.frexp(s0)[1] - 53)
        if int(s0 / u) % 2 == 0:
            break
        p_head = np.nextafter(p_head, 2000.0)
    pf[K.BPOS + K._PF_RECORD * head] = p_head
    pf[K.BNEG + K._PF_RECORD * head] = u / 2
    pf[K.BPOS + K._PF_RECORD * first] = 0.5  # a power of two: the products are exact
    pf[K.BNEG + K._PF_RECORD * first] = 0.0
    pf[K.BPOS + K._PF_RECORD * second] = 0.0  # pooled whatever the sums: a point may sit here
    pf[K.BNEG + K._PF_RECORD * second] = 1.0
    runs = K.unset_runs()
    pooled = []
    for _ in range(2):
        pi[K.PI_CHG_LO] = int(pi[K.PI_B])  # no pending change: a kept point would be used
        pi[K.PI_CHG_HI] = -1
        K.pav_refresh_extremes_inplace(sf, pf, pi, runs)
        assert bits(pf[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]]) == bits(naive_end_runs(sf, pf, pi))
        assert runs[K.RUN_LEFT] <= first  # no point past the test that rounding decided
        lp = pf[K.BPOS + K._PF_RECORD * head] + pf[K.PF_PSEUDO] * unit
        pooled.append(lp * 0.5 >= 0.5 * (lp + u / 2))
        pseudo = pf[K.PF_PSEUDO]
        while int((p_head + pseudo * unit) / u) % 2 == 0:  # the next pseudo-count makes S0 odd
            pseudo = np.nextafter(pseudo, 2.0 * pseudo)
        pf[K.PF_PSEUDO] = pseudo
    assert pooled == [True, False]  # the test passed at the even sum and fails at the odd one


@pytest.mark.parametrize("prior", ["auto", None])
def test_both_tiers_learn_decayed_events_with_the_same_bits(prior):
    """The learn kernel, its end runs' points included, interpreted and compiled from the same
    state, event by event: every array and the scratch agree bit for bit."""
    s, y, w = click_stream(700, 9)
    cal = PAVCalibrator(buckets=LogitGrid(128), window=Decay(half_life=150.0), prior=prior)
    cal.prequential(s[:500], y[:500], weights=w[:500])
    packed = cal.packed_state().copy()
    ends = packed[K.PACK_O_SI : K.PACK_END + 1].astype(np.intp)

    def views(buffer):
        return (
            buffer[K.PACK_HEADER : ends[0]],
            buffer[ends[0] : ends[1]].view(np.int64),
            buffer[ends[1] : ends[2]],
            buffer[ends[2] : ends[3]].view(np.int64),
            K.packed_runs(buffer),
        )

    a, b = packed.copy(), packed.copy()
    learn_interpreted = _config.interpreted(K.pav_learn_one_inplace)
    learn_compiled = _config.compiled(K.pav_learn_one_inplace)
    resumed = 0
    for i in range(500, s.size):
        bucket = cal.window_histogram.layout.bucket_of(float(s[i]))
        args = (bucket, float(y[i]), float(w[i]), 0.0)
        va, vb = views(a), views(b)
        with np.errstate(all="ignore"):
            learn_interpreted(*va, *args, va[0][K.SF_KIND])
        learn_compiled(*vb, *args, vb[0][K.SF_KIND])
        assert bits(a) == bits(b), i
        resumed += int(va[4][K.RUN_LEFT] >= 0.0)
    assert resumed > 100
