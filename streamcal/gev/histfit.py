"""Fit a one-dimensional GLM ``v = slope * x + intercept`` on a score histogram.

This is the fitting step of the histogram calibrators (``GEVCalibrator``, ``PlattCalibrator``):
bucket ``b`` at score ``x[b]`` holds positive weight ``pos[b]`` (rows with y = 1) and negative
weight ``neg[b]`` (rows with y = 0). Both links are canonical for their loss (GEV link with the
GEV-canonical loss, logit with log loss), so the risk is convex with gradient
``sum_b (n_b F(v_b) - pos_b) (x_b, 1) + (l2 slope, 0)`` and IRLS weights ``n_b f(v_b)``; one
Newton step costs O(buckets). The whole loop runs in one numba kernel.

The ridge is on the slope alone, as in GLM libraries: the intercept is free, so where the data
do not identify the slope (every event at one score) the slope goes to 0 and the map is the
constant at the window's rate, while wherever the scores spread the slope is the data's. Where
the histogram holds one class only no optimum is finite (the infimum lies at slope 0 and
intercept ``-inf`` or ``+inf``); every path then returns slope 0 and the link of the rate kept
within ``[1e-12, 1 - 1e-12]``.

A calibration map must not fall as the score rises, so by default the slope is kept
non-negative: where the unconstrained optimum's slope is negative, the fit returned is the
optimum over ``slope >= 0`` of the same convex objective, which lies on the bound (slope 0, the
intercept-only fit of the same penalised objective).
"""

from __future__ import annotations

import numbers

import numpy as np

from streamcal._kernels import gev as _k
from streamcal._validation import as_finite, check_same_length, check_scalar

__all__ = ["fit_glm_on_histogram"]

_LINKS = {"gev": 0, "logit": 1}


def fit_glm_on_histogram(
    x,
    pos,
    neg,
    *,
    link: str = "gev",
    xi: float = 0.0,
    l2: float = 1e-6,
    beta0=None,
    warm_start=None,
    max_iter: int = 100,
    tol: float = 1e-10,
    nonnegative_slope: bool = True,
) -> np.ndarray:
    """Weighted IRLS on ``(x, pos, neg)`` buckets; returns ``beta = array([slope, intercept])``.

    Parameters
    ----------
    x
        Bucket scores (e.g. bucket centres), finite.
    pos, neg
        Non-negative positive and negative weight per bucket (same length as ``x``); empty
        buckets (both 0) are ignored.
    link
        ``"gev"`` (GEV link, GEV-canonical loss, shape ``xi``) or ``"logit"`` (log loss: Platt).
    xi
        GEV shape (ignored for ``"logit"``).
    l2
        Penalty ``l2/2 slope^2`` (the intercept is not penalised). The small default keeps the
        slope finite where the histogram separates the classes perfectly, sends it to 0 where the
        data do not identify it (one distinct score), and is negligible otherwise. A histogram
        of one class returns slope 0 and the link of the rate kept within ``[1e-12, 1 -
        1e-12]`` (its objective has no finite minimiser).
    beta0
        Starting ``(slope, intercept)``, e.g. the previous fit (a warm start: after a few new
        labels one or two Newton steps suffice). Default: slope 0, intercept at the link of the
        overall positive rate. For ``"gev"`` at least one non-empty bucket must start inside R_xi.
    warm_start
        A previous ``(slope, intercept)`` to start from when ``beta0`` is None: used when it
        starts some non-empty bucket inside R_xi, and otherwise replaced by the default start
        (the histogram of a sliding window can move entirely outside the support of an earlier
        fit).
    max_iter, tol
        At most ``max_iter`` Newton steps; stop when the largest gradient entry is at most
        ``tol`` times the total weight.
    nonnegative_slope
        True (default): the optimum over ``slope >= 0``, so that the map ``F(slope * x +
        intercept)`` never falls as ``x`` rises. Where the unconstrained optimum's slope is
        negative (the objective is convex) that optimum lies on the bound: slope 0 and the
        intercept minimising the same objective, a constant map at the histogram's rate.
        False: the unconstrained optimum, whatever its sign.

    Returns
    -------
    ndarray of shape (2,)
        ``[slope, intercept]`` (``slope >= 0`` with ``nonnegative_slope``); the calibrated probability at score ``s`` is
        ``F(clip(slope * s + intercept))``.

    Raises
    ------
    ValueError
        Non-finite scores, negative or non-finite weights, mismatched lengths, an unknown link,
        or a ``beta0`` that puts every non-empty bucket outside R_xi.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(-3, 3, 7)
    >>> p = 1 / (1 + np.exp(-(2 * x - 1)))
    >>> beta = fit_glm_on_histogram(x, 1000 * p, 1000 * (1 - p), link="logit", l2=0.0)
    >>> print(np.round(beta, 6))
    [ 2. -1.]
    """
    check_scalar(link, "link", choices=list(_LINKS))
    xi = float(check_scalar(xi, "xi", numbers.Real))
    l2 = float(check_scalar(l2, "l2", numbers.Real, low=0.0))
    check_scalar(max_iter, "max_iter", numbers.Integral, low=1)
    check_scalar(nonnegative_slope, "nonnegative_slope", kind=(bool, np.bool_), choices=(True, False))
    tol = float(check_scalar(tol, "tol", numbers.Real, low=0.0, low_inclusive=False))
    xa = as_finite(x, "x")
    pa = _weights(pos, "pos", xa.size)
    na = _weights(neg, "neg", xa.size)
    code = _LINKS[link]
    if beta0 is None and warm_start is not None:
        warm = as_finite(warm_start, "warm_start")
        if warm.size != 2:
            msg = f"`warm_start` must be (slope, intercept); got {warm.size} values."
            raise ValueError(msg)
        if code == 1 or _starts_inside(xa, pa, na, xi, warm):
            beta0 = warm
    if beta0 is None:
        total = float(pa.sum() + na.sum())
        rate = float(pa.sum()) / total if total > 0.0 else 0.5
        rate = min(max(rate, 1e-12), 1.0 - 1e-12)
        if code == 1:
            intercept = float(np.log(rate) - np.log1p(-rate))
        else:
            intercept = float(_k.gev_link(rate, xi))
            intercept = float(_k.gev_clip(intercept, xi))
        beta = np.array([0.0, intercept])
    else:
        beta = np.array(as_finite(beta0, "beta0"), dtype=np.float64)  # a copy: the fit writes into it
        if beta.size != 2:
            msg = f"`beta0` must be (slope, intercept); got {beta.size} values."
            raise ValueError(msg)
        if code == 0 and not _starts_inside(xa, pa, na, xi, beta):
            lo, hi = _k.gev_lower(xi), _k.gev_upper(xi)
            msg = (
                f"`beta0`={beta.tolist()} puts every non-empty bucket outside the support "
                f"R_xi = ({lo}, {hi}) of xi={xi}; start inside it (or pass beta0=None)."
            )
            raise ValueError(msg)
    if _one_class(pa, na):
        _k.intercept_only_inplace(xa, pa, na, code, xi, beta, beta[:0])
        return beta
    _k.irls_histogram_2d_inplace(xa, pa, na, code, xi, l2, 1e-12, beta, int(max_iter), tol)
    if nonnegative_slope and beta[0] < 0.0:
        _k.intercept_only_inplace(xa, pa, na, code, xi, beta, beta[:0])
    return beta


def _one_class(pos: np.ndarray, neg: np.ndarray) -> bool:
    """Whether the histogram holds weight of one class only: its objective then has no finite
    minimiser, and the fit is slope 0 with the intercept of ``intercept_root``."""
    p_all = float(pos.sum())
    n_neg = float(neg.sum())
    return p_all + n_neg > 0.0 and not (p_all > 0.0 and n_neg > 0.0)


def refit_nonnegative(x, pos, neg, code: int, xi: float, l2: float, warm, newton_args: tuple):
    """``(beta, brier)``: the calibrators' refit of one shape on checked arrays, the optimum over
    ``slope >= 0`` and its Brier score over the histogram, by the steps of the compiled refit
    (``streamcal._kernels.glm_refit.glm_refit_known``). From a previous fit ``warm`` with slope 0
    the intercept-only fit is served where it is the optimum (the objective's derivative in the
    slope there is at least 0); otherwise Newton's method from ``warm`` (``newton_args``: the
    arguments of ``streamcal._kernels.gev.glm_refit_histogram_inplace`` after ``beta``: ``(x_lo,
    x_hi, tol, max_passes)``), the damped full refit where that fails or there is no ``warm``, and
    the intercept-only fit where the answer's slope is negative or the histogram holds one class."""
    brier = np.zeros(1)
    x_lo, x_hi, tol, max_passes = newton_args
    link = "logit" if code == 1 else "gev"

    def newton(beta):  # True when it stopped by its rule; ``beta`` and ``brier`` updated
        args = (x, pos, neg, code, xi, l2, 1e-12, x_lo, x_hi, tol, beta, max_passes, brier)
        return _k.glm_refit_histogram_inplace(*args, *(brier[:0],) * 3) >= 0

    def bounded(beta):
        if beta[0] < 0.0:
            _k.intercept_only_inplace(x, pos, neg, code, xi, beta, brier)
        return beta, float(brier[0])

    if _one_class(pos, neg):
        beta = np.zeros(2)
        _k.intercept_only_inplace(x, pos, neg, code, xi, beta, brier)
        return beta, float(brier[0])

    if warm is not None:
        beta = np.array(warm, dtype=np.float64)
        if beta[0] == 0.0:
            held = np.zeros(2)
            if _k.intercept_only_inplace(x, pos, neg, code, xi, held, brier) >= 0.0:
                return held, float(brier[0])
        if newton(beta):
            return bounded(beta)
    full = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=l2, warm_start=warm, nonnegative_slope=False)
    beta = full.copy()
    if not newton(beta):
        beta = full
        brier[0] = _k.glm_brier_histogram(x, pos, neg, code, xi, float(beta[0]), float(beta[1]))
    return bounded(beta)


def _starts_inside(x: np.ndarray, pos: np.ndarray, neg: np.ndarray, xi: float, beta: np.ndarray) -> bool:
    """True when ``beta`` puts some non-empty bucket inside R_xi, or every bucket is empty."""
    used = (pos + neg) > 0.0
    if not used.any():
        return True
    v = beta[0] * x[used] + beta[1]
    return bool(np.any((v > _k.gev_lower(xi)) & (v < _k.gev_upper(xi))))


def _weights(w, name: str, n: int) -> np.ndarray:
    arr = as_finite(w, name, allow_empty=True)
    check_same_length(n, arr.size, name)
    bad = arr < 0.0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = f"`{name}` must be non-negative; got {float(arr[i])!r} at position {i}."
        raise ValueError(msg)
    return arr
