"""The sinks: what consumes each batch once the methods have calibrated it.

Every sink takes ``add(batch, proba, llr)`` (the :class:`~streamcal.replay._batch.EventBatch` and,
per method, its probabilities and LLRs in event order):

- :class:`ParquetSink` writes the kept input columns plus ``proba_<method>`` / ``llr_<method>``,
  each batch on a worker thread while the next one is computed;
- :class:`MetricsSink` computes the metrics per window of events, each finished window on a
  worker thread while the replay goes on;
- :class:`PlotSink` counts the reliability diagram's bins and draws the figure at the end.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from streamcal.replay._batch import EventBatch
from streamcal.replay._evaluate import MetricWindows, Reliability
from streamcal.replay._source import ReplayInputError, opt

__all__ = ["MetricsSink", "ParquetSink", "PlotSink", "check_output_columns", "open_parquet_writer", "write_metrics"]


# ---------------------------------------------------------------- the output Parquet file


class _BackgroundWriter:
    """A Parquet writer that writes each batch on a worker thread while the next one is computed
    (pyarrow releases the GIL while encoding and writing). At most one batch is in flight; an
    error on the worker is raised at the next call."""

    def __init__(self, path: Path, schema, compression: str, dictionary_columns):
        import pyarrow.parquet as pq

        # dictionary encoding only for the text-like input columns, never for the new floats; page
        # checksums, so that a reader can tell a damaged page from data
        self._writer = pq.ParquetWriter(
            path,
            schema,
            compression=compression,
            use_dictionary=list(dictionary_columns),
            write_page_checksum=True,
        )
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamcal-replay-writer")
        self._pending = None

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def write(self, batch) -> None:
        self._wait()
        self._pending = self._pool.submit(self._writer.write_batch, batch)

    def close(self) -> None:
        try:
            self._wait()
        finally:
            self._pool.shutdown(wait=True)
            self._writer.close()

    def abort(self) -> None:
        """Close after an error elsewhere, without raising a second one."""
        with contextlib.suppress(Exception):  # the first error is the one to report
            self.close()


def open_parquet_writer(path: Path, schema, compression: str, kept_schema):
    """A background Parquet writer of ``schema`` at ``path``, dictionary-encoding the text-like
    columns of ``kept_schema`` (the input columns)."""
    import pyarrow.types as pt

    # dictionary encoding pays for text-like columns only; on numbers and times it costs much
    # of the write and saves nothing
    textual = (pt.is_string, pt.is_large_string, pt.is_binary, pt.is_large_binary, pt.is_dictionary)
    names = [] if kept_schema is None else [f.name for f in kept_schema if any(is_(f.type) for is_ in textual)]
    return _BackgroundWriter(path, schema, compression, names)


def check_output_columns(kept_schema, names, calibrators=None) -> None:
    """Refuse input columns that the output's ``proba_<method>`` / ``llr_<method>`` (and a method's
    interval, ``p0_<method>`` / ``p1_<method>``) would clash with."""
    taken = set(kept_schema.names)
    for name in names:
        cal = (calibrators or {}).get(name)
        interval = getattr(cal, "process_with_interval", None) is not None
        for prefix in ("proba", "llr", "p0", "p1") if interval else ("proba", "llr"):
            col = f"{prefix}_{name}"
            if col in taken:
                msg = (
                    f"the output column {col!r} clashes with an input column of that name; "
                    f"leave it out with {opt('keep_columns')}."
                )
                raise ReplayInputError(msg)


def _output_batch(kept, names, proba, llr, intervals=None):
    import pyarrow as pa

    from streamcal.replay._arrow import fixed_width_array

    arrays = list(kept.columns)
    fields = list(kept.schema)
    for name in names:
        columns = [("proba", proba[name]), ("llr", llr[name])]
        if intervals and name in intervals:
            columns += [("p0", intervals[name][0]), ("p1", intervals[name][1])]
        for prefix, values in columns:
            arrays.append(fixed_width_array(np.asarray(values, dtype=np.float64), pa.float64()))
            fields.append(pa.field(f"{prefix}_{name}", pa.float64()))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


class ParquetSink:
    """The output file: per batch, its kept columns and every method's ``proba_`` / ``llr_``
    columns, written at ``path`` (the output's temporary name) by the writer ``open_writer(path,
    schema, compression, kept_schema)`` makes on the first batch."""

    def __init__(self, path: Path, names: list[str], compression: str, open_writer=open_parquet_writer):
        self.path = path
        self.names = names
        self.compression = compression
        self._open_writer = open_writer
        self._writer = None

    def add(self, batch: EventBatch, proba: dict, llr: dict, intervals=None) -> None:
        out = _output_batch(batch.kept, self.names, proba, llr, intervals)
        if self._writer is None:
            self._writer = self._open_writer(self.path, out.schema, self.compression, batch.kept.schema)
        self._writer.write(out)

    def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()


# ---------------------------------------------------------------- metrics over time


class MetricsSink:
    """Metrics per window of ``window`` events and method (:class:`MetricWindows`); the metrics of
    a finished window are computed on a worker thread while the replay goes on."""

    def __init__(self, names: list[str], window: int, metrics):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamcal-replay-metrics")
        self.windows = MetricWindows(names, window, metrics, executor=self._pool)

    def add(self, batch: EventBatch, proba: dict, llr: dict, intervals=None) -> None:
        self.windows.add(batch.t, batch.y, proba, llr)

    def finish(self, time_type):
        """The last window; the metrics table (start and end times as timestamps when the event
        times are)."""
        import pyarrow.types as pt

        self.windows.finish()
        return self.windows.table(time_type if time_type is not None and pt.is_timestamp(time_type) else None)

    def overall(self) -> dict[str, dict[str, float]]:
        return self.windows.overall()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def write_metrics(table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path, write_page_checksum=True)


# ---------------------------------------------------------------- the plot


class PlotSink:
    """Reliability counts per method, and of the input score while every score is a probability;
    :meth:`draw` writes the figure."""

    def __init__(self, names: list[str]):
        self.names = names
        self.reliability = Reliability([*names, "score"])
        self.score_is_proba = True

    def add(self, batch: EventBatch, proba: dict, llr: dict, intervals=None) -> None:
        for name in self.names:
            self.reliability.add(name, proba[name], batch.y)
        if self.score_is_proba and bool(np.all((batch.s >= 0.0) & (batch.s <= 1.0))):
            self.reliability.add("score", batch.s, batch.y)
        else:
            self.score_is_proba = False

    def draw(self, path: Path, metrics_table, *, n_events: int, title: str, alarms=None) -> None:
        from streamcal.replay._plot import plot_replay

        shown = [*self.names, "score"] if self.score_is_proba and n_events else self.names
        plot_replay(path, self.reliability, shown, metrics_table, title=title, alarms=alarms)
