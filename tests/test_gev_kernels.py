"""GEV family kernels against scipy, quadrature and the reference values of docs/design.md §3."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_gev_canonical_loss, naive_upper_gamma
from scipy import optimize, special, stats

from streamcal._kernels import gev as K
from streamcal.gev import (
    gev_canonical_loss,
    gev_cdf,
    gev_clip,
    gev_link,
    gev_log_loss,
    gev_pdf,
    gev_support,
    upper_incomplete_gamma,
)

XIS = [-1.5, -1.0, -0.5, -0.25, -1e-9, 0.0, 1e-9, 0.25, 0.5, 0.9, 1.0, 1.5]


def inside_points(xi, n=9):
    """Scores spread over R_xi, away from its end point."""
    eta = np.linspace(0.002, 0.995, n)
    return np.array([K.gev_link(e, xi) for e in eta])


# ---------------------------------------------------------------------------------------------
# reference values (docs/design.md §3)


@pytest.mark.parametrize(
    ("xi", "v", "expected"),
    [
        (-0.5, -1.0, (0.105399, 0.158099, 0.060077, 1.287623)),
        (0.0, 0.0, (0.367879, 0.367879, 0.219384, 0.796600)),
        (0.5, 1.0, (0.641180, 0.189979, 0.697788, 1.242696)),
    ],
)
def test_design_reference_values(xi, v, expected):
    got = (K.gev_cdf(v, xi), K.gev_pdf(v, xi), K.gev_canonical_loss0(v, xi),
           K.gev_canonical_loss1(v, xi))
    np.testing.assert_allclose(got, expected, atol=5e-7)


# ---------------------------------------------------------------------------------------------
# distribution and link against scipy.stats.genextreme (shape c = -xi)


@pytest.mark.parametrize("xi", XIS)
def test_cdf_pdf_match_scipy_genextreme(xi):
    v = inside_points(xi, 25)
    dist = stats.genextreme(c=-xi)
    np.testing.assert_allclose(gev_cdf(v, xi), dist.cdf(v), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(gev_pdf(v, xi), dist.pdf(v), rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("xi", XIS)
def test_link_inverts_cdf_and_matches_scipy_ppf(xi):
    eta = np.linspace(0.001, 0.999, 31)
    v = gev_link(eta, xi)
    np.testing.assert_allclose(gev_cdf(v, xi), eta, rtol=1e-12)
    np.testing.assert_allclose(v, stats.genextreme(c=-xi).ppf(eta), rtol=1e-9, atol=1e-10)


def test_support_and_clipping():
    assert gev_support(0.5) == (-2.0, np.inf)
    assert gev_support(-0.25) == (-np.inf, 4.0)
    assert gev_support(0.0) == (-np.inf, np.inf)
    np.testing.assert_array_equal(gev_clip([-5.0, 0.0, 7.0], 0.5), [-2.0, 0.0, 7.0])
    np.testing.assert_array_equal(gev_clip([-5.0, 0.0, 7.0], -0.25), [-5.0, 0.0, 4.0])
    # the extension outside the support: F = 0 below a lower end, 1 above an upper end
    assert gev_cdf(-3.0, 0.5) == 0.0
    assert gev_pdf(-3.0, 0.5) == 0.0
    assert gev_cdf(5.0, -0.25) == 1.0
    assert gev_pdf(5.0, -0.25) == 0.0
    assert gev_link(0.0, 0.5) == -2.0
    assert gev_link(1.0, -0.25) == 4.0
    assert gev_link(0.0, 0.0) == -np.inf
    assert gev_link(1.0, 0.0) == np.inf


@pytest.mark.parametrize("v", [-4.0, -1.0, 0.0, 0.7, 3.0, 20.0])
def test_continuous_across_xi_zero(v):
    at_zero = np.array([K.gev_cdf(v, 0.0), K.gev_pdf(v, 0.0), K.gev_canonical_loss0(v, 0.0),
                        K.gev_canonical_loss1(v, 0.0), K.gev_link(0.3, 0.0)])
    for xi in (-1e-12, 1e-12, -1e-15, 1e-15):
        near = np.array([K.gev_cdf(v, xi), K.gev_pdf(v, xi), K.gev_canonical_loss0(v, xi),
                         K.gev_canonical_loss1(v, xi), K.gev_link(0.3, xi)])
        np.testing.assert_allclose(near, at_zero, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# incomplete gamma for any real a


@pytest.mark.parametrize("a", [0.3, 0.5, 0.7, 1.0, 2.5, 6.0])
def test_upper_gamma_matches_scipy_for_positive_a(a):
    x = np.array([1e-8, 0.01, 0.5, 1.0, 1.49, 1.51, 3.0, 10.0, 60.0])
    np.testing.assert_allclose(upper_incomplete_gamma(a, x),
                               special.gammaincc(a, x) * special.gamma(a), rtol=1e-13)


def test_upper_gamma_at_zero_is_e1():
    x = np.array([1e-10, 1e-3, 0.3, 1.0, 1.5, 4.0, 30.0, 700.0])
    np.testing.assert_allclose(upper_incomplete_gamma(0.0, x), special.exp1(x), rtol=1e-13)
    assert K.exp1(2.0) == pytest.approx(special.exp1(2.0), rel=1e-14)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_upper_gamma_at_negative_integers_matches_expn(n):
    # Gamma(1 - n, x) = x^(1 - n) E_n(x)
    x = np.array([1e-6, 0.01, 0.4, 1.0, 1.6, 5.0, 40.0])
    np.testing.assert_allclose(upper_incomplete_gamma(1.0 - n, x),
                               x ** (1.0 - n) * special.expn(n, x), rtol=1e-12)


@pytest.mark.parametrize("a", [-1e-9, -0.3, -0.5, -0.75, -1.5, -2.2, -3.7])
@pytest.mark.parametrize("x", [1e-8, 1e-3, 0.2, 1.0, 1.49, 1.51, 3.0, 25.0])
def test_upper_gamma_matches_quadrature_for_negative_a(a, x):
    assert K.upper_gamma(a, x) == pytest.approx(naive_upper_gamma(a, x), rel=1e-11)


@given(a=st.floats(-3.0, 3.0), x=st.floats(1e-6, 50.0))
def test_upper_gamma_recursion_holds(a, x):
    # Gamma(a + 1, x) = a Gamma(a, x) + x^a e^-x
    lhs = K.upper_gamma(a + 1.0, x)
    rhs = a * K.upper_gamma(a, x) + math.exp(a * math.log(x) - x)
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-300)


# ---------------------------------------------------------------------------------------------
# GEV-canonical loss


@pytest.mark.parametrize("xi", [-1.0, -0.5, -1e-9, 0.0, 0.25, 0.5, 0.9, 1.0, 1.5])
def test_canonical_loss_matches_quadrature(xi):
    for v in inside_points(xi, 7):
        for y in (0, 1):
            got = gev_canonical_loss([y], [v], xi)[0]
            assert got == pytest.approx(naive_gev_canonical_loss(y, v, xi), rel=1e-9, abs=1e-11)


@pytest.mark.parametrize("xi", XIS)
def test_canonical_loss_derivative_is_f_minus_y(xi):
    v = inside_points(xi, 15)
    h = 1e-5
    for y in (0.0, 1.0):
        labels = np.full(v.size, y)
        up = gev_canonical_loss(labels, v + h, xi)
        slope = (up - gev_canonical_loss(labels, v - h, xi)) / (2 * h)
        np.testing.assert_allclose(slope, gev_cdf(v, xi) - y, atol=2e-6)


@given(xi=st.floats(-1.5, 1.5), eta=st.floats(0.01, 0.99), y=st.sampled_from([0.0, 1.0]))
def test_canonical_loss_derivative_property(xi, eta, y):
    v = K.gev_link(eta, xi)
    h = 1e-6 * max(1.0, abs(v))
    loss = K.gev_canonical_loss1 if y == 1.0 else K.gev_canonical_loss0
    slope = (loss(v + h, xi) - loss(v - h, xi)) / (2 * h)
    assert slope == pytest.approx(K.gev_cdf(v, xi) - y, abs=1e-5)


@pytest.mark.parametrize("xi", XIS)
def test_canonical_loss_convex_on_and_beyond_support(xi):
    lo, hi = gev_support(xi)
    a = max(lo, K.gev_link(1e-6, xi)) - 1.0
    b = min(hi, K.gev_link(1 - 1e-6, xi)) + 1.0
    v = np.linspace(a, b, 801)
    for y in (0.0, 1.0):
        loss = gev_canonical_loss(np.full(v.size, y), v, xi)
        assert np.all(np.isfinite(loss))
        second = loss[2:] - 2 * loss[1:-1] + loss[:-2]
        assert second.min() >= -1e-9 * max(1.0, np.abs(loss).max())


@pytest.mark.parametrize("xi", [-1.0, -0.5, 0.0, 0.3, 0.8, 1.2])
@pytest.mark.parametrize("eta", [0.005, 0.05, 0.3, 0.7])
def test_canonical_loss_is_proper(xi, eta):
    def risk(v):
        return eta * K.gev_canonical_loss1(v, xi) + (1 - eta) * K.gev_canonical_loss0(v, xi)

    target = K.gev_link(eta, xi)
    res = optimize.minimize_scalar(risk, bracket=(target - 0.5, target + 0.5), tol=1e-12)
    assert res.x == pytest.approx(target, abs=1e-5)


def test_gev_log_loss_matches_scipy():
    for xi in (-0.5, 0.0, 0.4):
        v = inside_points(xi, 11)
        dist = stats.genextreme(c=-xi)
        ones, zeros = np.ones(v.size), np.zeros(v.size)
        np.testing.assert_allclose(gev_log_loss(ones, v, xi), -dist.logcdf(v), rtol=1e-10)
        np.testing.assert_allclose(gev_log_loss(zeros, v, xi), -dist.logsf(v), rtol=1e-9)


def test_gev_log_loss_is_not_convex_for_large_xi():
    v = np.linspace(K.gev_link(0.01, 1.0), K.gev_link(0.99, 1.0), 400)
    loss = gev_log_loss(np.zeros(v.size), v, 1.0) + gev_log_loss(np.ones(v.size), v, 1.0)
    assert (loss[2:] - 2 * loss[1:-1] + loss[:-2]).min() < 0.0


# ---------------------------------------------------------------------------------------------
# public functions: validation, shapes, no mutation


def test_public_functions_reject_bad_input():
    with pytest.raises(ValueError, match=r"`v` must not contain NaN; got nan at position 1"):
        gev_cdf([0.0, np.nan], 0.0)
    with pytest.raises(ValueError, match=r"`eta` must hold probabilities"):
        gev_link([0.5, 1.5], 0.0)
    with pytest.raises(ValueError, match=r"`y` must hold binary labels"):
        gev_canonical_loss([0, 2], [0.0, 0.0], 0.0)
    with pytest.raises(ValueError, match=r"same length"):
        gev_canonical_loss([0, 1, 1], [0.0, 0.0], 0.0)
    with pytest.raises(TypeError, match=r"`xi` must be a float"):
        gev_cdf([0.0], "0.5")
    with pytest.raises(ValueError, match=r"`x` must be non-negative"):
        upper_incomplete_gamma(-0.5, [1.0, -1.0])


def test_scalars_in_scalars_out_and_inputs_not_mutated():
    v = np.array([-1.0, 0.0, 2.0])
    before = v.copy()
    gev_cdf(v, 0.3)
    gev_canonical_loss([0, 1, 1], v, 0.3)
    np.testing.assert_array_equal(v, before)
    assert isinstance(gev_cdf(0.0, 0.0), float)
    assert gev_cdf(0.0, 0.0) == pytest.approx(math.exp(-1.0))


# ---------------------------------------------------------------------------------------------
# the vectorised IRLS hot path agrees with the scalar kernels


@pytest.mark.parametrize("xi", [*XIS, 5e-324, -3.0, 2.5])
def test_vectorised_cdf_pdf_match_the_kernels(xi):
    from streamcal.gev._solver import weighted_gram
    from streamcal.gev._vectorized import cdf, cdf_pdf, irls_weights, risk_slope

    lo, hi = gev_support(xi)
    ends = [e + s for e in (lo, hi) if np.isfinite(e) for s in (-1.0, 0.0, 1.0)]
    v = np.r_[inside_points(xi, 40), -1e3, 1e3, 0.0, ends]
    F, f = cdf_pdf(v, xi)
    np.testing.assert_allclose(F, [K.gev_cdf(x, xi) for x in v], rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(f, [K.gev_pdf(x, xi) for x in v], rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(cdf(v, xi), F)
    y = (np.arange(v.size) % 3 == 0).astype(float)
    w = np.linspace(0.5, 2.0, v.size)
    resid, hess_w = irls_weights(v, y, w, xi, 1e-10)
    np.testing.assert_allclose(resid, w * (F - y))
    np.testing.assert_allclose(hess_w, w * np.maximum(f, 1e-10))
    dv = np.linspace(-1, 1, v.size)
    expected = sum(
        wi * (K.gev_cdf(a + 0.3 * b, xi) - yi) * b for a, b, yi, wi in zip(v, dv, y, w, strict=True)
    )
    assert risk_slope(v, dv, y, w, xi, 0.3) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    X = np.column_stack([v, np.ones(v.size), dv])
    X[~np.isfinite(X)] = 0.0
    reference = X.T @ (X * hess_w[:, None])
    np.testing.assert_allclose(weighted_gram(X, hess_w), reference, rtol=1e-12)
    np.testing.assert_allclose(weighted_gram(X, hess_w, np.ascontiguousarray(X.T)), reference,
                               rtol=1e-12)
    np.testing.assert_allclose(weighted_gram(X, hess_w, chunk=7), reference, rtol=1e-12)


def test_warmup_compiles_every_kernel():
    from streamcal.gev import warmup

    assert warmup() >= 0.0


@given(k=st.integers(1, 30), seed=st.integers(0, 1000))
def test_cholesky_solve_matches_numpy(k, seed):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(k, k))
    a = m @ m.T + 0.1 * np.eye(k)
    b = rng.normal(size=k)
    x = b.copy()
    assert K.cholesky_solve_spd_inplace(a.copy(), x)
    np.testing.assert_allclose(a @ x, b, atol=1e-8 * np.abs(a).max() * max(1.0, np.abs(x).max()))
    singular = np.zeros((k, k))
    assert not K.cholesky_solve_spd_inplace(singular, b.copy())
