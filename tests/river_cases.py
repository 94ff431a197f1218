"""Shared test helpers: streamcal's public estimators, stand-in river models, the river-loop
reference, common assertions."""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import threading

import numpy as np
from river import base
from river.metrics.base import Metric

import streamcal
from streamcal.isotonic import pav


# ---------------------------------------------------------------------------- public classes
def public_classes() -> dict:
    """Every class in the ``__all__`` of a public streamcal module, by ``module.qualname``.

    Private modules (a part starting with ``_``) hold base classes and kernels; what they define
    for users is re-exported by a public module.
    """
    seen = {}
    for info in pkgutil.walk_packages(streamcal.__path__, "streamcal."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.isclass(obj) and obj.__module__.startswith("streamcal"):
                seen[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return dict(sorted(seen.items()))


def streamcal_estimators() -> dict:
    """The public river estimators of streamcal that can be built: calibrators, classifiers,
    multiclass calibrators, by ``module.qualname``."""
    return {
        name: cls
        for name, cls in public_classes().items()
        if issubclass(cls, base.Estimator) and not inspect.isabstract(cls) and hasattr(cls, "_unit_test_params")
    }


def streamcal_metrics() -> dict:
    """The public river metrics of streamcal, by ``module.qualname``."""
    return {name: cls for name, cls in public_classes().items() if issubclass(cls, Metric) and not inspect.isabstract(cls)}


# ---------------------------------------------------------------------------- stand-in river models
class HistogramPAV(base.Classifier):
    """Test-local streaming stand-in: PAV over a fixed uniform histogram of probability scores.

    Same face as the streamcal binary streaming calibrators (one-score dict in, bool label).
    """

    def __init__(self, n_buckets: int = 20, score_key: str | None = None):
        self.n_buckets = n_buckets
        self.score_key = score_key
        self._pos = np.zeros(n_buckets)
        self._neg = np.zeros(n_buckets)

    def _bucket(self, x: dict) -> int:
        (s,) = x.values() if self.score_key is None else (x[self.score_key],)
        return min(int(s * self.n_buckets), self.n_buckets - 1)

    def learn_one(self, x, y):
        b = self._bucket(x)
        if y:
            self._pos[b] += 1.0
        else:
            self._neg[b] += 1.0

    def _fitted(self, b: int) -> float:
        tot = self._pos + self._neg
        has = tot > 0
        if not has.any():
            return 0.5
        fit = pav(self._pos[has] / tot[has], tot[has])
        idx = np.flatnonzero(has)
        j = int(np.clip(np.searchsorted(idx, b, side="right") - 1, 0, idx.size - 1))
        return float((fit[j] * tot[has][j] + 1.0) / (tot[has][j] + 2.0))  # keep it inside (0, 1)

    def predict_proba_one(self, x):
        p = self._fitted(self._bucket(x))
        return {False: 1.0 - p, True: p}

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the positive and negative counts per bucket."""
        return self._pos.copy(), self._neg.copy()

    def predict_llr_one(self, x):
        p = self._fitted(self._bucket(x))
        t1 = self._pos.sum() + 1.0
        t = self._pos.sum() + self._neg.sum() + 2.0
        return math.log(p / (1 - p)) - math.log(t1 / (t - t1))


class FrequencyBlend(base.Classifier):
    """Test-local multiclass stand-in: averages the model's distribution with the class frequencies."""

    def __init__(self, alpha: float = 0.5):
        self.alpha = alpha
        self._counts: dict = {}

    @property
    def _multiclass(self):
        return True

    def learn_one(self, x, y):
        self._counts[y] = self._counts.get(y, 0) + 1

    def predict_proba_one(self, x):
        classes = set(self._counts) | set(x)
        n = sum(self._counts.values())
        out = {}
        for c in classes:
            freq = self._counts.get(c, 0) / n if n else 1.0 / len(classes)
            out[c] = self.alpha * x.get(c, 0.0) + (1 - self.alpha) * freq
        z = sum(out.values())
        return {c: v / z for c, v in out.items()} if z > 0 else {}


# ---------------------------------------------------------------------------- the river face
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


# ---------------------------------------------------------------------------- mechanisms without a public face
# The tests of thread safety check two mechanisms: a learner's lock, which no public method shows,
# and the packed buffer that a PAVCalibrator's lock-free river face reads (busy-marked while the
# lock is held; ``packed_state()``). They read them here, in one place.
def lock_of(learner):
    """The lock that every public method of ``learner`` holds."""
    return learner._lock


def river_face_buffer(cal):
    """The packed buffer of a :class:`~streamcal.PAVCalibrator`'s state that its lock-free river
    face reads (``streamcal._kernels.ipav.PACK_BUSY`` is its busy mark)."""
    return cal.packed_state()


def river_pairs_beside_an_array_learner(cal, scores, labels, start: int, split: int, block: int, check=None):
    """Two threads run river pairs (``predict_proba_one``, then ``learn_one``) over events
    ``start .. split - 1`` of ``scores``/``labels``, one each on alternate events, while a third
    learns the events from ``split`` on by the array face in blocks of ``block`` (calling ``check(cal)``
    after each block); returns the exceptions any of them raised (none on a thread-safe calibrator)."""
    errors = []

    def river(part):
        def job():
            try:
                for i in range(start + part, split, 2):
                    x = {"score": float(scores[i])}
                    p = cal.predict_proba_one(x)[True]
                    assert 0.0 <= p <= 1.0
                    cal.learn_one(x, bool(labels[i]))
            except BaseException as exc:  # reported by the caller
                errors.append(exc)

        return job

    def array_job():
        try:
            for lo in range(split, len(scores), block):
                cal.update(scores[lo : lo + block], labels[lo : lo + block])
                if check is not None:
                    check(cal)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=job) for job in (river(0), river(1), array_job)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120.0)
    return errors


def generic_river(cls):
    """``cls`` with the generic river methods of the base class (every call under the lock, no
    inline or lock-free path): the reference the faces' own paths must equal."""
    from streamcal._streaming import StreamingCalibrator

    methods = {"learn_one": StreamingCalibrator.learn_one, "predict_proba_one": StreamingCalibrator.predict_proba_one}
    return type(f"Generic{cls.__name__}", (cls,), methods)


def finishes_while_held(lock, call, patience: float, join_timeout: float = 120.0) -> bool:
    """Whether ``call()``, run by another thread, finishes within ``patience`` seconds while this
    thread holds ``lock`` (it finishes after the release in any case)."""
    done = threading.Event()

    def job():
        call()
        done.set()

    worker = threading.Thread(target=job, daemon=True)
    with lock:
        worker.start()
        finished = done.wait(patience)
    worker.join(join_timeout)
    assert done.is_set()
    return finished


def deferring_classes() -> dict:
    """The calibrators whose river faces defer work (``streamcal.gev._river.DeferredRiverFace``),
    by short name."""
    return {"ispline": streamcal.ISplineCalibrator, "gev": streamcal.GEVCalibrator, "platt": streamcal.PlattCalibrator}


def logistic_stream(n, seed):
    """``n`` seeded click-like events: scores ``expit(z)``, ``z ~ N(-1, 1.5)``, labels from
    ``expit(0.8 z - 1)`` (a miscalibrated score)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.0, 1.5, n)
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(0.8 * z - 1.0)))


def river_pairs_alike(cal, plain, scores, labels, start, stop):
    """River pairs over events ``start .. stop - 1`` on ``cal`` and ``plain`` alike, asserting
    that each prediction (made before the event's label) is the same dict on both."""
    for i in range(start, stop):
        x = {"score": float(scores[i])}
        assert cal.predict_proba_one(x) == plain.predict_proba_one(x)
        for c in (cal, plain):
            c.learn_one(x, bool(labels[i]))
