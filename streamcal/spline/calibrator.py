"""``ISplineCalibrator``: I-spline smoothing calibration (Wu et al. 2012), batch and streaming."""

from __future__ import annotations

import functools
import numbers

import numpy as np

from streamcal import _prior
from streamcal._kernels import _config
from streamcal._kernels import glm_refit as _glm
from streamcal._kernels import histogram as _h
from streamcal._kernels import ispline as _k
from streamcal._kernels import ispline_prior_stream as _kips
from streamcal._kernels import ispline_stream as _ks
from streamcal._kernels import prior as _kp
from streamcal._kernels._config import entry_point
from streamcal._refit import RefitCalibrator
from streamcal._streaming import OP_LEARN, OP_PREDICT
from streamcal._validation import (
    as_binary_labels,
    as_finite,
    as_nonneg_weights,
    check_same_length,
    check_scalar,
    keywords_named,
)
from streamcal.buckets import Buckets, LogitGrid, as_buckets
from streamcal.spline import _river
from streamcal.spline._prior_refit import ISplinePriorRefit
from streamcal.spline._river import ISplineRiverFace
from streamcal.spline.basis import default_n_knots
from streamcal.spline.fit import aggregate_sorted, evaluate_map, fit_distinct, unit_scaled
from streamcal.spline.stream_state import packed_state
from streamcal.windows import Window

__all__ = ["ISplineCalibrator"]

_NO_KNOTS = np.empty(0)
_NO_HINT = np.zeros(0, dtype=np.bool_)
# the engine's refit hooks that the compiled refit under the prior follows (a subclass overriding
# one keeps the engine's refit)
_REFIT_HOOKS = ("_with_score_prior", "_refit_from_histogram", "_knot_weight")


_OP_LEARN, _OP_PREDICT = int(OP_LEARN), int(OP_PREDICT)


def _river_first_call(*args):
    """``stream_packed_one`` for the river face: interpreted while the process's allowance of
    interpreted events lasts; then compiled (or loaded) for these argument types and put in
    place of the class's ``_river_step``, so that later calls skip numba's type dispatch."""
    result = _config.try_entry_point(_ks.stream_packed_one, *args)
    if result is not _config.NOT_RUN:
        return result
    compiled = entry_point(_ks.stream_packed_one, *args)
    ISplineCalibrator._river_step = staticmethod(compiled)
    return compiled(*args)


@functools.cache
def _map_score():
    """The fitted map at one score, without numba's type dispatch (compiled or loaded on first use)."""
    knots = np.zeros(4)
    return entry_point(_k.bspline_combination_score, 0.5, knots, 2, knots)


def _check_spline_params(order, n_knots, knots):
    check_scalar(order, "order", numbers.Integral, low=1)
    if n_knots is not None:
        check_scalar(n_knots, "n_knots", numbers.Integral, low=0)
    if knots is None:
        return None
    inner = as_finite(knots, "knots", allow_empty=True)
    bad = np.flatnonzero(np.diff(inner) <= 0.0)
    if bad.size:
        i = int(bad[0]) + 1
        msg = f"`knots` must be strictly increasing; got {float(inner[i])!r} at position {i}."
        raise ValueError(msg)
    return inner


@keywords_named
class ISplineCalibrator(ISplineRiverFace, ISplinePriorRefit, RefitCalibrator):
    """Smooth, monotone calibration of scores by I-spline least squares (Wu et al. 2012).

    The calibrated probability is ``f(s) = alpha_0 + sum_i alpha_i I_i(s)`` with I-splines
    ``I_i`` (cubic by default) on knots at score quantiles, ``alpha >= 0`` and
    ``sum(alpha) <= 1``, fitted by weighted least squares of the labels and solved exactly: the
    map is monotone, inside [0, 1] and smooth, and strictly increasing wherever some
    ``alpha_i > 0`` covers the score, so unlike isotonic regression it does not tie scores
    together (it keeps the ranking, and the AUC, there).

    **Streaming.** The state is the windowed bucket histogram shared by every streaming
    calibrator (``buckets=``, ``window=``); the map is refitted from it (bucket label means,
    weighted by bucket weight; ``O(buckets * order^2 + basis^2)`` per refit): lazily, when a
    prediction follows new labels (``refit_every=None``), or right after every
    ``refit_every``-th learned event, predictions in between using the last fit (the fast
    setting for ``prequential``). Before the first fit, predictions are the score itself for
    probability inputs (the default logit grid) and 0.5 otherwise, with LLR 0. ``prequential``
    equals a loop of the river face bit for bit, except while the score prior holds weight under
    the exact default: there ``prequential`` runs its events in a compiled loop of the engine's
    full refit, handing over to the loop without the prior where the prior is refuted, and the
    two may differ in the last bits, within 1e-9 (each is within 1e-9 of a full refit after every
    event).

    **Batch.** ``fit(scores, labels, sample_weight=None)`` replaces the state with these events
    (they enter the window as ``update`` would) and fits the map exactly on the raw events, not
    on their buckets. Further labels refit from the histogram as usual.

    **LLR.** ``logit(p~) - logit(prior~)`` with ``p~ = (f T + c) / (T + 2c)`` and
    ``prior~ = (T1 + c) / (T + 2c)`` for the fitted weight ``T`` (of which ``T1`` positive) and
    ``c = llr_pseudo_count``: finite, and strictly order-preserving wherever ``f`` is.

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); default ``LogitGrid()`` (1024 logit-spaced
        buckets; scores must be probabilities). Use ``UniformGrid``, ``QuantileEdges`` or
        ``Edges`` for other scores. An int ``n`` means ``LogitGrid(n)``; ``"uniform:N"`` /
        ``"quantile:N"`` name the strategy (:func:`streamcal.buckets.as_buckets`).
    window
        Window strategy (:mod:`streamcal.windows`); default ``Unbounded()``. An int ``n`` (such
        as ``100_000``) means ``CountWindow(n)``, a duration such as ``"7d"`` or ``"12h"``
        ``TimeWindow(seconds)`` (:func:`streamcal.windows.as_window`).
    score_key
        Key of the score in ``x``; ``None``: ``x`` holds exactly one value.
    order
        Order of the M-splines; the I-splines have degree ``order`` (3: the paper's cubic ones).
    n_knots
        Number of interior knots, at weighted score quantiles. Default: the paper's
        ``max(1, floor(n^(1/3) - 4))`` for ``n`` events (the window weight when streaming, the
        score prior's pseudo-counts not counted), capped so that the basis does not outnumber
        the distinct scores (non-empty buckets).
        Refit cost grows with the cube of the basis size: fix ``n_knots`` for large windows.
    knots
        Explicit strictly increasing interior knots, overriding ``n_knots`` (knots outside the
        fitted score range are dropped).
    refit_every
        ``None``: refit lazily when a prediction follows new labels; an int ``k``: refit after
        every ``k``-th learned event.
    llr_pseudo_count
        Weight ``c > 0`` of the pseudo-positive and pseudo-negative of the finite-LLR rule.
    prior
        ``"auto"`` (default): the map is fitted to the histogram plus the pseudo-counts of a
        prior, the score itself for probability inputs or the window's base rate for raw
        scores, whose strength the evidence sets at every refit: strong while the score
        predicts the window as well as its best logistic recalibration, none once the data show
        it off (the docs' page "A prior for little evidence"). ``None``: the histogram alone.

    Attributes
    ----------
    knots_ : ndarray or None
        The clamped knot vector of the current map.
    coef_ : ndarray or None
        ``alpha_0, ..., alpha_q`` of the current map.
    window_weight : float
        Total weight currently in the window.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal import ISplineCalibrator
    >>> from streamcal.windows import CountWindow
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=20_000)
    >>> labels = rng.uniform(size=20_000) < scores**2        # true probability: score squared
    >>> cal = ISplineCalibrator(window=CountWindow(10_000), n_knots=4, refit_every=1000)
    >>> proba, llr = cal.prequential(scores, labels)
    >>> print(np.round(cal.predict_proba([0.1, 0.5, 0.9]), 2))
    [0.   0.25 0.81]
    >>> cal.learn_one({"score": 0.5}, True)
    >>> round(cal.predict_proba_one({"score": 0.5})[True], 2), cal.window_weight
    (0.25, 10000.0)

    River's progressive validation (each event predicted with the state before its label):

    >>> from river import evaluate, stream
    >>> from streamcal.metrics import Brier
    >>> events = stream.iter_array(scores[:3000, None], labels[:3000], feature_names=["score"])
    >>> evaluate.progressive_val_score(events, ISplineCalibrator(n_knots=3, refit_every=100), Brier())
    Brier: 0.129832

    Batch use on raw scores of any range, with a grid for the window histogram:

    >>> from streamcal.buckets import UniformGrid
    >>> s = rng.normal(size=2000)
    >>> y = rng.random(2000) < 1 / (1 + np.exp(-(2 * s - 1)))
    >>> batch = ISplineCalibrator(buckets=UniformGrid(200, -4.0, 4.0)).fit(s, y)
    >>> print(np.round(batch.predict_proba([-2.0, 0.0, 0.5, 2.0]), 2))
    [0.02 0.27 0.5  0.94]

    References
    ----------
    Wu, Jiang, Kim, Ohno-Machado, *I-spline smoothing for calibrating predictive models*, AMIA
    Joint Summits on Translational Science (2012). Ramsay, *Monotone regression splines in
    action*, Statistical Science (1988).
    """

    def __init__(
        self,
        buckets: Buckets | int | str | None = None,
        window: Window | int | str | None = None,
        score_key: str | None = None,
        order: int = 3,
        n_knots: int | None = None,
        knots: tuple | None = None,
        refit_every: int | None = None,
        llr_pseudo_count: float = 1.0,
        prior: str | None = "auto",
    ):
        self.prior = prior
        self.order = order
        self.n_knots = n_knots
        self.knots = knots
        self.refit_every = refit_every
        self._inner_knots = _check_spline_params(order, n_knots, knots)
        super().__init__(buckets=buckets, window=window, score_key=score_key, llr_pseudo_count=llr_pseudo_count)

    @classmethod
    def _unit_test_params(cls):
        yield from super()._unit_test_params()
        yield {
            "score_key": "empty_server_form_handler",
            "buckets": LogitGrid(n_buckets=16),
            "order": 1,
            "refit_every": 7,
        }

    # ------------------------------------------------------------------ fitted map
    _CACHES = (*RefitCalibrator._CACHES, "_basis_cache", "_stream", "_glm_cache", "_prior_grid", "_prior_touched")

    def _init_map_state(self) -> None:
        super()._init_map_state()
        self._basis_cache = None
        self._stream = None
        self._knots = None
        self._coef = None
        self._bspline_coef = None
        self._fit_weight = 0.0
        # the score prior's recalibration (a, b) at the last refit: its next fit's start (state)
        self._prior_start = np.zeros(2)

    def __setstate__(self, state):
        # a state saved before the prior's warm start: its first refit starts from (0, 0)
        if "_knots" in state and "_prior_start" not in state:
            state = {**state, "_prior_start": np.zeros(2)}
        super().__setstate__(state)

    def _set_map(self, fitted, weight: float, pos_weight: float) -> None:
        self._set_map_arrays(fitted.knots, fitted.coef, fitted.bspline_coef, weight, pos_weight)

    def _set_map_arrays(self, knots, coef, bspline_coef, weight: float, pos_weight: float) -> None:
        # contiguous float64: the river face's compiled entry point takes exactly that (and a
        # compiled kernel's result gets numpy's own float64 dtype object, as a loaded state has)
        self._knots = np.ascontiguousarray(knots, dtype=np.float64)
        self._coef = np.ascontiguousarray(coef, dtype=np.float64)
        self._bspline_coef = np.ascontiguousarray(bspline_coef, dtype=np.float64)
        # the difference is >= 0 but for rounding, which could take it below -c with large weights
        neg_weight = max(weight - pos_weight, 0.0)
        self._prior_logodds = _prior.prior_logodds(pos_weight, neg_weight, float(self.llr_pseudo_count))
        self._set_proba_bounds(weight)

    def _set_proba_bounds(self, total: float) -> None:
        # the LLR's smoothing reads the weight the bounds do (``_finite_rule``'s)
        self._fit_weight = total
        super()._set_proba_bounds(total)

    def _refit_from_histogram(self, centres: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
        pos, neg, total, pos_total = unit_scaled(pos, neg)
        # fit_distinct's steps on the non-empty buckets, in one compiled call; warm start: the
        # previous fit's positive coefficients (same basis size), usually the same set or close
        # to it, so the exact solve takes a few steps instead of ~basis size
        wanted = default_n_knots(self._knot_weight(total)) if self.n_knots is None else int(self.n_knots)
        wanted = min(wanted, centres.size)  # the kernel caps it below the non-empty buckets too
        inner = _NO_KNOTS if self._inner_knots is None else self._inner_knots
        hint = _NO_HINT if self._coef is None else self._coef > 0.0
        order = int(self.order)
        # each bucket's B-splines for the knots of the previous refit: recomputed only for the
        # buckets that were empty then, or all of them when the knots move
        basis, basis_knots = getattr(self, "_basis_cache", None) or (None, _NO_KNOTS)
        if basis is None or basis.shape != (centres.size + 1, order + 3):
            basis = np.full((centres.size + 1, order + 3), -1.0)
            basis[0, 0] = 0.0
            basis_knots = _NO_KNOTS
        knots, coef, beta, _ = _k.ispline_refit_histogram(
            np.ascontiguousarray(centres, dtype=np.float64),
            np.ascontiguousarray(pos, dtype=np.float64),
            np.ascontiguousarray(neg, dtype=np.float64),
            order,
            wanted,
            inner,
            self._inner_knots is not None,
            hint,
            _NO_KNOTS if self._knots is None else self._knots,
            basis_knots,
            basis,
        )
        self._basis_cache = (basis, knots)
        self._set_map_arrays(knots, coef, beta, total, pos_total)

    def _with_score_prior(self, centres, pos, neg, c: float):
        return _warm_score_prior(self, centres, pos, neg, c)

    def _refit(self) -> None:
        # the engine's refit in one compiled call where this class's own hooks serve
        if not self._prior_refit(_own_refit_hooks(type(self))):
            super()._refit()

    def _knot_weight(self, total: float) -> float:
        return _knot_weight(self, total)

    def _predict_fitted(self, scores: np.ndarray) -> np.ndarray:
        return evaluate_map(scores, self._knots, int(self.order), self._bspline_coef)

    def _fitted_proba_one(self, s: float) -> float:
        # evaluate_map's kernel at one score (the same per-point code)
        return _map_score()(s, self._knots, int(self.order) + 1, self._bspline_coef)

    def _predict_llr_fitted(self, scores: np.ndarray, proba: np.ndarray) -> np.ndarray:
        # in (0, 1) but for rounding when the weight dwarfs c by 2**53: kept inside, the LLR finite
        q = _prior.smoothed(proba, self._fit_weight, float(self.llr_pseudo_count))
        return _prior.llr_from_proba(q, self._prior_logodds)

    @property
    def knots_(self):
        with self._lock:
            return None if self._knots is None else self._knots.copy()

    @property
    def coef_(self):
        with self._lock:
            return None if self._coef is None else self._coef.copy()

    @property
    def exact_refits(self) -> dict:
        """How the compiled loop refitted the exact default since it last started: ``kept`` (the
        previous active set, solved again banded; ``updated`` of them on factors updated per event
        rather than factored anew), ``stepped`` (banded, after active-set steps from the previous
        one), ``dense`` (the warm-started dense solver) and ``full`` (a refit from the histogram);
        all 0 while the loop has not run."""
        with self._lock:
            st = getattr(self, "_stream", None)
            counts = st["st"] if st is not None else None
            names = {"kept": _ks.ST_KEPT, "updated": _ks.ST_UPDATED, "stepped": _ks.ST_STEPPED}
            names.update(dense=_ks.ST_DENSE, full=_ks.ST_FULL)
            return {name: 0 if counts is None else int(counts[i]) for name, i in names.items()}

    # ------------------------------------------------------------------ batch fit
    def fit(self, scores, labels, sample_weight=None, *, times=None) -> ISplineCalibrator:
        """Replace the state by these events and fit the map exactly on them.

        The events enter the window histogram in order (as ``update`` would; ``times`` for time
        windows), so later labels continue from them; the map itself is the exact least-squares
        fit on the raw scores. With ``QuantileEdges`` buckets the batch must hold at least the
        warm-up. Nothing changes if the input is rejected.
        """
        with self._lock:
            return self._fit(scores, labels, sample_weight, times)

    def _fit(self, scores, labels, sample_weight, times) -> ISplineCalibrator:
        inner = _check_spline_params(self.order, self.n_knots, self.knots)
        s = self._check_scores(scores)
        if s.size == 0:
            msg = "`scores` must not be empty."
            raise ValueError(msg)
        y = as_binary_labels(labels, "labels")
        check_same_length(s.size, y.size, "labels")
        w = as_nonneg_weights(sample_weight, "sample_weight", s.size)
        total = float(w.sum())
        _, _, t = self._check_learn_arrays(s.size, y, w, times, None)
        warmup = int(as_buckets(self.buckets).warmup)
        if s.size < warmup:
            msg = (
                f"`scores` must hold at least the bucket warm-up ({warmup} events) for a batch fit, "
                f"so that the window histogram has its edges; got {s.size}."
            )
            raise ValueError(msg)
        if not total > 0.0:  # no evidence: the state ``update`` leaves from scratch, no map (as PAV, Platt, GEV)
            self._reset()
            self._run(OP_LEARN, s, y, w, t)
            return self
        values, weights, means = aggregate_sorted(s, w * y, w * (1.0 - y))
        fitted = fit_distinct(values, weights, means, float(np.count_nonzero(w)), int(self.order), self.n_knots, inner)
        # validated: now mutate
        self._inner_knots = inner
        self._reset()
        self._loading = True  # no refits while the batch enters the window: its map is `fitted`
        try:
            self._run(OP_LEARN, s, y, w, t)
        finally:
            del self._loading
        self._set_map(fitted, total, float(np.dot(w, y)))
        self._fitted = True
        self._dirty = False
        self._n_since_refit = 0
        return self

    # ------------------------------------------------------------------ checks of a restored state
    def _check_loaded_state(self) -> None:
        """The streaming calibrator's checks, and the interior knots the parameters give."""
        from streamcal import _state_check as c

        super()._check_loaded_state()
        inner = _check_spline_params(self.order, self.n_knots, self.knots)
        have = self._inner_knots
        if not (
            (inner is None and have is None)
            or (inner is not None and type(have) is np.ndarray and np.array_equal(inner, have))
        ):
            c.fail(f"`_inner_knots`: expected the knots of the parameters ({c.brief(inner)}); found {c.brief(have)}.")

    def _check_loaded_map(self) -> None:
        """The fitted map of a restored calibrator: before
        the first fit no map; after it a clamped knot vector (the bounds repeated ``order + 1``
        times around strictly increasing knots), coefficients of the size the knots give, and the
        B-spline coefficients their capped cumulative sums, all finite; a finite fitted weight."""
        from streamcal import _state_check as c

        super()._check_loaded_map()
        c.need_float(self._fit_weight, "_fit_weight", low=0.0)
        c.need_finite(c.need_array(self._prior_start, "_prior_start", np.float64, size=2), "_prior_start")
        parts = (self._knots, self._coef, self._bspline_coef)
        if all(part is None for part in parts):
            if self._fitted:
                c.fail("`_knots`/`_coef`: expected a fitted map since `_fitted` is True; found None.")
            return
        k = int(self.order) + 1
        knots = c.need_array(self._knots, "_knots", np.float64)
        m = knots.size
        if m < 2 * k:
            c.fail(f"`_knots`: expected at least {2 * k} knots for order {self.order}; found {m}.")
        c.need_finite(knots, "_knots")
        if not ((knots[:k] == knots[0]).all() and (knots[m - k :] == knots[-1]).all()):
            c.fail(f"`_knots`: expected a clamped knot vector, its first and last {k} knots equal.")
        c.need_increasing(knots[k - 1 : m - k + 1], "_knots")
        coef = c.need_array(self._coef, "_coef", np.float64, size=m - k)
        c.need_finite(coef, "_coef")
        beta = c.need_array(self._bspline_coef, "_bspline_coef", np.float64, size=m - k)
        if not np.array_equal(beta, np.minimum(np.cumsum(coef), 1.0)):
            c.fail("`_bspline_coef`: expected the cumulative sums of `_coef`, capped at 1.")

    # ------------------------------------------------------------------ engine
    def _after_learn(self, n: int) -> None:
        if not getattr(self, "_loading", False):
            super()._after_learn(n)

    # The lazy default (``refit_every=None``) runs its operations in one compiled loop
    # (:mod:`streamcal._kernels.ispline_stream`) that certifies the score prior's strength 0 per
    # event without refitting it, and refits incrementally: the normal equations and the knots'
    # quantiles follow each changed bucket, and the previous fit's active set is solved again and
    # kept when its KKT conditions hold, within rounding of the engine's full refit; a dense
    # active-set solve runs when they fail, one exact pass finds the knots when a quantile is
    # within rounding of a bucket's edge, and the full refit from the histogram runs when the
    # knot count changes, the basis is not determined by the non-empty buckets, or every 1,024
    # events. An event the loop cannot refit
    # (the score prior's strength not certified 0, weights beyond the fit's scaling range) runs
    # the engine's full refit, and the loop resumes after it.
    _STREAM_CHUNK = 64  # events run by the full refit while the score prior's strength is > 0
    # the loop's refit is the engine's to the last bit (the same knots, sums in the same order,
    # the same warm start and solver): False runs every event through the engine instead
    _STREAM_LOOP = True
    # the loop updates the normal equations, the knots' quantiles and the solve per event
    # (within rounding of the full refit, which it falls back on whenever a check fails):
    # False keeps the loop's full refit before every prediction, the engine's to the last bit
    _STREAM_INCREMENTAL = True

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        if not self._loop_serves() or self._in_loop:
            super()._run_ops(ops, b, s, y, w, t, out_p, out_llr)
            return
        self._in_loop = True
        try:
            self._run_loop(ops, b, s, y, w, t, out_p, out_llr)
        finally:
            del self._in_loop

    def _run_loop(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        if isinstance(ops, int):
            ops = np.full(b.size, ops, dtype=np.int64)
        ops = np.ascontiguousarray(ops, dtype=np.int64)
        logodds = np.empty(ops.size)
        i, n = 0, ops.size
        while i < n:
            ready = self._stream_ready()
            if ready is not True:
                # the score prior holds: its compiled loop (the engine's refits), else the engine
                own = ready == "prior" and _own_refit_hooks(type(self))
                j = self._prior_loop(ops, b, s, y, w, t, i, out_p, out_llr, own) if own else i
                if j == i:
                    j = min(n, i + (self._STREAM_CHUNK if ready == "prior" else 1))
                    super()._run_ops(ops[i:j], b[i:j], s[i:j], y[i:j], w[i:j], t[i:j], out_p[i:j], out_llr[i:j])
                self._stream = None
                i = j
                continue
            st = self._stream
            sf, si = self._hist.live_arrays()
            stop, code = _config.run(
                _ks.stream_packed_run, n - i, ops, b, s, y, w, t, i, sf, si, st["fbuf"], st["ibuf"], st["free"],
                out_p, out_llr, logodds,
            )  # fmt: skip
            self._stream_publish()
            at = i + np.flatnonzero(ops[i:stop] & OP_PREDICT)
            # the engine's LLR (``_predict_llr_fitted``) of each prediction, from its fit's weight
            q = _prior.smoothed(out_p[at], out_llr[at], float(self.llr_pseudo_count))
            out_llr[at] = _prior.llr_from_proba(q, logodds[at])
            i = int(stop)
            if code == _ks.DONE:
                continue
            self._stream = None
            if code == _ks.STOP_RENORM:
                continue
            # the full refit predicts this event (its prior, or its weight's scaling)
            j = i + 1
            super()._run_ops(ops[i:j], b[i:j], s[i:j], y[i:j], w[i:j], t[i:j], out_p[i:j], out_llr[i:j])
            i = j

    def _loop_serves(self) -> bool:
        # a subclass with its own refit hook keeps the engine (the loop does not call the hook)
        if "histogram" in self.__dict__:
            # an outside reader supplies the histogram (a keyed prior's pseudo-counts): the
            # engine refits from it, and the loop's state (of the window alone) is dropped
            self._stream = None
            return False
        return (
            self._STREAM_LOOP
            and getattr(self, "refit_every", None) is None
            and not getattr(self, "_loading", False)
            and type(self)._refit_from_histogram is ISplineCalibrator._refit_from_histogram
        )

    def _learn_bucket(self, b: int, s: float, y: float, w: float, t: float) -> None:
        # the river face's label: through the loop, which keeps its state (and its prior bound)
        if not self._loop_serves():
            super()._learn_bucket(b, s, y, w, t)
            return
        ready = None if self._in_loop else self._stream_ready()
        if ready == "prior":  # the score prior holds: the engine's label, without the loop's arrays
            super()._learn_bucket(b, s, y, w, t)
            self._prior_touch(b)  # listed for the next refit's kept sums
            return
        if ready is True:
            st = self._stream
            sf, si = self._hist.live_arrays()
            code = self._river_step(_OP_LEARN, b, s, y, w, t, sf, si, st["fbuf"], st["ibuf"], st["free"])
            if code == 0.0:  # learned: the map is the same, now dirty
                self._dirty = True
                st["n_learned"] = sf[_h.SF_N_LEARNED]
                return
            self._stream_publish()  # learned, then a decay renormalisation: the state is rebuilt
            self._stream = None
            return
        one = np.empty(1)
        self._run_ops(
            OP_LEARN, np.array([b], dtype=np.intp), np.array([float(s)]), np.array([float(y)]),
            np.array([float(w)]), np.array([float(t)]), one, one,
        )  # fmt: skip

    def _proba_of(self, s: float) -> float:
        # the river face's prediction after labels: the loop's refit and prediction in one call
        p = self._loop_refit(s)
        return p if p >= 0.0 else super()._proba_of(s)

    def _ensure_fitted(self) -> None:
        # the lazy refit: the loop's (the engine's, bit for bit) where it can, else the engine's
        if self._dirty:
            self._loop_refit(float(self._hist.layout.centres[0]))
        super()._ensure_fitted()

    def _loop_refit(self, s: float) -> float:
        """The loop's refit when labels came since the last fit, and its served probability of
        ``s``; -1.0 when it did not run (nothing to refit, the engine's turn, or a stop code)."""
        if not (self._dirty and not self._in_loop and self._loop_serves() and self._stream_ready() is True):
            return -1.0
        st = self._stream
        sf, si = self._hist.live_arrays()
        p = self._river_step(_OP_PREDICT, 0, s, 0.0, 1.0, 0.0, sf, si, st["fbuf"], st["ibuf"], st["free"])
        self._publish_fit(st)  # a prediction changes the map alone, not the histogram
        if p < 0.0:  # a stop code: the engine's full refit, as the array loop runs it for this event
            self._stream = None
            super()._ensure_fitted()
        return p

    # the one-event kernel (``_river_first_call``): op, bucket, score, label, weight, time, the
    # histogram's arrays and the packed state; ints and floats exactly, as its entry point trusts
    _river_step = staticmethod(_river_first_call)

    _in_loop = False  # True while _run_ops runs: the engine's refits inside it are its own

    def _stream_ready(self):
        """True when the compiled loop can run from the current state (built if need be);
        ``"prior"`` when the score prior's strength is not certified 0, False otherwise."""
        hist = self._hist
        st = getattr(self, "_stream", None)  # absent from a restored state (a cache)
        if (
            st is not None
            and st["floats"] is hist.live_arrays()[0]
            and st["n_learned"] == hist.live_arrays()[0][_h.SF_N_LEARNED]
            and st["map"] is self._coef  # no refit outside the loop since it last ran
        ):
            return True
        self._stream = None
        if not self._fitted or self._knots is None or self._dirty is None:
            return False
        if getattr(self, "prior", None) is not None and self._prior_strength > 0.0:
            return "prior"
        centres = np.ascontiguousarray(hist.layout.centres, dtype=np.float64)
        B = centres.size
        inner = _NO_KNOTS if self._inner_knots is None else np.ascontiguousarray(self._inner_knots)
        wanted = -1 if self.n_knots is None else int(self.n_knots)
        st = packed_state(centres, int(self.order), wanted, inner, self._inner_knots is not None)
        st["ibuf"][_ks.PK_INCREMENTAL] = 1 if self._STREAM_INCREMENTAL else 0
        c = float(self.llr_pseudo_count)
        floats = hist.live_arrays()[0]
        if getattr(self, "prior", None) is not None:
            pos, neg = hist.real_weights()
            row = np.ascontiguousarray(np.concatenate((pos, neg)))
            base_rate = (float(pos.sum()) + c) / (float(pos.sum() + neg.sum()) + 2.0 * c)
            start = np.zeros(2)
            kappa = _config.run(
                _kp.prior_strength_from, 0, row, 0, B, 1.0, centres, 0, 1, base_rate, bool(self._identity), start
            )
            if kappa > 0.0:
                return "prior"
            st["ist"][_ks.IS_PRIOR] = 1 if self._identity else 2
            _config.run(
                _ks.stream_anchor, 0, floats, B, centres, int(st["ist"][_ks.IS_PRIOR]), c, float(start[0]),
                float(start[1]), st["st"], st["lpos"], st["lneg"], st["spos"], st["sneg"], st["xcov"],
            )  # fmt: skip
        s = st["st"]
        s[_ks.ST_C] = c
        s[_ks.ST_DIRTY] = 1.0 if self._dirty else 0.0
        s[_ks.ST_FIT_WEIGHT] = self._fit_weight
        s[_ks.ST_LOGODDS] = self._prior_logodds
        s[_ks.ST_LOW], s[_ks.ST_HIGH] = self._proba_low, self._proba_high
        nk = self._knots.size
        p = self._coef.size
        st["knots"][:nk] = self._knots
        st["ist"][_ks.IS_NKNOTS] = nk
        st["coef"][:p] = self._coef
        st["beta"][:p] = self._bspline_coef
        st["free"][:p] = self._coef > 0.0
        st["ist"][_ks.IS_STAMP] = 1  # every row stale: the loop computes them as buckets fill
        st["floats"] = floats
        st["n_learned"] = floats[_h.SF_N_LEARNED]
        st["map"] = self._coef
        self._stream = st
        return True

    def _stream_publish(self) -> None:
        """The compiled loop's map and bookkeeping as this calibrator's attributes."""
        st = getattr(self, "_stream", None)  # absent from a restored state (a cache)
        self._publish_fit(st)
        st["floats"] = self._hist.live_arrays()[0]
        st["n_learned"] = st["floats"][_h.SF_N_LEARNED]

    def _publish_fit(self, st) -> None:
        """The loop's map, its weight, prior log-odds, bounds and ``_dirty`` as attributes."""
        nk = st["ist"].item(_ks.IS_NKNOTS)
        p = nk - int(self.order) - 1
        self._knots = st["knots"][:nk].copy()
        self._coef = st["coef"][:p].copy()
        self._bspline_coef = st["beta"][:p].copy()
        # ST_FIT_WEIGHT, ST_LOGODDS, ST_LOW, ST_HIGH, ST_DIRTY: consecutive, as Python floats at once
        self._fit_weight, self._prior_logodds, self._proba_low, self._proba_high, dirty = st["st"][:5].tolist()
        self._dirty = dirty != 0.0
        self._prior_strength = 0.0
        st["map"] = self._coef


# ``ISplineCalibrator``'s own refit hooks, as defined (a subclass's or a patched one differs)
_OWN_HOOKS = tuple(ISplineCalibrator.__dict__[h] for h in _REFIT_HOOKS)
# and the methods whose steps the river face's call under the prior takes (``_river.PRIOR_STEPS``)
_river.OWN_STEPS.update((name, getattr(ISplineCalibrator, name)) for name in (*_REFIT_HOOKS, *_river.PRIOR_STEPS))


def _own_refit_hooks(cls) -> bool:
    """Whether ``cls`` keeps ``ISplineCalibrator``'s refit hooks (``_REFIT_HOOKS``), which the
    compiled refit under the prior follows."""
    return all(getattr(cls, h) is f for h, f in zip(_REFIT_HOOKS, _OWN_HOOKS, strict=True))


def _warm_score_prior(cal, centres, pos, neg, c: float):
    """``RefitCalibrator._with_score_prior`` for I-spline: the score prior's strength found by
    Newton's method from the last refit's recalibration ``(a, b)`` instead of ``(0, 0)``, and its
    pseudo-counts added by their compiled rule (``glm_refit.add_prior_pseudo_counts``, bit for bit
    ``streamcal._prior.pseudo_counts``). For probability inputs Newton's method runs on the Taylor
    moments of one pass at the start (``ispline_prior.prior_strength_taylor``; the exact kernel
    where they do not bound the move), for raw scores on passes over the row
    (``prior.prior_strength_listed``). The same maximum within rounding (``log kappa`` within
    about 1e-11 of the cold start's, the map far within 1e-9) at about a third of the cold
    start's cost: one event moves ``(a, b)`` little. A refit that finds the strength 0 starts the
    next from ``(0, 0)``. A row read through an overridden ``histogram``
    (keyed pooling) or another floor takes the engine's rule."""
    if "histogram" in cal.__dict__ or cal._PRIOR_FLOOR != "thinned":
        return RefitCalibrator._with_score_prior(cal, centres, pos, neg, c)
    B = int(centres.size)
    start = cal._prior_start
    if cal._identity:
        # from the Taylor moments at the start (``ispline_prior``), the exact kernel where they
        # do not bound the move; the row read in the histogram's own arrays (``pos`` and ``neg``
        # are those over the stored unit, the same divisions), and the prior's rate the centre
        # itself (the base rate unused)
        grid, scratch, _ = cal._prior_scratch(centres)
        floats = cal._hist.live_arrays()[0]
        base_rate = 0.5
        kappa = float(
            _config.run(
                _kips.prior_strength_kept, 0, floats, _h.SF_HEADER, B, cal._hist.stored_unit(), centres, grid,
                start, *scratch,
            )[0]
        )  # fmt: skip
    else:
        t_pos = pos.sum()
        base_rate = (float(t_pos) + c) / (float(t_pos + neg.sum()) + 2.0 * c)  # ``score_prior``'s
        kappa = float(
            _config.run(
                _kp.prior_strength_listed, 0, np.concatenate((pos, neg)), 0, B, 1.0, centres, 0, 1, base_rate, False,
                start, np.empty(3 * B),
            )
        )  # fmt: skip
    if not kappa > 0.0:
        # refuted: the next fit starts from (0, 0), as it does after events the compiled loop
        # serves without fitting the prior (its refits do not depend on which path ran)
        start[:] = 0.0
        return kappa, pos, neg
    pos, neg = pos.copy(), neg.copy()
    _config.run(
        _glm.add_prior_pseudo_counts, 0, pos, neg, kappa, centres, bool(cal._identity), base_rate,
        _glm.FLOOR_THINNED, B,
    )  # fmt: skip
    return kappa, pos, neg


def _knot_weight(cal, total: float) -> float:
    """The weight the default knot count follows: the histogram's ``total`` (real units), or,
    while the score prior holds weight in this refit, the histogram's weight before its
    pseudo-counts. The pseudo-counts are no evidence for a more flexible map: counted, their
    strength (in the thousands on a calibrated stream) would ask for about 200 coefficients
    where the data give about 12, and move the count with the strength at every refit."""
    if getattr(cal, "prior", None) is None or not cal._prior_strength > 0.0:
        return total
    if "histogram" not in cal.__dict__:
        # the window's running total: within rounding of the row's sum, which the count's
        # margin (``default_n_knots``) absorbs
        return cal._hist.window_total()
    _, pos, neg = cal.histogram()  # an outside reader's row, before the prior's pseudo-counts
    return float(pos.sum() + neg.sum())
