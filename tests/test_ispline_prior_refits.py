"""The exact I-spline refit while the score prior is in force: warm starts across basis sizes.

With the score prior in force (calibrated scores: its strength in the thousands) the refit fits
the histogram plus the prior's pseudo-counts, whose total moves with the prior's strength; a knot
rule that follows that total (the default's before its count followed the data's weight alone, kept
here in a subclass) makes the basis gain or lose a coefficient on many refits, as a basis does
wherever the knot count changes between refits. The active-set solve then starts from the previous free set mapped onto the new basis
(``warm_free_set``): a handful of subproblem solves, where a cold start takes about one per free
coefficient. Each refit is checked against the cold solve of the same system (the reference) and
counted in subproblem solves, never timed.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import BSpline

from streamcal import ISplineCalibrator
from streamcal._kernels.ispline import (
    free_set_band_solve,
    ispline_refit_histogram,
    nnls_sum_capped_gram,
    warm_free_set,
)
from streamcal.spline.fit import evaluate_map

TOL = 1e-9


def naive_nearest_greville(old_knots, old_free, new_knots, order):
    """For each new coefficient, the free state of the old one with the nearest Greville
    abscissa (the first of equally near ones), by brute force."""

    def greville(t, p):
        return np.array([np.mean(t[q + 1 : q + order + 1]) for q in range(p)])

    g_old = greville(old_knots, old_free.size)
    g_new = greville(new_knots, new_knots.size - order - 1)
    out = []
    for g in g_new:
        dist = np.abs(g_old - g)
        out.append(bool(old_free[int(np.flatnonzero(dist == dist.min())[-1])]))
    return np.array(out)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_warm_free_set_takes_the_nearest_old_coefficients_state(order):
    rng = np.random.default_rng(order)
    for _ in range(50):
        inner = np.sort(rng.choice(np.linspace(0.0, 1.0, 41)[1:-1], rng.integers(0, 12), replace=False))
        keep = rng.uniform(size=inner.size) < 0.8
        extra = np.sort(rng.uniform(0.0, 1.0, rng.integers(0, 3)))
        old_knots = np.concatenate([np.zeros(order + 1), inner, np.ones(order + 1)])
        new_inner = np.unique(np.concatenate([inner[keep], extra]))
        new_knots = np.concatenate([np.zeros(order + 1), new_inner, np.ones(order + 1)])
        old_p = old_knots.size - order - 1
        new_p = new_knots.size - order - 1
        old_coef = np.where(rng.uniform(size=old_p) < 0.7, rng.uniform(0.01, 0.2, old_p), 0.0)
        free = np.ones(new_p + 3, dtype=bool)  # entries past new_p stay untouched
        warm_free_set(old_knots, old_coef, old_p, new_knots, new_p, order, free)
        expected = naive_nearest_greville(old_knots, old_coef > 0.0, new_knots, order)
        np.testing.assert_array_equal(free[:new_p], expected)
        assert free[new_p:].all()
        cold = np.ones(new_p, dtype=bool)
        warm_free_set(old_knots, old_coef, 0, new_knots, new_p, order, cold)
        assert not cold.any()  # no previous fit: the cold start


def calibrated_stream(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, n)
    scores = 1.0 / (1.0 + np.exp(-z))
    return scores, rng.uniform(size=n) < scores


class PseudoCountKnots(ISplineCalibrator):
    """The default knot count of the whole fitted weight, the prior's pseudo-counts included."""

    def _knot_weight(self, total):
        return total


def test_refits_under_the_prior_stay_warm_when_the_basis_changes_size(monkeypatch):
    """Every prediction within 1e-9 of the cold solve's, and a few subproblem solves per refit.

    The coefficients themselves are not compared at 1e-9: with the pseudo-counts in every bucket
    and over 100 knots the Gram matrix's condition number is about 1e9, so any two exact solves
    of it (the cold and a warm start, as before this warm start) agree in the objective to the
    last digit but in the extreme coefficients only to about 1e-7, where the map lies below the
    served bound ``c / (W + 2c)`` or above its complement."""
    scores, labels = calibrated_stream(2000, 3)
    cal = PseudoCountKnots(refit_every=50)  # the prior "auto"
    cal.prequential(scores[:1900], labels[:1900])
    cal.refit_every = None
    grid = 1.0 / (1.0 + np.exp(-np.linspace(-12.0, 6.0, 1001)))
    refits = []

    def counted(*args):
        result = ispline_refit_histogram(*args)
        # the reference: the same system solved from the cold start
        cold = ispline_refit_histogram(*args[:7], np.zeros(0, dtype=bool), *args[8:])
        refits.append((args[7].size, result[1].size, result[3], cold))
        return result

    monkeypatch.setattr("streamcal.spline.calibrator._k.ispline_refit_histogram", counted)
    for i in range(1900, 2000):
        cal.prequential(scores[i : i + 1], labels[i : i + 1])
        served = cal.predict_proba(grid)
        knots, _, beta, _ = refits[-1][3]
        np.testing.assert_array_equal(cal.knots_, knots)
        # the served bounds (add-c of the fit's weight, pseudo-counts included) read off the grid's
        # ends: the map is monotone, so clipping the reference there checks every point in between
        reference = np.clip(evaluate_map(grid, knots, cal.order, beta), served[0], served[-1])
        assert np.max(np.abs(served - reference)) <= TOL
    assert cal.prior_strength > 100.0  # the prior in force throughout
    resized = [r for r in refits if r[0] != r[1]]
    assert len(refits) >= 90
    assert len(resized) >= 20  # the basis changed size on many refits
    assert min(r[1] for r in refits) >= 100  # a large basis: a cold start costs ~100 solves
    assert all(r[3][3] >= 50 for r in resized)  # as the cold reference shows
    # warm: a few subproblem solves each, resized or not
    assert max(r[2] for r in refits) <= 4
    assert sum(r[2] for r in refits) <= 2 * len(refits)


def naive_normal_equations(x, w, y, t, order):
    """The banded ``B' W B`` (``band[j, d] = (B' W B)[j, j + d]``), ``B' W y`` and the I-spline
    normal equations ``T' B' W B T``, ``T' B' W y`` (``T`` lower-triangular ones), by scipy's
    B-spline design matrix."""
    design = BSpline.design_matrix(x, t, order).toarray()
    k = design.T @ (design * w[:, None])
    c = design.T @ (w * y)
    p = k.shape[0]
    band = np.zeros((p, order + 1))
    for d in range(order + 1):
        band[: p - d, d] = np.diagonal(k, d)
    tri = np.tril(np.ones((p, p)))
    return band, c, tri.T @ k @ tri, tri.T @ c


@pytest.mark.parametrize("order", [1, 2, 3])
def test_free_set_band_solve_keeps_only_the_solvers_optimum(order):
    rng = np.random.default_rng(10 + order)
    kept_right = 0
    for case in range(40):
        n = int(rng.integers(order + 8, 60))
        x = np.sort(rng.uniform(0.0, 1.0, n))
        w = rng.uniform(0.5, 3.0, n)
        slope = rng.uniform(-1.0, 3.0)
        y = np.clip(0.3 + slope * (x - 0.5) + rng.normal(0.0, 0.2, n), 0.0, 1.0)
        if case % 10 == 9:
            y[:] = 1.0  # the cap in force: the banded try must step aside
        inner = np.sort(rng.uniform(x[0], x[-1], int(rng.integers(1, 6))))
        t = np.concatenate([np.full(order + 1, x[0]), inner, np.full(order + 1, x[-1])])
        band, cross, gram, rhs = naive_normal_equations(x, w, y, t, order)
        p = gram.shape[0]
        best = np.empty(p)
        nnls_sum_capped_gram(gram, rhs, 1.0, best)
        hints = [best > 0.0, np.ones(p, dtype=bool)] + [rng.uniform(size=p) < 0.7 for _ in range(4)]
        for h, hint in enumerate(hints):
            free = hint.copy()
            out = np.empty(p)
            kept = free_set_band_solve(band, cross, gram, rhs, p, order, free, 1.0, out)
            np.testing.assert_array_equal(free, hint)  # the guess is not changed
            if kept:
                np.testing.assert_allclose(out, best, rtol=0.0, atol=1e-10)
                assert out.min() >= 0.0
                assert out.sum() <= 1.0
            if abs(best.sum() - 1.0) < 1e-12:
                assert not kept  # the cap in force: the solver's own steps
            elif h == 0 and np.linalg.cond(gram) < 1e10 and best[best > 0.0].min() > 1e-9:
                assert kept  # the optimum's own free set, off the cap, determined: solved banded
                kept_right += 1
    assert kept_right >= 10
