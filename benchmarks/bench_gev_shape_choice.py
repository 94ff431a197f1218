"""GEV's shape choice while the score prior holds: the default against a prototype rule.

Command: ``PYTHONPATH=. python benchmarks/bench_gev_shape_choice.py [--events 3000] [--islr-dir DIR]``
(about 10 minutes: the prototype runs in the generic Python engine, a refit per event);
``--seeds 4-19 --events 1000 --variants default --rare-only``: the default alone on the rare
streams of seeds 4 to 19 (a minute).

Printed: log loss over ``[0, n)`` divided by the raw score's, on the streams of
``bench_prior.py`` (the first ``--events`` events of its rare streams, its ``logistic-3.3%`` splits and
the ISLR ``Default`` and ``Caravan`` splits), for

- ``default``: ``GEVCalibrator()`` at its exact default: since the logistic member, the logistic
  link with Platt's floor while the prior holds (``PlattCalibrator()``'s map), the lowest Brier
  score of six GEV shapes once the prior is refuted (``streamcal.gev._logistic``);
- ``shapes``: the default before the member, by the generic engine (Python): the lowest Brier score
  of the six shapes fitted to the window plus the prior's pseudo-counts (floor ``"spread"``);
- ``logistic``: the prototype on the ``shapes`` engine. While the prior holds (strength above 0)
  the logistic link, the score's own, is fitted to the same histogram (window plus pseudo-counts)
  and served unless some GEV shape's log-likelihood of the window's labels at its fit is above the
  logistic's by more than ``--margin`` nats (both have two parameters, so a margin of 0 is the BIC
  comparison of the two); where the prior is refuted (strength 0) the shapes' choice serves.
  ``--margin inf`` serves the logistic whenever the prior holds; ``--floor span`` puts the prior's
  pseudo-counts where Platt's go (the shapes' own floor is ``"spread"``).

``--margin inf --floor span`` serves ``PlattCalibrator()``'s map while the prior holds: the rule in
the package since the member (docs/benchmarks.md, "GEV's shape choice under the prior").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_prior import (
    RARE_CASES,
    caravan_stream,
    default_stream,
    islr_table,
    log_loss,
    logistic_stream,
    rare_stream,
)

from streamcal import GEVCalibrator
from streamcal.gev.histfit import fit_glm_on_histogram


def _loglik(pos, neg, p):
    p = np.clip(p, 1e-300, 1.0 - 1e-16)
    return float((pos * np.log(p) + neg * np.log1p(-p)).sum())


class _EngineGEV(GEVCalibrator):
    """``GEVCalibrator`` without its logistic member, refitted by the generic engine (Python),
    with the prototype's rule."""

    margin = None  # None: the shapes' choice (lowest Brier score); a float: the prototype

    def _has_member(self):
        return False

    def _engine_only(self):
        self._glm_untracked()
        return True

    def _refit_from_histogram(self, centres, pos, neg):
        super()._refit_from_histogram(centres, pos, neg)
        self._logistic = None
        if self.margin is None or not self._prior_strength > 0.0:
            return
        x, _, _ = self._features_of(centres)
        beta = fit_glm_on_histogram(x, pos, neg, link="logit", l2=float(self.l2), warm_start=self.__dict__.get("_warm"))
        self._warm = beta
        _, data_pos, data_neg = self.histogram()  # the window's labels alone
        own = _loglik(data_pos, data_neg, 1.0 / (1.0 + np.exp(-(beta[0] * x + beta[1]))))
        best = max(
            _loglik(data_pos, data_neg, self._proba_for(x, self._beta[xi], xi)) for xi in self._candidate_xis()
        )
        if best <= own + self.margin:
            self._logistic = beta

    def _predict_fitted(self, scores):
        beta = self.__dict__.get("_logistic")
        if beta is None:
            return super()._predict_fitted(scores)
        z = self._feature(np.asarray(scores, dtype=np.float64))
        return 1.0 / (1.0 + np.exp(-(beta[0] * z + beta[1])))


def _engine(margin, floor=None):
    cls = _EngineGEV if floor is None else type("_EngineGEVFloor", (_EngineGEV,), {"_PRIOR_FLOOR": floor})

    def make():
        cal = cls()
        cal.margin = margin
        return cal

    return make


def run(name, streams, windows, variants):
    raw = np.zeros(len(windows))
    sums = {k: np.zeros(len(windows)) for k in variants}
    for s, y in streams:
        cut = [min(w, s.size) - 1 for w in windows]
        raw += np.cumsum(log_loss(s, y))[cut]
        for k, make in variants.items():
            p = make().prequential(s, y)[0]
            sums[k] += np.cumsum(log_loss(p, y))[cut]
    head = "".join(f"{'[0,' + str(w) + ')':>10s}" for w in windows)
    print(f"\n{name}\n  {'':10s}{head}")
    for k, v in sums.items():
        print(f"  {k:10s}" + "".join(f"{r:10.4f}" for r in v / raw), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=3_000, help="events of each rare stream")
    parser.add_argument("--margin", type=float, default=0.0, help="the prototype's margin in nats (inf: always)")
    parser.add_argument("--floor", choices=("spread", "span", "traffic", "thinned"), default=None,
                        help="the prototype's floor for the prior's pseudo-counts (default: GEV's own)")
    parser.add_argument("--islr-dir", default=os.path.join(tempfile.gettempdir(), "streamcal-islr"))
    parser.add_argument("--seeds", default="0-3", help="the rare streams' seeds, FIRST-LAST")
    parser.add_argument("--variants", default="default,shapes,logistic", help="comma-separated")
    parser.add_argument("--rare-only", action="store_true", help="the rare streams alone")
    args = parser.parse_args()
    every = {"default": GEVCalibrator, "shapes": _engine(None), "logistic": _engine(args.margin, args.floor)}
    variants = {k: every[k] for k in args.variants.split(",")}
    first, last = (int(v) for v in args.seeds.split("-"))
    n = args.events
    windows = [w for w in (300, 1_000, 3_000, 10_000, 30_000) if w <= n]
    for name, shift, scale in RARE_CASES:
        streams = [tuple(a[:n] for a in rare_stream(30_000, seed, shift, scale)) for seed in range(first, last + 1)]
        run(name, streams, windows, variants)
    if args.rare_only:
        return
    run("logistic-3.3%", [logistic_stream(4_000, seed) for seed in range(10)], [100, 500, 2_000, 4_000], variants)
    default = islr_table("Default", args.islr_dir)
    run("Default (ISLR)", [default_stream(default, seed) for seed in range(10)], [100, 500, 2_000, 6_667], variants)
    caravan = islr_table("Caravan", args.islr_dir)
    run("Caravan (ISLR)", [caravan_stream(caravan, seed) for seed in range(10)], [100, 500, 2_000, 3_881], variants)


if __name__ == "__main__":
    main()
