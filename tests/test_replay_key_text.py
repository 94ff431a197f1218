"""Keyed replay's string keys are the keys as written: each distinct key is one Python ``str``
(no fixed-width numpy strings, whose width is the batch's longest key and which drop trailing
NULs), and a CSV key column is read as text (``"005"`` is not ``"5"``, and a key that is not a
number after the first read block is a key, not a conversion error); typed inputs keep their
key types."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from streamcal import KeyedCalibrator
from streamcal.replay import generate, replay


def same_bits(a, b):
    return np.asarray(a, dtype=np.float64).tobytes() == np.asarray(b, dtype=np.float64).tobytes()


def events(n, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.01, 0.99, n)
    y = (rng.random(n) < s).astype(np.float64)
    return s, y


def object_keys(keys) -> np.ndarray:
    out = np.empty(len(keys), dtype=object)
    out[:] = list(keys)
    return out


def test_keys_differing_by_trailing_nuls_stay_apart(tmp_path):
    n = 3_000
    s, y = events(n)
    keys = ["a", "a\x00", "a\x00\x00", "b"] * (n // 4)
    want_p, want_llr = KeyedCalibrator().prequential(object_keys(keys), s, y)
    path = tmp_path / "nul.parquet"
    pq.write_table(pa.table({"score": s, "label": y, "key": keys}), path, row_group_size=1_000)
    out = tmp_path / "out.parquet"
    summary = replay(path, "pav", group_col="key", output=out, batch_size=700, metrics={})
    assert summary.keyed["n_keys"] == 4
    assert sorted(e["key"] for e in summary.keyed["methods"]["pav"]["largest"]) == sorted(set(keys))
    written = pq.read_table(out)
    assert same_bits(written["proba_pav"].to_numpy(), want_p)
    assert same_bits(written["llr_pav"].to_numpy(), want_llr)


def test_a_long_key_costs_its_length_once_not_once_per_row(tmp_path):
    # 2,000 rows and one key of 20,000 characters: as fixed-width strings every row would take
    # 80,000 bytes (160 MB for the batch); as one shared str the key costs its length once
    n = 2_000
    s, y = events(n, seed=1)
    long_key = "u" * 20_000
    keys = [f"k{i % 7}" for i in range(n)]
    keys[1_234] = long_key
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"score": s, "label": y, "key": keys}), path)
    replay(path, "pav", group_col="key", batch_size=n, metrics={})  # kernels loaded before measuring
    tracemalloc.start()
    try:
        summary = replay(path, "pav", group_col="key", output=tmp_path / "out.parquet", batch_size=n, metrics={})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"peak {peak / 2**20:.1f} MiB"
    assert summary.keyed["n_keys"] == 8
    want_p, _ = KeyedCalibrator().prequential(object_keys(keys), s, y)
    assert same_bits(pq.read_table(tmp_path / "out.parquet")["proba_pav"].to_numpy(), want_p)


@pytest.fixture(scope="module")
def csv_keys(tmp_path_factory):
    """A CSV file of 60,000 events (more than one read block) whose keys look like numbers, but
    for a zero-padded ``"005"`` beside ``"5"`` and a text key in the last rows."""
    n = 60_000
    s, y = events(n, seed=2)
    keys = [str(k) for k in np.random.default_rng(3).integers(0, 40, n)]
    keys[3] = "005"
    keys[n - 10] = "m-late"
    path = tmp_path_factory.mktemp("csv") / "keys.csv"
    pacsv.write_csv(pa.table({"score": s, "label": y, "key": keys}), path)
    assert path.stat().st_size > 1 << 20  # past the CSV reader's first block
    return path, keys, s, y


def test_csv_keys_are_read_as_written(tmp_path, csv_keys):
    path, keys, s, y = csv_keys
    out = tmp_path / "out.parquet"
    summary = replay(path, "pav", group_col="key", output=out, metrics={})
    assert summary.keyed["n_keys"] == len(set(keys)) == 42  # "005" apart from "5", and "m-late"
    written = pq.read_table(out)
    assert written["key"].to_pylist() == keys  # the kept key column holds the text of the file
    want_p, want_llr = KeyedCalibrator().prequential(object_keys(keys), s, y)
    assert same_bits(written["proba_pav"].to_numpy(), want_p)
    assert same_bits(written["llr_pav"].to_numpy(), want_llr)
    assert all(isinstance(e["key"], str) for e in summary.keyed["methods"]["pav"]["largest"])


def test_without_a_group_column_csv_types_stay_inferred(tmp_path):
    s, y = events(100, seed=5)
    small = tmp_path / "small.csv"
    pacsv.write_csv(pa.table({"score": s, "label": y, "key": np.arange(100)}), small)
    out = tmp_path / "out.parquet"
    replay(small, "raw", output=out, metrics={})
    assert pq.read_table(out).schema.field("key").type == pa.int64()
    replay(small, "pav", group_col="key", output=out, metrics={})
    written = pq.read_table(out)
    assert written.schema.field("key").type == pa.string()
    assert written.schema.field("score").type == pa.float64()  # only the key column is read as text


def test_typed_inputs_keep_their_key_types(tmp_path):
    path = generate(tmp_path / "c.parquet", scenario="campaigns", n=2_000, seed=4)
    out = tmp_path / "out.parquet"
    summary = replay(path, "pav", group_col="key", output=out, metrics={})
    assert pq.read_table(out).schema.field("key").type == pa.int64()
    assert all(type(e["key"]) is int for e in summary.keyed["methods"]["pav"]["largest"])
    table = pq.read_table(path)
    as_ipc = tmp_path / "c.arrow"
    with pa.ipc.new_file(as_ipc, table.schema) as writer:
        writer.write_table(table)
    summary = replay(as_ipc, "pav", group_col="key", format="ipc", metrics={})
    assert all(type(e["key"]) is int for e in summary.keyed["methods"]["pav"]["largest"])


def test_the_summary_counts_one_key_in_the_singular(tmp_path, capsys):
    from streamcal.cli import main

    rng = np.random.default_rng(6)
    s = rng.uniform(0.01, 0.5, 3_000)
    y = (rng.random(s.size) < 2.0 * s).astype(np.float64)  # the input score under-predicts: flagged
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"score": s, "label": y, "key": ["only"] * s.size}), path)
    code = main(["replay", str(path), "--group-col", "key", "--monitor", "--no-output", "--metrics", "none"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Keyed by 'key': 1 key. " in out
    assert "; 1 key held, 0 evicted" in out
    assert "only: 3,000 events, " in out
    assert "input score: mean bias: 1 of 1 key flagged, first key only at event" in out
    assert "1 keys" not in out


def test_a_float_key_column_is_refused_with_a_hint_at_missing_keys(tmp_path):
    pd = pytest.importorskip("pandas")
    s, y = events(6, seed=7)
    frame = pd.DataFrame({"score": s, "label": y, "key": [1, 2, None, 1, 2, 1]})  # pandas: float64
    with pytest.raises(ValueError, match=r"got type double\. A float key column usually means missing keys \(NaN\)"):
        replay(frame, "pav", group_col="key", metrics={})
    # as pandas' nullable integers the column stays integer and the missing key is named by row
    frame["key"] = frame["key"].astype("Int64")
    with pytest.raises(ValueError, match=r"row 2: the key is null"):
        replay(frame, "pav", group_col="key", metrics={})
