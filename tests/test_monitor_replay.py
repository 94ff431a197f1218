"""``replay(..., monitor=True)`` and ``streamcal replay --monitor``: the calibration monitors on
the input score and every method's output, in the summary and on the plot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamcal.replay import generate, replay
from streamcal.replay._monitor import MonitorSink, mark_alarms
from streamcal.replay.methods import RawScoreCalibrator

ROOT = Path(__file__).resolve().parents[1]
N = 60_000  # the drift scenario is calibrated until N / 3


@pytest.fixture(scope="module")
def drift_file(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("monitor") / "drift.parquet", scenario="drift", n=N, seed=4)


def test_replay_monitors_flag_the_drift_after_it_starts(drift_file):
    summary = replay(drift_file, {"raw": RawScoreCalibrator()}, metrics={}, monitor=True)
    assert set(summary.alarms) == {"raw", "score"}
    for kind in ("isotonic", "mean bias"):
        event, when = summary.alarms["raw"][kind]
        assert N // 3 <= event < N
        assert when is not None
        assert summary.alarms["score"][kind] == (event, when)
    text = summary.to_text()
    assert "Calibration monitors (anytime-valid, alpha = 0.05 per monitor and stream):" in text
    assert f"raw (the input score itself): isotonic: flagged at event {summary.alarms['raw']['isotonic'][0]:,} (2026-" in text
    assert "input score:" not in text  # one line for the raw method and the input score it serves


def test_replay_without_monitor_has_no_alarms(drift_file):
    summary = replay(drift_file, {"raw": RawScoreCalibrator()}, metrics={})
    assert summary.alarms is None
    assert "Calibration monitors" not in summary.to_text()


def test_monitor_sink_equals_monitors_run_on_the_whole_stream(drift_file):
    import pyarrow.parquet as pq

    from streamcal.monitor import IsotonicEProcess, MeanBiasCS

    table = pq.read_table(drift_file)
    p = table["score"].to_numpy()
    y = table["label"].to_numpy().astype(float)
    summary = replay(drift_file, {"raw": RawScoreCalibrator()}, metrics={}, monitor=True, batch_size=7_000)
    for kind, make in (("isotonic", IsotonicEProcess), ("mean bias", MeanBiasCS)):
        monitor = make()
        monitor.update_many(y, p)
        assert summary.alarms["raw"][kind][0] == monitor.first_alarm_at - 1


def test_sink_leaves_out_a_score_that_is_not_a_probability():
    import pyarrow as pa

    table = pa.table({"score": [0.2, 1.7, 0.4], "label": [0, 1, 0]})
    summary = replay(table, {"raw": _Clipped()}, metrics={}, monitor=True)
    assert set(summary.alarms) == {"raw"}
    assert MonitorSink(["a"]).lines()[0].startswith("Calibration monitors")


class _Clipped:
    """The raw score clipped into [0, 1], so that a score above 1 still gives a probability."""

    def process(self, scores, labels, learn_mask, *, weights=None, times=None):
        proba = np.where(np.asarray(learn_mask, dtype=bool), np.nan, np.clip(scores, 0.0, 1.0))
        return proba, np.zeros_like(proba)

    def prequential(self, scores, labels, *, weights=None, times=None):
        proba = np.clip(scores, 0.0, 1.0)
        return proba, np.zeros_like(proba)


def test_plot_marks_the_alarms(drift_file, tmp_path):
    pytest.importorskip("matplotlib")
    from streamcal.replay import _plot

    shown = {}
    original = _plot.plot_replay

    def keep(*args, **kwargs):
        shown["fig"] = original(*args, **kwargs)
        return shown["fig"]

    _plot.plot_replay = keep
    try:
        summary = replay(drift_file, {"raw": RawScoreCalibrator()}, monitor=True, plot=tmp_path / "p.png")
    finally:
        _plot.plot_replay = original
    labels = [line.get_label() for ax in shown["fig"].axes for line in ax.get_lines()]
    assert any(label == "raw: isotonic alarm" for label in labels)
    # the alarms listed with their events in the reliability panel, readable where lines overlap
    texts = [t.get_text() for ax in shown["fig"].axes if ax.get_title() == "reliability" for t in ax.texts]
    (box,) = [text for text in texts if text.startswith("first calibration alarms")]
    found = summary.alarms["raw"]
    hits = [f"{kind} at event {found[kind][0] + 1:,}" for kind in ("isotonic", "mean bias") if found[kind]]
    assert hits
    assert f"raw: {', '.join(hits)}" in box.splitlines()
    assert (tmp_path / "p.png").stat().st_size > 0
    mark_alarms(shown["fig"], {})  # nothing to mark: nothing drawn, no error


def test_cli_monitor_flag(drift_file, tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamcal.cli",
            "replay",
            str(drift_file),
            "--method",
            "raw",
            "--monitor",
            "--quiet",
            "--no-output",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Calibration monitors" in result.stdout
    assert "flagged at event" in result.stdout
