"""streamcal.dask: fitting over partitions and tree merging == fitting in memory; scoring."""

from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")

from streamcal import PAVCalibrator  # noqa: E402
from streamcal import dask as scd  # noqa: E402
from streamcal.buckets import QuantileEdges, UniformGrid  # noqa: E402
from streamcal.windows import CountWindow, Decay, TimeWindow  # noqa: E402

N = 6000


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(11)
    s = rng.uniform(size=N)
    return pd.DataFrame(
        {
            "score": s,
            "label": rng.uniform(size=N) < s**2,
            "weight": rng.integers(1, 4, size=N).astype(float),
            "time": np.cumsum(rng.exponential(size=N)),
            "key": rng.integers(0, 8, size=N),
        }
    )


@pytest.fixture(scope="module")
def parquet_dir(frame, tmp_path_factory):
    """8 Parquet files in stream order (part-0 ... part-7), as a dataset directory."""
    path = tmp_path_factory.mktemp("parquet")
    for i, chunk in enumerate(np.array_split(np.arange(N), 8)):
        frame.iloc[chunk].to_parquet(path / f"part-{i}.parquet", index=False)
    return path


def in_memory(cal, frame, weight=True, time=True):
    return cal.update(
        frame["score"].to_numpy(),
        frame["label"].to_numpy(),
        weights=frame["weight"].to_numpy() if weight else None,
        times=frame["time"].to_numpy() if time and cal.window_histogram.uses_times else None,
    )


def assert_equal_calibrators(a, b):
    grid = np.linspace(0, 1, 513)
    assert a.n_learned == b.n_learned
    np.testing.assert_array_equal(a.histogram()[1], b.histogram()[1])
    np.testing.assert_array_equal(a.histogram()[2], b.histogram()[2])
    np.testing.assert_array_equal(a.predict_proba(grid), b.predict_proba(grid))
    np.testing.assert_array_equal(a.predict_llr(grid), b.predict_llr(grid))


@pytest.mark.parametrize(
    "make",
    [
        lambda: PAVCalibrator(),
        lambda: PAVCalibrator(window=CountWindow(1000), interpolation="step"),
        lambda: PAVCalibrator(buckets=UniformGrid(n_buckets=50), window=TimeWindow(seconds=900.0)),
    ],
    ids=["unbounded", "count", "time"],
)
def test_dask_fit_over_parquet_equals_in_memory_fit(parquet_dir, frame, make):
    ddf = dd.read_parquet(parquet_dir)
    assert ddf.npartitions == 8
    cal = make()
    fitted = scd.fit(cal, ddf, "score", "label", weight="weight", time="time", split_every=3, scheduler="sync")
    assert cal.n_learned == 0  # the template is not touched
    assert_equal_calibrators(fitted, in_memory(make(), frame))


def test_time_windows_need_no_global_order(frame):
    # partitions by key: every partition interleaves in time with the others
    shuffled = pd.concat([frame[frame["key"] == k] for k in range(8)])
    ddf = dd.from_pandas(shuffled, npartitions=8, sort=False)
    make = lambda: PAVCalibrator(window=Decay(half_life=500.0, by="time"))  # noqa: E731
    fitted = scd.fit(make(), ddf, "score", "label", weight="weight", time="time", scheduler="sync")
    single = in_memory(make(), frame)
    grid = np.linspace(0, 1, 101)
    np.testing.assert_allclose(fitted.histogram()[1], single.histogram()[1], rtol=1e-12)
    np.testing.assert_allclose(fitted.predict_proba(grid), single.predict_proba(grid), rtol=1e-9)


def test_quantile_edges_are_fixed_from_the_first_rows(frame):
    ddf = dd.from_pandas(frame, npartitions=6)
    make = lambda: PAVCalibrator(buckets=QuantileEdges(n_buckets=32, warmup=1500))  # noqa: E731
    fitted = scd.fit(make(), ddf, "score", "label", scheduler="sync")
    single = in_memory(make(), frame, weight=False)
    np.testing.assert_array_equal(fitted.edges, single.edges)
    assert_equal_calibrators(fitted, single)


def test_fit_on_a_local_distributed_cluster(parquet_dir, frame):
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        ddf = dd.read_parquet(parquet_dir)
        fitted = scd.fit(PAVCalibrator(), ddf, "score", "label", weight="weight")
        proba = scd.predict(fitted, ddf, "score").compute()
        assert client.status == "running"
    single = in_memory(PAVCalibrator(), frame)
    assert_equal_calibrators(fitted, single)
    np.testing.assert_array_equal(proba.to_numpy(), single.predict_proba(frame["score"].to_numpy()))


def test_predict_outputs(frame):
    cal = in_memory(PAVCalibrator(), frame)
    ddf = dd.from_pandas(frame, npartitions=3)
    s = frame["score"].to_numpy()
    both = scd.predict(cal, ddf, "score", output="both").compute(scheduler="sync")
    assert list(both.columns) == ["proba", "llr"]
    np.testing.assert_array_equal(both["proba"].to_numpy(), cal.predict_proba(s))
    np.testing.assert_array_equal(both["llr"].to_numpy(), cal.predict_llr(s))
    llr = scd.predict(cal, ddf["score"], output="llr").compute(scheduler="sync")
    assert llr.name == "llr"
    np.testing.assert_array_equal(llr.to_numpy(), cal.predict_llr(s))
    added = ddf.assign(proba=scd.predict(cal, ddf, "score")).compute(scheduler="sync")
    np.testing.assert_array_equal(added["proba"].to_numpy(), cal.predict_proba(s))


def test_compute_false_returns_a_delayed_calibrator(frame):
    ddf = dd.from_pandas(frame, npartitions=4)
    lazy = scd.fit(PAVCalibrator(), ddf, "score", "label", compute=False)
    assert hasattr(lazy, "compute")
    assert lazy.compute(scheduler="sync").n_learned == N


def test_bad_arguments_are_rejected(frame):
    ddf = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(KeyError, match="`label` must name a column"):
        scd.fit(PAVCalibrator(), ddf, "score", "y")
    with pytest.raises(ValueError, match="must be fresh"):
        scd.fit(PAVCalibrator().update([0.5], [1]), ddf, "score", "label")
    with pytest.raises(TypeError, match="streaming calibrator"):
        scd.fit(object(), ddf, "score", "label")
    with pytest.raises(ValueError, match="TimeWindow needs event times: pass `time=`"):
        scd.fit(PAVCalibrator(window=TimeWindow(10.0)), ddf, "score", "label")
    with pytest.raises(ValueError, match="`split_every`"):
        scd.fit(PAVCalibrator(), ddf, "score", "label", split_every=1)
    with pytest.raises(ValueError, match="`output`"):
        scd.predict(PAVCalibrator(), ddf, "score", output="odds")
    with pytest.raises(TypeError, match="dask DataFrame or Series"):
        scd.predict(PAVCalibrator(), frame, "score")


def test_missing_dask_is_a_clear_import_error(monkeypatch, frame):
    monkeypatch.setitem(sys.modules, "dask", None)
    from streamcal._install import install_hint

    with pytest.raises(ImportError, match=re.escape(install_hint("dask"))):
        scd.fit(PAVCalibrator(), frame, "score", "label")


def test_dask_fit_of_a_histogram_fitted_calibrator(parquet_dir, frame):
    from streamcal import ISplineCalibrator

    ddf = dd.read_parquet(parquet_dir)
    fitted = scd.fit(ISplineCalibrator(), ddf, "score", "label", weight="weight", scheduler="sync")
    assert_equal_calibrators(fitted, in_memory(ISplineCalibrator(), frame))


@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Paris"])
def test_a_datetime_time_column_is_read_as_seconds(frame, tz):
    """``window="1h"`` over a datetime column is one hour (seconds since the epoch, as replay reads
    a timestamp column), whatever the column's zone; a time-difference column is seconds too."""
    start = pd.Timestamp("2026-01-01", tz=tz)
    with_dates = frame.assign(when=start + pd.to_timedelta(frame["time"] * 60.0, unit="s"))
    with_seconds = frame.assign(secs=(frame["time"] * 60.0))
    with_deltas = frame.assign(delta=pd.to_timedelta(frame["time"] * 60.0, unit="s"))
    fits = [
        scd.fit(PAVCalibrator(window="1h"), dd.from_pandas(f, npartitions=3), score="score", label="label", time=col,
                scheduler="sync")
        for f, col in ((with_dates, "when"), (with_seconds, "secs"), (with_deltas, "delta"))
    ]
    # one event a minute on average: an hour's window holds about 60 events, not the 1 a
    # column read as milliseconds would leave
    assert 20 < fits[1].window_weight < 200
    assert fits[0].window_weight == fits[1].window_weight == fits[2].window_weight
    grid = np.linspace(0.01, 0.99, 50)
    assert np.array_equal(fits[0].predict_proba(grid), fits[1].predict_proba(grid))


def test_a_bad_value_is_named_with_its_partition_and_pandas_input_is_refused(frame):
    bad = frame.copy()
    bad.loc[4_500, "score"] = 1.5  # partition 2 of 3 (rows 4,000-5,999), its position 500
    ddf = dd.from_pandas(bad, npartitions=3)
    with pytest.raises(ValueError, match=r"got 1\.5 at position 500.*in partition 2 of `data`"):
        scd.fit(PAVCalibrator(), ddf, score="score", label="label", scheduler="sync")
    with pytest.raises(ValueError, match=r"got 1\.5 at position 500.*in partition 2 of `data`"):
        scd.predict(PAVCalibrator().update([0.2, 0.8], [0, 1]), ddf, score="score").compute(scheduler="sync")
    with pytest.raises(TypeError, match="`data` must be a dask DataFrame; got a pandas DataFrame"):
        scd.fit(PAVCalibrator(), frame, score="score", label="label")


def keyed_in_memory(cal, frame, time=False):
    return cal.update(
        frame["key"].to_numpy(),
        frame["score"].to_numpy(),
        frame["label"].to_numpy(),
        weights=frame["weight"].to_numpy(),
        times=frame["time"].to_numpy() if time else None,
    )


@pytest.mark.parametrize(
    ("template", "time"),
    [
        (PAVCalibrator(prior=None), False),
        (PAVCalibrator(prior=None, window=CountWindow(300)), False),
        (PAVCalibrator(prior=None, window=TimeWindow(seconds=120.0)), True),
    ],
    ids=["unbounded", "count", "time"],
)
@pytest.mark.parametrize("strength", [0, 25.0])
def test_a_keyed_fit_over_partitions_equals_one_keyed_calibrator(parquet_dir, frame, template, time, strength):
    """Every key's window and the global map are one calibrator's over the rows in order, and
    with the prior taken from the global map as it stands, so is every prediction, bit for bit."""
    from streamcal import KeyedCalibrator

    cal = KeyedCalibrator(template, key_key="campaign", prior_strength=strength)
    ddf = dd.read_parquet(parquet_dir)
    fitted = scd.fit(cal, ddf, "score", "label", key="key", weight="weight", time="time" if time else None,
                     scheduler="sync")
    assert cal.n_learned == 0  # the calibrator given is left as it was
    one = keyed_in_memory(cal.clone(), frame, time)
    assert fitted.n_learned == one.n_learned == N
    assert sorted(fitted.keys()) == sorted(one.keys()) == list(range(8))
    assert_equal_calibrators(fitted.global_calibrator, one.global_calibrator)
    for key in range(8):
        assert_equal_calibrators(fitted.key_state(key), one.key_state(key))
    one.replace_global(one.global_calibrator)  # its prior from the global map of now, as the merge's
    grid = np.linspace(0.0, 1.0, 257)
    for key in (0, 5, 99):  # 99: no state, the global map
        keys = np.full(grid.size, key)
        np.testing.assert_array_equal(fitted.predict_proba(keys, grid), one.predict_proba(keys, grid))
        np.testing.assert_array_equal(fitted.predict_llr(keys, grid), one.predict_llr(keys, grid))


def test_a_keyed_fit_under_the_automatic_strength_is_close_to_one_calibrator(frame):
    """Under "auto" each key's expected positives are counted against its partition's global
    map: its rows merge exactly, its shift nearly."""
    from streamcal import KeyedCalibrator

    cal = KeyedCalibrator(PAVCalibrator(prior=None))
    fitted = scd.fit(cal, dd.from_pandas(frame, npartitions=4), "score", "label", key="key", weight="weight",
                     scheduler="sync")
    one = keyed_in_memory(cal.clone(), frame)
    one.replace_global(one.global_calibrator)
    grid = np.linspace(0.0, 1.0, 101)
    for key in range(8):
        assert_equal_calibrators(fitted.key_state(key), one.key_state(key))
        keys = np.full(grid.size, key)
        np.testing.assert_allclose(fitted.predict_proba(keys, grid), one.predict_proba(keys, grid), rtol=0, atol=1e-2)


def test_keyed_predict_serves_each_row_its_keys_map(frame):
    from streamcal import KeyedCalibrator

    ddf = dd.from_pandas(frame, npartitions=3)
    fitted = scd.fit(KeyedCalibrator(), ddf, "score", "label", key="key", scheduler="sync")
    keys, s = frame["key"].to_numpy(), frame["score"].to_numpy()
    both = scd.predict(fitted, ddf, "score", key="key", output="both").compute(scheduler="sync")
    np.testing.assert_array_equal(both["proba"].to_numpy(), fitted.predict_proba(keys, s))
    np.testing.assert_array_equal(both["llr"].to_numpy(), fitted.predict_llr(keys, s))
    proba = scd.predict(fitted, ddf, "score", key="key").compute(scheduler="sync")
    np.testing.assert_array_equal(proba.to_numpy(), fitted.predict_proba(keys, s))
    # string keys, from an object column
    named = frame.assign(key=frame["key"].map(lambda k: f"campaign-{k}"))
    fitted = scd.fit(KeyedCalibrator(), dd.from_pandas(named, npartitions=3), "score", "label", key="key",
                     scheduler="sync")
    assert sorted(fitted.keys()) == sorted(f"campaign-{k}" for k in range(8))


def test_keyed_bad_arguments_are_rejected(frame):
    from streamcal import KeyedCalibrator, KeyedOffsetCalibrator
    from streamcal.exceptions import InvalidKeyError

    ddf = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(ValueError, match="`key` must name the key column of `data` for a KeyedCalibrator"):
        scd.fit(KeyedCalibrator(), ddf, "score", "label")
    with pytest.raises(ValueError, match="`key` is for keyed calibrators"):
        scd.fit(PAVCalibrator(), ddf, "score", "label", key="key")
    with pytest.raises(TypeError, match="KeyedOffsetCalibrator does not"):
        scd.fit(KeyedOffsetCalibrator(), ddf, "score", "label", key="key")
    with pytest.raises(KeyError, match="`key` must name a column"):
        scd.fit(KeyedCalibrator(), ddf, "score", "label", key="campaign")
    with pytest.raises(ValueError, match="must be fresh"):
        scd.fit(KeyedCalibrator().update([1], [0.5], [1]), ddf, "score", "label", key="key")
    fitted = scd.fit(KeyedCalibrator(), ddf, "score", "label", key="key", scheduler="sync")
    with pytest.raises(TypeError, match="holding the key and score columns"):
        scd.predict(fitted, ddf["score"], key="key")
    with pytest.raises(ValueError, match="`key` must name the key column"):
        scd.predict(fitted, ddf, "score")
    with pytest.raises(ValueError, match="two columns"):
        scd.predict(fitted, ddf, "score", key="score")
    bad = frame.astype({"key": object})
    bad.loc[4_100, "key"] = None  # partition 2 of 3 (rows 4,000-5,999), its position 100
    with pytest.raises(InvalidKeyError, match=r"position 100.*in partition 2 of `data`"):
        scd.fit(KeyedCalibrator(), dd.from_pandas(bad, npartitions=3), "score", "label", key="key", scheduler="sync")
