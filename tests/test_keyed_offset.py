"""KeyedOffsetCalibrator: a global streaming calibrator plus per-key logit offsets shrunk by
empirical Bayes (DerSimonian–Laird), checked against a slow reference written out here."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal import KeyedCalibrator, KeyedOffsetCalibrator, PAVCalibrator, PlattCalibrator
from streamcal._kernels import _config
from streamcal.exceptions import InvalidKeyError


# ------------------------------------------------------------------------------ the reference
def naive_keyed_offset(keys, p0, labels, weights=None, fixed_tau2=None):
    """Prequential per-key offsets, event by event, every quantity recomputed from scratch.

    ``p0`` is the global map's probability of each event before its label. Per key: weight N,
    positives Y, expected E = Σwp, information I = Σwp(1-p). The offset is the difference of the
    empirical logits (Haldane's half pseudo-events); τ² is DerSimonian–Laird's estimate on the
    score statistics z = (Y - E) / I with weights I over the keys with I > 0; the served
    probability moves p0 in logit by offset · τ² / (τ² + 1 / I).
    """
    w = np.ones(len(keys)) if weights is None else np.asarray(weights, dtype=float)
    sums: dict = {}
    out = np.empty(len(keys))
    for i, key in enumerate(keys):
        key = key.item() if isinstance(key, np.generic) else key
        # τ² from every key, from scratch
        if fixed_tau2 is not None:
            tau2 = fixed_tau2
        else:
            u = [s["I"] for s in sums.values() if s["I"] > 0]
            z = [(s["Y"] - s["E"]) / s["I"] for s in sums.values() if s["I"] > 0]
            tau2 = 0.0
            if len(u) >= 2:
                su = sum(u)
                zbar = sum(a * b for a, b in zip(u, z)) / su
                q = sum(a * (b - zbar) ** 2 for a, b in zip(u, z))
                denominator = su - sum(a * a for a in u) / su
                if denominator > 0:
                    tau2 = max(0.0, (q - (len(u) - 1)) / denominator)
        p = float(p0[i])
        s = sums.get(key)
        if s is not None and s["I"] > 0 and tau2 > 0:
            n, y, e = s["N"], s["Y"], s["E"]
            offset = math.log((y + 0.5) / (n - y + 0.5)) - math.log((e + 0.5) / (n - e + 0.5))
            applied = offset * tau2 / (tau2 + 1.0 / s["I"])
            r = math.exp(applied)
            p = p * r / ((1 - p) + p * r)
        out[i] = p
        s = sums.setdefault(key, {"N": 0.0, "Y": 0.0, "E": 0.0, "I": 0.0})
        s["N"] += w[i]
        s["Y"] += w[i] * float(labels[i])
        s["E"] += w[i] * float(p0[i])
        s["I"] += w[i] * float(p0[i]) * (1 - float(p0[i]))
    return out


def campaign_stream(n=6000, n_keys=12, shift_sd=0.8, seed=0, zipf=1.1):
    """Keys with Zipf traffic, each shifting the true logit by its own amount."""
    rng = np.random.default_rng(seed)
    share = np.arange(1, n_keys + 1, dtype=float) ** -zipf
    keys = rng.choice(n_keys, size=n, p=share / share.sum())
    shift = rng.normal(0.0, shift_sd, n_keys) if shift_sd else np.zeros(n_keys)
    logit = rng.normal(-2.5, 1.0, n)
    scores = 1 / (1 + np.exp(-logit))
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-(logit + shift[keys])))
    return keys, scores, labels, shift


def state_of(cal):
    table = cal.key_offsets()
    return {name: (list(v) if isinstance(v, list) else v.tolist()) for name, v in table.items()}, cal.tau2


# ------------------------------------------------------------------------------ against the reference
@pytest.mark.parametrize("weighted", [False, True])
def test_prequential_matches_the_naive_reference(weighted):
    keys, scores, labels, _ = campaign_stream(n=3000, n_keys=15)
    weights = np.random.default_rng(1).uniform(0.2, 3.0, keys.size) if weighted else None
    cal = KeyedOffsetCalibrator()
    proba, llr = cal.prequential(keys, scores, labels, weights=weights)
    p0, llr0 = PAVCalibrator().prequential(scores, labels, weights=weights)
    expected = naive_keyed_offset(keys, p0, labels, weights)
    np.testing.assert_allclose(proba, expected, rtol=1e-10, atol=0)
    np.testing.assert_array_equal(llr, llr0)  # the LLR is the global map's
    assert cal.tau2 > 0.0  # the keys differ, so the offsets are used
    assert np.mean(np.abs(proba - p0)) > 1e-3


def test_sums_stay_exact_over_many_updates():
    """The DerSimonian–Laird sums are kept by adding and removing one key's terms per event;
    their periodic recomputation keeps them equal to the sums over the keys."""
    keys, scores, labels, _ = campaign_stream(n=30_000, n_keys=40, seed=3)
    cal = KeyedOffsetCalibrator()
    proba, _ = cal.prequential(keys, scores, labels)
    p0, _ = PAVCalibrator().prequential(scores, labels)
    table = cal.key_offsets()
    information, score = table["information"], table["positives"] - table["expected"]
    su = information.sum()
    q = np.sum(score**2 / information) - score.sum() ** 2 / su
    tau2 = max(0.0, (q - (information.size - 1)) / (su - np.sum(information**2) / su))
    assert cal.tau2 == pytest.approx(tau2, rel=1e-9)
    tail = slice(29_000, None)
    np.testing.assert_allclose(proba[tail], naive_keyed_offset(keys, p0, labels)[tail], rtol=1e-9)


# ------------------------------------------------------------------------------ faces
def river_loop(cal, keys, scores, labels, weights=None, learn=None):
    out = np.full(len(keys), np.nan)
    for i, (k, s, y) in enumerate(zip(keys.tolist(), scores.tolist(), labels.tolist())):
        x = {"key": k, "score": s}
        if learn is None or not learn[i]:
            out[i] = cal.predict_proba_one(x)[True]
        if learn is None or learn[i]:
            cal.learn_one(x, y, w=1.0 if weights is None else float(weights[i]))
    return out


def test_array_face_equals_a_loop_of_the_river_face_bit_for_bit():
    keys, scores, labels, _ = campaign_stream(n=2500, n_keys=10)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, keys.size)
    a, b = KeyedOffsetCalibrator(), KeyedOffsetCalibrator()
    proba, _ = a.prequential(keys, scores, labels, weights=weights)
    looped = river_loop(b, keys, scores, labels, weights)
    np.testing.assert_array_equal(proba, looped)
    assert state_of(a) == state_of(b)
    probe = np.linspace(0.01, 0.5, 7)
    for key in range(10):
        assert a.predict_llr_one({"key": key, "score": 0.1}) == b.predict_llr_one({"key": key, "score": 0.1})
        np.testing.assert_array_equal(a.predict_proba(np.full(7, key), probe), b.predict_proba(np.full(7, key), probe))


def test_process_equals_the_river_loop_and_update_equals_prequential():
    keys, scores, labels, _ = campaign_stream(n=2000, n_keys=8, seed=5)
    learn = np.random.default_rng(3).uniform(size=keys.size) < 0.6
    a, b = KeyedOffsetCalibrator(), KeyedOffsetCalibrator()
    proba, llr = a.process(keys, scores, labels, learn)
    looped = river_loop(b, keys, scores, labels, learn=learn)
    np.testing.assert_array_equal(proba, looped)
    assert np.isnan(proba[learn]).all()
    assert np.isnan(llr[learn]).all()
    assert state_of(a) == state_of(b)

    c, d = KeyedOffsetCalibrator(), KeyedOffsetCalibrator()
    c.prequential(keys, scores, labels)
    assert d.update(keys, scores, labels) is d
    assert state_of(c) == state_of(d)
    # every event learned: process gives what prequential gives
    e = KeyedOffsetCalibrator()
    np.testing.assert_array_equal(e.process(keys, scores, labels, np.ones(keys.size, bool))[0], np.nan * proba)
    assert state_of(e) == state_of(c)


def test_interpreted_and_compiled_tiers_give_the_same_bits():
    keys, scores, labels, _ = campaign_stream(n=1500, n_keys=9)
    compiled = KeyedOffsetCalibrator().prequential(keys, scores, labels)
    with _config.interpreting():
        interpreted = KeyedOffsetCalibrator().prequential(keys, scores, labels)
    np.testing.assert_array_equal(compiled[0], interpreted[0])
    np.testing.assert_array_equal(compiled[1], interpreted[1])


def test_keys_of_every_column_kind_and_unseen_keys():
    pa = pytest.importorskip("pyarrow")
    keys, scores, labels, _ = campaign_stream(n=1000, n_keys=5)
    names = np.array(["north", "south", "east", "west", "centre"])[keys]
    a = KeyedOffsetCalibrator()
    reference = a.prequential(names, scores, labels)[0]
    for column in (names.tolist(), pa.array(names), names.astype(object)):
        np.testing.assert_array_equal(KeyedOffsetCalibrator().prequential(column, scores, labels)[0], reference)
    assert sorted(a.keys()) == ["centre", "east", "north", "south", "west"]
    assert a.n_keys == 5
    # a key never learned gets the global map, and is not added by predicting
    global_p = a.global_calibrator.predict_proba([0.1, 0.2])
    np.testing.assert_array_equal(a.predict_proba(["mars", "mars"], [0.1, 0.2]), global_p)
    assert a.predict_proba_one({"key": "mars", "score": 0.1})[True] == global_p[0]
    assert a.n_keys == 5


# ------------------------------------------------------------------------------ shrinkage limits
def test_zero_between_key_variance_serves_the_global_map_bit_for_bit():
    keys, scores, labels, _ = campaign_stream(n=3000)
    proba, _ = KeyedOffsetCalibrator(between_key_variance=0.0).prequential(keys, scores, labels)
    p0, _ = PAVCalibrator().prequential(scores, labels)
    np.testing.assert_array_equal(proba, p0)


def test_one_key_serves_the_global_map():
    keys, scores, labels, _ = campaign_stream(n=3000, n_keys=1)
    cal = KeyedOffsetCalibrator()
    proba, _ = cal.prequential(keys, scores, labels)
    np.testing.assert_array_equal(proba, PAVCalibrator().prequential(scores, labels)[0])
    assert cal.tau2 == 0.0


def test_a_huge_between_key_variance_serves_each_keys_own_offset():
    keys, scores, labels, _ = campaign_stream(n=3000)
    cal = KeyedOffsetCalibrator(between_key_variance=1e12)
    cal.update(keys, scores, labels)
    table = cal.key_offsets()
    np.testing.assert_allclose(table["shrinkage"], 1.0, rtol=1e-9)
    key = table["key"][0]
    p0 = cal.global_calibrator.predict_proba([0.05])[0]
    own = 1 / (1 + math.exp(-(math.log(p0 / (1 - p0)) + table["offset"][0])))
    assert cal.predict_proba([key], [0.05])[0] == pytest.approx(own, rel=1e-9)


def test_a_key_with_much_evidence_keeps_its_own_offset_and_a_sparse_one_leans_on_the_global_map():
    keys, scores, labels, shift = campaign_stream(n=200_000, n_keys=30, shift_sd=0.6, seed=7)
    cal = KeyedOffsetCalibrator()
    cal.update(keys, scores, labels)
    table = cal.key_offsets()
    big = table["key"].index(0)
    assert table["shrinkage"][big] > 0.97
    # the offset is relative to the global map, which averages the keys: compare differences
    small = int(np.argmin(table["weight"]))
    assert table["shrinkage"][small] < table["shrinkage"][big]
    assert 0.1 < cal.tau2 < 1.0  # the true offsets' variance is 0.36 (seeded draw below)
    assert np.var(shift) == pytest.approx(0.36, abs=0.2)
    order = [table["key"].index(k) for k in range(5)]
    applied = np.asarray(table["applied"])[order]
    np.testing.assert_allclose(applied - applied[0], shift[:5] - shift[0], atol=0.15)


def test_keys_without_a_difference_get_almost_no_offset():
    keys, scores, labels, _ = campaign_stream(n=60_000, n_keys=200, shift_sd=0.0, seed=4)
    cal = KeyedOffsetCalibrator()
    cal.update(keys, scores, labels)
    assert cal.tau2 < 0.02
    assert np.max(np.abs(cal.key_offsets()["applied"])) < 0.1


# ------------------------------------------------------------------------------ bad input
BAD_KEYS = [
    ([0, None, 2], r"`keys` must hold integer or string keys; got None at position 1 \(a missing key\)"),
    (np.array([0.0, np.nan, 1.0]), r"`keys` must hold integer or string keys; got nan at position 1"),
    ([1.5, 2.5, 3.5], r"`keys` must hold integer or string keys; got 1\.5 at position 0 \(a float\)"),
    ([0, "a", 1], r"got 'a' at position 1 \(the keys before it are ints"),
    ([0, [1], 2], r"got \[1\] at position 1 \(a list\)"),
    ([0, {"k": 1}, 2], r"got \{'k': 1\} at position 1 \(a dict\)"),
    ([True, False, True], r"got True at position 0"),
    ([0, 1], r"`keys` must hold one key per event \(3\); got 2"),
]


@pytest.mark.parametrize(("keys", "message"), BAD_KEYS)
def test_bad_keys_get_a_clear_error_and_change_nothing(keys, message):
    k, s, y, _ = campaign_stream(n=500, n_keys=4)
    cal = KeyedOffsetCalibrator()
    cal.update(k, s, y)
    before = pickle.dumps(cal)
    for call in (
        lambda: cal.prequential(keys, [0.1, 0.2, 0.3], [0, 1, 0]),
        lambda: cal.update(keys, [0.1, 0.2, 0.3], [0, 1, 0]),
        lambda: cal.process(keys, [0.1, 0.2, 0.3], [0, 1, 0], [1, 0, 1]),
        lambda: cal.predict_proba(keys, [0.1, 0.2, 0.3]),
    ):
        with pytest.raises((ValueError, TypeError), match=message):
            call()
        assert pickle.dumps(cal) == before


def test_keys_of_another_kind_than_learned_are_refused():
    cal = KeyedOffsetCalibrator()
    cal.update([1, 2], [0.1, 0.2], [0, 1])
    before = pickle.dumps(cal)
    with pytest.raises(InvalidKeyError, match=r"`keys` must hold int keys, as this calibrator learned before; got 'a'"):
        cal.update(["a", "b"], [0.1, 0.2], [0, 1])
    with pytest.raises(InvalidKeyError, match=r"`keys` must hold int keys.*got 'a' at position 0"):
        cal.predict_proba(["a"], [0.1])
    with pytest.raises(InvalidKeyError, match=r"^`x\['key'\]` must hold int keys.*got 'a' \(one kind"):
        cal.learn_one({"key": "a", "score": 0.1}, True)
    with pytest.raises(InvalidKeyError, match=r"^`x\['key'\]` must hold int keys.*got 'a' \(one kind"):
        cal.predict_proba_one({"key": "a", "score": 0.1})
    assert pickle.dumps(cal) == before


@pytest.mark.parametrize(
    ("x", "error", "message"),
    [
        ({"score": 0.1}, InvalidKeyError, r"^`x` must hold the key under 'key'"),
        ({"key": None, "score": 0.1}, InvalidKeyError, r"^`x\['key'\]` must hold integer or string keys; got None \("),
        ({"key": float("nan"), "score": 0.1}, InvalidKeyError, r"got nan \("),
        ({"key": [1], "score": 0.1}, ValueError, r"got \[1\]"),
        ({"key": 1, "score": 0.1, "other": 2}, ValueError, r"exactly one entry besides 'key'"),
        ({"key": 1, "score": 1.5}, ValueError, r"1\.5"),
        ({"key": 1, "score": float("nan")}, ValueError, r"nan"),
        ([1, 0.1], TypeError, r"`x` must be a dict"),
    ],
)
def test_bad_river_input_gets_a_clear_error_and_changes_nothing(x, error, message):
    k, s, y, _ = campaign_stream(n=300, n_keys=3)
    cal = KeyedOffsetCalibrator().update(k, s, y)
    before = pickle.dumps(cal)
    with pytest.raises(error, match=message):
        cal.learn_one(x, True)
    with pytest.raises(error, match=message):
        cal.predict_proba_one(x)
    assert pickle.dumps(cal) == before


def test_river_face_errors_are_those_of_keyed_calibrator():
    """Both keyed calibrators refuse a bad event of the river face with the same error type, one
    line without a position (one event), naming ``x``'s entry; a refused call changes nothing."""
    bad = [
        {"s": 0.1},  # no key
        {"key": "a", "s": 0.1},  # a key of the other kind
        {"key": None, "s": 0.1},
        {"key": 1.5, "s": 0.1},
        {"key": 1, "score": 0.1},  # no score under score_key
        {"key": 1, "s": float("nan")},
    ]
    cals = [KeyedCalibrator(score_key="s"), KeyedOffsetCalibrator(score_key="s")]
    for cal in cals:
        cal.learn_one({"key": 1, "s": 0.3}, True)
    for x in bad:
        kinds = []
        for cal in cals:
            before = pickle.dumps(cal)
            for call in (lambda: cal.learn_one(x, True), lambda: cal.predict_proba_one(x)):
                with pytest.raises(ValueError) as info:
                    call()
                text = str(info.value)
                assert "position" not in text
                assert text.startswith("`x")
                kinds.append(type(info.value))
            assert pickle.dumps(cal) == before
        assert len(set(kinds)) == 1, (x, kinds)
        if "key" not in x or x["key"] != 1:
            assert kinds[0] is InvalidKeyError


def test_bad_labels_weights_and_scores_name_their_position_and_change_nothing():
    k, s, y, _ = campaign_stream(n=300, n_keys=3)
    cal = KeyedOffsetCalibrator().update(k, s, y)
    before = pickle.dumps(cal)
    with pytest.raises(ValueError, match=r"`labels` must hold binary labels.*got 2 at position 1"):
        cal.prequential([0, 1, 2], [0.1, 0.2, 0.3], [0, 2, 1])
    with pytest.raises(ValueError, match=r"`weights` must be finite and non-negative; got -1\.0 at position 2"):
        cal.update([0, 1, 2], [0.1, 0.2, 0.3], [0, 1, 1], weights=[1.0, 1.0, -1.0])
    with pytest.raises(ValueError, match=r"`scores`.*at position 2"):
        cal.prequential([0, 1, 2], [0.1, 0.2, 1.5], [0, 1, 1])
    # process: learned events run twice through the global map, yet errors name the caller's position
    with pytest.raises(ValueError, match=r"`scores`.*at position 2"):
        cal.process([0, 1, 2, 0], [0.1, 0.2, 1.5, 0.3], [0, 1, 1, 0], [1, 1, 1, 0])
    with pytest.raises(ValueError, match=r"`labels` must hold binary labels.*at position 1"):
        cal.process([0, 1, 2], [0.1, 0.2, 0.3], [0, 5, 1], [0, 1, 1])
    with pytest.raises(ValueError, match=r"y"):
        cal.learn_one({"key": 0, "score": 0.1}, 3)
    assert pickle.dumps(cal) == before


def test_bad_parameters():
    with pytest.raises(TypeError, match=r"`calibrator` must be an unkeyed streaming binary calibrator"):
        KeyedOffsetCalibrator(calibrator="pav")
    with pytest.raises(ValueError, match=r"between_key_variance"):
        KeyedOffsetCalibrator(between_key_variance=-1.0)
    with pytest.raises(TypeError, match=r"`key_key` must be a str"):
        KeyedOffsetCalibrator(key_key=3)


# ------------------------------------------------------------------------------ templates, copies
def test_another_template_and_a_score_key():
    keys, scores, labels, _ = campaign_stream(n=2000, n_keys=6)
    template = PlattCalibrator(score_key="p")
    cal = KeyedOffsetCalibrator(template, key_key="campaign", score_key="p")
    proba, _ = cal.prequential(keys, scores, labels)
    assert isinstance(cal.global_calibrator, PlattCalibrator)
    assert template.n_learned == 0  # the template is cloned, never changed
    other = KeyedOffsetCalibrator(PlattCalibrator(score_key="p"), key_key="campaign", score_key="p")
    looped = np.array(
        [
            [
                other.predict_proba_one({"campaign": k, "p": s, "extra": 1})[True],
                other.learn_one({"campaign": k, "p": s}, y),
            ][0]
            for k, s, y in zip(keys.tolist(), scores.tolist(), labels.tolist())
        ]
    )
    np.testing.assert_array_equal(proba, looped)


def test_pickle_and_clone_keep_predictions():
    keys, scores, labels, _ = campaign_stream(n=2000, n_keys=6)
    cal = KeyedOffsetCalibrator().update(keys, scores, labels)
    again = pickle.loads(pickle.dumps(cal))
    probe_k, probe_s = np.arange(6), np.linspace(0.02, 0.4, 6)
    np.testing.assert_array_equal(cal.predict_proba(probe_k, probe_s), again.predict_proba(probe_k, probe_s))
    fresh = cal.clone()
    assert fresh.n_keys == 0
    np.testing.assert_array_equal(
        fresh.prequential(keys, scores, labels)[0], KeyedOffsetCalibrator().prequential(keys, scores, labels)[0]
    )


def test_memory_is_a_few_floats_per_key_whatever_the_buckets():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 50_000, 100_000)
    scores = rng.uniform(0.01, 0.3, 100_000)
    cal = KeyedOffsetCalibrator().update(keys, scores, rng.uniform(size=100_000) < scores)
    per_key = sum(v.nbytes for v in cal.key_offsets().values() if isinstance(v, np.ndarray)) / cal.n_keys
    assert cal.n_keys == np.unique(keys).size
    assert per_key <= 9 * 8  # the table's nine columns of float64; the state holds five


# ------------------------------------------------------------------------------ properties
@given(
    st.lists(
        st.tuples(
            st.integers(0, 4),
            st.floats(0.001, 0.999),
            st.booleans(),
            st.sampled_from([0.0, 0.5, 1.0, 2.0]),
            st.booleans(),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 3),
)
def test_process_in_pieces_equals_the_river_loop(events, pieces):
    """Any ordered sequence of predictions and learns, cut into any pieces, gives what a loop of
    the river face gives, and the same state."""
    keys = np.array([e[0] for e in events])
    scores = np.array([e[1] for e in events])
    labels = np.array([e[2] for e in events])
    weights = np.array([e[3] for e in events])
    learn = np.array([e[4] for e in events])
    a, b = KeyedOffsetCalibrator(), KeyedOffsetCalibrator()
    out = []
    for part in np.array_split(np.arange(len(events)), pieces):
        out.append(a.process(keys[part], scores[part], labels[part], learn[part], weights=weights[part])[0])
    looped = river_loop(b, keys, scores, labels, weights, learn)
    np.testing.assert_array_equal(np.concatenate(out), looped)
    assert state_of(a) == state_of(b)


def test_the_class_saves_and_loads_like_the_other_learners(tmp_path):
    rng = np.random.default_rng(11)
    k, s = rng.integers(0, 6, 3000), rng.uniform(size=3000)
    y = rng.uniform(size=3000) < s
    cal = KeyedOffsetCalibrator().update(k[:1500], s[:1500], y[:1500])
    path = cal.save(tmp_path / "offset.zip")
    back = KeyedOffsetCalibrator.load(path)
    for got, want in zip(back.prequential(k[1500:], s[1500:], y[1500:]), cal.prequential(k[1500:], s[1500:], y[1500:]), strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="holds a KeyedOffsetCalibrator, not a KeyedCalibrator"):
        KeyedCalibrator.load(path)
