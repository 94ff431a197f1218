"""The README's examples run as written."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def test_readme_python_blocks_are_doctests_that_pass():
    blocks = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert blocks, "the README has no python block"
    parser = doctest.DocTestParser()
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, {}, f"README.md block {i}", "README.md", 0)
        assert test.examples, f"README python block {i} is not written as a doctest (>>>)"
        runner = doctest.DocTestRunner(optionflags=flags)
        runner.run(test)
        assert runner.failures == 0, f"README python block {i}: {runner.failures} example(s) failed"
