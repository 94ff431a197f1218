"""Warnings shared across streamcal."""

from __future__ import annotations

__all__ = ["ConvergenceWarning"]


class ConvergenceWarning(RuntimeWarning):
    """An iterative solver (GEV IRLS, Hastie–Tibshirani coupling) stopped at ``max_iter`` before ``tol``.

    Examples
    --------
    >>> import warnings
    >>> from streamcal.exceptions import ConvergenceWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("stopped early", ConvergenceWarning)
    >>> caught[0].category.__name__
    'ConvergenceWarning'
    """
