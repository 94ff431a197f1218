"""When the keyed prior follows the global map: after 1, 2, 4, ... learned events up to the floor
(16,384, or half the global map's span where shorter: a count window's size, a decay by events'
half-life), then every floor or two learned events per key that has learned, whichever is
longer; the same events on both faces and in any split of the calls."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamcal import KeyedCalibrator, PAVCalibrator, PlattCalibrator
from streamcal.windows import CountWindow

EVERY = 1 << 14


def naive_schedule(keys: np.ndarray, pools: bool, window: int | None = None) -> int:
    """The first refresh after the stream ``keys`` (every event learned) under a count window of
    ``window`` events (None: unbounded): the rule walked by hand."""
    floor = EVERY if window is None else min(EVERY, max(1, window // 2))
    refresh = 1
    while refresh <= keys.size:
        if refresh < floor:
            refresh *= 2
        else:
            learned = np.unique(keys[:refresh]).size if pools else 0
            refresh += max(floor, 2 * learned)
    return refresh


def many_keys(n: int, n_keys: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, n_keys, size=n)
    s = rng.uniform(0.01, 0.99, size=n)
    y = rng.uniform(size=n) < s
    return keys, s, y


@pytest.mark.parametrize(("strength", "n_keys"), [("auto", 20_000), (50.0, 30_000), (0.0, 20_000), ("auto", 300)])
def test_refreshes_space_out_with_the_keys_that_learned(strength, n_keys):
    keys, s, y = many_keys(60_000, n_keys)
    # at strength 0 a template with the score prior keeps a clone per key: prior=None keeps sparse rows
    template = PAVCalibrator(window=CountWindow(200), **({"prior": None} if strength == 0.0 else {}))
    cal = KeyedCalibrator(template, prior_strength=strength)
    cal.prequential(keys, s, y)
    expected = naive_schedule(keys, pools=strength != 0.0, window=200)
    assert cal.__getstate__()["_next_refresh"] == expected
    if strength != 0.0:
        assert expected != naive_schedule(keys, pools=False, window=200)  # the keys set the spacing here
    # unbounded, the floor is 16,384
    cal = KeyedCalibrator(PAVCalibrator(**({"prior": None} if strength == 0.0 else {})), prior_strength=strength)
    cal.prequential(keys, s, y)
    assert cal.__getstate__()["_next_refresh"] == naive_schedule(keys, pools=strength != 0.0)


def test_both_faces_and_any_split_refresh_at_the_same_events():
    keys, s, y = many_keys(40_000, 20_000, seed=3)  # a keys-spaced refresh at about 38,800 events
    assert naive_schedule(keys[:39_000], pools=True, window=50) != naive_schedule(keys[:39_000], pools=False, window=50)
    whole = KeyedCalibrator(PAVCalibrator(window=CountWindow(50)))
    p, llr = whole.prequential(keys, s, y)
    parts = KeyedCalibrator(PAVCalibrator(window=CountWindow(50)))
    cuts = [0, 7, 16_384, 16_385, 25_000, 38_000, 40_000]
    pp = np.concatenate([parts.prequential(keys[a:b], s[a:b], y[a:b])[0] for a, b in itertools.pairwise(cuts)])
    assert np.array_equal(p, pp)
    one = KeyedCalibrator(PAVCalibrator(window=CountWindow(50)))
    rp = np.empty(s.size)
    rl = np.empty(s.size)
    for i in range(s.size):
        x = {"key": int(keys[i]), "score": float(s[i])}
        rp[i] = one.predict_proba_one(x)[True]
        rl[i] = one.predict_llr_one(x)
        one.learn_one(x, bool(y[i]))
    assert np.array_equal(p, rp)
    assert np.array_equal(llr, rl)
    assert whole.__getstate__()["_next_refresh"] == one.__getstate__()["_next_refresh"]
    assert whole.__getstate__()["_next_refresh"] == naive_schedule(keys, pools=True, window=50)


def test_templates_with_clones_per_key_follow_the_same_schedule():
    keys, s, y = many_keys(36_000, 12_000, seed=3)  # a keys-spaced refresh at about 34,200 events
    assert naive_schedule(keys[:34_000], pools=True) > 2 * EVERY + 2
    whole = KeyedCalibrator(PlattCalibrator(refit_every=1000))
    p, _ = whole.prequential(keys, s, y)
    parts = KeyedCalibrator(PlattCalibrator(refit_every=1000))
    cuts = [0, 7, 16_384, 16_385, 25_000, 34_000, 36_000]
    pp = np.concatenate([parts.prequential(keys[a:b], s[a:b], y[a:b])[0] for a, b in itertools.pairwise(cuts)])
    assert np.array_equal(p, pp)
    assert whole.__getstate__()["_next_refresh"] == parts.__getstate__()["_next_refresh"]
    assert whole.__getstate__()["_next_refresh"] == naive_schedule(keys, pools=True)
