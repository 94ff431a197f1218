"""The river face of ``ISplineCalibrator`` at its exact default: one compiled call per pair.

At the lazy default (``refit_every=None``) a pair of river calls, ``predict_proba_one`` then
``learn_one``, runs two one-event calls of the compiled loop (``stream_packed_one``) and, around
them, the generic methods' checks by function, the loop's readiness test and the fitted map's
arrays copied out after every prediction: most of a pair's time. Once the loop runs, this face
defers what nothing reads until later, as Platt's does (:mod:`streamcal.gev._river`):
``learn_one`` checks the event inline and keeps its bucket, score, label and weight (``pending``);
the next ``predict_proba_one`` learns it and predicts in one compiled call
(``ispline_stream.stream_packed_pair``: the same two calls, in the same order, so the same bits),
and the map stays in the loop's packed state (``stale``) until something reads it. Every other
reader of the state holds the calibrator's lock (:class:`streamcal.gev._river.RiverLock`), whose
first acquisition by a section settles that work first: the kept event learned and the map, its
weight, prior log-odds, bounds and ``_dirty`` written back as the two calls per pair leave them.
The common case is checked inline: ``x`` a one-key dict holding a float score in range (no
``score_key``), a bool label, a float weight in range, no time, a window without event times or
a growing ring. Anything else settles and takes the generic methods, which raise the documented
errors; a rejected call is rejected before anything is kept.
"""

from __future__ import annotations

from streamcal._kernels import histogram as _h
from streamcal._kernels import ispline_stream as _ks
from streamcal._refit import RefitCalibrator
from streamcal._streaming import OP_LEARN, StreamingCalibrator
from streamcal.buckets import bucket_of_score
from streamcal.gev._river import DeferredRiverFace, entry_call

__all__ = ["ISplineRiverFace"]

_MAX_WEIGHT = _h.MAX_WEIGHT
_OP_LEARN = int(OP_LEARN)
NO_EVENT = (-1, 0.0, 0.0, 0.0)  # ``pending`` when no event is kept: bucket, score, label, weight


class RiverState:
    """The deferred work of the river face: ``live`` (the loop's state is current and serves the
    face), ``pending`` (the kept event), ``stale`` (a prediction's map not yet written back),
    ``cuts`` (the layout's interior cuts, for the bucket)."""

    __slots__ = ("cuts", "live", "pending", "stale")

    def __init__(self, cuts):
        self.cuts = cuts
        self.live = False
        self.pending = NO_EVENT
        self.stale = False


class ISplineRiverFace(DeferredRiverFace):
    """Mixin: the river face of ``ISplineCalibrator`` (see the module notes).

    It relies on the calibrator's compiled loop (``_loop_serves``, ``_stream_ready``, ``_stream``,
    ``_river_step``, ``_stream_publish``) and keeps its deferred work in ``_glm_cache`` (the name
    :class:`streamcal.gev._river.RiverLock` reads; None until the face goes live).
    """

    def _go_live(self):
        """The river state, live, when the compiled loop can serve the face; else None (under the lock)."""
        hist = self._hist
        if (
            self.refit_every is not None
            or self.score_key is not None
            or not hist.built
            or hist.uses_times
            or hist.grows_ring
            or self._in_loop
            or not self._loop_serves()
            or self._stream_ready() is not True
        ):
            return None
        a = self._glm_cache
        if a is None or a.cuts is not hist.layout.cuts_list:
            a = self._glm_cache = RiverState(hist.layout.cuts_list)
        a.live = True
        return a

    def _river_settle(self, a) -> None:
        """The deferred work done: the kept event learned, the map written back (under the lock)."""
        a.live = False
        b, s, y, w = a.pending
        if b >= 0:
            a.pending = NO_EVENT
            st = self._stream
            sf, si = self._hist.live_arrays()
            code = self._river_step(_OP_LEARN, b, s, y, w, 0.0, sf, si, st["fbuf"], st["ibuf"], st["free"])
            if code != 0.0:  # learned, then a decay renormalisation: the state is rebuilt
                self._stream_publish()
                self._stream = None
                a.stale = False
                return
            self._dirty = True
            st["n_learned"] = sf[_h.SF_N_LEARNED]
        if a.stale:
            a.stale = False
            self._stream_publish()  # the map, and the learned count the loop's state is checked by

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
                rlock = lock.rlock
                rlock.acquire()
                try:
                    if lock.depth == 0 and "histogram" not in self.__dict__:
                        a = self._glm_cache
                        if a is None or not a.live:
                            a = self._go_live()
                        if a is not None and a.pending[0] >= 0:  # two labels in a row: learn the first
                            self._river_settle(a)
                            a = self._go_live()
                        if a is not None:
                            a.pending = (bucket_of_score(a.cuts, s), s, 1.0 if y else 0.0, w)
                            return
                    a = self._glm_cache
                    if a is not None and a.live:
                        self._river_settle(a)
                finally:
                    rlock.release()
        super().learn_one(x, y, w, t)

    def predict_proba_one(self, x: dict) -> dict:
        if type(x) is dict and len(x) == 1:
            (s,) = x.values()
            if type(s) is float and self._score_low <= s <= self._score_high and self.score_key is None:
                lock = self._lock
                rlock = lock.rlock
                rlock.acquire()
                try:
                    a = self._glm_cache
                    if lock.depth == 0 and a is not None and a.live:
                        st = self._stream
                        sf, si = self._hist.live_arrays()
                        args = (*a.pending, s, sf, si, st["fbuf"], st["ibuf"], st["free"])
                        b = a.pending[0]
                        a.pending = NO_EVENT
                        p = entry_call("ispline_pair", _ks.stream_packed_pair, args)
                        if p >= 0.0:
                            a.stale = True
                            return {False: 1.0 - p, True: p}
                        self._river_pair_stopped(a, b, -p)
                    elif a is not None and a.live:
                        self._river_settle(a)
                finally:
                    rlock.release()
        return super().predict_proba_one(x)

    def _river_pair_stopped(self, a, b: int, code: float) -> None:
        """What the two calls per pair leave when the one call stopped with ``code``; the
        prediction is then the generic method's (under the lock)."""
        a.live = False
        if code == _ks.NOT_DIRTY:  # nothing ran
            if a.stale:
                a.stale = False
                self._stream_publish()
            return
        a.stale = False
        if code == _ks.STOP_RENORM:  # learned, then a decay renormalisation: the state is rebuilt
            self._stream_publish()
            self._stream = None
            return
        # the label learned (if any), the prediction stopped: the engine's full refit, as the
        # loop's refit (``_loop_refit``) runs it
        if b >= 0:
            self._dirty = True
        self._publish_fit(self._stream)
        self._stream = None
        RefitCalibrator._ensure_fitted(self)

    learn_one.__doc__ = StreamingCalibrator.learn_one.__doc__
    predict_proba_one.__doc__ = StreamingCalibrator.predict_proba_one.__doc__
