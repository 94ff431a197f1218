"""The deferred river faces' generic path (``refit_every`` set, or a call off the inline path).

The faces of I-spline, GEV and Platt take their river lock's section inline around the generic
methods' bodies: the section's first acquisition settles the deferred work and marks the lock
held by a section, so that no call inside it defers work; the mark is cleared when the section
ends, also when its call is rejected. Checked here through what the calls give: the generic
methods' bits inside and outside a held section, the face deferring again afterwards, the lock
released after a rejected call, and nothing lost under threads.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest
from river_cases import (
    deferring_classes,
    lock_of,
    logistic_stream,
    river_pairs_alike,
    river_pairs_beside_an_array_learner,
)
from river_cases import generic_river as generic

import streamcal.spline._river as ispline_face

CLASSES = deferring_classes()
PROBE = np.linspace(0.01, 0.99, 7)
JOIN_TIMEOUT = 120.0


@contextlib.contextmanager
def _isplineriver_pairs_alike():
    """Counts I-spline's one-call pairs (the face deferring a label to the next prediction)."""
    real = ispline_face.pair_call
    count = [0]

    def counting(*args):
        count[0] += 1
        return real(*args)

    ispline_face.pair_call = counting
    try:
        yield count
    finally:
        ispline_face.pair_call = real


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_generic_calls_inside_a_held_section_then_the_face_defers_again(name):
    cls = CLASSES[name]
    scores, labels = logistic_stream(1400, 8)
    cal, plain = cls(prior=None), generic(cls)(prior=None)
    for c in (cal, plain):
        c.update(scores[:400], labels[:400])
    river_pairs_alike(cal, plain, scores, labels, 400, 600)  # the face goes live and keeps the last label
    for c in (cal, plain):
        c.refit_every = 50
    with lock_of(cal):  # a section: the kept label learned; the generic calls inside it re-enter
        river_pairs_alike(cal, plain, scores, labels, 600, 700)
        np.testing.assert_array_equal(cal.predict_proba(PROBE), plain.predict_proba(PROBE))
    river_pairs_alike(cal, plain, scores, labels, 700, 900)
    for c in (cal, plain):
        c.refit_every = None
    with _isplineriver_pairs_alike() as pairs:
        river_pairs_alike(cal, plain, scores, labels, 900, 1400)
    if name == "ispline":  # the section's mark is cleared: the face defers again
        assert pairs[0] > 400
    assert cal.n_learned == plain.n_learned == 1400
    np.testing.assert_array_equal(cal.predict_proba(PROBE), plain.predict_proba(PROBE))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_rejected_generic_call_leaves_no_section_behind(name):
    cls = CLASSES[name]
    scores, labels = logistic_stream(900, 9)
    cal, plain = cls(prior=None, refit_every=50), generic(cls)(prior=None, refit_every=50)
    for c in (cal, plain):
        c.update(scores[:400], labels[:400])
        with pytest.raises(ValueError, match="score"):
            c.learn_one({"score": 2.0}, True)
        with pytest.raises(ValueError, match="score"):
            c.predict_proba_one({"score": -1.0})
    done = []
    worker = threading.Thread(target=lambda: done.append(cal.update(scores[400:401], labels[400:401]).n_learned))
    worker.start()
    worker.join(JOIN_TIMEOUT)
    assert done == [401]  # the lock was released
    plain.update(scores[400:401], labels[400:401])
    for c in (cal, plain):
        c.refit_every = None
    with _isplineriver_pairs_alike() as pairs:
        river_pairs_alike(cal, plain, scores, labels, 401, 900)
    if name == "ispline":
        assert pairs[0] > 400
    np.testing.assert_array_equal(cal.predict_proba(PROBE), plain.predict_proba(PROBE))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_generic_path_after_the_face_went_live_under_threads(name):
    # the face went live, then a refit policy: two river loops and an array learner on the
    # generic path lose nothing, and the histogram is the serial run's (an unbounded window)
    cls = CLASSES[name]
    scores, labels = logistic_stream(4000, 10)
    cal = cls(prior=None)
    cal.update(scores[:400], labels[:400])
    for i in range(400, 500):
        x = {"score": float(scores[i])}
        cal.predict_proba_one(x)
        cal.learn_one(x, bool(labels[i]))
    cal.refit_every = 100
    errors = river_pairs_beside_an_array_learner(cal, scores, labels, 500, 3500, 50)
    assert not errors, errors
    assert cal.n_learned == 4000
    serial = cls(prior=None).update(scores, labels)
    for got, want in zip(cal.histogram()[1:], serial.histogram()[1:], strict=True):
        np.testing.assert_array_equal(got, want)
