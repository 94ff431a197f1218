"""Benchmark: keyed replay (``--group-col``) against the unkeyed replay and the keyed calibrator alone.

A campaigns stream (2,000 keys, Zipf traffic, labels up to an hour late) from Parquet, PAV with
a count window, output written, metrics off. Cases, in one process, in alternating rounds (each
round runs every case once, in turn), medians of ``--rounds``; CPU time of this process (the
replay's worker, reader and writer threads count) and wall time:

- ``unkeyed replay``: ``replay(FILE, "pav")``, labels at once;
- ``keyed replay``: the same with ``group_col="key"``;
- ``KeyedCalibrator.prequential``: the keyed calibrator alone on the file's columns in memory
  (the floor of the keyed replay: what it costs without reading, planning and writing);
- ``keyed replay, late labels``: with the file's label-time column (merged learn / predict
  sequences, keys carried in flight).

Ratios: keyed replay against the unkeyed replay and against the keyed calibrator alone.

    PYTHONPATH=. python benchmarks/bench_replay_keyed.py                 # 1e6 events, 5 rounds
    PYTHONPATH=. python benchmarks/bench_replay_keyed.py --n 2e5 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal.replay import generate, replay
from streamcal.windows import CountWindow

WINDOW = 10_000


def _timed(fn) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e6, help="events (default 1e6)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    args = parser.parse_args(argv)
    n = int(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        path = generate(Path(tmp) / "campaigns.parquet", scenario="campaigns", n=n, seed=0)
        table = pq.read_table(path)
        keys, s = table["key"].to_numpy(), table["score"].to_numpy()
        y = table["label"].to_numpy().astype(float)
        t = table["event_time"].cast(pa.int64()).to_numpy() * 1e-3
        out = Path(tmp) / "out.parquet"

        def template():
            return PAVCalibrator(window=CountWindow(WINDOW))

        cases = {
            "unkeyed replay": lambda: replay(path, {"pav": template()}, label_time_col=None, output=out, metrics={}),
            "keyed replay": lambda: replay(
                path, {"pav": template()}, group_col="key", label_time_col=None, output=out, metrics={}
            ),
            "KeyedCalibrator.prequential": lambda: KeyedCalibrator(template()).prequential(keys, s, y, times=t),
            "keyed replay, late labels": lambda: replay(
                path, {"pav": template()}, group_col="key", output=out, metrics={}
            ),
        }
        # compile / load every kernel once, untimed
        small = generate(Path(tmp) / "small.parquet", scenario="campaigns", n=2_000, seed=1)
        replay(small, {"pav": template()}, group_col="key", metrics={})
        replay(small, {"pav": template()}, metrics={})
        cpu = {name: [] for name in cases}
        wall = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, fn in cases.items():
                c, w = _timed(fn)
                cpu[name].append(c)
                wall[name].append(w)
    med_cpu = {name: statistics.median(v) for name, v in cpu.items()}
    med_wall = {name: statistics.median(v) for name, v in wall.items()}
    print(f"{n:,} campaigns events, CountWindow({WINDOW:,}) per key, medians of {args.rounds} alternating rounds")
    print(f"{'case':32s} {'CPU s':>8s} {'wall s':>8s} {'M events/s (CPU)':>17s}")
    for name in cases:
        print(f"{name:32s} {med_cpu[name]:8.3f} {med_wall[name]:8.3f} {n / med_cpu[name] / 1e6:17.2f}")
    keyed = med_cpu["keyed replay"]
    print(f"keyed replay / unkeyed replay (CPU): {keyed / med_cpu['unkeyed replay']:.2f}x")
    print(f"keyed replay / KeyedCalibrator.prequential (CPU): {keyed / med_cpu['KeyedCalibrator.prequential']:.2f}x")


if __name__ == "__main__":
    main()
