"""An anytime-valid confidence sequence for calibration in the large (the mean of y - p)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import monitor as _km
from streamcal._validation import as_1d_float, check_scalar, fmt
from streamcal.monitor._base import _Monitor

__all__ = ["MeanBiasCS", "default_grid"]


def default_grid() -> np.ndarray:
    """The default candidate mean biases: 0 and ±40 values spaced geometrically from 1e-4 to 0.99.

    Relative steps of about 26 %: the interval's ends are read to that resolution, finely near 0
    where the biases of probability models lie.
    """
    side = np.geomspace(1e-4, 0.99, 40)
    return np.concatenate((-side[::-1], [0.0], side))


class MeanBiasCS(_Monitor):
    """Confidence sequence for the mean bias ``E[y - p]`` by betting; alarms when it leaves 0.

    For each candidate mean ``m`` on a grid (0 among them) the monitor runs the hedged capital
    process of Waudby-Smith & Ramdas ("Estimating means of bounded random variables by
    betting", JRSSB, 2024) on ``z = y - p`` in [-1, 1]: half its capital bets that the mean of
    ``z`` is above ``m``, half that it is below, each with the predictable aGRAPA stake (the
    running mean of ``z - m`` over its running second moment, capped at ``max_bet / (1 ± m)``).
    If the bias really is ``m`` (every ``z`` has conditional mean ``m`` given the past), that
    capital is a nonnegative martingale starting at 1, and by Ville's inequality it ever reaches
    ``1 / alpha`` with probability at most ``alpha``. A candidate whose capital has reached it is
    rejected for good; the candidates left form the confidence sequence, and

        P(the true bias is ever rejected) <= alpha.

    The alarm rises when 0 is rejected: calibration in the large fails. Memory is the grid
    (three numbers per candidate), constant over the stream.

    The sequence is exact at the grid's points. :attr:`interval` widens it to the neighbouring
    grid points (the candidates between are not tested). Memory and time per event grow with
    the grid; rejected candidates cost nothing more.

    Parameters
    ----------
    alpha : float, default 0.05
        The miscoverage (and false-alarm) probability, in (0, 1).
    grid : array-like, optional
        Candidate mean biases, strictly increasing, in (-1, 1), holding 0. Default:
        :func:`default_grid`.
    max_bet : float, default 0.5
        Cap of the stakes, in (0, 1): at most ``max_bet`` of the capital can be lost on one event.
    restart : bool, default False
        After an alarm, start again at once: the sequence then covers the events since.

    Notes
    -----
    **The ratio.** :attr:`ratio` is the predicted over the observed positives, ``sum p / sum y``
    since the start or the last reset. If the bias is a constant ``m``, the expected observed
    mean is ``mean p + m``, so :attr:`ratio_interval` = ``mean p / (mean p + [high, low])`` covers
    the expected ratio whenever the sequence covers ``m``: with probability at least
    ``1 - alpha`` at all times.

    **Late labels.** As for :class:`IsotonicEProcess`: labels are taken in their arrival order,
    and the guarantee holds when each ``y - p``, given the labels that arrived before it, has
    mean 0 (the bias), however the delays fall.

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
        self._cap_up = float(max_bet) / (1.0 + self._grid)
        self._cap_down = float(max_bet) / (1.0 - self._grid)
        self._restart_wealth()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"alpha": 0.1, "grid": [-0.5, 0.0, 0.5], "max_bet": 0.9, "restart": True}

    def _restart_wealth(self) -> None:
        g = self._grid.size
        self._sums = np.zeros(3)  # events, sum of z, sum of z**2 since the start or the reset
        self._sum_p = 0.0
        self._sum_y = 0.0
        self._up = np.ones(g)
        self._down = np.ones(g)
        self._rejected = np.zeros(g)

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
            self._cap_up,
            self._cap_down,
            self._sums,
            self._up,
            self._down,
            self._rejected,
            self._threshold,
            self._zero,
            bool(watch),
            evalues,
        )
        self._sum_p += float(p[start : start + done].sum())
        self._sum_y += float(y[start : start + done].sum())
        return done

    def _crossed(self) -> bool:
        return bool(self._rejected[self._zero] != 0.0)

    def _e_value(self) -> float:
        return float(0.5 * (self._up[self._zero] + self._down[self._zero]))

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
        """The confidence sequence for the mean bias now, ``(low, high)``.

        From the grid point below the lowest candidate not rejected to the one above the
        highest (-1 and 1 past the grid's ends). ``(nan, nan)`` when every candidate is
        rejected: the bias lies between two grid points, or is not constant.
        """
        with self._lock:
            kept = np.flatnonzero(self._rejected == 0.0)
            if kept.size == 0:
                return (math.nan, math.nan)
            lo, hi = int(kept[0]), int(kept[-1])
            low = float(self._grid[lo - 1]) if lo > 0 else -1.0
            high = float(self._grid[hi + 1]) if hi + 1 < self._grid.size else 1.0
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
        low, high = self.interval
        with self._lock:
            n = self._sums[0]
            mean_p = float(self._sum_p / n) if n > 0 else math.nan
        if not (mean_p > 0.0) or math.isnan(low):
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
