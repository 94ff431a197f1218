"""The refit engine: calibration maps refitted from the windowed histogram.

:class:`RefitCalibrator` is the layer between the streaming base
(:class:`streamcal._streaming.StreamingCalibrator`: parameters, validation, both faces, the
histogram) and a calibrator whose map is fitted from the whole histogram (I-spline, GEV,
Platt). Such a calibrator supplies two hooks:

- ``_refit_from_histogram(centres, pos, neg)``: fit the map to the bucket centres and the
  positive / negative weight per bucket (real units, copies; at least one weight is > 0);
- ``_predict_fitted(scores) -> proba``: the fitted map on an array of scores;

and optionally ``_predict_llr_fitted(scores, proba) -> llr`` (the default is
``logit(proba) - log((T1 + c) / (T0 + c))``, with ``proba`` kept in the open interval) and
``_fitted_proba_one(s)`` (a scalar kernel for the river face).

The probabilities such a map serves are kept within ``[c / (T + 2c), (T + c) / (T + 2c)]``, T the
weight it was fitted on and ``c = llr_pseudo_count`` (:func:`streamcal._prior.proba_bounds`): no
estimate from T events is surer than add-``c`` smoothing of T unanimous ones (the value the
finite PAV rule gives such a window). A fitted map may reach exactly 0 or 1 (a one-class
window, a GEV link beyond its support), which costs an infinite log loss the first time the
other class comes; the bound never changes the order of the scores. The LLR is computed from
the served (bounded) probability. ``_finite_rule`` gives the LLR's prior log-odds and the weight
T of the bounds; a keyed calibrator's pooled refit, which adds its prior's pseudo-counts to the
histogram, gives its own (:func:`streamcal._keyed_templates.pooled_finite_rule`).

Refit policy (``refit_every``, a constructor parameter of the subclass; ``None`` if absent):
``None`` refits lazily, when a prediction follows new labels; an integer ``k`` refits right
after every ``k``-th learned event, and predictions in between use the last fit. Either way
``prequential``/``process`` run exactly the same operations as a loop of ``predict_proba_one``
/ ``learn_one``, so the results are equal element for element. Before the first fit (or when
the window holds no weight) predictions are the score itself for probability inputs (bucket
strategies with ``probability_inputs``, such as the default logit grid) and 0.5 otherwise,
with LLR 0.

The score prior (``prior="auto"``, :func:`streamcal._prior.score_prior`): every refit adds its
pseudo-counts to the histogram before the map is fitted, with the strength refitted to the
histogram at that refit; the LLR's prior log-odds and the class totals stay the data's.
``prior=None`` fits the map to the histogram alone.
"""

from __future__ import annotations

import itertools

import numpy as np

from streamcal import _prior
from streamcal._streaming import OP_LEARN, OP_PREDICT, OP_PREQUENTIAL, StreamingCalibrator
from streamcal._validation import check_refit_every, check_scalar

__all__ = ["RefitCalibrator"]


class RefitCalibrator(StreamingCalibrator):
    """A streaming calibrator whose map is refitted from the histogram (not used directly).

    Subclasses supply ``_refit_from_histogram`` and ``_predict_fitted`` (see the module notes).
    """

    # where the score prior's floor goes (:func:`streamcal._prior.score_prior`)
    _PRIOR_FLOOR = "thinned"

    def _reset(self) -> None:
        check_refit_every(getattr(self, "refit_every", None))
        # a subclass without the parameter (a map written before the prior) has no prior
        check_scalar(getattr(self, "prior", None), "prior", choices=("auto", None))
        super()._reset()

    def __setstate__(self, state):
        # a state saved before the prior existed (neither its parameter nor its strength) loads
        # as it was saved: without it. A state holding one of them must hold both.
        if "prior" not in state and "_prior_strength" not in state:
            state = {**state, "prior": None, "_prior_strength": 0.0}
        super().__setstate__(state)

    def _init_map_state(self) -> None:
        self._fitted = False
        self._dirty = False
        self._n_since_refit = 0
        self._prior_logodds = 0.0
        self._prior_strength = 0.0  # the score prior's kappa at the last refit
        self._proba_low, self._proba_high = 0.0, 1.0  # the served bounds, set by ``_set_proba_bounds``

    def _set_proba_bounds(self, total: float) -> None:
        """Bound the served probabilities of a map fitted on ``total`` weight (real units)."""
        self._proba_low, self._proba_high = _prior.proba_bounds(total, float(self.llr_pseudo_count))

    def _learn_bucket(self, b: int, s: float, y: float, w: float, t: float) -> None:
        self._hist.learn_one(b, y, w, t)
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
        c = float(self.llr_pseudo_count)
        if getattr(self, "prior", None) is not None:
            self._prior_strength, pos, neg = self._with_score_prior(centres, pos, neg, c)
        self._refit_from_histogram(centres, pos, neg)
        self._prior_logodds, weight = self._finite_rule(t_pos, t_neg, float(pos.sum()) + float(neg.sum()))
        self._set_proba_bounds(weight)
        self._fitted = True

    def _finite_rule(self, t_pos: float, t_neg: float, total: float) -> tuple[float, float]:
        """``(logodds, weight)`` of a map fitted on ``total`` weight whose histogram's class totals
        are ``t_pos``, ``t_neg``: the prior log-odds its LLR is read against, and the weight whose
        add-``c`` pseudo-events bound its probabilities (``total``). A keyed calibrator's pooled
        refit reads its own (an instance attribute while its prior is added to the histogram)."""
        return _prior.prior_logodds(t_pos, t_neg, float(self.llr_pseudo_count)), total

    def _llr_rule(self) -> tuple[float, float]:
        """``(logodds, low)`` of the map in force: the prior log-odds its LLR reads the served
        probability against and its least served probability, ``c / (T + 2c)``; ``(0.0, 0.0)``
        before any fit."""
        with self._lock:
            self._ensure_fitted()
            return (float(self._prior_logodds), float(self._proba_low)) if self._fitted else (0.0, 0.0)

    def _with_score_prior(self, centres, pos, neg, c: float):
        """``(kappa, pos, neg)``: the score prior's strength for the row and the row with its
        pseudo-counts added (the row itself where the strength is 0)."""
        kappa, prior_pos, prior_neg = _prior.score_prior(centres, pos, neg, self._identity, c, floor=self._PRIOR_FLOOR)
        return (kappa, pos + prior_pos, neg + prior_neg) if kappa > 0.0 else (kappa, pos, neg)

    @property
    def prior_strength(self) -> float:
        """The score prior's strength at the current fit: pseudo-events per event of the window
        (0: the data's own map; always 0 with ``prior=None``)."""
        with self._lock:
            self._ensure_fitted()
            return float(self._prior_strength) if self._fitted else 0.0

    def _ensure_fitted(self) -> None:
        if self._dirty:
            self._refit()

    def _fallback(self, s: np.ndarray) -> np.ndarray:
        # before any label: the probability score itself, kept inside the open interval (0, 1)
        # like every probability these calibrators serve
        if self._identity:
            return np.minimum(np.maximum(s, _prior.NOT_SURE_LOW), _prior.ONE_BELOW)
        return np.full(s.shape, 0.5)

    def _proba_of(self, s: float) -> float:
        # the probability alone (``_predict_arrays`` also computes the LLR)
        self._ensure_fitted()
        if not self._fitted:
            return float(self._fallback(np.array([s]))[0])
        return min(max(self._fitted_proba_one(s), self._proba_low), self._proba_high)

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
        p = np.minimum(np.maximum(p, self._proba_low), self._proba_high)  # np.clip, without its wrapper
        return p, np.asarray(self._predict_llr_fitted(s, p), dtype=np.float64)

    def _predict_llr_fitted(self, scores: np.ndarray, proba: np.ndarray) -> np.ndarray:
        return _prior.llr_from_proba(proba, self._prior_logodds)

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
                self._hist.learn_many(b[part], y[part], w[part], t[part])
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
                self._hist.learn_many(b[at], y[at], w[at], t[at])
                self._after_learn(lj - li)
            i, li, pi = end, lj, pj

    # hooks for a parametric or smooth map -------------------------------------------------
    def _refit_from_histogram(self, centres: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_fitted(self, scores: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _rebuild_map_after_merge(self, other) -> None:
        """Refit the map from the merged histogram (its last fit, if any, is the warm start)."""
        if getattr(self, "refit_every", None) is None:
            self._dirty = True  # refit lazily, at the next prediction
        else:
            self._refit()

    def _check_loaded_map(self) -> None:
        """The generic engine's refit bookkeeping (a subclass with its own map extends this)."""
        from streamcal import _state_check as c

        c.need_bool(self._fitted, "_fitted")
        c.need_bool(self._dirty, "_dirty")
        refit_every = getattr(self, "refit_every", None)
        c.need_int(self._n_since_refit, "_n_since_refit", 0, 0 if refit_every is None else refit_every - 1)
        c.need_float(self._prior_logodds, "_prior_logodds")
        from streamcal._kernels.prior import KAPPA_MAX

        c.need_float(self._prior_strength, "_prior_strength", low=0.0, high=KAPPA_MAX)
        # the bounds of served probabilities (class values where a state has none of its own)
        low = c.need_float(self._proba_low, "_proba_low", low=0.0, high=0.5)
        high = c.need_float(self._proba_high, "_proba_high", low=0.5, high=1.0)
        if not low <= high:
            c.fail(f"`_proba_low`/`_proba_high`: expected low <= high; found {low!r} and {high!r}.")
