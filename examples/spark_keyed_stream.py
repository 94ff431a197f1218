"""Keyed calibration of a live stream in Spark Structured Streaming, on local[2].

Generates the ``campaigns`` scenario (click-like events over Zipf-distributed campaigns, each
miscalibrated its own way) and turns it into the stream a click system sees: a score row when the
click is scored, and a label row, joined by its event id, when the conversion is known (later). The
rows are written in arrival order as a directory of Parquet files; a streaming query reads one file
per micro-batch, calibrates each campaign with its own calibrator held in Spark's RocksDB state
store (:func:`streamcal.spark.calibrate_stream`), pooled toward the global map of all traffic after
the previous micro-batch (the maps kept under the checkpoint), and writes the calibrated events to
Parquet (:func:`streamcal.spark.write_stream`). It then prints per-campaign calibration of the raw scores and of the
streamed probabilities (field ECE, :func:`streamcal.metrics.field_ece`) and the dead letters.

Needs a Java 17 runtime (Spark 4). Install: ``pip install ".[spark]"``

Run: ``python examples/spark_keyed_stream.py [--events 6000] [--files 3] [--workdir DIR]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from streamcal import PAVCalibrator
from streamcal.metrics import field_ece, per_key_calibration
from streamcal.replay import generate
from streamcal.spark import calibrate_stream, local_session, write_stream


def write_arrivals(events: pd.DataFrame, folder: Path, files: int) -> None:
    """Score rows at event time and label rows at label time, in arrival order, as Parquet files."""
    ids = np.array([f"ev{i}" for i in range(len(events))], dtype=object)
    seconds = events["event_time"].astype("int64") / 1e3
    label_seconds = events["label_time"].astype("int64") / 1e3
    scores = pd.DataFrame(
        {"campaign": events["key"], "event_id": ids, "score": events["score"], "label": np.nan, "at": seconds}
    )
    labels = pd.DataFrame(
        {
            "campaign": events["key"],
            "event_id": ids,
            "score": np.nan,
            "label": events["label"].astype(np.float64),
            "at": label_seconds,
        }
    )
    rows = pd.concat([scores, labels], ignore_index=True).sort_values("at", kind="stable", ignore_index=True)
    rows["seq"] = np.arange(len(rows))  # arrival order: what orders a campaign's rows in a micro-batch
    folder.mkdir(parents=True)
    for i, part in enumerate(np.array_split(np.arange(len(rows)), files)):
        rows.iloc[part].to_parquet(folder / f"part-{i:05d}.parquet", index=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=6_000)
    parser.add_argument("--files", type=int, default=3, help="Parquet files: one micro-batch each")
    parser.add_argument("--workdir", type=Path, default=None, help="where the stream, checkpoint and output go")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="streamcal-spark-"))

    generated = generate(work / "campaigns.parquet", "campaigns", n=args.events, seed=7)
    events = pd.read_parquet(generated)
    write_arrivals(events, work / "arrivals", args.files)
    print(
        f"{len(events):,} clicks over {events['key'].nunique():,} campaigns -> "
        f"{2 * len(events):,} rows (score, then label) in {args.files} Parquet files under {work}"
    )

    spark = local_session("streamcal-example")
    try:
        start = time.perf_counter()
        schema = spark.read.parquet(str(work / "arrivals")).schema
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(work / "arrivals"))
        calibrated = calibrate_stream(
            stream,
            key_col="campaign",
            score_col="score",
            label_col="label",
            event_id_col="event_id",
            order_col="seq",
            calibrator=PAVCalibrator(buckets=64),
            global_dir=str(work / "checkpoint" / "streamcal-global"),  # pooled (the default prior strength)
        )
        query = write_stream(
            calibrated, str(work / "calibrated"), checkpoint=str(work / "checkpoint"), availableNow=True
        )
        query.awaitTermination()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        print(
            f"streaming query: {len(batches)} micro-batches in {time.perf_counter() - start:.1f} s "
            f"(the first starts Spark's Python workers)"
        )
        out = spark.read.parquet(str(work / "calibrated")).toPandas()
    finally:
        spark.stop()

    print("\nrows by status:", out["status"].value_counts().to_dict())
    dead = out[out["status"].isin(["rejected", "unmatched"])]
    print(f"dead letters: {len(dead)}" + ("" if dead.empty else f", e.g. {dead['error'].iloc[0]}"))
    scored = out[out["status"] == "scored"].merge(
        events.assign(event_id=[f"ev{i}" for i in range(len(events))])[["event_id", "label"]],
        on="event_id",
        suffixes=("_row", ""),
    )
    keys, labels = scored["campaign"].to_numpy(), scored["label"].to_numpy()
    print(
        f"\nfield ECE (per campaign |mean label - mean prediction|, weighted by traffic) over {len(scored):,} clicks:"
    )
    print(f"  raw scores             {field_ece(keys, labels, scored['score']):.4f}")
    print(f"  streamed probabilities {field_ece(keys, labels, scored['proba']):.4f}")
    raw = per_key_calibration(keys, labels, scored["score"])
    cal = per_key_calibration(keys, labels, scored["proba"])
    top = np.argsort(-raw["events"])[:5]
    print("\nbusiest campaigns: predicted / observed positives")
    print(f"{'campaign':>9} {'clicks':>7} {'positives':>9} {'raw':>7} {'streamed':>9}")
    for i in top:
        print(
            f"{raw['key'][i]:>9} {raw['events'][i]:>7} {raw['positives'][i]:>9.0f} "
            f"{raw['ratio'][i]:>7.2f} {cal['ratio'][i]:>9.2f}"
        )


if __name__ == "__main__":
    main()
