"""Keyed calibration inside Spark Structured Streaming (extra ``streamcal-engine[spark]``).

:func:`calibrate_stream` groups a streaming DataFrame by shards of keys and
runs :class:`KeyedCalibrationProcessor` in ``transformWithStateInPandas``: each key's calibrator lives
in Spark's state store (RocksDB, checkpointed with the query) with its shard's, learns from label rows
and answers score rows with the calibrated probability and log-likelihood ratio, exactly as an in-process calibrator
of that key would on the key's rows in order. Spark partitions, checkpoints and recovers;
streamcal calibrates. With a prior strength, keys pool toward the global map of all traffic after
the previous micro-batch, which :func:`write_stream` (the query's sink) merges from each shard's
partial maps. :func:`local_session` starts a session set up for it. See docs/spark.md.

pyspark is imported when these are used; without it they raise an ``ImportError`` naming the extra.
"""

from __future__ import annotations

from streamcal.spark._query import DEFAULT_STRENGTH, calibrate_stream, local_session, write_stream

__all__ = [
    "DEFAULT_STRENGTH",
    "OUTPUT_COLUMNS",
    "STATUSES",
    "KeyedCalibrationProcessor",
    "calibrate_stream",
    "local_session",
    "write_stream",
]


def __getattr__(name: str):
    if name in {"KeyedCalibrationProcessor", "OUTPUT_COLUMNS", "STATUSES", "STATE_SCHEMA"}:
        from streamcal.spark._query import require_pyspark

        require_pyspark()
        from streamcal.spark import _processor

        return getattr(_processor, name)
    msg = f"module 'streamcal.spark' has no attribute {name!r}"
    raise AttributeError(msg)
