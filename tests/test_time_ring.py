"""A time window's ring grows to the events the window holds at once, not to a call's events.

The ring must hold every event within ``seconds`` of the latest learned one; an array call learns
many events, and the ring grows before it to the bound of :func:`ring_peak_bound`. The bound must
never fall below the true peak (the kernel would overwrite events still in the window), checked
against a deque that applies the kernel's own test, ``t - c >= seconds``, event by event.
"""

from __future__ import annotations

import collections
import tracemalloc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import PAVCalibrator
from streamcal._kernels.histogram import ring_peak_bound
from streamcal.windows import CountWindow, TimeWindow


def naive_peak(old_clocks, times, seconds) -> int:
    """The most events the ring holds while it learns ``times``, by the kernel's rule."""
    ring = collections.deque(old_clocks)
    peak = len(ring)
    for t in times:
        while ring and t - ring[0] >= seconds:
            ring.popleft()
        ring.append(t)
        peak = max(peak, len(ring))
    return peak


@st.composite
def clock_streams(draw):
    seconds = draw(st.sampled_from([1e-3, 0.5, 1.0, 7.0, 1000.0, 3.5e6]))
    origin = draw(st.sampled_from([0.0, -5e3, 1.7e9]))
    n = draw(st.integers(1, 1500))
    # gaps: ties, gaps at the span's edge (a tie of the kernel's test), small and long jumps
    choices = [0.0, seconds, seconds / 3, seconds * 2.5, seconds / 1000]
    gaps = np.asarray(draw(st.lists(st.sampled_from(choices), min_size=n, max_size=n)))
    times = origin + np.cumsum(gaps)
    split = draw(st.integers(0, n - 1))
    stride = draw(st.sampled_from([1, 3, 256]))
    return seconds, times, split, stride


@settings(max_examples=150, deadline=None)
@given(clock_streams())
def test_the_bound_is_never_below_the_ring_peak(case):
    seconds, times, split, stride = case
    rng = np.random.default_rng(split)
    s = rng.uniform(0.01, 0.99, times.size)
    y = rng.uniform(size=times.size) < s
    cal = PAVCalibrator(prior=None, window=TimeWindow(seconds))
    if split:
        cal.update(s[:split], y[:split], times=times[:split])
    hist = cal.window_histogram
    old = hist.ring()[3] if split else np.zeros(0)
    rest = np.ascontiguousarray(times[split:])
    bound = ring_peak_bound(hist.floats, hist.ints, rest, stride)
    peak = naive_peak(old.tolist(), rest.tolist(), seconds)
    assert peak <= bound <= old.size + rest.size
    margin = 1e-9 * (2 * np.abs(times).max() + seconds)  # at least the bound's own margin
    if np.all(np.diff(times) > margin):  # at most one event within the margin of leaving at once
        assert bound <= peak + stride  # one search per `stride` events: fewer than `stride` more


def test_one_long_call_keeps_the_same_outputs_and_a_short_ring():
    rng = np.random.default_rng(3)
    n = 200_000
    s = rng.uniform(0.001, 0.5, n)
    y = rng.uniform(size=n) < s
    t = np.cumsum(rng.exponential(1.0, n))  # about one event a second
    whole = PAVCalibrator(window=TimeWindow(1000.0))
    p_whole, llr_whole = whole.prequential(s, y, times=t)
    parts = PAVCalibrator(window=TimeWindow(1000.0))
    got = [parts.prequential(s[a : a + 997], y[a : a + 997], times=t[a : a + 997]) for a in range(0, n, 997)]
    assert np.array_equal(p_whole, np.concatenate([g[0] for g in got]))
    assert np.array_equal(llr_whole, np.concatenate([g[1] for g in got]))
    # the learned state is the same too (the ring unrolled: the events in the window)
    for a, b in zip(whole.window_histogram.ring(), parts.window_histogram.ring(), strict=True):
        assert np.array_equal(a, b)


def _traced_peak(cal, s, y, t, out) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        cal.prequential(s, y, times=t, out=out)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_a_long_call_allocates_no_ring_beyond_the_window():
    """A call of 400,000 events under a window of about 1,000 events allocates about what a count
    window of 1,000 does: the ring grows to the window's events (a ring of the call's events
    would be 400,000 x 32 bytes, 12.8 MB more)."""
    rng = np.random.default_rng(5)
    n = 400_000
    s = rng.uniform(0.001, 0.5, n)
    y = (rng.uniform(size=n) < s).astype(np.float64)
    t = np.arange(n, dtype=np.float64)
    out = (np.empty(n), np.empty(n))
    peaks = {}
    for name, window in {"count": CountWindow(1000), "time": TimeWindow(1000.0)}.items():
        cal = PAVCalibrator(prior=None, window=window)
        cal.prequential(s[:10], y[:10], times=t[:10])
        peaks[name] = _traced_peak(cal, s[10:], y[10:], t[10:], (out[0][10:], out[1][10:]))
    assert peaks["time"] <= peaks["count"] + 2_000_000, peaks
