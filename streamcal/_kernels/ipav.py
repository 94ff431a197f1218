"""Incremental PAV over a bucket histogram: the block stack, per-bucket fitted values (numba).

Definitions (shared with the reference ``naive_pav_histogram`` in the tests)
---------------------------------------------------------------------------
A *knot* is a bucket with positive total weight ``pos[b] + neg[b] > 0``; empty buckets are not
data. PAV runs the classic left-to-right stack sweep over the knots: push each knot as a block
``(first, last, P, N)``; while the block below the top has rate ``P/(P+N)`` greater than or
equal to the top's, pool them into ``(below.first, top.last, below.P + top.P, below.N + top.N)``.

The result is stored per bucket:

- ``owner[b]``: first knot of the block whose range ``[first, next block's first)`` holds ``b``;
  -1 for the buckets before the first knot.
- at a block's first knot ``f``: ``bend[f]`` (its last knot), ``bpos[f]``, ``bneg[f]`` (its sums),
  ``bprev[f]`` / ``bnext[f]`` (first knot of the neighbouring blocks, -1 at the ends).
- ``fit[b]``: the block's rate on ``[first, last]``; in the empty buckets between two blocks,
  the linear interpolation (by bucket centre) between the last knot of the left block and the
  first knot of the right one, clipped to those two values; flat before the first and after the
  last block. So linear interpolation over all bucket centres is linear interpolation between
  the knots, and a prediction is one binary search plus one or two reads.

Exactness. When bucket ``k`` changes, the sweep is *resumed* instead of rerun: the blocks left
of the block holding ``k`` are exactly the sweep's stack at that point (the sweep never pooled
across their right boundary), so the kernel starts there with those blocks as the stack and
sweeps knot by knot. Right of the changed block it keeps sweeping the old blocks' knots and
stops at the end of the first old block that the sweep rebuilt without pooling it into the
stack below: from there on the sweep would repeat, operation for operation, what it did
before. The pooled sums are therefore formed by the same floating-point additions, in the
same order, as a from-scratch sweep: the result equals it bit for bit, whatever the weights
(not only in exact arithmetic, where PAV's pooling-order theorem gives it for free).
Cost: the knots of the touched block and of the right-hand blocks swept, usually a few.

Finite LLR (BOSARIS rule, as ``streamcal.isotonic.pav_llr(finite=True)``): one pseudo-positive
below all scores and one pseudo-negative above, each of weight ``c`` in real units. Adding
them only raises the first block and lowers the last one, so the augmented PAV pools a run of
blocks at each end and leaves the middle alone; its fitted value at any score is
``clip(fit, lo, hi)`` with ``lo``/``hi`` the rates of the two pooled end runs. The kernel keeps
``lo``, ``hi`` and the prior log-odds ``log(T1 + c) - log(T0 + c)`` up to date after each
learned event; the LLR is ``logit(clip(p, lo, hi)) - prior log-odds``: finite, and monotone in
the score (it never reorders scores).

Layout of the PAV state (see :mod:`streamcal._kernels.histogram` for the histogram itself):
``pf`` float64 = header (PF_*) + fit, bpos, bneg, centres, stack P, stack N (B each);
``pi`` int64 = header (PI_*) + owner, bend, bprev, bnext, stack first, stack last (B each).
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit
from streamcal._kernels.histogram import (
    SF_HEADER,
    SF_T_NEG,
    SF_T_POS,
    SI_B,
    stored_unit,
    window_add_inplace,
    window_clock,
    window_expire_next_inplace,
)

PF_LO = 0  # augmented (finite-LLR) fitted value of the lowest pooled run
PF_HI = 1  # augmented fitted value of the highest pooled run
PF_PRIOR_LOGODDS = 2  # log(T1 + c) - log(T0 + c)
PF_PSEUDO = 3  # c, pseudo-count in real units
PF_LINEAR = 4  # 1.0: linear interpolation between bucket centres; 0.0: step
PF_IDENTITY = 5  # 1.0: before any weight, predict the score itself (probability inputs); else 0.5
PF_HEADER = 8

PI_B = 0
PI_HEAD = 1  # first knot of the first block, -1 when the histogram is empty
PI_TAIL = 2  # first knot of the last block, -1 when empty
PI_HEADER = 4

# offsets of the sections, in units of B
_FIT, _BPOS, _BNEG, _CENTRES, _SPOS, _SNEG = 0, 1, 2, 3, 4, 5
_OWNER, _BEND, _BPREV, _BNEXT, _SFIRST, _SLAST = 0, 1, 2, 3, 4, 5


def pav_state_sizes(n_buckets: int) -> tuple[int, int]:
    """Lengths of the ``pf`` and ``pi`` arrays for ``n_buckets`` buckets."""
    return PF_HEADER + 6 * n_buckets, PI_HEADER + 6 * n_buckets


def empty_pav_state(centres: np.ndarray, pseudo_count: float, linear: bool, identity: bool):
    """Fresh ``(pf, pi)`` for an empty histogram over buckets with the given ``centres``."""
    B = centres.shape[0]
    nf, ni = pav_state_sizes(B)
    pf = np.zeros(nf, dtype=np.float64)
    pi = np.zeros(ni, dtype=np.int64)
    pf[PF_HEADER + _CENTRES * B : PF_HEADER + (_CENTRES + 1) * B] = centres
    pf[PF_PSEUDO] = pseudo_count
    pf[PF_LINEAR] = 1.0 if linear else 0.0
    pf[PF_IDENTITY] = 1.0 if identity else 0.0
    pf[PF_LO] = 0.5
    pf[PF_HI] = 0.5
    pi[PI_B] = B
    pi[PI_HEAD] = -1
    pi[PI_TAIL] = -1
    pi[PI_HEADER + _OWNER * B : PI_HEADER + (_OWNER + 1) * B] = -1
    return pf, pi


@jit
def _rate(p, n):
    return p / (p + n)


@jit
def _gap_value(v_left, v_right, c_left, c_right, c):
    """Value at centre ``c`` between a knot (c_left, v_left) and a knot (c_right, v_right)."""
    v = v_left + (v_right - v_left) * ((c - c_left) / (c_right - c_left))
    return min(max(v, v_left), v_right)


@jit
def pav_bucket_changed_inplace(pos, neg, pf, pi, k):
    """Repair the blocks and fitted values after the weight of bucket ``k`` changed."""
    B = pi[PI_B]
    fit = pf[PF_HEADER + _FIT * B : PF_HEADER + (_FIT + 1) * B]
    bpos = pf[PF_HEADER + _BPOS * B : PF_HEADER + (_BPOS + 1) * B]
    bneg = pf[PF_HEADER + _BNEG * B : PF_HEADER + (_BNEG + 1) * B]
    centres = pf[PF_HEADER + _CENTRES * B : PF_HEADER + (_CENTRES + 1) * B]
    spos = pf[PF_HEADER + _SPOS * B : PF_HEADER + (_SPOS + 1) * B]
    sneg = pf[PF_HEADER + _SNEG * B : PF_HEADER + (_SNEG + 1) * B]
    owner = pi[PI_HEADER + _OWNER * B : PI_HEADER + (_OWNER + 1) * B]
    bend = pi[PI_HEADER + _BEND * B : PI_HEADER + (_BEND + 1) * B]
    bprev = pi[PI_HEADER + _BPREV * B : PI_HEADER + (_BPREV + 1) * B]
    bnext = pi[PI_HEADER + _BNEXT * B : PI_HEADER + (_BNEXT + 1) * B]
    sfirst = pi[PI_HEADER + _SFIRST * B : PI_HEADER + (_SFIRST + 1) * B]
    slast = pi[PI_HEADER + _SLAST * B : PI_HEADER + (_SLAST + 1) * B]

    # 1. where the sweep resumes: the start of the block holding k, or k itself in a gap
    o = owner[k] if k >= 0 else -1
    if k < 0:  # full rebuild
        start = 0
        chain = -1
        region_end = B - 1
    elif o == -1:
        start = k
        chain = -1
        region_end = k
    elif k <= bend[o]:
        start = o
        chain = bprev[o]
        region_end = bend[o]
    else:
        start = k
        chain = o
        region_end = k

    # 2. sweep knot by knot; ``chain`` is the top of the untouched stack of blocks on the left
    sp = 0
    stopped = False
    j = start
    while j < B:
        pj = pos[j]
        nj = neg[j]
        if pj + nj > 0.0:
            sfirst[sp] = j
            slast[sp] = j
            spos[sp] = pj
            sneg[sp] = nj
            sp += 1
            while True:
                if sp >= 2:
                    if _rate(spos[sp - 2], sneg[sp - 2]) >= _rate(spos[sp - 1], sneg[sp - 1]):
                        slast[sp - 2] = slast[sp - 1]
                        spos[sp - 2] = spos[sp - 2] + spos[sp - 1]
                        sneg[sp - 2] = sneg[sp - 2] + sneg[sp - 1]
                        sp -= 1
                        continue
                elif chain != -1 and _rate(bpos[chain], bneg[chain]) >= _rate(spos[0], sneg[0]):
                    spos[0] = bpos[chain] + spos[0]
                    sneg[0] = bneg[chain] + sneg[0]
                    sfirst[0] = chain
                    chain = bprev[chain]
                    continue
                break
            if j > region_end:
                old_first = owner[j]
                if j == bend[old_first] and sfirst[sp - 1] == old_first:
                    stopped = True
                    break
        j += 1

    # 3. write the new blocks back
    if chain != -1:
        bnext[chain] = sfirst[0] if sp > 0 else -1
    else:
        pi[PI_HEAD] = sfirst[0] if sp > 0 else -1
    for i in range(sp):
        f = sfirst[i]
        bprev[f] = sfirst[i - 1] if i > 0 else chain
        if i < sp - 1:
            bnext[f] = sfirst[i + 1]
            bend[f] = slast[i]
            bpos[f] = spos[i]
            bneg[f] = sneg[i]
        elif not stopped:
            bnext[f] = -1
            bend[f] = slast[i]
            bpos[f] = spos[i]
            bneg[f] = sneg[i]
    if not stopped:
        pi[PI_TAIL] = sfirst[sp - 1] if sp > 0 else chain

    # 4. owners and fitted values from the end of the chain to the last rewritten block
    if chain != -1:
        left_knot = bend[chain]
        left_value = _rate(bpos[chain], bneg[chain])
        gap_from = left_knot + 1
    else:
        left_knot = -1
        left_value = 0.0
        gap_from = 0
    n_rewrite = sp - 1 if stopped else sp
    for i in range(sp):
        f = sfirst[i]
        v = _rate(spos[i], sneg[i])
        # the gap before this block, owned by the block on its left
        for g in range(gap_from, f):
            owner[g] = chain if i == 0 else sfirst[i - 1]
            if left_knot == -1:
                fit[g] = v
            else:
                fit[g] = _gap_value(left_value, v, centres[left_knot], centres[f], centres[g])
        if i == n_rewrite:
            break  # the stopping block and everything after it are unchanged
        for g in range(f, slast[i] + 1):
            owner[g] = f
            fit[g] = v
        left_knot = slast[i]
        left_value = v
        gap_from = slast[i] + 1
    if not stopped:
        last_owner = sfirst[sp - 1] if sp > 0 else chain
        for g in range(gap_from, B):
            owner[g] = last_owner
            fit[g] = left_value


@jit
def pav_refresh_extremes_inplace(sf, pf, pi):
    """Recompute the finite-LLR clip values and the prior log-odds (BOSARIS pseudo-counts)."""
    B = pi[PI_B]
    bpos = pf[PF_HEADER + _BPOS * B : PF_HEADER + (_BPOS + 1) * B]
    bneg = pf[PF_HEADER + _BNEG * B : PF_HEADER + (_BNEG + 1) * B]
    bprev = pi[PI_HEADER + _BPREV * B : PI_HEADER + (_BPREV + 1) * B]
    bnext = pi[PI_HEADER + _BNEXT * B : PI_HEADER + (_BNEXT + 1) * B]
    c = pf[PF_PSEUDO] * stored_unit(sf)
    pf[PF_PRIOR_LOGODDS] = math.log(sf[SF_T_POS] + c) - math.log(sf[SF_T_NEG] + c)
    head = pi[PI_HEAD]
    if head == -1:
        pf[PF_LO] = 0.5
        pf[PF_HI] = 0.5
        return
    # left run: the first block plus the pseudo-positive, pooled rightwards while violating
    lp = bpos[head] + c
    ln = bneg[head]
    left_last = head
    nxt = bnext[head]
    while nxt != -1 and _rate(lp, ln) >= _rate(bpos[nxt], bneg[nxt]):
        lp = lp + bpos[nxt]
        ln = ln + bneg[nxt]
        left_last = nxt
        nxt = bnext[nxt]
    if nxt == -1:  # everything pooled with the pseudo-positive; add the pseudo-negative
        v = _rate(lp, ln + c)
        pf[PF_LO] = v
        pf[PF_HI] = v
        return
    # right run: the last block plus the pseudo-negative, pooled leftwards while violating
    tail = pi[PI_TAIL]
    rp = bpos[tail]
    rn = bneg[tail] + c
    prv = bprev[tail]
    while prv != left_last and _rate(bpos[prv], bneg[prv]) >= _rate(rp, rn):
        rp = bpos[prv] + rp
        rn = bneg[prv] + rn
        prv = bprev[prv]
    lo = _rate(lp, ln)
    hi = _rate(rp, rn)
    if prv == left_last and lo >= hi:  # the two runs meet and violate: one block
        v = _rate(lp + rp, ln + rn)
        lo = v
        hi = v
    pf[PF_LO] = lo
    pf[PF_HI] = hi


@jit
def pav_predict_one(pf, pi, b, s):
    """Calibrated probability of score ``s`` in bucket ``b``."""
    B = pi[PI_B]
    if pi[PI_HEAD] == -1:
        if pf[PF_IDENTITY] > 0.5:
            return min(max(s, 0.0), 1.0)
        return 0.5
    fit = pf[PF_HEADER + _FIT * B : PF_HEADER + (_FIT + 1) * B]
    if pf[PF_LINEAR] < 0.5:
        return fit[b]
    centres = pf[PF_HEADER + _CENTRES * B : PF_HEADER + (_CENTRES + 1) * B]
    j = b if s >= centres[b] else b - 1
    if j < 0:
        return fit[0]
    if j >= B - 1:
        return fit[B - 1]
    lo = fit[j]
    hi = fit[j + 1]
    p = lo + (hi - lo) * ((s - centres[j]) / (centres[j + 1] - centres[j]))
    return min(max(p, lo), hi)


@jit
def pav_llr_from_proba(pf, pi, p):
    """Finite PAV-LLR for a score whose (raw) calibrated probability is ``p``."""
    if pi[PI_HEAD] == -1:
        return 0.0
    q = min(max(p, pf[PF_LO]), pf[PF_HI])
    return (math.log(q) - math.log1p(-q)) - pf[PF_PRIOR_LOGODDS]


@jit
def pav_learn_one_inplace(sf, si, pf, pi, b, y, w, t):
    """Learn one event: expire what leaves the window, add the event, repair the blocks."""
    B = si[SI_B]
    pos = sf[SF_HEADER : SF_HEADER + B]
    neg = sf[SF_HEADER + B : SF_HEADER + 2 * B]
    clock = window_clock(sf, t)
    while True:
        gone = window_expire_next_inplace(sf, si, clock)
        if gone < 0:
            break
        pav_bucket_changed_inplace(pos, neg, pf, pi, gone)
    if window_add_inplace(sf, si, b, y, w, clock):
        pav_bucket_changed_inplace(pos, neg, pf, pi, -1)  # renormalised: rebuild everything
    else:
        pav_bucket_changed_inplace(pos, neg, pf, pi, b)
    pav_refresh_extremes_inplace(sf, pf, pi)


@jit
def pav_rebuild_inplace(sf, si, pf, pi):
    """Rebuild the blocks from scratch from the current histogram (a full sweep)."""
    B = si[SI_B]
    pav_bucket_changed_inplace(sf[SF_HEADER : SF_HEADER + B], sf[SF_HEADER + B : SF_HEADER + 2 * B], pf, pi, -1)
    pav_refresh_extremes_inplace(sf, pf, pi)


@jit
def pav_process_inplace(sf, si, pf, pi, buckets, scores, labels, weights, times, ops, out_p, out_llr):
    """Run an ordered sequence of operations; ``ops[i]``: 1 learn, 2 predict, 3 predict then learn.

    Predictions use the state before the event's own label; outputs of learn-only positions
    are left untouched.
    """
    for i in range(buckets.shape[0]):
        op = ops[i]
        if op & 2:
            p = pav_predict_one(pf, pi, buckets[i], scores[i])
            out_p[i] = p
            out_llr[i] = pav_llr_from_proba(pf, pi, p)
        if op & 1:
            pav_learn_one_inplace(sf, si, pf, pi, buckets[i], labels[i], weights[i], times[i])


@jit
def pav_predict_many(pf, pi, buckets, scores, out_p, out_llr):
    """Probability and finite LLR for each score with the current state."""
    for i in range(buckets.shape[0]):
        p = pav_predict_one(pf, pi, buckets[i], scores[i])
        out_p[i] = p
        out_llr[i] = pav_llr_from_proba(pf, pi, p)
