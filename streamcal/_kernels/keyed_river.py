"""The keyed river face's single event at a time ``t`` (numba).

:func:`river_learn_at` is :func:`streamcal._kernels.keyed.river_learn` for an event that carries a
time: it takes what the array face's checks accept and what its machinery runs without resizing
anything, and refuses, having changed nothing, what the general path must check or run itself:

- a time that is not finite, and under a window with times (a time window, decay by time) a time
  before the global map's last learned time (the general path raises);
- under a time window, an event for which the general path resizes the global map's ring. Before
  it learns events the general path grows a full ring when the events it holds at the new time
  (:func:`streamcal._kernels.histogram.ring_peak_bound`, read here for one event as it reads it)
  exceed its capacity; after them it shrinks a ring four times larger than it needs
  (``WindowedHistogram.shrink_ring``). This kernel computes both tests from the ring's clocks,
  by the same operations on the same numbers.

A key's own ring grows inside the kernels (:data:`~streamcal._kernels.keyed.NO_ROOM` asks for room).
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.histogram import (
    KIND_DECAY_TIME,
    KIND_TIME,
    SF_HEADER,
    SF_LAST_T,
    SF_SECONDS,
    SI_B,
    SI_RING_COUNT,
    SI_RING_HEAD,
    SI_W,
)
from streamcal._kernels.ipav import PACK_BUSY, PACK_HEADER, PACK_O_PF, PACK_O_SI
from streamcal._kernels.keyed import CFG_KIND, REFUSED, river_learn

__all__ = ["ring_keeps_size", "river_learn_at"]

RING_SHRINK_FLOOR = 1024  # ``WindowedHistogram.shrink_ring``'s least target
PEAK_MARGIN = 1e-9  # ``ring_peak_bound``'s relative margin


@jit_noalloc(forceinline=True)
def ring_keeps_size(sf, si, t):
    """Whether the general path learns an event at ``t`` (not before the ring's last clock) into
    a time window's ring (``sf``, ``si``: the histogram's arrays) without resizing it: a full ring
    is not grown (the events it holds at ``t``, bounded as ``ring_peak_bound`` bounds them, fit),
    and the ring after the event is not shrunk (``shrink_ring``)."""
    W = si[SI_W]
    count = si[SI_RING_COUNT]
    head = si[SI_RING_HEAD]
    clocks = SF_HEADER + 2 * si[SI_B] + 2 * W  # the ring's clocks, oldest at ``head``
    seconds = sf[SF_SECONDS]
    gone = np.int64(0)  # the events that leave before ``t``, as the learning expires them
    while gone < count:
        at = head + gone
        if at >= W:
            at -= W
        if not (t - sf[clocks + at] >= seconds):
            break
        gone += 1
    if count == W:  # full: ``ensure_ring`` asks ``ring_peak_bound`` for one event at ``t``
        if count == 0 or gone == 0:
            return False
        scale = abs(t) + seconds
        scale += max(abs(sf[clocks + head]), abs(t))
        th = t - seconds - PEAK_MARGIN * scale
        below = np.int64(0)  # the clocks below ``th`` (a prefix: the clocks never decrease)
        while below < count:
            at = head + below
            if at >= W:
                at -= W
            if not (sf[clocks + at] < th):
                break
            below += 1
        held = count - below + (0 if t < th else 1)
        if min(count + 1, held) > W:
            return False
    target = np.int64(1)  # ``shrink_ring``'s target after the event: 1 << (2 * count).bit_length()
    while target <= 2 * (count - gone + 1):
        target <<= 1
    return not 4 * max(target, RING_SHRINK_FLOOR) < W


@jit_noalloc(nogil=False)  # a per-event call: releasing the GIL would cost more than the kernel saves
def river_learn_at(packed, cfg, kf, ki, ab, af, an, rb, rf, qb, qf, arena, holes, prior, pri, sb, sw, k, s, y, w, t,
                   stamp):
    """:func:`streamcal._kernels.keyed.river_learn` for an event at time ``t``; besides what it
    refuses, :data:`~streamcal._kernels.keyed.REFUSED` (nothing changed) for ``t`` not finite,
    and under a window with times for ``t`` before the global map's last learned time, or an
    event for which the general path resizes the global map's ring (:func:`ring_keeps_size`)."""
    if not math.isfinite(t):
        return REFUSED
    kind = cfg[CFG_KIND]
    if (kind == KIND_TIME) | (kind == KIND_DECAY_TIME):
        if packed[PACK_BUSY] != 0.0:
            return REFUSED
        o_si, o_pf = int(packed[PACK_O_SI]), int(packed[PACK_O_PF])
        sf, si = packed[PACK_HEADER:o_si], packed[o_si:o_pf].view(np.int64)
        if t < sf[SF_LAST_T]:
            return REFUSED
        if kind == KIND_TIME and not ring_keeps_size(sf, si, t):
            return REFUSED
    return river_learn(packed, cfg, kf, ki, ab, af, an, rb, rf, qb, qf, arena, holes, prior, pri, sb, sw, k, s, y, w,
                       t, stamp)
