"""Calibrating per campaign: global, independent per key, empirical-Bayes offsets, pooled.

One click model scores the events of 2,000 campaigns; each campaign is miscalibrated its own way
(its own shift of the score, slope and intercept), and traffic follows Zipf's law, so a few
campaigns are large and most are sparse. The stream is ``streamcal generate --scenario campaigns``
made in this process. Four ways to calibrate it, each run prequentially (every event predicted
with the state before its label):

- global: one ``PAVCalibrator`` over all events, whatever the campaign;
- independent: one ``PAVCalibrator`` per campaign, over its own events only;
- EB offset: ``KeyedOffsetCalibrator``, the global map moved per campaign by a logit offset shrunk
  toward 0 by empirical Bayes (DerSimonian–Laird between-campaign variance);
- pooled: ``KeyedCalibrator``, a PAV state per campaign pooled toward the global map.

It prints the log loss over all events, over the large campaigns and over the sparse ones, and
the field-level errors (``field_ece``, ``field_rce``: each campaign's predicted positives against
its observed ones).

Install: ``pip install .`` (the plain install). Run: ``python examples/keyed_campaigns.py``
(``--events 50000`` for a quicker run).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from streamcal import KeyedOffsetCalibrator, PAVCalibrator
from streamcal.metrics import field_ece, field_rce, log_loss
from streamcal.replay import generate

try:  # the pooled keyed calibrator, in the streamcal versions that have it
    from streamcal import KeyedCalibrator
except ImportError:
    KeyedCalibrator = None


def campaign_stream(n: int, seed: int):
    with tempfile.TemporaryDirectory() as tmp:
        table = pq.read_table(generate(Path(tmp) / "campaigns.parquet", "campaigns", n=n, seed=seed))
    labels = table["label"].to_numpy(zero_copy_only=False).astype(bool)
    return table["key"].to_numpy(), table["score"].to_numpy(), labels


def independent(keys, scores, labels):
    """One PAVCalibrator per campaign (a dict of them), each over its own events in order."""
    calibrators = {}
    proba = np.empty(scores.size)
    order = np.argsort(keys, kind="stable")
    for idx in np.split(order, np.flatnonzero(np.diff(keys[order])) + 1):
        calibrators[int(keys[idx[0]])] = cal = PAVCalibrator()
        proba[idx] = cal.prequential(scores[idx], labels[idx])[0]
    return proba


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    keys, scores, labels = campaign_stream(args.events, args.seed)
    counts = np.bincount(keys)
    large = counts[keys] >= 2_000
    sparse = counts[keys] < 200
    print(
        f"{args.events:,} events, {np.unique(keys).size:,} campaigns, base rate {labels.mean():.2%}; "
        f"{large.mean():.0%} of the events in campaigns of 2,000 events or more, "
        f"{sparse.mean():.0%} in campaigns of fewer than 200"
    )

    runs = {
        "raw score": lambda: scores,
        "global": lambda: PAVCalibrator().prequential(scores, labels)[0],
        "independent": lambda: independent(keys, scores, labels),
        "EB offset": lambda: KeyedOffsetCalibrator().prequential(keys, scores, labels)[0],
        "pooled": lambda: KeyedCalibrator().prequential(keys, scores, labels)[0],
    }

    print(f"\n{'':<12} {'log loss (1e-3)':>16} {'large':>8} {'sparse':>8} {'field_ece':>10} {'field_rce':>10}")
    for name, run in runs.items():
        p = run()
        print(
            f"{name:<12} {1e3 * log_loss(labels, p):>16.2f} {1e3 * log_loss(labels[large], p[large]):>8.2f} "
            f"{1e3 * log_loss(labels[sparse], p[sparse]):>8.2f} {field_ece(keys, labels, p):>10.4f} "
            f"{field_rce(keys, labels, p):>10.3f}"
        )


if __name__ == "__main__":
    main()
