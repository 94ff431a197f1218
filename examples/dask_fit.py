"""Fit calibrators over a directory of Parquet files with Dask: one state per partition, merged.

A synthetic campaigns stream (many campaigns with Zipf traffic, the model miscalibrated differently
in each) is written as eight Parquet files and read back as a Dask dataframe of eight partitions.
``streamcal.dask.fit`` builds one calibrator state per partition, in the worker that holds it, and
merges the states in stream order:

- an unkeyed ``PAVCalibrator`` (``prior=None``): the merged calibrator is the one a single process
  builds from every row in order, bit for bit;
- a ``KeyedCalibrator`` (``key="key"``, one map per campaign pooled toward the global map): every
  campaign's window and the global map are one process's, and so is every prediction once the
  single calibrator's prior is taken from its global map as it stands (the merge takes the prior
  from the merged global map; a single calibrator's lags on its refresh schedule).

``streamcal.dask.predict`` then scores the dataframe lazily, partition by partition, and the
field-level calibration error of both is printed on the stream itself.

Install: ``pip install ".[dask]"``. Run: ``python examples/dask_fit.py [--n 200000]``
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pyarrow.parquet as pq

from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal import dask as scd
from streamcal.metrics import field_ece, log_loss
from streamcal.replay import generate


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="events (default 200,000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        stream = generate(tmp / "campaigns.parquet", scenario="campaigns", n=args.n, seed=5)
        table = pq.read_table(stream)
        parts = tmp / "parts"
        parts.mkdir()
        step = -(-table.num_rows // 8)
        for i in range(8):  # file names in stream order: read_parquet keeps it
            pq.write_table(table.slice(i * step, step), parts / f"part-{i}.parquet")
        ddf = dd.read_parquet(parts)
        keys = table["key"].to_numpy()
        s = table["score"].to_numpy()
        y = table["label"].to_numpy()
        print(f"{table.num_rows:,} events, {len(np.unique(keys)):,} campaigns, {ddf.npartitions} partitions")

        # the synchronous scheduler keeps the example light; a distributed.Client works the same way
        pav = scd.fit(PAVCalibrator(prior=None), ddf, score="score", label="label", scheduler="sync")
        single = PAVCalibrator(prior=None).update(s, y)
        grid = np.linspace(0.0, 1.0, 1001)
        same = np.array_equal(pav.predict_proba(grid), single.predict_proba(grid))
        print(f"PAVCalibrator over 8 partitions equals one process over every row: {same}")

        keyed = scd.fit(KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=50.0), ddf, score="score",
                        label="label", key="key", scheduler="sync")
        one = KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=50.0).update(keys, s, y)
        one.replace_global(one.global_calibrator)  # its prior from the global map of now, as the merge's
        same = np.array_equal(keyed.predict_proba(keys, s), one.predict_proba(keys, s))
        print(f"KeyedCalibrator over 8 partitions ({keyed.n_keys:,} keys) equals one process: {same}")

        scored = ddf.assign(
            global_pav=scd.predict(pav, ddf, "score"),
            keyed_pav=scd.predict(keyed, ddf, "score", key="key"),
        ).compute(scheduler="sync")
        print("\nin-sample, on the stream itself:")
        print(f"{'method':<12} {'log loss':>9} {'field ECE':>10}")
        for column in ("score", "global_pav", "keyed_pav"):
            p = np.clip(scored[column].to_numpy(), 1e-12, 1 - 1e-12)
            print(f"{column:<12} {log_loss(y, p):>9.4f} {field_ece(keys, y, p):>10.4f}")


if __name__ == "__main__":
    main()
