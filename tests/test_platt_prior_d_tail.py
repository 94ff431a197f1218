"""The bound of the Taylor tail of ``D``'s value in ``glm_refit.prior_strength_moments``.

The model of ``D``'s risk keeps the terms ``c_k u^(k + 1) / (k + 1)`` of ``softplus(z + u) -
softplus(z)`` for ``k <= MOM_K`` (``c_k = sigma^(k)(z) / k!``); the certificate bounds the rest at
each bucket by ``PRIOR_D_C9 |u|^10 / 10`` plus Cauchy's estimate of the terms past it,
``WIDE_SUP WIDE_INV_R^9 rho |u|^10 / (11 (1 - rho))`` with ``rho >= |u| / WIDE_RADIUS``. Checked
here in exact rational arithmetic (``sigma^(k) = P_k(sigma)``, ``P_k`` with integer coefficients):
``PRIOR_D_C9`` is at least ``|c_9|`` at every ``sigma`` in ``[0, 1]``, and the bound is at least
the true tail (its series to order 60, plus that series' own Cauchy remainder) at any point and
step within the certificate's reach.
"""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal._kernels import glm_refit as _g

ORDERS = 60


def _sigma_polys(n):
    """``P_k`` (integer coefficients, lowest first) with ``sigma^(k) = P_k(sigma)``, ``k = 0 .. n``."""
    polys = [[0, 1]]
    for _ in range(n):
        p = polys[-1]
        d = [i * p[i] for i in range(1, len(p))]  # P'
        nxt = [0] * (len(d) + 2)
        for i, v in enumerate(d):  # P' sigma (1 - sigma)
            nxt[i + 1] += v
            nxt[i + 2] -= v
        polys.append(nxt)
    return polys


POLYS = _sigma_polys(ORDERS)


def coef(k, p):
    """``c_k = sigma^(k)(z) / k!`` at ``sigma(z) = p`` (exact)."""
    acc = Fraction(0)
    for v in reversed(POLYS[k]):
        acc = acc * p + v
    return acc / math.factorial(k)


def test_sigma_polys_match_known_values():
    # sigma'(0) = 1/4, sigma'''(0) = -1/8, c_9(0) = 31 / 1451520
    half = Fraction(1, 2)
    assert coef(1, half) == Fraction(1, 4)
    assert coef(3, half) == Fraction(-1, 48)
    assert coef(9, half) == Fraction(31, 1451520)
    assert coef(2, half) == 0


@settings(max_examples=300, deadline=None)
@given(st.fractions(min_value=0, max_value=1, max_denominator=10**9))
def test_c9_constant_bounds_the_coefficient(p):
    assert abs(coef(9, p)) <= Fraction(_g.PRIOR_D_C9)


@settings(max_examples=200, deadline=None)
@given(
    st.fractions(min_value=Fraction(1, 10**6), max_value=1 - Fraction(1, 10**6), max_denominator=10**6),
    st.floats(min_value=-_g.MOM_MAX_RHO * _g.WIDE_RADIUS, max_value=_g.MOM_MAX_RHO * _g.WIDE_RADIUS),
    st.floats(min_value=1.0, max_value=4.0),
)
def test_value_tail_bound_is_above_the_true_tail(p, u, slack):
    k1 = _g.MOM_K + 1
    uq = Fraction(u)
    rho = min(abs(u) / _g.WIDE_RADIUS * slack, _g.MOM_MAX_RHO)  # the certificate's rho >= |u| / R
    rho = max(rho, abs(u) / _g.WIDE_RADIUS)
    tail = sum(coef(k, p) * uq ** (k + 1) / (k + 1) for k in range(k1, ORDERS + 1))
    r = abs(u) / _g.WIDE_RADIUS
    rest = _g.WIDE_SUP * r ** (ORDERS + 1) * abs(u) / ((ORDERS + 2) * (1.0 - r))  # Cauchy past ORDERS
    bound = (
        _g.PRIOR_D_C9 / (k1 + 1) + _g.WIDE_SUP * _g.WIDE_INV_R**k1 * rho / ((k1 + 2) * (1.0 - rho))
    ) * abs(u) ** (k1 + 1)
    assert abs(float(tail)) + rest <= bound * (1.0 - 1e-12) or (u == 0.0 and bound == 0.0)
    # and it is tighter than the disc bound it replaces
    disc = _g.WIDE_SUP * _g.WIDE_INV_R**k1 / ((k1 + 1) * (1.0 - rho)) * abs(u) ** (k1 + 1)
    assert bound <= disc
