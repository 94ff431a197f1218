"""Score buckets: how a raw score maps to a histogram bucket.

A bucket strategy is a small parameter object (river style: each constructor argument is stored
under its own name, so ``repr``, ``clone`` and pickling work). It produces a sorted array of
``B + 1`` edges; bucket ``b`` holds the scores in ``[edges[b], edges[b + 1])``, and scores
outside ``[edges[0], edges[B])`` go to the first or last bucket. A score maps to its bucket by
binary search over the ``B - 1`` interior edges, in a numba kernel (:func:`bucket_index`).

Each bucket also has a *centre*, the representative score of the bucket: streaming PAV
interpolates its fitted values between centres, and histogram fitters (GEV, Platt, I-spline)
regress on (centre, weight) pairs.

Bucketing is the only approximation in streaming PAV: with one bucket per distinct score the
result is exact PAV.

Strategies
----------
- :class:`LogitGrid` (the default): edges evenly spaced in log-odds, for probability inputs.
- :class:`UniformGrid`: evenly spaced edges on ``[low, high]``.
- :class:`QuantileEdges`: edges at quantiles of a warm-up sample of raw scores.
- :class:`Edges`: edges (and optionally centres) given by the user.
"""

from __future__ import annotations

import numbers

import numpy as np
from river import base

from streamcal._kernels.histogram import bucket_index_sorted
from streamcal._validation import as_1d_float, as_finite, check_scalar

__all__ = ["Buckets", "Edges", "LogitGrid", "QuantileEdges", "UniformGrid", "bucket_index"]


def bucket_index(edges, scores) -> np.ndarray:
    """Bucket index (intp) of each score for the full edge array ``edges`` (``B + 1`` values).

    ``edges`` must be at least 2 finite, strictly increasing values. ``scores`` is a 1-d array
    (or one number) of real numbers, not NaN; scores below ``edges[0]`` (including ``-inf``) go
    to bucket 0 and scores from ``edges[-1]`` up (including ``inf``) to bucket ``B - 1``.

    Examples
    --------
    >>> bucket_index([0.0, 0.25, 0.5, 1.0], [-1.0, 0.0, 0.3, 0.5, 0.99, 7.0]).tolist()
    [0, 0, 1, 2, 2, 2]
    """
    e = check_edges(edges, "edges")
    s = as_1d_float(scores, "scores", allow_empty=True)
    nan = np.isnan(s)
    if nan.any():
        msg = f"`scores` must not be NaN; got nan at position {int(np.flatnonzero(nan)[0])}."
        raise ValueError(msg)
    out = np.empty(s.shape[0], dtype=np.intp)
    bucket_index_sorted(np.ascontiguousarray(e[1:-1]), s, out)
    return out


def check_edges(edges, name: str = "edges") -> np.ndarray:
    """``edges`` as a new float64 array of at least 2 finite, strictly increasing values, or raise."""
    return _check_edges(as_finite(edges, name), name)


def _check_edges(edges: np.ndarray, name: str) -> np.ndarray:
    if edges.size < 2:
        msg = f"`{name}` must hold at least 2 edges (one bucket); got {edges.size}."
        raise ValueError(msg)
    steps = np.diff(edges)
    if not (steps > 0).all():
        i = int(np.flatnonzero(~(steps > 0))[0]) + 1
        msg = (
            f"`{name}` must be strictly increasing; got {float(edges[i])!r} at position {i} after "
            f"{float(edges[i - 1])!r}."
        )
        raise ValueError(msg)
    return edges


class Buckets(base.Base):
    """Base class of the bucket strategies.

    Subclasses implement :meth:`bucket_edges` (and may override :meth:`bucket_centres` and
    :meth:`check_scores`). ``warmup`` is the number of learned scores a strategy needs before
    its edges are known (0 for fixed grids); ``probability_inputs`` says whether scores are
    probabilities, which decides what a calibrator predicts before it has seen any label.

    Examples
    --------
    >>> from streamcal.buckets import Buckets, UniformGrid
    >>> isinstance(UniformGrid(4), Buckets), UniformGrid(4).bucket_edges().tolist()
    (True, [0.0, 0.25, 0.5, 0.75, 1.0])
    """

    warmup: int = 0
    probability_inputs: bool = False
    score_range: tuple[float, float] = (-np.inf, np.inf)  # scores outside are rejected

    def bucket_edges(self, sample=None) -> np.ndarray:  # pragma: no cover - abstract
        """The ``B + 1`` sorted edges (``sample`` is the warm-up sample for learned edges)."""
        raise NotImplementedError

    def bucket_centres(self, sample=None) -> np.ndarray:
        """The representative score of each bucket: by default the midpoint of its edges."""
        e = self.bucket_edges(sample)
        return 0.5 * (e[:-1] + e[1:])

    def check_scores(self, scores: np.ndarray, name: str) -> None:
        """Raise if finite ``scores`` fall outside ``score_range`` (default: any score is valid)."""
        low, high = self.score_range
        bad = ~((scores >= low) & (scores <= high))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            msg = (
                f"`{name}` must lie in [{low}, {high}] for {type(self).__name__} buckets; "
                f"got {float(scores[i])!r} at position {i}."
            )
            raise ValueError(msg)

    def index(self, scores, sample=None) -> np.ndarray:
        """Bucket index of each score."""
        return bucket_index(self.bucket_edges(sample), scores)


class LogitGrid(Buckets):
    """Edges evenly spaced in log-odds between ``low`` and ``high``: for probability inputs.

    With the defaults (1024 buckets over ``[1e-7, 1 - 1e-7]``) each bucket spans about 0.031
    in log-odds, so rates from 1e-7 to 1 - 1e-7 are resolved alike (click-rates of 1e-4 as
    well as 0.5). Scores must be probabilities in ``[0, 1]``; those below ``low`` (including
    exactly 0) go to the first bucket and those above ``high`` (including exactly 1) to the last.
    Centres are the midpoints in log-odds, mapped back to probabilities.

    Parameters
    ----------
    n_buckets
        Number of buckets.
    low, high
        The first and last edge, ``0 < low < high < 1``.

    Examples
    --------
    >>> from streamcal.buckets import LogitGrid
    >>> grid = LogitGrid(n_buckets=4, low=0.01, high=0.99)
    >>> grid.bucket_edges().round(4).tolist()
    [0.01, 0.0914, 0.5, 0.9086, 0.99]
    >>> grid.index([0.0, 0.02, 0.5, 1.0]).tolist()
    [0, 0, 2, 3]
    """

    probability_inputs = True
    score_range = (0.0, 1.0)

    def __init__(self, n_buckets: int = 1024, low: float = 1e-7, high: float = 1.0 - 1e-7):
        self.n_buckets = n_buckets
        self.low = low
        self.high = high

    def _check(self) -> None:
        check_scalar(self.n_buckets, "n_buckets", numbers.Integral, low=1)
        check_scalar(self.low, "low", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        check_scalar(self.high, "high", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        if not self.low < self.high:
            msg = f"`low` must be below `high`; got low={self.low!r}, high={self.high!r}."
            raise ValueError(msg)

    def _logit_edges(self) -> np.ndarray:
        self._check()
        lo = np.log(self.low) - np.log1p(-self.low)
        hi = np.log(self.high) - np.log1p(-self.high)
        return np.linspace(lo, hi, self.n_buckets + 1)

    def bucket_edges(self, sample=None) -> np.ndarray:
        z = self._logit_edges()
        e = 1.0 / (1.0 + np.exp(-z))
        e[0], e[-1] = self.low, self.high
        return _check_edges(e, "edges")

    def bucket_centres(self, sample=None) -> np.ndarray:
        z = self._logit_edges()
        return 1.0 / (1.0 + np.exp(-0.5 * (z[:-1] + z[1:])))

    def check_scores(self, scores: np.ndarray, name: str) -> None:
        bad = ~((scores >= 0.0) & (scores <= 1.0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            msg = (
                f"`{name}` must hold probabilities in [0, 1] for LogitGrid buckets; got "
                f"{float(scores[i])!r} at position {i}. For other scores use UniformGrid, "
                "QuantileEdges or Edges."
            )
            raise ValueError(msg)


class UniformGrid(Buckets):
    """``n_buckets`` equal-width buckets on ``[low, high]``; scores outside go to the end buckets.

    Parameters
    ----------
    n_buckets
        Number of buckets.
    low, high
        The first and last edge.

    Examples
    --------
    >>> from streamcal.buckets import UniformGrid
    >>> grid = UniformGrid(n_buckets=4, low=0.0, high=2.0)
    >>> grid.bucket_centres().tolist()
    [0.25, 0.75, 1.25, 1.75]
    >>> grid.index([-5.0, 0.5, 1.0, 9.0]).tolist()
    [0, 1, 2, 3]
    """

    def __init__(self, n_buckets: int = 100, low: float = 0.0, high: float = 1.0):
        self.n_buckets = n_buckets
        self.low = low
        self.high = high

    def bucket_edges(self, sample=None) -> np.ndarray:
        check_scalar(self.n_buckets, "n_buckets", numbers.Integral, low=1)
        check_scalar(self.low, "low")
        check_scalar(self.high, "high")
        if not self.low < self.high:
            msg = f"`low` must be below `high`; got low={self.low!r}, high={self.high!r}."
            raise ValueError(msg)
        return _check_edges(np.linspace(self.low, self.high, self.n_buckets + 1), "edges")


class QuantileEdges(Buckets):
    """Edges at the quantiles of the first ``warmup`` learned scores (any real scores).

    The edges are the ``n_buckets + 1`` evenly spaced quantiles of the warm-up sample, with
    repeats removed (so heavily tied samples give fewer buckets); centres are the midpoints.

    Before the warm-up completes, a calibrator buffers the learned events (score, label, weight,
    time) and counts them; none is dropped. Its predictions meanwhile are the prior of the
    buffered events with one pseudo-event of each class, ``(T1 + 1) / (T + 2)``, whatever the
    score, and the LLR is 0. When the ``warmup``-th event is learned, the edges are computed and
    the buffered events are replayed, in order, through the window (so a count window smaller
    than ``warmup`` keeps the last ones, and time windows and decay apply as usual).

    Parameters
    ----------
    n_buckets
        Number of buckets (at most; ties in the sample merge edges).
    warmup
        Number of learned scores the edges are computed from.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.buckets import QuantileEdges
    >>> q = QuantileEdges(n_buckets=4, warmup=101)
    >>> q.bucket_edges(np.arange(101.0)).tolist()
    [0.0, 25.0, 50.0, 75.0, 100.0]
    """

    def __init__(self, n_buckets: int = 256, warmup: int = 1000):
        self.n_buckets = n_buckets
        self.warmup = warmup

    def check_params(self) -> None:
        """Raise if a parameter is invalid (a calibrator checks them before its warm-up starts)."""
        check_scalar(self.n_buckets, "n_buckets", numbers.Integral, low=1)
        check_scalar(self.warmup, "warmup", numbers.Integral, low=1)

    def bucket_edges(self, sample=None) -> np.ndarray:
        self.check_params()
        if sample is None:
            msg = "QuantileEdges learns its edges from a warm-up sample; pass `sample`."
            raise ValueError(msg)
        s = as_finite(sample, "sample")
        q = np.unique(np.quantile(s, np.linspace(0.0, 1.0, self.n_buckets + 1)))
        if q.size < 2:  # a constant sample: one bucket around it
            q = np.array([q[0] - 0.5, q[0] + 0.5])
        return q


class Edges(Buckets):
    """User-given edges (and optionally centres).

    Parameters
    ----------
    edges
        ``B + 1`` strictly increasing finite edges.
    centres
        ``B`` strictly increasing bucket centres; by default the midpoints of the edges. Put a
        centre on the one score a bucket holds to make linear interpolation exact there.
    probability_inputs
        Whether the scores are probabilities (then a calibrator predicts the score itself
        before any label, instead of 0.5).

    Examples
    --------
    >>> from streamcal.buckets import Edges
    >>> e = Edges(edges=(0.0, 1.0, 10.0))
    >>> e.bucket_centres().tolist(), e.index([0.5, 3.0]).tolist()
    ([0.5, 5.5], [0, 1])
    """

    def __init__(self, edges: tuple = (0.0, 1.0), centres: tuple | None = None, probability_inputs: bool = False):
        self.edges = tuple(as_1d_float(edges, "edges", allow_empty=True).tolist())
        self.centres = None if centres is None else tuple(as_1d_float(centres, "centres", allow_empty=True).tolist())
        self.probability_inputs = check_scalar(probability_inputs, "probability_inputs", choices=(True, False))

    def bucket_edges(self, sample=None) -> np.ndarray:
        return _check_edges(as_finite(self.edges, "edges"), "edges")

    def bucket_centres(self, sample=None) -> np.ndarray:
        e = self.bucket_edges()
        if self.centres is None:
            return 0.5 * (e[:-1] + e[1:])
        c = as_finite(self.centres, "centres")
        if c.size != e.size - 1:
            msg = f"`centres` must hold one value per bucket ({e.size - 1}); got {c.size}."
            raise ValueError(msg)
        if c.size > 1:
            _check_edges(c, "centres")
        return c
