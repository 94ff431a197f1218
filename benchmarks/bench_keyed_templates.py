"""Keyed calibration over templates other than a fixed-edge PAV: throughput against the unkeyed
template, and memory per key.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_keyed_templates.py                 # 20,000 events, 200 keys
    PYTHONPATH=. python benchmarks/bench_keyed_templates.py --events 5000 --rounds 1   # a quick look
    PYTHONPATH=. python benchmarks/bench_keyed_templates.py --events 2e5 --only Venn PAV   # some templates

Stream (seeded, generated in this process): ``--keys`` keys with Zipf(1.1) traffic (key of rank
``r`` drawn with probability proportional to ``r ** -1.1``); click-like scores ``s = expit(z)``,
``z ~ N(-3, 1.5)``; labels from a per-key miscalibrated truth ``expit(a_k z + b_k)``,
``a_k = exp(N(0, 0.2))``, ``b_k ~ N(0, 0.5)`` (the stream of ``bench_keyed.py``).

Throughput: for each template, ``KeyedCalibrator(template, prior_strength=m).prequential`` over the
stream (``m = "auto"`` for the templates that pool, 0 for the others) against one unkeyed clone of
the template's ``prequential`` on the same events, timed in the same process in alternating rounds
(keyed, unkeyed, keyed, ...); CPU time (``process_time``), best round of each. The kernels run compiled
(``use_compiled_kernels()``), and a first call on 500 events compiles them before any round. The ratio is keyed events/s over unkeyed
events/s.

Memory per key: the Python heap a keyed calibrator holds (``tracemalloc``) after learning the
stream, minus what one holding a single key holds, divided by the keys; and its saved state's
bytes (``streamcal.persist.to_bytes``) per key.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from streamcal import (
    GEVCalibrator,
    ISplineCalibrator,
    KeyedCalibrator,
    PAVCalibrator,
    PlattCalibrator,
    VennAbersCalibrator,
    use_compiled_kernels,
)
from streamcal.persist import to_bytes


def make_stream(n: int, n_keys: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    weights = np.arange(1, n_keys + 1, dtype=np.float64) ** -1.1
    keys = rng.permutation(n_keys)[rng.choice(n_keys, size=n, p=weights / weights.sum())]
    z = rng.normal(-3.0, 1.5, size=n)
    a = np.exp(rng.normal(0.0, 0.2, size=n_keys))
    b = rng.normal(0.0, 0.5, size=n_keys)
    truth = 1.0 / (1.0 + np.exp(-(a[keys] * z + b[keys])))
    labels = rng.uniform(size=n) < truth
    return keys.astype(np.int64), 1.0 / (1.0 + np.exp(-z)), labels


TEMPLATES = {
    "ISplineCalibrator()": (ISplineCalibrator, {}, "auto"),
    "ISplineCalibrator(refit_every=500)": (ISplineCalibrator, {"refit_every": 500}, "auto"),
    "PlattCalibrator()": (PlattCalibrator, {}, "auto"),
    "GEVCalibrator()": (GEVCalibrator, {}, "auto"),
    "VennAbersCalibrator()": (VennAbersCalibrator, {}, 0),
    'PAVCalibrator(buckets="quantile:64")': (PAVCalibrator, {"buckets": "quantile:64"}, 0),
}


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def throughput(name: str, keys, s, y, rounds: int) -> dict:
    cls, params, strength = TEMPLATES[name]
    KeyedCalibrator(cls(**params), prior_strength=strength).prequential(keys[:500], s[:500], y[:500])
    cls(**params).prequential(s[:500], y[:500])
    keyed, alone = [], []
    for _ in range(rounds):
        keyed.append(cpu(lambda: KeyedCalibrator(cls(**params), prior_strength=strength).prequential(keys, s, y)))
        alone.append(cpu(lambda: cls(**params).prequential(s, y)))
    n = s.size
    return {"keyed": n / min(keyed), "unkeyed": n / min(alone), "strength": strength}


def memory(name: str, keys, s, y) -> tuple[float, float]:
    cls, params, strength = TEMPLATES[name]
    tracemalloc.start()
    one = KeyedCalibrator(cls(**params), prior_strength=strength).update(np.zeros(s.size, np.int64), s, y)
    base = tracemalloc.get_traced_memory()[0]
    many = KeyedCalibrator(cls(**params), prior_strength=strength).update(keys, s, y)
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    k = many.n_keys
    per_key_heap = (held - 0) / k
    per_key_saved = (len(to_bytes(many)) - len(to_bytes(one))) / (k - 1)
    del one
    return per_key_heap, per_key_saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=float, default=20_000)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--only", nargs="*", default=None, help="the templates whose name starts with one of these")
    args = parser.parse_args()
    use_compiled_kernels()  # steady state: numba's code from the first call (docs/first_calls.md)
    keys, s, y = make_stream(int(args.events), args.keys)
    print(f"{s.size} events, {np.unique(keys).size} keys (Zipf 1.1), {args.rounds} alternating rounds, CPU time")
    print(
        f"{'template':38s} {'m':>5s} {'keyed ev/s':>11s} {'unkeyed ev/s':>13s} {'ratio':>6s}"
        + ("" if args.no_memory else f" {'heap B/key':>11s} {'saved B/key':>12s}")
    )
    for name in TEMPLATES:
        if args.only and not any(name.startswith(prefix) for prefix in args.only):
            continue
        r = throughput(name, keys, s, y, args.rounds)
        line = (
            f"{name:38s} {r['strength']!s:>5s} {r['keyed']:11,.0f} {r['unkeyed']:13,.0f} "
            f"{r['keyed'] / r['unkeyed']:6.2f}"
        )
        if not args.no_memory:
            heap, saved = memory(name, keys, s, y)
            line += f" {heap:11,.0f} {saved:12,.0f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
