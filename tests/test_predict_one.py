"""``predict_one`` decides one way everywhere: the positive class when the calibrated probability
exceeds 0.5, the other class at exactly 0.5 (river's ``max`` over ``{False, True}`` picks False on a tie)."""

from __future__ import annotations

import pytest
from river import naive_bayes

from streamcal import CalibratedClassifier, GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator


@pytest.mark.parametrize("make", [PAVCalibrator, ISplineCalibrator, GEVCalibrator, PlattCalibrator])
def test_a_calibrator_at_exactly_one_half_predicts_false(make):
    cal = make(buckets="uniform:8")  # before any label: 0.5 for every score
    assert cal.predict_proba_one({"s": 0.3})[True] == 0.5
    assert cal.predict_one({"s": 0.3}) is False
    cal.update([0.1, 0.9, 0.9, 0.9], [0, 1, 1, 1])
    p = cal.predict_proba_one({"s": 0.9})[True]
    assert p > 0.5
    assert cal.predict_one({"s": 0.9}) is True


class _Half:
    """A stand-in binary calibrator that always answers 0.5."""

    def learn_one(self, x, y, w=1.0):
        pass

    def predict_proba_one(self, x):
        return {False: 0.5, True: 0.5}


def test_the_wrapper_at_exactly_one_half_predicts_the_other_class():
    model = CalibratedClassifier(naive_bayes.GaussianNB(), PAVCalibrator(), pos_val="spam")
    model.learn_one({"a": 1.0}, "ham")
    model.learn_one({"a": 2.0}, "spam")
    model.calibrator = _Half()
    assert model.predict_proba_one({"a": 1.5})["spam"] == 0.5
    assert model.predict_one({"a": 1.5}) == "ham"
