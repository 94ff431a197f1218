"""The GEV refit's warm start when a sliding window leaves the support of the previous fit."""

import numpy as np
import pytest

from streamcal import GEVCalibrator
from streamcal.gev import fit_glm_on_histogram
from streamcal.windows import CountWindow


@pytest.mark.parametrize("seed", range(3))
def test_small_window_with_zero_weights_streams_through(seed):
    # a 7-event window with zero and fractional weights slides its non-empty buckets outside the
    # support of the previous fit at some refit; the refit then starts afresh instead of failing
    rng = np.random.default_rng(seed)
    n = 3000
    s = rng.uniform(size=n)
    y = rng.uniform(size=n) < s
    w = rng.choice([0.0, 0.3, 1.0], n)
    p, llr = GEVCalibrator(window=CountWindow(7)).prequential(s, y, weights=w)
    assert p.shape == (n,)
    assert np.all((p > 0.0) & (p < 1.0))
    assert np.all(np.isfinite(llr))


def test_warm_start_outside_the_support_is_replaced_by_the_default_start():
    x = np.linspace(-3.0, 3.0, 7)
    pos = np.array([0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    neg = pos[::-1].copy()
    outside = np.array([0.0, 50.0])  # v = 50, beyond R_xi = (-inf, 2) of xi = -0.5
    with pytest.raises(ValueError, match="`beta0`"):
        fit_glm_on_histogram(x, pos, neg, xi=-0.5, beta0=outside)
    cold = fit_glm_on_histogram(x, pos, neg, xi=-0.5)
    warm = fit_glm_on_histogram(x, pos, neg, xi=-0.5, warm_start=outside)
    np.testing.assert_array_equal(warm, cold)


def test_warm_start_inside_the_support_is_used():
    x = np.linspace(-3.0, 3.0, 7)
    p = 1.0 / (1.0 + np.exp(-(2.0 * x - 1.0)))
    pos, neg = 1000.0 * p, 1000.0 * (1.0 - p)
    fit = fit_glm_on_histogram(x, pos, neg, xi=0.0)
    start = fit + np.array([0.01, -0.01])
    np.testing.assert_array_equal(
        fit_glm_on_histogram(x, pos, neg, xi=0.0, warm_start=start),
        fit_glm_on_histogram(x, pos, neg, xi=0.0, beta0=start),
    )
    assert np.all(start == fit + np.array([0.01, -0.01]))  # the caller's start is not written into


def test_warm_start_must_be_two_finite_numbers():
    x = np.linspace(-3.0, 3.0, 7)
    pos = np.ones(7)
    with pytest.raises(ValueError, match="`warm_start`"):
        fit_glm_on_histogram(x, pos, pos, warm_start=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="warm_start"):
        fit_glm_on_histogram(x, pos, pos, warm_start=[1.0, np.nan])
