"""The compiled per-event loop of ISplineCalibrator's lazy refit (streamcal._kernels.ispline_stream)
against the refit engine's own loop (the full refit, score prior included, before every prediction
that follows new labels). The loop's full refit (``_STREAM_INCREMENTAL = False``) equals the engine
bit for bit, probabilities and LLRs, on every window kind, with and without the score prior
(streams where its strength is 0 and where it is not), interleaved labels and predictions, and on
the river face; the default incremental refit agrees with the engine within 1e-9 on every
prediction (tests/test_ispline_incremental.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ispline_loops import EngineLoop, FullRefitLoop, calls_then_whole

from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("window", [Unbounded(), CountWindow(60), Decay(40.0), TimeWindow(50.0)])
@pytest.mark.parametrize("prior", ["auto", None])
def test_stream_loop_matches_the_engine_on_every_event(seed, window, prior):
    rng = np.random.default_rng(seed)
    n = 400
    z = rng.normal(-0.5, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    shift = np.where(np.arange(n) < n // 2, 2.0, 0.3)  # the relation changes: the free set moves
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-shift * z))
    weights = rng.choice([0.0, 0.5, 1.0, 2.5], n) if seed % 2 else np.ones(n)
    times = np.cumsum(rng.uniform(0.0, 1.0, n))
    kw = {"buckets": LogitGrid(64), "window": window, "prior": prior}
    new = FullRefitLoop(**kw).prequential(scores, labels, weights=weights, times=times)
    old = EngineLoop(**kw).prequential(scores, labels, weights=weights, times=times)
    np.testing.assert_array_equal(new[0], old[0])  # the same refits, to the last bit
    np.testing.assert_array_equal(new[1], old[1])


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(60), Decay(40.0)])
@pytest.mark.parametrize("prior", ["auto", None])
def test_prequential_equals_the_river_face_loop(window, prior):
    rng = np.random.default_rng(7)
    n = 300
    scores = 1 / (1 + np.exp(-rng.normal(-0.5, 1.5, n)))
    labels = rng.uniform(size=n) < scores**1.4
    kw = {"buckets": LogitGrid(64), "window": window, "prior": prior}
    proba, _ = FullRefitLoop(**kw).prequential(scores, labels)
    river = FullRefitLoop(**kw)
    loop = np.empty(n)
    for i in range(n):
        loop[i] = river.predict_proba_one({"s": float(scores[i])})[True]
        river.learn_one({"s": float(scores[i])}, bool(labels[i]))
    np.testing.assert_array_equal(proba, loop)


def test_stream_loop_runs_on_a_long_stream_with_the_prior_certified_zero():
    # a stream whose score is far off: the prior's strength is 0 and the loop serves the events
    rng = np.random.default_rng(3)
    n = 3000
    scores = 1 / (1 + np.exp(-rng.normal(-1.0, 1.5, n)))
    labels = rng.uniform(size=n) < scores**3
    cal = FullRefitLoop(buckets=LogitGrid(256))
    new = cal.prequential(scores, labels)
    old = EngineLoop(buckets=LogitGrid(256)).prequential(scores, labels)
    np.testing.assert_array_equal(new[0], old[0])
    np.testing.assert_array_equal(new[1], old[1])
    assert cal._stream is not None  # the loop ran (its state is kept)
    assert cal.prior_strength == 0.0


@st.composite
def streams(draw):
    n = draw(st.integers(5, 250))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    z = rng.normal(draw(st.floats(-3.0, 1.0)), draw(st.floats(0.2, 3.0)), n)
    scores = 1 / (1 + np.exp(-z))
    slope = draw(st.sampled_from([1.0, 1.3, 3.0]))  # 1.0: the score is right, the prior holds
    truth = np.where(np.arange(n) < draw(st.integers(0, n)), 1 / (1 + np.exp(-slope * z)), 0.3 + 0.1 * np.tanh(z))
    labels = rng.uniform(size=n) < truth
    weights = rng.choice([0.0, 0.4, 1.0, 1.0, 2.5], n) if draw(st.booleans()) else np.ones(n)
    times = np.cumsum(rng.uniform(0.0, 2.0, n))
    window = draw(st.sampled_from([Unbounded(), CountWindow(9), CountWindow(80), Decay(8.0), TimeWindow(30.0)]))
    spline = draw(st.sampled_from([{}, {"n_knots": 3}, {"order": 1, "n_knots": 5}, {"knots": (0.2, 0.5, 0.8)}]))
    prior = draw(st.sampled_from(["auto", None]))
    ops = rng.choice([1, 2, 3, 3, 3], n)  # labels, predictions and prequential events interleaved
    return scores, labels, weights, times, window, spline, prior, ops


@settings(max_examples=60, deadline=None)
@given(streams())
def test_process_equals_the_engine_bit_for_bit_on_random_streams(stream):
    scores, labels, weights, times, window, spline, prior, ops = stream
    kw = {"buckets": LogitGrid(32), "window": window, "prior": prior, **spline}
    outs = [calls_then_whole(cls, kw, (scores, labels, weights, times, ops)) for cls in (FullRefitLoop, EngineLoop)]
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1][0], outs[1][1][0])
    np.testing.assert_array_equal(outs[0][1][1], outs[1][1][1])
