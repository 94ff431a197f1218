"""Calibration metrics on a miscalibrated click-like stream: arrays, then river metrics per event.

Install: ``pip install .`` (the plain install). Run: ``python examples/metrics.py``
"""

from __future__ import annotations

import numpy as np

from streamcal import metrics
from streamcal.isotonic import IsotonicCalibrator


def main() -> None:
    rng = np.random.default_rng(11)
    n = 100_000
    z = rng.normal(size=n)
    true_p = 1.0 / (1.0 + np.exp(-(-4.0 + 0.9 * z)))  # base rate near 2 %
    labels = rng.uniform(size=n) < true_p
    scores = 1.0 / (1.0 + np.exp(-(-3.0 + 1.6 * z)))  # the model: over-confident, too high

    train, test = slice(0, n // 2), slice(n // 2, n)
    cal = IsotonicCalibrator().fit(scores[train], labels[train])
    y = labels[test]
    raw, calibrated = scores[test], cal.predict_proba(scores[test])
    prior = labels[train].mean()
    llr_raw = np.log(raw) - np.log1p(-raw) - np.log(prior / (1 - prior))
    llr_cal = cal.predict_llr(scores[test])

    rows = [
        ("Brier", lambda p, llr: metrics.brier_score(y, p)),
        ("log loss (nats)", lambda p, llr: metrics.log_loss(y, p)),
        ("Cllr (bits)", lambda p, llr: metrics.cllr(y, llr)),
        ("minCllr (bits)", lambda p, llr: metrics.min_cllr(y, p)),
        ("ECE, 10 equal-width bins", lambda p, llr: metrics.ece(y, p)),
        ("ECE, 10 equal-mass bins", lambda p, llr: metrics.ece(y, p, strategy="quantile")),
        ("calibration loss (Agarwal et al., 2014)", lambda p, llr: metrics.calibration_loss(y, p)),
        ("Hosmer-Lemeshow statistic", lambda p, llr: metrics.hosmer_lemeshow(y, p)[0]),
        ("cost at threshold 0.05", lambda p, llr: metrics.threshold_cost(y, p, 0.05)),
        ("Beta(2, 8) rule (low-p emphasis)", lambda p, llr: metrics.beta_scoring_rule(y, p, 2, 8)),
    ]
    width = max(len(name) for name, _ in rows) + 2
    print(f"{'metric':{width}s}{'raw':>12s}{'calibrated':>12s}")
    for name, f in rows:
        print(f"{name:{width}s}{f(raw, llr_raw):12.5f}{f(calibrated, llr_cal):12.5f}")

    # The same numbers, event by event, from river metrics (a prequential dashboard would print
    # them as the stream goes).
    live = [metrics.Brier(), metrics.LogLoss(), metrics.ECE(), metrics.CalibrationLoss()]
    llr_metric = metrics.Cllr()
    for yi, pi, li in zip(y[:5000], calibrated[:5000], llr_cal[:5000], strict=True):
        for m in live:
            m.update(bool(yi), float(pi))
        llr_metric.update(bool(yi), float(li))
    print("after 5000 events:", ", ".join(repr(m) for m in [*live, llr_metric]))


if __name__ == "__main__":
    main()
