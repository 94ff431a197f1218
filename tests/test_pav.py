"""Batch PAV, PAV-LLR and the batch isotonic calibrator against independent references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_closed_form, naive_pav_textbook
from sklearn.isotonic import IsotonicRegression

from streamcal._kernels.pav import pav_blocks_sorted
from streamcal.isotonic import IsotonicCalibrator, pav, pav_binary, pav_llr

weighted_data = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 4).map(float), min_size=n, max_size=n),
        st.lists(st.floats(0.05, 5.0), min_size=n, max_size=n),
    )
)


@given(weighted_data)
def test_pav_kernel_matches_naive(data):
    y, w = (np.array(v, dtype=np.float64) for v in data)
    np.testing.assert_allclose(pav(y, w), naive_pav_textbook(y, w), rtol=0, atol=1e-12)


def test_pav_matches_scipy_isotonic_regression(rng):
    for _ in range(20):
        n = int(rng.integers(1, 500))
        y = rng.normal(size=n).round(1)  # rounding makes ties among values
        w = rng.uniform(0.1, 3.0, size=n)
        expected = scipy.optimize.isotonic_regression(y, weights=w).x
        np.testing.assert_allclose(pav(y, w), expected, rtol=0, atol=1e-12)
        expected_dec = scipy.optimize.isotonic_regression(y, weights=w, increasing=False).x
        np.testing.assert_allclose(pav(y, w, increasing=False), expected_dec, rtol=0, atol=1e-12)


def test_calibrator_matches_sklearn_with_tied_scores(rng):
    for _ in range(10):
        n = int(rng.integers(5, 2000))
        scores = rng.integers(0, 50, size=n) / 50.0  # many ties
        labels = rng.uniform(size=n) < scores
        w = rng.uniform(0.1, 3.0, size=n)
        ref = IsotonicRegression(out_of_bounds="clip").fit(scores, labels.astype(float), sample_weight=w)
        cal = IsotonicCalibrator(finite_proba=False).fit(scores, labels, sample_weight=w)
        grid = np.concatenate([scores, rng.uniform(-0.2, 1.2, size=200)])
        np.testing.assert_allclose(cal.predict_proba(grid), ref.predict(grid), rtol=0, atol=1e-12)


def test_blocks_are_maximal_level_sets(rng):
    y = rng.integers(0, 3, size=400).astype(np.float64)
    w = np.ones_like(y)
    end, value, weight = np.empty(400, np.intp), np.empty(400), np.empty(400)
    nb = pav_blocks_sorted(y, w, end, value, weight)
    assert np.all(np.diff(value[:nb]) > 0)  # strictly increasing: equal neighbours were pooled
    assert end[nb - 1] == 400
    np.testing.assert_allclose(weight[:nb].sum(), 400.0)


@given(
    st.lists(st.booleans(), min_size=1, max_size=9),
    st.floats(0.1, 10.0),
    st.floats(0.1, 10.0),
)
def test_pav_binary_matches_closed_form(labels, v1, v2):
    labels = np.array(labels, dtype=np.float64)
    scores = np.arange(labels.size, dtype=np.float64)  # distinct scores, already in order
    got = pav_binary(scores, labels, positive_weight=v1, negative_weight=v2)
    np.testing.assert_allclose(got, naive_closed_form(labels, v1, v2), rtol=0, atol=1e-12)


def test_pav_llr_is_prior_independent(rng):
    """Paper 001 theorem 12: weighting classes by any prior and converting back gives the same LLRs."""
    for _ in range(20):
        n = int(rng.integers(2, 300))
        scores = rng.normal(size=n).round(1)
        labels = rng.uniform(size=n) < 1 / (1 + np.exp(-2 * scores))
        labels[0], labels[1] = True, False  # both classes present
        t1, t2 = labels.sum(), (~labels).sum()
        reference = pav_llr(scores, labels, finite=False)
        for prior_logodds in rng.normal(scale=3.0, size=4):
            prior = 1 / (1 + np.exp(-prior_logodds))
            p = pav_binary(scores, labels, positive_weight=prior / t1, negative_weight=(1 - prior) / t2)
            with np.errstate(divide="ignore"):
                llr = np.log(p) - np.log1p(-p) - prior_logodds
            finite = np.isfinite(reference)
            np.testing.assert_array_equal(np.isfinite(llr), finite)
            np.testing.assert_array_equal(llr[~finite], reference[~finite])
            np.testing.assert_allclose(llr[finite], reference[finite], rtol=0, atol=1e-9)


@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=80))
def test_finite_pav_llr_is_finite_and_keeps_score_order(events):
    scores = np.array([s for s, _ in events], dtype=np.float64)
    labels = np.array([y for _, y in events])
    llr = pav_llr(scores, labels)
    assert np.all(np.isfinite(llr))
    order = np.argsort(scores, kind="stable")
    assert np.all(np.diff(llr[order]) >= 0)
    for s in np.unique(scores):  # equal scores share one LLR
        assert np.ptp(llr[scores == s]) == 0


def test_exact_pav_llr_infinities_only_at_the_ends():
    llr = pav_llr([0.0, 1.0, 2.0, 3.0, 4.0], [0, 0, 1, 0, 1], finite=False)
    assert llr[0] == -np.inf
    assert llr[1] == -np.inf
    assert llr[4] == np.inf
    np.testing.assert_allclose(llr[2:4], np.log(0.5 / 0.5) - np.log(2 / 3))


def test_calibrator_step_interpolation_and_clipping():
    grid = [-5.0, 0.0, 0.5, 1.0, 1.5, 2.9, 3.0, 9.0]
    cal = IsotonicCalibrator(interpolation="step", finite_proba=False).fit([0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1])
    np.testing.assert_array_equal(cal.predict_proba(grid), [0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 1.0, 1.0])
    lin = IsotonicCalibrator(finite_proba=False).fit([0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1])
    np.testing.assert_allclose(lin.predict_proba([-1.0, 0.5, 2.5, 4.0]), [0.0, 0.25, 0.75, 1.0])
    # finite (default): the pseudo-positive below and the pseudo-negative above pool everything
    # (1, 0, 1, 0, 1, 0 in score order) into one block of rate 1/2
    finite = IsotonicCalibrator(interpolation="step").fit([0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1])
    np.testing.assert_array_equal(finite.predict_proba(grid), np.full(8, 0.5))


def test_calibrator_llr_matches_pav_llr_on_training_scores(rng):
    scores = rng.normal(size=500).round(2)
    labels = rng.uniform(size=500) < 1 / (1 + np.exp(-scores))
    for finite in (True, False):
        cal = IsotonicCalibrator(finite_llr=finite).fit(scores, labels)
        np.testing.assert_allclose(cal.predict_llr(scores), pav_llr(scores, labels, finite=finite), rtol=0, atol=1e-12)


def test_inputs_are_not_mutated(rng):
    scores = rng.normal(size=100)
    labels = (rng.uniform(size=100) < 0.5).astype(float)
    w = rng.uniform(size=100)
    copies = scores.copy(), labels.copy(), w.copy()
    pav(scores, w)
    pav_llr(scores, labels, w)
    IsotonicCalibrator().fit(scores, labels, w).predict_proba(scores)
    for original, copy in zip((scores, labels, w), copies):
        np.testing.assert_array_equal(original, copy)


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: pav([1.0, np.nan, 2.0]), r"`y` must be finite; got nan at position 1"),
        (lambda: pav([1.0, 2.0], w=[1.0, -1.0]), r"`w` must be finite and non-negative; got -1.0 at position 1"),
        (lambda: pav([1.0, 2.0], w=[1.0]), r"`w` must have the same length"),
        (lambda: pav([]), r"`y` must not be empty"),
        (lambda: pav_llr([0.1, np.inf], [0, 1]), r"`scores` must be finite; got inf at position 1"),
        (lambda: pav_llr([0.1, 0.2, 0.3], [0, 2, 1]), r"`labels` must hold binary labels .* got 2 at position 1"),
        (lambda: pav_llr([0.1, 0.2], [0, "a"]), r"`labels` must hold binary labels .* got 'a' at position 1"),
        (lambda: pav_llr([0.1, 0.2], [0, 1, 1]), r"`labels` must have the same length as the scores \(2\); got 3"),
        (lambda: pav_llr([0.1, 0.2], [1, 1], finite=False), r"`labels` must contain both classes"),
        (lambda: pav_binary([0.1, 0.2], [0, 1], [0.0, 0.0]), r"`weights` must not all be zero"),
        (lambda: IsotonicCalibrator(interpolation="cubic").fit([0.0, 1.0], [0, 1]), r"`interpolation` must be one of"),
        (lambda: IsotonicCalibrator().predict_proba([0.5]), r"not fitted yet"),
    ],
)
def test_bad_input_raises_clear_error(call, pattern):
    with pytest.raises((ValueError, TypeError, RuntimeError), match=pattern):
        call()
