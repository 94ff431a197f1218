"""Cold and warm start: whole processes running a first ``prequential`` or river-face loop.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_cold_start.py              # 3 cold + 5 warm runs each
    PYTHONPATH=. python benchmarks/bench_cold_start.py --cold 1 --warm 3   # quicker

The package directory is copied (without ``__pycache__``) to a temporary directory for every cold
run, so numba's on-disk cache (``cache=True`` writes next to the source) starts empty; the child
processes import that copy (``PYTHONPATH``, ``NUMBA_CACHE_DIR`` unset). The first run on a copy is
the cold one (compiles and writes the cache); the runs after it on the same copy are warm (load
the cache). Each figure is a whole process, interpreter start to exit: wall time, and CPU time
(user + system of the child, which is steadier on a shared machine). Medians.

Baselines, in the same run: the bare interpreter, ``import numpy, numba, river`` (what any numba
calibrator needs) and ``import numba, river, pyarrow, scipy``.
"""

from __future__ import annotations

import argparse
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
s = rng.uniform(size=5000)
y = rng.uniform(size=5000) < s
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

BASELINES = {
    "python -c pass": "pass",
    "import numpy, numba, river": "import numpy, numba, river",
    "import numba, river, pyarrow, scipy": "import numba, river, pyarrow, scipy",
}
SCENARIOS = {
    "import streamcal": "import streamcal",
    "first prequential (5,000 events)": PREQUENTIAL,
    "river face (2,000 predict + learn)": RIVER,
}


def run(code: str, pythonpath: str) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of ``python -c code``, a whole process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
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
    """A copy of the package with no compiled or cached file: an empty numba cache."""
    where = Path(tempfile.mkdtemp(dir=parent))
    shutil.copytree(ROOT / "streamcal", where / "streamcal", ignore=shutil.ignore_patterns("__pycache__"))
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
    parser.add_argument("--warm", type=int, default=5, help="warm runs per scenario")
    args = parser.parse_args(argv)
    print(
        f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; medians of {args.cold} cold, {args.warm} warm"
    )
    with tempfile.TemporaryDirectory() as tmp:
        parent = Path(tmp)
        check_copy_is_imported(fresh_copy(parent))
        rows = {}
        for name, code in BASELINES.items():
            rows[name] = (None, median_pair([run(code, tmp) for _ in range(args.warm)]))
        for name, code in SCENARIOS.items():
            cold, warm = [], []
            for _ in range(args.cold):
                where = str(fresh_copy(parent))
                cold.append(run(code, where))
                warm.extend(run(code, where) for _ in range(-(-args.warm // args.cold)))
            rows[name] = (median_pair(cold), median_pair(warm))
    floor = rows["import numpy, numba, river"][1][1]
    print(
        f"{'whole process':38s} {'cold wall':>9s} {'cold CPU':>9s} {'warm wall':>9s} {'warm CPU':>9s} {'warm CPU / imports':>18s}"
    )
    for name, (cold, warm) in rows.items():
        c = f"{cold[0]:9.2f} {cold[1]:9.2f}" if cold else f"{'':9s} {'':9s}"
        print(f"  {name:36s} {c} {warm[0]:9.2f} {warm[1]:9.2f} {warm[1] / floor:17.2f}x")
    print("seconds; 'imports' is the CPU time of `import numpy, numba, river`")


if __name__ == "__main__":
    main()
