"""The score prior's strength from the evidence, and its pseudo-counts per bucket (numba).

The prior of a calibrator is a rate per bucket: the bucket centre's probability for probability
inputs, or one base rate for raw scores. Its pseudo-counts join the histogram row before any
map reads it: bucket ``b`` with data weight ``n_b = pos_b + neg_b`` gets ``m_b = kappa (n_b + u)``
pseudo-events, ``m_b rate_b`` of them positive, where ``u`` is the weight of one event (so an
empty bucket holds ``kappa`` pseudo-events and the map there follows the prior). The strength
``kappa`` is the posterior odds, in a Bayes factor with a BIC penalty (Schwarz, "Estimating the
dimension of a model", 1978), of two models of the row's labels:

- ``S``, the prior itself: ``P(y = 1) = rate_b`` (for raw scores, the base rate fitted to the
  row: one parameter);
- ``D``, a logistic recalibration of it: ``logit P(y = 1) = logit(rate_b) + a + b z_b``, with
  ``z_b`` the standardised covariate of the bucket (the centre's log-odds for probability inputs,
  the centre itself for raw scores) and a ridge of weight ``RIDGE`` on ``(a, b)``, fitted by
  Newton's method (Platt, "Probabilistic outputs for support vector machines", 1999).

``log kappa = logL_S - logL_D + (k / 2) log(n + 1)``, ``k`` the parameters ``D`` adds (2 for
probability inputs, 1 for raw scores), ``n`` the row's weight. A score that predicts as well as
its best recalibration gets a prior growing like ``sqrt(n)^k``; one that a recalibration beats
loses it exponentially fast in the evidence. ``kappa`` is capped at ``KAPPA_MAX`` and set to
0 below ``KAPPA_MIN``, where the pseudo-counts are below a billionth of the data's weight: the
map is then the data's own map, exactly.

Kernels only (no validation): the row is ``h[h0 : h0 + B]`` (positive weight per bucket) and
``h[h0 + B : h0 + 2B]`` (negative), in stored units of ``unit`` per real unit of weight; the
bucket centres are ``cen[c0 + cstep * b]``.
"""

from __future__ import annotations

import math

from streamcal._kernels._config import jit_noalloc

KAPPA_MAX = 1.0e6
KAPPA_MIN = 1.0e-9
RIDGE = 1.0e-2
NEWTON_STEPS = 40
RATE_LOW = 1.0e-15  # prior rates are kept inside (RATE_LOW, 1 - RATE_LOW): finite log-odds
RATE_HIGH = 1.0 - 1.0e-15
# the ``"spread"`` floor (``streamcal._prior.score_prior``): the events' weight of the prior spread
# over the whole grid besides the traffic's floor. Chosen by measurement (GEV on the ISLR
# ``Default`` case and the simulated rare-event cases of ``benchmarks/bench_prior.py``; 1 to 256
# tried): less leaves few buckets of data free to extrapolate, more pulls the map towards the
# prior far from the traffic, where a link that cannot represent it pays
SPREAD_EVENTS = 32.0


@jit_noalloc(forceinline=True)
def prior_rate(centre, base_rate, probability_inputs):
    """The prior's rate in a bucket of centre ``centre``: the centre itself (probability
    inputs, kept inside (0, 1)) or ``base_rate``."""
    if probability_inputs:
        r = RATE_LOW if centre < RATE_LOW else centre
        return RATE_HIGH if r > RATE_HIGH else r
    return base_rate


@jit_noalloc(forceinline=True)
def _log_sigmoid(z):
    """``log(1 / (1 + exp(-z)))`` without overflow."""
    if z >= 0.0:
        return -math.log1p(math.exp(-z))
    return z - math.log1p(math.exp(z))


@jit_noalloc(forceinline=True)
def _fit_term(p, n, off, v, a, b):
    """Bucket ``(p, n)``'s terms of :func:`_recalibrated_fit_terms` at ``(a, b)``: its
    log-likelihood ``p log q + n log(1 - q)``, with ``q = sigmoid(off + a + b v)``, and ``q``.
    ``log q`` and ``log(1 - q)`` are :func:`_log_sigmoid` at ``z`` and ``-z``, which share their
    ``exp`` and ``log1p``: each is formed once, the same operations on the same operands."""
    z = off + a + b * v
    if z >= 0.0:
        l1 = math.log1p(math.exp(-z))
        log_q = -l1
        log_1mq = -z - l1
    else:
        l1 = math.log1p(math.exp(z))
        log_q = z - l1
        log_1mq = -l1
    return p * log_q + n * log_1mq, math.exp(log_q)


@jit_noalloc
def _recalibrated_fit_terms(h, h0, B, lo, hi, unit, cen, c0, cstep, base_rate, probability_inputs, mean, scale, a, b):
    """The penalised log-likelihood of ``D`` with parameters ``(a, b)``, its gradient and its
    Hessian there (the buckets with data lie in ``lo..hi``), in one pass over the buckets."""
    total = -0.5 * RIDGE * (a * a + b * b)
    ga = -RIDGE * a
    gb = -RIDGE * b
    haa = RIDGE
    hab = 0.0
    hbb = RIDGE
    for j in range(lo, hi + 1):
        if not h[h0 + j] + h[h0 + B + j] > 0.0:  # stored weights: no division for an empty bucket
            continue
        p = h[h0 + j] / unit
        n = h[h0 + B + j] / unit
        if p + n > 0.0:
            r = prior_rate(cen[c0 + cstep * j], base_rate, probability_inputs)
            off = math.log(r) - math.log1p(-r)
            x = off if probability_inputs else cen[c0 + cstep * j]
            v = (x - mean) * scale
            term, q = _fit_term(p, n, off, v, a, b)
            total += term
            res = p - (p + n) * q
            wq = (p + n) * q * (1.0 - q)
            ga += res
            gb += res * v
            haa += wq
            hab += wq * v
            hbb += wq * v * v
    return total, ga, gb, haa, hab, hbb


@jit_noalloc
def _listed_fit_terms(listed, m, off_raw, probability_inputs, mean, scale, a, b):
    """:func:`_recalibrated_fit_terms` over the ``m`` buckets with data listed in ``listed``
    (``p``, ``n`` and the covariate ``x`` of each, in bucket order; for probability inputs
    ``x`` is the offset itself, for raw scores the offset is ``off_raw``): the same terms in the
    same order, so the same sums."""
    total = -0.5 * RIDGE * (a * a + b * b)
    ga = -RIDGE * a
    gb = -RIDGE * b
    haa = RIDGE
    hab = 0.0
    hbb = RIDGE
    for i in range(m):
        p = listed[3 * i]
        n = listed[3 * i + 1]
        x = listed[3 * i + 2]
        off = x if probability_inputs else off_raw
        v = (x - mean) * scale
        term, q = _fit_term(p, n, off, v, a, b)
        total += term
        res = p - (p + n) * q
        wq = (p + n) * q * (1.0 - q)
        ga += res
        gb += res * v
        haa += wq
        hab += wq * v
        hbb += wq * v * v
    return total, ga, gb, haa, hab, hbb


@jit_noalloc
def prior_strength(h, h0, B, unit, cen, c0, cstep, base_rate, probability_inputs):
    """``kappa``, the prior's pseudo-events per event of the row (see the module notes)."""
    return prior_strength_from(h, h0, B, unit, cen, c0, cstep, base_rate, probability_inputs, cen[:0])


@jit_noalloc
def prior_strength_from(h, h0, B, unit, cen, c0, cstep, base_rate, probability_inputs, start):
    """:func:`prior_strength`, with Newton's method started from ``start[0], start[1]`` (and
    the fitted ``(a, b)`` written back there) when ``start`` has two elements, from ``(0, 0)``
    otherwise: a refit whose row changed little converges in a step or two."""
    return prior_strength_listed(h, h0, B, unit, cen, c0, cstep, base_rate, probability_inputs, start, cen[:0])


@jit_noalloc
def prior_strength_listed(h, h0, B, unit, cen, c0, cstep, base_rate, probability_inputs, start, listed):
    """:func:`prior_strength_from`, the same ``kappa`` bit for bit, with a scratch ``listed``:
    when it holds three values per bucket with data, the first pass lists them there (``p``,
    ``n`` and the covariate), and each Newton pass reads the list instead of the row: no scan of
    the empty buckets between them, no division and no prior rate's logarithms per pass."""
    # the sums run over the span of the buckets with data (the others add nothing): a window's
    # data often fill a small part of the buckets. A bucket whose stored weights do not sum
    # above 0 has ``p + n`` not above 0 either (the division by ``unit > 0`` is monotone).
    lo = 0
    while lo < B and not (h[h0 + lo] + h[h0 + B + lo] > 0.0 and h[h0 + lo] / unit + h[h0 + B + lo] / unit > 0.0):
        lo += 1
    hi = B - 1
    while hi > lo and not (h[h0 + hi] + h[h0 + B + hi] > 0.0 and h[h0 + hi] / unit + h[h0 + B + hi] / unit > 0.0):
        hi -= 1
    n_all = 0.0
    log_s = 0.0
    sx = 0.0
    sxx = 0.0
    m = 0  # the buckets listed
    room = listed.shape[0] // 3
    for j in range(lo, hi + 1):
        if not h[h0 + j] + h[h0 + B + j] > 0.0:
            continue
        p = h[h0 + j] / unit
        n = h[h0 + B + j] / unit
        if p + n > 0.0:
            r = prior_rate(cen[c0 + cstep * j], base_rate, probability_inputs)
            x = (math.log(r) - math.log1p(-r)) if probability_inputs else cen[c0 + cstep * j]
            n_all += p + n
            sx += (p + n) * x
            sxx += (p + n) * x * x
            if p > 0.0:
                log_s += p * math.log(r)
            if n > 0.0:
                log_s += n * math.log1p(-r)
            if m < room:
                listed[3 * m] = p
                listed[3 * m + 1] = n
                listed[3 * m + 2] = x
            m += 1
    if m > room:  # the list does not hold them all: the passes read the row
        m = -1
    off_raw = math.log(base_rate) - math.log1p(-base_rate)  # the offset of raw scores (every bucket's)
    if not n_all > 0.0:
        return KAPPA_MAX
    mean = sx / n_all
    var = sxx / n_all - mean * mean
    sd = math.sqrt(var) if var > 0.0 else 0.0
    scale = 1.0 / sd if sd > 0.0 else 0.0
    # Newton's method with step halving on the penalised log-likelihood of D, from S (a = b = 0).
    # Each trial point's pass also sums the gradient and Hessian there, which the next step
    # reads when the trial is accepted (the sums a pass at the accepted point would form).
    warm = start.shape[0] == 2
    a = start[0] if warm else 0.0
    b = start[1] if warm else 0.0
    if m >= 0:
        f, ga, gb, haa, hab, hbb = _listed_fit_terms(listed, m, off_raw, probability_inputs, mean, scale, a, b)
    else:
        f, ga, gb, haa, hab, hbb = _recalibrated_fit_terms(
            h, h0, B, lo, hi, unit, cen, c0, cstep, base_rate, probability_inputs, mean, scale, a, b
        )
    for _ in range(NEWTON_STEPS):
        det = haa * hbb - hab * hab
        if not det > 0.0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        step = 1.0
        improved = False
        f_new, ga_new, gb_new, haa_new, hab_new, hbb_new = f, ga, gb, haa, hab, hbb
        while step > 1e-8:
            if m >= 0:
                f_new, ga_new, gb_new, haa_new, hab_new, hbb_new = _listed_fit_terms(
                    listed, m, off_raw, probability_inputs, mean, scale, a + step * da, b + step * db
                )
            else:
                f_new, ga_new, gb_new, haa_new, hab_new, hbb_new = _recalibrated_fit_terms(
                    h, h0, B, lo, hi, unit, cen, c0, cstep, base_rate, probability_inputs, mean, scale,
                    a + step * da, b + step * db,
                )
            if f_new >= f:
                improved = True
                break
            step *= 0.5
        if not improved:
            break
        a += step * da
        b += step * db
        gain = f_new - f
        f = f_new
        ga, gb, haa, hab, hbb = ga_new, gb_new, haa_new, hab_new, hbb_new
        if gain <= 1e-10 * (1.0 + abs(f)):
            break
    if warm:
        start[0] = a
        start[1] = b
    k = 2.0 if probability_inputs else 1.0
    log_kappa = log_s - f + 0.5 * k * math.log(n_all + 1.0)
    if log_kappa >= math.log(KAPPA_MAX):
        return KAPPA_MAX
    kappa = math.exp(log_kappa)
    return kappa if kappa >= KAPPA_MIN else 0.0
