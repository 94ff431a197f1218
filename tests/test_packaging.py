"""The distribution's name, and the install hints that name it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Another project already publishes a distribution called ``streamcal``: the import name stays
# ``streamcal``, the distribution is installed under its own name.
TAKEN = "streamcal"


def distribution_name() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1]
    return re.search(r'^name\s*=\s*"([^"]+)"', project, re.MULTILINE).group(1)


def test_the_distribution_has_a_name_of_its_own():
    assert distribution_name() not in {TAKEN, ""}
    assert distribution_name() == "streamcal-engine"


def test_every_install_hint_names_the_distribution():
    name = distribution_name()
    hint = re.compile(r"pip install\s+[\"'`]?([A-Za-z0-9_.-]+)\[")
    files = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*.py"), *ROOT.glob("streamcal/**/*.py")]
    seen = []
    for path in files:
        for match in hint.finditer(path.read_text(encoding="utf-8")):
            seen.append((path.relative_to(ROOT).as_posix(), match.group(1)))
    wrong = [(f, n) for f, n in seen if n not in {name, "."}]
    assert not wrong, f"install hints naming another distribution: {wrong}"
    assert seen, "no install hint found: the pattern no longer matches how the docs write them"
