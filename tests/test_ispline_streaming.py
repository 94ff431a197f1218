"""ISplineCalibrator as a streaming calibrator: river face, array face, windows, refit policy."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from river_cases import assert_array_face_equals_river_loop, assert_monotone_on_unit_grid

from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.spline import fit_ispline, fit_ispline_on_histogram
from streamcal.spline.calibrator import ISplineCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow


def snapshot(cal):
    """Every learned attribute, pickled: equal snapshots mean equal state."""
    return pickle.dumps({k: v for k, v in sorted(cal.__getstate__().items()) if k.startswith("_")})




CALIBRATORS = [
    lambda: ISplineCalibrator(window=CountWindow(80)),
    lambda: ISplineCalibrator(buckets=LogitGrid(64), window=TimeWindow(20.0), refit_every=7),
    lambda: ISplineCalibrator(buckets=UniformGrid(32), window=Decay(5.0), order=1, n_knots=2, refit_every=1),
    lambda: ISplineCalibrator(buckets=QuantileEdges(n_buckets=16, warmup=40), window=Decay(3.0, by="time"), refit_every=25),
]


@pytest.mark.parametrize("make", CALIBRATORS)
def test_prequential_and_process_equal_a_loop_of_river_methods(make, rng):
    assert_array_face_equals_river_loop(make, rng, 300, snapshot)


def test_refit_every_k_keeps_the_map_between_refits(rng):
    cal = ISplineCalibrator(buckets=UniformGrid(50), refit_every=100, n_knots=2)
    s = rng.uniform(size=250)
    y = rng.uniform(size=250) < s
    cal.update(s[:100], y[:100])
    coef = cal.coef_
    cal.update(s[100:199], y[100:199])
    np.testing.assert_array_equal(cal.coef_, coef)  # 99 labels since the refit: no refit yet
    cal.update(s[199:200], y[199:200])
    assert not np.array_equal(cal.coef_, coef)


def test_streaming_map_is_the_histogram_fit(rng):
    cal = ISplineCalibrator(buckets=UniformGrid(40), window=CountWindow(500))
    s = rng.uniform(size=1500)
    cal.update(s, rng.uniform(size=1500) < s**2)
    grid = np.linspace(0, 1, 101)
    proba = cal.predict_proba(grid)  # lazy refit happens here
    centres, pos, neg = cal.histogram()
    ref = fit_ispline_on_histogram(centres, pos, neg)
    np.testing.assert_array_equal(cal.coef_, ref.coef)
    total = float(pos.sum() + neg.sum())  # served within the add-one bounds of the window (c = 1)
    np.testing.assert_array_equal(proba, np.clip(ref.predict(grid), 1 / (total + 2), (total + 1) / (total + 2)))
    assert ref.predict(grid)[0] == 0.0  # the bound is reached here
    assert proba[0] == 1 / (total + 2)


def test_one_bucket_per_distinct_score_equals_batch_fit_on_raw_events(rng):
    values = np.sort(rng.choice(np.linspace(0.01, 0.99, 99), size=40, replace=False))
    s = rng.choice(values, size=3000)
    y = rng.uniform(size=s.size) < s
    mids = 0.5 * (values[1:] + values[:-1])
    edges = np.concatenate(([0.0], mids, [1.0]))
    cal = ISplineCalibrator(buckets=Edges(edges=tuple(edges), centres=tuple(values)))
    cal.update(s, y)
    raw = fit_ispline(s, y)
    grid = np.linspace(0, 1, 57)
    np.testing.assert_array_equal(cal.predict_proba(grid[:1]).shape, (1,))
    np.testing.assert_array_equal(cal.knots_, raw.knots)
    np.testing.assert_allclose(cal.coef_, raw.coef, atol=1e-12)
    np.testing.assert_allclose(cal.predict_proba(grid), raw.predict(grid), atol=1e-12)


def test_batch_fit_then_stream_continues(rng):
    s = rng.uniform(size=600)
    y = rng.uniform(size=600) < s
    cal = ISplineCalibrator(buckets=UniformGrid(30)).fit(s[:400], y[:400])
    np.testing.assert_array_equal(cal.coef_, fit_ispline(s[:400], y[:400]).coef)  # exact, unbucketed
    assert cal.window_weight == 400.0
    cal.update(s[400:], y[400:])
    assert cal.window_weight == 600.0
    cal.predict_proba([0.5])
    centres, pos, neg = cal.histogram()
    np.testing.assert_array_equal(cal.coef_, fit_ispline_on_histogram(centres, pos, neg).coef)


def test_batch_fit_does_not_refit_while_loading_the_window(rng, monkeypatch):
    calls = []
    original = ISplineCalibrator._refit_from_histogram

    def counting(self, *args):
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(ISplineCalibrator, "_refit_from_histogram", counting)
    s = rng.uniform(size=1000)
    y = rng.uniform(size=1000) < s
    cal = ISplineCalibrator(refit_every=10).fit(s, y)
    assert calls == []
    assert not hasattr(cal, "_loading")
    cal.update(s[:10], y[:10])
    assert calls == [1]


def test_batch_fit_with_time_window_and_quantile_edges(rng):
    s = rng.uniform(size=300)
    y = rng.uniform(size=300) < s
    cal = ISplineCalibrator(window=TimeWindow(50.0))
    with pytest.raises(ValueError, match="needs event times"):
        cal.fit(s, y)
    cal.fit(s, y, times=np.arange(300.0))
    assert cal.window_weight == 50.0  # the window keeps the last 50 s; the map used all 300 events
    np.testing.assert_array_equal(cal.coef_, fit_ispline(s, y).coef)
    quantile = ISplineCalibrator(buckets=QuantileEdges(n_buckets=16, warmup=500))
    before = snapshot(quantile)
    with pytest.raises(ValueError, match=r"at least the bucket warm-up \(500 events\)"):
        quantile.fit(s, y)
    assert snapshot(quantile) == before
    quantile.fit(np.tile(s, 2), np.tile(y, 2))
    assert quantile.n_buckets == 16


def test_monotone_in_unit_interval_finite_llr(rng):
    cal = ISplineCalibrator(window=CountWindow(3000))
    s = rng.uniform(size=5000)
    cal.update(s, rng.uniform(size=5000) < s**3)
    assert_monotone_on_unit_grid(cal)


def test_before_any_label_identity_for_probabilities_else_half():
    assert ISplineCalibrator().predict_proba_one({"s": 0.2})[True] == 0.2
    assert ISplineCalibrator(buckets=UniformGrid(10)).predict_proba([0.2]).tolist() == [0.5]
    assert ISplineCalibrator().predict_llr_one({"s": 0.2}) == 0.0


def test_river_methods_return_python_types(rng):
    cal = ISplineCalibrator()
    s = rng.uniform(size=200)
    cal.update(s, rng.uniform(size=200) < s)
    proba = cal.predict_proba_one({"s": 0.3})
    assert all(type(v) is float for v in proba.values())
    assert type(cal.predict_one({"s": 0.3})) is bool
    assert type(cal.predict_llr_one({"s": 0.3})) is float


def test_bounded_state(rng):
    def state_size(n):
        cal = ISplineCalibrator(window=CountWindow(1000), refit_every=500, n_knots=3)
        s = rng.uniform(size=n)
        cal.prequential(s, rng.uniform(size=n) < s)
        return len(pickle.dumps(cal))

    assert state_size(10_000) == state_size(100_000)


def test_pickle_clone_and_deepcopy_keep_predictions(rng):
    cal = ISplineCalibrator(window=CountWindow(400), refit_every=50)
    s = rng.uniform(size=500)
    cal.update(s, rng.uniform(size=500) < s)
    grid = np.linspace(0, 1, 11)
    for other in (pickle.loads(pickle.dumps(cal)), copy.deepcopy(cal)):
        np.testing.assert_array_equal(other.predict_proba(grid), cal.predict_proba(grid))
    fresh = cal.clone()
    assert fresh.window_weight == 0.0
    assert fresh.refit_every == 50


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda c: c.learn_one({"s": 0.3}, 2), ValueError, r"`y` must be a binary label"),
        (lambda c: c.learn_one({"s": float("nan")}, 1), ValueError, r"must be finite"),
        (lambda c: c.learn_one({"s": 1.5}, 1), ValueError, r"must hold probabilities in \[0, 1\]"),
        (lambda c: c.learn_one({"s": 0.3}, 1, w=-1.0), ValueError, r"`w` must be finite and non-negative"),
        (lambda c: c.update([0.1, np.nan], [0, 1]), ValueError, r"`scores` must be finite"),
        (lambda c: c.update([0.1, 0.2], [0, 3]), ValueError, r"`labels` must hold binary labels"),
        (lambda c: c.prequential([0.1, 0.2], [0]), ValueError, r"`labels` must have the same length"),
        (lambda c: c.fit([0.1, 0.2], [0, 1], [1.0, -1.0]), ValueError, r"`sample_weight` must be finite"),
        (lambda c: c.fit([], []), ValueError, r"`scores` must not be empty"),
        (lambda c: c.fit([0.1, 2.0], [0, 1]), ValueError, r"must hold probabilities in \[0, 1\]"),
        (lambda c: c.predict_proba([0.1, np.inf]), ValueError, r"`scores` must be finite"),
    ],
)
def test_bad_input_raises_and_keeps_state(call, error, match, rng):
    cal = ISplineCalibrator(window=CountWindow(100), refit_every=10)
    s = rng.uniform(size=150)
    cal.update(s, rng.uniform(size=150) < s)
    before = snapshot(cal)
    with pytest.raises(error, match=match):
        call(cal)
    assert snapshot(cal) == before


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"order": 0}, ValueError, r"`order` must be an int in \[1, inf\); got 0"),
        ({"n_knots": -2}, ValueError, r"`n_knots` must be an int in \[0, inf\); got -2"),
        ({"knots": (0.5, 0.1)}, ValueError, r"`knots` must be strictly increasing"),
        ({"refit_every": 0}, ValueError, r"`refit_every` must be an int in \[1, inf\); got 0"),
        ({"llr_pseudo_count": 0.0}, ValueError, r"`llr_pseudo_count`"),
    ],
)
def test_bad_parameters_rejected_at_construction(params, error, match):
    with pytest.raises(error, match=match):
        ISplineCalibrator(**params)


def test_inputs_are_not_mutated(rng):
    s = rng.uniform(size=500)
    y = rng.uniform(size=500) < s
    w = rng.uniform(0.5, 2.0, 500)
    mask = rng.uniform(size=500) < 0.5
    copies = [a.copy() for a in (s, y, w, mask)]
    cal = ISplineCalibrator(refit_every=50)
    cal.fit(s, y, w)
    cal.update(s, y, weights=w)
    cal.prequential(s, y, weights=w)
    cal.process(s, y, mask, weights=w)
    cal.predict_proba(s)
    cal.predict_llr(s)
    for original, kept in zip((s, y, w, mask), copies, strict=True):
        np.testing.assert_array_equal(original, kept)
