"""Streaming multiclass calibrators: pairwise coupling and one-vs-rest."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import base

from streamcal import PAVCalibrator, pairwise_couple
from streamcal.buckets import Edges
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator
from streamcal.multiclass.streaming import MAX_LOG_ODDS, UNSEEN_PAIR_WEIGHT
from streamcal.windows import CountWindow, TimeWindow


class BinnedStandIn(base.Classifier):
    """Test stand-in for a binary streaming calibrator (the streaming calibrator contract).

    Laplace-smoothed positive rate per fixed score bin; unbounded window, so ``window_weight`` is
    the number of events learned. Its counts are public for the tests to read: ``positives[b]``
    and ``totals[b]`` of the bin ``b = bin_of(x)`` a score dict falls in.
    """

    def __init__(self, edges: tuple = tuple(np.linspace(-8.0, 8.0, 33)), score_key=None):
        self.edges = edges
        self.score_key = score_key
        self.positives = np.zeros(len(edges) + 1)
        self.totals = np.zeros(len(edges) + 1)

    def bin_of(self, x) -> int:
        s = x[self.score_key] if self.score_key is not None else next(iter(x.values()))
        return int(np.searchsorted(self.edges, s))

    def learn_one(self, x, y):
        b = self.bin_of(x)
        self.positives[b] += bool(y)
        self.totals[b] += 1.0

    def predict_proba_one(self, x):
        b = self.bin_of(x)
        p = (self.positives[b] + 0.5) / (self.totals[b] + 1.0)
        return {False: 1.0 - float(p), True: float(p)}

    @property
    def window_weight(self) -> float:
        return float(self.totals.sum())

    # array face: the same as loops of learn_one / predict_proba_one
    def update(self, scores, labels):
        b = np.searchsorted(self.edges, np.asarray(scores, dtype=float))
        np.add.at(self.positives, b, np.asarray(labels, dtype=float))
        np.add.at(self.totals, b, 1.0)
        return self

    def predict_proba(self, scores):
        b = np.searchsorted(self.edges, np.asarray(scores, dtype=float))
        return (self.positives[b] + 0.5) / (self.totals[b] + 1.0)


class OneByOneStandIn(BinnedStandIn):
    """The same calibrator without an array face."""

    update = None
    predict_proba = None

    def __getattribute__(self, name):
        if name in ("update", "predict_proba"):
            raise AttributeError(name)
        return super().__getattribute__(name)


CALIBRATORS = [PairwiseCouplingCalibrator, OneVsRestCalibrator]


def make(cls, **kwargs):
    """The calibrator with its default binary calibrator, streamcal.PAVCalibrator."""
    return cls(**kwargs)


def make_standin(cls, **kwargs):
    """The calibrator over the stand-in, whose bin counts tests can read."""
    return cls(calibrator=BinnedStandIn(), **kwargs)


def binary_calibrators(cal) -> dict:
    """Pair (pairwise coupling) or class (one-vs-rest) -> its binary calibrator."""
    return cal.pairs_ if isinstance(cal, PairwiseCouplingCalibrator) else cal.calibrators_


def score_dict(model, log_odds: float) -> dict:
    """The one-score dict a multiclass calibrator gives ``model`` for a log-odds: its sigmoid for
    a PAVCalibrator (whose default buckets take probabilities), the log-odds for the stand-ins."""
    if isinstance(model, PAVCalibrator):
        return {"score": 1.0 / (1.0 + math.exp(-log_odds))}
    return {"score": log_odds}


def dirichlet_stream(rng, n, k, power=1.0, alpha=1.0):
    """(x, y, p_true): x = the model's probabilities, p_true**power renormalised."""
    out = []
    for _ in range(n):
        p = rng.dirichlet(np.full(k, alpha))
        y = int(rng.choice(k, p=p))
        q = p**power / (p**power).sum()
        out.append(({c: float(q[c]) for c in range(k)}, y, p))
    return out


def log_loss(pred, y):
    return -math.log(max(pred.get(y, 0.0), 1e-15))


# --- behaviour ------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_before_learning_the_model_distribution_is_returned(cls):
    cal = make(cls)
    x = {"a": 0.2, "b": 0.5, "c": 0.3}
    out = cal.predict_proba_one(x)
    assert list(out) == ["a", "b", "c"]
    if cls is PairwiseCouplingCalibrator:
        np.testing.assert_allclose([out[c] for c in "abc"], [0.2, 0.5, 0.3], atol=1e-7)
    assert sum(out.values()) == pytest.approx(1.0)
    assert make(cls).predict_proba_one({}) == {}


def test_logit_scores_before_learning_give_the_softmax():
    cal = make(PairwiseCouplingCalibrator, scores="logit")
    z = np.array([1.0, -0.5, 2.0, 0.0])
    out = cal.predict_proba_one(dict(enumerate(z)))
    np.testing.assert_allclose(list(out.values()), np.exp(z) / np.exp(z).sum(), atol=1e-7)


def test_each_pair_learns_only_from_events_of_its_two_classes(rng):
    cal = make(PairwiseCouplingCalibrator)
    stream = dirichlet_stream(rng, 300, 4)
    for x, y, _ in stream:
        cal.learn_one(x, y)
    counts = np.bincount([y for _, y, _ in stream], minlength=4)
    assert set(cal.pairs_) == {(a, b) for a in range(4) for b in range(a + 1, 4)}
    for (a, b), model in cal.pairs_.items():
        assert model.window_weight == counts[a] + counts[b]


def test_pair_learns_the_pairwise_log_odds_with_the_first_class_as_positive():
    cal = make_standin(PairwiseCouplingCalibrator)
    cal.learn_one({0: 0.2, 1: 0.5, 2: 0.3}, 1)
    m01, m12 = cal.pairs_[(0, 1)], cal.pairs_[(1, 2)]
    d01 = math.log(0.2) - math.log(0.5)
    d12 = math.log(0.5) - math.log(0.3)
    assert m01.positives.sum() == 0  # label: y == 0 is False
    assert m01.totals[m01.bin_of({"s": d01})] == 1
    assert m12.positives[m12.bin_of({"s": d12})] == 1  # label: y == 1 is True
    assert (0, 2) not in cal.pairs_


def test_prediction_is_the_coupling_of_the_pairs_with_window_weights(rng):
    cal = make(PairwiseCouplingCalibrator, tol=1e-12)
    wlw = make(PairwiseCouplingCalibrator, method="wlw")
    for x, y, _ in dirichlet_stream(rng, 400, 4, power=2.0):
        cal.learn_one(x, y)
        wlw.learn_one(x, y)
    x = {0: 0.1, 1: 0.6, 2: 0.25, 3: 0.05}
    r = np.zeros((4, 4))
    n = np.zeros((4, 4))
    for (a, b), model in cal.pairs_.items():
        d = math.log(x[a]) - math.log(x[b])
        bound = 1 / (model.window_weight + 2)  # the add-one bounds
        r[a, b] = np.clip(model.predict_proba_one(score_dict(model, d))[True], bound, 1 - bound)
        r[b, a] = 1 - r[a, b]
        n[a, b] = n[b, a] = model.window_weight
    expected = pairwise_couple(r, n, tol=1e-12)
    np.testing.assert_allclose(list(cal.predict_proba_one(x).values()), expected, atol=1e-10)
    np.testing.assert_allclose(list(wlw.predict_proba_one(x).values()), pairwise_couple(r, n, method="wlw"), atol=1e-12)


def test_a_class_appearing_mid_stream_joins_with_the_pairs_it_would_have_had(rng):
    cal = make(PairwiseCouplingCalibrator)
    early = [({0: 0.7, 1: 0.3}, int(rng.random() < 0.4)) for _ in range(50)]
    for x, y in early:
        cal.learn_one(x, y)
    assert cal.classes_ == [0, 1]
    assert cal.predict_proba_one({0: 0.7, 1: 0.3}).keys() == {0, 1}
    # The model starts scoring class 2 before any label of it: it is in the output at once.
    out = cal.predict_proba_one({0: 0.5, 1: 0.2, 2: 0.3})
    assert out.keys() == {0, 1, 2}
    assert sum(out.values()) == pytest.approx(1.0)
    late = [({0: 0.5, 1: 0.2, 2: 0.3}, int(rng.choice(3))) for _ in range(60)]
    for x, y in late:
        cal.learn_one(x, y)
    ys = np.array([y for _, y in late])
    # each pair with class 2 holds the earlier events of its other class too (class 2 absent from
    # their scores), as with `classes=(0, 1, 2)` given from the start
    early_ys = np.array([y for _, y in early])
    assert cal.pairs_[(0, 2)].window_weight == np.sum(early_ys == 0) + np.sum((ys == 0) | (ys == 2))
    assert cal.pairs_[(1, 2)].window_weight == np.sum(early_ys == 1) + np.sum((ys == 1) | (ys == 2))
    assert cal.pairs_[(0, 1)].window_weight == 50 + np.sum((ys == 0) | (ys == 1))


def test_unseen_pairs_get_the_model_probability_with_a_tiny_weight():
    cal = make(PairwiseCouplingCalibrator)
    cal.learn_one({0: 0.6, 1: 0.4}, 0)
    _, r, n = cal.coupling_inputs({0: 0.5, 1: 0.2, 2: 0.3})
    # neither class 1 nor class 2 has an event: their pair has learned nothing
    assert n[1, 2] == UNSEEN_PAIR_WEIGHT
    assert r[1, 2] == pytest.approx(0.2 / 0.5)
    assert n[0, 1] == 1.0
    # the pair (0, 2) holds class 0's event, against class 2 absent, as with `classes=` fixed
    assert n[0, 2] == 1.0


def test_missing_or_zero_probability_classes_are_clipped_log_odds():
    cal = make_standin(PairwiseCouplingCalibrator)
    cal.learn_one({0: 1.0}, 1)  # class 1 has probability 0 (absent); class 0 certain
    model = cal.pairs_[(0, 1)]
    assert model.totals[model.bin_of({"s": MAX_LOG_ODDS})] == 1
    out = cal.predict_proba_one({})
    assert out.keys() == {0, 1}
    assert sum(out.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_perfectly_calibrated_scores_are_left_nearly_unchanged(cls):
    rng = np.random.default_rng(7)
    cal = make(cls)
    for x, y, _ in dirichlet_stream(rng, 6000, 3, alpha=2.0):
        cal.learn_one(x, y)
    errors = []
    for x, _, p in dirichlet_stream(rng, 200, 3, alpha=2.0):
        out = cal.predict_proba_one(x)
        errors.append(np.abs(np.array([out[c] for c in range(3)]) - p).max())
    assert np.median(errors) < 0.05


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_calibration_improves_the_log_loss_of_an_overconfident_model(cls):
    rng = np.random.default_rng(11)
    cal = make(cls)
    raw = cooked = 0.0
    for t, (x, y, _) in enumerate(dirichlet_stream(rng, 4000, 4, power=2.5)):
        if t >= 1000:
            raw += log_loss(x, y)
            cooked += log_loss(cal.predict_proba_one(x), y)
        cal.learn_one(x, y)
    assert cooked < 0.95 * raw


def test_one_vs_rest_calibrators_see_every_event_as_if_their_class_had_been_known(rng):
    """A class that joins mid-stream gets the calibrator it would have had with the classes fixed
    from the start: every earlier event learned as a class absent from it."""
    cal, fixed = make(OneVsRestCalibrator), make(OneVsRestCalibrator, classes=(0, 1, 2, 3))
    for x, y, _ in dirichlet_stream(rng, 100, 3):
        cal.learn_one(x, y)
        fixed.learn_one(x, y)
    for x, y in (({0: 0.3, 1: 0.3, 2: 0.2, 3: 0.2}, 3), ({0: 0.5, 1: 0.3, 2: 0.2}, 1)):
        cal.learn_one(x, y)
        fixed.learn_one(x, y)
    weights = {c: m.window_weight for c, m in cal.calibrators_.items()}
    assert weights == {0: 102, 1: 102, 2: 102, 3: 102}
    for c, model in cal.calibrators_.items():
        assert pickle.dumps(model) == pickle.dumps(fixed.calibrators_[c])
    x = {0: 0.4, 1: 0.4, 2: 0.2}  # the new class scored 0 again: served as rare, not as "it happens"
    assert cal.predict_proba_one(x)[3] == fixed.predict_proba_one(x)[3] < 0.02


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_fixed_classes_give_every_class_in_the_declared_order(cls):
    cal = make(cls, classes=("zebra", "ant", "moose"))
    cal.learn_one({"ant": 0.5, "moose": 0.5}, "zebra")
    out = cal.predict_proba_one({"ant": 1.0})
    assert list(out) == ["zebra", "ant", "moose"]
    assert sum(out.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_mixed_type_labels_have_a_stable_order(cls):
    a, b = make(cls), make(cls)
    for x, y in [({1: 0.5, "b": 0.5}, 1), ({"b": 0.4, (2,): 0.6}, (2,))]:
        a.learn_one(x, y)
    for x, y in [({"b": 0.5, 1: 0.5}, 1), ({(2,): 0.6, "b": 0.4}, (2,))]:
        b.learn_one(x, y)
    assert a.classes_ == b.classes_ == [1, "b", (2,)]
    x = {(2,): 0.2, 1: 0.3, "b": 0.5}
    assert a.predict_proba_one(x) == b.predict_proba_one(x)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_clone_and_pickle_keep_predictions(cls, rng):
    cal = make(cls, calibrator=PAVCalibrator(window=CountWindow(50)))
    stream = dirichlet_stream(rng, 200, 3)
    for x, y, _ in stream:
        cal.learn_one(x, y)
    x = stream[0][0]
    again = pickle.loads(pickle.dumps(cal))
    assert again.predict_proba_one(x) == cal.predict_proba_one(x)
    fresh = cal.clone()
    assert binary_calibrators(fresh) == {}
    assert fresh.classes_ == []
    assert isinstance(fresh.calibrator, PAVCalibrator)
    assert fresh.calibrator is not cal.calibrator
    assert fresh.calibrator.window.n == 50


def test_default_binary_calibrator_is_resolved_lazily():
    cal = PairwiseCouplingCalibrator()
    assert cal.calibrator is None
    assert cal.predict_proba_one({0: 0.25, 1: 0.75}) == {0: 0.25, 1: 0.75}


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_predict_does_not_mutate_state_or_input(cls, rng):
    cal = make(cls)
    for x, y, _ in dirichlet_stream(rng, 50, 3):
        cal.learn_one(x, y)
    before = pickle.dumps(cal)
    x = {0: 0.2, 1: 0.3, 2: 0.5, 9: 0.0}
    cal.predict_proba_one(x)
    cal.predict_one(x)
    assert pickle.dumps(cal) == before
    assert x == {0: 0.2, 1: 0.3, 2: 0.5, 9: 0.0}


# --- bad input ------------------------------------------------------------------------------


BAD_X = [
    ([0.2, 0.8], TypeError, r"`x` must be a dict of per-class scores; got a list"),
    ({0: float("nan"), 1: 0.5}, ValueError, r"probabilities in \[0, 1\]; got nan for class 0"),
    ({0: 1.5, 1: 0.5}, ValueError, r"probabilities in \[0, 1\]; got 1.5 for class 0"),
    ({0: "high", 1: 0.5}, TypeError, r"`x` must map classes to numbers; got 'high' for class 0"),
    ({0: True, 1: 0.5}, TypeError, r"got True for class 0"),
]


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize(("x", "error", "pattern"), BAD_X)
def test_bad_score_dicts_are_rejected_and_leave_state_alone(cls, x, error, pattern):
    cal = make(cls)
    cal.learn_one({0: 0.3, 1: 0.7}, 1)
    before = pickle.dumps(cal)
    with pytest.raises(error, match=pattern):
        cal.learn_one(x, 0)
    with pytest.raises(error, match=pattern):
        cal.predict_proba_one(x)
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_non_finite_logits_are_rejected(cls):
    cal = make(cls, scores="logit")
    with pytest.raises(ValueError, match=r"finite logits; got inf for class 'b'"):
        cal.learn_one({"a": 0.0, "b": math.inf}, "a")


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_unknown_classes_are_rejected_when_classes_are_fixed(cls):
    cal = make(cls, classes=(0, 1, 2))
    cal.learn_one({0: 0.2, 1: 0.3, 2: 0.5}, 2)
    before = pickle.dumps(cal)
    with pytest.raises(ValueError, match=r"score for class 3, which is not among `classes`"):
        cal.learn_one({0: 0.2, 3: 0.8}, 0)
    with pytest.raises(ValueError, match=r"score for class 'x', which is not among `classes`"):
        cal.predict_proba_one({0: 0.2, "x": 0.8})
    with pytest.raises(ValueError, match=r"`y` = 7 is not among `classes` \[0, 1, 2\]"):
        cal.learn_one({0: 0.2, 1: 0.8}, 7)
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_bad_labels_and_parameters_are_rejected(cls):
    cal = make(cls)
    with pytest.raises(ValueError, match="`y` must be a class label; got None"):
        cal.learn_one({0: 0.5, 1: 0.5}, None)
    with pytest.raises(TypeError, match="`y` must be a hashable class label"):
        cal.learn_one({0: 0.5, 1: 0.5}, [0])
    with pytest.raises(ValueError, match="`scores` must be one of"):
        make(cls, scores="odds").learn_one({0: 0.5}, 0)
    with pytest.raises(ValueError, match="`classes` must not repeat a class"):
        make(cls, classes=(0, 0, 1)).learn_one({0: 0.5}, 0)
    assert binary_calibrators(cal) == {}


class RefusingStandIn(BinnedStandIn):
    """A stand-in that refuses pairwise log-odds above 0 (as a calibrator with a bounded score
    range would), before changing anything."""

    def learn_one(self, x, y):
        if next(iter(x.values())) > 0.0:
            msg = "`x` out of range"
            raise ValueError(msg)
        super().learn_one(x, y)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_a_rejected_learn_one_registers_no_class_and_no_pair(cls):
    """A learn_one its binary calibrators refuse leaves the classes and pairs as they were."""
    cal = cls(calibrator=RefusingStandIn())
    cal.learn_one({0: 0.5, 1: 0.5}, 0)  # log-odds 0: accepted
    before = pickle.dumps(cal)
    with pytest.raises(ValueError, match="out of range"):
        cal.learn_one({0: 0.6, 1: 0.2, 2: 0.2}, 2)  # class 2 is new; the first pair (class) sees log-odds > 0
    assert pickle.dumps(cal) == before
    assert cal.classes_ == [0, 1]


class NarrowEdges(Edges):
    """Edges whose strategy takes scores in [-1, 1] only."""

    score_range = (-1.0, 1.0)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_streamcal_pairs_are_checked_before_any_learns(cls):
    """Every pair's score dict goes through its streamcal calibrator's check before the first
    pair learns: one refused dict leaves all of them unchanged."""
    cal = cls(calibrator=PAVCalibrator(buckets=NarrowEdges((-1.0, 0.0, 1.0))), scores="logit")
    cal.learn_one({0: 0.0, 1: 0.0, 2: 0.0}, 0)
    before = pickle.dumps(cal)
    # the first pair (or class) in order sees log-odds 0, a later one -5 or 5: out of range
    with pytest.raises(ValueError, match=r"`x\['score'\]` must lie in \[-1.0, 1.0\]"):
        cal.learn_one({0: 0.0, 1: 0.0, 2: 5.0}, 1)
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("bad", [float("nan"), np.float32("nan"), None])
def test_nan_and_none_are_not_classes(cls, bad):
    cal = make(cls)
    cal.learn_one({0: 0.5, 1: 0.5}, 0)
    before = pickle.dumps(cal)
    with pytest.raises(ValueError, match="None and NaN are not class labels"):
        cal.learn_one({0: 0.5, bad: 0.5}, 0)
    with pytest.raises(ValueError, match="None and NaN are not class labels"):
        cal.learn_one({0: 0.5, 1: 0.5}, bad)
    with pytest.raises(ValueError, match="None and NaN are not class labels"):
        cal.predict_proba_one({0: 0.5, bad: 0.5})
    assert pickle.dumps(cal) == before
    with pytest.raises(ValueError, match="`classes`"):
        make(cls, classes=(0, bad)).learn_one({0: 0.5}, 0)


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("window", [TimeWindow(10.0), "10s"], ids=repr)
def test_time_window_calibrators_need_event_times(cls, window):
    # the window's shorthand is read as the binary calibrator reads it: "10s" is a TimeWindow too
    cal = cls(calibrator=PAVCalibrator(window=window))
    with pytest.raises(ValueError, match="TimeWindow needs event times: pass `t=` to learn_one"):
        cal.learn_one({0: 0.5, 1: 0.5}, 0)
    assert binary_calibrators(cal) == {}
    assert cal.classes_ == []
    cal.learn_one({0: 0.5, 1: 0.5}, 0, t=5.0)
    with pytest.raises(ValueError, match=r"`t` must not go backwards; got 4.0 after the last learned time 5.0"):
        cal.learn_one({0: 0.5, 1: 0.5}, 1, t=4.0)
    cal.learn_one({0: 0.5, 1: 0.5}, 1, t=20.0)  # the first event has left every window
    models = binary_calibrators(cal)
    assert [m.window_weight for m in models.values()] == [1.0] * len(models)


def test_bad_coupling_parameters_are_rejected():
    with pytest.raises(ValueError, match="`method` must be one of"):
        make(PairwiseCouplingCalibrator, method="max-wins").predict_proba_one({0: 0.5})
    with pytest.raises(ValueError, match="`tol` must be a number in"):
        make(PairwiseCouplingCalibrator, tol=-1e-3).predict_proba_one({0: 0.5})


# --- properties -----------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_state_size_is_bounded(cls):
    rng = np.random.default_rng(3)
    cal = make(cls)
    stream = dirichlet_stream(rng, 3000, 4)
    for x, y, _ in stream[:300]:
        cal.learn_one(x, y)
    size = len(pickle.dumps(cal))
    for x, y, _ in stream[300:]:
        cal.learn_one(x, y)
    assert len(pickle.dumps(cal)) == size


@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6), method=st.sampled_from(["ht", "wlw"]))
@settings(max_examples=25)
def test_predictions_are_distributions_over_known_and_scored_classes(seed, k, method):
    rng = np.random.default_rng(seed)
    cal = make(PairwiseCouplingCalibrator, method=method)
    ovr = make(OneVsRestCalibrator)
    for _ in range(40):
        keys = [c for c in range(k) if rng.random() < 0.8]
        raw = rng.dirichlet(np.ones(len(keys))) if keys else []
        x = {c: float(v) for c, v in zip(keys, raw, strict=True)}
        y = int(rng.integers(k))
        for model in (cal, ovr):
            out = model.predict_proba_one(x)
            assert set(out) == set(model.classes_) | set(x)
            if out:
                assert all(0.0 <= v <= 1.0 for v in out.values())
                assert sum(out.values()) == pytest.approx(1.0)
            model.learn_one(x, y)


class ProbabilityStandIn(BinnedStandIn):
    """A stand-in whose (streamcal-style) bucket strategy takes probabilities: buckets=None."""

    def __init__(self, edges: tuple = tuple(np.linspace(0.0, 1.0, 21)), buckets=None):
        super().__init__(edges=edges)
        self.buckets = buckets


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_calibrators_taking_probabilities_get_the_sigmoid_of_the_log_odds(cls):
    cal = cls(calibrator=ProbabilityStandIn())
    cal.learn_one({0: 0.2, 1: 0.8}, 1)
    model = next(iter(binary_calibrators(cal).values()))
    expected = 0.2 / (0.2 + 0.8) if cls is PairwiseCouplingCalibrator else 0.2
    assert model.totals[model.bin_of({"s": expected})] == 1
    assert model.totals.sum() == 1


# --- array face -----------------------------------------------------------------------------


def score_matrix(rng, m, k, zeros=True):
    p = rng.dirichlet(np.ones(k), size=m)
    if zeros:
        p[rng.random((m, k)) < 0.05] = 0.0  # classes the model gives probability 0
    y = np.array([rng.choice(k) for _ in range(m)])
    return p, y


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("standin", [PAVCalibrator, BinnedStandIn, OneByOneStandIn])
@pytest.mark.parametrize("method", ["ht", "wlw"])
def test_array_face_equals_loops_of_the_river_face(cls, standin, method, rng):
    classes = ("c", "a", "b", "d")
    extra = {"method": method} if cls is PairwiseCouplingCalibrator else {}
    fast = cls(calibrator=standin(), classes=classes, **extra)
    slow = cls(calibrator=standin(), classes=classes, **extra)
    p, y = score_matrix(rng, 300, 4)
    labels = [classes[i] for i in y]
    fast.update(p[:200], labels[:200]).update(p[200:], labels[200:])
    for row, label in zip(p, labels, strict=True):
        slow.learn_one({c: float(v) for c, v in zip(classes, row, strict=True)}, label)
    fast_models, slow_models = binary_calibrators(fast), binary_calibrators(slow)
    assert fast_models.keys() == slow_models.keys()
    grid = np.linspace(-8.0, 8.0, 41)
    for key, model in fast_models.items():
        other = slow_models[key]
        assert model.window_weight == other.window_weight
        for d in grid:
            assert model.predict_proba_one(score_dict(model, d)) == other.predict_proba_one(score_dict(other, d))
    test, _ = score_matrix(rng, 50, 4)
    rows = [{c: float(v) for c, v in zip(classes, row, strict=True)} for row in test]
    expected = [list(slow.predict_proba_one(x).values()) for x in rows]
    np.testing.assert_allclose(fast.predict_proba(test), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_array_face_before_learning_and_with_logits(cls, rng):
    cal = make(cls, scores="logit", classes=(0, 1, 2))
    z = rng.normal(size=(5, 3))
    out = cal.predict_proba(z)
    assert out.shape == (5, 3)
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    if cls is PairwiseCouplingCalibrator:
        np.testing.assert_allclose(out, np.exp(z) / np.exp(z).sum(axis=1, keepdims=True), atol=1e-7)
    two = make(cls, classes=(0, 1)).predict_proba([[0.3, 0.7]])
    np.testing.assert_allclose(two, [[0.3, 0.7]])


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_array_face_rejects_bad_input_and_leaves_state_alone(cls, rng):
    cal = make(cls, classes=(0, 1, 2))
    p, y = score_matrix(rng, 20, 3, zeros=False)
    cal.update(p, y)
    before = pickle.dumps(cal)
    bad = p.copy()
    bad[4, 2] = 1.5
    with pytest.raises(ValueError, match=r"got 1.5 at position \(4, 2\) \(class 2\)"):
        cal.update(bad, y)
    with pytest.raises(ValueError, match=r"shape \(m, 3\), one column per class"):
        cal.predict_proba(p[:, :2])
    with pytest.raises(ValueError, match=r"`labels` holds 5 at position 3, which is not among"):
        cal.update(p[:5], [0, 1, 2, 5, 0])
    with pytest.raises(ValueError, match=r"same length as the scores \(20\); got 19"):
        cal.update(p, y[:19])
    assert pickle.dumps(cal) == before
    with pytest.raises(ValueError, match=r"`update` needs the classes fixed in advance"):
        make(cls).update(p, y)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_binary_probabilities_are_kept_within_add_one_bounds(cls):
    # PAV on a unanimous window says 1 (or 0) exactly; no class may get probability 0 from that.
    cal = make(cls)
    for _ in range(8):
        cal.learn_one({0: 0.9, 1: 0.05, 2: 0.05}, 0)
    out = cal.predict_proba_one({0: 0.9, 1: 0.05, 2: 0.05})
    assert min(out.values()) > 0.0
    assert sum(out.values()) == pytest.approx(1.0)
    if cls is PairwiseCouplingCalibrator:
        _, r, n = cal.coupling_inputs({0: 0.9, 1: 0.05, 2: 0.05})
        assert n[0, 1] == 8
        assert r[0, 1] == pytest.approx(1 - 1 / 10)


def test_logit_scores_pair_on_the_logit_difference():
    cal = make_standin(PairwiseCouplingCalibrator, scores="logit")
    cal.learn_one({"a": 2.0, "b": -1.0, "c": 0.5}, "c")
    model = cal.pairs_[("a", "c")]
    assert model.totals[model.bin_of({"s": 1.5})] == 1  # s_a - s_c, label y == "a" is False
    assert model.positives.sum() == 0
    assert cal.pairs_[("b", "c")].totals[model.bin_of({"s": -1.5})] == 1


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_predict_one_is_the_most_probable_class(cls, rng):
    cal = make(cls)
    for x, y, _ in dirichlet_stream(rng, 200, 3):
        cal.learn_one(x, y)
    x = {0: 0.1, 1: 0.7, 2: 0.2}
    proba = cal.predict_proba_one(x)
    assert cal.predict_one(x) == max(proba, key=proba.get)
