"""The deferring river faces between refits (``refit_every`` set): lock-free calls.

Between refits the faces of I-spline, GEV and Platt learn and predict the common call in one
entry point that holds the GIL and tests the river lock's section number
(``streamcal._kernels.deferred_face``), taking no lock. Checked here through what the calls
give: the generic methods' bits (with rejected calls, copies, a changed refit policy and the
interpreted tier in between), the refits on the same events as a serial run after threads, a
section of the lock making the calls wait, and every call taking the lock without a GIL.
"""

from __future__ import annotations

import copy
import pickle
import sys
import threading
import time

import numpy as np
import pytest
from river_cases import (
    deferring_classes,
    finishes_while_held,
    lock_of,
    logistic_stream,
    river_pairs_alike,
    river_pairs_beside_an_array_learner,
)
from river_cases import generic_river as generic

import streamcal.gev._river as river_module
from streamcal._kernels import _config
from streamcal.windows import CountWindow, Unbounded

CLASSES = deferring_classes()
PROBE = np.linspace(0.01, 0.99, 7)
JOIN_TIMEOUT = 120.0


def _same_state(cal, plain):
    np.testing.assert_array_equal(cal.predict_proba(PROBE), plain.predict_proba(PROBE))
    for got, want in zip(cal.histogram(), plain.histogram(), strict=True):
        np.testing.assert_array_equal(got, want)
    assert cal.n_learned == plain.n_learned


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_lock_free_face_gives_the_generic_bits(name):
    cls = CLASSES[name]
    scores, labels = logistic_stream(3000, 1)
    kwargs = {"window": CountWindow(800), "refit_every": 97}
    cal, plain = cls(**kwargs), generic(cls)(**kwargs)
    river_pairs_alike(cal, plain, scores, labels, 0, 700)
    assert lock_of(cal).learn_args is not None  # live: the calls take no lock
    assert lock_of(cal).proba_args is not None
    for c in (cal, plain):  # rejected calls change nothing
        with pytest.raises(ValueError, match="score"):
            c.learn_one({"score": 1.5}, True)
        with pytest.raises(ValueError, match="`w`"):
            c.learn_one({"score": 0.5}, True, -1.0)
        with pytest.raises(ValueError, match="score"):
            c.predict_proba_one({"score": float("nan")})
    river_pairs_alike(cal, plain, scores, labels, 700, 1000)
    for c in (cal, plain):  # off the common call: an int label, an int weight
        c.learn_one({"score": 0.3}, 1)
        c.learn_one({"score": 0.4}, False, 2)
    assert cal.predict_one({"score": 0.6}) == plain.predict_one({"score": 0.6})
    river_pairs_alike(cal, plain, scores, labels, 1000, 1250)
    # a copy mid-way between refits holds the count of labels since the last refit
    cal, plain = pickle.loads(pickle.dumps(cal)), copy.deepcopy(plain)  # (a class made here: no pickle)
    river_pairs_alike(cal, plain, scores, labels, 1250, 1600)
    for c in (cal, plain):  # another policy, then lazy refits, then a policy again
        c.refit_every = 40
    river_pairs_alike(cal, plain, scores, labels, 1600, 1900)
    for c in (cal, plain):
        c.refit_every = None
    river_pairs_alike(cal, plain, scores, labels, 1900, 2300)
    for c in (cal, plain):
        c.refit_every = 61
    river_pairs_alike(cal, plain, scores, labels, 2300, 3000)
    _same_state(cal, plain)
    assert cal.__getstate__().keys() == plain.__getstate__().keys()


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_interpreted_tier_gives_the_same_bits(name):
    cls = CLASSES[name]
    scores, labels = logistic_stream(500, 2)
    cal, plain = cls(refit_every=60), generic(cls)(refit_every=60)
    with _config.interpreting():
        river_pairs_alike(cal, plain, scores, labels, 0, 300)
    river_pairs_alike(cal, plain, scores, labels, 300, 500)
    _same_state(cal, plain)


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_threads_lose_no_label_and_refit_on_the_same_events(name, fast_switching):
    """Two river loops and an array learner: nothing lost, and the count of labels since the last
    refit is a serial run's, so the next refit comes after the same events."""
    cls = CLASSES[name]
    every = 50
    n, extra = 4023, 200
    scores, labels = logistic_stream(n + extra, 3)
    cal = cls(refit_every=every, prior=None)
    cal.update(scores[:300], labels[:300])
    errors = river_pairs_beside_an_array_learner(cal, scores[:n], labels[:n], 300, 3000, 41)
    assert not errors, errors
    assert cal.n_learned == n
    serial = cls(refit_every=every, prior=None).update(scores[:n], labels[:n])
    for got, want in zip(cal.histogram()[1:], serial.histogram()[1:], strict=True):
        np.testing.assert_array_equal(got, want)
    # the map changes at the refits alone: after every - n % every more labels, as the serial run's
    probe = {"score": 0.37}
    changes, served = [], cal.predict_proba_one(probe)[True]
    for i in range(n, n + extra):
        cal.learn_one({"score": float(scores[i])}, bool(labels[i]))
        p = cal.predict_proba_one(probe)[True]
        if p != served:
            changes.append(i + 1 - n)
        served = p
    assert changes == list(range(every - n % every, extra + 1, every))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_section_makes_the_lock_free_calls_wait(name):
    cls = CLASSES[name]
    scores, labels = logistic_stream(400, 4)
    cal, plain = cls(refit_every=50), generic(cls)(refit_every=50)
    river_pairs_alike(cal, plain, scores, labels, 0, 300)
    lock = lock_of(cal)
    # the bare lock alone is no section: the lock-free calls run while another thread holds it
    assert finishes_while_held(lock.rlock, lambda: cal.learn_one({"score": 0.5}, True), JOIN_TIMEOUT)
    assert finishes_while_held(lock.rlock, lambda: cal.predict_proba_one({"score": 0.5}), JOIN_TIMEOUT)
    plain.learn_one({"score": 0.5}, True)
    # a section (``with cal._lock:``) makes them wait until it ends
    results = []
    with lock:
        assert lock.learn_args is None  # the live state ended, its count written back
        worker = threading.Thread(
            target=lambda: results.append((cal.learn_one({"score": 0.5}, True), cal.predict_proba_one({"score": 0.5}))),
            daemon=True,
        )
        worker.start()
        time.sleep(0.2)
        assert worker.is_alive()
        assert not results
        assert cal.n_learned == 301
    worker.join(JOIN_TIMEOUT)
    plain.learn_one({"score": 0.5}, True)
    assert results[0][1] == plain.predict_proba_one({"score": 0.5})
    river_pairs_alike(cal, plain, scores, labels, 300, 400)
    _same_state(cal, plain)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_without_a_gil_every_call_takes_the_lock(name, monkeypatch):
    cls = CLASSES[name]
    scores, labels = logistic_stream(300, 5)
    monkeypatch.setattr(river_module, "_gil_enabled", lambda: False)
    cal, plain = cls(refit_every=50, window=Unbounded()), generic(cls)(refit_every=50, window=Unbounded())
    river_pairs_alike(cal, plain, scores, labels, 0, 300)
    assert lock_of(cal).learn_args is None  # never live
    assert not finishes_while_held(lock_of(cal).rlock, lambda: cal.learn_one({"score": 0.5}, True), 0.2)
    assert not finishes_while_held(lock_of(cal).rlock, lambda: cal.predict_proba_one({"score": 0.5}), 0.2)
    assert cal.n_learned == 301
