"""Pairwise coupling's compiled pair loop (``pairwise_pav.pair_pav_run``) against the per-pair path
(each pair's own ``process``) and the river face, bit for bit: outputs and every pair's state."""

from __future__ import annotations

import pickle
import threading
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river_cases import finishes_while_held, lock_of

import streamcal
from streamcal import PAVCalibrator
from streamcal._kernels import pairwise_pav
from streamcal.multiclass import PairwiseCouplingCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow


@pytest.fixture(autouse=True, scope="module")
def _compiled():
    streamcal.use_compiled_kernels()  # the pair loop runs with compiled kernels only


def per_pair(monkeypatch):
    """Make every calibrator take the per-pair path (each pair's own array face)."""
    monkeypatch.setattr(PairwiseCouplingCalibrator, "_fused_pav_pairs", lambda *args: False)


def stream(rng, m, k):
    p = rng.dirichlet(np.ones(k), size=m)
    p[rng.random((m, k)) < 0.05] = 0.0  # classes the model gives probability 0
    return p, rng.integers(0, k, size=m)


def river_loop(cal, p, labels, learn):
    out = np.full(p.shape, np.nan)
    for e, row in enumerate(p):
        x = {c: float(v) for c, v in enumerate(row)}
        if learn is None or not learn[e]:
            out[e] = list(cal.predict_proba_one(x).values())
        if learn is None or learn[e]:
            cal.learn_one(x, int(labels[e]))
    return out


def assert_same_pairs(a, b):
    assert a.pairs_.keys() == b.pairs_.keys()
    for key, model in a.pairs_.items():
        other = b.pairs_[key]
        # the blocks and fitted values, not the raw arrays: a run of labels learned with one
        # rebuild, as the per-pair path's ``update`` does, leaves other scratch (and other stale
        # values outside the knots' span, never read) than learning them one by one
        mine, theirs = model.blocks(), other.blocks()
        for field in ("first", "last", "pos", "neg"):
            np.testing.assert_array_equal(getattr(mine, field), getattr(theirs, field))
        if mine.first.size:  # the fitted values between the first and the last knot
            span = slice(mine.first[0], mine.last[-1] + 1)
            np.testing.assert_array_equal(mine.fitted[span], theirs.fitted[span])
        grid = np.linspace(0.0, 1.0, 65)
        np.testing.assert_array_equal(model.predict_proba(grid), other.predict_proba(grid))
        np.testing.assert_array_equal(model.predict_llr(grid), other.predict_llr(grid))
        np.testing.assert_array_equal(model.histogram()[1], other.histogram()[1])
        np.testing.assert_array_equal(model.histogram()[2], other.histogram()[2])
        assert model.window_weight == other.window_weight


CALIBRATORS = [
    None,
    PAVCalibrator(window=CountWindow(30)),
    PAVCalibrator(buckets=16, interpolation="step", finite_proba=False),
    PAVCalibrator(window=25, llr_pseudo_count=0.5),
]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(2, 5),
    calibrator=st.sampled_from(CALIBRATORS),
    method=st.sampled_from(["ht", "wlw"]),
    scores=st.sampled_from(["proba", "logit"]),
    weights=st.sampled_from([None, "int", "float"]),
    m=st.integers(0, 150),
)
def test_pair_loop_equals_the_per_pair_path_bit_for_bit(seed, k, calibrator, method, scores, weights, m):
    rng = np.random.default_rng(seed)
    p, y = stream(rng, m, k)
    x = p if scores == "proba" else rng.normal(0.0, 3.0, size=(m, k))
    w = None
    if weights == "int":
        w = rng.integers(0, 4, size=m).astype(float)
    elif weights == "float":
        w = rng.uniform(0.0, 3.0, size=m)
    learn = rng.random(m) < 0.6
    kw = {"calibrator": calibrator, "method": method, "scores": scores, "classes": tuple(range(k))}
    fused, reference = PairwiseCouplingCalibrator(**kw), PairwiseCouplingCalibrator(**kw)
    head = m // 3
    got = [
        fused.prequential(x[:head], y[:head], weights=None if w is None else w[:head]),
        fused.process(x[head:], y[head:], learn[head:], weights=None if w is None else w[head:]),
        fused.update(x, y, weights=w).predict_proba(x),
    ]
    with pytest.MonkeyPatch.context() as mp:
        per_pair(mp)
        expected = [
            reference.prequential(x[:head], y[:head], weights=None if w is None else w[:head]),
            reference.process(x[head:], y[head:], learn[head:], weights=None if w is None else w[head:]),
            reference.update(x, y, weights=w).predict_proba(x),
        ]
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    assert_same_pairs(fused, reference)


@pytest.mark.parametrize("method", ["ht", "wlw"])
def test_pair_loop_equals_the_river_face(method, rng):
    p, y = stream(rng, 400, 5)
    kw = {"method": method, "classes": tuple(range(5))}
    fused, river = PairwiseCouplingCalibrator(**kw), PairwiseCouplingCalibrator(**kw)
    np.testing.assert_array_equal(fused.prequential(p, y), river_loop(river, p, y, None))
    learn = rng.random(400) < 0.5
    np.testing.assert_array_equal(fused.process(p, y, learn), river_loop(river, p, y, learn))
    assert_same_pairs(fused, river)


@pytest.mark.parametrize("calibrator", [None, PAVCalibrator(buckets=500)])
def test_pair_buckets_at_extreme_and_clipped_scores_equal_the_per_pair_path(calibrator, rng, monkeypatch):
    """The pairs find a probability score's bucket from the log-odds it was made from, not from
    its logarithm: the same buckets, so the same bits, at scores spread over the whole log-odds
    range, on the cuts, and clipped at +-MAX_LOG_ODDS."""
    k = 4
    logits = rng.normal(0.0, 1.0, size=(600, k)) * rng.choice([0.1, 3.0, 20.0, 60.0], size=(600, 1))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[rng.random(p.shape) < 0.03] = 0.0
    p[p.sum(axis=1) == 0.0, 0] = 1.0
    y = rng.integers(0, k, size=600)
    kw = {"calibrator": calibrator, "method": "wlw", "classes": tuple(range(k))}
    fused, river, reference = (PairwiseCouplingCalibrator(**kw) for _ in range(3))
    got = fused.prequential(p, y)
    np.testing.assert_array_equal(river_loop(river, p, y, None), got)
    per_pair(monkeypatch)
    np.testing.assert_array_equal(reference.prequential(p, y), got)
    assert_same_pairs(fused, reference)


def test_pairs_without_events_stay_absent_as_in_the_per_pair_path(rng, monkeypatch):
    p, _ = stream(rng, 60, 4)
    y = np.where(rng.random(60) < 0.5, 0, 1)  # only classes 0 and 1 are learned
    fused = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    out = fused.prequential(p, y)
    assert sorted(fused.pairs_) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    reference = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    per_pair(monkeypatch)
    np.testing.assert_array_equal(out, reference.prequential(p, y))
    assert_same_pairs(fused, reference)


@pytest.mark.parametrize(
    ("calibrator", "timed", "fused"),
    [
        (None, False, True),
        (PAVCalibrator(window=CountWindow(50)), False, True),
        (PAVCalibrator(window=Decay(50.0)), False, False),  # its window weight is not the stored total
        (PAVCalibrator(window=TimeWindow(60.0)), True, False),  # its ring grows
    ],
    ids=repr,
)
def test_the_pair_loop_runs_where_its_preconditions_hold(calibrator, timed, fused, rng, monkeypatch):
    calls = []
    kernel = pairwise_pav.pair_pav_run

    def spy(*args):
        calls.append(1)
        return kernel(*args)

    monkeypatch.setattr(pairwise_pav, "pair_pav_run", spy)
    p, y = stream(rng, 50, 3)
    cal = PairwiseCouplingCalibrator(calibrator, classes=(0, 1, 2))
    cal.prequential(p, y, times=np.arange(50.0) if timed else None)
    assert bool(calls) is fused


# -- the river face in one kernel call -----------------------------------------------------------


def per_pair_river(monkeypatch):
    """Make every calibrator's river face take the per-pair calls."""
    monkeypatch.setattr(PairwiseCouplingCalibrator, "_river_states", lambda *args: None)


def river_events(cal, xs, labels, learn, ws):
    out = []
    for x, y, learns, w in zip(xs, labels, learn, ws, strict=True):
        out.append(list(cal.predict_proba_one(x).items()))
        if learns:
            cal.learn_one(x, y, w=w)
    return out


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(2, 5),
    calibrator=st.sampled_from(CALIBRATORS),
    method=st.sampled_from(["ht", "wlw"]),
    scores=st.sampled_from(["proba", "logit"]),
    fixed=st.booleans(),
    weights=st.booleans(),
    m=st.integers(0, 120),
)
def test_river_face_in_one_call_equals_the_per_pair_calls(seed, k, calibrator, method, scores, fixed, weights, m):
    rng = np.random.default_rng(seed)
    p, y = stream(rng, m, k)
    x = p if scores == "proba" else rng.normal(0.0, 3.0, size=(m, k))
    # some events score a subset of the classes: a class first seen late joins with the pairs of
    # its ghosts (the ghosts learning in the kernel beside the pairs)
    xs = [{c: float(v) for c, v in enumerate(row) if c < 2 or rng.random() < 0.8} for row in x]
    labels = y.tolist()
    learn = (rng.random(m) < 0.7).tolist()
    ws = rng.integers(0, 3, size=m).astype(float).tolist() if weights else [1.0] * m
    kw = {"calibrator": calibrator, "method": method, "scores": scores, "classes": tuple(range(k)) if fixed else None}
    fast, reference = PairwiseCouplingCalibrator(**kw), PairwiseCouplingCalibrator(**kw)
    got = river_events(fast, xs, labels, learn, ws)
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = river_events(reference, xs, labels, learn, ws)
    assert got == expected  # the same classes, in the same order, with the same floats
    assert_same_pairs(fast, reference)
    ghosts, their_ghosts = fast.ghosts_, reference.ghosts_
    assert ghosts.keys() == their_ghosts.keys()
    assert not fixed or not ghosts
    for c, mine in ghosts.items():
        for side, (a, b) in enumerate(zip(mine, their_ghosts[c], strict=True)):
            assert_same_pairs(types.SimpleNamespace(pairs_={side: a}), types.SimpleNamespace(pairs_={side: b}))


def test_river_face_follows_pairs_replaced_or_reloaded(rng):
    p, y = stream(rng, 300, 4)
    cal = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    xs = [{c: float(v) for c, v in enumerate(row)} for row in p]
    for x, label in zip(xs[:100], y[:100].tolist(), strict=True):
        cal.predict_proba_one(x)
        cal.learn_one(x, label)
    twin = pickle.loads(pickle.dumps(cal))  # the cached states are not saved: rebuilt on use
    # a pair refitted in place holds a new state buffer: the river face follows it
    cal.pairs_[(0, 1)].fit([0.2, 0.4, 0.6], [0, 1, 1])
    twin.pairs_[(0, 1)].fit([0.2, 0.4, 0.6], [0, 1, 1])
    reference = pickle.loads(pickle.dumps(twin))
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = [reference.predict_proba_one(x) for x in xs[100:]]
    assert [cal.predict_proba_one(x) for x in xs[100:]] == expected
    assert [twin.predict_proba_one(x) for x in xs[100:]] == expected


def test_river_face_follows_pairs_refitted_one_after_another_between_events(rng):
    # each refit gives one pair a new state buffer while the other pairs keep theirs: the river
    # face binds it and answers as the per-pair calls do, event after event
    p, y = stream(rng, 400, 4)
    xs = [{c: float(v) for c, v in enumerate(row)} for row in p]
    labels = y.tolist()
    refits = {100: (0, 1), 180: (2, 3), 181: (0, 3), 300: (0, 1)}
    fast, reference = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3)), PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))

    def run(cal):
        out = []
        for e, (x, label) in enumerate(zip(xs, labels, strict=True)):
            if e in refits:
                cal.pairs_[refits[e]].fit([0.1, 0.3, 0.5, 0.7, 0.9][: 2 + e % 3], [0, 1, 0, 1, 1][: 2 + e % 3])
            out.append(cal.predict_proba_one(x))
            cal.learn_one(x, label)
        return out

    got = run(fast)
    assert fast.river_in_one_call  # still one call per event after the refits
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = run(reference)
    assert got == expected
    assert_same_pairs(fast, reference)


@pytest.mark.parametrize("fixed", [True, False])
def test_river_face_binds_pairs_added_one_at_a_time_as_the_per_pair_calls_answer(fixed, rng):
    # labels that reach one new class after another: each learn adds pairs, the next predict
    # binds them beside the pairs already bound; one event also refits a bound pair (a new
    # buffer) just before its learn adds pairs, and one predicts with a class not yet scored
    k = 5
    p, _ = stream(rng, 60, k)
    xs = [{c: float(v) for c, v in enumerate(row)} for row in p]
    xs[3] = {c: v for c, v in xs[3].items() if c != 4}
    labels = [0, 1, 0, 2, 1, 3, 2, 4, *rng.integers(0, k, size=52).tolist()]
    kw = {"classes": tuple(range(k)) if fixed else None}

    def run(cal):
        out = []
        for e, (x, label) in enumerate(zip(xs, labels, strict=True)):
            if e == 5:
                cal.pairs_[(0, 1)].fit([0.2, 0.4, 0.6], [0, 1, 1])
            out.append(list(cal.predict_proba_one(x).items()))
            cal.learn_one(x, label)
        out.append(list(cal.predict_proba_one(xs[0]).items()))
        return out

    fast, reference = PairwiseCouplingCalibrator(**kw), PairwiseCouplingCalibrator(**kw)
    got = run(fast)
    assert fast.river_in_one_call
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = run(reference)
    assert got == expected
    assert_same_pairs(fast, reference)


def test_default_pairs_equal_explicit_pav_pairs_bit_for_bit(rng):
    # the default binary calibrator's facts are read once per process; a prototype given
    # explicitly is read from its clone: the same pairs, the same bits
    p, y = stream(rng, 300, 3)
    default = PairwiseCouplingCalibrator(classes=(0, 1, 2))
    explicit = PairwiseCouplingCalibrator(PAVCalibrator(), classes=(0, 1, 2))
    np.testing.assert_array_equal(default.prequential(p, y), explicit.prequential(p, y))
    xs = [{c: float(v) for c, v in enumerate(row)} for row in p[:50]]
    for x, label in zip(xs, y[:50].tolist(), strict=True):
        assert default.predict_proba_one(x) == explicit.predict_proba_one(x)
        default.learn_one(x, label)
        explicit.learn_one(x, label)
    assert_same_pairs(default, explicit)


def test_river_face_with_a_pair_marked_busy_takes_the_per_pair_calls(rng):
    p, y = stream(rng, 200, 3)
    cal = PairwiseCouplingCalibrator(classes=(0, 1, 2))
    cal.prequential(p, y)
    x = {0: 0.2, 1: 0.5, 2: 0.3}
    expected = cal.predict_proba_one(x)
    assert cal._predict_in_one_call(x) == expected  # the one-call kernel answers
    assert cal.river_in_one_call
    pair = cal.pairs_[(0, 2)]
    with pair.holding_packed_state():  # this thread's own marked section: the one-call kernel refuses, nothing changes
        assert cal._predict_in_one_call(x) is None
        assert cal.predict_proba_one(x) == expected
        before = pair.window_weight
        cal.learn_one(x, 2)
        assert pair.window_weight == before + 1.0


@pytest.mark.parametrize(
    ("calibrator", "timed"),
    [(PAVCalibrator(window=Decay(30.0)), False), (PAVCalibrator(window=TimeWindow(600.0)), True)],
    ids=repr,
)
def test_river_face_where_the_one_call_kernels_do_not_apply_equals_the_per_pair_calls(calibrator, timed, rng):
    p, y = stream(rng, 150, 3)
    fast, reference = PairwiseCouplingCalibrator(calibrator), PairwiseCouplingCalibrator(calibrator)
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = []
        for e, row in enumerate(p):
            x = {c: float(v) for c, v in enumerate(row)}
            expected.append(reference.predict_proba_one(x))
            reference.learn_one(x, int(y[e]), t=float(e) if timed else None)
    got = []
    for e, row in enumerate(p):
        x = {c: float(v) for c, v in enumerate(row)}
        got.append(fast.predict_proba_one(x))
        fast.learn_one(x, int(y[e]), t=float(e) if timed else None)
    assert got == expected
    assert not fast.river_in_one_call


def test_river_face_reads_other_score_types_as_the_per_pair_calls_do(rng):
    """Scores that are not Python floats (ints, NumPy floats, a mapping that is not a dict), int
    weights and labels equal to a class but of another type leave the lean reading of the one
    call: the full checks read them, and the result is bit for bit the per-pair calls'."""
    from collections import OrderedDict

    p, y = stream(rng, 200, 4)
    fast, reference = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3)), PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    kinds = [
        lambda row: {c: float(v) for c, v in enumerate(row)},
        lambda row: {c: np.float64(v) for c, v in enumerate(row)},
        lambda row: OrderedDict((c, float(v)) for c, v in enumerate(row)),
        lambda row: {c: (1 if v > 0.5 else float(v)) for c, v in enumerate(row)},
    ]
    events = []
    for e, row in enumerate(p):
        x = kinds[e % 4](row)
        label = int(y[e]) if e % 3 else float(y[e])
        events.append((x, label, 2 if e % 5 == 0 else 1.0))
    got = []
    for x, label, w in events:
        got.append(fast.predict_proba_one(x))
        fast.learn_one(x, label, w=w)
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = []
        for x, label, w in events:
            expected.append(reference.predict_proba_one(x))
            reference.learn_one(x, label, w=w)
    assert got == expected
    assert fast.river_in_one_call
    assert_same_pairs(fast, reference)


@pytest.mark.parametrize(
    ("x", "y", "w", "error"),
    [
        ({0: 0.5, 1: float("nan"), 2: 0.5}, 0, 1.0, "probabilities in \\[0, 1\\]"),
        ({0: 0.5, 1: 1.5, 2: 0.5}, 0, 1.0, "probabilities in \\[0, 1\\]"),
        ({0: 0.5, 1: "0.5", 2: 0.5}, 0, 1.0, "map classes to numbers"),
        ({0: 0.5, 1: 0.25, 9: 0.25}, 0, 1.0, "not among `classes`"),
        ({0: 0.5, 1: 0.25, 2: 0.25}, 9, 1.0, "not among `classes`"),
        ({0: 0.5, 1: 0.25, 2: 0.25}, [0], 1.0, "hashable"),
        ({0: 0.5, 1: 0.25, 2: 0.25}, None, 1.0, "None and NaN"),
        ({0: 0.5, 1: 0.25, 2: 0.25}, 0, -1.0, "`w`"),
        ({0: 0.5, 1: 0.25, 2: 0.25}, 0, float("nan"), "`w`"),
        ([0.5, 0.25, 0.25], 0, 1.0, "dict of per-class scores"),
    ],
)
def test_river_face_rejects_bad_events_on_the_one_call_path_changing_nothing(rng, x, y, w, error):
    p, labels = stream(rng, 200, 3)
    cal = PairwiseCouplingCalibrator(classes=(0, 1, 2))
    for row, label in zip(p, labels.tolist(), strict=True):
        cal.learn_one({c: float(v) for c, v in enumerate(row)}, label)
    assert cal.river_in_one_call
    probe = {0: 0.2, 1: 0.3, 2: 0.5}
    before, state = cal.predict_proba_one(probe), pickle.dumps(cal)
    with pytest.raises((TypeError, ValueError), match=error):
        cal.learn_one(x, y, w=w)
    if isinstance(x, dict) and y == 0 and w == 1.0:
        with pytest.raises((TypeError, ValueError), match=error):
            cal.predict_proba_one(x)
    assert cal.predict_proba_one(probe) == before
    assert pickle.dumps(cal) == state


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_river_face_rejects_logits_out_of_range_in_the_classes_order_changing_nothing(rng, bad):
    cal = PairwiseCouplingCalibrator(scores="logit", classes=(0, 1, 2))
    for row, label in zip(rng.normal(0.0, 2.0, size=(150, 3)), rng.integers(0, 3, size=150).tolist(), strict=True):
        cal.learn_one({c: float(v) for c, v in enumerate(row)}, label)
    assert cal.river_in_one_call
    probe = {0: 0.2, 1: -1.3, 2: 0.5}
    before, state = cal.predict_proba_one(probe), pickle.dumps(cal)
    x = {0: 0.5, 1: bad, 2: -0.5}  # every class, in order: the kernels read it and refuse
    with pytest.raises(ValueError, match="finite logits"):
        cal.learn_one(x, 1)
    with pytest.raises(ValueError, match="finite logits"):
        cal.predict_proba_one(x)
    assert cal.predict_proba_one(probe) == before
    assert pickle.dumps(cal) == state


@pytest.mark.parametrize(
    ("name", "value"),
    [("method", "wlw"), ("tol", 1e-3), ("max_iter", 0), ("scores", "logit"), ("calibrator", PAVCalibrator(window=50))],
)
def test_river_face_follows_parameters_replaced_after_its_kernels_were_bound(rng, name, value):
    """A parameter replaced between events (river's parameters are replaced, not changed in
    place) reaches the next event on the one-call path, as on the per-pair calls."""
    p, y = stream(rng, 120, 4)
    xs = [{c: float(v) for c, v in enumerate(row)} for row in p]
    labels = y.tolist()

    def run(cal):
        out = []
        for e, (x, label) in enumerate(zip(xs, labels, strict=True)):
            if e == 60:
                setattr(cal, name, value)  # a new prototype: the pairs made before keep theirs
            out.append(list(cal.predict_proba_one(x).items()))
            cal.learn_one(x, label)
        return out

    fast = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    got = run(fast)
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = run(PairwiseCouplingCalibrator(classes=(0, 1, 2, 3)))
    assert got == expected
    assert fast.river_in_one_call


def test_river_face_reads_score_dicts_in_any_key_order_as_the_per_pair_calls_do(rng):
    """A dict of float scores for every class in any key order (and with unfixed classes, once
    all are learned) takes the one-call path; the result is bit for bit the per-pair calls', its
    keys in the classes' order."""
    p, y = stream(rng, 300, 4)
    orders = [(0, 1, 2, 3), (3, 2, 1, 0), (2, 0, 3, 1)]
    events = [({c: float(p[e, c]) for c in orders[e % 3]}, int(y[e])) for e in range(len(p))]

    def run(cal):
        out = []
        for x, label in events:
            out.append(list(cal.predict_proba_one(x).items()))
            cal.learn_one(x, label)
        return out

    for classes in [(0, 1, 2, 3), None]:
        fast = PairwiseCouplingCalibrator(classes=classes)
        got = run(fast)
        with pytest.MonkeyPatch.context() as mp:
            per_pair_river(mp)
            reference = PairwiseCouplingCalibrator(classes=classes)
            expected = run(reference)
        assert got == expected
        assert [c for c, _ in got[-1]] == [0, 1, 2, 3]
        assert fast.river_in_one_call
        assert_same_pairs(fast, reference)


def mutated_and_rejected_events(cal, p, labels):
    """The river face over one score dict mutated in place between the calls (the learned event
    scores the classes in another order than the predicted one), with rejected calls between."""
    k = p.shape[1]
    out = []
    x = {}
    for e, (row, label) in enumerate(zip(p.tolist(), labels.tolist(), strict=True)):
        for c in range(k):
            x[c] = row[c]
        out.append(list(cal.predict_proba_one(x).items()))
        if e % 7 == 3:  # a score out of range: refused by the kernel, named by the full checks
            x[1] = 1.5
            with pytest.raises(ValueError, match="probabilities in"):
                cal.learn_one(x, label)
            with pytest.raises(ValueError, match="probabilities in"):
                cal.predict_proba_one(x)
            x[1] = row[1]
        if e % 11 == 5:
            with pytest.raises(ValueError, match="not among `classes`"):
                cal.learn_one(x, 9)
        for c in range(k):
            x[c] = row[(c + 1) % k]
        cal.learn_one(x, label)
    return out


def test_river_face_without_the_lock_equals_the_per_pair_calls(rng, monkeypatch):
    # fixed classes and the default pairs: the common event takes no lock
    p, y = stream(rng, 500, 4)
    fast, reference = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3)), PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    got = mutated_and_rejected_events(fast, p, y)
    x = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}
    lock = lock_of(fast)
    # held without the frame's mark, the lock does not delay the common event; held with it
    # (any section of the calibrator), the kernels refuse and the call waits for the lock
    assert finishes_while_held(lock.rlock, lambda: fast.learn_one(x, 2), 5.0)
    assert finishes_while_held(lock.rlock, lambda: fast.predict_proba_one(x), 5.0)
    assert not finishes_while_held(lock, lambda: fast.learn_one(x, 3), 0.2)
    assert not finishes_while_held(lock, lambda: fast.predict_proba_one(x), 0.2)
    with monkeypatch.context() as mp:
        per_pair_river(mp)
        expected = mutated_and_rejected_events(reference, p, y)
        reference.learn_one(x, 2)
        reference.learn_one(x, 3)
    assert got == expected
    assert_same_pairs(fast, reference)
    assert fast.predict_proba_one(x) == reference.predict_proba_one(x)
    # a parameter replaced unbinds the kernels (the frame marked): the next calls bind again
    fast.method, reference.method = "wlw", "wlw"
    assert fast.predict_proba_one(x) == reference.predict_proba_one(x)


@pytest.mark.parametrize("method", ["ht", "wlw"])
def test_river_face_reloaded_and_rebound_with_six_classes_equals_the_per_pair_calls(rng, method):
    """Six classes (the prediction kernel's matrices of 6 x 6 and 7 x 7 views of its frame), a
    calibrator reloaded between events (no bound kernels: bound again at its next call) and a
    parameter replaced after that, over a score dict mutated in place with rejected calls between:
    the per-pair calls' outputs and pairs, bit for bit."""
    p, y = stream(rng, 240, 6)
    classes = tuple(range(6))

    def run(cal):
        first = mutated_and_rejected_events(cal, p[:120], y[:120])
        twin = pickle.loads(pickle.dumps(cal))
        second = mutated_and_rejected_events(twin, p[120:180], y[120:180])
        twin.tol = 1e-9
        return first + second + mutated_and_rejected_events(twin, p[180:], y[180:]), twin

    got, fast = run(PairwiseCouplingCalibrator(classes=classes, method=method))
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected, reference = run(PairwiseCouplingCalibrator(classes=classes, method=method))
    assert got == expected
    assert_same_pairs(fast, reference)
    assert fast.river_in_one_call


def test_river_face_without_the_lock_loses_nothing_among_threads(rng):
    n, k = 3_000, 3
    p, y = stream(rng, n, k)
    rows, labels = p.tolist(), y.tolist()
    cal = PairwiseCouplingCalibrator(classes=(0, 1, 2))
    errors = []
    done = threading.Event()

    def river(part):
        for row, label in zip(rows[part], labels[part], strict=True):
            x = {c: row[c] for c in range(k)}
            q = cal.predict_proba_one(x)
            assert abs(sum(q.values()) - 1.0) < 1e-9
            cal.learn_one(x, label)

    def array(part):
        for lo in range(part.start, part.stop, 97):
            hi = min(lo + 97, part.stop)
            cal.update(p[lo:hi], y[lo:hi])

    def watch():
        while not done.is_set():
            q = cal.predict_proba_one({0: 0.2, 1: 0.3, 2: 0.5})
            assert abs(sum(q.values()) - 1.0) < 1e-9
            assert all(m.n_learned >= 0 for m in cal.pairs_.values())

    def guarded(job, *args):
        def run():
            try:
                job(*args)
            except BaseException as error:  # re-raised in the test's thread
                errors.append(error)

        return threading.Thread(target=run, daemon=True)

    third = n // 3
    workers = [guarded(river, slice(0, third)), guarded(river, slice(third, 2 * third)), guarded(array, slice(2 * third, n))]
    watcher = guarded(watch)
    for thread in [*workers, watcher]:
        thread.start()
    for thread in workers:
        thread.join(300.0)
    done.set()
    watcher.join(300.0)
    if errors:
        raise errors[0]
    assert sum(m.n_learned for m in cal.pairs_.values()) == n * (k - 1)
    # the frame's mark lifted after the last section: the common event runs without the lock
    assert finishes_while_held(lock_of(cal).rlock, lambda: cal.learn_one({0: 0.2, 1: 0.3, 2: 0.5}, 0), 5.0)


def predicted_then_learned(cal, x, labels):
    """The river face learning the event it has just predicted, or another: the same dict, a copy
    with one class scored as in the event before, the event before, after a prediction rejected
    between, and with a score of zero predicted and learned."""
    k = x.shape[1]
    out = []
    for e, (row, label) in enumerate(zip(x.tolist(), labels.tolist(), strict=True)):
        event = dict(enumerate(row))
        case = e % 5
        if case == 4:
            event[e % k] = 0.0
        out.append(list(cal.predict_proba_one(event).items()))
        learned = event
        if case == 1:
            learned = dict(event)
            learned[e % k] = float(x[e - 1, e % k])
        elif case == 2:
            learned = dict(enumerate(x[e - 1].tolist()))
        elif case == 3:
            with pytest.raises(ValueError, match=r"probabilities in|finite"):
                cal.predict_proba_one({**event, 1: 1.5 if cal.scores == "proba" else float("inf")})
        cal.learn_one(learned, label)
    return out


@pytest.mark.parametrize("method", ["ht", "wlw"])
@pytest.mark.parametrize("scores", ["proba", "logit"])
def test_river_face_learning_the_event_just_predicted_or_another_equals_the_per_pair_calls(rng, method, scores):
    # the learning kernel reads the last prediction's logarithms and pair scores where it is
    # given the same scores: the outputs and the pairs are still the per-pair calls'
    p, y = stream(rng, 400, 4)
    x = p if scores == "proba" else rng.normal(0.0, 3.0, size=p.shape)
    kw = {"method": method, "scores": scores, "classes": (0, 1, 2, 3)}
    fast, reference = PairwiseCouplingCalibrator(**kw), PairwiseCouplingCalibrator(**kw)
    got = predicted_then_learned(fast, x, y)
    with pytest.MonkeyPatch.context() as mp:
        per_pair_river(mp)
        expected = predicted_then_learned(reference, x, y)
    assert got == expected
    assert fast.river_in_one_call
    assert_same_pairs(fast, reference)
