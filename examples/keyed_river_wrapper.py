"""Calibrate a river model per campaign: ``CalibratedClassifier`` over a ``KeyedCalibrator``.

Three campaigns share one logistic regression, which does not see the campaign; each campaign's
click rate is off the model's by its own shift. The wrapper reads each event's campaign from ``x``
(the calibrator's ``key_key``) and calibrates per campaign, pooled toward the global map. River's
progressive validation (predict, then learn, event by event) compares the bare model, one
calibrator for all, and the keyed wrapper.

Install: ``pip install .`` (the plain install). Run: ``python examples/keyed_river_wrapper.py``; the
figures are recorded in ``docs/compose.md``. ``--events N`` runs N events (30,000 by default).
"""

from __future__ import annotations

import argparse

import numpy as np
from river import compose, evaluate, linear_model, metrics

from streamcal import CalibratedClassifier, KeyedCalibrator, PAVCalibrator

SHIFT = {"shoes": -1.5, "cars": 0.0, "books": 1.0}  # each campaign's log-odds shift


def clicks(n: int, seed: int = 0):
    """``(x, y)`` events: the campaign, two features, a click."""
    rng = np.random.default_rng(seed)
    names = list(SHIFT)
    for _ in range(n):
        campaign = names[int(rng.choice(3, p=[0.5, 0.3, 0.2]))]
        x1, x2 = rng.normal(size=2)
        z = 1.5 * x1 - 0.5 * x2 - 2.5 + SHIFT[campaign]
        yield {"campaign": campaign, "x1": float(x1), "x2": float(x2)}, bool(rng.uniform() < 1 / (1 + np.exp(-z)))


def model():
    """The model never sees the campaign: the pipeline drops it before the regression."""
    return compose.Discard("campaign") | linear_model.LogisticRegression()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=30_000, help="events in the stream (default 30,000)")
    events = list(clicks(parser.parse_args(argv).events))
    cases = {
        "bare model": model(),
        "one PAVCalibrator for all": CalibratedClassifier(model(), PAVCalibrator()),
        "KeyedCalibrator per campaign": CalibratedClassifier(model(), KeyedCalibrator(key_key="campaign")),
    }
    for name, m in cases.items():
        loss = evaluate.progressive_val_score(events, m, metrics.LogLoss())
        print(f"{name:30s} log loss {loss.get():.4f}")
    keyed = cases["KeyedCalibrator per campaign"]
    x = {"x1": 0.0, "x2": 0.0}
    for campaign in SHIFT:
        p = keyed.predict_proba_one({**x, "campaign": campaign})[True]
        print(f"  {campaign:6s} calibrated click probability at x1 = x2 = 0: {p:.3f}")


if __name__ == "__main__":
    main()
