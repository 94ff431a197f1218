"""KeyedCalibrator's river face: its lean single-event path gives the array face's outputs and
states bit for bit, and a refused event changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import streamcal
from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow


def keyed_stream(n: int, n_keys: int, seed: int):
    rng = np.random.default_rng(seed)
    keys = rng.zipf(1.3, size=n) % n_keys
    z = rng.normal(-1.0, 1.5, size=n)
    shift = rng.normal(0.0, 0.7, size=n_keys)
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(z + shift[keys])))
    s = 1.0 / (1.0 + np.exp(-z))
    w = np.where(rng.uniform(size=n) < 0.2, rng.uniform(0.0, 3.0, size=n), 1.0)
    t = np.cumsum(rng.exponential(1.0, size=n))
    return keys, s, y, w, t


def river_loop(cal, names, s, y, w, t=None):
    """The river face's prequential loop: ``(proba, llr)`` before each event, then the event."""
    p = np.empty(s.size)
    llr = np.empty(s.size)
    for i in range(s.size):
        x = {"key": names[i], "score": float(s[i]) if i % 2 else s[i]}  # a float, a numpy float64
        proba = cal.predict_proba_one(x)
        p[i] = proba[True]
        llr[i] = cal.predict_llr_one(x)
        assert type(proba[True]) is float
        assert type(cal.predict_llr_one(x)) is float
        cal.learn_one(x, bool(y[i]), float(w[i]), None if t is None else float(t[i]))
    return p, llr


DECAY = Decay(half_life=400)
COUNT = CountWindow(300)
CASES = {
    "decay, auto": {"calibrator": PAVCalibrator(window=DECAY)},
    "count, auto": {"calibrator": PAVCalibrator(window=COUNT)},
    "defaults": {},
    "count, 0": {"calibrator": PAVCalibrator(window=COUNT, prior=None), "prior_strength": 0},
    "decay, 0": {"calibrator": PAVCalibrator(window=DECAY, prior=None), "prior_strength": 0},
    "decay, 30": {"calibrator": PAVCalibrator(window=DECAY), "prior_strength": 30},
    "count, 30": {"calibrator": PAVCalibrator(window=COUNT), "prior_strength": 30},
    "max_keys, auto": {"calibrator": PAVCalibrator(window=COUNT), "max_keys": 6},
    "max_keys, 0": {"calibrator": PAVCalibrator(window=DECAY, prior=None), "prior_strength": 0, "max_keys": 4},
    "time window": {"calibrator": PAVCalibrator(window=TimeWindow(200.0))},
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kind", [int, str])
def test_the_river_face_equals_the_array_face_bit_for_bit(case, kind):
    keys, s, y, w, t = keyed_stream(3000, 40, seed=len(case))
    names = [kind(k) if kind is int else f"k{k}" for k in keys.tolist()]
    times = t if case == "time window" else None
    arr = KeyedCalibrator(**CASES[case])
    p, llr = arr.prequential(np.array(names), s, y, weights=w, times=times)
    one = KeyedCalibrator(**CASES[case])
    rp, rl = river_loop(one, names, s, y, w, times)
    assert np.array_equal(p, rp)
    assert np.array_equal(llr, rl)
    assert one.keys() == arr.keys()
    assert (one.n_keys, one.evictions, one.n_learned, one.strength) == (arr.n_keys, arr.evictions, arr.n_learned,
                                                                         arr.strength)
    if "max_keys" in case:
        assert one.evictions > 0
    grid = np.linspace(0.01, 0.99, 41)
    learned = one.keys()
    for key in learned:
        mine, theirs = one.export_key(key), arr.export_key(key)
        assert mine.keys() == theirs.keys()
        for name in mine:
            assert np.array_equal(mine[name], theirs[name]), (key, name)
        assert one.key_shift(key) == arr.key_shift(key)
        assert np.array_equal(one.predict_llr([key] * grid.size, grid), arr.predict_llr([key] * grid.size, grid))
    assert streamcal.persist.to_bytes(one.global_calibrator) == streamcal.persist.to_bytes(arr.global_calibrator)


def test_a_refused_event_changes_nothing_and_names_the_river_faces_arguments():
    cal = KeyedCalibrator()
    keys, s, y, _w, _t = keyed_stream(500, 5, seed=3)
    for k, score, label in zip(keys.tolist(), s.tolist(), y.tolist(), strict=True):
        cal.learn_one({"key": k, "score": score}, label)
    before = streamcal.persist.to_bytes(cal)
    n_keys = cal.n_keys
    for x, w, error, match in [
        ({"key": 1, "score": float("nan")}, 1.0, ValueError, r"^`x\['score'\]` must be finite; got nan\.$"),
        ({"key": 99, "score": float("inf")}, 1.0, ValueError, r"^`x\['score'\]` must be finite; got inf\.$"),
        ({"key": 99, "score": 1.5}, 1.0, ValueError, r"^`x\['score'\]` must hold probabilities in \[0, 1\]"),
        ({"key": 1, "score": -0.5}, 1.0, ValueError, r"^`x\['score'\]` must hold probabilities in \[0, 1\]"),
        ({"key": 1, "score": 0.5}, float("inf"), ValueError, r"^`w` must be finite and non-negative; got inf\.$"),
        ({"key": 99, "score": 0.5}, -2.0, ValueError, r"^`w` must be finite and non-negative; got -2.0\.$"),
        ({"key": 1, "score": 0.5}, 1e101, ValueError, r"^`w` must be at most 1e\+100"),
        ({"key": "a", "score": 0.5}, 1.0, ValueError, r"^`x\['key'\]` must be of the kind already learned \(int\)"),
        ({"key": True, "score": 0.5}, 1.0, ValueError, r"^`x\['key'\]` must be an int or a string key; got True\.$"),
    ]:
        with pytest.raises(error, match=match):
            cal.learn_one(x, True, w)
        if w == 1.0:
            with pytest.raises(error, match=match):
                cal.predict_proba_one(x)
            with pytest.raises(error, match=match):
                cal.predict_llr_one(x)
    assert cal.n_keys == n_keys
    assert streamcal.persist.to_bytes(cal) == before


def test_a_key_without_a_state_and_a_key_that_has_not_learned_get_the_global_map():
    cal = KeyedCalibrator(prior_strength=0)
    cal.learn_one({"key": "a", "score": 0.2}, True)
    cal.learn_one({"key": "a", "score": 0.7}, False)
    glob = cal.global_calibrator
    for score in (0.1, 0.5, 0.9):
        x = {"key": "new", "score": score}
        assert cal.predict_proba_one(x)[True] == glob.predict_proba_one({"score": score})[True]
        assert cal.predict_llr_one(x) == float(glob.predict_llr(np.array([score]))[0])
    assert "new" not in cal


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16])
def test_a_numpy_columns_items_take_the_lean_path_and_equal_the_array_face(dtype):
    """Keys, labels and weights read item by item from numpy columns (numpy ints, bools, float64s)
    learn on the lean path, with the array face's outputs and keys (Python ints)."""
    keys, s, y, w, _ = keyed_stream(2000, 30, seed=7)
    keys = keys.astype(dtype)
    arr = KeyedCalibrator()
    p, _ = arr.prequential(keys, s, y, weights=w)
    one = KeyedCalibrator()
    general = []  # calls of the general path's operation loop, seen by the profiler hook

    def watch(frame, event, _arg):
        if event == "call" and frame.f_code.co_name == "_run_checked":
            general.append(1)

    rp = np.empty(s.size)
    sys.setprofile(watch)
    try:
        for i in range(s.size):
            x = {"key": keys[i], "score": s[i]}
            rp[i] = one.predict_proba_one(x)[True]
            one.learn_one(x, y[i], w[i])
    finally:
        sys.setprofile(None)
    assert np.array_equal(p, rp)
    learned = one.keys()
    assert learned == arr.keys()
    assert all(type(k) is int for k in learned)
    assert len(general) == 0, len(general)


class GeneralPathCalls:
    """While active (``with``), counts the general path's operation loops (``_run_checked``) and
    the resizings of a time window's ring (``ensure_ring`` / ``shrink_ring`` returning True), by
    a profiler hook: the tests read no private state."""

    def __init__(self):
        self.general = 0
        self.resized = []

    def __call__(self, frame, event, arg):
        name = frame.f_code.co_name
        if event == "call" and name == "_run_checked":
            self.general += 1
        elif event == "return" and name in ("ensure_ring", "shrink_ring") and arg is True:
            self.resized.append(name)

    def __enter__(self):
        sys.setprofile(self)
        return self

    def __exit__(self, *exc_info):
        sys.setprofile(None)


def as_time(t: float, i: int):
    """Event ``i``'s time ``t`` (a whole number) as a Python float, a numpy float64, a Python
    int or a numpy int64, in turn."""
    return (float(t), np.float64(t), int(t), np.int64(int(t)))[i % 4]


TIMED = {  # times in quarter units below: about 200 events in the window, a half-life of 60 events
    "time window": TimeWindow(800.0),
    "decay by time": Decay(half_life=240.0, by="time"),
}
TIMED_CASES = [
    (window, strength, max_keys)
    for window in TIMED
    for strength, max_keys in (("auto", None), (0, None), (30, None), ("auto", 6), (0, 4), (30, 6))
]


@pytest.mark.parametrize(("window", "strength", "max_keys"), TIMED_CASES)
@pytest.mark.parametrize("kind", [int, str])
def test_events_with_times_take_the_lean_path_and_equal_the_array_face(window, strength, max_keys, kind):
    """Under a time window or decay by time, every event of the river face (times as Python and
    numpy floats and ints, keys evicted under ``max_keys``) learns on the lean path, with the
    array face's outputs, keys and states bit for bit."""
    keys, s, y, w, t = keyed_stream(3000, 40, seed=11)
    t = np.floor(t * 4.0)  # whole numbers (several events share a time), in quarter units
    window = TIMED[window]
    names = [k if kind is int else f"k{k}" for k in keys.tolist()]
    template = PAVCalibrator(window=window, prior=None) if strength == 0 else PAVCalibrator(window=window)
    arr = KeyedCalibrator(template, prior_strength=strength, max_keys=max_keys)
    p, llr = arr.prequential(np.array(names), s, y, weights=w, times=t)
    one = KeyedCalibrator(template, prior_strength=strength, max_keys=max_keys)
    rp = np.empty(s.size)
    rl = np.empty(s.size)
    with GeneralPathCalls() as calls:
        for i in range(s.size):
            x = {"key": names[i], "score": float(s[i]) if i % 2 else s[i]}
            rp[i] = one.predict_proba_one(x)[True]
            rl[i] = one.predict_llr_one(x)
            one.learn_one(x, bool(y[i]), float(w[i]), as_time(t[i], i))
    assert calls.general == 0
    assert np.array_equal(p, rp)
    assert np.array_equal(llr, rl)
    assert one.keys() == arr.keys()
    assert (one.n_keys, one.evictions, one.n_learned, one.strength) == (arr.n_keys, arr.evictions, arr.n_learned,
                                                                         arr.strength)
    assert (one.evictions > 0) == (max_keys is not None)
    learned = one.keys()
    for key in learned:
        mine, theirs = one.export_key(key), arr.export_key(key)
        for name in mine:
            assert np.array_equal(mine[name], theirs[name]), (key, name)
        assert one.key_shift(key) == arr.key_shift(key)
    assert streamcal.persist.to_bytes(one.global_calibrator) == streamcal.persist.to_bytes(arr.global_calibrator)


def test_large_int_times_round_as_the_array_face_rounds_them():
    """Int times beyond 2**53 (nanosecond clocks) on the lean path: rounded to float64 as numpy
    rounds the array face's int64 column."""
    keys, s, y, _w, _t = keyed_stream(600, 5, seed=5)
    rng = np.random.default_rng(5)
    times = 2**62 + np.cumsum(rng.integers(0, 5_000, size=s.size)) * 777 + 1
    assert times.dtype == np.int64
    assert (times.astype(np.float64).astype(np.int64) != times).any()  # some round
    window = TimeWindow(3e5 * 777)
    arr = KeyedCalibrator(PAVCalibrator(window=window))
    p, _ = arr.prequential(keys, s, y, times=times)
    one = KeyedCalibrator(PAVCalibrator(window=window))
    rp = np.empty(s.size)
    with GeneralPathCalls() as calls:
        for i in range(s.size):
            x = {"key": int(keys[i]), "score": float(s[i])}
            rp[i] = one.predict_proba_one(x)[True]
            one.learn_one(x, bool(y[i]), 1.0, int(times[i]) if i % 2 else times[i])
    assert calls.general == 0
    assert np.array_equal(p, rp)
    assert streamcal.persist.to_bytes(one.global_calibrator) == streamcal.persist.to_bytes(arr.global_calibrator)


def ring_stream(seed: int):
    """Events for ``TimeWindow(1023.5)``: 1,500 at one per time unit (from the 1,025th on the
    global ring of 1,024 events is full as each arrives, and its oldest event leaves), then 6,000
    within 100 units (the ring grows), then 700 a few units apart after a gap (it empties and
    shrinks). Under ``TimeWindow(1024.0)`` the oldest event leaves the full ring exactly at the
    window's span, within the margin of the general path's bound: the ring grows there."""
    rng = np.random.default_rng(seed)
    steady = np.arange(1500, dtype=np.float64)
    burst = 1500.0 + np.sort(rng.uniform(0.0, 100.0, size=6000))
    slow = burst[-1] + 1100.0 + 3.0 * np.arange(700)
    t = np.concatenate([steady, burst, slow])
    keys = rng.integers(0, 30, size=t.size)
    s = rng.uniform(0.01, 0.99, size=t.size)
    y = rng.uniform(size=t.size) < s
    return keys, s, y, t


@pytest.mark.parametrize("seconds", [1023.5, 1024.0])
def test_a_time_windows_global_ring_is_resized_on_the_general_path_only(seconds):
    """The events for which the general path grows or shrinks the global map's ring take it; every
    other event (a full ring whose oldest event leaves included) takes the lean path, and the
    calibrator equals, bit for bit, one that learns each event through the array face."""
    keys, s, y, t = ring_stream(0)
    window = TimeWindow(seconds)
    one = KeyedCalibrator(PAVCalibrator(window=window))
    arr = KeyedCalibrator(PAVCalibrator(window=window))
    rp = np.empty(t.size)
    p = np.empty(t.size)
    calls = GeneralPathCalls()
    for i in range(t.size):
        x = {"key": int(keys[i]), "score": float(s[i])}
        with calls:
            rp[i] = one.predict_proba_one(x)[True]
            one.learn_one(x, bool(y[i]), 1.0, float(t[i]))
        p[i] = arr.prequential([int(keys[i])], s[i : i + 1], y[i : i + 1], times=t[i : i + 1])[0][0]
        if i in (1499, 7499):  # the ends of the phases: the same ring, with the same capacity
            assert streamcal.persist.to_bytes(one) == streamcal.persist.to_bytes(arr), i
    assert "ensure_ring" in calls.resized
    assert "shrink_ring" in calls.resized
    assert calls.general == len(calls.resized)
    assert np.array_equal(p, rp)
    assert streamcal.persist.to_bytes(one) == streamcal.persist.to_bytes(arr)
    assert one.global_calibrator.window_histogram.ring_size() == 1024


TIERS = """
import hashlib, json, sys
import numpy as np
import streamcal
from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal._kernels import _config
from streamcal.windows import Decay, TimeWindow
from test_keyed_river import ring_stream

keys, s, y, t = ring_stream(1)
digest = hashlib.sha256()
for window in (TimeWindow(1023.5), Decay(half_life=50.0, by="time")):
    cal = KeyedCalibrator(PAVCalibrator(window=window), max_keys=20)
    for i in range(1300):
        x = {"key": int(keys[i]), "score": float(s[i])}
        digest.update(np.float64(cal.predict_proba_one(x)[True]).tobytes())
        cal.learn_one(x, bool(y[i]), 1.0, float(t[i]))
    digest.update(streamcal.persist.to_bytes(cal))
print(json.dumps({"compiled": _config.is_compiled(), "digest": digest.hexdigest()}))
"""


def test_the_lean_path_with_times_gives_the_same_bits_in_both_tiers(tmp_path):
    """The river face's kernels for events with times, in a process that stays interpreted and in
    one compiled from the start (a full ring whose oldest event leaves, evictions, decay by time)."""
    root = Path(streamcal.__file__).resolve().parents[1]
    runs = []
    for allowance in (str(10**12), "0"):
        env = {**os.environ, "STREAMCAL_INTERPRETED_EVENTS": allowance}
        env["PYTHONPATH"] = os.pathsep.join([str(root), str(Path(__file__).parent)])
        done = subprocess.run([sys.executable, "-c", TIERS], env=env, cwd=tmp_path, capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    assert (runs[0]["compiled"], runs[1]["compiled"]) == (False, True)
    assert runs[0]["digest"] == runs[1]["digest"]


BAD_TIMES = [
    (float("nan"), ValueError, r"^`t` must be finite; got nan\.$"),
    (np.float64("inf"), ValueError, r"^`t` must be finite; got inf\.$"),
    (-float("inf"), ValueError, r"^`t` must be finite; got -inf\.$"),
    (10.0, ValueError, r"^`t` must not go backwards; got 10\.0 after the last learned time 99\.0\.$"),
    (np.int64(98), ValueError, r"^`t` must not go backwards; got 98\.0 after the last learned time 99\.0\.$"),
    ("100", TypeError, r"^`t` must hold real numbers only; got strings"),
    (True, TypeError, r"must hold real numbers only; got bools"),
    (np.timedelta64(100, "s"), TypeError, r"must hold real numbers only; got timedeltas"),
    (None, ValueError, r"needs event times: pass `t=` to learn_one\.$"),
]


@pytest.mark.parametrize("window", [TimeWindow(50.0), Decay(half_life=20.0, by="time"), CountWindow(30)])
def test_a_bad_time_raises_as_before_and_changes_nothing(window):
    cal = KeyedCalibrator(PAVCalibrator(window=window))
    for i in range(100):
        cal.learn_one({"key": i % 3, "score": 0.1 + 0.008 * i}, bool(i % 2), 1.0, float(i))
    before = streamcal.persist.to_bytes(cal)
    for t, error, match in BAD_TIMES:
        if not window.uses_times and (t is None or (type(t) in (float, np.float64, np.int64) and np.isfinite(t))):
            continue  # a window without times takes no time, or any finite one
        for key in (1, 99):  # a key with a state, a new one
            with pytest.raises(error, match=match):
                cal.learn_one({"key": key, "score": 0.5}, True, 1.0, t)
    assert streamcal.persist.to_bytes(cal) == before
    assert 99 not in cal


def test_a_column_wide_refusal_names_the_river_faces_argument():
    """Refusals the array face words for a whole column (bools given as numbers) name ``t`` and
    ``w`` on the river face, as its other errors do, and change nothing."""
    from streamcal import persist

    cal = KeyedCalibrator(PAVCalibrator(window="1h"))
    cal.learn_one({"key": 1, "score": 0.3}, True, t=5.0)
    before = persist.to_bytes(cal)
    with pytest.raises(TypeError, match=r"^`t` must hold real numbers only; got bools"):
        cal.learn_one({"key": 1, "score": 0.3}, True, t=True)
    with pytest.raises(TypeError, match=r"^`w` must hold real numbers only; got bools"):
        cal.learn_one({"key": 1, "score": 0.3}, True, w=True, t=6.0)
    assert persist.to_bytes(cal) == before
