"""Shared test helpers: river's checks as pytest cases, the river-loop reference, common assertions."""

from __future__ import annotations

import numpy as np
import pytest
from river import checks


def river_check_cases(*classes):
    """Yield ``pytest.param(cls, params, check)`` for every check river yields for each class.

    Checks listed in the estimator's ``_unit_test_skips`` are marked skipped; the reason is written
    next to each name in that method.
    """
    for cls in classes:
        for i, params in enumerate(cls._unit_test_params()):
            model = cls(**params)
            skips = model._unit_test_skips()
            for check in checks.yield_checks(model):
                name = check.__name__
                dataset = getattr(check, "keywords", {}).get("dataset")
                label = f"{cls.__name__}-params{i}-{name}" + ("" if dataset is None else f"-{type(dataset).__name__}")
                marks = [pytest.mark.skip(reason=f"listed in {cls.__name__}._unit_test_skips")] if name in skips else []
                yield pytest.param(cls, params, check, id=label, marks=marks)


def river_loop(cal, scores, labels, ops, weights, times):
    """What the array face must equal: a loop of the river methods over an operation sequence.

    ``ops[i]``: 1 learn, 2 predict, 3 predict then learn. Returns ``(proba, llr)``, NaN where
    nothing was predicted.
    """
    p = np.full(len(scores), np.nan)
    llr = np.full(len(scores), np.nan)
    for i, s in enumerate(scores):
        if ops[i] & 2:
            p[i] = cal.predict_proba_one({"s": s})[True]
            llr[i] = cal.predict_llr_one({"s": s})
        if ops[i] & 1:
            cal.learn_one({"s": s}, bool(labels[i]), w=weights[i], t=times[i])
    return p, llr


def assert_array_face_equals_river_loop(make, rng, n, snapshot):
    """``prequential`` and ``process`` equal a loop of the river methods, outputs and final state.

    ``make()`` builds a fresh calibrator; ``snapshot(cal)`` returns bytes that are equal exactly when
    two calibrators hold equal state. Returns the calibrator that ran ``process``.
    """
    scores = rng.uniform(size=n)
    labels = rng.uniform(size=n) < scores
    weights = rng.choice([0.5, 1.0, 1.7], size=n)
    times = np.cumsum(rng.choice([0.0, 0.3, 1.0], size=n))
    a, b = make(), make()
    p, llr = a.prequential(scores, labels, weights=weights, times=times)
    lp, lllr = river_loop(b, scores, labels, np.full(n, 3), weights, times)
    np.testing.assert_array_equal(p, lp)
    np.testing.assert_array_equal(llr, lllr)
    assert snapshot(a) == snapshot(b)
    mask = rng.uniform(size=n) < 0.6
    a2, b2 = make(), make()
    p, llr = a2.process(scores, labels, mask, weights=weights, times=times)
    lp, lllr = river_loop(b2, scores, labels, np.where(mask, 1, 2), weights, times)
    np.testing.assert_array_equal(p, lp)
    np.testing.assert_array_equal(llr, lllr)
    assert np.isnan(p[mask]).all()
    assert not np.isnan(p[~mask]).any()
    assert snapshot(a2) == snapshot(b2)
    return a2, scores


def assert_monotone_on_unit_grid(cal):
    """Probabilities in [0, 1] and finite LLRs, both non-decreasing in the score over [0, 1]."""
    grid = np.linspace(0.0, 1.0, 2001)
    p, llr = cal.predict_proba(grid), cal.predict_llr(grid)
    assert (np.diff(p) >= 0).all()
    assert (np.diff(llr) >= 0).all()
    assert np.isfinite(llr).all()
    assert ((p >= 0) & (p <= 1)).all()
