"""Batch PAV calibration of an over-confident click model, and PAV-LLR.

Install: ``pip install .`` (the plain install). Run: ``python examples/batch_pav.py``
"""

from __future__ import annotations

import numpy as np

from streamcal.isotonic import IsotonicCalibrator, pav_llr


def main() -> None:
    rng = np.random.default_rng(7)
    n = 200_000
    z = rng.normal(size=n)
    true_p = 1.0 / (1.0 + np.exp(-(-4.2 + 0.9 * z)))  # base rate near 2 %
    labels = rng.uniform(size=n) < true_p
    scores = 1.0 / (1.0 + np.exp(-(-3.0 + 1.6 * z)))  # the model: too confident, too high

    train, test = slice(0, n // 2), slice(n // 2, n)
    cal = IsotonicCalibrator().fit(scores[train], labels[train])
    calibrated = cal.predict_proba(scores[test])

    def brier(p):
        return float(np.mean((p - labels[test]) ** 2))

    print(f"base rate            {labels.mean():.4f}")
    print(f"mean raw score       {scores[test].mean():.4f}   Brier {brier(scores[test]):.5f}")
    print(f"mean calibrated      {calibrated.mean():.4f}   Brier {brier(calibrated):.5f}")
    print(f"mean |calibrated - true p|  {np.mean(np.abs(calibrated - true_p[test])):.4f}")

    llr = pav_llr(scores[train], labels[train])  # finite by the pseudo-count rule
    print(f"PAV-LLR range on the training half: [{llr.min():.2f}, {llr.max():.2f}] (natural log)")


if __name__ == "__main__":
    main()
