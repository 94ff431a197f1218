"""Streaming PAV against its per-event floor, across bucket counts, weights and windows.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_pav_floor.py             # every table (a few minutes)
    PYTHONPATH=. python benchmarks/bench_pav_floor.py --quick     # fewer events and rounds
    PYTHONPATH=. python benchmarks/bench_pav_floor.py --only floor,sparse,weights,windows
    PYTHONPATH=. python benchmarks/bench_pav_floor.py --quick --only sparse --buckets 65536 --old main

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

``--old REV`` times the sparse table (``--buckets``, ``--windows``) for this working tree and for
the ``streamcal`` package of the git revision ``REV`` (exported with ``git archive`` to a temporary
directory): each version runs in child processes with ``PYTHONPATH`` set to it, one untimed child
each first (numba's cache), then ``--processes`` children each, alternating old, new, new, old,
...; the table gives each version's range of ns per event over its children and the ratio of the
medians, old / new (above 1: this tree is faster).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def table_sparse(n, n_rounds, buckets, windows, show=True):
    """The sparse table; returns ``{(prior, buckets, window): (pav ns, floor ns)}``."""
    s, y = click_stream(n, seed=1)
    m = n - 2
    results = {}
    if show:
        print(
            f"\nsparse: prequential ns per event (CPU, best of {n_rounds} alternating rounds), {m:,} events;"
            " in brackets the same less the floor's"
        )
    for p, prior in PRIORS.items():
        if show:
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
                results[(p, nb, w)] = (ns, fl)
                cells.append(f"{ns:8.0f} ({ns - fl:5.0f})")
            if show:
                print(f"  {nb:>33,}" + "".join(f"{c:>18}" for c in cells))
    return results


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


def export_revision(rev: str, parent: Path) -> Path:
    """``git archive`` of ``rev``'s ``streamcal`` package into a new directory under ``parent``."""
    root = Path(__file__).resolve().parents[1]
    where = parent / "old"
    where.mkdir()
    archive = subprocess.Popen(["git", "archive", "--format=tar", rev, "streamcal"], cwd=root, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(where)], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait():
        msg = f"--old must name a git revision of {root}: git archive {rev} failed (exit {archive.returncode})"
        raise SystemExit(msg)
    return where


def sparse_child(version: Path, argv: list) -> dict:
    """The sparse table's results from a child process that imports ``version``'s package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = str(version)
    command = [sys.executable, __file__, "--child", str(version), *argv]
    out = subprocess.run(command, env=env, cwd=str(version), capture_output=True, text=True, check=True)
    return {tuple(k): v for k, v in json.loads(out.stdout.splitlines()[-1])}


def compare_sparse(rev: str, argv: list, n_processes: int) -> None:
    new = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="bench-pav-floor-") as tmp:
        old = export_revision(rev, Path(tmp))
        for version in (old, new):
            sparse_child(version, [*argv, "--rounds", "1"])  # numba's cache written, not timed
        runs = {"old": [], "new": []}
        order = ["old", "new", "new", "old"]
        for i in range(2 * n_processes):
            name = order[i % 4]
            runs[name].append(sparse_child(old if name == "old" else new, argv))
    print(f"\nsparse, this tree against {rev}: prequential ns per event (CPU), {n_processes} processes each")
    for case in runs["new"][0]:
        got = {name: [r[case][0] for r in runs[name]] for name in runs}
        ratio = statistics.median(got["old"]) / statistics.median(got["new"])
        prior, nb, w = case
        print(
            f"  prior={prior:>4}, {nb:>6,} buckets, window {w:>7,}: new {min(got['new']):8.0f}-{max(got['new']):<8.0f}"
            f" old {min(got['old']):8.0f}-{max(got['old']):<8.0f} old / new {ratio:5.2f}x"
        )


def main(argv=None):
    import streamcal

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events and rounds")
    parser.add_argument("--only", default="floor,sparse,weights,windows", help="tables to run, comma-separated")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--buckets", default="1024,4096,16384,65536", help="the sparse table's bucket counts")
    parser.add_argument("--windows", default="1000,10000,100000", help="the sparse table's count windows")
    parser.add_argument("--old", metavar="REV", help="the sparse table against this git revision (see above)")
    parser.add_argument("--processes", type=int, default=2, help="with --old: timed children per version")
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)  # (--old's children)
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    n_rounds = args.rounds or (2 if args.quick else 3)
    n = 400_000 if args.quick else 2_000_000
    buckets = tuple(int(b) for b in args.buckets.split(","))
    windows = tuple(int(w) for w in args.windows.split(","))
    if args.old:
        forward = ["--buckets", args.buckets, "--windows", args.windows] + (["--quick"] if args.quick else [])
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        compare_sparse(args.old, forward + (["--rounds", str(args.rounds)] if args.rounds else []), args.processes)
        print(f"load average: {os.getloadavg()[0]:.1f}")
        return
    streamcal.use_compiled_kernels()
    if args.child:
        if Path(streamcal.__file__).resolve().parents[1] != Path(args.child).resolve():
            raise SystemExit(f"the child imported {streamcal.__file__}, not the package in {args.child}")
        results = table_sparse(n // 4, n_rounds, buckets, windows, show=False)
        print(json.dumps([[list(k), v] for k, v in results.items()]))
        return
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if "floor" in only:
        table_floor(n, n_rounds)
    if "sparse" in only:
        table_sparse(n // 4, n_rounds, buckets, windows)
    if "weights" in only:
        table_weights(n, n_rounds, (1_000, 10_000, 100_000) + ((1_000_000,) if not args.quick else ()))
    if "windows" in only:
        table_windows(n, n_rounds, (1_000, 10_000, 100_000))


if __name__ == "__main__":
    main()
