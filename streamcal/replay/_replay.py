"""``replay``: stream recorded events through calibrators, prequentially, with late labels.

:func:`replay` checks its options, inputs and outputs, then wires the stages: the source
(:class:`~streamcal.replay._source.EventSource`) yields
:class:`~streamcal.replay._batch.EventBatch` es, the planner
(:class:`~streamcal.replay._engine.Planner`) turns each into an operation sequence, the runners
(:class:`~streamcal.replay._runners.Runners`) calibrate it with every method, and the sinks
(:mod:`streamcal.replay._sinks`) write the output file, compute the metrics and count the plot's
bins. The summary and its rendering are in :mod:`streamcal.replay._summary`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from streamcal._kernels._config import switch_ahead
from streamcal.replay._engine import Planner, first_plan_call
from streamcal.replay._evaluate import default_metrics
from streamcal.replay._keyed import KeyedSink, check_keyed_options, keyed_calibrators
from streamcal.replay._outputs import OutputFiles, check_outputs, reserve_tmp
from streamcal.replay._progress import Progress
from streamcal.replay._runners import Runners, resolve_calibrators
from streamcal.replay._sinks import (
    MetricsSink,
    ParquetSink,
    PlotSink,
    check_output_columns,
    open_parquet_writer,
    write_metrics,
)
from streamcal.replay._source import (
    DEFAULT_LABEL_TIME_COL,
    DEFAULT_TIME_COL,
    Columns,
    EventSource,
    FileSource,
    ReplayInputError,
    Source,
    list_sources,
    opt,
    prepare,
    read_chunks,
)
from streamcal.replay._summary import ReplaySummary
from streamcal.replay.methods import parse_duration

__all__ = ["DEFAULT_BATCH_SIZE", "ReplaySummary", "auto_metrics_window", "replay"]

#: Rows per record batch: large enough that per-batch costs vanish, small enough that four
#: methods side by side stay within a few hundred MB.
DEFAULT_BATCH_SIZE = 1 << 16
# the default metric windows' sizes (``auto_metrics_window``)
_METRICS_WINDOWS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
MAX_BATCH_SIZE = 1 << 40

# the names tests reach for: the output writer (looked up here at each replay, so that a test can
# wrap it to watch what is written) and the temporary names
_open_writer = open_parquet_writer
_reserve_tmp = reserve_tmp


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
    metrics_window: int | None = None,
    metrics: Mapping | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    plot=None,
    progress: bool = False,
    compression: str = "snappy",
    threads: int | None = None,
    method_options: Mapping | None = None,
    monitor: bool = False,
    group_col: str | None = None,
    prior_strength=None,
    max_keys: int | None = None,
) -> ReplaySummary:
    """Replay a recorded event stream through one or several calibrators, prequentially.

    Events are read in record batches and predicted in event-time order, each with the state
    before its own label was learned. A label is learned once the replay clock reaches its label
    time: just before the first later event at or after that time (so ties go to the label), and
    never before its own event is predicted. Per batch, every calibrator gets one ``process`` call
    over the merged sequence of due labels and predictions.

    The replay runs as stages passing one record, :class:`~streamcal.replay._batch.EventBatch`:
    the source reads and checks the input, the planner orders each batch's labels and predictions,
    the runners run every method on it, and the sinks write the output, the metrics and the plot.

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
    metrics_window : int, optional
        Events per metric window. Default (None): :func:`auto_metrics_window` of the input's
        length, about a twentieth of it as a round number between 1,000 and 100,000 events
        (100,000 when the length is unknown before reading: CSV, record batch readers), so that
        the metrics over time have points to draw whatever the input's size.
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
    monitor : bool
        Run the anytime-valid calibration monitors (:mod:`streamcal.monitor`, alpha 0.05) on the
        input score and on every method's output; the summary says when each first flagged its
        stream (``summary.alarms``) and the plot marks it.
    group_col : str, optional
        The key column (integers or strings: a campaign, a merchant, a country). Each method
        runs keyed, as a ``streamcal.KeyedCalibrator`` over the method as its template (pav
        only), each event calibrated with its key's map; the outputs are as without it, and the
        summary (``summary.keyed``) adds the field-level errors and the worst and largest keys.
        A null key is an error naming its row. With ``monitor``, the monitors also watch each
        key on its own (``summary.keyed["monitors"]``).
    prior_strength : float or "auto", optional
        With ``group_col``: the keyed calibrators' ``prior_strength`` (default ``"auto"``).
    max_keys : int, optional
        With ``group_col``: the keyed calibrators' ``max_keys`` (default: no limit).

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
    delay = _checked_options(on_unsorted, metrics_window, batch_size, threads, time_col, label_delay)
    columns = _columns(time_col, score_col, label_col, label_time_col, weight_col, keep_columns, group_col)
    check_keyed_options(group_col, prior_strength, max_keys)
    cals = resolve_calibrators(calibrators, buckets, window, decay, method_options)
    cals = keyed_calibrators(cals, group_col, prior_strength, max_keys)
    names = list(cals)
    metric_fns = default_metrics() if metrics is None else dict(metrics)
    sources = list_sources(input, format)
    targets = _checked_targets(input, sources, output=output, metrics_output=metrics_output, plot=plot)
    # every source's columns and types, before anything is read
    prepared = prepare(sources, columns, delay)
    if output is not None:
        check_output_columns(prepared.kept_schema, names, cals)
    timed = prepared.time_col is not None
    files = OutputFiles(targets)

    start = time.perf_counter()
    total = _count_rows(sources) if progress or metrics_window is None else None
    _start_compiled_tier(total)
    bar = Progress(total if progress else None, enabled=progress)
    if metrics_window is None:
        metrics_window = auto_metrics_window(total)
    planner = Planner(weighted=weight_col is not None, timed=timed)
    metrics_sink = MetricsSink(names, metrics_window, metric_fns)
    plot_sink = PlotSink(names) if plot is not None else None
    monitor_sink = _monitor_sink(names, keyed=group_col is not None) if monitor else None
    keyed_sink = KeyedSink(names, group_col) if group_col is not None else None
    parquet_sink = None
    source = runners = None

    def deliver(submitted) -> None:
        proba, llr, intervals = runners.results(submitted)
        for sink in sinks:
            sink.add(submitted.batch, proba, llr, intervals)
        bar.update(len(submitted.batch))

    try:
        files.reserve()
        if output is not None:
            parquet_sink = ParquetSink(files.tmp["output"], names, compression, _open_writer)
        sinks = [s for s in (plot_sink, metrics_sink, parquet_sink, monitor_sink, keyed_sink) if s is not None]
        source = EventSource(
            read_chunks(prepared, batch_size=batch_size),
            batch_size=batch_size,
            on_unsorted=on_unsorted,
            time_col=prepared.time_col,
        )
        runners = Runners(cals, timed=timed, threads=threads)
        n_pos = _run_batches(source, planner, runners, deliver)
        if planner.n_events == 0:
            raise _no_events(sources)
        table = _finish_outputs(planner, runners, metrics_sink, prepared, bar, parquet_sink, files)
        seconds = time.perf_counter() - start
        if plot_sink is not None:
            title = f"streamcal replay: {_input_name(sources)}"
            alarms = monitor_sink.alarms() if monitor_sink is not None else None
            plot_sink.draw(files.tmp["plot"], table, n_events=planner.n_events, title=title, alarms=alarms)
        files.commit()
    finally:
        if source is not None:
            source.close()
        metrics_sink.close()
        if runners is not None:
            runners.close()
        if parquet_sink is not None:
            parquet_sink.abort()
        files.discard()
    return ReplaySummary(
        files=[s.label for s in sources],
        methods=names,
        n_positive=n_pos,
        **planner.counts(),
        label_mode=prepared.label_mode,
        seconds=seconds,
        plot_seconds=time.perf_counter() - start - seconds if plot is not None else 0.0,
        metrics=metrics_sink.overall(),
        metrics_table=table,
        calibrators=cals,
        output=targets.get("output"),
        metrics_output=targets.get("metrics_output"),
        plot=targets.get("plot"),
        time_col=prepared.time_col,
        notes=_notes(prepared, planner, monitor_sink),
        metrics_window=metrics_window,
        alarms=monitor_sink.alarms() if monitor_sink is not None else None,
        keyed=_keyed_summary(keyed_sink, cals, monitor_sink),
    )


def _start_compiled_tier(total: int | None) -> None:
    """For an input of ``total`` events (None: not known before reading), beyond what the
    interpreted tier covers: numba's start-up and the planner's first compiled call begin on a
    worker thread, overlapping the opening of the input and the first batches' reading."""
    if total is not None:
        switch_ahead(total, first_plan_call)


def _keyed_summary(keyed_sink, cals, monitor_sink) -> dict | None:
    """The summary's keyed part, with the per-key monitors' alarms (``"monitors"``) when watched."""
    if keyed_sink is None:
        return None
    keyed = keyed_sink.finish(cals)
    if monitor_sink is not None:
        keyed["monitors"] = monitor_sink.key_alarms()
    return keyed


def _finish_outputs(planner, runners, metrics_sink, prepared, bar, parquet_sink, files):
    """After the last batch: learn the labels still in flight, close the metrics and the outputs;
    returns the metrics table (written when a metrics output was asked for)."""
    ops = planner.flush()
    if ops is not None:
        runners.learn(ops)
    table = metrics_sink.finish(prepared.time_type)
    bar.close()
    if parquet_sink is not None:
        parquet_sink.close()
    if "metrics_output" in files.tmp:
        write_metrics(table, files.tmp["metrics_output"])
    return table


def _checked_options(on_unsorted, metrics_window, batch_size, threads, time_col, label_delay):
    """Check replay's scalar options; returns the label delay in seconds (None: none)."""
    from streamcal._validation import check_scalar

    check_scalar(on_unsorted, "on_unsorted", choices=("error", "sort"))
    if metrics_window is not None:
        check_scalar(metrics_window, "metrics_window", int, low=1)
    check_scalar(batch_size, "batch_size", int, low=1, high=MAX_BATCH_SIZE)
    if threads is not None:
        check_scalar(threads, "threads", int, low=1)
    delay = None if label_delay is None else parse_duration(label_delay, "label_delay")
    if delay is not None and time_col is None:
        msg = f"{opt('label_delay')} needs event times; got {opt('time_col', None)}."
        raise ValueError(msg)
    return delay


def _checked_targets(input, sources, *, output, metrics_output, plot) -> dict:
    """The output paths by kind, checked against each other and the inputs (and matplotlib for a plot)."""
    items = input if isinstance(input, (list, tuple)) else [input]
    input_dirs = [str(i) for i in items if isinstance(i, (str, os.PathLike)) and os.path.isdir(i)]
    targets = {
        name: Path(path)
        for name, path in (("output", output), ("metrics_output", metrics_output), ("plot", plot))
        if path is not None
    }
    check_outputs(targets, sources, input_dirs)
    if plot is not None:
        _check_matplotlib()
    return targets


def _monitor_sink(names, keyed: bool):
    """The sink of ``monitor=True`` (imported only then)."""
    from streamcal.replay._monitor import MonitorSink

    return MonitorSink(names, keyed=keyed)


def _run_batches(source, planner, runners, deliver) -> int:
    """Plan and run every batch of the source; returns the number of positives read.

    Batch k is delivered to the sinks once batch k + 1 is read, planned and handed to the runners,
    so that the methods work on k + 1 while k is written.
    """
    n_pos = 0
    pending = None
    for batch in source:
        first = planner.n_events
        submitted = runners.submit(batch, planner.plan(batch), first)
        if pending is not None:
            deliver(pending)
        pending = submitted
        n_pos += int(batch.y.sum())
    if pending is not None:
        deliver(pending)
    return n_pos


def _columns(time_col, score_col, label_col, label_time_col, weight_col, keep_columns, group_col=None) -> Columns:
    """The column options, checked: names (or None where optional) and a list of names to keep."""
    for name, value, optional in (
        ("time_col", time_col, True),
        ("score_col", score_col, False),
        ("label_col", label_col, False),
        ("label_time_col", label_time_col, True),
        ("weight_col", weight_col, True),
        ("group_col", group_col, True),
    ):
        if not (isinstance(value, str) and value) and not (optional and value is None):
            msg = f"{opt(name)} must be a column name{' or None' if optional else ''}; got {value!r}."
            raise TypeError(msg) if not isinstance(value, str) else ValueError(msg)
    if keep_columns is not None and (
        isinstance(keep_columns, str) or not all(isinstance(c, str) for c in keep_columns)
    ):
        msg = f"{opt('keep_columns')} must be a list of column names; got {keep_columns!r}."
        raise TypeError(msg)
    return Columns(
        time=time_col,
        score=score_col,
        label=label_col,
        label_time=label_time_col,
        weight=weight_col,
        keep=None if keep_columns is None else tuple(keep_columns),
        key=group_col,
    )


def _notes(prepared, planner, monitor_sink) -> list[str]:
    """The summary's remarks: the input's, the label delays' (when the classes' differ) and the
    monitors' alarms."""
    notes = list(prepared.notes)
    kind = _time_kind(prepared)
    note = None
    if prepared.label_mode == "column" and kind is not None:
        note = planner.delays.note(planner.n_events, planner.clock - planner.start, kind == "timestamp")
        if note is not None:
            notes.append(note)
    if monitor_sink is not None:
        notes.extend(monitor_sink.lines(kind))
        if note is not None:
            notes.extend(_delayed_feedback_alarms(monitor_sink, planner, kind == "timestamp"))
    return notes


def _delayed_feedback_alarms(monitor_sink, planner, timestamps: bool) -> list[str]:
    """With the classes' labels arriving at different delays, a line on the methods the monitors
    flagged: a calibrator learns from the labels arrived so far, one class's sooner, while the
    monitors judge each event by its own label, so an alarm may be that bias (most likely early
    on, before the slower class's labels have come in)."""
    from streamcal.replay._engine import delay_text

    flagged = monitor_sink.first_learner_alarms()
    if not flagged:
        return []

    def say(seconds: float) -> str:
        return delay_text(seconds, timestamps)

    first = "; ".join(
        f"{name} at event {event:,}, {say(max(t - planner.start, 0.0))} into the stream"
        for name, (event, t) in flagged.items()
    )
    return [
        f"Monitors and label delays: first flagged {first}. The methods learn from the labels arrived so "
        f"far, one class's after longer delays (up to {say(planner.delays.longest)}), while the monitors judge "
        "each event by its own label: an alarm may be the delayed-feedback bias of the labels note rather than "
        "the calibrator's. Replay with the one delay that note suggests to tell the two apart."
    ]


def _time_kind(prepared) -> str | None:
    """How the monitors' summary shows event times: dates, numbers, or not at all (file order)."""
    import pyarrow.types as pt

    if prepared.time_col is None:
        return None
    return "timestamp" if prepared.time_type is not None and pt.is_timestamp(prepared.time_type) else "number"


def _check_matplotlib() -> None:
    """Fail before the replay, not after it, when the plot cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from streamcal._install import install_hint

        msg = f"{opt('plot')} needs matplotlib: {install_hint('plot')}."
        raise ImportError(msg) from None


def _no_events(sources: list[Source]) -> ReplayInputError:
    what = (
        f"{sources[0].where()} has the columns but no rows"
        if len(sources) == 1
        else f"its {len(sources)} inputs have the columns but no rows"
    )
    msg = f"the input holds no events: {what}."
    return ReplayInputError(msg)


def _input_name(sources: list[Source]) -> str:
    first = sources[0]
    name = Path(first.path).name if isinstance(first, FileSource) else first.label
    return name if len(sources) == 1 else f"{name} and {len(sources) - 1} more"


def auto_metrics_window(n_events: int | None) -> int:
    """The default events per metric window for an input of ``n_events`` (None: unknown).

    About ``n_events / 20``, rounded down to 1, 2 or 5 times a power of ten, within
    ``[1_000, 100_000]``: a 100,000-event file gets 20 windows of 5,000, ten million events 100
    of 100,000. Unknown lengths get 100,000.

    Examples
    --------
    >>> [auto_metrics_window(n) for n in (2_000, 100_000, 300_000, 10_000_000, None)]
    [1000, 5000, 10000, 100000, 100000]
    """
    if n_events is None:
        return _METRICS_WINDOWS[-1]
    return max([w for w in _METRICS_WINDOWS if w <= n_events // 20], default=_METRICS_WINDOWS[0])


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
