"""Bucket strategies: edges, centres, lookup (arithmetic guess or binary search), quantile warm-up."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_bucket_index

from streamcal._kernels import histogram as H
from streamcal._kernels import ipav as K
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid, bucket_index
from streamcal.isotonic.streaming import PAVCalibrator


@given(
    st.lists(st.floats(-10, 10), min_size=2, max_size=30, unique=True),
    st.lists(st.floats(-20, 20), min_size=0, max_size=50),
)
def test_bucket_index_matches_linear_scan(edges, scores):
    e = np.sort(np.array(edges))
    np.testing.assert_array_equal(bucket_index(e, scores), naive_bucket_index(e, scores))


GRIDS = [
    LogitGrid(1024),
    LogitGrid(8192),
    LogitGrid(5, low=0.2, high=0.7),
    LogitGrid(1),
    UniformGrid(100, low=-3.0, high=5.0),
    UniformGrid(2),
    Edges(edges=(0.0, 0.1, 0.5, 0.9, 2.0)),  # near-logit spacing would be misdetected: still exact
    Edges(edges=tuple(np.cumsum(np.arange(1.0, 40.0)))),
]


@pytest.mark.parametrize("grid", GRIDS, ids=repr)
def test_arithmetic_bucket_guess_equals_binary_search(grid, rng):
    # the arithmetic guess (one logarithm for the logit grid) must land exactly where the
    # binary search does, at the edges, a rounding step either side of them, 0, 1 and beyond
    e = grid.bucket_edges()
    cuts = e[1:-1]
    lo, hi = float(e[0]), float(e[-1])
    span = hi - lo
    scores = np.concatenate(
        [
            cuts,
            np.nextafter(cuts, -np.inf),
            np.nextafter(cuts, np.inf),
            e[:1],
            e[-1:],
            rng.uniform(lo - 0.1 * span, hi + 0.1 * span, size=2000),
            [0.0, 1.0, 5e-324, 1e-300, 1 - 1e-16, -1.0, 2.0, -1e300, 1e300],
        ]
    )
    if isinstance(grid, LogitGrid):
        z = rng.normal(0.0, 8.0, size=2000)
        scores = np.concatenate([scores, 1.0 / (1.0 + np.exp(-z))])
    expected = np.searchsorted(cuts, scores, side="right")
    np.testing.assert_array_equal(bucket_index(e, scores), expected)
    cal = PAVCalibrator(buckets=grid)  # the calibrator's single-score kernel (river face)
    pf, _ = cal.map_arrays()
    np.testing.assert_array_equal([K.pav_bucket_of(pf, float(v)) for v in scores], expected)


def guided(cuts, scores, low=-np.inf, high=np.inf):
    """The calibrators' array search: through the bucket guide, with the scores checked."""
    cuts = np.ascontiguousarray(cuts, dtype=np.float64)
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    out = np.full(scores.size, -7, dtype=np.intp)
    bad = H.check_bucket_index(cuts, H.bucket_guide(cuts), low, high, scores, out)
    return out, bad


GUIDE_CUTS = {
    "two": [0.0, 1.0],
    "one": [0.5],
    "none": [],
    "clustered": [*np.linspace(0.0, 1e-6, 200), 0.5, 1.0],  # hundreds of cuts in one bin
    "huge span": [-8e307, -1.0, 0.0, 3.0, 8e307],
    "tiny span": [1e-302, 5e-302, 1e-301],  # bins per unit of score near the largest float
    # no guide, so the binary search: spans whose bins per unit of score are not finite
    "span overflows": [-1.5e308, 0.0, 1.5e308],
    "span of a few ulps": [1e-300, 1.0000000000000002e-300, 1.0000000000000004e-300],
    "subnormal span": [0.0, 5e-324, 1e-323],
}
GUIDED = {"two", "clustered", "huge span", "tiny span"}  # the cases that get a guide


@pytest.mark.parametrize(
    "cuts",
    [*GUIDE_CUTS.values(), *(g.bucket_edges()[1:-1] for g in GRIDS)],
    ids=[*GUIDE_CUTS, *(repr(g) for g in GRIDS)],
)
def test_guided_bucket_search_equals_binary_search(cuts, rng):
    cuts = np.asarray(cuts, dtype=np.float64)
    spread = [-1.7e308, -1e300, -1.0, 0.0, 5e-324, 1e-300, 0.5, 1.0, 2.0, 1e300, 1.7e308]
    scores = np.concatenate([cuts, np.nextafter(cuts, -np.inf), np.nextafter(cuts, np.inf), spread])
    if cuts.size:
        lo, hi = float(cuts[0]), float(cuts[-1])
        span = min(hi - lo, 1e300)
        scores = np.concatenate([scores, rng.uniform(lo - 0.1 * span, lo + 1.1 * span, size=3000)])
        scores = np.concatenate([scores, rng.choice(cuts, 500) + rng.normal(0, 1e-9, 500)])
    out, bad = guided(cuts, scores)
    assert bad == -1
    np.testing.assert_array_equal(out, np.searchsorted(cuts, scores, side="right"))
    guide = H.bucket_guide(cuts)
    name = next((k for k, v in GUIDE_CUTS.items() if np.array_equal(np.asarray(v, dtype=np.float64), cuts)), None)
    if name is not None:
        assert (guide.size > 0) == (name in GUIDED), name
    if guide.size:  # a guide is a non-decreasing count of cuts ending at all of them
        assert (guide[0], guide[-1]) == (0, cuts.size)
        assert (np.diff(guide) >= 0).all()


@given(
    st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=40, unique=True),
    st.lists(st.floats(-2e6, 2e6), min_size=0, max_size=60),
)
def test_guided_bucket_search_matches_linear_scan(cuts, scores):
    cuts = np.sort(np.array(cuts, dtype=np.float64))
    out, bad = guided(cuts, scores)
    assert bad == -1
    e = np.concatenate([[-np.inf], cuts, [np.inf]])
    np.testing.assert_array_equal(out, naive_bucket_index(e, scores))


def test_guided_bucket_search_stops_at_the_first_bad_score():
    cuts = LogitGrid(16).bucket_edges()[1:-1]
    for bad_value in (np.nan, np.inf, -np.inf, 1.5, -0.1):
        scores = [0.2, 0.7, bad_value, 0.4, np.nan]
        out, bad = guided(cuts, scores, 0.0, 1.0)
        assert bad == 2
        np.testing.assert_array_equal(out[:2], np.searchsorted(cuts, [0.2, 0.7], side="right"))
        assert (out[2:] == -7).all()  # nothing written from the bad score on
    assert guided(cuts, [0.0, 1.0], 0.0, 1.0)[1] == -1  # the range's ends are in it
    assert guided(cuts, [np.inf])[1] == 0  # not finite, even in an unbounded range


def test_calibrators_over_the_same_edges_share_one_guide():
    import pickle

    a = PAVCalibrator(buckets=LogitGrid(512))
    b = PAVCalibrator(buckets=LogitGrid(512))
    c = pickle.loads(pickle.dumps(a))
    guide = a.window_histogram.layout.guide
    assert b.window_histogram.layout.guide is guide
    assert c.window_histogram.layout.guide is guide  # rebuilt on loading (not saved), and shared again
    assert "_guide" not in a.__getstate__()
    d = PAVCalibrator(buckets=LogitGrid(256))
    assert d.window_histogram.layout.guide is not guide
    assert d.window_histogram.layout.guide.size == 32 * 255 + 1


def test_logit_grid_resolves_rare_and_common_rates():
    grid = LogitGrid()
    e = grid.bucket_edges()
    assert e.size == 1025
    assert e[0] == 1e-7
    assert e[-1] == 1.0 - 1e-7
    assert (np.diff(e) > 0).all()
    idx = grid.index([0.0, 1e-7, 2e-7, 1e-4, 1.1e-4, 0.5, 0.52, 1 - 1e-4, 1.0])
    assert idx[0] == 0
    assert idx[-1] == 1023
    assert len(set(idx[1:-1].tolist())) == 7  # every listed rate in its own bucket
    c = grid.bucket_centres()
    assert ((c > e[:-1]) & (c < e[1:])).all()


def test_logit_grid_validates():
    with pytest.raises(ValueError, match="`low`"):
        LogitGrid(low=0.0).bucket_edges()
    with pytest.raises(ValueError, match="below `high`"):
        LogitGrid(low=0.6, high=0.4).bucket_edges()
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\] for LogitGrid"):
        PAVCalibrator().update([0.5, 1.5], [0, 1])


def test_uniform_grid_clamps_out_of_range_scores():
    g = UniformGrid(n_buckets=5, low=-1.0, high=1.0)
    np.testing.assert_allclose(g.bucket_centres(), [-0.8, -0.4, 0.0, 0.4, 0.8], atol=1e-15)
    assert g.index([-100.0, -1.0, 0.99, 1.0, 100.0]).tolist() == [0, 0, 4, 4, 4]


def test_user_edges_and_centres():
    e = Edges(edges=(0.0, 1.0, 3.0), centres=(0.2, 2.9))
    assert e.bucket_centres().tolist() == [0.2, 2.9]
    with pytest.raises(ValueError, match="strictly increasing"):
        Edges(edges=(0.0, 2.0, 1.0)).bucket_edges()
    with pytest.raises(ValueError, match="one value per bucket"):
        Edges(edges=(0.0, 1.0, 3.0), centres=(0.5,)).bucket_centres()
    assert repr(e) == repr(e.clone())


def test_quantile_edges_split_the_sample_evenly(rng):
    sample = rng.normal(size=4000)
    q = QuantileEdges(n_buckets=8, warmup=4000)
    counts = np.bincount(q.index(sample, sample), minlength=8)
    assert counts.min() >= 490
    assert counts.max() <= 510
    tied = QuantileEdges(n_buckets=8).bucket_edges(np.repeat([1.0, 2.0], 50))
    assert tied.tolist() == [1.0, 1.5, 2.0]  # repeated quantiles merge
    assert QuantileEdges(n_buckets=4).bucket_edges(np.ones(10)).tolist() == [0.5, 1.5]


@pytest.mark.slow
def test_quantile_warmup_buffers_then_replays_every_event(rng):
    s = rng.normal(size=300)
    y = rng.uniform(size=300) < 1 / (1 + np.exp(-2 * s))
    w = rng.choice([0.5, 1.0, 2.0], size=300)
    cal = PAVCalibrator(buckets=QuantileEdges(n_buckets=16, warmup=100))
    p, llr = cal.prequential(s[:99], y[:99], weights=w[:99])
    # before the warm-up completes: prior of the buffered events with one pseudo-event per class
    cw, cp = np.concatenate(([0.0], np.cumsum(w[:98]))), np.concatenate(([0.0], np.cumsum(w[:98] * y[:98])))
    np.testing.assert_allclose(p, (cp + 1) / (cw + 2))
    assert (llr == 0).all()
    assert cal.n_learned == 99
    assert cal.n_buckets is None
    cal.update(s[99:], y[99:], weights=w[99:])
    edges = QuantileEdges(n_buckets=16).bucket_edges(s[:100])
    ref = PAVCalibrator(buckets=Edges(edges)).update(s, y, weights=w)
    np.testing.assert_array_equal(cal.edges, edges)
    assert cal.window_weight == ref.window_weight
    grid = np.linspace(-3, 3, 50)
    np.testing.assert_array_equal(cal.predict_proba(grid), ref.predict_proba(grid))


@pytest.mark.parametrize(
    "strategy", [LogitGrid(64), UniformGrid(37, low=-3.0, high=5.0), Edges((0.0, 0.1, 0.1001, 0.5, 2.0))]
)
def test_the_river_face_and_the_kernels_find_the_same_bucket(strategy, rng):
    from streamcal.buckets import bucket_of_score

    edges = np.asarray(strategy.bucket_edges(), dtype=np.float64)
    cuts = edges[1:-1]
    lo, hi = float(edges[0]), float(edges[-1])
    near = np.concatenate([cuts, np.nextafter(cuts, -np.inf), np.nextafter(cuts, np.inf)])
    scores = np.concatenate([rng.uniform(lo, hi, 2000), near, [lo, hi]])
    cut_list = cuts.tolist()
    one_by_one = [bucket_of_score(cut_list, float(s)) for s in scores]
    assert one_by_one == bucket_index(edges, scores).tolist()
