"""Incremental PAV over a bucket histogram: the block stack and its fitted values (numba).

Definitions (shared with the reference ``naive_pav_histogram`` in the tests)
---------------------------------------------------------------------------
A *knot* is a bucket with positive total weight ``pos[b] + neg[b] > 0``; empty buckets are not
data. PAV runs the classic left-to-right stack sweep over the knots: push each knot as a block
``(first, last, P, N)``; while the block below the top has a rate ``P/(P+N)`` greater than or
equal to the top's — tested as ``P1 (P2 + N2) >= P2 (P1 + N1)``, without a division — pool
them into ``(below.first, top.last, below.P + top.P, below.N + top.N)``.

The result is stored per bucket:

- ``owner[b]``: first knot of the block whose range ``[first, next block's first)`` holds ``b``,
  for ``b`` between the first and the last knot (the header keeps both, ``PI_HEAD``/``PI_LAST``).
- at a block's first knot ``f``: ``bend[f]`` (its last knot), ``bpos[f]``, ``bneg[f]`` (its sums),
  ``bprev[f]`` / ``bnext[f]`` (first knot of the neighbouring blocks, -1 at the ends).
- the fitted value of bucket ``b``: the block's rate on ``[first, last]``; in the empty buckets
  between two blocks, the linear interpolation (by bucket centre) between the last knot of the
  left block and the first knot of the right one, clipped to those two values. Outside the
  knots' span the fit is flat (predictions clamp; those buckets are not stored). So linear
  interpolation over all bucket centres is linear interpolation between the knots. The rate
  is stored once per block, in ``fit[f]`` at its first knot, and each bucket of a block keeps
  that knot in ``fit_owner[b]`` (a float, read by the predictions, which read ``pf`` alone); a gap
  bucket has ``fit_owner[b] = -1`` and its own value in ``fit[b]``. A prediction is one bucket
  lookup plus two or four reads, and updating a block's rate is one write whatever its width.

Exactness. When bucket ``k`` changes, the sweep is *resumed* instead of rerun: the blocks left
of the block holding ``k`` are exactly the sweep's stack at that point (the sweep never pooled
across their right boundary), so the kernel starts there with those blocks as the stack and
sweeps knot by knot. Right of the changed block it keeps sweeping the old blocks' knots and
stops at the end of the first old block that the sweep rebuilt without pooling it into the
stack below: from there on the sweep would repeat, operation for operation, what it did
before. The pooled sums are therefore formed by the same floating-point additions, in the
same order, as a from-scratch sweep: the result equals it bit for bit, whatever the weights
(not only in exact arithmetic, where PAV's pooling-order theorem gives it for free).
Cost: the knots of the touched block and of the right-hand blocks swept, usually a few.

Floating-point weights (fractional weights, decay, the prior's augmented row) keep the
resumed sweep, exact as above, and shorten it at both ends:

- *Checkpoints.* Inside a block the per-bucket block fields (``bend``, ``bpos``, ``bneg``,
  meaningful at a block's first knot only) hold, at every other knot ``c``, the sweep's top
  just before ``c``: its first knot and its sums. Where that top starts at the block's first
  knot ``f`` (``bend[c] == f``), the sweep is at ``c`` in the state "the blocks left of ``f``,
  then ``[f, c)`` as one element" whatever happened left of ``f`` since (those blocks never pool
  with the block's prefixes), so a change at or after ``c`` resumes there, with the stored
  sums, instead of at ``f``. The records are a function of the histogram, as a full sweep
  writes them (every sweep writes those of the knots it passes; a chain block pooled into the
  top, and the block's first knot when it ends inside a block, get theirs from the block on
  their left; a new knot's is cleared when it is linked). They are kept while ``PI_INTEGRAL``
  is 0 or the blocks are over the augmented row (the whole-number shortcuts below change
  block sums in place and do not keep them); the first fractional weight rebuilds the blocks
  once, which writes them all.
- *Stopping early.* At the first knot of an old block R right of the change, the sweep stops
  when its top's rate is below R's by a relative margin of ``2**-20`` (:func:`_stays_below`):
  rounding cannot then make it pool with any prefix R's own sweep formed, so the sweep would
  repeat R's operations bit for bit.
- *In place.* When the sweep resumes at the changed knot itself (the elements above the block
  on the left read from the knot's checkpoint and the checkpoints of the elements' first knots),
  pools every element it pushes back into the block's first element by its last knot and stops
  at the next block, the block keeps its extent: :func:`_repair_block_inplace` runs those
  operations, its top in registers and the entries below it in the stack scratch, and writes the
  block's sums, rate and gaps and the records it passes, as the sweep would.

Whole-number weights. While every learned weight is a whole number (no decay) and the total
weight is below ``EXACT_TOTAL``, every sum and every product of the pooling test is exact, so
the arithmetic *is* exact arithmetic: the blocks are the unique PAV solution, with the same
integer sums whatever the order of the additions. Then the sweep may stop earlier, at the
first knot of the first old block R right of the change that the top does not pool with:
each prefix of a PAV block has a rate >= the block's, so the top would not pool with any of
R's prefixes either, and R and everything after it stay as they were (``PI_EXACT``; the
learn kernel sets it per event, from the sticky ``PI_INTEGRAL``). And when a change leaves
its block one block, the block's new sums are its old ones plus the change, and only the
prefixes the change can push below the block's rate need testing
(:func:`pav_bucket_delta_inplace`, which the learn kernel calls with the bucket's old
weights): a learned event then costs the reads of the prefixes on one side of its bucket and
one write of its block's rate.

Finite LLR (BOSARIS rule, as ``streamcal.isotonic.pav_llr(finite=True)``): one pseudo-positive
below all scores and one pseudo-negative above, each of weight ``c`` in real units. Adding
them only raises the first block and lowers the last one, so the augmented PAV pools a run of
blocks at each end and leaves the middle alone; its fitted value at any score is
``clip(fit, lo, hi)`` with ``lo``/``hi`` the rates of the two pooled end runs. The kernel keeps
``lo``, ``hi`` and the inverse prior odds ``r = (T0 + c) / (T1 + c)`` up to date after each
learned event; the LLR is ``log(q r / (1 - q))`` with ``q = clip(p, lo, hi)``, i.e.
``logit(q) - logit(prior)`` in one logarithm: finite, and monotone in the score (it never
reorders scores). The two end runs are recomputed only when a repair changed a block they
read (``PI_CHG_*`` against ``PI_DEP_*``) or under decay (the pseudo-count's stored units move),
and then each from a resume point inside it when the blocks before that point are unchanged
(under decay, also when the pseudo-count's growth leaves the run's rounding as it was: see
"the end runs' resume points" below).

Cost per event. Kernels index the flat state arrays by offsets rather than slicing views.
The per-event helpers (learning an event, the O(1) block update, the window's expiry and
addition, the prediction) are inlined into their callers by LLVM (``forceinline``, see
:mod:`streamcal._kernels._config`): a call between compiled functions passes every array as
seven scalars, which would cost more than the helpers' bodies. Each helper is
still compiled once, whichever kernels inline it. The rare paths (the resumed sweep, the
finite-LLR refresh, a long run of labels) stay calls. Every kernel here is compiled without array
reference counts (``jit_noalloc``: they allocate nothing): numba would otherwise take and drop a
reference to each array argument of each inlined helper, with an atomic operation, and could
prune few of them. Their array indexing is compiled without numba's negative-index fix-up
(:mod:`streamcal._kernels._indexing_compiled`): every index here is an offset at or above 0, and a
sentinel such as -1 is tested before it is used as one.

Layout of the PAV state (see :mod:`streamcal._kernels.histogram` for the histogram itself):
``pf`` float64 = header (PF_*), then per bucket the record (fit, bpos, bneg, centre, fit_owner), then the
stack (P, N) per stack slot, then the B - 1 cuts; ``pi`` int64 = header (PI_*), then per bucket
(owner, bend, bprev, bnext), then the stack (first, last) per slot, then the knot list (next
knot, previous knot) per bucket (see "the knot list" below). Records rather than one
section per field: a repair reads and writes several fields of the same few buckets, which
then share cache lines (the river face calls the kernel with a cache the interpreter has
cooled).
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.histogram import (
    KIND_DECAY_EVENTS,
    KIND_DECAY_TIME,
    MAX_WEIGHT,
    SF_EVENTS_NEG,
    SF_EVENTS_POS,
    SF_HALF_LIFE,
    SF_HEADER,
    SF_KIND,
    SF_N_LEARNED,
    SF_T0,
    SF_T_NEG,
    SF_T_POS,
    SI_HEADER,
    SI_N_NEG,
    SI_N_POS,
    SI_RING_COUNT,
    SI_RING_HEAD,
    bucket_of_guessed,
    grid_of_sorted,
    stored_unit,
    window_add_inplace,
    window_clock,
    window_expire_next_inplace,
)
from streamcal._kernels.prior import RATE_HIGH, RATE_LOW, prior_rate, prior_strength_listed

PF_LO = 0  # augmented (finite-LLR) fitted value of the lowest pooled run
PF_HI = 1  # augmented fitted value of the highest pooled run
PF_PRIOR_ODDS_INV = 2  # (T0 + c) / (T1 + c), the inverse prior odds with pseudo-counts
PF_PSEUDO = 3  # c, pseudo-count in real units
PF_LINEAR = 4  # 1.0: linear interpolation between bucket centres; 0.0: step
PF_PROBABILITY_INPUTS = 5  # 1.0: probability inputs, predicted as themselves before any weight; else 0.5
PF_GRID_KIND = 6  # arithmetic guess of a single score's bucket over the cuts section: see
PF_GRID_Z0 = 7  # ``histogram.grid_of_sorted``
PF_GRID_INV_STEP = 8
PF_FINITE_PROBA = 9  # 1.0: probabilities under the finite (pseudo-count) rule, clip(p, lo, hi)
PF_HEAD = 10  # copies of PI_HEAD and PI_LAST (as floats): the prediction kernels read ``pf`` alone
PF_LAST = 11
PF_HEADER = 12

PI_B = 0
PI_HEAD = 1  # first knot of the first block, -1 when the histogram is empty
PI_TAIL = 2  # first knot of the last block, -1 when empty
PI_LAST = 3  # last knot of the last block, -1 when empty
PI_CHG_LO = 4  # lowest bucket whose block changed since the last reset (repairs widen it)
PI_CHG_HI = 5  # highest bucket whose block (or block link) changed since the last reset
PI_DEP_LO = 6  # the finite-LLR low run read the blocks up to this bucket (B: all of them)
PI_DEP_HI = 7  # the finite-LLR high run read the blocks from this bucket on
PI_INTEGRAL = 8  # 1 while every learned weight was a whole number (and no decay): see below
PI_EXACT = 9  # 1: the histogram holds whole numbers with a total below EXACT_TOTAL
PI_KNOTS = 10  # 1: the knot list links the histogram's knots; 0: the blocks are over the prior's row
PI_N_KNOTS = 11  # the number of linked knots (0 while the list is not kept)
PI_HEADER = 12

# The score prior (:mod:`streamcal._kernels.prior`): a section after the cuts, at
# ``PF_HEADER + (_PF_RECORD + _STACK_RECORD + 1) * B`` (:func:`_prior_offset`): its header
# (PR_*), then the augmented row, row plus pseudo-counts, positive weights then negative ones,
# B each, in the histogram's stored units. With a strength above 0 the blocks are PAV of the
# augmented row (every bucket a knot); with 0 (or no prior) PAV of the histogram itself.
PR_MODE = 0  # 0: no prior; 1: the score (probability inputs); 2: the base rate
PR_KAPPA = 1  # the strength: pseudo-events per event of the row (0: the data's own map)
PR_RATE = 2  # the base rate (mode 2), set at the last refresh
PR_FLOOR = 3  # one event's weight in stored units at the last refresh: kappa * PR_FLOOR in an empty bucket
PR_NEXT = 4  # the strength is refreshed once ``sf[SF_N_LEARNED]`` reaches this count
PR_A = 5  # the recalibration's coefficients at the last refresh, where the next one starts
PR_B = 6
PR_HEADER = 8
# After a refresh at ``n`` learned events the next is ``clip(step, 1, PRIOR_REFRESH_EVERY)``
# events later, ``step`` a quarter of ``n`` (from 4,096 on, half) while the window holds all of
# them (weight ``W >= n``), else half of ``W``: geometric early on, then each time half the window has been renewed, at
# most ``PRIOR_REFRESH_EVERY`` events apart. Once the strength is 0 the step doubles (``n`` or
# ``W``): a refuted prior is looked at again as the window renews, not as often.
PRIOR_REFRESH_EVERY = 1 << 16

# Integer arguments for the kernels and helpers that other kernels call: numba compiles a
# callee once per literal integer a caller passes it (``f(x, -1)`` and ``f(x, k)`` are two
# versions), but types a NumPy integer as ``int64``, like a variable. So callers pass these.
_H0 = np.int64(SF_HEADER)  # where the histogram starts in ``sf``
_ALL = np.int64(-1)  # "every bucket changed": a full rebuild
_SPARSE = np.int64(1)  # the blocks are over the histogram: its knot list is kept and followed
_DENSE = np.int64(0)  # the blocks are over the prior's augmented row (every bucket a knot)
_WALK = _SPARSE  # (a repair's argument) follow the knot list
# The list is walked while fewer than one bucket in this many, between the first and the last
# knot, is a knot.
_KNOTS_SPARSE = 4

# Below this total weight, sums of whole-number weights and the products of the pooling
# test (at most total**2 < 2**52) are exact in float64.
EXACT_TOTAL = 2.0**26
_ONE_BELOW = 1.0 - 2.0**-53  # the largest double below 1
_NOT_SURE_LOW = 2.0**-53  # the smallest p whose complement 1 - p is below 1

# Per-bucket records after the header (field b of bucket k at header + _PF_RECORD * k + b in pf,
# header + _PI_RECORD * k + b in pi), then the stack scratch in records of _STACK_RECORD fields,
# then (pf) the cuts.
_PF_RECORD = 5  # fields per bucket in pf
_PI_RECORD = 4  # fields per bucket in pi
_STACK_RECORD = 2  # fields per stack slot, in pf and in pi
_FIT, _BPOS, _BNEG, _CENTRES, _FIT_OWNER = 0, 1, 2, 3, 4  # pf record
_OWNER, _BEND, _BPREV, _BNEXT = 0, 1, 2, 3  # pi record
_SPOS, _SNEG = 0, 1  # pf stack record
_SFIRST, _SLAST = 0, 1  # pi stack record
_KNOT_RECORD = 2  # the knot list's fields per bucket in pi, after the stack: (next knot, previous knot)
_KNEXT, _KPREV = 0, 1
UNLINKED = -2  # both fields of a bucket that is not a knot (-1: no next / previous knot)
# offsets of the per-bucket fields (field of bucket k at OFFSET + _PF_RECORD * k or
# OFFSET + _PI_RECORD * k): compile-time constants
FIT = PF_HEADER + _FIT
BPOS = PF_HEADER + _BPOS
BNEG = PF_HEADER + _BNEG
CEN = PF_HEADER + _CENTRES
FIT_OWNER = PF_HEADER + _FIT_OWNER
OWNER = PI_HEADER + _OWNER
BEND = PI_HEADER + _BEND
BPREV = PI_HEADER + _BPREV
BNEXT = PI_HEADER + _BNEXT


def pav_state_sizes(n_buckets: int) -> tuple[int, int]:
    """Lengths of the ``pf`` and ``pi`` arrays for ``n_buckets`` buckets."""
    nf = PF_HEADER + (_PF_RECORD + _STACK_RECORD + 1 + 2) * n_buckets + PR_HEADER
    return nf, PI_HEADER + (_PI_RECORD + _STACK_RECORD + _KNOT_RECORD) * n_buckets


def pav_state_sizes_before_knots(n_buckets: int) -> int:
    """Length of ``pi`` in the layouts without the knot list."""
    return PI_HEADER + (_PI_RECORD + _STACK_RECORD) * n_buckets


def pav_state_sizes_before_prior(n_buckets: int) -> int:
    """Length of ``pf`` in the layout of format version 2 without the prior section."""
    return PF_HEADER + (_PF_RECORD + _STACK_RECORD + 1) * n_buckets


@jit_noalloc(forceinline=True)
def _prior_offset(B):
    return PF_HEADER + (_PF_RECORD + _STACK_RECORD + 1) * B


@jit_noalloc
def _cuts_offset(B):
    return PF_HEADER + (_PF_RECORD + _STACK_RECORD) * B


def pav_field(state, n_buckets: int, field: int) -> np.ndarray:
    """View of one per-bucket field (``_FIT``... of ``pf``, ``_OWNER``... of ``pi``), length B."""
    header, r = (PF_HEADER, _PF_RECORD) if state.dtype == np.float64 else (PI_HEADER, _PI_RECORD)
    return state[header + field : header + r * n_buckets : r]


def pav_blocks_view(pf: np.ndarray, pi: np.ndarray) -> dict[str, np.ndarray]:
    """Views of every per-bucket field by name, and the fitted values (for tests and inspection).

    ``fit`` is a new array: the fitted value of each bucket between the first and the last knot
    (:func:`_fitted_at`), the stored field elsewhere; ``fit_field`` is the stored field itself.
    """
    B = int(pi[PI_B])
    names_f = {"fit_field": _FIT, "bpos": _BPOS, "bneg": _BNEG, "centres": _CENTRES, "fit_owner": _FIT_OWNER}
    names_i = {"owner": _OWNER, "bend": _BEND, "bprev": _BPREV, "bnext": _BNEXT}
    views = {name: pav_field(pf, B, k) for name, k in names_f.items()}
    views.update({name: pav_field(pi, B, k) for name, k in names_i.items()})
    fit = views["fit_field"].copy()
    span = slice(max(int(pi[PI_HEAD]), 0), int(pi[PI_LAST]) + 1)
    own = views["fit_owner"][span]
    j = np.arange(B)[span]
    fit[span] = views["fit_field"][np.where(own < 0.0, j, own.astype(np.int64))]  # as _fitted_at
    views["fit"] = fit
    return views


def empty_pav_state(
    centres: np.ndarray,
    pseudo_count: float,
    linear: bool,
    probability_inputs: bool,
    cuts=None,
    finite_proba: bool = False,
    prior_mode: int = 0,
):
    """Fresh ``(pf, pi)`` for an empty histogram over buckets with the given ``centres``.

    ``cuts`` are the ``B - 1`` interior bucket edges, for the single-score kernels
    (``pav_predict_packed``, ``pav_learn_packed_inplace``); default: the midpoints of the centres.
    ``prior_mode`` is ``PR_MODE`` (0: none); a prior is first fitted after the first learned event.
    """
    B = centres.shape[0]
    nf, ni = pav_state_sizes(B)
    pf = np.zeros(nf, dtype=np.float64)
    pi = np.zeros(ni, dtype=np.int64)
    pav_field(pf, B, _CENTRES)[:] = centres
    if cuts is None:
        cuts = 0.5 * (centres[:-1] + centres[1:])
    cuts = np.ascontiguousarray(cuts, dtype=np.float64)
    # run as Python, once per calibrator: no kernel of their own to compile or load
    at = _cuts_offset.py_func(B)
    pf[at : at + B - 1] = cuts
    pf[PF_GRID_KIND], pf[PF_GRID_Z0], pf[PF_GRID_INV_STEP] = grid_of_sorted(cuts)
    pf[PF_PSEUDO] = pseudo_count
    pf[PF_LINEAR] = 1.0 if linear else 0.0
    pf[PF_PROBABILITY_INPUTS] = 1.0 if probability_inputs else 0.0
    pf[PF_FINITE_PROBA] = 1.0 if finite_proba else 0.0
    pf[PF_LO] = 0.5
    pf[PF_HI] = 0.5
    pf[PF_HEAD] = -1.0
    pf[PF_LAST] = -1.0
    o = _prior_offset.py_func(B)
    pf[o + PR_MODE] = float(prior_mode)
    pf[o + PR_RATE] = 0.5
    pf[o + PR_FLOOR] = 1.0
    pf[o + PR_NEXT] = 1.0 if prior_mode else math.inf
    pi[PI_B] = B
    pi[PI_HEAD] = -1
    pi[PI_TAIL] = -1
    pi[PI_LAST] = -1
    pi[PI_CHG_LO] = B
    pi[PI_CHG_HI] = -1
    pi[PI_DEP_LO] = B
    pi[PI_DEP_HI] = -1
    pi[PI_INTEGRAL] = 1
    pi[PI_EXACT] = 0
    pi[PI_KNOTS] = 1  # no knot, none linked
    pav_field(pi, B, _OWNER)[:] = -1
    at = pav_state_sizes_before_knots(B)
    pi[at : at + _KNOT_RECORD * B] = UNLINKED
    pav_field(pf, B, _FIT_OWNER)[:] = -1.0
    return pf, pi


# ------------------------------------------------------------------------------ the knot list
# Over the histogram itself (no prior, or a prior of strength 0) most buckets may be empty: with
# many buckets and a short window a block spans long runs of empty buckets. The knots are
# therefore linked in a list (``pi``'s last section: next and previous knot of each knot,
# ``UNLINKED`` in both fields of every other bucket), and the repairs walk the knots instead of
# the buckets. The list is a function of the histogram (``PI_KNOTS`` = 1); while the blocks are
# over the prior's augmented row, where every bucket is a knot, it is not kept: all
# ``UNLINKED``, ``PI_KNOTS`` = 0, and the next sweep over the histogram links it again.


@jit_noalloc
def _violates(p_left, n_left, p_right, n_right):
    """``rate(left) >= rate(right)``, by cross-multiplication (no division on the hot path)."""
    return p_left * (p_right + n_right) >= p_right * (p_left + n_left)


# The margin of :func:`_stays_below` (relative, in the rates) and the range of magnitudes it is
# used in: wide enough that no product of its pooling tests underflows or overflows.
_BELOW_MARGIN = 2.0**-20
_SAFE_LOW = 2.0**-300
_SAFE_HIGH = 2.0**300


@jit_noalloc(forceinline=True)
def _stays_below(exact, tp, tn, first_total, rp, rn):
    """Whether the sweep's top ``(tp, tn)``, reaching the first knot (total weight
    ``first_total``) of an old block R = ``(rp, rn)``, pools with none of the prefixes of R that
    the sweep would form: then R and every block after it are as they were.

    R's own sweep formed the same prefixes (a bottom one, growing as knots pool into it) above
    another top, and pooled none of them into it. With exact sums (``exact``) each prefix has a
    rate >= R's, so one test against R decides. In floating arithmetic a pooling raises the
    bottom prefix's rate by at most ``6 u`` (``u = 2**-53``) relative: the pooled rate is a
    weighted mean of the prefix's and of a part the test found at or below it, up to the test's
    rounding (``4 u``) and the sums' (``2 u``); a part too light for the test's products to be
    normal moves it by less than ``2**-99`` relative. So each prefix has a rate of at least R's
    times ``(1 + 6 u)**-K`` for ``K`` knots, above ``(1 - 2**-21)`` times it for any ``K < 2**29``,
    and when the top's rate is below R's by the relative margin ``2**-20``, every rounded pooling
    test of the top against a prefix finds no violation: the sweep repeats R's own operations
    bit for bit. This needs the sums in ``[2**-300, 2**300]`` (no product of a test against R's
    prefixes underflows or overflows); outside, it returns False and the sweep walks R.
    """
    if exact:
        return not _violates(tp, tn, rp, rn)
    tt = tp + tn
    rt = rp + rn
    if not (_SAFE_LOW <= tt <= _SAFE_HIGH and first_total >= _SAFE_LOW and rt <= _SAFE_HIGH):
        return False
    if not rp >= _SAFE_LOW * rt:
        return False
    return tp * rt < (rp * tt) * (1.0 - _BELOW_MARGIN)


@jit_noalloc
def _fill_gap(pf, left_knot, v_left, right_knot, v_right):
    """Fitted values of the empty buckets strictly between two knots: the linear interpolation
    by bucket centre between the knots' values, clipped to them."""
    c_left = pf[CEN + _PF_RECORD * left_knot]
    c_right = pf[CEN + _PF_RECORD * right_knot]
    for g in range(left_knot + 1, right_knot):
        v = v_left + (v_right - v_left) * ((pf[CEN + _PF_RECORD * g] - c_left) / (c_right - c_left))
        v = v_left if v_left > v else v  # clipped as min(max(v, v_left), v_right)
        pf[FIT + _PF_RECORD * g] = v_right if v_right < v else v


# The in-place repairs (:func:`_repair_block_inplace`) of the commonest change: a knot of a block
# changes and the block keeps its extent, so only its sums, its rate and the gaps beside it
# change.
#
# Whole-number weights (``PI_EXACT``), bucket ``k`` changed by ``(dp, dn)``. With exact sums the
# block ``[f, l]`` stays a block when both end knots remain, every proper prefix keeps a rate >=
# the block's new rate (then PAV of its knots is constant), and neither neighbour pools with it
# (the block to the right then stays as it was, as in the sweep's early stop). The new sums are
# the old ones plus the change (exact: whole numbers below ``EXACT_TOTAL``), and only the
# prefixes that the change can push below the block's rate are tested. The old block had every
# proper prefix at a rate >= its own. When its rate rises (``dp > 0`` or ``dn < 0``), a prefix
# that holds ``k`` keeps that property: with ``a/c >= A/C`` and ``c <= C``, ``(a + w)(C + w) -
# (A + w)(c + w) = (aC - Ac) + w (C - c - A + a) >= 0`` (``C - c - A + a`` is the negative weight
# after the prefix), and likewise for a removed negative; only the prefixes ending before ``k``
# are tested. When it falls, the prefixes ending before ``k`` are safe (their rates did not
# move) and those ending at or after ``k`` are tested, as their complements: the suffix from
# ``j + 1`` has a rate > the block's exactly when the prefix to ``j`` has a rate below it.
#
# Floating-point weights (checkpoints kept), knot ``k`` changed and still a knot: the resumed
# sweep's commonest outcomes, without a sweep. The sweep resumes at ``k`` with the stack above
# the block on the left that ``k``'s checkpoint shows: when ``k`` is the block's first knot, or its
# checkpoint's top starts there, one element (``f``'s); when the top starts at a knot ``g`` after
# ``f``, the entry below ``g``'s element is ``g``'s own checkpoint (an entry below the top is
# unchanged while it is there), which starts at ``f`` or at a knot ``h`` whose checkpoint gives
# the entry below ``h``'s, and so on down to ``f``'s: the elements read from the records. (The
# resumed sweep goes back to the last checkpoint that starts at ``f`` and re-forms these elements
# from unchanged knots: it reaches ``k`` with the same sums.) It pools each knot up to ``l`` into
# the top, or pushes it as a new element when the pooling test fails; after each pooling the top
# is tested against the entry below and pooled into it while the test passes (the entry's sums
# first, as the sweep adds them), and once it is ``f``'s element, against the left block; then it
# stops at the next block's first knot (:func:`_stays_below`). These are :func:`_resweep_inplace`'s
# operations in its order, with the top in registers and the entries below it in the stack
# scratch (which every sweep writes before it reads), for as long as every element is pooled back
# into ``f``'s by ``l`` and ``f``'s pools neither into the left block nor with the next one; the
# block then keeps its extent and owners, and the records of the knots after ``k`` are those the
# resumed sweep writes (the top before each).


@jit_noalloc(forceinline=True)
def _repair_block_inplace(hist, h0, pf, pi, k, dp, dn, sparse):
    """Bucket ``k`` changed by ``(dp, dn)``: its block updated in place (see above).

    Returns False at any other outcome, having written nothing but records of knots after
    ``k`` and the stack scratch (floating-point weights), which the resumed sweep that then runs
    writes again.
    ``sparse``: the scans walk the knot list (an empty bucket adds nothing to a sum).
    """
    B = pi[PI_B]
    POS = h0
    NEG = h0 + B
    KN = PI_HEADER + (_PI_RECORD + _STACK_RECORD) * B
    f = pi[OWNER + _PI_RECORD * k]
    last = pi[BEND + _PI_RECORD * f]
    chain = pi[BPREV + _PI_RECORD * f]
    nxt = pi[BNEXT + _PI_RECORD * f]
    if k > last:  # k was an empty bucket in a gap: a new knot
        return False
    if pi[PI_EXACT] == 1:
        if ((k == f) | (k == last)) and not hist[POS + k] + hist[NEG + k] > 0.0:  # an end knot emptied
            return False
        p = pf[BPOS + _PF_RECORD * f] + dp
        n = pf[BNEG + _PF_RECORD * f] + dn
        t = p + n
        if dp > 0.0 or dn < 0.0:  # the rate may rise: the prefixes ending before k
            cp = 0.0
            ct = 0.0
            g = f
            while g < k:  # a knot of the block lies at or after k: the walk ends there
                cp += hist[POS + g]
                ct += hist[POS + g] + hist[NEG + g]
                if cp * t < p * ct:
                    return False
                g = pi[KN + _KNOT_RECORD * g + _KNEXT] if sparse else g + 1
        if dp < 0.0 or dn > 0.0:  # the rate may fall: the suffixes starting after k
            sp = 0.0
            st = 0.0
            g = last
            while g > k:  # a knot of the block lies at or before k
                sp += hist[POS + g]
                st += hist[POS + g] + hist[NEG + g]
                if sp * t > p * st:
                    return False
                g = pi[KN + _KNOT_RECORD * g + _KPREV] if sparse else g - 1
        if chain != -1 and _violates(pf[BPOS + _PF_RECORD * chain], pf[BNEG + _PF_RECORD * chain], p, n):
            return False
        if nxt != -1 and _violates(p, n, pf[BPOS + _PF_RECORD * nxt], pf[BNEG + _PF_RECORD * nxt]):
            return False
        chg_hi = last
    else:
        # the stack above the left block as the resumed sweep holds it: the top (first knot ``tf``,
        # sums ``p``, ``n``) here, the ``d`` entries below it in the stack scratch, f's at slot 0
        SPOS = PF_HEADER + _PF_RECORD * B + _SPOS
        SNEG = PF_HEADER + _PF_RECORD * B + _SNEG
        SFIRST = PI_HEADER + _PI_RECORD * B + _SFIRST
        tf = f
        d = np.int64(0)
        if k != f and pi[BEND + _PI_RECORD * k] != f:  # the top before k starts at a knot g after f
            tf = pi[BEND + _PI_RECORD * k]
            if not (f < tf < k and hist[POS + tf] + hist[NEG + tf] > 0.0):
                return False
            # the entry below g's element is g's checkpoint (the top before g), which starts at f
            # or at a knot h after f, whose own checkpoint gives the entry below h's, down to f's
            g = tf
            while g != f:
                h = pi[BEND + _PI_RECORD * g]
                if not (f <= h < g and (h == f or hist[POS + h] + hist[NEG + h] > 0.0)):
                    return False
                d += 1
                g = h
            i = d - 1
            g = tf
            while g != f:
                h = pi[BEND + _PI_RECORD * g]
                pi[SFIRST + _STACK_RECORD * i] = h
                pf[SPOS + _STACK_RECORD * i] = pf[BPOS + _PF_RECORD * g]
                pf[SNEG + _STACK_RECORD * i] = pf[BNEG + _PF_RECORD * g]
                i -= 1
                g = h
        cp = pf[BPOS + _PF_RECORD * chain] if chain != -1 else 0.0
        cn = pf[BNEG + _PF_RECORD * chain] if chain != -1 else 0.0
        j = k
        if k == f:  # f alone is the top, tested against the left block
            p = hist[POS + f]
            n = hist[NEG + f]
            if chain != -1 and cp * (p + n) >= p * (cp + cn):
                return False
            j = last if f == last else (pi[KN + _KNOT_RECORD * f + _KNEXT] if sparse else f + 1)
        else:
            p = pf[BPOS + _PF_RECORD * k]
            n = pf[BNEG + _PF_RECORD * k]
        while j != f:
            pj = hist[POS + j]
            nj = hist[NEG + j]
            if pj + nj > 0.0:
                if j > k:  # the top before j (k's record is as it was)
                    _set_record(pf, pi, j, tf, p, n)
                if not p * (pj + nj) >= pj * (p + n):  # j starts an element of its own
                    pi[SFIRST + _STACK_RECORD * d] = tf
                    pf[SPOS + _STACK_RECORD * d] = p
                    pf[SNEG + _STACK_RECORD * d] = n
                    d += 1
                    tf = j
                    p = pj
                    n = nj
                else:
                    p = p + pj
                    n = n + nj
                    while d > 0:  # the top pools into the entry below while their test passes
                        ep = pf[SPOS + _STACK_RECORD * (d - 1)]
                        en = pf[SNEG + _STACK_RECORD * (d - 1)]
                        if not ep * (p + n) >= p * (ep + en):
                            break
                        d -= 1
                        tf = pi[SFIRST + _STACK_RECORD * d]
                        p = ep + p
                        n = en + n
                    if d == 0 and chain != -1 and cp * (p + n) >= p * (cp + cn):  # into the left block
                        return False
            if j == last:
                break
            j = pi[KN + _KNOT_RECORD * j + _KNEXT] if sparse else j + 1
        if d != 0:  # the block splits
            return False
        exact = pi[PI_EXACT] == 1  # False here: a variable, not a literal (one compiled version)
        if nxt != -1 and not _stays_below(
            exact, p, n, hist[POS + nxt] + hist[NEG + nxt], pf[BPOS + _PF_RECORD * nxt], pf[BNEG + _PF_RECORD * nxt]
        ):
            return False
        chg_hi = nxt if nxt != -1 else B - 1  # as the resumed sweep marks it (it relinks nxt)
    pf[BPOS + _PF_RECORD * f] = p
    pf[BNEG + _PF_RECORD * f] = n
    v = p / (p + n)
    pf[FIT + _PF_RECORD * f] = v  # the block's buckets read it through their FIT_OWNER
    # the gaps beside the block, when there are any (a call costs more than the test)
    if chain != -1:
        lk = pi[BEND + _PI_RECORD * chain]
        if f > lk + 1:
            _fill_gap(pf, lk, pf[FIT + _PF_RECORD * chain], f, v)
    if nxt != -1 and nxt > last + 1:
        _fill_gap(pf, last, v, nxt, pf[FIT + _PF_RECORD * nxt])
    if f < pi[PI_CHG_LO]:
        pi[PI_CHG_LO] = f
    if chg_hi > pi[PI_CHG_HI]:
        pi[PI_CHG_HI] = chg_hi
    return True


@jit_noalloc(forceinline=True)
def pav_bucket_delta_inplace(hist, h0, pf, pi, k, old_p, old_n):
    """Repair after bucket ``k`` of the histogram ``hist[h0:]`` changed from ``(old_p, old_n)``
    to its current weights.

    The same result as :func:`pav_bucket_changed_inplace` (bit for bit); knowing the old
    weights lets whole-number histograms update a block's sums in O(1).
    """
    _bucket_delta_inplace(hist, h0, pf, pi, k, old_p, old_n, _SPARSE)


@jit_noalloc(forceinline=True)
def _bucket_delta_inplace(hist, h0, pf, pi, k, old_p, old_n, sparse):
    """:func:`pav_bucket_delta_inplace` over the histogram (``sparse``: its knot list kept) or
    over the prior's augmented row (every bucket a knot, no list)."""
    B = pi[PI_B]
    dp = hist[h0 + k] - old_p
    dn = hist[h0 + B + k] - old_n
    if dp == 0.0 and dn == 0.0:  # the histogram is as it was: so are its blocks
        return
    was = True
    now = True
    if sparse:
        if pi[PI_KNOTS] == 0:  # the list is not kept: a full sweep links it
            _resweep_inplace(hist, h0, pf, pi, _ALL, sparse)
            return
        now = hist[h0 + k] + hist[h0 + B + k] > 0.0
        was = pi[PI_HEADER + (_PI_RECORD + _STACK_RECORD) * B + _KNOT_RECORD * k + _KNEXT] != UNLINKED
        if not (now or was):  # a weight of -0.0 or a change within a knot's zero: nothing to repair
            return
        if now and not was:
            # link k: its previous knot is the last knot of the block on its left when k lies
            # in a gap, else the first non-empty bucket below it (its block starts at a knot
            # below it); the blocks are still those of the histogram before k changed
            KN = PI_HEADER + (_PI_RECORD + _STACK_RECORD) * B
            first = pi[PI_HEAD]
            if first == -1 or k < first:
                prev = np.int64(-1)
            elif k > pi[PI_LAST]:
                prev = pi[PI_LAST]
            else:
                prev = pi[BEND + _PI_RECORD * pi[OWNER + _PI_RECORD * k]]
                if k < prev:
                    prev = k - 1
                    while not hist[h0 + prev] + hist[h0 + B + prev] > 0.0:
                        prev -= 1
            nxt = first if prev == -1 else pi[KN + _KNOT_RECORD * prev + _KNEXT]
            pi[KN + _KNOT_RECORD * k + _KNEXT] = nxt
            pi[KN + _KNOT_RECORD * k + _KPREV] = prev
            pi[BEND + _PI_RECORD * k] = k  # no checkpoint (one kept from before it emptied is stale)
            if prev != -1:
                pi[KN + _KNOT_RECORD * prev + _KNEXT] = k
            if nxt != -1:
                pi[KN + _KNOT_RECORD * nxt + _KPREV] = k
            pi[PI_N_KNOTS] += 1
    head = pi[PI_HEAD]
    # walk the list where the knots are sparse (a walk follows one pointer per knot; the bucket
    # by bucket scan reads consecutive buckets, faster per bucket where most are knots)
    walk = _WALK if sparse == 1 and _KNOTS_SPARSE * pi[PI_N_KNOTS] < pi[PI_LAST] - head else _DENSE
    # in place while the sums are exact, or (floating-point weights) where the checkpoints are
    # kept and k stays a knot
    if not (
        (pi[PI_EXACT] == 1 or (was and now and (pi[PI_INTEGRAL] == 0 or pi[PI_KNOTS] == 0)))
        and head != -1
        and head <= k <= pi[PI_LAST]
        and _repair_block_inplace(hist, h0, pf, pi, k, dp, dn, walk)
    ):
        _resweep_inplace(hist, h0, pf, pi, k, walk)
    if was and not now:  # an emptied knot leaves the list once the sweep has walked past it
        KN = PI_HEADER + (_PI_RECORD + _STACK_RECORD) * B
        prev = pi[KN + _KNOT_RECORD * k + _KPREV]
        nxt = pi[KN + _KNOT_RECORD * k + _KNEXT]
        if prev != -1:
            pi[KN + _KNOT_RECORD * prev + _KNEXT] = nxt
        if nxt != -1:
            pi[KN + _KNOT_RECORD * nxt + _KPREV] = prev
        pi[KN + _KNOT_RECORD * k + _KNEXT] = UNLINKED
        pi[KN + _KNOT_RECORD * k + _KPREV] = UNLINKED
        pi[PI_N_KNOTS] -= 1


@jit_noalloc
def pav_bucket_changed_inplace(hist, h0, pf, pi, k):
    """Repair the blocks and fitted values after the weight of bucket ``k`` changed (-1: all).

    The histogram is ``pos = hist[h0 : h0 + B]`` and ``neg = hist[h0 + B : h0 + 2B]``. Without
    the bucket's old weights this always resumes the sweep (:func:`pav_bucket_delta_inplace`
    can often update the block in place).
    """
    if k < 0:
        _resweep_inplace(hist, h0, pf, pi, _ALL, _SPARSE)
        return
    exact = pi[PI_EXACT]
    pi[PI_EXACT] = 0  # no O(1) update: the old weights are unknown (NaN: never "unchanged")
    _bucket_delta_inplace(hist, h0, pf, pi, k, math.nan, math.nan, _SPARSE)
    pi[PI_EXACT] = exact


@jit_noalloc(forceinline=True)
def _set_record(pf, pi, j, first, p, n):
    """Bucket ``j``'s block record: ``(last knot, P, N)`` at a block's first knot, the checkpoint
    ``(first, P, N)`` at a knot inside a block."""
    pi[BEND + _PI_RECORD * j] = first
    pf[BPOS + _PF_RECORD * j] = p
    pf[BNEG + _PF_RECORD * j] = n


@jit_noalloc(forceinline=True)
def _checkpoint_at_or_before(hist, h0, pi, f, k, linked):
    """The last knot ``c`` in ``f + 1..k`` of the block ``f`` whose checkpoint holds, else ``f``.

    ``c`` itself may be ``k`` (a knot before its change, or one just emptied: a new knot's
    checkpoint is cleared when it is linked); any other ``c`` must be a knot now (an emptied
    bucket's record is not kept up to date). ``linked``: walk the knot list.
    """
    B = pi[PI_B]
    KN = PI_HEADER + (_PI_RECORD + _STACK_RECORD) * B
    c = k
    while c > f:
        if pi[BEND + _PI_RECORD * c] == f and (c == k or hist[h0 + c] + hist[h0 + B + c] > 0.0):
            return c
        c = pi[KN + _KNOT_RECORD * c + _KPREV] if linked else c - 1
    return f


@jit_noalloc(forceinline=True)
def _knot_before(hist, h0, pi, c, linked):
    """The knot before ``c`` (there is one: the first knot of ``c``'s block)."""
    B = pi[PI_B]
    if linked:
        return pi[PI_HEADER + (_PI_RECORD + _STACK_RECORD) * B + _KNOT_RECORD * c + _KPREV]
    g = c - 1
    while not hist[h0 + g] + hist[h0 + B + g] > 0.0:
        g -= 1
    return g


@jit_noalloc(forceinline=True)
def _gap_owned(pi, pf, head, old_last, a, b, owner):
    """Whether the buckets ``a..b`` (in the old span ``head..old_last``) already read as a gap
    owned by ``owner``. Over the old span the owners run in contiguous stretches, one per block,
    its knots first (``FIT_OWNER`` the block) and its gap after (``FIT_OWNER`` -1): two ends
    with the same owner, the first in its gap, have every bucket between them in that gap."""
    if a > b:
        return True
    return (
        head != -1
        and head <= a
        and b <= old_last
        and pi[OWNER + _PI_RECORD * a] == owner
        and pi[OWNER + _PI_RECORD * b] == owner
        and pf[FIT_OWNER + _PF_RECORD * a] < 0.0
    )


@jit_noalloc
def _resweep_inplace(hist, h0, pf, pi, k, sparse):
    """Resume the PAV sweep at the block holding ``k`` (``k = -1``: from scratch); see above.

    A full sweep (``k = -1``) links the knot list when ``sparse`` (``hist`` is the histogram) and
    drops it otherwise (the augmented row). A resumed sweep walks the list when ``sparse``, else
    the buckets one by one (the augmented row, or a histogram whose knots are dense).

    A full sweep writes a knot's checkpoint (the top just before it) once the knot is inside a
    block: when it pools into the top, or when the block it starts pools into the stack entry
    below, which is still the top it was pushed over. A knot that stays a block's first knot gets
    its block's record in the write-back, so the records are those of writing every knot's
    checkpoint as the sweep passes it, with fewer writes. And a knot pushed as a new top is not
    tested against the entry below it: that entry is the old top, and the test is the pooling test
    the knot has just failed (the same operands in the same order).
    """
    B = pi[PI_B]
    KN = PI_HEADER + (_PI_RECORD + _STACK_RECORD) * B
    if k < 0 and sparse:  # link every knot (written out here: a helper would be one more compile)
        prev = -1
        n_knots = 0
        for j in range(B):
            if hist[h0 + j] + hist[h0 + B + j] > 0.0:
                pi[KN + _KNOT_RECORD * j + _KPREV] = prev
                if prev != -1:
                    pi[KN + _KNOT_RECORD * prev + _KNEXT] = j
                prev = j
                n_knots += 1
            else:
                pi[KN + _KNOT_RECORD * j + _KNEXT] = UNLINKED
                pi[KN + _KNOT_RECORD * j + _KPREV] = UNLINKED
        if prev != -1:
            pi[KN + _KNOT_RECORD * prev + _KNEXT] = -1
        pi[PI_N_KNOTS] = n_knots
        pi[PI_KNOTS] = 1
    elif k < 0 and pi[PI_KNOTS] == 1:  # the augmented row: the list is not kept
        pi[KN : KN + _KNOT_RECORD * B] = UNLINKED
        pi[PI_KNOTS] = pi[PI_N_KNOTS] = 0
    linked = sparse == 1 and k >= 0  # the sweep starts at a linked bucket (a knot, or k just emptied)
    POS = h0
    NEG = h0 + B
    SPOS = PF_HEADER + _PF_RECORD * B + _SPOS
    SNEG = PF_HEADER + _PF_RECORD * B + _SNEG
    SFIRST = PI_HEADER + _PI_RECORD * B + _SFIRST
    SLAST = PI_HEADER + _PI_RECORD * B + _SLAST
    head = pi[PI_HEAD]
    exact = pi[PI_EXACT] == 1

    # 1. where the sweep resumes: the start of the block holding k, or k itself in a gap
    deferred = np.int64(-1)  # the old first knot of the block holding k
    if k < 0:  # full rebuild
        start, chain, region_end = 0, -1, B - 1
    elif head == -1 or k < head:  # before the first knot
        start, chain, region_end = k, -1, k
    elif k > pi[PI_LAST]:  # after the last knot
        start, chain, region_end = k, pi[PI_TAIL], k
    else:
        o = pi[OWNER + _PI_RECORD * k]
        if k <= pi[BEND + _PI_RECORD * o]:
            start, chain, region_end = o, pi[BPREV + _PI_RECORD * o], pi[BEND + _PI_RECORD * o]
            deferred = o
        else:
            start, chain, region_end = k, o, k

    # 2. sweep knot by knot; ``chain`` is the top of the untouched stack of blocks on the left.
    #    The top of the new stack lives in registers (tf, tl, tp, tn); the ``sp`` entries below
    #    it are in the scratch arrays. Inside the block, from its last checkpoint at or before k.
    sp = 0
    has_top = False
    tf, tl, tp, tn = 0, 0, 0.0, 0.0
    checkpoints = pi[PI_INTEGRAL] == 0 or pi[PI_KNOTS] == 0
    # the top before the first knot swept is the chain's block (its checkpoint); an old block's
    # first knot keeps its record until the write-back (``deferred``), as the stopping block's
    # does (``r_*``, restored)
    c0p = pf[BPOS + _PF_RECORD * chain] if chain != -1 else 0.0
    c0n = pf[BNEG + _PF_RECORD * chain] if chain != -1 else 0.0
    chain0 = chain
    r_end, r_p, r_n = np.int64(-1), 0.0, 0.0
    if checkpoints and k > start:
        c = _checkpoint_at_or_before(hist, h0, pi, start, k, linked)
        if c > start:
            has_top = True
            tf = start
            tl = _knot_before(hist, h0, pi, c, linked)
            tp = pf[BPOS + _PF_RECORD * c]
            tn = pf[BNEG + _PF_RECORD * c]
            start = c
    stopped = False
    j = start
    if k < 0:
        # A full sweep: the loop below without the chain, the stopping block and the list, which it
        # never meets here; the same operations in the same order, fewer tests and writes per knot.
        for j in range(B):
            pj, nj = hist[POS + j], hist[NEG + j]
            tj = pj + nj
            if not tj > 0.0:
                continue
            if has_top and tp * tj >= pj * (tp + tn):
                if checkpoints:
                    pi[BEND + _PI_RECORD * j], pf[BPOS + _PF_RECORD * j], pf[BNEG + _PF_RECORD * j] = tf, tp, tn
                tl, tp, tn = j, tp + pj, tn + nj
                while sp >= 1:
                    p1, n1 = pf[SPOS + _STACK_RECORD * (sp - 1)], pf[SNEG + _STACK_RECORD * (sp - 1)]
                    if not p1 * (tp + tn) >= tp * (p1 + n1):
                        break
                    below = pi[SFIRST + _STACK_RECORD * (sp - 1)]
                    if checkpoints:
                        pi[BEND + _PI_RECORD * tf] = below
                        pf[BPOS + _PF_RECORD * tf], pf[BNEG + _PF_RECORD * tf] = p1, n1
                    tf, tp, tn, sp = below, p1 + tp, n1 + tn, sp - 1
            else:
                if has_top:
                    pi[SFIRST + _STACK_RECORD * sp], pi[SLAST + _STACK_RECORD * sp] = tf, tl
                    pf[SPOS + _STACK_RECORD * sp], pf[SNEG + _STACK_RECORD * sp] = tp, tn
                    sp += 1
                tf, tl, tp, tn, has_top = j, j, pj, nj, True
        j = -1
    while j >= 0:
        pj = hist[POS + j]
        nj = hist[NEG + j]
        if pj + nj > 0.0:
            # j starts an old block R: if the top pools with none of the prefixes R's own sweep
            # formed, R and everything after it are unchanged (see ``_stays_below``): R is the
            # stopping block
            if (
                has_top
                and j > region_end
                and pi[OWNER + _PI_RECORD * j] == j
                and _stays_below(exact, tp, tn, pj + nj, pf[BPOS + _PF_RECORD * j], pf[BNEG + _PF_RECORD * j])
            ):
                pi[SFIRST + _STACK_RECORD * sp] = tf
                pi[SLAST + _STACK_RECORD * sp] = tl
                pf[SPOS + _STACK_RECORD * sp] = tp
                pf[SNEG + _STACK_RECORD * sp] = tn
                sp += 1
                tf = j
                tl = pi[BEND + _PI_RECORD * j]
                tp = pf[BPOS + _PF_RECORD * j]
                tn = pf[BNEG + _PF_RECORD * j]
                stopped = True
                break
            if checkpoints:
                if j > region_end and pi[OWNER + _PI_RECORD * j] == j:
                    r_end, r_p, r_n = pi[BEND + _PI_RECORD * j], pf[BPOS + _PF_RECORD * j], pf[BNEG + _PF_RECORD * j]
                # the records (``_set_record``) and the pooling tests (``_violates``) of this
                # loop are written out: the interpreted tier runs them per knot, where a call
                # costs more than its body
                if has_top:
                    pi[BEND + _PI_RECORD * j] = tf
                    pf[BPOS + _PF_RECORD * j] = tp
                    pf[BNEG + _PF_RECORD * j] = tn
                elif chain != -1 and j != deferred:
                    pi[BEND + _PI_RECORD * j] = chain
                    pf[BPOS + _PF_RECORD * j] = c0p
                    pf[BNEG + _PF_RECORD * j] = c0n
            if has_top and tp * (pj + nj) >= pj * (tp + tn):  # pool the new knot into the top
                tl = j
                tp = tp + pj
                tn = tn + nj
            else:
                if has_top:
                    pi[SFIRST + _STACK_RECORD * sp] = tf
                    pi[SLAST + _STACK_RECORD * sp] = tl
                    pf[SPOS + _STACK_RECORD * sp] = tp
                    pf[SNEG + _STACK_RECORD * sp] = tn
                    sp += 1
                tf = j
                tl = j
                tp = pj
                tn = nj
                has_top = True
            while True:
                if sp >= 1:
                    p1 = pf[SPOS + _STACK_RECORD * (sp - 1)]
                    n1 = pf[SNEG + _STACK_RECORD * (sp - 1)]
                    if p1 * (tp + tn) >= tp * (p1 + n1):
                        tf = pi[SFIRST + _STACK_RECORD * (sp - 1)]
                        tp = p1 + tp
                        tn = n1 + tn
                        sp -= 1
                        continue
                elif chain != -1:
                    p1 = pf[BPOS + _PF_RECORD * chain]
                    n1 = pf[BNEG + _PF_RECORD * chain]
                    if p1 * (tp + tn) >= tp * (p1 + n1):
                        tf = chain
                        tp = p1 + tp
                        tn = n1 + tn
                        below = pi[BPREV + _PI_RECORD * chain]
                        if checkpoints and below != -1:  # its first knot is inside a block now
                            bp, bn = pf[BPOS + _PF_RECORD * below], pf[BNEG + _PF_RECORD * below]
                            _set_record(pf, pi, chain, below, bp, bn)
                        chain = below
                        continue
                break
            if j > region_end:
                old_first = pi[OWNER + _PI_RECORD * j]
                if j == (r_end if checkpoints else pi[BEND + _PI_RECORD * old_first]) and tf == old_first:
                    if checkpoints:  # the stopping block is kept: its record back
                        _set_record(pf, pi, old_first, r_end, r_p, r_n)
                    stopped = True
                    break
        if linked:
            j = pi[KN + _KNOT_RECORD * j + _KNEXT]  # -1 after the last knot
        else:
            j = j + 1 if j + 1 < B else -1
    if has_top:
        pi[SFIRST + _STACK_RECORD * sp] = tf
        pi[SLAST + _STACK_RECORD * sp] = tl
        pf[SPOS + _STACK_RECORD * sp] = tp
        pf[SNEG + _STACK_RECORD * sp] = tn
        sp += 1
    _write_blocks_inplace(pf, pi, k, start, chain, sp, stopped, head)
    if checkpoints and deferred != -1 and chain0 != -1 and sp > 0 and pi[SFIRST] != deferred:
        _set_record(pf, pi, deferred, chain0, c0p, c0n)  # the old first knot is inside a block now


@jit_noalloc(forceinline=True)
def _write_blocks_inplace(pf, pi, k, start, chain, sp, stopped, head):
    """The end of :func:`_resweep_inplace`: the ``sp`` blocks on the stack scratch, the last one
    the stopping block when ``stopped``, written over the old ones right of ``chain``; ``head``
    is the old first knot."""
    B = pi[PI_B]
    SPOS = PF_HEADER + _PF_RECORD * B + _SPOS
    SNEG = PF_HEADER + _PF_RECORD * B + _SNEG
    SFIRST = PI_HEADER + _PI_RECORD * B + _SFIRST
    SLAST = PI_HEADER + _PI_RECORD * B + _SLAST
    if k < 0:
        # A full sweep: every block is new and none is kept, with no chain on the left and no
        # stopping block, so steps 3 and 4 below write the same values; one pass over the
        # blocks writes them (they write disjoint fields: a block's knots, its gap, its record).
        # (each block's record offsets are formed once: the interpreted tier runs this per block)
        prev = np.int64(-1)
        prev_at = np.int64(-1)  # the previous block's offset in pi
        left_knot = np.int64(-1)
        left_value = 0.0
        for i in range(sp):
            f = pi[SFIRST + _STACK_RECORD * i]
            last = pi[SLAST + _STACK_RECORD * i]
            rate_p = pf[SPOS + _STACK_RECORD * i]
            rate_n = pf[SNEG + _STACK_RECORD * i]
            at = _PI_RECORD * f
            fat = _PF_RECORD * f
            pi[BPREV + at] = prev
            if prev != -1:
                pi[BNEXT + prev_at] = f
            if last == f:  # a block of one knot (most, over the prior's augmented row)
                pi[OWNER + at] = f
                pf[FIT_OWNER + fat] = f
            else:
                for g in range(f, last + 1):
                    pi[OWNER + _PI_RECORD * g] = f
                    pf[FIT_OWNER + _PF_RECORD * g] = f
            pi[BEND + at] = last
            pf[BPOS + fat] = rate_p
            pf[BNEG + fat] = rate_n
            v = rate_p / (rate_p + rate_n)
            if left_knot != -1 and f > left_knot + 1:  # the gap before this block
                for g in range(left_knot + 1, f):
                    pi[OWNER + _PI_RECORD * g] = prev
                    pf[FIT_OWNER + _PF_RECORD * g] = -1.0
                _fill_gap(pf, left_knot, left_value, f, v)
            pf[FIT + fat] = v
            prev = f
            prev_at = at
            left_knot = last
            left_value = v
        if prev != -1:
            pi[BNEXT + _PI_RECORD * prev] = -1
        pi[PI_HEAD] = pi[SFIRST] if sp > 0 else -1
        pi[PI_TAIL] = prev
        pi[PI_LAST] = left_knot
        pf[PF_HEAD] = pi[PI_HEAD]
        pf[PF_LAST] = pi[PI_LAST]
        pi[PI_CHG_LO] = 0  # every block may have changed
        pi[PI_CHG_HI] = B - 1
        return
    # 3. write the new blocks back, and the owners of their buckets where a block's extent is new:
    #    an old block with the same first and last knot, inside the old span, has them already (a
    #    full sweep writes every owner: loading a saved state compares a full sweep's with it)
    n_rewrite = sp - 1 if stopped else sp
    old_head = head if k >= 0 else np.int64(-1)
    old_last = pi[PI_LAST]
    # without checkpoints the sweep leaves the old blocks' ends in place: a new block that starts
    # where an old one started has that block's owners already (its buckets up to the old end)
    ends_kept = pi[PI_INTEGRAL] == 1 and pi[PI_KNOTS] == 1
    if chain != -1:
        pi[BNEXT + _PI_RECORD * chain] = pi[SFIRST] if sp > 0 else -1
    else:
        pi[PI_HEAD] = pi[SFIRST] if sp > 0 else -1
    for i in range(sp):
        f = pi[SFIRST + _STACK_RECORD * i]
        pi[BPREV + _PI_RECORD * f] = pi[SFIRST + _STACK_RECORD * (i - 1)] if i > 0 else chain
        if i < n_rewrite:
            last = pi[SLAST + _STACK_RECORD * i]
            kept = old_head != -1 and old_head <= f and last <= old_last
            if not (kept and pi[OWNER + _PI_RECORD * f] == f and pi[BEND + _PI_RECORD * f] == last):
                g0 = f
                if ends_kept and old_head != -1 and old_head <= f <= old_last and pi[OWNER + _PI_RECORD * f] == f:
                    g0 = pi[BEND + _PI_RECORD * f] + 1  # past the old block's end
                for g in range(g0, last + 1):
                    pi[OWNER + _PI_RECORD * g] = f
                    pf[FIT_OWNER + _PF_RECORD * g] = f
            pi[BNEXT + _PI_RECORD * f] = pi[SFIRST + _STACK_RECORD * (i + 1)] if i < sp - 1 else -1
            pi[BEND + _PI_RECORD * f] = last
            pf[BPOS + _PF_RECORD * f] = pf[SPOS + _STACK_RECORD * i]
            pf[BNEG + _PF_RECORD * f] = pf[SNEG + _STACK_RECORD * i]
    if not stopped:
        if sp > 0:
            pi[PI_TAIL] = pi[SFIRST + _STACK_RECORD * (sp - 1)]
            pi[PI_LAST] = pi[SLAST + _STACK_RECORD * (sp - 1)]
        else:
            pi[PI_TAIL] = chain
            pi[PI_LAST] = pi[BEND + _PI_RECORD * chain] if chain != -1 else -1
    pf[PF_HEAD] = pi[PI_HEAD]
    pf[PF_LAST] = pi[PI_LAST]

    # the range of buckets whose block (sums, end or links) may have changed: the stopping
    # block only had its link to the left rewritten; without a stop the tail changed
    chg_lo = start if k >= 0 else 0
    if sp > 0 and pi[SFIRST] < chg_lo:
        chg_lo = pi[SFIRST]
    chg_hi = pi[SFIRST + _STACK_RECORD * (sp - 1)] if stopped else B - 1
    if chg_lo < pi[PI_CHG_LO]:
        pi[PI_CHG_LO] = chg_lo
    if chg_hi > pi[PI_CHG_HI]:
        pi[PI_CHG_HI] = chg_hi

    # 4. gaps and fitted values from the end of the chain to the last rewritten block; the
    #    buckets before the first knot and after the last one are never read (predictions
    #    clamp to the knots' span)
    if chain != -1:
        left_knot = pi[BEND + _PI_RECORD * chain]
        left_value = pf[FIT + _PF_RECORD * chain]  # the chain block's rate, already stored
    else:
        left_knot = -1
        left_value = 0.0
    for i in range(sp):
        f = pi[SFIRST + _STACK_RECORD * i]
        # the stopping block is unchanged: its stored rate saves a division
        if i == n_rewrite:
            v = pf[FIT + _PF_RECORD * f]
        else:
            rate_p = pf[SPOS + _STACK_RECORD * i]
            v = rate_p / (rate_p + pf[SNEG + _STACK_RECORD * i])
        if left_knot != -1 and f > left_knot + 1:  # the gap before this block, owned by the block on its left
            lo_owner = chain if i == 0 else pi[SFIRST + _STACK_RECORD * (i - 1)]
            if not _gap_owned(pi, pf, old_head, old_last, left_knot + 1, f - 1, lo_owner):
                for g in range(left_knot + 1, f):
                    pi[OWNER + _PI_RECORD * g] = lo_owner
                    pf[FIT_OWNER + _PF_RECORD * g] = -1.0
            _fill_gap(pf, left_knot, left_value, f, v)
        if i == n_rewrite:
            break  # the stopping block and everything after it are unchanged
        last = pi[SLAST + _STACK_RECORD * i]
        pf[FIT + _PF_RECORD * f] = v
        left_knot = last
        left_value = v


# The end runs' resume points. Over the prior's augmented row every bucket is a knot, and the
# buckets where no data fall form hundreds of light blocks that each end run pools; the events
# change blocks inside the runs, so nearly every learned event refreshes them. A refresh
# therefore keeps, for each run, the run's sums as it reaches one of its blocks ``g`` (before
# the pooling test of ``g``): they are a function of the blocks on ``g``'s run side and of the
# pseudo-count, so while neither changed (``PI_CHG_LO`` / ``PI_CHG_HI`` since the last refresh,
# a window without decay) the next refresh resumes at ``g`` with the same numbers and repeats
# the from-the-end refresh's additions and tests from there on, in the same order: the same
# bits. Each run keeps the block it reached nearest to the lowest (highest) change since the
# last refresh, whether it resumed or started from its end, where the next event's change is
# likely to fall again.
#
# Under decay the pseudo-count ``c`` grows in stored units with every event, and the sum that
# carries it (the left run's P, the right run's N) starts at ``S0 = first + c``, then adds one
# block at a time: ``S_k = fl(S_{k-1} + x_k)``. While every ``S_k`` up to ``g`` lies in the binade
# ``[top / 2, top)`` of ``S0``, every one is a multiple of that binade's spacing ``u`` and each
# addition rounds ``x_k`` alone to a multiple of ``u`` (unless ``x_k`` is an odd multiple of
# ``u / 2``, a tie that rounds to even by the sum's own last bit): so ``S_g = S0 + Q``, where
# ``Q = S_g - S0`` (exact) depends on the blocks and on ``u`` only. A point therefore keeps ``Q``,
# ``S0`` and ``top``; a later refresh whose own ``S0'`` is in the same binade, at least the kept
# one, with ``S0' + Q < top``, has ``S0' + Q`` (exact) as its sum at ``g``, bit for bit. The
# pooling tests before ``g`` also repeat: each passed, when the point was kept, by a relative
# margin of ``2**-20`` (the ratio of its two sides, ``lp (p + n) / (p (lp + ln))`` for the left
# run, grows with ``lp``, and so with ``c``; likewise the right run's with ``rn``), and a test that
# passes by that margin passes again, rounded, at any larger sum: see :func:`_stays_below` for
# the bounds (every operand in ``[2**-300, 2**300]``, or a zero that decides the test alone). A
# run keeps a point only while every step before it met these conditions (the binade, no tie,
# the margin); otherwise it starts from its end, as without a point. And it keeps the block
# nearest the change among those whose sum is within half the binade's room above ``S0``
# (``S_g <= S0 + (top - S0) / 2``; the first it may keep if none is): the pseudo-count grows at
# every event, and a point with room left still serves the next events once ``S0`` nears ``top``.
#
# They live in ``runs``, a small float64 scratch apart from the state arrays (never saved,
# compared or merged; a calibrator makes it afresh, unset, whenever it packs its state):
# RUN_STAMP is ``sf[SF_N_LEARNED]`` when a learn or a rebuild that keeps them last finished, so a
# learned event that reached the state through kernels without the scratch (whose refreshes
# do not keep the points) is noticed by the count and the points are dropped. A ``runs`` shorter
# than RUNS_SIZE (``pf[:0]``) keeps none: every refresh starts both runs from their ends.
RUN_STAMP = 0  # the learned-event count the points are current at (-1: none)
RUN_LEFT = 1  # the left run's block (-1: unset), then its two sums (under decay, P less S0)
RUN_LEFT_P = 2
RUN_LEFT_N = 3
RUN_RIGHT = 4  # the right run's, likewise (under decay, N less S0)
RUN_RIGHT_P = 5
RUN_RIGHT_N = 6
RUN_LEFT_BASE = 7  # under decay: the left run's S0 at the last refresh (its points' at most), the binade's top
RUN_LEFT_TOP = 8
RUN_RIGHT_BASE = 9  # the right run's, likewise
RUN_RIGHT_TOP = 10
# Under decay, the stored unit at the clock of the event just learned, ``2**((clock - t0) /
# half_life)``, as the learn kernel computes it (the power the window's addition computes too,
# so one evaluation serves both) for the refresh that follows it, which reads it in place of
# ``stored_unit`` (the same expression of the same numbers: the same bits) and clears it to 0
# (absent: the refresh computes it).
RUN_UNIT = 11
RUNS_SIZE = 12
_MARGIN_UP = 1.0 + _BELOW_MARGIN  # a pooling test passed by the margin: one side >= the other times this

# A scratch of ``runs_size(B)`` values keeps, without decay, a resume point at *every* block a
# run reached rather than one: the run's two sums as it reached the block (before its pooling
# test), at ``REC_HEADER + 2 g`` for the left run and ``REC_HEADER + 2 B + 2 g`` for the right one.
# The left run's records hold at every block first knot in ``head < g <= REC_LEFT_LIM``, the right
# run's at every one in ``REC_RIGHT_LIM <= g < tail``: a refresh first narrows both ranges to the
# blocks left of the lowest change (right of the highest) since the last refresh, whose first
# knots and sums are those the records were taken over, then resumes each run at the recorded
# block nearest the change and records every block it reaches from there. Any point is as good
# as the single one above (the same numbers, then the same additions and tests), and the nearest
# one is always at hand, where a single point is often right of the next change. REC_STAMP is the
# learned-event count the records are current at, as RUN_STAMP for the points: events learned
# through a shorter scratch (the river face's and the composites' kernels keep the single points
# alone) drop the records. Under decay a record holds the left run's P less S0 (the right run's N
# less S0), as a point does, and is kept at every block a run reaches while the conditions of a
# point hold (the binade, no tie, the margin), with S0 and the binade's top shared by all of them
# (``RUN_*_BASE``, ``RUN_*_TOP``): S0 only grows between refreshes while the first block is unchanged,
# so a record kept at an earlier refresh serves any later S0 in the same binade whose sum stays in
# it (a refresh that finds the nearest record's sum out of the binade steps back to an earlier one).
# The single points are kept beside them.
REC_STAMP = 12
REC_LEFT_LIM = 13  # the last left-run block with a record (-1: none)
REC_RIGHT_LIM = 14  # the first right-run block with a record (B: none)
REC_HEADER = 16


def runs_size(n_buckets: int) -> int:
    """The size of an end-run scratch that keeps a resume point at every block (see above)."""
    return REC_HEADER + 4 * n_buckets


def unset_runs(n_buckets: int = 0) -> np.ndarray:
    """A fresh end-run scratch with no resume point (see "the end runs' resume points"); with
    ``n_buckets``, one that keeps a point at every block a run reaches."""
    runs = np.zeros(runs_size(n_buckets) if n_buckets > 0 else RUNS_SIZE)
    runs[RUN_STAMP] = runs[RUN_LEFT] = runs[RUN_RIGHT] = -1.0
    if n_buckets > 0:
        runs[REC_STAMP] = runs[REC_LEFT_LIM] = -1.0
        runs[REC_RIGHT_LIM] = n_buckets
    return runs


# The end runs' blocks in order. Over the prior's row (``PI_KNOTS`` 0: every bucket a knot, most
# blocks one bucket wide) the next block's first knot is found by scanning the owners bucket by
# bucket (a block's first knot owns itself; the buckets after it up to the next block's first are
# its own) rather than by its link: the scan's reads do not wait for the previous block's, so a
# run's walk goes at the pace of its additions, not of a chain of dependent loads.


@jit_noalloc(forceinline=True)
def _block_after(pi, f, scan):
    """The first knot of the block after the block ``f`` (-1: none); ``scan``: by the owners."""
    if scan:
        end = pi[PI_LAST]
        j = f + 1
        while j <= end and pi[OWNER + _PI_RECORD * j] != j:
            j += 1
        return j if j <= end else np.int64(-1)
    return pi[BNEXT + _PI_RECORD * f]


@jit_noalloc(forceinline=True)
def _block_before(pi, f, scan):
    """The first knot of the block before the block ``f`` (``f`` not the first block)."""
    if scan:
        j = f - 1
        while pi[OWNER + _PI_RECORD * j] != j:
            j -= 1
        return j
    return pi[BPREV + _PI_RECORD * f]


@jit_noalloc(forceinline=True)
def _left_run_on(pf, pi, lp, ln, left_last, nxt, scan):
    """The left run's walk from the block ``nxt`` on, where no resume point is kept: the loop of
    :func:`pav_refresh_extremes_inplace`, ``(lp, ln, left_last, nxt)`` where it stops."""
    while nxt != -1:
        p = pf[BPOS + _PF_RECORD * nxt]
        n = pf[BNEG + _PF_RECORD * nxt]
        if not lp * (p + n) >= p * (lp + ln):
            break
        lp = lp + p
        ln = ln + n
        left_last = nxt
        nxt = _block_after(pi, nxt, scan)
    return lp, ln, left_last, nxt


@jit_noalloc(forceinline=True)
def _right_run_on(pf, pi, rp, rn, prv, left_last, scan):
    """The right run's, likewise, down to the block after ``left_last``: ``(rp, rn, prv)``."""
    while prv != left_last:
        p = pf[BPOS + _PF_RECORD * prv]
        n = pf[BNEG + _PF_RECORD * prv]
        if not p * (rp + rn) >= rp * (p + n):
            break
        rp = p + rp
        rn = n + rn
        prv = _block_before(pi, prv, scan)
    return rp, rn, prv


@jit_noalloc(forceinline=True)
def _binade_of(base, kept_top):
    """Under decay, a run's first sum ``base``: ``(ok, top, half_u, room)``: whether points may be
    kept (``base`` in the safe range), the top of its binade ``[top / 2, top)`` (``kept_top``, the
    last refresh's, if ``base`` is in it), half the binade's spacing ``2**-53 top``, and the bound
    a single point's sum stays within, half the binade's room above ``base``."""
    if not _SAFE_LOW <= base <= _SAFE_HIGH:
        return False, 0.0, 0.0, math.inf
    top = kept_top
    if not 0.5 * top <= base < top:
        top = math.ldexp(1.0, math.frexp(base)[1])
    return True, top, top * 2.0**-54, base + 0.5 * (top - base)


@jit_noalloc
def pav_refresh_extremes_inplace(sf, pf, pi, runs):
    """Recompute the finite-LLR clip values and the inverse prior odds (BOSARIS pseudo-counts).

    Each end run resumes at its point in ``runs`` when the blocks it summed are unchanged (and,
    under decay, the pseudo-count's sum allows it: see above), else starts from its end; either
    way the values are those of a refresh from the ends, bit for bit. (The points are read and
    written out here: helpers would be kernels of their own to compile.)"""
    B = pi[PI_B]
    kind = sf[SF_KIND]
    decay = (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME)
    keep = runs.shape[0] >= RUNS_SIZE
    unit = runs[RUN_UNIT] if keep and runs[RUN_UNIT] > 0.0 else stored_unit(sf, kind)  # see RUN_UNIT
    if keep:
        runs[RUN_UNIT] = 0.0
    c = pf[PF_PSEUDO] * unit
    pf[PF_PRIOR_ODDS_INV] = _prior_odds_inv(sf, c)
    head = pi[PI_HEAD]
    chg_lo = pi[PI_CHG_LO]
    chg_hi = pi[PI_CHG_HI]
    pi[PI_CHG_LO], pi[PI_CHG_HI] = B, -1  # the values are now current: no pending change
    pi[PI_DEP_LO], pi[PI_DEP_HI] = B, -1  # until shown otherwise, any change may move the clip values
    scan = pi[PI_KNOTS] == 0  # every bucket a knot: the blocks found by their owners (see ``_block_after``)
    rec = runs.shape[0] >= REC_HEADER + 4 * B  # a record at every block reached (under decay, in the binade)
    RL = REC_HEADER
    RR = REC_HEADER + 2 * B
    g_left = g_right = np.int64(-1)  # the points (-1: unset)
    if keep:
        if 0.0 <= runs[RUN_LEFT] < B:
            g_left = np.int64(runs[RUN_LEFT])
        if 0.0 <= runs[RUN_RIGHT] < B:
            g_right = np.int64(runs[RUN_RIGHT])
        runs[RUN_LEFT] = -1.0
        runs[RUN_RIGHT] = -1.0
    lim_left = np.int64(-1)  # the records kept: left of the lowest change, right of the highest
    lim_right = B
    if rec and runs[REC_STAMP] == sf[SF_N_LEARNED]:  # (else events were learned without them)
        lim_left = np.int64(runs[REC_LEFT_LIM])
        lim_right = np.int64(runs[REC_RIGHT_LIM])
        if chg_lo - 1 < lim_left:
            lim_left = chg_lo - 1
        if chg_hi + 1 > lim_right:
            lim_right = chg_hi + 1
    if rec:
        runs[REC_LEFT_LIM] = -1.0  # written again below, where the runs are known
        runs[REC_RIGHT_LIM] = B
        runs[REC_STAMP] = sf[SF_N_LEARNED]
    elif runs.shape[0] >= REC_HEADER:  # a scratch too short for its records keeps none
        runs[REC_LEFT_LIM] = -1.0
        runs[REC_RIGHT_LIM] = B
    if head == -1:
        pf[PF_LO] = 0.5
        pf[PF_HI] = 0.5
        return
    # left run: the first block plus the pseudo-positive, pooled rightwards while violating; it
    # resumes at g_left when no block before g_left changed and g_left still starts a block
    base = pf[BPOS + _PF_RECORD * head] + c
    ok, top, half_u, room = True, 0.0, 0.0, math.inf  # (decay: see ``_binade_of``)
    if decay:
        ok, top, half_u, room = _binade_of(base, runs[RUN_LEFT_TOP] if keep else 0.0)
    lp = base
    if rec:  # the recorded block nearest the lowest change: the block holding bucket lim_left
        g_left = pi[OWNER + _PI_RECORD * lim_left] if head < lim_left <= pi[PI_LAST] else np.int64(-1)
        while decay and ok and head < g_left and not base + runs[RL + 2 * g_left] < top:  # (out of the binade)
            g_left = pi[BPREV + _PI_RECORD * g_left]
    resume = head < g_left <= chg_lo and g_left <= pi[PI_LAST] and pi[OWNER + _PI_RECORD * g_left] == g_left
    if resume and rec:  # read below as a single point's
        runs[RUN_LEFT_P] = runs[RL + 2 * g_left]
        runs[RUN_LEFT_N] = runs[RL + 2 * g_left + 1]
    if resume and decay:
        lp = base + runs[RUN_LEFT_P]
        resume = ok and runs[RUN_LEFT_BASE] <= base and runs[RUN_LEFT_TOP] == top and lp < top
    if resume:
        if not decay:
            lp = runs[RUN_LEFT_P]
        ln = runs[RUN_LEFT_N]
        left_last = pi[BPREV + _PI_RECORD * g_left]
        nxt = g_left
    else:
        lp = base
        ln = pf[BNEG + _PF_RECORD * head]
        left_last = head
        nxt = pi[BNEXT + _PI_RECORD * head]
    cg, cp, cn = np.int64(-1), 0.0, 0.0  # the new point: the last block reached at or before chg_lo
    last_rec = np.int64(-1)
    while nxt != -1 and ok and (rec or (nxt <= chg_lo and (lp <= room or cg == -1))):  # (else no point past it)
        if rec:  # (exact under decay: lp and base share a binade)
            runs[RL + 2 * nxt], runs[RL + 2 * nxt + 1] = lp - base if decay else lp, ln
            last_rec = nxt
        if (decay or not rec) and nxt <= chg_lo and (lp <= room or cg == -1):  # (under decay, kept beside the records)
            cg, cp, cn = nxt, lp, ln
        p = pf[BPOS + _PF_RECORD * nxt]
        n = pf[BNEG + _PF_RECORD * nxt]
        a = p + n
        x = lp * a
        t = p * (lp + ln)
        if not x >= t:  # ``_violates``, written out (a call per block)
            break
        if decay and ok and (rec or (nxt < chg_lo and (lp <= room or cg == -1))):  # (else no later point)
            s = lp + p
            ok = s < top and abs(p - (s - lp)) != half_u
            if ok and p != 0.0:
                ok = p >= _SAFE_LOW and a <= _SAFE_HIGH and lp + ln <= _SAFE_HIGH and x >= t * _MARGIN_UP
        lp = lp + p
        ln = ln + n
        left_last = nxt
        nxt = _block_after(pi, nxt, scan)
    lp, ln, left_last, nxt = _left_run_on(pf, pi, lp, ln, left_last, nxt, scan)
    if keep and cg != -1:
        runs[RUN_LEFT] = cg
        runs[RUN_LEFT_P] = cp - base if decay else cp  # exact under decay: cp and base share a binade
        runs[RUN_LEFT_N] = cn
    if keep:  # kept with or without a point: the next refresh starts from the binade
        runs[RUN_LEFT_TOP], runs[RUN_LEFT_BASE] = top, base
    if rec:  # the last block with its record (without decay, the last reached: the loop writes it before its test)
        runs[REC_LEFT_LIM] = last_rec
    if nxt == -1:  # everything pooled with the pseudo-positive; add the pseudo-negative
        v = lp / (lp + (ln + c))  # the rate P / (P + N) of (lp, ln + c)
        pf[PF_LO] = v
        pf[PF_HI] = v
        return
    # right run: the last block plus the pseudo-negative, pooled leftwards while violating; it
    # resumes at g_right when no block after g_right changed, as the left run
    tail = pi[PI_TAIL]
    base = pf[BNEG + _PF_RECORD * tail] + c
    ok, top, half_u, room = True, 0.0, 0.0, math.inf
    if decay:
        ok, top, half_u, room = _binade_of(base, runs[RUN_RIGHT_TOP] if keep else 0.0)
    rn = base
    if rec:  # the recorded block nearest the highest change: the first at or after lim_right
        g_right = np.int64(-1)
        if left_last < lim_right < tail:
            g_right = pi[OWNER + _PI_RECORD * lim_right]
            if g_right != lim_right:
                g_right = pi[BNEXT + _PI_RECORD * g_right]
        while decay and ok and left_last < g_right < tail and not base + runs[RR + 2 * g_right + 1] < top:
            g_right = pi[BNEXT + _PI_RECORD * g_right]
    resume = left_last < g_right < tail and chg_hi <= g_right and pi[OWNER + _PI_RECORD * g_right] == g_right
    if resume and rec:  # read below as a single point's
        runs[RUN_RIGHT_P] = runs[RR + 2 * g_right]
        runs[RUN_RIGHT_N] = runs[RR + 2 * g_right + 1]
    if resume and decay:
        rn = base + runs[RUN_RIGHT_N]
        resume = ok and runs[RUN_RIGHT_BASE] <= base and runs[RUN_RIGHT_TOP] == top and rn < top
    if resume:
        rp = runs[RUN_RIGHT_P]
        if not decay:
            rn = runs[RUN_RIGHT_N]
        prv = g_right
    else:
        rp = pf[BPOS + _PF_RECORD * tail]
        rn = base
        prv = pi[BPREV + _PI_RECORD * tail]
    cg, cp, cn = np.int64(-1), 0.0, 0.0  # the new point: the last block reached at or after chg_hi
    last_rec = B
    while prv != left_last and ok and (rec or (prv >= chg_hi and (rn <= room or cg == -1))):
        if rec:
            runs[RR + 2 * prv], runs[RR + 2 * prv + 1] = rp, rn - base if decay else rn
            last_rec = prv
        if (decay or not rec) and prv >= chg_hi and (rn <= room or cg == -1):
            cg, cp, cn = prv, rp, rn
        p = pf[BPOS + _PF_RECORD * prv]
        n = pf[BNEG + _PF_RECORD * prv]
        a = p + n
        x = p * (rp + rn)
        t = rp * a
        if not x >= t:
            break
        if decay and ok and (rec or (prv > chg_hi and (rn <= room or cg == -1))):
            s = n + rn
            ok = s < top and abs(n - (s - rn)) != half_u
            if ok and rp != 0.0 and p != 0.0:
                ok = rp >= _SAFE_LOW and p >= _SAFE_LOW and a <= _SAFE_HIGH and rp + rn <= _SAFE_HIGH
                ok = ok and x >= t * _MARGIN_UP
        rp = p + rp
        rn = n + rn
        prv = _block_before(pi, prv, scan)
    rp, rn, prv = _right_run_on(pf, pi, rp, rn, prv, left_last, scan)
    if keep and cg != -1:
        runs[RUN_RIGHT] = cg
        runs[RUN_RIGHT_P] = cp
        runs[RUN_RIGHT_N] = cn - base if decay else cn
    if keep:
        runs[RUN_RIGHT_TOP], runs[RUN_RIGHT_BASE] = top, base
    if rec:  # the last block with its record (without decay: where the loop broke, or the one after left_last)
        runs[REC_RIGHT_LIM] = last_rec
    lo = lp / (lp + ln)
    hi = rp / (rp + rn)
    if prv == left_last and _violates(lp, ln, rp, rn):  # the two runs meet and violate: one block
        v = (lp + rp) / ((lp + rp) + (ln + rn))
        lo = v
        hi = v
    pf[PF_LO] = lo
    pf[PF_HI] = hi
    if prv != left_last:  # two separate runs: the blocks strictly between them were not read
        pi[PI_DEP_LO] = pi[BEND + _PI_RECORD * nxt]
        pi[PI_DEP_HI] = prv


@jit_noalloc(forceinline=True)
def _prior_odds_inv(sf, c):
    """Inverse prior odds of the finite LLR, ``(T0 + c) / (T1 + c)``; 0 (never those odds, as
    ``c > 0``) while the window holds no weight: the LLR is then 0, whatever pseudo-counts the
    score prior adds to the blocks."""
    if sf[SF_T_POS] + sf[SF_T_NEG] == 0.0:
        return 0.0
    return (sf[SF_T_NEG] + c) / (sf[SF_T_POS] + c)


@jit_noalloc(forceinline=True)
def pav_update_extremes_inplace(sf, pf, pi, kind, runs):
    """After learning: the finite-LLR values, recomputed only when their inputs may have changed.

    Without decay the pseudo-count is constant in stored units, so the clip values depend only
    on the blocks the last refresh read (up to ``PI_DEP_LO``, from ``PI_DEP_HI``); when the
    repairs since then (``PI_CHG_LO``..``PI_CHG_HI``) changed none of them, a refresh would read
    the same numbers and return the same values. Only the prior moves; it is recomputed by
    the same expression as in :func:`pav_refresh_extremes_inplace`.
    """
    unchanged = pi[PI_CHG_LO] > pi[PI_DEP_LO] and pi[PI_CHG_HI] < pi[PI_DEP_HI]
    if unchanged and kind != KIND_DECAY_EVENTS and kind != KIND_DECAY_TIME:
        pi[PI_CHG_LO] = pi[PI_B]
        pi[PI_CHG_HI] = -1
        pf[PF_PRIOR_ODDS_INV] = _prior_odds_inv(sf, pf[PF_PSEUDO] * stored_unit(sf, kind))
    else:
        pav_refresh_extremes_inplace(sf, pf, pi, runs)
    if runs.shape[0] >= RUNS_SIZE:
        runs[RUN_STAMP] = sf[SF_N_LEARNED]  # the end runs' resume points are current
    if runs.shape[0] >= REC_HEADER:
        runs[REC_STAMP] = sf[SF_N_LEARNED]


@jit_noalloc(forceinline=True)
def _n_buckets(pf):
    """B, from the length of ``pf`` (:func:`pav_state_sizes`)."""
    return (pf.shape[0] - PF_HEADER - PR_HEADER) // (_PF_RECORD + _STACK_RECORD + 1 + 2)


@jit_noalloc(forceinline=True)
def _fitted_at(pf, j):
    """Fitted value of bucket ``j`` (between the first and the last knot): its block's rate,
    stored at the block's first knot, or in a gap the interpolated value stored at ``j``."""
    f = pf[FIT_OWNER + _PF_RECORD * j]
    return pf[FIT + _PF_RECORD * (j if f < 0.0 else np.int64(f))]


@jit_noalloc(forceinline=True)
def pav_predict_one(pf, b, s):
    """Calibrated probability of score ``s`` in bucket ``b``.

    Outside the span of the knots (first to last non-empty bucket) the fit is flat.
    """
    first = np.int64(pf[PF_HEAD])
    if first == -1:
        if pf[PF_PROBABILITY_INPUTS] > 0.5:
            return 1.0 if s > 1.0 else (0.0 if s < 0.0 else s)
        return 0.5
    last = np.int64(pf[PF_LAST])
    if pf[PF_LINEAR] < 0.5:
        return _fitted_at(pf, last if b > last else (first if b < first else b))
    j = b if s >= pf[CEN + _PF_RECORD * b] else b - 1
    if j < first:
        return _fitted_at(pf, first)
    if j >= last:
        return _fitted_at(pf, last)
    lo = _fitted_at(pf, j)
    hi = _fitted_at(pf, j + 1)
    p = lo + (hi - lo) * ((s - pf[CEN + _PF_RECORD * j]) / (pf[CEN + _PF_RECORD * (j + 1)] - pf[CEN + _PF_RECORD * j]))
    p = lo if lo > p else p  # clipped as min(max(p, lo), hi)
    return hi if hi < p else p


@jit_noalloc(forceinline=True)
def pav_proba_out(pf, p):
    """The probability served for a raw PAV value ``p``: ``p`` itself, or under the finite rule
    ``clip(p, lo, hi)`` (the augmented PAV's value, never exactly 0 or 1; before any weight the
    identity fallback's score within ``[2**-53, 1 - 2**-53]``, both classes' sides inside (0, 1))."""
    if pf[PF_FINITE_PROBA] > 0.5:
        lo = _NOT_SURE_LOW
        hi = _ONE_BELOW
        if pf[PF_HEAD] != -1.0:
            lo = pf[PF_LO]
            hi = pf[PF_HI]
        # min(max(p, lo), hi), NaN stays NaN; before any weight, the probability score itself
        # inside the open interval (0, 1)
        q = lo if lo > p else p
        return hi if hi < q else q
    return p


@jit_noalloc(forceinline=True)
def pav_llr_from_proba(pf, p):
    """Finite PAV-LLR for a score whose (raw) calibrated probability is ``p``.

    One logarithm of ``q / (1 - q)`` times the inverse prior odds; where that ratio is not a
    positive finite double (``q`` rounded to 1, when the window's weight dwarfs the pseudo-count
    by 2**53, or a product beyond the double range with extreme weights), the same value as a
    sum of logarithms with ``q`` kept below 1: finite for every accepted input.
    """
    v, ratio = _llr_ratio_or_value(pf, p)
    return math.log(v) if ratio else v


@jit_noalloc(forceinline=True)
def _llr_ratio_or_value(pf, p):
    """:func:`pav_llr_from_proba` up to its last logarithm: ``(r, True)`` where the LLR is
    ``log(r)``, else ``(llr, False)`` (0 while the window holds no weight, or the sum of
    logarithms)."""
    if pf[PF_HEAD] == -1.0 or pf[PF_PRIOR_ODDS_INV] == 0.0:
        return 0.0, False
    lo = pf[PF_LO]
    hi = pf[PF_HI]
    q = lo if lo > p else p  # min(max(p, lo), hi), as pav_proba_out
    q = hi if hi < q else q
    r = (q * pf[PF_PRIOR_ODDS_INV]) / (1.0 - q)
    if 0.0 < r < math.inf:
        return r, True
    q = _ONE_BELOW if q > _ONE_BELOW else q
    return (math.log(q) - math.log1p(-q)) + math.log(pf[PF_PRIOR_ODDS_INV]), False


# The logarithms of a prequential loop's LLRs. The loop stores each event's ratio ``r`` in
# ``out_llr`` and takes the logarithms of up to LOG_CHUNK stored ratios in one tight loop, whose
# calls to ``log`` run back to back, out of the per-event loop and its learning. Each output is
# ``log(r)`` of the same ``r``: the same bits.
LOG_CHUNK = 1024


@jit_noalloc(forceinline=True)
def pav_learn_one_inplace(sf, si, pf, pi, runs, b, y, w, t, kind):
    """Learn one event: expire what leaves the window, add the event, repair the blocks.

    ``kind`` is ``sf[SF_KIND]`` (read once by a loop of events: see ``histogram.stored_unit``);
    ``runs`` the end runs' scratch (see "the end runs' resume points"; ``pf[:0]``: none).
    """
    # the end runs' resume points are dropped unless current (``pav_update_extremes_inplace``
    # stamps them; written out: a helper would be one more kernel to compile)
    if runs.shape[0] >= RUNS_SIZE and runs[RUN_STAMP] != sf[SF_N_LEARNED]:
        runs[RUN_LEFT] = -1.0
        runs[RUN_RIGHT] = -1.0
    if runs.shape[0] >= REC_HEADER:
        if runs[REC_STAMP] != sf[SF_N_LEARNED]:
            runs[REC_LEFT_LIM] = -1.0
            runs[REC_RIGHT_LIM] = pi[PI_B]
        runs[REC_STAMP] = sf[SF_N_LEARNED] + 1.0  # the count after this event: its refresh finds them current
    clock = window_clock(sf, t, kind)
    if pi[PI_INTEGRAL] == 1 and (w != np.floor(w) or (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME)):
        pi[PI_INTEGRAL] = 0
        _rebuild_blocks_inplace(sf, pf, pi)  # the same blocks, and checkpoints (kept from now on)
    B = pi[PI_B]
    o = _prior_offset(B)
    if pf[o + PR_KAPPA] > 0.0:
        _prior_learn_one_inplace(sf, si, pf, pi, runs, b, y, w, clock, kind, o)
        return
    total = sf[SF_T_POS] + sf[SF_T_NEG] + w  # an upper bound of the total during this update
    pi[PI_EXACT] = 1 if pi[PI_INTEGRAL] == 1 and total < EXACT_TOTAL else 0
    NEG = SF_HEADER + B
    RING_B = SI_HEADER + 2 * B
    while si[SI_RING_COUNT] > 0:
        gone = si[RING_B + si[SI_RING_HEAD]]  # the bucket of the oldest event, if it leaves
        old_p = sf[SF_HEADER + gone]
        old_n = sf[NEG + gone]
        if window_expire_next_inplace(sf, si, clock, kind) < 0:
            break
        pav_bucket_delta_inplace(sf, _H0, pf, pi, gone, old_p, old_n)
    old_p = sf[SF_HEADER + b]
    old_n = sf[NEG + b]
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        # the addition's own power, computed first in the same branch so that the compiler
        # computes it once (see RUN_UNIT)
        unit = math.pow(2.0, (clock - sf[SF_T0]) / sf[SF_HALF_LIFE])
        renormalised = window_add_inplace(sf, si, b, y, w, clock, kind)
        if not renormalised and runs.shape[0] >= RUNS_SIZE:
            runs[RUN_UNIT] = unit
    else:
        renormalised = window_add_inplace(sf, si, b, y, w, clock, kind)
    if renormalised:
        _resweep_inplace(sf, _H0, pf, pi, _ALL, _SPARSE)  # rebuild everything
    else:
        pav_bucket_delta_inplace(sf, _H0, pf, pi, b, old_p, old_n)
    if sf[SF_N_LEARNED] >= pf[o + PR_NEXT]:
        pav_prior_refresh_inplace(sf, si, pf, pi, kind)
    pav_update_extremes_inplace(sf, pf, pi, kind, runs)


@jit_noalloc(forceinline=True)
def _prior_learn_one_inplace(sf, si, pf, pi, runs, b, y, w, clock, kind, o):
    """:func:`pav_learn_one_inplace` with a prior of strength above 0: the blocks are repaired
    over the augmented row (never whole numbers: the sweep resumes, without the exact
    shortcuts), whose touched buckets are recomputed from the histogram first."""
    pi[PI_EXACT] = 0
    B = pi[PI_B]
    RING_B = SI_HEADER + 2 * B
    AUG = o + PR_HEADER
    h0 = np.int64(AUG)
    while si[SI_RING_COUNT] > 0:
        gone = si[RING_B + si[SI_RING_HEAD]]
        old_p = pf[AUG + gone]
        old_n = pf[AUG + B + gone]
        if window_expire_next_inplace(sf, si, clock, kind) < 0:
            break
        _augment_bucket_inplace(sf, pf, o, B, gone)
        _bucket_delta_inplace(pf, h0, pf, pi, gone, old_p, old_n, _DENSE)
    old_p = pf[AUG + b]
    old_n = pf[AUG + B + b]
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):  # as in ``pav_learn_one_inplace``
        unit = math.pow(2.0, (clock - sf[SF_T0]) / sf[SF_HALF_LIFE])
        renormalised = window_add_inplace(sf, si, b, y, w, clock, kind)
        if not renormalised and runs.shape[0] >= RUNS_SIZE:
            runs[RUN_UNIT] = unit
    else:
        renormalised = window_add_inplace(sf, si, b, y, w, clock, kind)
    if sf[SF_N_LEARNED] >= pf[o + PR_NEXT]:
        pav_prior_refresh_inplace(sf, si, pf, pi, kind)
    elif renormalised:
        _augment_all_inplace(sf, pf, o, B)
        _resweep_inplace(pf, h0, pf, pi, _ALL, _DENSE)
    else:
        _augment_bucket_inplace(sf, pf, o, B, b)
        _bucket_delta_inplace(pf, h0, pf, pi, b, old_p, old_n, _DENSE)
    pav_update_extremes_inplace(sf, pf, pi, kind, runs)


@jit_noalloc(forceinline=True)
def _augment_bucket_inplace(sf, pf, o, B, k):
    """Bucket ``k`` of the augmented row: the histogram's weights plus ``kappa (n_k + floor)``
    pseudo-events at the prior's rate (:mod:`streamcal._kernels.prior`)."""
    p = sf[SF_HEADER + k]
    n = sf[SF_HEADER + B + k]
    r = prior_rate(pf[CEN + _PF_RECORD * k], pf[o + PR_RATE], pf[o + PR_MODE] == 1.0)
    m = pf[o + PR_KAPPA] * ((p + n) + pf[o + PR_FLOOR])
    pf[o + PR_HEADER + k] = p + m * r
    pf[o + PR_HEADER + B + k] = n + m * (1.0 - r)


@jit_noalloc
def _augment_all_inplace(sf, pf, o, B):
    """:func:`_augment_bucket_inplace` for every bucket, as whole-row operations that write into
    the row (and into the stack scratch, which every sweep writes before it reads): the same
    operations as the per-bucket expression, each one correctly rounded elementwise, so the
    same bits; the interpreted tier then runs a few numpy calls, not a Python loop per bucket.
    """
    kappa = pf[o + PR_KAPPA]
    floor = pf[o + PR_FLOOR]
    pos = sf[SF_HEADER : SF_HEADER + B]
    neg = sf[SF_HEADER + B : SF_HEADER + 2 * B]
    row_pos = pf[o + PR_HEADER : o + PR_HEADER + B]
    row_neg = pf[o + PR_HEADER + B : o + PR_HEADER + 2 * B]
    rate = pf[PF_HEADER + _PF_RECORD * B : PF_HEADER + (_PF_RECORD + 1) * B]  # stack scratch
    if pf[o + PR_MODE] == 1.0:  # ``prior_rate``: the centre, kept inside (RATE_LOW, RATE_HIGH)
        # fmax / fmin: maximum / minimum for these finite centres, with the output passed by
        # position as numba needs it (numpy deprecates that for maximum and minimum only)
        np.fmax(pf[CEN : CEN + _PF_RECORD * B : _PF_RECORD], RATE_LOW, rate)
        np.fmin(rate, RATE_HIGH, rate)
    else:
        rate[:] = pf[o + PR_RATE]
    np.add(pos, neg, row_neg)  # m = kappa * ((p + n) + floor), in row_neg for now
    np.add(row_neg, floor, row_neg)
    np.multiply(row_neg, kappa, row_neg)
    np.multiply(row_neg, rate, row_pos)  # p + m * r
    np.add(pos, row_pos, row_pos)
    np.subtract(1.0, rate, rate)  # n + m * (1 - r)
    np.multiply(row_neg, rate, row_neg)
    np.add(neg, row_neg, row_neg)


@jit_noalloc
def _prior_strength_inplace(sf, si, pf, kind):
    """Refit the prior's strength (and base rate) to the histogram as it is now; schedule the
    next refresh. Writes the prior's header only."""
    B = _n_buckets(pf)
    o = _prior_offset(B)
    unit = stored_unit(sf, kind)
    c = pf[PF_PSEUDO] * unit
    base_rate = (sf[SF_T_POS] + c) / ((sf[SF_T_POS] + sf[SF_T_NEG]) + 2.0 * c)
    probability_inputs = pf[o + PR_MODE] == 1.0
    start = pf[o + PR_A : o + PR_B + 1]
    # the stack scratch (written before it is read by every sweep) lists the buckets with data
    # for the fit's passes when they fit in it
    listed = pf[PF_HEADER + _PF_RECORD * B : PF_HEADER + (_PF_RECORD + _STACK_RECORD) * B]
    kappa = prior_strength_listed(
        sf, _H0, B, unit, pf, np.int64(CEN), np.int64(_PF_RECORD), base_rate, probability_inputs, start, listed
    )
    pf[o + PR_KAPPA] = kappa
    if kappa == 0.0:  # the augmented row is not read: kept at zeros, a function of the state
        for k in range(o + PR_HEADER, o + PR_HEADER + 2 * B):
            pf[k] = 0.0
    pf[o + PR_RATE] = base_rate
    pf[o + PR_FLOOR] = unit
    n = sf[SF_N_LEARNED]
    # the window's events, whatever their weights, so that small weights do not bring a refit at
    # every event: a count or time window's events and an unbounded window's; under decay their
    # decayed count (one event's worth of weight each): by events in closed form, by time as the
    # histogram keeps it. A window that forgets refits sooner.
    if kind == KIND_DECAY_TIME:
        held = (sf[SF_EVENTS_POS] + sf[SF_EVENTS_NEG]) / unit
    elif kind == KIND_DECAY_EVENTS:
        r = math.log(2.0) / sf[SF_HALF_LIFE]
        held = math.expm1(-float(si[SI_N_POS] + si[SI_N_NEG]) * r) / math.expm1(-r)  # sum of 2 ** (-age / half-life)
    else:
        held = float(si[SI_N_POS] + si[SI_N_NEG])
    held = n if held > n else held
    # half the window renewed; once the data have refuted the prior, the whole window
    step = math.floor((1.0 if kappa == 0.0 else 0.5) * held)
    step = 1.0 if step < 1.0 else (PRIOR_REFRESH_EVERY if step > PRIOR_REFRESH_EVERY else step)
    pf[o + PR_NEXT] = n + step


@jit_noalloc
def pav_prior_refresh_inplace(sf, si, pf, pi, kind):
    """Refit the prior's strength and rebuild the blocks over the new augmented row."""
    _prior_strength_inplace(sf, si, pf, kind)
    _rebuild_blocks_inplace(sf, pf, pi)


@jit_noalloc
def _rebuild_blocks_inplace(sf, pf, pi):
    """A full sweep over the augmented row (the histogram itself when the strength is 0)."""
    B = pi[PI_B]
    o = _prior_offset(B)
    if pf[o + PR_KAPPA] > 0.0:
        _augment_all_inplace(sf, pf, o, B)
        _resweep_inplace(pf, np.int64(o + PR_HEADER), pf, pi, _ALL, _DENSE)
    else:
        _resweep_inplace(sf, _H0, pf, pi, _ALL, _SPARSE)


@jit_noalloc
def pav_rebuild_inplace(sf, si, pf, pi):
    """Rebuild the blocks from scratch from the current histogram (a full sweep over it plus the
    prior's pseudo-counts at the current strength), without the end runs' scratch."""
    pav_rebuild_runs_inplace(sf, si, pf, pi, pf[:0])


@jit_noalloc
def pav_rebuild_runs_inplace(sf, si, pf, pi, runs):
    """:func:`pav_rebuild_inplace`; the end runs' scratch ``runs`` is dropped, then holds the
    refresh's resume points."""
    _rebuild_blocks_inplace(sf, pf, pi)
    if runs.shape[0] >= RUNS_SIZE:
        runs[RUN_LEFT] = -1.0
        runs[RUN_RIGHT] = -1.0
    pav_refresh_extremes_inplace(sf, pf, pi, runs)
    if runs.shape[0] >= RUNS_SIZE:
        runs[RUN_STAMP] = sf[SF_N_LEARNED]  # the points are current
    if runs.shape[0] >= REC_HEADER:
        runs[REC_STAMP] = sf[SF_N_LEARNED]


@jit_noalloc
def pav_refit_prior_and_rebuild_inplace(sf, si, pf, pi, runs):
    """:func:`pav_rebuild_runs_inplace`, after refitting the prior's strength if a refresh is due."""
    if sf[SF_N_LEARNED] >= pf[_prior_offset(pi[PI_B]) + PR_NEXT]:
        _prior_strength_inplace(sf, si, pf, sf[SF_KIND])
    pav_rebuild_runs_inplace(sf, si, pf, pi, runs)


# A run of at least this many learn-only operations is learned into the histogram alone, then
# the blocks are rebuilt once (a full sweep costs about as much as this many repairs).
LEARN_RUN_REBUILD = 64


@jit_noalloc
def pav_learn_run_inplace(sf, si, pf, pi, runs, buckets, labels, weights, times, ops, start, stop):
    """Learn the labels among ``start..stop-1`` (``ops & 1``) into the histogram, rebuild once.

    The same state as learning them one by one: the window's bookkeeping is the same calls
    in the same order (it never reads the blocks), and the blocks after any update equal a
    from-scratch sweep of the histogram, bit for bit, which is what the rebuild computes.
    """
    kind = sf[SF_KIND]
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        pi[PI_INTEGRAL] = 0
    o = _prior_offset(pi[PI_B])
    for i in range(start, stop):
        if ops[i] & 1:
            w = weights[i]
            if w != np.floor(w):
                pi[PI_INTEGRAL] = 0
            clock = window_clock(sf, times[i], kind)
            while window_expire_next_inplace(sf, si, clock, kind) >= 0:
                pass
            window_add_inplace(sf, si, buckets[i], labels[i], w, clock, kind)
            if sf[SF_N_LEARNED] >= pf[o + PR_NEXT]:  # the strength as the event-by-event loop sets it
                _prior_strength_inplace(sf, si, pf, kind)
    pi[PI_EXACT] = 0  # set again by the next learned event
    pav_rebuild_runs_inplace(sf, si, pf, pi, runs)


@jit_noalloc
def pav_process_inplace(sf, si, pf, pi, runs, buckets, scores, labels, weights, times, ops, out_p, out_llr):
    """Run an ordered sequence of operations; ``ops[i]``: 1 learn, 2 predict, 3 predict then learn.

    Predictions use the state before the event's own label; outputs of learn-only positions
    are left untouched. Long runs of learn-only operations (``update``, or many labels
    arriving between two predictions) are learned by :func:`pav_learn_run_inplace`.
    """
    n = buckets.shape[0]
    kind = sf[SF_KIND]  # constant: read once (see ``histogram.stored_unit``)
    # a NumPy zero, not ``0``: a first typing of the loop's ``pav_learn_run_inplace`` call would see
    # the literal alone and compile that kernel once more for it (``_H0``)
    i = np.int64(0)
    short_run_end = 0  # a run of learn-only operations too short to rebuild ends here
    while i < n:
        op = ops[i]
        if op == 1 and i >= short_run_end:
            j = i + 1
            while j < n and ops[j] == 1 and j - i < LEARN_RUN_REBUILD:
                j += 1
            if j - i >= LEARN_RUN_REBUILD:
                while j < n and ops[j] == 1:
                    j += 1
                pav_learn_run_inplace(sf, si, pf, pi, runs, buckets, labels, weights, times, ops, i, j)
                i = j
                continue
            short_run_end = j
        if op & 2:
            p = pav_predict_one(pf, buckets[i], scores[i])
            out_p[i] = pav_proba_out(pf, p)
            out_llr[i] = pav_llr_from_proba(pf, p)
        if op & 1:
            pav_learn_one_inplace(sf, si, pf, pi, runs, buckets[i], labels[i], weights[i], times[i], kind)
        i += 1


@jit_noalloc
def pav_prequential_inplace(sf, si, pf, pi, runs, buckets, scores, labels, weights, times, out_p, out_llr):
    """Predict each event with the state before its label, then learn it (``prequential``).

    :func:`pav_process_inplace` with every operation 3: the same calls in the same order, so
    the same outputs and state, bit for bit (the LLRs' logarithms run in chunks of events: see
    LOG_CHUNK). Without the operation codes and the search for runs of labels, the loop is
    shorter and compiles to faster code.
    """
    kind = sf[SF_KIND]  # constant: read once (see ``histogram.stored_unit``)
    n = buckets.shape[0]
    start = np.int64(0)  # the first event whose LLR is still its ratio (see LOG_CHUNK)
    for i in range(n):
        p = pav_predict_one(pf, buckets[i], scores[i])
        out_p[i] = pav_proba_out(pf, p)
        v, ratio = _llr_ratio_or_value(pf, p)
        out_llr[i] = v
        if not ratio or i + 1 - start >= LOG_CHUNK or i + 1 == n:
            # the waiting ratios get their logarithms (before an LLR stored as itself)
            for j in range(start, i + 1 if ratio else i):
                r = out_llr[j]
                # never taken: an exit from a loop that stores keeps compilers from vectorising
                # it, whose vector ``log`` (numba's SVML, where installed) may round unlike the
                # scalar one
                if not r > 0.0:
                    break
                out_llr[j] = math.log(r)
            start = i + 1
        pav_learn_one_inplace(sf, si, pf, pi, runs, buckets[i], labels[i], weights[i], times[i], kind)


@jit_noalloc
def pav_process_from_inplace(
    sf, si, pf, pi, runs, buckets, scores, labels, weights, times, ops, out_p, out_llr, start, stop
):
    """``pav_process_inplace`` on ``start..stop-1``, from the state before ``ops[0]``.

    The labels learned before ``start`` go into the histogram alone and the blocks are rebuilt
    once (:func:`pav_learn_run_inplace`), which gives the state that running ``ops[:start]``
    would: the operations from ``start`` on then produce the same outputs, bit for bit. Chunks
    of one sequence can so run on several threads, each from a copy of the initial state.
    """
    pav_learn_run_inplace(sf, si, pf, pi, runs, buckets, labels, weights, times, ops, np.int64(0), start)
    pav_process_inplace(
        sf, si, pf, pi, runs, buckets[start:stop], scores[start:stop], labels[start:stop], weights[start:stop],
        times[start:stop], ops[start:stop], out_p[start:stop], out_llr[start:stop],
    )


@jit_noalloc
def pav_predict_many(pf, buckets, scores, out_p, out_llr):
    """Probability and finite LLR for each score with the current state."""
    for i in range(buckets.shape[0]):
        p = pav_predict_one(pf, buckets[i], scores[i])
        out_p[i] = pav_proba_out(pf, p)
        out_llr[i] = pav_llr_from_proba(pf, p)


# ---------------------------------------------------------------- single-score entry points
# The river face calls these once per event through ``entry_point`` (no numba type dispatch);
# the score's bucket is found here, over the cuts kept in ``pf``.
#
# Packed state. Turning each array argument into a numba array is a large share of a
# river-face call. So the river face keeps ``sf``, ``si``, ``pf``
# and ``pi`` as views of one float64 buffer (the int64 ones reinterpret their bytes) and its
# entry points take that buffer alone: a header (the sections' offsets as floats, and the
# range of valid scores), then the four sections, then the end runs' scratch (``runs_size(B)``
# values, :func:`packed_runs`; the entry points keep the single points in its first ``RUNS_SIZE``).
# The entry points also check the score and the weight, which the
# river face's fast path would otherwise compare in Python.
#
# Busy mark. The entry points hold the GIL (``nogil=False``), so among Python threads each call
# is atomic. ``PACK_BUSY`` is nonzero while the calibrator's lock is held by code that changes
# or reads the state in several steps or with the GIL released (the array face, ring growth, the
# quantile warm-up); an entry point then changes nothing and refuses, and its caller retries
# under the lock (see ``PAVCalibrator``).
PACK_O_SI, PACK_O_PF, PACK_O_PI, PACK_END = 0, 1, 2, 3
PACK_SCORE_LOW, PACK_SCORE_HIGH = 4, 5
PACK_BUSY = 6
PACK_HEADER = 8


def pack_state(sf, si, pf, pi, score_low: float, score_high: float):
    """One float64 buffer holding copies of the four state arrays, and views of its sections.

    Returns ``(packed, sf, si, pf, pi)``; the views share the buffer's memory, so the array
    kernels (on the views) and the packed entry points (on the buffer) see one state. Scores
    outside ``[score_low, score_high]`` are refused by the packed entry points.
    """
    ends = np.cumsum([PACK_HEADER, sf.size, si.size, pf.size, pi.size])
    n_buckets = int(pi[PI_B])
    packed = np.zeros(int(ends[-1]) + runs_size(n_buckets), dtype=np.float64)
    packed[PACK_O_SI : PACK_END + 1] = ends[1:]
    packed[PACK_SCORE_LOW] = score_low
    packed[PACK_SCORE_HIGH] = score_high
    views = (
        packed[ends[0] : ends[1]],
        packed[ends[1] : ends[2]].view(np.int64),
        packed[ends[2] : ends[3]],
        packed[ends[3] : ends[4]].view(np.int64),
    )
    for view, array in zip(views, (sf, si, pf, pi), strict=True):
        view[:] = array
    packed[int(ends[-1]) :] = unset_runs(n_buckets)
    return (packed, *views)


def packed_runs(packed: np.ndarray) -> np.ndarray:
    """The end runs' scratch of a buffer packed by :func:`pack_state` (a view of its tail), with
    the records of every block (the per-event entry points use its first ``RUNS_SIZE`` values)."""
    end = int(packed[PACK_END])
    return packed[end:]


@jit_noalloc(inline="always")  # returns a view: numba inlines it (see ``_config``)
def _map_section(packed):
    return packed[int(packed[PACK_O_PF]) : int(packed[PACK_O_PI])]


@jit_noalloc(forceinline=True)
def _score_ok(packed, s):
    return packed[PACK_SCORE_LOW] <= s <= packed[PACK_SCORE_HIGH]  # False for NaN


@jit_noalloc(forceinline=True)
def pav_bucket_of(pf, s):
    """Bucket of score ``s`` over the cuts kept in ``pf`` (``histogram.bucket_of``, after the
    arithmetic guess of ``histogram.bucket_of_guessed``)."""
    B = _n_buckets(pf)
    return bucket_of_guessed(
        pf, _cuts_offset(B), B - 1, s, pf[PF_GRID_KIND], pf[PF_GRID_Z0], pf[PF_GRID_INV_STEP]
    )


@jit_noalloc(nogil=False)  # a per-event call: releasing the GIL would cost more than the kernel saves
def pav_learn_packed_inplace(packed, s, y, w, t):
    """Learn one event of score ``s`` (:func:`pav_learn_one_inplace` after the bucket search) on
    the state packed by :func:`pack_state`.

    Returns False, having changed nothing, when the state is marked busy, the score is outside
    the valid range or the weight outside ``[0, MAX_WEIGHT]`` (the caller's full checks then
    raise the error).
    """
    if not (packed[PACK_BUSY] == 0.0 and _score_ok(packed, s) and 0.0 <= w <= MAX_WEIGHT):
        return False
    o_si, o_pf = int(packed[PACK_O_SI]), int(packed[PACK_O_PF])
    o_pi, end = int(packed[PACK_O_PI]), int(packed[PACK_END])
    sf, si = packed[PACK_HEADER:o_si], packed[o_si:o_pf].view(np.int64)
    pf, pi = packed[o_pf:o_pi], packed[o_pi:end].view(np.int64)
    runs = packed[end : end + RUNS_SIZE]
    pav_learn_one_inplace(sf, si, pf, pi, runs, pav_bucket_of(pf, s), y, w, t, sf[SF_KIND])
    return True


@jit_noalloc(nogil=False)  # a per-event call: releasing the GIL would cost more than the kernel saves
def pav_predict_packed(packed, s):
    """Calibrated probability of score ``s``, as ``pav_predict_many`` computes it, on the state
    packed by :func:`pack_state`; -1.0 (never a probability) when the state is marked busy or
    the score is outside the valid range."""
    if not (packed[PACK_BUSY] == 0.0 and _score_ok(packed, s)):
        return -1.0
    pf = _map_section(packed)
    return pav_proba_out(pf, pav_predict_one(pf, pav_bucket_of(pf, s), s))


@jit_noalloc(nogil=False)  # a per-event call: releasing the GIL would cost more than the kernel saves
def pav_llr_packed(packed, s):
    """Finite PAV-LLR of score ``s``, as ``pav_predict_many`` computes it, on the state packed by
    :func:`pack_state`; NaN (never a finite LLR) when the state is marked busy or the score is
    outside the valid range."""
    if not (packed[PACK_BUSY] == 0.0 and _score_ok(packed, s)):
        return math.nan
    pf = _map_section(packed)
    return pav_llr_from_proba(pf, pav_predict_one(pf, pav_bucket_of(pf, s), s))
