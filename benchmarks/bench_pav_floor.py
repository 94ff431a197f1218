"""Streaming PAV against its per-event floor, across bucket counts, weights and windows.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_pav_floor.py             # every table (a few minutes)
    PYTHONPATH=. python benchmarks/bench_pav_floor.py --quick     # fewer events and rounds
    PYTHONPATH=. python benchmarks/bench_pav_floor.py --only floor,sparse,weights,windows

Stream: click-like scores ``s = expit(z)``, ``z ~ N(-3, 1.5)``, labels from the miscalibrated
truth ``expit(1.3 z + 0.5)`` (as ``bench_streaming_pav.py``). Every figure is CPU time
(``process_time``), the best of several rounds in which the cases of one table alternate, so that a
neighbouring job slows every case of a round alike; the ratios are the figures to read. Each
table runs at the default score prior (``prior="auto"``) and with ``prior=None``.

Tables:

floor
    ``PAVCalibrator.prequential`` (1,024 logit buckets, count window 1e5) against the per-event
    floor: the same scores' buckets found and checked (the calibrator's own bucket search) and
    each event expired and added to a windowed histogram of the same layout, with no PAV.
sparse
    ``prequential``'s cost per event (ns) by bucket count and count window, and the same less
    the floor's.
weights
    fractional weights U(0.5, 1.5) against whole-number weights (all 1.0), 1,024 buckets, count
    windows 1e3 to 1e6.
windows
    ``Decay`` (half-life ``n ln 2`` events, a total weight of ``n``) and ``TimeWindow`` (``n``
    seconds, one event per second) against ``CountWindow(n)``, 1,024 buckets.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from streamcal.buckets import LogitGrid
from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow

PRIORS = {"auto": "auto", "none": None}


def click_stream(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    return s, y


def cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def run_prequential(s, y, n_buckets, window, prior, weights=None, times=None):
    cal = PAVCalibrator(buckets=LogitGrid(n_buckets), window=window, prior=prior)
    cal.prequential(
        s[:2], y[:2], weights=None if weights is None else weights[:2], times=None if times is None else times[:2]
    )  # the edges built, kernels loaded
    rest = slice(2, None)

    def go():
        cal.prequential(
            s[rest],
            y[rest],
            weights=None if weights is None else weights[rest],
            times=None if times is None else times[rest],
        )

    return cpu(go)


def run_floor(s, y, n_buckets, window_n):
    """The calibrator's bucket search and check, then each event expired and added to a
    windowed histogram of the same layout (``histogram_learn_many_inplace``), no PAV."""
    cal = PAVCalibrator(buckets=LogitGrid(n_buckets), window=CountWindow(window_n), prior=None)
    cal.update(s[:2], y[:2])
    hist = cal._hist  # the benchmark reads the calibrator's histogram object to time its own steps
    rest = s[2:]
    labels = y[2:].astype(np.float64)
    ones = np.ones(rest.size)
    zeros = np.zeros(rest.size)

    def go():
        b, bad = hist.layout.buckets_checked(rest)
        assert bad < 0
        hist.learn_many(b, labels, ones, zeros)

    return cpu(go)


def rounds(cases: dict, n_rounds: int) -> dict:
    """Best CPU time of each case over ``n_rounds`` rounds that alternate the cases."""
    best = dict.fromkeys(cases, math.inf)
    for _ in range(n_rounds):
        for name, fn in cases.items():
            best[name] = min(best[name], fn())
    return best


def table_floor(n, n_rounds):
    s, y = click_stream(n)
    cases = {"floor": lambda: run_floor(s, y, 1024, 100_000)}
    for p, prior in PRIORS.items():
        cases[p] = lambda prior=prior: run_prequential(s, y, 1024, CountWindow(100_000), prior)
    best = rounds(cases, n_rounds)
    m = n - 2
    print(f"\nfloor: {m:,} events, 1,024 logit buckets, CountWindow(1e5), best of {n_rounds} rounds (CPU)")
    print(
        f"  floor (bucket search + expire + add, no PAV): {m / best['floor'] / 1e6:6.2f}M events/s "
        f"{1e9 * best['floor'] / m:6.1f} ns/event"
    )
    for p in PRIORS:
        print(
            f"  prequential, prior={p:>4}: {m / best[p] / 1e6:6.2f}M events/s {1e9 * best[p] / m:6.1f} ns/event"
            f" -> {best['floor'] / best[p]:.0%} of the floor's rate"
        )


def table_sparse(n, n_rounds, buckets, windows):
    s, y = click_stream(n, seed=1)
    m = n - 2
    print(
        f"\nsparse: prequential ns per event (CPU, best of {n_rounds} alternating rounds), {m:,} events;"
        " in brackets the same less the floor's"
    )
    for p, prior in PRIORS.items():
        print(f"  prior={p}: buckets \\ count window " + "".join(f"{w:>18,}" for w in windows))
        for nb in buckets:
            cases = {}
            for w in windows:
                cases[("pav", w)] = lambda nb=nb, w=w, prior=prior: run_prequential(s, y, nb, CountWindow(w), prior)
                cases[("floor", w)] = lambda nb=nb, w=w: run_floor(s, y, nb, w)
            best = rounds(cases, n_rounds)
            cells = []
            for w in windows:
                ns, fl = 1e9 * best[("pav", w)] / m, 1e9 * best[("floor", w)] / m
                cells.append(f"{ns:8.0f} ({ns - fl:5.0f})")
            print(f"  {nb:>33,}" + "".join(f"{c:>18}" for c in cells))


def table_weights(n, n_rounds, windows):
    s, y = click_stream(n, seed=2)
    frac = np.random.default_rng(3).uniform(0.5, 1.5, size=n)
    ones = np.ones(n)
    print(
        f"\nweights: fractional U(0.5, 1.5) against whole (1.0), 1,024 buckets, {n - 2:,} events,"
        f" best of {n_rounds} alternating rounds (CPU): speed ratio fractional / whole"
    )
    for p, prior in PRIORS.items():
        row = []
        for w in windows:
            cases = {
                "whole": lambda w=w, prior=prior: run_prequential(s, y, 1024, CountWindow(w), prior, weights=ones),
                "frac": lambda w=w, prior=prior: run_prequential(s, y, 1024, CountWindow(w), prior, weights=frac),
            }
            best = rounds(cases, n_rounds)
            row.append(f"{best['whole'] / best['frac']:.2f}x ({1e9 * best['frac'] / (n - 2):.0f} ns)")
        print(f"  prior={p:>4}: " + "  ".join(f"{w:,}: {r}" for w, r in zip(windows, row, strict=True)))


def table_windows(n, n_rounds, spans):
    s, y = click_stream(n, seed=4)
    times = np.arange(n, dtype=np.float64)
    print(
        f"\nwindows: Decay / TimeWindow against CountWindow of the same span, 1,024 buckets, {n - 2:,} events,"
        f" best of {n_rounds} alternating rounds (CPU): speed ratio"
    )
    for p, prior in PRIORS.items():
        parts = []
        for span in spans:
            cases = {
                "count": lambda span=span, prior=prior: run_prequential(s, y, 1024, CountWindow(span), prior),
                "decay": lambda span=span, prior=prior: run_prequential(
                    s, y, 1024, Decay(half_life=span * math.log(2.0)), prior
                ),
                "time": lambda span=span, prior=prior: run_prequential(
                    s, y, 1024, TimeWindow(float(span)), prior, times=times
                ),
            }
            best = rounds(cases, n_rounds)
            parts.append(
                f"{span:,}: decay {best['count'] / best['decay']:.2f}x, time {best['count'] / best['time']:.2f}x"
            )
        print(f"  prior={p:>4}: " + "; ".join(parts))


def main(argv=None):
    import streamcal

    streamcal.use_compiled_kernels()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events and rounds")
    parser.add_argument("--only", default="floor,sparse,weights,windows", help="tables to run, comma-separated")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    n_rounds = args.rounds or (2 if args.quick else 3)
    n = 400_000 if args.quick else 2_000_000
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if "floor" in only:
        table_floor(n, n_rounds)
    if "sparse" in only:
        table_sparse(n // 4, n_rounds, (1024, 4096, 16384, 65536), (1_000, 10_000, 100_000))
    if "weights" in only:
        table_weights(n, n_rounds, (1_000, 10_000, 100_000) + ((1_000_000,) if not args.quick else ()))
    if "windows" in only:
        table_windows(n, n_rounds, (1_000, 10_000, 100_000))


if __name__ == "__main__":
    main()
