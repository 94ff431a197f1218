"""Windowed score histogram: bucket lookup, event expiry and weight updates (numba).

The state of every streaming calibrator is packed into two flat arrays so that a per-event
kernel call passes few arguments (numba's dispatch cost grows with each array argument):

``sf`` (float64)::

    [0, SF_HEADER)                       scalars, see the SF_* indices below
    pos   = sf[SF_HEADER      : SF_HEADER + B]        positive weight per bucket (stored units)
    neg   = sf[SF_HEADER + B  : SF_HEADER + 2B]       negative weight per bucket (stored units)
    ring_w, ring_y, ring_t  (W each)                   weight (stored units), label, time of the
                                                       events in the window, oldest at ``head``

``si`` (int64)::

    [0, SI_HEADER)                       scalars, see the SI_* indices below
    npos, nneg (B each)                  number of positive / negative events per bucket
    ring_b (W)                           bucket of each event in the window

``B`` is the number of buckets and ``W`` the ring capacity (0 for unbounded and decay windows).
The index constants are compile-time constants, not state. Every index into these arrays is at
or above 0: the kernels here are compiled without numba's negative-index fix-up
(:mod:`streamcal._kernels._indexing_compiled`).

Stored units. A decay window never touches old events: an event learned at clock ``t`` is
stored with weight ``w * 2**((t - t0) / half_life)``; its real weight now is the stored one times
``2**(-(t_now - t0) / half_life)``, one global factor. Before the stored values could overflow
(exponent above ``DECAY_RENORM_EXPONENT``) every bucket is multiplied by ``2**-m`` (an exact
power of two) and ``t0`` moves forward by ``m`` half-lives. A jump of the clock by more than
``DECAY_FORGET_EXPONENT`` half-lives (or one the clock's rounding cannot resolve in half-lives)
instead moves ``t0`` to the clock itself and scales by ``2**-exponent``, zero for long jumps:
what was learned before has decayed below the smallest double.

Drift. Windows that subtract leaving events keep per-bucket event counts; a class weight whose
event count falls to zero is set to exactly 0.0 and subtracted weights are floored at 0.0, so
rounding never leaves phantom or negative weight behind.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from streamcal._kernels._config import jit_noalloc

# window kinds
KIND_UNBOUNDED = 0
KIND_COUNT = 1
KIND_TIME = 2
KIND_DECAY_EVENTS = 3
KIND_DECAY_TIME = 4

DECAY_RENORM_EXPONENT = 64.0
# Beyond this many half-lives every stored weight (below 2**(64 + 333) with MAX_WEIGHT) times
# 2**-exponent is below the smallest subnormal double: the old window is forgotten.
DECAY_FORGET_EXPONENT = 1600.0

# The largest weight of one event (``docs/limits.md``). With at most 2**63 events and the decay
# scale below 2**(DECAY_RENORM_EXPONENT + 1) (times the events in 64 half-lives), every stored sum
# stays below 1e160, so sums, their products with a score or a weight, and their ratios are finite.
MAX_WEIGHT = 1e100

# sf header
SF_T_POS = 0  # total positive weight in the window (stored units)
SF_T_NEG = 1  # total negative weight in the window (stored units)
SF_LAST_T = 2  # clock of the last learned event (time, or event number for the other kinds)
SF_N_LEARNED = 3  # number of learn operations so far
SF_T0 = 4  # decay reference clock
SF_KIND = 5
SF_WINDOW_N = 6  # CountWindow size
SF_SECONDS = 7  # TimeWindow span
SF_HALF_LIFE = 8  # Decay half-life (events or time units)
SF_N_RENORM = 9  # number of decay renormalisations so far (diagnostic)
# Decay by time: the window's positive / negative events, each counted as one event's worth of
# weight decayed like the weights (stored units), so that the score prior's refits follow the
# events held whatever their weights; 0 for the other windows. With unit weights they equal
# SF_T_POS / SF_T_NEG bit for bit (the same additions of the same units).
SF_EVENTS_POS = 10
SF_EVENTS_NEG = 11
SF_HEADER = 12

# si header
SI_B = 0
SI_W = 1
SI_RING_HEAD = 2
SI_RING_COUNT = 3
SI_N_POS = 4  # number of positive events in the window
SI_N_NEG = 5  # number of negative events in the window
SI_HEADER = 8


def state_sizes(n_buckets: int, ring_capacity: int) -> tuple[int, int]:
    """Lengths of the ``sf`` and ``si`` arrays for ``n_buckets`` and a ring of ``ring_capacity``."""
    return SF_HEADER + 2 * n_buckets + 3 * ring_capacity, SI_HEADER + 2 * n_buckets + ring_capacity


# Bucket search. Every kernel finds a score's bucket with :func:`bucket_of`, the number of sorted
# cuts at or below the score. A bucket guide (:func:`bucket_guide`, built once per set of cuts)
# narrows the search to the few cuts in the score's bin; without one, a binary search answers.
# Either way the result is the binary search's, exactly.
#
# The guide is a table over ``K`` equal bins of ``[cuts[0], cuts[-1]]``, for any cuts (grid,
# quantile or user edges): about 32 bins per cut, at most 2**16 (256 KB of int32).
GUIDE_BINS_PER_CUT = 32
GUIDE_MAX_BINS = 1 << 16


@jit_noalloc(forceinline=True)
def _bisect_sorted(cuts, off, m, s):
    """The number of the sorted cuts ``cuts[off : off + m]`` that are ``<= s``, by a binary search."""
    if m == 0:
        return 0
    # branch-free halving (the answer stays in [base, base + n]): no mispredictions
    base = 0
    n = m
    while n > 1:
        half = n >> 1
        base = base + half if cuts[off + base + half] <= s else base
        n -= half
    return base + (1 if cuts[off + base] <= s else 0)


@jit_noalloc(forceinline=True)
def guide_scale(cuts, off, m, guide):
    """Bins per unit of score of ``guide`` over ``cuts[off : off + m]`` (0.0 without a guide).

    The guide's filling (:func:`fill_bucket_guide`) and its searches compute it alike.
    """
    n_bins = guide.shape[0] - 1
    if n_bins < 1:
        return 0.0
    return n_bins / (cuts[off + m - 1] - cuts[off])


@jit_noalloc(forceinline=True)
def bucket_of(cuts, off, m, guide, s, scale):
    """The number of the sorted cuts ``cuts[off : off + m]`` that are ``<= s``: ``s``'s bucket.

    ``guide`` is the cuts' :func:`bucket_guide` (an empty array: none) and ``scale`` its
    :func:`guide_scale`. Bucket ``b`` holds the scores in ``[cuts[b-1], cuts[b])``: scores below
    the first cut go to bucket 0, those at or above the last to bucket ``m``, NaN to bucket 0.
    """
    n_bins = guide.shape[0] - 1
    g = 0
    hi = m
    if n_bins >= 1:
        low = cuts[off]
        if not s >= low:  # also NaN
            return 0
        if s >= cuts[off + m - 1]:
            return m
        # the bin of ``s``: non-decreasing in ``s``, as rounding is; its cuts are the only ones
        # that can be on either side of ``s``
        i = np.int64((s - low) * scale)
        if i >= n_bins:
            i = n_bins - 1
        g = guide[i]
        hi = guide[i + 1]
        if hi - g <= 4:  # the few cuts in the bin, in order
            while g < hi and cuts[off + g] <= s:
                g += 1
            return g
    # no guide, or many cuts in one bin (very uneven cuts): a binary search among them
    return g + _bisect_sorted(cuts, off + g, hi - g, s)


# How a single score's bucket is guessed arithmetically before :func:`bucket_of` checks it
# (``grid_of_sorted``). The single-score entry points of the river face use this guess instead
# of the guide: it needs no memory read besides the cuts beside the answer, where the interpreter
# has cooled the cache between two calls.
GRID_NONE = 0  # no guess: the search alone
GRID_UNIFORM = 1  # cuts evenly spaced in the score
GRID_LOGIT = 2  # cuts evenly spaced in the log-odds of the score (probability scores)


@jit_noalloc(forceinline=True)
def _grid_coordinate(kind, s):
    if kind == GRID_LOGIT:
        return math.log(s / (1.0 - s))  # -inf at 0, inf at 1, nan outside [0, 1]
    return s


def grid_of_sorted(cuts: np.ndarray) -> tuple[float, float, float]:
    """``(kind, z0, inv_step)``: whether the sorted ``cuts`` are evenly spaced in a coordinate.

    ``kind`` is ``GRID_LOGIT`` or ``GRID_UNIFORM`` when cut ``i`` lies (to 1% of a step) at
    ``z0 + i / inv_step`` in that coordinate, at the ends and three interior spot checks;
    else ``GRID_NONE``. The guess only speeds the search up: :func:`bucket_of_guessed` checks
    it against the cuts, so a wrong guess costs time, never exactness.
    """
    m = cuts.shape[0]
    if m < 2:
        return float(GRID_NONE), 0.0, 0.0
    coordinate = _grid_coordinate.py_func  # Python, once per calibrator: nothing to compile
    for kind in (float(GRID_LOGIT), float(GRID_UNIFORM)):  # floats, as the searches pass them
        if kind == GRID_LOGIT and not (cuts[0] > 0.0 and cuts[m - 1] < 1.0):
            continue
        z0 = coordinate(kind, cuts[0])
        step = (coordinate(kind, cuts[m - 1]) - z0) / (m - 1)
        if not (step > 0.0 and step < math.inf):
            continue
        ok = True
        for i in (m // 4, m // 2, (3 * m) // 4):
            if not abs(coordinate(kind, cuts[i]) - (z0 + i * step)) <= 0.01 * step:
                ok = False
        if ok:
            return kind, z0, 1.0 / step
    return float(GRID_NONE), 0.0, 0.0


@jit_noalloc(forceinline=True)
def bucket_of_guessed(cuts, off, m, s, kind, z0, inv_step):
    """:func:`bucket_of` without a guide, after an arithmetic guess.

    With a grid (``kind``, ``z0``, ``inv_step`` from :func:`grid_of_sorted`) the bucket is
    guessed from one coordinate evaluation (one logarithm for the logit grid), then moved at
    most two steps until ``cuts[b - 1] <= s < cuts[b]`` holds; if it still does not, and
    without a grid, the binary search that :func:`bucket_of` runs without a guide answers.
    Either way the result is exactly :func:`bucket_of`'s.
    """
    if kind != GRID_NONE and m > 0:
        t = (_grid_coordinate(kind, s) - z0) * inv_step
        if t >= m - 1:
            g = m
        elif t >= 0.0:  # false for nan
            g = np.int64(t) + 1
        else:
            g = 0
        for _ in range(3):
            if g > 0 and cuts[off + g - 1] > s:
                g -= 1
            elif g < m and cuts[off + g] <= s:
                g += 1
            else:
                return g
    return _bisect_sorted(cuts, off, m, s)


@jit_noalloc
def bucket_index_guided(cuts, guide, scores, out):
    """Bucket of each score (:func:`bucket_of`) over the sorted ``cuts`` and their ``guide``."""
    m = cuts.shape[0]
    scale = guide_scale(cuts, 0, m, guide)
    for i in range(scores.shape[0]):
        out[i] = bucket_of(cuts, 0, m, guide, scores[i], scale)


def bucket_index_sorted(cuts: np.ndarray, scores: np.ndarray, out: np.ndarray) -> None:
    """Bucket of each score: the number of interior ``cuts`` (sorted ascending) that are <= it.

    Bucket ``b`` holds scores in ``[cuts[b-1], cuts[b])``; scores below the first cut go to
    bucket 0 and scores at or above the last to the last one. Through the cuts' guide when
    there are at least as many scores as cuts (else building the guide costs more than it saves).
    """
    guide = bucket_guide(cuts) if scores.shape[0] >= cuts.shape[0] else _NO_GUIDE
    bucket_index_guided(cuts, guide, scores, out)


_NO_GUIDE = np.zeros(0, dtype=np.int32)


def fill_bucket_guide(cuts: np.ndarray, guide: np.ndarray) -> None:
    """Fill ``guide`` (``K + 1`` values): ``guide[i]`` is the number of cuts in bins below ``i``.

    A score ``s`` in bin ``i`` then has at least ``guide[i]`` cuts ``<= s`` (every cut in a lower
    bin is below it, since the bin never decreases with the value) and at most
    ``guide[i + 1]`` (every cut in a higher bin is above it): only the cuts in its own bin,
    ``cuts[guide[i] : guide[i + 1]]``, are compared. NumPy computes each cut's bin by the
    operations of :func:`guide_scale` and :func:`bucket_of` (IEEE subtraction, multiplication
    and division, truncation), so the searches find every cut in the bin it was counted in.
    """
    n_bins = guide.shape[0] - 1
    scale = n_bins / (cuts[-1] - cuts[0])
    bins = np.minimum(((cuts - cuts[0]) * scale).astype(np.int64), n_bins - 1)
    guide[0] = 0
    np.cumsum(np.bincount(bins, minlength=n_bins), out=guide[1:])


# Guides in use, by their cuts: calibrators over the same edges share one (it is never written
# after it is filled).
_GUIDES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def bucket_guide(cuts: np.ndarray) -> np.ndarray:
    """The bucket guide of the sorted ``cuts`` (int32), or an empty array where there is none
    (the searches then run a binary search): fewer than two cuts, or a span so wide or so narrow
    that the bins per unit of score are not a finite positive number.

    Calibrators over the same cuts get the same array (one per process while any holds it).
    """
    key = np.ascontiguousarray(cuts, dtype=np.float64).tobytes()
    guide = _GUIDES.get(key)
    if guide is None:
        guide = _new_bucket_guide(cuts)
        _GUIDES[key] = guide
    return guide


def _new_bucket_guide(cuts: np.ndarray) -> np.ndarray:
    m = cuts.shape[0]
    if m < 2:
        return np.zeros(0, dtype=np.int32)
    n_bins = min(GUIDE_BINS_PER_CUT * m, GUIDE_MAX_BINS)
    with np.errstate(over="ignore"):
        scale = n_bins / (cuts[-1] - cuts[0])
    if not (0.0 < scale < math.inf):
        return np.zeros(0, dtype=np.int32)
    guide = np.empty(n_bins + 1, dtype=np.int32)
    fill_bucket_guide(cuts, guide)
    return guide


@jit_noalloc
def check_bucket_index(cuts, guide, score_low, score_high, scores, out):
    """Bucket of each score (as :func:`bucket_index_guided`), with the scores checked first.

    Returns -1, or the position of the first score that is not finite or outside
    ``[score_low, score_high]`` (the buckets before it are written, none after).
    """
    m = cuts.shape[0]
    scale = guide_scale(cuts, 0, m, guide)
    for i in range(scores.shape[0]):
        s = scores[i]
        if not (score_low <= s <= score_high and abs(s) < math.inf):  # also NaN
            return i
        out[i] = bucket_of(cuts, 0, m, guide, s, scale)
    return -1


@jit_noalloc(forceinline=True)
def stored_unit(sf, kind):
    """Factor from real weights to stored units at the clock of the last learned event.

    ``kind`` is ``sf[SF_KIND]``: the per-event helpers take it as an argument, so that a loop
    reads it once (a load from ``sf``, which the loop writes, is otherwise redone per event).
    """
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        return math.pow(2.0, (sf[SF_LAST_T] - sf[SF_T0]) / sf[SF_HALF_LIFE])
    return 1.0


@jit_noalloc(forceinline=True)
def window_clock(sf, t, kind):
    """The clock of the next learned event: its time for time windows, else its number."""
    if (kind == KIND_TIME) | (kind == KIND_DECAY_TIME):
        return t
    return sf[SF_N_LEARNED]


@jit_noalloc(forceinline=True)
def window_expire_next_inplace(sf, si, clock, kind):
    """Remove the oldest event if it must leave before an event at ``clock`` enters.

    Returns its bucket, or -1 when nothing leaves. Call repeatedly until -1.
    """
    count = si[SI_RING_COUNT]
    if count == 0:
        return -1
    B = si[SI_B]
    W = si[SI_W]
    head = si[SI_RING_HEAD]
    RING_W = SF_HEADER + 2 * B
    if kind == KIND_COUNT:
        if count < sf[SF_WINDOW_N]:
            return -1
    elif kind == KIND_TIME:
        if not (clock - sf[RING_W + 2 * W + head] >= sf[SF_SECONDS]):
            return -1
    else:
        return -1
    b = si[SI_HEADER + 2 * B + head]
    w = sf[RING_W + head]
    if sf[RING_W + W + head] > 0.5:
        cls, tot, ncls = 0, SF_T_POS, SI_N_POS
    else:
        cls, tot, ncls = 1, SF_T_NEG, SI_N_NEG
    k = SF_HEADER + cls * B + b
    kc = SI_HEADER + cls * B + b
    si[kc] -= 1
    if si[kc] == 0:
        sf[k] = 0.0
    else:
        v = sf[k] - w
        sf[k] = 0.0 if v < 0.0 else v  # max(v, 0.0)
    si[ncls] -= 1
    if si[ncls] == 0:
        sf[tot] = 0.0
    else:
        v = sf[tot] - w
        sf[tot] = 0.0 if v < 0.0 else v
    si[SI_RING_HEAD] = head + 1 if head + 1 < W else 0
    si[SI_RING_COUNT] = count - 1
    return b


@jit_noalloc(forceinline=True)
def window_add_inplace(sf, si, b, y, w, clock, kind):
    """Add one event to bucket ``b`` at ``clock``; returns True if a decay renormalisation ran.

    After a renormalisation every bucket changed (by an exact power of two), so a fitted map
    over the histogram must be rebuilt.
    """
    B = si[SI_B]
    renormalised = False
    ws = w
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        half_life = sf[SF_HALF_LIFE]
        exponent = (clock - sf[SF_T0]) / half_life  # may be inf for a huge jump: handled below
        if exponent > DECAY_RENORM_EXPONENT:
            m = np.floor(exponent)  # a float (``math.floor`` would convert to an integer, which could overflow)
            t0 = sf[SF_T0] + m * half_life
            rest = (clock - t0) / half_life  # in [0, 1) but for rounding
            if m <= DECAY_FORGET_EXPONENT and -1.0 <= rest <= DECAY_RENORM_EXPONENT:
                factor = 2.0 ** (-m)  # exact power of two
            else:  # a jump too long, or too fine for the clock's rounding: the new frame starts here
                factor = math.pow(2.0, -exponent) if exponent <= DECAY_FORGET_EXPONENT else 0.0
                t0 = clock
                rest = 0.0
            for i in range(SF_HEADER, SF_HEADER + 2 * B):
                sf[i] *= factor
            sf[SF_T_POS] *= factor
            sf[SF_T_NEG] *= factor
            sf[SF_EVENTS_POS] *= factor
            sf[SF_EVENTS_NEG] *= factor
            sf[SF_T0] = t0
            sf[SF_N_RENORM] += 1.0
            unit = math.pow(2.0, rest)
            renormalised = True
        elif exponent < -DECAY_RENORM_EXPONENT:
            # only at the first event (``t0`` starts at 0 and never passes the last learned clock,
            # which later clocks do not precede): nothing is stored yet, the frame starts here
            sf[SF_T0] = clock
            unit = 2.0**0.0
            renormalised = True
        else:
            # the unit ``2**exponent`` of the frame as it stands: a caller that inlines this
            # helper and computes the same power before it shares the one computation
            unit = math.pow(2.0, exponent)
        ws = w * unit
        if kind == KIND_DECAY_TIME:
            sf[SF_EVENTS_POS if y > 0.5 else SF_EVENTS_NEG] += unit
    if y > 0.5:
        sf[SF_HEADER + b] += ws
        si[SI_HEADER + b] += 1
        sf[SF_T_POS] += ws
        si[SI_N_POS] += 1
    else:
        sf[SF_HEADER + B + b] += ws
        si[SI_HEADER + B + b] += 1
        sf[SF_T_NEG] += ws
        si[SI_N_NEG] += 1
    if (kind == KIND_COUNT) | (kind == KIND_TIME):
        W = si[SI_W]
        count = si[SI_RING_COUNT]
        tail = si[SI_RING_HEAD] + count
        if tail >= W:
            tail -= W
        sf[SF_HEADER + 2 * B + tail] = ws
        sf[SF_HEADER + 2 * B + W + tail] = y
        sf[SF_HEADER + 2 * B + 2 * W + tail] = clock
        si[SI_HEADER + 2 * B + tail] = b
        si[SI_RING_COUNT] = count + 1
    sf[SF_LAST_T] = clock
    sf[SF_N_LEARNED] += 1.0
    return renormalised


@jit_noalloc
def histogram_learn_one_inplace(sf, si, b, y, w, t):
    """Learn one event into the windowed histogram (``histogram_learn_many_inplace`` of one)."""
    kind = sf[SF_KIND]
    clock = window_clock(sf, t, kind)
    while window_expire_next_inplace(sf, si, clock, kind) >= 0:
        pass
    window_add_inplace(sf, si, b, y, w, clock, kind)


@jit_noalloc
def histogram_learn_many_inplace(sf, si, buckets, labels, weights, times):
    """Learn events in order into the windowed histogram (no fitted map attached)."""
    kind = sf[SF_KIND]
    for i in range(buckets.shape[0]):
        clock = window_clock(sf, times[i], kind)
        while window_expire_next_inplace(sf, si, clock, kind) >= 0:
            pass
        window_add_inplace(sf, si, buckets[i], labels[i], weights[i], clock, kind)


def empty_state(n_buckets: int, ring_capacity: int, window_code: tuple[int, float, float, float]):
    """Fresh ``(sf, si)`` arrays for an empty window; ``window_code`` = (kind, n, seconds, half_life)."""
    nf, ni = state_sizes(n_buckets, ring_capacity)
    sf = np.zeros(nf, dtype=np.float64)
    si = np.zeros(ni, dtype=np.int64)
    kind, n, seconds, half_life = window_code
    sf[SF_KIND] = kind
    sf[SF_WINDOW_N] = n
    sf[SF_SECONDS] = seconds
    sf[SF_HALF_LIFE] = half_life
    sf[SF_LAST_T] = -np.inf
    si[SI_B] = n_buckets
    si[SI_W] = ring_capacity
    return sf, si


#: Learned events per binary search of :func:`ring_peak_bound`.
RING_BOUND_STRIDE = 256


def ring_peak_bound(sf: np.ndarray, si: np.ndarray, times: np.ndarray, stride: int = RING_BOUND_STRIDE) -> int:
    """An upper bound on the events a time window's ring holds while it learns events at
    ``times`` (non-decreasing, none before the ring's last clock), read from one binary search per
    ``stride`` learned events: above the true peak by at most ``stride`` and the events within
    ``margin`` of leaving.

    After the event at ``t_i`` the ring holds the events at clocks ``c`` with
    ``t_i - c < seconds``, the ring's own and the call's up to ``i``: a suffix of each, since the
    clocks never decrease. For the ``stride`` events from ``a`` on, every clock below
    ``t_a - seconds - margin`` has left (``margin`` above the rounding of the subtractions, so
    the kernel's test in floating point agrees), so the old ring's events at or above it and the
    call's events at or above it up to the block's end bound each of them."""
    k = times.size
    W = int(si[SI_W])
    count = int(si[SI_RING_COUNT])
    if k == 0:
        return count
    head = int(si[SI_RING_HEAD])
    B = int(si[SI_B])
    clocks = sf[SF_HEADER + 2 * B + 2 * W : SF_HEADER + 2 * B + 3 * W]
    end = head + count
    first = clocks[head : min(end, W)]  # the ring's two sorted runs, oldest first
    second = clocks[: max(end - W, 0)]
    seconds = float(sf[SF_SECONDS])
    scale = float(np.abs(times).max()) + seconds
    if count:
        scale += max(abs(float(first[0])), abs(float(times[0])))
    margin = 1e-9 * scale
    starts = np.arange(0, k, stride)
    th = times[starts] - seconds - margin
    old = first.size - np.searchsorted(first, th, side="left")
    old += second.size - np.searchsorted(second, th, side="left")
    new = np.minimum(starts + stride, k) - np.searchsorted(times, th, side="left")
    return int(min(count + k, int(np.max(old + new))))


def grow_ring(sf: np.ndarray, si: np.ndarray, new_capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Copy the state into arrays with a larger ring, unrolled so that the oldest event is first."""
    B = int(si[SI_B])
    W = int(si[SI_W])
    head = int(si[SI_RING_HEAD])
    count = int(si[SI_RING_COUNT])
    order = (head + np.arange(count)) % W if W else np.zeros(0, dtype=np.int32)
    nf, ni = state_sizes(B, new_capacity)
    new_sf = np.zeros(nf, dtype=np.float64)
    new_si = np.zeros(ni, dtype=np.int64)
    new_sf[: SF_HEADER + 2 * B] = sf[: SF_HEADER + 2 * B]
    new_si[: SI_HEADER + 2 * B] = si[: SI_HEADER + 2 * B]
    for j in range(3):
        old = sf[SF_HEADER + 2 * B + j * W : SF_HEADER + 2 * B + (j + 1) * W]
        start = SF_HEADER + 2 * B + j * new_capacity
        new_sf[start : start + count] = old[order]
    old_b = si[SI_HEADER + 2 * B : SI_HEADER + 2 * B + W]
    new_si[SI_HEADER + 2 * B : SI_HEADER + 2 * B + count] = old_b[order]
    new_si[SI_W] = new_capacity
    new_si[SI_RING_HEAD] = 0
    return new_sf, new_si
