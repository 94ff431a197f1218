"""River face of every streaming binary calibrator: ``predict_proba_one`` + ``learn_one`` pairs/s.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_river_face.py            # 100,000 pairs each
    PYTHONPATH=. python benchmarks/bench_river_face.py --n 20000  # quicker
    PYTHONPATH=. python benchmarks/bench_river_face.py --n 20000 --locks  # the thread-safety table alone

Stream: the click-like stream of ``bench_streaming_pav.py`` (scores ``expit(z)``,
``z ~ N(-3, 1.5)``), one ``{"score": s}`` dict per event. Calibrators: ``PAVCalibrator`` and the
map-fitting ones (I-spline, GEV, Platt, refitted every 1,000 labels), all with a count window
of 10,000 events and 1024 logit buckets, after a warm-up of 10,000 events through the same
loop. Baseline, in the same process: river's ``linear_model.LogisticRegression`` on the same
loop. Figures are CPU time (``process_time``), best of ``--repeat`` runs.

Cost of thread safety (the second table): each calibrator's river face against the same code
without its lock, in the same process, the two runs alternating, best of ``max(--repeat, 5)`` each; the
ratio is locked time over unlocked time (goal: at most 1.10). The baselines exist only here:
for ``PAVCalibrator``, whose river face takes no lock, its packed kernels without the busy-mark
test, and, for comparison, the same fast path under a Python lock; for the map-fitting
calibrators, whose faces between refits take no lock either, the same faces with entry points
that skip the section-number test (``streamcal._kernels.deferred_face``), and, in the rows
"against the generic face", the base class's ``learn_one`` / ``predict_proba_one`` without the
lock. Each baseline is checked to give the calibrator's own outputs before it is timed.
``--locks`` runs this table alone.
"""

from __future__ import annotations

import argparse
import math
import os
import threading
import time

import numpy as np
from bench_streaming_pav import click_stream

from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator
from streamcal._kernels import deferred_face as _kd
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _h
from streamcal._kernels import ipav as _k
from streamcal._kernels import ispline as _ki
from streamcal._kernels._config import entry_point, jit, jit_noalloc
from streamcal.buckets import bucket_of_score
from streamcal.gev import _river as _gev_river
from streamcal.windows import CountWindow

WARMUP = 10_000


def makers():
    window = CountWindow(10_000)
    return {
        "PAVCalibrator": lambda: PAVCalibrator(window=window),
        "ISplineCalibrator (refit every 1,000)": lambda: ISplineCalibrator(window=window, refit_every=1000),
        "GEVCalibrator (refit every 1,000)": lambda: GEVCalibrator(window=window, refit_every=1000),
        "PlattCalibrator (refit every 1,000)": lambda: PlattCalibrator(window=window, refit_every=1000),
        "river LogisticRegression": None,
    }


def loop(model, xs, ys):
    for x, y in zip(xs, ys, strict=True):
        model.predict_proba_one(x)
        model.learn_one(x, y)


def pairs_per_second(make, xs, ys, repeat):
    best = float("inf")
    for _ in range(repeat):
        model = make()
        loop(model, xs[:WARMUP], ys[:WARMUP])
        t = time.process_time()
        loop(model, xs[WARMUP:], ys[WARMUP:])
        best = min(best, time.process_time() - t)
    return (len(xs) - WARMUP) / best


# ---------------------------------------------------------------- unlocked baselines (here only)
class _UnlockedRiverFace:
    """The streaming base class's river face without its lock (otherwise its code)."""

    def learn_one(self, x, y, w=1.0, t=None):
        s = self._score_of(x)
        label, w, t = self._check_one(y, w, t)
        hist = self._hist
        if not hist.built:  # the quantile warm-up
            self._warm_add(s, label, w, t)
            return
        if hist.grows_ring:
            self._ensure_ring(1)
        self._learn_bucket(bucket_of_score(hist.layout.cuts_list, s), s, label, w, t)

    def predict_proba_one(self, x):
        s = self._score_of(x)
        p = self._warm_proba() if not self._hist.built else self._proba_of(s)
        return {False: 1.0 - p, True: p}


@jit_noalloc(nogil=False)
def _learn_packed_unmarked(packed, s, y, w, t):
    """``ipav.pav_learn_packed_inplace`` without the busy-mark test."""
    if not (_k._score_ok(packed, s) and 0.0 <= w <= _k.MAX_WEIGHT):
        return False
    o_si, o_pf = int(packed[_k.PACK_O_SI]), int(packed[_k.PACK_O_PF])
    o_pi, end = int(packed[_k.PACK_O_PI]), int(packed[_k.PACK_END])
    sf, si = packed[_k.PACK_HEADER : o_si], packed[o_si:o_pf].view(np.int64)
    pf, pi = packed[o_pf:o_pi], packed[o_pi:end].view(np.int64)
    runs = packed[end : end + _k.RUNS_SIZE]
    _k.pav_learn_one_inplace(sf, si, pf, pi, runs, _k.pav_bucket_of(pf, s), y, w, t, sf[_k.SF_KIND])
    return True


@jit_noalloc(nogil=False)
def _proba_packed_unmarked(packed, s):
    """``ipav.pav_predict_packed`` without the busy-mark test."""
    if not _k._score_ok(packed, s):
        return -1.0
    pf = _k._map_section(packed)
    return _k.pav_proba_out(pf, _k.pav_predict_one(pf, _k.pav_bucket_of(pf, s), s))


# The deferring faces' lock-free entry points between refits without the section-number test
# (``streamcal._kernels.deferred_face``), otherwise their code.
@jit_noalloc(nogil=False)
def _hist_learn_unmarked(marks, seen, every, s, y, w, t, score_low, score_high, sf, si, cuts, guide):
    if not (marks[_kd.COUNT] + 1.0 < every and score_low <= s <= score_high and 0.0 <= w <= _kd.MAX_WEIGHT):
        return False
    b = _kd.bucket_in(cuts, guide, s)
    _h.histogram_learn_one_inplace(sf, si, b, y, w, t)
    marks[_kd.COUNT] += 1.0
    return True


@jit_noalloc(nogil=False)
def _glm_learn_unmarked(
    marks, seen, every, s, y, w, t, score_low, score_high, sf, si, cuts, guide, x, table, mom, pc, anchor, steps
):
    if not (marks[_kd.COUNT] + 1.0 < every and score_low <= s <= score_high and 0.0 <= w <= _kd.MAX_WEIGHT):
        return False
    b = _kd.bucket_in(cuts, guide, s)
    _g.glm_learn_one_inplace(sf, si, b, y, w, t, x, table, mom, pc, anchor, steps)
    marks[_kd.COUNT] += 1.0
    return True


@jit(nogil=False)
def _ispline_proba_unmarked(marks, seen, s, score_low, score_high, knots, order, coef, low, high):
    if not (score_low <= s <= score_high):
        return -1.0
    return _kd.bounded(_ki.bspline_combination_score(s, knots, order, coef), low, high)


@jit(nogil=False)
def _glm_proba_unmarked(
    marks, seen, s, score_low, score_high, identity, clip, slope, intercept, gev_link, xi, run_low, run_high, low, high
):
    if not (score_low <= s <= score_high):
        return -1.0
    return _kd.glm_proba_at(s, identity, clip, slope, intercept, gev_link, xi, run_low, run_high, low, high)


_UNMARKED = {
    "hist_learn_marked": ("bench_hist_learn_unmarked", _hist_learn_unmarked, 4),
    "glm_learn_marked": ("bench_glm_learn_unmarked", _glm_learn_unmarked, 4),
    "ispline_proba_marked": ("bench_ispline_proba_unmarked", _ispline_proba_unmarked, -1),
    "glm_proba_marked": ("bench_glm_proba_unmarked", _glm_proba_unmarked, -1),
}
_gev_river.CALLS.update({entry[0]: _gev_river._bound_on_first_call(*entry) for entry in _UNMARKED.values()})


class _UnmarkedBetweenRefits:
    """The deferring faces between refits with the entry points that skip the section-number test."""

    def _go_live_between_refits(self, lock):
        super()._go_live_between_refits(lock)
        # a name the face did not set here (it did not go live) is already replaced, or None
        if lock.learn_kind in _UNMARKED:
            lock.learn_kind = _UNMARKED[lock.learn_kind][0]
        if lock.proba_kind in _UNMARKED:
            lock.proba_kind = _UNMARKED[lock.proba_kind][0]


def unlocked_pav_class():
    packed = PAVCalibrator().update([0.5], [1])._packed
    s = 0.5
    return type(
        "UnmarkedPAVCalibrator",
        (PAVCalibrator,),
        {
            "_learn_packed": entry_point(_learn_packed_unmarked, packed, s, s, s, s),
            "_proba_packed": entry_point(_proba_packed_unmarked, packed, s),
        },
    )


class _PythonLockedPAV(PAVCalibrator):
    """For comparison: PAV's fast path under a Python lock (the design it does not use)."""

    def learn_one(self, x, y, w=1.0, t=None):
        lock = self._lock.rlock
        lock.acquire()
        try:
            super().learn_one(x, y, w, t)
        finally:
            lock.release()

    def predict_proba_one(self, x):
        lock = self._lock.rlock
        lock.acquire()
        try:
            return super().predict_proba_one(x)
        finally:
            lock.release()


def lock_pairs():
    """(name, locked maker, unlocked maker) per calibrator."""
    window = CountWindow(10_000)
    pairs = []
    for cls, kwargs in (
        (ISplineCalibrator, {"refit_every": 1000}),
        (GEVCalibrator, {"refit_every": 1000}),
        (PlattCalibrator, {"refit_every": 1000}),
    ):
        unmarked_face = type(f"Unmarked{cls.__name__}", (_UnmarkedBetweenRefits, cls), {})
        unlocked = type(f"Unlocked{cls.__name__}", (_UnlockedRiverFace, cls), {})
        pairs.append(
            (
                cls.__name__,
                lambda cls=cls, kwargs=kwargs: cls(window=window, **kwargs),
                lambda unmarked_face=unmarked_face, kwargs=kwargs: unmarked_face(window=window, **kwargs),
            )
        )
        pairs.append(
            (
                f"{cls.__name__} against the generic face",
                lambda cls=cls, kwargs=kwargs: cls(window=window, **kwargs),
                lambda unlocked=unlocked, kwargs=kwargs: unlocked(window=window, **kwargs),
            )
        )
    unmarked = unlocked_pav_class()
    pairs.insert(0, ("PAVCalibrator", lambda: PAVCalibrator(window=window), lambda: unmarked(window=window)))
    pairs.insert(
        1,
        ("PAVCalibrator under a Python lock", lambda: _PythonLockedPAV(window=window), lambda: unmarked(window=window)),
    )
    return pairs


def check_same_outputs(make_a, make_b, xs, ys, n=2000):
    a, b = make_a(), make_b()
    for x, y in zip(xs[:n], ys[:n], strict=True):
        pa, pb = a.predict_proba_one(x)[True], b.predict_proba_one(x)[True]
        if not (pa == pb or (math.isnan(pa) and math.isnan(pb))):
            msg = f"the unlocked baseline differs from the calibrator: {pb!r} against {pa!r}"
            raise AssertionError(msg)
        a.learn_one(x, y)
        b.learn_one(x, y)


def lock_cost(make_locked, make_unlocked, xs, ys, repeat, block=1000):
    """CPU time per pair of each: ``(locked, unlocked)`` seconds.

    The two models run the stream side by side, block by block (the same ``block`` pairs on
    one, then on the other, the order alternating), so that a load change on a shared machine
    falls on both; each block's time is the best of ``repeat`` passes over the whole stream.
    """
    n = len(xs) - WARMUP
    starts = range(WARMUP, len(xs), block)
    best = {True: [float("inf")] * len(starts), False: [float("inf")] * len(starts)}
    for r in range(repeat):
        models = {True: make_locked(), False: make_unlocked()}
        for model in models.values():
            loop(model, xs[:WARMUP], ys[:WARMUP])
        for k, start in enumerate(starts):
            part = slice(start, start + block)
            for locked in (True, False) if (k + r) % 2 == 0 else (False, True):
                t = time.process_time()
                loop(models[locked], xs[part], ys[part])
                best[locked][k] = min(best[locked][k], time.process_time() - t)
    return sum(best[True]) / n, sum(best[False]) / n


def lock_round_trip(n=200_000, repeat=5) -> float:
    """CPU seconds of one uncontended ``acquire()`` + ``release()`` of a re-entrant lock, best of ``repeat``."""
    lock = threading.RLock()
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(n):
            lock.acquire()
            lock.release()
        empty = time.process_time()
        for _ in range(n):
            pass
        best = min(best, ((empty - t) - (time.process_time() - empty)) / n)
    return best


def main(argv=None):
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="pairs measured per calibrator")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--locks", action="store_true", help="the thread-safety table alone")
    args = parser.parse_args(argv)
    from river import linear_model

    s, y = click_stream(WARMUP + args.n, seed=3)
    xs = [{"score": v} for v in s.tolist()]
    ys = y.tolist()
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.n:,} pairs, best of {args.repeat}")
    rates = {}
    for name, make in () if args.locks else makers().items():
        rates[name] = pairs_per_second(make or linear_model.LogisticRegression, xs, ys, args.repeat)
    for name, rate in rates.items():
        lr = rates["river LogisticRegression"]
        print(f"  {name:40s} {rate:>12,.0f} pairs/s  ({rate / lr:.2f}x river's LR)")
    repeat = max(args.repeat, 5)
    print(f"thread safety: locked against unlocked river face, side by side in blocks of 1,000 pairs, best of {repeat}")
    print(f"  (an uncontended lock acquire + release here: {lock_round_trip() * 1e9:.0f} ns)")
    for name, make_locked, make_unlocked in lock_pairs():
        check_same_outputs(make_locked, make_unlocked, xs, ys)
        locked, unlocked = lock_cost(make_locked, make_unlocked, xs, ys, repeat)
        print(
            f"  {name:40s} {locked * 1e9:>8,.0f} ns/pair locked, {unlocked * 1e9:>8,.0f} unlocked: "
            f"ratio {locked / unlocked:.3f}"
        )


if __name__ == "__main__":
    main()
