"""Platt and GEV maps never fall as the score rises: the fitted slope is kept non-negative.

The fit minimises a convex penalised objective; where its unconstrained optimum has a negative
slope, the optimum over ``slope >= 0`` lies on the bound: slope 0 and the intercept-only fit of the
same objective. Checked here on the cases of the bug report (one score, one class), after every
event on both faces, on hypothesis streams of small degenerate windows, and against
``scipy.optimize.minimize`` with a bound on the same penalised objective.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from streamcal import GEVCalibrator, PlattCalibrator
from streamcal.buckets import UniformGrid
from streamcal.gev import fit_glm_on_histogram, gev_cdf
from tests.naive import naive_histogram_glm_risk

GRID = np.linspace(0.0, 1.0, 101)
CALIBRATORS = (PlattCalibrator, GEVCalibrator)
PRIORS = ("auto", None)


def naive_bounded_fit(x, pos, neg, link, xi, l2):
    """``scipy.optimize.minimize`` over ``slope >= 0`` (L-BFGS-B, analytic gradient)."""

    def fun(beta):
        v = beta[0] * x + beta[1]
        p = special.expit(v) if link == "logit" else gev_cdf(v, xi)
        r = (pos + neg) * p - pos
        grad = np.array([np.dot(r, x) + l2 * beta[0], np.sum(r)])
        return naive_histogram_glm_risk(beta, x, pos, neg, link, xi, l2), grad

    rate = (pos.sum() + 0.5) / (pos.sum() + neg.sum() + 1.0)
    start = np.array([0.5, np.log(rate / (1 - rate)) if link == "logit" else 0.0])
    res = optimize.minimize(
        fun, start, jac=True, method="L-BFGS-B", bounds=[(0.0, None), (None, None)],
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
    )  # fmt: skip
    return res.x


def assert_monotone(p, where=""):
    p = np.asarray(p)
    drops = np.flatnonzero(np.diff(p) < 0.0)
    assert drops.size == 0, f"map falls {where} at scores {GRID[drops][:5]}: {p[drops][:5]} -> {p[drops + 1][:5]}"


# ------------------------------------------------------------------------------------ the report


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("prior", PRIORS)
@pytest.mark.parametrize("label", [True, False])
def test_one_score_one_class_serves_a_map_that_does_not_fall(cls, prior, label):
    cal = cls(prior=prior)
    cal.update(np.full(100, 0.3), np.full(100, label))
    p = cal.predict_proba(GRID)
    assert_monotone(p)
    assert cal.coef_[0] >= 0.0
    if label:  # the unconstrained optimum's slope is negative (logit(0.3) < 0): held at 0, a constant map
        assert cal.coef_[0] == 0.0
        assert np.all(p == p[0])
        assert p[0] > 0.98  # the window's rate, 100 of 100, within the finite rule's bounds


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("prior", PRIORS)
def test_scores_in_a_narrow_band_with_almost_only_positives(cls, prior):
    rng = np.random.default_rng(3)
    for rate in (0.99, 1.0):
        cal = cls(prior=prior)
        s = rng.uniform(0.2, 0.4, size=500)
        y = rng.uniform(size=500) < rate
        cal.update(s, y)
        assert_monotone(cal.predict_proba(GRID), f"(rate {rate})")
        assert cal.coef_[0] >= 0.0


def test_fit_glm_on_histogram_keeps_the_slope_non_negative():
    # the data's slope is negative: more positives at the lower score
    x = np.array([-1.0, 1.0])
    pos, neg = np.array([30.0, 10.0]), np.array([10.0, 30.0])
    free = fit_glm_on_histogram(x, pos, neg, link="logit", nonnegative_slope=False)
    assert free[0] < -0.5
    held = fit_glm_on_histogram(x, pos, neg, link="logit")
    assert held[0] == 0.0
    # the intercept-only fit of the same objective (the intercept is not penalised): n sigma(b) = P
    assert abs(held[1] - 0.0) < 1e-12
    # one score, one class: no finite optimum; slope 0 and the link of the rate kept within 1e-12
    one = np.array([np.log(0.3 / 0.7)])
    for nonnegative in (True, False):
        fit = fit_glm_on_histogram(one, np.array([100.0]), np.array([0.0]), link="logit", nonnegative_slope=nonnegative)
        assert fit[0] == 0.0
        np.testing.assert_allclose(special.expit(fit[1]), 1.0 - 1e-12, rtol=0, atol=1e-15)
    # where the unconstrained slope is positive the two agree bit for bit
    x = np.linspace(-3, 3, 7)
    p = special.expit(2 * x - 1)
    a = fit_glm_on_histogram(x, 1000 * p, 1000 * (1 - p), link="gev", xi=0.2)
    c = fit_glm_on_histogram(x, 1000 * p, 1000 * (1 - p), link="gev", xi=0.2, nonnegative_slope=False)
    assert a[0] > 0.0
    assert np.array_equal(a, c)


def test_fit_glm_on_histogram_rejects_a_non_bool_flag_unchanged_inputs():
    x = np.array([0.0, 1.0])
    pos = np.array([1.0, 2.0])
    neg = np.array([3.0, 1.0])
    before = (x.copy(), pos.copy(), neg.copy())
    with pytest.raises(ValueError, match="nonnegative_slope"):
        fit_glm_on_histogram(x, pos, neg, nonnegative_slope=1)
    assert all(np.array_equal(a, b) for a, b in zip(before, (x, pos, neg)))


# ------------------------------------------------------------------ after every event, both faces


def _events(n=120, seed=5):
    """A stream that starts with every positive at one score below 0.5 (the report's window),
    then spreads out."""
    rng = np.random.default_rng(seed)
    s = np.where(np.arange(n) < 60, 0.3, rng.uniform(0.05, 0.95, size=n))
    y = np.where(np.arange(n) < 60, True, rng.uniform(size=n) < s)
    return s, y


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("prior", PRIORS)
def test_array_face_map_does_not_fall_after_every_event(cls, prior):
    s, y = _events()
    cal = cls(prior=prior)
    for i in range(s.size):
        cal.update(s[i : i + 1], y[i : i + 1])
        assert_monotone(cal.predict_proba(GRID), f"after event {i}")
        assert cal.coef_[0] >= 0.0


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("prior", PRIORS)
def test_river_face_map_does_not_fall_after_every_event(cls, prior):
    s, y = _events(80)
    cal = cls(prior=prior)
    for i in range(s.size):
        cal.learn_one({"s": float(s[i])}, bool(y[i]))
        p = [cal.predict_proba_one({"s": float(g)})[True] for g in GRID[::5]]
        drops = np.flatnonzero(np.diff(p) < 0.0)
        assert drops.size == 0, f"river face falls after event {i}"


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("prior", PRIORS)
def test_prequential_equals_a_loop_and_serves_the_held_fit(cls, prior):
    # all positive at 0.3: every prediction after the first event is the held map's constant
    s, y = np.full(300, 0.3), np.ones(300, bool)
    cal = cls(prior=prior)
    p, _ = cal.prequential(s, y)
    loop = cls(prior=prior)
    q = []
    for i in range(s.size):
        q.append(loop.predict_proba_one({"s": 0.3})[True])
        loop.learn_one({"s": 0.3}, True)
    np.testing.assert_allclose(p, q, rtol=0, atol=1e-12)
    assert cal.coef_[0] == 0.0
    assert_monotone(cal.predict_proba(GRID))
    assert np.all(np.diff(p[20:]) >= 0.0)  # more positives, never a lower rate


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_refit_every_and_windows_keep_the_slope_non_negative(cls):
    s, y = _events(400, seed=11)
    for kw in ({"refit_every": 7}, {"window": 50}, {"buckets": UniformGrid(32, 0.0, 1.0)}):
        cal = cls(**kw)
        for i in range(0, s.size, 25):
            cal.update(s[i : i + 25], y[i : i + 25])
            assert_monotone(cal.predict_proba(GRID), f"{kw} after event {i + 25}")
            assert cal.coef_[0] >= 0.0


def test_gev_fixed_shapes_keep_the_slope_non_negative():
    for xi in (-0.5, 0.0, 0.5, 1.0):
        cal = GEVCalibrator(xi=xi, prior=None)
        cal.update(np.full(50, 0.3), np.ones(50, bool))
        assert cal.coef_[0] == 0.0
        assert_monotone(cal.predict_proba(GRID), f"xi={xi}")


# ---------------------------------------------------------------------------- hypothesis streams

small_windows = st.fixed_dictionaries(
    {
        "values": st.lists(st.floats(0.02, 0.98), min_size=1, max_size=3),
        "picks": st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.sampled_from([1.0, 0.5, 2.0])), min_size=1, max_size=25),
        "cls": st.sampled_from(CALIBRATORS),
        "prior": st.sampled_from(PRIORS),
        "window": st.sampled_from([None, 5, 12]),
    }
)  # fmt: skip


@settings(max_examples=60, deadline=None, derandomize=True)
@given(small_windows)
def test_map_does_not_fall_after_every_event_on_small_degenerate_windows(case):
    values = case["values"]
    cal = case["cls"](prior=case["prior"], window=case["window"])
    for j, label, w in case["picks"]:
        score = values[j % len(values)]
        cal.learn_one({"s": score}, label, w)
        assert_monotone(cal.predict_proba(GRID), f"after {score}, {label}")
        assert cal.coef_[0] >= 0.0


# ------------------------------------------------------------------- against scipy with a bound


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.floats(-4, 4), st.floats(0, 50), st.floats(0, 50)), min_size=1, max_size=6),
    st.sampled_from([("logit", 0.0), ("gev", 0.0), ("gev", -0.3), ("gev", 0.5)]),
    st.sampled_from([1e-3, 1e-1, 1.0]),
)
def test_bounded_fit_is_the_constrained_optimum_of_the_same_objective(rows, link_xi, l2):
    link, xi = link_xi
    x = np.array([r[0] for r in rows])
    pos = np.array([r[1] for r in rows])
    neg = np.array([r[2] for r in rows])
    if pos.sum() + neg.sum() < 1.0 or not min(pos.sum(), neg.sum()) > 1e-3:
        return  # (almost) one class: no finite optimum (tests/test_glm_one_score.py)
    ours = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=l2, tol=1e-14, max_iter=1000)
    ref = naive_bounded_fit(x, pos, neg, link, xi, l2)
    assert ours[0] >= 0.0
    f_ours = naive_histogram_glm_risk(ours, x, pos, neg, link, xi, l2)
    f_ref = naive_histogram_glm_risk(ref, x, pos, neg, link, xi, l2)
    assert f_ours <= f_ref + 1e-9 * max(1.0, abs(f_ref))
    np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=1e-4)


def test_held_fit_matches_scipy_where_the_free_slope_is_negative():
    rng = np.random.default_rng(17)
    checked = 0
    for _ in range(60):
        x = rng.uniform(-3, 1, size=3)
        pos = rng.uniform(0, 30, size=3) * (x < -1)
        neg = rng.uniform(0, 30, size=3) * (x > -1) + 0.1
        for link, xi in (("logit", 0.0), ("gev", 0.0), ("gev", -0.4), ("gev", 0.6)):
            free = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=1e-2, nonnegative_slope=False)
            if not free[0] < 0.0:
                continue
            held = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=1e-2)
            ref = naive_bounded_fit(x, pos, neg, link, xi, 1e-2)
            assert held[0] == 0.0
            np.testing.assert_allclose(held[1], ref[1], rtol=1e-6, atol=1e-7)
            assert ref[0] < 1e-6
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("strength", ["auto", 0])
def test_keyed_template_maps_do_not_fall(cls, strength):
    from streamcal import KeyedCalibrator

    cal = KeyedCalibrator(cls(prior=None), prior_strength=strength)
    rng = np.random.default_rng(2)
    s = rng.uniform(0.05, 0.95, size=300)
    cal.update(np.full(300, "spread"), s, rng.uniform(size=300) < s)
    cal.update(np.full(100, "one score"), np.full(100, 0.3), np.ones(100, bool))
    for key in ("spread", "one score"):
        assert_monotone(cal.predict_proba(np.full(GRID.size, key), GRID), f"key {key!r}")
