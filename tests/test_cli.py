"""The command line, end to end in a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pyarrow.parquet as pq
import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamcal.cli", *args], capture_output=True, text=True, check=False, timeout=600
    )


@pytest.mark.slow
def test_demo_replays_every_method_and_prints_the_drift_table(tmp_path):
    result = run_cli("demo", "--n", "20000", "--seed", "3", "--dir", str(tmp_path), "--no-plot")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for method in ("pav", "ispline", "gev", "platt", "raw"):
        assert method in out
    assert "after drift, window refilled" in out
    assert str(tmp_path) in out  # says where the outputs are
    table = pq.read_table(tmp_path / "drift.replay.parquet")
    assert table.num_rows == 20000
    assert {"proba_pav", "llr_pav", "proba_gev", "llr_ispline"} <= set(table.column_names)


@pytest.mark.slow
def test_demo_compiles_the_fitting_methods_in_a_helper_process_on_a_fresh_install(tmp_path):
    """On an empty numba cache the demo compiles the map-fitting methods (here I-spline) in a
    helper process while it compiles PAV; the helper must start from the same streamcal and
    finish cleanly, and the demo must then run every method."""
    import os

    cache = tmp_path / "numba_cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    code = """
import os, pathlib
from streamcal.replay import demo
assert not demo._kernels_cached()
helpers = []
start = demo._start_helper
def recorded(methods, *args):
    helpers.append((methods, start(methods, *args)))
    return helpers[-1][1]
demo._start_helper = recorded
demo._load_kernels(["raw", "pav", "ispline"], "drift", 0, 1000, parallel=True)
assert [methods for methods, _ in helpers] == [["ispline"]]
assert helpers[0][1] is not None and helpers[0][1].returncode == 0  # waited for, finished cleanly
assert any(p.name.startswith("ispline.") for p in pathlib.Path(os.environ["NUMBA_CACHE_DIR"]).rglob("*.nbi"))
assert demo._kernels_cached()
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.slow
def test_generate_then_replay(tmp_path):
    data = tmp_path / "click.parquet"
    result = run_cli("generate", str(data), "--scenario", "click", "-n", "5000", "--seed", "1")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out.parquet"
    result = run_cli("replay", str(data), "--method", "pav,platt", "--output", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert pq.read_table(out).num_rows == 5000


def test_replay_error_is_one_clear_line(tmp_path):
    result = run_cli("replay", str(tmp_path / "missing.parquet"), "--quiet")
    assert result.returncode != 0
    assert "missing.parquet" in result.stderr


def test_no_command_prints_help_and_fails():
    result = run_cli()
    assert result.returncode == 2
    assert "demo" in result.stdout
    assert "replay" in result.stdout


def test_every_command_has_working_help():
    for command in ("demo", "generate", "replay"):
        result = run_cli(command, "--help")
        assert result.returncode == 0, result.stderr
        assert "usage: streamcal" in result.stdout


@pytest.mark.slow
def test_replay_default_never_gives_zero_or_one_and_exact_proba_does(tmp_path):
    data = tmp_path / "click.parquet"
    assert run_cli("generate", str(data), "-n", "4000", "--seed", "2").returncode == 0
    exact, finite = tmp_path / "exact.parquet", tmp_path / "finite.parquet"
    assert run_cli("replay", str(data), "--output", str(finite), "--quiet").returncode == 0
    result = run_cli("replay", str(data), "--exact-proba", "--output", str(exact), "--quiet")
    assert result.returncode == 0, result.stderr
    p_exact = pq.read_table(exact).column("proba_pav").to_numpy()
    p_finite = pq.read_table(finite).column("proba_pav").to_numpy()
    assert ((p_exact == 0.0) | (p_exact == 1.0)).any()
    assert ((p_finite > 0.0) & (p_finite < 1.0)).all()


def test_replay_refit_every_defaults_to_1000_and_accepts_lazy():
    from streamcal.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["replay", "in.parquet"]).refit_every == 1000
    assert parser.parse_args(["replay", "in.parquet", "--refit-every", "lazy"]).refit_every is None
    assert parser.parse_args(["replay", "in.parquet", "--refit-every", "250"]).refit_every == 250


def test_replay_jobs_reaches_pav_only(tmp_path):
    from streamcal.cli import build_parser
    from streamcal.replay._cli import _method_options
    from streamcal.replay.methods import make_calibrator

    parser = build_parser()
    assert "n_jobs" not in _method_options(parser.parse_args(["replay", "in.parquet"]))
    options = _method_options(parser.parse_args(["replay", "in.parquet", "--jobs", "2"]))
    assert make_calibrator("pav", **options).n_jobs == 2
    assert not hasattr(make_calibrator("ispline", **options), "n_jobs")
    data = tmp_path / "click.parquet"
    assert run_cli("generate", str(data), "-n", "1000", "--seed", "2").returncode == 0
    result = run_cli("replay", str(data), "--jobs", "0", "--quiet")
    assert result.returncode == 2
    assert result.stderr.startswith("streamcal: error: --jobs must")


@pytest.mark.parametrize("n", [1, 7, 50, 1000, 2000])
def test_demo_runs_on_a_short_stream(tmp_path, capsys, n):
    """A short demo (down to one event) prints its drift table without an error: the count window
    shrinks to an eighth of the stream, segments without events are left out, and a segment of one
    class gets a Cllr of NaN."""
    from streamcal.cli import main

    assert main(["demo", "--n", str(n), "--dir", str(tmp_path), "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "Streaming PAV on a drifting click stream" in out
    assert "internal error" not in out
    # the replay learns every label after the attribution hour: no delayed-feedback bias to show
    assert "every label learned 1h after its event" in out
    assert "labels: delay" in out
    rows = [line for line in out.splitlines() if line.startswith(("before drift", "just after", "after drift"))]
    assert rows  # at least one segment holds events
    if n >= 1000:
        assert len(rows) == 9  # three segments, three calibrators
        assert "count window 125" in out or "count window 250" in out


def test_dir_of_the_package_lists_its_public_names_not_its_imports():
    import streamcal

    names = dir(streamcal)
    assert set(streamcal.__all__) <= set(names)
    assert {"importlib", "annotations"}.isdisjoint(names)
    assert "exceptions" in names  # a loaded public submodule


def test_help_lists_every_scenario():
    result = run_cli("--help")
    assert "(click, fraud, drift, campaigns)" in " ".join(result.stdout.split())
