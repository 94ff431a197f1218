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

import math
from typing import NamedTuple

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import histogram as _h
from streamcal._layout import BucketLayout, check_layout, finite_range

__all__ = [
    "SAVED_NAMES",
    "HistogramRow",
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
    for k in (_h.SF_EVENTS_POS, _h.SF_EVENTS_NEG):  # decay by time's decayed event counts, as the weights
        floats[k] = fa[k] * scale_a + fb[k] * scale_b
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
#: The attributes of a :class:`WindowedHistogram` under the names a calibrator's saved state gives
#: them (state files written by earlier versions hold these keys); the layout's are
#: :attr:`streamcal._layout.BucketLayout.SAVED_NAMES`.
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
}


class HistogramRow(NamedTuple):
    """One row of a histogram as values (copies): the window's weight and event count per bucket,
    by class. Weights are in real units (decayed as of the last learned event)."""

    pos: np.ndarray
    neg: np.ndarray
    n_pos: np.ndarray
    n_neg: np.ndarray


class WindowedHistogram:
    """A windowed histogram of scored, labelled events over score buckets: what a streaming
    calibrator learns, and what its map reads.

    It stands alone: it learns events (adding them, expiring what leaves its window, decaying
    the rest) through the kernels of :mod:`streamcal._kernels.histogram`, merges with another
    histogram by its window's rule, saves itself as flat attributes, and checks a restored copy
    of itself before any kernel reads it. It owns

    - the bucket layout (:class:`streamcal._layout.BucketLayout`): score domain, edges, centres;
    - the window strategy and what the kernels read of it (``window_code``, ``uses_times``,
      ``ring_capacity``);
    - the state arrays ``floats`` and ``ints`` (laid out by :mod:`streamcal._kernels.histogram`:
      totals, clocks, the weight and count per bucket, the ring of the events in the window);
    - the quantile warm-up: while the edges are unknown (``built`` is False) the first ``warmup``
      events are buffered in ``warm`` (score, label, weight, time), with their weights summed.

    A map (streaming PAV's blocks, a refitted curve) reads the histogram; the PAV kernels learn an
    event into the histogram and the blocks in one fused pass over these arrays.

    Parameters
    ----------
    window
        The window strategy (:mod:`streamcal.windows`), already parsed from any shorthand.
    buckets
        The bucket strategy (:mod:`streamcal.buckets`), already parsed from any shorthand.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal._histogram import WindowedHistogram
    >>> from streamcal.buckets import UniformGrid
    >>> from streamcal.windows import CountWindow
    >>> hist = WindowedHistogram(CountWindow(3), UniformGrid(2, 0.0, 1.0))
    >>> b, _ = hist.layout.buckets_checked(np.array([0.1, 0.2, 0.7, 0.9]))
    >>> hist.learn_many(b, np.array([0.0, 1.0, 1.0, 1.0]), np.ones(4), np.zeros(4))
    >>> row = hist.row()
    >>> row.pos.tolist(), row.neg.tolist(), hist.n_learned   # the first event left the window
    ([1.0, 2.0], [0.0, 0.0], 4)
    """

    def __init__(self, window, buckets):
        self.window = window
        self.window_code = window.code()
        self.uses_times = bool(window.uses_times)
        self.ring_capacity = window.ring_capacity
        self.grows_ring = bool(window.grows_ring)
        self.warmup = int(buckets.warmup)
        self.floats = None
        self.ints = None
        if self.warmup:
            self.warm = np.zeros((4, self.warmup), dtype=np.float64)  # score, label, weight, time
            self.n_warm = 0
            self.warm_pos = 0.0
            self.warm_tot = 0.0
            self.warm_last_t = -np.inf
            self.strategy = buckets
        self.layout = BucketLayout(buckets)
        if self.layout.built:
            self._allocate()

    # layout -------------------------------------------------------------------------------------
    def build(self, edges: np.ndarray, centres: np.ndarray) -> None:
        """Set the bucket edges and centres (checked) and allocate the empty state."""
        self.layout.build(edges, centres)
        self._allocate()

    def _allocate(self) -> None:
        B = self.layout.n_buckets
        try:
            self.floats, self.ints = _h.empty_state(B, self.ring_capacity, self.window_code)
        except MemoryError:
            size = _h.state_sizes(B, self.ring_capacity)
            gib = (8 * (size[0] + size[1])) / 2**30
            msg = (
                f"the state of {B} buckets and a window ring of {self.ring_capacity} events "
                f"(window={self.window!r}) needs {gib:,.1f} GiB, more than can be allocated; use a smaller window."
            )
            raise ValueError(msg) from None

    @property
    def built(self) -> bool:
        """Whether the edges are known (the quantile warm-up, if any, is over)."""
        return self.floats is not None

    @property
    def n_buckets(self) -> int:
        return self.layout.n_buckets

    # learning -----------------------------------------------------------------------------------
    def learn_one(self, b: int, y: float, w: float, t: float) -> None:
        """Learn one checked event in bucket ``b``: label ``y`` (0.0 or 1.0), weight ``w``, time
        ``t`` (the event clock's kinds ignore it); what leaves the window is expired."""
        _h.histogram_learn_one_inplace(self.floats, self.ints, b, y, w, t)

    def learn_many(self, b: np.ndarray, y: np.ndarray, w: np.ndarray, t: np.ndarray) -> None:
        """Learn checked events in order (contiguous arrays: intp buckets, float64 labels,
        weights and times); a time window's ring must hold them (:meth:`ensure_ring`)."""
        _h.histogram_learn_many_inplace(self.floats, self.ints, b, y, w, t)

    # reading ------------------------------------------------------------------------------------
    @property
    def n_learned(self) -> int:
        """Events learned so far (buffered ones during the warm-up)."""
        return int(self.floats[_h.SF_N_LEARNED]) if self.built else int(self.n_warm)

    def last_time(self) -> float:
        """The clock of the last learned event (-inf before any)."""
        return float(self.floats[_h.SF_LAST_T]) if self.built else self.warm_last_t

    def stored_unit(self) -> float:
        return stored_unit(self.floats)

    def real_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """``(pos, neg)`` per bucket in real units (copies)."""
        return real_weights((self.floats, self.ints))

    def row(self) -> HistogramRow:
        """The window's weights (real units) and event counts per bucket, as values (copies)."""
        B = self.layout.n_buckets
        pos, neg = self.real_weights()
        g = _h.SI_HEADER
        return HistogramRow(pos, neg, self.ints[g : g + B].copy(), self.ints[g + B : g + 2 * B].copy())

    def ring(self) -> tuple[np.ndarray, ...]:
        """The events in the window's ring, oldest first: ``(bucket, label, weight, clock)``
        (copies; weights in stored units; empty for windows without a ring)."""
        return ring_events((self.floats, self.ints))

    def window_total(self) -> float:
        """The window's total weight in real units (the buffered weight during the warm-up)."""
        return window_total(self.floats) if self.built else float(self.warm_tot)

    def ring_size(self) -> int:
        """The ring's capacity (0 for windows without a ring)."""
        return int(self.ints[_h.SI_W])

    def renormalisations(self) -> int:
        """How many times a decay window rescaled its stored weights (diagnostic)."""
        return int(self.floats[_h.SF_N_RENORM])

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the state arrays ``(floats, ints)``, for bit-for-bit comparisons."""
        return self.floats.copy(), self.ints.copy()

    # fused readers ----------------------------------------------------------------------------
    def live_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The state arrays themselves, ``(floats, ints)``, for a map whose kernels learn an event
        into the histogram and the map in one fused pass (streaming PAV). Growing or shrinking a
        time window's ring and merging replace them: a fused reader asks again after those."""
        return self.floats, self.ints

    def adopt_arrays(self, floats: np.ndarray, ints: np.ndarray) -> None:
        """Hold these arrays, equal to the current ones, as the state from now on: a fused reader
        packs the histogram and its map into one buffer and hands back the histogram's views."""
        self.floats, self.ints = floats, ints

    # the ring of a time window ----------------------------------------------------------------
    def ensure_ring(self, extra: int, times: np.ndarray | None = None) -> bool:
        """Grow the ring to hold ``extra`` more events; True if the arrays were replaced.

        ``times``: the clocks of those ``extra`` learned events, when known; then the ring grows
        to the events the window holds at once
        (:func:`streamcal._kernels.histogram.ring_peak_bound`), not to all of them."""
        W = int(self.ints[_h.SI_W])
        need = int(self.ints[_h.SI_RING_COUNT]) + extra
        if need <= W:
            return False
        if times is not None:
            need = _h.ring_peak_bound(self.floats, self.ints, times)
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

    def warm_layout_after(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The checked edges and centres the warm-up ends with if the scores ``s`` are learned next
        (None if it does not end): computed before any of them is buffered, so that a strategy
        failing on the sample rejects the call with nothing changed."""
        need = self.warmup - self.n_warm
        if s.size < need:
            return None
        sample = np.concatenate((self.warm[0, : self.n_warm], s[:need]))
        return check_layout(self.strategy.bucket_edges(sample), self.strategy.bucket_centres(sample))

    def warm_events(self) -> tuple[np.ndarray, ...]:
        """The buffered events ``(scores, labels, weights, times)`` (copies)."""
        return tuple(np.ascontiguousarray(r[: self.n_warm]) for r in self.warm)

    def drop_warmup_buffer(self) -> None:
        """Forget the buffer and the strategy once the edges are built (the counters stay)."""
        del self.warm, self.strategy

    # merging -----------------------------------------------------------------------------------
    def merge_from(self, other: WindowedHistogram) -> None:
        """Become the histogram of the stream merged from this one then ``other`` (read only),
        by the window's rule (:meth:`streamcal.windows.Window.merge_histograms`); ValueError if
        the layouts differ."""
        if not self.layout.same_as(other.layout):
            a, b = self.n_buckets, other.n_buckets
            msg = (
                f"`calibrators` cannot be merged: different bucket edges ({a} and {b} buckets"
                f"{', differing values' if a == b else ''}). Quantile edges learned from different warm-ups "
                "differ: fix the edges with streamcal.buckets.Edges before fitting the parts."
            )
            raise ValueError(msg)
        self.floats, self.ints = self.window.merge_histograms(
            (self.floats, self.ints), (other.floats, other.ints), self.ring_capacity
        )

    # saved state -------------------------------------------------------------------------------
    def saved(self) -> dict:
        """The attributes under their saved names (:data:`SAVED_NAMES` and the layout's)."""
        state = {key: self.__dict__[name] for key, name in SAVED_NAMES.items() if name in self.__dict__}
        state.update(self.layout.saved())
        return state

    @classmethod
    def from_saved(cls, state: dict, window, buckets) -> WindowedHistogram:
        """The histogram of a checked saved state's attributes (popped from ``state``) for these
        window and bucket strategies (:meth:`check_saved` first)."""
        hist = cls.__new__(cls)
        for key, name in SAVED_NAMES.items():
            if key in state:
                hist.__dict__[name] = state.pop(key)
        hist.window = window
        hist.grows_ring = bool(window.grows_ring)
        hist.layout = BucketLayout.from_saved(state, buckets)
        _count_events_of_an_older_file(hist.__dict__.get("floats"))
        return hist

    @staticmethod
    def check_saved(state: dict, window, buckets, buckets_param) -> None:
        """Check a saved histogram's attributes (under their saved names, in ``state``) before any
        kernel reads them: the layout against the bucket strategy ``buckets`` (parsed from the
        calibrator's parameter ``buckets_param``), the arrays against the window, or the warm-up
        buffer. Raises :class:`streamcal.exceptions.StateFileError` naming what is wrong."""
        from streamcal import _state_check as c
        from streamcal.buckets import QuantileEdges

        if state.get("_sf") is None and "_warm" in state:
            _check_saved_warmup(state, window, buckets, buckets_param)
            return
        if state.get("_sf") is None or state.get("_si") is None:
            c.fail("`_sf`/`_si`: expected the histogram arrays once the bucket edges are known; found None.")
        B = BucketLayout.check_saved(state, buckets)
        check_arrays(state["_sf"], state["_si"], B, window)
        n_learned = int(state["_sf"][_h.SF_N_LEARNED])
        if type(buckets) is QuantileEdges and n_learned < buckets.warmup:
            c.fail(f"the quantile edges are known after {buckets.warmup} events; found {n_learned} learned.")


def _count_events_of_an_older_file(sf) -> None:
    """Decay by time counts the window's events apart from their weights (``SF_EVENTS_POS`` /
    ``SF_EVENTS_NEG``); a file written before it holds 0.0 there with weight in the window, and
    takes each class's weight as its count (what its prior's refits followed until then)."""
    if sf is None or sf[_h.SF_KIND] != _h.KIND_DECAY_TIME:
        return
    if sf[_h.SF_EVENTS_POS] == 0.0 and sf[_h.SF_EVENTS_NEG] == 0.0:
        sf[_h.SF_EVENTS_POS] = sf[_h.SF_T_POS]
        sf[_h.SF_EVENTS_NEG] = sf[_h.SF_T_NEG]


def _check_saved_warmup(state: dict, window, buckets, buckets_param) -> None:
    """The quantile warm-up buffer: ``_n_warm`` events of finite scores in range, 0/1 labels,
    finite non-negative weights and finite times (in order for time windows), with the sums and
    last time that learning them one by one gives."""
    from streamcal import _state_check as c

    warmup = state["_warmup"]
    n = c.need_int(state["_n_warm"], "_n_warm", 0, warmup - 1)
    warm = c.need_array(state["_warm"], "_warm", np.float64, ndim=2, shape=(4, warmup))
    # the strategy ``buckets`` means: the parameter itself, or the one a shorthand names
    strategy = state["_strategy"]
    if strategy is not buckets_param and not (
        type(strategy) is type(buckets) and repr(strategy) == repr(buckets)
    ):
        c.fail("`_strategy`: expected the bucket strategy of `buckets`.")
    if state.get("_si") is not None:
        c.fail(f"`_si`: expected None during the quantile warm-up; found {c.brief(state['_si'])}.")
    low, high = finite_range(buckets.score_range)
    s, y, w, t = warm[:, :n]
    c.need_finite(s, "_warm scores", low=low, high=high)
    if not ((y == 0.0) | (y == 1.0)).all():
        c.fail("`_warm` labels: expected 0.0 or 1.0.")
    c.need_finite(w, "_warm weights", low=0.0)
    c.need_finite(t, "_warm times")
    pos = tot = 0.0
    for wi, yi in zip(w.tolist(), y.tolist(), strict=True):  # the order learning added them in
        tot += wi
        if yi > 0.5:
            pos += wi
    if not (c.same_float(state["_warm_pos"], pos) and c.same_float(state["_warm_tot"], tot)):
        c.fail(
            f"`_warm_pos`/`_warm_tot`: expected {pos!r}/{tot!r} (the buffered weights); "
            f"found {c.brief(state['_warm_pos'])}/{c.brief(state['_warm_tot'])}."
        )
    last = -math.inf
    if window.uses_times and n:
        c.need_increasing(t, "_warm times", strict=False)
        last = float(t[-1])
    if not c.same_float(state["_warm_last_t"], last):
        c.fail(f"`_warm_last_t`: expected {last!r}; found {c.brief(state['_warm_last_t'])}.")


# ---------------------------------------------------------------------------------------- restored arrays
def check_arrays(sf, si, n_buckets: int, window) -> None:
    """The windowed histogram ``(sf, si)`` of ``n_buckets`` buckets (layout in
    :mod:`streamcal._kernels.histogram`) for ``window`` (a :class:`streamcal.windows.Window`):
    every invariant the kernels rely on, and the bookkeeping that the kernels keep. What depends
    on the window's kind (its ring, its clock, its decay) the window says
    (``check_saved_ring_capacity``, ``check_saved_ring``, ``event_clock``, ``decays``).

    Sizes agree with the bucket count and the ring capacity; the header holds the window's
    parameters; weights are finite and non-negative, with a finite total in real units; event
    counts are non-negative, and a bucket or class with no event holds no weight; the ring's
    head and count are within its capacity, and each event in it has a bucket in range, a 0/1
    label, a finite non-negative weight and a clock in order, and the events agree with the
    per-bucket counts; clocks, decay frame and renormalisation counter agree with the number of
    learned events.
    """
    from streamcal import _state_check as c

    h = _h
    fail, need_array, need_finite = c.fail, c.need_array, c.need_finite

    B = n_buckets
    kind, n, seconds, half_life = window.code()
    need_array(sf, "_sf", np.float64)
    need_array(si, "_si", np.int64)
    if si.size < h.SI_HEADER or sf.size < h.SF_HEADER:
        fail(f"`_sf`/`_si`: expected at least {h.SF_HEADER}/{h.SI_HEADER} values; found {sf.size}/{si.size}.")
    if int(si[h.SI_B]) != B:
        fail(f"`_si` bucket count: expected {B} (the bucket centres); found {int(si[h.SI_B])}.")
    W = int(si[h.SI_W])
    checks = c  # the check helpers, for the window's own checks
    window.check_saved_ring_capacity(W, checks)
    nf, ni = h.state_sizes(B, W)
    if sf.size != nf or si.size != ni:
        fail(f"`_sf`/`_si`: expected {nf}/{ni} values for {B} buckets and a ring of {W}; found {sf.size}/{si.size}.")
    header = {
        "kind": (h.SF_KIND, float(kind)),
        "count window size": (h.SF_WINDOW_N, float(n)),
        "time window span": (h.SF_SECONDS, float(seconds)),
        "half-life": (h.SF_HALF_LIFE, float(half_life)),
    }
    for what, (i, want) in header.items():
        if sf[i] != want:  # also NaN
            fail(f"`_sf` window {what}: expected {want!r} (from the window's parameters); found {float(sf[i])!r}.")

    n_learned = float(sf[h.SF_N_LEARNED])
    if not (0.0 <= n_learned <= 2.0**53 and n_learned == math.floor(n_learned)):
        fail(f"`_sf` number of learned events: expected a whole number >= 0; found {n_learned!r}.")
    last_t, t0, renorm = float(sf[h.SF_LAST_T]), float(sf[h.SF_T0]), float(sf[h.SF_N_RENORM])
    decay = window.decays
    event_clock = window.event_clock
    if not (0.0 <= renorm <= n_learned and renorm == math.floor(renorm)) or (renorm and not decay):
        fail(f"`_sf` renormalisation count: expected a whole number in [0, learned events]; found {renorm!r}.")
    if not math.isfinite(t0) or (t0 != 0.0 and (not decay or n_learned == 0)):
        fail(f"`_sf` decay reference clock: expected 0.0 here; found {t0!r}.")
    if n_learned == 0:
        if last_t != -math.inf:
            fail(f"`_sf` last clock: expected -inf before any learned event; found {last_t!r}.")
    elif event_clock and last_t != n_learned - 1.0:
        fail(f"`_sf` last clock: expected {n_learned - 1.0!r} (the last event's number); found {last_t!r}.")
    elif not math.isfinite(last_t):
        fail(f"`_sf` last clock: expected a finite time; found {last_t!r}.")

    pos = sf[h.SF_HEADER : h.SF_HEADER + B]
    neg = sf[h.SF_HEADER + B : h.SF_HEADER + 2 * B]
    npos = si[h.SI_HEADER : h.SI_HEADER + B]
    nneg = si[h.SI_HEADER + B : h.SI_HEADER + 2 * B]
    need_finite(pos, "_sf positive weights", low=0.0)
    need_finite(neg, "_sf negative weights", low=0.0)
    t_pos, t_neg = float(sf[h.SF_T_POS]), float(sf[h.SF_T_NEG])
    for what, v in (("positive", t_pos), ("negative", t_neg)):
        if not (math.isfinite(v) and v >= 0.0):
            fail(f"`_sf` total {what} weight: expected a finite number >= 0; found {v!r}.")
    events = (float(sf[h.SF_EVENTS_POS]), float(sf[h.SF_EVENTS_NEG]))
    if kind == h.KIND_DECAY_TIME:
        for what, v in zip(("positive", "negative"), events, strict=True):
            if not (math.isfinite(v) and v >= 0.0):
                fail(f"`_sf` decayed count of {what} events: expected a finite number >= 0; found {v!r}.")
    elif events != (0.0, 0.0):
        fail(f"`_sf` decayed event counts: expected 0.0 and 0.0 (decay by time keeps them); found {events}.")
    for name, counts in (("_si positive counts", npos), ("_si negative counts", nneg)):
        if (counts < 0).any():
            i = int(np.flatnonzero(counts < 0)[0])
            fail(f"`{name}`: expected counts >= 0; found {int(counts[i])} at bucket {i}.")
    for cls, weights, counts in (("positive", pos, npos), ("negative", neg, nneg)):
        phantom = (counts == 0) & (weights != 0.0)
        if phantom.any():
            i = int(np.flatnonzero(phantom)[0])
            fail(f"`_sf` {cls} weight of bucket {i}: expected 0.0 (the bucket holds no event); found {weights[i]!r}.")
    with np.errstate(over="ignore"):
        total = float(pos.sum()) + float(neg.sum()) + t_pos + t_neg
    unit = 1.0
    if decay and n_learned > 0:
        exponent = (last_t - t0) / float(half_life)
        if not exponent <= h.DECAY_RENORM_EXPONENT:  # also NaN
            fail(
                f"`_sf` decay frame: expected (last clock - reference) / half-life <= "
                f"{h.DECAY_RENORM_EXPONENT}; found {exponent!r}."
            )
        unit = 2.0**exponent
    if not math.isfinite(total) or (unit == 0.0 and total != 0.0) or (unit > 0.0 and not math.isfinite(total / unit)):
        fail("`_sf` weights: expected a finite total weight in real units; found an overflowing one.")

    n_pos, n_neg = int(si[h.SI_N_POS]), int(si[h.SI_N_NEG])
    if n_pos != int(npos.sum()) or n_neg != int(nneg.sum()):
        fail(
            f"`_si` class counts: expected {int(npos.sum())} and {int(nneg.sum())} (the sums over buckets); "
            f"found {n_pos} and {n_neg}."
        )
    if (n_pos == 0 and t_pos != 0.0) or (n_neg == 0 and t_neg != 0.0):
        fail("`_sf` class totals: expected 0.0 for a class with no event in the window.")
    if (n_pos == 0 and events[0] != 0.0) or (n_neg == 0 and events[1] != 0.0):
        fail("`_sf` decayed event counts: expected 0.0 for a class with no event in the window.")
    if n_pos + n_neg > n_learned:
        fail(f"`_si` class counts: {n_pos + n_neg} events in the window, more than the {n_learned!r} learned.")

    _check_ring(sf, si, B, window, n_learned, last_t)


def _check_ring(sf, si, B: int, window, n_learned: float, last_t: float) -> None:
    """The ring of a restored histogram (:func:`check_arrays` has checked everything else)."""
    from streamcal import _state_check as c

    h = _h
    fail, need_finite = c.fail, c.need_finite
    checks = c  # the check helpers, for the window's own checks
    W = int(si[h.SI_W])
    npos = si[h.SI_HEADER : h.SI_HEADER + B]
    nneg = si[h.SI_HEADER + B : h.SI_HEADER + 2 * B]
    n_pos, n_neg = int(si[h.SI_N_POS]), int(si[h.SI_N_NEG])
    head, count = int(si[h.SI_RING_HEAD]), int(si[h.SI_RING_COUNT])
    if not window.keeps_ring:
        if head != 0 or count != 0:
            fail(f"`_si` ring head and count: expected 0 and 0 (no ring); found {head} and {count}.")
        return
    if not 0 <= count <= W:
        fail(f"`_si` ring count: expected an int in [0, {W}]; found {count}.")
    if not 0 <= head < W:
        fail(f"`_si` ring head: expected an int in [0, {W - 1}]; found {head}.")
    if count != n_pos + n_neg:
        fail(f"`_si` ring count: expected {n_pos + n_neg} (the events in the window); found {count}.")
    window.check_saved_ring_count(count, n_learned, checks)
    at = (head + np.arange(count)) % W
    base = h.SF_HEADER + 2 * B
    rw = sf[base : base + W][at]
    ry = sf[base + W : base + 2 * W][at]
    rt = sf[base + 2 * W : base + 3 * W][at]
    rb = si[h.SI_HEADER + 2 * B : h.SI_HEADER + 2 * B + W][at]
    if ((rb < 0) | (rb >= B)).any():
        i = int(np.flatnonzero((rb < 0) | (rb >= B))[0])
        fail(f"`_si` ring buckets: expected buckets in [0, {B - 1}]; found {int(rb[i])} at ring position {int(at[i])}.")
    if not ((ry == 0.0) | (ry == 1.0)).all():
        i = int(np.flatnonzero(~((ry == 0.0) | (ry == 1.0)))[0])
        fail(f"`_sf` ring labels: expected 0.0 or 1.0; found {ry[i]!r} at ring position {int(at[i])}.")
    need_finite(rw, "_sf ring weights", low=0.0)
    need_finite(rt, "_sf ring clocks")
    positive = ry == 1.0
    for cls, mask, counts in (("positive", positive, npos), ("negative", ~positive, nneg)):
        if not np.array_equal(np.bincount(rb[mask], minlength=B), counts):
            fail(f"`_si` {cls} counts per bucket: expected the ring's {cls} events per bucket.")
    if count:
        window.check_saved_ring_clocks(rt, n_learned, last_t, checks)
