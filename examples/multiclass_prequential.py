"""A logged multiclass stream calibrated prequentially in one call, with a time window.

A model's class probabilities for 100 000 events over a week (K = 5, over-confident: the true
probabilities squared and renormalised), with event times. ``PairwiseCouplingCalibrator`` over
``PAVCalibrator(window="1d")`` (a one-day time window per pair) runs ``prequential``: each event
predicted with the state before its label, then learned. The first 2 000 events are also run
through the river face (``predict_proba_one`` then ``learn_one(x, y, t=...)``) to show both faces
give the same numbers, bit for bit.

Install: ``pip install .`` (the plain install). Run: ``python examples/multiclass_prequential.py``
(``--events N`` for another length).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from streamcal import PAVCalibrator
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator


def log_loss(proba: np.ndarray, y: np.ndarray) -> float:
    return float(-np.mean(np.log(np.clip(proba[np.arange(y.size), y], 1e-15, 1.0))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    k, n = 5, args.events
    p = rng.dirichlet(np.ones(k), size=n)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)  # y ~ p
    scores = p**2 / (p**2).sum(axis=1, keepdims=True)
    times = np.sort(rng.uniform(0.0, 7 * 86400.0, size=n))  # seconds over a week
    classes = tuple(range(k))

    print(f"{n} events, K = {k}, times over 7 days; log loss of each event predicted before its label:\n")
    print(f"model's own probabilities: {log_loss(scores, y):.4f}")
    for name, cls in (("pairwise coupling", PairwiseCouplingCalibrator), ("one-vs-rest", OneVsRestCalibrator)):
        cal = cls(PAVCalibrator(window="1d"), classes=classes)
        start = time.process_time()
        proba = cal.prequential(scores, y, times=times)
        seconds = time.process_time() - start
        print(f"{name}, PAV per pair/class, one-day window: {log_loss(proba, y):.4f} ({n / seconds:,.0f} events/s)")

    river = PairwiseCouplingCalibrator(PAVCalibrator(window="1d"), classes=classes)
    m = min(n, 2_000)
    loop = np.empty((m, k))
    for e in range(m):
        x = {c: float(v) for c, v in zip(classes, scores[e], strict=True)}
        loop[e] = list(river.predict_proba_one(x).values())
        river.learn_one(x, int(y[e]), t=float(times[e]))
    array = PairwiseCouplingCalibrator(PAVCalibrator(window="1d"), classes=classes)
    same = np.array_equal(array.prequential(scores[:m], y[:m], times=times[:m]), loop)
    print(f"\nprequential equals the river-face loop on the first {m} events, bit for bit: {same}")


if __name__ == "__main__":
    main()
