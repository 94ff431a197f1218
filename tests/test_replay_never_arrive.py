"""Labels that never arrive (a null label time, or an infinite numeric one): predicted and written as any event, counted
apart in the summary, and never held by the planner (memory does not grow with them)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from naive import naive_replay

from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.replay import replay
from streamcal.replay._batch import EventBatch
from streamcal.replay._engine import Planner
from streamcal.replay._source import Source
from streamcal.windows import CountWindow


def stream(n: int, seed: int):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.choice([0.0, 1.0, 3.0], n))
    label_t = t + rng.choice([0.0, 2.0, 50.0], n)
    never = rng.random(n) < 0.3
    label_t[never] = np.inf
    s = rng.random(n)
    y = (rng.random(n) < s).astype(np.float64)
    return t, s, y, label_t, never


@pytest.mark.parametrize("batch_size", [1, 64, 500])
def test_the_planner_never_holds_a_label_that_never_arrives(batch_size):
    n = 2_000
    t, s, y, label_t, never = stream(n, batch_size)
    planner = Planner(weighted=False, timed=True)
    source = Source("<test>", "the test stream")
    for a in range(0, n, batch_size):
        b = min(a + batch_size, n)
        planner.plan(EventBatch(source, a, None, t[a:b], s[a:b], y[a:b], label_t[a:b], None))
        assert np.isfinite(planner.flight.label_t).all()
        assert planner.n_never == np.count_nonzero(never[:b])
        assert planner.n_learned + len(planner.flight) + planner.n_never == b
    planner.flush()
    assert planner.n_learned + len(planner.flight) + planner.n_never == n


@pytest.mark.parametrize("missing", ["null", "inf"])
def test_the_summary_counts_them_apart_and_the_outputs_are_the_river_faces(tmp_path, missing):
    n = 3_000
    t, s, y, label_t, never = stream(n, 9)
    if missing == "null":
        column = pa.array(np.where(never, 0.0, label_t), mask=never)
    else:  # numeric label times: an infinite one never comes
        column = pa.array(label_t)
    table = pa.table({"event_time": t, "score": s, "label": y.astype(bool), "label_time": column})
    out = tmp_path / "out.parquet"
    summary = replay(table, {"pav": PAVCalibrator(window=CountWindow(300))}, output=out, batch_size=256)
    n_never = int(np.count_nonzero(never))
    assert summary.n_never == n_never > 0
    assert summary.n_in_flight == int(np.count_nonzero(~never & (label_t > t[-1])))
    assert summary.n_learned + summary.n_in_flight + summary.n_never == n
    assert f"{n_never:,} never arrive (null or infinite label time)" in summary.to_text()
    assert "still in flight" in summary.to_text()
    proba, llr = naive_replay(t, s, y, label_t, PAVCalibrator(window=CountWindow(300)))
    got = pq.read_table(out)
    assert got.num_rows == n
    assert got["proba_pav"].to_numpy().tobytes() == proba.tobytes()
    assert got["llr_pav"].to_numpy().tobytes() == llr.tobytes()


def test_without_such_labels_the_summary_does_not_mention_them(tmp_path):
    t, s, y, label_t, never = stream(500, 4)
    table = pa.table({"event_time": t, "score": s, "label": y, "label_time": np.where(never, t + 1.0, label_t)})
    summary = replay(table, "pav")
    assert summary.n_never == 0
    assert "never arrive" not in summary.to_text()
