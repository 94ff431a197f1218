"""An anytime-valid confidence sequence for calibration in the large (the mean of y - p)."""

from __future__ import annotations

import copy
import math
import numbers

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import monitor as _km
from streamcal._validation import as_1d_float, check_scalar, fmt
from streamcal.monitor._base import _Monitor

__all__ = ["MeanBiasCS", "default_grid"]

# Each candidate's capital is the mean of capitals staking these multiples of the plug-in stake:
# the plug-in rule is tuned to the width of the interval, and a shift in the mean is detected
# sooner by a larger stake; a mean of capitals costs at most log(3) of the best one's wealth.
STAKE_SCALES = (1.0, 3.0, 9.0)


def default_grid() -> np.ndarray:
    """The default candidate mean biases: 0 and ±40 values spaced geometrically from 1e-4 to 0.99.

    Relative steps of about 26 %: the interval's ends are read to that resolution, finely near 0
    where the biases of probability models lie.
    """
    side = np.geomspace(1e-4, 0.99, 40)
    return np.concatenate((-side[::-1], [0.0], side))


class MeanBiasCS(_Monitor):
    """Confidence sequence for the mean bias ``E[y - p]`` by betting; alarms when it leaves 0.

    For each candidate mean ``m`` on a grid (0 among them) the monitor runs the two capital
    processes of Waudby-Smith & Ramdas ("Estimating means of bounded random variables by
    betting", JRSSB, 2024) on ``z = y - p`` in [-1, 1]: ``K+(m) = prod(1 + lam (z - m))`` bets
    that the mean of ``z`` is above ``m``, ``K-(m) = prod(1 - lam (z - m))`` that it is below,
    with the predictable plug-in stake ``lam`` of their paper (shrinking as
    ``sqrt(log(2 / alpha) / (variance * t log t))``, capped at ``max_bet / (1 + max |m|)``);
    each capital is the mean of three such products staking 1, 3 and 9 times ``lam`` (capped
    alike), which detects a shift sooner than the plug-in stake alone. If
    the bias really is ``m`` (every ``z`` has conditional mean ``m`` given the past), both are
    nonnegative martingales starting at 1, and by Ville's inequality each ever reaches
    ``2 / alpha`` with probability at most ``alpha / 2``. One stake serves every candidate, so
    ``K+`` decreases and ``K-`` increases with ``m``: the candidates whose ``K+`` has reached
    ``2 / alpha`` are all those below some point, those whose ``K-`` has, all those above
    another, and the sequence is the interval between, with

        P(the true bias ever leaves the interval) <= alpha,

    for any bias, on the grid or between its points (the ends are grid points). The alarm rises
    when 0 leaves it: calibration in the large fails. Memory is the grid (two numbers per
    candidate), constant over the stream; only the candidates still inside cost time.

    Parameters
    ----------
    alpha : float, default 0.05
        The miscoverage (and false-alarm) probability, in (0, 1).
    grid : array-like, optional
        Candidate mean biases, strictly increasing, in (-1, 1), holding 0: the resolution of the
        interval's ends. Default: :func:`default_grid`.
    max_bet : float, default 0.5
        Cap of the stakes, in (0, 1): at most ``max_bet`` of a capital can be lost on one event.
    restart : bool, default False
        After an alarm, start again at once: the sequence then covers the events since.

    Attributes
    ----------
    interval : tuple of float
        The confidence sequence for the mean bias now.
    e_value : float
        ``(K+(0) + K-(0)) / 2``, an e-process for "the bias is 0"; it is at least ``1 / alpha``
        whenever the alarm has risen, and from then on (0 outside the interval, whose candidates
        alone are updated) it stays as it was at the alarm until a reset.

    Notes
    -----
    **The ratio.** :attr:`ratio` is the predicted over the observed positives, ``sum p / sum y``
    since the start or the last reset. If the bias is a constant ``m``, the expected observed
    mean is ``mean p + m``, so :attr:`ratio_interval` = ``mean p / (mean p + [high, low])`` covers
    the expected ratio whenever the sequence covers ``m``: with probability at least
    ``1 - alpha`` at all times.

    **Late labels.** As for :class:`IsotonicEProcess`: labels are taken in their arrival order,
    and the guarantee holds when each ``y - p``, given the labels that arrived before it, has
    mean ``m``, however the delays fall.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.monitor import MeanBiasCS
    >>> rng = np.random.default_rng(1)
    >>> p = rng.uniform(0.0, 0.2, size=50_000)
    >>> monitor = MeanBiasCS()
    >>> e = monitor.update_many(rng.uniform(size=p.size) < 0.8 * p, p)   # 25 % over-predicted
    >>> monitor.alarm
    True
    >>> low, high = monitor.interval
    >>> bool(low < -0.02 < high < 0)
    True
    >>> ratio_low, ratio_high = monitor.ratio_interval
    >>> bool(ratio_low < 1.25 < ratio_high)
    True
    """

    def __init__(self, alpha: float = 0.05, grid=None, max_bet: float = 0.5, restart: bool = False):
        super().__init__(alpha=alpha, restart=restart)
        check_scalar(max_bet, "max_bet", numbers.Real, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        self.grid = grid
        self.max_bet = max_bet
        self._grid = default_grid() if grid is None else _check_grid(grid)
        self._zero = int(np.flatnonzero(self._grid == 0.0)[0])
        self._scales = np.array(STAKE_SCALES)
        self._cap = float(max_bet) / (1.0 + float(np.abs(self._grid).max()))
        self._log_term = 2.0 * math.log(2.0 / float(alpha))
        self._restart_wealth()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"alpha": 0.1, "grid": [-0.5, 0.0, 0.5], "max_bet": 0.9, "restart": True}

    def _restart_wealth(self) -> None:
        g = self._grid.size
        self._sums = np.zeros(3)  # events, sum of z, sum of squared prediction errors
        self._sum_p = 0.0
        self._sum_y = 0.0
        self._up = np.ones((len(STAKE_SCALES), g))  # per stake scale and candidate
        self._down = np.ones((len(STAKE_SCALES), g))
        self._bounds = np.array([-1.0, float(g)])  # excluded: <= lo from below, >= hi from above

    _DERIVED = ("_threshold", "_grid", "_zero", "_scales", "_cap", "_log_term")

    def _fresh_at(self, alpha: float):
        # a copy of this fresh monitor with the values the constructor derives from ``alpha``:
        # its arrays copied, its numbers shared, where a clone runs the constructor's checks and
        # builds the grid again
        new = type(self).__new__(type(self))
        for name, value in vars(self).items():
            if name == "_lock":
                continue
            if type(value) is np.ndarray:
                value = value.copy()
            elif not isinstance(value, (int, float, str, type(None))):
                value = copy.deepcopy(value)  # a parameter given as a list, say
            new.__dict__[name] = value
        new._init_lock()
        new.alpha = alpha
        new._threshold = 1.0 / float(alpha)
        new._log_term = 2.0 * math.log(2.0 / float(alpha))
        return new

    def _check_loaded_wealth(self) -> None:
        from streamcal import _state_check as c

        g = self._grid.size
        lo, hi = (float(v) for v in self._bounds)
        if not (lo == math.floor(lo) and hi == math.floor(hi) and -1.0 <= lo < hi <= g):
            c.fail(f"`_bounds`: expected whole numbers -1 <= lo < hi <= {g}; found {lo!r} and {hi!r}.")
        for name in ("_up", "_down"):
            c.need_finite(getattr(self, name).ravel(), name, low=0.0)
        c.need_finite(self._sums, "_sums")
        if not (self._sums[0] >= 0.0 and self._sums[0] == math.floor(self._sums[0])):
            c.fail(f"`_sums` event count: expected a whole number >= 0; found {self._sums[0]!r}.")
        if not self._sums[2] >= 0.0:
            c.fail(f"`_sums` sum of squared errors: expected a value >= 0; found {self._sums[2]!r}.")
        c.need_float(self._sum_p, "_sum_p", low=0.0)
        c.need_float(self._sum_y, "_sum_y", low=0.0)

    def _prepare(self, y, p):
        return (y, p, y - p)

    def _advance(self, batch, start, watch, evalues):
        y, p, z = batch
        n = z.size - start
        done = _config.run(
            _km.mean_bias_wealth_inplace,
            n,
            z[start:],
            self._grid,
            self._scales,
            np.empty(self._scales.size),
            self._cap,
            self._log_term,
            self._sums,
            self._up,
            self._down,
            self._bounds,
            self._threshold,
            self._zero,
            bool(watch),
            evalues,
        )
        self._sum_p += float(p[start : start + done].sum())
        self._sum_y += float(y[start : start + done].sum())
        return done

    def _crossed(self) -> bool:
        lo, hi = int(self._bounds[0]), int(self._bounds[1])
        return lo >= self._zero or hi <= self._zero

    def _e_value(self) -> float:
        return float(0.5 * (self._up[:, self._zero].mean() + self._down[:, self._zero].mean()))

    # ---------------------------------------------------------------- readers
    @property
    def n_since_reset(self) -> int:
        """Events in the sequence: since the start or the last reset."""
        with self._lock:
            return int(self._sums[0])

    @property
    def mean_bias(self) -> float:
        """Observed ``mean(y - p)`` since the start or the last reset (NaN before any event)."""
        with self._lock:
            n = self._sums[0]
            return float(self._sums[1] / n) if n > 0 else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        """The confidence sequence for the mean bias now, ``(low, high)``: its ends are grid
        points (-1 and 1 before any is excluded on that side)."""
        with self._lock:
            lo, hi = int(self._bounds[0]), int(self._bounds[1])
            low = float(self._grid[lo]) if lo >= 0 else -1.0
            high = float(self._grid[hi]) if hi < self._grid.size else 1.0
            return (low, high)

    @property
    def ratio(self) -> float:
        """Predicted over observed positives, ``sum p / sum y``, since the start or the last reset."""
        with self._lock:
            if self._sum_y > 0.0:
                return self._sum_p / self._sum_y
            return math.inf if self._sum_p > 0.0 else math.nan

    @property
    def ratio_interval(self) -> tuple[float, float]:
        """Anytime-valid interval of the expected predicted / observed ratio (see Notes)."""
        with self._lock:
            low, high = self.interval
            n = self._sums[0]
            mean_p = float(self._sum_p / n) if n > 0 else math.nan
        if not (mean_p > 0.0):
            return (math.nan, math.nan)

        def ratio_at(m: float) -> float:
            observed = mean_p + m
            return mean_p / observed if observed > 0.0 else math.inf

        return (float(ratio_at(high)), float(ratio_at(low)))


def _check_grid(grid) -> np.ndarray:
    g = as_1d_float(grid, "grid")
    bad = ~((g > -1.0) & (g < 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = f"`grid` must hold candidate mean biases in (-1, 1); got {fmt(g[i])} at position {i}."
        raise ValueError(msg)
    if g.size > 1 and not np.all(np.diff(g) > 0.0):
        i = int(np.flatnonzero(~(np.diff(g) > 0.0))[0]) + 1
        msg = f"`grid` must be strictly increasing; got {fmt(g[i])} at position {i} after {fmt(g[i - 1])}."
        raise ValueError(msg)
    if not np.any(g == 0.0):
        msg = "`grid` must hold 0 (the calibrated mean bias the alarm tests)."
        raise ValueError(msg)
    return g
