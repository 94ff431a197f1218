"""Streaming multiclass calibrators: pairwise coupling, and one-vs-rest as the baseline.

Both take, per event, a dict of per-class scores from some multiclass model (its
``predict_proba_one`` output, or per-class logits) and return a calibrated distribution over the
classes. Both are river multiclass classifiers whose binary building block is any streamcal binary
streaming calibrator (``PAVCalibrator`` by default), cloned once per pair or per class.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import functools
import inspect
import itertools
import math
import numbers
import operator
import threading
import types
from collections.abc import Iterable, Mapping

import numpy as np
from river import base

from streamcal import _prior
from streamcal._kernels import _config
from streamcal._kernels import coupling as _k
from streamcal._kernels._config import entry_point
from streamcal._kernels.histogram import MAX_WEIGHT
from streamcal._locking import LockedState, SectionLock
from streamcal._validation import (
    as_1d_array,
    as_binary_labels,
    as_real_array,
    check_event_time,
    check_event_weight,
    check_learn_arrays,
    check_same_length,
    check_scalar,
    is_real_number,
    keywords_named,
)
from streamcal.isotonic.streaming import PACK_SERIAL, _gil_enabled
from streamcal.multiclass import _ghosts, _ovr_merge
from streamcal.multiclass.coupling import MAX_ITER_LIMIT, NEWTON_AFTER_SWEEPS
from streamcal.persist import Persistable
from streamcal.windows import as_window

__all__ = ["OneVsRestCalibrator", "PairwiseCouplingCalibrator"]

#: Pairwise (and one-vs-rest) log-odds are clipped to [-MAX_LOG_ODDS, MAX_LOG_ODDS]; a class with
#: probability 0, or missing from the score dict, has log-score -inf and lands on the clip.
MAX_LOG_ODDS = 50.0

#: Weight n_ij given in the coupling to a pair that has learned nothing yet (see
#: :class:`PairwiseCouplingCalibrator`): small enough not to matter once the pair has data.
UNSEEN_PAIR_WEIGHT = 1e-6

_SCORE_KINDS = ("proba", "logit")

# The river face's one-call kernels (``_one_call.pairs_predict`` and ``pairs_learn``) per number
# of classes K, compiled for their argument types by their first call and then called without
# numba's per-call type dispatch.
_RIVER_KERNELS: dict = {}


def _class_order(c):
    """A total order on class labels of mixed types: numbers, then strings, then the rest."""
    if isinstance(c, (numbers.Real, np.bool_)):
        return (0, float(c), "")
    if isinstance(c, str):
        return (1, 0.0, c)
    return (2, 0.0, repr(c))


def _sigmoid(d: float) -> float:
    if d >= 0.0:
        return 1.0 / (1.0 + math.exp(-d))
    e = math.exp(d)
    return e / (1.0 + e)


def _within_add_one_bounds(proba: float, weight: float) -> float:
    """A binary calibrator's probability kept within ``[1/(T+2), (T+1)/(T+2)]``, T = its window
    weight: no estimate from T events is surer than add-one smoothing of T unanimous ones.

    PAV's exact map (``finite_proba=False``), like other calibrators given, may return exact 0 and 1;
    coupled or normalised, those become class probabilities of exactly 0, which no finite window
    supports. NaN becomes 0.5.
    """
    if proba != proba:
        return 0.5
    bound = _prior.add_one_bound(weight)
    return min(max(proba, bound), 1.0 - bound)


def _clip(d: float) -> float:
    return MAX_LOG_ODDS if d > MAX_LOG_ODDS else (-MAX_LOG_ODDS if d < -MAX_LOG_ODDS else d)


def _takes_probabilities(buckets) -> bool:
    """Whether a binary calibrator's ``buckets`` parameter means probability scores: ``None`` (the
    default logit grid), a strategy with ``probability_inputs``, or a shorthand meaning one (an
    int or a string, read by :func:`streamcal.buckets.as_buckets`)."""
    if buckets is None:
        return True
    if isinstance(buckets, (numbers.Integral, str)) and not isinstance(buckets, bool):
        return _shorthand_takes_probabilities(buckets)
    return bool(getattr(buckets, "probability_inputs", False))


@functools.lru_cache(maxsize=64)
def _shorthand_takes_probabilities(buckets) -> bool:
    from streamcal.buckets import as_buckets

    try:
        return bool(as_buckets(buckets).probability_inputs)
    except (TypeError, ValueError):
        return False


def _check_class(c, name: str, what: str = "a class label") -> None:
    """Raise unless ``c`` can be a class label: hashable, not None, not NaN.

    The message reads "`name` must be/hold ``what``; got ``c``"."""
    verb = "must be" if what.startswith("a ") else "must have"
    try:
        hash(c)
    except TypeError:
        hashable = what.replace("a class", "a hashable class").replace("class labels", "hashable class labels")
        msg = f"`{name}` {verb} {hashable}; got {c!r} of type {type(c).__name__}."
        raise TypeError(msg) from None
    try:
        nan = bool(c != c)  # NaN of any type (float, numpy, Decimal): never equal to itself
    except Exception:  # a type whose comparison with itself fails is no usable label either
        nan = True
    if c is None or nan:
        msg = f"`{name}` {verb} {what}; got {c!r} (None and NaN are not class labels)."
        raise ValueError(msg)


def _learn_one_takes(kind: type, names: tuple) -> bool:
    """Whether ``kind.learn_one`` takes the keyword arguments ``names`` (``w``, ``t``)."""
    return _takes_keywords(kind, "learn_one", names)


def _array_takes(kind: type, names: tuple) -> bool:
    """Whether ``kind.update`` takes the keyword arguments ``names`` (``weights``, ``times``)."""
    return _takes_keywords(kind, "update", names)


@functools.lru_cache(maxsize=64)
def _takes_keywords(kind: type, method: str, names: tuple) -> bool:
    try:
        params = inspect.signature(getattr(kind, method)).parameters
    except (TypeError, ValueError):
        return True
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return True
    return all(name in params for name in names)


def _event_keywords(models, w: float, t: float | None) -> dict:
    """The keywords ``learn_one`` passes each binary calibrator: ``w`` unless it is 1, ``t`` if
    given. Raises (before anything learns) if one of ``models`` cannot take them."""
    kw = {}
    if w != 1.0:
        kw["w"] = w
    if t is not None:
        kw["t"] = t
    if kw:
        for model in models:
            if not _learn_one_takes(type(model), tuple(kw)):
                names = " and ".join(f"`{k}=`" for k in kw)
                msg = (
                    f"`calibrator` {type(model).__name__} takes no {names} in its learn_one: pass no event "
                    "weights or times, or use a binary calibrator that takes them."
                )
                raise TypeError(msg)
    return kw


def _learn_events(events, w: float = 1.0, t: float | None = None) -> None:
    """Feed each binary calibrator its event, after checking every score dict first (streamcal
    calibrators: ``_score_of``, which changes nothing), so that one refused event leaves all of
    them unchanged. ``w`` and ``t`` (checked by the caller) go to every one of them."""
    kw = _event_keywords([model for model, _, _ in events], w, t)
    for model, xd, _ in events:
        check = getattr(model, "_score_of", None)
        if check is not None:
            check(xd)
    for model, xd, label in events:
        model.learn_one(xd, label, **kw)


def _takes_any_score(model) -> bool:
    """Whether ``model`` learns every score and event a multiclass calibrator gives it (the caller
    has checked weights and times): a streamcal calibrator whose bucket strategy has no quantile
    warm-up (which may refuse its sample) and whose score range holds every score it is given
    (probabilities, or log-odds within ``MAX_LOG_ODDS``). Others may refuse part of an array
    call after other calibrators learned theirs, so the caller keeps a copy to restore."""
    from streamcal.buckets import as_buckets

    try:
        buckets = as_buckets(model.buckets)
        low, high = (float(v) for v in buckets.score_range)
        warmup = int(buckets.warmup)
    except (AttributeError, TypeError, ValueError):
        return False
    if warmup:
        return False
    if _takes_probabilities(model.buckets):
        return low <= 0.0 and high >= 1.0
    return low <= -MAX_LOG_ODDS and high >= MAX_LOG_ODDS


def _window_weights_from_counts(model, learn: np.ndarray, w: np.ndarray, times=None) -> np.ndarray | None:
    """The window weight of ``model`` before each event, if it follows from the weights alone.

    ``learn`` marks the events the model will learn, ``w`` their weights and ``times`` their
    times. A streamcal binary calibrator over an unbounded window holds the sum of the weights it
    learned; over a count window (started empty, no quantile warm-up) the sum of its last ``n``;
    over a time window (the same) the sum of those within ``seconds`` of its latest. With integer
    weights those sums are exact whatever the order of addition, so they equal the calibrator's
    own ``window_weight`` bit for bit. Anything else (decay, fractional weights, other
    calibrators): None, and the caller asks the calibrator event by event.
    """
    from streamcal.buckets import as_buckets

    try:
        window = as_window(model.window)
        warmup = int(as_buckets(model.buckets).warmup)
        start = float(model.window_weight)
        n_learned = int(model.n_learned)
    except (AttributeError, TypeError, ValueError):
        return None
    if window.decays or start != math.floor(start):
        return None
    wl = w[learn]
    if not (wl == np.floor(wl)).all() or start + float(wl.sum()) >= 2.0**53:
        return None
    capacity = window.ring_capacity
    if capacity == 0:
        learned = np.where(learn, w, 0.0)
        return start + (np.cumsum(learned) - learned)  # exact: integers below 2**53
    if n_learned != 0 or warmup != 0:
        return None
    sums = np.concatenate(([0.0], np.cumsum(wl)))
    count = np.cumsum(learn) - learn  # events learned before each event
    if not window.uses_times:  # a count window: the last ``capacity`` events
        return sums[count] - sums[np.maximum(count - capacity, 0)]
    if times is None:
        return None
    # a time window: after learning its k-th event, those within ``seconds`` of it
    starts = np.empty(wl.size, dtype=np.intp)
    _k.time_window_starts(np.ascontiguousarray(times[learn]), float(window.seconds), starts)
    last = count - 1  # the last event learned before each event (-1: none)
    after = np.concatenate(([0.0], sums[1:] - sums[starts]))  # the window after each learned event
    return after[last + 1]


class _InputChecks:
    """The multiclass calibrators' checks of score dicts, labels and score arrays (a base of
    :class:`_ScoreDictCalibrator`, not used alone): each names the argument, the value and its
    position, before anything changes."""

    def _check_x(self, x, params=None) -> dict:
        """Validate a score dict; return {class: log-score} (``-inf`` for probability 0)."""
        if not isinstance(x, Mapping):
            msg = f"`x` must be a dict of per-class scores; got a {type(x).__name__}."
            raise TypeError(msg)
        fixed = (params or self._checked_params()).fixed_set
        out = {}
        for c, v in x.items():
            if fixed is None:
                _check_class(c, "x", "class labels as keys")
            elif c not in fixed:  # the fixed classes are checked labels
                msg = f"`x` holds a score for class {c!r}, which is not among `classes` {list(self.classes)!r}."
                raise ValueError(msg)
            if type(v) is not float:
                if not is_real_number(v):
                    msg = f"`x` must map classes to numbers; got {v!r} for class {c!r}."
                    raise TypeError(msg)
                try:
                    v = float(v)
                except OverflowError:
                    msg = f"`x` must hold numbers within the float64 range; got {v!r} for class {c!r}."
                    raise ValueError(msg) from None
            if self.scores == "proba":
                if not 0.0 <= v <= 1.0:
                    msg = f"`x` must hold probabilities in [0, 1]; got {v!r} for class {c!r}."
                    raise ValueError(msg)
                out[c] = math.log(v) if v > 0.0 else -math.inf
            else:
                if not math.isfinite(v):
                    msg = f"`x` must hold finite logits; got {v!r} for class {c!r}."
                    raise ValueError(msg)
                out[c] = v
        return out

    def _check_y(self, y, params=None) -> None:
        _check_class(y, "y")
        fixed = (params or self._checked_params()).fixed_set
        if fixed is not None and y not in fixed:
            msg = f"`y` = {y!r} is not among `classes` {list(self.classes)!r}."
            raise ValueError(msg)

    # -- array face ----------------------------------------------------------------------

    def _fixed_classes(self, method: str) -> list:
        if self.classes is None:
            msg = (
                f"`{method}` needs the classes fixed in advance: construct with "
                f"`classes=(...)`, naming the columns of `scores` in order."
            )
            raise ValueError(msg)
        return list(self.classes)

    def _check_score_array(self, scores, classes: list) -> np.ndarray:
        """Validate an (m, K) score array; return it as a float64 copy."""
        raw = as_real_array(scores, "scores", what="an (m, K) array of numbers")
        try:
            arr = np.array(raw, dtype=np.float64, copy=True, order="C")
        except OverflowError:
            msg = "`scores` must hold numbers within the float64 range."
            raise ValueError(msg) from None
        k = len(classes)
        if arr.ndim != 2 or arr.shape[1] != k:
            msg = (
                f"`scores` must have shape (m, {k}), one column per class of `classes`; got an "
                f"array of shape {arr.shape}."
            )
            raise ValueError(msg)
        if self.scores == "proba":
            bad = ~((arr >= 0.0) & (arr <= 1.0))
            what = "probabilities in [0, 1]"
        else:
            bad = ~np.isfinite(arr)
            what = "finite logits"
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            msg = f"`scores` must hold {what}; got {float(arr[i, j])!r} at position ({i}, {j}) (class {classes[j]!r})."
            raise ValueError(msg)
        return arr

    def _log_scores(self, arr: np.ndarray) -> np.ndarray:
        """Log-scores of a checked score array (``-inf`` for probability 0), as the river face
        computes them."""
        if self.scores == "proba":
            arr = arr.copy()
            _k.log_scores_inplace(arr)
        return arr

    def _check_label_array(self, labels, m: int, classes: list, learn: np.ndarray | None = None) -> np.ndarray:
        """Validate labels (at the ``learn`` positions, or all) against the fixed classes; return
        their column indices (intp; -1 where not learned)."""
        if isinstance(labels, (str, bytes)):
            msg = f"`labels` must be a 1-d sequence of class labels; got a {type(labels).__name__}."
            raise TypeError(msg)
        if isinstance(labels, (list, tuple)):
            raw = None  # the elements as given: numpy would turn [0, "a"] into strings
            values = list(labels)
        else:  # an array, a column, a pandas or polars Series or one-column frame
            raw = values = as_1d_array(labels, "labels")
        if len(values) != m:
            msg = f"`labels` must have the same length as the scores ({m}); got {len(values)}."
            raise ValueError(msg)
        index = {c: i for i, c in enumerate(classes)}
        out = np.full(m, -1, dtype=np.intp)
        positions = np.arange(m) if learn is None else np.flatnonzero(learn)
        if raw is not None and raw.dtype.kind in "iufUS":
            # each distinct label looked up once, as the loop below looks it up
            distinct, inverse = np.unique(raw[positions], return_inverse=True)
            found = np.empty(distinct.size, dtype=np.intp)
            for u, y in enumerate(distinct.tolist()):
                found[u] = index.get(y, -1) if y == y else -1
            bad = found[inverse] < 0
            if not bad.any():
                out[positions] = found[inverse]
                return out
            positions = positions[np.flatnonzero(bad)[:1]]  # the loop names the first bad label
        if raw is not None:
            values = raw.tolist()
        for t in positions.tolist():
            y = values[t]
            try:
                out[t] = index[y]
            except (KeyError, TypeError):
                msg = f"`labels` holds {y!r} at position {t}, which is not among `classes` {classes!r}."
                raise ValueError(msg) from None
        return out

    def _check_events(self, method, scores, labels, learn_mask, weights, times, learn_all: bool):
        """Everything an array-face call reads, checked before anything changes: the score array,
        the learn mask (``learn_all``: every event is learned; else ``learn_mask``, or none for
        ``predict_proba``), the labels, weights and times at the learned positions."""
        self._checked_params()
        classes = self._fixed_classes(method)
        arr = self._check_score_array(scores, classes)
        m = arr.shape[0]
        if learn_all:
            learn = np.ones(m, dtype=bool)
        elif learn_mask is None:
            learn = np.zeros(m, dtype=bool)
        else:
            learn = as_binary_labels(learn_mask, "learn_mask", allow_empty=True).astype(bool)
            check_same_length(m, learn.size, "learn_mask")
        if labels is None:  # predict_proba: nothing is learned
            y = np.full(m, -1, dtype=np.intp)
        else:
            y = self._check_label_array(labels, m, classes, None if learn_all else learn)
        window = self._checked_params().window
        _, w, t = check_learn_arrays(
            m,
            np.zeros(m),
            weights,
            times,
            None if learn_all else learn,
            max_weight=MAX_WEIGHT,
            needs_times=window.uses_times,
            last_time=self._last_time,
            window_name=type(window).__name__,
        )
        return classes, arr, learn, y, w, t


@keywords_named
class _ScoreDictCalibrator(_InputChecks, LockedState, Persistable, base.Classifier):
    """Shared machinery: validation of score dicts, the class register, binary calibrator clones.

    Thread safety: each public method holds the calibrator's lock (``streamcal._locking``) for
    its whole run, its binary calibrators included (they are reached only through it), except
    the river face's common event of :class:`PairwiseCouplingCalibrator`, which takes no lock
    and is atomic all the same (see the notes above ``_FrameMarkingLock``).
    """

    def __init__(self, calibrator=None, scores: str = "proba", classes: tuple | None = None):
        self.calibrator = calibrator
        self.scores = scores
        self.classes = classes
        self._classes: list = []  # known classes, in the canonical order
        self._models: dict = {}  # pair (a, b) or class c -> binary calibrator
        self._last_time = -math.inf  # the latest event time learned, with a time window
        self._init_lock()
        self._check_params()  # refused at construction, as the binary calibrators refuse theirs

    # the checked parameters and what derives from them (``_checked_params``): not state
    _UNSAVED = (*LockedState._UNSAVED, "_checked")

    @property
    def _multiclass(self) -> bool:
        return True

    def _params_now(self) -> tuple:
        # the parameters and the prototype's window, buckets and score key, read by attrgetter's
        # C loop (getattr with a None default where the prototype lacks one of them)
        own = _own_params(type(self))(self)
        calibrator = own[2]
        if calibrator is None:  # the default prototype
            return (*own, None, None, None)
        try:
            return (*own, *_PROTOTYPE_PARAMS(calibrator))
        except AttributeError:
            return (*own, *(getattr(calibrator, name, None) for name in ("window", "buckets", "score_key")))

    _EXTRA_PARAMS: tuple[str, ...] = ()

    def _params_unchanged(self, before: tuple) -> bool:
        """Whether each parameter read by :meth:`_params_now` into ``before`` is still the same
        object: the own parameters and the prototype's tested one by one, in line (a C loop over
        the pairs of two tuples costs several times as much per call); a class with
        ``_EXTRA_PARAMS`` tests them in its own override, or here in a loop."""
        calibrator = self.calibrator
        if not (self.scores is before[0] and self.classes is before[1] and calibrator is before[2]):
            return False
        extra = self._EXTRA_PARAMS
        if extra and not all(map(operator.is_, operator.attrgetter(*extra)(self), before[3 : 3 + len(extra)])):
            return False
        return _prototype_unchanged(calibrator, before)

    def _checked_params(self) -> types.SimpleNamespace:
        """:meth:`_check_params`, and what derives from the parameters, for the river face's
        every call: computed again only when a parameter is another object than at the last
        check (river estimators' parameters are replaced, not changed in place)."""
        cached = self.__dict__.get("_checked")
        if cached is not None and self._params_unchanged(cached[0]):
            return cached[1]
        now = self._params_now()
        self._check_params()
        fixed = None if self.classes is None else list(self.classes)
        if self.calibrator is None:
            probabilities, takes_any_score, key = _default_prototype_facts()
        else:
            probabilities, takes_any_score, key = _prototype_facts(self._new_binary())
        derived = types.SimpleNamespace(
            window=self._window(),
            fixed=fixed,
            fixed_set=None if fixed is None else set(fixed),
            rank=None if fixed is None else {c: i for i, c in enumerate(fixed)},
            probabilities=probabilities,
            takes_any_score=takes_any_score,
            score_key=key,
        )
        self._checked = (now, derived)
        return derived

    # -- parameters and the class register ---------------------------------------------------

    def _check_params(self) -> None:
        check_scalar(self.scores, "scores", choices=_SCORE_KINDS)
        if self.classes is not None:
            if isinstance(self.classes, (str, bytes, Mapping)) or not isinstance(self.classes, Iterable):
                msg = f"`classes` must be a tuple of class labels; got {self.classes!r}."
                raise TypeError(msg)
            fixed = list(self.classes)
            if not fixed:
                msg = "`classes` must name at least one class; got an empty tuple."
                raise ValueError(msg)
            for c in fixed:
                _check_class(c, "classes", "class labels as elements")
            if len(set(fixed)) != len(fixed):
                msg = f"`classes` must not repeat a class; got {self.classes!r}."
                raise ValueError(msg)
        calibrator = self.calibrator
        _refuse_a_class(calibrator)
        if calibrator is not None:
            for name in ("learn_one", "predict_proba_one", "clone", "window_weight"):
                if not hasattr(calibrator, name):
                    msg = (
                        f"`calibrator` must be a binary streaming calibrator (with learn_one, "
                        f"predict_proba_one, clone and window_weight); got {calibrator!r}, which has no {name}."
                    )
                    raise TypeError(msg)
        self._window()  # a bad window (or window shorthand) of the calibrator is refused here

    def _window(self):
        """The binary calibrator's window strategy, its shorthand read (``"7d"`` is a
        ``TimeWindow``); ``Unbounded()`` for a calibrator without a ``window`` parameter."""
        return as_window(getattr(self.calibrator, "window", None))

    def _check_event(self, w, t, params) -> tuple[float, float | None]:
        """One event's weight and time, checked as a binary calibrator checks them: ``w`` in
        ``[0, MAX_WEIGHT]``; ``t`` finite, required by a time window and then never before the
        latest learned time (of any class: the stream's clock, not a pair's)."""
        if type(w) is not float or not (0.0 <= w <= MAX_WEIGHT):
            w = check_event_weight(w, MAX_WEIGHT)
        window = params.window
        if t is None:
            if window.uses_times:
                name = type(window).__name__
                msg = f"{name} needs event times: pass `t=` to learn_one (`calibrator` has a time window)."
                raise ValueError(msg)
            return w, None
        return w, check_event_time(t, self._last_time if window.uses_times else None)

    def _learned_time(self, t: float | None, params) -> None:
        if t is not None and params.window.uses_times:
            self._last_time = t

    def _order_key(self, c):
        rank = self._checked_params().rank
        if rank is not None:
            return rank[c]
        return _class_order(c)

    def _known(self) -> list:
        return list(self.classes) if self.classes is not None else self._classes

    @property
    def classes_(self) -> list:
        """The classes, in the order of the predicted distributions: the fixed ``classes``, or
        those learned so far (as labels or as keys of learned score dicts) in their canonical
        order (numbers, then strings, then the rest).

        Examples
        --------
        >>> from streamcal.multiclass import OneVsRestCalibrator
        >>> cal = OneVsRestCalibrator()
        >>> cal.learn_one({"b": 0.3, "a": 0.7}, "c")
        >>> cal.classes_
        ['a', 'b', 'c']
        """
        with self._lock:
            fixed = self._checked_params().fixed
            return list(fixed) if fixed is not None else list(self._classes)

    @property
    def last_time(self) -> float:
        """The stream's clock: the latest event time learned while the binary calibrator has a
        time window (a later event's time may not be earlier); ``-inf`` before any such event.

        Examples
        --------
        >>> from streamcal import PAVCalibrator
        >>> from streamcal.multiclass import OneVsRestCalibrator
        >>> cal = OneVsRestCalibrator(calibrator=PAVCalibrator(window="1h"))
        >>> cal.last_time
        -inf
        >>> cal.learn_one({0: 0.4, 1: 0.6}, 1, t=30.0)
        >>> cal.last_time
        30.0
        """
        with self._lock:
            return self._last_time

    def _new_binary(self):
        if self.calibrator is None:
            from streamcal import PAVCalibrator

            return PAVCalibrator()
        return self.calibrator.clone()

    @staticmethod
    def _score_dict(model, log_odds: float) -> dict:
        """The one-score dict a binary calibrator is given for a (pairwise or class) log-odds.

        streamcal calibrators whose bucket strategy takes probabilities (``LogitGrid``, their
        default) get ``sigmoid(log_odds)``: the same order, and their logit-spaced grid is then an
        even grid on the log-odds. Any other calibrator gets the log-odds itself.
        """
        key = getattr(model, "score_key", None)
        if hasattr(model, "buckets") and _takes_probabilities(model.buckets):
            return {key if key is not None else "score": _sigmoid(log_odds)}
        return {key if key is not None else "score": log_odds}

    # -- a restored state ---------------------------------------------------------------------

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("_last_time") == -math.inf:
            # no time learned: saved as a calibrator without a clock was, so that such files (and
            # those written before the clock was kept) load and save again unchanged
            del state["_last_time"]
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("_last_time", -math.inf)

    def _check_loaded_state(self) -> None:
        """Check the attributes a state file restored (see :mod:`streamcal.persist`): valid
        parameters; the learned classes distinct and in order (none with fixed ``classes``); one
        binary calibrator of the prototype's class per pair of known classes (pairwise coupling)
        or per known class (one-vs-rest), each checked when it was restored."""
        from streamcal import _state_check as c

        # a state saved before the multiclass calibrators kept the stream's clock: no time learned
        self.__dict__.setdefault("_last_time", -math.inf)
        c.check_like_fresh(self)
        c.need_params(self, self._check_params)
        if self.calibrator is not None and not (
            isinstance(self.calibrator, base.Classifier) and hasattr(self.calibrator, "window_weight")
        ):
            found = c.brief(self.calibrator)
            c.fail(f"`calibrator`: expected a binary streaming calibrator or None; found {found}.")
        last = self._last_time
        if type(last) is not float or not (last == -math.inf or (math.isfinite(last) and self._window().uses_times)):
            c.fail(f"`_last_time`: expected -inf, or a finite time with a time window; found {c.brief(last)}.")
        learned = self._classes
        if self.classes is not None and learned:
            c.fail(f"`_classes`: expected no learned classes when `classes` is fixed; found {c.brief(learned)}.")
        try:
            keys = [_class_order(cls) for cls in learned]
            ordered = len(set(learned)) == len(learned) and all(a <= b for a, b in itertools.pairwise(keys))
        except TypeError:
            ordered = False
        if not ordered:
            c.fail(f"`_classes`: expected distinct classes in their canonical order; found {c.brief(learned)}.")
        known = self._known()
        rank = {cls: i for i, cls in enumerate(known)}
        if self.classes is not None:
            rank = {cls: self._order_key(cls) for cls in known}
        if self.calibrator is None:
            from streamcal import PAVCalibrator

            kind = PAVCalibrator
        else:
            kind = type(self.calibrator)
        pairs = isinstance(self, PairwiseCouplingCalibrator)
        for key, model in self._models.items():
            if pairs:
                ok = type(key) is tuple and len(key) == 2 and all(k in rank for k in key)
                ok = ok and rank[key[0]] < rank[key[1]]
            else:
                ok = key in rank
            if not ok:
                c.fail(f"`_models`: {c.brief(key)} is not a {'pair of known classes' if pairs else 'known class'}.")
            if type(model) is not kind or model is self.calibrator:
                c.fail(f"`_models[{key!r}]`: expected a {kind.__name__} of its own; found {c.brief(model)}.")
        if pairs:
            _ghosts.check_loaded(self, kind, rank, c.fail, c.brief)
        absent = self.__dict__.get("_absent")
        if absent is not None and (
            pairs or self.classes is not None or type(absent) is not kind or absent is self.calibrator
            or any(absent is model for model in self._models.values())
        ):
            want = f"None or a {kind.__name__} of its own without fixed classes"
            c.fail(f"`_absent`: expected {want}; found {c.brief(absent)}.")

    def _run_checked(self, arr, y, predict, learn, w, t, weights_given, times_given) -> np.ndarray:
        """Run checked events: predict where ``predict``, then learn where ``learn``; return the
        (m, K) predictions (NaN rows where nothing is predicted). If a binary calibrator refuses
        its part, every binary calibrator is put back as it was and the error raised."""
        params = self._checked_params()
        may_refuse = learn.any() and not (
            params.takes_any_score and all(_takes_any_score(model) for model in self._models.values())
        )
        if may_refuse:
            saved = (copy.deepcopy(self._models), self._last_time)
        else:
            saved = None
        try:
            out = self._run_events(arr, self._log_scores(arr), y, predict, learn, w, t, weights_given, times_given)
        except BaseException:
            if saved is not None:
                self._models, self._last_time = saved
            raise
        if times_given and learn.any() and params.window.uses_times:
            self._last_time = float(t[np.flatnonzero(learn)[-1]])
        return out

    def _run_events(self, arr, logs, y, predict, learn, w, t, weights_given, times_given) -> np.ndarray:
        raise NotImplementedError

    def update(self, scores, labels, *, weights=None, times=None):
        """Learn labelled events in order; equal to a loop of ``learn_one``. Returns ``self``.

        ``scores`` is an (m, K) array whose column k holds the score of ``classes[k]`` (needs
        ``classes`` fixed); ``labels`` the m class labels; ``weights`` and ``times`` the events'
        weights and times, given to every binary calibrator the event reaches (``times`` required
        by a time window). Each binary calibrator learns its own events in one call of its array
        face (event by event if it has none).
        """
        with self._lock:
            _, arr, learn, y, w, t = self._check_events("update", scores, labels, None, weights, times, True)
            self._run_checked(arr, y, np.zeros_like(learn), learn, w, t, weights is not None, times is not None)
        return self

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probabilities (m, K) for an (m, K) score array, columns as ``classes``.

        Equal, bit for bit, to stacking ``predict_proba_one`` over the rows.
        """
        with self._lock:
            _, arr, learn, y, w, t = self._check_events("predict_proba", scores, None, None, None, None, False)
            return self._run_checked(arr, y, np.ones_like(learn), learn, w, t, False, False)

    def prequential(self, scores, labels, *, weights=None, times=None) -> np.ndarray:
        """Predict each event with the state before its label, then learn it: probabilities (m, K).

        Equal, bit for bit, to a loop of ``predict_proba_one`` then ``learn_one``. Arguments as
        for :meth:`update`. The input is checked before anything changes: a rejected call leaves
        the calibrator as it was.

        Examples
        --------
        >>> import numpy as np
        >>> from streamcal import PAVCalibrator
        >>> from streamcal.multiclass import PairwiseCouplingCalibrator
        >>> rng = np.random.default_rng(0)
        >>> p = rng.dirichlet(np.ones(3), size=500)
        >>> y = (rng.random(500)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
        >>> times = np.arange(500) * 60.0  # one event a minute
        >>> cal = PairwiseCouplingCalibrator(PAVCalibrator(window="2h"), classes=(0, 1, 2))
        >>> proba = cal.prequential(p**2 / (p**2).sum(axis=1, keepdims=True), y, times=times)
        >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1.0))
        ((500, 3), True)
        >>> cal.pairs_[(0, 1)].window_weight  # the pair's events of the last two hours
        86.0
        """
        with self._lock:
            _, arr, learn, y, w, t = self._check_events("prequential", scores, labels, None, weights, times, True)
            return self._run_checked(arr, y, learn, learn, w, t, weights is not None, times is not None)

    def process(self, scores, labels, learn_mask, *, weights=None, times=None) -> np.ndarray:
        """Run an ordered sequence of operations: learn where ``learn_mask``, else predict.

        ``learn_mask[i]`` True learns (scores[i], labels[i], weights[i], times[i]); False
        predicts scores[i] with the current state (labels, weights and times there are ignored).
        Returns the (m, K) probabilities, NaN at the learn positions. Equal, bit for bit, to the
        same sequence of ``learn_one`` and ``predict_proba_one`` calls.
        """
        with self._lock:
            _, arr, learn, y, w, t = self._check_events("process", scores, labels, learn_mask, weights, times, False)
            return self._run_checked(arr, y, ~learn, learn, w, t, weights is not None, times is not None)

    def _binary_outputs(self, model, values, labels, predict, learn, w, t, weights_given, times_given):
        """One binary calibrator over the events: at each ``predict`` event its probability of
        ``values`` and its window weight, with the state before that event; it learns
        (``values``, ``labels``, ``w``, ``t``) at the ``learn`` events (after predicting, where
        both). Returns ``(proba, weight)`` at the predicted events.

        Its events go to its array face in one call where its window weights follow from the
        weights (:func:`_window_weights_from_counts`); else event by event, asking it.
        """
        n_pred = int(np.count_nonzero(predict))
        kw = {}
        if weights_given:
            kw["weights"] = w
        if times_given:
            kw["times"] = t
        if not learn.any():
            total = float(model.window_weight)
            weight = np.full(n_pred, total)
            if total <= 0.0 or n_pred == 0:
                return np.full(n_pred, 0.5), weight
            v = values[predict]
            if hasattr(model, "predict_proba"):
                return np.asarray(model.predict_proba(v), dtype=np.float64), weight
            return np.array([self._binary_proba(model, s) for s in v.tolist()]), weight
        if n_pred == 0 and hasattr(model, "update") and (not kw or _array_takes(type(model), tuple(kw))):
            model.update(values[learn], labels[learn], **{k: a[learn] for k, a in kw.items()})
            return np.empty(0), np.empty(0)
        weight = (
            _window_weights_from_counts(model, learn, w, t if times_given else None)
            if hasattr(model, "process")
            else None
        )
        if weight is not None:
            counts = predict.astype(np.intp) + learn
            ends = np.cumsum(counts)
            idx = np.repeat(np.arange(values.size), counts)
            ops_learn = np.zeros(idx.size, dtype=bool)
            ops_learn[ends[learn] - 1] = True
            proba, _ = model.process(values[idx], labels[idx], ops_learn, **{k: a[idx] for k, a in kw.items()})
            at = ends[predict] - counts[predict]
            return proba[at], weight[predict]
        one = _event_keywords([model], 2.0 if weights_given else 1.0, 0.0 if times_given else None)
        proba = np.full(n_pred, 0.5)
        weight = np.empty(n_pred)
        j = 0
        for e in np.flatnonzero(predict | learn).tolist():
            s = float(values[e])
            if predict[e]:
                total = weight[j] = float(model.window_weight)
                if total > 0.0:
                    proba[j] = self._binary_proba(model, s)
                j += 1
            if learn[e]:
                if one:
                    one = {k: float(w[e]) if k == "w" else float(t[e]) for k in one}
                model.learn_one(self._score_key_dict(model, s), bool(labels[e]), **one)
        return proba, weight

    def _binary_proba(self, model, value: float) -> float:
        return float(model.predict_proba_one(self._score_key_dict(model, value)).get(True, 0.5))

    @staticmethod
    def _score_key_dict(model, value: float) -> dict:
        key = getattr(model, "score_key", None)
        return {key if key is not None else "score": value}

    @staticmethod
    def _takes_probabilities(model) -> bool:
        return hasattr(model, "buckets") and _takes_probabilities(model.buckets)

    def _register(self, new) -> None:
        if self.classes is not None:
            return
        known = set(self._classes)
        for c in new:
            if c not in known:
                bisect.insort(self._classes, c, key=_class_order)
                known.add(c)

    @contextlib.contextmanager
    def _registering(self, new):
        """Register the classes ``new`` for one ``learn_one``; yields ``new_model(key)``, which
        adds a fresh binary calibrator. If the body raises, the classes and calibrators it added
        are removed again, so a rejected event leaves the register as it was."""
        classes = list(self._classes)
        added = []

        def new_model(key, model=None):
            model = self._models[key] = self._new_binary() if model is None else model
            added.append(key)
            return model

        self._register(new)
        try:
            yield new_model
        except BaseException:
            self._classes[:] = classes
            for key in added:
                del self._models[key]
            raise

    def _output_classes(self, s: dict) -> list:
        known = self._known()
        known_set = set(known)
        extra = [c for c in s if c not in known_set]
        if not extra:
            return list(known)
        return sorted([*known, *extra], key=_class_order)


_PROTOTYPE_PARAMS = operator.attrgetter("window", "buckets", "score_key")


def _prototype_facts(prototype) -> tuple[bool, bool, str]:
    """What the multiclass calibrators read from a fresh binary calibrator: whether it takes
    probabilities, whether it learns every score it is given (``_takes_any_score``), and the key
    of its score dicts."""
    key = getattr(prototype, "score_key", None)
    return (
        _ScoreDictCalibrator._takes_probabilities(prototype),
        _takes_any_score(prototype),
        key if key is not None else "score",
    )


@functools.cache
def _refuse_a_class(calibrator) -> None:
    """A calibrator class passed where an instance goes (``PAVCalibrator`` for ``PAVCalibrator()``)
    is named as such: its unbound methods would pass the checks and fail at the first event."""
    if isinstance(calibrator, type):
        name = calibrator.__name__
        msg = f"`calibrator` must be a binary streaming calibrator instance; got the class {name}: pass {name}()."
        raise TypeError(msg)


def _default_prototype_facts() -> tuple[bool, bool, str]:
    """:func:`_prototype_facts` of the default binary calibrator, ``PAVCalibrator()``: the same
    for every multiclass calibrator, read once per process rather than from a calibrator built
    at each one's first call (a few hundred microseconds)."""
    from streamcal import PAVCalibrator

    return _prototype_facts(PAVCalibrator())


def _prototype_unchanged(calibrator, before: tuple) -> bool:
    """Whether the prototype ``calibrator`` (the same object as when ``before`` was read by
    ``_params_now``) still holds the window, buckets and score key that ``before`` ends with."""
    if calibrator is None:  # the default prototype: read as three Nones
        return True
    try:
        window, buckets, key = calibrator.window, calibrator.buckets, calibrator.score_key
    except AttributeError:  # a prototype without some of them: read with None in their place
        now = tuple(getattr(calibrator, name, None) for name in ("window", "buckets", "score_key"))
        return all(map(operator.is_, now, before[-3:]))
    return window is before[-3] and buckets is before[-2] and key is before[-1]


@functools.cache
def _own_params(cls) -> operator.attrgetter:
    """A score-dict calibrator class's own parameters, read at once: ``scores``, ``classes``,
    ``calibrator`` and the class's ``_EXTRA_PARAMS``."""
    return operator.attrgetter("scores", "classes", "calibrator", *cls._EXTRA_PARAMS)


_PACKED = itertools.repeat("_packed")  # the key of a PAVCalibrator's packed state, for every pair

_DICT_DISPLAYS: dict = {}  # K -> a function of K keys making ``_dict_display``'s function


def _dict_display(keys: tuple):
    """A function of a list of ``len(keys)`` values returning ``dict(zip(keys, values))``: one
    dict display with the keys bound as defaults, about 40% of the time of ``dict(zip(...))``
    for five classes (the river face's result dict, per event). The display's source depends on
    K alone, made once per K; the keys are any hashable objects, never part of the source."""
    k = len(keys)
    factory = _DICT_DISPLAYS.get(k)
    if factory is None:
        names = ", ".join(f"k{i}" for i in range(k))
        defaults = ", ".join(f"k{i}=k{i}" for i in range(k))
        entries = ", ".join(f"k{i}: v[{i}]" for i in range(k))
        factory = _DICT_DISPLAYS[k] = eval(f"lambda {names}: lambda v, {defaults}: {{{entries}}}")
    return factory(*keys)


_FAST_FACTORIES: dict = {}  # K -> the factory of ``_fast_calls``' two functions


@functools.cache
def _class_pairs(k: int) -> tuple:
    """Per class column of K, the indices of its K - 1 pairs among those of
    ``numpy.triu_indices(K, 1)`` (in that order)."""
    pairs = list(itertools.combinations(range(k), 2))
    return tuple(tuple(q for q, (a, b) in enumerate(pairs) if c in (a, b)) for c in range(k))


def _bound_models(classes: list, models: dict, ghosts: dict | None) -> list:
    """The calibrators the river face's one-call kernels bind: the pairs of ``classes`` in the
    order of ``numpy.triu_indices(K, 1)`` (None where there is none), then, where ``ghosts`` are
    kept (no fixed classes), each class's two ghosts (:mod:`streamcal.multiclass._ghosts`; None
    where it has none yet)."""
    k = len(classes)
    bound = [models.get((classes[a], classes[b])) for a in range(k) for b in range(a + 1, k)]
    if ghosts is not None:
        for c in classes:
            bound.extend(ghosts.get(c, (None, None)))
    return bound


def _fast_calls(river: _RiverCall) -> tuple:
    """The river face's common event for a bound :class:`_RiverCall` of K classes, as two
    functions made once per set of pairs: ``predict(x)``, the result dict or None, and
    ``learn(x, y, w)``, whether the event was learned. Each reads a plain dict holding exactly
    the K classes (in any order: one C call reads the K values in the classes' order), checks
    that every value is a float (the kernel checks its range), and calls its kernel once; None
    or False, having changed nothing, where any of that fails (the full checks then judge the
    event). The source depends on K alone (the checks and the result dict unrolled), made once
    per K; the classes, kernels and arrays are bound as arguments, never part of the source."""
    k = len(river.keys)
    factory = _FAST_FACTORIES.get(k)
    if factory is None:
        names = ", ".join(f"k{i}" for i in range(k))
        values = ", ".join(f"a{i}" for i in range(k))
        floats = " and ".join(f"a{i}.__class__ is float" for i in range(k))
        outputs = ", ".join(f"p{i}" for i in range(k))
        entries = ", ".join(f"k{i}: p{i}" for i in range(k))
        source = f"""
def factory(read, column, kernel_predict, kernel_learn, addresses, frame, {names}):
    def predict(x):
        if x.__class__ is dict and len(x) == {k}:
            try:
                {values} = v = read(x)
            except KeyError:
                return None
            if {floats}:
                status, {outputs} = kernel_predict(addresses, frame, v, True)
                if status > 0.0:
                    return {{{entries}}}
        return None

    def learn(x, y, w):
        if x.__class__ is dict and len(x) == {k}:
            try:
                {values} = v = read(x)
                c = column.get(y)
            except (KeyError, TypeError):  # a class missing; an unhashable label
                return False
            if c is not None and {floats}:
                return kernel_learn(addresses, frame, v, True, c, w) > 0
        return False

    return predict, learn
"""
        namespace: dict = {}
        exec(compile(source, f"<river face, K = {k}>", "exec"), namespace)
        factory = _FAST_FACTORIES[k] = namespace["factory"]
    read = operator.itemgetter(*river.keys)
    return factory(read, river.column, river.predict, river.learn, river.addresses, river.frame, *river.keys)


class _RiverCall:
    """The river face's one-call kernels (:mod:`streamcal.multiclass._one_call`) bound to the
    pairs of a :class:`PairwiseCouplingCalibrator`: the addresses of the pairs' packed states
    (pairs in the order of ``numpy.triu_indices(K, 1)``, 0 for a pair without a calibrator), the
    frame of the bound parameters, log-scores, output and scratch, and the two compiled
    functions, made once and valid while the parameters, the classes and the register stay the
    same objects; a pair's new state buffer is bound in place (:meth:`hold_again`; the buffers
    are held here, so their addresses stay valid). Without ``pairs`` (the kernels do not apply)
    it only remembers that, for the same parameters and pairs."""

    __slots__ = (
        "addresses",
        "before",
        "bound",
        "buffers",
        "busy",
        "classes",
        "column",
        "fast_learn",
        "fast_predict",
        "fixed",
        "frame",
        "free",
        "holding",
        "kernels_k",
        "keys",
        "models",
        "n_models",
        "pair_models",
        "pairs",
        "params",
        "plain",
        "proba",
        "result",
        "serial",
        "types",
    )  # fmt: skip

    def __init__(self, params, classes: list, models: dict, pairs=None, buffers=None, proba: bool = True):
        self.params, self.classes, self.models, self.n_models = params, list(classes), models, len(models)
        self.kernels_k = None  # K of the bound kernels in ``_RIVER_KERNELS`` (None: unbound)
        self.fast_predict = self.fast_learn = None  # the common event's calls (``_fast_calls``), once bound
        self.fixed = params.fixed is not None  # the classes fixed: bound as given
        self.plain = False  # whether the kernels, once bound, apply while the register and buffers stay
        self.before = None  # the parameters read when ``params`` was derived (``_params_now``)
        self.serial = -1  # ``isotonic.streaming.PACK_SERIAL`` when the buffers were last found in place
        self.free = False  # whether the common event may run without the lock (``plain``, with a GIL)
        self.busy = None  # the frame's busy mark (one element), once there is a frame
        if pairs is None:
            return
        from streamcal.multiclass import _one_call

        k = len(classes)
        self.proba = proba
        self.column = {c: i for i, c in enumerate(classes)}
        self.keys = tuple(classes)  # a score dict's keys in this order: its values are the scores' tuple
        self.result = _dict_display(self.keys)  # the output's values (a list) -> the result dict
        self.types = (float,) * k
        self.pair_models = tuple(pairs)
        self.addresses = np.zeros(2 * len(buffers), dtype=np.int64)
        self.bound = [None] * len(buffers)  # the buffer whose address each pair's slot holds
        self.hold(buffers)
        self.frame = np.zeros(_one_call.frame_size(k))
        # born busy (made under the calibrator's lock, whose release lifts the mark of the bound
        # frame only): a frame replaced keeps its mark, so a call holding it is refused
        self.busy = self.frame[_one_call.FRAME_BUSY : _one_call.FRAME_BUSY + 1]
        self.busy[0] = 1.0

    def hold(self, buffers: list) -> None:
        """Bind the pairs' state buffers (one per pair of ``pair_models``, None for a pair
        without a calibrator): their addresses, and what ``buffers_unchanged`` compares."""
        pairs = self.pair_models
        k = len(self.classes)
        # each present pair's attribute dict (where its ``packed_state`` reads the buffer) and
        # the buffer it gave
        self.pairs = tuple(model.__dict__ for model in pairs if model is not None)
        self.buffers = tuple(buffer for buffer in buffers if buffer is not None)
        # per class column: the calibrators of its K - 1 pairs and their buffers (None when one
        # of them has none yet: learning then creates it, through the per-pair calls)
        self.holding = []
        n_pairs = k * (k - 1) // 2
        for c, mine in enumerate(_class_pairs(k)):
            if len(pairs) > n_pairs:  # and its ghosts, bound after the pairs
                mine = (*mine, n_pairs + 2 * c, n_pairs + 2 * c + 1)
            ok = all(pairs[q] is not None for q in mine)
            mine = (tuple(pairs[q].__dict__ for q in mine), tuple(buffers[q] for q in mine)) if ok else None
            self.holding.append(mine)
        # the addresses of the buffers not bound before (reading an address costs a microsecond or
        # two; a set of pairs grows one pair at a time)
        addresses = self.addresses
        for q, buffer in enumerate(buffers):
            if buffer is not self.bound[q]:
                addresses[2 * q : 2 * q + 2] = (0, 0) if buffer is None else (buffer.ctypes.data, buffer.size)
        self.bound = list(buffers)

    def hold_again(self) -> bool:
        """Bind each pair's current state buffer in place of the one bound (the same calibrators,
        one or more holding a new buffer: refitted, merged or loaded); False, having changed
        nothing, if a calibrator holds none."""
        buffers = [None if model is None else model.packed_state() for model in self.pair_models]
        if any(model is not None and buffer is None for model, buffer in zip(self.pair_models, buffers, strict=True)):
            return False
        self.hold(buffers)
        return True

    def bind(self, method: int, tol: float, max_iter: int) -> None:
        """Write the parameters into the frame and find the compiled kernels for K classes."""
        from streamcal.multiclass import _one_call

        self.frame[: _one_call.FRAME_BUSY] = (
            1.0 if self.params.probabilities else 0.0, MAX_LOG_ODDS, UNSEEN_PAIR_WEIGHT,
            float(method), tol, float(max_iter), float(NEWTON_AFTER_SWEEPS), 1.0 if self.proba else 0.0,
        )  # fmt: skip
        k = len(self.classes)
        kernels = _RIVER_KERNELS.get(k)
        if kernels is None:
            example = (self.addresses, self.frame, (0.5,) * k, True)
            kernels = _RIVER_KERNELS[k] = (
                entry_point(_one_call.pairs_predict, *example),
                entry_point(_one_call.pairs_learn, *example, 0, 1.0),
            )
        self.kernels_k = k
        self.fast_predict, self.fast_learn = _fast_calls(self)

    @property
    def predict(self):
        """The bound prediction kernel (None before the kernels are bound). The calibrator's
        objects name the kernels by K instead of holding them, so that walking them (river's
        ``_raw_memory_usage``) never reaches numba's dispatchers."""
        return None if self.kernels_k is None else _RIVER_KERNELS[self.kernels_k][0]

    @property
    def learn(self):
        """The bound learning kernel (None before the kernels are bound)."""
        return None if self.kernels_k is None else _RIVER_KERNELS[self.kernels_k][1]

    def bind_added_pairs(self, params, classes: list, models: dict, ghosts: dict | None) -> bool:
        """Bind, in place, the pairs the register ``models`` added since these kernels were bound
        (the same parameters, classes and register, which holds more calibrators now; each bound
        one still there): the kernels, frame and in-line calls stay, only the addresses change.
        True if done; False, having changed nothing, where a full rebind is needed (a bound pair
        replaced or gone, a new one not a ``PAVCalibrator`` taking every score, or no buffer)."""
        if not (self.params is params and self.models is models and self.classes == classes):
            return False
        if self.n_models >= len(models):
            return False
        serial = PACK_SERIAL[0]  # read before the buffers: a buffer packed meanwhile changes it
        from streamcal import PAVCalibrator

        pair_models = _bound_models(classes, models, ghosts)
        for old, model in zip(self.pair_models, pair_models, strict=True):
            if old is None:
                if model is not None and not (type(model) is PAVCalibrator and _takes_any_score(model)):
                    return False
            elif model is not old:
                return False
        buffers = [None if model is None else model.packed_state() for model in pair_models]
        if any(model is not None and buffer is None for model, buffer in zip(pair_models, buffers, strict=True)):
            return False
        self.pair_models = tuple(pair_models)
        self.n_models = len(models)
        self.hold(buffers)
        self.serial = serial
        return True

    @staticmethod
    def buffers_unchanged(states: tuple, buffers: tuple) -> bool:
        """Whether each pair's calibrator still holds the state buffer bound here: its
        ``packed_state()`` (``PAVCalibrator``'s, which reads ``__dict__["_packed"]``), read for
        every pair at once in C, with no Python call per pair."""
        return all(map(operator.is_, map(dict.get, states, _PACKED), buffers))

    def same_register(self, models: dict) -> bool:
        """Whether the pairs bound are those of the register ``models`` (the same dict, as many
        pairs: the register only adds pairs, or a rolled back array call puts another dict in place)."""
        return self.models is models and self.n_models == len(models)

    def same_pairs(self, params, classes: list, models: dict) -> bool:
        return (
            self.params is params and self.models is models and self.n_models == len(models) and self.classes == classes
        )

    def scores_of(self, x) -> tuple | None:
        """The scores of ``x`` for the kernels: ``(scores, raw)``, the tuple of K floats and
        whether they are the raw values (checked by the kernel); None if ``x`` is not a dict of
        floats for known classes (the full checks then judge it).

        A dict holding every class in the classes' order gives its values as they are; any other
        is read here into log-scores (a class it lacks at ``-inf``), probabilities in [0, 1]
        (``scores="proba"``) or finite logits, exactly as the full check of a score dict reads them.
        """
        if x.__class__ is not dict:
            return None
        if tuple(x) == self.keys:
            scores = tuple(x.values())
            if tuple(map(type, scores)) == self.types:
                return scores, True
            return None
        column = self.column
        neg_inf = -math.inf
        row = [neg_inf] * len(column)
        log = math.log
        if self.proba:
            for c, v in x.items():
                i = column.get(c)
                if i is None or v.__class__ is not float or not 0.0 <= v <= 1.0:
                    return None
                row[i] = log(v) if v > 0.0 else neg_inf
        else:
            for c, v in x.items():
                i = column.get(c)
                if i is None or v.__class__ is not float or not neg_inf < v < math.inf:
                    return None
                row[i] = v
        return tuple(row), False


# Threads. The river face's common event (``_RiverCall.free``: fixed classes, the default
# pairs, a GIL) takes no lock in :class:`PairwiseCouplingCalibrator`'s ``learn_one`` and
# ``predict_proba_one``: a lock round trip costs about a quarter of the Python of a call. Its
# calls are atomic all the same, as PAV's lock-free river face (``isotonic/streaming.py``):
# (1) the one-call kernels hold the GIL, so no other Python thread runs a step during one;
# (2) everything else that reads or writes the pairs or the register holds the calibrator's
# lock (a ``_FrameMarkingLock``), which marks the bound frame busy while held, and on release
# lifts the mark only of a frame still bound to the register as it then is; a frame made
# meanwhile is born busy, one unbound keeps its mark (``__setattr__`` marks the frame it
# unbinds), and a pair's own sections mark its state buffer (``PACK_BUSY``; a buffer replaced
# keeps its mark). A kernel called on a marked frame or buffer changes nothing and refuses; its
# caller then waits for the lock and tries again under it, the frame's mark lifted around the
# one kernel call (``unmarked``). So a lock-free call runs whole before a section begins
# (setting the mark needs the GIL that the call holds) or after one ends, on a frame bound to
# the register of then, or is refused: some serial order. Its in-line check therefore compares
# no register, only the buffers' serial (a buffer packed anywhere since the binding: the locked
# path binds the new one). A prediction's result comes back from the kernel as a tuple, not
# read from the frame, which the next call overwrites.
class _FrameMarkingLock(SectionLock):
    """The lock of a :class:`PairwiseCouplingCalibrator`: a re-entrant lock that marks the river
    face's bound frame busy while held (``_one_call.FRAME_BUSY``; a frame made meanwhile is born
    busy), so that the one-call kernels of the lock-free common event refuse, changing nothing,
    and their caller waits for the lock (see the notes above). ``depth`` counts the holder's
    entries."""

    __slots__ = ("_cal", "depth", "rlock")

    def __init__(self, cal):
        self._cal = cal
        self.depth = 0
        self.rlock = threading.RLock()

    def acquire(self) -> bool:
        self.rlock.acquire()
        self.depth += 1
        if self.depth == 1:
            river = self._cal.__dict__.get("_river_pairs")
            if river is not None and river.busy is not None:
                river.busy[0] = 1.0
        return True

    def release(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            cal = self._cal
            river = cal.__dict__.get("_river_pairs")
            if river is not None and river.busy is not None and river.same_register(cal._models):
                river.busy[0] = 0.0
        self.rlock.release()

    def unmarked(self, river: _RiverCall, call, *args):
        """``call(*args)`` (a one-call kernel, or a common-event call of ``river``, the bound one)
        with the frame's mark lifted while it runs, if this lock's holder holds it once: the
        section's state is then whole, and a lock-free call of another thread may run before or
        after the kernel, not during it (the kernel holds the GIL). Held re-entrantly (a section
        of several steps may be under way), the kernel refuses and the caller goes on per pair."""
        if self.depth != 1:
            return call(*args)
        busy = river.busy
        busy[0] = 0.0
        try:
            return call(*args)
        finally:
            busy[0] = 1.0


_GIL = _gil_enabled()  # the river face's lock-free common event relies on the GIL


def _couple_upper(r_up: np.ndarray, n_up: np.ndarray, k: int, method: str, tol: float, max_iter: int) -> np.ndarray:
    """The coupled distributions (m, K) of pairs' r and n given as upper triangles (pairs, m)."""
    p = np.empty((r_up.shape[1], k))
    if k == 2:
        p[:, 0] = r_up[0]
        p[:, 1] = 1.0 - r_up[0]
    elif method == "ht":
        _k.ht_couple_upper(r_up, n_up, tol, max_iter, NEWTON_AFTER_SWEEPS, p)
    else:
        _k.wlw_couple_upper(r_up, n_up, p)
    return p


class PairwiseCouplingCalibrator(_ghosts.PairMerging, _ScoreDictCalibrator):
    """Multiclass calibration by pairwise coupling (Hastie & Tibshirani 1998).

    For every pair of classes (i, j) a binary streaming calibrator learns, from the events of
    class i or j only, P(i | i or j) as a function of the pairwise log-odds s_i - s_j (s_i = log p_i
    for probabilities, the logit itself for logits). A prediction evaluates every pair's calibrator
    on the event's own pairwise log-odds and couples the r_ij into one distribution with
    :func:`streamcal.pairwise_couple`, weighting each pair by n_ij = its calibrator's
    ``window_weight``: pairs with much evidence in their window count for more.

    Classes may appear at any time (as a label, or as a key of a score dict). Without fixed
    ``classes``, a class that joins gets the pairs it would have had with the classes fixed from
    the start: every earlier event of each other class, learned as the pair of a class absent
    from the scores, which two ghost calibrators per labelled class keep (``ghosts_``). Each such
    pair equals that run's bit for bit, and so does every prediction once both runs know the
    same classes. A pair that has learned nothing yet (or whose window is empty) takes the
    model's own pairwise probability ``sigmoid(s_i - s_j)`` with the tiny weight
    ``UNSEEN_PAIR_WEIGHT``, so before any learning the output is the model's distribution
    (normalised; softmax of the logits), and unseen pairs never outweigh pairs with data.

    A pair's calibrated probability is kept within the add-one bounds of its window,
    ``[1/(T+2), (T+1)/(T+2)]`` with T its ``window_weight``: PAV's exact map
    (``finite_proba=False``) says exactly 0 or 1 at the ends of its range, and coupling such r_ij
    gives class probabilities of exactly 0, which no finite window supports (and which log loss
    punishes without limit). The default ``PAVCalibrator()`` never does.

    Parameters
    ----------
    calibrator
        A binary streaming calibrator (river classifier with ``learn_one``/``predict_proba_one`` on
        a one-score dict and a ``window_weight`` property), cloned for every pair. ``None``:
        ``streamcal.PAVCalibrator()``. Any window works, time windows included (in any spelling,
        ``window="7d"`` too): event times go to every pair (``t=`` on ``learn_one``, ``times=``
        on the array face).
    scores
        ``"proba"``: the dict values are class probabilities (a class missing from the dict has
        probability 0). ``"logit"``: they are per-class logits (a missing class counts as -inf).
        Pairwise log-odds are clipped to ``[-MAX_LOG_ODDS, MAX_LOG_ODDS]`` (50).
    method
        Coupling method of :func:`streamcal.pairwise_couple`: ``"ht"`` or ``"wlw"``. ``"ht"``
        finds the Hastie–Tibshirani fixed point by full Newton steps on ``log p`` from each
        class's mean pairwise log-odds, else from the row averages (every pair's r_ij lies
        strictly inside (0, 1) and its weight is positive, so the optimum is interior), stepping
        on past ``tol`` while the steps still gain: the result is the fixed point to about
        1e-12, the one that ``pairwise_couple`` approaches to within ``tol``. Where full steps
        stall it falls back to ``pairwise_couple``'s scheme.
    tol
        Coupling tolerance (``"ht"``): the largest row residual of the score equations at which
        the steps may stop.
    max_iter
        Most coupling iterations per prediction in the fall-back (``"ht"``, with Newton steps;
        see :func:`streamcal.pairwise_couple`); a prediction that has not converged by then is
        the last iterate, silently. ``0``: the row-average estimate.
    classes
        The fixed set of classes, if known in advance; a score or label for any other class is
        then an error. ``None``: classes are learned from the stream.

    Attributes
    ----------
    pairs_ : dict
        (class_i, class_j) -> the binary calibrator of that pair, for the pairs that have learned.
    classes_ : list
        The classes, in the order of the predicted distributions.
    last_time : float
        The stream's clock: the latest event time learned with a time window (``-inf`` before).

    Examples
    --------
    A three-class stream whose model is over-confident: its probabilities are the true ones
    squared and renormalised. Multiclass log loss (cross-entropy) of the model and of the
    calibrated probabilities, each event predicted before it is learned, after 1000 events:

    >>> import numpy as np
    >>> from river import metrics
    >>> from streamcal.multiclass import PairwiseCouplingCalibrator
    >>> rng = np.random.default_rng(0)
    >>> cal = PairwiseCouplingCalibrator()
    >>> raw, calibrated = metrics.CrossEntropy(), metrics.CrossEntropy()
    >>> for t in range(3000):
    ...     p = rng.dirichlet([1.0, 1.0, 1.0])
    ...     y = int(rng.choice(3, p=p))
    ...     q = p**2 / (p**2).sum()
    ...     x = {c: float(q[c]) for c in range(3)}
    ...     if t >= 1000:
    ...         raw.update(y, x)
    ...         calibrated.update(y, cal.predict_proba_one(x))
    ...     cal.learn_one(x, y)
    >>> print(f"{raw.get():.3f} -> {calibrated.get():.3f}")
    0.980 -> 0.862
    """

    def __init__(
        self,
        calibrator=None,
        scores: str = "proba",
        method: str = "ht",
        tol: float = 1e-8,
        max_iter: int = 200,
        classes: tuple | None = None,
    ):
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        super().__init__(calibrator=calibrator, scores=scores, classes=classes)

    _EXTRA_PARAMS = ("method", "tol", "max_iter")

    def __setattr__(self, name: str, value) -> None:
        # a parameter replaced (river estimators' parameters are replaced, not changed in place)
        # unbinds the river face's kernels, bound again at the next call: their in-line check
        # then compares the register and the buffers, not the parameters. The value is written
        # first: kernels bound meanwhile from the old value are either unbound here or found
        # stale by the check that follows their binding (``_river_states``)
        object.__setattr__(self, name, value)
        if name[:1] != "_":
            river = self.__dict__.pop("_river_pairs", None)
            if river is not None and river.busy is not None:
                river.busy[0] = 1.0  # an unbound frame refuses a lock-free call that still holds it

    def _params_unchanged(self, before: tuple) -> bool:
        # the base's tests with this class's extra parameters in line (after the own three)
        calibrator = self.calibrator
        return (
            self.scores is before[0]
            and self.classes is before[1]
            and calibrator is before[2]
            and self.method is before[3]
            and self.tol is before[4]
            and self.max_iter is before[5]
            and _prototype_unchanged(calibrator, before)
        )

    def _init_lock(self) -> None:
        self._lock = _FrameMarkingLock(self)

    @property
    def pairs_(self) -> dict:
        with self._lock:
            return dict(self._models)

    @property
    def ghosts_(self) -> dict:
        """class -> ``(low, high)``: without fixed ``classes``, the two binary calibrators that
        learn every event of the class as its pair with a class not seen yet would, one sorting
        after it (``low``) and one before it (``high``); a class that joins gets copies as its
        pairs (see the notes on classes that appear late in ``docs/multiclass.md``). Empty with
        fixed ``classes``, or a binary calibrator that may refuse a score.

        Examples
        --------
        >>> from streamcal.multiclass import PairwiseCouplingCalibrator
        >>> cal = PairwiseCouplingCalibrator()
        >>> cal.learn_one({0: 0.6, 1: 0.4}, 0)
        >>> low, high = cal.ghosts_[0]
        >>> low.n_learned, high.n_learned, 1 in cal.ghosts_
        (1, 1, False)
        """
        with self._lock:
            return dict(_ghosts.held(self) or {})

    @property
    def river_in_one_call(self) -> bool:
        """Whether the river face runs an event over every pair of the known classes in one
        compiled call (PAVCalibrator pairs, compiled kernels, each pair's state packed), rather
        than one call per pair; both give the same bits.

        Examples
        --------
        >>> from streamcal.multiclass import PairwiseCouplingCalibrator
        >>> cal = PairwiseCouplingCalibrator(classes=("a", "b", "c"))
        >>> cal.learn_one({"a": 0.2, "b": 0.5, "c": 0.3}, "b")
        >>> isinstance(cal.river_in_one_call, bool)
        True
        """
        with self._lock:
            return self._river_states(self._known(), self._checked_params()) is not None

    def _check_params(self) -> None:
        super()._check_params()
        check_scalar(self.method, "method", choices=("ht", "wlw"))
        check_scalar(self.tol, "tol", numbers.Real, low=0.0)
        check_scalar(self.max_iter, "max_iter", numbers.Integral, low=0, high=MAX_ITER_LIMIT)

    def learn_one(self, x, y, w: float = 1.0, t: float | None = None) -> None:
        """Learn one event: every pair (y, j) sees the pairwise log-odds s_y - s_j.

        ``w`` is the event's weight and ``t`` its time (required when the binary calibrator has a
        time window, and then never going backwards), both given to every pair it reaches.
        """
        # the common event first, without the lock where the bound kernels plainly apply (see the
        # notes above ``_FrameMarkingLock``): known classes, a dict of float scores for every
        # class, a float weight, no time, in one call
        if t is None and w.__class__ is float and 0.0 <= w <= MAX_WEIGHT:
            river = self._river_pairs
            if river is not None and river.free and river.serial == PACK_SERIAL[0] and river.fast_learn(x, y, w):
                return
        lock = self._lock
        lock.acquire()  # explicitly: half the cost of a `with` statement per call
        try:
            # the common event again, under the lock
            if t is None and w.__class__ is float and 0.0 <= w <= MAX_WEIGHT:
                river = self.__dict__.get("_river_pairs")
                if (
                    river is not None
                    and river.models is self._models
                    and river.n_models == len(river.models)
                    and river.serial == PACK_SERIAL[0]
                    and (river.plain or self._river_current(river))
                    and lock.unmarked(river, river.fast_learn, x, y, w)
                ):
                    return
            params = self._checked_params()
            if (
                t is None
                and w.__class__ is float
                and 0.0 <= w <= MAX_WEIGHT
                and self._learn_in_one_call(x, y, w, params)
            ):
                return
            self._learn_per_pair(x, y, w, t, params)
        finally:
            lock.release()

    def _learn_per_pair(self, x, y, w, t, params) -> None:
        """:meth:`learn_one` after its full checks, through each pair's own calls."""
        s = self._check_x(x, params)
        self._check_y(y, params)
        w, t = self._check_event(w, t, params)
        if t is None and self._learn_in_one_call(x, y, w, params, s):
            return
        ghosts = _ghosts.kept(self, params)
        with self._registering([*s, y]) as new_model:
            neg_inf = -math.inf
            sy = s.get(y, neg_inf)
            order = params.rank.__getitem__ if params.rank is not None else _class_order
            ky = order(y)
            key, sigmoid = params.score_key, params.probabilities
            events = []
            for c in self._known():
                if c == y:
                    continue
                sc = s.get(c, neg_inf)
                if order(c) > ky:
                    pair, d, label = (y, c), sy - sc, True
                else:
                    pair, d, label = (c, y), sc - sy, False
                d = 0.0 if math.isnan(d) else _clip(d)
                model = self._models.get(pair)
                if model is None:  # a class joins: its pair as if the classes had been fixed
                    ghost = _ghosts.stand_in(ghosts, *pair)
                    model = new_model(pair, None if ghost is None else copy.deepcopy(ghost))
                events.append((model, {key: _sigmoid(d) if sigmoid else d}, label))
            new = None
            if ghosts is not None:
                found, new = _ghosts.events(ghosts, y, sy > neg_inf, self._new_binary, params, MAX_LOG_ODDS, _sigmoid)
                events.extend(found)
            _learn_events(events, w, t)
            if ghosts is not None:
                _ghosts.adopt(self, ghosts, y, new)
        self._learned_time(t, params)

    def _pair_inputs(self, x) -> tuple[list, list, list]:
        """Validated classes and the coupling's inputs for one score dict: each pair's r_ij and
        n_ij, pairs (i, j), i < j, in the order of ``numpy.triu_indices(K, 1)``."""
        params = self._checked_params()
        s = self._check_x(x, params)
        classes = self._output_classes(s)
        k = len(classes)
        neg_inf = -math.inf
        logs = [s.get(c, neg_inf) for c in classes]
        models = self._models
        ghosts = _ghosts.held(self)
        sigmoid = params.probabilities
        key = params.score_key
        r_upper = []
        n_upper = []
        for a in range(k):
            ca, la = classes[a], logs[a]
            for b in range(a + 1, k):
                d = la - logs[b]
                d = 0.0 if d != d else _clip(d)
                model = _ghosts.pair_or_stand_in(models, ghosts, ca, classes[b])
                weight = 0.0 if model is None else float(model.window_weight)
                if weight > 0.0:
                    rab = float(model.predict_proba_one({key: _sigmoid(d) if sigmoid else d}).get(True, 0.5))
                    rab = _within_add_one_bounds(rab, weight)
                else:
                    rab, weight = _sigmoid(d), UNSEEN_PAIR_WEIGHT
                r_upper.append(rab)
                n_upper.append(weight)
        return classes, r_upper, n_upper

    def coupling_inputs(self, x) -> tuple[list, np.ndarray, np.ndarray]:
        """The classes, and the pairwise probabilities and weights, that ``predict_proba_one(x)``
        couples: what each pair's calibrator says for this score dict, and how much it counts.

        Parameters
        ----------
        x : dict
            Per-class scores, as for :meth:`predict_proba_one` (checked the same way).

        Returns
        -------
        classes : list
            The classes of the prediction, in its order (K of them).
        r : ndarray of shape (K, K)
            ``r[i, j]``: the pair (i, j)'s calibrated P(class i | class i or j) at the event's
            pairwise log-odds, within the add-one bounds of the pair's window, or the model's own
            ``sigmoid(s_i - s_j)`` for a pair that has learned nothing; ``r[j, i] = 1 - r[i, j]``.
            A pair of a class not seen yet (scored in ``x`` only) and a labelled class is the
            labelled class's ghost (``ghosts_``), as the pair would be with the classes fixed.
        n : ndarray of shape (K, K)
            ``n[i, j] = n[j, i]``: the pair's ``window_weight``, or ``UNSEEN_PAIR_WEIGHT`` for a
            pair that has learned nothing. The diagonals of ``r`` and ``n`` are 0.

        Examples
        --------
        >>> from streamcal import pairwise_couple
        >>> from streamcal.multiclass import PairwiseCouplingCalibrator
        >>> cal = PairwiseCouplingCalibrator()
        >>> for _ in range(3):
        ...     cal.learn_one({0: 0.6, 1: 0.4}, 0)
        >>> x = {0: 0.5, 1: 0.2, 2: 0.3}
        >>> classes, r, n = cal.coupling_inputs(x)
        >>> print(classes, n[0, 1], n[0, 2], n[1, 2])  # (0, 2): class 0's events against class 2 absent
        [0, 1, 2] 3.0 3.0 1e-06
        >>> p = pairwise_couple(r, n, method=cal.method, tol=cal.tol, max_iter=cal.max_iter)
        >>> bool(abs(p - list(cal.predict_proba_one(x).values())).max() < 1e-7)
        True
        """
        with self._lock:
            classes, r_upper, n_upper = self._pair_inputs(x)
        k = len(classes)
        iu, ju = np.triu_indices(k, 1)
        r = np.zeros((k, k))
        n = np.zeros((k, k))
        r_up = np.array(r_upper)
        r[iu, ju] = r_up
        r[ju, iu] = 1.0 - r_up
        n[iu, ju] = n[ju, iu] = n_upper
        return classes, r, n

    # -- the river face in one kernel call per event ----------------------------------------
    # Over PAVCalibrator pairs (as the array face's pair loop: :meth:`_fused_pav_pairs`), an event
    # that scores known classes only runs through every pair and the coupling in one compiled call
    # (``_one_call.pairs_predict`` / ``pairs_learn``) on the pairs' packed states, addressed by a
    # small array made once per set of pairs (``_river_pairs``, rebuilt whenever a pair's
    # calibrator is another object; a pair's new buffer is bound in place). The kernels give the bits of the per-pair
    # calls they replace.

    _UNSAVED = (*_ScoreDictCalibrator._UNSAVED, "_river_pairs")
    # the bound kernels (a ``_RiverCall``) live in the instance's dict once bound; this default lets
    # the common event read ``self._river_pairs`` (an attribute read) rather than call ``__dict__.get``
    _river_pairs = None

    def _river_states(self, classes: list, params) -> _RiverCall | None:
        """The one-call kernels' bound arguments over the pairs of ``classes`` (see
        :class:`_RiverCall`), or None where they do not apply."""
        cache = self.__dict__.get("_river_pairs")
        models = self._models
        # still valid while the parameters, the classes and the pairs' calibrators are the same
        # objects (the register only adds pairs, or removes those a refused event added; a rolled
        # back array call puts another dict in place); a calibrator refitted, merged or loaded
        # holds a new state buffer, bound in place
        if cache is not None and cache.same_pairs(params, classes, models):
            if cache.predict is None:  # remembered until the parameters or the pairs change
                return None
            # no buffer packed anywhere since the last look, or each pair's still the bound one
            serial = PACK_SERIAL[0]
            if cache.serial == serial:
                return cache
            if cache.buffers_unchanged(cache.pairs, cache.buffers) or cache.hold_again():
                cache.serial = serial
                return cache
        if params.fixed is None and _ghosts.missing_pairs_stand_in(_ghosts.held(self), classes, models):
            self._river_pairs = _RiverCall(params, classes, models)  # a ghost stands in: per pair
            return None
        ghosts = _ghosts.kept(self, params)
        if cache is not None and cache.predict is not None and cache.bind_added_pairs(params, classes, models, ghosts):
            return cache
        if not _config.is_compiled():
            return None
        if not self._fused_pav_pairs():
            self._river_pairs = _RiverCall(params, classes, models)
            return None
        serial = PACK_SERIAL[0]  # read before the buffers: a buffer packed meanwhile changes it
        pair_models = _bound_models(classes, models, ghosts)
        buffers = [None if model is None else model.packed_state() for model in pair_models]
        if any(model is not None and buffer is None for model, buffer in zip(pair_models, buffers, strict=True)):
            self._river_pairs = None
            return None
        method = 0 if self.method == "ht" else 1
        river = _RiverCall(params, classes, models, pair_models, buffers, self.scores == "proba")
        river.bind(method, float(self.tol), int(self.max_iter))
        river.serial = serial
        checked = self.__dict__.get("_checked")
        if checked is not None and checked[1] is params:
            river.before = checked[0]
            # the in-line check's common case: nothing but the register and the buffers to compare
            river.plain = river.fixed and self.calibrator is None
            river.free = river.plain and _GIL
        self._river_pairs = river
        if river.before is not None and not self._params_unchanged(river.before):
            self.__dict__.pop("_river_pairs", None)  # a parameter replaced meanwhile: bound again
            return None
        return river

    def _river_current(self, river: _RiverCall) -> bool:
        """Whether the bound one-call kernels of ``river`` (the register and the buffers already
        compared by the caller; a parameter replaced unbinds them: ``__setattr__``) still apply
        where ``river.plain`` does not say so at once: a prototype's window, buckets and score
        key the same objects, the learned classes those bound."""
        before = river.before
        if river.fast_predict is None or before is None:
            return False
        calibrator = self.calibrator
        if calibrator is not None and not _prototype_unchanged(calibrator, before):
            return False
        return river.fixed or river.classes == self._classes

    def _learn_in_one_call(self, x, y, w: float, params, s: dict | None = None) -> bool:
        """Learn an event in one kernel call (no time, a checked float weight ``w``), if ``y`` is
        a known class whose pairs all have their calibrators (their state buffers the cached
        ones), and ``x`` a dict of floats for known classes within the range of ``scores`` (or,
        given ``s``, ``x``'s checked log-scores, of known classes); False, having changed
        nothing, otherwise (the full checks then judge the event)."""
        river = self.__dict__.get("_river_pairs")
        if river is None or river.predict is None:
            return False
        known = self._classes if params.fixed is None else params.fixed
        if len(known) < 2 or not river.same_pairs(params, known, self._models):
            return False
        try:
            c = river.column.get(y)
        except TypeError:  # unhashable: the full check names it
            return False
        held = None if c is None else river.holding[c]
        if held is None or not (river.serial == PACK_SERIAL[0] or river.buffers_unchanged(*held)):
            return False
        if s is None:
            read = river.scores_of(x)
            if read is None:
                return False
            scores, raw = read
        elif params.fixed is None and any(c not in river.column for c in s):
            return False
        else:
            scores, raw = tuple([s.get(c, -math.inf) for c in river.classes]), False
        return self._lock.unmarked(river, river.learn, river.addresses, river.frame, scores, raw, c, w) > 0

    def _predict_in_one_call(self, x) -> dict | None:
        """:meth:`predict_proba_one` in one kernel call, if every class scored in ``x`` is known
        and there are at least two; None otherwise."""
        params = self._checked_params()
        known = self._classes if params.fixed is None else params.fixed
        if len(known) < 2:
            return None
        river = self._river_states(known, params)
        if river is None:
            return None
        read = river.scores_of(x)
        if read is None:  # not the common case: the full checks judge (and raise), then read
            s = self._check_x(x, params)
            if params.fixed is None and any(c not in river.column for c in s):
                return None
            scores, raw = tuple([s.get(c, -math.inf) for c in river.classes]), False
        else:
            scores, raw = read
        out = self._lock.unmarked(river, river.predict, river.addresses, river.frame, scores, raw)
        if out[0] <= 0.0:
            if out[0] == 0.0:  # a raw score out of range: the full checks name it
                self._check_x(x, params)
            return None
        return river.result(out[1:])

    def predict_proba_one(self, x) -> dict:
        """Calibrated distribution over the known classes and any new class scored in ``x``."""
        # the common event first, without the lock where the bound kernels plainly apply (see the
        # notes above ``_FrameMarkingLock``): a dict of float scores for every known class (a score
        # out of range: the general path names it)
        river = self._river_pairs
        if river is not None and river.free and river.serial == PACK_SERIAL[0]:
            out = river.fast_predict(x)
            if out is not None:
                return out
        lock = self._lock
        lock.acquire()  # explicitly: half the cost of a `with` statement per call
        try:
            # the common event again, under the lock
            river = self.__dict__.get("_river_pairs")
            if (
                river is not None
                and river.models is self._models
                and river.n_models == len(river.models)
                and river.serial == PACK_SERIAL[0]
                and (river.plain or self._river_current(river))
            ):
                out = lock.unmarked(river, river.fast_predict, x)
                if out is not None:
                    return out
            fast = self._predict_in_one_call(x)
            if fast is not None:
                return fast
            return self._predict_per_pair(x)
        finally:
            lock.release()

    def _predict_per_pair(self, x) -> dict:
        """:meth:`predict_proba_one` through each pair's own calls (any binary calibrator)."""
        classes, r_upper, n_upper = self._pair_inputs(x)
        k = len(classes)
        if k <= 2:
            return {classes[0]: r_upper[0], classes[1]: 1.0 - r_upper[0]} if k == 2 else dict.fromkeys(classes, 1.0)
        p = np.empty((1, k))
        r = np.array(r_upper).reshape(-1, 1)
        n = np.array(n_upper).reshape(-1, 1)
        if self.method == "ht":
            _k.ht_couple_upper(r, n, float(self.tol), int(self.max_iter), NEWTON_AFTER_SWEEPS, p)
        else:
            _k.wlw_couple_upper(r, n, p)
        return dict(zip(classes, p[0].tolist(), strict=True))

    def _run_events(self, arr, logs, y, predict, learn, w, t, weights_given, times_given) -> np.ndarray:
        """The array faces' work: each pair's binary calibrator runs its own events (predicting
        at every ``predict`` event, learning those of its two classes) in one call of its array
        face; then all predicted events are coupled in one kernel call."""
        classes = list(self.classes)
        m, k = arr.shape
        out = np.full((m, k), np.nan)
        n_pred = int(np.count_nonzero(predict))
        if k == 1:
            out[predict] = 1.0  # one class has no pair: nothing to learn
            return out
        n_pairs = k * (k - 1) // 2
        if self._fused_pav_pairs():
            return self._run_fused(classes, logs, y, predict, learn, w, t, out)
        r_up = np.empty((n_pairs, n_pred))
        n_up = np.empty((n_pairs, n_pred))
        d = np.empty(m)
        unseen = np.empty(m)
        q = 0
        for a in range(k):
            for b in range(a + 1, k):
                _k.pair_log_odds(logs, a, b, MAX_LOG_ODDS, d)
                unseen[:] = d
                _k.sigmoid_inplace(unseen)
                mine = learn & ((y == a) | (y == b))
                pair = (classes[a], classes[b])
                model = self._models.get(pair)
                if model is None and mine.any():
                    model = self._models[pair] = self._new_binary()
                if model is None:
                    proba, weight = np.full(n_pred, 0.5), np.zeros(n_pred)
                else:
                    values = unseen if self._takes_probabilities(model) else d
                    proba, weight = self._binary_outputs(
                        model, values, y == a, predict, mine, w, t, weights_given, times_given
                    )
                _k.bound_pair_probabilities(
                    proba, weight, np.ascontiguousarray(unseen[predict]), UNSEEN_PAIR_WEIGHT, r_up[q], n_up[q]
                )
                q += 1
        out[predict] = self._couple_upper(r_up, n_up, k)
        return out

    def _fused_pav_pairs(self) -> bool:
        """Whether each pair runs its events in one compiled loop on its state
        (:func:`streamcal._kernels.pairwise_pav.pair_pav_run`; on the river face, one kernel call
        per event for all pairs): the process runs compiled kernels, and every pair is a
        ``PAVCalibrator`` (the default) whose window neither decays nor keeps times and whose
        bucket edges need no warm-up. Otherwise each pair runs its own faces (the same bits)."""
        if not _config.is_compiled():
            return False
        from streamcal import PAVCalibrator

        params = self._checked_params()
        window = params.window
        if window.decays or window.uses_times or window.grows_ring or not params.takes_any_score:
            return False
        prototype = self.calibrator
        if prototype is not None and type(prototype) is not PAVCalibrator:
            return False
        return all(type(model) is PAVCalibrator and _takes_any_score(model) for model in self._models.values())

    def _run_fused(self, classes, logs, y, predict, learn, w, t, out) -> np.ndarray:
        """:meth:`_run_events` with each pair's events in one kernel call on its PAV state
        (:func:`streamcal._kernels.pairwise_pav.pair_pav_run`), then one coupling call."""
        from streamcal._kernels import pairwise_pav as _pp

        k = logs.shape[1]
        n_pred = int(np.count_nonzero(predict))
        learned = np.zeros(k, dtype=bool)
        learned[y[learn]] = True
        ops = predict.astype(np.int64) * 2 + learn
        r_up = np.empty((k * (k - 1) // 2, n_pred))
        n_up = np.empty_like(r_up)
        no_state = np.empty(0)
        probabilities = self._checked_params().probabilities
        q = 0
        for a in range(k):
            for b in range(a + 1, k):
                pair = (classes[a], classes[b])
                model = self._models.get(pair)
                if model is None and (learned[a] or learned[b]):
                    model = self._models[pair] = self._new_binary()
                events = (logs, a, b, y, ops, w, t, probabilities, MAX_LOG_ODDS, UNSEEN_PAIR_WEIGHT, r_up[q], n_up[q])
                if model is None:
                    _pp.pair_pav_run(no_state, *events)
                else:
                    with model.holding_packed_state() as packed:
                        _pp.pair_pav_run(packed, *events)
                q += 1
        out[predict] = self._couple_upper(r_up, n_up, k)
        return out

    def _couple_upper(self, r_up: np.ndarray, n_up: np.ndarray, k: int) -> np.ndarray:
        return _couple_upper(r_up, n_up, k, self.method, float(self.tol), int(self.max_iter))

    @classmethod
    def _unit_test_params(cls):
        from streamcal import PAVCalibrator
        from streamcal.windows import CountWindow

        yield {}
        yield {"method": "wlw", "calibrator": PAVCalibrator(window=CountWindow(100))}


class OneVsRestCalibrator(_ovr_merge.OvRMerging, _ScoreDictCalibrator):
    """One-vs-rest calibration, then normalisation: the baseline for pairwise coupling.

    For every class c a binary streaming calibrator learns P(y = c) from *every* event, as a
    function of the class's own log-odds (``logit(p_c)`` for probabilities, the logit itself for
    logits). A prediction calibrates each class separately and divides by the sum. A class whose
    calibrator has learned nothing yet uses the model's own probability (``sigmoid`` of its logit).
    As for pairs, each class's calibrated probability is kept within the add-one bounds of its
    window, ``[1/(T+2), (T+1)/(T+2)]``. A class first seen mid-stream gets the calibrator it would
    have had with the classes fixed from the start (every earlier event learned as a class absent
    from it), where the binary calibrator takes every score it is given (the default). Calibrators
    of parts of a stream merge (:func:`streamcal.merging.merge`) class by class into the one that
    learned the parts in order, over the classes of all of them.

    Parameters
    ----------
    calibrator
        A binary streaming calibrator, cloned for every class. ``None``:
        ``streamcal.PAVCalibrator()``. Any window works, as for
        :class:`PairwiseCouplingCalibrator`.
    scores
        ``"proba"`` or ``"logit"``, as for :class:`PairwiseCouplingCalibrator`.
    classes
        The fixed set of classes, or ``None`` to learn them from the stream.

    Examples
    --------
    >>> import numpy as np
    >>> from river import metrics
    >>> from streamcal.multiclass import OneVsRestCalibrator
    >>> rng = np.random.default_rng(0)
    >>> cal = OneVsRestCalibrator()
    >>> raw, calibrated = metrics.CrossEntropy(), metrics.CrossEntropy()
    >>> for t in range(3000):
    ...     p = rng.dirichlet([1.0, 1.0, 1.0])
    ...     y = int(rng.choice(3, p=p))
    ...     q = p**2 / (p**2).sum()
    ...     x = {c: float(q[c]) for c in range(3)}
    ...     if t >= 1000:
    ...         raw.update(y, x)
    ...         calibrated.update(y, cal.predict_proba_one(x))
    ...     cal.learn_one(x, y)
    >>> print(f"{raw.get():.3f} -> {calibrated.get():.3f}")
    0.980 -> 0.861
    """

    @classmethod
    def _unit_test_params(cls):
        from streamcal import PAVCalibrator
        from streamcal.windows import CountWindow

        yield {}
        yield {"calibrator": PAVCalibrator(window=CountWindow(100))}

    @property
    def calibrators_(self) -> dict:
        """class -> its binary calibrator."""
        with self._lock:
            return dict(self._models)

    @property
    def absent_(self):
        """The binary calibrator that learns every event as a class absent from it (its score at
        the clip, label False): a class that joins gets a copy. None with fixed ``classes``, before
        the first event, or with a binary calibrator that may refuse a score.

        Examples
        --------
        >>> from streamcal.multiclass import OneVsRestCalibrator
        >>> cal = OneVsRestCalibrator()
        >>> cal.learn_one({0: 0.6, 1: 0.4}, 0)
        >>> cal.absent_.n_learned, OneVsRestCalibrator(classes=(0, 1)).absent_
        (1, None)
        """
        with self._lock:
            return None if self.classes is not None else self.__dict__.get("_absent")

    def _class_log_odds(self, s: dict, c) -> float:
        v = s.get(c, -math.inf)
        if self.scores == "proba":
            if v == -math.inf:
                return -MAX_LOG_ODDS
            p = math.exp(v)
            d = v - math.log1p(-p) if p < 1.0 else math.inf
        else:
            d = v
        return _clip(d)

    def learn_one(self, x, y, w: float = 1.0, t: float | None = None) -> None:
        """Learn one event: every known class c sees its own log-odds with label ``y == c``.

        ``w`` is the event's weight and ``t`` its time (required when the binary calibrator has a
        time window, and then never going backwards), both given to every class's calibrator.
        """
        with self._lock:
            params = self._checked_params()
            s = self._check_x(x, params)
            self._check_y(y, params)
            w, t = self._check_event(w, t, params)
            # without fixed classes, ``_absent`` learns every event as a class absent from it (its
            # score at the clip, label False): a class that joins gets a copy, the calibrator it would
            # have had had it been known from the start (where the binary calibrator takes any score:
            # else a fresh one, which has learned only the events since the class joined)
            keeps_absent = self.classes is None and params.takes_any_score
            absent = self.__dict__.get("_absent") if keeps_absent else None
            if absent is None and keeps_absent:
                absent = self._new_binary()
            with self._registering([*s, y]) as new_model:
                events = []
                for c in self._known():
                    model = self._models.get(c)
                    if model is None:
                        model = new_model(c, None if absent is None else copy.deepcopy(absent))
                    d = self._class_log_odds(s, c)
                    events.append((model, {params.score_key: _sigmoid(d) if params.probabilities else d}, c == y))
                if absent is not None:
                    d = self._class_log_odds({}, None)
                    events.append((absent, {params.score_key: _sigmoid(d) if params.probabilities else d}, False))
                _learn_events(events, w, t)
            if absent is not None:
                self._absent = absent
            self._learned_time(t, params)

    def _run_events(self, arr, logs, y, predict, learn, w, t, weights_given, times_given) -> np.ndarray:
        """The array faces' work: each class's binary calibrator runs every event (predicting at
        the ``predict`` events, learning the ``learn`` ones) in one call of its array face; then
        the predicted rows are normalised."""
        classes = list(self.classes)
        m, k = arr.shape
        out = np.full((m, k), np.nan)
        n_pred = int(np.count_nonzero(predict))
        if learn.any():
            for name in classes:
                if name not in self._models:
                    self._models[name] = self._new_binary()
        q = np.empty((k, n_pred))
        unused = np.empty(n_pred)
        d = np.empty(m)
        unseen = np.empty(m)
        for c, name in enumerate(classes):
            _k.class_scores(logs, c, MAX_LOG_ODDS, self.scores == "proba", False, d)
            unseen[:] = d
            _k.sigmoid_inplace(unseen)
            model = self._models.get(name)
            if model is None:
                proba, weight = np.full(n_pred, 0.5), np.zeros(n_pred)
            else:
                values = unseen if self._takes_probabilities(model) else d
                proba, weight = self._binary_outputs(
                    model, values, y == c, predict, learn, w, t, weights_given, times_given
                )
            _k.bound_pair_probabilities(proba, weight, np.ascontiguousarray(unseen[predict]), 0.0, q[c], unused)
        total = np.zeros(n_pred)
        for c in range(k):  # in order, as the river face adds them
            total += q[c]
        p = np.empty((n_pred, k))
        positive = total > 0.0
        for c in range(k):
            p[:, c] = np.where(positive, q[c] / np.where(positive, total, 1.0), 1.0 / k)
        out[predict] = p
        return out

    def predict_proba_one(self, x) -> dict:
        """Calibrated one-vs-rest probabilities, normalised to sum to 1."""
        with self._lock:
            params = self._checked_params()
            s = self._check_x(x, params)
            classes = self._output_classes(s)
            if not classes:
                return {}
            q = []
            for c in classes:
                d = self._class_log_odds(s, c)
                model = self._models.get(c)
                weight = 0.0 if model is None else float(model.window_weight)
                if weight > 0.0:
                    xd = {params.score_key: _sigmoid(d) if params.probabilities else d}
                    v = float(model.predict_proba_one(xd).get(True, 0.5))
                    v = _within_add_one_bounds(v, weight)
                else:
                    v = _sigmoid(d)
                q.append(v)
            total = 0.0
            for v in q:  # in order (``sum`` may compensate its rounding)
                total += v
            if total > 0.0:
                return {c: v / total for c, v in zip(classes, q, strict=True)}
            return {c: 1.0 / len(classes) for c in classes}
