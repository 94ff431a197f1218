"""KeyedCalibrator.replace_global: a keyed calibrator pools toward another global map, its keys'
rows kept in place. Swapping in a keyed source equals moving every key's row into that source
(export_key / import_key) bit for bit, then and after more events; a plain calibrator becomes the
global map with the prior taken from it now; a rejected source changes nothing. Also: the one-key
entry points take numpy scalar keys."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_keyed import TEMPLATES as KEYED_TEMPLATES

from streamcal import ISplineCalibrator, KeyedCalibrator, PAVCalibrator, PlattCalibrator
from streamcal.exceptions import StateFileError
from streamcal.persist import from_bytes, to_bytes
from streamcal.windows import CountWindow, Decay

TEMPLATES = {
    **KEYED_TEMPLATES,  # the sparse-row PAV templates of every window kind
    "ispline": ISplineCalibrator(prior=None),  # one template clone per key
    "platt-decay": PlattCalibrator(window=Decay(25), prior=None),
}


def stream(n=3000, n_keys=6, seed=0):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, n_keys, size=n)
    s = rng.uniform(0.01, 0.99, size=n)
    w = np.where(rng.uniform(size=n) < 0.5, 1.0, rng.uniform(0.5, 1.5, size=n))
    t = np.cumsum(rng.exponential(1.0, size=n))
    y = rng.uniform(size=n) < s ** np.linspace(0.5, 2.0, n_keys)[keys]
    return keys, s, y, w, t


def shard_and_map(template, strength, seed=0):
    """A shard (its keys learned events 0..999 and its own global map of them) and a map of all
    traffic without keys (events 0..1999 learned as one key, then dropped), and the stream."""
    keys, s, y, w, t = stream(seed=seed)
    everything = KeyedCalibrator(template, prior_strength=strength)
    everything.update(np.zeros(2000, dtype=np.int64), s[:2000], y[:2000], weights=w[:2000], times=t[:2000])
    everything.drop_key(0)
    shard = KeyedCalibrator(template, prior_strength=strength)
    shard.update(keys[:1000], s[:1000], y[:1000], weights=w[:1000], times=t[:1000])
    return shard, everything, (keys, s, y, w, t)


def moved_into(shard, everything):
    """The reference: a copy of the map's calibrator holding every key's row of the shard."""
    moved = copy.deepcopy(everything)
    names = shard.keys()  # in the order they first learned
    for key in names:
        moved.import_key(key, shard.export_key(key))
    return moved


def assert_same_rows(a, b):
    names = a.keys()
    assert names == b.keys()
    for key in names:
        ours, theirs = a.export_key(key), b.export_key(key)
        for name, value in ours.items():
            if isinstance(value, bytes):  # a template clone's saved form
                assert from_bytes(value).__getstate__().keys() == from_bytes(theirs[name]).__getstate__().keys()
            else:
                np.testing.assert_array_equal(value, theirs[name], err_msg=f"key {key}, {name}")


CASES = [(name, strength) for name in TEMPLATES for strength in (30.0, "auto")
         if strength != "auto" or not name.startswith(("ispline", "platt"))]


@pytest.mark.parametrize(("name", "strength"), CASES)
def test_swapping_in_a_keyed_map_equals_moving_the_rows_into_it_bit_for_bit(name, strength):
    shard, everything, (keys, s, y, w, t) = shard_and_map(TEMPLATES[name], strength)
    before = to_bytes(everything, allow_pickle=False)
    moved = moved_into(shard, everything)
    shard.replace_global(everything)
    assert to_bytes(everything, allow_pickle=False) == before  # the source is only read
    assert shard.n_learned == everything.n_learned == 2000
    assert shard.strength == everything.strength
    grid_keys = np.repeat(np.arange(7), 9)  # key 6 has no state: the global map answers
    grid = np.tile(np.linspace(0.02, 0.98, 9), 7)
    np.testing.assert_array_equal(shard.predict_proba(grid_keys, grid), moved.predict_proba(grid_keys, grid))
    np.testing.assert_array_equal(shard.predict_llr(grid_keys, grid), moved.predict_llr(grid_keys, grid))
    # the next events (the prior refreshes among them: the map has learned 2000, the next is at 2048)
    rest = slice(2000, 3000)
    got = shard.prequential(keys[rest], s[rest], y[rest], weights=w[rest], times=t[rest])
    want = moved.prequential(keys[rest], s[rest], y[rest], weights=w[rest], times=t[rest])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert shard.n_learned == moved.n_learned == 3000
    if not name.startswith(("ispline", "platt")):
        assert_same_rows(shard, moved)
    # and the state saves and loads as any other (the keys' prior versions stay in range)
    loaded = from_bytes(to_bytes(shard, allow_pickle=False))
    np.testing.assert_array_equal(loaded.predict_proba(grid_keys, grid), moved.predict_proba(grid_keys, grid))


@pytest.mark.parametrize("name", ["ispline", "platt-decay"])
def test_template_keys_take_their_odds_multiplier_from_the_swapped_in_prior(name):
    """Under "auto" a template's keys take the swapped-in prior as at a refresh: each its odds
    multiplier from the source's between-key shift and its own evidence (a key moved with
    import_key holds the global map's odds, 1, until the next refresh)."""
    shard, everything, _ = shard_and_map(TEMPLATES[name], "auto")
    moved = moved_into(shard, everything)
    shard.replace_global(everything)
    names = shard.keys()
    shifts = np.array([shard.key_shift(key) for key in names])
    assert np.isfinite(shifts).all()
    assert (shifts > 0).all()
    assert (shifts != 1.0).any()
    assert all(moved.key_shift(key) == 1.0 for key in names)


@pytest.mark.parametrize("name", ["unbounded", "decay", "platt-decay"])
def test_saved_bytes_swap_in_as_the_calibrator_does(name):
    shard, everything, _ = shard_and_map(TEMPLATES[name], 30.0)
    other = copy.deepcopy(shard)
    shard.replace_global(everything)
    other.replace_global(to_bytes(everything, allow_pickle=False))
    assert to_bytes(other, allow_pickle=False) == to_bytes(shard, allow_pickle=False)


@pytest.mark.parametrize("name", ["unbounded", "decay", "ispline"])
def test_a_plain_calibrator_becomes_the_global_map_with_the_prior_taken_from_it_now(name):
    template = TEMPLATES[name]
    shard, everything, (keys, s, y, w, t) = shard_and_map(template, 1e12)
    glob = everything.global_calibrator
    grid = np.linspace(0.02, 0.98, 25)
    tol = 1e-5 if name == "ispline" else 1e-6  # I-spline's active-set solve is to 1e-5
    names = shard.keys()
    far = max(np.abs(shard.predict_proba(np.full(grid.size, key), grid) - glob.predict_proba(grid)).max()
              for key in names)
    assert far > 20 * tol  # before: the keys lean on the shard's own map
    shard.replace_global(glob)
    assert shard.n_learned == glob.n_learned == 2000
    assert shard.strength == 1e12
    np.testing.assert_array_equal(shard.global_calibrator.predict_proba(grid), glob.predict_proba(grid))
    # the prior is the new map's at once: at a huge strength every key serves the new global map
    for key in names:
        got = shard.predict_proba(np.full(grid.size, key), grid)
        np.testing.assert_allclose(got, glob.predict_proba(grid), atol=tol)
    # the calibrator handed in is copied, not kept
    shard.update(keys[2000:2100], s[2000:2100], y[2000:2100], weights=w[2000:2100], times=t[2000:2100])
    assert glob.n_learned == 2000
    assert shard.n_learned == 2100


def test_without_the_swap_the_keys_pool_toward_their_own_map():
    """The swap changes what the keys pool toward (the equality above is not vacuous)."""
    shard, everything, _ = shard_and_map(TEMPLATES["unbounded"], 30.0)
    moved = moved_into(shard, everything)
    grid = np.linspace(0.02, 0.98, 9)
    assert not np.array_equal(shard.predict_proba(np.zeros(9, dtype=np.int64), grid),
                              moved.predict_proba(np.zeros(9, dtype=np.int64), grid))


@pytest.mark.parametrize(
    ("make_source", "error", "match"),
    [
        (lambda shard, everything: "a map", TypeError, r"`source` must be a KeyedCalibrator or a PAVCalibrator"),
        (lambda shard, everything: PlattCalibrator(prior=None), TypeError, r"`source` must be a KeyedCalibrator"),
        (lambda shard, everything: KeyedCalibrator(PlattCalibrator(prior=None), prior_strength=30.0), TypeError,
         r"`source` must be a KeyedCalibrator \(a keyed calibrator of this kind\); got a TemplateKeyedCalibrator"),
        (lambda shard, everything: KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=31.0), ValueError,
         r"`source` must have this calibrator's prior_strength \(30.0\); got 31.0"),
        (lambda shard, everything: KeyedCalibrator(PAVCalibrator(buckets=64, prior=None), prior_strength=30.0),
         ValueError, r"`source` must hold a global map of this template: different `buckets`"),
        (lambda shard, everything: PAVCalibrator(window=CountWindow(40), prior=None), ValueError,
         r"`source` must hold a global map of this template: different `window`"),
        (lambda shard, everything: to_bytes(everything, allow_pickle=False)[:-9], StateFileError, r"`source`"),
    ],
    ids=["string", "other-class", "other-kind", "other-strength", "other-buckets", "other-window", "damaged"],
)
def test_a_rejected_source_names_the_argument_and_changes_nothing(make_source, error, match):
    shard, everything, (keys, s, y, w, _t) = shard_and_map(TEMPLATES["unbounded"], 30.0)
    twin = copy.deepcopy(shard)
    before = to_bytes(shard, allow_pickle=False)
    with pytest.raises(error, match=match):
        shard.replace_global(make_source(shard, everything))
    assert to_bytes(shard, allow_pickle=False) == before
    got = shard.prequential(keys[1000:1500], s[1000:1500], y[1000:1500], weights=w[1000:1500])
    want = twin.prequential(keys[1000:1500], s[1000:1500], y[1000:1500], weights=w[1000:1500])
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("name", ["unbounded", "ispline"])
def test_the_one_key_entry_points_take_numpy_scalar_keys(name):
    keys, s, y, _, _ = stream(n=600)
    for kind, convert in (("str", lambda k: f"k{k}"), ("int", int)):
        names = [convert(k) for k in keys]
        cal = KeyedCalibrator(TEMPLATES[name], prior_strength=30.0).update(names, s, y)
        numpy_key = np.str_("k2") if kind == "str" else np.int64(2)
        plain_key = "k2" if kind == "str" else 2
        row = cal.export_key(numpy_key)
        assert row.keys() == cal.export_key(plain_key).keys()
        other = KeyedCalibrator(TEMPLATES[name], prior_strength=30.0).update(names[:1], s[:1], y[:1])
        new_key = np.str_("k9") if kind == "str" else np.int64(9)
        other.import_key(new_key, row)
        assert type(other.keys()[-1]) is type(plain_key)  # stored as the plain kind
        np.testing.assert_array_equal(other.key_state(new_key).predict_proba(s[:20]),
                                      cal.key_state(plain_key).predict_proba(s[:20]))
        assert other.key_shift(new_key) == 1.0
        other.drop_key(new_key)
        assert new_key not in other
        with pytest.raises(TypeError, match=r"`key` must be an int or a string; got np.True_|got True"):
            cal.export_key(np.bool_(True))
