"""The resumed PAV sweep's shortcuts in floating arithmetic (fractional weights, decay, the prior's
augmented row): it resumes inside a block at a checkpoint, stops at an untouched block's first
knot by a margin, and writes only the owners that change. After every update the blocks, owners
and fitted values equal a from-scratch sweep bit for bit (``naive_pav_bucket_blocks``), the whole
state equals a rebuild bit for bit (checkpoints included), and the fitted values equal the exact
isotonic fit of the window's events."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_pav_bucket_blocks, naive_pav_bucket_fit, naive_pav_textbook

from streamcal import PAVCalibrator, persist
from streamcal._kernels import ipav as K
from streamcal.buckets import Edges, LogitGrid
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

NASTY = [0.1, 0.2, 0.3, 0.7, 1.0 / 3.0, 2.5, 1e-3, 1.0, 2.0, 3.0, 0.6, 0.9]


def blocks_of(pf, pi):
    v = K.pav_blocks_view(pf, pi)
    out = []
    f = int(pi[K.PI_HEAD])
    while f != -1:
        out.append((f, int(v["bend"][f]), v["bpos"][f], v["bneg"][f]))
        f = int(v["bnext"][f])
    return out, v["owner"].copy(), v["fit"].copy()


def assert_equals_sweep(hist, B, centres, pf, pi):
    pos, neg = hist[:B], hist[B:]
    want = naive_pav_bucket_blocks(pos, neg)
    got, owner, fit = blocks_of(pf, pi)
    assert got == want
    if want:
        w_owner, w_fit = naive_pav_bucket_fit(want, centres)
        span = slice(want[0][0], want[-1][1] + 1)
        np.testing.assert_array_equal(owner[span], w_owner[span])
        np.testing.assert_array_equal(fit[span], w_fit[span])


def assert_state_equals_rebuild(hist, pf, pi):
    """Every field but the stack scratch equals a full sweep's, bit for bit (checkpoints too)."""
    B = int(pi[K.PI_B])
    again_f, again_i = pf.copy(), pi.copy()
    K.pav_bucket_changed_inplace(hist, 0, again_f, again_i, -1)
    scratch_f = slice(K.PF_HEADER + K._PF_RECORD * B, K.PF_HEADER + (K._PF_RECORD + K._STACK_RECORD) * B)
    scratch_i = slice(K.PI_HEADER + K._PI_RECORD * B, K.pav_state_sizes_before_knots(B))
    again_f[scratch_f] = pf[scratch_f]
    again_i[scratch_i] = pi[scratch_i]
    for name in (K.PI_CHG_LO, K.PI_CHG_HI):  # the pending-change range: a full sweep widens it
        again_i[name] = pi[name]
    assert again_f.view(np.int64).tolist() == pf.view(np.int64).tolist()
    assert again_i.tolist() == pi.tolist()


@st.composite
def float_streams(draw):
    B = draw(st.integers(1, 24))
    ops, live = [], []
    for _ in range(draw(st.integers(1, 120))):
        if live and draw(st.booleans()):
            ops.append(("remove", live.pop(draw(st.integers(0, len(live) - 1)))))
        else:
            ev = (draw(st.integers(0, B - 1)), draw(st.integers(0, 1)), draw(st.sampled_from(NASTY)))
            live.append(ev)
            ops.append(("add", ev))
    return B, ops


@settings(max_examples=150, deadline=None)
@given(float_streams(), st.booleans())
def test_checkpointed_repairs_equal_a_sweep_after_each_update(stream, delta):
    B, ops = stream
    centres = np.linspace(0.05, 0.95, B) if B > 1 else np.array([0.5])
    pf, pi = K.empty_pav_state(centres, 1.0, True, True)
    pi[K.PI_INTEGRAL] = 0  # floating weights: the checkpoints are kept and read
    hist = np.zeros(2 * B)
    for kind, (b, cls, w) in ops:
        old_p, old_n = float(hist[b]), float(hist[B + b])
        hist[cls * B + b] = hist[cls * B + b] + w if kind == "add" else max(hist[cls * B + b] - w, 0.0)
        if delta:
            K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, old_p, old_n)
        else:
            K.pav_bucket_changed_inplace(hist, 0, pf, pi, b)
        assert_equals_sweep(hist, B, centres, pf, pi)
        assert_state_equals_rebuild(hist, pf, pi)


@pytest.mark.parametrize("B", [40, 600])  # knots dense (bucket by bucket), sparse (the knot list)
def test_long_fractional_stream_equals_a_sweep_and_a_rebuild(B):
    rng = np.random.default_rng(B)
    centres = np.linspace(0.0, 1.0, B)
    pf, pi = K.empty_pav_state(centres, 1.0, True, False)
    pi[K.PI_INTEGRAL] = 0
    hist = np.zeros(2 * B)
    live = []
    for i in range(4000):
        if len(live) > 150 or (live and rng.uniform() < 0.3):
            b, c, w = live.pop(0)
            old = float(hist[b]), float(hist[B + b])
            hist[c * B + b] = max(hist[c * B + b] - w, 0.0)
        else:
            x = rng.beta(2.0, 2.0)
            b = min(int(x * B), B - 1)
            c = int(rng.uniform() < x)
            w = float(rng.uniform(0.5, 1.5))
            live.append((b, c, w))
            old = float(hist[b]), float(hist[B + b])
            hist[c * B + b] += w
        K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, *old)
        if i % 10 == 0:
            assert_equals_sweep(hist, B, centres, pf, pi)
            assert_state_equals_rebuild(hist, pf, pi)


def test_margin_stop_with_rates_tied_to_rounding():
    """Blocks whose rates tie, or differ by an ulp: the sweep must walk them (no margin)."""
    B = 12
    centres = np.linspace(0.0, 1.0, B)
    pf, pi = K.empty_pav_state(centres, 1.0, True, False)
    pi[K.PI_INTEGRAL] = 0
    hist = np.zeros(2 * B)
    rng = np.random.default_rng(5)
    for _ in range(3000):
        b = int(rng.integers(B))
        old = float(hist[b]), float(hist[B + b])
        # rates 1/3 formed from thirds and tenths, exactly or to an ulp
        p, n = (0.1, 0.2) if rng.uniform() < 0.5 else (1.0 / 3.0, 2.0 / 3.0)
        if rng.uniform() < 0.5:
            hist[b] += p
            hist[B + b] += n
        else:
            hist[b] = max(hist[b] - p, 0.0)
            hist[B + b] = max(hist[B + b] - n, 0.0)
        K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, *old)
        assert_equals_sweep(hist, B, centres, pf, pi)


def test_stays_below_needs_the_margin_and_the_safe_range():
    f = K._stays_below.py_func
    assert f(False, 1.0, 3.0, 1.0, 1.0, 1.0)  # 0.25 against 0.5
    assert not f(False, 1.0, 1.0, 1.0, 1.0, 1.0)  # a tie
    assert not f(False, 1.0, 1.0 + 2.0**-40, 1.0, 1.0, 1.0)  # below, by less than the margin
    assert not f(False, 0.0, 1.0, 1.0, 0.0, 1.0)  # both rates 0
    assert not f(False, 1e-200, 1e-200, 1.0, 1.0, 1.0)  # a top too light for the safe range
    assert not f(False, 1.0, 3.0, 1e-100, 1.0, 1.0)  # a first knot too light
    assert not f(False, 1.0, 3.0, 1.0, 1e200, 1e200)  # a block too heavy
    assert f(True, 1.0, 1.0 + 2.0**-40, 1.0, 1.0, 1.0)  # exact sums: no margin needed


@pytest.mark.parametrize(
    "window", [CountWindow(300), Decay(half_life=200.0), TimeWindow(seconds=250.0), Decay(half_life=3.0)], ids=repr
)
@pytest.mark.parametrize("prior", [None, "auto"])
def test_calibrator_fit_equals_exact_isotonic_fit_of_the_window(window, prior):
    """One bucket per distinct score: the fitted values equal the textbook PAV of the window's
    events (decayed weights for ``Decay``) to 1e-12 relative, with fractional weights."""
    rng = np.random.default_rng(11)
    values = np.linspace(0.02, 0.98, 25)
    edges = np.concatenate(([0.0], 0.5 * (values[1:] + values[:-1]), [1.0]))
    n = 2500
    idx = rng.integers(0, values.size, size=n)
    s = values[idx]
    y = rng.uniform(size=n) < s**1.5
    w = rng.uniform(0.5, 1.5, size=n)
    t = np.arange(n, dtype=float)
    cal = PAVCalibrator(
        buckets=Edges(edges, centres=values), window=window, prior=prior, interpolation="step", finite_proba=False
    )
    for lo in range(0, n, 250):
        cal.prequential(s[lo : lo + 250], y[lo : lo + 250], weights=w[lo : lo + 250], times=t[lo : lo + 250])
        end = lo + 250
        if prior is not None:
            continue  # the prior's pseudo-counts: compared with a rebuild below instead
        if isinstance(window, Decay):
            keep = np.arange(end)
            weight = w[:end] * 2.0 ** ((t[:end] - t[end - 1]) / window.half_life)
        else:
            span = window.n if isinstance(window, CountWindow) else None
            keep = np.arange(max(0, end - span), end) if span else np.flatnonzero(t[:end] > t[end - 1] - window.seconds)
            weight = w[keep]
        pos = np.bincount(idx[keep], weights=weight * y[keep], minlength=values.size)
        tot = np.bincount(idx[keep], weights=weight, minlength=values.size)
        have = tot > 0
        rate = np.where(have, pos / np.where(have, tot, 1.0), 0.0)
        want = naive_pav_textbook(rate[have], tot[have])
        got = cal.predict_proba(values[have])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
    sf, si = cal.window_histogram.arrays()
    pf, pi = (a.copy() for a in cal.map_arrays())
    again_f, again_i = pf.copy(), pi.copy()
    K.pav_rebuild_inplace(sf, si, again_f, again_i)
    assert blocks_of(pf, pi)[0] == blocks_of(again_f, again_i)[0]


@pytest.mark.parametrize("window", [CountWindow(2000), Decay(half_life=1500.0)], ids=repr)
def test_checkpointed_state_survives_pickling_and_continues_bit_for_bit(window):
    rng = np.random.default_rng(2)
    n = 6000
    s = 1.0 / (1.0 + np.exp(-rng.normal(-2.0, 1.5, size=n)))
    y = rng.uniform(size=n) < s
    w = rng.uniform(0.5, 1.5, size=n)
    cal = PAVCalibrator(buckets=LogitGrid(256), window=window, prior=None)
    cal.prequential(s[:3000], y[:3000], weights=w[:3000])
    again = pickle.loads(pickle.dumps(cal))
    a = cal.prequential(s[3000:], y[3000:], weights=w[3000:])
    b = again.prequential(s[3000:], y[3000:], weights=w[3000:])
    assert a[0].tobytes() == b[0].tobytes()
    assert a[1].tobytes() == b[1].tobytes()


def test_whole_weights_turning_fractional_keep_the_blocks_bit_for_bit():
    """The first fractional weight switches the checkpoints on (a rebuild): the blocks stay a
    sweep's, and the outputs those of a calibrator fed the same events one by one."""
    rng = np.random.default_rng(4)
    n = 3000
    s = rng.uniform(size=n)
    y = rng.uniform(size=n) < s
    w = np.ones(n)
    w[1500:] = rng.uniform(0.5, 1.5, size=n - 1500)
    a = PAVCalibrator(buckets=LogitGrid(64), window=CountWindow(400), prior=None)
    pa = a.prequential(s, y, weights=w)[0]
    b = PAVCalibrator(buckets=LogitGrid(64), window=CountWindow(400), prior=None)
    pb = np.array([b.predict_proba_one({"s": float(v)})[True] for v in s[:1]])
    for i in range(n):
        if i:
            pb = np.append(pb, b.predict_proba([s[i]]))
        b.learn_one({"s": float(s[i])}, bool(y[i]), w=float(w[i]))
    assert pa.tobytes() == pb.tobytes()
    sf = a.window_histogram.arrays()[0]
    B = 64
    pos, neg = sf[12 : 12 + B], sf[12 + B : 12 + 2 * B]
    assert blocks_of(*a.map_arrays())[0] == naive_pav_bucket_blocks(pos, neg)


# ------------------------------------------------------------------ the end runs' resume points
def click_stream(n, seed):
    """Ad clicks: low, over-confident scores (as ``generate``'s), some fractional weights."""
    rng = np.random.default_rng(seed)
    m = rng.normal(-3.2, 1.2, size=n)
    s = 1.0 / (1.0 + np.exp(-m))
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(0.7 * m - 2.0)))
    w = np.where(rng.uniform(size=n) < 0.3, rng.choice(NASTY, size=n), 1.0)
    t = np.cumsum(rng.exponential(1.0, size=n))
    return s, y, w, t


def refreshed_from_the_ends(cal):
    """The clip values and prior odds of a refresh that starts both end runs at their ends."""
    pf, pi = (a.copy() for a in cal.map_arrays())
    K.pav_refresh_extremes_inplace(cal.window_histogram.arrays()[0], pf, pi, K.unset_runs())
    return pf[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]].view(np.int64).tolist()


def resume_points_set(cal):
    """How many of the two end runs have a resume point in the calibrator's scratch: a single
    point, or records of the blocks it reached (without decay, where the scratch keeps them)."""
    runs = K.packed_runs(cal.packed_state())
    _, pi = cal.map_arrays()
    left = runs[K.RUN_LEFT] >= 0.0 or runs[K.REC_LEFT_LIM] > pi[K.PI_HEAD]
    right = runs[K.RUN_RIGHT] >= 0.0 or runs[K.REC_RIGHT_LIM] < pi[K.PI_TAIL]
    return int(left) + int(right)


def test_the_calibrators_scratch_keeps_a_record_of_every_block():
    """The array face's scratch has room for a record per block and per run; the river face's
    entry points and a fresh scratch of ``unset_runs()`` keep the single points alone."""
    cal = PAVCalibrator(buckets=LogitGrid(256), window=CountWindow(300))
    s, y, w, _ = click_stream(400, 3)
    cal.prequential(s, y, weights=w)
    assert K.packed_runs(cal.packed_state()).size == K.runs_size(256)
    assert K.unset_runs().size == K.RUNS_SIZE
    fresh = K.unset_runs(256)
    assert fresh.size == K.runs_size(256)
    assert (fresh[K.REC_LEFT_LIM], fresh[K.REC_RIGHT_LIM]) == (-1.0, 256.0)


@pytest.mark.parametrize("prior", ["auto", None])
@pytest.mark.parametrize(
    "window", [Unbounded(), CountWindow(300), TimeWindow(seconds=250.0), Decay(half_life=300.0)], ids=repr
)
@pytest.mark.parametrize("n_buckets", [3, 6, 256])
def test_end_runs_resumed_at_their_points_equal_a_refresh_from_the_ends(prior, window, n_buckets):
    """After every learned event the finite-LLR values the kernels keep (each end run resumed at
    its point where the blocks it summed are unchanged) equal, bit for bit, those of a refresh
    that sums both runs from their ends."""
    s, y, w, t = click_stream(800, n_buckets)
    cal = PAVCalibrator(buckets=LogitGrid(n_buckets), window=window, prior=prior)
    kept = [K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]
    set_after = 0
    for i in range(s.size):
        cal.prequential(s[i : i + 1], y[i : i + 1], weights=w[i : i + 1], times=t[i : i + 1])
        pf, _ = cal.map_arrays()
        assert pf[kept].view(np.int64).tolist() == refreshed_from_the_ends(cal), i
        set_after += resume_points_set(cal)
    if n_buckets > 64:
        assert set_after > s.size // 2  # the points are kept (and, by the comparison, right)


def test_a_restored_calibrator_saves_the_same_bytes_and_continues_bit_for_bit():
    """The resume points are not part of the state: a calibrator saved and loaded mid-stream
    (its scratch made afresh, unset) saves the bytes of the original, and both continue with the
    same outputs and again save the same bytes, whatever points each kept meanwhile."""
    s, y, w, _ = click_stream(3000, 7)
    cal = PAVCalibrator(buckets=LogitGrid(256), window=CountWindow(1000))
    cal.prequential(s[:1500], y[:1500], weights=w[:1500])
    assert resume_points_set(cal) >= 1  # the stream keeps them
    back = persist.from_bytes(persist.to_bytes(cal))
    assert resume_points_set(back) == 0
    assert persist.to_bytes(back) == persist.to_bytes(cal)
    a = cal.prequential(s[1500:], y[1500:], weights=w[1500:])
    b = back.prequential(s[1500:], y[1500:], weights=w[1500:])
    assert a[0].tobytes() == b[0].tobytes()
    assert a[1].tobytes() == b[1].tobytes()
    assert persist.to_bytes(back) == persist.to_bytes(cal)


@pytest.mark.parametrize("scratch", ["none", "points"])
def test_events_learned_without_the_scratch_drop_the_resume_points(scratch):
    """A composite's kernels learn into a calibrator's packed state without its scratch (their
    refreshes keep no points), or with its first ``RUNS_SIZE`` values alone (the river face's
    entry points: single points, no records): the calibrator's next event notices the
    learned-event count and drops what it can no longer trust, so it continues with the outputs
    of a calibrator that learned every event itself, bit for bit."""
    s, y, w, _ = click_stream(3000, 11)
    cal = PAVCalibrator(buckets=LogitGrid(256), window=CountWindow(500))
    twin = PAVCalibrator(buckets=LogitGrid(256), window=CountWindow(500))
    kept = 0
    for lo in range(0, 3000, 300):
        part = slice(lo, lo + 200)
        cal.prequential(s[part], y[part], weights=w[part])
        twin.prequential(s[part], y[part], weights=w[part])
        kept += resume_points_set(cal)
        packed = cal.packed_state()
        ends = packed[K.PACK_O_SI : K.PACK_END + 1].astype(np.intp)
        sf, si = packed[K.PACK_HEADER : ends[0]], packed[ends[0] : ends[1]].view(np.int64)
        pf, pi = packed[ends[1] : ends[2]], packed[ends[2] : ends[3]].view(np.int64)
        runs = pf[:0] if scratch == "none" else K.packed_runs(packed)[: K.RUNS_SIZE]
        for i in range(lo + 200, lo + 300):
            b = cal.window_histogram.layout.bucket_of(float(s[i]))
            K.pav_learn_one_inplace(sf, si, pf, pi, runs, b, float(y[i]), float(w[i]), 0.0, sf[K.SF_KIND])
            twin.learn_one({"score": float(s[i])}, bool(y[i]), w=float(w[i]))
        assert cal.map_arrays()[0].tobytes() == twin.map_arrays()[0].tobytes()
    assert kept >= 10  # the stream keeps points before most of the runs without the scratch
    a = cal.prequential(s, y, weights=w)
    b = twin.prequential(s, y, weights=w)
    assert a[0].tobytes() == b[0].tobytes()
    assert a[1].tobytes() == b[1].tobytes()


def end_run_records(pf, pi, runs):
    """The end runs' scratch as a refresh leaves it: the limits of the records, the records of
    the blocks within them (the low run's after its first block up to its limit, the high run's
    from its limit to its last block), and the two ranges of blocks the clip values read."""
    B = int(pi[K.PI_B])
    view = K.pav_blocks_view(pf, pi)
    left, right = int(runs[K.REC_LEFT_LIM]), int(runs[K.REC_RIGHT_LIM])
    records = []
    f = int(pi[K.PI_HEAD])
    while f != -1:
        if int(pi[K.PI_HEAD]) < f <= left:
            records.append(("low", f, *runs[K.REC_HEADER + 2 * f : K.REC_HEADER + 2 * f + 2].tolist()))
        if right <= f < int(pi[K.PI_TAIL]):
            at = K.REC_HEADER + 2 * B + 2 * f
            records.append(("high", f, *runs[at : at + 2].tolist()))
        f = int(view["bnext"][f])
    return left, right, int(pi[K.PI_DEP_LO]), int(pi[K.PI_DEP_HI]), records


@pytest.mark.parametrize("prior", ["auto", None])
def test_whole_weights_end_runs_keep_the_records_of_a_refresh_from_the_ends(prior):
    """Whole-number weights in a count window, most events in the low end run or the block after
    it: each refresh resumes both runs at their records, left of the lowest change and right of
    the highest, and rewrites the records from there. After every event the clip values, the
    prior odds, the ranges read and every record within the limits equal, bit for bit, those of a
    refresh with a fresh scratch, which sums both runs from their ends."""
    B = 256
    rng = np.random.default_rng(12)
    n = 2500
    z = rng.normal(-3.0, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    cal = PAVCalibrator(buckets=LogitGrid(B), window=CountWindow(1500), prior=prior)
    kept = [K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]
    low_moved = 0
    before = None
    for i in range(n):
        cal.prequential(s[i : i + 1], y[i : i + 1])
        pf, pi = cal.map_arrays()
        again_f, again_i, fresh = pf.copy(), pi.copy(), K.unset_runs(B)
        K.pav_refresh_extremes_inplace(cal.window_histogram.arrays()[0], again_f, again_i, fresh)
        assert pf[kept].view(np.int64).tolist() == again_f[kept].view(np.int64).tolist(), i
        got = end_run_records(pf, pi, K.packed_runs(cal.packed_state()))
        assert got == end_run_records(again_f, again_i, fresh), i
        low_moved += before is not None and pf[K.PF_LO] != before
        before = pf[K.PF_LO]
    # the low run's clip value moves often (less where the prior holds): its records are rewritten
    assert low_moved > (100 if prior is None else 20)
