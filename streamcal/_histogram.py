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

from streamcal._kernels import _config
from streamcal._kernels import histogram as _h

__all__ = [
    "SAVED_NAMES",
    "WindowedHistogram",
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


def added(
    a: State, b: State, *, scale_a: float, scale_b: float = 1.0, event_clock: bool, frame_follows: bool = False
) -> State:
    """The sum of two histograms without a ring (stored units, scaled), in ``b``'s header frame.

    With an event clock, ``b``'s events come after ``a``'s: the last clock moves on by the number
    of events ``a`` learned, and so does the frame's origin when ``frame_follows`` (a decay by
    events).
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
        if frame_follows:
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
    _config.run(
        _h.histogram_learn_many_inplace,
        len(buckets),
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


# ---------------------------------------------------------------------------------------- the object
#: The attributes of a :class:`WindowedHistogram` under the names a calibrator's saved state
#: gives them (state files written by earlier versions hold these keys).
SAVED_NAMES = {
    "_window_code": "window_code",
    "_uses_times": "uses_times",
    "_ring_capacity": "ring_capacity",
    "_warmup": "warmup",
    "_sf": "floats",
    "_si": "ints",
    "_warm": "warm",
    "_n_warm": "n_warm",
    "_warm_pos": "warm_pos",
    "_warm_tot": "warm_tot",
    "_warm_last_t": "warm_last_t",
    "_strategy": "strategy",
    "_edges": "edges",
    "_cuts": "cuts",
    "_cuts_list": "cuts_list",
    "_centres": "centres",
    "_centres_list": "centres_list",
}


class WindowedHistogram:
    """A windowed histogram of scored, labelled events over score buckets: what a streaming
    calibrator learns, and what its map reads.

    It owns

    - the bucket layout: ``edges`` (``B + 1``), ``cuts`` (the interior edges), ``centres`` (``B``),
      the lists of both for the river face's ``bisect``, and ``guide`` (the kernels' bucket search);
    - the window: ``window_code`` (what the kernels read), ``uses_times``, ``ring_capacity``;
    - the state arrays ``floats`` and ``ints`` (:mod:`streamcal._kernels.histogram` lays them out:
      totals, clocks, the weight and count per bucket, the ring of the events in the window);
    - the quantile warm-up: while the edges are unknown (``floats is None``) the first ``warmup``
      events are buffered in ``warm`` (score, label, weight, time), with their weights summed.

    The kernels learn and expire events in place; the histogram grows and shrinks a time window's
    ring, gives the window's weights in real units, merges with another histogram through the
    window's rule, and maps itself to and from the flat attributes of a saved state
    (:data:`SAVED_NAMES`). A streaming calibrator holds one as ``_hist``.
    """

    def __init__(self, window, warmup: int = 0, strategy=None):
        self.window_code = window.code()
        self.uses_times = bool(window.uses_times)
        self.ring_capacity = window.ring_capacity
        self.grows_ring = bool(window.grows_ring)
        self.warmup = int(warmup)
        self.floats = None
        self.ints = None
        if self.warmup:
            self.warm = np.zeros((4, self.warmup), dtype=np.float64)  # score, label, weight, time
            self.n_warm = 0
            self.warm_pos = 0.0
            self.warm_tot = 0.0
            self.warm_last_t = -np.inf
            self.strategy = strategy

    # layout -------------------------------------------------------------------------------------
    def build(self, edges: np.ndarray, centres: np.ndarray) -> None:
        """Allocate the empty state for these (checked) edges and centres; MemoryError if too big."""
        self.edges = np.ascontiguousarray(edges, dtype=np.float64)
        self.cuts = np.ascontiguousarray(self.edges[1:-1])
        self.cuts_list = self.cuts.tolist()
        self.guide = _h.bucket_guide(self.cuts)
        self.centres = np.ascontiguousarray(centres, dtype=np.float64)
        self.centres_list = self.centres.tolist()
        self.floats, self.ints = _h.empty_state(self.centres.size, self.ring_capacity, self.window_code)

    @property
    def built(self) -> bool:
        """Whether the edges are known (the quantile warm-up, if any, is over)."""
        return self.floats is not None

    @property
    def n_buckets(self) -> int:
        return int(self.centres.size)

    def buckets_checked(self, s: np.ndarray, low: float, high: float) -> tuple[np.ndarray, int]:
        """``(buckets, bad)``: the scores' buckets, found in the pass that checks them; ``bad`` is
        the position of the first score that is not finite or outside ``[low, high]`` (-1: none;
        then the buckets are not all written)."""
        b = np.empty(s.size, dtype=np.intp)
        bad = _config.run(_h.check_bucket_index, s.size, self.cuts, self.guide, low, high, s, b)
        return b, bad

    # reading ------------------------------------------------------------------------------------
    @property
    def n_learned(self) -> int:
        return int(self.floats[_h.SF_N_LEARNED]) if self.built else int(self.n_warm)

    def last_time(self) -> float:
        """The clock of the last learned event (-inf before any)."""
        return float(self.floats[_h.SF_LAST_T]) if self.built else self.warm_last_t

    def stored_unit(self) -> float:
        return stored_unit(self.floats)

    def real_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """``(pos, neg)`` per bucket in real units (copies)."""
        return real_weights((self.floats, self.ints))

    def window_total(self) -> float:
        """The window's total weight in real units (the buffered weight during the warm-up)."""
        return window_total(self.floats) if self.built else float(self.warm_tot)

    # the ring of a time window ----------------------------------------------------------------
    def ensure_ring(self, extra: int) -> bool:
        """Grow the ring to hold ``extra`` more events; True if the arrays were replaced."""
        W = int(self.ints[_h.SI_W])
        need = int(self.ints[_h.SI_RING_COUNT]) + extra
        if need <= W:
            return False
        self.floats, self.ints = _h.grow_ring(self.floats, self.ints, max(2 * W, 1 << (need - 1).bit_length()))
        return True

    def shrink_ring(self) -> bool:
        """Shrink a ring far larger than the events it holds; True if the arrays were replaced."""
        W = int(self.ints[_h.SI_W])
        count = int(self.ints[_h.SI_RING_COUNT])
        target = max(1024, 1 << (2 * count).bit_length())
        if 4 * target >= W:
            return False
        self.floats, self.ints = _h.grow_ring(self.floats, self.ints, target)
        return True

    # the quantile warm-up ----------------------------------------------------------------------
    def warm_add(self, s: float, y: float, w: float, t: float) -> bool:
        """Buffer one warm-up event; True when the buffer is full (the edges can be built)."""
        k = self.n_warm
        self.warm[:, k] = (s, y, w, t)
        self.n_warm = k + 1
        self.warm_tot += w
        if y > 0.5:
            self.warm_pos += w
        if self.uses_times:
            self.warm_last_t = t
        return self.n_warm == self.warmup

    def warm_sample_after(self, s: np.ndarray) -> np.ndarray | None:
        """The warm-up's score sample if the scores ``s`` are learned next (None if it does not end)."""
        need = self.warmup - self.n_warm
        if s.size < need:
            return None
        return np.concatenate((self.warm[0, : self.n_warm], s[:need]))

    def drop_warmup_buffer(self) -> None:
        """Forget the buffer and the strategy once the edges are built (the counters stay)."""
        del self.warm, self.strategy

    # merging -----------------------------------------------------------------------------------
    def same_layout(self, other: WindowedHistogram) -> bool:
        return np.array_equal(self.edges, other.edges) and np.array_equal(self.centres, other.centres)

    def merge_from(self, other: WindowedHistogram, window) -> None:
        """Become the histogram of the stream merged from this one then ``other`` (read only),
        by the window's rule (:meth:`streamcal.windows.Window.merge_histograms`)."""
        self.floats, self.ints = window.merge_histograms(
            (self.floats, self.ints), (other.floats, other.ints), self.ring_capacity
        )

    # saved state -------------------------------------------------------------------------------
    def saved(self) -> dict:
        """The attributes under their saved names (:data:`SAVED_NAMES`), the caches left out."""
        return {key: self.__dict__[name] for key, name in SAVED_NAMES.items() if name in self.__dict__}

    @classmethod
    def from_saved(cls, state: dict) -> WindowedHistogram:
        """The histogram of a saved state's attributes (popped from ``state``), checked before."""
        hist = cls.__new__(cls)
        for key, name in SAVED_NAMES.items():
            if key in state:
                hist.__dict__[name] = state.pop(key)
        if hist.built:
            hist.guide = _h.bucket_guide(hist.cuts)
        hist.grows_ring = bool(hist.ring_capacity and hist.uses_times)
        return hist
