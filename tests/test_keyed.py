"""KeyedCalibrator: independent keys bit for bit, the pooled limit, monotone maps, both faces,
eviction, per-key persistence and merging, and refused input that changes nothing."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamcal
from streamcal import ISplineCalibrator, KeyedCalibrator, PAVCalibrator
from streamcal._keyed_shape import SHAPE_POSITIVES
from streamcal.exceptions import StateFileError
from streamcal.windows import CountWindow, Decay, TimeWindow

# a key's own map is the template's without its score prior (the keyed prior takes its place):
# the independent copies compared with keys have prior=None
TEMPLATES = {
    "unbounded": PAVCalibrator(prior=None),
    "count": PAVCalibrator(window=CountWindow(40), prior=None),
    "decay": PAVCalibrator(window=Decay(25), prior=None),
    "time": PAVCalibrator(window=TimeWindow(30.0), prior=None),
    "decay-time": PAVCalibrator(window=Decay(15.0, by="time"), prior=None),
    "step-exact": PAVCalibrator(buckets=64, interpolation="step", finite_proba=False),
}


def stream(n=3000, n_keys=5, seed=0, fractional=True):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, n_keys, size=n)
    s = rng.uniform(0.01, 0.99, size=n)
    w = np.where(rng.uniform(size=n) < 0.5, 1.0, rng.uniform(0.5, 1.5, size=n)) if fractional else np.ones(n)
    t = np.cumsum(rng.exponential(1.0, size=n))
    slope = np.linspace(0.5, 2.0, n_keys)[keys]
    y = rng.uniform(size=n) < s**slope
    return keys, s, y, w, t


def independent(template, keys, s, y, w, t):
    """A loop of one template copy per key: predictions before each label (NaN before the key's first)."""
    cals = {}
    p = np.full(s.size, np.nan)
    llr = np.full(s.size, np.nan)
    for i in range(s.size):
        cal = cals.get(keys[i])
        if cal is None:
            cal = cals[keys[i]] = template.clone()
        else:
            p[i] = cal.predict_proba([s[i]])[0]
            llr[i] = cal.predict_llr([s[i]])[0]
        cal.update([s[i]], [y[i]], weights=[w[i]], times=[t[i]])
    return p, llr, cals


def snapshot(cal):
    return streamcal.persist.dumps(cal) if hasattr(streamcal.persist, "dumps") else cal.__getstate__()


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_strength_zero_is_independent_copies_bit_for_bit(name):
    template = TEMPLATES[name]
    keys, s, y, w, t = stream(seed=1)
    cal = KeyedCalibrator(template, prior_strength=0)
    p, llr = cal.prequential(keys, s, y, weights=w, times=t)
    ref_p, ref_llr, cals = independent(template, keys, s, y, w, t)
    seen = ~np.isnan(ref_p)
    assert np.array_equal(p[seen], ref_p[seen])
    assert np.array_equal(llr[seen], ref_llr[seen])
    grid = np.linspace(0.01, 0.99, 97)
    for key, ref in cals.items():
        assert np.array_equal(cal.key_state(key).predict_proba(grid), ref.predict_proba(grid))
        assert np.array_equal(cal.predict_proba(np.full(grid.size, key), grid), ref.predict_proba(grid))


@pytest.mark.parametrize("template", [None, PAVCalibrator(window=CountWindow(300))], ids=["default", "count"])
def test_strength_zero_keeps_the_template_defaults_score_prior_included(template):
    # a PAV template with its score prior on (the default): each key is that template, bit for bit
    keys, s, y, w, t = stream(seed=13)
    cal = KeyedCalibrator(template, prior_strength=0)
    p, llr = cal.prequential(keys, s, y, weights=w, times=t)
    ref_p, ref_llr, cals = independent(template or PAVCalibrator(), keys, s, y, w, t)
    seen = ~np.isnan(ref_p)
    assert np.array_equal(p[seen], ref_p[seen])
    assert np.array_equal(llr[seen], ref_llr[seen])
    assert any(ref.prior_strength > 0 for ref in cals.values())  # the score prior took part
    clone = cal.clone({"prior_strength": "auto"})  # pooled: the sparse rows again
    assert type(clone) is KeyedCalibrator
    assert type(clone.clone({"prior_strength": 0})) is type(cal)


def test_keys_without_state_get_the_global_map():
    keys, s, y, _w, _t = stream(seed=2)
    cal = KeyedCalibrator(prior_strength=3.0)
    p, _ = cal.prequential(keys, s, y)
    glob = PAVCalibrator()
    g = glob.prequential(s, y)[0]
    first = np.unique(keys, return_index=True)[1]
    assert np.array_equal(p[first], g[first])  # a key's first event: no state yet
    grid = np.linspace(0.01, 0.99, 50)
    assert np.array_equal(cal.predict_proba(np.full(50, 99), grid), glob.predict_proba(grid))
    assert np.array_equal(cal.global_calibrator.predict_proba(grid), glob.predict_proba(grid))


def test_large_strength_tends_to_the_global_map():
    # 4,096 events: the prior follows the global map after 1, 2, 4, ..., 4,096 learned events
    keys, s, y, _w, _t = stream(n=4096, seed=3, fractional=False)
    cal = KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=1e12)
    cal.update(keys, s, y)
    glob = cal.global_calibrator
    grid = np.linspace(0.02, 0.98, 200)
    for key in range(5):
        np.testing.assert_allclose(cal.predict_proba(np.full(200, key), grid), glob.predict_proba(grid), atol=1e-6)
        np.testing.assert_allclose(cal.predict_llr(np.full(200, key), grid), glob.predict_llr(grid), atol=1e-5)


def test_strength_moves_each_key_between_its_own_map_and_the_global():
    keys, s, y, _w, _t = stream(n=4000, seed=4)
    grid = np.linspace(0.05, 0.95, 19)
    glob = KeyedCalibrator(prior_strength=1e9).update(keys, s, y).predict_proba(np.zeros(19, int), grid)
    own = KeyedCalibrator(prior_strength=0).update(keys, s, y).predict_proba(np.zeros(19, int), grid)
    mid = KeyedCalibrator(prior_strength=200.0).update(keys, s, y).predict_proba(np.zeros(19, int), grid)
    assert np.abs(mid - own).mean() < np.abs(glob - own).mean()
    assert np.abs(mid - glob).mean() < np.abs(glob - own).mean()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    strength=st.sampled_from([0.0, 0.5, 7.0, 300.0, "auto"]),
    window=st.sampled_from(["unbounded", "count", "decay"]),
)
def test_every_key_map_is_monotone_after_every_event(seed, strength, window):
    keys, s, y, w, _t = stream(n=300, n_keys=3, seed=seed)
    cal = KeyedCalibrator(TEMPLATES[window], prior_strength=strength)
    grid = np.linspace(0.0, 1.0, 101)
    for i in range(0, 300, 7):
        cal.update(keys[i : i + 7], s[i : i + 7], y[i : i + 7], weights=w[i : i + 7])
        for key in range(3):
            p = cal.predict_proba(np.full(101, key), grid)
            llr = cal.predict_llr(np.full(101, key), grid)
            assert (np.diff(p) >= 0).all()
            assert (np.diff(llr) >= -1e-12).all()
            assert np.isfinite(llr).all()


@pytest.mark.parametrize("strength", [0.0, 50.0, "auto"])
def test_array_face_equals_a_loop_of_the_river_face(strength):
    keys, s, y, w, _t = stream(n=1500, seed=5)
    names = np.array(["a", "b", "c", "d", "e"])[keys]
    arr = KeyedCalibrator(prior_strength=strength)
    p, llr = arr.prequential(names, s, y, weights=w)
    one = KeyedCalibrator(prior_strength=strength)
    rp = np.empty(s.size)
    rl = np.empty(s.size)
    for i in range(s.size):
        x = {"key": str(names[i]), "score": float(s[i])}
        rp[i] = one.predict_proba_one(x)[True]
        rl[i] = one.predict_llr_one(x)
        one.learn_one(x, bool(y[i]), float(w[i]))
    assert np.array_equal(p, rp)
    assert np.array_equal(llr, rl)
    assert arr.keys() == one.keys()
    assert arr.strength == one.strength


def test_process_mixes_learning_and_prediction_in_order():
    keys, s, y, _w, _t = stream(n=1200, seed=6)
    mask = np.random.default_rng(0).uniform(size=s.size) < 0.6
    a = KeyedCalibrator()
    p, _ = a.process(keys, s, y, mask)
    b = KeyedCalibrator()
    ref = np.full(s.size, np.nan)
    for i in range(s.size):
        if mask[i]:
            b.update(keys[i : i + 1], s[i : i + 1], y[i : i + 1])
        else:
            ref[i] = b.predict_proba(keys[i : i + 1], s[i : i + 1])[0]
    assert np.array_equal(p, ref, equal_nan=True)


def test_max_keys_evicts_the_least_recently_updated_and_counts_it():
    keys, s, y, _w, _t = stream(n=2000, n_keys=8, seed=7)
    cal = KeyedCalibrator(prior_strength=0, max_keys=3)
    p, _ = cal.prequential(keys, s, y)
    assert cal.n_keys == 3
    assert cal.evictions > 0
    # the survivors are the three keys updated last
    last = {}
    for i, k in enumerate(keys):
        last[int(k)] = i
    assert sorted(cal.keys()) == sorted(sorted(last, key=last.get)[-3:])
    # the river face evicts at the same events
    one = KeyedCalibrator(prior_strength=0, max_keys=3)
    for i in range(s.size):
        x = {"key": int(keys[i]), "score": float(s[i])}
        assert one.predict_proba_one(x)[True] == p[i]
        one.learn_one(x, bool(y[i]))
    assert one.evictions == cal.evictions
    # an evicted key falls back to the global map
    gone = next(k for k in range(8) if k not in cal)
    grid = np.linspace(0.1, 0.9, 9)
    assert np.array_equal(cal.predict_proba(np.full(9, gone), grid), cal.global_calibrator.predict_proba(grid))


def test_memory_grows_with_evidence_not_keys_times_buckets():
    rng = np.random.default_rng(8)
    n = 20_000
    keys = rng.integers(0, 10_000, size=n)
    s = rng.uniform(0.01, 0.99, size=n)
    cal = KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=0).update(keys, s, rng.uniform(size=n) < s)
    state = cal.__getstate__()
    atoms = state["_atoms_b"].size
    assert atoms < 4 * n  # dense rows would be 10,000 x 1024
    assert cal.n_keys == np.unique(keys).size


@pytest.mark.parametrize("name", ["unbounded", "count", "decay", "time"])
def test_save_load_export_import_exact(tmp_path, name):
    keys, s, y, w, t = stream(n=2000, seed=9)
    cal = KeyedCalibrator(TEMPLATES[name])
    cal.update(keys[:1500], s[:1500], y[:1500], weights=w[:1500], times=t[:1500])
    path = cal.save(tmp_path / "keyed.zip")
    back = KeyedCalibrator.load(path)
    a = cal.prequential(keys[1500:], s[1500:], y[1500:], weights=w[1500:], times=t[1500:])
    b = back.prequential(keys[1500:], s[1500:], y[1500:], weights=w[1500:], times=t[1500:])
    assert np.array_equal(a[0], b[0])
    assert np.array_equal(a[1], b[1])
    # one key moved to another calibrator through its plain values
    other = KeyedCalibrator(TEMPLATES[name], prior_strength=0)
    other.import_key(3, cal.export_key(3))
    grid = np.linspace(0.01, 0.99, 50)
    assert np.array_equal(other.key_state(3).predict_proba(grid), cal.key_state(3).predict_proba(grid))


@pytest.mark.parametrize("name", ["unbounded", "count", "decay"])
def test_merge_per_key_equals_learning_both_parts(name):
    keys, s, y, _w, _t = stream(n=2000, seed=10, fractional=False)
    whole = KeyedCalibrator(TEMPLATES[name], prior_strength=0).update(keys, s, y)
    a = KeyedCalibrator(TEMPLATES[name], prior_strength=0).update(keys[:900], s[:900], y[:900])
    b = KeyedCalibrator(TEMPLATES[name], prior_strength=0).update(keys[900:], s[900:], y[900:])
    merged = streamcal.merge([a, b])
    grid = np.linspace(0.01, 0.99, 60)
    for key in range(5):
        np.testing.assert_allclose(
            merged.predict_proba(np.full(60, key), grid), whole.predict_proba(np.full(60, key), grid), rtol=1e-12
        )
    assert merged.n_learned == whole.n_learned
    assert sorted(merged.keys()) == sorted(whole.keys())


BAD_KEYS = [
    ([1, None, 2], "missing key", 1),
    (np.array([1.0, float("nan"), 2.0]), "missing key", 1),
    ([1, float("nan"), 2], "missing key", 1),
    ([1, "a", 2], "one kind of key", 1),
    ([1, (2,), 3], "tuple", 1),
    ([1, 2.5, 3], "float", 1),
    ([True, False, True], "bool", 0),
]


@pytest.mark.parametrize(("bad", "words", "position"), BAD_KEYS)
def test_bad_keys_are_refused_naming_position_and_change_nothing(bad, words, position):
    cal = KeyedCalibrator().update([1, 2, 3], [0.2, 0.5, 0.7], [0, 1, 1])
    before = cal.__getstate__()
    with pytest.raises((TypeError, ValueError), match=words) as info:
        cal.update(bad, [0.1, 0.2, 0.3], [0, 1, 0])
    assert f"position {position}" in str(info.value)
    after = cal.__getstate__()
    assert before.keys() == after.keys()
    for name, value in before.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, after[name])


def test_other_bad_input_changes_nothing():
    cal = KeyedCalibrator().update([1, 2, 3], [0.2, 0.5, 0.7], [0, 1, 1])
    ref = cal.predict_proba([1, 2, 3], [0.3, 0.3, 0.3])
    with pytest.raises(ValueError, match="position 1"):
        cal.update([1, 2], [0.3, float("nan")], [0, 1])
    with pytest.raises(ValueError, match="labels"):
        cal.update([1, 2], [0.3, 0.4], [0, 2])
    with pytest.raises(ValueError):
        cal.update([1, 2, 3], [0.3, 0.4], [0, 1])
    with pytest.raises(TypeError, match="kind already learned"):
        cal.update(["a"], [0.3], [1])
    with pytest.raises((TypeError, ValueError), match="key"):
        cal.learn_one({"score": 0.3}, True)
    with pytest.raises(TypeError, match="int or a string"):
        cal.learn_one({"key": None, "score": 0.3}, True)
    with pytest.raises(TypeError, match="int or a string"):
        cal.learn_one({"key": [1], "score": 0.3}, True)
    assert np.array_equal(cal.predict_proba([1, 2, 3], [0.3, 0.3, 0.3]), ref)
    assert cal.n_learned == 3


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"prior_strength": -1.0}, "prior_strength"),
        ({"prior_strength": float("inf")}, "prior_strength"),
        ({"prior_strength": "big"}, "prior_strength"),
        ({"max_keys": 0}, "max_keys"),
        ({"max_keys": 2.5}, "max_keys"),
        ({"key_key": 3}, "key_key"),
        ({"calibrator": object()}, "calibrator"),
        ({"calibrator": PAVCalibrator(buckets="quantile:16"), "prior_strength": 2.0}, "fixed bucket edges"),
    ],
)
def test_bad_parameters(kwargs, words):
    with pytest.raises((TypeError, ValueError), match=words):
        KeyedCalibrator(**kwargs)


def test_damaged_state_files_are_refused(tmp_path):
    keys, s, y, _w, _t = stream(n=500, seed=11)
    cal = KeyedCalibrator(TEMPLATES["count"]).update(keys, s, y)
    state = cal.__getstate__()
    damages = {
        "_atoms_b": lambda a: a + 5000,
        "_ki": lambda a: a * 3 + 7,
        "_ring_b": lambda a: -a - 1,
        "_atoms_f": lambda a: -a,
        "_arena": lambda a: a + 10**9,
        "_slot_keys": lambda a: [*a[:-1], a[0]],
    }
    for name, damage in damages.items():
        bad = dict(state)
        bad[name] = damage(state[name].copy() if isinstance(state[name], np.ndarray) else list(state[name]))
        obj = KeyedCalibrator.__new__(KeyedCalibrator)
        with pytest.raises(StateFileError):
            obj.__setstate__(bad)
    bad_row = cal.export_key(2)
    bad_row["n_pos"] = bad_row["n_pos"] + 1
    with pytest.raises(ValueError, match="ring"):
        cal.import_key(2, bad_row)


def test_copies_and_pickles_are_independent_and_predictions_change_nothing():
    import pickle

    keys, s, y, _w, _t = stream(n=800, seed=12)
    cal = KeyedCalibrator().update(keys, s, y)
    grid = np.linspace(0.01, 0.99, 30)
    ref = cal.predict_proba(np.full(30, 2), grid)
    for other in (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal)), cal.clone().update(keys, s, y)):
        assert np.array_equal(other.predict_proba(np.full(30, 2), grid), ref)
        other.update(keys[:200], s[:200], 1 - y[:200])
    assert np.array_equal(cal.predict_proba(np.full(30, 2), grid), ref)  # the copies learned alone
    for _ in range(3):
        cal.predict_proba_one({"key": 2, "score": 0.4})
        cal.predict_llr(keys, s)
    assert np.array_equal(cal.predict_proba(np.full(30, 2), grid), ref)
    assert cal.clone().n_keys == 0


@pytest.mark.parametrize("name", ["unbounded", "count", "decay", "time"])
@pytest.mark.parametrize("strength", [0.0, 40.0, "auto"])
def test_repaired_blocks_equal_a_fresh_sweep(name, strength):
    # keys with many buckets keep their blocks and repair them per event; a restored copy holds no
    # blocks and sweeps from scratch: both give the same bits
    import pickle

    keys, s, y, w, t = stream(n=6000, n_keys=3, seed=13)
    cal = KeyedCalibrator(TEMPLATES[name], prior_strength=strength)
    grid = np.linspace(0.0, 1.0, 257)
    for part in np.array_split(np.arange(6000), 5):
        cal.update(keys[part], s[part], y[part], weights=w[part], times=t[part])
        fresh = pickle.loads(pickle.dumps(cal))
        for key in range(3):
            k = np.full(grid.size, key)
            assert np.array_equal(cal.predict_proba(k, grid), fresh.predict_proba(k, grid))
            assert np.array_equal(cal.predict_llr(k, grid), fresh.predict_llr(k, grid))


def test_auto_prior_is_the_global_map_shifted_by_each_keys_shrunk_rate_ratio():
    # a naive rebuild of the default prior from public values: the global map's prequential
    # predictions give each key's observed O and expected E positives; a DerSimonian–Laird
    # estimate (its excess over the noise counted beyond one standard deviation) gives the
    # between-key shape a; each key's prior is the global map with its odds
    # times (O + a) / (rho E + a), at the global window's weight; the key's map is PAV over its
    # row plus that prior. 4,096 events: the prior has just followed the global map.
    from naive import naive_pav_bucket_blocks, naive_pav_bucket_fit, naive_shape_bound

    rng = np.random.default_rng(21)
    n, n_keys = 4096, 12
    keys = rng.integers(0, n_keys, size=n)
    s = rng.uniform(0.05, 0.95, size=n)
    shift = np.linspace(-1.5, 1.5, n_keys)[keys]
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(np.log(s / (1 - s)) + shift)))
    template = PAVCalibrator(buckets=64, interpolation="step", finite_proba=False)
    cal = KeyedCalibrator(template).update(keys, s, y)

    p_global = template.clone().prequential(s, y)[0]
    obs = np.bincount(keys, weights=y.astype(float), minlength=n_keys)
    exp = np.bincount(keys, weights=p_global, minlength=n_keys)
    glob = cal.global_calibrator
    row = glob.window_histogram.row()
    weight = row.pos + row.neg
    total, rate = weight.sum(), row.pos.sum() / weight.sum()
    use = exp >= 1.0
    o, e = obs[use], exp[use]
    rho = o.sum() / e.sum()
    k = use.sum()
    noise = np.sqrt((k - 1) * (rho + 2 * rho * rho))  # one standard deviation of Q without between-key variance
    tau2 = ((o * o / e).sum() - rho * o.sum() - rho * (k - 1) - noise) / (e.sum() - (e * e).sum() / e.sum())
    assert tau2 > 0.0  # the keys differ: the shift is on
    a = min(total, rho * rho / (tau2 * rate)) * rate
    shapes = [cal.export_key(key)["shape"] for key in range(n_keys)]
    bound = min(naive_shape_bound(shapes, rate), SHAPE_POSITIVES / rate)  # what a shape needs, capped
    assert cal.strength == pytest.approx(min(total, bound), rel=1e-12)
    assert cal.strength < total  # the keys differ in shape here too

    q = glob.blocks().fitted
    for key in range(n_keys):
        odds = (obs[key] + a) / (rho * exp[key] + a)
        assert cal.key_shift(key) == pytest.approx(odds, rel=1e-12)
        r = q * odds / (q * odds + (1.0 - q))
        own = cal.key_state(key).window_histogram.row()
        pos = own.pos + cal.strength * weight / total * r
        neg = own.neg + cal.strength * weight / total * (1.0 - r)
        blocks = naive_pav_bucket_blocks(pos, neg)
        _owner, fit = naive_pav_bucket_fit(blocks, glob.centres)
        served = cal.predict_proba(np.full(64, key), glob.centres)
        has = pos + neg > 0.0
        np.testing.assert_allclose(served[has], fit[has], rtol=1e-9, atol=1e-12)
    assert cal.key_shift(0) < 1.0 < cal.key_shift(n_keys - 1)  # the key's own level, found


@pytest.mark.parametrize("name", ["unbounded", "count", "decay", "time"])
def test_long_calls_run_in_chunks_with_the_same_results(monkeypatch, name):
    # a call longer than the chunk is checked whole, then run chunk by chunk: the same bits and
    # the same state as one pass, with eviction, late labels (process) and every window kind
    import streamcal.keyed as keyed_module

    keys, s, y, w, t = stream(n=3000, n_keys=40, seed=17)
    learn = np.random.default_rng(17).uniform(size=3000) < 0.7
    whole = KeyedCalibrator(TEMPLATES[name], max_keys=25)
    expected = whole.prequential(keys, s, y, weights=w, times=t)
    expected_process = whole.process(keys, s, y, learn, weights=w, times=t + t[-1])
    monkeypatch.setattr(keyed_module, "_CHUNK", 97)
    chunked = KeyedCalibrator(TEMPLATES[name], max_keys=25)
    got = chunked.prequential(keys, s, y, weights=w, times=t)
    got_process = chunked.process(keys, s, y, learn, weights=w, times=t + t[-1])
    for a, b in zip((*expected, *expected_process), (*got, *got_process), strict=True):
        np.testing.assert_array_equal(a, b)
    assert chunked.evictions == whole.evictions > 0
    assert sorted(chunked.keys()) == sorted(whole.keys())
    for key in whole.keys():  # noqa: SIM118 (a calibrator: iterating it is not iterating its keys)
        ours, theirs = chunked.export_key(key), whole.export_key(key)
        for field, value in theirs.items():
            np.testing.assert_array_equal(ours[field], value)


def test_a_bad_value_in_a_later_chunk_names_its_position_and_changes_nothing(monkeypatch):
    import streamcal.keyed as keyed_module

    monkeypatch.setattr(keyed_module, "_CHUNK", 100)
    keys, s, y, _w, t = stream(n=1000, n_keys=5, seed=2)
    cal = KeyedCalibrator(PAVCalibrator(window=TimeWindow(30.0), prior=None))
    cal.update(keys[:10], s[:10], y[:10], times=t[:10])
    before = pickle_bytes(cal)
    bad = s[10:].copy()
    bad[731] = np.nan
    with pytest.raises(ValueError, match="position 731"):
        cal.prequential(keys[10:], bad, y[10:], times=t[10:])
    assert pickle_bytes(cal) == before
    late = t[10:].copy()
    late[650] = late[649] - 1.0  # out of order inside a later chunk
    with pytest.raises(ValueError, match="650"):
        cal.update(keys[10:], s[10:], y[10:], times=late)
    assert pickle_bytes(cal) == before
    mixed = keys[10:].astype(object)
    mixed[555] = "five"
    with pytest.raises(ValueError, match="position 555"):
        cal.update(mixed, s[10:], y[10:], times=t[10:])
    mixed[500:600] = "five"  # a whole chunk of strings after chunks of ints
    with pytest.raises(ValueError, match="position 500"):
        cal.update(mixed, s[10:], y[10:], times=t[10:])
    assert pickle_bytes(cal) == before
    strings = np.array([f"k{k}" for k in keys[10:]])  # a numpy column of the other kind, over chunks
    with pytest.raises(TypeError, match=rf"kind already learned \(int\); got '{strings[0]}' at position 0\."):
        cal.update(strings, s[10:], y[10:], times=t[10:])
    assert pickle_bytes(cal) == before


def pickle_bytes(cal):
    import pickle

    return pickle.dumps(cal)


@pytest.mark.parametrize("name", ["count", "decay"])
def test_drop_key_forgets_a_key_which_then_starts_afresh(name):
    keys, s, y, w, _t = stream(n=2000, n_keys=4, seed=23)
    cal = KeyedCalibrator(TEMPLATES[name], prior_strength=0).update(keys, s, y, weights=w)
    cal.drop_key(2)
    assert 2 not in cal
    assert cal.n_keys == 3
    assert cal.evictions == 0
    grid = np.linspace(0.05, 0.95, 19)
    np.testing.assert_array_equal(cal.predict_proba(np.full(19, 2), grid), cal.global_calibrator.predict_proba(grid))
    with pytest.raises(KeyError, match="no state for key 2"):
        cal.drop_key(2)
    # learning again starts from nothing: as a fresh copy of the template
    again = (keys == 2)[:300]
    cal.update(keys[:300][again], s[:300][again], y[:300][again])
    fresh = TEMPLATES[name].clone().update(s[:300][again], y[:300][again])
    np.testing.assert_array_equal(cal.predict_proba(np.full(19, 2), grid), fresh.predict_proba(grid))


@pytest.mark.parametrize("window", ["count", "time"])
def test_states_saved_with_the_earlier_ring_layout_load_as_the_same_calibrator(window):
    # the earlier layout kept int64 buckets and three float rows (weight, label, clock) per ring
    # event; a count window's clocks are the key's event numbers, which the loader derives, so the
    # clock row is not read there (zeros stand in for it)
    keys, s, y, w, t = stream(n=900, seed=21)
    cal = KeyedCalibrator(TEMPLATES[window]).update(keys, s, y, weights=w, times=t)
    state = cal.__getstate__()
    code = state["_ring_b"].astype(np.int64)
    clock = state["_ring_f"][1] if window == "time" else np.zeros(code.size)
    old = dict(state)
    old["_ring_b"] = code >> 1
    old["_ring_f"] = np.vstack([state["_ring_f"][0], (code & 1).astype(np.float64), clock])
    loaded = KeyedCalibrator.__new__(KeyedCalibrator)
    loaded.__setstate__(copy.deepcopy(old))  # a state of its own (the global calibrator included), as a file gives
    known = cal.keys()
    assert loaded.keys() == known
    for key in known:
        for name, value in loaded.export_key(key).items():
            np.testing.assert_array_equal(value, cal.export_key(key)[name], err_msg=name)
    grid = np.linspace(0.01, 0.99, 25)
    for key in known:
        probe = np.full(25, key)
        np.testing.assert_array_equal(loaded.predict_proba(probe, grid), cal.predict_proba(probe, grid))
    more = stream(n=300, seed=22)
    np.testing.assert_array_equal(
        loaded.prequential(*more[:3], weights=more[3], times=more[4] + t[-1])[0],
        cal.prequential(*more[:3], weights=more[3], times=more[4] + t[-1])[0],
    )


def test_a_count_window_row_must_keep_its_event_numbers_as_clocks():
    keys, s, y, _w, _t = stream(n=500, seed=23)
    cal = KeyedCalibrator(TEMPLATES["count"]).update(keys, s, y)
    row = cal.export_key(1)
    assert np.array_equal(row["ring_clock"], row["n_learned"] - row["ring_clock"].size + np.arange(row["ring_clock"].size))
    before = cal.export_key(1)
    row["ring_clock"] = row["ring_clock"] + 0.5
    with pytest.raises(ValueError, match="ring_clock"):
        cal.import_key(1, row)
    for name, value in cal.export_key(1).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


@pytest.mark.parametrize("template", [None, "ispline"])
def test_keys_of_the_other_kind_are_refused_by_import_and_merge_and_change_nothing(template, tmp_path):
    # a calibrator keeps one kind of key (ints or strings): a state of the other kind would save
    # but not load, so import_key and merge refuse it before anything changes
    from streamcal import ISplineCalibrator

    def make():
        return KeyedCalibrator() if template is None else KeyedCalibrator(ISplineCalibrator(refit_every=20))

    ints = make().update([3, 7, 3, 9], [0.1, 0.2, 0.3, 0.6], [0, 1, 0, 1])
    strs = make().update(["x", "y"], [0.1, 0.2], [0, 1])
    before = streamcal.persist.to_bytes(ints)
    with pytest.raises(TypeError, match="kind already learned"):
        ints.import_key("x", strs.export_key("x"))
    with pytest.raises(TypeError, match="position 1"):
        streamcal.merge([ints, strs])
    with pytest.raises(TypeError, match="position 2"):
        streamcal.merge([make(), ints, strs])
    assert streamcal.persist.to_bytes(ints) == before
    # one kind, an empty calibrator among them: merged, saved and loaded
    merged = streamcal.merge([make(), ints, make().update([5], [0.4], [1])])
    assert sorted(merged.keys()) == [3, 5, 7, 9]
    streamcal.save(merged, tmp_path / "m.sc")
    assert sorted(streamcal.load(tmp_path / "m.sc").keys()) == [3, 5, 7, 9]


@pytest.mark.parametrize("template", [None, "ispline"])
def test_the_river_face_errors_name_its_own_arguments_and_change_nothing(template):
    from streamcal import ISplineCalibrator

    cal = KeyedCalibrator(key_key="c", score_key="s") if template is None else KeyedCalibrator(
        ISplineCalibrator(refit_every=10), key_key="c", score_key="s"
    )
    cal.learn_one({"c": 1, "s": 0.5}, True)
    before = streamcal.persist.to_bytes(cal)
    for x, y, w, match in [
        ({"c": 1, "s": 1.5}, True, 1.0, r"^`x\['s'\]` must hold probabilities in \[0, 1\].*got 1.5\."),
        ({"c": 1, "s": 0.5}, 2, 1.0, r"^`y` must hold binary labels .*got 2\.$"),
        ({"c": 1, "s": 0.5}, True, -1.0, r"^`w` must be finite and non-negative; got -1.0\.$"),
        ({"c": "a", "s": 0.5}, True, 1.0, r"^`x\['c'\]` must be of the kind already learned \(int\); got 'a'\.$"),
    ]:
        with pytest.raises((ValueError, TypeError), match=match):
            cal.learn_one(x, y, w)
    with pytest.raises(ValueError, match=r"^`x\['s'\]` must be finite; got nan\.$"):
        cal.predict_proba_one({"c": 1, "s": float("nan")})
    assert streamcal.persist.to_bytes(cal) == before


@pytest.mark.parametrize("template", [PAVCalibrator(window="1h"), ISplineCalibrator(window="1h")])
def test_a_time_window_without_times_names_the_faces_own_argument(template):
    # the river face's argument is `t`, as the unkeyed calibrator's river face says; the array
    # face's is `times`; a refused call changes nothing
    cal = KeyedCalibrator(template)
    cal.learn_one({"key": 1, "score": 0.3}, True, t=5.0)
    before = streamcal.persist.to_bytes(cal)
    with pytest.raises(ValueError) as unkeyed:
        template.clone().learn_one({"score": 0.1}, True)
    with pytest.raises(ValueError) as keyed:
        cal.learn_one({"key": 1, "score": 0.1}, True)
    assert str(keyed.value) == str(unkeyed.value) == "TimeWindow needs event times: pass `t=` to learn_one."
    with pytest.raises(ValueError, match=r"^TimeWindow needs event times: pass `times=`\.$"):
        cal.update([1], [0.1], [True])
    assert streamcal.persist.to_bytes(cal) == before


@pytest.mark.parametrize(
    ("theirs", "why"),
    [
        (PAVCalibrator(buckets=32, prior=None), "other bucket edges"),
        (PAVCalibrator(buckets="uniform:1024", prior=None), "other bucket edges"),
        (PAVCalibrator(prior=None, window=CountWindow(500)), "another window"),
        (PAVCalibrator(prior=None, window=Decay(half_life=300.0)), "another window"),
    ],
    ids=["32-buckets", "uniform", "count-window", "decay"],
)
def test_import_refuses_a_row_of_other_buckets_or_window_and_changes_nothing(theirs, why):
    # a row's buckets and clocks mean scores and times only under the layout it was learned over
    rng = np.random.default_rng(5)
    k, s, y = rng.integers(0, 3, 600), rng.uniform(size=600), rng.uniform(size=600) < 0.3
    src = KeyedCalibrator(theirs, prior_strength=0).update(k, s, y)
    dst = KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=0).update(k[:50], s[:50], y[:50])
    before = pickle.dumps(dst.__getstate__())
    with pytest.raises(ValueError, match=why):
        dst.import_key(1, src.export_key(1))
    assert pickle.dumps(dst.__getstate__()) == before
    row = dst.export_key(1)
    for name in ("edges", "window"):
        with pytest.raises(ValueError, match=f"must hold '{name}'"):
            dst.import_key(1, {n: v for n, v in row.items() if n != name})
    assert pickle.dumps(dst.__getstate__()) == before
    # the same layout imports, exactly
    twin = KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=0)
    twin.import_key(1, row)
    grid = np.linspace(0.001, 0.999, 50)
    np.testing.assert_array_equal(twin.predict_proba(np.ones(50, int), grid), dst.predict_proba(np.ones(50, int), grid))


@pytest.mark.parametrize("template", [PAVCalibrator(window=TimeWindow(50.0)), ISplineCalibrator(window=TimeWindow(50.0))])
def test_last_time_is_the_clock_the_next_learned_time_is_checked_against(template):
    cal = KeyedCalibrator(template)
    assert cal.last_time == -np.inf
    cal.update([1, 2, 1], [0.2, 0.5, 0.7], [0, 1, 1], times=[3.0, 4.0, 9.5])
    assert cal.last_time == 9.5 == cal.global_calibrator.window_histogram.last_time()
    with pytest.raises(ValueError, match="backwards"):
        cal.update([2], [0.3], [0], times=[cal.last_time - 1.0])
    assert cal.last_time == 9.5
