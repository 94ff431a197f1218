"""Kernels for pairwise coupling (Hastie & Tibshirani 1998; Wu, Lin & Weng 2004).

Preconditions shared by every kernel here (:func:`streamcal.pairwise_couple` checks them):

- ``r`` is a C-contiguous float64 array of shape (m, K, K) with K >= 2, every off-diagonal entry
  in [0, 1] and ``r[e, j, i] == 1 - r[e, i, j]``; the diagonal is never read.
- ``n`` is a C-contiguous float64 array of shape (1, K, K) (one weight matrix shared by all events)
  or (m, K, K); off-diagonal entries are finite, non-negative and symmetric; the diagonal is never
  read.
- output arrays have the shapes stated and are fully overwritten.
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels._config import jit


@jit
def _pair_mu(pi, pj, rij):
    # mu_ij = p_i / (p_i + p_j); when both classes sit at probability zero the ratio is free and
    # the pair is treated as fitted exactly (mu_ij = r_ij), the limit the iteration approaches.
    s = pi + pj
    if s > 0.0:
        return pi / s
    return rij


@jit
def ht_score_residual(r, n, p):
    """Largest row residual of the score equations (paper eq. 2.5), per unit row weight.

    ``max_i |sum_j n_ij (mu_ij - r_ij)| / sum_j n_ij`` over the rows with positive weight, for one
    event: ``r`` and ``n`` are (K, K), ``p`` is (K,).
    """
    k = p.shape[0]
    worst = 0.0
    for i in range(k):
        num = 0.0
        tot = 0.0
        for j in range(k):
            if j != i:
                nij = n[i, j]
                num += nij * (_pair_mu(p[i], p[j], r[i, j]) - r[i, j])
                tot += nij
        if tot > 0.0:
            res = abs(num) / tot
            if res > worst:
                worst = res
    return worst


@jit
def ht_couple_one(r, n, tol, max_iter, p, target, total_weight):
    """Hastie–Tibshirani iterative scaling for one event; writes ``p`` (K,), returns sweeps run.

    Starts from the row-average estimate (paper eq. 3.7) and runs Gauss–Seidel sweeps
    ``p_i <- p_i * sum_j n_ij r_ij / sum_j n_ij mu_ij`` until :func:`ht_score_residual` is at most
    ``tol`` (checked before each sweep, so ``max_iter = 0`` returns the start estimate). ``p`` is
    renormalised after each sweep; ``mu`` depends on ratios only, so this gives the same iterates as
    renormalising after every coordinate. Rows whose weights are all zero keep their start value.
    ``target`` and ``total_weight`` ((K,) each) are scratch. Returns the number of sweeps, or
    ``-1 - max_iter`` if the tolerance was not reached.
    """
    k = p.shape[0]
    scale = 2.0 / (k * (k - 1.0))
    total = 0.0
    for i in range(k):
        acc = 0.0
        tgt = 0.0
        tot = 0.0
        for j in range(k):
            if j != i:
                acc += r[i, j]
                tgt += n[i, j] * r[i, j]
                tot += n[i, j]
        p[i] = scale * acc
        target[i] = tgt
        total_weight[i] = tot
        total += p[i]
    for i in range(k):
        p[i] /= total
    # The exact residual (an extra O(K^2) pass) is evaluated before the first sweep and then only
    # once the residuals met during a sweep (each row's, just before its update) are within tol.
    check_exact = True
    sweeps = 0
    while True:
        if check_exact and ht_score_residual(r, n, p) <= tol:
            return sweeps
        if sweeps == max_iter:
            return -1 - sweeps
        seen = 0.0
        for i in range(k):
            fitted = 0.0
            pi = p[i]
            for j in range(k):
                if j != i:
                    fitted += n[i, j] * _pair_mu(pi, p[j], r[i, j])
            if fitted > 0.0:
                p[i] = pi * (target[i] / fitted)
            if total_weight[i] > 0.0:
                res = abs(fitted - target[i]) / total_weight[i]
                if res > seen:
                    seen = res
        total = 0.0
        for i in range(k):
            total += p[i]
        for i in range(k):
            p[i] /= total
        sweeps += 1
        check_exact = seen <= tol or sweeps == max_iter


@jit
def ht_couple_batch(r, n, tol, max_iter, p_out, sweeps_out):
    """:func:`ht_couple_one` for every event: ``p_out`` (m, K), ``sweeps_out`` (m,) intp."""
    m, k = r.shape[0], r.shape[1]
    shared = n.shape[0] == 1
    target = np.empty(k)
    total_weight = np.empty(k)
    for e in range(m):
        ne = n[0] if shared else n[e]
        sweeps_out[e] = ht_couple_one(r[e], ne, tol, max_iter, p_out[e], target, total_weight)


@jit
def wlw_system_fill(r, n, a):
    """Fill ``a`` ((K+1, K+1)) with Wu–Lin–Weng method 2's bordered system for one event.

    ``[[Q, 1], [1^T, 0]]`` with ``Q_ii = sum_{s != i} n_is r_si^2`` and ``Q_ij = -n_ij r_ji r_ij``:
    the optimality conditions of ``min_p sum_{i<j} n_ij (r_ji p_i - r_ij p_j)^2`` subject to
    ``sum_i p_i = 1``. With ``n = 1`` this is LIBSVM's ``multiclass_probability`` objective.
    """
    k = r.shape[0]
    for i in range(k + 1):
        for j in range(k + 1):
            a[i, j] = 0.0
    for i in range(k):
        for j in range(k):
            if j != i:
                q = n[i, j] * r[j, i] * r[i, j]
                a[i, j] = -q
                a[i, i] += n[i, j] * r[j, i] * r[j, i]
        a[i, k] = 1.0
        a[k, i] = 1.0


@jit
def solve_inplace_partial_pivot(a, b, rel_pivot_tol):
    """Solve ``a x = b`` by Gaussian elimination with partial pivoting; ``b`` becomes ``x``.

    ``a`` is destroyed. Returns False (leaving ``b`` undefined) if a pivot's magnitude is at most
    ``rel_pivot_tol`` times the largest magnitude in ``a`` (a singular or numerically singular
    system), True otherwise.
    """
    size = a.shape[0]
    big = 0.0
    for i in range(size):
        for j in range(size):
            v = abs(a[i, j])
            if v > big:
                big = v
    floor = rel_pivot_tol * big
    for c in range(size):
        piv = c
        best = abs(a[c, c])
        for i in range(c + 1, size):
            v = abs(a[i, c])
            if v > best:
                best = v
                piv = i
        if not best > floor:
            return False
        if piv != c:
            for j in range(size):
                tmp = a[c, j]
                a[c, j] = a[piv, j]
                a[piv, j] = tmp
            tmp = b[c]
            b[c] = b[piv]
            b[piv] = tmp
        inv = 1.0 / a[c, c]
        for i in range(c + 1, size):
            f = a[i, c] * inv
            if f != 0.0:
                for j in range(c, size):
                    a[i, j] -= f * a[c, j]
                b[i] -= f * b[c]
    for c in range(size - 1, -1, -1):
        acc = b[c]
        for j in range(c + 1, size):
            acc -= a[c, j] * b[j]
        b[c] = acc / a[c, c]
    return True


@jit
def wlw_couple_one(r, n, p, a, rhs, n_work):
    """Wu–Lin–Weng method 2 for one event, solved exactly; writes ``p`` (K,).

    ``a`` ((K+1, K+1)), ``rhs`` ((K+1,)) and ``n_work`` ((K, K)) are scratch. The bordered system
    is nonsingular whenever every n_ij > 0. If it is singular (zero weights leave classes without a
    unique split), zero weights are replaced by ``1e-9`` times the largest weight and the system is
    solved again. Rounding-level negatives are set to zero and ``p`` is renormalised.
    Returns True if the first, exact solve succeeded.
    """
    k = r.shape[0]
    wlw_system_fill(r, n, a)
    for i in range(k):
        rhs[i] = 0.0
    rhs[k] = 1.0
    exact = solve_inplace_partial_pivot(a, rhs, 1e-14)
    if not exact:
        big = 0.0
        for i in range(k):
            for j in range(k):
                if j != i and n[i, j] > big:
                    big = n[i, j]
        fill = 1e-9 * big if big > 0.0 else 1.0
        for i in range(k):
            for j in range(k):
                v = n[i, j]
                n_work[i, j] = v if v > 0.0 else fill
        wlw_system_fill(r, n_work, a)
        for i in range(k):
            rhs[i] = 0.0
        rhs[k] = 1.0
        solve_inplace_partial_pivot(a, rhs, 0.0)
    total = 0.0
    for i in range(k):
        v = rhs[i]
        if v < 0.0:
            v = 0.0
        p[i] = v
        total += v
    for i in range(k):
        p[i] /= total
    return exact


@jit
def wlw_couple_batch(r, n, p_out, exact_out):
    """:func:`wlw_couple_one` for every event: ``p_out`` (m, K), ``exact_out`` (m,) bool."""
    m, k = r.shape[0], r.shape[1]
    shared = n.shape[0] == 1
    a = np.empty((k + 1, k + 1))
    rhs = np.empty(k + 1)
    n_work = np.empty((k, k))
    for e in range(m):
        ne = n[0] if shared else n[e]
        exact_out[e] = wlw_couple_one(r[e], ne, p_out[e], a, rhs, n_work)
