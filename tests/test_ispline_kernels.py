"""Kernels of I-spline smoothing: B/M/I-spline bases and the capped NNLS active-set solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_bspline, naive_capped_nnls, naive_ispline, naive_mspline
from scipy.integrate import quad
from scipy.interpolate import BSpline

from streamcal._kernels.ispline import (
    bspline_combination_clamped,
    bspline_dense_clamped,
    ispline_gram_clamped,
    nnls_sum_capped_gram,
    nnls_sum_capped_gram_warm,
)
from streamcal.spline.basis import ispline_basis, knot_vector, mspline_basis


def _random_knots(rng, n_interior, order):
    inner = np.sort(rng.uniform(0.05, 0.95, size=n_interior))
    inner = np.unique(inner.round(4))
    return knot_vector(inner, 0.0, 1.0, order)


# ----------------------------------------------------------------------------- bases


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_bspline_kernel_matches_scipy_and_naive(order, rng):
    t = _random_knots(rng, 4, order)
    x = np.concatenate([rng.uniform(0, 1, 40), t])
    k1 = order + 1
    out = np.empty((x.size, t.size - k1))
    bspline_dense_clamped(x, t, k1, out)
    ref = BSpline.design_matrix(x, t, k1 - 1).toarray()
    np.testing.assert_allclose(out, ref, atol=1e-13)
    naive = np.array([[naive_bspline(t, i, k1, xv) for i in range(t.size - k1)] for xv in x[:12]])
    np.testing.assert_allclose(out[:12], naive, atol=1e-13)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_isplines_are_integrals_of_msplines(order, rng):
    t = _random_knots(rng, 3, order)
    x = np.concatenate([[0.0, 1.0], rng.uniform(0, 1, 8)])
    isp = ispline_basis(x, t, order)
    q = isp.shape[1]
    naive = np.array([[naive_ispline(t, i, order, xv) for i in range(1, q + 1)] for xv in x])
    np.testing.assert_allclose(isp, naive, atol=1e-9)
    msp = mspline_basis(x, t, order)
    naive_m = np.array([[naive_mspline(t, i, order, xv) for i in range(1, q + 1)] for xv in x[2:]])
    np.testing.assert_allclose(msp[2:], naive_m, atol=1e-12)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_msplines_integrate_to_one_and_are_nonnegative(order, rng):
    t = _random_knots(rng, 5, order)
    q = t.size - order - 2
    inner = list(np.unique(t[1:-1]))
    for i in range(q):
        f = lambda s, i=i: mspline_basis([s], t, order)[0, i]  # noqa: E731
        total, _ = quad(f, 0.0, 1.0, points=inner, epsabs=1e-13, limit=200)
        assert total == pytest.approx(1.0, abs=1e-10)
    grid = np.linspace(-0.2, 1.2, 400)
    assert (mspline_basis(grid, t, order) >= 0.0).all()


@given(
    seed=st.integers(0, 2**32 - 1),
    order=st.integers(1, 4),
    n_interior=st.integers(0, 8),
)
def test_isplines_monotone_from_zero_to_one(seed, order, n_interior):
    rng = np.random.default_rng(seed)
    t = _random_knots(rng, n_interior, order)
    grid = np.concatenate([[-1.0, 0.0], np.sort(rng.uniform(0, 1, 200)), [1.0, 2.0]])
    isp = ispline_basis(grid, t, order)
    assert (np.diff(isp, axis=0) >= -1e-15).all()
    np.testing.assert_array_equal(isp[:2], 0.0)
    np.testing.assert_allclose(isp[-2:], 1.0, atol=1e-14)
    assert (isp >= -1e-15).all()
    assert (isp <= 1.0 + 1e-14).all()


@pytest.mark.parametrize("order", [1, 3])
def test_gram_kernel_matches_dense_design(order, rng):
    t = _random_knots(rng, 4, order)
    x = rng.uniform(-0.1, 1.1, 300)
    w = rng.uniform(0, 2, 300)
    y = rng.uniform(0, 1, 300)
    p = t.size - order - 1
    gram, rhs = np.empty((p, p)), np.empty(p)
    yy = ispline_gram_clamped(x, w, y, t, order, gram, rhs)
    design = np.column_stack([np.ones(x.size), ispline_basis(x, t, order)])
    np.testing.assert_allclose(gram, design.T @ (w[:, None] * design), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(rhs, design.T @ (w * y), rtol=1e-11, atol=1e-11)
    assert yy == pytest.approx(float(w @ y**2))


def test_combination_kernel_is_cumulative_alpha_on_bsplines(rng):
    order = 3
    t = _random_knots(rng, 3, order)
    alpha = rng.dirichlet(np.ones(t.size - order - 1)) * 0.9
    x = rng.uniform(-0.5, 1.5, 100)
    out = np.empty(x.size)
    bspline_combination_clamped(x, t, order + 1, np.cumsum(alpha), out)
    design = np.column_stack([np.ones(x.size), ispline_basis(x, t, order)])
    np.testing.assert_allclose(out, design @ alpha, atol=1e-14)


# ----------------------------------------------------------------------------- the solver


def _random_problem(rng, p, n, rank=None):
    a = rng.normal(size=(n, p))
    if rank is not None:
        a = a[:, :rank] @ rng.normal(size=(rank, p))
    y = rng.normal(size=n) * rng.uniform(0.1, 3)
    return a.T @ a, a.T @ y


@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 6), cap=st.sampled_from([0.1, 1.0, 5.0]))
def test_capped_nnls_matches_brute_force_enumeration(seed, p, cap):
    rng = np.random.default_rng(seed)
    gram, rhs = _random_problem(rng, p, p + 3)
    x = np.empty(p)
    assert nnls_sum_capped_gram(gram, rhs, cap, x) >= 0
    ref, _ref_val = naive_capped_nnls(gram, rhs, cap)
    np.testing.assert_allclose(x, ref, atol=1e-8)
    assert (x >= 0.0).all()
    assert math.fsum(x) <= cap
    assert x.sum() <= cap


@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 6), cap=st.sampled_from([0.1, 1.0, 5.0]))
def test_warm_started_capped_nnls_matches_brute_force_from_any_guess(seed, p, cap):
    rng = np.random.default_rng(seed)
    gram, rhs = _random_problem(rng, p, p + 3)
    ref, _ = naive_capped_nnls(gram, rhs, cap)
    guess = rng.random(p) < 0.5
    x = np.empty(p)
    assert nnls_sum_capped_gram_warm(gram, rhs, cap, x, guess) >= 0
    np.testing.assert_allclose(x, ref, atol=1e-8)
    np.testing.assert_array_equal(guess, x > 0.0)  # the final free set comes back
    # restarting from the optimum's own free set takes a single solve
    again = np.empty(p)
    assert nnls_sum_capped_gram_warm(gram, rhs, cap, again, guess.copy()) <= 2
    np.testing.assert_allclose(again, ref, atol=1e-8)


@given(seed=st.integers(0, 2**32 - 1), p=st.integers(2, 6))
def test_capped_nnls_rank_deficient_reaches_the_optimal_value(seed, p):
    rng = np.random.default_rng(seed)
    gram, rhs = _random_problem(rng, p, p + 3, rank=1 + seed % (p - 1))
    x = np.empty(p)
    assert nnls_sum_capped_gram(gram, rhs, 1.0, x) >= 0
    _, ref_val = naive_capped_nnls(gram, rhs, 1.0)
    value = 0.5 * x @ gram @ x - rhs @ x
    assert value <= ref_val + 1e-9 * max(1.0, abs(ref_val))
    assert (x >= 0.0).all()
    assert math.fsum(x) <= 1.0


def test_capped_nnls_zero_problem():
    x = np.full(3, 7.0)
    nnls_sum_capped_gram(np.zeros((3, 3)), np.zeros(3), 1.0, x)
    np.testing.assert_array_equal(x, 0.0)
