"""The score prior's strength with the buckets with data listed in a scratch
(``prior_strength_listed``, what the PAV refresh runs) equals the kernel that reads the row on
every Newton pass, bit for bit, and both equal a loop written from the kernel's definition: the
row scanned on every pass, ``log q`` and ``log(1 - q)`` each through its own log-sigmoid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamcal._kernels import prior as P


def naive_log_sigmoid(z):
    return -math.log1p(math.exp(-z)) if z >= 0.0 else z - math.log1p(math.exp(z))


def naive_prior_strength(h, B, unit, cen, base_rate, probability_inputs, start):
    """The strength of ``streamcal._kernels.prior`` written as its definition reads: every
    pass over the whole span of the buckets with data."""

    def rate(j):
        return P.prior_rate(cen[j], base_rate, probability_inputs) if probability_inputs else base_rate

    def terms(lo, hi, mean, scale, a, b):
        total, ga, gb = -0.5 * P.RIDGE * (a * a + b * b), -P.RIDGE * a, -P.RIDGE * b
        haa, hab, hbb = P.RIDGE, 0.0, P.RIDGE
        for j in range(lo, hi + 1):
            p, n = h[j] / unit, h[B + j] / unit
            if p + n > 0.0:
                r = rate(j)
                off = math.log(r) - math.log1p(-r)
                x = off if probability_inputs else cen[j]
                v = (x - mean) * scale
                z = off + a + b * v
                log_q = naive_log_sigmoid(z)
                total += p * log_q + n * naive_log_sigmoid(-z)
                q = math.exp(log_q)
                res, wq = p - (p + n) * q, (p + n) * q * (1.0 - q)
                ga, gb = ga + res, gb + res * v
                haa, hab, hbb = haa + wq, hab + wq * v, hbb + wq * v * v
        return total, ga, gb, haa, hab, hbb

    filled = [j for j in range(B) if h[j] / unit + h[B + j] / unit > 0.0]
    lo, hi = (filled[0], filled[-1]) if filled else (B, B - 1)
    n_all = log_s = sx = sxx = 0.0
    for j in range(lo, hi + 1):
        p, n = h[j] / unit, h[B + j] / unit
        if p + n > 0.0:
            r = rate(j)
            x = (math.log(r) - math.log1p(-r)) if probability_inputs else cen[j]
            n_all, sx, sxx = n_all + (p + n), sx + (p + n) * x, sxx + (p + n) * x * x
            if p > 0.0:
                log_s += p * math.log(r)
            if n > 0.0:
                log_s += n * math.log1p(-r)
    if not n_all > 0.0:
        return P.KAPPA_MAX
    mean = sx / n_all
    var = sxx / n_all - mean * mean
    sd = math.sqrt(var) if var > 0.0 else 0.0
    scale = 1.0 / sd if sd > 0.0 else 0.0
    a, b = start
    f, ga, gb, haa, hab, hbb = terms(lo, hi, mean, scale, a, b)
    for _ in range(P.NEWTON_STEPS):
        det = haa * hbb - hab * hab
        if not det > 0.0:
            break
        da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        step, improved = 1.0, False
        while step > 1e-8:
            new = terms(lo, hi, mean, scale, a + step * da, b + step * db)
            if new[0] >= f:
                improved = True
                break
            step *= 0.5
        if not improved:
            break
        a, b = a + step * da, b + step * db
        gain = new[0] - f
        f, ga, gb, haa, hab, hbb = new
        if gain <= 1e-10 * (1.0 + abs(f)):
            break
    start[:] = (a, b)
    k = 2.0 if probability_inputs else 1.0
    log_kappa = log_s - f + 0.5 * k * math.log(n_all + 1.0)
    if log_kappa >= math.log(P.KAPPA_MAX):
        return P.KAPPA_MAX
    kappa = math.exp(log_kappa)
    return kappa if kappa >= P.KAPPA_MIN else 0.0


def a_row(rng, B, filled, slope, unit):
    """Counts in ``filled`` random buckets, labels from a recalibration of the bucket's centre
    of log-odds slope ``slope``, in stored units of ``unit`` per event."""
    cen = 1.0 / (1.0 + np.exp(-np.linspace(-8.0, 4.0, B)))
    h = np.zeros(2 * B)
    for j in rng.choice(B, size=filled, replace=False):
        n = int(rng.integers(1, 6))
        q = 1.0 / (1.0 + np.exp(-slope * math.log(cen[j] / (1.0 - cen[j]))))
        pos = int((rng.uniform(size=n) < q).sum())
        h[j], h[B + j] = pos * unit, (n - pos) * unit
    return h, cen


@pytest.mark.parametrize("probability_inputs", [True, False])
@pytest.mark.parametrize("slope", [1.0, 1.4, 0.5])
@pytest.mark.parametrize("filled", [0, 1, 40, 300])
def test_listed_strength_equals_the_row_and_the_definition_bit_for_bit(probability_inputs, slope, filled):
    rng = np.random.default_rng(filled + int(10 * slope) + probability_inputs)
    B = 400
    for unit in (1.0, 0.37):
        h, cen = a_row(rng, B, filled, slope, unit)
        pos, neg = h[:B].sum() / unit, h[B:].sum() / unit
        base_rate = (pos + 1.0) / (pos + neg + 2.0)
        for warm in (np.zeros(2), np.array([0.3, -0.2])):
            want_start = warm.copy()
            want = naive_prior_strength(h, B, unit, cen, base_rate, probability_inputs, want_start)
            args = (h, 0, B, unit, cen, 0, 1, base_rate, probability_inputs)
            row_start = warm.copy()
            assert P.prior_strength_from(*args, row_start) == want
            # a list with room for every bucket with data, one too short (the row is read), none
            for room in (3 * filled, 3 * filled - 1, 0, 2 * B):
                start = warm.copy()
                listed = np.full(max(room, 0), np.nan)
                got = P.prior_strength_listed(*args, start, listed)
                assert got == want, (room, got, want)
                assert start.tolist() == want_start.tolist() == row_start.tolist()
