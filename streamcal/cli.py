"""The ``streamcal`` command line: ``demo``, ``generate``, ``replay`` and ``stream``.

Every error is one line on stderr, ``streamcal: error: ...``, with exit status 2: usage errors
(argparse), bad input files and bad option values alike. No traceback is shown; an unexpected
exception (a bug) is reported on one line too, with exit status 1 (``STREAMCAL_DEBUG=1`` shows
its traceback).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``streamcal: error: argument --x: ...`` and status 2."""

    def error(self, message: str):
        from streamcal.replay._cli import EXPECTED_VALUES

        missing = re.fullmatch(r"argument (\S+): expected one argument", message)
        if missing and missing[1] in EXPECTED_VALUES:  # say what the value is
            message = f"argument {missing[1]}: expected {EXPECTED_VALUES[missing[1]]}"
        text = " ".join(message.split("\n"))
        self.exit(2, f"streamcal: error: {text} (see '{self.prog} --help')\n")


def _run_demo(args: argparse.Namespace) -> int:
    from streamcal.demo import run_streaming_demo
    from streamcal.replay import replay_demo
    from streamcal.replay._cli import REPLAY_FLAGS, _fail
    from streamcal.replay._source import option_spelling

    plot = not args.no_plot
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            from streamcal._install import install_hint

            print(f"(matplotlib is not installed: no plot; `{install_hint('plot')}` adds it)")
            plot = False
    try:
        with option_spelling(REPLAY_FLAGS):  # the summary's remarks name `streamcal replay`'s flags
            replay_demo(args.dir, n=args.n, seed=args.seed, window=max(args.n // 4, 1_000), plot=plot)
    except (ValueError, OSError) as exc:
        return _fail(exc, {"directory": "--dir", "n": "--n", "seed": "--seed"})
    print()
    # a count window of a twentieth of the stream, at least 1,000 events, but at most an eighth, so that
    # each of the drift table's three segments (a window to half the stream, a window, the rest) holds events
    run_streaming_demo(seed=args.seed, n=args.n, window=max(min(max(args.n // 20, 1_000), args.n // 8), 1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from streamcal.replay._cli import _positive_count, _seed

    parser = _Parser(
        prog="streamcal",
        description="Streaming calibration: calibrated probabilities and LLRs for scored event streams.",
    )
    from streamcal import __version__

    parser.add_argument("--version", action="version", version=f"streamcal {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="generate a drifting click stream, replay it through every calibrator, print the metrics",
        description="Generate a seeded synthetic click stream whose score-to-probability relation drifts, "
        "replay it prequentially with late labels through every calibrator (PAV, I-spline, GEV, Platt, Venn–Abers and "
        "the raw score), print the summary and where the outputs are; then compare streaming PAV with a "
        "count window and an unbounded one before and after the drift.",
    )
    demo.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    demo.add_argument("--n", type=_positive_count, default=200_000, help="number of events (default 200,000)")
    demo.add_argument("--dir", default=None, help="output folder (default: a new temporary folder, kept)")
    demo.add_argument("--no-plot", action="store_true", help="do not draw the PNG")
    demo.set_defaults(handler=_run_demo)

    from streamcal.replay import add_generate_arguments, add_replay_arguments, run_generate, run_replay

    generate = commands.add_parser(
        "generate",
        help="write a seeded synthetic event stream (click, fraud, drift, campaigns) to Parquet, Arrow IPC or CSV",
    )
    add_generate_arguments(generate)
    generate.set_defaults(handler=run_generate)
    replay = commands.add_parser(
        "replay",
        help="replay a recorded event stream through calibrators, prequentially, with late labels",
    )
    add_replay_arguments(replay)
    replay.set_defaults(handler=run_replay)
    from streamcal.spark._cli import add_stream_arguments, run_stream

    stream = commands.add_parser("stream", help="calibrate a directory of Parquet files per key in Spark (extra spark)")
    add_stream_arguments(stream).set_defaults(handler=run_stream)
    parser.set_defaults(command_parsers={"demo": demo, "generate": generate, "replay": replay, "stream": stream})
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an unknown option is refused by its command's parser, which names that command's help."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = args.command_parsers.get(args.command, parser)
        known = re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", command.format_help())  # the options its help names
        unknown = " ".join(extra)
        close = [m for w in extra if w.startswith("-") for m in difflib.get_close_matches(w, known, n=1, cutoff=0.75)]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        command.error(f"unrecognized arguments: {unknown}{hint}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as exc:  # --help / --version (0), or a usage error already printed (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("streamcal: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, not a traceback (unless asked for)
        if os.environ.get("STREAMCAL_DEBUG"):
            raise
        from streamcal.replay._cli import error_line

        detail = error_line(f"{type(exc).__name__}: {exc}").removeprefix("streamcal: error: ")
        print(
            f"streamcal: error: internal error ({detail}); please report it "
            "(STREAMCAL_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
