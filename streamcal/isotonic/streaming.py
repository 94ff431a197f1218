"""Streaming PAV: isotonic calibration of a score stream over windowed buckets."""

from __future__ import annotations

import contextlib
import itertools
import math
import numbers
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from streamcal import _prior
from streamcal._calibrator_state import SavedName
from streamcal._kernels import _config
from streamcal._kernels import histogram as _h
from streamcal._kernels import ipav as _k
from streamcal._kernels._config import entry_point
from streamcal._locking import SectionLock
from streamcal._streaming import OP_PREDICT, OP_PREQUENTIAL, StreamingCalibrator
from streamcal._validation import check_scalar
from streamcal.buckets import Buckets, LogitGrid
from streamcal.isotonic._out_arrays import OutArrays
from streamcal.windows import Window

__all__ = ["PAVBlocks", "PAVCalibrator"]

# Below this many events per thread, threads cost more than they save (``n_jobs``).
MIN_EVENTS_PER_THREAD = 1 << 17
# Every state buffer that ``PAVCalibrator._pack`` makes takes the next serial number, and the
# latest is kept in ``PACK_SERIAL[0]``: a composite calibrator that bound the buffers of its
# PAVCalibrator pairs (the multiclass river face) knows each still in place while it is unchanged.
_PACK_SERIALS = itertools.count(1)
PACK_SERIAL = [0]
# Cost of learning an event into the histogram alone, relative to the per-event kernel
# (prequential, count window, 1024 buckets; docs/benchmarks.md).
_HISTOGRAM_SHARE = 0.14


def chunk_bounds(n: int, threads: int, share: float = _HISTOGRAM_SHARE) -> list[int]:
    """Chunk boundaries ``0 = c_0 < ... < c_T = n`` giving each thread the same work.

    Thread ``k`` first learns ``c_k`` events into the histogram alone (``share`` of the full
    cost each), then runs its chunk: equal work means ``share * c_k + (c_{k+1} - c_k) = C``,
    so ``c_k = C (1 - (1 - share)^k) / share`` with ``C`` set by ``c_T = n``.
    """
    per = n * share / (1.0 - (1.0 - share) ** threads)
    cuts = [round(per * (1.0 - (1.0 - share) ** k) / share) for k in range(threads)]
    return [*cuts, n]


def _prequential_from(sf, si, pf, pi, runs, b, s, y, w, t, ops, out_p, out_llr, start, stop) -> None:
    """``pav_process_from_inplace`` for prequential operations, in the faster prequential loop.

    The labels before ``start`` go into the histogram alone, the blocks are rebuilt once, and
    ``start..stop-1`` runs from there: the outputs of running everything, bit for bit.
    """
    _k.pav_learn_run_inplace(sf, si, pf, pi, runs, b, y, w, t, ops, 0, start)
    part = slice(start, stop)
    state = (sf, si, pf, pi, runs)
    _k.pav_prequential_inplace(*state, b[part], s[part], y[part], w[part], t[part], out_p[part], out_llr[part])


class _MarkingLock(SectionLock):
    """The lock of a :class:`PAVCalibrator`: a re-entrant lock that marks the packed state busy.

    Holding it (``with cal._lock:``) excludes every other holder, and, through the mark
    (``PACK_BUSY`` in the packed buffer, set while it is held and in every buffer packed
    meanwhile), the river face's lock-free calls too: they refuse a marked state and retry
    under the lock. ``rlock`` alone excludes the other holders without the mark, for a section
    whose one step on the state is a packed entry point (which the mark would refuse).
    """

    __slots__ = ("_cal", "_depth", "rlock")

    def __init__(self, cal):
        self._cal = cal
        self._depth = 0
        self.rlock = threading.RLock()

    @property
    def marking(self) -> bool:
        """Whether the lock is held (with the mark) by some thread."""
        return self._depth > 0

    def acquire(self) -> bool:
        self.rlock.acquire()
        self._depth += 1
        if self._depth == 1:
            packed = self._cal.__dict__.get("_packed")  # none while the edges are warming up
            if packed is not None:
                with _config.INTERPRETER_LOCK:  # after any interpreted entry point in flight
                    packed[_k.PACK_BUSY] = 1.0
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            packed = self._cal.__dict__.get("_packed")
            if packed is not None:
                packed[_k.PACK_BUSY] = 0.0
        self.rlock.release()


def _gil_enabled() -> bool:
    """False on a free-threaded Python running without the GIL (3.13+)."""
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


def _bound_on_first_call(name: str, kernel, n_floats: int):
    """A stand-in for the river-face kernel ``kernel``: while the process's allowance of
    interpreted events lasts (:mod:`streamcal._kernels._config`) it runs the kernel interpreted;
    then it compiles (or loads) the kernel for the packed state and ``n_floats`` float
    arguments, puts the compiled entry point in its place on the class and calls it. A process
    that never uses the river face (or never asks for an LLR) compiles none of it."""

    def first_call(packed, *args):
        result = _config.try_entry_point(kernel, packed, *args)
        if result is not _config.NOT_RUN:
            return result
        compiled = entry_point(kernel, packed, *(0.5,) * n_floats)
        setattr(PAVCalibrator, name, compiled)
        return compiled(packed, *args)

    return staticmethod(first_call)


def _with_knot_list(pi: np.ndarray, n_buckets: int) -> np.ndarray:
    """A copy of ``pi`` in the current layout: a state saved without the knot list gets one
    marked as not kept (the next full sweep over the histogram links it)."""
    ni = _k.pav_state_sizes(n_buckets)[1]
    if pi.size >= ni:
        return pi.copy()
    out = np.full(ni, _k.UNLINKED, dtype=np.int64)
    out[: pi.size] = pi
    out[_k.PI_KNOTS] = 0
    return out


class PAVBlocks(NamedTuple):
    """The blocks of a streaming PAV fit (:meth:`PAVCalibrator.blocks`): each block's first and
    last bucket and its weight by class, and the fitted value of each bucket.

    Examples
    --------
    >>> from streamcal import PAVCalibrator
    >>> cal = PAVCalibrator(buckets="uniform:4", finite_proba=False).fit([0.1, 0.3, 0.6, 0.9], [0, 1, 0, 1])
    >>> b = cal.blocks()
    >>> b.first.tolist(), b.last.tolist(), b.pos.tolist(), b.neg.tolist()
    ([0, 1, 3], [0, 2, 3], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0])
    >>> b.fitted.tolist()
    [0.0, 0.5, 0.5, 1.0]
    """

    first: np.ndarray
    last: np.ndarray
    pos: np.ndarray
    neg: np.ndarray
    fitted: np.ndarray


def _rebuild_for_check(sf, si, pf_again, pi_again, pf) -> None:
    """Rebuild the blocks of a restored state into ``pf_again``/``pi_again``. A window that holds
    no weight has inverse prior odds 0 (its LLR is 0); files written before that rule hold
    ``(T0 + c) / (T1 + c) = 1`` there, which the restored state ``pf`` takes as 0."""
    _config.run(_k.pav_rebuild_inplace, 0, sf, si, pf_again, pi_again)
    if pf_again[_k.PF_PRIOR_ODDS_INV] == 0.0 and pf[_k.PF_PRIOR_ODDS_INV] == 1.0:
        pf[_k.PF_PRIOR_ODDS_INV] = 0.0


def charge(cal, n: int) -> int:
    """The interpreted tier's charge of ``n`` events through the kernels of ``cal`` (a
    :class:`PAVCalibrator`): ``_prior.refresh_charge`` at its next refit of the score prior."""
    B = cal.n_buckets
    next_refit = cal._blocks_floats[_k.pav_state_sizes_before_prior(B) + _k.PR_NEXT] if cal._hist.built else math.inf
    return _prior.refresh_charge(float(next_refit), cal.n_learned, n, B)


class PAVCalibrator(OutArrays, StreamingCalibrator):
    """Streaming PAV calibrator: isotonic regression of the labels on the score, per event.

    The state is a windowed histogram of the scores (positive and negative weight per bucket)
    and the PAV block stack over it. Each learned event (and each event leaving the window)
    repairs only the block it touches and the neighbours that then violate monotonicity, so a
    label costs about the size of one block; a prediction is a binary search and a read. The
    blocks always equal a from-scratch PAV of the window's histogram, bit for bit. PAV's fit is
    optimal for every proper scoring rule at once (Brümmer & du Preez); with one bucket per
    distinct score it is exact batch PAV over the window's events.

    Probabilities are interpolated between bucket centres (``interpolation="linear"``, like
    scikit-learn's isotonic ``predict``) or read per bucket (``"step"``). The LLR is PAV-LLR
    over the window, ``logit(p) - logit(prior)``, kept finite by the BOSARIS rule: one
    pseudo-positive below all scores and one pseudo-negative above, each of weight
    ``llr_pseudo_count``, prior ``(T1 + c) / (T + 2c)``; it never reorders scores.

    Before any label (or when the window holds no weight) the probability is the score itself
    for probability inputs (the default logit grid) and 0.5 otherwise; the LLR is 0.

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); default ``LogitGrid()`` (1024 logit-spaced
        buckets over [1e-7, 1 - 1e-7], scores must be probabilities). An int ``n`` means
        ``LogitGrid(n)``; ``"uniform:N"`` / ``"quantile:N"`` name the strategy
        (:func:`streamcal.buckets.as_buckets`).
    window
        Window strategy (:mod:`streamcal.windows`); default ``Unbounded()``. An int ``n`` (such
        as ``100_000``) means ``CountWindow(n)``, a duration such as ``"7d"`` or ``"12h"``
        ``TimeWindow(seconds)`` (:func:`streamcal.windows.as_window`).
    score_key
        Key of the score in ``x``; ``None``: ``x`` holds exactly one value.
    interpolation
        ``"linear"`` between bucket centres, or ``"step"``.
    llr_pseudo_count
        Weight of each pseudo-event of the finite-LLR rule (> 0).
    finite_proba
        ``True`` (default): probabilities follow the same pseudo-count rule as the finite LLR:
        the PAV of the window plus one pseudo-positive below all scores and one pseudo-negative
        above, each of weight ``llr_pseudo_count``, which is ``clip(p, lo, hi)`` with ``p`` the
        exact map and ``lo``/``hi`` the rates of the two augmented end runs. They are never
        exactly 0 or 1, so one confident wrong prediction early in a stream or in a sparse window
        does not cost an infinite log loss. ``False``: the exact PAV map, which is 0 below every
        positive in the window and 1 above every negative (what scikit-learn's isotonic
        regression gives; optimal in-sample for every proper scoring rule, Brümmer & du Preez,
        "The PAV algorithm optimizes binary proper scoring rules", 2013).
    n_jobs
        Threads for the array face's long sequences (``prequential``, ``process``): ``1`` (default)
        runs on the calling thread, ``-1`` uses every core, ``None`` means 1. The sequence is cut
        into consecutive chunks; each thread learns the labels before its chunk into a copy of
        the histogram alone (several times cheaper than the per-event repairs), rebuilds the
        blocks once and runs its chunk. Outputs and the final state are the ones one thread
        gives, bit for bit; sequences shorter than 2**17 events per thread run on one thread.
    prior
        ``"auto"`` (default): with ``finite_proba=True``, PAV runs on the histogram plus the
        pseudo-counts of a prior, the score itself for probability inputs (the bucket centre's
        probability) or the window's base rate for raw scores, whose strength follows the
        evidence: strong while the score predicts as well as its best logistic recalibration,
        none once the data show it off (:mod:`streamcal._kernels.prior`; the docs' page "A
        prior for little evidence"). The blocks are then PAV of the histogram plus the prior,
        bit for bit. ``None``, or ``finite_proba=False``: no prior, the exact PAV of the window.

    Attributes
    ----------
    window_weight : float
        Total weight currently in the window.
    n_learned : int
        Number of events learned so far.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal.isotonic.streaming import PAVCalibrator
    >>> from streamcal.windows import CountWindow
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=20_000)
    >>> labels = rng.uniform(size=20_000) < scores**2        # true probability: score squared
    >>> cal = PAVCalibrator(window=CountWindow(10_000))
    >>> proba, llr = cal.prequential(scores, labels)
    >>> print(np.round(cal.predict_proba([0.1, 0.5, 0.9]), 2))
    [0.01 0.24 0.81]
    >>> cal.learn_one({"score": 0.5}, True)
    >>> round(cal.predict_proba_one({"score": 0.5})[True], 2), cal.window_weight
    (0.24, 10000.0)

    References
    ----------
    Brümmer, N. and du Preez, J. *The PAV algorithm optimizes binary proper scoring rules.*

    Notes
    -----
    Thread safety: every public method is atomic with respect to the others, as for every
    streaming calibrator (``docs/architecture.md``, "Thread safety"). The river face's common
    calls take no lock: their compiled kernels hold the GIL, so each runs whole between two
    steps of any other Python thread, and they refuse (changing nothing) while the array face
    or any other multi-step section holds the lock and marks the state busy; the call then
    waits for the lock and runs under it.
    """

    def __init__(
        self,
        buckets: Buckets | int | str | None = None,
        window: Window | int | str | None = None,
        score_key: str | None = None,
        interpolation: str = "linear",
        llr_pseudo_count: float = 1.0,
        finite_proba: bool = True,
        n_jobs: int | None = 1,
        prior: str | None = "auto",
    ):
        check_scalar(interpolation, "interpolation", choices=("linear", "step"))
        check_scalar(finite_proba, "finite_proba", choices=(True, False))
        check_scalar(prior, "prior", choices=("auto", None))
        if n_jobs is not None and n_jobs != -1:
            check_scalar(n_jobs, "n_jobs", numbers.Integral, low=1)
        self.interpolation = interpolation
        self.finite_proba = finite_proba
        self.n_jobs = n_jobs
        self.prior = prior
        self._fast_learn = self._fast_predict = False  # until the edges are known (``_pack``)
        super().__init__(buckets=buckets, window=window, score_key=score_key, llr_pseudo_count=llr_pseudo_count)

    @classmethod
    def _unit_test_params(cls):
        # river's checks feed the Phishing dataset (9 features); the calibrator reads one of
        # them, a probability-valued feature, as its score.
        yield {"score_key": "is_popular"}
        yield {
            "score_key": "empty_server_form_handler",
            "buckets": LogitGrid(n_buckets=16),
            "interpolation": "step",
        }

    # ------------------------------------------------------------------ river face (fast paths)
    # The common calls are checked inline (a method call costs about as much as the checks):
    # ``x`` a one-key dict holding a float score in range, a bool label, a float weight, no
    # time. Anything else takes the full checks, which raise the documented errors. The
    # ``_fast_*`` flags fold the per-calibrator conditions (no ``score_key``, edges known, no
    # time window for learning) into one test; the kernels take the packed state and check
    # the score's range and the weight, refusing (changing nothing) what the full checks reject.
    #
    # Threads. The fast paths take no lock (a Python lock round trip per call costs about as much
    # as the kernels: docs/benchmarks.md, "Thread safety"). They are atomic
    # all the same: (1) the packed entry points hold the GIL while they run (``nogil=False``), so
    # no other Python thread runs a step between a call's first read and its last write, and
    # two such calls never overlap; (2) everything else that reads or writes the state does so
    # holding ``self._lock`` (a ``_MarkingLock``), and the sections that take several steps or
    # release the GIL (the array face's kernels, ring growth, the warm-up, the properties) mark
    # the packed buffer busy on entry, and every buffer packed during them is born busy. An
    # entry point called on a marked buffer changes nothing and refuses; its caller then waits
    # for the lock and calls again under it (``rlock``, without the mark: under the lock no
    # marked section runs, and the entry point is the section's one step on the state). A fast
    # call therefore either ran whole before the marked section began (setting the mark needs
    # the GIL that the call held) or is refused: some serial order. A buffer replaced during a
    # section keeps its mark, so a call that read ``self._packed`` just before the replacement
    # is refused too. A call made by the thread that holds a marked section (re-entrant use)
    # runs on the views' kernels instead. Without a GIL (a free-threaded Python) the fast paths
    # are off (``_pack``) and every call takes the lock.
    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        if self._fast_learn and type(x) is dict and t is None:
            try:
                (s,) = x.values()  # exactly one value (else the full checks below raise)
            except ValueError:
                pass
            else:
                # the kernel checks the score's range and the weight's, and reads True as 1.0
                if (
                    type(s) is float
                    and (y is True or y is False)
                    and type(w) is float
                    and self._learn_packed(self._packed, s, y, w, 0.0)
                ):
                    return
        with self._lock.rlock:
            if not self._hist.built or self._hist.uses_times:  # quantile warm-up; time windows grow their ring
                super().learn_one(x, y, w, t)  # a marked section
                return
            s = self._score_of(x)
            label, w, t = self._check_one(y, w, t)
            if self._lock.marking:  # called inside this thread's own marked section: the views' kernel
                self._learn_bucket(self._hist.layout.bucket_of(s), s, label, w, t)
            elif not self._learn_packed(self._packed, s, label, w, t):  # it refuses what the checks reject
                raise RuntimeError(f"internal error: the checked event (score {s!r}, weight {w!r}) was refused")

    def predict_proba_one(self, x: dict) -> dict:
        if self._fast_predict and type(x) is dict:
            try:
                (s,) = x.values()
            except ValueError:
                pass
            else:
                if type(s) is float:
                    p = self._proba_packed(self._packed, s)
                    if p >= 0.0:  # -1.0: out of range (the full checks below raise), or busy
                        return {False: 1.0 - p, True: p}
        with self._lock.rlock:
            s = self._score_of(x)
            if not self._hist.built:
                p = self._warm_proba()
            elif self._lock.marking:  # inside this thread's own marked section
                p = self._proba_of(s)
            else:
                p = self._proba_packed(self._packed, s)
        return {False: 1.0 - p, True: p}

    def predict_one(self, x: dict) -> bool:
        return self.predict_proba_one(x)[True] > 0.5

    def predict_llr_one(self, x: dict) -> float:
        with self._lock.rlock:
            s = self._score_of(x)
            if not self._hist.built:
                return 0.0
            return self._llr_of(s) if self._lock.marking else self._llr_packed(self._packed, s)

    learn_one.__doc__ = StreamingCalibrator.learn_one.__doc__
    predict_proba_one.__doc__ = StreamingCalibrator.predict_proba_one.__doc__
    predict_one.__doc__ = StreamingCalibrator.predict_one.__doc__
    predict_llr_one.__doc__ = StreamingCalibrator.predict_llr_one.__doc__

    # ------------------------------------------------------------------ inspection
    def blocks(self) -> PAVBlocks:
        """The PAV blocks of the window's histogram as values, in score order (copies).

        ``first`` and ``last`` are each block's first and last bucket, ``pos`` and ``neg`` its
        weight by class (stored units), ``fitted`` the fitted value of every bucket between the
        first and the last non-empty one. Empty before the bucket edges are known.
        """
        with self._lock:
            if not self._hist.built:
                empty = np.zeros(0)
                return PAVBlocks(empty.astype(np.intp), empty.astype(np.intp), empty, empty, empty)
            pf, pi = self._blocks_floats, self._blocks_ints
            v = _k.pav_blocks_view(pf, pi)
            first = []
            f = int(pi[_k.PI_HEAD])
            while f != -1 and len(first) <= pi[_k.PI_B]:
                first.append(f)
                f = int(v["bnext"][f])
            at = np.array(first, dtype=np.intp)
            return PAVBlocks(at, v["bend"][at].astype(np.intp), v["bpos"][at].copy(), v["bneg"][at].copy(), v["fit"])

    @property
    def prior_strength(self) -> float:
        """The score prior's strength: pseudo-events per event of the window in each bucket
        (0: the data's own map; always 0 with ``prior=None`` or ``finite_proba=False``)."""
        with self._lock:
            if not self._hist.built:
                return 0.0
            B = int(self._blocks_ints[_k.PI_B])
            return float(self._blocks_floats[_k.pav_state_sizes_before_prior(B) + _k.PR_KAPPA])

    def map_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the block stack's two arrays (laid out by :mod:`streamcal._kernels.ipav`), for
        bit-for-bit comparisons of two calibrators' maps; None before the edges are known."""
        with self._lock:
            if not self._hist.built:
                return None
            return self._blocks_floats.copy(), self._blocks_ints.copy()

    def packed_state(self) -> np.ndarray | None:
        """The live state packed in one float64 buffer (as :meth:`holding_packed_state`), without
        the lock, for a composite calibrator's per-event kernels: like this calibrator's own
        river face they hold the GIL and refuse a buffer marked busy."""
        return self.__dict__.get("_packed")

    @contextlib.contextmanager
    def holding_packed_state(self):
        """Hold this calibrator's lock and yield its live state packed in one float64 buffer (laid
        out by ``streamcal._kernels.ipav.pack_state``), or None before the bucket edges are known.

        For a composite calibrator's kernel that runs several calibrators' states in one call
        (``PairwiseCouplingCalibrator``): the buffer is the state, and the kernel may learn into
        it while the lock is held (the buffer is marked busy, so the lock-free river-face calls
        of other threads wait).
        """
        with self._lock:
            yield self.__dict__.get("_packed")

    def _init_lock(self) -> None:
        self._lock = _MarkingLock(self)

    # the blocks under their saved names (the checks of a restored state read them so)
    _pf = SavedName("_blocks_floats")
    _pi = SavedName("_blocks_ints")

    # ------------------------------------------------------------------ engine (fused kernels)
    def _init_map_state(self) -> None:
        self._init_map_state_arrays()
        self._pack()
        sf, _ = self._hist.live_arrays()
        _config.run(_k.pav_refresh_extremes_inplace, 0, sf, self._blocks_floats, self._blocks_ints, self._runs)

    def _init_map_state_arrays(self) -> None:
        self._linear = self.interpolation == "linear"
        self._blocks_floats, self._blocks_ints = _k.empty_pav_state(
            self._hist.layout.centres,
            float(self.llr_pseudo_count),
            self._linear,
            self._identity,
            self._hist.layout.cuts,
            finite_proba=bool(self.finite_proba),
            prior_mode=self._prior_mode(),
        )

    def _prior_mode(self) -> int:
        """The prior section's ``PR_MODE``: 0 without a prior (``prior=None`` or the exact map of
        ``finite_proba=False``), 1 for the score (probability inputs), 2 for the base rate."""
        if self.prior is None or not self.finite_proba:
            return 0
        return 1 if self._identity else 2

    def _pack(self) -> None:
        """Put the four state arrays into one buffer (``_packed``) and rebind them as its views.

        Called whenever one of them is replaced (a new map state, a grown ring, unpickling):
        the river face's kernels read the buffer, the array face's the views. A buffer packed
        while the lock is held is born marked busy (see the notes above ``learn_one``).
        """
        state = (*self._hist.live_arrays(), self._blocks_floats, self._blocks_ints)
        packed, sf, si, pf, pi = _k.pack_state(*state, self._score_low, self._score_high)
        packed[_k.PACK_BUSY] = 1.0 if self._lock.marking else 0.0
        self._packed, self._blocks_floats, self._blocks_ints, self._runs = packed, pf, pi, _k.packed_runs(packed)
        PACK_SERIAL[0] = next(_PACK_SERIALS)  # after the new buffer is in place (see PACK_SERIAL)
        self._hist.adopt_arrays(sf, si)
        fast = _gil_enabled()  # the lock-free calls rely on the GIL
        self._fast_learn = fast and self.score_key is None and not self._hist.uses_times
        self._fast_predict = fast and self.score_key is None

    def _histogram_replaced(self) -> None:
        self._pack()

    def _rebuild_map_after_merge(self, other) -> None:
        # a full sweep over the merged histogram; the whole-weights flag covers both parts' events
        integral = min(int(self._blocks_ints[_k.PI_INTEGRAL]), int(other._blocks_ints[_k.PI_INTEGRAL]))
        self._init_map_state_arrays()
        self._blocks_ints[_k.PI_INTEGRAL] = integral
        self._pack()
        self._rebuild_blocks()  # the prior's strength refitted to the merged histogram

    # derived from the state and the parameters: not saved, rebuilt by ``_pack`` on loading
    _CACHES = (*StreamingCalibrator._CACHES, "_packed", "_runs", "_fast_learn", "_fast_predict")

    # The compiled single-score kernels of the river face, called without numba's per-call type
    # dispatch (``entry_point``). The same for every instance, so they are class attributes, each
    # compiled by its first call: held by an instance, they would lead river's memory walk
    # (``_raw_memory_usage``, ``check_bounded_memory_growth``) into numba's registries, which are
    # megabytes large and break the walk once any numba function has been freed.
    _learn_packed = _bound_on_first_call("_learn_packed", _k.pav_learn_packed_inplace, 4)
    _proba_packed = _bound_on_first_call("_proba_packed", _k.pav_predict_packed, 1)
    _llr_packed = _bound_on_first_call("_llr_packed", _k.pav_llr_packed, 1)

    # the PAV state's saved names: ``_pf``/``_pi`` hold the blocks' float and int records
    _SAVED_BLOCKS = (("_pf", "_blocks_floats"), ("_pi", "_blocks_ints"))

    def __getstate__(self):
        state = super().__getstate__()
        for key, name in self._SAVED_BLOCKS:
            if name in state:
                state[key] = state.pop(name)
        return state

    def __setstate__(self, state):
        # a state saved before the prior existed (its blocks in a layout without the prior's
        # section) loads as it was saved: without a prior (the exact map of ``finite_proba=False``
        # keeps the default, which has none either). Any other state must name its prior.
        pf = state.get("_pf")
        if "prior" not in state and type(pf) is np.ndarray and type(state.get("_pi")) is np.ndarray and pf.ndim == 1:
            B = int(state["_pi"][_k.PI_B]) if state["_pi"].size > _k.PI_B else -1
            older = (_k.PF_HEADER + (_k._PF_RECORD - 1 + _k._STACK_RECORD + 1) * B, _k.pav_state_sizes_before_prior(B))
            if B > 0 and pf.size in older:
                state = {**state, "prior": "auto" if state.get("finite_proba") is False else None}
        super().__setstate__(state)  # checks the state under its saved names, then rebuilds the histogram
        for key, name in self._SAVED_BLOCKS:
            if key in self.__dict__:
                self.__dict__[name] = self.__dict__.pop(key)
        self._fast_learn = self._fast_predict = False  # still warming up, unless packed below
        if state.get("_pf") is not None:
            self._upgrade_map_state()
            self._pack()

    def _check_loaded_map(self) -> None:
        """The PAV state of a restored calibrator: ``_pf``/``_pi`` of the sizes the bucket count
        gives, the header of ``_pf`` equal to the parameters, its sections of bucket centres and
        cuts equal to ``_centres`` and ``_cuts``, and the blocks, fitted values and finite-LLR
        values equal, bit for bit, to a rebuild from the histogram (the incremental repairs keep
        them equal to one). The rebuild runs on copies, after the histogram's checks: whatever
        the file holds, no kernel reads an index it did not write. Only the stack scratch, which
        every sweep writes before reading, is not compared. A ``_pf`` in the layout of format
        version 1 is rebuilt instead (:meth:`_upgrade_map_state`).
        """
        from streamcal import _state_check as c

        B = int(self._centres.size)
        if self._linear is not (self.interpolation == "linear"):
            c.fail(f"`_linear`: expected {self.interpolation == 'linear'} for interpolation={self.interpolation!r}.")
        nf, ni = _k.pav_state_sizes(B)
        pi = c.need_array(self._pi, "_pi", np.int64)
        if pi.size not in (ni, _k.pav_state_sizes_before_knots(B)):  # the second: upgraded on loading
            c.fail(f"`_pi`: expected {ni} values for {B} buckets; found {pi.size}.")
        pf = c.need_array(self._pf, "_pf", np.float64)
        if int(pi[_k.PI_B]) != B:
            c.fail(f"`_pi` bucket count: expected {B}; found {int(pi[_k.PI_B])}.")
        flags = (("whole-number flag", _k.PI_INTEGRAL), ("exact flag", _k.PI_EXACT), ("knot-list flag", _k.PI_KNOTS))
        for name, i in flags:
            if int(pi[i]) not in (0, 1):
                c.fail(f"`_pi` {name}: expected 0 or 1; found {int(pi[i])}.")
        # format version 1, and version 2 before the prior's section: rebuilt on loading
        version_1 = _k.PF_HEADER + (_k._PF_RECORD - 1 + _k._STACK_RECORD + 1) * B
        if pf.size in (version_1, _k.pav_state_sizes_before_prior(B)):
            return
        if pf.size != nf:
            c.fail(f"`_pf`: expected {nf} values for {B} buckets; found {pf.size}.")
        header = {
            "pseudo-count": (_k.PF_PSEUDO, float(self.llr_pseudo_count)),
            "interpolation flag": (_k.PF_LINEAR, 1.0 if self._linear else 0.0),
            "probability-inputs flag": (_k.PF_PROBABILITY_INPUTS, 1.0 if self._identity else 0.0),
            "finite-probability flag": (_k.PF_FINITE_PROBA, 1.0 if self.finite_proba else 0.0),
        }
        for name, (i, want) in header.items():
            if not c.same_float(pf[i], want):
                c.fail(f"`_pf` {name}: expected {want!r} (from the parameters); found {float(pf[i])!r}.")
        grid = pf[_k.PF_GRID_KIND : _k.PF_GRID_INV_STEP + 1]
        if grid[0] not in (0.0, 1.0, 2.0) or not np.isfinite(grid).all():
            c.fail("`_pf` bucket search grid: expected a grid kind of 0, 1 or 2 and finite coefficients.")
        cuts_at = _k.PF_HEADER + (_k._PF_RECORD + _k._STACK_RECORD) * B
        if not (
            np.array_equal(_k.pav_field(pf, B, _k._CENTRES), self._centres)
            and np.array_equal(pf[cuts_at : cuts_at + B - 1], self._cuts)
        ):
            c.fail("`_pf` bucket centres and cuts: expected copies of `_centres` and `_cuts`.")
        # every record in range, also outside the knots' span, where the kernels never read
        links = (("owner", _k._OWNER), ("block end", _k._BEND), ("previous", _k._BPREV), ("next", _k._BNEXT))
        for name, field in links:
            values = _k.pav_field(pi, B, field)
            if ((values < -1) | (values >= B)).any():
                k = int(np.flatnonzero((values < -1) | (values >= B))[0])
                c.fail(f"`_pi` {name} of bucket {k}: expected -1 or a bucket in [0, {B - 1}]; found {int(values[k])}.")
        owners = _k.pav_field(pf, B, _k._FIT_OWNER)
        bad = ~((owners == -1.0) | ((owners >= 0.0) & (owners < B) & (owners == np.floor(owners))))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            c.fail(f"`_pf` block owner of bucket {k}: expected -1 or a bucket in [0, {B - 1}]; found {owners[k]!r}.")
        c.need_finite(_k.pav_field(pf, B, _k._FIT), "_pf fitted values", low=0.0, high=1.0)
        c.need_finite(_k.pav_field(pf, B, _k._BPOS), "_pf block positive weights", low=0.0)
        c.need_finite(_k.pav_field(pf, B, _k._BNEG), "_pf block negative weights", low=0.0)
        self._check_loaded_prior(pf, B)
        pf_again, pi_again = pf.copy(), _with_knot_list(pi, B)
        _rebuild_for_check(self._sf, self._si, pf_again, pi_again, pf)
        pi_again = pi_again[: pi.size]  # a layout without the knot list: the rest compared
        scratch_f = slice(_k.PF_HEADER + _k._PF_RECORD * B, cuts_at)
        scratch_i = slice(_k.PI_HEADER + _k._PI_RECORD * B, _k.pav_state_sizes_before_knots(B))
        pf_again[scratch_f] = pf[scratch_f]
        pi_again[scratch_i] = pi[scratch_i]
        if pi.size != ni:  # its flag follows the rebuild's
            pi_again[_k.PI_KNOTS] = pi[_k.PI_KNOTS]
        # inside a block the records of the block fields hold the sweep's checkpoints, which
        # depend on the path the repairs took: not compared, the rebuild's taken
        inside = _k.pav_field(pi_again, B, _k._OWNER) != np.arange(B)
        checkpoints = [(pf, pf_again, _k._BPOS), (pf, pf_again, _k._BNEG), (pi, pi_again, _k._BEND)]
        rebuilt = [_k.pav_field(again, B, field)[inside] for _, again, field in checkpoints]
        for loaded, again, field in checkpoints:
            _k.pav_field(again, B, field)[inside] = _k.pav_field(loaded, B, field)[inside]
        for name, loaded, again, header, record in (
            ("_pf", pf, pf_again, _k.PF_HEADER, _k._PF_RECORD),
            ("_pi", pi, pi_again, _k.PI_HEADER, _k._PI_RECORD),
        ):
            differ = np.flatnonzero(loaded.view(np.int64) != again.view(np.int64))  # bit for bit
            if differ.size:
                i = int(differ[0])
                k, field = divmod(i - header, record)
                where = f"header slot {i}" if i < header else f"bucket {k} field {field}"
                c.fail(
                    f"`{name}` {where}: the PAV blocks do not match the histogram (a rebuild from "
                    f"it gives {again[i].item()!r}; found {loaded[i].item()!r})."
                )
        for (loaded, _, field), values in zip(checkpoints, rebuilt, strict=True):
            _k.pav_field(loaded, B, field)[inside] = values

    def _check_loaded_prior(self, pf: np.ndarray, B: int) -> None:
        """The prior's section: its mode from the parameters, a strength in ``[0, KAPPA_MAX]``,
        a base rate in (0, 1), a positive floor and the next refresh's count (the augmented row is
        compared with a rebuild with the blocks)."""
        from streamcal import _state_check as c
        from streamcal._kernels import prior as _kp

        o = _k.pav_state_sizes_before_prior(B)
        mode = self._prior_mode()
        if not c.same_float(pf[o + _k.PR_MODE], float(mode)):
            found = float(pf[o + _k.PR_MODE])
            c.fail(f"`_pf` prior mode: expected {float(mode)!r} (from the parameters); found {found!r}.")
        kappa = float(pf[o + _k.PR_KAPPA])
        if not (0.0 <= kappa <= _kp.KAPPA_MAX) or (mode == 0 and kappa != 0.0):
            want = f"a number in [0, {_kp.KAPPA_MAX}] (0 without a prior)"
            c.fail(f"`_pf` prior strength: expected {want}; found {kappa!r}.")
        if not 0.0 < float(pf[o + _k.PR_RATE]) < 1.0:
            c.fail(f"`_pf` prior base rate: expected a number in (0, 1); found {float(pf[o + _k.PR_RATE])!r}.")
        if not 0.0 < float(pf[o + _k.PR_FLOOR]) < np.inf:
            c.fail(f"`_pf` prior floor: expected a positive finite number; found {float(pf[o + _k.PR_FLOOR])!r}.")
        if not np.isfinite(pf[o + _k.PR_A : o + _k.PR_B + 1]).all():
            c.fail("`_pf` prior's recalibration coefficients: expected finite numbers.")
        nxt = float(pf[o + _k.PR_NEXT])
        if not (nxt >= 0.0 and (mode != 0 or nxt == np.inf) and (mode == 0 or nxt < np.inf)):
            c.fail(f"`_pf` prior's next refresh: expected a count >= 0 (infinite without a prior); found {nxt!r}.")

    def _upgrade_map_state(self) -> None:
        """Rebuild the blocks of a state saved in an older layout of ``pf`` (streamcal 0.1.0
        kept each block's rate in every bucket: records of 4 fields instead of 5).

        The blocks are a function of the histogram: a full sweep gives the saved ones bit for
        bit (the incremental blocks equal a from-scratch sweep after every update), and the
        finite-LLR values are recomputed from them. The sticky whole-number flag is kept. (Such
        states may also predate the knots' span copied into ``pf``: the sweep writes it.)
        """
        B = int(self._blocks_ints[_k.PI_B])
        if self._blocks_ints.size == _k.pav_state_sizes_before_knots(B):  # no knot list: linked by a rebuild
            self._blocks_ints = _with_knot_list(self._blocks_ints, B)
            if self._blocks_floats.size == _k.pav_state_sizes(B)[0]:
                state = (*self._hist.live_arrays(), self._blocks_floats, self._blocks_ints)
                _config.run(_k.pav_rebuild_inplace, 0, *state)  # packed afterwards: no end runs' scratch yet
                return
        if self._blocks_floats.size == _k.pav_state_sizes(B)[0]:
            return
        integral = int(self._blocks_ints[_k.PI_INTEGRAL])
        self._init_map_state_arrays()
        self._blocks_ints[_k.PI_INTEGRAL] = integral
        self._rebuild_blocks()

    def _rebuild_blocks(self) -> None:
        """The blocks from a full sweep of the histogram (O(buckets): it states no events), after
        refitting the prior's strength when a refresh is due (fresh blocks over a histogram that
        holds events: a merge, an upgraded state)."""
        runs = self.__dict__.get("_runs", _k.unset_runs())  # none yet while a loaded state is upgraded
        state = (*self._hist.live_arrays(), self._blocks_floats, self._blocks_ints, runs)
        _config.run(_k.pav_refit_prior_and_rebuild_inplace, 0, *state)

    def _learn_bucket(self, b: int, s: float, y: float, w: float, t: float) -> None:
        sf, si = self._hist.live_arrays()
        kind = sf[_h.SF_KIND]
        state = (sf, si, self._blocks_floats, self._blocks_ints, self._runs)
        _config.run(_k.pav_learn_one_inplace, 1, *state, b, y, w, t, kind)

    # one score through the array face's kernel, which a marked section may call (the river face
    # calls the packed entry points itself)
    def _proba_of(self, s: float) -> float:
        return float(self._predict_arrays(np.array([self._hist.layout.bucket_of(s)]), np.array([s]))[0][0])

    def _llr_of(self, s: float) -> float:
        return float(self._predict_arrays(np.array([self._hist.layout.bucket_of(s)]), np.array([s]))[1][0])

    def _threads(self, n: int) -> int:
        threads = (os.cpu_count() or 1) if self.n_jobs == -1 else (self.n_jobs or 1)
        return min(threads, n // MIN_EVENTS_PER_THREAD)

    def _checked_buckets(self, s):
        threads = self._threads(s.size)
        if threads < 2:
            return super()._checked_buckets(s)
        b = np.empty(s.size, dtype=np.intp)
        at = np.linspace(0, s.size, threads + 1).astype(np.intp).tolist()
        args = (self._hist.layout.cuts, self._hist.layout.guide, self._score_low, self._score_high)
        with ThreadPoolExecutor(threads) as pool:
            jobs = [pool.submit(_h.check_bucket_index, *args, s[lo:hi], b[lo:hi]) for lo, hi in pairwise(at)]
        for lo, job in zip(at, jobs, strict=False):
            bad = job.result()  # re-raises a failure
            if bad >= 0:
                return b, lo + bad
        return b, -1

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        state = (*self._hist.live_arrays(), self._blocks_floats, self._blocks_ints, self._runs)
        threads = self._threads(b.size)
        prequential = isinstance(ops, int) and ops == OP_PREQUENTIAL
        if threads < 2 and prequential:
            _config.run(_k.pav_prequential_inplace, charge(self, b.size), *state, b, s, y, w, t, out_p, out_llr)
            return
        if isinstance(ops, int):
            ops = np.full(b.size, ops, dtype=np.int64)
        if threads < 2 or ops.max() < OP_PREDICT:  # learn-only: one histogram pass is cheaper
            _config.run(_k.pav_process_inplace, charge(self, b.size), *state, b, s, y, w, t, ops, out_p, out_llr)
            return
        cuts = chunk_bounds(ops.size, threads)
        states = [state] + [tuple(a.copy() for a in state) for _ in range(threads - 1)]  # before any runs
        run = _prequential_from if prequential else _k.pav_process_from_inplace
        with ThreadPoolExecutor(threads) as pool:  # the kernels release the GIL
            jobs = [
                pool.submit(run, *state, b, s, y, w, t, ops, out_p, out_llr, lo, hi)
                for state, (lo, hi) in zip(states, pairwise(cuts), strict=True)
            ]
        for job in jobs:
            job.result()
        for mine, last in zip(states[0], states[-1], strict=True):
            mine[:] = last

    def _predict_arrays(self, b, s, out=None):
        out_p, out_llr = (np.empty(s.size), np.empty(s.size)) if out is None else out
        _config.run(_k.pav_predict_many, s.size, self._blocks_floats, b, s, out_p, out_llr)
        return out_p, out_llr
