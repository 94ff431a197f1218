"""I-spline's exact default where the score prior holds, switches on and switches off.

While the score prior holds weight, every refit fits the histogram plus the prior's pseudo-counts
``m_b = kappa (n_b + f_b)``; the default knot count follows the data's weight ``sum n_b``, not the
pseudo-counts' total (which would ask for about 200 coefficients on a calibrated stream and move
with ``kappa`` at every refit). Checked here on every event of generated streams against an
independent reference: the prior's strength and pseudo-counts of ``streamcal._prior.score_prior``,
then the Python fit ``fit_distinct`` from its cold start with the knot count of the data's weight,
the served bounds and the LLR written out from the refit engine's rule.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import ISplineCalibrator
from streamcal._prior import llr_from_proba, prior_logodds, proba_bounds, score_prior, smoothed
from streamcal.exceptions import StateFileError
from streamcal.spline.basis import default_n_knots
from streamcal.spline.fit import evaluate_map, fit_scaled_histogram, unit_scaled
from streamcal.windows import CountWindow

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


def test_the_strengths_warm_start_is_state_copies_and_saved_states_continue_bit_for_bit():
    scores, labels = stream(8, 700, 0, 0.0, 0.0)
    cal = ISplineCalibrator()
    cal.prequential(scores[:400], labels[:400])
    assert cal.prior_strength > 0.0
    twins = (copy.deepcopy(cal), pickle.loads(pickle.dumps(cal)))
    a = cal.prequential(scores[400:], labels[400:])
    for twin in twins:
        b = twin.prequential(scores[400:], labels[400:])
        assert np.array_equal(a[0], b[0])
        assert np.array_equal(a[1], b[1])


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
