"""Replay as stages passing one record: the source, the planner, the runners and the sinks, run by
hand, give what ``replay`` gives; a column added to the record travels through sorting and
planning with its rows, unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamcal.replay import replay
from streamcal.replay._batch import PLANNED_COLUMN, EventBatch
from streamcal.replay._engine import InFlight, Planner, plan_batch, plan_flush
from streamcal.replay._evaluate import default_metrics
from streamcal.replay._outputs import OutputFiles
from streamcal.replay._runners import Runners, resolve_calibrators
from streamcal.replay._sinks import MetricsSink, ParquetSink
from streamcal.replay._source import Columns, EventSource, Source, list_sources, prepare, read_chunks
from streamcal.replay._summary import ReplaySummary, render_text


@dataclass
class KeyedBatch(EventBatch):
    """The record with one more planned column, as keyed calibration would add."""

    key: np.ndarray = field(metadata=PLANNED_COLUMN)


def keyed(batch: EventBatch, key: np.ndarray) -> KeyedBatch:
    return KeyedBatch(**{f.name: getattr(batch, f.name) for f in fields(EventBatch) if f.name != "key"}, key=key)


@pytest.fixture(scope="module")
def clicks(click_stream):
    return click_stream(6_000, seed=11, batch_size=2_000)


def stream(n: int, seed: int):
    """Event times with ties, label times at or after them (some never), scores and labels."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, n // 3, n)).astype(np.float64)
    label_t = t + rng.choice([0.0, 1.0, 5.0, 40.0], n)
    label_t[rng.random(n) < 0.05] = np.inf
    label_t[-1] = t[-1]  # the last label: due at the end, learned by the flush
    s = rng.random(n)
    y = (rng.random(n) < s).astype(np.float64)
    return t, s, y, label_t


def test_the_record_names_its_columns_once():
    assert EventBatch.columns() == ("t", "s", "y", "label_t", "w", "key")
    assert EventBatch.planned_columns() == ("s", "y", "w", "key")
    assert KeyedBatch.columns() == ("t", "s", "y", "label_t", "w", "key")
    assert KeyedBatch.planned_columns() == ("s", "y", "w", "key")


@pytest.mark.parametrize("batch_size", [1, 7, 64, 1000])
def test_an_added_column_goes_with_each_label_through_the_planner(batch_size):
    n = 700
    t, s, y, label_t = stream(n, batch_size)
    key = np.arange(n, dtype=np.int64) * 7 + 3  # a key per event, told apart from its index
    source = Source("<test>", "the test stream")
    planner = Planner(weighted=False, timed=True)
    plain = InFlight.empty(False)
    for a in range(0, n, batch_size):
        b = min(a + batch_size, n)
        batch = keyed(EventBatch(source, a, None, t[a:b], s[a:b], y[a:b], label_t[a:b], None), key[a:b])
        ops = planner.plan(batch)
        # the kernel's columns are those of a plan without the added column
        want, plain = plan_batch(plain, t[a:b], s[a:b], y[a:b], label_t[a:b], None, a)
        np.testing.assert_array_equal(ops.s, want.s)
        np.testing.assert_array_equal(ops.learn, want.learn)
        np.testing.assert_array_equal(ops.t, want.t)
        got = ops.extra["key"]
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got[ops.pred_pos], key[a:b])
        np.testing.assert_array_equal(got[ops.learn], key[ops.learn_index])
        np.testing.assert_array_equal(planner.flight.extra["key"], key[planner.flight.index])
    ops = planner.flush()
    np.testing.assert_array_equal(ops.extra["key"], key[ops.learn_index])
    np.testing.assert_array_equal(planner.flight.extra["key"], key[planner.flight.index])
    assert planner.n_events == n
    assert planner.n_learned + len(planner.flight) + planner.n_never == n


def test_plan_flush_keeps_the_added_column_with_its_labels():
    flight = InFlight.empty(False)
    t = np.array([0.0, 1.0, 2.0])
    ops, flight = plan_batch(flight, t, t, np.zeros(3), t + 10.0, None, 0, extra={"key": np.array([5, 6, 7])})
    assert ops.n_learn == 0
    np.testing.assert_array_equal(ops.extra["key"], [5, 6, 7])
    ops, flight = plan_flush(flight, 11.0)
    np.testing.assert_array_equal(ops.extra["key"], [5, 6])
    np.testing.assert_array_equal(flight.extra["key"], [7])


def test_sorting_the_input_moves_an_added_column_with_its_rows():
    n = 50
    rng = np.random.default_rng(3)
    t = rng.permutation(n).astype(np.float64) // 2  # ties, out of order
    key = np.arange(n, dtype=np.int64)
    kept = pa.record_batch({"row": pa.array(key)})
    source = Source("<test>", "the test stream")
    parts = [
        keyed(
            EventBatch(source, a, kept.slice(a, 10), t[a : a + 10], t[a : a + 10], t[a : a + 10] % 2, None, None),
            key[a : a + 10],
        )
        for a in range(0, n, 10)
    ]
    batches = list(EventSource(iter(parts), batch_size=8, on_unsorted="sort", time_col="t"))
    assert [len(b) for b in batches] == [8] * 6 + [2]
    order = np.argsort(t, kind="stable")
    whole_t = np.concatenate([b.t for b in batches])
    np.testing.assert_array_equal(whole_t, t[order])
    np.testing.assert_array_equal(np.concatenate([b.key for b in batches]), key[order])
    rows = np.concatenate([b.kept.column("row").to_numpy() for b in batches])
    np.testing.assert_array_equal(rows, key[order])
    assert [b.row0 for b in batches] == list(range(0, n, 8))
    assert batches[1].where("t", 2) == "the input sorted by event time, column 't', row 10"


def test_stages_run_by_hand_give_what_replay_gives(clicks, tmp_path):
    """The source, planner, runners and sinks wired without ``replay``: the same output file and
    metrics, bit for bit."""
    names = ["pav", "raw"]
    summary = replay(clicks, names, output=tmp_path / "r.parquet", batch_size=700, metrics_window=1_000)

    sources = list_sources(clicks)
    prepared = prepare(sources, Columns(), None)
    cals = resolve_calibrators(names, None, None, None, None)
    files = OutputFiles({"output": tmp_path / "s.parquet"})
    files.reserve()
    sink = ParquetSink(files.tmp["output"], names, "snappy")
    metrics = MetricsSink(names, 1_000, default_metrics())
    runners = Runners(cals, timed=True, threads=None)
    planner = Planner(weighted=False, timed=True)
    source = EventSource(
        read_chunks(prepared, batch_size=700), batch_size=700, on_unsorted="error", time_col="event_time"
    )
    try:
        for batch in source:
            submitted = runners.submit(batch, planner.plan(batch), planner.n_events - len(batch))
            proba, llr, _ = runners.results(submitted)
            for s in (sink, metrics):
                s.add(batch, proba, llr)
        ops = planner.flush()
        if ops is not None:
            runners.learn(ops)
        table = metrics.finish(prepared.time_type)
        sink.close()
        files.commit()
    finally:
        source.close()
        runners.close()
        metrics.close()
        files.discard()
    assert pq.read_table(tmp_path / "s.parquet").equals(pq.read_table(tmp_path / "r.parquet"))
    assert table.equals(summary.metrics_table)
    assert planner.n_learned == summary.n_learned
    assert len(planner.flight) == summary.n_in_flight
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet", "s.parquet"]


def test_discarded_outputs_leave_nothing_and_keep_what_was_there(tmp_path):
    (tmp_path / "r.parquet").write_bytes(b"yesterday")
    files = OutputFiles({"output": tmp_path / "r.parquet", "plot": tmp_path / "p.png"})
    files.reserve()
    assert len(list(tmp_path.iterdir())) == 3
    files.discard()
    assert [p.name for p in tmp_path.iterdir()] == ["r.parquet"]
    assert (tmp_path / "r.parquet").read_bytes() == b"yesterday"


def test_the_summary_renders_from_its_own_module():
    summary = ReplaySummary(
        files=["<pyarrow Table>"],
        methods=["pav", "raw"],
        n_events=1_000,
        n_positive=20,
        n_learned=990,
        n_in_flight=10,
        label_mode="column",
        seconds=2.0,
        metrics={"pav": {"brier": 0.01, "cllr": float("nan")}, "raw": {"brier": 0.02, "cllr": 0.5}},
        metrics_table=None,
        calibrators={},
        notes=["a note"],
    )
    text = render_text(summary)
    assert text == summary.to_text() == str(summary)
    lines = text.splitlines()
    assert lines[0].split() == ["method", "Brier", "Cllr"]
    assert lines[2].split() == ["pav", "0.0100", "nan"]
    assert lines[3].split() == ["raw", "0.0200", "0.5000"]
    assert lines[4].startswith("1,000 events (2.000% positive) from 1 input(s) in 2.00 s (500 events/s)")
    assert lines[5] == "a note"
