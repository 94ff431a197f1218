"""The per-event passes of the metrics for unit weights (numba).

minCllr (:func:`streamcal.metrics.min_cllr`): the positives' scores, PAV over the distinct sorted
scores, and each event's cost from its PAV block; around them, in :mod:`streamcal.metrics._array`,
the sorting of the scores and each block's costs, computed with numpy. A window's default
metrics (:mod:`streamcal.metrics._window`): one pass for the squared errors, the clipped
probabilities and the bins' sums, the calibration loss's terms, and the Cllr costs. Every per-event
value is the float numpy computes for it, and the callers sum them with numpy, in event order, so
that each metric equals its function bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc

#: steps of the forward scan from a table cell before a binary search takes over
_SCAN_STEPS = 8
#: log(2), numpy's ``NPY_LOGE2`` rounded to a float as ``math.log(2.0)`` gives it
_LOG2 = math.log(2.0)


@jit_noalloc
def positives(s, y, out):
    """The scores of the positives (``y``: 0.0 / 1.0), in event order, in ``out``; returns their number."""
    k = 0
    for i in range(s.shape[0]):
        if y[i] == 1.0:
            out[k] = s[i]
            k += 1
    return k


@jit_noalloc
def group_sorted(ordered, ordered_pos, distinct, count, pos):
    """The distinct values of the sorted scores ``ordered``: each one (its first occurrence), its
    number of events and of positives (``ordered_pos``: the positives' scores, sorted) in
    ``distinct``, ``count`` and ``pos``. Returns the number of distinct values."""
    g = -1
    j = 0
    m = ordered_pos.shape[0]
    previous = 0.0
    for i in range(ordered.shape[0]):
        v = ordered[i]
        if g < 0 or v != previous:
            g += 1
            distinct[g] = v
            count[g] = 0.0
            pos[g] = 0.0
            previous = v
            while j < m and ordered_pos[j] == v:
                pos[g] += 1.0
                j += 1
        count[g] += 1.0
    return g + 1


@jit_noalloc(forceinline=True)
def _cell(v, lo, hi, scale, cells):
    """The table cell of ``v``: non-decreasing in ``v`` (so a cell's table entry never passes the
    block of any value that falls in it)."""
    if not v > lo:
        return 0
    if v >= hi:
        return cells - 1
    return min(int((v - lo) * scale), cells - 1)


@jit_noalloc
def costs_in_event_order(s, y, lowest, cost_pos, cost_neg, table, out):
    """Each event's cost, by class, in event order: the positives' (``cost_pos`` of their block)
    in ``out[:k]``, the negatives' (``cost_neg``) in ``out[k:]``, where ``k`` is the number of
    positives (``y``: 0.0 / 1.0). Returns ``k``.

    An event's block is the last of the blocks' lowest scores ``lowest`` (sorted, ``lowest[0]``
    at or below every score) at or below its score. It is found from a table over the range of
    ``lowest[1:]`` (``table``, a work array of any size), whose cell for the score gives a block
    at or before it, then a short forward scan, or a binary search where the scan is long.
    """
    nb = lowest.shape[0]
    cells = table.shape[0]
    lo = lowest[min(1, nb - 1)]
    hi = lowest[nb - 1]
    scale = 0.0
    if hi > lo and hi - lo < 1e300:  # finite and not overflowing: else every score in cell 0
        scale = (cells - 1) / (hi - lo)
        if not scale < 1e300:  # a subnormal range
            scale = 0.0
    # table[c]: the last block whose lowest score falls in a cell before c (0 if none)
    b = 0
    for c in range(cells):
        while b + 1 < nb and _cell(lowest[b + 1], lo, hi, scale, cells) < c:
            b += 1
        table[c] = b
    k = 0
    for i in range(y.shape[0]):
        if y[i] == 1.0:
            k += 1
    p = 0
    q = k
    for i in range(s.shape[0]):
        v = s[i]
        b = table[_cell(v, lo, hi, scale, cells)]
        steps = 0
        while b + 1 < nb and lowest[b + 1] <= v:
            b += 1
            steps += 1
            if steps == _SCAN_STEPS:  # a crowded cell: binary search, lowest[b] <= v < lowest[high]
                high = nb
                while high - b > 1:
                    mid = (b + high) >> 1
                    if lowest[mid] <= v:
                        b = mid
                    else:
                        high = mid
                break
        if y[i] == 1.0:
            out[p] = cost_pos[b]
            p += 1
        else:
            out[q] = cost_neg[b]
            q += 1
    return k


@jit_noalloc
def window_terms(y, p, llr, inner_edges, low, high, squared, clipped, ids, sum_y, sum_p, count):
    """One pass over a window of unit-weight events for the binned and squared metrics.

    Per event ``i``: ``squared[i] = (p - y)**2``; ``clipped[i]``, ``p`` clipped into
    ``[low, high]`` (as ``numpy.clip``); ``ids[i]``, its equal-width bin (the number of
    ``inner_edges`` at or below ``p``); and per bin, in event order, the sums of the labels and of
    the probabilities and the number of events (``sum_y``, ``sum_p``, ``count``, as
    ``numpy.bincount`` accumulates them). Returns -1, or the position of the first event whose
    label is not 0.0 / 1.0, whose probability is outside [0, 1] or NaN, or whose LLR is NaN (the
    arrays are then left part written).
    """
    for b in range(count.shape[0]):
        sum_y[b] = 0.0
        sum_p[b] = 0.0
        count[b] = 0.0
    m = inner_edges.shape[0]
    for i in range(y.shape[0]):
        yi = y[i]
        pi = p[i]
        if not ((yi == 0.0 or yi == 1.0) and pi >= 0.0 and pi <= 1.0 and llr[i] == llr[i]):
            return i
        d = pi - yi
        squared[i] = d * d
        c = pi if pi > low else low
        clipped[i] = c if c < high else high
        b = 0
        for e in range(m):
            if pi >= inner_edges[e]:
                b += 1
        ids[i] = b
        sum_y[b] += yi
        sum_p[b] += pi
        count[b] += 1.0
    return -1


@jit_noalloc
def binned_squared_terms(p, ids, value, out):
    """``out[i] = (p[i] - value[ids[i]])**2``: each event's squared distance to its bin's value."""
    for i in range(p.shape[0]):
        d = p[i] - value[ids[i]]
        out[i] = d * d


@jit_noalloc(forceinline=True)
def _group_end(ordered, ordered_pos, i, j):
    """The ends of the run of scores equal to ``ordered[i]`` in ``ordered`` (from ``i``) and in
    ``ordered_pos`` (from ``j``), as :func:`group_sorted` groups them."""
    v = ordered[i]
    e = i + 1
    while e < ordered.shape[0] and ordered[e] == v:
        e += 1
    c = j
    while c < ordered_pos.shape[0] and ordered_pos[c] == v:
        c += 1
    return e, c


@jit_noalloc
def pav_blocks_of_sorted(ordered, ordered_pos, lowest, value, weight, block_pos, block_neg):
    """PAV over the distinct values of the sorted scores ``ordered``, each at its fraction of
    positives (``ordered_pos``: the positives' scores, sorted) and weighted by its number of
    events; returns the number of blocks ``nb``. Block ``b`` has its lowest score, fitted value,
    weight and numbers of positives and negatives in ``lowest[b]``, ``value[b]``, ``weight[b]``,
    ``block_pos[b]`` and ``block_neg[b]`` (arrays of at least that many entries).

    The same blocks and the same floats as :func:`group_sorted` followed by
    :func:`streamcal._kernels.pav.pav_blocks_sorted` over ``pos / count`` with weights
    ``count``: the same operations in the same order, with each distinct value's counts read
    from the sorted scores as PAV reaches it (a run absorbed into a block, or the next block's
    first).
    """
    n = ordered.shape[0]
    k = -1
    # NumPy zeros, not ``0``: a first typing of the loop's ``_group_end`` call would see the literal
    # alone and compile it once more for it (``_config``)
    i = np.int64(0)
    j = np.int64(0)
    ahead_e = -1  # the ends of the next distinct value's run, when already read
    ahead_c = -1
    while i < n:
        if ahead_e >= 0:
            e, c = ahead_e, ahead_c
            ahead_e = -1
        else:
            e, c = _group_end(ordered, ordered_pos, i, j)
        wt = float(e - i)
        ps = float(c - j)
        v = ps / wt
        swy = wt * v
        lo = ordered[i]
        bp = ps
        bn = wt - ps
        i, j = e, c
        while i < n:
            e, c = _group_end(ordered, ordered_pos, i, j)
            we = float(e - i)
            pe = float(c - j)
            ye = pe / we
            if not ye <= v:
                ahead_e, ahead_c = e, c
                break
            wt += we
            swy += we * ye
            if wt > 0.0:
                v = swy / wt
            bp += pe
            bn += we - pe
            i, j = e, c
        while k >= 0 and value[k] >= v:
            bw = weight[k]
            total = bw + wt
            if total > 0.0:
                v = (value[k] * bw + swy) / total
            else:
                v = value[k]
            swy = v * total
            wt = total
            bp += block_pos[k]
            bn += block_neg[k]
            lo = lowest[k]
            k -= 1
        k += 1
        lowest[k] = lo
        value[k] = v
        weight[k] = wt
        block_pos[k] = bp
        block_neg[k] = bn
    return k + 1


@jit_noalloc(forceinline=True)
def _logaddexp_zero(b):
    """``numpy.logaddexp(0.0, b)``: numpy's formula, on the same ``exp`` and ``log1p``."""
    if b == 0.0:
        return 0.0 + _LOG2
    d = 0.0 - b
    if d > 0.0:
        return 0.0 + math.log1p(math.exp(-d))
    if d <= 0.0:
        return b + math.log1p(math.exp(d))
    return d


@jit_noalloc
def cllr_costs_in_event_order(y, x, out):
    """Each event's Cllr cost in bits, by class, in event order: ``log2(1 + e^-x)`` of the
    positives (``y``: 0.0 / 1.0) in ``out[:k]``, ``log2(1 + e^x)`` of the negatives in
    ``out[k:]``, each as ``numpy.logaddexp(0.0, ∓x) / log(2)``. Returns ``k``, the number of
    positives."""
    k = 0
    for i in range(y.shape[0]):
        if y[i] == 1.0:
            k += 1
    p = 0
    q = k
    for i in range(y.shape[0]):
        if y[i] == 1.0:
            out[p] = _logaddexp_zero(-x[i]) / _LOG2
            p += 1
        else:
            out[q] = _logaddexp_zero(x[i]) / _LOG2
            q += 1
    return k


#: bits of the radix sort's digit, and its number of buckets (six passes cover 64 bits)
_RADIX_BITS = 11
_RADIX = 1 << _RADIX_BITS
#: the work counts :func:`sort_float_bits` takes
RADIX_COUNTS = 6 * _RADIX


@jit_noalloc
def sort_float_bits(bits, out, tmp, counts):
    """The float64 values whose bits are ``bits`` (as uint64), sorted ascending, into ``out``
    (uint64 bits too); False, with ``out`` unwritten, if one is NaN.

    A least-significant-digit radix sort over six 11-bit digits of the order-preserving key
    (the sign bit flipped for positives, every bit for negatives), skipping a digit that all
    values share; ``tmp``: work of the same length, ``counts``: ``6 * 2048`` int64 of work.
    It gives the values ``numpy.sort`` gives, with ``-0.0`` before ``0.0`` (equal floats, in an
    order numpy's sort leaves unspecified).
    """
    n = bits.shape[0]
    sign = np.uint64(1) << np.uint64(63)
    exp_mask = np.uint64(0x7FF0000000000000)
    frac_mask = np.uint64(0x000FFFFFFFFFFFFF)
    mask = np.uint64(_RADIX - 1)
    for j in range(counts.shape[0]):
        counts[j] = 0
    for i in range(n):
        b = bits[i]
        if (b & exp_mask) == exp_mask and (b & frac_mask) != np.uint64(0):
            return False
        key = ~b if (b & sign) != np.uint64(0) else b | sign
        out[i] = key
        for d in range(6):
            counts[d * _RADIX + np.int64((key >> np.uint64(d * _RADIX_BITS)) & mask)] += 1
    src = out
    dst = tmp
    for d in range(6):
        base = d * _RADIX
        shift = np.uint64(d * _RADIX_BITS)
        if n and counts[base + np.int64((src[0] >> shift) & mask)] == n:
            continue  # every value has this digit: the pass would not move one
        total = 0
        for j in range(_RADIX):
            c = counts[base + j]
            counts[base + j] = total
            total += c
        for i in range(n):
            key = src[i]
            j = base + np.int64((key >> shift) & mask)
            dst[counts[j]] = key
            counts[j] += 1
        src, dst = dst, src
    for i in range(n):
        key = src[i]
        out[i] = key ^ sign if (key & sign) != np.uint64(0) else ~key
    return True
