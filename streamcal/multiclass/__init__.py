"""Multiclass calibration by pairwise coupling (paper 002).

- :func:`pairwise_couple`: couple pairwise probabilities r_ij = P(i | i or j) into one distribution
  (Hastie–Tibshirani iterative scaling, or Wu–Lin–Weng method 2).
"""

from __future__ import annotations

from streamcal.multiclass.coupling import ConvergenceWarning, pairwise_couple

__all__ = ["ConvergenceWarning", "pairwise_couple"]
