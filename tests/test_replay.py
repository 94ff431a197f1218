"""Replay: record-batch replay with late labels, against slow event-by-event references."""

from __future__ import annotations

import collections
import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_replay, naive_replay_ops

from streamcal.buckets import LogitGrid
from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.replay import (
    RawScoreCalibrator,
    ReplayInputError,
    UnavailableMethodError,
    available_methods,
    generate,
    replay,
)
from streamcal.replay._engine import InFlight, plan_batch, plan_flush
from streamcal.windows import CountWindow, Decay, TimeWindow

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- slow references (read first)


class NaiveBucketCalibrator:
    """A stand-in streaming calibrator written as plain Python loops: per-bucket frequency.

    Ten equal-width buckets over [0, 1]; p = (pos_b + 1) / (n_b + 2) over the events in the
    window; LLR = logit(p) - logit((P + 1) / (N + 2)). ``window`` keeps the last ``window`` learned
    events. It follows the calibrator contract: ``process`` runs learn / predict operations in
    order.
    """

    def __init__(self, window: int | None = None, buckets: int = 10):
        self.window = window
        self.buckets = buckets
        self.pos = [0.0] * buckets
        self.tot = [0.0] * buckets
        self.events = collections.deque()

    def _bucket(self, s: float) -> int:
        return min(int(s * self.buckets), self.buckets - 1)

    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        b = self._bucket(x["score"])
        y = float(y)
        self.pos[b] += w * y
        self.tot[b] += w
        self.events.append((b, y, w))
        if self.window is not None and len(self.events) > self.window:
            ob, oy, ow = self.events.popleft()
            self.pos[ob] -= ow * oy
            self.tot[ob] -= ow

    def predict_proba_one(self, x: dict) -> dict:
        b = self._bucket(x["score"])
        p = (self.pos[b] + 1.0) / (self.tot[b] + 2.0)
        return {False: 1.0 - p, True: p}

    def predict_llr_one(self, x: dict) -> float:
        p = self.predict_proba_one(x)[True]
        prior = (sum(self.pos) + 1.0) / (sum(self.tot) + 2.0)
        return math.log(p / (1 - p)) - math.log(prior / (1 - prior))

    def process(self, scores, labels, learn_mask, *, weights=None, times=None):
        n = len(scores)
        proba = np.full(n, np.nan)
        llr = np.full(n, np.nan)
        for i in range(n):
            x = {"score": float(scores[i])}
            if learn_mask[i]:
                self.learn_one(x, labels[i], 1.0 if weights is None else float(weights[i]))
            else:
                proba[i], llr[i] = self.predict_proba_one(x)[True], self.predict_llr_one(x)
        return proba, llr

    def prequential(self, scores, labels, *, weights=None, times=None):
        n = len(scores)
        proba = np.empty(n)
        llr = np.empty(n)
        for i in range(n):
            x = {"score": float(scores[i])}
            proba[i], llr[i] = self.predict_proba_one(x)[True], self.predict_llr_one(x)
            self.learn_one(x, labels[i], 1.0 if weights is None else float(weights[i]))
        return proba, llr


def brier(y, p, llr):
    return float(np.mean((p - y) ** 2))


def log_loss(y, p, llr):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


METRICS = {"brier": brier, "log_loss": log_loss}


# ---------------------------------------------------------------- fixtures and helpers


def make_events(rng, n, *, ties=True, max_delay=30.0):
    gaps = rng.choice([0.0, 1.0, 2.5], size=n) if ties else rng.exponential(1.0, n) + 1e-3
    t = np.cumsum(gaps)
    s = rng.random(n)
    y = (rng.random(n) < s).astype(np.float64)
    delay = np.where(rng.random(n) < 0.3, 0.0, rng.choice([0.0, 1.0, 2.5, max_delay], size=n))
    return t, s, y, t + delay


def write_parquet(path, t, s, y, label_t=None, **extra):
    cols = {"event_time": t, "score": s, "label": y.astype(bool)}
    if label_t is not None:
        cols["label_time"] = label_t
    cols.update(extra)
    pq.write_table(pa.table(cols), path, row_group_size=97)
    return path


def run(path, cal=None, **kw):
    kw.setdefault("metrics", METRICS)
    kw.setdefault("metrics_window", 250)
    cals = {"naive": cal if cal is not None else NaiveBucketCalibrator(window=50)}
    return replay(path, cals, **kw)


def outputs(path, name="naive"):
    table = pq.read_table(path)
    return table[f"proba_{name}"].to_numpy(), table[f"llr_{name}"].to_numpy()


@pytest.fixture(scope="module")
def events():
    return make_events(np.random.default_rng(7), 1_000)


@pytest.fixture(scope="module")
def clicks(click_stream):
    return click_stream(3_000, seed=5, batch_size=700)


# ---------------------------------------------------------------- the replay clock


@given(
    flight=st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, np.inf]), max_size=30),
    batch=st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, 7.0, np.inf]), max_size=30),
)
def test_merged_order_is_the_stable_sort_of_flight_then_batch(flight, batch):
    from streamcal.replay._engine import _merged_order, _merged_order_kernels

    flight_t = np.sort(np.asarray(flight, dtype=np.float64))
    label_t = np.asarray(batch, dtype=np.float64)
    want = np.argsort(np.concatenate((flight_t, label_t)), kind="stable")
    np.testing.assert_array_equal(_merged_order(flight_t, label_t), want)
    np.testing.assert_array_equal(_merged_order_kernels(flight_t, label_t), want)


def test_merged_order_kernels_on_late_labels_of_two_delays():
    """Labels after one fixed delay (rising) mixed with sooner, shuffled ones (the rest), with
    ties across the labels in flight, the rising run and the rest: numpy's stable sort."""
    from streamcal.replay._engine import _merged_order_kernels

    rng = np.random.default_rng(3)
    t = np.sort(rng.integers(0, 400, 5_000)).astype(np.float64)
    soon = rng.random(t.size) < 0.1
    label_t = np.where(soon, t + rng.integers(0, 30, t.size), t + 60.0)
    flight_t = np.sort(rng.integers(0, 500, 3_000)).astype(np.float64)
    want = np.argsort(np.concatenate((flight_t, label_t)), kind="stable")
    np.testing.assert_array_equal(_merged_order_kernels(flight_t, label_t), want)


@given(
    data=st.data(),
    n=st.integers(1, 60),
)
def test_plan_batches_give_the_naive_operation_order(data, n):
    seed = data.draw(st.integers(0, 2**32 - 1))
    t, _, _, label_t = make_events(np.random.default_rng(seed), n)
    cuts = sorted(data.draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=5)))
    bounds = [0, *[c for c in cuts if 0 < c < n], n]
    weighted = data.draw(st.booleans())
    flight = InFlight.empty(weighted)
    got = []
    ids = np.arange(n, dtype=np.float64)  # carry the event index as the "score" (and in the weight)
    for a, b in itertools.pairwise(bounds):
        if a == b:
            continue
        w = 2.0 * ids[a:b] + 1.0 if weighted else None
        ops, flight = plan_batch(flight, t[a:b], ids[a:b], ids[a:b], label_t[a:b], w, a)
        # learn-op times are label times and never go backwards, nor do operation times overall
        assert np.all(np.diff(ops.t) >= 0)
        assert np.array_equal(ops.s[ops.pred_pos], ids[a:b])
        assert np.array_equal(ops.y, ops.s)
        assert np.array_equal(ops.learn_index, ops.s[ops.learn])
        assert np.array_equal(ops.t[ops.learn], label_t[ops.learn_index])
        if weighted:
            assert np.array_equal(ops.w, 2.0 * ops.s + 1.0)
            assert np.array_equal(flight.w, 2.0 * flight.s + 1.0)
        else:
            assert ops.w is None
            assert flight.w is None
        assert np.array_equal(flight.index, flight.s)
        assert np.array_equal(flight.label_t, label_t[flight.index])
        got += [("learn" if ln else "predict", int(i)) for ln, i in zip(ops.learn, ops.s, strict=True)]
    ops, flight = plan_flush(flight, t[-1])
    got += [("learn", int(i)) for i in ops.s]
    assert got == naive_replay_ops(t, label_t)
    assert np.all(flight.label_t > t[-1])


# ---------------------------------------------------------------- equivalences


def test_replay_without_late_labels_equals_prequential(tmp_path, events):
    t, s, y, _ = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y)  # no label_time column: labels at once
    summary = run(path, output=tmp_path / "out.parquet", batch_size=128)
    assert summary.label_mode == "immediate"
    want = NaiveBucketCalibrator(window=50).prequential(s, y)
    got = outputs(tmp_path / "out.parquet")
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert summary.n_learned == len(t)


def test_replay_equals_prequential_for_the_raw_method(tmp_path, events):
    t, s, y, _ = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y)
    replay(path, "raw", metrics=METRICS, output=tmp_path / "out.parquet", batch_size=100)
    want = RawScoreCalibrator().prequential(s, y)
    got = outputs(tmp_path / "out.parquet", "raw")
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=0)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("batch_size", [1, 37, 100_000])
def test_replay_with_late_labels_equals_event_by_event_simulation(tmp_path, events, batch_size):
    t, s, y, label_t = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y, label_t)
    summary = run(path, output=tmp_path / "out.parquet", batch_size=batch_size)
    assert summary.label_mode == "column"
    want = naive_replay(t, s, y, label_t, NaiveBucketCalibrator(window=50))
    got = outputs(tmp_path / "out.parquet")
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert summary.n_learned + summary.n_in_flight == len(t)
    assert summary.n_in_flight == int(np.sum(label_t > t[-1]))


@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 120),
    batch_size=st.integers(1, 50),
    never=st.floats(0.0, 0.3),
)
def test_replay_equals_simulation_on_random_streams(seed, n, batch_size, never):
    import tempfile

    rng = np.random.default_rng(seed)
    t, s, y, label_t = make_events(rng, n)
    label_t = np.where(rng.random(n) < never, np.inf, label_t)  # some labels never arrive
    with tempfile.TemporaryDirectory() as tmp:
        lt = pa.array(np.where(np.isinf(label_t), 0.0, label_t), mask=np.isinf(label_t))
        pq.write_table(pa.table({"event_time": t, "score": s, "label": y, "label_time": lt}), f"{tmp}/in.parquet")
        cal = NaiveBucketCalibrator(window=7)
        summary = replay(
            f"{tmp}/in.parquet",
            {"naive": cal},
            output=f"{tmp}/out.parquet",
            metrics=METRICS,
            metrics_window=17,
            batch_size=batch_size,
        )
        got = outputs(f"{tmp}/out.parquet")
    want = naive_replay(t, s, y, label_t, NaiveBucketCalibrator(window=7))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert summary.n_in_flight == int(np.sum(np.isfinite(label_t) & (label_t > t[-1])))
    assert summary.n_never == int(np.sum(np.isinf(label_t)))


def test_label_delay_option_equals_label_time_column(tmp_path, events):
    t, s, y, _ = events
    write_parquet(tmp_path / "a.parquet", t, s, y, t + 2.5)
    write_parquet(tmp_path / "b.parquet", t, s, y)
    run(tmp_path / "a.parquet", output=tmp_path / "a_out.parquet")
    summary = run(tmp_path / "b.parquet", output=tmp_path / "b_out.parquet", label_delay="2.5s")
    assert summary.label_mode == "delay"
    for a, b in zip(outputs(tmp_path / "a_out.parquet"), outputs(tmp_path / "b_out.parquet"), strict=True):
        np.testing.assert_array_equal(a, b)


def test_weights_are_passed_to_the_calibrator(tmp_path, events):
    t, s, y, label_t = events
    w = np.random.default_rng(1).choice([0.0, 0.5, 2.0], size=len(t))
    path = write_parquet(tmp_path / "in.parquet", t, s, y, label_t, w=w)
    run(path, output=tmp_path / "out.parquet", weight_col="w", batch_size=64)
    want = naive_replay(t, s, y, label_t, NaiveBucketCalibrator(window=50), w=w)
    np.testing.assert_array_equal(outputs(tmp_path / "out.parquet")[0], want[0])


def test_several_methods_side_by_side(tmp_path, events):
    t, s, y, label_t = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y, label_t)
    cals = {
        "short": NaiveBucketCalibrator(window=20),
        "long": NaiveBucketCalibrator(),
        "raw": RawScoreCalibrator(),
    }
    summary = replay(path, cals, metrics=METRICS, output=tmp_path / "out.parquet", batch_size=90)
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column_names == [
        "event_time",
        "score",
        "label",
        "label_time",
        "proba_short",
        "llr_short",
        "proba_long",
        "llr_long",
        "proba_raw",
        "llr_raw",
    ]
    for name, window in (("short", 20), ("long", None)):
        want = naive_replay(t, s, y, label_t, NaiveBucketCalibrator(window=window))
        np.testing.assert_array_equal(table[f"proba_{name}"].to_numpy(), want[0])
    assert summary.methods == ["short", "long", "raw"]
    assert set(summary.metrics) == {"short", "long", "raw"}


def test_metrics_over_time_are_per_window_of_events(tmp_path, events):
    t, s, y, label_t = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y, label_t)
    summary = run(
        path,
        output=tmp_path / "out.parquet",
        metrics_output=tmp_path / "m.parquet",
        metrics_window=300,
        batch_size=128,
    )
    table = pq.read_table(tmp_path / "m.parquet")
    assert table.equals(summary.metrics_table)
    assert table["first_event"].to_pylist() == [0, 300, 600, 900]
    assert table["n_events"].to_pylist() == [300, 300, 300, 100]
    p = outputs(tmp_path / "out.parquet")[0]
    for row in table.to_pylist():
        sl = slice(row["first_event"], row["last_event"] + 1)
        assert row["brier"] == pytest.approx(brier(y[sl], p[sl], None), rel=1e-12)
        assert row["n_positive"] == int(y[sl].sum())
    overall = np.average(table["log_loss"].to_numpy(), weights=table["n_events"].to_numpy())
    assert summary.metrics["naive"]["log_loss"] == pytest.approx(overall)


# ---------------------------------------------------------------- the real calibrators

CALIBRATORS = {
    "count": lambda: PAVCalibrator(buckets=LogitGrid(n_buckets=64), window=CountWindow(300)),
    "time": lambda: PAVCalibrator(buckets=LogitGrid(n_buckets=64), window=TimeWindow(6 * 3600.0)),
    "decay": lambda: PAVCalibrator(window=Decay(200.0)),
    "step": lambda: PAVCalibrator(interpolation="step"),
}
# every other calibrator on main, side by side with PAV (same contract)
if "ispline" in available_methods():
    from streamcal.spline import ISplineCalibrator

    CALIBRATORS["ispline_lazy"] = lambda: ISplineCalibrator(
        buckets=LogitGrid(n_buckets=64), window=CountWindow(500), n_knots=2
    )
    CALIBRATORS["ispline_every"] = lambda: ISplineCalibrator(
        buckets=LogitGrid(n_buckets=64), window=TimeWindow(6 * 3600.0), n_knots=3, refit_every=50
    )
if "gev" in available_methods():
    from streamcal.gev.calibrator import GEVCalibrator, PlattCalibrator

    CALIBRATORS["gev"] = lambda: GEVCalibrator(buckets=LogitGrid(n_buckets=64), window=CountWindow(500), xi=0.25)
    CALIBRATORS["gev_auto"] = lambda: GEVCalibrator(
        buckets=LogitGrid(n_buckets=64), window=Decay(300.0), refit_every=25
    )
    CALIBRATORS["platt"] = lambda: PlattCalibrator(buckets=LogitGrid(n_buckets=64), window=TimeWindow(6 * 3600.0))


def stream_arrays(path):
    table = pq.read_table(path)
    seconds = [table[c].cast(pa.int64()).to_numpy() / 1000.0 for c in ("event_time", "label_time")]
    return (
        seconds[0],
        table["score"].to_numpy(),
        table["label"].to_numpy(zero_copy_only=False).astype(float),
        seconds[1],
    )


@pytest.mark.slow
def test_replay_equals_each_calibrators_prequential(tmp_path, clicks):
    t, s, y, _ = stream_arrays(clicks)
    cals = {name: make() for name, make in CALIBRATORS.items()}
    cals["raw"] = RawScoreCalibrator()
    summary = replay(
        clicks, cals, label_time_col=None, output=tmp_path / "out.parquet", metrics_window=1_000, batch_size=333
    )
    assert summary.label_mode == "immediate"
    out = pq.read_table(tmp_path / "out.parquet")
    for name, make in [*CALIBRATORS.items(), ("raw", RawScoreCalibrator)]:
        proba, llr = make().prequential(s, y, times=t)
        np.testing.assert_array_equal(out[f"proba_{name}"].to_numpy(), proba, err_msg=name)
        np.testing.assert_array_equal(out[f"llr_{name}"].to_numpy(), llr, err_msg=name)
    # the final states agree too: same predictions afterwards
    grid = np.linspace(0.001, 0.999, 50)
    for name, make in CALIBRATORS.items():
        ref = make()
        ref.prequential(s, y, times=t)
        np.testing.assert_array_equal(cals[name].predict_proba(grid), ref.predict_proba(grid))


def test_zero_label_delay_plans_the_prequential_sequence(tmp_path, clicks):
    # label_delay=0 goes through the merged operation sequence, not the prequential shortcut
    t, s, y, _ = stream_arrays(clicks)
    cals = {name: make() for name, make in CALIBRATORS.items()}
    summary = replay(clicks, cals, label_delay=0, output=tmp_path / "out.parquet", metrics_window=1_000, batch_size=500)
    assert summary.label_mode == "delay"
    out = pq.read_table(tmp_path / "out.parquet")
    for name, make in CALIBRATORS.items():
        proba, llr = make().prequential(s, y, times=t)
        np.testing.assert_array_equal(out[f"proba_{name}"].to_numpy(), proba, err_msg=name)
        np.testing.assert_array_equal(out[f"llr_{name}"].to_numpy(), llr, err_msg=name)


def test_replay_with_late_labels_equals_event_by_event_calibrators(tmp_path, clicks):
    t, s, y, label_t = stream_arrays(clicks)
    assert np.mean(label_t > t) > 0.9  # most labels are late
    cals = {name: make() for name, make in CALIBRATORS.items()}
    replay(clicks, cals, output=tmp_path / "out.parquet", metrics_window=1_000, batch_size=256)
    out = pq.read_table(tmp_path / "out.parquet")
    for name, make in CALIBRATORS.items():
        proba, llr = naive_replay(t, s, y, label_t, make())
        np.testing.assert_array_equal(out[f"proba_{name}"].to_numpy(), proba, err_msg=name)
        np.testing.assert_array_equal(out[f"llr_{name}"].to_numpy(), llr, err_msg=name)


def test_threads_do_not_change_results(tmp_path, clicks):
    tables = []
    for threads in (1, 2):
        cals = {name: make() for name, make in CALIBRATORS.items()}
        out = tmp_path / f"out{threads}.parquet"
        replay(clicks, cals, output=out, metrics_window=1_000, batch_size=400, threads=threads)
        tables.append(pq.read_table(out))
    assert tables[0].equals(tables[1])
    cal = CALIBRATORS["count"]()
    with pytest.raises(ValueError, match="same calibrator object twice"):
        replay(clicks, {"a": cal, "b": cal})


def test_methods_by_name_with_buckets_and_windows(tmp_path, clicks):
    t, s, y, label_t = stream_arrays(clicks)
    cases = [
        ({"buckets": 64, "window": 300}, CALIBRATORS["count"]),
        ({"buckets": "logit:64", "window": "6h"}, CALIBRATORS["time"]),
        ({"decay": 200}, CALIBRATORS["decay"]),
    ]
    for kw, make in cases:
        out = tmp_path / "out.parquet"
        replay(clicks, "pav", output=out, metrics_window=1_000, **kw)
        want = naive_replay(t, s, y, label_t, make())
        np.testing.assert_array_equal(outputs(out, "pav")[0], want[0], err_msg=str(kw))


def test_method_options_go_to_the_methods_that_take_them(clicks):
    names = [m for m in ("pav", "ispline", "gev") if m in available_methods()]
    summary = replay(clicks, names, buckets=64, window=500, method_options={"refit_every": 50}, metrics=METRICS)
    for name in names[1:]:
        assert summary.calibrators[name].refit_every == 50
    assert not hasattr(summary.calibrators["pav"], "refit_every")


def test_real_metrics_table(tmp_path, clicks):
    summary = replay(clicks, {"pav": CALIBRATORS["count"](), "raw": RawScoreCalibrator()}, metrics_window=1_000)
    table = summary.metrics_table
    assert table.column_names == [
        "window",
        "first_event",
        "last_event",
        "start_time",
        "end_time",
        "n_events",
        "n_positive",
        "method",
        "brier",
        "log_loss",
        "cllr",
        "min_cllr",
        "ece",
        "calibration_loss",
    ]
    assert table.num_rows == 6
    rows = table.to_pylist()
    for row in rows:
        if row["n_positive"]:
            assert row["min_cllr"] <= row["cllr"] + 1e-12
    # the over-confident raw scores are worse calibrated than PAV once PAV has learned
    assert summary.metrics["pav"]["ece"] < summary.metrics["raw"]["ece"]
    assert "pav" in summary.to_text()


def test_memory_does_not_grow_with_the_stream(tmp_path):
    import tracemalloc

    def run(path):
        out = tmp_path / "out.parquet"
        replay(path, {"pav": CALIBRATORS["count"]()}, output=out, metrics=METRICS, metrics_window=10_000, batch_size=20_000)

    # both traced streams span many batches, so the read-ahead, calibration and writing stages are
    # full in both (a stream of two batches never fills the pipeline: its peak would be lower)
    sizes = (160_000, 640_000)
    paths = {n: generate(tmp_path / f"c{n}.parquet", "click", n=n, seed=1, batch_size=20_000) for n in (1_000, *sizes)}
    run(paths[1_000])  # compiles or loads the kernels, untraced: numba's allocations are not the stream's
    peaks = []
    for n in sizes:
        tracemalloc.start()
        try:
            run(paths[n])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert peaks[1] < 1.5 * peaks[0]  # numpy's traced peak: set by batches and windows, not by n


# ---------------------------------------------------------------- formats, directories, columns


def test_directory_of_parquet_parts_equals_one_file(tmp_path, clicks):
    generate(tmp_path / "parts", "click", n=3_000, seed=5, parts=4, batch_size=500)
    assert len(list((tmp_path / "parts").glob("part-*.parquet"))) == 4
    one = run(clicks, output=tmp_path / "one.parquet", batch_size=256)
    many = run(tmp_path / "parts", output=tmp_path / "many.parquet", batch_size=256)
    assert len(many.files) == 4
    parts = sorted((tmp_path / "parts").glob("part-*.parquet"))
    listed = run(parts, output=tmp_path / "listed.parquet", batch_size=256)
    assert pq.read_table(tmp_path / "listed.parquet").equals(pq.read_table(tmp_path / "many.parquet"))
    assert listed.n_events == 3_000
    assert pq.read_table(tmp_path / "one.parquet").equals(pq.read_table(tmp_path / "many.parquet"))
    assert one.metrics == many.metrics


@pytest.mark.parametrize("fmt", ["ipc", "csv"])
def test_arrow_ipc_and_csv_give_the_parquet_result(tmp_path, clicks, fmt):
    ext = {"ipc": "arrow", "csv": "csv"}[fmt]
    other = generate(tmp_path / f"clicks.{ext}", "click", n=3_000, seed=5, batch_size=700)
    a = run(clicks, output=tmp_path / "a.parquet")
    b = run(other, output=tmp_path / "b.parquet")
    ta, tb = pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "b.parquet")
    for col in ("proba_naive", "llr_naive", "score"):
        np.testing.assert_array_equal(ta[col].to_numpy(), tb[col].to_numpy())
    assert a.n_learned == b.n_learned


def test_format_option_for_unusual_file_names(tmp_path, clicks):
    other = generate(tmp_path / "clicks.data", "click", n=3_000, seed=5, format="csv")
    a = run(clicks, output=tmp_path / "a.parquet")
    b = run(other, output=tmp_path / "b.parquet", format="csv")
    np.testing.assert_array_equal(outputs(tmp_path / "a.parquet")[0], outputs(tmp_path / "b.parquet")[0])
    assert a.n_events == b.n_events == 3_000


def test_column_renaming_and_selection(tmp_path, events):
    t, s, y, label_t = events
    table = pa.table(
        {
            "ts": t,
            "model_score": s,
            "clicked": y.astype(np.int8),
            "known_at": label_t,
            "user": np.arange(len(t)),
            "noise": np.zeros(len(t)),
            "country": [f"c{i % 7}" for i in range(len(t))],
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    run(
        tmp_path / "in.parquet",
        output=tmp_path / "out.parquet",
        time_col="ts",
        score_col="model_score",
        label_col="clicked",
        label_time_col="known_at",
        keep_columns=["user", "model_score", "country"],
    )
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.column_names == ["user", "model_score", "country", "proba_naive", "llr_naive"]
    assert out["country"].to_pylist()[:8] == ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c0"]
    want = naive_replay(t, s, y, label_t, NaiveBucketCalibrator(window=50))
    np.testing.assert_array_equal(out["proba_naive"].to_numpy(), want[0])


def test_file_order_without_a_time_column(tmp_path, events):
    _, s, y, _ = events
    pq.write_table(pa.table({"score": s, "label": y}), tmp_path / "in.parquet")
    run(tmp_path / "in.parquet", output=tmp_path / "out.parquet", time_col=None)
    want = NaiveBucketCalibrator(window=50).prequential(s, y)
    np.testing.assert_array_equal(outputs(tmp_path / "out.parquet")[0], want[0])


def test_timestamps_and_null_label_times(tmp_path):
    ts = pa.timestamp("ms", tz="UTC")
    t_ms = np.array([0, 1000, 2000, 3000, 4000], dtype=np.int64)
    table = pa.table(
        {
            "event_time": pa.array(t_ms, ts),
            "score": [0.1, 0.9, 0.1, 0.9, 0.5],
            "label": [False, True, False, True, True],
            "label_time": pa.array([0, None, 2500, 3000, 4000], ts),  # event 1's label never comes
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    summary = run(
        tmp_path / "in.parquet",
        output=tmp_path / "out.parquet",
        metrics_output=tmp_path / "m.parquet",
    )
    want = naive_replay(
        t_ms / 1000.0,
        table["score"].to_numpy(),
        np.array([0, 1, 0, 1, 1.0]),
        np.array([0, np.inf, 2.5, 3.0, 4.0]),
        NaiveBucketCalibrator(window=50),
    )
    np.testing.assert_array_equal(outputs(tmp_path / "out.parquet")[0], want[0])
    assert (summary.n_learned, summary.n_in_flight, summary.n_never) == (4, 0, 1)
    m = pq.read_table(tmp_path / "m.parquet")
    assert m.schema.field("start_time").type == ts


def test_empty_files(tmp_path, events):
    t, s, y, label_t = events
    empty = pa.table(
        {
            "event_time": pa.array([], pa.float64()),
            "score": pa.array([], pa.float64()),
            "label": pa.array([], pa.bool_()),
            "label_time": pa.array([], pa.float64()),
        }
    )
    # a valid file without rows: no events to replay is an error, and no output is written
    pq.write_table(empty, tmp_path / "empty.parquet")
    check_error(tmp_path, tmp_path / "empty.parquet", r"no events: file '.*empty\.parquet' has the columns but no rows")
    # empty parts (no rows, header-only CSV) in a directory are fine next to parts with rows
    d = tmp_path / "dir"
    d.mkdir()
    pq.write_table(empty, d / "a.parquet")
    write_parquet(d / "b.parquet", t, s, y, label_t)
    pq.write_table(empty, d / "d.parquet")
    summary = run(d, output=tmp_path / "dir_out.parquet")
    assert summary.n_events == len(t)
    # a zero-byte file is a failed write, never an empty table: an error naming it, in a
    # directory too
    (d / "c.parquet").write_bytes(b"")
    check_error(tmp_path, d, r"file '.*c\.parquet' is empty \(0 bytes\): not a Parquet file")
    with pacsv.CSVWriter(str(tmp_path / "h.csv"), pa.schema([("score", pa.float64()), ("label", pa.int64())])):
        pass
    check_error(tmp_path, tmp_path / "h.csv", "no events", time_col=None)


# ---------------------------------------------------------------- bad input


def check_error(tmp_path, path, match, **kw):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    with pytest.raises(ReplayInputError, match=match):
        run(path, output=out / "x.replay.parquet", metrics_output=out / "x.metrics.parquet", **kw)
    assert list(out.iterdir()) == []  # nothing left, not even a temporary file


def test_missing_column(tmp_path, events):
    t, _, y, _ = events
    pq.write_table(pa.table({"event_time": t, "label": y}), tmp_path / "in.parquet")
    check_error(tmp_path, tmp_path / "in.parquet", r"in\.parquet', column 'score'.*missing")


def test_wrong_types(tmp_path, events):
    t, s, y, _ = events
    pq.write_table(pa.table({"event_time": t, "score": s.astype(str), "label": y}), tmp_path / "a.parquet")
    check_error(tmp_path, tmp_path / "a.parquet", r"a\.parquet', column 'score'.*got type string")
    pq.write_table(pa.table({"event_time": t.astype(str), "score": s, "label": y}), tmp_path / "b.parquet")
    check_error(tmp_path, tmp_path / "b.parquet", r"column 'event_time'.*got type string")
    ts = pa.array((t * 1000).astype(np.int64), pa.timestamp("ms"))
    pq.write_table(
        pa.table({"event_time": ts, "score": s, "label": y, "label_time": t}),
        tmp_path / "c.parquet",
    )
    check_error(tmp_path, tmp_path / "c.parquet", r"column 'label_time'.*both must be timestamps")


def test_a_csv_cell_that_is_not_a_number_is_named_with_its_row(tmp_path):
    """A CSV column whose types are inferred as strings: the message gives the first cell that is
    not a number (for labels, nor true / false) and its row."""
    (tmp_path / "s.csv").write_text("event_time,score,label\n1,0.1,0\n2,0.2,1\n3,abc,0\n4,0.4,1\n")
    check_error(tmp_path, tmp_path / "s.csv", r"'score'.*type string\. Its row 2 holds 'abc', which is not a number")
    (tmp_path / "l.csv").write_text("event_time,score,label\n1,0.1,true\n2,0.2,FALSE\n3,0.3,yes\n")
    check_error(tmp_path, tmp_path / "l.csv", r"'label'.*Its row 2 holds 'yes', which is neither a number nor true")


def test_nan_score_names_file_column_and_row(tmp_path, events):
    t, s, y, label_t = events
    s = s.copy()
    s[777] = np.nan
    write_parquet(tmp_path / "in.parquet", t, s, y, label_t)
    check_error(
        tmp_path,
        tmp_path / "in.parquet",
        r"in\.parquet', column 'score', row 777: .*finite; got nan",
        batch_size=100,
    )


def test_null_score(tmp_path):
    table = pa.table({"event_time": [1.0, 2.0], "score": [0.5, None], "label": [0, 1]})
    pq.write_table(table, tmp_path / "in.parquet")
    check_error(tmp_path, tmp_path / "in.parquet", r"column 'score', row 1: the score is null")


def test_labels_not_binary(tmp_path, events):
    t, s, y, _ = events
    y = y.astype(np.int64)
    y[500] = 2
    pq.write_table(pa.table({"event_time": t, "score": s, "label": y}), tmp_path / "in.parquet")
    check_error(tmp_path, tmp_path / "in.parquet", r"column 'label', row 500: .*binary.*got 2")


def test_label_time_before_event_time(tmp_path, events):
    t, s, y, label_t = events
    label_t = label_t.copy()
    label_t[3] = t[3] - 1.0
    write_parquet(tmp_path / "in.parquet", t, s, y, label_t)
    check_error(tmp_path, tmp_path / "in.parquet", r"column 'label_time', row 3: .*before the event time")


def test_times_going_backwards_are_rejected_or_sorted(tmp_path, events):
    t, s, y, label_t = events
    rng = np.random.default_rng(3)
    order = rng.permutation(len(t))
    shuffled = tmp_path / "shuffled.parquet"
    write_parquet(shuffled, t[order], s[order], y[order], label_t[order])
    first_back = int(np.flatnonzero(np.diff(t[order]) < 0)[0]) + 1
    check_error(
        tmp_path,
        shuffled,
        rf"shuffled\.parquet', column 'event_time', row {first_back}: "
        r"event times go backwards.*on_unsorted='sort'",
        batch_size=50,
    )
    # the same across a batch boundary and across files
    d = tmp_path / "dir"
    d.mkdir()
    write_parquet(d / "a.parquet", t[500:], s[500:], y[500:], label_t[500:])
    write_parquet(d / "b.parquet", t[:500], s[:500], y[:500], label_t[:500])
    check_error(tmp_path, d, r"b\.parquet', column 'event_time', row 0: event times go backwards")
    # sorting: stable by event time, then exactly the sorted replay
    run(shuffled, output=tmp_path / "sorted_out.parquet", on_unsorted="sort", batch_size=64)
    stable = np.argsort(t[order], kind="stable")
    o = order[stable]
    want = naive_replay(t[o], s[o], y[o], label_t[o], NaiveBucketCalibrator(window=50))
    out = pq.read_table(tmp_path / "sorted_out.parquet")
    np.testing.assert_array_equal(out["score"].to_numpy(), s[o])
    np.testing.assert_array_equal(out["proba_naive"].to_numpy(), want[0])


def test_corrupt_file(tmp_path, clicks):
    data = Path(clicks).read_bytes()
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(data[: len(data) // 2])
    check_error(tmp_path, bad, r"file '.*bad\.parquet'.*cannot be read")
    # a corrupt part after good ones: the error names it, and no output is left behind
    d = tmp_path / "dir"
    d.mkdir()
    (d / "a.parquet").write_bytes(data)
    garbled = bytearray(data)
    garbled[len(data) // 3 : len(data) // 3 + 4000] = os.urandom(4000)
    (d / "b.parquet").write_bytes(bytes(garbled))
    check_error(tmp_path, d, r"b\.parquet'.*(cannot read|finite|binary|backwards|null)")
    csv = tmp_path / "bad.csv"
    csv.write_text("event_time,score,label\n1,0.5,1\n2,0.25\n")
    check_error(tmp_path, csv, r"bad\.csv'")


def test_a_calibrator_rejecting_scores_names_the_method_file_and_rows(tmp_path, events):
    t, s, y, label_t = events
    s = s * 4.0  # not probabilities: the default logit-grid buckets refuse them
    write_parquet(tmp_path / "in.parquet", t, s, y, label_t)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(
        ReplayInputError,
        match=r"method 'pav' rejected the events of file '.*in\.parquet', rows 0-96: "
        r"`scores` must hold probabilities",
    ):
        replay(tmp_path / "in.parquet", "pav", output=out / "o.parquet", metrics=METRICS, batch_size=100)
    assert list(out.iterdir()) == []
    # one bad score: the message points at its row, with labels late (planned operations) or at once
    s = events[1].copy()
    s[150] = 3.0
    write_parquet(tmp_path / "late.parquet", t, s, y, label_t)
    write_parquet(tmp_path / "now.parquet", t, s, y)
    for name, kind in (("late", "predicting event 150 of the stream, "), ("now", "")):
        with pytest.raises(
            ReplayInputError,
            match=rf"rows 97-193: .*got 3.0 at position \d+.*\(position \d+ is "
            rf"{kind}row 150 of that file\)",
        ):
            replay(tmp_path / f"{name}.parquet", "pav", metrics=METRICS)


def test_input_that_does_not_exist_or_has_no_format(tmp_path):
    with pytest.raises(ReplayInputError, match="does not exist"):
        run(tmp_path / "nope.parquet")
    (tmp_path / "x.dat").write_text("1,2\n")
    with pytest.raises(ReplayInputError, match="cannot tell the format"):
        run(tmp_path / "x.dat")


def test_output_column_clash(tmp_path, events):
    t, s, y, _ = events
    write_parquet(tmp_path / "in.parquet", t, s, y, proba_naive=s)
    check_error(tmp_path, tmp_path / "in.parquet", "clashes")


def test_unknown_and_unavailable_methods(tmp_path, events):
    t, s, y, _ = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y)
    with pytest.raises(UnavailableMethodError, match=r"unknown method 'nope'; available methods: .*raw"):
        replay(path, "raw,nope", metrics=METRICS)
    assert "raw" in available_methods()
    for name in ("pav", "gev", "platt", "ispline"):
        if name not in available_methods():
            with pytest.raises(UnavailableMethodError, match=rf"method '{name}' is not available"):
                replay(path, name, metrics=METRICS)


def test_register_method(tmp_path, events, monkeypatch):
    from streamcal.replay import methods, register_method

    monkeypatch.setattr(methods, "_REGISTERED", {})
    t, s, y, label_t = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y, label_t)
    register_method("naive", lambda window=None, **_: NaiveBucketCalibrator(window=getattr(window, "n", None)))
    assert "naive" in available_methods()
    replay(path, "naive", window=50, output=tmp_path / "out.parquet", metrics=METRICS)
    want = naive_replay(t, s, y, label_t, NaiveBucketCalibrator(window=50))
    np.testing.assert_array_equal(outputs(tmp_path / "out.parquet")[0], want[0])
    with pytest.raises(ValueError, match="must be an identifier"):
        register_method("no good", NaiveBucketCalibrator)


def test_bad_options(tmp_path, events):
    t, s, y, _ = events
    path = write_parquet(tmp_path / "in.parquet", t, s, y)
    with pytest.raises(ValueError, match="on_unsorted"):
        run(path, on_unsorted="maybe")
    with pytest.raises(ValueError, match="label_delay"):
        run(path, label_delay="soon")
    with pytest.raises(ValueError, match="metrics_window"):
        run(path, metrics_window=0)
    with pytest.raises(ValueError, match="`output` would overwrite the input file"):
        run(path, output=path)
    with pytest.raises(ValueError, match="either `window` or `decay`"):
        replay(path, "raw", window=10, decay=5, metrics=METRICS)


def test_progress_line(tmp_path, events, capsys):
    from streamcal.replay._progress import Progress

    bar = Progress(1_000, delay=0.0, every=0.0, every_plain=0.0)
    bar.update(250)
    bar.close()
    err = capsys.readouterr().err
    assert "250 / 1,000 rows (25%)" in err
    assert "rows/s" in err
    assert "ETA" in err


# ---------------------------------------------------------------- command line


def cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "streamcal.replay", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow
def test_cli_end_to_end_with_plot(tmp_path):
    pytest.importorskip("matplotlib")
    gen = cli(
        "generate",
        "clicks.parquet",
        "--scenario",
        "drift",
        "-n",
        "4000",
        "--seed",
        "2",
        cwd=tmp_path,
    )
    assert gen.returncode == 0, gen.stderr
    assert "wrote 4,000 drift events" in gen.stdout
    method = "pav"
    res = cli(
        "replay",
        "clicks.parquet",
        "--method",
        "pav,raw",
        "--window",
        "2000",
        "--buckets",
        "256",
        "--refit-every",
        "100",
        "--metrics-window",
        "1000",
        "--plot",
        "plot.png",
        "--quiet",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "log loss" in res.stdout
    assert "4,000 events" in res.stdout
    assert "Plot drawn in" in res.stdout  # apart from the replay's time and events/s
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = pq.read_table(tmp_path / "clicks.replay.parquet")
    assert out.num_rows == 4000
    assert f"proba_{method}" in out.column_names
    assert pq.read_table(tmp_path / "clicks.metrics.parquet").num_rows >= 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "clicks.metrics.parquet",
        "clicks.parquet",
        "clicks.replay.parquet",
        "plot.png",
    ]


@pytest.mark.slow
def test_cli_errors_are_one_clear_line(tmp_path, events):
    t, s, y, _ = events
    s = s.copy()
    s[5] = np.inf
    write_parquet(tmp_path / "in.parquet", t, s, y)
    res = cli("replay", "in.parquet", "--method", "raw", "--quiet", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("streamcal: error: file ")
    assert res.stderr.count("\n") == 1
    assert "column 'score', row 5" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
    res = cli("replay", "in.parquet", "--method", "nope", cwd=tmp_path)
    assert res.returncode == 2
    assert "--method: unknown method 'nope'" in res.stderr
    res = cli("replay", "in.parquet", "--method", "raw", "--metrics", "brier,auc", cwd=tmp_path)
    assert res.returncode == 2
    assert "argument --metrics: unknown metric 'auc'" in res.stderr


def test_the_default_metrics_window_follows_the_input_length(tmp_path):
    """About a twentieth of the input, rounded (``auto_metrics_window``): a newcomer's plot of a
    100,000-event file has 20 points per metric, not one; a stream of unknown length gets 100,000."""
    from streamcal.replay._replay import auto_metrics_window

    assert [auto_metrics_window(n) for n in (0, 19_999, 20_000, 100_000, 1_999_999, 10**9, None)] == [
        1_000,
        1_000,
        1_000,
        5_000,
        50_000,
        100_000,
        100_000,
    ]
    rng = np.random.default_rng(5)
    n = 60_000
    s = rng.uniform(size=n)
    path = write_parquet(tmp_path / "in.parquet", np.arange(n, dtype=float), s, rng.uniform(size=n) < s)
    summary = replay(path, "raw", label_time_col=None)
    assert summary.metrics_window == 2_000
    assert summary.metrics_table.num_rows == n // 2_000  # one row per window (one method)
    assert "over windows of 2,000 events" in summary.to_text()
    table = pa.table({"event_time": np.arange(n, dtype=float), "score": s, "label": s > 0.5})
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=7_000))
    assert replay(reader, "raw", label_time_col=None).metrics_window == 100_000  # length unknown
    assert replay(path, "raw", label_time_col=None, metrics_window=7).metrics_window == 7
