"""CalibratedClassifier: call order (spy), binary and multiclass calibrators, pipelines, bounded state.

river's estimator checks for it, with more wrapped models and calibrators, are in test_estimators.py.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import pickle

import numpy as np
import pytest
from river import base, datasets, evaluate, linear_model, metrics, naive_bayes, preprocessing
from river_cases import FrequencyBlend, HistogramPAV

from streamcal.compose import CalibratedClassifier
from streamcal.isotonic import PAVCalibrator
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator
from streamcal.windows import CountWindow, TimeWindow


# --------------------------------------------------------------------------------------- stand-ins
class SpyModel(base.Classifier):
    """A model whose score moves with every event it learns, logging each call."""

    def __init__(self, log: list | None = None):
        self.log = log
        self._n = 0

    def predict_proba_one(self, x):
        p = (x["i"] % 7 + 1) / (8 + self._n)  # changes once the model learns: in-sample scores differ
        self.log.append(("model.predict", x["i"], self._n))
        return {False: 1.0 - p, True: p}

    def learn_one(self, x, y):
        self.log.append(("model.learn", x["i"], self._n))
        self._n += 1


class SpyCalibrator(HistogramPAV):
    def __init__(self, log: list | None = None, n_buckets: int = 20, score_key: str | None = None):
        super().__init__(n_buckets=n_buckets, score_key=score_key)
        self.log = log

    def learn_one(self, x, y):
        self.log.append(("calibrator.learn", dict(x), y))
        super().learn_one(x, y)


def stream(n, seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n):
        yield {"i": i, "a": float(rng.normal())}, bool(rng.uniform() < 0.3)


# --------------------------------------------------------------------------------------- call order
@pytest.mark.parametrize("with_predict", [False, True])
def test_calibrator_only_sees_scores_from_before_the_model_learned_the_event(with_predict):
    log: list = []
    model = CalibratedClassifier(SpyModel(log), SpyCalibrator(log))
    for x, y in stream(50):
        if with_predict:  # as progressive_val_score does: predict, then learn the same x
            model.predict_proba_one(x)
        model.learn_one(x, y)

    learns = [e for e in log if e[0] == "model.learn"]
    assert [e[1] for e in learns] == list(range(50))
    for i in range(50):
        pos_learn = _index_of_learn(log, i)
        pos_cal = next(k for k, e in enumerate(log) if e[0] == "calibrator.learn" and k > pos_learn)
        if i < 49:
            assert pos_cal < _index_of_learn(log, i + 1)  # the calibrator learned event i before the next event
        # the score it got is the model's score of event i with the model that had learned i events,
        # scored before the model learned event i
        expected = (i % 7 + 1) / (8 + i)
        assert log[pos_cal][1] == {"score": expected}
        predicts = [e for e in log[:pos_learn] if e[0] == "model.predict" and e[1] == i]
        assert predicts
        assert all(e[2] == i for e in predicts)
        assert not [e for e in log[pos_learn:pos_cal] if e[0] == "model.predict"]  # not scored again after


def _index_of_learn(log, i):
    if i < 0:
        return -1
    return next(k for k, e in enumerate(log) if e[0] == "model.learn" and e[1] == i)


def test_predict_then_learn_scores_the_model_once(rng):
    log: list = []
    model = CalibratedClassifier(SpyModel(log), SpyCalibrator(log))
    x = {"i": 3, "a": 0.1}
    model.predict_proba_one(x)
    model.learn_one(dict(x), True)  # an equal dict: the remembered score is reused
    assert [e[0] for e in log] == ["model.predict", "model.learn", "calibrator.learn"]
    model.predict_proba_one(x)  # the model learned since: it is asked again
    assert [e[0] for e in log][-1] == "model.predict"


def test_learning_equals_the_manual_three_steps():
    a = CalibratedClassifier(linear_model.LogisticRegression(), HistogramPAV())
    clf, cal = linear_model.LogisticRegression(), HistogramPAV()
    for x, y in datasets.Phishing().take(300):
        assert a.predict_proba_one(x)[True] == cal.predict_proba_one({"s": clf.predict_proba_one(x)[True]})[True]
        a.learn_one(x, y)
        cal.learn_one({"s": clf.predict_proba_one(x)[True]}, y)
        clf.learn_one(x, y)
    assert a.n_learned == 300
    np.testing.assert_array_equal(a.calibrator.counts()[0], cal.counts()[0])
    assert a.classifier.weights == clf.weights


def test_sample_weight_goes_to_the_model_and_the_calibrator():
    a = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator())
    clf, cal = linear_model.LogisticRegression(), PAVCalibrator()
    for k, (x, y) in enumerate(datasets.Phishing().take(200)):
        w = 1.0 + k % 3
        a.learn_one(x, y, w=w)
        cal.learn_one({"score": clf.predict_proba_one(x)[True]}, y, w=w)
        clf.learn_one(x, y, w=w)
    assert a.calibrator.window_weight == cal.window_weight == sum(1.0 + k % 3 for k in range(200))
    assert a.predict_proba_one(x) == cal.predict_proba_one({"score": clf.predict_proba_one(x)[True]})
    with pytest.raises(ValueError, match="`w` must be finite and non-negative"):
        a.learn_one(x, y, w=-1.0)
    assert a.n_learned == 200


def test_progressive_loop_equals_the_calibrators_prequential_array_face():
    model = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator())
    clf = linear_model.LogisticRegression()
    wrapped, scores, labels = [], [], []
    for x, y in datasets.Phishing():
        wrapped.append(model.predict_proba_one(x)[True])
        model.learn_one(x, y)
        scores.append(clf.predict_proba_one(x)[True])  # out-of-sample score of the same model
        labels.append(y)
        clf.learn_one(x, y)
    proba, _ = PAVCalibrator().prequential(scores, labels)
    np.testing.assert_array_equal(wrapped, proba)


def test_score_key_of_the_calibrator_is_used():
    log: list = []
    model = CalibratedClassifier(SpyModel(log), SpyCalibrator(log, score_key="p"))
    model.learn_one({"i": 0, "a": 0.0}, True)
    assert log[2] == ("calibrator.learn", {"p": 1 / 8}, True)


# --------------------------------------------------------------------------------------- binary face
def test_binary_output_keys_and_llr():
    model = CalibratedClassifier(naive_bayes.GaussianNB(), HistogramPAV())
    for x, y in datasets.Phishing().take(200):
        p = model.predict_proba_one(x)
        assert set(p) == {False, True}
        assert math.isclose(sum(p.values()), 1.0)
        llr = model.predict_llr_one(x)
        assert isinstance(llr, float)
        assert model.predict_one(x) == (p[True] > 0.5)  # the one threshold every predict_one uses
        model.learn_one(x, y)


def test_pos_val_with_string_labels():
    model = CalibratedClassifier(naive_bayes.GaussianNB(), HistogramPAV(), pos_val="spam")
    for (x, y), k in zip(datasets.Phishing().take(100), itertools.count()):
        model.learn_one(x, "spam" if y else "ham")
        if k > 5:
            assert set(model.predict_proba_one(x)) == {"spam", "ham"}
    assert model.predict_one(x) in {"spam", "ham"}


def test_int_labels_keep_bool_keys():
    model = CalibratedClassifier(linear_model.LogisticRegression(), HistogramPAV(), pos_val=1)
    for x, y in datasets.Phishing().take(50):
        model.learn_one(x, int(y))
    assert set(model.predict_proba_one(x)) == {0, 1}


def _negatives_first(n_negatives: int, n: int, seed: int = 3):
    """A stream whose first ``n_negatives`` events are negatives: a river model long gives no
    probability for True."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        y = i >= n_negatives and bool(rng.uniform() < 0.4)
        yield {"a": float(rng.normal(1.5 * y)), "b": float(rng.normal())}, y


@pytest.mark.parametrize("pos_val", [True, "fraud"])
def test_a_model_that_gives_no_probability_for_pos_val_gets_the_add_one_rule(pos_val):
    def label(y):
        return y if pos_val is True else ("fraud" if y else "legit")

    model = CalibratedClassifier(naive_bayes.GaussianNB(), pos_val=pos_val)
    x = {"a": 0.3, "b": -0.2}
    assert model.classifier.predict_proba_one(x) == {}  # a fresh GaussianNB knows nothing
    assert model.predict_proba_one(x) == {False: 0.5, pos_val: 0.5}  # not 1e-16 from no evidence
    assert model.predict_llr_one(x) == 0.0
    assert model.predict_one(x) is False  # 0.5 is not above one half
    for n, (xi, yi) in enumerate(_negatives_first(6, 6), start=1):
        model.learn_one(xi, label(yi))
        assert pos_val not in model.classifier.predict_proba_one(x)  # negatives only
        q = model.predict_proba_one(x)[pos_val]
        assert q == 1.0 / (n + 2)  # add-one on n unanimous negatives
        assert model.predict_llr_one(x) == 0.0
        assert model.predict_one(x) == label(False)


def test_after_the_model_knows_pos_val_the_calibrator_serves_as_when_it_learned_score_zero():
    # the reference learns by hand as the wrapper learns: the model's probability of True, 0 when
    # it gives none, before the model learns the event
    model = CalibratedClassifier(naive_bayes.GaussianNB(), PAVCalibrator())
    clf, cal = naive_bayes.GaussianNB(), PAVCalibrator()
    known = 0
    for n, (x, y) in enumerate(_negatives_first(40, 300)):
        got = model.predict_proba_one(x)[True]
        proba = clf.predict_proba_one(x)
        if True in proba:
            known += 1
            assert got == cal.predict_proba_one({"score": proba[True]})[True]
            assert model.predict_llr_one(x) == cal.predict_llr_one({"score": proba[True]})
        else:
            assert got == 1.0 / (n + 2)
        model.learn_one(x, y)
        cal.learn_one({"score": proba.get(True, 0.0)}, y)
        clf.learn_one(x, y)
    assert known > 200
    np.testing.assert_array_equal(model.calibrator.histogram()[1], cal.histogram()[1])
    np.testing.assert_array_equal(model.calibrator.histogram()[2], cal.histogram()[2])


def test_a_venn_abers_interval_without_a_score_is_that_of_the_negatives_learned():
    from streamcal import VennAbersCalibrator

    model = CalibratedClassifier(naive_bayes.GaussianNB(), VennAbersCalibrator())
    x = {"a": 0.0, "b": 0.0}
    assert model.predict_interval_one(x) == (0.0, 1.0)
    for xi, yi in _negatives_first(3, 3):
        model.learn_one(xi, yi)
    p0, p1 = model.predict_interval_one(x)
    assert (p0, p1) == (0.0, 0.25)
    assert p0 <= model.predict_proba_one(x)[True] <= p1


def test_calibration_improves_a_miscalibrated_model():
    # a model forced to be over-confident: NB on Phishing
    raw, cal = metrics.LogLoss(), metrics.LogLoss()
    nb = naive_bayes.GaussianNB()
    model = CalibratedClassifier(naive_bayes.GaussianNB(), HistogramPAV())
    for x, y in datasets.Phishing():
        raw.update(y, nb.predict_proba_one(x) or {True: 0.5, False: 0.5})
        cal.update(y, model.predict_proba_one(x))
        nb.learn_one(x, y)
        model.learn_one(x, y)
    assert cal.get() < raw.get()


def test_inside_a_pipeline_with_progressive_val_score():
    model = preprocessing.StandardScaler() | CalibratedClassifier(linear_model.LogisticRegression(), HistogramPAV())
    metric = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.LogLoss())
    assert 0.0 < metric.get() < 0.5
    assert model[-1].n_learned == 1250


class FixedProba(base.Classifier):
    def __init__(self, p: float = 0.5):
        self.p = p

    def learn_one(self, x, y):
        pass

    def predict_proba_one(self, x):
        return {False: 1.0 - self.p, True: self.p}


def test_model_probabilities_rounded_past_one_are_clipped_and_wrong_ones_rejected():
    model = CalibratedClassifier(FixedProba(1.0 + 1e-15), PAVCalibrator())
    model.learn_one({"a": 1.0}, True)
    assert model.calibrator.n_learned == 1
    for bad in (1.5, -0.1, math.nan):
        model = CalibratedClassifier(FixedProba(bad), PAVCalibrator())
        with pytest.raises(ValueError, match="a probability in \\[0, 1\\] is required"):
            model.learn_one({"a": 1.0}, True)
        assert model.calibrator.n_learned == 0


def test_llr_of_a_wrapper_inside_a_pipeline():
    model = preprocessing.StandardScaler() | CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator())
    for x, y in datasets.Phishing().take(300):
        model.learn_one(x, y)
    wrapper = model[-1]
    llr = wrapper.predict_llr_one(model.transform_one(x))
    score = wrapper.classifier.predict_proba_one(model.transform_one(x))[True]
    assert llr == wrapper.calibrator.predict_llr_one({"score": score})
    assert isinstance(llr, float)


def test_bad_parameters_are_rejected():
    with pytest.raises(TypeError, match="`classifier` must be a river classifier"):
        CalibratedClassifier(object(), HistogramPAV())
    with pytest.raises(TypeError, match="`calibrator` must be"):
        CalibratedClassifier(linear_model.LogisticRegression(), 0.5)


def test_missing_label_is_rejected_before_anything_learns():
    model = CalibratedClassifier(linear_model.LogisticRegression(), HistogramPAV())
    x, _ = next(iter(datasets.Phishing()))
    model.learn_one(x, True)
    before = model.calibrator.counts()[0], dict(model.classifier.weights)
    with pytest.raises(ValueError, match="`y` must be a class label"):
        model.learn_one(x, None)
    np.testing.assert_array_equal(model.calibrator.counts()[0], before[0])
    assert model.classifier.weights == before[1]


def test_predict_llr_one_needs_a_binary_calibrator():
    model = CalibratedClassifier(naive_bayes.GaussianNB(), FrequencyBlend())
    with pytest.raises(NotImplementedError, match="binary calibrator"):
        model.predict_llr_one({"a": 1.0})


# --------------------------------------------------------------------------------------- multiclass
def test_multiclass_calibrator_gets_the_whole_distribution_and_the_label():
    seen = []

    class Spy(FrequencyBlend):
        def learn_one(self, x, y):
            seen.append((dict(x), y))
            super().learn_one(x, y)

    clf = naive_bayes.GaussianNB()
    model = CalibratedClassifier(naive_bayes.GaussianNB(), Spy())
    assert model._multiclass
    for x, y in datasets.ImageSegments().take(100):
        expected = clf.predict_proba_one(x)
        p = model.predict_proba_one(x)
        model.learn_one(x, y)
        clf.learn_one(x, y)
        assert seen[-1] == (expected, y)
        if p:
            assert math.isclose(sum(p.values()), 1.0)
    assert set(model.predict_proba_one(x)) == set(clf.predict_proba_one(x))


@pytest.mark.slow
@pytest.mark.parametrize("calibrator", [PairwiseCouplingCalibrator, OneVsRestCalibrator])
def test_multiclass_calibration_with_the_coupling_calibrators(calibrator):
    bare = naive_bayes.GaussianNB()
    model = CalibratedClassifier(naive_bayes.GaussianNB(), calibrator())
    assert model._multiclass
    raw, cal = metrics.CrossEntropy(), metrics.CrossEntropy()
    for x, y in datasets.ImageSegments():
        raw.update(y, bare.predict_proba_one(x))
        p = model.predict_proba_one(x)
        cal.update(y, p)
        if p:
            assert math.isclose(sum(p.values()), 1.0)
        bare.learn_one(x, y)
        model.learn_one(x, y)
    assert cal.get() < 0.5 * raw.get()  # naive Bayes is far from calibrated on ImageSegments


def test_state_is_bounded():
    import pickle

    events = list(datasets.Phishing())
    model = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator(window=CountWindow(500)))
    sizes = []
    for target in (10_000, 30_000):
        while model.n_learned < target:
            x, y = events[model.n_learned % len(events)]
            model.predict_proba_one(x)
            model.learn_one(x, y)
        sizes.append(len(pickle.dumps(model)))
    assert sizes[0] == sizes[1]


class _SubclassedPAV(PAVCalibrator):
    """A subclass: the wrapper calls its river face, never the packed kernels behind it."""

    def learn_one(self, x, y, w=1.0, t=None):
        self.__dict__["river_face_calls"] = self.__dict__.get("river_face_calls", 0) + 1
        super().learn_one(x, y, w, t)


@pytest.mark.parametrize(
    "make",
    [
        PAVCalibrator,  # the packed kernels, called by the wrapper itself
        lambda: PAVCalibrator(buckets="quantile:32"),  # edges warming up first: the river face
        lambda: PAVCalibrator(score_key="p"),  # a score key: the river face
        lambda: PAVCalibrator(buckets="uniform:64"),  # scores of 0 and 1 at the ends of the range
        _SubclassedPAV,
    ],
)
def test_the_wrappers_packed_path_and_its_fallbacks_equal_the_calibrators_river_face(make):
    """Bit for bit what the calibrator's own river face gives, by hand, whichever path a call
    takes: the packed kernels, with and without a weight (the lean path); a weight the kernel
    refuses (the river face then raises); an int weight; calls made while the calibrator's marking lock is held (the kernels refuse a marked
    state and the river face runs instead)."""
    model = CalibratedClassifier(linear_model.LogisticRegression(), make())
    clf, cal = linear_model.LogisticRegression(), make()
    key = cal.score_key or "score"
    for k, (x, y) in enumerate(datasets.Phishing().take(400)):
        w = (1.0, 2.5, 2, None)[k % 4]  # None: no keyword (the wrapper's lean path)
        kwargs = {} if w is None else {"w": w}
        held = model.calibrator.holding_packed_state() if k % 40 in (7, 11) else contextlib.nullcontext()
        with held:
            got = model.predict_proba_one(x)
            model.learn_one(x, y, **kwargs)
        p = clf.predict_proba_one(x)[True]
        q = cal.predict_proba_one({key: p})[True]
        assert got == {False: 1.0 - q, True: q}
        cal.learn_one({key: p}, y, **kwargs)
        clf.learn_one(x, y, **kwargs)
        if k % 100 == 3:
            with pytest.raises(ValueError, match="`w` must be"):
                model.learn_one(x, y, w=float("nan"))
    assert model.n_learned == 400
    if make is _SubclassedPAV:
        # every event; the four refused are refused by the calibrator's checks before the model learns
        assert model.calibrator.river_face_calls == 400
    assert model.calibrator.window_weight == cal.window_weight
    np.testing.assert_array_equal(
        model.calibrator.predict_proba(np.linspace(0, 1, 101)), cal.predict_proba(np.linspace(0, 1, 101))
    )


def test_a_refused_call_on_the_lean_path_leaves_the_wrapper_as_it_was():
    """Bool labels, ``pos_val=True``, no keywords: the lean path. A probability outside [0, 1]
    falls through to the full path, which raises; the remembered score, the counts and the
    calibrator are as they were."""
    model = CalibratedClassifier(FixedProba(0.3), PAVCalibrator())
    model.learn_one({"a": 1.0}, True)
    model.predict_proba_one({"a": 2.0})
    before = pickle.dumps(model)  # the whole wrapper: remembered event, counts, calibrator
    model.classifier.p = math.nan
    for x, y in (({"a": 3.0}, True), ({"a": 3.0}, False), ({"a": math.inf}, True)):
        with pytest.raises(ValueError):
            model.learn_one(x, y)
        model.classifier.p = 0.3
        assert pickle.dumps(model) == before
        model.classifier.p = math.nan
    model.learn_one({"a": 2.0}, False)  # the remembered score (0.3) is still that event's
    assert model.n_learned == 2
    assert model.calibrator.window_weight == 2.0


# ------------------------------------------------------------------ refusals by the model or the calibrator
class PickyModel(base.Classifier):
    """A model scoring ``classes`` by a fixed table of ``x["a"]`` that refuses to learn the label
    ``refused`` and takes no weights."""

    def __init__(self, classes=(False, True), refused=None):
        self.classes = classes
        self.refused = refused
        self.n = 0

    def predict_proba_one(self, x):
        raw = [1.0 + (x["a"] + k) % 3 for k in range(len(self.classes))]
        return {c: r / sum(raw) for c, r in zip(self.classes, raw)}

    def learn_one(self, x, y):
        if y == self.refused:
            raise ValueError(f"PickyModel cannot learn {y!r}")
        self.n += 1


@pytest.mark.parametrize(
    ("calibrator", "classes", "pos_val", "kwargs"),
    [
        (PAVCalibrator, (False, True), True, {}),  # the lean path
        (PAVCalibrator, ("legit", "fraud"), "fraud", {}),  # the full path
        (PAVCalibrator, (False, True), True, {"w": 2.0}),  # a weight the model does not take
        (OneVsRestCalibrator, (0, 1, 2), True, {}),
        (PairwiseCouplingCalibrator, (0, 1, 2), True, {}),
        (PairwiseCouplingCalibrator, (0, 1, 2), True, {"w": 2.0}),
    ],
)
def test_an_error_of_the_model_leaves_the_calibrator_and_the_wrapper_as_they_were(calibrator, classes, pos_val, kwargs):
    model = CalibratedClassifier(PickyModel(classes), calibrator(), pos_val=pos_val)
    for i in range(30):
        model.learn_one({"a": float(i)}, classes[i % len(classes)])
    model.predict_proba_one({"a": 4.0})  # remembered: the refused call reads it
    bad = classes[0]
    if not kwargs:
        model.classifier.refused = bad
    before = pickle.dumps(model)
    with pytest.raises((ValueError, TypeError), match="PickyModel"):
        model.learn_one({"a": 4.0}, bad, **kwargs)
    assert pickle.dumps(model) == before
    assert model.n_learned == model.classifier.n == 30


def test_an_event_the_calibrator_refuses_does_not_reach_the_model():
    """A time window needs event times, here not passed; a class outside the
    calibrator's fixed classes is refused: the calibrator's checks run before the model learns,
    and neither changes."""
    model = CalibratedClassifier(PickyModel(), PAVCalibrator(window=TimeWindow(10.0)))
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="needs event times"):
        model.learn_one({"a": 1.0}, True)
    assert pickle.dumps(model) == before
    multiclass = CalibratedClassifier(PickyModel((0, 1, 2)), PairwiseCouplingCalibrator(classes=(0, 1, 2)))
    multiclass.learn_one({"a": 1.0}, 2)
    before = pickle.dumps(multiclass)
    with pytest.raises(ValueError, match="`y`"):
        multiclass.learn_one({"a": 1.0}, 7)
    with pytest.raises(ValueError, match="`w`"):
        multiclass.learn_one({"a": 1.0}, 1, w=-1.0)
    assert pickle.dumps(multiclass) == before
    assert multiclass.classifier.n == 1


class WeightedPicky(PickyModel):
    def learn_one(self, x, y, w=1.0):
        super().learn_one(x, y)


@pytest.mark.parametrize("calibrator", [PairwiseCouplingCalibrator, OneVsRestCalibrator])
def test_the_weight_reaches_a_multiclass_calibrator(calibrator):
    classes = (0, 1, 2)
    wrapped = CalibratedClassifier(WeightedPicky(classes), calibrator(classes=classes))
    bare, clf = calibrator(classes=classes), WeightedPicky(classes)
    for i in range(60):
        x, y, w = {"a": float(i % 5)}, i % 3, 1.0 + i % 4
        wrapped.learn_one(x, y, w=w)
        bare.learn_one(clf.predict_proba_one(x), y, w=w)
    x = {"a": 2.0}
    assert wrapped.predict_proba_one(x) == bare.predict_proba_one(clf.predict_proba_one(x))
    assert pickle.dumps(wrapped.calibrator) == pickle.dumps(bare)
