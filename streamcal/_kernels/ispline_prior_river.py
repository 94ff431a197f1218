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

``rs`` float64: the scalars ``RS_*`` (``RS_HEADER``), then four sections of ``P = B + 2 (order + 1)``
(``rs_size``): the knots, the basis cache's knots, the coefficients and the B-spline
coefficients of the current map, their counts ``RS_NK``, ``RS_NBK``, ``RS_NC``.
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels._config import jit
from streamcal._kernels.histogram import KIND_UNBOUNDED, SF_KIND, SF_N_LEARNED, SI_B, histogram_learn_one_inplace
from streamcal._kernels.ispline import bspline_combination_score
from streamcal._kernels.ispline_prior_stream import REFIT_DONE, TOUCHED_MAX, prior_refit_packed

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
RS_HEADER = 24

STOP_ENGINE = -1.0  # the label learned, the refit the engine's (``RS_CODE``): nothing served
STOP_REFUTED = -2.0  # the label learned and refitted, the prior's strength found 0: nothing served


def rs_size(B: int, order: int) -> int:
    """The size of the river state ``rs`` for ``B`` buckets and splines of order ``order``."""
    return RS_HEADER + 4 * (B + 2 * (order + 1))


@jit
def prior_river_pair(b, sl, y, w, s, sf, si, buf, start, basis, touched, rs):
    """The kept label (bucket ``b`` >= 0, score ``sl``, label ``y``, weight ``w``; none where ``b`` < 0)
    learned into the window (``histogram_learn_one_inplace``, event time 0) and listed, the refit
    under the prior where labels came since the last one (``prior_refit_packed`` on the state's
    arrays: the histogram's ``sf``, ``si``, the prior's buffer ``buf``, its warm start ``start``, the
    basis cache ``basis`` and the list ``touched``), and the served probability of ``s``. Returns
    the probability, or ``STOP_*`` (nothing served); for a NaN ``s`` the label alone, NaN."""
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
    P = B + 2 * (order + 1)
    h = RS_HEADER + B - B  # an int64, not the constant's literal
    if rs[RS_DIRTY] != 0.0:
        n = int(rs[RS_N_TOUCHED])
        n_touched = n - n - 1  # ``_prior_listed``: the list where it follows every change of the row
        if rs[RS_HAS_LIST] != 0.0 and sf[SF_N_LEARNED] == rs[RS_LISTED_AT] + n:
            n_touched = n
        knots = rs[h : h + int(rs[RS_NK])]
        basis_knots = rs[h + P : h + P + int(rs[RS_NBK])]
        coef = rs[h + 2 * P : h + 2 * P + int(rs[RS_NC])]
        code, kappa, nk, nc, nb, total, pos_total, t_pos, t_neg = prior_refit_packed(
            sf, buf, B, start, order, int(rs[RS_N_KNOTS]), np.empty(0), B < 0, knots, basis_knots, basis,
            int(rs[RS_FLOOR]), rs[RS_INCREMENTAL] != 0.0, coef, touched, n_touched,
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
        if not kappa > 0.0:
            return STOP_REFUTED
    nk = int(rs[RS_NK])
    p = int(rs[RS_NC])
    v = bspline_combination_score(s, rs[h : h + nk], order + 1, rs[h + 3 * P : h + 3 * P + p])
    return min(max(v, rs[RS_LOW]), rs[RS_HIGH])
