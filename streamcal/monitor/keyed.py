"""One monitor per key, with the false-alarm budget spent across keys as they appear."""

from __future__ import annotations

import numbers

import numpy as np

from streamcal._keys import as_key_column
from streamcal._locking import LockedState, locked
from streamcal._validation import check_scalar, fmt
from streamcal.exceptions import InvalidKeyError
from streamcal.metrics._inputs import event_label, event_proba
from streamcal.monitor._base import DEFAULT_ALPHA, _Monitor, check_alpha, labels_and_proba
from streamcal.persist import Persistable

__all__ = ["KeyedMonitor"]


class KeyedMonitor(LockedState, Persistable):
    """A calibration monitor per key (a segment, a country, a model version), alarms controlled jointly.

    Each new key gets a fresh clone of ``monitor`` with its own level ``alpha_k``, and

        P(any key ever alarms | every key calibrated) <= sum of alpha_k <= alpha

    by the union bound, whatever the dependence between keys. With ``n_keys=None`` the budget
    is spent as keys appear: the ``k``-th key seen gets ``alpha / (k (k + 1))`` (these sum to
    ``alpha`` over any number of keys, so a key may arrive at any time); with ``n_keys=K`` every
    key gets ``alpha / K`` (Bonferroni) and a ``K + 1``-th key is refused. The first rule favours
    the keys seen first (the first gets ``alpha / 2``); give ``n_keys`` when the keys are known.
    Memory is one monitor per key.

    Parameters
    ----------
    monitor : IsotonicEProcess or MeanBiasCS
        The prototype; each key's clone gets its share of the family-wise ``alpha``.
    alpha : float, optional
        The family-wise false-alarm probability, in (0, 1); by default the prototype's own
        ``alpha`` (``KeyedMonitor(MeanBiasCS(alpha=0.01))`` spends 0.01 over the keys). Given
        both ways, the two must agree (or the prototype's be its default, 0.05).
    n_keys : int, optional
        The number of keys, if known.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.monitor import KeyedMonitor, MeanBiasCS
    >>> rng = np.random.default_rng(2)
    >>> keys = rng.choice(["fr", "de", "uk"], size=60_000)
    >>> p = rng.uniform(0.02, 0.2, size=keys.size)
    >>> truth = np.where(keys == "uk", 1.3 * p, p)          # "uk" is under-predicted
    >>> monitors = KeyedMonitor(MeanBiasCS(), alpha=0.05, n_keys=3)
    >>> e = monitors.update_many(keys, rng.uniform(size=p.size) < truth, p)
    >>> monitors.alarmed_keys()
    ['uk']
    >>> monitors.alpha_of("fr")
    0.016666666666666666
    """

    _UNSAVED = (*LockedState._UNSAVED, "_fresh")  # a cache: made again when first needed

    def __init__(self, monitor: _Monitor, alpha: float | None = None, n_keys: int | None = None):
        if not isinstance(monitor, _Monitor):
            msg = f"`monitor` must be a streamcal.monitor monitor (IsotonicEProcess, MeanBiasCS); got {monitor!r}."
            raise TypeError(msg)
        if alpha is None:
            alpha = monitor.alpha
        check_alpha(alpha)
        if monitor.alpha not in (alpha, DEFAULT_ALPHA):
            msg = (
                f"`alpha` must agree with the monitor's own alpha where both are given (the family-wise level, "
                f"spent over the keys); got alpha={alpha!r} and a monitor with alpha={monitor.alpha!r}."
            )
            raise ValueError(msg)
        if n_keys is not None:
            check_scalar(n_keys, "n_keys", numbers.Integral, low=1)
        self.monitor = monitor
        self.alpha = alpha
        self.n_keys = n_keys
        self._init_lock()
        self._monitors: dict = {}
        self._alpha_of: dict = {}
        self._n_seen = 0
        self._first_alarm_at: int | None = None
        self._first_alarm_key = None

    def _check_loaded_state(self) -> None:
        """Check a restored keyed monitor (:mod:`streamcal.persist`): valid parameters; one monitor
        of the template's class per key, the ``k``-th key's at the level ``_share(k)`` spends, in
        the order the keys came; counts in order. Each monitor checked its own state when restored."""
        from streamcal import _state_check as c

        c.need_keys(
            self,
            ("monitor", "alpha", "n_keys", "_monitors", "_alpha_of", "_n_seen", "_first_alarm_at", "_first_alarm_key"),
        )
        c.need_params(self, lambda: KeyedMonitor(self.monitor, self.alpha, self.n_keys))
        monitors, levels = self._monitors, self._alpha_of
        if type(monitors) is not dict or type(levels) is not dict or list(monitors) != list(levels):
            c.fail("`_monitors`/`_alpha_of`: expected two dicts over the same keys, in the same order.")
        if self.n_keys is not None and len(monitors) > self.n_keys:
            c.fail(f"`_monitors`: expected at most `n_keys` = {self.n_keys} keys; found {len(monitors)}.")
        for k, (key, monitor) in enumerate(monitors.items(), start=1):
            if type(monitor) is not type(self.monitor):
                c.fail(f"`_monitors[{key!r}]`: expected a {type(self.monitor).__name__}; found {c.brief(monitor)}.")
            if not (levels[key] == self._share(k) == monitor.alpha):
                c.fail(f"`_alpha_of[{key!r}]`: expected {self._share(k)!r} (key {k} to come); found {levels[key]!r}.")
        n = c.need_int(self._n_seen, "_n_seen", 0)
        if self._first_alarm_at is not None:
            c.need_int(self._first_alarm_at, "_first_alarm_at", 1, n)
            if self._first_alarm_key not in monitors:
                c.fail(f"`_first_alarm_key`: expected one of the keys; found {c.brief(self._first_alarm_key)}.")

    def _share(self, k: int) -> float:
        """The level of the ``k``-th key (1-based)."""
        if self.n_keys is not None:
            return float(self.alpha) / self.n_keys
        return float(self.alpha) / (k * (k + 1))

    def _check_room(self, new: list, name: str = "keys") -> None:
        """Refuse the new keys (``[(key, first position), ...]`` in order) beyond ``n_keys``."""
        room = None if self.n_keys is None else self.n_keys - len(self._monitors)
        if room is not None and len(new) > room:
            key, i = new[room]
            msg = (
                f"`{name}` holds more distinct keys than `n_keys` = {self.n_keys}: {len(self._monitors)} seen and "
                f"{len(new)} new; the first beyond it is {fmt(key)} at position {i}."
                if name == "keys"
                else f"`key` is new and `n_keys` = {self.n_keys} keys are already seen; got {fmt(key)}."
            )
            raise ValueError(msg)

    def _check_kind(self, key, name: str) -> None:
        """One kind of key per monitor (ints or strings), as a keyed calibrator keeps them."""
        if self._monitors and type(key) is not type(next(iter(self._monitors))):
            kind = type(next(iter(self._monitors))).__name__
            msg = f"`{name}` must be of the kind already seen ({kind}); got {fmt(key)} at position 0."
            raise InvalidKeyError(msg)

    def _monitor_of(self, key) -> _Monitor:
        monitor = self._monitors.get(key)
        if monitor is None:
            alpha = self._share(len(self._monitors) + 1)
            fresh = self.__dict__.get("_fresh")  # a fresh clone of the prototype, copied per key
            if fresh is None:
                fresh = self._fresh = self.monitor.clone()
            monitor = fresh._fresh_at(alpha)
            self._monitors[key] = monitor
            self._alpha_of[key] = alpha
        return monitor

    @locked
    def update(self, key, y_true, y_pred) -> None:
        """Take one labelled event of ``key`` (an int or a string, of the kind seen before)."""
        y, p = event_label(y_true), event_proba(y_pred)
        (key,) = as_key_column([key], "key").keys
        self._check_kind(key, "key")
        if key not in self._monitors:
            self._check_room([(key, 0)], "key")
        monitor = self._monitor_of(key)
        monitor.update(y, p)
        self._n_seen += 1
        self._note_alarm(monitor, key, self._n_seen)

    @locked
    def update_many(self, keys, labels, proba) -> np.ndarray:
        """Take a batch of labelled events with their keys; return each event's e-value (its key's).

        Equal to a loop of :meth:`update`; new keys are numbered in the order they first appear.
        """
        y, p = labels_and_proba(labels, proba)
        column = as_key_column(keys, "keys", y.size)
        if column.keys:  # a column holds one kind of key: its first event has it
            self._check_kind(column.keys[column.codes[0]], "keys")
        groups = _groups(column)
        self._check_room([(key, int(idx[0])) for key, idx in groups if key not in self._monitors])
        evalues = np.empty(y.size)
        before = self._n_seen
        alarms = []
        for key, idx in groups:
            monitor = self._monitor_of(key)
            seen = monitor.n_seen
            had_alarm = monitor.first_alarm_at is not None
            evalues[idx] = monitor.update_many(y[idx], p[idx])
            if not had_alarm and monitor.first_alarm_at is not None:
                alarms.append((int(idx[monitor.first_alarm_at - seen - 1]), key))
        self._n_seen += y.size
        if alarms and self._first_alarm_at is None:
            at, key = min(alarms, key=lambda a: a[0])
            self._first_alarm_at = before + at + 1
            self._first_alarm_key = key
        return evalues

    def _note_alarm(self, monitor: _Monitor, key, at: int) -> None:
        # the event just taken raised an alarm: a monitor that restarts has already cleared it
        if self._first_alarm_at is None and monitor.last_alarm_at == monitor.n_seen:
            self._first_alarm_at = at
            self._first_alarm_key = key

    # ---------------------------------------------------------------- readers
    @property
    def n_seen(self) -> int:
        """Events taken, over every key."""
        with self._lock:
            return self._n_seen

    @property
    def alarm(self) -> bool:
        """Whether any key's monitor is alarmed now."""
        with self._lock:
            return any(m.alarm for m in self._monitors.values())

    @locked
    def alarmed_keys(self) -> list:
        """The keys whose monitor is alarmed now, in the order the keys appeared."""
        return [key for key, m in self._monitors.items() if m.alarm]

    @property
    def first_alarm_at(self) -> int | None:
        """How many events (all keys) had been taken at the first alarm of any key."""
        return self._first_alarm_at

    @property
    def first_alarm_key(self):
        """The key that alarmed first (None: none has)."""
        return self._first_alarm_key

    @locked
    def alpha_of(self, key) -> float:
        """The level given to ``key``'s monitor (``KeyError`` naming a key never seen)."""
        return self._alpha_of[self._seen_key(key)]

    @locked
    def keys(self) -> list:
        """The keys seen, in the order they appeared."""
        return list(self._monitors)

    @locked
    def __getitem__(self, key) -> _Monitor:
        """The live monitor of ``key`` (``KeyError`` naming a key never seen): read it, or reset
        it (``keyed[key].reset()`` restarts that key's test alone); learn through the keyed
        monitor, which counts the events and the first alarm over all keys."""
        return self._monitors[self._seen_key(key)]

    def _seen_key(self, key):
        """``key`` as held (an int or a str); ``KeyError`` naming it if it has no monitor."""
        (held,) = as_key_column([key], "key").keys
        if held not in self._monitors:
            seen = list(self._monitors)
            shown = ", ".join(fmt(k) for k in seen[:5]) + (", ..." if len(seen) > 5 else "")
            listed = f": {shown}" if seen else ""
            msg = f"key {fmt(held)} has no monitor: it has not been seen ({len(seen)} keys seen{listed})."
            raise KeyError(msg)
        return held

    @locked
    def reset(self) -> None:
        """Start every key's test again (:meth:`streamcal.monitor.IsotonicEProcess.reset` on each
        key's monitor: wealth 1, no alarm); the keys, their levels and the record of past alarms
        (:attr:`first_alarm_at`, :attr:`first_alarm_key`) are kept. ``keyed[key].reset()`` resets
        one key."""
        for monitor in self._monitors.values():
            monitor.reset()

    def __len__(self) -> int:
        return len(self._monitors)

    @locked
    def __contains__(self, key) -> bool:
        """Whether ``key`` has a monitor (False for a key never seen or that cannot be one)."""
        try:
            (held,) = as_key_column([key], "key").keys
        except (TypeError, ValueError):
            return False
        return held in self._monitors

    @locked
    def get(self) -> dict:
        """Each key's e-value."""
        return {key: m.get() for key, m in self._monitors.items()}

    def __repr__(self) -> str:
        alarmed = self.alarmed_keys()
        return f"KeyedMonitor({len(self)} keys, {len(alarmed)} alarmed: {alarmed[:5]!r})"


def _groups(column) -> list:
    """``[(key, positions), ...]`` of a coded key column, in the order the keys first appear."""
    codes = column.codes
    _, first = np.unique(codes, return_index=True)  # every coded key appears in the column
    order = np.argsort(first, kind="stable")
    by_group = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[by_group], np.arange(len(column.keys) + 1))
    return [(column.keys[j], by_group[bounds[j] : bounds[j + 1]]) for j in order]
