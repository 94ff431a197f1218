"""The ``streamcal`` command line: ``demo`` (and, as they land, ``generate`` and ``replay``)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _run_demo(args: argparse.Namespace) -> int:
    from streamcal.demo import run_streaming_demo
    from streamcal.replay import replay_demo

    plot = not args.no_plot
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("(matplotlib is not installed: no plot; `pip install 'streamcal-engine[plot]'` adds it)")
            plot = False
    replay_demo(args.dir, n=args.n, seed=args.seed, window=max(args.n // 4, 1_000), plot=plot)
    print()
    run_streaming_demo(seed=args.seed, n=args.n, window=max(args.n // 20, 1_000))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
        "replay it prequentially with late labels through every calibrator (PAV, I-spline, GEV, Platt and "
        "the raw score), print the summary and where the outputs are; then compare streaming PAV with a "
        "count window and an unbounded one before and after the drift.",
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--n", type=int, default=200_000, help="number of events (default 200,000)")
    demo.add_argument("--dir", default=None, help="output folder (default: a new temporary folder, kept)")
    demo.add_argument("--no-plot", action="store_true", help="do not draw the PNG")
    demo.set_defaults(handler=_run_demo)

    from streamcal.replay import add_generate_arguments, add_replay_arguments, run_generate, run_replay

    generate = commands.add_parser(
        "generate",
        help="write a seeded synthetic event stream (click, fraud, drift) to Parquet, Arrow IPC or CSV",
    )
    add_generate_arguments(generate)
    generate.set_defaults(handler=run_generate)
    replay = commands.add_parser(
        "replay",
        help="replay a recorded event stream through calibrators, prequentially, with late labels",
    )
    add_replay_arguments(replay)
    replay.set_defaults(handler=run_replay)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
