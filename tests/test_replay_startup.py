"""A short ``streamcal replay`` loads only what it uses, and prints its summary to a pipe as text."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamcal.replay import generate
from streamcal.replay._summary import ReplaySummary, print_summary, render_text

ROOT = Path(__file__).resolve().parents[1]

# runs the command line in a process of its own, stdout a pipe, and reports the modules it loaded
CHILD = """
import json, runpy, sys
sys.argv = ["streamcal", "replay", sys.argv[1], "-q", "-o", sys.argv[2]]
try:
    runpy.run_module("streamcal.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
sys.stderr.write(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_of_a_replay(tmp_path, allowance: str | None) -> tuple[set[str], str]:
    """The modules a ``streamcal replay`` of 1,000 click events loaded, and what it printed, run in a
    process of its own with ``STREAMCAL_INTERPRETED_EVENTS`` set to ``allowance`` (``None``: unset, the
    default)."""
    src = tmp_path / "clicks.parquet"
    generate(src, "click", n=1_000, seed=1)
    env = {k: v for k, v in os.environ.items() if k != "STREAMCAL_INTERPRETED_EVENTS"}
    env["PYTHONPATH"] = str(ROOT)
    if allowance is not None:
        env["STREAMCAL_INTERPRETED_EVENTS"] = allowance
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(tmp_path / "out.parquet")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    report = json.loads(child.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None)
    return set(report["modules"]), child.stdout


def summary() -> ReplaySummary:
    return ReplaySummary(
        files=["<pyarrow Table>"],
        methods=["pav"],
        n_events=1_000,
        n_positive=20,
        n_learned=990,
        n_in_flight=10,
        label_mode="column",
        seconds=2.0,
        metrics={"pav": {"brier": 0.01, "cllr": 0.5}},
        metrics_table=None,
        calibrators={},
        notes=["a note"],
    )


def test_a_short_replay_loads_neither_rich_nor_numba_nor_the_demo(tmp_path):
    loaded, printed = _modules_of_a_replay(tmp_path, None)
    assert "streamcal.replay._replay" in loaded  # the replay ran in this process
    for name in ("rich", "numba", "streamcal.replay.demo"):
        assert name not in loaded, name
    assert printed.split()[:2] == ["method", "Brier"]  # the summary, as plain text
    assert "┃" not in printed
    assert (tmp_path / "out.parquet").exists()


def test_the_summary_is_plain_text_off_a_terminal():
    out = io.StringIO()
    print_summary(summary(), out)
    assert out.getvalue() == render_text(summary()) + "\n"


def test_the_summary_is_a_rich_table_on_a_terminal():
    pytest.importorskip("rich")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    print_summary(summary(), out)
    assert "streamcal replay" in out.getvalue()  # the table's title, which the plain text has not
    assert "streamcal replay" not in render_text(summary())


def test_replay_demo_is_still_a_public_name():
    import streamcal.replay

    assert callable(streamcal.replay.replay_demo)
    assert "replay_demo" in dir(streamcal.replay)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        _ = streamcal.replay.nonexistent


def test_a_compiled_replay_loads_blas_without_scipy_linalg(tmp_path):
    # the switch to compiled kernels checks for BLAS through scipy.linalg.cython_blas, which the
    # command line loads alone: scipy.linalg's package (and numpy.f2py behind it) stays unloaded
    pytest.importorskip("scipy")
    loaded, _ = _modules_of_a_replay(tmp_path, "0")
    assert "numba" in loaded  # the kernels ran compiled
    assert "scipy.linalg.cython_blas" in loaded
    assert "scipy.linalg" not in loaded
    assert "numpy.f2py" not in loaded


def test_the_command_line_pauses_the_cyclic_collector_during_the_replay(tmp_path, monkeypatch):
    import gc

    import pyarrow.parquet as pq

    import streamcal.replay._replay as replay_module
    from streamcal.cli import main

    src = tmp_path / "clicks.parquet"
    generate(src, "click", n=2_000, seed=4)
    real = replay_module.replay
    seen = []

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(replay_module, "replay", watched)
    from streamcal._kernels import _config

    steps = list(_config.BEFORE_SWITCH)
    assert gc.isenabled()
    try:
        assert main(["replay", str(src), "-q", "-o", str(tmp_path / "a.parquet")]) == 0
    finally:
        gc.unfreeze()  # the survivors the command line froze: this process goes on
    assert seen == [False]  # no automatic collections while the replay ran
    assert gc.isenabled()  # and the collector back on after it
    assert steps == _config.BEFORE_SWITCH  # the BLAS step was for that replay only
    monkeypatch.setattr(replay_module, "replay", real)
    expected = real(src, "pav", output=tmp_path / "b.parquet", metrics_window=1_000)
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    assert expected.n_events == 2_000


SWITCH_AHEAD = """
import json, sys
from streamcal._kernels import _config
calls = []
within = _config.switch_ahead(10, lambda: calls.append("within"))
before = _config.is_compiled()
thread = _config.switch_ahead(10**9, lambda: calls.append("beyond"))
thread.join()
sys.stderr.write(json.dumps({"within": within is None, "before": before, "after": _config.is_compiled(),
                             "calls": calls, "numba": "numba" in sys.modules}))
"""


def test_switch_ahead_starts_only_beyond_the_allowance():
    # a long replay switches to compiled kernels on a worker thread while it opens its input;
    # a call the interpreted tier would still cover starts nothing
    env = {k: v for k, v in os.environ.items() if k != "STREAMCAL_INTERPRETED_EVENTS"}
    env["PYTHONPATH"] = str(ROOT)
    child = subprocess.run(
        [sys.executable, "-c", SWITCH_AHEAD], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    report = json.loads(child.stderr.strip().splitlines()[-1])
    assert report == {"within": True, "before": False, "after": True, "calls": ["beyond"], "numba": True}
