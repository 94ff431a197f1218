"""The lock-free per-event calls of the deferring river faces between refits (``refit_every=k``).

With ``refit_every=k`` the map of I-spline, GEV and Platt is fixed between refits: a label goes
into the histogram (GEV's and Platt's learn kernel also keeps their Taylor moments) and a
prediction reads the map. These entry points do either in one call and take no lock: like
``PAVCalibrator``'s packed entry points they hold the GIL (``nogil=False``), so among Python
threads each call is atomic, and each first compares the river lock's section number
(``marks[SEQ]``) with the one the face's arguments were taken at (``seen``). Every section of the
lock that may change the state changes the number first, so a call either runs whole on the
state its arguments describe or changes nothing and refuses (the caller then takes the lock).

``marks[COUNT]`` counts the labels since the last refit while the face is live (the
calibrator's ``_n_since_refit`` is written back when a section begins): a label that would make
the refit due is refused, and the caller learns it and refits under the lock.
"""

from __future__ import annotations

from streamcal._kernels import gev as _k
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _h
from streamcal._kernels import ispline as _ki
from streamcal._kernels._config import jit, jit_noalloc

SEQ, COUNT = 0, 1  # the river lock's marks: its sections' number, the labels since the last refit
MARKS_SIZE = 2
MAX_WEIGHT = _h.MAX_WEIGHT


@jit_noalloc(forceinline=True)
def _accepts(marks, seen, every, s, w, score_low, score_high):
    """Whether a label may be learned lock-free: no section since ``seen``, the refit not due with
    it, the score and the weight in range (False for NaN)."""
    return (
        marks[SEQ] == seen
        and marks[COUNT] + 1.0 < every
        and score_low <= s <= score_high
        and 0.0 <= w <= MAX_WEIGHT
    )


@jit_noalloc(forceinline=True)
def bucket_in(cuts, guide, s):
    """Score ``s``'s bucket (``histogram.bucket_of``: Python's ``bisect_right`` over ``cuts``)."""
    m = cuts.shape[0]
    return _h.bucket_of(cuts, 0, m, guide, s, _h.guide_scale(cuts, 0, m, guide))


@jit_noalloc(forceinline=True)
def bounded(p, low, high):
    """``p`` bounded to ``[low, high]`` as Python's ``min(max(p, low), high)``."""
    if low > p:
        p = low
    if high < p:
        p = high
    return p


@jit_noalloc(forceinline=True)
def glm_proba_at(s, identity, clip, slope, intercept, gev_link, xi, run_low, run_high, low, high):
    """A fitted GLM map's served probability at score ``s`` (``gev.glm_map_score``, no surer
    than the end run's rate past the support's end, then :func:`bounded`)."""
    p = _k.glm_map_score(s, identity, clip, slope, intercept, gev_link, xi)
    if xi < 0.0:
        if run_high < p:  # numpy's minimum: the smaller, NaN kept
            p = run_high
    elif xi > 0.0 and run_low > p:
        p = run_low
    return bounded(p, low, high)


@jit_noalloc(nogil=False)  # a per-event call: atomic among Python threads (see the module notes)
def hist_learn_marked(marks, seen, every, s, y, w, t, score_low, score_high, sf, si, cuts, guide):
    """Learn one event of score ``s`` into the windowed histogram (its bucket by
    ``histogram.bucket_of``, Python's ``bisect_right`` over ``cuts``), counted in ``marks``.

    Returns False, having changed nothing, when a section ran since ``seen``, the event would
    make the refit due (``every``: the calibrator's ``refit_every``), or the score or the weight
    is out of range.
    """
    if not _accepts(marks, seen, every, s, w, score_low, score_high):
        return False
    b = bucket_in(cuts, guide, s)
    _h.histogram_learn_one_inplace(sf, si, b, y, w, t)
    marks[COUNT] += 1.0
    return True


@jit_noalloc(nogil=False)  # a per-event call: atomic among Python threads (see the module notes)
def glm_learn_marked(
    marks, seen, every, s, y, w, t, score_low, score_high, sf, si, cuts, guide, x, table, mom, pc, anchor, steps
):
    """:func:`hist_learn_marked` through ``glm_refit.glm_learn_one_inplace`` (the histogram and,
    while they are current, the GLM calibrators' moments and running sums)."""
    if not _accepts(marks, seen, every, s, w, score_low, score_high):
        return False
    b = bucket_in(cuts, guide, s)
    _g.glm_learn_one_inplace(sf, si, b, y, w, t, x, table, mom, pc, anchor, steps)
    marks[COUNT] += 1.0
    return True


@jit(nogil=False)  # a per-event call: atomic among Python threads (see the module notes)
def ispline_proba_marked(marks, seen, s, score_low, score_high, knots, order, coef, low, high):
    """The served probability of score ``s`` by a fitted I-spline map (``bspline_combination_score``
    bounded to ``[low, high]`` as Python's ``min(max(p, low), high)``); -1.0 (never a probability)
    when a section ran since ``seen`` or the score is out of range."""
    if not (marks[SEQ] == seen and score_low <= s <= score_high):
        return -1.0
    return bounded(_ki.bspline_combination_score(s, knots, order, coef), low, high)


@jit(nogil=False)  # a per-event call: atomic among Python threads (see the module notes)
def glm_proba_marked(
    marks, seen, s, score_low, score_high, identity, clip, slope, intercept, gev_link, xi, run_low, run_high, low, high
):
    """The served probability of score ``s`` by a fitted GLM map (``gev.glm_map_score``, no surer
    than the end run's rate past the support's end, bounded to ``[low, high]``); -1.0 when a
    section ran since ``seen`` or the score is out of range."""
    if not (marks[SEQ] == seen and score_low <= s <= score_high):
        return -1.0
    return glm_proba_at(s, identity, clip, slope, intercept, gev_link, xi, run_low, run_high, low, high)
