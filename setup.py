"""setuptools' build, with streamcal's kernels compiled into the wheel (the rest is in pyproject.toml).

After ``build_py`` copies the package into the build folder, a subprocess imports it from there
and compiles the kernels of ``streamcal demo`` and of the built-in calibrators into numba's cache
beside their sources (``streamcal/_precompile.py``, two processes at once), so the wheel carries
them and an installed streamcal's first run loads them (docs/first_calls.md). Best effort: if the
compile fails, the build goes on and the kernels compile at their first use, as without it.
Built from a clone (pip builds it in place), the clone's own package gets the compiled kernels too,
so that tests run from the clone load them. ``STREAMCAL_NO_PRECOMPILE=1`` skips all this; an
editable install (``pip install -e .``) skips it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SKIP = "STREAMCAL_NO_PRECOMPILE"
TIMEOUT_S = 900  # a compile that hangs must not hang the install


def _remove_caches(package: Path) -> None:
    """Delete numba's cache files under ``package`` (a build folder's, from an earlier build or a
    stopped compile)."""
    for pattern in ("*.nbi", "*.nbc", "*.nb?.tmp.*"):  # the last: numba's files being written
        for path in package.rglob(pattern):
            path.unlink()


def precompile(build_lib: str) -> bool:
    """Compile the kernels of the streamcal in ``build_lib`` into numba's cache there; whether
    every part compiled."""
    package = Path(build_lib) / "streamcal"
    _remove_caches(package)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(build_lib).resolve()), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # numba's caches only, no .pyc, go into the wheel
    print(f"streamcal: compiling the kernels into the wheel (a minute or more; {SKIP}=1 skips it)", flush=True)
    try:
        # in the build folder: ``-m`` puts the working folder first on the path; a session of its
        # own, so that a compile past the time limit is stopped with the processes it started
        compiling = subprocess.Popen(
            [sys.executable, "-m", "streamcal._precompile"],
            cwd=build_lib,
            env=env,
            start_new_session=os.name == "posix",
        )
    except OSError as exc:
        print(f"streamcal: the kernels were not compiled ({exc}); they compile at their first use", flush=True)
        return False
    try:
        status = compiling.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        if os.name == "posix":
            os.killpg(compiling.pid, signal.SIGKILL)
        compiling.kill()
        compiling.wait()
        _remove_caches(package)
        print(f"streamcal: the compile took over {TIMEOUT_S} s and was stopped; the kernels compile at their first use")
        return False
    if status != 0:
        print("streamcal: not every kernel was compiled; the others compile at their first use", flush=True)
    return status == 0


def _copy(source: Path, target: Path) -> None:
    temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


def share_with_source_tree(build_lib: str, root: Path) -> int:
    """Copy the caches compiled in ``build_lib`` into the package of the source tree ``root`` (a
    clone that pip builds in place), beside the same sources, so that tests run from the clone load
    them too; the number of kernels copied. A kernel whose source differs, or that the tree
    already caches, is left alone; its data files are copied before its index."""
    built, tree = Path(build_lib) / "streamcal", root / "streamcal"
    if not tree.is_dir() or tree.resolve() == built.resolve():
        return 0
    copied = 0
    for index in built.rglob("__pycache__/*.nbi"):
        folder = tree / index.parent.parent.relative_to(built)
        source = index.name.split(".", 1)[0] + ".py"
        base = index.name[: -len(".nbi")]
        data = sorted(index.parent.glob(f"{base}.*.nbc"))
        try:
            if (folder / source).read_bytes() != (index.parent.parent / source).read_bytes():
                continue
            cache = folder / "__pycache__"
            if any(cache.glob(f"{base}.*")):
                continue
            cache.mkdir(exist_ok=True)
            for path in data:
                _copy(path, cache / path.name)
            _copy(index, cache / index.name)
        except OSError:
            continue
        copied += 1
    return copied


class BuildPyWithKernels(build_py):
    """``build_py``, then :func:`precompile` on the build folder (not for an editable install),
    and the caches shared with the source tree it builds from."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get(SKIP, "").strip() not in ("", "0"):
            return
        if precompile(self.build_lib):
            share_with_source_tree(self.build_lib, Path(__file__).resolve().parent)


if __name__ == "__main__":  # as setuptools' build backend runs it (imported, it only defines)
    setup(cmdclass={"build_py": BuildPyWithKernels})
