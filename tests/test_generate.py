"""``generate``: seeded synthetic streams written batch by batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from streamcal.replay import SCENARIOS, generate
from streamcal.replay.generate import expected_base_rate

ROOT = Path(__file__).resolve().parents[1]
N = 40_000


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    d = tmp_path_factory.mktemp("gen")
    return {name: pq.read_table(generate(d / f"{name}.parquet", name, n=N, seed=11)) for name in SCENARIOS}


def test_columns_types_and_order(streams):
    ts = pa.timestamp("ms", tz="UTC")
    for name, table in streams.items():
        fields = [("event_time", ts), ("score", pa.float64()), ("label", pa.bool_()), ("label_time", ts)]
        assert table.schema == pa.schema([*fields, ("key", pa.int64())] if SCENARIOS[name].n_keys else fields)
        assert table.num_rows == N
        t = table["event_time"].cast(pa.int64()).to_numpy()
        lt = table["label_time"].cast(pa.int64()).to_numpy()
        s = table["score"].to_numpy()
        assert np.all(np.diff(t) >= 0)
        assert np.all(lt >= t)
        assert np.all((s > 0) & (s < 1))


def test_base_rates_and_label_delays(streams):
    day_ms = 86_400_000

    def parts(name):
        table = streams[name]
        y = table["label"].to_numpy(zero_copy_only=False)
        delay = table["label_time"].cast(pa.int64()).to_numpy() - table["event_time"].cast(pa.int64()).to_numpy()
        return y, delay, table["score"].to_numpy()

    y, delay, s = parts("click")
    assert 0.01 <= y.mean() <= 0.03
    assert s.mean() > 1.5 * y.mean()  # over-confident model
    assert delay.max() <= 2 * 3_600_000  # clicks and non-clicks are known within hours

    y, delay, s = parts("fraud")
    assert 0.001 <= y.mean() <= 0.005
    assert s.mean() < 0.7 * y.mean()  # under-confident model
    assert delay[y].min() >= day_ms  # chargebacks arrive days later
    assert np.median(delay[y]) >= 2 * day_ms

    y, _, s = parts("drift")
    thirds = [y[k * N // 3 : (k + 1) * N // 3].mean() for k in range(3)]
    assert thirds[1] > 2 * thirds[0]  # abrupt shift at one third
    # the score -> probability relation changes: low scores keep their rate, high ones lose it
    first, last = slice(N // 3, 2 * N // 3), slice(5 * N // 6, N)
    high = s > np.quantile(s, 0.95)
    assert y[last][high[last]].mean() < y[first][high[first]].mean()


def test_expected_base_rates_are_in_the_promised_ranges():
    assert 0.01 <= expected_base_rate("click") <= 0.03
    assert 0.001 <= expected_base_rate("fraud") <= 0.005


def test_same_seed_same_data_whatever_batch_size_or_parts(tmp_path, streams):
    a = pq.read_table(generate(tmp_path / "a.parquet", "fraud", n=N, seed=11, batch_size=3_001))
    assert a.equals(streams["fraud"])
    generate(tmp_path / "parts", "fraud", n=N, seed=11, parts=3, batch_size=7_000)
    b = ds.dataset(tmp_path / "parts").to_table()
    assert b.equals(streams["fraud"])
    c = pq.read_table(generate(tmp_path / "c.parquet", "fraud", n=N, seed=12))
    assert not c.equals(streams["fraud"])


def test_campaigns_have_zipf_traffic_and_a_miscalibration_per_key(tmp_path, streams):
    from streamcal.metrics import per_key_calibration

    table = streams["campaigns"]
    keys = table["key"].to_numpy()
    y = table["label"].to_numpy(zero_copy_only=False)
    s = table["score"].to_numpy()
    spec = SCENARIOS["campaigns"]
    counts = np.bincount(keys, minlength=spec.n_keys)
    assert keys.min() >= 0
    assert keys.max() < spec.n_keys
    # Zipf(1.1) over 2,000 keys: key 0 takes about 17 %, and most keys are seen in 40,000 events
    share = counts / keys.size
    assert 0.15 < share[0] < 0.19
    assert share[0] > share[1] > share[9]
    assert 0.3 * spec.n_keys < np.count_nonzero(counts) < 0.95 * spec.n_keys
    assert abs(y.mean() - expected_base_rate("campaigns", seed=11)) < 0.005
    # each large key is miscalibrated its own way: predicted / observed differs between them
    ratio = per_key_calibration(keys, y, s)["ratio"][:10]
    assert ratio.max() / ratio.min() > 1.5
    again = pq.read_table(generate(tmp_path / "k.parquet", "campaigns", n=N, seed=11, batch_size=6_001))
    assert again.equals(table)


def test_written_batch_by_batch(tmp_path):
    path = generate(tmp_path / "x.parquet", "click", n=10_000, seed=0, batch_size=1_000)
    assert pq.ParquetFile(path).num_row_groups == 10
    assert [p.name for p in tmp_path.iterdir()] == ["x.parquet"]  # no temporary file left


@pytest.mark.parametrize(("name", "fmt"), [("x.arrow", None), ("x.csv", None), ("x.data", "ipc")])
def test_formats(tmp_path, streams, name, fmt):
    path = generate(tmp_path / name, "click", n=N, seed=11, format=fmt, batch_size=9_000)
    dformat = fmt or {"arrow": "ipc", "csv": "csv"}[name.rsplit(".", 1)[1]]
    table = ds.dataset(path, format=dformat).to_table()
    want = streams["click"]
    np.testing.assert_array_equal(table["score"].to_numpy(), want["score"].to_numpy())
    np.testing.assert_array_equal(
        table["label"].to_numpy(zero_copy_only=False), want["label"].to_numpy(zero_copy_only=False)
    )
    got_t = table["event_time"].cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_numpy()
    np.testing.assert_array_equal(got_t, want["event_time"].cast(pa.int64()).to_numpy())


def test_empty_stream(tmp_path):
    table = pq.read_table(generate(tmp_path / "e.parquet", n=0))
    assert table.num_rows == 0
    assert table.column_names == ["event_time", "score", "label", "label_time"]


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"`scenario` must be one of \['campaigns', 'click', 'drift', 'fraud'\]; got 'ads'"):
        generate(tmp_path / "x.parquet", "ads")
    with pytest.raises(ValueError, match=r"`n` must be an int in \[0, inf\); got -1"):
        generate(tmp_path / "x.parquet", n=-1)
    with pytest.raises(TypeError, match=r"`n` must be an int; got 1\.5"):
        generate(tmp_path / "x.parquet", n=1.5)
    with pytest.raises(ValueError, match="`format` must be one of"):
        generate(tmp_path / "x.parquet", format="xlsx")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_refused_as_replay_refuses_it(tmp_path):
    missing = tmp_path / "no" / "such"
    with pytest.raises(ValueError, match=rf"`path` '{missing}/g.parquet': the directory '{missing}' does not exist\."):
        generate(missing / "g.parquet", n=10)
    with pytest.raises(ValueError, match=rf"the directory '{missing}' does not exist"):
        generate(missing / "parts", n=10, parts=2)  # the parts' new directory goes in an existing one
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ValueError, match=r"the directory '.*file' is not a directory"):
        generate(tmp_path / "file" / "g.parquet", n=10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    generate(tmp_path / "parts", n=10, parts=2)
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["part-00000.parquet", "part-00001.parquet"]


def test_cli_refuses_a_missing_directory_like_replay(tmp_path, capsys):
    from streamcal.cli import main

    missing = tmp_path / "no"
    assert main(["generate", str(missing / "g.parquet"), "-n", "10", "-q"]) == 2
    generate_err = capsys.readouterr().err
    assert generate_err.strip() == f"streamcal: error: PATH '{missing}/g.parquet': the directory '{missing}' does not exist."
    generate(tmp_path / "parts", n=10, parts=2)
    assert main(["replay", str(tmp_path / "parts"), "-o", str(missing / "o.parquet"), "-q"]) == 2
    assert f"the directory '{missing}' does not exist." in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]


def test_cli_generate(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "streamcal.replay",
        "generate",
        "f.csv",
        "--scenario",
        "fraud",
        "-n",
        "2e3",
        "--seed",
        "4",
    ]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert "wrote 2,000 fraud events to f.csv" in res.stdout
    assert ds.dataset(tmp_path / "f.csv", format="csv").count_rows() == 2_000
    res = subprocess.run(
        [*cmd[:5], "g.parquet", "--scenario", "nope"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2
    assert "invalid choice: 'nope'" in res.stderr


def numpy_peak(fn) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_stream(tmp_path):
    # numpy's allocations are traced: the peak depends on batch_size, not on n
    small = numpy_peak(lambda: generate(tmp_path / "a.parquet", "fraud", n=50_000, batch_size=25_000))
    large = numpy_peak(lambda: generate(tmp_path / "b.parquet", "fraud", n=400_000, batch_size=25_000))
    assert large < 1.5 * small
