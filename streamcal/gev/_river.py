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

    It relies on the calibrator's ``_glm_cache`` (None until the compiled refit's arrays exist;
    ``river_learn``: the window needs no event times; ``learn_tail``: the learn kernel's
    arguments after the event; ``cuts``: the layout's interior cuts; ``river_ready``: Platt's
    one-call refit can serve), on ``_river_scalars_out`` (the map's scalars after that call's
    refit) and on ``_generic_proba_of`` (the generic engine's served probability, with the full
    refit).
    """

    _glm_cache = None  # the compiled refit's arrays (``_glm_arrays``); an instance's own once built

    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        if (
            type(x) is dict
            and t is None
            and (y is True or y is False)
            and type(w) is float
            and len(x) == 1
            and 0.0 <= w <= _MAX_WEIGHT
        ):
            (s,) = x.values()
            if type(s) is float and self._score_low <= s <= self._score_high and self.score_key is None:
                lock = self._lock
                lock.acquire()
                try:
                    # under the lock: a reset or a load replaces the cache
                    a = self._glm_cache
                    if (
                        a is not None
                        and a.river_learn
                        and self.refit_every is None
                        and "histogram" not in self.__dict__
                    ):
                        hist = self._hist
                        args = (hist.floats, hist.ints, bucket_of_score(a.cuts, s), 1.0 if y else 0.0, w, 0.0)
                        learn = ENTRIES.get("learn")
                        if learn is None:
                            entry_call("learn", _g.glm_learn_one_inplace, (*args, *a.learn_tail))
                        else:
                            learn(*args, *a.learn_tail)
                        self._dirty = True
                        return
                finally:
                    lock.release()
        super().learn_one(x, y, w, t)

    def predict_proba_one(self, x: dict) -> dict:
        if type(x) is dict and len(x) == 1:
            (s,) = x.values()
            if type(s) is float and self._score_low <= s <= self._score_high and self.score_key is None:
                lock = self._lock
                lock.acquire()
                try:
                    a = self._glm_cache
                    if a is not None and a.river_ready and self.refit_every is None:
                        hist = self._hist
                        river = ENTRIES.get("river")
                        if not self._dirty:  # the current map serves
                            args = (hist.floats, hist.ints, a.pc, a.buf, s, 0.0)
                            p = entry_call("river", _g.glm_river_proba, args) if river is None else river(*args)
                        else:  # the refit from the moments, then the map
                            args = (hist.floats, hist.ints, a.pc, a.buf, s, 1.0)
                            p = entry_call("river", _g.glm_river_proba, args) if river is None else river(*args)
                            if p >= 0.0:
                                self._river_scalars_out(a)
                    else:
                        p = -1.0
                    if p < 0.0:
                        p = self._warm_proba() if not self._hist.built else self._generic_proba_of(s)
                finally:
                    lock.release()
                return {False: 1.0 - p, True: p}
        return super().predict_proba_one(x)

    learn_one.__doc__ = StreamingCalibrator.learn_one.__doc__
    predict_proba_one.__doc__ = StreamingCalibrator.predict_proba_one.__doc__
