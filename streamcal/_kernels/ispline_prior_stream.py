"""The score prior's strength for I-spline's exact default from Taylor moments kept per event (numba).

:func:`streamcal._kernels.ispline_prior.prior_strength_taylor` sums the Taylor moments of the
recalibration's log-likelihood about the warm start ``(a, b)`` in one pass over the buckets, each
bucket with its own ``exp``, ``log1p`` and derivative polynomials: about 25 us per refit on a
1,024-bucket grid, a third of a refit while the prior holds. One event changes one bucket (a
window's eviction another), and the moments are sums over the buckets, linear in each bucket's
weights. :func:`prior_strength_kept` keeps them about a fixed *anchor*: the warm start and the
covariate's standardisation of the call that set it. Each call finds the buckets whose stored
weights changed since the last call (against a copy of the row), adds their change to the
moments and sums, and runs Newton's method on the moments as ``prior_strength_taylor`` does (the
same steps and stopping rule), the log-likelihood's derivatives carried from the anchor's
standardisation to the current one: with ``v = (x - m) s`` now and ``v0 = (x - m0) s0`` at the
anchor, ``a + b v = A + B v0`` for ``A = a + b s (m0 - m)`` and ``B = b s / s0``.

The anchor is set anew (one pass over the buckets, the moments at the current warm start) on
the first call, every ``REBUILD_EVERY`` calls (the sums' rounding does not grow), when many
buckets changed at once (a decaying window's renormalisation), and when the move from the anchor
is more than the Taylor remainder bounds: ``max|sigma^(ORDER)| sum_j w_j delta_j^(ORDER + 1) / (ORDER + 1)!``
above ``TAYLOR_TOL``, ``delta_j`` bucket ``j``'s move of its linear predictor, at most ``|dA| + |dB| |v0_j|``
(``_bounded``: the sums of ``w_j |v0_j|^i`` kept with the moments, so buckets far out on the
covariate do not set the radius for all the others). Where a trial
point of Newton's method leaves that bound from a fresh anchor too (a label of large leverage
moves the optimum that far now and then), a new anchor at the trial point continues the steps
(``_newton_anchored``: the trial point's log-likelihood exact there, as the exact kernel's pass
finds it). Where that fails ``REANCHOR_MAX`` times (a start far from the optimum), or the row is
degenerate (one covariate value, no weight), the anchor is set back at the start and
``prior_strength_taylor`` runs instead (the exact kernel where its own moments do not bound the
move). The result is ``prior_strength_taylor``'s within rounding:
``log kappa`` within about 1e-11, the fitted ``(a, b)`` within about 1e-12.

The kept moments depend on the calls since the anchor (the sums' rounding): a copy or a restored
state, whose cache starts empty, continues within rounding of the original, as the incremental
refit without the prior does.

Arrays (no validation; the calibrator's cache ``_prior_grid`` holds them):

- ``grid`` float64 ``(3 B)``: ``ispline_prior.prior_grid_constants``;
- ``snap`` float64 ``(2 B)``: the stored row the moments are for;
- ``kept`` float64 ``(K_SIZE)``: the anchor and the sums (``K_*``, stored units);
- ``M`` float64 ``(ORDER + 1, ORDER + 1)``: the moments (stored units); ``pw`` float64
  ``(2 (ORDER + 1))``: scratch;
- ``listed``, ``M6``: ``prior_strength_taylor``'s scratch, for its fallback.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit, jit_noalloc
from streamcal._kernels.glm_refit import add_prior_pseudo_counts
from streamcal._kernels.histogram import (
    KIND_DECAY_EVENTS,
    KIND_DECAY_TIME,
    SF_HEADER,
    SF_KIND,
    SF_T_NEG,
    SF_T_POS,
    SI_B,
    histogram_learn_one_inplace,
    stored_unit,
    window_add_inplace,
    window_clock,
    window_expire_next_inplace,
)
from streamcal._kernels.ispline import _combination_at, clamped_span_bounds, ispline_refit_histogram
from streamcal._kernels.ispline_prior import _P, ORDER, REMAINDER_SCALE, TAYLOR_TOL, prior_strength_taylor
from streamcal._kernels.ispline_prior_incr import (
    IK_LISTED,
    IK_SIZE,
    IK_VALID,
    INCR_NONE,
    INCR_SERVED,
    incr_current,
    incr_rebuild,
    incr_refit,
    solve_scratch,
)
from streamcal._kernels.ispline_stream import _pairwise_sum
from streamcal._kernels.prior import KAPPA_MAX, KAPPA_MIN, NEWTON_STEPS, RIDGE, _fit_term

K_VALID = 0
K_MEAN = 1  # the anchor's standardisation: v0 = (x - mean) * scale
K_SCALE = 2
K_A = 3  # the anchor's coefficients in that standardisation
K_B = 4
K_N = 5  # the row's sums: weight, weight times covariate and its square, the prior's log-likelihood
K_SX = 6
K_SXX = 7
K_LOGS = 8
K_CALLS = 9  # calls since the anchor
K_BUCKETS = 10
K_LISTED = 11  # 1: ``snap`` followed the row at the last call (a list of the buckets touched since then serves)
K_ABS = 12  # ``ORDER + 1`` sums: the weight times ``|v0|`` to the powers 1 to ``ORDER + 1`` (the remainder's bound)
K_SIZE = K_ABS + ORDER + 1

REBUILD_EVERY = 1024
MANY_CHANGED = 32  # more buckets changed since the last call: the anchor is set anew


@jit_noalloc(forceinline=True)
def _add_bucket(j, dp, dn, grid, kept, M):
    """Bucket ``j``'s weights changed by ``(dp, dn)`` (stored units): its terms added to the sums
    and the moments about the anchor."""
    x = grid[3 * j]
    w = dp + dn
    kept[K_N] += w
    kept[K_SX] += w * x
    kept[K_SXX] += w * x * x
    kept[K_LOGS] += dp * grid[3 * j + 1] + dn * grid[3 * j + 2]
    v = (x - kept[K_MEAN]) * kept[K_SCALE]
    av = abs(v)
    wv = w
    for i in range(ORDER + 1):
        wv *= av
        kept[K_ABS + i] += wv
    term, q = _fit_term(dp, dn, x, v, kept[K_A], kept[K_B])
    M[0, 0] += term
    res = dp - w * q
    M[1, 0] += res
    M[1, 1] += res * v
    for k in range(2, ORDER + 1):
        # l^(k) = -(p + n) sigma^(k - 1)(q)
        poly = 0.0
        for c in range(k, -1, -1):
            poly = poly * q + _P[k - 1, c]
        lk = -w * poly
        vj = 1.0
        for i in range(k + 1):
            M[k, i] += lk * vj
            vj *= v


@jit_noalloc
def _set_anchor(h, h0, B, grid, a, b, snap, kept, M):
    """The anchor at ``(a, b)`` and the row's standardisation: the sums and moments from one pass
    over the row, which ``snap`` copies. False where the row holds no weight or one covariate."""
    n_s = 0.0
    sx = 0.0
    sxx = 0.0
    for j in range(B):
        p = h[h0 + j]
        n = h[h0 + B + j]
        snap[j] = p
        snap[B + j] = n
        w = p + n
        if w > 0.0:
            x = grid[3 * j]
            n_s += w
            sx += w * x
            sxx += w * x * x
    kept[K_VALID] = 0.0
    if not n_s > 0.0:
        return False
    mean = sx / n_s
    var = sxx / n_s - mean * mean
    if not var > 0.0:
        return False
    for k in range(ORDER + 1):
        for i in range(ORDER + 1):
            M[k, i] = 0.0
    kept[K_MEAN] = mean
    kept[K_SCALE] = 1.0 / math.sqrt(var)
    kept[K_A] = a
    kept[K_B] = b
    for i in (K_N, K_SX, K_SXX, K_LOGS, K_CALLS):
        kept[i] = 0.0
    for i in range(ORDER + 1):
        kept[K_ABS + i] = 0.0
    for j in range(B):
        p = snap[j]
        n = snap[B + j]
        if p + n > 0.0:
            _add_bucket(j, p, n, grid, kept, M)
    kept[K_BUCKETS] = B
    kept[K_VALID] = 1.0
    return True


@jit_noalloc(forceinline=True)
def _follow_bucket(h, h0, B, j, grid, snap, kept, M):
    # bucket j's change since the snapshot added to the kept moments, and the snapshot moved on
    p = h[h0 + j]
    n = h[h0 + B + j]
    if p != snap[j] or n != snap[B + j]:
        _add_bucket(j, p - snap[j], n - snap[B + j], grid, kept, M)
        snap[j] = p
        snap[B + j] = n


@jit_noalloc
def _follow_row(h, h0, B, grid, snap, kept, M):
    """The row's changes since the last call added to the sums and moments; False (nothing
    added) where more than ``MANY_CHANGED`` buckets changed."""
    changed = 0
    for j in range(2 * B):
        if h[h0 + j] != snap[j]:
            changed += 1
            if changed > MANY_CHANGED:
                return False
    if changed == 0:
        return True
    for j in range(B):
        _follow_bucket(h, h0, B, j, grid, snap, kept, M)
    return True


@jit_noalloc
def _follow_listed(h, h0, B, grid, snap, kept, M, touched, n_touched):
    """:func:`_follow_row` for the buckets ``touched[:n_touched]`` (ascending, distinct: the only ones
    changed since the last call), the same changes counted and added in the same order."""
    changed = 0
    for i in range(n_touched):
        j = int(touched[i])
        changed += (h[h0 + j] != snap[j]) + (h[h0 + B + j] != snap[B + j])
    if changed > MANY_CHANGED:
        return False
    for i in range(n_touched):
        j = int(touched[i])
        _follow_bucket(h, h0, B, j, grid, snap, kept, M)
    return True


@jit_noalloc
def _raw_terms(M, da, db, pw):
    """The moments' polynomial ``F = sum_{k, j} M[k, j] da^i / i! db^j / j!`` (``i = k - j``) and its
    first and second derivatives in ``(da, db)``."""
    k1 = ORDER + 1
    pw[0] = 1.0
    pw[k1] = 1.0
    for i in range(1, k1):
        pw[i] = pw[i - 1] * da / i  # da^i / i!
        pw[k1 + i] = pw[k1 + i - 1] * db / i
    f = 0.0
    fa = 0.0
    fb = 0.0
    faa = 0.0
    fab = 0.0
    fbb = 0.0
    for k in range(k1):
        for j in range(k + 1):
            i = k - j
            mk = M[k, j]
            pb = pw[k1 + j]
            f += mk * pw[i] * pb
            if i >= 1:
                fa += mk * pw[i - 1] * pb
                if j >= 1:
                    fab += mk * pw[i - 1] * pw[k1 + j - 1]
            if j >= 1:
                fb += mk * pw[i] * pw[k1 + j - 1]
            if i >= 2:
                faa += mk * pw[i - 2] * pb
            if j >= 2:
                fbb += mk * pw[i] * pw[k1 + j - 2]
    return f, fa, fb, faa, fab, fbb


@jit_noalloc
def _fit_terms(M, pw, u, A0, B0, c1, c2, a, b):
    """The penalised log-likelihood at ``(a, b)`` (current standardisation), its gradient and its
    negated Hessian, from the moments about the anchor ``(A0, B0)`` (stored units, ``u`` per real
    unit): the anchored coefficients are ``A = a + c1 b``, ``B = c2 b``. Also the move from the
    anchor, ``(dA, dB)``."""
    da = a + c1 * b - A0
    db = c2 * b - B0
    f, fa, fb, faa, fab, fbb = _raw_terms(M, da, db, pw)
    f /= u
    fa /= u
    fb /= u
    faa /= u
    fab /= u
    fbb /= u
    ridge = RIDGE
    return (
        f - 0.5 * ridge * (a * a + b * b),
        fa - ridge * a,
        c1 * fa + c2 * fb - ridge * b,
        ridge - faa,
        -(c1 * faa + c2 * fab),
        ridge - (c1 * c1 * faa + 2.0 * c1 * c2 * fab + c2 * c2 * fbb),
        da,
        db,
    )


@jit_noalloc(forceinline=True)
def _newton(M, pw, kept, unit, start):
    """Newton's method on the kept moments from ``start`` (``prior_strength_taylor``'s steps):
    ``(kappa, True)`` with ``start`` set to the fitted ``(a, b)``; ``(0.0, False)`` where the
    remainder does not bound a trial point's move from the anchor."""
    return _newton_far(M, pw, kept, unit, start)[:2]


@jit_noalloc(forceinline=True)
def _bounded(kept, unit, dA, dB):
    """Whether the Taylor remainder's bound holds for the move ``(dA, dB)`` from the anchor: each
    bucket's linear predictor moves by ``|dA + dB v0| <= |dA| + |dB| |v0|``, so the left-out terms
    are at most ``REMAINDER_SCALE sum_j w_j (|dA| + |dB| |v0_j|)^(ORDER + 1)`` (real units), the
    binomial sum of the kept ``sum_j w_j |v0_j|^i`` (``K_ABS``); accepted at or below ``TAYLOR_TOL``."""
    n = ORDER + 1
    x = abs(dA)
    y = abs(dB)
    total = 0.0
    c = 1.0  # the binomial coefficient C(n, i)
    yi = 1.0
    for i in range(n + 1):
        xi = 1.0
        for _ in range(n - i):
            xi *= x
        total += c * xi * yi * (kept[K_N] if i == 0 else kept[K_ABS + i - 1])
        c = c * (n - i) / (i + 1)
        yi *= y
    return REMAINDER_SCALE * total / unit <= TAYLOR_TOL


@jit_noalloc
def _newton_far(M, pw, kept, unit, start):
    """:func:`_newton`, returning ``(kappa, done, a, b, a_trial, b_trial, f)``: where a trial point
    leaves the remainder's bound (``done`` False), the last accepted point ``(a, b)``, its penalised
    log-likelihood ``f`` and the trial point, which a new anchor there can test."""
    n_s = kept[K_N]
    mean = kept[K_SX] / n_s
    var = kept[K_SXX] / n_s - mean * mean
    if not (n_s > 0.0 and var > 0.0):
        return 0.0, False, start[0], start[1], start[0], start[1], -math.inf
    scale = 1.0 / math.sqrt(var)
    n_all = n_s / unit
    A0 = kept[K_A]
    B0 = kept[K_B]
    c1 = scale * (kept[K_MEAN] - mean)
    c2 = scale / kept[K_SCALE]
    a = start[0]
    b = start[1]
    f, ga, gb, haa, hab, hbb, dA, dB = _fit_terms(M, pw, unit, A0, B0, c1, c2, a, b)
    if not _bounded(kept, unit, dA, dB):
        return 0.0, False, a, b, a, b, f
    for _ in range(NEWTON_STEPS):
        det = haa * hbb - hab * hab
        if not det > 0.0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        t = 1.0
        improved = False
        f_new, ga_new, gb_new, haa_new, hab_new, hbb_new = f, ga, gb, haa, hab, hbb
        while t > 1e-8:
            f_new, ga_new, gb_new, haa_new, hab_new, hbb_new, dA, dB = _fit_terms(
                M, pw, unit, A0, B0, c1, c2, a + t * da, b + t * db
            )
            if not _bounded(kept, unit, dA, dB):
                return 0.0, False, a, b, a + t * da, b + t * db, f
            if f_new >= f:
                improved = True
                break
            t *= 0.5
        if not improved:
            break
        a += t * da
        b += t * db
        gain = f_new - f
        f = f_new
        ga, gb, haa, hab, hbb = ga_new, gb_new, haa_new, hab_new, hbb_new
        if gain <= 1e-10 * (1.0 + abs(f)):
            break
    start[0] = a
    start[1] = b
    log_kappa = kept[K_LOGS] / unit - f + math.log(n_all + 1.0)  # 0.5 k log(n + 1) with k = 2
    if log_kappa >= math.log(KAPPA_MAX):
        return KAPPA_MAX, True, a, b, a, b, f
    kappa = math.exp(log_kappa)
    return (kappa if kappa >= KAPPA_MIN else 0.0), True, a, b, a, b, f


@jit_noalloc
def prior_strength_kept(h, h0, B, unit, cen, grid, start, snap, kept, M, pw, listed, M6):
    """``prior_strength_taylor(h, h0, B, unit, cen, 0, 1, 0.5, grid, start, listed, M6)`` within
    rounding, from the moments kept about an anchor (see the module notes). Returns
    ``(kappa, how)``: ``how`` 0 from the kept moments, 1 from a new anchor, 2 where
    ``prior_strength_taylor`` ran (3 where it ran the exact kernel)."""
    return _strength_kept(h, h0, B, unit, cen, grid, start, snap, kept, M, pw, listed, M6, snap, h0 - h0 - 1)


@jit_noalloc
def _strength_kept(h, h0, B, unit, cen, grid, start, snap, kept, M, pw, listed, M6, touched, n_touched):
    """:func:`prior_strength_kept`; where ``n_touched`` >= 0 and the last call followed the row,
    only the buckets ``touched[:n_touched]`` changed since (no pass over the row)."""
    use_list = n_touched >= 0 and kept[K_LISTED] == 1.0
    kept[K_LISTED] = 0.0
    a = start[0]
    b = start[1]
    if start.shape[0] == 2 and unit > 0.0 and math.isfinite(a) and math.isfinite(b):
        kept[K_LISTED] = 1.0  # ``snap`` is the row after the follow or a new anchor below
        fresh = False
        if kept[K_VALID] == 1.0 and kept[K_BUCKETS] == B and kept[K_CALLS] < REBUILD_EVERY:
            if use_list:
                ok = _follow_listed(h, h0, B, grid, snap, kept, M, touched, n_touched)
            else:
                ok = _follow_row(h, h0, B, grid, snap, kept, M)
        else:
            ok = False
        if not ok:
            ok = _set_anchor(h, h0, B, grid, a, b, snap, kept, M)
            fresh = True
        if ok:
            kept[K_CALLS] += 1.0
            if not fresh:
                kappa, done = _newton(M, pw, kept, unit, start)
                if done:
                    return kappa, 0
                ok = _set_anchor(h, h0, B, grid, a, b, snap, kept, M)
                if ok:
                    kept[K_CALLS] += 1.0
        if ok:
            kappa, moved = _newton_anchored(h, h0, B, unit, grid, start, snap, kept, M, pw)
            if moved >= 0:
                return kappa, 1
            if moved == -2:  # back to the anchor at the start: the state the exact kernel's path leaves
                start[0] = a
                start[1] = b
                if _set_anchor(h, h0, B, grid, a, b, snap, kept, M):
                    kept[K_CALLS] += 1.0
    c0 = h0 - h0  # 0, 1 and 0.5 as variables: the callee compiled once, for non-literal types
    kappa, exact = prior_strength_taylor(h, h0, B, unit, cen, c0, c0 + 1, 0.5 * unit / unit, grid, start, listed, M6)
    return kappa, (3 if exact else 2)


REANCHOR_MAX = 3  # new anchors at Newton's trial points per call before the exact kernel runs


@jit_noalloc
def _newton_anchored(h, h0, B, unit, grid, start, snap, kept, M, pw):
    """Newton's method from a fresh anchor at ``start``; where a trial point leaves the remainder's
    bound, a new anchor there (one pass over the row: the trial point's log-likelihood exact, as
    the exact kernel's pass there finds it) that continues the steps where the trial point improves
    on the last accepted point, up to ``REANCHOR_MAX`` times. A move within a call is then bounded
    by the steps' lengths, not the remainder's radius (a label of large leverage moves ``(a, b)``
    beyond it now and then). Returns ``(kappa, anchors)``, ``start`` the fitted ``(a, b)``: the new
    anchors set; ``anchors`` -1 where it failed with the anchor at ``start``, -2 where it failed
    with the anchor moved (``start`` scratch)."""
    for r in range(REANCHOR_MAX + 1):
        kappa, done, a, b, a_try, b_try, f = _newton_far(M, pw, kept, unit, start)
        if done:
            return kappa, r
        failed = -1 if r == 0 else -2
        if r == REANCHOR_MAX or (a_try == a and b_try == b):
            return 0.0, failed
        if not _set_anchor(h, h0, B, grid, a_try, b_try, snap, kept, M):
            return 0.0, -2
        kept[K_CALLS] += 1.0
        # the line search's test at the trial point, from its own anchor (the standardisation unchanged)
        f_try = _fit_terms(M, pw, unit, kept[K_A], kept[K_B], 0.0, 1.0, a_try, b_try)[0]
        if not f_try >= f:
            return 0.0, -2
        start[0] = a_try
        start[1] = b_try
    return 0.0, -2


REFIT_DONE = 0
REFIT_EMPTY = 1  # the window holds no weight: the engine's refit (no map)
REFIT_SCALE = 2  # the fitted row's total beyond the fit's scaling range: the engine's refit


@jit_noalloc(forceinline=True)
def _refit_kept(
    sf, h0, B, u, step, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, hint_knots, basis,
    incremental, incr, coef, touched, n_touched, work,
):  # fmt: skip
    """The first steps of :func:`_refit_core`: with ``incremental`` and valid kept sums, the strength
    (:func:`_strength_kept`) and, where it is above 0, the refit from the kept sums (``incr_refit``,
    its result in ``work``). Returns ``(served, kappa, have_kappa, total, pos_total, t_pos, t_neg)``:
    ``served`` ``INCR_NONE`` where the full refit (:func:`_refit_full`) is to run, with the strength
    where ``have_kappa``. Allocates nothing."""
    ik, gw, gt, hv, lev, isnap = incr
    listed_sums = ik[IK_LISTED]  # whether the kept sums followed the row at the last refit
    ik[IK_LISTED] = 0.0
    if incremental and ik[IK_VALID] == 1.0 and sf[SF_T_POS] + sf[SF_T_NEG] > 0.0:
        kappa = _strength_kept(
            sf, h0, B, u, centres, grid, start, snap, kept, M, pw, listed, M6, touched, n_touched
        )[0]  # fmt: skip
        if kappa > 0.0:
            wanted = n_knots
            if wanted < 0:
                wanted = max(1, math.floor(np.cbrt((sf[SF_T_POS] + sf[SF_T_NEG]) / u) + 1e-9) - 4)
            wanted = min(wanted, B)
            ik[IK_LISTED] = listed_sums
            served, total, pos_total, t_pos, t_neg = incr_refit(
                sf, h0, B, u, kappa, centres, order, wanted, step, hint_knots, coef, basis, ik, gw, gt, hv, lev,
                isnap, touched, n_touched, work,
            )  # fmt: skip
            return served, kappa, True, total, pos_total, t_pos, t_neg
        return INCR_NONE, kappa, True, 0.0, 0.0, 0.0, 0.0
    return INCR_NONE, 0.0, False, 0.0, 0.0, 0.0, 0.0


@jit(forceinline=True)
def _refit_full(
    sf, h0, B, u, step, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, inner, use_inner, hint,
    hint_knots, basis_knots, basis, pos_w, neg_w, floor_kind, incremental, incr, coef, touched, n_touched, kappa,
    have_kappa,
):  # fmt: skip
    """The full refit of :func:`_refit_core` where :func:`_refit_kept` did not serve (the strength
    ``kappa`` where ``have_kappa``); its return values."""
    ik, gw, gt, hv, lev, isnap = incr
    one = u / u
    for j in range(B):
        pos_w[j] = sf[h0 + j] / u
        neg_w[j] = sf[h0 + B + j] / u
    t_pos = _pairwise_sum(sf, h0, B, u)
    t_neg = _pairwise_sum(sf, h0 + B, B, u)
    if not t_pos + t_neg > 0.0:
        return REFIT_EMPTY, 0.0, np.empty(0), np.empty(0), np.empty(0), 0.0, 0.0, t_pos, t_neg
    if not have_kappa:
        kappa = _strength_kept(
            sf, h0, B, u, centres, grid, start, snap, kept, M, pw, listed, M6, touched, n_touched
        )[0]  # fmt: skip
    identity = B > 0
    if kappa > 0.0:
        add_prior_pseudo_counts(pos_w, neg_w, kappa, centres, identity, 0.5 * one, floor_kind, B)
    else:
        start[0] = 0.0
        start[1] = 0.0
    pos_total = _pairwise_sum(pos_w, h0 - h0, B, one)
    total = pos_total + _pairwise_sum(neg_w, h0 - h0, B, one)
    if total > 0.0 and not 2.0**-500 < total < 2.0**500:
        return REFIT_SCALE, kappa, np.empty(0), np.empty(0), np.empty(0), total, pos_total, t_pos, t_neg
    wanted = n_knots
    if wanted < 0:
        weight = (sf[SF_T_POS] + sf[SF_T_NEG]) / u if kappa > 0.0 else total  # ``_knot_weight``
        wanted = max(1, math.floor(np.cbrt(weight) + 1e-9) - 4)  # ``default_n_knots``
    wanted = min(wanted, B)
    if incremental and hint.shape[0] != coef.shape[0]:  # the loop's hint left to this full refit
        hint = coef > 0.0
    knots, coef, beta, _ = ispline_refit_histogram(
        centres, pos_w, neg_w, order, wanted, inner, use_inner, hint, hint_knots, basis_knots, basis
    )
    if incremental and kappa > 0.0 and not incr_current(ik, knots, basis):
        incr_rebuild(sf, h0, B, u, kappa, centres, knots, order, wanted, use_inner, step, basis, ik, gw, gt, hv, lev,
                     isnap)  # fmt: skip
    return REFIT_DONE, kappa, knots, coef, beta, total, pos_total, t_pos, t_neg


@jit(forceinline=True)
def _refit_core(
    sf, B, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, inner, use_inner, hint,
    hint_knots, basis_knots, basis, pos_w, neg_w, floor_kind, incremental, incr, coef, touched, n_touched, work,
):  # fmt: skip
    """:func:`prior_refit`'s body (``touched[:n_touched]`` the buckets changed since the last refit where
    ``n_touched`` >= 0, else unknown); with ``incremental`` the refit from the augmented normal equations
    kept per event (``ispline_prior_incr``, its arrays ``incr``, its solve's scratch ``work``) where it
    serves (:func:`_refit_kept`), the current map's knots ``hint_knots`` and coefficients ``coef``;
    else the full refit (:func:`_refit_full`)."""
    h0 = SF_HEADER + (B - B)  # an int64, not the constant's literal: each callee compiled once
    u = stored_unit(sf, sf[SF_KIND])
    step = max(1, B // 64)
    served, kappa, have_kappa, total, pos_total, t_pos, t_neg = _refit_kept(
        sf, h0, B, u, step, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, hint_knots, basis,
        incremental, incr, coef, touched, n_touched, work,
    )  # fmt: skip
    if served != INCR_NONE:
        p = coef.shape[0]
        nk = hint_knots if served == INCR_SERVED else work[10][: hint_knots.shape[0]].copy()
        return REFIT_DONE, kappa, nk, work[8][:p].copy(), work[9][:p].copy(), total, pos_total, t_pos, t_neg
    return _refit_full(
        sf, h0, B, u, step, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, inner, use_inner,
        hint, hint_knots, basis_knots, basis, pos_w, neg_w, floor_kind, incremental, incr, coef, touched, n_touched,
        kappa, have_kappa,
    )  # fmt: skip


@jit
def prior_refit(
    sf, B, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, inner, use_inner, hint,
    hint_knots, basis_knots, basis, pos_w, neg_w, floor_kind, incremental, incr, coef, touched, n_touched,
):  # fmt: skip
    """The refit engine's refit of I-spline's exact default with the score prior, for probability
    inputs, in one call: the histogram's row in real units (``pos_w``, ``neg_w``), its class totals
    summed as numpy sums them, the prior's strength (:func:`prior_strength_kept`, ``start`` its
    warm start, set to (0, 0) where it is 0), its pseudo-counts (``glm_refit.add_prior_pseudo_counts``),
    the default knot count of the window's weight (``n_knots`` < 0) and
    ``ispline.ispline_refit_histogram`` with the previous fit's hint and the basis cache. The
    same operations as ``RefitCalibrator._refit`` with ``ISplineCalibrator``'s hooks, so the same
    map from the same strength. Returns ``(code, kappa, knots, coef, bspline_coef, total,
    pos_total, t_pos, t_neg)``: ``total`` and ``pos_total`` the fitted row's (pseudo-counts
    included), ``t_pos``, ``t_neg`` the data's; ``code`` ``REFIT_DONE`` or where the engine refits
    instead (``REFIT_*``)."""
    work = solve_scratch(coef.shape[0], order)  # the kept refit solves for the current map's coefficients alone
    return _refit_core(
        sf, B, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, inner, use_inner, hint,
        hint_knots, basis_knots, basis, pos_w, neg_w, floor_kind, incremental, incr, coef, touched, n_touched, work,
    )  # fmt: skip



def prior_buffer_size(B: int, order: int) -> int:
    """The size of :func:`prior_views`' buffer for ``B`` buckets and splines of order ``order``."""
    k1, k, P = ORDER + 1, order + 1, B + 2 * (order + 1)
    return 13 * B + K_SIZE + 2 * k1 * k1 + 2 * k1 + IK_SIZE + 4 * P + 2 * P * k + 5 * B


@jit
def prior_views(buf, B, order):
    """The arrays of the refit under the prior as views of one buffer (:func:`prior_buffer_size`):
    ``centres`` ``(B)``, ``grid`` ``(3 B)``, the strength's ``(snap, kept, M, pw, listed, M6)``, the
    kept sums' ``(ik, gw, gt, hv, lev, isnap)`` (``ispline_prior_incr``) and the row ``pos_w``,
    ``neg_w`` ``(B)`` each, in that order; the calibrator holds the buffer and these views, and
    :func:`prior_refit_packed` takes the buffer alone (one argument to unbox instead of 16)."""
    k1, k, P = ORDER + 1, order + 1, B + 2 * (order + 1)
    centres = buf[:B]
    grid = buf[B : 4 * B]
    snap = buf[4 * B : 6 * B]
    o = 6 * B
    kept = buf[o : o + K_SIZE]
    o += K_SIZE
    M = buf[o : o + k1 * k1].reshape((k1, k1))
    o += k1 * k1
    pw = buf[o : o + 2 * k1]
    o += 2 * k1
    listed = buf[o : o + 3 * B]
    o += 3 * B
    M6 = buf[o : o + k1 * k1].reshape((k1, k1))
    o += k1 * k1
    ik = buf[o : o + IK_SIZE + P]
    o += IK_SIZE + P
    gw = buf[o : o + P * k].reshape((P, k))
    o += P * k
    gt = buf[o : o + P * k].reshape((P, k))
    o += P * k
    hv = buf[o : o + 3 * P].reshape((3, P))
    o += 3 * P
    lev = buf[o : o + 5 * B].reshape((5, B))
    o += 5 * B
    isnap = buf[o : o + 2 * B]
    o += 2 * B
    pos_w = buf[o : o + B]
    neg_w = buf[o + B : o + 2 * B]
    return centres, grid, (snap, kept, M, pw, listed, M6), (ik, gw, gt, hv, lev, isnap), pos_w, neg_w


@jit_noalloc(forceinline=True)
def prior_views_unowned(buf, B, order):
    """:func:`prior_views` for a kernel compiled without reference counts (``jit_noalloc``), whose
    views hold no reference to ``buf``: the same layout, for callers that are themselves
    ``jit_noalloc`` (the river face's pair)."""
    k1, k, P = ORDER + 1, order + 1, B + 2 * (order + 1)
    centres = buf[:B]
    grid = buf[B : 4 * B]
    snap = buf[4 * B : 6 * B]
    o = 6 * B
    kept = buf[o : o + K_SIZE]
    o += K_SIZE
    M = buf[o : o + k1 * k1].reshape((k1, k1))
    o += k1 * k1
    pw = buf[o : o + 2 * k1]
    o += 2 * k1
    listed = buf[o : o + 3 * B]
    o += 3 * B
    M6 = buf[o : o + k1 * k1].reshape((k1, k1))
    o += k1 * k1
    ik = buf[o : o + IK_SIZE + P]
    o += IK_SIZE + P
    gw = buf[o : o + P * k].reshape((P, k))
    o += P * k
    gt = buf[o : o + P * k].reshape((P, k))
    o += P * k
    hv = buf[o : o + 3 * P].reshape((3, P))
    o += 3 * P
    lev = buf[o : o + 5 * B].reshape((5, B))
    o += 5 * B
    isnap = buf[o : o + 2 * B]
    o += 2 * B
    pos_w = buf[o : o + B]
    neg_w = buf[o + B : o + 2 * B]
    return centres, grid, (snap, kept, M, pw, listed, M6), (ik, gw, gt, hv, lev, isnap), pos_w, neg_w


@jit
def prior_refit_packed(
    sf, buf, B, start, order, n_knots, inner, use_inner, hint_knots, basis_knots, basis, floor_kind, incremental,
    coef, touched, n_touched,
):  # fmt: skip
    """:func:`prior_refit` with its centres, grid, scratch, kept sums and row read as views of ``buf``
    (:func:`prior_views`) and the hint the positive coefficients of ``coef``: the same operations on
    the same arrays, from 16 arguments. ``touched[:n_touched]`` lists the buckets the river face's
    labels changed since the last refit, in any order and with repeats (sorted here, as
    :func:`prior_run` sorts its list); ``n_touched`` < 0: unknown."""
    centres, grid, scratch, incr, pos_w, neg_w = prior_views(buf, B, order)
    snap, kept, M, pw, listed, M6 = scratch
    hint = coef > 0.0
    n_touched = _ascending(touched, n_touched)
    work = solve_scratch(coef.shape[0], order)  # the kept refit solves for the current map's coefficients alone
    return _refit_core(
        sf, B, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, inner, use_inner, hint,
        hint_knots, basis_knots, basis, pos_w, neg_w, floor_kind, incremental, incr, coef, touched, n_touched, work,
    )  # fmt: skip


RUN_DONE = 0  # every operation ran
RUN_ENGINE = 1  # the refit before operation ``stop`` is the engine's (``REFIT_*``): it has not run
RUN_REFUTED = 2  # the refit of operation ``stop - 1`` found the prior's strength 0: the loop without it follows


@jit
def prior_run(
    ops, bk, s, y, w, t, first, sf, si, centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots,
    inner, use_inner, knots, coef, beta, fit, basis_knots, basis, pos_w, neg_w, floor_kind, out_p, out_fw,
    out_logodds, incremental, incr,
):  # fmt: skip
    """Operations ``first..`` of ``ops`` (``OP_*`` bits; buckets ``bk``, scores, labels, weights, times)
    at I-spline's exact default while the score prior holds, in one call: before each prediction
    that follows labels :func:`prior_refit` (the engine's refit), the prediction
    ``bspline_combination_score`` within the served bounds, and each label learned into the window
    (``histogram_learn_one_inplace``). ``knots``, ``coef``, ``beta`` are the current map, ``fit``
    ``[dirty, fitted weight, data log-odds, low, high, kappa]`` (in/out). Writes each prediction's
    probability, its map's fitted weight and data log-odds (the caller forms the LLR as the engine
    does); returns ``(stop, code, knots, coef, beta, basis_knots)``: the operations before ``stop``
    ran (``RUN_*``)."""
    k1 = order + 1
    vals = np.empty(k1)
    lft = np.empty(k1)
    rgt = np.empty(k1)
    # the buckets each label touches (its own, any it evicts) since the last refit, for the kept
    # sums to follow without a pass over the row; unknown (-1) before the first refit and where
    # a decaying window may renormalise every bucket
    touched = np.empty(TOUCHED_MAX, dtype=np.int64)
    n_touched = first - first - 1
    kind = sf[SF_KIND]
    no_hint = np.zeros(0, dtype=np.bool_)
    work = solve_scratch(si[SI_B] + 2 * k1, order)  # the kept refit's solve, for every refit of the call
    listable = incremental and not ((kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME))
    i = first
    n = ops.shape[0]
    while i < n:
        op = ops[i]
        if op & 2:  # OP_PREDICT
            if fit[0] != 0.0:
                hint = coef > 0.0 if not incremental else no_hint  # the full refit forms its own
                n_touched = _ascending(touched, n_touched)
                code, kappa, nk, nc, nb, total, pos_total, t_pos, t_neg = _refit_core(
                    sf, si[SI_B], centres, grid, start, snap, kept, M, pw, listed, M6, order, n_knots, inner,
                    use_inner, hint, knots, basis_knots, basis, pos_w, neg_w, floor_kind, incremental, incr, coef,
                    touched, n_touched, work,
                )  # fmt: skip
                if code != REFIT_DONE:
                    return i, RUN_ENGINE, knots, coef, beta, basis_knots
                n_touched = 0 if listable else -1
                knots = nk
                coef = nc
                beta = nb
                basis_knots = nk
                c = fit[6]
                fit[0] = 0.0
                fit[1] = total
                fit[2] = math.log(t_pos + c) - math.log(t_neg + c)  # ``_prior.prior_logodds``
                fit[3] = c / (total + 2.0 * c)  # ``_prior.proba_bounds``
                fit[4] = (total + c) / (total + 2.0 * c)
                fit[5] = kappa
                fit[7] = pos_total
                if not kappa > 0.0:
                    p = _served(s[i], knots, k1, beta, fit, vals, lft, rgt)
                    out_p[i] = p
                    out_fw[i] = fit[1]
                    out_logodds[i] = fit[2]
                    if op & 1:
                        histogram_learn_one_inplace(sf, si, bk[i], y[i], w[i], t[i])
                        fit[0] = 1.0
                    return i + 1, RUN_REFUTED, knots, coef, beta, basis_knots
            out_p[i] = _served(s[i], knots, k1, beta, fit, vals, lft, rgt)
            out_fw[i] = fit[1]
            out_logodds[i] = fit[2]
        if op & 1:  # OP_LEARN
            if listable:  # ``histogram_learn_one_inplace``, the buckets it touches listed
                clock = window_clock(sf, t[i], kind)
                while True:
                    gone = window_expire_next_inplace(sf, si, clock, kind)
                    if gone < 0:
                        break
                    n_touched = _listed(touched, n_touched, gone)
                window_add_inplace(sf, si, bk[i], y[i], w[i], clock, kind)
                n_touched = _listed(touched, n_touched, bk[i])
            else:
                histogram_learn_one_inplace(sf, si, bk[i], y[i], w[i], t[i])
            fit[0] = 1.0
        i += 1
    return i, RUN_DONE, knots, coef, beta, basis_knots


TOUCHED_MAX = 64


@jit_noalloc(forceinline=True)
def _listed(touched, n_touched, b):
    """``b`` appended to the list of touched buckets; the count, -1 (unknown) where it is unknown or full."""
    if n_touched < 0 or n_touched >= TOUCHED_MAX:
        return n_touched - n_touched - 1
    touched[n_touched] = b
    return n_touched + 1


@jit_noalloc(forceinline=True)
def _ascending(touched, n_touched):
    """``touched[:n_touched]`` sorted ascending without repeats (in place); the new count. The
    followers then add the changes in the order of a pass over the row: the same bits."""
    for i in range(1, n_touched):
        v = touched[i]
        k = i - 1
        while k >= 0 and touched[k] > v:
            touched[k + 1] = touched[k]
            k -= 1
        touched[k + 1] = v
    m = 0
    for i in range(n_touched):
        if m == 0 or touched[i] != touched[m - 1]:
            touched[m] = touched[i]
            m += 1
    return m if n_touched >= 0 else n_touched


@jit_noalloc(forceinline=True)
def _served(x, knots, k1, beta, fit, vals, lft, rgt):
    """The map at ``x`` as ``evaluate_map`` computes it, within the served bounds."""
    lo, hi = clamped_span_bounds(knots, k1)
    v = _combination_at(x, knots, k1, beta, lo, hi, vals, lft, rgt)
    v = min(max(v, 0.0), 1.0)
    return min(max(v, fit[3]), fit[4])
