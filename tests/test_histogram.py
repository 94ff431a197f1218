"""The windowed histogram object: what it owns, and its saved form."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from streamcal import ISplineCalibrator, PAVCalibrator, load, save
from streamcal._histogram import SAVED_NAMES, WindowedHistogram
from streamcal.buckets import QuantileEdges
from streamcal.windows import CountWindow, TimeWindow


def events(n, seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.uniform(size=n)
    return scores, rng.uniform(size=n) < scores, np.cumsum(rng.uniform(size=n))


@pytest.mark.parametrize("cls", [PAVCalibrator, ISplineCalibrator])
def test_every_streaming_calibrator_holds_one_histogram_saved_under_the_flat_names(cls):
    s, y, t = events(500)
    cal = cls(window=TimeWindow(40.0)).update(s, y, times=t)
    assert type(cal._hist) is WindowedHistogram
    state = cal.__getstate__()
    assert "_hist" not in state
    assert {"_sf", "_si", "_edges", "_centres", "_cuts", "_window_code"} <= set(state)
    assert state["_sf"] is cal._hist.floats  # the saved name reads the histogram's array
    back = pickle.loads(pickle.dumps(cal))
    np.testing.assert_array_equal(back._hist.floats, cal._hist.floats)
    np.testing.assert_array_equal(back._hist.ints, cal._hist.ints)
    np.testing.assert_array_equal(back.predict_proba(s), cal.predict_proba(s))


def test_saved_form_round_trips_every_attribute():
    s, y, _ = events(300)
    cal = PAVCalibrator(window=CountWindow(100)).update(s, y)
    saved = cal._hist.saved()
    assert set(saved) <= set(SAVED_NAMES)
    again = WindowedHistogram.from_saved(dict(saved))
    for key, name in SAVED_NAMES.items():
        if key in saved:
            mine, theirs = getattr(cal._hist, name), getattr(again, name)
            assert type(mine) is type(theirs)
            if isinstance(mine, np.ndarray):
                np.testing.assert_array_equal(mine, theirs)
            else:
                assert mine == theirs
    np.testing.assert_array_equal(again.guide, cal._hist.guide)  # the cache is rebuilt


@pytest.mark.parametrize("buckets", ["quantile:16", QuantileEdges(16, warmup=50)], ids=repr)
def test_a_calibrator_in_its_quantile_warmup_copies_pickles_and_saves(buckets, tmp_path):
    # a shorthand parameter names a strategy equal to, not identical with, the buffered one
    s, y, _ = events(400)
    cal = PAVCalibrator(buckets=buckets).update(s[:20], y[:20])
    assert cal.n_buckets is None
    for other in (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal))):
        other.update(s[20:], y[20:])
        np.testing.assert_array_equal(other.predict_proba(s), cal.clone().update(s, y).predict_proba(s))
    save(cal, tmp_path / "warm.zip")
    back = load(tmp_path / "warm.zip")
    assert back.n_learned == 20
    back.update(s[20:], y[20:])
    np.testing.assert_array_equal(back.predict_proba(s), cal.clone().update(s, y).predict_proba(s))
