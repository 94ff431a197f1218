"""The score prior on a rare-event stream: raw score against each calibrator, per window.

A decent score (off by 0.3 in log-odds) of an event with a base rate near 0.25 %, calibrated
prequentially (each event predicted before its label is learned) by the four streaming
calibrators, with the prior (their default) and without it (``prior=None``). Printed: the log
loss over each window from the first event on, and the prior's strength at the end.

Install: ``pip install .`` (the plain install). Run: ``python examples/prior_rare_events.py``
"""

from __future__ import annotations

import numpy as np

from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))


def main() -> None:
    rng = np.random.default_rng(1)
    n = 10_000
    z = rng.normal(-7.2, 1.3, n)  # the event's true log-odds
    labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-z))
    scores = 1.0 / (1.0 + np.exp(-(z + 0.3)))  # the model's score: a little too high
    windows = (300, 1_000, 3_000, 10_000)
    print(f"{n} events, {int(labels.sum())} positive")
    print(f"{'log loss x 1e3 over [0, n)':44s}" + "".join(f"{w:>9d}" for w in windows))
    print(f"{'raw score':44s}" + "".join(f"{1e3 * log_loss(scores[:w], labels[:w]):9.2f}" for w in windows))
    makers = {
        "PAV": PAVCalibrator,
        "I-spline": lambda **kw: ISplineCalibrator(refit_every=100, **kw),
        "Platt": lambda **kw: PlattCalibrator(refit_every=100, **kw),
        "GEV": lambda **kw: GEVCalibrator(refit_every=100, **kw),
    }
    for name, make in makers.items():
        for prior in ("auto", None):
            cal = make(prior=prior)
            proba, _ = cal.prequential(scores, labels)
            label = f"{name}, prior={prior!r} (strength {cal.prior_strength:.3g})"
            print(f"{label:44s}" + "".join(f"{1e3 * log_loss(proba[:w], labels[:w]):9.2f}" for w in windows))


if __name__ == "__main__":
    main()
