"""Batch GEV-canonical regression: IRLS optimum, consistency, xi selection, bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_gev_risk
from scipy import optimize

from streamcal import GEVCanonicalRegression
from streamcal.gev import gev_cdf, gev_support


def make_rare(rng, n, coef, intercept, xi, k=None):
    k = len(coef) if k is None else k
    X = rng.normal(size=(n, k))
    p = gev_cdf(X @ np.asarray(coef) + intercept, xi)
    y = (rng.random(n) < p).astype(float)
    return X, y, p


@pytest.fixture(scope="module")
def rare_data():
    rng = np.random.default_rng(7)
    return make_rare(rng, 3000, [0.5, -0.3, 0.2], -1.6, 0.3)


@pytest.mark.parametrize("xi", [-0.5, 0.0, 0.3, 1.2])
@pytest.mark.parametrize("l2", [0.0, 2.0])
def test_irls_reaches_the_scipy_minimize_optimum(rare_data, xi, l2):
    X, y, _ = rare_data
    w = np.random.default_rng(1).uniform(0.5, 1.5, size=y.size)
    model = GEVCanonicalRegression(xi=xi, l2=l2, tol=1e-10).fit(X, y, sample_weight=w)
    assert model.converged_
    Z = np.hstack([X, np.ones((y.size, 1))])
    pen = np.array([l2, l2, l2, 0.0])
    beta_irls = np.r_[model.coef_, model.intercept_]
    _, grad = naive_gev_risk(beta_irls, Z, y, w, xi, pen)
    assert np.max(np.abs(grad)) <= 1e-6 * w.sum()

    start = np.r_[np.zeros(3), model.intercept_ + 0.3]
    res = optimize.minimize(naive_gev_risk, start, args=(Z, y, w, xi, pen), jac=True,
                            method="BFGS", options={"gtol": 1e-7, "maxiter": 2000})
    np.testing.assert_allclose(beta_irls, res.x, atol=2e-4)
    assert naive_gev_risk(beta_irls, Z, y, w, xi, pen)[0] <= res.fun + 1e-7 * abs(res.fun)


@pytest.mark.parametrize("xi", [0.0, 0.4])
def test_coefficients_recovered_as_n_grows(xi):
    rng = np.random.default_rng(11)
    truth = np.array([0.6, -0.4, 0.3, -1.7])
    errors = []
    rates = []
    for n in (2_000, 20_000, 200_000):
        X, y, _ = make_rare(rng, n, truth[:3], truth[3], xi)
        rates.append(y.mean())
        model = GEVCanonicalRegression(xi=xi, l2=1e-8).fit(X, y)
        errors.append(np.max(np.abs(np.r_[model.coef_, model.intercept_] - truth)))
    assert all(0.01 <= r <= 0.05 for r in rates)  # rare positives, 1-5 %
    assert errors[2] < errors[0]
    assert errors[2] < 0.05


def test_sample_weight_equals_repeated_rows(rare_data):
    X, y, _ = rare_data
    X, y = X[:500], y[:500]
    counts = np.random.default_rng(3).integers(0, 3, size=y.size)
    weighted = GEVCanonicalRegression(xi=0.2, l2=0.5, tol=1e-12).fit(X, y, sample_weight=counts)
    repeated = GEVCanonicalRegression(xi=0.2, l2=0.5, tol=1e-12).fit(
        np.repeat(X, counts, axis=0), np.repeat(y, counts))
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, atol=1e-8)
    assert weighted.intercept_ == pytest.approx(repeated.intercept_, abs=1e-8)


@pytest.mark.parametrize("xi", [-1.5, 1.5, 3.0])
def test_converges_for_extreme_xi_and_separable_data(xi):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] > 1.2).astype(float)  # perfectly separable
    model = GEVCanonicalRegression(xi=xi, l2=1.0).fit(X, y)
    assert model.converged_
    p = model.predict_proba(X)[:, 1]
    assert p[y == 1].mean() > p[y == 0].mean()


def test_predictions_shapes_and_clipping(rare_data):
    X, y, _ = rare_data
    model = GEVCanonicalRegression(xi=0.5, l2=1.0).fit(X, y)
    proba = model.predict_proba(X[:10] * 50.0)
    assert proba.shape == (10, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    v = model.decision_function(X[:10] * 50.0)
    lo, _ = gev_support(0.5)
    assert np.all(v >= lo)
    assert np.any(v == lo)  # huge scores are clipped onto the support's end
    np.testing.assert_array_equal(model.predict(X[:10] * 50.0), (proba[:, 1] > 0.5).astype(int))
    np.testing.assert_array_equal(model.classes_, [0, 1])


def test_without_intercept(rare_data):
    X, y, _ = rare_data
    model = GEVCanonicalRegression(xi=0.0, l2=0.0, fit_intercept=False).fit(X, y)
    assert model.intercept_ == 0.0
    assert model.converged_


@pytest.mark.parametrize("cv", [0.3, 3])
def test_auto_xi_picks_the_lowest_held_out_brier(cv):
    rng = np.random.default_rng(2)
    X, y, _ = make_rare(rng, 4000, [0.8, -0.5], -1.2, 0.8)
    grid = (-0.5, 0.0, 0.8, 1.5)
    model = GEVCanonicalRegression(xi="auto", xi_grid=grid, cv=cv, l2=1e-3).fit(X, y)
    assert set(model.xi_scores_) == set(grid)
    assert model.xi_ == min(model.xi_scores_, key=model.xi_scores_.get)
    assert model.xi_ > 0.0  # data drawn with xi = 0.8: a heavy upper tail wins


def _snapshot(model):
    return pickle.dumps(model.__dict__)


@pytest.mark.parametrize(
    ("X_bad", "y_bad", "kwargs", "match"),
    [
        ("nan", None, {}, r"`X` must be finite; got nan at row 3, column 1"),
        (None, "labels", {}, r"`y` must hold binary labels"),
        (None, "one_class", {}, r"both classes"),
        (None, None, {"sample_weight": "negative"}, r"`sample_weight` must be finite"),
        (None, "short", {}, r"one label per row"),
        ("collinear", None, {}, r"singular design"),
        ("constant", None, {}, r"singular design"),
        (None, None, {"coef_init": [100.0, 0.0, 0.0]}, r"outside the support"),
    ],
)
def test_bad_input_is_rejected_and_state_is_unchanged(rare_data, X_bad, y_bad, kwargs, match):
    X, y, _ = rare_data
    X, y = X[:200].copy(), y[:200].copy()
    y[:5] = 1.0
    model = GEVCanonicalRegression(xi=0.5, l2=0.0).fit(X, y)
    before = _snapshot(model)
    if X_bad == "nan":
        X = X.copy()
        X[3, 1] = np.nan
    elif X_bad == "collinear":
        X = np.column_stack([X[:, 0], 2.0 * X[:, 0], X[:, 2]])
    elif X_bad == "constant":
        X = np.column_stack([X[:, :2], np.full(X.shape[0], 3.0)])
    if y_bad == "labels":
        y = y.copy()
        y[4] = 2.0
    elif y_bad == "one_class":
        y = np.zeros_like(y)
    elif y_bad == "short":
        y = y[:-1]
    if kwargs.get("sample_weight") == "negative":
        kwargs = {"sample_weight": np.r_[-1.0, np.ones(y.size - 1)]}
    if "coef_init" in kwargs:
        # scores 100 * x0 - 2 + ... : with xi = 0.5 the lower end is -2; a huge negative intercept
        kwargs = {"coef_init": [0.0, 0.0, 0.0], "intercept_init": -50.0}
    with pytest.raises((ValueError, TypeError), match=match):
        model.fit(X, y, **kwargs)
    assert _snapshot(model) == before


def test_bad_parameters():
    X = np.eye(3)
    y = [0, 1, 0]
    with pytest.raises(ValueError, match=r"`xi` must be one of"):
        GEVCanonicalRegression(xi="gumbel").fit(X, y)
    with pytest.raises(ValueError, match=r"`l2` must be a number in \[0"):
        GEVCanonicalRegression(l2=-1.0).fit(X, y)
    with pytest.raises(ValueError, match=r"`cv`"):
        GEVCanonicalRegression(xi="auto", cv=1.5).fit(X, y)
    with pytest.raises(AttributeError, match=r"not fitted"):
        GEVCanonicalRegression().predict_proba(X)


def test_inputs_not_mutated_and_params_round_trip(rare_data):
    X, y, _ = rare_data
    Xc, yc = X.copy(), y.copy()
    model = GEVCanonicalRegression(xi=0.1).fit(X, y)
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)
    clone = GEVCanonicalRegression(**model.get_params())
    assert repr(clone) == repr(model)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_proba(X[:5]), model.predict_proba(X[:5]))


def test_hitting_max_iter_warns_and_says_so(rare_data):
    from streamcal.gev.regression import ConvergenceWarning

    X, y, _ = rare_data
    with pytest.warns(ConvergenceWarning, match=r"did not converge in 1 iterations"):
        model = GEVCanonicalRegression(xi=0.3, max_iter=1).fit(X, y)
    assert not model.converged_
    assert model.n_iter_ == 1


@settings(max_examples=25)
@given(
    xi=st.floats(-2.0, 3.0),
    l2=st.floats(0.01, 10.0),
    seed=st.integers(0, 10_000),
    scale=st.floats(0.1, 20.0),
)
def test_irls_always_converges(xi, l2, seed, scale):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=scale, size=(60, 2))
    y = (rng.random(60) < 0.2).astype(float)
    y[:2] = [0.0, 1.0]
    model = GEVCanonicalRegression(xi=xi, l2=l2, max_iter=200).fit(X, y)
    assert model.converged_
    Z = np.hstack([X, np.ones((60, 1))])
    beta = np.r_[model.coef_, model.intercept_]
    _, grad = naive_gev_risk(beta, Z, y, np.ones(60), xi, np.array([l2, l2, 0.0]))
    assert np.max(np.abs(grad)) <= 1e-6 * 60


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
def test_frames_are_accepted(rare_data, kind):
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    X, y, _ = rare_data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    if kind == "polars":
        frame = pl.from_pandas(frame)
    elif kind == "pyarrow":
        frame = pa.Table.from_pandas(frame)
    reference = GEVCanonicalRegression(xi=0.3).fit(X, y)
    model = GEVCanonicalRegression(xi=0.3).fit(frame, y)
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    np.testing.assert_array_equal(model.predict_proba(frame), reference.predict_proba(X))
