"""GEV family kernels: distribution, link, canonical and log losses, IRLS pieces.

Conventions (docs/design.md §3). For shape ``xi`` and score ``v``, ``t(v) = (1 + xi v)^(-1/xi)``
(``exp(-v)`` at ``xi = 0``), ``F = exp(-t)``, ``f = exp(-t) t^(1+xi)``. The support is
``R_xi = (-1/xi, inf)`` for ``xi > 0``, ``(-inf, -1/xi)`` for ``xi < 0`` and the real line at 0.

Outside the support the kernels use the GEV distribution's own extension: ``F = 0`` below a
lower end point, ``F = 1`` above an upper one, ``f = 0``; the canonical losses continue linearly
with slope ``F - y`` there, so they stay convex and differentiable on the whole real line. Inside
the support, every value is the closed form of docs/design.md §3.

All kernels take scalars or contiguous float64 arrays, do no validation and never raise.
"""

from __future__ import annotations

import math

import numpy as np

from ._config import jit

# ---------------------------------------------------------------------------------------------
# special functions


@jit
def lgamma1p_small(a):
    """``ln Gamma(1 + a)`` for ``|a| <= 0.2`` by its Taylor series (zeta coefficients)."""
    coeffs = (
        0.8224670334241132,
        -0.40068563438653143,
        0.27058080842778454,
        -0.207385551028674,
        0.16955717699740822,
        -0.14404989676884614,
        0.12550966952474304,
        -0.11133426586956469,
        0.10009945751278179,
        -0.09095401714582904,
        0.083353840546109,
        -0.0769325164113522,
        0.07143294629536134,
        -0.06666870588242046,
        0.06250095514121304,
        -0.05882397865868458,
        0.055555767627403614,
        -0.05263167937961666,
        0.05000004769810169,
        -0.04761907033014223,
        0.04545455629320467,
        -0.04347826605304026,
        0.04166666915034121,
        -0.04000000119214014,
    )
    acc = 0.0
    for i in range(len(coeffs) - 1, -1, -1):
        acc = acc * a + coeffs[i]
    # ln Gamma(1 + a) = -gamma a + sum_{k>=2} (-1)^k zeta(k) a^k / k
    return a * (-0.5772156649015329 + a * acc)


@jit
def gamma1pm1_over_a(a):
    """``(Gamma(1 + a) - 1) / a`` for ``a > -1``, stable near 0 (its limit there is -gamma)."""
    if a == 0.0:
        return -0.5772156649015329
    if abs(a) <= 0.2:
        # lgamma1p = a * c exactly as in lgamma1p_small; expm1(a c) / a = c expm1(L) / L
        lg = lgamma1p_small(a)
        c = lg / a if abs(a) > 1e-150 else -0.5772156649015329
        if lg == 0.0:
            return c
        return c * (math.expm1(lg) / lg)
    if abs(a) <= 0.5:
        return math.expm1(math.lgamma(1.0 + a)) / a
    return (math.gamma(1.0 + a) - 1.0) / a


@jit
def _upper_gamma_small_a_small_x(a, x):
    """Gamma(a, x) for ``|a| <= 0.5`` and ``0 < x < 1.5`` (Temme's split, no cancellation at a=0).

    Gamma(a, x) = (Gamma(1+a) - 1)/a - (x^a - 1)/a - x^a sum_{k>=1} (-x)^k / (k! (a + k)).
    """
    lx = math.log(x)
    q = a * lx
    if q == 0.0:
        xa_m1_over_a = lx
    else:
        xa_m1_over_a = lx * (math.expm1(q) / q)
    xa = math.exp(a * lx)
    s = 0.0
    term = 1.0
    for k in range(1, 60):
        term *= -x / k
        add = term / (a + k)
        s += add
        if abs(add) <= 1e-17 * abs(s):
            break
    return gamma1pm1_over_a(a) - xa_m1_over_a - xa * s


#: The largest argument at which ``math.gamma`` is finite in float64 (rounded down).
MAX_GAMMA_ARGUMENT = 171.62

#: Below this ``a`` (and for ``x < 1.5``) ``upper_gamma`` uses the continued fraction rather than
#: a downward recurrence of ``-a`` steps.
UPPER_GAMMA_RECURRENCE_LIMIT = -64.0


@jit
def _upper_gamma_cf(a, x):
    """Gamma(a, x) by Legendre's continued fraction (modified Lentz); good for ``x >= 1.5``."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < tiny:
            d = tiny
        c = b + an / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) <= 1e-16:
            break
    return math.exp(-x + a * math.log(x)) * h


@jit
def _lower_gamma_series(a, x):
    """gamma(a, x) = e^-x x^a sum_n x^n / (a (a+1) ... (a+n)) for ``a > 0``."""
    ap = a
    term = 1.0 / a
    s = term
    for _ in range(1000):
        ap += 1.0
        term *= x / ap
        s += term
        if abs(term) <= 1e-17 * abs(s):
            break
    return s * math.exp(-x + a * math.log(x))


@jit
def upper_gamma(a, x):
    """Upper incomplete gamma ``Gamma(a, x)`` (not normalised) for any real ``a`` and ``x >= 0``.

    ``Gamma(0, x) = E1(x)``; for ``a <= 0`` it is the analytic continuation
    ``Gamma(a, x) = (Gamma(a+1, x) - x^a e^-x) / a``. At ``x = 0`` it is ``Gamma(a)`` for
    ``a > 0`` and ``inf`` otherwise; at ``x = inf`` it is 0.
    """
    if x != x or a != a:
        return np.nan
    if x == 0.0:
        if a > 0.0:
            return math.gamma(a)
        return np.inf
    if x == np.inf:
        return 0.0
    if x >= 1.5 and x >= a + 1.0:
        return _upper_gamma_cf(a, x)
    if a > 0.5:
        # here x < a + 1 (or x < 1.5): Gamma(a) - gamma(a, x) loses little
        if x >= a + 1.0:
            return _upper_gamma_cf(a, x)
        g = math.gamma(a)
        if g == np.inf:  # a > 171.6: Gamma(a, x) >= Gamma(a) / 2 for x < a + 1, beyond float64 too
            return np.inf
        return g - _lower_gamma_series(a, x)
    if a > -0.5:
        return _upper_gamma_small_a_small_x(a, x)
    if a < UPPER_GAMMA_RECURRENCE_LIMIT:
        # far below 0 the continued fraction converges quickly for every x > 0, while the
        # recurrence below would take -a steps
        return _upper_gamma_cf(a, x)
    # -64 <= a <= -0.5 and x < 1.5: recur down from a0 in (-0.5, 0.5]
    n = math.ceil(-0.5 - a)
    a0 = a + n
    g = _upper_gamma_small_a_small_x(a0, x)
    lx = math.log(x)
    for j in range(1, n + 1):
        aj = a0 - j
        g = (g - math.exp(aj * lx - x)) / aj
    return g


@jit
def exp1(x):
    """Exponential integral ``E1(x) = Gamma(0, x)`` for ``x >= 0``."""
    return upper_gamma(0.0, x)


# ---------------------------------------------------------------------------------------------
# distribution and link


@jit
def gev_lower(xi):
    """Lower end of the support R_xi (``-1/xi`` for ``xi > 0``, else ``-inf``)."""
    if xi > 0.0:
        return -1.0 / xi
    return -np.inf


@jit
def gev_upper(xi):
    """Upper end of the support R_xi (``-1/xi`` for ``xi < 0``, else ``inf``)."""
    if xi < 0.0:
        return -1.0 / xi
    return np.inf


@jit
def gev_clip(v, xi):
    """Clip ``v`` into the closure of R_xi (the paper's clipped linear function)."""
    lo = gev_lower(xi)
    hi = gev_upper(xi)
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@jit
def gev_t_u(v, xi):
    """Return ``(t, u)``: ``t = (1 + xi v)^(-1/xi)`` and ``u = 1 + xi v`` (``u = 1`` at xi = 0).

    Below a lower end ``t = inf``; above an upper end ``t = 0``; ``u`` is then 0.
    """
    if xi == 0.0:
        return math.exp(-v), 1.0
    z = xi * v
    if z <= -1.0:
        if xi > 0.0:
            return np.inf, 0.0
        return 0.0, 0.0
    if z == 0.0:  # v = 0, or xi v underflowed: log1p(z) / xi = v
        return math.exp(-v), 1.0
    if z == np.inf:  # xi v overflowed (or v = ±inf): log1p(z) = log|xi| + log|v| to double precision
        return math.exp(-(math.log(abs(xi)) + math.log(abs(v))) / xi), np.inf
    return math.exp(-v * (math.log1p(z) / z)), 1.0 + z


@jit
def gev_cdf(v, xi):
    """``F(v) = exp(-t(v))``, the inverse link."""
    t, _ = gev_t_u(v, xi)
    return math.exp(-t)


@jit
def gev_pdf(v, xi):
    """``f(v) = exp(-t) t^(1+xi)``; 0 outside the support."""
    t, u = gev_t_u(v, xi)
    if u == 0.0:
        return 0.0
    big_f = math.exp(-t)
    if big_f == 0.0:
        return 0.0
    return big_f * t / u  # t^(1+xi) = t * t^xi = t / u


@jit
def gev_link(eta, xi):
    """``psi(eta) = ((-ln eta)^(-xi) - 1) / xi`` (``-ln(-ln eta)`` at xi = 0)."""
    if eta <= 0.0:
        return gev_lower(xi)
    if eta >= 1.0:
        return gev_upper(xi)
    q = -math.log(-math.log(eta))
    z = xi * q
    if z == 0.0:  # xi = 0, or xi q underflowed
        return q
    return q * (math.expm1(z) / z)


# ---------------------------------------------------------------------------------------------
# losses


@jit
def gev_canonical_loss0(v, xi):
    """GEV-canonical partial loss for a negative, ``l(0, v) = Gamma(-xi, t(v))``."""
    t, u = gev_t_u(v, xi)
    if u == 0.0 and xi < 0.0:
        # above the upper end: continue linearly with slope F = 1
        return math.gamma(-xi) + (v + 1.0 / xi)
    return upper_gamma(-xi, t)


@jit
def gev_canonical_loss1(v, xi):
    """GEV-canonical partial loss for a positive.

    ``xi < 1``: ``Gamma(-xi, t) - Gamma(-xi) - v - 1/xi`` (``E1(e^-v) - v + gamma`` at 0),
    evaluated for small ``t`` as ``-t^-xi sum_k (-t)^k / (k! (k - xi))`` (no cancellation);
    ``xi >= 1``: the shifted loss ``Gamma(-xi, t) - v`` (same derivative ``F - 1``).
    """
    if v == -np.inf:
        return np.inf  # the loss falls with slope F - 1 < 0 all the way from -inf
    if v == np.inf:
        # F -> 1: the unshifted loss tends to 0; the shifted one (xi >= 1) decreases without bound
        return -np.inf if xi >= 1.0 else 0.0
    t, u = gev_t_u(v, xi)
    if xi >= 1.0:
        return upper_gamma(-xi, t) - v
    if t == 0.0:
        return 0.0
    if t < 1.5:
        s = 0.0
        term = 1.0
        for k in range(1, 80):
            term *= -t / k
            add = term / (k - xi)
            s += add
            if abs(add) <= 1e-17 * abs(s):
                break
        # t^-xi = u for xi != 0, 1 at xi = 0
        return -u * s
    a = -xi
    if a > 0.5 and t < a + 1.0:
        # Gamma(a, t) - Gamma(a) = -gamma(a, t), the lower incomplete gamma: no cancellation
        # against Gamma(a), which dwarfs the loss for large a and overflows beyond a = 171.6
        return -_lower_gamma_series(a, t) - v - 1.0 / xi
    if 1.0 + a > MAX_GAMMA_ARGUMENT:  # Gamma(1 + a) overflows, Gamma(a) perhaps not
        return upper_gamma(a, t) - math.gamma(a) + 1.0 / a - v
    return upper_gamma(a, t) - gamma1pm1_over_a(a) - v


@jit
def gev_log_loss0(v, xi):
    """GEV-log partial loss for a negative, ``-ln(1 - F(v))`` (inf above an upper end)."""
    t, _ = gev_t_u(v, xi)
    if t == 0.0:
        return np.inf
    return -math.log(-math.expm1(-t))


@jit
def gev_log_loss1(v, xi):
    """GEV-log partial loss for a positive, ``-ln F(v) = t(v)`` (inf below a lower end)."""
    t, _ = gev_t_u(v, xi)
    return t


# ---------------------------------------------------------------------------------------------
# array kernels


@jit
def gev_cdf_array(v, xi, out):
    """``out[i] = F(v[i])``."""
    for i in range(v.shape[0]):
        out[i] = gev_cdf(v[i], xi)


@jit
def gev_pdf_array(v, xi, out):
    """``out[i] = f(v[i])``."""
    for i in range(v.shape[0]):
        out[i] = gev_pdf(v[i], xi)


@jit
def gev_link_array(eta, xi, out):
    """``out[i] = psi(eta[i])``."""
    for i in range(eta.shape[0]):
        out[i] = gev_link(eta[i], xi)


@jit
def gev_clip_array(v, xi, out):
    """``out[i] = clip_xi(v[i])``."""
    for i in range(v.shape[0]):
        out[i] = gev_clip(v[i], xi)


@jit
def upper_gamma_array(a, x, out):
    """``out[i] = Gamma(a, x[i])``."""
    for i in range(x.shape[0]):
        out[i] = upper_gamma(a, x[i])


@jit
def gev_canonical_loss_array(y, v, xi, out):
    """``out[i] = l(y[i], v[i])`` for labels 0.0 / 1.0."""
    for i in range(v.shape[0]):
        if y[i] > 0.5:
            out[i] = gev_canonical_loss1(v[i], xi)
        else:
            out[i] = gev_canonical_loss0(v[i], xi)


@jit
def gev_log_loss_array(y, v, xi, out):
    """``out[i] = -y ln F - (1 - y) ln(1 - F)`` at ``v[i]``."""
    for i in range(v.shape[0]):
        if y[i] > 0.5:
            out[i] = gev_log_loss1(v[i], xi)
        else:
            out[i] = gev_log_loss0(v[i], xi)


# ---------------------------------------------------------------------------------------------
# one-dimensional GLM on a histogram (score, 1): canonical links only


@jit
def _canonical_cdf_pdf(v, link_code, xi):
    """Inverse link and its derivative: ``link_code`` 0 = GEV(xi), 1 = logit."""
    if link_code == 1:
        if v >= 0.0:
            e = math.exp(-v)
            p = 1.0 / (1.0 + e)
        else:
            e = math.exp(v)
            p = e / (1.0 + e)
        return p, p * (1.0 - p)
    return gev_cdf(v, xi), gev_pdf(v, xi)


@jit
def _hist_slope(x, pos, neg, link_code, xi, l2, b0, b1, d0, d1, alpha):
    acc = l2 * (b0 + alpha * d0) * d0  # the ridge is on the slope alone
    for i in range(x.shape[0]):
        n = pos[i] + neg[i]
        if n == 0.0:
            continue
        dv = d0 * x[i] + d1
        p, _ = _canonical_cdf_pdf(b0 * x[i] + b1 + alpha * dv, link_code, xi)
        acc += (n * p - pos[i]) * dv
    return acc


@jit
def irls_histogram_2d_inplace(x, pos, neg, link_code, xi, l2, floor, beta, max_iter, tol):
    """Fit ``v = beta[0] x + beta[1]`` on a histogram by damped IRLS; ``beta`` is updated in place.

    Bucket ``i`` counts as ``pos[i]`` rows with y = 1 and ``neg[i]`` rows with y = 0 at score
    ``x[i]``. Objective: ``sum_i pos_i l(1, v_i) + neg_i l(0, v_i) + l2/2 beta[0]^2`` (the ridge
    on the slope alone: where the data do not identify the slope, it goes to 0) with the
    canonical loss of the link (GEV-canonical or logistic), so its gradient is
    ``sum_i (n_i F(v_i) - pos_i) (x_i, 1)``. Newton weights are floored at ``floor``; a step that
    overshoots the minimiser along its line (slope > 0 at its end) is shortened by regula falsi on
    the slope, as in ``streamcal.gev._solver.line_search``. Stops when
    the gradient's largest entry is at most ``tol`` times the total weight. Returns the number of
    iterations, or ``-1`` if ``max_iter`` was reached first.
    """
    total = 0.0
    for i in range(x.shape[0]):
        total += pos[i] + neg[i]
    scale = max(total, 1.0)
    for it in range(max_iter):
        g0 = l2 * beta[0]
        g1 = 0.0
        h00 = l2
        h01 = 0.0
        h11 = 0.0
        for i in range(x.shape[0]):
            n = pos[i] + neg[i]
            if n == 0.0:
                continue
            p, dens = _canonical_cdf_pdf(beta[0] * x[i] + beta[1], link_code, xi)
            r = n * p - pos[i]
            hw = n * max(dens, floor)
            g0 += r * x[i]
            g1 += r
            h00 += hw * x[i] * x[i]
            h01 += hw * x[i]
            h11 += hw
        if max(abs(g0), abs(g1)) <= tol * scale:
            return it
        det = h00 * h11 - h01 * h01
        if not det > 0.0:
            # degenerate curvature (e.g. a single bucket and l2 = 0): fall back to a gradient step
            d0 = -g0 / max(h00, floor)
            d1 = -g1 / max(h11, floor)
        else:
            d0 = -(h11 * g0 - h01 * g1) / det
            d1 = -(-h01 * g0 + h00 * g1) / det
        slope0 = g0 * d0 + g1 * d1
        if not slope0 < 0.0:
            return it
        alpha = 1.0
        s_hi = _hist_slope(x, pos, neg, link_code, xi, l2, beta[0], beta[1], d0, d1, 1.0)
        if s_hi > 0.0:
            # overshoot: Illinois regula falsi on the (monotone) slope for 0.1 slope0 <= s <= 0
            lo = 0.0
            s_lo = slope0
            hi = 1.0
            side = 0
            alpha = 0.0
            for _ in range(100):
                width = hi - lo
                alpha = (lo * s_hi - hi * s_lo) / (s_hi - s_lo)
                alpha = min(max(alpha, lo + 1e-3 * width), hi - 1e-3 * width)
                s = _hist_slope(x, pos, neg, link_code, xi, l2, beta[0], beta[1], d0, d1, alpha)
                if 0.1 * slope0 <= s <= 0.0:
                    break
                if s > 0.0:
                    hi = alpha
                    s_hi = s
                    if side == 1:
                        s_lo *= 0.5
                    side = 1
                else:
                    lo = alpha
                    s_lo = s
                    if side == -1:
                        s_hi *= 0.5
                    side = -1
            else:
                alpha = lo
        beta[0] += alpha * d0
        beta[1] += alpha * d1
        if abs(alpha * d0) + abs(alpha * d1) <= 1e-15 * (1.0 + abs(beta[0]) + abs(beta[1])):
            return it + 1
    return -1


# ---------------------------------------------------------------------------------------------
# small dense solves (the per-mini-batch Newton systems, k ~ 10 - 100)


@jit
def cholesky_solve_spd_inplace(a, b):
    """Solve ``a x = b`` for a symmetric positive definite ``a`` (k, k) by Cholesky.

    Overwrites the lower triangle of ``a`` with the factor and ``b`` with ``x``. Returns False
    (leaving ``b`` partly overwritten) if ``a`` is not numerically positive definite.
    """
    k = a.shape[0]
    for j in range(k):
        s = a[j, j]
        for p in range(j):
            s -= a[j, p] * a[j, p]
        if not s > 0.0:
            return False
        d = math.sqrt(s)
        a[j, j] = d
        for i in range(j + 1, k):
            s = a[i, j]
            for p in range(j):
                s -= a[i, p] * a[j, p]
            a[i, j] = s / d
    for i in range(k):  # forward: L z = b
        s = b[i]
        for p in range(i):
            s -= a[i, p] * b[p]
        b[i] = s / a[i, i]
    for i in range(k - 1, -1, -1):  # backward: L^T x = z
        s = b[i]
        for p in range(i + 1, k):
            s -= a[p, i] * b[p]
        b[i] = s / a[i, i]
    return True


# ---------------------------------------------------------------- the calibrators' fitted map
# ``P(y=1 | s) = F(slope * x(s) + intercept)`` with ``x(s) = logit(clip(s))`` for probability
# scores, else ``s``; ``F`` the logistic or the GEV inverse link. One scalar function serves
# both faces (the array kernel loops over it; the river face calls it through a compiled entry
# point), so they agree bit for bit.
@jit(inline="always")
def glm_map_one(s, logit_feature, clip, slope, intercept, gev_link, xi):
    """The fitted map at score ``s``."""
    x = s
    if logit_feature:
        q = min(max(s, clip), 1.0 - clip)
        x = math.log(q) - math.log1p(-q)
    v = slope * x + intercept
    if gev_link:
        return gev_cdf(v, xi)
    return 1.0 / (1.0 + math.exp(-v))


@jit
def glm_map_array(s, logit_feature, clip, slope, intercept, gev_link, xi, out):
    """``out[i]`` = the fitted map at ``s[i]``."""
    for i in range(s.shape[0]):
        out[i] = glm_map_one(s[i], logit_feature, clip, slope, intercept, gev_link, xi)


@jit(nogil=False)  # a per-event call from the river face
def glm_map_score(s, logit_feature, clip, slope, intercept, gev_link, xi):
    """The fitted map at one score (the river face's entry)."""
    return glm_map_one(s, logit_feature, clip, slope, intercept, gev_link, xi)


# ------------------------------------------------------- the calibrators' refit from a warm start
@jit(inline="always")
def _canonical_cdf_pdf_once(v, link_code, xi):
    """``_canonical_cdf_pdf`` with one ``t`` for both values (``gev_cdf`` and ``gev_pdf`` each
    compute it): the same floating-point operations, so the same values."""
    if link_code == 1:
        return _canonical_cdf_pdf(v, np.int64(1), xi)
    t, u = gev_t_u(v, xi)
    big_f = math.exp(-t)
    if u == 0.0 or big_f == 0.0:
        return big_f, 0.0
    return big_f, big_f * t / u


@jit(inline="always")
def _canonical_cdf_pdf_slope(v, link_code, xi):
    """``_canonical_cdf_pdf_once`` and the density's derivative ``f'(v)``: ``f (1 - 2F)`` for the
    logistic link, ``f (t - 1 - xi) / u`` for the GEV link (``t``, ``u`` of :func:`gev_t_u`)."""
    if link_code == 1:
        p, dens = _canonical_cdf_pdf(v, np.int64(1), xi)
        return p, dens, dens * (1.0 - 2.0 * p)
    t, u = gev_t_u(v, xi)
    big_f = math.exp(-t)
    if u == 0.0 or big_f == 0.0:
        return big_f, 0.0, 0.0
    dens = big_f * t / u
    return big_f, dens, dens * (t - 1.0 - xi) / u


@jit(inline="always")
def _canonical_cdf_pdf_slopes(v, link_code, xi):
    """``_canonical_cdf_pdf_slope`` and the density's second derivative ``f''(v)``: ``f ((1 -
    2F)^2 - 2 f)`` for the logistic link, ``f ((t - 1 - xi)^2 - t - xi (t - 1 - xi)) / u^2`` for
    the GEV link."""
    if link_code == 1:
        p, dens = _canonical_cdf_pdf(v, np.int64(1), xi)
        q = 1.0 - 2.0 * p
        return p, dens, dens * q, dens * (q * q - 2.0 * dens)
    t, u = gev_t_u(v, xi)
    big_f = math.exp(-t)
    if u == 0.0 or big_f == 0.0:
        return big_f, 0.0, 0.0, 0.0
    dens = big_f * t / u
    w = t - 1.0 - xi
    return big_f, dens, dens * w / u, dens * (w * w - t - xi * w) / (u * u)


#: buckets whose density's log-derivative ``|f'/f| = |t - 1 - xi| / u`` exceeds this (near an end
#: of the support, or far in the tails) are kept apart in the refit's curvature (see ``curv``)
GOOD_LOG_SLOPE = 16.0


@jit(inline="always")
def _quad_inv(h00, h01, h11, det, a, b):
    """``(a, b) H^-1 (a, b)'`` for the 2 x 2 matrix ``H`` with determinant ``det > 0``."""
    return max((h11 * a * a - 2.0 * h01 * a * b + h00 * b * b) / det, 0.0)


@jit
def glm_refit_histogram_inplace(
    x, pos, neg, link_code, xi, l2, floor, x_lo, x_hi, proba_tol, beta, max_iter, brier, curv, dw, dsums
):  # fmt: skip
    """Refit ``v = beta[0] x + beta[1]`` on a histogram by Newton's method from ``beta`` (in place).

    The objective is that of :func:`irls_histogram_2d_inplace` (canonical loss of the link, ridge
    ``l2/2 beta[0]^2`` on the slope); empty buckets are skipped. ``beta`` is the warm start, usually the
    previous optimum, one or two Newton steps away. Returns the number of gradient passes over
    the buckets, or ``-1`` when the iteration fails to stop (singular curvature, no descent,
    ``max_iter`` passes, every non-empty bucket outside the GEV support R_xi): the caller
    then runs the damped full refit.

    Stopping rule, logistic link (``link_code`` 1): a certificate. The logistic loss has
    ``|l'''| <= l''``, so along any step ``u`` the Hessian stays within ``exp(+-M) H`` with
    ``M = max_b |u . z_b|`` over the non-empty buckets, ``z_b = (x_b, 1)`` (Bach, *Self-concordant
    analysis for logistic regression*, 2010). With the exact gradient ``g`` and Hessian ``H`` at
    ``beta``, ``nu = |g|_{H^-1}`` and ``K = max_b |z_b|_{H^-1}``, the optimum lies within
    ``r = -log(1 - nu K) / K`` of ``beta`` in the ``H``-norm (when ``nu K < 1``), and the Newton
    point ``beta - H^-1 g`` within ``eta(K r) r`` of it, ``eta(m) = (e^m - 1 - m) / m``. The
    probability at any score with feature in ``[x_lo, x_hi]`` then moves by at most
    ``Z eta(K r) r / 4`` (``Z = max |z|_{H^-1}`` over that range; the logistic slope is at most
    1/4): the refit stops at the Newton point once that is at most ``proba_tol``.

    GEV link (``link_code`` 0): Newton's quadratic convergence; the refit stops at the Newton
    point once the Newton step moves ``v`` by at most ``proba_tol`` at every non-empty bucket and
    at ``x_lo``, ``x_hi`` (the next step is then of the order of its square; ``f <= 1``). Steps
    are damped by the regula falsi of :func:`irls_histogram_2d_inplace` unless they move every
    non-empty bucket's ``v`` by at most 0.1 (near the optimum, after a few new
    labels); such a full step is kept only if the next pass finds a smaller Newton decrement
    (``g' H^-1 g``), and otherwise the caller runs the damped full refit.

    ``brier[0]`` (unless ``brier`` is empty) receives the map's Brier score over the histogram
    (``sum_b pos_b (1 - p_b)^2 +
    neg_b p_b^2``) at the returned ``beta``, from the last pass to first order in the last step
    (the error is of the order of the total weight times that step squared).

    ``curv`` (unless empty, else 7 or 10 values) receives the data's curvature, ridge excluded:
    the third derivatives ``T = sum_b n_b f'(v_b) x_b^(3-j)`` (``j = 0 .. 3``) at the last pass's
    point and the Hessian ``sum_b n_b w_b z_b z_b'`` (``h00, h01, h11``, the weights ``w_b``
    floored as in the iteration) there, carried to the returned point to first order (plus
    ``T[d]`` for the last step ``d``; GEV link): the predicted start of the next refit and the
    served shape's certified refit without a pass (``streamcal._kernels.glm_refit``).
    With 15 values and a Brier score wanted, it also receives that Brier score, the Brier
    score's gradient at the last pass's point, the Hessian's part from the buckets where the
    density's log-derivative ``|f'/f|`` exceeds ``GOOD_LOG_SLOPE`` (or ``f`` is 0), and the range
    of ``v`` over the other non-empty buckets: what lets a shape's refit wait
    (``streamcal._kernels.glm_refit._shape_brier_lower_bound``). With 18 values, also the range
    of ``v`` over the non-empty buckets inside the support and the ``v`` nearest to the support's
    end past it (its least for ``xi < 0``, its most for ``xi > 0``; infinite where none is):
    where the link's derivatives are bounded (``streamcal._kernels.glm_refit._served_certified``);
    with 23 values, also the fourth derivatives ``sum_b n_b f''(v_b) x_b^(4-j)`` (``j = 0 .. 4``)
    at the last pass's point, which then carry the third derivatives to the returned point too.

    ``dw`` (unless empty, else ``2 B`` values: a part of the histogram's positive then negative
    weights, such as the data under a score prior's pseudo-counts; GEV link with 23 values of
    ``curv`` and a Brier score) makes ``dsums`` (20 values) receive that part's share of what
    ``curv`` receives, computed and carried the same way: its gradient at the returned point (to
    first order; ridge excluded), Hessian, third and fourth derivatives, Brier score and the
    Brier score's gradient, and the Hessian's part from the steep buckets.
    """
    want_curv = curv.shape[0] > 0
    want_lazy = curv.shape[0] >= 15 and brier.shape[0] > 0
    want_q = curv.shape[0] >= 23
    want_part = dw.shape[0] > 0 and want_q and want_lazy
    nb = x.shape[0]
    b0 = beta[0]
    b1 = beta[1]
    want_brier = brier.shape[0] > 0  # an empty ``brier``: the caller needs no Brier score
    support_lo = gev_lower(xi)
    support_hi = gev_upper(xi)
    unchecked = -1.0  # the Newton decrement before a step taken without a step-length test
    for it in range(max_iter):
        inside = link_code == 1
        g0 = l2 * b0
        g1 = 0.0
        h00 = l2
        h01 = 0.0
        h11 = 0.0
        sq = 0.0  # the Brier score at (b0, b1) and its gradient
        sq0 = 0.0
        sq1 = 0.0
        lo = np.inf
        hi = -np.inf
        t0 = 0.0  # the third derivatives (``curv``)
        t1 = 0.0
        t2 = 0.0
        t3 = 0.0
        a0 = 0.0  # the Hessian's part from the steep buckets, and the others' range of v
        a1 = 0.0
        a2 = 0.0
        vg_lo = np.inf
        vg_hi = -np.inf
        vi_lo = np.inf  # the range of v inside the support, and the nearest v past its end
        vi_hi = -np.inf
        v_out = np.inf if xi < 0.0 else -np.inf
        q0 = 0.0  # the fourth derivatives (``curv``, 23 values)
        q1 = 0.0
        q2 = 0.0
        q3 = 0.0
        q4 = 0.0
        if want_part:  # the part ``dw``'s sums (``dsums``)
            dsums[:] = 0.0
        for i in range(x.shape[0]):
            n = pos[i] + neg[i]
            if n == 0.0:
                continue
            xv = x[i]
            if xv < lo:
                lo = xv
            if xv > hi:
                hi = xv
            v = b0 * xv + b1
            if not inside and support_lo < v < support_hi:
                inside = True
            if want_curv:
                p, dens, slope, curve = _canonical_cdf_pdf_slopes(v, link_code, xi)
                if want_q:
                    q0, q1, q2, q3, q4 = _add_powers4(q0, q1, q2, q3, q4, n * curve, xv)
                ts = n * slope
                t3 += ts
                ts *= xv
                t2 += ts
                ts *= xv
                t1 += ts
                t0 += ts * xv
                if want_part and dw[i] + dw[nb + i] > 0.0:
                    _part_add(dsums, dw[i], dw[nb + i], xv, p, dens, slope, curve, floor)
                if want_lazy:
                    vi_lo, vi_hi, v_out = _support_ranges(vi_lo, vi_hi, v_out, v, xi, support_lo, support_hi)
                    if dens > 0.0 and abs(slope) <= GOOD_LOG_SLOPE * dens:
                        vg_lo = min(vg_lo, v)
                        vg_hi = max(vg_hi, v)
                    else:
                        aw = n * max(dens, floor)
                        a0 += aw * xv * xv
                        a1 += aw * xv
                        a2 += aw
            else:
                p, dens = _canonical_cdf_pdf_once(v, link_code, xi)
            r = n * p - pos[i]
            hw = n * dens if link_code == 1 else n * max(dens, floor)
            g0 += r * xv
            g1 += r
            if want_brier:
                sq += pos[i] * (1.0 - p) * (1.0 - p) + neg[i] * p * p
                sq0 += 2.0 * dens * r * xv
                sq1 += 2.0 * dens * r
            h00 += hw * xv * xv
            h01 += hw * xv
            h11 += hw
        if lo > hi or not inside:  # every bucket empty, or outside the support of the start
            return -1
        det = h00 * h11 - h01 * h01
        if not (det > 0.0 and h00 > 0.0):
            return -1
        d0 = -(h11 * g0 - h01 * g1) / det
        d1 = -(-h01 * g0 + h00 * g1) / det
        slope0 = g0 * d0 + g1 * d1
        dv_max = max(abs(d0 * lo + d1), abs(d0 * hi + d1))
        if link_code == 1:
            nu = math.sqrt(max(-slope0, 0.0))
            k = math.sqrt(max(_quad_inv(h00, h01, h11, det, lo, 1.0), _quad_inv(h00, h01, h11, det, hi, 1.0)))
            zlo = min(x_lo, lo)
            zhi = max(x_hi, hi)
            z = math.sqrt(max(_quad_inv(h00, h01, h11, det, zlo, 1.0), _quad_inv(h00, h01, h11, det, zhi, 1.0)))
            nk = nu * k
            if nk < 0.5:
                radius = -math.log1p(-nk) / k if k > 0.0 else nu
                m = k * radius
                eta = (math.expm1(m) - m) / m if m > 1e-8 else 0.5 * m
                if 0.25 * z * eta * radius <= proba_tol:
                    beta[0] = b0 + d0
                    beta[1] = b1 + d1
                    if want_brier:
                        brier[0] = sq + sq0 * d0 + sq1 * d1
                    if want_curv:
                        _curvature_out(curv, h00 - l2, h01, h11, t0, t1, t2, t3)
                    return it + 1
                # inside the region where the full Newton step converges: no step-length test
                b0 += d0
                b1 += d1
                continue
        elif max(dv_max, abs(d0 * x_lo + d1), abs(d0 * x_hi + d1)) <= proba_tol:
            beta[0] = b0 + d0
            beta[1] = b1 + d1
            if want_brier:
                brier[0] = sq + sq0 * d0 + sq1 * d1
            if want_part:  # as the whole row's below
                _part_carry(dsums, d0, d1)
            if want_curv:  # the Hessian carried to the returned point to first order: + T[d]
                h00 += t0 * d0 + t1 * d1
                h01 += t1 * d0 + t2 * d1
                h11 += t2 * d0 + t3 * d1
                if want_q:  # and the third derivatives: + Q[d]
                    t0 += q0 * d0 + q1 * d1
                    t1 += q1 * d0 + q2 * d1
                    t2 += q2 * d0 + q3 * d1
                    t3 += q3 * d0 + q4 * d1
                    _fourth_out(curv, q0, q1, q2, q3, q4)
                _curvature_out(curv, h00 - l2, h01, h11, t0, t1, t2, t3)
                if want_lazy:
                    curv[7] = brier[0]
                    curv[8] = sq0
                    curv[9] = sq1
                    curv[10] = a0
                    curv[11] = a1
                    curv[12] = a2
                    curv[13] = vg_lo
                    curv[14] = vg_hi
                    if curv.shape[0] >= 18:
                        curv[15] = vi_lo
                        curv[16] = vi_hi
                        curv[17] = v_out
            return it + 1
        if not slope0 < 0.0:
            return -1
        if unchecked >= 0.0 and not -slope0 < unchecked:
            return -1  # a whole step that did not bring the decrement down: the damped refit's turn
        unchecked = -1.0
        alpha = 1.0
        if link_code == 0 and dv_max <= 0.1:  # near the optimum: the whole step, checked at the next pass
            unchecked = -slope0
        else:
            s_hi = _hist_slope(x, pos, neg, link_code, xi, l2, b0, b1, d0, d1, 1.0)
            if s_hi > 0.0:
                s_lo = slope0
                a_lo = 0.0
                a_hi = 1.0
                side = 0
                alpha = 0.0
                for _ in range(100):
                    width = a_hi - a_lo
                    alpha = (a_lo * s_hi - a_hi * s_lo) / (s_hi - s_lo)
                    alpha = min(max(alpha, a_lo + 1e-3 * width), a_hi - 1e-3 * width)
                    s = _hist_slope(x, pos, neg, link_code, xi, l2, b0, b1, d0, d1, alpha)
                    if 0.1 * slope0 <= s <= 0.0:
                        break
                    if s > 0.0:
                        a_hi = alpha
                        s_hi = s
                        if side == 1:
                            s_lo *= 0.5
                        side = 1
                    else:
                        a_lo = alpha
                        s_lo = s
                        if side == -1:
                            s_hi *= 0.5
                        side = -1
                else:
                    alpha = a_lo
        b0 += alpha * d0
        b1 += alpha * d1
    return -1


@jit(inline="always")
def _add_powers4(q0, q1, q2, q3, q4, a, xv):
    """``q_j + a xv^(4-j)`` (``j = 0 .. 4``)."""
    q4 += a
    a *= xv
    q3 += a
    a *= xv
    q2 += a
    a *= xv
    q1 += a
    return q0 + a * xv, q1, q2, q3, q4


@jit(inline="always")
def _support_ranges(vi_lo, vi_hi, v_out, v, xi, support_lo, support_hi):
    """The range of ``v`` inside the support widened by ``v`` there, or the ``v`` past its end
    nearest to it (``xi < 0``: the least, ``xi > 0``: the most) updated by ``v`` past it."""
    if support_lo < v < support_hi:
        return min(vi_lo, v), max(vi_hi, v), v_out
    if xi < 0.0:
        return vi_lo, vi_hi, min(v_out, v)
    return vi_lo, vi_hi, max(v_out, v)


@jit(inline="always")
def _part_add(dsums, pos, neg, xv, p, dens, slope, curve, floor):
    """A bucket of the part (``pos``, ``neg`` at feature ``xv``, where the map has ``F = p``,
    ``f = dens``, ``f' = slope``, ``f'' = curve``) in its sums ``dsums``: the gradient (0, 1),
    Hessian (2-4), third (5-8) and fourth (9-13) derivatives, Brier score (14) and its gradient
    (15, 16), and the Hessian's part from the steep buckets (17-19)."""
    n = pos + neg
    r = n * p - pos
    dsums[0] += r * xv
    dsums[1] += r
    hw = n * max(dens, floor)
    dsums[2] += hw * xv * xv
    dsums[3] += hw * xv
    dsums[4] += hw
    ts = n * slope
    dsums[8] += ts
    ts *= xv
    dsums[7] += ts
    ts *= xv
    dsums[6] += ts
    dsums[5] += ts * xv
    dsums[9], dsums[10], dsums[11], dsums[12], dsums[13] = _add_powers4(
        dsums[9], dsums[10], dsums[11], dsums[12], dsums[13], n * curve, xv
    )
    dsums[14] += pos * (1.0 - p) * (1.0 - p) + neg * p * p
    dsums[15] += 2.0 * dens * r * xv
    dsums[16] += 2.0 * dens * r
    if not (dens > 0.0 and abs(slope) <= GOOD_LOG_SLOPE * dens):
        dsums[17] += hw * xv * xv
        dsums[18] += hw * xv
        dsums[19] += hw


@jit(inline="always")
def _part_carry(dsums, d0, d1):
    """The part's sums at the returned point, carried from the last pass's by the step ``d`` as
    the whole row's are: the gradient by the Hessian, the Hessian by the third derivatives, the
    third by the fourth, the Brier score by its gradient (to first order)."""
    g0 = dsums[0] + dsums[2] * d0 + dsums[3] * d1
    g1 = dsums[1] + dsums[3] * d0 + dsums[4] * d1
    dsums[0] = g0
    dsums[1] = g1
    for j in range(3):
        dsums[2 + j] += dsums[5 + j] * d0 + dsums[6 + j] * d1
    for j in range(4):
        dsums[5 + j] += dsums[9 + j] * d0 + dsums[10 + j] * d1
    dsums[14] += dsums[15] * d0 + dsums[16] * d1


@jit(inline="always")
def _fourth_out(curv, q0, q1, q2, q3, q4):
    curv[18] = q0
    curv[19] = q1
    curv[20] = q2
    curv[21] = q3
    curv[22] = q4


@jit(inline="always")
def _curvature_out(curv, h00, h01, h11, t0, t1, t2, t3):
    curv[0] = h00
    curv[1] = h01
    curv[2] = h11
    curv[3] = t0
    curv[4] = t1
    curv[5] = t2
    curv[6] = t3


@jit
def glm_brier_histogram(x, pos, neg, link_code, xi, slope, intercept):
    """``sum_b pos_b (1 - p_b)^2 + neg_b p_b^2`` for the map's probability ``p_b`` at ``x_b``."""
    acc = 0.0
    for i in range(x.shape[0]):
        if pos[i] + neg[i] == 0.0:
            continue
        v = slope * x[i] + intercept
        if link_code == 1:
            p = 1.0 / (1.0 + math.exp(-v))
        else:
            p = gev_cdf(v, xi)
        acc += pos[i] * (1.0 - p) * (1.0 - p) + neg[i] * p * p
    return acc


# --------------------------------------------------- the map's fit with its slope held at 0
# A calibration map must not fall as the score rises: the calibrators fit ``v = slope x +
# intercept`` with ``slope >= 0``. The objective is convex, so where its unconstrained optimum
# has a negative slope the constrained one lies on the bound, slope 0: the intercept-only fit of
# the same penalised objective, which depends on the histogram through its totals alone.


@jit(inline="always")
def _cdf_both(v, link_code, xi):
    """``(F(v), 1 - F(v), f(v))``, the complement without cancellation near ``F = 1``."""
    if link_code == 1:
        if v >= 0.0:
            e = math.exp(-v)
            return 1.0 / (1.0 + e), e / (1.0 + e), e / ((1.0 + e) * (1.0 + e))
        e = math.exp(v)
        return e / (1.0 + e), 1.0 / (1.0 + e), e / ((1.0 + e) * (1.0 + e))
    t, u = gev_t_u(v, xi)
    big_f = math.exp(-t)
    dens = 0.0 if (u == 0.0 or big_f == 0.0) else big_f * t / u
    return big_f, -math.expm1(-t), dens


@jit(inline="always")
def _intercept_gradient(b, p_all, n_neg, link_code, xi):
    """The intercept's gradient ``n F(b) - P`` at slope 0 (as ``n_neg F - P (1 - F)``), and its
    derivative ``n f(b)``."""
    big_f, comp, dens = _cdf_both(b, link_code, xi)
    return n_neg * big_f - p_all * comp, (p_all + n_neg) * dens


@jit
def intercept_root(p_all, n_neg, link_code, xi):
    """The intercept ``b`` where ``(P + N) F(b) - P = 0`` (``P = p_all`` positive and ``N =
    n_neg`` negative weight): the minimiser of the objective of
    :func:`irls_histogram_2d_inplace` at slope 0 (the ridge is on the slope alone). From the link
    of the rate, Newton's method on the gradient, which is non-decreasing in ``b``: a bracket
    twice the Newton step wide, doubled outwards until it holds the root, then Newton steps kept
    inside it (bisection where a step leaves it). The start depends on the arguments alone, and so
    does the answer (whatever the previous fit: refits on different schedules serve the same
    bits). Where one class has no weight no root is finite (the infimum lies at ``b -> -inf`` or
    ``+inf``): the link of the rate kept within ``[1e-12, 1 - 1e-12]`` stands for it, as it does
    for every path that fits such a histogram."""
    rate = p_all / (p_all + n_neg) if p_all + n_neg > 0.0 else 0.5
    rate = min(max(rate, 1e-12), 1.0 - 1e-12)
    if link_code == 1:
        b = math.log(rate) - math.log1p(-rate)
    else:
        b = gev_clip(gev_link(rate, xi), xi)
    if not (p_all > 0.0 and n_neg > 0.0):
        return b
    g, dg = _intercept_gradient(b, p_all, n_neg, link_code, xi)
    if g == 0.0:
        return b
    lo = b
    hi = b
    step = 2.0 * abs(g) / dg if dg > 0.0 else 1.0
    step = max(step, 1e-12 * (1.0 + abs(b)))
    down = g > 0.0
    for _ in range(64):
        at = b - step if down else b + step
        ga, _ = _intercept_gradient(at, p_all, n_neg, link_code, xi)
        if ga == 0.0:
            return at
        if down:
            hi = lo
            lo = at
            if ga < 0.0:
                break
        else:
            lo = hi
            hi = at
            if ga > 0.0:
                break
        step *= 2.0
    else:
        return b
    for _ in range(200):
        nb = b - g / dg if dg > 0.0 else 0.5 * (lo + hi)
        if not lo < nb < hi:
            nb = 0.5 * (lo + hi)
        if nb == b or abs(nb - b) <= 1e-15 * (1.0 + abs(b)):
            return nb
        b = nb
        g, dg = _intercept_gradient(b, p_all, n_neg, link_code, xi)
        if g == 0.0:
            return b
        if g < 0.0:
            lo = b
        else:
            hi = b
    return b


@jit
def intercept_only_inplace(x, pos, neg, link_code, xi, beta, brier):
    """Fit ``v = beta[0] x + beta[1]`` on a histogram with the slope held at 0: ``beta`` receives
    ``(0, intercept)``, the intercept of :func:`intercept_root` for the histogram's totals, and
    ``brier[0]`` (unless ``brier`` is empty) the map's Brier score over the
    histogram there.
    Returns the objective's derivative in the slope at that point, ``sum_i (n_i F(b) - pos_i)
    x_i`` (as ``F sum_i neg_i x_i - (1 - F) sum_i pos_i x_i``): where it is at least 0 the point
    is the optimum over ``slope >= 0`` (the objective is convex: Karush-Kuhn-Tucker), and where
    the unconstrained optimum's slope is negative it is so. Where one class has no weight the
    infimum lies at slope 0 whatever the scores: 0."""
    p_all = 0.0
    n_neg = 0.0
    nx = 0.0
    px = 0.0
    for i in range(x.shape[0]):
        if pos[i] + neg[i] == 0.0:
            continue
        p_all += pos[i]
        n_neg += neg[i]
        nx += neg[i] * x[i]
        px += pos[i] * x[i]
    b = intercept_root(p_all, n_neg, link_code, xi)
    p, comp, _ = _cdf_both(b, link_code, xi)
    beta[0] = 0.0
    beta[1] = b
    if brier.shape[0] > 0:
        brier[0] = p_all * comp * comp + n_neg * p * p
    if not (p_all > 0.0 and n_neg > 0.0):
        return 0.0
    return p * nx - comp * px
