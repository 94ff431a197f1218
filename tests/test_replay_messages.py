"""What replay says about its inputs and its results: errors name the column, row, value and
types at fault; the summary's notes say what its counts and flags mean."""

from __future__ import annotations

import csv
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamcal.replay import ReplayInputError, generate, replay


@pytest.fixture(scope="module")
def click_csv(tmp_path_factory):
    """2,000 click events in CSV (timestamps as text, label times late)."""
    path = tmp_path_factory.mktemp("clicks-csv") / "clicks.csv"
    generate(path, "click", n=2_000, seed=5)
    return path


def with_cell(src, dst, column: str, row: int, text: str):
    """``src`` with data row ``row`` (0: the first after the header) of ``column`` set to ``text``."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    rows[1 + row][rows[0].index(column)] = text
    with open(dst, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return dst


@pytest.mark.parametrize("column", ["event_time", "label_time"])
def test_a_csv_time_cell_that_is_neither_number_nor_timestamp_is_named_with_its_row(tmp_path, click_csv, column):
    bad = with_cell(click_csv, tmp_path / "bad.csv", column, 49, "notatime")
    with pytest.raises(ReplayInputError) as err:
        replay(bad, "raw")
    msg = str(err.value)
    assert f"column '{column}'" in msg
    assert "Its row 49 holds 'notatime', which is neither a number nor a timestamp." in msg


def test_a_format_that_is_not_the_files_names_both(tmp_path, click_csv):
    path = tmp_path / "clicks.parquet"
    replay(click_csv, "raw", output=path)  # any Parquet file
    with pytest.raises(ReplayInputError) as err:
        replay(path, "raw", format="csv")
    msg = str(err.value)
    assert msg == f"file {str(path)!r}: is a Parquet file, not CSV as format='csv' says; give format='parquet'."
    assert msg.isprintable()


def test_a_reader_message_is_cut_before_unprintable_bytes(tmp_path):
    path = tmp_path / "junk.csv"
    path.write_bytes(b"a,b\n1,2\n" + bytes(range(1, 40)) + b",\x00\xff\n" * 3)
    with pytest.raises(ReplayInputError) as err:
        replay(path, "raw")
    assert str(err.value).isprintable()


def test_key_columns_of_different_types_name_the_column_and_both_types(tmp_path):
    base = {"event_time": [1.0, 2.0], "score": [0.2, 0.7], "label": [False, True]}
    pq.write_table(pa.table({**base, "key": pa.array([1, 2], pa.int64())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({**base, "key": pa.array(["x", "y"], pa.large_string())}), tmp_path / "b.parquet")
    with pytest.raises(ReplayInputError) as err:
        replay([tmp_path / "a.parquet", tmp_path / "b.parquet"], "pav", group_col="key")
    msg = str(err.value)
    assert "b.parquet', column 'key': the key column is large_string here but int64 in file" in msg
    assert "a.parquet', column 'key'" in msg


def test_kept_columns_of_different_types_name_the_column_and_both_types(tmp_path):
    base = {"event_time": [1.0, 2.0], "score": [0.2, 0.7], "label": [False, True]}
    pq.write_table(pa.table({**base, "note": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({**base, "note": ["x", "y"]}), tmp_path / "b.parquet")
    with pytest.raises(ReplayInputError, match=r"b\.parquet', column 'note', row 0: the column is string here but "
                       r"int64 in the first input, and does not convert"):
        replay([tmp_path / "a.parquet", tmp_path / "b.parquet"], "raw", output=tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


def delayed(n: int = 3_000, seconds: bool = False):
    """Positives' labels known after a minute, negatives' after an hour; times as timestamps, or as
    numbers of seconds."""
    rng = np.random.default_rng(8)
    t = 1_767_225_600.0 + np.cumsum(rng.exponential(2.0, n)).round(3)
    s = rng.uniform(0.0, 0.2, n)
    y = rng.random(n) < s
    label_t = t + np.where(y, 60.0, 3_600.0)
    if seconds:
        return pa.table({"event_time": t, "score": s, "label": y, "label_time": label_t})
    ts = pa.timestamp("ms", tz="UTC")
    as_ms = lambda x: pa.array(np.round(x * 1000).astype(np.int64), ts)  # noqa: E731
    return pa.table({"event_time": as_ms(t), "score": s, "label": y, "label_time": as_ms(label_t)})


def test_label_delays_in_plain_seconds_keep_their_unit():
    text = replay(delayed(seconds=True), "raw").to_text()
    assert "Labels: positives' arrive after 60 s on average, negatives' after 3600 s." in text


def test_times_going_backwards_are_shown_without_conversion_noise(tmp_path, click_csv):
    with open(click_csv, newline="") as f:
        rows = list(csv.reader(f))
    rows[1 + 100], rows[1 + 50] = rows[1 + 50], rows[1 + 100]
    with open(tmp_path / "back.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(ReplayInputError) as err:
        replay(tmp_path / "back.csv", "raw")
    msg = str(err.value)
    times = re.search(r"event times go backwards \(([0-9.]+) s after ([0-9.]+) s\)", msg)
    assert times is not None, msg
    # milliseconds: three decimals at most, no last-bit noise as 1767227207.7840002
    assert all(len(x.partition(".")[2]) <= 3 for x in times.groups()), msg


def test_the_kept_keys_are_told_from_the_keys_seen(tmp_path):
    n = 400
    rng = np.random.default_rng(2)
    key = rng.integers(0, 20, n)
    key[-3:] = [100, 101, 102]  # keys whose one label never arrives: seen, never held
    t = np.arange(n, dtype=np.float64)
    label_t = pa.array(np.where(key >= 100, 0.0, t + 1.0), mask=key >= 100)
    table = pa.table({"event_time": t, "score": rng.random(n), "label": rng.random(n) < 0.3,
                      "label_time": label_t, "key": key})
    summary = replay(table, "pav", group_col="key")
    text = summary.to_text()
    held = summary.keyed["methods"]["pav"]["keys_held"]
    assert summary.keyed["n_keys"] - held == 3
    assert f"{held:,} keys held (the other 3 keys seen: no label learned yet), 0 evicted" in text


def test_file_order_by_choice_says_the_label_times_are_ignored():
    table = delayed(300)
    summary = replay(table, "raw", time_col=None)
    assert summary.label_mode == "immediate"
    assert (
        "Replayed in file order (time_col=None): the input's 'label_time' column is ignored and labels are known "
        "at once." in summary.notes
    )


def test_event_and_label_timestamps_with_and_without_a_zone_are_refused():
    table = delayed(50)
    naive = table.set_column(0, "event_time", table["event_time"].cast(pa.timestamp("ms")))
    with pytest.raises(ReplayInputError) as err:
        replay(naive, "raw")
    msg = str(err.value)
    assert "the event time column 'event_time' is timestamp[ms] but the label time column 'label_time' is " in msg
    assert "timestamp[ms, tz=UTC]; give both a time zone or neither" in msg
    replay(naive, "raw", label_time_col=None)  # without label times, a naive event time is fine


def test_monitors_give_the_raw_method_and_the_input_score_one_line():
    text = replay(delayed(), "pav,raw", monitor=True).to_text()
    monitor_lines = text.split("Calibration monitors", 1)[1].splitlines()
    assert any(line.startswith("  raw (the input score itself): ") for line in monitor_lines)
    assert not any(line.startswith(("  raw: ", "  input score: ")) for line in monitor_lines)


def test_alarms_under_label_delays_that_differ_point_at_the_delayed_feedback_note():
    summary = replay(delayed(), "pav,raw", monitor=True)
    assert summary.alarms["pav"]["mean bias"] is not None  # the bias of learning positives first
    event = min(hit[0] for hit in summary.alarms["pav"].values() if hit is not None)
    line = next(n for n in summary.notes if n.startswith("Monitors and label delays:"))
    assert f"first flagged pav at event {event:,}, " in line
    assert "delayed-feedback bias of the labels note" in line
    assert "raw at event" not in line  # the score itself learns nothing: no delayed feedback
    # with one delay for every label, no such line
    summary = replay(delayed(), "pav,raw", monitor=True, label_delay=3_600.0)
    assert not any(n.startswith("Monitors and label delays:") for n in summary.notes)
