"""Merging calibrator states: k partitions merged == one calibrator over the union."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal import persist
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.isotonic import PAVCalibrator
from streamcal.merging import merge
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

WINDOWS = {
    "unbounded": Unbounded,
    "count": lambda: CountWindow(n=500),
    "time": lambda: TimeWindow(seconds=300.0),
    "decay-events": lambda: Decay(half_life=400.0),
    "decay-time": lambda: Decay(half_life=250.0, by="time"),
}
TIME_CLOCK = {"time", "decay-time"}
EXACT = {"unbounded", "count", "time"}  # integer weights: exact sums; decay: equal to rounding


def make(kind, **kw):
    return PAVCalibrator(buckets=kw.pop("buckets", UniformGrid(n_buckets=64)), window=WINDOWS[kind](), **kw)


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.uniform(size=n)
    labels = rng.uniform(size=n) < scores**2
    weights = rng.integers(1, 4, size=n).astype(float)
    times = np.cumsum(rng.exponential(size=n))
    return scores, labels, weights, times


def fit(cal, idx, s, y, w, t):
    return cal.update(s[idx], y[idx], weights=w[idx], times=t[idx] if cal.window_histogram.uses_times else None)


def partitions(kind, n, k, rng):
    """Contiguous chunks for event clocks (order matters); interleaved keys for time clocks."""
    if kind in TIME_CLOCK:
        key = rng.integers(0, k, size=n)
        return [np.flatnonzero(key == j) for j in range(k)]
    cuts = np.sort(rng.integers(0, n + 1, size=k - 1))
    return np.split(np.arange(n), cuts)


def assert_same_calibrator(merged, single, kind):
    _, pos_m, neg_m = merged.histogram()
    _, pos_s, neg_s = single.histogram()
    grid = np.linspace(0.0, 1.0, 257)
    assert merged.n_learned == single.n_learned
    if kind in EXACT:
        np.testing.assert_array_equal(pos_m, pos_s)
        np.testing.assert_array_equal(neg_m, neg_s)
        assert merged.window_weight == single.window_weight
        np.testing.assert_array_equal(merged.predict_proba(grid), single.predict_proba(grid))
        np.testing.assert_array_equal(merged.predict_llr(grid), single.predict_llr(grid))
    else:
        np.testing.assert_allclose(pos_m, pos_s, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(neg_m, neg_s, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(merged.predict_proba(grid), single.predict_proba(grid), rtol=1e-9)
        np.testing.assert_allclose(merged.predict_llr(grid), single.predict_llr(grid), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_merge_of_partitions_equals_one_calibrator_over_the_union(kind):
    n = 3000
    s, y, w, t = data(n)
    parts = partitions(kind, n, 5, np.random.default_rng(1))
    states = [fit(make(kind), idx, s, y, w, t) for idx in parts]
    single = fit(make(kind), np.arange(n), s, y, w, t)
    merged = merge(states)
    assert_same_calibrator(merged, single, kind)
    # and both continue alike: the window contents (rings) were merged, not only the sums
    s2, y2, w2, t2 = data(700, seed=5)
    t2 = t2 + t[-1]
    all_idx = np.arange(700)
    pm = merged.prequential(s2, y2, weights=w2, times=t2 if merged.window_histogram.uses_times else None)
    ps = single.prequential(s2, y2, weights=w2, times=t2 if single.window_histogram.uses_times else None)
    if kind in EXACT:
        np.testing.assert_array_equal(pm[0], ps[0])
    else:
        np.testing.assert_allclose(pm[0], ps[0], rtol=1e-9)
    assert_same_calibrator(merged, single, kind)
    assert all_idx.size == 700


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_tree_reduction_equals_left_fold(kind):
    n = 2000
    s, y, w, t = data(n, seed=2)
    parts = partitions(kind, n, 4, np.random.default_rng(3))
    states = [fit(make(kind), idx, s, y, w, t) for idx in parts]
    tree = merge([merge(states[:2]), merge(states[2:])])
    fold = merge(states)
    assert_same_calibrator(tree, fold, kind)


def test_merge_leaves_its_inputs_unchanged():
    s, y, w, t = data(500)
    states = [fit(make("count"), idx, s, y, w, t) for idx in np.array_split(np.arange(500), 3)]
    before = [persist.to_bytes(c) for c in states]
    merge(states)
    assert [persist.to_bytes(c) for c in states] == before


def test_unbounded_merge_is_commutative():
    s, y, w, t = data(1000)
    a = fit(make("unbounded"), np.arange(400), s, y, w, t)
    b = fit(make("unbounded"), np.arange(400, 1000), s, y, w, t)
    assert_same_calibrator(merge([a, b]), merge([b, a]), "unbounded")


def test_merge_with_empty_partitions_and_a_single_state():
    s, y, w, t = data(300)
    full = fit(make("count"), np.arange(300), s, y, w, t)
    merged = merge([make("count"), full, make("count")])
    assert_same_calibrator(merged, full, "count")
    assert merge([full]) is not full
    assert_same_calibrator(merge([full]), full, "count")


@given(
    kind=st.sampled_from(sorted(WINDOWS)),
    n=st.integers(0, 400),
    k=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_merge_matches_single_calibrator_on_random_partitions(kind, n, k, seed):
    rng = np.random.default_rng(seed)
    s, y, w, t = data(n, seed=seed)
    w = np.ones(n)  # unit weights
    parts = partitions(kind, n, k, rng)
    states = [fit(make(kind, buckets=UniformGrid(n_buckets=16), prior=None), idx, s, y, w, t) for idx in parts]
    single = fit(make(kind, buckets=UniformGrid(n_buckets=16), prior=None), np.arange(n), s, y, w, t)
    assert_same_calibrator(merge(states), single, kind)


# --------------------------------------------------------------------------------------- quantile edges
def test_states_still_in_their_warm_up_merge_by_replay():
    s, y, w, t = data(900)
    q = lambda: PAVCalibrator(buckets=QuantileEdges(n_buckets=8, warmup=500))  # noqa: E731
    parts = np.split(np.arange(900), [200, 300])  # the first two are still warming up, the third is built
    states = [fit(q(), idx, s, y, w, t) for idx in parts]
    assert not states[0].window_histogram.built
    assert not states[1].window_histogram.built
    merged = merge(states[:2])
    assert not merged.window_histogram.built
    assert merged.n_learned == 300
    single = fit(q(), np.arange(300), s, y, w, t)
    np.testing.assert_array_equal(merged.predict_proba([0.2, 0.5]), single.predict_proba([0.2, 0.5]))
    # a built state after them: only if its edges came from the same warm-up; here they did not
    with pytest.raises(ValueError, match="still in its quantile warm-up"):
        merge(states)
    # a warm-up state after a built one is replayed into it (concatenation)
    built = fit(q(), np.arange(600), s, y, w, t)
    tail = fit(q(), np.arange(600, 900), s, y, w, t)
    assert not tail.window_histogram.built
    assert_same_calibrator(merge([built, tail]), fit(q(), np.arange(900), s, y, w, t), "unbounded")


def test_different_quantile_edges_are_refused_with_advice():
    s, y, w, t = data(2000)
    q = lambda: PAVCalibrator(buckets=QuantileEdges(n_buckets=8, warmup=300))  # noqa: E731
    a = fit(q(), np.arange(1000), s, y, w, t)
    b = fit(q(), np.arange(1000, 2000), s, y, w, t)
    with pytest.raises(ValueError, match=r"different bucket edges .* streamcal\.buckets\.Edges"):
        merge([a, b])
    # fixed edges learned once merge fine
    edges = a.edges
    a2 = fit(PAVCalibrator(buckets=Edges(edges)), np.arange(1000), s, y, w, t)
    b2 = fit(PAVCalibrator(buckets=Edges(edges)), np.arange(1000, 2000), s, y, w, t)
    single = fit(PAVCalibrator(buckets=Edges(edges)), np.arange(2000), s, y, w, t)
    assert_same_calibrator(merge([a2, b2]), single, "unbounded")


# --------------------------------------------------------------------------------------- refusals
def test_incompatible_states_are_refused():
    a = PAVCalibrator()
    with pytest.raises(ValueError, match="at least one"):
        merge([])
    with pytest.raises(TypeError, match="streaming calibrators; got a float at position 1"):
        merge([a, 0.5])
    with pytest.raises(ValueError, match="different `window`"):
        merge([a, PAVCalibrator(window=CountWindow(10))])
    with pytest.raises(ValueError, match="different `interpolation`"):
        merge([a, PAVCalibrator(interpolation="step")])
    c = PAVCalibrator(buckets=LogitGrid(n_buckets=16)).update([0.5], [1])
    d = PAVCalibrator(buckets=LogitGrid(n_buckets=32)).update([0.5], [1])
    with pytest.raises(ValueError, match="different `buckets`"):
        merge([c, d])
    # n_jobs changes how fast, never what: parts may differ in it
    e = PAVCalibrator(n_jobs=2).update([0.5], [1])
    assert merge([c.clone().update([0.5], [1]), PAVCalibrator(buckets=LogitGrid(n_buckets=16), n_jobs=2)]).n_learned == 1
    assert merge([e, PAVCalibrator().update([0.2], [0])]).n_learned == 2


def test_calibrators_merge_given_one_by_one_or_as_one_iterable():
    s, y, w, t = data(900, seed=4)
    parts = [fit(make("count"), idx, s, y, w, t) for idx in np.split(np.arange(900), 3)]
    listed = merge(parts)
    for merged in (merge(*parts), merge(tuple(parts)), merge(iter(parts))):
        assert persist.to_bytes(merged) == persist.to_bytes(listed)
    alone = merge(parts[0])  # one calibrator: a copy
    assert alone is not parts[0]
    assert persist.to_bytes(alone) == persist.to_bytes(parts[0])
    with pytest.raises(ValueError, match="at least one calibrator; got none"):
        merge()
    with pytest.raises(TypeError, match="streaming calibrators; got a float at position 1"):
        merge(parts[0], 0.5)
    with pytest.raises(TypeError, match=r"given one by one \(merge\(a, b, ...\)\) or as one iterable .*; got 3\.$"):
        merge(3)


def test_a_keyed_offset_calibrator_is_refused_as_a_class_that_does_not_merge():
    from streamcal import KeyedOffsetCalibrator

    a = KeyedOffsetCalibrator().update([1, 2], [0.2, 0.7], [0, 1])
    before = persist.to_bytes(a)
    for args in ((a, KeyedOffsetCalibrator()), ([a],)):
        with pytest.raises(TypeError, match=r"KeyedOffsetCalibrator \(position 0\) does not merge: each key's sums"):
            merge(*args)
    assert persist.to_bytes(a) == before


@pytest.mark.parametrize("kind", sorted(TIME_CLOCK))
def test_time_clock_states_in_warm_up_merge_in_time_order(kind):
    s, y, w, t = data(1200, seed=4)
    edges = None

    def q():
        return PAVCalibrator(buckets=QuantileEdges(n_buckets=8, warmup=400), window=WINDOWS[kind]())

    key = np.random.default_rng(0).integers(0, 2, size=1200)
    # both still warming up (interleaved by key): replayed together in time order
    a = fit(q(), np.flatnonzero(key[:600] == 0), s, y, w, t)
    b = fit(q(), np.flatnonzero(key[:600] == 1), s, y, w, t)
    assert not a.window_histogram.built
    assert not b.window_histogram.built
    assert_same_calibrator(merge([a, b]), fit(q(), np.arange(600), s, y, w, t), kind)
    # a built over fixed edges, b still warming up with interleaved times: b's events join in time order
    first = fit(q(), np.arange(400), s, y, w, t)
    edges = first.edges
    fixed = lambda: PAVCalibrator(buckets=Edges(edges), window=WINDOWS[kind]())  # noqa: E731
    a = fit(fixed(), np.flatnonzero(key == 0), s, y, w, t)
    b = fit(q(), np.flatnonzero(key == 1)[:300], s, y, w, t)
    assert not b.window_histogram.built
    single = fit(
        fixed(), np.sort(np.concatenate([np.flatnonzero(key == 0), np.flatnonzero(key == 1)[:300]])), s, y, w, t
    )
    with pytest.raises(ValueError, match="different `buckets`"):
        merge([a, b])  # Edges and QuantileEdges are different parameters
    with pytest.raises(ValueError, match="still in its quantile warm-up into one that has built"):
        merge([first, b])
    # a warming-up part whose events all come after the built one's: replayed, exact
    later = fit(q(), np.arange(400, 700), s, y, w, t)
    assert not later.window_histogram.built
    assert_same_calibrator(merge([first, later]), fit(q(), np.arange(700), s, y, w, t), kind)
    b_fixed = fit(fixed(), np.flatnonzero(key == 1)[:300], s, y, w, t)
    assert_same_calibrator(merge([a, b_fixed]), single, kind)


@pytest.mark.parametrize("kind", ["unbounded", "count", "time"])
def test_histogram_fitted_calibrators_merge_too(kind):
    """The generic path (a map refitted from the histogram): ISplineCalibrator."""
    from streamcal import ISplineCalibrator

    n = 2000
    s, y, w, t = data(n, seed=9)
    parts = partitions(kind, n, 3, np.random.default_rng(2))

    def make():
        return ISplineCalibrator(buckets=UniformGrid(n_buckets=64), window=WINDOWS[kind]())

    merged = merge([fit(make(), idx, s, y, w, t) for idx in parts])
    assert_same_calibrator(merged, fit(make(), np.arange(n), s, y, w, t), kind)


def test_refit_every_calibrators_refit_once_merged():
    from streamcal import ISplineCalibrator

    s, y, w, t = data(1000, seed=3)
    make = lambda: ISplineCalibrator(buckets=UniformGrid(n_buckets=32), refit_every=100)  # noqa: E731
    merged = merge([fit(make(), np.arange(450), s, y, w, t), fit(make(), np.arange(450, 1000), s, y, w, t)])
    fresh = make()
    fresh.update(s, y, weights=w)  # 1000 events: its last refit came after the 1000th
    grid = np.linspace(0, 1, 65)
    np.testing.assert_array_equal(merged.predict_proba(grid), fresh.predict_proba(grid))


@pytest.mark.parametrize("name", ["GEVCalibrator", "PlattCalibrator"])
@pytest.mark.parametrize("kind", ["unbounded", "count", "decay-time"])
def test_glm_calibrators_merge_to_the_single_fit(name, kind):
    """GEV / Platt refit by IRLS from the merged histogram: equal to the single fit up to IRLS tolerance."""
    import streamcal

    n = 3000
    s, y, w, t = data(n, seed=12)
    parts = partitions(kind, n, 3, np.random.default_rng(4))

    def make():
        return getattr(streamcal, name)(buckets=UniformGrid(n_buckets=64), window=WINDOWS[kind]())

    merged = merge([fit(make(), idx, s, y, w, t) for idx in parts])
    single = fit(make(), np.arange(n), s, y, w, t)
    assert merged.n_learned == single.n_learned
    np.testing.assert_allclose(merged.histogram()[1], single.histogram()[1], rtol=1e-12)
    grid = np.linspace(0.0, 1.0, 129)
    np.testing.assert_allclose(merged.predict_proba(grid), single.predict_proba(grid), rtol=1e-7, atol=1e-10)


# --------------------------------------------------------------------------------------- GEV Newton statistics
def gev_stream(n, seed, features=("a", "b")):
    from streamcal.gev import gev_cdf

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(features)))
    coef = np.array([0.8, -0.5, 0.3][: len(features)])
    y = rng.random(n) < gev_cdf(X @ coef - 1.2, xi=0.5)
    return [({f: float(v) for f, v in zip(features, row)}, bool(label)) for row, label in zip(X, y)]


def learn(model, events):
    for x, y in events:
        model.learn_one(x, y)
    return model


@pytest.mark.parametrize("half_life", [None, 3000.0])
def test_gev_newton_statistics_add_exactly(half_life):
    from streamcal import GEVCanonicalClassifier

    make = lambda: GEVCanonicalClassifier(batch_size=100, half_life=half_life)  # noqa: E731
    a = learn(make(), gev_stream(1000, seed=1))
    b = learn(make(), gev_stream(1500, seed=2, features=("b", "c", "a")))  # other names and order
    merged = merge([a, b])
    rho = 1.0 if half_life is None else 0.5 ** (1500 / half_life)
    # the Newton statistics have no public face: the saved states hold them
    m, sa, sb = merged.__getstate__(), a.__getstate__(), b.__getstate__()
    assert m["_names"] == ["a", "b", "c"]
    idx_b = [m["_index"][name] for name in sb["_names"]] + [3]
    expected_A = np.zeros_like(m["_A"])
    expected_A[:, :2, :2] = rho * sa["_A"][:, :2, :2]
    expected_A[:, :2, 3] = rho * sa["_A"][:, :2, 2]
    expected_A[:, 3, :2] = rho * sa["_A"][:, 2, :2]
    expected_A[:, 3, 3] = rho * sa["_A"][:, 2, 2]
    expected_A[:, np.array(idx_b)[:, None], np.array(idx_b)[None, :]] += sb["_A"]
    np.testing.assert_array_equal(m["_A"], expected_A)
    np.testing.assert_array_equal(m["_score"], rho * sa["_score"] + sb["_score"])
    assert m["_n_seen"] == 2500
    # the coefficients minimise the merged quadratic model (L2 on the 3 coefficients, not the intercept)
    penalty = np.diag([merged.l2] * 3 + [0.0])
    for j in range(len(merged.xis)):
        hess = m["_A"][j] + penalty
        np.testing.assert_allclose(hess @ m["_beta"][j], m["_b"][j], rtol=1e-9, atol=1e-9)


def test_gev_merge_of_partitions_approaches_the_single_learner():
    from streamcal import GEVCanonicalClassifier

    events = gev_stream(40_000, seed=5)
    make = lambda: GEVCanonicalClassifier(batch_size=500)  # noqa: E731
    parts = [learn(make(), events[i : i + 10_000]) for i in range(0, 40_000, 10_000)]
    merged = merge(parts)
    single = learn(make(), events)
    assert merged.xi_ == single.xi_ == 0.5
    for name in ("a", "b"):
        assert abs(merged.coef_[name] - single.coef_[name]) < 0.02
    assert abs(merged.intercept_ - single.intercept_) < 0.02
    x = {"a": 0.3, "b": -1.0}
    assert abs(merged.predict_proba_one(x)[True] - single.predict_proba_one(x)[True]) < 0.005


def test_gev_buffered_rows_are_carried_over_and_params_must_match():
    from streamcal import GEVCanonicalClassifier

    a = learn(GEVCanonicalClassifier(batch_size=100), gev_stream(250, seed=1))
    b = learn(GEVCanonicalClassifier(batch_size=100), gev_stream(160, seed=2))
    merged = merge([a, b])
    # rows learned and buffered have no public face: the saved states hold them
    assert merged.__getstate__()["_n_seen"] == 200 + 100 + 110  # the 50 + 60 buffered rows: one more step of 110 rows
    assert merged.__getstate__()["_buffered"] == 0
    assert a.__getstate__()["_buffered"] == 50  # inputs untouched
    with pytest.raises(ValueError, match="different `batch_size`"):
        merge([a, GEVCanonicalClassifier(batch_size=10)])
    with pytest.raises(TypeError, match="must all be GEVCanonicalClassifier"):
        merge([a, PAVCalibrator()])


@pytest.mark.parametrize("kind", ["unbounded", "count"])
def test_finite_probability_pav_merges_exactly(kind):
    n = 2000
    s, y, w, t = data(n, seed=21)
    parts = partitions(kind, n, 4, np.random.default_rng(6))
    merged = merge([fit(make(kind, finite_proba=True), idx, s, y, w, t) for idx in parts])
    single = fit(make(kind, finite_proba=True), np.arange(n), s, y, w, t)
    assert_same_calibrator(merged, single, kind)
    assert 0.0 < merged.predict_proba([0.0])[0] < merged.predict_proba([1.0])[0] < 1.0


@pytest.mark.parametrize("kind", ["unbounded", "count", "decay-events"])
def test_pav_score_prior_merges_its_window_exactly_and_refits_its_strength(kind):
    """Where the score prior holds (a calibrated stream), PAV refits its strength on a schedule of
    learned events, and a merge refits it to the merged window: the windows equal the single
    calibrator's (bit for bit with whole-number weights), the predictions differ by the two
    strengths only, within the bound docs/distributed.md states; without the prior they are equal."""
    rng = np.random.default_rng(8)
    n = 3000
    s = rng.uniform(0.01, 0.3, size=n)
    y = rng.uniform(size=n) < s
    w = np.ones(n)
    t = np.arange(n, dtype=float)
    parts = np.array_split(np.arange(n), 4)
    grid = np.linspace(0.005, 0.5, 300)
    for prior in ("auto", None):
        merged = merge([fit(make(kind, buckets=LogitGrid(), prior=prior), idx, s, y, w, t) for idx in parts])
        single = fit(make(kind, buckets=LogitGrid(), prior=prior), np.arange(n), s, y, w, t)
        _, pos_m, neg_m = merged.histogram()
        _, pos_s, neg_s = single.histogram()
        if kind in EXACT:
            np.testing.assert_array_equal(pos_m, pos_s)
            np.testing.assert_array_equal(neg_m, neg_s)
        else:
            np.testing.assert_allclose(pos_m, pos_s, rtol=1e-12)
            np.testing.assert_allclose(neg_m, neg_s, rtol=1e-12)
        if prior is None:
            assert merged.prior_strength == single.prior_strength == 0.0
            np.testing.assert_allclose(merged.predict_proba(grid), single.predict_proba(grid), rtol=1e-9)
            continue
        assert merged.prior_strength > 0.0
        assert single.prior_strength > 0.0
        np.testing.assert_allclose(merged.predict_proba(grid), single.predict_proba(grid), rtol=0, atol=1e-3)
        np.testing.assert_allclose(merged.predict_llr(grid), single.predict_llr(grid), rtol=0, atol=2e-2)


def test_merge_errors_read_as_sentences_and_name_strategies_as_they_mean():
    from streamcal import ISplineCalibrator

    with pytest.raises(TypeError, match=r"must be streamcal streaming calibrators, given one by one .* got None\.$"):
        merge(None)
    with pytest.raises(TypeError, match=r"one class\); got an ISplineCalibrator at position 1"):
        merge([PAVCalibrator(), ISplineCalibrator()])
    with pytest.raises(TypeError, match=r"got an object at position 1"):
        merge([PAVCalibrator(), object()])
    with pytest.raises(ValueError, match=r"`buckets`, LogitGrid\(n_buckets=512\) and LogitGrid\(n_buckets=1024\)"):
        merge([PAVCalibrator(buckets=512), PAVCalibrator()])


def test_one_calibrator_twice_is_refused_and_a_copy_is_taken():
    """The same object twice would count its events twice: refused, naming both positions; an
    equal copy (two shards that saw the same events) is a choice and merges."""
    import copy

    from streamcal import KeyedCalibrator, VennAbersCalibrator, merge

    a = PAVCalibrator().update([0.2, 0.8], [0, 1])
    with pytest.raises(ValueError, match=r"must not hold one calibrator twice .* position 0 again at position 2"):
        merge(a, PAVCalibrator(), a)
    assert merge(a, copy.deepcopy(a)).n_learned == 4
    # keyed calibrators are named as written: KeyedCalibrator over a template
    with pytest.raises(TypeError, match=r"must all be KeyedCalibrator over a VennAbersCalibrator template .* got a "
                                        r"KeyedCalibrator over a PAVCalibrator template at position 1"):
        merge(KeyedCalibrator(VennAbersCalibrator()), KeyedCalibrator())
