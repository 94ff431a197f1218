"""numba's cache of streamcal's kernels: stamped by the sources' contents, so that kernels compiled
before the package is installed (``pip install .`` compiles them into the wheel) load after it."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

import streamcal
from streamcal._kernels import _cache_locator, _config, histogram, metrics

ROOT = Path(streamcal.__file__).resolve().parents[1]


def _stamp(path: Path) -> tuple:
    st = os.stat(path)
    return _cache_locator.contents_stamp(str(path), st.st_mtime_ns, st.st_size)


def test_the_stamp_changes_with_the_bytes_not_the_time_or_place(tmp_path):
    first = tmp_path / "a.py"
    first.write_bytes(b"x = 1\n")
    stamp = _stamp(first)
    assert stamp[1] == 6
    assert np.__version__ in stamp  # another numpy never loads these kernels
    moved = tmp_path / "elsewhere" / "a.py"  # an install: another folder, a new time
    moved.parent.mkdir()
    moved.write_bytes(b"x = 1\n")
    os.utime(moved, ns=(1, 1))
    assert _stamp(moved) == stamp
    when = os.stat(first).st_mtime_ns
    first.write_bytes(b"x = 2\n")  # same size, same time: another stamp
    os.utime(first, ns=(when, when))
    # a process reads each file once per (time, size), as numba does: the memo is per process
    _cache_locator.contents_stamp.cache_clear()
    assert _stamp(first) != stamp


def _index_stamp(index: Path):
    """The source stamp numba's index file ``index`` holds (numba's format: numba's version, then
    the pickled stamp and overloads)."""
    with open(index, "rb") as f:
        assert pickle.load(f) == numba.__version__
        stamp, _overloads = pickle.loads(f.read())
    return stamp


def _cache_of(kernel) -> Path:
    return Path(_config.compiled(kernel).stats.cache_path)


def test_streamcal_kernels_cache_beside_their_sources_with_the_contents_stamp():
    if os.environ.get("NUMBA_CACHE_DIR"):
        pytest.skip("NUMBA_CACHE_DIR is set: numba's own locator caches the kernels")
    kernel = metrics.positives
    out = np.empty(3)
    assert kernel(np.array([0.25, 0.5, 0.75]), np.array([1.0, 0.0, 1.0]), out) == 2
    source = Path(metrics.__file__)
    indexes = list(_cache_of(kernel).glob("metrics.positives-*.nbi"))
    assert _cache_of(kernel) == source.parent / "__pycache__"
    assert [_index_stamp(i) for i in indexes] == [_stamp(source)]


def test_other_files_are_left_to_numba(tmp_path):
    other = tmp_path / "mod.py"
    other.write_text("def f():\n    return 1\n")
    namespace = {}
    exec(compile(other.read_text(), str(other), "exec"), namespace)
    assert not _cache_locator.in_package(str(other))
    assert _cache_locator.SourceContentsLocator.from_function(namespace["f"], str(other)) is None
    assert _cache_locator.in_package(histogram.__file__)


COUNT = """
import hashlib, json
import numpy as np
import streamcal
from streamcal._kernels import _config, histogram, ipav

streamcal.use_compiled_kernels()
rng = np.random.default_rng(0)
scores = rng.uniform(size=1000)
p, llr = streamcal.PAVCalibrator().prequential(scores, rng.uniform(size=1000) < scores)
digest = hashlib.sha256(p.tobytes() + llr.tobytes()).hexdigest()
hits = misses = 0
for mod in (histogram, ipav):
    for obj in vars(mod).values():
        if isinstance(obj, _config.Kernel) or not hasattr(obj, "stats"):
            continue
        hits += sum(obj.stats.cache_hits.values())
        misses += sum(obj.stats.cache_misses.values())
cache = ipav.pav_prequential_inplace.stats.cache_path
print(json.dumps({"hits": hits, "misses": misses, "cache": cache, "outputs": digest}))
"""


def _count(root: Path, cache_dir: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(root)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    done = subprocess.run(
        [sys.executable, "-c", COUNT], env=env, cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _copy_package(to: Path) -> Path:
    shutil.copytree(ROOT / "streamcal", to / "streamcal", ignore=shutil.ignore_patterns("__pycache__"))
    return to


@pytest.mark.slow
def test_kernels_compiled_before_an_install_load_after_it(tmp_path):
    """What ``pip install .`` does: compile in the build folder (the install runs
    ``streamcal._precompile`` there; here the first ``prequential``'s kernels alone, which
    ``tests/test_warmup.py`` shows the install's compile covers), then copy the files (new times, a
    new folder); a first ``prequential`` there compiles no kernel. ``NUMBA_CACHE_DIR`` still wins
    (an empty one: every kernel compiles), and the kernels compiled so give the same bits."""
    build = _copy_package(tmp_path / "build")
    built = _count(build)
    assert built["hits"] == 0  # compiled there, beside the sources
    assert built["misses"] > 20
    assert list((build / "streamcal" / "_kernels" / "__pycache__").glob("ipav.*.nbc"))
    installed = tmp_path / "site"
    shutil.copytree(build, installed)  # copies the files' bytes, with new times
    first = _count(installed)
    assert first["misses"] == 0  # (a kernel's callees come with its own cached code)
    assert first["hits"] >= 3
    assert first["cache"] == str(installed / "streamcal" / "_kernels" / "__pycache__")
    cold = _count(installed, str(tmp_path / "empty_cache"))
    assert cold["hits"] == 0
    assert cold["misses"] > 20  # the entry points and every callee, compiled
    assert cold["cache"].startswith(str(tmp_path / "empty_cache"))
    assert cold["outputs"] == first["outputs"] == built["outputs"]


def _setup_module():
    import importlib.util

    pytest.importorskip("setuptools")  # setup.py's own import
    spec = importlib.util.spec_from_file_location("streamcal_setup", ROOT / "setup.py")
    if spec is None or not (ROOT / "setup.py").exists():
        pytest.skip("no setup.py beside the package (an installed streamcal)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_shares_its_caches_with_the_clone_it_builds(tmp_path):
    """A kernel whose source the clone holds unchanged and does not cache yet gets the build's
    index and data; a changed source, or a kernel the clone caches already, is left alone."""
    setup = _setup_module()
    build, clone = tmp_path / "build", tmp_path / "clone"
    for root in (build, clone):
        (root / "streamcal" / "__pycache__").mkdir(parents=True)
        (root / "streamcal" / "same.py").write_text("def f():\n    return 1\n")
        (root / "streamcal" / "cached.py").write_text("def g():\n    return 1\n")
    (build / "streamcal" / "changed.py").write_text("def h():\n    return 2\n")
    (clone / "streamcal" / "changed.py").write_text("def h():\n    return 3\n")
    for name in ("same.f-1.py311", "changed.h-1.py311", "cached.g-1.py311"):
        (build / "streamcal" / "__pycache__" / f"{name}.nbi").write_bytes(b"index " + name.encode())
        (build / "streamcal" / "__pycache__" / f"{name}.1.nbc").write_bytes(b"data " + name.encode())
    (clone / "streamcal" / "__pycache__" / "cached.g-1.py311.nbi").write_bytes(b"the clone's own")
    assert setup.share_with_source_tree(str(build), clone) == 1
    shared = sorted(p.name for p in (clone / "streamcal" / "__pycache__").iterdir())
    assert shared == ["cached.g-1.py311.nbi", "same.f-1.py311.1.nbc", "same.f-1.py311.nbi"]
    assert (clone / "streamcal" / "__pycache__" / "same.f-1.py311.1.nbc").read_bytes() == b"data same.f-1.py311"
    assert (clone / "streamcal" / "__pycache__" / "cached.g-1.py311.nbi").read_bytes() == b"the clone's own"
    assert setup.share_with_source_tree(str(build), build) == 0
