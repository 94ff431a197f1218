"""Command-line faces of ``generate`` and ``replay`` (argparse)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_generate_arguments", "add_replay_arguments", "run_generate", "run_replay"]


def _refit_every(text: str):
    """``lazy`` (None: refit before every prediction that follows a new label) or a positive int."""
    return None if text.strip().lower() == "lazy" else _positive_int(text)


def _positive_int(text: str) -> int:
    try:
        value = int(float(text)) if "e" in text.lower() else int(text)
    except ValueError:
        msg = f"expected a positive integer; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if value < 1:
        msg = f"expected a positive integer; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _count(text: str) -> int:
    """Integers such as 1000000, 1e6 or 1_000_000."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        msg = f"expected a number of rows such as 1000000 or 1e6; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if value < 0 or value != int(value):
        msg = f"expected a non-negative whole number of rows; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return int(value)


def add_generate_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``streamcal generate``'s arguments to ``parser``."""
    from streamcal.replay.generate import SCENARIOS

    parser.description = (
        "Write a seeded synthetic event stream (event_time, score, label, label_time), "
        "batch by batch, to Parquet, Arrow IPC or CSV."
    )
    parser.add_argument("path", help="output file (.parquet, .arrow/.feather, .csv), or a directory with --parts")
    parser.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default="click",
        help="; ".join(f"{s.name}: {s.description}" for s in SCENARIOS.values()).replace("%", "%%"),
    )
    parser.add_argument("-n", "--rows", type=_count, default=1_000_000, help="number of events (default 1e6)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--format",
        choices=["parquet", "ipc", "csv"],
        default=None,
        help="output format (default: from the file name, else parquet)",
    )
    parser.add_argument("--batch-size", type=_positive_int, default=1_000_000, help="rows per written batch")
    parser.add_argument("--parts", type=_positive_int, default=1, help="split into this many files in a directory")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return parser


def run_generate(args: argparse.Namespace) -> int:
    """Run ``streamcal generate``; returns the exit code."""
    import time

    from streamcal.replay.generate import generate

    start = time.perf_counter()
    try:
        path = generate(
            args.path,
            scenario=args.scenario,
            n=args.rows,
            seed=args.seed,
            format=args.format,
            batch_size=args.batch_size,
            parts=args.parts,
        )
    except (ValueError, TypeError, OSError) as exc:
        print(f"streamcal generate: error: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"wrote {args.rows:,} {args.scenario} events to {path} in {time.perf_counter() - start:.1f} s")
    return 0


def add_replay_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``streamcal replay``'s arguments to ``parser``."""
    parser.description = (
        "Replay a recorded event stream (Parquet, Arrow IPC or CSV; a file or a directory) through "
        "calibrators in event-time order, prequentially, learning each label once its label time "
        "has passed; write calibrated probabilities and LLRs, and metrics over time."
    )
    parser.add_argument(
        "input", nargs="+", help="Parquet / Arrow IPC / CSV files or directories, replayed in the order given"
    )
    parser.add_argument(
        "-m",
        "--method",
        default="pav",
        help="comma-separated methods: pav, ispline, gev, platt (if installed), raw (default pav)",
    )
    parser.add_argument(
        "--buckets",
        default=None,
        help="score buckets: a number (logit grid, for probability scores), or uniform:N, "
        "quantile:N, logit:N (default: the method's own, 1024 logit buckets for pav)",
    )
    parser.add_argument(
        "--refit-every",
        type=_refit_every,
        default=1000,
        help="refit the map-fitting methods (ispline, gev, platt) after every N labels (default 1000), or "
        "'lazy': before every prediction that follows a new label (exact per event, but with late labels "
        "nearly one refit per event: slow on long streams)",
    )
    parser.add_argument(
        "--exact-proba",
        action="store_true",
        help="pav: serve the exact PAV map (0 below every positive in the window, 1 above every negative) "
        "instead of the default finite pseudo-count rule (never exactly 0 or 1)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="pav: threads per calibrator within each record batch (n_jobs; -1: every core). Same "
        "results as 1, faster on long batches when cores are free (default 1)",
    )
    win = parser.add_mutually_exclusive_group()
    win.add_argument(
        "--window",
        default=None,
        help="sliding window: a number of events (100000, 1e5) or a duration (7d, 12h, 30m, 3600s, 1w)",
    )
    win.add_argument(
        "--decay",
        default=None,
        help="exponential forgetting; half-life in events (10000) or as a duration (3d)",
    )
    cols = parser.add_argument_group("columns")
    cols.add_argument("--time-col", default="event_time", help="event time column; '' for file order")
    cols.add_argument("--score-col", default="score", help="score column")
    cols.add_argument("--label-col", default="label", help="label column")
    cols.add_argument(
        "--label-time-col",
        default="label_time",
        help="label time column (labels known at once if absent; '' to ignore it)",
    )
    cols.add_argument("--weight-col", default=None, help="sample weight column")
    cols.add_argument(
        "--keep-columns",
        default=None,
        help="comma-separated input columns to copy to the output (default all)",
    )
    parser.add_argument(
        "--label-delay",
        default=None,
        help="fixed label delay (seconds, or 30m, 2h, 3d); overrides the label time column",
    )
    parser.add_argument(
        "--format",
        choices=["parquet", "ipc", "csv"],
        default=None,
        help="input format if the file names do not tell",
    )
    parser.add_argument(
        "--unsorted",
        choices=["error", "sort"],
        default="error",
        help="event times going backwards: stop with an error (default) or sort the input first",
    )
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help="output Parquet (default: INPUT's name + .replay.parquet next to it)",
    )
    parser.add_argument(
        "--metrics-output",
        default=None,
        help="metrics-over-time Parquet (default: OUTPUT's name with .metrics.parquet)",
    )
    parser.add_argument("--no-output", action="store_true", help="write no output files, only print the summary")
    parser.add_argument("--metrics-window", type=_count, default=100_000, help="events per metric window")
    parser.add_argument("--batch-size", type=_count, default=1 << 20, help="rows per record batch read")
    parser.add_argument("--plot", default=None, help="write reliability diagrams and metrics over time to this PNG")
    parser.add_argument(
        "--metrics",
        default="all",
        help="comma-separated metrics per window: brier, log_loss, cllr, min_cllr, ece, calibration_loss; "
        "'all' (default) or 'none'",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    return parser


def _metrics_option(text: str):
    from streamcal.replay._evaluate import METRIC_NAMES, default_metrics

    text = text.strip()
    if text == "all":
        return None
    if text == "none":
        return {}
    wanted = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in METRIC_NAMES]
    if unknown:
        msg = f"unknown metric {unknown[0]!r}; choose from {', '.join(METRIC_NAMES)}, or 'all' / 'none'."
        raise ValueError(msg)
    every = default_metrics()
    return {m: every[m] for m in wanted}


def _default_output(input_path: str) -> Path:
    p = Path(input_path)
    stem = p.name if p.is_dir() else p.name.split(".")[0]
    return p.parent / f"{stem}.replay.parquet"


def run_replay(args: argparse.Namespace) -> int:
    """Run ``streamcal replay``; returns the exit code (0 ok, 1 bad input or options)."""
    from streamcal.replay._replay import replay
    from streamcal.replay._source import ReplayInputError

    if args.no_output:
        output = metrics_output = None
    else:
        output = Path(args.output) if args.output else _default_output(args.input[0])
        if args.metrics_output:
            metrics_output = Path(args.metrics_output)
        else:
            base = output.name[: -len(".replay.parquet")] if output.name.endswith(".replay.parquet") else output.stem
            metrics_output = output.with_name(f"{base}.metrics.parquet")
    try:
        metrics = _metrics_option(args.metrics)
        summary = replay(
            args.input[0] if len(args.input) == 1 else list(args.input),
            args.method,
            buckets=_option(args.buckets, "--buckets"),
            window=_option(args.window, "--window"),
            decay=_option(args.decay, "--decay"),
            time_col=args.time_col or None,
            score_col=args.score_col,
            label_col=args.label_col,
            label_time_col=args.label_time_col or None,
            weight_col=args.weight_col,
            keep_columns=None
            if args.keep_columns is None
            else [c.strip() for c in args.keep_columns.split(",") if c.strip()],
            label_delay=args.label_delay,
            format=args.format,
            on_unsorted=args.unsorted,
            output=output,
            metrics_output=metrics_output,
            metrics_window=args.metrics_window,
            metrics=metrics,
            method_options=_method_options(args),
            batch_size=args.batch_size,
            plot=args.plot,
            progress=not args.quiet,
        )
    except (ReplayInputError, ValueError, TypeError, ImportError, OSError) as exc:
        print(f"streamcal replay: error: {exc}", file=sys.stderr)
        return 1
    summary.print()
    return 0


def _option(text: str | None, option: str):
    """``--buckets`` / ``--window`` / ``--decay`` read by the parser of every ``buckets=`` /
    ``window=`` parameter (:func:`streamcal.buckets.as_buckets`, :func:`streamcal.windows.as_window`,
    :func:`streamcal.windows.as_decay`); errors name the option."""
    if text is None:
        return None
    if option == "--buckets":
        from streamcal.buckets import as_buckets

        return as_buckets(text, option)
    from streamcal.windows import as_decay, as_window

    return as_window(text, option) if option == "--window" else as_decay(text, option)


def _method_options(args) -> dict:
    options = {"refit_every": args.refit_every}
    if args.exact_proba:
        options["finite_proba"] = False
    if args.jobs != 1:
        options["n_jobs"] = args.jobs
    return options
