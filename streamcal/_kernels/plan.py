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


@jit_noalloc
def plan_merge(
    order, m_flight, flight_t, flight_s, flight_y, flight_w, flight_i,
    t, s, y, label_t, w, first_index, weighted,
    op_s, op_y, op_t, op_w, learn, pred_pos, learn_index,
):
    """Fill the operation arrays (``n + k`` long; their capacity is ``n + len(order)``).

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
            if o < m_flight:
                lt = flight_t[o]
                own = -1  # an earlier batch's event
            else:
                lt = label_t[o - m_flight]
                own = o - m_flight
            if not (lt <= te and own < e):
                break
            if o < m_flight:
                op_s[pos] = flight_s[o]
                op_y[pos] = flight_y[o]
                if weighted:
                    op_w[pos] = flight_w[o]
                learn_index[c] = flight_i[o]
            else:
                op_s[pos] = s[own]
                op_y[pos] = y[own]
                if weighted:
                    op_w[pos] = w[own]
                learn_index[c] = first_index + own
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


# The candidate copy below repeats plan_merge's on purpose: one inlined helper for both
# (tried) made the plan 2x slower (38 -> 82 ns per event).
@jit_noalloc
def plan_gather_flight(
    order, k, m_flight, flight_t, flight_s, flight_y, flight_w, flight_i,
    s, y, label_t, w, first_index, weighted,
    out_t, out_s, out_y, out_w, out_i,
):
    """The candidates ``order[k:]`` (still in flight), gathered in order into the ``out_*`` arrays."""
    for c in range(k, order.shape[0]):
        o = order[c]
        r = c - k
        if o < m_flight:
            out_t[r] = flight_t[o]
            out_s[r] = flight_s[o]
            out_y[r] = flight_y[o]
            if weighted:
                out_w[r] = flight_w[o]
            out_i[r] = flight_i[o]
        else:
            b = o - m_flight
            out_t[r] = label_t[b]
            out_s[r] = s[b]
            out_y[r] = y[b]
            if weighted:
                out_w[r] = w[b]
            out_i[r] = first_index + b
