"""Streaming PAV: incremental block stack == from-scratch PAV, exactly; PAVCalibrator's faces."""

from __future__ import annotations

import copy
import itertools
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_pav_bucket_blocks, naive_pav_bucket_fit
from river_cases import (
    assert_array_face_equals_river_loop,
    assert_monotone_on_unit_grid,
    river_face_buffer,
    river_loop,
)

from streamcal._kernels import histogram as H
from streamcal._kernels import ipav as K
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.isotonic import pav_binary, pav_llr
from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded


# ---------------------------------------------------------------------------- kernel state
def kernel_blocks(pf, pi):
    """Blocks of the kernel state, walked through the links (checking them on the way)."""
    B = int(pi[K.PI_B])
    v = K.pav_blocks_view(pf, pi)
    bend, bprev, bnext, bpos, bneg = v["bend"], v["bprev"], v["bnext"], v["bpos"], v["bneg"]
    blocks = []
    f = int(pi[K.PI_HEAD])
    prev = -1
    while f != -1:
        assert len(blocks) < B, "the block links form a cycle"
        assert bprev[f] == prev
        blocks.append((f, int(bend[f]), bpos[f], bneg[f]))
        prev = f
        f = int(bnext[f])
    assert int(pi[K.PI_TAIL]) == prev
    assert int(pi[K.PI_LAST]) == (blocks[-1][1] if blocks else -1)
    assert (pf[K.PF_HEAD], pf[K.PF_LAST]) == (pi[K.PI_HEAD], pi[K.PI_LAST])  # the span the predictions read
    return blocks, v["owner"].copy(), v["fit"].copy()


def assert_state_equals_batch(pos, neg, centres, pf, pi):
    expected = naive_pav_bucket_blocks(pos, neg)
    blocks, owner, fit = kernel_blocks(pf, pi)
    assert blocks == expected  # tuples of ints and floats: exact equality
    if expected:  # owners and fitted values are kept between the first and the last knot
        exp_owner, exp_fit = naive_pav_bucket_fit(expected, centres)
        span = slice(expected[0][0], expected[-1][1] + 1)
        np.testing.assert_array_equal(owner[span], exp_owner[span])
        np.testing.assert_array_equal(fit[span], exp_fit[span])


def histogram_of(cal):
    """The window's weight per bucket by class, in stored units (the units the blocks hold)."""
    sf, si = cal.window_histogram.arrays()
    B = int(si[H.SI_B])
    return sf[H.SF_HEADER : H.SF_HEADER + B], sf[H.SF_HEADER + B : H.SF_HEADER + 2 * B]


def integral_flag(cal):
    """The sticky flag of a PAV state whose weights have all been whole numbers."""
    return int(cal.map_arrays()[1][K.PI_INTEGRAL])


def snapshot(cal):
    return pickle.dumps(cal)


def observable_state(cal):
    """Everything a calibrator's future outputs depend on, as bytes; equal for equivalent states.

    The pickle without the PAV arrays, plus the PAV state a prediction or a repair reads: the
    blocks (through their links), owners and fitted values over the knots' span, the finite-LLR
    clip values and prior, and the sticky whole-number flag. Left out: scratch space and the
    values kept outside the knots' span, which are never read and depend on the path taken
    (learning a long run of labels rebuilds the blocks once instead of repairing them per event),
    and ``n_jobs``, which changes how fast, not what.
    """
    rest = {k: v for k, v in cal.__getstate__().items() if k not in ("_pf", "_pi", "n_jobs")}
    if cal.map_arrays() is None:
        return pickle.dumps(rest)
    pf, pi = cal.map_arrays()
    blocks, owner, fit = kernel_blocks(pf, pi)
    span = slice(blocks[0][0], blocks[-1][1] + 1) if blocks else slice(0, 0)
    header = pf[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]].tolist()
    return pickle.dumps((rest, blocks, owner[span], fit[span], header, int(pi[K.PI_INTEGRAL])))


# ---------------------------------------------------------------------------- kernel exactness
NASTY_WEIGHTS = [0.1, 0.2, 0.3, 0.7, 1.0 / 3.0, 2.5, 1e-3, 1.0, 2.0, 3.0]


@st.composite
def bucket_streams(draw, integer_weights: bool):
    n_buckets = draw(st.integers(1, 10))
    ops = []
    live = []  # (bucket, class, weight) present
    for _ in range(draw(st.integers(1, 60))):
        if live and draw(st.booleans()):
            ops.append(("remove", live.pop(draw(st.integers(0, len(live) - 1)))))
        else:
            w = float(draw(st.integers(0, 3))) if integer_weights else draw(st.sampled_from(NASTY_WEIGHTS))
            ev = (draw(st.integers(0, n_buckets - 1)), draw(st.integers(0, 1)), w)
            live.append(ev)
            ops.append(("add", ev))
    return n_buckets, ops


def _run_kernel_stream(n_buckets, ops, exact, delta):
    centres = np.linspace(0.05, 0.95, n_buckets) if n_buckets > 1 else np.array([0.5])
    pf, pi = K.empty_pav_state(centres, 1.0, True, True)
    pi[K.PI_EXACT] = exact  # whole-number weights: the kernel may stop at an unchanged block
    hist = np.zeros(2 * n_buckets)  # pos then neg, as in the calibrator's state
    pos, neg = hist[:n_buckets], hist[n_buckets:]
    for kind, (b, cls, w) in ops:
        arr = pos if cls else neg
        old_p, old_n = float(pos[b]), float(neg[b])
        arr[b] = arr[b] + w if kind == "add" else max(arr[b] - w, 0.0)
        if delta:  # told the old weights (the learn kernel's entry; O(1) sums when exact)
            K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, old_p, old_n)
        else:
            K.pav_bucket_changed_inplace(hist, 0, pf, pi, b)
        assert_state_equals_batch(pos, neg, centres, pf, pi)


@given(bucket_streams(integer_weights=True))
def test_incremental_pav_matches_batch_after_each_update_integer_weights(stream):
    for exact in (1, 0):
        for delta in (True, False):
            _run_kernel_stream(*stream, exact=exact, delta=delta)


@given(bucket_streams(integer_weights=False))
def test_incremental_pav_matches_batch_after_each_update_nonint_weights(stream):
    _run_kernel_stream(*stream, exact=0, delta=False)
    _run_kernel_stream(*stream, exact=0, delta=True)


@given(st.lists(st.floats(0.0, 5.0), min_size=2, max_size=40), st.lists(st.floats(0.0, 5.0), min_size=2, max_size=40))
def test_incremental_pav_matches_batch_random_float_histograms(a, b):
    n = min(len(a), len(b))
    pos, neg = np.array(a[:n]), np.array(b[:n])
    centres = np.arange(n, dtype=float)
    pf, pi = K.empty_pav_state(centres, 1.0, True, False)
    hist = np.zeros(2 * n)
    cur_p, cur_n = hist[:n], hist[n:]
    for k in range(n):  # fill bucket by bucket, then empty them in a scrambled order
        cur_p[k], cur_n[k] = pos[k], neg[k]
        K.pav_bucket_changed_inplace(hist, 0, pf, pi, k)
        assert_state_equals_batch(cur_p, cur_n, centres, pf, pi)
    for k in np.random.default_rng(n).permutation(n):
        cur_p[k] = cur_n[k] = 0.0
        K.pav_bucket_changed_inplace(hist, 0, pf, pi, int(k))
        assert_state_equals_batch(cur_p, cur_n, centres, pf, pi)


# ---------------------------------------------------------------------------- calibrator exactness
WINDOWS = [
    Unbounded(),
    CountWindow(n=7),
    TimeWindow(seconds=5.0),
    Decay(half_life=3.0),
    Decay(half_life=0.4),  # renormalises every ~26 events
    Decay(half_life=2.0, by="time"),
]


@st.composite
def event_streams(draw):
    n = draw(st.integers(1, 80))
    scores = draw(st.lists(st.sampled_from([0.0, 0.05, 0.2, 0.21, 0.5, 0.77, 0.9, 1.0]), min_size=n, max_size=n))
    labels = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    weights = draw(st.lists(st.sampled_from([*NASTY_WEIGHTS, 0.0]), min_size=n, max_size=n))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=n, max_size=n))
    return scores, labels, weights, np.cumsum(gaps).tolist()


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@settings(max_examples=25)
@given(stream=event_streams())
def test_calibrator_blocks_match_batch_pav_after_each_learn(window, stream):
    cal = PAVCalibrator(prior=None, buckets=UniformGrid(n_buckets=6), window=window)
    centres = cal.centres
    for s, y, w, t in zip(*stream):
        cal.learn_one({"s": s}, y, w=w, t=t)
        pos, neg = histogram_of(cal)
        assert_state_equals_batch(pos, neg, centres, *cal.map_arrays())
        assert_extremes_are_fresh(cal)


def assert_extremes_are_fresh(cal):
    """The finite-LLR clip values and prior equal a from-scratch refresh, bit for bit."""
    kept, pi = cal.map_arrays()
    pf = kept.copy()
    K.pav_refresh_extremes_inplace(cal.window_histogram.arrays()[0], pf, pi, K.unset_runs())
    fields = [K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]
    assert kept[fields].tolist() == pf[fields].tolist()


@pytest.mark.parametrize("weights", [(1.0, 0.3, 2.5), (1.0, 0.0, 3.0)], ids=["fractional", "whole"])
@pytest.mark.parametrize("window", [CountWindow(n=150), TimeWindow(seconds=40.0), Unbounded()], ids=repr)
def test_click_stream_state_equals_batch_after_each_learn(window, weights, rng):
    # a skewed stream over many buckets: the end runs span several blocks, and most events
    # change only blocks between them (the finite-LLR refresh is then skipped); with whole
    # weights the repairs stop at the first unchanged block (exact sums)
    cal = PAVCalibrator(prior=None, buckets=LogitGrid(n_buckets=96, low=1e-4, high=1 - 1e-4), window=window)
    z = rng.normal(-3.0, 1.5, size=1500)
    labels = rng.uniform(size=z.size) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    w = rng.choice(weights, size=z.size)
    for i, (s, y) in enumerate(zip(1.0 / (1.0 + np.exp(-z)), labels, strict=True)):
        cal.learn_one({"s": float(s)}, bool(y), w=float(w[i]), t=0.1 * i)
        assert_extremes_are_fresh(cal)
        if i % 7 == 0 or i > 1400:
            pos, neg = histogram_of(cal)
            assert_state_equals_batch(pos, neg, cal.centres, *cal.map_arrays())
    assert integral_flag(cal) == (weights[1] == 0.0)


def test_decay_renormalisation_rebuilds_exactly(rng):
    cal = PAVCalibrator(prior=None, buckets=UniformGrid(n_buckets=20), window=Decay(half_life=0.5))
    scores = rng.uniform(size=500)
    cal.update(scores, rng.uniform(size=500) < scores, weights=rng.uniform(0.1, 2.0, size=500))
    assert cal.window_histogram.renormalisations() > 5
    pos, neg = histogram_of(cal)
    assert_state_equals_batch(pos, neg, cal.centres, *cal.map_arrays())


# ---------------------------------------------------------------------------- exact PAV per score
def fitted_on_distinct_scores(data, window_n, **params):
    """A calibrator with one bucket per distinct score, after a drawn stream; and the window's
    events ``(scores, labels, weights)``."""
    values = np.array([0.01, 0.1, 0.15, 0.3, 0.45, 0.6, 0.8, 0.97])
    edges = np.concatenate(([0.0], 0.5 * (values[1:] + values[:-1]), [1.0]))
    window = Unbounded() if window_n is None else CountWindow(window_n)
    cal = PAVCalibrator(prior=None, buckets=Edges(edges, centres=values), window=window, **params)
    n = data.draw(st.integers(1, 80))
    idx = data.draw(st.lists(st.integers(0, 7), min_size=n, max_size=n))
    labels = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    weights = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 1.5, 3.0]), min_size=n, max_size=n)))
    scores = values[idx]
    cal.update(scores, labels, weights=weights)
    keep = slice(None) if window_n is None else slice(-window_n, None)
    return cal, (scores[keep], labels[keep], weights[keep])


@pytest.mark.parametrize("interpolation", ["step", "linear"])
@pytest.mark.parametrize("window_n", [None, 30])
@settings(max_examples=30)
@given(data=st.data())
def test_one_bucket_per_distinct_score_equals_batch_pav_on_window(interpolation, window_n, data):
    cal, (s, y, w) = fitted_on_distinct_scores(data, window_n, interpolation=interpolation, finite_proba=False)
    np.testing.assert_allclose(cal.predict_proba(s), pav_binary(s, y, w), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(cal.predict_llr(s), pav_llr(s, y, w, finite=True), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("finite_proba", [True, False])
@pytest.mark.parametrize("pseudo_count", [1.0, 0.3])
@pytest.mark.parametrize("interpolation", ["step", "linear"])
@pytest.mark.parametrize("window_n", [None, 30])
@settings(max_examples=30)
@given(data=st.data())
def test_one_bucket_per_distinct_score_equals_the_batch_calibrator_on_window(
    interpolation, window_n, pseudo_count, finite_proba, data
):
    """Both maps (finite and exact): the batch ``IsotonicCalibrator`` fitted on the window's events
    serves what the incremental state serves, at the window's scores and, with linear
    interpolation, between them (a step map reads a bucket, whose edges are not the batch's)."""
    from streamcal.isotonic import IsotonicCalibrator

    params = {"interpolation": interpolation, "finite_proba": finite_proba, "llr_pseudo_count": pseudo_count}
    cal, (s, y, w) = fitted_on_distinct_scores(data, window_n, **params)
    if not w.sum() > 0.0:
        return
    batch = IsotonicCalibrator(**params).fit(s, y, w)
    grid = np.concatenate([s, np.linspace(0.0, 1.0, 101)]) if interpolation == "linear" else s
    np.testing.assert_allclose(cal.predict_proba(grid), batch.predict_proba(grid), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(cal.predict_llr(grid), batch.predict_llr(grid), rtol=1e-9, atol=1e-9)
    if finite_proba:
        assert np.all((cal.predict_proba(grid) > 0.0) & (cal.predict_proba(grid) < 1.0))


@pytest.mark.parametrize("window_n", [None, 30])
@settings(max_examples=30)
@given(data=st.data())
def test_finite_proba_is_the_augmented_pav_of_the_window(window_n, data):
    """``finite_proba=True`` serves the probability of the pseudo-count rule behind the finite LLR."""
    cal, (s, y, w) = fitted_on_distinct_scores(data, window_n, finite_proba=True)
    t1, t0 = float(np.dot(w, y)), float(np.dot(w, ~y))
    expected = 1.0 / (1.0 + np.exp(-(pav_llr(s, y, w, finite=True) + np.log((t1 + 1.0) / (t0 + 1.0)))))
    proba = cal.predict_proba(s)
    np.testing.assert_allclose(proba, expected, rtol=1e-9, atol=1e-12)
    assert np.all((proba > 0.0) & (proba < 1.0))
    np.testing.assert_allclose(cal.predict_llr(s), pav_llr(s, y, w, finite=True), rtol=1e-9, atol=1e-9)
    one = [cal.predict_proba_one({"s": float(v)})[True] for v in s]
    np.testing.assert_array_equal(one, proba)


def test_finite_proba_prequential_equals_river_loop(rng):
    scores = rng.uniform(size=3000)
    labels = rng.uniform(size=3000) < scores**2
    a = PAVCalibrator(prior=None, window=CountWindow(500), finite_proba=True)
    b = PAVCalibrator(prior=None, window=CountWindow(500), finite_proba=True)
    proba, llr = a.prequential(scores, labels)
    loop_p, loop_llr = [], []
    for s, y in zip(scores, labels):
        loop_p.append(b.predict_proba_one({"s": float(s)})[True])
        loop_llr.append(b.predict_llr_one({"s": float(s)}))
        b.learn_one({"s": float(s)}, bool(y))
    np.testing.assert_array_equal(proba, loop_p)
    np.testing.assert_array_equal(llr, loop_llr)
    exact, _ = PAVCalibrator(prior=None, window=CountWindow(500), finite_proba=False).prequential(scores, labels)
    assert np.any(exact[100:] == 0.0)  # the exact map gives 0 below every positive seen ...
    assert np.all((proba[1:] > 0.0) & (proba[1:] < 1.0))  # ... the finite rule never does


def _drifting_stream(kind: str, trial: int):
    """A small calibrator and a stream whose score -> label relation changes (seeded by ``trial``).

    ``"flip"``: the relation reverses halfway; ``"phases"``: four phases of different base rates.
    """
    from streamcal.buckets import UniformGrid

    rng = np.random.default_rng(trial)
    flip = kind == "flip"
    ranges = ((2, 12), (20, 300), (3, 40)) if flip else ((2, 8), (20, 200), (2, 20))
    n_buckets, n, window_n = (int(rng.integers(lo, hi)) for lo, hi in ranges)
    cal = PAVCalibrator(
        prior=None,
        buckets=UniformGrid(n_buckets),
        window=CountWindow(window_n) if trial % 2 == 0 else Unbounded(),
        llr_pseudo_count=float(rng.choice([0.5, 1.0, 3.0] if flip else [0.1, 1.0, 5.0])),
    )
    s = rng.uniform(size=n)
    if flip:
        truth = np.where(np.arange(n) < n // 2, s, 1.0 - s)
    else:
        truth = rng.uniform(size=4)[np.minimum((4 * np.arange(n)) // n, 3)] * (0.5 + s) / 1.5
    return cal, s, rng.uniform(size=n) < truth


@pytest.mark.parametrize(
    ("kind", "trials"),
    # trials where the two runs grow into each other: "flip" 180, "phases" 905 and 2527
    [("flip", range(600)), ("phases", [*range(300), 905, 2527])],
)
def test_finite_llr_values_kept_up_to_date_equal_a_refresh_after_every_learn(kind, trials):
    """The clip values and prior that ``pav_update_extremes_inplace`` keeps (skipping the refresh
    when the repairs touched no block the runs read) equal a full refresh after every learned
    event, bit for bit."""
    fields = (K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV)
    for trial in trials:
        cal, s, y = _drifting_stream(kind, trial)
        for i in range(s.size):
            cal.learn_one({"s": float(s[i])}, bool(y[i]))
            kept, pi = cal.map_arrays()
            pf = kept.copy()
            K.pav_refresh_extremes_inplace(cal.window_histogram.arrays()[0], pf, pi, K.unset_runs())
            assert [kept[j] for j in fields] == [pf[j] for j in fields], (kind, trial, i)


def test_linear_interpolation_between_knots_matches_sklearn(rng):
    from sklearn.isotonic import IsotonicRegression

    values = np.sort(rng.choice(np.linspace(0.0, 1.0, 201), size=40, replace=False))
    edges = np.concatenate(([-1.0], 0.5 * (values[1:] + values[:-1]), [2.0]))
    idx = rng.integers(0, 40, size=400)
    idx = idx[idx % 3 != 0]  # leave some buckets empty: interpolation spans the gaps
    s = values[idx]
    y = rng.uniform(size=s.size) < s
    cal = PAVCalibrator(prior=None, buckets=Edges(edges, centres=values), finite_proba=False).update(s, y)
    iso = IsotonicRegression(out_of_bounds="clip").fit(s, y)
    grid = np.linspace(-0.5, 1.5, 301)
    np.testing.assert_allclose(cal.predict_proba(grid), iso.predict(grid), atol=1e-12)


# ---------------------------------------------------------------------------- array face == river loop


CALIBRATORS = [
    lambda: PAVCalibrator(prior=None, window=CountWindow(50)),
    lambda: PAVCalibrator(prior=None, buckets=LogitGrid(64), window=TimeWindow(20.0), interpolation="step"),
    lambda: PAVCalibrator(prior=None, buckets=UniformGrid(32), window=Decay(5.0)),
    lambda: PAVCalibrator(prior=None, buckets=QuantileEdges(n_buckets=16, warmup=40), window=Decay(3.0, by="time")),
]


@pytest.mark.parametrize("make", CALIBRATORS)
def test_prequential_and_process_equal_a_loop_of_river_methods(make, rng):
    cal, scores = assert_array_face_equals_river_loop(make, rng, 400, snapshot)
    np.testing.assert_array_equal(cal.predict_proba(scores), [cal.predict_proba_one({"s": s})[True] for s in scores])


@pytest.mark.parametrize("prior", ["auto", None])
def test_prequential_llrs_equal_process_across_chunks_of_logarithms(prior, rng):
    """``prequential`` takes its LLRs' logarithms in chunks of events (``K.LOG_CHUNK``); an LLR
    that is its own value (the finite fallback, where the probability rounds to 1) comes
    between the ratios of a chunk. ``process``, predicting then learning each event, takes each
    event's logarithm at once: the two must give the same bits at every event."""
    n = 3 * K.LOG_CHUNK + 37
    s = rng.uniform(size=n)
    y = rng.uniform(size=n) < s
    w = np.where(rng.uniform(size=n) < 0.3, 1e17, 1.0)  # the window's weight dwarfs the pseudo-count
    w[: K.LOG_CHUNK // 2] = 1.0
    p, llr = PAVCalibrator(window=CountWindow(700), prior=prior).prequential(s, y, weights=w)
    mask = np.tile([False, True], n)  # predict event i, then learn it
    twice = np.repeat
    p2, llr2 = PAVCalibrator(window=CountWindow(700), prior=prior).process(
        twice(s, 2), twice(y, 2), mask, weights=twice(w, 2)
    )
    np.testing.assert_array_equal(p, p2[~mask])
    np.testing.assert_array_equal(llr, llr2[~mask])
    fallback = p == 1.0  # the probability rounded to 1: the LLR's sum of logarithms
    assert 0 < fallback.sum() < n // 2
    assert np.isfinite(llr).all()
    assert np.unique(np.flatnonzero(fallback) // K.LOG_CHUNK).size >= 2  # in several chunks


def test_predictions_are_monotone_and_llr_finite(rng):
    cal = PAVCalibrator(prior=None, window=CountWindow(300))
    s = rng.uniform(size=2000)
    cal.update(s, rng.uniform(size=2000) < s**3)
    assert_monotone_on_unit_grid(cal)


def test_before_any_label_identity_for_probabilities_else_half():
    cal = PAVCalibrator(prior=None)
    assert cal.predict_proba_one({"s": 0.3}) == {False: 0.7, True: 0.3}
    assert cal.predict_llr_one({"s": 0.3}) == 0.0
    other = PAVCalibrator(prior=None, buckets=UniformGrid(10, -5.0, 5.0))
    assert other.predict_proba([-3.0, 4.0]).tolist() == [0.5, 0.5]
    assert cal.predict_one({"s": 0.9}) is True
    assert isinstance(cal.predict_proba_one({"s": 0.9})[True], float)


def test_single_class_window_gives_finite_llr():
    cal = PAVCalibrator(prior=None, finite_proba=False).update([0.2, 0.4, 0.6], [0, 0, 0])
    assert cal.predict_proba([0.5]).tolist() == [0.0]
    llr = cal.predict_llr([0.1, 0.9])
    assert np.isfinite(llr).all()
    # the default finite map: everything pools with both pseudo-events, rate c / (T + 2c)
    finite = PAVCalibrator(prior=None).update([0.2, 0.4, 0.6], [0, 0, 0])
    assert finite.predict_proba([0.1, 0.5, 0.9]).tolist() == [0.2, 0.2, 0.2]
    np.testing.assert_array_equal(finite.predict_llr([0.1, 0.9]), llr)


def test_window_weight_and_count_window_expiry():
    cal = PAVCalibrator(prior=None, window=CountWindow(3))
    cal.update([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1], weights=[5.0, 1.0, 1.0, 2.0])
    assert cal.window_weight == 4.0
    dec = PAVCalibrator(prior=None, window=Decay(half_life=1.0)).update([0.5, 0.5], [1, 0])
    assert dec.window_weight == 1.5


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
def test_fresh_calibrator_and_empty_arrays(window):
    cal = PAVCalibrator(prior=None, window=window)
    assert cal.window_weight == 0.0
    assert cal.n_learned == 0
    p, llr = cal.prequential([], [], times=[])
    assert p.size == 0
    assert llr.size == 0
    assert cal.predict_proba([]).size == 0
    _, pos, neg = cal.histogram()
    assert (pos == 0).all()
    assert (neg == 0).all()


def test_time_decay_with_large_clock_values():
    cal = PAVCalibrator(prior=None, window=Decay(half_life=3600.0, by="time"))
    t0 = 1.7e9  # unix seconds
    cal.update([0.2, 0.8, 0.8], [0, 1, 1], times=[t0, t0 + 3600.0, t0 + 3600.0])
    assert math.isclose(cal.window_weight, 2.5)
    assert np.isfinite(cal.predict_llr([0.2, 0.8])).all()


def test_time_window_expiry_and_growth():
    cal = PAVCalibrator(prior=None, window=TimeWindow(seconds=10.0))
    n = 5000
    cal.update(np.full(n, 0.5), np.arange(n) % 2, times=np.arange(n, dtype=float))
    assert cal.window_weight == 10.0
    cal.learn_one({"s": 0.5}, True, t=float(n + 100))
    assert cal.window_weight == 1.0


# ---------------------------------------------------------------------------- bounded state, decay
def test_state_size_is_identical_after_1e4_and_1e5_events(rng):
    cal = PAVCalibrator(prior=None, window=CountWindow(1000))
    s = rng.uniform(size=100_000)
    y = rng.uniform(size=100_000) < s
    cal.update(s[:10_000], y[:10_000])
    nbytes = sum(v.nbytes for v in vars(cal).values() if isinstance(v, np.ndarray))
    size = len(pickle.dumps(cal))
    cal.update(s[10_000:], y[10_000:])
    assert sum(v.nbytes for v in vars(cal).values() if isinstance(v, np.ndarray)) == nbytes
    assert len(pickle.dumps(cal)) == size


def test_decay_stays_finite_and_correct_over_1e7_events():
    # half-life of 50 events: ~2e5 half-lives, thousands of renormalisations. The true rate
    # switches from 0.2 to 0.8 in the last 2000 events: a decayed window follows it.
    n = 10_000_000
    cal = PAVCalibrator(prior=None, buckets=UniformGrid(4), window=Decay(half_life=50.0))
    scores = np.full(n, 0.5)
    labels = (np.arange(n) % 5) == 0  # rate 0.2
    labels[-2000:] = (np.arange(2000) % 5) != 0  # rate 0.8
    cal.update(scores, labels)
    assert cal.window_histogram.renormalisations() > 1000
    assert np.isfinite(cal.window_histogram.arrays()[0]).all()
    p = cal.predict_proba_one({"s": 0.5})[True]
    assert 0.7 < p < 0.9
    assert math.isclose(cal.window_weight, 1.0 / (1.0 - 2.0 ** (-1.0 / 50.0)), rel_tol=1e-9)
    assert np.isfinite(cal.predict_llr([0.5])).all()


# ---------------------------------------------------------------------------- bad input
BAD_CALLS = [
    ("learn_one nan", lambda c: c.learn_one({"s": float("nan")}, True, t=100.0)),
    ("learn_one inf", lambda c: c.learn_one({"s": float("inf")}, True, t=100.0)),
    ("learn_one label", lambda c: c.learn_one({"s": 0.5}, 2, t=100.0)),
    ("learn_one no probability", lambda c: c.learn_one({"s": 1.5}, True, t=100.0)),
    ("learn_one two keys", lambda c: c.learn_one({"s": 0.5, "t": 0.1}, True, t=100.0)),
    ("learn_one weight", lambda c: c.learn_one({"s": 0.5}, True, w=-1.0, t=100.0)),
    ("learn_one time back", lambda c: c.learn_one({"s": 0.5}, True, t=1.0)),
    ("learn_one no time", lambda c: c.learn_one({"s": 0.5}, True)),
    ("update nan", lambda c: c.update([0.5, float("nan")], [1, 0], times=[100.0, 101.0])),
    ("update label", lambda c: c.update([0.5, 0.4], [1, 3], times=[100.0, 101.0])),
    ("update lengths", lambda c: c.update([0.5, 0.4], [1], times=[100.0, 101.0])),
    ("update weights", lambda c: c.update([0.5, 0.4], [1, 0], weights=[1.0, np.inf], times=[100.0, 101.0])),
    ("update time back", lambda c: c.update([0.5, 0.4], [1, 0], times=[101.0, 100.0])),
    ("update time before last", lambda c: c.update([0.5], [1], times=[2.0])),
    ("prequential label", lambda c: c.prequential([0.5, 0.4], [1, 0.5], times=[100.0, 101.0])),
    ("process mask length", lambda c: c.process([0.5, 0.4], [1, 0], [True], times=[100.0, 101.0])),
    ("process label at learn", lambda c: c.process([0.5, 0.4], [1, 7], [False, True], times=[100.0, 101.0])),
]


@pytest.mark.parametrize(("name", "call"), BAD_CALLS, ids=[n for n, _ in BAD_CALLS])
def test_bad_input_raises_and_leaves_state_untouched(name, call):
    cal = PAVCalibrator(prior=None, window=TimeWindow(seconds=50.0))
    cal.update([0.1, 0.5, 0.9], [0, 1, 1], times=[1.0, 3.0, 4.0])
    before = snapshot(cal)
    with pytest.raises((ValueError, TypeError, KeyError)) as info:
        call(cal)
    assert str(info.value)
    assert snapshot(cal) == before


# The river face's fast path (a count window, one-key dict, float score, bool label, float
# weight) leaves the range checks of the score and the weight to the kernel.
FAST_PATH_BAD_CALLS = [
    ("learn_one nan", lambda c: c.learn_one({"s": float("nan")}, True), ValueError),
    ("learn_one inf", lambda c: c.learn_one({"s": float("inf")}, True), ValueError),
    ("learn_one above 1", lambda c: c.learn_one({"s": 1.5}, True), ValueError),
    ("learn_one below 0", lambda c: c.learn_one({"s": -0.25}, False), ValueError),
    ("learn_one negative weight", lambda c: c.learn_one({"s": 0.5}, True, w=-1.0), ValueError),
    ("learn_one infinite weight", lambda c: c.learn_one({"s": 0.5}, True, w=float("inf")), ValueError),
    ("learn_one nan weight", lambda c: c.learn_one({"s": 0.5}, True, w=float("nan")), ValueError),
    ("predict_proba_one nan", lambda c: c.predict_proba_one({"s": float("nan")}), ValueError),
    ("predict_proba_one above 1", lambda c: c.predict_proba_one({"s": 1.0000001}), ValueError),
    ("predict_proba_one below 0", lambda c: c.predict_proba_one({"s": -1e-300}), ValueError),
    ("predict_one above 1", lambda c: c.predict_one({"s": 2.0}), ValueError),
    ("predict_llr_one below 0", lambda c: c.predict_llr_one({"s": -0.5}), ValueError),
    ("predict_llr_one nan", lambda c: c.predict_llr_one({"s": float("nan")}), ValueError),
    ("predict_llr_one above 1", lambda c: c.predict_llr_one({"s": 1.5}), ValueError),
]


@pytest.mark.parametrize(("name", "call", "error"), FAST_PATH_BAD_CALLS, ids=[n for n, _, _ in FAST_PATH_BAD_CALLS])
def test_fast_path_refuses_what_the_full_checks_reject(name, call, error):
    cal = PAVCalibrator(prior=None, window=CountWindow(n=5))
    cal.update([0.1, 0.5, 0.9, 0.3, 0.7, 0.2], [0, 1, 1, 0, 1, 0])
    before = snapshot(cal)
    with pytest.raises(error, match=r"`(x\['s'\]|w)`"):
        call(cal)
    assert snapshot(cal) == before
    # the edges of the valid ranges are accepted
    cal.learn_one({"s": 0.0}, False, w=0.0)
    cal.learn_one({"s": 1.0}, True, w=1e100)  # the largest weight of one event
    assert cal.predict_proba_one({"s": 0.0})[True] <= cal.predict_proba_one({"s": 1.0})[True]


def test_error_messages_name_argument_value_and_position():
    cal = PAVCalibrator(prior=None, window=TimeWindow(seconds=50.0))
    with pytest.raises(ValueError, match=r"`scores` must be finite; got nan at position 1"):
        cal.update([0.5, float("nan")], [1, 0], times=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"`times` must not go backwards; got 0.5 at position 2"):
        cal.update([0.5, 0.4, 0.3], [1, 0, 1], times=[0.0, 1.0, 0.5])
    with pytest.raises(ValueError, match=r"`labels` .* got 7 at position 1"):
        cal.process([0.5, 0.4], [1, 7], [False, True], times=[0.0, 1.0])
    with pytest.raises(ValueError, match="needs event times"):
        cal.update([0.5], [1])
    with pytest.raises(KeyError, match="score_key='p'"):
        PAVCalibrator(prior=None, score_key="p").learn_one({"q": 0.5}, True)


def test_process_ignores_labels_at_predict_positions():
    for finite_proba, expected in ((False, 0.0), (True, 1 / 3)):
        cal = PAVCalibrator(prior=None, finite_proba=finite_proba)
        p, _ = cal.process([0.2, 0.8, 0.5], [0, float("nan"), 1], [True, False, True])
        assert np.isnan(p[[0, 2]]).all()
        assert p[1] == expected  # learned: one negative (0.2) only; the NaN label is not read


def test_bad_parameters():
    with pytest.raises(ValueError, match="interpolation"):
        PAVCalibrator(prior=None, interpolation="cubic")
    with pytest.raises(TypeError, match="window"):
        PAVCalibrator(prior=None, window=10.0)  # an int is a count window; a float is ambiguous (events or seconds?)
    with pytest.raises(ValueError, match="llr_pseudo_count"):
        PAVCalibrator(prior=None, llr_pseudo_count=0.0)
    with pytest.raises(ValueError, match="`n`"):
        PAVCalibrator(prior=None, window=CountWindow(0))


def test_pickle_and_clone_keep_predictions(rng):
    cal = PAVCalibrator(prior=None, window=CountWindow(100))
    s = rng.uniform(size=500)
    cal.update(s, rng.uniform(size=500) < s)
    assert not set(cal.__getstate__()) & set(PAVCalibrator._CACHES)  # caches are rebuilt, not saved
    again = pickle.loads(pickle.dumps(cal))
    np.testing.assert_array_equal(again.predict_proba(s), cal.predict_proba(s))
    np.testing.assert_array_equal([again.predict_proba_one({"s": float(v)})[True] for v in s[:20]], cal.predict_proba(s[:20]))
    deep = copy.deepcopy(cal)
    deep.learn_one({"s": 0.5}, True)
    assert snapshot(cal) != snapshot(deep)
    assert cal.clone().n_learned == 0


def _layout_r4_stream():
    """The stream behind ``tests/data/pav_states_layout_r4.zip`` (see the test below)."""
    rng = np.random.default_rng(20261123)
    z = rng.normal(-1.0, 1.5, size=3000)
    s = 1.0 / (1.0 + np.exp(-z))
    y = rng.uniform(size=3000) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    w = rng.choice([0.5, 1.0, 1.5, 1.0 / 3.0], size=3000)
    return s, y, w


def test_a_state_saved_in_the_older_layout_loads_and_continues_exactly():
    """``tests/data/pav_states_layout_r4.zip`` was written by streamcal 0.1.0 at commit
    ``809d9d6``, before the per-block fitted values (pf records of 4 fields), with
    ``persist.save([count, decay, weighted], path)``: ``count`` and ``weighted`` are
    ``PAVCalibrator(buckets=LogitGrid(64), window=CountWindow(500))``, ``decay`` is
    ``PAVCalibrator(buckets=LogitGrid(64), window=Decay(half_life=300.0))``, each after
    ``prequential`` on the first 2,000 events of :func:`_layout_r4_stream` (``decay`` and
    ``weighted`` with the weights ``w``, so their whole-number flag is off). Loaded now, each
    rebuilds its blocks and continues with the outputs of a calibrator that saw the whole
    stream here."""
    from pathlib import Path

    from streamcal.persist import load

    s, y, w = _layout_r4_stream()
    loaded_all = load(Path(__file__).parent / "data" / "pav_states_layout_r4.zip")
    fresh_all = [  # the saved calibrators serve the exact map (``finite_proba=False``, saved with them)
        PAVCalibrator(prior=None, buckets=LogitGrid(64), window=CountWindow(500), finite_proba=False),
        PAVCalibrator(prior=None, buckets=LogitGrid(64), window=Decay(half_life=300.0), finite_proba=False),
        PAVCalibrator(prior=None, buckets=LogitGrid(64), window=CountWindow(500), finite_proba=False),
    ]
    all_weights = [None, w, w]
    for fresh, weights in zip(fresh_all, all_weights, strict=True):
        fresh.prequential(s[:2000], y[:2000], weights=None if weights is None else weights[:2000])
    assert [c.finite_proba for c in loaded_all] == [False, False, False]
    assert [integral_flag(c) for c in loaded_all] == [1, 0, 0]
    for loaded, fresh in zip(loaded_all, fresh_all, strict=True):
        pf, pi = loaded.map_arrays()
        want_pf, want_pi = fresh.map_arrays()
        assert pf.size == K.pav_state_sizes(64)[0]  # upgraded on loading
        # the same histogram and window, and the same blocks, fitted values and finite-LLR values
        for got, want in zip(loaded.window_histogram.arrays(), fresh.window_histogram.arrays(), strict=True):
            np.testing.assert_array_equal(got, want)
        blocks, owner, fit = kernel_blocks(pf, pi)
        want_blocks, want_owner, want_fit = kernel_blocks(want_pf, want_pi)
        assert blocks == want_blocks
        span = slice(blocks[0][0], blocks[-1][1] + 1)
        np.testing.assert_array_equal(owner[span], want_owner[span])
        np.testing.assert_array_equal(fit[span], want_fit[span])
        header = [K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]
        assert pf[header].tolist() == want_pf[header].tolist()
        assert pi[K.PI_INTEGRAL] == want_pi[K.PI_INTEGRAL]
    for loaded, fresh, weights in zip(loaded_all, fresh_all, all_weights, strict=True):
        later = None if weights is None else weights[2000:]
        got = loaded.prequential(s[2000:], y[2000:], weights=later)
        want = fresh.prequential(s[2000:], y[2000:], weights=later)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert_river_face_reads_the_array_state(loaded, s[:50])


def test_river_memory_usage_counts_the_state_and_survives_freed_numba_functions():
    """river's ``_raw_memory_usage`` (``show_memory`` in its evaluation loops) walks the
    learner's object graph; the compiled entry points must not lead it into numba."""
    import gc

    import numba

    cal = PAVCalibrator(prior=None, window=CountWindow(1000))
    for i in range(2000):
        cal.learn_one({"s": (i % 97) / 97}, i % 3 == 0)
    assert cal.predict_proba_one({"s": 0.3})[True] >= 0.0  # the river face's kernels are bound

    def compile_and_free():
        @numba.njit(cache=False)
        def total(a):
            return a.sum()

        total(np.ones(3))

    compile_and_free()
    gc.collect()
    size = cal._raw_memory_usage  # raised ReferenceError when the instance held the entry points
    state = (*cal.window_histogram.arrays(), *cal.map_arrays())
    arrays = river_face_buffer(cal).nbytes + sum(a.nbytes for a in state)
    assert arrays < size < arrays + 1_000_000  # the state and its lists, not numba's registries (2.5 MB)


def assert_river_face_reads_the_array_state(cal, scores):
    """The river face's packed buffer and the array face's views are one state."""
    hist = cal.window_histogram
    pf, pi = cal.map_arrays()
    packed = river_face_buffer(cal)
    for name, array in (("floats", hist.floats), ("ints", hist.ints)):
        assert np.shares_memory(array, packed), name
    ends = packed[K.PACK_O_SI : K.PACK_END + 1].astype(np.intp)  # the sections, laid out by K.pack_state
    np.testing.assert_array_equal(packed[ends[1] : ends[2]], pf)
    np.testing.assert_array_equal(packed[ends[2] : ends[3]].view(np.int64), pi)
    p, llr = cal.predict_proba(scores), cal.predict_llr(scores)
    np.testing.assert_array_equal([cal.predict_proba_one({"s": float(v)})[True] for v in scores], p)
    np.testing.assert_array_equal([cal.predict_llr_one({"s": float(v)}) for v in scores], llr)


@pytest.mark.parametrize(
    "replace",
    ["ring growth", "ring shrink", "merge", "pickle", "deepcopy", "save and load"],
)
def test_every_state_replacement_keeps_the_packed_state(replace, rng, tmp_path):
    """Each path that swaps the state arrays for new ones repacks them (``_pack``)."""
    from streamcal.merging import merge
    from streamcal.persist import load, save

    s = rng.uniform(size=6000)
    y = rng.uniform(size=6000) < s
    t = np.arange(6000.0)
    cal = PAVCalibrator(prior=None, window=TimeWindow(seconds=5000.0))
    cal.update(s[:100], y[:100], times=t[:100])
    if replace == "ring growth":
        for i in range(100, 2000):  # past the first ring capacity, one event at a time
            cal.learn_one({"s": float(s[i])}, bool(y[i]), t=float(t[i]))
    elif replace == "ring shrink":
        cal.update(s[100:], y[100:], times=t[100:])
        capacity = cal.window_histogram.ring_size()
        cal.learn_one({"s": 0.5}, True, t=1e6)  # everything else expires
        cal.update(s[:10], y[:10], times=1e6 + t[:10])
        assert cal.window_histogram.ring_size() < capacity  # the ring did shrink (after an array call)
    elif replace == "merge":
        other = PAVCalibrator(prior=None, window=TimeWindow(seconds=5000.0)).update(s[100:], y[100:], times=t[100:])
        cal = merge([cal, other])
    elif replace == "pickle":
        cal = pickle.loads(pickle.dumps(cal))
    elif replace == "deepcopy":
        cal = copy.deepcopy(cal)
    else:
        cal = load(save(cal, tmp_path / "cal"))
    assert_river_face_reads_the_array_state(cal, s[:50])
    cal.learn_one({"s": 0.3}, True, t=2e6)  # the river face learns into the arrays too
    assert cal.n_learned == river_face_buffer(cal)[K.PACK_HEADER + H.SF_N_LEARNED]
    assert_river_face_reads_the_array_state(cal, s[:50])


def test_inputs_are_not_mutated(rng):
    s = rng.uniform(size=50)
    y = (rng.uniform(size=50) < s).astype(float)
    s0, y0 = s.copy(), y.copy()
    PAVCalibrator(prior=None).prequential(s, y)
    np.testing.assert_array_equal(s, s0)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@settings(max_examples=20)
@given(stream=event_streams(), mask=st.lists(st.booleans(), min_size=80, max_size=80), step=st.booleans())
def test_process_equals_loop_on_random_streams(window, stream, mask, step):
    scores, labels, weights, times = (np.array(v) for v in stream)
    learn = np.array(mask[: scores.size])
    make = lambda: PAVCalibrator(  # noqa: E731
        prior=None,
        buckets=QuantileEdges(n_buckets=5, warmup=7) if step else UniformGrid(n_buckets=5),
        window=window,
        interpolation="step" if step else "linear",
    )
    a, b = make(), make()
    p, llr = a.process(scores, labels, learn, weights=weights, times=times)
    lp, lllr = river_loop(b, scores, labels, np.where(learn, 1, 2), weights, times)
    np.testing.assert_array_equal(p, lp)
    np.testing.assert_array_equal(llr, lllr)
    assert observable_state(a) == observable_state(b)  # a mask of >= 64 learns rebuilds once


# ---------------------------------------------------------------------------- long runs of labels
def click_events(rng, n, weights):
    """A click-like stream over a logit grid: scores, labels, weights drawn from ``weights``, times."""
    z = rng.normal(-2.0, 1.5, size=n)
    labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    times = np.cumsum(rng.choice([0.0, 0.05, 0.2], size=n))
    return 1.0 / (1.0 + np.exp(-z)), labels, rng.choice(weights, size=n), times


@pytest.mark.parametrize("weights", [(1.0, 0.3, 2.5), (1.0, 0.0, 3.0)], ids=["fractional", "whole"])
@pytest.mark.parametrize("window", [*WINDOWS, CountWindow(n=400)], ids=repr)
def test_update_and_long_learn_runs_equal_learning_one_by_one(window, weights, rng):
    # ``update`` (and any run of K.LEARN_RUN_REBUILD or more labels between two predictions)
    # learns into the histogram alone and rebuilds the blocks once; the state must be the one
    # learning event by event gives, and so must every output after it
    n = 1500
    scores, labels, w, times = click_events(rng, n, weights)
    make = lambda: PAVCalibrator(prior=None, buckets=LogitGrid(n_buckets=96, low=1e-4, high=1 - 1e-4), window=window)  # noqa: E731
    a, b = make(), make()
    a.update(scores[:700], labels[:700], weights=w[:700], times=times[:700])
    river_loop(b, scores[:700], labels[:700], np.ones(700, dtype=int), w[:700], times[:700])
    assert observable_state(a) == observable_state(b)
    for got, want in zip(a.window_histogram.arrays(), b.window_histogram.arrays(), strict=True):
        np.testing.assert_array_equal(got, want)  # the histogram and the ring, bit for bit
    pos, neg = histogram_of(a)
    assert_state_equals_batch(pos, neg, a.centres, *a.map_arrays())
    # then predictions between runs of labels: 100 learns, 30 predictions, 70 learns, ...
    learn = (np.arange(n - 700) % 100) < 70
    learn[:100] = True
    args = (scores[700:], labels[700:], learn)
    p, llr = a.process(*args, weights=w[700:], times=times[700:])
    lp, lllr = river_loop(b, *args[:2], np.where(learn, 1, 2), w[700:], times[700:])
    np.testing.assert_array_equal(p, lp)
    np.testing.assert_array_equal(llr, lllr)
    assert observable_state(a) == observable_state(b)
    p, llr = a.prequential(scores[:300], labels[:300], weights=w[:300], times=times[-1] + times[:300])
    lp, lllr = river_loop(b, scores[:300], labels[:300], np.full(300, 3), w[:300], times[-1] + times[:300])
    np.testing.assert_array_equal(p, lp)
    np.testing.assert_array_equal(llr, lllr)
    assert integral_flag(a) == (weights[1] == 0.0 and not isinstance(window, Decay))


# ---------------------------------------------------------------------------- threads (n_jobs)
@pytest.mark.parametrize("weights", [(1.0, 0.3, 2.5), (1.0, 0.0, 3.0)], ids=["fractional", "whole"])
@pytest.mark.parametrize("window", [*WINDOWS, CountWindow(n=400)], ids=repr)
def test_threads_give_the_outputs_and_state_of_one_thread(window, weights, rng, monkeypatch):
    import streamcal.isotonic.streaming as module

    monkeypatch.setattr(module, "MIN_EVENTS_PER_THREAD", 100)  # threads on a short stream
    n = 1200
    scores, labels, w, times = click_events(rng, n, weights)
    learn = rng.uniform(size=n) < 0.7
    learn[300:400] = True  # a long run of labels inside a chunk
    runs = {}
    for n_jobs in (1, 3, -1):
        cal = PAVCalibrator(prior=None, buckets=LogitGrid(n_buckets=96, low=1e-4, high=1 - 1e-4), window=window, n_jobs=n_jobs)
        cal.update(scores[:200], labels[:200], weights=w[:200], times=times[:200])
        first = cal.prequential(scores[200:700], labels[200:700], weights=w[200:700], times=times[200:700])
        second = cal.process(scores[700:], labels[700:], learn[700:], weights=w[700:], times=times[700:])
        runs[n_jobs] = (np.concatenate(first), np.concatenate(second), observable_state(cal), cal)
    one = runs[1]
    for n_jobs in (3, -1):
        np.testing.assert_array_equal(runs[n_jobs][0], one[0])
        np.testing.assert_array_equal(runs[n_jobs][1], one[1])
        assert runs[n_jobs][2] == one[2]
        for got, want in zip(runs[n_jobs][3].window_histogram.arrays(), one[3].window_histogram.arrays(), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("method", ["prequential", "update", "predict_proba"])
def test_threads_name_the_first_bad_score_and_change_nothing(method, rng, monkeypatch):
    import streamcal.isotonic.streaming as module

    monkeypatch.setattr(module, "MIN_EVENTS_PER_THREAD", 100)  # the scores are checked in 3 chunks
    scores, labels, _, _ = click_events(rng, 1200, (1.0,))
    cal = PAVCalibrator(prior=None, window=CountWindow(n=400), n_jobs=3).update(scores[:300], labels[:300])
    before = snapshot(cal)
    bad = scores.copy()
    bad[[950, 1100]] = [1.5, -0.5]  # the first one, in the last chunk, is named
    args = (bad,) if method == "predict_proba" else (bad, labels)
    with pytest.raises(ValueError, match=r"got 1\.5 at position 950"):
        getattr(cal, method)(*args)
    assert snapshot(cal) == before


def test_chunk_bounds_balance_the_histogram_pass():
    from streamcal.isotonic.streaming import _HISTOGRAM_SHARE, chunk_bounds

    for n, threads in [(10, 1), (1000, 2), (10**6, 3), (10**7, 8)]:
        cuts = chunk_bounds(n, threads)
        assert (cuts[0], cuts[-1], len(cuts)) == (0, n, threads + 1)
        assert all(a < b for a, b in itertools.pairwise(cuts))
        work = [_HISTOGRAM_SHARE * lo + (hi - lo) for lo, hi in itertools.pairwise(cuts)]
        assert max(work) - min(work) <= 2  # equal up to rounding
    assert chunk_bounds(1000, 2)[1] > 500  # the second thread also learns the first chunk's labels


def test_n_jobs_is_validated():
    with pytest.raises(ValueError, match="`n_jobs` must"):
        PAVCalibrator(prior=None, n_jobs=0)
    with pytest.raises(TypeError, match="`n_jobs` must be an int; got '2'"):
        PAVCalibrator(prior=None, n_jobs="2")
    assert PAVCalibrator(prior=None, n_jobs=None).n_jobs is None
    assert PAVCalibrator(prior=None, n_jobs=-1).n_jobs == -1
