"""Platt's refit while the score prior holds: the wide disc's tail bounds and the rebuild before a pass.

The prior's paths (``glm_refit.prior_moments_solve``, ``glm_refit.prior_strength_moments``) bound
the Taylor tails by Cauchy's estimate on discs of radius ``WIDE_RADIUS`` (``|sigma| <= WIDE_SUP``
there); where the map's solve on the moments refuses, ``glm_refit.prior_moments_refit`` rebuilds
the data's and the floor's moments about the combined model's uncertified optimum, else the last
fit (``glm_refit.prior_rebuild_anchor``; ``glm_refit.moments_floor_rebuild``, one loop for both)
and solves again before any pass. Checked here: the coefficients and the tails of the logistic
against the bound; the one-loop rebuild against the two rebuilds, bit for bit; the refit against a
converged refit of the histogram with its pseudo-counts (within 2e-10 on the feature range) where
it certifies, the moments left as a rebuild about that anchor leaves them, the anchor the model's
optimum near the converged refit's (and then the solve certifies) wherever the moments' anchor
is near the optimum, and no rebuild where the scratch cannot combine the moments; a long calibrated stream whose
strength falls through 1 (a miscalibrated stream), every prediction within 1e-9 of a converged full refit, and the river
face equal to ``prequential`` bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gev_compiled_refit import TOL, naive_prior_refit_proba
from test_platt_prior_moments import FLOORS, logit

from streamcal import PlattCalibrator
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _hk
from streamcal.gev import fit_glm_on_histogram


def _coefficients(order, p):
    """``c_k(v) = sigma^(k)(v) / k!`` for ``k <= order`` at the logistic's values ``p``."""
    table = _g.logistic_taylor_table(order)
    return np.array([np.polyval(table[k, : k + 2][::-1], p) for k in range(order + 1)])


def test_the_wide_disc_bounds_every_taylor_coefficient():
    # every real v maps to p in (0, 1): the coefficients' largest values there stay below the
    # bound, and at order MOM_K + 1 the bound is far below the pi / 2 disc's
    p = np.linspace(0.0, 1.0, 200_001)
    c = _coefficients(_g.MOM_K + 2, p)
    for k in range(_g.MOM_K + 3):
        assert float(np.max(np.abs(c[k]))) <= _g.WIDE_SUP * _g.WIDE_INV_R**k
    k1 = _g.MOM_K + 1
    assert _g.WIDE_SUP * _g.WIDE_INV_R**k1 <= (2 / math.pi) ** k1 / 50
    assert math.pi > _g.WIDE_RADIUS  # inside the poles at +-i pi


@settings(max_examples=200, deadline=None)
@given(st.floats(-30.0, 30.0), st.floats(0.02, 1.0), st.booleans())
def test_the_wide_tails_bound_the_logistic_and_its_slope(v, rho_frac, negative):
    # the Taylor model of order MOM_K about v, a step u of reach rho WIDE_RADIUS (rho up to
    # MOM_MAX_RHO): the value's and the slope's errors within the tails _tail_bounds_wide uses
    rho = rho_frac * _g.MOM_MAX_RHO
    u = (-1.0 if negative else 1.0) * rho * _g.WIDE_RADIUS
    p = 1 / (1 + math.exp(-v))
    c = _coefficients(_g.MOM_K + 1, np.array([p]))[:, 0]
    model = sum(c[k] * u**k for k in range(_g.MOM_K + 1))
    slope_model = sum((k + 1) * c[k + 1] * u**k for k in range(_g.MOM_K))
    exact = 1 / (1 + math.exp(-(v + u)))
    lead = _g.WIDE_SUP * _g.WIDE_INV_R ** (_g.MOM_K + 1)
    k1 = _g.MOM_K + 1
    assert abs(exact - model) <= lead * abs(u) ** k1 / (1 - rho) + 1e-15
    assert abs(exact * (1 - exact) - slope_model) <= lead * abs(u) ** _g.MOM_K * (
        k1 / (1 - rho) + rho / (1 - rho) ** 2
    ) + 1e-15


def _histogram(rng, B, window=0):
    centres = np.sort(rng.uniform(1e-3, 1 - 1e-3, B))
    x = logit(centres)
    pc = np.zeros((5, B))
    _g.prior_cache_fill(centres, pc)
    n = rng.exponential(50.0, B) * (rng.uniform(size=B) < 0.6)
    rate = 1 / (1 + np.exp(-(rng.uniform(0.6, 1.3) * x + rng.uniform(-0.5, 0.5))))
    pos, neg = np.round(n * rate), np.round(n * (1 - rate))
    return (centres, x, pc, pos, neg, *_state_of(pos, neg))


def _state_of(pos, neg):
    """An unbounded window's histogram state holding ``pos`` and ``neg`` per bucket."""
    sf, si = _hk.empty_state(pos.size, 0, (_hk.KIND_UNBOUNDED, 0.0, 0.0, 0.0))
    for b in range(pos.size):
        for label, count in ((1.0, pos[b]), (0.0, neg[b])):
            if count > 0.0:
                _hk.histogram_learn_one_inplace(sf, si, b, label, count, 0.0)
    return sf, si


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 300), st.sampled_from(FLOORS), st.floats(-3.0, 3.0), st.floats(-3.0, 3.0), st.integers(0, 2**32 - 1))
def test_the_one_loop_rebuild_equals_the_two_rebuilds(B, floor, b0, b1, seed):
    # the one loop takes the buckets four at a time (any count of them: the last with partners
    # of no weight), the two rebuilds one at a time: the same bits
    rng = np.random.default_rng(seed)
    _, x, pc, _, _, sf, si = _histogram(rng, B)
    table = _g.logistic_taylor_table()
    two = rng.normal(size=_g.MOM_SIZE)  # whatever the arrays held before
    one = two.copy()
    _g.moments_rebuild(sf, si, x, table, two, b0, b1)
    _g.floor_rebuild(sf, si, x, table, two, pc, floor)
    scratch = rng.normal(size=2 * (_g.MOM_K + 1))  # the waiting buckets' scratch: whatever it held
    _g.moments_floor_rebuild(sf, si, x, table, one, pc, floor, b0, b1, scratch)
    np.testing.assert_array_equal(one, two)


def _combined(centres, pos, neg, kappa, floor):
    pw, nw = pos.copy(), neg.copy()
    _g.add_prior_pseudo_counts(pw, nw, kappa, centres, True, 0.5, floor, centres.size)
    return pw, nw


def _converged(x, centres, pos, neg, kappa, floor, l2):
    """The converged refit of the histogram with its pseudo-counts."""
    return fit_glm_on_histogram(x, *_combined(centres, pos, neg, kappa, floor), link="logit", l2=l2, tol=1e-16, max_iter=2000)


def _perturbed_fit(rng, x, centres, pos, neg, change, kappa, floor, l2):
    """The converged refit of a histogram up to ``change`` away per bucket (relative)."""
    p0 = pos * (1 + change * rng.uniform(-1, 1, pos.size))
    n0 = neg * (1 + change * rng.uniform(-1, 1, pos.size))
    return _converged(x, centres, p0, n0, kappa, floor, l2)


def _moments_about(sf, si, x, pc, floor, anchor):
    """The Taylor table, the data's and the floor's moments about ``anchor``, and the solve's scratch."""
    table = _g.logistic_taylor_table()
    mom = np.zeros(_g.MOM_SIZE)
    _g.moments_floor_rebuild(sf, si, x, table, mom, pc, floor, float(anchor[0]), float(anchor[1]), np.zeros(2 * (_g.MOM_K + 1)))
    return table, mom, np.zeros(2 * (_g.MOM_K + 1)), np.zeros(_g.MOM_DATA_SIZE)


def _assert_within_on_range(got, ref, x_lo, x_hi, tol=2e-10):
    """The two fits' probabilities within ``tol`` on the feature range."""
    grid = np.linspace(x_lo, x_hi, 201)
    p_got = 1 / (1 + np.exp(-(got[0] * grid + got[1])))
    p_ref = 1 / (1 + np.exp(-(ref[0] * grid + ref[1])))
    assert float(np.max(np.abs(p_got - p_ref))) <= tol


@settings(max_examples=120, deadline=None)
@given(
    st.integers(8, 200),
    st.floats(1e-3, 20.0),
    st.floats(0.05, 0.5),
    st.floats(0.0, 0.01),
    st.sampled_from(FLOORS),
    st.integers(0, 2**32 - 1),
)
def test_the_refit_rebuilds_about_the_models_optimum_before_a_pass(B, kappa, far, near, floor, seed):
    # the moments are built about the fit of a histogram up to ``far`` away per bucket, the last
    # fit is that of one up to ``near`` away: where the refit certifies, within 2e-10 of a
    # converged refit on the feature range; where the first solve refuses, the moments are then
    # those of a rebuild about the anchor ``prior_rebuild_anchor`` picks: the combined model's
    # optimum (near the converged refit's where the moments' anchor is) or the last fit
    rng = np.random.default_rng(seed)
    centres, x, pc, pos, neg, sf, si = _histogram(rng, B)
    if not (pos + neg).sum() > 0.0:
        return
    l2 = 1e-6
    x_lo, x_hi = float(x.min()), float(x.max())

    anchor = _perturbed_fit(rng, x, centres, pos, neg, far, kappa, floor, l2)
    last = _perturbed_fit(rng, x, centres, pos, neg, near, kappa, floor, l2)
    ref = _converged(x, centres, pos, neg, kappa, floor, l2)
    table, mom, pw, comb = _moments_about(sf, si, x, pc, floor, anchor)
    first = _g.prior_moments_solve(mom.copy(), kappa, 1.0, l2, x_lo, x_hi, 1e-10, last.copy(), pw, comb)
    b0, b1 = _g.prior_rebuild_anchor(mom, 1.0, l2, last.copy(), pw, comb)  # from the ``comb`` just formed
    # a scratch too short to combine the moments: nothing is rebuilt
    kept = mom.copy()
    got = last.copy()
    assert not _g.prior_moments_refit(sf, si, x, table, kept, pc, floor, kappa, 1.0, l2, (x_lo, x_hi), 1e-10, got, pw, comb[:-1])
    np.testing.assert_array_equal(kept, mom)
    np.testing.assert_array_equal(got, last)
    done = _g.prior_moments_refit(sf, si, x, table, mom, pc, floor, kappa, 1.0, l2, (x_lo, x_hi), 1e-10, got, pw, comb)
    if not first:
        fresh = np.zeros(_g.MOM_SIZE)
        _g.moments_floor_rebuild(sf, si, x, table, fresh, pc, floor, b0, b1, np.zeros(2 * (_g.MOM_K + 1)))
        if not done:  # marked until the caller's passes rebuild them
            fresh[_g.MOM_FL_VALID] = _g.MOM_REFUSED
        np.testing.assert_array_equal(mom[: _g.MOM_D], fresh[: _g.MOM_D])
    if not done:
        # a repeat on the same state (the river face's hand-over to the full refit) refuses
        # at once and changes nothing, as the first call's passes expect
        kept = mom.copy()
        assert not _g.prior_moments_refit(sf, si, x, table, mom, pc, floor, kappa, 1.0, l2, (x_lo, x_hi), 1e-10, got, pw, comb)
        np.testing.assert_array_equal(mom, kept)
        np.testing.assert_array_equal(got, last)
        if near == 0.0 and (b0, b1) == (last[0], last[1]):
            assert done  # rebuilt about the optimum's own fit, the solve certifies
        if far <= 0.1 and kappa >= 0.1:
            # moments about a fit near the optimum: the model's optimum is the anchor, near the
            # converged refit's, and the solve about it certifies
            assert (b0, b1) != (last[0], last[1])
            assert abs(b0 - ref[0]) + abs(b1 - ref[1]) <= 1e-6
            assert done
    if done:
        _assert_within_on_range(got, ref, x_lo, x_hi)
    else:
        np.testing.assert_array_equal(got, last)  # left as it was


def test_a_stream_whose_strength_falls_through_one_stays_within_the_tolerance():
    # a miscalibrated rare-event stream from the first event: the strength falls from hundreds to
    # far below 1 (the refits where the map's optimum moves fastest); every prediction within 1e-9
    # of a converged full refit, the river face equal to prequential bit for bit
    rng = np.random.default_rng(11)
    z = rng.normal(-3.0, 1.2, 2500)
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=z.size) < 1 / (1 + np.exp(-(1.3 * z + 0.3)))
    cal = PlattCalibrator()
    river = PlattCalibrator()
    strengths = []
    for i, (s, y) in enumerate(zip(scores, labels, strict=True)):
        ref = naive_prior_refit_proba(cal, scores[i : i + 1])[0] if i and i % 5 == 0 else None
        p, _ = cal.prequential(scores[i : i + 1], labels[i : i + 1])
        q = river.predict_proba_one({"score": float(s)})
        assert q[True] == p[0]
        river.learn_one({"score": float(s)}, bool(y))
        if ref is not None:
            strengths.append(cal.prior_strength)
            assert abs(p[0] - ref) <= TOL
    assert max(strengths) > 1.0 > min(strengths) > 0.0


@settings(max_examples=150, deadline=None)
@given(
    st.integers(8, 200),
    st.floats(1e-2, 20.0),
    st.floats(0.02, 0.5),
    st.floats(0.005, 0.1),
    st.sampled_from(FLOORS),
    st.integers(0, 2**32 - 1),
)
def test_the_rebuild_anchor_is_the_models_optimum(B, kappa, far, step, floor, seed):
    # the moments are built about the fit of a histogram up to ``far`` away per bucket, the last
    # fit lies ``step`` from the optimum in both coefficients (as where the prior's strength moved
    # at the last event): where the anchor is not the last fit it is the model's optimum, near the
    # converged refit's, and the refit about it certifies within 2e-10 on the feature range
    rng = np.random.default_rng(seed)
    centres, x, pc, pos, neg, sf, si = _histogram(rng, B)
    if not (pos + neg).sum() > 0.0:
        return
    l2 = 1e-6
    x_lo, x_hi = float(x.min()), float(x.max())
    anchor = _perturbed_fit(rng, x, centres, pos, neg, far, kappa, floor, l2)
    ref = _converged(x, centres, pos, neg, kappa, floor, l2)
    last = np.array([ref[0] + step * rng.choice([-1.0, 1.0]), ref[1] + step * rng.choice([-1.0, 1.0])])
    table, mom, pw, comb = _moments_about(sf, si, x, pc, floor, anchor)
    _g.prior_moments_solve(mom.copy(), kappa, 1.0, l2, x_lo, x_hi, 1e-10, last.copy(), pw, comb)  # forms ``comb``
    b0, b1 = _g.prior_rebuild_anchor(mom, 1.0, l2, last.copy(), pw, comb)
    got = last.copy()
    done = _g.prior_moments_refit(sf, si, x, table, mom, pc, floor, kappa, 1.0, l2, (x_lo, x_hi), 1e-10, got, pw, comb)
    if (b0, b1) != (last[0], last[1]):
        assert abs(b0 - ref[0]) + abs(b1 - ref[1]) <= 1e-5 * (1.0 + abs(ref[0]) + abs(ref[1]))
        assert done
    if done:
        _assert_within_on_range(got, ref, x_lo, x_hi)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(8, 200),
    st.floats(1e-3, 20.0),
    st.integers(0, 40),
    st.integers(1, 200),
    st.floats(0.05, 0.5),
    st.floats(0.0, 0.01),
    st.integers(0, 2**32 - 1),
)
def test_one_bucket_of_weight_fixes_the_fit_at_that_bucket_only(B, kappa, k, n, far, near, seed):
    # the window's events in one bucket and the "traffic" floor, whose pseudo-counts sit where the
    # events are: one point fixes ``a x_b + c`` and the ridge alone the other direction, so float64
    # leaves the optimum undetermined to about 1e-7 away from the bucket, for any solver. Where the
    # refit certifies, its probability at the bucket's score is the converged refit's to rounding,
    # and within 1e-6 on the feature range (docs/gev.md, "One bucket of weight")
    rng = np.random.default_rng(seed)
    centres = np.sort(rng.uniform(1e-3, 1 - 1e-3, B))
    x = logit(centres)
    pc = np.zeros((5, B))
    _g.prior_cache_fill(centres, pc)
    b = int(rng.integers(0, B))
    pos, neg = np.zeros(B), np.zeros(B)
    pos[b], neg[b] = float(k), float(n)
    sf, si = _state_of(pos, neg)
    floor, l2 = _g.FLOOR_TRAFFIC, 1e-6
    anchor = _perturbed_fit(rng, x, centres, pos, neg, far, kappa, floor, l2)
    last = _perturbed_fit(rng, x, centres, pos, neg, near, kappa, floor, l2)
    ref = _converged(x, centres, pos, neg, kappa, floor, l2)
    table, mom, pw, comb = _moments_about(sf, si, x, pc, floor, anchor)
    x_lo, x_hi = float(x.min()), float(x.max())
    got = last.copy()
    if _g.prior_moments_refit(sf, si, x, table, mom, pc, floor, kappa, 1.0, l2, (x_lo, x_hi), 1e-10, got, pw, comb):
        at = np.array([x[b]])
        _assert_within_on_range(got, ref, float(at[0]), float(at[0]), tol=1e-12)
        _assert_within_on_range(got, ref, x_lo, x_hi, tol=1e-6)
