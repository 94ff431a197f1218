"""The exact lazy I-spline refit, one event at a time, in one compiled loop (numba).

Two loops: ``stream_run_ops`` refits from the histogram before every prediction that follows
labels, the engine's refit to the last bit (described here); the incremental loop of
``stream_packed_run``, the default, updates that refit per event and agrees with it within
rounding (its section below).

``ISplineCalibrator`` at its default (``refit_every=None``) refits before every prediction
that follows new labels. Most of that refit's cost was not the fit: the score prior's strength
(a logistic fit over every bucket, from a cold start) and the engine's per-event Python calls.
This loop runs the operations in one call and refits exactly as the engine's refit of the
histogram alone does (``ispline_refit_histogram``), to the last bit: the knots by its weighted
quantile steps, each non-empty bucket's non-zero B-splines for those knots (kept until the knots move),
the banded ``B' W B`` and ``B' W y`` summed bucket by bucket in its order, the I-spline Gram
system from them, and the same active-set solve warm-started from the previous fit's positive
coefficients. The class totals are summed as numpy sums them (pairwise), so the served bounds
and the LLR's inputs are the engine's too.

The score prior's strength is 0 (the data alone) when ``log kappa`` falls below
``log(KAPPA_MIN)``; ``log kappa = log L_S - max log L_D + (k / 2) log(n + 1)``. Any parameters
``(a, b)`` give ``log L_D(a, b) <= max log L_D``, so ``log L_S - log L_D(a, b) + (k / 2) log(n + 1)``
bounds ``log kappa`` from above. The loop keeps both log-likelihoods at fixed parameters (the
anchor: the optimum of the last full prior fit, written as a fixed linear predictor per bucket)
as sums over buckets updated per event, and refits without the prior only while this bound is
below ``log(KAPPA_MIN) - PRIOR_MARGIN``. Otherwise it stops and the caller runs the full refit.
(The full refit's Newton iterate reaches that maximum far closer than ``PRIOR_MARGIN``: its
strength is then 0 as well, and the two refits are the same.)

State (all arrays owned by the caller):

- ``st`` float64: scalars (see ``ST_*``) and the prior's sums;
- ``knots`` float64 ``(B + 2 (order + 1))``: the current clamped knot vector in its first
  ``ist[IS_NKNOTS]`` entries;
- ``rows`` float64 ``(B, order + 1)`` and ``base`` int64 ``(2, B)``: each bucket's non-zero
  B-splines at its centre, the index of the first, and the version of the knots they are for
  (``ist[IS_STAMP]`` is the current one; a bucket's row is computed when it is stale);
- ``band`` float64 ``(B + order + 2, order + 1)``: ``band[j, d] = (B' W B)[j, j + d]``, ``cross``
  float64 ``(B + order + 2)``: ``B' W y``, rebuilt from the histogram at each refit;
- ``coef``, ``beta`` float64 ``(B + order + 2)`` and ``free`` bool: the current solution in the
  first ``basis`` entries;
- ``lpos``, ``lneg``, ``spos``, ``sneg``, ``xcov`` float64 ``(B)``: per bucket, at the anchor,
  ``log sigma(z)``, ``log sigma(-z)``, the prior's ``log r``, ``log(1 - r)`` and covariate.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit, jit_noalloc
from streamcal._kernels.histogram import (
    SF_HEADER,
    SF_KIND,
    SF_T_NEG,
    SF_T_POS,
    SI_B,
    SI_HEADER,
    SI_RING_COUNT,
    SI_RING_HEAD,
    SI_W,
    stored_unit,
    window_add_inplace,
    window_clock,
    window_expire_next_inplace,
)
from streamcal._kernels.ispline import (
    _combination_at,
    _gram_from_band,
    bspline_nonzero_inplace,
    clamped_span,
    clamped_span_bounds,
    free_set_band_solve,
    nnls_sum_capped_gram_warm,
    warm_free_set,
)
from streamcal._kernels.prior import KAPPA_MIN, RIDGE, prior_rate

# NumPy values where a kernel passes a constant to a callee: numba compiles a callee once per
# literal argument (``0``, ``False``, a module's int), and a NumPy scalar is typed as a variable
_H0 = np.int64(SF_HEADER)  # where the histogram starts in ``sf``
_START = np.int64(0)
_REAL_WEIGHTS = np.bool_(False)  # ``stream_rebuild``'s ``stored``: the histogram's real weights

OP_LEARN = 1  # the operation codes of streamcal._operations
OP_PREDICT = 2

# st (float64) scalars
ST_FIT_WEIGHT = 0  # weight of the current fit (real units)
ST_LOGODDS = 1  # the LLR's prior log-odds
ST_LOW = 2  # served probability bounds
ST_HIGH = 3
ST_DIRTY = 4  # 1.0: labels came since the last fit
ST_C = 5  # llr_pseudo_count
ST_ANCHOR_A = 6  # the anchor's intercept (the linear predictor is c_j + A + beta x_j)
ST_ANCHOR_B = 7
ST_D = 8  # sum over buckets of pos log sigma(z) + neg log sigma(-z) (stored units)
ST_S = 9  # sum of pos log r + neg log(1 - r) (stored units; probability inputs)
ST_N = 10  # the weights' sum, their sums times x and x^2 (stored units)
ST_X = 11
ST_XX = 12
ST_KEPT = 13  # the incremental refit's counts: banded solves kept, dense solves, full refits
ST_DENSE = 14
ST_FULL = 15
ST_STEPPED = 16  # banded solves kept after active-set steps from the previous free set
ST_UPDATED = 17  # of the kept ones, those solved on the held factors (updated per event, not refactored)
ST_HEADER = 18

# ist (int64) scalars
IS_NKNOTS = 0  # knots in use
IS_PRIOR = 1  # 0: no prior; 1: probability inputs; 2: raw scores
IS_N = 2  # the incremental refit: non-empty buckets, the first and the last of them
IS_FIRST = 3
IS_LAST = 4
IS_SINCE_SYNC = 5  # events since the sums were last recomputed
IS_STAMP = 6  # the version of the knots the rows were computed for
IS_INCR = 7  # 1: the incremental refit's state (tree, counts, band in stored units) is current
IS_LEVELS = 8  # quantile levels whose bucket and cumulative weight the incremental refit keeps
IS_HELD = 9  # runs of the reduced system kept in ``held`` for the free set in ``grp`` (0: none)
IS_HEADER = 10

PRIOR_MARGIN = 1.0  # log-units below log(KAPPA_MIN) the bound must reach
RESYNC_EVENTS = 1024  # the updated sums are recomputed from the histogram this often

# stop codes
DONE = 0
STOP_PRIOR = 1  # the prior's bound failed: run the full refit
STOP_RENORM = 2  # a decay renormalisation: rebuild the state
STOP_SCALE = 3  # weights beyond the fit's scaling range: run the full refit


@jit_noalloc(forceinline=True)
def _real(v, u):
    """``v / u``: a stored weight in real units (no division where the unit is 1, the same bits)."""
    return v if u == 1.0 else v / u


@jit(inline="always")
def _default_n_knots(n):
    return max(1, math.floor(np.cbrt(n) + 1e-9) - 4)


@jit
def stream_knots(sf, B, centres, order, wanted, inner, use_inner, out):
    """The full refit's knot vector of the histogram in ``sf`` (written into ``out``); returns its
    length, or -1 when the histogram is empty or its weight needs the fit's power-of-two scaling.

    The steps of ``ispline_refit_histogram`` (and ``default_n_knots`` for ``wanted < 0``) on the
    real weights ``pos / u + neg / u``."""
    u = stored_unit(sf, sf[SF_KIND])
    n = 0
    total = 0.0
    lower = 0.0
    upper = 0.0
    first = 0
    for i in range(B):
        w = _real(sf[SF_HEADER + i], u) + _real(sf[SF_HEADER + B + i], u)
        if w > 0.0:
            if n == 0:
                lower = centres[i]
                first = i
            upper = centres[i]
            total += w
            n += 1
    if n == 0 or not (2.0**-500 < total < 2.0**500):
        return -1
    m = 0
    if upper > lower:
        if use_inner:
            for q in range(inner.shape[0]):
                c = inner[q]
                if c > lower and c < upper and (m == 0 or c > out[order + m]):
                    out[order + 1 + m] = c
                    m += 1
        else:
            want = _default_n_knots(total) if wanted < 0 else wanted
            want = min(want, B)
            k = min(want, max(0, n - order - 1))
            if k > 0 and n >= 3:
                # the inverted weighted CDF at the levels j / (k + 1): the first cumulative
                # weight reaching each level, the cumulative sums in the refit's order
                at = 0  # index among the non-empty buckets
                bucket = first
                cum = _real(sf[SF_HEADER + bucket], u) + _real(sf[SF_HEADER + B + bucket], u)
                for q in range(k):
                    level = total * float(q + 1) / float(k + 1)
                    while at < n and cum < level:
                        at += 1
                        if at < n:
                            bucket += 1
                            w = _real(sf[SF_HEADER + bucket], u) + _real(sf[SF_HEADER + B + bucket], u)
                            while not w > 0.0:
                                bucket += 1
                                w = _real(sf[SF_HEADER + bucket], u) + _real(sf[SF_HEADER + B + bucket], u)
                            cum += w
                    c = centres[bucket]
                    if c > lower and c < upper and (m == 0 or c > out[order + m]):
                        out[order + 1 + m] = c
                        m += 1
    else:
        upper = lower + max(1.0, abs(lower))
    for q in range(order + 1):
        out[q] = lower
        out[m + order + 1 + q] = upper
    return m + 2 * (order + 1)


@jit_noalloc(forceinline=True)
def _pairwise_leaf(sf, off, n, u):
    """numpy's pairwise summation of ``_real(sf[off : off + n], u)`` for ``n <= 128``."""
    if n < 8:
        acc = 0.0
        for i in range(n):
            acc += _real(sf[off + i], u)
        return acc
    r0 = _real(sf[off], u)
    r1 = _real(sf[off + 1], u)
    r2 = _real(sf[off + 2], u)
    r3 = _real(sf[off + 3], u)
    r4 = _real(sf[off + 4], u)
    r5 = _real(sf[off + 5], u)
    r6 = _real(sf[off + 6], u)
    r7 = _real(sf[off + 7], u)
    i = 8
    while i < n - (n % 8):
        r0 += _real(sf[off + i], u)
        r1 += _real(sf[off + i + 1], u)
        r2 += _real(sf[off + i + 2], u)
        r3 += _real(sf[off + i + 3], u)
        r4 += _real(sf[off + i + 4], u)
        r5 += _real(sf[off + i + 5], u)
        r6 += _real(sf[off + i + 6], u)
        r7 += _real(sf[off + i + 7], u)
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += _real(sf[off + i], u)
        i += 1
    return res


@jit
def _pairwise_sum(sf, off, n, u):
    """``(_real(sf[off : off + n], u)).sum()`` to the last bit: numpy's pairwise summation of float64
    (blocks of at most 128 summed with eight accumulators, larger ranges split in two halves at
    a multiple of 8 and the halves' sums added), without recursion (numba's cache does not
    reload recursive functions safely)."""
    if n <= 128:
        return _pairwise_leaf(sf, off, n, u)
    s_off = np.empty(64, dtype=np.int64)
    s_n = np.empty(64, dtype=np.int64)
    s_stage = np.zeros(64, dtype=np.int64)  # 0: left half next, 1: right half next
    s_left = np.empty(64)
    sp = 1
    s_off[0] = off
    s_n[0] = n
    s_stage[0] = 0
    result = 0.0
    while sp > 0:
        top = sp - 1
        m = s_n[top]
        if m <= 128:
            val = _pairwise_leaf(sf, s_off[top], m, u)
            sp -= 1
            # hand the value up: a left half waits for its right half, a right half completes
            while True:
                if sp == 0:
                    result = val
                    break
                parent = sp - 1
                if s_stage[parent] == 1:
                    s_left[parent] = val
                    half = s_n[parent] // 2
                    half -= half % 8
                    s_stage[parent] = 2
                    s_off[sp] = s_off[parent] + half
                    s_n[sp] = s_n[parent] - half
                    s_stage[sp] = 0
                    sp += 1
                    break
                val = s_left[parent] + val
                sp -= 1
            continue
        half = m // 2
        half -= half % 8
        s_stage[top] = 1
        s_off[sp] = s_off[top]
        s_n[sp] = half
        s_stage[sp] = 0
        sp += 1
    return result


@jit
def stream_rebuild(sf, B, rows, base, band, cross, p, k1, centres, knots, nk, stamp, stored):
    """``band`` and ``cross`` of the histogram's real weights (``stored``: its stored weights, whose
    fit is the same), the basis size ``p``: the sums and their order of ``ispline_refit_histogram``
    (bucket by bucket, weight times label mean).

    ``rows[i]`` holds bucket ``i``'s ``k1`` non-zero B-splines (order ``k1``) at its centre for
    the knots ``knots[:nk]``, and ``base[0, i]`` the first one's index, when ``base[1, i]`` is
    ``stamp`` (the knots' version); a non-empty bucket's stale row is computed here, with the
    values ``ispline_gram_clamped`` computes."""
    u = 1.0 if stored else stored_unit(sf, sf[SF_KIND])
    for j in range(p):
        cross[j] = 0.0
        for d in range(k1):
            band[j, d] = 0.0
    t = knots[:nk]
    lo, hi = clamped_span_bounds(t, k1)
    lower = t[0]
    upper = t[nk - 1]
    values = np.empty(k1)
    left = np.empty(k1)
    right = np.empty(k1)
    for i in range(B):
        wp = _real(sf[SF_HEADER + i], u)
        w = wp + _real(sf[SF_HEADER + B + i], u)
        if w > 0.0:
            if base[1, i] != stamp:
                xn = min(max(centres[i], lower), upper)
                mu = clamped_span(t, xn, lo, hi)
                bspline_nonzero_inplace(t, xn, mu, k1, values, left, right)
                base[0, i] = mu - k1 + 1
                base[1, i] = stamp
                for r in range(k1):
                    rows[i, r] = values[r]
            mean = wp / w
            j0 = base[0, i]
            for r in range(k1):
                wr = w * rows[i, r]
                cross[j0 + r] += wr * mean
                for s in range(r, k1):
                    band[j0 + r, s - r] += wr * rows[i, s]


@jit
def stream_prior_sums(sf, B, st, lpos, lneg, spos, sneg, xcov):
    """The prior's sums at the anchor (see ``ST_D`` .. ``ST_XX``) from the histogram."""
    d = 0.0
    s = 0.0
    n = 0.0
    x = 0.0
    xx = 0.0
    for i in range(B):
        p = sf[SF_HEADER + i]
        q = sf[SF_HEADER + B + i]
        if p + q > 0.0:
            d += p * lpos[i] + q * lneg[i]
            s += p * spos[i] + q * sneg[i]
            n += p + q
            x += (p + q) * xcov[i]
            xx += (p + q) * xcov[i] * xcov[i]
    st[ST_D] = d
    st[ST_S] = s
    st[ST_N] = n
    st[ST_X] = x
    st[ST_XX] = xx


@jit_noalloc(forceinline=True)
def _prior_delta(i, dpos, dneg, st, lpos, lneg, spos, sneg, xcov):
    dw = dpos + dneg
    st[ST_D] += dpos * lpos[i] + dneg * lneg[i]
    st[ST_S] += dpos * spos[i] + dneg * sneg[i]
    st[ST_N] += dw
    st[ST_X] += dw * xcov[i]
    st[ST_XX] += dw * xcov[i] * xcov[i]


@jit(inline="always")
def _log_sigmoid(z):
    if z >= 0.0:
        return -math.log1p(math.exp(-z))
    return z - math.log1p(math.exp(z))


@jit
def _prior_is_zero(sf, st, kind_prior, c):
    """Whether the bound on ``log kappa`` (module notes) is below ``log(KAPPA_MIN) - PRIOR_MARGIN``."""
    u = stored_unit(sf, sf[SF_KIND])
    n_all = st[ST_N] / u
    if not n_all > 0.0:
        return False
    mean = st[ST_X] / st[ST_N]
    var = st[ST_XX] / st[ST_N] - mean * mean
    if not var > 0.0:
        return False
    sd = math.sqrt(var)
    # the anchor's linear predictor c_j + A + beta x_j in the refit's parameters (a, b)
    beta = st[ST_ANCHOR_B]
    b = beta * sd
    a = st[ST_ANCHOR_A] + beta * mean
    if kind_prior == 1:
        log_s = st[ST_S] / u
        k = 2.0
    else:
        t_pos = _real(sf[SF_T_POS], u)
        t_neg = _real(sf[SF_T_NEG], u)
        r = (t_pos + c) / (t_pos + t_neg + 2.0 * c)
        r = min(max(r, 1e-15), 1.0 - 1e-15)
        log_s = 0.0
        if t_pos > 0.0:
            log_s += t_pos * math.log(r)
        if t_neg > 0.0:
            log_s += t_neg * math.log1p(-r)
        a -= math.log(r) - math.log1p(-r)
        k = 1.0
    f = st[ST_D] / u - 0.5 * RIDGE * (a * a + b * b)
    bound = log_s - f + 0.5 * k * math.log(n_all + 1.0)
    # the sums' rounding: a relative 1e-12 of their magnitudes
    slack = 1e-12 * (abs(log_s) + abs(st[ST_D] / u))
    return bound + slack < math.log(KAPPA_MIN) - PRIOR_MARGIN


@jit
def stream_anchor(sf, B, centres, kind_prior, c, a, b, st, lpos, lneg, spos, sneg, xcov):
    """Set the anchor from the prior fit's ``(a, b)`` (standardised as the full fit does on this
    histogram) and the per-bucket constants, and recompute the sums."""
    u = stored_unit(sf, sf[SF_KIND])
    t_pos = _real(sf[SF_T_POS], u)
    t_neg = _real(sf[SF_T_NEG], u)
    base_rate = (t_pos + c) / (t_pos + t_neg + 2.0 * c)
    n = 0.0
    sx = 0.0
    sxx = 0.0
    for i in range(B):
        r = prior_rate(centres[i], base_rate, kind_prior == 1)
        spos[i] = math.log(r)
        sneg[i] = math.log1p(-r)
        xcov[i] = (spos[i] - sneg[i]) if kind_prior == 1 else centres[i]
        w = _real(sf[SF_HEADER + i], u) + _real(sf[SF_HEADER + B + i], u)
        if w > 0.0:
            n += w
            sx += w * xcov[i]
            sxx += w * xcov[i] * xcov[i]
    mean = sx / n if n > 0.0 else 0.0
    var = sxx / n - mean * mean if n > 0.0 else 0.0
    scale = 1.0 / math.sqrt(var) if var > 0.0 else 0.0
    # z_j = off_j + a + b (x_j - mean) scale = c_j + A + beta x_j, c_j = off_j for probability
    # inputs and 0 for raw scores (whose offset, the base rate's log-odds, joins A)
    beta = b * scale
    big_a = a - beta * mean
    if kind_prior != 1:
        big_a += math.log(base_rate) - math.log1p(-base_rate)
    st[ST_ANCHOR_A] = big_a
    st[ST_ANCHOR_B] = beta
    for i in range(B):
        z = (spos[i] - sneg[i] if kind_prior == 1 else 0.0) + big_a + beta * xcov[i]
        lpos[i] = _log_sigmoid(z)
        lneg[i] = _log_sigmoid(-z)
    stream_prior_sums(sf, B, st, lpos, lneg, spos, sneg, xcov)


@jit_noalloc(forceinline=True)
def _warm_start(knots, coef, old_nk, scratch, nk, k1, free):
    """``free[:nk - k1]``: the full refit's warm start for the knots ``scratch[:nk]``, as the
    engine's refit takes it from the previous fit (knots ``knots[:old_nk]``, ``coef``): its
    positive coefficients when the basis keeps its size, else those mapped by ``warm_free_set``."""
    p = nk - k1
    if nk == old_nk:
        for q in range(p):
            free[q] = coef[q] > 0.0
    else:
        warm_free_set(knots, coef, max(old_nk - k1, 0), scratch, p, k1 - 1, free)


@jit
def stream_solve(band, cross, p, k1, coef, beta, free):
    """The exact constrained solve on the Gram system of ``band`` and ``cross`` (basis ``p``),
    warm-started from ``free[:p]`` (updated), into ``coef[:p]`` and ``beta[:p]``."""
    dense = np.zeros((p, p))
    for j in range(p):
        for d in range(k1):
            if j + d < p:
                dense[j, j + d] = band[j, d]
    cr = np.empty(p)
    for j in range(p):
        cr[j] = cross[j]
    gram = np.empty((p, p))
    rhs = np.empty(p)
    _gram_from_band(dense, cr, gram, rhs)
    x = np.empty(p)
    passive = np.empty(p, dtype=np.bool_)
    for j in range(p):
        passive[j] = free[j]
    if free_set_band_solve(band, cr, gram, rhs, p, k1 - 1, passive, 1.0, x):
        n_iter = 1
    else:
        n_iter = nnls_sum_capped_gram_warm(gram, rhs, 1.0, x, passive)
    acc = 0.0
    for j in range(p):
        free[j] = passive[j]
        coef[j] = x[j]
        acc += x[j]
        beta[j] = min(acc, 1.0)
    return n_iter


@jit(inline="always")
def stream_run_ops(ops, bk, s, y, w, t, start, sf, si, fbuf, ibuf, free, out_p, out_llr, out_logodds):
    """Run operations ``start, ...`` of a lazily refitted I-spline calibrator (module notes) on
    the packed state's sections (``stream_packed_run``, which numba inlines it into: a kernel's
    compiled code holds, and optimises again, the code of every kernel it calls).

    Returns ``(stop, code)``: operations before ``stop`` are done (histogram, fit and outputs);
    A prediction writes its probability into ``out_p`` and its fit's weight and prior log-odds
    into ``out_llr`` and ``out_logodds`` (the caller turns them into the LLR).
    ``code`` is ``DONE`` or the reason the loop stopped before operation ``stop``, whose
    prediction needs the caller's full refit (``STOP_PRIOR``, ``STOP_SCALE``), or after a decay
    renormalisation (``STOP_RENORM``: the state must be rebuilt).
    """
    B = si[SI_B]
    order = ibuf[PK_ORDER]
    k1 = order + 1
    P = B + k1 + 1
    st, knots, scratch = _fsec(fbuf, ibuf, 0), _fsec(fbuf, ibuf, 1), _fsec(fbuf, ibuf, 2)
    rows, band = _fsec(fbuf, ibuf, 3).reshape((B, k1)), _fsec(fbuf, ibuf, 4).reshape((P, k1))
    cross, coef, beta = _fsec(fbuf, ibuf, 5), _fsec(fbuf, ibuf, 6), _fsec(fbuf, ibuf, 7)
    lpos, lneg, spos = _fsec(fbuf, ibuf, 8), _fsec(fbuf, ibuf, 9), _fsec(fbuf, ibuf, 10)
    sneg, xcov = _fsec(fbuf, ibuf, 11), _fsec(fbuf, ibuf, 12)
    centres, inner = _fsec(fbuf, ibuf, 16), _fsec(fbuf, ibuf, 17)
    ist, base = _isec(ibuf, 0), _isec(ibuf, 1).reshape((2, B))
    wanted = ibuf[PK_WANTED]
    use_inner = ibuf[PK_USE_INNER] != 0
    kind = sf[SF_KIND]
    kind_prior = ist[IS_PRIOR]
    c = st[ST_C]
    W = si[SI_W]
    vals = np.empty(k1)
    lft = np.empty(k1)
    rgt = np.empty(k1)
    for i in range(start, ops.shape[0]):
        op = ops[i]
        if op & OP_PREDICT:
            if st[ST_DIRTY] != 0.0:
                nk = stream_knots(sf, B, centres, order, wanted, inner, use_inner, scratch)
                if nk < 0:
                    return i, STOP_SCALE
                if kind_prior != 0 and not _prior_is_zero(sf, st, kind_prior, c):
                    return i, STOP_PRIOR
                same = nk == ist[IS_NKNOTS]
                if same:
                    for q in range(nk):
                        if scratch[q] != knots[q]:
                            same = False
                            break
                p = nk - k1
                # the warm start of the full refit: the previous coefficients' positive ones,
                # mapped onto the new basis when it changes size
                _warm_start(knots, coef, ist[IS_NKNOTS], scratch, nk, k1, free)
                if not same:
                    for q in range(nk):
                        knots[q] = scratch[q]
                    ist[IS_NKNOTS] = nk
                    ist[IS_STAMP] += 1  # every bucket's row is stale
                stream_rebuild(sf, B, rows, base, band, cross, p, k1, centres, knots, nk, ist[IS_STAMP], _REAL_WEIGHTS)
                stream_solve(band, cross, p, k1, coef, beta, free)
                u = stored_unit(sf, kind)
                # the class totals as the full refit sums its histogram's real weights
                t_pos = _pairwise_sum(sf, _H0, B, u)
                t_neg = _pairwise_sum(sf, SF_HEADER + B, B, u)
                total = t_pos + t_neg
                st[ST_FIT_WEIGHT] = total
                st[ST_LOGODDS] = math.log(t_pos + c) - math.log(t_neg + c)
                st[ST_LOW] = c / (total + 2.0 * c)
                st[ST_HIGH] = (total + c) / (total + 2.0 * c)
                st[ST_DIRTY] = 0.0
            nk = ist[IS_NKNOTS]
            tk = knots[:nk]
            lo, hi = clamped_span_bounds(tk, k1)
            v = _combination_at(s[i], tk, k1, beta, lo, hi, vals, lft, rgt)
            v = min(max(v, 0.0), 1.0)
            v = min(max(v, st[ST_LOW]), st[ST_HIGH])
            out_p[i] = v
            # the LLR's inputs: the caller computes it as the engine does (numpy's log)
            out_llr[i] = st[ST_FIT_WEIGHT]
            out_logodds[i] = st[ST_LOGODDS]
        if op & OP_LEARN:
            clock = window_clock(sf, t[i], kind)
            while si[SI_RING_COUNT] > 0:
                head = si[SI_RING_HEAD]
                hb = si[SI_HEADER + 2 * B + head] if W > 0 else 0
                p0 = sf[SF_HEADER + hb]
                n0 = sf[SF_HEADER + B + hb]
                if window_expire_next_inplace(sf, si, clock, kind) < 0:
                    break
                dp = sf[SF_HEADER + hb] - p0
                dn = sf[SF_HEADER + B + hb] - n0
                if kind_prior != 0:
                    _prior_delta(hb, dp, dn, st, lpos, lneg, spos, sneg, xcov)
            b = bk[i]
            p0 = sf[SF_HEADER + b]
            n0 = sf[SF_HEADER + B + b]
            renormalised = window_add_inplace(sf, si, b, y[i], w[i], clock, kind)
            st[ST_DIRTY] = 1.0
            if renormalised:
                return i + 1, STOP_RENORM
            dp = sf[SF_HEADER + b] - p0
            dn = sf[SF_HEADER + B + b] - n0
            if kind_prior != 0:
                _prior_delta(b, dp, dn, st, lpos, lneg, spos, sneg, xcov)
            ist[IS_SINCE_SYNC] += 1
            if ist[IS_SINCE_SYNC] >= RESYNC_EVENTS:
                ist[IS_SINCE_SYNC] = 0
                if kind_prior != 0:
                    stream_prior_sums(sf, B, st, lpos, lneg, spos, sneg, xcov)
    return ops.shape[0], DONE


# --------------------------------------------------------------------------------------------
# The incremental exact refit (``stream_packed_run``'s loop): the same fit within rounding.
#
# One event changes one bucket (and an eviction another): the banded normal equations
# ``B' W B``, ``B' W y`` (kept in stored units: the fit does not change when every weight is
# scaled alike) change by that bucket's rank-one term, and a Fenwick tree of the bucket weights
# gives each knot's weighted quantile in ``O(log B)``. A knot that moves changes the B-splines of
# the buckets around it only: their terms are taken out and put back with the new knots. The
# constrained solve keeps the previous fit's free set and solves its equality-constrained
# subproblem in the B-spline coefficients, where tied coefficients are one unknown and the
# system stays banded (``O(basis order^2)``); the result is kept only when it is feasible and
# every multiplier is clear of 0 (KKT), else the dense warm-started active-set solve runs. A
# quantile level within rounding of a bucket's edge has the knots found by ``stream_knots``'s
# exact pass; a change of the knot count, a basis the non-empty buckets do not determine (whose
# optimum need not be unique), or ``RESYNC_EVENTS`` events run the full refit from the histogram
# (the same knots, band and solve as the bit-for-bit loop), so rounding drift never accumulates.
# The free set's reduced system is held factored between events (``held``): a bucket's change is
# a rank-one change of it, applied to its banded factors in place (``_held_add``), so a solve on
# an unchanged free set runs the substitutions and the KKT check (on the band itself) only.

AMBIGUOUS = 1e-9  # relative margin of a quantile's level, a coefficient or a multiplier from 0


@jit_noalloc(forceinline=True)
def _tree_add(tree, B, b, dw):
    i = b + 1
    while i <= B:
        tree[i] += dw
        i += i & -i


@jit
def _tree_build(tree, sf, B):
    """The Fenwick tree (1-based, ``tree[0]`` unused) of the stored bucket weights."""
    tree[0] = 0.0
    for i in range(1, B + 1):
        tree[i] = sf[SF_HEADER + i - 1] + sf[SF_HEADER + B + i - 1]
    for i in range(1, B + 1):
        j = i + (i & -i)
        if j <= B:
            tree[j] += tree[i]


@jit_noalloc(forceinline=True)
def _tree_total(tree, B):
    acc = 0.0
    i = B
    while i > 0:
        acc += tree[i]
        i -= i & -i
    return acc


@jit_noalloc(forceinline=True)
def _tree_search(tree, B, level):
    """``(b, before)``: the first bucket ``b`` whose cumulative weight reaches ``level``, and the
    cumulative weight of the buckets before it."""
    pos = 0
    acc = 0.0
    step = 1
    while step * 2 <= B:
        step *= 2
    while step > 0:
        if pos + step <= B and acc + tree[pos + step] < level:
            pos += step
            acc += tree[pos]
        step //= 2
    return pos, acc


@jit
def _count_ends(sf, B, u, ist):
    """The non-empty buckets' count, first and last (``B`` and -1 when none)."""
    n = 0
    first = B
    last = -1
    for i in range(B):
        if _real(sf[SF_HEADER + i], u) + _real(sf[SF_HEADER + B + i], u) > 0.0:
            n += 1
            first = min(first, i)
            last = i
    ist[IS_N] = n
    ist[IS_FIRST] = first
    ist[IS_LAST] = last


@jit
def tree_knots(tree, sf, B, centres, order, wanted, inner, use_inner, ist, out, lvb, lvc):
    """``stream_knots`` from the tree and the counts: the knot vector's length, or -2 when a
    level, the knot count or the scaling range is within rounding of a decision (then the exact
    ``stream_knots`` decides).

    ``lvb[q]``, ``lvc[q]`` for ``q < ist[IS_LEVELS]``: the bucket level ``q`` fell in last time and
    the cumulative weight through it (kept per event by ``_bucket_changed``); the tree is searched
    only for a level that has left its bucket."""
    u = stored_unit(sf, sf[SF_KIND])
    n = ist[IS_N]
    stored_total = _tree_total(tree, B)
    total = stored_total / u
    if n == 0 or not (2.0**-499 < total < 2.0**499):
        return -2
    lower = centres[ist[IS_FIRST]]
    upper = centres[ist[IS_LAST]]
    m = 0
    if upper > lower:
        if use_inner:
            for q in range(inner.shape[0]):
                c = inner[q]
                if c > lower and c < upper and (m == 0 or c > out[order + m]):
                    out[order + 1 + m] = c
                    m += 1
        else:
            want = wanted
            if wanted < 0:
                root = np.cbrt(total) + 1e-9
                if abs(root - round(root)) < AMBIGUOUS * (1.0 + root):
                    return -2
                want = _default_n_knots(total)
            k = min(min(want, B), max(0, n - order - 1))
            if k > 0 and n >= 3:
                tol = AMBIGUOUS * stored_total
                # the levels within an ulp or two of the exact pass's, far inside the margin ``tol``
                step = stored_total / float(k + 1)
                for q in range(k):
                    level = step * float(q + 1)
                    b = lvb[q] if q < ist[IS_LEVELS] else B
                    w = sf[SF_HEADER + b] + sf[SF_HEADER + B + b] if b < B else 0.0
                    if not (w > 0.0 and level - (lvc[q] - w) >= tol and lvc[q] - level >= tol):
                        b, before = _tree_search(tree, B, level)
                        if b >= B:
                            return -2
                        w = sf[SF_HEADER + b] + sf[SF_HEADER + B + b]
                        if not w > 0.0 or level - before < tol or before + w - level < tol:
                            return -2
                        lvb[q] = b
                        lvc[q] = before + w
                        ist[IS_LEVELS] = max(ist[IS_LEVELS], q + 1)
                    c = centres[b]
                    if c > lower and c < upper and (m == 0 or c > out[order + m]):
                        out[order + 1 + m] = c
                        m += 1
    else:
        upper = lower + max(1.0, abs(lower))
    for q in range(order + 1):
        out[q] = lower
        out[m + order + 1 + q] = upper
    return m + 2 * (order + 1)


@jit_noalloc(forceinline=True)
def _bucket_term(b, sign, sf, B, rows, base, band, cross, k1):
    """Add (``sign`` 1) or take out (-1) bucket ``b``'s stored-weight term of ``band``, ``cross``."""
    wp = sf[SF_HEADER + b] * sign
    w = wp + sf[SF_HEADER + B + b] * sign
    j0 = base[0, b]
    for r in range(k1):
        wr = w * rows[b, r]
        cross[j0 + r] += wp * rows[b, r]
        for q in range(r, k1):
            band[j0 + r, q - r] += wr * rows[b, q]


@jit_noalloc(forceinline=True)
def _bucket_row(b, centres, knots, nk, k1, rows, base, stamp, vals, lft, rgt):
    """Bucket ``b``'s non-zero B-splines for ``knots[:nk]`` into ``rows[b]`` (``stream_rebuild``'s)."""
    t = knots[:nk]
    lo, hi = clamped_span_bounds(t, k1)
    xn = min(max(centres[b], t[0]), t[nk - 1])
    mu = clamped_span(t, xn, lo, hi)
    bspline_nonzero_inplace(t, xn, mu, k1, vals, lft, rgt)
    base[0, b] = mu - k1 + 1
    base[1, b] = stamp
    for r in range(k1):
        rows[b, r] = vals[r]


@jit_noalloc(forceinline=True)
def _bucket_changed(
    b, p0, n0, sf, B, u, tree, ist, rows, base, band, cross, k1, centres, knots, vals, lft, rgt, lvb, lvc, grp,
    held,
):  # fmt: skip
    """Bucket ``b`` held ``p0``, ``n0`` (stored) before the event: the tree, the kept levels'
    cumulative weights, the counts, the band and the held reduced system follow."""
    dp = sf[SF_HEADER + b] - p0
    dn = sf[SF_HEADER + B + b] - n0
    _tree_add(tree, B, b, dp + dn)
    for q in range(ist[IS_LEVELS]):
        if lvb[q] >= b:
            lvc[q] += dp + dn
    was = _real(p0, u) + _real(n0, u) > 0.0
    now = _real(sf[SF_HEADER + b], u) + _real(sf[SF_HEADER + B + b], u) > 0.0
    if now and not was:
        ist[IS_N] += 1
        ist[IS_FIRST] = min(ist[IS_FIRST], b)
        ist[IS_LAST] = max(ist[IS_LAST], b)
    elif was and not now:
        ist[IS_N] -= 1
        if ist[IS_N] == 0:
            ist[IS_FIRST] = B
            ist[IS_LAST] = -1
        elif b == ist[IS_FIRST]:
            i = b + 1
            while i < B and not _real(sf[SF_HEADER + i], u) + _real(sf[SF_HEADER + B + i], u) > 0.0:
                i += 1
            ist[IS_FIRST] = min(i, B - 1)
            if i == B:  # the count disagrees with the buckets: the next refit is the full one
                ist[IS_INCR] = 0
        elif b == ist[IS_LAST]:
            i = b - 1
            while i >= 0 and not _real(sf[SF_HEADER + i], u) + _real(sf[SF_HEADER + B + i], u) > 0.0:
                i -= 1
            ist[IS_LAST] = max(i, 0)
            if i < 0:
                ist[IS_INCR] = 0
    if base[1, b] != ist[IS_STAMP]:
        _bucket_row(b, centres, knots, ist[IS_NKNOTS], k1, rows, base, ist[IS_STAMP], vals, lft, rgt)
    j0 = base[0, b]
    for r in range(k1):
        wr = (dp + dn) * rows[b, r]
        cross[j0 + r] += dp * rows[b, r]
        for q in range(r, k1):
            band[j0 + r, q - r] += wr * rows[b, q]
    if ist[IS_HELD] > 0:
        _held_add(b, dp, dp + dn, rows, base, grp, held, ist, k1)


@jit
def _first_at_least(centres, B, x):
    a = 0
    b = B
    while a < b:
        mid = (a + b) // 2
        if centres[mid] < x:
            a = mid + 1
        else:
            b = mid
    return a


@jit
def refresh_moved_knots(sf, B, centres, knots, new, nk, k1, rows, base, band, cross, stamp, vals, lft, rgt):
    """Move the knots ``knots[:nk]`` to ``new[:nk]`` (same length): the buckets whose B-splines
    change (those within ``k1`` knots of a moved one) take their terms out of ``band`` and
    ``cross`` and put them back with the new knots; the empty ones among them turn stale."""
    i0 = 0
    while knots[i0] == new[i0]:
        i0 += 1
    i1 = nk - 1
    while knots[i1] == new[i1]:
        i1 -= 1
    a = max(0, i0 - k1)
    z = min(nk - 1, i1 + k1)
    bl = _first_at_least(centres, B, min(knots[a], new[a]))
    bh = min(_first_at_least(centres, B, max(knots[z], new[z])), B - 1)
    for b in range(bl, bh + 1):
        if sf[SF_HEADER + b] + sf[SF_HEADER + B + b] > 0.0 and base[1, b] == stamp:
            _bucket_term(b, -1.0, sf, B, rows, base, band, cross, k1)
    for q in range(nk):
        knots[q] = new[q]
    for b in range(bl, bh + 1):
        if sf[SF_HEADER + b] + sf[SF_HEADER + B + b] > 0.0:
            _bucket_row(b, centres, knots, nk, k1, rows, base, stamp, vals, lft, rgt)
            _bucket_term(b, 1.0, sf, B, rows, base, band, cross, k1)
        else:
            base[1, b] = -1


@jit_noalloc(forceinline=True)
def _banded_factor_solve(red, rc, m, kb, v, y, dinv):
    """Solve ``R v = rc`` for the symmetric banded ``R`` (``red[g, d] = R[g, g + d]``, ``d <= kb``,
    overwritten by ``D L'`` of its factors ``R = L D L'``, ``dinv`` the pivots' reciprocals);
    False when a pivot is below ``1e-10`` of its diagonal (too close to singular to trust without
    the dense solve)."""
    for g in range(m):
        if kb == 3 and g >= 3:
            # cubic splines' rows unrolled, each multiplier L[g, h] = red[h, g - h] / D[h] formed
            # once: the same operations in the same order as the general loop below
            l3 = red[g - 3, 3] * dinv[g - 3]
            l2 = red[g - 2, 2] * dinv[g - 2]
            l1 = red[g - 1, 1] * dinv[g - 1]
            acc = red[g, 0] - l3 * red[g - 3, 3] - l2 * red[g - 2, 2] - l1 * red[g - 1, 1]
            if not acc > 1e-10 * red[g, 0]:
                return False
            red[g, 0] = acc
            if g + 1 < m:
                red[g, 1] = red[g, 1] - l2 * red[g - 2, 3] - l1 * red[g - 1, 2]
            if g + 2 < m:
                red[g, 2] = red[g, 2] - l1 * red[g - 1, 3]
            dinv[g] = 1.0 / red[g, 0]
            continue
        for d in range(kb + 1):
            if g + d >= m:
                break
            acc = red[g, d]
            for h in range(max(0, g + d - kb), g):
                acc -= red[h, g - h] * dinv[h] * red[h, g + d - h]
            if d == 0 and not acc > 1e-10 * red[g, 0]:
                return False
            red[g, d] = acc
        dinv[g] = 1.0 / red[g, 0]
    _banded_substitute(red, rc, m, kb, v, y, dinv)
    return True


@jit_noalloc(forceinline=True)
def _banded_substitute(red, rc, m, kb, v, y, dinv):
    """``v = (L D L')^-1 rc[:m]`` for the factors in ``red`` and ``dinv`` (``y`` scratch)."""
    for g in range(m):
        if kb == 3 and g >= 3:  # cubic splines unrolled, the general loop's operations and order
            acc = rc[g] - red[g - 3, 3] * dinv[g - 3] * y[g - 3]
            acc = acc - red[g - 2, 2] * dinv[g - 2] * y[g - 2]
            y[g] = acc - red[g - 1, 1] * dinv[g - 1] * y[g - 1]
            continue
        acc = rc[g]
        for h in range(max(0, g - kb), g):
            acc -= red[h, g - h] * dinv[h] * y[h]
        y[g] = acc
    for g in range(m - 1, -1, -1):
        if kb == 3 and g + 3 < m:
            acc = y[g] - red[g, 1] * v[g + 1] - red[g, 2] * v[g + 2] - red[g, 3] * v[g + 3]
            v[g] = acc * dinv[g]
            continue
        acc = y[g]
        for d in range(1, kb + 1):
            if g + d < m:
                acc -= red[g, d] * v[g + d]
        v[g] = acc * dinv[g]


SOLVE_KEPT = 0  # ``banded_set_solve``: the optimum, written
SOLVE_RETRY = 1  # not the optimum; ``free`` holds the next guess of the free set
SOLVE_FAIL = 2  # not the optimum, no clear next guess (an ambiguous margin, a near-singular system)
SET_TRIES = 4  # free sets tried by the banded solve before the dense solve


@jit
def banded_free_solve(band, cross, p, k1, coef, beta, scale, red, vecs, grp):
    """The constrained solve kept on the free set ``coef[:p] > 0`` of the previous fit
    (``banded_set_solve`` on that set, once): True, with ``coef`` and ``beta`` written, when the
    result is the optimum; False (and nothing written) otherwise."""
    free = np.empty(p, dtype=np.bool_)
    for i in range(p):
        free[i] = coef[i] > 0.0
    return banded_set_solve(band, cross, p, k1, free, coef, beta, scale, red, vecs, grp) == SOLVE_KEPT


@jit_noalloc
def banded_set_solve(band, cross, p, k1, free, coef, beta, scale, red, vecs, grp):
    """The constrained solve on the free set ``free[:p]``, in the B-spline coefficients
    ``beta = cumsum(coef)``: each free coefficient starts a run of equal ``beta`` (one unknown per
    run, the system banded). Without the cap, then with ``sum(coef) = 1`` when the first exceeds
    it. ``SOLVE_KEPT``, with ``coef`` and ``beta`` written, when the result is the optimum: every
    free coefficient positive, the cap kept, and every KKT multiplier (of a zero coefficient, of
    the cap) above ``AMBIGUOUS * scale``. Otherwise nothing is written, and the result is
    ``SOLVE_RETRY`` with ``free`` changed as an active-set step changes it (the free coefficients
    that came out at or below 0 fixed at 0; else the zero coefficient of the most negative
    multiplier freed), or ``SOLVE_FAIL`` where no step is clear (a margin within ``AMBIGUOUS``,
    the cap's, the subproblem close to singular).

    ``red`` float64 ``(p, k1)``, ``vecs`` float64 ``(5, p)`` and ``grp`` int64 ``(2, p)``: scratch."""
    starts = grp[0]
    gid = grp[1]
    m = _free_runs(free, p, starts, gid)
    if m == 0:
        return SOLVE_FAIL
    _reduce_band(band, cross, p, k1, starts, gid, m, red, vecs[0])
    return _solve_reduced(band, cross, p, k1, free, coef, beta, scale, red, vecs, starts, gid, m)


@jit_noalloc(forceinline=True)
def _free_runs(free, p, starts, gid):
    """The runs of equal ``beta`` of the free set ``free[:p]``: ``starts[g]`` the free coefficient
    that starts run ``g``, ``gid[i]`` the run of coefficient ``i`` (-1 before the first); their
    number."""
    m = 0
    for i in range(p):
        if free[i]:
            starts[m] = i
            m += 1
        gid[i] = m - 1
    return m


@jit_noalloc(forceinline=True)
def _reduce_band(band, cross, p, k1, starts, gid, m, red, rc):
    """The banded system of the runs' values: ``red[g, d]`` its row ``g`` (diagonal ``d``), ``rc``
    its right-hand side, summed from ``band`` and ``cross``."""
    for g in range(m):
        rc[g] = 0.0
        for d in range(k1):
            red[g, d] = 0.0
    for i in range(starts[0], p):
        gi = gid[i]
        rc[gi] += cross[i]
        red[gi, 0] += band[i, 0]
        for d in range(1, k1):
            if i + d >= p:
                break
            dd = gid[i + d] - gi
            red[gi, dd] += 2.0 * band[i, d] if dd == 0 else band[i, d]


@jit_noalloc(forceinline=True)
def _solve_reduced(band, cross, p, k1, free, coef, beta, scale, red, vecs, starts, gid, m):
    """``banded_set_solve`` from its reduced system (``red``, ``vecs[0]``, overwritten)."""
    kb = k1 - 1
    # the last run's column, for the cap's right-hand side
    last = vecs[3]
    for g in range(m):
        last[g] = red[g, m - 1 - g] if m - 1 - g <= kb else 0.0
    if not _banded_factor_solve(red, vecs[0], m, kb, vecs[1], vecs[2], vecs[4]):
        return SOLVE_FAIL
    return _cap_and_accept(band, cross, p, k1, free, coef, beta, scale, red, vecs, starts, gid, m)


@jit_noalloc(forceinline=True)
def _cap_and_accept(band, cross, p, k1, free, coef, beta, scale, red, vecs, starts, gid, m):
    """``_solve_reduced`` after the factorisation: the runs' values ``vecs[1]`` without the cap
    (``red``, ``vecs[4]`` the factors, ``vecs[3]`` the last run's column), then with it where the
    first exceed it, and the KKT check."""
    kb = k1 - 1
    rc = vecs[0]
    v = vecs[1]
    y = vecs[2]
    last = vecs[3]
    cap = False
    if v[m - 1] > 1.0:
        if m == 1:
            v[0] = 1.0
        else:
            for g in range(m - 1):
                rc[g] -= last[g]
            _banded_substitute(red, rc, m - 1, kb, v, y, vecs[4])
            v[m - 1] = 1.0
        cap = True
    return _accept_if_optimal(band, cross, p, k1, free, coef, beta, scale, vecs, starts, gid, v, m, cap)


@jit_noalloc(forceinline=True)
def _accept_if_optimal(band, cross, p, k1, free, coef, beta, scale, vecs, starts, gid, v, m, cap):
    """The KKT check of ``banded_set_solve``'s run values ``v[:m]``; writes the fit if it holds,
    else the next free set when one is clear (``banded_set_solve``'s codes)."""
    prev = 0.0
    dropped = False
    for g in range(m):
        if not v[g] - prev > AMBIGUOUS:
            if not v[g] - prev <= AMBIGUOUS:
                return SOLVE_FAIL  # not a number
            free[starts[g]] = False
            dropped = True
        prev = v[g]
    if dropped:
        return SOLVE_RETRY
    if not cap and not v[m - 1] < 1.0 - AMBIGUOUS:
        return SOLVE_FAIL
    b = vecs[4]
    for i in range(p):
        b[i] = v[gid[i]] if gid[i] >= 0 else 0.0
    # the multipliers: suffix sums of the gradient H beta - cross, in one backward pass
    s = vecs[2]
    total = 0.0
    for i in range(p - 1, -1, -1):
        acc = band[i, 0] * b[i] - cross[i]
        if k1 == 4 and i >= 3 and i + 3 < p:
            # cubic splines' rows unrolled: the general loop's operations in its order
            acc += band[i, 1] * b[i + 1]
            acc += band[i, 2] * b[i + 2]
            acc += band[i, 3] * b[i + 3]
            acc += band[i - 1, 1] * b[i - 1]
            acc += band[i - 2, 2] * b[i - 2]
            acc += band[i - 3, 3] * b[i - 3]
        else:
            for d in range(1, min(k1, p - i)):
                acc += band[i, d] * b[i + d]
            for d in range(1, min(k1, i + 1)):
                acc += band[i - d, d] * b[i - d]
        total += acc
        s[i] = total
    mu = -s[starts[m - 1]] if cap else 0.0
    tol = AMBIGUOUS * scale
    if cap and not mu > tol:
        return SOLVE_FAIL
    g = 0
    worst = -1
    ambiguous = False
    for i in range(p):
        if g < m and starts[g] == i:
            g += 1
            if not abs(s[i] + mu) <= 1e3 * tol:  # the subproblem's own optimality, a sanity bound
                return SOLVE_FAIL
        elif not s[i] + mu > tol:
            if s[i] + mu < -tol:
                if worst < 0 or s[i] < s[worst]:
                    worst = i
            else:
                ambiguous = True
    if ambiguous:
        return SOLVE_FAIL
    if worst >= 0:
        free[worst] = True
        return SOLVE_RETRY
    prev = 0.0
    acc = 0.0
    for i in range(p):
        coef[i] = b[i] - prev
        prev = b[i]
        acc += coef[i]
        beta[i] = min(acc, 1.0)
    return SOLVE_KEPT


# columns of ``held`` after the factors' ``k1`` (the runs' system in ``_banded_factor_solve``'s form)
H_RC = 0  # the right-hand side
H_DINV = 1  # the pivots' reciprocals
H_LAST = 2  # the system's column of the last run (the cap's right-hand side)
H_DIAG = 3  # the system's diagonal (the pivots' bound)
H_WORK = 4  # the rank-one update's vector
H_COLUMNS = 5


@jit_noalloc
def held_set_solve(band, cross, p, k1, free, coef, beta, scale, red, vecs, grp, held, ist):
    """``banded_set_solve`` that keeps the factors of its reduced system: when ``ist[IS_HELD]``
    says that ``held`` holds them for the runs in ``grp`` (the events since have updated them,
    ``_held_add``), only the substitutions run; else the system is reduced from ``band`` and
    factored, and its factors copied there. ``ist[IS_HELD]`` is the number of runs after
    ``SOLVE_KEPT`` (``free`` is then the set ``held`` is for), 0 otherwise. ``held`` float64
    ``(p, k1 + H_COLUMNS)``: the factors, then the columns ``H_*``."""
    kb = k1 - 1
    starts = grp[0]
    gid = grp[1]
    rc = vecs[0]
    last = vecs[3]
    dinv = vecs[4]
    m = ist[IS_HELD]
    ist[IS_HELD] = 0
    if m > 0:
        for g in range(m):
            for d in range(k1):
                red[g, d] = held[g, d]
            rc[g] = held[g, k1 + H_RC]
            dinv[g] = held[g, k1 + H_DINV]
            last[g] = held[g, k1 + H_LAST]
        _banded_substitute(red, rc, m, kb, vecs[1], vecs[2], dinv)
    else:
        m = _free_runs(free, p, starts, gid)
        if m == 0:
            return SOLVE_FAIL
        _reduce_band(band, cross, p, k1, starts, gid, m, red, rc)
        for g in range(m):
            last[g] = red[g, m - 1 - g] if m - 1 - g <= kb else 0.0
            held[g, k1 + H_RC] = rc[g]
            held[g, k1 + H_LAST] = last[g]
            held[g, k1 + H_DIAG] = red[g, 0]
        if not _banded_factor_solve(red, rc, m, kb, vecs[1], vecs[2], dinv):
            return SOLVE_FAIL
        for g in range(m):
            for d in range(k1):
                held[g, d] = red[g, d]
            held[g, k1 + H_DINV] = dinv[g]
    code = _cap_and_accept(band, cross, p, k1, free, coef, beta, scale, red, vecs, starts, gid, m)
    if code == SOLVE_KEPT:
        ist[IS_HELD] = m
    return code


@jit_noalloc(forceinline=True)
def _held_add(b, dp, dw, rows, base, grp, held, ist, k1):
    """Bucket ``b``'s change (``dp`` positive, ``dw`` all stored weight) in the held factors of
    the runs' system, which changes by ``dw a a'`` (``a``: the bucket's B-splines summed by run)
    and its right-hand side by ``dp a``: the factors' rank-one update of Gill, Golub, Murray and
    Saunders (*Methods for modifying matrix factorizations*, 1974, method C1), from the first run
    ``a`` reaches. A pivot below the factorisation's bound drops the factors (``ist[IS_HELD]``
    0: the next solve factors anew)."""
    m = ist[IS_HELD]
    kb = k1 - 1
    starts = grp[0]
    gid = grp[1]
    w = k1 + H_WORK
    j0 = base[0, b]
    g0 = -1
    for r in range(k1):
        i = j0 + r
        if i >= starts[0]:
            gi = gid[i]
            if g0 < 0:
                g0 = gi
                for g in range(gi, min(gi + k1, m)):
                    held[g, w] = 0.0
            held[gi, w] += rows[b, r]
            held[gi, k1 + H_RC] += dp * rows[b, r]
    if g0 < 0 or dw == 0.0:
        return
    a_last = held[m - 1, w] if m - 1 <= g0 + kb else 0.0
    for g in range(g0, min(g0 + k1, m)):
        held[g, k1 + H_DIAG] += dw * held[g, w] * held[g, w]
        if m - 1 - g <= kb:
            held[g, k1 + H_LAST] += dw * held[g, w] * a_last
    alpha = dw
    for j in range(g0, m):
        if j > g0 and j + kb < m:
            held[j + kb, w] = 0.0
        pj = held[j, w]
        dj = held[j, 0]
        dn = dj + alpha * pj * pj
        if not dn > 1e-10 * held[j, k1 + H_DIAG]:
            ist[IS_HELD] = 0
            return
        inv = 1.0 / dn
        bj = pj * alpha * inv
        alpha = dj * alpha * inv
        for d in range(1, k1):
            if j + d >= m:
                break
            lold = held[j, d] * held[j, k1 + H_DINV]
            wr = held[j + d, w] - pj * lold
            held[j + d, w] = wr
            held[j, d] = dn * (lold + bj * wr)
        held[j, 0] = dn
        held[j, k1 + H_DINV] = inv


# The river face's pair without reference counts. ``incremental_refit`` and the label of
# ``stream_packed_run``'s incremental loop again, as helpers that allocate nothing (``_refit_middle``,
# ``_learn_event``, ``_refit_scalars``, ``_served``) around the steps that do (``refit_full``,
# ``refit_dense``, ``stream_knots``): ``pair_fast`` runs a pair through them compiled without
# reference counts, ``pair_resume`` the allocating steps. The statements and their order are
# the loop's, so the bits are; the loop runs the same helpers (compiled without reference
# counts, so that its arrays pass them without a count taken and dropped per call).

NEED_FULL = 5  # ``_refit_middle``: the full rebuild and solve next (nothing changed yet)
NEED_DENSE = 6  # ``_refit_middle``: the dense solve next (the banded ones not certified)


@jit_noalloc(forceinline=True)
def _refit_middle(
    nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, red, vecs, grp,
    held, centres, vals, lft, rgt,
):  # fmt: skip
    """The incremental refit once the new knots ``scratch[:nk]`` are known: ``STOP_PRIOR``,
    ``NEED_FULL`` (before any change), ``DONE`` (the banded solve kept), or ``NEED_DENSE``.
    Allocates nothing: the river face's pair runs it without reference counts."""
    kind_prior = ist[IS_PRIOR]
    if kind_prior != 0 and not _prior_is_zero(sf, st, kind_prior, st[ST_C]):
        return STOP_PRIOR
    same_size = nk == ist[IS_NKNOTS]
    moved = not same_size
    if same_size:
        for q in range(nk):
            if scratch[q] != knots[q]:
                moved = True
                break
    p = nk - k1
    # fewer non-empty buckets than the basis needs to be determined: the optimum need not be
    # unique, and only the full refit's own steps (in real units, as the engine's) give its one
    if ist[IS_INCR] == 0 or ist[IS_N] < p + k1 or not same_size:
        return NEED_FULL
    if moved:
        ist[IS_HELD] = 0  # the band changed at many buckets: the runs' system is reduced anew
        refresh_moved_knots(
            sf, B, centres, knots, scratch, nk, k1, rows, base, band, cross, ist[IS_STAMP], vals, lft, rgt
        )
    # the previous fit's free set first; where its KKT check fails, a few active-set steps on
    # the banded system, each certified by the same check, before the dense solve
    for q in range(p):
        free[q] = coef[q] > 0.0
    scale = _tree_total(tree, B)
    updated = ist[IS_HELD] > 0
    code = SOLVE_RETRY
    tries = 0
    while code == SOLVE_RETRY and tries < SET_TRIES:
        from_held = ist[IS_HELD] > 0
        code = held_set_solve(band, cross, p, k1, free, coef, beta, scale, red, vecs, grp, held, ist)
        if code == SOLVE_FAIL and from_held:
            code = SOLVE_RETRY  # not certified on the updated factors: the same set factored anew
            updated = False
            continue
        tries += 1
    if code == SOLVE_KEPT:
        st[ST_KEPT if tries == 1 else ST_STEPPED] += 1.0
        st[ST_UPDATED] += 1.0 if tries == 1 and updated else 0.0
        return DONE
    return NEED_DENSE


@jit
def refit_full(nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, centres):
    """The incremental refit's full rebuild for the knots ``scratch[:nk]`` (``NEED_FULL``)."""
    p = nk - k1
    ist[IS_HELD] = 0
    _warm_start(knots, coef, ist[IS_NKNOTS], scratch, nk, k1, free)
    for q in range(nk):
        knots[q] = scratch[q]
    ist[IS_NKNOTS] = nk
    ist[IS_STAMP] += 1
    _tree_build(tree, sf, B)
    ist[IS_LEVELS] = 0
    _count_ends(sf, B, stored_unit(sf, sf[SF_KIND]), ist)
    determined = ist[IS_N] >= p + k1
    stream_rebuild(sf, B, rows, base, band, cross, p, k1, centres, knots, nk, ist[IS_STAMP], determined)
    ist[IS_INCR] = 1 if determined else 0
    ist[IS_SINCE_SYNC] = 0
    st[ST_FULL] += 1.0
    stream_solve(band, cross, p, k1, coef, beta, free)


@jit
def refit_dense(p, k1, st, band, cross, coef, beta, free):
    """The incremental refit's dense solve (``NEED_DENSE``)."""
    st[ST_DENSE] += 1.0
    for q in range(p):
        free[q] = coef[q] > 0.0
    stream_solve(band, cross, p, k1, coef, beta, free)


@jit(inline="always")
def refit_with_knots(
    nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, red, vecs, grp,
    held, centres, vals, lft, rgt,
):  # fmt: skip
    """The incremental refit once ``nk`` (``scratch[:nk]``, or -1) is known: ``DONE``, or
    ``STOP_SCALE`` / ``STOP_PRIOR``."""
    if nk < 0:
        return STOP_SCALE
    code = _refit_middle(
        nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, red, vecs, grp,
        held, centres, vals, lft, rgt,
    )  # fmt: skip
    if code == NEED_FULL:
        refit_full(nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, centres)
        return DONE
    if code == NEED_DENSE:
        refit_dense(nk - k1, k1, st, band, cross, coef, beta, free)
        return DONE
    return code


@jit(inline="always")
def incremental_refit(
    sf, B, centres, order, wanted, inner, use_inner, st, ist, knots, scratch, rows, base, band, cross,
    coef, beta, free, tree, red, vecs, grp, held, vals, lft, rgt,
):  # fmt: skip
    """The refit before a prediction that follows labels (section notes): ``DONE``, or
    ``STOP_SCALE`` / ``STOP_PRIOR`` as ``stream_run_ops``. The knots from the tree where it
    decides them, else by ``stream_knots``'s exact pass, then ``refit_with_knots``'s steps
    (which the river face's pair runs too: one compiled copy of the refit serves both)."""
    nk = -2
    if ist[IS_INCR] != 0:
        nk = tree_knots(tree, sf, B, centres, order, wanted, inner, use_inner, ist, scratch, grp[2], vecs[5])
    if nk == -2:
        nk = stream_knots(sf, B, centres, order, wanted, inner, use_inner, scratch)
    return refit_with_knots(
        nk, sf, B, order + 1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, red, vecs,
        grp, held, centres, vals, lft, rgt,
    )  # fmt: skip


@jit_noalloc(forceinline=True)
def _refit_scalars(sf, st):
    """The fit's weight, prior log-odds and served bounds after a refit; the fit clean."""
    c = st[ST_C]
    u = stored_unit(sf, sf[SF_KIND])
    t_pos = _real(sf[SF_T_POS], u)
    t_neg = _real(sf[SF_T_NEG], u)
    total = t_pos + t_neg
    st[ST_FIT_WEIGHT] = total
    st[ST_LOGODDS] = math.log(t_pos + c) - math.log(t_neg + c)
    st[ST_LOW] = c / (total + 2.0 * c)
    st[ST_HIGH] = (total + c) / (total + 2.0 * c)
    st[ST_DIRTY] = 0.0


@jit_noalloc(forceinline=True)
def _served(x, st, ist, knots, k1, beta, vals, lft, rgt):
    """The served probability of score ``x`` from the current fit."""
    nk = ist[IS_NKNOTS]
    tk = knots[:nk]
    lo, hi = clamped_span_bounds(tk, k1)
    v = _combination_at(x, tk, k1, beta, lo, hi, vals, lft, rgt)
    v = min(max(v, 0.0), 1.0)
    return min(max(v, st[ST_LOW]), st[ST_HIGH])


@jit_noalloc(forceinline=True)
def _learn_event(
    b, y, w, t, sf, si, B, k1, st, ist, knots, rows, base, band, cross, lpos, lneg, spos, sneg, xcov, tree,
    centres, vals, lft, rgt, lvb, lvc, grp, held,
):  # fmt: skip
    """One label: the window's expiries and the event added, the prior's sums and the
    incremental refit's state following each changed bucket; whether a decay renormalisation
    ran (then the state is to be rebuilt). Allocates nothing."""
    kind = sf[SF_KIND]
    kind_prior = ist[IS_PRIOR]
    W = si[SI_W]
    incr = ist[IS_INCR] != 0
    u = stored_unit(sf, kind)
    clock = window_clock(sf, t, kind)
    while si[SI_RING_COUNT] > 0:
        head = si[SI_RING_HEAD]
        hb = si[SI_HEADER + 2 * B + head] if W > 0 else 0
        p0 = sf[SF_HEADER + hb]
        n0 = sf[SF_HEADER + B + hb]
        if window_expire_next_inplace(sf, si, clock, kind) < 0:
            break
        if kind_prior != 0:
            dp = sf[SF_HEADER + hb] - p0
            _prior_delta(hb, dp, sf[SF_HEADER + B + hb] - n0, st, lpos, lneg, spos, sneg, xcov)
        if incr:
            _bucket_changed(
                hb, p0, n0, sf, B, u, tree, ist, rows, base, band, cross, k1, centres, knots, vals, lft, rgt,
                lvb, lvc, grp, held,
            )  # fmt: skip
    p0 = sf[SF_HEADER + b]
    n0 = sf[SF_HEADER + B + b]
    renormalised = window_add_inplace(sf, si, b, y, w, clock, kind)
    st[ST_DIRTY] = 1.0
    if renormalised:
        return True
    u = stored_unit(sf, kind)
    if kind_prior != 0:
        _prior_delta(b, sf[SF_HEADER + b] - p0, sf[SF_HEADER + B + b] - n0, st, lpos, lneg, spos, sneg, xcov)
    if incr:
        _bucket_changed(
            b, p0, n0, sf, B, u, tree, ist, rows, base, band, cross, k1, centres, knots, vals, lft, rgt,
            lvb, lvc, grp, held,
        )  # fmt: skip
    ist[IS_SINCE_SYNC] += 1
    if ist[IS_SINCE_SYNC] >= RESYNC_EVENTS:
        ist[IS_SINCE_SYNC] = 0
        ist[IS_INCR] = 0  # the next refit is the full one: no drift accumulates
        if kind_prior != 0:
            stream_prior_sums(sf, B, st, lpos, lneg, spos, sneg, xcov)
    return False


# --------------------------------------------------------------------------------------------
# The packed state: the loop's arrays as sections of one float64 and one int64 buffer (and the
# ``free`` flags), so that a call unboxes five arrays instead of thirty. ``ibuf``'s header holds
# the scalars and the sections' offsets; ``streamcal.spline.stream_state`` lays it out.

PK_ORDER = 0  # order of the M-splines
PK_WANTED = 1  # the fixed knot count, or -1 (the default rule)
PK_USE_INNER = 2  # 1: explicit interior knots
PK_INCREMENTAL = 3  # 1: the incremental refit; 0: the full refit before every prediction
PK_F = 4  # the float sections' offsets (FLOAT_SECTIONS' order), then the float buffer's end
FLOAT_SECTIONS = (
    "st", "knots", "scratch", "rows", "band", "cross", "coef", "beta", "lpos", "lneg", "spos", "sneg",
    "xcov", "tree", "red", "vecs", "centres", "inner", "held", "kv", "one_f",
)  # fmt: skip
PK_I = PK_F + len(FLOAT_SECTIONS) + 1  # the int sections' offsets (INT_SECTIONS' order), then the end
INT_SECTIONS = ("ist", "base", "grp", "one_i")
PK_HEADER = PK_I + len(INT_SECTIONS) + 1
# the events of a river-face call (one, or a label and a prediction), in the ``one_f`` and
# ``one_i`` sections, two slots each: score, label, weight, time and the three outputs;
# operation and bucket; then the knot count a pair's refit hands over (``stream_packed_pair``).
# ``kv``: the B-spline values and de Boor's scratch, ``(3, order + 1)``
ONE_S, ONE_Y, ONE_W, ONE_T, ONE_P, ONE_LLR, ONE_LOGODDS, ONE_F = 0, 2, 4, 6, 8, 10, 12, 14
ONE_OP, ONE_B, ONE_NK, ONE_I = 0, 2, 4, 5


@jit(inline="always")
def _fsec(fbuf, ibuf, k):
    return fbuf[ibuf[PK_F + k] : ibuf[PK_F + k + 1]]


@jit(inline="always")
def _isec(ibuf, k):
    return ibuf[ibuf[PK_I + k] : ibuf[PK_I + k + 1]]


@jit
def stream_packed_run(ops, bk, s, y, w, t, start, sf, si, fbuf, ibuf, free, out_p, out_llr, out_logodds):
    """Run operations ``start, ...`` on the packed state's sections with the incremental refit
    (section notes), or by ``stream_run_ops`` when ``ibuf[PK_INCREMENTAL]`` is 0: the same
    operations, stop codes and outputs, each incremental prediction within rounding of the full
    refit's."""
    if ibuf[PK_INCREMENTAL] == 0:
        return stream_run_ops(ops, bk, s, y, w, t, start, sf, si, fbuf, ibuf, free, out_p, out_llr, out_logodds)
    B = si[SI_B]
    order = ibuf[PK_ORDER]
    k1 = order + 1
    P = B + k1 + 1
    st, knots, scratch = _fsec(fbuf, ibuf, 0), _fsec(fbuf, ibuf, 1), _fsec(fbuf, ibuf, 2)
    rows, band = _fsec(fbuf, ibuf, 3).reshape((B, k1)), _fsec(fbuf, ibuf, 4).reshape((P, k1))
    cross, coef, beta = _fsec(fbuf, ibuf, 5), _fsec(fbuf, ibuf, 6), _fsec(fbuf, ibuf, 7)
    lpos, lneg, spos = _fsec(fbuf, ibuf, 8), _fsec(fbuf, ibuf, 9), _fsec(fbuf, ibuf, 10)
    sneg, xcov, tree = _fsec(fbuf, ibuf, 11), _fsec(fbuf, ibuf, 12), _fsec(fbuf, ibuf, 13)
    red, vecs = _fsec(fbuf, ibuf, 14).reshape((P, k1)), _fsec(fbuf, ibuf, 15).reshape((6, P))
    centres, inner = _fsec(fbuf, ibuf, 16), _fsec(fbuf, ibuf, 17)
    held = _fsec(fbuf, ibuf, 18).reshape((P, k1 + H_COLUMNS))
    ist, base, grp = _isec(ibuf, 0), _isec(ibuf, 1).reshape((2, B)), _isec(ibuf, 2).reshape((3, P))
    wanted = ibuf[PK_WANTED]
    use_inner = ibuf[PK_USE_INNER] != 0
    # the incremental loop is written here, not in a kernel of its own: a kernel's compiled code
    # holds (and optimises again) the code of every kernel it calls, and this loop's callees are
    # the largest of the module
    lvb = grp[2]
    lvc = vecs[5]
    vals = np.empty(k1)
    lft = np.empty(k1)
    rgt = np.empty(k1)
    for i in range(start, ops.shape[0]):
        op = ops[i]
        if op & OP_PREDICT:
            if st[ST_DIRTY] != 0.0:
                code = incremental_refit(
                    sf, B, centres, order, wanted, inner, use_inner, st, ist, knots, scratch, rows, base,
                    band, cross, coef, beta, free, tree, red, vecs, grp, held, vals, lft, rgt,
                )  # fmt: skip
                if code != DONE:
                    return i, code
                _refit_scalars(sf, st)
            out_p[i] = _served(s[i], st, ist, knots, k1, beta, vals, lft, rgt)
            out_llr[i] = st[ST_FIT_WEIGHT]
            out_logodds[i] = st[ST_LOGODDS]
        if op & OP_LEARN and _learn_event(
            bk[i], y[i], w[i], t[i], sf, si, B, k1, st, ist, knots, rows, base, band, cross, lpos, lneg, spos,
            sneg, xcov, tree, centres, vals, lft, rgt, lvb, lvc, grp, held,
        ):  # fmt: skip
            return i + 1, STOP_RENORM
    return ops.shape[0], DONE


@jit
def stream_packed_one(op, b, s, y, w, t, sf, si, fbuf, ibuf, free):
    """One operation of the river face (``op``: ``OP_LEARN`` or ``OP_PREDICT``) through
    ``stream_packed_run``: the served probability of a prediction (0.0 for a label) when the
    loop ran it, else ``-code`` (a prediction's ``STOP_PRIOR`` / ``STOP_SCALE``: not run; a
    label's ``STOP_RENORM``: learned, the state to rebuild). A prediction's fit weight and prior
    log-odds are left in the ``one_f`` section."""
    one_f = _fsec(fbuf, ibuf, len(FLOAT_SECTIONS) - 1)
    one_i = _isec(ibuf, len(INT_SECTIONS) - 1)
    one_f[ONE_S] = s
    one_f[ONE_Y] = y
    one_f[ONE_W] = w
    one_f[ONE_T] = t
    one_i[ONE_OP] = op
    one_i[ONE_B] = b
    _, code = stream_packed_run(
        one_i[ONE_OP : ONE_OP + 1], one_i[ONE_B : ONE_B + 1], one_f[ONE_S : ONE_S + 1], one_f[ONE_Y : ONE_Y + 1],
        one_f[ONE_W : ONE_W + 1], one_f[ONE_T : ONE_T + 1], _START, sf, si, fbuf, ibuf, free,
        one_f[ONE_P : ONE_P + 1], one_f[ONE_LLR : ONE_LLR + 1], one_f[ONE_LOGODDS : ONE_LOGODDS + 1],
    )  # fmt: skip
    if code != DONE:
        return -float(code)
    return one_f[ONE_P] if op & OP_PREDICT else 0.0


NOT_DIRTY = 4  # ``stream_packed_pair``: no event kept and no label since the last fit, nothing run
AT_KNOTS = 5  # ``pair_fast``: the knots' exact pass, then the rest of the refit, is the caller's
AT_FULL = 6  # ``pair_fast``: the full rebuild (``refit_full``), then the prediction, is the caller's
AT_DENSE = 7  # ``pair_fast``: the dense solve (``refit_dense``), then the prediction, is the caller's
AT_RUN = 8  # ``pair_fast``: nothing run, the loop's full refit serves (``pair_by_run``)


@jit_noalloc
def pair_fast(b, sl, y, w, s, sf, si, fbuf, ibuf, free):
    """``stream_packed_pair`` up to the refit's steps that allocate (the knots' exact pass, the
    full rebuild, the dense solve), compiled without reference counts: the statements of
    ``stream_packed_run``'s incremental loop and ``incremental_refit``, in their order. Returns the
    served probability or ``-code`` as ``stream_packed_pair``, or ``-AT_*``: the label learned
    and the refit stopped at that step, the knot count in ``one_i[ONE_NK]``; ``-AT_RUN`` when
    the loop refits in full before every prediction (``ibuf[PK_INCREMENTAL]`` 0: nothing run)."""
    if ibuf[PK_INCREMENTAL] == 0:
        return -float(AT_RUN)
    st = _fsec(fbuf, ibuf, 0)
    if b < 0 and st[ST_DIRTY] == 0.0:
        return -float(NOT_DIRTY)
    B = si[SI_B]
    k1 = ibuf[PK_ORDER] + 1
    P = B + k1 + 1
    knots, scratch = _fsec(fbuf, ibuf, 1), _fsec(fbuf, ibuf, 2)
    rows, band = _fsec(fbuf, ibuf, 3).reshape((B, k1)), _fsec(fbuf, ibuf, 4).reshape((P, k1))
    cross, coef, beta = _fsec(fbuf, ibuf, 5), _fsec(fbuf, ibuf, 6), _fsec(fbuf, ibuf, 7)
    tree, red = _fsec(fbuf, ibuf, 13), _fsec(fbuf, ibuf, 14).reshape((P, k1))
    vecs = _fsec(fbuf, ibuf, 15).reshape((6, P))
    centres, held = _fsec(fbuf, ibuf, 16), _fsec(fbuf, ibuf, 18).reshape((P, k1 + H_COLUMNS))
    kv = _fsec(fbuf, ibuf, 19).reshape((3, k1))
    vals, lft, rgt = kv[0], kv[1], kv[2]
    ist, base, grp = _isec(ibuf, 0), _isec(ibuf, 1).reshape((2, B)), _isec(ibuf, 2).reshape((3, P))
    if b >= 0:
        lpos, lneg, spos = _fsec(fbuf, ibuf, 8), _fsec(fbuf, ibuf, 9), _fsec(fbuf, ibuf, 10)
        sneg, xcov = _fsec(fbuf, ibuf, 11), _fsec(fbuf, ibuf, 12)
        if _learn_event(
            b, y, w, 0.0, sf, si, B, k1, st, ist, knots, rows, base, band, cross, lpos, lneg, spos, sneg,
            xcov, tree, centres, vals, lft, rgt, grp[2], vecs[5], grp, held,
        ):  # fmt: skip
            return -float(STOP_RENORM)
    if st[ST_DIRTY] != 0.0:
        one_i = _isec(ibuf, len(INT_SECTIONS) - 1)
        nk = -2
        if ist[IS_INCR] != 0:
            inner = _fsec(fbuf, ibuf, 17)
            nk = tree_knots(
                tree, sf, B, centres, k1 - 1, ibuf[PK_WANTED], inner, ibuf[PK_USE_INNER] != 0, ist, scratch,
                grp[2], vecs[5],
            )  # fmt: skip
        one_i[ONE_NK] = nk
        if nk == -2:
            return -float(AT_KNOTS)
        if nk < 0:
            return -float(STOP_SCALE)
        code = _refit_middle(
            nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, red, vecs,
            grp, held, centres, vals, lft, rgt,
        )  # fmt: skip
        if code == NEED_FULL:
            return -float(AT_FULL)
        if code == NEED_DENSE:
            return -float(AT_DENSE)
        if code != DONE:
            return -float(code)
        _refit_scalars(sf, st)
    return _served(s, st, ist, knots, k1, beta, vals, lft, rgt)


@jit
def pair_resume(at, s, sf, si, fbuf, ibuf, free):
    """The rest of a pair that ``pair_fast`` stopped at step ``at`` (``AT_*``): the refit's
    remaining steps as ``incremental_refit`` runs them, then the prediction of ``s``; returns
    the served probability, else ``-code`` (``STOP_SCALE`` / ``STOP_PRIOR``)."""
    B = si[SI_B]
    order = ibuf[PK_ORDER]
    k1 = order + 1
    P = B + k1 + 1
    st, knots, scratch = _fsec(fbuf, ibuf, 0), _fsec(fbuf, ibuf, 1), _fsec(fbuf, ibuf, 2)
    rows, band = _fsec(fbuf, ibuf, 3).reshape((B, k1)), _fsec(fbuf, ibuf, 4).reshape((P, k1))
    cross, coef, beta = _fsec(fbuf, ibuf, 5), _fsec(fbuf, ibuf, 6), _fsec(fbuf, ibuf, 7)
    tree, red = _fsec(fbuf, ibuf, 13), _fsec(fbuf, ibuf, 14).reshape((P, k1))
    vecs = _fsec(fbuf, ibuf, 15).reshape((6, P))
    centres, inner = _fsec(fbuf, ibuf, 16), _fsec(fbuf, ibuf, 17)
    held = _fsec(fbuf, ibuf, 18).reshape((P, k1 + H_COLUMNS))
    kv = _fsec(fbuf, ibuf, 19).reshape((3, k1))
    vals, lft, rgt = kv[0], kv[1], kv[2]
    ist, base, grp = _isec(ibuf, 0), _isec(ibuf, 1).reshape((2, B)), _isec(ibuf, 2).reshape((3, P))
    nk = _isec(ibuf, len(INT_SECTIONS) - 1)[ONE_NK]
    if at == AT_KNOTS:
        nk = stream_knots(sf, B, centres, order, ibuf[PK_WANTED], inner, ibuf[PK_USE_INNER] != 0, scratch)
        code = refit_with_knots(
            nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, red, vecs,
            grp, held, centres, vals, lft, rgt,
        )  # fmt: skip
        if code != DONE:
            return -float(code)
    elif at == AT_FULL:
        refit_full(nk, sf, B, k1, st, ist, knots, scratch, rows, base, band, cross, coef, beta, free, tree, centres)
    else:
        refit_dense(nk - k1, k1, st, band, cross, coef, beta, free)
    _refit_scalars(sf, st)
    return _served(s, st, ist, knots, k1, beta, vals, lft, rgt)


@jit
def stream_packed_pair(b, sl, y, w, s, sf, si, fbuf, ibuf, free):
    """A kept label (bucket ``b``, score ``sl``, label ``y``, weight ``w``; none when ``b`` is
    negative) then a prediction of ``s``: the two operations the river face's calls make, in
    that order, as ``stream_packed_run`` runs them (the same statements, so the same bits), by
    ``pair_fast`` and, where its refit takes a step that allocates, ``pair_resume`` (the river
    face makes these calls itself: a call into a kernel without reference counts takes its
    arrays for less). Returns the
    served probability, else ``-code``: ``STOP_RENORM`` (the label learned with a decay
    renormalisation, the prediction not run), ``STOP_PRIOR`` / ``STOP_SCALE`` (the label
    learned, the prediction not run), ``NOT_DIRTY`` (nothing kept, the fit up to date: nothing
    run)."""
    p = pair_fast(b, sl, y, w, s, sf, si, fbuf, ibuf, free)
    if p >= -float(NOT_DIRTY):
        return p
    if p == -float(AT_RUN):
        return pair_by_run(b, sl, y, w, s, sf, si, fbuf, ibuf, free)
    return pair_resume(int(-p), s, sf, si, fbuf, ibuf, free)


@jit
def pair_by_run(b, sl, y, w, s, sf, si, fbuf, ibuf, free):
    """``stream_packed_pair`` through ``stream_packed_run``: the loop's two operations (its full
    refit's when ``ibuf[PK_INCREMENTAL]`` is 0)."""
    if b < 0 and _fsec(fbuf, ibuf, 0)[ST_DIRTY] == 0.0:
        return -float(NOT_DIRTY)
    one_f = _fsec(fbuf, ibuf, len(FLOAT_SECTIONS) - 1)
    one_i = _isec(ibuf, len(INT_SECTIONS) - 1)
    one_f[ONE_S] = sl
    one_f[ONE_Y] = y
    one_f[ONE_W] = w
    one_f[ONE_T] = 0.0
    one_i[ONE_OP] = OP_LEARN
    one_i[ONE_B] = b
    one_f[ONE_S + 1] = s
    one_f[ONE_Y + 1] = 0.0
    one_f[ONE_W + 1] = 1.0
    one_f[ONE_T + 1] = 0.0
    one_i[ONE_OP + 1] = OP_PREDICT
    one_i[ONE_B + 1] = 0
    _, code = stream_packed_run(
        one_i[ONE_OP : ONE_OP + 2], one_i[ONE_B : ONE_B + 2], one_f[ONE_S : ONE_S + 2], one_f[ONE_Y : ONE_Y + 2],
        one_f[ONE_W : ONE_W + 2], one_f[ONE_T : ONE_T + 2], 0 if b >= 0 else 1, sf, si, fbuf, ibuf, free,
        one_f[ONE_P : ONE_P + 2], one_f[ONE_LLR : ONE_LLR + 2], one_f[ONE_LOGODDS : ONE_LOGODDS + 2],
    )  # fmt: skip
    if code != DONE:
        return -float(code)
    return one_f[ONE_P + 1]
