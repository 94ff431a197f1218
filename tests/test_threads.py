"""Thread safety: concurrent calls on one learner behave as some serial order of them.

Threads hammer one learner with every kind of call at once (river face, array face,
prequential, predictions, property reads, copies and saves) while the interpreter switches
threads every few microseconds. Nothing may be lost (totals equal the events fed, exactly: the
weights are whole numbers, so every sum is exact in any order), no prediction may see a
half-updated state (every probability in [0, 1], every LLR finite, PAV's map non-decreasing),
and where the final state does not depend on the order (an unbounded window's histogram) it
equals that of a serial run, bit for bit.
"""

from __future__ import annotations

import copy
import pickle
import sys
import threading
import time

import numpy as np
import pytest
from river import linear_model
from river_cases import finishes_while_held, lock_of, river_face_buffer

from streamcal import (
    CalibratedClassifier,
    GEVCalibrator,
    ISplineCalibrator,
    PAVCalibrator,
    PlattCalibrator,
    persist,
)
from streamcal._kernels import ipav
from streamcal.buckets import LogitGrid, QuantileEdges
from streamcal.gev import GEVCanonicalClassifier
from streamcal.isotonic import streaming as pav_module
from streamcal.metrics import Brier
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

GRID = np.linspace(0.0005, 0.9995, 97)
JOIN_TIMEOUT = 120.0  # seconds; a thread still running then is a deadlock


@pytest.fixture(autouse=True)
def fast_switching():
    """Switch threads every 10 µs (CPython's default is 5 ms): races surface in short runs."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def events(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.001, 0.999, size=n)
    y = rng.uniform(size=n) < s
    return s, y


def run_threads(learners, watchers=()):
    """Run ``learners`` to completion and ``watchers`` until then, all at once; re-raise any failure.

    A watcher is called repeatedly (at least once) until every learner has finished.
    """
    errors = []
    done = threading.Event()
    start = threading.Barrier(len(learners) + len(watchers))
    remaining = [len(learners)]
    count_lock = threading.Lock()

    def learner(job):
        try:
            start.wait()
            job()
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)
        finally:
            with count_lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()

    def watcher(job):
        try:
            start.wait()
            job()
            while not done.is_set():
                job()
        except BaseException as exc:
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=learner, args=(j,), daemon=True) for j in learners]
    threads += [threading.Thread(target=watcher, args=(j,), daemon=True) for j in watchers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
        assert not t.is_alive(), "a thread is still running: deadlock"
    if errors:
        raise errors[0]


def check_proba(p, llr=None, *, monotone: bool = False):
    p = np.asarray(p, dtype=np.float64)
    assert np.all((p >= 0.0) & (p <= 1.0)), p[~((p >= 0.0) & (p <= 1.0))]
    if monotone:
        assert np.all(np.diff(p) >= 0.0), "a prediction saw a half-updated (non-monotone) map"
    if llr is not None:
        assert np.all(np.isfinite(llr)), llr


# ---------------------------------------------------------------------------------------- jobs
def river_learner(cal, s, y, times=False):
    def job():
        for v, label in zip(s.tolist(), y.tolist(), strict=True):
            if times:
                cal.learn_one({"s": v}, label, t=0.0)
            else:
                cal.learn_one({"s": v}, label)

    return job


def array_learner(cal, s, y, times=False, block=1024, prequential=False):
    def job():
        for lo in range(0, s.size, block):
            part = slice(lo, lo + block)
            t = np.zeros(s[part].size) if times else None
            if prequential:
                p, llr = cal.prequential(s[part], y[part], times=t)
                check_proba(p, llr)
            else:
                cal.update(s[part], y[part], times=t)

    return job


def predictor(cal, *, monotone: bool, n_max: int):
    rng = np.random.default_rng(7)
    seen = [0]

    def job():
        for v in rng.uniform(0.0, 1.0, size=20).tolist():
            p = cal.predict_proba_one({"s": v})
            assert p[False] == 1.0 - p[True]
            check_proba([p[True]], [cal.predict_llr_one({"s": v})])
            assert isinstance(cal.predict_one({"s": v}), bool)
        check_proba(cal.predict_proba(GRID), cal.predict_llr(GRID), monotone=monotone)
        n = cal.n_learned
        assert seen[0] <= n <= n_max  # never backwards, never beyond what was fed
        seen[0] = n
        weight = cal.window_weight
        assert 0.0 <= weight <= n_max

    return job


def split(s, y, parts):
    return [(s[k::parts], y[k::parts]) for k in range(parts)]


# ---------------------------------------------------------------------------------------- binary calibrators
def hammer_binary(make, n, *, monotone, times=False, prequential=True):
    """Two river learners, one array learner, one prequential learner, two predictors."""
    cal = make()
    s, y = events(n)
    shares = split(s, y, 4)
    learners = [
        river_learner(cal, *shares[0], times=times),
        river_learner(cal, *shares[1], times=times),
        array_learner(cal, *shares[2], times=times),
        array_learner(cal, *shares[3], times=times, prequential=prequential),
    ]
    run_threads(learners, [predictor(cal, monotone=monotone, n_max=n), predictor(cal, monotone=monotone, n_max=n)])
    return cal, s, y


def totals(cal):
    _, pos, neg = cal.histogram()
    return float(pos.sum()), float(neg.sum())


PAV_WINDOWS = {
    "unbounded": lambda: PAVCalibrator(prior=None),
    "count": lambda: PAVCalibrator(prior=None, window=CountWindow(3000)),
    "step, 64 buckets": lambda: PAVCalibrator(prior=None, buckets=LogitGrid(64), interpolation="step", finite_proba=True),
}


@pytest.mark.parametrize("name", list(PAV_WINDOWS))
def test_pav_loses_nothing_and_never_tears(name):
    n = 24_000
    cal, s, y = hammer_binary(PAV_WINDOWS[name], n, monotone=True)
    kept = min(n, getattr(cal.window, "n", n))
    assert cal.n_learned == n
    assert cal.window_weight == kept
    assert sum(totals(cal)) == kept
    if name != "count":  # the histogram does not depend on the order: the serial run's, bit for bit
        serial = PAV_WINDOWS[name]().update(s, y)
        assert totals(cal) == totals(serial)
        np.testing.assert_array_equal(cal.histogram()[1], serial.histogram()[1])
        np.testing.assert_array_equal(cal.histogram()[2], serial.histogram()[2])
        np.testing.assert_array_equal(cal.predict_proba(GRID), serial.predict_proba(GRID))
        np.testing.assert_array_equal(cal.predict_llr(GRID), serial.predict_llr(GRID))


def test_pav_time_window_ring_growth_under_threads():
    """All events at one time: the ring grows from 1024 to hold them while others predict."""
    n = 12_000
    cal, _, _ = hammer_binary(lambda: PAVCalibrator(window=TimeWindow(10.0)), n, monotone=True, times=True)
    assert cal.n_learned == n
    assert cal.window_weight == n
    assert sum(totals(cal)) == n


def test_pav_decay_window_under_threads():
    n = 12_000
    cal, _, _ = hammer_binary(lambda: PAVCalibrator(window=Decay(2000.0)), n, monotone=True)
    assert cal.n_learned == n
    assert 0.0 < cal.window_weight < 2000.0 / np.log(2.0) + 1.0


def test_pav_quantile_warmup_completes_under_threads():
    """The warm-up's buffer fills from several threads and the edges are built mid-run."""
    n = 8_000
    make = lambda: PAVCalibrator(buckets=QuantileEdges(n_buckets=32, warmup=1500))  # noqa: E731
    cal, _, _ = hammer_binary(make, n, monotone=True)
    assert cal.n_learned == n
    assert cal.window_weight == n
    assert sum(totals(cal)) == n


@pytest.mark.parametrize(
    "make",
    [
        lambda: ISplineCalibrator(n_knots=3, refit_every=400),
        lambda: GEVCalibrator(xi=0.0, refit_every=400),
        lambda: PlattCalibrator(refit_every=400),
        lambda: PlattCalibrator(window=CountWindow(1000)),  # lazy refits, from the predictions
    ],
    ids=["ispline", "gev", "platt", "platt-lazy-count"],
)
def test_map_fitting_calibrators_lose_nothing(make):
    n = 4_000
    cal, s, y = hammer_binary(make, n, monotone=False)
    kept = min(n, getattr(cal.window, "n", n))
    assert cal.n_learned == n
    assert cal.window_weight == kept
    assert sum(totals(cal)) == kept
    if isinstance(cal.window, (Unbounded, type(None))):
        serial = make().update(s, y)
        np.testing.assert_array_equal(cal.histogram()[1], serial.histogram()[1])
        np.testing.assert_array_equal(cal.histogram()[2], serial.histogram()[2])


def test_pav_n_jobs_prequential_is_exact_while_others_predict():
    """A threaded prequential (n_jobs=2) runs whole under the lock; predictions do not change it."""
    n = 2 * pav_module.MIN_EVENTS_PER_THREAD + 1000
    s, y = events(n, seed=3)
    cal = PAVCalibrator(window=CountWindow(5000), n_jobs=2)
    out = {}

    def learn():
        out["p"], out["llr"] = cal.prequential(s, y)

    run_threads([learn], [predictor(cal, monotone=True, n_max=n)])
    p, llr = PAVCalibrator(window=CountWindow(5000)).prequential(s, y)
    np.testing.assert_array_equal(out["p"], p)
    np.testing.assert_array_equal(out["llr"], llr)
    assert cal.n_learned == n


@pytest.mark.parametrize(
    ("make", "method", "m"),
    [(PAVCalibrator, "prequential", 300_000), (PlattCalibrator, "update", 2_000_000)],
    ids=["pav-prequential", "platt-update"],
)
def test_an_array_call_is_atomic_for_observers(make, method, m):
    """Observers see the state before a long array call or after it, never part of the way.

    The call learns ``m`` positives at one score (event by event for a prequential): the
    probability there climbs through many values inside the call, and observers (the river face,
    lock-free for PAV) run meanwhile whenever the kernel, which releases the GIL, leaves them a core.
    """
    cal = make().update(np.full(1000, 0.5), np.arange(1000) % 2)

    def state():
        return cal.predict_proba_one({"s": 0.5})[True], cal.window_weight, cal.n_learned

    before = state()
    seen = set()

    def call():
        getattr(cal, method)(np.full(m, 0.5), np.ones(m))

    def observe():
        p = cal.predict_proba_one({"s": 0.5})[True]
        seen.add(("p", p))
        seen.add(("weight", cal.window_weight))
        seen.add(("n", cal.n_learned))

    run_threads([call], [observe, observe])
    after = state()
    assert after[0] > before[0]
    assert after[2] == before[2] + m
    allowed = {(name, v) for name, v in zip(("p", "weight", "n"), before, strict=True)}
    allowed |= {(name, v) for name, v in zip(("p", "weight", "n"), after, strict=True)}
    assert seen <= allowed


# ---------------------------------------------------------------------------------------- snapshots
def _consistent_pav(cal, n_max):
    """A PAV state whose blocks are those of its own histogram, counts matching weights."""
    assert cal.window_weight == cal.n_learned <= n_max  # unbounded, unit weights
    (sf, si), (pf, pi) = cal.window_histogram.arrays(), cal.map_arrays()
    ipav.pav_rebuild_inplace(sf, si, pf, pi)  # the blocks of a full sweep over the histogram
    buckets = np.array([cal.window_histogram.layout.bucket_of(v) for v in GRID.tolist()], dtype=np.intp)
    rebuilt, llr = np.empty(GRID.size), np.empty(GRID.size)
    ipav.pav_predict_many(pf, buckets, GRID, rebuilt, llr)
    np.testing.assert_array_equal(rebuilt, cal.predict_proba(GRID))


def test_saves_copies_and_pickles_are_consistent_snapshots():
    n = 16_000
    cal = PAVCalibrator(buckets=LogitGrid(128))
    s, y = events(n, seed=5)
    shares = split(s, y, 3)
    taken = []

    def snapshots():
        taken.append(persist.from_bytes(persist.to_bytes(cal)))
        taken.append(copy.deepcopy(cal))
        taken.append(pickle.loads(pickle.dumps(cal)))
        taken.append(cal.merge())

    learners = [river_learner(cal, *shares[0]), river_learner(cal, *shares[1]), array_learner(cal, *shares[2])]
    run_threads(learners, [snapshots])
    assert len(taken) >= 4
    for snap in taken:
        _consistent_pav(snap, n)
        assert lock_of(snap) is not lock_of(cal)
    assert cal.n_learned == n


# ---------------------------------------------------------------------------------------- composites
def test_multiclass_calibrators_lose_nothing():
    n, k = 3_000, 3
    rng = np.random.default_rng(11)
    scores = rng.dirichlet([1.0] * k, size=n)
    labels = np.array([rng.choice(k, p=p) for p in scores])
    for cls in (PairwiseCouplingCalibrator, OneVsRestCalibrator):
        cal = cls(calibrator=PAVCalibrator(buckets=LogitGrid(64)), classes=tuple(range(k)))

        def river(part, cal=cal):
            def job():
                for row, label in zip(scores[part], labels[part].tolist(), strict=True):
                    cal.learn_one({c: float(row[c]) for c in range(k)}, label)

            return job

        def array(part, cal=cal):
            def job():
                for lo in range(part.start, part.stop, 101):
                    hi = min(lo + 101, part.stop)
                    cal.update(scores[lo:hi], labels[lo:hi])

            return job

        def watch(cal=cal):
            p = cal.predict_proba(scores[:50])
            assert np.all(np.isfinite(p))
            assert np.allclose(p.sum(axis=1), 1.0)
            q = cal.predict_proba_one({c: float(scores[0, c]) for c in range(k)})
            assert abs(sum(q.values()) - 1.0) < 1e-9

        third = n // 3
        run_threads([river(slice(0, third)), river(slice(third, 2 * third)), array(slice(2 * third, n))], [watch, watch])
        models = cal.pairs_ if cls is PairwiseCouplingCalibrator else cal.calibrators_
        learned = sum(m.n_learned for m in models.values())
        assert learned == (n * (k - 1) if cls is PairwiseCouplingCalibrator else n * k)


def test_calibrated_classifier_loses_nothing():
    n = 3_000
    rng = np.random.default_rng(13)
    xs = [{"a": float(a), "b": float(b)} for a, b in rng.normal(size=(n, 2))]
    ys = [bool(rng.uniform() < 1 / (1 + np.exp(-x["a"]))) for x in xs]
    model = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator(buckets=LogitGrid(64)))

    def learn(part):
        def job():
            for x, y in zip(xs[part], ys[part], strict=True):
                model.learn_one(x, y)

        return job

    def watch():
        for x in xs[:20]:
            p = model.predict_proba_one(x)
            assert 0.0 <= p[True] <= 1.0
            assert p[False] == 1.0 - p[True]
            assert np.isfinite(model.predict_llr_one(x))

    run_threads([learn(slice(0, None, 2)), learn(slice(1, None, 2))], [watch, watch])
    assert model.n_learned == n
    assert model.calibrator.n_learned == n
    assert model.calibrator.window_weight == n


def test_gev_canonical_classifier_loses_nothing():
    import pandas as pd

    n = 4_000
    rng = np.random.default_rng(17)
    X = rng.normal(size=(n, 2))
    y = rng.uniform(size=n) < 1 / (1 + np.exp(-X[:, 0]))
    model = GEVCanonicalClassifier(batch_size=64, xis=(0.0, 0.5))

    def river(part):
        def job():
            for row, label in zip(X[part], y[part].tolist(), strict=True):
                model.learn_one({"a": float(row[0]), "b": float(row[1])}, label)

        return job

    def frames(part):
        def job():
            for lo in range(part.start, part.stop, 50):
                hi = min(lo + 50, part.stop)
                model.learn_many(pd.DataFrame(X[lo:hi], columns=["a", "b"]), pd.Series(y[lo:hi]))

        return job

    def watch():
        p = model.predict_proba_one({"a": 0.3, "b": -0.2})[True]
        assert 0.0 <= p <= 1.0
        assert set(model.coef_) <= {"a", "b"}

    half = n // 2
    run_threads([river(slice(0, half)), frames(slice(half, n))], [watch])
    state = model.__getstate__()  # the rows learned: no public face, the saved state has them
    assert state["_n_seen"] + state["_buffered"] == n


def test_river_metric_totals_are_exact():
    n = 20_000
    rng = np.random.default_rng(19)
    p = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=n)  # losses are exact binary fractions
    y = rng.uniform(size=n) < 0.5
    metric = Brier()

    def feed(part):
        def job():
            for label, prob in zip(y[part].tolist(), p[part].tolist(), strict=True):
                metric.update(label, prob)

        return job

    def watch():
        assert 0.0 <= metric.get() <= 1.0

    run_threads([feed(slice(0, None, 2)), feed(slice(1, None, 2))], [watch])
    serial = Brier()
    for label, prob in zip(y.tolist(), p.tolist(), strict=True):
        serial.update(label, prob)
    assert metric.get() == serial.get()
    assert metric.__getstate__()["_n"] == n  # the event count, in the saved state


# ---------------------------------------------------------------------------------------- the PAV protocol
def test_river_face_waits_while_a_marked_section_runs():
    """While the lock is held, the lock-free calls are refused and wait; they run after release."""
    cal = PAVCalibrator().update([0.2, 0.8], [0, 1])
    packed = river_face_buffer(cal)
    with lock_of(cal):
        assert packed[ipav.PACK_BUSY] == 1.0
        before = packed.copy()
        assert not PAVCalibrator._learn_packed(packed, 0.5, True, 1.0, 0.0)  # refused, nothing changed
        assert PAVCalibrator._proba_packed(packed, 0.5) == -1.0
        assert np.isnan(PAVCalibrator._llr_packed(packed, 0.5))
        np.testing.assert_array_equal(packed, before)
        results = []
        worker = threading.Thread(
            target=lambda: results.append((cal.learn_one({"s": 0.5}, True), cal.predict_proba_one({"s": 0.5}))),
            daemon=True,
        )
        worker.start()
        time.sleep(0.2)
        assert worker.is_alive()  # waiting for the lock
        assert not results
        assert cal.n_learned == 2
    worker.join(JOIN_TIMEOUT)
    assert results
    assert cal.n_learned == 3
    assert river_face_buffer(cal)[ipav.PACK_BUSY] == 0.0


def test_the_river_face_works_inside_the_same_threads_marked_section():
    """Re-entrant use: holding the lock, this thread's own calls run (on the views' kernels)."""
    cal = PAVCalibrator().update([0.2, 0.8, 0.6], [0, 1, 0])
    ref = PAVCalibrator().update([0.2, 0.8, 0.6], [0, 1, 0])
    with lock_of(cal):
        assert cal.predict_proba_one({"s": 0.7}) == ref.predict_proba_one({"s": 0.7})
        assert cal.predict_llr_one({"s": 0.7}) == ref.predict_llr_one({"s": 0.7})
        assert cal.predict_one({"s": 0.7}) == ref.predict_one({"s": 0.7})
        cal.learn_one({"s": 0.7}, True)
        ref.learn_one({"s": 0.7}, True)
        assert river_face_buffer(cal)[ipav.PACK_BUSY] == 1.0
    assert river_face_buffer(cal)[ipav.PACK_BUSY] == 0.0
    np.testing.assert_array_equal(cal.predict_proba(GRID), ref.predict_proba(GRID))
    assert cal.n_learned == 4


def test_a_buffer_replaced_during_a_section_stays_marked():
    """A call holding the buffer from before a ring growth is refused (its writes would be lost)."""
    cal = PAVCalibrator(window=TimeWindow(10.0))
    cal.learn_one({"s": 0.5}, True, t=0.0)
    old = river_face_buffer(cal)
    cal.update(np.full(3000, 0.4), np.zeros(3000), times=np.zeros(3000))  # the ring grows: a new buffer
    assert river_face_buffer(cal) is not old
    assert old[ipav.PACK_BUSY] == 1.0
    assert river_face_buffer(cal)[ipav.PACK_BUSY] == 0.0
    assert not PAVCalibrator._learn_packed(old, 0.5, True, 1.0, 0.0)
    assert PAVCalibrator._proba_packed(old, 0.5) == -1.0
    assert cal.predict_proba_one({"s": 0.5})[True] == cal.predict_proba([0.5])[0]


def test_without_a_gil_every_call_takes_the_lock(monkeypatch):
    # with a GIL, the river face's calls run while another thread holds the lock without the mark
    with_gil = PAVCalibrator().update([0.2, 0.8], [0, 1])
    assert finishes_while_held(lock_of(with_gil).rlock, lambda: with_gil.learn_one({"s": 0.5}, True), JOIN_TIMEOUT)
    assert finishes_while_held(lock_of(with_gil).rlock, lambda: with_gil.predict_proba_one({"s": 0.5}), JOIN_TIMEOUT)
    monkeypatch.setattr(pav_module, "_gil_enabled", lambda: False)
    n = 6_000
    # without the prior, whose strength is refitted at set counts, the map is a function of the
    # window alone, whatever order the threads learned it in
    cal, s, y = hammer_binary(lambda: PAVCalibrator(prior=None), n, monotone=True)
    assert cal.n_learned == n
    serial = PAVCalibrator(prior=None).update(s, y)
    np.testing.assert_array_equal(cal.predict_proba(GRID), serial.predict_proba(GRID))
    # the fast paths are off: the river face's calls wait for the lock
    assert not finishes_while_held(lock_of(cal).rlock, lambda: cal.predict_proba_one({"s": 0.5}), 0.2)
    assert not finishes_while_held(lock_of(cal).rlock, lambda: cal.learn_one({"s": 0.5}, True), 0.2)
    assert cal.n_learned == n + 1


# ---------------------------------------------------------------------------------------- the lock is not state
@pytest.mark.parametrize(
    "make",
    [
        PAVCalibrator,
        lambda: ISplineCalibrator(refit_every=10),
        lambda: PairwiseCouplingCalibrator(classes=(0, 1, 2)),
        lambda: CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator()),
        GEVCanonicalClassifier,
        Brier,
    ],
    ids=["pav", "ispline", "pairwise", "wrapper", "gev-classifier", "brier"],
)
def test_the_lock_is_never_saved_copied_or_pickled(make):
    learner = make()
    assert "_lock" not in learner.__getstate__()
    for other in (copy.deepcopy(learner), pickle.loads(pickle.dumps(learner)), persist.from_bytes(persist.to_bytes(learner), allow_pickle=True)):
        assert type(other) is type(learner)
        assert lock_of(other) is not lock_of(learner)
        with lock_of(other):  # a working lock of its own, which marks its own state busy
            if isinstance(other, PAVCalibrator):
                assert river_face_buffer(other)[ipav.PACK_BUSY] == 1.0
                assert river_face_buffer(learner)[ipav.PACK_BUSY] == 0.0
    clone = learner.clone()
    assert lock_of(clone) is not lock_of(learner)


def test_a_rejected_call_releases_the_lock():
    cal = PAVCalibrator()
    with pytest.raises(ValueError, match="`scores`"):
        cal.update([0.5, 2.0], [1, 0])
    with pytest.raises(ValueError, match="x\\['s'\\]"):
        cal.learn_one({"s": 2.0}, True)
    done = []
    worker = threading.Thread(target=lambda: done.append(cal.update([0.5], [1]).n_learned), daemon=True)
    worker.start()
    worker.join(JOIN_TIMEOUT)
    assert done == [1]
    assert river_face_buffer(cal)[ipav.PACK_BUSY] == 0.0
