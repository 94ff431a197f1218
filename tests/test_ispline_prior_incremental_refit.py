"""I-spline's exact default under the score prior: the refit from the augmented normal equations kept per event.

While the prior holds, ``prequential``'s compiled loop serves a refit from the data's banded sums
kept per event plus the floor's (``streamcal._kernels.ispline_prior_incr``) where the knots and the
previous free set stand, else runs the full refit. Checked on every event of generated streams
(the prior holding, switching on and off, every window kind, the knot rules) against the same
calibrator with the full refit before every prediction (``_PRIOR_INCREMENTAL = False``, itself the
engine's refit bit for bit, ``test_ispline_prior_kept.py``) and against the independent naive
reference of ``test_ispline_prior_incremental.py``: within 1e-9. Also: the kept sums serve most
refits of a calibrated stream, and a copy (whose cache starts empty) continues within 1e-12.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_capped_nnls

from streamcal import ISplineCalibrator
from streamcal._kernels import _config
from streamcal._kernels import histogram as _hk
from streamcal._kernels import ispline as _kis
from streamcal._kernels import ispline_prior_incr as _kipi
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Decay, Unbounded

TOL = 1e-9


def naive_free_set_solve(gram, rhs, free, cap, capped):
    """The subproblem of ``min 1/2 x' G x - b' x``, ``x >= 0``, ``sum(x) <= cap`` on the free set
    ``free`` solved densely: ``x`` 0 outside ``free`` (and ``sum(x) = cap`` where ``capped``), with
    its certificate's smallest margin (positive: the optimum): the free coefficients over ``cap``,
    the sum's room ``(cap - sum(x)) / cap`` (not ``capped``), the cap's multiplier and the bounds'
    over the scale ``max_i max(G[i, i], |b[i]|)``. ``None`` where the subproblem's matrix is
    ill-conditioned (condition number above 1e6)."""
    idx = np.flatnonzero(free)
    if idx.size == 0:
        return None, 0.0
    sub = gram[np.ix_(idx, idx)]
    if np.linalg.cond(sub) > 1e6:
        return None, 0.0
    x = np.zeros(gram.shape[0])
    mu = 0.0
    margins = []
    if capped:
        ones = np.ones((idx.size, 1))
        kkt = np.block([[sub, ones], [ones.T, np.zeros((1, 1))]])
        sol = np.linalg.solve(kkt, np.append(rhs[idx], cap))
        x[idx], mu = sol[:-1], sol[-1]
    else:
        x[idx] = np.linalg.solve(sub, rhs[idx])
        margins.append((cap - x.sum()) / cap)
    scale = max(max(gram[i, i], abs(rhs[i])) for i in range(gram.shape[0])) or 1.0
    grad = gram @ x - rhs
    margins.append(x[idx].min() / cap)
    if capped:
        margins.append(mu / scale)
    bounds = np.delete(grad, idx) + mu
    if bounds.size:
        margins.append(bounds.min() / scale)
    return x, min(margins)


class Counted(ISplineCalibrator):
    """The default, with its kept sums' counts and its free set read out."""

    def served(self):
        """Refits served from the kept sums, and the sums' builds, in the cache."""
        ik = self._prior_grid[3][0]
        return int(ik[_kipi.IK_SERVED]), int(ik[_kipi.IK_BUILT])

    def free_set(self):
        return self._knots.size, tuple(np.flatnonzero(self._coef > 0.0))


class FullRefit(Counted):
    """The compiled loop's full refit before every prediction (the engine's bits)."""

    _PRIOR_INCREMENTAL = False


def calibrated(n, seed, shift=0.0, switch=None, base=-2.8):
    """Logistic scores; labels at the score's log-odds plus ``shift`` from event ``switch`` on (from
    the start where ``switch`` is None)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(base, 1.4, n)
    offset = np.zeros(n)
    offset[(0 if switch is None else switch) :] = shift
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(z + offset)))


@settings(max_examples=20, deadline=None)
@given(
    st.integers(100, 900),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.0, 0.0, 0.0, 0.5, 2.0, -1.5]),
    st.floats(0.0, 1.0),
    st.sampled_from([Unbounded(), Unbounded(), CountWindow(200), Decay(150.0)]),
    st.sampled_from([{}, {}, {"n_knots": 3}, {"knots": (0.03, 0.1)}]),
    st.sampled_from([32, 64, 256]),
)
def test_every_prediction_is_the_full_refits_within_1e9(n, seed, shift, at, window, spline, n_buckets):
    scores, labels = calibrated(n, seed, shift, switch=int(at * n))
    kw = {"buckets": LogitGrid(n_buckets), "window": window, **spline}
    cal = ISplineCalibrator(**kw)
    proba, llr = cal.prequential(scores, labels)
    ref_p, ref_llr = FullRefit(**kw).prequential(scores, labels)
    np.testing.assert_allclose(proba, ref_p, rtol=0.0, atol=TOL)
    np.testing.assert_allclose(llr, ref_llr, rtol=TOL, atol=TOL)
    # one event a call: the loop's state carried between calls
    cal, ref = ISplineCalibrator(**kw), FullRefit(**kw)
    for i in range(0, n, 37):
        p, q = cal.prequential(scores[i : i + 37], labels[i : i + 37])[0], ref.prequential(scores[i : i + 37], labels[i : i + 37])[0]
        np.testing.assert_allclose(p, q, rtol=0.0, atol=TOL)


def test_the_kept_sums_serve_most_refits_of_a_calibrated_stream_within_1e9():
    scores, labels = calibrated(6000, 5)
    kw = {"buckets": LogitGrid(1024)}
    warm = Counted(refit_every=50, **kw)
    warm.prequential(scores[:3000], labels[:3000])
    warm.refit_every = None
    ref = copy.deepcopy(warm)
    ref.__class__ = FullRefit
    free_sets = set()
    for i in range(3000, 6000, 100):  # chunks: the free set at each chunk's end
        p, q = warm.prequential(scores[i : i + 100], labels[i : i + 100]), ref.prequential(scores[i : i + 100], labels[i : i + 100])
        np.testing.assert_allclose(p[0], q[0], rtol=0.0, atol=TOL)
        np.testing.assert_allclose(p[1], q[1], rtol=TOL, atol=TOL)
        free_sets.add(warm.free_set())
    assert warm.prior_strength > 100.0  # the prior holds to the end
    n_served, n_built = warm.served()
    assert n_served > 2000  # of 3,000 refits
    assert n_built < 1000
    assert len(free_sets) > 1  # the active set changes along the stream


def test_a_copy_continues_within_1e12():
    scores, labels = calibrated(3000, 9)
    cal = Counted(buckets=LogitGrid(256))
    cal.prequential(scores[:1500], labels[:1500])
    twin = copy.deepcopy(cal)  # its cache starts empty: the full refit first, then its own sums
    a = cal.prequential(scores[1500:], labels[1500:])
    b = twin.prequential(scores[1500:], labels[1500:])
    assert twin.served()[0] > 0
    np.testing.assert_allclose(a[0], b[0], rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12, atol=1e-12)


def _sums(cal, knots, basis):
    """``incr_rebuild``'s kept sums of ``cal``'s row for ``knots`` (strength 50), on the cache ``basis``."""
    sf = cal.window_histogram.live_arrays()[0]
    centres = np.ascontiguousarray(cal.histogram()[0])
    B, order = centres.size, 3
    P = B + 2 * (order + 1)
    ik, gw, gt = np.zeros(_kipi.IK_SIZE + P), np.zeros((P, order + 1)), np.zeros((P, order + 1))
    hv, lev, snap = np.zeros((3, P)), np.zeros((5, B)), np.zeros(2 * B)
    _config.run(
        _kipi.incr_rebuild, 0, sf, _hk.SF_HEADER, B, cal.window_histogram.stored_unit(), 50.0, centres, knots, order,
        knots.size - 8, False, max(1, B // 64), basis, ik, gw, gt, hv, lev, snap,
    )  # fmt: skip
    return centres, ik, gw, gt, hv, snap


@pytest.mark.parametrize(
    "moves", [((4, 1),), ((5, -1),), ((7, 3),), ((9, -2),), ((6, 1), (8, -1)), ((10, 1),), ((8, 5), (4, -3))]
)
def test_moving_knots_rebases_the_kept_sums_as_a_rebuild_does(moves):
    """``_rebase`` (the buckets whose B-splines change, the cache's stamp kept) against the sums and
    basis rows built anew for the moved knots: the rows bit for bit, the sums within rounding."""
    scores, labels = calibrated(3000, 4)
    cal = ISplineCalibrator(buckets=LogitGrid(256), refit_every=10**9)
    cal.update(scores, labels)
    centres = np.ascontiguousarray(cal.histogram()[0])
    pos, neg = cal.histogram()[1:]
    fitted = np.flatnonzero(pos + neg > 0)
    lower, upper = centres[fitted[0]], centres[fitted[-1]]
    inner = centres[fitted[np.linspace(0, fitted.size - 1, 9)[1:-1].astype(int)]]
    old = np.concatenate(([lower] * 4, inner, [upper] * 4))
    new = old.copy()
    for i, by in moves:
        new[i] = centres[np.searchsorted(centres, old[i]) + by]
    basis = np.full((centres.size + 1, 6), -1.0)
    basis[0, 0] = 0.0
    lo, hi = _config.run(_kis.clamped_span_bounds, 0, old, 4)
    vals, lft, rgt = np.empty(4), np.empty(4), np.empty(4)
    for j in range(fitted[0], fitted[-1] + 1):  # every row current for the old knots, the empty buckets' too
        _config.run(_kipi._basis_row, 0, j, centres, old, 4, lo, hi, basis, vals, lft, rgt)
    _, ik, gw, gt, hv, snap = _sums(cal, old, basis)
    scratch = np.empty(4), np.empty(4), np.empty(4), np.empty(4)
    _config.run(
        _kipi._rebase, 0, old, new, 4, centres.size, max(1, centres.size // 64), centres, basis, ik, gw, gt, hv, snap,
        *scratch,
    )  # fmt: skip
    fresh = np.full_like(basis, -1.0)
    fresh[0, 0] = 0.0
    _, _, gw_new, gt_new, hv_new, _ = _sums(cal, new, fresh)
    for got, want in ((gw, gw_new), (gt, gt_new), (hv, hv_new)):
        np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-12 * np.abs(want).max())
    current = basis[1:, 0] == basis[0, 0]
    rows = np.flatnonzero(current & (centres >= lower) & (centres <= upper))
    assert np.isin(fitted, rows).all()  # every fitted bucket's row current
    for j in rows:  # each current row is the new knots' (computed anew where the fresh cache holds none)
        want = fresh[j + 1, 1:] if fresh[j + 1, 0] == fresh[0, 0] else _row(centres[j], new)
        assert tuple(basis[j + 1, 1:]) == tuple(want), j
    assert tuple(ik[_kipi.IK_SIZE : _kipi.IK_SIZE + new.size]) == tuple(new)


def _row(x, knots):
    """The cache's row (first index, four B-splines) at ``x`` for ``knots``, as ``_basis_row`` forms it."""
    scratch = np.zeros(6)
    scratch[0] = -1.0
    basis = np.vstack((np.zeros(6), scratch))
    lo, hi = _config.run(_kis.clamped_span_bounds, 0, knots, 4)
    vals, lft, rgt = np.empty(4), np.empty(4), np.empty(4)
    _config.run(_kipi._basis_row, 0, 0, np.array([x]), knots, 4, lo, hi, basis, vals, lft, rgt)
    return basis[1, 1:]


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 24), st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 3]), st.floats(0.0, 1.0),
    st.sampled_from([None, 0.5, 1.5]),
)  # fmt: skip
def test_the_scratch_solve_is_the_dense_free_set_solve(p, seed, order, density, fitted_sum):
    """``ispline.free_set_runs_solve`` on ``solve_scratch`` with ``_gram_scale`` (capped, and not)
    against ``naive_free_set_solve`` on the dense Gram of ``_gram_from_band`` (the scale within
    rounding of that Gram's): the same verdict
    where the naive certificate's margins are clear of rounding, ``x`` within 1e-9 where it
    certifies, and for a few coefficients the brute-force optimum (right-hand sides at random, or
    fitted by coefficients positive on the free set, of sum ``fitted_sum``: the solves certify
    then)."""
    rng = np.random.default_rng(seed)
    k1 = order + 1
    rows = rng.uniform(size=(3 * p + 3, p))
    for j in range(rows.shape[0]):  # banded rows: a basis of order k1
        start = rng.integers(0, p)
        rows[j, :start] = 0.0
        rows[j, start + k1 :] = 0.0
    dense = rows.T @ (rows * rng.uniform(0.1, 2.0, size=(rows.shape[0], 1)))
    band = np.zeros((p, k1))
    for i in range(p):
        for d in range(min(k1, p - i)):
            band[i, d] = dense[i, i + d]
    cross = rows.T @ rng.uniform(size=rows.shape[0]) * rng.uniform(0.2, 3.0)
    free = rng.uniform(size=p) < density
    if fitted_sum is not None and free.any():
        x_true = np.where(free, rng.uniform(0.5, 1.0, size=p), 0.0)
        cross = dense @ np.cumsum(x_true * fitted_sum / x_true.sum())
    full = np.zeros((p, p))
    for i in range(p):
        for d in range(min(k1, p - i)):
            full[i, i + d] = band[i, d]
    gram, rhs = np.empty((p, p)), np.empty(p)
    _config.run(_kis._gram_from_band, 0, full, cross, gram, rhs)
    run, red, rc, v, g = _config.run(_kipi.solve_scratch, 0, p + 3, order)[:5]
    scale = _config.run(_kipi._gram_scale, 0, band, cross, p, k1)
    want_scale = max(max(gram[i, i], abs(rhs[i])) for i in range(p))
    assert scale == pytest.approx(want_scale if want_scale > 0.0 else 1.0, rel=1e-13)  # the same sums grouped otherwise
    for capped in (True, False):
        x = np.full(p, np.nan)
        args = (band, cross, p, order, free, 1.0, capped, scale, x, run, red, rc, v, g)
        ok = _config.run(_kis.free_set_runs_solve, 0, *args)
        if not capped:  # the allocating wrapper: the same verdict and bits
            y = np.full(p, np.nan)
            assert _config.run(_kis.free_set_band_solve, 0, band, cross, gram, rhs, p, order, free, 1.0, y) == ok
            if ok:
                assert tuple(y) == tuple(x)
        want, margin = naive_free_set_solve(gram, rhs, free, 1.0, capped)
        if want is None:
            continue
        if abs(margin) > 1e-7:
            assert ok == (margin > 0.0)
        if ok:
            np.testing.assert_allclose(x, want, rtol=0.0, atol=1e-9)
            if p <= 8:
                best = naive_capped_nnls(gram, rhs, 1.0)[0]
                np.testing.assert_allclose(x, best, rtol=0.0, atol=1e-8)
