"""``streamcal.warmup`` and the install's compile leave nothing to compile for what a service runs next: every face of each
built-in calibrator, at its defaults and with the common options, where the score prior holds and
where the labels refute it (``pip install .`` runs it, so a fresh install's first calls load)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])

WORKLOAD = """
import importlib, json, pickle, pkgutil, sys
import numba
import numpy as np
import streamcal
import streamcal._kernels
from streamcal._registry import builtin_calibrator


def compiled():
    out = {}
    for info in pkgutil.iter_modules(streamcal._kernels.__path__):
        mod = importlib.import_module(f"streamcal._kernels.{info.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.signatures:
                out[f"{info.name}.{name}"] = len(obj.signatures)
    return out


from streamcal._precompile import PARTS, compile_part

for part in PARTS:  # the install's two halves
    compile_part(part)
before = compiled()
methods = [m for part in PARTS for m in PARTS[part] if m != "raw"]
rng = np.random.default_rng(5)
s = rng.uniform(0.001, 0.999, size=400)
s[::37] = 0.0  # scores at the ends of the range, as river's datasets hold them
s[::41] = 1.0
t = np.arange(s.size, dtype=float)
streams = (rng.uniform(size=s.size) < s, rng.uniform(size=s.size) < 1.0 - s)  # the prior holds; refuted
for cls, labels in [(builtin_calibrator(m), y) for m in methods for y in streams]:
    options = [{}, {"window": 200}, {"window": "1h"}, {"score_key": "score"}]
    if hasattr(cls(), "refit_every"):
        options += [{"refit_every": 25}, {"window": 150, "refit_every": 40}]
    for kw in options:
        times = t if kw.get("window") == "1h" else None
        cal = cls(**kw)
        for i in range(s.size):
            x = {"score": float(s[i])}
            if "score_key" in kw:
                x["other"] = 1.0
            cal.predict_proba_one(x)
            w = 1.0 if i % 3 else float(rng.uniform(0.5, 1.5))  # fractional weights now and then
            cal.learn_one(x, bool(labels[i]), w=w, **({} if times is None else {"t": float(times[i])}))
            if i % 50 == 0:
                cal.predict_llr_one(x)
        cal = pickle.loads(pickle.dumps(cal))
        cal.predict_proba_one(x)
        arrays = cls(**kw)
        arrays.prequential(s, labels, times=times)
        arrays.update(s, labels, times=None if times is None else times + s.size)
        arrays.predict_proba(s)
        arrays.predict_llr(s)
# keyed PAV, a key per campaign
keys = [f"c{k}" for k in rng.integers(0, 30, size=s.size)]
labels = streams[1]
for window in (None, 150, "1h"):
    times = t if window == "1h" else None
    keyed = streamcal.KeyedCalibrator(streamcal.PAVCalibrator(window=window))
    keyed.prequential(keys, s, labels, times=times)
    keyed.predict_proba(keys, s)
    for i in range(s.size):
        x = {"key": keys[i], "score": float(s[i])}
        keyed.predict_proba_one(x)
        keyed.learn_one(x, bool(labels[i]), **({} if times is None else {"t": float(times[i]) + s.size}))
    pickle.loads(pickle.dumps(keyed)).predict_llr(keys, s)
# pairwise coupling of three classes
scores = rng.dirichlet(np.ones(3), size=s.size)
classes = (scores.cumsum(axis=1) < rng.uniform(size=(s.size, 1))).sum(axis=1)
coupled = streamcal.PairwiseCouplingCalibrator(classes=(0, 1, 2))
coupled.prequential(scores, classes)
coupled.predict_proba(scores)
coupled = streamcal.PairwiseCouplingCalibrator()
for row, label in zip(scores, classes, strict=True):
    x = dict(enumerate(row.tolist()))
    coupled.predict_proba_one(x)
    coupled.learn_one(x, int(label))
print(json.dumps({"before": before, "after": compiled()}))
"""


def test_after_the_installs_compile_the_common_calls_compile_nothing(tmp_path):
    """The install's compile (``streamcal._precompile``, both halves), then every built-in
    calibrator's common calls and the wrappers' (keyed PAV, pairwise coupling), in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "STREAMCAL_INTERPRETED_EVENTS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", WORKLOAD], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout.splitlines()[-1])
    assert counts["before"], "the compile compiled or loaded no kernel"
    added = {name: n for name, n in counts["after"].items() if counts["before"].get(name, 0) != n}
    assert not added, f"compiled after the install's compile: {sorted(added)}"
