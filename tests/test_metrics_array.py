"""Array metrics against independent computations (naive loops, scikit-learn, scipy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import (
    naive_calibration_loss,
    naive_cllr,
    naive_ece_uniform,
    naive_hosmer_lemeshow,
    naive_log_loss,
    naive_min_cllr,
)
from scipy import stats
from sklearn.metrics import brier_score_loss
from sklearn.metrics import log_loss as sk_log_loss

from streamcal.metrics import (
    brier_score,
    calibration_loss,
    cllr,
    ece,
    hosmer_lemeshow,
    log_loss,
    min_cllr,
)

# --- data ------------------------------------------------------------------------------------


@pytest.fixture
def data(rng):
    n = 300
    p = rng.uniform(0, 1, n)
    y = (rng.uniform(size=n) < p**1.5).astype(int)
    w = rng.exponential(size=n)
    return y, p, w


# --- Brier, log loss ----------------------------------------------------------------------------


def test_brier_matches_sklearn(data):
    y, p, w = data
    assert brier_score(y, p) == pytest.approx(brier_score_loss(y, p), rel=1e-13)
    assert brier_score(y, p, w) == pytest.approx(brier_score_loss(y, p, sample_weight=w), rel=1e-13)


def test_log_loss_matches_sklearn_with_its_clipping(data):
    y, p, w = data
    p = p.copy()
    p[:3] = [0.0, 1.0, 0.5]
    eps = np.finfo(np.float64).eps
    assert log_loss(y, p, eps=eps) == pytest.approx(sk_log_loss(y, p), rel=1e-12)
    assert log_loss(y, p, w, eps=eps) == pytest.approx(sk_log_loss(y, p, sample_weight=w), rel=1e-12)


def test_log_loss_matches_naive_and_handles_certain_predictions(data):
    y, p, w = data
    assert log_loss(y, p, w) == pytest.approx(naive_log_loss(y, p, w), rel=1e-12)
    assert log_loss([1, 0], [1.0, 0.0]) == 0.0
    assert log_loss([1, 0], [0.0, 0.0]) == math.inf
    assert log_loss([1, 0], [0.0, 0.0], [0.0, 1.0]) == 0.0  # an infinite loss of weight 0 counts 0


def test_inputs_are_not_mutated(data):
    y, p, w = data
    copies = [a.copy() for a in data]
    log_loss(y, p, w, eps=1e-6)
    ece(y, p, 5, "quantile", w)
    hosmer_lemeshow(y, p, weights=w)
    for a, b in zip(data, copies):
        np.testing.assert_array_equal(a, b)


# --- Cllr, minCllr ----------------------------------------------------------------------------


def test_cllr_matches_naive(data, rng):
    y, _, w = data
    llr = rng.normal(0, 3, y.size)
    assert cllr(y, llr) == pytest.approx(naive_cllr(y, llr, np.ones_like(llr)), rel=1e-12)
    assert cllr(y, llr, w) == pytest.approx(naive_cllr(y, llr, w), rel=1e-12)


def test_cllr_infinite_llrs():
    assert cllr([0, 1], [0.0, 0.0]) == 1.0
    assert cllr([0, 1], [-math.inf, math.inf]) == 0.0
    assert cllr([0, 1], [math.inf, math.inf]) == math.inf
    assert cllr([0, 1, 1], [-math.inf, math.inf, -math.inf], [1.0, 1.0, 0.0]) == 0.0


def test_min_cllr_matches_naive(data, rng):
    y, p, w = data
    s = np.round(p, 2)  # ties
    assert min_cllr(y, s) == pytest.approx(naive_min_cllr(y, s, np.ones(y.size)), rel=1e-10)
    assert min_cllr(y, s, w) == pytest.approx(naive_min_cllr(y, s, w), rel=1e-10)


def test_min_cllr_depends_only_on_order(data):
    y, p, _ = data
    s = np.round(p, 2)
    base = min_cllr(y, s)
    assert min_cllr(y, np.log(s + 1e-3) * 7 - 3) == pytest.approx(base, rel=1e-12)
    s_inf = s.copy()
    s_inf[s == s.max()] = math.inf
    s_inf[s == s.min()] = -math.inf
    assert min_cllr(y, s_inf) == pytest.approx(base, rel=1e-12)


@given(
    labels=st.lists(st.booleans(), min_size=2, max_size=40).filter(lambda v: any(v) and not all(v)),
    seed=st.integers(0, 2**32 - 1),
)
def test_min_cllr_never_exceeds_cllr(labels, seed):
    rng = np.random.default_rng(seed)
    y = np.array(labels, dtype=float)
    llr = np.round(rng.normal(0, 2, y.size), 1)
    w = rng.exponential(size=y.size) if seed % 2 else None
    if w is not None:
        w[y == 1] += 0.1
        w[y == 0] += 0.1
    assert min_cllr(y, llr, w) <= cllr(y, llr, w) + 1e-12
    assert 0.0 <= min_cllr(y, llr, w) <= 1.0 + 1e-12


# --- binned metrics ------------------------------------------------------------------------------


@pytest.mark.parametrize("n_bins", [1, 3, 10])
def test_ece_uniform_matches_naive(data, n_bins):
    y, p, w = data
    p = p.copy()
    p[:4] = [0.0, 1.0, 0.5, 0.3]  # values on edges
    assert ece(y, p, n_bins) == pytest.approx(naive_ece_uniform(y, p, np.ones(y.size), n_bins), rel=1e-12)
    assert ece(y, p, n_bins, weights=w) == pytest.approx(naive_ece_uniform(y, p, w, n_bins), rel=1e-12)


def test_ece_quantile_bins_hold_equal_counts(rng):
    n = 1000
    p = rng.uniform(size=n)
    y = rng.uniform(size=n) < p
    # equal-count bins over sorted data, as a naive reference
    order = np.argsort(p)
    total = 0.0
    for chunk in np.array_split(order, 10):
        total += abs(y[chunk].sum() - p[chunk].sum())
    assert ece(y, p, 10, "quantile") == pytest.approx(total / n, rel=1e-12)


def test_ece_quantile_weights_act_as_repetition(rng):
    p = rng.uniform(size=60)
    y = rng.uniform(size=60) < p
    counts = rng.integers(0, 4, size=60)
    counts[0] = 1
    assert ece(y, p, 7, "quantile", counts) == pytest.approx(
        ece(np.repeat(y, counts), np.repeat(p, counts), 7, "quantile"), rel=1e-12
    )


def test_calibration_loss_matches_naive(data):
    y, p, _ = data
    p = p.copy()
    p[:3] = [0.0, 1.0, 0.9]
    assert calibration_loss(y, p) == pytest.approx(naive_calibration_loss(y, p), rel=1e-12)


def test_calibration_loss_is_brier_reliability_plus_within_bin_spread(data):
    y, p, _ = data
    ids = np.minimum((p * 10).astype(int), 9)
    rel = spread = 0.0
    for b in np.unique(ids):
        m = ids == b
        rel += m.sum() * (p[m].mean() - y[m].mean()) ** 2
        spread += m.sum() * p[m].var()
    assert calibration_loss(y, p) == pytest.approx((rel + spread) / y.size, rel=1e-10)


def test_hosmer_lemeshow_matches_naive_and_chi2(rng):
    p = rng.uniform(0.05, 0.95, 500)
    y = (rng.uniform(size=500) < p).astype(int)
    stat, pvalue = hosmer_lemeshow(y, p)
    ref_stat, ref_p = naive_hosmer_lemeshow(y, p, 10)
    assert stat == pytest.approx(ref_stat, rel=1e-10)
    assert pvalue == pytest.approx(ref_p, rel=1e-10)
    assert pvalue == pytest.approx(stats.chi2.sf(stat, 8), rel=1e-12)


def test_hosmer_lemeshow_ties_and_uniform_groups():
    p = np.array([0.1] * 50 + [0.9] * 50)
    y = np.array([0] * 45 + [1] * 5 + [1] * 45 + [0] * 5)
    stat, pvalue = hosmer_lemeshow(y, p)
    assert stat == pytest.approx(0.0, abs=1e-12)  # perfectly calibrated, two non-empty groups
    assert math.isnan(pvalue)  # dof = 2 - 2 = 0
    stat, pvalue = hosmer_lemeshow(y, p, 10, strategy="uniform")
    assert stat == pytest.approx(0.0, abs=1e-12)
    # E = 0 with O > 0 gives an infinite statistic
    stat, pvalue = hosmer_lemeshow([1, 0, 0, 1], [0.0, 0.0, 0.5, 0.6], 2, strategy="uniform")
    assert stat == math.inf


# --- bad input ---------------------------------------------------------------------------------

FUNCS = [
    lambda y, p, **kw: brier_score(y, p, **kw),
    lambda y, p, **kw: log_loss(y, p, **kw),
    lambda y, p, **kw: ece(y, p, **kw),
    lambda y, p, **kw: ece(y, p, strategy="quantile", **kw),
    lambda y, p, **kw: calibration_loss(y, p, **kw),
    lambda y, p, **kw: hosmer_lemeshow(y, p, **kw),
]


@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize(
    ("labels", "proba", "weights", "match"),
    [
        ([0, 1, 2], [0.1, 0.2, 0.3], None, r"`labels` must hold binary labels.*got 2 at position 2"),
        ([0, 1, np.nan], [0.1, 0.2, 0.3], None, r"`labels`.*nan at position 2"),
        (["a", 1, 0], [0.1, 0.2, 0.3], None, r"`labels`.*'a' at position 0"),
        ([0, 1, 1], [0.1, np.nan, 0.3], None, r"`proba`.*nan at position 1"),
        ([0, 1, 1], [0.1, 0.2, np.inf], None, r"`proba`.*inf at position 2"),
        ([0, 1, 1], [0.1, 1.2, 0.3], None, r"`proba` must hold probabilities in \[0, 1\]; got 1.2 at position 1"),
        ([0, 1, 1], [-0.1, 0.2, 0.3], None, r"`proba`.*-0.1 at position 0"),
        ([0, 1, 1], [0.1, 0.2], None, r"`proba` must have the same length as `labels` \(3\); got 2"),
        ([0, 1, 1], [0.1, 0.2, 0.3], [1.0, 1.0], r"`weights` must have the same length as `labels` \(3\); got 2"),
        ([0, 1, 1], [0.1, 0.2, 0.3], [1.0, -1.0, 1.0], r"`weights`.*-1.0 at position 1"),
        ([0, 1, 1], [0.1, 0.2, 0.3], [1.0, np.nan, 1.0], r"`weights`.*nan at position 1"),
        ([0, 1, 1], [0.1, 0.2, 0.3], [0.0, 0.0, 0.0], r"`weights` must not all be zero"),
        ([], [], None, r"`labels` must not be empty"),
    ],
)
def test_bad_input_is_named(func, labels, proba, weights, match):
    with pytest.raises((ValueError, TypeError), match=match):
        func(labels, proba, weights=weights)


@pytest.mark.parametrize("func", [cllr, min_cllr])
def test_llr_metrics_reject_bad_input(func):
    with pytest.raises(ValueError, match=r"`\w+` must not be NaN; got nan at position 1"):
        func([0, 1], [0.0, np.nan])
    with pytest.raises(ValueError, match="both classes"):
        func([1, 1], [0.0, 1.0])
    with pytest.raises(ValueError, match="both classes"):
        func([0, 1], [0.0, 1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"same length as `labels` \(2\); got 3"):
        func([0, 1], [0.0, 1.0, 2.0])


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"`n_bins` must be an int in \[1, inf\); got 0"):
        ece([0, 1], [0.1, 0.2], n_bins=0)
    with pytest.raises(ValueError, match=r"`strategy` must be one of"):
        ece([0, 1], [0.1, 0.2], strategy="median")
    with pytest.raises(ValueError, match=r"`n_groups`"):
        hosmer_lemeshow([0, 1], [0.1, 0.2], n_groups=0)
    with pytest.raises(ValueError, match=r"`eps` must be a number in \[0.0, 0.5\)"):
        log_loss([0, 1], [0.1, 0.2], eps=0.5)
