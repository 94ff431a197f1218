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

Where the score prior holds (the loop's state says ``"prior"``), the face has the same shape: the
kept label is learned, the refit under the prior run and the score served in one compiled call
(``ispline_prior_river.prior_river_pair``: the steps of ``_learn_bucket``, ``_prior_refit`` and
``_proba_of``, in their order, on the same arrays), whose map and bookkeeping stay in its river
state ``rs`` until a reader settles them (``_prior_write_back``). Where the kept sums do not serve
the refit, that call stops (``STOP_FULL``) and a second one (``prior_river_full``) finishes it. Where that refit is not
``_prior_refit``'s compiled one (no window weight, weights beyond the fit's scaling range) or it
finds the prior's strength 0, the call serves nothing: the state is written back, the engine
refits where it would, and the map is served as ``_proba_of`` serves it; the next label finds the
loop without the prior.
"""

from __future__ import annotations

import numpy as np

from streamcal import _prior
from streamcal._kernels import glm_refit as _glm
from streamcal._kernels import histogram as _h
from streamcal._kernels import ispline_prior_river as _kpr
from streamcal._kernels import ispline_prior_stream as _kips
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


def _prior_first_call(*args):
    """``prior_river_pair(*args)`` as ``_pair_first_call`` runs ``pair_fast``: interpreted while the
    process's allowance lasts, then by its compiled entry point, which takes this function's place
    as ``prior_call``."""
    global prior_call
    p = entry_call("ispline_prior_river_pair", _kpr.prior_river_pair, args)
    compiled = ENTRIES.get("ispline_prior_river_pair")
    if compiled is not None and prior_call is _prior_first_call:
        prior_call = compiled
    return p


prior_call = _prior_first_call  # the river face's one call per pair while the score prior holds


def prior_full_call(*args):
    """``prior_river_full(*args)`` (where ``prior_call`` returned ``STOP_FULL``), as ``entry_call`` runs it."""
    return entry_call("ispline_prior_river_full", _kpr.prior_river_full, args)


_RS = 11  # the river state ``rs`` in the prior face's ``args``
_SF = 5  # the first of the state's arrays there (``prior_river_full``'s arguments after the score)
_NAN = float("nan")
# the calibrator's methods whose steps ``prior_river_pair`` takes: a class overriding one keeps the generic
# methods; ``OWN_STEPS``: ``ISplineCalibrator``'s, by name (with its refit hooks), set where it is defined
PRIOR_STEPS = (
    "_refit", "_prior_refit", "_prior_args", "_prior_scratch", "_prior_listed", "_prior_touch", "_prior_incremental",
    "_proba_of", "_ensure_fitted", "_fitted_proba_one", "_learn_bucket", "_after_learn", "_set_proba_bounds",
)  # fmt: skip
OWN_STEPS = {}


def _pair_rest(p: float, args) -> float:
    """``stream_packed_pair(*args)`` after its first call ``pair_fast`` returned ``p < -NOT_DIRTY``:
    the refit's step it stopped at (``pair_resume``), or the loop's two operations (``AT_RUN``)."""
    if p == -_ks.AT_RUN:
        return entry_call("ispline_pair_run", _ks.pair_by_run, tuple(args))
    return entry_call("ispline_pair_resume", _ks.pair_resume, (int(-p), *args[SCORE:]))


class RiverState:
    """The deferred work of the river face: ``live`` (the loop's state is current and serves the
    face), ``args`` (while live, the pair's call: the kept event, bucket -1 when none, the
    score, then the histogram's arrays and the packed state; ``prior``: the prior face's call,
    its arrays after the score), ``stale`` (a prediction's map not yet written back), ``cuts``
    (the layout's interior cuts, for the bucket)."""

    __slots__ = ("args", "cuts", "live", "prior", "stale")

    def __init__(self, cuts):
        self.cuts = cuts
        self.live = False
        self.args = None
        self.stale = False
        self.prior = False  # True: ``args`` are ``prior_river_pair``'s (the score prior holds)


class ISplineRiverFace(DeferredRiverFace):
    """Mixin: the river face of ``ISplineCalibrator`` (see the module notes).

    It relies on the calibrator's compiled loop (``_loop_serves``, ``_stream_ready``, ``_stream``,
    ``_river_step``, ``_stream_publish``), while the score prior holds on its refit under the prior
    (``_prior_args``, ``_prior_incremental``, ``_prior_touch``: ``PRIOR_STEPS``), and keeps its
    deferred work in ``_glm_cache`` (the name :class:`streamcal.gev._river.RiverLock` reads; None
    until the face goes live).
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
        ):
            return None
        ready = self._stream_ready()
        if ready is True:
            st = self._stream
            sf, si = hist.live_arrays()  # the same arrays until a reader settles (no growing ring)
            args = [-1, 0.0, 0.0, 0.0, 0.0, sf, si, st["fbuf"], st["ibuf"], st["free"]]
        else:  # the score prior holds: ``prior_river_pair``'s arguments, where it serves
            args = self._prior_face_args() if ready == "prior" else None
            if args is None:
                return None
        if self._lock.learn_args is not None:  # live between refits until ``refit_every`` was cleared
            self._settle_deferred(self._lock)
        a = self._glm_cache
        if a is None or a.cuts is not hist.layout.cuts_list:
            a = self._glm_cache = RiverState(hist.layout.cuts_list)
        a.args = args
        a.prior = ready is not True
        a.live = True
        return a

    def _prior_face_args(self):
        """The prior face's call's arguments (``prior_river_pair``'s, the kept event none), or None where
        the score prior's refit is not the compiled one of ``_prior_refit`` with the calibrator's own
        arrays (under the lock, ``_stream_ready`` having said ``"prior"``)."""
        cls = type(self)
        if not (
            self._fitted
            and self._knots is not None
            and self._coef is not None
            and self._inner_knots is None
            and OWN_STEPS
            and all(getattr(cls, name) is f for name, f in OWN_STEPS.items())
        ):
            return None
        args = self._prior_args()
        if args is None:
            return None
        _, B, _, _, _, basis, basis_knots, _, _ = args
        order = int(self.order)
        P = B + 2 * (order + 1)
        knots, coef, beta = self._knots, self._coef, self._bspline_coef
        if max(knots.size, basis_knots.size, coef.size) > P or beta.size != coef.size:
            return None
        sf, si = self._hist.live_arrays()
        listed = getattr(self, "_prior_touched", None)
        if listed is None:
            touched, n, at = np.empty(_kips.TOUCHED_MAX, dtype=np.int64), 0, _NAN
        else:
            touched, n = listed[0], listed[1]
            at = float(listed[3]) if listed[2] is sf else _NAN  # NaN: the list does not follow these arrays
        rs = np.zeros(_kpr.rs_size(B, order))
        head = rs[: _kpr.RS_HEADER]
        head[_kpr.RS_DIRTY] = 1.0 if self._dirty else 0.0
        head[_kpr.RS_LOW], head[_kpr.RS_HIGH] = self._proba_low, self._proba_high
        head[_kpr.RS_NK], head[_kpr.RS_NBK], head[_kpr.RS_NC] = knots.size, basis_knots.size, coef.size
        head[_kpr.RS_HAS_LIST], head[_kpr.RS_N_TOUCHED], head[_kpr.RS_LISTED_AT] = listed is not None, n, at
        head[_kpr.RS_C] = float(self.llr_pseudo_count)
        head[_kpr.RS_ORDER], head[_kpr.RS_N_KNOTS] = order, -1 if self.n_knots is None else int(self.n_knots)
        head[_kpr.RS_FLOOR], head[_kpr.RS_INCREMENTAL] = _glm.FLOOR_THINNED, self._prior_incremental()
        h = _kpr.RS_HEADER
        rs[h : h + knots.size] = knots
        rs[h + P : h + P + basis_knots.size] = basis_knots
        rs[h + 2 * P : h + 2 * P + coef.size] = coef
        rs[h + 3 * P : h + 3 * P + coef.size] = beta
        return [-1, 0.0, 0.0, 0.0, 0.0, sf, si, self._prior_grid[4], self._prior_start, basis, touched, rs]

    def _prior_write_back(self, args) -> None:
        """What ``prior_river_pair`` left in the river state ``rs`` as the calibrator's attributes, as the
        generic methods leave them (under the lock): the last refit's map and bookkeeping
        (``_prior_refit``'s), ``_dirty`` and the list of touched buckets."""
        rs = args[_RS]
        dirty, kappa, total, _, t_pos, t_neg, _, _, nk, _, nc, refits, has_list, n, at, c = rs[:16].tolist()
        if refits > 0.0:
            B, order = int(args[6][_h.SI_B]), int(self.order)
            P, h, nk, nc = B + 2 * (order + 1), _kpr.RS_HEADER, int(nk), int(nc)
            knots = rs[h : h + nk].copy()
            self._n_since_refit = 0
            self._prior_strength = kappa
            self._basis_cache = (args[9], knots)
            self._knots = knots
            self._coef = rs[h + 2 * P : h + 2 * P + nc].copy()
            self._bspline_coef = rs[h + 3 * P : h + 3 * P + nc].copy()
            self._fit_weight = total
            self._prior_logodds = _prior.prior_logodds(t_pos, t_neg, c)
            self._set_proba_bounds(total)
            self._fitted = True
            rs[_kpr.RS_REFITS] = 0.0
        self._dirty = dirty != 0.0
        listed = getattr(self, "_prior_touched", None)
        if not has_list:
            self._prior_touched = None
        elif at != at:  # the list kept, not followed (no refit since the face went live)
            listed[1] = int(n)
        else:
            self._prior_touched = [args[10], int(n), args[5], at]

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
        if a.prior:  # the prior face's state written back, then the kept label learned as ``_learn_bucket`` does
            self._prior_write_back(args)
            if b >= 0:
                args[KEPT_B] = -1
                self._hist.learn_one(b, args[KEPT_Y], args[KEPT_W], 0.0)
                self._dirty = True
                self._prior_touch(b)
            return
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
                            if a.prior:  # in the prior face's call, which serves nothing for a NaN score
                                a.args[SCORE] = _NAN
                                prior_call(*a.args)
                            else:
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
                            args[SCORE] = s
                            if a.prior:
                                p = prior_call(*args)
                                args[KEPT_B] = -1
                                if p < 0.0:
                                    p = self._prior_pair_stopped(a, p, s)
                                return {False: 1.0 - p, True: p}
                            b = args[KEPT_B]
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

    def _prior_pair_stopped(self, a, code: float, s: float) -> float:
        """The probability of ``s`` where ``prior_river_pair`` stopped with ``code`` (the label
        learned): ``STOP_FULL``, the refit finished by ``prior_river_full``; where that stops as well,
        the state written back, the refit the engine's where the compiled one did not serve
        (``_refit`` after ``_prior_refit`` returned False), the map served as ``_proba_of`` serves
        it (under the lock)."""
        if code == _kpr.STOP_FULL:
            code = prior_full_call(s, *a.args[_SF:])
            if code >= 0.0:
                return code
        a.live = False
        self._prior_write_back(a.args)
        if code == _kpr.STOP_ENGINE:
            self._prior_touched = None
            RefitCalibrator._refit(self)
        return self._proba_of(s)

    learn_one.__doc__ = StreamingCalibrator.learn_one.__doc__
    predict_proba_one.__doc__ = StreamingCalibrator.predict_proba_one.__doc__
