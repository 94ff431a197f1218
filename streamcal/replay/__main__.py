"""``python -m streamcal.replay generate ...`` / ``python -m streamcal.replay replay ...``: the same
as ``streamcal generate`` / ``streamcal replay``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch to ``streamcal``'s command line; returns the exit code."""
    from streamcal.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
