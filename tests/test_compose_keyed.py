"""CalibratedClassifier over keyed calibrators (the key read from ``x``) and time windows (``t``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from river import compose, linear_model

import streamcal
from streamcal import CalibratedClassifier, KeyedCalibrator, KeyedOffsetCalibrator, PAVCalibrator
from streamcal.exceptions import InvalidKeyError
from streamcal.windows import TimeWindow


def _events(n: int, seed: int = 0):
    """Three campaigns, each miscalibrated its own way, one feature."""
    rng = np.random.default_rng(seed)
    shift = {"a": -1.0, "b": 0.0, "c": 1.0}
    out = []
    for i in range(n):
        key = "abc"[int(rng.integers(3))]
        x1 = float(rng.normal())
        y = bool(rng.uniform() < 1.0 / (1.0 + np.exp(-(2.0 * x1 + shift[key] - 2.0))))
        out.append(({"campaign": key, "x1": x1}, y, float(i)))
    return out


def _model():
    return compose.Discard("campaign") | linear_model.LogisticRegression()


@pytest.mark.parametrize("keyed", [KeyedCalibrator, KeyedOffsetCalibrator])
def test_the_wrapper_passes_the_key_from_x_and_equals_the_three_steps_by_hand(keyed):
    """Predict, learn the model, learn the keyed calibrator with ``{key_key: x[key_key], "score": p}``:
    the wrapper's probabilities, LLRs and both parts' states equal the steps done by hand."""
    wrapped = CalibratedClassifier(_model(), keyed(key_key="campaign"))
    model, cal = _model(), keyed(key_key="campaign")
    for x, y, _ in _events(600):
        p = model.predict_proba_one(x)[True]
        cal_x = {"campaign": x["campaign"], "score": p}
        assert wrapped.predict_proba_one(x)[True] == cal.predict_proba_one(cal_x)[True]
        assert wrapped.predict_llr_one(x) == cal.predict_llr_one(cal_x)
        wrapped.learn_one(x, y)
        model.learn_one(x, y)
        cal.learn_one(cal_x, y)
    assert pickle.dumps(wrapped.calibrator) == pickle.dumps(cal)
    assert sorted(wrapped.calibrator.keys()) == ["a", "b", "c"]
    # a key the calibrator has not learned is served as the calibrator serves it (the global map)
    x = {"campaign": "new", "x1": 0.5}
    p = model.predict_proba_one(x)[True]
    assert wrapped.predict_proba_one(x)[True] == cal.predict_proba_one({"campaign": "new", "score": p})[True]


@pytest.mark.parametrize("keyed", [KeyedCalibrator, KeyedOffsetCalibrator])
@pytest.mark.parametrize(
    ("x", "match"),
    [
        ({"x1": 0.3}, "must hold the key under 'campaign'"),
        ({"campaign": None, "x1": 0.3}, "campaign"),
        ({"campaign": 5, "x1": 0.3}, "str"),
        ({"campaign": ["a"], "x1": 0.3}, "campaign"),
    ],
)
def test_a_refused_key_changes_neither_the_model_nor_the_calibrator(keyed, x, match):
    wrapped = CalibratedClassifier(_model(), keyed(key_key="campaign"))
    for event, y, _ in _events(50):
        wrapped.learn_one(event, y)
    before = pickle.dumps(wrapped)
    with pytest.raises(InvalidKeyError, match=match):
        wrapped.learn_one(x, True)
    assert pickle.dumps(wrapped) == before
    with pytest.raises(InvalidKeyError, match=match):
        wrapped.predict_proba_one(x)
    assert pickle.dumps(wrapped) == before


def test_a_bad_weight_or_a_time_going_back_is_refused_before_the_model_learns():
    wrapped = CalibratedClassifier(_model(), KeyedCalibrator(PAVCalibrator(window=TimeWindow(50.0)), key_key="campaign"))
    for x, y, t in _events(100):
        wrapped.learn_one(x, y, t=t)
    before = pickle.dumps(wrapped)
    with pytest.raises(ValueError, match="`w` must be finite and non-negative"):
        wrapped.learn_one({"campaign": "a", "x1": 0.0}, True, t=200.0, w=-1.0)
    with pytest.raises(ValueError, match="must not go backwards"):
        wrapped.learn_one({"campaign": "a", "x1": 0.0}, True, t=10.0)
    with pytest.raises(ValueError, match="needs event times"):
        wrapped.learn_one({"campaign": "a", "x1": 0.0}, True)
    assert pickle.dumps(wrapped) == before


def test_an_event_time_goes_to_a_time_windowed_calibrator_and_not_to_the_model():
    """River's classifiers take no time: ``t`` reaches the calibrator alone, and the wrapper with
    a time window equals the steps by hand."""
    wrapped = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator(window=TimeWindow(30.0)))
    model, cal = linear_model.LogisticRegression(), PAVCalibrator(window=TimeWindow(30.0))
    for x, y, t in _events(300, seed=1):
        x = {"x1": x["x1"]}
        p = model.predict_proba_one(x)[True]
        assert wrapped.predict_proba_one(x)[True] == cal.predict_proba_one({"score": p})[True]
        wrapped.learn_one(x, y, t=t, w=2.0)
        model.learn_one(x, y, w=2.0)
        cal.learn_one({"score": p}, y, w=2.0, t=t)
    assert pickle.dumps(wrapped.calibrator) == pickle.dumps(cal)
    assert wrapped.calibrator.window_weight == pytest.approx(2.0 * 30.0, abs=2.0)  # 30 s of one event a second


def test_a_keyed_wrapper_saves_and_loads_and_continues_the_same(tmp_path):
    wrapped = CalibratedClassifier(_model(), KeyedCalibrator(key_key="campaign"))
    events = _events(400, seed=2)
    for x, y, _ in events[:200]:
        wrapped.learn_one(x, y)
    path = tmp_path / "wrapped.sc"
    streamcal.save(wrapped, path)
    copy = streamcal.load(path, allow_pickle=True)
    for x, y, _ in events[200:]:
        assert copy.predict_proba_one(x) == wrapped.predict_proba_one(x)
        copy.learn_one(x, y)
        wrapped.learn_one(x, y)
    # per key (a loaded state's arenas are laid out anew, so the whole pickles may differ)
    for key in ("a", "b", "c"):
        mine, theirs = copy.calibrator.export_key(key), wrapped.calibrator.export_key(key)
        assert mine.keys() == theirs.keys()
        assert all(np.array_equal(mine[name], theirs[name]) for name in mine)
    grid = np.linspace(0.01, 0.99, 25)
    for key in ("a", "b", "c", "new"):
        assert np.array_equal(copy.calibrator.predict_proba([key] * 25, grid),
                              wrapped.calibrator.predict_proba([key] * 25, grid))
