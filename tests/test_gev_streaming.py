"""Streaming GEV-canonical learner: convergence to batch, frames, bad input (river checks: test_estimators.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from streamcal import GEVCanonicalRegression
from streamcal.gev import GEVCanonicalClassifier, gev_cdf


def stream(rng, n, coef, intercept, xi, names=None):
    k = len(coef)
    X = rng.normal(size=(n, k))
    y = rng.random(n) < gev_cdf(X @ np.asarray(coef) + intercept, xi)
    cols = names or [f"x{j}" for j in range(k)]
    return pd.DataFrame(X, columns=cols), pd.Series(y)


TRUTH = ([0.5, -0.4, 0.3], -1.5)


@pytest.fixture(scope="module")
def long_stream():
    return stream(np.random.default_rng(3), 120_000, *TRUTH, xi=0.3)


def test_stationary_stream_converges_to_the_batch_solution(long_stream):
    X, y = long_stream
    gaps = []
    for n in (12_000, 120_000):
        model = GEVCanonicalClassifier(xis=(0.3,), l2=1e-6, batch_size=2_000)
        model.learn_many(X.iloc[:n], y.iloc[:n])
        batch = GEVCanonicalRegression(xi=0.3, l2=1e-6).fit(X.iloc[:n], y.iloc[:n])
        streamed = np.r_[list(model.coef_.values()), model.intercept_]
        gaps.append(np.max(np.abs(streamed - np.r_[batch.coef_, batch.intercept_])))
    assert gaps[1] < gaps[0]
    assert gaps[1] < 0.01


def test_best_xi_serves(long_stream):
    X, y = long_stream
    model = GEVCanonicalClassifier(xis=(-0.5, 0.3, 1.5), batch_size=4_000)
    model.learn_many(X, y)
    scores = model.prequential_brier_
    assert model.xi_ == min(scores, key=scores.get) == 0.3


def test_learn_many_equals_a_learn_one_loop():
    X, y = stream(np.random.default_rng(5), 300, *TRUTH, xi=0.0)
    one = GEVCanonicalClassifier(batch_size=64, xis=(0.0, 0.5))
    many = GEVCanonicalClassifier(batch_size=64, xis=(0.0, 0.5))
    for x, label in zip(X.to_dict(orient="records"), y, strict=True):
        one.learn_one(x, label)
    for start in (0, 50, 170):
        stop = {0: 50, 50: 170, 170: 300}[start]
        many.learn_many(X.iloc[start:stop], y.iloc[start:stop])
    np.testing.assert_array_equal(one._beta, many._beta)
    np.testing.assert_array_equal(one._A, many._A)
    assert one._buffered == many._buffered == 300 % 64


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow", "numpy"])
def test_frames_of_every_kind_give_the_same_model(kind):
    X, y = stream(np.random.default_rng(6), 1_000, *TRUTH, xi=0.2)
    reference = GEVCanonicalClassifier(batch_size=250)
    reference.learn_many(X, y)
    if kind == "pandas":
        Xk, yk = X, y
    elif kind == "polars":
        Xk, yk = pl.from_pandas(X), pl.Series(y.to_numpy())
    elif kind == "pyarrow":
        Xk, yk = pa.Table.from_pandas(X), pa.array(y.to_numpy())
    else:
        Xk, yk = X.to_numpy(), y.to_numpy()
    model = GEVCanonicalClassifier(batch_size=250)
    model.learn_many(Xk, yk)
    if kind == "numpy":  # unnamed columns are numbered
        assert list(model.coef_) == [0, 1, 2]
        np.testing.assert_allclose(list(model.coef_.values()), list(reference.coef_.values()))
    else:
        assert model.coef_ == reference.coef_
        proba = model.predict_proba_many(Xk)
        assert list(proba.columns) == [False, True]
        np.testing.assert_allclose(proba[True], reference.predict_proba_many(X)[True])


def test_predict_proba_many_keeps_the_index_and_matches_predict_proba_one():
    X, y = stream(np.random.default_rng(8), 600, *TRUTH, xi=0.0)
    model = GEVCanonicalClassifier(batch_size=100)
    model.learn_many(X, y)
    Xi = X.iloc[:5].set_index(pd.Index(list("abcde")))
    proba = model.predict_proba_many(Xi)
    assert list(proba.index) == list("abcde")
    for (_, row), p in zip(Xi.iterrows(), proba[True], strict=True):
        assert model.predict_proba_one(row.to_dict())[True] == pytest.approx(p, rel=1e-12)


def test_forgetting_tracks_a_drifting_base_rate():
    rng = np.random.default_rng(9)
    X1, y1 = stream(rng, 40_000, [0.5, -0.5], -2.0, xi=0.0)
    X2, y2 = stream(rng, 20_000, [0.5, -0.5], -1.0, xi=0.0)
    forgetful = GEVCanonicalClassifier(xis=(0.0,), batch_size=1_000, half_life=3_000.0)
    steady = GEVCanonicalClassifier(xis=(0.0,), batch_size=1_000)
    for model in (forgetful, steady):
        model.learn_many(X1, y1)
        model.learn_many(X2, y2)
    assert abs(forgetful.intercept_ + 1.0) < 0.1
    assert abs(forgetful.intercept_ + 1.0) < abs(steady.intercept_ + 1.0)


def test_state_is_bounded():
    rng = np.random.default_rng(10)
    model = GEVCanonicalClassifier(batch_size=500)
    X, y = stream(rng, 10_000, *TRUTH, xi=0.0)
    model.learn_many(X, y)
    size_small = _state_size(model)
    for _ in range(9):
        X, y = stream(rng, 10_000, *TRUTH, xi=0.0)
        model.learn_many(X, y)
    assert _state_size(model) == size_small


def _state_size(model):
    arrays = sum(v.nbytes for v in vars(model).values() if isinstance(v, np.ndarray))
    return arrays, len(model._buffer), len(model.coef_)  # the coefficients: one per feature name


def test_new_features_join_with_zero_coefficients():
    model = GEVCanonicalClassifier(batch_size=2, xis=(0.0,))
    model.learn_one({"a": 1.0}, True)
    model.learn_one({"a": -1.0}, False)
    model.learn_one({"b": 2.0}, True)
    model.learn_one({"a": 0.5, "b": -1.0}, False)
    assert set(model.coef_) == {"a", "b"}
    assert model.predict_proba_one({"zzz": 3.0})[True] == pytest.approx(
        model.predict_proba_one({})[True])


def _snapshot(model):
    return pickle.dumps(model)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m.learn_one({"x0": float("nan")}, True), r"`x` must be finite"),
        (lambda m: m.learn_one({"x0": "a"}, True), r"`x` must map feature names to numbers"),
        (lambda m: m.learn_one({"x0": 1.0}, 2), r"`y` must be a binary label"),
        (lambda m: m.learn_many(pd.DataFrame({"x0": [1.0, np.nan]}), pd.Series([True, False])),
         r"`X` must be finite; got nan at row 1, column 'x0'"),
        (lambda m: m.learn_many(pd.DataFrame({"x0": [1.0, 2.0]}), pd.Series([1, 3])),
         r"`y` must hold binary labels"),
        (lambda m: m.learn_many(pd.DataFrame({"x0": [1.0, 2.0]}), pd.Series([1])),
         r"one label per row"),
        (lambda m: m.learn_many(pd.DataFrame({"x0": ["a", "b"]}), pd.Series([1, 0])),
         r"`X\['x0'\]` must hold real numbers only"),
        (lambda m: m.learn_many(np.ones(3), [1, 0, 1]), r"`X` must be 2-d"),
    ],
)
def test_bad_input_is_rejected_and_state_is_unchanged(call, match):
    X, y = stream(np.random.default_rng(12), 230, *TRUTH, xi=0.0)
    model = GEVCanonicalClassifier(batch_size=100)
    model.learn_many(X, y)  # leaves 30 rows buffered
    before = _snapshot(model)
    with pytest.raises((ValueError, TypeError), match=match):
        call(model)
    assert _snapshot(model) == before


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"`batch_size` must be an int in \[1"):
        GEVCanonicalClassifier(batch_size=0)
    with pytest.raises(ValueError, match=r"`xis` must be a non-empty tuple"):
        GEVCanonicalClassifier(xis=())
    with pytest.raises(ValueError, match=r"`half_life`"):
        GEVCanonicalClassifier(half_life=-1.0)


def test_pickle_and_clone_round_trips_and_inputs_not_mutated():
    X, y = stream(np.random.default_rng(13), 700, *TRUTH, xi=0.25)
    X_before, y_before = X.copy(), y.copy()
    model = GEVCanonicalClassifier(batch_size=128)
    model.learn_many(X, y)
    pd.testing.assert_frame_equal(X, X_before)
    pd.testing.assert_series_equal(y, y_before)
    restored = pickle.loads(pickle.dumps(model))
    pd.testing.assert_frame_equal(restored.predict_proba_many(X), model.predict_proba_many(X))
    restored.learn_many(X, y)
    model.learn_many(X, y)
    # the same fits after more learning: the same predictions, coefficients and shape scores
    pd.testing.assert_frame_equal(restored.predict_proba_many(X), model.predict_proba_many(X))
    assert restored.coef_ == model.coef_
    assert restored.intercept_ == model.intercept_
    assert restored.prequential_brier_ == model.prequential_brier_
    fresh = model.clone()
    assert fresh.predict_proba_one({"x0": 1.0})[True] == pytest.approx(np.exp(-1.0))
