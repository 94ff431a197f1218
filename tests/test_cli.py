"""The command line, end to end in a subprocess."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamcal.cli", *args], capture_output=True, text=True, check=False, timeout=600
    )


def test_demo_prints_before_after_table():
    result = run_cli("demo", "--n", "20000", "--seed", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Brier" in out
    assert "minCllr" in out
    brier = next(line for line in out.splitlines() if line.startswith("Brier")).split()
    assert float(brier[-1]) < float(brier[-2])  # calibration improves Brier on held-out events


def test_no_command_prints_help_and_fails():
    result = run_cli()
    assert result.returncode == 2
    assert "demo" in result.stdout
