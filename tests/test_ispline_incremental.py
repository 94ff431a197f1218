"""ISplineCalibrator's incremental exact refit (the default ``refit_every=None`` loop of
streamcal._kernels.ispline_stream: the normal equations, the knots' quantiles and the active set
updated per event) against the refit engine's full refit before every prediction: every
probability and LLR within 1e-9, on generated streams of every window kind, fractional weights,
moving knots and active sets that change; and its kernels against references: the tree's knots
against the exact quantile steps, the banded solve against the dense active-set solver."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ispline_loops import EngineLoop, calls_then_whole

from streamcal import ISplineCalibrator
from streamcal._kernels import ispline as _k
from streamcal._kernels import ispline_stream as _ks
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

TOL = 1e-9


def assert_within_tol(new, old):
    np.testing.assert_allclose(new[0], old[0], rtol=0.0, atol=TOL)
    np.testing.assert_allclose(new[1], old[1], rtol=TOL, atol=TOL)


@st.composite
def streams(draw):
    n = draw(st.integers(5, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    z = rng.normal(draw(st.floats(-3.0, 1.0)), draw(st.floats(0.2, 3.0)), n)
    scores = 1 / (1 + np.exp(-z))
    slope = draw(st.sampled_from([1.0, 1.3, 3.0]))
    # the relation changes part way: the active set moves
    truth = np.where(np.arange(n) < draw(st.integers(0, n)), 1 / (1 + np.exp(-slope * z)), 0.3 + 0.1 * np.tanh(z))
    labels = rng.uniform(size=n) < truth
    weights = {
        "ones": np.ones(n),
        "choice": rng.choice([0.0, 0.4, 1.0, 1.0, 2.5], n),
        "uniform": rng.uniform(0.5, 1.5, n),
    }[draw(st.sampled_from(["ones", "choice", "uniform"]))]
    times = np.cumsum(rng.uniform(0.0, 2.0, n))
    window = draw(
        st.sampled_from([Unbounded(), CountWindow(9), CountWindow(80), Decay(8.0), Decay(200.0), TimeWindow(30.0)])
    )
    spline = draw(st.sampled_from([{}, {}, {"n_knots": 3}, {"order": 1, "n_knots": 5}, {"knots": (0.2, 0.5, 0.8)}]))
    prior = draw(st.sampled_from(["auto", None, None]))
    ops = rng.choice([1, 2, 3, 3, 3], n)
    return scores, labels, weights, times, window, spline, prior, ops


@settings(max_examples=80, deadline=None)
@given(streams())
def test_incremental_refit_within_1e9_of_the_full_refit_on_random_streams(stream):
    scores, labels, weights, times, window, spline, prior, ops = stream
    kw = {"buckets": LogitGrid(32), "window": window, "prior": prior, **spline}
    outs = [calls_then_whole(cls, kw, (scores, labels, weights, times, ops)) for cls in (ISplineCalibrator, EngineLoop)]
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=0.0, atol=TOL)
    assert_within_tol(outs[0][1], outs[1][1])


def drifting_stream(n, seed, weights="ones"):
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.0, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    slope = np.where(np.arange(n) < n // 2, 3.0, 0.6)  # far from the score: the prior's strength is 0
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-(slope * z + 1.0)))
    w = np.ones(n) if weights == "ones" else rng.uniform(0.5, 1.5, n)
    return scores, labels, w, np.cumsum(rng.uniform(0.0, 1.0, n))


@pytest.mark.parametrize("weights", ["ones", "uniform"])
@pytest.mark.parametrize(
    "window", [Unbounded(), CountWindow(400), Decay(300.0), TimeWindow(300.0)], ids=["unbounded", "count", "decay", "time"]
)
def test_long_streams_keep_the_banded_solve_and_stay_within_1e9(window, weights):
    scores, labels, w, times = drifting_stream(4000, 5, weights)
    kw = {"buckets": LogitGrid(128), "window": window}
    cal = ISplineCalibrator(**kw)
    new = cal.prequential(scores, labels, weights=w, times=times)
    old = EngineLoop(**kw).prequential(scores, labels, weights=w, times=times)
    assert_within_tol(new, old)
    counts = cal.exact_refits
    # the loop ran, most refits kept the previous active set, and some had to change it
    assert counts["kept"] > 10 * counts["full"]
    assert counts["kept"] > counts["stepped"] + counts["dense"] > 0


def test_the_river_face_runs_the_incremental_refit():
    scores, labels, _, _ = drifting_stream(1500, 8)
    kw = {"buckets": LogitGrid(64), "window": CountWindow(300)}
    river = ISplineCalibrator(**kw)
    got = np.empty(scores.size)
    for i in range(scores.size):
        got[i] = river.predict_proba_one({"s": float(scores[i])})[True]
        river.learn_one({"s": float(scores[i])}, bool(labels[i]))
    proba, _ = EngineLoop(**kw).prequential(scores, labels)
    np.testing.assert_allclose(got, proba, rtol=0.0, atol=TOL)
    assert river.exact_refits["kept"] > 0


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(120), Decay(40.0), Decay(1.5)])
@pytest.mark.parametrize("prior", ["auto", None])
def test_the_river_face_equals_prequential(window, prior):
    # the river face's one-event kernel calls (a label; a refit and prediction) against the array
    # loop over the same events: the same probabilities and LLRs, to the last bit without the
    # score prior, whether the loop or a decay's renormalisation serves. With it, while its
    # strength is above 0, prequential hands the engine 64 events at a time and the river face
    # one, so the loop resumes at other events: within TOL then (as the engine's refit).
    scores, labels, _, _ = drifting_stream(600, 3)
    weights = np.random.default_rng(5).choice([0.0, 0.5, 1.0, 2.5], scores.size)
    kw = {"buckets": LogitGrid(64), "window": window, "prior": prior}
    proba, llr = ISplineCalibrator(**kw).prequential(scores, labels, weights=weights)
    river = ISplineCalibrator(**kw)
    got_p, got_llr = np.empty(scores.size), np.empty(scores.size)
    for i in range(scores.size):
        x = {"s": float(scores[i])}
        got_p[i] = river.predict_proba_one(x)[True]
        got_llr[i] = river.predict_llr_one(x)
        river.learn_one(x, bool(labels[i]), w=float(weights[i]))
    if prior is None:
        np.testing.assert_array_equal(got_p, proba)
        np.testing.assert_array_equal(got_llr, llr)
        assert river.exact_refits["kept"] > 0  # the one-event kernel ran the incremental refit
    else:
        np.testing.assert_allclose(got_p, proba, rtol=0.0, atol=TOL)
        np.testing.assert_allclose(got_llr, llr, rtol=0.0, atol=1e3 * TOL)


# ---------------------------------------------------------------------------------- kernels


def dense_gram(band, cross, p, k1):
    """The I-spline normal equations from the banded B-spline ones (reference: numpy)."""
    h = np.zeros((p, p))
    for j in range(p):
        for d in range(k1):
            if j + d < p:
                h[j, j + d] = h[j + d, j] = band[j, d]
    t = np.tril(np.ones((p, p)))  # A = B T: the I-splines are suffix sums of the B-splines
    return t.T @ h @ t, t.T @ cross[:p]


def random_banded_problem(rng, p, k1, n_points):
    """Normal equations of a random weighted least-squares problem on order-k1 B-splines."""
    interior = np.sort(rng.uniform(0.05, 0.95, p - k1))
    t = np.concatenate([np.zeros(k1), interior, np.ones(k1)])
    x = rng.uniform(0.0, 1.0, n_points)
    w = rng.uniform(0.5, 2.0, n_points)
    y = np.clip(rng.choice([0.0, 1.0], n_points) * 0.5 + 0.5 * x**2 + rng.normal(0, 0.1, n_points), 0, 1)
    basis = np.zeros((n_points, p))
    _k.bspline_dense_clamped(x, t, k1, basis)
    h = basis.T @ (w[:, None] * basis)
    band = np.zeros((p, k1))
    for j in range(p):
        for d in range(k1):
            if j + d < p:
                band[j, d] = h[j, j + d]
    return band, basis.T @ (w * y), float(w.sum())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(5, 20), st.sampled_from([2, 3, 4]), st.booleans())
def test_banded_solve_keeps_only_the_optimum(seed, p, k1, from_optimum):
    rng = np.random.default_rng(seed)
    band, cross, total = random_banded_problem(rng, p, k1, 40 * p)
    gram, rhs = dense_gram(band, cross, p, k1)
    optimum = np.empty(p)
    _k.nnls_sum_capped_gram(gram, rhs, 1.0, optimum)
    # the previous fit: the optimum's free set, or a random one
    coef = optimum.copy() if from_optimum else rng.uniform(0, 0.2, p) * (rng.uniform(size=p) < 0.5)
    before = coef.copy()
    beta = np.zeros(p)
    red, vecs, grp = np.zeros((p, k1)), np.zeros((5, p)), np.zeros((2, p), dtype=np.int64)
    kept = _ks.banded_free_solve(band, cross, p, k1, coef, beta, total, red, vecs, grp)
    if kept:
        np.testing.assert_allclose(coef, optimum, rtol=0.0, atol=1e-9)
        np.testing.assert_array_equal(beta, np.minimum(np.cumsum(coef), 1.0))
    else:
        np.testing.assert_array_equal(coef, before)  # nothing written
    if from_optimum and np.all((optimum == 0.0) | (optimum > 1e-6)):
        assert kept or optimum.sum() > 1.0 - 1e-6  # a clear free set is kept (the cap aside)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(5, 20), st.sampled_from([2, 3, 4]), st.floats(0.0, 1.0))
def test_banded_active_set_steps_reach_only_the_optimum(seed, p, k1, flip):
    # from the optimum's free set with a share of its flags flipped, the steps the incremental
    # refit takes (at most SET_TRIES solves): a kept result is the dense solver's optimum, and
    # a step that is not kept writes nothing
    rng = np.random.default_rng(seed)
    band, cross, total = random_banded_problem(rng, p, k1, 40 * p)
    gram, rhs = dense_gram(band, cross, p, k1)
    optimum = np.empty(p)
    _k.nnls_sum_capped_gram(gram, rhs, 1.0, optimum)
    free = (optimum > 0.0) ^ (rng.uniform(size=p) < flip)
    coef = rng.uniform(0, 0.2, p) * free
    before = coef.copy()
    beta = np.zeros(p)
    red, vecs, grp = np.zeros((p, k1)), np.zeros((5, p)), np.zeros((2, p), dtype=np.int64)
    for _ in range(_ks.SET_TRIES):
        code = _ks.banded_set_solve(band, cross, p, k1, free, coef, beta, total, red, vecs, grp)
        if code != _ks.SOLVE_RETRY:
            break
        np.testing.assert_array_equal(coef, before)
    if code == _ks.SOLVE_KEPT:
        np.testing.assert_allclose(coef, optimum, rtol=0.0, atol=1e-9)
        np.testing.assert_array_equal(beta, np.minimum(np.cumsum(coef), 1.0))
    else:
        np.testing.assert_array_equal(coef, before)


def test_banded_active_set_steps_find_a_changed_free_set():
    # one coefficient freed or fixed at 0 against the optimum's free set: the steps find the optimum
    found = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        p, k1 = 14, 4
        band, cross, total = random_banded_problem(rng, p, k1, 40 * p)
        gram, rhs = dense_gram(band, cross, p, k1)
        optimum = np.empty(p)
        _k.nnls_sum_capped_gram(gram, rhs, 1.0, optimum)
        if not np.all((optimum == 0.0) | (optimum > 1e-6)) or optimum.sum() > 1.0 - 1e-6:
            continue
        free = optimum > 0.0
        free[rng.integers(p)] ^= True
        coef, beta = np.zeros(p), np.zeros(p)
        red, vecs, grp = np.zeros((p, k1)), np.zeros((5, p)), np.zeros((2, p), dtype=np.int64)
        for _ in range(_ks.SET_TRIES):
            code = _ks.banded_set_solve(band, cross, p, k1, free, coef, beta, total, red, vecs, grp)
            if code != _ks.SOLVE_RETRY:
                break
        if code == _ks.SOLVE_KEPT:
            np.testing.assert_allclose(coef, optimum, rtol=0.0, atol=1e-9)
            found += 1
    assert found >= 20


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([None, 4, 12]), st.booleans())
def test_tree_knots_equal_the_exact_quantile_steps(seed, wanted, fractional):
    rng = np.random.default_rng(seed)
    B = 64
    cal = ISplineCalibrator(buckets=LogitGrid(B), n_knots=wanted, prior=None, window=CountWindow(500))
    n = int(rng.integers(20, 900))
    scores = 1 / (1 + np.exp(-rng.normal(-1, 1.5, n)))
    w = rng.uniform(0.5, 1.5, n) if fractional else np.ones(n)
    cal.update(scores, rng.uniform(size=n) < scores, weights=w)
    sf, _ = cal.window_histogram.arrays()
    centres = np.ascontiguousarray(cal.centres, dtype=np.float64)
    tree = np.zeros(B + 1)
    ist = np.zeros(_ks.IS_HEADER, dtype=np.int64)
    _ks._tree_build(tree, sf, B)
    _ks._count_ends(sf, B, 1.0, ist)
    want = -1 if wanted is None else wanted
    got, exact = np.zeros(B + 10), np.zeros(B + 10)
    levels = np.zeros(B, dtype=np.int64), np.zeros(B)
    nk = _ks.tree_knots(tree, sf, B, centres, 3, want, np.empty(0), False, ist, got, *levels)
    nk_exact = _ks.stream_knots(sf, B, centres, 3, want, np.empty(0), False, exact)
    assert nk in (-2, nk_exact)  # -2: a level within rounding of a bucket's edge
    if nk > 0:
        np.testing.assert_array_equal(got[:nk], exact[:nk])
