"""The replay's summary: what a replay did and how each method scored, and its rendering as a
plain-text table or, when rich is installed, a rich one."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["ReplaySummary", "print_summary", "render_text"]


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
    n_never : int
        Labels that never arrive (a null or infinite label time): never learned, and never held in flight.
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
    metrics_window : int or None
        Events per metric window (None: not recorded).
    alarms : dict or None
        With ``monitor=True``: ``alarms[stream][monitor]``, the ``(event index, event time)`` of
        the first alarm of each calibration monitor on each method's output and on the input
        score (``"score"``), or None where it never rose.
    keyed : dict or None
        With a group column: the keyed part (plain numbers and strings, ready for JSON), from
        :meth:`streamcal.replay._keyed.KeyedSink.finish`: ``group_col``, ``n_keys``,
        ``min_events`` and per method (``keyed["methods"][method]``) ``field_ece``,
        ``field_rce``, ``keys_held``, ``evictions``, ``prior_strength``, and the ``worst`` and
        ``largest`` keys, each with its events, positives, predicted positives, ratio and
        Poisson deviance (the worst: the largest deviance first). With
        ``monitor=True`` also ``monitors``: per stream (each method, and ``"score"``) the mean-bias
        monitors of every key on its own, ``{"mean bias": {"keys_watched", "keys_flagged",
        "first"}}``, ``first`` the ``{"event", "time", "key"}`` of the first key's alarm or None.
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
    n_never: int = 0
    metrics_window: int | None = None
    alarms: dict | None = None
    keyed: dict | None = None

    @property
    def events_per_second(self) -> float:
        return self.n_events / self.seconds if self.seconds > 0 else float("nan")

    def to_text(self) -> str:
        """The summary as a plain-text table."""
        return render_text(self)

    def __str__(self) -> str:
        return self.to_text()

    def print(self, file=None) -> None:
        """Print the summary: a rich table on a terminal if rich is installed, plain text otherwise."""
        print_summary(self, file)


# ---------------------------------------------------------------- rendering

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


def _table(summary: ReplaySummary) -> tuple[list[str], list[list[str]]]:
    """The header and one row per method: the metrics averaged over the windows."""
    names = list(next(iter(summary.metrics.values()), {}))
    header = ["method", *(_DISPLAY.get(k, k) for k in names)]
    rows = [[m, *(_fmt(summary.metrics[m][k]) for k in names)] for m in summary.methods]
    return header, rows


def _caption(summary: ReplaySummary) -> str:
    s = summary
    rate = s.n_positive / s.n_events if s.n_events else float("nan")
    noun = "input(s)" if any(f.startswith("<") for f in s.files) else "file(s)"
    return (
        f"{s.n_events:,} event{'' if s.n_events == 1 else 's'} ({rate:.3%} positive) from {len(s.files)} {noun} in "
        f"{s.seconds:.2f} s ({s.events_per_second:,.0f} events/s); labels: "
        f"{s.label_mode}, {s.n_learned:,} learned, {s.n_in_flight:,} still in flight at the end"
        + (f", {s.n_never:,} never arrive (null or infinite label time)" if s.n_never else "")
        + ". Metrics: event-weighted mean over windows"
        + (f" of {s.metrics_window:,} events." if s.metrics_window else ".")
        + (f" Plot drawn in {s.plot_seconds:.2f} s." if s.plot is not None else "")
    )


def _files(summary: ReplaySummary) -> list[str]:
    """``output: PATH`` and the like, for the files written."""
    written = (("output", summary.output), ("metrics", summary.metrics_output), ("plot", summary.plot))
    return [f"{label}: {path}" for label, path in written if path is not None]


def _keyed_lines(summary: ReplaySummary) -> list[str]:
    """The field-level errors and the worst and largest keys (none without a group column)."""
    from streamcal.replay._keyed import summary_lines

    return summary_lines(summary.keyed)


def render_text(summary: ReplaySummary) -> str:
    """The summary as a plain-text table, its caption, notes and the files written."""
    header, rows = _table(summary)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in pairs)

    lines = [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
    lines.append(_caption(summary))
    lines.extend(summary.notes)
    lines.extend(_keyed_lines(summary))
    lines.extend(_files(summary))
    return "\n".join(lines)


def print_summary(summary: ReplaySummary, file=None) -> None:
    """Print the summary: a rich table on a terminal if rich is installed, plain text otherwise.

    Written to a file or a pipe (not a terminal), the summary is the plain text of
    :func:`render_text`: a script reads it as easily, and the process does not import rich (a
    tenth of a second of CPU, most of a short replay's work beyond reading and writing).
    """
    stream = sys.stdout if file is None else file
    if not getattr(stream, "isatty", lambda: False)():
        print(render_text(summary), file=file)
        return
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(render_text(summary), file=file)
        return
    header, rows = _table(summary)
    table = Table(title="streamcal replay", title_justify="left")
    for i, h in enumerate(header):
        table.add_column(h, justify="right" if i else "left")
    for r in rows:
        table.add_row(*r)
    console = Console(file=file, soft_wrap=False)
    console.print(table)
    console.print(_caption(summary), highlight=False)
    for note in [*summary.notes, *_keyed_lines(summary)]:
        console.print(note, highlight=False, markup=False)
    for line in _files(summary):
        console.print(line, highlight=False, soft_wrap=True)
