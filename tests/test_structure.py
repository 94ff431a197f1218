"""The state's structure, checked where a test can: the calibrator base stays a thin shell, no
class or function grows past its bound, only the histogram (and the kernels) touch its arrays,
and the core neither depends on replay nor has persistence import the classes it checks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_import_graph import import_graph

import streamcal

PACKAGE = Path(streamcal.__file__).parent

# the bounds (lines without docstrings, as the classes' and functions' bodies are counted here)
SHELL_BASE_LINES = 300
CLASS_LINES = 450
FUNCTION_LINES = 120
KERNEL_FUNCTION_LINES = 200


def body_lines(node: ast.AST) -> int:
    """Lines of a class or function, its own docstring and those of its methods left out."""
    n = node.end_lineno - node.lineno + 1
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub.body:
            first = sub.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                n -= first.end_lineno - first.lineno + 1
    return n


def sources() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(PACKAGE.parent)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))
    }


def units(kind):
    for path, tree in sources().items():
        for node in ast.walk(tree):
            if isinstance(node, kind):
                yield path, node


def test_the_calibrator_base_is_a_thin_shell():
    (node,) = [n for p, n in units(ast.ClassDef) if p == "streamcal/_streaming.py" and n.name == "StreamingCalibrator"]
    assert body_lines(node) <= SHELL_BASE_LINES


def test_no_class_over_its_bound():
    big = {f"{p}:{n.name}": body_lines(n) for p, n in units(ast.ClassDef) if "/_kernels/" not in p}
    assert {k: v for k, v in big.items() if v > CLASS_LINES} == {}


def test_no_function_over_its_bound():
    big = {}
    for p, n in units((ast.FunctionDef, ast.AsyncFunctionDef)):
        bound = KERNEL_FUNCTION_LINES if "/_kernels/" in p else FUNCTION_LINES
        if body_lines(n) > bound:
            big[f"{p}:{n.name}"] = body_lines(n)
    assert big == {}


def test_only_the_histogram_touches_its_arrays():
    """Outside the histogram's module and the kernels, nothing reads ``.floats`` / ``.ints`` of a
    histogram: maps read rows, and a fused reader asks for the arrays through ``live_arrays``."""
    touching = []
    for path, tree in sources().items():
        if path == "streamcal/_histogram.py" or "/_kernels/" in path:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("floats", "ints"):
                touching.append(f"{path}:{node.lineno}")
    assert touching == []


def test_persistence_checks_know_no_class_and_the_core_does_not_read_replay():
    graph = import_graph()
    assert graph["streamcal._state_check"] <= {"streamcal.exceptions", "streamcal._params"}
    core = ["streamcal._streaming", "streamcal._histogram", "streamcal._layout", "streamcal._registry"]
    core += ["streamcal._warmup", "streamcal._calibrator_state", "streamcal._operations", "streamcal._refit"]
    for name in core:
        assert not any(target.startswith("streamcal.replay") for target in graph[name]), name


@pytest.mark.parametrize("name", ["pav", "ispline", "gev", "platt"])
def test_replay_reads_the_core_registry(name):
    from streamcal._registry import BUILTIN_CALIBRATORS, builtin_calibrator
    from streamcal.replay.methods import make_calibrator

    assert name in BUILTIN_CALIBRATORS
    assert type(make_calibrator(name)) is builtin_calibrator(name)
