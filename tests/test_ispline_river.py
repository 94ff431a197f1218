"""The river face of ISplineCalibrator at its exact default (``streamcal.spline._river``).

``learn_one`` keeps the checked event; the next ``predict_proba_one`` learns it and predicts in
one compiled call, and the map stays in the loop's state until something reads it. Checked
here: every reader called anywhere between the river face's calls sees what the generic methods
(which defer nothing) give, bit for bit, and the loop continues with the same bits; a river
loop equals ``prequential``; a rejected call raises and changes nothing; threads lose nothing.
"""

from __future__ import annotations

import contextlib
import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river_cases import river_pairs_beside_an_array_learner

import streamcal.spline._river as river_face
from streamcal import ISplineCalibrator
from streamcal._kernels import ispline_stream as ks
from streamcal._streaming import StreamingCalibrator
from streamcal.buckets import bucket_of_score
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

WINDOWS = {
    "unbounded": Unbounded,
    "count 9": lambda: CountWindow(9),
    "count 60": lambda: CountWindow(60),
    "decay 6 events": lambda: Decay(6.0),
    "time 15": lambda: TimeWindow(15.0),
}


class GenericISplineCalibrator(ISplineCalibrator):
    """ISplineCalibrator with the generic river methods of the base class (nothing deferred)."""

    learn_one = StreamingCalibrator.learn_one
    predict_proba_one = StreamingCalibrator.predict_proba_one


@contextlib.contextmanager
def _pair_calls():
    """Counts the river face's one-call pairs (a prediction that learns the kept event)."""
    real = river_face.pair_call
    count = [0]

    def counting(*args):
        count[0] += 1
        return real(*args)

    river_face.pair_call = counting
    try:
        yield count
    finally:
        river_face.pair_call = real


def _long(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.0, 1.5, n)
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(0.8 * z - 1.0)))


READERS = (
    "pair",
    "pair",
    "pair",
    "learn",
    "learn",
    "predict",
    "predict",
    "predict_one",
    "llr",
    "array",
    "coef",
    "refits",
    "strength",
    "row",
    "n_learned",
    "state",
    "copy",
    "pickle",
    "update",
    "int label",
    "zero weight",
)


def _apply(cal, op, s, label, extra):
    """Run ``op`` on ``cal``; returns ``(cal, result)`` (a copy replaces ``cal``)."""
    x = {"score": s}
    if op == "pair":
        p = cal.predict_proba_one(x)
        cal.learn_one(x, label)
        return cal, p
    if op == "learn":
        return cal, cal.learn_one(x, label)
    if op == "zero weight":
        return cal, cal.learn_one(x, label, w=0.0)
    if op == "predict":
        return cal, cal.predict_proba_one(x)
    if op == "predict_one":
        return cal, cal.predict_one(x)
    if op == "llr":
        return cal, cal.predict_llr_one(x)
    if op == "array":
        return cal, (cal.predict_proba(extra).tolist(), cal.predict_llr(extra).tolist())
    if op == "coef":
        knots, coef = cal.knots_, cal.coef_
        return cal, (None if knots is None else knots.tolist(), None if coef is None else coef.tolist())
    if op == "refits":
        return cal, cal.exact_refits
    if op == "strength":
        return cal, cal.prior_strength
    if op == "row":
        row = cal.window_histogram.row()
        return cal, (row.pos.tolist(), row.neg.tolist())
    if op == "n_learned":
        return cal, (cal.n_learned, cal.window_weight)
    if op == "state":
        return cal, _state_values(cal)
    if op == "copy":
        return copy.deepcopy(cal), None
    if op == "pickle":
        return pickle.loads(pickle.dumps(cal)), None
    if op == "update":
        return cal.update(extra[:2], [label, not label]), None
    cal.learn_one(x, int(label), w=1)  # "int label": the generic path, right after kept events
    return cal, None


def _state_values(cal):
    """The saved state as comparable values (arrays as lists, parameter objects by their repr)."""
    out = {}
    for k, v in cal.__getstate__().items():
        if isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif v is None or isinstance(v, (bool, int, float, str)):
            out[k] = v
        else:
            out[k] = repr(v)
    return out


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(sorted(set(WINDOWS) - {"time 15"})),
    st.sampled_from(["auto", None]),
    st.sampled_from([None, 2]),
    st.lists(st.sampled_from(READERS), min_size=1, max_size=60),
)
def test_deferred_river_face_equals_the_generic_methods_around_every_reader(seed, window, prior, n_knots, ops):
    scores, labels = _long(400, seed % 1000)
    rng = np.random.default_rng(seed)
    inline = ISplineCalibrator(window=WINDOWS[window](), prior=prior, n_knots=n_knots)
    plain = GenericISplineCalibrator(window=WINDOWS[window](), prior=prior, n_knots=n_knots)
    for i in range(120):  # past the first fits: the deferred path is on where the loop serves
        for cal in (inline, plain):
            cal.predict_proba_one({"score": float(scores[i])})
            cal.learn_one({"score": float(scores[i])}, bool(labels[i]))
    for k, op in enumerate(ops):
        i = 120 + k
        s, label = float(scores[i]), bool(labels[i])
        extra = rng.uniform(0.0, 1.0, 3)
        inline, got = _apply(inline, op, s, label, extra)
        plain, want = _apply(plain, op, s, label, extra)
        assert got == want, (k, op)
    assert _state_values(inline) == _state_values(plain)
    probe = {"score": 0.3}
    assert inline.predict_proba_one(probe) == plain.predict_proba_one(probe)


@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("prior", ["auto", None])
def test_river_loop_equals_prequential_and_the_generic_methods(window, prior):
    scores, labels = _long(1500, 7)
    weights = np.random.default_rng(7).choice([0.0, 0.5, 1.0, 1.0, 2.0], scores.size)
    times = np.arange(scores.size, dtype=float)
    ref = ISplineCalibrator(window=WINDOWS[window](), prior=prior)
    want_p, _ = ref.prequential(
        scores, labels, weights=weights, times=times if ref.window_histogram.uses_times else None
    )
    faces = {}
    for cls in (ISplineCalibrator, GenericISplineCalibrator):
        cal = cls(window=WINDOWS[window](), prior=prior)
        uses_times = cal.window_histogram.uses_times
        out = np.empty(scores.size)
        for i in range(scores.size):
            x = {"score": float(scores[i])}
            out[i] = cal.predict_proba_one(x)[True]
            cal.learn_one(x, bool(labels[i]), w=float(weights[i]), t=float(times[i]) if uses_times else None)
        faces[cls] = (out, _state_values(cal))
    np.testing.assert_array_equal(faces[ISplineCalibrator][0], faces[GenericISplineCalibrator][0])
    assert faces[ISplineCalibrator][1] == faces[GenericISplineCalibrator][1]
    # prequential equals the river loop bit for bit but where the score prior holds weight (its
    # 64-event chunks of full refits): within 1e-9 there
    np.testing.assert_allclose(faces[ISplineCalibrator][0], want_p, rtol=0.0, atol=1e-9)
    if prior is None:
        np.testing.assert_array_equal(faces[ISplineCalibrator][0], want_p)


def test_the_deferred_path_runs_on_the_default_stream():
    # not vacuous: past the prior's first events the river face keeps its labels for the next
    # prediction's one compiled call
    scores, labels = _long(3000, 2)
    cal = ISplineCalibrator()
    cal.prequential(scores[:2000], labels[:2000])
    with _pair_calls() as pairs:  # a prediction that learns the kept event in the same call
        for i in range(2000, 3000):
            x = {"score": float(scores[i])}
            cal.predict_proba_one(x)
            cal.learn_one(x, bool(labels[i]))
    assert pairs[0] > 900
    assert cal.n_learned == 3000  # a reader settles the kept event


@pytest.mark.parametrize(
    ("x", "y", "w", "match"),
    [
        ({"score": 0.3}, True, -1.0, "w"),
        ({"score": 0.3}, True, float("nan"), "w"),
        ({"score": 0.3}, 2, 1.0, "y"),
        ({"score": 1.5}, True, 1.0, "score"),
        ({"a": 0.3, "b": 0.4}, True, 1.0, "score"),
    ],
)
def test_a_rejected_call_raises_and_changes_nothing(x, y, w, match):
    scores, labels = _long(400, 3)
    cal = ISplineCalibrator(window=100, prior=None)
    plain = GenericISplineCalibrator(window=100, prior=None)  # the same calls, nothing deferred
    for i in range(400):
        with _pair_calls() as pairs:
            for c in (cal, plain):
                c.predict_proba_one({"score": float(scores[i])})
        for c in (cal, plain):
            c.learn_one({"score": float(scores[i])}, bool(labels[i]))
    assert pairs[0] == 1  # the face keeps each learned event for the next prediction: one is kept now
    for c in (cal, plain):
        with pytest.raises((ValueError, TypeError), match=match):
            c.learn_one(x, y, w=w)
        if match == "score":
            with pytest.raises((ValueError, TypeError), match=match):
                c.predict_proba_one(x)
    assert _state_values(cal) == _state_values(plain)
    assert cal.n_learned == 400  # the kept event learned, the rejected one not
    probe = {"score": 0.2}
    assert cal.predict_proba_one(probe) == plain.predict_proba_one(probe)


def test_a_refit_policy_takes_the_generic_methods_even_after_the_face_went_live():
    # ``refit_every`` set on a calibrator whose face is live and keeps a label: from then on no
    # call is a pair, and both faces give the generic methods' bits (refits every 50 labels)
    scores, labels = _long(1200, 5)
    cal = ISplineCalibrator(prior=None)
    plain = GenericISplineCalibrator(prior=None)
    for c in (cal, plain):
        c.update(scores[:400], labels[:400])

    def pairs_from(start, stop):
        with _pair_calls() as pairs:
            for i in range(start, stop):
                x = {"score": float(scores[i])}
                assert cal.predict_proba_one(x) == plain.predict_proba_one(x)
                for c in (cal, plain):
                    c.learn_one(x, bool(labels[i]))
        return pairs[0]

    assert pairs_from(400, 800) > 300  # the face went live; it keeps the last label
    for c in (cal, plain):
        c.refit_every = 50
    assert pairs_from(800, 1200) == 0
    assert _state_values(cal) == _state_values(plain)
    probe = np.linspace(0.01, 0.99, 7)
    np.testing.assert_array_equal(cal.predict_proba(probe), plain.predict_proba(probe))

def test_deferred_river_face_under_threads():
    # two river-face loops, an array learner and a reader on one calibrator: nothing lost, the
    # histogram the serial run's (an unbounded window does not depend on the order), and the
    # map the one a refit of that histogram gives
    scores, labels = _long(6000, 4)
    cal = ISplineCalibrator(prior=None)
    cal.update(scores[:500], labels[:500])
    cal.predict_proba_one({"score": 0.5})

    def check(c):
        assert c.n_learned <= 6000
        c.knots_  # a reader of the map between blocks

    errors = river_pairs_beside_an_array_learner(cal, scores, labels, 500, 5000, 100, check)
    assert not errors, errors
    serial = ISplineCalibrator(prior=None).update(scores, labels)
    assert cal.n_learned == 6000
    for got, want in zip(cal.histogram()[1:], serial.histogram()[1:], strict=True):
        np.testing.assert_array_equal(got, want)
    probe = np.linspace(0.01, 0.99, 7)
    np.testing.assert_allclose(cal.predict_proba(probe), serial.predict_proba(probe), rtol=0.0, atol=1e-9)


def _sections_outside(buf, offsets, names, skip):
    """``buf`` with the packed sections named in ``skip`` left out (scratch the two paths use
    differently)."""
    keep = np.ones(buf.size, dtype=bool)
    for k, name in enumerate(names):
        if name in skip:
            keep[offsets[k] : offsets[k + 1]] = False
    return buf[keep]


@pytest.mark.parametrize(("window", "n_knots"), [("unbounded", None), ("count 9", None), ("count 60", 4)])
def test_the_pair_kernel_equals_the_loop_at_every_step_it_stops_at(window, n_knots):
    # ``stream_packed_pair`` runs the pair in a kernel without reference counts (``pair_fast``)
    # and hands the refit's allocating steps (the knots' exact pass, the full rebuild, the dense
    # solve) to ``pair_resume``; every pair equals the loop's two operations (``pair_by_run``)
    # bit for bit, the returned value and the whole state, and each step is reached
    scores, labels = _long(1500, 11)
    cal = ISplineCalibrator(window=WINDOWS[window](), prior=None, n_knots=n_knots)
    cal.prequential(scores[:200], labels[:200])
    cal.predict_proba_one({"score": float(scores[200])})
    hist = cal.window_histogram  # (settles the face's deferred work first)
    sf, si = hist.live_arrays()
    cuts = hist.layout.cuts_list
    st = cal._stream  # the compiled loop's packed state
    ours = [a.copy() for a in (sf, si, st["fbuf"], st["ibuf"], st["free"])]
    loop = [a.copy() for a in ours]
    steps = dict.fromkeys(("served", ks.AT_KNOTS, ks.AT_FULL, ks.AT_DENSE), 0)
    ibuf = ours[3]
    f_ends = ibuf[ks.PK_F : ks.PK_F + len(ks.FLOAT_SECTIONS) + 1]
    i_ends = ibuf[ks.PK_I : ks.PK_I + len(ks.INT_SECTIONS) + 1]
    for i in range(201, scores.size - 1):
        b = bucket_of_score(cuts, float(scores[i]))
        event = (b, float(scores[i]), 1.0 if labels[i] else 0.0, 1.0, float(scores[i + 1]))
        entry = ks.stream_packed_pair(*event, *[a.copy() for a in ours])
        p = ks.pair_fast(*event, *ours)
        if p < -ks.NOT_DIRTY:
            steps[int(-p)] += 1
            p = ks.pair_resume(int(-p), event[-1], *ours)
        else:
            steps["served"] += p >= 0.0
        assert p == entry == ks.pair_by_run(*event, *loop), i
        for k in (0, 1, 4):
            np.testing.assert_array_equal(ours[k], loop[k])
        np.testing.assert_array_equal(
            _sections_outside(ours[2], f_ends, ks.FLOAT_SECTIONS, ("kv", "one_f")),
            _sections_outside(loop[2], f_ends, ks.FLOAT_SECTIONS, ("kv", "one_f")),
        )
        np.testing.assert_array_equal(
            _sections_outside(ours[3][ks.PK_HEADER :], i_ends - ks.PK_HEADER, ks.INT_SECTIONS, ("one_i",)),
            _sections_outside(loop[3][ks.PK_HEADER :], i_ends - ks.PK_HEADER, ks.INT_SECTIONS, ("one_i",)),
        )
        assert p >= 0.0
    assert steps["served"] > 0
    assert steps[ks.AT_KNOTS] > 0
    if window == "count 9":
        assert steps[ks.AT_FULL] > 0
        assert steps[ks.AT_DENSE] > 0
