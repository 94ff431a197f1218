"""An anytime-valid test of the whole calibration map, betting on an online isotonic fit."""

from __future__ import annotations

import math
import numbers

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import monitor as _km
from streamcal._validation import check_scalar, fmt
from streamcal.buckets import as_buckets
from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.monitor._base import _Monitor
from streamcal.windows import as_window

__all__ = ["IsotonicEProcess"]

DEFAULT_BETS = (0.1, 0.3, 0.5, 0.7, 0.9)


class IsotonicEProcess(_Monitor):
    """Sequential test of ``P(y = 1 | p) = p`` whose false-alarm rate holds forever.

    Before each label the monitor forms a predictable alternative ``q``: the streaming
    isotonic (PAV) recalibration of the past ``(p, y)`` pairs, evaluated at the served
    probability ``p`` (a :class:`streamcal.PAVCalibrator` on probability inputs, served with the
    state before the label, exactly as its ``prequential`` does). It bets on ``q`` against
    ``p``: each of several components stakes a fraction ``b`` of its wealth, multiplying it by
    ``1 + b (LR - 1)``, ``LR = q / p`` for a positive and ``(1 - q) / (1 - p)`` for a negative,
    and the e-value is the components' mean. Under calibration (given everything the monitor
    has seen, each label is Bernoulli with its served ``p``) every component is a nonnegative
    martingale starting at 1, and so is their mean; Ville's inequality gives

        P(the e-value ever reaches 1 / alpha) <= alpha,

    however long the stream and however often it is looked at. The alarm rises when it does.
    Against any monotone miscalibration the isotonic fit converges to the true map, the bets
    win on average, and the wealth grows exponentially: the test has power against every such
    alternative (Henzi, Puke, Dimitriadis & Ziegel, "A safe Hosmer-Lemeshow test", 2023;
    Arnold, Henzi & Ziegel, "Sequentially valid tests for forecast calibration", 2023). Since
    ``q`` is a mixture with ``p`` for ``b < 1`` the wealth never reaches 0.

    Memory is the recalibrator's histogram (``buckets``), whatever the stream's length.

    Parameters
    ----------
    alpha : float, default 0.05
        The false-alarm probability, in (0, 1). The alarm threshold is ``1 / alpha``.
    bets : sequence of float, default (0.1, 0.3, 0.5, 0.7, 0.9)
        The fractions staked by the components, each in (0, 1).
    buckets : optional
        Buckets of the isotonic recalibration: a strategy for probability inputs (the default,
        ``LogitGrid()``: 1024 logit-spaced buckets; an int ``n`` is ``LogitGrid(n)``).
    window : optional
        Window of the recalibration's history (``None``: every past label; an int ``n``: the
        last ``n``; a window by events, such as ``Decay(half_life)``: windows by time are refused,
        the monitor's events carry no time). Any window keeps the guarantee (the alternative only has to be
        predictable); a window follows a drifting map faster.
    restart : bool, default False
        After an alarm, start the test again at once (see :meth:`reset`); the recalibration
        keeps what it has learned.

    Attributes
    ----------
    alarm : bool
        Whether the e-value has reached ``1 / alpha`` since the start or the last reset.
    e_value : float
        The current e-value (what :meth:`get` returns).
    first_alarm_at : int or None
        How many events the monitor had taken at its first alarm.

    Notes
    -----
    **Late labels.** Labels are given to the monitor when they arrive, with the probability
    served for their event, in the order they arrive. The guarantee then holds under the null
    "each label, given every label that arrived before it, is Bernoulli with its served
    probability", which holds when outcomes are independent given the forecasts, however long
    and uneven the delays. It is the sequential test in label-arrival time. The stronger null of
    Henzi & Ziegel ("Valid sequential inference on probability forecast performance",
    Biometrika, 2022) for forecasts made ``h`` steps ahead, calibration given only what was known
    when the forecast was made, would need the ``h`` interleaved sub-sequences tested apart;
    that is not what this class does.

    Examples
    --------
    A calibrated stream never alarms (with probability 0.95); one whose probabilities are too
    high is flagged within a few thousand events.

    >>> import numpy as np
    >>> from streamcal.monitor import IsotonicEProcess
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.05, 0.95, size=20_000)
    >>> monitor = IsotonicEProcess(alpha=0.05)
    >>> e = monitor.update_many(rng.uniform(size=p.size) < p, p)
    >>> monitor.alarm
    False
    >>> monitor = IsotonicEProcess(alpha=0.05)
    >>> e = monitor.update_many(rng.uniform(size=p.size) < p**1.5, p)
    >>> monitor.alarm, monitor.first_alarm_at < 3_000
    (True, True)

    The river face takes a probability or a ``predict_proba_one`` dict:

    >>> monitor = IsotonicEProcess()
    >>> monitor.update(True, {False: 0.3, True: 0.7})
    >>> monitor.update(False, 0.2)
    >>> monitor.n_seen, monitor.alarm
    (2, False)
    """

    def __init__(
        self,
        alpha: float = 0.05,
        bets=DEFAULT_BETS,
        buckets=None,
        window=None,
        restart: bool = False,
    ):
        super().__init__(alpha=alpha, restart=restart)
        self.bets = bets
        self.buckets = buckets
        self.window = window
        self._bets = _check_bets(bets)
        strategy = as_buckets(buckets)
        if not strategy.probability_inputs:
            msg = (
                f"`buckets` must be a strategy for probability inputs (such as LogitGrid): the "
                f"monitor reads served probabilities; got {strategy!r}."
            )
            raise ValueError(msg)
        if isinstance(window, numbers.Real) and not isinstance(window, numbers.Integral):
            # a float could mean a time, which the monitor cannot use: suggest a count of events
            events = int(window) if math.isfinite(window) and window >= 1 else 1000
            msg = (
                f"`window` must count events: an int (such as {events}), CountWindow or Decay by events (the "
                f"monitor's update takes no event times); got {fmt(window)}."
            )
            raise TypeError(msg)
        if window is not None and as_window(window).uses_times:
            msg = (
                f"`window` must count events (an int, CountWindow or Decay by events): the monitor's "
                f"update takes no event times; got {window!r}."
            )
            raise ValueError(msg)
        self._recalibration = PAVCalibrator(buckets=buckets, window=window)
        self._wealth = np.ones(self._bets.size)
        self._last_e = 1.0

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"alpha": 0.01, "bets": (0.5,), "buckets": 16, "window": 1000, "restart": True}

    def recalibrated(self, proba) -> np.ndarray:
        """The recalibration map now: the alternative the monitor would bet on at ``proba``."""
        with self._lock:
            return self._recalibration.predict_proba(proba)

    _DERIVED = ("_threshold", "_bets")
    _UNBOUNDED = ("_last_e",)  # +inf once an outcome the null cannot produce is seen

    def _check_loaded_wealth(self) -> None:
        from streamcal import _state_check as c

        wealth = self._wealth
        if not ((wealth >= 0.0).all()):  # +inf: an outcome the null cannot produce was seen
            c.fail(f"`_wealth`: expected values >= 0; found {c.brief(wealth)}.")
        c.need_float(self._last_e, "_last_e", low=0.0, finite=False)
        if not isinstance(self._recalibration, PAVCalibrator):
            c.fail(f"`_recalibration`: expected a PAVCalibrator; found {c.brief(self._recalibration)}.")
        want = PAVCalibrator(buckets=self.buckets, window=self.window)._get_params()
        have = self._recalibration._get_params()
        if have != want:
            wrong = sorted(name for name in want if have.get(name) != want[name])
            c.fail(f"`_recalibration`: expected the parameters buckets and window give; found other {wrong}.")

    def _prepare(self, y, p):
        if y.size == 0:
            return (p, y, p)
        q = self._recalibration.prequential(p, y)[0]
        return (p, y, q)

    def _advance(self, batch, start, watch, evalues):
        p, y, q = batch
        n = p.size - start
        done = _config.run(
            _km.isotonic_wealth_inplace,
            n,
            p[start:],
            y[start:],
            q[start:],
            self._bets,
            self._wealth,
            self._threshold,
            bool(watch),
            evalues,
        )
        self._last_e = float(evalues[done - 1])
        return done

    def _step_one(self, y: float, p: float) -> None:
        # the river face of the recalibration and the kernel's arithmetic in Python floats: the
        # same values as the batch path (tested), without the cost of a kernel call per event
        x = {"p": p}
        q = self._recalibration.predict_proba_one(x)[True]
        self._recalibration.learn_one(x, y == 1.0)
        num, den = (q, p) if y == 1.0 else (1.0 - q, 1.0 - p)
        wealth = self._wealth
        if den == 0.0:
            wealth[:] = math.inf
            self._last_e = math.inf
            return
        lr = num / den
        total = 0.0
        for k, bet in enumerate(self._bets.tolist()):
            w = float(wealth[k]) * (1.0 + bet * (lr - 1.0))
            wealth[k] = w
            total += w
        self._last_e = total / len(wealth)

    def _crossed(self) -> bool:
        return self._last_e >= self._threshold

    def _e_value(self) -> float:
        return self._last_e

    def _restart_wealth(self) -> None:
        self._wealth = np.ones(self._bets.size)
        self._last_e = 1.0


def _check_bets(bets) -> np.ndarray:
    if isinstance(bets, (str, bytes)) or not hasattr(bets, "__len__") or len(bets) == 0:
        msg = f"`bets` must be a non-empty sequence of fractions in (0, 1); got {bets!r}."
        raise ValueError(msg)
    for i, b in enumerate(bets):
        if isinstance(b, bool) or not isinstance(b, numbers.Real) or not 0.0 < float(b) < 1.0:
            msg = f"`bets` must hold fractions in (0, 1); got {b!r} at position {i}."
            raise ValueError(msg)
    out = np.array([float(b) for b in bets], dtype=np.float64)
    check_scalar(int(out.size), "bets", numbers.Integral, low=1)
    return out
