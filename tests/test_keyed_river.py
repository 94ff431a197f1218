"""KeyedCalibrator's river face: its lean single-event path gives the array face's outputs and
states bit for bit, and a refused event changes nothing."""

from __future__ import annotations

import sys

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
