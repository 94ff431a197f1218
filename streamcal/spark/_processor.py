"""The stateful processor: a shard of keys, each key's calibrator and its scores awaiting labels in
Spark's state store.

Spark's ``transformWithStateInPandas`` calls the processor once per grouping key and micro-batch,
and each call and each state-store access costs a Python call and a socket round trip to the JVM.
So the grouping key is not the calibration key but a shard (a stable hash of the key modulo the
number of shards), and a shard's state is one value-state row: its :class:`streamcal.KeyedCalibrator`
(the keys' rows) in streamcal's portable state format
(:func:`streamcal.persist.to_bytes`, checked when read back), and per key its event count, the
time of its last row that was not a dead letter and its scores awaiting labels. The processor
reads the row, runs the shard's rows of the micro-batch through the calibrator in one compiled
call, writes the row back and emits one output row per input row. With a prior strength, the keys
pool toward the global map of all traffic after the previous micro-batch
(:mod:`streamcal.spark._pool`). Rows it cannot use are emitted with status ``"rejected"`` or
``"unmatched"`` and an ``error`` that says why (the dead-letter rows), and change no state;
nothing is dropped without a row saying so.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor

from streamcal.spark._rows import OUTPUT_COLUMNS, KeyState, forget_unused_keys, run_rows

__all__ = ["OUTPUT_COLUMNS", "STATE_SCHEMA", "STATUSES", "KeyedCalibrationProcessor"]

# One row of Spark state per shard: its calibrator (``streamcal.persist.to_bytes`` of the shard's
# KeyedCalibrator; null while no key has learned), then per key (``names``) its number in that
# calibrator, its event count and the processing time of its last used row, then the scores still
# waiting for their label (key, event id, score, time, order).
STATE_SCHEMA = (
    "calibrator binary, names array<string>, numbers array<long>, n_learned array<long>, seen_ms array<long>, "
    "pending_keys array<string>, pending_ids array<string>, pending_scores array<double>, "
    "pending_times array<double>, pending_orders array<double>"
)
# The shard states this Python worker wrote last, by the random version written with each: a shard
# whose stored version is here continues from the objects in memory (the same state, not read back
# and checked again); any other version (a restart, a retried micro-batch, another worker) is read
# from the store. Spark reuses a worker across micro-batches, so a shard often comes back to it.
_RECENT: OrderedDict = OrderedDict()
_RECENT_SIZE = 32

STATUSES = {
    "scored": "a score row: proba and llr from the key's calibrator before the row",
    "learned": "a label row joined by event id to a pending score, then learned",
    "scored_learned": "a row with score and label: predicted, then learned",
    "rejected": (
        "a bad row (null key, score not finite or outside the template's buckets, label not 0/1, label row without "
        "event id; under a time window, a learn without a time or before the shard's clock), not learned"
    ),
    "unmatched": "a label row whose event id has no pending score (never seen, expired or dropped), not learned",
    "dropped": "a pending score pushed out by the bound on pending scores; its label will be unmatched",
    "expired": "the key was idle for the time to live: its state is cleared (counts in n_learned, n_pending)",
    "partial": "pooled queries: a shard's labelled events of the micro-batch for the all-traffic map (the sink's)",
}


_DTYPES = {"double": np.float64, "string": object, "long": np.int64, "binary": object}


class KeyedCalibrationProcessor(StatefulProcessor):
    """A Spark stateful processor that calibrates each key of a shard with the key's own calibrator.

    Used by :func:`streamcal.spark.calibrate_stream` with ``transformWithStateInPandas``, grouped by
    a shard of keys; its input frames have the columns ``key`` (the calibration key as a string),
    ``event_id``, ``score``, ``label``, ``time``, ``order`` (any may hold nulls; pooled, also
    ``batch_ms``) and its output is
    ``key`` then the columns ``OUTPUT_COLUMNS`` describes, with ``STATUSES``.

    For each key, the output is what the in-process calibrator gives on that key's rows in ``order``
    (ties in arrival order): a score row is predicted with the state before it, a label row learns
    the score its event id names, a row with both does both (predict first). Every key starts from a
    clone of ``calibrator``.

    Parameters
    ----------
    calibrator
        The template of every key: a fresh :class:`streamcal.PAVCalibrator` (default
        ``PAVCalibrator(prior=None)``, sparse rows per key), as :class:`streamcal.KeyedCalibrator`
        takes it.
    ttl_ms
        Milliseconds of processing time after which a key that received no row expires: its state
        is cleared and an ``"expired"`` row reports it. ``None``: keys never expire. The shard keeps
        one timer, at the earliest expiry of its keys.
    max_pending
        Bound on the scores a key keeps waiting for labels between micro-batches; beyond it, at the
        end of a micro-batch, the oldest are dropped (each reported by a ``"dropped"`` row).
    remember
        Whether score rows with an event id wait for their label (False when the stream has none).
    prior_strength
        ``0`` (default): every key on its own. A number ``m > 0`` (pseudo-events, as
        :class:`streamcal.KeyedCalibrator`'s) pools each key toward the global map of **all
        traffic** after the previous micro-batch, read from ``global_dir``; each micro-batch then
        also emits one ``"partial"`` row per shard that learned, for the sink to merge
        (:func:`streamcal.spark.write_stream`). ``"auto"`` is refused: its between-key shift
        reads the evidence of every key, which no shard holds.
    global_dir
        The directory of the all-traffic maps (with ``prior_strength > 0``; see docs/spark.md).
        The input frames then carry one more column, ``batch_ms``: the micro-batch's timestamp
        (Spark's ``current_timestamp()`` in a streaming query, kept in the offset log and reused
        when a micro-batch runs again), which names the maps.
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

    def __init__(self, calibrator=None, *, ttl_ms: int | None = None, max_pending: int = 100_000, remember=True,
                 prior_strength=0, global_dir: str | None = None):
        from streamcal.isotonic.streaming import PAVCalibrator
        from streamcal.spark._pool import check_pooling

        self.calibrator = PAVCalibrator(prior=None) if calibrator is None else calibrator
        self.prior_strength = check_pooling(prior_strength, global_dir)
        self.global_dir = global_dir
        self.ttl_ms = ttl_ms
        self.max_pending = max_pending
        self.remember = remember

    def init(self, handle) -> None:
        self.handle = handle
        self.state = handle.getValueState("shard", STATE_SCHEMA)
        self.timer = handle.getValueState("timer", "timer_ms long")  # the shard's expiry timer
        self.version = handle.getValueState("version", "version string")  # of the shard's state

    # ---------------------------------------------------------------- the shard's state
    def _load(self):
        """``(calibrator, key -> KeyState)`` of the current shard (an empty one if none)."""
        from streamcal.keyed import KeyedCalibrator
        from streamcal.persist import from_bytes

        version = self.version.get()
        self.loaded_version = None if version is None else version[0]
        if self.loaded_version in _RECENT:
            # popped: the objects change in place, and a retried micro-batch must not see them
            return _RECENT.pop(self.loaded_version)
        row = self.state.get()
        if row is None or row[0] is None:
            engine = KeyedCalibrator(self.calibrator, prior_strength=self.prior_strength)  # holds the keys' rows
        else:
            engine = from_bytes(bytes(row[0]), where="a shard's calibrator in Spark's state store")
        if row is None:
            return engine, {}
        states = {name: KeyState(*values) for name, *values in zip(*row[1:4], strict=True)}
        for name, seen in zip(row[1], row[4], strict=True):
            states[name].seen_ms = seen
        for name, *pending in zip(*row[5:10], strict=True):
            event_id, score, time, order = pending
            states[name].pending.rows[event_id] = (score, time, order)
        return engine, states

    def _store(self, engine, states: dict) -> None:
        from streamcal.persist import to_bytes

        pending = [(name, i, *v) for name, state in states.items() for i, v in state.pending.rows.items()]
        columns = [list(c) for c in zip(*pending, strict=True)] if pending else [[], [], [], [], []]
        self.state.update(
            (
                to_bytes(engine, allow_pickle=False) if engine.n_keys else None,
                list(states),
                [state.number for state in states.values()],
                [state.n_learned for state in states.values()],
                [state.seen_ms for state in states.values()],
                *columns,
            )
        )
        version = uuid.uuid4().hex
        self.version.update((version,))
        _RECENT[version] = (engine, states)
        while len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)

    # ---------------------------------------------------------------- Spark's entry points
    def handleInputRows(self, key, rows, timerValues):
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        engine, states = self._load()
        names = frame["key"].dropna().unique().tolist()
        seen = {name: states[name].seen_ms if name in states else None for name in names}
        number = max((state.number for state in states.values()), default=-1)
        for name in names:
            if name not in states:
                number += 1
                states[name] = KeyState(number)
            states[name].seen_ms = now_ms
        batch_ms = -1
        if self.global_dir is not None:
            from streamcal.spark._pool import shared_map

            # the keys pool toward the all-traffic map after the previous micro-batch (the newest
            # map written before this micro-batch's timestamp), swapped in with its prior as it
            # stands: each key computes what it would in that map's calibrator (see _pool)
            batch_ms = int(frame["batch_ms"].iloc[0])
            engine.replace_global(shared_map(self.global_dir, batch_ms, self.calibrator, self.prior_strength))
        out, taught = run_rows(
            self.calibrator, engine, frame, states, remember=self.remember, max_pending=self.max_pending
        )
        forget_unused_keys(states, seen, out)  # a key's dead letters leave its state as it was
        self._store(engine, states)
        if self.ttl_ms is not None and states and self.timer.get() is None:
            timer_ms = now_ms + self.ttl_ms
            self.handle.registerTimer(timer_ms)
            self.timer.update((timer_ms,))
        yield self._output(out)
        if self.global_dir is not None and taught[0].size:
            yield self._output(self._partial_row(key, batch_ms, taught))

    # ---------------------------------------------------------------- pooling toward all traffic
    def _partial_row(self, key, batch_ms: int, taught) -> dict:
        """The ``"partial"`` row: the shard's delta for the all-traffic map (its labelled events of
        this micro-batch, in order), for the sink to merge (see :mod:`streamcal.spark._pool`)."""
        from streamcal.persist import to_bytes
        from streamcal.spark._pool import learned_delta

        delta = learned_delta(self.calibrator, self.prior_strength, *taught)
        return {
            "key": np.array([None], dtype=object),
            "event_id": np.array([str(key[0])], dtype=object),
            "time": np.array([float(batch_ms)]),
            "status": np.array(["partial"], dtype=object),
            "n_learned": np.array([delta.n_learned], dtype=np.int64),
            "n_pending": np.zeros(1, dtype=np.int64),
            "partial": np.array([to_bytes(delta, allow_pickle=False)], dtype=object),
        }

    # ---------------------------------------------------------------- Spark's entry points (timers)
    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        """Clear the shard's keys idle for ``ttl_ms`` (one ``"expired"`` row each), and set the
        timer at the next expiry of those left."""
        expiry_ms = expiredTimerInfo.getExpiryTimeInMs()
        engine, states = self._load()
        expired = [name for name, state in states.items() if state.seen_ms + self.ttl_ms <= expiry_ms]
        left = {name: state for name, state in states.items() if state.seen_ms + self.ttl_ms > expiry_ms}
        if expired:
            for name in expired:  # the shard's global map (pooling) keeps what they taught it
                if states[name].number in engine:
                    engine.drop_key(states[name].number)
            self._store(engine, left)
        elif self.loaded_version is not None:
            _RECENT[self.loaded_version] = (engine, states)  # unchanged
        if left:
            timer_ms = min(state.seen_ms for state in left.values()) + self.ttl_ms
            self.handle.registerTimer(timer_ms)
            self.timer.update((timer_ms,))
        else:
            self.timer.clear()
            self.state.clear()
            self.version.clear()
        if expired:
            n = len(expired)
            yield self._output(
                {
                    "key": np.array(expired, dtype=object),
                    "status": np.full(n, "expired", dtype=object),
                    "n_learned": np.array([states[name].n_learned for name in expired], dtype=np.int64),
                    "n_pending": np.array([len(states[name].pending) for name in expired], dtype=np.int64),
                }
            )

    def close(self) -> None:
        pass

    def _output(self, out: dict) -> pd.DataFrame:
        """The output columns ``out`` as one frame, with the key in front and every column typed
        (and, pooled, the ``partial`` column, null but in ``"partial"`` rows)."""
        n = len(out["status"])
        columns = {"key": np.asarray(out["key"], dtype=object)}
        kinds = {**OUTPUT_COLUMNS, "partial": "binary"} if self.global_dir is not None else OUTPUT_COLUMNS
        for name, kind in kinds.items():
            dtype = _DTYPES[kind]
            if name in out:
                columns[name] = np.asarray(out[name], dtype=dtype)
            else:
                columns[name] = np.full(n, np.nan if kind == "double" else None, dtype=dtype)
        return pd.DataFrame(columns, copy=False)
