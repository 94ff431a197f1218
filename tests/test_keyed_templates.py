"""KeyedCalibrator over templates other than a fixed-edge PAVCalibrator (one template clone per
key): independent keys bit for bit on every face, the pooled limit, monotone maps, eviction,
per-key persistence and merging, refused input that changes nothing, and river's checks."""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest
from river.checks import yield_checks

import streamcal
from streamcal import (
    GEVCalibrator,
    ISplineCalibrator,
    KeyedCalibrator,
    PAVCalibrator,
    PlattCalibrator,
    VennAbersCalibrator,
)
from streamcal.keyed import TemplateKeyedCalibrator
from streamcal.persist import to_bytes
from streamcal.windows import CountWindow, Decay, TimeWindow

# the templates of the keys; a pooled key's own calibrator is the template with prior=None (the keyed
# prior takes the score prior's place), so the independent copies compared with keys have it
TEMPLATES = {
    "ispline": ISplineCalibrator(prior=None),
    "ispline-count-every": ISplineCalibrator(window=CountWindow(40), refit_every=5, prior=None),
    "platt": PlattCalibrator(prior=None),
    "platt-decay": PlattCalibrator(window=Decay(25), prior=None),
    "gev": GEVCalibrator(prior=None),
    "gev-every": GEVCalibrator(refit_every=7, prior=None),
    "gev-time": GEVCalibrator(window=TimeWindow(30.0), prior=None),
    "venn-abers": VennAbersCalibrator(),
    "venn-abers-count": VennAbersCalibrator(window=CountWindow(40), prior=None),  # merges exact: no score prior
    "pav-quantile": PAVCalibrator(buckets="quantile:16", prior=None),
    "ispline-quantile": ISplineCalibrator(buckets="quantile:16", prior=None),
}
POOLED = ["ispline", "ispline-count-every", "platt", "platt-decay", "gev", "gev-every", "gev-time"]
MONOTONE = ["ispline", "ispline-count-every"]  # maps monotone by construction


def stream(n=400, n_keys=4, seed=0, fractional=True):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, n_keys, size=n)
    s = rng.uniform(0.01, 0.99, size=n)
    w = np.where(rng.uniform(size=n) < 0.5, 1.0, rng.uniform(0.5, 1.5, size=n)) if fractional else np.ones(n)
    t = np.cumsum(rng.exponential(1.0, size=n))
    slope = np.linspace(0.5, 2.0, n_keys)[keys]
    y = rng.uniform(size=n) < s**slope
    return keys, s, y, w, t


def independent(template, keys, s, y, w, t, mask=None):
    """One template copy per key, event by event: predictions before each label (NaN before the
    key's first); with ``mask``, learn where it is True and predict elsewhere."""
    cals = {}
    p = np.full(s.size, np.nan)
    llr = np.full(s.size, np.nan)
    for i in range(s.size):
        cal = cals.get(keys[i])
        if cal is None and (mask is None or mask[i]):
            cal = cals[keys[i]] = template.clone()
        elif cal is not None and (mask is None or not mask[i]):
            p[i] = cal.predict_proba([s[i]])[0]
            llr[i] = cal.predict_llr([s[i]])[0]
        if mask is None or mask[i]:
            cal.update([s[i]], [y[i]], weights=[w[i]], times=[t[i]])
    return p, llr, cals


def test_every_template_but_a_fixed_edge_pav_takes_the_clone_path():
    assert type(KeyedCalibrator()) is KeyedCalibrator
    assert type(KeyedCalibrator(PAVCalibrator(buckets=64))) is KeyedCalibrator
    for name, template in TEMPLATES.items():
        strength = "auto" if name in POOLED else 0
        cal = KeyedCalibrator(template, prior_strength=strength)
        assert type(cal) is TemplateKeyedCalibrator
        assert isinstance(cal, KeyedCalibrator)
        assert type(cal.clone()) is TemplateKeyedCalibrator


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
    # a key's first event has no state yet: the global calibrator, the template over every event
    glob = template.clone()
    g_p, _ = glob.prequential(s, y, weights=w, times=t)
    assert np.array_equal(p[~seen], g_p[~seen])
    grid = np.linspace(0.01, 0.99, 97)
    for key, ref in cals.items():
        assert to_bytes(cal.key_state(key)) == to_bytes(ref)  # the same state, bit for bit
        assert np.array_equal(cal.predict_proba(np.full(grid.size, key), grid), ref.predict_proba(grid))
        assert np.array_equal(cal.predict_llr(np.full(grid.size, key), grid), ref.predict_llr(grid))


@pytest.mark.parametrize("name", ["ispline", "platt-decay", "gev-every", "venn-abers", "pav-quantile"])
def test_strength_zero_process_is_independent_copies_bit_for_bit(name):
    template = TEMPLATES[name]
    keys, s, y, w, t = stream(seed=2)
    mask = np.random.default_rng(3).uniform(size=s.size) < 0.6
    cal = KeyedCalibrator(template, prior_strength=0)
    p, llr = cal.process(keys, s, y, mask, weights=w, times=t)
    ref_p, ref_llr, _ = independent(template, keys, s, y, w, t, mask)
    seen = ~np.isnan(ref_p)
    assert np.array_equal(p[seen], ref_p[seen])
    assert np.array_equal(llr[seen], ref_llr[seen])
    assert np.isnan(p[mask]).all()


@pytest.mark.parametrize("template", [VennAbersCalibrator(), TEMPLATES["venn-abers-count"], TEMPLATES["pav-quantile"]])
def test_auto_strength_over_a_template_that_cannot_pool_is_independent_keys(template):
    # the default strength works on every template: where the keyed prior has nothing to pool
    # into, "auto" gives each key the template as it is (its score prior included), as 0 does
    keys, s, y, w, t = stream(seed=6)
    auto = KeyedCalibrator(template)
    zero = KeyedCalibrator(template, prior_strength=0)
    p, llr = auto.prequential(keys, s, y, weights=w, times=t)
    zp, zllr = zero.prequential(keys, s, y, weights=w, times=t)
    assert np.array_equal(p, zp, equal_nan=True)
    assert np.array_equal(llr, zllr, equal_nan=True)
    ref_p, _, cals = independent(template, keys, s, y, w, t)
    seen = ~np.isnan(ref_p)
    assert seen.sum() > s.size // 2
    assert np.array_equal(p[seen], ref_p[seen])
    for key, ref in cals.items():
        assert to_bytes(auto.key_state(key)) == to_bytes(ref)
    with pytest.raises(ValueError, match="prior_strength"):
        KeyedCalibrator(template, prior_strength=1.0)


@pytest.mark.parametrize("name", ["ispline", "ispline-count-every", "platt", "gev-time", "venn-abers"])
@pytest.mark.parametrize("strength", [0, 30.0, "auto"])
def test_array_face_equals_a_loop_of_the_river_face(name, strength):
    if strength not in (0, "auto") and name not in POOLED:
        pytest.skip("a template that does not pool takes prior_strength 0 or 'auto' only")
    keys, s, y, w, t = stream(n=300, seed=4)
    names = np.array(["a", "b", "c", "d"])[keys]
    arr = KeyedCalibrator(TEMPLATES[name], prior_strength=strength)
    p, llr = arr.prequential(names, s, y, weights=w, times=t)
    one = KeyedCalibrator(TEMPLATES[name], prior_strength=strength)
    rp = np.empty(s.size)
    rl = np.empty(s.size)
    for i in range(s.size):
        x = {"key": str(names[i]), "score": float(s[i])}
        rp[i] = one.predict_proba_one(x)[True]
        rl[i] = one.predict_llr_one(x)
        one.learn_one(x, bool(y[i]), float(w[i]), float(t[i]))
    assert np.array_equal(p, rp)
    assert np.array_equal(llr, rl)
    assert arr.keys() == one.keys()
    assert arr.strength == one.strength
    grid = np.linspace(0.01, 0.99, 50)
    for key in ["a", "b", "c", "d", "z"]:
        k = np.full(grid.size, key)
        assert np.array_equal(arr.predict_llr(k, grid), one.predict_llr(k, grid))
    if name in POOLED:  # the PAV block stacks keep scratch space that batching leaves unequal
        assert to_bytes(arr) == to_bytes(one)


@pytest.mark.parametrize("name", POOLED)
def test_pooled_process_equals_its_operations_one_call_at_a_time(name):
    keys, s, y, w, t = stream(n=300, seed=5)
    mask = np.random.default_rng(6).uniform(size=s.size) < 0.7
    a = KeyedCalibrator(TEMPLATES[name], prior_strength="auto")
    p, llr = a.process(keys, s, y, mask, weights=w, times=t)
    b = KeyedCalibrator(TEMPLATES[name], prior_strength="auto")
    ref_p = np.full(s.size, np.nan)
    ref_llr = np.full(s.size, np.nan)
    for i in range(s.size):
        part = slice(i, i + 1)
        if mask[i]:
            b.update(keys[part], s[part], y[part], weights=w[part], times=t[part])
        else:
            ref_p[i] = b.predict_proba(keys[part], s[part])[0]
            ref_llr[i] = b.predict_llr(keys[part], s[part])[0]
    assert np.array_equal(p, ref_p, equal_nan=True)
    assert np.array_equal(llr, ref_llr, equal_nan=True)


# The large-strength limit: a key's refit reads m = 1e12 pseudo-events at the global map's served
# rates against its own thousand events, so its map is the template's fit to the global map's
# values at the bucket centres, which returns the global map (a map of the family fitted to its own
# values) up to the fit's tolerance: I-spline's active-set solve to 1e-5 here, Platt's certified
# refit to 1e-8. The global GEV map here (xi = -0.5) reaches 1 past its link's support, where it
# serves the rate of its data's highest end run (0.990; ``glm_refit.end_run_bounds``), a value
# outside the family: the key's map, the family fitted to those served values, differs from the
# global map by that misfit (measured 1.74e-3, at score 0.874).
LIMIT_TOLERANCE = {"ispline": 1e-5, "platt": 1e-8, "gev": 2.5e-3}


@pytest.mark.parametrize("name", list(LIMIT_TOLERANCE))
def test_large_strength_tends_to_the_global_map(name):
    keys, s, y, _w, _t = stream(n=4096, seed=7, fractional=False)
    cal = KeyedCalibrator(TEMPLATES[name], prior_strength=1e12)
    cal.update(keys, s, y)
    glob = cal.global_calibrator
    grid = np.linspace(0.02, 0.98, 200)
    tol = LIMIT_TOLERANCE[name]
    for key in range(4):
        gap = np.abs(cal.predict_proba(np.full(200, key), grid) - glob.predict_proba(grid)).max()
        assert gap < tol
    # and far from it without the prior, for the key whose calibration differs most
    own = KeyedCalibrator(TEMPLATES[name], prior_strength=0).update(keys, s, y)
    assert np.abs(own.predict_proba(np.zeros(200, int), grid) - glob.predict_proba(grid)).max() > 20 * tol


@pytest.mark.parametrize("name", ["ispline", "platt"])
def test_strength_moves_each_key_between_its_own_map_and_the_global(name):
    keys, s, y, _w, _t = stream(n=2000, seed=8)
    grid = np.linspace(0.05, 0.95, 19)
    k0 = np.zeros(19, int)
    glob = KeyedCalibrator(TEMPLATES[name], prior_strength=1e9).update(keys, s, y).predict_proba(k0, grid)
    own = KeyedCalibrator(TEMPLATES[name], prior_strength=0).update(keys, s, y).predict_proba(k0, grid)
    mid = KeyedCalibrator(TEMPLATES[name], prior_strength=300.0).update(keys, s, y).predict_proba(k0, grid)
    assert np.abs(mid - own).mean() < np.abs(glob - own).mean()
    assert np.abs(mid - glob).mean() < np.abs(glob - own).mean()


@pytest.mark.parametrize(
    ("name", "strength"),
    [*((name, m) for name in MONOTONE for m in (0, 7.0, 300.0, "auto")), ("pav-quantile", 0)],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_key_map_is_monotone_after_every_event(name, strength, seed):
    keys, s, y, w, _t = stream(n=120, n_keys=3, seed=seed)
    cal = KeyedCalibrator(TEMPLATES[name], prior_strength=strength)
    grid = np.linspace(0.0, 1.0, 101)
    for i in range(s.size):
        cal.update(keys[i : i + 1], s[i : i + 1], y[i : i + 1], weights=w[i : i + 1])
        for key in range(3):
            p = cal.predict_proba(np.full(101, key), grid)
            llr = cal.predict_llr(np.full(101, key), grid)
            assert (np.diff(p) >= 0).all()
            assert (np.diff(llr) >= -1e-12).all()
            assert np.isfinite(llr).all()


@pytest.mark.parametrize(("name", "strength"), [("ispline", 0), ("platt", "auto"), ("venn-abers", 0)])
def test_max_keys_evicts_the_least_recently_updated_and_counts_it(name, strength):
    keys, s, y, _w, _t = stream(n=400, n_keys=8, seed=9)
    cal = KeyedCalibrator(TEMPLATES[name], prior_strength=strength, max_keys=3)
    p, _ = cal.prequential(keys, s, y)
    assert cal.n_keys == 3
    assert cal.evictions > 0
    last = {int(k): i for i, k in enumerate(keys)}
    assert sorted(cal.keys()) == sorted(sorted(last, key=last.get)[-3:])
    one = KeyedCalibrator(TEMPLATES[name], prior_strength=strength, max_keys=3)
    for i in range(s.size):
        x = {"key": int(keys[i]), "score": float(s[i])}
        assert one.predict_proba_one(x)[True] == p[i]
        one.learn_one(x, bool(y[i]))
    assert one.evictions == cal.evictions
    gone = next(k for k in range(8) if k not in cal)
    grid = np.linspace(0.1, 0.9, 9)
    assert np.array_equal(cal.predict_proba(np.full(9, gone), grid), cal.global_calibrator.predict_proba(grid))
    with pytest.raises(KeyError, match="no state"):
        cal.key_state(gone)


@pytest.mark.parametrize(
    ("name", "strength"),
    [("ispline-count-every", "auto"), ("platt-decay", 40.0), ("gev-time", 0), ("venn-abers", 0), ("pav-quantile", 0)],
)
def test_save_load_export_import_exact(tmp_path, name, strength):
    keys, s, y, w, t = stream(n=400, seed=10)
    cal = KeyedCalibrator(TEMPLATES[name], prior_strength=strength)
    cal.update(keys[:300], s[:300], y[:300], weights=w[:300], times=t[:300])
    back = KeyedCalibrator.load(cal.save(tmp_path / "keyed.zip"))
    assert type(back) is TemplateKeyedCalibrator
    assert to_bytes(back) == to_bytes(cal)
    rest = (keys[300:], s[300:], y[300:])
    a = cal.prequential(*rest, weights=w[300:], times=t[300:])
    b = back.prequential(*rest, weights=w[300:], times=t[300:])
    assert np.array_equal(a[0], b[0])
    assert np.array_equal(a[1], b[1])
    # one key moved to another calibrator through its plain values
    other = KeyedCalibrator(TEMPLATES[name], prior_strength=strength)
    other.import_key(3, cal.export_key(3))
    grid = np.linspace(0.01, 0.99, 50)
    assert to_bytes(other.key_state(3)) == to_bytes(cal.key_state(3))
    assert np.array_equal(other.key_state(3).predict_proba(grid), cal.key_state(3).predict_proba(grid))
    assert other.export_key(3) == cal.export_key(3)


def test_import_refuses_a_state_of_another_template_and_changes_nothing():
    keys, s, y, _w, _t = stream(n=200, seed=11)
    cal = KeyedCalibrator(TEMPLATES["ispline"], prior_strength=0).update(keys, s, y)
    platt = KeyedCalibrator(TEMPLATES["platt"], prior_strength=0).update(keys, s, y)
    before = to_bytes(cal)
    other_bins = KeyedCalibrator(ISplineCalibrator(buckets=32, prior=None), prior_strength=0).update(keys, s, y)
    for bad in (
        platt.export_key(1),
        other_bins.export_key(1),
        {"state": b"nonsense", "stamp": 1.0, "observed": 0.0, "expected": 0.0},
        {**cal.export_key(1), "stamp": -1.0},
        {"state": 3},
    ):
        with pytest.raises(ValueError, match="state"):
            cal.import_key(7, bad)
    assert to_bytes(cal) == before


@pytest.mark.parametrize(
    ("name", "strength"), [("ispline", 0), ("gev-every", 0), ("venn-abers-count", 0), ("platt", "auto")]
)
def test_merge_per_key_is_the_templates_merge(name, strength):
    keys, s, y, _w, _t = stream(n=400, seed=12, fractional=False)
    a = KeyedCalibrator(TEMPLATES[name], prior_strength=strength).update(keys[:180], s[:180], y[:180])
    b = KeyedCalibrator(TEMPLATES[name], prior_strength=strength).update(keys[180:], s[180:], y[180:])
    merged = streamcal.merge([a, b])
    assert merged.n_learned == 400
    held = merged.keys()
    assert sorted(held) == sorted(set(keys.tolist()))
    grid = np.linspace(0.01, 0.99, 60)
    for key in held:
        want = streamcal.merge([a.key_state(key), b.key_state(key)])
        assert np.array_equal(merged.key_state(key).predict_proba(grid), want.predict_proba(grid))
    glob = streamcal.merge([a.global_calibrator, b.global_calibrator])
    assert np.array_equal(merged.global_calibrator.predict_proba(grid), glob.predict_proba(grid))
    if strength == 0 and getattr(TEMPLATES[name], "refit_every", None) is None:
        # (a map refitted every refit_every labels refits at a merge, where the whole stream's
        # keys still serve their last scheduled fit)
        whole = KeyedCalibrator(TEMPLATES[name], prior_strength=0).update(keys, s, y)
        for key in held:
            np.testing.assert_allclose(
                merged.predict_proba(np.full(60, key), grid), whole.predict_proba(np.full(60, key), grid), atol=1e-9
            )


BAD_KEYS = [
    ([1, None, 2], "missing key", 1),
    (np.array([1.0, float("nan"), 2.0]), "missing key", 1),
    ([1, "a", 2], "one kind of key", 1),
    ([1, (2,), 3], "tuple", 1),
    ([1, 2.5, 3], "float", 1),
    ([True, False, True], "bool", 0),
]


@pytest.mark.parametrize("name", ["ispline", "platt-decay", "venn-abers"])
def test_bad_keys_and_input_are_refused_and_change_nothing(name):
    strength = 25.0 if name in POOLED else 0
    cal = KeyedCalibrator(TEMPLATES[name], prior_strength=strength).update([1, 2, 3], [0.2, 0.5, 0.7], [0, 1, 1])
    before = to_bytes(cal)
    for bad, words, position in BAD_KEYS:
        with pytest.raises((TypeError, ValueError), match=words) as info:
            cal.update(bad, [0.1, 0.2, 0.3], [0, 1, 0])
        assert f"position {position}" in str(info.value)
    with pytest.raises(ValueError, match="position 1"):
        cal.update([1, 2], [0.3, float("nan")], [0, 1])
    with pytest.raises(ValueError, match="labels"):
        cal.prequential([1, 2], [0.3, 0.4], [0, 2])
    with pytest.raises(ValueError):
        cal.update([1, 2, 3], [0.3, 0.4], [0, 1])
    with pytest.raises(TypeError, match="kind already learned"):
        cal.update(["a"], [0.3], [1])
    with pytest.raises(TypeError, match="int or a string"):
        cal.learn_one({"key": None, "score": 0.3}, True)
    with pytest.raises((TypeError, ValueError), match="key"):
        cal.learn_one({"score": 0.3}, True)
    with pytest.raises(ValueError, match="position 0"):
        cal.predict_proba([1], [1.5])
    assert to_bytes(cal) == before


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"calibrator": VennAbersCalibrator(), "prior_strength": 5.0}, "prior_strength"),
        ({"calibrator": PAVCalibrator(buckets="quantile:16"), "prior_strength": 2.0}, "quantile"),
        ({"calibrator": ISplineCalibrator(buckets="quantile:16"), "prior_strength": 1.0}, "quantile"),
        ({"calibrator": ISplineCalibrator(), "prior_strength": -1.0}, "prior_strength"),
        ({"calibrator": ISplineCalibrator(), "max_keys": 0}, "max_keys"),
        ({"calibrator": ISplineCalibrator(), "key_key": 3}, "key_key"),
        ({"calibrator": ISplineCalibrator}, r"the class ISplineCalibrator: pass an instance, such as ISplineCalibrator\(\)"),
    ],
)
def test_bad_parameters(kwargs, words):
    with pytest.raises((TypeError, ValueError), match=words):
        KeyedCalibrator(**kwargs)
    with pytest.raises(TypeError, match="calibrator"):
        TemplateKeyedCalibrator(object())


def test_damaged_state_is_refused():
    keys, s, y, _w, _t = stream(n=200, seed=13)
    cal = KeyedCalibrator(TEMPLATES["platt"], prior_strength="auto").update(keys, s, y)
    state = cal.__getstate__()
    damages = {
        "_cals": lambda v: [*v[:-1], PlattCalibrator(refit_every=3, prior=None)],
        "_slot_keys": lambda v: [*v[:-1], v[0]],
        "_kf": lambda v: v[:-1],
        "_pver": lambda v: v + 100,
        "_src_fitted": lambda v: v + 2.0,
        "_src_rule": lambda v: np.array([v[0], 0.5]),
        "_global": lambda v: ISplineCalibrator(),
    }
    from streamcal.exceptions import StateFileError

    for name, damage in damages.items():
        bad = dict(state)
        bad[name] = damage(copy.copy(state[name]))
        obj = TemplateKeyedCalibrator.__new__(TemplateKeyedCalibrator)
        with pytest.raises(StateFileError):
            obj.__setstate__(bad)


def test_copies_pickles_and_predictions_change_nothing():
    import pickle

    keys, s, y, _w, _t = stream(n=300, seed=14)
    cal = KeyedCalibrator(TEMPLATES["ispline-count-every"], prior_strength="auto").update(keys, s, y)
    grid = np.linspace(0.01, 0.99, 30)
    ref = cal.predict_proba(np.full(30, 2), grid)
    before = to_bytes(cal)
    for other in (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal)), cal.clone().update(keys, s, y)):
        assert np.array_equal(other.predict_proba(np.full(30, 2), grid), ref)
        other.update(keys[:100], s[:100], 1 - y[:100])
    assert to_bytes(cal) == before
    for _ in range(3):  # a map refitted every refit_every labels: reads change nothing
        cal.predict_proba_one({"key": 2, "score": 0.4})
        cal.predict_llr(keys, s)
    assert to_bytes(cal) == before
    assert cal.clone().n_keys == 0


def _river_models():
    for i, params in enumerate(TemplateKeyedCalibrator._unit_test_params()):
        yield f"params{i}", params


@pytest.mark.parametrize(("label", "params"), list(_river_models()))
def test_river_checks(label, params):
    model = KeyedCalibrator(**params)
    assert type(model) is TemplateKeyedCalibrator
    skips = model._unit_test_skips()
    ran = 0
    for check in yield_checks(model):
        name = check.func.__name__ if isinstance(check, functools.partial) else check.__name__
        if name in skips:
            continue
        check(copy.deepcopy(model).clone())
        ran += 1
    assert ran > 5


def test_auto_prior_shifts_each_key_toward_its_own_level():
    # the default prior is the global map with each key's odds multiplied by its shrunk rate
    # ratio, as on the PAV path: an over-scored key is served below the global map, an
    # under-scored one above, each by its own ratio
    from streamcal import KeyedCalibrator, PlattCalibrator

    rng = np.random.default_rng(5)
    n, n_keys = 8192, 6
    keys = rng.integers(0, n_keys, size=n)
    s = rng.uniform(0.05, 0.6, size=n)
    shift = np.linspace(-1.2, 1.2, n_keys)[keys]
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(np.log(s / (1 - s)) + shift)))
    cal = KeyedCalibrator(PlattCalibrator()).update(keys, s, y)
    odds = [cal.key_shift(key) for key in range(n_keys)]
    assert odds == sorted(odds)
    assert odds[0] < 1.0 < odds[-1]
    grid = np.full(5, 0.2)
    glob = cal.global_calibrator.predict_proba(grid)[0]
    served = [cal.predict_proba(np.full(5, key), grid)[0] for key in range(n_keys)]
    assert served[0] < glob < served[-1]
    assert served == sorted(served)
    uniform = KeyedCalibrator(PlattCalibrator(), prior_strength=1e3).update(keys, s, y)
    assert all(uniform.key_shift(key) == 1.0 for key in range(n_keys))


def test_venn_abers_keys_give_their_own_intervals():
    # keyed Venn-Abers (independent keys): each key's (p0, p1) is its own calibrator's, a key
    # without a state gets the global calibrator's, and other templates have no intervals
    keys, s, y, w, t = stream(n=600, n_keys=3, seed=31)
    template = TEMPLATES["venn-abers"]
    cal = KeyedCalibrator(template, prior_strength=0).update(keys, s, y, weights=w, times=t)
    _p, _llr, cals = independent(template, keys, s, y, w, t)
    grid = np.linspace(0.02, 0.98, 25)
    for key in range(3):
        p0, p1 = cal.predict_interval(np.full(grid.size, key), grid)
        want0, want1 = cals[key].predict_interval(grid)
        assert np.array_equal(p0, want0)
        assert np.array_equal(p1, want1)
        assert (p0 <= p1).all()
    g0, g1 = cal.predict_interval(np.full(grid.size, 99), grid)
    want0, want1 = cal.global_calibrator.predict_interval(grid)
    assert np.array_equal(g0, want0)
    assert np.array_equal(g1, want1)
    with pytest.raises(TypeError, match="VennAbersCalibrator template"):
        KeyedCalibrator(TEMPLATES["platt"]).predict_interval([0], [0.5])


@pytest.mark.parametrize("name", ["venn-abers", "venn-abers-count"])
def test_venn_abers_keys_give_the_interval_of_every_prediction(monkeypatch, name):
    # prequential_with_interval / process_with_interval: each key's (proba, llr, p0, p1) are its own
    # calibrator's, event by event, bit for bit; a key's first event (no state yet) gets the
    # global calibrator's, which has learned every event before; chunked calls give the same bits
    import streamcal.keyed as keyed_module

    keys, s, y, w, t = stream(n=700, n_keys=4, seed=37)
    template = TEMPLATES[name]
    got = KeyedCalibrator(template, prior_strength=0).prequential_with_interval(keys, s, y, weights=w, times=t)
    everything = template.clone().prequential_with_interval(s, y, weights=w, times=t)
    first = np.array([np.flatnonzero(keys == key)[0] for key in np.unique(keys)])
    for key in np.unique(keys):
        at = np.flatnonzero(keys == key)
        own = template.clone().prequential_with_interval(s[at], y[at], weights=w[at], times=t[at])
        for a, b in zip(got, own, strict=True):
            assert a[at[1:]].tobytes() == b[1:].tobytes()
    for a, b in zip(got, everything, strict=True):
        assert a[first].tobytes() == b[first].tobytes()
    assert (got[2] <= got[0]).all()
    assert (got[0] <= got[3]).all()
    # process: NaN at the learn positions, the predictions as a loop of the river face's parts
    learn = np.random.default_rng(3).uniform(size=s.size) < 0.6
    cal = KeyedCalibrator(template, prior_strength=0)
    proc = cal.process_with_interval(keys, s, y, learn, weights=w, times=t)
    loop = KeyedCalibrator(template, prior_strength=0)
    for i in range(s.size):
        if learn[i]:
            loop.update([keys[i]], [s[i]], [y[i]], weights=[w[i]], times=[t[i]])
            assert all(np.isnan(a[i]) for a in proc)
        else:
            p0, p1 = loop.predict_interval([keys[i]], [s[i]])
            want = (loop.predict_proba([keys[i]], [s[i]])[0], loop.predict_llr([keys[i]], [s[i]])[0], p0[0], p1[0])
            assert [a[i] for a in proc] == list(want)
    grid = np.linspace(0.02, 0.98, 25)
    for key in range(5):  # key 4 has no state: the global calibrator's
        k = np.full(grid.size, key)
        assert np.array_equal(cal.predict_proba(k, grid), loop.predict_proba(k, grid))
        for a, b in zip(cal.predict_interval(k, grid), loop.predict_interval(k, grid), strict=True):
            assert np.array_equal(a, b)
    monkeypatch.setattr(keyed_module, "_CHUNK", 97)
    chunked = KeyedCalibrator(template, prior_strength=0).prequential_with_interval(keys, s, y, weights=w, times=t)
    for a, b in zip(got, chunked, strict=True):
        assert a.tobytes() == b.tobytes()


def test_only_venn_abers_keys_have_the_interval_methods_and_a_refused_call_changes_nothing():
    keys, s, y, w, t = stream(n=200, n_keys=3, seed=41)
    for cal in (KeyedCalibrator(), KeyedCalibrator(TEMPLATES["platt"])):
        for method in ("prequential_with_interval", "process_with_interval"):
            assert not hasattr(cal, method)
            with pytest.raises(AttributeError, match=method):
                getattr(cal, method)
    cal = KeyedCalibrator(TEMPLATES["venn-abers"], prior_strength=0).update(keys, s, y, weights=w, times=t)
    before = to_bytes(cal)
    bad = s[:10].copy()
    bad[7] = np.nan
    with pytest.raises(ValueError, match="position 7"):
        cal.prequential_with_interval(keys[:10], bad, y[:10], times=t[:10] + t[-1])
    with pytest.raises(ValueError, match="learn_mask"):
        cal.process_with_interval(keys[:10], s[:10], y[:10], [1, 0], times=t[:10] + t[-1])
    assert to_bytes(cal) == before
    empty = cal.prequential_with_interval([], [], [])
    assert [a.size for a in empty] == [0, 0, 0, 0]


def test_venn_abers_keys_give_the_interval_of_one_event_on_the_river_face():
    # predict_interval_one: the key's own calibrator's (p0, p1) as floats, the global calibrator's
    # for a key without a state; absent over other templates; a refused call changes nothing
    keys, s, y, w, t = stream(n=500, n_keys=3, seed=43)
    cal = KeyedCalibrator(TEMPLATES["venn-abers"], prior_strength=0).update(keys, s, y, weights=w, times=t)
    for key, score in [(0, 0.2), (1, 0.5), (2, 0.83), (0, 0.97), (99, 0.4), (99, 0.61)]:
        own = cal.key_state(key) if key in cal else cal.global_calibrator
        got = cal.predict_interval_one({"key": key, "score": score})
        assert all(type(v) is float for v in got)
        assert got == own.predict_interval_one({"score": score})
        assert got == tuple(float(a[0]) for a in cal.predict_interval([key], [score]))
    for other in (KeyedCalibrator(), KeyedCalibrator(TEMPLATES["platt"])):
        assert not hasattr(other, "predict_interval_one")
        with pytest.raises(AttributeError, match="predict_interval_one"):
            other.predict_interval_one
    before = to_bytes(cal)
    with pytest.raises(ValueError, match=r"^`x\['score'\]`.*nan") as info:
        cal.predict_interval_one({"key": 1, "score": float("nan")})
    assert "position" not in str(info.value)
    with pytest.raises(streamcal.exceptions.InvalidKeyError, match=r"^`x\['key'\]`.*'a'"):
        cal.predict_interval_one({"key": "a", "score": 0.5})
    assert to_bytes(cal) == before
