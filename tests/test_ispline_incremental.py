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
    "window",
    [Unbounded(), CountWindow(400), Decay(300.0), TimeWindow(300.0)],
    ids=["unbounded", "count", "decay", "time"],
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
    # most kept solves ran on the factors updated per event, not factored anew
    assert counts["updated"] > counts["kept"] // 2


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


def bucket_rows(x, t, k1, p):
    """Each point's ``k1`` B-splines from the first of its window, and that first index."""
    basis = np.zeros((x.size, p))
    _k.bspline_dense_clamped(x, t, k1, basis)
    base = np.zeros((2, x.size), dtype=np.int64)
    rows = np.zeros((x.size, k1))
    for b in range(x.size):
        j0 = min(int(np.flatnonzero(basis[b])[0]), p - k1)
        base[0, b] = j0
        rows[b] = basis[b, j0 : j0 + k1]
    return rows, base


def add_bucket_term(band, cross, rows, base, b, dp, dw, k1):
    """The band's change for a bucket's change, as the loop makes it (reference: plain loops)."""
    j0 = base[0, b]
    for r in range(k1):
        cross[j0 + r] += dp * rows[b, r]
        for q in range(r, k1):
            band[j0 + r, q - r] += dw * rows[b, r] * rows[b, q]


def held_state(p, k1):
    red, vecs = np.zeros((p, k1)), np.zeros((6, p))
    grp, held = np.zeros((3, p), dtype=np.int64), np.zeros((p, k1 + _ks.H_COLUMNS))
    return red, vecs, grp, held, np.zeros(_ks.IS_HEADER, dtype=np.int64)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(6, 24), st.sampled_from([2, 3, 4]), st.integers(1, 40))
def test_held_factors_updated_per_bucket_equal_a_fresh_factorisation(seed, p, k1, events):
    # buckets' weights added and taken out one at a time: the factors of the runs' system
    # updated in place (rank one per bucket) give the runs' values and the result of the solve
    # factored anew from the changed band, and the same acceptance
    rng = np.random.default_rng(seed)
    interior = np.sort(rng.uniform(0.05, 0.95, p - k1))
    t = np.concatenate([np.zeros(k1), interior, np.ones(k1)])
    x = np.sort(rng.uniform(0.0, 1.0, 30 * p))
    rows, base = bucket_rows(x, t, k1, p)
    pos = rng.uniform(0.0, 3.0, x.size)
    neg = rng.uniform(0.5, 3.0, x.size)
    band, cross = np.zeros((p, k1)), np.zeros(p)
    for b in range(x.size):
        add_bucket_term(band, cross, rows, base, b, pos[b], pos[b] + neg[b], k1)
    total = float(pos.sum() + neg.sum())
    free = rng.uniform(size=p) < 0.6
    free[rng.integers(p)] = True
    coef, beta = np.zeros(p), np.zeros(p)
    red, vecs, grp, held, ist = held_state(p, k1)
    _ks.held_set_solve(band, cross, p, k1, free.copy(), coef, beta, total, red, vecs, grp, held, ist)
    m = int(free.sum())
    ist[_ks.IS_HELD] = m  # whatever the check said: the factors are held for this free set
    for _ in range(events):
        b = int(rng.integers(x.size))
        dp = rng.uniform(-pos[b], 2.0)  # a bucket's weight may leave, never below 0
        dn = rng.uniform(-neg[b] * 0.9, 2.0)
        pos[b] += dp
        neg[b] += dn
        add_bucket_term(band, cross, rows, base, b, dp, dp + dn, k1)
        if ist[_ks.IS_HELD] > 0:
            _ks._held_add(b, dp, dp + dn, rows, base, grp, held, ist, k1)
    assert ist[_ks.IS_HELD] == m  # no pivot near 0 here: every update kept
    got = [np.zeros(p), np.zeros(p)]
    ref = [np.zeros(p), np.zeros(p)]
    code = _ks.held_set_solve(band, cross, p, k1, free.copy(), *got, total, red, vecs, grp, held, ist)
    v_got = vecs[1, :m].copy()
    r_red, r_vecs, r_grp, r_held, r_ist = held_state(p, k1)
    ref_code = _ks.held_set_solve(band, cross, p, k1, free.copy(), *ref, total, r_red, r_vecs, r_grp, r_held, r_ist)
    np.testing.assert_allclose(v_got, r_vecs[1, :m], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(held[:m, :k1], r_held[:m, :k1], rtol=1e-9, atol=1e-9 * np.abs(r_held[:m, 0]).max())
    assert code == ref_code
    np.testing.assert_allclose(got[0], ref[0], rtol=0.0, atol=1e-12)


def test_held_factors_are_dropped_where_an_update_would_make_a_pivot_vanish():
    # linear B-splines at their knots: each bucket carries one basis function alone, so taking
    # one bucket's whole weight out makes the runs' system singular: the update is rejected, the
    # factors dropped, and the next solve factors the band anew (and fails as that solve does)
    p, k1 = 6, 2
    t = np.concatenate([np.zeros(k1), np.linspace(0.0, 1.0, p - k1 + 2)[1:-1], np.ones(k1)])
    x = t[k1 - 1 : p + 1].copy()  # the knots themselves: one B-spline at 1, the others 0
    rows, base = bucket_rows(x, t, k1, p)
    assert np.all(np.sort(rows, axis=1)[:, -1] == 1.0)
    assert np.all(np.sort(rows, axis=1)[:, 0] == 0.0)
    pos, neg = np.full(p, 2.0), np.full(p, 3.0)
    band, cross = np.zeros((p, k1)), np.zeros(p)
    for b in range(p):
        add_bucket_term(band, cross, rows, base, b, pos[b], pos[b] + neg[b], k1)
    free = np.ones(p, dtype=bool)
    red, vecs, grp, held, ist = held_state(p, k1)
    coef, beta = np.zeros(p), np.zeros(p)
    _ks.held_set_solve(band, cross, p, k1, free.copy(), coef, beta, 30.0, red, vecs, grp, held, ist)
    ist[_ks.IS_HELD] = p
    _ks._held_add(1, 0.5, 1.0, rows, base, grp, held, ist, k1)  # an update that keeps the pivots
    assert ist[_ks.IS_HELD] == p
    add_bucket_term(band, cross, rows, base, 1, 0.5, 1.0, k1)
    _ks._held_add(3, -pos[3], -pos[3] - neg[3], rows, base, grp, held, ist, k1)  # bucket 3 emptied
    assert ist[_ks.IS_HELD] == 0
    add_bucket_term(band, cross, rows, base, 3, -pos[3], -pos[3] - neg[3], k1)
    got, ref = (np.zeros(p), np.zeros(p)), (np.zeros(p), np.zeros(p))
    code = _ks.held_set_solve(band, cross, p, k1, free.copy(), *got, 30.0, red, vecs, grp, held, ist)
    ref_code = _ks.banded_set_solve(
        band, cross, p, k1, free.copy(), *ref, 30.0, *held_state(p, k1)[:2], np.zeros((2, p), dtype=np.int64)
    )
    assert code == ref_code == _ks.SOLVE_FAIL
    np.testing.assert_array_equal(got[0], 0.0)  # nothing written


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
