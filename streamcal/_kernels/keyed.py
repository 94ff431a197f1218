"""Keyed streaming PAV: one sparse windowed row per key over one bucket layout, pooled with a prior (numba).

Rows. A key's row holds only its non-empty buckets, as *atoms* ``(bucket, pos, neg, npos, nneg)``
sorted by bucket, in a segment of the atom arena (``ab``, ``ap``, ``an``, ``acp``, ``acn``); a key's
memory grows with the distinct buckets its window holds, never with the bucket count. A count or
time window keeps the key's events in a ring segment of the ring arena (``rb``, ``rw``, ``ry``,
``rt``) that grows by doubling up to the window. Segments move to the end of their arena when they
grow; the caller compacts the arenas (:func:`compact`) and enlarges them when a kernel stops
for room (it returns the position of the event it could not place, before touching it).

Per key scalars (``kf`` float64 and ``ki`` int64, one row per key slot): the window's totals,
clock, decay frame and counts, exactly the fields of the unkeyed histogram
(:mod:`streamcal._kernels.histogram`), updated by the same arithmetic in the same order: a key's
row equals, bit for bit, the histogram an unkeyed calibrator with the same window builds from that
key's events (tested).

Map. A prediction runs PAV (the stack sweep of :mod:`streamcal._kernels.ipav`, same pooling test,
same additions) over the key's atoms plus the *prior*: pseudo-counts per bucket from the global
map (``prior_pos[b]``, ``prior_neg[b]``, real units, scaled to the key's stored units). Buckets
without key evidence are pooled per run inside one global block (their prior rates are equal, and
pooling adjacent points of equal rate leaves the isotonic fit unchanged), so a sweep visits the
key's atoms plus at most one run per global block. With no prior (strength 0) the sweep visits
exactly the key's knots with the unkeyed kernel's values, and its fitted values, interpolation,
finite-LLR rule and outputs are the unkeyed calibrator's, bit for bit (tested).
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.histogram import (
    DECAY_FORGET_EXPONENT,
    DECAY_RENORM_EXPONENT,
    KIND_COUNT,
    KIND_DECAY_EVENTS,
    KIND_DECAY_TIME,
    KIND_TIME,
)

# kf: per key floats
KF_T_POS = 0
KF_T_NEG = 1
KF_LAST_T = 2
KF_N_LEARNED = 3
KF_T0 = 4
KF_N_RENORM = 5
KF_STAMP = 6  # the global number of learned events when the key last learned (least recently updated)
KF_OBS = 7  # sum of w * y over the key's learned events (real weights): the between-key variance
KF_EXP = 8  # sum of w * p over them, p the global map's prediction before the event
KF_N = 10

# ki: per key ints
KI_A_OFF = 0
KI_A_LEN = 1
KI_A_CAP = 2
KI_R_OFF = 3
KI_R_CAP = 4
KI_R_HEAD = 5
KI_R_COUNT = 6
KI_N_POS = 7
KI_N_NEG = 8
KI_N = 10

# cfg: the layout and window, read by every kernel
CFG_B = 0
CFG_KIND = 1
CFG_WINDOW_N = 2
CFG_SECONDS = 3
CFG_HALF_LIFE = 4
CFG_PSEUDO = 5  # c, the finite rule's pseudo-count (real units)
CFG_FINITE = 6  # 1.0: probabilities under the finite rule
CFG_LINEAR = 7  # 1.0: linear interpolation between bucket centres
CFG_PROB_INPUTS = 8  # 1.0: probability inputs (the fallback before any weight is the score)
CFG_PRIOR_ON = 9  # 1.0: the prior holds weight
CFG_PRIOR_T_POS = 10  # the prior's total pseudo-positive and pseudo-negative weight (real units)
CFG_PRIOR_T_NEG = 11
CFG_PRIOR_PSEUDO = 12  # extra finite-rule pseudo-count the prior carries (its share of the global's)
CFG_N = 16

# arena: [atoms used, ring slots used]
AR_ATOMS = 0
AR_RING = 1

_ONE_BELOW = 1.0 - 2.0**-53
_NOT_SURE_LOW = 2.0**-53
FIRST_CAP = 4

# status codes of the runners: >= 0 is the position of an event that needs room
DONE = -1


@jit_noalloc(forceinline=True)
def _violates(p_left, n_left, p_right, n_right):
    return p_left * (p_right + n_right) >= p_right * (p_left + n_left)


@jit_noalloc(forceinline=True)
def stored_unit(cfg, kf, k):
    """Factor from real weights to the key's stored units (decay windows), else 1."""
    kind = cfg[CFG_KIND]
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        return 2.0 ** ((kf[k, KF_LAST_T] - kf[k, KF_T0]) / cfg[CFG_HALF_LIFE])
    return 1.0


@jit_noalloc(forceinline=True)
def _find_atom(ab, off, n, b):
    """Position (in ``off .. off + n``) of the first atom whose bucket is >= ``b``."""
    lo = off
    hi = off + n
    while lo < hi:
        mid = (lo + hi) >> 1
        if ab[mid] < b:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit_noalloc(forceinline=True)
def _remove_atom(ab, ap, an, acp, acn, ki, k, j):
    off = ki[k, KI_A_OFF]
    end = off + ki[k, KI_A_LEN] - 1
    for q in range(j, end):
        ab[q] = ab[q + 1]
        ap[q] = ap[q + 1]
        an[q] = an[q + 1]
        acp[q] = acp[q + 1]
        acn[q] = acn[q + 1]
    ki[k, KI_A_LEN] -= 1


@jit_noalloc(forceinline=True)
def room_needed(ki, cfg, k):
    """``(atoms, ring)`` free slots a learned event of key ``k`` may need in the arenas."""
    atoms = 0
    if ki[k, KI_A_LEN] == ki[k, KI_A_CAP]:
        cap = ki[k, KI_A_CAP]
        atoms = FIRST_CAP if cap == 0 else 2 * cap
    ring = 0
    kind = cfg[CFG_KIND]
    if (kind == KIND_COUNT) | (kind == KIND_TIME):
        cap = ki[k, KI_R_CAP]
        full = ki[k, KI_R_COUNT] == cap
        if full and (kind == KIND_TIME or cap < cfg[CFG_WINDOW_N]):
            ring = FIRST_CAP if cap == 0 else 2 * cap
            if kind == KIND_COUNT and ring > cfg[CFG_WINDOW_N]:
                ring = np.int64(cfg[CFG_WINDOW_N])
    return atoms, ring


@jit_noalloc(forceinline=True)
def _expire_next(cfg, kf, ki, ab, ap, an, acp, acn, rb, rw, ry, rt, k, clock):
    """Remove the key's oldest event if it leaves before an event at ``clock`` (as
    ``histogram.window_expire_next_inplace``); returns its bucket or -1."""
    count = ki[k, KI_R_COUNT]
    if count == 0:
        return -1
    kind = cfg[CFG_KIND]
    roff = ki[k, KI_R_OFF]
    cap = ki[k, KI_R_CAP]
    head = ki[k, KI_R_HEAD]
    if kind == KIND_COUNT:
        if count < cfg[CFG_WINDOW_N]:
            return -1
    elif kind == KIND_TIME:
        if not (clock - rt[roff + head] >= cfg[CFG_SECONDS]):
            return -1
    else:
        return -1
    b = rb[roff + head]
    w = rw[roff + head]
    off = ki[k, KI_A_OFF]
    n = ki[k, KI_A_LEN]
    j = _find_atom(ab, off, n, b)
    if ry[roff + head] > 0.5:
        acp[j] -= 1
        if acp[j] == 0:
            ap[j] = 0.0
        else:
            v = ap[j] - w
            ap[j] = 0.0 if v < 0.0 else v
        ki[k, KI_N_POS] -= 1
        if ki[k, KI_N_POS] == 0:
            kf[k, KF_T_POS] = 0.0
        else:
            v = kf[k, KF_T_POS] - w
            kf[k, KF_T_POS] = 0.0 if v < 0.0 else v
    else:
        acn[j] -= 1
        if acn[j] == 0:
            an[j] = 0.0
        else:
            v = an[j] - w
            an[j] = 0.0 if v < 0.0 else v
        ki[k, KI_N_NEG] -= 1
        if ki[k, KI_N_NEG] == 0:
            kf[k, KF_T_NEG] = 0.0
        else:
            v = kf[k, KF_T_NEG] - w
            kf[k, KF_T_NEG] = 0.0 if v < 0.0 else v
    if acp[j] == 0 and acn[j] == 0:
        _remove_atom(ab, ap, an, acp, acn, ki, k, j)
    ki[k, KI_R_HEAD] = head + 1 if head + 1 < cap else 0
    ki[k, KI_R_COUNT] = count - 1
    return b


@jit_noalloc(forceinline=True)
def _grow_atoms(ab, ap, an, acp, acn, ki, arena, k):
    """Move the key's atoms to a segment twice as large at the end of the arena (room checked)."""
    cap = ki[k, KI_A_CAP]
    new_cap = FIRST_CAP if cap == 0 else 2 * cap
    new_off = arena[AR_ATOMS]
    off = ki[k, KI_A_OFF]
    for q in range(ki[k, KI_A_LEN]):
        ab[new_off + q] = ab[off + q]
        ap[new_off + q] = ap[off + q]
        an[new_off + q] = an[off + q]
        acp[new_off + q] = acp[off + q]
        acn[new_off + q] = acn[off + q]
    ki[k, KI_A_OFF] = new_off
    ki[k, KI_A_CAP] = new_cap
    arena[AR_ATOMS] = new_off + new_cap


@jit_noalloc(forceinline=True)
def _grow_ring(rb, rw, ry, rt, ki, arena, k, new_cap):
    """Move the key's ring, oldest first, to a segment of ``new_cap`` slots at the end of the arena."""
    cap = ki[k, KI_R_CAP]
    off = ki[k, KI_R_OFF]
    head = ki[k, KI_R_HEAD]
    new_off = arena[AR_RING]
    for q in range(ki[k, KI_R_COUNT]):
        src = head + q
        if src >= cap:
            src -= cap
        rb[new_off + q] = rb[off + src]
        rw[new_off + q] = rw[off + src]
        ry[new_off + q] = ry[off + src]
        rt[new_off + q] = rt[off + src]
    ki[k, KI_R_OFF] = new_off
    ki[k, KI_R_CAP] = new_cap
    ki[k, KI_R_HEAD] = 0
    arena[AR_RING] = new_off + new_cap


@jit_noalloc(forceinline=True)
def _add(cfg, kf, ki, ab, ap, an, acp, acn, rb, rw, ry, rt, arena, k, b, y, w, clock):
    """Add one event to key ``k``'s row (as ``histogram.window_add_inplace``)."""
    kind = cfg[CFG_KIND]
    ws = w
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        half_life = cfg[CFG_HALF_LIFE]
        exponent = (clock - kf[k, KF_T0]) / half_life
        if exponent > DECAY_RENORM_EXPONENT:
            m = np.floor(exponent)
            t0 = kf[k, KF_T0] + m * half_life
            rest = (clock - t0) / half_life
            if m <= DECAY_FORGET_EXPONENT and -1.0 <= rest <= DECAY_RENORM_EXPONENT:
                factor = 2.0 ** (-m)
            else:
                factor = 2.0 ** (-exponent) if exponent <= DECAY_FORGET_EXPONENT else 0.0
                t0 = clock
                rest = 0.0
            off = ki[k, KI_A_OFF]
            for q in range(off, off + ki[k, KI_A_LEN]):
                ap[q] *= factor
                an[q] *= factor
            kf[k, KF_T_POS] *= factor
            kf[k, KF_T_NEG] *= factor
            kf[k, KF_T0] = t0
            kf[k, KF_N_RENORM] += 1.0
            exponent = rest
        elif exponent < -DECAY_RENORM_EXPONENT:
            kf[k, KF_T0] = clock
            exponent = 0.0
        ws = w * 2.0**exponent
    off = ki[k, KI_A_OFF]
    n = ki[k, KI_A_LEN]
    j = _find_atom(ab, off, n, b)
    if j == off + n or ab[j] != b:  # a new atom: shift the ones above it
        if n == ki[k, KI_A_CAP]:
            _grow_atoms(ab, ap, an, acp, acn, ki, arena, k)
            j = j - off + ki[k, KI_A_OFF]
            off = ki[k, KI_A_OFF]
        q = off + n
        while q > j:
            ab[q] = ab[q - 1]
            ap[q] = ap[q - 1]
            an[q] = an[q - 1]
            acp[q] = acp[q - 1]
            acn[q] = acn[q - 1]
            q -= 1
        ab[j] = b
        ap[j] = 0.0
        an[j] = 0.0
        acp[j] = 0
        acn[j] = 0
        ki[k, KI_A_LEN] = n + 1
    if y > 0.5:
        ap[j] += ws
        acp[j] += 1
        kf[k, KF_T_POS] += ws
        ki[k, KI_N_POS] += 1
    else:
        an[j] += ws
        acn[j] += 1
        kf[k, KF_T_NEG] += ws
        ki[k, KI_N_NEG] += 1
    if (kind == KIND_COUNT) | (kind == KIND_TIME):
        cap = ki[k, KI_R_CAP]
        count = ki[k, KI_R_COUNT]
        if count == cap:
            new_cap = FIRST_CAP if cap == 0 else 2 * cap
            if kind == KIND_COUNT and new_cap > cfg[CFG_WINDOW_N]:
                new_cap = np.int64(cfg[CFG_WINDOW_N])
            _grow_ring(rb, rw, ry, rt, ki, arena, k, new_cap)
            cap = new_cap
        roff = ki[k, KI_R_OFF]
        tail = ki[k, KI_R_HEAD] + count
        if tail >= cap:
            tail -= cap
        rw[roff + tail] = ws
        ry[roff + tail] = y
        rt[roff + tail] = clock
        rb[roff + tail] = b
        ki[k, KI_R_COUNT] = count + 1
    kf[k, KF_LAST_T] = clock
    kf[k, KF_N_LEARNED] += 1.0


@jit_noalloc(forceinline=True)
def learn_one(cfg, kf, ki, ab, ap, an, acp, acn, rb, rw, ry, rt, arena, k, b, y, w, t, p_global, stamp):
    """Learn one event of key ``k`` (expiry, then the event); room must have been checked."""
    kind = cfg[CFG_KIND]
    clock = t if (kind == KIND_TIME) | (kind == KIND_DECAY_TIME) else kf[k, KF_N_LEARNED]
    while _expire_next(cfg, kf, ki, ab, ap, an, acp, acn, rb, rw, ry, rt, k, clock) >= 0:
        pass
    _add(cfg, kf, ki, ab, ap, an, acp, acn, rb, rw, ry, rt, arena, k, b, y, w, clock)
    kf[k, KF_STAMP] = stamp
    kf[k, KF_OBS] += w * y
    kf[k, KF_EXP] += w * p_global


# ------------------------------------------------------------------------------------ the map
@jit_noalloc(forceinline=True)
def _push(sF, sL, sP, sN, sp, f, last, p, n):
    """Push a knot ``[f, last]`` of weights ``(p, n)`` on the PAV stack and pool; returns the new size."""
    if sp > 0 and _violates(sP[sp - 1], sN[sp - 1], p, n):
        sL[sp - 1] = last
        sP[sp - 1] = sP[sp - 1] + p
        sN[sp - 1] = sN[sp - 1] + n
    else:
        sF[sp] = f
        sL[sp] = last
        sP[sp] = p
        sN[sp] = n
        sp += 1
    while sp >= 2 and _violates(sP[sp - 2], sN[sp - 2], sP[sp - 1], sN[sp - 1]):
        sL[sp - 2] = sL[sp - 1]
        sP[sp - 2] = sP[sp - 2] + sP[sp - 1]
        sN[sp - 2] = sN[sp - 2] + sN[sp - 1]
        sp -= 1
    return sp


@jit_noalloc(forceinline=True)
def _push_prior_runs(prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, sp, x, y, u):
    """Push the prior's runs over buckets ``x .. y`` (no key atom there): one knot per run of
    buckets inside one global block, its pseudo-counts summed (prefix sums ``prior``)."""
    B = seg.shape[0]
    while x <= y:
        g = seg[x]
        if g < 0:  # a gap of the global map: no prior weight
            x = nz_next[x]
            continue
        hi = blk_last[g] if blk_last[g] < y else y
        lo = nz_next[x]
        top = nz_prev[hi]
        if lo <= top:
            p = prior[top + 1] - prior[lo]
            n = prior[B + 1 + top + 1] - prior[B + 1 + lo]
            if p + n > 0.0:
                sp = _push(sF, sL, sP, sN, sp, lo, top, p * u, n * u)
        x = hi + 1
    return sp


@jit_noalloc(forceinline=True)
def sweep(cfg, ki, ab, ap, an, prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, k, u):
    """PAV over key ``k``'s atoms plus the prior (stored units ``u``); the blocks in the stack
    ``sF, sL, sP, sN`` (first and last knot, weights); returns their number."""
    B = seg.shape[0]
    off = ki[k, KI_A_OFF]
    n = ki[k, KI_A_LEN]
    sp = 0
    if cfg[CFG_PRIOR_ON] < 0.5:
        for q in range(off, off + n):
            p = ap[q]
            m = an[q]
            if p + m > 0.0:
                sp = _push(sF, sL, sP, sN, sp, ab[q], ab[q], p, m)
        return sp
    x = 0
    for q in range(off, off + n):
        b = ab[q]
        if x < b:
            sp = _push_prior_runs(prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, sp, x, b - 1, u)
        p = ap[q] + (prior[b + 1] - prior[b]) * u
        m = an[q] + (prior[B + 1 + b + 1] - prior[B + 1 + b]) * u
        if p + m > 0.0:
            sp = _push(sF, sL, sP, sN, sp, b, b, p, m)
        x = b + 1
    if x < B:
        sp = _push_prior_runs(prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, sp, x, B - 1, u)
    return sp


@jit_noalloc(forceinline=True)
def _rate(sP, sN, i):
    return sP[i] / (sP[i] + sN[i])


@jit_noalloc(forceinline=True)
def _fitted_at(cen, sF, sL, sP, sN, sp, j):
    """Fitted value of bucket ``j`` (between the first and the last knot): its block's rate, or in
    a gap the interpolation by bucket centre between the neighbouring knots, clipped to them."""
    lo = 0
    hi = sp - 1
    while lo < hi:  # the last block whose first knot is <= j
        mid = (lo + hi + 1) >> 1
        if sF[mid] <= j:
            lo = mid
        else:
            hi = mid - 1
    if j <= sL[lo]:
        return _rate(sP, sN, lo)
    v_left = _rate(sP, sN, lo)
    v_right = _rate(sP, sN, lo + 1)
    c_left = cen[sL[lo]]
    c_right = cen[sF[lo + 1]]
    v = v_left + (v_right - v_left) * ((cen[j] - c_left) / (c_right - c_left))
    v = v_left if v_left > v else v
    return v_right if v_right < v else v


@jit_noalloc(forceinline=True)
def _raw_proba(cfg, cen, sF, sL, sP, sN, sp, b, s):
    """The map's value at score ``s`` in bucket ``b`` (``ipav.pav_predict_one``)."""
    first = sF[0]
    last = sL[sp - 1]
    if cfg[CFG_LINEAR] < 0.5:
        return _fitted_at(cen, sF, sL, sP, sN, sp, last if b > last else (first if b < first else b))
    j = b if s >= cen[b] else b - 1
    if j < first:
        return _fitted_at(cen, sF, sL, sP, sN, sp, first)
    if j >= last:
        return _fitted_at(cen, sF, sL, sP, sN, sp, last)
    lo = _fitted_at(cen, sF, sL, sP, sN, sp, j)
    hi = _fitted_at(cen, sF, sL, sP, sN, sp, j + 1)
    p = lo + (hi - lo) * ((s - cen[j]) / (cen[j + 1] - cen[j]))
    p = lo if lo > p else p
    return hi if hi < p else p


@jit_noalloc(forceinline=True)
def _extremes(sP, sN, sp, c):
    """``(lo, hi)``: the rates of the two end runs of the PAV augmented by one pseudo-positive
    below and one pseudo-negative above, each of weight ``c`` (``ipav.pav_refresh_extremes_inplace``)."""
    lp = sP[0] + c
    ln = sN[0]
    nxt = 1
    while nxt < sp and _violates(lp, ln, sP[nxt], sN[nxt]):
        lp = lp + sP[nxt]
        ln = ln + sN[nxt]
        nxt += 1
    if nxt == sp:
        v = lp / (lp + (ln + c))
        return v, v
    left_last = nxt - 1
    rp = sP[sp - 1]
    rn = sN[sp - 1] + c
    prv = sp - 2
    while prv != left_last and _violates(sP[prv], sN[prv], rp, rn):
        rp = sP[prv] + rp
        rn = sN[prv] + rn
        prv -= 1
    lo = lp / (lp + ln)
    hi = rp / (rp + rn)
    if prv == left_last and _violates(lp, ln, rp, rn):
        v = (lp + rp) / ((lp + rp) + (ln + rn))
        return v, v
    return lo, hi


@jit_noalloc(forceinline=True)
def _fallback(cfg, s):
    """Probability and LLR before any weight: the score for probability inputs, else 0.5."""
    p = 0.5
    if cfg[CFG_PROB_INPUTS] > 0.5:
        p = 1.0 if s > 1.0 else (0.0 if s < 0.0 else s)
    if cfg[CFG_FINITE] > 0.5:
        p = _NOT_SURE_LOW if p < _NOT_SURE_LOW else p
        p = _ONE_BELOW if p > _ONE_BELOW else p
    return p, 0.0


@jit_noalloc(forceinline=True)
def predict_key(cfg, cen, kf, ki, ab, ap, an, prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, k, b, s):
    """``(proba, llr)`` of score ``s`` (bucket ``b``) by key ``k``'s pooled map."""
    u = stored_unit(cfg, kf, k)
    sp = sweep(cfg, ki, ab, ap, an, prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, k, u)
    if sp == 0:
        return _fallback(cfg, s)
    p = _raw_proba(cfg, cen, sF, sL, sP, sN, sp, b, s)
    c = (cfg[CFG_PSEUDO] + cfg[CFG_PRIOR_PSEUDO]) * u
    lo, hi = _extremes(sP, sN, sp, c)
    q = lo if lo > p else p
    q = hi if hi < q else q
    out = q if cfg[CFG_FINITE] > 0.5 else p
    t_pos = kf[k, KF_T_POS] + cfg[CFG_PRIOR_T_POS] * u
    t_neg = kf[k, KF_T_NEG] + cfg[CFG_PRIOR_T_NEG] * u
    odds_inv = (t_neg + c) / (t_pos + c)
    r = (q * odds_inv) / (1.0 - q)
    if 0.0 < r < math.inf:
        return out, math.log(r)
    q = _ONE_BELOW if q > _ONE_BELOW else q
    return out, (math.log(q) - math.log1p(-q)) + math.log(odds_inv)


@jit_noalloc
def run_ops(
    cfg, cen, kf, ki, ab, ap, an, acp, acn, rb, rw, ry, rt, arena, prior, seg, blk_last, nz_next, nz_prev,
    sF, sL, sP, sN, slots, buckets, scores, labels, weights, times, ops, g_p, g_llr, stamps,
    out_p, out_llr, start, stop, atoms_cap, ring_cap,
):
    """Run operations ``start .. stop - 1`` (``ops``: 1 learn, 2 predict, 3 predict then learn) on the
    keys' rows; ``slots[i]`` the key's slot (-1: the key has no row: the global map's ``g_p``,
    ``g_llr`` answer). Returns :data:`DONE`, or the position of the first event whose learning
    needs more room in the arenas (nothing of that event done)."""
    for i in range(start, stop):
        k = slots[i]
        op = ops[i]
        if op & 1:
            atoms, ring = room_needed(ki, cfg, k)
            if arena[AR_ATOMS] + atoms > atoms_cap or arena[AR_RING] + ring > ring_cap:
                return i
        if op & 2:
            if k < 0 or (ki[k, KI_A_LEN] == 0 and kf[k, KF_N_LEARNED] == 0.0):
                out_p[i] = g_p[i]
                out_llr[i] = g_llr[i]
            else:
                p, llr = predict_key(
                    cfg, cen, kf, ki, ab, ap, an, prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, k,
                    buckets[i], scores[i],
                )
                out_p[i] = p
                out_llr[i] = llr
        if op & 1:
            learn_one(
                cfg, kf, ki, ab, ap, an, acp, acn, rb, rw, ry, rt, arena, k, buckets[i], labels[i], weights[i],
                times[i], g_p[i], stamps[i],
            )
    return DONE


@jit_noalloc
def predict_many(
    cfg, cen, kf, ki, ab, ap, an, prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, slots, buckets, scores,
    g_p, g_llr, out_p, out_llr,
):
    """``(proba, llr)`` of each (key slot, score) with the current state (no learning)."""
    for i in range(slots.shape[0]):
        k = slots[i]
        if k < 0 or (ki[k, KI_A_LEN] == 0 and kf[k, KF_N_LEARNED] == 0.0):
            out_p[i] = g_p[i]
            out_llr[i] = g_llr[i]
        else:
            p, llr = predict_key(
                cfg, cen, kf, ki, ab, ap, an, prior, seg, blk_last, nz_next, nz_prev, sF, sL, sP, sN, k,
                buckets[i], scores[i],
            )
            out_p[i] = p
            out_llr[i] = llr


@jit_noalloc
def between_key_moments(kf, n_keys, out):
    """``out = [K, sum O, sum E, sum E^2, sum O^2 / E]`` over the keys with ``E > 0``: the sums of
    the DerSimonian–Laird moment estimate of the between-key variance."""
    for j in range(5):
        out[j] = 0.0
    for k in range(n_keys):
        e = kf[k, KF_EXP]
        if e > 0.0:
            o = kf[k, KF_OBS]
            out[0] += 1.0
            out[1] += o
            out[2] += e
            out[3] += e * e
            out[4] += o * o / e
