"""Keys given as a subclass of str (numpy's ``str_``) are their str values on every face, and every
refused key raises :class:`streamcal.exceptions.InvalidKeyError`, both a ValueError and a TypeError."""

import numpy as np
import pytest

import streamcal
from streamcal.exceptions import InvalidKeyError
from streamcal.metrics import field_ece
from streamcal.monitor import KeyedMonitor, MeanBiasCS


def _stream(n=1500, seed=3):
    rng = np.random.default_rng(seed)
    keys = np.array(["books", "shoes", "toys"])[rng.integers(0, 3, n)]
    scores = rng.uniform(0.01, 0.99, n)
    labels = (rng.uniform(size=n) < scores).astype(np.int64)
    return keys, scores, labels


@pytest.mark.parametrize("form", [list, tuple])
def test_numpy_str_keys_in_a_list_equal_plain_strings(form):
    keys, scores, labels = _stream()
    plain = streamcal.KeyedCalibrator().prequential([str(k) for k in keys], scores, labels)
    numpy_str = streamcal.KeyedCalibrator().prequential(form(keys), scores, labels)  # np.str_ items
    assert isinstance(form(keys)[0], np.str_)
    np.testing.assert_array_equal(numpy_str[0], plain[0])
    np.testing.assert_array_equal(numpy_str[1], plain[1])


def test_numpy_str_keys_on_the_river_face_equal_plain_strings():
    keys, scores, labels = _stream(n=300)
    plain, numpy_str = streamcal.KeyedCalibrator(), streamcal.KeyedCalibrator()
    for k, s, y in zip(keys, scores, labels):
        got = numpy_str.predict_proba_one({"key": k, "score": s})
        assert got == plain.predict_proba_one({"key": str(k), "score": s})
        numpy_str.learn_one({"key": k, "score": s}, bool(y))
        plain.learn_one({"key": str(k), "score": s}, bool(y))
    held = list(numpy_str.keys())
    assert sorted(held) == ["books", "shoes", "toys"]
    assert all(type(k) is str for k in held)


def test_numpy_str_keys_in_the_keyed_monitor_and_field_ece():
    keys, scores, labels = _stream(n=400)
    by_str, by_np = KeyedMonitor(MeanBiasCS()), KeyedMonitor(MeanBiasCS())
    for k, s, y in zip(keys, scores, labels):
        by_np.update(k, int(y), float(s))
        by_str.update(str(k), int(y), float(s))
    np.testing.assert_array_equal(by_np.update_many(list(keys), labels, scores),
                                  by_str.update_many([str(k) for k in keys], labels, scores))
    assert field_ece(list(keys), labels, scores) == field_ece([str(k) for k in keys], labels, scores)


@pytest.mark.parametrize(
    ("keys", "at"),
    [([1, None], 1), ([1, "a"], 1), (["a", 1.5], 1), ([1, True], 1), (np.array([0.5, 1.5]), 0)],
)
def test_a_refused_key_column_raises_invalid_key_error_and_learns_nothing(keys, at):
    cal = streamcal.KeyedCalibrator()
    cal.update([7, 8], [0.3, 0.6], [0, 1])
    before = streamcal.persist.to_bytes(cal)
    with pytest.raises(InvalidKeyError, match=f"at position {at}"):
        cal.update(keys, [0.2, 0.7], [0, 1])
    assert streamcal.persist.to_bytes(cal) == before
    assert issubclass(InvalidKeyError, ValueError)
    assert issubclass(InvalidKeyError, TypeError)


@pytest.mark.parametrize("key", [None, 2.5, True, "seven"])
def test_a_refused_key_on_the_river_face_raises_invalid_key_error(key):
    cal = streamcal.KeyedCalibrator()
    cal.learn_one({"key": 7, "score": 0.4}, True)
    before = streamcal.persist.to_bytes(cal)
    with pytest.raises(InvalidKeyError, match="x\\['key'\\]"):
        cal.learn_one({"key": key, "score": 0.4}, True)
    assert streamcal.persist.to_bytes(cal) == before
