"""Kernels for I-spline smoothing: B-/M-/I-spline bases, the Gram system, and its constrained solve.

Conventions (all kernels): ``t`` is a *clamped* knot vector, non-decreasing, whose first and last
values are each repeated at least ``order`` times, with ``t[0] < t[-1]``; ``order`` is the B-spline
order (degree + 1). Points ``x`` are finite; they are clamped into ``[t[0], t[-1]]`` (outside the
knot range a clamped basis is constant). Nothing here validates or raises.

The I-spline design used by the fit is ``A = [1, I_1, ..., I_q]`` where ``I_i = sum_{j >= i} B_j``
for the order-``k + 1`` B-splines ``B_0, ..., B_q`` on ``t``. Writing ``A = B T`` with ``T`` the
lower-triangular matrix of ones, the Gram matrix ``A' W A = T' (B' W B) T`` is built from the banded
``B' W B`` (``order`` nonzero B-splines per point) plus two suffix sums, so its cost is
``O(n order^2 + q^2)`` rather than ``O(n q^2)``; and a fitted map ``sum_i alpha_i A_i`` is the
B-spline ``sum_j beta_j B_j`` with ``beta = cumsum(alpha)``.
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels._config import jit, jit_noalloc


@jit
def clamped_span_bounds(t, order):
    """Return ``(lo, hi)``: the first and last knot-span index usable by order-``order`` splines."""
    m = t.shape[0]
    lo = 0
    while lo + 1 < m and t[lo + 1] <= t[0]:
        lo += 1
    hi = m - 1
    while hi > 0 and t[hi] >= t[m - 1]:
        hi -= 1
    if lo < order - 1:
        lo = order - 1
    return lo, hi


@jit
def clamped_span(t, x, lo, hi):
    """Largest ``mu`` in ``[lo, hi]`` with ``t[mu] <= x`` (``lo`` if none), by binary search."""
    a = lo
    b = hi
    while a < b:
        mid = (a + b + 1) // 2
        if t[mid] <= x:
            a = mid
        else:
            b = mid - 1
    return a


@jit
def bspline_nonzero_inplace(t, x, mu, order, values, left, right):
    """de Boor's BSPLVB: ``values[r] = B_{mu - order + 1 + r, order}(x)`` for ``r < order``.

    ``t[mu] <= x <= t[mu + 1]`` and ``t[mu] < t[mu + 1]``; ``left``/``right`` are scratch of size
    ``order``.
    """
    values[0] = 1.0
    for j in range(1, order):
        left[j] = x - t[mu + 1 - j]
        right[j] = t[mu + j] - x
        saved = 0.0
        for r in range(j):
            temp = values[r] / (right[r + 1] + left[j - r])
            values[r] = saved + right[r + 1] * temp
            saved = left[j - r] * temp
        values[j] = saved


@jit
def bspline_dense_clamped(x, t, order, out):
    """Fill ``out[n, m - order]`` (zeroed here) with all order-``order`` B-splines at each ``x``."""
    lo, hi = clamped_span_bounds(t, order)
    lower = t[0]
    upper = t[t.shape[0] - 1]
    values = np.empty(order)
    left = np.empty(order)
    right = np.empty(order)
    out[:, :] = 0.0
    for n in range(x.shape[0]):
        xn = min(max(x[n], lower), upper)
        mu = clamped_span(t, xn, lo, hi)
        bspline_nonzero_inplace(t, xn, mu, order, values, left, right)
        base = mu - order + 1
        for r in range(order):
            out[n, base + r] = values[r]


@jit
def ispline_dense_clamped(x, t, order, out):
    """Fill ``out[n, q]`` with the I-splines ``I_1 .. I_q`` of order ``order`` at each ``x``.

    ``t`` is clamped with multiplicity ``order + 1``; ``q = len(t) - order - 2``. ``I_i`` is the
    right cumulative sum ``sum_{j >= i} B_{j, order + 1}``; the constant ``I_0 = 1`` is omitted.
    """
    nb = t.shape[0] - order - 1
    dense = np.empty((x.shape[0], nb))
    bspline_dense_clamped(x, t, order + 1, dense)
    for n in range(x.shape[0]):
        acc = 0.0
        for j in range(nb - 1, 0, -1):
            acc += dense[n, j]
            out[n, j - 1] = acc


@jit
def mspline_dense_clamped(x, t, order, out):
    """Fill ``out[n, q]`` with the M-splines ``M_1 .. M_q`` of order ``order`` at each ``x``.

    Same knots and indexing as :func:`ispline_dense_clamped` (``I_i`` integrates ``M_i``):
    ``M_i = order * B_{i, order} / (t[i + order] - t[i])``.
    """
    q = t.shape[0] - order - 2
    dense = np.empty((x.shape[0], t.shape[0] - order))
    bspline_dense_clamped(x, t, order, dense)
    for i in range(1, q + 1):
        scale = order / (t[i + order] - t[i])
        for n in range(x.shape[0]):
            out[n, i - 1] = scale * dense[n, i]


@jit
def ispline_gram_clamped(x, w, y, t, order, gram, rhs):
    """Normal equations of weighted least squares of ``y`` on ``[1, I_1, ..., I_q]``.

    Fills ``gram[q + 1, q + 1]`` with ``A' W A`` and ``rhs[q + 1]`` with ``A' W y`` for the order
    ``order`` I-spline design (B-splines of order ``order + 1`` on ``t``); returns ``sum w y^2``.
    """
    k1 = order + 1
    nb = t.shape[0] - k1
    lo, hi = clamped_span_bounds(t, k1)
    lower = t[0]
    upper = t[t.shape[0] - 1]
    values = np.empty(k1)
    left = np.empty(k1)
    right = np.empty(k1)
    band = np.zeros((nb, nb))
    cross = np.zeros(nb)
    yy = 0.0
    for n in range(x.shape[0]):
        wn = w[n]
        if wn == 0.0:
            continue
        xn = min(max(x[n], lower), upper)
        mu = clamped_span(t, xn, lo, hi)
        bspline_nonzero_inplace(t, xn, mu, k1, values, left, right)
        base = mu - k1 + 1
        yy += wn * y[n] * y[n]
        for r in range(k1):
            wr = wn * values[r]
            cross[base + r] += wr * y[n]
            for s in range(r, k1):
                band[base + r, base + s] += wr * values[s]
    _gram_from_band(band, cross, gram, rhs)
    return yy


@jit(inline="always")
def _gram_from_band(band, cross, gram, rhs):
    """The I-spline normal equations from the upper triangle of ``B' W B`` (``band``, overwritten)
    and ``B' W y`` (``cross``)."""
    nb = band.shape[0]
    for r in range(nb):
        for s in range(r):
            band[r, s] = band[s, r]
    # gram[i, l] = sum_{j >= i} sum_{m >= l} band[j, m]; rhs[i] = sum_{j >= i} cross[j]
    for j in range(nb):
        acc = 0.0
        for m in range(nb - 1, -1, -1):
            acc += band[j, m]
            band[j, m] = acc
    for m in range(nb):
        acc = 0.0
        for j in range(nb - 1, -1, -1):
            acc += band[j, m]
            gram[j, m] = acc
    acc = 0.0
    for j in range(nb - 1, -1, -1):
        acc += cross[j]
        rhs[j] = acc


@jit
def bspline_combination_clamped(x, t, order, coef, out):
    """``out[n] = sum_j coef[j] B_{j, order}(x[n])``, with ``x`` clamped into the knot range.

    Evaluated as ``coef[base] + sum_r (coef[base + r] - coef[base]) B_{base + r}`` over the span's
    nonzero B-splines, so that where the local coefficients are equal (a flat stretch of a
    monotone map) the value is exactly that coefficient, not a rounding of ``c * sum_r B``.
    """
    lo, hi = clamped_span_bounds(t, order)
    values = np.empty(order)
    left = np.empty(order)
    right = np.empty(order)
    for n in range(x.shape[0]):
        out[n] = _combination_at(x[n], t, order, coef, lo, hi, values, left, right)


@jit(inline="always")
def _combination_at(x, t, order, coef, lo, hi, values, left, right):
    """One value of :func:`bspline_combination_clamped` (``lo``, ``hi`` from ``clamped_span_bounds``)."""
    xn = min(max(x, t[0]), t[t.shape[0] - 1])
    mu = clamped_span(t, xn, lo, hi)
    bspline_nonzero_inplace(t, xn, mu, order, values, left, right)
    base = mu - order + 1
    first = coef[base]
    acc = 0.0
    for r in range(1, order):
        acc += (coef[base + r] - first) * values[r]
    return first + acc


@jit(nogil=False)  # a per-event call from the river face
def bspline_combination_score(x, t, order, coef):
    """:func:`bspline_combination_clamped` at one point, clipped into [0, 1] as ``evaluate_map``."""
    lo, hi = clamped_span_bounds(t, order)
    values = np.empty(order)
    left = np.empty(order)
    right = np.empty(order)
    v = _combination_at(x, t, order, coef, lo, hi, values, left, right)
    return min(max(v, 0.0), 1.0)


# --------------------------------------------------------------------------------------------
# min 1/2 a'Ga - b'a  subject to  a >= 0,  sum(a) <= cap   (Lawson-Hanson style primal active set)

# The solver's cap flag and free count start from NumPy values, not ``False`` or ``0``: numba types
# a literal as its own type, and a call typed before the loop's other assignments reach it compiles
# ``_solve_reduced_floor`` once more for the literal (``_config``).
_OFF = np.bool_(False)
_ON = np.bool_(True)


@jit
def _solve_reduced_floor(gram, rhs, passive_idx, m, sum_active, cap, z, work, u, v):
    """Solve the equality-constrained subproblem on the ``m`` free indices; return its multiplier.

    Free variables solve ``G_PP z_P = b_P`` (or, with the sum constraint in the working set,
    ``G_PP z_P + mu 1 = b_P, 1'z_P = cap``). Cholesky with a pivot floor ``1e-13 max diag``, so a
    rank-deficient ``G_PP`` (fewer distinct scores than basis functions) stays solvable.
    """
    dmax = 0.0
    for r in range(m):
        pr = passive_idx[r]
        for c in range(m):
            work[r, c] = gram[pr, passive_idx[c]]
        if work[r, r] > dmax:
            dmax = work[r, r]
    floor = 1e-13 * dmax if dmax > 0.0 else 1e-300
    for j in range(m):
        d = work[j, j]
        for s in range(j):
            d -= work[j, s] * work[j, s]
        if d < floor:
            d = floor
        d = np.sqrt(d)
        work[j, j] = d
        for r in range(j + 1, m):
            acc = work[r, j]
            for s in range(j):
                acc -= work[r, s] * work[j, s]
            work[r, j] = acc / d
    # forward then back substitution for u = G^-1 b_P and v = G^-1 1
    for r in range(m):
        au = rhs[passive_idx[r]]
        av = 1.0
        for s in range(r):
            au -= work[r, s] * u[s]
            av -= work[r, s] * v[s]
        u[r] = au / work[r, r]
        v[r] = av / work[r, r]
    for r in range(m - 1, -1, -1):
        au = u[r]
        av = v[r]
        for s in range(r + 1, m):
            au -= work[s, r] * u[s]
            av -= work[s, r] * v[s]
        u[r] = au / work[r, r]
        v[r] = av / work[r, r]
    mu = 0.0
    if sum_active:
        su = 0.0
        sv = 0.0
        for r in range(m):
            su += u[r]
            sv += v[r]
        mu = (su - cap) / sv
    z[:] = 0.0
    for r in range(m):
        z[passive_idx[r]] = u[r] - mu * v[r]
    return mu


@jit
def nnls_sum_capped_gram(gram, rhs, cap, x):
    """Exact minimiser of ``1/2 x'Gx - b'x`` over ``x >= 0, sum(x) <= cap`` (``cap > 0``), cold start.

    See :func:`nnls_sum_capped_gram_warm`; this starts with every bound in the working set.
    """
    passive = np.zeros(gram.shape[0], dtype=np.bool_)
    return nnls_sum_capped_gram_warm(gram, rhs, cap, x, passive)


@jit_noalloc(forceinline=True)
def _solver_scale(gram, rhs, p):
    """The active-set solver's scale: the largest of the Gram's diagonal and the right-hand
    side's magnitudes over the first ``p`` coefficients (1 where all are 0); its tolerances are
    relative to it."""
    scale = 0.0
    for i in range(p):
        if gram[i, i] > scale:
            scale = gram[i, i]
        if abs(rhs[i]) > scale:
            scale = abs(rhs[i])
    if scale == 0.0:
        scale = 1.0
    return scale


@jit
def nnls_sum_capped_gram_warm(gram, rhs, cap, x, passive):
    """Exact minimiser of ``1/2 x'Gx - b'x`` over ``x >= 0, sum(x) <= cap`` (``cap > 0``).

    The solution is written into ``x``. ``passive`` (bool, in/out) is the initial guess of the
    coefficients that are free (positive) at the optimum, for instance those of the previous
    refit; on return it holds the final free set. Any guess gives the same optimum; a good one
    saves most of the iterations.

    A primal active-set method in the manner of Lawson and Hanson's NNLS, on the small normal
    equations: start at ``x = 0`` (feasible) with the bounds outside ``passive`` in the working
    set and first solve on ``passive``, stepping back to the first bound the step would cross;
    then repeatedly free the constraint with the
    most negative KKT multiplier (a bound ``x_j = 0`` or the cap ``sum(x) = cap``), solve the
    equality-constrained subproblem on the working set exactly, and step back to the first
    constraint the step would cross. Returns the number of subproblem solves, or ``-1`` when the
    iteration limit was reached (not seen in practice). On return ``x >= 0`` holds exactly and
    ``sum(x) <= cap`` holds for the exact sum (a solution on the cap is pulled below it by at most
    ``p + 1`` ulps).
    """
    p = gram.shape[0]
    scale = _solver_scale(gram, rhs, p)
    tol = 1e-12 * scale
    rejected = np.zeros(p, dtype=np.bool_)
    reject_cap = False
    idx = np.empty(p, dtype=np.intp)
    z = np.empty(p)
    grad = np.empty(p)
    work = np.empty((p, p))
    u = np.empty(p)
    v = np.empty(p)
    x[:] = 0.0
    sum_active = _OFF
    mu = 0.0
    max_iter = 12 * (p + 1) + 30
    it = 0
    pending = False  # a warm start: solve on the given free set before any multiplier test
    for i in range(p):
        if passive[i]:
            pending = True
    while True:
        enter = -1  # -1: optimal (or warm start); >= 0: free bound `enter`; -2: release the cap
        if pending:
            pending = False
        else:
            for i in range(p):
                acc = -rhs[i]
                for j in range(p):
                    acc += gram[i, j] * x[j]
                grad[i] = acc
            best = -tol
            for i in range(p):
                if not passive[i] and not rejected[i]:
                    nu = grad[i] + mu
                    if nu < best:
                        best = nu
                        enter = i
            if sum_active and not reject_cap and mu < best:
                enter = -2
            if enter == -1:
                break
            if enter >= 0:
                passive[enter] = True
            else:
                sum_active = _OFF
        first = True
        while True:
            it += 1
            if it > max_iter:
                return -1
            m = np.int64(0)
            for i in range(p):
                if passive[i]:
                    idx[m] = i
                    m += 1
            if m == 0:
                sum_active = _OFF
            mu_new = _solve_reduced_floor(gram, rhs, idx, m, sum_active, cap, z, work, u, v)
            zsum = 0.0
            for r in range(m):
                zsum += z[idx[r]]
            if first:
                first = False
                # Lawson-Hanson safeguard: a constraint whose multiplier was negative only by
                # rounding may not move; put it back and try the next candidate.
                if enter >= 0 and z[enter] <= 0.0:
                    passive[enter] = False
                    rejected[enter] = True
                    break
                if enter == -2 and zsum >= cap:
                    sum_active = _ON
                    reject_cap = True
                    break
            feasible = True
            for r in range(m):
                if z[idx[r]] <= 0.0:
                    feasible = False
            if not sum_active and zsum > cap:
                feasible = False
            if feasible:
                for i in range(p):
                    x[i] = z[i]
                mu = mu_new if sum_active else 0.0
                rejected[:] = False
                reject_cap = False
                break
            # step from x towards z, stopping at the first constraint crossed
            step = 1.0
            block = -1
            for r in range(m):
                i = idx[r]
                if z[i] <= 0.0:
                    denom = x[i] - z[i]
                    ti = x[i] / denom if denom > 0.0 else 0.0
                    if ti < step:
                        step = ti
                        block = i
            if not sum_active and zsum > cap:
                xsum = 0.0
                for r in range(m):
                    xsum += x[idx[r]]
                ts = (cap - xsum) / (zsum - xsum)
                if ts < step:
                    step = ts
                    block = -2
            for r in range(m):
                i = idx[r]
                x[i] += step * (z[i] - x[i])
            if block == -2:
                sum_active = _ON
            for r in range(m):
                i = idx[r]
                if i == block or x[i] <= 0.0:
                    x[i] = 0.0
                    passive[i] = False
            rejected[:] = False
            reject_cap = False
    # exact feasibility: bounds hold by construction. A sum of p terms rounds by at most
    # (p - 1) ulps, so a computed sum at most cap (1 - (p + 1) 2^-52) puts the exact sum below cap.
    limit = cap * (1.0 - (p + 1) * 2.0**-52)
    total = 0.0
    for i in range(p):
        if x[i] < 0.0:
            x[i] = 0.0
        total += x[i]
    while total > limit:
        shrink = limit / total
        total = 0.0
        for i in range(p):
            x[i] *= shrink
            total += x[i]
    return it


@jit_noalloc(forceinline=True)
def band_cholesky_solve(red, rc, m, k1, v):
    """Solve the banded system over its first ``m`` rows in place: ``red[a, e]`` holds the matrix's
    upper band (``red[a, e] = M[a, a + e]``, ``e < k1``) and becomes its Cholesky factor
    (``red[a, e] = L[a + e, a]`` for ``e > 0``, ``red[a, 0] = L[a, a]``); ``v[:m]`` gets the
    solution of ``M v = rc[:m]``. Returns False, ``v`` scratch, at a pivot at or below ``1e-13`` of
    the largest diagonal (a basis the data do not determine)."""
    dmax = 0.0
    for a in range(m):
        if red[a, 0] > dmax:
            dmax = red[a, 0]
    floor = 1e-13 * dmax
    for a in range(m):
        d = red[a, 0]
        for e in range(1, k1):
            if a - e < 0:
                break
            d -= red[a - e, e] * red[a - e, e]
        if not d > floor:
            return False
        d = np.sqrt(d)
        red[a, 0] = d
        for e in range(1, k1):
            b = a + e
            if b >= m:
                break
            acc = red[a, e]
            for f in range(1, k1 - e):
                if a - f < 0:
                    break
                acc -= red[a - f, f] * red[a - f, f + e]
            red[a, e] = acc / d
    for a in range(m):
        acc = rc[a]
        for e in range(1, k1):
            if a - e < 0:
                break
            acc -= red[a - e, e] * v[a - e]
        v[a] = acc / red[a, 0]
    for a in range(m - 1, -1, -1):
        acc = v[a]
        for e in range(1, k1):
            if a + e >= m:
                break
            acc -= red[a, e] * v[a + e]
        v[a] = acc / red[a, 0]
    return True


@jit
def free_set_band_solve(band, cross, gram, rhs, p, order, free, cap, x):
    """The first subproblem of ``nnls_sum_capped_gram_warm(gram, rhs, cap, x, free)`` solved on the
    banded system, kept when it is that solver's answer; returns whether it is.

    ``gram`` and ``rhs`` are the I-spline normal equations of ``band`` (``band[j, d] = (B' W B)[j,
    j + d]`` for ``d <= order``) and ``cross`` (``B' W y``): :func:`free_set_runs_solve` with the
    cap free, the solver's scale read from ``gram`` and ``rhs``, on scratch it allocates.
    """
    scale = _solver_scale(gram, rhs, p)
    k1 = order + 1
    run = np.empty(p, dtype=np.intp)
    red = np.empty((p, k1))
    rc, v, g = np.empty(p), np.empty(p), np.empty(p)
    capped = p < 0  # False, typed as the other callers' flag (a literal would compile another version)
    return free_set_runs_solve(band, cross, p, order, free, cap, capped, scale, x, run, red, rc, v, g)


@jit_noalloc
def free_set_runs_solve(band, cross, p, order, free, cap, capped, scale, x, run, red, rc, v, g):
    """The subproblem of the constrained I-spline solve on the free set ``free`` solved on the
    banded system; returns whether its solution (in ``x``) is the constrained optimum.

    ``band[j, d] = (B' W B)[j, j + d]`` (``d <= order``) and ``cross`` (``B' W y``) are the
    B-spline normal equations. With the coefficients outside ``free`` at 0 the B-spline
    coefficients ``cumsum(x)`` are constant on runs (one per free coefficient, 0 before the
    first), so the subproblem is the banded ``S' K S v = S' B' W y`` in the runs' values ``v``:
    ``O(p order^2)`` where the dense one is ``O(m^3)``. With ``capped`` the sum cap is active as
    well (the last run's value fixed at ``cap``, its terms moved to the right-hand side).

    The solution is kept when it is the optimum of ``min 1/2 x' G x - b' x``, ``x >= 0``,
    ``sum(x) <= cap`` (``G``, ``b`` the I-spline normal equations): every free coefficient
    positive; without ``capped`` the exact sum below ``cap`` (its ulp margin) and every bound's
    multiplier (the gradient's suffix sums ``g``) at least ``-1e-12 scale``; with it the cap's
    multiplier ``mu = -g_free`` and every bound's ``g_j + mu`` at least that. ``scale`` is the
    solvers' ``max_i max(G[i, i], |b[i]|)`` (0 read as 1). Otherwise, or at a pivot below
    ``1e-13`` of the largest diagonal (a basis the data do not determine), ``x`` is scratch.
    Scratch: ``run`` (intp) and ``rc``, ``v``, ``g`` of at least ``p``, ``red`` of at least
    ``(p, order + 1)``.
    """
    m = np.int64(0)  # a NumPy start: band_cholesky_solve compiles for int64 alone (``_config``)
    for i in range(p):
        if free[i]:
            m += 1
    if m == 0:
        return False
    k1 = order + 1
    r = -1  # each B-spline coefficient's run, -1 before the first
    for j in range(p):
        if free[j]:
            r += 1
        run[j] = r
    for a in range(m):  # red[a, e] = (S' K S)[a, a + e]
        rc[a] = 0.0
        for e in range(k1):
            red[a, e] = 0.0
    for j in range(p):
        a = run[j]
        if a < 0:
            continue
        rc[a] += cross[j]
        red[a, 0] += band[j, 0]
        for d in range(1, k1):
            if j + d >= p:
                break
            b = run[j + d]
            if b == a:
                red[a, 0] += 2.0 * band[j, d]
            else:
                red[a, b - a] += band[j, d]
    if capped:
        ml = m - 1  # the last run's value is the cap: its terms move to the right-hand side
        for e in range(1, k1):
            a = ml - e
            if a < 0:
                break
            rc[a] -= red[a, e] * cap
        if not band_cholesky_solve(red, rc, ml, k1, v):
            return False
        v[ml] = cap
    elif not band_cholesky_solve(red, rc, m, k1, v):
        return False
    # the coefficients: each free one the step between its run and the previous one
    prev = 0.0
    total = 0.0
    for j in range(p):
        if free[j]:
            x[j] = v[run[j]] - prev
            prev = v[run[j]]
            if not x[j] > 0.0:
                return False
        else:
            x[j] = 0.0
        total += x[j]
    if not capped and total > cap * (1.0 - (p + 1) * 2.0**-52):
        return False
    # the multipliers of the bounds: gradient G x - b = suffix sums of K beta - B' W y
    tol = 1e-12 * scale
    grad = 0.0
    for j in range(p - 1, -1, -1):
        bj = v[run[j]] if run[j] >= 0 else 0.0
        acc = band[j, 0] * bj - cross[j]
        for d in range(1, k1):
            if j + d < p:
                acc += band[j, d] * (v[run[j + d]] if run[j + d] >= 0 else 0.0)
            if j - d >= 0:
                acc += band[j - d, d] * (v[run[j - d]] if run[j - d] >= 0 else 0.0)
        grad += acc
        g[j] = grad
        if not capped and not free[j] and grad < -tol:
            return False
    if not capped:
        return True
    mu = 0.0
    for j in range(p):
        if free[j]:
            mu = -g[j]
            break
    certified = mu >= -tol
    for j in range(p):
        if not free[j] and g[j] + mu < -tol:
            certified = False
            break
    return certified


# --------------------------------------------------------------------------------------------
# the streaming calibrator's refit from its bucket histogram, in one call


@jit
def warm_free_set(old_knots, old_coef, old_p, new_knots, new_p, order, free):
    """The warm start of a solve whose basis changed size: ``free[:new_p]`` from the previous fit.

    The previous fit (knots ``old_knots``, coefficients ``old_coef[:old_p]``) has a free set for
    another basis. Each new coefficient takes the state (``old_coef > 0``) of the old one whose
    B-spline's Greville abscissa (the mean of its ``order`` inner knots) is nearest its own: a
    knot inserted or dropped shifts the indices past it, and the knots that stay keep their
    coefficients' states. Without a previous fit (``old_p == 0``) every bound starts in the
    working set (the cold start). Any guess gives the same optimum; this one is a few steps from
    it where the old guess would cost about one step per free coefficient.
    """
    if old_p == 0:
        for q in range(new_p):
            free[q] = False
        return
    j = 0
    gj = _greville(old_knots, 0, order)
    for q in range(new_p):
        g = _greville(new_knots, q, order)
        while j + 1 < old_p:
            gn = _greville(old_knots, j + 1, order)
            if abs(gn - g) > abs(gj - g):
                break
            j += 1
            gj = gn
        free[q] = old_coef[j] > 0.0


@jit(inline="always")
def _greville(t, q, order):
    acc = 0.0
    for r in range(1, order + 1):
        acc += t[q + r]
    return acc / order


@jit
def ispline_refit_histogram(
    centres, pos, neg, order, wanted, inner, use_inner, hint, hint_knots, previous_knots, cache
):
    """The I-spline fit of a bucket histogram: ``(knots, coef, bspline_coef, n_iter)``.

    The steps and floating-point operations of ``streamcal.spline.fit.fit_distinct`` on the
    non-empty buckets (weights ``pos + neg``, label means ``pos / (pos + neg)``; centres
    ascending, at least one bucket non-empty), without the calls between them: the knots at the
    weighted quantiles (``wanted`` interior knots, capped by the non-empty buckets) or, with
    ``use_inner``, the given interior ``inner`` inside the score range; the Gram system; its
    exact constrained solve, warm-started from ``hint`` (the free coefficients of the previous
    fit, whose knots are ``hint_knots``; where the basis changed size, mapped onto the new one
    by :func:`warm_free_set`), its first subproblem solved banded (:func:`free_set_band_solve`) and
    kept when it is the optimum, else the dense solver's steps. ``bspline_coef`` is
    ``min(cumsum(coef), 1)``.

    ``cache`` (float64, ``(n_buckets + 1, order + 3)``, in/out; a new one: ``cache[0, 0] = 0``,
    every other entry -1) keeps each bucket's non-zero B-splines at its centre for the knots
    ``previous_knots`` of the previous call on it. Row ``i + 1`` is bucket ``i``: the stamp of
    the knot vector it was computed for, the index of its first non-zero B-spline, then the
    ``order + 1`` values. ``cache[0, 0]`` is the current stamp, changed whenever the knots change;
    a bucket's row is computed when its stamp is stale. The values are those
    ``ispline_gram_clamped`` computes, so the Gram system is the same to the last bit.
    """
    n = 0
    for i in range(centres.shape[0]):
        if pos[i] + neg[i] > 0.0:
            n += 1
    which = np.empty(n, dtype=np.intp)
    values = np.empty(n)
    weights = np.empty(n)
    means = np.empty(n)
    j = 0
    for i in range(centres.shape[0]):
        w = pos[i] + neg[i]
        if w > 0.0:
            which[j] = i
            values[j] = centres[i]
            weights[j] = w
            means[j] = pos[i] / w
            j += 1
    lower = values[0]
    upper = values[n - 1]
    candidates = np.empty(0)
    if not upper > lower:  # one distinct score: a constant map
        upper = lower + max(1.0, abs(lower))
    elif use_inner:
        candidates = inner
    else:
        k = min(wanted, max(0, n - order - 1))
        if k > 0 and n >= 3:
            # the inverted weighted CDF at the levels j / (k + 1): the first cumulative weight
            # reaching each level
            cum = np.empty(n)
            acc = 0.0
            for i in range(n):
                acc += weights[i]
                cum[i] = acc
            candidates = np.empty(k)
            at = 0
            for q in range(k):
                level = cum[n - 1] * float(q + 1) / float(k + 1)
                while at < n and cum[at] < level:
                    at += 1
                candidates[q] = values[min(at, n - 1)]
    # interior knots: distinct, ascending, strictly inside (lower, upper)
    m = 0
    interior = np.empty(candidates.shape[0])
    for q in range(candidates.shape[0]):
        c = candidates[q]
        if c > lower and c < upper and (m == 0 or c > interior[m - 1]):
            interior[m] = c
            m += 1
    t = np.empty(m + 2 * (order + 1))
    for q in range(order + 1):
        t[q] = lower
        t[m + order + 1 + q] = upper
    for q in range(m):
        t[order + 1 + q] = interior[q]
    p = t.shape[0] - order - 1
    gram = np.empty((p, p))
    rhs = np.empty(p)
    compact = np.empty((p, order + 1))
    cross = np.empty(p)
    _gram_cached(which, values, weights, means, t, order, previous_knots, cache, gram, rhs, compact, cross)
    coef = np.empty(p)
    passive = np.zeros(p, dtype=np.bool_)
    if hint.shape[0] == p:
        for q in range(p):
            passive[q] = hint[q]
    elif hint.shape[0] > 0 and hint_knots.shape[0] == hint.shape[0] + order + 1:
        old = np.empty(hint.shape[0])
        for q in range(hint.shape[0]):
            old[q] = 1.0 if hint[q] else 0.0
        warm_free_set(hint_knots, old, hint.shape[0], t, p, order, passive)
    if free_set_band_solve(compact, cross, gram, rhs, p, order, passive, 1.0, coef):
        n_iter = 1
    else:
        n_iter = nnls_sum_capped_gram_warm(gram, rhs, 1.0, coef, passive)
    beta = np.empty(p)
    acc = 0.0
    for q in range(p):
        acc += coef[q]
        beta[q] = min(acc, 1.0)
    return t, coef, beta, n_iter


@jit(inline="always")
def _gram_cached(which, x, w, y, t, order, previous_knots, cache, gram, rhs, compact, cross_out):
    """``ispline_gram_clamped(x, w, y, t, order, gram, rhs)`` with each bucket's B-splines read
    from ``cache`` (see :func:`ispline_refit_histogram`; ``which`` the buckets of ``x``); the band
    of ``B' W B`` into ``compact`` (``compact[j, d] = (B' W B)[j, j + d]``), ``B' W y`` into
    ``cross_out``."""
    k1 = order + 1
    nb = t.shape[0] - k1
    same = previous_knots.shape[0] == t.shape[0]
    if same:
        for q in range(t.shape[0]):
            if previous_knots[q] != t[q]:
                same = False
                break
    if not same:
        cache[0, 0] += 1.0  # a new stamp: every row is stale
    stamp = cache[0, 0]
    lo, hi = clamped_span_bounds(t, k1)
    lower = t[0]
    upper = t[t.shape[0] - 1]
    values = np.empty(k1)
    left = np.empty(k1)
    right = np.empty(k1)
    band = np.zeros((nb, nb))
    cross = np.zeros(nb)
    for n in range(x.shape[0]):
        row = which[n] + 1
        if cache[row, 0] != stamp:
            xn = min(max(x[n], lower), upper)
            mu = clamped_span(t, xn, lo, hi)
            bspline_nonzero_inplace(t, xn, mu, k1, values, left, right)
            cache[row, 0] = stamp
            cache[row, 1] = mu - k1 + 1
            for r in range(k1):
                cache[row, 2 + r] = values[r]
        base = int(cache[row, 1])
        wn = w[n]
        for r in range(k1):
            wr = wn * cache[row, 2 + r]
            cross[base + r] += wr * y[n]
            for s in range(r, k1):
                band[base + r, base + s] += wr * cache[row, 2 + s]
    for j in range(nb):
        cross_out[j] = cross[j]
        for d in range(k1):
            compact[j, d] = band[j, j + d] if j + d < nb else 0.0
    _gram_from_band(band, cross, gram, rhs)
