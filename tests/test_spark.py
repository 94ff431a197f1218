"""The keyed Spark processor, unit-tested with Spark's ``TwsTester`` (no query, no JVM): per key, its
outputs equal an in-process calibrator's on that key's rows in order, bit for bit; labels arriving
after their scores join them by event id; idle keys expire; bad rows come out as dead letters. Then
one query end to end on ``local[2]``, stopped and restarted from its checkpoint."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra); CI installs it with the test extra")
pytest.importorskip("pyspark.sql.streaming.tws_tester", reason="TwsTester needs pyspark 4.2 or later")

from pyspark.sql.streaming.tws_tester import TwsTester
from spark_cases import (
    assert_equal_to_reference,
    key_state,
    keyed_reference,
    lagged_reference,
    run_in_batches,
    run_pooled,
    shard_of,
    stream_rows,
)

from streamcal import PAVCalibrator
from streamcal.spark import KeyedCalibrationProcessor, calibrate_stream
from streamcal.spark._query import _fresh, _ttl_ms


@pytest.mark.parametrize("read_back", [False, True], ids=["kept-in-worker", "read-from-store"])
def test_per_key_outputs_equal_an_in_process_calibrator_bit_for_bit(rng, monkeypatch, read_back):
    """With ``read_back``, the worker keeps no shard state between micro-batches: every shard's
    calibrator is read back from the state store (as after a restart) and checked."""
    from streamcal.spark import _processor

    if read_back:
        monkeypatch.setattr(_processor, "_RECENT_SIZE", 0)
    keys = ["a", "b", "c", "d"]
    frame = stream_rows(rng, 3000, keys, label_delay=None)
    tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None)))
    out = run_in_batches(tester, frame, 7, rng)
    assert len(out) == len(frame)
    assert set(out["status"]) == {"scored_learned"}
    assert_equal_to_reference(out, frame, keys)
    # the state holds what one calibrator per key learned
    assert key_state(tester, "a")[0] == int((frame["key"] == "a").sum())


def test_labels_arriving_later_join_their_pending_scores(rng):
    keys = [1, 2, 3]
    frame = stream_rows(rng, 2000, keys, label_delay=150)  # labels 150 events later: many batches later
    tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None)))
    out = run_in_batches(tester, frame, 9, rng)
    assert out["status"].value_counts().to_dict() == {"scored": 2000, "learned": 2000}
    assert_equal_to_reference(out, frame, keys)
    learned = out[out["status"] == "learned"].set_index("event_id")["score"]
    scored = out[out["status"] == "scored"].set_index("event_id")["score"]
    assert np.array_equal(learned.loc[scored.index].to_numpy(), scored.to_numpy())  # each label found its score
    for key in keys:
        state = key_state(tester, key)
        assert state[0] == int((frame["key"] == key).sum()) // 2
        assert state[1] == []  # every pending score got its label


def test_pending_scores_are_bounded_and_dropped_ones_are_reported(rng):
    frame = stream_rows(rng, 40, ["k"], label_delay=30)
    tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None), max_pending=5))
    out = run_in_batches(tester, frame, 8, rng)  # the bound holds between micro-batches
    counts = out["status"].value_counts().to_dict()
    assert counts["scored"] == 40
    dropped = out[out["status"] == "dropped"]
    unmatched = out[out["status"] == "unmatched"]
    assert len(dropped) == len(unmatched) > 0  # each dropped score's label comes back unmatched
    assert set(dropped["event_id"]) == set(unmatched["event_id"])
    assert dropped["error"].str.contains("max_pending=5").all()
    assert len(key_state(tester, "k")[1]) <= 5


def test_idle_keys_expire_after_the_ttl_and_are_reported(rng):
    """Keys of one shard expire one by one, each a ttl after its own last row."""
    tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None), ttl_ms=1000), timeMode="ProcessingTime")
    frame = stream_rows(rng, 300, ["x", "y"], label_delay=None)
    first, second = frame.iloc[:200], frame.iloc[200:]
    tester.testInPandas(0, first)  # x and y in shard 0, seen at 0 ms
    assert len(tester.setProcessingTime(600)) == 0  # not idle long enough
    tester.testInPandas(0, second[second["key"] == "x"])  # x seen at 600 ms
    expired = tester.setProcessingTime(1200)  # y idle since 0 ms: expires; x was seen at 600 ms
    assert expired["key"].tolist() == ["y"]
    assert expired["status"].tolist() == ["expired"]
    assert expired["n_learned"].tolist() == [int((first["key"] == "y").sum())]
    assert key_state(tester, "y", 0) is None
    assert key_state(tester, "x", 0) is not None
    expired = tester.setProcessingTime(1700)  # x: 600 + 1000 ms
    assert expired["key"].tolist() == ["x"]
    assert expired["n_learned"].tolist() == [int((frame["key"] == "x").sum())]
    assert tester.peekValueState("shard", 0) is None
    # an expired key starts again from the template
    again = tester.testInPandas(0, second[second["key"] == "y"])
    expected = PAVCalibrator(prior=None).prequential(
        *second.loc[second["key"] == "y", ["score", "label"]].to_numpy().T
    )[0]
    assert np.array_equal(again["proba"].to_numpy(), expected)


def test_bad_rows_are_dead_letters_with_a_reason_and_change_nothing(rng):
    frame = stream_rows(rng, 60, ["k"], label_delay=None)
    bad = pd.DataFrame(
        {
            "key": "k",
            "event_id": ["nan", "inf", "two", None, "ghost", "empty"],
            "score": [np.nan, np.inf, 0.5, np.nan, np.nan, np.nan],
            "label": [1.0, 1.0, 2.0, 1.0, 0.0, np.nan],
            "time": np.nan,
            "order": [10.5, 20.5, 30.5, 40.5, 50.5, 55.5],
        }
    )
    null_key = frame.iloc[:5].assign(key=None, order=np.arange(5) + 0.25)  # every row a dead letter
    tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None)))
    out = tester.testInPandas(0, pd.concat([frame, bad, null_key], ignore_index=True))
    assert len(out) == len(frame) + len(bad) + len(null_key)  # nothing dropped silently
    null_out = out[out["key"].isna()]
    assert len(null_out) == 5
    assert set(null_out["status"]) == {"rejected"}
    assert set(null_out["error"]) == {"the key is null"}
    out = out[out["key"].notna()]
    dead = out[out["status"].isin(["rejected", "unmatched"])].set_index("event_id")
    assert dead.loc["inf", "error"] == "score must be finite; got inf"
    assert dead.loc["two", "error"] == "label must be 0 or 1; got 2.0"
    assert dead.loc["ghost", "status"] == "unmatched"
    assert "needs an event id" in dead.loc[dead.index.isna(), "error"].item()
    assert "neither a score nor a label" in dead.loc["empty", "error"]
    assert dead.loc["nan", "status"] == "unmatched"  # a NaN score is no score: a label row, unmatched
    good = out[out["status"] == "scored_learned"]
    expected = PAVCalibrator(prior=None).prequential(frame["score"], frame["label"])
    assert np.array_equal(good["proba"].to_numpy(), expected[0])
    assert np.array_equal(good["llr"].to_numpy(), expected[1])
    assert tester.peekValueState("shard", 0)[1] == ["k"]  # no state is kept for a null key


def test_arguments_are_checked_before_anything_runs():
    assert _ttl_ms(2.5) == 2500
    assert _ttl_ms(None) is None
    with pytest.raises(ValueError, match=r"`ttl` must be a positive number of seconds or a timedelta; got -1"):
        _ttl_ms(-1)
    with pytest.raises(
        TypeError, match=r"`calibrator` must be a streamcal.PAVCalibrator \(the template of every key\); got str"
    ):
        _fresh("pav")
    used = PAVCalibrator(prior=None).update([0.2, 0.8], [0, 1])
    with pytest.raises(ValueError, match=r"it has learned 2 events"):
        _fresh(used)
    with pytest.raises(ValueError, match=r"`max_pending` must be an int >= 0; got -3"):
        calibrate_stream(None, key_col="k", score_col="s", max_pending=-3)
    with pytest.raises(ValueError, match=r"`shards` must be an int >= 1; got 0"):
        calibrate_stream(None, key_col="k", score_col="s", shards=0)


# ---------------------------------------------------------------------------- a query, end to end




def _write_stream_files(folder: Path, frame: pd.DataFrame, n_files: int) -> None:
    """The stream as ``n_files`` Parquet files in arrival order (a file source reads them in order)."""
    folder.mkdir(parents=True)
    for i, bounds in enumerate(np.array_split(np.arange(len(frame)), n_files)):
        part = frame.iloc[bounds].rename(columns={"key": "campaign", "order": "seq"}).drop(columns="time")
        path = folder / f"part-{i:03d}.parquet"
        part.to_parquet(path, index=False)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # the file source orders files by modification time


def _start(spark, source: Path, out: Path, checkpoint: Path, *, prior_strength=0, **trigger):
    from streamcal.spark import calibrate_stream, write_stream

    schema = spark.read.parquet(str(source)).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    calibrated = calibrate_stream(
        stream, key_col="campaign", score_col="score", label_col="label", event_id_col="event_id", order_col="seq",
        prior_strength=prior_strength, global_dir=str(checkpoint / "streamcal-global"),
    )
    return write_stream(calibrated, str(out), checkpoint=str(checkpoint), **trigger)


def _stop_after_two_batches(query) -> int:
    """Stop ``query`` once it has run two micro-batches; returns how many it had run."""
    deadline = time.monotonic() + 600
    while query.isActive and (query.lastProgress is None or query.lastProgress["batchId"] < 1):
        assert time.monotonic() < deadline, "the query made no progress in 10 minutes"
        query.awaitTermination(0.2)
    assert query.exception() is None, query.exception()
    query.stop()
    return query.lastProgress["batchId"] + 1


def _read(spark, out: Path) -> pd.DataFrame:
    frame = spark.read.parquet(str(out)).toPandas()
    return frame.sort_values(["campaign", "event_id", "status"], kind="stable").reset_index(drop=True)


@pytest.mark.slow
def test_a_query_restarted_from_its_checkpoint_gives_the_uninterrupted_output(spark, tmp_path, rng):
    """local[2], RocksDB state store, a Parquet file source read one file per micro-batch, labels
    arriving after their scores: stopped after two micro-batches and restarted from its checkpoint,
    the query writes what an uninterrupted run writes, and both equal an in-process calibrator per key."""
    keys = ["c1", "c2", "c3", "c4"]
    frame = stream_rows(rng, 1200, keys, label_delay=250)
    source = tmp_path / "events"
    _write_stream_files(source, frame, 6)

    whole = _start(spark, source, tmp_path / "whole", tmp_path / "whole-checkpoint", availableNow=True)
    whole.awaitTermination()

    first = _start(spark, source, tmp_path / "parts", tmp_path / "parts-checkpoint", processingTime="0 seconds")
    batches_before = _stop_after_two_batches(first)
    assert batches_before < 6, "the query read everything before it was stopped: nothing to recover"
    rest = _start(spark, source, tmp_path / "parts", tmp_path / "parts-checkpoint", availableNow=True)
    rest.awaitTermination()

    whole_out, parts_out = _read(spark, tmp_path / "whole"), _read(spark, tmp_path / "parts")
    assert len(whole_out) == len(frame)
    # keys on their own: every output but the keys' counts is the same bits, whatever the
    # micro-batches. Spark's file source may give the first micro-batch after a restart two files
    # (see the pooled test below); the counts, taken at the end of each micro-batch, then follow it
    per_batch = ["n_learned", "n_pending"]
    pd.testing.assert_frame_equal(parts_out.drop(columns=per_batch), whole_out.drop(columns=per_batch))
    for out in (whole_out, parts_out):
        learned = (out["status"] == "learned").groupby(out["campaign"]).sum()
        assert out.groupby("campaign")["n_learned"].max().equals(learned)  # each key's count after its last micro-batch
        assert (out["n_pending"] >= 0).all()
    if parts_out["n_learned"].equals(whole_out["n_learned"]):  # the same micro-batches: the same bits
        pd.testing.assert_frame_equal(parts_out, whole_out)
    assert whole_out["status"].value_counts().to_dict() == {"scored": 1200, "learned": 1200}
    whole_out = whole_out.rename(columns={"campaign": "key"})
    for key in keys:
        mine = whole_out[(whole_out["key"] == key) & (whole_out["status"] == "scored")].set_index("event_id")
        expected = keyed_reference(frame, key).set_index("event_id")
        assert np.array_equal(mine.loc[expected.index, "proba"].to_numpy(), expected["proba"].to_numpy())
        assert np.array_equal(mine.loc[expected.index, "llr"].to_numpy(), expected["llr"].to_numpy())


@pytest.mark.slow
def test_a_pooled_query_restarted_from_its_checkpoint_equals_the_lagged_reference(spark, tmp_path, rng):
    """Pooled toward all traffic (``prior_strength=50``), on local[2] with the RocksDB state store
    and a Parquet file source (one file per micro-batch), labels arriving after their scores:
    stopped after two micro-batches and restarted from its checkpoint, the query writes every row
    once, and each run equals the in-process reference lagged by one micro-batch over the
    micro-batches it ran, bit for bit; with the same micro-batches, the two runs' outputs are
    the same bits."""
    keys = ["c1", "c2", "c3", "c4", "c5", "c6"]
    frame = stream_rows(rng, 1200, keys, label_delay=250)
    source = tmp_path / "events"
    _write_stream_files(source, frame, 6)
    whole = _start(spark, source, tmp_path / "whole", tmp_path / "whole-ckpt", prior_strength=50.0, availableNow=True)
    whole.awaitTermination()
    first = _start(spark, source, tmp_path / "parts", tmp_path / "parts-ckpt", prior_strength=50.0,
                   processingTime="0 seconds")
    assert _stop_after_two_batches(first) < 6, "the query read everything before it was stopped: nothing to recover"
    rest = _start(spark, source, tmp_path / "parts", tmp_path / "parts-ckpt", prior_strength=50.0, availableNow=True)
    rest.awaitTermination()

    whole_out, parts_out = _read(spark, tmp_path / "whole"), _read(spark, tmp_path / "parts")
    assert whole_out["status"].value_counts().to_dict() == {"scored": 1200, "learned": 1200}
    assert sorted(whole_out["batch_id"].unique()) == list(range(6))  # one micro-batch per file
    files = [frame.iloc[bounds] for bounds in np.array_split(np.arange(len(frame)), 6)]  # one micro-batch each
    shard_of = spark_shards(spark, keys).get
    # every row once, in both runs: exactly once through the stop (the counts are each key's at the
    # end of its micro-batch, so they follow the micro-batches too)
    per_batch = ["proba", "llr", "batch_id", "n_learned", "n_pending"]
    pd.testing.assert_frame_equal(parts_out.drop(columns=per_batch), whole_out.drop(columns=per_batch))
    # the pooled outputs lag the all-traffic map by one micro-batch, so they follow the micro-batches
    # the query ran. Spark's file source may give the first micro-batch after a restart two files
    # (a stop between its source log's entry and the query's offset log: exactly once still
    # holds); each run then equals the lagged reference over its own micro-batches, bit for bit
    for out in (whole_out, parts_out):
        batch_of_file = out.groupby(whole_out["batch_id"])["batch_id"].agg(["min", "max"])
        assert (batch_of_file["min"] == batch_of_file["max"]).all()  # a file is read in one micro-batch
        runs = [pd.concat([files[i] for i in batch_of_file.index[batch_of_file["min"] == b]])
                for b in sorted(out["batch_id"].unique())]
        expected = lagged_reference(runs, shard_of, 50.0).set_index("event_id")
        mine = out[out["status"] == "scored"].set_index("event_id").loc[expected.index]
        assert np.array_equal(mine["proba"].to_numpy(), expected["proba"].to_numpy())
        assert np.array_equal(mine["llr"].to_numpy(), expected["llr"].to_numpy())
    if parts_out["batch_id"].equals(whole_out["batch_id"]):  # the same micro-batches: the same bits
        pd.testing.assert_frame_equal(parts_out, whole_out)


def test_without_pyspark_the_error_names_the_extra(monkeypatch):
    import sys

    from streamcal.spark._query import require_pyspark

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(
        ImportError, match=r"streamcal.spark needs pyspark 4.2 or later: install the extra, `pip install .*spark"
    ):
        require_pyspark()


def spark_shards(spark, keys, shards: int = 8) -> dict:
    """The shard Spark gives each key (``pmod(xxhash64(key), shards)``, as ``calibrate_stream``)."""
    from pyspark.sql import functions as F

    rows = spark.createDataFrame([(str(key),) for key in keys], "k string").select(
        "k", F.pmod(F.xxhash64("k"), F.lit(shards)).alias("shard")
    )
    return {row["k"]: row["shard"] for row in rows.collect()}


@pytest.mark.slow
def test_the_stream_command_calibrates_a_directory_of_parquet_files(spark, tmp_path, rng, capsys):
    """``streamcal stream SOURCE OUTPUT --once`` (pooled toward all traffic by default) writes what
    the lagged in-process reference gives; ``--prior-strength 0`` what an independent calibrator
    per key gives."""
    from streamcal.cli import main
    from streamcal.spark import DEFAULT_STRENGTH

    keys = ["c1", "c2", "c3"]
    frame = stream_rows(rng, 300, keys, label_delay=40)
    _write_stream_files(tmp_path / "events", frame, 2)
    batches = [frame.iloc[bounds] for bounds in np.array_split(np.arange(len(frame)), 2)]
    common = ["--label-col", "label", "--event-id-col", "event_id", "--order-col", "seq", "--once"]
    for name, extra in [("pooled", []), ("alone", ["--prior-strength", "0"])]:
        args = ["stream", str(tmp_path / "events"), str(tmp_path / name), "--checkpoint", str(tmp_path / f"{name}-c")]
        assert main([*args, *common, *extra, "--key-col", "campaign"]) == 0
        out = _read(spark, tmp_path / name).rename(columns={"campaign": "key"})
        assert out["status"].value_counts().to_dict() == {"scored": 300, "learned": 300}
        scored = out[out["status"] == "scored"].set_index("event_id")
        if name == "pooled":
            expected = lagged_reference(batches, spark_shards(spark, keys).get, DEFAULT_STRENGTH).set_index("event_id")
        else:
            expected = pd.concat([keyed_reference(frame, key) for key in keys]).set_index("event_id")
        assert np.array_equal(scored.loc[expected.index, "proba"].to_numpy(), expected["proba"].to_numpy())
    capsys.readouterr()
    args = ["stream", str(tmp_path / "events"), str(tmp_path / "out"), "--checkpoint", str(tmp_path / "c")]
    assert main([*args, *common, "--key-col", "merchant"]) == 2
    assert (
        "streamcal: error: --key-col must name a column of SOURCE; got 'merchant', columns are"
        in capsys.readouterr().err
    )


def test_the_stream_command_needs_a_directory_of_parquet_files(tmp_path, capsys):
    from streamcal.cli import main

    status = main(["stream", str(tmp_path / "none"), str(tmp_path / "out"), "--checkpoint", "c", "--key-col", "k"])
    assert status == 2
    assert "SOURCE must be a directory holding Parquet files" in capsys.readouterr().err


def test_the_stream_command_refuses_once_with_a_ttl(tmp_path, capsys):
    """``--once`` is Spark's availableNow trigger, which runs until the last timer fires: with a
    time to live a one-off run would wait it out."""
    from streamcal.cli import main

    (tmp_path / "events").mkdir()
    pd.DataFrame({"k": [1], "score": [0.5]}).to_parquet(tmp_path / "events" / "part-0.parquet")
    args = ["stream", str(tmp_path / "events"), str(tmp_path / "out"), "--checkpoint", "c", "--key-col", "k"]
    assert main([*args, "--once", "--ttl", "86400"]) == 2
    assert "--once with --ttl would run until the last key's timer fires (86400 seconds" in capsys.readouterr().err






@pytest.mark.parametrize("strength", [20.0, 500.0])
def test_pooling_toward_all_traffic_equals_the_lagged_in_process_reference(rng, tmp_path, strength):
    """Keys pool toward the global map of all traffic after the previous micro-batch: per key,
    bit for bit the in-process reference built from KeyedCalibrator pieces, late labels
    included; the map the sink merges from the shards' partials is the map of all traffic."""
    from streamcal.spark._pool import read_map

    keys = ["a", "b", "c", "d", "e", "f", "g"]
    frame = stream_rows(rng, 2500, keys, label_delay=40)
    processor = KeyedCalibrationProcessor(PAVCalibrator(prior=None), prior_strength=strength,
                                          global_dir=str(tmp_path / "global"))
    out, batches = run_pooled(TwsTester(processor), frame, 6, rng, str(tmp_path / "global"))
    assert out["status"].value_counts().to_dict() == {"scored": 2500, "learned": 2500}
    expected = lagged_reference(batches, shard_of, strength).set_index("event_id")
    mine = out[out["status"] == "scored"].set_index("event_id").loc[expected.index]
    assert np.array_equal(mine["proba"].to_numpy(), expected["proba"].to_numpy())  # bit for bit
    assert np.array_equal(mine["llr"].to_numpy(), expected["llr"].to_numpy())
    # the last map is the global map of every labelled event (one calibrator over all of them)
    last = read_map(str(tmp_path / "global"), 10**9, PAVCalibrator(prior=None), strength).global_calibrator
    learned = out[out["status"] == "learned"]
    alone = PAVCalibrator(prior=None).update(learned["score"].to_numpy(), learned["label"].to_numpy())
    grid = np.linspace(0.001, 0.999, 301)
    assert last.n_learned == 2500
    assert np.array_equal(last.predict_proba(grid), alone.predict_proba(grid))
    # pooling changes the answers: independent keys differ
    independent = run_in_batches(TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None))), frame, 6, rng)
    independent = independent[independent["status"] == "scored"].set_index("event_id").loc[expected.index]
    assert not np.array_equal(independent["proba"].to_numpy(), mine["proba"].to_numpy())


def test_a_pooled_micro_batch_run_again_reads_the_map_it_read_first(rng, tmp_path):
    """A micro-batch run again (same timestamp, after its map was written) gives the same output:
    it reads the newest map written before its timestamp, not its own."""
    from streamcal.spark._pool import merge_partials

    frame = stream_rows(rng, 600, ["a", "b", "c"], label_delay=None)
    first, second = frame.iloc[:300], frame.iloc[300:]
    global_dir = str(tmp_path / "global")

    def run_second(tester):
        return tester.testInPandas(0, second.assign(key=second["key"].astype(str), batch_ms=2000))

    tester = TwsTester(KeyedCalibrationProcessor(prior_strength=50.0, global_dir=global_dir))
    out = tester.testInPandas(0, first.assign(batch_ms=1000))
    partial = out[out["status"] == "partial"]
    merge_partials(global_dir, 1000, 0, [(0, partial["partial"].iloc[0])])
    state = tester.peekValueState("shard", 0)
    done = run_second(tester)
    merge_partials(global_dir, 2000, 1, [(0, done.loc[done["status"] == "partial", "partial"].iloc[0])])
    again = TwsTester(KeyedCalibrationProcessor(prior_strength=50.0, global_dir=global_dir))
    again.updateValueState("shard", 0, state)
    redone = run_second(again)
    pd.testing.assert_frame_equal(redone, done)


def test_pooled_bad_rows_are_dead_letters_and_teach_the_map_nothing(rng, tmp_path):
    frame = stream_rows(rng, 50, ["k"], label_delay=None)
    bad = pd.DataFrame({"key": ["k", None, "k"], "event_id": ["x", "y", "z"], "score": [np.inf, 0.3, 0.4],
                        "label": [1.0, 1.0, 3.0], "time": np.nan, "order": [0.5, 1.5, 2.5]})
    tester = TwsTester(KeyedCalibrationProcessor(prior_strength=50.0, global_dir=str(tmp_path)))
    out = tester.testInPandas(0, pd.concat([frame, bad], ignore_index=True).assign(batch_ms=1000))
    assert out["status"].value_counts().to_dict() == {"scored_learned": 50, "rejected": 3, "partial": 1}
    assert out.loc[out["status"] == "partial", "n_learned"].tolist() == [50]  # the good rows only


def test_pooling_arguments_are_checked():
    with pytest.raises(ValueError, match=r"`prior_strength` must be a number >= 0 in Spark; got 'auto'"):
        KeyedCalibrationProcessor(prior_strength="auto")
    with pytest.raises(ValueError, match=r"`global_dir` must name the directory of the all-traffic maps"):
        calibrate_stream(None, key_col="k", score_col="s")  # pooled by default
    with pytest.raises(ValueError, match=r"`prior_strength` must be a finite number >= 0; got -1"):
        calibrate_stream(None, key_col="k", score_col="s", prior_strength=-1, global_dir="g")
