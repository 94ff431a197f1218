"""The multiclass calibrators' river face follows parameters replaced after construction (river
estimators' parameters are replaced, not changed in place), and each pair's state buffer
replaced between a prediction and the event's learning: it checks the new parameter at its next
call, and uses the new buffer, as a fresh calibrator and the per-pair calls would."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import streamcal
from streamcal import PAVCalibrator
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator


@pytest.fixture(autouse=True, scope="module")
def _compiled():
    streamcal.use_compiled_kernels()  # the one-call river face runs with compiled kernels only


def events(rng, m, k):
    p = rng.dirichlet(np.ones(k), size=m)
    return [{c: float(v) for c, v in enumerate(row)} for row in p], rng.integers(0, k, size=m).tolist()


def fed(cal, xs, labels):
    for x, y in zip(xs, labels, strict=True):
        cal.predict_proba_one(x)
        cal.learn_one(x, y)
    return cal


@pytest.mark.parametrize(
    ("name", "bad", "error"),
    [
        ("method", "newton", "method"),
        ("tol", -1.0, "tol"),
        ("max_iter", 2.5, "max_iter"),
        ("scores", "odds", "scores"),
        ("classes", (0, 0, 1), "repeat"),
        ("calibrator", object(), "calibrator"),
    ],
)
def test_a_parameter_replaced_with_a_bad_value_is_refused_at_the_next_call(rng, name, bad, error):
    xs, labels = events(rng, 200, 3)
    cal = fed(PairwiseCouplingCalibrator(classes=(0, 1, 2)), xs, labels)
    assert cal.river_in_one_call
    state = pickle.dumps(cal)
    setattr(cal, name, bad)
    with pytest.raises((TypeError, ValueError), match=error):
        cal.predict_proba_one(xs[0])
    with pytest.raises((TypeError, ValueError), match=error):
        cal.learn_one(xs[0], labels[0])
    # nothing learned: with the parameter put back the state is as it was
    cal.__dict__[name] = pickle.loads(state).__dict__[name]
    assert pickle.dumps(cal) == state


@pytest.mark.parametrize("cls", [PairwiseCouplingCalibrator, OneVsRestCalibrator])
def test_the_prototype_s_window_replaced_with_a_bad_value_is_refused_at_the_next_call(cls, rng):
    xs, labels = events(rng, 200, 3)
    cal = fed(cls(PAVCalibrator(), classes=(0, 1, 2)), xs, labels)
    cal.predict_proba_one(xs[0])
    cal.calibrator.window = "not a window"
    with pytest.raises((TypeError, ValueError), match="window"):
        cal.predict_proba_one(xs[0])
    with pytest.raises((TypeError, ValueError), match="window"):
        cal.learn_one(xs[0], labels[0])


def test_a_scores_kind_replaced_on_one_vs_rest_is_refused_at_the_next_call(rng):
    xs, labels = events(rng, 100, 3)
    cal = fed(OneVsRestCalibrator(classes=(0, 1, 2)), xs, labels)
    cal.scores = "odds"
    with pytest.raises(ValueError, match="scores"):
        cal.predict_proba_one(xs[0])


@pytest.mark.parametrize(("name", "value"), [("method", "wlw"), ("max_iter", 0)])
def test_a_parameter_replaced_with_a_good_value_takes_effect_at_the_next_call(rng, name, value):
    xs, labels = events(rng, 300, 4)
    cal = fed(PairwiseCouplingCalibrator(classes=(0, 1, 2, 3)), xs[:200], labels[:200])
    twin = fed(PairwiseCouplingCalibrator(classes=(0, 1, 2, 3), **{name: value}), xs[:200], labels[:200])
    assert cal.river_in_one_call
    before = [cal.predict_proba_one(x) for x in xs[200:]]
    setattr(cal, name, value)
    got = [cal.predict_proba_one(x) for x in xs[200:]]
    assert got == [twin.predict_proba_one(x) for x in xs[200:]]
    assert got != before


def test_a_pair_refitted_between_a_prediction_and_the_learning_is_followed(rng):
    xs, labels = events(rng, 300, 3)
    cal = fed(PairwiseCouplingCalibrator(classes=(0, 1, 2)), xs[:100], labels[:100])
    twin = pickle.loads(pickle.dumps(cal))
    for x, y in zip(xs[100:], labels[100:], strict=True):
        cal.predict_proba_one(x)
        twin.predict_proba_one(x)
        if y == 0:  # a new state buffer for a pair of the label, after the buffers were last looked at
            for model in (cal, twin):
                model.pairs_[(0, 1)].fit([0.2, 0.4, 0.6], [0, 1, 1])
        cal.learn_one(x, y)
        twin.learn_one(x, y)
    assert cal.river_in_one_call
    # twin's cached buffers are dropped (a pickled copy) at each comparison: it rebinds from scratch
    for x in xs[:50]:
        assert cal.predict_proba_one(x) == pickle.loads(pickle.dumps(twin)).predict_proba_one(x)


@pytest.mark.parametrize("cls", [OneVsRestCalibrator, PairwiseCouplingCalibrator])
def test_a_calibrator_class_instead_of_an_instance_is_named_and_changes_nothing(cls):
    with pytest.raises(TypeError, match=r"got the class PAVCalibrator: pass PAVCalibrator\(\)"):
        cls(PAVCalibrator)  # refused at construction
    cal = cls()
    cal.calibrator = PAVCalibrator  # or replaced afterwards: refused at the next call
    before = pickle.dumps(cal)
    for call in (lambda: cal.learn_one({"a": 0.3, "b": 0.7}, "a"), lambda: cal.predict_proba_one({"a": 0.3})):
        with pytest.raises(TypeError, match=r"got the class PAVCalibrator: pass PAVCalibrator\(\)"):
            call()
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize(
    ("cls", "params", "error", "match"),
    [
        (PairwiseCouplingCalibrator, {"method": "x"}, ValueError, r"`method` must be one of"),
        (PairwiseCouplingCalibrator, {"tol": -1}, ValueError, r"`tol` must be a number in \[0\.0, inf\)"),
        (PairwiseCouplingCalibrator, {"max_iter": -2}, ValueError, r"`max_iter`"),
        (PairwiseCouplingCalibrator, {"scores": "xx"}, ValueError, r"`scores` must be one of"),
        (OneVsRestCalibrator, {"scores": "xx"}, ValueError, r"`scores` must be one of"),
        (OneVsRestCalibrator, {"classes": (0, 0, 1)}, ValueError, r"`classes` must not repeat a class"),
        (PairwiseCouplingCalibrator, {"calibrator": 5}, TypeError, r"`calibrator` must be a binary streaming"),
    ],
)
def test_bad_parameters_are_refused_at_construction(cls, params, error, match):
    """As the binary calibrators: a calibrator that could not run (nor be saved and loaded) is
    never made."""
    with pytest.raises(error, match=match):
        cls(**params)
