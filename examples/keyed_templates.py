"""Keyed calibration with other templates: one I-spline, Platt or Venn–Abers calibrator per key.

``KeyedCalibrator(template)`` keeps one clone of ``template`` per key. For templates refitted from
the histogram (I-spline, Platt, GEV) each key's refit also reads the keyed prior, pseudo-events at
the global map's rates, so a key with few events leans on the global map; a Venn–Abers template
(or any map fitted in the PAV kernels) takes ``prior_strength=0``: independent keys.

The stream: 40 keys with Zipf traffic, each with its own shift of the score's logit. Printed: the
prequential log loss of the global calibrator (one for all keys), of independent copies per key and
of the pooled keyed calibrator, for each template.

Install: ``pip install .`` (the plain install). Run: ``python examples/keyed_templates.py [--events 20000]``
"""

from __future__ import annotations

import argparse

import numpy as np

from streamcal import ISplineCalibrator, KeyedCalibrator, PlattCalibrator, VennAbersCalibrator


def campaigns(n: int, n_keys: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    weights = np.arange(1, n_keys + 1, dtype=np.float64) ** -1.1
    keys = rng.choice(n_keys, size=n, p=weights / weights.sum())
    z = rng.normal(-2.0, 1.2, size=n)
    shift = rng.normal(0.0, 0.6, size=n_keys)
    labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(z + shift[keys])))
    return keys, 1.0 / (1.0 + np.exp(-z)), labels


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))


def main() -> None:
    parser = argparse.ArgumentParser(description="keyed calibration with other templates")
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    keys, scores, labels = campaigns(args.events)
    print(f"{args.events} events, {np.unique(keys).size} keys; prequential log loss (1e-3 nats)")
    print(f"{'template':24s} {'global':>8s} {'independent':>12s} {'pooled':>8s}")
    for name, make, pools in (
        ("ISplineCalibrator", lambda: ISplineCalibrator(refit_every=200), True),
        ("PlattCalibrator", lambda: PlattCalibrator(refit_every=200), True),
        ("VennAbersCalibrator", lambda: VennAbersCalibrator(), False),
    ):
        glob, _ = make().prequential(scores, labels)
        alone, _ = KeyedCalibrator(make(), prior_strength=0).prequential(keys, scores, labels)
        pooled = "-"
        if pools:
            p, _ = KeyedCalibrator(make()).prequential(keys, scores, labels)  # prior_strength="auto"
            pooled = f"{1e3 * log_loss(p, labels):8.2f}"
        print(f"{name:24s} {1e3 * log_loss(glob, labels):8.2f} {1e3 * log_loss(alone, labels):12.2f} {pooled:>8s}")


if __name__ == "__main__":
    main()
