"""Damped IRLS for the GEV-canonical risk of a linear model (paper 004, Algorithm 1).

Private: inputs are already validated, contiguous float64. The public faces are
:class:`streamcal.gev.GEVCanonicalRegression` and :class:`streamcal.gev.GEVCanonicalClassifier`.

Objective ``R(beta) = sum_i w_i l(y_i, x_i . beta) + 1/2 sum_j l2_j beta_j^2`` with the
GEV-canonical loss ``l`` extended convexly outside R_xi (see :mod:`streamcal._kernels.gev`).
Gradient ``X^T (w (F - y)) + l2 beta``; Hessian ``X^T diag(w f) X + diag(l2)``. Each iteration:

1. Newton weights ``w max(f, floor)`` (the weight floor keeps the system positive definite where
   f underflows or vanishes outside the support);
2. direction ``d = -(X^T W X + diag(l2))^-1 g`` -- the IRLS solve, since
   ``beta + d = (X^T W X + diag l2)^-1 X^T W z`` with working response ``z = v + (y - F)/f``;
3. step damping: the full step is kept when the risk's slope along it, which needs only F, has
   dropped by the Armijo factor; otherwise the step length is bisected on the slope until the
   Wolfe conditions hold. The risk is convex, so a slope below ``c1 * slope(0)`` implies a
   sufficient decrease of the risk itself; no incomplete-gamma evaluation is needed.
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels.gev import gev_directional_derivative, gev_irls_weights

WEIGHT_FLOOR = 1e-10
_C1 = 1e-4
_C2 = 0.9


def newton_direction(X, hess_w, grad, l2):
    """Solve ``(X^T diag(hess_w) X + diag(l2)) d = -grad``; ``None`` if not positive definite."""
    hessian = X.T @ (X * hess_w[:, None])
    hessian[np.diag_indices_from(hessian)] += l2
    try:
        chol = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
        return None
    return -_cho_solve(chol, grad)


def _cho_solve(chol, b):
    y = np.linalg.solve(chol, b)
    return np.linalg.solve(chol.T, y)


def line_search(v, dv, y, w, xi, slope_penalty, slope0):
    """Step length along a descent direction by the slope-only Wolfe search.

    ``slope_penalty(alpha)`` is the slope of the penalty part; ``slope0 < 0`` the full slope at 0.
    """

    def slope(alpha):
        return gev_directional_derivative(v, dv, y, w, xi, alpha) + slope_penalty(alpha)

    if slope(1.0) <= _C1 * slope0:
        return 1.0
    lo, hi, alpha = 0.0, 1.0, 0.5
    for _ in range(60):
        s = slope(alpha)
        if s <= _C1 * slope0:
            if s >= _C2 * slope0:
                return alpha
            lo = alpha
        else:
            hi = alpha
        alpha = 0.5 * (lo + hi)
    return lo


def irls_gev(X, y, w, xi, l2, beta, *, max_iter=100, tol=1e-8):
    """Minimise the penalised GEV-canonical risk from ``beta`` (modified in place).

    ``l2`` is a vector of per-coefficient penalties (0 for an unpenalised intercept). Returns
    ``(n_iter, converged)``; converged means ``max |gradient| <= tol * sum(w)``.
    """
    n = X.shape[0]
    resid = np.empty(n)
    hess_w = np.empty(n)
    v = X @ beta
    scale = max(float(w.sum()), 1.0)
    for it in range(max_iter):
        gev_irls_weights(v, y, w, xi, WEIGHT_FLOOR, resid, hess_w)
        grad = X.T @ resid + l2 * beta
        if np.max(np.abs(grad)) <= tol * scale:
            return it, True
        d = newton_direction(X, hess_w, grad, l2)
        if d is None:  # only if l2 == 0 and the design is singular; checked before fitting
            return it, False
        slope0 = float(grad @ d)
        if not slope0 < 0.0:
            return it, False
        dv = X @ d
        base_pen = float((l2 * beta) @ d)
        quad_pen = float((l2 * d) @ d)
        alpha = line_search(v, dv, y, w, xi, lambda a, b0=base_pen, q=quad_pen: b0 + a * q, slope0)
        beta += alpha * d
        v += alpha * dv
        if np.max(np.abs(alpha * d)) <= 1e-14 * (1.0 + np.max(np.abs(beta))):
            gev_irls_weights(v, y, w, xi, WEIGHT_FLOOR, resid, hess_w)
            grad = X.T @ resid + l2 * beta
            return it + 1, bool(np.max(np.abs(grad)) <= tol * scale)
    return max_iter, False
