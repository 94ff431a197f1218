"""While a window holds no weight (no event, or only events of weight 0), every streaming binary
calibrator serves the LLR 0 and the probability of a fresh calibrator (to rounding), on both faces, with and
without the score prior: the score prior's pseudo-counts carry no evidence of the window's own."""

from __future__ import annotations

import numpy as np
import pytest

import streamcal as sc
from streamcal import persist
from streamcal.windows import CountWindow, Decay, Unbounded
from tests.state_files import array_of, objects, pack, unpack

CLASSES = [sc.PAVCalibrator, sc.ISplineCalibrator, sc.PlattCalibrator, sc.GEVCalibrator, sc.VennAbersCalibrator]
WINDOWS = [Unbounded(), CountWindow(n=3), Decay(half_life=5.0)]
PROBE = np.array([1e-4, 0.1, 0.35, 0.5, 0.9, 0.999])


def _make(cls, prior, window):
    return cls(prior=prior, window=window)


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("prior", ["auto", None], ids=["prior", "no-prior"])
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_zero_weight_events_leave_the_llr_at_zero(cls, prior, window):
    fresh = _make(cls, prior, window)
    cal = _make(cls, prior, window)
    s = np.array([0.1, 0.5, 0.9, 0.2, 0.7])
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    p, llr = cal.prequential(s, y, weights=np.zeros(s.size))
    np.testing.assert_array_equal(llr, 0.0)
    # the prior's blocks interpolate the score: the same probability to rounding
    np.testing.assert_allclose(p, fresh.predict_proba(s), rtol=1e-12, atol=0)
    np.testing.assert_array_equal(cal.predict_llr(PROBE), 0.0)
    np.testing.assert_allclose(cal.predict_proba(PROBE), fresh.predict_proba(PROBE), rtol=1e-12, atol=0)
    for v in PROBE:
        assert cal.predict_llr_one({"s": float(v)}) == 0.0
    # the first event of weight makes the LLR that of a calibrator that learned it alone
    alone = _make(cls, prior, window)
    cal.update([0.9], [1.0])
    alone.update([0.9], [1.0])
    np.testing.assert_allclose(cal.predict_llr(PROBE), alone.predict_llr(PROBE), rtol=0, atol=1e-12)


@pytest.mark.parametrize("prior", ["auto", None], ids=["prior", "no-prior"])
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_llr_returns_to_zero_once_weighted_events_leave_a_count_window(cls, prior):
    cal = _make(cls, prior, CountWindow(n=3))
    cal.update([0.2, 0.8, 0.6], [0.0, 1.0, 1.0])
    assert np.any(cal.predict_llr(PROBE) != 0.0)
    cal.update([0.3, 0.4, 0.6], [1.0, 0.0, 0.0], weights=[0.0, 0.0, 0.0])
    np.testing.assert_array_equal(cal.predict_llr(PROBE), 0.0)


@pytest.mark.parametrize("prior", ["auto", None], ids=["prior", "no-prior"])
def test_pav_file_written_before_the_rule_loads_with_llr_zero(prior):
    """A PAV state file of a window without weight, written when the inverse prior odds there were
    ``(T0 + c) / (T1 + c) = 1``, loads, and serves the LLR 0; any other value in that slot is
    refused."""
    cal = sc.PAVCalibrator(prior=prior)
    cal.update([0.1, 0.5, 0.9], [1.0, 0.0, 1.0], weights=[0.0, 0.0, 0.0])
    manifest, arrays, pickles = unpack(persist.to_bytes(cal, allow_pickle=False))
    (_, node), *_ = objects(manifest)
    name = array_of(node, "_pf")
    pf = arrays[name].copy()
    from streamcal._kernels import ipav

    assert pf[ipav.PF_PRIOR_ODDS_INV] == 0.0
    pf[ipav.PF_PRIOR_ODDS_INV] = 1.0
    old = persist.from_bytes(pack(manifest, {**arrays, name: pf}, pickles))
    np.testing.assert_array_equal(old.predict_llr(PROBE), 0.0)
    assert old.predict_llr_one({"s": 0.9}) == 0.0
    assert persist.to_bytes(old, allow_pickle=False) == persist.to_bytes(cal, allow_pickle=False)
    pf = pf.copy()  # a new array: ``pack`` caches the bytes of the arrays it has seen
    pf[ipav.PF_PRIOR_ODDS_INV] = 0.5
    with pytest.raises(sc.exceptions.StateFileError, match="header slot"):
        persist.from_bytes(pack(manifest, {**arrays, name: pf}, pickles))
