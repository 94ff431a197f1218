"""GEVCalibrator and PlattCalibrator: histogram fits against independent fits, faces (river checks: test_estimators.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from river_cases import river_loop
from sklearn.linear_model import LogisticRegression

from streamcal import GEVCalibrator, GEVCanonicalRegression, PlattCalibrator
from streamcal.buckets import Edges, UniformGrid
from streamcal.gev.histfit import fit_glm_on_histogram
from streamcal.windows import CountWindow, Decay, TimeWindow

CLASSES = (GEVCalibrator, PlattCalibrator)


def rare_stream(rng, n, rate_shift=-1.9):
    z = rng.normal(size=n)
    labels = rng.uniform(size=n) < np.exp(-np.exp(-(0.8 * z + rate_shift)))
    return 1.0 / (1.0 + np.exp(-(z - 1.0))), labels




@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("refit_every", [None, 25])
@pytest.mark.parametrize("window", [CountWindow(150), Decay(60.0), TimeWindow(40.0)], ids=repr)
def test_array_face_equals_loop_of_river_methods(cls, refit_every, window, rng):
    n = 400
    s, y = rare_stream(rng, n, rate_shift=-0.5)
    w = rng.choice([0.5, 1.0, 2.0], size=n)
    t = np.cumsum(rng.choice([0.0, 1.0], size=n))
    make = lambda: cls(window=window, refit_every=refit_every)  # noqa: E731
    a, b = make(), make()
    np.testing.assert_array_equal(a.prequential(s, y, weights=w, times=t), river_loop(b, s, y, np.full(n, 3), w, t))
    assert pickle.dumps(a) == pickle.dumps(b)
    mask = rng.uniform(size=n) < 0.5
    a, b = make(), make()
    np.testing.assert_array_equal(a.process(s, y, mask, weights=w, times=t), river_loop(b, s, y, np.where(mask, 1, 2), w, t))
    assert pickle.dumps(a) == pickle.dumps(b)


@pytest.mark.parametrize(("cls", "link", "xi"), [(PlattCalibrator, "logit", 0.0), (GEVCalibrator, "gev", 0.25)])
def test_coefficients_are_the_histogram_fit(cls, link, xi, rng):
    s, y = rare_stream(rng, 5000, rate_shift=-1.0)
    params = {"xi": xi} if cls is GEVCalibrator else {}
    cal = cls(**params).update(s, y)
    centres, pos, neg = cal.histogram()
    x = np.log(centres) - np.log1p(-centres)
    expected = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=1e-6)
    np.testing.assert_allclose(cal.coef_, expected, rtol=1e-8, atol=1e-10)


def test_platt_with_one_bucket_per_score_equals_sklearn(rng):
    """One bucket per distinct raw score: the histogram fit is the fit on the raw events."""
    scores = rng.integers(-30, 31, size=3000) / 10.0
    labels = rng.uniform(size=3000) < 1 / (1 + np.exp(-(1.5 * scores - 0.7)))
    distinct = np.unique(scores)
    edges = np.concatenate(([distinct[0] - 0.05], 0.5 * (distinct[1:] + distinct[:-1]), [distinct[-1] + 0.05]))
    cal = PlattCalibrator(buckets=Edges(edges, centres=distinct), l2=0.0).update(scores, labels)
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(scores[:, None], labels)
    np.testing.assert_allclose(cal.coef_, [ref.coef_[0, 0], ref.intercept_[0]], rtol=1e-6)
    np.testing.assert_allclose(cal.predict_proba(scores), ref.predict_proba(scores[:, None])[:, 1], rtol=1e-6)


def test_gev_with_one_bucket_per_score_equals_batch_regression(rng):
    scores = rng.integers(-30, 31, size=4000) / 10.0
    labels = rng.uniform(size=4000) < np.exp(-np.exp(-(1.2 * scores - 1.5)))
    distinct = np.unique(scores)
    edges = np.concatenate(([distinct[0] - 0.05], 0.5 * (distinct[1:] + distinct[:-1]), [distinct[-1] + 0.05]))
    cal = GEVCalibrator(buckets=Edges(edges, centres=distinct), xi=-0.2, l2=0.0).update(scores, labels)
    ref = GEVCanonicalRegression(xi=-0.2, l2=0.0).fit(scores[:, None], labels)
    np.testing.assert_allclose(cal.coef_, [ref.coef_[0], ref.intercept_], rtol=1e-6, atol=1e-8)


def test_auto_xi_serves_the_lowest_histogram_brier(rng):
    s, y = rare_stream(rng, 20_000)
    grid = (-0.5, 0.0, 0.5)
    cal = GEVCalibrator(xi="auto", xi_grid=grid).update(s, y)
    centres, pos, neg = cal.histogram()
    briers = []
    for xi in grid:
        fixed = GEVCalibrator(xi=xi).update(s, y)
        p = fixed.predict_proba(centres)
        briers.append(float(np.dot(pos, (1 - p) ** 2) + np.dot(neg, p**2)))
    assert cal.xi_ == grid[int(np.argmin(briers))]
    np.testing.assert_allclose(cal.predict_proba(s[:100]), GEVCalibrator(xi=cal.xi_).update(s, y).predict_proba(s[:100]), rtol=1e-8)


def test_gev_is_closer_to_a_gev_truth_than_platt(rng):
    z = rng.normal(size=40_000)
    true_p = np.exp(-np.exp(-(0.8 * z - 1.9)))
    y = rng.uniform(size=z.size) < true_p
    s = 1 / (1 + np.exp(-(z - 1.0)))
    gev = GEVCalibrator().update(s, y).predict_proba(s)
    platt = PlattCalibrator().update(s, y).predict_proba(s)
    rmse = lambda p: np.sqrt(np.mean((p - true_p) ** 2))  # noqa: E731
    assert rmse(gev) < 0.5 * rmse(platt)


@pytest.mark.parametrize("cls", CLASSES)
def test_llr_is_finite_and_monotone(cls, rng):
    s, y = rare_stream(rng, 3000)
    cal = cls().update(s, y)
    grid = np.linspace(0.0, 1.0, 501)
    llr = cal.predict_llr(grid)
    assert np.all(np.isfinite(llr))
    assert np.all(np.diff(llr) >= 0)
    assert np.all(np.diff(cal.predict_proba(grid)) >= 0)


@pytest.mark.parametrize("cls", CLASSES)
def test_bounded_state(cls, rng):
    cal = cls(window=CountWindow(1000), refit_every=500)
    s, y = rare_stream(rng, 100_000)
    cal.update(s[:10_000], y[:10_000])
    size_small = len(pickle.dumps(cal))
    cal.update(s[10_000:], y[10_000:])
    assert len(pickle.dumps(cal)) == size_small


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda c: c.learn_one({"s": 0.3}, 2), r"`y` must be a binary label"),
        (lambda c: c.learn_one({"s": float("nan")}, 1), r"must be finite"),
        (lambda c: c.update([0.1, np.nan], [0, 1]), r"`scores` must be finite; got nan at position 1"),
        (lambda c: c.update([0.1, 0.2], [0, 3]), r"`labels` must hold binary labels"),
        (lambda c: c.update([0.1, 1.2], [0, 1]), r"position 1"),
        (lambda c: c.prequential([0.1, 0.2], [0]), r"`labels` must have the same length"),
        (lambda c: c.update([0.1, 0.2], [0, 1], weights=[1.0, -2.0]), r"`weights` must be finite and non-negative"),
    ],
)
def test_bad_input_raises_and_keeps_state(cls, call, pattern, rng):
    cal = cls(refit_every=10)
    s, y = rare_stream(rng, 200, rate_shift=0.0)
    cal.update(s, y)
    before = pickle.dumps(cal)
    with pytest.raises((ValueError, TypeError), match=pattern):
        call(cal)
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: GEVCalibrator(xi="best"), r"`xi` must be a float"),
        (lambda: GEVCalibrator(xi_grid=()), r"`xi_grid` must hold at least one shape"),
        (lambda: PlattCalibrator(l2=-1.0), r"`l2` must be a number in \[0.0, inf\)"),
        (lambda: PlattCalibrator(refit_every=0), r"`refit_every` must be an int in \[1, inf\)"),
    ],
)
def test_bad_parameters(make, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        make()


def test_raw_scores_use_the_score_itself(rng):
    s = rng.normal(size=5000)
    y = rng.uniform(size=5000) < 1 / (1 + np.exp(-(2.0 * s - 1.0)))
    cal = PlattCalibrator(buckets=UniformGrid(400, -5.0, 5.0)).update(s, y)
    slope, intercept = cal.coef_
    assert abs(slope - 2.0) < 0.25
    assert abs(intercept + 1.0) < 0.2
