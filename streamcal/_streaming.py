"""The base of every streaming binary calibrator: a windowed score histogram with two faces.

:class:`StreamingCalibrator` holds everything streaming calibrators share (docs/design.md, sections 1 and 6):
parameters (``buckets=``, ``window=``, ``score_key=``, ``llr_pseudo_count=``), the windowed
histogram state, input validation before any mutation, the river face (``learn_one``,
``predict_proba_one``, ``predict_one``, ``predict_llr_one``) and the array face (``update``,
``predict_proba``, ``predict_llr``, ``prequential``, ``process``), sample weights, event times
and ``window_weight``.

The calibration map is a subclass's: :class:`streamcal._refit.RefitCalibrator` refits a
parametric or smooth map from the histogram (I-spline, GEV, Platt); streaming PAV
(:class:`streamcal.isotonic.streaming.PAVCalibrator`) keeps its block stack in fused numba
kernels. Both implement the map methods declared at the end of the class. During a quantile
warm-up (no edges, no map yet) predictions are the finite prior of the buffered events
(:mod:`streamcal._prior`). See ``docs/architecture.md``.

Thread safety: every public method holds the calibrator's lock (``streamcal._locking``), so
concurrent calls behave as some serial order of them (``docs/architecture.md``, "Thread safety");
the lock is made in ``__init__`` and on restoring, never in ``_reset``, and is not state.
"""

from __future__ import annotations

import inspect
import numbers

import numpy as np
from river import base

from streamcal._calibrator_state import CalibratorState
from streamcal._histogram import WindowedHistogram
from streamcal._kernels import histogram as _h
from streamcal._locking import LockedState
from streamcal._operations import OP_LEARN, OP_PREDICT, OP_PREQUENTIAL, OperationLoop
from streamcal._validation import (
    as_1d_float,
    as_binary_label,
    as_binary_labels,
    bad_score_message,
    check_event_time,
    check_event_weight,
    check_learn_arrays,
    check_same_length,
    check_scalar,
    keywords_named,
    score_from_dict,
)
from streamcal.buckets import Buckets, as_buckets, bucket_of_score
from streamcal.merging import Mergeable
from streamcal.persist import Persistable
from streamcal.windows import Window, as_window

__all__ = ["StreamingCalibrator"]

_MAX_WEIGHT = _h.MAX_WEIGHT  # the largest weight of one event (docs/limits.md)

#: Range of ``llr_pseudo_count`` (docs/limits.md).
MIN_PSEUDO_COUNT = 1e-100
MAX_PSEUDO_COUNT = 1e100


def _operation_codes(learn: np.ndarray) -> np.ndarray:
    """``OP_LEARN`` where ``learn`` (a bool array) is True, else ``OP_PREDICT``, as int64: one
    subtraction, since ``OP_LEARN == OP_PREDICT - 1`` (cheaper than ``np.where`` over the two codes,
    on every call of the array face)."""
    return np.subtract(OP_PREDICT, learn, dtype=np.int64)


@keywords_named
class StreamingCalibrator(CalibratorState, OperationLoop, LockedState, Persistable, Mergeable, base.Classifier):
    """Base class of the streaming binary calibrators (not used directly).

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); ``None`` means ``LogitGrid()``: 1024
        logit-spaced buckets for probability inputs. Shorthands (:func:`streamcal.buckets.as_buckets`):
        an int ``n`` is ``LogitGrid(n)``; ``"uniform:100"``, ``"quantile:256"``, ``"logit:512"``
        name the strategy.
    window
        Window strategy (:mod:`streamcal.windows`); ``None`` means ``Unbounded()``. Shorthands
        (:func:`streamcal.windows.as_window`): an int ``n`` (or ``"100000"``) is
        ``CountWindow(n)``; a duration such as ``"7d"``, ``"12h"``, ``"30m"``, ``"3600s"`` is
        ``TimeWindow(seconds)``. The value is stored as given; the strategy derives from it.
    score_key
        Key of the score in the ``x`` dicts of the river face; ``None``: ``x`` must hold
        exactly one value, the score.
    llr_pseudo_count
        Weight ``c > 0`` of the pseudo-positive and pseudo-negative that keep the LLR finite:
        the prior becomes ``(T1 + c) / (T + 2c)``.
    """

    def __init__(
        self,
        buckets: Buckets | int | str | None = None,
        window: Window | int | str | None = None,
        score_key: str | None = None,
        llr_pseudo_count: float = 1.0,
    ):
        self.buckets = buckets
        self.window = window
        self.score_key = score_key
        self.llr_pseudo_count = llr_pseudo_count
        self._init_lock()  # before the state: ``_reset`` replaces the state, never the lock
        self._reset()

    # ------------------------------------------------------------------ parameters and state
    @property
    def _multiclass(self) -> bool:
        return False

    @classmethod
    def _unit_test_params(cls):
        # river's checks feed the Phishing dataset (9 features); the calibrator reads one of
        # them, a probability-valued feature, as its score.
        yield {"score_key": "is_popular"}

    def _unit_test_skips(self):
        return {
            # A calibrator's input is exactly one score, read by `score_key`: features that
            # appear later or vanish are not inputs it could use or miss, and removing the
            # score itself is an error (a KeyError naming the key), not a degraded input.
            "check_emerging_features",
            "check_disappearing_features",
            "check_radically_disappearing_features",
        }

    def _reset(self) -> None:
        buckets = as_buckets(self.buckets)  # the parameters as given; the strategies derive from them
        window = as_window(self.window)
        # the pseudo-counts keep the LLR finite for every accepted weight within these bounds
        check_scalar(self.llr_pseudo_count, "llr_pseudo_count", low=MIN_PSEUDO_COUNT, high=MAX_PSEUDO_COUNT)
        check_scalar(buckets.warmup, "warmup", numbers.Integral, low=0)
        if buckets.warmup and hasattr(buckets, "check_params"):
            buckets.check_params()  # before any event is buffered: the warm-up's end must not fail
        self._hist = WindowedHistogram(window, buckets)
        # the score domain, read by the faces' inline checks (and saved under these names)
        layout = self._hist.layout
        self._score_low, self._score_high = layout.score_low, layout.score_high
        self._bucket_kind = layout.kind
        self._identity = layout.probability_inputs
        if self._hist.built:
            self._init_map_state()

    def _build(self, edges: np.ndarray, centres: np.ndarray) -> None:
        """Build the histogram's layout for these edges and centres (the warm-up is over), then the map."""
        self._hist.build(edges, centres)
        self._init_map_state()

    @property
    def n_buckets(self) -> int | None:
        """Number of buckets (``None`` while quantile edges are still warming up)."""
        with self._lock:
            return self._hist.n_buckets if self._hist.built else None

    @property
    def edges(self) -> np.ndarray | None:
        """The ``B + 1`` bucket edges (``None`` while quantile edges are still warming up)."""
        with self._lock:
            return self._hist.layout.edges.copy() if self._hist.built else None

    @property
    def centres(self) -> np.ndarray | None:
        """The ``B`` bucket centres (``None`` while quantile edges are still warming up)."""
        with self._lock:
            return self._hist.layout.centres.copy() if self._hist.built else None

    @property
    def window_histogram(self) -> WindowedHistogram:
        """The windowed histogram this calibrator learns (:class:`streamcal._histogram.WindowedHistogram`),
        for inspection: its ``row()``, ``ring()``, ``layout`` and counters. Read it, never change it."""
        return self._hist

    def histogram(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(centres, pos, neg)``: the window's weight per bucket, in real units (copies).

        With a decay window the weights are the decayed ones as of the last learned event.
        """
        with self._lock:
            if not self._hist.built:
                msg = "the bucket edges are not known yet: the quantile warm-up has not completed."
                raise RuntimeError(msg)
            pos, neg = self._hist.real_weights()
            return self._hist.layout.centres.copy(), pos, neg

    @property
    def window_weight(self) -> float:
        """Total weight currently in the window (decayed weights for a decay window).

        During a quantile warm-up: the total weight of the buffered events.
        """
        with self._lock:
            return self._hist.window_total()

    @property
    def n_learned(self) -> int:
        """Number of events learned so far."""
        with self._lock:
            return self._hist.n_learned

    # ------------------------------------------------------------------ validation
    def _score_of(self, x) -> float:
        if type(x) is dict:  # fast path: a float score in range, read without builtin calls
            key = self.score_key
            if key is None:
                if len(x) == 1:
                    for s in x.values():
                        if type(s) is float and self._score_low <= s <= self._score_high:
                            return s
            elif key in x:
                s = x[key]
                if type(s) is float and self._score_low <= s <= self._score_high:
                    return s
        return score_from_dict(x, self.score_key, self._score_low, self._score_high, self._bucket_kind)

    def _bad_score_message(self, s: float, name: str, where: str, source=None) -> str:
        """The error of a score outside the valid range (``where``: " at position i" or "")."""
        return bad_score_message(s, name, where, self._score_low, self._score_high, self._bucket_kind, source)

    def _check_scores(self, scores) -> np.ndarray:
        """The array face's score check: what ``_score_of`` accepts one by one, as an array."""
        s = as_1d_float(scores, "scores", allow_empty=True)
        bad = ~((s >= self._score_low) & (s <= self._score_high))  # the range is finite: also ±inf, NaN
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(self._bad_score_message(float(s[i]), "scores", f" at position {i}", scores))
        return s

    def _last_time(self) -> float:
        return self._hist.last_time()

    def _check_one(self, y, w, t) -> tuple[float, float, float]:
        if y is True or y is False:
            label = 1.0 if y else 0.0
        else:
            label = 1.0 if as_binary_label(y, "y") else 0.0
        if type(w) is not float or not (0.0 <= w <= _MAX_WEIGHT):
            w = check_event_weight(w, _MAX_WEIGHT)
        if t is None:
            if self._hist.uses_times:
                msg = f"{self._window_name()} needs event times: pass `t=` to learn_one."
                raise ValueError(msg)
            t = 0.0
        else:
            t = check_event_time(t, self._hist.last_time() if self._hist.uses_times else None)
        return label, w, t

    def _window_name(self) -> str:
        return type(as_window(self.window)).__name__

    def _check_learn_arrays(
        self, n: int, labels, weights, times, learn: np.ndarray | None, weights_name: str = "weights"
    ):
        """Validate labels, weights and times at the learn positions; return full-length arrays
        (:func:`streamcal._validation.check_learn_arrays` with this calibrator's window)."""
        hist = self._hist
        return check_learn_arrays(n, labels, weights, times, learn, max_weight=_MAX_WEIGHT, needs_times=hist.uses_times,
                                  last_time=self._last_time(), window_name=self._window_name(),
                                  weights_name=weights_name)

    # ------------------------------------------------------------------ river face
    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        """Learn one labelled event: ``x`` holds the score, ``y`` the label.

        ``w`` is the sample weight; ``t`` the event time (required by time windows and
        time-based decay, and then never going backwards).
        """
        # the per-event methods acquire and release explicitly: half the cost of `with` per call
        lock = self._lock
        lock.acquire()
        try:
            self._learn_one_held(x, y, w, t)
        finally:
            lock.release()

    def _learn_one_held(self, x: dict, y, w: float, t: float | None) -> None:
        """:meth:`learn_one`'s work, the caller holding the lock (a river face's own section takes it)."""
        s = self._score_of(x)
        label, w, t = self._check_one(y, w, t)
        hist = self._hist
        if not hist.built:  # the quantile warm-up
            self._warm_add(s, label, w, t)
            return
        if hist.grows_ring:
            self._ensure_ring(1)
        self._learn_bucket(bucket_of_score(hist.layout.cuts_list, s), s, label, w, t)

    def predict_proba_one(self, x: dict) -> dict:
        """``{False: 1 - p, True: p}`` with ``p`` the calibrated probability of the score."""
        lock = self._lock
        lock.acquire()
        try:
            p = self._proba_one_held(x)
        finally:
            lock.release()
        return {False: 1.0 - p, True: p}

    def _proba_one_held(self, x: dict) -> float:
        """:meth:`predict_proba_one`'s probability, the caller holding the lock."""
        s = self._score_of(x)
        return self._warm_proba() if not self._hist.built else self._proba_of(s)

    def predict_one(self, x: dict) -> bool:
        """True when the calibrated probability exceeds 0.5."""
        lock = self._lock
        lock.acquire()
        try:
            p = self._proba_one_held(x)
        finally:
            lock.release()
        return p > 0.5

    def predict_llr_one(self, x: dict) -> float:
        """Calibrated log-likelihood ratio (natural log) of the score, finite."""
        lock = self._lock
        lock.acquire()
        try:
            s = self._score_of(x)
            return 0.0 if not self._hist.built else self._llr_of(s)
        finally:
            lock.release()

    # ------------------------------------------------------------------ array face
    def update(self, scores, labels, *, weights=None, times=None):
        """Learn labelled events in order; returns ``self``.

        ``scores``, ``labels``, ``weights`` and ``times`` may each be a 1-d array, a list, an
        ``(n, 1)`` array, a pandas or polars Series or a one-column DataFrame.
        """
        with self._lock:
            self._learn(scores, labels, weights, times, "weights")
        return self

    def _learn(self, scores, labels, weights, times, weights_name: str) -> None:
        s, b = self._check_scores_and_buckets(scores)
        y, w, t = self._check_learn_arrays(s.size, labels, weights, times, None, weights_name)
        self._run(OP_LEARN, s, y, w, t, b)

    # attributes that are not parameters and that ``fit`` keeps (with the parameters) when it
    # replaces the state, for attributes that belong to the object rather than to its state
    _FIT_KEEPS: tuple[str, ...] = ()

    def fit(self, scores, labels, sample_weight=None, *, times=None):
        """Replace the state by these labelled events, as scikit-learn's ``fit`` does; returns ``self``.

        The result is, bit for bit, a fresh calibrator with the same parameters that then
        ``update``-d these events in order: later ``update`` / ``learn_one`` calls continue from
        it. ``sample_weight`` are the events' weights and ``times`` their times (required by time
        windows and time-based decay). The input is checked before anything changes: if it is
        rejected, the calibrator is left as it was.

        Examples
        --------
        >>> from streamcal import PAVCalibrator
        >>> cal = PAVCalibrator().fit([0.2, 0.4, 0.6, 0.8], [0, 0, 1, 1])
        >>> cal.predict_proba([0.3, 0.7]).tolist(), cal.n_learned  # never exactly 0 or 1: the score prior
        ([0.3, 0.7], 4)
        """
        with self._lock:
            fresh = self.clone()
            fresh._learn(scores, labels, sample_weight, times, "sample_weight")
            # the parameter objects as the caller gave them, and this object's own lock, which
            # other threads may be waiting on
            names = [*inspect.signature(type(self).__init__).parameters, *self._FIT_KEEPS, "_lock"]
            kept = {name: self.__dict__[name] for name in names if name in self.__dict__}
            self.__dict__.clear()
            self.__dict__.update(fresh.__dict__)
            self.__dict__.update(kept)
        return self

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probability of each score with the current state."""
        with self._lock:
            return self._predict_both(*self._check_scores_and_buckets(scores))[0]

    def predict_llr(self, scores) -> np.ndarray:
        """Calibrated (finite) LLR of each score with the current state."""
        with self._lock:
            return self._predict_both(*self._check_scores_and_buckets(scores))[1]

    def prequential(self, scores, labels, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Predict each event with the state before its label, then learn it: ``(proba, llr)``.

        Equal, element for element, to a loop of ``predict_proba_one`` / ``predict_llr_one``
        then ``learn_one`` (the smooth maps at their exact default: within 1e-9 while the score
        prior holds weight, where the two refit along different paths).
        """
        with self._lock:
            s, b = self._check_scores_and_buckets(scores)
            y, w, t = self._check_learn_arrays(s.size, labels, weights, times, None)
            return self._run(OP_PREQUENTIAL, s, y, w, t, b)

    def process(self, scores, labels, learn_mask, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Run an ordered sequence of operations: learn where ``learn_mask``, else predict.

        ``learn_mask[i]`` True learns (scores[i], labels[i], weights[i], times[i]); False
        predicts scores[i] with the current state (labels, weights and times there are
        ignored). Returns ``(proba, llr)``, NaN at the learn positions.
        """
        with self._lock:
            return self._run(*self._checked_process(scores, labels, learn_mask, weights, times))

    def _process_checked(self, scores, labels, learn, weights, times, out=None):
        """:meth:`process` on operations its caller has already checked as :meth:`process` checks
        them (the replay does): ``scores`` finite, ``learn`` a bool array, ``labels`` 0 or 1 and
        ``times`` (or None) finite and never going backwards at the learn positions, ``weights``
        (or None) finite and non-negative; all float64, 1-d, C-contiguous and of one length.

        What such a caller cannot know is still checked: each score against the buckets' range
        (in the pass that finds its bucket) and the weights against the largest weight of one
        event. Time windows, the quantile warm-up and anything these checks reject take
        :meth:`process`'s full checks (which then raise its errors). The outputs are those of
        :meth:`process` at the predict positions, bit for bit; with ``out``, a pair of float64
        arrays of the operations' length, they are written there, and the learn positions hold
        whatever ``out`` held. Returns ``(proba, llr)``.
        """
        with self._lock:
            hist = self._hist
            if hist.built and not hist.uses_times and (weights is None or not (weights > _MAX_WEIGHT).any()):
                b, bad = self._checked_buckets(scores)
                if bad < 0:
                    n = scores.size
                    ops = _operation_codes(learn)
                    w = np.ones(n) if weights is None else weights
                    t = np.zeros(n) if times is None else times
                    return self._run(ops, scores, labels, w, t, b, out)
            return self._run(*self._checked_process(scores, labels, learn, weights, times))

    def _checked_process(self, scores, labels, learn_mask, weights, times):
        """``process``'s inputs, checked: ``(ops, scores, labels, weights, times, buckets)``."""
        s, b = self._check_scores_and_buckets(scores)
        learn = as_binary_labels(learn_mask, "learn_mask", allow_empty=True).astype(bool)
        check_same_length(s.size, learn.size, "learn_mask")
        y, w, t = self._check_learn_arrays(s.size, labels, weights, times, learn)
        return _operation_codes(learn), s, y, w, t, b

    # ------------------------------------------------------------------ the map (a subclass's)
    # A calibrator's map reads the histogram. It is built empty with the histogram and rebuilt
    # after a merge; it learns one event's bucket (the river face) and runs operation sequences
    # (the array face). streamcal._refit.RefitCalibrator implements these for maps refitted from
    # the histogram; PAVCalibrator with its fused block-stack kernels.
    def _init_map_state(self) -> None:
        """Build the empty map (the edges are known)."""
        raise NotImplementedError

    def _learn_bucket(self, b: int, s: float, y: float, w: float, t: float) -> None:
        """Learn one checked event in bucket ``b`` (expiry, histogram and map)."""
        raise NotImplementedError

    def _proba_of(self, s: float) -> float:
        """The served probability of one checked score."""
        raise NotImplementedError

    def _llr_of(self, s: float) -> float:
        """The served LLR of one checked score."""
        raise NotImplementedError

    def _predict_arrays(self, b, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(proba, llr)`` of checked scores ``s`` (buckets ``b``, or None where not needed)."""
        raise NotImplementedError

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        """Run checked operations (an ``OP_*`` int for all, or an array), element for element
        what a loop of ``predict_proba_one`` / ``learn_one`` gives; write the predictions."""
        raise NotImplementedError

    def _rebuild_map_after_merge(self, other) -> None:
        """Rebuild the map from the histogram just merged with ``other``'s."""
        raise NotImplementedError

    def _check_loaded_map(self) -> None:
        """Check a restored map (under its saved names) against the restored histogram."""
        raise NotImplementedError

