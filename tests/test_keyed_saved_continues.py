"""A keyed calibrator saved and loaded mid-stream continues as the original: bit for bit over
templates whose restored copies do, within rounding over I-spline (its refits' caches are built
anew, as for an unkeyed ISplineCalibrator), with max_keys evicting keys that come back."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

import streamcal
from streamcal import GEVCalibrator, ISplineCalibrator, KeyedCalibrator, PlattCalibrator


def _stream(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.beta(1, 20, n)
    return rng.integers(0, 20, n), s, rng.uniform(size=n) < np.minimum(1.3 * s, 1.0)


def _copies(cal):
    yield pickle.loads(pickle.dumps(cal))
    buf = io.BytesIO()
    streamcal.save(cal, buf)
    buf.seek(0)
    yield streamcal.load(buf)


@pytest.mark.parametrize(
    ("template", "tol"),
    [(ISplineCalibrator(refit_every=100), 1e-12), (ISplineCalibrator(), 1e-12), (PlattCalibrator(), 0.0),
     (GEVCalibrator(refit_every=200), 0.0)],
    ids=["ispline-100", "ispline", "platt", "gev"],
)
def test_a_loaded_copy_continues_as_the_original(template, tol):
    k, s, y = _stream()
    cal = KeyedCalibrator(template, max_keys=5)
    cal.update(k[:2000], s[:2000], y[:2000])
    assert cal.evictions > 0
    for copy in _copies(cal):
        never_saved = KeyedCalibrator(template, max_keys=5)  # the original's future, built again
        never_saved.update(k[:2000], s[:2000], y[:2000])
        p_ref, l_ref = never_saved.prequential(k[2000:], s[2000:], y[2000:])
        p, llr = copy.prequential(k[2000:], s[2000:], y[2000:])
        np.testing.assert_allclose(p, p_ref, rtol=0, atol=tol)
        np.testing.assert_allclose(llr, l_ref, rtol=0, atol=1e4 * tol)
