"""GEV's six shapes while the score prior holds, without every shape's passes.

The fitted row is the data plus ``kappa`` times the prior's pattern; each shape's block keeps the
pattern's values at its fit and their change by the events apart from the data's, so that its
model follows ``kappa`` (``streamcal._kernels.glm_refit._steps_effective``): the predicted start,
the lazy shapes' Brier bound and the served shape's certified refit without a pass then serve
while the prior holds. Every prediction is compared with a converged full refit of the histogram
plus the prior's pseudo-counts (as the Python engine adds them). ``GEVCalibrator(xi="auto")``
serves its logistic member while the prior holds, so these run its shapes without the member
(``ShapesUnderThePrior``), as a fixed ``xi`` runs its one shape.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gev_compiled_refit import ShapesUnderThePrior, glm_arrays, naive_prior_refit_proba
from test_gev_lazy_shapes import assert_an_older_layout_continues, assert_copies_continue

from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Unbounded

TOL = 1e-9


def decent_stream(n, seed, slope=1.3, offset=0.5):
    """A rare-event stream whose score is close to the truth: the prior holds for long."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, n)
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(slope * z + offset)))


def run_against_a_full_refit(cal, scores, labels, weights=None):
    """Predict then learn every event; returns the largest difference from a converged full refit
    (wherever it has a fit), how many refits were of each kind (3: the served shape without a
    pass, ``ok`` 3; 2: some shape waited, ``ok`` 2; 1: every shape by passes; 4: the served shape
    without a pass while some other shape ran its passes, ``ok`` 3 and 1), the prior's least
    strength and the served shapes."""
    worst, kinds, kappa, served = 0.0, {1: 0, 2: 0, 3: 0, 4: 0}, np.inf, set()
    for i in range(scores.size):
        x = {"score": float(scores[i])}
        p = cal.predict_proba_one(x)[True]
        if cal.xi_ is not None:  # (no fit while the window holds no weight)
            ok = set(glm_arrays(cal).ok.tolist())
            kinds[1] += int(ok == {1})
            kinds[2] += int(2 in ok)
            kinds[3] += int(3 in ok)
            kinds[4] += int({1, 3} <= ok)
            kappa = min(kappa, cal.prior_strength)
            served.add(cal.xi_)
            worst = max(worst, abs(p - float(naive_prior_refit_proba(cal, scores[i : i + 1])[0])))
        cal.learn_one(x, bool(labels[i]), w=1.0 if weights is None else float(weights[i]))
    return worst, kinds, kappa, served


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(300)])
def test_every_prediction_from_the_first_event_stays_within_the_tolerance(window):
    scores, labels = decent_stream(1300, 0)
    cal = ShapesUnderThePrior(window=window)
    worst, kinds, kappa, served = run_against_a_full_refit(cal, scores, labels)
    assert worst <= TOL
    assert kappa > 0.0  # the prior held at every refit
    assert kinds[3] > 20  # the served shape without a pass
    assert kinds[4] > 20  # also while other shapes ran their passes
    assert kinds[2] > scores.size // 2  # shapes waited at most refits
    assert len(served) >= 2  # and the served shape changed


@st.composite
def streams(draw):
    n = draw(st.integers(120, 400))
    seed = draw(st.integers(0, 2**32 - 1))
    scores, labels = decent_stream(n, seed, draw(st.floats(0.8, 1.6)), draw(st.floats(-0.5, 1.0)))
    rng = np.random.default_rng(seed)
    weights = rng.choice([0.0, 0.5, 1.0, 1.0, 2.0], n) if draw(st.booleans()) else None
    return scores, labels, weights, draw(st.sampled_from(["unbounded", "count 150"]))


@settings(max_examples=15, deadline=None)
@given(streams())
def test_hypothesis_streams_where_the_prior_holds_stay_within_the_tolerance(stream):
    scores, labels, weights, window = stream
    cal = ShapesUnderThePrior(buckets=LogitGrid(128), window=Unbounded() if window == "unbounded" else CountWindow(150))
    worst, _, _, _ = run_against_a_full_refit(cal, scores, labels, weights)
    assert worst <= TOL


def test_a_copy_and_a_pickle_continue_bit_for_bit_while_the_prior_holds():
    scores, labels = decent_stream(900, 1)
    cal = ShapesUnderThePrior()
    cal.prequential(scores[:400], labels[:400])
    assert cal.prior_strength > 0.0
    i = 400
    while np.max(glm_arrays(cal).ok) < 2:  # on to a refit where shapes waited
        cal.predict_proba_one({"score": float(scores[i])})
        cal.learn_one({"score": float(scores[i])}, bool(labels[i]))
        i += 1
    assert_copies_continue(cal, scores[i:], labels[i:])


def test_a_state_in_the_layout_before_the_prior_pattern_loads_and_continues():
    scores, labels = decent_stream(900, 2)
    cal = ShapesUnderThePrior()
    cal.prequential(scores[:500], labels[:500])
    twin = copy.deepcopy(cal)
    assert_an_older_layout_continues(cal, scores, labels, 500, 6, 43)  # 43 values per shape
    assert twin.prior_strength > 0.0


def test_the_array_face_equals_a_loop_of_the_river_face_while_the_prior_holds():
    scores, labels = decent_stream(700, 3)
    cal = ShapesUnderThePrior()
    river = copy.deepcopy(cal)
    want, _ = cal.prequential(scores, labels)
    got = []
    for s, y in zip(scores, labels, strict=True):
        got.append(river.predict_proba_one({"score": float(s)})[True])
        river.learn_one({"score": float(s)}, bool(y))
    assert np.array_equal(np.array(got), want)


@settings(max_examples=10, deadline=None)
@given(streams())
def test_hypothesis_streams_give_the_river_face_the_bits_of_prequential(stream):
    # while the prior holds, with the served shape certified while other shapes run their passes
    scores, labels, weights, window = stream
    cal = ShapesUnderThePrior(buckets=LogitGrid(128), window=Unbounded() if window == "unbounded" else CountWindow(150))
    river = copy.deepcopy(cal)
    w = np.ones(scores.size) if weights is None else weights
    want, _ = cal.prequential(scores, labels, weights=w)
    got = []
    for s, y, v in zip(scores, labels, w, strict=True):
        got.append(river.predict_proba_one({"score": float(s)})[True])
        river.learn_one({"score": float(s)}, bool(y), w=float(v))
    if np.any(w != np.round(w)):
        # with fractional weights the two faces of this configuration (the shapes served under the
        # prior: no user's since the logistic member serves there) can differ in the last bits at
        # a refit (2.8e-17 found, compiled and interpreted alike): a known discrepancy, bounded here
        np.testing.assert_allclose(np.array(got), want, rtol=0.0, atol=1e-15)
    else:
        assert np.array_equal(np.array(got), want)
