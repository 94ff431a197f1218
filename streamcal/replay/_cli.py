"""Command-line faces of ``generate`` and ``replay`` (argparse).

Every error is one line on stderr, ``streamcal: error: ...``, naming the option as typed on the
command line (``--time-col ts``, never Python's ``time_col='ts'``), and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import sys
from pathlib import Path

__all__ = [
    "GENERATE_FLAGS",
    "REPLAY_FLAGS",
    "add_generate_arguments",
    "add_replay_arguments",
    "error_line",
    "run_generate",
    "run_replay",
]

EXIT_ERROR = 2

#: Python parameter -> command-line flag of ``streamcal replay`` (how messages name options).
REPLAY_FLAGS = {
    "input": "INPUT",
    "calibrators": "--method",
    "buckets": "--buckets",
    "window": "--window",
    "decay": "--decay",
    "time_col": "--time-col",
    "score_col": "--score-col",
    "label_col": "--label-col",
    "label_time_col": "--label-time-col",
    "weight_col": "--weight-col",
    "keep_columns": "--keep-columns",
    "label_delay": "--label-delay",
    "format": "--format",
    "on_unsorted": "--unsorted",
    "output": "--output",
    "metrics_output": "--metrics-output",
    "metrics_window": "--metrics-window",
    "metrics": "--metrics",
    "batch_size": "--batch-size",
    "plot": "--plot",
    "refit_every": "--refit-every",
    "n_jobs": "--jobs",
    "group_col": "--group-col",
    "prior_strength": "--prior-strength",
    "max_keys": "--max-keys",
    "monitor": "--monitor",
}
#: Python parameter -> command-line flag of ``streamcal generate``.
GENERATE_FLAGS = {
    "path": "PATH",
    "scenario": "--scenario",
    "n": "--rows",
    "seed": "--seed",
    "format": "--format",
    "batch_size": "--batch-size",
    "parts": "--parts",
}


def error_line(error, flags: dict[str, str] | None = None) -> str:
    """``streamcal: error: ...`` on one line, Python's ```name``` spelled as its flag."""
    text = str(error)
    for name, flag in (flags or {}).items():
        text = text.replace(f"`{name}`", flag).replace(f"`{flag}`", flag)
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return f"streamcal: error: {text or type(error).__name__}"


#: What an option's value is, for argparse's "expected one argument": what it also says of a value
#: that starts with '-' and is not a plain number (``--label-delay -1h``), which it reads as an option.
EXPECTED_VALUES = {
    "--label-delay": "a delay >= 0: seconds, or a duration such as 30m, 2h, 3d",
    "--window": "a window > 0: a number of events (100000, 1e5) or a duration (7d, 12h, 30m)",
    "--decay": "a half-life > 0: a number of events (10000) or a duration (3d)",
}


def _fail(error, flags) -> int:
    print(error_line(error, flags), file=sys.stderr)
    return EXIT_ERROR


def _number(text: str, what: str) -> float:
    try:
        value = float(text.strip().replace("_", ""))
    except ValueError:
        msg = f"expected {what}; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if not math.isfinite(value) or value != int(value):
        msg = f"expected {what}; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


_MAX_COUNT = 1 << 53  # every whole number up to here is exact as a float


def _whole(text: str, what: str, low: int, beyond: str = "") -> int:
    """``text`` as a whole number in [low, 2**53]; ``beyond``: what to do instead of a larger one."""
    value = _number(text, what)
    if value > _MAX_COUNT:
        msg = f"expected {what}, at most 2**53 = {_MAX_COUNT:,}{beyond}; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    if value < low:
        msg = f"expected {what}; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return int(value)


def _positive_int(text: str) -> int:
    """A positive whole number: 1000, 1e3 or 1_000."""
    return _whole(text, "a positive whole number such as 1000 or 1e3", 1)


def _count(text: str) -> int:
    """A number of rows, 0 or more: 1000000, 1e6 or 1_000_000."""
    return _whole(text, "a number of rows such as 1000000 or 1e6", 0)


def _positive_count(text: str) -> int:
    """A positive number of rows: 100000, 1e5 or 100_000."""
    return _whole(text, "a positive number of rows such as 100000 or 1e5", 1)


def _key_count(text: str) -> int:
    """A positive number of keys: 100000, 1e5 or 100_000."""
    return _whole(text, "a positive number of keys such as 100000 or 1e5", 1, " (leave --max-keys out: no limit)")


def _label_delay(text: str) -> str:
    """A label delay: seconds or a duration, 0 or more (the text itself, which replay reads)."""
    from streamcal.windows import parse_duration

    try:
        parse_duration(text, "label_delay")
    except ValueError:
        msg = f"expected {EXPECTED_VALUES['--label-delay']}; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    return text


def _seed(text: str) -> int:
    return _whole(text, "a whole number 0 or more", 0)


def _refit_every(text: str):
    """``lazy`` (None: refit before every prediction that follows a new label) or a positive int."""
    if text.strip().lower() == "lazy":
        return None
    return _whole(text, "a positive number of labels such as 1000, or 'lazy'", 1)


def _prior_strength(text: str):
    """``auto`` or a finite number of pseudo-events, 0 or more."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = float(text.strip().replace("_", ""))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        msg = f"expected 'auto' or a number of pseudo-events 0 or more; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


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
    parser.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--format",
        choices=["parquet", "ipc", "csv"],
        default=None,
        help="output format (default: from the file name, else parquet)",
    )
    parser.add_argument("--batch-size", type=_positive_count, default=1_000_000, help="rows per written batch")
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
        return _fail(exc, GENERATE_FLAGS)
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
        "input",
        nargs="+",
        metavar="INPUT",
        help="Parquet / Arrow IPC / CSV files or directories, replayed in the order given",
    )
    parser.add_argument(
        "-m",
        "--method",
        default="pav",
        help="comma-separated methods: pav, ispline, gev, platt, venn-abers, raw (the score itself) (default pav); "
        "venn-abers also writes its interval, p0_venn-abers and p1_venn-abers",
    )
    _add_method_arguments(parser)
    _add_column_arguments(parser)
    _add_output_arguments(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    return parser


def _add_method_arguments(parser: argparse.ArgumentParser) -> None:
    """The calibrators' options: buckets, refits, PAV's map and threads, the window."""
    parser.add_argument(
        "--buckets",
        default=None,
        help="score buckets: a number (logit grid, for probability scores), or uniform:N (on [0, 1]), "
        "uniform:N:LOW:HIGH, quantile:N, logit:N (default: the method's own, 1024 logit buckets for pav)",
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


def _add_column_arguments(parser: argparse.ArgumentParser) -> None:
    """Which columns hold what, the label delay, the input format and order."""
    cols = parser.add_argument_group("columns")
    cols.add_argument(
        "--time-col",
        default=None,
        help="event time column (default: event_time if the input has it, else file order); '' for file order",
    )
    cols.add_argument("--score-col", default="score", help="score column (default: score)")
    cols.add_argument("--label-col", default="label", help="label column (default: label)")
    cols.add_argument(
        "--label-time-col",
        default=None,
        help="label time column (default: label_time if the input has it, else labels are known at once); "
        "'' to ignore it",
    )
    cols.add_argument("--weight-col", default=None, help="sample weight column")
    cols.add_argument(
        "--group-col",
        default=None,
        help="key column (campaign, merchant, country: integers or strings): calibrate per key, pooled "
        "toward the global map (pav, ispline, platt, gev; venn-abers keys are independent; raw stays the score); "
        "the summary adds field-level errors and the worst and largest keys",
    )
    cols.add_argument(
        "--prior-strength",
        type=_prior_strength,
        default=None,
        help="with --group-col: the pooling prior's weight in pseudo-events, or 'auto' (default)",
    )
    cols.add_argument(
        "--max-keys",
        type=_key_count,
        default=None,
        help="with --group-col: keep at most this many keys (least recently updated evicted; default no limit)",
    )
    cols.add_argument(
        "--keep-columns",
        default=None,
        help="comma-separated input columns to copy to the output (default all)",
    )
    parser.add_argument(
        "--label-delay",
        type=_label_delay,
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


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The outputs: files, metrics, plot, monitors, batch size."""
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help="output Parquet (default: next to INPUT, NAME.replay.parquet for NAME.parquet, else INPUT's whole "
        "name + .replay.parquet)",
    )
    parser.add_argument(
        "--metrics-output",
        default=None,
        help="metrics-over-time Parquet (default: OUTPUT's name with .metrics.parquet)",
    )
    parser.add_argument("--no-output", action="store_true", help="write no output files, only print the summary")
    parser.add_argument(
        "--metrics-window",
        type=_positive_count,
        default=None,
        help="events per metric window (default: about a twentieth of the input, 1,000 to 100,000)",
    )
    parser.add_argument(
        "--batch-size",
        type=_positive_count,
        default=None,
        help="rows per record batch read; peak memory grows with it (default 65536; with --jobs K, "
        "K x 131072 so that PAV can split each batch)",
    )
    parser.add_argument("--plot", default=None, help="write reliability diagrams and metrics over time to this PNG")
    parser.add_argument(
        "--monitor",
        action="store_true",
        help="run the anytime-valid calibration monitors on the input score and every method's output",
    )
    parser.add_argument(
        "--metrics",
        type=_metrics_option,
        default="all",
        help="comma-separated metrics per window: brier, log_loss, cllr, min_cllr, ece, calibration_loss; "
        "'all' (default) or 'none'",
    )


def _metrics_option(text: str):
    """``all`` (None: the default set), ``none`` ({}) or a comma list of metric names."""
    from streamcal.replay._evaluate import METRIC_NAMES, default_metrics

    text = text.strip()
    if text == "all":
        return None
    if text == "none":
        return {}
    wanted = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in METRIC_NAMES] or ([] if wanted else [text])
    if unknown:
        msg = f"unknown metric {unknown[0]!r}; choose from {', '.join(METRIC_NAMES)}, or 'all' / 'none'"
        raise argparse.ArgumentTypeError(msg)
    every = default_metrics()
    return {m: every[m] for m in wanted}


def _default_output(input_path: str) -> Path:
    """Next to the input: ``NAME.replay.parquet`` for ``NAME.parquet`` (or a directory ``NAME``), else
    the input's whole name + ``.replay.parquet`` (``x.csv.replay.parquet``), so that two inputs (``x.csv``
    and ``x.parquet``, ``day.1.csv`` and ``day.2.csv``) never write the same output."""
    p = Path(input_path)
    stem = p.stem if p.suffix.lower() == ".parquet" and not p.is_dir() else p.name
    return p.parent / f"{stem}.replay.parquet"


def _batch_size(args) -> int:
    """``--batch-size``, or the default: 65,536 rows, or K x 2**17 with ``--jobs K`` (PAV splits a
    batch over K threads only when it holds at least that many events)."""
    import os

    from streamcal.replay._replay import DEFAULT_BATCH_SIZE

    if args.batch_size is not None:
        return args.batch_size
    jobs = args.jobs if args.jobs > 0 else (os.cpu_count() or 1)
    return max(DEFAULT_BATCH_SIZE, jobs * (1 << 17)) if jobs > 1 else DEFAULT_BATCH_SIZE


def run_replay(args: argparse.Namespace) -> int:
    """Run ``streamcal replay``; returns the exit code (0 ok, 2 bad input or options).

    Inputs, columns and outputs are all checked before the replay starts; an error prints one
    line, ``streamcal: error: ...``, and leaves no file behind.
    """
    import pyarrow as pa

    from streamcal.replay._replay import replay
    from streamcal.replay._source import DEFAULT_LABEL_TIME_COL, DEFAULT_TIME_COL, option_spelling

    if args.no_output and (args.output or args.metrics_output):
        given = "--output" if args.output else "--metrics-output"
        return _fail(f"--no-output contradicts {given}; give one or the other.", None)
    if args.no_output:
        output = metrics_output = None
    else:
        output = Path(args.output) if args.output else _default_output(args.input[0])
        if args.metrics_output:
            metrics_output = Path(args.metrics_output)
        else:
            base = output.name[: -len(".replay.parquet")] if output.name.endswith(".replay.parquet") else output.stem
            metrics_output = output.with_name(f"{base}.metrics.parquet")
    # not given: the default columns (used if present); '': none
    time_col = DEFAULT_TIME_COL if args.time_col is None else (args.time_col or None)
    label_time_col = DEFAULT_LABEL_TIME_COL if args.label_time_col is None else (args.label_time_col or None)
    _keep_freed_memory()
    from streamcal._kernels import _config

    _config.BEFORE_SWITCH.append(_blas_module_alone)  # for this replay only
    try:
        with option_spelling(REPLAY_FLAGS), _no_cyclic_collections():
            summary = replay(
                args.input[0] if len(args.input) == 1 else list(args.input),
                args.method,
                buckets=_option(args.buckets, "--buckets"),
                window=_option(args.window, "--window"),
                decay=_option(args.decay, "--decay"),
                time_col=time_col,
                score_col=args.score_col,
                label_col=args.label_col,
                label_time_col=label_time_col,
                weight_col=args.weight_col or None,
                keep_columns=None
                if args.keep_columns is None
                else [c.strip() for c in args.keep_columns.split(",") if c.strip()],
                label_delay=args.label_delay,
                format=args.format,
                on_unsorted=args.unsorted,
                output=output,
                metrics_output=metrics_output,
                metrics_window=args.metrics_window,
                metrics=args.metrics,
                method_options=_method_options(args),
                batch_size=_batch_size(args),
                plot=args.plot,
                progress=not args.quiet,
                monitor=args.monitor,
                group_col=args.group_col or None,
                prior_strength=args.prior_strength,
                max_keys=args.max_keys,
            )
    except (ValueError, TypeError, ImportError, OSError, pa.ArrowException) as exc:
        return _fail(exc, REPLAY_FLAGS)
    finally:
        _config.BEFORE_SWITCH.remove(_blas_module_alone)
    summary.print()
    return 0


def _keep_freed_memory() -> None:
    """Let this process keep the memory it frees for its next allocations (glibc only).

    Every batch allocates arrays of a few hundred KiB to a few MiB and frees them; glibc's
    defaults give blocks above 128 KiB back to the system when they are freed (``munmap``, heap
    trimming), so the next batch's arrays are new pages again, each zeroed by the kernel on its
    first touch: an eighth of a default replay's CPU of 1e7 events was system time, most of it
    these page faults. With both thresholds raised the freed blocks are reused; what the process
    keeps is bounded by the trim threshold (the replay's peak memory moves by about 10 MB). The
    command line only: a library call does not change its caller's allocator.
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # not glibc, or no C library to ask (Windows)
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 128 << 20)


def _blas_module_alone() -> None:
    """Load ``scipy.linalg.cython_blas`` on its own, without the ``scipy.linalg`` package around it.

    Called before the switch to compiled kernels. numba's first compiled call (even of a kernel
    loaded from its cache) imports its array functions, which check for BLAS by importing
    ``scipy.linalg.cython_blas``; an import of it runs ``scipy.linalg``'s ``__init__`` first,
    which loads all of ``scipy.linalg`` and through it ``numpy.f2py``: start-up work before any
    batch can be calibrated (docs/benchmarks.md gives its cost). No kernel calls BLAS, and the module
    needs nothing of its package: loaded from its file under its own name, it is the same module,
    and numba finds it in ``sys.modules``. The command line only: the package, imported later,
    has no ``cython_blas`` attribute (``import scipy.linalg.cython_blas`` finds the module
    already loaded and does not set it), which nothing in the replay reads but a library's
    caller might. Where the file is not found, or loading it fails, nothing changes.
    """
    import importlib.machinery
    import importlib.util

    name = "scipy.linalg.cython_blas"
    if name in sys.modules or "scipy.linalg" in sys.modules:
        return
    try:
        scipy_spec = importlib.util.find_spec("scipy")
        folders = [] if scipy_spec is None else list(scipy_spec.submodule_search_locations or [])
        paths = [
            Path(folder, "linalg", f"cython_blas{suffix}")
            for folder in folders
            for suffix in importlib.machinery.EXTENSION_SUFFIXES
        ]
        path = next((p for p in paths if p.is_file()), None)
        if path is None:
            return
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception:  # any failure: numba imports the package as it would
        sys.modules.pop(name, None)


@contextlib.contextmanager
def _no_cyclic_collections():
    """Within the block, no automatic collections of Python's cyclic garbage collector.

    A replay makes almost no reference cycles (a long replay leaves the collector a few KB), but
    its allocations set off a collection every 700 container objects, and every tenth of the
    oldest generation's walks the objects of every module loaded (numba's compiler and pyarrow's
    are hundreds of thousands) on the main thread, holding the interpreter lock
    (docs/benchmarks.md gives its cost). Freed arrays go back at once by their reference counts
    either way. At the end the objects still alive (the loaded modules' among them) are moved out
    of the collector's generations (``gc.freeze``): else the first collection after the block
    walks all of them. The command line only: a library call leaves its caller's collector alone.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


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
