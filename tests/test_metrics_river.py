"""River metrics equal the array functions after every update and revert."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal.metrics import (
    ECE,
    BetaWeighting,
    Brier,
    CalibrationLoss,
    Cllr,
    HosmerLemeshow,
    LogLoss,
    MinCllr,
    ProperScoringRule,
    ThresholdWeighting,
    brier_score,
    calibration_loss,
    cllr,
    ece,
    hosmer_lemeshow,
    log_loss,
    min_cllr,
    proper_scoring_rule,
)


def _needs_both(func):
    def wrapped(y, p, w):
        if not (np.sum(w[y == 1]) > 0 and np.sum(w[y == 0]) > 0):
            return math.nan
        return func(y, p, w)

    return wrapped


# (river metric factory, array reference on the events so far, what y_pred is)
CASES = {
    "brier": (Brier, lambda y, p, w: brier_score(y, p, w), "proba"),
    "log_loss": (LogLoss, lambda y, p, w: log_loss(y, p, w), "proba"),
    "log_loss_eps": (lambda: LogLoss(eps=1e-6), lambda y, p, w: log_loss(y, p, w, eps=1e-6), "proba"),
    "ece": (lambda: ECE(7), lambda y, p, w: ece(y, p, 7, weights=w), "proba"),
    "calibration_loss": (CalibrationLoss, lambda y, p, w: calibration_loss(y, p, w), "proba"),
    "hl_uniform": (
        lambda: HosmerLemeshow(5, "uniform"),
        lambda y, p, w: hosmer_lemeshow(y, p, 5, strategy="uniform", weights=w)[0],
        "proba",
    ),
    "hl_quantile": (
        lambda: HosmerLemeshow(4),
        lambda y, p, w: hosmer_lemeshow(y, p, 4, weights=w)[0],
        "proba",
    ),
    "beta_rule": (
        lambda: ProperScoringRule(BetaWeighting(0.5, 2.0)),
        lambda y, p, w: proper_scoring_rule(y, p, BetaWeighting(0.5, 2.0), w),
        "proba",
    ),
    "threshold_rule": (
        lambda: ProperScoringRule(ThresholdWeighting(0.3)),
        lambda y, p, w: proper_scoring_rule(y, p, ThresholdWeighting(0.3), w),
        "proba",
    ),
    "cllr": (Cllr, _needs_both(lambda y, x, w: cllr(y, x, w)), "llr"),
    "min_cllr": (MinCllr, _needs_both(lambda y, s, w: min_cllr(y, s, w)), "llr"),
}


def _stream(rng, n, kind):
    y = rng.uniform(size=n) < 0.3
    if kind == "proba":
        p = np.round(rng.uniform(size=n) ** 1.5, 2)  # ties and values on bin edges
        p[rng.uniform(size=n) < 0.05] = 0.0
        p[rng.uniform(size=n) < 0.05] = 1.0
    else:
        p = np.round(rng.normal(0, 2, n), 1)
    w = np.round(rng.uniform(0.5, 2.0, n), 1)
    return y, p, w


def _same(got, expected):
    if math.isnan(expected):
        return math.isnan(got)
    if math.isinf(expected):
        return got == expected
    return got == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_river_metric_equals_array_function_after_every_update(name, rng):
    make, reference, kind = CASES[name]
    n = 40 if name.endswith("rule") else 120
    y, p, w = _stream(rng, n, kind)
    metric = make()
    for i in range(n):
        metric.update(bool(y[i]), float(p[i]), w=float(w[i]))
        got = metric.get()
        assert isinstance(got, float)
        assert _same(got, reference(y[: i + 1], p[: i + 1], w[: i + 1])), (i, got)


@pytest.mark.parametrize("name", sorted(CASES))
def test_river_metric_equals_array_function_in_a_sliding_window(name, rng):
    make, reference, kind = CASES[name]
    n, k = (30, 8) if name.endswith("rule") else (100, 25)
    y, p, w = _stream(rng, n, kind)
    metric = make()
    for i in range(n):
        metric.update(bool(y[i]), float(p[i]), w=float(w[i]))
        if i >= k:
            metric.revert(bool(y[i - k]), float(p[i - k]), w=float(w[i - k]))
        lo = max(0, i - k + 1)
        assert _same(metric.get(), reference(y[lo : i + 1], p[lo : i + 1], w[lo : i + 1])), i


def test_hosmer_lemeshow_pvalue_follows_the_array_function(rng):
    y, p, w = _stream(rng, 200, "proba")
    for strategy in ["uniform", "quantile"]:
        metric = HosmerLemeshow(10, strategy)
        for yi, pi, wi in zip(y, p, w):
            metric.update(bool(yi), float(pi), w=float(wi))
        stat, pvalue = hosmer_lemeshow(y, p, 10, strategy=strategy, weights=w)
        assert metric.get() == pytest.approx(stat, rel=1e-9)
        assert metric.pvalue == pytest.approx(pvalue, rel=1e-9)


@given(
    events=st.lists(
        st.tuples(st.booleans(), st.sampled_from([-math.inf, -2.0, -0.5, 0.0, 0.5, 1.5, math.inf])),
        min_size=1,
        max_size=30,
    )
)
def test_min_cllr_stream_with_infinite_scores(events):
    metric = MinCllr()
    cllr_metric = Cllr()
    for i, (yi, s) in enumerate(events):
        metric.update(yi, s)
        cllr_metric.update(yi, s)
        y = np.array([e[0] for e in events[: i + 1]], dtype=float)
        x = np.array([e[1] for e in events[: i + 1]])
        if 0 < y.sum() < y.size:
            assert metric.get() == pytest.approx(min_cllr(y, x), rel=1e-9, abs=1e-12)
            assert metric.get() <= cllr_metric.get() + 1e-12
        else:
            assert math.isnan(metric.get())


def test_proba_dicts_are_accepted():
    a, b = Brier(), Brier()
    a.update(True, {False: 0.3, True: 0.7})
    b.update(True, 0.7)
    assert a.get() == b.get()
    c = Cllr(prior=0.2)
    c.update(True, {False: 0.2, True: 0.8})
    c.update(False, 0.0)
    x = math.log(0.8 / 0.2) - math.log(0.2 / 0.8)
    assert c.get() == pytest.approx(cllr([1, 0], [x, 0.0]), rel=1e-12)
    with pytest.raises(TypeError, match="predict_llr_one"):
        Cllr().update(True, {True: 0.8, False: 0.2})


def test_log_loss_infinity_is_revertible():
    metric = LogLoss()
    metric.update(True, 0.8)
    metric.update(True, 0.0)
    assert metric.get() == math.inf
    metric.revert(True, 0.0)
    assert metric.get() == pytest.approx(-math.log(0.8), rel=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rejected_update_leaves_state_unchanged(name, rng):
    make, _, kind = CASES[name]
    metric = make()
    y, p, w = _stream(rng, 10, kind)
    for i in range(10):
        metric.update(bool(y[i]), float(p[i]), w=float(w[i]))
    before = pickle.dumps(metric)
    bad_calls = [
        ((2, 0.5), {}, r"`y_true` must be a binary label"),
        ((True, math.nan), {}, r"`y_pred`"),
        ((True, "0.5"), {}, r"`y_pred`"),
        ((True, 0.5), {"w": -1.0}, r"`w` must be finite and non-negative; got -1.0"),
        ((True, 0.5), {"w": math.nan}, r"`w`"),
    ]
    if kind == "proba":
        bad_calls.append(((True, 1.5), {}, r"`y_pred` must be a probability in \[0, 1\]; got 1.5"))
    for args, kwargs, match in bad_calls:
        for method in (metric.update, metric.revert):
            with pytest.raises((ValueError, TypeError), match=match):
                method(*args, **kwargs)
            assert pickle.dumps(metric) == before


@pytest.mark.parametrize("name", sorted(CASES))
def test_clone_and_pickle(name, rng):
    make, _, kind = CASES[name]
    metric = make()
    y, p, w = _stream(rng, 20, kind)
    for i in range(20):
        metric.update(bool(y[i]), float(p[i]), w=float(w[i]))
    restored = pickle.loads(pickle.dumps(metric))
    assert _same(restored.get(), metric.get())
    deep = copy.deepcopy(metric)
    assert _same(deep.get(), metric.get())
    fresh = metric.clone()
    assert fresh.get() == 0.0 or math.isnan(fresh.get())
    assert not metric.bigger_is_better
    assert not metric.requires_labels


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"`n_bins` must be an int in \[1, inf\); got 0"):
        ECE(0)
    with pytest.raises(ValueError, match=r"`strategy` must be one of"):
        HosmerLemeshow(strategy="deciles")
    with pytest.raises(ValueError, match=r"`prior`"):
        Cllr(prior=1.0)
    with pytest.raises(TypeError, match=r"`weighting`"):
        ProperScoringRule("log")
    with pytest.raises(ValueError, match="never added"):
        HosmerLemeshow().revert(True, 0.5)


def test_works_in_progressive_validation():
    from river import datasets, evaluate, linear_model, preprocessing

    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    dataset = list(datasets.Phishing())[:200]
    for metric in [Brier(), LogLoss(), ECE(), CalibrationLoss(), HosmerLemeshow(), MinCllr()]:
        result = evaluate.progressive_val_score(dataset, copy.deepcopy(model), metric)
        assert math.isfinite(result.get())


def test_a_label_other_than_bool_or_01_says_how_to_score_it():
    from streamcal import metrics as sm

    for metric in (sm.Brier(), sm.LogLoss(), sm.ECE(), sm.Cllr()):
        metric.update(True, 0.3)
        before = pickle.dumps(metric)
        with pytest.raises(ValueError, match=r"got 'legit'\. .*construct the metric with .*pos_val='legit'"):
            metric.update("legit", {"legit": 0.9, "fraud": 0.1})
        assert pickle.dumps(metric) == before


def _fraud(y: bool) -> str:
    return "fraud" if y else "legit"


@pytest.mark.parametrize("name", sorted(CASES))
def test_pos_val_with_string_labels_equals_the_bool_form(name, rng):
    make, _, kind = CASES[name]
    as_bool = make()
    as_str = as_bool.clone({"pos_val": "fraud"})
    assert as_str.pos_val == "fraud"
    y, p, w = _stream(rng, 60, kind)
    dicts = kind == "proba" or name == "min_cllr"
    for i in range(60):
        yi, pi, wi = bool(y[i]), float(p[i]), float(w[i])
        if dicts and i % 2:  # predict_proba_one's dicts, the positive class read at pos_val
            q = min(max(pi, 0.0), 1.0)
            as_bool.update(yi, {False: 1.0 - q, True: q}, w=wi)
            as_str.update(_fraud(yi), {"legit": 1.0 - q, "fraud": q}, w=wi)
        else:
            as_bool.update(yi, pi, w=wi)
            as_str.update(_fraud(yi), pi, w=wi)
        assert _same(as_str.get(), as_bool.get())
    for i in range(0, 60, 3):
        if not (dicts and i % 2):
            as_bool.revert(bool(y[i]), float(p[i]), w=float(w[i]))
            as_str.revert(_fraud(bool(y[i])), float(p[i]), w=float(w[i]))
            assert _same(as_str.get(), as_bool.get())


def test_pos_val_false_and_zero_count_the_false_labels_as_positive():
    flipped, plain = Brier(pos_val=False), Brier()
    other = Brier(pos_val=0)
    for y, p in [(True, 0.25), (False, 0.5), (False, 0.125), (True, 0.75)]:
        flipped.update(y, {True: 1.0 - p, False: p})
        other.update(int(y), {1: 1.0 - p, 0: p})
        plain.update(not y, p)
    assert flipped.get() == plain.get() == other.get()


def test_a_dict_without_pos_val_is_probability_zero_when_the_rest_adds_up_to_one():
    read, direct = LogLoss(pos_val="fraud"), LogLoss(pos_val="fraud")
    read.update("legit", {"legit": 1.0})  # river's model before it has learned "fraud"
    direct.update("legit", 0.0)
    read.update("fraud", {"fraud": 0.8, "legit": 0.2})
    direct.update("fraud", 0.8)
    assert read.get() == direct.get()
    default = Brier()
    default.update(False, {False: 1.0})
    assert default.get() == 0.0
    before = pickle.dumps(read)
    for bad, match in [
        ({}, r"`y_pred` must be a probability or a dict of class probabilities"),
        ({"legit": 0.5}, r"add up to 1 \(a class missing from it, as `pos_val` = 'fraud' is, has probability 0\)"),
        ({"legit": 0.5, "fraud": 0.4}, r"must be a dict of class probabilities that add up to 1"),
    ]:
        for method in (read.update, read.revert):
            with pytest.raises(ValueError, match=match):
                method("legit", bad)
    with pytest.raises(ValueError, match=r"keyed by labels of the kind of `pos_val` = True; got a dict with the keys \['legit', 'fraud'\]"):
        Brier().update(True, {"legit": 0.5, "fraud": 0.5})
    assert pickle.dumps(read) == before


def test_pos_val_is_checked_and_kept_by_clone_pickle_and_persist(tmp_path):
    from streamcal import persist

    with pytest.raises(TypeError, match=r"`pos_val` must be a hashable label .*got \[1\]"):
        ECE(pos_val=[1])
    with pytest.raises(ValueError, match=r"`pos_val` must be a label .*got None"):
        Cllr(pos_val=None)
    metric = CalibrationLoss(n_bins=4, pos_val="fraud")
    for y, p in [("fraud", 0.9), ("legit", 0.3), ("other", 0.6), ("fraud", 0.4)]:  # "other": a negative too
        metric.update(y, p)
    assert metric.clone().pos_val == "fraud"
    back = persist.load(persist.save(metric, tmp_path / "loss.zip", allow_pickle=False))
    assert back.pos_val == "fraud"
    assert back.get() == metric.get() == pickle.loads(pickle.dumps(metric)).get()
    back.update("legit", 0.1)
    metric.update("legit", 0.1)
    assert back.get() == metric.get()


def test_pos_val_in_progressive_validation_of_a_model_with_string_labels():
    from river import evaluate, naive_bayes

    rng = np.random.default_rng(7)
    labels = rng.uniform(size=300) < 0.3
    stream = [({"a": float(rng.normal(1.5 * yi)), "b": float(rng.normal())}, _fraud(bool(yi))) for yi in labels]
    model = naive_bayes.GaussianNB()
    reference = []  # the events river scores: each probability of "fraud" before the model learns the event
    for x, y in stream:
        proba = model.predict_proba_one(x)
        if proba:
            reference.append((y == "fraud", proba.get("fraud", 0.0)))
        model.learn_one(x, y)
    assert any(p == 0.0 for _, p in reference)  # some events scored before "fraud" was learned
    result = evaluate.progressive_val_score(stream, naive_bayes.GaussianNB(), Brier(pos_val="fraud"))
    y, p = (np.array(col, dtype=np.float64) for col in zip(*reference, strict=True))
    assert result.get() == pytest.approx(brier_score(y, p), rel=1e-12)


REVERT_CASES = {
    "brier": Brier,
    "log_loss": LogLoss,
    "symmetric_rule": lambda: ProperScoringRule(BetaWeighting(2.0, 2.0)),
    "ece": ECE,
    "calibration_loss": CalibrationLoss,
    "hl_uniform": lambda: HosmerLemeshow(4, "uniform"),
    "cllr": Cllr,
    "min_cllr": MinCllr,
}


@pytest.mark.parametrize("name", sorted(REVERT_CASES))
def test_a_revert_of_the_other_class_is_refused_and_changes_nothing(name):
    # a positive at p and a negative at 1 - p have the same loss (and LLR -x and x the same cost):
    # sums alone cannot tell the revert of the negative, which was never added
    metric = REVERT_CASES[name]()
    llr = name in ("cllr", "min_cllr")
    metric.update(True, 1.5 if llr else 0.9, w=2.0)
    metric.update(True, -0.5 if llr else 0.3)
    before = pickle.dumps(metric)
    for y_pred, w in [(-1.5 if llr else 0.1, 1.0), (-1.5 if llr else 0.1, 1e-9), (1.5 if llr else 0.9, 1.0), (1.5 if llr else 0.9, 1e-9)]:
        with pytest.raises(ValueError, match=r"cannot revert the event \(`y_true`, `y_pred`, `w`\) = \(False, .*it was never added"):
            metric.revert(False, y_pred, w=w)
        assert pickle.dumps(metric) == before
    metric.revert(True, 1.5 if llr else 0.9, w=2.0)  # what was added reverts


@pytest.mark.parametrize("name", sorted(REVERT_CASES))
def test_a_state_saved_before_the_class_counts_loads_and_reverts_what_it_holds(name):
    events = [(True, 0.8, 1.0), (False, 0.85, 2.0), (True, 0.3, 1.0), (True, 0.35, 0.5), (False, 0.1, 1.0)]
    metric = REVERT_CASES[name]()
    for y, p, w in events:
        metric.update(y, p, w=w)
    state = metric.__getstate__()
    older = {k: v for k, v in state.items() if k not in ("_by_class", "_n_pos", "_counts_pos")}
    if older == state:  # Cllr and MinCllr always kept their classes apart
        return
    loaded = type(metric).__new__(type(metric))
    loaded.__setstate__(copy.deepcopy(older))
    assert loaded.get() == metric.get()
    loaded.update(True, 0.8)  # learning goes on while the saved events' classes are unknown
    for y, p, w in events[::-1]:  # every saved event reverts
        loaded.revert(y, p, w=w)
    loaded.revert(True, 0.8)
    assert loaded.get() == metric.clone().get()
    loaded.update(True, 0.5)
    with pytest.raises(ValueError, match="never added"):  # emptied: the classes are known again
        loaded.revert(False, 0.5)
