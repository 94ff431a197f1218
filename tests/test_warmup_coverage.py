"""``streamcal.warmup`` compiles (or loads) what a service's river loop then runs.

A probe process warms the map-fitting calibrators up, then runs their river face with
``refit_every`` set (the lock-free calls between refits, the refits, an LLR now and then,
fractional weights) and reports every kernel that gained a compiled signature after the warm-up:
none may. The probe reads numba's cache where it has one, so it takes seconds, not a compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import streamcal

pytestmark = pytest.mark.slow  # a process that loads (or compiles) three methods' kernels

PROBE = """
import importlib
import json
import pkgutil
import sys

import numba
import numpy as np

import streamcal
import streamcal._kernels
from streamcal.windows import CountWindow


def compiled():
    out = {}
    for info in pkgutil.iter_modules(streamcal._kernels.__path__):
        mod = importlib.import_module(f"streamcal._kernels.{info.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
                if obj.signatures:
                    out[f"{info.name}.{name}"] = len(obj.signatures)
    return out


streamcal.warmup("ispline,gev,platt")
before = compiled()
rng = np.random.default_rng(1)
for cls in (streamcal.ISplineCalibrator, streamcal.GEVCalibrator, streamcal.PlattCalibrator):
    cal = cls(window=CountWindow(500), refit_every=100)
    for i in range(1_500):
        x = {"score": float(rng.uniform(0.01, 0.99))}
        cal.predict_proba_one(x)
        if i % 50 == 0:
            cal.predict_llr_one(x)
        cal.learn_one(x, bool(rng.uniform() < 0.3), w=float(rng.uniform(0.5, 1.5)) if i % 3 == 0 else 1.0)
after = compiled()
print(json.dumps({"before": before, "after": after}))
"""


def test_warmup_covers_the_river_face_between_refits():
    root = str(Path(streamcal.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=root, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.splitlines()[-1])
    before, after = probe["before"], probe["after"]
    assert {"deferred_face.glm_learn_marked", "deferred_face.glm_proba_marked"} <= before.keys()
    assert {"deferred_face.hist_learn_marked", "deferred_face.ispline_proba_marked"} <= before.keys()
    gained = {name: n for name, n in after.items() if before.get(name, 0) != n}
    assert not gained
