"""The river face's refit under the score prior from the buckets its labels list.

Under the prior, each refit of the river face follows the row's changes in the kept sums; the
labels since the last refit list their buckets, so the refit reads those buckets instead of
comparing the whole row. The reference is the same calibrator whose refits are told nothing
(``n_touched`` -1, the whole row compared, as before the list): the same bits, on both faces.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from streamcal import ISplineCalibrator
from streamcal.windows import CountWindow


class Recording(ISplineCalibrator):
    """Records each refit's listed count; ``unlisted``: every refit compares the whole row."""

    _CACHES = (*ISplineCalibrator._CACHES, "counts", "unlisted")  # not state: dropped by a copy
    unlisted = False

    def _prior_listed(self):
        touched, n = super()._prior_listed()
        self.counts = [*getattr(self, "counts", []), n]
        return touched, (-1 if self.unlisted else n)


def calibrated_stream(n, seed):
    rng = np.random.default_rng(seed)
    scores = 1.0 / (1.0 + np.exp(-rng.normal(-3.0, 1.5, n)))
    return scores, rng.uniform(size=n) < scores


def river(cal, s, y):
    out = []
    for v, label in zip(s, y, strict=True):
        out.append(cal.predict_proba_one({"s": float(v)})[True])
        cal.learn_one({"s": float(v)}, bool(label))
    return np.array(out)


@pytest.mark.parametrize("window", [None, CountWindow(1500)])
def test_listed_refits_are_the_whole_rows_bits(window):
    s, y = calibrated_stream(2400, seed=5)
    warmed = Recording(window=window, refit_every=50)
    warmed.prequential(s[:2000], y[:2000])
    warmed.refit_every = None
    listed, whole = copy.deepcopy(warmed), copy.deepcopy(warmed)
    whole.unlisted = True
    listed.counts = whole.counts = []
    p_listed = river(listed, s[2000:2300], y[2000:2300])
    p_whole = river(whole, s[2000:2300], y[2000:2300])
    assert listed.prior_strength > 0.0  # the prior held: these are its refits
    np.testing.assert_array_equal(p_listed, p_whole)
    # and the state after: the array face from it, then the river face again
    np.testing.assert_array_equal(listed.prequential(s[2300:], y[2300:])[0], whole.prequential(s[2300:], y[2300:])[0])
    if window is None:  # an unbounded window's labels are listed: one bucket per pair
        assert max(listed.counts) == 1
        assert sum(n == 1 for n in listed.counts) >= 250
    else:  # a count window evicts buckets no label names: never listed
        assert max(listed.counts) == -1


def test_a_label_outside_the_river_face_unlists():
    """A label the river face did not list (``update``) between two refits: the count no longer
    matches the learned events, and the refit compares the whole row."""
    s, y = calibrated_stream(2100, seed=6)
    warmed = Recording(refit_every=50)
    warmed.prequential(s[:2000], y[:2000])
    warmed.refit_every = None
    # both copies (a copy's kept sums start anew: within rounding of the original's, not its bits)
    cal, reference = copy.deepcopy(warmed), copy.deepcopy(warmed)
    reference.unlisted = True
    for c in (cal, reference):  # the same calls to both
        c.counts = []
        river(c, s[2000:2010], y[2000:2010])
        c.learn_one({"s": float(s[2010])}, bool(y[2010]))
        c.update(s[2011:2013], y[2011:2013])
        c.counts = []
        river(c, s[2013:2030], y[2013:2030])
    assert cal.counts[0] == -1
    assert max(cal.counts) == 1
    np.testing.assert_array_equal(cal.predict_proba(s[2030:]), reference.predict_proba(s[2030:]))
