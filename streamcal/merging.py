"""Merge streaming calibrator states (``merge``): partitioned and distributed fitting (docs/design.md §1, §8).

A streaming calibrator's state is a histogram over score buckets (plus, for count and time
windows, the ring of events in the window), so two calibrators over the same bucket edges merge
into the calibrator that would have learned both streams. What "both streams" means depends on
the window's clock:

- **Event clocks** (``Unbounded``, ``CountWindow``, ``Decay(by="events")``): the merge of
  ``[a, b, c]`` is one calibrator that learned ``a``'s events, then ``b``'s, then ``c``'s, in that
  order (concatenation). Merging is associative, so partitions of an ordered dataset can be
  reduced as a tree, keeping their order. For ``Unbounded`` the order does not matter.
  ``CountWindow(n)`` keeps the last ``n`` events of the concatenation (the rings hold every
  event's bucket, label and weight, so this is exact). ``Decay(by="events")`` ages the earlier
  partitions' weights by the number of events learned after them: ``2**(-n_later / half_life)``.
- **Time clocks** (``TimeWindow``, ``Decay(by="time")``): the merge is one calibrator that learned
  all the events in time order, whatever the partitioning (by key, by shard, interleaved).
  ``Decay(by="time")`` scales each state's weights to the latest time, ``2**(-(T - t_last) /
  half_life)`` (the weight of an event depends only on its own time and the current time);
  ``TimeWindow(s)`` merges the rings by time and keeps the events within ``s`` of the latest.

Exactness: the merged histogram holds the same sums as the single calibrator's, added in a
different order; with integer weights (unit weights, counts) the sums are exact and the merged
calibrator equals the single one bit for bit (its fitted map is rebuilt from the histogram, and
streaming PAV's blocks equal a from-scratch PAV bit for bit). With fractional weights or decay the
sums agree to rounding.

``GEVCanonicalClassifier`` (streaming GEV-canonical regression) merges its forgotten Newton
statistics instead; see :func:`_merge_gev_classifiers`.

Quantile edges (``QuantileEdges``) are learned from each calibrator's own warm-up, so calibrators
built from different data have different edges and cannot merge: fix the edges first (for example
``Edges(edges)`` from a sample of the whole dataset; :func:`streamcal.dask.fit` does this). States
still in their warm-up merge by replaying the buffered events.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import numpy as np

from streamcal._kernels import histogram as _h

__all__ = ["merge"]

_EVENT_CLOCK = (_h.KIND_UNBOUNDED, _h.KIND_COUNT, _h.KIND_DECAY_EVENTS)


def merge(calibrators: Iterable, /):
    """Merge streaming calibrators over the same bucket edges into one (a new object).

    Parameters
    ----------
    calibrators
        Streaming calibrators of one class with equal parameters (``PAVCalibrator``, or any
        subclass of the streaming base), in stream order for event-clock windows (see
        :mod:`streamcal.merging`). The inputs are not modified.

    Returns
    -------
    The merged calibrator: the one that learned all the events (see the module notes for the order).

    Raises
    ------
    TypeError
        If the calibrators are not streaming calibrators of one class.
    ValueError
        If their parameters or bucket edges differ.

    Examples
    --------
    Three shards of a stream, calibrated apart and merged, give the calibrator of the whole stream.

    >>> import numpy as np
    >>> from streamcal import PAVCalibrator
    >>> from streamcal.merging import merge
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=3000)
    >>> labels = rng.uniform(size=3000) < scores**2
    >>> shards = [PAVCalibrator().update(s, y) for s, y in zip(np.split(scores, 3), np.split(labels, 3))]
    >>> merged = merge(shards)
    >>> whole = PAVCalibrator().update(scores, labels)
    >>> merged.n_learned, bool((merged.predict_proba(scores) == whole.predict_proba(scores)).all())
    (3000, True)
    """
    items = list(calibrators)
    if not items:
        msg = "`calibrators` must hold at least one calibrator; got none."
        raise ValueError(msg)
    if _is_gev_classifier(items[0]):
        return _merge_gev_classifiers(items)
    from streamcal._streaming import StreamingCalibrator

    first = items[0]
    for i, cal in enumerate(items):
        if not isinstance(cal, StreamingCalibrator):
            msg = (
                f"`calibrators` must hold streamcal streaming calibrators; got a {type(cal).__name__} at position {i}."
            )
            raise TypeError(msg)
        if type(cal) is not type(first):
            msg = (
                f"`calibrators` must all be of one class; got a {type(cal).__name__} at position {i} "
                f"after a {type(first).__name__}."
            )
            raise TypeError(msg)
        _check_same_params(first, cal, i)
    out = copy.deepcopy(first)  # taken under ``first``'s lock; ``out`` is ours alone
    for cal in items[1:]:
        with cal._lock:  # each input is read under its lock: a consistent state, even while it learns
            out = _merge_two(out, cal)
    return out


# ---------------------------------------------------------------------------------------- checks
def _param_key(value):
    from river import base

    if isinstance(value, base.Base):
        return (type(value), repr(value))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    return value


# parameters that change how fast a calibrator computes, never what: parts may differ in them
_EXECUTION_PARAMS = frozenset({"n_jobs"})


def _strategy_keys(cal) -> dict:
    """The bucket and window strategies the parameters mean: ``window=100`` and
    ``window=CountWindow(100)`` are the same parameter."""
    from streamcal.buckets import as_buckets
    from streamcal.windows import as_window

    return {
        name: _param_key(parse(getattr(cal, name)))
        for name, parse in (("buckets", as_buckets), ("window", as_window))
        if hasattr(cal, name)
    }


def _check_same_params(a, b, position: int) -> None:
    pa, pb = a._get_params(), b._get_params()
    ka, kb = _strategy_keys(a), _strategy_keys(b)
    for name in pa:
        same = ka[name] == kb.get(name) if name in ka else _param_key(pa[name]) == _param_key(pb.get(name))
        if name not in _EXECUTION_PARAMS and not same:
            msg = (
                f"`calibrators` cannot be merged: different `{name}`, {pa[name]!r} and {pb.get(name)!r} "
                f"(position {position})."
            )
            raise ValueError(msg)


def _check_same_edges(a, b) -> None:
    if not (np.array_equal(a._edges, b._edges) and np.array_equal(a._centres, b._centres)):
        msg = (
            f"`calibrators` cannot be merged: different bucket edges ({a._edges.size - 1} and "
            f"{b._edges.size - 1} buckets{', differing values' if a._edges.size == b._edges.size else ''}). "
            "Quantile edges learned from different warm-ups differ: fix the edges with "
            "streamcal.buckets.Edges before fitting the parts."
        )
        raise ValueError(msg)


# ---------------------------------------------------------------------------------------- merging
def _kind(cal) -> int:
    return int(cal._window_code[0])


def _merge_two(a, b):
    """The merge of ``a`` (modified and returned) and ``b`` (read only)."""
    if b.n_learned == 0:
        return a
    if a.n_learned == 0:
        return copy.deepcopy(b)
    if b._sf is None:  # b still buffers its quantile warm-up: replay its events
        return _replay_warmup(a, b)
    if a._sf is None:
        msg = (
            f"`calibrators` cannot be merged: the first is still in its quantile warm-up ({a.n_learned} of "
            f"{a._warmup} events) while the other has learned its edges from different data. Fix the "
            "edges with streamcal.buckets.Edges before fitting the parts."
        )
        raise ValueError(msg)
    _check_same_edges(a, b)
    kind = _kind(a)
    if kind == _h.KIND_UNBOUNDED:
        sf, si = _merge_sums(a, b, scale_a=1.0)
    elif kind == _h.KIND_DECAY_EVENTS:
        sf, si = _merge_decay_events(a, b)
    elif kind == _h.KIND_DECAY_TIME:
        sf, si = _merge_decay_time(a, b)
    else:
        sf, si = _merge_rings(a, b, kind)
    a._sf, a._si = sf, si
    a._histogram_replaced()
    _rebuild_map(a)
    return a


def _replay_warmup(a, b):
    """Merge a ``b`` still in its quantile warm-up by replaying its buffered events."""
    n = int(b._n_warm)
    scores, labels, weights, times = (np.ascontiguousarray(r[:n]) for r in b._warm)
    times_arg = times if a._uses_times else None
    if _kind(a) in _EVENT_CLOCK or float(a._last_time()) <= float(times[0]):
        a.update(scores, labels, weights=weights, times=times_arg)  # concatenation (or already in time order)
        return a
    if a._sf is None:  # both buffering, time clock: interleave the two buffers by time and replay
        m = int(a._n_warm)
        both = np.concatenate([a._warm[:, :m], b._warm[:, :n]], axis=1)
        order = np.argsort(both[3], kind="stable")
        fresh = a.clone()
        fresh.update(
            *(np.ascontiguousarray(both[j, order]) for j in range(2)), weights=both[2, order], times=both[3, order]
        )
        return fresh
    # a is built, time clock, b's events interleave with a's: the merged stream's edges would come
    # from its first events in time order, which mix a's and b's: not a's edges
    msg = (
        "`calibrators` cannot be merged: a time-clock calibrator still in its quantile warm-up into one "
        "that has built its edges: the merged stream's edges would come from both. Fix the edges with "
        "streamcal.buckets.Edges before fitting the parts."
    )
    raise ValueError(msg)


def _sums(cal) -> tuple[np.ndarray, np.ndarray]:
    B = cal._centres.size
    return cal._sf[: _h.SF_HEADER + 2 * B].copy(), cal._si[: _h.SI_HEADER + 2 * B].copy()


def _merge_sums(a, b, *, scale_a: float, scale_b: float = 1.0):
    """Add the histograms (stored units, scaled), keeping ``b``'s header frame; no ring."""
    B = a._centres.size
    fa, ia = _sums(a)
    fb, ib = _sums(b)
    sf = b._sf.copy()
    si = b._si.copy()
    h = _h.SF_HEADER
    sf[h : h + 2 * B] = fa[h : h + 2 * B] * scale_a + fb[h : h + 2 * B] * scale_b
    sf[_h.SF_T_POS] = fa[_h.SF_T_POS] * scale_a + fb[_h.SF_T_POS] * scale_b
    sf[_h.SF_T_NEG] = fa[_h.SF_T_NEG] * scale_a + fb[_h.SF_T_NEG] * scale_b
    g = _h.SI_HEADER
    si[g : g + 2 * B] = ia[g : g + 2 * B] + ib[g : g + 2 * B]
    si[_h.SI_N_POS] = ia[_h.SI_N_POS] + ib[_h.SI_N_POS]
    si[_h.SI_N_NEG] = ia[_h.SI_N_NEG] + ib[_h.SI_N_NEG]
    n_a, n_b = fa[_h.SF_N_LEARNED], fb[_h.SF_N_LEARNED]
    sf[_h.SF_N_LEARNED] = n_a + n_b
    sf[_h.SF_N_RENORM] = fa[_h.SF_N_RENORM] + fb[_h.SF_N_RENORM]
    if _kind(a) in _EVENT_CLOCK:  # b's events come after a's: its clocks move on by n_a
        sf[_h.SF_LAST_T] = n_a + n_b - 1.0
        if _kind(a) == _h.KIND_DECAY_EVENTS:
            sf[_h.SF_T0] = fb[_h.SF_T0] + n_a
    return sf, si


def _merge_decay_events(a, b):
    # a's event at clock c is stored as w 2^((c - t0a)/h); in the merged frame (b's frame moved on
    # by n_a: t0 = t0b + n_a) it is w 2^((c - t0b - n_a)/h): a factor 2^((t0a - t0b - n_a)/h).
    half_life = float(a._sf[_h.SF_HALF_LIFE])
    n_a = float(a._sf[_h.SF_N_LEARNED])
    exponent = (float(a._sf[_h.SF_T0]) - float(b._sf[_h.SF_T0]) - n_a) / half_life
    return _merge_sums(a, b, scale_a=_pow2(exponent))


def _pow2(exponent: float) -> float:
    """``2**exponent``, a decay factor between two states' frames, without an OverflowError.

    The exponent is at most ``DECAY_RENORM_EXPONENT`` (a frame's origin is never more than that
    many half-lives behind its last clock); far below the double range, as between parts learned
    1e300 half-lives apart, the older part's weights are forgotten: 0.
    """
    if exponent < -(_h.DECAY_FORGET_EXPONENT + 100.0):
        return 0.0
    return 2.0 ** min(exponent, _h.DECAY_RENORM_EXPONENT + 1.0)


def _merge_decay_time(a, b):
    # the later state's frame is kept; the other's stored weights move into it: 2^((t0 - t0_base)/h)
    half_life = float(a._sf[_h.SF_HALF_LIFE])
    later, earlier = (b, a) if b._sf[_h.SF_LAST_T] >= a._sf[_h.SF_LAST_T] else (a, b)
    exponent = (float(earlier._sf[_h.SF_T0]) - float(later._sf[_h.SF_T0])) / half_life
    if later is b:
        sf, si = _merge_sums(a, b, scale_a=_pow2(exponent))
    else:
        sf, si = _merge_sums(b, a, scale_a=_pow2(exponent))
    sf[_h.SF_LAST_T] = max(float(a._sf[_h.SF_LAST_T]), float(b._sf[_h.SF_LAST_T]))
    return sf, si


def _ring(cal) -> tuple[np.ndarray, ...]:
    """The window's events, oldest first: (bucket, label, weight, clock)."""
    B = cal._centres.size
    W = int(cal._si[_h.SI_W])
    head = int(cal._si[_h.SI_RING_HEAD])
    count = int(cal._si[_h.SI_RING_COUNT])
    order = (head + np.arange(count)) % W if W else np.zeros(0, dtype=np.intp)
    base = _h.SF_HEADER + 2 * B
    w = cal._sf[base : base + W][order]
    y = cal._sf[base + W : base + 2 * W][order]
    t = cal._sf[base + 2 * W : base + 3 * W][order]
    b = cal._si[_h.SI_HEADER + 2 * B : _h.SI_HEADER + 2 * B + W][order]
    return b, y, w, t


def _merge_rings(a, b, kind: int):
    """Count and time windows: the window of the merged stream, rebuilt from both rings."""
    ba, ya, wa, ta = _ring(a)
    bb, yb, wb, tb = _ring(b)
    n_a = float(a._sf[_h.SF_N_LEARNED])
    n_b = float(b._sf[_h.SF_N_LEARNED])
    if kind == _h.KIND_COUNT:  # the last n events of a's then b's
        keep = int(a._sf[_h.SF_WINDOW_N])
        buckets, labels, weights = (np.concatenate(p)[-keep:] for p in ((ba, bb), (ya, yb), (wa, wb)))
        clocks = np.concatenate((ta, tb + n_a))[-keep:]
        capacity = int(a._si[_h.SI_W])
        replay_times = np.zeros(clocks.size)
        last = n_a + n_b - 1.0
    else:  # time order (a's first among equal times); the kernel drops what is too old
        clocks_all = np.concatenate((ta, tb))
        order = np.argsort(clocks_all, kind="stable")
        buckets, labels, weights = (np.concatenate(p)[order] for p in ((ba, bb), (ya, yb), (wa, wb)))
        clocks = clocks_all[order]
        capacity = max(int(a._ring_capacity), 1 << max(int(clocks.size) - 1, 0).bit_length())
        replay_times = clocks
        last = max(float(a._sf[_h.SF_LAST_T]), float(b._sf[_h.SF_LAST_T]))
    B = a._centres.size
    sf, si = _h.empty_state(B, capacity, a._window_code)
    _h.histogram_learn_many_inplace(
        sf,
        si,
        np.ascontiguousarray(buckets, dtype=np.intp),
        np.ascontiguousarray(labels),
        np.ascontiguousarray(weights),
        np.ascontiguousarray(replay_times),
    )
    if kind == _h.KIND_COUNT:  # the ring starts at 0 and did not wrap: store the true clocks
        W = int(si[_h.SI_W])
        base = _h.SF_HEADER + 2 * B + 2 * W
        sf[base : base + clocks.size] = clocks
    sf[_h.SF_N_LEARNED] = n_a + n_b
    sf[_h.SF_LAST_T] = last
    return sf, si


def _rebuild_map(cal) -> None:
    """Refit the calibration map from the merged histogram."""
    if hasattr(cal, "_pf"):  # streaming PAV: a full sweep over the merged histogram
        from streamcal._kernels import ipav

        cal._init_map_state()
        ipav.pav_rebuild_inplace(cal._sf, cal._si, cal._pf, cal._pi)
        return
    # a map fitted from the histogram: refit it (its last fit, if any, is the warm start)
    if getattr(cal, "refit_every", None) is None:
        cal._dirty = True  # refit lazily, at the next prediction
    else:
        cal._refit()


# ---------------------------------------------------------------------------------------- GEV Newton statistics
def _is_gev_classifier(obj) -> bool:
    cls = type(obj)
    return cls.__name__ == "GEVCanonicalClassifier" and cls.__module__ == "streamcal.gev.streaming"


def _merge_gev_classifiers(items: list):
    """Merge streaming GEV-canonical regressions: their forgotten Newton statistics add.

    Each learner keeps, per candidate ``xi``, the sum of its mini-batches' quadratic models of the
    risk, ``A = Σ ρ XᵀWX`` and ``b = Σ ρ XᵀWz``, and the forgotten prequential Brier sums. Merging
    ``[a, b]`` (in stream order) ages ``a``'s sums by the rows ``b`` learned, ``ρ = 2^(−n_b /
    half_life)`` (1 without forgetting), adds them feature by feature (features are matched by name;
    one learner's unknown features have zero statistics), and solves the merged quadratic model for
    the coefficients: ``β = (A + diag(l2))⁻¹ b``. Rows still buffered (fewer than ``batch_size`` since
    a learner's last step) are carried over in order and learned as the next mini-batch.
    """
    first = items[0]
    for i, other in enumerate(items):
        if not _is_gev_classifier(other):
            msg = f"`calibrators` must all be GEVCanonicalClassifier; got a {type(other).__name__} at position {i}."
            raise TypeError(msg)
        _check_same_params(first, other, i)
    out = copy.deepcopy(first)
    for other in items[1:]:
        with other._lock:
            _merge_gev_two(out, other)
    return out


def _merge_gev_two(a, b) -> None:
    from streamcal.gev.streaming import _solve_pd, _sort_key

    new = [name for name in b._names if name not in a._index]
    if new:
        a._grow(sorted(new, key=_sort_key))
    k1 = len(a._names) + 1
    idx = np.array([a._index[name] for name in b._names] + [k1 - 1], dtype=np.intp)
    rho = 1.0 if a.half_life is None else 0.5 ** (b._n_seen / float(a.half_life))
    A = a._A * rho
    vec = a._b * rho
    A[:, idx[:, None], idx[None, :]] += b._A
    vec[:, idx] += b._b
    a._A, a._b = A, vec
    a._score = a._score * rho + b._score
    a._score_weight = a._score_weight * rho + b._score_weight
    a._n_seen += b._n_seen
    if a._n_seen:
        beta = np.zeros_like(a._beta)
        penalty = a._penalty(k1)
        for j in range(a._xis.size):
            hess = A[j].copy()
            hess[np.diag_indices(k1)] += penalty
            beta[j] = _solve_pd(hess, vec[j])
        a._beta = beta
        order = np.lexsort((np.abs(a._xis), a._score))
        a._serving = int(order[0])
    a._buffer = a._buffer + [(list(names), block.copy(), labels.copy()) for names, block, labels in b._buffer]
    a._buffered += b._buffered
    if a._buffered >= a.batch_size:
        a._flush()
