"""Replay a recorded event stream from Parquet through streaming calibrators, with late labels.

A synthetic card-payment stream (fraud scenario: about 0.3 % positives, chargebacks arriving days
after the payment) is written to Parquet, then replayed in event-time order (from the file, then from
the same rows as a pyarrow Table in memory): every payment is
scored by each calibrator with what it had learned *before* that payment, and each label is
learned only once its label time has passed. The raw model score is replayed too (method "raw")
as the uncalibrated baseline.

Install: ``pip install .`` (the plain install). Run: ``python examples/replay_parquet.py``
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.replay import available_methods, generate, replay
from streamcal.windows import CountWindow, Decay


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        stream = generate(tmp / "payments.parquet", scenario="fraud", n=300_000, seed=7)
        print(f"wrote {stream.name}: {pq.ParquetFile(stream).metadata.num_rows:,} payments")

        summary = replay(
            stream,
            {
                "pav_window": PAVCalibrator(window=CountWindow(100_000)),
                "pav_decay": PAVCalibrator(window=Decay(half_life=50_000.0)),
            },
            output=tmp / "payments.replay.parquet",
            metrics_output=tmp / "payments.metrics.parquet",
            metrics_window=50_000,
        )
        summary.print()

        # by method names, as the command line does it; the map-fitting methods refit every
        # 1,000 labels (a refit before every prediction would be exact but slow)
        names = [m for m in ("pav", "gev", "platt", "raw") if m in available_methods()]
        by_name = replay(stream, names, window=100_000, metrics_window=50_000, method_options={"refit_every": 1_000})
        print()
        print(by_name.to_text())

        # the same stream already in memory (a pyarrow Table here; a pandas or polars DataFrame
        # works the same way) gives the same results, bit for bit
        table = pq.read_table(stream)
        in_memory = replay(table, ["pav", "raw"], window=100_000, metrics_window=50_000)
        same = all(in_memory.metrics[m] == by_name.metrics[m] for m in ("pav", "raw"))
        print()
        print(f"replayed from a pyarrow Table ({in_memory.files[0]}): same metrics as from the file: {same}")

        out = pq.read_table(tmp / "payments.replay.parquet")
        print()
        print("output columns:", out.column_names)
        metrics = pq.read_table(tmp / "payments.metrics.parquet").to_pandas()
        print()
        print(
            metrics[["window", "method", "n_positive", "log_loss", "cllr", "min_cllr", "ece"]]
            .round(4)
            .to_string(index=False)
        )


if __name__ == "__main__":
    main()
