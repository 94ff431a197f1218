"""Every example in examples/ runs to completion (the slow ones with their small-size options)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Small-size arguments for the examples whose default sizes take minutes; the code path is the same.
QUICK_ARGS = {
    "rare_events.py": ["--quick", "--sizes", "500"],
    "smooth_vs_isotonic.py": ["--repeats", "3", "--stream-repeats", "2", "--drift-repeats", "1"],
    "multiclass_coupling.py": ["--events", "3000"],
    "river_pipeline.py": ["--events", "2000"],
    "finite_vs_exact.py": ["--n", "200000"],
    "multiclass_wrapper.py": ["--events", "800"],
    "keyed_river_wrapper.py": ["--events", "3000"],
    "dask_fit.py": ["--n", "40000"],
}
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))


def test_examples_are_found():
    assert len(EXAMPLES) >= 5


@pytest.mark.slow
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


# What the plain install brings (the project's dependencies), and the import name -> distribution of
# the packages an example may need beyond them.
PLAIN = {"numpy", "numba", "river", "pyarrow", "scipy", "streamcal"}
DISTRIBUTION = {"sklearn": "scikit-learn", "matplotlib": "matplotlib", "pandas": "pandas", "polars": "polars",
                "dask": "dask", "rich": "rich"}


def _extras() -> dict[str, set[str]]:
    """``{extra: {distribution, ...}}`` from pyproject.toml's optional dependencies."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = {}
    for name, body in re.findall(r"^([a-z]+)\s*=\s*\[(.*?)\]", block, re.MULTILINE | re.DOTALL):
        extras[name] = {re.split(r"[<>=\[ ]", d.strip().strip('"'))[0] for d in body.split(",") if d.strip()}
    return extras


def _guarded(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside ``try: ... except ImportError`` (optional imports)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in {"ImportError", "ModuleNotFoundError"} for h in node.handlers
        ):
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return ids


def _imports(path: Path) -> set[str]:
    """The top-level modules an example needs: its imports, less the optional ones."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    optional = _guarded(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"__future__"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_says_which_install_it_runs_with(name):
    path = ROOT / "examples" / name
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    match = re.search(r"Install: ``pip install (?:\.|\"\.\[([a-z,]+)\]\")``", doc)
    assert match, f"{name}: its docstring has no 'Install: ``pip install ...``' line"
    named = set(match.group(1).split(",")) if match.group(1) else set()
    extras = _extras()
    assert named <= set(extras), f"{name} names extras {named - set(extras)} that pyproject.toml lacks"
    provided = set().union(*(extras[e] for e in named)) if named else set()
    for module in _imports(path) - PLAIN:
        assert DISTRIBUTION.get(module, module) in provided, (
            f"{name} imports {module}, which neither the plain install nor the extras it names ({named}) bring"
        )
    # the test extra is what CI installs: it must bring everything every example needs
    assert {DISTRIBUTION.get(m, m) for m in _imports(path) - PLAIN} <= extras["test"]
