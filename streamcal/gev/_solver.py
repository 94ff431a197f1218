"""Damped IRLS for the GEV-canonical risk of a linear model (Agarwal et al., 2014, Algorithm 1).

Private: inputs are already validated, contiguous float64. The public faces are
:class:`streamcal.gev.GEVCanonicalRegression` and :class:`streamcal.gev.GEVCanonicalClassifier`.

Objective ``R(beta) = sum_i w_i l(y_i, x_i . beta) + 1/2 sum_j l2_j beta_j^2`` with the
GEV-canonical loss ``l`` extended convexly outside R_xi (see :mod:`streamcal._kernels.gev`).
Gradient ``X^T (w (F - y)) + l2 beta``; Hessian ``X^T diag(w f) X + diag(l2)``. Each iteration:

1. Newton weights ``w max(f, floor)`` (the weight floor keeps the system positive definite where
   f underflows or vanishes outside the support);
2. direction ``d = -(X^T W X + diag(l2))^-1 g`` -- the IRLS solve, since
   ``beta + d = (X^T W X + diag l2)^-1 X^T W z`` with working response ``z = v + (y - F)/f``;
3. step damping: the full step is kept when the risk's slope along it (which needs only F, no
   incomplete gamma) is still <= 0 at the end of the step; otherwise the step is shortened to a
   point just short of the minimiser along the line (see :func:`line_search`).
"""

from __future__ import annotations

import numpy as np

from streamcal.gev._vectorized import irls_weights, risk_slope

WEIGHT_FLOOR = 1e-10
_C1 = 0.1


def weighted_gram(X, weights, XT=None, chunk=32_768):
    """``X^T diag(weights) X`` by BLAS. ``XT`` is an optional C-contiguous copy of ``X.T`` (faster
    for short X: the scaling then runs along contiguous rows). Tall inputs go in row chunks of
    ``sqrt(w) X``, whose Gram matrix numpy computes with a symmetric rank-k update, without an
    (n, k) temporary."""
    n = X.shape[0]
    if n <= chunk:
        if XT is not None:
            return (XT * weights) @ XT.T
        return X.T @ (X * weights[:, None])
    gram = np.zeros((X.shape[1], X.shape[1]))
    for start in range(0, n, chunk):
        scaled = X[start : start + chunk] * np.sqrt(weights[start : start + chunk])[:, None]
        gram += scaled.T @ scaled
    return gram


def newton_direction(hessian, grad, l2):
    """Solve ``(hessian + diag(l2)) d = -grad``; ``None`` if not positive definite."""
    hessian = hessian.copy()
    hessian[np.diag_indices_from(hessian)] += l2
    try:
        chol = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
        return None
    return -np.linalg.solve(chol.T, np.linalg.solve(chol, grad))


def line_search(v, dv, y, w, xi, slope_penalty, slope0):
    """Step length along a descent direction from the risk's slope alone.

    ``slope_penalty(alpha)`` is the slope of the penalty part; ``slope0 < 0`` the full slope at 0.
    The risk is convex along the step, so its slope ``s(alpha)`` is non-decreasing. The full step
    is kept when ``s(1) <= 0`` (the risk decreased all the way). Otherwise the step overshot the
    minimiser along the line and a safeguarded regula falsi (Illinois) on ``s`` returns a step with
    ``C1 * slope0 <= s(alpha) <= 0``: the risk fell monotonically up to it, by at least as much as
    at the point where the slope is ``C1 * slope0`` -- an Armijo decrease, hence convergence.
    """

    def slope(alpha):
        return risk_slope(v, dv, y, w, xi, alpha) + slope_penalty(alpha)

    s_hi = slope(1.0)
    if s_hi <= 0.0:
        return 1.0
    return regula_falsi_step(slope, slope0, s_hi)


def regula_falsi_step(slope, slope0, s1):
    """Illinois regula falsi on a non-decreasing ``slope`` over [0, 1], ``slope(0) = slope0 < 0 <
    slope(1) = s1``; returns ``alpha`` with ``C1 * slope0 <= slope(alpha) <= 0``."""
    lo, s_lo, hi, s_hi = 0.0, slope0, 1.0, s1
    side = 0
    for _ in range(100):
        alpha = (lo * s_hi - hi * s_lo) / (s_hi - s_lo)
        width = hi - lo
        alpha = min(max(alpha, lo + 1e-3 * width), hi - 1e-3 * width)
        s = slope(alpha)
        if _C1 * slope0 <= s <= 0.0:
            return alpha
        if s > 0.0:
            hi, s_hi = alpha, s
            if side == 1:
                s_lo *= 0.5
            side = 1
        else:
            lo, s_lo = alpha, s
            if side == -1:
                s_hi *= 0.5
            side = -1
    return lo


def irls_step(X, y, w, xi, l2, beta, v, work, *, stop_at=-1.0):
    """One damped IRLS (Newton) step from ``beta`` with scores ``v = X @ beta``, both updated in
    place, unless the gradient's largest entry is already <= ``stop_at``.

    ``work`` is a dict that carries the IRLS weights at ``v`` from one step to the next: the pass
    that tests the full step computes them at the new scores, so a full step costs one pass of F
    and f. Returns the gradient's largest entry before the step (``nan`` if no descent step exists,
    i.e. a singular system).
    """
    if "resid" not in work:
        work["resid"], work["hess_w"] = irls_weights(v, y, w, xi, WEIGHT_FLOOR)
    resid, hess_w = work.pop("resid"), work.pop("hess_w")
    grad = X.T @ resid + l2 * beta
    gmax = float(np.max(np.abs(grad)))
    if gmax <= stop_at:
        work["resid"], work["hess_w"] = resid, hess_w
        return gmax
    d = newton_direction(weighted_gram(X, hess_w), grad, l2)
    if d is None:  # only if l2 == 0 and the design is singular; checked before fitting
        return np.nan
    slope0 = float(grad @ d)
    if not slope0 < 0.0:
        return gmax
    dv = X @ d
    base_pen = float((l2 * beta) @ d)
    quad_pen = float((l2 * d) @ d)
    resid1, hess_w1 = irls_weights(v + dv, y, w, xi, WEIGHT_FLOOR)
    s1 = float(resid1 @ dv) + base_pen + quad_pen
    if s1 <= 0.0:
        beta += d
        v += dv
        work["resid"], work["hess_w"] = resid1, hess_w1
        return gmax

    def slope(alpha):
        return risk_slope(v, dv, y, w, xi, alpha) + base_pen + alpha * quad_pen

    alpha = regula_falsi_step(slope, slope0, s1)
    beta += alpha * d
    v += alpha * dv
    return gmax


def irls_gev(X, y, w, xi, l2, beta, *, max_iter=100, tol=1e-8):
    """Minimise the penalised GEV-canonical risk from ``beta`` (modified in place).

    ``l2`` is a vector of per-coefficient penalties (0 for an unpenalised intercept). Returns
    ``(n_iter, converged)``; converged means ``max |gradient| <= tol * sum(w)`` at the returned
    ``beta``.
    """
    v = X @ beta
    scale = max(float(w.sum()), 1.0)
    work = {}
    for it in range(max_iter + 1):
        stop_at = tol * scale if it < max_iter else np.inf  # last pass: only check
        gmax = irls_step(X, y, w, xi, l2, beta, v, work, stop_at=stop_at)
        if gmax != gmax:  # nan: no descent direction
            return it, False
        if gmax <= tol * scale:
            return it, True
    return max_iter, False
