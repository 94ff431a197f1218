"""Replay under a decay by time equals the event-by-event river face bit for bit.

Under a decay by time each learned event's weight is ``2**((t - t0) / half_life)``, so the last bit
of every time reaches the probabilities: replay reads a timestamp's seconds as its count of units
divided by the units in a second (one rounding, as pandas' ``total_seconds()`` gives them), and the
river face given those seconds agrees to the bit.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from naive import naive_replay

from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.replay import replay
from streamcal.windows import Decay


@pytest.fixture(scope="module")
def clicks(click_stream):
    return click_stream(3_000, seed=23, batch_size=1_000)


def seconds(table, column):
    """The column's seconds as count of milliseconds / 1000 (the click stream's unit)."""
    assert table.schema.field(column).type.unit == "ms"
    return table[column].cast(pa.int64()).to_numpy() / 1000.0


def test_replay_under_a_decay_by_time_equals_the_river_face_bit_for_bit(tmp_path, clicks):
    table = pq.read_table(clicks)
    t, label_t = seconds(table, "event_time"), seconds(table, "label_time")
    s = table["score"].to_numpy()
    y = table["label"].to_numpy(zero_copy_only=False).astype(float)
    assert np.mean(label_t > t) > 0.9  # most labels are late
    # the product with 1e-3 differs from the quotient in the last bit for many of these times
    ms = table["event_time"].cast(pa.int64()).to_numpy()
    assert np.count_nonzero(ms * 1e-3 != t) > 100
    cal = PAVCalibrator(window=Decay(3 * 86_400.0, by="time"))
    out = tmp_path / "out.parquet"
    replay(clicks, {"pav": cal}, output=out, metrics_window=1_000, batch_size=700)
    proba, llr = naive_replay(t, s, y, label_t, PAVCalibrator(window=Decay(3 * 86_400.0, by="time")))
    got = pq.read_table(out)
    assert got["proba_pav"].to_numpy().tobytes() == proba.tobytes()
    assert got["llr_pav"].to_numpy().tobytes() == llr.tobytes()


@pytest.mark.parametrize("unit", ["s", "ms", "us"])  # "s": the counts themselves
def test_timestamp_seconds_are_the_count_over_the_units_per_second(tmp_path, unit):
    """Each unit's counts as seconds: replay's outputs equal the river face given count / units."""
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000}[unit]
    rng = np.random.default_rng(3)
    counts = 1_767_227_207 * per_second + np.cumsum(rng.integers(1, 3 * per_second, 40))
    table = pa.table(
        {
            "event_time": pa.array(counts, pa.timestamp(unit, tz="UTC")),
            "score": np.linspace(0.05, 0.95, 40),
            "label": np.arange(40) % 3 == 0,
            "label_time": pa.array(counts + per_second, pa.timestamp(unit, tz="UTC")),
        }
    )
    cal = PAVCalibrator(window=Decay(5.0, by="time"))
    out = tmp_path / "out.parquet"
    replay(table, {"pav": cal}, output=out, metrics_window=10)
    t, label_t = counts / float(per_second), (counts + per_second) / float(per_second)
    y = (np.arange(40) % 3 == 0) * 1.0
    proba, _ = naive_replay(t, table["score"].to_numpy(), y, label_t, PAVCalibrator(window=Decay(5.0, by="time")))
    assert pq.read_table(out)["proba_pav"].to_numpy().tobytes() == proba.tobytes()
