"""Plots of calibration with streamcal.plot: reliability, ECE and Tippett plots, metrics over time.

Install: ``pip install ".[plot]"`` (matplotlib; ``pip install "streamcal-engine[plot]"`` from the package
index). Run: ``python examples/plots.py [--out DIR]``

A click-like model whose scores are over-confident and too high (base rate near 1 %) is
recalibrated with batch isotonic regression on one half of the data and drawn on the other half:

- reliability.png: the raw score and the isotonic probabilities against what happened, with the
  events per bin beneath;
- llr.png: the empirical cross-entropy (ECE) of the raw score's LLRs and of the isotonic LLRs
  against the prior, and the isotonic LLRs' Tippett plot;
- replay.png: a drifting stream replayed through streaming PAV and the raw score, the summary
  figure `streamcal replay --plot` draws (reliability and every metric over time).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from streamcal import plot
from streamcal.isotonic import IsotonicCalibrator
from streamcal.metrics import cllr, min_cllr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder for the PNGs (default: the current one)")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)

    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(5)
    n = 200_000
    z = rng.normal(size=n)
    labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(-5.0 + 1.1 * z)))
    scores = 1.0 / (1.0 + np.exp(-(-3.8 + 1.7 * z)))  # the model: too high and over-confident
    train, test = slice(0, n // 2), slice(n // 2, n)
    cal = IsotonicCalibrator().fit(scores[train], labels[train])
    y = labels[test]
    raw, calibrated = scores[test], cal.predict_proba(scores[test])
    prior = labels[train].mean()
    llr_raw = np.log(raw) - np.log1p(-raw) - np.log(prior / (1.0 - prior))
    llr_cal = cal.predict_llr(scores[test])
    print(f"{y.size:,} test events, {y.mean():.2%} positive")

    # 1. reliability: several methods overlaid, counts beneath, logit axes chosen automatically
    ax, counts_ax = plot.reliability_diagram({"model score": raw, "isotonic": calibrated}, y)
    ax.figure.savefig(out / "reliability.png", dpi=80)
    print(
        f"reliability.png: {ax.get_xscale()} axes (the predictions reach below 1 %), {counts_ax.get_ylabel()} beneath"
    )

    # 2. LLRs: ECE plots of both, Tippett plot of the calibrated ones
    fig, axes = plt.subplots(1, 3, figsize=(17.0, 4.8), layout="constrained")
    plot.ece_plot(llr_raw, y, ax=axes[0], label="model score's LLRs", title="ECE: model score")
    plot.ece_plot(llr_cal, y, ax=axes[1], label="isotonic LLRs", title="ECE: isotonic")
    plot.tippett_plot(llr_cal, y, ax=axes[2], title="Tippett plot: isotonic")
    fig.savefig(out / "llr.png", dpi=80)
    observed = float(np.log(y.mean() / (1.0 - y.mean())))
    for name, llr in (("model score", llr_raw), ("isotonic", llr_cal)):
        c = plot.ece_curves(llr, y, prior_log_odds=[observed, 0.0])
        print(
            f"llr.png, {name}: Cllr {cllr(y, llr):.3f} bits (ECE at even odds {c.llr[1]:.3f}), "
            f"minCllr {min_cllr(y, llr):.3f}; at the data's prior log-odds {observed:.2f}: "
            f"ECE {c.llr[0]:.4f}, after PAV {c.pav[0]:.4f}, neutral {c.neutral[0]:.4f} bits"
        )

    # 3. a replay and its summary figure (what `streamcal replay --plot` writes)
    from streamcal.replay import generate, replay

    with tempfile.TemporaryDirectory() as tmp:
        stream = generate(Path(tmp) / "drift.parquet", scenario="drift", n=60_000, seed=2)
        summary = replay(stream, "pav,raw", window=20_000, metrics_window=6_000, plot=out / "replay.png")
    table = summary.metrics_table
    ax = plot.metrics_over_time(table, "calibration_loss")
    print(
        f"replay.png: {summary.n_events:,} events, {table.num_rows} metric rows; "
        f"calibration loss drawn on a {ax.get_yscale()} axis"
    )
    plt.close("all")


if __name__ == "__main__":
    main()
