"""benchmarks/bench_keyed.py --dense-bound times the heavy keys' events and no others."""

import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_keyed.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_keyed", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_dense_bound_runs_the_heavy_keys_events_one_calibrator_per_key():
    bench = _bench()
    keys, scores, labels = bench.keyed_stream(60_000, 300)
    sizes = np.bincount(keys)
    events, n_heavy, keyed_ns, dense_ns, unkeyed_ns = bench.bench_dense_bound(keys, scores, labels, "count")
    assert n_heavy == int(np.sum(sizes >= 10_000)) >= 1
    assert events == int(sizes[sizes >= 10_000].sum())
    assert min(keyed_ns, dense_ns, unkeyed_ns) > 0.0
    # a lower threshold takes more keys and events
    more = bench.bench_dense_bound(keys, scores, labels, "decay", min_events=1_000)
    assert more[1] == int(np.sum(sizes >= 1_000)) > n_heavy
    assert more[0] == int(sizes[sizes >= 1_000].sum())
