"""The four streaming calibrators side by side on a drifting, rare-positive click stream.

Each calibrator replays the same stream prequentially (every event predicted with the state before
its own label is learned) through a count window; the table shows metrics after the drift.

Install: ``pip install .`` (the plain install). Run: ``python examples/compare_calibrators.py``
"""

from __future__ import annotations

import time

import numpy as np

import streamcal
from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator, metrics
from streamcal.demo import drifting_click_stream
from streamcal.windows import CountWindow

# compiled kernels from the start (loaded from the install's cache), so the timing is the kernels' own:
# otherwise a process's first calls run interpreted and its first large call loads the kernels
streamcal.warmup("pav,ispline,gev,platt")

N, WINDOW = 400_000, 20_000
scores, labels, drift_at = drifting_click_stream(N, seed=5)
after = slice(drift_at + WINDOW, None)

calibrators = {
    "PAV": PAVCalibrator(window=CountWindow(WINDOW)),
    "I-spline (6 knots)": ISplineCalibrator(window=CountWindow(WINDOW), n_knots=6, refit_every=1_000),
    "GEV (xi auto)": GEVCalibrator(window=CountWindow(WINDOW), refit_every=1_000),
    "Platt": PlattCalibrator(window=CountWindow(WINDOW), refit_every=1_000),
}

print(f"{N:,} events, base rate {labels.mean():.4f}, drift at event {drift_at:,}; metrics after the window refilled")
print(f"{'calibrator':<20}{'Brier':>10}{'log loss':>10}{'ECE':>9}{'Cllr':>8}{'M events/s':>12}")
y = labels[after]
raw = scores[after]
with np.errstate(divide="ignore"):
    raw_llr = np.log(raw) - np.log1p(-raw)
print(
    f"{'raw score':<20}{metrics.brier_score(y, raw):>10.5f}{metrics.log_loss(y, raw, eps=1e-6):>10.5f}"
    f"{metrics.ece(y, raw):>9.5f}{metrics.cllr(y, raw_llr):>8.4f}{'':>12}"
)
for name, cal in calibrators.items():
    cal.prequential(scores[:1000], labels[:1000])  # the first events outside the timing
    start = time.perf_counter()
    proba, llr = cal.prequential(scores[1000:], labels[1000:])
    rate = (N - 1000) / (time.perf_counter() - start) / 1e6
    p, lr = proba[after.start - 1000 :], llr[after.start - 1000 :]
    print(
        f"{name:<20}{metrics.brier_score(y, p):>10.5f}{metrics.log_loss(y, p, eps=1e-6):>10.5f}"
        f"{metrics.ece(y, p):>9.5f}{metrics.cllr(y, lr):>8.4f}{rate:>12.2f}"
    )
print("log loss clips p into [1e-6, 1 - 1e-6] (a miscalibrated raw score can be near 0 or 1).")
