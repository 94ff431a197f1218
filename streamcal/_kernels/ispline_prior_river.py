"""The river face of I-spline's exact default while the score prior holds: one compiled call per pair (numba).

Where the score prior holds, a pair of river calls, ``learn_one`` then ``predict_proba_one``,
learns the label into the window (the refit engine's ``_learn_bucket``: the histogram's kernel,
the map marked dirty, the bucket listed for the kept sums), then, before the prediction, refits
(``ispline_prior_stream.prior_refit_packed``, the calibrator's ``_prior_refit``) and serves the
map at the score within its bounds (``_proba_of``). :func:`prior_river_pair` runs those steps, in
that order and on the same arrays, in one call: the same bits. What the refit leaves to the
calibrator (the map, its weight, the class totals, the strength, the list of touched buckets)
stays in the river state ``rs`` until a reader of the state settles it
(``streamcal.spline._river``).

:func:`prior_river_pair` is compiled without reference counts (``jit_noalloc``): the prior's
arrays are views of its buffer and the kept refit's scratch views of ``rs``, made without an
allocation or a reference count, and the new map is written into ``rs`` from that scratch. It
runs the refit's first steps (``ispline_prior_stream._refit_kept``: the strength and the refit
from the kept sums); where those do not serve, it returns ``STOP_FULL`` with the strength kept in
``rs``, and :func:`prior_river_full` runs the rest (``_refit_full``, which allocates): the steps of
``prior_refit_packed`` in its order, split between two calls.

``rs`` float64: the scalars ``RS_*`` (``RS_HEADER``), then four sections of ``P = B + 2 (order + 1)``
(``rs_size``): the knots, the basis cache's knots, the coefficients and the B-spline
coefficients of the current map, their counts ``RS_NK``, ``RS_NBK``, ``RS_NC``; then the kept
refit's scratch (``_river_work``, ``ispline_prior_incr.solve_scratch``'s arrays for ``P``
coefficients) and the served probability's (three of ``order + 1``).
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels._config import jit, jit_noalloc
from streamcal._kernels.histogram import (
    KIND_UNBOUNDED,
    SF_HEADER,
    SF_KIND,
    SF_N_LEARNED,
    SI_B,
    histogram_learn_one_inplace,
    stored_unit,
)
from streamcal._kernels.ispline import _combination_at, clamped_span_bounds
from streamcal._kernels.ispline_prior_incr import INCR_NONE, INCR_SERVED
from streamcal._kernels.ispline_prior_stream import (
    REFIT_DONE,
    TOUCHED_MAX,
    _ascending,
    _refit_full,
    _refit_kept,
    prior_views,
    prior_views_unowned,
)

RS_DIRTY = 0  # 1.0: labels since the last refit (the calibrator's ``_dirty``)
RS_KAPPA = 1  # the last refit's results: the prior's strength, the fitted row's totals, the data's
RS_TOTAL = 2
RS_POS_TOTAL = 3
RS_T_POS = 4
RS_T_NEG = 5
RS_LOW = 6  # the served bounds
RS_HIGH = 7
RS_NK = 8  # the sections' counts
RS_NBK = 9
RS_NC = 10
RS_REFITS = 11  # refits since the state was taken (> 0: the map is to be written back)
RS_HAS_LIST = 12  # 1.0: the calibrator keeps a list of the touched buckets (``_prior_touched``)
RS_N_TOUCHED = 13  # its count
RS_LISTED_AT = 14  # the learned count where it starts (NaN: it does not follow these arrays)
RS_C = 15  # ``llr_pseudo_count``
RS_ORDER = 16  # the refit's constant arguments: the spline order, the knot count asked for (-1: default),
RS_N_KNOTS = 17  # the floor kind and 1.0 for the refit from the kept sums
RS_FLOOR = 18
RS_INCREMENTAL = 19
RS_CODE = 20  # the refit's code where it was not ``REFIT_DONE``
RS_KAPPA_FOUND = 21  # ``STOP_FULL``: the strength the first steps found, 1.0 where they found it, and the
RS_HAVE_KAPPA = 22  # count of the sorted list of touched buckets (< 0: unknown)
RS_N_SORTED = 23
RS_HEADER = 24

STOP_ENGINE = -1.0  # the label learned, the refit the engine's (``RS_CODE``): nothing served
STOP_REFUTED = -2.0  # the label learned and refitted, the prior's strength found 0: nothing served
STOP_FULL = -3.0  # the label learned, the kept sums do not serve: :func:`prior_river_full` continues the refit


def rs_size(B: int, order: int) -> int:
    """The size of the river state ``rs`` for ``B`` buckets and splines of order ``order``."""
    k1 = order + 1
    P = B + 2 * k1
    return RS_HEADER + 4 * P + (2 * P * k1 + 9 * P + k1) + 3 * k1  # the sections, ``_river_work``'s, the served's


@jit_noalloc(forceinline=True)
def _river_work(rs, o, P, k1):
    """``ispline_prior_incr.solve_scratch(P, order)``'s arrays as views of ``rs`` from offset ``o``
    (the run index and the free set as views of float64 slots: scratch, never read as floats); its
    section of ``rs`` ends at ``o + 2 P k1 + 9 P + k1`` (``rs_size``)."""
    run = rs[o : o + P].view(np.intp)
    o += P
    red = rs[o : o + P * k1].reshape((P, k1))
    o += P * k1
    rc = rs[o : o + P]
    v = rs[o + P : o + 2 * P]
    g = rs[o + 2 * P : o + 3 * P]
    o += 3 * P
    compact = rs[o : o + P * k1].reshape((P, k1))
    o += P * k1
    cross = rs[o : o + P]
    free = rs[o + P : o + 2 * P].view(np.bool_)[:P]
    x = rs[o + 2 * P : o + 3 * P]
    beta = rs[o + 3 * P : o + 4 * P]
    moved = rs[o + 4 * P : o + 5 * P + k1]
    return run, red, rc, v, g, compact, cross, free, x, beta, moved


@jit_noalloc(forceinline=True)
def _record_refit(rs, sf, kappa, total, pos_total, t_pos, t_neg):
    """A refit's bookkeeping in ``rs`` (the map's sections written by the caller)."""
    c = rs[RS_C]
    rs[RS_KAPPA] = kappa
    rs[RS_TOTAL] = total
    rs[RS_POS_TOTAL] = pos_total
    rs[RS_T_POS] = t_pos
    rs[RS_T_NEG] = t_neg
    rs[RS_LOW] = c / (total + 2.0 * c)  # ``_prior.proba_bounds``
    rs[RS_HIGH] = (total + c) / (total + 2.0 * c)
    rs[RS_REFITS] += 1.0
    rs[RS_DIRTY] = 0.0
    # the list follows the row from here in an unbounded window (``_prior_refit``)
    rs[RS_HAS_LIST] = 1.0 if sf[SF_KIND] == KIND_UNBOUNDED else 0.0
    rs[RS_N_TOUCHED] = 0.0
    rs[RS_LISTED_AT] = sf[SF_N_LEARNED]


@jit_noalloc(forceinline=True)
def _served(s, rs, h, P, k1, o):
    """The current map at ``s`` as ``ispline.bspline_combination_score`` computes it (its scratch the
    three sections of ``k1`` from ``o``), within the served bounds."""
    t = rs[h : h + int(rs[RS_NK])]
    beta = rs[h + 3 * P : h + 3 * P + int(rs[RS_NC])]
    lo, hi = clamped_span_bounds(t, k1)
    v = _combination_at(s, t, k1, beta, lo, hi, rs[o : o + k1], rs[o + k1 : o + 2 * k1], rs[o + 2 * k1 : o + 3 * k1])
    v = min(max(v, 0.0), 1.0)
    return min(max(v, rs[RS_LOW]), rs[RS_HIGH])


@jit_noalloc
def prior_river_pair(b, sl, y, w, s, sf, si, buf, start, basis, touched, rs):
    """The kept label (bucket ``b`` >= 0, score ``sl``, label ``y``, weight ``w``; none where ``b`` < 0)
    learned into the window (``histogram_learn_one_inplace``, event time 0) and listed, the refit
    under the prior where labels came since the last one (``prior_refit_packed``'s steps on the
    state's arrays: the histogram's ``sf``, ``si``, the prior's buffer ``buf``, its warm start
    ``start``, the basis cache ``basis`` and the list ``touched``), and the served probability of
    ``s``. Returns the probability, or ``STOP_*`` (nothing served; ``STOP_FULL``: the refit is
    :func:`prior_river_full`'s to finish); for a NaN ``s`` the label alone, NaN."""
    if b >= 0:
        histogram_learn_one_inplace(sf, si, b, y, w, sl - sl)
        rs[RS_DIRTY] = 1.0
        n = int(rs[RS_N_TOUCHED])
        if rs[RS_HAS_LIST] != 0.0 and n < TOUCHED_MAX:  # ``_prior_touch``
            touched[n] = b
            rs[RS_N_TOUCHED] = n + 1
    if s != s:  # a NaN score: the label alone (two labels in a row)
        return s
    B = si[SI_B]
    order = int(rs[RS_ORDER])
    k1 = order + 1
    P = B + 2 * k1
    h = RS_HEADER + B - B  # an int64, not the constant's literal
    o = h + 4 * P
    if rs[RS_DIRTY] != 0.0:
        n = int(rs[RS_N_TOUCHED])
        n_touched = n - n - 1  # ``_prior_listed``: the list where it follows every change of the row
        if rs[RS_HAS_LIST] != 0.0 and sf[SF_N_LEARNED] == rs[RS_LISTED_AT] + n:
            n_touched = n
        n_touched = _ascending(touched, n_touched)  # as ``prior_refit_packed`` sorts it
        nk = int(rs[RS_NK])
        p = int(rs[RS_NC])
        knots = rs[h : h + nk]
        coef = rs[h + 2 * P : h + 2 * P + p]
        centres, grid, scratch, incr, _, _ = prior_views_unowned(buf, B, order)
        snap, kept, M, pw, listed, M6 = scratch
        work = _river_work(rs, o, P, k1)
        u = stored_unit(sf, sf[SF_KIND])
        served, kappa, have_kappa, total, pos_total, t_pos, t_neg = _refit_kept(
            sf, SF_HEADER + (B - B), B, u, max(1, B // 64), centres, grid, start, snap, kept, M, pw, listed, M6,
            order, int(rs[RS_N_KNOTS]), knots, basis, rs[RS_INCREMENTAL] != 0.0, incr, coef, touched, n_touched,
            work,
        )  # fmt: skip
        if served == INCR_NONE:
            rs[RS_KAPPA_FOUND] = kappa
            rs[RS_HAVE_KAPPA] = 1.0 if have_kappa else 0.0
            rs[RS_N_SORTED] = n_touched
            return STOP_FULL
        # the map: moved knots from the scratch, the coefficients (the strength is above 0 here)
        if served != INCR_SERVED:
            new = work[10]
            for i in range(nk):
                rs[h + i] = new[i]
        x, beta = work[8], work[9]
        for i in range(nk):
            rs[h + P + i] = rs[h + i]
        for i in range(p):
            rs[h + 2 * P + i] = x[i]
            rs[h + 3 * P + i] = beta[i]
        rs[RS_NBK] = nk
        _record_refit(rs, sf, kappa, total, pos_total, t_pos, t_neg)
    return _served(s, rs, h, P, k1, o + 2 * P * k1 + 9 * P + k1)


@jit
def prior_river_full(s, sf, si, buf, start, basis, touched, rs):
    """The refit :func:`prior_river_pair` left with ``STOP_FULL`` (``prior_refit_packed``'s full refit,
    ``ispline_prior_stream._refit_full``, from the strength it found) and the served probability of
    ``s``; returns it, or ``STOP_ENGINE`` or ``STOP_REFUTED`` as :func:`prior_river_pair` does."""
    B = si[SI_B]
    order = int(rs[RS_ORDER])
    k1 = order + 1
    P = B + 2 * k1
    h = RS_HEADER + B - B
    knots = rs[h : h + int(rs[RS_NK])]
    basis_knots = rs[h + P : h + P + int(rs[RS_NBK])]
    coef = rs[h + 2 * P : h + 2 * P + int(rs[RS_NC])]
    centres, grid, scratch, incr, pos_w, neg_w = prior_views(buf, B, order)
    snap, kept, M, pw, listed, M6 = scratch
    u = stored_unit(sf, sf[SF_KIND])
    code, kappa, nk, nc, nb, total, pos_total, t_pos, t_neg = _refit_full(
        sf, SF_HEADER + (B - B), B, u, max(1, B // 64), centres, grid, start, snap, kept, M, pw, listed, M6, order,
        int(rs[RS_N_KNOTS]), np.empty(0), B < 0, coef > 0.0, knots, basis_knots, basis, pos_w, neg_w,
        int(rs[RS_FLOOR]), rs[RS_INCREMENTAL] != 0.0, incr, coef, touched, int(rs[RS_N_SORTED]), rs[RS_KAPPA_FOUND],
        rs[RS_HAVE_KAPPA] != 0.0,
    )  # fmt: skip
    if code != REFIT_DONE:
        rs[RS_CODE] = code
        return STOP_ENGINE
    # the map (``nk`` may be ``knots`` itself: its section written onto itself)
    m, p = nk.shape[0], nc.shape[0]
    rs[h : h + m] = nk
    rs[h + P : h + P + m] = nk
    rs[h + 2 * P : h + 2 * P + p] = nc
    rs[h + 3 * P : h + 3 * P + p] = nb
    rs[RS_NK] = m
    rs[RS_NBK] = m
    rs[RS_NC] = p
    _record_refit(rs, sf, kappa, total, pos_total, t_pos, t_neg)
    if not kappa > 0.0:
        return STOP_REFUTED
    return _served(s, rs, h, P, k1, h + 4 * P + 2 * P * k1 + 9 * P + k1)
