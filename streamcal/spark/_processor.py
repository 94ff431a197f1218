"""The stateful processor: one key's calibrator, and its scores awaiting labels, in Spark's state store.

Spark's ``transformWithStateInPandas`` hands the processor every row of one key in a micro-batch as
pandas frames. The processor loads the key's state (one value-state row: the calibrator's saved
bytes and the pending scores), runs the rows in order through the calibrator's ``process`` (a
score row is a prediction, a label row learns the score it joins, a row with both predicts then
learns), writes the state back and emits one output row per input row. Rows it cannot use are
emitted with status ``"rejected"`` or ``"unmatched"`` and an ``error`` that says why (the
dead-letter rows); nothing is dropped without a row saying so.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor

from streamcal.persist import from_bytes, to_bytes

__all__ = ["OUTPUT_COLUMNS", "STATE_SCHEMA", "STATUSES", "KeyedCalibrationProcessor"]

# One row of Spark state per key: the calibrator (saved bytes), its event count, the scores still
# waiting for their label (event id, score, time, order), and the expiry timer in force.
STATE_SCHEMA = (
    "calibrator binary, n_learned long, pending_ids array<string>, pending_scores array<double>, "
    "pending_times array<double>, pending_orders array<double>, timer_ms long, last_seen_ms long"
)
# The processor's output, after the key column (whose type is the input's).
OUTPUT_COLUMNS = {
    "event_id": "string",
    "time": "double",
    "score": "double",
    "label": "double",
    "proba": "double",
    "llr": "double",
    "status": "string",
    "error": "string",
    "n_learned": "long",
    "n_pending": "long",
}
STATUSES = {
    "scored": "a score row: proba and llr from the key's calibrator before the row",
    "learned": "a label row joined by event id to a pending score, then learned",
    "scored_learned": "a row with score and label: predicted, then learned",
    "rejected": "a bad row (null key, score not finite, label not 0/1, label row without event id), not learned",
    "unmatched": "a label row whose event id has no pending score (never seen, expired or dropped), not learned",
    "dropped": "a pending score pushed out by the bound on pending scores; its label will be unmatched",
    "expired": "the key was idle for the time to live: its state is cleared (counts in n_learned, n_pending)",
}


def _text(value) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


class _Pending:
    """The key's scores awaiting labels, in arrival order: event id -> (score, time, order)."""

    def __init__(self, ids=(), scores=(), times=(), orders=()):
        self.rows = {i: (s, t, o) for i, s, t, o in zip(ids, scores, times, orders, strict=True)}

    def columns(self) -> tuple[list, list, list, list]:
        ids = list(self.rows)
        values = list(self.rows.values())
        return ids, [v[0] for v in values], [v[1] for v in values], [v[2] for v in values]


class KeyedCalibrationProcessor(StatefulProcessor):
    """A Spark stateful processor that calibrates one key's events with its own calibrator.

    Used by :func:`streamcal.spark.calibrate_stream` with ``transformWithStateInPandas``; its input
    frames have the columns ``event_id``, ``score``, ``label``, ``time``, ``order`` (any may hold
    nulls) and its output is described by ``OUTPUT_COLUMNS`` and ``STATUSES``.

    For one key, the output is what the in-process calibrator gives on that key's rows in ``order``
    (ties in arrival order): a score row is predicted with the state before it, a label row learns
    the score its event id names, a row with both does both (predict first). Every key starts from a
    clone of ``calibrator``.

    Parameters
    ----------
    calibrator
        A fresh streamcal streaming calibrator (default ``PAVCalibrator()``), cloned per key.
    ttl_ms
        Milliseconds of processing time after which a key that received no row expires: its state
        is cleared and an ``"expired"`` row reports it. ``None``: keys never expire.
    max_pending
        Bound on the scores a key keeps waiting for labels between micro-batches; beyond it, at the
        end of a micro-batch, the oldest are dropped (each reported by a ``"dropped"`` row).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from pyspark.sql.streaming.tws_tester import TwsTester
    >>> from streamcal import PAVCalibrator
    >>> from streamcal.spark import KeyedCalibrationProcessor
    >>> tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator()))
    >>> rng = np.random.default_rng(0)
    >>> s = rng.uniform(size=200)
    >>> rows = pd.DataFrame({"event_id": None, "score": s, "label": (rng.uniform(size=200) < s) * 1.0,
    ...                      "time": None, "order": np.arange(200.0)})
    >>> out = tester.testInPandas("campaign-1", rows)
    >>> reference = PAVCalibrator().prequential(s, rows["label"])[0]
    >>> out["status"].unique().tolist(), np.array_equal(out["proba"], reference)
    (['scored_learned'], True)
    """

    def __init__(self, calibrator=None, *, ttl_ms: int | None = None, max_pending: int = 100_000):
        from streamcal.isotonic.streaming import PAVCalibrator

        self.calibrator = PAVCalibrator() if calibrator is None else calibrator
        self.ttl_ms = ttl_ms
        self.max_pending = max_pending

    def init(self, handle) -> None:
        self.handle = handle
        self.state = handle.getValueState("calibration", STATE_SCHEMA)

    # ---------------------------------------------------------------- the key's state
    def _load(self):
        """``(calibrator, n_learned, pending, timer_ms)`` of the current key (a fresh clone if none)."""
        row = self.state.get()
        if row is None:
            return self.calibrator.clone(), 0, _Pending(), None
        saved, n_learned, ids, scores, times, orders, timer_ms, _ = row
        return from_bytes(bytes(saved)), n_learned, _Pending(ids, scores, times, orders), timer_ms

    def _store(self, calibrator, n_learned, pending, timer_ms, now_ms) -> None:
        self.state.update((to_bytes(calibrator, allow_pickle=False), n_learned, *pending.columns(), timer_ms, now_ms))

    # ---------------------------------------------------------------- Spark's entry points
    def handleInputRows(self, key, rows, timerValues):
        frame = pd.concat(list(rows), ignore_index=True)
        key_value = key[0]
        if key_value is None or (isinstance(key_value, float) and math.isnan(key_value)):
            # no state is kept for a null key: its rows are all dead letters
            out, _ = self._run(key_value, frame, self.calibrator.clone(), 0, _Pending())
            yield self._frame(key_value, out, 0, 0)
            return
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        calibrator, n_learned, pending, timer_ms = self._load()
        out, n_learned = self._run(key_value, frame, calibrator, n_learned, pending)
        out.extend(self._bound(pending))
        if self.ttl_ms is not None and timer_ms is None:
            timer_ms = now_ms + self.ttl_ms
            self.handle.registerTimer(timer_ms)
        self._store(calibrator, n_learned, pending, timer_ms, now_ms)
        yield self._frame(key_value, out, n_learned, len(pending.rows))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        row = self.state.get()
        if row is None:
            return
        last_seen_ms = row[7]
        if last_seen_ms + self.ttl_ms > expiredTimerInfo.getExpiryTimeInMs():
            # the key had rows since this timer was set: wait a full ttl after the last of them
            timer_ms = last_seen_ms + self.ttl_ms
            self.handle.registerTimer(timer_ms)
            self.state.update((*row[:6], timer_ms, last_seen_ms))
            return
        self.state.clear()
        expired = {"status": "expired", "n_learned": row[1], "n_pending": len(row[2])}
        yield self._frame(key[0], [expired], row[1], len(row[2]))

    def close(self) -> None:
        pass

    # ---------------------------------------------------------------- the rows
    def _run(self, key_value, frame: pd.DataFrame, calibrator, n_learned: int, pending: _Pending):
        """Run one key's rows in order; return the output rows and the new event count."""
        frame = frame.sort_values("order", kind="stable", na_position="last").reset_index(drop=True)
        ids = [_text(v) for v in frame["event_id"]]
        scores = frame["score"].to_numpy(dtype=np.float64, na_value=np.nan)
        labels = frame["label"].to_numpy(dtype=np.float64, na_value=np.nan)
        times = frame["time"].to_numpy(dtype=np.float64, na_value=np.nan)
        orders = frame["order"].to_numpy(dtype=np.float64, na_value=np.nan)
        out, ops = [], []  # ops: (score, label, learn, time, index of the output row or -1)
        for i in range(len(frame)):
            row = {"event_id": ids[i], "time": times[i], "score": scores[i], "label": labels[i]}
            error = self._row_error(key_value, ids[i], scores[i], labels[i])
            if error is not None:
                out.append({**row, "status": "rejected", "error": error})
                continue
            has_score, has_label = not math.isnan(scores[i]), not math.isnan(labels[i])
            if has_score:
                ops.append((scores[i], 0.0, False, times[i], len(out)))
                if has_label:
                    ops.append((scores[i], labels[i], True, times[i], -1))
                elif ids[i] is not None:
                    pending.rows.pop(ids[i], None)  # a repeated id keeps its latest score, at the end
                    pending.rows[ids[i]] = (scores[i], times[i], orders[i])
                out.append({**row, "status": "scored_learned" if has_label else "scored"})
                continue
            joined = pending.rows.pop(ids[i], None)
            if joined is None:
                out.append({**row, "status": "unmatched", "error": f"no pending score for event id {ids[i]!r}"})
                continue
            ops.append((joined[0], labels[i], True, times[i] if not math.isnan(times[i]) else joined[1], -1))
            out.append({**row, "score": joined[0], "status": "learned"})
        if ops:
            s, y, learn, t, where = (np.array(c) for c in zip(*ops, strict=True))
            uses_times = not np.isnan(t[learn]).any()
            proba, llr = calibrator.process(s, y, learn, times=t if uses_times and learn.any() else None)
            for j in np.flatnonzero(where >= 0):
                out[where[j]]["proba"], out[where[j]]["llr"] = float(proba[j]), float(llr[j])
            n_learned += int(learn.sum())
        return out, n_learned

    @staticmethod
    def _row_error(key_value, event_id, score: float, label: float) -> str | None:
        """Why a row cannot be used, or None."""
        if key_value is None or (isinstance(key_value, float) and math.isnan(key_value)):
            return "the key is null"
        if not math.isnan(score) and not math.isfinite(score):
            return f"score must be finite; got {float(score)!r}"
        if not math.isnan(label) and label not in (0.0, 1.0):
            return f"label must be 0 or 1; got {float(label)!r}"
        if math.isnan(score) and math.isnan(label):
            return "the row has neither a score nor a label (a NaN score counts as none)"
        if math.isnan(score) and event_id is None:
            return "a label row without score needs an event id to find its score"
        return None

    def _bound(self, pending: _Pending) -> list[dict]:
        """Drop the oldest pending scores beyond ``max_pending``; one ``"dropped"`` row each."""
        out = []
        while len(pending.rows) > self.max_pending:
            event_id = next(iter(pending.rows))
            score, time, _ = pending.rows.pop(event_id)
            error = f"more than max_pending={self.max_pending} scores await labels"
            out.append({"event_id": event_id, "time": time, "score": score, "status": "dropped", "error": error})
        return out

    @staticmethod
    def _frame(key_value, out: list[dict], n_learned: int, n_pending: int) -> pd.DataFrame:
        frame = pd.DataFrame(out, columns=list(OUTPUT_COLUMNS))
        frame.insert(0, "key", [key_value] * len(frame))
        frame["n_learned"] = n_learned
        frame["n_pending"] = n_pending
        for name, kind in OUTPUT_COLUMNS.items():
            if kind == "double":
                frame[name] = frame[name].astype(np.float64)
            elif kind == "long":
                frame[name] = frame[name].astype(np.int64)
            else:
                frame[name] = frame[name].astype(object)
        return frame
