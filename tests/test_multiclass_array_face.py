"""The multiclass calibrators' array face (``update``, ``predict_proba``, ``prequential``,
``process``) against loops of their river face, bit for bit; event weights and times; every
window in both spellings; input forms; rejected calls."""

from __future__ import annotations

import math
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import base
from state_files import objects, pack, unpack

from streamcal import PAVCalibrator
from streamcal.buckets import QuantileEdges
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow, as_decay

CALIBRATORS = [PairwiseCouplingCalibrator, OneVsRestCalibrator]

# every window, in its explicit form and its shorthand; True where it needs event times
WINDOWS = [
    (None, False),
    (CountWindow(40), False),
    (40, False),
    ("40", False),
    (TimeWindow(600.0), True),
    ("10m", True),
    ("600s", True),
    (Decay(50.0), False),
    (as_decay(50), False),
    (Decay(300.0, by="time"), True),
    (as_decay("5m"), True),
]


class NoArrayFace(base.Classifier):
    """A binary calibrator with only the river face (and no event weights or times)."""

    def __init__(self):
        self._pos = np.zeros(17)
        self._tot = np.zeros(17)

    def _bin(self, x) -> int:  # its score is a log-odds: bins of width 1 on [-8, 8]
        return min(max(int(next(iter(x.values())) + 8.0), 0), 16)

    def learn_one(self, x, y):
        b = self._bin(x)
        self._pos[b] += bool(y)
        self._tot[b] += 1.0

    def predict_proba_one(self, x):
        b = self._bin(x)
        p = (self._pos[b] + 0.5) / (self._tot[b] + 1.0)
        return {False: 1.0 - float(p), True: float(p)}

    @property
    def window_weight(self) -> float:
        return float(self._tot.sum())


def stream(rng, m, k, zeros=True):
    p = rng.dirichlet(np.ones(k), size=m)
    if zeros:
        p[rng.random((m, k)) < 0.05] = 0.0  # classes the model gives probability 0
    y = rng.integers(0, k, size=m)
    t = np.cumsum(rng.exponential(30.0, size=m))
    return p, y, t


def river_loop(cal, classes, p, labels, learn, w=None, t=None):
    """The river face over the events: predict where not learning (or everywhere, prequential),
    learn where ``learn``; NaN rows where nothing is predicted."""
    out = np.full(p.shape, np.nan)
    for e, row in enumerate(p):
        x = {c: float(v) for c, v in zip(classes, row, strict=True)}
        if learn is None or not learn[e]:
            out[e] = list(cal.predict_proba_one(x).values())
        if learn is None or learn[e]:
            kw = {}
            if w is not None:
                kw["w"] = float(w[e])
            if t is not None:
                kw["t"] = float(t[e])
            cal.learn_one(x, labels[e], **kw)
    return out


def make(cls, window, method="ht", buckets=None, classes=(0, 1, 2, 3)):
    kw = {"window": window}
    if buckets is not None:
        kw["buckets"] = buckets
    extra = {"method": method} if cls is PairwiseCouplingCalibrator else {}
    return cls(calibrator=PAVCalibrator(**kw), classes=classes, **extra)


def binary_calibrators(cal) -> dict:
    """Pair (pairwise coupling) or class (one-vs-rest) -> its binary calibrator."""
    return cal.pairs_ if isinstance(cal, PairwiseCouplingCalibrator) else cal.calibrators_


def assert_same_state(a, b):
    a_models, b_models = binary_calibrators(a), binary_calibrators(b)
    assert a_models.keys() == b_models.keys()
    for key, model in a_models.items():
        other = b_models[key]
        assert model.window_weight == other.window_weight
        grid = np.linspace(0.0, 1.0, 33)
        np.testing.assert_array_equal(model.predict_proba(grid), other.predict_proba(grid))
    assert a.last_time == b.last_time


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    cls=st.sampled_from(CALIBRATORS),
    window=st.sampled_from(WINDOWS),
    method=st.sampled_from(["ht", "wlw"]),
    weights=st.sampled_from([None, "int", "float"]),
    quantile=st.booleans(),
    m=st.integers(0, 160),
)
def test_prequential_equals_a_loop_of_the_river_face(seed, cls, window, method, weights, quantile, m):
    rng = np.random.default_rng(seed)
    window, timed = window
    classes = (0, 1, 2, 3)
    p, y, t = stream(rng, m, 4)
    w = None
    if weights == "int":
        w = rng.integers(0, 4, size=m).astype(float)
    elif weights == "float":
        w = rng.uniform(0.0, 3.0, size=m)
    buckets = QuantileEdges(16, warmup=30) if quantile else None
    fast, slow = make(cls, window, method, buckets), make(cls, window, method, buckets)
    times = t if timed else None
    head = m // 3  # two calls: the second continues from the state the first left
    parts = [slice(0, head), slice(head, m)]
    got = np.concatenate(
        [
            fast.prequential(p[s], y[s], weights=None if w is None else w[s], times=None if times is None else times[s])
            for s in parts
        ]
    )
    expected = river_loop(slow, classes, p, y.tolist(), None, w, times)
    np.testing.assert_array_equal(got, expected)
    assert_same_state(fast, slow)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    cls=st.sampled_from(CALIBRATORS),
    window=st.sampled_from(WINDOWS),
    weights=st.booleans(),
    m=st.integers(0, 160),
)
def test_process_equals_the_same_sequence_of_river_calls(seed, cls, window, weights, m):
    rng = np.random.default_rng(seed)
    window, timed = window
    classes = (0, 1, 2, 3)
    p, y, t = stream(rng, m, 4)
    learn = rng.random(m) < 0.6
    w = rng.integers(0, 3, size=m).astype(float) if weights else None
    fast, slow = make(cls, window), make(cls, window)
    times = t if timed else None
    got = fast.process(p, y, learn, weights=w, times=times)
    expected = river_loop(slow, classes, p, y.tolist(), learn, w, times)
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(got[learn]).all()
    assert_same_state(fast, slow)
    # update then predict_proba: a loop of learn_one then predict_proba_one
    more, _, _ = stream(rng, 20, 4)
    fast.update(p, y, weights=w, times=None if times is None else times + 1e4)
    river_loop(slow, classes, p, y.tolist(), np.ones(m, bool), w, None if times is None else times + 1e4)
    np.testing.assert_array_equal(fast.predict_proba(more), river_loop(slow, classes, more, None, np.zeros(20, bool)))


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("method", ["ht", "wlw"])
def test_array_face_over_calibrators_without_one_equals_the_river_face(cls, method, rng):
    extra = {"method": method} if cls is PairwiseCouplingCalibrator else {}
    classes = ("c", "a", "b")
    fast = cls(calibrator=NoArrayFace(), classes=classes, **extra)
    slow = cls(calibrator=NoArrayFace(), classes=classes, **extra)
    p, y, _ = stream(rng, 200, 3)
    labels = [classes[i] for i in y]
    np.testing.assert_array_equal(fast.prequential(p, labels), river_loop(slow, classes, p, labels, None))
    learn = rng.random(200) < 0.5
    np.testing.assert_array_equal(fast.process(p, labels, learn), river_loop(slow, classes, p, labels, learn))
    # it takes no weights: refused before anything changes
    before = pickle.dumps(fast)
    with pytest.raises(TypeError, match=r"`calibrator` NoArrayFace takes no `w=` in its learn_one"):
        fast.prequential(p, labels, weights=np.full(200, 2.0))
    assert pickle.dumps(fast) == before


# each window's spellings: the explicit strategy, then the shorthands the binary calibrators read
SPELLINGS = [
    ([CountWindow(40), 40, "40"], False),
    ([TimeWindow(600.0), "10m", "600s"], True),
    ([TimeWindow(7 * 86400.0), "7d"], True),
]


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize(("spellings", "timed"), SPELLINGS, ids=repr)
def test_every_window_in_every_spelling(cls, spellings, timed, rng):
    p, y, t = stream(rng, 300, 3)
    results = []
    for window in spellings:
        cal = cls(calibrator=PAVCalibrator(window=window), classes=(0, 1, 2))
        river = cls(calibrator=PAVCalibrator(window=window), classes=(0, 1, 2))
        if timed:
            before = pickle.dumps(cal)
            with pytest.raises(ValueError, match=r"TimeWindow needs event times: pass `times=`"):
                cal.prequential(p, y)
            with pytest.raises(ValueError, match=r"TimeWindow needs event times: pass `t=` to learn_one"):
                cal.learn_one({0: 0.2, 1: 0.3, 2: 0.5}, 0)
            assert pickle.dumps(cal) == before
        times = t if timed else None
        out = cal.prequential(p, y, times=times)
        np.testing.assert_array_equal(out, river_loop(river, (0, 1, 2), p, y.tolist(), None, None, times))
        results.append(out)
    for out in results[1:]:
        np.testing.assert_array_equal(out, results[0])


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_a_time_window_forgets_what_left_it(cls, rng):
    cal = cls(calibrator=PAVCalibrator(window="1m"), classes=(0, 1, 2))
    p, y, _ = stream(rng, 50, 3)
    cal.update(p, y, times=np.arange(50.0))
    cal.learn_one({0: 0.5, 1: 0.3, 2: 0.2}, 0, t=200.0)  # 60 s later than everything else
    weights = {key: model.window_weight for key, model in binary_calibrators(cal).items()}
    if cls is OneVsRestCalibrator:
        assert weights == {0: 1.0, 1: 1.0, 2: 1.0}
    else:  # pairs with class 0 learned the new event; the pair (1, 2) kept its window
        assert weights[(0, 1)] == weights[(0, 2)] == 1.0
        assert weights[(1, 2)] == np.sum((y == 1) | (y == 2))


# --- input forms and rejected calls --------------------------------------------------------


def forms(p, y, w, t, learn):
    out = {"numpy": (p, y, w, t, learn), "lists": (p.tolist(), y.tolist(), w.tolist(), t.tolist(), learn.tolist())}
    out["columns"] = (p, y[:, None], w[:, None], t[:, None], learn[:, None])
    try:
        import pandas as pd
    except ImportError:
        pass
    else:
        out["pandas"] = (pd.DataFrame(p), pd.Series(y), pd.Series(w), pd.DataFrame({"t": t}), pd.Series(learn))
    try:
        import polars as pl
    except ImportError:
        pass
    else:
        out["polars"] = (pl.DataFrame(p), pl.Series(y), pl.Series(w), pl.DataFrame({"t": t}), pl.Series(learn))
    return out


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_every_input_form_gives_the_outputs_of_numpy_arrays(cls, rng):
    p, y, t = stream(rng, 120, 3)
    w = rng.integers(1, 3, size=120).astype(float)
    learn = rng.random(120) < 0.5
    results = {}
    for name, (ps, ys, ws, ts, ls) in forms(p, y, w, t, learn).items():
        a = cls(calibrator=PAVCalibrator(window="1h"), classes=(0, 1, 2))
        b = cls(calibrator=PAVCalibrator(window="1h"), classes=(0, 1, 2))
        results[name] = (
            a.prequential(ps, ys, weights=ws, times=ts),
            b.process(ps, ys, ls, weights=ws, times=ts),
            b.update(ps, ys, weights=ws, times=[v + 1e4 for v in t.tolist()]).predict_proba(ps),
        )
    assert {"pandas", "polars"} <= set(results)
    for name, got in results.items():
        for x, z in zip(got, results["numpy"], strict=True):
            np.testing.assert_array_equal(x, z, err_msg=name)


BAD_CALLS = [
    ("scores", lambda p: p * 2.0, {}, ValueError, r"`scores` must hold probabilities in \[0, 1\]; got .* at position"),
    ("scores", lambda p: p[:, :2], {}, ValueError, r"`scores` must have shape \(m, 3\)"),
    ("labels", None, {"labels": [0, 1, 7]}, ValueError, r"`labels` holds 7 at position 2, which is not among"),
    ("labels", None, {"labels": [0, 1]}, ValueError, r"`labels` must have the same length as the scores \(3\); got 2"),
    (
        "weights",
        None,
        {"weights": [1.0, -1.0, 1.0]},
        ValueError,
        r"`weights` must be finite and non-negative; got -1.0 at position 1",
    ),
    ("weights", None, {"weights": [1.0, 1.0]}, ValueError, r"`weights`"),
    (
        "times",
        None,
        {"times": [500.0, 400.0, 600.0]},
        ValueError,
        r"`times` must not go backwards; got 400.0 at position 1 after 500.0",
    ),
    (
        "times",
        None,
        {"times": [0.0, 1.0, 2.0]},
        ValueError,
        r"`times` must not go backwards; got 0.0 at position 0 after the last learned time 100.0",
    ),
    ("times", None, {"times": [1e3, math.nan, 1e4]}, ValueError, r"`times` must be finite; got nan at position 1"),
    ("times", None, {"times": None}, ValueError, r"TimeWindow needs event times: pass `times=`"),
]


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("method", ["update", "prequential", "process"])
@pytest.mark.parametrize(
    ("what", "change", "kw", "error", "match"), BAD_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CALLS)]
)
def test_bad_input_is_rejected_naming_it_and_changes_nothing(cls, method, what, change, kw, error, match, rng):
    cal = cls(calibrator=PAVCalibrator(window="1h"), classes=(0, 1, 2))
    p, y, _ = stream(rng, 30, 3, zeros=False)
    cal.update(p, y, times=np.linspace(0.0, 100.0, 30))
    before = pickle.dumps(cal)
    scores = p[:3] if change is None else change(p[:3])
    args = {"labels": [0, 1, 2], "times": [200.0, 300.0, 400.0], **kw}
    if method == "process":
        args["learn_mask"] = [True, True, True]
    with pytest.raises(error, match=match):
        getattr(cal, method)(scores, **args)
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_process_checks_labels_weights_and_times_only_where_it_learns(cls, rng):
    cal = cls(calibrator=PAVCalibrator(window="1h"), classes=(0, 1, 2))
    p, _, _ = stream(rng, 3, 3, zeros=False)
    out = cal.process(
        p, ["?", 1, None], [False, True, False], weights=[-1.0, 1.0, math.nan], times=[math.nan, 5.0, 0.0]
    )
    assert np.isnan(out[1]).all()
    assert not np.isnan(out[[0, 2]]).any()
    before = pickle.dumps(cal)
    with pytest.raises(ValueError, match=r"`learn_mask` must hold binary labels"):
        cal.process(p, [0, 1, 2], [0, 2, 1])
    with pytest.raises(ValueError, match=r"`learn_mask`"):
        cal.process(p, [0, 1, 2], [True, False])
    assert pickle.dumps(cal) == before


class Refusing(NoArrayFace):
    """Refuses log-odds beyond 3 in ``learn_one`` (a calibrator with a narrow score range)."""

    def learn_one(self, x, y):
        s = next(iter(x.values()))
        if abs(s) > 3.0:
            msg = f"`x` score {s!r} is outside [-3, 3]"
            raise ValueError(msg)
        super().learn_one(x, y)


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("method", ["update", "prequential", "process"])
def test_a_binary_calibrator_refusing_its_part_leaves_every_calibrator_unchanged(cls, method, rng):
    cal = cls(calibrator=Refusing(), classes=(0, 1, 2))
    cal.update([[0.3, 0.3, 0.4], [0.4, 0.3, 0.3]], [0, 2])
    before = pickle.dumps(cal)
    # the second event's pairs (or classes) reach log-odds beyond 3: refused after others learned
    extreme = np.array([[0.3, 0.4, 0.3], [0.001, 0.998, 0.001]])
    args = (extreme, [0, 1], [True, True]) if method == "process" else (extreme, [0, 1])
    with pytest.raises(ValueError, match=r"outside \[-3, 3\]"):
        getattr(cal, method)(*args)
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_the_array_face_needs_fixed_classes(cls, rng):
    p, y, _ = stream(rng, 5, 3)
    for call in (
        lambda c: c.prequential(p, y),
        lambda c: c.process(p, y, np.ones(5, bool)),
    ):
        with pytest.raises(ValueError, match=r"needs the classes fixed in advance"):
            call(cls())


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_event_weights_count_in_the_window_weight(cls, rng):
    p, y, _ = stream(rng, 60, 3)
    w = rng.integers(0, 4, size=60).astype(float)
    cal = cls(classes=(0, 1, 2)).update(p, y, weights=w)
    for key, model in binary_calibrators(cal).items():
        mine = np.isin(y, key) if isinstance(key, tuple) else np.ones(60, bool)
        assert model.window_weight == w[mine].sum()


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_labels_of_every_kind_name_the_first_unknown_one(cls, rng):
    p, _, _ = stream(rng, 6, 3)
    mixed = cls(classes=(0, "a", 2.5))
    labels = [0, "a", 2.5, "a", 0, 2.5]  # a list keeps its elements' types
    again = cls(classes=(0, "a", 2.5))
    np.testing.assert_array_equal(mixed.prequential(p, labels), river_loop(again, (0, "a", 2.5), p, labels, None))
    named = cls(classes=("x", "y", "z"))
    np.testing.assert_array_equal(
        named.prequential(p, np.array(["x", "y", "z", "z", "y", "x"])),
        cls(classes=("x", "y", "z")).prequential(p, ["x", "y", "z", "z", "y", "x"]),
    )
    before = pickle.dumps(named)
    with pytest.raises(ValueError, match=r"`labels` holds 'w' at position 3, which is not among"):
        named.update(p, np.array(["x", "y", "z", "w", "q", "x"]))
    with pytest.raises(ValueError, match=r"`labels` holds nan at position 1, which is not among"):
        cls(classes=(0, 1, 2)).update(p, np.array([0.0, np.nan, 1.0, 2.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match=r"`labels` must be 1-d or a single column"):
        named.update(p, np.zeros((6, 2)))
    assert pickle.dumps(named) == before


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_the_stream_clock_is_saved_and_checked_on_loading(cls, rng):
    from streamcal.exceptions import StateFileError
    from streamcal.persist import from_bytes, to_bytes

    p, y, t = stream(rng, 80, 3)
    cal = cls(calibrator=PAVCalibrator(window="10m"), classes=(0, 1, 2)).update(p, y, times=t)
    again = from_bytes(to_bytes(cal))
    assert again.last_time == cal.last_time == t[-1]
    with pytest.raises(ValueError, match=r"`times` must not go backwards"):
        again.update(p[:1], y[:1], times=[t[-1] - 1.0])
    np.testing.assert_array_equal(again.prequential(p, y, times=t + t[-1]), cal.prequential(p, y, times=t + t[-1]))
    # a file whose clock was edited to NaN (its checksums recomputed) is refused
    manifest, arrays, pickles = unpack(to_bytes(cal))
    state = next(objects(manifest["root"]))[1]["state"]
    state["_last_time"] = {"__float__": struct.pack(">d", math.nan).hex()}
    with pytest.raises(StateFileError, match=r"`_last_time`"):
        from_bytes(pack(manifest, arrays, pickles))


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_a_state_saved_without_the_stream_clock_loads(cls, rng):
    from streamcal.persist import from_bytes, to_bytes

    p, y, _ = stream(rng, 40, 3)
    cal = cls(classes=(0, 1, 2)).update(p, y)
    data = to_bytes(cal)
    manifest, _, _ = unpack(data)
    # a calibrator that learned no time saves as one did before the clock was kept: without it
    assert "_last_time" not in next(objects(manifest["root"]))[1]["state"]
    again = from_bytes(data)
    assert again.last_time == -math.inf
    np.testing.assert_array_equal(again.predict_proba(p), cal.predict_proba(p))
    assert to_bytes(again) == data  # and saves again unchanged
    timed = cls(calibrator=PAVCalibrator(window="10m"), classes=(0, 1, 2)).update(p, y, times=np.arange(p.shape[0]) * 1.0)
    manifest, _, _ = unpack(to_bytes(timed))
    assert next(objects(manifest["root"]))[1]["state"]["_last_time"] == p.shape[0] - 1.0


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("template", ["platt", "gev", "ispline", "venn-abers"])
def test_every_streamcal_binary_calibrator_serves_as_the_pairs(cls, template, rng):
    """The refitted maps and Venn–Abers work as the binary calibrator: the array face equals the
    river face, each part is a clone of the template, and the rows are probabilities summing to 1."""
    from streamcal import GEVCalibrator, ISplineCalibrator, PlattCalibrator, VennAbersCalibrator

    def new():
        return {
            "platt": lambda: PlattCalibrator(refit_every=25),
            "gev": lambda: GEVCalibrator(refit_every=25),
            "ispline": lambda: ISplineCalibrator(refit_every=25),
            "venn-abers": VennAbersCalibrator,
        }[template]()

    classes = ("c", "a", "b")
    fast, slow = cls(calibrator=new(), classes=classes), cls(calibrator=new(), classes=classes)
    p, y, _ = stream(rng, 150, 3, zeros=False)
    labels = [classes[i] for i in y]
    out = fast.prequential(p, labels)
    np.testing.assert_array_equal(out, river_loop(slow, classes, p, labels, None))
    assert np.all((out > 0.0) & (out < 1.0))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    parts = binary_calibrators(fast)
    assert len(parts) == 3
    assert all(type(part) is type(new()) for part in parts.values())
