"""Streaming Venn–Abers calibration: a probability interval per score from the window's PAV fit."""

from __future__ import annotations

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import ipav as _k
from streamcal._kernels import venn_abers as _va
from streamcal._operations import OP_LEARN, OP_PREDICT, OP_PREQUENTIAL
from streamcal._validation import check_scalar, keywords_named
from streamcal.buckets import Buckets
from streamcal.isotonic.streaming import PAVCalibrator, charge
from streamcal.windows import Window

__all__ = ["VennAbersCalibrator"]

# ``merge_rule`` -> the kernels' code
_MERGE_CODES = {"mean": _va.MERGE_MEAN, "log": _va.MERGE_LOG, "consistent": _va.MERGE_CONSISTENT}


@keywords_named
class VennAbersCalibrator(PAVCalibrator):
    """Streaming Venn–Abers calibrator: for each score the pair ``(p0, p1)`` and a merged probability.

    For a score in bucket ``b``, ``p0`` is the isotonic (PAV) fit at ``b`` of the window's
    events plus the test event with label 0, ``p1`` the same with label 1: the inductive
    Venn–Abers predictor with the window as its calibration set. Under exchangeability one of
    the two is a perfectly calibrated probability (Vovk & Petej, 2014), so the interval
    ``[p0, p1]`` shows how far the window's evidence pins the probability down: it is wide
    where the window holds few events near the score, narrow where it holds many.

    The state is the one of :class:`~streamcal.isotonic.streaming.PAVCalibrator`: the
    window's histogram, by default plus the pseudo-counts
    of PAV's score prior (``prior="auto"``, the docs' page "A prior for little evidence"), and
    the PAV block stack over that row, learned the same way, on every window kind. The test
    event then joins the row as learning it would: its own weight and its ``kappa`` pseudo-events
    at the prior's rate, so the pair is the what-if fit of the calibrator's own row; where the
    prior holds, it narrows the interval and pulls the pair towards the score, and once the data
    refute the prior (``prior_strength`` 0) the row is the window's own. A prediction computes
    both what-if fits from the block stack without changing it: it sweeps the buckets of the
    block holding ``b`` and pools only the neighbouring blocks the test event reaches (never a
    full refit). With ``prior=None`` and one bucket per distinct score
    (:class:`streamcal.buckets.Edges`, a centre on each score) the pair equals batch inductive
    Venn–Abers on the window's events. The test event weighs 1 as of the last learned event
    (under decay, the window's weights as :meth:`histogram` reports them). By default (with the
    score prior) each fit then takes PAV's finite rule, as ``PAVCalibrator()`` serves its own
    fit: clipped to the rates of the window's two end runs under the BOSARIS pseudo-events
    (``finite_rule``); on a rare-event stream this takes the top end's excess off the merged
    probability, and leaves the pair alone at every score outside the two end runs.

    ``predict_proba`` serves the merged probability ``p1 / (1 - p0 + p1)`` (``merge_rule="log"``,
    optimal for the log loss among the two, Vovk & Petej 2014), the midpoint (``"mean"``) or
    ``p0 / (1 - p1 + p0)`` (``"consistent"``, under the finite rule); it lies strictly in (0, 1),
    so the log loss stays finite without pseudo-counts. Over an empty window (the pair ``(0, 1)``)
    every rule serves what PAV serves before any weight: the score's bucket centre for
    probability inputs, 1/2 otherwise. The LLR is
    ``logit(p) - logit(prior)`` with the window's finite prior ``(T1 + c) / (T + 2c)``.
    Before the bucket edges are known (a quantile warm-up), predictions are the finite prior
    of the buffered events and the interval is that prior at both ends.

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); default ``LogitGrid()``. Shorthands as in
        :class:`~streamcal.isotonic.streaming.PAVCalibrator`.
    window
        Window strategy (:mod:`streamcal.windows`); default ``Unbounded()``.
    merge_rule
        How ``predict_proba`` merges the pair: ``"log"`` (``p1 / (1 - p0 + p1)``), ``"mean"``, or
        ``"consistent"`` (``p0 / (1 - p1 + p0)``, the ``p`` with ``p = p p1 + (1 - p) p0``; inside
        a block neither what-if makes pool, the block's own rate ``k / n``). ``"consistent"`` is 0
        where ``p0`` is, so it takes the finite rule (``finite_rule=None`` turns it on, ``False``
        is refused). (Not named ``merge``: that is the method merging calibrators.)
    score_key
        Key of the score in ``x``; ``None``: ``x`` holds exactly one value.
    llr_pseudo_count
        Weight of each pseudo-event of the finite prior of the LLR (> 0).
    prior
        ``"auto"`` (default): the pair is the what-if fit of the histogram plus the score
        prior's pseudo-counts, the prior and its strength those of
        :class:`~streamcal.isotonic.streaming.PAVCalibrator` (the score itself for probability
        inputs, the base rate for raw scores). ``None``: the window's own histogram, exact
        inductive Venn–Abers.
    finite_rule
        Whether each of ``p0``, ``p1`` is clipped to ``[lo, hi]``, the rates of the window's
        two end runs under one pseudo-positive of weight ``llr_pseudo_count`` below every score
        and one pseudo-negative above: PAV's finite rule (``PAVCalibrator(finite_proba=True)``
        clips its own fit so), applied to the two what-if fits. It changes the pair only at
        scores in those end runs, where it lowers an unsupported top and raises a bottom of 0.
        ``None`` (default): on with the score prior or ``merge_rule="consistent"``, off with
        ``prior=None`` otherwise (the exact pair).

    Attributes
    ----------
    window_weight : float
        Total weight currently in the window.
    n_learned : int
        Number of events learned so far.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal import VennAbersCalibrator
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=20_000)
    >>> labels = rng.uniform(size=20_000) < scores**2        # true probability: score squared
    >>> cal = VennAbersCalibrator(buckets="uniform:64", window=1_000)
    >>> p0, p1 = cal.prequential_interval(scores, labels)
    >>> bool(np.all(p0 <= p1))
    True
    >>> lo, hi = cal.predict_interval([0.1, 0.5, 0.9])
    >>> print(np.round(lo, 3), np.round(hi, 3))
    [0.012 0.214 0.806] [0.018 0.222 0.821]
    >>> print(np.round(cal.predict_proba([0.1, 0.5, 0.9]), 3))  # p1 / (1 - p0 + p1)
    [0.018 0.22  0.809]
    >>> p0, p1 = cal.predict_interval_one({"score": 0.5})
    >>> round(p0, 3), round(p1, 3)
    (0.214, 0.222)

    References
    ----------
    Vovk, V. and Petej, I. *Venn–Abers predictors.* UAI 2014.

    Vovk, V., Petej, I. and Fedorova, V. *Large-scale probabilistic predictors with and without
    guarantees of validity.* NeurIPS 2015.

    Notes
    -----
    Thread safety: every public method is atomic with respect to the others. Learning on the
    river face keeps PAV's lock-free path; every prediction takes the lock.
    """

    def __init__(
        self,
        buckets: Buckets | int | str | None = None,
        window: Window | int | str | None = None,
        *,
        merge_rule: str = "log",
        score_key: str | None = None,
        llr_pseudo_count: float = 1.0,
        prior: str | None = "auto",
        finite_rule: bool | None = None,
    ):
        check_scalar(merge_rule, "merge_rule", choices=("log", "mean", "consistent"))
        check_scalar(finite_rule, "finite_rule", choices=(None, True, False))
        if merge_rule == "consistent" and finite_rule is False:
            msg = (
                "`merge_rule` 'consistent' needs the finite rule (it merges p0 = 0 to 0); "
                "got finite_rule=False. Use finite_rule=None or True."
            )
            raise ValueError(msg)
        self.merge_rule = merge_rule
        super().__init__(
            buckets=buckets,
            window=window,
            score_key=score_key,
            interpolation="step",
            llr_pseudo_count=llr_pseudo_count,
            finite_proba=False,
            n_jobs=1,
            prior=prior,
        )
        self.finite_rule = finite_rule

    @classmethod
    def _unit_test_params(cls):
        yield {"score_key": "is_popular"}
        yield {"score_key": "empty_server_form_handler", "buckets": "uniform:16", "merge_rule": "mean"}

    # The compiled single-score kernel of the river face, called without numba's type dispatch;
    # a class attribute compiled by its first call (as PAVCalibrator's packed kernels).
    @staticmethod
    def _predict_packed(packed, scratch, s, merge, finite):
        result = _config.try_entry_point(_va.va_predict_packed, packed, scratch, s, merge, finite)
        if result is not _config.NOT_RUN:
            return result
        compiled = _config.entry_point(_va.va_predict_packed, packed, scratch, 0.5, 0.5, 0.5)
        VennAbersCalibrator._predict_packed = staticmethod(compiled)
        return compiled(packed, scratch, s, merge, finite)

    # ------------------------------------------------------------------ intervals
    def predict_interval(self, scores) -> tuple[np.ndarray, np.ndarray]:
        """``(p0, p1)`` of each score with the current state (the state is not changed)."""
        with self._lock:
            s, b = self._check_scores_and_buckets(scores)
            if b is None:
                p = np.full(s.size, self._warm_proba())
                return p, p.copy()
            return self._intervals(b)[:2]

    def prequential_interval(self, scores, labels, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Predict ``(p0, p1)`` for each event with the state before its label, then learn it.

        Equal, element for element, to a loop of ``predict_interval_one`` then ``learn_one``.
        """
        with self._lock:
            s, b = self._check_scores_and_buckets(scores)
            y, w, t = self._check_learn_arrays(s.size, labels, weights, times, None)
            # where ``_run_ops`` writes the pairs (``_run``'s outputs are the merged probability and
            # the LLR); set only during this call, under the lock
            self._interval_out = (np.full(s.size, np.nan), np.full(s.size, np.nan))
            try:
                p, _ = self._run(OP_PREQUENTIAL, s, y, w, t, b)
                p0, p1 = self._interval_out
                warm = np.isnan(p0)  # predicted during a quantile warm-up: the prior at both ends
                p0[warm] = p[warm]
                p1[warm] = p[warm]
                return p0, p1
            finally:
                del self._interval_out

    def prequential_with_interval(self, scores, labels, *, weights=None, times=None):
        """``prequential`` and ``prequential_interval`` in one pass: ``(proba, llr, p0, p1)``, each
        event predicted with the state before its label (what replay writes for this method)."""
        with self._lock:
            s, b = self._check_scores_and_buckets(scores)
            y, w, t = self._check_learn_arrays(s.size, labels, weights, times, None)
            return self._run_with_interval(OP_PREQUENTIAL, s, y, w, t, b)

    def process_with_interval(self, scores, labels, learn_mask, *, weights=None, times=None):
        """``process`` with the interval: ``(proba, llr, p0, p1)``, NaN at the learn positions."""
        with self._lock:
            return self._run_with_interval(*self._checked_process(scores, labels, learn_mask, weights, times))

    def _run_with_interval(self, ops, s, y, w, t, b):
        # ``_run_ops`` writes the pairs where ``_interval_out`` says (set only during this call)
        self._interval_out = (np.full(s.size, np.nan), np.full(s.size, np.nan))
        try:
            p, llr = self._run(ops, s, y, w, t, b)
            p0, p1 = self._interval_out
            warm = np.isnan(p0) & ~np.isnan(p)  # predicted during a quantile warm-up: the prior at both ends
            p0[warm] = p[warm]
            p1[warm] = p[warm]
            return p, llr, p0, p1
        finally:
            del self._interval_out

    def predict_interval_one(self, x: dict) -> tuple[float, float]:
        """``(p0, p1)`` of the score in ``x`` with the current state."""
        p0, p1, _, _ = self._predict_one(x)
        return p0, p1

    # ------------------------------------------------------------------ river face
    def _predict_one(self, x: dict) -> tuple[float, float, float, float]:
        """``(p0, p1, merged, llr)`` of the score in ``x``, under the lock.

        The lock without the busy mark (``rlock``): no marked section runs meanwhile, and the
        packed kernel holds the GIL, so PAV's lock-free ``learn_one`` cannot interleave with it.
        Inside this thread's own marked section, the views' kernel instead.
        """
        with self._lock.rlock:
            s = self._score_of(x)
            if not self._hist.built:
                p = self._warm_proba()
                return p, p, p, 0.0
            if self._lock.marking:
                return tuple(float(a[0]) for a in self._intervals(np.array([self._hist.layout.bucket_of(s)])))
            finite = 1.0 if self._finite_rule() else 0.0
            return self._predict_packed(self._packed, self._sweep_scratch, s, float(self._merge_code()), finite)

    def predict_proba_one(self, x: dict) -> dict:
        p = self._predict_one(x)[2]
        return {False: 1.0 - p, True: p}

    def predict_one(self, x: dict) -> bool:
        return self._predict_one(x)[2] > 0.5

    def predict_llr_one(self, x: dict) -> float:
        return self._predict_one(x)[3]

    predict_proba_one.__doc__ = PAVCalibrator.predict_proba_one.__doc__
    predict_one.__doc__ = PAVCalibrator.predict_one.__doc__
    predict_llr_one.__doc__ = PAVCalibrator.predict_llr_one.__doc__

    # ------------------------------------------------------------------ engine
    def _pack(self) -> None:
        super()._pack()
        self._sweep_scratch = np.empty(2 * self._hist.n_buckets)  # the what-if sweeps' stack

    def _finite_rule(self) -> bool:
        """Whether the pair is fitted under the finite rule: ``finite_rule``, or where it is
        ``None``, with the score prior (``prior="auto"``) or the consistent merge, and not with
        ``prior=None`` and another merge."""
        if self.finite_rule is None:
            return self.prior is not None or self.merge_rule == "consistent"
        return bool(self.finite_rule)

    def _merge_code(self) -> int:
        """The kernels' code of ``merge_rule``."""
        return _MERGE_CODES[self.merge_rule]

    def _prior_mode(self) -> int:
        # the pair reads the exact fit (``finite_proba=False``: no clipped ends), on the row plus
        # the score prior's pseudo-counts unless ``prior=None``
        if self.prior is None:
            return 0
        return 1 if self._identity else 2

    def __setstate__(self, state):
        # a state saved before the finite rule existed loads as it was saved: without it
        if "finite_rule" not in state:
            state = {**state, "finite_rule": False}
        # a state saved while the pair read the window's own row only (its prior section says no
        # prior, its parameters the default) loads as it was saved: with ``prior=None``
        pf, pi = state.get("_pf"), state.get("_pi")
        if state.get("prior") == "auto" and type(pf) is np.ndarray and type(pi) is np.ndarray and pf.ndim == 1:
            o = _k.pav_state_sizes_before_prior(int(pi[_k.PI_B])) if pi.ndim == 1 and pi.size > _k.PI_B else -1
            if 0 <= o < pf.size - _k.PR_MODE and pf[o + _k.PR_MODE] == 0.0:
                state = {**state, "prior": None}
        super().__setstate__(state)

    # derived: not saved, rebuilt by ``_pack`` on loading
    _CACHES = (*PAVCalibrator._CACHES, "_sweep_scratch")

    def _intervals(self, b):
        n = b.size
        out = tuple(np.empty(n) for _ in range(4))
        sf, _ = self._hist.live_arrays()
        state = (sf, self._blocks_floats, self._blocks_ints, self._sweep_scratch)
        _config.run(_va.va_predict_many, n, *state, b, self._merge_code(), self._finite_rule(), *out)
        return out

    def _proba_of(self, s: float) -> float:
        return float(self._intervals(np.array([self._hist.layout.bucket_of(s)]))[2][0])

    def _llr_of(self, s: float) -> float:
        return float(self._intervals(np.array([self._hist.layout.bucket_of(s)]))[3][0])

    def _predict_arrays(self, b, s):
        return self._intervals(b)[2:]

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        if (isinstance(ops, int) and ops == OP_LEARN) or (not isinstance(ops, int) and ops.max() < OP_PREDICT):
            super()._run_ops(ops, b, s, y, w, t, out_p, out_llr)  # learn-only: PAV's batched learning
            return
        n = b.size
        intervals = self.__dict__.get("_interval_out")
        out_p0, out_p1 = (intervals[0][-n:], intervals[1][-n:]) if intervals is not None else (np.empty(n), np.empty(n))
        state = (*self._hist.live_arrays(), self._blocks_floats, self._blocks_ints, self._sweep_scratch)
        rules = (self._merge_code(), self._finite_rule())
        outs = (out_p0, out_p1, out_p, out_llr)
        if isinstance(ops, int):
            _config.run(_va.va_prequential_inplace, charge(self, n), *state, b, y, w, t, *rules, *outs)
        else:
            _config.run(_va.va_process_inplace, charge(self, n), *state, b, y, w, t, ops, *rules, *outs)
