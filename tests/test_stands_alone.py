"""The repository stands on its own: no text refers to documents outside it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("streamcal", "docs", "examples", "benchmarks", "tests", ".ci")
TOP_FILES = ("README.md", "pyproject.toml", "mkdocs.yml")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".json", ""}

# papers are cited by authors, title and year; the design is docs/design.md
OUTSIDE = re.compile(
    r"paper\s+0\d\d"  # the numbering of a papers folder that is not in the repository
    r"|DESIGN(\.md|\s*§)"
    r"|COMMON\.md|STYLE\.md"
    r"|\.\./shared|shared folder"
)


def _texts():
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).exists()]
    for folder in FOLDERS:
        files.extend(p for p in sorted((ROOT / folder).rglob("*")) if p.is_file() and p.suffix in SUFFIXES)
    return [p for p in files if "__pycache__" not in p.parts and p != Path(__file__).resolve()]


def test_no_reference_outside_the_repository():
    found = []
    for path in _texts():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary file holds no reference to anything
            continue
        for m in OUTSIDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}")
    assert not found, "references to documents outside the repository:\n" + "\n".join(found)


def test_the_check_finds_what_it_looks_for():
    for text in ("see paper 002, eq. 3", "DESIGN §1", "the DESIGN.md file", "../shared/papers"):
        assert OUTSIDE.search(text), text
    assert not OUTSIDE.search("Hastie & Tibshirani (1998), eq. 3.12; docs/design.md section 1")
