"""River face of every streaming binary calibrator: ``predict_proba_one`` + ``learn_one`` pairs/s.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_river_face.py            # 100,000 pairs each
    PYTHONPATH=. python benchmarks/bench_river_face.py --n 20000  # quicker

Stream: the click-like stream of ``bench_streaming_pav.py`` (scores ``expit(z)``,
``z ~ N(-3, 1.5)``), one ``{"score": s}`` dict per event. Calibrators: ``PAVCalibrator`` and the
map-fitting ones (I-spline, GEV, Platt, refitted every 1,000 labels), all with a count window
of 10,000 events and 1024 logit buckets, after a warm-up of 10,000 events through the same
loop. Baseline, in the same process: river's ``linear_model.LogisticRegression`` on the same
loop. Figures are CPU time (``process_time``), best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import time

from bench_streaming_pav import click_stream

from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator
from streamcal.windows import CountWindow

WARMUP = 10_000


def makers():
    window = CountWindow(10_000)
    return {
        "PAVCalibrator": lambda: PAVCalibrator(window=window),
        "ISplineCalibrator (refit every 1,000)": lambda: ISplineCalibrator(window=window, refit_every=1000),
        "GEVCalibrator (refit every 1,000)": lambda: GEVCalibrator(window=window, refit_every=1000),
        "PlattCalibrator (refit every 1,000)": lambda: PlattCalibrator(window=window, refit_every=1000),
        "river LogisticRegression": None,
    }


def loop(model, xs, ys):
    for x, y in zip(xs, ys, strict=True):
        model.predict_proba_one(x)
        model.learn_one(x, y)


def pairs_per_second(make, xs, ys, repeat):
    best = float("inf")
    for _ in range(repeat):
        model = make()
        loop(model, xs[:WARMUP], ys[:WARMUP])
        t = time.process_time()
        loop(model, xs[WARMUP:], ys[WARMUP:])
        best = min(best, time.process_time() - t)
    return (len(xs) - WARMUP) / best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="pairs measured per calibrator")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from river import linear_model

    s, y = click_stream(WARMUP + args.n, seed=3)
    xs = [{"score": v} for v in s.tolist()]
    ys = y.tolist()
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.n:,} pairs, best of {args.repeat}")
    rates = {}
    for name, make in makers().items():
        rates[name] = pairs_per_second(make or linear_model.LogisticRegression, xs, ys, args.repeat)
    lr = rates["river LogisticRegression"]
    for name, rate in rates.items():
        print(f"  {name:40s} {rate:>12,.0f} pairs/s  ({rate / lr:.2f}x river's LR)")


if __name__ == "__main__":
    main()
