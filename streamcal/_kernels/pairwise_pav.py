"""Streaming PAV pairs of a pairwise coupling calibrator, one compiled loop over a pair's events.

:class:`streamcal.multiclass.PairwiseCouplingCalibrator` over ``PAVCalibrator`` pairs runs, per
event, what its river face runs: every pair (a, b), a < b, predicts the event's pairwise score
with the state before the event's label, the pairs' probabilities are coupled, then the pairs
holding the label learn it. The pairs' states are independent, so each pair runs all of a
call's events in one loop (:func:`pair_pav_run`, its state hot in cache), writing its coupling
inputs; the coupling kernels then run over all predicted events. The loop works on the pair's
packed PAV state (:func:`streamcal._kernels.ipav.pack_state`: the live state, written in place)
and calls the same per-state functions as PAV's own kernels, in the same order: the same bits
as the pair's own array and river faces.

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

from streamcal._kernels._config import jit, jit_noalloc
from streamcal._kernels.coupling import ht_couple_newton_one, wlw_couple_one
from streamcal._kernels.histogram import SF_KIND, SF_T_NEG, SF_T_POS
from streamcal._kernels.ipav import (
    PACK_BUSY,
    PACK_END,
    PACK_HEADER,
    PACK_O_PF,
    PACK_O_PI,
    PACK_O_SI,
    RUNS_SIZE,
    pav_bucket_of,
    pav_learn_one_inplace,
    pav_predict_one,
    pav_proba_out,
)


@jit_noalloc(forceinline=True)
def _pair_score(logs, e, a, b, limit):
    # the pairwise log-odds d = s_a - s_b: 0 where NaN (both classes at -inf), else clipped
    d = logs[e, a] - logs[e, b]
    if d != d:
        return 0.0
    if d > limit:
        return limit
    if d < -limit:
        return -limit
    return d


@jit_noalloc(forceinline=True)
def _sigmoid(d):
    if d >= 0.0:
        return 1.0 / (1.0 + math.exp(-d))
    x = math.exp(d)
    return x / (1.0 + x)


@jit_noalloc(forceinline=True)
def _pair_predict(packed, s):
    """A present pair's window weight and calibrated probability of score ``s`` (NaN as 0.5)."""
    o_pf, o_pi = np.int64(packed[PACK_O_PF]), np.int64(packed[PACK_O_PI])
    weight = packed[PACK_HEADER + SF_T_POS] + packed[PACK_HEADER + SF_T_NEG]
    if not weight > 0.0:
        return weight, 0.5
    pf = packed[o_pf:o_pi]
    v = pav_proba_out(pf, pav_predict_one(pf, pav_bucket_of(pf, s), s))
    return weight, (0.5 if v != v else v)


@jit_noalloc(forceinline=True)
def _pair_learn(packed, s, label, w, t):
    o_si, o_pf = np.int64(packed[PACK_O_SI]), np.int64(packed[PACK_O_PF])
    o_pi, end = np.int64(packed[PACK_O_PI]), np.int64(packed[PACK_END])
    sf, si = packed[PACK_HEADER:o_si], packed[o_si:o_pf].view(np.int64)
    pf, pi = packed[o_pf:o_pi], packed[o_pi:end].view(np.int64)
    runs = packed[end : end + RUNS_SIZE]  # the end runs' scratch (``ipav.packed_runs``)
    pav_learn_one_inplace(sf, si, pf, pi, runs, pav_bucket_of(pf, s), label, w, t, sf[SF_KIND])


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
                weight, v = _pair_predict(packed, s)
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
            _pair_learn(packed, s, 1.0 if c == a else 0.0, w[e], t[e])


# ---------------------------------------------------------------- the river face's one-call kernels
# One event, every pair, one call: ``states`` is a typed list of the pairs' packed buffers (pairs
# in the order of ``numpy.triu_indices(K, 1)``, an empty array where ``present`` is False) and
# ``logs`` the event's log-scores as a (1, K) array. Like PAV's packed entry points these hold
# the GIL (``nogil=False``), so among Python threads each call is atomic, and they refuse,
# changing nothing, when a state they would read or write is marked busy (``PACK_BUSY``: its
# calibrator's lock is held by a section that works in several steps); the caller then takes the
# slow path, under the pairs' locks.

METHOD_HT = 0
METHOD_WLW = 1


@jit(nogil=False)
def pairs_predict_packed(
    states, present, logs, probabilities, limit, unseen_weight, method, tol, max_iter, newton_after, out
):
    """The coupled distribution of one event, written to ``out`` (K,): each pair's r and n as
    :func:`pair_pav_run` gives them, coupled by Hastie–Tibshirani (``method`` 0, ``tol``,
    ``max_iter`` and ``newton_after`` as for ``coupling.ht_couple_newton_one``), Wu–Lin–Weng (1), or for
    K = 2 ``(r_0, 1 - r_0)``. Returns False, writing nothing, if a present state is busy."""
    k = logs.shape[1]
    for q in range(len(states)):
        if present[q] and states[q][PACK_BUSY] != 0.0:
            return False
    r = np.zeros((k, k))
    n = np.zeros((k, k))
    q = 0
    for a in range(k):
        for b in range(a + 1, k):
            d = _pair_score(logs, 0, a, b, limit)
            unseen = _sigmoid(d)
            weight = 0.0
            v = 0.5
            if present[q]:
                weight, v = _pair_predict(states[q], unseen if probabilities else d)
            if weight > 0.0:
                bound = 1.0 / (weight + 2.0)
                v = bound if bound > v else v
                hi = 1.0 - bound
                rq = hi if hi < v else v
                nq = weight
            else:
                rq = unseen
                nq = unseen_weight
            r[a, b] = rq
            r[b, a] = 1.0 - rq
            n[a, b] = nq
            n[b, a] = nq
            q += 1
    if k == 2:
        out[0] = r[0, 1]
        out[1] = 1.0 - r[0, 1]
    elif method == METHOD_HT:
        scratch = (
            np.empty(k),
            np.empty(k),
            np.empty(k, dtype=np.bool_),
            np.empty(k, dtype=np.intp),
            np.empty((k + 1, k + 1)),
            np.empty(k + 1),
        )
        ht_couple_newton_one(
            r, n, tol, max_iter, newton_after, out, np.empty(k), np.empty(k), scratch, np.empty((k, k)), np.empty(k)
        )
    else:
        wlw_couple_one(r, n, out, np.empty((k + 1, k + 1)), np.empty(k + 1), np.empty((k, k)))
    return True


@jit(nogil=False)
def pairs_learn_packed(states, present, logs, c, probabilities, limit, w, t):
    """Learn one event of label column ``c`` into every pair (a, b) holding c, with label
    ``c == a``, as :func:`pair_pav_run` learns it. Returns False, changing nothing, if one of
    those pairs is absent or its state busy."""
    k = logs.shape[1]
    q = 0
    for a in range(k):
        for b in range(a + 1, k):
            if ((a == c) | (b == c)) and not (present[q] and states[q][PACK_BUSY] == 0.0):
                return False
            q += 1
    q = 0
    for a in range(k):
        for b in range(a + 1, k):
            if (a == c) | (b == c):
                d = _pair_score(logs, 0, a, b, limit)
                _pair_learn(states[q], _sigmoid(d) if probabilities else d, 1.0 if c == a else 0.0, w, t)
            q += 1
    return True
