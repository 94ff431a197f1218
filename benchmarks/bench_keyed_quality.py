"""Keyed calibration quality on the campaigns scenario: global, independent, EB-offset, pooled.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_keyed_quality.py                 # 1e6 events, seed 0
    PYTHONPATH=. python benchmarks/bench_keyed_quality.py --n 200000 --seeds 0 1 2

The stream is ``streamcal generate --scenario campaigns`` (2,000 keys, Zipf(1.1) traffic, a logit
shift, slope and intercept of its own per key), generated in this process through the
generator's Python API with the given seed. Every method runs ``prequential`` over the same
stream in order (each event predicted with the state before its label), and is scored on all
events:

- ``raw``: the model's score itself;
- ``global``: one ``PAVCalibrator()`` over all events;
- ``independent``: one ``PAVCalibrator()`` per key, each over its key's events only (its
  prequential run per key equals the interleaved stream's, since the keys share nothing);
- ``eb-offset``: ``KeyedOffsetCalibrator()``, the global PAV map plus a per-key logit offset
  shrunk by empirical Bayes (DerSimonian–Laird between-key variance);
- ``pooled``: ``KeyedCalibrator()`` with its defaults (a PAV row per key pooled toward the global
  map), when the installed streamcal has it.

Measures: prequential log loss (nats, mean over events), ``field_ece`` and ``field_rce`` (per key,
weighted by the key's events), and the log loss of the events of head keys (the 20 largest), of
the body, and of tail keys (keys with fewer than 200 events over the stream), where pooling
matters most. CPU time (``process_time``) of each method's run is printed too, for orientation
(the throughput benchmark of keyed calibration is another script).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from streamcal import KeyedOffsetCalibrator, PAVCalibrator
from streamcal.metrics import field_ece, field_rce, log_loss
from streamcal.replay import generate

try:  # the pooled keyed calibrator, once the installed streamcal has it
    from streamcal import KeyedCalibrator
except (ImportError, AttributeError):
    KeyedCalibrator = None


def campaigns(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keys, scores, labels)`` of the seeded campaigns stream, in event order."""
    with tempfile.TemporaryDirectory() as tmp:
        table = pq.read_table(generate(Path(tmp) / "campaigns.parquet", "campaigns", n=n, seed=seed))
    keys = table["key"].to_numpy()
    scores = table["score"].to_numpy()
    labels = table["label"].to_numpy(zero_copy_only=False).astype(bool)
    return keys, scores, labels


def run_independent(keys, scores, labels) -> np.ndarray:
    """One PAVCalibrator per key, each run prequentially over its key's events."""
    proba = np.empty(scores.size)
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    for idx in np.split(order, bounds):
        proba[idx] = PAVCalibrator().prequential(scores[idx], labels[idx])[0]
    return proba


def methods() -> dict:
    found = {
        "raw": lambda k, s, y: s.copy(),
        "global": lambda k, s, y: PAVCalibrator().prequential(s, y)[0],
        "independent": run_independent,
        "eb-offset": lambda k, s, y: KeyedOffsetCalibrator().prequential(k, s, y)[0],
    }
    if KeyedCalibrator is not None:
        found["pooled"] = lambda k, s, y: KeyedCalibrator().prequential(k, s, y)[0]
    return found


def evaluate(keys, labels, proba, groups) -> dict:
    row = {
        "log loss": log_loss(labels, proba),
        "field_ece": field_ece(keys, labels, proba),
        "field_rce": field_rce(keys, labels, proba),
    }
    for name, mask in groups.items():
        row[f"log loss {name}"] = log_loss(labels[mask], proba[mask])
    return row


def traffic_groups(keys: np.ndarray) -> dict:
    counts = np.bincount(keys)
    head = np.argsort(counts)[::-1][:20]
    is_head = np.isin(keys, head)
    is_tail = counts[keys] < 200
    return {"head": is_head, "body": ~is_head & ~is_tail, "tail": is_tail}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="events per stream")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds of the streams")
    args = parser.parse_args()

    # compile (or load) every kernel first, so that the CPU times below are steady-state
    k, s, y = campaigns(5_000, 99)
    for run in methods().values():
        run(k, s, y)

    names = list(methods())
    columns = ["log loss", "field_ece", "field_rce", "log loss head", "log loss body", "log loss tail"]
    totals = {name: {c: [] for c in [*columns, "cpu s"]} for name in names}
    for seed in args.seeds:
        keys, scores, labels = campaigns(args.n, seed)
        groups = traffic_groups(keys)
        shares = {g: m.mean() for g, m in groups.items()}
        print(
            f"seed {seed}: {args.n:,} events, {np.unique(keys).size:,} keys seen, base rate {labels.mean():.4f}; "
            f"events in head (20 largest keys) {shares['head']:.1%}, body {shares['body']:.1%}, "
            f"tail (keys under 200 events) {shares['tail']:.1%}"
        )
        for name, run in methods().items():
            start = time.process_time()
            proba = run(keys, scores, labels)
            cpu = time.process_time() - start
            row = evaluate(keys, labels, proba, groups)
            for c in columns:
                totals[name][c].append(row[c])
            totals[name]["cpu s"].append(cpu)

    print()
    print(f"mean over {len(args.seeds)} seed(s); log loss in 1e-3 nats; ratio: log loss / global's")
    header = f"{'method':<12} {'log loss':>9} {'ratio':>6} {'field_ece':>10} {'field_rce':>10}"
    header += f" {'head':>8} {'body':>8} {'tail':>8} {'cpu s':>7}"
    print(header)
    g = float(np.mean(totals["global"]["log loss"]))
    for name in names:
        m = {c: float(np.mean(v)) for c, v in totals[name].items()}
        print(
            f"{name:<12} {1e3 * m['log loss']:>9.3f} {m['log loss'] / g:>6.4f} {m['field_ece']:>10.5f} "
            f"{m['field_rce']:>10.4f} {1e3 * m['log loss head']:>8.3f} {1e3 * m['log loss body']:>8.3f} "
            f"{1e3 * m['log loss tail']:>8.3f} {m['cpu s']:>7.2f}"
        )
    if KeyedCalibrator is None:
        print("\n(KeyedCalibrator is not in this streamcal: the pooled row is left out)")


if __name__ == "__main__":
    main()
