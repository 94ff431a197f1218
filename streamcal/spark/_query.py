"""Wiring the keyed processor into a Structured Streaming query (:func:`calibrate_stream`), the sink
that keeps the pooled maps (:func:`write_stream`), and a local session to run it on."""

from __future__ import annotations

import os
import sys

__all__ = ["DEFAULT_STRENGTH", "calibrate_stream", "local_session", "write_stream"]

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: The default prior strength in Spark (pseudo-events): on the campaigns scenario it gives the
#: lowest field ECE of the strengths measured and most of the log loss that pooling gains over
#: independent keys (docs/spark.md, "The default").
DEFAULT_STRENGTH = 100.0
_GLOBAL_DIR = "streamcal.global_dir"  # the `partial` column's metadata: where the maps go
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "boolean", "decimal", "timestamp")
_KEY_TYPES = ("string", "tinyint", "smallint", "int", "bigint")  # and varchar(n), char(n): the keys in process


def require_pyspark():
    """Import pyspark, or raise an ImportError that names the extra to install."""
    try:
        import pyspark
        from pyspark.sql.streaming import StatefulProcessor  # noqa: F401  (Spark 4.0 and later)
        from pyspark.sql.streaming.tws_tester import TwsTester  # noqa: F401  (Spark 4.2 and later)
    except ImportError as exc:
        from streamcal._install import install_hint

        msg = f"streamcal.spark needs pyspark 4.2 or later: install the extra, `{install_hint('spark')}` ({exc})."
        raise ImportError(msg) from None
    return pyspark


def local_session(app_name: str = "streamcal", master: str = "local[2]", **conf):
    """A SparkSession for keyed calibration: RocksDB state store, Python workers on this interpreter.

    Spark's Python workers must run the interpreter that holds streamcal, so ``PYSPARK_PYTHON`` is
    set to ``sys.executable`` (before the JVM starts, which reads it). ``conf`` adds or overrides
    Spark settings (dots written as in Spark: ``local_session(**{"spark.sql.shuffle.partitions": "8"})``).
    """
    require_pyspark()
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    settings = {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        # a micro-batch's commit writes the changed values to a changelog instead of snapshotting
        # the store (snapshots follow in the background): each shard rewrites its whole state row
        # every micro-batch, and the commit took 0.4-0.6 s per micro-batch at 1e4 keys without it
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        **conf,
    }
    builder = SparkSession.builder.appName(app_name).master(master)
    for name, value in settings.items():
        builder = builder.config(name, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _column_type(df, name: str, arg: str, *, numeric: bool) -> str:
    fields = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    if name not in fields:
        msg = f"`{arg}` must name a column of `df`; got {name!r}, columns are {list(fields)[:10]!r}."
        raise KeyError(msg)
    kind = fields[name]
    if numeric and not kind.startswith(_NUMERIC):
        msg = f"`{arg}` must name a numeric or boolean column; got {name!r} of type {kind}."
        raise TypeError(msg)
    return kind


def _key_type(df, key_col: str) -> str:
    """The type of the key column: strings or integers, the keys a keyed calibrator takes in
    process (the state holds a key as its text, and a float's text names no key: ``1.0``, ``-0.0``)."""
    kind = _column_type(df, key_col, "key_col", numeric=False)
    if kind not in _KEY_TYPES and not kind.startswith(("varchar(", "char(")):
        msg = (
            f"`key_col` must name a string or integer column (the keys, as a keyed calibrator takes them); got "
            f"{key_col!r} of type {kind}. Cast it first (to bigint, or to string) if its values name keys."
        )
        raise TypeError(msg)
    return kind


def _check_times(template, time_col: str | None) -> None:
    """A template whose window learns at event times needs ``time_col``."""
    from streamcal.windows import as_window

    window = as_window(template.window)
    if window.uses_times and time_col is None:
        msg = (
            f"`time_col` must name the event-time column: `calibrator` has the window {window!r}, which learns at "
            "event times; got None."
        )
        raise ValueError(msg)


def _absolute(global_dir: str | None) -> str | None:
    """A local directory as an absolute path (what ``pyarrow.fs`` reads); a URI as it is."""
    if global_dir is None or "://" in global_dir:
        return global_dir
    return os.path.abspath(global_dir)


def _ttl_ms(ttl) -> int | None:
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if hasattr(ttl, "total_seconds") else ttl
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        msg = f"`ttl` must be a positive number of seconds or a timedelta; got {ttl!r}."
        raise ValueError(msg)
    return max(1, round(seconds * 1000))


def _fresh(calibrator):
    from streamcal.isotonic.streaming import PAVCalibrator

    if calibrator is None:
        return PAVCalibrator(prior=None)  # sparse rows per key (a score prior per key needs dense ones)
    if not isinstance(calibrator, PAVCalibrator):
        kind = type(calibrator).__name__
        msg = f"`calibrator` must be a streamcal.PAVCalibrator (the template of every key); got {kind}."
        raise TypeError(msg)
    if calibrator.n_learned:
        msg = f"`calibrator` must be fresh (keys start from clones); it has learned {calibrator.n_learned} events."
        raise ValueError(msg)
    return calibrator.clone()


def calibrate_stream(
    df,
    *,
    key_col: str,
    score_col: str,
    label_col: str | None = None,
    event_id_col: str | None = None,
    time_col: str | None = None,
    order_col: str | None = None,
    calibrator=None,
    ttl=None,
    max_pending: int = 100_000,
    shards: int = 8,
    prior_strength=DEFAULT_STRENGTH,
    global_dir: str | None = None,
):
    """Calibrate a (streaming) DataFrame of scored events, one calibrator per key, in Spark state.

    Parameters
    ----------
    df
        A streaming (or batch) pyspark DataFrame. Each row is a score row (score, no label), a label
        row (label and event id, no score: the label of an earlier score row with that event id, as
        chargebacks follow clicks) or a row with both (predicted, then learned).
    key_col, score_col
        The calibration key (a string or integer column, the keys a keyed calibrator takes in process;
        a float, decimal, boolean or other column is refused: cast it first) and the score (numeric).
        A score outside the template's buckets' range (``[0, 1]`` for the default) is a rejected row.
    label_col
        The 0/1 label (numeric or boolean); ``None``: the stream has no labels (every row is scored).
    event_id_col
        Joins label rows to their score rows; cast to string.
    time_col
        Event time (numeric seconds, or a timestamp with or without time zone, read as seconds from
        1970-01-01 00:00, UTC or on its own clock), given to the calibrator's time windows; needed
        when the template's window learns at event times (``TimeWindow``, ``Decay(by="time")``):
        see docs/spark.md, "Time windows", for the rows such a window refuses.
    order_col
        Orders a key's rows within a micro-batch (Spark does not keep the source's order inside a
        group); default ``time_col``. Rows are applied by ascending order, ties in arrival order.
        Between micro-batches the order is the stream's.
    calibrator
        The template of every key's calibrator: a fresh :class:`streamcal.PAVCalibrator` (default
        ``PAVCalibrator(prior=None)``: a key's state is a sparse row of the buckets it holds; a
        template with its score prior on keeps a dense histogram per key), as
        :class:`streamcal.KeyedCalibrator` takes it (``prior_strength=0``: keys do not pool, see
        docs/spark.md).
    ttl
        Seconds (or a ``timedelta``) of processing time after which an idle key expires: its
        calibrator and pending scores are cleared and one ``"expired"`` row reports the counts.
    max_pending
        Per key, the most scores kept waiting for labels; the oldest beyond it are dropped, each
        with a ``"dropped"`` row.
    shards
        Spark's grouping key is a shard of keys (``pmod(xxhash64(key), shards)``): the processor runs
        a shard's rows of a micro-batch in one compiled call and reads and writes only the keys that
        have rows. A few shards per core keep every core busy; the number is part of the state's
        layout, so it stays fixed for the life of a checkpoint.
    prior_strength
        Pseudo-events pooling each key toward the global map of **all traffic**, lagged by one
        micro-batch: during a micro-batch, the map after the previous one (see docs/spark.md for
        what that changes against the in-process :class:`streamcal.KeyedCalibrator`). Default
        ``DEFAULT_STRENGTH`` (100), which needs ``global_dir``. The output then also holds one
        ``"partial"`` row per shard and micro-batch (with a binary ``partial`` column), which
        :func:`streamcal.spark.write_stream` merges into the next map and does not write. ``0``:
        every key on its own, an independent copy of the template, exactly as in process (no
        ``global_dir``, no partial rows, any sink). ``"auto"`` is refused (its shift needs every
        key's evidence).
    global_dir
        With ``prior_strength > 0``: the directory where the all-traffic map of each micro-batch is
        written and read (a local path or a URI that ``pyarrow.fs`` reads: ``hdfs://``, ``s3://``,
        ...). Put it under the query's checkpoint, and keep it with the checkpoint: a restart reads
        the maps it holds.

    Returns
    -------
    DataFrame
        One row per input row (and per expiry or drop): ``key_col``, then ``event_id``, ``time``,
        ``score``, ``label``, ``proba``, ``llr``, ``status``, ``error``, ``n_learned``,
        ``n_pending``. ``status`` is one of :data:`streamcal.spark.STATUSES`; ``"rejected"`` and
        ``"unmatched"`` rows are the dead letters, with ``error`` saying why. Pooled, also the
        ``partial`` column and one ``"partial"`` row per shard and micro-batch: write it with
        :func:`streamcal.spark.write_stream`, which keeps the all-traffic maps from them.
    """
    require_pyspark()
    from pyspark.sql import functions as F

    from streamcal.spark._processor import KeyedCalibrationProcessor
    from streamcal.spark._rows import OUTPUT_COLUMNS

    template = _fresh(calibrator)
    _check_times(template, time_col)
    ttl_ms = _ttl_ms(ttl)
    if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 0:
        msg = f"`max_pending` must be an int >= 0; got {max_pending!r}."
        raise ValueError(msg)
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        msg = f"`shards` must be an int >= 1; got {shards!r}."
        raise ValueError(msg)
    from streamcal.spark._pool import check_pooling

    strength = check_pooling(prior_strength, global_dir)
    global_dir = _absolute(global_dir) if strength > 0 else None
    key_type = _key_type(df, key_col)
    _column_type(df, score_col, "score_col", numeric=True)

    def column(name, arg, kind, *, numeric=True):
        if name is None:
            return F.lit(None).cast(kind)
        found = _column_type(df, name, arg, numeric=numeric)
        if found == "timestamp":
            return F.unix_micros(F.col(name)).cast("double") / 1e6
        if found == "timestamp_ntz":  # a time without zone (pandas writes these): seconds from 1970-01-01 00:00
            epoch = F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")
            return F.timestamp_diff("MICROSECOND", epoch, F.col(name)).cast("double") / 1e6
        return F.col(name).cast(kind)

    order = order_col if order_col is not None else time_col
    key = F.col(key_col).cast("string")
    rows = df.select(
        F.pmod(F.xxhash64(key), F.lit(shards)).alias("shard"),
        key.alias("key"),
        column(event_id_col, "event_id_col", "string", numeric=False).alias("event_id"),
        column(score_col, "score_col", "double").alias("score"),
        column(label_col, "label_col", "double").alias("label"),
        column(time_col, "time_col", "double").alias("time"),
        column(order, "order_col", "double").alias("order"),
        # in a micro-batch, current_timestamp() is the micro-batch's timestamp, which Spark keeps in
        # its offset log and reuses when it runs the micro-batch again: it names the pooled maps
        *([F.unix_millis(F.current_timestamp()).alias("batch_ms")] if global_dir is not None else []),
    )
    schema = ", ".join(["key string", *(f"{name} {kind}" for name, kind in OUTPUT_COLUMNS.items())])
    if global_dir is not None:
        schema += ", partial binary"
    remember = label_col is not None and event_id_col is not None
    processor = KeyedCalibrationProcessor(
        template, ttl_ms=ttl_ms, max_pending=max_pending, remember=remember, prior_strength=strength,
        global_dir=global_dir,
    )
    out = rows.groupBy("shard").transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=schema,
        outputMode="Append",
        timeMode="None" if ttl_ms is None else "ProcessingTime",
    )
    # the key goes back to its type (the state holds it as a string)
    columns = [F.col("key").cast(key_type).alias(key_col), *OUTPUT_COLUMNS]
    if global_dir is not None:
        columns.append(F.col("partial").alias("partial", metadata={_GLOBAL_DIR: global_dir}))
    return out.select(*columns)


def write_stream(calibrated, path: str, *, checkpoint: str, format: str = "parquet", **trigger):
    """Start the query that writes ``calibrated`` (:func:`calibrate_stream`'s output) to ``path``.

    Without pooling it is Spark's own file sink (``format``, exactly once through the sink's log).
    Pooled (``prior_strength > 0``), each micro-batch goes through ``foreachBatch``: the
    ``"partial"`` rows are merged into the all-traffic map, written to ``global_dir`` before the
    micro-batch commits, and the other rows are written to ``path/batch_id=<id>`` (overwritten
    when a micro-batch runs again, so each is written once; ``spark.read.parquet(path)`` reads
    them all, with a ``batch_id`` column). ``trigger`` is Spark's (``availableNow=True``,
    ``processingTime="1 minute"``); returns the ``StreamingQuery``.
    """
    fields = {field.name: field for field in calibrated.schema.fields}
    writer = calibrated.writeStream.option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    if "partial" not in fields:
        return writer.format(format).option("path", path).start()
    global_dir = fields["partial"].metadata.get(_GLOBAL_DIR)
    if global_dir is None:
        msg = "`calibrated` has a `partial` column but no global map directory: pass calibrate_stream's output."
        raise ValueError(msg)

    def write_batch(frame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        from streamcal.spark._pool import merge_partials

        frame.persist()
        try:
            partials = frame.filter(F.col("status") == "partial").select("event_id", "time", "partial").collect()
            if partials:
                batch_ms = int(partials[0]["time"])
                shards = [(int(r["event_id"]), bytes(r["partial"])) for r in partials]
                merge_partials(global_dir, batch_ms, batch_id, shards)
            rows = frame.filter(F.col("status") != "partial").drop("partial")
            rows.write.mode("overwrite").format(format).save(f"{path.rstrip('/')}/batch_id={batch_id}")
        finally:
            frame.unpersist()

    return writer.foreachBatch(write_batch).start()
