"""Cold and warm start: whole processes running a first ``prequential`` or river-face loop.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_cold_start.py                     # 3 cold, 2 warm after each
    PYTHONPATH=. python benchmarks/bench_cold_start.py --cold 1 --warm 2   # quicker

The package directory is copied (without ``__pycache__``) to a temporary directory for every cold
run, so numba's on-disk cache (``cache=True`` writes next to the source) starts empty, and its
Python bytecode is compiled, as ``pip install`` does; the child processes import that copy
(``PYTHONPATH``; ``NUMBA_CACHE_DIR`` unset). The first run on a copy is the cold one (compiles
the kernels and writes the cache); the runs after it on the same copy are warm (load the cache).
Each figure is a whole process, interpreter start to exit: wall time, and CPU time (user +
system of the child, which is steadier on a shared machine). Medians.

Scenarios: a first ``prequential`` of 5,000 events (which the default allowance of interpreted
events covers: it runs the kernels' Python source and never imports numba), the same with the
allowance 0 (``STREAMCAL_INTERPRETED_EVENTS=0``: compiled from the first call), one of 100,000
events (beyond the allowance: compiled), and the river face with the default allowance and 0.

Baselines, in the same run: the bare interpreter, ``import numpy, numba, river`` (what any numba
calibrator needs), ``import numba, river, pyarrow, scipy``, and the numba floor: a process that
imports numpy and river and calls one trivial ``@njit(cache=True)`` function. Its warm run is the
least any process that runs a cached numba kernel costs (numba initialises its compiler targets,
importing ``scipy.linalg`` among others, before it loads anything from its cache).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PREQUENTIAL = """
import numpy as np
from streamcal import PAVCalibrator
rng = np.random.default_rng(0)
s = rng.uniform(size={n})
y = rng.uniform(size={n}) < s
PAVCalibrator().prequential(s, y)
"""

RIVER = """
import random
from streamcal import PAVCalibrator
rng = random.Random(0)
cal = PAVCalibrator()
for _ in range(2000):
    s = rng.random()
    cal.predict_proba_one({"score": s})
    cal.learn_one({"score": s}, rng.random() < s)
"""

FLOOR_MODULE = """
import numba


@numba.njit(cache=True)
def one_more(x):
    return x + 1.0
"""

BASELINES = {
    "python -c pass": "pass",
    "import numpy, numba, river": "import numpy, numba, river",
    "import numba, river, pyarrow, scipy": "import numba, river, pyarrow, scipy",
}
COMPILED_AT_ONCE = {"STREAMCAL_INTERPRETED_EVENTS": "0"}
# name -> (code, environment variables); the default allowance unless told
SCENARIOS = {
    "numba floor: one cached @njit call": ("import numpy, river, numba_floor; numba_floor.one_more(1.0)", {}),
    "import streamcal": ("import streamcal", {}),
    "first prequential (5,000 events)": (PREQUENTIAL.format(n=5_000), {}),
    "first prequential (5,000), allowance 0": (PREQUENTIAL.format(n=5_000), COMPILED_AT_ONCE),
    "first prequential (100,000 events)": (PREQUENTIAL.format(n=100_000), {}),
    "river face (2,000 predict + learn)": (RIVER, {}),
    "river face, allowance 0": (RIVER, COMPILED_AT_ONCE),
}


def run(code: str, pythonpath: str, extra_env: dict | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of ``python -c code``, a whole process."""
    drop = ("PYTHONDONTWRITEBYTECODE", "STREAMCAL_INTERPRETED_EVENTS")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_") and k not in drop}
    env.update(extra_env or {})
    env["PYTHONPATH"] = pythonpath
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=pythonpath)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        msg = f"the child failed (exit {proc.returncode}): {code}"
        raise RuntimeError(msg)
    return wall, usage.ru_utime + usage.ru_stime


def fresh_copy(parent: Path) -> Path:
    """A copy of the package with an empty numba cache and compiled bytecode (a fresh install)."""
    where = Path(tempfile.mkdtemp(dir=parent))
    shutil.copytree(ROOT / "streamcal", where / "streamcal", ignore=shutil.ignore_patterns("__pycache__"))
    (where / "numba_floor.py").write_text(FLOOR_MODULE)
    compileall.compile_dir(where, quiet=1)
    return where


def check_copy_is_imported(where: Path) -> None:
    code = "import streamcal, sys; sys.stdout.write(streamcal.__file__)"
    env = {**os.environ, "PYTHONPATH": str(where)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=where, capture_output=True, text=True, check=True)
    if not out.stdout.startswith(str(where)):
        msg = f"the children import {out.stdout}, not the copy in {where}"
        raise RuntimeError(msg)


def median_pair(runs):
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=3, help="cold runs per scenario (a fresh copy each)")
    parser.add_argument("--warm", type=int, default=2, help="warm runs after each cold run")
    args = parser.parse_args(argv)
    runs = f"medians of {args.cold} cold and {args.cold * args.warm} warm runs"
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {runs}")
    with tempfile.TemporaryDirectory() as tmp:
        parent = Path(tmp)
        check_copy_is_imported(fresh_copy(parent))
        rows = {}
        for name, code in BASELINES.items():
            rows[name] = (None, median_pair([run(code, tmp) for _ in range(args.cold * args.warm)]))
        for name, (code, env) in SCENARIOS.items():
            cold, warm = [], []
            for _ in range(args.cold):
                where = str(fresh_copy(parent))
                cold.append(run(code, where, env))
                warm.extend(run(code, where, env) for _ in range(args.warm))
            rows[name] = (median_pair(cold), median_pair(warm))
    floor = rows["numba floor: one cached @njit call"][1][1]
    header = f"{'whole process, seconds':40s} {'cold wall':>9s} {'cold CPU':>9s} {'warm wall':>9s} {'warm CPU':>9s}"
    print(f"{header} {'warm CPU / floor':>16s}")
    for name, (cold, warm) in rows.items():
        c = f"{cold[0]:9.2f} {cold[1]:9.2f}" if cold else f"{'':9s} {'':9s}"
        print(f"  {name:38s} {c} {warm[0]:9.2f} {warm[1]:9.2f} {warm[1] / floor:15.2f}x")
    print("floor: the warm CPU time of the numba floor (numpy, river, one cached @njit function)")


if __name__ == "__main__":
    main()
