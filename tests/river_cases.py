"""River's estimator checks as pytest cases: one case per (class, parameter set, check, dataset)."""

from __future__ import annotations

import pytest
from river import checks


def river_check_cases(*classes):
    """Yield ``pytest.param(cls, params, check)`` for every check river yields for each class.

    Checks listed in the estimator's ``_unit_test_skips`` are marked skipped; the reason is written
    next to each name in that method.
    """
    for cls in classes:
        for i, params in enumerate(cls._unit_test_params()):
            model = cls(**params)
            skips = model._unit_test_skips()
            for check in checks.yield_checks(model):
                name = check.__name__
                dataset = getattr(check, "keywords", {}).get("dataset")
                label = f"{cls.__name__}-params{i}-{name}" + ("" if dataset is None else f"-{type(dataset).__name__}")
                marks = [pytest.mark.skip(reason=f"listed in {cls.__name__}._unit_test_skips")] if name in skips else []
                yield pytest.param(cls, params, check, id=label, marks=marks)
