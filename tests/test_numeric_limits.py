"""Numeric limits (docs/limits.md): extreme magnitudes are handled or rejected up front.

Accepted input never yields a NaN or infinite probability, nor an infinite LLR where a finite one
is promised. Input beyond the documented limits is rejected with a ValueError naming the
argument, the value (and its position) and the limit, and the learner's saved state stays byte
for byte what it was.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator, persist
from streamcal._kernels.histogram import MAX_WEIGHT
from streamcal.buckets import LogitGrid, UniformGrid
from streamcal.isotonic import IsotonicCalibrator, pav, pav_binary, pav_llr
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

GRID = np.linspace(0.0, 1.0, 41)


def assert_finite_outputs(cal, grid=GRID):
    p = cal.predict_proba(grid)
    llr = cal.predict_llr(grid)
    assert np.all((p >= 0.0) & (p <= 1.0)), p
    assert np.all(np.isfinite(llr)), llr
    for s in grid[::8].tolist():
        one = cal.predict_proba_one({"s": s})[True]
        assert 0.0 <= one <= 1.0
        assert math.isfinite(cal.predict_llr_one({"s": s}))
    assert math.isfinite(cal.window_weight)


def assert_rejected_unchanged(cal, call, match):
    before = persist.to_bytes(cal)
    with pytest.raises(ValueError, match=match):
        call()
    assert persist.to_bytes(cal) == before


# ---------------------------------------------------------------------------------------- the reported cases
def test_decay_by_time_survives_a_time_jump_of_1e19():
    cal = PAVCalibrator(window=Decay(1.0, by="time"))
    cal.learn_one({"s": 0.3}, True, t=0.0)
    cal.learn_one({"s": 0.7}, False, w=2.0, t=1e19)  # 1e19 half-lives later: the positive is forgotten
    assert cal.window_weight == 2.0
    assert cal.n_learned == 2
    assert_finite_outputs(cal)
    cal.update([0.2, 0.4], [1, 0], times=[1e19, 1e19])  # and learning goes on in the new frame
    assert cal.window_weight == 4.0
    assert_finite_outputs(cal)
    later = float(np.nextafter(1e19, np.inf))  # 2048 half-lives later (the next double)
    cal.learn_one({"s": 0.5}, True, w=3.0, t=later)
    assert cal.window_weight == 3.0
    assert_finite_outputs(cal)


@pytest.mark.parametrize(("half_life", "by"), [(1.0, "time"), (1e-9, "time"), (1e-9, "events")])
@pytest.mark.parametrize("jump", [1e19, 1e300, 5e-324])
def test_decay_clock_jumps_of_any_size(half_life, by, jump):
    cal = PAVCalibrator(buckets=LogitGrid(32), window=Decay(half_life, by=by))
    times = [0.0, jump, jump, 2 * jump] if by == "time" else None
    cal.update([0.3, 0.6, 0.5, 0.4], [1, 0, 1, 0], times=times)
    assert cal.n_learned == 4
    assert 0.0 < cal.window_weight <= 4.0
    assert_finite_outputs(cal)


@pytest.mark.parametrize("half_life", [1e-19, 1e-20, 0.0, -1.0, 1e19, 1e300, math.inf, math.nan])
def test_absurd_half_lives_are_rejected_naming_the_limit(half_life):
    with pytest.raises(ValueError, match=r"`half_life` must be (a number in \[1e-09, 1e\+18\]|finite)"):
        PAVCalibrator(window=Decay(half_life))
    for cls in (ISplineCalibrator, GEVCalibrator, PlattCalibrator):
        with pytest.raises(ValueError, match="`half_life`"):
            cls(window=Decay(half_life, by="time"))


@pytest.mark.parametrize("half_life", [Decay.MIN_HALF_LIFE, Decay.MAX_HALF_LIFE])
def test_the_half_life_limits_themselves_are_accepted(half_life):
    cal = PAVCalibrator(window=Decay(half_life)).update([0.2, 0.8, 0.5], [0, 1, 1])
    assert_finite_outputs(cal)


def test_merging_decay_by_time_parts_1e300_apart():
    a = PAVCalibrator(window=Decay(1.0, by="time")).update([0.3, 0.4], [1, 0], times=[0.0, 1.0])
    b = PAVCalibrator(window=Decay(1.0, by="time")).update([0.6, 0.7], [0, 1], times=[1e300, 1e300])
    for merged in (a.merge(b), b.merge(a)):
        assert merged.n_learned == 4
        assert merged.window_weight == b.window_weight == 2.0  # a's events decayed to nothing
        np.testing.assert_array_equal(merged.predict_proba(GRID), b.predict_proba(GRID))
        assert_finite_outputs(merged)


@pytest.mark.parametrize(
    ("decay", "message"),
    [
        # a half-life in events must be a whole number: 1e-20 events is refused by the parser
        ("1e-20", "--decay = '1e-20' is not a whole number of events"),
        # a duration below the documented limit is refused by Decay itself
        ("1e-20s", "`half_life` must be a number in [1e-09, 1e+18]; got 1e-20"),
    ],
)
def test_cli_decay_1e_minus_20_is_a_one_line_error(tmp_path, decay, message):
    from streamcal.replay.generate import generate

    data = tmp_path / "f.parquet"
    generate(data, "click", n=500, seed=1)
    result = subprocess.run(
        [sys.executable, "-m", "streamcal.cli", "replay", str(data), "--decay", decay, "--no-output", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert message in lines[0]


@pytest.mark.parametrize("weight", [1e308, 1e101, 1.0000000000000002e100])
def test_weights_above_the_limit_are_rejected_with_position_and_state_kept(weight):
    cal = PAVCalibrator(window=CountWindow(50)).update([0.2, 0.7], [0, 1])
    limit = r"must be at most 1e\+100 \(the largest weight of one event\)"
    value = re.escape(repr(weight))
    assert_rejected_unchanged(cal, lambda: cal.learn_one({"s": 0.5}, True, w=weight), rf"`w` {limit}; got {value}\.")
    weights = [1.0, weight, 1.0]
    at = rf"`weights` {limit}; got {value} at position 1\."
    for call in (
        lambda: cal.update([0.1, 0.5, 0.9], [0, 1, 1], weights=weights),
        lambda: cal.prequential([0.1, 0.5, 0.9], [0, 1, 1], weights=weights),
        lambda: cal.process([0.1, 0.5, 0.9], [0, 1, 1], [True, True, True], weights=weights),
    ):
        assert_rejected_unchanged(cal, call, at)
    # a weight at a predict-only position is ignored, as any other
    cal.process([0.1, 0.5], [0, 1], [True, False], weights=[1.0, weight])
    for cls in (ISplineCalibrator, PlattCalibrator):
        other = cls().update([0.2, 0.7], [0, 1])
        assert_rejected_unchanged(other, lambda o=other: o.update([0.5], [1], weights=[weight]), "`weights`")
        assert_rejected_unchanged(other, lambda o=other: o.learn_one({"s": 0.5}, True, w=weight), "`w`")


@pytest.mark.parametrize("window", [Unbounded(), Decay(10.0), Decay(0.5), CountWindow(7), Decay(3.0, by="time")])
def test_the_largest_weight_gives_finite_outputs(window):
    n = 60
    s = np.linspace(0.05, 0.95, n)
    y = np.arange(n) % 3 == 0
    times = np.arange(n, dtype=float) if window.uses_times else None
    for make in (PAVCalibrator, lambda **k: ISplineCalibrator(n_knots=2, **k), GEVCalibrator, PlattCalibrator):
        cal = make(window=window).update(s, y, weights=np.full(n, MAX_WEIGHT), times=times)
        assert_finite_outputs(cal)


@pytest.mark.parametrize("window", [Unbounded(), Decay(0.5), Decay(1e6), Decay(Decay.MAX_HALF_LIFE)])
def test_a_long_stream_of_the_largest_weights_stays_finite(window, rng):
    n = 20_000
    s = rng.uniform(size=n)
    y = rng.uniform(size=n) < s
    cal = PAVCalibrator(window=window)
    p, llr = cal.prequential(s, y, weights=np.full(n, MAX_WEIGHT))
    assert np.all((p >= 0.0) & (p <= 1.0))
    assert np.all(np.isfinite(llr))
    assert_finite_outputs(cal)
    _, pos, neg = cal.histogram()
    assert np.all(np.isfinite(pos))
    assert np.all(np.isfinite(neg))


def test_a_single_heavy_positive_gives_a_finite_llr():
    for weight in (1e16, 1e17, 1e53, MAX_WEIGHT):
        for make in (PAVCalibrator, ISplineCalibrator, GEVCalibrator, PlattCalibrator):
            cal = make()
            cal.learn_one({"s": 0.5}, True, w=weight)
            assert_finite_outputs(cal)
        cal = PAVCalibrator(finite_proba=True)
        cal.learn_one({"s": 0.5}, True, w=weight)
        assert_finite_outputs(cal)


def test_llr_stays_exact_while_the_weight_is_within_2_53_pseudo_counts():
    """A window holding one block: its LLR is 0 (the block's log-odds are the prior's)."""
    for weight in (1.0, 1e3, 1e10, 1e15):
        cal = PAVCalibrator(prior=None)  # one block: the exact map of the window
        cal.learn_one({"s": 0.5}, True, w=weight)
        assert abs(cal.predict_llr_one({"s": 0.5})) < 1e-6 * max(1.0, weight / 1e10)


@pytest.mark.parametrize("count", [1e308, 5e-324, 1e101, 9e-101, 0.0, -1.0])
def test_pseudo_counts_beyond_the_limits_are_rejected(count):
    for cls in (PAVCalibrator, ISplineCalibrator, GEVCalibrator, PlattCalibrator):
        with pytest.raises(ValueError, match=r"`llr_pseudo_count` must be a number in \[1e-100, 1e\+100\]"):
            cls(llr_pseudo_count=count)


@pytest.mark.parametrize("count", [1e-100, 1e100])
@pytest.mark.parametrize("weight", [5e-324, 1.0, MAX_WEIGHT])
def test_pseudo_counts_at_the_limits_give_finite_llrs(count, weight):
    s = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    y = np.array([0, 0, 1, 0, 1])
    for cls in (PAVCalibrator, ISplineCalibrator, GEVCalibrator, PlattCalibrator):
        cal = cls(llr_pseudo_count=count).update(s, y, weights=np.full(5, weight))
        assert_finite_outputs(cal)


# ---------------------------------------------------------------------------------------- batch PAV
def test_batch_pav_is_scale_free_at_any_magnitude(rng):
    y = rng.normal(size=200)
    w = rng.uniform(0.5, 3.0, size=200)  # scaled by 2**-1020 they stay normal doubles: the same input
    plain = pav(y, w)
    for k in (1000, 1020, -1000, -1020):
        np.testing.assert_array_equal(pav(y, np.ldexp(w, k)), plain)
    for k in (1000, -1000):  # values scale too, exactly
        np.testing.assert_array_equal(pav(np.ldexp(y, k), w), np.ldexp(plain, k))
    np.testing.assert_array_equal(pav([1.0, 0.0], [1e308, 1e308]), [0.5, 0.5])
    np.testing.assert_array_equal(pav([1e308, -1e308, 1e308], [1e308, 1e308, 1.0]), [0.0, 0.0, 1e308])
    np.testing.assert_array_equal(pav([3.0, 1.0], [5e-324, 5e-324]), [2.0, 2.0])


def test_batch_pav_llr_and_isotonic_calibrator_with_the_largest_doubles(rng):
    s = rng.uniform(size=300)
    y = rng.uniform(size=300) < s
    w = rng.uniform(0.5, 1.5, size=300)
    exact = pav_llr(s, y, w, finite=False)
    assert np.all(np.isfinite(pav_llr(s, y, w * 1e300)))
    for scale in (1e300, 2.0**1000):
        # the fitted values are those of the scaled weights exactly; the prior's log-odds, a
        # difference of logarithms of the scaled sums, to rounding
        np.testing.assert_allclose(pav_llr(s, y, w * scale, finite=False), exact, rtol=1e-13)
        big = pav_llr(s, y, w * scale)  # the pseudo-counts are negligible: the exact map where it is finite
        finite = np.isfinite(exact)
        np.testing.assert_allclose(big[finite], exact[finite], atol=1e-9)
    np.testing.assert_array_equal(pav_llr([0.1, 0.5], [1, 0], [1e308, 1e308]), [0.0, 0.0])
    cal = IsotonicCalibrator().fit(s, y, w)
    huge = IsotonicCalibrator().fit(s, y, w * 2.0**1020)
    np.testing.assert_array_equal(huge.proba_, cal.proba_)
    assert huge.prior_ == cal.prior_
    for model in (IsotonicCalibrator().fit(s, y, np.full(300, 1e308)), huge):
        assert np.all(np.isfinite(model.predict_proba(GRID)))
        assert np.all(np.isfinite(model.predict_llr(GRID)))
    np.testing.assert_array_equal(pav_binary(s, y, w * 2.0**1020), pav_binary(s, y, w))


def test_batch_llr_of_one_heavy_class_is_finite_and_exact():
    """One positive of weight 1e17 against the pseudo-negative of weight 1: LLR 0 for one block."""
    np.testing.assert_array_equal(pav_llr([0.5], [1], [1e17]), [0.0])
    llr = pav_llr([0.2, 0.5], [0, 1], [1e17, 1e17])
    np.testing.assert_allclose(llr, [-math.log(1e17 + 1.0), math.log(1e17 + 1.0)], rtol=1e-12)
    cal = IsotonicCalibrator().fit([0.2, 0.5], [0, 1], [1e17, 1e17])
    assert np.all(np.isfinite(cal.predict_llr([0.0, 0.2, 0.4, 0.5, 1.0])))


def test_pav_binary_class_weights_are_bounded():
    for bad in (0.0, 1e101, 1e-101):
        with pytest.raises(ValueError, match=r"`positive_weight` must be a number in \[1e-100, 1e\+100\]"):
            pav_binary([0.1, 0.9], [0, 1], positive_weight=bad)
    p = pav_binary([0.1, 0.5], [1, 0], [1e308, 1e308], positive_weight=1e100, negative_weight=1e-100)
    assert np.all(np.isfinite(p))


# ---------------------------------------------------------------------------------------- any magnitude
magnitudes = st.one_of(
    st.just(0.0),
    st.sampled_from([5e-324, 1e-320, 2.2250738585072014e-308, 1e-100, 1.0, 1e16, 1e100, 1e101, 1e300, 1e308]),
    st.builds(lambda m, e: m * 10.0**e, st.floats(1.0, 9.99), st.integers(-323, 307)),
)
half_lives = st.builds(lambda m, e: m * 10.0**e, st.floats(1.0, 9.99), st.integers(-300, 299))
times = st.lists(st.floats(-1e300, 1e300, allow_nan=False), min_size=6, max_size=6).map(sorted)
pseudo_counts = st.one_of(st.just(1.0), half_lives)
windows = st.one_of(
    st.just(Unbounded()),
    st.just(CountWindow(4)),
    st.builds(TimeWindow, st.sampled_from([1e-300, 1.0, 1e300])),
    st.tuples(half_lives, st.sampled_from(["events", "time"])),  # a decay's parameters: built in the test
)
makers = st.sampled_from(
    [
        lambda **k: PAVCalibrator(buckets=UniformGrid(16), **k),
        lambda **k: PAVCalibrator(buckets=LogitGrid(16), interpolation="step", finite_proba=True, **k),
        lambda **k: ISplineCalibrator(buckets=UniformGrid(16), n_knots=2, **k),
        lambda **k: GEVCalibrator(buckets=UniformGrid(16), xi=0.25, **k),
        lambda **k: PlattCalibrator(buckets=UniformGrid(16), **k),
    ]
)


@given(
    make=makers,
    window=windows,
    pseudo=pseudo_counts,
    weights=st.lists(magnitudes, min_size=6, max_size=6),
    t=times,
    labels=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_any_magnitude_is_handled_or_rejected_cleanly(make, window, pseudo, weights, t, labels):
    scores = np.array([0.05, 0.3, 0.5, 0.5, 0.7, 0.95])
    if isinstance(window, tuple):  # a decay window, refused when built with a half-life out of range
        if not Decay.MIN_HALF_LIFE <= window[0] <= Decay.MAX_HALF_LIFE:
            with pytest.raises(ValueError, match=r"`half_life` must be a number in \[1e-09, 1e\+18\]"):
                Decay(*window)
            return
        window = Decay(*window)
    bad = []
    if not 1e-100 <= pseudo <= 1e100:
        bad.append(r"`llr_pseudo_count` must be a number in \[1e-100, 1e\+100\]")
    if bad:  # one of the messages, whichever is checked first
        with pytest.raises(ValueError, match="|".join(bad)):
            make(window=window, llr_pseudo_count=pseudo)
        return
    cal = make(window=window, llr_pseudo_count=pseudo)
    times_arg = np.array(t) if window.uses_times else None
    w = np.array(weights)
    if w.max() > MAX_WEIGHT:
        i = int(np.argmax(w > MAX_WEIGHT))
        assert_rejected_unchanged(
            cal, lambda: cal.update(scores, labels, weights=w, times=times_arg), rf"`weights` .* at position {i}"
        )
        w = np.minimum(w, MAX_WEIGHT)
    # half through the array face, half through the river face
    cal.update(scores[:3], labels[:3], weights=w[:3], times=None if times_arg is None else times_arg[:3])
    for i in range(3, 6):
        kwargs = {"t": float(t[i])} if window.uses_times else {}
        cal.learn_one({"s": float(scores[i])}, labels[i], w=float(w[i]), **kwargs)
    assert cal.n_learned == 6
    assert_finite_outputs(cal, np.linspace(0.0, 1.0, 11))
    p, llr = cal.prequential([0.5], [True], times=None if times_arg is None else [t[-1]])
    assert 0.0 <= p[0] <= 1.0
    assert math.isfinite(llr[0])


@given(
    y=st.lists(st.floats(-1e308, 1e308, allow_nan=False), min_size=1, max_size=8),
    weights=st.lists(magnitudes, min_size=8, max_size=8),
)
def test_batch_pav_never_gives_nan_or_overflow(y, weights):
    w = np.array(weights[: len(y)])
    if not np.isfinite(w).all():
        return
    f = pav(y, w)
    assert np.all(np.isfinite(f))
    assert np.all(np.diff(f) >= 0.0)
    slack = 1e-15 * max(abs(v) for v in y) + 1e-300  # a weighted mean's rounding
    assert f.min() >= min(y) - slack
    assert f.max() <= max(y) + slack


@given(
    labels=st.lists(st.booleans(), min_size=2, max_size=8),
    weights=st.lists(magnitudes, min_size=8, max_size=8),
)
def test_batch_llr_is_finite_for_any_magnitude(labels, weights):
    n = len(labels)
    w = np.array(weights[:n])
    s = np.linspace(0.0, 1.0, n)
    llr = pav_llr(s, labels, w)
    assert np.all(np.isfinite(llr))
    assert np.all(np.diff(llr) >= 0.0)  # order preserved
    if w.any():
        cal = IsotonicCalibrator().fit(s, labels, w)
        assert np.all(np.isfinite(cal.predict_llr(GRID)))
        p = cal.predict_proba(GRID)
        assert np.all((p >= 0.0) & (p <= 1.0))
