"""The prior, finite-LLR and add-``c`` rule: one home for the pseudo-count arithmetic.

A calibrator fitted on a window of weight ``T`` (``T1`` positive, ``T0`` negative) keeps its LLR
finite by the BOSARIS rule: one pseudo-positive below every score and one pseudo-negative above,
each of weight ``c = llr_pseudo_count``. Then

- the prior is ``(T1 + c) / (T + 2c)`` (:func:`finite_prior`), its log-odds
  ``log(T1 + c) - log(T0 + c)`` (:func:`prior_logodds`);
- no served probability is surer than add-``c`` smoothing of ``T`` unanimous events:
  ``[c / (T + 2c), (T + c) / (T + 2c)]`` (:func:`proba_bounds`), the value the finite PAV rule
  gives a one-class window;
- a fitted probability ``f`` reads as ``(f T + c) / (T + 2c)`` among the pseudo-events
  (:func:`smoothed`), and the LLR is ``logit(p) - prior log-odds`` (:func:`llr_from_proba`), with
  ``p`` kept inside the open interval so that it is finite.

The compiled PAV kernels (``streamcal/_kernels/ipav.py``) apply the same rule inside their fused
loops; ``tests/test_prior_rule.py`` checks them against these functions.

The score prior (:func:`score_prior`) is the other pseudo-count rule: pseudo-events added to every
bucket of a histogram row before a map reads it, at the score's own rate (probability inputs) or
at the base rate (raw scores), with a strength the evidence sets
(:mod:`streamcal._kernels.prior`). PAV applies it inside its kernels; the refitted maps through
this function.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import prior as _kernel

__all__ = [
    "NOT_SURE_LOW",
    "ONE_BELOW",
    "TINY",
    "add_one_bound",
    "finite_prior",
    "llr_from_proba",
    "prior_logodds",
    "proba_bounds",
    "score_prior",
    "smoothed",
]

TINY = float(np.finfo(np.float64).tiny)
ONE_BELOW = 1.0 - float(np.finfo(np.float64).epsneg)  # the largest float64 below 1
#: 2**-53, the smallest probability whose complement ``1 - p`` is below 1: the pass-through of a
#: probability score before any label stays in ``[NOT_SURE_LOW, ONE_BELOW]``, both classes' sides
#: inside the open interval (0, 1).
NOT_SURE_LOW = 1.0 - ONE_BELOW


def finite_prior(pos, total, c: float):
    """``(T1 + c) / (T + 2c)``: the prior of a window of weight ``total`` (``pos`` positive)
    among the two pseudo-events of weight ``c``."""
    return (pos + c) / (total + 2.0 * c)


def prior_logodds(pos: float, neg: float, c: float) -> float:
    """``log(T1 + c) - log(T0 + c)``: the log-odds of :func:`finite_prior`, from the class sums
    themselves (exact where the prior would round to 0 or 1)."""
    return math.log(pos + c) - math.log(neg + c)


def proba_bounds(total: float, c: float) -> tuple[float, float]:
    """``(c / (T + 2c), (T + c) / (T + 2c))``: the surest probabilities a map fitted on weight
    ``total`` serves."""
    return c / (total + 2.0 * c), (total + c) / (total + 2.0 * c)


def add_one_bound(total: float) -> float:
    """``1 / (T + 2)``: the lower bound of :func:`proba_bounds` with ``c = 1`` (a coupled
    multiclass calibrator keeps its binary parts within ``[b, 1 - b]``)."""
    return 1.0 / (total + 2.0)


def smoothed(proba, total: float, c: float):
    """``(f T + c) / (T + 2c)``: a fitted probability ``f`` among the pseudo-events."""
    return (proba * total + c) / (total + 2.0 * c)


def llr_from_proba(proba: np.ndarray, logodds: float) -> np.ndarray:
    """``logit(p) - logodds`` with ``p`` kept within ``[TINY, ONE_BELOW]``: finite."""
    q = np.minimum(np.maximum(proba, TINY), ONE_BELOW)  # np.clip's values, without its wrapper
    return (np.log(q) - np.log1p(-q)) - logodds


def score_prior(
    centres: np.ndarray,
    pos: np.ndarray,
    neg: np.ndarray,
    probability_inputs: bool,
    c: float,
    *,
    floor: str = "every",
) -> tuple[float, np.ndarray, np.ndarray]:
    """The score prior's strength and pseudo-counts for a histogram row (real units).

    Returns ``(kappa, prior_pos, prior_neg)``: bucket ``b`` gets ``m_b = kappa (n_b + 1)``
    pseudo-events, ``m_b r_b`` positive and ``m_b (1 - r_b)`` negative, with ``n_b`` its weight and
    ``r_b`` the prior's rate there: the bucket centre for probability inputs, else the base rate
    ``(T1 + c) / (T + 2c)``. ``kappa`` is the posterior odds of the prior against its logistic
    recalibration (:mod:`streamcal._kernels.prior`): 0 when the data have refuted it, up to
    ``KAPPA_MAX`` while they agree. Any map fitted on ``pos + prior_pos``, ``neg + prior_neg``
    leans on the prior as far as the evidence lets it. The per-bucket arithmetic is the PAV
    kernels' (``_augment_bucket_inplace``), so that a row holding ``kappa`` gives the same
    pseudo-counts here and there (``floor="every"``). A smooth or parametric map extrapolates
    by its own form, and a floor on every bucket of a wide grid makes it fit the prior far
    outside the data, at a cost that grows with the buckets: ``floor="thinned"`` puts the floor
    on one bucket in ``B // 64`` (with that many events' weight), ``floor="span"`` does so only
    within ``B // 16`` buckets of the data and adds one event's weight to every bucket that holds
    data, ``floor="traffic"`` only to the buckets that hold data (the prior then spreads like the
    traffic), ``floor="spread"`` as ``"traffic"`` plus ``SPREAD_EVENTS`` events' weight (32) over
    the whole grid, in one bucket in ``B // 64``: while the data hold few buckets, that weight
    keeps a parametric map that cannot represent the prior from extrapolating far from it, and
    as the data grow the traffic's floor outweighs it.
    """
    centres = np.ascontiguousarray(centres, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    base_rate = (float(pos.sum()) + c) / (float(pos.sum() + neg.sum()) + 2.0 * c)
    row = np.ascontiguousarray(np.concatenate((pos, neg)))
    B = int(centres.size)
    kappa = float(
        _config.run(_kernel.prior_strength, 0, row, 0, B, 1.0, centres, 0, 1, base_rate, bool(probability_inputs))
    )
    prior_pos, prior_neg = pseudo_counts(centres, pos, neg, kappa, probability_inputs, c, floor=floor)
    return kappa, prior_pos, prior_neg


def pseudo_counts(
    centres: np.ndarray,
    pos: np.ndarray,
    neg: np.ndarray,
    kappa: float,
    probability_inputs: bool,
    c: float,
    *,
    floor: str = "every",
) -> tuple[np.ndarray, np.ndarray]:
    """The score prior's pseudo-counts ``(prior_pos, prior_neg)`` of a given strength ``kappa`` for a
    row (real units), by the per-bucket rule and ``floor`` of :func:`score_prior`."""
    B = int(centres.size)
    if probability_inputs:
        rate = np.minimum(np.maximum(centres, _kernel.RATE_LOW), _kernel.RATE_HIGH)
    else:
        base_rate = (float(pos.sum()) + c) / (float(pos.sum() + neg.sum()) + 2.0 * c)
        rate = np.full(B, base_rate)
    n = pos + neg
    if floor == "every":
        m = kappa * (n + 1.0)
    elif floor == "thinned":
        step = max(1, B // 64)
        m = kappa * (n + np.where(np.arange(B) % step == step // 2, float(step), 0.0))
    elif floor == "span":
        # the thinned floor within B // 16 buckets of the data, and one event in every bucket
        # that holds data
        step = max(1, B // 64)
        at = np.arange(B)
        held = np.flatnonzero(n > 0.0)
        margin = max(1, B // 16)
        thinned = np.where(at % step == step // 2, float(step), 0.0)
        if held.size:
            thinned[(at < held[0] - margin) | (at > held[-1] + margin)] = 0.0
        m = kappa * (n + np.maximum(thinned, (n > 0.0) * 1.0))
    elif floor == "spread":
        # the traffic's floor, plus SPREAD_EVENTS events' weight over one bucket in B // 64
        step = max(1, B // 64)
        thinned = np.where(np.arange(B) % step == step // 2, float(step), 0.0)
        m = kappa * (n + (n > 0.0) + thinned * _kernel.SPREAD_EVENTS / B)
    else:
        m = kappa * (n + (n > 0.0))
    return m * rate, m * (1.0 - rate)


def refresh_charge(next_refit: float, n_learned: int, n: int, n_buckets: int) -> int:
    """The interpreted tier's charge, in events (:func:`streamcal._kernels._config.run`), of a call
    handing PAV's kernels ``n`` events from ``n_learned`` learned ones, the score prior's strength
    next refitted at learned count ``next_refit`` (``inf``: never, no prior): the events, plus
    ``n_buckets // 8`` for each refit they may reach (a sweep over every bucket and the blocks'
    rewrite, about that many events' work when interpreted). The refits follow the kernels'
    schedule (``ipav._prior_strength_inplace``) while the prior holds, counted generously: after
    1, 2, 3, 4, 5, ... events, a quarter more each time (the kernels add half). Many small calls
    of fresh calibrators (the keys of a keyed calibrator) reach many refits each: counted, they
    move the process to compiled kernels in time."""
    from streamcal._kernels.ipav import PRIOR_REFRESH_EVERY

    at = next_refit
    end = n_learned + n
    refits = 0
    while at <= end and refits < 64:  # a long call is charged its events, and a bounded extra
        refits += 1
        step = math.floor((0.25 if at < 4096 else 0.5) * at)
        at += min(max(step, 1), PRIOR_REFRESH_EVERY)
    return n + refits * max(1, n_buckets // 8)
