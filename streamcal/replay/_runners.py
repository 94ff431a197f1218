"""The runner stage: every method on every batch's operation sequence.

Each method runs on its own worker thread (numba kernels release the GIL), so batch *k* is
calibrated while batch *k + 1* is read and planned and batch *k - 1* is written; a method's
batches still run one after the other, in order, on its one thread, so the results do not depend
on the threads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from streamcal.replay._batch import EventBatch
from streamcal.replay._engine import Ops
from streamcal.replay._keyed import keyed_learn, keyed_step
from streamcal.replay._source import ReplayInputError, opt
from streamcal.replay.methods import RawScoreCalibrator, UnavailableMethodError, make_calibrator

__all__ = ["Runners", "Submitted", "resolve_calibrators"]


def resolve_calibrators(calibrators, buckets, window, decay, options) -> dict[str, object]:
    """Name -> calibrator instance, from a comma list / list of names / mapping of instances."""
    if isinstance(calibrators, str):
        calibrators = [c.strip() for c in calibrators.split(",") if c.strip()]
    if isinstance(calibrators, Mapping):
        items = list(calibrators.items())
    else:
        items = []
        for c in calibrators:
            if isinstance(c, str):
                items.append((c, None))
            else:
                items.append((type(c).__name__, c))
    if not items:
        msg = f"{opt('calibrators')} must name at least one method, such as 'pav'."
        raise ValueError(msg)
    out: dict[str, object] = {}
    for name, obj in items:
        if name in out:
            msg = f"{opt('calibrators')} names {name!r} twice."
            raise ValueError(msg)
        if obj is None:
            try:
                cal = make_calibrator(name, buckets=buckets, window=window, decay=decay, **(options or {}))
            except UnavailableMethodError as exc:
                msg = f"{opt('calibrators')}: {exc}"
                raise UnavailableMethodError(msg) from None
        else:
            cal = obj
        if any(cal is other for other in out.values()):
            msg = f"{opt('calibrators')} gives the same calibrator object twice (as {name!r})."
            raise ValueError(msg)
        if not callable(getattr(cal, "process", None)):
            msg = f"calibrator {name!r} has no `process(scores, labels, learn_mask, ...)` method."
            raise TypeError(msg)
        out[name] = cal
    return out


@dataclass
class Submitted:
    """A batch handed to the runners: the batch, its operations (None: ``prequential`` on the
    batch), the stream index of its first event, and per method a future (or, on the calling
    thread, the result)."""

    batch: EventBatch
    ops: Ops | None
    first_index: int
    results: list


class Runners:
    """Runs each method on each batch: on its own worker thread, or with ``threads=1`` on the
    calling thread.

    :meth:`submit` hands a batch to every method; :meth:`results` waits for its outputs, in method
    order, and turns a method's rejection of its input into a :class:`ReplayInputError` naming the
    input and rows.
    """

    def __init__(self, calibrators: dict[str, object], *, timed: bool, threads: int | None):
        self.calibrators = calibrators
        self.names = list(calibrators)
        self._timed = timed
        self._outs = {name: _Outputs() for name in self.names}
        self._pools = None
        if threads != 1:
            self._pools = {
                name: ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamcal-replay") for name in self.names
            }

    def submit(self, batch: EventBatch, ops: Ops | None, first_index: int) -> Submitted:
        times = batch.t if self._timed else None
        outs = self._outs
        if self._pools is None:
            results = [_step(cal, batch, ops, times, outs[name]) for name, cal in self.calibrators.items()]
        else:
            results = [
                self._pools[name].submit(_step, cal, batch, ops, times, outs[name])
                for name, cal in self.calibrators.items()
            ]
        return Submitted(batch, ops, first_index, results)

    def results(self, submitted: Submitted) -> tuple[dict, dict, dict]:
        """``(proba, llr, intervals)``: per method, the outputs for the batch's events in event
        order; ``intervals`` holds ``(p0, p1)`` for the methods that give an interval."""
        proba, llr, intervals = {}, {}, {}
        for name, item in zip(self.names, submitted.results, strict=True):
            result = item.result() if self._pools is not None else item
            if isinstance(result, Exception):
                raise ReplayInputError(_rejected(name, submitted, result))
            proba[name], llr[name] = result[:2]
            if len(result) == 4:
                intervals[name] = result[2:]
        return proba, llr, intervals

    def learn(self, ops: Ops) -> None:
        """Every method learns the labels of ``ops`` (the end of the stream), on the calling
        thread."""
        for cal in self.calibrators.values():
            if "key" in ops.extra and not isinstance(cal, RawScoreCalibrator):
                keyed_learn(cal, ops)
            else:
                cal.process(ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)

    def close(self) -> None:
        for pool in (self._pools or {}).values():
            pool.shutdown(wait=True, cancel_futures=True)


class _Outputs:
    """One method's output arrays for its ``process`` calls, kept from batch to batch (new arrays
    of that size cost page faults each time): the method's batches run one after the other, and
    each batch's predictions are copied out (``[ops.pred_pos]``) before the next batch runs."""

    def __init__(self):
        self._proba = self._llr = np.empty(0)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Two float64 arrays of length ``n`` (their contents are left over)."""
        if self._proba.size < n:
            self._proba, self._llr = np.empty(n), np.empty(n)
        return self._proba[:n], self._llr[:n]


def _checked_entry(cal):
    """The calibrator's ``process`` for operations already checked (``_process_checked``, which
    skips the checks the replay has made), or None when it has none or overrides ``process``."""
    from streamcal._streaming import StreamingCalibrator

    entry = getattr(cal, "_process_checked", None)
    if entry is None or type(cal).process is not StreamingCalibrator.process:
        return None
    return entry


def _step(cal, batch: EventBatch, ops: Ops | None, times, outs: _Outputs):
    """One method on one batch: ``(proba, llr)`` per event, or the exception it raised on input.

    ``ops`` None means labels known at once: ``prequential`` on the batch itself. The replay's
    operations are checked (finite scores, binary labels, finite times in order, finite
    non-negative weights), so a streamcal calibrator runs them through its checked entry.
    """
    if batch.key is not None and not isinstance(cal, RawScoreCalibrator):
        return keyed_step(cal, batch, ops, times)
    try:
        # a calibrator that gives an interval per event (Venn–Abers) gives it in the same pass
        with_interval = getattr(cal, "process_with_interval", None)
        if ops is None:
            if with_interval is not None:
                out = cal.prequential_with_interval(batch.s, batch.y, weights=batch.w, times=times)
                return tuple(np.asarray(a) for a in out)
            proba, llr = cal.prequential(batch.s, batch.y, weights=batch.w, times=times)
            return np.asarray(proba), np.asarray(llr)
        if with_interval is not None:
            out = with_interval(ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)
            return tuple(np.asarray(a)[ops.pred_pos] for a in out)
        checked = _checked_entry(cal)
        if checked is not None:
            proba, llr = checked(ops.s, ops.y, ops.learn, ops.w, ops.t, outs.get(ops.s.size))
        else:
            proba, llr = cal.process(ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)
        return np.asarray(proba)[ops.pred_pos], np.asarray(llr)[ops.pred_pos]
    except (ValueError, TypeError) as exc:
        return exc


def _rejected(name: str, submitted: Submitted, exc: Exception) -> str:
    """The message for a calibrator that rejected a batch: method, file, rows, and the row of the
    offending operation when the calibrator's message gives its position."""
    batch, ops, first = submitted.batch, submitted.ops, submitted.first_index
    n = len(batch)
    rows = f"rows {batch.row0}-{batch.row0 + n - 1}"
    msg = f"method {name!r} rejected the events of {batch.source.where()}, {rows}: {exc}"
    noun = batch.source.noun
    match = re.search(r"at position (\d+)", str(exc))
    if match is None:
        return msg
    position = int(match.group(1))
    if ops is None:  # prequential on the batch: positions are the batch's rows
        return f"{msg} (position {position} is row {batch.row0 + position} of that {noun})"
    if position >= ops.learn.size:
        return msg
    event = ops.event_of(position, first)
    kind = "learning the label of" if ops.learn[position] else "predicting"
    where = f"row {batch.row0 + event - first} of that {noun}" if event >= first else "an event of an earlier batch"
    return f"{msg} (position {position} is {kind} event {event} of the stream, {where})"
