"""The inline river face of PlattCalibrator and GEVCalibrator (``streamcal.gev._river``).

``learn_one`` and ``predict_proba_one`` check the common call inline and make one compiled call
each; anything else takes the generic methods. Checked here: every served probability of a
river-face loop within 1e-9 of a converged full refit of the histogram before the event (the
score prior on and off, zero and fractional weights, windows with and without event times),
equal bit for bit to ``prequential`` and to the generic methods' loop; calls the inline path
does not take (integer labels and weights, extra keys, a ``score_key``) give the same bits; a
rejected call raises the generic error and changes nothing. Platt's deferred work (the kept
event, the scalars in the compiled fit): every reader between the river face's calls sees what
the generic methods give, the state saved equals theirs, and threads lose nothing.
"""

from __future__ import annotations

import copy
import pickle
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river_cases import river_pairs_beside_an_array_learner
from test_gev_compiled_refit import naive_prior_refit_proba

from streamcal import GEVCalibrator, PlattCalibrator
from streamcal._streaming import StreamingCalibrator
from streamcal.buckets import Edges
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

TOL = 1e-9

WINDOWS = {
    "unbounded": Unbounded,
    "count 9": lambda: CountWindow(9),
    "count 60": lambda: CountWindow(60),
    "decay 6 events": lambda: Decay(6.0),
    "time 15": lambda: TimeWindow(15.0),
}


def generic(cls):
    """``cls`` with the generic river methods of the base class (no inline path)."""
    methods = {"learn_one": StreamingCalibrator.learn_one, "predict_proba_one": StreamingCalibrator.predict_proba_one}
    return type(f"Generic{cls.__name__}", (cls,), methods)


@st.composite
def streams(draw):
    n = draw(st.integers(20, 160))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    z = rng.normal(draw(st.floats(-3.0, 1.0)), draw(st.floats(0.3, 3.0)), n)
    if draw(st.booleans()):
        z = rng.choice([-1.5, 0.0, 0.8], n)  # a few buckets: the fit moves far per event
    scores = 1 / (1 + np.exp(-z))
    shift = draw(st.floats(-3.0, 0.5))
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-(draw(st.floats(0.2, 1.5)) * z + shift)))
    weights = rng.choice([0.0, 0.3, 1.0, 1.0, 2.5], n) if draw(st.booleans()) else np.ones(n)
    times = np.cumsum(rng.exponential(1.0, n))
    return scores, labels, weights, times, draw(st.sampled_from(sorted(WINDOWS)))


def river_loop(cal, scores, labels, weights, times):
    """The served probabilities of a predict-then-learn loop of the river face."""
    uses_times = cal.window_histogram.uses_times
    out = np.empty(scores.size)
    for i in range(scores.size):
        x = {"score": float(scores[i])}
        out[i] = cal.predict_proba_one(x)[True]
        cal.learn_one(x, bool(labels[i]), w=float(weights[i]), t=float(times[i]) if uses_times else None)
    return out


@settings(max_examples=40, deadline=None)
@given(streams(), st.sampled_from(["auto", None]))
def test_platt_river_face_matches_a_full_refit_on_every_event(stream, prior):
    scores, labels, weights, times, window = stream
    cal = PlattCalibrator(window=WINDOWS[window](), prior=prior)
    ref = PlattCalibrator(window=WINDOWS[window](), prior=prior)  # the histogram before each event
    uses_times = ref.window_histogram.uses_times
    worst = 0.0
    for i in range(scores.size):
        x = {"score": float(scores[i])}
        p = cal.predict_proba_one(x)[True]
        if ref.n_learned and ref.window_weight > 0.0:
            worst = max(worst, abs(p - float(naive_prior_refit_proba(ref, scores[i : i + 1])[0])))
        t = float(times[i]) if uses_times else None
        cal.learn_one(x, bool(labels[i]), w=float(weights[i]), t=t)
        ref.learn_one(x, bool(labels[i]), w=float(weights[i]), t=t)
    assert worst <= TOL


@settings(max_examples=30, deadline=None)
@given(streams(), st.sampled_from(["auto", None]), st.sampled_from([PlattCalibrator, GEVCalibrator]))
def test_river_face_equals_prequential_and_the_generic_methods(stream, prior, cls):
    scores, labels, weights, times, window = stream
    times_arg = times if WINDOWS[window]().uses_times else None
    proba, _ = cls(window=WINDOWS[window](), prior=prior).prequential(scores, labels, weights=weights, times=times_arg)
    inline = river_loop(cls(window=WINDOWS[window](), prior=prior), scores, labels, weights, times)
    plain = river_loop(generic(cls)(window=WINDOWS[window](), prior=prior), scores, labels, weights, times)
    assert np.array_equal(inline, plain)
    if prior is None:
        assert np.array_equal(inline, proba)
    else:  # while the prior holds weight, prequential's refits differ from the loop's in the last bits
        np.testing.assert_allclose(inline, proba, rtol=0.0, atol=TOL)


def _long(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.0, 1.5, n)
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(0.8 * z - 1.0)))


def test_platt_river_face_on_a_long_window_serves_from_the_moments_within_the_tolerance():
    # past the first events the inline call refits from the Taylor moments: every prediction
    # against a converged full refit, and the generic path's full refits counted (few)
    scores, labels = _long(3000, 1)
    cal = PlattCalibrator(window=CountWindow(2000))
    cal.prequential(scores[:2500], labels[:2500])
    worst = 0.0
    full = type(cal)._generic_proba_of  # the generic path, counted by a spy
    with mock.patch.object(type(cal), "_generic_proba_of", autospec=True, side_effect=full) as spy:
        for i in range(2500, 3000):
            x = {"score": float(scores[i])}
            p = cal.predict_proba_one(x)[True]
            worst = max(worst, abs(p - float(naive_prior_refit_proba(cal, scores[i : i + 1])[0])))
            cal.learn_one(x, bool(labels[i]))
    assert worst <= TOL
    assert spy.call_count < 100


UNEVEN = np.concatenate([[0.0], np.unique(np.random.default_rng(1).uniform(0.0, 1.0, 40) ** 3), [1.0]])


@pytest.mark.parametrize("buckets", [None, "uniform:37", 16, Edges(edges=UNEVEN, probability_inputs=True)])
def test_platt_kept_scores_at_the_cuts_go_to_the_buckets_bisect_finds(buckets):
    # Platt's kept event finds its bucket in the compiled call (an arithmetic guess on logit and
    # uniform grids, a binary search on uneven cuts): scores at the cuts, a float beside them,
    # the domain's ends; the histogram and every served bit as the generic methods' (Python's
    # bisect) and prequential's
    rng = np.random.default_rng(5)
    cuts = PlattCalibrator(buckets=buckets).window_histogram.layout.cuts
    at = np.concatenate([cuts, np.nextafter(cuts, 0.0), np.nextafter(cuts, 1.0), [0.0, 1.0, 0.5]])
    scores = np.concatenate([rng.uniform(0.05, 0.95, 300), rng.choice(at, 1200)])
    labels = rng.uniform(size=scores.size) < scores
    inline, plain = PlattCalibrator(buckets=buckets), generic(PlattCalibrator)(buckets=buckets)
    got = river_loop(inline, scores, labels, np.ones(scores.size), None)
    ref = river_loop(plain, scores, labels, np.ones(scores.size), None)
    assert np.array_equal(got, ref)
    proba, _ = PlattCalibrator(buckets=buckets).prequential(scores, labels)
    assert np.array_equal(got, proba)
    for a, b in zip(inline.window_histogram.row(), plain.window_histogram.row(), strict=True):
        assert np.array_equal(a, b)


def test_platt_river_face_while_the_prior_holds_equals_prequential():
    # a calibrated stream from the first event (the prior holds throughout): the one call refits
    # from the moments, rebuilt about the model's optimum where the first solve refuses, and
    # hands the refits that need the passes to the full refit, which repeats none of its work
    # (``glm_refit.MOM_REFUSED``): every served bit as prequential's
    rng = np.random.default_rng(3)
    z = rng.normal(-1.0, 1.5, 3000)
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=z.size) < scores
    cal = PlattCalibrator()
    got = river_loop(cal, scores, labels, np.ones(scores.size), None)
    proba, _ = PlattCalibrator().prequential(scores, labels)
    assert np.array_equal(got, proba)
    assert cal.prior_strength > 0.0


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
def test_calls_off_the_inline_path_give_the_same_bits(cls):
    scores, labels = _long(400, 2)
    a, b = cls(window=50), cls(window=50)
    keyed = cls(window=50, score_key="s")
    for i in range(400):
        s = float(scores[i])
        pa = a.predict_proba_one({"score": s})[True]
        pb = b.predict_proba_one({"score": np.float64(s)})[True]  # a numpy score: the generic reader
        pk = keyed.predict_proba_one({"s": s, "other": 3.0})[True]
        assert pa == pb == pk
        a.learn_one({"score": s}, bool(labels[i]), w=1.0)
        b.learn_one({"score": s}, int(labels[i]), w=1)  # an integer label and weight
        keyed.learn_one({"s": s, "other": 3.0}, bool(labels[i]))


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
@pytest.mark.parametrize(
    ("x", "y", "w", "match"),
    [
        ({"score": float("nan")}, True, 1.0, "score"),
        ({"score": 1.5}, True, 1.0, "score"),
        ({"score": -0.1}, False, 1.0, "score"),
        ({"score": 0.3}, True, -1.0, "w"),
        ({"score": 0.3}, True, float("inf"), "w"),
        ({"score": 0.3}, True, float("nan"), "w"),
        ({"score": 0.3}, 2, 1.0, "y"),
        ({"a": 0.3, "b": 0.4}, True, 1.0, "score"),
    ],
)
def test_a_rejected_call_raises_and_changes_nothing(cls, x, y, w, match):
    scores, labels = _long(300, 3)
    cal = cls(window=100)
    for i in range(300):  # past the first refits: the inline path is on
        cal.predict_proba_one({"score": float(scores[i])})
        cal.learn_one({"score": float(scores[i])}, bool(labels[i]))
    before = pickle.dumps(cal)
    twin = copy.deepcopy(cal)
    with pytest.raises((ValueError, TypeError), match=match):
        cal.learn_one(x, y, w=w)
    if match == "score":
        with pytest.raises((ValueError, TypeError), match=match):
            cal.predict_proba_one(x)
    assert pickle.dumps(cal) == before
    probe = {"score": 0.2}
    assert cal.predict_proba_one(probe) == twin.predict_proba_one(probe)


# ---------------------------------------------------------------------------------------- deferred work
# Platt's river face keeps the last learned event for the next prediction's compiled call and
# the map's scalars in the compiled fit meanwhile; every other reader settles them first. Each
# reader below, called anywhere between the river face's calls, must see what the generic
# methods (which defer nothing) give, and the loop must continue with the same bits.
READERS = (
    "pair",
    "learn",
    "learn",
    "predict",
    "predict_one",
    "llr",
    "array",
    "coef",
    "strength",
    "row",
    "n_learned",
    "state",
    "copy",
    "pickle",
    "update",
    "int label",
)
GenericPlattCalibrator = generic(PlattCalibrator)  # at module level: pickle finds the class by its name
GenericPlattCalibrator.__module__ = __name__


def _apply(cal, op, s, label, extra):
    """Run ``op`` on ``cal``; returns ``(cal, result)`` (a copy replaces ``cal``)."""
    x = {"score": s}
    if op == "pair":
        p = cal.predict_proba_one(x)
        cal.learn_one(x, label)
        return cal, p
    if op == "learn":
        return cal, cal.learn_one(x, label)
    if op == "predict":
        return cal, cal.predict_proba_one(x)
    if op == "predict_one":
        return cal, cal.predict_one(x)
    if op == "llr":
        return cal, cal.predict_llr_one(x)
    if op == "array":
        return cal, (cal.predict_proba(extra).tolist(), cal.predict_llr(extra).tolist())
    if op == "coef":
        return cal, cal.coef_
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
        elif isinstance(v, dict):  # ``_beta``: shape -> [slope, intercept]
            out[k] = {xi: np.asarray(b).tolist() for xi, b in v.items()}
        elif v is None or isinstance(v, (bool, int, float, str)):
            out[k] = v
        else:
            out[k] = repr(v)
    return out


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(["unbounded", "count 9", "count 60", "decay 6 events"]),
    st.sampled_from(["auto", None]),
    st.lists(st.sampled_from(READERS), min_size=1, max_size=60),
)
def test_platt_deferred_river_face_equals_the_generic_methods_around_every_reader(seed, window, prior, ops):
    scores, labels = _long(400, seed % 1000)
    rng = np.random.default_rng(seed)
    inline = PlattCalibrator(window=WINDOWS[window](), prior=prior)
    plain = GenericPlattCalibrator(window=WINDOWS[window](), prior=prior)
    for i in range(120):  # past the first fits: the deferred path is on
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


def test_platt_deferred_river_face_under_threads():
    # two river-face loops, an array learner and a reader on one Platt calibrator: nothing lost,
    # the histogram the serial run's (an unbounded window does not depend on the order)
    scores, labels = _long(6000, 4)
    cal = PlattCalibrator()
    cal.update(scores[:500], labels[:500])
    cal.predict_proba_one({"score": 0.5})

    def check(c):
        assert c.n_learned <= 6000

    errors = river_pairs_beside_an_array_learner(cal, scores, labels, 500, 5000, 100, check)
    assert not errors, errors
    serial = PlattCalibrator().update(scores, labels)
    assert cal.n_learned == 6000
    for got, want in zip(cal.histogram()[1:], serial.histogram()[1:], strict=True):
        np.testing.assert_array_equal(got, want)
