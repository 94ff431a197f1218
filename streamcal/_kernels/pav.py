"""Batch pool-adjacent-violators kernels.

Preconditions (the caller guarantees them; nothing is checked here): ``y`` and ``w`` are
contiguous float64 arrays of equal length ``n``, already in score order, ``w >= 0`` and finite,
``y`` finite. Output arrays are preallocated by the caller with room for ``n`` blocks.
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels._config import jit


@jit
def pav_blocks_sorted(y, w, block_end, block_value, block_weight):
    """Weighted non-decreasing PAV over data already in order; returns the number of blocks.

    Block ``k`` covers positions ``[block_end[k-1], block_end[k])`` (with ``block_end[-1] = 0``),
    has fitted value ``block_value[k]`` and total weight ``block_weight[k]``. Adjacent blocks with
    equal values are pooled too (``>=``), so the blocks are the maximal level sets: the partition
    is unique, whatever the pooling order. A block of zero total weight keeps the plain value of
    its first element (it carries no evidence, but keeps the output monotone).

    Each new block first absorbs the following elements that violate it (a non-increasing run
    costs no stack traffic), then pools backwards with the stack while the stack's top violates.
    """
    n = y.shape[0]
    k = -1
    i = 0
    while i < n:
        wt = w[i]
        swy = wt * y[i]
        v = y[i]
        e = i + 1
        while e < n and y[e] <= v:
            we = w[e]
            wt += we
            swy += we * y[e]
            if wt > 0.0:
                v = swy / wt
            e += 1
        while k >= 0 and block_value[k] >= v:
            bw = block_weight[k]
            total = bw + wt
            if total > 0.0:
                v = (block_value[k] * bw + swy) / total
            else:
                v = block_value[k]
            swy = v * total
            wt = total
            k -= 1
        k += 1
        block_value[k] = v
        block_weight[k] = wt
        block_end[k] = e
        i = e
    return k + 1


@jit
def pav_sorted(y, w, out):
    """Weighted non-decreasing PAV over data already in order, fitted values written to ``out``."""
    n = y.shape[0]
    block_end = np.empty(n, dtype=np.intp)
    block_value = np.empty(n, dtype=np.float64)
    block_weight = np.empty(n, dtype=np.float64)
    nb = pav_blocks_sorted(y, w, block_end, block_value, block_weight)
    start = 0
    for k in range(nb):
        v = block_value[k]
        for i in range(start, block_end[k]):
            out[i] = v
        start = block_end[k]
    return nb


@jit
def group_sorted_scores(sorted_scores, sorted_labels, sorted_weights, unique, pos, neg):
    """Sum class weights over runs of equal scores; returns the number of distinct scores.

    ``sorted_labels`` holds 0.0 / 1.0; ``pos``/``neg`` receive the positive and negative weight of
    each distinct score, ``unique`` the score itself.
    """
    n = sorted_scores.shape[0]
    g = -1
    previous = 0.0
    for i in range(n):
        s = sorted_scores[i]
        if g < 0 or s != previous:
            g += 1
            unique[g] = s
            pos[g] = 0.0
            neg[g] = 0.0
            previous = s
        if sorted_labels[i] > 0.5:
            pos[g] += sorted_weights[i]
        else:
            neg[g] += sorted_weights[i]
    return g + 1
