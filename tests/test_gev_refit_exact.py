"""The warm-started refits of PlattCalibrator and GEVCalibrator agree with a converged full refit.

Every prediction of the exact default (``refit_every=None``: a refit before each prediction
that follows new labels) is compared with the map of a full refit of the same histogram, run
from the default cold start until its steps stop moving the coefficients (``tol=1e-16``, far
below the calibrators' own full refit, ``tol=1e-10``, which near-separable windows need): within 1e-9 on every event, across count windows (evictions), event and
time decay (rescaling), zero and fractional weights.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gev_compiled_refit import end_run_bounded

from streamcal import GEVCalibrator, PlattCalibrator, _prior
from streamcal.buckets import LogitGrid, UniformGrid
from streamcal.gev import fit_glm_on_histogram, gev_cdf
from streamcal.windows import CountWindow, Decay, Unbounded

TOL = 1e-9


def naive_glm_refit_proba(cal, centres, pos, neg, scores, ties=False):
    """The served probabilities of a converged cold full refit of ``cal``'s map from its histogram.

    With ``ties``, a list: those of every shape whose Brier score ties the lowest within rounding
    (a relative 1e-12). Where every shape's slope is held at 0 (the map must not fall) each shape
    serves a constant map at about the window's rate, their Brier scores differ by rounding
    alone, and which of them is lowest is rounding's choice; the end-run bounds of the shapes
    with ``xi != 0`` then make their maps differ."""
    identity = cal.window_histogram.layout.probability_inputs
    x = np.log(np.clip(centres, 1e-12, 1 - 1e-12)) - np.log1p(-np.clip(centres, 1e-12, 1 - 1e-12))
    x = x if identity else centres
    xs = np.clip(scores, 1e-12, 1 - 1e-12)
    xs = np.log(xs) - np.log1p(-xs) if identity else scores
    link = "logit" if isinstance(cal, PlattCalibrator) else "gev"
    shapes = (0.0,) if link == "logit" else tuple(float(v) for v in cal.xi_grid) if cal.xi == "auto" else (cal.xi,)
    fits = []
    for xi in shapes:
        beta = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=cal.l2, tol=1e-16, max_iter=2000)
        v = beta[0] * x + beta[1]
        p = 1 / (1 + np.exp(-v)) if link == "logit" else gev_cdf(v, xi)
        fits.append((float(np.dot(pos, (1 - p) ** 2) + np.dot(neg, p**2)), xi, beta))
    best = min(fits, key=lambda f: f[0])  # the first of equals
    low, high = _prior.proba_bounds(float(pos.sum() + neg.sum()), float(cal.llr_pseudo_count))

    def served(fit):
        _, xi, beta = fit
        v = beta[0] * xs + beta[1]
        p = 1 / (1 + np.exp(-v)) if link == "logit" else gev_cdf(v, xi)
        p = end_run_bounded(p, xi, pos, neg, float(cal.llr_pseudo_count))
        return np.clip(p, low, high)

    if ties:
        return [served(f) for f in fits if f[0] <= best[0] * (1 + 1e-12)], best
    return served(best), best


def _windows():
    return st.sampled_from(
        [
            ("unbounded", Unbounded()),
            ("count 7", CountWindow(7)),
            ("count 40", CountWindow(40)),
            ("decay 10 events", Decay(10.0)),
            ("decay 3 events", Decay(3.0)),
        ]
    )


@st.composite
def streams(draw):
    n = draw(st.integers(30, 160))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["logistic", "rare", "extreme", "few buckets"]))
    z = rng.normal(draw(st.floats(-3.0, 1.0)), draw(st.floats(0.3, 3.0)), n)
    if kind == "extreme":
        z *= 6.0
    scores = 1 / (1 + np.exp(-z))
    if kind == "few buckets":
        scores = rng.choice([0.2, 0.5, 0.7], n)
    truth = 1 / (1 + np.exp(-(0.7 * z - (2.5 if kind == "rare" else 0.5))))
    labels = rng.uniform(size=n) < truth
    weights = rng.choice([0.0, 0.4, 1.0, 1.0, 2.5], n) if draw(st.booleans()) else np.ones(n)
    _, window = draw(_windows())
    return scores, labels, weights, window


def _check_every_event(make, scores, labels, weights):
    cal = make()
    proba, _ = cal.prequential(scores, labels, weights=weights)
    hist = make()  # the histogram before each event
    worst = 0.0
    for i in range(scores.size):
        if hist.n_learned and float(np.sum(hist.histogram()[1] + hist.histogram()[2])) > 0.0:
            centres, pos, neg = hist.histogram()
            refs, _ = naive_glm_refit_proba(hist, centres, pos, neg, scores[i : i + 1], ties=True)
            worst = max(worst, min(abs(float(proba[i]) - float(ref[0])) for ref in refs))
        hist.update(scores[i : i + 1], labels[i : i + 1], weights=weights[i : i + 1])
    assert worst <= TOL


@settings(max_examples=40, deadline=None)
@given(streams())
def test_platt_prequential_matches_a_converged_full_refit_on_every_event(stream):
    scores, labels, weights, window = stream
    _check_every_event(lambda: PlattCalibrator(prior=None, buckets=LogitGrid(64), window=window), scores, labels, weights)


@settings(max_examples=25, deadline=None)
@given(streams())
def test_gev_auto_prequential_matches_a_converged_full_refit_on_every_event(stream):
    scores, labels, weights, window = stream
    _check_every_event(lambda: GEVCalibrator(prior=None, buckets=LogitGrid(64), window=window), scores, labels, weights)


@pytest.mark.parametrize("make", [PlattCalibrator, GEVCalibrator])
def test_default_grid_long_stream_matches_at_probe_scores(make):
    # the default 1024-bucket grid, a longer stream: the whole map (probe scores spanning the
    # clipped logit range) after each of a sample of events
    rng = np.random.default_rng(7)
    n = 1500
    z = rng.normal(-1.0, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=n) < scores**1.5
    probes = np.array([1e-15, 1e-9, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-9, 1.0])
    cal = make(prior=None)  # the map of the window alone, which the reference refits
    worst = 0.0
    for i in range(n):
        if i % 37 == 5:
            centres, pos, neg = cal.histogram()
            ref, _ = naive_glm_refit_proba(cal, centres, pos, neg, probes)
            worst = max(worst, float(np.max(np.abs(cal.predict_proba(probes) - ref))))
        cal.learn_one({"s": float(scores[i])}, bool(labels[i]))
    assert worst <= TOL


def test_platt_on_raw_scores_matches_within_the_grid():
    rng = np.random.default_rng(3)
    s = rng.normal(0.0, 2.0, 600)
    y = rng.uniform(size=s.size) < 1 / (1 + np.exp(-(1.5 * s - 0.3)))
    make = lambda: PlattCalibrator(prior=None, buckets=UniformGrid(100, -5.0, 5.0), window=CountWindow(200))  # noqa: E731
    cal = make()
    probes = np.linspace(-5.0, 5.0, 11)
    for i in range(s.size):
        if i % 13 == 3:
            centres, pos, neg = cal.histogram()
            ref, _ = naive_glm_refit_proba(cal, centres, pos, neg, probes)
            assert np.max(np.abs(cal.predict_proba(probes) - ref)) <= TOL
        cal.learn_one({"s": float(s[i])}, bool(y[i]))


def test_separable_window_falls_back_to_the_full_refit():
    # one class, then perfectly separated classes: huge coefficients held finite by l2 only
    cal = PlattCalibrator(prior=None, buckets=LogitGrid(32), window=CountWindow(20))
    s = np.r_[np.full(10, 0.1), np.full(10, 0.9), np.full(10, 0.1)]
    y = np.r_[np.zeros(10), np.ones(10), np.zeros(10)]
    proba, llr = cal.prequential(s, y)
    assert np.all(np.isfinite(proba))
    assert np.all(np.isfinite(llr))
    centres, pos, neg = cal.histogram()
    ref, _ = naive_glm_refit_proba(cal, centres, pos, neg, np.array([0.1, 0.5, 0.9]))
    assert np.max(np.abs(cal.predict_proba([0.1, 0.5, 0.9]) - ref)) <= 1e-6


@pytest.mark.parametrize("make", [PlattCalibrator, GEVCalibrator])
def test_refits_after_merge_and_reload_match_a_converged_full_refit(make):
    # a merge changes many buckets at once; a reload starts from the saved coefficients alone
    import pickle

    rng = np.random.default_rng(4)
    z = rng.normal(-1.0, 1.5, 1200)
    s = 1 / (1 + np.exp(-z))
    y = rng.uniform(size=s.size) < 1 / (1 + np.exp(-(0.9 * z - 0.4)))
    probes = np.array([1e-6, 0.1, 0.3, 0.5, 0.7, 0.9])
    a, b = make(buckets=LogitGrid(128), prior=None), make(buckets=LogitGrid(128), prior=None)
    a.prequential(s[:600], y[:600])
    b.prequential(s[600:900], y[600:900])
    merged = a.merge(b)
    reloaded = pickle.loads(pickle.dumps(merged))
    for cal in (merged, reloaded):
        for i in range(900, 1200, 7):
            centres, pos, neg = cal.histogram()
            ref, _ = naive_glm_refit_proba(cal, centres, pos, neg, probes)
            assert np.max(np.abs(cal.predict_proba(probes) - ref)) <= TOL
            cal.update(s[i : i + 7], y[i : i + 7])
