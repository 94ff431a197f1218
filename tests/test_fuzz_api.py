"""Fuzz of the calibrators' public faces: the river face and the array face of every calibrator.

Every generated input, good or bad, must either be accepted with well-formed output (finite
probabilities in [0, 1], finite LLRs) or rejected with a ValueError / TypeError naming the
argument, leaving the calibrator's state byte-identical (:func:`fuzz_cases.call`). The river face
and the array face accept and reject exactly the same events, and agree on what they accept.
"""

from __future__ import annotations

import math
import pickle
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from fuzz_cases import (
    BIG_INT,
    FUZZ_SCALE,
    arrays,
    assert_finite,
    assert_probabilities,
    bad_labels,
    bad_number,
    bad_numbers,
    call,
    labels,
    scalars,
    snapshot,
    weights,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import (
    GEVCalibrator,
    GEVCanonicalClassifier,
    GEVCanonicalRegression,
    ISplineCalibrator,
    OneVsRestCalibrator,
    PairwiseCouplingCalibrator,
    PAVCalibrator,
    PlattCalibrator,
    VennAbersCalibrator,
)
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.windows import CountWindow, Decay, TimeWindow

FUZZ = settings(max_examples=40 * FUZZ_SCALE, deadline=None, derandomize=True)
FEW = settings(max_examples=20 * FUZZ_SCALE, deadline=None, derandomize=True)

ARRAY_NAMES = ("scores", "labels", "weights", "times", "learn_mask")
RIVER_NAMES = ("x", "y", "w", "t")


# --- calibrators in interesting states --------------------------------------------------------


def _train(cal, n: int, *, seed: int = 0, times: bool = False):
    """Learn ``n`` good events (probabilities as scores, so every bucket strategy takes them)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.02, 0.98, size=n)
    y = rng.uniform(size=n) < s
    cal.update(s, y, times=np.arange(n, dtype=float) if times else None)
    return cal


# name -> factory of the calibrator in its state (trained through its array face)
CALIBRATORS = {
    "pav-default": lambda: _train(PAVCalibrator(), 30),
    "pav-empty": lambda: PAVCalibrator(),
    "pav-uniform-count": lambda: _train(PAVCalibrator(buckets=UniformGrid(16, -2.0, 2.0), window=CountWindow(20)), 40),
    "pav-edges-decay-step": lambda: _train(
        PAVCalibrator(
            buckets=Edges((-1.0, 0.0, 0.3, 0.6, 1.0, 3.0)), window=Decay(10.0), interpolation="step", finite_proba=True
        ),
        25,
    ),
    "pav-quantile-warming": lambda: _train(PAVCalibrator(buckets=QuantileEdges(8, warmup=6)), 2),
    "pav-quantile-completing": lambda: _train(PAVCalibrator(buckets=QuantileEdges(8, warmup=6)), 5),
    "pav-quantile-warm": lambda: _train(PAVCalibrator(buckets=QuantileEdges(8, warmup=6), window=CountWindow(10)), 20),
    "pav-time-window": lambda: _train(PAVCalibrator(buckets=UniformGrid(8), window=TimeWindow(5.0)), 20, times=True),
    "pav-time-decay-quantile": lambda: _train(
        PAVCalibrator(buckets=QuantileEdges(4, warmup=4), window=Decay(3.0, by="time")), 2, times=True
    ),
    "pav-score-key": lambda: _train(PAVCalibrator(score_key="s", buckets=LogitGrid(64)), 30),
    "ispline": lambda: _train(ISplineCalibrator(buckets=LogitGrid(32)), 40),
    "ispline-quantile-refit": lambda: _train(
        ISplineCalibrator(buckets=QuantileEdges(8, warmup=6), window=CountWindow(30), refit_every=4), 4
    ),
    "gev": lambda: _train(GEVCalibrator(buckets=LogitGrid(32), xi_grid=(-0.25, 0.0, 0.5)), 40),
    "platt-uniform-refit": lambda: _train(PlattCalibrator(buckets=UniformGrid(16, -3.0, 3.0), refit_every=3), 20),
    "venn-abers-count": lambda: _train(VennAbersCalibrator(buckets=LogitGrid(32), window=CountWindow(25)), 40),
    "venn-abers-quantile-warming": lambda: _train(VennAbersCalibrator(buckets=QuantileEdges(8, warmup=6)), 2),
}

_BUILT: dict[str, bytes] = {}


def fresh(name: str):
    """A new copy of the named calibrator in its trained state (built once, then unpickled)."""
    if name not in _BUILT:
        _BUILT[name] = pickle.dumps(CALIBRATORS[name]())
    return pickle.loads(_BUILT[name])


def _x(s) -> dict:
    return {"s": s}


def _next_time(cal) -> float:
    return float(cal.window_histogram.last_time()) if cal.n_learned else 0.0


# a value for ``t``: a good time (never backwards; None without a time window), or a bad value
TIMES = st.tuples(st.sampled_from(["good", "bad"]), st.floats(0.0, 10.0), st.one_of(scalars(), st.none()))


def _bad_scores(cal, s) -> bool:
    layout = cal.window_histogram.layout
    return bad_numbers(s, low=layout.score_low, high=layout.score_high)


def _bad_score(cal, s) -> bool:
    layout = cal.window_histogram.layout
    return bad_number(s, low=layout.score_low, high=layout.score_high)


def _time_value(cal, kind, good, bad):
    if kind == "good":
        return _next_time(cal) + good if cal.window_histogram.uses_times else None
    return bad


# --- the river face and the array face accept the same events ----------------------------------


def _one(value):
    """A one-element array argument holding ``value`` as its one element: a list or an array given
    where the river face expects one number stays one (bad) element, not a column of the array face."""
    if isinstance(value, (list, tuple, set, dict, np.ndarray)):
        arr = np.empty(1, dtype=object)
        arr[0] = value
        return arr
    return [value]


@pytest.mark.parametrize("name", sorted(CALIBRATORS))
@FUZZ
@given(s=scalars(probability_heavy=True), y=labels(), w=weights(), t=TIMES)
def test_learn_one_and_update_accept_the_same_events(name, s, y, w, t):
    river, array = fresh(name), fresh(name)
    t = _time_value(river, *t)
    _, river_error = call(river, lambda: river.learn_one(_x(s), y, w=w, t=t), RIVER_NAMES)
    times = None if t is None else _one(t)
    _, array_error = call(array, lambda: array.update(_one(s), _one(y), weights=_one(w), times=times), ARRAY_NAMES)
    assert (river_error is None) == (array_error is None), (river_error, array_error)
    if _bad_score(river, s) or bad_labels([y]) or bad_number(w, low=0.0) or (t is not None and bad_number(t)):
        assert river_error is not None
    if river_error is None:
        # one event learned through either face: the same state, the same predictions
        grid = np.linspace(0.0, 1.0, 11)
        assert snapshot(river) == snapshot(array)
        p = river.predict_proba(grid)
        assert_probabilities(p)
        assert_finite(river.predict_llr(grid))
        assert [river.predict_proba_one({"s": float(v)})[True] for v in grid] == p.tolist()


@pytest.mark.parametrize("name", sorted(CALIBRATORS))
@FUZZ
@given(s=scalars(probability_heavy=True))
def test_predictions_of_both_faces_accept_the_same_scores_and_agree(name, s):
    river, array = fresh(name), fresh(name)
    proba, river_error = call(river, lambda: river.predict_proba_one(_x(s)), RIVER_NAMES)
    arr, array_error = call(array, lambda: array.predict_proba(_one(s)), ARRAY_NAMES)
    assert (river_error is None) == (array_error is None), (river_error, array_error)
    llr, llr_error = call(river, lambda: river.predict_llr_one(_x(s)), RIVER_NAMES)
    arr_llr, arr_llr_error = call(array, lambda: array.predict_llr(_one(s)), ARRAY_NAMES)
    label, label_error = call(river, lambda: river.predict_one(_x(s)), RIVER_NAMES)
    assert (llr_error is None) == (arr_llr_error is None) == (label_error is None) == (river_error is None)
    assert (river_error is None) != _bad_score(river, s)
    if river_error is None:
        assert set(proba) == {False, True}
        assert_probabilities([proba[True], proba[False]])
        assert proba[True] == arr[0]
        assert proba[False] == 1.0 - proba[True]
        assert_finite([llr])
        assert llr == arr_llr[0]
        assert label == (proba[True] > 0.5)


# --- the river face: malformed x --------------------------------------------------------------

_KEYS = st.sampled_from(["s", "score", "", 0, 1.5, None, math.nan, ("s",), True])
_DICTS = st.dictionaries(_KEYS, scalars(probability_heavy=True), max_size=3)
_NOT_DICTS = st.sampled_from([None, 0.5, "s", ["s", 0.5], [("s", 0.5)], (0.5,), np.array([0.5]), {0.5}, pd.Series({"s": 0.5})])


@pytest.mark.parametrize("name", ["pav-default", "pav-score-key", "pav-quantile-warming", "gev", "ispline"])
@FUZZ
@given(x=st.one_of(_DICTS, _NOT_DICTS), y=labels())
def test_river_face_rejects_malformed_x(name, x, y):
    cal = fresh(name)
    # A missing score_key raises KeyError (river's convention for a missing feature), naming `x`.
    ok = (ValueError, TypeError, KeyError)
    proba, error = call(cal, lambda: cal.predict_proba_one(x), RIVER_NAMES, ok=ok)
    if error is None:
        assert_probabilities([proba[True], proba[False]])
    llr, error = call(cal, lambda: cal.predict_llr_one(x), RIVER_NAMES, ok=ok)
    if error is None:
        assert_finite([llr])
    call(cal, lambda: cal.learn_one(x, y), RIVER_NAMES, ok=ok)


# --- the array face: malformed arrays ---------------------------------------------------------

_METHODS = ["update", "prequential", "process", "predict_proba", "predict_llr"]


@pytest.mark.parametrize("name", sorted(CALIBRATORS))
@FEW
@given(
    method=st.sampled_from(_METHODS),
    scores=arrays(scalars(probability_heavy=True)),
    labels_=arrays(labels()),
    weights_=st.one_of(st.none(), arrays(weights())),
    times=st.one_of(st.none(), arrays(st.floats(0.0, 1e3)), arrays(scalars())),
    mask=arrays(labels()),
)
def test_array_face_rejects_malformed_arrays_cleanly(name, method, scores, labels_, weights_, times, mask):
    cal = fresh(name)
    fn = getattr(cal, method)
    if method in ("predict_proba", "predict_llr"):
        out, error = call(cal, lambda: fn(scores), ARRAY_NAMES)
    elif method == "process":
        out, error = call(cal, lambda: fn(scores, labels_, mask, weights=weights_, times=times), ARRAY_NAMES)
    else:
        out, error = call(cal, lambda: fn(scores, labels_, weights=weights_, times=times), ARRAY_NAMES)
    if _bad_scores(cal, scores) and np.size(np.asarray(scores, dtype=object)) > 0:
        assert error is not None
    if method in ("update", "prequential") and (
        bad_labels(labels_) or (weights_ is not None and bad_numbers(weights_, low=0.0)) or (times is not None and bad_numbers(times))
    ):
        assert error is not None
    if error is not None:
        return
    if method == "predict_proba":
        assert_probabilities(out)
    elif method == "predict_llr":
        assert_finite(out)
    elif method == "prequential":
        assert_probabilities(out[0])
        assert_finite(out[1])
    elif method == "process":
        learned = np.asarray(mask, dtype=bool).reshape(-1)
        assert np.isnan(out[0][learned]).all()
        assert_probabilities(out[0][~learned])
        assert_finite(out[1][~learned])
    # whatever was accepted, the calibrator still works
    assert_probabilities(cal.predict_proba(np.linspace(0.0, 1.0, 5)))


@pytest.mark.parametrize("name", ["pav-default", "pav-uniform-count", "pav-time-window", "pav-quantile-completing", "gev"])
@FEW
@given(
    n=st.integers(1, 5),
    extra=st.sampled_from(["labels", "weights", "times", "learn_mask"]),
    delta=st.sampled_from([-1, 1]),
)
def test_mismatched_lengths_are_rejected(name, n, extra, delta):
    cal = fresh(name)
    s = np.linspace(0.1, 0.9, n)
    args = {
        "labels": np.ones(n, dtype=bool),
        "weights": np.ones(n),
        "times": _next_time(cal) + np.arange(n, dtype=float),
        "learn_mask": np.ones(n, dtype=bool),
    }
    m = max(0, n + delta)
    args[extra] = np.resize(args[extra], m)
    _, error = call(
        cal,
        lambda: cal.process(s, args["labels"], args["learn_mask"], weights=args["weights"], times=args["times"]),
        (extra,),
    )
    assert error is not None


@pytest.mark.parametrize("name", ["pav-time-window", "pav-time-decay-quantile"])
@FEW
@given(back=st.floats(1e-9, 100.0), at=st.integers(0, 3))
def test_times_going_backwards_are_rejected(name, back, at):
    cal = fresh(name)
    start = _next_time(cal)
    times = start + np.arange(4, dtype=float)
    times[at] -= back + (times[at] - start if at == 0 else 1.0)
    _, error = call(cal, lambda: cal.update(np.full(4, 0.5), np.ones(4, dtype=bool), times=times), ("times",))
    assert error is not None
    _, error = call(cal, lambda: cal.learn_one({"s": 0.5}, True, t=start - back), ("t",))
    assert error is not None


# --- constructors ------------------------------------------------------------------------------

_PARAMS = {
    PAVCalibrator: ["llr_pseudo_count", "interpolation", "finite_proba", "n_jobs", "buckets", "window"],
    ISplineCalibrator: ["order", "n_knots", "refit_every", "llr_pseudo_count"],
    GEVCalibrator: ["xi", "l2", "refit_every"],
    PlattCalibrator: ["l2", "refit_every"],
    VennAbersCalibrator: ["merge_rule", "finite_rule", "llr_pseudo_count", "buckets", "window"],
}


@pytest.mark.parametrize("cls", list(_PARAMS), ids=lambda c: c.__name__)
@FEW
@given(data=st.data())
def test_bad_parameters_are_rejected_at_construction(cls, data):
    name = data.draw(st.sampled_from(_PARAMS[cls]))
    value = data.draw(st.one_of(scalars(), st.sampled_from(["linear", "auto", Edges((0.0, 1.0)), CountWindow(5)])))
    names = (name, "n", "edges", "seconds", "half_life")
    cal, error = call((), lambda: cls(**{name: value}), names)
    if error is None:
        assert_probabilities(cal.predict_proba([0.25, 0.75]))


@FEW
@given(
    buckets=st.sampled_from(
        [
            lambda: Edges((0.0, 0.0, 1.0)),
            lambda: Edges((1.0, 0.0)),
            lambda: Edges((0.0, math.nan, 1.0)),
            lambda: Edges((0.0,)),
            lambda: Edges((0.0, 1.0), centres=(2.0,)),
            lambda: Edges((0.0, 1.0, 2.0), centres=(0.5,)),
            lambda: Edges(("0", "1")),
            lambda: Edges((0.0, 1.0), probability_inputs="yes"),
            lambda: QuantileEdges(n_buckets=0),
            lambda: QuantileEdges(warmup=0),
            lambda: QuantileEdges(warmup=2.5),
            lambda: UniformGrid(0),
            lambda: UniformGrid(4, 1.0, 0.0),
            lambda: UniformGrid(4, 0.0, math.inf),
            lambda: LogitGrid(4, 0.0, 1.0),
            lambda: LogitGrid(True),
        ]
    )
)
def test_bad_bucket_strategies_are_rejected_before_any_event(buckets):
    with pytest.raises((ValueError, TypeError), match=r"`(edges|centres|probability_inputs|n_buckets|warmup|low|high)`"):
        PAVCalibrator(buckets=buckets())


def test_a_quantile_warm_up_that_cannot_end_is_refused_with_nothing_buffered():
    """The issue's case: an inf score was buffered, then every later learn raised IndexError."""
    cal = PAVCalibrator(buckets=QuantileEdges(4, warmup=3))
    for bad in (math.inf, -math.inf, math.nan):
        _, error = call(cal, lambda: cal.learn_one({"s": bad}, True), ("x",))
        assert error is not None
    assert cal.n_learned == 0
    for s in (0.1, 0.2, 0.3, 0.4):
        cal.learn_one({"s": s}, s > 0.2)
    assert cal.n_learned == 4
    assert cal.n_buckets is not None


# --- multiclass ---------------------------------------------------------------------------------

_CLASSES = st.sampled_from([0, 1, 2, "a", "b", 1.5, None, math.nan, np.float32("nan"), Decimal("NaN"), (1, 2), True])
_MC_VALUES = st.one_of(st.floats(0.0, 1.0), st.floats(-60.0, 60.0), scalars())
_MULTICLASS = {
    "pc-proba": lambda: PairwiseCouplingCalibrator(),
    "pc-logit-wlw": lambda: PairwiseCouplingCalibrator(scores="logit", method="wlw", calibrator=PAVCalibrator(buckets=UniformGrid(16, -50.0, 50.0))),
    "pc-fixed": lambda: PairwiseCouplingCalibrator(classes=(0, 1, 2)),
    "ovr-proba": lambda: OneVsRestCalibrator(),
    "ovr-fixed-logit": lambda: OneVsRestCalibrator(classes=("a", "b", "c"), scores="logit"),
    "pc-time-window": lambda: PairwiseCouplingCalibrator(calibrator=PAVCalibrator(window=TimeWindow(10.0))),
}
_MC_BUILT: dict[str, bytes] = {}
_MC_RANGE = {"proba": {"low": 0.0, "high": 1.0}, "logit": {}}


def fresh_multiclass(name: str):
    if name not in _MC_BUILT:
        cal = _MULTICLASS[name]()
        if name != "pc-time-window":
            classes = list(cal.classes) if cal.classes is not None else [0, 1, 2]
            rng = np.random.default_rng(1)
            for _ in range(15):
                p = rng.dirichlet(np.ones(len(classes)))
                x = {c: float(v if cal.scores == "proba" else math.log(v)) for c, v in zip(classes, p, strict=True)}
                cal.learn_one(x, classes[int(rng.integers(len(classes)))])
        _MC_BUILT[name] = pickle.dumps(cal)
    return pickle.loads(_MC_BUILT[name])


@pytest.mark.parametrize("name", sorted(_MULTICLASS))
@FUZZ
@given(x=st.one_of(st.dictionaries(_CLASSES, _MC_VALUES, max_size=4), _NOT_DICTS), y=_CLASSES)
def test_multiclass_learn_one_registers_nothing_when_rejected(name, x, y):
    cal = fresh_multiclass(name)
    _, error = call(cal, lambda: cal.learn_one(x, y), ("x", "y", "calibrator"))
    proba, perror = call(cal, lambda: cal.predict_proba_one(x), ("x", "calibrator"))
    bad_key = isinstance(x, dict) and any(k is None or k != k for k in x)
    if not isinstance(x, dict) or bad_key or bad_numbers(list(x.values()), **_MC_RANGE[cal.scores]):
        assert error is not None
        assert perror is not None
    if perror is None:
        values = list(proba.values())
        assert_probabilities(values)
        if values:
            assert sum(values) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pc-fixed", "ovr-fixed-logit"])
@FUZZ
@given(data=st.data())
def test_multiclass_faces_accept_the_same_events(name, data):
    river, array = fresh_multiclass(name), fresh_multiclass(name)
    classes = list(river.classes)
    row = data.draw(st.lists(_MC_VALUES, min_size=len(classes), max_size=len(classes)))
    y = data.draw(st.one_of(st.sampled_from(classes), _CLASSES))
    _, river_error = call(river, lambda: river.learn_one(dict(zip(classes, row, strict=True)), y), ("x", "y"))
    _, array_error = call(array, lambda: array.update([row], [y]), ("scores", "labels"))
    assert (river_error is None) == (array_error is None), (river_error, array_error)
    if bad_numbers(row, **_MC_RANGE[river.scores]):
        assert river_error is not None
    if river_error is None:
        assert snapshot(river) == snapshot(array)


@pytest.mark.parametrize("name", ["pc-fixed", "ovr-fixed-logit"])
@FEW
@given(scores=st.one_of(arrays(_MC_VALUES), st.lists(arrays(_MC_VALUES, min_size=3, max_size=3), max_size=3)), labels_=arrays(_CLASSES))
def test_multiclass_array_face_rejects_malformed_arrays_cleanly(name, scores, labels_):
    cal = fresh_multiclass(name)
    _, uerror = call(cal, lambda: cal.update(scores, labels_), ("scores", "labels"))
    p, error = call(cal, lambda: cal.predict_proba(scores), ("scores",))
    if bad_numbers(scores, **_MC_RANGE[cal.scores]):
        assert error is not None
        assert uerror is not None
    if error is None:
        assert_probabilities(p)
        assert np.allclose(p.sum(axis=1), 1.0)


# --- GEV-canonical regression --------------------------------------------------------------------

_FEATURES = st.dictionaries(st.sampled_from(["a", "b", 0, None, ("t",)]), st.one_of(st.floats(-5.0, 5.0), scalars()), max_size=3)


def _gev_classifier():
    model = GEVCanonicalClassifier(batch_size=4, xis=(0.0, 0.5))
    rng = np.random.default_rng(2)
    for _ in range(10):
        model.learn_one({"a": float(rng.normal()), "b": float(rng.normal())}, bool(rng.random() < 0.3))
    return model


_GEV = pickle.dumps(_gev_classifier())


@FUZZ
@given(x=st.one_of(_FEATURES, _NOT_DICTS), y=labels())
def test_gev_classifier_river_face(x, y):
    model = pickle.loads(_GEV)
    proba, error = call(model, lambda: model.predict_proba_one(x), ("x",))
    if error is None:
        assert_probabilities([proba[True], proba[False]])
    _, lerror = call(model, lambda: model.learn_one(x, y), ("x", "y"))
    if not isinstance(x, dict) or bad_numbers(list(x.values()), allow_bool=True):
        assert error is not None
        assert lerror is not None
    assert_probabilities([model.predict_proba_one({"a": 0.5})[True]])


_FRAME_VALUES = st.one_of(st.floats(-5.0, 5.0), scalars())


@st.composite
def frames(draw):
    n = draw(st.integers(0, 4))
    names = draw(st.lists(st.sampled_from(["a", "b", "c", 0]), min_size=0, max_size=3))
    columns = [draw(st.lists(_FRAME_VALUES, min_size=n, max_size=n)) for _ in names]
    kind = draw(st.sampled_from(["pandas", "numpy", "list", "bad"]))
    if kind == "bad":
        return draw(st.sampled_from([None, "X", 0.5, [0.5, 0.25], np.zeros(3), {"a": [0.5]}]))
    if kind == "pandas":
        try:
            frame = pd.DataFrame(dict(enumerate(columns)) if columns else {}, index=range(n))
        except (TypeError, ValueError):
            return columns
        frame.columns = names[: frame.shape[1]]
        return frame
    rows = [list(r) for r in zip(*columns, strict=True)] if columns else [[] for _ in range(n)]
    return np.asarray(rows, dtype=object) if kind == "numpy" else rows


@FEW
@given(X=frames(), y=arrays(labels()))
def test_gev_classifier_array_face(X, y):
    model = pickle.loads(_GEV)
    _, lerror = call(model, lambda: model.learn_many(X, y), ("X", "y"))
    proba, error = call(model, lambda: model.predict_proba_many(X), ("X",))
    if isinstance(X, pd.DataFrame) and (bad_numbers(X.to_numpy(dtype=object), allow_bool=True) or X.columns.duplicated().any()):
        assert error is not None
        assert lerror is not None
    if error is None:
        assert_probabilities(proba.to_numpy())


@FEW
@given(X=frames(), y=arrays(labels()), w=st.one_of(st.none(), arrays(weights())))
def test_gev_regression_fit_and_predict(X, y, w):
    model = GEVCanonicalRegression(xi=0.0, l2=1.0)
    _, error = call(model, lambda: model.fit(X, y, sample_weight=w), ("X", "y", "sample_weight"))
    if error is None:
        p, perror = call(model, lambda: model.predict_proba(X), ("X",))
        if perror is None:
            assert_probabilities(p)
    good = GEVCanonicalRegression(xi=0.0, l2=1.0).fit(np.array([[0.0], [1.0], [2.0]]), [0, 1, 1])
    p, error = call(good, lambda: good.predict_proba(X), ("X",))
    if error is None:
        assert_probabilities(p)


def test_gev_feature_values_decided():
    """Features: finite real numbers; bools count as 0 / 1; strings, None, NaN, inf refused."""
    model = pickle.loads(_GEV)
    base = model.predict_proba_one({"a": 1.0})[True]
    assert model.predict_proba_one({"a": True})[True] == base
    for bad, error in [("1", TypeError), (None, TypeError), (math.nan, ValueError), (math.inf, ValueError), (BIG_INT, ValueError)]:
        with pytest.raises(error, match="`x`"):
            model.predict_proba_one({"a": bad})
        with pytest.raises(error, match="`x`"):
            model.learn_one({"a": bad}, True)
    with pytest.raises(ValueError, match="distinct column names"):
        model.learn_many(pd.DataFrame([[1.0, 2.0]], columns=["a", "a"]), [True])


# --- the I-spline batch fit ------------------------------------------------------------------------


@FEW
@given(scores=arrays(scalars(probability_heavy=True)), labels_=arrays(labels()), w=st.one_of(st.none(), arrays(weights())))
def test_ispline_fit_rejects_bad_batches_cleanly(scores, labels_, w):
    cal = fresh("ispline")
    _, error = call(cal, lambda: cal.fit(scores, labels_, sample_weight=w), ("scores", "labels", "sample_weight", "weights"))
    if _bad_scores(cal, scores) or bad_labels(labels_) or (w is not None and bad_numbers(w, low=0.0)):
        assert error is not None
    if error is None:
        assert_probabilities(cal.predict_proba(np.linspace(0.0, 1.0, 7)))
        assert_finite(cal.predict_llr(np.linspace(0.0, 1.0, 7)))
