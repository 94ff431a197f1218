"""GEV-canonical regression (Agarwal et al., 2014): the GEV link family, batch and streaming learners.

- :mod:`streamcal.gev.family`: F, f, link, support, clipping, canonical and log losses.
- :class:`GEVCanonicalRegression`: batch fit by damped IRLS, ``xi="auto"`` by held-out Brier.
- :class:`GEVCanonicalClassifier`: river mini-batch learner, several ``xi`` side by side.
- :func:`fit_glm_on_histogram`: the 1-d IRLS on a score histogram used by the calibrators.
- :class:`GEVCalibrator`, :class:`PlattCalibrator`: streaming calibrators on the bucket histogram.
"""

from __future__ import annotations

from streamcal.gev.calibrator import CALIBRATOR_XI_GRID, GEVCalibrator, PlattCalibrator
from streamcal.gev.family import (
    gev_canonical_loss,
    gev_cdf,
    gev_clip,
    gev_link,
    gev_log_loss,
    gev_pdf,
    gev_support,
    upper_incomplete_gamma,
    warmup,
)
from streamcal.gev.histfit import fit_glm_on_histogram
from streamcal.gev.regression import DEFAULT_XI_GRID, ConvergenceWarning, GEVCanonicalRegression
from streamcal.gev.streaming import GEVCanonicalClassifier

__all__ = [
    "CALIBRATOR_XI_GRID",
    "DEFAULT_XI_GRID",
    "ConvergenceWarning",
    "GEVCalibrator",
    "GEVCanonicalClassifier",
    "GEVCanonicalRegression",
    "PlattCalibrator",
    "fit_glm_on_histogram",
    "gev_canonical_loss",
    "gev_cdf",
    "gev_clip",
    "gev_link",
    "gev_log_loss",
    "gev_pdf",
    "gev_support",
    "upper_incomplete_gamma",
    "warmup",
]
