"""Streaming PAV: isotonic calibration of a score stream over windowed buckets."""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from streamcal._kernels import ipav as _k
from streamcal._streaming import StreamingCalibrator
from streamcal._validation import check_scalar
from streamcal.buckets import Buckets, LogitGrid
from streamcal.windows import Window

__all__ = ["PAVCalibrator"]

_FIT = _k.PF_HEADER  # fitted values start here in the PAV float state


class PAVCalibrator(StreamingCalibrator):
    """Streaming PAV calibrator: isotonic regression of the labels on the score, per event.

    The state is a windowed histogram of the scores (positive and negative weight per bucket)
    and the PAV block stack over it. Each learned event (and each event leaving the window)
    repairs only the block it touches and the neighbours that then violate monotonicity, so a
    label costs about the size of one block; a prediction is a binary search and a read. The
    blocks always equal a from-scratch PAV of the window's histogram, bit for bit. PAV's fit is
    optimal for every proper scoring rule at once (Brümmer & du Preez); with one bucket per
    distinct score it is exact batch PAV over the window's events.

    Probabilities are interpolated between bucket centres (``interpolation="linear"``, like
    scikit-learn's isotonic ``predict``) or read per bucket (``"step"``). The LLR is PAV-LLR
    over the window, ``logit(p) - logit(prior)``, kept finite by the BOSARIS rule: one
    pseudo-positive below all scores and one pseudo-negative above, each of weight
    ``llr_pseudo_count``, prior ``(T1 + c) / (T + 2c)``; it never reorders scores.

    Before any label (or when the window holds no weight) the probability is the score itself
    for probability inputs (the default logit grid) and 0.5 otherwise; the LLR is 0.

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); default ``LogitGrid()`` (1024 logit-spaced
        buckets over [1e-7, 1 - 1e-7], scores must be probabilities).
    window
        Window strategy (:mod:`streamcal.windows`); default ``Unbounded()``.
    score_key
        Key of the score in ``x``; ``None``: ``x`` holds exactly one value.
    interpolation
        ``"linear"`` between bucket centres, or ``"step"``.
    llr_pseudo_count
        Weight of each pseudo-event of the finite-LLR rule (> 0).

    Attributes
    ----------
    window_weight : float
        Total weight currently in the window.
    n_learned : int
        Number of events learned so far.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.isotonic.streaming import PAVCalibrator
    >>> from streamcal.windows import CountWindow
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=20_000)
    >>> labels = rng.uniform(size=20_000) < scores**2        # true probability: score squared
    >>> cal = PAVCalibrator(window=CountWindow(10_000))
    >>> proba, llr = cal.prequential(scores, labels)
    >>> print(np.round(cal.predict_proba([0.1, 0.5, 0.9]), 2))
    [0.01 0.24 0.81]
    >>> cal.learn_one({"score": 0.5}, True)
    >>> round(cal.predict_proba_one({"score": 0.5})[True], 2), cal.window_weight
    (0.24, 10000.0)

    References
    ----------
    Brümmer, N. and du Preez, J. *The PAV algorithm optimizes binary proper scoring rules.*
    """

    def __init__(
        self,
        buckets: Buckets | None = None,
        window: Window | None = None,
        score_key: str | None = None,
        interpolation: str = "linear",
        llr_pseudo_count: float = 1.0,
    ):
        check_scalar(interpolation, "interpolation", choices=("linear", "step"))
        self.interpolation = interpolation
        super().__init__(buckets=buckets, window=window, score_key=score_key, llr_pseudo_count=llr_pseudo_count)

    @classmethod
    def _unit_test_params(cls):
        # river's checks feed the Phishing dataset (9 features); the calibrator reads one of
        # them, a probability-valued feature, as its score.
        yield {"score_key": "is_popular"}
        yield {
            "score_key": "empty_server_form_handler",
            "buckets": LogitGrid(n_buckets=16),
            "interpolation": "step",
        }

    # ------------------------------------------------------------------ engine (fused kernels)
    def _init_map_state(self) -> None:
        self._linear = self.interpolation == "linear"
        self._pf, self._pi = _k.empty_pav_state(
            self._centres, float(self.llr_pseudo_count), self._linear, self._identity
        )
        _k.pav_refresh_extremes_inplace(self._sf, self._pf, self._pi)
        self._make_views()

    def _make_views(self) -> None:
        # memoryviews read single elements as Python scalars several times faster than ndarray
        # indexing; they are a cache over ``_pf``/``_pi``, not state (dropped when pickling)
        self._mv_pf = memoryview(self._pf)
        self._mv_pi = memoryview(self._pi)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_mv_pf", None)
        state.pop("_mv_pi", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if state.get("_pf") is not None:
            self._make_views()

    def _learn_bucket(self, b: int, s: float, y: float, w: float, t: float) -> None:
        _k.pav_learn_one_inplace(self._sf, self._si, self._pf, self._pi, b, y, w, t)

    def _proba_of(self, s: float) -> float:
        # the same arithmetic, in the same order, as the kernel's ``pav_predict_one``
        pi = self._mv_pi
        first = pi[_k.PI_HEAD]
        if first == -1:
            return min(max(s, 0.0), 1.0) if self._identity else 0.5
        last = pi[_k.PI_LAST]
        pf = self._mv_pf
        b = bisect_right(self._cuts_list, s)
        if not self._linear:
            return pf[_FIT + min(max(b, first), last)]
        c = self._centres_list
        j = b if s >= c[b] else b - 1
        if j < first:
            return pf[_FIT + first]
        if j >= last:
            return pf[_FIT + last]
        lo = pf[_FIT + j]
        hi = pf[_FIT + j + 1]
        p = lo + (hi - lo) * ((s - c[j]) / (c[j + 1] - c[j]))
        return min(max(p, lo), hi)

    def _llr_of(self, s: float) -> float:
        if self._mv_pi[_k.PI_HEAD] == -1:
            return 0.0
        pf = self._mv_pf
        q = min(max(self._proba_of(s), pf[_k.PF_LO]), pf[_k.PF_HI])
        return math.log((q * pf[_k.PF_PRIOR_ODDS_INV]) / (1.0 - q))

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        _k.pav_process_inplace(self._sf, self._si, self._pf, self._pi, b, s, y, w, t, ops, out_p, out_llr)

    def _predict_arrays(self, b, s):
        out_p = np.empty(s.size)
        out_llr = np.empty(s.size)
        _k.pav_predict_many(self._pf, self._pi, b, s, out_p, out_llr)
        return out_p, out_llr
