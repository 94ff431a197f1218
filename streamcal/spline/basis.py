"""M-spline and I-spline bases (Ramsay 1988; Wu et al. 2012, eqs. 1-2) and knot placement.

An order-``k`` M-spline is a normalised B-spline, ``M_i = k B_{i,k} / (t_{i+k} - t_i)``:
non-negative and integrating to 1. Its integral ``I_i(x) = int_L^x M_i`` is an I-spline of order
``k`` (degree ``k``): monotone from 0 at the left end to 1 at the right end, and equal to the
right cumulative sum ``sum_{j >= i} B_{j,k+1}`` of order-``k + 1`` B-splines. The default
``order=3`` gives the paper's cubic I-splines.

Knot vectors here are *clamped*: the lower and upper bounds each repeated ``order + 1`` times around
strictly increasing interior knots. With ``m`` interior knots there are ``q = m + order`` I-splines
besides the constant ``I_0 = 1``.
"""

from __future__ import annotations

import numbers

import numpy as np

from streamcal._kernels.ispline import ispline_dense_clamped, mspline_dense_clamped
from streamcal._validation import as_finite, check_scalar

__all__ = [
    "default_n_knots",
    "ispline_basis",
    "knot_vector",
    "mspline_basis",
    "quantile_knots",
]


def default_n_knots(n: float) -> int:
    """The paper's number of interior knots for ``n`` observations: ``max(1, floor(n^(1/3) - 4))``.

    Examples
    --------
    >>> [default_n_knots(n) for n in (100, 569, 1000, 10**6)]
    [1, 4, 6, 96]
    """
    return max(1, int(np.floor(np.cbrt(float(n)) + 1e-9)) - 4)


def knot_vector(interior, lower: float, upper: float, order: int = 3) -> np.ndarray:
    """Clamped knot vector for order-``order`` I-splines: bounds repeated ``order + 1`` times.

    Parameters
    ----------
    interior : array-like
        Strictly increasing interior knots, each strictly between ``lower`` and ``upper``.
    lower, upper : float
        The boundary knots, ``lower < upper``.
    order : int
        Order of the M-splines (the I-splines have degree ``order``).

    Examples
    --------
    >>> knot_vector([0.5], 0.0, 1.0, order=1)
    array([0. , 0. , 0.5, 1. , 1. ])
    """
    check_scalar(order, "order", numbers.Integral, low=1)
    lower = float(check_scalar(lower, "lower"))
    upper = float(check_scalar(upper, "upper"))
    if not lower < upper:
        msg = f"`lower` must be below `upper`; got lower={lower!r}, upper={upper!r}."
        raise ValueError(msg)
    inner = as_finite(interior, "interior", allow_empty=True)
    if inner.size:
        bad = np.flatnonzero(np.diff(inner) <= 0.0)
        if bad.size:
            i = int(bad[0]) + 1
            got = float(inner[i])
            msg = f"`interior` must be strictly increasing; got {got!r} at position {i}."
            raise ValueError(msg)
        outside = np.flatnonzero((inner <= lower) | (inner >= upper))
        if outside.size:
            i = int(outside[0])
            msg = (
                f"`interior` knots must lie strictly between {lower!r} and {upper!r}; "
                f"got {float(inner[i])!r} at position {i}."
            )
            raise ValueError(msg)
    return np.concatenate([np.full(order + 1, lower), inner, np.full(order + 1, upper)])


def _check_knots(knots, order: int) -> np.ndarray:
    check_scalar(order, "order", numbers.Integral, low=1)
    t = as_finite(knots, "knots")
    mult = order + 1
    if t.size < 2 * mult or not t[0] < t[-1]:
        msg = (
            f"`knots` must be a clamped knot vector (bounds repeated order + 1 = {mult} times, "
            f"lower < upper); got {t.size} knots."
        )
        raise ValueError(msg)
    if (np.diff(t) < 0).any() or (t[:mult] != t[0]).any() or (t[-mult:] != t[-1]).any():
        msg = f"`knots` must be non-decreasing with each bound repeated {mult} times."
        raise ValueError(msg)
    inner = t[mult:-mult]
    if inner.size and ((np.diff(inner) <= 0).any() or inner[0] <= t[0] or inner[-1] >= t[-1]):
        msg = "`knots` interior knots must be strictly increasing and strictly inside the bounds."
        raise ValueError(msg)
    return t


def ispline_basis(x, knots, order: int = 3) -> np.ndarray:
    """I-splines ``I_1 .. I_q`` of order ``order`` at each ``x``, shape ``(len(x), q)``.

    Outside ``[knots[0], knots[-1]]`` each I-spline is constant (0 on the left, 1 on the right).

    Examples
    --------
    >>> t = knot_vector([0.5], 0.0, 1.0, order=1)
    >>> ispline_basis([0.0, 0.25, 0.5, 1.0], t, order=1)
    array([[0. , 0. ],
           [0.5, 0. ],
           [1. , 0. ],
           [1. , 1. ]])
    """
    t = _check_knots(knots, order)
    xs = as_finite(x, "x", allow_empty=True)
    out = np.empty((xs.size, t.size - order - 2))
    ispline_dense_clamped(xs, t, int(order), out)
    return out


def mspline_basis(x, knots, order: int = 3) -> np.ndarray:
    """M-splines ``M_1 .. M_q`` of order ``order`` at each ``x`` (the derivatives of the I-splines).

    Examples
    --------
    >>> t = knot_vector([0.5], 0.0, 1.0, order=1)
    >>> mspline_basis([0.25, 0.75], t, order=1)
    array([[2., 0.],
           [0., 2.]])
    """
    t = _check_knots(knots, order)
    xs = as_finite(x, "x", allow_empty=True)
    # a point exactly on the right bound belongs to the last span; outside the bounds M is zero
    out = np.empty((xs.size, t.size - order - 2))
    mspline_dense_clamped(xs, t, int(order), out)
    out[(xs < t[0]) | (xs > t[-1])] = 0.0
    return out


def quantile_knots(values: np.ndarray, weights: np.ndarray, n_knots: int) -> np.ndarray:
    """Interior knots at the weighted quantiles ``j / (n_knots + 1)`` of sorted distinct ``values``.

    The quantile is the inverted weighted CDF (the smallest value whose cumulative weight reaches
    the level), so a histogram of distinct values and the raw events behind it give the same
    knots. Knots equal to a bound or to each other are dropped, so fewer may come back.
    """
    if n_knots <= 0 or values.size < 3:
        return np.empty(0)
    cum = np.cumsum(weights)
    levels = cum[-1] * np.arange(1, n_knots + 1) / (n_knots + 1)
    pos = np.minimum(np.searchsorted(cum, levels, side="left"), values.size - 1)
    knots = np.unique(values[pos])
    return knots[(knots > values[0]) & (knots < values[-1])]
