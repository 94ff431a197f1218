"""``python -m streamcal.replay generate ...`` / ``python -m streamcal.replay replay ...``."""

from __future__ import annotations

import argparse
import sys

from streamcal.replay._cli import (
    add_generate_arguments,
    add_replay_arguments,
    run_generate,
    run_replay,
)


def main(argv: list[str] | None = None) -> int:
    """Dispatch to ``run_generate`` / ``run_replay``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m streamcal.replay")
    sub = parser.add_subparsers(dest="command", required=True)
    add_generate_arguments(sub.add_parser("generate", help="write a synthetic event stream"))
    add_replay_arguments(sub.add_parser("replay", help="replay an event stream through calibrators"))
    args = parser.parse_args(argv)
    return run_generate(args) if args.command == "generate" else run_replay(args)


if __name__ == "__main__":
    sys.exit(main())
