"""Honest probabilities by default: on a rare-event stream no default calibrator serves exactly 0 or 1.

Every default calibrator (streaming PAV, batch isotonic, I-spline, GEV, Platt, the multiclass
calibrators, ``CalibratedClassifier`` around a river model, the replay command line) is run with
its defaults on seeded data with a base rate of about 1 %, and every probability it serves must
be strictly inside (0, 1), with a finite log loss. The exact PAV map, asked for explicitly, does
serve 0 and 1 on the same data: the streams are hard enough for the assertions to bite.
Also here: ``CalibratedClassifier`` rejects labels it would learn wrongly and non-finite features
before anything learns, and the ``--exact-proba`` switch of ``streamcal replay``.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest
from river import linear_model, naive_bayes
from scipy.special import expit

from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator
from streamcal.compose import CalibratedClassifier
from streamcal.isotonic import IsotonicCalibrator
from streamcal.metrics import log_loss
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator
from streamcal.spline.fit import evaluate_map


def rare_stream(n: int, seed: int = 0):
    """Scores and labels: model logit ``m ~ N(-4.5, 1.2)``, score ``expit(m)``, true probability
    ``expit(1.5 m + 0.5)`` (base rate about 0.9 %)."""
    rng = np.random.default_rng(seed)
    m = rng.normal(-4.5, 1.2, size=n)
    return expit(m), rng.uniform(size=n) < expit(1.5 * m + 0.5)


def assert_honest(proba, labels) -> None:
    proba = np.asarray(proba, dtype=np.float64)
    zeros, ones = int(np.sum(proba == 0.0)), int(np.sum(proba == 1.0))
    assert zeros == ones == 0, f"{zeros} probabilities of exactly 0 and {ones} of exactly 1"
    assert np.all((proba > 0.0) & (proba < 1.0))
    assert math.isfinite(log_loss(labels, proba))


def test_the_rare_stream_is_rare_and_breaks_the_exact_map():
    s, y = rare_stream(4000)
    assert 0.005 <= y.mean() <= 0.02
    exact, _ = PAVCalibrator(finite_proba=False).prequential(s, y)
    assert np.sum((exact == 0.0) | (exact == 1.0)) > 100
    assert log_loss(y, exact) == math.inf


DEFAULT_STREAMING = {
    "pav": PAVCalibrator,
    "ispline": ISplineCalibrator,
    "gev": GEVCalibrator,
    "platt": PlattCalibrator,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DEFAULT_STREAMING))
def test_default_streaming_calibrator_prequential_serves_no_zero_or_one(name):
    s, y = rare_stream(4000, seed=1)
    proba, llr = DEFAULT_STREAMING[name]().prequential(s, y)
    assert_honest(proba, y)
    assert np.isfinite(llr).all()


@pytest.mark.parametrize("name", list(DEFAULT_STREAMING))
def test_default_streaming_calibrator_river_face_serves_no_zero_or_one(name):
    s, y = rare_stream(1500, seed=2)
    cal = DEFAULT_STREAMING[name]()
    served = []
    for score, label in zip(s.tolist(), y.tolist(), strict=True):
        p = cal.predict_proba_one({"score": score})
        assert p[False] == 1.0 - p[True]
        served.append(p[True])
        cal.learn_one({"score": score}, label)
    assert_honest(served, y)


@pytest.mark.parametrize("name", ["ispline", "gev", "platt"])
def test_fitted_maps_are_bounded_by_add_c_smoothing_of_the_window(name):
    """A one-class window: the fitted map says (about) 0, the served value is c / (T + 2c)."""
    for c in (1.0, 0.25):
        cal = DEFAULT_STREAMING[name](llr_pseudo_count=c, prior=None)  # the map of the window alone
        scores = np.linspace(0.01, 0.3, 50)
        cal.update(scores, np.zeros(50, dtype=bool))
        proba = cal.predict_proba(scores)
        assert proba.min() == c / (50 + 2 * c)
        assert proba.tolist() == [cal.predict_proba_one({"score": float(v)})[True] for v in scores]
        assert cal.predict_proba([0.999]).tolist() == [cal.predict_proba_one({"score": 0.999})[True]]
    if name == "ispline":  # least squares on all-negative labels: the map is exactly 0 everywhere
        # the fitted map f = sum_j beta_j B_j with beta = min(cumsum(coef_), 1), from the public knots and coefficients
        beta = np.ascontiguousarray(np.minimum(np.cumsum(cal.coef_), 1.0))
        assert np.all(evaluate_map(scores, cal.knots_, int(cal.order), beta) == 0.0)
        assert np.all(proba == c / (50 + 2 * c))


def test_default_batch_isotonic_serves_no_zero_or_one():
    s, y = rare_stream(20_000, seed=3)
    train, test = slice(0, 10_000), slice(10_000, None)
    assert_honest(IsotonicCalibrator().fit(s[train], y[train]).predict_proba(s[test]), y[test])
    exact = IsotonicCalibrator(finite_proba=False).fit(s[train], y[train]).predict_proba(s[test])
    assert np.any((exact == 0.0) | (exact == 1.0))


@pytest.mark.parametrize("pseudo_count", [1.0, 2.5])
def test_batch_finite_map_is_isotonic_regression_of_the_augmented_data(pseudo_count, rng):
    """Independent reference: scikit-learn's isotonic regression of the data plus a pseudo-positive
    below every score and a pseudo-negative above (weight c) gives the finite map at the data's
    scores; between them it is the exact map clipped to its two end values."""
    from sklearn.isotonic import IsotonicRegression

    for _ in range(20):
        n = int(rng.integers(3, 300))
        s = rng.integers(0, 40, size=n) / 40.0
        y = rng.uniform(size=n) < s**2
        w = rng.uniform(0.2, 2.0, size=n)
        aug = IsotonicRegression().fit(
            np.r_[-1.0, s, 2.0], np.r_[1.0, y, 0.0], sample_weight=np.r_[pseudo_count, w, pseudo_count]
        )
        cal = IsotonicCalibrator(llr_pseudo_count=pseudo_count).fit(s, y, sample_weight=w)
        np.testing.assert_allclose(cal.predict_proba(s), aug.predict(s), rtol=0, atol=1e-12)
        exact = IsotonicRegression(out_of_bounds="clip").fit(s, y, sample_weight=w)
        grid = np.linspace(-0.5, 1.5, 201)
        lo, hi = aug.predict([s.min()])[0], aug.predict([s.max()])[0]
        np.testing.assert_allclose(cal.predict_proba(grid), np.clip(exact.predict(grid), lo, hi), rtol=0, atol=1e-12)
        t1, t = float(np.dot(w, y)), float(w.sum())
        prior = (t1 + pseudo_count) / (t + 2 * pseudo_count)
        p = cal.predict_proba(grid)
        np.testing.assert_allclose(
            cal.predict_llr(grid), np.log(p / (1 - p)) - np.log(prior / (1 - prior)), rtol=0, atol=1e-9
        )
        assert np.all((p > 0.0) & (p < 1.0))


def test_batch_isotonic_state_keeps_its_map_and_a_state_without_finite_proba_is_refused():
    """A saved calibrator serves the map it was saved with; a state that does not say which map
    (saved before ``finite_proba`` existed) is refused on loading, not guessed."""
    from streamcal._state_check import check_loaded
    from streamcal.exceptions import StateFileError
    from streamcal.persist import from_bytes, to_bytes

    s, y = rare_stream(3000, seed=4)
    for finite_proba in (True, False):
        cal = IsotonicCalibrator(finite_proba=finite_proba).fit(s, y)
        for again in (pickle.loads(pickle.dumps(cal)), from_bytes(to_bytes(cal))):
            assert again.finite_proba is finite_proba
            np.testing.assert_array_equal(again.predict_proba(s), cal.predict_proba(s))
    assert_honest(from_bytes(to_bytes(IsotonicCalibrator().fit(s, y))).predict_proba(s), y)
    old = IsotonicCalibrator.__new__(IsotonicCalibrator)
    old.__dict__.update({k: v for k, v in cal.__dict__.items() if k not in ("finite_proba", "llr_pseudo_count")})
    with pytest.raises(StateFileError, match=r"missing .*finite_proba"):
        check_loaded(old)  # what loading a state file runs once the attributes are set


# ------------------------------------------------------------------------------------- multiclass
def rare_class_stream(n: int, seed: int = 0):
    """Three classes, class 2 rare (about 1 %); the model's scores are over-confident (the true
    log-odds doubled, then normalised)."""
    rng = np.random.default_rng(seed)
    logits = np.column_stack([np.zeros(n), rng.normal(size=n), -5.5 + 1.5 * rng.normal(size=n)])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (rng.uniform(size=n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    q = np.exp(2 * logits) / np.exp(2 * logits).sum(axis=1, keepdims=True)
    return q, y


@pytest.mark.parametrize("make", [PairwiseCouplingCalibrator, OneVsRestCalibrator])
def test_default_multiclass_calibrators_serve_no_zero_or_one(make):
    q, y = rare_class_stream(3000, seed=5)
    assert 0.005 <= np.mean(y == 2) <= 0.02
    cal = make()
    loss = 0.0
    for row, label in zip(q, y.tolist(), strict=True):
        p = cal.predict_proba_one({c: float(v) for c, v in enumerate(row)})
        assert len(p) == 3
        values = np.array(list(p.values()))
        assert np.all((values > 0.0) & (values < 1.0)), p
        if p:
            loss -= math.log(p[label]) if label in p else math.inf
        cal.learn_one({c: float(v) for c, v in enumerate(row)}, label)
    assert math.isfinite(loss)
    models = cal.pairs_ if isinstance(cal, PairwiseCouplingCalibrator) else cal.calibrators_
    assert all(m.finite_proba for m in models.values())  # the default binary calibrator


def test_default_one_vs_rest_array_face_serves_no_zero_or_one():
    q, y = rare_class_stream(3000, seed=6)
    cal = OneVsRestCalibrator(classes=(0, 1, 2)).update(q[:2000], y[:2000])
    p = cal.predict_proba(q[2000:])
    assert np.all((p > 0.0) & (p < 1.0))
    assert math.isfinite(-np.log(p[np.arange(1000), y[2000:]]).sum())


# ------------------------------------------------------------------------------ river wrapper
def rare_feature_stream(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        a, b = rng.normal(size=2)
        yield {"a": float(a), "b": float(b)}, bool(rng.uniform() < expit(1.2 * a - 0.8 * b - 5.0))


def _progressive(model, stream):
    served, labels = [], []
    for x, y in stream:
        p = model.predict_proba_one(x)
        assert set(p) == {False, True}
        served.append(p[True])
        labels.append(y)
        model.learn_one(x, y)
    return np.array(served), np.array(labels)


def test_calibrated_classifier_default_serves_no_zero_or_one():
    model = CalibratedClassifier(linear_model.LogisticRegression())
    assert isinstance(model.calibrator, PAVCalibrator)
    assert model.calibrator.finite_proba is True
    served, labels = _progressive(model, rare_feature_stream(3000, seed=7))
    assert 0.005 <= labels.mean() <= 0.03
    assert_honest(served, labels)
    exact = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator(finite_proba=False))
    served_exact, _ = _progressive(exact, rare_feature_stream(3000, seed=7))
    assert np.any((served_exact == 0.0) | (served_exact == 1.0))


@pytest.mark.parametrize(
    ("pos_val", "label"),
    [(True, "spam"), (True, "ham"), (True, 2), (1, 2), (0, "0"), (True, 0.5)],
)
def test_labels_neither_bool_nor_pos_val_are_rejected_and_nothing_learns(pos_val, label):
    model = CalibratedClassifier(linear_model.LogisticRegression(), pos_val=pos_val)
    for x, y in rare_feature_stream(30, seed=8):
        model.learn_one(x, int(y) if pos_val in (0, 1) and not isinstance(pos_val, bool) else y)
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="is neither a bool") as err:
        model.learn_one({"a": 0.1, "b": 0.2}, label)
    assert repr(label) in str(err.value)
    assert f"`pos_val` = {pos_val!r}" in str(err.value)
    assert pickle.dumps(model) == before
    assert model.n_learned == 30


def test_bool_like_labels_and_string_pos_val_still_work():
    model = CalibratedClassifier(linear_model.LogisticRegression())
    for k, (x, y) in enumerate(rare_feature_stream(60, seed=9)):
        model.learn_one(x, [y, int(y), float(y), np.bool_(y)][k % 4])
    assert model.n_learned == 60
    spam = CalibratedClassifier(naive_bayes.GaussianNB(), pos_val="spam")  # a model that takes string labels
    for x, y in rare_feature_stream(60, seed=9):
        spam.learn_one(x, "spam" if y or x["a"] > 1.0 else "ham")
    assert set(spam.predict_proba_one(x)) == {"spam", "ham"}


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, np.float32("inf"), np.float64("nan")])
def test_non_finite_feature_is_rejected_before_the_model_learns(bad):
    bare = linear_model.LogisticRegression()
    bare.learn_one({"a": 0.1, "b": bad}, True)
    assert not all(math.isfinite(w) for w in bare.weights.values())  # what the check prevents
    model = CalibratedClassifier(linear_model.LogisticRegression())
    for x, y in rare_feature_stream(40, seed=10):
        model.learn_one(x, y)
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match=r"`x` must hold finite numbers; got .* for feature 'b'"):
        model.learn_one({"a": 0.1, "b": bad}, True)
    assert pickle.dumps(model) == before
    assert all(math.isfinite(w) for w in model.classifier.weights.values())
    model.learn_one({"a": 0.1, "b": 0.3}, True)  # and it goes on learning
    assert model.n_learned == 41


# ------------------------------------------------------------------------------- command line
def test_replay_cli_defaults_serve_no_zero_or_one_and_exact_proba_is_the_switch(tmp_path, capsys):
    from streamcal.cli import main
    from streamcal.replay.generate import generate

    data = generate(tmp_path / "click.parquet", scenario="click", n=20_000, seed=11)
    out = tmp_path / "default.replay.parquet"
    methods = "pav,ispline,gev,platt"
    assert main(["replay", str(data), "--method", methods, "--output", str(out), "--quiet"]) == 0
    table = pq.read_table(out)
    labels = table.column("label").to_numpy().astype(bool)
    assert 0.005 <= labels.mean() <= 0.03
    for method in methods.split(","):
        assert_honest(table.column(f"proba_{method}").to_numpy(), labels)
    exact_out = tmp_path / "exact.replay.parquet"
    assert main(["replay", str(data), "--exact-proba", "--output", str(exact_out), "--quiet"]) == 0
    exact = pq.read_table(exact_out).column("proba_pav").to_numpy()
    assert np.sum((exact == 0.0) | (exact == 1.0)) > 100  # late labels: the exact map says 1 often
    capsys.readouterr()


def test_replay_cli_option_is_exact_proba():
    from streamcal.cli import build_parser
    from streamcal.replay._cli import _method_options

    parser = build_parser()
    assert "finite_proba" not in _method_options(parser.parse_args(["replay", "in.parquet"]))
    assert _method_options(parser.parse_args(["replay", "in.parquet", "--exact-proba"]))["finite_proba"] is False
    with pytest.raises(SystemExit):
        parser.parse_args(["replay", "in.parquet", "--finite-proba"])


def test_demos_use_the_defaults_and_their_log_losses_are_finite():
    from streamcal.demo import run_streaming_demo
    from streamcal.replay.demo import _DEMO_OPTIONS

    assert "finite_proba" not in _DEMO_OPTIONS
    rows = run_streaming_demo(n=20_000, window=2_000, out=None)
    assert all(math.isfinite(r["log loss"]) for r in rows)


@pytest.mark.parametrize("name", list(DEFAULT_STREAMING))
def test_before_any_label_a_sure_score_is_passed_through_inside_the_open_interval(name):
    # before any label a probability score is served as it is, but a model's 0.0 or 1.0 is kept
    # inside (0, 1), on both faces and for both classes' sides of the river face's answer
    cal = DEFAULT_STREAMING[name]()
    p = cal.predict_proba([0.0, 1.0, 0.3])
    assert p.tolist() == [2.0**-53, 1.0 - 2.0**-53, 0.3]
    for s in (0.0, 1.0):
        answer = cal.predict_proba_one({"s": s})
        assert 0.0 < answer[True] < 1.0
        assert 0.0 < answer[False] < 1.0
    assert np.all(cal.predict_llr([0.0, 1.0]) == 0.0)


def test_before_any_label_the_exact_map_passes_a_sure_score_through_unchanged():
    cal = PAVCalibrator(finite_proba=False)
    assert cal.predict_proba([0.0, 1.0, 0.3]).tolist() == [0.0, 1.0, 0.3]
    assert cal.predict_proba_one({"s": 0.0})[True] == 0.0


@pytest.mark.parametrize("name", list(DEFAULT_STREAMING))
def test_prequential_from_an_empty_state_serves_no_zero_or_one_for_sure_scores(name):
    s = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    y = np.array([0, 1, 0, 1, 1])
    p, llr = DEFAULT_STREAMING[name]().prequential(s, y)
    assert np.all((p > 0.0) & (p < 1.0))
    assert np.all(np.isfinite(llr))
