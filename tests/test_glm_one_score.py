"""Platt and GEV on windows whose data do not identify the slope: the ridge is on the slope alone.

The histogram fit minimises ``sum_b pos_b l(1, v_b) + neg_b l(0, v_b) + l2/2 slope^2`` with ``v_b =
slope x_b + intercept``: the intercept is free, so where every event sits at one score the slope
goes to 0 and the map is the constant at the window's rate (a ridge on the intercept too split the
log-odds between the two and made the map climb to the add-``c`` bound at scores the window never
held). A window of one class has no finite optimum (the infimum lies at slope 0 and intercept
``-inf`` or ``+inf``): every path serves slope 0 and the add-``c`` bound. Checked here on both
faces, every window kind, with and without the score prior, every GEV shape, merges, against
``scipy.optimize.minimize`` of the stated objective, and against scikit-learn's Platt scaling.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special
from sklearn.calibration import _sigmoid_calibration

from streamcal import GEVCalibrator, PlattCalibrator
from streamcal.gev import fit_glm_on_histogram, gev_cdf
from streamcal.merging import merge
from streamcal.windows import Decay
from tests.naive import naive_histogram_glm_risk

GRID = np.array([0.01, 0.1, 0.3, 0.5, 0.6, 0.9, 0.99])
MAPS = (
    (PlattCalibrator, {}),
    (GEVCalibrator, {}),
    (GEVCalibrator, {"xi": -0.5}),
    (GEVCalibrator, {"xi": 0.0}),
    (GEVCalibrator, {"xi": 0.5}),
    (GEVCalibrator, {"xi": 1.0}),
)
WINDOWS = (None, 40, Decay(half_life=30.0))


def naive_fit(x, pos, neg, link, xi, l2, nonnegative=True):
    """``scipy.optimize.minimize`` of :func:`naive_histogram_glm_risk` (L-BFGS-B, analytic gradient), over
    ``slope >= 0`` where ``nonnegative``."""

    def fun(beta):
        v = beta[0] * x + beta[1]
        p = special.expit(v) if link == "logit" else gev_cdf(v, xi)
        r = (pos + neg) * p - pos
        return naive_histogram_glm_risk(beta, x, pos, neg, link, xi, l2), np.array([np.dot(r, x) + l2 * beta[0], np.sum(r)])

    rate = (pos.sum() + 0.5) / (pos.sum() + neg.sum() + 1.0)
    start = np.array([0.5, np.log(rate / (1 - rate)) if link == "logit" else 0.0])
    bounds = [(0.0, None) if nonnegative else (None, None), (None, None)]
    res = optimize.minimize(
        fun, start, jac=True, method="L-BFGS-B", bounds=bounds,
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
    )  # fmt: skip
    return res.x


def _constant(p, atol=1e-12):
    p = np.asarray(p, dtype=float)
    return float(np.ptp(p)) <= atol


# -------------------------------------------------------------------- one score, one class


@pytest.mark.parametrize(("cls", "kw"), MAPS)
@pytest.mark.parametrize("prior", ["auto", None])
@pytest.mark.parametrize("window", WINDOWS)
def test_one_score_one_class_serves_the_constant_on_the_array_face(cls, kw, prior, window):
    for label in (False, True):
        cal = cls(prior=prior, window=window, **kw)
        cal.update(np.full(100, 0.3), np.full(100, label))
        p = cal.predict_proba(GRID)
        assert (p[2] > 0.97) if label else (p[2] < 0.03), p
        if cal.prior_strength > 0.0:
            # the score prior's pseudo-counts lie at other scores too: they, not the window,
            # set the slope (a short window keeps the prior holding), and the map is monotone
            assert np.all(np.diff(p) >= 0.0), p
            continue
        assert _constant(p), p
        assert cal.coef_[0] == 0.0


@pytest.mark.parametrize(("cls", "kw"), MAPS)
@pytest.mark.parametrize("prior", ["auto", None])
@pytest.mark.parametrize("window", WINDOWS)
def test_one_score_one_class_serves_the_constant_on_the_river_face(cls, kw, prior, window):
    cal = cls(prior=prior, window=window, **kw)
    for i in range(60):
        cal.learn_one({"s": 0.3}, False)
        if i % 7 == 0 or i == 59:
            p = [cal.predict_proba_one({"s": float(g)})[True] for g in GRID]
            assert _constant(p) or cal.prior_strength > 0.0, (i, p)  # (the prior's slope: above)
    array = cls(prior=prior, window=window, **kw).update(np.full(60, 0.3), np.zeros(60, bool))
    np.testing.assert_allclose(p, array.predict_proba(GRID), rtol=0, atol=1e-12)


def test_the_reported_cases_serve_the_window_rate_everywhere():
    # 100 negatives at 0.3: the add-c bound 1 / 102 at every score, as scikit-learn's Platt serves
    for cal in (PlattCalibrator(), PlattCalibrator(prior=None), GEVCalibrator(), GEVCalibrator(prior=None)):
        cal.update(np.full(100, 0.3), np.zeros(100))
        assert cal.prior_strength == 0.0
        np.testing.assert_allclose(cal.predict_proba(GRID), 1.0 / 102.0, rtol=1e-12)
    a, b = _sigmoid_calibration(np.full(100, 0.3), np.zeros(100))
    np.testing.assert_allclose(1.0 / (1.0 + np.exp(a * GRID + b)), 1.0 / 102.0, rtol=1e-12)


@pytest.mark.parametrize(("cls", "kw"), MAPS[:2])
def test_merged_one_score_windows_serve_the_constant(cls, kw):
    a = cls(**kw).update(np.full(50, 0.3), np.zeros(50, bool))
    b = cls(**kw).update(np.full(50, 0.3), np.zeros(50, bool))
    merged = merge(a, b)
    np.testing.assert_allclose(merged.predict_proba(GRID), 1.0 / 102.0, rtol=1e-12)
    assert merged.coef_[0] == 0.0


# ---------------------------------------------------------------- one score, both classes


@pytest.mark.parametrize(("cls", "kw"), MAPS)
@pytest.mark.parametrize("window", WINDOWS)
def test_one_score_both_classes_serve_the_window_rate(cls, kw, window):
    # without the prior (which pulls the map toward the score where the data agree with it)
    y = np.zeros(100, bool)
    y[::4] = True  # the last 40 events hold 10 positives, as do all 100
    cal = cls(prior=None, window=window, **kw).update(np.full(100, 0.3), y)
    p = cal.predict_proba(GRID)
    assert _constant(p, 1e-7), p
    assert abs(cal.coef_[0]) <= 1e-7
    _, pos, neg = cal.histogram()
    # the window's rate; GEV shapes with xi > 0 (whose support ends below) serve their end run's
    # rate by the add-c rule
    rate = pos.sum() / (pos.sum() + neg.sum())
    if kw.get("xi", 0.0) > 0.0:
        rate = (pos.sum() + 1.0) / (pos.sum() + neg.sum() + 2.0)
    np.testing.assert_allclose(p, rate, atol=1e-7)
    river = cls(prior=None, window=window, **kw)
    for label in y:
        river.learn_one({"s": 0.3}, bool(label))
    q = [river.predict_proba_one({"s": float(g)})[True] for g in GRID]
    np.testing.assert_allclose(q, p, rtol=0, atol=1e-9)


def test_fit_glm_on_histogram_one_score_gives_slope_zero():
    x = np.array([-0.847])
    for link, xi in (("logit", 0.0), ("gev", 0.0), ("gev", -0.5), ("gev", 0.5)):
        beta = fit_glm_on_histogram(x, np.array([30.0]), np.array([70.0]), link=link, xi=xi, nonnegative_slope=False)
        assert abs(beta[0]) <= 1e-9
        p = special.expit(beta[1]) if link == "logit" else gev_cdf(beta[1], xi)
        np.testing.assert_allclose(p, 0.3, rtol=1e-9)


# ------------------------------------------------------------------- against scipy.optimize


rows = st.lists(st.tuples(st.floats(-4, 4), st.floats(0, 50), st.floats(0, 50)), min_size=1, max_size=6)
links = st.sampled_from([("logit", 0.0), ("gev", 0.0), ("gev", -0.3), ("gev", 0.5)])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows, links, st.sampled_from([1e-6, 1e-3, 1.0]), st.booleans())
def test_fit_is_the_minimiser_of_the_stated_objective(rows, link_xi, l2, one_score):
    link, xi = link_xi
    x = np.array([rows[0][0] if one_score else r[0] for r in rows])
    pos = np.array([r[1] for r in rows])
    neg = np.array([r[2] for r in rows])
    if not (pos.sum() > 1e-3 and neg.sum() > 1e-3):
        return  # one class: below
    for nonnegative in (True, False):
        ours = fit_glm_on_histogram(
            x, pos, neg, link=link, xi=xi, l2=l2, tol=1e-14, max_iter=1000, nonnegative_slope=nonnegative
        )
        ref = naive_fit(x, pos, neg, link, xi, l2, nonnegative)
        f_ours = naive_histogram_glm_risk(ours, x, pos, neg, link, xi, l2)
        f_ref = naive_histogram_glm_risk(ref, x, pos, neg, link, xi, l2)
        assert f_ours <= f_ref + 1e-9 * max(1.0, abs(f_ref))
        used = pos + neg > 0.0
        if one_score or np.unique(x[used]).size == 1:
            assert abs(ours[0]) <= 1e-9  # the data leave the slope to the ridge: 0
        # the served probabilities over the buckets' range agree
        z = np.linspace(x.min(), x.max(), 9)
        cdf = special.expit if link == "logit" else (lambda v: gev_cdf(v, xi))
        np.testing.assert_allclose(cdf(ours[0] * z + ours[1]), cdf(ref[0] * z + ref[1]), atol=2e-5)


@pytest.mark.parametrize("link_xi", [("logit", 0.0), ("gev", 0.0), ("gev", -0.3), ("gev", 0.5)])
def test_one_class_fit_approaches_the_infimum(link_xi):
    link, xi = link_xi
    x = np.array([-1.0, 0.2, 2.0])
    for pos, neg in ((np.zeros(3), np.array([5.0, 1.0, 3.0])), (np.array([5.0, 1.0, 3.0]), np.zeros(3))):
        ours = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi)
        assert ours[0] == 0.0
        # the infimum lies at slope 0 and intercept -inf or +inf: ours serves within 1e-12 of it
        p = special.expit(ours[1]) if link == "logit" else gev_cdf(ours[1], xi)
        np.testing.assert_allclose(p, 1.0 if pos.sum() > 0.0 else 0.0, rtol=0, atol=1.1e-12)
        # and lower than any finite fit with a slope
        for slope in (-0.5, 0.5):
            assert naive_histogram_glm_risk(ours, x, pos, neg, link, xi, 1e-6) < naive_histogram_glm_risk(
                np.array([slope, ours[1]]), x, pos, neg, link, xi, 1e-6
            )


@pytest.mark.parametrize(("cls", "kw"), MAPS[:4])
@pytest.mark.parametrize("window", WINDOWS)
def test_calibrator_fit_is_scipys_on_its_window(cls, kw, window):
    link = "logit" if cls is PlattCalibrator else "gev"
    rng = np.random.default_rng(4)
    streams = {
        "random": rng.uniform(0.02, 0.98, 300),
        "two scores": np.where(rng.uniform(size=300) < 0.5, 0.3, 0.7),
        "one score": np.full(300, 0.4),
    }
    for name, s in streams.items():
        y = rng.uniform(size=s.size) < s
        cal = cls(prior=None, window=window, **kw).update(s, y)
        xi = 0.0 if link == "logit" else cal.xi_
        centres, pos, neg = cal.histogram()
        x = np.log(centres) - np.log1p(-centres)
        ref = naive_fit(x, pos, neg, link, xi, 1e-6)
        z = np.linspace(x[pos + neg > 0].min(), x[pos + neg > 0].max(), 9)
        cdf = special.expit if link == "logit" else (lambda v: gev_cdf(v, xi))
        np.testing.assert_allclose(
            cdf(cal.coef_[0] * z + cal.coef_[1]), cdf(ref[0] * z + ref[1]), atol=1e-5, err_msg=name
        )
        f_ours = naive_histogram_glm_risk(np.array(cal.coef_), x, pos, neg, link, xi, 1e-6)
        f_ref = naive_histogram_glm_risk(ref, x, pos, neg, link, xi, 1e-6)
        assert f_ours <= f_ref + 1e-9 * max(1.0, abs(f_ref)), name
