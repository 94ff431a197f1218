"""Rows the keyed Spark processor cannot use become dead letters, never a failed query: a score outside
the template's buckets, and under a window that learns at event times, a learn without a time or before
the shard's clock. The other rows of the micro-batch come out as without the bad ones, bit for bit, and
the state is what it would be without them. Label rows arriving out of event order are all learned.
Unit-tested with Spark's ``TwsTester`` (no query, no JVM)."""

from __future__ import annotations

import itertools
import math
import os
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra); CI installs it with the test extra")
pytest.importorskip("pyspark.sql.streaming.tws_tester", reason="TwsTester needs pyspark 4.2 or later")

from pyspark.sql.streaming.tws_tester import TwsTester
from spark_cases import assert_equal_to_reference, run_pooled, stream_rows

from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal.persist import from_bytes, to_bytes
from streamcal.spark import KeyedCalibrationProcessor, calibrate_stream
from streamcal.windows import Decay, TimeWindow

COLUMNS = ["key", "event_id", "score", "label", "time", "order"]


def naive_time_rows(frame: pd.DataFrame, clock: float = -math.inf, pending: dict | None = None):
    """The documented rules of a window that learns at event times, one row at a time, over one
    shard's rows in ``order``: a row with score and label learns at its time, refused without one or
    before the clock; a label row learns at its own time (refused before the clock) or, without one,
    at its pending score's time or the clock, whichever is later (refused if neither row has a time);
    the clock is the latest time learned. Returns each row's status (in order), each key's
    operations ``(scores, labels, learn, times, event ids of the predictions)``, the clock and the
    pending scores (key -> event id -> (score, time))."""
    pending = {} if pending is None else pending
    statuses, ops = [], {}
    for r in frame.sort_values("order", kind="stable").itertuples():
        if not math.isnan(r.score) and not 0.0 <= r.score <= 1.0:  # the default template's buckets
            statuses.append("rejected")
            continue
        mine = pending.setdefault(r.key, {})
        key_ops = ops.setdefault(r.key, ([], [], [], [], []))

        def op(score, label, learn, time, event_id=None, key_ops=key_ops):
            for column, value in zip(key_ops[:4], (score, label, learn, time), strict=True):
                column.append(value)
            if not learn:
                key_ops[4].append(event_id)

        if not math.isnan(r.score) and not math.isnan(r.label):
            if math.isnan(r.time) or r.time < clock:
                statuses.append("rejected")
                continue
            op(r.score, 0.0, False, r.time, r.event_id)
            op(r.score, r.label, True, r.time)
            clock = r.time
            statuses.append("scored_learned")
        elif not math.isnan(r.score):
            op(r.score, 0.0, False, r.time, r.event_id)
            mine.pop(r.event_id, None)
            mine[r.event_id] = (r.score, r.time)
            statuses.append("scored")
        elif r.event_id not in mine:
            statuses.append("unmatched")
        else:
            score, score_time = mine[r.event_id]
            if not math.isnan(r.time):
                at = r.time if r.time >= clock else None
            else:
                at = None if math.isnan(score_time) else max(score_time, clock)
            if at is None:
                statuses.append("rejected")
                continue
            del mine[r.event_id]
            op(score, r.label, True, at)
            clock = at
            statuses.append("learned")
    return statuses, ops, clock, pending


def time_reference(template, ops: dict) -> pd.DataFrame:
    """Per key, ``KeyedCalibrator(template, prior_strength=0).process`` of its operations at their
    times (one calibrator per key): the predictions with their event ids."""
    frames = []
    for key, (s, y, learn, t, ids) in ops.items():
        cal = KeyedCalibrator(template, prior_strength=0)
        proba, llr = cal.process([key] * len(s), np.array(s), np.array(y), np.array(learn), times=np.array(t))
        at = ~np.array(learn)
        frames.append(pd.DataFrame({"key": key, "event_id": ids, "proba": proba[at], "llr": llr[at]}))
    return pd.concat(frames, ignore_index=True)


def assert_predictions_equal(out: pd.DataFrame, expected: pd.DataFrame) -> None:
    mine = out[out["status"].isin(["scored", "scored_learned"])]
    for key, part in expected.groupby("key"):
        got = mine[mine["key"] == key]
        assert got["event_id"].tolist() == part["event_id"].tolist()
        assert np.array_equal(got["proba"].to_numpy(), part["proba"].to_numpy())  # bit for bit
        assert np.array_equal(got["llr"].to_numpy(), part["llr"].to_numpy())


def late_label_rows(rng, n_events: int, keys: list, *, label_times: bool) -> pd.DataFrame:
    """Score rows at times 0, 1, 2, ... and each label row 1 to 60 rows later (labels out of event
    order); a label row carries its arrival time when ``label_times``, else none."""
    key = rng.choice(np.array(keys, dtype=object), size=n_events)
    score = rng.beta(2, 3, size=n_events)
    label = (rng.uniform(size=n_events) < score).astype(np.float64)
    delay = rng.integers(1, 60, size=n_events)
    rows = [(key[i], f"e{i}", score[i], np.nan, float(i), float(i)) for i in range(n_events)]
    rows += [(key[i], f"e{i}", np.nan, label[i], np.nan, i + delay[i] + 0.5 + i / n_events / 4) for i in range(n_events)]
    frame = pd.DataFrame(rows, columns=COLUMNS).sort_values("order", kind="stable", ignore_index=True)
    if label_times:  # the time a label arrives: the time of the score rows around it
        frame.loc[frame["score"].isna(), "time"] = np.floor(frame["order"])
    return frame


def batches(frame: pd.DataFrame, cuts) -> list:
    """``frame``'s micro-batches: the rows of ``order`` below each of ``cuts`` and not below the one before."""
    bounds = [-np.inf, *cuts, np.inf]
    return [frame[(frame["order"] >= lo) & (frame["order"] < hi)] for lo, hi in itertools.pairwise(bounds)]


def shard_state(tester) -> dict:
    """Shard 0's state as values, without the keys' numbers in its calibrator (which follow the
    order in which keys first came): the bytes of the calibrator's global map and, per key, its
    events learned, the processing time of its last used row, its pending scores and its state as
    ``export_key`` gives it."""
    row = tester.peekValueState("shard", 0)
    engine = from_bytes(bytes(row[0])) if row[0] is not None else None
    pending = {}
    for key, *score in zip(*row[5:10], strict=True):
        pending.setdefault(key, []).append(repr(score))
    keys = {}
    for name, number, n_learned, seen_ms in zip(*row[1:5], strict=True):
        exported = engine.export_key(number) if engine is not None and number in engine else {}
        values = {field: np.asarray(value).tobytes() for field, value in exported.items()}
        keys[name] = (n_learned, seen_ms, pending.get(name, []), values)
    return {"global": None if engine is None else to_bytes(engine.global_calibrator), "keys": keys}


def feed(tester, frame: pd.DataFrame, cuts, rng=None) -> pd.DataFrame:
    """``frame`` as micro-batches of shard 0 (:func:`batches`), each shuffled with ``rng`` (``order``
    restores the order; the keys' numbers in the state follow the rows' arrival)."""
    outs = []
    for part in batches(frame, cuts):
        if rng is not None:
            part = part.sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
        outs.append(tester.testInPandas(0, part.reset_index(drop=True)))
    return pd.concat(outs, ignore_index=True)


# ---------------------------------------------------------------------------- scores outside the buckets
def test_the_reviewers_row_with_a_score_above_one_is_rejected_not_a_failed_query():
    frame = pd.DataFrame([("a", "e1", 0.2, 1.0, np.nan, 1.0), ("a", "e2", 1.5, 0.0, np.nan, 2.0)], columns=COLUMNS)
    tester = TwsTester(KeyedCalibrationProcessor(PAVCalibrator(prior=None)))
    out = tester.testInPandas(0, frame)
    assert out["status"].tolist() == ["scored_learned", "rejected"]
    assert out["error"].iloc[1].startswith(
        "`score` must hold probabilities in [0, 1] for LogitGrid buckets; got 1.5. For other scores"
    )
    assert out["n_learned"].tolist() == [1, 1]


def test_scores_outside_the_templates_buckets_are_dead_letters_and_change_nothing(rng):
    """The template's own range decides (its array face's check and message): the other rows come
    out as without the bad ones, bit for bit, equal to an in-process calibrator per key, and the
    shard's state is the same bytes; a refused score never waits for its label."""
    template = PAVCalibrator(prior=None)
    bad, message = [1.5, -0.25, 1.0000001], "`score` must hold probabilities in [0, 1] for LogitGrid buckets; got {}."
    frame = stream_rows(rng, 400, ["a", "b"], label_delay=15)
    bad_rows = pd.DataFrame(
        {
            "key": ["a", "b", "a", "a", "z"],  # z: a key with no other row
            "event_id": ["bad-score", "bad-both", "bad-far", "bad-score", "bad-z"],
            "score": [bad[0], bad[1], bad[2], np.nan, bad[0]],  # a score row, a row with both, its label later
            "label": [np.nan, 1.0, 0.0, 1.0, 1.0],
            "time": np.nan,
            "order": [10.5, 200.5, 401.5, 600.5, 3.5],
        }
    )
    clean, dirty = TwsTester(KeyedCalibrationProcessor(template)), TwsTester(KeyedCalibrationProcessor(template))
    cuts = [270.0, 540.0]  # the same micro-batches with and without the bad rows
    expected = feed(clean, frame, cuts)
    got = feed(dirty, pd.concat([frame, bad_rows]).sort_values("order", ignore_index=True), cuts)
    is_bad = got["event_id"].str.startswith("bad-").to_numpy()
    dead = got[is_bad].reset_index(drop=True)
    assert dead["status"].tolist() == ["rejected", "rejected", "rejected", "rejected", "unmatched"]
    dead = dead.drop(index=0).reset_index(drop=True)  # z's row
    for i, score in enumerate(bad):
        assert dead["error"].iloc[i].startswith(message.format(score)[:-1])
    assert dead["error"].iloc[3] == "no pending score for event id 'bad-score'"  # the refused score never waited
    good = got[~is_bad].reset_index(drop=True)
    assert good["error"].isna().all()
    pd.testing.assert_frame_equal(good.drop(columns="error"), expected.drop(columns="error"), check_exact=True)
    assert_equal_to_reference(got[~is_bad], frame, ["a", "b"])
    assert list(shard_state(dirty)["keys"]) == ["a", "b"]  # z, which sent only a dead letter, has no state
    assert shard_state(dirty) == shard_state(clean)


def test_a_keys_dead_letters_do_not_keep_it_alive():
    """A key's time to live runs from its last row that was not a dead letter."""
    tester = TwsTester(KeyedCalibrationProcessor(ttl_ms=1000), timeMode="ProcessingTime")
    tester.testInPandas(0, pd.DataFrame([("x", "e1", 0.3, 1.0, np.nan, 1.0)], columns=COLUMNS))
    tester.setProcessingTime(600)
    out = tester.testInPandas(0, pd.DataFrame([("x", "e2", 3.0, 1.0, np.nan, 2.0), ("x", "e3", np.nan, 1.0, np.nan, 3.0)],
                                              columns=COLUMNS))
    assert out["status"].tolist() == ["rejected", "unmatched"]
    expired = tester.setProcessingTime(1000)
    assert expired["key"].tolist() == ["x"]
    assert expired["n_learned"].tolist() == [1]


def test_the_templates_buckets_decide_which_scores_are_refused():
    """A uniform grid takes any finite score (those beyond its edges go to its end buckets), as its
    array face does: a score of 7.5 is calibrated, where the default logit grid refuses it."""
    frame = pd.DataFrame([("a", "e1", 7.5, 1.0, np.nan, 1.0), ("a", "e2", -3.0, np.nan, np.nan, 2.0)], columns=COLUMNS)
    template = PAVCalibrator(prior=None, buckets="uniform:8:-4:4")
    out = TwsTester(KeyedCalibrationProcessor(template)).testInPandas(0, frame)
    assert out["status"].tolist() == ["scored_learned", "scored"]
    assert out["proba"].tolist() == template.clone().prequential([7.5, -3.0], [1.0, 0.0])[0].tolist()
    refused = TwsTester(KeyedCalibrationProcessor()).testInPandas(0, frame)
    assert refused["status"].tolist() == ["rejected", "rejected"]


def test_pooled_scores_outside_the_buckets_are_dead_letters_and_teach_the_map_nothing(rng, tmp_path):
    frame = stream_rows(rng, 40, ["k"], label_delay=None).assign(batch_ms=1000)
    bad = pd.DataFrame({"key": "k", "event_id": ["x", "y"], "score": [2.0, -1.0], "label": [1.0, 0.0],
                        "time": np.nan, "order": [0.5, 1.5], "batch_ms": 1000})
    tester = TwsTester(KeyedCalibrationProcessor(prior_strength=50.0, global_dir=str(tmp_path)))
    out = tester.testInPandas(0, pd.concat([frame, bad], ignore_index=True))
    assert out["status"].value_counts().to_dict() == {"scored_learned": 40, "rejected": 2, "partial": 1}
    assert out.loc[out["status"] == "partial", "n_learned"].tolist() == [40]


# ---------------------------------------------------------------------------- windows of event time
@pytest.mark.parametrize("label_times", [False, True], ids=["labels-without-times", "labels-with-times"])
def test_labels_out_of_event_order_are_all_learned_under_a_time_window(rng, label_times):
    """Labels arriving 1 to 60 rows after their scores, out of event order, over 7 micro-batches:
    every label is learned (without its own time at its score's time or the shard's clock,
    whichever is later), and each key's predictions equal an in-process calibrator of that key
    learning at those times, bit for bit."""
    template = PAVCalibrator(prior=None, window=TimeWindow(40.0))
    frame = late_label_rows(rng, 600, ["a", "b", "c"], label_times=label_times)
    label_events = frame.loc[frame["score"].isna(), "event_id"].str[1:].astype(int)
    assert not label_events.is_monotonic_increasing  # labels arrive out of event order
    out = feed(TwsTester(KeyedCalibrationProcessor(template)), frame, [150.0, 300.0, 450.0, 600.0, 750.0, 900.0], rng)
    statuses, ops, _, _ = naive_time_rows(frame)
    assert out["status"].value_counts().to_dict() == {"scored": 600, "learned": 600}
    assert statuses == out["status"].tolist()
    assert_predictions_equal(out, time_reference(template, ops))


@pytest.mark.parametrize("window", [TimeWindow(25.0), Decay(10.0, by="time")], ids=["time-window", "decay-by-time"])
def test_learns_before_the_shards_clock_are_dead_letters_and_change_nothing(rng, window):
    """Keys whose times go backwards against each other within a shard, in one micro-batch (``order``
    is not the time) and across micro-batches: a learn before the shard's clock is rejected with the
    clock in its reason; the other rows equal the in-process reference over the rows kept, bit for
    bit, and the state is that of a run without the rejected rows."""
    template = PAVCalibrator(prior=None, window=window)
    n = 500
    keys = rng.choice(np.array(["a", "b", "c"], dtype=object), size=n)
    score = rng.beta(2, 3, size=n)
    times = np.arange(n) + np.where(keys == "b", -3.0, 0.0) + rng.integers(0, 2, size=n)  # b lags: behind the clock
    frame = pd.DataFrame({"key": keys, "event_id": [f"e{i}" for i in range(n)], "score": score,
                          "label": (rng.uniform(size=n) < score) * 1.0, "time": times, "order": np.arange(n, dtype=float)})
    statuses, ops, _, _ = naive_time_rows(frame)
    assert 20 < statuses.count("rejected") < n // 2
    tester = TwsTester(KeyedCalibrationProcessor(template))
    cuts = [100.0, 220.0, 300.0, 410.0]
    out = feed(tester, frame, cuts)
    assert out["status"].tolist() == statuses
    rejected = out[out["status"] == "rejected"]
    assert rejected["error"].str.fullmatch(
        rf"{re.escape(repr(window))} learns at event times that never go backwards: the row's time \S+ is before \S+, "
        r"the shard's clock \(the latest time learned before the row\)"
    ).all()
    assert_predictions_equal(out, time_reference(template, ops))
    kept = TwsTester(KeyedCalibrationProcessor(template))
    again = feed(kept, frame[np.array(statuses) != "rejected"], cuts)
    assert again["status"].value_counts().to_dict() == {"scored_learned": n - len(rejected)}
    assert shard_state(kept) == shard_state(tester)


def test_label_rows_and_rows_with_both_share_the_clock(rng):
    """Late labels without times and rows with score and label, some behind the clock, in the same
    micro-batches: each row's status and each key's predictions follow the rules row by row."""
    template = PAVCalibrator(prior=None, window=TimeWindow(20.0))
    frame = late_label_rows(rng, 400, ["a", "b"], label_times=False)
    n = 150
    extra = pd.DataFrame({"key": rng.choice(np.array(["a", "b"], dtype=object), size=n),
                          "event_id": [f"both{i}" for i in range(n)], "score": rng.uniform(size=n),
                          "label": (rng.uniform(size=n) < 0.4) * 1.0, "order": rng.uniform(0, 460, size=n)})
    extra["time"] = np.floor(extra["order"]) - rng.integers(0, 40, size=n)  # some behind the clock
    frame = pd.concat([frame, extra]).sort_values("order", ignore_index=True)
    statuses, ops, _, _ = naive_time_rows(frame)
    assert 10 < statuses.count("rejected") < n
    assert statuses.count("learned") == 400  # every label is learned
    out = feed(TwsTester(KeyedCalibrationProcessor(template)), frame, [90.0, 200.0, 330.0], rng)
    assert out["status"].tolist() == statuses
    assert_predictions_equal(out, time_reference(template, ops))


def test_rows_without_a_usable_time_are_dead_letters_under_a_time_window():
    """Under a time window: a row with score and label needs a time, no time may be infinite, and a
    label row without a time needs its score's; a score row without a time is predicted (a
    prediction needs none) and its label learns at the label row's time."""
    template = PAVCalibrator(prior=None, window=TimeWindow(100.0))
    rows = [
        ("a", "e1", 0.3, 1.0, 1.0, 1.0),  # learned at 1
        ("a", "e2", 0.6, 0.0, np.nan, 2.0),  # both, no time
        ("a", "e3", 0.4, np.nan, np.nan, 3.0),  # a score row without a time: predicted, pending
        ("a", "e3", np.nan, 1.0, np.nan, 4.0),  # its label without a time: no time at all
        ("a", "e4", 0.2, 0.0, np.inf, 5.0),  # an infinite time
        ("a", "e3", np.nan, 1.0, 7.0, 6.0),  # the label again, with a time: learned at 7
        ("a", "e5", 0.7, 1.0, 8.0, 7.0),
    ]
    tester = TwsTester(KeyedCalibrationProcessor(template))
    out = tester.testInPandas(0, pd.DataFrame(rows, columns=COLUMNS))
    assert out["status"].tolist() == ["scored_learned", "rejected", "scored", "rejected", "rejected", "learned",
                                      "scored_learned"]
    assert out["error"].iloc[1] == "TimeWindow(seconds=100.0) learns at event times: the row has no time"
    assert out["error"].iloc[3] == (
        "TimeWindow(seconds=100.0) learns at event times: neither the label row nor its score has a time"
    )
    assert out["error"].iloc[4] == "time must be finite; got inf"
    assert out["n_learned"].tolist() == [3] * 7
    expected = KeyedCalibrator(template, prior_strength=0).process(
        ["a"] * 6, np.array([0.3, 0.3, 0.4, 0.4, 0.7, 0.7]), np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]),
        np.array([False, True, False, True, False, True]), times=np.array([1.0, 1.0, np.nan, 7.0, 8.0, 8.0]),
    )
    assert np.array_equal(out["proba"].to_numpy()[[0, 2, 6]], expected[0][[0, 2, 4]])


def test_a_pooled_learn_before_all_traffics_clock_is_a_dead_letter(rng, tmp_path):
    """Pooled, a shard's clock starts at the all-traffic map's: the latest time learned by any shard
    up to the previous micro-batch."""
    template = PAVCalibrator(prior=None, window=Decay(50.0, by="time"))
    frame = stream_rows(rng, 120, ["b", "c", "d"], label_delay=None)  # each key a shard of its own (shard_of)
    frame["time"] = np.where(frame["key"] == "d", -1000.0, 0.0) + frame["order"]  # d is far behind the others
    processor = KeyedCalibrationProcessor(template, prior_strength=30.0, global_dir=str(tmp_path / "global"))
    out, fed = run_pooled(TwsTester(processor), frame, 3, rng, str(tmp_path / "global"))
    out = out.set_index("event_id")
    first, later = fed[0], pd.concat(fed[1:])
    assert (out.loc[first["event_id"], "status"] == "scored_learned").all()  # no map yet: d's own clock
    late = out.loc[later.loc[later["key"] == "d", "event_id"]]
    assert len(late) > 0
    assert (late["status"] == "rejected").all()
    for j, batch in enumerate(fed[1:], start=1):  # the map's: the latest time of all traffic before
        clock = float(pd.concat(fed[:j]).query("key != 'd'")["time"].max())
        late = out.loc[batch.loc[batch["key"] == "d", "event_id"], "error"]
        assert late.str.contains(f"is before {clock!r}, the shard's clock", regex=False).all()
    assert (out.loc[later.loc[later["key"] != "d", "event_id"], "status"] == "scored_learned").all()


# ---------------------------------------------------------------------------- refused when the query is built
def test_a_time_window_template_without_time_col_is_refused():
    for window in (TimeWindow(60.0), Decay(30.0, by="time")):
        with pytest.raises(ValueError, match=r"`time_col` must name the event-time column: `calibrator` has the window "
                                             rf"{re.escape(repr(window))}, which learns at event times; got None"):
            calibrate_stream(None, key_col="k", score_col="s", calibrator=PAVCalibrator(prior=None, window=window),
                             prior_strength=0)


@pytest.mark.parametrize("kind", ["DoubleType", "FloatType", "BooleanType", "DateType"])
def test_key_columns_that_are_not_strings_or_integers_are_refused(kind):
    """A keyed calibrator takes string and integer keys; the state holds a key as its text, and a
    float's text names no key (``1.0``, ``-0.0``): such a column is refused when the query is built."""
    from pyspark.sql import types

    schema = types.StructType([types.StructField("k", getattr(types, kind)()), types.StructField("s", types.DoubleType())])
    name = getattr(types, kind)().simpleString()
    with pytest.raises(TypeError, match=rf"`key_col` must name a string or integer column .*; got 'k' of type {name}\."):
        calibrate_stream(SimpleNamespace(schema=schema), key_col="k", score_col="s", prior_strength=0)


# ---------------------------------------------------------------------------- a query, end to end
@pytest.mark.slow
def test_a_query_with_bad_and_late_rows_runs_to_the_end_and_writes_them_as_dead_letters(spark, tmp_path, rng):
    """local[2], a Parquet file source (one file per micro-batch), a ``TimeWindow`` template with a
    timestamp ``time_col``: scores above 1, labels out of event order without times, rows without a
    time and late rows come out as the rules say, and the other rows equal an in-process calibrator
    per key, bit for bit; the query ends without an error."""
    from streamcal.spark import write_stream

    template = PAVCalibrator(prior=None, window=TimeWindow(30.0))
    frame = late_label_rows(rng, 240, ["c1", "c2"], label_times=False)
    score_rows = frame.index[frame["score"].notna()]
    frame.loc[score_rows[::17], "score"] += 1.0  # some scores above 1 (their labels: unmatched)
    extra = pd.DataFrame(  # late rows with score and label: their times are before the clock
        {"key": "c1", "event_id": [f"late{i}" for i in range(6)], "score": 0.5, "label": 1.0,
         "time": [3.0, 5.0, np.nan, 60.0, 100.0, 150.0], "order": [40.3, 90.3, 120.3, 150.3, 210.3, 290.3]}
    )
    frame = pd.concat([frame, extra]).sort_values("order", ignore_index=True)
    statuses, ops, _, _ = naive_time_rows(frame)
    source = tmp_path / "events"
    source.mkdir()
    epoch = 1_700_000_000.0  # the times as timestamps: seconds from the epoch, exact in a double
    for i, part in enumerate(batches(frame, [100.0, 200.0, 300.0])):
        part = part.assign(ts=pd.to_datetime(part["time"] + epoch, unit="s")).drop(columns="time")
        path = source / f"part-{i:03d}.parquet"
        part.rename(columns={"key": "campaign", "order": "seq"}).to_parquet(path, index=False)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # the file source orders files by modification time
    schema = spark.read.parquet(str(source)).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    calibrated = calibrate_stream(
        stream, key_col="campaign", score_col="score", label_col="label", event_id_col="event_id", time_col="ts",
        order_col="seq", calibrator=template, shards=1, prior_strength=0,
    )
    query = write_stream(calibrated, str(tmp_path / "out"), checkpoint=str(tmp_path / "checkpoint"), availableNow=True)
    query.awaitTermination()
    assert query.exception() is None
    out = spark.read.parquet(str(tmp_path / "out")).toPandas().rename(columns={"campaign": "key"})
    out["time"] -= epoch
    # the rows of the output come in no order: match them to the rules' by event id and status
    assert sorted(zip(out["event_id"], out["status"], strict=True)) == sorted(
        zip(frame["event_id"], statuses, strict=True)
    )
    errors = out.loc[out["status"] == "rejected", "error"]
    for reason in ("must hold probabilities in [0, 1]", "never go backwards", "the row has no time"):
        assert errors.str.contains(reason, regex=False).any()
    reference = time_reference(template, ops).set_index("event_id")
    mine = out[out["status"].isin(["scored", "scored_learned"])].set_index("event_id").loc[reference.index]
    assert np.array_equal(mine["proba"].to_numpy(), reference["proba"].to_numpy())  # bit for bit
    assert np.array_equal(mine["llr"].to_numpy(), reference["llr"].to_numpy())
