"""What every calibration monitor shares: its inputs, its faces and its alarm bookkeeping.

A monitor is a river binary metric (``update(y_true, y_pred)``, ``get()``) with an array face
(``update_many(labels, proba)``). Its state is a wealth process (a nonnegative supermartingale
under calibration, started at 1) and the record of its alarms. The subclasses say how the wealth
moves (:meth:`_Monitor._advance`) and what a restart clears (:meth:`_Monitor._restart_wealth`).
"""

from __future__ import annotations

import numbers

import numpy as np
from river import metrics

from streamcal._locking import LockedState, locked
from streamcal._validation import as_binary_labels, as_probabilities, check_scalar
from streamcal.metrics._inputs import check_length_as_labels, event_label, event_proba
from streamcal.persist import Persistable


def labels_and_proba(labels, proba) -> tuple[np.ndarray, np.ndarray]:
    """Validate a batch: labels 0/1 (or bool) and probabilities in [0, 1] of the same length."""
    y = as_binary_labels(labels, "labels", allow_empty=True)
    p = as_probabilities(proba, "proba", allow_empty=True)
    check_length_as_labels(y.size, p.size, "proba")
    return y, p


DEFAULT_ALPHA = 0.05  # every monitor's default false-alarm level


def check_alpha(alpha) -> None:
    check_scalar(alpha, "alpha", numbers.Real, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)


class _Monitor(LockedState, Persistable, metrics.base.BinaryMetric):
    """Base of the monitors: the river and array faces, the alarm, ``reset`` and ``restart``.

    Every public method holds the monitor's lock (``streamcal._locking``): one monitor may be
    updated by one thread while others read it.
    """

    _fmt = ".4g"

    # parameters' derived values a restored monitor must hold exactly as a fresh one does
    _DERIVED: tuple[str, ...] = ("_threshold",)
    _UNBOUNDED: tuple[str, ...] = ()  # floats that may be +inf (the subclass's own check bounds them)

    def _fresh_at(self, alpha: float):
        """A fresh monitor of this one's parameters at level ``alpha`` (checked by the caller);
        this one must be fresh itself (a keyed monitor makes one per key from a fresh clone)."""
        return self.clone({"alpha": alpha})

    def _check_loaded_state(self) -> None:
        """Check a restored monitor (:mod:`streamcal.persist`) before a kernel reads it: the
        attributes of a fresh monitor with these parameters, of the same types; the values derived
        from the parameters equal to the fresh ones; every array of the fresh one's shape, with no
        NaN; counts whole and in order. The subclasses add their own invariants
        (``_check_loaded_wealth``)."""
        from streamcal import _state_check as c

        fresh = c.check_like_fresh(self, unbounded=self._UNBOUNDED)
        state, want = vars(self), vars(fresh)
        for name in self._DERIVED:
            if not (type(state[name]) is type(want[name]) and np.array_equal(state[name], want[name])):
                c.fail(f"`{name}`: expected {want[name]!r} (from the parameters); found {c.brief(state[name])}.")
        for name, value in want.items():
            if isinstance(value, np.ndarray):
                array = c.need_array(state[name], name, value.dtype, ndim=value.ndim, shape=value.shape)
                if np.isnan(array).any():
                    c.fail(f"`{name}`: expected no NaN; found {c.brief(array)}.")
        n = c.need_int(state["_n_seen"], "_n_seen", 0)
        c.need_int(state["_n_alarms"], "_n_alarms", 0, n)
        c.need_bool(state["_alarm"], "_alarm")
        for name in ("_first_alarm_at", "_last_alarm_at"):
            if state[name] is not None:
                c.need_int(state[name], name, 1, n)
        self._check_loaded_wealth()

    def _check_loaded_wealth(self) -> None:
        """The subclass's own invariants of a restored state (see ``_check_loaded_state``)."""

    def __init__(self, alpha: float = 0.05, restart: bool = False):
        check_alpha(alpha)
        check_scalar(restart, "restart", choices=(True, False))
        self.pos_val = True  # BinaryMetric.__init__ would build a confusion matrix never used
        self.alpha = alpha
        self.restart = restart
        self._init_lock()
        self._threshold = 1.0 / float(alpha)
        self._n_seen = 0
        self._alarm = False
        self._first_alarm_at: int | None = None
        self._last_alarm_at: int | None = None
        self._n_alarms = 0

    # ---------------------------------------------------------------- river metric protocol
    @property
    def bigger_is_better(self) -> bool:
        return False

    @property
    def requires_labels(self) -> bool:
        return False

    @property
    def works_with_weights(self) -> bool:
        return False

    def revert(self, y_true, y_pred, w=1.0) -> None:
        """Not supported: a wealth process cannot take an event back (its bets were placed)."""
        msg = f"{type(self).__name__} cannot revert an event: its wealth has already bet on it."
        raise NotImplementedError(msg)

    def __repr__(self) -> str:
        state = "ALARM" if self.alarm else "no alarm"
        return f"{type(self).__name__}: e-value {self.e_value:.4g} ({state}, {self.n_seen} events)"

    # ---------------------------------------------------------------- faces
    @locked
    def update(self, y_true, y_pred, w=1.0) -> None:
        """Take one labelled event: its label and the probability that was served for it.

        ``y_pred`` is a probability or a ``predict_proba_one`` dict (its ``True`` entry). ``w``
        exists for river's metric protocol and must be 1: monitors count events, not weights.
        """
        y, p = event_label(y_true), event_proba(y_pred)
        if not (isinstance(w, numbers.Real) and not isinstance(w, bool) and w == 1):
            msg = f"`w` must be 1: {type(self).__name__} does not weight events; got {w!r}."
            raise ValueError(msg)
        self._consume_one(1.0 if y else 0.0, p)

    @locked
    def update_many(self, labels, proba) -> np.ndarray:
        """Take a batch of labelled events in order; return the e-value after each event.

        Equal, event for event, to a loop of :meth:`update` each followed by :meth:`get`: with
        ``restart=True`` an alarm event's e-value is that of the restarted wealth (1), and the
        alarm itself shows in :attr:`n_alarms` and :attr:`last_alarm_at`. The batch is checked before
        anything changes: labels 0/1 or bool, probabilities in [0, 1] (NaN refused with its
        position), the same length.
        """
        y, p = labels_and_proba(labels, proba)
        return self._consume(y, p)

    @locked
    def get(self) -> float:
        """The current e-value (the same as :attr:`e_value`)."""
        return self._e_value()

    # ---------------------------------------------------------------- state
    @property
    def e_value(self) -> float:
        """The wealth since the start or the last reset: an e-value at any stopping time."""
        with self._lock:
            return self._e_value()

    @property
    def p_value(self) -> float:
        """An anytime-valid p-value: ``min(1, 1 / e)`` for the e-value now (Ville's inequality)."""
        with self._lock:
            e = self._e_value()
            return 1.0 if e <= 1.0 else 1.0 / e

    @property
    def alarm(self) -> bool:
        """Whether the wealth has reached ``1 / alpha`` since the start or the last reset."""
        return self._alarm

    @property
    def first_alarm_at(self) -> int | None:
        """How many events the monitor had taken when it first alarmed (None: never)."""
        return self._first_alarm_at

    @property
    def last_alarm_at(self) -> int | None:
        """How many events the monitor had taken at its latest alarm (None: never)."""
        return self._last_alarm_at

    @property
    def n_alarms(self) -> int:
        """Alarms so far: at most one between resets (each restart may alarm once more)."""
        return self._n_alarms

    @property
    def n_seen(self) -> int:
        """Events taken since the monitor was made."""
        return self._n_seen

    @locked
    def reset(self) -> None:
        """Start the test again: wealth 1, no alarm. The record of past alarms is kept.

        The guarantee restarts too: from the reset on, a calibrated stream alarms again with
        probability at most ``alpha``, whatever happened before.
        """
        self._restart_wealth()
        self._alarm = False

    # ---------------------------------------------------------------- machinery
    def _consume(self, y: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Advance the wealth over validated events; record alarms; restart if asked."""
        n = y.size
        evalues = np.empty(n)
        batch = self._prepare(y, p)
        i = 0
        while i < n:
            watch = self.restart or not self._alarm
            done = self._advance(batch, i, watch, evalues[i:])
            i += done
            if watch and self._crossed():
                self._record_alarm(self._n_seen + i)
                if self.restart:
                    # the alarm event's e-value is the restarted wealth, as get() says after update
                    self.reset()
                    evalues[i - 1] = self._e_value()
        self._n_seen += n
        return evalues

    def _consume_one(self, y: float, p: float) -> None:
        """One validated event: what :meth:`_consume` does with a batch of one."""
        watch = self.restart or not self._alarm
        self._step_one(y, p)
        self._n_seen += 1
        if watch and self._crossed():
            self._record_alarm(self._n_seen)
            if self.restart:
                self.reset()

    def _step_one(self, y: float, p: float) -> None:
        """Advance the wealth over one validated event (by default: the batch path on one event)."""
        self._advance(self._prepare(np.array([y]), np.array([p])), 0, True, np.empty(1))

    def _record_alarm(self, at: int) -> None:
        self._alarm = True
        self._n_alarms += 1
        self._last_alarm_at = at
        if self._first_alarm_at is None:
            self._first_alarm_at = at

    def _prepare(self, y: np.ndarray, p: np.ndarray) -> tuple:
        """What the wealth recursion reads for this batch (may advance a state of its own)."""
        raise NotImplementedError

    def _advance(self, batch: tuple, start: int, watch: bool, evalues: np.ndarray) -> int:
        """Run the wealth over ``batch`` from ``start``; stop after a crossing if ``watch``;
        return the number of events consumed."""
        raise NotImplementedError

    def _crossed(self) -> bool:
        raise NotImplementedError

    def _e_value(self) -> float:
        raise NotImplementedError

    def _restart_wealth(self) -> None:
        raise NotImplementedError
