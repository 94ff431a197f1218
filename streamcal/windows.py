"""Windows: how old evidence leaves a streaming calibrator's histogram.

A window is a small parameter object (river style). The calibrator keeps the state; memory is
O(buckets + events in the window), never O(stream):

- :class:`Unbounded`: nothing leaves; state O(buckets).
- :class:`CountWindow`: the last ``n`` learned events; a ring buffer of their bucket, label and
  weight; the event that leaves has its weight subtracted. State O(buckets + n), fixed size.
- :class:`TimeWindow`: the events whose time is within ``seconds`` of the latest learned
  event's time (an event at ``t_i`` leaves once ``t_now - t_i >= seconds``). Times must not go
  backwards: a learn whose time is earlier than the last learned one is rejected with a clear
  error and the state is left untouched. State O(buckets + events in the span).
- :class:`Decay`: exponential forgetting with a half-life, by one global scale factor (no pass
  over the buckets per event); the stored values are renormalised by an exact power of two
  before they could overflow. State O(buckets).

The window clock advances on learned events only; predictions never change the state.

Shorthands
----------
Every ``window=`` parameter also takes the values people type, through one parser,
:func:`as_window` (the replay command line's ``--window`` uses it too):

- ``None``: :class:`Unbounded`;
- an int, or a string of one (``100_000``, ``"100000"``, ``"1e5"``): ``CountWindow(n)``, with
  ``1 <= n <= 2**53``;
- a duration string, a number and a unit (``"7d"``, ``"12h"``, ``"30m"``, ``"3600s"``,
  ``"1.5h"``, ``"1w"``; units ``ms``, ``s``/``sec``, ``m``/``min``, ``h``/``hr``, ``d``,
  ``w``): ``TimeWindow(seconds)``, the event times then being in seconds.

A float is refused (``window=1.5``: a count of events or seconds?), and so are bools. The
calibrator stores the value as given (its ``repr`` and ``clone`` show it); the strategy is
derived from it. :func:`as_decay` reads ``Decay`` half-lives the same way (an int is a number of
events, a duration string a time).
"""

from __future__ import annotations

import numbers
import re
from decimal import Decimal

import numpy as np
from river import base

from streamcal import _histogram as hist
from streamcal._kernels import histogram as _h
from streamcal._validation import call_repr, check_scalar

__all__ = [
    "MAX_WINDOW_EVENTS",
    "CountWindow",
    "Decay",
    "TimeWindow",
    "Unbounded",
    "Window",
    "as_decay",
    "as_window",
    "parse_duration",
]

#: The largest count window (and event half-life): the kernels hold it as a float64, exact up
#: to ``2**53``. A count window also allocates its ring of ``n`` events when the calibrator is
#: built, so memory bounds it far earlier (about 32 bytes per event).
MAX_WINDOW_EVENTS = 2**53


class Window(base.Base):
    """Base class of the window strategies.

    Each window says what the histogram needs from it:

    - ``code()``: ``(kind, n, seconds, half_life)``, the parameters the kernels read;
    - ``uses_times``: whether learned events need a time (a time clock), else the clock counts
      learned events (``event_clock``);
    - ``ring_capacity``: the ring's initial size (0: no ring); ``grows_ring``: whether the ring
      grows and shrinks with the events in the window (a time window) or keeps its size;
    - ``merge_histograms(a, b, ring_capacity)``: the histogram of the merged stream
      (:mod:`streamcal.merging` states what the merged stream is for each clock).

    Examples
    --------
    >>> from streamcal.windows import CountWindow, Window
    >>> isinstance(CountWindow(5), Window), CountWindow(5).ring_capacity
    (True, 5)
    """

    uses_times: bool = False

    @property
    def event_clock(self) -> bool:
        """Whether the clock counts learned events (else it is the events' time)."""
        return not self.uses_times

    @property
    def grows_ring(self) -> bool:
        """Whether the ring grows and shrinks with the events in the window."""
        return False

    @property
    def keeps_ring(self) -> bool:
        """Whether the histogram keeps a ring of the events in the window."""
        return self.ring_capacity > 0

    @property
    def decays(self) -> bool:
        """Whether stored weights decay (a moving frame of stored units)."""
        return False

    # checks of a restored histogram (streamcal._histogram.check_arrays, passed as ``c``:
    # ``c.fail(message)`` raises the state file error)
    def check_saved_ring_capacity(self, capacity: int, c) -> None:
        """The ring's capacity in a restored histogram of this window."""
        if capacity != 0:
            c.fail(f"`_si` ring capacity: expected 0 (this window keeps no ring); found {capacity}.")

    def check_saved_ring_count(self, count: int, n_learned: float, c) -> None:
        """The number of events in the ring of a restored histogram after ``n_learned`` events
        (a window with a ring only)."""

    def check_saved_ring_clocks(self, clocks: np.ndarray, n_learned: float, last_t: float, c) -> None:
        """The clocks of the ring's events (oldest first, at least one) of a restored histogram
        after ``n_learned`` events, the last at clock ``last_t`` (a window with a ring only)."""

    def merge_histograms(self, a: hist.State, b: hist.State, ring_capacity: int) -> hist.State:
        """The histogram ``(floats, ints)`` of the stream merged from states ``a`` then ``b``
        (new arrays; ``a`` and ``b`` are read only). ``ring_capacity``: the calibrator's initial
        ring size."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _check_loaded_state(self) -> None:
        """The parameters of a restored window (:mod:`streamcal.persist`)."""
        from streamcal import _state_check as c

        c.check_like_fresh(self)
        c.need_params(self, self.code)

    def __repr__(self) -> str:
        return call_repr(self)

    __str__ = __repr__  # river shows a parameter object by ``str`` in its estimators' ``repr``

    def code(self) -> tuple[int, float, float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def ring_capacity(self) -> int:
        return 0


class Unbounded(Window):
    """Every learned event stays: the calibrator fits the whole stream.

    Examples
    --------
    >>> from streamcal.windows import Unbounded
    >>> Unbounded()
    Unbounded()
    """

    def code(self):
        return (_h.KIND_UNBOUNDED, 0.0, 0.0, 0.0)

    def merge_histograms(self, a, b, ring_capacity):
        # every event stays: the sums add, in any order
        return hist.added(a, b, scale_a=1.0, event_clock=True)


class CountWindow(Window):
    """The last ``n`` learned events.

    Parameters
    ----------
    n
        Number of events kept.

    Examples
    --------
    >>> from streamcal.windows import CountWindow
    >>> CountWindow(n=1000).n
    1000
    >>> CountWindow(100_000)
    CountWindow(n=100000)
    """

    def __init__(self, n: int = 10_000):
        self.n = n
        self.code()  # the parameters checked when given, as the calibrators check theirs

    def code(self):
        check_scalar(self.n, "n", numbers.Integral, low=1, high=MAX_WINDOW_EVENTS)
        return (_h.KIND_COUNT, float(self.n), 0.0, 0.0)

    def check_saved_ring_capacity(self, capacity, c):
        if int(self.n) != capacity:
            c.fail(f"`_si` ring capacity: expected {int(self.n)} (the count window); found {capacity}.")

    def check_saved_ring_count(self, count, n_learned, c):
        if count != min(n_learned, float(self.n)):
            want = int(min(n_learned, self.n))
            c.fail(f"`_si` ring count: expected {want} (the last events of a count window); found {count}.")

    def check_saved_ring_clocks(self, clocks, n_learned, last_t, c):
        if not np.array_equal(clocks, n_learned - clocks.size + np.arange(clocks.size, dtype=np.float64)):
            c.fail("`_sf` ring clocks: expected the numbers of the last learned events, in order.")

    @property
    def ring_capacity(self) -> int:
        check_scalar(self.n, "n", numbers.Integral, low=1, high=MAX_WINDOW_EVENTS)
        return int(self.n)

    def merge_histograms(self, a, b, ring_capacity):
        # the last n events of a's then b's (the rings hold every event in the window)
        ba, ya, wa, ta = hist.ring_events(a)
        bb, yb, wb, tb = hist.ring_events(b)
        n_a, n_b = float(a[0][_h.SF_N_LEARNED]), float(b[0][_h.SF_N_LEARNED])
        keep = int(self.n)
        events = tuple(np.concatenate(p)[-keep:] for p in ((ba, bb), (ya, yb), (wa, wb)))
        clocks = np.concatenate((ta, tb + n_a))[-keep:]
        merged = hist.replayed(self.code(), hist.n_buckets(a), int(a[1][_h.SI_W]), events, np.zeros(clocks.size))
        hist.set_ring_clocks(merged, clocks)  # the replay started the ring at 0 without wrapping
        merged[0][_h.SF_N_LEARNED] = n_a + n_b
        merged[0][_h.SF_LAST_T] = n_a + n_b - 1.0
        return merged


class TimeWindow(Window):
    """The events learned within ``seconds`` of the latest learned event's time.

    Event times are required (``times=`` on the array face, ``t=`` on ``learn_one``) and must
    not go backwards. An event at ``t_i`` leaves once an event at ``t_now`` with
    ``t_now - t_i >= seconds`` is learned.

    The ring of the window's events (about 32 bytes an event) grows and shrinks with them: before
    an array call it grows to the most events the window will hold at once during the call (read
    from the call's times, at most 256 above), never to the call's length.

    Parameters
    ----------
    seconds
        Span of the window, in the units of the event times.

    Examples
    --------
    >>> from streamcal.windows import TimeWindow
    >>> TimeWindow(seconds=3600.0).seconds
    3600.0
    """

    uses_times = True

    def __init__(self, seconds: float = 3600.0):
        self.seconds = seconds
        self.code()  # the parameters checked when given, as the calibrators check theirs

    def code(self):
        check_scalar(self.seconds, "seconds", low=0.0, low_inclusive=False)
        return (_h.KIND_TIME, 0.0, float(self.seconds), 0.0)

    @property
    def ring_capacity(self) -> int:
        return 1024

    @property
    def grows_ring(self) -> bool:
        return True

    def merge_histograms(self, a, b, ring_capacity):
        # both rings in time order (a's first among equal times); the replay drops what is too old
        ba, ya, wa, ta = hist.ring_events(a)
        bb, yb, wb, tb = hist.ring_events(b)
        clocks_all = np.concatenate((ta, tb))
        order = np.argsort(clocks_all, kind="stable")
        events = tuple(np.concatenate(p)[order] for p in ((ba, bb), (ya, yb), (wa, wb)))
        clocks = clocks_all[order]
        capacity = max(int(ring_capacity), 1 << max(int(clocks.size) - 1, 0).bit_length())
        merged = hist.replayed(self.code(), hist.n_buckets(a), capacity, events, clocks)
        merged[0][_h.SF_N_LEARNED] = float(a[0][_h.SF_N_LEARNED]) + float(b[0][_h.SF_N_LEARNED])
        merged[0][_h.SF_LAST_T] = max(float(a[0][_h.SF_LAST_T]), float(b[0][_h.SF_LAST_T]))
        return merged

    def check_saved_ring_capacity(self, capacity, c):
        if capacity < 1:
            c.fail(f"`_si` ring capacity: expected an int >= 1 for a time window; found {capacity}.")

    def check_saved_ring_count(self, count, n_learned, c):
        if n_learned > 0 and count == 0:
            c.fail("`_si` ring count: expected at least the last learned event in the window; found 0.")

    def check_saved_ring_clocks(self, clocks, n_learned, last_t, c):
        c.need_increasing(clocks, "_sf ring clocks", strict=False)
        if clocks[-1] != last_t or not last_t - clocks[0] < float(self.seconds):
            c.fail(
                f"`_sf` ring clocks: expected times within {float(self.seconds)!r} of the last clock "
                f"{last_t!r}, the newest equal to it; found {float(clocks[0])!r} to {float(clocks[-1])!r}."
            )


class Decay(Window):
    """Exponential forgetting: an event's weight halves every ``half_life``.

    With ``by="events"`` the half-life counts learned events (an event learned ``k`` events ago
    weighs ``2**(-k / half_life)``, the newest one weighing 1); with ``by="time"`` it is in the
    units of the event times (``2**(-(t_now - t_i) / half_life)``; times required, never going
    backwards). One global factor implements it: no per-event pass over the buckets; the stored
    values are rescaled by an exact power of two every 64 half-lives so that they never overflow,
    and events older than about 1000 half-lives underflow to zero (they are forgotten; a clock
    jump of any length, even beyond the range of a double in half-lives, just forgets them).

    Parameters
    ----------
    half_life
        Half-life, in events or in time units: a number in ``[MIN_HALF_LIFE, MAX_HALF_LIFE]``
        (``[1e-9, 1e18]``, see ``docs/limits.md``), checked when a calibrator is built with it.
    by
        ``"events"`` or ``"time"``.

    Examples
    --------
    >>> from streamcal.windows import Decay
    >>> Decay(half_life=1000.0)
    Decay(half_life=1000.0)
    >>> Decay(3600.0, by="time")
    Decay(half_life=3600.0, by='time')
    """

    #: Range of ``half_life``. Below it every event outweighs the one before it by more than
    #: 2**(1e9): the window would hold only the newest event; above it the weights would hardly
    #: decay within any stream (use ``Unbounded``).
    MIN_HALF_LIFE = 1e-9
    MAX_HALF_LIFE = 1e18

    def __init__(self, half_life: float = 10_000.0, by: str = "events"):
        self.half_life = half_life
        self.by = by
        self.code()  # the parameters checked when given, as the calibrators check theirs

    @property
    def uses_times(self) -> bool:  # type: ignore[override]
        return self.by == "time"

    @property
    def decays(self) -> bool:
        return True

    def code(self):
        check_scalar(self.half_life, "half_life", low=self.MIN_HALF_LIFE, high=self.MAX_HALF_LIFE)
        check_scalar(self.by, "by", choices=("events", "time"))
        kind = _h.KIND_DECAY_TIME if self.by == "time" else _h.KIND_DECAY_EVENTS
        return (kind, 0.0, 0.0, float(self.half_life))

    def merge_histograms(self, a, b, ring_capacity):
        fa, fb = a[0], b[0]
        half_life = float(fa[_h.SF_HALF_LIFE])
        if self.by == "events":
            # a's event at clock c is stored as w 2^((c - t0a)/h); in the merged frame (b's frame
            # moved on by n_a: t0 = t0b + n_a) it is w 2^((c - t0b - n_a)/h)
            n_a = float(fa[_h.SF_N_LEARNED])
            exponent = (float(fa[_h.SF_T0]) - float(fb[_h.SF_T0]) - n_a) / half_life
            return hist.added(a, b, scale_a=hist.decay_factor(exponent), event_clock=True, frame_follows=True)
        # the later state's frame is kept; the other's stored weights move into it
        later, earlier = (b, a) if fb[_h.SF_LAST_T] >= fa[_h.SF_LAST_T] else (a, b)
        exponent = (float(earlier[0][_h.SF_T0]) - float(later[0][_h.SF_T0])) / half_life
        merged = hist.added(earlier, later, scale_a=hist.decay_factor(exponent), event_clock=False)
        merged[0][_h.SF_LAST_T] = max(float(fa[_h.SF_LAST_T]), float(fb[_h.SF_LAST_T]))
        return merged


# ------------------------------------------------------------------------------- shorthands
_UNITS = {
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "sec": Decimal(1),
    "m": Decimal(60),
    "min": Decimal(60),
    "h": Decimal(3600),
    "hr": Decimal(3600),
    "d": Decimal(86_400),
    "w": Decimal(604_800),
}
_UNIT_LIST = "ms, s, m (or min), h, d, w"
_NUMBER = re.compile(r"\s*(?P<num>[+-]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[A-Za-z]*)\s*")


def _number_and_unit(text: str) -> tuple[Decimal, str] | None:
    """``(number, unit)`` of a string such as ``"7d"``, ``"1.5 h"``, ``"100_000"`` (unit ``""``)."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        return None
    return Decimal(match["num"].replace("_", "")), match["unit"]


def _seconds(number: Decimal, unit: str, name: str, value) -> float:
    if unit not in _UNITS:
        msg = (
            f"`{name}` = {value!r} has an unknown unit {unit!r}; the units are {_UNIT_LIST} "
            "(such as '7d', '12h', '3600s')."
        )
        raise ValueError(msg)
    seconds = float(number * _UNITS[unit])
    if not seconds < float("inf"):
        msg = f"`{name}` = {value!r} is too large: a duration must be a finite number of seconds."
        raise ValueError(msg)
    return seconds


def _whole(number: Decimal, name: str, value, what: str) -> int:
    """``number`` as an int in ``[1, MAX_WINDOW_EVENTS]``, or raise saying what is wrong."""
    if number != number.to_integral_value():
        msg = (
            f"`{name}` = {value!r} is not a whole number of events; for a duration give a unit, "
            f"such as '{value}s' (units: {_UNIT_LIST})."
        )
        raise ValueError(msg)
    if number < 1:
        msg = f"`{name}` must be a positive number of events, an int in [1, 2**53]; got {value!r}."
        raise ValueError(msg)
    if number > MAX_WINDOW_EVENTS:
        msg = f"`{name}` = {value!r} is too large: {what} must be an int in [1, 2**53]."
        raise ValueError(msg)
    return int(number)


def _shorthand(value, name: str, what: str):
    """``("events", n)`` or ``("seconds", s)`` from an int or a string, or raise naming ``name``."""
    if isinstance(value, str):
        parsed = _number_and_unit(value)
        if parsed is None:
            msg = (
                f"`{name}` must be a whole number of events (such as 100000) or a duration with a unit "
                f"(such as '7d', '12h', '3600s'; units {_UNIT_LIST}); got {value!r}."
            )
            raise ValueError(msg)
        number, unit = parsed
        if not unit:
            return "events", _whole(number, name, value, what)
        seconds = _seconds(number, unit, name, value)
        if not seconds > 0.0:
            msg = f"`{name}` must be a positive duration; got {value!r}."
            raise ValueError(msg)
        return "seconds", seconds
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return "events", _whole(Decimal(int(value)), name, value, what)
    return None


def _refuse(value, name: str, kinds: str, float_hint: str):
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_, numbers.Integral)):
        hint = float_hint.format(v=float(value))
        msg = (
            f"`{name}` must be {kinds}; got {value!r} of type {type(value).__name__}, which could be "
            f"a number of events or a time: {hint}."
        )
    else:
        msg = f"`{name}` must be {kinds}; got {value!r} of type {type(value).__name__}."
    raise TypeError(msg)


def as_window(value, name: str = "window") -> Window:
    """The window strategy a ``window=`` value means (see the module's *Shorthands*).

    Parameters
    ----------
    value
        ``None`` (unbounded), a :class:`Window`, an int number of events (a count window), or a
        string: a whole number of events, or a duration with a unit (a time window in seconds).
    name
        The argument's name in error messages (``"--window"`` on the command line).

    Examples
    --------
    >>> from streamcal.windows import as_window
    >>> as_window(100_000), as_window("7d"), as_window(None)
    (CountWindow(n=100000), TimeWindow(seconds=604800.0), Unbounded())
    >>> as_window("7x")
    Traceback (most recent call last):
    ...
    ValueError: `window` = '7x' has an unknown unit 'x'; the units are ms, s, m (or min), h, d, w
    (such as '7d', '12h', '3600s').
    """
    if value is None:
        return Unbounded()
    if isinstance(value, Window):
        return value
    parsed = _shorthand(value, name, "a count window's number of events")
    if parsed is None:
        _refuse(
            value,
            name,
            "an int number of events (CountWindow), a duration string such as '7d' or '3600s' "
            "(TimeWindow), a window from streamcal.windows, or None",
            "for a time window of {v!r} seconds write '{v!r}s' (or TimeWindow({v!r}) for other time units)",
        )
    kind, amount = parsed
    return CountWindow(amount) if kind == "events" else TimeWindow(amount)


def as_decay(value, name: str = "decay") -> Decay:
    """A :class:`Decay` from a half-life: an int (or a string of one) in events, or a duration.

    Examples
    --------
    >>> from streamcal.windows import as_decay
    >>> as_decay(10_000), as_decay("3d")
    (Decay(half_life=10000.0), Decay(half_life=259200.0, by='time'))
    """
    if isinstance(value, Decay):
        return value
    parsed = _shorthand(value, name, "a half-life in events")
    if parsed is None:
        _refuse(
            value,
            name,
            "a half-life: an int number of events, a duration string such as '3d', or a Decay",
            "write Decay({v!r}) for a half-life of {v!r} events, '{v!r}s' for {v!r} seconds",
        )
    kind, amount = parsed
    return Decay(float(amount), by="events") if kind == "events" else Decay(amount, by="time")


def parse_duration(value, name: str = "duration") -> float:
    """Seconds, from a number (taken as seconds) or a string such as ``"90s"``, ``"15m"``, ``"3d"``.

    A string without a unit is seconds too. The result is finite and non-negative.

    Examples
    --------
    >>> from streamcal.windows import parse_duration
    >>> parse_duration("1.5h"), parse_duration(30), parse_duration("45")
    (5400.0, 30.0, 45.0)
    """
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        seconds = float(value)
    elif isinstance(value, str) and (parsed := _number_and_unit(value)) is not None:
        number, unit = parsed
        seconds = _seconds(number, unit or "s", name, value)
    else:
        msg = f"`{name}` must be a number of seconds or a duration such as '90s', '15m', '12h', '3d'; got {value!r}."
        raise ValueError(msg)
    if not 0.0 <= seconds < float("inf"):
        msg = f"`{name}` must be a finite, non-negative duration; got {value!r}."
        raise ValueError(msg)
    return seconds
