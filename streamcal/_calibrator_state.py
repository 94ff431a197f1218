"""The saved form of a streaming calibrator, the checks of a restored one, and merging.

:class:`CalibratorState` is a base of :class:`streamcal._streaming.StreamingCalibrator`: a
calibrator saves as its parameters plus its histogram's and its map's attributes under flat
names (``_sf`` for the histogram's floats, ...; files written by earlier versions use them), is
checked when restored before any kernel reads the state (:mod:`streamcal._state_check` holds the
helpers; the histogram and the map check their own parts), and merges with another calibrator
of its class through its histogram's window rule (:mod:`streamcal.merging` dispatches).
"""

from __future__ import annotations

import copy

import numpy as np

from streamcal._histogram import SAVED_NAMES, WindowedHistogram
from streamcal._layout import BucketLayout, finite_range
from streamcal.buckets import Buckets, as_buckets
from streamcal.merging import merge
from streamcal.windows import as_window

__all__ = ["CalibratorState", "SavedName"]


class SavedName:
    """An attribute read under the name a saved state gives it (``cal._sf`` is ``cal._hist.floats``).

    ``path`` is the chain of attributes it stands for. The state checks of a restored calibrator
    read the saved names before the state is rebuilt from them: a non-data descriptor, so the
    instance's own attribute of that name, present only then, comes first.
    """

    def __init__(self, *path: str):
        self.path = path

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        for name in self.path:
            obj = getattr(obj, name)
        return obj


class CalibratorState:
    """The saved form, the checks of a restored state and merging of a streaming calibrator (a base
    of :class:`streamcal._streaming.StreamingCalibrator`, not used alone)."""

    # derived from the state: not saved, rebuilt on loading
    _CACHES: tuple[str, ...] = ()
    # ``__setstate__`` checks the restored state (streamcal.persist need not)
    _checks_own_state = True

    def __getstate__(self):
        state = super().__getstate__()  # under the lock, without it (streamcal._locking)
        state.update(state.pop("_hist").saved())  # the histogram's attributes under their saved names
        for name in self._CACHES:
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_lock()  # not state: made anew (streamcal._locking)
        # the arrays become this calibrator's own (a state file may name one array twice), then
        # the state is checked, under its saved names, before any kernel reads it
        for name, value in state.items():
            if type(value) is np.ndarray:
                self.__dict__[name] = np.array(value, order="C", copy=True)
        self._check_loaded_state()
        self._hist = WindowedHistogram.from_saved(self.__dict__, as_window(self.window), as_buckets(self.buckets))

    # ------------------------------------------------------------------ checks of a restored state
    def _check_loaded_state(self) -> None:
        """Check a state restored by ``__setstate__`` (a state file, pickle, copy) before any kernel
        runs on it; raise :class:`streamcal.exceptions.StateFileError` naming what is wrong.

        The attributes must be those of a calibrator of this class with these parameters (same
        names and types); the parameters must pass the constructor's checks; the attributes
        derived from the bucket and window strategies must equal what they derive; the histogram
        must pass its own checks (:meth:`streamcal._histogram.WindowedHistogram.check_saved`: the
        bucket layout against the strategy, the arrays against the window, or the quantile warm-up
        buffer); then ``_check_loaded_map`` checks the fitted map. Subclasses extend
        ``_check_loaded_map``.
        """
        from streamcal import _state_check as c
        from streamcal.buckets import Edges, QuantileEdges

        state = self.__dict__
        warm = state.get("_sf") is None and "_warm" in state
        template = self._loaded_state_template(QuantileEdges(1, 1) if warm else Edges((0.0, 1.0)))
        params = set(template._get_params())
        expected = template.__getstate__()
        try:  # the parameter as the constructor reads it (a shorthand such as "quantile:32" too)
            warmup_strategy = bool(as_buckets(self.buckets).warmup)
        except (TypeError, ValueError):
            warmup_strategy = False  # refused below, with the other parameter checks
        if not warm and warmup_strategy:
            # the warm-up is over: its buffer and strategy are gone, its counters stay
            leftovers = self._loaded_state_template(QuantileEdges(1, 1)).__getstate__()
            gone = {*expected, "_warm", "_strategy"}
            expected.update((k, v) for k, v in leftovers.items() if k not in gone)
        c.need_keys(self, set(expected) | params, optional=self._UNSAVED)
        for name, want in expected.items():
            if name in params or want is None:
                continue
            value = state[name]
            if isinstance(want, np.ndarray):
                if not (type(value) is np.ndarray and value.dtype == want.dtype and value.ndim == want.ndim):
                    c.fail(f"`{name}`: expected a {want.ndim}-d {want.dtype} array; found {c.brief(value)}.")
            elif type(value) is not type(want):
                c.fail(f"`{name}`: expected a {type(want).__name__}; found {c.brief(value)}.")
        if self.score_key is not None:
            c.need_params(self, lambda: hash(self.score_key))
        try:  # the parameters as the constructor reads them (shorthands included)
            buckets = as_buckets(self.buckets)
            window = as_window(self.window)
        except (TypeError, ValueError) as exc:
            c.fail(f"`buckets` and `window` must be valid strategies: {exc}")
        low, high = finite_range(buckets.score_range)
        derived = {
            "_window_code": window.code(),
            "_uses_times": bool(window.uses_times),
            "_ring_capacity": window.ring_capacity,
            "_score_low": low,
            "_score_high": high,
            "_bucket_kind": type(buckets).__name__,
            "_identity": bool(buckets.probability_inputs),
            "_warmup": int(buckets.warmup),
        }
        for name, want in derived.items():
            if type(state[name]) is not type(want) or state[name] != want:
                found = c.brief(state[name])
                c.fail(f"`{name}`: expected {want!r} (from the bucket and window strategies); found {found}.")
        WindowedHistogram.check_saved(state, window, buckets, self.buckets)
        if not warm:
            self._check_loaded_map()

    def _loaded_state_template(self, buckets: Buckets):
        """A calibrator of this class with the loaded parameters (the constructor checks them) over
        ``buckets`` (one bucket, or a one-event warm-up) and no window: the attributes a loaded state
        must have, without allocating what the loaded bucket and window parameters ask for."""
        from streamcal import _state_check as c
        from streamcal._params import init_param_names

        state = self.__dict__
        names = init_param_names(type(self))
        missing = [k for k in names if k not in state]
        if missing:
            c.fail(f"the attributes do not match a {type(self).__name__}: missing the parameters {missing}.")
        params = {k: state[k] for k in names}
        params.update(buckets=buckets, window=None)
        template = None
        try:
            template = type(self)(**params)
        except (TypeError, ValueError, OverflowError) as exc:
            c.fail(f"invalid parameters for {type(self).__name__}: {exc}")
        return template

    def merge(self, *others):
        """A new calibrator equal to one that learned the events of ``self`` and ``others``.

        The calibrators must be of one class with equal parameters and bucket edges; for count,
        time and event-decay windows they are taken in stream order (see :mod:`streamcal.merging`).
        None of them is modified.
        """
        return merge([self, *others])

    # merging (streamcal.merging) ------------------------------------------------------------
    def _merged_with(self, other):
        with other._lock:  # a consistent state of ``other``, even while it learns
            if other.n_learned == 0:
                return self
            if self.n_learned == 0:
                return copy.deepcopy(other)
            if not other._hist.built:  # ``other`` still buffers its quantile warm-up: replay its events
                return self._merged_with_warmup(other)
            if not self._hist.built:
                msg = (
                    f"`calibrators` cannot be merged: the first is still in its quantile warm-up ({self.n_learned} "
                    f"of {self._hist.warmup} events) while the other has learned its edges from different data. Fix "
                    "the edges with streamcal.buckets.Edges before fitting the parts."
                )
                raise ValueError(msg)
            self._hist.merge_from(other._hist)  # ValueError if the bucket edges differ
            self._histogram_replaced()
            self._rebuild_map_after_merge(other)
        return self

    def _merged_with_warmup(self, other):
        """Merge an ``other`` still in its quantile warm-up by replaying its buffered events."""
        scores, labels, weights, times = other._hist.warm_events()
        times_arg = times if self._hist.uses_times else None
        if as_window(self.window).event_clock or self._hist.last_time() <= float(times[0]):
            self.update(scores, labels, weights=weights, times=times_arg)  # concatenation (or in time order)
            return self
        if not self._hist.built:  # both buffering, time clock: interleave the two buffers by time and replay
            parts = zip(self._hist.warm_events(), other._hist.warm_events(), strict=True)
            both = [np.concatenate(pair) for pair in parts]
            order = np.argsort(both[3], kind="stable")
            fresh = self.clone()
            fresh.update(both[0][order], both[1][order], weights=both[2][order], times=both[3][order])
            return fresh
        # self is built, time clock, other's events interleave with self's: the merged stream's
        # edges would come from its first events in time order, which mix both: not self's edges
        msg = (
            "`calibrators` cannot be merged: a time-clock calibrator still in its quantile warm-up into one "
            "that has built its edges: the merged stream's edges would come from both. Fix the edges with "
            "streamcal.buckets.Edges before fitting the parts."
        )
        raise ValueError(msg)


# the histogram's attributes under their saved names (``_sf`` for ``_hist.floats``, ...)
for _key, _name in SAVED_NAMES.items():
    setattr(CalibratorState, _key, SavedName("_hist", _name))
for _key, _name in (*BucketLayout.SAVED_NAMES.items(), ("_guide", "guide")):
    setattr(CalibratorState, _key, SavedName("_hist", "layout", _name))
