"""Replay inputs: a path, a pyarrow Table / RecordBatch / RecordBatchReader, a pandas or polars
DataFrame give the same outputs bit for bit; file order when there is no event time column."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamcal.replay import ReplayInputError, replay

ROOT = Path(__file__).resolve().parents[1]
METHODS = "pav,platt,raw"
OPTIONS = {"refit_every": 200}


@pytest.fixture(scope="module")
def stream(click_stream):
    """A click stream with late labels (timestamps with a time zone, bool labels), 6,000 events,
    written in row groups of 1,000."""
    return click_stream(6_000, seed=11, batch_size=1_000)


def run(input, tmp_path, tag, **kw):
    kw.setdefault("batch_size", 777)
    out = tmp_path / f"{tag}.parquet"
    summary = replay(
        input,
        METHODS,
        window=2_000,
        output=out,
        metrics_window=1_000,
        method_options=OPTIONS,
        **kw,
    )
    return summary, pq.read_table(out)


def assert_same(a, b):
    """Same proba / llr columns (bit for bit, NaN where NaN) and the same metrics."""
    (summary_a, out_a), (summary_b, out_b) = a, b
    assert out_a.num_rows == out_b.num_rows
    for name in METHODS.split(","):
        for col in (f"proba_{name}", f"llr_{name}"):
            x, y = out_a[col].to_numpy(), out_b[col].to_numpy()
            assert x.tobytes() == y.tobytes(), col
    assert summary_a.metrics_table.equals(summary_b.metrics_table)
    assert repr(summary_a.metrics) == repr(summary_b.metrics)  # float repr is exact; nan == nan
    for k in ("n_events", "n_positive", "n_learned", "n_in_flight", "label_mode", "time_col"):
        assert getattr(summary_a, k) == getattr(summary_b, k), k


def test_tables_frames_and_paths_give_identical_outputs(tmp_path, stream):
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    table = pq.read_table(stream)
    base = run(stream, tmp_path, "path")
    assert base[0].label_mode == "column"
    assert base[0].n_learned > 5_000  # late labels, learned through planned operation sequences
    frame = table.to_pandas()
    assert isinstance(frame["event_time"].dtype, pd.DatetimeTZDtype)
    cases = {
        "table": table,
        "chunked_table": pa.concat_tables([table.slice(0, 1_234), table.slice(1_234)]),
        "record_batch": table.combine_chunks().to_batches()[0],
        "reader": table.to_reader(max_chunksize=2_000),
        "pandas": frame,
        "polars": pl.from_arrow(table),
    }
    for tag, obj in cases.items():
        got = run(obj, tmp_path, tag)
        assert_same(base, got)
        assert got[0].files == [f"<{got[0].files[0][1:-1]}>"]  # listed by kind, not as a path
    # the batch size changes nothing either
    assert_same(base, run(table, tmp_path, "big_batches", batch_size=100_000))
    # kept columns come through with their values
    got = pq.read_table(tmp_path / "pandas.parquet")
    assert got["score"].equals(table["score"])
    assert got["event_time"].cast(pa.int64()).equals(table["event_time"].cast(pa.int64()))


def test_pandas_named_index_is_a_column(tmp_path, stream):
    pytest.importorskip("pandas")
    table = pq.read_table(stream)
    frame = table.to_pandas().set_index("event_time")
    assert "event_time" not in frame.columns
    assert_same(run(stream, tmp_path, "path"), run(frame, tmp_path, "indexed"))
    # an unnamed index is left out (not copied to the output as a column)
    plain = table.to_pandas()
    plain.index = plain.index * 3
    _, out = run(plain, tmp_path, "unnamed", keep_columns=None)
    assert out.column_names[:4] == ["event_time", "score", "label", "label_time"]
    assert not any(c.startswith("__index") for c in out.column_names)


def test_a_list_of_inputs_is_replayed_in_order(tmp_path, stream):
    pd = pytest.importorskip("pandas")
    table = pq.read_table(stream)
    first, second = table.slice(0, 2_500), table.slice(2_500)
    part = tmp_path / "first.parquet"
    pq.write_table(first, part)
    mixed = run([part, second.to_pandas()], tmp_path, "mixed")
    assert mixed[0].files == [str(part), "<pandas DataFrame>"]
    assert_same(run(stream, tmp_path, "path"), mixed)
    assert isinstance(second.to_pandas(), pd.DataFrame)


def test_arrow_stream_objects_are_read_through_their_stream(tmp_path, stream):
    if not hasattr(pa.RecordBatchReader, "from_stream"):
        pytest.skip("this pyarrow has no RecordBatchReader.from_stream (Arrow C stream interface)")
    table = pq.read_table(stream)

    class Producer:  # any library's table with the Arrow PyCapsule stream interface
        def __arrow_c_stream__(self, requested_schema=None):
            return table.__arrow_c_stream__(requested_schema)

    assert_same(run(stream, tmp_path, "path"), run(Producer(), tmp_path, "producer"))


def test_errors_name_the_in_memory_input_and_row(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"score": [0.1, 0.5, np.nan, 0.7], "label": [0, 1, 0, 1]})
    # pandas' NaN is its missing value: Arrow reads it as null
    with pytest.raises(ReplayInputError, match=r"^the pandas DataFrame, column 'score', row 2: the score is null\.$"):
        replay(frame, "raw", metrics={})
    table = pa.table({"score": [0.1, 0.5], "label": [0, 2]})
    with pytest.raises(ReplayInputError, match=r"^input 1 \(a pyarrow Table\), column 'label', row 1: .*binary"):
        replay([pa.table({"score": [0.3], "label": [1]}), table], "raw", metrics={})
    with pytest.raises(ReplayInputError, match=r"the score column 'score' is missing; the input has columns \['scores', 'label'\]; choose the score column with score_col='scores'\.$"):
        replay(pa.table({"scores": [0.3], "label": [1]}), "raw", metrics={})
    # object columns that Arrow cannot type: named, not a pyarrow traceback
    bad = pd.DataFrame({"score": [0.1, "x"], "label": [0, 1]})
    with pytest.raises(ReplayInputError, match=r"^the pandas DataFrame: cannot be converted to Arrow"):
        replay(bad, "raw", metrics={})


def test_inputs_that_are_not_tables(tmp_path):
    with pytest.raises(TypeError, match=r"`input` must be a path .* got int"):
        replay(3, "raw")
    with pytest.raises(TypeError, match=r"got dict"):
        replay([{"score": [0.1]}], "raw")
    with pytest.raises(ValueError, match=r"`input` must name at least one"):
        replay([], "raw")
    pl = pytest.importorskip("polars")
    with pytest.raises(TypeError, match=r"LazyFrame is a query, not data; replay its `.collect\(\)`"):
        replay(pl.LazyFrame({"score": [0.1], "label": [1]}), "raw")


def test_no_event_time_column_replays_in_file_order_and_says_so(tmp_path):
    rng = np.random.default_rng(3)
    s = rng.random(3_000)
    y = (rng.random(3_000) < s).astype(np.int64)
    table = pa.table({"score": s, "label": y, "label_time": np.arange(3_000.0) + 5})
    summary = replay(table, "pav", metrics_window=1_000)
    assert summary.time_col is None
    assert summary.label_mode == "immediate"
    (note,) = summary.notes
    assert note == (
        "Replayed in file order: the input has no 'event_time' column, so its 'label_time' column is "
        "ignored and labels are known at once (name the event time column with time_col='NAME')."
    )
    assert note in summary.to_text()
    # file order over several files numbers the events across files (times keep increasing)
    parts = []
    for k in range(3):
        path = tmp_path / f"part{k}.parquet"
        pq.write_table(table.slice(1_000 * k, 1_000), path)
        parts.append(path)
    one = replay(table, "pav", output=tmp_path / "one.parquet", metrics_window=1_000)
    many = replay(parts, "pav", output=tmp_path / "many.parquet", metrics_window=1_000)
    assert many.n_events == 3_000
    assert pq.read_table(tmp_path / "one.parquet")["proba_pav"].equals(pq.read_table(tmp_path / "many.parquet")["proba_pav"])
    assert one.metrics_table.equals(many.metrics_table)
    # explicitly asking for file order gives the same; the note says only that label times are ignored
    explicit = replay(table, "pav", time_col=None, metrics_window=1_000)
    assert explicit.notes == [
        "Replayed in file order (time_col=None): the input's 'label_time' column is ignored and labels are known "
        "at once."
    ]
    assert explicit.metrics_table.equals(one.metrics_table)


def test_a_named_time_column_must_exist(tmp_path):
    ts = pa.array(np.arange(4, dtype=np.int64), pa.timestamp("s"))
    table = pa.table({"when": ts, "score": [0.1, 0.4, 0.6, 0.9], "label": [0, 0, 1, 1]})
    with pytest.raises(
        ReplayInputError,
        match=r"the event time column 'event_time' is missing; .*choose the event time column with "
        r"time_col='when', or replay in file order with time_col=None\.$",
    ):
        replay(table, "raw", time_col="event_time", metrics={})
    # a label delay needs event times, and the default time column is not there
    with pytest.raises(ReplayInputError, match=r"`label_delay` needs event times, but the pyarrow Table has no 'event_time'"):
        replay(table, "raw", label_delay="1h", metrics={})
    summary = replay(table, "raw", time_col="when", label_delay=1.5, metrics={})
    assert (summary.time_col, summary.label_mode, summary.n_learned) == ("when", "delay", 2)


def test_inputs_with_and_without_event_times_do_not_mix(tmp_path):
    with_t = pa.table({"event_time": [1.0, 2.0], "score": [0.1, 0.9], "label": [0, 1]})
    without = pa.table({"score": [0.1, 0.9], "label": [0, 1]})
    with pytest.raises(ReplayInputError, match=r"input 1 \(a pyarrow Table\), column 'event_time': this input has an event time column but the first input has none"):
        replay([without, with_t], "raw", metrics={})
    with pytest.raises(ReplayInputError, match=r"input 1 \(a pyarrow Table\), column 'event_time': the event time column 'event_time' is missing"):
        replay([with_t, without], "raw", metrics={})


def test_pandas_and_polars_stay_optional():
    """streamcal never imports pandas or polars itself, and replays without them (the default
    metrics come through river, which needs pandas: here they are left out)."""
    code = """
import sys
import streamcal, streamcal.replay, streamcal.cli
assert "pandas" not in sys.modules and "polars" not in sys.modules, "imported at module level"
class NotInstalled:  # importing pandas or polars fails, as if they were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pandas", "polars"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NotInstalled())
import tempfile, pyarrow as pa
from streamcal.replay import generate, replay
with tempfile.TemporaryDirectory() as tmp:
    path = generate(f"{tmp}/c.parquet", n=2_000, seed=1)
    a = replay(path, "pav", metrics={})
    b = replay(pa.table({"score": [0.2, 0.8], "label": [0, 1]}), "raw", metrics={})
print(a.n_events, b.n_events)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=600)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["2000", "2"]


@pytest.mark.parametrize("ending", ["\n", ""])
def test_a_csv_file_gets_the_metric_windows_of_its_length(tmp_path, stream, ending):
    """A CSV file's rows are counted before the replay, as Parquet's come from its metadata: the
    default metric windows follow the stream's length (20 windows here), not the default for an
    unknown length (100,000 events: one window)."""
    import pyarrow.csv as pacsv

    table = pq.read_table(stream)
    csv = tmp_path / "events.csv"
    pacsv.write_csv(table, csv)
    text = csv.read_bytes()
    csv.write_bytes(text.rstrip(b"\n") + ending.encode())
    from_parquet = replay(stream, "raw", output=tmp_path / "a.parquet")
    from_csv = replay(csv, "raw", output=tmp_path / "b.parquet")
    assert from_parquet.n_events == from_csv.n_events == 6_000
    assert from_csv.metrics_window == from_parquet.metrics_window == 1_000
