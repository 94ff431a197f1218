"""The two tiers of kernels (``streamcal._kernels._config``): interpreted first, compiled after.

A process's first small calls run the kernels' Python source without numba; the first call the
allowance does not cover switches the process to compiled kernels. Both tiers must give the
same bits, and the switch must happen where the allowance says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import streamcal
from streamcal._kernels import _config

HERE = Path(__file__).resolve().parent
ROOT = str(Path(streamcal.__file__).resolve().parents[1])


def _python(code: str, tmp_path, allowance: str | None = None, **env_extra) -> dict:
    """Run ``code`` in a fresh interpreter (with its numba cache in ``tmp_path`` unless told);
    its last line of output is JSON."""
    env = {**os.environ, **env_extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, str(HERE), env.get("PYTHONPATH")]))
    env.pop("STREAMCAL_INTERPRETED_EVENTS", None)
    if allowance is not None:
        env["STREAMCAL_INTERPRETED_EVENTS"] = allowance
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def interpreted_results(tmp_path_factory):
    """Every case of ``tier_cases`` run in a fresh process that never leaves the interpreted tier."""
    out = tmp_path_factory.mktemp("tiers") / "interpreted.npz"
    code = f"""
    import json, runpy, sys
    sys.argv = ["tier_cases.py", {str(out)!r}]
    runpy.run_path({str(HERE / "tier_cases.py")!r}, run_name="__main__")
    print(json.dumps(True))
    """
    _python(code, out.parent, allowance=str(10**12))
    with np.load(out) as data:
        return {key: data[key] for key in data.files}


def test_the_interpreted_tier_never_imports_numba(interpreted_results):
    assert not bool(interpreted_results["numba imported"])


def test_both_tiers_give_the_same_bits(interpreted_results):
    """Every output of every face (prequential, update, predict, the river face) and every array
    of the saved state, for each window kind, weight kind, map and bucket layout."""
    import tier_cases

    _config.use_compiled_kernels()
    compiled = tier_cases.run_all()
    interpreted = {k: v for k, v in interpreted_results.items() if k != "numba imported"}
    assert compiled.keys() == interpreted.keys()
    differ = [
        key
        for key in compiled
        if compiled[key].shape != interpreted[key].shape
        or not np.array_equal(tier_cases.bits(compiled[key]), tier_cases.bits(interpreted[key]))
    ]
    assert not differ, differ[:10]
    # the cases reach the edges where Python and numba arithmetic could part: the exact map's 0
    # and 1, weights of 1e30 (beyond int64, where ``math.floor`` would differ)
    exact = [v for k, v in compiled.items() if k.startswith("exact-map|") and "_p" in k]
    assert any(((v == 0.0) | (v == 1.0)).any() for v in exact)
    huge = [v for k, v in compiled.items() if k.startswith("few-logit-buckets|") and k.endswith("state._sf")]
    assert all(v.max() >= 1e30 for v in huge)
    assert huge
    assert len(compiled) > 400


def test_the_cases_run_in_both_tiers_inside_one_process():
    """``interpreting()`` (for tests) forces the array faces interpreted in a compiled process:
    the same bits again, for one case of each window kind."""
    import tier_cases

    _config.use_compiled_kernels()
    for name in ("count/whole", "decay-time/fractional", "exact-map"):
        case = tier_cases.cases()[name]
        s, y, w, t = tier_cases.stream(case, 3)
        window = case["params"].get("window")
        times = t if window is not None and window.uses_times else None
        a = streamcal.PAVCalibrator(**case["params"]).prequential(s, y, weights=w, times=times)
        with _config.interpreting():
            b = streamcal.PAVCalibrator(**case["params"]).prequential(s, y, weights=w, times=times)
        for x, z in zip(a, b, strict=True):
            assert np.array_equal(tier_cases.bits(x), tier_cases.bits(z)), name


SWITCH = """
import json, sys
import numpy as np
from streamcal import PAVCalibrator
from streamcal._kernels import _config

rng = np.random.default_rng(0)
s = rng.uniform(size=30_000)
y = rng.uniform(size=30_000) < s
cal = PAVCalibrator(window=5_000)
seen = []
p1, l1 = cal.prequential(s[:2_000], y[:2_000])
seen.append(["numba" in sys.modules, _config.is_compiled()])
p2, l2 = cal.prequential(s[2_000:], y[2_000:])
seen.append(["numba" in sys.modules, _config.is_compiled()])
river = []
for v, label in zip(s[:500].tolist(), y[:500].tolist()):
    river.append(cal.predict_proba_one({"score": v})[True])
    cal.learn_one({"score": v}, label)
print(json.dumps({"seen": seen, "p": np.concatenate([p1, p2]).tolist(), "llr": np.concatenate([l1, l2]).tolist(),
                  "river": river}))
"""


def test_the_first_call_the_allowance_does_not_cover_switches_the_process(tmp_path):
    default = _python(SWITCH, tmp_path)
    assert default["seen"] == [[False, False], [True, True]]
    always = _python(SWITCH, tmp_path, allowance="0")
    assert always["seen"] == [[True, True], [True, True]]
    assert default["p"] == always["p"]
    assert default["llr"] == always["llr"]
    assert default["river"] == always["river"]


RIVER_SWITCH = """
import json, sys
import numpy as np
from streamcal import PAVCalibrator
from streamcal._kernels import _config

rng = np.random.default_rng(1)
cal = PAVCalibrator(window=300)
out, switched_at = [], None
for i in range(1_500):
    v = float(rng.uniform())
    out.append(cal.predict_proba_one({"score": v})[True])
    out.append(cal.predict_llr_one({"score": v}))
    cal.learn_one({"score": v}, bool(rng.uniform() < v))
    if switched_at is None and _config.is_compiled():
        switched_at = i
print(json.dumps({"out": out, "switched_at": switched_at, "types": sorted({type(v).__name__ for v in out})}))
"""


def test_the_river_face_switches_mid_stream_without_a_seam(tmp_path):
    """Each river-face call takes one event of the allowance; the event after the last one the
    allowance covers runs compiled, and the stream's answers are those of an all-compiled run."""
    mixed = _python(RIVER_SWITCH, tmp_path, allowance="1000")
    compiled = _python(RIVER_SWITCH, tmp_path, allowance="0")
    assert mixed["switched_at"] == 333  # three calls an event: the 1,001st call is event 333's
    assert compiled["switched_at"] == 0
    assert mixed["out"] == compiled["out"]
    assert mixed["types"] == ["float"]  # Python floats in both tiers


@pytest.mark.parametrize("allowance", [10**9, 3_000])
def test_threads_lose_no_event_in_the_interpreted_tier_or_at_the_switch(tmp_path, allowance):
    """The lock-free river face relies on each entry point being indivisible: interpreted,
    they hold one lock for their whole run, and the switch to compiled ones waits for the last.
    Four threads learning at once, staying interpreted or switching in the middle, lose
    nothing, and the state passes the bit-for-bit rebuild check of loading."""
    code = """
    import json, sys, threading, pickle
    import numpy as np
    from streamcal import PAVCalibrator

    cal = PAVCalibrator()
    def learn(seed):
        rng = np.random.default_rng(seed)
        for v in rng.uniform(size=1_500).tolist():
            cal.learn_one({"score": v}, v > 0.5)
            cal.predict_proba_one({"score": v})
    def arrays(seed):
        rng = np.random.default_rng(seed)
        for _ in range(20):
            s = rng.uniform(size=50)
            cal.update(s, s > 0.5)
    threads = [threading.Thread(target=learn, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=arrays, args=(9,)))
    sys.setswitchinterval(1e-6)
    for th in threads: th.start()
    for th in threads: th.join()
    again = pickle.loads(pickle.dumps(cal))  # loading rebuilds the blocks and compares them
    print(json.dumps([cal.n_learned, "numba" in sys.modules, again.n_learned]))
    """
    n, numba_loaded, n_again = _python(code, tmp_path, allowance=str(allowance))
    assert n == n_again == 3 * 1_500 + 20 * 50
    assert numba_loaded == (allowance < 10_000)


@pytest.mark.parametrize("first_call", ["learn_one", "predict_proba_one", "prequential", "warmup"])
def test_numba_is_first_imported_under_the_switchs_lock(tmp_path, first_call):
    """Two threads importing numba at once can each meet the other's half-initialised modules
    (an ``AttributeError`` that kills a learning thread at the switch), so every route to the
    compiled tier imports numba first inside the switch's lock, where one thread at a time runs."""
    code = f"""
    import importlib.abc, json, sys
    from streamcal._kernels import _config

    seen = []

    class Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "numba":
                seen.append(_config._SWITCH.locked())
            return None

    sys.meta_path.insert(0, Watch())
    import numpy as np
    import streamcal
    from streamcal import PAVCalibrator

    cal = PAVCalibrator()
    call = {first_call!r}
    if call == "learn_one":
        cal.learn_one({{"score": 0.3}}, True)
    elif call == "predict_proba_one":
        cal.predict_proba_one({{"score": 0.3}})
    elif call == "prequential":
        cal.prequential(np.linspace(0.01, 0.99, 50), np.arange(50) % 2 == 0)
    else:
        streamcal.warmup("pav")
    print(json.dumps([seen, _config.is_compiled()]))
    """
    seen, compiled = _python(code, tmp_path, allowance="0")
    assert compiled
    assert seen == [True]


def test_a_bad_allowance_is_refused_with_its_name(tmp_path):
    env = {**os.environ, "STREAMCAL_INTERPRETED_EVENTS": "lots", "PYTHONPATH": ROOT}
    code = "import numpy as np; from streamcal import PAVCalibrator; PAVCalibrator().predict_proba([0.5])"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "STREAMCAL_INTERPRETED_EVENTS='lots'" in result.stderr
    assert "whole number of events" in result.stderr


def test_numba_math_stands_in_where_python_math_raises():
    m = _config._NUMBA_MATH
    assert m.log(0.0) == -np.inf
    assert np.isnan(m.log(-1.0))
    assert m.log(np.inf) == np.inf
    assert m.log1p(-1.0) == -np.inf
    assert np.isnan(m.log1p(-2.0))
    assert m.exp(1000.0) == np.inf
    assert np.isnan(m.sqrt(-1.0))
    assert m.floor(2.5) == 2
    assert m.floor(-2.5) == -3
    assert m.floor(1e300) == m.floor(np.inf) == m.floor(np.nan) == -(2**63)  # x86-64's integer indefinite
    assert m.log(2.0) == np.log(2.0)
    assert m.pi == np.pi


def test_kernels_are_dispatchers_after_the_switch():
    from streamcal._kernels import histogram, ipav

    _config.use_compiled_kernels()
    import numba

    assert isinstance(ipav.pav_prequential_inplace, numba.core.registry.CPUDispatcher)
    assert isinstance(histogram.check_bucket_index, numba.core.registry.CPUDispatcher)
    # the interpreted functions stay reachable from the dispatchers
    f = _config.interpreted(ipav.pav_prequential_inplace)
    assert f.__code__ is ipav.pav_prequential_inplace.py_func.__code__
    assert f.__globals__["pav_learn_one_inplace"] is _config.interpreted(ipav.pav_learn_one_inplace)
    assert f.__globals__["math"] is _config._NUMBA_MATH


WARMED = """
import json
import numba
import numpy as np
import streamcal
from streamcal import PAVCalibrator
from streamcal._kernels import histogram, ipav


def compiled():
    return {
        f"{mod.__name__}.{name}": len(obj.signatures)
        for mod in (histogram, ipav)
        for name, obj in vars(mod).items()
        if isinstance(obj, numba.core.registry.CPUDispatcher)
    }


streamcal.warmup()
before = compiled()
rng = np.random.default_rng(2)
s = rng.uniform(size=50_000)
y = rng.uniform(size=50_000) < s
for window, times in ((100_000, None), ("1h", np.arange(50_000.0))):
    cal = PAVCalibrator(window=window)
    cal.prequential(s, y, times=times)
    cal.update(s[:10], y[:10], times=None if times is None else times[-1] + np.arange(10.0))
    cal.predict_proba(s)
    cal.predict_llr(s)
    for v in s[:100].tolist():
        cal.predict_proba_one({"score": v})
        cal.predict_llr_one({"score": v})
        cal.learn_one({"score": v}, v > 0.5, t=None if times is None else 1e6)
print(json.dumps({"before": before, "after": compiled()}))
"""


def test_warmup_compiles_every_kernel_the_pav_faces_use(tmp_path):
    """After ``streamcal.warmup()`` no PAV call compiles anything more: the array faces, the river
    face, count and time windows."""
    result = _python(WARMED, tmp_path)
    assert result["before"]["streamcal._kernels.ipav.pav_prequential_inplace"] == 1
    assert result["after"] == result["before"]


def test_warmup_refuses_an_unknown_method():
    with pytest.raises(ValueError, match=r"`methods` must name methods among pav, ispline, gev, platt, venn-abers; got 'svm' at position 1"):
        streamcal.warmup("pav,svm")


# streaming PAV's tests of exactness (incremental == batch after every event, the finite map),
# windows, limits, threads, merging and the river face
INTERPRETED_SUITES = (
    "tests/test_streaming_pav.py",
    "tests/test_threads.py",
    "tests/test_numeric_limits.py",
    "tests/test_predict_one.py",
    "tests/test_windows.py",
    "tests/test_merge.py",
)


@pytest.mark.slow
def test_the_pav_test_files_pass_with_every_stated_call_interpreted(tmp_path):
    """Those test files again, in a fresh process where every call that states its events runs
    interpreted (``STREAMCAL_TEST_FORCE_INTERPRETED``, read by ``conftest.py``); the kernel-level
    tests that call kernels directly run compiled there, as everywhere."""
    env = {**os.environ, "STREAMCAL_TEST_FORCE_INTERPRETED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist"]
    result = subprocess.run(
        [*command, *INTERPRETED_SUITES], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout.splitlines()[-1]


def test_decay_factors_have_the_compiled_bits_when_interpreted():
    """Compiled, ``math.pow(2.0, x)`` is the C library's ``exp2`` (LLVM rewrites a power of the
    constant 2.0), which differs from Python's ``pow`` in the last bit for about one argument in a
    thousand: the interpreted tier computes the decay windows' factors by ``exp2`` too."""
    from streamcal._kernels import histogram as h

    _config.use_compiled_kernels()
    x = np.random.default_rng(0).uniform(-60.0, 70.0, size=20_000)
    x[:3] = (-1e4, 1e4, np.nan)
    sf = np.zeros(h.SF_HEADER)
    sf[h.SF_HALF_LIFE] = 1.0
    kind = np.int64(h.KIND_DECAY_EVENTS)
    compiled, interpreted = np.empty(x.size), np.empty(x.size)
    for i, v in enumerate(x):
        sf[h.SF_LAST_T] = v
        compiled[i] = h.stored_unit(sf, kind)
        interpreted[i] = _config.interpreted(h.stored_unit)(sf, kind)
    assert np.array_equal(tier_cases_bits(compiled), tier_cases_bits(interpreted))
    assert (np.array([2.0**v for v in x[3:].tolist()]) != compiled[3:]).sum() > 0  # the hazard is real here


def test_the_kernels_raise_only_the_constant_2_to_a_power_by_math_pow():
    """The interpreted ``math.pow`` gives ``exp2``'s bits for the base 2.0, as LLVM compiles a
    constant base of 2.0; a variable base would not be rewritten so, and the tiers could differ."""
    import re

    sources = Path(streamcal.__file__).parent.glob("_kernels/*.py")
    calls = [m.group(0) for p in sources if p.name != "_config.py" for m in re.finditer(r"math\.pow\([^,]*,", p.read_text())]
    assert calls
    assert set(calls) == {"math.pow(2.0,"}


LONG_DECAY = """
import json
import numpy as np
from streamcal import PAVCalibrator
from streamcal._kernels import _config
from streamcal.buckets import LogitGrid
from streamcal.windows import Decay

rng = np.random.default_rng(2)
z = rng.normal(-3.0, 1.5, size=3_000)
s = 1.0 / (1.0 + np.exp(-z))
y = rng.uniform(size=s.size) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
cal = PAVCalibrator(buckets=LogitGrid(1024), window=Decay(half_life=1000.0 * np.log(2.0)), prior=None)
p = np.concatenate([cal.prequential(s[a:b], y[a:b])[0] for a, b in ((0, 7), (7, 1_500), (1_500, 3_000))])
print(json.dumps({"compiled": _config.is_compiled(), "p": p.view(np.int64).tolist()}))
"""


def test_a_long_decayed_stream_gives_the_same_bits_in_both_tiers(tmp_path):
    """A decay window of about a thousand events on 1,024 buckets, 3,000 events, in a process that
    stays interpreted and in one compiled from the start: 21 of its probabilities differ in the
    last bit where the interpreted tier computes the decay factors by Python's ``pow``."""
    interpreted = _python(LONG_DECAY, tmp_path, allowance=str(10**12))
    compiled = _python(LONG_DECAY, tmp_path, allowance="0")
    assert (interpreted["compiled"], compiled["compiled"]) == (False, True)
    assert interpreted["p"] == compiled["p"]


def tier_cases_bits(a: np.ndarray) -> np.ndarray:
    import tier_cases

    return tier_cases.bits(a)


def test_the_score_priors_refits_are_charged_to_the_allowance():
    """A call is charged its events plus a sweep's worth (buckets / 8) for each refit of the score
    prior's strength it may reach on the kernels' schedule (after 1, 2, 3, ... events, a quarter
    more each time); without a prior, its events alone."""
    import math

    from streamcal import _prior

    assert _prior.refresh_charge(math.inf, 0, 500, 1024) == 500
    # a fresh calibrator's first 4 events reach the refits at 1, 2, 3 and 4
    assert _prior.refresh_charge(1.0, 0, 4, 1024) == 4 + 4 * 128
    # far from its next refit, a long-lived one's small call is charged its events
    assert _prior.refresh_charge(1e6, 20_000, 10, 1024) == 10
    # a long call is charged a bounded extra
    assert _prior.refresh_charge(1.0, 0, 10**9, 1024) == 10**9 + 64 * 128


KEYED_SMALL_KEYS = """
import json, sys
import numpy as np
from streamcal import KeyedCalibrator, VennAbersCalibrator

rng = np.random.default_rng(2)
n = 3_000
keys = rng.zipf(1.5, n) % 700  # hundreds of keys of a few events each
s = rng.uniform(0.01, 0.99, n)
y = rng.uniform(size=n) < s
out = KeyedCalibrator(VennAbersCalibrator()).prequential_with_interval(keys, s, y)
print(json.dumps({"numba": "numba" in sys.modules, "out": [o.tolist() for o in out]}))
"""


def test_many_fresh_keys_move_the_process_to_compiled_kernels(tmp_path):
    """Each fresh key of a keyed Venn–Abers calibrator refits its score prior's strength after
    each of its first events, a sweep over every bucket: charged for them, the interpreted tier
    hands such a stream to the compiled kernels early (interpreted throughout, it took 8x the
    compiled run's time), with the same bits."""
    default = _python(KEYED_SMALL_KEYS, tmp_path)
    compiled = _python(KEYED_SMALL_KEYS, tmp_path, allowance="0")
    assert default["numba"]
    assert default["out"] == compiled["out"]
