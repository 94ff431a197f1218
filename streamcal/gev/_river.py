"""The river face of the histogram GLM calibrators: the common calls checked inline.

``learn_one`` and ``predict_proba_one`` are per-event calls, and around one compiled call each
(the histogram and Platt's Taylor moments; the refit from the moments and the served
probability) the generic river methods spend most of a pair's time in Python: the score read
through the generic dict reader, the label, weight and time checks by function, the window's
conditions, the compiled call's arguments gathered from the calibrator. The common case is
checked here inline: ``x`` a one-key dict holding a float score in range (no ``score_key``), a
bool label, a float weight in range, no time, a window without event times, the lazy default
(``refit_every=None``) with the compiled refit's arrays built. Anything else takes the generic
methods, which raise the documented errors; both paths run the same kernels in the same order,
so they give the same bits. Both hold the calibrator's lock, as the generic methods do.
"""

from __future__ import annotations

from streamcal._kernels import _config
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _h
from streamcal._kernels._config import entry_point
from streamcal._streaming import StreamingCalibrator
from streamcal.buckets import bucket_of_score

_MAX_WEIGHT = _h.MAX_WEIGHT

ENTRIES = {}  # kernel name -> its compiled entry point, once the interpreted tier is over


def entry_call(name: str, kernel, args):
    """``kernel(*args)``: interpreted while the allowance lasts (``streamcal._kernels._config``),
    then by its compiled entry point for the types of ``args`` (the same for every calibrator),
    without numba's type dispatch over its arguments (the river face's per-event calls)."""
    found = ENTRIES.get(name)
    if found is None:
        result = _config.try_entry_point(kernel, *args)
        if result is not _config.NOT_RUN:
            return result
        found = ENTRIES[name] = entry_point(kernel, *args)
    return found(*args)


class GLMRiverFace:
    """Mixin: the inline river face of ``_HistogramGLMCalibrator`` (see the module notes).

    It relies on the calibrator's ``_glm_cache`` (``river_learn``: the window needs no event
    times; ``learn_tail``: the learn kernel's arguments after the event), on ``_river_proba``
    (the compiled refit-and-serve call of Platt's river face, -1.0 where it cannot serve) and on
    ``_generic_proba_of`` (the generic engine's served probability, with the full refit).
    """

    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        if (
            type(x) is dict
            and t is None
            and (y is True or y is False)
            and type(w) is float
            and len(x) == 1
            and self.score_key is None
            and 0.0 <= w <= _MAX_WEIGHT
        ):
            (s,) = x.values()
            if type(s) is float and self._score_low <= s <= self._score_high:
                lock = self._lock
                lock.acquire()
                try:
                    if self._river_learn(s, 1.0 if y else 0.0, w):
                        return
                finally:
                    lock.release()
        super().learn_one(x, y, w, t)

    def _river_learn(self, s: float, y: float, w: float) -> bool:
        """Learn the checked event in one compiled call, under the lock; False (nothing
        changed) where the generic path must run: no compiled refit's arrays yet, event times,
        ``refit_every``, or an outside histogram."""
        a = self.__dict__.get("_glm_cache")
        if a is None or not (a.river_learn and self.refit_every is None) or "histogram" in self.__dict__:
            return False
        hist = self._hist
        sf, si = hist.live_arrays()
        args = (sf, si, bucket_of_score(hist.layout.cuts_list, s), y, w, 0.0, *a.learn_tail)
        learn = ENTRIES.get("learn")
        if learn is None:
            entry_call("learn", _g.glm_learn_one_inplace, args)
        else:
            learn(*args)
        self._dirty = True
        return True

    def predict_proba_one(self, x: dict) -> dict:
        if type(x) is dict and len(x) == 1 and self.score_key is None:
            (s,) = x.values()
            if type(s) is float and self._score_low <= s <= self._score_high:
                lock = self._lock
                lock.acquire()
                try:
                    p = self._river_proba(s)
                    if p < 0.0:
                        p = self._warm_proba() if not self._hist.built else self._generic_proba_of(s)
                finally:
                    lock.release()
                return {False: 1.0 - p, True: p}
        return super().predict_proba_one(x)

    learn_one.__doc__ = StreamingCalibrator.learn_one.__doc__
    predict_proba_one.__doc__ = StreamingCalibrator.predict_proba_one.__doc__
