"""Every example in examples/ runs to completion (the slow ones with their small-size options)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Small-size arguments for the examples whose default sizes take minutes; the code path is the same.
QUICK_ARGS = {
    "rare_events.py": ["--quick"],
    "smooth_vs_isotonic.py": ["--repeats", "3", "--stream-repeats", "2", "--drift-repeats", "1"],
    "multiclass_coupling.py": ["--events", "3000"],
}
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))


def test_examples_are_found():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *QUICK_ARGS.get(name, [])],
        cwd=tmp_path,  # examples that write files write them here
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip(), "an example prints what it shows"
