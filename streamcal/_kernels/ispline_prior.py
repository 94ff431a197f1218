"""The score prior's strength for I-spline's exact default from one pass over the buckets (numba).

:func:`streamcal._kernels.prior.prior_strength_listed` finds the strength ``kappa`` by Newton's
method on the penalised log-likelihood of the recalibration ``D`` (``logit q = off + a + b v``),
warm-started from the last refit's ``(a, b)``: a pass over the buckets with data per trial point,
three transcendental functions per bucket per pass, and usually three passes per refit (the
start, then two steps). :func:`prior_strength_taylor` makes one pass at the start instead and
sums there the Taylor moments ``M[k, j] = sum_b l_b^(k)(z_b) v_b^j`` (``l_b`` the bucket's
log-likelihood as a function of its linear predictor ``z_b``, ``k <= ORDER``, ``j <= k``); the
log-likelihood, gradient and Hessian at any nearby ``(a, b)`` are polynomials in the moments, and
Newton's method runs on them with the same steps and stopping rule. The terms left out are
bounded by ``n max|sigma^(ORDER)| delta^(ORDER + 1) / (ORDER + 1)!`` for ``delta`` the largest
move of a linear predictor; when that bound exceeds ``TAYLOR_TOL`` (a start far from the
optimum, such as the cold start), or the data's covariate is not the centre's log-odds (raw
scores), the exact kernel runs instead. Its result then differs from the exact kernel's by about
the bound on the log-likelihood, so ``log kappa`` by about 1e-12.

The bucket's covariate and prior log-terms are constants of the grid for probability inputs
(:func:`prior_grid_constants`, computed once per grid): the listing pass computes them with the
same operations as the exact kernel, so ``n``, the mean and scale of the covariate and the
prior's log-likelihood are its values bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.prior import (
    KAPPA_MAX,
    KAPPA_MIN,
    NEWTON_STEPS,
    RIDGE,
    _fit_term,
    prior_rate,
    prior_strength_listed,
)

ORDER = 6  # the highest derivative of a bucket's log-likelihood in the Taylor moments
TAYLOR_TOL = 1.0e-12  # the largest bound on the left-out terms of the log-likelihood accepted


def _sigma_derivative_polynomials(order):
    """``P[k]``: the coefficients of ``sigma^(k)`` as a polynomial in ``s = sigma`` (lowest first),
    ``k = 0..order``, from ``sigma' = s (1 - s)``: ``P[k + 1] = P[k]'(s) s (1 - s)``."""
    P = np.zeros((order + 1, order + 2))
    P[0, 1] = 1.0
    for k in range(order):
        d = np.zeros(order + 2)
        d[: order + 1] = P[k, 1:] * np.arange(1, order + 2)  # the derivative in s
        nxt = np.zeros(order + 2)
        nxt[1:] += d[:-1]  # times s
        nxt[2:] -= d[:-2]  # times -s^2
        P[k + 1] = nxt
    return P


_P = _sigma_derivative_polynomials(ORDER)
# the largest |sigma^(ORDER)| over (0, 1), on a fine grid with a margin: the remainder's bound
_S = np.linspace(0.0, 1.0, 20001)
SIGMA_BOUND = 1.25 * float(np.abs(np.polynomial.polynomial.polyval(_S, _P[ORDER])).max())
REMAINDER_SCALE = SIGMA_BOUND / math.factorial(ORDER + 1)
# 1 / (i! j!) for the polynomials' terms
_INV_FACT = np.array([1.0 / math.factorial(i) for i in range(ORDER + 1)])
del _S


@jit_noalloc
def prior_grid_constants(cen, B, base_rate, out):
    """Per bucket ``b < B`` of a probability grid: ``out[3b]`` the prior's covariate (the centre's
    log-odds), ``out[3b + 1]`` ``log r`` and ``out[3b + 2]`` ``log(1 - r)`` for the prior's rate
    ``r``, each with the exact kernel's operations."""
    for j in range(B):
        r = prior_rate(cen[j], base_rate, B > 0)
        out[3 * j] = math.log(r) - math.log1p(-r)
        out[3 * j + 1] = math.log(r)
        out[3 * j + 2] = math.log1p(-r)


@jit_noalloc
def _model_fit_terms(M, a0, b0, a, b):
    """``_listed_fit_terms``' values at ``(a, b)`` from the Taylor moments at ``(a0, b0)``: the
    polynomial ``sum_{k, j} M[k, j] da^i / i! db^j / j!`` (``i = k - j``) at the move
    ``(da, db)`` and its first and second derivatives, with the ridge's terms."""
    da = a - a0
    db = b - b0
    f = 0.0
    ga = 0.0
    gb = 0.0
    haa = 0.0
    hab = 0.0
    hbb = 0.0
    for k in range(ORDER + 1):
        for j in range(k + 1):
            i = k - j
            mk = M[k, j]
            pa = da**i * _INV_FACT[i]
            pb = db**j * _INV_FACT[j]
            f += mk * pa * pb
            if i >= 1:
                qa = da ** (i - 1) * _INV_FACT[i - 1]
                ga += mk * qa * pb
                if j >= 1:
                    hab += mk * qa * db ** (j - 1) * _INV_FACT[j - 1]
            if j >= 1:
                gb += mk * pa * db ** (j - 1) * _INV_FACT[j - 1]
            if i >= 2:
                haa += mk * da ** (i - 2) * _INV_FACT[i - 2] * pb
            if j >= 2:
                hbb += mk * pa * db ** (j - 2) * _INV_FACT[j - 2]
    ridge = RIDGE
    return (
        f - 0.5 * ridge * (a * a + b * b),
        ga - ridge * a,
        gb - ridge * b,
        ridge - haa,
        -hab,
        ridge - hbb,
    )


@jit_noalloc
def prior_strength_taylor(h, h0, B, unit, cen, c0, cstep, base_rate, grid, start, listed, M):
    """``prior_strength_listed(h, h0, B, unit, cen, c0, cstep, base_rate, True, start, listed)``
    for probability inputs and centres ``cen[c0 + cstep * b]`` (see the module notes), ``grid``
    from :func:`prior_grid_constants` on those centres, ``M`` a scratch of
    ``(ORDER + 1, ORDER + 1)``. Returns ``(kappa, exact)``: ``exact`` where the
    exact kernel ran (a move the moments do not bound)."""
    lo = 0
    while lo < B and not (h[h0 + lo] + h[h0 + B + lo] > 0.0 and h[h0 + lo] / unit + h[h0 + B + lo] / unit > 0.0):
        lo += 1
    hi = B - 1
    while hi > lo and not (h[h0 + hi] + h[h0 + B + hi] > 0.0 and h[h0 + hi] / unit + h[h0 + B + hi] / unit > 0.0):
        hi -= 1
    n_all = 0.0
    log_s = 0.0
    sx = 0.0
    sxx = 0.0
    m = 0
    room = listed.shape[0] // 3
    for j in range(lo, hi + 1):
        if not h[h0 + j] + h[h0 + B + j] > 0.0:
            continue
        p = h[h0 + j] / unit
        n = h[h0 + B + j] / unit
        if p + n > 0.0:
            x = grid[3 * j]
            n_all += p + n
            sx += (p + n) * x
            sxx += (p + n) * x * x
            if p > 0.0:
                log_s += p * grid[3 * j + 1]
            if n > 0.0:
                log_s += n * grid[3 * j + 2]
            if m < room:
                listed[3 * m] = p
                listed[3 * m + 1] = n
                listed[3 * m + 2] = x
            m += 1
    probability_inputs = B > 0
    if m > room or not n_all > 0.0 or start.shape[0] != 2:
        kappa = prior_strength_listed(
            h, h0, B, unit, cen, c0, cstep, base_rate, probability_inputs, start, listed
        )
        return kappa, True
    mean = sx / n_all
    var = sxx / n_all - mean * mean
    sd = math.sqrt(var) if var > 0.0 else 0.0
    scale = 1.0 / sd if sd > 0.0 else 0.0
    a0 = start[0]
    b0 = start[1]
    # the pass at the start: the exact kernel's sums, and the moments
    for k in range(ORDER + 1):
        for j in range(ORDER + 1):
            M[k, j] = 0.0
    vmax = 0.0
    for i in range(m):
        p = listed[3 * i]
        n = listed[3 * i + 1]
        x = listed[3 * i + 2]
        v = (x - mean) * scale
        vmax = max(vmax, abs(v))
        term, q = _fit_term(p, n, x, v, a0, b0)
        M[0, 0] += term
        M[1, 0] += p - (p + n) * q
        M[1, 1] += (p - (p + n) * q) * v
        for k in range(2, ORDER + 1):
            # l^(k) = -(p + n) sigma^(k - 1)(q)
            poly = 0.0
            for c in range(k, -1, -1):
                poly = poly * q + _P[k - 1, c]
            lk = -(p + n) * poly
            vj = 1.0
            for j in range(k + 1):
                M[k, j] += lk * vj
                vj *= v
    bound = n_all * REMAINDER_SCALE
    f, ga, gb, haa, hab, hbb = _model_fit_terms(M, a0, b0, a0, b0)
    a = a0
    b = b0
    for _ in range(NEWTON_STEPS):
        det = haa * hbb - hab * hab
        if not det > 0.0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        step = 1.0
        improved = False
        f_new, ga_new, gb_new, haa_new, hab_new, hbb_new = f, ga, gb, haa, hab, hbb
        while step > 1e-8:
            delta = abs(a + step * da - a0) + abs(b + step * db - b0) * vmax
            if bound * delta ** (ORDER + 1) > TAYLOR_TOL:
                kappa = prior_strength_listed(
                    h, h0, B, unit, cen, c0, cstep, base_rate, probability_inputs, start, listed
                )
                return kappa, True
            f_new, ga_new, gb_new, haa_new, hab_new, hbb_new = _model_fit_terms(
                M, a0, b0, a + step * da, b + step * db
            )
            if f_new >= f:
                improved = True
                break
            step *= 0.5
        if not improved:
            break
        a += step * da
        b += step * db
        gain = f_new - f
        f = f_new
        ga, gb, haa, hab, hbb = ga_new, gb_new, haa_new, hab_new, hbb_new
        if gain <= 1e-10 * (1.0 + abs(f)):
            break
    start[0] = a
    start[1] = b
    log_kappa = log_s - f + math.log(n_all + 1.0)  # 0.5 k log(n + 1) with k = 2
    if log_kappa >= math.log(KAPPA_MAX):
        return KAPPA_MAX, False
    kappa = math.exp(log_kappa)
    return (kappa if kappa >= KAPPA_MIN else 0.0), False
