"""The refit's pseudo-counts kernel (``glm_refit.add_prior_pseudo_counts``) against the score
prior's Python rule (``streamcal._prior.pseudo_counts``), bit for bit, on hypothesis-generated
sparse rows under every floor: the kernel skips the buckets without weight off the thinned grid
(their pseudo-count is ``kappa * 0``) and follows the thinned grid by a counter. Its sums
(``add_prior_pseudo_counts_sums``: the fitted row's totals and the prefix half of the end runs,
which GEV's refit takes from it) against the loops over the buckets they replace, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import _prior
from streamcal._kernels import glm_refit as G

FLOORS = {"thinned": G.FLOOR_THINNED, "span": G.FLOOR_SPAN, "traffic": G.FLOOR_TRAFFIC, "spread": G.FLOOR_SPREAD}


@st.composite
def rows(draw):
    B = draw(st.sampled_from([1, 2, 7, 16, 63, 64, 100, 1024]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    density = draw(st.sampled_from([0.0, 0.01, 0.2, 1.0]))
    pos = np.where(rng.uniform(size=B) < density, rng.uniform(0, 3, size=B), 0.0)
    neg = np.where(rng.uniform(size=B) < density, rng.exponential(2.0, size=B), 0.0)
    if draw(st.booleans()):  # whole events
        pos, neg = np.round(pos), np.round(neg)
    if B > 3 and draw(st.booleans()):  # a bucket whose weights cancel (a window's round-off)
        pos[B // 3], neg[B // 3] = 1e-17, -1e-17
    centres = np.sort(rng.uniform(0.0, 1.0, size=B))
    kappa = draw(st.sampled_from([1e-3, 0.7, 48.0, 3e4]))
    return pos, neg, centres, kappa, draw(st.booleans()), draw(st.sampled_from(sorted(FLOORS)))


@settings(max_examples=400, deadline=None)
@given(rows())
def test_pseudo_counts_kernel_equals_the_python_rule(case):
    pos, neg, centres, kappa, identity, floor = case
    c = 1.0
    prior_pos, prior_neg = _prior.pseudo_counts(centres, pos, neg, kappa, identity, c, floor=floor)
    base_rate = (float(pos.sum()) + c) / (float(pos.sum() + neg.sum()) + 2.0 * c)
    kp, kn = pos.copy(), neg.copy()
    G.add_prior_pseudo_counts(kp, kn, kappa, centres, identity, base_rate, FLOORS[floor], np.int64(pos.size))
    np.testing.assert_array_equal(kp, pos + prior_pos)
    np.testing.assert_array_equal(kn, neg + prior_neg)


@settings(max_examples=300, deadline=None)
@given(rows(), st.sampled_from([0.0, 1.0, 2.5]))
def test_the_sums_equal_the_loops_they_replace(case, c):
    pos, neg, centres, kappa, identity, floor = case
    base_rate = (float(pos.sum()) + 1.0) / (float(pos.sum() + neg.sum()) + 2.0)
    kp, kn = pos.copy(), neg.copy()
    B = np.int64(pos.size)
    s_pos, s_neg, low, r_pos, r_neg = G.add_prior_pseudo_counts_sums(
        kp, kn, kappa, centres, identity, base_rate, FLOORS[floor], B, c, pos.size > 0
    )
    t_pos, t_neg = 0.0, 0.0  # the refit's totals loop, over every bucket
    for j in range(pos.size):
        t_pos += kp[j]
        t_neg += kn[j]
    assert (s_pos, s_neg) == (t_pos, t_neg)
    fit, fit_from = np.zeros(G.FIT_RUN_HIGH + 1), np.zeros(G.FIT_RUN_HIGH + 1)
    G.end_run_bounds(kp, kn, c, fit)
    G.end_run_bounds_from(kp, kn, c, fit_from, low, r_pos, r_neg)
    np.testing.assert_array_equal(fit_from, fit)
    if np.any(kp + kn > 0.0):  # the row holds weight after the floors: the prefix half ran
        assert r_pos + r_neg > 0.0


def test_the_floor_reaches_empty_buckets_on_the_thinned_grid():
    """One bucket of data on 1,024: the thinned and spread floors put weight on the 64 buckets
    of the grid (and the data's bucket), the span's on those within ``B // 16`` of the data, the
    traffic's on the data's."""
    B = 1024
    pos, neg = np.zeros(B), np.zeros(B)
    neg[500] = 3.0
    centres = (np.arange(B) + 0.5) / B
    grown = {}
    for name, code in FLOORS.items():
        kp, kn = pos.copy(), neg.copy()
        G.add_prior_pseudo_counts(kp, kn, 2.0, centres, True, 0.5, code, np.int64(B))
        grown[name] = set(np.flatnonzero(kp + kn > pos + neg).tolist())
    grid = set(range(8, B, 16))
    assert grown["thinned"] == grid | {500}  # the data bucket: kappa times its own weight
    assert grown["spread"] == grid | {500}
    assert grown["traffic"] == {500}
    assert grown["span"] == {j for j in grid if 500 - 64 <= j <= 500 + 64} | {500}
