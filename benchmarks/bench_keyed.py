"""Keyed calibration: ``KeyedCalibrator.prequential`` throughput, peak memory and state size.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_keyed.py                      # full size (2e7 events, 1e5 keys)
    PYTHONPATH=. python benchmarks/bench_keyed.py --events 1e6         # a smaller stream
    PYTHONPATH=. python benchmarks/bench_keyed.py --quick              # 2e5 events, 1e4 keys, one round
    PYTHONPATH=. python benchmarks/bench_keyed.py --events 2e6 --no-memory --strengths auto --old main

``--old REV``: this working tree against git revision ``REV`` (its ``streamcal`` exported with ``git
archive``), in alternating child processes (old, new, new, old, ...; ``--rounds`` children of each
after one untimed child per version that writes numba's cache), each child generating the stream,
loading the kernels on a short call, then timing the keyed ``prequential`` once per case (CPU
time); the table gives each version's median events/s, the ratio new / old of the medians and
whether the two versions' outputs (``proba`` and ``llr``, hashed) are the same bits.

Stream (seeded, generated in this process): ``--keys`` keys with Zipf(1.1) traffic (key of rank
``r`` drawn with probability proportional to ``r ** -1.1``, ranks shuffled over the key ids);
click-like scores ``s = expit(z)``, ``z ~ N(-3, 1.5)``; labels drawn from a per-key miscalibrated
truth ``expit(a_k z + b_k)``, ``a_k = exp(N(0, 0.2))``, ``b_k ~ N(0, 0.5)``.

Calibrators: ``KeyedCalibrator(PAVCalibrator(window=W), prior_strength=m)`` with the default 1,024
logit buckets, for two windows per key, ``Decay(half_life=1e4)`` (by the key's events) and
``CountWindow(1e4)``, and two strengths, ``"auto"`` (pooled, the default) and ``0`` (independent
keys, over ``PAVCalibrator(window=W, prior=None)``: sparse rows; the default template's score prior
would keep a dense clone per key at strength 0). Baseline: one unkeyed ``PAVCalibrator(window=W)`` on the same events, timed in the same
process in alternating rounds (keyed, unkeyed, keyed, ...); CPU time (``process_time``), best
round of each. The first call of each (numba compile or cache load) is timed apart.

Memory, one fresh subprocess per case (``--no-memory`` skips it): the peak resident set size
(``VmHWM``) and the resident set held at the end (``VmRSS``) of a process that generates the stream and runs the keyed
``prequential`` over it, against the same process generating the stream alone; and the keyed
state's bytes (the arrays of ``KeyedCalibrator.__getstate__()``, the global calibrator's included)
after a tenth of the events and after all of them, beside what dense rows would take (keys seen ×
buckets × 3 float64 arrays). The state grows with the evidence the keys hold, not with keys ×
buckets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compare import export_revision

from streamcal import KeyedCalibrator, PAVCalibrator, use_compiled_kernels
from streamcal.windows import CountWindow, Decay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW_EVENTS = 10_000
WINDOWS = {
    "decay": lambda: Decay(half_life=float(WINDOW_EVENTS), by="events"),
    "count": lambda: CountWindow(WINDOW_EVENTS),
}
STRENGTHS = {"auto": "auto", "0": 0.0}


def keyed_stream(n: int, n_keys: int, seed: int = 0):
    """``(keys, scores, labels)``: Zipf(1.1) keys, click-like scores, per-key miscalibrated labels."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, n_keys + 1, dtype=np.float64) ** -1.1
    cdf = np.cumsum(p / p.sum())
    cdf[-1] = 1.0
    ids = rng.permutation(n_keys).astype(np.int64)
    keys = ids[np.searchsorted(cdf, rng.uniform(size=n), side="right")]
    slope = np.exp(rng.normal(0.0, 0.2, size=n_keys))
    offset = rng.normal(0.0, 0.5, size=n_keys)
    z = rng.normal(-3.0, 1.5, size=n)
    scores = 1.0 / (1.0 + np.exp(-z))
    truth = 1.0 / (1.0 + np.exp(-(slope[keys] * z + offset[keys])))
    labels = rng.uniform(size=n) < truth
    return keys, scores, labels


def make_keyed(window: str, strength: str) -> KeyedCalibrator:
    # independent keys in sparse rows: a template without the score prior
    template = PAVCalibrator(window=WINDOWS[window](), **({"prior": None} if strength == "0" else {}))
    return KeyedCalibrator(template, prior_strength=STRENGTHS[strength])


def make_unkeyed(window: str) -> PAVCalibrator:
    return PAVCalibrator(window=WINDOWS[window]())


def state_bytes(value) -> int:
    """Bytes of the numpy arrays in a saved state (dicts, lists and nested calibrators walked)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(state_bytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(state_bytes(v) for v in value)
    if hasattr(value, "__getstate__") and hasattr(value, "__dict__"):
        state = value.__getstate__()
        return state_bytes(state) if isinstance(state, dict) else 0
    return 0


def cpu(fn, *args) -> float:
    start = time.process_time()
    fn(*args)
    return time.process_time() - start


def first_calls(window: str) -> tuple[float, float]:
    """CPU seconds of the first keyed and unkeyed ``prequential`` (compile or cache load)."""
    use_compiled_kernels()  # a short first call would otherwise run the interpreted tier
    k, s, y = keyed_stream(200, 10, seed=1)
    return (cpu(make_keyed(window, "auto").prequential, k, s, y), cpu(make_unkeyed(window).prequential, s, y))


def bench_speed(keys, scores, labels, window: str, strengths, rounds: int) -> dict:
    """Best-of-``rounds`` CPU seconds of each keyed strength and of the unkeyed baseline, alternating."""
    times = {name: [] for name in (*strengths, "unkeyed")}
    for _ in range(rounds):
        for name in strengths:
            times[name].append(cpu(make_keyed(window, name).prequential, keys, scores, labels))
            times["unkeyed"].append(cpu(make_unkeyed(window).prequential, scores, labels))
    return {name: min(ts) for name, ts in times.items()}


# key sizes for ``--by-size``: a key's events in the whole stream
SIZE_CLASSES = (("< 1e3", 0, 1_000), ("1e3 to 1e4", 1_000, 10_000), (">= 1e4", 10_000, np.inf))


def bench_by_size(keys, scores, labels, window: str) -> list[tuple]:
    """CPU nanoseconds per event of the pooled keyed ``prequential`` on each size class's events
    alone (each run over its own events, its own global map), then on all of them: where the cost
    per event lies between light and heavy keys. Beside it, per event, the pooled keys' ``update``
    on the same events (learning alone: what ``prequential`` adds is the keys' predictions) and
    one unkeyed ``PAVCalibrator``'s ``prequential`` on them."""
    sizes = np.bincount(keys)[keys]
    rows = []
    for name, lo, hi in (*SIZE_CLASSES, ("all", 0, np.inf)):
        m = (sizes >= lo) & (sizes < hi)
        k, s, y = keys[m], scores[m], labels[m]
        per = 1e9 / max(int(m.sum()), 1)
        seconds = cpu(make_keyed(window, "auto").prequential, k, s, y)
        learning = cpu(make_keyed(window, "auto").update, k, s, y)
        unkeyed = cpu(make_unkeyed(window).prequential, s, y)
        rows.append((name, int(m.sum()), int(np.unique(k).size), seconds * per, learning * per, unkeyed * per))
    return rows


def bench_dense_bound(keys, scores, labels, window: str, min_events: int = 10_000) -> tuple:
    """What a dense row per heavy key could cost at best (the "adaptive row form" of issue #22): the
    events of the keys with at least ``min_events`` events in the stream, CPU nanoseconds per event of
    the pooled keyed ``prequential`` on them, of one unkeyed ``PAVCalibrator(window=W)`` per key (the
    dense incremental PAV with its score prior as the prior row; each key's events in one call, in
    stream order, so no interleaving) and of one unkeyed calibrator on all of them (the global map a
    keyed event also pays). A bound, not the same outputs: a dense row sums the prior per bucket where
    the keys' sweep reads a run of the prior whole."""
    m = np.bincount(keys)[keys] >= min_events
    k, s, y = keys[m], scores[m], labels[m]
    per = 1e9 / max(int(m.sum()), 1)
    order = np.argsort(k, kind="stable")
    cuts = np.flatnonzero(np.diff(k[order])) + 1
    groups = np.split(order, cuts) if order.size else []

    def per_key():
        for g in groups:
            make_unkeyed(window).prequential(s[g], y[g])

    keyed = cpu(make_keyed(window, "auto").prequential, k, s, y)
    dense = cpu(per_key)
    unkeyed = cpu(make_unkeyed(window).prequential, s, y)
    return int(m.sum()), len(groups), keyed * per, dense * per, unkeyed * per


def rss(field: str) -> int:
    """``VmRSS`` (held now) or ``VmHWM`` (peak) of this process, in bytes, from ``/proc`` (Linux; 0 elsewhere).

    ``VmHWM`` rather than ``getrusage``'s ``ru_maxrss``: a child started by ``fork`` and ``exec``
    keeps the parent's ``ru_maxrss`` at the fork, so it would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory_child(n: int, n_keys: int, window: str, strength: str) -> dict:
    """In a fresh process: peak RSS, RSS held, and the keyed state's bytes after a tenth and all of the events."""
    keys, scores, labels = keyed_stream(n, n_keys)
    first_calls(window if window != "none" else "count")  # the kernels loaded before the baseline
    out = {"rss_data": rss("VmHWM"), "rss_held_data": rss("VmRSS")}
    if window == "none":
        return out
    cal = make_keyed(window, strength)
    cut = n // 10
    cal.prequential(keys[:cut], scores[:cut], labels[:cut])
    out["tenth"] = {"events": cut, "keys": cal.n_keys, "bytes": state_bytes(cal)}
    cal.prequential(keys[cut:], scores[cut:], labels[cut:])
    out["all"] = {"events": n, "keys": cal.n_keys, "bytes": state_bytes(cal)}
    out["rss"] = rss("VmHWM")
    out["rss_held"] = rss("VmRSS")
    out["strength_used"] = cal.strength
    return out


def run_child(n: int, n_keys: int, window: str, strength: str) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        window,
        strength,
        "--events",
        str(n),
        "--keys",
        str(n_keys),
    ]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_evictions(n: int, n_keys: int, rounds: int) -> None:
    """The pooled count-window keys with ``max_keys`` at a tenth of the keys against the same keys
    without a bound, alternating in this process: CPU seconds, and the difference per eviction."""
    from streamcal import KeyedCalibrator, PAVCalibrator

    keys, scores, labels = keyed_stream(n, n_keys)
    bound = max(1, n_keys // 10)
    best = {None: np.inf, bound: np.inf}
    evictions = 0
    for _ in range(rounds):
        for max_keys in best:
            cal = KeyedCalibrator(PAVCalibrator(window=WINDOWS["count"]()), max_keys=max_keys)
            cal.prequential(keys[:1000], scores[:1000], labels[:1000])  # kernels loaded
            start = time.process_time()
            cal.prequential(keys[1000:], scores[1000:], labels[1000:])
            best[max_keys] = min(best[max_keys], time.process_time() - start)
            evictions = max(evictions, cal.evictions)
    extra = best[bound] - best[None]
    print(
        f"max_keys={bound:,}: {best[bound]:.2f} s CPU, {evictions:,} evictions; no bound: {best[None]:.2f} s "
        f"({best[bound] / best[None]:.2f}x); {extra / max(evictions, 1) * 1e6:,.1f} us more per eviction (best of {rounds})"
    )


def ab_child(n: int, n_keys: int, windows: list, strengths: list) -> dict:
    """In a child process of ``--old``: CPU seconds and an outputs' digest of the keyed ``prequential``
    per case, and where ``streamcal`` was imported from."""
    import streamcal

    keys, scores, labels = keyed_stream(n, n_keys)
    out = {"streamcal": streamcal.__file__, "cases": {}}
    for window in windows:
        first_calls(window)
        for name in strengths:
            cal = make_keyed(window, name)
            start = time.process_time()
            p, llr = cal.prequential(keys, scores, labels)
            seconds = time.process_time() - start
            digest = hashlib.sha256(np.ascontiguousarray(p).tobytes() + np.ascontiguousarray(llr).tobytes())
            out["cases"][f"{window}, prior_strength={name}"] = {"seconds": seconds, "digest": digest.hexdigest()}
    return out


def run_ab_child(version: str, n: int, n_keys: int, windows: list, strengths: list) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = version
    cmd = [sys.executable, os.path.abspath(__file__), "--ab-child", "--events", str(n), "--keys", str(n_keys),
           "--windows", ",".join(windows), "--strengths", ",".join(strengths)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=version, env=env, check=False)
    if done.returncode:
        msg = f"the child for {version} failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        raise SystemExit(msg)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(result["streamcal"]).resolve().is_relative_to(Path(version).resolve()):
        msg = f"the child for {version} imported {result['streamcal']}, not that version"
        raise SystemExit(msg)
    return result


def compare_old(rev: str, n: int, n_keys: int, windows: list, strengths: list, rounds: int) -> None:
    """This working tree against revision ``rev`` in alternating child processes (see ``--old``)."""
    with tempfile.TemporaryDirectory(prefix="bench-keyed-") as tmp:
        versions = {"old": str(export_revision(rev, Path(tmp))), "new": ROOT}
        for version in versions.values():  # numba's cache of each version, untimed
            run_ab_child(version, 2_000, 50, windows, strengths)
        runs = {"old": [], "new": []}
        for i in range(rounds):
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                runs[name].append(run_ab_child(versions[name], n, n_keys, windows, strengths)["cases"])
    print(f"--old {rev}: {rounds} children per version, alternating; median events/s (CPU time)")
    for case in runs["new"][0]:
        rate = {name: statistics.median(n / r[case]["seconds"] for r in rs) for name, rs in runs.items()}
        same = len({r[case]["digest"] for rs in runs.values() for r in rs}) == 1
        print(f"  [{case}] new {rate['new']:,.0f}, old {rate['old']:,.0f}: {rate['new'] / rate['old']:.3f}x; "
              f"outputs {'the same bits' if same else 'DIFFER'}")


def mb(x: float) -> str:
    return f"{x / 1e6:,.1f} MB"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=float, default=2e7, help="events in the stream (default 2e7)")
    parser.add_argument("--keys", type=float, default=1e5, help="keys (default 1e5)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed rounds (default 3)")
    parser.add_argument("--windows", default="decay,count", help="windows per key: decay, count (default both)")
    parser.add_argument("--strengths", default="auto,0", help="prior strengths: auto, 0 (default both)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    parser.add_argument("--no-speed", action="store_true", help="skip the timed rounds")
    parser.add_argument("--quick", action="store_true", help="--events 2e5 --keys 1e4 --rounds 1")
    parser.add_argument(
        "--by-size", action="store_true", help="also time the pooled keys by key size (events per key in the stream)"
    )
    parser.add_argument(
        "--dense-bound",
        action="store_true",
        help="also time the heavy keys' events (>= 1e4 each) keyed against one unkeyed PAVCalibrator per key",
    )
    parser.add_argument(
        "--evictions",
        action="store_true",
        help="only: the pooled count-window keys with max_keys at a tenth of the keys against no bound (CPU per eviction)",
    )
    parser.add_argument("--old", metavar="REV", help="only: this tree against git revision REV, alternating processes")
    parser.add_argument("--child", nargs=2, metavar=("WINDOW", "STRENGTH"), help=argparse.SUPPRESS)
    parser.add_argument("--ab-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.keys, args.rounds = 2e5, 1e4, 1
    n, n_keys = int(args.events), int(args.keys)
    if args.child:
        print(json.dumps(memory_child(n, n_keys, *args.child)))
        return
    windows = [w for w in args.windows.split(",") if w]
    strengths = [s for s in args.strengths.split(",") if s]
    for name in (*windows, *strengths):
        if name not in WINDOWS and name not in STRENGTHS:
            parser.error(f"unknown window or strength {name!r}")
    if args.ab_child:
        print(json.dumps(ab_child(n, n_keys, windows, strengths)))
        return
    if args.old:
        compare_old(args.old, n, n_keys, windows, strengths, args.rounds)
        return

    print(f"{n:,} events, {n_keys:,} keys (Zipf 1.1), 1024 logit buckets, windows of {WINDOW_EVENTS:,} per key")
    if args.evictions:
        bench_evictions(n, n_keys, args.rounds)
        return
    if not args.no_speed:
        keys, scores, labels = keyed_stream(n, n_keys)
        print(f"keys seen: {np.unique(keys).size:,}; events of the busiest key: {np.bincount(keys).max():,}")
        for window in windows:
            k_first, u_first = first_calls(window)
            print(
                f"\n[{window} window] first call (compile or cache load): keyed {k_first:.2f} s, "
                f"unkeyed {u_first:.2f} s CPU"
            )
            best = bench_speed(keys, scores, labels, window, strengths, args.rounds)
            unkeyed = n / best["unkeyed"]
            print(
                f"  unkeyed PAVCalibrator prequential: {unkeyed:,.0f} events/s (best of {args.rounds * len(strengths)})"
            )
            for name in strengths:
                rate = n / best[name]
                print(
                    f"  keyed prior_strength={name}: {rate:,.0f} events/s, {rate / unkeyed:.3f}x unkeyed "
                    f"(best of {args.rounds})"
                )
            if args.by_size:
                print("  pooled keys by size (events per key in the stream), each class's events alone:")
                for name, events, n_class_keys, ns, learn_ns, unkeyed_ns in bench_by_size(keys, scores, labels, window):
                    print(
                        f"    {name:>10}: {events:>11,} events of {n_class_keys:>7,} keys, {ns:,.0f} ns per event "
                        f"(update alone {learn_ns:,.0f} ns, unkeyed PAV {unkeyed_ns:,.0f} ns)"
                    )
            if args.dense_bound:
                events, n_heavy, ns, dense_ns, unkeyed_ns = bench_dense_bound(keys, scores, labels, window)
                print(
                    f"  heavy keys (>= 1e4 events): {events:,} events of {n_heavy:,} keys, keyed {ns:,.0f} ns per "
                    f"event; one unkeyed PAV per key {dense_ns:,.0f} ns; one unkeyed PAV on them all {unkeyed_ns:,.0f} ns"
                )
        del keys, scores, labels
    if not args.no_memory:
        alone = run_child(n, n_keys, "none", "auto")
        base = alone["rss_data"]
        print(
            f"\nmemory (fresh process per case); the stream alone: peak RSS {mb(base)}, "
            f"held after generating it and loading the kernels {mb(alone['rss_held_data'])}"
        )
        for window in windows:
            for name in strengths:
                r = run_child(n, n_keys, window, name)
                parts = []
                for part in ("tenth", "all"):
                    p = r[part]
                    dense = p["keys"] * 1024 * 3 * 8
                    parts.append(
                        f"after {p['events']:,} events: {p['keys']:,} keys, state {mb(p['bytes'])} "
                        f"({p['bytes'] / p['events']:.1f} B/event; dense rows {mb(dense)})"
                    )
                held = r["rss_held"] - r["rss_held_data"]
                print(
                    f"  [{window}, prior_strength={name}] peak RSS {mb(r['rss'])} "
                    f"(+{mb(r['rss'] - base)} over the stream alone's peak; RSS held after the run "
                    f"+{mb(held)} over the stream's); m used {r['strength_used']:.3g}"
                )
                for line in parts:
                    print(f"      {line}")


if __name__ == "__main__":
    main()
