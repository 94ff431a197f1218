"""The 1-d histogram GLM fitter (used by GEVCalibrator / PlattCalibrator) against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from naive import naive_histogram_risk
from scipy import optimize, special

from streamcal import GEVCanonicalRegression
from streamcal.gev import fit_glm_on_histogram


@pytest.fixture(scope="module")
def histogram():
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(-3.0, 3.0, size=40))
    n = rng.integers(0, 400, size=40).astype(float)
    rate = special.expit(1.3 * x - 2.5)
    pos = rng.binomial(n.astype(int), rate).astype(float)
    return x, pos, n - pos


@pytest.mark.parametrize(
    ("link", "xi"), [("logit", 0.0), ("gev", -0.5), ("gev", 0.0), ("gev", 0.4), ("gev", 1.3)]
)
@pytest.mark.parametrize("l2", [0.0, 5.0])
def test_matches_scipy_minimize(histogram, link, xi, l2):
    x, pos, neg = histogram
    beta = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=l2)
    _, grad = naive_histogram_risk(beta, x, pos, neg, link, xi, l2)
    assert np.max(np.abs(grad)) <= 1e-7 * (pos.sum() + neg.sum())
    res = optimize.minimize(naive_histogram_risk, np.array([0.0, -1.0]),
                            args=(x, pos, neg, link, xi, l2), jac=True, method="BFGS",
                            options={"gtol": 1e-8, "maxiter": 1000})
    np.testing.assert_allclose(beta, res.x, atol=1e-4)


def test_equals_row_level_regression(histogram):
    x, pos, neg = histogram
    X = np.r_[x, x][:, None]
    y = np.r_[np.ones(x.size), np.zeros(x.size)]
    w = np.r_[pos, neg]
    model = GEVCanonicalRegression(xi=0.3, l2=0.0, tol=1e-12).fit(X, y, sample_weight=w)
    beta = fit_glm_on_histogram(x, pos, neg, link="gev", xi=0.3, l2=0.0, tol=1e-12)
    np.testing.assert_allclose(beta, [model.coef_[0], model.intercept_], atol=1e-8)


def test_logit_matches_sklearn(histogram):
    from sklearn.linear_model import LogisticRegression

    x, pos, neg = histogram
    X = np.r_[x, x][:, None]
    y = np.r_[np.ones(x.size), np.zeros(x.size)]
    w = np.r_[pos, neg]
    sk = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(X, y, sample_weight=w)
    beta = fit_glm_on_histogram(x, pos, neg, link="logit", l2=0.0)
    np.testing.assert_allclose(beta, [sk.coef_[0, 0], sk.intercept_[0]], atol=1e-5)


def test_warm_start_gives_the_same_fit(histogram):
    x, pos, neg = histogram
    cold = fit_glm_on_histogram(x, pos, neg, xi=0.2)
    warm = fit_glm_on_histogram(x, pos, neg, xi=0.2, beta0=cold + np.array([0.1, -0.2]))
    np.testing.assert_allclose(warm, cold, atol=1e-8)


@pytest.mark.parametrize("link", ["gev", "logit"])
def test_degenerate_histograms_give_finite_fits(link):
    x = np.linspace(-1, 1, 5)
    only_neg = fit_glm_on_histogram(x, np.zeros(5), np.full(5, 10.0), link=link, xi=0.0)
    assert np.all(np.isfinite(only_neg))
    separable = fit_glm_on_histogram(x, [0, 0, 0, 5, 5], [5, 5, 5, 0, 0], link=link, xi=0.0)
    assert np.all(np.isfinite(separable))
    assert separable[0] > 0
    empty = fit_glm_on_histogram(x, np.zeros(5), np.zeros(5), link=link)
    assert np.all(np.isfinite(empty))


def test_inputs_not_mutated(histogram):
    x, pos, neg = histogram
    copies = (x.copy(), pos.copy(), neg.copy())
    beta0 = np.array([0.5, -1.0])
    fit_glm_on_histogram(x, pos, neg, beta0=beta0)
    for a, b in zip((x, pos, neg), copies, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(beta0, [0.5, -1.0])


def test_bad_input():
    x = np.array([0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"`x` must be finite"):
        fit_glm_on_histogram([0.0, np.nan, 1.0], [1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match=r"`neg` must be non-negative; got -1.0 at position 2"):
        fit_glm_on_histogram(x, [1, 1, 1], [1, 1, -1])
    with pytest.raises(ValueError, match=r"`pos`"):
        fit_glm_on_histogram(x, [1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match=r"`link` must be one of"):
        fit_glm_on_histogram(x, [1, 1, 1], [1, 1, 1], link="probit")
    with pytest.raises(ValueError, match=r"outside the support"):
        fit_glm_on_histogram(x, [1, 1, 1], [1, 1, 1], xi=0.5, beta0=[0.0, -10.0])
    with pytest.raises(ValueError, match=r"`beta0` must be \(slope, intercept\)"):
        fit_glm_on_histogram(x, [1, 1, 1], [1, 1, 1], beta0=[0.0])
