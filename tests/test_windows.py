"""Windows: the histogram holds exactly the window's events (count, time, decay, unbounded)."""

from __future__ import annotations

import numpy as np
import pytest
from naive import naive_window_histogram

from streamcal.buckets import UniformGrid
from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

B = 8


@pytest.fixture
def stream(rng):
    n = 3000
    s = rng.uniform(size=n)
    y = (rng.uniform(size=n) < s).astype(float)
    w = rng.choice([0.25, 0.5, 1.0, 2.0], size=n)  # dyadic: the sums are exact
    t = np.cumsum(rng.exponential(size=n))
    return s, y, w, t


def _hist(cal):
    _, pos, neg = cal.histogram()
    return pos, neg


def test_unbounded_keeps_everything(stream):
    s, y, w, _ = stream
    cal = PAVCalibrator(buckets=UniformGrid(B), window=Unbounded()).update(s, y, weights=w)
    b = UniformGrid(B).index(s)
    for got, exp in zip(_hist(cal), naive_window_histogram(b, y, w, B)):
        np.testing.assert_array_equal(got, exp)
    assert cal.window_weight == w.sum()


@pytest.mark.parametrize("n", [1, 10, 1000])
def test_count_window_holds_the_last_n_events(stream, n):
    s, y, w, _ = stream
    b = UniformGrid(B).index(s)
    for stop in (5, 1500, 3000):
        cal = PAVCalibrator(buckets=UniformGrid(B), window=CountWindow(n)).update(s[:stop], y[:stop], weights=w[:stop])
        lo = max(0, stop - n)
        for got, exp in zip(_hist(cal), naive_window_histogram(b[lo:stop], y[lo:stop], w[lo:stop], B)):
            np.testing.assert_array_equal(got, exp)
        assert cal.window_weight == w[lo:stop].sum()


def test_count_window_leaves_no_residue_with_inexact_weights(rng):
    cal = PAVCalibrator(buckets=UniformGrid(B), window=CountWindow(50))
    cal.update(rng.uniform(0, 0.5, size=500), rng.uniform(size=500) < 0.5, weights=rng.uniform(0.1, 0.9, size=500))
    cal.update(rng.uniform(0.5, 1.0, size=50), np.ones(50))
    pos, neg = _hist(cal)
    assert (pos[: B // 2] == 0.0).all()
    assert (neg == 0.0).all()
    assert cal.window_weight == 50.0


def test_time_window_holds_events_within_the_span(stream):
    s, y, w, t = stream
    b = UniformGrid(B).index(s)
    cal = PAVCalibrator(buckets=UniformGrid(B), window=TimeWindow(seconds=40.0))
    cal.update(s[:0], y[:0], times=t[:0])  # an empty update is allowed
    cal.update(s, y, weights=w, times=t)
    keep = t[-1] - t < 40.0
    for got, exp in zip(_hist(cal), naive_window_histogram(b[keep], y[keep], w[keep], B)):
        np.testing.assert_array_equal(got, exp)


def test_time_window_rejects_time_going_backwards():
    cal = PAVCalibrator(window=TimeWindow(10.0)).update([0.5], [1], times=[5.0])
    with pytest.raises(ValueError, match="must not go backwards"):
        cal.learn_one({"s": 0.5}, True, t=4.0)
    cal.learn_one({"s": 0.5}, True, t=5.0)  # equal times are fine
    assert cal.window_weight == 2.0


@pytest.mark.parametrize("half_life", [0.3, 7.0, 500.0])
def test_decay_by_events_weights_each_event_by_its_age(stream, half_life):
    s, y, w, _ = stream
    b = UniformGrid(B).index(s)
    cal = PAVCalibrator(buckets=UniformGrid(B), window=Decay(half_life)).update(s, y, weights=w)
    age = np.arange(len(s))[::-1]
    exp = naive_window_histogram(b, y, w * 2.0 ** (-age / half_life), B)
    for got, e in zip(_hist(cal), exp):
        np.testing.assert_allclose(got, e, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(cal.window_weight, (w * 2.0 ** (-age / half_life)).sum(), rtol=1e-12)


def test_decay_by_time(stream):
    s, y, w, t = stream
    b = UniformGrid(B).index(s)
    cal = PAVCalibrator(buckets=UniformGrid(B), window=Decay(5.0, by="time")).update(s, y, weights=w, times=t)
    exp = naive_window_histogram(b, y, w * 2.0 ** (-(t[-1] - t) / 5.0), B)
    for got, e in zip(_hist(cal), exp):
        np.testing.assert_allclose(got, e, rtol=1e-12, atol=1e-300)


def test_window_parameters_are_validated():
    bad_windows = (
        lambda: CountWindow(0),
        lambda: CountWindow(2.5),
        lambda: TimeWindow(0.0),
        lambda: Decay(-1.0),
        lambda: Decay(1e-20),
        lambda: Decay(1.0, by="weeks"),
    )
    for bad in bad_windows:  # refused when the window is built, before any calibrator holds it
        with pytest.raises((ValueError, TypeError), match=r"`(n|seconds|half_life|by)` must"):
            bad()
    assert repr(Decay(3.0)) == repr(Decay(3.0).clone())
