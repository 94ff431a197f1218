"""Per-event overhead of CalibratedClassifier over the bare river model.

Baselines, run in this process on the same events:

- bare: ``model.predict_proba_one(x)`` then ``model.learn_one(x, y)`` (a progressive loop);
- wrapped: the same loop on ``CalibratedClassifier(model, PAVCalibrator())``;
- wrapped, learn only: ``learn_one`` without a prediction first (the wrapper must then score the
  event itself);
- the calibrator alone: ``predict_proba_one`` + ``learn_one`` on a one-score dict;
- persistence: ``save`` + ``load`` of the wrapped model (a checkpoint).

numba compile time (first call of the PAV kernels in this process; they are cached on disk, so
this is usually a cache load) is reported apart from the steady state. Times are the best of
``--repeats`` runs over ``--events`` events (Phishing, repeated).

Run: ``PYTHONPATH=. python benchmarks/bench_compose.py [--events 20000] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from river import datasets, linear_model, naive_bayes

from streamcal import CalibratedClassifier, PAVCalibrator, persist


def events(n: int) -> list:
    data = list(datasets.Phishing())
    return list(itertools.islice(itertools.cycle(data), n))


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def interleaved(configs: dict, repeats: int) -> dict:
    """Best time of each configuration, running all of them once per repeat."""
    out = dict.fromkeys(configs, float("inf"))
    for _ in range(repeats):
        for key, fn in configs.items():
            start = time.perf_counter()
            fn()
            out[key] = min(out[key], time.perf_counter() - start)
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


def calibrator_alone(xs):
    scores = [({"score": (i % 997) / 997.0}, y) for i, (_, y) in enumerate(xs)]

    def run():
        cal = PAVCalibrator()
        for s, y in scores:
            cal.predict_proba_one(s)
            cal.learn_one(s, y)

    return run


def main() -> None:
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    xs = events(args.events)
    n = len(xs)

    start = time.perf_counter()
    cal = PAVCalibrator()
    cal.learn_one({"score": 0.3}, True)
    cal.predict_proba_one({"score": 0.3})
    print(f"numba first call (compile or cache load) of the PAV kernels: {time.perf_counter() - start:.3f} s")

    configs = {"calibrator": calibrator_alone(xs)}
    models = {"LogisticRegression": linear_model.LogisticRegression, "GaussianNB": naive_bayes.GaussianNB}
    for name, make_model in models.items():
        configs[(name, "bare")] = progressive(make_model, xs)
        configs[(name, "wrapped")] = progressive(lambda m=make_model: CalibratedClassifier(m(), PAVCalibrator()), xs)
        configs[(name, "learn only")] = learn_only(lambda m=make_model: CalibratedClassifier(m(), PAVCalibrator()), xs)
    t = interleaved(configs, args.repeats)  # every repeat runs every configuration: load noise hits all alike
    t = {k: v / n for k, v in t.items()}
    print(f"PAVCalibrator alone, predict + learn: {1e6 * t['calibrator']:.2f} µs/event")
    print()
    print("| model | bare µs/event | wrapped µs/event | overhead µs | ratio | wrapped, learn only µs/event |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in models:
        bare, wrapped, only = t[(name, "bare")], t[(name, "wrapped")], t[(name, "learn only")]
        print(
            f"| {name} | {1e6 * bare:.2f} | {1e6 * wrapped:.2f} | {1e6 * (wrapped - bare):.2f} | "
            f"{wrapped / bare:.2f} | {1e6 * only:.2f} |"
        )

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
