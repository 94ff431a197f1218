"""The ``streamcal`` command line: ``demo`` (and, as they land, ``generate`` and ``replay``)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _click_stream(seed: int, n: int):
    """A seeded click-like stream: base rate near 2 %, scores from an over-confident model."""
    import numpy as np

    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(-4.2 + 0.9 * z)))
    scores = 1.0 / (1.0 + np.exp(-(-3.0 + 1.6 * z)))
    return scores, labels


def _run_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from streamcal import metrics
    from streamcal.isotonic import IsotonicCalibrator

    scores, labels = _click_stream(args.seed, args.n)
    half = args.n // 2
    cal = IsotonicCalibrator().fit(scores[:half], labels[:half])
    y = labels[half:]
    raw, calibrated = scores[half:], cal.predict_proba(scores[half:])
    prior = float(np.mean(labels[:half]))
    with np.errstate(divide="ignore"):
        raw_llr = np.log(raw) - np.log1p(-raw) - (np.log(prior) - np.log1p(-prior))
    rows = [
        ("Brier", metrics.brier_score(y, raw), metrics.brier_score(y, calibrated)),
        ("log loss (eps 1e-6)", metrics.log_loss(y, raw, eps=1e-6), metrics.log_loss(y, calibrated, eps=1e-6)),
        ("ECE (10 bins)", metrics.ece(y, raw), metrics.ece(y, calibrated)),
        ("calibration loss", metrics.calibration_loss(y, raw), metrics.calibration_loss(y, calibrated)),
        ("Cllr (bits)", metrics.cllr(y, raw_llr), metrics.cllr(y, cal.predict_llr(raw))),
        ("minCllr (bits)", metrics.min_cllr(y, raw), metrics.min_cllr(y, calibrated)),
        ("mean prediction", float(raw.mean()), float(calibrated.mean())),
    ]
    print(f"streamcal demo: {args.n:,} click-like events (seed {args.seed}), base rate {labels.mean():.4f}")
    print(f"batch PAV fitted on the first {half:,} events, evaluated on the remaining {args.n - half:,}")
    print()
    print(f"{'metric':<22}{'raw scores':>14}{'PAV':>14}")
    for name, before, after in rows:
        print(f"{name:<22}{before:>14.5f}{after:>14.5f}")
    print()
    print("log loss clips p into [1e-6, 1 - 1e-6]: PAV gives p = 0 to scores below every positive seen.")
    print()
    from streamcal.demo import run_streaming_demo

    run_streaming_demo(seed=args.seed, n=max(args.n, 40_000), window=max(args.n // 20, 1_000))
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
        help="calibrate a seeded synthetic click stream and print metrics before and after",
        description="Generate a seeded, miscalibrated click-like score stream (base rate near 2 %), "
        "calibrate it and print a before/after table of calibration metrics.",
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--n", type=int, default=200_000, help="number of events (default 200,000)")
    demo.set_defaults(handler=_run_demo)
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
