"""``prior_strength="auto"``: the prior's weight is the global map's, up to the evidence at which a
key's own shape is as reliable as the prior's, set from how much the keys' shapes differ
(:mod:`streamcal._keyed_shape`), at most 500 positives' worth: a key with more evidence than that
follows its own data however much traffic the global map has seen, the sooner the more the keys'
shapes differ."""

from __future__ import annotations

import math

import numpy as np
import pytest
from naive import naive_shape_bound
from state_files import pack, unpack

from streamcal import KeyedCalibrator, PAVCalibrator, PlattCalibrator, merge
from streamcal._keyed_shape import SHAPE_POSITIVES
from streamcal.persist import from_bytes, to_bytes

BINS = 4  # the shape bins (streamcal._keyed_shape.SHAPE_BINS)


def _three_keys(n=60_000, seed=0):
    """Keys 0 and 1 calibrated; key 2's rate is 0.15 whatever the score."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 3, n)
    s = 1 / (1 + np.exp(-rng.normal(-2.0, 1.0, n)))
    return k, s, rng.uniform(size=n) < np.where(k == 2, 0.15, s)


def _zipf(slopes: bool, n=3 << 15, n_keys=200, seed=7):
    """Zipf keys with a logit offset each; with ``slopes``, a slope of their own in [0.3, 2]."""
    rng = np.random.default_rng(seed)
    traffic = 1.0 / np.arange(1, n_keys + 1) ** 1.1
    keys = rng.choice(n_keys, n, p=traffic / traffic.sum())
    offset = rng.normal(0.0, 0.5, n_keys)
    slope = rng.uniform(0.3, 2.0, n_keys) if slopes else np.ones(n_keys)
    z = rng.normal(-3.0, 1.0, n)
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(slope[keys] * (z + 3.0) - 3.0 + offset[keys])))
    return keys, 1.0 / (1.0 + np.exp(-z)), y


def _log_loss(y, p):
    return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))


def _rate(cal) -> float:
    row = cal.global_calibrator.window_histogram.row()
    return float(row.pos.sum() / (row.pos.sum() + row.neg.sum()))


def test_a_key_with_much_evidence_follows_its_own_shape():
    k, s, y = _three_keys()
    pooled = KeyedCalibrator()
    p, _ = pooled.prequential(k, s, y)
    q, _ = KeyedCalibrator(prior_strength=0).prequential(k, s, y)
    served = pooled.predict_proba([2] * 4, [0.02, 0.1, 0.25, 0.45])
    assert served.min() > 0.14
    assert served.max() < 0.16  # the global map's shape: 0.09 to 0.28; 500 positives: 0.14 to 0.17
    late = (k == 2) & (np.arange(k.size) >= k.size // 2)
    assert _log_loss(y[late], p[late]) < 1.001 * _log_loss(y[late], q[late])  # 500 positives: 1.0017x


@pytest.mark.parametrize("slopes", [True, False], ids=["shapes-differ", "shapes-shared"])
def test_the_strength_is_the_global_weight_up_to_the_shape_bound(slopes):
    k, s, y = _zipf(slopes)  # 6 * 2**14 events: the prior refreshes at the last one
    cal = KeyedCalibrator().update(k, s, y)
    held = cal.keys()
    bound = naive_shape_bound([cal.export_key(key)["shape"] for key in held], _rate(cal))
    cap = SHAPE_POSITIVES / _rate(cal)
    if slopes:
        assert bound < min(cal.global_calibrator.window_weight, cap)
        assert cal.strength == pytest.approx(bound, rel=1e-9)
    else:
        assert bound == math.inf  # no departure beyond the keys' noise: the cap
        assert cal.strength == pytest.approx(min(cap, cal.global_calibrator.window_weight), rel=1e-12)


def test_shared_shapes_pool_more_than_differing_ones():
    shared = KeyedCalibrator().update(*_zipf(slopes=False))
    differ = KeyedCalibrator().update(*_zipf(slopes=True))
    assert shared.strength > 5 * differ.strength
    assert shared.strength == pytest.approx(SHAPE_POSITIVES / _rate(shared), rel=1e-12)  # the cap


def test_few_keys_whose_shapes_the_estimate_cannot_tell_apart_pool_up_to_the_cap():
    # three keys, rates the score times 0.5, 1 and 1.5: the moment estimate over three keys sees
    # no departure beyond their noise; the cap keeps the third key's own rate within reach
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 3, size=6000)
    scores = rng.uniform(0.01, 0.99, size=6000)
    labels = rng.uniform(size=6000) < np.clip(scores * np.array([0.5, 1.0, 1.5])[keys], 0, 1)
    cal = KeyedCalibrator()
    cal.prequential(keys, scores, labels)
    # the cap at the last refresh's rate: about 1,060 events, against the global map's 6,000
    assert 0.9 * SHAPE_POSITIVES / _rate(cal) < cal.strength < 1.1 * SHAPE_POSITIVES / _rate(cal)
    assert cal.strength < 0.25 * cal.global_calibrator.window_weight
    assert cal.predict_proba([2], [0.5])[0] > 0.65  # fully pooled: 0.63; its rate there 0.75


def test_the_shape_sums_add_up_to_the_key_sums():
    k, s, y = _zipf(slopes=True, n=5000)
    cal = KeyedCalibrator().update(k, s, y)
    for key in cal.keys()[:20]:
        row = cal.export_key(key)
        assert row["shape"][:BINS].sum() == pytest.approx(row["observed"], rel=1e-12, abs=1e-12)
        assert row["shape"][BINS:].sum() == pytest.approx(row["expected"], rel=1e-12)
        assert (row["shape"] >= 0).all()


def test_a_merge_adds_the_shape_sums():
    k, s, y = _zipf(slopes=True, n=6000)
    a = KeyedCalibrator().update(k[:3000], s[:3000], y[:3000])
    b = KeyedCalibrator().update(k[3000:], s[3000:], y[3000:])
    both = merge([a, b])
    held = both.keys()
    assert len(held) > 50
    for key in held:
        want = sum(part.export_key(key)["shape"] for part in (a, b) if key in part)
        np.testing.assert_array_equal(both.export_key(key)["shape"], want)


def test_import_key_carries_the_shape_sums_and_reads_the_form_without_them():
    k, s, y = _zipf(slopes=True, n=3000)
    cal = KeyedCalibrator().update(k, s, y)
    row = cal.export_key(0)
    other = KeyedCalibrator()
    other.import_key(0, row)
    np.testing.assert_array_equal(other.export_key(0)["shape"], row["shape"])
    other.import_key(0, {name: v for name, v in row.items() if name != "shape"})
    assert not other.export_key(0)["shape"].any()
    before = other.export_key(0)
    bad = dict(row, shape=np.r_[row["shape"][:-1], -1.0])
    with pytest.raises(ValueError, match=r"state\['shape'\].*-1\.0 at position 7"):
        other.import_key(0, bad)
    np.testing.assert_array_equal(other.export_key(0)["shape"], before["shape"])


def _without_shape_sums(data: bytes) -> bytes:
    """A state file as written before the shape sums: ``_kf`` without their columns."""
    manifest, arrays, pickles = unpack(data)
    kf = [name for name, a in arrays.items() if a.ndim == 2 and a.dtype == np.float64 and a.shape[1] == 13 + 2 * BINS]
    assert len(kf) == 1
    arrays[kf[0]] = np.ascontiguousarray(arrays[kf[0]][:, :13])
    return pack(manifest, arrays, pickles)


@pytest.mark.parametrize("template", [None, PlattCalibrator()], ids=["pav", "platt"])
def test_a_state_without_shape_sums_loads_and_continues(template):
    k, s, y = _zipf(slopes=True, n=4000)
    cal = KeyedCalibrator(template).update(k[:3000], s[:3000], y[:3000])
    old = from_bytes(_without_shape_sums(to_bytes(cal)))
    key = cal.keys()[0]
    np.testing.assert_array_equal(old.predict_proba(k[3000:], s[3000:]), cal.predict_proba(k[3000:], s[3000:]))
    if template is None:
        assert not old.export_key(key)["shape"].any()  # the documented default: no shape evidence yet
    assert old.strength == cal.strength
    old.update(k[3000:], s[3000:], y[3000:])  # and it learns on
    assert old.n_keys == cal.update(k[3000:], s[3000:], y[3000:]).n_keys


def test_a_fixed_strength_takes_no_bound():
    k, s, y = _zipf(slopes=True)
    assert KeyedCalibrator(prior_strength=50.0).update(k, s, y).strength == 50.0
    assert KeyedCalibrator(PAVCalibrator(), prior_strength=0).update(k, s, y).strength == 0.0
