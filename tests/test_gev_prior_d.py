"""GEV's score prior strength from ``D``'s Taylor block (``glm_refit.platt_prior_strength``).

While the score prior holds, GEV's refit takes the prior's strength ``kappa`` from the block of
Taylor moments of ``D``'s risk that the learn kernel keeps current per event, as Platt's does,
certified within ``PRIOR_D_TOL`` nats of ``D``'s maximum (the prior kernel's passes run where it
cannot). Checked here: at every refit of cold streams (unbounded and windowed), the strength GEV
serves against the prior kernel's from its cold start on the same histogram, within 1e-9 in
``log kappa``; every prediction within 1e-9 of a converged full refit is checked in
``test_gev_prior_lazy.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_platt_prior_d import assert_same_strength
from test_platt_prior_warm import naive_prior_strength

from streamcal import GEVCalibrator
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Unbounded


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(150)])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_strength_at_every_refit_matches_the_prior_kernel(window, seed):
    rng = np.random.default_rng(seed)
    n = 400
    z = rng.normal(-2.5, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-(0.9 * z + 0.2)))
    grid = LogitGrid()
    centres = grid.bucket_centres()
    index = grid.index(scores)
    cal = GEVCalibrator(window=window)
    held = 0
    for i in range(n):
        cal.predict_proba_one({"score": float(scores[i])})
        if i > 0:
            lo = max(0, i - 150) if isinstance(window, CountWindow) else 0
            pos = np.bincount(index[lo:i][labels[lo:i]], minlength=centres.size).astype(float)
            neg = np.bincount(index[lo:i][~labels[lo:i]], minlength=centres.size).astype(float)
            ref = naive_prior_strength(centres, pos, neg, True, 0.5)
            assert_same_strength(cal.prior_strength, ref)
            held += cal.prior_strength > 0.0
        cal.learn_one({"score": float(scores[i])}, bool(labels[i]))
    assert held >= n // 2  # the prior holds over most of the stream: the block's path is exercised
