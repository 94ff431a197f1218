"""Venn–Abers what-if fits over the incremental PAV block stack (numba).

For a test score in bucket ``b``, the inductive Venn–Abers pair ``(p0, p1)`` is the isotonic
fit at ``b`` of the window's events plus the test event with label 0, then with label 1
(Vovk & Petej, "Venn–Abers predictors", 2014; Vovk, Petej & Fedorova, "Large-scale
probabilistic predictors with and without guarantees of validity", 2015). The window's PAV
fit is the block stack of :mod:`streamcal._kernels.ipav`; each what-if reads it without
changing it.

Locality. Adding weight at bucket ``b`` never splits an old block that does not hold ``b``:
every prefix of a PAV block has a rate >= the block's, and weight added outside the block
leaves those rates as they were. So PAV of the new histogram is PAV over the atoms [old
blocks left of ``b``'s block] + [the buckets of ``b``'s block, the test event added at ``b``]
+ [old blocks right of it]. The blocks left of ``b``'s block are exactly the stack of a
left-to-right sweep at that point, so the kernel sweeps the local buckets with that stack
below them, popping an old block (``bprev``) only when the sweep pools into it, then pushes
the old blocks to the right (``bnext``) until one of them does not pool: from there on the
sweep would push increasing blocks that never pool. Cost: the buckets of ``b``'s block plus
the blocks pooled; the block stack is read, never written (the sweep's pooled sums live in a
scratch array ``st`` of ``2 B`` floats, which every sweep writes before reading).

Weights. The histogram and the blocks hold stored units (``histogram.stored_unit``); the test
event weighs one real unit as of the last learned event's clock.

Finite rule (``finite`` true): both fits clipped to ``[lo, hi]``, the rates of the window's
two end runs under one pseudo-positive below every score and one pseudo-negative above
(``ipav.PF_LO``/``PF_HI``, which the PAV kernels keep after every learned event): the pair
PAV's finite map would serve for the two what-if fits, as it clips its own fit. It changes the
pair only in the window's two end runs; there the interval narrows, to zero width where both
fits leave them (``p0 = p1`` at the clip value). An empty window has no end runs: the pair is
then the test event's alone, ``(0, 1)``.

Merged probability (``merge``, one of the ``MERGE_*`` codes). ``MERGE_LOG``: ``p1 / (1 - p0 +
p1)``, which minimises the worst-case log loss over the two (Vovk & Petej 2014); ``MERGE_MEAN``:
the midpoint ``(p0 + p1) / 2``; both lie strictly in (0, 1), the test event's own label keeping
``p1 > 0`` and ``p0 < 1``. ``MERGE_CONSISTENT``: ``p0 / (1 - p1 + p0)``, the one ``p`` with
``p = p p1 + (1 - p) p0``: the probability of a positive equals the expected fit of the label that
comes, ``p1`` with probability ``p`` and ``p0`` otherwise. Inside a block that neither what-if
makes pool (``p0 = k / (n + 1)``, ``p1 = (k + 1) / (n + 1)``) it is the block's own rate
``k / n``. It is 0 where ``p0`` is, so the API uses it only under the finite rule (``p0 >= lo >
0``). The pair ``(0, 1)`` of an empty window leaves ``p`` free (every ``p`` solves the equation):
it then serves what PAV serves before any weight, the bucket centre for probability inputs (kept
inside (0, 1) as the score prior's rate), 1/2 otherwise. The LLR is
``logit(p) - logit(prior)`` with the finite prior ``(T1 + c) / (T + 2c)`` kept by the PAV
kernels (``PF_PRIOR_ODDS_INV``), and 0 while the window holds no weight, as PAV's.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.histogram import SF_HEADER, SF_KIND, SF_T_NEG, SF_T_POS, stored_unit
from streamcal._kernels.ipav import (
    _ONE_BELOW,
    _PF_RECORD,
    _PI_RECORD,
    BEND,
    BNEG,
    BNEXT,
    BPOS,
    BPREV,
    CEN,
    OWNER,
    PACK_END,
    PACK_HEADER,
    PACK_O_PF,
    PACK_O_PI,
    PACK_O_SI,
    PF_HEAD,
    PF_HI,
    PF_LO,
    PF_PRIOR_ODDS_INV,
    PF_PROBABILITY_INPUTS,
    PI_B,
    PI_HEAD,
    PI_LAST,
    PI_TAIL,
    PR_HEADER,
    PR_KAPPA,
    PR_MODE,
    PR_RATE,
    _prior_offset,
    pav_bucket_of,
    pav_learn_one_inplace,
)
from streamcal._kernels.prior import prior_rate


@jit_noalloc(forceinline=True)
def _pool_down(pf, pi, st, top, level, left):
    """Pool the stack's top into what lies below while the lower rate is >= the upper one.

    The stack's slots ``0..top`` hold ``(P, N)`` at ``st[2k]``, ``st[2k + 1]``; below
    slot 0 lie the old blocks from ``left`` down (``bprev``). Returns ``(top, level, left,
    pooled)``: ``level`` is the slot of the block holding the test bucket, ``pooled`` whether
    anything pooled.
    """
    pooled = False
    while True:
        p2 = st[2 * top]
        n2 = st[2 * top + 1]
        if top >= 1:
            p1 = st[2 * top - 2]
            n1 = st[2 * top - 1]
            if p1 * (p2 + n2) >= p2 * (p1 + n1):
                st[2 * top - 2] = p1 + p2
                st[2 * top - 1] = n1 + n2
                top -= 1
                level = top if level > top else level
                pooled = True
                continue
            break
        if left == -1:
            break
        p1 = pf[BPOS + _PF_RECORD * left]
        n1 = pf[BNEG + _PF_RECORD * left]
        if p1 * (p2 + n2) >= p2 * (p1 + n1):
            st[0] = p1 + p2
            st[1] = n1 + n2
            left = pi[BPREV + _PI_RECORD * left]
            pooled = True
            continue
        break
    return top, level, left, pooled


@jit_noalloc(forceinline=True)
def va_fit_with(sf, pf, pi, st, b, y, w):
    """The isotonic fit at bucket ``b`` of the row the blocks are fitted to plus the event of
    weight ``w > 0`` and label ``y`` (0.0 or 1.0) at ``b`` (stored units); the block stack is
    left as it was. ``st`` is scratch of ``2 B`` floats for the sweep's stack.

    The row is the histogram, or, while the score prior holds (``kappa > 0``), the histogram
    plus the prior's pseudo-counts (``ipav``'s augmented row); the event then brings its own
    ``kappa w`` pseudo-events at the prior's rate in ``b``, as learning it would."""
    o = _prior_offset(pi[PI_B])
    kappa = pf[o + PR_KAPPA]
    wp = w * y
    wn = w - wp
    if kappa > 0.0:
        r = prior_rate(pf[CEN + _PF_RECORD * b], pf[o + PR_RATE], pf[o + PR_MODE] == 1.0)
        return _fit_on_row(pf, o + PR_HEADER, pf, pi, st, b, y, wp + kappa * w * r, wn + kappa * w * (1.0 - r))
    return _fit_on_row(sf, np.int64(SF_HEADER), pf, pi, st, b, y, wp, wn)


@jit_noalloc(forceinline=True)
def _fit_on_row(row, POS, pf, pi, st, b, y, wp, wn):
    """:func:`va_fit_with` on the row ``row[POS : POS + B]`` (positive weights), ``row[POS + B :
    POS + 2 B]`` (negative ones), ``wp`` and ``wn`` added at ``b`` (one call site per row, so that
    each reads its own array)."""
    B = pi[PI_B]
    NEG = POS + B
    head = pi[PI_HEAD]
    # the local atoms lo..hi, the old blocks below (left) and above (right) them
    if head == -1:
        lo, hi, left, right = b, b, -1, -1
    elif b < head:
        lo, hi, left, right = b, b, -1, head
    elif b > pi[PI_LAST]:
        lo, hi, left, right = b, b, pi[PI_TAIL], -1
    else:
        f = pi[OWNER + _PI_RECORD * b]
        e = pi[BEND + _PI_RECORD * f]
        if b <= e:  # a bucket of the block f..e: its buckets are the atoms
            lo, hi, left, right = f, e, pi[BPREV + _PI_RECORD * f], pi[BNEXT + _PI_RECORD * f]
        else:  # an empty bucket in the gap after the block f..e
            lo, hi, left, right = b, b, f, pi[BNEXT + _PI_RECORD * f]
    top = -1
    level = B  # no slot yet
    for g in range(lo, hi + 1):
        p = row[POS + g]
        n = row[NEG + g]
        if g == b:
            p += wp
            n += wn
        if p + n > 0.0:
            top += 1
            st[2 * top] = p
            st[2 * top + 1] = n
            if g == b:
                level = top
            top, level, left, _ = _pool_down(pf, pi, st, top, level, left)
    while right != -1:
        top += 1
        st[2 * top] = pf[BPOS + _PF_RECORD * right]
        st[2 * top + 1] = pf[BNEG + _PF_RECORD * right]
        top, level, left, pooled = _pool_down(pf, pi, st, top, level, left)
        if not pooled:
            break
        right = pi[BNEXT + _PI_RECORD * right]
    if level == B:  # no weight reached b (w not > 0): never read past the scratch
        return y
    p = st[2 * level]
    return p / (p + st[2 * level + 1])


@jit_noalloc(forceinline=True)
def va_test_weight(sf, kind):
    """One real unit in stored units, as of the last learned event (``histogram.stored_unit``);
    1.0 before any event, when a decay window's clock is not set and the window is empty (any
    positive weight then gives the test event alone)."""
    unit = stored_unit(sf, kind)
    return unit if unit > 0.0 else 1.0


MERGE_MEAN = 0
MERGE_LOG = 1
MERGE_CONSISTENT = 2


@jit_noalloc(forceinline=True)
def _before_any_weight(pf, b):
    """PAV's probability before any weight: the bucket centre for probability inputs, else 1/2."""
    if pf[PF_PROBABILITY_INPUTS] > 0.5:
        return prior_rate(pf[CEN + _PF_RECORD * b], 0.5, np.bool_(True))
    return 0.5


@jit_noalloc(forceinline=True)
def va_merged(sf, pf, b, p0, p1, merge):
    """The merged probability of the pair ``p0 <= p1`` at bucket ``b`` under the rule ``merge``
    (a ``MERGE_*`` code): ``p1 / (1 - p0 + p1)``, ``(p0 + p1) / 2`` or ``p0 / (1 - p1 + p0)``; over
    a window without weight, whose pair is ``(0, 1)``, what PAV serves before any weight under
    every rule."""
    if _no_weight(sf, pf):  # the test event alone: any p in [0, 1] is as valid; not a coin flip
        return _before_any_weight(pf, b)
    if merge == MERGE_LOG:
        return p1 / ((1.0 - p0) + p1)
    if merge == MERGE_CONSISTENT:
        d = (1.0 - p1) + p0
        if d <= 0.0:  # the pair (0, 1) leaves p free: PAV's value before any weight
            return _before_any_weight(pf, b)
        p = p0 / d
        # within [p0, p1] in exact arithmetic; the clamp keeps it there after rounding
        p = p0 if p < p0 else p
        return p1 if p > p1 else p
    return 0.5 * (p0 + p1)


@jit_noalloc(forceinline=True)
def _no_weight(sf, pf):
    """Whether the window holds no weight: no event, or only events of weight 0. The pair is then
    the test event's alone, ``(0, 1)``, whatever pseudo-counts the score prior would add (its
    strength has no evidence to rest on)."""
    return pf[PF_HEAD] == -1.0 or sf[SF_T_POS] + sf[SF_T_NEG] == 0.0


@jit_noalloc(forceinline=True)
def va_llr(sf, pf, p):
    """``logit(p) - logit(prior)`` for ``p`` in (0, 1], the prior the finite one of the window;
    0 while the window holds no weight, as PAV's LLR (no evidence: the score tells nothing yet).
    ``p`` is kept below 1 (it rounds to 1 only when the window's weight dwarfs the test event's by
    2**53): finite."""
    if _no_weight(sf, pf):
        return 0.0
    q = _ONE_BELOW if p > _ONE_BELOW else p
    return (math.log(q) - math.log1p(-q)) + math.log(pf[PF_PRIOR_ODDS_INV])


@jit_noalloc(forceinline=True)
def va_clip_to_end_runs(pf, p):
    """``min(max(p, lo), hi)`` with the window's finite-rule end-run rates (``lo <= hi``)."""
    q = pf[PF_LO] if pf[PF_LO] > p else p
    return pf[PF_HI] if pf[PF_HI] < q else q


@jit_noalloc(forceinline=True)
def va_pair(sf, pf, pi, st, b, unit, finite):
    """``(p0, p1)`` at bucket ``b``: the two what-if fits, under the finite rule if ``finite``."""
    if _no_weight(sf, pf):
        return 0.0, 1.0
    p0 = va_fit_with(sf, pf, pi, st, b, 0.0, unit)
    p1 = va_fit_with(sf, pf, pi, st, b, 1.0, unit)
    if finite:  # a window with weight has end runs (one without returned above)
        return va_clip_to_end_runs(pf, p0), va_clip_to_end_runs(pf, p1)
    return p0, p1


@jit_noalloc(forceinline=True)
def _va_one(sf, pf, pi, st, b, unit, merge, finite, i, out_p0, out_p1, out_p, out_llr):
    p0, p1 = va_pair(sf, pf, pi, st, b, unit, finite)
    p = va_merged(sf, pf, b, p0, p1, merge)
    out_p0[i] = p0
    out_p1[i] = p1
    out_p[i] = p
    out_llr[i] = va_llr(sf, pf, p)


@jit_noalloc
def va_predict_many(sf, pf, pi, st, buckets, merge, finite, out_p0, out_p1, out_p, out_llr):
    """``(p0, p1)``, the merged probability and its LLR for each bucket, with the current state."""
    unit = va_test_weight(sf, sf[SF_KIND])
    for i in range(buckets.shape[0]):
        _va_one(sf, pf, pi, st, buckets[i], unit, merge, finite, i, out_p0, out_p1, out_p, out_llr)


@jit_noalloc
def va_process_inplace(
    sf, si, pf, pi, st, buckets, labels, weights, times, ops, merge, finite, out_p0, out_p1, out_p, out_llr
):
    """Run operations in order; ``ops[i]``: 1 learn, 2 predict, 3 predict then learn.

    Predictions use the state before the event's own label (the outputs of learn-only
    positions are left untouched); learning is :func:`ipav.pav_learn_one_inplace`.
    """
    kind = sf[SF_KIND]  # constant: read once
    for i in range(buckets.shape[0]):
        op = ops[i]
        if op & 2:
            unit = va_test_weight(sf, kind)
            _va_one(sf, pf, pi, st, buckets[i], unit, merge, finite, i, out_p0, out_p1, out_p, out_llr)
        if op & 1:
            pav_learn_one_inplace(sf, si, pf, pi, pf[:0], buckets[i], labels[i], weights[i], times[i], kind)


@jit_noalloc
def va_prequential_inplace(
    sf, si, pf, pi, st, buckets, labels, weights, times, merge, finite, out_p0, out_p1, out_p, out_llr
):
    """Predict each event with the state before its label, then learn it: :func:`va_process_inplace`
    with every operation 3, in a shorter loop."""
    kind = sf[SF_KIND]  # constant: read once
    for i in range(buckets.shape[0]):
        unit = va_test_weight(sf, kind)
        _va_one(sf, pf, pi, st, buckets[i], unit, merge, finite, i, out_p0, out_p1, out_p, out_llr)
        pav_learn_one_inplace(sf, si, pf, pi, pf[:0], buckets[i], labels[i], weights[i], times[i], kind)


@jit_noalloc(nogil=False)  # a per-event call: releasing the GIL would cost more than the kernel saves
def va_predict_packed(packed, st, s, merge, finite):
    """``(p0, p1, merged, llr)`` of one checked score ``s`` on the state packed by
    :func:`ipav.pack_state` (the river face; ``merge`` a ``MERGE_*`` code as a float, ``finite`` 1.0
    or 0.0). The caller holds the
    calibrator's lock, so it ignores the busy mark; it holds the GIL, so no lock-free learning
    runs meanwhile."""
    o_si, o_pf = int(packed[PACK_O_SI]), int(packed[PACK_O_PF])
    o_pi, end = int(packed[PACK_O_PI]), int(packed[PACK_END])
    sf = packed[PACK_HEADER:o_si]
    pf = packed[o_pf:o_pi]
    pi = packed[o_pi:end].view(np.int64)
    b = pav_bucket_of(pf, s)
    unit = va_test_weight(sf, sf[SF_KIND])
    p0, p1 = va_pair(sf, pf, pi, st, b, unit, finite != 0.0)
    p = va_merged(sf, pf, b, p0, p1, int(merge))
    return p0, p1, p, va_llr(sf, pf, p)
