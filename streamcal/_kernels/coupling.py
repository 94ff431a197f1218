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

import math

import numpy as np

from streamcal._kernels._config import jit, jit_noalloc


@jit_noalloc(forceinline=True)
def _pair_mu(pi, pj, rij):
    # mu_ij = p_i / (p_i + p_j); when both classes sit at probability zero the ratio is free and
    # the pair is treated as fitted exactly (mu_ij = r_ij), the limit the iteration approaches.
    s = pi + pj
    if s > 0.0:
        return pi / s
    return rij


@jit_noalloc(forceinline=True)
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


@jit_noalloc(forceinline=True)
def ht_criterion_log(r, n, theta, active):
    """Paper 002's criterion (eq. 2.4 up to a constant) at ``p = softmax(theta)``, for one event.

    ``sum_{i<j} n_ij [r_ij log mu_ij + (1 - r_ij) log(1 - mu_ij)]`` with
    ``mu_ij = sigmoid(theta_i - theta_j)``, over the pairs of classes that are both ``active``
    (the others sit at probability zero and contribute a constant).
    """
    k = theta.shape[0]
    total = 0.0
    for i in range(k):
        if not active[i]:
            continue
        for j in range(i + 1, k):
            nij = n[i, j]
            if not active[j] or nij == 0.0:
                continue
            x = theta[i] - theta[j]
            # log sigmoid(x) and log sigmoid(-x) = log sigmoid(x) - x, from one exp and one log1p
            if x > 0.0:
                log_mu = -np.log1p(np.exp(-x))
                log_one_minus_mu = log_mu - x
            else:
                log_one_minus_mu = -np.log1p(np.exp(x))
                log_mu = log_one_minus_mu + x
            rij = r[i, j]
            if rij > 0.0:
                total += nij * rij * log_mu
            if rij < 1.0:
                total += nij * (1.0 - rij) * log_one_minus_mu
    return total


@jit_noalloc
def ht_newton_step_inplace(r, n, p, theta, trial, active, idx, a, rhs):
    """One safeguarded Newton step on ``theta = log p`` for one event; updates ``p`` in place.

    The criterion is concave in ``theta``; its gradient is ``sum_j n_ij (r_ij - mu_ij)`` (the score
    equations) and its Hessian minus the graph Laplacian with weights ``n_ij mu_ij (1 - mu_ij)``.
    The step solves the Laplacian system with ``sum(delta) = 0`` over the classes with
    ``p_i > 0`` and backtracks (halving up to 40 times) until the criterion does not decrease
    (beyond the rounding error of evaluating it).
    ``theta``, ``trial`` ((K,)), ``active`` ((K,) bool), ``idx`` ((K,) intp), ``a``
    ((K+1, K+1)) and ``rhs`` ((K+1,)) are scratch. Returns False, leaving ``p`` unchanged, if the
    system is singular or no step length ascends.
    """
    k = p.shape[0]
    size = 0
    for i in range(k):
        active[i] = p[i] > 0.0
        if active[i]:
            theta[i] = np.log(p[i])
            idx[size] = i
            size += 1
    if size < 2:
        return False
    for u in range(size + 1):
        rhs[u] = 0.0
        for v in range(size + 1):
            a[u, v] = 0.0
    for u in range(size):
        i = idx[u]
        for v in range(u + 1, size):
            j = idx[v]
            nij = n[i, j]
            if nij == 0.0:
                continue
            mu = 1.0 / (1.0 + np.exp(theta[j] - theta[i]))
            g = nij * (r[i, j] - mu)
            w = nij * mu * (1.0 - mu)
            rhs[u] += g
            rhs[v] -= g
            a[u, u] += w
            a[v, v] += w
            a[u, v] -= w
            a[v, u] -= w
        a[u, size] = 1.0
        a[size, u] = 1.0
    if not solve_inplace_partial_pivot(a, rhs, size + 1, 1e-13):
        return False
    base = ht_criterion_log(r, n, theta, active)
    # Near the optimum a Newton step changes the criterion by less than the rounding error of
    # summing it (all terms are <= 0, so that error is about K^2 * eps * |criterion|): steps that
    # do not decrease it beyond that bound are accepted.
    floor = base - 1e-13 * abs(base)
    step = 1.0
    for _ in range(40):
        for i in range(k):
            trial[i] = theta[i]
        for u in range(size):
            trial[idx[u]] += step * rhs[u]
        if ht_criterion_log(r, n, trial, active) >= floor:
            top = -np.inf
            for u in range(size):
                if trial[idx[u]] > top:
                    top = trial[idx[u]]
            total = 0.0
            for u in range(size):
                i = idx[u]
                p[i] = np.exp(trial[i] - top)
                total += p[i]
            for u in range(size):
                p[idx[u]] /= total
            return True
        step *= 0.5
    return False


@jit_noalloc
def ht_couple_one(r, n, tol, max_iter, newton_after, p, target, total_weight, scratch):
    """Hastie–Tibshirani iterative scaling for one event; writes ``p`` (K,), returns iterations.

    Starts from the row-average estimate (paper eq. 3.7). Each iteration is one Gauss–Seidel sweep
    ``p_i <- p_i * sum_j n_ij r_ij / sum_j n_ij mu_ij`` (renormalised after the sweep; ``mu``
    depends on ratios only, so this gives the same iterates as renormalising after every
    coordinate); once ``newton_after`` sweeps have run (``newton_after >= 0``), each sweep that
    leaves the residual above ``tol`` is followed by one :func:`ht_newton_step_inplace`.
    ``newton_after = -1``: the paper's sweeps alone. Stops when :func:`ht_score_residual` is at
    most ``tol`` (checked before each iteration, so ``max_iter = 0`` returns the start estimate).
    Rows whose weights are all zero keep their start value. ``target``, ``total_weight`` ((K,))
    and ``scratch`` (the last six arguments of :func:`ht_newton_step_inplace`) are scratch.
    Returns the number of iterations, or ``-1 - max_iter`` if the tolerance was not reached.
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
    # Until Newton steps join, the exact residual (an extra O(K^2) pass) is evaluated before the
    # first sweep and then only once the residuals met during a sweep (each row's, just before its
    # update) are within tol.
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
        if 0 <= newton_after <= sweeps:
            if ht_score_residual(r, n, p) <= tol:
                return sweeps
            theta, trial, active, idx, a, rhs = scratch
            ht_newton_step_inplace(r, n, p, theta, trial, active, idx, a, rhs)
            check_exact = True
        else:
            check_exact = seen <= tol or sweeps == max_iter


#: Most full Newton steps of :func:`ht_couple_newton_one` (over both of its starts) before it hands
#: the event to :func:`ht_couple_one`; from the mean log-odds start three or four are typical.
NEWTON_FULL_STEPS = 30
_FULL_STEPS = np.int64(NEWTON_FULL_STEPS)  # passed to a callee: typed int64, not a literal (``_config``)


@jit_noalloc(forceinline=True)
def ht_couple_newton_one(r, n, tol, max_iter, newton_after, p, target, total_weight, scratch, weights):
    """The Hastie–Tibshirani fixed point for one event by full Newton steps; writes ``p`` (K,).

    The criterion (:func:`ht_criterion_log`) is concave in ``theta = log p``; where every
    off-diagonal ``r_ij`` lies strictly inside (0, 1) and every ``n_ij`` is positive its maximum
    is interior and unique, and Newton's method converges to it quadratically once near
    (:func:`ht_newton_full_steps`). The first start is each class's mean pairwise log-odds,
    ``theta_i = (1/K) sum_j log(r_ij / r_ji)``: the least-squares fit of ``theta_i - theta_j`` to
    the pairs' log-odds with equal weights, the exact solution where the r_ij are consistent, and
    within a step or two of the optimum where they nearly are. Where the steps from there fail,
    they start again from the row average (paper eq. 3.7).

    Anything else goes to :func:`ht_couple_one` (the paper's sweeps, then safeguarded Newton
    steps, with the same arguments) from the start: an ``r_ij`` of exactly 0 or 1 or an
    ``n_ij`` of 0 (the maximum may sit on the boundary), ``max_iter = 0`` (the start estimate),
    or steps failing from both starts. ``weights`` ((K, K)) is scratch, as
    are ``target``, ``total_weight`` and ``scratch`` (those of :func:`ht_couple_one`). Returns
    the number of steps taken here (from both starts), or what :func:`ht_couple_one` returns.

    Inlined into its callers, with :func:`ht_newton_full_steps`: the river face's prediction kernel
    (``multiclass._one_call``) passes views whose shapes are constants of its K, so that the
    compiler unrolls the loops over K and tells the views of its one frame apart (about 0.3 µs of
    the 1 µs an event at K = 5); the same operations in the same order, so the same bits.
    """
    k = p.shape[0]
    theta = scratch[0]
    interior = max_iter > 0
    for i in range(k):
        for j in range(k):
            if j != i and not (0.0 < r[i, j] < 1.0 and n[i, j] > 0.0):
                interior = False
    if not interior:
        return ht_couple_one(r, n, tol, max_iter, newton_after, p, target, total_weight, scratch)
    # theta_i = log(prod_j r_ij / prod_j r_ji) / K: K logarithms, not K(K-1)/2 (each product
    # at least the smallest r_ij to the power K - 1; where one underflows, the row average)
    inverse_k = 1.0 / k
    finite = True
    for i in range(k):
        tot = 0.0
        num = 1.0
        den = 1.0
        for j in range(k):
            if j != i:
                tot += n[i, j]
                num *= r[i, j]
                den *= r[j, i]
        total_weight[i] = 1.0 / tot  # the residual's row scale, multiplied at every step
        theta[i] = np.log(num / den) * inverse_k
        finite = finite and -np.inf < theta[i] < np.inf
    first = -1
    if finite:
        first = ht_newton_full_steps(r, n, tol, _FULL_STEPS, p, target, total_weight, scratch, weights)
    if first >= 0:
        return ht_normalised(p, first)
    used = -1 - first
    average = 2.0 / (k * (k - 1.0))
    for i in range(k):
        acc = 0.0
        for j in range(k):
            if j != i:
                acc += r[i, j]
        theta[i] = np.log(average * acc)  # the normalisation is a shift of theta: left out
    budget = _FULL_STEPS - used
    steps = ht_newton_full_steps(r, n, tol, budget, p, target, total_weight, scratch, weights)
    if steps < 0:
        return ht_couple_one(r, n, tol, max_iter, newton_after, p, target, total_weight, scratch)
    return ht_normalised(p, used + steps)


@jit_noalloc(forceinline=True)
def ht_exp_shifted(theta, p):
    """``p_i = exp(theta_i - max(theta))``: the distribution of ``theta`` up to its sum."""
    k = p.shape[0]
    top = theta[0]
    for i in range(k):
        if theta[i] > top:
            top = theta[i]
    for i in range(k):
        p[i] = np.exp(theta[i] - top)


@jit_noalloc(forceinline=True)
def ht_normalised(p, steps):
    """``p`` divided by its sum; returns ``steps``."""
    k = p.shape[0]
    total = 0.0
    for i in range(k):
        total += p[i]
    for i in range(k):
        p[i] /= total
    return steps


@jit_noalloc(forceinline=True)
def ht_newton_full_steps(r, n, tol, budget, p, target, total_weight, scratch, weights):
    """Full Newton steps on ``theta = log p`` (``scratch[0]``, the start on entry, up to a shift)
    for one interior event of :func:`ht_couple_newton_one`; ``total_weight`` holds the inverse
    of each row's weight sum.

    Each step solves the Laplacian system of :func:`ht_newton_step_inplace` and is taken whole,
    as long as it lowers the largest row residual (:func:`ht_score_residual`, here evaluated in
    ``theta``). Once that residual is at most ``tol`` the steps go on while each lowers it to a
    quarter or less, until it is at the rounding level (1e-15), and the point of the lowest
    residual is left in ``theta`` (and ``exp(theta - max(theta))`` in ``p``): quadratic
    convergence takes it from ``tol`` to the rounding level in one step where the system is well
    conditioned, and a few more steps where pair weights span many orders of magnitude (the
    solve's error then limits each step's gain).
    Returns the number of steps, or ``-1 - steps`` if they failed before the residual was within
    ``tol`` (a step that does not lower it, a singular system, or more than ``budget`` steps).
    """
    k = p.shape[0]
    theta, previous, _, idx, a, rhs = scratch
    best = np.inf
    steps = 0
    size = k - 1
    while True:
        # the gradient (the score equations) in target, the Laplacian L of the weights
        # w_ij = n_ij mu_ij (1 - mu_ij) (minus the Hessian) in weights
        for i in range(k):
            target[i] = 0.0
            weights[i, i] = 0.0
        ht_exp_shifted(theta, p)  # mu_ij = p_i / (p_i + p_j): K exponentials, not K(K-1)/2
        for i in range(k):
            # row i's sums kept in registers, then stored: the same additions in the same order (the
            # compiler cannot keep them there itself, since the arrays may share a buffer: the
            # river face's frame)
            pi = p[i]
            gi = target[i]
            wi = weights[i, i]
            for j in range(i + 1, k):
                nij = n[i, j]
                mu = pi / (pi + p[j])
                g = nij * (r[i, j] - mu)
                w = nij * mu * (1.0 - mu)
                gi += g
                target[j] -= g
                wi += w
                weights[j, j] += w
                weights[i, j] = w
                weights[j, i] = w
            target[i] = gi
            weights[i, i] = wi
        worst = 0.0
        ref = 0
        for i in range(k):
            res = abs(target[i]) * total_weight[i]
            if res > worst:
                worst = res
            if weights[i, i] > weights[ref, ref]:
                ref = i
        if not worst < best:  # the last step did not lower the residual (NaN neither)
            if best <= tol:  # the point before it had converged: keep that one
                for i in range(k):
                    theta[i] = previous[i]
                ht_exp_shifted(theta, p)
                return steps
            return -1 - steps
        converged = worst <= tol
        if converged and (worst <= 1e-15 or worst > 0.25 * best):  # within tol, at the rounding level or stalled
            return steps
        # The Newton step solves L delta = g up to a constant shift: theta_ref is held fixed (ref
        # the class of the largest diagonal) and the other K - 1 equations, a symmetric diagonally
        # dominant M-matrix, are solved by Gaussian elimination without pivoting (stable for such
        # matrices, and its error bound does not depend on how the rows are scaled: pairs weighted
        # 1e-6 beside pairs weighted 1e4 need no rescaling); a pivot at most 1e-13 of its row's
        # diagonal counts as singular.
        if steps == budget:
            return steps if converged else -1 - steps
        u = 0
        for i in range(k):
            if i != ref:
                idx[u] = i
                u += 1
        for u in range(size):
            i = idx[u]
            rhs[u] = target[i]
            for v in range(size):
                a[u, v] = weights[i, i] if u == v else -weights[i, idx[v]]
        if not _solve_without_pivoting(a, rhs, size, weights, idx):
            return steps if converged else -1 - steps
        best = worst
        for i in range(k):
            previous[i] = theta[i]
        for u in range(size):
            theta[idx[u]] += rhs[u]
        steps += 1


@jit_noalloc(forceinline=True)
def _back_substitute_inplace(a, b, size):
    """``b`` := the solution of the upper triangle of ``a[:size, :size]`` for ``b[:size]``
    (the eliminations' last step)."""
    for c in range(size - 1, -1, -1):
        acc = b[c]
        for j in range(c + 1, size):
            acc -= a[c, j] * b[j]
        b[c] = acc / a[c, c]


@jit_noalloc(forceinline=True)
def _solve_without_pivoting(a, b, size, weights, idx):
    """Solve ``a x = b`` on the leading ``size`` rows by Gaussian elimination without pivoting;
    ``b[:size]`` becomes ``x``, ``a`` is destroyed. False (``b`` undefined) where a pivot is not
    above 1e-13 times its row's diagonal ``weights[idx[c], idx[c]]``."""
    for c in range(size):
        pivot = a[c, c]
        if not pivot > 1e-13 * weights[idx[c], idx[c]]:
            return False
        inv = 1.0 / pivot
        for i in range(c + 1, size):
            f = a[i, c] * inv
            if f != 0.0:
                for j in range(c + 1, size):
                    a[i, j] -= f * a[c, j]
                b[i] -= f * b[c]
    _back_substitute_inplace(a, b, size)
    return True


@jit
def ht_couple_batch(r, n, tol, max_iter, newton_after, p_out, sweeps_out):
    """:func:`ht_couple_one` for every event: ``p_out`` (m, K), ``sweeps_out`` (m,) intp."""
    m, k = r.shape[0], r.shape[1]
    shared = n.shape[0] == 1
    target = np.empty(k)
    total_weight = np.empty(k)
    scratch = (
        np.empty(k),
        np.empty(k),
        np.empty(k, dtype=np.bool_),
        np.empty(k, dtype=np.intp),
        np.empty((k + 1, k + 1)),
        np.empty(k + 1),
    )
    for e in range(m):
        ne = n[0] if shared else n[e]
        sweeps_out[e] = ht_couple_one(r[e], ne, tol, max_iter, newton_after, p_out[e], target, total_weight, scratch)


@jit_noalloc(forceinline=True)
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


@jit_noalloc
def solve_inplace_partial_pivot(a, b, size, rel_pivot_tol):
    """Solve ``a x = b`` on the leading ``size`` rows and columns, by Gaussian elimination with
    partial pivoting; ``b[:size]`` becomes ``x``.

    ``a`` is destroyed. Returns False (leaving ``b`` undefined) if a pivot's magnitude is at most
    ``rel_pivot_tol`` times the largest magnitude in the system (a singular or numerically
    singular system), True otherwise.
    """
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
    _back_substitute_inplace(a, b, size)
    return True


@jit_noalloc
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
    exact = solve_inplace_partial_pivot(a, rhs, k + 1, 1e-14)
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
        solve_inplace_partial_pivot(a, rhs, k + 1, 0.0)
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


# --- the multiclass calibrators' scores -------------------------------------------------------
# The array faces of ``streamcal.multiclass`` compute, for many events at once, exactly what the
# river face computes one event at a time with Python's ``math`` (numba's ``math.log`` and
# ``math.exp`` are the C library's, as Python's are; NumPy's vectorised ones may round
# differently), so that both faces give the same bits.


@jit
def log_scores_inplace(a):
    """Replace the probabilities of ``a`` (m, K) by their logs (``-inf`` for 0)."""
    m, k = a.shape[0], a.shape[1]
    for e in range(m):
        for c in range(k):
            v = a[e, c]
            a[e, c] = math.log(v) if v > 0.0 else -math.inf


@jit
def _clip(d, limit):
    if d > limit:
        return limit
    if d < -limit:
        return -limit
    return d


@jit
def _sigmoid(d):
    if d >= 0.0:
        return 1.0 / (1.0 + math.exp(-d))
    e = math.exp(d)
    return e / (1.0 + e)


@jit
def pair_scores(logs, a, b, limit, sigmoid, out):
    """The score pair (``a``, ``b``)'s calibrator is given for each event: ``d = logs[:, a] -
    logs[:, b]`` (0 where NaN: both classes at ``-inf``) clipped to ``[-limit, limit]``, or its
    sigmoid if ``sigmoid``; written to ``out`` (m,)."""
    for e in range(logs.shape[0]):
        d = logs[e, a] - logs[e, b]
        d = 0.0 if d != d else _clip(d, limit)
        out[e] = _sigmoid(d) if sigmoid else d


@jit
def pair_log_odds(logs, a, b, limit, out):
    """``d`` of :func:`pair_scores` (no sigmoid), written to ``out`` (m,)."""
    for e in range(logs.shape[0]):
        d = logs[e, a] - logs[e, b]
        out[e] = 0.0 if d != d else _clip(d, limit)


@jit
def class_scores(logs, c, limit, probabilities, sigmoid, out):
    """The score class ``c``'s one-vs-rest calibrator is given for each event: its log-odds
    (``logit(p_c)`` from the log-probability if ``probabilities``, else the logit itself),
    clipped to ``[-limit, limit]``, or their sigmoid if ``sigmoid``; written to ``out`` (m,)."""
    for e in range(logs.shape[0]):
        v = logs[e, c]
        if probabilities:
            if v == -math.inf:
                d = -limit
            else:
                p = math.exp(v)
                d = v - math.log1p(-p) if p < 1.0 else math.inf
                d = _clip(d, limit)
        else:
            d = _clip(v, limit)
        out[e] = _sigmoid(d) if sigmoid else d


@jit
def sigmoid_inplace(x):
    """``x`` (m,) replaced by its sigmoid, as :func:`pair_scores` computes it."""
    for e in range(x.shape[0]):
        x[e] = _sigmoid(x[e])


@jit
def bound_pair_probabilities(proba, weight, unseen_score, unseen_weight, out_r, out_n):
    """One pair's coupling inputs per event: where its window ``weight`` is positive, its
    calibrated ``proba`` (NaN read as 0.5) kept within ``[1/(T+2), 1 - 1/(T+2)]``, T the weight;
    elsewhere the model's own probability ``unseen_score`` with weight ``unseen_weight``."""
    for e in range(proba.shape[0]):
        t = weight[e]
        if t > 0.0:
            v = proba[e]
            if v != v:
                v = 0.5
            bound = 1.0 / (t + 2.0)
            v = max(v, bound)
            out_r[e] = min(v, 1.0 - bound)
            out_n[e] = t
        else:
            out_r[e] = unseen_score[e]
            out_n[e] = unseen_weight


@jit
def ht_couple_upper(r_up, n_up, tol, max_iter, newton_after, p_out):
    """:func:`ht_couple_newton_one` for every event given by its upper triangles: ``r_up[q, e]`` and
    ``n_up[q, e]`` ((K(K-1)/2, m)) hold pair q of event e, pairs in the order of
    ``numpy.triu_indices(K, 1)``; ``p_out`` (m, K)."""
    m, k = p_out.shape[0], p_out.shape[1]
    r = np.zeros((k, k))
    n = np.zeros((k, k))
    target = np.empty(k)
    total_weight = np.empty(k)
    scratch = (
        np.empty(k),
        np.empty(k),
        np.empty(k, dtype=np.bool_),
        np.empty(k, dtype=np.intp),
        np.empty((k + 1, k + 1)),
        np.empty(k + 1),
    )
    weights = np.empty((k, k))
    for e in range(m):
        _fill_pairs(r_up, n_up, e, r, n)
        ht_couple_newton_one(r, n, tol, max_iter, newton_after, p_out[e], target, total_weight, scratch, weights)


@jit
def wlw_couple_upper(r_up, n_up, p_out):
    """:func:`wlw_couple_one` for every event given by its upper triangles (as
    :func:`ht_couple_upper`)."""
    m, k = p_out.shape[0], p_out.shape[1]
    r = np.zeros((k, k))
    n = np.zeros((k, k))
    a = np.empty((k + 1, k + 1))
    rhs = np.empty(k + 1)
    n_work = np.empty((k, k))
    for e in range(m):
        _fill_pairs(r_up, n_up, e, r, n)
        wlw_couple_one(r, n, p_out[e], a, rhs, n_work)


@jit_noalloc(forceinline=True)
def _fill_pairs(r_up, n_up, e, r, n):
    k = r.shape[0]
    q = 0
    for i in range(k):
        for j in range(i + 1, k):
            v = r_up[q, e]
            r[i, j] = v
            r[j, i] = 1.0 - v
            nq = n_up[q, e]
            n[i, j] = nq
            n[j, i] = nq
            q += 1


@jit
def time_window_starts(times, seconds, out):
    """For each event k of a time window's learned events (``times`` in order), the number of
    events before it that have left once it is learned: those i with
    ``times[k] - times[i] >= seconds``, as the window expires them; written to ``out`` (n,) intp."""
    first = 0
    for k in range(times.shape[0]):
        while first < k and times[k] - times[first] >= seconds:
            first += 1
        out[k] = first
