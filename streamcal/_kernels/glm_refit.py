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
rule and for rounding) the strength is 0 exactly as the kernel would find it; otherwise ``D`` is
refitted (:func:`score_prior_strength`: from its last fit by :func:`prior_strength_warm`, which
certifies its answer, or by the kernel from its cold start), and where it finds 0 its fit becomes
the new anchor. The warm start is state and the anchor is not.

Platt's refit from Taylor moments. One event changes one bucket, and Platt's optimum moves by
about ``1 / T`` of a window of weight ``T``; a pass over the buckets per refit costs more than
everything else together. About an anchor ``a`` (the optimum at the last pass) the logistic
function at bucket ``b`` is its Taylor series in ``u_b = delta . (x_b, 1)``, ``delta = beta - a``:
``sigma(v_b) = sum_k c_k(a . z_b) u_b^k`` with ``c_k = sigma^(k) / k!``. The moments
``M[k, m] = sum_b n_b c_k(a . z_b) x_b^m`` (``k <= MOM_K``) then give the gradient and Hessian at
any ``beta`` near ``a`` as polynomials in ``delta``, and one event updates them in ``O(MOM_K^2)``
(:func:`glm_learn_one_inplace`; the events leaving a window come out the same way). Newton's
method runs on that model (:func:`moments_solve`), and its answer is certified by the
self-concordant bound of ``glm_refit_histogram_inplace`` with the model's errors included:
``sigma`` is analytic with ``|sigma| <= 1`` on every disc of radius ``pi / 2`` about a real
point, so by Cauchy's estimate ``|c_k| <= (2 / pi)^k``, and the tails beyond ``MOM_K`` are bounded
through the absolute moments ``S_m = sum_b n_b |x_b|^m`` (the gradient's error ``e``, the Hessian's
``E``; ``H >= (1 - ||E|| / lambda_min) Hhat`` widens every ``H^-1``-norm). Where the bound does
not certify ``proba_tol`` (the optimum moved too far from the anchor, ``MOM_MAX_UPDATES`` events
since the anchor), the refit runs its passes and rebuilds the moments about their answer. As in
the passes, the rounding of the sums is not part of the bound (it is far below it: the moments are
rebuilt after at most ``MOM_MAX_UPDATES`` events). The moments are
state (a calibrator restored from them refits exactly as the original did); the prior's anchor
is not (it decides only whether the prior kernel runs, not what the refit returns).

Platt's moments while the prior holds. The pseudo-counts are ``m_b = kappa (n_b + f_b)`` at rate
``r_b`` (probability inputs), ``f_b`` the floor's weight (:func:`add_prior_pseudo_counts`), so the
risk is ``R_data + kappa R_prior`` and, about the same anchor, the moments of the fitted histogram
are ``(1 + kappa) M + kappa F`` with ``F[k, m] = sum_b f_b c_k(v_b) x_b^m``, and ``kappa (sum_b n_b
r_b x_b^j + sum_b f_b r_b x_b^j)`` more positive weight. ``mom`` keeps ``F``, the floor's absolute
moments and those rate sums after the data's (``MOM_FL_*``): an event adds to the rate sums, and
where its bucket starts or stops holding data its floor weight changes (:func:`_floor_event`); a
move of ``FLOOR_SPAN``'s span marks them stale. With the strength of the refit,
:func:`prior_moments_solve` forms the combined moments and runs :func:`moments_solve`'s Newton
method and certificate on them, the tails bounded on discs of radius ``WIDE_RADIUS`` (2.8, inside
the poles at ``+-i pi``, where ``|sigma| <= 1 / sin 2.8``: ``|c_9|`` bounded about 60 times below
``(2 / pi)^9``; the prior's ``D`` block likewise). Where it does not certify, or the floor moments
are stale, :func:`prior_moments_refit` rebuilds the data's and the floor's moments about the last
fit, an event or so from the optimum (:func:`moments_floor_rebuild`, one loop for both), and solves
again; only where that does not certify either do the passes run and rebuild both about their
answer. They are state with the data's moments. (The map's solve where the prior adds nothing keeps
the ``pi / 2`` disc, and so its bits.)

Platt's and GEV's prior strength from ``D``'s block. For probability inputs ``D`` is a logistic
regression on ``x_b = logit(r_b)``, Platt's own kind of model, so ``mom`` also keeps Taylor moments of
``D``'s risk about ``D``'s last fit (``MOM_D``), current per event like the map's; the refit solves
``D`` on them and certifies its maximum within ``PRIOR_D_TOL`` (:func:`prior_strength_moments`,
:func:`platt_prior_strength`), the passes of :func:`score_prior_strength` running where it cannot.
GEV's refit takes its strength the same way (the block depends on the histogram alone, not on
the map's link).

GEV's lazy shapes. With ``xi="auto"`` only the served shape's fit reaches a prediction; the
other shapes decide only which shape is served. Where the predicted starts are current (and
follow the prior's strength: below), the refit refits the served shape first, then each other shape only where
:func:`_shape_brier_lower_bound` (a lower bound on the Brier score its refit would find, from
the values its block of ``steps`` keeps current, without a pass) does not lie above the served
shape's score plus both refits' error (:func:`_served_bar`); the others wait (``ok[k] == 2``),
their blocks following their last fit, and their bound stands in their Brier score, so the
lowest score still picks the shape that refitting all of them would pick.

GEV's served shape without a pass. One event moves the served shape's optimum by about ``1/N``
of a window of weight ``N``, and its block keeps the risk's gradient, Hessian, third and fourth
derivatives at its last fit current through the events since. Where every other shape waits,
the refit first solves that fourth-order model of the served shape's risk
(:func:`_served_certified`) and serves its answer without a pass where a bound certifies every
served probability within ``SERVE_TOL`` of the optimum's (the model's error from the bounds on
the GEV density's second and third derivatives over every bucket's band of ``v``, the optimum's
distance from the curvature's lower bound of :func:`_shape_brier_lower_bound`) and the other
shapes' Brier bounds lie above the served shape's certified upper bound (``ok`` 3 for the served
shape; its block keeps following its last fit, so the next refit's model covers every event
since). Otherwise the refit runs as before: the served shape's passes from its predicted start.

GEV's shapes while the prior holds. The fitted row is the data plus ``kappa`` times the prior's
pattern ``(n_b + f_b) (r_b, 1 - r_b)``, so every value a block keeps is the data's plus ``kappa``
times the pattern's. Where the prior holds (probability inputs, unit 1, a floor that changes only
where a bucket starts or stops holding data), the passes also sum the data's part
(``glm_refit_histogram_inplace``'s ``dw``), each block keeps the pattern's values at its fit (the
row's less the data's, over ``kappa_0``) and their change by the events (:func:`_pattern_add`), and
the predicted start, the lazy shapes' bound and the served shape's certificate read a scratch
block whose change since the fit adds ``kappa`` times the pattern's change plus ``kappa - kappa_0``
times its value at the fit (:func:`_steps_effective`, with the bounds' widenings there).

Arrays (no validation; see ``streamcal.gev.calibrator`` for their owner):

- ``fit`` (float64, ``FIT_SIZE``): the served fit's scalars, at the ``FIT_*`` indices;
- ``betas`` (S, 2), ``xis`` (S), ``has_warm`` (S, int64), ``briers`` (S), ``ok`` (S, int64):
  per candidate shape, its coefficients, shape, whether it has a previous fit, its Brier score
  (or the bound of a shape that waited) and whether this refit's Newton iteration succeeded
  (1; 2 where the shape waited, 3 where the served shape's refit was certified without a pass,
  0 where it needs the damped full refit);
- ``pos_w``, ``neg_w`` (B): the fitted histogram in real units, prior pseudo-counts included;
- ``pc`` (5, B): per bucket, the prior's log-odds ``logit(r_b)``, ``log r_b``, ``log(1 - r_b)``
  and the anchor's log-likelihood terms ``log sigma(z_b)``, ``log sigma(-z_b)``;
- ``anchor`` (``ANCHOR_SIZE``): ``[valid, a, b, A, B]``, ``D``'s fit in its standardised and raw
  coefficients, then the certificate's running sums at the ``ANCHOR_*`` indices, then the prior
  fit's warm start at ``ANCHOR_PRIOR`` (``PRIOR_*``; state, the calibrator's ``_glm_prior_start``)
  and this refit's scratch of the same layout at ``ANCHOR_PRIOR_NEXT``;
- ``table`` (``MOM_K + 1``, ``MOM_K + 2``): :func:`logistic_taylor_table`; ``mom`` (``MOM_SIZE``): the
  Taylor moments at the ``MOM_*`` indices; ``pw`` (``2 (MOM_K + 1)``): scratch.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels import histogram as _h
from streamcal._kernels import prior as _p
from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.gev import (
    GOOD_LOG_SLOPE,
    _add_powers4,
    _canonical_cdf_pdf_slopes,
    _quad_inv,
    _support_ranges,
    gev_lower,
    gev_t_u,
    gev_upper,
    glm_map_one,
    glm_refit_histogram_inplace,
    intercept_only_inplace,
    intercept_root,
)

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
FIT_RUN_LOW = 10  # GEV: the rates of the fitted histogram's two end runs (:func:`end_run_bounds`)
FIT_RUN_HIGH = 11
FIT_SIZE = 12

# ``anchor``: D's fit, then the running sums of the certificate (stored units), kept by the
# learn kernel while the histogram's fingerprint agrees
ANCHOR_SUMS_VALID = 5
ANCHOR_N_LEARNED = 6
ANCHOR_T_POS = 7
ANCHOR_T_NEG = 8
ANCHOR_N = 9
ANCHOR_SX = 10
ANCHOR_SXX = 11
ANCHOR_LS = 12
ANCHOR_LL = 13
ANCHOR_UPDATES = 14
# then the prior fit's warm start (state, see ``prior_strength_warm``), ``PRIOR_SIZE`` values:
PRIOR_VALID = 0  # 1.0 once D has a fit
PRIOR_A = 1  # D's standardised coefficients and the standardisation ``v = (x - mean) scale``
PRIOR_B = 2
PRIOR_MEAN = 3
PRIOR_SCALE = 4
PRIOR_STEP_VALID = 5  # 1.0 while the change since the fit is tracked (the fingerprint agrees)
PRIOR_N_LEARNED = 6  # the histogram's fingerprint at the last update
PRIOR_T_POS = 7
PRIOR_T_NEG = 8
PRIOR_H = 9  # D's data Hessian at the fit (3 values, stored units)
PRIOR_DG = 12  # the data gradient's change there since the fit (2 values, stored units)
PRIOR_SIZE = 14
ANCHOR_PRIOR = 15
ANCHOR_PRIOR_NEXT = ANCHOR_PRIOR + PRIOR_SIZE  # scratch: this refit's prior fit, in the same layout
ANCHOR_SIZE = ANCHOR_PRIOR_NEXT + PRIOR_SIZE
ANCHOR_MAX_UPDATES = 4096.0  # the running sums are recomputed by a pass after this many events

PC_OFF = 0
PC_LOG_R = 1
PC_LOG_1MR = 2
PC_L1 = 3
PC_L0 = 4

FLOOR_THINNED = 0  # the score prior's floors (``streamcal._prior.score_prior``)
FLOOR_SPAN = 1
FLOOR_TRAFFIC = 2
FLOOR_SPREAD = 3

OP_LEARN = 1  # ``streamcal._operations.OP_*``
OP_PREDICT = 2

# Platt's Taylor moments (see the module notes): ``mom`` (float64, ``MOM_SIZE``)
MOM_K = 8  # the order of the Taylor expansion of the logistic function about the anchor
MOM_VALID = 0  # 1.0 while the moments describe the histogram (the fingerprint below agrees)
MOM_B0 = 1  # the anchor (slope, intercept)
MOM_B1 = 2
MOM_N_LEARNED = 3  # the histogram's fingerprint at the last update: events learned, class totals
MOM_T_POS = 4
MOM_T_NEG = 5
MOM_X_LO = 6  # a range of features holding every non-empty bucket's
MOM_X_HI = 7
MOM_UPDATES = 8  # events added or removed since the moments were built
MOM_P0 = 9  # sum of positive weight, and of positive weight times x (stored units)
MOM_P1 = 10
MOM_S = 11  # S_m = sum_b n_b |x_b|^m, m = 0 .. MOM_K + 2 (stored units)
MOM_NS = MOM_K + 3
MOM_M = MOM_S + MOM_NS  # M[k, m] = sum_b n_b c_k(v_b) x_b^m, k = 0 .. MOM_K, m = 0 .. MOM_K + 1
MOM_NCOL = MOM_K + 2
MOM_DATA_SIZE = MOM_M + (MOM_K + 1) * MOM_NCOL  # the data's moments end here; the prior's follow
# the score prior's floor moments (see the module notes), kept about the same anchor: while valid
# (and the data's moments current) the floor weights ``f_b`` of the pseudo-counts
# ``m_b = kappa (n_b + f_b)`` are those of the histogram the moments describe
MOM_FL_VALID = MOM_DATA_SIZE  # 1.0 while the floor moments describe the histogram (``MOM_REFUSED``: see there)
MOM_FL_KIND = MOM_DATA_SIZE + 1  # the floor's rule (``FLOOR_*``)
MOM_FL_FIRST = MOM_DATA_SIZE + 2  # the first and last buckets holding data (``FLOOR_SPAN``'s span)
MOM_FL_LAST = MOM_DATA_SIZE + 3
MOM_FL_X_LO = MOM_DATA_SIZE + 4  # a range of features holding every bucket with floor weight
MOM_FL_X_HI = MOM_DATA_SIZE + 5
MOM_FL_R0 = MOM_DATA_SIZE + 6  # sum_b n_b r_b and sum_b n_b r_b x_b (the data's weight, stored units)
MOM_FL_R1 = MOM_DATA_SIZE + 7
MOM_FL_F = MOM_DATA_SIZE + 8  # sum_b f_b, sum_b f_b r_b, sum_b f_b r_b x_b (real units)
MOM_FL_FR0 = MOM_DATA_SIZE + 9
MOM_FL_FR1 = MOM_DATA_SIZE + 10
MOM_FL_S = MOM_DATA_SIZE + 11  # sum_b f_b |x_b|^m, m = 0 .. MOM_K + 2
MOM_FL_M = MOM_FL_S + MOM_NS  # sum_b f_b c_k(v_b) x_b^m, as ``MOM_M``
MOM_D = MOM_FL_M + (MOM_K + 1) * MOM_NCOL
# then the score prior's ``D`` (:func:`prior_strength_moments`): a block in the data moments' layout,
# with the feature ``x_b = logit(r_b)`` and about ``D``'s fit in raw coefficients (slope, intercept
# of ``z_b = slope x_b + intercept``), then, at these offsets in the block, ``sum_b n_b x_b``, the
# prior's log-likelihood ``sum_b (pos_b log r_b + neg_b log(1 - r_b))`` and ``sum_b n_b softplus(z_b)``
# at the block's anchor (stored units)
D_SX = MOM_DATA_SIZE
D_LS = MOM_DATA_SIZE + 1
D_SP = MOM_DATA_SIZE + 2
D_SIZE = MOM_DATA_SIZE + 3
MOM_SIZE = MOM_D + D_SIZE
MOM_SIZE_BEFORE_D = MOM_D  # the layout of states saved before the block
#: ``mom[MOM_FL_VALID]`` after :func:`prior_moments_refit` rebuilt the moments for this histogram
#: and the solve on them refused: the refit's passes follow and rebuild them about their answer.
#: A repeat of that refit on the same state (the river face's one call hands such a refit to the
#: full refit, which runs the same first steps) then goes to the passes at once, as the first
#: did, rather than rebuilding about another anchor: so the two faces keep the same bits. Every
#: reader other than :func:`prior_moments_refit` takes it as stale.
MOM_REFUSED = 2.0
#: the moments are rebuilt after this many events, and the solve refused beyond this bound of
#: ``2 |delta . z_b| / pi`` (the Taylor tail's ratio)
MOM_MAX_UPDATES = 512
MOM_MAX_RHO = 0.25
TWO_OVER_PI = 0.6366197723675814
#: the prior's paths (:func:`prior_moments_solve`, :func:`prior_strength_moments`) bound the Taylor
#: tails by Cauchy's estimate on discs of radius ``WIDE_RADIUS`` about a real point: inside ``pi``
#: (the logistic's poles lie at ``(2 j + 1) pi i``), where ``|sigma| <= 1 / sin(WIDE_RADIUS)``
#: (on ``|Im z| = y > pi / 2``, ``|1 + exp(-z)| >= sin(y)``), so ``|c_k| <= WIDE_SUP
#: WIDE_INV_R^k``: at order 9 about 60 times below ``(2 / pi)^9``
WIDE_RADIUS = 2.8
WIDE_INV_R = 1.0 / WIDE_RADIUS
WIDE_SUP = 1.0 / math.sin(WIDE_RADIUS)
_NARROW = np.bool_(False)  # NumPy booleans, not literals (one compiled ``_moments_solve``)
_WIDE = np.bool_(True)

# GEV's predicted start and lazy shapes (see the module notes): ``steps`` (float64,
# ``steps_size(S)``; empty for Platt), a fingerprint of the histogram as in ``mom`` and the range
# of the non-empty buckets' features, then one block per candidate shape
STEP_VALID = 0  # 1.0 while the blocks describe the histogram (the fingerprint agrees)
STEP_N_LEARNED = 1
STEP_T_POS = 2
STEP_T_NEG = 3
STEP_X_LO = 4  # a range of features holding every bucket a block follows (it widens with the events)
STEP_X_HI = 5
STEP_HEADER = 6
STEP_B0 = 0  # in a block: the shape's fit at its last refit, and its shape
STEP_B1 = 1
STEP_XI = 2
STEP_CURV = 3  # the curvature there (``glm_refit_histogram_inplace``'s ``curv``, stored units)
STEP_BRIER = 10  # the Brier score at the fit, and its gradient, kept current by the events since
STEP_BG = 11
STEP_STEEP = 13  # the Hessian's part from the steep buckets (3 values; events leaving do not count)
STEP_V_LO = 16  # the range of v over the other buckets (it only widens between refits)
STEP_V_HI = 17
STEP_VI_LO = 18  # the range of v over the buckets inside the support R_xi (it only widens)
STEP_VI_HI = 19
STEP_V_OUT = 20  # the v of the bucket past the support's end nearest to it (xi < 0: its least, xi > 0: its most)
STEP_Q = 21  # the fourth derivatives at the last pass's point (5 values, stored units)
STEP_LAZY = 23  # the values of ``glm_refit_histogram_inplace``'s ``curv`` (from STEP_CURV)
STEP_SCALED = 13  # of which the first in stored units (then values of v, then STEP_Q's, stored units)
STEP_DG = 26  # the data gradient's change at that fit since then (2 values, stored units)
STEP_DH = 28  # the data Hessian's change (3 values)
STEP_SINCE = 31  # events since the shape's last refit
STEP_GONE = 32  # the stored weight of the events that left the window since then
STEP_DT = 33  # the third derivatives' change at that fit (4 values, as ``STEP_CURV + 3``)
STEP_DQ = 37  # the fourth derivatives' change (5 values, as ``STEP_Q``)
STEP_UNIT = 42  # the histogram's stored unit at the shape's last refit
# while the score prior holds (probability inputs, unit 1): the fitted row is the data plus
# ``kappa`` times the prior's pattern ``(n_b + f_b) (r_b, 1 - r_b)``, whose values at the fit
# and their change by the events are kept apart, so that the model follows ``kappa``
# (:func:`_steps_effective`)
STEP_KAPPA = 43  # the prior's strength at the shape's last refit (0: the prior added nothing)
STEP_P_VALID = 44  # 1.0 where the prior pattern's values below are kept (the strength above 0)
STEP_P_FLIP = 45  # the floor weight a bucket gains when it starts holding data (real units)
STEP_NFIT = 46  # the fitted row's weight at the fit
STEP_MP0 = 47  # the prior pattern's weight at the fit
STEP_PGONE = 48  # the prior pattern's weight that left with the events since
# the prior pattern's gradient, Hessian, third and fourth derivatives, Brier score and its
# gradient at the fit (``P_*`` offsets), then their change by the events since
P_G = 0
P_H = 2
P_T = 5
P_Q = 9
P_B = 14
P_BG = 15
P_SIZE = 17
STEP_PX0 = 49
STEP_DPX = STEP_PX0 + P_SIZE
STEP_PS0 = STEP_DPX + P_SIZE  # its Hessian's part from the steep buckets at the fit (3 values)
STEP_PSP = STEP_PS0 + 3  # that part's growth by the events since (events leaving do not count)
STEP_BLOCK = STEP_PSP + 3
STEP_MAX_DV = 0.1  # a predicted step moving v by more than this at the feature range is not taken
STEP_MODEL_MAX_DV = 1.0  # the same for the fourth-order model's root (:func:`_steps_start`)
#: the served shape's refit without a pass (:func:`_served_certified`) stands where its served
#: probabilities are certified within this of the optimum's
SERVE_TOL = 1e-10
#: a waiting shape's model bound (:func:`_served_certified` without ``SERVE_TOL``) reaches this
#: many times its move ``delta`` of ``v`` further (its model lies further from its optimum)
MODEL_SPARE = 0.5
STEP_FLOOR = 1e-12  # the Hessian weights' floor (``glm_refit_histogram_inplace``'s ``floor``)
#: a shape waits at most this many events for its refit (the running sums' rounding stays far
#: below the bound's margin)
STEP_MAX_SINCE = 4096.0


def steps_size(shapes: int) -> int:
    """The length of ``steps`` for ``shapes`` candidate GEV shapes: the header, one block per
    shape and a scratch block (:func:`_steps_effective`; the data's part of a pass after
    ``STEP_PX0`` there)."""
    return STEP_HEADER + STEP_BLOCK * (shapes + 1)


# The river face's packed buffer (float64, ``buf_size(S)`` for ``S`` shapes): the per-call
# arrays of the refit as views of one array, so that Platt's refit-and-serve call unboxes four
# arrays instead of ten: the river constants (``glm_river_proba``'s ``k``), ``anchor``, ``mom``,
# ``pw``, ``fit``, ``betas`` (S x 2, row-major), ``briers`` (S)
BUF_CONSTS = 0
BUF_N_CONSTS = 8
BUF_ANCHOR = BUF_CONSTS + BUF_N_CONSTS
BUF_MOM = BUF_ANCHOR + ANCHOR_SIZE
BUF_PW = BUF_MOM + MOM_SIZE
BUF_FIT = BUF_PW + 2 * (MOM_K + 1)
BUF_BETAS = BUF_FIT + FIT_SIZE


def buf_size(shapes: int) -> int:
    """The packed buffer's length for ``shapes`` candidate shapes: its briers, then the scratch
    of Platt's solve with the score prior (``MOM_DATA_SIZE`` values, :func:`prior_moments_solve`)."""
    return BUF_BETAS + 3 * shapes + MOM_DATA_SIZE


#: nats between the certified bound of ``log kappa`` and ``log(KAPPA_MIN)``, on top of a margin
#: of ``1e-6`` times the log-likelihoods (the prior kernel stops Newton's method once a step
#: gains at most ``1e-10`` of its log-likelihood; rounding of the sums is far below both)
CERTIFICATE_MARGIN = 1.0

TINY = 2.2250738585072014e-308  # ``streamcal._prior.TINY``
ONE_BELOW = 1.0 - 1.1102230246251565e-16  # ``streamcal._prior.ONE_BELOW``
NOT_SURE_LOW = 1.1102230246251565e-16  # ``streamcal._prior.NOT_SURE_LOW``


def logistic_taylor_table(order: int = MOM_K):
    """``table[k, d]``: the coefficient of ``p**d`` in ``c_k = sigma^(k)(v) / k!`` as a polynomial
    in ``p = sigma(v)`` (``sigma' = p (1 - p)``), ``k = 0 .. order`` (float64, exact integers
    divided by ``k!``)."""
    import math as _math

    polys = [[0, 1]]  # sigma itself: p
    for _ in range(order):
        q = polys[-1]
        dq = [d * q[d] for d in range(1, len(q))]  # d/dp
        nxt = [0] * (len(q) + 1)
        for d, a in enumerate(dq):  # times p - p^2
            nxt[d + 1] += a
            nxt[d + 2] -= a
        polys.append(nxt)
    table = np.zeros((order + 1, order + 2))
    for k, q in enumerate(polys):
        for d, a in enumerate(q):
            table[k, d] = a / _math.factorial(k)
    return table


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
        r = _p.prior_rate(centres[j], 0.5, np.bool_(True))
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
def _zero_certified(anchor, n_all, mean, var, log_s, loglik):
    """The certificate from the row's sums (real units): True when the prior kernel returns 0."""
    if not (anchor[0] == 1.0 and n_all > 0.0 and var > 0.0):
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
def prior_strength_is_zero(h, h0, B, unit, pc, anchor):
    """True when the anchor certifies that the prior kernel returns 0 on the row
    ``h[h0 : h0 + 2B]`` (probability inputs; see the module notes)."""
    if anchor[0] != 1.0:
        return False
    n_all, mean, var, log_s, loglik = _prior_sums(h, h0, B, unit, pc)
    return _zero_certified(anchor, n_all, mean, var, log_s, loglik)


@jit_noalloc(forceinline=True)
def _running_sums_current(anchor, sf):
    return (
        anchor[ANCHOR_SUMS_VALID] == 1.0
        and anchor[ANCHOR_N_LEARNED] == sf[_h.SF_N_LEARNED]
        and anchor[ANCHOR_T_POS] == sf[_h.SF_T_POS]
        and anchor[ANCHOR_T_NEG] == sf[_h.SF_T_NEG]
        and anchor[ANCHOR_UPDATES] < ANCHOR_MAX_UPDATES
    )


@jit_noalloc(forceinline=True)
def _running_sums_fingerprint(anchor, sf):
    anchor[ANCHOR_N_LEARNED] = sf[_h.SF_N_LEARNED]
    anchor[ANCHOR_T_POS] = sf[_h.SF_T_POS]
    anchor[ANCHOR_T_NEG] = sf[_h.SF_T_NEG]


@jit_noalloc(forceinline=True)
def _running_sums_add(anchor, pc, b, pos_part, ws):
    """One event's stored weight ``ws`` (negative: leaving) at bucket ``b`` in the running sums."""
    x = pc[PC_OFF, b]
    neg_part = ws - pos_part
    anchor[ANCHOR_N] += ws
    anchor[ANCHOR_SX] += ws * x
    anchor[ANCHOR_SXX] += ws * x * x
    anchor[ANCHOR_LS] += pos_part * pc[PC_LOG_R, b] + neg_part * pc[PC_LOG_1MR, b]
    anchor[ANCHOR_LL] += pos_part * pc[PC_L1, b] + neg_part * pc[PC_L0, b]
    anchor[ANCHOR_UPDATES] += 1.0


@jit_noalloc
def prior_strength_is_zero_running(sf, B, u, pc, anchor):
    """:func:`prior_strength_is_zero` on the histogram ``sf``, from the running sums where they
    are current (they are rebuilt by one pass otherwise)."""
    if anchor[0] != 1.0:
        return False
    if not _running_sums_current(anchor, sf):
        n_all, mean, var, log_s, loglik = _prior_sums(sf, _h.SF_HEADER, B, 1.0, pc)  # stored units
        anchor[ANCHOR_N] = n_all
        anchor[ANCHOR_SX] = n_all * mean
        anchor[ANCHOR_SXX] = n_all * (var + mean * mean)
        anchor[ANCHOR_LS] = log_s
        anchor[ANCHOR_LL] = loglik
        anchor[ANCHOR_UPDATES] = 0.0
        _running_sums_fingerprint(anchor, sf)
        anchor[ANCHOR_SUMS_VALID] = 1.0
    n_all = anchor[ANCHOR_N]
    if not n_all > 0.0:
        return False
    mean = anchor[ANCHOR_SX] / n_all
    var = anchor[ANCHOR_SXX] / n_all - mean * mean
    return _zero_certified(anchor, n_all / u, mean, var, anchor[ANCHOR_LS] / u, anchor[ANCHOR_LL] / u)


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
    anchor[ANCHOR_SUMS_VALID] = 0.0  # the anchor's terms changed: the running sums are rebuilt


@jit_noalloc
def _prior_standardisation(h, h0, B, unit, cen, pc, identity):
    """``(mean, scale)`` of the prior kernel's covariate on the row ``h[h0 : h0 + 2B]``, as that
    kernel computes them (``scale`` 0 where the covariate has no spread)."""
    n_all = 0.0
    sx = 0.0
    sxx = 0.0
    for j in range(B):
        w = h[h0 + j] / unit + h[h0 + B + j] / unit
        if w > 0.0:
            x = pc[PC_OFF, j] if identity else cen[j]
            n_all += w
            sx += w * x
            sxx += w * x * x
    if not n_all > 0.0:
        return 0.0, 0.0
    mean = sx / n_all
    var = sxx / n_all - mean * mean
    sd = math.sqrt(var) if var > 0.0 else 0.0
    return mean, (1.0 / sd if sd > 0.0 else 0.0)


@jit_noalloc
def score_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor):
    """The score prior's strength on the histogram (stored units of ``u``; class totals
    ``t_pos``, ``t_neg`` in real units), as ``streamcal._prior.score_prior`` computes it;
    certified 0 without the prior kernel where the anchor allows (probability inputs).

    Where the prior fit's warm start is valid, :func:`prior_strength_warm` refits ``D`` from it
    and certifies its answer; otherwise (or where it cannot certify) the prior kernel runs from
    its cold start. The warm start becomes this refit's fit where the strength is above 0 (for
    raw scores, at every refit): a refit whose strength is certified 0 without the kernel leaves
    it as it is, so that the warm start, which is state, follows the same path whether or not
    the anchor (which is not state) certified. The anchor is set where the strength is 0."""
    B = si[_h.SI_B]
    if identity and prior_strength_is_zero_running(sf, B, u, pc, anchor):
        return 0.0
    base_rate = (t_pos + c) / ((t_pos + t_neg) + 2.0 * c)
    start = anchor[ANCHOR_PRIOR : ANCHOR_PRIOR + PRIOR_SIZE]
    nxt = anchor[ANCHOR_PRIOR_NEXT : ANCHOR_PRIOR_NEXT + PRIOR_SIZE]
    kappa = -1.0
    if start[PRIOR_VALID] == 1.0:
        predict = identity and _prior_step_current(start, sf)
        kappa = prior_strength_warm(sf, _h.SF_HEADER, B, u, centres, pc, base_rate, identity, start, nxt, predict)
    if kappa < 0.0:
        anchor[1] = 0.0  # the kernel's cold start (0, 0); its fit is written back there
        anchor[2] = 0.0
        kappa = _p.prior_strength_from(
            sf, _h.SF_HEADER, B, u, centres, np.int64(0), np.int64(1), base_rate, identity, anchor[1:3]
        )
        mean, scale = _prior_standardisation(sf, _h.SF_HEADER, B, u, centres, pc, identity)
        nxt[PRIOR_VALID] = 1.0 if scale > 0.0 else 0.0
        nxt[PRIOR_A] = anchor[1]
        nxt[PRIOR_B] = anchor[2]
        nxt[PRIOR_MEAN] = mean
        nxt[PRIOR_SCALE] = scale
        nxt[PRIOR_STEP_VALID] = 0.0  # no Hessian at the fit: no predicted start
    _prior_keep(sf, B, u, pc, anchor, kappa, identity)
    return kappa


@jit_noalloc
def _prior_keep(sf, B, u, pc, anchor, kappa, identity):
    """Keep the fit of ``D`` in ``anchor``'s scratch (``ANCHOR_PRIOR_NEXT``) that found ``kappa``:
    the warm start becomes it where ``kappa`` is above 0 (for raw scores, always), the anchor
    where ``kappa`` is 0 (see :func:`score_prior_strength`)."""
    start = anchor[ANCHOR_PRIOR : ANCHOR_PRIOR + PRIOR_SIZE]
    nxt = anchor[ANCHOR_PRIOR_NEXT : ANCHOR_PRIOR_NEXT + PRIOR_SIZE]
    if kappa > 0.0 or not identity:
        for i in range(PRIOR_SIZE):
            start[i] = nxt[i]
        start[PRIOR_N_LEARNED] = sf[_h.SF_N_LEARNED]
        start[PRIOR_T_POS] = sf[_h.SF_T_POS]
        start[PRIOR_T_NEG] = sf[_h.SF_T_NEG]
    if identity and kappa == 0.0:
        anchor[0] = 0.0
        if nxt[PRIOR_VALID] == 1.0:
            anchor[1] = nxt[PRIOR_A]
            anchor[2] = nxt[PRIOR_B]
            set_anchor(sf, _h.SF_HEADER, B, u, pc, anchor)


@jit_noalloc(forceinline=True)
def _prior_step_current(start, sf):
    """True when the warm start's change since its fit describes the histogram ``sf``."""
    return (
        start[PRIOR_STEP_VALID] == 1.0
        and start[PRIOR_N_LEARNED] == sf[_h.SF_N_LEARNED]
        and start[PRIOR_T_POS] == sf[_h.SF_T_POS]
        and start[PRIOR_T_NEG] == sf[_h.SF_T_NEG]
    )


@jit_noalloc(forceinline=True)
def _prior_step_add(start, pc, b, pos_part, ws):
    """One event's stored weight ``ws`` (negative: leaving) at bucket ``b``, ``pos_part`` of it
    positive, in the change of ``D``'s data gradient at the warm start's fit (probability inputs)."""
    v = (pc[PC_OFF, b] - start[PRIOR_MEAN]) * start[PRIOR_SCALE]
    z = pc[PC_OFF, b] + start[PRIOR_A] + start[PRIOR_B] * v
    res = pos_part - ws * _logistic(z)
    start[PRIOR_DG] += res
    start[PRIOR_DG + 1] += res * v


#: the warm refit of the prior's ``D`` stops once its estimate of ``D``'s maximum
#: log-likelihood is certified within this many nats (``log kappa`` moves by as much)
PRIOR_WARM_TOL = 1e-11
PRIOR_WARM_STEPS = 4  # Newton steps before the warm refit gives way to the prior kernel


@jit_noalloc
def _prior_pass(h, h0, B, unit, cen, pc, identity, raw, m0, s0, a, b):
    """One pass over the row for :func:`prior_strength_warm`: the covariate's sums (weight,
    sum, sum of squares), the prior's log-likelihood ``log_s`` (as the prior kernel sums it),
    the range of ``v = (x - m0) s0`` over the non-empty buckets, and ``D``'s log-likelihood,
    gradient and Hessian (without the ridge) at ``(a, b)`` in that standardisation.
    ``raw``: the raw scores' prior ``(logit r, log r, log(1 - r))`` (unused for probability inputs)."""
    n_all = 0.0
    sx = 0.0
    sxx = 0.0
    log_s = 0.0
    v_lo = np.inf
    v_hi = -np.inf
    ll = 0.0
    g0 = 0.0
    g1 = 0.0
    h00 = 0.0
    h01 = 0.0
    h11 = 0.0
    off, lr, l1mr = raw
    for j in range(B):
        if h[h0 + j] + h[h0 + B + j] > 0.0:  # stored weights: no division for an empty bucket
            p = h[h0 + j] / unit
            n = h[h0 + B + j] / unit
            if identity:
                off = pc[PC_OFF, j]
                x = off
                lr = pc[PC_LOG_R, j]
                l1mr = pc[PC_LOG_1MR, j]
            else:
                x = cen[j]
            n_all += p + n
            sx += (p + n) * x
            sxx += (p + n) * x * x
            if p > 0.0:
                log_s += p * lr
            if n > 0.0:
                log_s += n * l1mr
            v = (x - m0) * s0
            v_lo = min(v_lo, v)
            v_hi = max(v_hi, v)
            z = off + a + b * v
            if z >= 0.0:
                e = math.exp(-z)
                l1 = math.log1p(e)
                ll += -p * l1 + n * (-z - l1)
                q = 1.0 / (1.0 + e)
            else:
                e = math.exp(z)
                l1 = math.log1p(e)
                ll += p * (z - l1) - n * l1
                q = e / (1.0 + e)
            res = p - (p + n) * q
            wq = (p + n) * q * (1.0 - q)
            g0 += res
            g1 += res * v
            h00 += wq
            h01 += wq * v
            h11 += wq * v * v
    return n_all, sx, sxx, log_s, v_lo, v_hi, ll, g0, g1, h00, h01, h11


@jit_noalloc(forceinline=True)
def _start_predicted(start, unit):
    """The warm start's ``(a, b)`` moved by one Newton step on its tracked change since its fit
    (stored units of ``unit``): its predicted optimum, or the start where the step is singular."""
    a = start[PRIOR_A]
    b = start[PRIOR_B]
    ridge = _p.RIDGE
    p00 = start[PRIOR_H] / unit + ridge
    p01 = start[PRIOR_H + 1] / unit
    p11 = start[PRIOR_H + 2] / unit + ridge
    pdet = p00 * p11 - p01 * p01
    if pdet > 0.0 and p00 > 0.0:
        dg0 = start[PRIOR_DG] / unit
        dg1 = start[PRIOR_DG + 1] / unit
        a += (p11 * dg0 - p01 * dg1) / pdet
        b += (p00 * dg1 - p01 * dg0) / pdet
    return a, b


@jit_noalloc
def prior_strength_warm(h, h0, B, unit, cen, pc, base_rate, identity, start, out, predict):
    """The prior kernel's ``kappa`` by Newton's method from the warm start ``start`` (layout
    ``PRIOR_*``), or -1.0 where it cannot certify it within ``PRIOR_WARM_TOL`` in
    ``PRIOR_WARM_STEPS`` steps (then the prior kernel runs). With ``predict`` (the change of the
    data gradient since the fit is tracked) the iteration starts from the predicted optimum
    ``fit + H^-1 dg``, ``H`` the data Hessian at the fit plus the ridge: one pass then usually
    certifies.

    The iteration runs in the start's standardisation, with the ridge on the coefficients of
    the row's own (a linear map of them), one pass per step. The logistic loss's third
    derivative is bounded by its second, so ``D``'s negative log-likelihood is generalised
    self-concordant (Bach, "Self-concordant analysis for logistic regression", 2010): along
    ``d`` its Hessian changes by a factor within ``exp(+-kk ||d||_H)``, ``kk = max_b ||(1,
    v_b)||_{H^-1}``. With ``nu`` the Newton decrement, the optimum lies within ``r <= 2 nu /
    (1 - kk nu)`` in the ``H``-norm, and the maximum is ``f + nu^2 / 2`` within
    ``kk max(r^3, nu^3 exp(kk nu)) / 6``. The fit after the last step, in the row's
    standardisation, and the data Hessian there are written to ``out``."""
    if not (start[PRIOR_VALID] == 1.0 and start[PRIOR_SCALE] > 0.0):
        return -1.0
    m0 = start[PRIOR_MEAN]
    s0 = start[PRIOR_SCALE]
    a = start[PRIOR_A]
    b = start[PRIOR_B]
    if predict:
        a, b = _start_predicted(start, unit)
    ridge = _p.RIDGE
    raw = (0.0, 0.0, 0.0)
    if not identity:
        lr = math.log(base_rate)
        l1mr = math.log1p(-base_rate)
        raw = (lr - l1mr, lr, l1mr)
    f_prev = -np.inf
    for _ in range(PRIOR_WARM_STEPS):
        n_all, sx, sxx, log_s, v_lo, v_hi, f, g0, g1, h00, h01, h11 = _prior_pass(
            h, h0, B, unit, cen, pc, identity, raw, m0, s0, a, b
        )
        if not n_all > 0.0:
            return -1.0
        mean = sx / n_all
        var = sxx / n_all - mean * mean
        if not var > 0.0:
            return -1.0
        scale = 1.0 / math.sqrt(var)
        # the row's standardised coefficients (ac, bc) = J (a, b), and the ridge on them
        j01 = s0 * (mean - m0)
        j11 = s0 / scale
        ac = a + b * j01
        bc = b * j11
        f -= 0.5 * ridge * (ac * ac + bc * bc)
        d00 = h00  # the data Hessian, kept for the next predicted start
        d01 = h01
        d11 = h11
        g0 -= ridge * ac
        g1 -= ridge * (j01 * ac + j11 * bc)
        h00 += ridge
        h01 += ridge * j01
        h11 += ridge * (j01 * j01 + j11 * j11)
        det = h00 * h11 - h01 * h01
        if not (det > 0.0 and h00 > 0.0 and f >= f_prev - 1e-12 * (1.0 + abs(f))):
            return -1.0
        da = (h11 * g0 - h01 * g1) / det
        db = (h00 * g1 - h01 * g0) / det
        nu2 = max(g0 * da + g1 * db, 0.0)
        nu = math.sqrt(nu2)
        kk = math.sqrt(max(_quad_inv(h00, h01, h11, det, 1.0, v_lo), _quad_inv(h00, h01, h11, det, 1.0, v_hi)))
        t = kk * nu
        if not t < 0.5:
            return -1.0
        r = 2.0 * nu / (1.0 - t)
        a += da
        b += db
        if kk * max(r * r * r, nu2 * nu * math.exp(t)) / 6.0 <= PRIOR_WARM_TOL:
            out[PRIOR_VALID] = 1.0
            out[PRIOR_A] = a + b * j01
            out[PRIOR_B] = b * j11
            out[PRIOR_MEAN] = mean
            out[PRIOR_SCALE] = scale
            out[PRIOR_STEP_VALID] = 1.0 if identity else 0.0  # raw scores: the offset moves per event
            # in the fit's standardisation: v = (x - mean) scale = (v0 + s0 (m0 - mean)) / j11
            out[PRIOR_H] = d00 * unit
            out[PRIOR_H + 1] = (d01 - d00 * j01) / j11 * unit
            out[PRIOR_H + 2] = (d11 - 2.0 * d01 * j01 + d00 * j01 * j01) / (j11 * j11) * unit
            out[PRIOR_DG] = 0.0
            out[PRIOR_DG + 1] = 0.0
            k = 2.0 if identity else 1.0
            log_kappa = log_s - (f + 0.5 * nu2) + 0.5 * k * math.log(n_all + 1.0)
            if log_kappa >= math.log(_p.KAPPA_MAX):
                return _p.KAPPA_MAX
            kappa = math.exp(log_kappa)
            return kappa if kappa >= _p.KAPPA_MIN else 0.0
        f_prev = f
    return -1.0


@jit_noalloc
def add_prior_pseudo_counts(pos_w, neg_w, kappa, centres, identity, base_rate, floor_kind, B):
    """Add the score prior's pseudo-counts of strength ``kappa`` to ``pos_w``/``neg_w``
    (:func:`add_prior_pseudo_counts_sums` without its sums)."""
    add_prior_pseudo_counts_sums(pos_w, neg_w, kappa, centres, identity, base_rate, floor_kind, B, 0.0, B < 0)


@jit_noalloc
def add_prior_pseudo_counts_sums(pos_w, neg_w, kappa, centres, identity, base_rate, floor_kind, B, c, runs):
    """Add the score prior's pseudo-counts of strength ``kappa`` to ``pos_w``/``neg_w``, bucket
    by bucket as ``streamcal._prior.score_prior`` computes them. Returns the fitted row's class
    totals ``(s_pos, s_neg)`` (summed over every bucket in order) and, where ``runs``, the
    prefix half of :func:`end_run_bounds` on it: the least ``(c + P_<=j) / (c + W_<=j)`` over
    its non-empty buckets and the prefix sums' ends ``P``, ``W - P`` (else 1.0, 0.0, 0.0).

    A bucket without weight off the thinned grid gets no floor weight under any floor (its
    pseudo-count ``kappa * 0`` would add 0 to 0): it is skipped, the same values. The thinned
    grid (``j % step == step // 2``) is followed by a counter. The totals add the skipped
    buckets' weights too (0, or two that cancel), the prefix sums only those of the buckets
    that hold weight, as :func:`end_run_bounds` does: the same values as the loops they replace."""
    step = max(1, B // 64)
    margin = max(1, B // 16)
    half = step // 2
    first = -1
    last = -1
    if floor_kind == FLOOR_SPAN:  # the span's ends (the only floor that reads them)
        for j in range(B):
            if pos_w[j] + neg_w[j] > 0.0:
                if first < 0:
                    first = j
                last = j
    phase = 0  # ``j % step``
    s_pos = 0.0
    s_neg = 0.0
    low = 1.0
    r_pos = 0.0  # the prefix sums of the buckets that hold weight
    r_neg = 0.0
    for j in range(B):
        on_grid = phase == half
        phase += 1
        if phase == step:
            phase = 0
        n = pos_w[j] + neg_w[j]
        if n == 0.0 and not on_grid:
            s_pos += pos_w[j]  # 0, or weights that cancel (a window's round-off): the totals hold them
            s_neg += neg_w[j]
            continue
        held = 1.0 if n > 0.0 else 0.0
        thinned = float(step) if on_grid else 0.0
        if floor_kind == FLOOR_THINNED:
            m = kappa * (n + thinned)
        elif floor_kind == FLOOR_SPAN:
            if first >= 0 and (j < first - margin or j > last + margin):
                thinned = 0.0
            m = kappa * (n + max(thinned, held))
        elif floor_kind == FLOOR_SPREAD:
            m = kappa * (n + held + thinned * _p.SPREAD_EVENTS / B)
        else:
            m = kappa * (n + held)
        rate = _p.prior_rate(centres[j], base_rate, identity) if identity else base_rate
        p = pos_w[j] + m * rate
        q = neg_w[j] + m * (1.0 - rate)
        pos_w[j] = p
        neg_w[j] = q
        s_pos += p
        s_neg += q
        if runs and p + q > 0.0:
            r_pos += p
            r_neg += q
            low = min(low, (c + r_pos) / (c + (r_pos + r_neg)))
    return s_pos, s_neg, low, r_pos, r_neg


@jit_noalloc
def end_run_bounds(pos_w, neg_w, c, fit):
    """The rates of the two end runs of the histogram ``pos_w``/``neg_w`` among the pseudo-events
    of the finite rule into ``fit[FIT_RUN_LOW]``/``fit[FIT_RUN_HIGH]``: the PAV of the histogram
    plus one pseudo-positive of weight ``c`` below every score and one pseudo-negative above
    gives its lowest block the rate ``min_j (c + P_{<=j}) / (c + W_{<=j})`` and its highest
    ``max_j P_{>=j} / (W_{>=j} + c)`` (prefix and suffix sums of the positive weight ``P`` and
    of all weight ``W``), each bounded by the rate of the whole augmented row,
    ``(T1 + c) / (T + 2c)``, which one block covering it all has (so that low <= high). A GEV
    shape whose support ends above (``xi < 0``: ``F = 1`` past ``v = -1/xi``) serves no
    probability above the high rate, one whose support ends below (``xi > 0``) none below the
    low rate (:func:`glm_served_one`): past its support's end the map would otherwise serve the
    add-``c`` bound, about ``1/T`` from certainty, where the data hold the other class."""
    B = pos_w.shape[0]
    p = 0.0
    n = 0.0
    low = 1.0
    for j in range(B):
        if pos_w[j] + neg_w[j] > 0.0:
            p += pos_w[j]
            n += neg_w[j]
            low = min(low, (c + p) / (c + (p + n)))
    end_run_bounds_from(pos_w, neg_w, c, fit, low, p, n)


@jit_noalloc(forceinline=True)
def end_run_bounds_from(pos_w, neg_w, c, fit, low, t_pos, t_neg):
    """:func:`end_run_bounds` from its prefix half: ``low`` the least prefix rate, ``t_pos``,
    ``t_neg`` where the prefix sums end (the non-empty buckets' totals); the suffix half runs
    here."""
    B = pos_w.shape[0]
    whole = (t_pos + c) / ((t_pos + t_neg) + 2.0 * c)
    low = min(low, whole)
    p = 0.0
    n = 0.0
    high = whole
    for j in range(B - 1, -1, -1):
        if pos_w[j] + neg_w[j] > 0.0:
            p += pos_w[j]
            n += neg_w[j]
            high = max(high, p / ((p + n) + c))
    fit[FIT_RUN_LOW] = low
    fit[FIT_RUN_HIGH] = high


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


NO_KAPPA = -1.0  # :func:`glm_refit_known`'s strength where the refit computes it


@jit_noalloc
def glm_refit_inplace(
    sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
):  # fmt: skip
    """:func:`glm_refit_known` with the score prior's strength computed by the refit."""
    return glm_refit_known(
        sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
        xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps, NO_KAPPA,
    )  # fmt: skip


@jit_noalloc
def glm_refit_known(
    sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps, kappa_in,
):  # fmt: skip
    """Refit the map from the histogram (see the module notes), the score prior's strength
    ``kappa_in`` where it is known (at least 0, with ``prior_on``: what the refit would compute,
    as :func:`gev_logistic_refit` passes it), else ``NO_KAPPA``. Returns 0 when the fit is
    complete (or the window holds no weight: ``fit[FIT_FITTED]`` 0), 1 when some shape
    (``ok[k] == 0``) needs the damped full refit on ``pos_w``/``neg_w``, after which
    :func:`glm_finish_refit` completes it.

    Platt (one logistic shape with a previous fit) first tries its Taylor moments
    (:func:`moments_solve`) where they are current and the prior adds nothing; the passes over
    the buckets run only where that is not certified, and rebuild the moments about their
    answer. GEV in unit 1 reads the histogram's rows where the others read their copy in real
    units, over the buckets that :func:`_held_range` finds (the copy is made where pseudo-counts
    are added or a shape needs the damped full refit); for the logistic member's shapes its
    bounds take their tighter forms, as while the prior holds. GEV starts each shape's Newton
    iteration from its predicted optimum where ``steps`` describes the histogram and the prior
    adds nothing (:func:`_steps_start`), and keeps the curvature of its last pass for the next
    refit. Both take the score prior's strength
    from ``D``'s block where it certifies (:func:`platt_prior_strength`)."""
    B = si[_h.SI_B]
    kind = sf[_h.SF_KIND]
    u = _unit_of(sf, kind)
    predict = code == 0 and _steps_current(steps, sf)
    taylor = code == 1 and xis.shape[0] == 1 and has_warm[0] != 0
    known = kappa_in >= 0.0  # the prior's strength, once computed
    kappa = kappa_in if known else 0.0
    if taylor and moments_current(mom, sf):
        t_pos = sf[_h.SF_T_POS] / u
        t_neg = sf[_h.SF_T_NEG] / u
        if t_pos + t_neg > 0.0:
            if prior_on and not known:
                kappa = platt_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor, table, mom, pw)
                known = True
            if kappa == 0.0 and t_pos * t_neg > 0.0 and moments_solve(mom, pw, u, l2, x_lo, x_hi, tol, betas[0]):
                fit[FIT_DIRTY] = 0.0
                if prior_on:
                    fit[FIT_KAPPA] = 0.0
                fit[FIT_T_POS] = t_pos
                fit[FIT_T_NEG] = t_neg
                fit[FIT_TOTAL] = t_pos + t_neg
                glm_finish_refit(briers, fit, c)
                return 0
            # the prior holds: the same solve on the data's and the floor's moments
            solved = kappa > 0.0 and identity
            prior_args = (pc, floor_kind, kappa, u, l2, (x_lo, x_hi), tol, betas[0], pw, pos_w)
            if solved and prior_moments_refit(sf, si, x, table, mom, *prior_args):
                fit[FIT_DIRTY] = 0.0
                fit[FIT_KAPPA] = kappa
                fit[FIT_T_POS] = t_pos
                fit[FIT_T_NEG] = t_neg
                total = t_pos + t_neg
                fit[FIT_TOTAL] = total + kappa * (total + mom[MOM_FL_F])
                fit[FIT_RUN_LOW] = 0.0
                fit[FIT_RUN_HIGH] = 1.0
                glm_finish_refit(briers, fit, c)
                return 0
    # GEV in unit 1 reads the histogram's rows (``direct``: :func:`_refit_rows`); the logistic
    # member's shapes (the strength known, 0) also take the row's power sums
    direct = code == 0 and u == 1.0
    h_pos = sf[_h.SF_HEADER : _h.SF_HEADER + B]
    h_neg = sf[_h.SF_HEADER + B : _h.SF_HEADER + 2 * B]
    powers = pw[8:13] if direct and kappa_in == 0.0 else pw[:0]
    rows = _refit_rows(sf, B, u, x, c, steps, predict, direct, pos_w, neg_w, powers)
    j0, j1, t_pos, t_neg, x_lo_now, x_hi_now, low = rows
    fit[FIT_DIRTY] = 0.0
    if not t_pos + t_neg > 0.0:
        fit[FIT_FITTED] = 0.0
        return 0
    if prior_on:
        if not known and (taylor or code == 0):
            kappa = platt_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor, table, mom, pw)
        elif not known:
            kappa = score_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor)
        fit[FIT_KAPPA] = kappa
    s_pos = t_pos
    s_neg = t_neg
    if kappa > 0.0:  # the fitted totals, pseudo-counts included, and (GEV) its end runs' prefix half
        if direct:  # the pseudo-counts are added to the copy
            _real_units(sf, B, u, x, pos_w, neg_w)
            direct = False
            j0 = 0
            j1 = B
        base_rate = (t_pos + c) / ((t_pos + t_neg) + 2.0 * c)
        s_pos, s_neg, low, r_pos, r_neg = add_prior_pseudo_counts_sums(
            pos_w, neg_w, kappa, centres, identity, base_rate, floor_kind, B, c, code == 0
        )
    fit[FIT_T_POS] = t_pos
    fit[FIT_T_NEG] = t_neg
    fit[FIT_TOTAL] = s_pos + s_neg
    if code == 0 and kappa > 0.0:  # GEV's map saturates past its support's end: bounded by the end runs
        end_run_bounds_from(pos_w, neg_w, c, fit, low, r_pos, r_neg)
    elif direct:  # the prefix half came with the sums
        end_run_bounds_range(h_pos, h_neg, c, fit, low, t_pos, t_neg, j0, j1)
    elif code == 0:
        end_run_bounds(pos_w, neg_w, c, fit)
    else:
        fit[FIT_RUN_LOW] = 0.0
        fit[FIT_RUN_HIGH] = 1.0
    need_full = 0
    S = xis.shape[0]
    # the curvature for the next refit; while the prior holds, with the data's part apart, where
    # the prior's pattern follows the events (probability inputs, unit 1, a floor that changes
    # only where a bucket starts or stops holding data)
    pattern = kappa > 0.0 and identity and u == 1.0 and floor_kind != FLOOR_SPAN
    keep = code == 0 and (kappa == 0.0 or pattern) and steps.shape[0] > 0
    # the blocks describe the risk now (:func:`_steps_effective`)
    modeled = predict and _steps_modeled(steps, S, kappa, u)
    # lazy shapes: the served shape first, then each other shape whose Brier score is not
    # certified above the served one's (``_shape_brier_lower_bound``); the rest wait
    lazy = modeled and S > 1
    first = int(fit[FIT_SERVED]) if lazy else 0
    if not 0 <= first < S:
        first = 0
        lazy = False
    served_bar = np.inf  # the served shape's Brier score plus both refits' error
    n_total = s_pos + s_neg
    # the bounds' tighter forms (``tight`` above 0) while the prior holds and for the logistic
    # member's shapes (the strength passed as known, 0); the shapes' refit without the member
    # keeps the looser forms' bits. The member's served shape also takes Taylor's remainder from
    # the row's power sums (``powers``); the other shapes' model bounds do not (with them more of
    # those bounds ran, for no fewer passes)
    tight = kappa if kappa > 0.0 else (1.0 if kappa_in == 0.0 else 0.0)
    # the served shape's refit without a pass, where certified (every other shape waiting)
    ranges = (x_lo, x_hi, x_lo_now, x_hi_now)
    cert, held = 0, False  # cert 1: served without a pass, 2: served shape certified; held: a slope held at 0
    if (lazy or (modeled and S == 1)) and keep and has_warm[first] != 0:
        cert, served_bar = _refit_served_certified(
            steps, first, u, l2, n_total, ranges, tol, xis, betas, briers, ok, pw, kappa, has_warm, tight, powers
        )
        if cert == 1:
            glm_finish_refit(briers, fit, c)
            _steps_keep(steps, sf, u, xis, betas, ok, x_lo_now, x_hi_now)
            return 0
    # with ``cert`` 2 the shapes whose bound did not clear the certified served shape's are
    # refitted, then (j == S) the served shape by its passes where any of them does not lie
    # above it (:func:`_refitted_above`) or needs the damped full refit
    for j in range(S + 1):
        k = (first + j) % S
        if j == S:
            if cert != 2:
                break
            now = (x_lo_now, x_hi_now)
            if need_full == 0 and _refitted_above(xis, betas, briers, ok, first, now, n_total, tol, served_bar):
                break
            cert = 0
        elif cert == 2 and ok[k] != 0:
            continue
        ok[k] = 0
        if 0 < j < S and lazy and cert == 0:
            e = _steps_effective(steps, k, kappa)
            bound = _waiting_bound(steps, e, u, l2, n_total, (x_lo, x_hi), tol, tight, served_bar, pw[4:6])
            if bound > served_bar:
                ok[k] = 2
                briers[k] = bound
                continue
        xs, ps, ns = (x[j0:j1], h_pos[j0:j1], h_neg[j0:j1]) if direct else (x, pos_w, neg_w)
        if has_warm[k] != 0 and _kept_held(xs, ps, ns, code, xis[k], l2, betas[k], briers[k : k + 1], pw[0:2]):
            ok[k], held = 1, True
        elif has_warm[k] != 0:
            # one shape is served without comparing Brier scores: none is computed, but where its
            # block is kept (its certified refit without a pass needs the values that come with it)
            brier = briers[k : k + 1] if S > 1 or keep else briers[:0]
            o = STEP_HEADER + k * STEP_BLOCK + STEP_CURV
            curv = steps[o : o + STEP_LAZY] if keep else steps[:0]
            start = betas[k]  # betas[k] stays the previous fit until the iteration succeeds
            if modeled:
                start = pw[0:2]
                start[0] = betas[k, 0]
                start[1] = betas[k, 1]
                _steps_start(steps, _steps_effective(steps, k, kappa), u, l2, x_lo, x_hi, start, tight > 0.0)
            # the data's part (the histogram in stored units, unit 1) while the prior holds
            dw = sf[_h.SF_HEADER : _h.SF_HEADER + 2 * B] if keep and pattern else sf[:0]
            dsums = steps[steps.shape[0] - STEP_BLOCK + STEP_PX0 : steps.shape[0]] if keep else steps[:0]
            passes = glm_refit_histogram_inplace(
                xs, ps, ns, code, xis[k], l2, 1e-12, x_lo, x_hi, tol, start, max_passes, brier, curv, dw, dsums
            )
            held = _held_if_falling(passes, xs, ps, ns, code, xis[k], l2, start, briers[k : k + 1]) or held
            if passes >= 0:
                ok[k] = 1
                betas[k, 0] = start[0]
                betas[k, 1] = start[1]
                if keep:
                    totals = (n_total, t_pos + t_neg)
                    _steps_prior_fit(steps, k, kappa, l2, betas[k], dsums, pattern, floor_kind, totals)
        if ok[k] == 0:
            need_full = 1
            lazy = False
        elif j == 0 and lazy:
            served_bar = _served_bar(xis[k], betas[k, 0], betas[k, 1], x_lo_now, x_hi_now, briers[k], n_total, tol)
    if cert == 2:  # the certified served shape stands
        betas[first, 0] = pw[2]
        betas[first, 1] = pw[3]
    if need_full:
        if direct:  # the damped full refit reads the copy
            _real_units(sf, B, u, x, pos_w, neg_w)
        fit[FIT_DIRTY] = 1.0  # until the caller completes the fit
        mom[MOM_VALID] = 0.0
        if steps.shape[0] > 0:
            steps[STEP_VALID] = 0.0
        return 1
    glm_finish_refit(briers, fit, c)
    if keep:
        _steps_keep(steps, sf, u, xis, betas, ok, x_lo_now, x_hi_now)
        if held:
            _steps_held(steps, betas)
    elif steps.shape[0] > 0:
        steps[STEP_VALID] = 0.0
    if taylor:
        if prior_on and identity and kappa > 0.0:  # (where the prior adds nothing the events skip them)
            moments_floor_rebuild(sf, si, x, table, mom, pc, floor_kind, betas[0, 0], betas[0, 1], pw)
        else:
            moments_rebuild(sf, si, x, table, mom, betas[0, 0], betas[0, 1])
    return 0


@jit_noalloc(forceinline=True)
def _held_if_falling(passes, x, pos, neg, code, xi, l2, beta, brier):
    """After a shape's passes (``passes`` at least 0: ``beta`` their optimum): where its slope is
    negative, the map would fall; ``beta`` then receives the optimum over ``slope >= 0``, the
    intercept-only fit, and ``brier[0]`` its
    Brier score: True. As ``streamcal.gev.histfit.refit_nonnegative`` does."""
    if not (passes >= 0 and beta[0] < 0.0):
        return False
    intercept_only_inplace(x, pos, neg, code, xi, beta, brier)
    return True


@jit_noalloc(forceinline=True)
def _kept_held(x, pos, neg, code, xi, l2, beta, brier, scratch):
    """Whether the previous fit ``beta`` is held at slope 0 (the map must not fall: the optimum
    over ``slope >= 0``) and stays there: the intercept-only fit (into ``scratch``) is that optimum
    where the objective's derivative in the slope there is at least 0 (Karush-Kuhn-Tucker), and
    then ``beta`` and ``brier[0]`` receive it without a pass of Newton's method. As
    ``streamcal.gev.histfit.refit_nonnegative`` does."""
    if beta[0] != 0.0:
        return False
    if not intercept_only_inplace(x, pos, neg, code, xi, scratch, brier) >= 0.0:
        return False
    beta[0] = scratch[0]
    beta[1] = scratch[1]
    return True


@jit_noalloc(forceinline=True)
def _steps_held(steps, betas):
    """After :func:`_steps_keep`: the blocks of the shapes held at slope 0 describe no risk (their
    values are those of the unconstrained optimum's passes, or none), so they are zeroed and
    marked unmodeled (``STEP_KAPPA`` -1: :func:`_steps_modeled` is False until their passes
    run again). The histogram's range and fingerprint stay kept, for the next refit's rows."""
    for k in range(betas.shape[0]):
        if betas[k, 0] != 0.0:
            continue
        o = STEP_HEADER + k * STEP_BLOCK
        for j in range(STEP_CURV, STEP_BLOCK):
            if j != STEP_UNIT:
                steps[o + j] = 0.0
        steps[o + STEP_KAPPA] = -1.0


@jit_noalloc(forceinline=True)
def _steps_modeled(steps, S, kappa, u):
    """True where every shape's block describes its risk under the prior's strength ``kappa``
    (:func:`_steps_effective`): it keeps the prior pattern's values (unit 1), or neither its fit
    nor now has the prior."""
    modeled = True
    for k in range(S):
        o = STEP_HEADER + k * STEP_BLOCK
        pattern = steps[o + STEP_P_VALID] == 1.0 and u == 1.0
        modeled = modeled and (pattern or (kappa == 0.0 and steps[o + STEP_KAPPA] == 0.0))
    return modeled


@jit_noalloc
def _steps_prior_fit(steps, k, kappa, l2, beta, dsums, pattern, floor_kind, totals):
    """After shape ``k``'s passes at the prior's strength ``kappa`` (its values in its block,
    unit 1 where ``pattern``; ``dsums`` the data's part of them, ``totals`` the fitted row's and
    the data's weight): the prior pattern's values at the fit, the fitted row's (its gradient
    ``(-l2 beta[0], 0)`` at the optimum: the ridge is on the slope alone) less the data's,
    divided by ``kappa``; no change yet."""
    o = STEP_HEADER + k * STEP_BLOCK
    steps[o + STEP_KAPPA] = kappa
    if not pattern:
        steps[o + STEP_P_VALID] = 0.0
        return
    n_fit, d_total = totals
    c = o + STEP_CURV
    p = o + STEP_PX0
    steps[p + P_G] = (-l2 * beta[0] - dsums[0]) / kappa
    steps[p + P_G + 1] = -dsums[1] / kappa
    for j in range(7):  # the Hessian and the third derivatives
        steps[p + P_H + j] = (steps[c + j] - dsums[2 + j]) / kappa
    for j in range(5):
        steps[p + P_Q + j] = (steps[o + STEP_Q + j] - dsums[9 + j]) / kappa
    steps[p + P_B] = (steps[o + STEP_BRIER] - dsums[14]) / kappa
    steps[p + P_BG] = (steps[o + STEP_BG] - dsums[15]) / kappa
    steps[p + P_BG + 1] = (steps[o + STEP_BG + 1] - dsums[16]) / kappa
    for j in range(3):
        steps[o + STEP_PS0 + j] = (steps[o + STEP_STEEP + j] - dsums[17 + j]) / kappa
        steps[o + STEP_PSP + j] = 0.0
    for j in range(P_SIZE):
        steps[o + STEP_DPX + j] = 0.0
    steps[o + STEP_PGONE] = 0.0
    steps[o + STEP_NFIT] = n_fit
    steps[o + STEP_MP0] = (n_fit - d_total) / kappa
    steps[o + STEP_P_FLIP] = 0.0 if floor_kind == FLOOR_THINNED else 1.0  # (``_floor_weight``)
    steps[o + STEP_P_VALID] = 1.0


@jit_noalloc
def _refit_served_certified(
    steps, first, u, l2, n_total, ranges, tol, xis, betas, briers, ok, pw, kappa, has_warm, tight, powers
):  # fmt: skip
    """The refit without a pass over the buckets, where it is certified: the served shape
    ``first`` from :func:`_served_certified` (``ok[first]`` 3: its block keeps following its
    last fit) and every other shape waiting, its Brier score's lower bound above the served
    shape's upper bound plus both refits' error (:func:`_served_bar`). Returns ``(status,
    bar)``, ``bar`` that upper bound: status 1 where all of that is certified; 0, changing
    nothing the refit reads but scratch, where the served shape is not certified, or some other
    shape's bound does not clear it and the bounds take their looser forms (``tight`` 0: see
    :func:`glm_refit_known`) or the shape has no previous fit. Status 2 where the served shape is
    certified, ``tight`` is above 0 and the shapes whose bound does not clear it have a previous
    fit: those get ``ok[k]`` 0 (the refit's loop refits them), the others 2, and the served
    shape's certified point waits in ``pw[2:4]`` (``betas[first]`` keeps the previous fit until the
    refit's loop settles the choice). ``powers`` (empty, or the histogram's power sums) goes to
    the served shape's certificate (:func:`_served_certified`)."""
    x_lo, x_hi, x_lo_now, x_hi_now = ranges
    beta = pw[0:2]
    served = _steps_effective(steps, first, kappa)
    done, brier, high, _ = _served_certified(
        steps, served, u, l2, n_total, x_lo, x_hi, tol, beta, tight, SERVE_TOL, 0.0, powers
    )
    if not done or beta[0] < 0.0:  # (a negative slope: the passes hold it at 0)
        return 0, np.inf
    S = xis.shape[0]
    bar = _served_bar(xis[first], beta[0], beta[1], x_lo_now, x_hi_now, high, n_total, tol)
    waiting = True
    for k in range(S):
        if k != first:
            e = _steps_effective(steps, k, kappa)
            briers[k] = _waiting_bound(steps, e, u, l2, n_total, (x_lo, x_hi), tol, tight, bar, pw[4:6])
            if not briers[k] > bar:
                if not (tight > 0.0 and has_warm[k] != 0):
                    return 0, np.inf  # the refit's loop sets every shape's score
                waiting = False
    for k in range(S):
        ok[k] = 2 if briers[k] > bar else 0
    ok[first] = 3
    briers[first] = brier
    if not waiting:
        pw[2] = beta[0]
        pw[3] = beta[1]
        return 2, bar
    betas[first, 0] = beta[0]
    betas[first, 1] = beta[1]
    return 1, bar


@jit_noalloc(forceinline=True)
def _waiting_bound(steps, e, u, l2, n_total, x_range, tol, tight, bar, scratch):
    """A lower bound on the Brier score that shape ``e``'s refit would find, less its own error, to
    set against ``bar``: the first-order one (:func:`_shape_brier_lower_bound`) and, where that does
    not clear ``bar`` and ``tight`` is above 0 (:func:`glm_refit_known`), the larger of it and the
    bound from the shape's model (:func:`_served_certified` without a tolerance on the served
    probabilities, its point in ``scratch``; about twice the first-order one's cost)."""
    x_lo, x_hi = x_range
    bound = _shape_brier_lower_bound(steps, e, u, l2, n_total, x_lo, x_hi, tol, tight)
    if not bound > bar and tight > 0.0:  # the model's bound, tighter where it holds
        known, _, _, low = _served_certified(
            steps, e, u, l2, n_total, x_lo, x_hi, tol, scratch, tight, np.inf, MODEL_SPARE, scratch[:0]
        )
        bound = max(bound, low) if known else bound
    return bound


@jit_noalloc
def _refitted_above(xis, betas, briers, ok, first, now, n_total, tol, bar):
    """Whether every shape refitted by its passes (``ok[k]`` 1, ``k != first``) has a Brier
    score that, less twice a refit's error (``4 f_sup N tol + C_B N tol^2 / 2`` as in
    :func:`_served_bar`, over the band of ``v`` within ``2 tol`` of its fit's at the non-empty
    features ``now`` = ``(lo, hi)``: this refit's from the optimum, and any other refit's),
    lies above ``bar``, the served shape's upper bound plus its refit's error: the shapes' full
    refits then choose the served shape."""
    lo, hi = now
    for k in range(xis.shape[0]):
        if k == first or ok[k] != 1:
            continue
        va = betas[k, 0] * lo + betas[k, 1]
        vb = betas[k, 0] * hi + betas[k, 1]
        f_sup, f1_sup = _density_bounds(xis[k], min(va, vb) - 2.0 * tol, max(va, vb) + 2.0 * tol)
        if not (hi >= lo and f_sup < np.inf and f1_sup < np.inf):
            return False
        c_b = 2.0 * f_sup * f_sup + 2.0 * f1_sup
        if not briers[k] - 2.0 * (4.0 * f_sup * n_total * tol + 0.5 * c_b * n_total * tol * tol) > bar:
            return False
    return True


@jit_noalloc(forceinline=True)
def _real_units(sf, B, u, x, pos_w, neg_w):
    """The histogram ``sf`` in real units into ``pos_w``/``neg_w``; returns the class totals
    and the non-empty buckets' features' range. Without decay the unit is 1 and the division is
    left out (the same values)."""
    t_pos = 0.0
    t_neg = 0.0
    lo = np.inf
    hi = -np.inf
    if u == 1.0:
        for j in range(B):
            p = sf[_h.SF_HEADER + j]
            n = sf[_h.SF_HEADER + B + j]
            pos_w[j] = p
            neg_w[j] = n
            t_pos += p
            t_neg += n
            if p + n > 0.0:
                lo = min(lo, x[j])
                hi = max(hi, x[j])
        return t_pos, t_neg, lo, hi
    for j in range(B):
        p = sf[_h.SF_HEADER + j] / u
        n = sf[_h.SF_HEADER + B + j] / u
        pos_w[j] = p
        neg_w[j] = n
        t_pos += p
        t_neg += n
        if p + n > 0.0:
            lo = min(lo, x[j])
            hi = max(hi, x[j])
    return t_pos, t_neg, lo, hi


@jit_noalloc(forceinline=True)
def _refit_rows(sf, B, u, x, c, steps, current, direct, pos_w, neg_w, powers):
    """``(j0, j1, t_pos, t_neg, lo, hi, low)`` of a refit: GEV in unit 1 (``direct``) reads
    the histogram's rows in place of their copy in real units (the same values) over the buckets
    ``j0 .. j1 - 1`` of :func:`_held_range`, which hold every non-empty one (:func:`_held_sums`:
    the totals, the non-empty features' range and the prefix half of the end runs, ``powers``
    too); the copy waits for the pseudo-counts or the damped full refit, which need it. Else the
    copy (:func:`_real_units`), every bucket, and ``low`` 1."""
    if direct:
        j0, j1 = _held_range(steps, x, B, current)
        h_pos = sf[_h.SF_HEADER : _h.SF_HEADER + B]
        h_neg = sf[_h.SF_HEADER + B : _h.SF_HEADER + 2 * B]
        t_pos, t_neg, lo, hi, low = _held_sums(h_pos, h_neg, x, c, j0, j1, powers)
        return j0, j1, t_pos, t_neg, lo, hi, low
    t_pos, t_neg, lo, hi = _real_units(sf, B, u, x, pos_w, neg_w)
    return 0, B, t_pos, t_neg, lo, hi, 1.0


@jit_noalloc(forceinline=True)
def _held_range(steps, x, B, current):
    """``(j0, j1)``: a range of buckets that holds every non-empty one. Where GEV's blocks
    describe the histogram (``current``), their range of features ``[STEP_X_LO, STEP_X_HI]``
    holds every non-empty bucket's (it widens with the events that add weight), and the
    features ``x`` do not decrease with the bucket (the centres increase): the buckets whose
    feature lies in it, by bisection; else every bucket."""
    lo = steps[STEP_X_LO] if current else np.inf
    hi = steps[STEP_X_HI] if current else -np.inf
    if not lo <= hi:
        return 0, B
    a = 0  # the first bucket with x >= lo
    b = B
    while a < b:
        m = (a + b) // 2
        if x[m] < lo:
            a = m + 1
        else:
            b = m
    j0 = a
    b = B  # the first bucket with x > hi
    while a < b:
        m = (a + b) // 2
        if x[m] <= hi:
            a = m + 1
        else:
            b = m
    return j0, a


@jit_noalloc(forceinline=True)
def _held_sums(h_pos, h_neg, x, c, j0, j1, powers):
    """The histogram's rows in unit 1 over the buckets ``j0 .. j1 - 1`` (every non-empty one
    among them): ``(t_pos, t_neg, lo, hi, low)``, the class totals and the non-empty features'
    range as :func:`_real_units` returns them, and the prefix half of :func:`end_run_bounds`
    (the least ``(c + P_<=j) / (c + W_<=j)``), in one loop: the same values (a bucket without
    weight holds 0 in both rows, which adds nothing to a total). Unless ``powers`` is empty (else
    5 values), it receives the row's power sums ``sum_b n_b x_b^j`` (``j = 0 .. 4``)."""
    want = powers.shape[0] > 0
    m0 = 0.0
    m1 = 0.0
    m2 = 0.0
    m3 = 0.0
    m4 = 0.0
    t_pos = 0.0
    t_neg = 0.0
    lo = np.inf
    hi = -np.inf
    low = 1.0
    for j in range(j0, j1):
        p = h_pos[j]
        n = h_neg[j]
        if p + n > 0.0:
            t_pos += p
            t_neg += n
            lo = min(lo, x[j])
            hi = max(hi, x[j])
            low = min(low, (c + t_pos) / (c + (t_pos + t_neg)))
            if want:
                m4, m3, m2, m1, m0 = _add_powers4(m4, m3, m2, m1, m0, p + n, x[j])
    if want:
        powers[0] = m0
        powers[1] = m1
        powers[2] = m2
        powers[3] = m3
        powers[4] = m4
    return t_pos, t_neg, lo, hi, low


@jit_noalloc(forceinline=True)
def end_run_bounds_range(pos_w, neg_w, c, fit, low, t_pos, t_neg, j0, j1):
    """:func:`end_run_bounds_from` over the buckets ``j0 .. j1 - 1``, which hold every non-empty
    one: the same values. The suffix sums stop once no lower suffix can reach the greatest rate
    so far: a suffix's positive weight is at most ``t_pos`` and its weight at least the present
    one's, so its rate is at most ``t_pos / (W + c)``, up to the roundings of sums of non-negative
    weights (each within ``m`` units in the last place over ``m`` buckets: ``1e-15`` per bucket
    and ``1e-12`` more to spare), and ``max`` keeps ``high`` where that lies below it."""
    whole = (t_pos + c) / ((t_pos + t_neg) + 2.0 * c)
    low = min(low, whole)
    p = 0.0
    n = 0.0
    high = whole
    reach = t_pos * (1.0 + 1e-12 + 1e-15 * (j1 - j0))
    for j in range(j1 - 1, j0 - 1, -1):
        if pos_w[j] + neg_w[j] > 0.0:
            p += pos_w[j]
            n += neg_w[j]
            w = (p + n) + c
            high = max(high, p / w)
            if reach < high * w:
                break
    fit[FIT_RUN_LOW] = low
    fit[FIT_RUN_HIGH] = high


@jit_noalloc
def _served_bar(xi, b0, b1, lo, hi, brier, n_total, tol):
    """The served shape's Brier score from its refit plus that refit's error (step 4 of
    :func:`_shape_brier_lower_bound`) and a relative ``1e-9``: a shape whose bound lies above
    it cannot be served; ``inf`` where the density's bounds are not finite (every shape is
    then refitted)."""
    va = b0 * lo + b1
    vb = b0 * hi + b1
    f_sup, f1_sup = _density_bounds(xi, min(va, vb) - 2.0 * tol, max(va, vb) + 2.0 * tol)
    if not (hi >= lo and f_sup < np.inf and f1_sup < np.inf):
        return np.inf
    c_b = 2.0 * f_sup * f_sup + 2.0 * f1_sup
    return brier + 4.0 * f_sup * n_total * tol + 0.5 * c_b * n_total * tol * tol + 1e-9 * (1.0 + abs(brier))


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
    # a GEV shape whose support ends (above for xi < 0, below for xi > 0) is bounded there by
    # the rate of the data's end run (``end_run_bounds``)
    if xis[k] < 0.0:
        p = min(p, fit[FIT_RUN_HIGH])
    elif xis[k] > 0.0:
        p = max(p, fit[FIT_RUN_LOW])
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
    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
):  # fmt: skip
    """Run operations ``ops[start:]`` (``OP_*`` bits) with lazy refits, event by event: what a
    loop of ``predict_proba_one`` / ``learn_one`` does. Returns the index of the first operation
    not run: ``ops.size``, or an operation whose refit needs the damped full refit (then
    ``fit[FIT_DIRTY]`` stays 1 and :func:`glm_refit_inplace` has left its partial fit)."""
    for i in range(start, ops.shape[0]):
        op = ops[i]
        if op & OP_PREDICT:
            if fit[FIT_DIRTY] != 0.0:
                status = glm_refit_inplace(
                    sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
                    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
                )  # fmt: skip
                if status != 0:
                    return i
                for k in range(xis.shape[0]):
                    has_warm[k] = 1
            out_p[i], out_llr[i] = glm_served_one(s[i], identity, clip, code, xis, betas, fit)
        if op & OP_LEARN:
            glm_learn_one_inplace(sf, si, b[i], y[i], w[i], t[i], x, table, mom, pc, anchor, steps)
            fit[FIT_DIRTY] = 1.0
    return ops.shape[0]


# ----------------------------------------------------------------------------------------------
# GEV's logistic member while the score prior holds (``GEVCalibrator(xi="auto")`` with the prior)
#
# While the prior's strength is above 0 the calibrator serves the logistic link fitted with
# Platt's floor (``FLOOR_SPAN``): ``PlattCalibrator()``'s map on the same histogram, by the same
# steps (its moments, ``D`` block and anchor are the member's ``mom`` and ``anchor``), and the GEV
# shapes are not refitted; at strength 0 the GEV shapes are refitted (the strength passed as
# known) and the lowest Brier score serves, as without the member. The member's arrays are those
# of a one-shape Platt refit: ``m_xis`` ([0.0]), ``m_betas``, ``m_has_warm``, ``m_briers``,
# ``m_ok``, ``m_fit``; the GEV shapes' refit gets ``g_mom``, a scratch of ``MOM_SIZE`` (it reads
# no moments once the strength is known). The served map follows ``fit[FIT_KAPPA]``.


@jit_noalloc
def member_kappa(sf, si, x, centres, identity, c, pc, anchor, table, mom, pw, pos_w, neg_w, m_has_warm, fit):
    """The score prior's strength as the logistic member's :func:`glm_refit_inplace` computes it
    first (the same calls on the same state: Platt's bits); -1.0 where the window holds no weight.
    Where the shapes served last (``fit``: fitted at strength 0) the class totals are the
    histogram's running ones, as where the member's moments are current: the shapes' refit
    then makes the one pass over the buckets."""
    B = si[_h.SI_B]
    u = _unit_of(sf, sf[_h.SF_KIND])
    taylor = m_has_warm[0] != 0
    shapes = fit[FIT_FITTED] != 0.0 and fit[FIT_KAPPA] == 0.0
    if (taylor and moments_current(mom, sf)) or shapes:
        t_pos = sf[_h.SF_T_POS] / u
        t_neg = sf[_h.SF_T_NEG] / u
        if t_pos + t_neg > 0.0:
            return platt_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor, table, mom, pw)
    t_pos, t_neg, _, _ = _real_units(sf, B, u, x, pos_w, neg_w)
    if not t_pos + t_neg > 0.0:
        return -1.0
    if taylor:
        return platt_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor, table, mom, pw)
    return score_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor)


@jit_noalloc
def gev_logistic_refit(
    sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
    m_xis, m_betas, m_has_warm, m_briers, m_ok, m_fit, g_mom, m_floor, m_code, m_tol,
):  # fmt: skip
    """The refit of ``GEVCalibrator(xi="auto")`` with the score prior (see the notes above):
    the strength, then the logistic member's refit where it is above 0, else the GEV shapes'.
    Returns 0 when the fit is complete, 1 when the refitted part (the member where
    ``fit[FIT_KAPPA]`` is above 0, else the shapes) needs the damped full refit (``fit[FIT_DIRTY]``
    stays 1 until the caller completes it)."""
    kappa = member_kappa(sf, si, x, centres, identity, c, pc, anchor, table, mom, pw, pos_w, neg_w, m_has_warm, fit)
    if kappa < 0.0:  # no weight: neither part is fitted
        fit[FIT_FITTED] = 0.0
        fit[FIT_DIRTY] = 0.0
        fit[FIT_KAPPA] = 0.0
        m_fit[FIT_FITTED] = 0.0
        return 0
    fit[FIT_KAPPA] = kappa
    if kappa > 0.0:
        status = glm_refit_known(
            sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, m_floor, m_code, l2, m_tol, max_passes,
            m_xis, m_betas, m_has_warm, m_briers, m_ok, pos_w, neg_w, pc, anchor, m_fit, table, mom, pw, x[:0],
            kappa,
        )  # fmt: skip
        fit[FIT_DIRTY] = m_fit[FIT_DIRTY]
        return status
    mom[MOM_VALID] = 0.0  # the member's moments stop following the events while the shapes serve
    return glm_refit_known(
        sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
        xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, g_mom, pw, steps, kappa,
    )  # fmt: skip


@jit_noalloc(forceinline=True)
def gev_logistic_served_one(s, identity, clip, code, xis, betas, fit, m_code, m_xis, m_betas, m_fit):
    """:func:`glm_served_one` of the served part: the logistic member while ``fit[FIT_KAPPA]``
    is above 0, else the GEV shapes."""
    if fit[FIT_KAPPA] > 0.0:
        return glm_served_one(s, identity, clip, m_code, m_xis, m_betas, m_fit)
    return glm_served_one(s, identity, clip, code, xis, betas, fit)


@jit_noalloc
def gev_logistic_served_array(s, identity, clip, code, xis, betas, fit, m_code, m_xis, m_betas, m_fit, out_p, out_llr):
    """:func:`gev_logistic_served_one` at every score."""
    for i in range(s.shape[0]):
        out_p[i], out_llr[i] = gev_logistic_served_one(
            s[i], identity, clip, code, xis, betas, fit, m_code, m_xis, m_betas, m_fit
        )


@jit_noalloc
def gev_logistic_run_ops_inplace(
    ops, b, s, y, w, t, out_p, out_llr, start,
    sf, si, x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
    m_xis, m_betas, m_has_warm, m_briers, m_ok, m_fit, g_mom, m_floor, m_code, m_tol,
):  # fmt: skip
    """:func:`glm_run_ops_inplace` with :func:`gev_logistic_refit` and its served map: the events
    learned into the member's moments and ``D`` block and the shapes' blocks. Returns the index
    of the first operation not run (a refit that needs the damped full refit, as there)."""
    for i in range(start, ops.shape[0]):
        op = ops[i]
        if op & OP_PREDICT:
            if fit[FIT_DIRTY] != 0.0:
                status = gev_logistic_refit(
                    sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
                    xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
                    m_xis, m_betas, m_has_warm, m_briers, m_ok, m_fit, g_mom, m_floor, m_code, m_tol,
                )  # fmt: skip
                if status != 0:
                    return i
            out_p[i], out_llr[i] = gev_logistic_served_one(
                s[i], identity, clip, code, xis, betas, fit, m_code, m_xis, m_betas, m_fit
            )
        if op & OP_LEARN:
            glm_learn_one_inplace(sf, si, b[i], y[i], w[i], t[i], x, table, mom, pc, anchor, steps)
            fit[FIT_DIRTY] = 1.0
    return ops.shape[0]


@jit_noalloc
def gev_logistic_river_proba(
    sf, si, s, ls, y, w, cuts, grid, buf,
    x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, ok, pos_w, neg_w, pc, table, steps,
    m_xis, m_betas, m_has_warm, m_briers, m_ok, m_fit, g_mom, m_floor, m_code, m_tol,
):  # fmt: skip
    """:func:`glm_river_gev_proba` with :func:`gev_logistic_refit` and its served map: the river
    face of ``GEVCalibrator(xi="auto")`` with the score prior in one call (-1.0 where the refit
    needs the damped full refit, left for the caller to complete)."""
    S = xis.shape[0]
    briers = buf[BUF_BETAS + 2 * S : BUF_BETAS + 3 * S]
    anchor = buf[BUF_ANCHOR:BUF_MOM]
    mom = buf[BUF_MOM:BUF_PW]
    pw = buf[BUF_PW:BUF_FIT]
    fit = buf[BUF_FIT:BUF_BETAS]
    if y >= 0.0:
        b = _h.bucket_of_guessed(cuts, np.int64(0), cuts.shape[0], ls, grid[0], grid[1], grid[2])
        glm_learn_one_inplace(sf, si, b, y, w, 0.0, x, table, mom, pc, anchor, steps)
        fit[FIT_DIRTY] = 1.0
    if fit[FIT_DIRTY] != 0.0:
        status = gev_logistic_refit(
            sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
            xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
            m_xis, m_betas, m_has_warm, m_briers, m_ok, m_fit, g_mom, m_floor, m_code, m_tol,
        )  # fmt: skip
        if status != 0:
            return -1.0
    p, _ = gev_logistic_served_one(s, identity, clip, code, xis, betas, fit, m_code, m_xis, m_betas, m_fit)
    return p


# ----------------------------------------------------------------------------------------------
# Platt's refit from Taylor moments


@jit_noalloc(forceinline=True)
def _logistic(v):
    if v >= 0.0:
        return 1.0 / (1.0 + math.exp(-v))
    e = math.exp(v)
    return e / (1.0 + e)


_MOM_S = np.int64(MOM_S)  # NumPy integers, not literals: one compiled ``_weight_add``
_MOM_M = np.int64(MOM_M)
_MOM_FL_S = np.int64(MOM_FL_S)
_MOM_FL_M = np.int64(MOM_FL_M)
#: ``BINOM[n, i] = C(n, i)`` (exact in floating point): the Taylor models' coefficients, read
#: rather than formed by a chain of divisions in each evaluation
BINOM = np.array([[math.comb(n, i) for i in range(MOM_K + 3)] for n in range(MOM_K + 3)], dtype=np.float64)


@jit_noalloc(forceinline=True)
def _weight_add(mom, s0, m0, table, xb, w):
    """Add weight ``w`` at feature ``xb`` to the power sums starting at ``mom[s0]`` (``|xb|**m``,
    m = 0 .. ``MOM_NS - 1``) and to the Taylor rows starting at ``mom[m0]``: row ``k`` gains
    ``w * sum_d table[k, d] p**d`` (Horner's rule in the anchor's logistic ``p`` at ``xb``) times
    ``xb**m`` in its column ``m``."""
    p = _logistic(mom[MOM_B0] * xb + mom[MOM_B1])
    ax = abs(xb)
    t = w
    for m in range(MOM_NS):
        mom[s0 + m] += t
        t *= ax
    for k in range(MOM_K + 1):
        acc = 0.0
        for d in range(k + 1, -1, -1):
            acc = acc * p + table[k, d]
        t = w * acc
        base = m0 + k * MOM_NCOL
        for m in range(MOM_NCOL):
            mom[base + m] += t
            t *= xb


@jit_noalloc(forceinline=True)
def _moments_add(mom, table, xb, pos_part, ws):
    """Add stored weight ``ws`` (negative: remove) at feature ``xb``, ``pos_part`` of it positive."""
    _weight_add(mom, _MOM_S, _MOM_M, table, xb, ws)
    mom[MOM_P0] += pos_part
    mom[MOM_P1] += pos_part * xb
    mom[MOM_UPDATES] += 1.0


@jit_noalloc(forceinline=True)
def _moments_fingerprint(mom, sf):
    mom[MOM_N_LEARNED] = sf[_h.SF_N_LEARNED]
    mom[MOM_T_POS] = sf[_h.SF_T_POS]
    mom[MOM_T_NEG] = sf[_h.SF_T_NEG]


@jit_noalloc(forceinline=True)
def moments_current(mom, sf):
    """True when the moments describe the histogram ``sf`` (no event reached it otherwise)."""
    return (
        mom[MOM_VALID] == 1.0
        and mom[MOM_N_LEARNED] == sf[_h.SF_N_LEARNED]
        and mom[MOM_T_POS] == sf[_h.SF_T_POS]
        and mom[MOM_T_NEG] == sf[_h.SF_T_NEG]
    )


@jit_noalloc
def moments_rebuild(sf, si, x, table, mom, b0, b1):
    """Build the moments of the histogram about the anchor ``(b0, b1)``."""
    for i in range(MOM_D):  # (not the prior's D block, which keeps its own anchor)
        mom[i] = 0.0
    mom[MOM_B0] = b0
    mom[MOM_B1] = b1
    B = si[_h.SI_B]
    lo = np.inf
    hi = -np.inf
    for j in range(B):
        p = sf[_h.SF_HEADER + j]
        n = p + sf[_h.SF_HEADER + B + j]
        if n > 0.0:
            xb = x[j]
            lo = min(lo, xb)
            hi = max(hi, xb)
            _moments_add(mom, table, xb, p, n)
    mom[MOM_X_LO] = lo
    mom[MOM_X_HI] = hi
    mom[MOM_UPDATES] = 0.0
    _moments_fingerprint(mom, sf)
    mom[MOM_VALID] = 1.0


@jit_noalloc(forceinline=True)
def _floor_weight(kind, j, B, held, first, last):
    """The floor weight ``f_j`` of bucket ``j`` (real units) in the pseudo-counts
    ``m_j = kappa (n_j + f_j)``, as :func:`add_prior_pseudo_counts` forms it; ``held`` 1.0
    where the bucket holds data, ``first`` and ``last`` the first and last such buckets
    (``first`` < 0 where none does)."""
    step = max(1, B // 64)
    margin = max(1, B // 16)
    thinned = float(step) if j % step == step // 2 else 0.0
    if kind == FLOOR_THINNED:
        return thinned
    if kind == FLOOR_SPAN:
        if first >= 0 and (j < first - margin or j > last + margin):
            thinned = 0.0
        return max(thinned, held)
    if kind == FLOOR_SPREAD:
        return held + thinned * _p.SPREAD_EVENTS / B
    return held


@jit_noalloc(forceinline=True)
def _floor_add(mom, table, xb, r, f):
    """Add floor weight ``f`` (negative: remove) at feature ``xb``, prior rate ``r``, to the
    floor moments (about the data moments' anchor)."""
    _weight_add(mom, _MOM_FL_S, _MOM_FL_M, table, xb, f)
    mom[MOM_FL_F] += f
    mom[MOM_FL_FR0] += f * r
    mom[MOM_FL_FR1] += f * r * xb


@jit_noalloc
def floor_rebuild(sf, si, x, table, mom, pc, floor_kind):
    """Build the score prior's floor moments of the histogram about the data moments' anchor
    (probability inputs: ``pc`` holds the prior's rates; the data moments just rebuilt)."""
    for i in range(MOM_DATA_SIZE, MOM_D):
        mom[i] = 0.0
    B = si[_h.SI_B]
    H = _h.SF_HEADER
    first = np.int64(-1)
    last = np.int64(-1)
    for j in range(B):
        if sf[H + j] + sf[H + B + j] > 0.0:
            if first < 0:
                first = j
            last = j
    lo = np.inf
    hi = -np.inf
    for j in range(B):
        n = sf[H + j] + sf[H + B + j]
        held = 1.0 if n > 0.0 else 0.0
        f = _floor_weight(floor_kind, j, B, held, first, last)
        if not (n > 0.0 or f > 0.0):
            continue  # (the rate only where a term needs it)
        r = math.exp(pc[PC_LOG_R, j])
        if n > 0.0:
            mom[MOM_FL_R0] += n * r
            mom[MOM_FL_R1] += n * r * x[j]
        if f > 0.0:
            _floor_add(mom, table, x[j], r, f)
            lo = min(lo, x[j])
            hi = max(hi, x[j])
    mom[MOM_FL_KIND] = float(floor_kind)
    mom[MOM_FL_FIRST] = float(first)
    mom[MOM_FL_LAST] = float(last)
    mom[MOM_FL_X_LO] = lo
    mom[MOM_FL_X_HI] = hi
    mom[MOM_FL_VALID] = 1.0


@jit_noalloc(forceinline=True)
def _logistic_four(mom, xa, xb, xc, xd):
    """The logistic of the moments' fit ``b0 x + b1`` at four features (the four buckets of
    :func:`_weight_add_four` and :func:`_weight_add_four_one`)."""
    b0 = mom[MOM_B0]
    b1 = mom[MOM_B1]
    return (
        _logistic(b0 * xa + b1),
        _logistic(b0 * xb + b1),
        _logistic(b0 * xc + b1),
        _logistic(b0 * xd + b1),
    )


@jit_noalloc(forceinline=True)
def _taylor_row_four(table, k, pa, pb, pc, pd):
    """Row ``k`` of the logistic's Taylor table by Horner's rule at four probabilities, each by
    the same steps as alone (the four chains interleave)."""
    acca = 0.0
    accb = 0.0
    accc = 0.0
    accd = 0.0
    for d in range(k + 1, -1, -1):
        coef = table[k, d]
        acca = acca * pa + coef
        accb = accb * pb + coef
        accc = accc * pc + coef
        accd = accd * pd + coef
    return acca, accb, accc, accd


@jit_noalloc(forceinline=True)
def _weight_add_four(mom, table, xa, wa, fa, xb, wb, fb, xc, wc, fc, xd, wd, fd):
    """:func:`_weight_add` of four buckets at once, data weight ``wa`` and floor weight ``fa`` at
    feature ``xa``, then ``b``'s, ``c``'s and ``d``'s, to the data's and the floor's moments: each
    sum gains ``a``'s term, then ``b``'s, ``c``'s and ``d``'s, each term formed by the same steps
    as alone (Horner's rule run once per bucket for both weights), so the same bits as the
    buckets one by one. The buckets' independent chains of multiplications interleave. A zero
    weight adds zeros, which leave every sum as it is (none is ever -0.0: they start at +0.0)."""
    pa, pb, pcc, pd = _logistic_four(mom, xa, xb, xc, xd)
    axa = abs(xa)
    axb = abs(xb)
    axc = abs(xc)
    axd = abs(xd)
    ta = wa
    tb = wb
    tc = wc
    td = wd
    fta = fa
    ftb = fb
    ftc = fc
    ftd = fd
    for m in range(MOM_NS):
        mom[MOM_S + m] = (((mom[MOM_S + m] + ta) + tb) + tc) + td
        mom[MOM_FL_S + m] = (((mom[MOM_FL_S + m] + fta) + ftb) + ftc) + ftd
        ta *= axa
        tb *= axb
        tc *= axc
        td *= axd
        fta *= axa
        ftb *= axb
        ftc *= axc
        ftd *= axd
    for k in range(MOM_K + 1):
        acca, accb, accc, accd = _taylor_row_four(table, k, pa, pb, pcc, pd)
        ta = wa * acca
        tb = wb * accb
        tc = wc * accc
        td = wd * accd
        fta = fa * acca
        ftb = fb * accb
        ftc = fc * accc
        ftd = fd * accd
        base = MOM_M + k * MOM_NCOL
        fbase = MOM_FL_M + k * MOM_NCOL
        for m in range(MOM_NCOL):
            mom[base + m] = (((mom[base + m] + ta) + tb) + tc) + td
            mom[fbase + m] = (((mom[fbase + m] + fta) + ftb) + ftc) + ftd
            ta *= xa
            tb *= xb
            tc *= xc
            td *= xd
            fta *= xa
            ftb *= xb
            ftc *= xc
            ftd *= xd


@jit_noalloc
def moments_floor_rebuild(sf, si, x, table, mom, pc, floor_kind, b0, b1, pw):
    """:func:`moments_rebuild` about ``(b0, b1)`` then :func:`floor_rebuild`, in one loop over the
    buckets (the same sums, the same bits): a bucket with data and floor weight takes the
    logistic's Taylor rows once for both, and the buckets go to them four at a time
    (:func:`_weight_add_four`: the same bits again, with more work in flight). ``pw``: scratch of
    at least 9 values (the waiting buckets; kept in an array, not in locals, which compile to
    code about three times slower)."""
    for i in range(MOM_D):
        mom[i] = 0.0
    mom[MOM_B0] = b0
    mom[MOM_B1] = b1
    B = si[_h.SI_B]
    H = _h.SF_HEADER
    first = np.int64(-1)
    last = np.int64(-1)
    for j in range(B):
        if sf[H + j] + sf[H + B + j] > 0.0:
            if first < 0:
                first = j
            last = j
    lo = np.inf
    hi = -np.inf
    flo = np.inf
    fhi = -np.inf
    # the Taylor rows four buckets at a time (:func:`_weight_add_four`): the first three wait in
    # ``pw`` (feature, data weight, floor weight)
    nq = 0
    for j in range(B):
        pos = sf[H + j]
        n = pos + sf[H + B + j]
        held = 1.0 if n > 0.0 else 0.0
        f = _floor_weight(floor_kind, j, B, held, first, last)
        if not (n > 0.0 or f > 0.0):
            continue
        xb = x[j]
        r = math.exp(pc[PC_LOG_R, j])
        if n > 0.0:
            lo = min(lo, xb)
            hi = max(hi, xb)
            mom[MOM_FL_R0] += n * r
            mom[MOM_FL_R1] += n * r * xb
            mom[MOM_P0] += pos
            mom[MOM_P1] += pos * xb
        if f > 0.0:
            flo = min(flo, xb)
            fhi = max(fhi, xb)
            mom[MOM_FL_F] += f
            mom[MOM_FL_FR0] += f * r
            mom[MOM_FL_FR1] += f * r * xb
        if nq == 3:
            _weight_add_four(mom, table, pw[0], pw[1], pw[2], pw[3], pw[4], pw[5], pw[6], pw[7], pw[8], xb, n, f)
            nq = 0
        else:
            pw[3 * nq] = xb
            pw[3 * nq + 1] = n
            pw[3 * nq + 2] = f
            nq += 1
    if nq > 0:  # the last buckets, with partners of no weight
        for i in range(nq, 3):
            pw[3 * i] = pw[0]
            pw[3 * i + 1] = 0.0
            pw[3 * i + 2] = 0.0
        _weight_add_four(mom, table, pw[0], pw[1], pw[2], pw[3], pw[4], pw[5], pw[6], pw[7], pw[8], pw[0], 0.0, 0.0)
    mom[MOM_X_LO] = lo
    mom[MOM_X_HI] = hi
    mom[MOM_UPDATES] = 0.0
    _moments_fingerprint(mom, sf)
    mom[MOM_VALID] = 1.0
    mom[MOM_FL_KIND] = float(floor_kind)
    mom[MOM_FL_FIRST] = float(first)
    mom[MOM_FL_LAST] = float(last)
    mom[MOM_FL_X_LO] = flo
    mom[MOM_FL_X_HI] = fhi
    mom[MOM_FL_VALID] = 1.0


@jit_noalloc(forceinline=True)
def _floor_event(mom, table, x, pc, B, b, ws, was_held, now_held):
    """One event's stored weight ``ws`` (negative: leaving) at bucket ``b`` in the floor moments:
    the data's rate sums, and the bucket's floor weight where it starts or stops holding data.
    A change of ``FLOOR_SPAN``'s span (the first or last bucket with data) is not followed: the
    floor moments are then marked stale and the next refit that needs them rebuilds them."""
    r = math.exp(pc[PC_LOG_R, b])
    xb = x[b]
    mom[MOM_FL_R0] += ws * r
    mom[MOM_FL_R1] += ws * r * xb
    if was_held == now_held:
        return
    kind = int(mom[MOM_FL_KIND])
    first = int(mom[MOM_FL_FIRST])
    last = int(mom[MOM_FL_LAST])
    if kind == FLOOR_SPAN and not (first < b < last):
        mom[MOM_FL_VALID] = 0.0
        return
    d = _floor_weight(kind, b, B, 1.0, first, last) - _floor_weight(kind, b, B, 0.0, first, last)
    if d != 0.0:
        _floor_add(mom, table, xb, r, d if now_held else -d)
        mom[MOM_FL_X_LO] = min(mom[MOM_FL_X_LO], xb)
        mom[MOM_FL_X_HI] = max(mom[MOM_FL_X_HI], xb)


@jit_noalloc
def prior_moments_solve(mom, kappa, u, l2, x_lo, x_hi, proba_tol, beta, pw, comb):
    """:func:`moments_solve` on the risk of the histogram with the score prior's pseudo-counts
    of strength ``kappa`` (``R_data + kappa R_prior``): the moments of the combined weights,
    ``(1 + kappa) n_b + kappa f_b`` per bucket with ``kappa (n_b + f_b) r_b`` more positive
    weight, formed in the scratch ``comb`` (at least ``MOM_DATA_SIZE`` values) from the data's
    and the floor's moments; False where the floor moments are stale or the solve is not
    certified."""
    if not (mom[MOM_FL_VALID] == 1.0 and comb.shape[0] >= MOM_DATA_SIZE):
        return False
    c1 = 1.0 + kappa
    cu = kappa * u
    comb[MOM_VALID] = 1.0
    comb[MOM_B0] = mom[MOM_B0]
    comb[MOM_B1] = mom[MOM_B1]
    comb[MOM_X_LO] = min(mom[MOM_X_LO], mom[MOM_FL_X_LO])
    comb[MOM_X_HI] = max(mom[MOM_X_HI], mom[MOM_FL_X_HI])
    comb[MOM_UPDATES] = mom[MOM_UPDATES]
    comb[MOM_P0] = mom[MOM_P0] + kappa * (mom[MOM_FL_R0] + u * mom[MOM_FL_FR0])
    comb[MOM_P1] = mom[MOM_P1] + kappa * (mom[MOM_FL_R1] + u * mom[MOM_FL_FR1])
    for m in range(MOM_NS):
        comb[MOM_S + m] = c1 * mom[MOM_S + m] + cu * mom[MOM_FL_S + m]
    for i in range((MOM_K + 1) * MOM_NCOL):
        comb[MOM_M + i] = c1 * mom[MOM_M + i] + cu * mom[MOM_FL_M + i]
    return _moments_solve(comb, pw, u, l2, x_lo, x_hi, proba_tol, beta, _WIDE)


@jit_noalloc
def prior_moments_refit(sf, si, x, table, mom, pc, floor_kind, kappa, u, l2, x_range, proba_tol, beta, pw, comb):
    """:func:`prior_moments_solve`; where it does not certify (the optimum has moved too far from
    the moments' anchor, the floor moments are stale, ``MOM_MAX_UPDATES`` events since the
    anchor), the data's and the floor's moments are rebuilt about :func:`prior_rebuild_anchor`'s
    point (the combined model's uncertified optimum, else the last fit ``beta``) and solved
    again, before any pass. False where that does not certify either (the caller's passes then
    rebuild them about their answer; the moments are marked ``MOM_REFUSED`` meanwhile) or
    ``comb`` is too short to combine the moments."""
    x_lo, x_hi = x_range
    if prior_moments_solve(mom, kappa, u, l2, x_lo, x_hi, proba_tol, beta, pw, comb):
        return True
    if comb.shape[0] < MOM_DATA_SIZE or (mom[MOM_FL_VALID] == MOM_REFUSED and mom[MOM_UPDATES] == 0.0):
        return False
    b0, b1 = prior_rebuild_anchor(mom, u, l2, beta, pw, comb)
    moments_floor_rebuild(sf, si, x, table, mom, pc, floor_kind, b0, b1, pw)
    if prior_moments_solve(mom, kappa, u, l2, x_lo, x_hi, proba_tol, beta, pw, comb):
        return True
    mom[MOM_FL_VALID] = MOM_REFUSED
    return False


@jit_noalloc
def prior_rebuild_anchor(mom, u, l2, beta, pw, comb):
    """Where :func:`prior_moments_refit` rebuilds the moments after :func:`prior_moments_solve`
    refused: the optimum of the combined Taylor model that solve formed in ``comb``, found by
    Newton's method from the last fit ``beta`` and not certified, where it lies within the
    moments' reach of their anchor (``MOM_MAX_RHO`` of ``WIDE_RADIUS`` at the features' range);
    else the last fit. The model's optimum is close to the exact one (the tails it leaves out are
    small there), so the solve about it certifies; the last fit is an event's change of the
    prior's strength away, which can move the optimum past the certificate's reach (a slope step
    of a few 1e-2 while the strength is of order 1)."""
    if not (mom[MOM_FL_VALID] == 1.0 and comb.shape[0] >= MOM_DATA_SIZE):
        return beta[0], beta[1]  # (``comb`` not formed)
    a0 = comb[MOM_B0]
    a1 = comb[MOM_B1]
    ok, d0, d1 = _moments_newton(comb, pw, u, l2, a0, a1, beta[0] - a0, beta[1] - a1)
    reach = WIDE_INV_R * (abs(d0) * max(abs(comb[MOM_X_LO]), abs(comb[MOM_X_HI])) + abs(d1))
    if not (ok and reach <= MOM_MAX_RHO):  # (also where the model's optimum is not finite)
        return beta[0], beta[1]
    return a0 + d0, a1 + d1


@jit_noalloc(forceinline=True)
def _steps_current(steps, sf):
    """True when ``steps`` describes the histogram ``sf`` (no event reached it otherwise)."""
    return (
        steps.shape[0] > 0
        and steps[STEP_VALID] == 1.0
        and steps[STEP_N_LEARNED] == sf[_h.SF_N_LEARNED]
        and steps[STEP_T_POS] == sf[_h.SF_T_POS]
        and steps[STEP_T_NEG] == sf[_h.SF_T_NEG]
    )


@jit_noalloc(forceinline=True)
def _steps_fingerprint(steps, sf):
    steps[STEP_N_LEARNED] = sf[_h.SF_N_LEARNED]
    steps[STEP_T_POS] = sf[_h.SF_T_POS]
    steps[STEP_T_NEG] = sf[_h.SF_T_NEG]


@jit_noalloc(forceinline=True)
def _hessian_add(steps, h, hw, xb):
    """Add Hessian weight ``hw`` at feature ``xb`` to the three sums at ``h``: ``x^2``, ``x``, 1."""
    steps[h] += hw * xb * xb
    steps[h + 1] += hw * xb
    steps[h + 2] += hw


@jit_noalloc(forceinline=True)
def _derivatives_add(steps, h, t, q, w, xb, dens, slope, curve):
    """Add weight ``w`` at feature ``xb`` (where ``f = dens``, ``f' = slope``, ``f'' = curve``) to a
    block's Hessian (at ``h``), third (``t``) and fourth (``q``) derivatives' sums, as the data's
    and the prior pattern's changes since a fit both keep them; returns the Hessian weight."""
    hw = w * max(dens, STEP_FLOOR)
    _hessian_add(steps, h, hw, xb)
    ts = w * slope
    steps[t + 3] += ts
    ts *= xb
    steps[t + 2] += ts
    ts *= xb
    steps[t + 1] += ts
    steps[t] += ts * xb
    steps[q], steps[q + 1], steps[q + 2], steps[q + 3], steps[q + 4] = _add_powers4(
        steps[q], steps[q + 1], steps[q + 2], steps[q + 3], steps[q + 4], w * curve, xb
    )
    return hw


@jit_noalloc
def _steps_add(steps, xb, pos_part, ws, rate, flip):
    """Add stored weight ``ws`` (negative: remove) at feature ``xb``, ``pos_part`` of it
    positive, to every shape's gradient, Hessian, third and fourth derivatives' change at its
    last fit, and to its Brier score, the Brier score's gradient, its steep buckets' Hessian,
    the others' range of ``v``, the range of ``v`` inside the support and the nearest ``v`` past
    its end there (see ``_shape_brier_lower_bound`` and ``_served_certified``); where a block
    keeps the prior pattern's sums, also ``ws`` plus ``flip`` times its floor weight (``flip``
    1 where the bucket starts holding data, -1 where it stops, else 0) at the prior's rate
    ``rate`` to them."""
    S = (steps.shape[0] - STEP_HEADER) // STEP_BLOCK - 1  # (the scratch block last)
    if ws > 0.0:
        steps[STEP_X_LO] = min(steps[STEP_X_LO], xb)
        steps[STEP_X_HI] = max(steps[STEP_X_HI], xb)
    for k in range(S):
        o = STEP_HEADER + k * STEP_BLOCK
        v = steps[o + STEP_B0] * xb + steps[o + STEP_B1]
        p, dens, slope, curve = _canonical_cdf_pdf_slopes(v, 0, steps[o + STEP_XI])
        r = ws * p - pos_part
        steps[o + STEP_DG] += r * xb
        steps[o + STEP_DG + 1] += r
        if steps[o + STEP_P_VALID] == 1.0:
            _pattern_add(steps, o, xb, ws + flip * steps[o + STEP_P_FLIP], rate, p, dens, slope, curve)
        hw = _derivatives_add(steps, o + STEP_DH, o + STEP_DT, o + STEP_DQ, ws, xb, dens, slope, curve)
        q = 1.0 - p
        steps[o + STEP_BRIER] += pos_part * q * q + (ws - pos_part) * p * p
        bg = 2.0 * dens * r
        steps[o + STEP_BG] += bg * xb
        steps[o + STEP_BG + 1] += bg
        steps[o + STEP_SINCE] += 1.0
        if ws < 0.0:
            steps[o + STEP_GONE] -= ws
            continue
        xi = steps[o + STEP_XI]
        steps[o + STEP_VI_LO], steps[o + STEP_VI_HI], steps[o + STEP_V_OUT] = _support_ranges(
            steps[o + STEP_VI_LO], steps[o + STEP_VI_HI], steps[o + STEP_V_OUT], v, xi, gev_lower(xi), gev_upper(xi)
        )
        if dens > 0.0 and abs(slope) <= GOOD_LOG_SLOPE * dens:
            steps[o + STEP_V_LO] = min(steps[o + STEP_V_LO], v)
            steps[o + STEP_V_HI] = max(steps[o + STEP_V_HI], v)
        else:
            _hessian_add(steps, o + STEP_STEEP, hw, xb)


@jit_noalloc(forceinline=True)
def _pattern_add(steps, o, xb, dm, rate, p, dens, slope, curve):
    """The prior pattern's weight change ``dm`` (negative: leaving) at feature ``xb``, where
    the shape block at ``o`` has ``F = p``, ``f = dens``, ``f' = slope``, ``f'' = curve``, in
    its change since the fit (the data's terms of :func:`_steps_add` at rate ``rate``)."""
    e = o + STEP_DPX
    r = dm * (p - rate)
    steps[e + P_G] += r * xb
    steps[e + P_G + 1] += r
    hw = _derivatives_add(steps, e + P_H, e + P_T, e + P_Q, dm, xb, dens, slope, curve)
    steps[e + P_B] += dm * (rate * (1.0 - p) * (1.0 - p) + (1.0 - rate) * p * p)
    bg = 2.0 * dens * r
    steps[e + P_BG] += bg * xb
    steps[e + P_BG + 1] += bg
    if dm < 0.0:
        steps[o + STEP_PGONE] -= dm
    elif not (dens > 0.0 and abs(slope) <= GOOD_LOG_SLOPE * dens):
        _hessian_add(steps, o + STEP_PSP, hw, xb)


@jit_noalloc
def _steps_effective(steps, k, kappa):
    """The index of a block that describes shape ``k``'s risk now under the prior's strength
    ``kappa``: ``k`` where its block keeps no prior pattern, else the scratch block (the last),
    filled with block ``k``'s values and, for the change since the fit, the data's plus the
    prior pattern's share: ``kappa`` times its change plus ``kappa - kappa_0`` times its value
    at the fit (``kappa_0`` the fit's strength). Its steep Hessian part grows by the pattern's
    where ``kappa`` grew (a part that shrinks is kept: an upper bound, as for the events that
    left); the weight that left counts the pattern's that left, ``kappa_0 - kappa`` of the fit's
    pattern where ``kappa`` fell, and ``|kappa - kappa_0| / kappa_0`` times the fit's whole row
    (the bound on the error of its values at the fit, split between the data and the pattern)."""
    o = STEP_HEADER + k * STEP_BLOCK
    if steps[o + STEP_P_VALID] != 1.0:
        return k
    S = (steps.shape[0] - STEP_HEADER) // STEP_BLOCK - 1
    e = STEP_HEADER + S * STEP_BLOCK
    for j in range(STEP_UNIT + 1):
        steps[e + j] = steps[o + j]
    kappa0 = steps[o + STEP_KAPPA]
    d = kappa - kappa0
    for j in range(P_SIZE):
        c = kappa * steps[o + STEP_DPX + j] + d * steps[o + STEP_PX0 + j]
        if j < P_H:
            steps[e + STEP_DG + j] += c
        elif j < P_T:
            steps[e + STEP_DH + j - P_H] += c
        elif j < P_Q:
            steps[e + STEP_DT + j - P_T] += c
        elif j < P_B:
            steps[e + STEP_DQ + j - P_Q] += c
        elif j == P_B:
            steps[e + STEP_BRIER] += c
        else:
            steps[e + STEP_BG + j - P_BG] += c
    for j in range(3):
        steps[e + STEP_STEEP + j] += max(d, 0.0) * steps[o + STEP_PS0 + j] + kappa * steps[o + STEP_PSP + j]
    gone = kappa * steps[o + STEP_PGONE] + max(-d, 0.0) * steps[o + STEP_MP0]
    steps[e + STEP_GONE] += gone + abs(d) / kappa0 * steps[o + STEP_NFIT]
    return S


@jit_noalloc
def _steps_start(steps, k, u, l2, x_lo, x_hi, beta, model):
    """Shape ``k``'s predicted optimum for the histogram now, into ``beta``: from its fit at the
    last refit, a Newton step on the data's change with the curvature's second-order term
    (``H d = -(dg + T[d0, d0] / 2)``, ``d0 = -H^-1 dg``), or where ``model`` (while the score
    prior holds) the root of the block's fourth-order model of the gradient
    (:func:`_block_model_root`), whose error is of the order of the move of ``v`` to the fourth
    power, so that the refit's first pass usually finds a Newton step within its stopping rule
    and stops there; ``beta`` is left as it is where the Hessian is not positive definite or
    the step moves ``v`` by more than ``STEP_MAX_DV``."""
    o = STEP_HEADER + k * STEP_BLOCK
    c = o + STEP_CURV
    h00, h01, h11, det = _block_hessian(steps, o, u, l2)
    if not (det > 0.0 and h00 > 0.0):
        return
    if model:
        solved, d0, d1, _, _ = _block_model_root(steps, o, u, l2, h00, h01, h11, det)
        if solved and max(abs(d0 * x_lo + d1), abs(d0 * x_hi + d1)) <= STEP_MODEL_MAX_DV:
            beta[0] = steps[o + STEP_B0] + d0
            beta[1] = steps[o + STEP_B1] + d1
        return
    g0 = steps[o + STEP_DG] / u
    g1 = steps[o + STEP_DG + 1] / u
    d0 = -(h11 * g0 - h01 * g1) / det
    d1 = -(-h01 * g0 + h00 * g1) / det
    # T[d, d] with T_abc = sum_b n_b f'(v_b) z_a z_b z_c, z = (x, 1)
    t0 = steps[c + 3] / u
    t1 = steps[c + 4] / u
    t2 = steps[c + 5] / u
    t3 = steps[c + 6] / u
    q0 = t0 * d0 * d0 + 2.0 * t1 * d0 * d1 + t2 * d1 * d1
    q1 = t1 * d0 * d0 + 2.0 * t2 * d0 * d1 + t3 * d1 * d1
    g0 += 0.5 * q0
    g1 += 0.5 * q1
    d0 = -(h11 * g0 - h01 * g1) / det
    d1 = -(-h01 * g0 + h00 * g1) / det
    if not max(abs(d0 * x_lo + d1), abs(d0 * x_hi + d1)) <= STEP_MAX_DV:
        return
    beta[0] = steps[o + STEP_B0] + d0
    beta[1] = steps[o + STEP_B1] + d1


@jit_noalloc
def _steps_keep(steps, sf, u, xis, betas, ok, x_lo, x_hi):
    """After a refit whose passes wrote the curvature and Brier score of each shape refitted
    (``ok[k] == 1``; real units): their fits, those values in stored units, no change yet; the
    histogram's fingerprint and its non-empty features' range ``[x_lo, x_hi]``. The blocks of
    shapes whose refit waits (``ok[k] == 2``) or was certified without a pass (3) keep
    following their last fit, and the range then
    keeps what it held (it covers every event such a block has followed, gone ones included)."""
    for k in range(xis.shape[0]):
        if ok[k] != 1:
            continue
        o = STEP_HEADER + k * STEP_BLOCK
        steps[o + STEP_B0] = betas[k, 0]
        steps[o + STEP_B1] = betas[k, 1]
        steps[o + STEP_XI] = xis[k]
        for j in range(STEP_SCALED):
            steps[o + STEP_CURV + j] *= u
        for j in range(5):
            steps[o + STEP_Q + j] *= u
        for j in range(STEP_DG, STEP_UNIT):
            steps[o + j] = 0.0
        steps[o + STEP_UNIT] = u
    waiting = False
    for k in range(xis.shape[0]):
        waiting = waiting or ok[k] >= 2
    if waiting and steps[STEP_VALID] == 1.0:  # the events a waiting shape follows may have left it
        x_lo = min(x_lo, steps[STEP_X_LO])
        x_hi = max(x_hi, steps[STEP_X_HI])
    steps[STEP_X_LO] = x_lo
    steps[STEP_X_HI] = x_hi
    _steps_fingerprint(steps, sf)
    steps[STEP_VALID] = 1.0


@jit_noalloc(forceinline=True)
def _exp_power_sup(a, t_lo, t_hi):
    """``sup e^{-t} t^a`` over ``t`` in ``[t_lo, t_hi]`` (``0 <= t_lo``, ``t_hi`` may be inf;
    unimodal with its mode at ``t = a`` for ``a > 0``, decreasing otherwise)."""
    if a > 0.0:
        t = min(max(a, t_lo), t_hi)
        if t == 0.0 or t == np.inf:
            return 0.0
        return math.exp(-t + a * math.log(t))
    if t_lo == 0.0:
        return 1.0 if a == 0.0 else np.inf
    return math.exp(-t_lo + a * math.log(t_lo)) if t_lo < np.inf else 0.0


@jit_noalloc(forceinline=True)
def _density_bounds(xi, v_lo, v_hi):
    """``(f_sup, f1_sup)``: the GEV density ``f = e^{-t} t^(1 + xi)`` and its derivative
    ``f' = f (t - 1 - xi) / u`` at most in size over ``v`` in ``[v_lo, v_hi]`` (0 beyond the
    support's ends). With ``1 / u = t^xi``, ``|f'| <= e^{-t} (t^(2 + 2 xi) + |1 + xi| t^(1 + 2 xi))``."""
    t_hi, _ = gev_t_u(v_lo, xi)  # t falls with v
    t_lo, _ = gev_t_u(v_hi, xi)
    f_sup = _exp_power_sup(1.0 + xi, t_lo, t_hi)
    f1_sup = _exp_power_sup(2.0 + 2.0 * xi, t_lo, t_hi) + abs(1.0 + xi) * _exp_power_sup(1.0 + 2.0 * xi, t_lo, t_hi)
    return f_sup, f1_sup


@jit_noalloc(forceinline=True)
def _log_slope_bound(xi, v_lo, v_hi, tight):
    """A bound on ``|f'/f| = |t - 1 - xi| / u`` over ``v`` in ``[v_lo, v_hi]``, or -1.0 where
    that interval leaves the support R_xi (``t`` falls with ``v``, and ``u`` is linear in it).
    Where ``tight`` (the bounds' tighter forms: while the score prior holds, and for the logistic
    member's shapes; see :func:`glm_refit_known`), its largest value, at the ends or at its one
    stationary point inside; else ``(t_max + |1 + xi|) / u_min`` (the shapes' refits without the
    member keep the bits they had with it)."""
    if not (gev_lower(xi) < v_lo and v_hi < gev_upper(xi)):
        return -1.0
    t_max, u_a = gev_t_u(v_lo, xi)
    t_min, u_b = gev_t_u(v_hi, xi)
    u_min = min(u_a, u_b)
    if not (u_min > 0.0 and t_max < np.inf and max(u_a, u_b) < np.inf):
        return -1.0
    if not tight:
        return (t_max + abs(1.0 + xi)) / u_min
    # h = (t - 1 - xi) / u = u^(-1 - 1/xi) - (1 + xi) / u is monotone in u but where dh/du = 0,
    # at t = xi (xi > 0 only), where |h| = xi^xi; so |h| is largest at an end or there. The
    # relative and absolute cushions cover the rounding of t and u.
    lam = max(abs(t_max - 1.0 - xi) / u_a, abs(t_min - 1.0 - xi) / u_b)
    if xi > 0.0 and t_min <= xi <= t_max:
        lam = max(lam, math.exp(xi * math.log(xi)))
    return lam * (1.0 + 1e-12) + 1e-12 * (t_max + abs(1.0 + xi)) / u_min


@jit_noalloc(forceinline=True)
def _exp_power_term(coef, a, t_lo, t_hi):
    """``|coef| sup e^{-t} t^a`` over ``[t_lo, t_hi]``, 0 where ``coef`` is 0 (the term is absent,
    also where its power is unbounded)."""
    if coef == 0.0:
        return 0.0
    return abs(coef) * _exp_power_sup(a, t_lo, t_hi)


@jit_noalloc(forceinline=True)
def _density_slope_sup(xi, v_lo, v_hi):
    """A bound on the GEV density's second derivative ``|f''|`` over ``v`` in ``[v_lo, v_hi]``:
    ``f'' = f ((t - 1 - xi)^2 - t - xi (t - 1 - xi)) / u^2 = e^{-t} t^(1 + 3 xi) (t^2 - 3 (1 + xi) t
    + (1 + xi) (1 + 2 xi))`` with ``1 / u = t^xi``, so ``|f''| <= e^{-t} (t^(3 + 3 xi)
    + 3 |1 + xi| t^(2 + 3 xi) + |(1 + xi) (1 + 2 xi)| t^(1 + 3 xi))``."""
    t_hi, _ = gev_t_u(v_lo, xi)
    t_lo, _ = gev_t_u(v_hi, xi)
    a = 1.0 + xi
    return (
        _exp_power_sup(3.0 * a, t_lo, t_hi)
        + _exp_power_term(3.0 * a, 2.0 + 3.0 * xi, t_lo, t_hi)
        + _exp_power_term(a * (1.0 + 2.0 * xi), 1.0 + 3.0 * xi, t_lo, t_hi)
    )


@jit_noalloc(forceinline=True)
def _density_curve_sup(xi, v_lo, v_hi):
    """A bound on the GEV density's third derivative ``|f^(3)|`` over ``v`` in ``[v_lo, v_hi]``:
    with ``f^(k) = e^{-t} t^(1 + (k + 1) xi) P_k(t)``, ``P_0 = 1`` and ``P_(k+1) = (t - 1 - (k + 1)
    xi) P_k - t P_k'`` (``dt/dv = -t^(1 + xi)``), ``P_3 = t^3 - 6 (1 + xi) t^2 + (1 + xi) (7 +
    11 xi) t - (1 + xi) (1 + 2 xi) (1 + 3 xi)``; each term is bounded by :func:`_exp_power_sup`."""
    t_hi, _ = gev_t_u(v_lo, xi)
    t_lo, _ = gev_t_u(v_hi, xi)
    a = 1.0 + xi
    return (
        _exp_power_sup(4.0 * a, t_lo, t_hi)
        + _exp_power_term(6.0 * a, 3.0 + 4.0 * xi, t_lo, t_hi)
        + _exp_power_term(a * (7.0 + 11.0 * xi), 2.0 + 4.0 * xi, t_lo, t_hi)
        + _exp_power_term(a * (1.0 + 2.0 * xi) * (1.0 + 3.0 * xi), 1.0 + 4.0 * xi, t_lo, t_hi)
    )


@jit_noalloc(forceinline=True)
def _box_inv_norm(p00, p01, p11, e0, e1):
    """``sup |e|_P`` over the vectors with ``|e_0| <= e0``, ``|e_1| <= e1`` (``P`` = A^-1)."""
    return math.sqrt(max(p00 * e0 * e0 + 2.0 * abs(p01) * e0 * e1 + p11 * e1 * e1, 0.0))


@jit_noalloc(forceinline=True)
def _model_gradient(g0, g1, a00, a01, a11, t0, t1, t2, t3, q0, q1, q2, q3, q4, d0, d1):
    """``g + A d + T[d, d] / 2 + Q[d, d, d] / 6`` (``T``, ``Q`` as the sums over the buckets of
    ``n f' (d . z)^2 z`` and ``n f'' (d . z)^3 z`` take them: ``t_j`` the moment of ``x^(3-j)``,
    ``q_j`` of ``x^(4-j)``)."""
    r0 = t0 * d0 * d0 + 2.0 * t1 * d0 * d1 + t2 * d1 * d1
    r1 = t1 * d0 * d0 + 2.0 * t2 * d0 * d1 + t3 * d1 * d1
    c0 = q0 * d0 * d0 * d0 + 3.0 * q1 * d0 * d0 * d1 + 3.0 * q2 * d0 * d1 * d1 + q3 * d1 * d1 * d1
    c1 = q1 * d0 * d0 * d0 + 3.0 * q2 * d0 * d0 * d1 + 3.0 * q3 * d0 * d1 * d1 + q4 * d1 * d1 * d1
    m0 = g0 + a00 * d0 + a01 * d1 + 0.5 * r0 + c0 / 6.0
    m1 = g1 + a01 * d0 + a11 * d1 + 0.5 * r1 + c1 / 6.0
    return m0, m1


@jit_noalloc(forceinline=True)
def _block_model(steps, o, u, l2, n_total, x_lo, x_hi):
    """Whether the shape block at ``o`` of ``steps`` can bound a refit without a pass (fitted
    recently enough, a feature range, weight and ``v`` range to work on, a positive definite
    Hessian), and that Hessian ``A`` in real units (``u`` stored units per real one): the last
    pass's curvature plus the events' terms since, plus the ridge ``l2``. Returns ``(usable, a00,
    a01, a11, det)``."""
    if not steps[o + STEP_SINCE] < STEP_MAX_SINCE:
        return False, 0.0, 0.0, 0.0, 0.0
    if not (
        steps[STEP_X_HI] >= steps[STEP_X_LO]
        and x_hi > x_lo
        and n_total > 0.0
        and steps[o + STEP_V_HI] >= steps[o + STEP_V_LO]
    ):
        return False, 0.0, 0.0, 0.0, 0.0
    a00, a01, a11, det = _block_hessian(steps, o, u, l2)
    return det > 0.0 and a00 > 0.0, a00, a01, a11, det


@jit_noalloc(forceinline=True)
def _block_hessian(steps, o, u, l2):
    """The Hessian ``A`` of the shape block at ``o`` of ``steps`` in real units (``u`` stored
    units per real one): the last pass's curvature plus the events' terms since, plus the ridge
    ``l2`` on the slope. Returns ``(a00, a01, a11, det)``."""
    c = o + STEP_CURV
    a00 = (steps[c] + steps[o + STEP_DH]) / u + l2
    a01 = (steps[c + 1] + steps[o + STEP_DH + 1]) / u
    a11 = (steps[c + 2] + steps[o + STEP_DH + 2]) / u  # the ridge is on the slope alone
    return a00, a01, a11, a00 * a11 - a01 * a01


@jit_noalloc(forceinline=True)
def _block_model_root(steps, o, u, l2, a00, a01, a11, det):
    """The root of the shape block at ``o``'s model of the risk's gradient at its fit plus
    ``d``, ``m(d) = g + A d + T[d, d] / 2 + Q[d, d, d] / 6`` (``A`` its Hessian ``(a00, a01,
    a11)`` with determinant ``det > 0``; ``g`` the gradient's change, with the ridge's share
    grown where the stored unit moved; ``T``, ``Q`` the last pass's third and fourth derivatives
    plus the events' terms since), by four Newton steps from ``-A^-1 g``. Returns ``(solved, d0,
    d1, m0, m1)``, ``m`` the model's gradient at ``d``; not solved where the model's Hessian
    ``A + T[d] + Q[d, d] / 2`` is not positive definite on the way."""
    b0 = steps[o + STEP_B0]
    c = o + STEP_CURV
    # the data gradient at the fit balanced the ridge's in the unit of then: with decay, the
    # ridge's share has grown since
    ridge = l2 * (1.0 - steps[o + STEP_UNIT] / u)  # on the slope alone
    g0 = steps[o + STEP_DG] / u + ridge * b0
    g1 = steps[o + STEP_DG + 1] / u
    t0 = (steps[c + 3] + steps[o + STEP_DT]) / u
    t1 = (steps[c + 4] + steps[o + STEP_DT + 1]) / u
    t2 = (steps[c + 5] + steps[o + STEP_DT + 2]) / u
    t3 = (steps[c + 6] + steps[o + STEP_DT + 3]) / u
    q = o + STEP_Q
    e = o + STEP_DQ
    q0 = (steps[q] + steps[e]) / u
    q1 = (steps[q + 1] + steps[e + 1]) / u
    q2 = (steps[q + 2] + steps[e + 2]) / u
    q3 = (steps[q + 3] + steps[e + 3]) / u
    q4 = (steps[q + 4] + steps[e + 4]) / u
    d0 = -(a11 * g0 - a01 * g1) / det
    d1 = -(-a01 * g0 + a00 * g1) / det
    m0, m1 = _model_gradient(g0, g1, a00, a01, a11, t0, t1, t2, t3, q0, q1, q2, q3, q4, d0, d1)
    for _ in range(4):
        # the model's Hessian A + T[d] + Q[d, d] / 2
        j00 = a00 + t0 * d0 + t1 * d1 + 0.5 * (q0 * d0 * d0 + 2.0 * q1 * d0 * d1 + q2 * d1 * d1)
        j01 = a01 + t1 * d0 + t2 * d1 + 0.5 * (q1 * d0 * d0 + 2.0 * q2 * d0 * d1 + q3 * d1 * d1)
        j11 = a11 + t2 * d0 + t3 * d1 + 0.5 * (q2 * d0 * d0 + 2.0 * q3 * d0 * d1 + q4 * d1 * d1)
        jd = j00 * j11 - j01 * j01
        if not (jd > 0.0 and j00 > 0.0):
            return False, d0, d1, m0, m1
        d0 -= (j11 * m0 - j01 * m1) / jd
        d1 -= (-j01 * m0 + j00 * m1) / jd
        m0, m1 = _model_gradient(g0, g1, a00, a01, a11, t0, t1, t2, t3, q0, q1, q2, q3, q4, d0, d1)
    return True, d0, d1, m0, m1


@jit_noalloc
def _served_certified(steps, k, u, l2, n_total, x_lo, x_hi, tol, beta, tight, serve_tol, spare, powers):
    """Shape ``k``'s optimum for the histogram now without a pass over the buckets, certified:
    returns ``(ok, brier, brier_high, brier_low)``; where ``ok``, ``beta`` receives a point whose
    served probabilities at every feature in ``[x_lo, x_hi]`` lie within ``serve_tol`` of the
    optimum's (``SERVE_TOL`` for the served shape; ``inf`` where only the bounds are wanted),
    ``brier`` the Brier score there to first order, ``brier_high`` an upper bound on the
    optimum's Brier score and ``brier_low`` a lower bound on the Brier score the shape's refit
    would find, less that refit's own error (step 5; ``-inf`` where not certified). The bands'
    reach ``R`` grows by ``spare`` times ``delta`` (0 for the served shape).

    Notation as in :func:`_shape_brier_lower_bound`: ``beta0`` the shape's last fit (its
    refit's last Newton point, ``tol`` from that refit's last pass in ``v``), ``A`` the data
    Hessian there (the last pass's, carried to ``beta0`` to first order, plus the events'
    terms since) plus the ridge, ``g`` the risk's gradient's change there (the data's, and the
    ridge's ``l2 (1 - u0 / u) beta0`` where the stored unit moved from ``u0`` to ``u``), ``T`` the third
    derivatives (the last pass's plus the events' terms since), ``[lo, hi]`` every feature the
    block follows, ``K = max |z|_{A^-1}`` there, ``N'`` the window's weight plus twice the
    weight that left it.

    1. The model ``m(d) = g + A d + T[d, d] / 2`` (the risk's gradient at ``beta0 + d`` to
       second order) is solved by Newton's method from ``-A^-1 g``; ``delta = max |d . z|``
       over ``[lo, hi]``.
    2. The risk's gradient at ``beta0 + d`` differs from ``m(d)`` by at most
       ``E |z_a|`` in component ``a`` (``|z_0| <= max(|lo|, |hi|)``, ``|z_1| = 1``), ``E = N'
       (f1 tol^2 / 2 + 1e-12 tol + (f2 tol^2 / 2 + 1e-12) delta + f2 tol delta^2 / 2 + f2
       delta^3 / 6)``: the last refit's residual at ``beta0`` (its final step of at most
       ``tol`` in ``v``, the weights' floor), the Hessian's and the third derivatives' error at
       ``beta0`` (their pass lay ``tol`` away), and Taylor's remainder, with ``f1``, ``f2``
       bounds on ``|f'|``, ``|f''|`` over every bucket's band of ``v`` (``R`` about its ``v``;
       :func:`_density_bounds`, :func:`_density_slope_sup`). A band crossing the support's end
       is refused (``f'`` may jump there); the buckets whose band lies past it, where ``F`` is
       constant, add nothing, so ``f2`` bounds ``|f''|`` over the bands of the others
       (``STEP_VI_LO``, ``STEP_VI_HI``, ``STEP_V_OUT``). Where ``tight`` is above 0 (the bounds'
       tighter forms: while the prior holds, and for the logistic member's shapes; see
       :func:`glm_refit_known`; the tight bound on ``|f'/f|`` of :func:`_log_slope_bound` too),
       a shape with ``xi > 0`` is not refused there: at its lower end ``t -> inf`` and ``F`` and
       every derivative ``e^{-t} t^(1 + (k + 1) xi) P_k(t)`` tend to 0, so ``F`` (0 below it) is
       smooth across it, and ``f2``, ``f3`` are taken over every band up to ``t = inf``.
       Unless ``powers`` is empty (else the histogram's power sums ``sum_b n_b x_b^j``, ``j = 0 ..
       4``, in the units of ``n_total``), Taylor's remainder ``f3 N' delta^4 / 24`` is taken
       bucket by bucket, ``f3 (sum_b n_b (d . z_b)^4 + 2 gone delta^4) / 24`` where smaller
       (:func:`_quartic_sum`; ``|d . z_b| <= delta`` at every bucket).
    3. With ``c`` of step 1 of :func:`_shape_brier_lower_bound` (the Hessian is at least
       ``c A`` wherever ``v`` moves by at most ``R - tol``), the optimum lies within ``r = nu /
       c`` of ``beta0 + d`` in the ``A``-norm, ``nu`` the gradient's ``A^-1``-norm at most
       (checked: ``delta + r K + tol <= R``); a served ``v`` moves by at most ``r Z`` (``Z =
       max |z|_{A^-1}`` at ``x_lo``, ``x_hi``) and its probability by ``f_max r Z``
       (``f_max`` the density's maximum).
    4. As in step 3 there, the optimum's Brier score is at most ``B0 + G . d + |G|_{A^-1} r +
       C_B N' (tol + delta + r K)^2 / 2``.
    5. Likewise it is at least ``B0 + G . d - |G|_{A^-1} r - C_B N' (tol + delta + r K)^2 / 2``
       (``G . (beta* - beta0 - d) >= -|G|_{A^-1} |beta* - beta0 - d|_A``, and the second
       derivative's bound as in step 4). The refit's own Brier score, at a point within about
       ``tol`` of the optimum in ``v`` (so within ``delta + r K + 2 tol <= R`` of ``beta0``'s,
       checked, where ``f_sup`` and ``C_B`` hold), is within ``4 f_sup N tol + C_B N tol^2 / 2``
       of the exact one (step 4 of :func:`_shape_brier_lower_bound`): the lower bound subtracts
       it too. Where the model is accurate this bound is far tighter than that function's,
       whose step about ``beta0`` is the Newton step ``-A^-1 g`` with a first-order error.

    Not certified (``ok`` False) where the block is not usable, any bound is not finite, or
    the probability's bound exceeds ``serve_tol``."""
    o = STEP_HEADER + k * STEP_BLOCK
    usable, a00, a01, a11, det = _block_model(steps, o, u, l2, n_total, x_lo, x_hi)
    if not usable:
        return False, 0.0, 0.0, -np.inf
    lo = steps[STEP_X_LO]
    hi = steps[STEP_X_HI]
    vg_lo = steps[o + STEP_V_LO]
    vg_hi = steps[o + STEP_V_HI]
    xi = steps[o + STEP_XI]
    b0 = steps[o + STEP_B0]
    b1 = steps[o + STEP_B1]
    # 1. Newton's method on the model
    solved, d0, d1, m0, m1 = _block_model_root(steps, o, u, l2, a00, a01, a11, det)
    if not solved:
        return False, 0.0, 0.0, -np.inf
    delta = max(abs(d0 * lo + d1), abs(d0 * hi + d1))
    # 2. the gradient's error, over the band of v within ``reach`` of every bucket's
    p00 = a11 / det
    p01 = -a01 / det
    p11 = a00 / det
    kk2 = max(_quad_inv(a00, a01, a11, det, lo, 1.0), _quad_inv(a00, a01, a11, det, hi, 1.0))
    kk = math.sqrt(kk2)
    zz = math.sqrt(max(_quad_inv(a00, a01, a11, det, x_lo, 1.0), _quad_inv(a00, a01, a11, det, x_hi, 1.0)))
    n_all = n_total + 2.0 * steps[o + STEP_GONE] / u
    reach = 1.01 * delta + 3.0 * tol + 1e-9 + spare * delta
    va = b0 * lo + b1
    vb = b0 * hi + b1
    v_lo = min(va, vb) - reach
    v_hi = max(va, vb) + reach
    f_sup, f1_sup = _density_bounds(xi, v_lo, v_hi)
    # f'' over the buckets inside the support; those past its end stay there (F constant)
    vi_lo = steps[o + STEP_VI_LO] - reach
    vi_hi = steps[o + STEP_VI_HI] + reach
    v_out = steps[o + STEP_V_OUT]
    if xi > 0.0 and tight > 0.0 and vi_lo <= vi_hi:
        # F and each f^(k) = e^{-t} t^(1 + (k + 1) xi) P_k(t) tend to 0 at the lower end (t -> inf),
        # so F (0 below it) is smooth there and a band may cross it: the bounds then run up to
        # t = inf, and over the bands of the buckets past the end that may enter the support
        if v_out + reach > gev_lower(xi):
            vi_lo = min(vi_lo, gev_lower(xi))
            vi_hi = max(vi_hi, v_out + reach)
    else:
        if not (gev_lower(xi) < vi_lo <= vi_hi < gev_upper(xi)):
            return False, 0.0, 0.0, -np.inf
        if (xi < 0.0 and not v_out - reach >= gev_upper(xi)) or (xi > 0.0 and not v_out + reach <= gev_lower(xi)):
            return False, 0.0, 0.0, -np.inf
    f2_sup = _density_slope_sup(xi, vi_lo, vi_hi)
    f3_sup = _density_curve_sup(xi, vi_lo, vi_hi)
    lam = _log_slope_bound(xi, vg_lo - reach, vg_hi + reach, tight > 0.0)
    if not (lam >= 0.0 and f_sup < np.inf and f1_sup < np.inf and f2_sup < np.inf and f3_sup < np.inf):
        return False, 0.0, 0.0, -np.inf
    if powers.shape[0] == 0:
        err = n_all * (
            0.5 * f1_sup * tol * tol
            + STEP_FLOOR * tol
            + (0.5 * f2_sup * tol * tol + STEP_FLOOR) * delta
            + 0.25 * f3_sup * tol * tol * delta * delta
            + f3_sup * tol * delta * delta * delta / 6.0
            + f3_sup * delta * delta * delta * delta / 24.0
        )
    else:  # Taylor's remainder from the row's weights (:func:`_quartic_sum`)
        err = n_all * (
            0.5 * f1_sup * tol * tol
            + STEP_FLOOR * tol
            + (0.5 * f2_sup * tol * tol + STEP_FLOOR) * delta
            + 0.25 * f3_sup * tol * tol * delta * delta
            + f3_sup * tol * delta * delta * delta / 6.0
        )
        quartic = _quartic_sum(powers, d0, d1, n_all - n_total, delta)
        err += f3_sup * min(quartic, n_all * delta * delta * delta * delta) / 24.0
    nu = _box_inv_norm(p00, p01, p11, abs(m0) + err * max(abs(lo), abs(hi)), abs(m1) + err)
    # 3. the optimum's distance
    s00 = steps[o + STEP_STEEP] / u
    s01 = steps[o + STEP_STEEP + 1] / u
    s11 = steps[o + STEP_STEEP + 2] / u
    theta = max((a11 * s00 - 2.0 * a01 * s01 + a00 * s11) / det, 0.0)
    eps = (f1_sup * tol + STEP_FLOOR) * n_all * kk2
    low = math.exp(-reach * lam) * (1.0 - theta - eps)
    if not low >= 0.5:
        return False, 0.0, 0.0, -np.inf
    r = nu / low
    if not (delta + r * kk + tol <= reach and r * zz * _exp_power_sup(1.0 + xi, 0.0, np.inf) <= serve_tol):
        return False, 0.0, 0.0, -np.inf
    # 4. the Brier score
    big_g0 = steps[o + STEP_BG] / u
    big_g1 = steps[o + STEP_BG + 1] / u
    brier = steps[o + STEP_BRIER] / u + big_g0 * d0 + big_g1 * d1
    c_b = 2.0 * f_sup * f_sup + 2.0 * f1_sup
    move = tol + delta + r * kk
    g_r = math.sqrt(_quad_inv(a00, a01, a11, det, big_g0, big_g1)) * r
    high = brier + g_r + 0.5 * c_b * n_all * move * move
    # 5. the refit's Brier score less its own error
    low = -np.inf
    if move + tol <= reach:
        low = brier - g_r - 0.5 * c_b * n_all * move * move
        low -= 4.0 * f_sup * n_total * tol + 0.5 * c_b * n_total * tol * tol
    beta[0] = b0 + d0
    beta[1] = b1 + d1
    return True, brier, high, low


@jit_noalloc(forceinline=True)
def _quartic_sum(powers, d0, d1, gone, delta):
    """An upper bound on ``sum_b n_b (d . z_b)^4 + gone delta^4`` over a row whose power sums
    ``sum_b n_b x_b^j`` (``j = 0 .. 4``, every ``n_b >= 0``) are ``powers``, ``z_b = (x_b, 1)``:
    the binomial expansion in the sums, plus ``1e-10`` of its terms' absolute sum for their
    rounding (the odd sums' absolute values bounded by Cauchy-Schwarz, ``sum n |x|^j <= (sum n
    x^(j-1) sum n x^(j+1))^(1/2)``). Where ``|d . z_b| <= delta`` at every bucket it is at most
    ``(N + gone) delta^4``, ``N`` the row's weight: the remainder of a fourth-order model, bucket by
    bucket rather than at the largest move, with ``gone`` (twice the weight that left the window)
    at the largest."""
    m0 = powers[0]
    m1 = powers[1]
    m2 = powers[2]
    m3 = powers[3]
    m4 = powers[4]
    a = d0 * d0
    b = d1 * d1
    total = m4 * a * a + 4.0 * m3 * a * d0 * d1 + 6.0 * m2 * a * b + 4.0 * m1 * d0 * d1 * b + m0 * b * b
    s1 = math.sqrt(m0 * m2)
    s3 = math.sqrt(m2 * m4)
    ad = abs(d0 * d1)
    size = m4 * a * a + 4.0 * s3 * a * ad + 6.0 * m2 * a * b + 4.0 * s1 * ad * b + m0 * b * b
    return max(total, 0.0) + 1e-10 * size + gone * delta * delta * delta * delta


@jit_noalloc
def _shape_brier_lower_bound(steps, k, u, l2, n_total, x_lo, x_hi, tol, tight):
    """A lower bound on the Brier score that shape ``k``'s refit would find now, less the
    refit's own error, without a pass over the buckets (``-inf`` where none is certified).

    Notation: ``beta0`` the shape's last fit; ``A`` the data Hessian there (its last pass's
    curvature plus the events' terms since, weights floored at ``1e-12``) plus the ridge; ``S``
    the part of ``A`` from the steep buckets (``|f'/f| > GOOD_LOG_SLOPE``, or ``f = 0``; the
    events that left the window are not taken out of it), ``theta = tr(A^-1 S)``; ``[vg_lo,
    vg_hi]`` the range of ``v`` over the other buckets; ``g`` the data gradient's change at
    ``beta0``; ``B0`` and ``G`` the Brier score and its gradient there (the last pass's, plus
    the events' terms); ``K = max |z|_{A^-1}`` over the features ``[lo, hi]`` (``STEP_X_LO``,
    ``STEP_X_HI``: every bucket the block follows, events that left the window included); ``N``
    the window's weight, ``N'`` that plus twice the weight that left it; ``tol`` the refit's
    stopping rule (its last step moved ``v`` by at most ``tol`` at every feature).

    1. Within ``R`` (``reach``) of ``[vg_lo, vg_hi]`` the density's log-derivative is at most
       ``lam`` (:func:`_log_slope_bound`), so there moving ``v`` by at most ``R`` scales ``f``
       by a factor in ``[e^{-R lam}, e^{R lam}]``; the steep buckets' curvature is at least 0
       and grows by at most ``f1_sup R`` per unit weight (``f1_sup`` bounds ``|f'|`` over every
       bucket's band, :func:`_density_bounds`). With ``z z' <= K^2 A`` for the floors and for
       the last pass's point (``tol`` from ``beta0`` in ``v``), the data Hessian plus the ridge
       ``H(beta)`` lies within ``[c, C] A`` wherever ``v`` moves by at most ``R - tol``:
       ``c = e^{-R lam} (1 - theta - eps)``, ``C = e^{R lam} (1 + eps) + theta + f1_sup R N' K^2``,
       ``eps = (f1_sup tol + 1e-12) N' K^2``.
    2. The risk's gradient at ``beta0`` is ``g`` plus the residual of the last refit's final
       Newton step ``d``: ``|g_res|_{A^-1} <= eps_res |d|_A =: nu_res`` with
       ``eps_res = (expm1(tol lam) f_sup + f1_sup tol + 1e-12) N' K^2`` and
       ``|d|_A <= sqrt(N' f_sup tol^2 + l2 d_0^2)`` (the ridge is on the slope alone). With
       ``nu = |g|_{A^-1} + nu_res`` the
       optimum ``beta*`` lies within ``r = nu / c`` of ``beta0`` in the ``A``-norm (along any ray
       the gradient grows by at least ``c`` per unit), so ``v`` moves by at most ``rho = r K``
       (checked: ``rho + 2 tol <= R``). From ``0 = g + g_res + Hbar delta`` (``Hbar`` the mean
       Hessian on the segment) the step ``delta = beta* - beta0`` lies within
       ``e = max(1 / c - 1, 1 - 1 / C) |g|_{A^-1} + nu_res / c`` of ``dhat = -A^-1 g``.
    3. Each bucket's squared error ``pos (1 - F)^2 + neg F^2`` has second derivative
       ``2 n f^2 + 2 f' (n F - pos)`` in ``v``, at most ``n C_B`` in size with
       ``C_B = 2 f_sup^2 + 2 f1_sup``, so
       ``Brier(beta*) >= B0 + G . dhat - |G|_{A^-1} e - C_B N' (rho + tol)^2 / 2`` (the last
       pass's value and gradient are at a point ``tol`` from ``beta0`` in ``v``).
    4. The refit's own Brier score (at a point within about ``tol`` of the optimum in ``v``, to
       first order from its last pass) is within ``4 f_sup N tol + C_B N tol^2 / 2`` of the
       exact one: that is subtracted too.
    """
    o = STEP_HEADER + k * STEP_BLOCK
    usable, a00, a01, a11, det = _block_model(steps, o, u, l2, n_total, x_lo, x_hi)
    if not usable:
        return -np.inf
    lo = steps[STEP_X_LO]
    hi = steps[STEP_X_HI]
    vg_lo = steps[o + STEP_V_LO]
    vg_hi = steps[o + STEP_V_HI]
    xi = steps[o + STEP_XI]
    b0 = steps[o + STEP_B0]
    b1 = steps[o + STEP_B1]
    g0 = steps[o + STEP_DG] / u
    g1 = steps[o + STEP_DG + 1] / u
    nu_g = math.sqrt(_quad_inv(a00, a01, a11, det, g0, g1))
    kk2 = max(_quad_inv(a00, a01, a11, det, lo, 1.0), _quad_inv(a00, a01, a11, det, hi, 1.0))
    kk = math.sqrt(kk2)
    n_all = n_total + 2.0 * steps[o + STEP_GONE] / u
    s00 = steps[o + STEP_STEEP] / u
    s01 = steps[o + STEP_STEEP + 1] / u
    s11 = steps[o + STEP_STEEP + 2] / u
    theta = max((a11 * s00 - 2.0 * a01 * s01 + a00 * s11) / det, 0.0)
    reach = 2.02 * nu_g * kk + 3.0 * tol
    va = b0 * lo + b1
    vb = b0 * hi + b1
    f_sup, f1_sup = _density_bounds(xi, min(va, vb) - reach, max(va, vb) + reach)
    lam = _log_slope_bound(xi, vg_lo - reach, vg_hi + reach, tight > 0.0)
    if not (lam >= 0.0 and f_sup < np.inf and f1_sup < np.inf):
        return -np.inf
    eps = (f1_sup * tol + STEP_FLOOR) * n_all * kk2
    low = math.exp(-reach * lam) * (1.0 - theta - eps)
    if not low >= 0.5:
        return -np.inf
    high = math.exp(reach * lam) * (1.0 + eps) + theta + f1_sup * reach * n_all * kk2
    d0m = 2.0 * tol / (x_hi - x_lo)
    eps_res = (math.expm1(tol * lam) * f_sup + f1_sup * tol + STEP_FLOOR) * n_all * kk2
    nu_res = eps_res * math.sqrt(n_all * max(f_sup, STEP_FLOOR) * tol * tol + l2 * d0m * d0m)
    rho = (nu_g + nu_res) / low * kk
    if not rho + 2.0 * tol <= reach:
        return -np.inf
    dh0 = -(a11 * g0 - a01 * g1) / det
    dh1 = -(-a01 * g0 + a00 * g1) / det
    big_g0 = steps[o + STEP_BG] / u
    big_g1 = steps[o + STEP_BG + 1] / u
    g_norm = math.sqrt(_quad_inv(a00, a01, a11, det, big_g0, big_g1))
    err = max(1.0 / low - 1.0, 1.0 - 1.0 / high) * nu_g + nu_res / low
    c_b = 2.0 * f_sup * f_sup + 2.0 * f1_sup
    bound = steps[o + STEP_BRIER] / u + big_g0 * dh0 + big_g1 * dh1 - g_norm * err
    bound -= 0.5 * c_b * n_all * (rho + tol) * (rho + tol)
    return bound - (4.0 * f_sup * n_total * tol + 0.5 * c_b * n_total * tol * tol)


@jit_noalloc(forceinline=True)
def _held_flip(was_held, now_held):
    """1.0 where a bucket starts holding data, -1.0 where it stops, else 0.0."""
    if was_held == now_held:
        return 0.0
    return 1.0 if now_held else -1.0


@jit_noalloc(forceinline=True)
def _pattern_rate(pc, b):
    """The score prior's rate at bucket ``b`` (probability inputs; ``pc`` as the refit's)."""
    return math.exp(pc[PC_LOG_R, b])


@jit_noalloc
def glm_learn_one_inplace(sf, si, b, y, w, t, x, table, mom, pc, anchor, steps):
    """Learn one event into the histogram (``histogram_learn_one_inplace``) and, while they are
    current, into the moments, the prior certificate's running sums, GEV's predicted starts and
    the prior's: the events leaving the window out, the new one in."""
    kind = sf[_h.SF_KIND]
    clock = _h.window_clock(sf, t, kind)
    track = moments_current(mom, sf)
    floor = track and mom[MOM_FL_VALID] == 1.0
    sums = _running_sums_current(anchor, sf)
    shapes = _steps_current(steps, sf)
    start = anchor[ANCHOR_PRIOR : ANCHOR_PRIOR + PRIOR_SIZE]
    prior_step = _prior_step_current(start, sf)
    dm = mom[MOM_D : MOM_D + D_SIZE]
    prior_d = moments_current(dm, sf)
    B = si[_h.SI_B]
    W = si[_h.SI_W]
    ring = _h.SF_HEADER + 2 * B
    while True:
        rb = 0
        rw = 0.0
        ry = 0.0
        if si[_h.SI_RING_COUNT] > 0:
            head = si[_h.SI_RING_HEAD]
            rb = si[_h.SI_HEADER + 2 * B + head]
            rw = sf[ring + head]
            ry = sf[ring + W + head]
        was = sf[_h.SF_HEADER + rb] + sf[_h.SF_HEADER + B + rb] > 0.0
        if _h.window_expire_next_inplace(sf, si, clock, kind) < 0:
            break
        if track:
            _moments_add(mom, table, x[rb], -rw if ry > 0.5 else 0.0, -rw)
        if floor:
            held = sf[_h.SF_HEADER + rb] + sf[_h.SF_HEADER + B + rb] > 0.0
            _floor_event(mom, table, x, pc, B, rb, -rw, was, held)
        if sums:
            _running_sums_add(anchor, pc, rb, -rw if ry > 0.5 else 0.0, -rw)
        if shapes:
            flip = _held_flip(was, sf[_h.SF_HEADER + rb] + sf[_h.SF_HEADER + B + rb] > 0.0)
            _steps_add(steps, x[rb], -rw if ry > 0.5 else 0.0, -rw, _pattern_rate(pc, rb), flip)
        if prior_step:
            _prior_step_add(start, pc, rb, -rw if ry > 0.5 else 0.0, -rw)
        if prior_d:
            _prior_d_add(dm, table, pc, rb, -rw if ry > 0.5 else 0.0, -rw)
    was_held = sf[_h.SF_HEADER + b] + sf[_h.SF_HEADER + B + b] > 0.0
    renormalised = _h.window_add_inplace(sf, si, b, y, w, clock, kind)
    if prior_step and not renormalised:
        ws = w * _h.stored_unit(sf, kind)
        _prior_step_add(start, pc, b, ws if y > 0.5 else 0.0, ws)
        start[PRIOR_N_LEARNED] = sf[_h.SF_N_LEARNED]
        start[PRIOR_T_POS] = sf[_h.SF_T_POS]
        start[PRIOR_T_NEG] = sf[_h.SF_T_NEG]
    else:
        start[PRIOR_STEP_VALID] = 0.0
    if prior_d:
        if renormalised:
            dm[MOM_VALID] = 0.0
        else:
            ws = w * _h.stored_unit(sf, kind)
            _prior_d_add(dm, table, pc, b, ws if y > 0.5 else 0.0, ws)
            _moments_fingerprint(dm, sf)
    if shapes:
        if renormalised:
            steps[STEP_VALID] = 0.0
        else:
            ws = w * _h.stored_unit(sf, kind)
            flip = _held_flip(was_held, sf[_h.SF_HEADER + b] + sf[_h.SF_HEADER + B + b] > 0.0)
            _steps_add(steps, x[b], ws if y > 0.5 else 0.0, ws, _pattern_rate(pc, b), flip)
            _steps_fingerprint(steps, sf)
    elif steps.shape[0] > 0:
        steps[STEP_VALID] = 0.0
    if sums:
        if renormalised:
            anchor[ANCHOR_SUMS_VALID] = 0.0
        else:
            ws = w * _h.stored_unit(sf, kind)
            _running_sums_add(anchor, pc, b, ws if y > 0.5 else 0.0, ws)
            _running_sums_fingerprint(anchor, sf)
    else:
        anchor[ANCHOR_SUMS_VALID] = 0.0
    if track:
        if renormalised:
            mom[MOM_VALID] = 0.0
            return
        ws = w * _h.stored_unit(sf, kind)  # the stored weight, as the histogram computed it
        xb = x[b]
        _moments_add(mom, table, xb, ws if y > 0.5 else 0.0, ws)
        if floor:
            held = sf[_h.SF_HEADER + b] + sf[_h.SF_HEADER + B + b] > 0.0
            _floor_event(mom, table, x, pc, B, b, ws, was_held, held)
        mom[MOM_X_LO] = min(mom[MOM_X_LO], xb)
        mom[MOM_X_HI] = max(mom[MOM_X_HI], xb)
        _moments_fingerprint(mom, sf)
    else:
        mom[MOM_VALID] = 0.0


@jit_noalloc(forceinline=True)
def _moments_eval(mom, d0, d1, pw, u):
    """The data's gradient sums and Hessian at anchor + ``(d0, d1)`` from the Taylor moments:
    ``(G0, G1, H0, H1, H2)`` with ``G_j = sum_b n_b sigma(v_b) x_b^j - sum_b pos_b x_b^j`` and
    ``H_m = sum_b n_b sigma'(v_b) x_b^m`` (real units). ``pw`` is scratch of ``2 (MOM_K + 1)``."""
    pw[0] = 1.0
    pw[MOM_K + 1] = 1.0
    for i in range(1, MOM_K + 1):
        pw[i] = pw[i - 1] * d0
        pw[MOM_K + 1 + i] = pw[MOM_K + i] * d1
    g0 = 0.0
    g1 = 0.0
    h0 = 0.0
    h1 = 0.0
    h2 = 0.0
    for k in range(MOM_K + 1):
        base = MOM_M + k * MOM_NCOL
        for i in range(k + 1):
            term = BINOM[k, i] * pw[i] * pw[MOM_K + 1 + k - i]
            g0 += term * mom[base + i]
            g1 += term * mom[base + i + 1]
            if k < MOM_K:  # sigma' from c_{k+1}: (k + 1) c_{k+1} u^k
                nb = base + MOM_NCOL
                f = (k + 1) * term
                h0 += f * mom[nb + i]
                h1 += f * mom[nb + i + 1]
                h2 += f * mom[nb + i + 2]
    return (
        (g0 - mom[MOM_P0]) / u,
        (g1 - mom[MOM_P1]) / u,
        h0 / u,
        h1 / u,
        h2 / u,
    )


@jit_noalloc(forceinline=True)
def _tail_bounds(mom, a, c, rho, u):
    """Cauchy's bounds on the Taylor tails of the gradient (``e_s``, ``e_i``) and the Hessian
    (``e_ss``, ``e_si``, ``e_ii``) of a block of moments ``mom`` for a step ``(a, c)`` in absolute
    value, ``rho`` the step's reach in the logistic's radius (below 1), ``u`` the stored unit."""
    k1 = MOM_K + 1
    grad_factor = TWO_OVER_PI**k1 / (1.0 - rho) / u
    e_s = grad_factor * _tail_sum(mom, a, c, k1, np.int64(1))
    e_i = grad_factor * _tail_sum(mom, a, c, k1, np.int64(0))
    hess_factor = TWO_OVER_PI**k1 * (k1 / (1.0 - rho) + rho / ((1.0 - rho) * (1.0 - rho))) / u
    e_ss = hess_factor * _tail_sum(mom, a, c, np.int64(MOM_K), np.int64(2))
    e_si = hess_factor * _tail_sum(mom, a, c, np.int64(MOM_K), np.int64(1))
    e_ii = hess_factor * _tail_sum(mom, a, c, np.int64(MOM_K), np.int64(0))
    return e_s, e_i, e_ss, e_si, e_ii


@jit_noalloc(forceinline=True)
def _tail_bounds_wide(mom, a, c, rho, u):
    """:func:`_tail_bounds` by Cauchy's estimate on discs of radius ``WIDE_RADIUS`` (``|c_k| <=
    WIDE_SUP WIDE_INV_R^k``), ``rho`` the step's reach over ``WIDE_RADIUS`` (below 1)."""
    k1 = MOM_K + 1
    lead = WIDE_SUP * WIDE_INV_R**k1 / u
    grad_factor = lead / (1.0 - rho)
    e_s = grad_factor * _tail_sum(mom, a, c, k1, np.int64(1))
    e_i = grad_factor * _tail_sum(mom, a, c, k1, np.int64(0))
    hess_factor = lead * (k1 / (1.0 - rho) + rho / ((1.0 - rho) * (1.0 - rho)))
    e_ss = hess_factor * _tail_sum(mom, a, c, np.int64(MOM_K), np.int64(2))
    e_si = hess_factor * _tail_sum(mom, a, c, np.int64(MOM_K), np.int64(1))
    e_ii = hess_factor * _tail_sum(mom, a, c, np.int64(MOM_K), np.int64(0))
    return e_s, e_i, e_ss, e_si, e_ii


@jit_noalloc(forceinline=True)
def _tail_sum(mom, a, c, order, shift):
    """``sum_i C(order, i) a^i c^(order - i) S_(i + shift)`` (stored units)."""
    acc = 0.0
    for i in range(order + 1):
        acc += BINOM[order, i] * (a**i) * (c ** (order - i)) * mom[MOM_S + i + shift]
    return acc


@jit_noalloc(forceinline=True)
def _moments_newton(mom, pw, u, l2, a0, a1, d0, d1):
    """Newton's method on the Taylor model of the risk about the anchor ``(a0, a1)``, from the
    step ``(d0, d1)``: ``(ok, d0, d1)``, the model's optimum as a step from the anchor (not
    certified); ok False where the model's Hessian is not positive definite on the way."""
    for _ in range(8):
        g0, g1, h0, h1, h2 = _moments_eval(mom, d0, d1, pw, u)
        gs = g1 + l2 * (a0 + d0)  # slope
        gi = g0  # intercept: the ridge is on the slope alone
        hss = h2 + l2
        hsi = h1
        hii = h0
        det = hss * hii - hsi * hsi
        if not (det > 0.0 and hss > 0.0):
            return False, d0, d1
        s0 = -(hii * gs - hsi * gi) / det
        s1 = -(-hsi * gs + hss * gi) / det
        d0 += s0
        d1 += s1
        if abs(s0) + abs(s1) <= 1e-15 * (1.0 + abs(a0 + d0) + abs(a1 + d1)):
            break
    return True, d0, d1


@jit_noalloc
def moments_solve(mom, pw, u, l2, x_lo, x_hi, proba_tol, beta):
    """Newton's method on the Taylor model of the risk from ``beta``; True (``beta`` updated)
    when the optimum is certified: every served probability within ``proba_tol`` of the exact
    optimum's, the Taylor tail and the moments' reach included (see the module notes). A fit
    held at slope 0 first tries to stay there (:func:`moments_held`)."""
    if moments_held(mom, u, beta):
        return True
    return _moments_solve(mom, pw, u, l2, x_lo, x_hi, proba_tol, beta, _NARROW)


@jit_noalloc(forceinline=True)
def moments_held(mom, u, beta):
    """Platt's fit held at slope 0 (the map must not fall: ``glm_refit_known``) kept from the
    moments about a held anchor, without a pass: True (``beta[1]`` updated) where the previous fit
    ``beta`` and the moments' anchor have slope 0 and the intercept-only fit of the class totals
    the moments describe (:func:`streamcal._kernels.gev.intercept_root`) is
    still the optimum over ``slope >= 0``: the objective's derivative in the slope there,
    ``sigma(b) sum_b n_b x_b - sum_b pos_b x_b``, is at least 0. At an anchor of slope 0 every
    bucket's ``c_0`` is ``sigma(a1)``, so ``sum_b n_b x_b = M[0, 1] / M[0, 0]`` times the weight,
    with no Taylor tail. The moments are rebuilt after ``MOM_MAX_UPDATES`` events, as for
    :func:`_moments_solve`."""
    if not (beta[0] == 0.0 and mom[MOM_B0] == 0.0 and mom[MOM_UPDATES] <= MOM_MAX_UPDATES):
        return False
    m00 = mom[MOM_M]
    if not m00 > 0.0:
        return False
    t_pos = mom[MOM_T_POS] / u
    t_neg = mom[MOM_T_NEG] / u
    n_x = mom[MOM_M + 1] / m00 * (t_pos + t_neg)
    p_x = mom[MOM_P1] / u
    b = intercept_root(t_pos, t_neg, np.int64(1), 0.0)
    if not _logistic(b) * (n_x - p_x) - _logistic(-b) * p_x >= 0.0:  # by class: sum_b (n_b F - pos_b) x_b
        return False
    beta[1] = b
    return True


@jit_noalloc
def _moments_solve(mom, pw, u, l2, x_lo, x_hi, proba_tol, beta, wide):
    """:func:`moments_solve`, its tails bounded on discs of radius ``pi / 2`` or, with ``wide``,
    ``WIDE_RADIUS`` (:func:`_tail_bounds_wide`)."""
    if mom[MOM_UPDATES] > MOM_MAX_UPDATES:
        return False
    a0 = mom[MOM_B0]
    a1 = mom[MOM_B1]
    ok, d0, d1 = _moments_newton(mom, pw, u, l2, a0, a1, beta[0] - a0, beta[1] - a1)
    if not ok:
        return False
    g0, g1, h0, h1, h2 = _moments_eval(mom, d0, d1, pw, u)
    gs = g1 + l2 * (a0 + d0)
    gi = g0
    hss = h2 + l2
    hsi = h1
    hii = h0
    det = hss * hii - hsi * hsi
    if not (det > 0.0 and hss > 0.0):
        return False
    lo = mom[MOM_X_LO]
    hi = mom[MOM_X_HI]
    a = abs(d0)
    c = abs(d1)
    if wide:
        rho = WIDE_INV_R * (a * max(abs(lo), abs(hi)) + c)
        if not rho <= MOM_MAX_RHO:
            return False
        e_s, e_i, e_ss, e_si, e_ii = _tail_bounds_wide(mom, a, c, rho, u)
    else:
        rho = TWO_OVER_PI * (a * max(abs(lo), abs(hi)) + c)
        if not rho <= MOM_MAX_RHO:
            return False
        # the Taylor tails (Cauchy's estimate: |sigma^(n)| <= n! (2 / pi)^n on the real line)
        e_s, e_i, e_ss, e_si, e_ii = _tail_bounds(mom, a, c, rho, u)
    # the Hessian's smallest eigenvalue, and how far the tail may lower it
    half_gap = math.sqrt(0.25 * (hss - hii) * (hss - hii) + hsi * hsi)
    lam_max = 0.5 * (hss + hii) + half_gap
    lam_min = det / lam_max
    eps = math.sqrt(e_ss * e_ss + 2.0 * e_si * e_si + e_ii * e_ii) / lam_min
    if not eps <= 0.5:
        return False
    widen = 1.0 / math.sqrt(1.0 - eps)  # ||.||_{H^-1} <= widen ||.||_{Hhat^-1}
    g_err = math.sqrt(e_s * e_s + e_i * e_i) / math.sqrt(lam_min)  # ||gradient error||_{Hhat^-1}
    nu = (math.sqrt(_quad_inv(hss, hsi, hii, det, gs, gi)) + g_err) * widen
    kk = math.sqrt(max(_quad_inv(hss, hsi, hii, det, lo, 1.0), _quad_inv(hss, hsi, hii, det, hi, 1.0))) * widen
    zlo = min(x_lo, lo)
    zhi = max(x_hi, hi)
    z = math.sqrt(max(_quad_inv(hss, hsi, hii, det, zlo, 1.0), _quad_inv(hss, hsi, hii, det, zhi, 1.0))) * widen
    nk = nu * kk
    if not nk < 0.5:
        return False
    radius = -math.log1p(-nk) / kk if kk > 0.0 else nu
    if not 0.25 * z * radius <= proba_tol:
        return False
    if a0 + d0 < 0.0:  # the map must not fall: the passes fit it with the slope held at 0
        return False
    beta[0] = a0 + d0
    beta[1] = a1 + d1
    return True


# ----------------------------------------------------------------------------------------------
# The score prior's strength from ``D``'s Taylor moments (Platt, probability inputs)

#: :func:`prior_strength_moments` certifies ``D``'s maximum log-likelihood (so ``log kappa``) within
#: this many nats: ``kappa`` within a relative 1e-10 of the prior kernel's, which moves a served
#: probability by at most about as much
PRIOR_D_TOL = 1e-10
#: the Hessian's smallest eigenvalue over its largest below which it gives way
PRIOR_D_CONDITION = 1e-8
PRIOR_D_STEPS = 6  # model evaluations before :func:`prior_strength_moments` gives way
#: its Newton iteration stops at this squared decrement of the model (the certificate bounds the rest)
PRIOR_D_NU2 = 1e-14
#: ``sup |sigma^(9)(z)| / 9!`` over the real line (``31 / 1451520`` at ``z = 0``) rounded up: the
#: largest of ``|P(p)| / 9!``, ``sigma^(9) = P(sigma)`` a polynomial, on a grid of step 5e-7 over
#: ``p`` in ``[0, 1]`` plus half a step times ``max |P'| / 9!`` (2.6e-4) lies below it
PRIOR_D_C9 = 2.14e-5


@jit_noalloc(forceinline=True)
def _softplus(z):
    """``log(1 + exp(z))`` without overflow."""
    if z >= 0.0:
        return z + math.log1p(math.exp(-z))
    return math.log1p(math.exp(z))


@jit_noalloc(forceinline=True)
def _prior_d_add(dm, table, pc, b, pos_part, ws):
    """One event's stored weight ``ws`` (negative: leaving) at bucket ``b``, ``pos_part`` of it
    positive, in ``D``'s block ``dm`` (``MOM_D``'s layout)."""
    xb = pc[PC_OFF, b]
    _moments_add(dm, table, xb, pos_part, ws)
    dm[D_SX] += ws * xb
    dm[D_LS] += pos_part * pc[PC_LOG_R, b] + (ws - pos_part) * pc[PC_LOG_1MR, b]
    dm[D_SP] += ws * _softplus(dm[MOM_B0] * xb + dm[MOM_B1])
    dm[MOM_X_LO] = min(dm[MOM_X_LO], xb)
    dm[MOM_X_HI] = max(dm[MOM_X_HI], xb)


@jit_noalloc(forceinline=True)
def _weight_add_four_one(mom, table, xa, wa, xb, wb, xc, wc, xd, wd):
    """:func:`_weight_add` of four buckets at once to the moments at ``MOM_S`` and ``MOM_M``:
    weight ``wa`` at feature ``xa``, then ``b``'s, ``c``'s and ``d``'s, as
    :func:`_weight_add_four` (the same bits as the buckets one by one; zero weights add zeros)."""
    pa, pb, pcc, pd = _logistic_four(mom, xa, xb, xc, xd)
    axa = abs(xa)
    axb = abs(xb)
    axc = abs(xc)
    axd = abs(xd)
    ta = wa
    tb = wb
    tc = wc
    td = wd
    for m in range(MOM_NS):
        mom[MOM_S + m] = (((mom[MOM_S + m] + ta) + tb) + tc) + td
        ta *= axa
        tb *= axb
        tc *= axc
        td *= axd
    for k in range(MOM_K + 1):
        acca, accb, accc, accd = _taylor_row_four(table, k, pa, pb, pcc, pd)
        ta = wa * acca
        tb = wb * accb
        tc = wc * accc
        td = wd * accd
        base = MOM_M + k * MOM_NCOL
        for m in range(MOM_NCOL):
            mom[base + m] = (((mom[base + m] + ta) + tb) + tc) + td
            ta *= xa
            tb *= xb
            tc *= xc
            td *= xd


@jit_noalloc
def prior_d_rebuild(sf, si, table, pc, dm, slope, intercept, pw):
    """Build ``D``'s block ``dm`` of the histogram ``sf`` about ``D``'s fit ``z = slope x + intercept``:
    every bucket's sums as :func:`_prior_d_add` forms them, the Taylor rows four buckets at a time
    (:func:`_weight_add_four_one`: the same bits, with more work in flight). ``pw``: scratch of at
    least 6 values (the waiting buckets, as in :func:`moments_floor_rebuild`)."""
    for i in range(D_SIZE):
        dm[i] = 0.0
    dm[MOM_B0] = slope
    dm[MOM_B1] = intercept
    dm[MOM_X_LO] = np.inf
    dm[MOM_X_HI] = -np.inf
    B = si[_h.SI_B]
    nq = 0
    for j in range(B):
        p = sf[_h.SF_HEADER + j]
        n = p + sf[_h.SF_HEADER + B + j]
        if not n > 0.0:
            continue
        # ``_prior_d_add`` but its Taylor rows, in its order
        xb = pc[PC_OFF, j]
        dm[MOM_P0] += p
        dm[MOM_P1] += p * xb
        dm[D_SX] += n * xb
        dm[D_LS] += p * pc[PC_LOG_R, j] + (n - p) * pc[PC_LOG_1MR, j]
        dm[D_SP] += n * _softplus(slope * xb + intercept)
        dm[MOM_X_LO] = min(dm[MOM_X_LO], xb)
        dm[MOM_X_HI] = max(dm[MOM_X_HI], xb)
        if nq == 3:
            _weight_add_four_one(dm, table, pw[0], pw[1], pw[2], pw[3], pw[4], pw[5], xb, n)
            nq = 0
        else:
            pw[2 * nq] = xb
            pw[2 * nq + 1] = n
            nq += 1
    if nq > 0:  # the last buckets, with partners of no weight
        for i in range(nq, 3):
            pw[2 * i] = pw[0]
            pw[2 * i + 1] = 0.0
        _weight_add_four_one(dm, table, pw[0], pw[1], pw[2], pw[3], pw[4], pw[5], pw[0], 0.0)
    dm[MOM_UPDATES] = 0.0
    _moments_fingerprint(dm, sf)
    dm[MOM_VALID] = 1.0


@jit_noalloc(forceinline=True)
def _moments_value(dm, d0, d1, pw):
    """``sum_b n_b (softplus(z_b + u_b) - softplus(z_b))`` to order ``MOM_K + 1`` in ``u_b = d0 x_b
    + d1`` (stored units), from the Taylor rows (``softplus' = sigma``: row ``k`` gives the term
    ``c_k u^(k + 1) / (k + 1)``); ``pw`` holds the powers of ``d0`` and ``d1`` that
    :func:`_moments_eval` left there."""
    top0 = pw[MOM_K] * d0
    top1 = pw[2 * MOM_K + 1] * d1
    acc = 0.0
    for k in range(MOM_K + 1):
        base = MOM_M + k * MOM_NCOL
        t = 0.0
        for i in range(k + 2):
            j = k + 1 - i
            p0 = pw[i] if i <= MOM_K else top0
            p1 = pw[MOM_K + 1 + j] if j <= MOM_K else top1
            t += BINOM[k + 1, i] * p0 * p1 * dm[base + i]
        acc += t / (k + 1)
    return acc


@jit_noalloc(forceinline=True)
def _prior_start_raw(start, sf, u):
    """The warm start's fit of ``D`` (valid, with a positive scale) as ``(slope, intercept)`` of
    ``z = slope x + intercept``: its predicted optimum, as :func:`prior_strength_warm` forms it,
    where its change since the fit is tracked (stored units of ``u``)."""
    sa = start[PRIOR_A]
    sb = start[PRIOR_B]
    if _prior_step_current(start, sf):
        sa, sb = _start_predicted(start, u)
    sb *= start[PRIOR_SCALE]
    return 1.0 + sb, sa - sb * start[PRIOR_MEAN]


@jit_noalloc
def prior_strength_moments(dm, sf, u, pw, start, out):
    """The prior kernel's ``kappa`` (probability inputs) from ``D``'s block ``dm``, without a pass,
    or -1.0 where the block does not describe ``sf`` or cannot certify ``D``'s maximum within
    ``PRIOR_D_TOL``.

    ``D`` is ``z_b = slope x_b + intercept`` on ``x_b = logit(r_b)`` (the prior kernel's ``x_b + a
    + b v_b``, ``v_b`` standardised), its ridge on the row's standardised ``(a, b)``, which the
    block's running sums give. Newton's method runs on the Taylor model of ``D``'s risk about the
    block's anchor, as :func:`moments_solve` does for the map, from the warm start ``start``
    (its predicted optimum where its change is tracked) until the model's squared decrement is
    at most ``PRIOR_D_NU2``; the model's value adds the anchor's ``softplus`` and the positive
    weight's linear term. The certificate: the Taylor tails of the value (``e_f``), gradient and
    Hessian (Cauchy's estimate) put the true Newton decrement in ``[nu_low, nu]`` about the
    model's ``nu_model``; the self-concordant bound of :func:`prior_strength_warm` then puts the
    maximum at the model's ``f + nu_model^2 / 2`` within ``e_f + max(nu^2 - nu_model^2, nu_model^2
    - nu_low^2) / 2 + kk max(r^3, nu^3 exp(kk nu)) / 6``. The fit, in the row's standardisation,
    and ``D``'s data Hessian there (stored units) are written to ``out`` (``PRIOR_*``)."""
    if not (moments_current(dm, sf) and dm[MOM_UPDATES] <= MOM_MAX_UPDATES and dm[MOM_S] > 0.0):
        return -1.0
    mean = dm[D_SX] / dm[MOM_S]
    var = dm[MOM_S + 2] / dm[MOM_S] - mean * mean
    if not var > 0.0:
        return -1.0
    ridge = _p.RIDGE
    a0 = dm[MOM_B0]
    a1 = dm[MOM_B1]
    d0 = 0.0
    d1 = 0.0
    if start[PRIOR_VALID] == 1.0 and start[PRIOR_SCALE] > 0.0:  # from the warm start's fit
        slope, intercept = _prior_start_raw(start, sf, u)
        d0 = slope - a0
        d1 = intercept - a1
    for it in range(PRIOR_D_STEPS):
        g0, g1, h0, h1, h2 = _moments_eval(dm, d0, d1, pw, u)
        s1 = a0 + d0 - 1.0  # the ridge's (a, b) = (intercept + s1 mean, s1 sd)
        ra = a1 + d1 + s1 * mean
        gs = g1 + ridge * (ra * mean + s1 * var)
        gi = g0 + ridge * ra
        hss = h2 + ridge * (mean * mean + var)
        hsi = h1 + ridge * mean
        hii = h0 + ridge
        det = hss * hii - hsi * hsi
        if not (det > 0.0 and hss > 0.0):
            return -1.0
        nu2_model = max(_quad_inv(hss, hsi, hii, det, gs, gi), 0.0)
        if nu2_model <= PRIOR_D_NU2:
            break
        if it == PRIOR_D_STEPS - 1:
            return -1.0
        d0 -= (hii * gs - hsi * gi) / det
        d1 -= (hss * gi - hsi * gs) / det
    lo = dm[MOM_X_LO]
    hi = dm[MOM_X_HI]
    a = abs(d0)
    c = abs(d1)
    rho = WIDE_INV_R * (a * max(abs(lo), abs(hi)) + c)
    if not rho <= MOM_MAX_RHO:
        return -1.0
    k1 = MOM_K + 1
    e_s, e_i, e_ss, e_si, e_ii = _tail_bounds_wide(dm, a, c, rho, u)
    # the value's tail: its first term ``c_9 u^10 / 10`` by ``PRIOR_D_C9``, the rest by Cauchy's
    # estimate, ``|u_b|^11 <= rho WIDE_RADIUS |u_b|^10``
    f_factor = PRIOR_D_C9 / (k1 + 1) + WIDE_SUP * WIDE_INV_R**k1 * rho / ((k1 + 2) * (1.0 - rho))
    e_f = f_factor * _tail_sum(dm, a, c, np.int64(MOM_K + 2), np.int64(0)) / u
    half_gap = math.sqrt(0.25 * (hss - hii) * (hss - hii) + hsi * hsi)
    lam_max = 0.5 * (hss + hii) + half_gap
    lam_min = det / lam_max
    eps = math.sqrt(e_ss * e_ss + 2.0 * e_si * e_si + e_ii * e_ii) / lam_min
    # (raw coefficients: where the covariate hardly spreads, the slope's ridge ``RIDGE var`` is
    # all that pins it, and the prior kernel's standardised fit is left to that kernel)
    if not (eps <= 0.5 and lam_min >= PRIOR_D_CONDITION * lam_max):
        return -1.0
    widen = 1.0 / math.sqrt(1.0 - eps)
    nu_model = math.sqrt(nu2_model)
    g_err = math.sqrt(e_s * e_s + e_i * e_i) / math.sqrt(lam_min)
    nu = (nu_model + g_err) * widen  # the true decrement lies in [nu_low, nu]
    nu_low = max(nu_model - g_err, 0.0) / math.sqrt(1.0 + eps)
    kk = math.sqrt(max(_quad_inv(hss, hsi, hii, det, lo, 1.0), _quad_inv(hss, hsi, hii, det, hi, 1.0))) * widen
    t = kk * nu
    if not t < 0.5:
        return -1.0
    r = 2.0 * nu / (1.0 - t)
    err_nu = 0.5 * max(nu * nu - nu2_model, nu2_model - nu_low * nu_low)
    if not e_f + err_nu + kk * max(r * r * r, nu * nu * nu * math.exp(t)) / 6.0 <= PRIOR_D_TOL:
        return -1.0
    slope = a0 + d0
    intercept = a1 + d1
    s1 = slope - 1.0
    ra = intercept + s1 * mean
    risk = (dm[D_SP] + _moments_value(dm, d0, d1, pw) - slope * dm[MOM_P1] - intercept * dm[MOM_P0]) / u
    f = -(risk + 0.5 * ridge * (ra * ra + s1 * s1 * var)) + 0.5 * nu2_model
    sd = math.sqrt(var)
    scale = 1.0 / sd
    out[PRIOR_VALID] = 1.0
    out[PRIOR_A] = ra
    out[PRIOR_B] = s1 * sd
    out[PRIOR_MEAN] = mean
    out[PRIOR_SCALE] = scale
    out[PRIOR_STEP_VALID] = 1.0
    # D's data Hessian in the fit's standardisation (v = (x - mean) scale), stored units
    out[PRIOR_H] = h0 * u
    out[PRIOR_H + 1] = scale * (h1 - mean * h0) * u
    out[PRIOR_H + 2] = scale * scale * (h2 - 2.0 * mean * h1 + mean * mean * h0) * u
    out[PRIOR_DG] = 0.0
    out[PRIOR_DG + 1] = 0.0
    log_kappa = dm[D_LS] / u - f + math.log(dm[MOM_S] / u + 1.0)  # k / 2 = 1 for probability inputs
    if log_kappa >= math.log(_p.KAPPA_MAX):
        return _p.KAPPA_MAX
    kappa = math.exp(log_kappa)
    return kappa if kappa >= _p.KAPPA_MIN else 0.0


@jit_noalloc
def platt_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor, table, mom, pw):
    """Platt's score prior strength (probability inputs; raw scores: :func:`score_prior_strength`).

    From ``D``'s block where it certifies (:func:`prior_strength_moments`). Where it does not
    but the block was built, the block is rebuilt about the warm start's (predicted) fit and
    solved again; otherwise :func:`score_prior_strength` runs, and the block is rebuilt about its
    fit where the strength is above 0. A strength of 0 marks the block stale: while the prior
    adds nothing the anchor's certificate serves. Every choice here reads state alone (the block
    and the warm start), so a restored calibrator takes the same path."""
    if not identity:
        return score_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor)
    B = si[_h.SI_B]
    dm = mom[MOM_D : MOM_D + D_SIZE]
    nxt = anchor[ANCHOR_PRIOR_NEXT : ANCHOR_PRIOR_NEXT + PRIOR_SIZE]
    start = anchor[ANCHOR_PRIOR : ANCHOR_PRIOR + PRIOR_SIZE]
    kappa = prior_strength_moments(dm, sf, u, pw, start, nxt)
    if kappa < 0.0 and dm[MOM_VALID] == 1.0 and start[PRIOR_VALID] == 1.0 and start[PRIOR_SCALE] > 0.0:
        slope, intercept = _prior_start_raw(start, sf, u)
        prior_d_rebuild(sf, si, table, pc, dm, slope, intercept, pw)
        kappa = prior_strength_moments(dm, sf, u, pw, start, nxt)
    if kappa >= 0.0:
        _prior_keep(sf, B, u, pc, anchor, kappa, identity)
    else:
        kappa = score_prior_strength(sf, si, u, t_pos, t_neg, centres, identity, c, pc, anchor)
        if kappa > 0.0 and start[PRIOR_VALID] == 1.0 and start[PRIOR_SCALE] > 0.0:
            slope, intercept = _prior_start_raw(start, sf, u)
            prior_d_rebuild(sf, si, table, pc, dm, slope, intercept, pw)
            return kappa
    if kappa == 0.0:
        dm[MOM_VALID] = 0.0
    return kappa


@jit_noalloc
def glm_river_proba(sf, si, pc, buf, s, dirty, x, table, floor_kind):
    """Platt's river face in one call: the refit from the Taylor moments if labels came
    (``dirty`` 1.0, written to the fit's ``FIT_DIRTY``), then the served probability of score
    ``s``; -1.0 where that takes more (no fit yet, moments not current, the prior's strength
    neither certified from its ``D`` block, rebuilt where :func:`platt_prior_strength` rebuilds
    it, nor certified 0, the solve not certified by :func:`prior_moments_refit` or
    :func:`moments_solve`), and then the caller runs the full refit, which takes the same steps
    first (a rebuild here leaves the state that refit's rebuild leaves, so its repeat changes
    nothing). ``buf`` is the packed buffer of one shape (``BUF_*``); its constants are
    ``[identity, clip, c, prior_on, l2, x_lo, x_hi, proba_tol]``; ``x``, ``table`` and
    ``floor_kind`` are the full refit's."""
    k = buf[BUF_CONSTS:BUF_ANCHOR]
    anchor = buf[BUF_ANCHOR:BUF_MOM]
    mom = buf[BUF_MOM:BUF_PW]
    pw = buf[BUF_PW:BUF_FIT]
    fit = buf[BUF_FIT:BUF_BETAS]
    beta = buf[BUF_BETAS : BUF_BETAS + 2]
    briers = buf[BUF_BETAS + 2 : BUF_BETAS + 3]
    fit[FIT_DIRTY] = dirty
    if fit[FIT_FITTED] == 0.0:
        return -1.0
    identity = k[0] != 0.0
    if fit[FIT_DIRTY] != 0.0:
        if not moments_current(mom, sf):
            return -1.0
        B = si[_h.SI_B]
        u = _unit_of(sf, sf[_h.SF_KIND])
        t_pos = sf[_h.SF_T_POS] / u
        t_neg = sf[_h.SF_T_NEG] / u
        if not t_pos + t_neg > 0.0:
            return -1.0
        prior_on = k[3] != 0.0
        # the score prior's strength as glm_refit_inplace finds it first: from D's block where it
        # is current (nothing is kept before the map's solve is certified too), else 0 where the
        # anchor certifies it
        kappa = 0.0
        dm = mom[MOM_D : MOM_D + D_SIZE]
        d_block = prior_on and identity and moments_current(dm, sf)
        if d_block:
            start = anchor[ANCHOR_PRIOR : ANCHOR_PRIOR + PRIOR_SIZE]
            nxt = anchor[ANCHOR_PRIOR_NEXT : ANCHOR_PRIOR_NEXT + PRIOR_SIZE]
            kappa = prior_strength_moments(dm, sf, u, pw, start, nxt)
            if kappa < 0.0 and start[PRIOR_VALID] == 1.0 and start[PRIOR_SCALE] > 0.0:
                slope, intercept = _prior_start_raw(start, sf, u)
                prior_d_rebuild(sf, si, table, pc, dm, slope, intercept, pw)
                kappa = prior_strength_moments(dm, sf, u, pw, start, nxt)
            if kappa < 0.0:
                return -1.0
        elif prior_on and not (identity and prior_strength_is_zero_running(sf, B, u, pc, anchor)):
            return -1.0
        if kappa > 0.0:
            if B < MOM_DATA_SIZE:
                # the full refit forms the combined moments in its bucket-sized scratch, too short
                # here, and runs the passes: so does this face, for the same bits
                return -1.0
            comb = buf[buf.shape[0] - MOM_DATA_SIZE :]
            prior_args = (pc, floor_kind, kappa, u, k[4], (k[5], k[6]), k[7], beta, pw, comb)
            if not prior_moments_refit(sf, si, x, table, mom, *prior_args):
                return -1.0
        elif not (t_pos * t_neg > 0.0 and moments_solve(mom, pw, u, k[4], k[5], k[6], k[7], beta)):
            return -1.0  # (one class: the full refit's slope-0 limit)
        if d_block:
            _prior_keep(sf, B, u, pc, anchor, kappa, identity)
            if kappa == 0.0:
                dm[MOM_VALID] = 0.0
        fit[FIT_DIRTY] = 0.0
        if prior_on:
            fit[FIT_KAPPA] = kappa
        fit[FIT_T_POS] = t_pos
        fit[FIT_T_NEG] = t_neg
        total = t_pos + t_neg
        fit[FIT_TOTAL] = total + kappa * (total + mom[MOM_FL_F]) if kappa > 0.0 else total
        glm_finish_refit(briers, fit, k[2])
    p = glm_map_one(s, identity, k[1], beta[0], beta[1], False, 0.0)
    return min(max(p, fit[FIT_LOW]), fit[FIT_HIGH])


@jit_noalloc
def glm_river_learn_proba(sf, si, pc, buf, s, ls, y, w, x, table, cuts, grid, floor_kind):
    """``glm_river_proba`` with an event learned first: Platt's river face folds the event of
    the last ``learn_one`` into the next prediction's call. The event (checked score ``ls``,
    label ``y``, weight ``w``; none where ``y`` < 0) goes to its bucket among the layout's
    interior ``cuts`` (:func:`streamcal._kernels.histogram.bucket_of_guessed`, ``grid`` the
    cuts' ``(kind, z0, inv_step)`` of :func:`streamcal._kernels.histogram.grid_of_sorted`: the
    bucket every search finds, from an arithmetic guess that reads no guide) and is learned as
    ``glm_learn_one_inplace`` learns it (Platt keeps no GEV blocks), setting the fit's dirty
    flag; the refit and the served probability then follow that flag. The same steps in the
    same order as the two calls, so the same bits."""
    fit = buf[BUF_FIT:BUF_BETAS]
    if y >= 0.0:
        b = _h.bucket_of_guessed(cuts, np.int64(0), cuts.shape[0], ls, grid[0], grid[1], grid[2])
        mom = buf[BUF_MOM:BUF_PW]
        anchor = buf[BUF_ANCHOR:BUF_MOM]
        glm_learn_one_inplace(sf, si, b, y, w, 0.0, x, table, mom, pc, anchor, x[:0])
        fit[FIT_DIRTY] = 1.0
    return glm_river_proba(sf, si, pc, buf, s, fit[FIT_DIRTY], x, table, floor_kind)


@jit_noalloc
def glm_river_gev_proba(
    sf, si, s, ls, y, w, cuts, grid, buf,
    x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code, l2, tol, max_passes,
    xis, betas, has_warm, ok, pos_w, neg_w, pc, table, steps,
):  # fmt: skip
    """GEV's river face in one call: the event of the last ``learn_one`` (checked score ``ls``,
    label ``y``, weight ``w``; none where ``y`` < 0) found among the layout's interior ``cuts``
    as :func:`glm_river_learn_proba` finds it (``grid``: the cuts' arithmetic guess) and learned
    as ``glm_learn_one_inplace`` learns it, the refit (:func:`glm_refit_inplace`) if labels came,
    then the served probability of score ``s``. The refit's arrays that live in the packed
    buffer ``buf`` (the anchor, moments, powers, fit and Brier scores) are its views, read here:
    fewer arguments to convert per call. -1.0 where a shape needs the damped full refit: the
    refit's partial fit is left for the caller to complete (as after :func:`glm_refit_inplace`).
    The same steps in the same order as ``learn_one``'s call and ``predict_proba_one``'s refit
    and map, so the same bits."""
    S = xis.shape[0]
    briers = buf[BUF_BETAS + 2 * S : BUF_BETAS + 3 * S]
    anchor = buf[BUF_ANCHOR:BUF_MOM]
    mom = buf[BUF_MOM:BUF_PW]
    pw = buf[BUF_PW:BUF_FIT]
    fit = buf[BUF_FIT:BUF_BETAS]
    if y >= 0.0:
        b = _h.bucket_of_guessed(cuts, np.int64(0), cuts.shape[0], ls, grid[0], grid[1], grid[2])
        glm_learn_one_inplace(sf, si, b, y, w, 0.0, x, table, mom, pc, anchor, steps)
        fit[FIT_DIRTY] = 1.0
    if fit[FIT_DIRTY] != 0.0:
        status = glm_refit_inplace(
            sf, si, x, x_lo, x_hi, centres, identity, c, prior_on, floor_kind, code, l2, tol, max_passes,
            xis, betas, has_warm, briers, ok, pos_w, neg_w, pc, anchor, fit, table, mom, pw, steps,
        )  # fmt: skip
        if status != 0:
            return -1.0
    p, _ = glm_served_one(s, identity, clip, code, xis, betas, fit)
    return p


# GEV's river face with its arguments packed (:func:`gev_river_packed`, :func:`gev_logistic_river_packed`):
# the refit's float arrays are sections of one float64 array ``fbuf`` (the packed buffer ``buf``
# first) and its int arrays sections of one int64 array ``ibuf``, whose head holds the sections'
# offsets and the int arguments; the score and the kept event come first (the river face keeps the
# event and the arguments after it in one tuple). A call then converts eight arguments instead of
# 31 (41 with the logistic member), whose conversion is most of a call's own cost (figures in
# docs/benchmarks.md, "Platt and GEV at their exact default"). The sections are the arrays
# the calibrator's cache holds (its views of the two buffers), read here as views: the same arrays
# in the same calls, so the same bits.
# ``fbuf``'s sections, ``fbuf[ibuf[k] : ibuf[k + 1]]`` for section ``k``:
PK_BUF = 0
PK_CUTS = 1
PK_GRID = 2
PK_X = 3
PK_CENTRES = 4
PK_XIS = 5
PK_POS = 6
PK_NEG = 7
PK_PC = 8  # 5 x B, row-major
PK_TABLE = 9  # ibuf[PK_TABLE_ROWS] rows, row-major
PK_STEPS = 10
PK_M_XIS = 11  # the logistic member's arrays (empty without it)
PK_M_BETAS = 12  # rows of 2 values
PK_M_BRIERS = 13
PK_M_FIT = 14
PK_G_MOM = 15
PK_SCALARS = 16  # the float arguments: ``PS_*``
PK_N_F = 17
# ``ibuf``'s sections, ``ibuf[ibuf[k] : ibuf[k + 1]]``
PK_HAS_WARM = PK_N_F + 1
PK_OK = PK_HAS_WARM + 1
PK_M_HAS_WARM = PK_OK + 1
PK_M_OK = PK_M_HAS_WARM + 1
# the int arguments after the sections' offsets
PK_FLOOR = PK_M_OK + 2
PK_CODE = PK_FLOOR + 1
PK_MAX_PASSES = PK_CODE + 1
PK_M_FLOOR = PK_MAX_PASSES + 1
PK_M_CODE = PK_M_FLOOR + 1
PK_B = PK_M_CODE + 1
PK_TABLE_ROWS = PK_B + 1
PK_HEAD = PK_TABLE_ROWS + 1  # the first int section's offset
# the scalars section's values
PS_X_LO = 0
PS_X_HI = 1
PS_IDENTITY = 2  # 1.0 or 0.0
PS_CLIP = 3
PS_C = 4
PS_PRIOR_ON = 5  # 1.0 or 0.0
PS_L2 = 6
PS_TOL = 7
PS_M_TOL = 8
PS_SIZE = 9


@jit_noalloc(inline="always")  # returns views: numba inlines it (see ``_config``)
def _packed_gev_arguments(fbuf, ibuf):
    """The arguments of :func:`glm_river_gev_proba` after the kept event, ``cuts`` to ``steps``,
    read from the packed buffers: their sections as views, the scalars as the kernel takes them."""
    sc = fbuf[ibuf[PK_SCALARS] : ibuf[PK_SCALARS + 1]]
    S = ibuf[PK_XIS + 1] - ibuf[PK_XIS]
    B = ibuf[PK_B]
    rows = ibuf[PK_TABLE_ROWS]
    t0 = ibuf[PK_TABLE]
    buf = fbuf[ibuf[PK_BUF] : ibuf[PK_BUF + 1]]
    return (
        fbuf[ibuf[PK_CUTS] : ibuf[PK_CUTS + 1]], fbuf[ibuf[PK_GRID] : ibuf[PK_GRID + 1]], buf,
        fbuf[ibuf[PK_X] : ibuf[PK_X + 1]], float(sc[PS_X_LO]), float(sc[PS_X_HI]),
        fbuf[ibuf[PK_CENTRES] : ibuf[PK_CENTRES + 1]], bool(sc[PS_IDENTITY] != 0.0), float(sc[PS_CLIP]),
        float(sc[PS_C]), bool(sc[PS_PRIOR_ON] != 0.0), int(ibuf[PK_FLOOR]), int(ibuf[PK_CODE]), float(sc[PS_L2]),
        float(sc[PS_TOL]), int(ibuf[PK_MAX_PASSES]),
        fbuf[ibuf[PK_XIS] : ibuf[PK_XIS + 1]], buf[BUF_BETAS : BUF_BETAS + 2 * S].reshape((S, 2)),
        ibuf[ibuf[PK_HAS_WARM] : ibuf[PK_HAS_WARM + 1]], ibuf[ibuf[PK_OK] : ibuf[PK_OK + 1]],
        fbuf[ibuf[PK_POS] : ibuf[PK_POS + 1]], fbuf[ibuf[PK_NEG] : ibuf[PK_NEG + 1]],
        fbuf[ibuf[PK_PC] : ibuf[PK_PC + 1]].reshape((5, B)),
        fbuf[t0 : ibuf[PK_TABLE + 1]].reshape((rows, (ibuf[PK_TABLE + 1] - t0) // rows)),
        fbuf[ibuf[PK_STEPS] : ibuf[PK_STEPS + 1]],
    )  # fmt: skip


@jit_noalloc
def gev_river_packed(s, ls, y, w, sf, si, fbuf, ibuf):
    """:func:`glm_river_gev_proba` on the packed arguments (see the notes above)."""
    (
        cuts, grid, buf, x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code, l2, tol, max_passes,
        xis, betas, has_warm, ok, pos_w, neg_w, pc, table, steps,
    ) = _packed_gev_arguments(fbuf, ibuf)  # fmt: skip
    return glm_river_gev_proba(
        sf, si, s, ls, y, w, cuts, grid, buf, x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code,
        l2, tol, max_passes, xis, betas, has_warm, ok, pos_w, neg_w, pc, table, steps,
    )  # fmt: skip


@jit_noalloc
def gev_logistic_river_proba_packed(s, ls, y, w, sf, si, fbuf, ibuf):
    """:func:`gev_logistic_river_proba` on the packed arguments (see the notes above)."""
    (
        cuts, grid, buf, x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code, l2, tol, max_passes,
        xis, betas, has_warm, ok, pos_w, neg_w, pc, table, steps,
    ) = _packed_gev_arguments(fbuf, ibuf)  # fmt: skip
    M = ibuf[PK_M_XIS + 1] - ibuf[PK_M_XIS]
    return gev_logistic_river_proba(
        sf, si, s, ls, y, w, cuts, grid, buf, x, x_lo, x_hi, centres, identity, clip, c, prior_on, floor_kind, code,
        l2, tol, max_passes, xis, betas, has_warm, ok, pos_w, neg_w, pc, table, steps,
        fbuf[ibuf[PK_M_XIS] : ibuf[PK_M_XIS + 1]], fbuf[ibuf[PK_M_BETAS] : ibuf[PK_M_BETAS + 1]].reshape((M, 2)),
        ibuf[ibuf[PK_M_HAS_WARM] : ibuf[PK_M_HAS_WARM + 1]], fbuf[ibuf[PK_M_BRIERS] : ibuf[PK_M_BRIERS + 1]],
        ibuf[ibuf[PK_M_OK] : ibuf[PK_M_OK + 1]], fbuf[ibuf[PK_M_FIT] : ibuf[PK_M_FIT + 1]],
        fbuf[ibuf[PK_G_MOM] : ibuf[PK_G_MOM + 1]], int(ibuf[PK_M_FLOOR]), int(ibuf[PK_M_CODE]),
        float(fbuf[ibuf[PK_SCALARS] + PS_M_TOL]),
    )  # fmt: skip
