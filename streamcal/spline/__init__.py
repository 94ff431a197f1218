"""I-spline smoothing calibration (Wu et al., 2012): smooth, monotone, rank-preserving maps."""

from __future__ import annotations

from streamcal.spline.basis import (
    default_n_knots,
    ispline_basis,
    knot_vector,
    mspline_basis,
    quantile_knots,
)
from streamcal.spline.calibrator import ISplineCalibrator
from streamcal.spline.fit import ISplineMap, fit_ispline, fit_ispline_on_histogram, warmup

__all__ = [
    "ISplineCalibrator",
    "ISplineMap",
    "default_n_knots",
    "fit_ispline",
    "fit_ispline_on_histogram",
    "ispline_basis",
    "knot_vector",
    "mspline_basis",
    "quantile_knots",
    "warmup",
]
