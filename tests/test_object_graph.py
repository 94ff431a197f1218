"""A learner's objects never reach numba's dispatchers or streamcal's kernel wrappers.

river's ``_raw_memory_usage`` (its ``check_bounded_memory_growth``) walks every object a learner
reaches, skipping classes, modules and functions; a dispatcher leads it into numba's internals,
whose weak proxies raise ``ReferenceError`` once their targets are gone, so the check failed at
random. The learners' caches name their kernels instead of holding them."""

from __future__ import annotations

import gc
import types

import numba
import numpy as np
import pytest

import streamcal
from streamcal._kernels import _config
from streamcal._registry import BUILTIN_CALIBRATORS, builtin_calibrator


def _kernels_reached(model) -> list[str]:
    """The dispatchers and kernel wrappers reachable from ``model`` by river's walk."""
    skipped = (type, types.ModuleType, types.FunctionType)
    seen: set[int] = set()
    pending, found = [model], []
    while pending:
        following = []
        for obj in pending:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, (numba.core.dispatcher.Dispatcher, _config.Kernel)):
                found.append(repr(obj))
            elif not isinstance(obj, (*skipped, np.ndarray)):
                following.extend(gc.get_referents(obj))
        pending = following
    return found


def _stream(n=500, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.01, 0.99, size=n)
    return s, rng.uniform(size=n) < s


def _used(cal, s, y, x_of):
    for i in range(s.size):
        x = x_of(i)
        cal.predict_proba_one(x)
        cal.learn_one(x, bool(y[i]))
    return cal


def _learners():
    s, y = _stream()
    for name in BUILTIN_CALIBRATORS:
        cls = builtin_calibrator(name)
        for params in ({}, {"refit_every": 50}):
            try:
                cal = cls(**params)
            except TypeError:  # no refit_every
                continue
            yield f"{name}{params}", _used(cal, s, y, lambda i: {"score": float(s[i])})
            cal = cls(**params)
            cal.prequential(s, y)
            yield f"{name}{params}-arrays", cal
    for inner in (streamcal.PAVCalibrator(), streamcal.PlattCalibrator(), streamcal.ISplineCalibrator()):
        keyed = streamcal.KeyedCalibrator(inner, key_key="k", score_key="s")
        yield f"keyed-{type(inner).__name__}", _used(keyed, s, y, lambda i: {"k": f"c{i % 7}", "s": float(s[i])})
    rng = np.random.default_rng(1)
    scores = rng.dirichlet(np.ones(4), size=s.size)
    labels = (scores.cumsum(axis=1) < rng.uniform(size=(s.size, 1))).sum(axis=1)
    for coupling in ("ht", "wlw"):
        coupled = streamcal.PairwiseCouplingCalibrator(method=coupling)
        for row, label in zip(scores, labels, strict=True):
            x = dict(enumerate(row.tolist()))
            coupled.predict_proba_one(x)
            coupled.learn_one(x, int(label))
        yield f"coupling-{coupling}", coupled


@pytest.mark.parametrize("model", [pytest.param(model, id=label) for label, model in _learners()])
def test_no_learner_reaches_a_kernel(model):
    assert _kernels_reached(model) == []
