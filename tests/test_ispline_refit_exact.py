"""ISplineCalibrator's compiled refit equals the I-spline fit of the same histogram.

The calibrator refits from its histogram in one compiled call (``ispline_refit_histogram``), warm
started from the previous fit's free coefficients; the reference is
:func:`streamcal.spline.fit_ispline_on_histogram` on ``histogram()``, solved cold. Every
prediction of the exact default (``refit_every=None``) is compared with the reference's on every
event of hypothesis streams: count windows (evictions), event decay (rescaling), zero and
fractional weights, every knot rule, and streams whose free set changes. Where the window holds
fewer distinct scores than the basis needs, least squares fixes the map only at those scores
(the coefficients are not unique, and any solver's start picks among them): there the maps are
compared at the non-empty bucket centres.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import _prior
from streamcal._kernels.ispline import ispline_refit_histogram
from streamcal.buckets import LogitGrid, UniformGrid
from streamcal.spline import fit_ispline_on_histogram
from streamcal.spline.basis import default_n_knots, ispline_basis
from streamcal.spline.calibrator import ISplineCalibrator
from streamcal.spline.fit import fit_scaled_histogram, unit_scaled
from streamcal.windows import CountWindow, Decay, Unbounded

TOL = 1e-9


def naive_refit_proba(cal, scores):
    """The served probabilities of a cold I-spline fit of ``cal``'s histogram, the fit, and
    whether its Gram matrix is well conditioned (the coefficients then unique)."""
    centres, pos, neg = cal.histogram()
    fitted = fit_ispline_on_histogram(centres, pos, neg, order=cal.order, n_knots=cal.n_knots, knots=cal.knots)
    low, high = _prior.proba_bounds(float(pos.sum() + neg.sum()), float(cal.llr_pseudo_count))
    keep = pos + neg > 0.0
    w = (pos + neg)[keep]
    design = np.column_stack([np.ones(w.size), ispline_basis(centres[keep], fitted.knots, cal.order)])
    eig = np.linalg.eigvalsh(design.T @ (design * (w / w.max())[:, None]))
    return np.clip(fitted.predict(scores), low, high), fitted, bool(eig[0] > 1e-6 * eig[-1])


def assert_matches_cold_fit(cal, scores):
    """``cal``'s map equals a cold fit of its histogram: at ``scores`` when the fit's coefficients
    are unique. Otherwise (fewer distinct scores than the basis needs, or buckets whose weight is
    a rounding residue of evictions, ~1e-16) least squares fixes the map only at the weighted
    scores, and any solver's start picks among the optima: there both maps reach the same least
    squares (relative 1e-12) and agree within 1e-6 at the buckets holding 1e-3 of the largest
    weight."""
    ref, fitted, unique = naive_refit_proba(cal, scores)
    if unique:
        assert np.max(np.abs(cal.predict_proba(scores) - ref)) <= TOL
        return
    centres, pos, neg = cal.histogram()
    w = pos + neg
    at = centres[w > 0.0]
    design = np.column_stack([np.ones(at.size), ispline_basis(at, fitted.knots, cal.order)])
    y = pos[w > 0.0] / w[w > 0.0]

    def squares(coef):
        return float(np.sum(w[w > 0.0] * (y - design @ coef) ** 2))

    served = cal.predict_proba(at)  # refits first, so ``coef_`` is current
    assert abs(squares(cal.coef_) - squares(fitted.coef)) <= 1e-12 * float(w.sum())
    heavy = w[w > 0.0] >= 1e-3 * w.max()
    ref_at = naive_refit_proba(cal, at)[0]
    assert np.max(np.abs(served - ref_at)[heavy]) <= 1e-6


class FullRefitISpline(ISplineCalibrator):
    """The refit before the compiled one: ``fit_distinct`` on the non-empty buckets, warm-started
    from the previous fit's free coefficients."""

    def _refit_from_histogram(self, centres, pos, neg):
        pos, neg, total, pos_total = unit_scaled(pos, neg)
        hint = None if self._coef is None else self._coef > 0.0
        order, inner = int(self.order), self._inner_knots
        fitted = fit_scaled_histogram(centres, pos, neg, total, order, self.n_knots, inner, hint)
        self._set_map(fitted, total, pos_total)


@st.composite
def streams(draw):
    n = draw(st.integers(20, 140))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    z = rng.normal(draw(st.floats(-2.0, 1.0)), draw(st.floats(0.3, 3.0)), n)
    scores = 1 / (1 + np.exp(-z))
    if draw(st.booleans()):  # the relation flips half-way: the free set moves
        truth = np.where(np.arange(n) < n // 2, 1 / (1 + np.exp(-2 * z)), 0.3 + 0.1 * np.tanh(z))
    else:
        truth = 1 / (1 + np.exp(-(0.8 * z - 0.5)))
    labels = rng.uniform(size=n) < truth
    weights = rng.choice([0.0, 0.4, 1.0, 1.0, 2.5], n) if draw(st.booleans()) else np.ones(n)
    window = draw(st.sampled_from([Unbounded(), CountWindow(9), CountWindow(50), Decay(8.0), Decay(2.5)]))
    spline = draw(
        st.sampled_from([{}, {"n_knots": 3}, {"order": 1, "n_knots": 5}, {"order": 2}, {"knots": (0.2, 0.5, 0.8)}])
    )
    return scores, labels, weights, window, spline


@settings(max_examples=50, deadline=None)
@given(streams())
def test_prequential_matches_a_cold_fit_of_the_histogram_on_every_event(stream):
    scores, labels, weights, window, spline = stream
    cal = ISplineCalibrator(prior=None, buckets=LogitGrid(64), window=window, **spline)
    proba, _ = cal.prequential(scores, labels, weights=weights)
    before, _ = FullRefitISpline(prior=None, buckets=LogitGrid(64), window=window, **spline).prequential(
        scores, labels, weights=weights
    )
    np.testing.assert_allclose(proba, before, rtol=0.0, atol=1e-12)  # the same steps as before
    hist = ISplineCalibrator(prior=None, buckets=LogitGrid(64), window=window, **spline)  # the same refits, one by one
    for i in range(scores.size):
        if hist.n_learned and float(np.sum(hist.histogram()[1] + hist.histogram()[2])) > 0.0:
            assert hist.predict_proba(scores[i : i + 1])[0] == proba[i]
            assert_matches_cold_fit(hist, scores[i : i + 1])
        hist.update(scores[i : i + 1], labels[i : i + 1], weights=weights[i : i + 1])


def test_free_set_changes_and_every_map_matches_the_cold_fit():
    rng = np.random.default_rng(11)
    n = 1200
    z = rng.normal(-0.5, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    truth = np.where(np.arange(n) % 400 < 200, 1 / (1 + np.exp(-2.5 * z)), 0.2 + 0.5 * (z > 1.0))
    labels = rng.uniform(size=n) < truth
    probes = np.array([1e-9, 0.05, 0.2, 0.4, 0.5, 0.6, 0.8, 0.95, 1.0])
    cal = ISplineCalibrator(prior=None, window=CountWindow(150), n_knots=6)
    free_sets = set()
    n_unique = 0
    for i in range(n):
        if i >= 1:
            assert_matches_cold_fit(cal, probes)
            _, fitted, unique = naive_refit_proba(cal, probes)
            np.testing.assert_array_equal(cal.knots_, fitted.knots)
            n_unique += unique
            free_sets.add(tuple(cal.coef_ > 0.0))
        cal.learn_one({"s": float(scores[i])}, bool(labels[i]))
    assert n_unique >= 1000  # compared at the probes, not only at the data
    assert len(free_sets) >= 5  # the warm start's guess was wrong many times over


def naive_histograms(rng):
    centres = np.sort(rng.uniform(-3.0, 3.0, 40))
    for kind in range(6):
        pos = rng.poisson(3.0, 40).astype(float)
        neg = rng.poisson(3.0, 40).astype(float)
        if kind == 1:
            pos[rng.uniform(size=40) < 0.8] = 0.0
            neg[pos == 0.0] = 0.0
            pos[7] = 1.0  # one bucket non-empty at least
        if kind == 2:
            pos[:] = 0.0
            neg[:] = 0.0
            neg[13] = 2.0  # a single non-empty bucket: a constant map
        if kind == 3:
            pos, neg = pos * 2.0**-480, neg * 2.0**-480
        if kind == 4:
            pos, neg = pos * rng.uniform(size=40), neg * rng.uniform(size=40)
        yield centres, pos, neg


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("knots", [None, 0, 4, "explicit"])
def test_compiled_refit_equals_fit_distinct(order, knots):
    rng = np.random.default_rng(order)
    for centres, pos, neg in naive_histograms(rng):
        inner = np.array([-1.0, 0.0, 1.5]) if knots == "explicit" else None
        n_knots = None if knots in (None, "explicit") else knots
        ref = fit_ispline_on_histogram(centres, pos, neg, order=order, n_knots=n_knots, knots=inner)
        total = float(pos.sum() + neg.sum())
        wanted = default_n_knots(total) if n_knots is None else n_knots
        cache = np.full((centres.size + 1, order + 3), -1.0)
        cache[0, 0] = 0.0
        previous = np.empty(0)
        for hint in (np.zeros(0, dtype=bool), ref.coef > 0.0, np.ones(ref.coef.size, dtype=bool)):
            # the first call fills the basis cache, the next ones read it
            t, coef, beta, n_iter = ispline_refit_histogram(
                centres,
                pos,
                neg,
                order,
                wanted,
                np.empty(0) if inner is None else inner,
                inner is not None,
                hint,
                ref.knots,
                previous,
                cache,
            )
            previous = t
            np.testing.assert_array_equal(t, ref.knots)
            np.testing.assert_allclose(coef, ref.coef, rtol=0.0, atol=1e-12)
            np.testing.assert_array_equal(beta, np.minimum(np.cumsum(coef), 1.0))
            assert n_iter >= 0


def test_raw_scores_on_a_uniform_grid_match():
    rng = np.random.default_rng(5)
    s = rng.normal(0.0, 2.0, 500)
    y = rng.uniform(size=s.size) < 1 / (1 + np.exp(-(1.5 * s - 0.3)))
    cal = ISplineCalibrator(prior=None, buckets=UniformGrid(100, -5.0, 5.0), window=Decay(60.0))
    probes = np.linspace(-6.0, 6.0, 13)
    for i in range(s.size):
        if i % 11 == 4:
            assert_matches_cold_fit(cal, probes)
        cal.learn_one({"s": float(s[i])}, bool(y[i]))


@pytest.mark.parametrize("n_knots", [None, 10**30])
def test_knot_counts_beyond_the_buckets_are_capped(n_knots):
    # the paper's rule on a huge window weight, or a huge explicit count, asks for more knots
    # than any histogram has buckets
    cal = ISplineCalibrator(prior=None, buckets=LogitGrid(32), n_knots=n_knots)
    s = np.linspace(0.05, 0.95, 20)
    cal.update(s, s > 0.5, weights=np.full(20, 1e100))
    ref, _, _ = naive_refit_proba(cal, s)
    served = cal.predict_proba(s)
    assert np.all(np.isfinite(served))
    assert np.max(np.abs(served - ref)) <= TOL

