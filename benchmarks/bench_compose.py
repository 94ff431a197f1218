"""Per-event overhead of CalibratedClassifier over the bare river model.

Baselines, run in this process on the same events:

- bare: ``model.predict_proba_one(x)`` then ``model.learn_one(x, y)`` (a progressive loop);
- by hand: the same loop with the calibrator called by hand in it, as a user would write it
  without the wrapper: the model's probability of ``True`` goes to the calibrator's
  ``predict_proba_one`` and ``learn_one`` as ``{"score": p}``, then the model learns;
- wrapped: the same loop on ``CalibratedClassifier(model, PAVCalibrator())``;
- wrapped, learn only: ``learn_one`` without a prediction first (the wrapper must then score the
  event itself);
- wrapped, the code before (``--old REV``): the same loop on the ``CalibratedClassifier`` of
  ``streamcal/compose.py`` at git revision ``REV`` (read with ``git show``, run on today's
  calibrator), so a change to the wrapper is measured against its previous version in the same
  rounds;
- persistence: ``save`` + ``load`` of the wrapped model (a checkpoint);
- the floor (``--parts``): what the wrapper's protections and the calibrator cost per event on
  their own, in the same rounds: the two lock round trips, the features' finiteness check
  (``math.fsum``), the remembered event's copy and comparison, the calibrator's two packed kernel
  calls on the stream's scores and, for scale, two calls of an empty compiled kernel with the
  same arguments (numba's dispatch alone). Their sum is what any wrapper that keeps these checks
  and calls the calibrator's kernels pays; the rest of the overhead is Python's (the call
  frames, attribute reads, the result dict).

"overhead" is wrapped minus bare: the calibrator's work and the wrapper's own. "wrapper's own" is
wrapped minus by hand: what the wrapper adds per event around the same model and calibrator calls
(its input checks, the score hand-over, the remembered score, its lock).

Times are CPU time of this thread (``time.thread_time``), the best of ``--repeats`` rounds; every
round runs every configuration in turn, so load on the machine hits all alike. numba compile time
(first call of the PAV kernels in this process; they are cached on disk, so this is usually a
cache load) is reported apart from the steady state. Events: Phishing, cycled to ``--events``.

Run: ``PYTHONPATH=. python benchmarks/bench_compose.py [--events 20000] [--repeats 7] [--old REV] [--parts]``
"""

from __future__ import annotations

import argparse
import itertools
import math
import subprocess
import tempfile
import threading
import time
import types
from pathlib import Path

from river import datasets, linear_model, naive_bayes

from streamcal import CalibratedClassifier, PAVCalibrator, persist

clock = time.thread_time  # CPU time: single-threaded code, on a shared machine


def events(n: int) -> list:
    data = list(datasets.Phishing())
    return list(itertools.islice(itertools.cycle(data), n))


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def interleaved(configs: dict, repeats: int) -> dict:
    """Best CPU time of each configuration, running all of them once per round."""
    out = dict.fromkeys(configs, float("inf"))
    for _ in range(repeats):
        for key, fn in configs.items():
            start = clock()
            fn()
            out[key] = min(out[key], clock() - start)
    return out


def progressive(make, xs):
    def run():
        model = make()
        for x, y in xs:
            model.predict_proba_one(x)
            model.learn_one(x, y)

    return run


def learn_only(make, xs):
    def run():
        model = make()
        for x, y in xs:
            model.learn_one(x, y)

    return run


def by_hand(make_model, xs):
    def run():
        model, cal = make_model(), PAVCalibrator()
        for x, y in xs:
            p = model.predict_proba_one(x).get(True, 0.0)
            cal.predict_proba_one({"score": p})
            cal.learn_one({"score": p}, y)
            model.learn_one(x, y)

    return run


def floor_parts(xs) -> dict:
    """Per-event costs of the wrapper's protections and calls, each a loop over the same events."""
    from streamcal._kernels._config import entry_point, jit_noalloc

    model = linear_model.LogisticRegression()
    scores = []
    for x, y in xs:  # the out-of-sample scores the wrapped calibrator sees
        scores.append(model.predict_proba_one(x).get(True, 0.0))
        model.learn_one(x, y)
    events = [(x, p, y) for (x, y), p in zip(xs, scores, strict=True)]
    copies = [(x, x.copy()) for x, _ in xs]
    lock = threading.RLock()
    fsum = math.fsum

    @jit_noalloc(nogil=False)
    def empty_learn(packed, s, y, w, t):
        return s >= 0.0

    @jit_noalloc(nogil=False)
    def empty_proba(packed, s):
        return s

    def locks():
        for _ in events:
            lock.acquire()
            lock.release()
            lock.acquire()
            lock.release()

    def features():
        for x, _, _ in events:
            fsum(x.values())

    def remembered():
        for x, last in copies:
            x.copy()
            last == x  # noqa: B015 (the comparison is what is timed)

    def make_kernels():
        cal = PAVCalibrator()
        cal.learn_one({"score": 0.5}, True)
        cal.predict_proba_one({"score": 0.5})  # binds the compiled entry points
        return cal

    def kernels():
        cal = make_kernels()
        packed, learn, proba = cal._packed, cal._learn_packed, cal._proba_packed
        for _, p, y in events:
            proba(packed, p)
            learn(packed, p, y, 1.0, 0.0)

    def dispatch():
        packed = make_kernels()._packed
        learn = entry_point(empty_learn, packed, 0.5, True, 1.0, 0.0)
        proba = entry_point(empty_proba, packed, 0.5)
        for _, p, y in events:
            proba(packed, p)
            learn(packed, p, y, 1.0, 0.0)

    return {
        "two lock round trips": locks,
        "features' check (math.fsum)": features,
        "remembered event: copy + comparison": remembered,
        "calibrator's two kernel calls": kernels,
        "of which numba's dispatch (empty kernels)": dispatch,
    }


def wrapper_at(rev: str):
    """The ``CalibratedClassifier`` class of ``streamcal/compose.py`` at git revision ``rev``."""
    source = subprocess.run(
        ["git", "show", f"{rev}:streamcal/compose.py"], check=True, capture_output=True, text=True
    ).stdout
    module = types.ModuleType(f"compose_at_{rev}")
    exec(compile(source, f"{rev}:streamcal/compose.py", "exec"), module.__dict__)
    return module.CalibratedClassifier


def main() -> None:
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--old", metavar="REV", help="also time the wrapper of this git revision")
    parser.add_argument("--parts", action="store_true", help="also time the floor's parts (see above)")
    args = parser.parse_args()
    before = wrapper_at(args.old) if args.old else None
    xs = events(args.events)
    n = len(xs)

    start = time.perf_counter()
    cal = PAVCalibrator()
    cal.learn_one({"score": 0.3}, True)
    cal.predict_proba_one({"score": 0.3})
    print(f"numba first call (compile or cache load) of the PAV kernels: {time.perf_counter() - start:.3f} s wall")

    configs = {}
    models = {"LogisticRegression": linear_model.LogisticRegression, "GaussianNB": naive_bayes.GaussianNB}
    for name, make_model in models.items():
        configs[(name, "bare")] = progressive(make_model, xs)
        configs[(name, "by hand")] = by_hand(make_model, xs)
        configs[(name, "wrapped")] = progressive(lambda m=make_model: CalibratedClassifier(m(), PAVCalibrator()), xs)
        configs[(name, "learn only")] = learn_only(lambda m=make_model: CalibratedClassifier(m(), PAVCalibrator()), xs)
        if before is not None:
            configs[(name, "before")] = progressive(lambda m=make_model: before(m(), PAVCalibrator()), xs)
    parts = floor_parts(xs) if args.parts else {}
    configs.update({("part", name): fn for name, fn in parts.items()})
    t = interleaved(configs, args.repeats)
    t = {k: 1e6 * v / n for k, v in t.items()}
    print(f"CPU µs per event, best of {args.repeats} interleaved rounds of {n} events")
    print()
    print("| model | bare | by hand | wrapped | overhead | ratio | wrapper's own | wrapped, learn only |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in models:
        bare, hand, wrapped, only = (t[(name, k)] for k in ("bare", "by hand", "wrapped", "learn only"))
        print(
            f"| {name} | {bare:.2f} | {hand:.2f} | {wrapped:.2f} | {wrapped - bare:.2f} | {wrapped / bare:.2f} | "
            f"{wrapped - hand:.2f} | {only:.2f} |"
        )
    if before is not None:
        print()
        print(f"| model | wrapped, code at {args.old} | its overhead | wrapped, this code | its overhead | ratio |")
        print("|---|---:|---:|---:|---:|---:|")
        for name in models:
            bare, old, wrapped = (t[(name, k)] for k in ("bare", "before", "wrapped"))
            print(
                f"| {name} | {old:.2f} | {old - bare:.2f} | {wrapped:.2f} | {wrapped - bare:.2f} | "
                f"{(wrapped - bare) / (old - bare):.2f} |"
            )
    if parts:
        overhead = t[("LogisticRegression", "wrapped")] - t[("LogisticRegression", "bare")]
        floor = sum(t[("part", name)] for name in parts if not name.startswith("of which"))
        print()
        print("| the floor's parts, LogisticRegression's stream | µs per event | share of the overhead |")
        print("|---|---:|---:|")
        for name in parts:
            print(f"| {name} | {t[('part', name)]:.2f} | {t[('part', name)] / overhead:.0%} |")
        print(f"| sum (without the dispatch, counted in the kernel calls) | {floor:.2f} | {floor / overhead:.0%} |")
        print(f"| the rest: Python's frames, attribute reads, the result dict | {overhead - floor:.2f} | |")

    model = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator())
    for x, y in xs[:2000]:
        model.learn_one(x, y)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkpoint.zip"
        t_save = best(lambda: model.save(path), args.repeats)
        t_load = best(lambda: persist.load(path, allow_pickle=True), args.repeats)
        size = path.stat().st_size
    print()
    print(
        f"checkpoint of the wrapped LogisticRegression + PAVCalibrator (1024 buckets): {size / 1024:.0f} KiB, "
        f"save {1e3 * t_save:.2f} ms, load {1e3 * t_load:.2f} ms"
    )


if __name__ == "__main__":
    main()
