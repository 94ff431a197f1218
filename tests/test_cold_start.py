"""A first call compiles only the kernels it needs, each once (the cold start).

A fresh install has an empty numba cache, so a first ``prequential`` compiles every kernel it
runs and every helper they call. ``benchmarks/bench_cold_start.py`` times that; these tests pin
down what makes it short, without timing anything: which kernels a first call compiles, and
that none of them is compiled twice (for a literal argument, say).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numba
import pytest

import streamcal
from streamcal._kernels import _config, histogram, ipav

# What a first ``prequential`` compiles today: the array kernels (bucket search, prequential
# loop, finite-LLR refresh, the score prior's strength and augmented row, the resumed sweep's
# checkpoints for fractional weights, the end runs' walks and owner scans) and the helpers they
# call: 41. The five end-run helpers (decayed windows' resume records) added about 0.5-3 s of CPU to
# a cold first ``prequential`` (24.5-27.9 s against 24.0-24.9 s, 2026-11-29). A little room for a
# new helper; a regression (numba's ``inline="always"``, which compiles nothing here but re-types a
# helper at every call site, or kernels compiled once per literal argument, or the river face
# compiled eagerly) lands well outside it.
MAX_FIRST_PREQUENTIAL = 42
# What a first ``learn_one`` and ``predict_proba_one`` then add: two entry points and the few
# helpers only they call (the single-score bucket search).
MAX_RIVER_FACE_EXTRA = 10

# The probe compiles in a fresh process with an empty numba cache: tens of seconds.
pytestmark = pytest.mark.slow

PROBE = """
import json

import numba
import numpy as np

from streamcal import PAVCalibrator
from streamcal._kernels import histogram, ipav


def kernels():
    for mod in (histogram, ipav):
        for name, obj in vars(mod).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
                yield f"{mod.__name__.rsplit('.', 1)[1]}.{name}", obj


def compiled():
    return {name: len(obj.signatures) for name, obj in kernels() if obj.signatures}


def llvm_inlined():
    return sorted(name for name, obj in kernels() if any(c.fndesc.inline for c in obj.overloads.values()))


rng = np.random.default_rng(0)
scores = rng.uniform(size=1000)
PAVCalibrator().prequential(scores, rng.uniform(size=1000) < scores)
after_prequential = compiled()
cal = PAVCalibrator()
cal.learn_one({"score": 0.5}, True)
cal.predict_proba_one({"score": 0.5})
print(json.dumps({"prequential": after_prequential, "river": compiled(), "inlined": llvm_inlined()}))
"""


# Every built-in method once, as ``streamcal demo`` loads them: a small replay (all in this process).
DEMO_PROBE = """
import importlib
import json
import pkgutil
import tempfile
from pathlib import Path

import numba

import streamcal
import streamcal._kernels
from streamcal.replay import generate, replay
from streamcal.replay.methods import available_methods

streamcal.use_compiled_kernels()
with tempfile.TemporaryDirectory() as tmp:
    stream = generate(Path(tmp) / "s.parquet", scenario="drift", n=2_000, seed=0)
    replay(stream, available_methods(), window=50_000, method_options={"refit_every": 1_000}, metrics_window=1_000)
counts = {}
for info in pkgutil.iter_modules(streamcal._kernels.__path__):
    mod = importlib.import_module(f"streamcal._kernels.{info.name}")
    for name, obj in vars(mod).items():
        if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
            if obj.signatures:
                counts[f"{info.name}.{name}"] = [str(s) for s in obj.signatures]
print(json.dumps(counts))
"""


def _probe(code: str, cache_dir) -> dict:
    root = str(Path(streamcal.__file__).resolve().parents[1])
    # allowance 0: the first call compiles (``_config``; ``test_tiers.py`` covers the interpreted tier)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "STREAMCAL_INTERPRETED_EVENTS": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def first_calls(tmp_path_factory):
    """Kernel -> number of compiled signatures in a fresh process with an empty numba cache,
    after a first ``prequential``, then after a first river-face ``learn_one`` and
    ``predict_proba_one``; and the kernels compiled for LLVM to inline (``alwaysinline``)."""
    return _probe(PROBE, tmp_path_factory.mktemp("numba_cache"))


def test_a_first_prequential_compiles_no_river_face_kernel(first_calls):
    compiled = first_calls["prequential"]
    assert "ipav.pav_prequential_inplace" in compiled  # the probe did compile
    river = {"ipav.pav_learn_packed_inplace", "ipav.pav_predict_packed", "ipav.pav_llr_packed"}
    assert not river & compiled.keys()


def test_a_first_prequential_compiles_few_kernels(first_calls):
    compiled = first_calls["prequential"]
    assert len(compiled) <= MAX_FIRST_PREQUENTIAL, sorted(compiled)


def test_the_river_face_compiles_its_entry_points_on_first_use_only(first_calls):
    before, after = first_calls["prequential"], first_calls["river"]
    added = after.keys() - before.keys()
    assert {"ipav.pav_learn_packed_inplace", "ipav.pav_predict_packed"} <= added
    assert "ipav.pav_llr_packed" not in after  # no LLR was asked for
    assert len(added) <= MAX_RIVER_FACE_EXTRA, sorted(added)


def test_every_kernel_is_compiled_once(first_calls):
    """One signature per kernel: no version per literal argument, per int/float or per array
    layout."""
    twice = {name: n for name, n in first_calls["river"].items() if n != 1}
    assert not twice


def test_every_method_compiles_each_kernel_once(tmp_path_factory):
    """A replay of every built-in method (what ``streamcal demo`` loads) compiles each kernel for
    one signature: no callee compiled again for a literal argument (``f(x, 0)``, ``True``) or for
    a loop counter's literal start, which a first typing pass sees alone (``_config``)."""
    compiled = _probe(DEMO_PROBE, tmp_path_factory.mktemp("numba_cache_demo"))
    assert {"ipav.pav_process_inplace", "glm_refit.moments_solve", "ispline.nnls_sum_capped_gram_warm"} <= compiled.keys()
    twice = {name: sigs for name, sigs in compiled.items() if len(sigs) != 1}
    assert not twice


def test_helpers_are_inlined_by_llvm_not_by_numba():
    """numba's ``inline="always"`` copies and re-types a helper at each call site; the kernels
    use LLVM's inlining (``forceinline``) instead, except where a helper returns a view of an
    array (``_config``)."""
    _config.use_compiled_kernels()  # the kernels are numba dispatchers from here on
    numba_inlined = {
        f"{mod.__name__}.{name}"
        for mod in (histogram, ipav)
        for name, obj in vars(mod).items()
        if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.targetoptions.get("inline", "never") != "never"
    }
    assert numba_inlined == {"streamcal._kernels.ipav._map_section"}
    llvm_inlined = [obj for obj in vars(ipav).values() if getattr(obj, "targetoptions", {}).get("forceinline")]
    assert ipav.pav_learn_one_inplace in llvm_inlined


def test_only_the_per_event_helpers_are_inlined(first_calls):
    """The rare paths stay calls: a kernel called from an inlined helper does not inherit its
    ``forceinline`` (numba passes unset options down to callees; ``_config`` sets it)."""
    inlined = set(first_calls["inlined"])
    assert {"ipav.pav_learn_one_inplace", "ipav.pav_bucket_delta_inplace", "histogram.window_add_inplace"} <= inlined
    called = {
        "ipav._resweep_inplace",
        "ipav.pav_refresh_extremes_inplace",
        "ipav._fill_gap",
        "ipav.pav_prequential_inplace",
    }
    assert called <= first_calls["river"].keys()
    assert not called & inlined
