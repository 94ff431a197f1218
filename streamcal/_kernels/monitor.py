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
def mean_bias_wealth_inplace(z, grid, cap_up, cap_down, sums, up, down, rejected, threshold, zero, watch, evalues):
    """Hedged betting capital (Waudby-Smith & Ramdas, 2024) for each candidate mean of ``z``.

    ``z`` are the events' ``y - p`` in [-1, 1]; ``grid[g]`` the candidate means, in (-1, 1).
    ``sums`` holds ``[count, sum of z, sum of z**2]`` of the events before, from which each
    candidate ``m`` takes its predictable aGRAPA bet ``lam = a / b``, ``a`` the mean of
    ``z - m`` and ``b`` the mean of ``(z - m)**2`` with one pseudo-observation (``z - m = 0``
    in ``a``, ``(z - m)**2 = 1`` in ``b``). ``up[g]`` bets ``min(max(lam, 0), cap_up[g])``
    on a mean above ``m``, ``down[g]`` ``min(max(-lam, 0), cap_down[g])`` on one below; the
    capital is their average. A candidate whose capital reaches ``threshold`` is rejected for
    good (``rejected[g] = 1.0``) and no longer updated. ``evalues[i]`` receives the capital of
    candidate ``zero`` after event ``i`` (its last value once rejected); with ``watch`` the
    kernel stops after the event that rejects it.
    """
    n = z.shape[0]
    m_grid = grid.shape[0]
    count = sums[0]
    s1 = sums[1]
    s2 = sums[2]
    done = n
    for i in range(n):
        zi = z[i]
        inv = 1.0 / (count + 1.0)
        for g in range(m_grid):
            if rejected[g] != 0.0:
                continue
            m = grid[g]
            a = (s1 - count * m) * inv
            b = (1.0 + s2 - 2.0 * m * s1 + count * m * m) * inv
            lam = a / b
            d = zi - m
            bet_up = min(max(lam, 0.0), cap_up[g])
            bet_down = min(max(-lam, 0.0), cap_down[g])
            up[g] = up[g] * (1.0 + bet_up * d)
            down[g] = down[g] * (1.0 - bet_down * d)
            if 0.5 * (up[g] + down[g]) >= threshold:
                rejected[g] = 1.0
        count += 1.0
        s1 += zi
        s2 += zi * zi
        evalues[i] = 0.5 * (up[zero] + down[zero])
        if watch and rejected[zero] != 0.0:
            done = i + 1
            break
    sums[0] = count
    sums[1] = s1
    sums[2] = s2
    return done
