"""Per-instance locks: what makes every streaming learner safe to share between threads.

Each learner holds a re-entrant lock, ``_lock``, around every public method that reads or changes
its state, so concurrent calls behave as if they ran one after another, in some order, and no call
sees a half-updated state. The lock is not part of the state: it is made by the constructor and
again whenever a copy is restored (``__setstate__``), and never saved, copied or pickled. Copies
and pickles are taken while holding it, so they are consistent snapshots even while other threads
learn. ``docs/architecture.md`` ("Thread safety") states the guarantee.

:class:`streamcal.PAVCalibrator` refines the scheme for its river face (see
``streamcal/isotonic/streaming.py``): its per-event calls take no lock in the common case.
"""

from __future__ import annotations

import copy
import functools
import threading

__all__ = ["LockedState", "SectionLock", "locked"]

_PLAIN = frozenset({int, float, bool, str, type(None)})  # immutable values: a copy may share them


class SectionLock:
    """Base of the calibrators' own locks (``acquire``/``release`` theirs): usable in ``with``."""

    __slots__ = ()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc_info):
        self.release()


def locked(method):
    """The method run while holding ``self._lock`` (for methods that are not per-event hot paths)."""

    @functools.wraps(method)
    def under_lock(self, *args, **kwargs):
        lock = self._lock
        lock.acquire()  # explicitly: half the cost of a `with` statement per call
        try:
            return method(self, *args, **kwargs)
        finally:
            lock.release()

    return under_lock


def _restore(cls, state):
    """Rebuild a pickled learner (the reconstructor named by :meth:`LockedState.__reduce_ex__`)."""
    obj = cls.__new__(cls)
    obj.__setstate__(state)
    return obj


class LockedState:
    """Mixin: a per-instance lock, ``_lock``, kept out of saved, copied and pickled state.

    A class using it calls ``self._init_lock()`` in its constructor before any other thread can
    see the object, and holds ``with self._lock:`` in each public method. ``_UNSAVED`` names the
    attributes that ``__getstate__`` leaves out (a subclass extends it with its own caches).
    """

    _UNSAVED: tuple[str, ...] = ("_lock",)

    def _init_lock(self) -> None:
        self._lock = threading.RLock()

    def __getstate__(self):
        with self._lock:
            state = self.__dict__.copy()
        for name in self._UNSAVED:
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_lock()

    def __deepcopy__(self, memo):
        # what copy.deepcopy does by default (a new object, its state deep-copied), under the lock
        with self._lock:
            cls = type(self)
            new = cls.__new__(cls)
            memo[id(self)] = new
            state = self.__getstate__()
            for value in state.values():
                # a list of numbers (a layout's cuts and centres, a bucket per element) copied in
                # one C call: its elements are immutable, so the copy is as deep as deepcopy's
                if type(value) is list and id(value) not in memo and _PLAIN.issuperset(map(type, value)):
                    memo[id(value)] = value.copy()
            new.__setstate__(copy.deepcopy(state, memo))
        return new

    def __reduce_ex__(self, protocol):
        # pickle serialises the state after this returns: hand it a snapshot taken under the lock
        with self._lock:
            state = copy.deepcopy(self.__getstate__())
        return (_restore, (type(self), state))
