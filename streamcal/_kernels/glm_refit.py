"""The exact default of the histogram GLM calibrators (Platt, GEV) in compiled code (numba).

``PlattCalibrator`` and ``GEVCalibrator`` refit ``P(y=1 | s) = F(slope * x(s) + intercept)``
from the windowed histogram before every prediction that follows new labels. These kernels run
that refit, and the whole operation loop of the array face, without returning to Python:

- :func:`glm_refit_inplace`: the histogram in real units, the score prior's strength and
  pseudo-counts (the arithmetic of ``streamcal._prior.score_prior``), Newton's method from the
  previous optimum for every candidate shape (``streamcal._kernels.gev.glm_refit_histogram_inplace``
  with its stopping rule), the shape with the lowest Brier score, the served bounds and the prior
  log-odds. A shape whose Newton iteration fails (or that has no previous fit) is left to the
  caller's damped full refit, after which :func:`glm_finish_refit` completes the fit.
- :func:`glm_run_ops_inplace`: learn / predict / prequential operations with lazy refits, one
  event at a time, through the histogram kernels; it stops before a prediction whose refit needs
  the damped full refit.

The score prior's strength. Its kernel (``streamcal._kernels.prior.prior_strength``) fits the
logistic recalibration ``D`` by Newton's method over every bucket, dearer than the map's own
refit; on most long windows it finds ``kappa = 0``, and then the prior adds nothing. For
probability inputs the refit skips that kernel while a certificate shows that it would return
0: for any coefficients ``(A, B)`` of ``D``'s linear predictor ``logit(r_b) + A + B x_b``
(unstandardised), the maximum ``f`` of ``D``'s penalised log-likelihood is at least its value
there, so ``log kappa <= log_s - (L(A, B) - penalty) + (k / 2) log(n + 1)``. ``(A, B)`` is the
anchor: ``D``'s fit at the last time the kernel ran, whose per-bucket log-likelihood terms are
kept, so the bound costs one pass of multiply-adds over the buckets. When the bound is below
``log(KAPPA_MIN)`` by ``CERTIFICATE_MARGIN`` (plus a relative margin for the kernel's stopping
rule and for rounding) the strength is 0 exactly as the kernel would find it; otherwise the
kernel runs from its cold start, as the full refit does, and its fit becomes the new anchor.

Arrays (no validation; see ``streamcal.gev.calibrator`` for their owner):

- ``fit`` (float64, ``FIT_SIZE``): the served fit's scalars, at the ``FIT_*`` indices;
- ``betas`` (S, 2), ``xis`` (S), ``has_warm`` (S, int64), ``briers`` (S), ``ok`` (S, int64):
  per candidate shape, its coefficients, shape, whether it has a previous fit, its Brier score
  and whether this refit's Newton iteration succeeded;
- ``pos_w``, ``neg_w`` (B): the fitted histogram in real units, prior pseudo-counts included;
- ``pc`` (5, B): per bucket, the prior's log-odds ``logit(r_b)``, ``log r_b``, ``log(1 - r_b)``
  and the anchor's log-likelihood terms ``log sigma(z_b)``, ``log sigma(-z_b)``;
- ``anchor`` (5): ``[valid, a, b, A, B]``, ``D``'s fit in its standardised and raw coefficients.
"""

from __future__ import annotations

import math

from streamcal._kernels import histogram as _h
from streamcal._kernels import prior as _p
from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.gev import glm_map_one, glm_refit_histogram_inplace

FIT_FITTED = 0  # 1.0 once a map is fitted (the window holds weight)
FIT_DIRTY = 1  # 1.0 when labels came after the last refit (lazy refits)
FIT_KAPPA = 2  # the score prior's strength at the last refit
FIT_LOGODDS = 3  # the data's prior log-odds (the LLR's offset)
FIT_LOW = 4  # the served bounds
FIT_HIGH = 5
FIT_SERVED = 6  # the index of the served shape
FIT_T_POS = 7  # the data's class totals and the fitted total (prior included), real units
FIT_T_NEG = 8
FIT_TOTAL = 9
FIT_SIZE = 10

PC_OFF = 0
PC_LOG_R = 1
PC_LOG_1MR = 2
PC_L1 = 3
PC_L0 = 4

FLOOR_THINNED = 0  # the score prior's floors (``streamcal._prior.score_prior``)
FLOOR_SPAN = 1
FLOOR_TRAFFIC = 2

OP_LEARN = 1  # ``streamcal._operations.OP_*``
OP_PREDICT = 2

#: nats between the certified bound of ``log kappa`` and ``log(KAPPA_MIN)``, on top of a margin
#: of ``1e-6`` times the log-likelihoods (the prior kernel stops Newton's method once a step
#: gains at most ``1e-10`` of its log-likelihood; rounding of the sums is far below both)
CERTIFICATE_MARGIN = 1.0

TINY = 2.2250738585072014e-308  # ``streamcal._prior.TINY``
ONE_BELOW = 1.0 - 1.1102230246251565e-16  # ``streamcal._prior.ONE_BELOW``
NOT_SURE_LOW = 1.1102230246251565e-16  # ``streamcal._prior.NOT_SURE_LOW``


@jit_noalloc(forceinline=True)
def _unit_of(sf, kind):
    """The stored unit of the histogram (1 before any event: nothing is stored)."""
    if sf[_h.SF_N_LEARNED] > 0.0:
        return _h.stored_unit(sf, kind)
    return 1.0


@jit_noalloc
def prior_cache_fill(centres, pc):
    """``pc``'s fixed rows for probability inputs: ``logit(r_b)``, ``log r_b``, ``log(1 - r_b)``
    with ``r_b`` the prior's rate at bucket ``b`` (its centre, kept inside (0, 1))."""
    for j in range(centres.shape[0]):
        r = _p.prior_rate(centres[j], 0.5, True)
        pc[PC_LOG_R, j] = math.log(r)
        pc[PC_LOG_1MR, j] = math.log1p(-r)
        pc[PC_OFF, j] = math.log(r) - math.log1p(-r)


@jit_noalloc
def _prior_sums(h, h0, B, unit, pc):
    """``(n, mean, var, log_s, L)`` over the buckets of the row ``h[h0 : h0 + 2B]`` (stored
    units of ``unit``): the weight, the mean and variance of the covariate, the prior's
    log-likelihood and the anchor's (without its penalty)."""
    n_all = 0.0
    sx = 0.0
    sxx = 0.0
    log_s = 0.0
    loglik = 0.0
    for j in range(B):
        p = h[h0 + j] / unit
        n = h[h0 + B + j] / unit
        if p + n > 0.0:
            x = pc[PC_OFF, j]
            n_all += p + n
            sx += (p + n) * x
            sxx += (p + n) * x * x
            log_s += p * pc[PC_LOG_R, j] + n * pc[PC_LOG_1MR, j]
            loglik += p * pc[PC_L1, j] + n * pc[PC_L0, j]
    if not n_all > 0.0:
        return 0.0, 0.0, 0.0, 0.0, 0.0
    mean = sx / n_all
    return n_all, mean, sxx / n_all - mean * mean, log_s, loglik


@jit_noalloc
def prior_strength_is_zero(h, h0, B, unit, pc, anchor):
    """True when the anchor certifies that the prior kernel returns 0 on the row
    ``h[h0 : h0 + 2B]`` (probability inputs; see the module notes)."""
    if anchor[0] != 1.0:
        return False
    n_all, mean, var, log_s, loglik = _prior_sums(h, h0, B, unit, pc)
    if not (n_all > 0.0 and var > 0.0):
        return False
    big_a = anchor[3]
    big_b = anchor[4]
    sd = math.sqrt(var)
    a1 = big_a + big_b * mean  # the anchor's linear predictor in this histogram's standardisation
    b1 = big_b * sd
    f_low = loglik - 0.5 * _p.RIDGE * (a1 * a1 + b1 * b1)
    bound = log_s - f_low + math.log(n_all + 1.0)  # k / 2 = 1 for probability inputs
    margin = CERTIFICATE_MARGIN + 1e-6 * (abs(f_low) + abs(log_s))
    return bound < math.log(_p.KAPPA_MIN) - margin


@jit_noalloc
def set_anchor(h, h0, B, unit, pc, anchor):
    """Make the fit in ``anchor[1:3]`` (standardised, as the prior kernel left it on the row
    ``h[h0 : h0 + 2B]``) the anchor: its raw coefficients and its per-bucket log-likelihood terms."""
    n_all, mean, var, _, _ = _prior_sums(h, h0, B, unit, pc)
    if not (n_all > 0.0 and var > 0.0):
        anchor[0] = 0.0
        return
    scale = 1.0 / math.sqrt(var)
    a = anchor[1]
    b = anchor[2]
    anchor[3] = a - b * scale * mean
    anchor[4] = b * scale
    for j in range(B):
        z = pc[PC_OFF, j] + anchor[3] + anchor[4] * pc[PC_OFF, j]
        pc[PC_L1, j] = _p._log_sigmoid(z)
        pc[PC_L0, j] = _p._log_sigmoid(-z)
    anchor[0] = 1.0


@jit_noalloc
def score_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor):
    """The score prior's strength on the histogram (stored units of ``u``; class totals
    ``t_pos``, ``t_neg`` in real units), as ``streamcal._prior.score_prior`` computes it;
    certified 0 without the prior kernel where the anchor allows (probability inputs)."""
    B = si[_h.SI_B]
    if identity and prior_strength_is_zero(sf, _h.SF_HEADER, B, u, pc, anchor):
        return 0.0
    base_rate = (t_pos + c) / ((t_pos + t_neg) + 2.0 * c)
    anchor[1] = 0.0  # the kernel's cold start (0, 0); its fit is written back there
    anchor[2] = 0.0
    kappa = _p.prior_strength_from(sf, _h.SF_HEADER, B, u, centres, 0, 1, base_rate, identity, anchor[1:3])
    if identity:
        set_anchor(sf, _h.SF_HEADER, B, u, pc, anchor)
    return kappa


@jit_noalloc
def add_prior_pseudo_counts(pos_w, neg_w, kappa, centres, identity, base_rate, floor_kind, B):
    """Add the score prior's pseudo-counts of strength ``kappa`` to ``pos_w``/``neg_w``, bucket
    by bucket as ``streamcal._prior.score_prior`` computes them."""
    step = max(1, B // 64)
    margin = max(1, B // 16)
    first = -1
    last = -1
    for j in range(B):
        if pos_w[j] + neg_w[j] > 0.0:
            if first < 0:
                first = j
            last = j
    for j in range(B):
        n = pos_w[j] + neg_w[j]
        held = 1.0 if n > 0.0 else 0.0
        thinned = float(step) if j % step == step // 2 else 0.0
        if floor_kind == FLOOR_THINNED:
            m = kappa * (n + thinned)
        elif floor_kind == FLOOR_SPAN:
            if first >= 0 and (j < first - margin or j > last + margin):
                thinned = 0.0
            m = kappa * (n + max(thinned, held))
        else:
            m = kappa * (n + held)
        rate = _p.prior_rate(centres[j], base_rate, True) if identity else base_rate
        pos_w[j] = pos_w[j] + m * rate
        neg_w[j] = neg_w[j] + m * (1.0 - rate)


@jit_noalloc
def glm_finish_refit(briers, fit, c):
    """The served shape (lowest Brier score, the first of equals), the prior log-odds and the
    served bounds, from the totals in ``fit``: the fit is complete."""
    best = 0
    for k in range(1, briers.shape[0]):
        if briers[k] < briers[best]:
            best = k
    fit[FIT_SERVED] = float(best)
    fit[FIT_LOGODDS] = math.log(fit[FIT_T_POS] + c) - math.log(fit[FIT_T_NEG] + c)
    total = fit[FIT_TOTAL]
    fit[FIT_LOW] = c / (total + 2.0 * c)
    fit[FIT_HIGH] = (total + c) / (total + 2.0 * c)
    fit[FIT_FITTED] = 1.0
    fit[FIT_DIRTY] = 0.0


@jit_noalloc
def glm_refit_inplace(
    sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit,
):  # fmt: skip
    """Refit the map from the histogram (see the module notes). Returns 0 when the fit is
    complete (or the window holds no weight: ``fit[FIT_FITTED]`` 0), 1 when some shape
    (``ok[k] == 0``) needs the damped full refit on ``pos_w``/``neg_w``, after which
    :func:`glm_finish_refit` completes it."""
    B = si[_h.SI_B]
    kind = sf[_h.SF_KIND]
    u = _unit_of(sf, kind)
    t_pos = 0.0
    t_neg = 0.0
    for j in range(B):
        p = sf[_h.SF_HEADER + j] / u
        n = sf[_h.SF_HEADER + B + j] / u
        pos_w[j] = p
        neg_w[j] = n
        t_pos += p
        t_neg += n
    fit[FIT_DIRTY] = 0.0
    if not t_pos + t_neg > 0.0:
        fit[FIT_FITTED] = 0.0
        return 0
    kappa = 0.0
    if prior_on:
        kappa = score_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor)
        fit[FIT_KAPPA] = kappa
        if kappa > 0.0:
            base_rate = (t_pos + c) / ((t_pos + t_neg) + 2.0 * c)
            add_prior_pseudo_counts(pos_w, neg_w, kappa, centres, identity, base_rate, floor_kind, B)
    s_pos = t_pos
    s_neg = t_neg
    if kappa > 0.0:  # the fitted totals, pseudo-counts included
        s_pos = 0.0
        s_neg = 0.0
        for j in range(B):
            s_pos += pos_w[j]
            s_neg += neg_w[j]
    fit[FIT_T_POS] = t_pos
    fit[FIT_T_NEG] = t_neg
    fit[FIT_TOTAL] = s_pos + s_neg
    need_full = 0
    S = xis.shape[0]
    for k in range(S):
        ok[k] = 0
        if has_warm[k] != 0:
            # one shape is served without comparing Brier scores: none is computed
            brier = briers[k : k + 1] if S > 1 else briers[:0]
            passes = glm_refit_histogram_inplace(
                x, pos_w, neg_w, code, xis[k], l2, 1e-12, x_lo, x_hi, tol, betas[k], max_passes, brier
            )
            if passes >= 0:
                ok[k] = 1
        if ok[k] == 0:
            need_full = 1
    if need_full:
        fit[FIT_DIRTY] = 1.0  # until the caller completes the fit
        return 1
    glm_finish_refit(briers, fit, c)
    return 0


@jit_noalloc(forceinline=True)
def glm_served_one(s, identity, clip, code, xis, betas, fit):
    """``(proba, llr)`` of one score under the served fit (before any fit: the probability
    score itself, kept inside (0, 1), or 0.5; LLR 0)."""
    if fit[FIT_FITTED] == 0.0:
        if identity:
            return min(max(s, NOT_SURE_LOW), ONE_BELOW), 0.0
        return 0.5, 0.0
    k = int(fit[FIT_SERVED])
    p = glm_map_one(s, identity, clip, betas[k, 0], betas[k, 1], code == 0, xis[k])
    p = min(max(p, fit[FIT_LOW]), fit[FIT_HIGH])
    q = min(max(p, TINY), ONE_BELOW)
    return p, (math.log(q) - math.log1p(-q)) - fit[FIT_LOGODDS]


@jit_noalloc
def glm_served_array(s, identity, clip, code, xis, betas, fit, out_p, out_llr):
    """:func:`glm_served_one` at every score."""
    for i in range(s.shape[0]):
        out_p[i], out_llr[i] = glm_served_one(s[i], identity, clip, code, xis, betas, fit)


@jit_noalloc
def glm_run_ops_inplace(
    ops, b, s, y, w, t, out_p, out_llr, start,
    sf, si, x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit,
):  # fmt: skip
    """Run operations ``ops[start:]`` (``OP_*`` bits) with lazy refits, event by event: what a
    loop of ``predict_proba_one`` / ``learn_one`` does. Returns the index of the first operation
    not run: ``ops.size``, or an operation whose refit needs the damped full refit (then
    ``fit[FIT_DIRTY]`` stays 1 and :func:`glm_refit_inplace` has left its partial fit)."""
    kind = sf[_h.SF_KIND]
    for i in range(start, ops.shape[0]):
        op = ops[i]
        if op & OP_PREDICT:
            if fit[FIT_DIRTY] != 0.0:
                status = glm_refit_inplace(
                    sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
                    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit,
                )  # fmt: skip
                if status != 0:
                    return i
                for k in range(xis.shape[0]):
                    has_warm[k] = 1
            out_p[i], out_llr[i] = glm_served_one(s[i], identity, clip, code, xis, betas, fit)
        if op & OP_LEARN:
            clock = _h.window_clock(sf, t[i], kind)
            while _h.window_expire_next_inplace(sf, si, clock, kind) >= 0:
                pass
            _h.window_add_inplace(sf, si, b[i], y[i], w[i], clock, kind)
            fit[FIT_DIRTY] = 1.0
    return ops.shape[0]
