"""The replay clock's merge of labels in flight with a batch of events (numba).

See :mod:`streamcal.replay._engine` for the rule. The candidates (labels in flight, then the
batch's labels) are visited in (label time, event) order through ``order``; the batch's events
in event order. One pass merges them: before event ``e`` go the candidates whose label time is
at or before ``t[e]`` and whose own event precedes ``e``. In that candidate order the event a
label goes before never decreases (proof in ``plan_batch``), so the pass stops at the first
candidate that cannot go before ``e`` and the learned labels are a prefix of the order.
"""

from __future__ import annotations

from streamcal._kernels._config import jit_noalloc


@jit_noalloc(forceinline=True)
def _candidate(o, m_flight, flight_t, flight_s, flight_y, flight_w, flight_i, s, y, label_t, w, first_index, weighted):
    """Candidate ``o``: ``(label time, score, label, weight, event index)``; below ``m_flight`` a
    label in flight, else the batch's event ``o - m_flight`` (weight 1.0 when not ``weighted``)."""
    if o < m_flight:
        return flight_t[o], flight_s[o], flight_y[o], flight_w[o] if weighted else 1.0, flight_i[o]
    b = o - m_flight
    return label_t[b], s[b], y[b], w[b] if weighted else 1.0, first_index + b


@jit_noalloc
def plan_merge(
    order, m_flight, flight_t, flight_s, flight_y, flight_w, flight_i,
    t, s, y, label_t, w, first_index, weighted,
    op_s, op_y, op_t, op_w, learn, pred_pos, learn_index,
):
    """Fill the operation arrays (``n + k`` long; their capacity must be at least that: ``k`` is
    at most the number of candidates whose label time is at or before the last event time).

    ``order[c]`` is candidate ``c``'s source: below ``m_flight`` a label in flight, else the
    batch's event ``order[c] - m_flight``. Returns ``k``, the number of labels learned; the
    candidates ``order[k:]`` stay in flight, in order.
    """
    n = t.shape[0]
    m = order.shape[0]
    c = 0
    pos = 0
    for e in range(n):
        te = t[e]
        while c < m:
            o = order[c]
            lt, cs, cy, cw, ci = _candidate(
                o, m_flight, flight_t, flight_s, flight_y, flight_w, flight_i, s, y, label_t, w, first_index, weighted
            )
            own = o - m_flight  # negative for a label in flight: an earlier batch's event
            if not (lt <= te and own < e):
                break
            op_s[pos] = cs
            op_y[pos] = cy
            if weighted:
                op_w[pos] = cw
            learn_index[c] = ci
            op_t[pos] = lt
            learn[pos] = True
            pos += 1
            c += 1
        op_s[pos] = s[e]
        op_y[pos] = y[e]
        if weighted:
            op_w[pos] = w[e]
        op_t[pos] = te
        learn[pos] = False
        pred_pos[e] = pos
        pos += 1
    return c


@jit_noalloc
def plan_gather_flight(
    order, k, m_flight, flight_t, flight_s, flight_y, flight_w, flight_i,
    s, y, label_t, w, first_index, weighted,
    out_t, out_s, out_y, out_w, out_i,
):
    """The candidates ``order[k:]`` (still in flight), gathered in order into the ``out_*`` arrays."""
    for c in range(k, order.shape[0]):
        r = c - k
        o = order[c]
        lt, cs, cy, cw, ci = _candidate(
            o, m_flight, flight_t, flight_s, flight_y, flight_w, flight_i, s, y, label_t, w, first_index, weighted
        )
        out_t[r] = lt
        out_s[r] = cs
        out_y[r] = cy
        if weighted:
            out_w[r] = cw
        out_i[r] = ci


@jit_noalloc
def plan_split_rising(label_t, rising, rest):
    """Split the batch's labels by event: into ``rising`` those at or above every earlier label
    time of the batch (so already in (label time, event) order), into ``rest`` the others, each
    in event order. Returns the number in ``rising``; ``rest`` gets the other ones.

    Labels known after one fixed delay (the click scenario's negatives) are all rising; only the
    others (say the positives, known sooner) need a sort.
    """
    n = label_t.shape[0]
    k = 0
    if n == 0:
        return k
    top = label_t[0]
    for i in range(n):
        x = label_t[i]
        if x >= top:
            top = x
            rising[k] = i
            k += 1
        else:
            rest[i - k] = i
    return k


@jit_noalloc
def plan_merge_order(flight_t, label_t, rising, n_rising, rest, n_rest, order):
    """Merge into ``order`` the labels in flight (``0 .. f - 1``, in order) and the batch's two
    sorted runs ``rising[:n_rising]`` and ``rest[:n_rest]`` (batch events ``b``, written as
    ``f + b``): the stable sorting permutation of ``concatenate((flight_t, label_t))``. Ties go
    to the labels in flight first, then by event.
    """
    f = flight_t.shape[0]
    a = 0
    r = 0
    q = 0
    for c in range(order.shape[0]):
        b = -1
        from_rest = False
        if r < n_rising:
            b = rising[r]
        if q < n_rest:
            bq = rest[q]
            if b < 0 or label_t[bq] < label_t[b] or (label_t[bq] == label_t[b] and bq < b):
                b = bq
                from_rest = True
        if a < f and (b < 0 or flight_t[a] <= label_t[b]):
            order[c] = a
            a += 1
        else:
            order[c] = f + b
            if from_rest:
                q += 1
            else:
                r += 1
