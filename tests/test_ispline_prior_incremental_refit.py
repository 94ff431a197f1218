"""I-spline's exact default under the score prior: the refit from the augmented normal equations kept per event.

While the prior holds, ``prequential``'s compiled loop serves a refit from the data's banded sums
kept per event plus the floor's (``streamcal._kernels.ispline_prior_incr``) where the knots and the
previous free set stand, else runs the full refit. Checked on every event of generated streams
(the prior holding, switching on and off, every window kind, the knot rules) against the same
calibrator with the full refit before every prediction (``_PRIOR_INCREMENTAL = False``, itself the
engine's refit bit for bit, ``test_ispline_prior_kept.py``) and against the independent naive
reference of ``test_ispline_prior_incremental.py``: within 1e-9. Also: the kept sums serve most
refits of a calibrated stream, and a copy (whose cache starts empty) continues within 1e-12.
"""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import ISplineCalibrator
from streamcal._kernels import ispline_prior_incr as _kipi
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Decay, Unbounded

TOL = 1e-9


class Counted(ISplineCalibrator):
    """The default, with its kept sums' counts and its free set read out."""

    def served(self):
        """Refits served from the kept sums, and the sums' builds, in the cache."""
        ik = self._prior_grid[3][0]
        return int(ik[_kipi.IK_SERVED]), int(ik[_kipi.IK_BUILT])

    def free_set(self):
        return self._knots.size, tuple(np.flatnonzero(self._coef > 0.0))


class FullRefit(Counted):
    """The compiled loop's full refit before every prediction (the engine's bits)."""

    _PRIOR_INCREMENTAL = False


def calibrated(n, seed, shift=0.0, switch=None, base=-2.8):
    """Logistic scores; labels at the score's log-odds plus ``shift`` from event ``switch`` on (from
    the start where ``switch`` is None)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(base, 1.4, n)
    offset = np.zeros(n)
    offset[(0 if switch is None else switch) :] = shift
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(z + offset)))


@settings(max_examples=20, deadline=None)
@given(
    st.integers(100, 900),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.0, 0.0, 0.0, 0.5, 2.0, -1.5]),
    st.floats(0.0, 1.0),
    st.sampled_from([Unbounded(), Unbounded(), CountWindow(200), Decay(150.0)]),
    st.sampled_from([{}, {}, {"n_knots": 3}, {"knots": (0.03, 0.1)}]),
    st.sampled_from([32, 64, 256]),
)
def test_every_prediction_is_the_full_refits_within_1e9(n, seed, shift, at, window, spline, n_buckets):
    scores, labels = calibrated(n, seed, shift, switch=int(at * n))
    kw = {"buckets": LogitGrid(n_buckets), "window": window, **spline}
    cal = ISplineCalibrator(**kw)
    proba, llr = cal.prequential(scores, labels)
    ref_p, ref_llr = FullRefit(**kw).prequential(scores, labels)
    np.testing.assert_allclose(proba, ref_p, rtol=0.0, atol=TOL)
    np.testing.assert_allclose(llr, ref_llr, rtol=TOL, atol=TOL)
    # one event a call: the loop's state carried between calls
    cal, ref = ISplineCalibrator(**kw), FullRefit(**kw)
    for i in range(0, n, 37):
        p, q = cal.prequential(scores[i : i + 37], labels[i : i + 37])[0], ref.prequential(scores[i : i + 37], labels[i : i + 37])[0]
        np.testing.assert_allclose(p, q, rtol=0.0, atol=TOL)


def test_the_kept_sums_serve_most_refits_of_a_calibrated_stream_within_1e9():
    scores, labels = calibrated(6000, 5)
    kw = {"buckets": LogitGrid(1024)}
    warm = Counted(refit_every=50, **kw)
    warm.prequential(scores[:3000], labels[:3000])
    warm.refit_every = None
    ref = copy.deepcopy(warm)
    ref.__class__ = FullRefit
    free_sets = set()
    for i in range(3000, 6000, 100):  # chunks: the free set at each chunk's end
        p, q = warm.prequential(scores[i : i + 100], labels[i : i + 100]), ref.prequential(scores[i : i + 100], labels[i : i + 100])
        np.testing.assert_allclose(p[0], q[0], rtol=0.0, atol=TOL)
        np.testing.assert_allclose(p[1], q[1], rtol=TOL, atol=TOL)
        free_sets.add(warm.free_set())
    assert warm.prior_strength > 100.0  # the prior holds to the end
    n_served, n_built = warm.served()
    assert n_served > 2000  # of 3,000 refits
    assert n_built < 1000
    assert len(free_sets) > 1  # the active set changes along the stream


def test_a_copy_continues_within_1e12():
    scores, labels = calibrated(3000, 9)
    cal = Counted(buckets=LogitGrid(256))
    cal.prequential(scores[:1500], labels[:1500])
    twin = copy.deepcopy(cal)  # its cache starts empty: the full refit first, then its own sums
    a = cal.prequential(scores[1500:], labels[1500:])
    b = twin.prequential(scores[1500:], labels[1500:])
    assert twin.served()[0] > 0
    np.testing.assert_allclose(a[0], b[0], rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12, atol=1e-12)
