"""Per-key logit offsets on a global map, shrunk by empirical Bayes: the per-event loop.

State (the caller owns and grows it; nothing here checks it):

- per key slot ``k``: ``weight[k]`` (the key's learned weight), ``positives[k]`` (its weighted
  positives), ``expected[k]`` (its weighted positives expected under the global map, each event
  at the global map's probability ``p`` before its label), ``information[k]`` (its weighted
  ``p (1 - p)``), and the cached logit offset ``offset[k]``;
- ``agg``: the DerSimonian–Laird sums over the keys with ``information > 0``, on the keys' score
  statistics ``z = (positives - expected) / information`` with weights ``u = information``:
  ``agg[0] = Σu``, ``agg[1] = Σu·z``, ``agg[2] = Σu·z²``, ``agg[3] = Σu²``, ``agg[4]`` the number
  of such keys and ``agg[5]`` the updates since the sums were last recomputed from the keys (they
  are kept by removing and adding one key's terms per event, and recomputed exactly once the
  updates outnumber the keys and 4096, so that rounding cannot pile up).

Operations per event (``ops``): ``OP_PREDICT`` writes the key's probability, ``OP_LEARN`` learns
the label, ``OP_PREQUENTIAL`` does both, predicting first. ``code < 0`` is a key never learned:
it gets the global map's probability.
"""

from __future__ import annotations

import math

from streamcal._kernels._config import jit

OP_PREDICT = 0
OP_LEARN = 1
OP_PREQUENTIAL = 2

REFRESH_FLOOR = 4096.0


@jit(forceinline=True)
def offset_estimate(weight, positives, expected):
    """The logit offset of one key from its sums: the difference of the empirical logits of the
    observed and the expected positive rates, each with half a pseudo-event per class (Haldane's
    correction); 0 for a key without weight or with sums beyond float64's range."""
    if not (weight > 0.0):
        return 0.0
    negatives = weight - positives
    if negatives < 0.0:
        negatives = 0.0
    unexpected = weight - expected
    if unexpected < 0.0:
        unexpected = 0.0
    d = math.log((positives + 0.5) / (negatives + 0.5)) - math.log((expected + 0.5) / (unexpected + 0.5))
    if not (abs(d) < math.inf):
        return 0.0
    return d


@jit(forceinline=True)
def between_key_variance(agg, fixed):
    """τ²: ``fixed`` when it is >= 0, else the DerSimonian–Laird estimate from ``agg`` (0 with
    fewer than two keys)."""
    if fixed >= 0.0:
        return fixed
    k = agg[4]
    su = agg[0]
    if k < 2.0 or not (su > 0.0):
        return 0.0
    q = agg[2] - agg[1] * agg[1] / su
    denominator = su - agg[3] / su
    if not (denominator > 0.0):
        return 0.0
    tau2 = (q - (k - 1.0)) / denominator
    if not (tau2 > 0.0):
        return 0.0
    return tau2


@jit(forceinline=True)
def keyed_probability(p0, d, information, tau2):
    """The global probability ``p0`` moved in logit by the shrunk offset ``d · λ``, with
    ``λ = τ² / (τ² + 1 / information)``; ``p0`` itself where that offset is 0 (and at ``p0`` = 0
    or 1)."""
    if not (tau2 > 0.0) or not (information > 0.0):
        return p0
    o = d * (tau2 / (tau2 + 1.0 / information))
    if o == 0.0:
        return p0
    r = math.exp(o)
    return p0 * r / ((1.0 - p0) + p0 * r)


@jit(forceinline=True)
def add_terms(agg, positives, expected, information, sign):
    """Add (``sign`` 1.0) or remove (-1.0) one key's DerSimonian–Laird terms."""
    if information > 0.0 and information < math.inf:
        score = positives - expected
        agg[0] += sign * information
        agg[1] += sign * score
        agg[2] += sign * (score * score / information)
        agg[3] += sign * (information * information)
        agg[4] += sign


@jit
def refresh_sums(positives, expected, information, n_slots, agg):
    """Recompute ``agg[0:5]`` from the keys' sums and zero ``agg[5]``."""
    for j in range(5):
        agg[j] = 0.0
    for j in range(n_slots):
        add_terms(agg, positives[j], expected[j], information[j], 1.0)
    agg[5] = 0.0


@jit
def keyed_offset_run(
    ops, codes, p0, y, w, weight, positives, expected, information, offset, n_slots, agg, fixed, out_p
):
    """Run the operations of ``codes.size`` events in order (see the module's docstring); write
    the predictions into ``out_p`` (left as it is at learn-only positions)."""
    n = codes.shape[0]
    for i in range(n):
        op = ops[i]
        k = codes[i]
        if op != OP_LEARN:
            if k < 0:
                out_p[i] = p0[i]
            else:
                out_p[i] = keyed_probability(p0[i], offset[k], information[k], between_key_variance(agg, fixed))
        if op == OP_PREDICT:
            continue
        add_terms(agg, positives[k], expected[k], information[k], -1.0)
        wi = w[i]
        p = p0[i]
        weight[k] += wi
        positives[k] += wi * y[i]
        expected[k] += wi * p
        information[k] += wi * (p * (1.0 - p))
        offset[k] = offset_estimate(weight[k], positives[k], expected[k])
        add_terms(agg, positives[k], expected[k], information[k], 1.0)
        agg[5] += 1.0
        if agg[5] >= n_slots + REFRESH_FLOOR:
            refresh_sums(positives, expected, information, n_slots, agg)
