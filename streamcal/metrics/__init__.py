"""Calibration metrics, as functions on arrays and as river metrics that update per event.

Array functions (scikit-learn argument order, ``labels`` first): :func:`brier_score`,
:func:`log_loss`, :func:`cllr`, :func:`min_cllr`, :func:`ece`, :func:`calibration_loss`,
:func:`hosmer_lemeshow`; per key of a keyed stream, :func:`field_ece`, :func:`field_rce` and
:func:`per_key_calibration`; and the regular binary proper scoring rules of Brümmer & du Preez (2013):
:func:`proper_scoring_rule`, :func:`beta_scoring_rule`, :func:`threshold_cost`.

River metrics (``update(y_true, y_pred, w=1.0)``, ``revert``, ``get``): :class:`Brier`,
:class:`LogLoss`, :class:`Cllr`, :class:`MinCllr`, :class:`ECE`, :class:`CalibrationLoss`,
:class:`HosmerLemeshow`, :class:`ProperScoringRule`. After every update each equals the array
function on the events seen so far.
"""

from __future__ import annotations

import importlib

from streamcal.metrics._array import (
    brier_score,
    calibration_loss,
    cllr,
    ece,
    hosmer_lemeshow,
    log_loss,
    min_cllr,
)
from streamcal.metrics._fields import field_ece, field_rce, per_key_calibration

# the river metrics and the scoring rules are imported at first use: they load river's metrics and
# scipy, most of a second that a replay computing the array metrics never needs
_LAZY = {
    **dict.fromkeys(
        ("ECE", "Brier", "CalibrationLoss", "Cllr", "HosmerLemeshow", "LogLoss", "MinCllr", "ProperScoringRule"),
        "streamcal.metrics._river",
    ),
    **dict.fromkeys(
        (
            "BetaWeighting",
            "ThresholdWeighting",
            "beta_scoring_rule",
            "partial_losses",
            "proper_scoring_rule",
            "threshold_cost",
        ),
        "streamcal.metrics._scoring_rules",
    ),
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'streamcal.metrics' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ECE",
    "BetaWeighting",
    "Brier",
    "CalibrationLoss",
    "Cllr",
    "HosmerLemeshow",
    "LogLoss",
    "MinCllr",
    "ProperScoringRule",
    "ThresholdWeighting",
    "beta_scoring_rule",
    "brier_score",
    "calibration_loss",
    "cllr",
    "ece",
    "field_ece",
    "field_rce",
    "hosmer_lemeshow",
    "log_loss",
    "min_cllr",
    "partial_losses",
    "per_key_calibration",
    "proper_scoring_rule",
    "threshold_cost",
]
