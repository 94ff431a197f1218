"""Multiclass calibration by pairwise coupling (Hastie & Tibshirani, 1998).

- :func:`pairwise_couple`: couple pairwise probabilities r_ij = P(i | i or j) into one distribution
  (Hastie–Tibshirani iterative scaling, or Wu–Lin–Weng method 2).
- :class:`PairwiseCouplingCalibrator`: a streaming multiclass calibrator, one binary calibrator per
  pair of classes, coupled at prediction.
- :class:`OneVsRestCalibrator`: the one-vs-rest-and-normalise baseline.
"""

from __future__ import annotations

from streamcal.multiclass.coupling import ConvergenceWarning, pairwise_couple
from streamcal.multiclass.streaming import OneVsRestCalibrator, PairwiseCouplingCalibrator

__all__ = [
    "ConvergenceWarning",
    "OneVsRestCalibrator",
    "PairwiseCouplingCalibrator",
    "pairwise_couple",
]
