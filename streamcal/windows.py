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
"""

from __future__ import annotations

import numbers

from river import base

from streamcal._kernels import histogram as _h
from streamcal._validation import check_scalar

__all__ = ["CountWindow", "Decay", "TimeWindow", "Unbounded", "Window"]


class Window(base.Base):
    """Base class of the window strategies.

    ``code()`` returns ``(kind, n, seconds, half_life)`` for the kernels; ``uses_times`` says
    whether learned events need a time; ``ring_capacity`` is the initial ring-buffer size.

    Examples
    --------
    >>> from streamcal.windows import CountWindow, Window
    >>> isinstance(CountWindow(5), Window), CountWindow(5).ring_capacity
    (True, 5)
    """

    uses_times: bool = False

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
    Unbounded ()
    """

    def code(self):
        return (_h.KIND_UNBOUNDED, 0.0, 0.0, 0.0)


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
    """

    def __init__(self, n: int = 10_000):
        self.n = n

    def code(self):
        check_scalar(self.n, "n", numbers.Integral, low=1)
        return (_h.KIND_COUNT, float(self.n), 0.0, 0.0)

    @property
    def ring_capacity(self) -> int:
        check_scalar(self.n, "n", numbers.Integral, low=1)
        return int(self.n)


class TimeWindow(Window):
    """The events learned within ``seconds`` of the latest learned event's time.

    Event times are required (``times=`` on the array face, ``t=`` on ``learn_one``) and must
    not go backwards. An event at ``t_i`` leaves once an event at ``t_now`` with
    ``t_now - t_i >= seconds`` is learned.

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

    def code(self):
        check_scalar(self.seconds, "seconds", low=0.0, low_inclusive=False)
        return (_h.KIND_TIME, 0.0, float(self.seconds), 0.0)

    @property
    def ring_capacity(self) -> int:
        return 1024


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
    Decay (
      half_life=1000.
      by="events"
    )
    """

    #: Range of ``half_life``. Below it every event outweighs the one before it by more than
    #: 2**(1e9): the window would hold only the newest event; above it the weights would hardly
    #: decay within any stream (use ``Unbounded``).
    MIN_HALF_LIFE = 1e-9
    MAX_HALF_LIFE = 1e18

    def __init__(self, half_life: float = 10_000.0, by: str = "events"):
        self.half_life = half_life
        self.by = by

    @property
    def uses_times(self) -> bool:  # type: ignore[override]
        return self.by == "time"

    def code(self):
        check_scalar(self.half_life, "half_life", low=self.MIN_HALF_LIFE, high=self.MAX_HALF_LIFE)
        check_scalar(self.by, "by", choices=("events", "time"))
        kind = _h.KIND_DECAY_TIME if self.by == "time" else _h.KIND_DECAY_EVENTS
        return (kind, 0.0, 0.0, float(self.half_life))
