"""I-spline's exact default where the score prior holds, switches on and switches off.

While the score prior holds weight, every refit fits the histogram plus the prior's pseudo-counts
``m_b = kappa (n_b + f_b)``; the default knot count follows the data's weight ``sum n_b``, not the
pseudo-counts' total (which would ask for about 200 coefficients on a calibrated stream and move
with ``kappa`` at every refit). Checked here on every event of generated streams against an
independent reference: the prior's strength and pseudo-counts of ``streamcal._prior.score_prior``,
then the Python fit ``fit_distinct`` from its cold start with the knot count of the data's weight,
the served bounds and the LLR written out from the refit engine's rule. The strength from
Taylor moments (``streamcal._kernels.ispline_prior``), which the refits use for probability
inputs, is checked against the exact Newton kernel (``prior_strength_listed``) on rows one event
apart, and the calibrator against the engine with its own cold-started score prior.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import ISplineCalibrator
from streamcal._kernels import _config
from streamcal._kernels import ispline_prior as _kip
from streamcal._kernels import prior as _kp
from streamcal._prior import llr_from_proba, prior_logodds, proba_bounds, score_prior, smoothed
from streamcal._refit import RefitCalibrator
from streamcal.buckets import LogitGrid
from streamcal.exceptions import StateFileError
from streamcal.spline.basis import default_n_knots
from streamcal.spline.fit import evaluate_map, fit_scaled_histogram, unit_scaled
from streamcal.windows import CountWindow, Decay, Unbounded

TOL = 1e-9


def reference_prediction(cal, s):
    """The served probability and LLR of ``s`` refitted from ``cal``'s histogram by the naive rule,
    and the prior's strength there; ``None`` before any weight."""
    centres, pos, neg = cal.histogram()
    t_pos, t_neg = float(pos.sum()), float(neg.sum())
    if not t_pos + t_neg > 0.0:
        return None
    data_weight = t_pos + t_neg
    kappa, prior_pos, prior_neg = score_prior(centres, pos, neg, True, 1.0, floor="thinned")
    if kappa > 0.0:
        pos, neg = pos + prior_pos, neg + prior_neg
    pos, neg, total, _ = unit_scaled(pos, neg)
    fitted = fit_scaled_histogram(centres, pos, neg, total, 3, default_n_knots(data_weight), None, None)
    low, high = proba_bounds(total, 1.0)
    p = float(np.clip(evaluate_map(np.array([s]), fitted.knots, 3, fitted.bspline_coef)[0], low, high))
    llr = float(llr_from_proba(np.array([smoothed(p, total, 1.0)]), prior_logodds(t_pos, t_neg, 1.0))[0])
    return p, llr, kappa, fitted.knots.size


def stream(seed, n_first, n_second, shift_first, shift_second):
    """Logistic scores at a rare base rate; labels drawn at the score's log-odds plus a shift, one
    shift for the first part and another for the second (0: calibrated, the prior holds)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.5, 1.5, n_first + n_second)
    shift = np.where(np.arange(z.size) < n_first, shift_first, shift_second)
    scores = 1.0 / (1.0 + np.exp(-z))
    labels = rng.uniform(size=z.size) < 1.0 / (1.0 + np.exp(-(z + shift)))
    return scores, labels


def run_checked(cal, scores, labels):
    """``prequential`` one event at a time, each prediction checked against the reference; returns
    the strengths and knot counts the reference saw."""
    seen = []
    for i in range(scores.size):
        ref = reference_prediction(cal, float(scores[i]))
        p, llr = cal.prequential(scores[i : i + 1], labels[i : i + 1])
        if ref is None:
            continue
        assert abs(float(p[0]) - ref[0]) <= TOL, (i, float(p[0]), ref[0])
        assert abs(float(llr[0]) - ref[1]) <= TOL * (1.0 + abs(ref[1])), (i, float(llr[0]), ref[1])
        seen.append((ref[2], ref[3]))
    return seen


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n_first=st.integers(60, 250),
    n_second=st.integers(0, 200),
    shift_first=st.sampled_from([0.0, 0.0, 1.5, -1.5]),
    shift_second=st.sampled_from([0.0, 2.0, -2.0]),
    window=st.sampled_from([None, 120]),
)
def test_every_prediction_is_the_full_refit_with_the_datas_knot_count(
    seed, n_first, n_second, shift_first, shift_second, window
):
    scores, labels = stream(seed, n_first, n_second, shift_first, shift_second)
    cal = ISplineCalibrator() if window is None else ISplineCalibrator(window=CountWindow(window))
    run_checked(cal, scores, labels)


def test_the_prior_switches_on_and_off_within_one_stream():
    """Calibrated, then off by 2 in log-odds, then calibrated again in a count window: the prior
    holds, is refuted, and holds again, and every prediction is the reference's."""
    scores, labels = stream(5, 200, 200, 0.0, 2.5)
    more, more_labels = stream(6, 250, 0, 0.0, 0.0)
    scores, labels = np.concatenate([scores, more]), np.concatenate([labels, more_labels])
    seen = run_checked(ISplineCalibrator(window=CountWindow(150)), scores, labels)
    kappas = np.array([k for k, _ in seen])
    on = kappas > 0.0
    assert on[:150].mean() > 0.9  # in force at the start
    assert on[-50:].all()  # and at the end
    assert not on[300:400].any()  # refuted by the shifted labels
    assert np.count_nonzero(on[1:] != on[:-1]) >= 2


def test_the_knot_count_under_the_prior_follows_the_window_weight_not_the_pseudo_counts():
    scores, labels = stream(7, 3000, 0, 0.0, 0.0)
    cal = ISplineCalibrator(refit_every=100)
    cal.prequential(scores, labels)
    assert cal.prior_strength > 500.0  # the pseudo-counts outweigh the data hundreds of times
    interior = cal.knots_.size - 2 * (cal.order + 1)
    assert interior == default_n_knots(cal.window_weight) == 10
    # the same fit with the pseudo-counts' total counted would have about 200 interior knots
    assert default_n_knots(cal.window_weight * (1.0 + cal.prior_strength)) > 100


def test_the_strengths_warm_start_is_state_copies_and_saved_states_continue_alike():
    """The warm start is state: a copy and a saved state continue bit for bit alike, and within
    rounding of the original, whose strength reads the moments it kept (a cache: the twins set
    their anchor anew)."""
    scores, labels = stream(8, 700, 0, 0.0, 0.0)
    cal = ISplineCalibrator()
    cal.prequential(scores[:400], labels[:400])
    assert cal.prior_strength > 0.0
    twins = (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal)))
    a = cal.prequential(scores[400:], labels[400:])
    b = [twin.prequential(scores[400:], labels[400:]) for twin in twins]
    assert np.array_equal(b[0][0], b[1][0])
    assert np.array_equal(b[0][1], b[1][1])
    np.testing.assert_allclose(b[0][0], a[0], rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(b[0][1], a[1], rtol=1e-12, atol=1e-12)


def test_a_state_saved_before_the_warm_start_loads_and_continues_within_tolerance():
    scores, labels = stream(9, 700, 0, 0.0, 0.0)
    cal = ISplineCalibrator()
    cal.prequential(scores[:400], labels[:400])
    state = cal.__getstate__()
    del state["_prior_start"]  # its first refit starts the strength's fit from (0, 0)
    older = ISplineCalibrator.__new__(ISplineCalibrator)
    older.__setstate__(state)
    a, _ = cal.prequential(scores[400:], labels[400:])
    b, _ = older.prequential(scores[400:], labels[400:])
    assert float(np.max(np.abs(a - b))) <= TOL
    state = cal.__getstate__()
    state["_prior_start"] = np.array([0.0, np.nan])
    with pytest.raises(StateFileError, match="_prior_start"):
        ISplineCalibrator.__new__(ISplineCalibrator).__setstate__(state)


class ColdPriorEngine(ISplineCalibrator):
    """The engine's loop with the engine's score prior: ``streamcal._prior.score_prior`` from
    ``(0, 0)`` at every refit, no warm start and no Taylor moments."""

    _STREAM_LOOP = False

    def _with_score_prior(self, centres, pos, neg, c):
        return RefitCalibrator._with_score_prior(self, centres, pos, neg, c)


def calibrated(n, seed, shift=0.0, switch=None):
    """Logistic scores with labels drawn at the score (the prior holds), or at a shifted score
    from event ``switch`` on (the data refute it there)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.0, 1.5, n)
    truth = z.copy()
    if switch is not None:
        truth[switch:] += shift
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-truth))


def both_kernels(centres, pos, neg, start):
    B = centres.size
    row = np.concatenate((pos, neg))
    base_rate = (pos.sum() + 1.0) / (pos.sum() + neg.sum() + 2.0)
    grid = np.empty(3 * B)
    _config.run(_kip.prior_grid_constants, 0, centres, B, 0.5, grid)
    s_exact, s_taylor = start.copy(), start.copy()
    exact = _config.run(
        _kp.prior_strength_listed, 0, row, 0, B, 1.0, centres, 0, 1, base_rate, True, s_exact, np.empty(3 * B)
    )
    taylor, ran_exact = _config.run(
        _kip.prior_strength_taylor, 0, row, 0, B, 1.0, centres, 0, 1, base_rate, grid, s_taylor,
        np.empty(3 * B), np.empty((_kip.ORDER + 1, _kip.ORDER + 1)),
    )  # fmt: skip
    return exact, taylor, ran_exact, s_exact, s_taylor


@settings(max_examples=60, deadline=None)
@given(
    st.integers(30, 3000),
    st.integers(0, 2**32 - 1),
    st.sampled_from([64, 1024]),
    st.sampled_from([0.0, 0.3, -0.5, 2.0]),
)
def test_the_taylor_strength_is_the_exact_kernels_one_event_on(n, seed, n_buckets, shift):
    scores, labels = calibrated(n + 1, seed, shift, switch=0)
    cal = ISplineCalibrator(buckets=LogitGrid(n_buckets), refit_every=10**9)
    cal.update(scores[:n], labels[:n])
    centres, pos, neg = cal.histogram()
    start = np.zeros(2)
    both_kernels(centres, pos, neg, start)  # the row's fitted (a, b): the next row's start
    start = both_kernels(centres, pos, neg, start)[3]
    cal.update(scores[n:], labels[n:])
    exact, taylor, ran_exact, s_exact, s_taylor = both_kernels(*cal.histogram(), start)
    if exact in (0.0, _kp.KAPPA_MAX):
        assert taylor == exact
    else:
        assert abs(np.log(taylor) - np.log(exact)) <= 1e-10
    np.testing.assert_allclose(s_taylor, s_exact, rtol=0.0, atol=1e-5)
    if not ran_exact:
        # the moments' move is bounded: the (a, b) moved little from the start
        assert np.abs(s_taylor - start).max() < 0.5


def test_the_moments_serve_a_small_move_and_the_cold_start_runs_the_exact_kernel():
    scores, labels = calibrated(3001, 4)
    cal = ISplineCalibrator(refit_every=10**9)
    cal.update(scores[:3000], labels[:3000])
    centres, pos, neg = cal.histogram()
    exact, taylor, ran_exact, s_exact, _ = both_kernels(centres, pos, neg, np.zeros(2))
    assert ran_exact  # (0, 0) is far from the fitted (a, b)
    assert taylor == exact > 0.0
    cal.update(scores[3000:], labels[3000:])
    exact, taylor, ran_exact, _, _ = both_kernels(*cal.histogram(), s_exact)
    assert not ran_exact
    assert abs(np.log(taylor) - np.log(exact)) <= 1e-10


@settings(max_examples=25, deadline=None)
@given(
    st.integers(50, 600),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.0, 0.0, 0.4, 1.5, -1.0]),
    st.floats(0.0, 1.0),
    st.sampled_from([Unbounded(), CountWindow(150), Decay(100.0)]),
    st.sampled_from([{}, {}, {"n_knots": 3}]),
)
def test_the_exact_default_under_the_prior_is_within_1e9_of_the_engines_prior(n, seed, shift, at, window, spline):
    scores, labels = calibrated(n, seed, shift, switch=int(at * n))
    kw = {"buckets": LogitGrid(64), "window": window, **spline}
    cal = ISplineCalibrator(**kw)
    proba, llr = cal.prequential(scores, labels)
    ref_p, ref_llr = ColdPriorEngine(**kw).prequential(scores, labels)
    np.testing.assert_allclose(proba, ref_p, rtol=0.0, atol=TOL)
    np.testing.assert_allclose(llr, ref_llr, rtol=TOL, atol=TOL)


def test_a_long_calibrated_stream_holds_the_prior_and_stays_within_1e9():
    scores, labels = calibrated(3000, 11)
    kw = {"buckets": LogitGrid(256)}
    cal = ISplineCalibrator(**kw)
    proba, llr = cal.prequential(scores, labels)
    assert cal.prior_strength > 100.0  # the prior holds to the end
    ref_p, ref_llr = ColdPriorEngine(**kw).prequential(scores, labels)
    np.testing.assert_allclose(proba, ref_p, rtol=0.0, atol=TOL)
    np.testing.assert_allclose(llr, ref_llr, rtol=TOL, atol=TOL)
