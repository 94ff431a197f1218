"""Calibration methods replay can run, resolved by name.

The built-in names map to streamcal's streaming calibrators: ``pav``
(:class:`streamcal.PAVCalibrator`), ``ispline``, ``gev``, ``platt``. A name is resolved when a
replay starts, so only the calibrators present in this installation are available; asking for
another one is a clear error that lists what is available. ``raw`` is always there: the score
itself taken as the probability (a baseline that shows how miscalibrated the input is). More
methods can be added with :func:`register_method`.

Every calibrator follows streamcal's array contract; replay only calls ``process(scores, labels,
learn_mask, *, weights=None, times=None) -> (proba, llr)`` (and ``prequential`` when labels are
known at once).
"""

from __future__ import annotations

import importlib
import inspect
import numbers
import re
from collections.abc import Callable

import numpy as np

from streamcal._prior import finite_prior
from streamcal._registry import BUILTIN_CALIBRATORS
from streamcal._validation import as_binary_labels, as_nonneg_weights, as_probabilities

__all__ = [
    "RawScoreCalibrator",
    "UnavailableMethodError",
    "available_methods",
    "make_buckets",
    "make_calibrator",
    "make_window",
    "parse_duration",
    "register_method",
]

# the built-in streaming binary calibrators: method name -> (module, class), the core's table
BUILTIN_METHODS = BUILTIN_CALIBRATORS
_REGISTERED: dict[str, Callable[..., object]] = {}


class UnavailableMethodError(ValueError):
    """A calibration method was asked for by a name that does not resolve."""


class RawScoreCalibrator:
    """The score itself as the probability: the uncalibrated baseline (method ``raw``).

    The LLR is ``logit(score) - logit(prior)``, the prior being the positive share of the labels
    learned so far, smoothed as ``(positives + 1) / (labels + 2)``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.replay.methods import RawScoreCalibrator
    >>> raw = RawScoreCalibrator()
    >>> proba, llr = raw.prequential(np.array([0.2, 0.5, 0.9]), np.array([0, 1, 1]))
    >>> proba.tolist(), np.round(llr, 3).tolist()
    ([0.2, 0.5, 0.9], [-1.386, 0.693, 2.197])
    """

    def __init__(self):
        self._pos = 0.0
        self._total = 0.0

    def _process(self, scores, labels, learn, weights):
        n = scores.size
        learn_w = np.where(learn, weights, 0.0)
        pos_after = self._pos + np.cumsum(learn_w * labels)
        total_after = self._total + np.cumsum(learn_w)
        # state *before* each operation = state after the previous one
        pos_before = np.concatenate(([self._pos], pos_after[:-1])) if n else pos_after
        total_before = np.concatenate(([self._total], total_after[:-1])) if n else total_after
        prior = finite_prior(pos_before, total_before, 1.0)
        with np.errstate(divide="ignore"):
            llr = np.log(scores) - np.log1p(-scores) - (np.log(prior) - np.log1p(-prior))
        proba = scores.copy()
        proba[learn] = np.nan
        llr[learn] = np.nan
        if n:
            self._pos = float(pos_after[-1])
            self._total = float(total_after[-1])
        return proba, llr

    def process(self, scores, labels, learn_mask, *, weights=None, times=None):
        """Run learn / predict operations in order; outputs are NaN at learn positions."""
        scores = as_probabilities(scores, "scores", allow_empty=True)
        labels = as_binary_labels(labels, "labels", allow_empty=True)
        learn = np.asarray(learn_mask, dtype=bool)
        weights = as_nonneg_weights(weights, "weights", scores.size)
        return self._process(scores, labels, learn, weights)

    def prequential(self, scores, labels, *, weights=None, times=None):
        """Predict each event with the state before its label, then learn it."""
        scores = as_probabilities(scores, "scores")
        labels = as_binary_labels(labels, "labels")
        weights = as_nonneg_weights(weights, "weights", scores.size)
        n = scores.size
        ops_s = np.repeat(scores, 2)
        ops_y = np.repeat(labels, 2)
        ops_w = np.repeat(weights, 2)
        learn = np.tile([False, True], n)
        proba, llr = self._process(ops_s, ops_y, learn, ops_w)
        return proba[0::2].copy(), llr[0::2].copy()

    @property
    def window_weight(self) -> float:
        return float(self._total)


def register_method(name: str, factory: Callable[..., object]) -> None:
    """Make ``factory`` available to replay as method ``name``.

    ``factory(buckets=..., window=...)`` is called with those keywords the user gave and must return
    an object with streamcal's ``process`` method.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        msg = f"`name` must be an identifier such as 'pav'; got {name!r}."
        raise ValueError(msg)
    if not callable(factory):
        msg = f"`factory` must be callable; got {factory!r}."
        raise TypeError(msg)
    _REGISTERED[name] = factory


def _resolve(name: str) -> Callable[..., object]:
    """The factory for ``name``, or raise :class:`UnavailableMethodError` saying why."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name == "raw":
        return lambda **_: RawScoreCalibrator()
    if name in BUILTIN_METHODS:
        module, cls = BUILTIN_METHODS[name]
        try:
            return getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError) as exc:
            msg = (
                f"method {name!r} is not available in this installation "
                f"({module}.{cls} could not be loaded: {exc}); available methods: "
                f"{', '.join(available_methods())}."
            )
            raise UnavailableMethodError(msg) from None
    msg = f"unknown method {name!r}; available methods: {', '.join(available_methods())}."
    raise UnavailableMethodError(msg)


def available_methods() -> list[str]:
    """The method names that resolve in this installation, in a stable order."""
    names = []
    for name in [*BUILTIN_METHODS, "raw", *_REGISTERED]:
        if name in names:
            continue
        if name in BUILTIN_METHODS and name not in _REGISTERED:
            module, cls = BUILTIN_METHODS[name]
            try:
                getattr(importlib.import_module(module), cls)
            except (ImportError, AttributeError):
                continue
        names.append(name)
    return names


def parse_duration(value, name: str) -> float:
    """Seconds from a number or a string such as ``"90s"``, ``"15m"``, ``"12h"``, ``"3d"``
    (:func:`streamcal.windows.parse_duration`)."""
    return importlib.import_module("streamcal.windows").parse_duration(value, name)


def make_window(window=None, decay=None):
    """A window object from ``window`` / ``decay`` values, read as every ``window=`` parameter is.

    ``window``: :func:`streamcal.windows.as_window` (an int number of events gives
    ``CountWindow(n)``, a duration with a unit such as ``"7d"`` or ``"3600s"`` gives
    ``TimeWindow(seconds)``). ``decay``: :func:`streamcal.windows.as_decay` (a number of events
    gives ``Decay(half_life, by="events")``, a duration ``Decay(seconds, by="time")``). Other
    objects (window strategies, a registered method's own) pass through unchanged. Returns None
    when neither is given (the calibrator's default, an unbounded window).
    """
    if window is not None and decay is not None:
        msg = f"give either `window` or `decay`, not both; got window={window!r}, decay={decay!r}."
        raise ValueError(msg)
    if window is None and decay is None:
        return None
    windows = importlib.import_module("streamcal.windows")
    if decay is not None:
        return windows.as_decay(decay) if isinstance(decay, (numbers.Real, str)) else decay
    return windows.as_window(window) if isinstance(window, (numbers.Real, str)) else window


def make_buckets(buckets=None):
    """A bucket strategy from a ``buckets`` value (:func:`streamcal.buckets.as_buckets`).

    An int ``n`` gives ``LogitGrid(n)`` (probability scores); ``"uniform:n"`` / ``"quantile:n"`` /
    ``"logit:n"`` name the strategy. Other objects (bucket strategies, a registered method's own)
    pass through unchanged; None stays None (the calibrator's default).
    """
    if not isinstance(buckets, (numbers.Real, str)):
        return buckets
    return importlib.import_module("streamcal.buckets").as_buckets(buckets)


def _accepts(factory, option: str) -> bool:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return True
    return option in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def make_calibrator(name: str, *, buckets=None, window=None, decay=None, **options):
    """Build the calibrator for method ``name`` with the given buckets and window.

    ``options`` (such as ``refit_every=1000``) go to the constructor of the methods that take
    them and are left out for the others. Raises :class:`UnavailableMethodError` if ``name`` does
    not resolve.
    """
    factory = _resolve(name)
    kwargs = {key: value for key, value in options.items() if _accepts(factory, key)}
    bucket_obj = make_buckets(buckets)
    if bucket_obj is not None:
        kwargs["buckets"] = bucket_obj
    window_obj = make_window(window, decay)
    if window_obj is not None:
        kwargs["window"] = window_obj
    if name == "raw" and name not in _REGISTERED:
        return factory()
    return factory(**kwargs)
