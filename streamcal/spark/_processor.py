"""The stateful processor: one key's calibrator, and its scores awaiting labels, in Spark's state store.

Spark's ``transformWithStateInPandas`` hands the processor every row of one key in a micro-batch as
pandas frames. The processor loads the key's state (one value-state row: the key's calibrator as
:meth:`streamcal.KeyedCalibrator.export_key` gives it, and the pending scores), imports it into a
:class:`streamcal.KeyedCalibrator` (``prior_strength=0``), runs the rows in order through its ``process`` (a
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

from streamcal.spark._codec import decode_state, encode_state
from streamcal.spark._rows import OUTPUT_COLUMNS, Pending, run_rows

__all__ = ["OUTPUT_COLUMNS", "STATE_SCHEMA", "STATUSES", "KeyedCalibrationProcessor"]

# One row of Spark state per key: its calibrator (``KeyedCalibrator.export_key``, encoded), its event
# count, the scores still waiting for their label (event id, score, time, order), and the expiry timer in force.
STATE_SCHEMA = (
    "calibrator binary, n_learned long, pending_ids array<string>, pending_scores array<double>, "
    "pending_times array<double>, pending_orders array<double>, timer_ms long, last_seen_ms long"
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


_DTYPES = {"double": np.float64, "string": object}


class _OneKey:
    """One key of the engine, with a calibrator's ``process``."""

    def __init__(self, engine, slot: int):
        self.engine, self.slot = engine, slot
        self.saved = None  # the state as loaded (None: a key that has learned nothing yet)

    def process(self, scores, labels, learn_mask, *, times=None):
        keys = np.full(len(scores), self.slot, dtype=np.int64)
        return self.engine.process(keys, scores, labels, learn_mask, times=times)

    def export(self) -> dict | None:
        """The key's state, or None while it has learned nothing (predictions make no state)."""
        held = self.engine.keys()  # at most one key (max_keys=1)
        if self.slot not in held:
            return None
        return self.engine.export_key(self.slot)


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
        The template of every key: a fresh :class:`streamcal.PAVCalibrator` (default
        ``PAVCalibrator()``), as :class:`streamcal.KeyedCalibrator` takes it.
    ttl_ms
        Milliseconds of processing time after which a key that received no row expires: its state
        is cleared and an ``"expired"`` row reports it. ``None``: keys never expire.
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
    >>> rows = pd.DataFrame({"event_id": None, "score": s, "label": (rng.uniform(size=200) < s) * 1.0,
    ...                      "time": None, "order": np.arange(200.0)})
    >>> out = tester.testInPandas("campaign-1", rows)
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
        from streamcal.keyed import KeyedCalibrator

        self.handle = handle
        self.state = handle.getValueState("calibration", STATE_SCHEMA)
        # the engine holds one key at a time (max_keys=1): the key's exported state is imported
        # from Spark's state store under a name never used before, run, and exported back
        self.engine = KeyedCalibrator(self.calibrator, prior_strength=0, max_keys=1)
        self.slots = 0

    # ---------------------------------------------------------------- the key's state
    def _load(self):
        """``(calibrator, n_learned, pending, timer_ms)`` of the current key (a fresh one if none)."""
        self.slots += 1
        row = self.state.get()
        saved = None if row is None else row[0]
        if saved is None:
            # a key with no state yet runs in an engine of its own: the shared engine's global map
            # (every key it ran) would answer the key's predictions until its first label
            return _OneKey(self._fresh_engine(), 0), 0 if row is None else row[1], self._pending(row), self._timer(row)
        calibrator = _OneKey(self.engine, self.slots)
        self.engine.import_key(self.slots, decode_state(saved))
        calibrator.saved = saved
        return calibrator, row[1], self._pending(row), row[6]

    def _fresh_engine(self):
        from streamcal.keyed import KeyedCalibrator

        return KeyedCalibrator(self.calibrator, prior_strength=0, max_keys=1)

    @staticmethod
    def _pending(row) -> Pending:
        return Pending() if row is None else Pending(*row[2:6])

    @staticmethod
    def _timer(row):
        return None if row is None else row[6]

    def _store(self, calibrator, n_learned, pending, timer_ms, now_ms) -> None:
        state = calibrator.export()
        saved = calibrator.saved if state is None else encode_state(state)
        self.state.update((saved, n_learned, *pending.columns(), timer_ms, now_ms))

    # ---------------------------------------------------------------- Spark's entry points
    def handleInputRows(self, key, rows, timerValues):
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        key_value = key[0]
        if key_value is None or (isinstance(key_value, float) and math.isnan(key_value)):
            # no state is kept for a null key: its rows are all dead letters
            out, _ = run_rows(None, frame, Pending(), key_is_null=True, remember=False)
            yield self._output(key_value, out, 0, 0)
            return
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        calibrator, n_learned, pending, timer_ms = self._load()
        out, learned = run_rows(calibrator, frame, pending, key_is_null=False, remember=self.remember)
        if len(pending) > self.max_pending:
            out = _stack(out, pending.drop_oldest(self.max_pending))
        if self.ttl_ms is not None and timer_ms is None:
            timer_ms = now_ms + self.ttl_ms
            self.handle.registerTimer(timer_ms)
        self._store(calibrator, n_learned + learned, pending, timer_ms, now_ms)
        yield self._output(key_value, out, n_learned + learned, len(pending))

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
        yield self._output(key[0], {"status": np.array(["expired"], dtype=object)}, row[1], len(row[2]))

    def close(self) -> None:
        pass

    @staticmethod
    def _output(key_value, out: dict, n_learned: int, n_pending: int) -> pd.DataFrame:
        """The output columns ``out`` as one frame, with the key in front and every column typed."""
        n = len(out["status"])
        columns = {"key": [key_value] * n}
        for name, kind in OUTPUT_COLUMNS.items():
            if name in ("n_learned", "n_pending"):
                columns[name] = np.full(n, n_learned if name == "n_learned" else n_pending, dtype=np.int64)
            elif name in out:
                columns[name] = np.asarray(out[name], dtype=_DTYPES[kind])
            else:
                columns[name] = np.full(n, np.nan if kind == "double" else None, dtype=_DTYPES[kind])
        return pd.DataFrame(columns, copy=False)


def _stack(out: dict, more: dict) -> dict:
    """The rows of ``out`` then those of ``more`` (columns missing from ``more`` are null)."""
    n = len(more["status"])
    return {
        name: np.concatenate([column, more.get(name, np.full(n, None if column.dtype == object else np.nan))])
        for name, column in out.items()
    }
