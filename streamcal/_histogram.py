"""Operations on a windowed score histogram's two arrays, outside the per-event kernels.

A streaming calibrator's state is a histogram over score buckets, held in two arrays laid out by
:mod:`streamcal._kernels.histogram`: ``floats`` (the header, the positive and negative weight per
bucket in stored units, then the ring's weights, labels and clocks) and ``ints`` (the header, the
event counts per bucket, then the ring's buckets). The kernels learn and expire events; this
module reads and combines whole states: the stored unit, the real weights, the ring unrolled
oldest first, and the sums and replays that the windows' merge rules
(:meth:`streamcal.windows.Window.merge_histograms`) are made of.
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels import histogram as _h

__all__ = [
    "added",
    "decay_factor",
    "real_weights",
    "replayed",
    "ring_events",
    "stored_unit",
]

State = tuple[np.ndarray, np.ndarray]  # (floats, ints)


def n_buckets(state: State) -> int:
    return int(state[1][_h.SI_B])


def stored_unit(floats: np.ndarray) -> float:
    """The factor from real weights to stored units at the clock of the last learned event
    (decay windows store weights in a frame that moves by powers of two; other windows 1)."""
    kind = floats[_h.SF_KIND]
    if kind in (_h.KIND_DECAY_EVENTS, _h.KIND_DECAY_TIME) and floats[_h.SF_N_LEARNED] > 0:
        return 2.0 ** ((floats[_h.SF_LAST_T] - floats[_h.SF_T0]) / floats[_h.SF_HALF_LIFE])
    return 1.0


def real_weights(state: State) -> tuple[np.ndarray, np.ndarray]:
    """``(pos, neg)``: the window's positive and negative weight per bucket, in real units (copies)."""
    floats = state[0]
    B = n_buckets(state)
    u = stored_unit(floats)
    return floats[_h.SF_HEADER : _h.SF_HEADER + B] / u, floats[_h.SF_HEADER + B : _h.SF_HEADER + 2 * B] / u


def window_total(floats: np.ndarray) -> float:
    """The window's total weight in real units."""
    return float((floats[_h.SF_T_POS] + floats[_h.SF_T_NEG]) / stored_unit(floats))


def ring_events(state: State) -> tuple[np.ndarray, ...]:
    """The ring's events, oldest first: ``(bucket, label, weight, clock)`` (copies)."""
    floats, ints = state
    B = n_buckets(state)
    W = int(ints[_h.SI_W])
    head = int(ints[_h.SI_RING_HEAD])
    count = int(ints[_h.SI_RING_COUNT])
    order = (head + np.arange(count)) % W if W else np.zeros(0, dtype=np.intp)
    base = _h.SF_HEADER + 2 * B
    w = floats[base : base + W][order]
    y = floats[base + W : base + 2 * W][order]
    t = floats[base + 2 * W : base + 3 * W][order]
    b = ints[_h.SI_HEADER + 2 * B : _h.SI_HEADER + 2 * B + W][order]
    return b, y, w, t


def decay_factor(exponent: float) -> float:
    """``2**exponent``, a decay factor between two states' frames, without an OverflowError.

    The exponent is at most ``DECAY_RENORM_EXPONENT`` (a frame's origin is never more than that
    many half-lives behind its last clock); far below the double range, as between parts learned
    1e300 half-lives apart, the older part's weights are forgotten: 0.
    """
    if exponent < -(_h.DECAY_FORGET_EXPONENT + 100.0):
        return 0.0
    return 2.0 ** min(exponent, _h.DECAY_RENORM_EXPONENT + 1.0)


def added(a: State, b: State, *, scale_a: float, scale_b: float = 1.0, event_clock: bool) -> State:
    """The sum of two histograms without a ring (stored units, scaled), in ``b``'s header frame.

    With an event clock, ``b``'s events come after ``a``'s: the last clock and a decay frame's
    origin move on by the number of events ``a`` learned.
    """
    B = n_buckets(a)
    fa, ia = a
    fb, ib = b
    floats, ints = fb.copy(), ib.copy()
    h = _h.SF_HEADER
    floats[h : h + 2 * B] = fa[h : h + 2 * B] * scale_a + fb[h : h + 2 * B] * scale_b
    floats[_h.SF_T_POS] = fa[_h.SF_T_POS] * scale_a + fb[_h.SF_T_POS] * scale_b
    floats[_h.SF_T_NEG] = fa[_h.SF_T_NEG] * scale_a + fb[_h.SF_T_NEG] * scale_b
    g = _h.SI_HEADER
    ints[g : g + 2 * B] = ia[g : g + 2 * B] + ib[g : g + 2 * B]
    ints[_h.SI_N_POS] = ia[_h.SI_N_POS] + ib[_h.SI_N_POS]
    ints[_h.SI_N_NEG] = ia[_h.SI_N_NEG] + ib[_h.SI_N_NEG]
    n_a, n_b = fa[_h.SF_N_LEARNED], fb[_h.SF_N_LEARNED]
    floats[_h.SF_N_LEARNED] = n_a + n_b
    floats[_h.SF_N_RENORM] = fa[_h.SF_N_RENORM] + fb[_h.SF_N_RENORM]
    if event_clock:
        floats[_h.SF_LAST_T] = n_a + n_b - 1.0
        if floats[_h.SF_KIND] == _h.KIND_DECAY_EVENTS:
            floats[_h.SF_T0] = fb[_h.SF_T0] + n_a
    return floats, ints


def replayed(
    window_code: tuple[int, float, float, float],
    n_buckets: int,
    capacity: int,
    events: tuple[np.ndarray, ...],
    replay_times: np.ndarray,
) -> State:
    """A fresh histogram with a ring of ``capacity`` that learned ``events`` = (bucket, label,
    weight) in order at ``replay_times`` (the kernel expires what a time window drops)."""
    floats, ints = _h.empty_state(n_buckets, capacity, window_code)
    buckets, labels, weights = events
    _h.histogram_learn_many_inplace(
        floats,
        ints,
        np.ascontiguousarray(buckets, dtype=np.intp),
        np.ascontiguousarray(labels, dtype=np.float64),
        np.ascontiguousarray(weights, dtype=np.float64),
        np.ascontiguousarray(replay_times, dtype=np.float64),
    )
    return floats, ints


def set_ring_clocks(state: State, clocks: np.ndarray) -> None:
    """Write the clocks of a ring that starts at 0 and has not wrapped."""
    floats, ints = state
    B = n_buckets(state)
    W = int(ints[_h.SI_W])
    base = _h.SF_HEADER + 2 * B + 2 * W
    floats[base : base + clocks.size] = clocks
