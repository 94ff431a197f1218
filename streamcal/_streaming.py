"""The base of every streaming binary calibrator: a windowed score histogram with two faces.

:class:`StreamingCalibrator` holds everything streaming calibrators share (DESIGN §1, §6):
parameters (``buckets=``, ``window=``, ``score_key=``, ``llr_pseudo_count=``), the windowed
histogram state, input validation before any mutation, the river face (``learn_one``,
``predict_proba_one``, ``predict_one``, ``predict_llr_one``) and the array face (``update``,
``predict_proba``, ``predict_llr``, ``prequential``, ``process``), sample weights, event times
and ``window_weight``.

A calibrator that fits a parametric or smooth map from the histogram supplies two hooks:

- ``_refit_from_histogram(centres, pos, neg)``: fit the map to the bucket centres and the
  positive / negative weight per bucket (real units, copies; at least one weight is > 0);
- ``_predict_fitted(scores) -> proba``: the fitted map on an array of scores;

and optionally ``_predict_llr_fitted(scores, proba) -> llr`` (the default is
``logit(proba) - log((T1 + c) / (T0 + c))``, with ``proba`` clipped to the open interval).

Refit policy (``refit_every``, a constructor parameter of the subclass; ``None`` if absent):
``None`` refits lazily, when a prediction follows new labels; an integer ``k`` refits right
after every ``k``-th learned event, and predictions in between use the last fit. Either way
``prequential``/``process`` run exactly the same operations as a loop of ``predict_proba_one``
/ ``learn_one``, so the results are equal element for element. Before the first fit (or when
the window holds no weight) predictions are the score itself for probability inputs (bucket
strategies with ``probability_inputs``, such as the default logit grid) and 0.5 otherwise,
with LLR 0.

Streaming PAV (:class:`streamcal.isotonic.streaming.PAVCalibrator`) replaces the generic engine
methods (``_init_map_state``, ``_learn_bucket``, ``_proba_of``, ``_llr_of``, ``_run_ops``,
``_predict_arrays``) by fused numba kernels. See ``docs/architecture.md``.
"""

from __future__ import annotations

import itertools
import math
import numbers
from bisect import bisect_right

import numpy as np
from river import base

from streamcal._kernels import histogram as _h
from streamcal._validation import (
    _label_array,
    as_1d_float,
    as_binary_label,
    as_binary_labels,
    check_same_length,
    check_scalar,
    is_real_number,
)
from streamcal.buckets import Buckets, LogitGrid, check_edges
from streamcal.persist import Persistable
from streamcal.windows import Unbounded, Window

__all__ = ["StreamingCalibrator"]

_TINY = float(np.finfo(np.float64).tiny)
_ONE_BELOW = 1.0 - float(np.finfo(np.float64).epsneg)  # the largest float64 below 1

OP_LEARN = 1
OP_PREDICT = 2
OP_PREQUENTIAL = 3  # predict with the state before the label, then learn


class StreamingCalibrator(Persistable, base.Classifier):
    """Base class of the streaming binary calibrators (not used directly).

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); ``None`` means ``LogitGrid()``: 1024
        logit-spaced buckets for probability inputs.
    window
        Window strategy (:mod:`streamcal.windows`); ``None`` means ``Unbounded()``.
    score_key
        Key of the score in the ``x`` dicts of the river face; ``None``: ``x`` must hold
        exactly one value, the score.
    llr_pseudo_count
        Weight ``c > 0`` of the pseudo-positive and pseudo-negative that keep the LLR finite:
        the prior becomes ``(T1 + c) / (T + 2c)``.
    """

    def __init__(
        self,
        buckets: Buckets | None = None,
        window: Window | None = None,
        score_key: str | None = None,
        llr_pseudo_count: float = 1.0,
    ):
        self.buckets = buckets
        self.window = window
        self.score_key = score_key
        self.llr_pseudo_count = llr_pseudo_count
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
        buckets = LogitGrid() if self.buckets is None else self.buckets
        if not isinstance(buckets, Buckets):
            msg = f"`buckets` must be a bucket strategy from streamcal.buckets or None; got {self.buckets!r}."
            raise TypeError(msg)
        window = Unbounded() if self.window is None else self.window
        if not isinstance(window, Window):
            msg = f"`window` must be a window strategy from streamcal.windows or None; got {self.window!r}."
            raise TypeError(msg)
        check_scalar(self.llr_pseudo_count, "llr_pseudo_count", low=0.0, low_inclusive=False)
        refit_every = getattr(self, "refit_every", None)
        if refit_every is not None:
            check_scalar(refit_every, "refit_every", numbers.Integral, low=1)
        self._window_code = window.code()
        self._uses_times = bool(window.uses_times)
        self._ring_capacity = window.ring_capacity
        self._score_low, self._score_high = _finite_range(buckets.score_range)
        self._bucket_kind = type(buckets).__name__
        self._identity = bool(buckets.probability_inputs)
        check_scalar(buckets.warmup, "warmup", numbers.Integral, low=0)
        self._warmup = int(buckets.warmup)
        if self._warmup and hasattr(buckets, "check_params"):
            buckets.check_params()  # before any event is buffered: the warm-up's end must not fail
        self._sf = None
        self._si = None
        if self._warmup:
            self._warm = np.zeros((4, self._warmup), dtype=np.float64)  # score, label, weight, time
            self._n_warm = 0
            self._warm_pos = 0.0
            self._warm_tot = 0.0
            self._warm_last_t = -math.inf
            self._strategy = buckets
        else:
            self._build(buckets.bucket_edges(), buckets.bucket_centres())

    def _build(self, edges: np.ndarray, centres: np.ndarray) -> None:
        """Allocate the histogram for these edges and centres (the edges are now known)."""
        edges, centres = _check_layout(edges, centres)
        self._edges = np.ascontiguousarray(edges, dtype=np.float64)
        self._cuts = np.ascontiguousarray(self._edges[1:-1])
        self._cuts_list = self._cuts.tolist()
        self._guide = _h.bucket_guide(self._cuts)
        self._centres = np.ascontiguousarray(centres, dtype=np.float64)
        self._centres_list = self._centres.tolist()
        self._sf, self._si = _h.empty_state(self._centres.size, self._ring_capacity, self._window_code)
        self._init_map_state()

    # derived from the edges: not saved, rebuilt on loading
    _CACHES = ("_guide",)

    def __getstate__(self):
        state = self.__dict__.copy()
        for name in self._CACHES:
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "_score_low" in state:  # states saved before the range excluded ±inf
            self._score_low, self._score_high = _finite_range((self._score_low, self._score_high))
        if "_cuts" in state:
            self._guide = _h.bucket_guide(self._cuts)

    @property
    def n_buckets(self) -> int | None:
        """Number of buckets (``None`` while quantile edges are still warming up)."""
        return None if self._sf is None else int(self._centres.size)

    @property
    def edges(self) -> np.ndarray | None:
        """The ``B + 1`` bucket edges (``None`` while quantile edges are still warming up)."""
        return None if self._sf is None else self._edges.copy()

    @property
    def centres(self) -> np.ndarray | None:
        """The ``B`` bucket centres (``None`` while quantile edges are still warming up)."""
        return None if self._sf is None else self._centres.copy()

    def _stored_unit(self) -> float:
        kind = self._sf[_h.SF_KIND]
        if kind in (_h.KIND_DECAY_EVENTS, _h.KIND_DECAY_TIME) and self._sf[_h.SF_N_LEARNED] > 0:
            return 2.0 ** ((self._sf[_h.SF_LAST_T] - self._sf[_h.SF_T0]) / self._sf[_h.SF_HALF_LIFE])
        return 1.0

    def histogram(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(centres, pos, neg)``: the window's weight per bucket, in real units (copies).

        With a decay window the weights are the decayed ones as of the last learned event.
        """
        if self._sf is None:
            msg = "the bucket edges are not known yet: the quantile warm-up has not completed."
            raise RuntimeError(msg)
        B = self._centres.size
        u = self._stored_unit()
        pos = self._sf[_h.SF_HEADER : _h.SF_HEADER + B] / u
        neg = self._sf[_h.SF_HEADER + B : _h.SF_HEADER + 2 * B] / u
        return self._centres.copy(), pos, neg

    def merge(self, *others):
        """A new calibrator equal to one that learned the events of ``self`` and ``others``.

        The calibrators must be of one class with equal parameters and bucket edges; for count,
        time and event-decay windows they are taken in stream order (see :mod:`streamcal.merging`).
        None of them is modified.
        """
        from streamcal.merging import merge

        return merge([self, *others])

    @property
    def window_weight(self) -> float:
        """Total weight currently in the window (decayed weights for a decay window).

        During a quantile warm-up: the total weight of the buffered events.
        """
        if self._sf is None:
            return float(self._warm_tot)
        return float((self._sf[_h.SF_T_POS] + self._sf[_h.SF_T_NEG]) / self._stored_unit())

    @property
    def n_learned(self) -> int:
        """Number of events learned so far."""
        if self._sf is None:
            return int(self._n_warm)
        return int(self._sf[_h.SF_N_LEARNED])

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
        if type(x) is not dict and not isinstance(x, dict):
            msg = f"`x` must be a dict holding the score; got a {type(x).__name__}."
            raise TypeError(msg)
        key = self.score_key
        if key is None:
            if len(x) != 1:
                msg = (
                    f"`x` must hold exactly one value, the score, when `score_key` is None; got "
                    f"{len(x)} keys: {list(x)[:5]!r}. Pass score_key= to name the score."
                )
                raise ValueError(msg)
            s = next(iter(x.values()))
        else:
            if key not in x:
                msg = f"`x` has no score under score_key={key!r}; its keys are {list(x)[:5]!r}."
                raise KeyError(msg)
            s = x[key]
        if type(s) is not float:
            if not is_real_number(s):
                msg = (
                    f"`{self._score_name(x)}` must be a real number (the score); "
                    f"got {s!r} of type {type(s).__name__}."
                )
                raise TypeError(msg)
            s = _as_float(s, self._score_name(x))
        if not (self._score_low <= s <= self._score_high):  # the range is finite: also ±inf, NaN
            raise ValueError(self._bad_score_message(s, self._score_name(x), ""))
        return s

    def _bad_score_message(self, s: float, name: str, where: str) -> str:
        """The error of a score outside the valid range (``where``: " at position i" or "")."""
        if not math.isfinite(s):
            return f"`{name}` must be finite; got {s!r}{where}."
        if self._score_low == 0.0 and self._score_high == 1.0:
            return (
                f"`{name}` must hold probabilities in [0, 1] for {self._bucket_kind} buckets; got "
                f"{s!r}{where}. For other scores use UniformGrid, QuantileEdges or Edges."
            )
        return (
            f"`{name}` must lie in [{self._score_low}, {self._score_high}] for {self._bucket_kind} "
            f"buckets; got {s!r}{where}."
        )

    def _score_name(self, x: dict) -> str:
        key = next(iter(x)) if self.score_key is None else self.score_key
        return f"x[{key!r}]"

    def _check_scores(self, scores) -> np.ndarray:
        """The array face's score check: what ``_score_of`` accepts one by one, as an array."""
        s = as_1d_float(scores, "scores", allow_empty=True)
        bad = ~((s >= self._score_low) & (s <= self._score_high))  # the range is finite: also ±inf, NaN
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(self._bad_score_message(float(s[i]), "scores", f" at position {i}"))
        return s

    def _last_time(self) -> float:
        if self._sf is None:
            return self._warm_last_t
        return float(self._sf[_h.SF_LAST_T])

    def _check_one(self, y, w, t) -> tuple[float, float, float]:
        if y is True or y is False:
            label = 1.0 if y else 0.0
        else:
            label = 1.0 if as_binary_label(y, "y") else 0.0
        if type(w) is not float or not (0.0 <= w < math.inf):
            if not is_real_number(w):
                msg = f"`w` must be a finite non-negative number; got {w!r} of type {type(w).__name__}."
                raise TypeError(msg)
            w = _as_float(w, "w")
            if not (0.0 <= w < math.inf):
                msg = f"`w` must be finite and non-negative; got {w!r}."
                raise ValueError(msg)
        if t is None:
            if self._uses_times:
                msg = f"{self._window_name()} needs event times: pass `t=` to learn_one."
                raise ValueError(msg)
            t = 0.0
        else:
            if not is_real_number(t):
                msg = f"`t` must be a finite number; got {t!r} of type {type(t).__name__}."
                raise TypeError(msg)
            t = _as_float(t, "t")
            if not math.isfinite(t):
                msg = f"`t` must be a finite number; got {t!r}."
                raise ValueError(msg)
            if self._uses_times and t < self._last_time():
                msg = f"`t` must not go backwards; got {t!r} after the last learned time {self._last_time()!r}."
                raise ValueError(msg)
        return label, w, t

    def _window_name(self) -> str:
        return type(Unbounded() if self.window is None else self.window).__name__

    def _check_learn_arrays(self, n: int, labels, weights, times, learn: np.ndarray | None):
        """Validate labels, weights and times at the learn positions; return full-length arrays."""
        if learn is None:
            y = as_binary_labels(labels, "labels", allow_empty=True)
            check_same_length(n, y.size, "labels")
            idx = None
        else:
            raw = _label_array(labels, "labels")
            if raw.ndim != 1:
                msg = f"`labels` must be 1-d; got an array of shape {raw.shape}."
                raise ValueError(msg)
            check_same_length(n, raw.size, "labels")
            idx = np.flatnonzero(learn)
            y = np.zeros(n, dtype=np.float64)
            try:
                y[idx] = as_binary_labels(raw[idx], "labels", allow_empty=True)
            except ValueError:
                for i in idx:
                    if not _is_binary(raw[i]):
                        msg = (
                            "`labels` must hold binary labels (0/1 or False/True); "
                            f"got {_plain(raw[i])!r} at position {i}."
                        )
                        raise ValueError(msg) from None
                raise
        if weights is None:
            w = np.ones(n, dtype=np.float64)
        else:
            w = as_1d_float(weights, "weights", allow_empty=True)
            check_same_length(n, w.size, "weights")
            bad = ~(np.isfinite(w) & (w >= 0.0))
            if idx is not None:
                bad &= learn
                w[~learn] = 0.0
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                msg = f"`weights` must be finite and non-negative; got {float(w[i])!r} at position {i}."
                raise ValueError(msg)
        if times is None:
            if self._uses_times and n and (idx is None or idx.size):
                msg = f"{self._window_name()} needs event times: pass `times=`."
                raise ValueError(msg)
            t = np.zeros(n, dtype=np.float64)
        else:
            t = as_1d_float(times, "times", allow_empty=True)
            check_same_length(n, t.size, "times")
            pos = np.arange(n) if idx is None else idx
            tl = t[pos]
            bad = ~np.isfinite(tl)
            if bad.any():
                i = int(pos[np.flatnonzero(bad)[0]])
                msg = f"`times` must be finite; got {float(t[i])!r} at position {i}."
                raise ValueError(msg)
            if self._uses_times and tl.size:
                last = self._last_time()
                if tl[0] < last:
                    i = int(pos[0])
                    msg = (
                        f"`times` must not go backwards; got {float(t[i])!r} at position {i} "
                        f"after the last learned time {last!r}."
                    )
                    raise ValueError(msg)
                back = tl[1:] < tl[:-1]
                if back.any():
                    k = int(np.flatnonzero(back)[0]) + 1
                    i, j = int(pos[k]), int(pos[k - 1])
                    msg = (
                        f"`times` must not go backwards; got {float(t[i])!r} at position {i} "
                        f"after {float(t[j])!r} at position {j}."
                    )
                    raise ValueError(msg)
            if idx is not None:
                t[~learn] = 0.0
        return y, w, t

    # ------------------------------------------------------------------ river face
    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        """Learn one labelled event: ``x`` holds the score, ``y`` the label.

        ``w`` is the sample weight; ``t`` the event time (required by time windows and
        time-based decay, and then never going backwards).
        """
        s = self._score_of(x)
        label, w, t = self._check_one(y, w, t)
        if self._sf is None:
            self._warm_add(s, label, w, t)
            return
        if self._ring_capacity and self._uses_times:
            self._ensure_ring(1)
        self._learn_bucket(bisect_right(self._cuts_list, s), s, label, w, t)

    def predict_proba_one(self, x: dict) -> dict:
        """``{False: 1 - p, True: p}`` with ``p`` the calibrated probability of the score."""
        s = self._score_of(x)
        p = self._warm_proba() if self._sf is None else self._proba_of(s)
        return {False: 1.0 - p, True: p}

    def predict_one(self, x: dict) -> bool:
        """True when the calibrated probability exceeds 0.5."""
        s = self._score_of(x)
        p = self._warm_proba() if self._sf is None else self._proba_of(s)
        return p > 0.5

    def predict_llr_one(self, x: dict) -> float:
        """Calibrated log-likelihood ratio (natural log) of the score, finite."""
        s = self._score_of(x)
        return 0.0 if self._sf is None else self._llr_of(s)

    # ------------------------------------------------------------------ array face
    def update(self, scores, labels, *, weights=None, times=None):
        """Learn labelled events in order; returns ``self``."""
        s, b = self._check_scores_and_buckets(scores)
        y, w, t = self._check_learn_arrays(s.size, labels, weights, times, None)
        self._run(OP_LEARN, s, y, w, t, b)
        return self

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probability of each score with the current state."""
        return self._predict_both(*self._check_scores_and_buckets(scores))[0]

    def predict_llr(self, scores) -> np.ndarray:
        """Calibrated (finite) LLR of each score with the current state."""
        return self._predict_both(*self._check_scores_and_buckets(scores))[1]

    def prequential(self, scores, labels, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Predict each event with the state before its label, then learn it: ``(proba, llr)``.

        Equal, element for element, to a loop of ``predict_proba_one`` / ``predict_llr_one``
        then ``learn_one``.
        """
        s, b = self._check_scores_and_buckets(scores)
        y, w, t = self._check_learn_arrays(s.size, labels, weights, times, None)
        return self._run(OP_PREQUENTIAL, s, y, w, t, b)

    def process(self, scores, labels, learn_mask, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Run an ordered sequence of operations: learn where ``learn_mask``, else predict.

        ``learn_mask[i]`` True learns (scores[i], labels[i], weights[i], times[i]); False
        predicts scores[i] with the current state (labels, weights and times there are
        ignored). Returns ``(proba, llr)``, NaN at the learn positions.
        """
        s, b = self._check_scores_and_buckets(scores)
        learn = as_binary_labels(learn_mask, "learn_mask", allow_empty=True).astype(bool)
        check_same_length(s.size, learn.size, "learn_mask")
        y, w, t = self._check_learn_arrays(s.size, labels, weights, times, learn)
        ops = np.where(learn, OP_LEARN, OP_PREDICT).astype(np.int64)
        return self._run(ops, s, y, w, t, b)

    # ------------------------------------------------------------------ shared machinery
    def _run(self, ops, s, y, w, t, b=None) -> tuple[np.ndarray, np.ndarray]:
        """Run the operations ``ops`` (an array, or one ``OP_*`` int for every event).

        ``b``: the buckets of all the scores when already known (:meth:`_check_scores_and_buckets`
        gives them once the edges are known, so no warm-up then runs here), else None.
        """
        n = s.size
        uniform = isinstance(ops, int)
        out_p = np.full(n, np.nan)
        out_llr = np.full(n, np.nan)
        i = 0
        layout = None
        if self._sf is None:  # the warm-up's end, computed before anything is buffered
            layout = self._warm_layout_after(s if uniform else s[(ops & OP_LEARN) != 0])
        while i < n and self._sf is None:  # quantile warm-up: event by event, as learn_one
            op = ops if uniform else ops[i]
            if op & OP_PREDICT:
                out_p[i] = self._warm_proba()
                out_llr[i] = 0.0
            if op & OP_LEARN:
                self._warm_add(s[i], y[i], w[i], t[i], layout)
            i += 1
        if i < n:
            if not uniform:
                ops = ops[i:]
            s, y, w, t = s[i:], y[i:], w[i:], t[i:]
            b = self._buckets_of(s) if b is None else b[i:]
            if self._ring_capacity and self._uses_times:
                if uniform:
                    self._ensure_ring(s.size if ops & OP_LEARN else 0)
                else:
                    self._ensure_ring(int(np.count_nonzero(ops & OP_LEARN)))
            self._run_ops(ops, b, s, y, w, t, out_p[i:], out_llr[i:])
            if self._ring_capacity and self._uses_times:
                self._shrink_ring()
        return out_p, out_llr

    def _predict_both(self, s: np.ndarray, b: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if self._sf is None:
            return np.full(s.size, self._warm_proba()), np.zeros(s.size)
        return self._predict_arrays(b, s)

    def _buckets_of(self, s: np.ndarray) -> np.ndarray:
        """Buckets of scores already checked."""
        b, _ = self._checked_buckets(s)
        return b

    def _checked_buckets(self, s: np.ndarray) -> tuple[np.ndarray, int]:
        """``(buckets, bad)``: the scores' buckets, found through the bucket guide in the pass that
        checks them; ``bad`` is the position of the first score that is not finite or outside the
        bucket strategy's range (-1: none; then the buckets are not all written)."""
        b = np.empty(s.size, dtype=np.intp)
        bad = _h.check_bucket_index(self._cuts, self._guide, self._score_low, self._score_high, s, b)
        return b, bad

    def _check_scores_and_buckets(self, scores) -> tuple[np.ndarray, np.ndarray | None]:
        """``(scores, buckets)``, both checked; the buckets are None while the edges are unknown.

        One pass over the scores does both (:meth:`_checked_buckets`); a bad score is reported
        by :meth:`_check_scores`, as by every other entry point. The scores are not copied: the
        caller's array is read as it is during the call (numpy's rule for any array argument).
        """
        if self._sf is None:
            return self._check_scores(scores), None
        s = as_1d_float(scores, "scores", allow_empty=True, copy=False)  # only read from here on
        b, bad = self._checked_buckets(s)
        if bad >= 0:
            self._check_scores(s)  # raises, naming the first bad score
            msg = f"`scores` must be finite and in the buckets' range; got {s[bad]!r} at position {bad}."
            raise ValueError(msg)
        return s, b

    def _ensure_ring(self, extra: int) -> None:
        W = int(self._si[_h.SI_W])
        need = int(self._si[_h.SI_RING_COUNT]) + extra
        if need > W:
            self._sf, self._si = _h.grow_ring(self._sf, self._si, max(2 * W, 1 << (need - 1).bit_length()))
            self._histogram_replaced()

    def _shrink_ring(self) -> None:
        W = int(self._si[_h.SI_W])
        count = int(self._si[_h.SI_RING_COUNT])
        target = max(1024, 1 << (2 * count).bit_length())
        if 4 * target < W:
            self._sf, self._si = _h.grow_ring(self._sf, self._si, target)
            self._histogram_replaced()

    def _histogram_replaced(self) -> None:
        """Hook: ``_sf``/``_si`` were replaced by new arrays (a subclass holding views of them rebinds)."""

    # quantile warm-up ---------------------------------------------------------------------
    def _warm_proba(self) -> float:
        return (self._warm_pos + 1.0) / (self._warm_tot + 2.0)

    def _warm_layout(self, sample: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The checked edges and centres the strategy learns from the full warm-up ``sample``."""
        return _check_layout(self._strategy.bucket_edges(sample), self._strategy.bucket_centres(sample))

    def _warm_layout_after(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The layout the warm-up ends with if the scores ``s`` are learned next (None if it does
        not end): computed before any of them is buffered, so that a strategy failing on the
        sample rejects the call with nothing changed."""
        need = self._warmup - self._n_warm
        if s.size < need:
            return None
        return self._warm_layout(np.concatenate((self._warm[0, : self._n_warm], s[:need])))

    def _warm_add(self, s: float, y: float, w: float, t: float, layout=None) -> None:
        s, y, w, t = float(s), float(y), float(w), float(t)
        k = self._n_warm
        if k + 1 == self._warmup and layout is None:
            layout = self._warm_layout_after(np.array([s]))
        self._warm[:, k] = (s, y, w, t)
        self._n_warm = k + 1
        self._warm_tot += w
        if y > 0.5:
            self._warm_pos += w
        if self._uses_times:
            self._warm_last_t = t
        if self._n_warm == self._warmup:
            buffered = self._warm
            self._build(*layout)
            del self._warm, self._strategy
            n = buffered.shape[1]
            b = self._buckets_of(np.ascontiguousarray(buffered[0]))
            if self._ring_capacity and self._uses_times:
                self._ensure_ring(n)
            nan = np.full(n, np.nan)
            self._run_ops(
                np.full(n, OP_LEARN, dtype=np.int64), b, *(np.ascontiguousarray(r) for r in buffered), nan, nan.copy()
            )

    # ------------------------------------------------------------------ generic engine
    # A calibrator with a parametric / smooth map uses these as they are and supplies
    # ``_refit_from_histogram`` and ``_predict_fitted``. Streaming PAV overrides them.
    def _init_map_state(self) -> None:
        self._fitted = False
        self._dirty = False
        self._n_since_refit = 0
        self._prior_logodds = 0.0

    def _learn_bucket(self, b: int, s: float, y: float, w: float, t: float) -> None:
        _h.histogram_learn_one_inplace(self._sf, self._si, b, y, w, t)
        self._after_learn(1)

    def _after_learn(self, n: int) -> None:
        refit_every = getattr(self, "refit_every", None)
        if refit_every is None:
            self._dirty = True
            return
        self._n_since_refit += n
        if self._n_since_refit >= refit_every:
            self._refit()

    def _refit(self) -> None:
        self._n_since_refit = 0
        self._dirty = False
        centres, pos, neg = self.histogram()
        t_pos, t_neg = float(pos.sum()), float(neg.sum())
        if not t_pos + t_neg > 0.0:
            self._fitted = False
            return
        self._refit_from_histogram(centres, pos, neg)
        c = float(self.llr_pseudo_count)
        self._prior_logodds = math.log(t_pos + c) - math.log(t_neg + c)
        self._fitted = True

    def _ensure_fitted(self) -> None:
        if self._dirty:
            self._refit()

    def _fallback(self, s: np.ndarray) -> np.ndarray:
        if self._identity:
            return np.clip(s, 0.0, 1.0)
        return np.full(s.shape, 0.5)

    def _proba_of(self, s: float) -> float:
        # the probability alone (``_predict_arrays`` also computes the LLR)
        self._ensure_fitted()
        if not self._fitted:
            return float(self._fallback(np.array([s]))[0])
        return self._fitted_proba_one(s)

    def _fitted_proba_one(self, s: float) -> float:
        """The fitted map at one score, as ``_predict_fitted`` computes it. A calibrator with a
        scalar kernel for its map overrides this (the river face's per-event call)."""
        return float(np.asarray(self._predict_fitted(np.array([s])), dtype=np.float64)[0])

    def _llr_of(self, s: float) -> float:
        return float(self._predict_arrays(None, np.array([s]))[1][0])

    def _predict_arrays(self, b, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._ensure_fitted()
        if not self._fitted:
            return self._fallback(s), np.zeros(s.size)
        p = np.asarray(self._predict_fitted(s), dtype=np.float64)
        return p, np.asarray(self._predict_llr_fitted(s, p), dtype=np.float64)

    def _predict_llr_fitted(self, scores: np.ndarray, proba: np.ndarray) -> np.ndarray:
        q = np.minimum(np.maximum(proba, _TINY), _ONE_BELOW)  # np.clip's values, without its wrapper
        return (np.log(q) - np.log1p(-q)) - self._prior_logodds

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        """Run operations with the map fitted from the histogram, element for element what a loop
        of ``predict_proba_one`` / ``learn_one`` gives. ``ops`` is an array, or one ``OP_*`` int
        for every event.

        With ``refit_every`` the map is fixed between refits: see :meth:`_run_ops_between_refits`.
        With lazy refits (``refit_every=None``) runs of equal operations go at once: a run of
        predictions is one vectorised call (one refit before it if labels came), a run of labels
        one histogram call, and each prequential event is predicted (after a refit) and learned
        on its own.
        """
        if isinstance(ops, int):
            ops = np.full(b.size, ops, dtype=np.int64)
        k = getattr(self, "refit_every", None)
        if k is not None:
            self._run_ops_between_refits(k, ops, b, s, y, w, t, out_p, out_llr)
            return
        runs = [*np.flatnonzero(np.concatenate(([True], ops[1:] != ops[:-1]))).tolist(), ops.size]
        for start, stop in itertools.pairwise(runs):
            op = ops[start]
            if op == OP_PREDICT:
                out_p[start:stop], out_llr[start:stop] = self._predict_arrays(b[start:stop], s[start:stop])
                continue
            step = 1 if op == OP_PREQUENTIAL else stop - start
            for i in range(start, stop, step):
                part = slice(i, i + step)
                if op == OP_PREQUENTIAL:
                    out_p[part], out_llr[part] = self._predict_arrays(b[part], s[part])
                _h.histogram_learn_many_inplace(self._sf, self._si, b[part], y[part], w[part], t[part])
                self._after_learn(step)

    def _run_ops_between_refits(self, k, ops, b, s, y, w, t, out_p, out_llr) -> None:
        """``_run_ops`` with a refit after every ``k`` labels: one segment per refit.

        The map does not change between two refits, so every prediction up to the operation
        that learns the label completing the next ``k`` is one vectorised call, and the labels
        of the segment one histogram call, in their order: the outputs of the event-by-event
        loop, however predictions and labels interleave (late labels).
        """
        learn_at = np.flatnonzero(ops & OP_LEARN)
        predict_at = np.flatnonzero(ops & OP_PREDICT)
        i = 0  # first operation of the segment
        li = 0  # learn_at[li] is its first label
        pi = 0  # predict_at[pi] is its first prediction
        while i < ops.size:
            due = li + max(1, k - self._n_since_refit)  # the label that completes the refit
            end = int(learn_at[due - 1]) + 1 if due <= learn_at.size else ops.size
            pj = int(np.searchsorted(predict_at, end))
            if pj > pi:
                at = predict_at[pi:pj]
                out_p[at], out_llr[at] = self._predict_arrays(b[at], s[at])
            lj = min(due, learn_at.size)
            if lj > li:
                at = learn_at[li:lj]
                _h.histogram_learn_many_inplace(self._sf, self._si, b[at], y[at], w[at], t[at])
                self._after_learn(lj - li)
            i, li, pi = end, lj, pj

    # hooks for a parametric or smooth map -------------------------------------------------
    def _refit_from_histogram(self, centres: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_fitted(self, scores: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _check_layout(edges, centres) -> tuple[np.ndarray, np.ndarray]:
    """A bucket strategy's edges and centres, checked: ``B + 1`` finite, strictly increasing edges
    and ``B`` finite, strictly increasing centres, each within its bucket."""
    e = check_edges(edges, "edges")
    c = as_1d_float(centres, "centres", allow_empty=True)
    if c.size != e.size - 1:
        msg = f"`centres` must hold one value per bucket ({e.size - 1}); got {c.size}."
        raise ValueError(msg)
    bad = ~((c >= e[:-1]) & (c <= e[1:]))  # also NaN
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        msg = (
            f"`centres` must lie within their buckets; got {float(c[b])!r} for bucket {b}, "
            f"[{float(e[b])!r}, {float(e[b + 1])!r}]."
        )
        raise ValueError(msg)
    if c.size > 1 and not (np.diff(c) > 0.0).all():
        b = int(np.flatnonzero(~(np.diff(c) > 0.0))[0]) + 1
        msg = (
            f"`centres` must be strictly increasing; got {float(c[b])!r} at position {b} after "
            f"{float(c[b - 1])!r}."
        )
        raise ValueError(msg)
    return e, c


def _finite_range(score_range) -> tuple[float, float]:
    """A bucket strategy's score range with its infinite ends replaced by the largest floats, so
    that one comparison ``low <= s <= high`` rejects ±inf and NaN (both faces, and the kernels)."""
    low, high = (float(v) for v in score_range)
    big = float(np.finfo(np.float64).max)
    return max(low, -big), min(high, big)


def _as_float(value, name: str) -> float:
    """``float(value)`` of a real number; a ValueError naming ``name`` when it is beyond float64."""
    try:
        return float(value)
    except OverflowError:
        msg = f"`{name}` must be a number within the float64 range; got {value!r}."
        raise ValueError(msg) from None


def _is_binary(value) -> bool:
    try:
        as_binary_label(value)
    except ValueError:
        return False
    return True


def _plain(value):
    """A NumPy scalar as the Python scalar it holds (for readable error messages)."""
    return value.item() if isinstance(value, np.generic) else value
