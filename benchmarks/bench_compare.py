"""Two versions of streamcal side by side: PAV ``prequential`` and the PAV river face, alternating runs.

Run from the repository root::

    python benchmarks/bench_compare.py --old main               # working tree against main
    python benchmarks/bench_compare.py --old main~5 --quick     # smaller sizes, fewer runs
    python benchmarks/bench_compare.py --old v0.1 --new ../other --repeat 11

Versions: ``--old REV`` is a git revision of this repository, exported with ``git archive`` to a
temporary directory; ``--new PATH`` is a directory holding a ``streamcal`` package (default: this
working tree). Every measurement is a child process with ``PYTHONPATH`` set to one version (the
child checks that it imports that version's package). Each version first runs one child that is
not timed, so that numba's on-disk cache of that version is written before anything is timed; the
timed children then alternate old, new, new, old, ... so that a change in the machine's load falls
on both versions alike.

Workloads, in each child (the same data for both versions):

- ``prequential``: the workload of ``bench_streaming_pav.py``: ``PAVCalibrator`` with 1024 logit
  buckets and a count window of 100,000 events, ``prequential`` on ``--n`` click-like events
  (scores ``expit(z)``, ``z ~ N(-3, 1.5)``, labels from ``expit(1.3 z + 0.5)``);
- river face: the PAV row of ``bench_river_face.py``: ``predict_proba_one`` + ``learn_one`` pairs
  on ``{"score": s}`` dicts, count window of 10,000 events, after 10,000 warm-up pairs.

Each child times each workload ``--inner`` times after a first call that loads the compiled
kernels, and reports its fastest run (CPU time, ``process_time``; wall time alongside). The table
gives, per workload, each version's median over its ``--repeat`` children and the ratio new / old
of the medians (a throughput ratio: above 1 means the new version is faster). The children also
report a digest of the ``prequential`` outputs and of the river face's predictions, so the table
says whether the two versions computed the same numbers bit for bit.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 100_000
RIVER_WINDOW = 10_000
RIVER_WARMUP = 10_000

# ---------------------------------------------------------------- child: runs in one version


def click_stream(n: int, seed: int = 0):
    """The click-like stream of ``bench_streaming_pav.py`` (written out here: the child imports
    nothing from this repository but the version of ``streamcal`` it measures)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    return s, y


def child(n: int, pairs: int, inner: int) -> dict:
    import hashlib

    import numpy as np

    import streamcal
    from streamcal import PAVCalibrator
    from streamcal.buckets import LogitGrid
    from streamcal.windows import CountWindow

    def best(fn):
        runs = []
        for _ in range(inner):
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            runs.append((time.process_time() - cpu, time.perf_counter() - wall))
        return min(runs)

    s, y = click_stream(max(n, 2 * WINDOW))
    s, y = s[:n], y[:n]

    def prequential():
        return PAVCalibrator(buckets=LogitGrid(1024), window=CountWindow(WINDOW)).prequential(s, y)

    proba, llr = prequential()  # loads (or compiles) the kernels; checked, not timed
    digest = hashlib.sha256(np.ascontiguousarray(proba).tobytes() + np.ascontiguousarray(llr).tobytes())
    preq_cpu, preq_wall = best(prequential)

    rs, ry = click_stream(RIVER_WARMUP + pairs, seed=3)
    xs = [{"score": v} for v in rs.tolist()]
    ys = ry.tolist()

    def river(record=None):
        cal = PAVCalibrator(window=CountWindow(RIVER_WINDOW))
        for x, label in zip(xs[:RIVER_WARMUP], ys[:RIVER_WARMUP], strict=True):
            cal.predict_proba_one(x)
            cal.learn_one(x, label)
        wall, cpu = time.perf_counter(), time.process_time()
        for x, label in zip(xs[RIVER_WARMUP:], ys[RIVER_WARMUP:], strict=True):
            p = cal.predict_proba_one(x)
            cal.learn_one(x, label)
            if record is not None:
                record.append(p[True])
        return time.process_time() - cpu, time.perf_counter() - wall

    predictions = []
    river(predictions)  # checked, not timed
    river_digest = hashlib.sha256(np.asarray(predictions, dtype=np.float64).tobytes())
    river_cpu, river_wall = min(river() for _ in range(inner))

    return {
        "streamcal": streamcal.__file__,
        "prequential": {"cpu": n / preq_cpu, "wall": n / preq_wall},
        "river face": {"cpu": pairs / river_cpu, "wall": pairs / river_wall},
        "digest": {"prequential": digest.hexdigest(), "river face": river_digest.hexdigest()},
    }


# ---------------------------------------------------------------- parent: versions and the table


def export_revision(rev: str, parent: Path) -> Path:
    """``git archive`` of ``rev``'s ``streamcal`` package into a new directory under ``parent``."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", "--short", f"{rev}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if commit.returncode:
        msg = f"--old must name a git revision of {ROOT}; got {rev!r}: {commit.stderr.strip()}"
        raise SystemExit(msg)
    where = parent / f"old-{commit.stdout.strip()}"
    where.mkdir()
    archive = subprocess.Popen(["git", "archive", "--format=tar", rev, "streamcal"], cwd=ROOT, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(where)], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait():
        msg = f"git archive {rev} streamcal failed (exit {archive.returncode})"
        raise SystemExit(msg)
    return where


def run_child(version: Path, args) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = str(version)
    env["STREAMCAL_INTERPRETED_EVENTS"] = "0"  # compiled from the first call (versions with two tiers)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--n",
        str(args.n),
        "--pairs",
        str(args.pairs),
        "--inner",
        str(args.inner),
    ]
    out = subprocess.run(cmd, env=env, cwd=version, capture_output=True, text=True, check=False)
    if out.returncode:
        msg = f"the child for {version} failed (exit {out.returncode}):\n{out.stderr[-3000:]}"
        raise SystemExit(msg)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(result["streamcal"]).resolve().is_relative_to(version.resolve()):
        msg = f"the child for {version} imported {result['streamcal']}, not that version"
        raise SystemExit(msg)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="git revision of the old version (exported with git archive)")
    parser.add_argument(
        "--new", default=str(ROOT), help="directory holding the new version's streamcal (default: this tree)"
    )
    parser.add_argument("--repeat", type=int, default=7, help="timed children per version, alternating (default 7)")
    parser.add_argument(
        "--inner", type=int, default=3, help="timed runs of each workload in a child; its fastest counts"
    )
    parser.add_argument("--n", type=int, default=2_000_000, help="prequential events (default 2,000,000)")
    parser.add_argument("--pairs", type=int, default=100_000, help="river-face pairs timed (default 100,000)")
    parser.add_argument("--quick", action="store_true", help="--n 500000 --pairs 30000 --repeat 3")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.n, args.pairs, args.inner)))
        return
    if args.old is None:
        parser.error("--old REV is required")
    if args.quick:
        args.n, args.pairs, args.repeat = 500_000, 30_000, 3
    for name in ("repeat", "inner", "n", "pairs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1; got {getattr(args, name)}")
    new = Path(args.new).resolve()
    if not (new / "streamcal" / "__init__.py").is_file():
        parser.error(f"--new must be a directory holding streamcal/__init__.py; got {args.new!r}")

    print("command:", shlex.join([Path(sys.executable).name, *sys.argv]))
    print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench_compare-") as tmp:
        versions = {"old": export_revision(args.old, Path(tmp)), "new": new}
        print(f"old: {args.old} ({versions['old'].name.removeprefix('old-')}), new: {new}")
        print(
            f"prequential: {args.n:,} events; river face: {args.pairs:,} pairs; "
            f"best of {args.inner} in each child, median of {args.repeat} children per version"
        )
        for name, version in versions.items():  # writes each version's numba cache; not timed
            t = time.perf_counter()
            run_child(version, argparse.Namespace(n=min(args.n, 2 * WINDOW), pairs=1_000, inner=1))
            print(f"  warm-up child, {name}: {time.perf_counter() - t:.1f} s (compile or cache load, not timed)")
        results = {"old": [], "new": []}
        for r in range(args.repeat):
            for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                results[name].append(run_child(versions[name], args))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")

    rows = [("prequential", "events/s"), ("river face", "pairs/s")]
    print(
        f"\n{'workload':30s} {'old median':>14s} {'new median':>14s} {'new / old':>10s}  {'old range':>25s}  {'new range':>25s}"
    )
    for workload, unit in rows:
        for clock in ("cpu", "wall"):
            vals = {k: [res[workload][clock] for res in v] for k, v in results.items()}
            med = {k: statistics.median(v) for k, v in vals.items()}
            rng = {k: f"{min(v):,.0f} - {max(v):,.0f}" for k, v in vals.items()}
            label = f"{workload}, {unit} ({clock.upper() if clock == 'cpu' else clock})"
            print(
                f"{label:30s} {med['old']:>14,.0f} {med['new']:>14,.0f} {med['new'] / med['old']:>10.3f}"
                f"  {rng['old']:>25s}  {rng['new']:>25s}"
            )
    for workload, _ in rows:
        same = {res["digest"][workload] for v in results.values() for res in v}
        print(f"{workload} outputs equal in both versions, bit for bit: {len(same) == 1}")


if __name__ == "__main__":
    main()
