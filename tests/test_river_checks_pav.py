"""PAVCalibrator passes river's estimator checks, each check its own test case."""

from __future__ import annotations

import pytest
from river import checks

from streamcal.isotonic.streaming import PAVCalibrator


def _cases():
    for i, params in enumerate(PAVCalibrator._unit_test_params()):
        model = PAVCalibrator(**params)
        skips = model._unit_test_skips()
        for check in checks.yield_checks(model):
            name = check.__name__
            dataset = getattr(check, "keywords", {}).get("dataset")
            label = f"params{i}-{name}" + ("" if dataset is None else f"-{type(dataset).__name__}")
            marks = [pytest.mark.skip(reason="listed in PAVCalibrator._unit_test_skips")] if name in skips else []
            yield pytest.param(params, check, id=label, marks=marks)


CASES = list(_cases())


@pytest.mark.parametrize(("params", "check"), CASES)
def test_river_check(params, check):
    check(PAVCalibrator(**params))


def test_every_check_is_collected():
    names = {c.values[1].__name__ for c in CASES}
    assert {"check_learn_one", "check_pickling", "check_predict_proba_one_binary"} <= names
