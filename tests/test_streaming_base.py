"""The StreamingCalibrator base with a toy histogram fitter: hooks, refit policy, loop equality."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from river_cases import river_loop

from streamcal._refit import RefitCalibrator as StreamingCalibrator
from streamcal.buckets import UniformGrid
from streamcal.windows import CountWindow, Decay, TimeWindow


class BucketRateCalibrator(StreamingCalibrator):
    """Toy smooth map: linear interpolation of the per-bucket positive rate (empty buckets skipped)."""

    def __init__(self, buckets=None, window=None, score_key=None, refit_every=None, llr_pseudo_count=1.0):
        self.refit_every = refit_every  # read by the base's refit policy: set it first
        super().__init__(buckets=buckets, window=window, score_key=score_key, llr_pseudo_count=llr_pseudo_count)

    def _refit_from_histogram(self, centres, pos, neg):
        self.n_refits = getattr(self, "n_refits", 0) + 1
        keep = pos + neg > 0
        self._x = centres[keep]
        self._y = pos[keep] / (pos + neg)[keep]

    def _predict_fitted(self, scores):
        return np.interp(scores, self._x, self._y)




@pytest.mark.parametrize("refit_every", [None, 1, 7, 50])
@pytest.mark.parametrize("window", [CountWindow(40), Decay(10.0), TimeWindow(15.0)], ids=repr)
def test_array_face_equals_loop_of_river_methods(refit_every, window, rng):
    n = 300
    s = rng.uniform(size=n)
    y = rng.uniform(size=n) < s
    w = rng.choice([0.5, 1.0, 2.0], size=n)
    t = np.cumsum(rng.choice([0.0, 1.0], size=n))
    make = lambda: BucketRateCalibrator(buckets=UniformGrid(10), window=window, refit_every=refit_every)  # noqa: E731
    a, b = make(), make()
    np.testing.assert_array_equal(a.prequential(s, y, weights=w, times=t), river_loop(b, s, y, np.full(n, 3), w, t))
    assert pickle.dumps(a) == pickle.dumps(b)
    mask = rng.uniform(size=n) < 0.5
    a, b = make(), make()
    np.testing.assert_array_equal(
        a.process(s, y, mask, weights=w, times=t), river_loop(b, s, y, np.where(mask, 1, 2), w, t)
    )
    assert pickle.dumps(a) == pickle.dumps(b)


def test_lazy_refit_happens_only_when_a_prediction_follows_new_labels(rng):
    cal = BucketRateCalibrator(buckets=UniformGrid(10))
    cal.update(rng.uniform(size=100), rng.uniform(size=100) < 0.5)
    assert getattr(cal, "n_refits", 0) == 0
    cal.predict_proba(np.linspace(0, 1, 5))
    cal.predict_proba(np.linspace(0, 1, 5))
    assert cal.n_refits == 1
    cal.learn_one({"s": 0.3}, True)
    cal.predict_proba_one({"s": 0.3})
    assert cal.n_refits == 2


def test_refit_every_k_labels(rng):
    cal = BucketRateCalibrator(buckets=UniformGrid(10), refit_every=10)
    assert cal.predict_proba([0.2]).tolist() == [0.5]  # before the first fit: 0.5 (not probabilities)
    cal.update(rng.uniform(size=25), rng.uniform(size=25) < 0.5)
    assert cal.n_refits == 2
    cal.predict_proba([0.3])
    assert cal.n_refits == 2


def test_fallback_when_the_window_empties():
    cal = BucketRateCalibrator(buckets=UniformGrid(4, -1.0, 1.0), window=TimeWindow(5.0))
    cal.update([0.5, 0.6], [1, 1], times=[0.0, 1.0])
    assert cal.predict_proba([0.5]).tolist() == [0.75]  # the fitted 1.0, within (T + c) / (T + 2c)
    cal.update([0.7], [1], weights=[0.0], times=[100.0])  # everything else expired, weight 0 left
    assert cal.window_weight == 0.0
    assert cal.predict_proba([0.5]).tolist() == [0.5]
    assert cal.predict_llr([0.5]).tolist() == [0.0]


def test_histogram_is_in_real_units_under_decay():
    cal = BucketRateCalibrator(buckets=UniformGrid(2), window=Decay(1.0)).update([0.2, 0.2, 0.9], [1, 0, 1])
    centres, pos, neg = cal.histogram()
    np.testing.assert_allclose(centres, [0.25, 0.75])
    np.testing.assert_allclose(pos, [0.25, 1.0])
    np.testing.assert_allclose(neg, [0.5, 0.0])
