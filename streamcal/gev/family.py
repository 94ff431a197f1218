"""The GEV link family and its losses as array functions (Agarwal et al. 2014; docs/design.md §3).

For shape ``xi`` and score ``v``: ``t(v) = (1 + xi v)^(-1/xi)`` (``exp(-v)`` at ``xi = 0``),
``F(v) = exp(-t)`` (the inverse link; scipy's ``genextreme`` with ``c = -xi``),
``f(v) = exp(-t) t^(1+xi)``, link ``psi(eta) = ((-ln eta)^(-xi) - 1) / xi``, support
``R_xi = (-1/xi, inf)`` for ``xi > 0``, ``(-inf, -1/xi)`` for ``xi < 0``, the real line at 0.

The GEV-canonical loss has ``d l(y, v) / dv = F(v) - y``; in closed form through the upper
incomplete gamma function, ``l(0, v) = Gamma(-xi, t)`` and
``l(1, v) = Gamma(-xi, t) - Gamma(-xi) - v - 1/xi`` for ``xi < 1`` (``E1(e^-v) - v + gamma`` at
``xi = 0``); for ``xi >= 1``, where that constant diverges, ``l(1, v) = Gamma(-xi, t) - v``. All
functions are continuous across ``xi = 0`` and accurate for ``xi`` near 0.

Examples
--------
>>> import numpy as np
>>> from streamcal.gev import gev_cdf, gev_link, gev_canonical_loss
>>> print(np.round(gev_cdf([-1.0, 0.0, 1.0], xi=0.5), 6))
[0.018316 0.367879 0.64118 ]
>>> print(round(float(gev_link(0.01, xi=0.0)), 6))
-1.52718
>>> print(np.round(gev_canonical_loss([0, 1], [0.0, 0.0], xi=0.0), 6))
[0.219384 0.7966  ]
"""

from __future__ import annotations

import numbers

import numpy as np

from streamcal._kernels import gev as _k
from streamcal._validation import as_1d_float, as_binary_labels, as_probabilities, check_scalar

__all__ = [
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


def _xi(xi) -> float:
    return float(check_scalar(xi, "xi", numbers.Real))


def _scores(v, name="v") -> np.ndarray:
    arr = as_1d_float(v, name, allow_empty=True)
    bad = np.isnan(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = f"`{name}` must not contain NaN; got nan at position {i}."
        raise ValueError(msg)
    return arr


def _shaped(out: np.ndarray, like) -> np.ndarray | float:
    return float(out[0]) if np.ndim(like) == 0 else out


def _elementwise(kernel, xi: float, arr: np.ndarray, like) -> np.ndarray | float:
    """``kernel(arr, xi, out)`` into a fresh array, shaped like the input ``like``."""
    out = np.empty_like(arr)
    kernel(arr, xi, out)
    return _shaped(out, like)


def _pointwise_loss(kernel, y, v, xi) -> np.ndarray | float:
    """``kernel(labels, scores, xi, out)`` after validating ``xi``, ``v`` and ``y`` (same length)."""
    xi = _xi(xi)
    arr = _scores(v)
    labels = as_binary_labels(y, "y", allow_empty=True)
    if labels.size != arr.size:
        msg = f"`y` must have the same length as `v` ({arr.size}); got {labels.size}."
        raise ValueError(msg)
    out = np.empty_like(arr)
    kernel(labels, arr, xi, out)
    return _shaped(out, v)


def gev_support(xi) -> tuple[float, float]:
    """Return the end points ``(lo, hi)`` of the open support R_xi (``-inf``/``inf`` if unbounded).

    >>> gev_support(0.5), gev_support(0.0), gev_support(-0.5)
    ((-2.0, inf), (-inf, inf), (-inf, 2.0))
    """
    xi = _xi(xi)
    return float(_k.gev_lower(xi)), float(_k.gev_upper(xi))


def gev_clip(v, xi):
    """Clip scores into the closure of R_xi (the paper's clipped linear function)."""
    return _elementwise(_k.gev_clip_array, _xi(xi), _scores(v), v)


def gev_cdf(v, xi):
    """Inverse link ``F(v) = exp(-t(v))``: 0 below a lower end of R_xi, 1 above an upper end."""
    return _elementwise(_k.gev_cdf_array, _xi(xi), _scores(v), v)


def gev_pdf(v, xi):
    """Density ``f(v) = exp(-t) t^(1+xi)`` (0 outside R_xi)."""
    return _elementwise(_k.gev_pdf_array, _xi(xi), _scores(v), v)


def gev_link(eta, xi):
    """Link ``psi(eta) = ((-ln eta)^(-xi) - 1) / xi``, mapping [0, 1] onto the closure of R_xi."""
    return _elementwise(_k.gev_link_array, _xi(xi), as_probabilities(eta, "eta", allow_empty=True), eta)


def gev_canonical_loss(y, v, xi):
    """GEV-canonical partial losses ``l(y_i, v_i)`` (convex in v, derivative ``F(v) - y``).

    Outside R_xi the loss continues linearly with slope ``F - y`` (``F`` = 0 or 1 there), which
    keeps it convex on the whole line; ``gev_clip`` gives the paper's clipped scores.
    """
    return _pointwise_loss(_k.gev_canonical_loss_array, y, v, xi)


def gev_log_loss(y, v, xi):
    """GEV-log loss ``-y ln F(v) - (1 - y) ln(1 - F(v))``: the GEV link with log loss (non-convex
    for most ``xi``; the baseline of Wang & Dey)."""
    return _pointwise_loss(_k.gev_log_loss_array, y, v, xi)


def upper_incomplete_gamma(a, x):
    """Upper incomplete gamma ``Gamma(a, x)`` (not normalised) for any real ``a``, ``x >= 0``.

    Unlike ``scipy.special.gammaincc`` this accepts ``a <= 0`` (``Gamma(0, x) = E1(x)``).

    >>> print(round(float(upper_incomplete_gamma(-0.5, 1.0)), 6))
    0.178148
    """
    a = float(check_scalar(a, "a", numbers.Real))
    arr = as_1d_float(x, "x", allow_empty=True)
    bad = ~(arr >= 0.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = f"`x` must be non-negative; got {float(arr[i])!r} at position {i}."
        raise ValueError(msg)
    out = np.empty_like(arr)
    _k.upper_gamma_array(a, arr, out)
    return _shaped(out, x)


def warmup() -> float:
    """Compile (or load from numba's cache) every GEV kernel; returns the seconds it took.

    The first call of a numba kernel compiles it (about 3 s for this module on a fresh cache);
    call this at start-up to keep that out of the first real request.
    """
    import time

    t0 = time.perf_counter()
    v = np.array([-0.5, 0.0, 0.5])
    y = np.array([0.0, 1.0, 0.0])
    out = np.empty(3)
    for xi in (0.0, 0.5):
        _k.gev_cdf_array(v, xi, out)
        _k.gev_pdf_array(v, xi, out)
        _k.gev_link_array(np.array([0.1, 0.5, 0.9]), xi, out)
        _k.gev_clip_array(v, xi, out)
        _k.gev_canonical_loss_array(y, v, xi, out)
        _k.gev_log_loss_array(y, v, xi, out)
        _k.upper_gamma_array(-xi, np.abs(v) + 0.1, out)
    _k.cholesky_solve_spd_inplace(np.eye(2), np.ones(2))
    beta = np.zeros(2)
    for code in (0, 1):
        _k.irls_histogram_2d_inplace(v, y + 1.0, 2.0 - y, code, 0.0, 1e-6, 1e-12, beta, 2, 1e-10)
    return time.perf_counter() - t0
