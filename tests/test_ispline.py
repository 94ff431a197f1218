"""I-spline smoothing: the constrained fit, the histogram fitter, and ISplineCalibrator."""

from __future__ import annotations

import copy
import itertools
import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize
from sklearn.metrics import roc_auc_score

from streamcal.buckets import UniformGrid
from streamcal.spline import (
    ISplineMap,
    default_n_knots,
    fit_ispline,
    fit_ispline_on_histogram,
    ispline_basis,
    mspline_basis,
)
from streamcal.spline.calibrator import ISplineCalibrator

# ----------------------------------------------------------------------------- references


def design(scores, fitted: ISplineMap):
    return np.column_stack(
        [np.ones(len(scores)), ispline_basis(scores, fitted.knots, fitted.order)]
    )


def slsqp_fit(a, y, w, *, intercept_bound=True):
    """The I-spline QP by scipy's SLSQP: min sum w (y - a c)^2, c >= 0, sum c <= 1."""
    p = a.shape[1]
    scale = w.sum()

    def objective(c):
        r = y - a @ c
        return float(w @ r**2) / scale

    def gradient(c):
        return -2.0 * a.T @ (w * (y - a @ c)) / scale

    bounds = [(0.0, None)] * p
    if not intercept_bound:
        bounds[0] = (None, None)
    cons = [{"type": "ineq", "fun": lambda c: 1.0 - c.sum(), "jac": lambda c: -np.ones(p)}]
    result = minimize(
        objective,
        np.full(p, 0.5 / p),
        jac=gradient,
        bounds=bounds,
        constraints=cons,
        method="SLSQP",
        options={"ftol": 1e-16, "maxiter": 2000},
    )
    return result.x


def enumeration_fit(a, y, w):
    """Brute-force active-set enumeration of the same QP (small bases only)."""
    p = a.shape[1]
    sw = np.sqrt(w)
    aw, yw = a * sw[:, None], y * sw
    best, best_val = None, np.inf
    for free_mask in itertools.product([False, True], repeat=p):
        free = np.flatnonzero(free_mask)
        for cap_active in (False, True):
            c = np.zeros(p)
            if free.size == 0:
                if cap_active:
                    continue
            elif cap_active:
                # substitute the last free coefficient: c_last = 1 - sum(others)
                last, rest = free[-1], free[:-1]
                lhs = aw[:, rest] - aw[:, [last]]
                sol = np.linalg.lstsq(lhs, yw - aw[:, last], rcond=None)[0] if rest.size else []
                c[rest] = sol
                c[last] = 1.0 - np.sum(sol)
            else:
                c[free] = np.linalg.lstsq(aw[:, free], yw, rcond=None)[0]
            if (c < -1e-12).any() or c.sum() > 1.0 + 1e-12:
                continue
            val = float(np.sum((yw - aw @ c) ** 2))
            if val < best_val - 1e-13:
                best, best_val = c, val
    return best


def logistic_data(rng, n, slope=2.0, shift=-0.5, ties=None):
    s = rng.normal(size=n)
    if ties is not None:
        s = np.round(s * ties) / ties
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(slope * s + shift)))).astype(float)
    return s, y


# ----------------------------------------------------------------------------- the fit


@pytest.mark.parametrize(
    ("seed", "order", "n_knots"), [(0, 3, None), (1, 3, 2), (2, 2, 3), (3, 1, 4)]
)
def test_fit_matches_slsqp(seed, order, n_knots):
    rng = np.random.default_rng(seed)
    s, y = logistic_data(rng, 600, slope=rng.uniform(0.5, 4), shift=rng.uniform(-2, 2))
    w = rng.uniform(0.2, 2.0, s.size)
    fitted = fit_ispline(s, y, w, order=order, n_knots=n_knots)
    ref = slsqp_fit(design(s, fitted), y, w)
    np.testing.assert_allclose(fitted.coef, ref, atol=1e-6)


@given(seed=st.integers(0, 2**32 - 1), order=st.integers(1, 3), steep=st.booleans())
def test_fit_matches_brute_force_enumeration_and_constraints_hold_exactly(seed, order, steep):
    rng = np.random.default_rng(seed)
    s, y = logistic_data(rng, 80, slope=8.0 if steep else 1.0, shift=rng.uniform(-1, 1))
    fitted = fit_ispline(s, y, order=order, n_knots=1)
    ref = enumeration_fit(design(s, fitted), y, np.ones(s.size))
    np.testing.assert_allclose(fitted.coef, ref, atol=1e-7)
    assert (fitted.coef >= 0.0).all()
    assert math.fsum(fitted.coef) <= 1.0


def test_both_constraint_kinds_become_active():
    # a step in the labels: the fit wants 0 at the bottom and 1 at the top
    s = np.linspace(0.0, 1.0, 400)
    fitted = fit_ispline(s, s > 0.5, n_knots=3)
    assert fitted.coef[0] == 0.0
    assert math.fsum(fitted.coef) == pytest.approx(1.0, abs=1e-14)
    ref = slsqp_fit(design(s, fitted), (s > 0.5).astype(float), np.ones(s.size))
    np.testing.assert_allclose(fitted.coef, ref, atol=1e-6)


def test_intercept_bound_is_needed_to_stay_in_unit_interval(rng):
    # Without alpha_0 >= 0 the least-squares map dips below 0 at the lowest scores.
    s = np.linspace(0.0, 1.0, 300)
    y = (rng.random(s.size) < np.clip(2.0 * s - 0.6, 0, 1)).astype(float)
    fitted = fit_ispline(s, y, n_knots=0, order=1)
    free = slsqp_fit(design(s, fitted), y, np.ones(s.size), intercept_bound=False)
    assert free[0] < -1e-3
    assert fitted.coef[0] >= 0.0
    assert fitted.predict([0.0])[0] >= 0.0


@given(seed=st.integers(0, 2**32 - 1), order=st.integers(1, 4), n_knots=st.integers(0, 6))
def test_map_monotone_in_unit_interval_and_strict_where_covered(seed, order, n_knots):
    rng = np.random.default_rng(seed)
    s, y = logistic_data(rng, 300, slope=rng.uniform(-1, 5), shift=rng.uniform(-2, 2))
    fitted = fit_ispline(s, y, order=order, n_knots=n_knots)
    grid = np.linspace(s.min() - 1, s.max() + 1, 801)
    f = fitted.predict(grid)
    assert (f >= 0.0).all()
    assert (f <= 1.0).all()
    assert (np.diff(f) >= 0.0).all()
    # strictly increasing inside the support of every M-spline whose I-spline has alpha > 0
    t, alpha = fitted.knots, fitted.coef
    slope = mspline_basis(grid, t, order) @ alpha[1:]
    covered = np.zeros(grid.size, dtype=bool)
    for i in np.flatnonzero(alpha[1:] > 0.0) + 1:
        covered |= (grid > t[i]) & (grid < t[i + order])
    assert (slope[covered] > 0.0).all()
    for i in np.flatnonzero(alpha[1:] > 1e-4) + 1:
        inside = (grid > t[i]) & (grid < t[i + order])
        assert (np.diff(f[inside]) > 0.0).all()


def test_fit_preserves_auc_where_pav_ties(rng):
    s, y = logistic_data(rng, 2000, slope=1.5)
    fitted = fit_ispline(s, y)
    p = fitted.predict(s)
    # here the active alphas cover the whole score range: no two scores are tied, AUC is kept
    assert np.unique(p).size == np.unique(s).size
    assert roc_auc_score(y, p) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    from sklearn.isotonic import IsotonicRegression

    pav = IsotonicRegression(out_of_bounds="clip").fit(s, y).predict(s)
    assert np.unique(pav).size < np.unique(s).size / 10


def test_histogram_fit_equals_raw_event_fit(rng):
    s, y = logistic_data(rng, 5000, ties=8)  # ~60 distinct scores, many events each
    raw = fit_ispline(s, y)
    centres, inverse = np.unique(s, return_inverse=True)
    pos = np.bincount(inverse, weights=y)
    neg = np.bincount(inverse, weights=1.0 - y)
    shuffle = rng.permutation(centres.size)
    hist = fit_ispline_on_histogram(centres[shuffle], pos[shuffle], neg[shuffle])
    np.testing.assert_array_equal(hist.knots, raw.knots)
    np.testing.assert_allclose(hist.coef, raw.coef, atol=1e-12)
    grid = np.linspace(-4, 4, 101)
    np.testing.assert_allclose(hist.predict(grid), raw.predict(grid), atol=1e-12)


@given(
    seed=st.integers(0, 2**32 - 1),
    n_distinct=st.integers(1, 60),
    order=st.integers(1, 4),
    n_knots=st.one_of(st.none(), st.integers(0, 8)),
)
def test_histogram_fit_equals_raw_fit_property(seed, n_distinct, order, n_knots):
    rng = np.random.default_rng(seed)
    values = np.sort(rng.choice(np.linspace(-3, 3, 301), size=n_distinct, replace=False))
    s = rng.choice(values, size=int(rng.integers(n_distinct, 20 * n_distinct + 1)))
    y = (rng.random(s.size) < 1 / (1 + np.exp(-2 * s))).astype(float)
    raw = fit_ispline(s, y, order=order, n_knots=n_knots)
    centres, inverse = np.unique(s, return_inverse=True)
    hist = fit_ispline_on_histogram(
        centres, np.bincount(inverse, weights=y), np.bincount(inverse, weights=1 - y), order=order, n_knots=n_knots
    )
    np.testing.assert_array_equal(hist.knots, raw.knots)
    grid = np.linspace(-4, 4, 41)
    np.testing.assert_allclose(hist.predict(grid), raw.predict(grid), atol=1e-9)


def test_weighted_histogram_fit_equals_weighted_raw_fit(rng):
    s, y = logistic_data(rng, 3000, ties=6)
    w = rng.uniform(0.0, 3.0, s.size)
    raw = fit_ispline(s, y, w, n_knots=3)
    centres, inverse = np.unique(s, return_inverse=True)
    hist = fit_ispline_on_histogram(
        centres,
        np.bincount(inverse, weights=w * y),
        np.bincount(inverse, weights=w * (1 - y)),
        n_knots=3,
    )
    np.testing.assert_array_equal(hist.knots, raw.knots)
    np.testing.assert_allclose(hist.coef, raw.coef, atol=1e-12)


def test_knot_count_rule_and_overrides(rng):
    s, y = logistic_data(rng, 1000)
    assert fit_ispline(s, y).interior_knots.size == default_n_knots(1000) == 6
    assert fit_ispline(s, y, n_knots=2).interior_knots.size == 2
    explicit = fit_ispline(s, y, knots=[-10.0, -0.5, 0.0, 0.5, 10.0])
    np.testing.assert_array_equal(explicit.interior_knots, [-0.5, 0.0, 0.5])
    assert [default_n_knots(n) for n in (1, 124, 125, 216, 343)] == [1, 1, 1, 2, 3]


def test_few_distinct_scores():
    one = fit_ispline_on_histogram([0.3], [3.0], [1.0])
    np.testing.assert_allclose(one.predict([0.0, 0.3, 1.0]), 0.75)
    two = fit_ispline([0.0, 0.0, 1.0, 1.0, 1.0], [0, 1, 1, 1, 0])
    np.testing.assert_allclose(two.predict([0.0, 1.0]), [0.5, 2 / 3], atol=1e-9)
    assert (np.diff(two.predict(np.linspace(0, 1, 50))) >= 0).all()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"centres": [0.1, np.nan]},
            ValueError,
            r"`centres` must be finite; got .*nan.* at position 1",
        ),
        (
            {"pos": [1.0, -1.0]},
            ValueError,
            r"`pos` must be finite and non-negative; got .*-1.0.* at pos",
        ),
        ({"neg": [1.0]}, ValueError, r"`neg` must have the same length"),
        ({"pos": [0.0, 0.0], "neg": [0.0, 0.0]}, ValueError, r"some positive weight"),
        ({"order": 0}, ValueError, r"`order` must be an int in \[1, inf\); got 0"),
        ({"n_knots": 1.5}, TypeError, r"`n_knots` must be an int; got"),
        ({"knots": [0.5, 0.2]}, ValueError, r"`knots` must be strictly increasing; got 0.2 at"),
    ],
)
def test_histogram_fitter_rejects_bad_input(kwargs, error, match):
    args = {"centres": [0.1, 0.9], "pos": [1.0, 2.0], "neg": [2.0, 1.0]} | kwargs
    centres, pos, neg = args.pop("centres"), args.pop("pos"), args.pop("neg")
    with pytest.raises(error, match=match):
        fit_ispline_on_histogram(centres, pos, neg, **args)


# ----------------------------------------------------------------------------- the calibrator


def make_cal(**params):
    """A calibrator for raw (non-probability) scores: a uniform grid for its window histogram."""
    return ISplineCalibrator(buckets=UniformGrid(64, -4.0, 4.0), **params)


def test_calibrator_matches_functional_fit_and_does_not_mutate_input(rng):
    s, y = logistic_data(rng, 800)
    w = rng.uniform(0.5, 1.5, s.size)
    s0, y0, w0 = s.copy(), y.copy(), w.copy()
    cal = make_cal(n_knots=3).fit(s, y, sample_weight=w)
    np.testing.assert_array_equal(s, s0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(w, w0)
    ref = fit_ispline(s, y, w, n_knots=3)
    grid = np.linspace(-3, 3, 31)
    np.testing.assert_array_equal(cal.predict_proba(grid), ref.predict(grid))
    np.testing.assert_array_equal(cal.coef_, ref.coef)


def test_calibrator_llr_is_finite_monotone_and_prior_centred(rng):
    s, y = logistic_data(rng, 1000, slope=6.0)
    cal = make_cal().fit(s, y)
    grid = np.linspace(-10, 10, 201)
    llr = cal.predict_llr(grid)
    assert np.isfinite(llr).all()
    assert (np.diff(llr) >= 0).all()
    p = cal.predict_proba(grid)
    total, pos = y.size, y.sum()
    expected = np.log((p * total + 1) / (total - p * total + 1)) - np.log(
        (pos + 1) / (total - pos + 1)
    )
    np.testing.assert_allclose(llr, expected, atol=1e-12)


def test_calibrator_before_fit_and_degenerate_labels():
    cal = make_cal()
    np.testing.assert_array_equal(cal.predict_proba([0.0, 1.0]), 0.5)
    np.testing.assert_array_equal(cal.predict_llr([0.0, 1.0]), 0.0)
    cal.fit([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(cal._predict_fitted(np.array([0.0, 1.0])), 0.0)  # the fitted map ...
    np.testing.assert_array_equal(cal.predict_proba([0.0, 1.0]), 1 / 8)  # ... served within c/(T+2c), T = 6
    assert np.isfinite(cal.predict_llr([0.0, 1.0])).all()
    cal.fit([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1, 1, 1, 1, 1, 1])
    np.testing.assert_allclose(cal._predict_fitted(np.array([0.0, 1.0])), 1.0, atol=1e-14)
    np.testing.assert_array_equal(cal.predict_proba([0.0, 1.0]), 7 / 8)  # (T+c)/(T+2c)


def test_calibrator_pickle_and_copy_keep_predictions(rng):
    s, y = logistic_data(rng, 500)
    cal = make_cal().fit(s, y)
    grid = np.linspace(-3, 3, 13)
    for other in (pickle.loads(pickle.dumps(cal)), copy.deepcopy(cal)):
        np.testing.assert_array_equal(other.predict_proba(grid), cal.predict_proba(grid))


def _state(cal):
    return pickle.dumps(cal.__getstate__())  # the state without the lock


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda c: c.fit([0.1, np.inf], [0, 1]),
            ValueError,
            r"`scores` must be finite; got .*inf.* at position 1",
        ),
        (
            lambda c: c.fit([0.1, 0.2], [0, 2]),
            ValueError,
            r"`labels` must hold binary labels .* got .*2.* at position 1",
        ),
        (lambda c: c.fit([0.1, 0.2], [0, 1, 1]), ValueError, r"`labels` must have the same length"),
        (
            lambda c: c.fit([0.1, 0.2], [0, 1], [1.0, -2.0]),
            ValueError,
            r"`sample_weight` must be finite and non-neg",
        ),
        (lambda c: c.fit([], []), ValueError, r"`scores` must not be empty"),
        (lambda c: c.fit("abc", [1]), TypeError, r"`scores` must be a 1-d array of numbers"),
        (
            lambda c: c.predict_proba([0.0, np.nan]),
            ValueError,
            r"`scores` must be finite; got .*nan.* at position 1",
        ),
        (lambda c: c.predict_llr([[0.0, 0.5]]), ValueError, r"`scores` must be 1-d or a single column"),
    ],
)
def test_calibrator_rejects_bad_input_and_keeps_state(call, error, match, rng):
    s, y = logistic_data(rng, 300)
    cal = make_cal().fit(s, y)
    before = _state(cal)
    with pytest.raises(error, match=match):
        call(cal)
    assert _state(cal) == before


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"order": 0}, ValueError, r"`order` must be an int in \[1, inf\); got 0"),
        ({"order": 2.0}, TypeError, r"`order` must be an int; got"),
        ({"n_knots": -1}, ValueError, r"`n_knots` must be an int in \[0, inf\); got -1"),
        ({"knots": [0.0, 0.0]}, ValueError, r"`knots` must be strictly increasing"),
    ],
)
def test_calibrator_rejects_bad_parameters_at_fit_and_keeps_state(params, error, match, rng):
    s, y = logistic_data(rng, 300)
    cal = make_cal().fit(s, y)
    before = pickle.dumps({k: v for k, v in cal.__getstate__().items() if k.startswith("_")})
    for name, value in params.items():
        setattr(cal, name, value)
    with pytest.raises(error, match=match):
        cal.fit(s, y)
    assert pickle.dumps({k: v for k, v in cal.__getstate__().items() if k.startswith("_")}) == before


def test_a_fit_on_zero_weights_leaves_the_state_an_update_leaves():
    """All-zero weights are no evidence: the fit keeps the events (as ``update`` would from
    scratch) and fits no map, as PAV, Platt and GEV accept them; its predictions are the fallback's."""
    s = np.array([0.1, 0.5, 0.9, 0.3])
    y = np.array([0, 1, 1, 0])
    w = np.zeros(4)
    fitted = ISplineCalibrator().fit(s, y, w)
    updated = ISplineCalibrator().update(s, y, weights=w)
    assert fitted.n_learned == updated.n_learned == 4
    np.testing.assert_array_equal(fitted.predict_proba(s), updated.predict_proba(s))
    np.testing.assert_array_equal(fitted.predict_llr(s), updated.predict_llr(s))
    np.testing.assert_array_equal(fitted.predict_proba(s), s)  # the score itself: probability inputs
    # a later fit with weight replaces it as from scratch
    again = ISplineCalibrator().fit(s, y, w).fit(s, y)
    np.testing.assert_array_equal(again.predict_proba(s), ISplineCalibrator().fit(s, y).predict_proba(s))
