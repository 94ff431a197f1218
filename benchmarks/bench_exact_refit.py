"""The smooth calibrators' exact default: a refit before every prediction that follows new labels.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_exact_refit.py                 # 3 alternating rounds
    PYTHONPATH=. python benchmarks/bench_exact_refit.py --rounds 5 --n 4000

Calibrators at their defaults (``LogitGrid()``, unbounded window, ``refit_every=None``):
``PlattCalibrator``, ``ISplineCalibrator``, ``GEVCalibrator(xi="auto")`` (six shapes). Stream:
the click-like stream of ``bench_streaming_pav.py``; each calibrator first learns a warm-up of
``--warmup`` events (its histogram then has a few hundred non-empty buckets) and fits once; each
round times, on a copy of that state, ``prequential`` on the next ``--n`` events and the river
face (``predict_proba_one`` + ``learn_one``) on them.

Baselines, in the same process, in alternating rounds, by CPU time (``process_time``):

- ``full refit``: the same calibrator with the refit it had before the warm-started one (Platt
  and GEV: ``fit_glm_on_histogram`` per shape from the previous fit, then a numpy Brier score;
  I-spline: ``fit_distinct`` on the non-empty buckets). Its outputs are checked to agree with
  the calibrator's within 1e-9 first.
- ``engine alone``: the same calibrator whose refit does nothing after the first fit: the cost
  of the Python refit engine's own per-event work (the histogram copy, the bounds, the prediction and
  the LLR), the ceiling any refit can reach through the refit hooks.

Platt's and GEV's exact default runs in compiled code that does not go through the refit hooks;
``bench_glm_exact.py`` measures it against the Python engine. Here their baselines run the Python
engine.

The hook's own cost (``_refit_from_histogram`` on the warm-up's histogram plus one event) is
printed apart, in microseconds per refit.
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np
from bench_streaming_pav import click_stream

import streamcal
from streamcal import GEVCalibrator, ISplineCalibrator, PlattCalibrator
from streamcal._refit import RefitCalibrator
from streamcal.gev import fit_glm_on_histogram
from streamcal.spline.fit import fit_scaled_histogram, unit_scaled

GOALS = {  # events/s: prequential, river face
    "PlattCalibrator": (300_000, 200_000),
    "ISplineCalibrator": (300_000, 200_000),
    "GEVCalibrator": (100_000, 80_000),
}


class FullRefitGLM:
    """The Platt / GEV refit before the warm-started Newton kernel, run by the generic engine in
    Python (the calibrators' own refit is compiled and does not call the hook)."""

    _refit = RefitCalibrator._refit
    _run_ops = RefitCalibrator._run_ops
    _predict_arrays = RefitCalibrator._predict_arrays

    def _refit_from_histogram(self, centres, pos, neg):
        x = np.ascontiguousarray(self._feature(centres))
        best = None
        for xi in self._candidate_xis():
            beta = fit_glm_on_histogram(
                x, pos, neg, link=self._link, xi=xi, l2=float(self.l2), warm_start=self._beta.get(xi)
            )
            self._beta[xi] = beta
            p = self._proba_for(x, beta, xi)
            brier = float(np.dot(pos, (1.0 - p) ** 2) + np.dot(neg, p**2))
            if best is None or brier < best[0]:
                best = (brier, xi)
        self._xi_served = best[1]


class FullRefitPlatt(FullRefitGLM, PlattCalibrator):
    pass


class FullRefitGEV(FullRefitGLM, GEVCalibrator):
    pass


class FullRefitISpline(ISplineCalibrator):
    """The I-spline refit before the compiled one."""

    def _refit_from_histogram(self, centres, pos, neg):
        pos, neg, total, pos_total = unit_scaled(pos, neg)
        hint = None if self._coef is None else self._coef > 0.0
        order, inner = int(self.order), self._inner_knots
        fitted = fit_scaled_histogram(centres, pos, neg, total, order, self.n_knots, inner, hint)
        self._set_map(fitted, total, pos_total)


def engine_alone(cls):
    """``cls`` whose refit keeps its first fit: the Python engine's cost without any refit work."""

    def _refit_from_histogram(self, centres, pos, neg):
        if not self._fitted:
            cls._refit_from_histogram(self, centres, pos, neg)

    python_engine = {}
    if issubclass(cls, (PlattCalibrator, GEVCalibrator)):  # their own refit and loop are compiled
        python_engine = {k: getattr(RefitCalibrator, k) for k in ("_refit", "_run_ops", "_predict_arrays")}
    attrs = {"_refit_from_histogram": _refit_from_histogram, **python_engine}
    return type(f"EngineAlone{cls.__name__}", (cls,), attrs)


def prepared(cls, s, y, warmup):
    cal = cls()
    cal.update(s[:warmup], y[:warmup])
    cal.predict_proba(s[:1])  # the first fit
    return cal


def time_prequential(cal, s, y):
    cal = copy.deepcopy(cal)
    t0 = time.process_time()
    cal.prequential(s, y)
    return time.process_time() - t0


def time_river(cal, xs, ys):
    cal = copy.deepcopy(cal)
    t0 = time.process_time()
    for x, label in zip(xs, ys, strict=True):
        cal.predict_proba_one(x)
        cal.learn_one(x, label)
    return time.process_time() - t0


def hook_us(cal, s, y):
    cal = copy.deepcopy(cal)
    cal.update(s[:1], y[:1])
    centres, pos, neg = cal.histogram()
    reps = 200
    state = copy.deepcopy(cal)
    t0 = time.process_time()
    for _ in range(reps):
        state._refit_from_histogram(centres, pos, neg)
    return (time.process_time() - t0) / reps * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="timed events per round (GEV: a fifth)")
    parser.add_argument("--warmup", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    streamcal.use_compiled_kernels()
    s, y = click_stream(args.warmup + args.n, seed=3)
    rows = (
        ("PlattCalibrator", PlattCalibrator, FullRefitPlatt, args.n),
        ("ISplineCalibrator", ISplineCalibrator, FullRefitISpline, args.n),
        ("GEVCalibrator", GEVCalibrator, FullRefitGEV, max(args.n // 5, 50)),
    )
    print(f"warm-up {args.warmup} events, then timed events; {args.rounds} alternating rounds, CPU time, median")
    for name, cls, full_cls, n in rows:
        ts, ys = s[args.warmup : args.warmup + n], y[args.warmup : args.warmup + n]
        xs = [{"score": float(v)} for v in ts]
        lbl = [bool(v) for v in ys]
        variants = {
            "current": prepared(cls, s, y, args.warmup),
            "full refit": prepared(full_cls, s, y, args.warmup),
            "engine alone": prepared(engine_alone(cls), s, y, args.warmup),
        }
        p_now, _ = copy.deepcopy(variants["current"]).prequential(ts, ys)
        p_full, _ = copy.deepcopy(variants["full refit"]).prequential(ts, ys)
        gap = float(np.max(np.abs(p_now - p_full)))
        for kind, timer, data in (("prequential", time_prequential, (ts, ys)), ("river face", time_river, (xs, lbl))):
            times = {k: [] for k in variants}
            for _ in range(args.rounds):
                for k, cal in variants.items():
                    times[k].append(timer(cal, *data))
            rate = {k: n / float(np.median(v)) for k, v in times.items()}
            ratios = np.array(times["full refit"]) / np.array(times["current"])
            goal = GOALS[name][0 if kind == "prequential" else 1]
            print(
                f"{name:18s} {kind:11s} current {rate['current']:9,.0f}/s  full refit {rate['full refit']:9,.0f}/s "
                f"(x{float(np.median(ratios)):.2f})  engine alone {rate['engine alone']:9,.0f}/s  "
                f"goal {goal:,}: {'met' if rate['current'] >= goal else 'NOT met'}"
            )
        hooks = {k: hook_us(variants[k], ts, ys) for k in ("current", "full refit")}
        print(
            f"{name:18s} refit hook  current {hooks['current']:7.1f} us  full refit {hooks['full refit']:7.1f} us  "
            f"(x{hooks['full refit'] / hooks['current']:.1f}); max |current - full refit| over the events {gap:.1e}"
        )


if __name__ == "__main__":
    main()
