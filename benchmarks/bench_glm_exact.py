"""Platt and GEV at their exact default: the compiled refit loop against the Python engine.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_glm_exact.py                 # 3 alternating rounds
    PYTHONPATH=. python benchmarks/bench_glm_exact.py --rounds 5 --n 4000 --old 029de32

``PlattCalibrator()`` and ``GEVCalibrator()`` (``xi="auto"``: six shapes) at their defaults
(``LogitGrid()``, unbounded window, ``prior="auto"``, ``refit_every=None``: a refit before every
prediction that follows new labels). Stream: the click-like stream of ``bench_streaming_pav.py``.
Two states: ``long`` after a warm-up of ``--warmup`` events (a few hundred non-empty buckets; the
score prior's strength is 0 there, certified without its kernel), and ``cold``, from the first
event (the prior's strength is > 0 and its kernel runs at every refit). Each round times, on a
copy of the state, ``prequential`` on the next ``--n`` events (GEV: a fifth) and the river face
(``predict_proba_one`` + ``learn_one``) on them.

Baselines, in the same process, in alternating rounds, by CPU time (``process_time``):

- ``python engine``: the same calibrator run by the generic refit engine in Python, one event
  at a time (``streamcal._refit.RefitCalibrator``'s ``_refit``, ``_run_ops`` and
  ``_predict_arrays``: the score prior by ``streamcal._prior.score_prior``, then the
  warm-started Newton kernel shape by shape): the exact default before the compiled loop.
- ``full refit``: the python engine with ``fit_glm_on_histogram`` per shape from the previous
  fit and a numpy Brier score.

- ``code before`` (with ``--old REV``): ``PlattCalibrator`` and ``GEVCalibrator`` as they were at
  git revision ``REV`` (that revision's ``streamcal/gev/calibrator.py``, ``streamcal/gev/_river.py``,
  ``streamcal/_kernels/glm_refit.py``, ``streamcal/_kernels/gev.py`` and, where it exists,
  ``streamcal/gev/_logistic.py`` (GEV's logistic member), loaded from a temporary
  directory on this tree's other modules, with their own compiled entry points), e.g.
  ``--old 029de32``: before the prior's warm refit.

The largest difference of the served probabilities from the python engine's is printed (the
tests compare both with a converged full refit: within 1e-9), and from the code before's.
"""

from __future__ import annotations

import argparse
import atexit
import copy
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_streaming_pav import click_stream

import streamcal
from streamcal import GEVCalibrator, PlattCalibrator
from streamcal._refit import RefitCalibrator
from streamcal.gev import fit_glm_on_histogram

GOALS = {"PlattCalibrator": (300_000, 200_000), "GEVCalibrator": (100_000, 80_000)}  # prequential, river face

PYTHON_ENGINE = {
    "_refit": RefitCalibrator._refit,
    "_run_ops": RefitCalibrator._run_ops,
    "_predict_arrays": RefitCalibrator._predict_arrays,
}


def python_engine(cls):
    """``cls`` run by the generic engine in Python, event by event."""
    return type(f"PythonEngine{cls.__name__}", (cls,), dict(PYTHON_ENGINE))


def full_refit(cls):
    """The python engine with a damped full refit per shape (``fit_glm_on_histogram``)."""

    def _refit_from_histogram(self, centres, pos, neg):
        x = np.ascontiguousarray(self._feature(centres))
        if getattr(self, "_has_member", bool)() and self._prior_strength > 0.0:  # GEV's logistic member
            warm = self._logit_beta
            self._logit_beta = fit_glm_on_histogram(x, pos, neg, link="logit", l2=float(self.l2), warm_start=warm)
            return
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

    return type(f"FullRefit{cls.__name__}", (cls,), {**PYTHON_ENGINE, "_refit_from_histogram": _refit_from_histogram})


def calibrators_at(rev: str) -> dict:
    """``{name: class}`` of the two calibrators at git revision ``rev`` (see the module notes):
    the revision's GEV and GLM-refit kernel modules, river face and calibrator module written to a
    temporary directory (numba caches the kernels next to them) and imported from there, each
    reading the others at that revision (the river face's cache of compiled entry points too:
    the revisions' packed buffers may be laid out differently)."""
    root = Path(__file__).resolve().parent.parent
    where = Path(tempfile.mkdtemp(prefix="bench-glm-exact-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    loaded = {}
    files = (
        ("gev", "streamcal/_kernels/gev.py"),
        ("glm_refit", "streamcal/_kernels/glm_refit.py"),
        ("river", "streamcal/gev/_river.py"),
        ("logistic", "streamcal/gev/_logistic.py"),  # GEV's logistic member (absent at older revisions)
        ("calibrator", "streamcal/gev/calibrator.py"),
    )
    for name, path in files:
        shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True)
        if shown.returncode != 0 and name == "logistic":
            continue
        shown.check_returncode()
        source = shown.stdout
        source = source.replace("from ._config import", "from streamcal._kernels._config import")
        source = source.replace("from streamcal._kernels.gev import", f"from gev_at_{rev} import")
        source = source.replace("from streamcal._kernels import gev as _k", f"import gev_at_{rev} as _k")
        source = source.replace("from streamcal._kernels import glm_refit as _g", f"import glm_refit_at_{rev} as _g")
        source = source.replace("from streamcal.gev._river import", f"from river_at_{rev} import")
        source = source.replace("from streamcal.gev import _logistic", f"import logistic_at_{rev} as _logistic")
        file = where / f"{name}_at_{rev}.py"
        file.write_text(source)
        spec = importlib.util.spec_from_file_location(file.stem, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        loaded[name] = module
    loaded["calibrator"]._g = loaded["glm_refit"]
    loaded["calibrator"]._k = loaded["gev"]
    return {"PlattCalibrator": loaded["calibrator"].PlattCalibrator, "GEVCalibrator": loaded["calibrator"].GEVCalibrator}


def prepared(cls, s, y, warmup):
    cal = cls()
    if warmup:
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000, help="timed events per round (GEV: a fifth)")
    parser.add_argument("--warmup", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", metavar="REV", help="also time the calibrators of this git revision")
    parser.add_argument("--only", choices=("PlattCalibrator", "GEVCalibrator"), help="one calibrator")
    parser.add_argument("--states", default="long,cold", help="comma-separated: long, cold")
    args = parser.parse_args()
    streamcal.use_compiled_kernels()
    old = calibrators_at(args.old) if args.old else {}  # name -> class at that revision
    s, y = click_stream(args.warmup + args.n, seed=3)
    print(f"{args.rounds} alternating rounds, CPU time, median; ratios against the python engine's time")
    for name, cls in (("PlattCalibrator", PlattCalibrator), ("GEVCalibrator", GEVCalibrator)):
        if args.only and name != args.only:
            continue
        n = args.n if cls is PlattCalibrator else max(args.n // 5, 50)
        for state, warmup in (("long", args.warmup), ("cold", 0)):
            if state not in args.states.split(","):
                continue
            ts, ys = s[warmup : warmup + n], y[warmup : warmup + n]
            xs = [{"score": float(v)} for v in ts]
            lbl = [bool(v) for v in ys]
            variants = {"compiled": prepared(cls, s, y, warmup)}
            if old:  # timed next to the compiled one in each round
                variants["code before"] = prepared(old[name], s, y, warmup)
            variants["python engine"] = prepared(python_engine(cls), s, y, warmup)
            variants["full refit"] = prepared(full_refit(cls), s, y, warmup)
            compiled = copy.deepcopy(variants["compiled"])
            p_now, _ = compiled.prequential(ts, ys)
            p_old, _ = copy.deepcopy(variants["python engine"]).prequential(ts, ys)
            gap = float(np.max(np.abs(p_now - p_old)))
            if old:
                p_before, _ = copy.deepcopy(variants["code before"]).prequential(ts, ys)
                gap_before = float(np.max(np.abs(p_now - p_before)))
            for cal in variants.values():  # untimed: each river face's entry point compiled or loaded
                time_river(cal, xs[:5], lbl[:5])
            for kind, timer, data in (("prequential", time_prequential, (ts, ys)), ("river face", time_river, (xs, lbl))):
                times = {k: [] for k in variants}
                for _ in range(args.rounds):
                    for k, cal in variants.items():
                        times[k].append(timer(cal, *data))
                rate = {k: n / float(np.median(v)) for k, v in times.items()}
                engine_ratio = np.array(times["python engine"]) / np.array(times["compiled"])
                full = np.array(times["full refit"]) / np.array(times["compiled"])
                goal = GOALS[name][0 if kind == "prequential" else 1]
                before = ""
                if "code before" in times:
                    ratio = np.array(times["code before"]) / np.array(times["compiled"])
                    before = f"code before {rate['code before']:9,.0f}/s (x{float(np.median(ratio)):.2f})  "
                print(
                    f"{name:15s} {state:4s} {kind:11s} compiled {rate['compiled']:9,.0f}/s  {before}"
                    f"python engine {rate['python engine']:8,.0f}/s (x{float(np.median(engine_ratio)):.1f})  "
                    f"full refit {rate['full refit']:7,.0f}/s (x{float(np.median(full)):.1f})  "
                    f"goal {goal:,}: {'met' if rate['compiled'] >= goal else 'NOT met'}"
                )
            print(
                f"{name:15s} {state:4s} prior strength at the end {compiled.prior_strength:.3g}; "
                f"max |compiled - python engine| {gap:.1e}"
                + (f"; max |compiled - code before| {gap_before:.1e}" if old else "")
            )


if __name__ == "__main__":
    main()
