"""Platt's refit from Taylor moments while the score prior holds (``glm_refit.prior_moments_solve``).

The pseudo-counts of strength ``kappa`` are ``m_b = kappa (n_b + f_b)`` at the prior's rate
``r_b``, so the refit's risk is the data's plus ``kappa`` times the prior's, and the moments of
both about one anchor give the solve without a pass over the buckets. Checked here: the floor
moments that the learn kernel keeps current against a rebuild from the histogram (and marked
stale where ``FLOOR_SPAN``'s span moves); the solve against a converged refit of the histogram
with its pseudo-counts; streams where the prior holds from the first event, every prediction
within 1e-9 of a converged full refit on every window kind; copies and saved states that continue
bit for bit; a state saved before the floor moments loads and refits within the tolerance.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gev_compiled_refit import TOL, WINDOWS, naive_prior_refit_proba

from streamcal import PlattCalibrator
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _hk
from streamcal.gev import fit_glm_on_histogram

FLOORS = [_g.FLOOR_SPAN, _g.FLOOR_THINNED, _g.FLOOR_TRAFFIC, _g.FLOOR_SPREAD]


def logit(c):
    return np.log(c) - np.log1p(-c)


def span(sf, B):
    """The first and last buckets holding data (-1, -1 where none does)."""
    held = np.flatnonzero(sf[_hk.SF_HEADER : _hk.SF_HEADER + B] + sf[_hk.SF_HEADER + B : _hk.SF_HEADER + 2 * B] > 0.0)
    return (int(held[0]), int(held[-1])) if held.size else (-1, -1)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 300),
    st.sampled_from(FLOORS),
    st.sampled_from([0, 5, 30]),
    st.integers(0, 2**32 - 1),
)
def test_the_floor_moments_follow_the_histogram(B, floor, window, seed):
    # events (some of weight 0) learned through the learn kernel into an unbounded or a count
    # window: while the floor moments stay valid they equal a rebuild from the histogram; they go
    # stale only where FLOOR_SPAN's span moved, never for the other floors
    rng = np.random.default_rng(seed)
    centres = np.sort(rng.uniform(1e-4, 1 - 1e-4, B))
    x = logit(centres)
    pc = np.zeros((5, B))
    _g.prior_cache_fill(centres, pc)
    kind = (_hk.KIND_COUNT, float(window), 0.0, 0.0) if window else (_hk.KIND_UNBOUNDED, 0.0, 0.0, 0.0)
    sf, si = _hk.empty_state(B, window, kind)
    table = _g.logistic_taylor_table()
    mom = np.zeros(_g.MOM_SIZE)
    anchor = np.zeros(_g.ANCHOR_SIZE)
    steps = np.zeros(0)
    centre = int(rng.integers(0, B))
    for _ in range(3):  # a few events, then the moments are built about a fit
        _g.glm_learn_one_inplace(sf, si, centre, 1.0, 1.0, 0.0, x, table, mom, pc, anchor, steps)
    _g.moments_rebuild(sf, si, x, table, mom, 0.9, -0.2)
    _g.floor_rebuild(sf, si, x, table, mom, pc, floor)
    assert mom[_g.MOM_FL_VALID] == 1.0
    stale_at = None
    # the scale of each value from MOM_FL_R0 on: sums of weight times powers of the feature
    xm = max(1.0, float(np.max(np.abs(x))))
    powers = xm ** np.arange(_g.MOM_NCOL + 1)
    scale = np.concatenate(
        (
            [xm, xm * xm, 1.0, xm, xm * xm],  # R0, R1, F, FR0, FR1 (R0 carries no power: xm bounds it)
            powers[: _g.MOM_NS],
            np.tile(powers[: _g.MOM_NCOL], _g.MOM_K + 1),
        )
    ) * 100.0
    for i in range(80):
        b = int(np.clip(centre + rng.integers(-B // 4 - 1, B // 4 + 2), 0, B - 1))
        w = float(rng.choice([0.0, 0.5, 1.0, 2.5]))
        before = span(sf, B)
        _g.glm_learn_one_inplace(sf, si, b, float(rng.uniform() < 0.3), w, 0.0, x, table, mom, pc, anchor, steps)
        assert _g.moments_current(mom, sf)
        if mom[_g.MOM_FL_VALID] != 1.0:
            stale_at = i
            assert floor == _g.FLOOR_SPAN
            assert span(sf, B) != before
            break
        fresh = mom.copy()
        _g.floor_rebuild(sf, si, x, table, fresh, pc, floor)
        # the sums equal the rebuild's; the features' range holds the rebuild's (it only widens);
        # the span is followed where the floor depends on it
        # (within the rounding of the running sums: each power of the feature to its own scale)
        err = np.abs(mom[_g.MOM_FL_R0 : _g.MOM_D] - fresh[_g.MOM_FL_R0 : _g.MOM_D])
        assert np.all(err <= 1e-9 * np.abs(fresh[_g.MOM_FL_R0 : _g.MOM_D]) + 1e-11 * scale)
        assert mom[_g.MOM_FL_X_LO] <= fresh[_g.MOM_FL_X_LO]
        assert mom[_g.MOM_FL_X_HI] >= fresh[_g.MOM_FL_X_HI]
        if floor == _g.FLOOR_SPAN:
            assert (mom[_g.MOM_FL_FIRST], mom[_g.MOM_FL_LAST]) == (fresh[_g.MOM_FL_FIRST], fresh[_g.MOM_FL_LAST])
    if floor != _g.FLOOR_SPAN:
        assert stale_at is None


def _combined(x, centres, pos, neg, kappa, floor):
    """The histogram with its pseudo-counts (``add_prior_pseudo_counts``)."""
    pw, nw = pos.copy(), neg.copy()
    _g.add_prior_pseudo_counts(pw, nw, kappa, centres, True, 0.5, floor, centres.size)
    return pw, nw


@settings(max_examples=150, deadline=None)
@given(
    st.integers(8, 200),
    st.floats(1e-4, 20.0),
    st.floats(0.0, 0.05),
    st.sampled_from(FLOORS),
    st.integers(0, 2**32 - 1),
)
def test_the_solve_with_the_prior_matches_a_converged_refit(B, kappa, change, floor, seed):
    # the moments are built about the converged fit of a histogram that differs by up to
    # ``change`` per bucket; where the solve certifies, every probability on the feature range is
    # within 1e-10 of a converged refit of the histogram with its pseudo-counts
    rng = np.random.default_rng(seed)
    centres = np.sort(rng.uniform(1e-3, 1 - 1e-3, B))
    x = logit(centres)
    pc = np.zeros((5, B))
    _g.prior_cache_fill(centres, pc)
    n = rng.exponential(50.0, B) * (rng.uniform(size=B) < 0.6)
    rate = 1 / (1 + np.exp(-(rng.uniform(0.6, 1.3) * x + rng.uniform(-0.5, 0.5))))
    pos, neg = np.round(n * rate), np.round(n * (1 - rate))
    if not (pos + neg).sum() > 0.0:
        return
    sf, si = _hk.empty_state(B, 0, (_hk.KIND_UNBOUNDED, 0.0, 0.0, 0.0))
    for b in range(B):
        for label, count in ((1.0, pos[b]), (0.0, neg[b])):
            if count > 0.0:
                _hk.histogram_learn_one_inplace(sf, si, b, label, count, 0.0)
    l2 = 1e-6
    x_lo, x_hi = float(x.min()), float(x.max())
    pos0 = pos * (1 + change * rng.uniform(-1, 1, B))
    neg0 = neg * (1 + change * rng.uniform(-1, 1, B))
    anchor = fit_glm_on_histogram(x, *_combined(x, centres, pos0, neg0, kappa, floor), link="logit", l2=l2, tol=1e-16, max_iter=2000)
    table = _g.logistic_taylor_table()
    mom = np.zeros(_g.MOM_SIZE)
    _g.moments_rebuild(sf, si, x, table, mom, float(anchor[0]), float(anchor[1]))
    _g.floor_rebuild(sf, si, x, table, mom, pc, floor)
    got = anchor.copy()
    pw = np.zeros(2 * (_g.MOM_K + 1))
    comb = np.zeros(_g.MOM_DATA_SIZE)
    ref = fit_glm_on_histogram(x, *_combined(x, centres, pos, neg, kappa, floor), link="logit", l2=l2, tol=1e-16, max_iter=2000)
    done = _g.prior_moments_solve(mom, kappa, 1.0, l2, x_lo, x_hi, 1e-10, got, pw, comb)
    if change == 0.0:
        assert done  # at the optimum's own anchor the solve certifies
    if done:
        grid = np.linspace(x_lo, x_hi, 201)
        p_got = 1 / (1 + np.exp(-(got[0] * grid + got[1])))
        p_ref = 1 / (1 + np.exp(-(ref[0] * grid + ref[1])))
        assert float(np.max(np.abs(p_got - p_ref))) <= 2e-10
    else:
        np.testing.assert_array_equal(got, anchor)  # left as it was
    # stale floor moments: the solve gives way
    mom[_g.MOM_FL_VALID] = 0.0
    assert not _g.prior_moments_solve(mom, kappa, 1.0, l2, x_lo, x_hi, 1e-10, anchor.copy(), pw, comb)


@st.composite
def calibrated_streams(draw):
    """Streams whose scores are close to calibrated: the score prior holds from the first event."""
    n = draw(st.integers(50, 500))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    z = rng.normal(draw(st.floats(-4.0, 0.5)), draw(st.floats(0.5, 2.5)), n)
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-(draw(st.floats(0.9, 1.1)) * z + draw(st.floats(-0.1, 0.1)))))
    weights = rng.choice([0.0, 0.5, 1.0, 1.0, 2.0], n) if draw(st.booleans()) else np.ones(n)
    times = np.cumsum(rng.exponential(1.0, n))
    return 1 / (1 + np.exp(-z)), labels, weights, times, draw(st.sampled_from(sorted(WINDOWS)))


@settings(max_examples=25, deadline=None)
@given(calibrated_streams())
def test_every_prediction_while_the_prior_holds_matches_a_converged_refit(stream):
    scores, labels, weights, times, window = stream
    uses_times = WINDOWS[window].uses_times
    cal = PlattCalibrator(window=copy.deepcopy(WINDOWS[window]))
    proba, _ = cal.prequential(scores, labels, weights=weights, times=times if uses_times else None)
    ref = PlattCalibrator(window=copy.deepcopy(WINDOWS[window]))
    worst = 0.0
    for i in range(scores.size):
        if ref.n_learned and ref.window_weight > 0.0:
            worst = max(worst, abs(proba[i] - float(naive_prior_refit_proba(ref, scores[i : i + 1])[0])))
        ref.learn_one(
            {"score": float(scores[i])}, bool(labels[i]), w=float(weights[i]), t=float(times[i]) if uses_times else None
        )
    assert worst <= TOL


def _calibrated(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.0, 1.5, n)
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-z))


def test_the_prior_holds_on_the_calibrated_stream_and_copies_continue_bit_for_bit():
    scores, labels = _calibrated(3000, 21)
    cal = PlattCalibrator()
    cal.prequential(scores[:1500], labels[:1500])
    assert cal.prior_strength > 0.0  # the prior holds: the refits here take the moments' solve
    twin = copy.deepcopy(cal)
    loaded = pickle.loads(pickle.dumps(cal))
    a = cal.prequential(scores[1500:], labels[1500:])
    for other in (twin, loaded):
        b = other.prequential(scores[1500:], labels[1500:])
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    ref = PlattCalibrator()
    ref.update(scores, labels)
    p = cal.predict_proba(scores[:200])
    assert float(np.max(np.abs(p - naive_prior_refit_proba(ref, scores[:200])))) <= TOL


def test_a_state_saved_before_the_floor_moments_loads_and_refits():
    scores, labels = _calibrated(2000, 22)
    cal = PlattCalibrator()
    cal.prequential(scores[:1000], labels[:1000])
    assert_older_moments_continue(cal, scores[1000:], labels[1000:], _g.MOM_DATA_SIZE)


def assert_older_moments_continue(cal, scores, labels, size):
    """``cal``'s state saved with its Taylor moments cut to an older layout's ``size`` values loads,
    continues on ``scores``/``labels`` within ``TOL`` of ``cal`` and is saved again in today's layout."""
    state = copy.deepcopy(cal.__getstate__())  # (its arrays may be views of the calibrator's)
    state["_glm_moments"] = state["_glm_moments"][:size].copy()
    older = PlattCalibrator.__new__(PlattCalibrator)
    older.__setstate__(state)
    a, _ = cal.prequential(scores, labels)
    b, _ = older.prequential(scores, labels)
    assert float(np.max(np.abs(a - b))) <= TOL
    assert np.asarray(older.__getstate__()["_glm_moments"]).shape == (_g.MOM_SIZE,)
