"""Every Python block of the docs runs as written.

A page's blocks are a tutorial: its script blocks run in order, in one fresh interpreter, in an
empty directory (a block that reads a file makes it first), so that a reader who pastes them one
after another gets what the page shows. Blocks written as doctests (``>>>``) are run as doctests,
their outputs compared. API synopses are ``text`` blocks, not Python.
"""

from __future__ import annotations

import doctest
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^(?P<indent>[ \t]*)```python\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)

# pages whose blocks are not run here, and why
NOT_RUN = {
    # its blocks start a streaming query that waits for new files until stopped (awaitTermination)
    # and read from a Kafka broker; tests/test_spark*.py run the same calls on local streams
    "spark.md": "a Spark streaming query that runs until stopped, and a Kafka source",
    # its doctest blocks are run by tests/test_docs_site.py
    "index.md": "run by tests/test_docs_site.py",
}


def _blocks(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return [textwrap.dedent(m["body"]) for m in BLOCK.finditer(text)]


def _is_doctest(block: str) -> bool:
    return block.lstrip().startswith(">>>")


PAGES = sorted(p for p in DOCS.rglob("*.md") if _blocks(p))


def test_the_pages_with_python_blocks_are_found():
    names = {p.name for p in PAGES}
    assert {"streaming_pav.md", "keyed.md", "replay.md", "distributed.md"} <= names


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in NOT_RUN], ids=lambda p: p.name)
def test_a_pages_python_blocks_run_as_written(page, tmp_path):
    blocks = _blocks(page)
    scripts = [b for b in blocks if not _is_doctest(b)]
    for i, block in enumerate(b for b in blocks if _is_doctest(b)):
        test = doctest.DocTestParser().get_doctest(block, {}, f"{page.name} doctest block {i}", str(page), 0)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
        runner.run(test, out=lambda s: None)
        assert runner.failures == 0, f"{page.name}: doctest block {i} fails"
    if not scripts:
        return
    source = "\n".join(f"# ---- block {i}\n{block}" for i, block in enumerate(scripts))
    done = subprocess.run(
        [sys.executable, "-c", source],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**__import__("os").environ, "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 0, f"{page.name}: its Python blocks fail:\n{done.stderr[-3000:]}"


def test_the_pages_not_run_say_why():
    for name, why in NOT_RUN.items():
        assert (DOCS / name).is_file(), name
        assert why
