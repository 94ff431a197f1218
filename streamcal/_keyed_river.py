"""The river face of :class:`streamcal.KeyedCalibrator`: ``learn_one`` and ``predict_*_one``.

:class:`KeyedRiverFace` is a base of the keyed calibrator (not used alone). The common event (a
dict holding an int or str key of a kind already learned and a float score, a bool label, a
float weight; no time, or a finite time as a Python or numpy float or int, which a window with
times requires) takes a lean path: a dict look-up for the key's slot and one compiled call
(:func:`streamcal._kernels.keyed.river_learn`, or for an event with a time
:func:`streamcal._kernels.keyed_river.river_learn_at`; :func:`~streamcal._kernels.keyed.river_predict`)
that runs the global map's packed single-score kernels and the key's row on scalars, with no
arrays built. It gives what the general path (the array face's machinery on one event) gives, bit
for bit; anything else, and any event the kernels refuse (a score out of range, a weight the
checks reject, a time going backwards, an event for which the general path resizes the global
map's ring), takes the general path, which raises the documented errors. A refused event
changes nothing.
"""

from __future__ import annotations

import contextlib
import numbers

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import keyed as _kk
from streamcal._kernels import keyed_river as _kr
from streamcal.exceptions import InvalidKeyError

__all__ = ["LEAN_PLAIN", "LEAN_TIMES", "KeyedRiverFace", "one_event"]

_OP_LEARN = 1
# ``KeyedRiverFace._lean``: the lean path under a window without times (an event's time, if
# given, is only checked), and under a window with times (every learned event gives one)
LEAN_PLAIN = 1
LEAN_TIMES = 2
_INT64_LOW, _INT64_HIGH = -(2**63), 2**63


def _plain_time(t) -> float | None:
    """``t`` as the float the array face's checks make of it, where ``t`` is a Python or numpy
    float, or a Python or numpy int within int64's range (numpy converts those the same way);
    None for anything else (the general path checks it)."""
    if type(t) is float:
        return t
    if type(t) is int or (isinstance(t, np.integer) and not isinstance(t, np.timedelta64)):
        t = int(t)
        return float(t) if _INT64_LOW <= t < _INT64_HIGH else None
    if isinstance(t, np.floating):
        return float(t)
    return None


@contextlib.contextmanager
def one_event(key_name, score_name):
    """The river face's errors name its arguments (``x[...]``, ``y``, ``w``, ``t``), not the
    array face's columns it runs through."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        if type(exc) not in (ValueError, TypeError, InvalidKeyError):
            raise
        if msg.endswith("pass `times=`."):  # a time window's times, as the unkeyed river face says it
            raise type(exc)(msg.replace("pass `times=`.", "pass `t=` to learn_one.")) from None
        # a column's message (a value at position 0, or the column's dtype: bools given as times)
        # names the river face's argument
        for column, one in (("keys", f"x[{key_name!r}]"), ("scores", f"x[{score_name!r}]"), ("labels", "y"),
                            ("weights", "w"), ("times", "t")):
            msg = msg.replace(f"`{column}`", f"`{one}`")
        raise type(exc)(msg.replace(" at position 0", "")) from None


def _bound_on_first_call(name: str, kernel):
    """A stand-in for the river-face kernel ``kernel``: while the process's allowance of
    interpreted events lasts (:mod:`streamcal._kernels._config`) it runs the kernel interpreted;
    then it compiles (or loads) the kernel for the types of its first compiled call's arguments,
    puts the entry point (called without numba's per-call dispatch) in its place on the class and
    calls it. The arguments are always of those types: the keyed state's C-contiguous arrays,
    Python ints and floats."""

    def first_call(*args):
        result = _config.try_entry_point(kernel, *args)
        if result is not _config.NOT_RUN:
            return result
        compiled = _config.entry_point(kernel, *args)
        setattr(KeyedRiverFace, name, compiled)
        return compiled(*args)

    return staticmethod(first_call)


class KeyedRiverFace:
    """The river face of a keyed calibrator (a base of :class:`streamcal.KeyedCalibrator`, not
    used alone)."""

    _lean = 0  # an instance over sparse rows sets LEAN_PLAIN or LEAN_TIMES (_rebuild_caches)

    # compiled by their first call (class attributes: held by an instance, they would lead
    # river's memory walk into numba's registries, as PAVCalibrator's packed kernels note)
    _river_learn = _bound_on_first_call("_river_learn", _kk.river_learn)
    _river_learn_at = _bound_on_first_call("_river_learn_at", _kr.river_learn_at)
    _river_predict = _bound_on_first_call("_river_predict", _kk.river_predict)

    def _split(self, x: dict):
        if not isinstance(x, dict):
            msg = f"`x` must be a dict holding the key and the score; got {type(x).__name__}."
            raise TypeError(msg)
        if self.key_key not in x:
            msg = f"`x` must hold the key under {self.key_key!r}; got the keys {sorted(map(str, x))}."
            raise InvalidKeyError(msg)
        key = x[self.key_key]
        if self.score_key is not None:
            if self.score_key not in x:
                msg = f"`x` must hold the score under {self.score_key!r}; got the keys {sorted(map(str, x))}."
                raise ValueError(msg)
            name, score = self.score_key, x[self.score_key]
        else:
            rest = [(name, v) for name, v in x.items() if name != self.key_key]
            if len(rest) != 1:
                msg = (
                    f"`x` must hold one score besides the key {self.key_key!r} (or set score_key); got "
                    f"{len(rest)} other entries."
                )
                raise ValueError(msg)
            ((name, score),) = rest
        if isinstance(key, str):
            key = str(key)  # numpy's str_ too: the key is its str value
        elif key is None or not isinstance(key, numbers.Integral) or isinstance(key, (bool, np.bool_)):
            msg = f"`x[{self.key_key!r}]` must be an int or a string key; got {key!r}."
            raise InvalidKeyError(msg)
        return [key], [score], name

    def _lean_split(self, x: dict):
        """``(key, score)`` of a plain ``x`` (a dict, an int, numpy int or str key, a float or numpy
        float64 score), else None."""
        key_key = self.key_key
        score_key = self.score_key
        if score_key is None:
            if len(x) != 2:
                return None
            a, b = x
            if a == key_key:
                score_key = b
            elif b == key_key:
                score_key = a
            else:
                return None
        key = x.get(key_key)
        score = x.get(score_key)
        if type(key) is not int and type(key) is not str:
            if not isinstance(key, np.integer):
                return None
            key = int(key)  # numpy's ints (a column's items): the key is its int value, as on the general path
        if type(score) is not float:
            if type(score) is not np.float64:
                return None
            score = float(score)
        return key, score

    def _lean_slot(self, key) -> int | None:
        """``key``'s slot, -1 if it has none, or None where the key is of another kind than the
        keys learned (the general path raises)."""
        k = self._slot_of.get(key)
        if k is not None:
            return k
        if self._slot_of and type(next(iter(self._slot_of))) is not type(key):
            return None
        return -1

    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        if type(y) is np.bool_:  # a numpy column's items take the lean path too
            y = bool(y)
        if type(w) is np.float64:
            w = float(w)
        if t is None:  # no time: the lean path under a window without times
            if self._lean is LEAN_PLAIN and (y is True or y is False) and type(w) is float and type(x) is dict:
                event = self._lean_split(x)
                if event is not None:
                    with self._lock:
                        if self._learn_lean(self._river_learn, event[0], event[1], 1.0 if y else 0.0, w, 0.0):
                            return
        elif self._lean and (y is True or y is False) and type(w) is float and type(x) is dict:
            clock = _plain_time(t)  # a plain time: the lean path (its kernel checks it)
            if clock is not None:
                event = self._lean_split(x)
                if event is not None:
                    with self._lock:
                        if self._learn_lean(self._river_learn_at, event[0], event[1], 1.0 if y else 0.0, w, clock):
                            return
        keys, scores, name = self._split(x)
        with self._lock, one_event(self.key_key, name):
            self._run_checked(*self._checked(keys, scores, [y], None, [w], None if t is None else [t], _OP_LEARN))

    def _learn_lean(self, learn, key, s: float, y: float, w: float, t: float) -> bool:
        """Learn one checked-kind event on the lean path by the kernel ``learn`` (``river_learn``,
        or ``river_learn_at`` for an event at time ``t``); False (nothing changed) where the
        general path must run it: a key of another kind, an event the kernel refuses. A new key
        takes a slot, evicting the least recently updated key first where ``max_keys`` keys hold
        one, as the general path admits it."""
        k = self._lean_slot(key)
        if k is None:
            return False
        stamp = float(self._n_learned + 1)
        packed = self._global.packed_state()
        while True:
            done = learn(
                packed, self._cfg, self._kf, self._ki, self._atoms_b, self._atoms_f, self._atoms_n, self._ring_b,
                self._ring_f, self._blocks_b, self._blocks_f, self._arena, self._holes, self._prior, self._pri,
                self._scratch_b, self._scratch_w, k, s, y, w, t, stamp,
            )
            if done == _kk.DONE:
                break
            if done == _kk.NO_ROOM:
                self._make_room(k)
            elif done == _kk.NEW_KEY:
                limit = self._key_limit()
                if limit is not None and self.n_keys >= limit:
                    self._evict_lru()  # as the general path admits a key: the least recently updated leaves
                k = self._new_slot(key)
            else:
                return False
        self._n_learned += 1
        if self._n_learned >= self._next_refresh:
            self._refresh_prior()
        return True

    def predict_proba_one(self, x: dict) -> dict:
        p = self._predict_one(x)[0]
        return {False: 1.0 - p, True: p}

    def predict_llr_one(self, x: dict) -> float:
        return self._predict_one(x)[1]

    def predict_one(self, x: dict) -> bool:
        return self._predict_one(x)[0] > 0.5

    def _predict_one(self, x: dict) -> tuple[float, float]:
        if self._lean and type(x) is dict:
            event = self._lean_split(x)
            if event is not None:
                with self._lock:
                    k = self._lean_slot(event[0])
                    if k is not None:
                        p, llr = self._river_predict(
                            self._global.packed_state(), self._cfg, self._cen, self._kf, self._ki, self._atoms_b,
                            self._atoms_f, self._prior, self._pri, self._blocks_b, self._blocks_f, self._scratch_b,
                            self._scratch_w, k, event[1],
                        )
                        if p >= 0.0:
                            return float(p), float(llr)  # the interpreted tier gives numpy floats
        keys, scores, name = self._split(x)
        with self._lock, one_event(self.key_key, name):
            p, llr = self._predict(keys, scores)
        return float(p[0]), float(llr[0])
