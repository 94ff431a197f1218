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

Platt's pairs in one compiled call. Once Platt has a fit its river face defers work that
nothing reads until later: ``learn_one`` checks the event and keeps its score, label and
weight (the cache's ``pending``), and the next ``predict_proba_one`` finds its bucket, learns it
and refits in the same compiled call that serves the score (``glm_refit.glm_river_learn_proba``,
whose bucket search, an arithmetic guess on a grid of cuts, costs a fraction of Python's ``bisect``
over the cuts); the map's
scalars (``_dirty``, the prior's strength and log-odds, the served bounds) stay in the
compiled fit's array meanwhile (the cache's ``live``). Every other reader of the state holds
the calibrator's lock (:class:`RiverLock`), whose first acquisition by a section settles that
work first: the kept event learned, the scalars written back. The steps and their order are
the ones the two calls per pair take, so the bits are too. A rejected call is rejected by the
checks before anything is kept, as before.

GEV's pairs likewise, once every shape has a fit: the call (``glm_refit.glm_river_gev_proba``,
given the arrays that are views of the compiled refit's packed buffer as that buffer) finds the
kept event's bucket and learns it, runs the whole compiled refit if labels
came (the served shape among the scalars it leaves in the compiled fit) and serves the score;
where a shape needs the damped full refit it returns -1.0 and the refit is completed in Python as
the generic path completes it.

Between refits (``refit_every`` set) the faces of I-spline, GEV and Platt take no lock in the
common case: each call is one entry point of :mod:`streamcal._kernels.deferred_face` that holds
the GIL and tests the river lock's section number, as ``PAVCalibrator``'s kernels test their busy
mark (see the notes above :meth:`DeferredRiverFace._go_live_between_refits`).
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import deferred_face as _kd
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _h
from streamcal._kernels._config import entry_point
from streamcal._locking import SectionLock
from streamcal._streaming import StreamingCalibrator
from streamcal.buckets import bucket_of_score

_MAX_WEIGHT = _h.MAX_WEIGHT

ENTRIES = {}  # kernel name -> its compiled entry point, once the interpreted tier is over
# GEV's one-call river kernels by the name a calibrator's cache holds (``gev_entry``): the cache
# names its kernel instead of holding it, so that walking a calibrator's objects (river's
# ``_raw_memory_usage``, ``copy``) never reaches numba's dispatchers
GEV_ENTRIES = {"river_gev": _g.gev_river_packed, "river_gev_logistic": _g.gev_logistic_river_proba_packed}


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


NO_SCORE = (0.0, -1.0, 0.0)  # ``pending`` when no event is kept (else score, label, weight)


class RiverLock(SectionLock):
    """The lock of a histogram GLM calibrator: re-entrant, and the first acquisition by a
    section (``with cal._lock:``, ``acquire``) settles the river face's deferred work (see the
    module notes) before the section reads the state. ``rlock`` alone is the river face's own:
    its fast paths take it and settle nothing; ``depth`` counts the sections that hold it (above
    0 while any does; the faces' generic path, which takes ``rlock`` inline, counts as one, see
    :class:`DeferredRiverFace`).

    Between refits (``refit_every`` set) the face's calls take no lock while it is live
    (``learn_args`` not None): ``marks`` (``deferred_face.SEQ``, ``COUNT``) holds the sections'
    number and the labels learned since the last refit, ``seen`` the number the arguments
    (``learn_args``, ``proba_args``, for the entry points named ``learn_kind`` and ``proba_kind`` in
    ``CALLS``) were taken at. A section's
    first acquisition of a live lock changes the number (its entry points then refuse, see
    :mod:`streamcal._kernels.deferred_face`), writes the count back and ends the live state."""

    __slots__ = ("_cal", "depth", "learn_args", "learn_kind", "marks", "proba_args", "proba_kind", "rlock", "seen")

    def __init__(self, cal):
        self._cal = cal
        self.depth = 0
        self.rlock = threading.RLock()
        self.marks = np.zeros(_kd.MARKS_SIZE)
        self.seen = -1.0  # never a section number: nothing is live
        self.learn_args = self.proba_args = self.learn_kind = self.proba_kind = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self.rlock.acquire(blocking, timeout):
            return False
        self.depth += 1
        if self.depth == 1:
            self.settle()
        return True

    def release(self) -> None:
        self.depth -= 1
        self.rlock.release()

    def settle(self) -> None:
        """The deferred work done, by a section's first acquisition (the lock held): see
        :meth:`DeferredRiverFace._settle_deferred`."""
        self._cal._settle_deferred(self)


def _gil_enabled() -> bool:
    """False on a free-threaded Python running without the GIL (3.13+)."""
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


def _bound_on_first_call(name: str, kernel, label_at: int):
    """A stand-in for the entry point ``kernel`` of :mod:`streamcal._kernels.deferred_face`:
    interpreted while the process's allowance lasts, then compiled for its arguments (the bool
    label at ``label_at``, if any, typed as a float), which then takes the stand-in's place in
    ``CALLS``. The faces name their entry points rather than hold them: an instance holding a
    compiled function would lead river's memory walk (``_raw_memory_usage``) into numba's registries."""

    def first_call(*args):
        result = _config.try_entry_point(kernel, *args)
        if result is not _config.NOT_RUN:
            return result
        compiled = ENTRIES.get(name)
        if compiled is None:
            example = tuple(float(v) if i == label_at else v for i, v in enumerate(args))
            compiled = ENTRIES[name] = entry_point(kernel, *example)
            CALLS[name] = compiled
        return compiled(*args)

    return first_call


_LABEL_AT = 4  # the learn entry points' label: after ``marks``, ``seen``, ``every`` and the score
CALLS = {  # the lock-free calls' entry points by name: stand-ins until compiled
    name: _bound_on_first_call(name, getattr(_kd, name), label_at)
    for name, label_at in (
        ("hist_learn_marked", _LABEL_AT),
        ("glm_learn_marked", _LABEL_AT),
        ("ispline_proba_marked", -1),
        ("glm_proba_marked", -1),
    )
}


def learn_lock_free(lock, every: int, x, y, w) -> bool:
    """``learn_one(x, y, w)`` between refits (every ``every`` labels) without the lock, if its
    entry point takes it (the common call, the face live, no section since its arguments were
    taken); else False, having changed nothing. ``seen`` is read before everything it guards."""
    seen = lock.seen
    args = lock.learn_args
    if args is None or type(x) is not dict or not (y is True or y is False) or type(w) is not float or len(x) != 1:
        return False
    (s,) = x.values()
    return type(s) is float and CALLS[lock.learn_kind](lock.marks, seen, every, s, y, w, 0.0, *args)


def proba_lock_free(lock, x) -> float:
    """``predict_proba_one(x)``'s probability between refits without the lock, as
    :func:`learn_lock_free`; -1.0 where it does not serve."""
    seen = lock.seen
    args = lock.proba_args
    if args is None or type(x) is not dict or len(x) != 1:
        return -1.0
    (s,) = x.values()
    return CALLS[lock.proba_kind](lock.marks, seen, s, *args) if type(s) is float else -1.0


class DeferredRiverFace:
    """Mixin: a calibrator whose river face defers work to the next call, kept in ``_glm_cache``
    (an object with ``live``; None until the face goes live) and settled by the calibrator's
    :class:`RiverLock` (through its ``_river_settle``) before any other reader of the state."""

    _glm_cache = None  # the face's deferred state; an instance's own once built, never saved

    def _init_lock(self) -> None:
        self._lock = RiverLock(self)

    def _settle_deferred(self, lock) -> None:
        """The deferred work done, by a section's first acquisition of ``lock`` (held): the
        lock-free calls refused from here on and their count written back (see the notes above
        :meth:`_go_live_between_refits`), the kept event learned."""
        if lock.learn_args is not None:
            with _config.INTERPRETER_LOCK:  # after any interpreted entry point in flight
                lock.marks[_kd.SEQ] += 1.0
            lock.learn_args = lock.proba_args = None
            self._n_since_refit = int(lock.marks[_kd.COUNT])
        a = self._glm_cache
        if a is not None and a.live:
            self._river_settle(a)  # compiled calls and attribute writes: nothing raises

    # The faces' generic path: the generic methods' shared bodies (``_learn_one_held``,
    # ``_proba_one_held``) in a section of the river lock taken inline. ``RiverLock.acquire`` and
    # ``release`` as Python calls cost about as much again as the bare lock, and a body passed as
    # an argument a tenth of the pair (docs/benchmarks.md, "Thread safety: cost of the locks"). The
    # section's first acquisition (``depth`` 0) settles the deferred work and marks ``depth`` while
    # it holds the lock, as ``RiverLock`` does, and between refits (``refit_every`` set) it ends
    # with the face live (:meth:`_go_live_between_refits`); inside another section (``depth``
    # above 0) the work is settled and the mark is that section's.
    def _learn_in_section(self, x, y, w, t) -> None:
        lock = self._lock
        rlock = lock.rlock
        rlock.acquire()
        try:
            if lock.depth:
                return self._learn_one_held(x, y, w, t)
            lock.depth = 1
            try:
                self._settle_deferred(lock)
                self._learn_one_held(x, y, w, t)
                if self.refit_every is not None:
                    self._go_live_between_refits(lock)
            finally:
                lock.depth = 0
        finally:
            rlock.release()

    def _proba_in_section(self, x) -> float:
        lock = self._lock
        rlock = lock.rlock
        rlock.acquire()
        try:
            if lock.depth:
                return self._proba_one_held(x)
            lock.depth = 1
            try:
                self._settle_deferred(lock)
                p = self._proba_one_held(x)
                if self.refit_every is not None:
                    self._go_live_between_refits(lock)
                return p
            finally:
                lock.depth = 0
        finally:
            rlock.release()

    # Between refits (``refit_every`` set) the map is fixed and a label changes the histogram (and
    # GEV's and Platt's moments) alone: the common calls, ``x`` a one-key dict holding a float
    # score (no ``score_key``), a bool label, a float weight, no time, take no lock, as
    # ``PAVCalibrator``'s river face takes none. Each is one entry point of
    # :mod:`streamcal._kernels.deferred_face`, which holds the GIL (so no other Python thread runs
    # while it does) and refuses, changing nothing, once a section has begun since the face went
    # live, a score or a weight is out of range, or a label would make the refit due; the call
    # then takes the generic path, under the lock, which raises the documented errors or learns
    # and refits. A section that may change the state begins by the lock's ``settle``, whose
    # first step makes every later lock-free call refuse: a lock-free call runs whole before the
    # section or not at all, some serial order. Without a GIL (a free-threaded Python) the face
    # never goes live and every call takes the lock.
    def _go_live_between_refits(self, lock) -> None:
        """Take the lock-free calls' arguments from the state, in a section that holds the lock
        and has settled it (its end: nothing in it changes the state afterwards)."""
        hist = self._hist
        if (
            self.score_key is not None
            or not hist.built
            or hist.uses_times
            or hist.grows_ring
            or "histogram" in self.__dict__
            or getattr(self, "_loading", False)
            or not _gil_enabled()
        ):
            return
        tail = self._between_refits_learn_tail()
        if tail is None:
            return
        layout = hist.layout
        sf, si = hist.live_arrays()
        learn = (self._score_low, self._score_high, sf, si, layout.cuts, layout.guide, *tail)
        proba = self._between_refits_proba_args() if self._fitted and not self._dirty else None
        lock.marks[_kd.COUNT] = float(self._n_since_refit)
        lock.learn_kind = "glm_learn_marked" if tail else "hist_learn_marked"
        if proba is not None:
            lock.proba_kind = proba[0]
            proba = proba[1:]
        lock.seen = float(lock.marks[_kd.SEQ])
        lock.proba_args = proba
        lock.learn_args = learn

    def predict_one(self, x: dict) -> bool:
        """True when the calibrated probability exceeds 0.5."""
        return self.predict_proba_one(x)[True] > 0.5  # the face's own path: lock-free between refits

    @property
    def window_histogram(self):
        """The windowed histogram this calibrator learns (:class:`streamcal._histogram.WindowedHistogram`),
        for inspection: its ``row()``, ``ring()``, ``layout`` and counters. Read it, never change it."""
        with self._lock:  # the river face's kept event learned first
            return self._hist


class GLMRiverFace(DeferredRiverFace):
    """Mixin: the inline river face of ``_HistogramGLMCalibrator`` (see the module notes).

    It relies on the calibrator's ``_glm_cache`` (None until the compiled refit's arrays exist;
    ``river_learn``: the window needs no event times; ``learn_tail``: the learn kernel's
    arguments after the event; ``river_tail``: the one-call kernel's; ``cuts``: the layout's
    interior cuts; ``river_ready``: the one-call refit can serve (Platt's ``river``, GEV's
    ``gev_river`` with ``gev_tail``, its kernel's arguments after the event); ``live`` and ``pending``:
    the deferred work, ``pending`` being ``no_event`` (``NO_SCORE``) while none is kept), on
    ``_glm_state_in`` and ``_river_scalars_out`` (the map's scalars into and out of the compiled
    fit's array), on ``_river_proba`` and on ``_generic_proba_of`` (the generic engine's served
    probability, with the full refit).
    """

    def _river_settle(self, a) -> None:
        """The deferred work done: the kept event learned, the scalars written back (under the lock)."""
        if a.pending is not a.no_event:
            self._river_learn_kept(a)
        self._river_scalars_out(a)
        a.live = False

    def _river_gev_complete(self, a) -> None:
        """After GEV's one call left a shape to the damped full refit: the refit completed and
        the scalars written back, as the generic path's refit does (under the lock)."""
        self._glm_complete_refit(a)
        self._glm_state_out(a)
        a.live = False

    def _between_refits_learn_tail(self):
        """The learn kernel's arguments after the event's (None: the face does not go live)."""
        a = self.__dict__.get("_glm_cache")
        return None if a is None else a.learn_tail

    def _between_refits_proba_args(self):
        """The served probability's entry point and its arguments after the score (a fitted map)."""
        # the scores' clip before the logit: the second of the compiled refit's constants
        clip = float(self._glm_cache.buf[_g.BUF_CONSTS + 1])
        xi = self._xi_served
        slope, intercept = self._beta[xi]
        gev_link = self._link != "logit"
        return (
            "glm_proba_marked", self._score_low, self._score_high, bool(self._identity), clip, float(slope),
            float(intercept), gev_link, float(xi), self._run_low, self._run_high, self._proba_low, self._proba_high,
        )  # fmt: skip

    def _river_go_live(self, a, lock) -> None:
        """The face live (under the lock, settled): the map's scalars into the compiled fit's array.
        GEV's ``pending`` then holds the call's arguments after the score (the kept event, none
        yet, then the histogram's arrays and the packed buffers, ``gev_tail``): taken here, as no
        section has changed the state since (each settles first, which ends the live state)."""
        if lock.learn_args is not None:  # live between refits until ``refit_every`` was cleared
            self._settle_deferred(lock)
        self._glm_state_in(a)
        if not a.river:
            a.live_tail = self._hist.live_arrays() + a.gev_tail
            a.no_event = a.pending = NO_SCORE + a.live_tail
        a.live = True

    def _river_learn_kept(self, a) -> None:
        sf, si = self._hist.live_arrays()
        e, y, w = a.pending[:3]
        args = (sf, si, bucket_of_score(a.cuts, e), y, w, 0.0, *a.learn_tail)
        a.pending = a.no_event
        learn = ENTRIES.get("learn")
        if learn is None:
            entry_call("learn", _g.glm_learn_one_inplace, args)
        else:
            learn(*args)
        a.fit[_g.FIT_DIRTY] = 1.0

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
                rlock.acquire()
                try:
                    # under the lock: a reset or a load replaces the cache
                    a = self._glm_cache
                    if (
                        a is not None
                        and a.river_learn
                        and self.refit_every is None
                        and "histogram" not in self.__dict__
                    ):
                        if a.river_ready and lock.depth == 0:  # kept for the next prediction's call
                            if not a.live:
                                self._river_go_live(a, lock)
                            elif a.pending is not a.no_event:
                                self._river_learn_kept(a)
                            # the call finds the bucket itself; GEV's call takes the rest of ``pending``
                            a.pending = (s, 1.0 if y else 0.0, w) + a.live_tail  # noqa: RUF005
                            return
                        self._settle_deferred(lock)
                        sf, si = self._hist.live_arrays()
                        args = (sf, si, bucket_of_score(a.cuts, s), 1.0 if y else 0.0, w, 0.0)
                        learn = ENTRIES.get("learn")
                        if learn is None:
                            entry_call("learn", _g.glm_learn_one_inplace, (*args, *a.learn_tail))
                        else:
                            learn(*args, *a.learn_tail)
                        self._dirty = True
                        return
                    if a is not None and a.live:
                        self._river_settle(a)
                finally:
                    rlock.release()
        # between refits: lock-free while the face is live (see ``DeferredRiverFace._go_live_between_refits``)
        if (every := self.refit_every) is not None and t is None and learn_lock_free(self._lock, every, x, y, w):
            return
        # the generic path (see ``DeferredRiverFace``)
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
                    if (
                        a is not None
                        and a.river_ready
                        and self.refit_every is None
                        and lock.depth == 0
                        and (a.river or "histogram" not in self.__dict__)
                    ):
                        if not a.live:
                            self._river_go_live(a, lock)
                        if a.river:
                            sf, si = self._hist.live_arrays()
                            # tuple concatenations and a subscript: cheaper than the display and ``get``
                            args = (sf, si, a.pc, a.buf, s) + a.pending + a.river_tail  # noqa: RUF005
                            a.pending = a.no_event
                            try:
                                river = ENTRIES["river_learn"]
                            except KeyError:  # the interpreted tier, or before the first compiled call
                                p = entry_call("river_learn", _g.glm_river_learn_proba, args)
                            else:
                                p = river(*args)
                            if p < 0.0:  # the refit takes more: the generic engine's, on the settled state
                                self._river_settle(a)
                                p = self._generic_proba_of(s)
                        else:
                            # ``pending``: the kept event, then the call's other arguments
                            args = a.pending
                            a.pending = a.no_event
                            name = a.gev_entry  # the shapes' call, or with the logistic member
                            try:
                                river = ENTRIES[name]
                            except KeyError:  # the interpreted tier, or before the first compiled call
                                p = entry_call(name, GEV_ENTRIES[name], (s, *args))
                            else:
                                p = river(s, *args)
                            if p < 0.0:  # a shape needs the damped full refit: completed as the refit does
                                self._river_gev_complete(a)
                                p = min(max(self._fitted_proba_one(s), self._proba_low), self._proba_high)
                    else:
                        self._settle_deferred(lock)
                        p = self._river_proba(s)
                        if p < 0.0:
                            p = self._warm_proba() if not self._hist.built else self._generic_proba_of(s)
                finally:
                    rlock.release()
                return {False: 1.0 - p, True: p}
        p = -1.0 if self.refit_every is None else proba_lock_free(self._lock, x)  # between refits
        if p < 0.0:  # the generic path (see ``DeferredRiverFace``)
            p = self._proba_in_section(x)
        return {False: 1.0 - p, True: p}

    learn_one.__doc__ = StreamingCalibrator.learn_one.__doc__
    predict_proba_one.__doc__ = StreamingCalibrator.predict_proba_one.__doc__
