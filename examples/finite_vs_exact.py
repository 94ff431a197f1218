"""Exact against finite PAV probabilities on rare-event streams: why the finite map is the default.

The exact PAV map gives probability 0 to every score below all positives in the window and 1 to
every score above all negatives. On a rare-event stream that happens all the time: early on (few
positives seen), at the extreme scores, and whenever labels arrive late (the negatives of the
click scenario are known only after an hour, so for a while the window holds mostly positives).
Each such prediction on the wrong side costs an infinite log loss. The finite map (the default,
``finite_proba=True``) is the PAV of the window plus one pseudo-positive below every score and
one pseudo-negative above: never exactly 0 or 1, and equal to the exact map away from the ends.

Two seeded streams, each event predicted before its label is learned:

1. ``rare``: a model logit ``m ~ N(-4.5, 1.2)``, score ``expit(m)``, true probability
   ``expit(1.5 m + 0.5)`` (base rate about 0.9 %), labels known at once (``prequential``),
   unbounded window;
2. ``click``: ``streamcal generate``'s click scenario (base rate about 2 %), replayed in event-time
   order with its late labels (``streamcal.replay.replay``), window of 50,000 events.

Per range of events the table gives the share of events served exactly 0 or 1, the log loss
(unclipped: ``inf`` as soon as one such event is on the wrong side), the log loss clipped at 1e-15
as river's ``LogLoss`` does, and the Brier score.

Install: ``pip install .`` (the plain install). Run: ``python examples/finite_vs_exact.py`` (``--n``
events per stream, default 1,000,000; the tables in ``docs/streaming_pav.md`` come from the default).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from scipy.special import expit

from streamcal import PAVCalibrator
from streamcal.metrics import brier_score, log_loss
from streamcal.replay import replay
from streamcal.replay.generate import generate
from streamcal.replay.methods import register_method
from streamcal.windows import CountWindow


def rare_stream(n: int, seed: int):
    rng = np.random.default_rng(seed)
    m = rng.normal(-4.5, 1.2, size=n)
    return expit(m), rng.uniform(size=n) < expit(1.5 * m + 0.5)


def ranges(n: int) -> list[tuple[int, int]]:
    """Events [0, 1e3), [1e3, 1e4), ... up to n: the early stream gets its own rows."""
    cuts = [0]
    while cuts[-1] * 10 < n or cuts[-1] == 0:
        cuts.append(1_000 if cuts[-1] == 0 else cuts[-1] * 10)
    cuts = [c for c in cuts if c < n] + [n]
    return list(itertools.pairwise(cuts))


def table(title: str, labels: np.ndarray, runs: dict[str, np.ndarray]) -> None:
    print(f"\n### {title}: {labels.size:,} events, base rate {labels.mean():.2%}\n")
    print("| events | map | served 0 or 1 | log loss | log loss (clip 1e-15) | Brier |")
    print("|---|---|---:|---:|---:|---:|")
    for lo, hi in [*ranges(labels.size), (0, labels.size)]:
        y = labels[lo:hi]
        for name, proba in runs.items():
            p = proba[lo:hi]
            extreme = np.mean((p == 0.0) | (p == 1.0))
            with np.errstate(divide="ignore"):
                exact_loss = log_loss(y, p)
            span = "all" if (lo, hi) == (0, labels.size) else f"{lo:,} – {hi:,}"
            print(
                f"| {span} | {name} | {extreme:.2%} | {exact_loss:.4f} | {log_loss(y, p, eps=1e-15):.4f} "
                f"| {brier_score(y, p):.5f} |"
            )


def run_rare(n: int, seed: int) -> None:
    s, y = rare_stream(n, seed)
    runs = {
        "exact": PAVCalibrator(finite_proba=False).prequential(s, y)[0],
        "finite (default)": PAVCalibrator().prequential(s, y)[0],
    }
    table(f"rare stream (seed {seed}), prequential, unbounded window", y, runs)


def run_click(n: int, seed: int) -> None:
    register_method("pav_exact", lambda **kw: PAVCalibrator(finite_proba=False, **kw))
    with tempfile.TemporaryDirectory() as tmp:
        data = generate(Path(tmp) / "click.parquet", scenario="click", n=n, seed=seed)
        out = Path(tmp) / "click.replay.parquet"
        replay(data, ["pav_exact", "pav"], window=CountWindow(50_000), output=out, metrics={})
        result = pq.read_table(out, columns=["label", "proba_pav_exact", "proba_pav"])
    labels = result.column("label").to_numpy().astype(bool)
    runs = {
        "exact": result.column("proba_pav_exact").to_numpy(),
        "finite (default)": result.column("proba_pav").to_numpy(),
    }
    table(f"click scenario (seed {seed}), replayed with late labels, window 50,000", labels, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="events per stream (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run_rare(args.n, args.seed)
    run_click(args.n, args.seed)


if __name__ == "__main__":
    main()
