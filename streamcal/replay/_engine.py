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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["InFlight", "Ops", "plan_batch", "plan_flush"]


@dataclass
class InFlight:
    """Labels not learned yet, in order of (label time, event): label time, score, label, weight,
    event index."""

    label_t: np.ndarray
    s: np.ndarray
    y: np.ndarray
    w: np.ndarray | None
    index: np.ndarray

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

    def event_of(self, position: int, first_index: int) -> int:
        """The (whole-stream) index of the event an operation position belongs to."""
        if self.learn[position]:
            rank = int(np.count_nonzero(self.learn[:position]))
            return int(self.learn_index[rank])
        return first_index + int(np.searchsorted(self.pred_pos, position))


def _cat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b if a.size == 0 else np.concatenate((a, b))


def _stable_order(x: np.ndarray) -> np.ndarray | None:
    """Stable sorting permutation of ``x``, or None if ``x`` is already sorted."""
    if x.size < 2 or not bool(np.any(x[1:] < x[:-1])):
        return None
    return np.argsort(x, kind="stable")


def plan_batch(
    flight: InFlight,
    t: np.ndarray,
    s: np.ndarray,
    y: np.ndarray,
    label_t: np.ndarray,
    w: np.ndarray | None,
    first_index: int,
) -> tuple[Ops, InFlight]:
    """Merge the labels in flight and a batch of events (times non-decreasing) into one sequence.

    Returns the operations and the labels still in flight after the batch.

    Candidates (labels in flight, then this batch's labels) are ordered by (label time, event) with
    one stable sort: the labels in flight are already in that order and all precede the batch's
    events. Each label goes before event ``j = max(searchsorted(t, label time), own event + 1)``;
    in (label time, event) order ``j`` never decreases (a label forced after its own event ``i``
    has label time ``t_i``, and any later label time ``L > t_i`` has ``searchsorted(t, L) > i``),
    so the labels learned in this batch are a prefix of that order and the rest stays in order.
    """
    n = t.size
    cand_t = _cat(flight.label_t, label_t)
    cand_i = _cat(flight.index, np.arange(first_index, first_index + n, dtype=np.int64))
    order = _stable_order(cand_t)
    if order is not None:
        cand_t = cand_t[order]
        cand_i = cand_i[order]
    # sorted keys make searchsorted fast (numpy narrows each search from the previous one)
    j = np.searchsorted(t, cand_t, side="left")
    own = cand_i - first_index  # position of the label's own event in this batch (< 0: earlier)
    np.maximum(j, own + 1, out=j)
    k = int(np.searchsorted(j, n, side="left"))  # j is non-decreasing: learnable = prefix

    def pick(prev: np.ndarray, new: np.ndarray) -> np.ndarray:
        values = _cat(prev, new)
        return values if order is None else values[order]

    cand_s = pick(flight.s, s)
    cand_y = pick(flight.y, y)
    cand_w = None if w is None else pick(flight.w, w)
    jl = j[:k]
    learn_pos = np.arange(k) + jl
    # event e is preceded by e events and by the labels with j <= e
    before = np.cumsum(np.bincount(jl, minlength=n)[:n])
    pred_pos = np.arange(n) + before
    size = n + k
    op_s = np.empty(size)
    op_y = np.empty(size)
    op_t = np.empty(size)
    op_s[pred_pos] = s
    op_s[learn_pos] = cand_s[:k]
    op_y[pred_pos] = y
    op_y[learn_pos] = cand_y[:k]
    op_t[pred_pos] = t
    op_t[learn_pos] = cand_t[:k]
    learn = np.zeros(size, dtype=bool)
    learn[learn_pos] = True
    op_w = None
    if cand_w is not None:
        op_w = np.empty(size)
        op_w[pred_pos] = w
        op_w[learn_pos] = cand_w[:k]
    flight = InFlight(
        cand_t[k:].copy(),
        cand_s[k:].copy(),
        cand_y[k:].copy(),
        None if cand_w is None else cand_w[k:].copy(),
        cand_i[k:].copy(),
    )
    return Ops(op_s, op_y, learn, op_t, op_w, pred_pos, k, cand_i[:k]), flight


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
    )
    left = InFlight(
        flight.label_t[k:],
        flight.s[k:],
        flight.y[k:],
        None if flight.w is None else flight.w[k:],
        flight.index[k:],
    )
    return ops, left
