"""Keyed calibration's river face: microseconds per ``learn_one``, ``predict_proba_one`` and
``predict_llr_one`` of ``KeyedCalibrator``, and per event of the prequential loop.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_keyed_river.py                   # this tree alone
    PYTHONPATH=. python benchmarks/bench_keyed_river.py --old main        # against revision main
    PYTHONPATH=. python benchmarks/bench_keyed_river.py --events 5000 --rounds 1 --old main   # quicker
    PYTHONPATH=. python benchmarks/bench_keyed_river.py --window time --old main   # a time window

Stream (seeded): ``--events`` events over ``--keys`` keys (each case's key count; default 100 and
10,000) drawn with Zipf(1.1) traffic over the key ids, as strings; click-like scores
``s = expit(z)``, ``z ~ N(-3, 1.5)``; labels drawn from ``expit(z + b_k)``, ``b_k ~ N(0, 0.5)``.
Each ``x`` is ``{"key": key, "score": s}``, each label a bool. Event times: one per time unit on
average (exponential gaps, the timed stream after the warm-up's), passed to ``learn_one`` as ``t``
(a float) under a window with times.

``--window``: the template's window: ``default`` (``PAVCalibrator()``'s), ``time``
(``TimeWindow(10_000.0)``: about 10,000 events), ``decay-time`` (``Decay(half_life=10_000.0,
by="time")``). ``--max-keys N``: at most ``N`` keys keep a state (the least recently updated is
evicted when a new one arrives).

Calibrator: ``KeyedCalibrator(PAVCalibrator(window=...))`` (``prior_strength="auto"``),
first warmed through the prequential loop (``predict_proba_one`` then ``learn_one``) on
``--warm`` events of the same traffic, so that the kernels are loaded and the keys hold state.
Then, each timed on the stream (CPU time, ``process_time``): ``learn_one`` alone, ``predict_proba_one``
alone, ``predict_llr_one`` alone, and the prequential loop (``predict_proba_one`` then ``learn_one``
per event), each on a fresh copy of the warmed calibrator. Reference in the same process: an
unkeyed ``PAVCalibrator`` river face (the same window) on the same scores and times,
``x = {"score": s}``.

``--old REV``: this working tree against git revision ``REV`` (its ``streamcal`` exported with ``git
archive``), in alternating child processes (old, new, new, old, ...; ``--rounds`` children of
each, after one untimed child per version that writes numba's cache); the table gives each
version's median microseconds per call, the ratio old / new (the speed-up), and whether the two
versions' outputs (the prequential loop's probabilities and the LLRs, hashed) are the same bits.
"""

from __future__ import annotations

import argparse
import copy
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ("learn_one", "predict_proba_one", "predict_llr_one", "prequential")
WINDOWS = ("default", "time", "decay-time")


def template(window: str):
    """The template calibrator of ``--window``."""
    from streamcal import PAVCalibrator
    from streamcal.windows import Decay, TimeWindow

    if window == "time":
        return PAVCalibrator(window=TimeWindow(10_000.0))
    if window == "decay-time":
        return PAVCalibrator(window=Decay(half_life=10_000.0, by="time"))
    return PAVCalibrator()


def keyed_stream(n: int, n_keys: int, seed: int, start: float = 0.0) -> tuple[list, list, list]:
    """``n`` events' ``x`` dicts, bool labels and times (from ``start``) over ``n_keys`` string keys
    (see the module's notes)."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, n_keys + 1, dtype=np.float64) ** -1.1
    ids = rng.permutation(n_keys)
    keys = ids[rng.choice(n_keys, size=n, p=ranks / ranks.sum())]
    z = rng.normal(-3.0, 1.5, size=n)
    shift = rng.normal(0.0, 0.5, size=n_keys)
    truth = 1.0 / (1.0 + np.exp(-(z + shift[keys])))
    labels = (rng.uniform(size=n) < truth).tolist()
    scores = (1.0 / (1.0 + np.exp(-z))).tolist()
    xs = [{"key": f"k{k}", "score": s} for k, s in zip(keys.tolist(), scores, strict=True)]
    times = (start + np.cumsum(rng.exponential(1.0, size=n))).tolist()
    return xs, labels, times


def timed(op: str, cal, xs: list, ys: list, ts: list | None = None) -> tuple[float, list]:
    """CPU seconds of ``op`` over the events (learned at times ``ts``, None: none given), and
    what it returned (the predictions)."""
    out = []
    if op == "learn_one":
        learn = cal.learn_one
        if ts is not None:
            t = time.process_time()
            for x, y, at in zip(xs, ys, ts, strict=True):
                learn(x, y, 1.0, at)
            return time.process_time() - t, out
        t = time.process_time()
        for x, y in zip(xs, ys, strict=True):
            learn(x, y)
        return time.process_time() - t, out
    if op == "predict_proba_one":
        proba = cal.predict_proba_one
        t = time.process_time()
        out = [proba(x)[True] for x in xs]
        return time.process_time() - t, out
    if op == "predict_llr_one":
        llr = cal.predict_llr_one
        t = time.process_time()
        out = [llr(x) for x in xs]
        return time.process_time() - t, out
    proba, learn = cal.predict_proba_one, cal.learn_one
    if ts is not None:
        t = time.process_time()
        for x, y, at in zip(xs, ys, ts, strict=True):
            out.append(proba(x)[True])
            learn(x, y, 1.0, at)
        return time.process_time() - t, out
    t = time.process_time()
    for x, y in zip(xs, ys, strict=True):
        out.append(proba(x)[True])
        learn(x, y)
    return time.process_time() - t, out


def measure(n: int, n_keys: int, warm: int, window: str = "default", max_keys: int | None = None) -> dict:
    """Microseconds per call of each river-face operation, the unkeyed reference's, and a digest
    of the outputs."""
    from streamcal import KeyedCalibrator

    wx, wy, wt = keyed_stream(warm, n_keys, seed=1)
    xs, ys, ts = keyed_stream(n, n_keys, seed=2, start=wt[-1] if wt else 0.0)
    if not template(window).window_histogram.uses_times:
        wt = ts = None
    warmed = KeyedCalibrator(template(window), max_keys=max_keys)
    timed("prequential", warmed, wx, wy, wt)
    digest = hashlib.sha256()
    result = {}
    for op in OPS:
        seconds, out = timed(op, copy.deepcopy(warmed), xs, ys, ts)
        result[op] = 1e6 * seconds / n
        digest.update(np.asarray(out, dtype=np.float64).tobytes())
    ref = template(window)
    timed("prequential", ref, [{"score": x["score"]} for x in wx], wy, wt)
    plain = [{"score": x["score"]} for x in xs]
    for op in ("learn_one", "predict_proba_one", "prequential"):
        seconds, _ = timed(op, copy.deepcopy(ref), plain, ys, ts)
        result["unkeyed " + op] = 1e6 * seconds / n
    result["digest"] = digest.hexdigest()[:16]
    result["evictions"] = warmed.evictions
    return result


def child(args) -> None:
    import streamcal

    out = {str(k): measure(args.events, k, args.warm, args.window, args.max_keys) for k in args.keys}
    out["package"] = os.path.dirname(streamcal.__file__)
    print(json.dumps(out))


def run_child(version: str, args) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = version
    env["STREAMCAL_INTERPRETED_EVENTS"] = "0"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--events", str(args.events), "--warm",
           str(args.warm), "--window", args.window, "--keys", *map(str, args.keys)]
    if args.max_keys is not None:
        cmd += ["--max-keys", str(args.max_keys)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=version, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"child failed ({version}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare_old(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        versions = {"old": str(export_revision(args.old, Path(tmp))), "new": ROOT}
        for name in versions:  # untimed: numba's cache
            run_child(versions[name], args)
        runs = {"old": [], "new": []}
        for i in range(args.rounds):
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                run = run_child(versions[name], args)
                if not run.pop("package").startswith(versions[name]):
                    raise SystemExit(f"the {name} child imported streamcal from elsewhere than {versions[name]}")
                runs[name].append(run)
    print(f"--old {args.old}: {args.rounds} children per version, alternating; median us per call (CPU time), "
          f"{args.events:,} events after {args.warm:,} warm-up events; window {args.window}, max_keys {args.max_keys}")
    for keys in map(str, args.keys):
        same = {r[keys]["digest"] for r in runs["old"] + runs["new"]}
        print(f"  [{keys} keys] outputs {'the same bits' if len(same) == 1 else 'DIFFER: ' + ', '.join(same)}; "
              f"{runs['new'][0][keys]['evictions']:,} evictions in the warm-up")
        for op in OPS:
            old = statistics.median(r[keys][op] for r in runs["old"])
            new = statistics.median(r[keys][op] for r in runs["new"])
            print(f"    {op:<18} new {new:8.2f} us, old {old:8.2f} us: {old / new:6.2f}x faster")
        for op in ("learn_one", "predict_proba_one", "prequential"):
            ref = statistics.median(r[keys]["unkeyed " + op] for r in runs["new"])
            print(f"    unkeyed PAVCalibrator {op:<18} {ref:8.2f} us (new tree's processes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="timed events per operation")
    parser.add_argument("--warm", type=int, default=20_000, help="warm-up events (prequential loop)")
    parser.add_argument("--keys", type=int, nargs="+", default=[100, 10_000], help="key counts, one case each")
    parser.add_argument("--window", choices=WINDOWS, default="default", help="the template's window")
    parser.add_argument("--max-keys", type=int, default=None, help="KeyedCalibrator's max_keys")
    parser.add_argument("--rounds", type=int, default=3, help="--old: timed children per version")
    parser.add_argument("--old", metavar="REV", help="this tree against git revision REV, alternating processes")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.old:
        compare_old(args)
        return
    from streamcal import use_compiled_kernels

    use_compiled_kernels()
    for keys in args.keys:
        r = measure(args.events, keys, args.warm, args.window, args.max_keys)
        print(f"[{keys} keys, window {args.window}, max_keys {args.max_keys}] {args.events:,} events after "
              f"{args.warm:,}; us per call (CPU time); {r['evictions']:,} evictions in the warm-up; digest {r['digest']}")
        for op in OPS:
            print(f"    {op:<18} {r[op]:8.2f} us")
        for op in ("learn_one", "predict_proba_one", "prequential"):
            print(f"    unkeyed PAVCalibrator {op:<18} {r['unkeyed ' + op]:8.2f} us")


if __name__ == "__main__":
    main()
