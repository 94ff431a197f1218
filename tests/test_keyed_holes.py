"""KeyedCalibrator's arenas reuse a key's old segment as a hole of its size class: many keys growing
through the size classes, interleaved, keep every key's row its own (the outputs equal independent
copies bit for bit) and the same bits across calls, copies and restored states."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from test_keyed import independent

from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow

TEMPLATES = {
    "count": PAVCalibrator(window=CountWindow(40), prior=None),
    "decay": PAVCalibrator(window=Decay(25), prior=None),
    "time": PAVCalibrator(window=TimeWindow(30.0), prior=None),
}


def zipf_stream(n, n_keys, seed):
    """Keys of Zipf-like traffic (a few heavy, many light: segments of every size class freed and
    taken again, by other keys, while the arenas fill), uniform scores, fractional weights."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, n_keys + 1, dtype=np.float64) ** -1.1
    keys = rng.choice(n_keys, size=n, p=p / p.sum())
    s = rng.uniform(0.01, 0.99, size=n)
    w = np.where(rng.uniform(size=n) < 0.5, 1.0, rng.uniform(0.5, 1.5, size=n))
    t = np.cumsum(rng.exponential(0.02, size=n))
    y = rng.uniform(size=n) < s
    return keys, s, y, w, t


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_keys_growing_through_reused_segments_stay_independent_copies(name):
    template = TEMPLATES[name]
    keys, s, y, w, t = zipf_stream(6000, 300, seed=3)
    cal = KeyedCalibrator(template, prior_strength=0)
    parts = [cal.prequential(keys[a], s[a], y[a], weights=w[a], times=t[a])[0]
             for a in np.array_split(np.arange(s.size), 3)]
    p = np.concatenate(parts)
    ref, _, cals = independent(template, keys, s, y, w, t)
    seen = ~np.isnan(ref)
    assert seen.sum() > 5000
    assert np.array_equal(p[seen], ref[seen])
    grid = np.linspace(0.01, 0.99, 33)
    for key, one in cals.items():
        assert np.array_equal(cal.predict_proba(np.full(grid.size, key), grid), one.predict_proba(grid))


@pytest.mark.parametrize("name", list(TEMPLATES))
@pytest.mark.parametrize("strength", ["auto", 30.0])
def test_pooled_keys_give_the_same_bits_whatever_the_holes(name, strength):
    # one long call against calls with a save and restore between them (a restored state starts
    # compacted, without holes and without block caches, so the segments lie elsewhere and every
    # cached key rebuilds its blocks from scratch): the same outputs
    keys, s, y, w, t = zipf_stream(8000, 400, seed=5)
    template = TEMPLATES[name]
    whole = KeyedCalibrator(template, prior_strength=strength)
    p_whole, llr_whole = whole.prequential(keys, s, y, weights=w, times=t)
    cal = KeyedCalibrator(template, prior_strength=strength)
    p_parts, llr_parts = [], []
    for a in np.array_split(np.arange(s.size), 5):
        p, llr = cal.prequential(keys[a], s[a], y[a], weights=w[a], times=t[a])
        p_parts.append(p)
        llr_parts.append(llr)
        cal = pickle.loads(pickle.dumps(cal))
    assert np.array_equal(np.concatenate(p_parts), p_whole, equal_nan=True)
    assert np.array_equal(np.concatenate(llr_parts), llr_whole, equal_nan=True)
    grid = np.linspace(0.01, 0.99, 33)
    for key in range(0, 400, 7):
        k = np.full(grid.size, key)
        assert np.array_equal(cal.predict_proba(k, grid), whole.predict_proba(k, grid))


@pytest.mark.parametrize("window", [TimeWindow(30.0), CountWindow(400)])
def test_cached_blocks_equal_a_rebuild_where_atoms_leave_the_window(window):
    # keys past the block cache's threshold whose buckets leave the window (an atom dropped joins
    # the prior's runs on both sides of it into one unit): after every chunk each key's map equals
    # that of a restored copy, which rebuilds its blocks from scratch
    keys, s, y, w, t = zipf_stream(8000, 400, seed=5)
    cal = KeyedCalibrator(PAVCalibrator(window=window, prior=None), prior_strength=30.0)
    grid = np.linspace(0.01, 0.99, 257)
    for a in np.array_split(np.arange(s.size), 80):
        cal.prequential(keys[a], s[a], y[a], weights=w[a], times=t[a])
        fresh = pickle.loads(pickle.dumps(cal))
        for key in range(8):
            k = np.full(grid.size, key)
            assert np.array_equal(cal.predict_proba(k, grid), fresh.predict_proba(k, grid))
