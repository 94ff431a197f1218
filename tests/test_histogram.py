"""The windowed histogram on its own, without a calibrator: it learns (add, evict, decay), merges,
saves, loads and checks a restored copy of itself; and the calibrators hold one."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from naive import naive_window_histogram

from streamcal import ISplineCalibrator, PAVCalibrator, load, save
from streamcal._histogram import SAVED_NAMES, WindowedHistogram
from streamcal._layout import BucketLayout
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.exceptions import StateFileError
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded


def events(n, seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.uniform(size=n)
    return scores, rng.uniform(size=n) < scores, np.cumsum(rng.uniform(size=n))


def learned(window, buckets, s, y, w=None, t=None):
    """A histogram that learned these events one call at a time."""
    hist = WindowedHistogram(window, buckets)
    b, bad = hist.layout.buckets_checked(np.ascontiguousarray(s, dtype=np.float64))
    assert bad == -1
    w = np.ones(s.size) if w is None else w
    t = np.zeros(s.size) if t is None else t
    if hist.grows_ring:
        hist.ensure_ring(s.size)
    hist.learn_many(b, y.astype(np.float64), np.ascontiguousarray(w), np.ascontiguousarray(t))
    return hist


# ------------------------------------------------------------------------------------------- learning
@pytest.mark.parametrize("n_window", [1, 7, 100, 10_000])
def test_count_window_row_equals_the_naive_histogram_of_the_last_events(n_window):
    s, y, _ = events(600, seed=n_window)
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 1.5, size=s.size)
    grid = UniformGrid(16, 0.0, 1.0)
    hist = learned(CountWindow(n_window), grid, s, y, w)
    b = grid.index(s)
    keep = slice(max(0, s.size - n_window), None)
    pos, neg = naive_window_histogram(b[keep], y[keep], w[keep], 16)
    row = hist.row()
    np.testing.assert_allclose(row.pos, pos, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(row.neg, neg, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(row.n_pos, np.bincount(b[keep][y[keep]], minlength=16))
    np.testing.assert_array_equal(row.n_neg, np.bincount(b[keep][~y[keep]], minlength=16))
    assert hist.n_learned == s.size
    ring_b, ring_y, ring_w, _ = hist.ring()
    np.testing.assert_array_equal(ring_b, b[keep])
    np.testing.assert_array_equal(ring_y, y[keep].astype(float))
    np.testing.assert_array_equal(ring_w, w[keep])


def test_one_event_at_a_time_equals_one_call():
    s, y, t = events(300)
    grid = LogitGrid(64)
    one = WindowedHistogram(TimeWindow(20.0), grid)
    for si, yi, ti in zip(s, y, t, strict=True):
        one.ensure_ring(1)
        one.learn_one(one.layout.bucket_of(float(si)), float(yi), 1.0, float(ti))
    many = learned(TimeWindow(20.0), grid, s, y, t=t)
    for a, b in (*zip(one.row(), many.row(), strict=True), *zip(one.ring(), many.ring(), strict=True)):
        np.testing.assert_array_equal(a, b)  # bit for bit (the rings' capacities may differ)
    assert one.window_total() == many.window_total()
    assert one.n_learned == many.n_learned == s.size


def test_time_window_keeps_the_events_within_its_span():
    s, y, t = events(500)
    grid = UniformGrid(8, 0.0, 1.0)
    hist = learned(TimeWindow(25.0), grid, s, y, t=t)
    keep = t > t[-1] - 25.0
    pos, neg = naive_window_histogram(grid.index(s)[keep], y[keep], np.ones(keep.sum()), 8)
    np.testing.assert_allclose(hist.row().pos, pos)
    np.testing.assert_allclose(hist.row().neg, neg)
    assert hist.last_time() == t[-1]


@pytest.mark.parametrize("by", ["events", "time"])
def test_decay_weighs_each_event_by_its_age(by):
    s, y, t = events(400)
    grid = UniformGrid(8, 0.0, 1.0)
    clock = np.arange(s.size, dtype=float) if by == "events" else t
    hist = learned(Decay(30.0, by=by), grid, s, y, t=None if by == "events" else t)
    age_weights = 2.0 ** (-(clock[-1] - clock) / 30.0)
    pos, neg = naive_window_histogram(grid.index(s), y, age_weights, 8)
    np.testing.assert_allclose(hist.row().pos, pos, rtol=1e-10)
    np.testing.assert_allclose(hist.row().neg, neg, rtol=1e-10)


# ------------------------------------------------------------------------------------------- merging
@pytest.mark.parametrize("window", [Unbounded(), CountWindow(150), Decay(50.0)], ids=repr)
def test_merge_equals_learning_both_parts_in_order(window):
    s, y, _ = events(500)
    grid = UniformGrid(16, 0.0, 1.0)
    a = learned(window, grid, s[:200], y[:200])
    b = learned(window, grid, s[200:], y[200:])
    a.merge_from(b)
    whole = learned(window, grid, s, y)
    np.testing.assert_allclose(a.row().pos, whole.row().pos, rtol=1e-12)
    np.testing.assert_allclose(a.row().neg, whole.row().neg, rtol=1e-12)
    np.testing.assert_array_equal(a.row().n_pos, whole.row().n_pos)
    assert a.n_learned == whole.n_learned


def test_merge_refuses_a_different_layout_and_changes_nothing():
    s, y, _ = events(100)
    a = learned(Unbounded(), UniformGrid(16, 0.0, 1.0), s, y)
    b = learned(Unbounded(), UniformGrid(8, 0.0, 1.0), s, y)
    before = a.arrays()
    with pytest.raises(ValueError, match="different bucket edges"):
        a.merge_from(b)
    for x, x0 in zip(a.arrays(), before, strict=True):
        np.testing.assert_array_equal(x, x0)


# ------------------------------------------------------------------------------------ saved and checked
@pytest.mark.parametrize(
    "window", [Unbounded(), CountWindow(100), TimeWindow(30.0), Decay(40.0), Decay(9.0, by="time")], ids=repr
)
def test_saved_form_round_trips_and_passes_its_own_check(window):
    s, y, t = events(300)
    grid = LogitGrid(32)
    hist = learned(window, grid, s, y, t=t)
    saved = hist.saved()
    assert set(saved) <= set(SAVED_NAMES) | set(BucketLayout.SAVED_NAMES)
    WindowedHistogram.check_saved(dict(saved), window, grid, grid)
    again = WindowedHistogram.from_saved(dict(saved), window, grid)
    for a, b in zip(again.arrays(), hist.arrays(), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(again.layout.guide, hist.layout.guide)  # the cache is rebuilt
    # both go on alike
    for h in (hist, again):
        if h.grows_ring:
            h.ensure_ring(1)
        h.learn_one(3, 1.0, 2.0, float(t[-1]) + 1.0)
    for a, b in zip(again.arrays(), hist.arrays(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda st: st["_sf"].__setitem__(14, -1.0), "weights"),
        (lambda st: st["_si"].__setitem__(0, 5), "bucket count"),
        (lambda st: st.__setitem__("_cuts", st["_cuts"][::-1].copy()), "_cuts"),
        (lambda st: st["_edges"].__setitem__(3, np.nan), "_edges"),
        (lambda st: st["_si"].__setitem__(3, 10**9), "ring count"),
    ],
)
def test_a_damaged_saved_histogram_fails_its_check(damage, message):
    s, y, _ = events(200)
    grid = UniformGrid(16, 0.0, 1.0)
    hist = learned(CountWindow(50), grid, s, y)
    saved = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in hist.saved().items()}
    damage(saved)
    with pytest.raises(StateFileError, match=message):
        WindowedHistogram.check_saved(saved, CountWindow(50), grid, grid)


def test_check_refuses_a_layout_of_another_strategy():
    s, y, _ = events(50)
    hist = learned(Unbounded(), Edges((0.0, 0.5, 1.0)), s, y)
    with pytest.raises(StateFileError, match="Edges"):
        WindowedHistogram.check_saved(hist.saved(), Unbounded(), Edges((0.0, 0.25, 1.0)), None)


def test_memory_error_names_the_sizes():
    with pytest.raises(ValueError, match="GiB"):
        WindowedHistogram(CountWindow(2**40), UniformGrid(4))


# ------------------------------------------------------------------------------- held by the calibrators
@pytest.mark.parametrize("cls", [PAVCalibrator, ISplineCalibrator])
def test_every_streaming_calibrator_is_saved_under_the_flat_names(cls):
    s, y, t = events(500)
    cal = cls(window=TimeWindow(40.0)).update(s, y, times=t)
    state = cal.__getstate__()
    assert "_hist" not in state
    assert {"_sf", "_si", "_edges", "_centres", "_cuts", "_window_code"} <= set(state)
    back = pickle.loads(pickle.dumps(cal))
    for a, b in zip(back.__getstate__().items(), state.items(), strict=True):
        assert a[0] == b[0]
        if isinstance(a[1], np.ndarray):
            np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(back.predict_proba(s), cal.predict_proba(s))


@pytest.mark.parametrize("buckets", ["quantile:16", QuantileEdges(16, warmup=50)], ids=repr)
def test_a_calibrator_in_its_quantile_warmup_copies_pickles_and_saves(buckets, tmp_path):
    # a shorthand parameter names a strategy equal to, not identical with, the buffered one
    s, y, _ = events(400)
    cal = PAVCalibrator(buckets=buckets).update(s[:20], y[:20])
    assert cal.n_buckets is None
    for other in (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal))):
        other.update(s[20:], y[20:])
        np.testing.assert_array_equal(other.predict_proba(s), cal.clone().update(s, y).predict_proba(s))
    save(cal, tmp_path / "warm.zip")
    back = load(tmp_path / "warm.zip")
    assert back.n_learned == 20
    back.update(s[20:], y[20:])
    np.testing.assert_array_equal(back.predict_proba(s), cal.clone().update(s, y).predict_proba(s))


def test_equal_fixed_grids_share_one_built_layout_and_each_saved_state_holds_its_own(tmp_path):
    # building a grid's edges is most of a calibrator's construction: equal grids share them
    a, b = PAVCalibrator(), PAVCalibrator(window=CountWindow(50))
    la, lb = a.window_histogram.layout, b.window_histogram.layout
    assert la is not lb
    for name in ("edges", "cuts", "cuts_list", "centres", "centres_list"):
        assert getattr(la, name) is getattr(lb, name)
    # another grid, or the same grid given by other values, builds its own
    assert PAVCalibrator(buckets=LogitGrid(512)).window_histogram.layout.edges is not la.edges
    pos, neg = UniformGrid(4, 0.0, 1.0), UniformGrid(4, -0.0, 1.0)
    e_pos, e_neg = (PAVCalibrator(buckets=g).edges for g in (pos, neg))
    assert e_pos.tobytes() == pos.bucket_edges().tobytes()
    assert e_neg.tobytes() == neg.bucket_edges().tobytes()
    # a saved, pickled or copied calibrator's layout is its own, with the same values
    rng = np.random.default_rng(0)
    s, y = rng.uniform(size=500), rng.uniform(size=500) < 0.3
    a.update(s, y)
    save(a, tmp_path / "a.zip")
    for back in (load(tmp_path / "a.zip"), pickle.loads(pickle.dumps(a)), copy.deepcopy(a)):
        lc = back.window_histogram.layout
        assert lc.edges is not la.edges
        assert lc.cuts_list is not la.cuts_list
        np.testing.assert_array_equal(lc.edges, la.edges)
        assert lc.cuts_list == la.cuts_list
        np.testing.assert_array_equal(back.predict_proba(s), a.predict_proba(s))
    # and the grids' shared arrays are untouched by learning and saving
    np.testing.assert_array_equal(la.edges, LogitGrid(1024).bucket_edges())
