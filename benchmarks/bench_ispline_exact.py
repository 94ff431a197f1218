"""ISplineCalibrator at its exact default (a refit before every prediction that follows new labels).

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_ispline_exact.py [--rounds 5] [--n 20000] [--warmup 20000]

The click-like stream of ``bench_streaming_pav.py`` (``LogitGrid()``, unbounded window, the
score prior ``"auto"``); each calibrator first learns a warm-up, then runs ``prequential`` on the
next ``n`` events and, apart, the river face (``predict_proba_one`` then ``learn_one``) on a
fifth of them. In the same process, in alternating rounds, by CPU time: the compiled loop (the
default) and the refit engine's own per-event loop (``_STREAM_LOOP = False``: the full
refit, score prior included, before every prediction), whose outputs the loop's equal bit for
bit (checked here on every round). Prints events per second and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_streaming_pav import click_stream

import streamcal
from streamcal import ISplineCalibrator

GOAL_PREQUENTIAL = 300_000
GOAL_RIVER = 200_000


class EngineLoop(ISplineCalibrator):
    """The engine's loop: the full refit (score prior included) before every prediction that
    follows new labels, on both faces."""

    _STREAM_LOOP = False


def prepared(cls, s, y, warmup):
    cal = cls()
    cal.prequential(s[:warmup], y[:warmup])
    return cal


def time_prequential(cal, s, y):
    t0 = time.process_time()
    out = cal.prequential(s, y)
    return time.process_time() - t0, out


def time_river(cal, s, y):
    xs = [{"s": float(v)} for v in s]
    ys = [bool(v) for v in y]
    t0 = time.process_time()
    for x, label in zip(xs, ys, strict=True):
        cal.predict_proba_one(x)
        cal.learn_one(x, label)
    return time.process_time() - t0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=20_000)
    args = parser.parse_args()
    streamcal.use_compiled_kernels()
    s, y = click_stream(args.warmup + args.n, seed=3)
    ws, wy = s[: args.warmup], y[: args.warmup]
    ts, ty = s[args.warmup :], y[args.warmup :]
    n_old = max(1, args.n // 10)  # the engine's loop is slow: a tenth of the events
    n_river = max(1, args.n // 5)
    for cls in (ISplineCalibrator, EngineLoop):  # compile and warm
        time_prequential(prepared(cls, ws, wy, args.warmup), ts[:200], ty[:200])
    new_rates, old_rates, river_rates, river_old = [], [], [], []
    for r in range(args.rounds):
        order = ("new", "old") if r % 2 == 0 else ("old", "new")
        for which in order:
            if which == "new":
                cal = prepared(ISplineCalibrator, ws, wy, args.warmup)
                cpu, (p_new, l_new) = time_prequential(cal, ts, ty)
                new_rates.append(args.n / cpu)
                kappa = cal.prior_strength
            else:
                cal = prepared(EngineLoop, ws, wy, args.warmup)
                cpu, (p_old, l_old) = time_prequential(cal, ts[:n_old], ty[:n_old])
                old_rates.append(n_old / cpu)
        if not (np.array_equal(p_new[:n_old], p_old) and np.array_equal(l_new[:n_old], l_old)):
            raise AssertionError("the compiled loop and the engine's loop disagree")
        for which in order:
            if which == "new":
                cal = prepared(ISplineCalibrator, ws, wy, args.warmup)
                river_rates.append(n_river / time_river(cal, ts[:n_river], ty[:n_river]))
            else:
                cal = prepared(EngineLoop, ws, wy, args.warmup)
                river_old.append(n_old / time_river(cal, ts[:n_old], ty[:n_old]))
    new, old, river, r_old = (float(np.median(v)) for v in (new_rates, old_rates, river_rates, river_old))
    print(
        f"ISplineCalibrator exact default, click-like stream, warm-up {args.warmup:,}, "
        f"{args.rounds} rounds, CPU time (median); prior strength at the end {kappa}"
    )
    print(f"  prequential, compiled loop:        {new:12,.0f} events/s")
    print(f"  prequential, the engine's loop:    {old:12,.0f} events/s   ratio {new / old:6.1f}x (outputs equal)")
    print(f"  river face, compiled loop:         {river:12,.0f} pairs/s")
    print(f"  river face, the engine's loop:     {r_old:12,.0f} pairs/s    ratio {river / r_old:6.1f}x")
    print(
        f"  goals: prequential >= {GOAL_PREQUENTIAL:,} ({'met' if new >= GOAL_PREQUENTIAL else 'not met'}), "
        f"river face >= {GOAL_RIVER:,} ({'met' if river >= GOAL_RIVER else 'not met'})"
    )


if __name__ == "__main__":
    main()
