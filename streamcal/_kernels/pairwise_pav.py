"""Streaming PAV pairs of a pairwise coupling calibrator, one compiled loop over a pair's events.

:class:`streamcal.multiclass.PairwiseCouplingCalibrator` over ``PAVCalibrator`` pairs runs, per
event, what its river face runs: every pair (a, b), a < b, predicts the event's pairwise score
with the state before the event's label, the pairs' probabilities are coupled, then the pairs
holding the label learn it. The pairs' states are independent, so each pair runs all of a
call's events in one loop (:func:`pair_pav_run`, its state hot in cache), writing its coupling
inputs; the coupling kernels then run over all predicted events. The loop works on the pair's
packed PAV state (:func:`streamcal._kernels.ipav.pack_state`: the live state, written in place)
and calls the same per-state functions as PAV's own kernels, in the same order (the bucket
search alone guessing from the pair's log-odds: :func:`_pair_bucket`, the same buckets): the same
bits as the pair's own array and river faces. The calibrator's river face
(:mod:`streamcal.multiclass._one_call`) runs one event through every pair with the same per-pair
functions (``_pair_predict``, ``_pair_learn``).

Preconditions (the caller checks them): the state has a bucket layout, a window that neither
decays nor keeps times (its stored unit is 1, so its window weight is ``T_POS + T_NEG``) and a
ring that never grows, and it takes every score it is given (in [0, 1] with ``probabilities``,
else in ``[-limit, limit]``). ``logs`` is C-contiguous (m, K) float64, the events' log-scores
(``-inf`` allowed); ``y`` (m,) intp the column of each learned event's label; ``ops`` (m,) int64:
1 learn, 2 predict, 3 predict then learn; ``w`` and ``t`` (m,) float64 the learned events'
weights and times; ``r_out`` and ``n_out`` hold one slot per predicted event.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.histogram import GRID_LOGIT, SF_KIND, SF_T_NEG, SF_T_POS
from streamcal._kernels.ipav import (
    PACK_END,
    PACK_HEADER,
    PACK_O_PF,
    PACK_O_PI,
    PACK_O_SI,
    PF_GRID_INV_STEP,
    PF_GRID_KIND,
    PF_GRID_Z0,
    RUNS_SIZE,
    _cuts_offset,
    _n_buckets,
    pav_bucket_of,
    pav_learn_one_inplace,
    pav_predict_one,
    pav_proba_out,
)


@jit_noalloc(forceinline=True)
def clipped_log_odds(d, limit):
    """A pairwise log-odds ``d = s_a - s_b``: 0 where NaN (both classes at -inf), else clipped to
    ``[-limit, limit]``."""
    if d != d:
        return 0.0
    if d > limit:
        return limit
    if d < -limit:
        return -limit
    return d


@jit_noalloc(forceinline=True)
def _pair_score(logs, e, a, b, limit):
    return clipped_log_odds(logs[e, a] - logs[e, b], limit)


@jit_noalloc(forceinline=True)
def _sigmoid(d):
    if d >= 0.0:
        return 1.0 / (1.0 + math.exp(-d))
    x = math.exp(d)
    return x / (1.0 + x)


@jit_noalloc(forceinline=True)
def _pair_bucket(pf, s, d, probabilities):
    """The bucket of a pair's score ``s`` (``pav_bucket_of``'s, exactly). A probability score
    ``s = sigmoid(d)`` over cuts evenly spaced in the log-odds guesses its bucket from ``d``, the
    log-odds it was made from (within rounding of ``logit(s)``), rather than from the logarithm
    that ``pav_bucket_of`` takes; the guess is checked against the cuts and moved at most two
    steps, else the full search answers, so the bucket is the same."""
    if probabilities and pf[PF_GRID_KIND] == GRID_LOGIT:
        m = _n_buckets(pf) - 1
        off = _cuts_offset(m + 1)
        if m > 0:
            t = (d - pf[PF_GRID_Z0]) * pf[PF_GRID_INV_STEP]
            if t >= m - 1:
                g = m
            elif t >= 0.0:
                g = np.int64(t) + 1
            else:
                g = np.int64(0)
            for _ in range(3):
                if g > 0 and pf[off + g - 1] > s:
                    g -= 1
                elif g < m and pf[off + g] <= s:
                    g += 1
                else:
                    return g
    return pav_bucket_of(pf, s)


@jit_noalloc(forceinline=True)
def _pair_predict(packed, s, d, probabilities):
    """A present pair's window weight and calibrated probability of score ``s`` (NaN as 0.5);
    ``d`` and ``probabilities`` as for :func:`_pair_bucket`."""
    o_pf, o_pi = np.int64(packed[PACK_O_PF]), np.int64(packed[PACK_O_PI])
    weight = packed[PACK_HEADER + SF_T_POS] + packed[PACK_HEADER + SF_T_NEG]
    if not weight > 0.0:
        return weight, 0.5
    pf = packed[o_pf:o_pi]
    v = pav_proba_out(pf, pav_predict_one(pf, _pair_bucket(pf, s, d, probabilities), s))
    return weight, (0.5 if v != v else v)


@jit_noalloc(forceinline=True)
def _pair_learn(packed, s, d, probabilities, label, w, t):
    o_si, o_pf = np.int64(packed[PACK_O_SI]), np.int64(packed[PACK_O_PF])
    o_pi, end = np.int64(packed[PACK_O_PI]), np.int64(packed[PACK_END])
    sf, si = packed[PACK_HEADER:o_si], packed[o_si:o_pf].view(np.int64)
    pf, pi = packed[o_pf:o_pi], packed[o_pi:end].view(np.int64)
    runs = packed[end : end + RUNS_SIZE]  # the end runs' scratch (``ipav.packed_runs``)
    b = _pair_bucket(pf, s, d, probabilities)
    pav_learn_one_inplace(sf, si, pf, pi, runs, b, label, w, t, sf[SF_KIND])


@jit_noalloc
def pair_pav_run(packed, logs, a, b, y, ops, w, t, probabilities, limit, unseen_weight, r_out, n_out):
    """Run the events through pair (a, b)'s packed PAV state and write its coupling inputs.

    At each predicted event (``ops & 2``, with the state before the event's label) the pair's
    ``r`` is its calibrated probability of the event's pairwise score within the add-one bounds
    ``[1/(T+2), 1 - 1/(T+2)]`` (T its window weight) and its ``n`` is T; with an empty window
    (or ``packed`` of size 0: no calibrator yet) ``r`` is the model's ``sigmoid(d)`` and ``n`` is
    ``unseen_weight``. Written to ``r_out[j]``, ``n_out[j]`` for the j-th predicted event. Each
    learned event (``ops & 1``) whose label column ``y`` is a or b is learned with label
    ``y == a``. The pair's score is ``sigmoid(d)`` if ``probabilities``, else ``d``, with
    ``d = logs[:, a] - logs[:, b]`` (0 where NaN) clipped to ``[-limit, limit]``.
    """
    have = packed.shape[0] > 0
    j = 0
    for e in range(logs.shape[0]):
        op = ops[e]
        c = y[e]
        learns = (op & 1) != 0 and ((c == a) | (c == b)) and have
        if (op & 2) == 0 and not learns:
            continue
        d = _pair_score(logs, e, a, b, limit)
        unseen = _sigmoid(d)
        s = unseen if probabilities else d
        if op & 2:
            weight = 0.0
            v = 0.5
            if have:
                weight, v = _pair_predict(packed, s, d, probabilities)
            if weight > 0.0:
                bound = 1.0 / (weight + 2.0)
                v = bound if bound > v else v  # max(v, bound), then min(v, 1 - bound)
                hi = 1.0 - bound
                r_out[j] = hi if hi < v else v
                n_out[j] = weight
            else:
                r_out[j] = unseen
                n_out[j] = unseen_weight
            j += 1
        if learns:
            _pair_learn(packed, s, d, probabilities, 1.0 if c == a else 0.0, w[e], t[e])
