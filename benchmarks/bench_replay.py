"""Benchmark: replay events from Parquet: throughput (PAV, output written) and peak memory.

Throughput goal (issue 7): at least 5 million events/s end to end, and the share of the time
spent in I/O against a bare pyarrow read of the same file. Memory goal (issue 15): peak memory
set by the batch size, not by the file: within 10 % between 1e7 and 5e7 rows, and at most 600 MB
for 1e7 rows through four methods (pav, ispline, gev, platt).

    PYTHONPATH=. python benchmarks/bench_replay.py                  # both, 1e7 / 5e7 click events
    PYTHONPATH=. python benchmarks/bench_replay.py --n 2e6 --no-memory       # quicker
    PYTHONPATH=. python benchmarks/bench_replay.py --no-throughput --memory-n 1e7,5e7

Throughput cases run in one process, one case after the other; each reports its best of
``--repeat`` runs as wall time and as CPU time of this process (the machine may be shared, so
the CPU time is the steadier figure; pyarrow's reader and writer threads count in both). The
numba compile / cache-load time of PAV is measured apart, on a tiny replay, before anything is
timed. Cases:

- ``generate``: writing the synthetic stream (click scenario, Parquet, 1e6-row batches);
- ``bare read``: ``pyarrow.dataset`` reading every column of the file, record batch by batch;
- ``bare write``: ``pyarrow.parquet.ParquetWriter`` writing the replay's output table alone;
- ``PAV prequential (in memory)``: the calibrator alone on numpy arrays already in memory;
- ``replay, labels at once``: the full replay, every label known at its event (prequential);
- ``replay, late labels``: the full replay with the file's label-time column (labels up to an
  hour late), i.e. merged learn / predict operation sequences;
- ``replay, late labels + metrics``: the same with the six metrics per 100,000-event window;
- ``..., n_jobs=2``: the two replays with ``PAVCalibrator(n_jobs=2)`` and batches of 2**18
  events (split over two threads, exactly);
- ``replay machinery alone``: late labels, output written, with a calibrator that costs nothing
  (returns its input): what reading, planning and writing cost without PAV.

Memory cases run the command line in a child process each (``streamcal replay FILE -m METHODS
-q -o OUT``, default options) and report the child's peak resident set size, as the kernel
counts it (``ru_maxrss`` from ``wait4``: the "Maximum resident set size" of
``/usr/bin/time -v``), with the same command on a 2,000-event file for the fixed cost (the
interpreter, pyarrow and the numba kernels).

Whole-process rows (``--process``): ``streamcal replay FILE -q -o OUT`` as child processes,
interpreter start to exit, against baselines in the same run, in alternating rounds (each round
runs every command once, in turn), medians of ``--process-runs`` rounds; wall time, and CPU time
(user + system of the child, steadier on a shared machine). The package is copied, with its
bytecode compiled as ``pip install`` does, and each copy's numba cache is written by one untimed
run first. Rows:

- ``replay 1e7``: the default replay (late labels, default metrics, output written) of
  ``--process-n`` click events, against the I/O floor (a child that reads the file as the replay
  does and writes the same columns plus two float columns with the replay's writer options) and,
  with ``--old REV``, the same command on that git revision (``git archive``);
- ``start-up``: the same on a 1,000-event file, against ``--metrics none``, the I/O floor of
  that file and, with ``--old REV``, that revision (default and ``--metrics none``);
  ``--startup-only`` runs this row alone.

Metric costs (``--metrics-cost``): each default metric on windows of 100,000 events of PAV's
output on a click stream, in this process, CPU time of this thread, against the same metric
computed the way streamcal first computed it (``tests/naive.py``, ``naive_replay_*``), in
alternating rounds; medians; reported as seconds per 1e7 rows (100 windows) and checked equal
bit for bit; and the six computed together as the replay computes them
(``streamcal.metrics._window.window_metrics``, work arrays lent from window to window) against
the six functions each alone. With ``--old REV``, also ``min_cllr`` of that revision's ``streamcal/metrics/_array.py``
(``git show``) in the same rounds.

    PYTHONPATH=. python benchmarks/bench_replay.py --no-throughput --no-memory --process --old 38c47f1
    PYTHONPATH=. python benchmarks/bench_replay.py --no-throughput --no-memory --process --startup-only --old 911db6b
    PYTHONPATH=. python benchmarks/bench_replay.py --no-throughput --no-memory --metrics-cost
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.replay import generate, replay
from streamcal.windows import CountWindow

GOAL = 5e6
WINDOW = 100_000
ROOT = Path(__file__).resolve().parents[1]


class FreeCalibrator:
    """Costs nothing: the score as the probability and as the LLR (machinery-only baseline)."""

    def process(self, scores, labels, learn_mask, *, weights=None, times=None):
        return scores, scores

    def prequential(self, scores, labels, *, weights=None, times=None):
        return scores, scores


def timed(fn, repeat):
    """Best (wall, cpu) over ``repeat`` runs, and the last result."""
    best = (float("inf"), float("inf"))
    result = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        best = min(best, (wall, cpu))
    return best, result


def stream(work: Path, n: int) -> Path:
    """The click stream of ``n`` events (seed 1) in ``work``, generated if missing."""
    src = work / f"clicks_{n}.parquet"
    if not src.exists():
        w0 = time.perf_counter()
        generate(src, "click", n=n, seed=1)
        print(f"generated {src.name} ({n:,} click events) in {time.perf_counter() - w0:.1f} s", flush=True)
    return src


def throughput(args, work: Path) -> None:
    n = int(args.n)
    src = work / f"clicks_{n}.parquet"
    out = work / "out.parquet"
    rows = []

    def report(name, wall_cpu, events=n, note=""):
        wall, cpu = wall_cpu
        rows.append((name, wall, cpu, events / wall, events / cpu, note))
        print(
            f"{name:<38} wall {wall:7.2f} s  cpu {cpu:7.2f} s  {events / wall / 1e6:6.2f} M/s wall  "
            f"{events / cpu / 1e6:6.2f} M/s cpu  {note}",
            flush=True,
        )

    if not src.exists():
        report("generate (click, Parquet)", timed(lambda: generate(src, "click", n=n, seed=1), 1)[0])
    size_mb = src.stat().st_size / 1e6

    # compile (or load from numba's cache) PAV's kernels apart from everything timed
    tiny = work / "tiny.parquet"
    generate(tiny, "click", n=2_000, seed=2)
    w0 = time.perf_counter()
    replay(tiny, {"pav": PAVCalibrator(window=CountWindow(WINDOW))}, metrics={})
    replay(tiny, {"pav": PAVCalibrator(window=CountWindow(WINDOW))}, label_time_col=None)
    compile_s = time.perf_counter() - w0
    print(f"numba compile / cache load + first replay: {compile_s:.2f} s (not in any figure below)")

    def bare_read():
        k = 0
        for batch in ds.dataset(src).to_batches(batch_size=1 << 20):
            k += batch.num_rows
        return k

    read = timed(bare_read, args.repeat)[0]
    report("bare read (pyarrow.dataset)", read, note=f"{size_mb:.0f} MB file")

    table = pq.read_table(src)
    t = table["event_time"].cast("int64").to_numpy() / 1000.0
    s = table["score"].to_numpy()
    y = table["label"].to_numpy(zero_copy_only=False).astype(np.float64)

    def bare_pav():
        return PAVCalibrator(window=CountWindow(WINDOW)).prequential(s, y, times=t)

    pav_wc, (proba, llr) = timed(bare_pav, args.repeat)
    report("PAV prequential (in memory)", pav_wc, note="1024 logit buckets, count window 1e5")

    out_table = table.append_column("proba_pav", [proba]).append_column("llr_pav", [llr])
    del table

    def bare_write(table=out_table):
        with pq.ParquetWriter(out, table.schema, compression="snappy", use_dictionary=False) as w:
            for batch in table.to_batches(max_chunksize=1 << 20):
                w.write_batch(batch)

    write = timed(bare_write, args.repeat)[0]
    report("bare write (ParquetWriter)", write, note="input columns + proba + llr")
    del bare_write, out_table

    def run(n_jobs=1, **kw):
        if n_jobs > 1:  # PAV splits a batch over its threads from n_jobs * 2**17 events on
            kw.setdefault("batch_size", n_jobs << 17)

        def go():
            pav = PAVCalibrator(window=CountWindow(WINDOW), n_jobs=n_jobs)
            return replay(src, {"pav": pav}, output=out, **kw)

        return go

    at_once = timed(run(label_time_col=None, metrics={}), args.repeat)[0]
    report("replay, labels at once", at_once, note="output written")
    late_wc, summary = timed(run(metrics={}), args.repeat)
    report("replay, late labels", late_wc, note=f"{summary.n_learned:,} labels learned late")
    at_once_2 = timed(run(n_jobs=2, label_time_col=None, metrics={}), args.repeat)[0]
    report("replay, labels at once, n_jobs=2", at_once_2, note="PAV on 2 threads per batch")
    late_2 = timed(run(n_jobs=2, metrics={}), args.repeat)[0]
    report("replay, late labels, n_jobs=2", late_2, note="PAV on 2 threads per batch")
    with_metrics = timed(run(), 1)[0]
    report("replay, late labels + metrics", with_metrics, note="6 metrics per 1e5 events")
    free = timed(lambda: replay(src, {"free": FreeCalibrator()}, output=out, metrics={}), args.repeat)[0]
    report("replay machinery alone", free, note="late labels, output written, no-op calibrator")

    print()
    cases = (
        ("labels at once", at_once),
        ("late labels", late_wc),
        ("labels at once, n_jobs=2", at_once_2),
        ("late labels, n_jobs=2", late_2),
    )
    for name, wc in cases:
        wall, cpu = wc
        print(
            f"replay, {name}: {n / wall / 1e6:.2f} M events/s wall = {n / wall / GOAL:.2f}x the "
            f"5 M/s goal; I/O share (bare read / replay) {read[0] / wall:.0%} wall, "
            f"{read[1] / cpu:.0%} cpu; read + write share {(read[0] + write[0]) / wall:.0%} wall; "
            f"PAV alone {pav_wc[0] / wall:.0%} wall"
        )


# A child's peak RSS counts the memory of the process it was forked from (Linux keeps the high-water
# mark across exec), so each command is started from a small launcher process, not from this one.
_LAUNCHER = (
    "import os, subprocess, sys; child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "_, status, usage = os.wait4(child.pid, 0); print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))"
)


def peak_rss(command: list[str]) -> tuple[float, float]:
    """Run ``command`` in a child process; its peak resident set size (MB) and wall time (s)."""
    w0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, *command], capture_output=True, text=True, check=True)
    maxrss_kib, code = (int(x) for x in done.stdout.split())
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({code}): {done.stderr}")
    return maxrss_kib / 1024.0, time.perf_counter() - w0  # ru_maxrss is in KiB on Linux


def memory(args, work: Path) -> None:
    sizes = [int(float(x)) for x in args.memory_n.split(",")]
    method_sets = args.memory_methods.split(";")
    out = work / "mem_out.parquet"
    tiny = work / "tiny_mem.parquet"
    generate(tiny, "click", n=2_000, seed=2)

    def command(src, methods):
        return [sys.executable, "-m", "streamcal.cli", "replay", str(src), "-m", methods, "-q", "-o", str(out)]

    print()
    print("peak memory of `streamcal replay FILE -m METHODS -q -o OUT` (child process, ru_maxrss):")
    for methods in method_sets:
        peak_rss(command(tiny, methods))  # numba's cache loaded (or kernels compiled) once first
        fixed, _ = peak_rss(command(tiny, methods))
        peaks = []
        for n in sizes:
            mb, wall = peak_rss(command(stream(work, n), methods))
            peaks.append(mb)
            print(f"  {methods:<24} {n:>12,} events  peak {mb:7.0f} MB  ({wall:6.1f} s wall)", flush=True)
        print(f"  {methods:<24} {2_000:>12,} events  peak {fixed:7.0f} MB  (the fixed cost)")
        if len(peaks) > 1:
            print(f"  {methods:<24} largest / smallest stream: {max(peaks) / min(peaks):.3f}", flush=True)


# ---------------------------------------------------------------- whole processes

# the I/O floor: what the replay reads (the Parquet reader's options of the replay) and writes
# (the input columns and two float columns, with the replay's writer options), nothing else
IO_FLOOR = """
import sys
import pyarrow as pa, pyarrow.parquet as pq
src, out = sys.argv[1], sys.argv[2]
reader = pq.ParquetFile(src, buffer_size=1 << 20, pre_buffer=False, page_checksum_verification=True)
writer = None
for batch in reader.iter_batches(batch_size=1 << 16):
    score = batch.column("score")
    batch = pa.RecordBatch.from_arrays(
        [*batch.columns, score, score], names=[*batch.schema.names, "proba_pav", "llr_pav"]
    )
    if writer is None:
        writer = pq.ParquetWriter(out, batch.schema, compression="snappy", use_dictionary=[], write_page_checksum=True)
    writer.write_batch(batch)
writer.close()
"""


def package_copy(parent: Path, rev: str | None) -> Path:
    """This tree's ``streamcal`` (or git revision ``rev``'s) in a new directory under ``parent``,
    bytecode compiled, numba cache empty."""
    where = Path(tempfile.mkdtemp(dir=parent, prefix=f"{rev or 'new'}-"))
    if rev is None:
        shutil.copytree(ROOT / "streamcal", where / "streamcal", ignore=shutil.ignore_patterns("__pycache__"))
    else:
        archive = subprocess.Popen(
            ["git", "archive", "--format=tar", rev, "streamcal"], cwd=ROOT, stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(where)], stdin=archive.stdout, check=True)
        archive.stdout.close()
        if archive.wait():
            raise SystemExit(f"git archive {rev} streamcal failed (exit {archive.returncode})")
    compileall.compile_dir(where, quiet=1)
    return where


def run_process(command: list[str], pythonpath: Path | None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of a child process, start to exit."""
    drop = ("PYTHONDONTWRITEBYTECODE", "STREAMCAL_INTERPRETED_EVENTS", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_") and k not in drop}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    w0 = time.perf_counter()
    child = subprocess.Popen(command, env=env, cwd=pythonpath or ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - w0
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"{' '.join(command)} failed ({os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def process_rows(args, work: Path) -> None:
    n = int(float(args.process_n))
    big = None if args.startup_only else stream(work, n)
    small = work / "start_1000.parquet"
    generate(small, "click", n=1_000, seed=1)
    out = work / "process_out.parquet"
    py = sys.executable
    versions = {"new": package_copy(work, None)}
    if args.old:
        versions["old"] = package_copy(work, args.old)

    def replay_cmd(src, *extra):
        return [py, "-m", "streamcal.cli", "replay", str(src), "-q", "-o", str(out), *extra]

    floor = [py, "-c", IO_FLOOR]
    for where in versions.values():  # each copy writes its numba cache once, untimed
        run_process(replay_cmd(small), where)
        if big is not None:
            run_process(replay_cmd(big), where)
    rows = [(f"replay {n:.0e}", big), ("start-up (1,000 events)", small)]
    for label, src in rows[1:] if big is None else rows:
        cases = {f"{name} default": (replay_cmd(src), where) for name, where in versions.items()}
        if src is small:
            cases["new --metrics none"] = (replay_cmd(src, "--metrics", "none"), versions["new"])
            if args.old:
                cases["old --metrics none"] = (replay_cmd(src, "--metrics", "none"), versions["old"])
        cases["I/O floor"] = ([*floor, str(src), str(out)], None)
        times = {case: [] for case in cases}
        load = [os.getloadavg()[0]]
        for _ in range(args.process_runs):
            for case, (command, where) in cases.items():
                times[case].append(run_process(command, where))
            load.append(os.getloadavg()[0])
        print(
            f"{label}: medians of {args.process_runs} alternating rounds, load average {min(load):.1f}-{max(load):.1f}"
        )
        floor_wall = statistics.median(w for w, _ in times["I/O floor"])
        floor_cpu = statistics.median(c for _, c in times["I/O floor"])
        for case, runs in times.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            events = n if src is big else 1_000
            print(
                f"  {case:<22} wall {wall:6.2f} s ({min(w for w, _ in runs):.2f}-{max(w for w, _ in runs):.2f})"
                f"  cpu {cpu:6.2f} s  {events / wall / 1e6:6.2f} M events/s wall"
                f"  wall / floor {wall / floor_wall:5.2f}  cpu / floor {cpu / floor_cpu:5.2f}",
                flush=True,
            )


# ---------------------------------------------------------------- metric costs


def metric_costs(args, work: Path) -> None:
    import threading

    sys.path.insert(0, str(ROOT / "tests"))
    import naive

    from streamcal import metrics as m

    rng = np.random.default_rng(3)
    n, size = 1_000_000, 100_000
    z = rng.normal(-3.0, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))).astype(np.float64)
    proba, llr = PAVCalibrator(window=CountWindow(WINDOW)).prequential(s, y)
    windows = [(y[i : i + size], proba[i : i + size], llr[i : i + size]) for i in range(0, n, size)]
    eps = 1e-6
    pairs = {
        "brier": (lambda y, p, x: m.brier_score(y, p), lambda y, p, x: naive.naive_replay_brier(y, p)),
        "log_loss": (
            lambda y, p, x: m.log_loss(y, p, eps=eps),
            lambda y, p, x: naive.naive_replay_log_loss(y, p, eps),
        ),
        "cllr": (lambda y, p, x: m.cllr(y, x), lambda y, p, x: naive.naive_replay_cllr(y, x)),
        "min_cllr": (lambda y, p, x: m.min_cllr(y, x), lambda y, p, x: naive.naive_replay_min_cllr(y, x)),
        "ece": (lambda y, p, x: m.ece(y, p), lambda y, p, x: naive.naive_replay_ece(y, p)),
        "calibration_loss": (
            lambda y, p, x: m.calibration_loss(y, p),
            lambda y, p, x: naive.naive_replay_calibration_loss(y, p),
        ),
    }
    before = None
    if args.old:  # min_cllr of that revision's metrics module, on this tree's kernels
        source = subprocess.run(
            ["git", "show", f"{args.old}:streamcal/metrics/_array.py"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        module = types.ModuleType(f"metrics_at_{args.old}")
        exec(compile(source, f"{args.old}:streamcal/metrics/_array.py", "exec"), module.__dict__)
        before = lambda y, p, x: module.min_cllr(y, x)  # noqa: E731
    from streamcal.metrics._array import _min_cllr_unit
    from streamcal.metrics._window import WindowWork, window_metrics

    work = WindowWork()

    def together(y, p, x):  # the six of a window in one call, as the replay computes them
        return window_metrics(y, p, x, list(pairs), eps=eps, work=work)

    def min_cllr_in_replay(y, p, x):  # min_cllr's part of that call: its inputs checked already
        return _min_cllr_unit(y, x, work)

    def each_alone(y, p, x):
        return {name: new(y, p, x) for name, (new, _) in pairs.items()}

    for name, (new, first) in pairs.items():  # same bits, and every path loaded before the timing
        for w in windows:
            assert new(*w) == first(*w)
            assert name != "min_cllr" or before is None or before(*w) == first(*w)
    for w in windows:
        assert together(*w) == each_alone(*w)
        assert min_cllr_in_replay(*w) == pairs["min_cllr"][0](*w)
    clock = time.thread_time if threading.current_thread() is threading.main_thread() else time.process_time
    costs = {name: ([], []) for name in pairs}
    old_costs = []
    joint = ([], [])  # the six computed together, each function alone
    in_replay = []
    for _ in range(args.metric_rounds):
        for fn, bucket in ((each_alone, joint[1]), (together, joint[0]), (min_cllr_in_replay, in_replay)):
            c0 = clock()
            for w in windows:
                fn(*w)
            bucket.append((clock() - c0) / len(windows))
        for name, (new, first) in pairs.items():
            runs = [(first, costs[name][1]), (new, costs[name][0])]
            if name == "min_cllr" and before is not None:
                runs.append((before, old_costs))
            for fn, bucket in runs:
                c0 = clock()
                for w in windows:
                    fn(*w)
                bucket.append((clock() - c0) / len(windows))
    print(
        f"metric costs per window of {size:,} events (CPU of this thread, medians of "
        f"{args.metric_rounds} alternating rounds, load average {os.getloadavg()[0]:.1f}); equal bit for bit"
    )
    total_new = total_first = 0.0
    for name, (new, first) in costs.items():
        a, b = statistics.median(new), statistics.median(first)
        total_new, total_first = total_new + a, total_first + b
        print(
            f"  {name:<18} {a * 1e3:6.2f} ms  (first way {b * 1e3:6.2f} ms)  "
            f"+{a * 100:.2f} s per 1e7 rows (first way +{b * 100:.2f} s)  new / first {a / b:.2f}"
        )
    print(
        f"  {'all six':<18} {total_new * 1e3:6.2f} ms  (first way {total_first * 1e3:6.2f} ms)  new / first {total_new / total_first:.2f}"
    )
    a, b = statistics.median(joint[0]), statistics.median(joint[1])
    print(
        f"  {'six together':<18} {a * 1e3:6.2f} ms  (each function alone {b * 1e3:6.2f} ms)  "
        f"+{a * 100:.2f} s per 1e7 rows (alone +{b * 100:.2f} s)  together / alone {a / b:.2f}"
    )
    a = statistics.median(in_replay)
    print(f"  min_cllr in the six together: {a * 1e3:6.2f} ms  +{a * 100:.2f} s per 1e7 rows")
    if old_costs:
        a, b = statistics.median(costs["min_cllr"][0]), statistics.median(old_costs)
        print(
            f"  min_cllr of {args.old}: {b * 1e3:6.2f} ms (+{b * 100:.2f} s per 1e7 rows); "
            f"this tree's / {args.old}'s {a / b:.2f}"
        )


def main() -> None:
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=float, default=1e7, help="events of the throughput cases (default 1e7)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per throughput case; the best is kept")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed)")
    parser.add_argument("--no-throughput", action="store_true", help="skip the throughput cases")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory cases")
    parser.add_argument("--memory-n", default="1e7,5e7", help="stream lengths of the memory cases")
    parser.add_argument(
        "--memory-methods",
        default="pav;pav,ispline,gev,platt",
        help="method sets of the memory cases, separated by ';'",
    )
    parser.add_argument("--process", action="store_true", help="the whole-process rows (replay of 1e7, start-up)")
    parser.add_argument("--process-n", default="1e7", help="events of the whole-process replay (default 1e7)")
    parser.add_argument("--process-runs", type=int, default=5, help="alternating rounds of the whole-process rows")
    parser.add_argument(
        "--startup-only", action="store_true", help="of the whole-process rows, the start-up alone (no 1e7 file)"
    )
    parser.add_argument(
        "--old", default=None, help="git revision to run side by side in the whole-process rows and for min_cllr"
    )
    parser.add_argument(
        "--metrics-cost", action="store_true", help="each default metric per window against the first way"
    )
    parser.add_argument("--metric-rounds", type=int, default=7, help="alternating rounds of --metrics-cost")
    args = parser.parse_args()
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_replay_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if not args.no_throughput:
            throughput(args, work)
        if not args.no_memory:
            memory(args, work)
        if args.metrics_cost:
            metric_costs(args, work)
        if args.process:
            process_rows(args, work)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
