"""Keyed calibration in Spark Structured Streaming: events per second end to end, time per micro-batch.

Data: ``--events`` prequential events (score and label in one row) over ``--keys`` keys drawn from a
Zipf law (probability of the key of rank r proportional to r**-1.1), written as Parquet files of
``--batch`` rows each. The query reads one file per micro-batch (``maxFilesPerTrigger=1``) on
``local[2]`` with the RocksDB state store, calibrates with :func:`streamcal.spark.calibrate_stream`
(one ``PAVCalibrator`` per key, ``--buckets`` buckets) and writes to Spark's ``noop`` sink, so the
figure is the stateful stage: reading, shuffling by key, the Python processor, the state store.

The query runs twice: keys on their own (``prior_strength=0``, Spark's ``noop`` sink) and pooled
toward all traffic (the default strength; :func:`streamcal.spark.write_stream`'s sink, which merges
the shards' partial maps on the driver, then writes the rows to ``noop``). Baselines, run in this
process on the same micro-batches: one in-process calibrator per key in a dict, each micro-batch
grouped by key and run through ``prequential`` (what the processor computes, less Spark); and
Spark's floor: the same query (same source, shards, output columns, ``noop`` sink) with a
processor that keeps no state and answers nothing, which is what Spark costs without streamcal. The
first micro-batch (Python workers start, numba kernels load) is reported apart from the steady
state. ``--conf KEY=VALUE`` sets Spark settings and ``--floor-only`` measures only the floor, to
tune them.

Run: ``PYTHONPATH=. python benchmarks/bench_spark.py [--events 1000000] [--batch 100000] [--keys 100 10000 100000]``

``--quality`` measures instead what pooling toward all traffic, lagged by one micro-batch, does to
calibration, in process (no Spark): on the campaigns scenario (``streamcal generate --scenario
campaigns``, 2,000 Zipf keys with their own logit shift, slope and intercept), every event is
predicted before its label (prequential) by :func:`lagged_prequential`, which computes per
micro-batch and shard what ``calibrate_stream(prior_strength=m)`` computes (its TwsTester and
end-to-end tests check that equality bit for bit), for ``--strengths``, against the unlagged
in-process ``KeyedCalibrator`` at the same strengths and its default ``"auto"``. Log loss (1e-3
nats) over all events and over the tail (keys with fewer than 200 events), and ``field_ece``::

    PYTHONPATH=. python benchmarks/bench_spark.py --quality [--events 1000000] [--batch 100000]

``--tws`` measures instead the pooled processor's CPU time per micro-batch in Spark's ``TwsTester``
(no query, no JVM) over the same Zipf micro-batches (the first of ``--keys``), against the
processor of git revision ``--old REV`` in turns, micro-batch by micro-batch, checking that both
give the same output, and with keys on their own for scale::

    PYTHONPATH=. python benchmarks/bench_spark.py --tws --old REV [--events 800000] [--keys 10000]
"""

from __future__ import annotations

import argparse
import copy
import shutil
import subprocess
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from streamcal import KeyedCalibrator, PAVCalibrator, merge
from streamcal.metrics import field_ece, log_loss


def write_events(folder: Path, events: int, keys: int, batch: int, seed: int = 0) -> list[pa.Table]:
    """The stream as Parquet files of ``batch`` rows (file names in arrival order)."""
    rng = np.random.default_rng(seed)
    weight = 1.0 / np.arange(1, keys + 1) ** 1.1
    folder.mkdir(parents=True)
    tables = []
    for i, start in enumerate(range(0, events, batch)):
        n = min(batch, events - start)
        key = rng.choice(keys, size=n, p=weight / weight.sum()).astype(np.int64)
        score = rng.beta(2, 3, size=n)
        label = (rng.uniform(size=n) < score**1.5).astype(np.int8)
        table = pa.table({"key": key, "score": score, "label": label, "seq": np.arange(start, start + n)})
        pq.write_table(table, folder / f"part-{i:05d}.parquet")
        tables.append(table)
    return tables


def in_process(tables: list[pa.Table], template) -> tuple[float, int]:
    """Seconds for the per-key dict of calibrators over the micro-batches, and the distinct keys."""
    calibrators = {}
    start = time.perf_counter()
    for table in tables:
        key = table.column("key").to_numpy()
        order = np.argsort(key, kind="stable")
        key, score = key[order], table.column("score").to_numpy()[order]
        label = table.column("label").to_numpy()[order]
        cuts = np.flatnonzero(np.diff(key)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, key.size], strict=True):
            cal = calibrators.get(key[lo])
            if cal is None:
                cal = calibrators[key[lo]] = template.clone()
            cal.prequential(score[lo:hi], label[lo:hi])
    return time.perf_counter() - start, len(calibrators)


class PassThrough:
    """A stateless processor with the calibrating processor's input and output: Spark's floor."""

    @staticmethod
    def make():
        from pyspark.sql.streaming import StatefulProcessor

        class _PassThrough(StatefulProcessor):
            def init(self, handle) -> None:
                pass

            def handleInputRows(self, key, rows, timerValues):
                for frame in rows:
                    n = len(frame)
                    yield pd.DataFrame(
                        {
                            "key": frame["key"].to_numpy(dtype=object),
                            "event_id": frame["event_id"].to_numpy(dtype=object),
                            "time": frame["time"].to_numpy(dtype=np.float64, na_value=np.nan),
                            "score": frame["score"].to_numpy(dtype=np.float64, na_value=np.nan),
                            "label": frame["label"].to_numpy(dtype=np.float64, na_value=np.nan),
                            "proba": np.full(n, np.nan),
                            "llr": np.full(n, np.nan),
                            "status": np.full(n, "scored_learned", dtype=object),
                            "error": np.full(n, None, dtype=object),
                            "n_learned": np.zeros(n, dtype=np.int64),
                            "n_pending": np.zeros(n, dtype=np.int64),
                        }
                    )

            def close(self) -> None:
                pass

        return _PassThrough()


def lagged_prequential(keys, scores, labels, *, batch: int, strength: float, shards: int, template) -> np.ndarray:
    """Prequential probabilities of keys pooled toward all traffic lagged by one micro-batch: per
    micro-batch of ``batch`` events and shard (``key % shards``), a copy of the all-traffic keyed
    calibrator after the previous micro-batch takes the rows of the shard's keys, runs the shard's
    events, gives the rows back; the all-traffic calibrator then merges each shard's labelled events
    of the micro-batch, in shard order."""
    everything, rows_of = None, {}
    proba = np.empty(keys.size)
    shard = keys % shards
    for lo in range(0, keys.size, batch):
        hi = min(lo + batch, keys.size)
        deltas = []
        for s in range(shards):
            at = lo + np.flatnonzero(shard[lo:hi] == s)
            if not at.size:
                continue
            engine = KeyedCalibrator(template, prior_strength=strength)
            if everything is not None:
                engine = copy.deepcopy(everything)
            names = np.unique(keys[at]).tolist()
            for key in names:
                if key in rows_of:
                    engine.import_key(key, rows_of[key])
            proba[at] = engine.prequential(keys[at], scores[at], labels[at])[0]
            rows_of.update({key: engine.export_key(key) for key in names})
            delta = KeyedCalibrator(template, prior_strength=strength)
            delta.update(np.zeros(at.size, dtype=np.int64), scores[at], labels[at]).drop_key(0)
            deltas.append(delta)
        everything = merge(deltas if everything is None else [everything, *deltas])
    return proba


def quality(events: int, batch: int, strengths: list[float], seed: int = 0) -> None:
    """Print the calibration of lagged pooling against the in-process keyed calibrator."""
    from streamcal.replay import generate

    with tempfile.TemporaryDirectory() as tmp:
        table = pq.read_table(generate(Path(tmp) / "campaigns.parquet", "campaigns", n=events, seed=seed))
    keys = table["key"].to_numpy().astype(np.int64)
    scores = table["score"].to_numpy()
    labels = table["label"].to_numpy(zero_copy_only=False).astype(np.float64)
    counts = np.bincount(keys)
    tail = counts[keys] < 200
    template = PAVCalibrator(prior=None)
    print(f"campaigns, {events:,} events, seed {seed}, micro-batches of {batch:,}, 8 shards; tail {tail.mean():.1%}")
    print(f"{'method':<52} {'log loss':>9} {'tail':>8} {'field_ece':>10} {'cpu s':>7}")

    def show(name, run):
        start = time.process_time()
        proba = run()
        cpu = time.process_time() - start
        print(
            f"{name:<52} {1e3 * log_loss(labels, proba):>9.3f} {1e3 * log_loss(labels[tail], proba[tail]):>8.3f} "
            f"{field_ece(keys, labels, proba):>10.4f} {cpu:>7.1f}"
        )

    show("in process, KeyedCalibrator(prior_strength='auto')",
         lambda: KeyedCalibrator(template).prequential(keys, scores, labels)[0])
    for m in strengths:
        show(f"in process, prior_strength={m:g}",
             lambda m=m: KeyedCalibrator(template, prior_strength=m).prequential(keys, scores, labels)[0])
        if m == 0:  # independent keys: calibrate_stream equals the in-process calibrator bit for bit
            continue
        show(f"Spark, lagged one micro-batch, prior_strength={m:g}",
             lambda m=m: lagged_prequential(keys, scores, labels, batch=batch, strength=m, shards=8, template=template))


def processor_at(rev: str):
    """The ``KeyedCalibrationProcessor`` class of ``streamcal/spark/_processor.py`` at git revision
    ``rev``, with that revision's ``_rows.py`` (read with ``git show``, run on today's streamcal)."""
    modules = {}
    for name in ("_rows", "_processor"):
        path = f"streamcal/spark/{name}.py"
        source = subprocess.run(["git", "show", f"{rev}:{path}"], check=True, capture_output=True, text=True).stdout
        module = types.ModuleType(f"{name}_at_{rev}")
        exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
        modules[name] = module
    for name in ("OUTPUT_COLUMNS", "KeyState", "run_rows"):  # the processor's imports from _rows
        setattr(modules["_processor"], name, getattr(modules["_rows"], name))
    return modules["_processor"].KeyedCalibrationProcessor


def tws_cpu(args, template) -> None:
    """The pooled processor's CPU time per micro-batch in Spark's ``TwsTester`` (no query, no JVM):
    the shards' ``handleInputRows`` calls of each micro-batch, this code against the processor of
    ``--old REV``, each with its own tester and map directory, taking turns micro-batch by
    micro-batch (which goes first alternates), and for scale this code with keys on their own
    (``prior_strength=0``); the sink's merge of the partial maps runs between micro-batches, timed
    apart (the driver's work, the same in both). Checks that both pooled processors give the same
    output."""
    from pyspark.sql.streaming.tws_tester import TwsTester

    from streamcal.spark import DEFAULT_STRENGTH, KeyedCalibrationProcessor
    from streamcal.spark._pool import merge_partials

    versions = {"this code": KeyedCalibrationProcessor}
    if args.old:
        versions[f"code at {args.old}"] = processor_at(args.old)
    keys = args.keys[0]
    work = Path(tempfile.mkdtemp(prefix="bench-tws-"))
    try:
        tables = write_events(work / "events", args.events, keys, args.batch)
        dirs = {name: str(work / f"global-{i}") for i, name in enumerate(versions)}
        testers = {
            name: TwsTester(cls(template, prior_strength=DEFAULT_STRENGTH, global_dir=dirs[name]))
            for name, cls in versions.items()
        }
        alone = "keys on their own"  # this code at prior_strength=0, for scale (other outputs)
        versions[alone] = KeyedCalibrationProcessor
        testers[alone] = TwsTester(KeyedCalibrationProcessor(template))
        alone_old = f"on their own, code at {args.old}"
        if args.old:
            versions[alone_old] = versions[f"code at {args.old}"]
            testers[alone_old] = TwsTester(versions[alone_old](template))
        cpu = {name: [] for name in versions}
        merges = {name: [] for name in versions}  # the sink's merge of the partial maps (driver)
        print(f"TwsTester, pooled (prior_strength={DEFAULT_STRENGTH:g}), {keys:,} Zipf keys, {len(tables)} "
              f"micro-batches of {args.batch:,}, {args.shards} shards; CPU seconds per micro-batch")
        for b, table in enumerate(tables):
            frame = table.to_pandas()
            shards = frame["key"].to_numpy() % args.shards
            rows = pd.DataFrame({
                "key": frame["key"].astype(str).to_numpy(dtype=object), "event_id": None,
                "score": frame["score"].to_numpy(np.float64), "label": frame["label"].to_numpy(np.float64),
                "time": np.nan, "order": frame["seq"].to_numpy(np.float64), "batch_ms": 1000 * (b + 1),
            })
            parts = [(shard, rows[shards == shard].reset_index(drop=True)) for shard in range(args.shards)]
            outputs, outputs_alone = {}, {}
            names = list(versions) if b % 2 == 0 else list(versions)[::-1]
            for name in names:
                tester = testers[name]
                start = time.process_time()
                got = [tester.testInPandas(shard, part) for shard, part in parts if len(part)]
                cpu[name].append(time.process_time() - start)
                out = pd.concat(got, ignore_index=True)
                if name in (alone, alone_old):
                    outputs_alone[name] = out
                    continue
                partial = out[out["status"] == "partial"]
                start = time.process_time()
                merge_partials(dirs[name], 1000 * (b + 1), b, [(int(r.event_id), r.partial) for r in partial.itertuples()])
                merges[name].append(time.process_time() - start)
                outputs[name] = out[out["status"] != "partial"]  # both emit the rows in the same order
            for group in (outputs, outputs_alone):
                if len(group) < 2:
                    continue
                first, *rest = group.values()
                for other in rest:
                    same = all(
                        np.array_equal(first[c].to_numpy(), other[c].to_numpy(), equal_nan=True) for c in ("proba", "llr")
                    ) and first["status"].tolist() == other["status"].tolist()
                    if not same:
                        msg = f"micro-batch {b}: the two processors' outputs differ"
                        raise AssertionError(msg)
            print(f"  micro-batch {b}: " + ", ".join(f"{name} {cpu[name][-1]:.2f} s" for name in versions))
        print(f"{'processor':<28} {'first s':>8} {'median s':>9} {'events/s (CPU)':>15}")
        for name in versions:
            steady = np.array(cpu[name][1:])
            print(f"{name:<28} {cpu[name][0]:>8.2f} {np.median(steady):>9.2f} {args.batch / np.median(steady):>15,.0f}")
        print(f"the sink's merge of the partial maps into the next map (driver, this code): median "
              f"{np.median(merges['this code'][1:]):.3f} s of CPU per micro-batch")
        if args.old:
            new, old = (np.array(cpu[name][1:]) for name in list(versions)[:2])
            new_alone, old_alone = (np.array(cpu[name][1:]) for name in (alone, alone_old))
            print(f"ratio this code / code at {args.old} (median of the micro-batches after the first): pooled "
                  f"{np.median(new / old):.3f}, keys on their own {np.median(new_alone / old_alone):.3f}; "
                  "outputs equal: yes")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def spark_run(spark, folder: Path, work: Path, template, *, floor: bool = False, strength: float = 0.0,
              shards: int = 8) -> dict:
    from streamcal.spark import calibrate_stream, write_stream

    schema = spark.read.parquet(str(folder)).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
    columns = {"key_col": "key", "score_col": "score", "label_col": "label", "order_col": "seq", "shards": shards}
    if floor:
        from streamcal.spark import _processor

        real = _processor.KeyedCalibrationProcessor
        _processor.KeyedCalibrationProcessor = lambda *args, **kwargs: PassThrough.make()
        try:
            out = calibrate_stream(stream, **columns, prior_strength=0)
        finally:
            _processor.KeyedCalibrationProcessor = real
    else:
        out = calibrate_stream(
            stream, **columns, calibrator=template, prior_strength=strength, global_dir=str(work / "global")
        )
    start = time.perf_counter()
    query = write_stream(out, str(work / "out"), checkpoint=str(work / "checkpoint"), format="noop", availableNow=True)
    query.awaitTermination()
    wall = time.perf_counter() - start
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    seconds = [p["durationMs"]["triggerExecution"] / 1e3 for p in batches]
    rows = [p["numInputRows"] for p in batches]
    return {"wall": wall, "first": seconds[0], "steady": seconds[1:], "rows": rows}


def _rate(run: dict) -> float:
    """Events per second over the micro-batches after the first."""
    return sum(run["rows"][1:]) / sum(run["steady"]) if run["steady"] else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--buckets", type=int, default=None, help="buckets per calibrator (default: PAV's)")
    parser.add_argument("--quality", action="store_true", help="lagged pooling's calibration, in process")
    parser.add_argument("--strengths", type=float, nargs="+", default=[0.0, 10.0, 30.0, 100.0, 300.0, 1000.0])
    parser.add_argument("--shards", type=int, default=8, help="calibrate_stream's shards")
    parser.add_argument("--floor-only", action="store_true", help="measure only Spark's floor (tuning settings)")
    parser.add_argument(
        "--conf", nargs="*", default=[], metavar="KEY=VALUE", help="Spark settings for the session (tuning)"
    )
    parser.add_argument("--tws", action="store_true", help="the pooled processor's CPU per micro-batch in TwsTester")
    parser.add_argument("--old", metavar="REV", help="--tws: also time the processor of this git revision")
    args = parser.parse_args()
    if args.quality:
        quality(args.events, args.batch, args.strengths)
        return
    template = PAVCalibrator(prior=None, **({} if args.buckets is None else {"buckets": args.buckets}))
    if args.tws:
        tws_cpu(args, template)
        return
    from streamcal.spark import DEFAULT_STRENGTH, local_session

    conf = {"spark.sql.shuffle.partitions": "2", **dict(item.split("=", 1) for item in args.conf)}
    spark = local_session("streamcal-bench", **conf)
    print(f"{args.events:,} events in micro-batches of {args.batch:,}, local[2], RocksDB state store, "
          f"{args.shards} shards, settings {conf}")
    print(
        f"{'keys':>8} {'distinct':>9} {'floor events/s':>15} {'prior_strength':>15} {'events/s':>10} "
        f"{'first s':>8} {'batch s':>8} {'/ floor':>8} {'in-process events/s':>20} {'/ in-process':>13}"
    )
    try:
        for keys in args.keys:
            work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
            try:
                tables = write_events(work / "events", args.events, keys, args.batch)
                floor = spark_run(spark, work / "events", work / "floor", template, floor=True, shards=args.shards)
                print(f"{keys:>8,} {'':>9} {_rate(floor):>15,.0f}")
                if args.floor_only:
                    continue
                base, distinct = in_process(tables, template)
                for strength in (0.0, DEFAULT_STRENGTH):
                    run = spark_run(
                        spark, work / "events", work / f"run-{strength:g}", template, strength=strength,
                        shards=args.shards,
                    )
                    steady = np.array(run["steady"])
                    rate = _rate(run)
                    print(
                        f"{keys:>8,} {distinct:>9,} {'':>15} {strength:>15g} {rate:>10,.0f} {run['first']:>8.1f} "
                        f"{np.median(steady):>8.2f} {rate / _rate(floor):>8.3f} {args.events / base:>20,.0f} "
                        f"{rate / (args.events / base):>13.3f}"
                    )
                    print(
                        f"         whole query {run['wall']:.1f} s ({args.events / run['wall']:,.0f} events/s with "
                        f"start-up); micro-batches after the first: {', '.join(f'{s:.1f}' for s in steady)} s"
                    )
            finally:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
