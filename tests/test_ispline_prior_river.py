"""The river face of ISplineCalibrator where the score prior holds (``ispline_prior_river``).

``learn_one`` keeps the checked label; the next ``predict_proba_one`` learns it, refits under
the prior and serves the score in one compiled call (``prior_river_pair``), and the map stays in
the face's river state until something reads it. Checked here against the generic methods
(which defer nothing: the steps of the code before), bit for bit: pairs with every kind of
reader between them (a copy, a save and load, an LLR, an array update, two labels in a row),
the prior refuted in the middle of the stream, and a window emptied of weight (the engine's
refit); that the face's one call served the pairs; and that a river loop stays within 1e-9 of
``prequential``.
"""

from __future__ import annotations

import contextlib
import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamcal.spline._river as river_face
from streamcal import ISplineCalibrator
from streamcal._kernels import _config
from streamcal._kernels import ispline_prior_river as kpr
from streamcal._kernels import ispline_prior_stream as kips
from streamcal._streaming import StreamingCalibrator
from streamcal.windows import CountWindow, Decay, Unbounded

WARMUP = 1500


class GenericISpline(ISplineCalibrator):
    """ISplineCalibrator with the generic river methods of the base class (nothing deferred)."""

    learn_one = StreamingCalibrator.learn_one
    predict_proba_one = StreamingCalibrator.predict_proba_one


def _calibrated(n, seed, shift_at=None):
    """Scores of a logistic model and labels drawn with the score as their probability (the
    score prior holds); from ``shift_at`` on, labels of a much steeper model (it is refuted)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.0, 1.5, n)
    truth = 1.0 / (1.0 + np.exp(-z))
    if shift_at is not None:
        truth[shift_at:] = 1.0 / (1.0 + np.exp(-(3.0 * z[shift_at:] + 4.0)))
    return 1.0 / (1.0 + np.exp(-z)), rng.uniform(size=n) < truth


def _warmed(cls, window, scores, labels, **params):
    cal = cls(window=window(), refit_every=50, **params)
    cal.prequential(scores[:WARMUP], labels[:WARMUP])
    cal.refit_every = None
    return cal


class _Calls(list):
    """The results of the face's calls under the prior; ``full``: those of ``prior_river_full``."""

    def __init__(self):
        super().__init__()
        self.full = []


@contextlib.contextmanager
def _prior_calls():
    """The results of the face's calls under the prior, in order: each pair's first call's, or
    where it left the refit to ``prior_river_full`` (``STOP_FULL``), that call's."""
    real, real_full = river_face.prior_call, river_face.prior_full_call
    results = _Calls()

    def recording(*args):
        p = real(*args)
        results.append(p)
        return p

    def recording_full(*args):
        assert results[-1] == kpr.STOP_FULL
        p = real_full(*args)
        results[-1] = p
        results.full.append(p)
        return p

    river_face.prior_call = recording
    river_face.prior_full_call = recording_full
    try:
        yield results
    finally:
        river_face.prior_call = real
        river_face.prior_full_call = real_full


def _step(cal, i, s, label, w, grid):
    """One scheduled operation around event ``i``'s pair: ``(cal, outputs)`` (no extra labels
    where the event's weight is 0: a window emptied of weight stays empty)."""
    x = {"s": s}
    out = [cal.predict_proba_one(x)]
    kind = i % 11
    if kind == 3:
        out.append(cal.predict_llr_one(x))
    elif kind == 5:
        cal = pickle.loads(pickle.dumps(cal))
    elif kind == 6:
        cal = copy.deepcopy(cal)
    elif kind == 7 and w > 0.0:
        cal.learn_one({"s": 0.5 * s}, not label, w=w)  # two labels in a row
    elif kind == 8 and w > 0.0:
        cal.update(grid[:3], [label, not label, label])
    elif kind == 9:
        coef = cal.coef_
        out.append((cal.predict_proba(grid).tolist(), cal.prior_strength, None if coef is None else coef.tolist()))
    cal.learn_one(x, label, w=w)
    return cal, out


def _both(window, scores, labels, weights, params):
    """The face and the generic methods over the same schedule from the same warm state."""
    grid = np.linspace(0.01, 0.99, 7)
    got = {}
    for cls in (ISplineCalibrator, GenericISpline):
        cal = _warmed(cls, window, scores, labels, **params)
        outs = []
        for i in range(WARMUP, scores.size):
            cal, out = _step(cal, i, float(scores[i]), bool(labels[i]), float(weights[i]), grid)
            outs.append(out)
        outs.append((cal.predict_proba(grid).tolist(), cal.predict_llr(grid).tolist(), cal.prior_strength))
        outs.append((cal.knots_.tolist(), cal.coef_.tolist(), cal.window_weight, cal.n_learned))
        got[cls] = outs
    return got[ISplineCalibrator], got[GenericISpline]


@pytest.mark.parametrize("window", [Unbounded, lambda: CountWindow(400)], ids=["unbounded", "count 400"])
@pytest.mark.parametrize("n_knots", [None, 3])
def test_the_face_under_the_prior_equals_the_generic_methods_around_readers(window, n_knots):
    scores, labels = _calibrated(WARMUP + 300, 1)
    weights = np.ones(scores.size)
    with _prior_calls() as calls:
        face, generic = _both(window, scores, labels, weights, {"n_knots": n_knots})
    assert face == generic
    served = sum(p >= 0.0 for p in calls)
    assert served > 200  # the face's calls served the pairs (the prior held)
    # refits the kept sums did not serve: the first call stopped, ``prior_river_full`` refitted and served
    assert sum(p >= 0.0 for p in calls.full) > 20
    assert len(_config.compiled(kpr.prior_river_full).signatures) == 1


def test_the_face_follows_the_prior_refuted_bit_for_bit():
    scores, labels = _calibrated(WARMUP + 600, 2, shift_at=WARMUP + 100)
    weights = np.ones(scores.size)
    with _prior_calls() as calls:
        face, generic = _both(lambda: CountWindow(300), scores, labels, weights, {})
    assert face == generic
    assert kpr.STOP_REFUTED in calls  # a refit in the call found the prior's strength 0
    assert sum(p >= 0.0 for p in calls) > 20


def test_a_window_emptied_of_weight_takes_the_engines_refit_bit_for_bit():
    scores, labels = _calibrated(WARMUP + 240, 3)
    weights = np.ones(scores.size)
    weights[WARMUP + 20 : WARMUP + 160] = 0.0  # the count window of 100 holds no weight for a while
    with _prior_calls() as calls:
        face, generic = _both(lambda: CountWindow(100), scores, labels, weights, {})
    assert face == generic
    assert kpr.STOP_ENGINE in calls  # the window's weight 0: the engine's refit (no map)


def test_a_river_loop_under_the_prior_stays_within_1e9_of_prequential():
    scores, labels = _calibrated(WARMUP + 400, 4)
    ref = _warmed(ISplineCalibrator, Unbounded, scores, labels)
    cal = copy.deepcopy(ref)
    want, _ = ref.prequential(scores[WARMUP:], labels[WARMUP:])
    with _prior_calls() as calls:
        got = np.empty(want.size)
        for i in range(want.size):
            x = {"s": float(scores[WARMUP + i])}
            got[i] = cal.predict_proba_one(x)[True]
            cal.learn_one(x, bool(labels[WARMUP + i]))
    assert sum(p >= 0.0 for p in calls) == want.size - 1
    np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(cal.predict_proba(scores[:50]), ref.predict_proba(scores[:50]), rtol=0.0, atol=1e-9)


def test_the_faces_call_compiles_each_kernel_for_one_signature():
    """``prior_river_pair`` calls the refit's steps with the types the calibrator's own refit
    (``prior_refit_packed``) passes them (no second compilation for a literal, a slice's layout or
    an int/float)."""
    scores, labels = _calibrated(WARMUP + 40, 5)
    cal = _warmed(ISplineCalibrator, Unbounded, scores, labels)  # the refit under the prior, from Python
    with _prior_calls() as calls:
        for i in range(WARMUP, scores.size):
            x = {"s": float(scores[i])}
            cal.predict_proba_one(x)
            cal.learn_one(x, bool(labels[i]))
    assert sum(p >= 0.0 for p in calls) == 39
    for kernel in (kips.prior_refit_packed, kpr.prior_river_pair):
        assert len(_config.compiled(kernel).signatures) == 1, kernel


OPS = ("pair", "pair", "pair", "learn", "predict", "llr", "copy", "pickle", "update", "zero weight", "int label", "array")


def _apply(cal, op, s, label, extra):
    """``op`` on ``cal``: ``(cal, result)`` (a copy replaces ``cal``)."""
    x = {"s": s}
    if op == "pair":
        p = cal.predict_proba_one(x)
        cal.learn_one(x, label)
        return cal, p
    if op == "learn":
        return cal, cal.learn_one(x, label)
    if op == "predict":
        return cal, cal.predict_proba_one(x)
    if op == "llr":
        return cal, cal.predict_llr_one(x)
    if op == "copy":
        return copy.deepcopy(cal), None
    if op == "pickle":
        return pickle.loads(pickle.dumps(cal)), None
    if op == "update":
        return cal.update(extra[:2], [label, not label]), None
    if op == "zero weight":
        return cal, cal.learn_one(x, label, w=0.0)
    if op == "int label":  # the generic path, right after kept labels
        return cal, cal.learn_one(x, int(label), w=1)
    return cal, (cal.predict_proba(extra).tolist(), cal.predict_llr(extra).tolist(), cal.prior_strength)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(["unbounded", "count 200", "decay 300"]),
    st.sampled_from([None, 2]),
    st.lists(st.sampled_from(OPS), min_size=1, max_size=80),
)
def test_any_schedule_under_the_prior_equals_the_generic_methods(seed, window, n_knots, ops):
    windows = {"unbounded": Unbounded, "count 200": lambda: CountWindow(200), "decay 300": lambda: Decay(300.0)}
    scores, labels = _calibrated(WARMUP + len(ops), seed % 50)
    rng = np.random.default_rng(seed)
    face = _warmed(ISplineCalibrator, windows[window], scores, labels, n_knots=n_knots)
    plain = _warmed(GenericISpline, windows[window], scores, labels, n_knots=n_knots)
    for k, op in enumerate(ops):
        s, label = float(scores[WARMUP + k]), bool(labels[WARMUP + k])
        extra = rng.uniform(0.0, 1.0, 3)
        face, got = _apply(face, op, s, label, extra)
        plain, want = _apply(plain, op, s, label, extra)
        assert got == want, (k, op)
    probe = np.linspace(0.01, 0.99, 5)
    assert face.predict_proba(probe).tolist() == plain.predict_proba(probe).tolist()
    assert face.coef_.tolist() == plain.coef_.tolist()


@contextlib.contextmanager
def _interpreted_calls():
    """The face's calls under the prior run interpreted (their Python source, ``_config.run_interpreted``)."""
    real, real_full = river_face.prior_call, river_face.prior_full_call
    river_face.prior_call = lambda *args: _config.run_interpreted(kpr.prior_river_pair, *args)
    river_face.prior_full_call = lambda *args: _config.run_interpreted(kpr.prior_river_full, *args)
    try:
        yield
    finally:
        river_face.prior_call = real
        river_face.prior_full_call = real_full


@pytest.mark.parametrize("window", [Unbounded, lambda: CountWindow(400)], ids=["unbounded", "count 400"])
def test_the_faces_calls_give_the_same_bits_interpreted(window):
    """``prior_river_pair`` (its scratch views of the river state, the run index and free set as
    views of float64 slots) and ``prior_river_full`` interpreted: the compiled calls' bits."""
    scores, labels = _calibrated(WARMUP + 200, 6)
    ref = _warmed(ISplineCalibrator, window, scores, labels)
    got = {}
    for tier in ("compiled", "interpreted"):
        cal = copy.deepcopy(ref)
        with _interpreted_calls() if tier == "interpreted" else contextlib.nullcontext(), _prior_calls() as calls:
            out = []
            for i in range(WARMUP, scores.size):
                x = {"s": float(scores[i])}
                out.append(cal.predict_proba_one(x)[True])
                cal.learn_one(x, bool(labels[i]))
        got[tier] = (out, cal.predict_proba(np.linspace(0.01, 0.99, 9)).tolist(), cal.prior_strength)
        assert sum(p >= 0.0 for p in calls) > 150  # the face's calls served
        assert calls.full  # the full refit among them
    assert got["compiled"] == got["interpreted"]
