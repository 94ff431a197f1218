"""I-spline's exact default under the score prior: the augmented normal equations kept per event (numba).

While the score prior holds, each refit fits the row plus the prior's pseudo-counts of strength
``kappa`` (the thinned floor, probability inputs): bucket ``j`` with data weights ``(p_j, n_j)``
(``w_j = p_j + n_j``), prior rate ``r_j`` and floor weight ``t_j`` (``step`` on the thinned grid,
else 0) is fitted with weight ``w'_j = (1 + kappa) w_j + kappa t_j`` and positive weight
``p'_j = p_j + kappa (w_j + t_j) r_j``. With ``a_j`` the bucket's B-splines at its centre, the
banded normal equations of the fit are

    B' W B = (1 + kappa) G_w + kappa G_t,     B' W y = h_p + kappa (h_wr + h_tr),

``G_w = sum_j w_j a_j a_j'``, ``h_p = sum_j p_j a_j``, ``h_wr = sum_j w_j r_j a_j`` (the data's,
stored units) and ``G_t``, ``h_tr`` (the floor's, constants of the knots). One event changes one
bucket (a window's eviction another): the data's sums take that bucket's rank-one change, found
against a copy of the row (``snap``), as ``ispline_prior_stream.prior_strength_kept`` finds its
own. The knots are the fitted weights' quantiles: each level's bucket is kept with the data's and
the floor's weight below it and up to it, so a refit checks that every level still falls in its
bucket, clear of both edges by ``LEVEL_MARGIN`` of the total (else the exact pass decides). The
basis is then the last fit's; the system is formed for the new ``kappa`` in ``O(p order)``, its
I-spline Gram in ``O(p^2)`` (``p`` coefficients, about 16 at the default knot count), and solved
on the previous fit's free set (``ispline.free_set_runs_solve``), kept only where that solve certifies
the optimum (feasible, every multiplier's sign). Anything else (the knot count, the score range's
ends, a level near its bucket's edge, a solve not certified, another refit's knots in between)
leaves the caller's full refit to run, which rebuilds the sums (``incr_rebuild``); they are
rebuilt from the histogram every ``REBUILD_EVERY`` refits as well, so rounding does not drift.

The result is the full refit's within rounding (the sums are the same terms grouped otherwise):
the map within about 1e-13 on the calibrators' streams, against the contract's 1e-9. The kept sums
are a cache: a copy or a restored state, whose cache starts empty, runs the full refit first and
continues within rounding of the original.

Arrays (no validation; the calibrator's cache ``_prior_grid`` holds them), ``B`` buckets, ``P =
B + 2 (order + 1)``:

- ``ik`` float64 ``(IK_SIZE + P)``: scalars (``IK_*``), then the knots the sums are for;
- ``gw``, ``gt`` float64 ``(P, order + 1)``: the bands of ``G_w`` (stored units) and ``G_t``;
- ``hv`` float64 ``(3, P)``: ``h_p``, ``h_wr`` (stored units), ``h_tr``;
- ``lev`` float64 ``(5, B)``: per level its bucket, the data's weight below it and up to it (stored
  units), the floor's below it and up to it;
- ``snap`` float64 ``(2 B)``: the row the sums are for.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit, jit_noalloc
from streamcal._kernels.ispline import (
    bspline_nonzero_inplace,
    clamped_span,
    clamped_span_bounds,
    free_set_runs_solve,
)
from streamcal._kernels.prior import prior_rate

IK_VALID = 0
IK_P = 1  # basis functions
IK_K = 2  # quantile levels checked (0: the interior knots are given, or none)
IK_WANTED = 3  # the knot count asked for
IK_NFIT = 4  # buckets with fitted weight
IK_LOWER = 5  # the first and last of them
IK_UPPER = 6
IK_REFITS = 7  # refits since the sums were built
IK_STAMP = 8  # the basis cache's stamp of the knots
IK_W = 9  # the data's weight, positive weight, weight times rate (stored units)
IK_PW = 10
IK_WR = 11
IK_T = 12  # the floor's weight and weight times rate
IK_TR = 13
IK_NKNOTS = 14
IK_INNER = 15  # 1: the interior knots are given
IK_SERVED = 16  # counts (never reset): refits served from the sums, the sums built
IK_BUILT = 17
IK_LISTED = 18  # 1: the sums followed the row at the last refit (a list of the buckets touched since then serves)
IK_SIZE = 20

REBUILD_EVERY = 1024
LEVEL_MARGIN = 1e-11  # a level this close (relative to the total) to its bucket's edge: the exact pass decides


@jit_noalloc(forceinline=True)
def _basis_row(j, centres, knots, k1, lo, hi, basis, vals, lft, rgt):
    """Bucket ``j``'s B-splines at its centre in the basis cache's row ``j + 1`` (computed as
    ``ispline._gram_cached`` computes them where its stamp is stale); returns the first's index."""
    row = j + 1
    if basis[row, 0] != basis[0, 0]:
        nk = knots.shape[0]
        xn = min(max(centres[j], knots[0]), knots[nk - 1])
        mu = clamped_span(knots, xn, lo, hi)
        bspline_nonzero_inplace(knots, xn, mu, k1, vals, lft, rgt)
        basis[row, 0] = basis[0, 0]
        basis[row, 1] = mu - k1 + 1
        for r in range(k1):
            basis[row, 2 + r] = vals[r]
    return int(basis[row, 1])


@jit_noalloc(forceinline=True)
def _add_terms(j, base, basis, k1, w, pw, wr, gw, hv):
    """Bucket ``j``'s change of weight ``w`` (positive ``pw``, times its rate ``wr``) added to the
    data's band and right-hand sides."""
    row = j + 1
    for r in range(k1):
        ar = basis[row, 2 + r]
        hv[0, base + r] += pw * ar
        hv[1, base + r] += wr * ar
        war = w * ar
        for s in range(r, k1):
            gw[base + r, s - r] += war * basis[row, 2 + s]


@jit_noalloc(forceinline=True)
def _fitted_count_ok(nfit, ik, order):
    """Whether ``nfit`` buckets with fitted weight give the levels kept (``ispline_refit_histogram``'s
    ``k = min(wanted, n - order - 1)``, no levels below 3 buckets)."""
    if ik[IK_INNER] == 1.0:
        return True  # given interior knots: the count does not enter
    k = min(ik[IK_WANTED], max(0.0, nfit - order - 1.0)) if nfit >= 3.0 else 0.0
    return k == ik[IK_K]


@jit
def solve_scratch(P, order):
    """Scratch of :func:`incr_refit` for up to ``P`` coefficients: a run index per coefficient, the
    runs' reduced band and right-hand side, their values, the gradient (the scratch of
    ``ispline.free_set_runs_solve``), the system's band and right-hand side, the free set, the
    solution's coefficients and B-spline coefficients, a moved knot vector (``P + order + 1``)."""
    k1 = order + 1
    return (
        np.empty(P, dtype=np.intp), np.empty((P, k1)), np.empty(P), np.empty(P), np.empty(P), np.empty((P, k1)),
        np.empty(P), np.empty(P, dtype=np.bool_), np.empty(P), np.empty(P), np.empty(P + k1),
    )  # fmt: skip


@jit_noalloc
def _gram_scale(band, cross, p, k1):
    """The solvers' scale ``max_i max(gram[i, i], |rhs[i]|)`` (0 read as 1) of the I-spline normal
    equations ``_gram_from_band`` forms from the band ``band[j, d] = (B' W B)[j, j + d]`` and
    ``cross``, within rounding, in ``O(p order)``: ``gram[i, i]`` sums ``B' W B`` over rows and
    columns from ``i`` on, so it is ``gram[i + 1, i + 1]`` plus row ``i`` of the band, its
    off-diagonal terms twice (the matrix is symmetric); ``rhs[i]`` is ``cross``'s sum from ``i`` on."""
    scale = 0.0
    diag = 0.0
    rhs = 0.0
    for i in range(p - 1, -1, -1):
        off = 0.0
        for d in range(1, min(k1, p - i)):
            off += band[i, d]
        diag += band[i, 0] + 2.0 * off
        rhs += cross[i]
        if diag > scale:
            scale = diag
        if abs(rhs) > scale:
            scale = abs(rhs)
    return scale if scale != 0.0 else 1.0


@jit_noalloc
def incr_current(ik, knots, basis):
    """Whether the kept sums are valid for ``knots`` (the basis cache's current stamp)."""
    nk = knots.shape[0]
    if not (ik[IK_VALID] == 1.0 and ik[IK_STAMP] == basis[0, 0] and ik[IK_NKNOTS] == nk):
        return False
    for i in range(nk):
        if knots[i] != ik[IK_SIZE + i]:
            return False
    return ik[IK_REFITS] < REBUILD_EVERY


@jit
def incr_rebuild(sf, h0, B, u, kappa, centres, knots, order, wanted, use_inner, step, basis, ik, gw, gt, hv, lev, snap):
    """The kept sums from the row in ``sf`` (offset ``h0``, stored units, unit ``u``) for the fit just
    made with strength ``kappa > 0`` on ``knots`` (the basis cache's current stamp), ``wanted`` interior
    knots asked for (``use_inner``: given). Leaves them invalid where a level lies within
    ``LEVEL_MARGIN`` of its bucket's edge."""
    k1 = order + 1
    nk = knots.shape[0]
    p = nk - k1
    ik[IK_VALID] = 0.0
    lo, hi = clamped_span_bounds(knots, k1)
    vals = np.empty(k1)
    lft = np.empty(k1)
    rgt = np.empty(k1)
    for i in range(p):
        hv[0, i] = 0.0
        hv[1, i] = 0.0
        hv[2, i] = 0.0
        for d in range(k1):
            gw[i, d] = 0.0
            gt[i, d] = 0.0
    half = step // 2
    sw = 0.0
    spw = 0.0
    swr = 0.0
    st = 0.0
    strr = 0.0
    nfit = 0
    first = -1
    last = -1
    phase = 0
    for j in range(B):
        on_grid = phase == half
        phase += 1
        if phase == step:
            phase = 0
        pj = sf[h0 + j]
        nj = sf[h0 + B + j]
        snap[j] = pj
        snap[B + j] = nj
        w = pj + nj
        if not (w > 0.0 or on_grid):
            continue
        nfit += 1
        if first < 0:
            first = j
        last = j
        base = _basis_row(j, centres, knots, k1, lo, hi, basis, vals, lft, rgt)
        r = prior_rate(centres[j], 0.5, B > 0)  # B > 0: True, not a literal (one signature)
        if w > 0.0:
            _add_terms(j, base, basis, k1, w, pj, w * r, gw, hv)
            sw += w
            spw += pj
            swr += w * r
        if on_grid:
            tj = float(step)
            row = j + 1
            for a in range(k1):
                ar = basis[row, 2 + a]
                hv[2, base + a] += tj * r * ar
                for b in range(a, k1):
                    gt[base + a, b - a] += tj * ar * basis[row, 2 + b]
            st += tj
            strr += tj * r
    ik[IK_BUILT] += 1.0
    ik[IK_LISTED] = 1.0
    ik[IK_P] = p
    ik[IK_WANTED] = wanted
    ik[IK_NFIT] = nfit
    ik[IK_LOWER] = first
    ik[IK_UPPER] = last
    ik[IK_REFITS] = 0.0
    ik[IK_STAMP] = basis[0, 0]
    ik[IK_W] = sw
    ik[IK_PW] = spw
    ik[IK_WR] = swr
    ik[IK_T] = st
    ik[IK_TR] = strr
    ik[IK_NKNOTS] = nk
    ik[IK_INNER] = 1.0 if use_inner else 0.0
    for i in range(nk):
        ik[IK_SIZE + i] = knots[i]
    # the levels: ``ispline_refit_histogram``'s count and the bucket each falls in
    k = 0
    if not use_inner and nfit >= 3:
        k = min(wanted, max(0, nfit - order - 1))
    ik[IK_K] = k
    if k > 0:
        a1 = (1.0 + kappa) / u
        total = a1 * sw + kappa * st
        q = 0
        cw = 0.0
        ct = 0.0
        phase = 0
        for j in range(B):
            on_grid = phase == half
            phase += 1
            if phase == step:
                phase = 0
            w = snap[j] + snap[B + j]
            if not (w > 0.0 or on_grid):
                continue
            tj = float(step) if on_grid else 0.0
            below = a1 * cw + kappa * ct
            upto = a1 * (cw + max(w, 0.0)) + kappa * (ct + tj)
            while q < k:
                level = total * float(q + 1) / float(k + 1)
                if not upto >= level:
                    break
                lev[0, q] = j
                lev[1, q] = cw
                lev[2, q] = cw + max(w, 0.0)
                lev[3, q] = ct
                lev[4, q] = ct + tj
                if not (below < level - LEVEL_MARGIN * total and upto >= level + LEVEL_MARGIN * total):
                    return
                q += 1
            if w > 0.0:
                cw += w
            ct += tj
        if q < k:
            return
    ik[IK_VALID] = 1.0


# the floor's weight per grid bucket (``kappa step``) at least this share of the fitted total: below it
# the buckets that hold the floor alone barely determine their coefficients, and the kept sums'
# rounding (relative to the total) would move the fit by more than the full refit's own
FLOOR_SHARE = 1e-6
MAX_WALK = 4  # buckets a level may move per refit before the exact pass decides


@jit_noalloc(forceinline=True)
def _fitted(j, snap, B, step, half):
    """Bucket ``j``'s data weight (stored units, 0 where none) and floor weight, and whether it is fitted."""
    w = snap[j] + snap[B + j]
    t = float(step) if j % step == half else 0.0
    return max(w, 0.0), t, w > 0.0 or t > 0.0


@jit_noalloc
def _walk_level(q, level, margin, a1, kappa, lev, snap, B, step, half):
    """Level ``q`` moved to the fitted bucket it now falls in (up to ``MAX_WALK`` buckets away), its
    sums with it: 0 where it stays, 1 where it moved, -1 where it falls within ``margin`` of a
    bucket's edge or further away (the exact pass decides)."""
    moved = 0
    for _ in range(MAX_WALK + 1):
        below = a1 * lev[1, q] + kappa * lev[3, q]
        upto = a1 * lev[2, q] + kappa * lev[4, q]
        if below < level - margin and upto >= level + margin:
            return moved
        if abs(level - below) <= margin or abs(level - upto) <= margin:
            return -1
        at = int(lev[0, q])
        if level > upto:  # the next fitted bucket
            j = at + 1
            while j < B and not _fitted(j, snap, B, step, half)[2]:
                j += 1
            if j >= B:
                return -1
            w, t, _ = _fitted(j, snap, B, step, half)
            lev[1, q] = lev[2, q]
            lev[3, q] = lev[4, q]
            lev[2, q] += w
            lev[4, q] += t
        else:  # the previous one
            j = at - 1
            while j >= 0 and not _fitted(j, snap, B, step, half)[2]:
                j -= 1
            if j < 0:
                return -1
            w, t, _ = _fitted(j, snap, B, step, half)
            lev[2, q] = lev[1, q]
            lev[4, q] = lev[3, q]
            lev[1, q] -= w
            lev[3, q] -= t
        lev[0, q] = j
        moved = 1
    return -1


@jit_noalloc
def _moved_knots(knots, k, k1, lev, centres, lower, upper, t):
    """``ispline_refit_histogram``'s knot vector from the levels' buckets (the score range's ends
    ``lower``, ``upper``) into ``t[:knots.shape[0]]``; False where its interior count differs from
    ``knots``'."""
    nk = knots.shape[0]
    m_old = nk - 2 * k1
    m = 0
    for q in range(k):
        c = centres[int(lev[0, q])]
        if c > lower and c < upper and (m == 0 or c > t[k1 + m - 1]):
            if m == m_old:
                return False
            t[k1 + m] = c
            m += 1
    if m != m_old:
        return False
    for q in range(k1):
        t[q] = lower
        t[m + k1 + q] = upper
    return True


@jit_noalloc(forceinline=True)
def _row_terms(sign, base, vals, k1, w, pw, wr, t, tr, gw, gt, hv):
    """A fitted bucket's terms for its B-splines ``vals`` (the first ``base``) added (``sign`` 1) or
    taken out (-1): data weight ``w``, positive ``pw``, times the rate ``wr``; floor ``t``, times the
    rate ``tr``."""
    for a in range(k1):
        ar = vals[a]
        hv[0, base + a] += sign * pw * ar
        hv[1, base + a] += sign * wr * ar
        war = sign * w * ar
        for b in range(a, k1):
            gw[base + a, b - a] += war * vals[b]
    if t > 0.0:
        for a in range(k1):
            ar = vals[a]
            hv[2, base + a] += sign * tr * ar
            for b in range(a, k1):
                gt[base + a, b - a] += sign * t * ar * vals[b]


@jit_noalloc(forceinline=True)
def _row_change(base, vals, before, k1, w, pw, wr, t, tr, gw, gt, hv):
    """A fitted bucket's terms moved from its B-splines ``before`` to ``vals`` (both first at ``base``):
    each term's change added once (data weight ``w``, positive ``pw``, times the rate ``wr``; floor
    ``t``, times the rate ``tr``)."""
    for a in range(k1):
        da = vals[a] - before[a]
        hv[0, base + a] += pw * da
        hv[1, base + a] += wr * da
        for b in range(a, k1):
            gw[base + a, b - a] += w * (vals[a] * vals[b] - before[a] * before[b])
    if t > 0.0:
        for a in range(k1):
            hv[2, base + a] += tr * (vals[a] - before[a])
            for b in range(a, k1):
                gt[base + a, b - a] += t * (vals[a] * vals[b] - before[a] * before[b])


@jit_noalloc
def _rebase(old, new, k1, B, step, centres, basis, ik, gw, gt, hv, snap, vals, lft, rgt, before):
    """The kept sums moved from the knots ``old`` to ``new`` (the same count), in one pass over the
    buckets whose B-splines change: a bucket in knot span ``mu`` reads knots ``mu - k1 + 2`` to
    ``mu + k1 - 1`` (``bspline_nonzero_inplace``), so a changed knot ``i`` moves the rows of the
    spans ``i - k1 + 1`` to ``i + k1 - 2``, the buckets between knots ``i - k1 + 1`` and ``i + k1 - 1``.
    Each fitted one there has its row computed anew (its span found by a walk from the last
    bucket's: the buckets' centres ascend) and its terms moved from the old row to the new (the
    change of each term where the row's first B-spline stays, else the old terms out and the new
    in), the cache's stamp kept (every other row has the same values for both knot vectors); an
    unfitted one's row there is marked stale. Scratch: ``vals``, ``lft``, ``rgt``, ``before`` of ``k1``."""
    nk = new.shape[0]
    xlo = math.inf
    xhi = -math.inf
    for i in range(nk):
        if old[i] != new[i]:
            a = max(i - k1 + 1, 0)
            b = min(i + k1 - 1, nk - 1)
            xlo = min(xlo, old[a], new[a])
            xhi = max(xhi, old[b], new[b])
    jlo = np.searchsorted(centres, xlo)
    jhi = np.searchsorted(centres, xhi, side="right")
    half = step // 2
    lo_old, hi_old = clamped_span_bounds(old, k1)
    lo, hi = clamped_span_bounds(new, k1)
    mu = lo - 1  # no span yet: the first fitted bucket's by binary search, the next ones' by a walk
    phase = jlo % step  # ``j % step``, counted
    for j in range(jlo, jhi):
        row = j + 1
        on_grid = phase == half
        phase += 1
        if phase == step:
            phase = 0
        wj = snap[j] + snap[B + j]
        if not (wj > 0.0 or on_grid):  # ``_fitted``
            basis[row, 0] = -1.0  # stale (stamps are never negative): computed when read
            continue
        t = float(step) if on_grid else 0.0
        base_old = _basis_row(j, centres, old, k1, lo_old, hi_old, basis, vals, lft, rgt)
        for a in range(k1):
            before[a] = basis[row, 2 + a]
        # the new row, as ``_basis_row`` computes it
        xn = min(max(centres[j], new[0]), new[nk - 1])
        if mu < lo:
            mu = clamped_span(new, xn, lo, hi)
        while mu < hi and new[mu + 1] <= xn:
            mu += 1
        bspline_nonzero_inplace(new, xn, mu, k1, vals, lft, rgt)
        base = mu - k1 + 1
        basis[row, 1] = base
        same = base == base_old
        for a in range(k1):
            basis[row, 2 + a] = vals[a]
            same &= vals[a] == before[a]
        if same:
            continue
        r = prior_rate(centres[j], 0.5, B > 0)  # B > 0: True, not a literal (one signature)
        pj = snap[j]
        if base == base_old:
            _row_change(base, vals, before, k1, wj, pj, wj * r, t, t * r, gw, gt, hv)
        else:
            _row_terms(-1.0, base_old, before, k1, wj, pj, wj * r, t, t * r, gw, gt, hv)
            _row_terms(1.0, base, vals, k1, wj, pj, wj * r, t, t * r, gw, gt, hv)
    for i in range(nk):
        ik[IK_SIZE + i] = new[i]


@jit_noalloc(forceinline=True)
def _follow_bucket(j, pj, nj, sf, B, step, half, centres, knots, k1, k, lo, hi, basis, ik, gw, hv, lev, snap, vals,
                   lft, rgt):  # fmt: skip
    """Bucket ``j``'s change to ``(pj, nj)`` added to the data's sums and the levels' weights; returns
    the change in the count of fitted buckets, 2 (nothing done) where the score range's ends move."""
    on_grid = j % step == half
    w0 = snap[j] + snap[B + j]
    w1 = pj + nj
    had = w0 > 0.0 or on_grid
    has = w1 > 0.0 or on_grid
    change = 0
    if had != has:
        if j < ik[IK_LOWER] or j > ik[IK_UPPER]:
            return 2
        change = 1 if has else -1
    dp = pj - snap[j]
    dw = w1 - w0
    r = prior_rate(centres[j], 0.5, B > 0)  # B > 0: True, not a literal (one signature)
    base = _basis_row(j, centres, knots, k1, lo, hi, basis, vals, lft, rgt)
    _add_terms(j, base, basis, k1, dw, dp, dw * r, gw, hv)
    ik[IK_W] += dw
    ik[IK_PW] += dp
    ik[IK_WR] += dw * r
    for q in range(k):
        at = lev[0, q]
        if j < at:
            lev[1, q] += dw
            lev[2, q] += dw
        elif j == at:
            lev[2, q] += dw
    snap[j] = pj
    snap[B + j] = nj
    return change


INCR_NONE = 0  # the kept sums do not serve: the full refit runs
INCR_SERVED = 1  # served on the current knots
INCR_MOVED = 2  # served on moved knots


@jit_noalloc
def incr_refit(
    sf, h0, B, u, kappa, centres, order, wanted, step, knots, coef, basis, ik, gw, gt, hv, lev, snap, touched,
    n_touched, work,
):  # fmt: skip
    """The refit of strength ``kappa > 0`` from the kept sums: ``(code, total, pos_total, t_pos,
    t_neg)``, ``code`` ``INCR_SERVED`` or ``INCR_MOVED`` where it is the full refit's within
    rounding, its coefficients and B-spline coefficients in ``work[8][:p]`` and ``work[9][:p]``
    (:func:`solve_scratch`), else ``INCR_NONE`` and the full refit runs (the sums invalid where they
    no longer follow the row). ``knots``, ``coef`` are the current map, ``wanted`` the knot count
    asked for. A level that moved to a nearby bucket moves its knot (``_moved_knots``, the new
    vector in ``work[10][:knots.shape[0]]``, ``INCR_MOVED``) and the sums with it (``_rebase``).
    Allocates nothing: the per-event refit keeps no reference counts."""
    p = int(ik[IK_P])
    if not (incr_current(ik, knots, basis) and ik[IK_WANTED] == wanted and coef.shape[0] == p and kappa > 0.0):
        ik[IK_LISTED] = 0.0
        return INCR_NONE, 0.0, 0.0, 0.0, 0.0
    k1 = order + 1
    k = int(ik[IK_K])
    lo, hi = clamped_span_bounds(knots, k1)
    # the B-spline scratch: rows of the solve's bands, which the solve fills later
    vals, lft, rgt = work[1][0], work[1][1], work[5][0]
    half = step // 2
    nfit = ik[IK_NFIT]
    # the row's changes since the sums were last brought up to date: the buckets ``touched`` lists
    # where it lists them (``n_touched`` >= 0) and the sums followed the row at the last refit
    listed = n_touched >= 0 and ik[IK_LISTED] == 1.0
    ik[IK_LISTED] = 0.0
    n_scan = n_touched if listed else B
    for i in range(n_scan):
        j = touched[i] if listed else i
        pj = sf[h0 + j]
        nj = sf[h0 + B + j]
        if pj == snap[j] and nj == snap[B + j]:
            continue
        step_fit = _follow_bucket(j, pj, nj, sf, B, step, half, centres, knots, k1, k, lo, hi, basis, ik, gw, hv,
                                  lev, snap, vals, lft, rgt)  # fmt: skip
        if step_fit == 2:  # the score range's ends move
            ik[IK_VALID] = 0.0
            return INCR_NONE, 0.0, 0.0, 0.0, 0.0
        nfit += step_fit
    ik[IK_LISTED] = 1.0
    ik[IK_NFIT] = nfit
    if not _fitted_count_ok(nfit, ik, order):
        ik[IK_VALID] = 0.0
        return INCR_NONE, 0.0, 0.0, 0.0, 0.0
    a1 = (1.0 + kappa) / u
    total = a1 * ik[IK_W] + kappa * ik[IK_T]
    if not (2.0**-500 < total < 2.0**500 and kappa * step >= FLOOR_SHARE * total):
        return INCR_NONE, 0.0, 0.0, 0.0, 0.0
    moved = False
    for q in range(k):  # each level in its bucket, or moved to the one it falls in now
        level = total * float(q + 1) / float(k + 1)
        how = _walk_level(q, level, LEVEL_MARGIN * total, a1, kappa, lev, snap, B, step, half)
        if how < 0:
            return INCR_NONE, 0.0, 0.0, 0.0, 0.0
        moved |= how > 0
    if moved:
        new = work[10][: knots.shape[0]]
        if not _moved_knots(knots, k, k1, lev, centres, centres[int(ik[IK_LOWER])], centres[int(ik[IK_UPPER])], new):
            return INCR_NONE, 0.0, 0.0, 0.0, 0.0
        _rebase(knots, new, k1, B, step, centres, basis, ik, gw, gt, hv, snap, vals, lft, rgt, work[3])
    # the banded system for this kappa and the solve on the last free set (``work``: see
    # :func:`solve_scratch`; the I-spline Gram enters the solvers through their scale alone)
    ku = kappa / u
    compact, cross, free = work[5], work[6], work[7]
    for i in range(p):
        cross[i] = hv[0, i] / u + (ku * hv[1, i] + kappa * hv[2, i])
        for d in range(k1):
            compact[i, d] = a1 * gw[i, d] + kappa * gt[i, d] if i + d < p else 0.0
    scale = _gram_scale(compact, cross, p, k1)
    for i in range(p):
        free[i] = coef[i] > 0.0
    x = work[8]
    capped = 0.0  # the last fit's sum: at the cap, the capped solve first
    for i in range(p):
        capped += coef[i]
    one = kappa / kappa
    at_cap = capped > 1.0 - 1e-9
    run, red, rc, v, g = work[0], work[1], work[2], work[3], work[4]
    ok = free_set_runs_solve(compact, cross, p, order, free, one, at_cap, scale, x, run, red, rc, v, g)
    if not ok:
        ok = free_set_runs_solve(compact, cross, p, order, free, one, not at_cap, scale, x, run, red, rc, v, g)
    if not ok:
        return INCR_NONE, 0.0, 0.0, 0.0, 0.0
    beta = work[9]
    acc = 0.0
    for i in range(p):
        acc += x[i]
        beta[i] = min(acc, 1.0)
    ik[IK_REFITS] += 1.0
    ik[IK_SERVED] += 1.0
    t_pos = ik[IK_PW] / u
    t_neg = (ik[IK_W] - ik[IK_PW]) / u
    pos_total = t_pos + kappa * (ik[IK_WR] / u + ik[IK_TR])
    return (INCR_MOVED if moved else INCR_SERVED), total, pos_total, t_pos, t_neg
