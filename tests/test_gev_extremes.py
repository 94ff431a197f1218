"""GEV special functions at the edges of float64: far-negative gamma arguments, huge shapes, ±inf."""

import math

import numpy as np
import pytest

from streamcal import gev
from streamcal._kernels import gev as kernels


def upper_gamma_by_recurrence(a, x):
    """Gamma(a, x) for a <= -0.5 by the downward recurrence from a0 in (-0.5, 0.5] (slow, -a steps)."""
    n = math.ceil(-0.5 - a)
    a0 = a + n
    g = kernels._upper_gamma_small_a_small_x(a0, x)
    lx = math.log(x)
    for j in range(1, n + 1):
        aj = a0 - j
        g = (g - math.exp(aj * lx - x)) / aj
    return g


@pytest.mark.parametrize("a", [-64.5, -70.3, -100.0, -500.5, -3000.0])
@pytest.mark.parametrize("x", [1e-30, 1e-5, 0.01, 0.3, 1.0, 1.49])
def test_upper_gamma_far_below_zero_agrees_with_the_recurrence(a, x):
    if a * math.log(x) > 700.0:  # x^a beyond float64: the recurrence itself overflows
        assert gev.upper_incomplete_gamma(a, [x])[0] == math.inf
        return
    expected = upper_gamma_by_recurrence(a, x)
    assert gev.upper_incomplete_gamma(a, [x])[0] == pytest.approx(expected, rel=1e-13)


@pytest.mark.parametrize("a", [-1e6, -1e12, -1e20, -1e300])
def test_upper_gamma_far_below_zero_is_immediate(a):
    # Gamma(a, 1) = e^-1 / (1 - a) (1 + O(1/a^2)): one continued-fraction step, not -a recurrences
    out = gev.upper_incomplete_gamma(a, [1e-10, 1.0, 2.0])
    assert out[0] == math.inf
    assert out[1] == pytest.approx(math.exp(-1.0) / (1.0 - a), rel=1e-12)
    assert out[2] == 0.0 or out[2] < 1e-300


def test_upper_gamma_of_a_large_positive_argument_overflows_to_inf():
    assert gev.upper_incomplete_gamma(1e20, [1e19, 100.0]).tolist() == [math.inf, math.inf]


@pytest.mark.parametrize("xi", [-2.0, -0.5, 0.0, 0.5, 1.0, 2.0])
def test_canonical_loss_at_infinite_scores_is_its_limit(xi):
    at_plus = gev.gev_canonical_loss([1, 0], [math.inf, math.inf], xi).tolist()
    at_minus = gev.gev_canonical_loss([1, 0], [-math.inf, -math.inf], xi).tolist()
    # a positive: the loss falls towards +inf scores (to 0, or without bound for the shifted
    # loss of xi >= 1); a negative: 0 at -inf, unbounded at +inf
    assert at_plus == [-math.inf if xi >= 1.0 else 0.0, math.inf]
    assert at_minus == [math.inf, 0.0]


@pytest.mark.parametrize("xi", [-1e300, -1e20, -1e6, -1000.0, -172.0, 1e6, 1e20, 1e300])
def test_canonical_loss_of_huge_shapes_is_never_nan(xi):
    v = np.array([-math.inf, -1e300, -10.0, -0.5, 0.0, 0.5, 10.0, 1e300, math.inf])
    for y in (0, 1):
        out = gev.gev_canonical_loss(np.full(v.size, y), v, xi)
        assert not np.isnan(out).any(), (y, out)
    # a positive's loss falls as the score rises (its derivative is F - 1 <= 0)
    out = gev.gev_canonical_loss(np.ones(v.size), v, xi)
    assert np.all(out[:-1] >= out[1:])


@pytest.mark.parametrize("xi", [-0.75, -2.0, -10.0, -50.0, -100.0, -170.0])
@pytest.mark.parametrize("v", [-1e30, -1e5, -10.0, -1.0, -0.6])
def test_canonical_loss_of_a_positive_against_scipy(xi, v):
    # l(1, v) = Gamma(a, t) - Gamma(a) - v - 1/xi = -gamma(a, t) - v - 1/xi with a = -xi
    special = pytest.importorskip("scipy.special")
    a = -xi
    t, _ = kernels.gev_t_u(v, xi)
    expected = -special.gamma(a) * special.gammainc(a, t) - v - 1.0 / xi
    got = gev.gev_canonical_loss([1], [v], xi)[0]
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
