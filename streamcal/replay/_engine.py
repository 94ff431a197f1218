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
whose time has not come by the end of the batch stay in flight, in event order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["InFlight", "Ops", "plan_batch", "plan_flush"]


@dataclass
class InFlight:
    """Labels not learned yet, in event order: label time, score, label, weight, event index."""

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


def _cat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b if a.size == 0 else np.concatenate((a, b))


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
    """
    n = t.size
    m = len(flight)
    cand_t = _cat(flight.label_t, label_t)
    cand_s = _cat(flight.s, s)
    cand_y = _cat(flight.y, y)
    cand_w = None if w is None else _cat(flight.w, w)
    cand_i = _cat(flight.index, np.arange(first_index, first_index + n, dtype=np.int64))
    # position (in the batch's events) before which each label is learned; n = not in this batch
    j = np.searchsorted(t, cand_t, side="left")
    np.maximum(j[m:], np.arange(1, n + 1), out=j[m:])  # never before the event's own prediction
    learnable = j < n
    idx = np.flatnonzero(learnable)
    lt = cand_t[idx]
    # candidates are in event order; a stable sort by label time gives order (label time, event).
    # This order keeps j non-decreasing (see the module docstring), so positions follow directly.
    if lt.size > 1 and bool(np.any(lt[1:] < lt[:-1])):
        order = np.argsort(lt, kind="stable")
        idx = idx[order]
        lt = lt[order]
    jl = j[idx]
    k = idx.size
    learn_pos = np.arange(k) + jl
    pred_pos = np.arange(n) + np.searchsorted(jl, np.arange(n), side="right")
    size = n + k
    op_s = np.empty(size)
    op_y = np.empty(size)
    op_t = np.empty(size)
    op_s[pred_pos] = s
    op_s[learn_pos] = cand_s[idx]
    op_y[pred_pos] = y
    op_y[learn_pos] = cand_y[idx]
    op_t[pred_pos] = t
    op_t[learn_pos] = lt
    learn = np.zeros(size, dtype=bool)
    learn[learn_pos] = True
    op_w = None
    if cand_w is not None:
        op_w = np.empty(size)
        op_w[pred_pos] = w
        op_w[learn_pos] = cand_w[idx]
    rest = ~learnable
    flight = InFlight(
        cand_t[rest],
        cand_s[rest],
        cand_y[rest],
        None if cand_w is None else cand_w[rest],
        cand_i[rest],
    )
    return Ops(op_s, op_y, learn, op_t, op_w, pred_pos, k), flight


def plan_flush(flight: InFlight, clock: float) -> tuple[Ops, InFlight]:
    """At the end of the stream: learn the labels whose time is at or before ``clock`` (the last
    event time), in order of label time then event; the others stay in flight."""
    due = flight.label_t <= clock
    idx = np.flatnonzero(due)
    idx = idx[np.argsort(flight.label_t[idx], kind="stable")]
    k = idx.size
    ops = Ops(
        flight.s[idx],
        flight.y[idx],
        np.ones(k, dtype=bool),
        flight.label_t[idx],
        None if flight.w is None else flight.w[idx],
        np.empty(0, dtype=np.int64),
        k,
    )
    rest = ~due
    left = InFlight(
        flight.label_t[rest],
        flight.s[rest],
        flight.y[rest],
        None if flight.w is None else flight.w[rest],
        flight.index[rest],
    )
    return ops, left
