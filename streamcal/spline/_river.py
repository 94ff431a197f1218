"""The river face of ``ISplineCalibrator`` at its exact default: one compiled call per pair.

At the lazy default (``refit_every=None``) a pair of river calls, ``predict_proba_one`` then
``learn_one``, runs two one-event calls of the compiled loop (``stream_packed_one``) and, around
them, the generic methods' checks by function, the loop's readiness test and the fitted map's
arrays copied out after every prediction: most of a pair's time. Once the loop runs, this face
defers what nothing reads until later, as Platt's does (:mod:`streamcal.gev._river`):
``learn_one`` checks the event inline and keeps its bucket, score, label and weight (the first
slots of the river state's ``args``, the compiled call's arguments, whose tail holds the
histogram's arrays and the loop's packed state while the face is live); the next
``predict_proba_one`` learns it and predicts in one compiled call
(``ispline_stream.stream_packed_pair``: the same two operations, in the same order, so the same
bits), and the map stays in the loop's packed state (``stale``) until something reads it. Every
other reader of the state holds the calibrator's lock (:class:`streamcal.gev._river.RiverLock`),
whose first acquisition by a section settles that work first: the kept event learned and the
map, its weight, prior log-odds, bounds and ``_dirty`` written back as the two calls per pair
leave them. The common case is checked inline: the lazy default (``refit_every=None``, read
before the lock: the generic methods are right in every state, so handing a call to them needs
none), ``x`` a one-key dict holding a float score in range (no ``score_key``), a bool label, a
float weight in range, no time, a window without event times or a growing ring. Anything else
settles and takes the generic methods, which raise the documented errors; a rejected call is
rejected before anything is kept. Between refits (``refit_every`` set) the common calls take no
lock (:class:`streamcal.gev._river.DeferredRiverFace`).
"""

from __future__ import annotations

from streamcal._kernels import histogram as _h
from streamcal._kernels import ispline_stream as _ks
from streamcal._refit import RefitCalibrator
from streamcal._streaming import OP_LEARN, StreamingCalibrator
from streamcal.buckets import bucket_of_score
from streamcal.gev._river import ENTRIES, DeferredRiverFace, entry_call, learn_lock_free, proba_lock_free

__all__ = ["ISplineRiverFace"]

_MAX_WEIGHT = _h.MAX_WEIGHT
_OP_LEARN = int(OP_LEARN)
KEPT_B, KEPT_S, KEPT_Y, KEPT_W, SCORE = 0, 1, 2, 3, 4  # the kept event and the score, in ``args``
_PAIR_DONE = -float(_ks.NOT_DIRTY)  # ``pair_fast`` returned the pair's result (else ``_pair_rest``)


def _pair_first_call(*args):
    """``pair_fast(*args)``: interpreted while the process's allowance lasts, then by its compiled
    entry point, which then takes this function's place as ``pair_call`` (later calls skip the
    entry points' table)."""
    global pair_call
    p = entry_call("ispline_pair_fast", _ks.pair_fast, args)
    compiled = ENTRIES.get("ispline_pair_fast")
    if compiled is not None and pair_call is _pair_first_call:
        pair_call = compiled
    return p


pair_call = _pair_first_call  # the river face's one call per pair (``stream_packed_pair``'s first)


def _pair_rest(p: float, args) -> float:
    """``stream_packed_pair(*args)`` after its first call ``pair_fast`` returned ``p < -NOT_DIRTY``:
    the refit's step it stopped at (``pair_resume``), or the loop's two operations (``AT_RUN``)."""
    if p == -_ks.AT_RUN:
        return entry_call("ispline_pair_run", _ks.pair_by_run, tuple(args))
    return entry_call("ispline_pair_resume", _ks.pair_resume, (int(-p), *args[SCORE:]))


class RiverState:
    """The deferred work of the river face: ``live`` (the loop's state is current and serves the
    face), ``args`` (while live, the pair's call: the kept event, bucket -1 when none, the
    score, then the histogram's arrays and the packed state), ``stale`` (a prediction's map not
    yet written back), ``cuts`` (the layout's interior cuts, for the bucket)."""

    __slots__ = ("args", "cuts", "live", "stale")

    def __init__(self, cuts):
        self.cuts = cuts
        self.live = False
        self.args = None
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
        if self._lock.learn_args is not None:  # live between refits until ``refit_every`` was cleared
            self._settle_deferred(self._lock)
        a = self._glm_cache
        if a is None or a.cuts is not hist.layout.cuts_list:
            a = self._glm_cache = RiverState(hist.layout.cuts_list)
        st = self._stream
        sf, si = hist.live_arrays()  # the same arrays until a reader settles (no growing ring)
        a.args = [-1, 0.0, 0.0, 0.0, 0.0, sf, si, st["fbuf"], st["ibuf"], st["free"]]
        a.live = True
        return a

    def _between_refits_learn_tail(self):
        """The learn kernel's arguments after the event's: none (the histogram's kernel)."""
        return ()

    def _between_refits_proba_args(self):
        """The served probability's entry point and its arguments after the score (a fitted map)."""
        return (
            "ispline_proba_marked", self._score_low, self._score_high, self._knots, int(self.order) + 1,
            self._bspline_coef, self._proba_low, self._proba_high,
        )  # fmt: skip

    def _river_settle(self, a) -> None:
        """The deferred work done: the kept event learned, the map written back (under the lock)."""
        a.live = False
        args = a.args
        b = args[KEPT_B]
        if b >= 0:
            args[KEPT_B] = -1
            st = self._stream
            sf, si = self._hist.live_arrays()
            s, y, w = args[KEPT_S], args[KEPT_Y], args[KEPT_W]
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
            self.refit_every is None  # else the generic path at once (right in every state: no lock to choose it)
            and type(x) is dict
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
                rlock.acquire()  # explicitly: half the cost of a ``with`` statement per call
                try:
                    if lock.depth == 0 and "histogram" not in self.__dict__:
                        a = self._glm_cache
                        if a is None or not a.live:
                            a = self._go_live()
                        elif a.args[KEPT_B] >= 0:  # two labels in a row: learn the first
                            self._river_settle(a)
                            a = self._go_live()
                        if a is not None:
                            args = a.args
                            args[KEPT_B] = bucket_of_score(a.cuts, s)
                            args[KEPT_S] = s
                            args[KEPT_Y] = 1.0 if y else 0.0
                            args[KEPT_W] = w
                            return
                    a = self._glm_cache
                    if a is not None and a.live:
                        self._river_settle(a)
                finally:
                    rlock.release()
        # between refits: lock-free while the face is live (see ``DeferredRiverFace._go_live_between_refits``)
        if (every := self.refit_every) is not None and t is None and learn_lock_free(self._lock, every, x, y, w):
            return
        # the generic path (see ``streamcal.gev._river.DeferredRiverFace``)
        self._learn_in_section(x, y, w, t)

    def predict_proba_one(self, x: dict) -> dict:
        if self.refit_every is None and type(x) is dict and len(x) == 1:  # else as in ``learn_one``
            (s,) = x.values()
            if type(s) is float and self._score_low <= s <= self._score_high and self.score_key is None:
                lock = self._lock
                rlock = lock.rlock
                rlock.acquire()
                try:
                    a = self._glm_cache
                    if a is not None and a.live:
                        if lock.depth == 0:
                            args = a.args
                            b = args[KEPT_B]
                            args[SCORE] = s
                            p = pair_call(*args)
                            if p < _PAIR_DONE:
                                p = _pair_rest(p, args)
                            args[KEPT_B] = -1
                            if p >= 0.0:
                                a.stale = True
                                return {False: 1.0 - p, True: p}
                            self._river_pair_stopped(a, b, -p)
                        else:
                            self._river_settle(a)
                finally:
                    rlock.release()
        p = -1.0 if self.refit_every is None else proba_lock_free(self._lock, x)  # between refits
        if p < 0.0:  # the generic path (see ``streamcal.gev._river.DeferredRiverFace``)
            p = self._proba_in_section(x)
        return {False: 1.0 - p, True: p}

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
