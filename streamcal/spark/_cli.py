"""``streamcal stream``: keyed calibration of a directory of Parquet files as a Spark stream.

The command is :func:`streamcal.spark.calibrate_stream` between a Parquet file source (new files in
the directory are new micro-batches) and a Parquet file sink, with a checkpoint directory, on a
local session (``--master``). Errors are one line, naming the option as typed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from streamcal.spark._query import DEFAULT_STRENGTH

__all__ = ["STREAM_FLAGS", "add_stream_arguments", "run_stream"]


def _strength(text: str) -> float:
    """``--prior-strength``: a number of pseudo-events >= 0 (checked by ``calibrate_stream``)."""
    try:
        return float(text)
    except ValueError:
        msg = f"expected a number of pseudo-events >= 0; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


#: Python parameter -> command-line flag (how messages name options).
STREAM_FLAGS = {
    "key_col": "--key-col",
    "score_col": "--score-col",
    "label_col": "--label-col",
    "event_id_col": "--event-id-col",
    "time_col": "--time-col",
    "order_col": "--order-col",
    "ttl": "--ttl",
    "max_pending": "--max-pending",
    "shards": "--shards",
    "prior_strength": "--prior-strength",
    "df": "SOURCE",
}


def add_stream_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from streamcal.replay._cli import _positive_count

    parser.description = (
        "Calibrate a stream of scored events with one calibrator per key, in Spark Structured Streaming: read "
        "the Parquet files of SOURCE as they arrive (one file per micro-batch), write the calibrated rows to "
        "OUTPUT as Parquet (OUTPUT/batch_id=N per micro-batch when pooled), keep each key's state in Spark's "
        "RocksDB state store and the all-traffic maps under --checkpoint. Rerun with the same --checkpoint to "
        "continue where it stopped."
    )
    parser.add_argument("source", metavar="SOURCE", help="directory of Parquet files (the stream)")
    parser.add_argument("output", metavar="OUTPUT", help="directory the calibrated rows are written to")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (state and offsets)")
    parser.add_argument("--key-col", required=True, help="column of the calibration key")
    parser.add_argument("--score-col", default="score", help="column of the score (default score)")
    parser.add_argument("--label-col", default=None, help="column of the 0/1 label (default: none)")
    parser.add_argument("--event-id-col", default=None, help="column joining label rows to their score rows")
    parser.add_argument("--time-col", default=None, help="column of event time (numeric seconds or timestamp)")
    parser.add_argument("--order-col", default=None, help="column ordering a key's rows (default --time-col)")
    parser.add_argument("--buckets", type=_positive_count, default=None, help="buckets per key (default PAV's)")
    parser.add_argument("--ttl", type=float, default=None, help="seconds after which an idle key expires")
    parser.add_argument("--max-pending", type=int, default=100_000, help="per key, scores awaiting labels")
    parser.add_argument("--shards", type=_positive_count, default=8, help="shards of keys (fixed per checkpoint)")
    parser.add_argument(
        "--prior-strength",
        type=_strength,
        default=DEFAULT_STRENGTH,
        help=(
            "pseudo-events pooling each key toward the global map of all traffic after the previous micro-batch "
            f"(kept under --checkpoint); default {DEFAULT_STRENGTH:g}; 0: keys on their own"
        ),
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--once",
        action="store_true",
        help="process the files present and stop (Spark's availableNow trigger); default: keep watching SOURCE",
    )
    return parser


def run_stream(args: argparse.Namespace) -> int:
    from streamcal.replay._cli import _fail

    source = Path(args.source)
    if not source.is_dir() or not any(source.glob("*.parquet")):
        return _fail(ValueError(f"SOURCE must be a directory holding Parquet files; got {args.source!r}"), {})
    if args.once and args.ttl is not None:
        # availableNow runs empty micro-batches until the last timer fires: a one-off run would wait out the ttl
        msg = (
            f"--once with --ttl would run until the last key's timer fires ({args.ttl:g} seconds after its last row): "
            "leave --ttl out of a one-off run, or keep the command watching SOURCE"
        )
        return _fail(ValueError(msg), {})
    try:
        from streamcal import PAVCalibrator
        from streamcal.spark import calibrate_stream, local_session, write_stream

        # sparse rows per key (a score prior per key would keep a dense histogram per key)
        template = PAVCalibrator(prior=None, **({} if args.buckets is None else {"buckets": args.buckets}))
        spark = local_session("streamcal-stream", master=args.master)
        schema = spark.read.parquet(str(source)).schema
        events = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
        calibrated = calibrate_stream(
            events,
            key_col=args.key_col,
            score_col=args.score_col,
            label_col=args.label_col,
            event_id_col=args.event_id_col,
            time_col=args.time_col,
            order_col=args.order_col,
            calibrator=template,
            ttl=args.ttl,
            max_pending=args.max_pending,
            shards=args.shards,
            prior_strength=args.prior_strength,
            global_dir=str(Path(args.checkpoint) / "streamcal-global"),
        )
    except KeyError as exc:  # str() of a KeyError quotes its message
        return _fail(exc.args[0] if exc.args else exc, STREAM_FLAGS)
    except (ImportError, TypeError, ValueError) as exc:
        return _fail(exc, STREAM_FLAGS)
    trigger = {"availableNow": True} if args.once else {}
    query = write_stream(calibrated, args.output, checkpoint=args.checkpoint, **trigger)
    print(f"calibrating {source} into {args.output} (checkpoint {args.checkpoint}); Ctrl-C stops")
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
        raise
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"{rows:,} rows in the last {len(query.recentProgress)} micro-batches")
    return 0
