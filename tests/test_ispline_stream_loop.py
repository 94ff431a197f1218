"""The compiled per-event loop of ISplineCalibrator's lazy refit (streamcal._kernels.ispline_stream)
against the refit engine's own loop: every prediction within 1e-9, on every window kind, with and
without the score prior, including the streams whose prior strength is not certified 0."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal import ISplineCalibrator
from streamcal._refit import RefitCalibrator
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded


class StreamLoop(ISplineCalibrator):
    _STREAM_LOOP = True


class EngineLoop(ISplineCalibrator):
    def _run_ops(self, *args):
        RefitCalibrator._run_ops(self, *args)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("window", [Unbounded(), CountWindow(60), Decay(40.0), TimeWindow(50.0)])
@pytest.mark.parametrize("prior", ["auto", None])
def test_stream_loop_matches_the_engine_on_every_event(seed, window, prior):
    rng = np.random.default_rng(seed)
    n = 400
    z = rng.normal(-0.5, 1.5, n)
    scores = 1 / (1 + np.exp(-z))
    shift = np.where(np.arange(n) < n // 2, 2.0, 0.3)  # the relation changes: the free set moves
    labels = rng.uniform(size=n) < 1 / (1 + np.exp(-shift * z))
    weights = rng.choice([0.0, 0.5, 1.0, 2.5], n) if seed % 2 else np.ones(n)
    times = np.cumsum(rng.uniform(0.0, 1.0, n))
    kw = {"buckets": LogitGrid(64), "window": window, "prior": prior}
    new = StreamLoop(**kw).prequential(scores, labels, weights=weights, times=times)
    old = EngineLoop(**kw).prequential(scores, labels, weights=weights, times=times)
    np.testing.assert_allclose(new[0], old[0], rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(new[1], old[1], rtol=0.0, atol=1e-7)
