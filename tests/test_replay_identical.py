"""The replay's faster paths give the bits of the first, slower ones.

The output file equals the one built from the input read by ``pyarrow``'s own conversions and
the outputs written through ``pyarrow.array``; every metric of every window equals the metric
computed the way streamcal first computed it (``naive_replay_*`` in ``tests/naive.py``); the
planner and the metrics give the same bits in both tiers of the kernels.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from naive import (
    naive_replay_brier,
    naive_replay_calibration_loss,
    naive_replay_cllr,
    naive_replay_ece,
    naive_replay_log_loss,
    naive_replay_min_cllr,
)

from streamcal import PAVCalibrator
from streamcal._kernels import _config
from streamcal.metrics import _array
from streamcal.replay import replay
from streamcal.replay._arrow import fixed_width_array, string_array
from streamcal.replay._engine import InFlight, plan_batch
from streamcal.replay._evaluate import LOG_LOSS_EPS
from streamcal.replay._source import _values
from streamcal.replay.methods import RawScoreCalibrator
from streamcal.windows import CountWindow

FIRST_WAY = {
    "brier": lambda y, p, llr: naive_replay_brier(y, p),
    "log_loss": lambda y, p, llr: naive_replay_log_loss(y, p, LOG_LOSS_EPS),
    "cllr": lambda y, p, llr: naive_replay_cllr(y, llr),
    "min_cllr": lambda y, p, llr: naive_replay_min_cllr(y, llr),
    "ece": lambda y, p, llr: naive_replay_ece(y, p),
    "calibration_loss": lambda y, p, llr: naive_replay_calibration_loss(y, p),
}


def same_bits(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def calibrators():
    return {"pav": PAVCalibrator(window=CountWindow(2_000)), "raw": RawScoreCalibrator()}


@pytest.fixture(scope="module")
def clicks(click_stream):
    return click_stream(24_000, seed=17, batch_size=5_000)


def test_output_file_and_metrics_equal_the_first_way(tmp_path, clicks):
    out = tmp_path / "out.parquet"
    summary = replay(clicks, calibrators(), output=out, metrics_window=3_000, batch_size=4_096)
    got = pq.read_table(out)

    # the first way: the whole input through pyarrow's conversions, planned as one batch, the
    # outputs written with pyarrow.array
    table = pq.read_table(clicks)
    t = table["event_time"].cast(pa.int64()).to_numpy(zero_copy_only=False) * 1e-3
    label_t = table["label_time"].cast(pa.int64()).to_numpy(zero_copy_only=False) * 1e-3
    s = np.asarray(table["score"].to_numpy(zero_copy_only=False), dtype=np.float64)
    y = np.asarray(table["label"].to_numpy(zero_copy_only=False), dtype=np.float64)
    ops, _ = plan_batch(InFlight.empty(False), t, s, y, label_t, None, 0)
    want = table
    for name, cal in calibrators().items():
        proba, llr = cal.process(ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)
        want = want.append_column(f"proba_{name}", pa.array(np.asarray(proba)[ops.pred_pos], pa.float64()))
        want = want.append_column(f"llr_{name}", pa.array(np.asarray(llr)[ops.pred_pos], pa.float64()))
    assert got.schema.equals(want.schema)
    for column in want.column_names:
        if pa.types.is_floating(want.schema.field(column).type):
            assert same_bits(got[column].to_numpy(), want[column].to_numpy()), column
        else:
            assert got[column].combine_chunks().equals(want[column].combine_chunks()), column

    # every metric of every window, as first computed, from the file's columns
    assert_metrics_equal_the_first_way(summary, got, y)


def test_metrics_computed_together_equal_the_first_way(tmp_path, clicks):
    """With the compiled kernels loaded, a window's default metrics are computed in one pass."""
    _config.use_compiled_kernels()
    out = tmp_path / "out.parquet"
    summary = replay(clicks, calibrators(), output=out, metrics_window=3_000, batch_size=4_096)
    y = np.asarray(pq.read_table(clicks)["label"].to_numpy(zero_copy_only=False), dtype=np.float64)
    assert_metrics_equal_the_first_way(summary, pq.read_table(out), y)


def assert_metrics_equal_the_first_way(summary, got, y):
    rows = summary.metrics_table.to_pylist()
    assert len(rows) == 2 * 8
    for row in rows:
        span = slice(row["first_event"], row["last_event"] + 1)
        yy = y[span]
        p = got[f"proba_{row['method']}"].to_numpy()[span]
        llr = got[f"llr_{row['method']}"].to_numpy()[span]
        both = 0 < yy.sum() < yy.size
        for metric, first_way in FIRST_WAY.items():
            expected = first_way(yy, p, llr) if both or metric not in ("cllr", "min_cllr") else float("nan")
            assert same_bits(row[metric], expected), (row["window"], row["method"], metric)


@pytest.mark.parametrize("spread", [1.0, 1e-310, 1e300])
def test_min_cllr_equals_the_first_way_whatever_the_block_search(spread):
    """Every way of finding an event's PAV block (the table's cell, its forward scan, the binary
    search in a crowded cell, and every score in one cell where the blocks' range is subnormal or
    overflows), on ties, infinities and signed zeros."""
    rng = np.random.default_rng(5)
    for k in range(300):
        n = int(rng.integers(2, 400))
        s = rng.normal(size=n).round(int(rng.integers(0, 3))) * spread
        s[rng.uniform(size=n) < 0.05 * (k % 3)] = np.inf
        s[rng.uniform(size=n) < 0.05 * (k % 4)] = -np.inf
        s[rng.uniform(size=n) < 0.1 * (k % 2)] = -0.0
        if k % 5 == 0:  # a crowded cell: many distinct scores between two far ones
            s[: n // 2] = rng.uniform(0.0, 1e-6, n // 2)
            s[-1] = 1e6
        y = (rng.uniform(size=n) < np.where(s > 0, 0.8, 0.2)).astype(np.float64)
        y[0], y[-1] = 0.0, 1.0
        assert same_bits(_array.min_cllr(y, s), naive_replay_min_cllr(y, s)), k


def test_metrics_equal_the_first_way_in_both_tiers():
    _config.use_compiled_kernels()  # the calls outside ``interpreting()`` run compiled
    rng = np.random.default_rng(9)
    s = rng.uniform(size=3_000)
    y = (rng.uniform(size=3_000) < s).astype(np.float64)
    proba, llr = PAVCalibrator(window=CountWindow(500)).prequential(s, y)
    compiled = _array.min_cllr(y, llr)
    with _config.interpreting():
        interpreted = _array.min_cllr(y, llr)
    assert same_bits(compiled, interpreted)
    assert same_bits(compiled, naive_replay_min_cllr(y, llr))
    for metric, first_way in FIRST_WAY.items():
        fast = {
            "brier": lambda: _array.brier_score(y, proba),
            "log_loss": lambda: _array.log_loss(y, proba, eps=LOG_LOSS_EPS),
            "cllr": lambda: _array.cllr(y, llr),
            "min_cllr": lambda: _array.min_cllr(y, llr),
            "ece": lambda: _array.ece(y, proba),
            "calibration_loss": lambda: _array.calibration_loss(y, proba),
        }[metric]()
        assert same_bits(fast, first_way(y, proba, llr)), metric


def test_planner_gives_the_same_operations_in_both_tiers():
    _config.use_compiled_kernels()
    rng = np.random.default_rng(4)
    n = 2_000
    t = np.cumsum(rng.choice([0.0, 1.0, 2.5], size=n))
    s, y = rng.uniform(size=n), (rng.uniform(size=n) < 0.3).astype(np.float64)
    label_t = t + rng.choice([0.0, 1.0, 40.0, np.inf], size=n)
    w = rng.uniform(0.5, 1.5, size=n)
    runs = []
    for tier in ("compiled", "interpreted"):
        flight, planned = InFlight.empty(True), []
        for start in range(0, n, 300):
            part = slice(start, start + 300)
            if tier == "interpreted":
                with _config.interpreting():
                    ops, flight = plan_batch(flight, t[part], s[part], y[part], label_t[part], w[part], start)
            else:
                ops, flight = plan_batch(flight, t[part], s[part], y[part], label_t[part], w[part], start)
            planned.append(ops)
        runs.append(planned)
    for a, b in zip(*runs, strict=True):
        for field in ("s", "y", "learn", "t", "w", "pred_pos", "learn_index"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), field


@pytest.mark.parametrize(
    "array",
    [
        pa.array([1.5, -2.0, 3.25], pa.float64()),
        pa.array([1.5, -2.0, 3.25], pa.float32()),
        pa.array([1, 0, 1, 1], pa.int8()),
        pa.array([1, 0, 7], pa.uint16()),
        pa.array([True, False, True, True, False, False, False, True, True]),
        pa.array([True, False, True, True, False, False, False, True, True]).slice(3, 5),
        pa.array([10, 20, 30, 40], pa.int64()).slice(1, 2),
        pa.array([], pa.float64()),
        pa.array([], pa.bool_()),
        pa.array([True] * 20 + [False] * 5).slice(17, 6),
        pa.array([1_700_000_000_123, -5, 0], pa.timestamp("ms", tz="UTC")).slice(1),
        pa.array([1_700_000_000_123_456, 7], pa.timestamp("us")),
        pa.array([19_000, -3], pa.date32()),
        pa.array([1_641_600_000_000, 0], pa.date64()),
    ],
)
def test_arrow_values_are_those_of_to_numpy(array):
    got = _values(array)
    if pa.types.is_temporal(array.type):  # the counts of the unit, as a cast to an integer gives
        width = pa.int32() if pa.types.is_date32(array.type) else pa.int64()
        want = array.cast(width).to_numpy(zero_copy_only=False)
    else:
        want = array.to_numpy(zero_copy_only=False)
    assert got.size == len(array)
    assert np.array_equal(got.astype(want.dtype), want)


def test_arrow_arrays_from_buffers_equal_pyarrow_array():
    values = np.array([0.5, -0.0, np.inf, np.nan, 1e-300])
    got, want = fixed_width_array(values, pa.float64()), pa.array(values, pa.float64())
    assert got.type == want.type
    assert got.null_count == want.null_count == 0  # NaN stays a value, as with pyarrow.array
    assert same_bits(got.to_numpy(), want.to_numpy())
    ints = np.array([3, -1, 2**40], dtype=np.int64)
    assert fixed_width_array(ints, pa.int64()).equals(pa.array(ints, pa.int64()))
    stamp = pa.timestamp("ms", tz="UTC")
    assert fixed_width_array(ints, stamp).equals(pa.array(ints, stamp))
    assert string_array(["pav", "", "gév"]).equals(pa.array(["pav", "", "gév"], pa.string()))
    with pytest.raises(TypeError, match="do not fit"):
        fixed_width_array(np.zeros(2, dtype=np.float32), pa.float64())
