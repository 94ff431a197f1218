"""PAV's score prior refits its strength at learned counts spaced in events, whatever the events'
weights: half the window's events renewed (the whole window while the strength is 0), at least 1
and at most ``PRIOR_REFRESH_EVERY`` apart. Checked against the rule written out from the events,
with weights of 1, 0.37, 1e-3, 0, 7.5 and fractional ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamcal import PAVCalibrator
from streamcal._kernels import ipav as K
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

WINDOWS = [
    Unbounded(),
    CountWindow(n=200),
    TimeWindow(seconds=50.0),
    Decay(half_life=100.0),
    Decay(half_life=100.0, by="time"),
]


def _stream(n, seed):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.01, 0.99, n)
    y = (rng.random(n) < s).astype(float)
    t = np.cumsum(rng.exponential(1.0, n))
    return s, y, t


def _next_refit(cal):
    pf, pi = cal.map_arrays()
    return float(pf[K.pav_state_sizes_before_prior(int(pi[K.PI_B])) + K.PR_NEXT])


def _schedule(window, weights, s, y, t):
    """``(learned count, next refit, strength)`` after each event learned one at a time."""
    cal = PAVCalibrator(window=window)
    out = []
    for i in range(s.size):
        cal.update(s[i : i + 1], y[i : i + 1], weights=weights[i : i + 1], times=t[i : i + 1])
        out.append((i + 1, _next_refit(cal), cal.prior_strength))
    return out


def _events_held(window, t, n):
    """The window's events after ``n`` learned ones, from its definition."""
    if isinstance(window, CountWindow):
        return float(min(n, window.n))
    if isinstance(window, TimeWindow):
        return float(np.count_nonzero(t[n - 1] - t[:n] < window.seconds))
    if isinstance(window, Decay) and window.by == "time":
        return float(sum(2.0 ** (-(t[n - 1] - t[i]) / window.half_life) for i in range(n)))
    if isinstance(window, Decay):
        return float(sum(2.0 ** (-(n - 1 - i) / window.half_life) for i in range(n)))
    return float(n)


def _weights(scale, n):
    if scale == "fractional":
        return np.random.default_rng(9).uniform(0.5, 1.5, n)
    return np.full(n, scale)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("scale", [1.0, 0.37, 1e-3, 0.0, 7.5, "fractional"])
def test_refits_follow_the_rule_written_from_the_events(window, scale):
    """Whatever the weights, the refits are spaced by the window's events (the strength itself
    depends on the weights: they are frequency weights, so they decide when the data refute
    the prior, and with it whether the next refit is half a window or a whole one away)."""
    s, y, t = _stream(700, seed=3)
    rows = _schedule(window, _weights(scale, s.size), s, y, t)
    refits = 0
    previous = 1.0  # a fresh calibrator refits after its first learned event
    for n, nxt, kappa in rows:
        if n >= previous:  # a refit ran at this event: the next one is scheduled from it
            refits += 1
            held = min(_events_held(window, t, n), n)
            half = (1.0 if kappa == 0.0 else 0.5) * held
            step = math.floor(half)
            # the kernel sums the decayed counts in its own order: a half within rounding of a
            # whole number may round to either side of it
            near = abs(half - round(half)) < 1e-9 * max(half, 1.0)
            steps = {math.floor(half - 1e-9 * max(half, 1.0)), math.ceil(half)} if near else {step}
            allowed = {n + min(max(k, 1), K.PRIOR_REFRESH_EVERY) for k in steps}
            assert nxt in allowed, (n, held, kappa)
        else:
            assert nxt == previous
        previous = nxt
    assert 8 <= refits <= 60


def test_small_weights_refit_rarely_on_the_array_face():
    s, y, _ = _stream(20_000, seed=7)
    cal = PAVCalibrator()
    refits = 0
    last = _next_refit(cal)
    for lo in range(0, s.size, 100):
        cal.update(s[lo : lo + 100], y[lo : lo + 100], weights=np.full(100, 1e-3))
        refits += _next_refit(cal) != last
        last = _next_refit(cal)
    # half steps from 1 to 20,000 events: about log(20,000) / log(1.5), 25 refits; each chunk
    # of 100 events holds at most a few of them
    assert refits <= 25
