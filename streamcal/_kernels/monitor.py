"""Wealth recursions of the anytime-valid calibration monitors (numba).

Both kernels run over a batch of labelled events in order, update the monitor's wealth in
place, and stop after the first event at which the wealth reaches ``threshold`` (``1 / alpha``)
when ``watch`` is set, so that the caller records the alarm and, if asked, restarts. They
return the number of events consumed. No validation: probabilities in [0, 1], labels 0.0 / 1.0,
contiguous float64 arrays.
"""

from __future__ import annotations

import math

from streamcal._kernels._config import jit_noalloc


@jit_noalloc
def isotonic_wealth_inplace(p, y, q, lam, wealth, threshold, watch, evalues):
    """Betting against ``P(y = 1 | p) = p`` with the alternative ``q`` (predictable).

    Component ``k`` of ``wealth`` bets the fraction ``lam[k]`` on ``q``: its factor is
    ``1 + lam[k] * (LR - 1)`` with ``LR = q / p`` (``y = 1``) or ``(1 - q) / (1 - p)``
    (``y = 0``), the likelihood ratio of the mixture ``(1 - lam) p + lam q`` against ``p``. An
    outcome the null cannot produce (``y = 1`` at ``p = 0``, ``y = 0`` at ``p = 1``) makes every
    component infinite. ``evalues[i]`` receives the mean of the components after event ``i``.
    """
    n = p.shape[0]
    m = lam.shape[0]
    for i in range(n):
        pi = p[i]
        if y[i] == 1.0:
            num = q[i]
            den = pi
        else:
            num = 1.0 - q[i]
            den = 1.0 - pi
        total = 0.0
        if den == 0.0:
            for k in range(m):
                wealth[k] = math.inf
            total = math.inf
        else:
            lr = num / den
            for k in range(m):
                wealth[k] = wealth[k] * (1.0 + lam[k] * (lr - 1.0))
                total += wealth[k]
            total = total / m
        evalues[i] = total
        if watch and total >= threshold:
            return i + 1
    return n


@jit_noalloc
def mean_bias_wealth_inplace(
    z, grid, scales, stakes, cap, log_term, sums, up, down, bounds, threshold, zero, watch, evalues
):
    """Hedged betting capital (Waudby-Smith & Ramdas, 2024) for each candidate mean of ``z``.

    ``z`` are the events' ``y - p`` in [-1, 1]; ``grid`` the candidate means, increasing. One
    predictable stake per event serves every candidate: the predictable plug-in
    ``lam = sqrt(log_term / (var * t * log(1 + t)))``, ``var`` the running variance with one
    pseudo-observation of variance 1, times each of ``scales`` and capped at ``cap`` (written
    to the scratch array ``stakes``, as long as ``scales``). ``up[k, g]`` holds
    ``prod(1 + lam_k (z - grid[g]))`` and ``down[k, g]`` ``prod(1 - lam_k (z - grid[g]))``;
    their means over ``k`` are the capitals, the first decreasing
    with ``g`` and the second increasing. ``sums`` holds ``[count, sum of z, sum of squared
    prediction errors]``. ``bounds = [lo, hi]``: the candidates ``<= lo`` have been excluded
    from below (half the up capital reached ``threshold``), those ``>= hi`` from above; only
    those between are updated. ``evalues[i]`` receives the two capitals' mean at candidate
    ``zero`` after event ``i``; with ``watch`` the kernel stops after the event that excludes it.
    """
    n = z.shape[0]
    n_scales = scales.shape[0]
    count = sums[0]
    s1 = sums[1]
    sq = sums[2]
    lo = int(bounds[0])
    hi = int(bounds[1])
    done = n
    for i in range(n):
        zi = z[i]
        t = count + 1.0
        var = (1.0 + sq) / t
        lam = math.sqrt(log_term / (var * t * math.log(1.0 + t)))
        for k in range(n_scales):
            stakes[k] = min(lam * scales[k], cap)
        for k in range(n_scales):
            stake = stakes[k]
            for g in range(lo + 1, hi):
                d = stake * (zi - grid[g])
                up[k, g] = up[k, g] * (1.0 + d)
                down[k, g] = down[k, g] * (1.0 - d)
        while lo + 1 < hi and _column_mean(up, lo + 1) * 0.5 >= threshold:
            lo += 1
        while hi - 1 > lo and _column_mean(down, hi - 1) * 0.5 >= threshold:
            hi -= 1
        err = zi - s1 / t
        sq += err * err
        s1 += zi
        count = t
        evalues[i] = 0.5 * (_column_mean(up, zero) + _column_mean(down, zero))
        if watch and (lo >= zero or hi <= zero):
            done = i + 1
            break
    sums[0] = count
    sums[1] = s1
    sums[2] = sq
    bounds[0] = lo
    bounds[1] = hi
    return done


@jit_noalloc
def _column_mean(a, g):
    total = 0.0
    for k in range(a.shape[0]):
        total += a[k, g]
    return total / a.shape[0]
