"""How the keyed prior's refresh floor shapes the log loss after a shift every key shares.

A stream of 200 Zipf(1.1) keys, each miscalibrated by its own logit offset, whose calibration
shifts by +1.2 in logit for every key at mid-stream. ``KeyedCalibrator(PAVCalibrator(window=W))``
runs ``prequential`` over it twice in this process: with the refresh floor of the code (16,384
learned events, or half the global map's span where shorter: ``_keyed_rows.prior_floor``), and
with the floor held at 16,384 (the code before). Printed: the log loss over the first 5,000 and
20,000 events after the shift and over the rest, and the ratio.

Run: ``PYTHONPATH=. python benchmarks/bench_keyed_refresh.py [--windows 2000,20000] [--n 200000]``
"""

from __future__ import annotations

import argparse

import numpy as np

import streamcal._keyed_rows as rows
from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal.metrics import log_loss


def stream(n: int, n_keys: int = 200, seed: int = 7):
    rng = np.random.default_rng(seed)
    traffic = 1.0 / np.arange(1, n_keys + 1) ** 1.1
    keys = rng.choice(n_keys, n, p=traffic / traffic.sum())
    offset = rng.normal(0.0, 0.5, n_keys)
    z = rng.normal(-3.0, 1.0, n)
    shift = np.where(np.arange(n) < n // 2, 0.0, 1.2)
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(z + offset[keys] + shift)))
    return keys, 1.0 / (1.0 + np.exp(-z)), y


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", default="2000,20000", help="count windows per key, comma-separated")
    parser.add_argument("--n", type=int, default=200_000, help="events")
    args = parser.parse_args(argv)
    keys, s, y = stream(args.n)
    half = args.n // 2
    segments = {"first 5,000 after": (half, half + 5_000), "first 20,000 after": (half, half + 20_000),
                "the rest": (half + 20_000, args.n)}
    floor = rows.prior_floor
    print(f"{'window':>7} {'segment':<20} {'floor of the code':>18} {'floor 16,384':>13} {'ratio':>6}")
    for window in (int(w) for w in args.windows.split(",")):
        losses = []
        for held in (False, True):
            rows.prior_floor = (lambda glob: rows.PRIOR_EVERY) if held else floor
            try:
                p, _ = KeyedCalibrator(PAVCalibrator(window=window)).prequential(keys, s, y)
            finally:
                rows.prior_floor = floor
            losses.append({name: log_loss(y[a:b], p[a:b]) for name, (a, b) in segments.items()})
        for name in segments:
            new, old = losses[0][name], losses[1][name]
            print(f"{window:>7} {name:<20} {new:>18.5f} {old:>13.5f} {new / old:>6.3f}")


if __name__ == "__main__":
    main()
