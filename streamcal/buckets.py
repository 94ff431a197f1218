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

Shorthands
----------
Every ``buckets=`` parameter also takes the values people type, through one parser,
:func:`as_buckets` (the replay command line's ``--buckets`` uses it too): ``None`` is the
default ``LogitGrid()``; an int ``n`` (or a string of one, ``"1024"``) is ``LogitGrid(n)``, for
probability scores; ``"logit:n"``, ``"uniform:n"`` and ``"quantile:n"`` name the strategy, and
``"uniform:n:low:high"`` gives the uniform grid its range (``"uniform:64:-8:8"`` for logits). The
number of buckets is an int in ``[2, MAX_BUCKETS]`` (one bucket calibrates nothing: every score
would get the window's prior; ``LogitGrid(1)`` is still there for whoever means it). Bools and
floats are refused. The calibrator stores the value as given; the strategy is derived from it.
"""

from __future__ import annotations

import bisect
import math
import numbers
import re
from decimal import Decimal

import numpy as np
from river import base

from streamcal._kernels.histogram import bucket_index_sorted
from streamcal._validation import as_1d_float, as_finite, call_repr, check_scalar

__all__ = [
    "MAX_BUCKETS",
    "Buckets",
    "Edges",
    "LogitGrid",
    "QuantileEdges",
    "UniformGrid",
    "as_buckets",
    "bucket_index",
]

#: The most buckets a grid strategy makes: the bucket guide indexes buckets with int32, and
#: beyond a few million buckets the per-bucket state and its lists cost gigabytes.
MAX_BUCKETS = 2**24


#: The bucket of one score, ``bucket_of_score(cuts, s)``: the number of interior cuts (a sorted
#: list) at or below ``s``, by Python's binary search (the river face's per-event path). The
#: array face and the compiled kernels find the same bucket with ``histogram.bucket_of``
#: (:func:`bucket_index`); ``tests/test_buckets.py`` checks that they agree.
bucket_of_score = bisect.bisect_right


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
    rises = edges[1:] > edges[:-1]  # compared, not subtracted: a step may exceed the largest float64
    if not rises.all():
        i = int(np.flatnonzero(~rises)[0]) + 1
        msg = (
            f"`{name}` must be strictly increasing; got {float(edges[i])!r} at position {i} after "
            f"{float(edges[i - 1])!r}."
        )
        raise ValueError(msg)
    return edges


#: The widest range ``high - low`` a uniform grid divides: the largest float64 (about 1.8e308).
#: Past it the width itself overflows to inf, and no edge between ``low`` and ``high`` is computable.
MAX_RANGE = float(np.finfo(np.float64).max)


def _midpoints(e: np.ndarray) -> np.ndarray:
    """The midpoint of each pair of neighbouring values, ``0.5 * (a + b)``; where ``a + b``
    overflows (two edges near the largest float64), the sum of the halves ``0.5 * a + 0.5 * b``."""
    with np.errstate(over="ignore"):
        m = 0.5 * (e[:-1] + e[1:])
    wide = np.isinf(m)
    m[wide] = 0.5 * e[:-1][wide] + 0.5 * e[1:][wide]
    return m


def _grid_edges(edges: np.ndarray, grid, lo_name: str, hi_name: str) -> np.ndarray:
    """``edges`` of ``grid`` checked; repeated edges are an error naming the grid's arguments."""
    rises = edges[1:] > edges[:-1]
    if rises.all():
        return edges
    i = int(np.flatnonzero(~rises)[0]) + 1
    msg = (
        f"{type(grid).__name__}: the range [`{lo_name}`, `{hi_name}`] = [{grid.low!r}, {grid.high!r}] is too "
        f"narrow to divide into `n_buckets` = {grid.n_buckets!r} buckets: float64 cannot tell edges "
        f"{i - 1} and {i} apart (both {float(edges[i])!r}); use fewer buckets or a wider range."
    )
    raise ValueError(msg)


class Buckets(base.Base):
    """Base class of the bucket strategies.

    Subclasses implement :meth:`bucket_edges` (and may override :meth:`bucket_centres`); the
    calibrators refuse scores outside ``score_range``. ``warmup`` is the number of learned scores
    a strategy needs before its edges are known (0 for fixed grids); ``probability_inputs`` says
    whether scores are probabilities, which decides what a calibrator predicts before it has seen
    any label.

    Examples
    --------
    >>> from streamcal.buckets import Buckets, UniformGrid
    >>> isinstance(UniformGrid(4), Buckets), UniformGrid(4).bucket_edges().tolist()
    (True, [0.0, 0.25, 0.5, 0.75, 1.0])
    """

    warmup: int = 0
    probability_inputs: bool = False
    score_range: tuple[float, float] = (-np.inf, np.inf)  # scores outside are rejected

    def __repr__(self) -> str:
        return call_repr(self)

    __str__ = __repr__  # river shows a parameter object by ``str`` in its estimators' ``repr``

    def bucket_edges(self, sample=None) -> np.ndarray:  # pragma: no cover - abstract
        """The ``B + 1`` sorted edges (``sample`` is the warm-up sample for learned edges)."""
        raise NotImplementedError

    def bucket_centres(self, sample=None) -> np.ndarray:
        """The representative score of each bucket: by default the midpoint of its edges."""
        return _midpoints(self.bucket_edges(sample))

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
    [0.01, 0.0913, 0.5, 0.9087, 0.99]
    >>> grid.index([0.0, 0.02, 0.5, 1.0]).tolist()
    [0, 0, 2, 3]
    >>> LogitGrid(1024), grid
    (LogitGrid(n_buckets=1024), LogitGrid(n_buckets=4, low=0.01, high=0.99))
    """

    probability_inputs = True
    score_range = (0.0, 1.0)

    def __init__(self, n_buckets: int = 1024, low: float = 1e-7, high: float = 1.0 - 1e-7):
        self.n_buckets = n_buckets
        self.low = low
        self.high = high
        self._check()  # when given, as the calibrators check theirs

    def _check_loaded_state(self) -> None:
        """The parameters of a restored grid (:mod:`streamcal.persist`)."""
        from streamcal import _state_check as c

        c.need_keys(self, ("n_buckets", "low", "high"))
        c.need_params(self, self._check)

    def _check(self) -> None:
        check_scalar(self.n_buckets, "n_buckets", numbers.Integral, low=1, high=MAX_BUCKETS)
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
        e = _sigmoid(z)
        e[0], e[-1] = self.low, self.high
        return _grid_edges(e, self, "low", "high")

    def bucket_centres(self, sample=None) -> np.ndarray:
        z = self._logit_edges()
        return _sigmoid(0.5 * (z[:-1] + z[1:]))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))``; below log-odds of -700, where ``exp(-z)`` nears float64's overflow
    (a ``low`` under about 1e-304), ``exp(z)``, the same value to float64's precision there."""
    with np.errstate(over="ignore"):
        p = 1.0 / (1.0 + np.exp(-z))
    far = z < -700.0
    p[far] = np.exp(z[far])
    return p


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
        self._check()  # when given, as the calibrators check theirs

    def _check_loaded_state(self) -> None:
        """The parameters of a restored grid (:mod:`streamcal.persist`)."""
        from streamcal import _state_check as c

        c.need_keys(self, ("n_buckets", "low", "high"))
        c.need_params(self, self.bucket_edges)

    def bucket_edges(self, sample=None) -> np.ndarray:
        self._check()
        return _grid_edges(np.linspace(float(self.low), float(self.high), self.n_buckets + 1), self, "low", "high")

    def _check(self) -> None:
        check_scalar(self.n_buckets, "n_buckets", numbers.Integral, low=1, high=MAX_BUCKETS)
        check_scalar(self.low, "low")
        check_scalar(self.high, "high")
        if not self.low < self.high:
            msg = f"`low` must be below `high`; got low={self.low!r}, high={self.high!r}."
            raise ValueError(msg)
        low, high = float(self.low), float(self.high)
        if not high - low <= MAX_RANGE:  # Python floats: the overflow gives inf, without a warning
            msg = (
                f"UniformGrid: the range [`low`, `high`] = [{self.low!r}, {self.high!r}] is too wide to divide "
                f"into buckets: `high` - `low` must be at most {MAX_RANGE!r} (the largest float64); "
                f"here it is {Decimal(high) - Decimal(low):.4g}."
            )
            raise ValueError(msg)


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
        self.check_params()  # when given, as the calibrators check theirs

    def _check_loaded_state(self) -> None:
        """The parameters of a restored strategy (:mod:`streamcal.persist`)."""
        from streamcal import _state_check as c

        c.need_keys(self, ("n_buckets", "warmup"))
        c.need_params(self, self.check_params)

    def check_params(self) -> None:
        """Raise if a parameter is invalid (a calibrator checks them before its warm-up starts)."""
        check_scalar(self.n_buckets, "n_buckets", numbers.Integral, low=1, high=MAX_BUCKETS)
        check_scalar(self.warmup, "warmup", numbers.Integral, low=1)

    def bucket_edges(self, sample=None) -> np.ndarray:
        self.check_params()
        if sample is None:
            msg = "QuantileEdges learns its edges from a warm-up sample; pass `sample`."
            raise ValueError(msg)
        s = as_finite(sample, "sample")
        levels = np.linspace(0.0, 1.0, self.n_buckets + 1)
        if float(s.max()) - float(s.min()) <= MAX_RANGE:
            q = np.unique(np.quantile(s, levels))
        else:
            # the interpolation's width overflows: interpolate halves (exact) and double them back
            q = np.unique(2.0 * np.quantile(0.5 * s, levels))
        if q.size < 2:  # a constant sample: one bucket around it
            q = _around(float(q[0]))
        return q


def _around(v: float) -> np.ndarray:
    """Two edges around ``v``: ``v -/+ 0.5``, or the neighbouring floats where 0.5 is below
    float64's resolution at ``v`` (its magnitude is 2**53 or more), never past the largest float64."""
    lo, hi = v - 0.5, v + 0.5
    if not lo < v < hi:
        lo, hi = math.nextafter(v, -math.inf), math.nextafter(v, math.inf)
        lo, hi = (v if math.isinf(lo) else lo), (v if math.isinf(hi) else hi)
    return np.array([lo, hi])


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
        self.bucket_centres()  # the edges and centres checked when given, as the calibrators check theirs

    def _check_loaded_state(self) -> None:
        """The edges, centres and flag of a restored strategy (:mod:`streamcal.persist`)."""
        from streamcal import _state_check as c

        c.need_keys(self, ("edges", "centres", "probability_inputs"))
        for name in ("edges", "centres"):
            value = getattr(self, name)
            if (value is not None or name == "edges") and not (
                type(value) is tuple and all(type(v) is float for v in value)
            ):
                c.fail(f"`{name}`: expected a tuple of floats; found {c.brief(value)}.")
        c.need_bool(self.probability_inputs, "probability_inputs")
        c.need_params(self, self.bucket_centres)  # checks the edges and the centres

    def bucket_edges(self, sample=None) -> np.ndarray:
        return _check_edges(as_finite(self.edges, "edges"), "edges")

    def bucket_centres(self, sample=None) -> np.ndarray:
        e = self.bucket_edges()
        if self.centres is None:
            return _midpoints(e)
        c = as_finite(self.centres, "centres")
        if c.size != e.size - 1:
            msg = f"`centres` must hold one value per bucket ({e.size - 1}); got {c.size}."
            raise ValueError(msg)
        if c.size > 1:
            _check_edges(c, "centres")
        return c


# ------------------------------------------------------------------------------- shorthands
_KINDS = {"logit": LogitGrid, "uniform": UniformGrid, "quantile": QuantileEdges}
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SPEC = re.compile(
    r"\s*(?:(?P<kind>[A-Za-z]+)\s*:\s*)?(?P<n>[+-]?\d+(?:_\d+)*)"
    rf"(?:\s*:\s*(?P<low>{_NUMBER})\s*:\s*(?P<high>{_NUMBER}))?\s*"
)
_FORMS = (
    "an int number of buckets (a logit grid), 'logit:N', 'uniform:N', 'uniform:N:LOW:HIGH', 'quantile:N', a "
    "bucket strategy from streamcal.buckets, or None"
)


def _count(n: int, name: str, value) -> int:
    if n < 2:
        msg = f"`{name}` must be a number of buckets in [2, {MAX_BUCKETS}]; got {value!r}"
        if n == 1:
            msg += " (one bucket gives every score the same probability; pass LogitGrid(1) if that is meant)"
        raise ValueError(msg + ".")
    if n > MAX_BUCKETS:
        msg = f"`{name}` = {value!r} is too large: the number of buckets must be an int in [2, {MAX_BUCKETS}]."
        raise ValueError(msg)
    return n


def as_buckets(value, name: str = "buckets") -> Buckets:
    """The bucket strategy a ``buckets=`` value means (see the module's *Shorthands*).

    Parameters
    ----------
    value
        ``None`` (the default logit grid), a :class:`Buckets`, an int number of buckets (a
        logit grid), or a string: ``"1024"``, ``"logit:1024"``, ``"uniform:100"``,
        ``"uniform:100:-8:8"`` (a uniform grid on ``[-8, 8]``), ``"quantile:256"``.
    name
        The argument's name in error messages (``"--buckets"`` on the command line).

    Examples
    --------
    >>> from streamcal.buckets import as_buckets
    >>> as_buckets(256), as_buckets("uniform:100"), as_buckets(None)
    (LogitGrid(n_buckets=256), UniformGrid(n_buckets=100), LogitGrid(n_buckets=1024))
    >>> as_buckets("uniform:64:-8:8")
    UniformGrid(n_buckets=64, low=-8.0, high=8.0)
    >>> as_buckets(1)
    Traceback (most recent call last):
    ...
    ValueError: `buckets` must be a number of buckets in [2, 16777216]; got 1 (one bucket gives
    every score the same probability; pass LogitGrid(1) if that is meant).
    """
    if value is None:
        return LogitGrid()
    if isinstance(value, Buckets):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return LogitGrid(_count(int(value), name, value))
    if isinstance(value, str):
        match = _SPEC.fullmatch(value)
        kind = None if match is None else (match["kind"] or "logit").lower()
        if match is None or kind not in _KINDS or (match["low"] is not None and kind != "uniform"):
            msg = f"`{name}` must be {_FORMS}; got {value!r}."
            raise ValueError(msg)
        n = _count(int(match["n"].replace("_", "")), name, value)
        if match["low"] is None:
            return _KINDS[kind](n_buckets=n)
        low, high = float(match["low"]), float(match["high"])
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            msg = f"`{name}` = {value!r}: the range must be finite with LOW < HIGH; got [{low}, {high}]."
            raise ValueError(msg)
        return UniformGrid(n_buckets=n, low=low, high=high)
    msg = f"`{name}` must be {_FORMS}; got {value!r} of type {type(value).__name__}."
    raise TypeError(msg)
