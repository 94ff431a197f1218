"""The replay clock: which labels are learned before which predictions.

The rule (documented in ``docs/replay.md``): events are predicted in event order. The label of event
``i``, known at label time ``L_i >= t_i``, is learned just before the first *later* event ``j > i``
whose event time is at or after it (``t_j >= L_i``). So a label whose label time equals an event's
time is learned before that event is predicted, but an event's own label is never learned before its
own prediction (prequential). Labels learned before the same event go in order of label time, ties
by event order. With ``L_i = t_i`` for all events this is exactly ``prequential``.

Per record batch :func:`plan_batch` turns the labels in flight plus the batch's events into one
ordered operation sequence for ``process(scores, labels, learn_mask, weights=, times=)``; learn
operations carry their label time as time (so the sequence's times never go backwards). Labels
whose time has not come by the end of the batch stay in flight, in order of (label time, event).

:class:`Planner` is the replay's planner stage: it holds the labels in flight and the clock from
batch to batch. The kernel moves the score, label and weight; any other planned column of
:class:`~streamcal.replay._batch.EventBatch` goes with its label by name (``extra``), so a new
column needs no change here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import plan as _plan
from streamcal.replay._batch import EventBatch

__all__ = ["InFlight", "LabelDelays", "Ops", "Planner", "delay_text", "first_plan_call", "plan_batch", "plan_flush"]

# the planned columns the kernel moves itself; the others travel by name in ``extra``
_KERNEL_COLUMNS = ("s", "y", "w")


@dataclass
class InFlight:
    """Labels not learned yet, in order of (label time, event): label time, score, label, weight,
    event index, and the other planned columns by name."""

    label_t: np.ndarray
    s: np.ndarray
    y: np.ndarray
    w: np.ndarray | None
    index: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def empty(cls, weighted: bool) -> InFlight:
        f = np.empty(0, dtype=np.float64)
        return cls(f, f, f, f if weighted else None, np.empty(0, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.index.size)


@dataclass
class Ops:
    """An operation sequence: learn where ``learn`` is True, else predict; ``pred_pos`` are the
    positions of the batch's events (in event order) in the sequence."""

    s: np.ndarray
    y: np.ndarray
    learn: np.ndarray
    t: np.ndarray
    w: np.ndarray | None
    pred_pos: np.ndarray
    n_learn: int
    learn_index: np.ndarray | None = None  # event index of each learn operation, in order
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # other planned columns, per operation
    n_never: int = 0  # the batch's labels that never arrive (label time +inf): dropped, never in flight

    def event_of(self, position: int, first_index: int) -> int:
        """The (whole-stream) index of the event an operation position belongs to."""
        if self.learn[position]:
            rank = int(np.count_nonzero(self.learn[:position]))
            return int(self.learn_index[rank])
        return first_index + int(np.searchsorted(self.pred_pos, position))


def _stable_order(x: np.ndarray) -> np.ndarray:
    """Stable sorting permutation of ``x`` (the identity when ``x`` is already sorted)."""
    if x.size < 2 or not bool(np.any(x[1:] < x[:-1])):
        return np.arange(x.size, dtype=np.int64)
    return np.argsort(x, kind="stable").astype(np.int64, copy=False)


def _merged_order(flight_t: np.ndarray, label_t: np.ndarray) -> np.ndarray:
    """The stable sorting permutation of ``concatenate((flight_t, label_t))`` when ``flight_t`` is
    already sorted: only the batch's labels are sorted, then merged in (ties: the labels in
    flight first, as a stable sort of the concatenation puts them). Linear in the labels in flight,
    so that a long flight (labels days late) costs no sort per batch."""
    f = flight_t.size
    batch = _stable_order(label_t)
    if f == 0:
        return batch
    b = batch.size
    # where each of the batch's labels lands: after the labels in flight at or before it
    at = np.searchsorted(flight_t, label_t[batch], side="right") + np.arange(b)
    order = np.empty(f + b, dtype=np.int64)
    order[at] = batch + f
    rest = np.ones(f + b, dtype=bool)
    rest[at] = False
    order[rest] = np.arange(f, dtype=np.int64)
    return order


def _merged_order_kernels(flight_t: np.ndarray, label_t: np.ndarray) -> np.ndarray:
    """:func:`_merged_order` by the compiled kernels: the batch's labels are split in one pass
    into those rising over every earlier one (in order already) and the others, only the others
    are sorted (stably), and one pass merges the labels in flight and the two runs. Linear in
    the labels in flight and the batch's, plus the sort of the labels that come out of order."""
    b = label_t.size
    rising = np.empty(b, dtype=np.int64)
    rest = np.empty(b, dtype=np.int64)
    n_rising = _plan.plan_split_rising(label_t, rising, rest)
    n_rest = b - n_rising
    if n_rest:
        rest = rest[:n_rest]
        rest = rest[np.argsort(label_t[rest], kind="stable")]
    order = np.empty(flight_t.size + b, dtype=np.int64)
    _plan.plan_merge_order(flight_t, label_t, rising, n_rising, rest, n_rest, order)
    return order


def first_plan_call() -> None:
    """A first call of the planner's compiled kernels on empty arrays (of the types
    :func:`plan_batch` passes them), for :func:`streamcal._kernels._config.switch_ahead`."""
    f, i = np.empty(0), np.empty(0, dtype=np.int64)
    _plan.plan_split_rising(f, i, i)


def _f64(a: np.ndarray | None) -> np.ndarray:
    return _EMPTY if a is None else np.ascontiguousarray(a, dtype=np.float64)


_EMPTY = np.empty(0, dtype=np.float64)


def plan_batch(
    flight: InFlight,
    t: np.ndarray,
    s: np.ndarray,
    y: np.ndarray,
    label_t: np.ndarray,
    w: np.ndarray | None,
    first_index: int,
    *,
    extra: Mapping[str, np.ndarray] | None = None,
) -> tuple[Ops, InFlight]:
    """Merge the labels in flight and a batch of events (times non-decreasing) into one sequence.

    Returns the operations and the labels still in flight after the batch; labels that never
    arrive (label time +inf) are not kept in flight, only counted (``ops.n_never``). ``extra`` holds
    further per-event columns of the batch by name; each comes out per operation in
    ``ops.extra`` and is carried with the labels in flight.

    Candidates (labels in flight, then this batch's labels) are ordered by (label time, event):
    the labels in flight are already in that order and all precede the batch's events, so only
    the batch's labels are sorted (stably) and merged in. Each label goes before event
    ``j = max(searchsorted(t, label time), own event + 1)``; in (label time, event) order ``j``
    never decreases (a label forced after its own event ``i``
    has label time ``t_i``, and any later label time ``L > t_i`` has ``searchsorted(t, L) > i``),
    so the labels learned in this batch are a prefix of that order and the rest stays in order.
    One pass of :func:`streamcal._kernels.plan.plan_merge` then writes the sequence.
    """
    n = t.size
    m_flight = len(flight)
    weighted = w is not None
    t, s, y, label_t, w = _f64(t), _f64(s), _f64(y), _f64(label_t), _f64(w)
    # the kernels once the process runs compiled ones; before, numpy's sort and merge
    order = (_merged_order_kernels if _config.is_compiled() else _merged_order)(flight.label_t, label_t)
    m = order.size
    fw = _f64(flight.w)
    # a label learned in this batch goes before one of its events, so its label time is at most
    # the last event time: that bounds the learned labels (the operation arrays need not hold
    # every label in flight, which may be many times the batch when labels come days late)
    due = 0
    if n:
        due = int(np.searchsorted(flight.label_t, t[-1], side="right")) + int(np.count_nonzero(label_t <= t[-1]))
    op_s = np.empty(n + due)
    op_y = np.empty(n + due)
    op_t = np.empty(n + due)
    op_w = np.empty(n + due) if weighted else _EMPTY
    learn = np.empty(n + due, dtype=bool)
    pred_pos = np.empty(n, dtype=np.int64)
    learn_index = np.empty(due, dtype=np.int64)
    # the kernels state their operations: a short replay plans in the interpreted tier
    k = _config.run(
        _plan.plan_merge,
        n + due,
        order, m_flight, flight.label_t, flight.s, flight.y, fw, flight.index,
        t, s, y, label_t, w, first_index, weighted,
        op_s, op_y, op_t, op_w, learn, pred_pos, learn_index,
    )
    size = n + k
    # the labels that never arrive sort last (label time +inf; none is in flight): dropped here
    never = int(np.count_nonzero(label_t == np.inf))
    order = order[: m - never]
    left = m - never - k
    rest = [np.empty(left) for _ in range(3)]
    rest_w = np.empty(left) if weighted else _EMPTY
    rest_i = np.empty(left, dtype=np.int64)
    _config.run(
        _plan.plan_gather_flight,
        left,
        order, k, m_flight, flight.label_t, flight.s, flight.y, fw, flight.index,
        s, y, label_t, w, first_index, weighted,
        *rest, rest_w, rest_i,
    )
    ops_extra, rest_extra = _gather_extra(flight, extra, order, k, learn[:size], pred_pos)
    ops = Ops(
        op_s[:size], op_y[:size], learn[:size], op_t[:size], op_w[:size] if weighted else None,
        pred_pos, k, learn_index[:k], ops_extra, never,
    )
    return ops, InFlight(*rest, rest_w if weighted else None, rest_i, rest_extra)


def _gather_extra(flight: InFlight, extra, order, k, learn, pred_pos):
    """The ``extra`` columns per operation, and those of the labels still in flight: learn
    operation ``c`` is candidate ``order[c]`` (a label in flight, then the batch's events), the
    predictions are the batch's events at ``pred_pos``."""
    ops_extra, rest_extra = {}, {}
    if not extra:
        return ops_extra, rest_extra
    learn_at = np.flatnonzero(learn)
    for name, values in extra.items():
        held = flight.extra.get(name)
        pool = values if held is None or not held.size else np.concatenate((held, values))
        op = np.empty(learn.size, dtype=pool.dtype)
        op[learn_at] = pool[order[:k]]
        op[pred_pos] = values
        ops_extra[name] = op
        rest_extra[name] = pool[order[k:]]
    return ops_extra, rest_extra


def plan_flush(flight: InFlight, clock: float) -> tuple[Ops, InFlight]:
    """At the end of the stream: learn the labels whose time is at or before ``clock`` (the last
    event time), in order of label time then event; the others stay in flight."""
    k = int(np.searchsorted(flight.label_t, clock, side="right"))
    ops = Ops(
        flight.s[:k],
        flight.y[:k],
        np.ones(k, dtype=bool),
        flight.label_t[:k],
        None if flight.w is None else flight.w[:k],
        np.empty(0, dtype=np.int64),
        k,
        flight.index[:k],
        {name: values[:k] for name, values in flight.extra.items()},
    )
    left = InFlight(
        flight.label_t[k:],
        flight.s[k:],
        flight.y[k:],
        None if flight.w is None else flight.w[k:],
        flight.index[k:],
        {name: values[k:] for name, values in flight.extra.items()},
    )
    return ops, left


class LabelDelays:
    """Per class (negatives, positives), the labels with a label time and the sum and largest of
    their delays (label time less event time): whether the two classes' labels arrive after
    different delays, which biases every calibrator while one class's labels are in flight."""

    def __init__(self):
        self.n = np.zeros(2, dtype=np.int64)
        self.total = np.zeros(2)
        self.longest = 0.0

    def add(self, t: np.ndarray, y: np.ndarray, label_t: np.ndarray) -> None:
        d = label_t - t
        positive = y == 1.0
        known = np.isfinite(d)  # +inf: the label never arrives
        if not known.all():
            d, positive = d[known], positive[known]
        n_pos = int(np.count_nonzero(positive))
        for c, count, mask in ((0, d.size - n_pos, ~positive), (1, n_pos, positive)):
            self.n[c] += count
            self.total[c] += float(d[mask].sum())
        if d.size:
            self.longest = max(self.longest, float(d.max()))

    def mean(self, c: int) -> float:
        return self.total[c] / self.n[c] if self.n[c] else float("nan")

    def note(self, n_events: int, span: float, timestamps: bool) -> str | None:
        """A line for the summary when the classes' mean delays differ by half the shorter one or
        more, and by at least 100 events' time at the stream's rate (``n_events`` over ``span``);
        None otherwise. ``timestamps``: the times are seconds of a timestamp column."""
        from streamcal.replay._source import opt

        if min(self.n) < MIN_DELAY_LABELS or not span > 0.0:
            return None
        neg, pos = self.mean(0), self.mean(1)
        short, long_ = sorted((neg, pos))
        if not (long_ >= 1.5 * short and (long_ - short) * n_events / span >= 100.0):
            return None
        fmt = _duration if timestamps else _plain_seconds
        longest = _duration_up(self.longest) if timestamps else _up(self.longest, 6)
        return (
            f"Labels: positives' arrive after {fmt(pos)} on average, negatives' after {fmt(neg)}. Learned at "
            f"different delays, they bias every calibrator while one class's labels are in flight and the "
            f"other's are not (delayed-feedback bias). To learn every label after one delay, at the cost "
            f"of learning later, give the longest delay seen ({fmt(self.longest)}): {opt('label_delay', longest)}."
        )


#: Labels of each class with a label time needed before the summary compares their delays.
MIN_DELAY_LABELS = 30


def _up(x: float, digits: int) -> float:
    """``x`` rounded up to ``digits`` significant digits."""
    if not x > 0.0:
        return 0.0
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(x)))
    return math.ceil(x * scale - 1e-9) / scale


def _duration_up(seconds: float) -> str:
    """``seconds`` as a duration the label delay option reads (``"1.01h"``), rounded up to three
    significant digits in the largest unit that keeps it at 1 or more."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size:
            return f"{_up(seconds / size, 3):g}{unit}"
    return f"{_up(seconds, 3):g}s"


def delay_text(seconds: float, timestamps: bool) -> str:
    """A delay for the summary: in the largest unit that keeps it at 1 or more for the seconds of
    timestamps, else in seconds."""
    return _duration(seconds) if timestamps else _plain_seconds(seconds)


def _plain_seconds(seconds: float) -> str:
    return f"{seconds:.4g} s"


def _duration(seconds: float) -> str:
    """``seconds`` in the largest unit that keeps it at 1 or more (s, min, h, d)."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


class Planner:
    """The planner stage: the replay clock over the whole stream.

    :meth:`plan` gives, per batch, the operation sequence every method runs (None when labels are
    known at once: each event is predicted, then learned, which is ``prequential`` on the batch)
    and keeps the labels not yet due for the next batches; :meth:`flush` learns, at the end, those
    due by the last event time. Without event times (``timed`` False) the operations carry no
    times.
    """

    def __init__(self, weighted: bool, timed: bool):
        self.flight = InFlight.empty(weighted)
        self.timed = timed
        self.n_events = 0  # events planned so far: the stream index of the next batch's first
        self.n_learned = 0
        self.n_never = 0  # labels that never arrive (label time +inf): counted, not kept in flight
        self.clock = -np.inf  # the last event time planned
        self.start = np.inf  # the first event time planned
        self.delays = LabelDelays()

    def plan(self, batch: EventBatch) -> Ops | None:
        ops = None
        if batch.label_t is not None:
            extra = {
                name: values
                for name in type(batch).planned_columns()
                if name not in _KERNEL_COLUMNS and (values := getattr(batch, name)) is not None
            }
            ops, self.flight = plan_batch(
                self.flight, batch.t, batch.s, batch.y, batch.label_t, batch.w, self.n_events, extra=extra
            )
            if not self.timed:
                ops.t = None
            elif len(batch):
                self.delays.add(batch.t, batch.y, batch.label_t)
                self.start = min(self.start, float(batch.t[0]))
        n = len(batch)
        self.n_events += n
        self.n_learned += n if ops is None else ops.n_learn
        self.n_never += 0 if ops is None else ops.n_never
        self.clock = float(batch.t[-1])
        return ops

    def counts(self) -> dict[str, int]:
        """The summary's counts: events planned, labels learned, still in flight, never arriving."""
        return {
            "n_events": self.n_events,
            "n_learned": self.n_learned,
            "n_in_flight": len(self.flight),
            "n_never": self.n_never,
        }

    def flush(self) -> Ops | None:
        """The labels due by the last event time (None if there are none); later ones stay in
        flight, never learned."""
        if not len(self.flight) or not np.isfinite(self.clock):
            return None
        ops, self.flight = plan_flush(self.flight, self.clock)
        if not ops.n_learn:
            return None
        self.n_learned += ops.n_learn
        if not self.timed:
            ops.t = None
        return ops
