"""The score prior's strength where Newton's step leaves the kept moments' radius (``ispline_prior_stream``).

``prior_strength_kept`` runs Newton's method on Taylor moments about an anchor; a trial point
beyond the remainder's bound (a label of large leverage moves ``(a, b)`` that far now and then)
sets a new anchor at the trial point and continues there (``_newton_anchored``), up to
``REANCHOR_MAX`` times, instead of the exact kernel's passes. Checked on every event of a
calibrated stream on 1,024 buckets against the exact Newton kernel (``prior.prior_strength_listed``,
from its own warm start): ``log kappa`` within 1e-10, no event left to the exact kernel, and some
events served from an anchor moved to a trial point. From a far start (miscalibrated rows, the
cold start) the steps either converge within 1e-10 of ``prior_strength_taylor`` or leave its
result and the anchor at the start to the last bit (its fallback).
"""

from __future__ import annotations

import numpy as np
import pytest
from ispline_loops import prior_scratch

from streamcal import ISplineCalibrator
from streamcal._kernels import _config
from streamcal._kernels import histogram as _hk
from streamcal._kernels import ispline_prior as _kip
from streamcal._kernels import ispline_prior_stream as _kips
from streamcal._kernels import prior as _kp
from streamcal.buckets import LogitGrid


def grid_of(cal):
    centres = np.ascontiguousarray(cal.histogram()[0])
    grid = np.empty(3 * centres.size)
    _config.run(_kip.prior_grid_constants, 0, centres, centres.size, 0.5, grid)
    return centres, grid


def test_moves_beyond_the_radius_take_new_anchors_within_1e10_of_the_exact_kernel():
    rng = np.random.default_rng(3)
    n, first = 3000, 1500
    z = rng.normal(-3.0, 1.5, n)  # the bench's calibrated stream: rare positives of large leverage
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=n) < scores
    cal = ISplineCalibrator(buckets=LogitGrid(1024), refit_every=10**9)
    cal.update(scores[:first], labels[:first])
    centres, grid = grid_of(cal)
    B = centres.size
    kept_start, exact_start = np.zeros(2), np.zeros(2)
    work = prior_scratch(B)
    kept = work[1]
    hows, moved = [], 0
    for i in range(first, n):
        cal.update(scores[i : i + 1], labels[i : i + 1])
        floats = cal.window_histogram.live_arrays()[0]
        before = kept_start.copy()
        kappa, how = _config.run(
            _kips.prior_strength_kept, 0, floats, _hk.SF_HEADER, B, cal.window_histogram.stored_unit(), centres,
            grid, kept_start, *work,
        )  # fmt: skip
        pos, neg = cal.window_histogram.real_weights()
        exact = _config.run(
            _kp.prior_strength_listed, 0, np.concatenate((pos, neg)), 0, B, 1.0, centres, 0, 1, 0.5, True,
            exact_start, np.empty(3 * B),
        )  # fmt: skip
        assert kappa > 10.0  # the prior holds
        assert exact > 10.0
        assert abs(np.log(kappa) - np.log(exact)) <= 1e-10, i
        np.testing.assert_allclose(kept_start, exact_start, rtol=0.0, atol=1e-5)
        hows.append(how)
        # an anchor away from the call's start: set at a trial point beyond the remainder's bound
        moved += how == 1 and (kept[_kips.K_A], kept[_kips.K_B]) != (before[0], before[1])
    assert set(hows) <= {0, 1}  # never the exact kernel's passes
    assert moved >= 3


@pytest.mark.parametrize("shift", [0.3, 1.0, 2.0])
@pytest.mark.parametrize("n", [300, 3000])
def test_a_far_start_converges_or_leaves_the_taylor_kernels_bits(shift, n):
    rng = np.random.default_rng(1)
    z = rng.normal(-2.5, 1.5, n)
    cal = ISplineCalibrator(buckets=LogitGrid(1024), refit_every=10**9)
    cal.update(1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(z + shift))))
    centres, grid = grid_of(cal)
    B = centres.size
    floats = cal.window_histogram.live_arrays()[0]
    unit = cal.window_histogram.stored_unit()
    start = np.zeros(2)  # the cold start, far from a miscalibrated row's optimum
    work = prior_scratch(B)
    kappa, how = _config.run(_kips.prior_strength_kept, 0, floats, _hk.SF_HEADER, B, unit, centres, grid, start, *work)
    taylor_start = np.zeros(2)
    taylor, _ = _config.run(
        _kip.prior_strength_taylor, 0, floats, _hk.SF_HEADER, B, unit, centres, 0, 1, 0.5, grid, taylor_start,
        np.empty(3 * B), np.empty(work[5].shape),
    )  # fmt: skip
    if how >= 2:  # the fallback: the taylor kernel's result, the anchor at the start
        assert (kappa, *start) == (taylor, *taylor_start)
        assert (work[1][_kips.K_A], work[1][_kips.K_B]) == (0.0, 0.0)
    elif taylor in (0.0, _kp.KAPPA_MAX):
        assert kappa == taylor
    else:
        assert how == 1
        assert abs(np.log(kappa) - np.log(taylor)) <= 1e-10
        np.testing.assert_allclose(start, taylor_start, rtol=0.0, atol=1e-6)
    if shift == 2.0:
        assert how >= 2  # more steps than the new anchors allow
    if shift == 0.3:
        assert how == 1
