"""``replay``: stream recorded events through calibrators, prequentially, with late labels."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from streamcal.replay._engine import InFlight, plan_batch, plan_flush
from streamcal.replay._evaluate import MetricWindows, Reliability, default_metrics
from streamcal.replay._progress import Progress
from streamcal.replay._source import (
    DEFAULT_LABEL_TIME_COL,
    DEFAULT_TIME_COL,
    Chunk,
    Columns,
    FileSource,
    Prefetch,
    ReplayInputError,
    Source,
    list_sources,
    opt,
    prepare,
    read_chunks,
)
from streamcal.replay.methods import UnavailableMethodError, make_calibrator, parse_duration

__all__ = ["DEFAULT_BATCH_SIZE", "ReplaySummary", "replay"]

#: Rows per record batch: large enough that per-batch costs vanish (the same events/s as 2**20
#: rows), small enough that four methods side by side stay within a few hundred MB.
DEFAULT_BATCH_SIZE = 1 << 16
MAX_BATCH_SIZE = 1 << 40


@dataclass
class ReplaySummary:
    """What a replay did and how each method scored.

    Attributes
    ----------
    files : list of str
        Input files, in the order replayed (in-memory inputs as ``"<pandas DataFrame>"`` etc.).
    methods : list of str
        Method names, in output order.
    n_events, n_positive : int
        Events replayed, and how many were positive.
    n_learned : int
        Labels learned (each calibrator learned the same ones).
    n_in_flight : int
        Labels whose label time came after the last event: never learned.
    label_mode : str
        ``"column"`` (label-time column), ``"delay"`` (fixed delay) or ``"immediate"``.
    seconds : float
        Wall time of the replay: reading, calibrating, metrics, writing (the plot apart).
    plot_seconds : float
        Wall time of drawing the plot (0 without one).
    metrics : dict
        ``metrics[method][metric]``: the metric averaged over the windows, weighted by events.
    metrics_table : pyarrow.Table
        Metrics over time: one row per window of events and method.
    calibrators : dict
        The calibrators, in their state at the end of the stream.
    output, metrics_output, plot : pathlib.Path or None
        Files written.
    time_col : str or None
        The event time column the replay ordered by; None: file order.
    notes : list of str
        One-line remarks printed with the summary (such as a replay in file order because the
        input has no ``event_time`` column).
    """

    files: list[str]
    methods: list[str]
    n_events: int
    n_positive: int
    n_learned: int
    n_in_flight: int
    label_mode: str
    seconds: float
    metrics: dict[str, dict[str, float]]
    metrics_table: object
    calibrators: dict[str, object] = field(repr=False)
    output: Path | None = None
    metrics_output: Path | None = None
    plot: Path | None = None
    plot_seconds: float = 0.0
    time_col: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def events_per_second(self) -> float:
        return self.n_events / self.seconds if self.seconds > 0 else float("nan")

    def _rows(self) -> tuple[list[str], list[list[str]]]:
        names = list(next(iter(self.metrics.values()), {}))
        header = ["method", *(_DISPLAY.get(k, k) for k in names)]
        rows = [[m, *(_fmt(self.metrics[m][k]) for k in names)] for m in self.methods]
        return header, rows

    def _caption(self) -> str:
        rate = self.n_positive / self.n_events if self.n_events else float("nan")
        noun = "input(s)" if any(f.startswith("<") for f in self.files) else "file(s)"
        return (
            f"{self.n_events:,} events ({rate:.3%} positive) from {len(self.files)} {noun} in "
            f"{self.seconds:.2f} s ({self.events_per_second:,.0f} events/s); labels: "
            f"{self.label_mode}, {self.n_learned:,} learned, {self.n_in_flight:,} still in flight "
            "at the end. Metrics: event-weighted mean over windows."
            + (f" Plot drawn in {self.plot_seconds:.2f} s." if self.plot is not None else "")
        )

    def to_text(self) -> str:
        """The summary as a plain-text table."""
        header, rows = self._rows()
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

        def line(cells):
            pairs = enumerate(zip(cells, widths, strict=True))
            return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in pairs)

        lines = [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
        lines.append(self._caption())
        lines.extend(self.notes)
        for label, path in (
            ("output", self.output),
            ("metrics", self.metrics_output),
            ("plot", self.plot),
        ):
            if path is not None:
                lines.append(f"{label}: {path}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def print(self, file=None) -> None:
        """Print the summary: a rich table if rich is installed, plain text otherwise."""
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            print(self.to_text(), file=file)
            return
        header, rows = self._rows()
        table = Table(title="streamcal replay", title_justify="left")
        for i, h in enumerate(header):
            table.add_column(h, justify="right" if i else "left")
        for r in rows:
            table.add_row(*r)
        console = Console(file=file, soft_wrap=False)
        console.print(table)
        console.print(self._caption(), highlight=False)
        for note in self.notes:
            console.print(note, highlight=False, markup=False)
        for label, path in (
            ("output", self.output),
            ("metrics", self.metrics_output),
            ("plot", self.plot),
        ):
            if path is not None:
                console.print(f"{label}: {path}", highlight=False, soft_wrap=True)


_DISPLAY = {
    "brier": "Brier",
    "log_loss": "log loss",
    "cllr": "Cllr",
    "min_cllr": "minCllr",
    "ece": "ECE",
    "calibration_loss": "cal. loss",
}


def _fmt(x: float) -> str:
    return "nan" if not np.isfinite(x) else f"{x:.4f}"


def _same_file(a, b) -> bool:
    """Whether two paths name the same file: the same real path (through symlinks), or the same
    file on disk (hard links; only when both exist)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def _check_outputs(targets: dict[str, Path], sources: list[Source], input_dirs: list[str]) -> None:
    """Refuse, before anything is read, outputs that are directories, in missing or unwritable
    directories, not regular files, the same as each other or as an input, or inside an input
    directory."""
    seen: list[tuple[str, Path]] = []
    inputs = [s.path for s in sources if s.path is not None]
    for name, path in targets.items():
        given = opt(name, str(path))
        if path.is_dir():
            msg = f"{given}: is a directory; give a file name."
            raise ValueError(msg)
        parent = Path(os.path.realpath(path)).parent
        if not parent.is_dir():
            what = "does not exist" if not parent.exists() else "is not a directory"
            msg = f"{given}: the directory {str(parent)!r} {what}."
            raise ValueError(msg)
        if path.exists() and not path.is_file():
            msg = f"{given}: exists and is not a regular file; give a file name."
            raise ValueError(msg)
        if not os.access(parent, os.W_OK | os.X_OK):
            msg = f"{given}: cannot write in the directory {str(parent)!r}."
            raise ValueError(msg)
        for other, other_path in seen:
            if _same_file(path, other_path):
                msg = f"{opt(name)} and {opt(other)} are the same file {str(path)!r}; give them different names."
                raise ValueError(msg)
        for f in inputs:
            if _same_file(path, f):
                msg = f"{opt(name)} would overwrite the input file {f!r}; choose another path."
                raise ValueError(msg)
        for d in input_dirs:
            if os.path.realpath(path).startswith(os.path.join(os.path.realpath(d), "")):
                msg = f"{given}: is inside the input directory {d!r}, whose files are replayed; write it elsewhere."
                raise ValueError(msg)
        seen.append((name, path))


def _reserve_tmp(name: str, final: Path) -> Path:
    """A new, unique temporary file next to ``final`` (its real path, through symlinks), created
    empty; it replaces ``final`` atomically once complete. Hidden (``.`` first, so a directory
    listing of inputs skips it) and with ``final``'s suffix (matplotlib picks the format by it)."""
    real = Path(os.path.realpath(final))
    while True:
        tmp = real.with_name(f".{real.name}.{secrets.token_hex(4)}.tmp{real.suffix}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            msg = f"{opt(name, str(final))}: cannot write in the directory {str(real.parent)!r}: {exc.strerror or exc}."
            raise ValueError(msg) from None
        os.close(fd)
        return tmp


def _resolve_calibrators(calibrators, buckets, window, decay, options) -> dict[str, object]:
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


def _check_order(chunk: Chunk, last: float, column: str | None) -> None:
    t = chunk.t
    if t.size == 0:
        return
    if t[0] < last:
        i = 0
        prev = last
    else:
        back = t[1:] < t[:-1]
        if not back.any():
            return
        i = int(np.flatnonzero(back)[0]) + 1
        prev = t[i - 1]
    msg = (
        f"{chunk.where(column, i)}: event times go backwards "
        f"({float(t[i])!r} s after {float(prev)!r} s). "
        f"Sort the input, or replay with {opt('on_unsorted', 'sort')}."
    )
    raise ReplayInputError(msg)


_SORTED = Source("<sorted input>", "the input sorted by event time")


def _sorted_chunks(chunks, batch_size: int):
    """Read everything, sort stably by event time, and cut into batches again (in memory)."""
    import pyarrow as pa

    chunks = list(chunks)
    if not chunks:
        return
    t = np.concatenate([c.t for c in chunks])
    order = np.argsort(t, kind="stable")
    kept = pa.Table.from_batches([c.kept for c in chunks]).combine_chunks()

    def cat(attr):
        parts = [getattr(c, attr) for c in chunks]
        return None if parts[0] is None else np.concatenate(parts)[order]

    s, y, lt, w = cat("s"), cat("y"), cat("label_t"), cat("w")
    t = t[order]
    kept = kept.take(pa.array(order))
    for start in range(0, t.size, batch_size):
        sl = slice(start, start + batch_size)
        part = kept.slice(start, min(batch_size, t.size - start)).combine_chunks().to_batches()
        kb = part[0] if part else pa.RecordBatch.from_pylist([], schema=kept.schema)
        yield Chunk(
            source=_SORTED,
            row0=start,
            kept=kb,
            t=t[sl],
            s=s[sl],
            y=y[sl],
            label_t=None if lt is None else lt[sl],
            w=None if w is None else w[sl],
        )


def replay(
    input,
    calibrators="pav",
    *,
    buckets=None,
    window=None,
    decay=None,
    time_col: str | None = DEFAULT_TIME_COL,
    score_col: str = "score",
    label_col: str = "label",
    label_time_col: str | None = DEFAULT_LABEL_TIME_COL,
    weight_col: str | None = None,
    keep_columns=None,
    label_delay=None,
    format: str | None = None,
    on_unsorted: str = "error",
    output=None,
    metrics_output=None,
    metrics_window: int = 100_000,
    metrics: Mapping | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    plot=None,
    progress: bool = False,
    compression: str = "snappy",
    threads: int | None = None,
    method_options: Mapping | None = None,
) -> ReplaySummary:
    """Replay a recorded event stream through one or several calibrators, prequentially.

    Events are read in record batches and predicted in event-time order, each with the state
    before its own label was learned. A label is learned once the replay clock reaches its label
    time: just before the first later event at or after that time (so ties go to the label), and
    never before its own event is predicted. Per batch, every calibrator gets one ``process`` call
    over the merged sequence of due labels and predictions.

    Parameters
    ----------
    input : path-like, table, or a list of them
        A Parquet, Arrow IPC or CSV file, or a directory of them (files in path order); a pyarrow
        ``Table``, ``RecordBatch`` or ``RecordBatchReader``; a pandas or polars ``DataFrame``
        (named index levels count as columns); or a list of these, replayed in its order. Every
        input gives the same results as the same rows in a Parquet file.
    calibrators : str, list or dict
        Method names (``"pav,gev"`` or ``["pav", "gev"]``, resolved by
        :func:`streamcal.replay.methods.make_calibrator`), or a mapping ``name -> calibrator``
        (instances with streamcal's ``process`` method; they are updated in place).
    buckets, window, decay
        Passed to each named method: ``buckets=``; ``window`` an int (count window) or a duration
        such as ``"7d"`` (time window); ``decay`` a half-life (exponential forgetting).
    time_col : str or None
        The event time column. Default: ``"event_time"`` if the input has it, else the input is
        replayed in file order (and the summary says so). None: file order. A name given
        explicitly must be present.
    score_col, label_col, label_time_col, weight_col : str or None
        Input column names. ``label_time_col``: when each label becomes known (null: never);
        default ``"label_time"`` if the input has it, else labels are known at once (a name given
        explicitly must be present; None: labels known at once).
    keep_columns : list of str, optional
        Input columns copied to the output (default: all).
    label_delay : float or str, optional
        A fixed label delay (seconds, or ``"3d"``); overrides the label-time column.
    format : {"parquet", "ipc", "csv"}, optional
        Input format, if it cannot be told from the file names.
    on_unsorted : {"error", "sort"}
        Event times going backwards: raise an error naming file, column and row, or sort the
        whole input by event time first (stable; holds the input in memory).
    output : path-like, optional
        Parquet file receiving the kept input columns plus ``proba_<method>`` and ``llr_<method>``,
        written batch by batch (with page checksums) under a unique temporary name in the same
        directory, renamed when complete.
    metrics_output : path-like, optional
        Parquet file for the metrics over time (also in ``summary.metrics_table``).
    metrics_window : int
        Events per metric window.
    metrics : mapping, optional
        ``name -> f(labels, proba, llr)``; default :func:`default_metrics` (Brier, log loss, Cllr,
        minCllr, ECE, calibration loss from :mod:`streamcal.metrics`).
    batch_size : int
        Maximum rows per record batch read (default 65,536). Peak memory grows with it, not with
        the length of the input.
    plot : path-like, optional
        PNG with reliability diagrams and metrics over time (needs matplotlib).
    progress : bool
        Show rows, rows/s and ETA on stderr during long runs.
    compression : str
        Parquet compression of the output.
    method_options : mapping, optional
        Further constructor options for the named methods, each passed to the methods that take
        it, for instance ``{"refit_every": 1000}`` (I-spline, GEV and Platt refit lazily before
        every prediction that follows a new label by default, which is slow on long streams).
    threads : int, optional
        1: run every method on the calling thread, batch after batch. Default: each method on its
        own worker thread, so that methods run side by side and a batch is calibrated while the
        next one is read and planned and the previous one written. Results do not depend on it.

    Returns
    -------
    ReplaySummary

    Raises
    ------
    ReplayInputError
        The input is unusable (missing, empty, unreadable or corrupt, missing columns, bad
        values, no events at all); the message names the input, the column and the row.
    ValueError, TypeError
        A bad option, or an output that is a directory, in a missing directory, or the same file
        as another output or an input. Everything is checked before anything is read or written;
        on any error no output file is left behind.

    Examples
    --------
    >>> import tempfile
    >>> from streamcal.replay import generate, replay
    >>> from streamcal.replay.methods import RawScoreCalibrator
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = generate(f"{tmp}/clicks.parquet", n=5_000, seed=3)
    ...     summary = replay(path, {"raw": RawScoreCalibrator()}, metrics_window=1_000,
    ...                      metrics={"mean_p": lambda y, p, llr: p.mean()})
    >>> summary.n_events, summary.label_mode, summary.metrics_table.num_rows
    (5000, 'column', 5)

    An in-memory table replays the same way (here without an ``event_time`` column: in file
    order, as the summary notes):

    >>> import pyarrow as pa
    >>> table = pa.table({"score": [0.2, 0.7, 0.4, 0.9], "label": [0, 1, 0, 1]})
    >>> summary = replay(table, {"raw": RawScoreCalibrator()}, metrics={})
    >>> summary.n_events, summary.time_col, summary.notes[0][:24]
    (4, None, 'Replayed in file order: ')
    """
    from streamcal._validation import check_scalar

    check_scalar(on_unsorted, "on_unsorted", choices=("error", "sort"))
    check_scalar(metrics_window, "metrics_window", int, low=1)
    check_scalar(batch_size, "batch_size", int, low=1, high=MAX_BATCH_SIZE)
    if threads is not None:
        check_scalar(threads, "threads", int, low=1)
    for name, value, optional in (
        ("time_col", time_col, True),
        ("score_col", score_col, False),
        ("label_col", label_col, False),
        ("label_time_col", label_time_col, True),
        ("weight_col", weight_col, True),
    ):
        if not (isinstance(value, str) and value) and not (optional and value is None):
            msg = f"{opt(name)} must be a column name{' or None' if optional else ''}; got {value!r}."
            raise TypeError(msg) if not isinstance(value, str) else ValueError(msg)
    if keep_columns is not None and (
        isinstance(keep_columns, str) or not all(isinstance(c, str) for c in keep_columns)
    ):
        msg = f"{opt('keep_columns')} must be a list of column names; got {keep_columns!r}."
        raise TypeError(msg)
    delay = None if label_delay is None else parse_duration(label_delay, "label_delay")
    columns = Columns(
        time=time_col,
        score=score_col,
        label=label_col,
        label_time=label_time_col,
        weight=weight_col,
        keep=None if keep_columns is None else tuple(keep_columns),
    )
    if delay is not None and time_col is None:
        msg = f"{opt('label_delay')} needs event times; got {opt('time_col', None)}."
        raise ValueError(msg)
    cals = _resolve_calibrators(calibrators, buckets, window, decay, method_options)
    names = list(cals)
    metric_fns = default_metrics() if metrics is None else dict(metrics)
    sources = list_sources(input, format)
    items = input if isinstance(input, (list, tuple)) else [input]
    input_dirs = [str(i) for i in items if isinstance(i, (str, os.PathLike)) and os.path.isdir(i)]
    targets = {
        name: Path(path)
        for name, path in (("output", output), ("metrics_output", metrics_output), ("plot", plot))
        if path is not None
    }
    _check_outputs(targets, sources, input_dirs)
    if plot is not None:
        try:  # fail before the replay, not after it
            import matplotlib  # noqa: F401
        except ImportError:
            msg = f"{opt('plot')} needs matplotlib: pip install 'streamcal-engine[plot]'."
            raise ImportError(msg) from None
    # every source's columns and types, before anything is read
    prepared = prepare(sources, columns, delay)
    if output is not None:
        _output_columns(prepared.kept_schema, names)
    timed = prepared.time_col is not None
    output = targets.get("output")
    metrics_output = targets.get("metrics_output")
    plot = targets.get("plot")

    start = time.perf_counter()
    total = _count_rows(sources) if progress else None
    bar = Progress(total, enabled=progress)
    reader = None
    from concurrent.futures import ThreadPoolExecutor

    # metrics of finished windows are computed on their own thread while the replay goes on
    metrics_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamcal-replay-metrics")
    windows = MetricWindows(names, metrics_window, metric_fns, executor=metrics_pool)
    reliability = Reliability([*names, "score"]) if plot is not None else None
    raw_is_proba = True
    flight = InFlight.empty(weight_col is not None)
    clock = -np.inf
    n_events = n_pos = n_learned = 0
    writer = None
    # each output is written under its own unique temporary name, reserved now (so that an
    # unwritable directory fails before the run), and renamed over the final name at the end
    tmps: dict[str, Path] = {}
    # each method runs on its own worker thread (numba kernels release the GIL), so batch k is
    # calibrated while batch k + 1 is read and planned and batch k - 1 is written; a method's
    # batches still run one after the other, in order, on its one thread
    runners = None
    pending = None  # (chunk, results or futures, ops, first event index) of the batch being calibrated

    def finish(chunk: Chunk, results: list, ops, first: int) -> None:
        nonlocal writer, raw_is_proba
        n = len(chunk)
        proba, llr = {}, {}
        for name, item in zip(names, results, strict=True):
            result = item.result() if runners is not None else item
            if isinstance(result, Exception):
                raise ReplayInputError(_rejected(name, chunk, ops, first, result))
            proba[name], llr[name] = result
            if reliability is not None:
                reliability.add(name, proba[name], chunk.y)
        if reliability is not None:
            if raw_is_proba and bool(np.all((chunk.s >= 0.0) & (chunk.s <= 1.0))):
                reliability.add("score", chunk.s, chunk.y)
            else:
                raw_is_proba = False
        windows.add(chunk.t, chunk.y, proba, llr)
        if output is not None:
            batch = _output_batch(chunk.kept, names, proba, llr)
            if writer is None:
                writer = _open_writer(tmps["output"], batch.schema, compression, chunk.kept.schema)
            writer.write(batch)
        bar.update(n)

    try:
        for name, path in targets.items():
            tmps[name] = _reserve_tmp(name, path)
        # the next batches are read and checked on a worker thread while this one is planned
        reader = Prefetch(read_chunks(prepared, batch_size=batch_size), depth=2)
        chunks = iter(reader)
        if on_unsorted == "sort":
            chunks = _sorted_chunks(chunks, batch_size)
        if threads != 1:
            runners = {name: ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamcal-replay") for name in names}
        for chunk in chunks:
            _check_order(chunk, clock, prepared.time_col)
            n = len(chunk)
            # labels known at once: each event is predicted, then learned (before the next one),
            # which is exactly `prequential`; otherwise plan the merged operation sequence
            ops = None
            if chunk.label_t is not None:
                ops, flight = plan_batch(flight, chunk.t, chunk.s, chunk.y, chunk.label_t, chunk.w, n_events)
                if not timed:
                    ops.t = None
            times = chunk.t if timed else None
            if runners is None:
                results = [_step(cal, chunk, ops, times) for cal in cals.values()]
            else:
                results = [runners[name].submit(_step, cal, chunk, ops, times) for name, cal in cals.items()]
            if pending is not None:
                finish(*pending)
            pending = (chunk, results, ops, n_events)
            n_events += n
            n_pos += int(chunk.y.sum())
            n_learned += n if ops is None else ops.n_learn
            clock = float(chunk.t[-1])
        if pending is not None:
            chunk_results, pending = pending, None
            finish(*chunk_results)
        if n_events == 0:
            what = (
                f"{sources[0].where()} has the columns but no rows"
                if len(sources) == 1
                else f"its {len(sources)} inputs have the columns but no rows"
            )
            msg = f"the input holds no events: {what}."
            raise ReplayInputError(msg)
        if len(flight) and np.isfinite(clock):
            ops, flight = plan_flush(flight, clock)
            if ops.n_learn:
                for cal in cals.values():
                    flush_t = ops.t if timed else None
                    cal.process(ops.s, ops.y, ops.learn, weights=ops.w, times=flush_t)
                n_learned += ops.n_learn
        windows.finish()
        bar.close()
        if writer is not None:
            writer.close()
            writer = None
        table = windows.table(_time_type(prepared.time_type))
        if metrics_output is not None:
            import pyarrow.parquet as pq

            pq.write_table(table, tmps["metrics_output"], write_page_checksum=True)
        seconds = time.perf_counter() - start
        if plot is not None:
            from streamcal.replay._plot import plot_replay

            tmp = tmps["plot"]
            shown = [*names, "score"] if raw_is_proba and n_events else names
            plot_replay(
                tmp,
                reliability,
                shown,
                table,
                title=f"streamcal replay: {_input_name(sources)}",
            )
        # everything written: give the files their final names (real paths, through symlinks)
        for name, path in targets.items():
            os.replace(tmps.pop(name), os.path.realpath(path))
    finally:
        if reader is not None:
            reader.close()
        metrics_pool.shutdown(wait=True)
        for runner in (runners or {}).values():
            runner.shutdown(wait=True, cancel_futures=True)
        if writer is not None:
            writer.abort()
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)
    return ReplaySummary(
        files=[s.label for s in sources],
        methods=names,
        n_events=n_events,
        n_positive=n_pos,
        n_learned=n_learned,
        n_in_flight=len(flight),
        label_mode=prepared.label_mode,
        seconds=seconds,
        plot_seconds=time.perf_counter() - start - seconds if plot is not None else 0.0,
        metrics=windows.overall(),
        metrics_table=table,
        calibrators=cals,
        output=output,
        metrics_output=metrics_output,
        plot=plot,
        time_col=prepared.time_col,
        notes=list(prepared.notes),
    )


def _input_name(sources: list[Source]) -> str:
    first = sources[0]
    name = Path(first.path).name if isinstance(first, FileSource) else first.label
    return name if len(sources) == 1 else f"{name} and {len(sources) - 1} more"


def _rejected(name: str, chunk: Chunk, ops, first: int, exc: Exception) -> str:
    """The message for a calibrator that rejected a batch: method, file, rows, and the row of the
    offending operation when the calibrator's message gives its position."""
    n = len(chunk)
    rows = f"rows {chunk.row0}-{chunk.row0 + n - 1}"
    msg = f"method {name!r} rejected the events of {chunk.source.where()}, {rows}: {exc}"
    noun = chunk.source.noun
    match = re.search(r"at position (\d+)", str(exc))
    if match is None:
        return msg
    position = int(match.group(1))
    if ops is None:  # prequential on the batch: positions are the batch's rows
        return f"{msg} (position {position} is row {chunk.row0 + position} of that {noun})"
    if position >= ops.learn.size:
        return msg
    event = ops.event_of(position, first)
    kind = "learning the label of" if ops.learn[position] else "predicting"
    where = f"row {chunk.row0 + event - first} of that {noun}" if event >= first else "an event of an earlier batch"
    return f"{msg} (position {position} is {kind} event {event} of the stream, {where})"


def _step(cal, chunk: Chunk, ops, times):
    """One method on one batch: ``(proba, llr)`` per event, or the exception it raised on input.

    ``ops`` None means labels known at once: ``prequential`` on the batch itself.
    """
    try:
        if ops is None:
            proba, llr = cal.prequential(chunk.s, chunk.y, weights=chunk.w, times=times)
            return np.asarray(proba), np.asarray(llr)
        proba, llr = cal.process(ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)
        return np.asarray(proba)[ops.pred_pos], np.asarray(llr)[ops.pred_pos]
    except (ValueError, TypeError) as exc:
        return exc


def _count_rows(sources: list[Source]) -> int | None:
    """Total rows from file metadata (Parquet / IPC) or table lengths; None when only a full read
    tells (CSV, record batch readers)."""
    total = 0
    for source in sources:
        rows = source.count_rows()
        if rows is None:
            return None
        total += rows
    return total


class _BackgroundWriter:
    """A Parquet writer that writes each batch on a worker thread while the next one is computed
    (pyarrow releases the GIL while encoding and writing). At most one batch is in flight; an
    error on the worker is raised at the next call."""

    def __init__(self, path: Path, schema, compression: str, dictionary_columns):
        from concurrent.futures import ThreadPoolExecutor

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


def _open_writer(path: Path, schema, compression: str, kept_schema):
    import pyarrow.types as pt

    # dictionary encoding pays for text-like columns only; on numbers and times it costs ~40 %
    # of the write and saves nothing
    textual = (pt.is_string, pt.is_large_string, pt.is_binary, pt.is_large_binary, pt.is_dictionary)
    names = [] if kept_schema is None else [f.name for f in kept_schema if any(is_(f.type) for is_ in textual)]
    return _BackgroundWriter(path, schema, compression, names)


def _output_columns(kept_schema, names) -> None:
    """Refuse input columns that the output's ``proba_<method>`` / ``llr_<method>`` would clash with."""
    taken = set(kept_schema.names)
    for name in names:
        for prefix in ("proba", "llr"):
            col = f"{prefix}_{name}"
            if col in taken:
                msg = (
                    f"the output column {col!r} clashes with an input column of that name; "
                    f"leave it out with {opt('keep_columns')}."
                )
                raise ReplayInputError(msg)


def _output_batch(kept, names, proba, llr):
    import pyarrow as pa

    arrays = list(kept.columns)
    fields = list(kept.schema)
    for name in names:
        for prefix, values in (("proba", proba[name]), ("llr", llr[name])):
            arrays.append(pa.array(values, pa.float64()))
            fields.append(pa.field(f"{prefix}_{name}", pa.float64()))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _time_type(typ):
    import pyarrow.types as pt

    return typ if typ is not None and pt.is_timestamp(typ) else None
