"""The lock-free entry points of the deferring faces between refits (``streamcal._kernels.deferred_face``).

Each learns one event (or serves one score) on the arrays it is given unless a section ran since
its arguments were taken (``marks[SEQ] != seen``), the label would make the refit due, or the
score or weight is out of range: then it changes nothing and refuses. Checked against a naive
reference: Python's ``bisect_right`` for the bucket and the histogram's own one-event kernel.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import pytest

from streamcal import ISplineCalibrator
from streamcal._kernels import deferred_face as kd
from streamcal._kernels import histogram as kh


def naive_bucket(cuts, s):
    """The bucket of score ``s``: the number of cuts at or below it."""
    return bisect.bisect_right(cuts.tolist(), s)


@pytest.fixture
def state():
    rng = np.random.default_rng(0)
    s = rng.uniform(0.01, 0.99, 500)
    cal = ISplineCalibrator(window=300).update(s, rng.uniform(size=s.size) < s)
    hist = cal.window_histogram
    sf, si = (a.copy() for a in hist.arrays())
    layout = hist.layout
    return sf, si, layout.cuts, layout.guide, layout.score_low, layout.score_high


@pytest.mark.parametrize(
    ("seen", "every", "s", "w"),
    [
        (3.0, 10, 0.5, 1.0),  # a section ran since the arguments were taken
        (4.0, 3, 0.5, 1.0),  # the label makes the refit due (two since the last one)
        (4.0, 10, 1.5, 1.0),  # the score out of range
        (4.0, 10, math.nan, 1.0),
        (4.0, 10, 0.5, -1.0),  # the weight out of range
        (4.0, 10, 0.5, math.nan),
    ],
)
def test_a_refused_label_changes_nothing(state, seen, every, s, w):
    sf, si, cuts, guide, low, high = state
    marks = np.array([4.0, 2.0])
    before = sf.copy(), si.copy(), marks.copy()
    assert not kd.hist_learn_marked(marks, seen, every, s, 1.0, w, 0.0, low, high, sf, si, cuts, guide)
    for got, want in zip((sf, si, marks), before, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("s", [0.0, 0.013, 0.5, 0.77, 1.0])
def test_an_accepted_label_is_the_histograms_one_event_learn(state, s):
    sf, si, cuts, guide, low, high = state
    ref_f, ref_i = sf.copy(), si.copy()
    marks = np.array([4.0, 2.0])
    assert kd.hist_learn_marked(marks, 4.0, 10, s, 1.0, 0.5, 0.0, low, high, sf, si, cuts, guide)
    kh.histogram_learn_one_inplace(ref_f, ref_i, naive_bucket(cuts, s), 1.0, 0.5, 0.0)
    np.testing.assert_array_equal(sf, ref_f)
    np.testing.assert_array_equal(si, ref_i)
    np.testing.assert_array_equal(marks, [4.0, 3.0])  # counted


def test_a_cut_itself_goes_to_the_bucket_above(state):
    sf, si, cuts, guide, low, high = state
    for s in cuts[:: max(1, cuts.size // 7)].tolist():
        ref_f, ref_i = sf.copy(), si.copy()
        assert kd.hist_learn_marked(np.array([0.0, 0.0]), 0.0, 10**6, s, 0.0, 1.0, 0.0, low, high, sf, si, cuts, guide)
        kh.histogram_learn_one_inplace(ref_f, ref_i, naive_bucket(cuts, s), 0.0, 1.0, 0.0)
        np.testing.assert_array_equal(sf, ref_f)
        np.testing.assert_array_equal(si, ref_i)


def test_a_prediction_is_refused_after_a_section_or_out_of_range():
    knots = np.array([0.0, 0.0, 0.5, 1.0, 1.0])
    coef = np.array([0.1, 0.6, 0.9])
    marks = np.array([2.0, 0.0])
    args = (0.0, 1.0, knots, 2, coef, 0.05, 0.95)
    assert kd.ispline_proba_marked(marks, 1.0, 0.3, *args) == -1.0
    assert kd.ispline_proba_marked(marks, 2.0, 1.2, *args) == -1.0
    assert kd.ispline_proba_marked(marks, 2.0, math.nan, *args) == -1.0
    p = kd.ispline_proba_marked(marks, 2.0, 0.3, *args)
    assert 0.05 <= p <= 0.95
    assert kd.ispline_proba_marked(marks, 2.0, 0.0, *args) == 0.1  # the map's first value, inside the bounds
    assert kd.ispline_proba_marked(marks, 2.0, 1.0, 0.0, 1.0, knots, 2, coef, 0.05, 0.5) == 0.5  # bounded
