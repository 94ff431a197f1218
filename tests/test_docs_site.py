"""The documentation site builds with ``mkdocs build --strict``: a broken link, a page missing from
the navigation's files or an API reference that names nothing fails the build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "calibrators" / "index.html").is_file()
    reference = (tmp_path / "site" / "api" / "calibrators" / "index.html").read_text(encoding="utf-8")
    assert "PAVCalibrator" in reference
    assert "finite_proba" in reference
