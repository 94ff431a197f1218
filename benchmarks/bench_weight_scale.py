"""PAV's cost per event against the scale of the sample weights.

The score prior refits its strength as the window's events renew; the weights' scale must not
change how often. Each case is ``PAVCalibrator(window=...).prequential`` over the same seeded
click-like stream (1,024 logit buckets, default prior) with every weight equal to ``c``; printed:
ns an event (CPU time, best of the rounds, cases alternating within each round) and the ratio to
weights of 1 in the same rounds (1.00: the scale costs nothing).

Run: ``PYTHONPATH=. python benchmarks/bench_weight_scale.py`` (``--n`` events, ``--rounds``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import streamcal
from streamcal import PAVCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

SCALES = (1.0, 0.1, 0.01, 1e-3, 0.0)
WINDOWS = {
    "unbounded": Unbounded,
    "count 1e4": lambda: CountWindow(10_000),
    "time": lambda: TimeWindow(seconds=5_000.0),
    "decay by events 1e4": lambda: Decay(half_life=10_000.0),
    "decay by time 1e4 s": lambda: Decay(half_life=10_000.0, by="time"),
}


def stream(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    logit = rng.normal(-3.5, 1.2, n)
    s = 1.0 / (1.0 + np.exp(-logit))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.8 * logit - 0.3)))).astype(float)
    t = np.cumsum(rng.exponential(1.0, n))
    return s, y, t


def run(window_factory, s, y, t, w) -> float:
    cal = PAVCalibrator(window=window_factory())
    start = time.process_time()
    cal.prequential(s, y, weights=w, times=t)
    return time.process_time() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    n = int(args.n)
    streamcal.use_compiled_kernels()
    s, y, t = stream(n)
    for name, factory in WINDOWS.items():
        run(factory, s[:2000], y[:2000], t[:2000], np.ones(2000))  # compile or load the kernels
        best = dict.fromkeys(SCALES, np.inf)
        for _ in range(args.rounds):
            for c in SCALES:
                best[c] = min(best[c], run(factory, s, y, t, np.full(n, c)))
        cells = ", ".join(f"w={c:g}: {best[c] / n * 1e9:.0f} ns ({best[c] / best[1.0]:.2f}x)" for c in SCALES)
        print(f"{name}: {cells}", flush=True)


if __name__ == "__main__":
    main()
