"""PAVCalibrator passes river's estimator checks, each check its own test case."""

from __future__ import annotations

import pytest
from river_cases import river_check_cases

from streamcal.isotonic.streaming import PAVCalibrator

CASES = list(river_check_cases(PAVCalibrator))


@pytest.mark.parametrize(("cls", "params", "check"), CASES)
def test_river_check(cls, params, check):
    check(cls(**params))


def test_every_check_is_collected():
    names = {c.values[2].__name__ for c in CASES}
    assert {"check_learn_one", "check_pickling", "check_predict_proba_one_binary"} <= names
