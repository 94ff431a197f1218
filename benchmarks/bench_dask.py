"""Dask fit throughput over Parquet files against the single-process replay.

Data: ``--rows`` events (score = a probability, label drawn with probability score**2) in
``--files`` Parquet files, written once into ``--dir`` (a temporary directory by default).

Baselines, run in this process:

- single process: ``pyarrow.dataset`` reads the directory into numpy, then one
  ``PAVCalibrator().update(scores, labels)`` over all rows (the single-process replay path);
- Dask, threaded scheduler (``scheduler="threads"``; the PAV kernels release the GIL);
- Dask, ``distributed.LocalCluster`` with ``--workers`` worker processes, one thread each.

Every Dask result is checked against the single-process calibrator (equal histograms, equal
predictions). The first run of each path (numba compile or cache load in every process, cluster
start) is reported apart; throughput is the best of ``--repeats`` steady-state runs.

Run: ``PYTHONPATH=. python benchmarks/bench_dask.py [--rows 10000000] [--files 8] [--workers 2]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from streamcal import PAVCalibrator
from streamcal import dask as scd


def write_data(path: Path, rows: int, files: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for i, n in enumerate(np.diff(np.linspace(0, rows, files + 1).astype(np.int64))):
        s = rng.uniform(size=n)
        y = rng.uniform(size=n) < s**2
        pq.write_table(pa.table({"score": s, "label": y}), path / f"part-{i:03d}.parquet")


def single_process(path: Path):
    start = time.perf_counter()
    table = ds.dataset(path, format="parquet").to_table(columns=["score", "label"])
    scores = table.column("score").to_numpy()
    labels = table.column("label").to_numpy(zero_copy_only=False)
    read = time.perf_counter() - start
    cal = PAVCalibrator().update(scores, labels)
    return cal, time.perf_counter() - start, read


def dask_fit(path: Path, scheduler):
    import dask.dataframe as dd

    start = time.perf_counter()
    cal = scd.fit(PAVCalibrator(), dd.read_parquet(path), "score", "label", scheduler=scheduler)
    return cal, time.perf_counter() - start


def same(a, b) -> bool:
    grid = np.linspace(0, 1, 1001)
    return (
        a.n_learned == b.n_learned
        and np.array_equal(a.histogram()[1], b.histogram()[1])
        and np.array_equal(a.histogram()[2], b.histogram()[2])
        and np.array_equal(a.predict_proba(grid), b.predict_proba(grid))
    )


def main() -> None:
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.dir or Path(tmp)
        if not list(path.glob("*.parquet")):
            start = time.perf_counter()
            write_data(path, args.rows, args.files)
            print(f"wrote {args.rows:,} rows in {args.files} Parquet files in {time.perf_counter() - start:.1f} s")
        rows = args.rows

        start = time.perf_counter()
        PAVCalibrator().update([0.5], [True])
        print(f"numba first call (compile or cache load), this process: {time.perf_counter() - start:.3f} s")

        runs = [single_process(path) for _ in range(args.repeats)]
        reference = runs[0][0]
        t_single = min(r[1] for r in runs)
        t_read = min(r[2] for r in runs)
        results = [("single process (pyarrow read + update)", t_single, True)]
        print(f"single process: read {t_read:.2f} s, update {t_single - t_read:.2f} s")

        cold = dask_fit(path, "threads")
        runs = [dask_fit(path, "threads") for _ in range(args.repeats)]
        results.append(("dask, threaded scheduler", min(r[1] for r in runs), same(runs[0][0], reference)))
        print(f"dask threads: first run {cold[1]:.2f} s")

        from distributed import Client, LocalCluster

        start = time.perf_counter()
        with (
            LocalCluster(
                n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            started = time.perf_counter() - start
            cold = dask_fit(path, None)
            runs = [dask_fit(path, None) for _ in range(args.repeats)]
            results.append(
                (f"dask, LocalCluster {args.workers} processes", min(r[1] for r in runs), same(runs[0][0], reference))
            )
            print(f"LocalCluster: start {started:.2f} s, first run (workers compile/load kernels) {cold[1]:.2f} s")
            client.close()

    print()
    print("| path | seconds | rows/s | vs single process | equal to single process |")
    print("|---|---:|---:|---:|---|")
    for name, seconds, equal in results:
        print(f"| {name} | {seconds:.2f} | {rows / seconds:,.0f} | {t_single / seconds:.2f}x | {equal} |")


if __name__ == "__main__":
    main()
