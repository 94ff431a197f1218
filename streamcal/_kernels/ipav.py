"""Incremental PAV over a bucket histogram: the block stack, per-bucket fitted values (numba).

Definitions (shared with the reference ``naive_pav_histogram`` in the tests)
---------------------------------------------------------------------------
A *knot* is a bucket with positive total weight ``pos[b] + neg[b] > 0``; empty buckets are not
data. PAV runs the classic left-to-right stack sweep over the knots: push each knot as a block
``(first, last, P, N)``; while the block below the top has a rate ``P/(P+N)`` greater than or
equal to the top's — tested as ``P1 (P2 + N2) >= P2 (P1 + N1)``, without a division — pool
them into ``(below.first, top.last, below.P + top.P, below.N + top.N)``.

The result is stored per bucket:

- ``owner[b]``: first knot of the block whose range ``[first, next block's first)`` holds ``b``,
  for ``b`` between the first and the last knot (the header keeps both, ``PI_HEAD``/``PI_LAST``).
- at a block's first knot ``f``: ``bend[f]`` (its last knot), ``bpos[f]``, ``bneg[f]`` (its sums),
  ``bprev[f]`` / ``bnext[f]`` (first knot of the neighbouring blocks, -1 at the ends).
- ``fit[b]``: the block's rate on ``[first, last]``; in the empty buckets between two blocks,
  the linear interpolation (by bucket centre) between the last knot of the left block and the
  first knot of the right one, clipped to those two values. Outside the knots' span the fit is
  flat (predictions clamp; those buckets are not stored). So linear interpolation over all
  bucket centres is linear interpolation between the knots, and a prediction is one binary
  search plus one or two reads.

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
``lo``, ``hi`` and the inverse prior odds ``r = (T0 + c) / (T1 + c)`` up to date after each
learned event; the LLR is ``log(q r / (1 - q))`` with ``q = clip(p, lo, hi)``, i.e.
``logit(q) - logit(prior)`` in one logarithm: finite, and monotone in the score (it never
reorders scores).

Kernels index the flat state arrays by offsets rather than slicing views: a view costs two
atomic reference-count updates, which dominated the per-event cost.

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
    stored_unit,
    window_add_inplace,
    window_clock,
    window_expire_next_inplace,
)

PF_LO = 0  # augmented (finite-LLR) fitted value of the lowest pooled run
PF_HI = 1  # augmented fitted value of the highest pooled run
PF_PRIOR_ODDS_INV = 2  # (T0 + c) / (T1 + c), the inverse prior odds with pseudo-counts
PF_PSEUDO = 3  # c, pseudo-count in real units
PF_LINEAR = 4  # 1.0: linear interpolation between bucket centres; 0.0: step
PF_IDENTITY = 5  # 1.0: before any weight, predict the score itself (probability inputs); else 0.5
PF_HEADER = 8

PI_B = 0
PI_HEAD = 1  # first knot of the first block, -1 when the histogram is empty
PI_TAIL = 2  # first knot of the last block, -1 when empty
PI_LAST = 3  # last knot of the last block, -1 when empty
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
    pi[PI_LAST] = -1
    pi[PI_HEADER + _OWNER * B : PI_HEADER + (_OWNER + 1) * B] = -1
    return pf, pi


@jit
def _rate(p, n):
    return p / (p + n)


@jit
def _violates(p_left, n_left, p_right, n_right):
    """``rate(left) >= rate(right)``, by cross-multiplication (no division on the hot path)."""
    return p_left * (p_right + n_right) >= p_right * (p_left + n_left)


@jit
def _gap_value(v_left, v_right, c_left, c_right, c):
    """Value at centre ``c`` between a knot (c_left, v_left) and a knot (c_right, v_right)."""
    v = v_left + (v_right - v_left) * ((c - c_left) / (c_right - c_left))
    return min(max(v, v_left), v_right)


@jit
def pav_bucket_changed_inplace(hist, h0, pf, pi, k):
    """Repair the blocks and fitted values after the weight of bucket ``k`` changed (-1: all).

    The histogram is ``pos = hist[h0 : h0 + B]`` and ``neg = hist[h0 + B : h0 + 2B]``.
    """
    B = pi[PI_B]
    POS = h0
    NEG = h0 + B
    FIT = PF_HEADER + _FIT * B
    BPOS = PF_HEADER + _BPOS * B
    BNEG = PF_HEADER + _BNEG * B
    CEN = PF_HEADER + _CENTRES * B
    SPOS = PF_HEADER + _SPOS * B
    SNEG = PF_HEADER + _SNEG * B
    OWNER = PI_HEADER + _OWNER * B
    BEND = PI_HEADER + _BEND * B
    BPREV = PI_HEADER + _BPREV * B
    BNEXT = PI_HEADER + _BNEXT * B
    SFIRST = PI_HEADER + _SFIRST * B
    SLAST = PI_HEADER + _SLAST * B
    head = pi[PI_HEAD]

    # 1. where the sweep resumes: the start of the block holding k, or k itself in a gap
    if k < 0:  # full rebuild
        start, chain, region_end = 0, -1, B - 1
    elif head == -1 or k < head:  # before the first knot
        start, chain, region_end = k, -1, k
    elif k > pi[PI_LAST]:  # after the last knot
        start, chain, region_end = k, pi[PI_TAIL], k
    else:
        o = pi[OWNER + k]
        if k <= pi[BEND + o]:
            start, chain, region_end = o, pi[BPREV + o], pi[BEND + o]
        else:
            start, chain, region_end = k, o, k

    # 2. sweep knot by knot; ``chain`` is the top of the untouched stack of blocks on the left.
    #    The top of the new stack lives in registers (tf, tl, tp, tn); the ``sp`` entries below
    #    it are in the scratch arrays.
    sp = 0
    has_top = False
    tf = 0
    tl = 0
    tp = 0.0
    tn = 0.0
    stopped = False
    j = start
    while j < B:
        pj = hist[POS + j]
        nj = hist[NEG + j]
        if pj + nj > 0.0:
            if has_top and _violates(tp, tn, pj, nj):  # pool the new knot into the top
                tl = j
                tp = tp + pj
                tn = tn + nj
            else:
                if has_top:
                    pi[SFIRST + sp] = tf
                    pi[SLAST + sp] = tl
                    pf[SPOS + sp] = tp
                    pf[SNEG + sp] = tn
                    sp += 1
                tf = j
                tl = j
                tp = pj
                tn = nj
                has_top = True
            while True:
                if sp >= 1:
                    p1 = pf[SPOS + sp - 1]
                    n1 = pf[SNEG + sp - 1]
                    if _violates(p1, n1, tp, tn):
                        tf = pi[SFIRST + sp - 1]
                        tp = p1 + tp
                        tn = n1 + tn
                        sp -= 1
                        continue
                elif chain != -1:
                    p1 = pf[BPOS + chain]
                    n1 = pf[BNEG + chain]
                    if _violates(p1, n1, tp, tn):
                        tf = chain
                        tp = p1 + tp
                        tn = n1 + tn
                        chain = pi[BPREV + chain]
                        continue
                break
            if j > region_end:
                old_first = pi[OWNER + j]
                if j == pi[BEND + old_first] and tf == old_first:
                    stopped = True
                    break
        j += 1
    if has_top:
        pi[SFIRST + sp] = tf
        pi[SLAST + sp] = tl
        pf[SPOS + sp] = tp
        pf[SNEG + sp] = tn
        sp += 1

    # 3. write the new blocks back
    if chain != -1:
        pi[BNEXT + chain] = pi[SFIRST] if sp > 0 else -1
    else:
        pi[PI_HEAD] = pi[SFIRST] if sp > 0 else -1
    for i in range(sp):
        f = pi[SFIRST + i]
        pi[BPREV + f] = pi[SFIRST + i - 1] if i > 0 else chain
        if i < sp - 1 or not stopped:
            pi[BNEXT + f] = pi[SFIRST + i + 1] if i < sp - 1 else -1
            pi[BEND + f] = pi[SLAST + i]
            pf[BPOS + f] = pf[SPOS + i]
            pf[BNEG + f] = pf[SNEG + i]
    if not stopped:
        if sp > 0:
            pi[PI_TAIL] = pi[SFIRST + sp - 1]
            pi[PI_LAST] = pi[SLAST + sp - 1]
        else:
            pi[PI_TAIL] = chain
            pi[PI_LAST] = pi[BEND + chain] if chain != -1 else -1

    # 4. owners and fitted values from the end of the chain to the last rewritten block; the
    #    buckets before the first knot and after the last one are never read (predictions
    #    clamp to the knots' span)
    if chain != -1:
        left_knot = pi[BEND + chain]
        left_value = pf[FIT + left_knot]  # the chain block's rate, already stored
    else:
        left_knot = -1
        left_value = 0.0
    n_rewrite = sp - 1 if stopped else sp
    for i in range(sp):
        f = pi[SFIRST + i]
        # the stopping block is unchanged: its stored rate saves a division
        v = pf[FIT + f] if i == n_rewrite else _rate(pf[SPOS + i], pf[SNEG + i])
        if left_knot != -1:  # the gap before this block, owned by the block on its left
            lo_owner = chain if i == 0 else pi[SFIRST + i - 1]
            c_left = pf[CEN + left_knot]
            c_right = pf[CEN + f]
            for g in range(left_knot + 1, f):
                pi[OWNER + g] = lo_owner
                pf[FIT + g] = _gap_value(left_value, v, c_left, c_right, pf[CEN + g])
        if i == n_rewrite:
            break  # the stopping block and everything after it are unchanged
        last = pi[SLAST + i]
        for g in range(f, last + 1):
            pi[OWNER + g] = f
            pf[FIT + g] = v
        left_knot = last
        left_value = v


@jit
def pav_refresh_extremes_inplace(sf, pf, pi):
    """Recompute the finite-LLR clip values and the inverse prior odds (BOSARIS pseudo-counts)."""
    B = pi[PI_B]
    BPOS = PF_HEADER + _BPOS * B
    BNEG = PF_HEADER + _BNEG * B
    BPREV = PI_HEADER + _BPREV * B
    BNEXT = PI_HEADER + _BNEXT * B
    c = pf[PF_PSEUDO] * stored_unit(sf)
    pf[PF_PRIOR_ODDS_INV] = (sf[SF_T_NEG] + c) / (sf[SF_T_POS] + c)
    head = pi[PI_HEAD]
    if head == -1:
        pf[PF_LO] = 0.5
        pf[PF_HI] = 0.5
        return
    # left run: the first block plus the pseudo-positive, pooled rightwards while violating
    lp = pf[BPOS + head] + c
    ln = pf[BNEG + head]
    left_last = head
    nxt = pi[BNEXT + head]
    while nxt != -1 and _violates(lp, ln, pf[BPOS + nxt], pf[BNEG + nxt]):
        lp = lp + pf[BPOS + nxt]
        ln = ln + pf[BNEG + nxt]
        left_last = nxt
        nxt = pi[BNEXT + nxt]
    if nxt == -1:  # everything pooled with the pseudo-positive; add the pseudo-negative
        v = _rate(lp, ln + c)
        pf[PF_LO] = v
        pf[PF_HI] = v
        return
    # right run: the last block plus the pseudo-negative, pooled leftwards while violating
    tail = pi[PI_TAIL]
    rp = pf[BPOS + tail]
    rn = pf[BNEG + tail] + c
    prv = pi[BPREV + tail]
    while prv != left_last and _violates(pf[BPOS + prv], pf[BNEG + prv], rp, rn):
        rp = pf[BPOS + prv] + rp
        rn = pf[BNEG + prv] + rn
        prv = pi[BPREV + prv]
    lo = _rate(lp, ln)
    hi = _rate(rp, rn)
    if prv == left_last and _violates(lp, ln, rp, rn):  # the two runs meet and violate: one block
        v = _rate(lp + rp, ln + rn)
        lo = v
        hi = v
    pf[PF_LO] = lo
    pf[PF_HI] = hi


@jit
def pav_predict_one(pf, pi, b, s):
    """Calibrated probability of score ``s`` in bucket ``b``.

    Outside the span of the knots (first to last non-empty bucket) the fit is flat.
    """
    first = pi[PI_HEAD]
    if first == -1:
        if pf[PF_IDENTITY] > 0.5:
            return min(max(s, 0.0), 1.0)
        return 0.5
    B = pi[PI_B]
    last = pi[PI_LAST]
    FIT = PF_HEADER + _FIT * B
    if pf[PF_LINEAR] < 0.5:
        return pf[FIT + min(max(b, first), last)]
    CEN = PF_HEADER + _CENTRES * B
    j = b if s >= pf[CEN + b] else b - 1
    if j < first:
        return pf[FIT + first]
    if j >= last:
        return pf[FIT + last]
    lo = pf[FIT + j]
    hi = pf[FIT + j + 1]
    p = lo + (hi - lo) * ((s - pf[CEN + j]) / (pf[CEN + j + 1] - pf[CEN + j]))
    return min(max(p, lo), hi)


@jit
def pav_llr_from_proba(pf, pi, p):
    """Finite PAV-LLR for a score whose (raw) calibrated probability is ``p``."""
    if pi[PI_HEAD] == -1:
        return 0.0
    q = min(max(p, pf[PF_LO]), pf[PF_HI])
    return math.log((q * pf[PF_PRIOR_ODDS_INV]) / (1.0 - q))


@jit
def pav_learn_one_inplace(sf, si, pf, pi, b, y, w, t):
    """Learn one event: expire what leaves the window, add the event, repair the blocks."""
    clock = window_clock(sf, t)
    while True:
        gone = window_expire_next_inplace(sf, si, clock)
        if gone < 0:
            break
        pav_bucket_changed_inplace(sf, SF_HEADER, pf, pi, gone)
    if window_add_inplace(sf, si, b, y, w, clock):
        pav_bucket_changed_inplace(sf, SF_HEADER, pf, pi, -1)  # renormalised: rebuild everything
    else:
        pav_bucket_changed_inplace(sf, SF_HEADER, pf, pi, b)
    pav_refresh_extremes_inplace(sf, pf, pi)


@jit
def pav_rebuild_inplace(sf, si, pf, pi):
    """Rebuild the blocks from scratch from the current histogram (a full sweep)."""
    pav_bucket_changed_inplace(sf, SF_HEADER, pf, pi, -1)
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
