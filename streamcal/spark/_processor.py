"""The stateful processor: a shard of keys, each key's calibrator and its scores awaiting labels in
Spark's state store.

Spark's ``transformWithStateInPandas`` calls the processor once per grouping key and micro-batch,
with a cost of its own per call (a Python call, pandas frames, state-store round trips). So the
grouping key is not the calibration key but a shard (a stable hash of the key modulo the number of
shards): the processor gets every row of its shard's keys in a micro-batch, reads the state of the
keys that have rows (one map-state entry per key: the key's calibrator as
:meth:`streamcal.KeyedCalibrator.export_key` gives it, and its pending scores), runs all the rows
through one :class:`streamcal.KeyedCalibrator` (``prior_strength=0``, the keys independent) in one
compiled call, writes the touched keys back and emits one output row per input row. Rows it cannot
use are emitted with status ``"rejected"`` or ``"unmatched"`` and an ``error`` that says why (the
dead-letter rows); nothing is dropped without a row saying so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor

from streamcal.spark._rows import OUTPUT_COLUMNS, KeyState, Pending, run_rows

__all__ = ["KEY_SCHEMA", "OUTPUT_COLUMNS", "STATE_SCHEMA", "STATUSES", "KeyedCalibrationProcessor"]

# One map-state entry per calibration key (the key as a string): its calibrator
# (``KeyedCalibrator.export_key``, encoded; null while it has learned nothing), its event count, the
# scores still waiting for their label (event id, score, time, order), and when it last had a row.
KEY_SCHEMA = "key string"
STATE_SCHEMA = (
    "calibrator binary, n_learned long, pending_ids array<string>, pending_scores array<double>, "
    "pending_times array<double>, pending_orders array<double>, last_seen_ms long"
)
STATUSES = {
    "scored": "a score row: proba and llr from the key's calibrator before the row",
    "learned": "a label row joined by event id to a pending score, then learned",
    "scored_learned": "a row with score and label: predicted, then learned",
    "rejected": "a bad row (null key, score not finite, label not 0/1, label row without event id), not learned",
    "unmatched": "a label row whose event id has no pending score (never seen, expired or dropped), not learned",
    "dropped": "a pending score pushed out by the bound on pending scores; its label will be unmatched",
    "expired": "the key was idle for the time to live: its state is cleared (counts in n_learned, n_pending)",
}


_DTYPES = {"double": np.float64, "string": object, "long": np.int64}


class KeyedCalibrationProcessor(StatefulProcessor):
    """A Spark stateful processor that calibrates each key of a shard with the key's own calibrator.

    Used by :func:`streamcal.spark.calibrate_stream` with ``transformWithStateInPandas``, grouped by
    a shard of keys; its input frames have the columns ``key`` (the calibration key as a string),
    ``event_id``, ``score``, ``label``, ``time``, ``order`` (any may hold nulls) and its output is
    ``key`` then the columns ``OUTPUT_COLUMNS`` describes, with ``STATUSES``.

    For each key, the output is what the in-process calibrator gives on that key's rows in ``order``
    (ties in arrival order): a score row is predicted with the state before it, a label row learns
    the score its event id names, a row with both does both (predict first). Every key starts from a
    clone of ``calibrator``.

    Parameters
    ----------
    calibrator
        The template of every key: a fresh :class:`streamcal.PAVCalibrator` (default
        ``PAVCalibrator()``), as :class:`streamcal.KeyedCalibrator` takes it.
    ttl_ms
        Milliseconds of processing time after which a key that received no row expires: its state
        is cleared and an ``"expired"`` row reports it. ``None``: keys never expire. The shard keeps
        one timer, at the earliest expiry of its keys.
    max_pending
        Bound on the scores a key keeps waiting for labels between micro-batches; beyond it, at the
        end of a micro-batch, the oldest are dropped (each reported by a ``"dropped"`` row).
    remember
        Whether score rows with an event id wait for their label (False when the stream has none).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from pyspark.sql.streaming.tws_tester import TwsTester
    >>> from streamcal import PAVCalibrator
    >>> from streamcal.spark import KeyedCalibrationProcessor
    >>> tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None)))
    >>> rng = np.random.default_rng(0)
    >>> s = rng.uniform(size=200)
    >>> rows = pd.DataFrame({"key": "campaign-1", "event_id": None, "score": s,
    ...                      "label": (rng.uniform(size=200) < s) * 1.0, "time": None, "order": np.arange(200.0)})
    >>> out = tester.testInPandas(0, rows)  # shard 0
    >>> reference = PAVCalibrator(prior=None).prequential(s, rows["label"])[0]  # a key's own map: no score prior
    >>> out["status"].unique().tolist(), np.array_equal(out["proba"], reference)
    (['scored_learned'], True)
    """

    def __init__(self, calibrator=None, *, ttl_ms: int | None = None, max_pending: int = 100_000, remember=True):
        from streamcal.isotonic.streaming import PAVCalibrator

        self.calibrator = PAVCalibrator() if calibrator is None else calibrator
        self.ttl_ms = ttl_ms
        self.max_pending = max_pending
        self.remember = remember

    def init(self, handle) -> None:
        self.handle = handle
        self.keys = handle.getMapState("keys", KEY_SCHEMA, STATE_SCHEMA)
        self.timer = handle.getValueState("timer", "timer_ms long")  # the shard's expiry timer

    # ---------------------------------------------------------------- the keys' state
    def _load(self, key) -> KeyState:
        row = self.keys.getValue((key,))
        if row is None:
            return KeyState()
        return KeyState(row[0], row[1], Pending(*row[2:6]), row[6])

    def _store(self, key, state: KeyState) -> None:
        self.keys.updateValue((key,), (state.saved, state.n_learned, *state.pending.columns(), state.seen_ms))

    # ---------------------------------------------------------------- Spark's entry points
    def handleInputRows(self, key, rows, timerValues):
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        names = frame["key"].dropna().unique()
        states = {name: self._load(name) for name in names}
        out = run_rows(self.calibrator, frame, states, remember=self.remember, max_pending=self.max_pending)
        for name, state in states.items():
            state.seen_ms = now_ms
            self._store(name, state)
        if self.ttl_ms is not None and len(states) and self.timer.get() is None:
            timer_ms = now_ms + self.ttl_ms
            self.handle.registerTimer(timer_ms)
            self.timer.update((timer_ms,))
        yield self._output(out)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        """Clear the shard's keys idle for ``ttl_ms`` (one ``"expired"`` row each), and set the
        timer at the next expiry of those left."""
        expiry_ms = expiredTimerInfo.getExpiryTimeInMs()
        expired, next_ms = [], None
        for (name,), row in self.keys.iterator():
            due = row[6] + self.ttl_ms
            if due <= expiry_ms:
                expired.append((name, row[1], len(row[2])))
            else:
                next_ms = due if next_ms is None else min(next_ms, due)
        for name, _, _ in expired:
            self.keys.removeKey((name,))
        if next_ms is None:
            self.timer.clear()
        else:
            self.handle.registerTimer(next_ms)
            self.timer.update((next_ms,))
        if expired:
            names, n_learned, n_pending = zip(*expired, strict=True)
            n = len(names)
            yield self._output(
                {
                    "key": np.array(names, dtype=object),
                    "status": np.full(n, "expired", dtype=object),
                    "n_learned": np.array(n_learned, dtype=np.int64),
                    "n_pending": np.array(n_pending, dtype=np.int64),
                }
            )

    def close(self) -> None:
        pass

    @staticmethod
    def _output(out: dict) -> pd.DataFrame:
        """The output columns ``out`` as one frame, with the key in front and every column typed."""
        n = len(out["status"])
        columns = {"key": np.asarray(out["key"], dtype=object)}
        for name, kind in OUTPUT_COLUMNS.items():
            dtype = _DTYPES[kind]
            if name in out:
                columns[name] = np.asarray(out[name], dtype=dtype)
            else:
                columns[name] = np.full(n, np.nan if kind == "double" else None, dtype=dtype)
        return pd.DataFrame(columns, copy=False)
