"""The river face's one-call kernels of :class:`~streamcal.multiclass.PairwiseCouplingCalibrator`.

One event, every pair, one compiled call. The arguments:

- ``addresses``: int64 (2P,), P = K(K-1)/2 pairs in the order of ``numpy.triu_indices(K, 1)``;
  ``addresses[2q]`` is the address of pair q's packed PAV state buffer
  (:func:`streamcal._kernels.ipav.pack_state`), 0 for a pair without a calibrator, and
  ``addresses[2q + 1]`` its length. The caller holds a reference to every buffer for as long as
  it passes its address (numba then unboxes one small array per call, not a list of P arrays).
  Without fixed classes, 4K more follow (``addresses[2P + 4c:]``): the packed states of class
  c's two ghost pairs (``streamcal.multiclass._ghosts``: ``low``, then ``high``; 0 where the class
  has none yet), which learn each event of class c beside its pairs.
- ``frame``: float64, laid out by :func:`frame_size`: the bound parameters and the frame's busy
  mark (``FRAME_HEADER`` values), then the event's log-scores, the output and the coupling's scratch, made once per set
  of pairs (no array is allocated per call).
- ``scores``: a tuple of K floats, the event's scores in the column order of the classes; with
  ``raw`` the values as given (probabilities or logits: checked, and logged for probabilities,
  here), else log-scores already checked by the caller.

Like PAV's packed entry points these hold the GIL (``nogil=False``), so among Python threads each
call is atomic, and they refuse, changing nothing, when the frame is marked busy (``FRAME_BUSY``:
the coupling calibrator's lock is held, or the frame is no longer the bound one) or a state they
would read or write is (``PACK_BUSY``: its calibrator's lock is held by a section that works in
several steps); the caller then takes the slow path, under the locks. They compute what
:func:`streamcal._kernels.pairwise_pav.pair_pav_run` computes per event, with the same per-pair
functions in the same order: the same bits as the per-pair calls.

This module imports numba (its one helper is a numba intrinsic); it is imported only once the
process runs compiled kernels.
"""

from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels.coupling import ht_couple_newton_one, wlw_couple_one
from streamcal._kernels.ipav import PACK_BUSY
from streamcal._kernels.pairwise_pav import _pair_learn, _pair_predict, _sigmoid, clipped_log_odds

#: ``frame[0:FRAME_HEADER]``: whether the pairs take probabilities (``sigmoid(d)``, 1.0, else the
#: log-odds d, 0.0), the log-odds limit, the unseen pairs' weight, the method (0 HT, 1 WLW), tol,
#: max_iter, newton_after, whether raw scores are probabilities (1.0, else logits, 0.0), and the
#: busy mark (``FRAME_BUSY``: nonzero, the kernels refuse).
FRAME_HEADER = 9
FRAME_BUSY = 8

#: The kernels' return values.
DONE = 1
BAD_SCORE = 0  # a raw score out of range: nothing changed (the full checks name it)
REFUSED = -1  # a state busy, or a pair the label reaches without a calibrator: nothing changed

_STATE = types.Array(types.float64, 1, "C")
_MATRIX = types.Array(types.float64, 2, "C")


def _float64_view(context, builder, aryty, data, shape):
    """The value of a C-contiguous float64 array of type ``aryty`` over ``data`` with ``shape``
    (LLVM values), holding no reference count."""
    ary = context.make_array(aryty)(context, builder)
    itemsize = context.get_constant(types.intp, 8)
    strides = [itemsize]
    for extent in reversed(shape[1:]):
        strides.insert(0, builder.mul(extent, strides[0]))
    populate_array(ary, data=data, shape=shape, strides=strides, itemsize=itemsize, meminfo=None)
    return ary._getvalue()


@intrinsic
def _state_at(typingctx, address, size):
    """The float64 buffer of ``size`` elements at ``address`` as an array (no reference count:
    the caller keeps the buffer alive)."""
    sig = _STATE(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        addr, length = args
        data = builder.inttoptr(addr, context.get_value_type(types.CPointer(types.float64)))
        return _float64_view(context, builder, _STATE, data, [length])

    return sig, codegen


@intrinsic
def _matrix_in(typingctx, frame, start, rows, cols):
    """The ``rows`` x ``cols`` C-contiguous matrix at ``frame[start:]``, a view with no reference
    count (the frame's caller keeps it alive), made in line: ``reshape`` calls numba's reshape
    helper (a C function) at each call."""
    sig = _MATRIX(frame, types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        source = context.make_array(signature.args[0])(context, builder, args[0])
        start, rows, cols = args[1:]
        return _float64_view(context, builder, _MATRIX, builder.gep(source.data, [start]), [rows, cols])

    return sig, codegen


_VECTOR = types.Array(types.float64, 1, "C")
_INTS = types.Array(types.int64, 1, "C")


@intrinsic
def _vector_in(typingctx, frame, start, length):
    """The ``length`` values at ``frame[start:]``, a view with no reference count made in line (as
    :func:`_matrix_in`): where ``length`` is a constant, so is the view's shape."""
    sig = _VECTOR(frame, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        source = context.make_array(signature.args[0])(context, builder, args[0])
        return _float64_view(context, builder, _VECTOR, builder.gep(source.data, [args[1]]), [args[2]])

    return sig, codegen


@intrinsic
def _ints_in(typingctx, frame, start, length):
    """The ``length`` float64 slots at ``frame[start:]`` as int64 values, a view with no reference
    count made in line."""
    sig = _INTS(frame, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        source = context.make_array(signature.args[0])(context, builder, args[0])
        data = builder.bitcast(builder.gep(source.data, [args[1]]), context.get_value_type(types.CPointer(types.int64)))
        ary = context.make_array(_INTS)(context, builder)
        itemsize = context.get_constant(types.intp, 8)
        populate_array(ary, data=data, shape=[args[2]], strides=[itemsize], itemsize=itemsize, meminfo=None)
        return ary._getvalue()

    return sig, codegen


@intrinsic
def _status_and_output(typingctx, status, out, scores):
    """``(status, out[0], ..., out[K - 1])``, a tuple of K + 1 floats, K the length of the tuple
    ``scores``: the prediction's result as a value (a later call may overwrite the frame)."""
    k = scores.count
    sig = types.UniTuple(types.float64, k + 1)(types.float64, out, scores)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[1])(context, builder, args[1])
        values = [args[0]] + [builder.load(cgutils.gep_inbounds(builder, ary.data, i)) for i in range(k)]
        return context.make_tuple(builder, signature.return_type, values)

    return sig, codegen


def frame_size(k: int) -> int:
    """The length of a frame for K classes: header, log-scores, output, the last prediction's
    scores (:func:`_stash_scores`), and the scratch of ``r`` and ``n`` (K x K each) and of the HT
    and WLW couplings."""
    stash = 1 + 2 * k + k * (k - 1) // 2
    return FRAME_HEADER + 2 * k + stash + 4 * k * k + 6 * k + (k + 1) * (k + 1) + (k + 1)


# The last prediction's scores, at ``frame[FRAME_HEADER + 2K:]``: a tag (0 none, 1 raw scores, 2
# log-scores given), the K scores as given, their K log-scores, and each pair's score (``sigmoid(d)``
# or d) in the order of ``numpy.triu_indices(K, 1)``. The river face learns the event it has just
# predicted: the learning kernel given the same scores reads their logarithms and the pairs'
# sigmoids here instead of computing them again (the same values: the same functions of the same
# scores and of the bound header, which stays as bound for the frame's life).
@jit_noalloc(forceinline=True)
def _stash_scores(frame, scores):
    # the scores as given and their log-scores (just read into the frame); the tag comes last
    k = len(scores)
    o = FRAME_HEADER + 2 * k
    frame[o] = 0.0
    for i in range(k):
        frame[o + 1 + i] = scores[i]
        frame[o + 1 + k + i] = frame[FRAME_HEADER + i]


@jit_noalloc(forceinline=True)
def _stashed(frame, scores, raw):
    # whether the stash holds these scores, with the same ``raw``; a zero never matches (its sign
    # is not compared)
    k = len(scores)
    o = FRAME_HEADER + 2 * k
    same = frame[o] == (1.0 if raw else 2.0)
    for i in range(k):
        v = scores[i]
        same = same and v == frame[o + 1 + i] and v != 0.0
    return same


@jit_noalloc(forceinline=True)
def _read_scores(frame, scores, raw):
    # the event's log-scores into the frame; False (the frame's scratch alone written) if a raw
    # score is out of range: a probability outside [0, 1] (NaN too), a logit not finite
    k = len(scores)
    raw_probabilities = frame[7] != 0.0
    for i in range(k):
        v = scores[i]
        if raw:
            if raw_probabilities:
                if not (0.0 <= v <= 1.0):
                    return False
                v = math.log(v) if v > 0.0 else -math.inf
            elif not (-math.inf < v < math.inf):
                return False
        frame[FRAME_HEADER + i] = v
    return True


@jit_noalloc(forceinline=True)
def _pair_log_odds(frame, a, b, limit):
    return clipped_log_odds(frame[FRAME_HEADER + a] - frame[FRAME_HEADER + b], limit)


@jit_noalloc(nogil=False)
def pairs_predict(addresses, frame, scores, raw):
    """The coupled distribution of one event: ``(status, p_0, ..., p_{K-1})``, a tuple of floats,
    the status ``DONE`` (the distribution, also written to the frame's output), ``BAD_SCORE`` or
    ``REFUSED`` (the rest then undefined)."""
    k = len(scores)
    o = FRAME_HEADER + k
    done = _predict_into(addresses, frame, scores, raw)
    return _status_and_output(float(done), frame[o : o + k], scores)


@jit_noalloc
def _predict_into(addresses, frame, scores, raw):
    """The coupled distribution of one event, written to the frame's output (K,): each pair's r
    and n as ``pair_pav_run`` gives them, coupled by Hastie–Tibshirani (method 0, with the
    frame's tol, max_iter and newton_after, as ``coupling.ht_couple_newton_one``), Wu–Lin–Weng
    (1), or for K = 2 ``(r_0, 1 - r_0)``. Returns ``DONE``, ``BAD_SCORE`` or ``REFUSED``."""
    k = len(scores)
    if frame[FRAME_BUSY] != 0.0:
        return REFUSED
    n_pairs = addresses.shape[0] // 2
    for q in range(n_pairs):
        if addresses[2 * q] != 0 and _state_at(addresses[2 * q], addresses[2 * q + 1])[PACK_BUSY] != 0.0:
            return REFUSED
    if not _read_scores(frame, scores, raw):
        return BAD_SCORE
    probabilities = frame[0] != 0.0
    limit = frame[1]
    unseen_weight = frame[2]
    o = FRAME_HEADER + k
    # every view at a constant offset with a constant shape (k is the tuple's length): the inlined
    # HT coupling's loops unroll, and the compiler tells the views apart
    out = _vector_in(frame, o, k)
    o += k
    _stash_scores(frame, scores)
    stash = o + 1 + 2 * k  # the pairs' scores
    o += 1 + 2 * k + k * (k - 1) // 2
    r = _matrix_in(frame, o, k, k)
    o += k * k
    n = _matrix_in(frame, o, k, k)
    o += k * k
    q = 0
    for a in range(k):
        r[a, a] = 0.0
        n[a, a] = 0.0
        for b in range(a + 1, k):
            d = _pair_log_odds(frame, a, b, limit)
            unseen = _sigmoid(d)
            frame[stash + q] = unseen if probabilities else d
            weight = 0.0
            v = 0.5
            if addresses[2 * q] != 0:
                state = _state_at(addresses[2 * q], addresses[2 * q + 1])
                weight, v = _pair_predict(state, unseen if probabilities else d, d, probabilities)
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
    frame[FRAME_HEADER + 2 * k] = 1.0 if raw else 2.0
    if k == 2:
        out[0] = r[0, 1]
        out[1] = 1.0 - r[0, 1]
        return DONE
    a_sys = _matrix_in(frame, o, k + 1, k + 1)
    o += (k + 1) * (k + 1)
    rhs = _vector_in(frame, o, k + 1)
    o += k + 1
    work = _matrix_in(frame, o, k, k)  # HT: the Laplacian's weights; WLW: n's fill-in
    o += k * k
    if frame[3] == 0.0:
        target = _vector_in(frame, o, k)
        total_weight = _vector_in(frame, o + k, k)
        theta = _vector_in(frame, o + 2 * k, k)
        trial = _vector_in(frame, o + 3 * k, k)
        active = frame[o + 4 * k : o + 5 * k].view(np.bool_)
        idx = _ints_in(frame, o + 5 * k, k)
        scratch = (theta, trial, active[:k], idx, a_sys, rhs)
        max_iter = int(frame[5])
        newton_after = int(frame[6])
        ht_couple_newton_one(r, n, frame[4], max_iter, newton_after, out, target, total_weight, scratch, work)
    else:
        wlw_couple_one(r, n, out, a_sys, rhs, work)
    return DONE


@jit_noalloc(nogil=False)
def pairs_learn(addresses, frame, scores, raw, c, w):
    """Learn one event of label column ``c`` and weight ``w`` into every pair (a, b) holding c,
    with label ``c == a``, as ``pair_pav_run`` learns it, then into class c's ghost pairs where
    ``addresses`` holds them (:func:`_ghosts_learn`). Returns ``DONE``, or, having changed
    nothing, ``BAD_SCORE`` or ``REFUSED`` (a pair or ghost holding c absent or its state busy)."""
    k = len(scores)
    if frame[FRAME_BUSY] != 0.0:
        return REFUSED
    q = 0
    for a in range(k):
        for b in range(a + 1, k):
            if (a == c) | (b == c):
                address = addresses[2 * q]
                if address == 0 or _state_at(address, addresses[2 * q + 1])[PACK_BUSY] != 0.0:
                    return REFUSED
            q += 1
    ghosts = addresses.shape[0] > 2 * q  # q: the number of pairs
    g = 2 * q + 4 * c  # class c's ghosts' slots
    if ghosts:
        for i in range(g, g + 4, 2):
            if addresses[i] == 0 or _state_at(addresses[i], addresses[i + 1])[PACK_BUSY] != 0.0:
                return REFUSED
    probabilities = frame[0] != 0.0
    limit = frame[1]
    o = FRAME_HEADER + 2 * k
    if _stashed(frame, scores, raw):  # the event just predicted: its log-scores and pair scores
        q = 0
        for a in range(k):
            for b in range(a + 1, k):
                if (a == c) | (b == c):
                    d = clipped_log_odds(frame[o + 1 + k + a] - frame[o + 1 + k + b], limit)
                    state = _state_at(addresses[2 * q], addresses[2 * q + 1])
                    s = frame[o + 1 + 2 * k + q]
                    _pair_learn(state, s, d, probabilities, 1.0 if c == a else 0.0, w, 0.0)
                q += 1
        if ghosts:
            _ghosts_learn(addresses, g, frame[o + 1 + k + c], probabilities, limit, w)
        return DONE
    if not _read_scores(frame, scores, raw):
        return BAD_SCORE
    q = 0
    for a in range(k):
        for b in range(a + 1, k):
            if (a == c) | (b == c):
                d = _pair_log_odds(frame, a, b, limit)
                state = _state_at(addresses[2 * q], addresses[2 * q + 1])
                s = _sigmoid(d) if probabilities else d
                _pair_learn(state, s, d, probabilities, 1.0 if c == a else 0.0, w, 0.0)
            q += 1
    if ghosts:
        _ghosts_learn(addresses, g, frame[FRAME_HEADER + c], probabilities, limit, w)
    return DONE


@jit_noalloc(forceinline=True)
def _ghosts_learn(addresses, g, log_score, probabilities, limit, w):
    # the event's class's two ghost pairs, at ``addresses[g:g + 4]``: as its pair with a class
    # no event has scored (log-score -inf), sorting after it (``low``: log-odds ``log_score + inf``
    # clipped, label 1) and before it (``high``: ``-inf - log_score``, label 0), as their river
    # face learns it
    d = clipped_log_odds(log_score + math.inf, limit)
    e = clipped_log_odds(-math.inf - log_score, limit)
    low = _state_at(addresses[g], addresses[g + 1])
    _pair_learn(low, _sigmoid(d) if probabilities else d, d, probabilities, 1.0, w, 0.0)
    high = _state_at(addresses[g + 2], addresses[g + 3])
    _pair_learn(high, _sigmoid(e) if probabilities else e, e, probabilities, 0.0, w, 0.0)
