"""The score prior against the raw score and against the calibrators without it.

Each case is a seeded stream; every calibrator runs ``prequential`` (each event predicted with
the state before its label) with its defaults (``prior="auto"``) and with ``prior=None`` (the
map of the data alone). Printed per window ``[0, n)`` from the first event on: the calibrator's
log loss over the raw score's (below 1: better than the score), the prior's first, then
``prior=None``'s. The refitted maps refit every ``REFIT_EVERY`` labels (their default refits
before every prediction that follows a label, which changes these figures by little and costs
a refit per event).

Cases:

- ``calibrated``, ``mild+0.3``, ``mild-0.3``: rare events (base rate about 0.25 %), a score
  exact or off by 0.3 in log-odds: the goal is within 1 % of the raw score in every window.
- ``strong+2``, ``overconfident``: a score off by 2 in log-odds, a score with twice the log-odds
  it should have: the gains of the calibrators without the prior should stay.
- ``logistic-3.3%``: a logistic regression fitted on a third of a 3.3 %-base-rate problem (two
  features, a nonlinearity it does not model), the rest streamed (10 splits averaged): a
  simulated counterpart of the ISLR ``Default`` case below.
- ``naive-bayes``: a very bad score (log-odds 25 times too spread and noisy, raw log loss about
  12), a simulated counterpart of the ISLR ``Caravan`` case below.
- ``Default`` and ``Caravan`` (with ``--islr``): the data sets of James, Witten, Hastie and
  Tibshirani, "An Introduction to Statistical Learning" (Springer, 2013), as the authors publish
  them in their Python package ``ISLP`` on PyPI (``--islr`` downloads its wheel with pip into
  ``--islr-dir``, or reads ``Default.csv`` and ``Caravan.csv`` found there). ``Default``: 10,000
  credit card holders, 3.3 % defaults; a logistic regression on student, balance and income
  fitted on a random third, the other two thirds streamed in random order (10 splits).
  ``Caravan``: 5,822 customers, 6 % caravan insurance buyers, 85 features; Gaussian naive Bayes
  fitted on a random third, the rest streamed (10 splits).
- ``drift``: the ``drift`` scenario of ``streamcal generate`` (abrupt, then gradual), count window.
- ``click``: the ``click`` scenario; the goal is PAV's first 5,000-event window within 10 % of
  the I-spline's.

Run: ``PYTHONPATH=. python benchmarks/bench_prior.py`` (``--quick`` for fewer seeds and shorter
streams; ``--speed`` for PAV's prequential speed with and without the prior; ``--islr`` adds the
ISLR cases, ``--only-islr`` runs them alone; ``--exact`` runs I-spline, Platt and GEV at their exact
defaults, a refit before every prediction that follows a label, instead of every 50 labels).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import pyarrow.parquet as pq

from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator

REFIT_EVERY = 50
CALIBRATORS = {
    "PAV": lambda **kw: PAVCalibrator(**kw),
    "I-spline": lambda **kw: ISplineCalibrator(refit_every=REFIT_EVERY, **kw),
    "Platt": lambda **kw: PlattCalibrator(refit_every=REFIT_EVERY, **kw),
    "GEV": lambda **kw: GEVCalibrator(refit_every=REFIT_EVERY, **kw),
}
#: ``--exact``: the refitted maps at their exact defaults (``refit_every=None``)
EXACT = {
    "I-spline": lambda **kw: ISplineCalibrator(**kw),
    "Platt": lambda **kw: PlattCalibrator(**kw),
    "GEV": lambda **kw: GEVCalibrator(**kw),
}


# the rare-event streams: (name, shift of the true log-odds, their scale against the score's)
RARE_CASES = (
    ("calibrated", 0.0, 1.0),
    ("mild+0.3", 0.3, 1.0),
    ("mild-0.3", -0.3, 1.0),
    ("strong+2", 2.0, 1.0),
    ("overconfident", 0.0, 2.0),
)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def log_loss(p, y):
    p = np.clip(p, 1e-300, 1.0 - 1e-16)
    return -np.where(y, np.log(p), np.log1p(-p))


def rare_stream(n, seed, shift=0.0, scale=1.0):
    """True log-odds N(-7.2, 1.3) (base rate about 0.25 %); the score's log-odds are
    ``scale * (true + shift)``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-7.2, 1.3, n)
    y = rng.uniform(size=n) < sigmoid(z)
    return sigmoid(scale * (z + shift)), y


def logistic_stream(n, seed):
    """A logistic regression's scores on a held-out stream of a 3.3 %-base-rate problem."""
    rng = np.random.default_rng(seed)
    m = 3 * n // 2
    x = rng.normal(size=(m, 2))
    truth = -4.3 + 1.6 * x[:, 0] + 0.5 * x[:, 1] + 0.6 * np.maximum(x[:, 0], 0.0) ** 2
    y = rng.uniform(size=m) < sigmoid(truth)
    design = np.column_stack([np.ones(m), x])
    fit, rest = slice(0, m // 3), slice(m // 3, m)
    beta = np.zeros(3)
    for _ in range(30):  # Newton's method for the logistic regression on the first third
        p = sigmoid(design[fit] @ beta)
        grad = design[fit].T @ (y[fit] - p)
        hess = (design[fit] * (p * (1 - p))[:, None]).T @ design[fit] + 1e-6 * np.eye(3)
        beta += np.linalg.solve(hess, grad)
    return sigmoid(design[rest] @ beta), y[rest]


def naive_bayes_stream(n, seed):
    """A very bad score: an event with a base rate near 6 %, scored with log-odds 25 times too
    spread and noisy (raw log loss about 12, like naive Bayes on correlated features)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.0, n)
    y = rng.uniform(size=n) < sigmoid(z)
    return sigmoid(25.0 * (z + 3.0 + rng.normal(size=n))), y


ISLP_WHEEL = "ISLP==0.6.0"  # the ISLR data sets' published copy (its data/ folder)


def islr_table(name: str, folder: str) -> np.ndarray:
    """The ISLR data set ``name`` (``Default`` or ``Caravan``) as a structured array: read from
    ``folder/name.csv``, else from the ``ISLP`` wheel in ``folder``, downloaded with pip if absent."""
    path = os.path.join(folder, f"{name}.csv")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        wheels = [f for f in os.listdir(folder) if f.lower().startswith("islp-") and f.endswith(".whl")]
        if not wheels:
            cmd = [sys.executable, "-m", "pip", "download", ISLP_WHEEL, "--no-deps", "-q", "-d", folder]
            subprocess.run(cmd, check=True)
            wheels = [f for f in os.listdir(folder) if f.lower().startswith("islp-") and f.endswith(".whl")]
        with zipfile.ZipFile(os.path.join(folder, wheels[0])) as whl, open(path, "wb") as out:
            out.write(whl.read(f"ISLP/data/{name}.csv"))
    return np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")


def _logistic_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Maximum-likelihood logistic regression (Newton's method) of ``y`` on ``[1, x]``."""
    design = np.column_stack([np.ones(len(x)), x])
    beta = np.zeros(design.shape[1])
    for _ in range(50):
        p = sigmoid(design @ beta)
        grad = design.T @ (y - p)
        hess = (design * (p * (1 - p))[:, None]).T @ design + 1e-9 * np.eye(design.shape[1])
        step = np.linalg.solve(hess, grad)
        beta += step
        if np.abs(step).max() < 1e-12:
            break
    return beta


def default_stream(table: np.ndarray, seed: int):
    """ISLR ``Default``: a logistic regression on student, balance and income (standardised)
    fitted on a random third, its probabilities on the other two thirds in random order."""
    y = table["default"] == "Yes"
    x = np.column_stack([table["student"] == "Yes", table["balance"], table["income"]]).astype(np.float64)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    order = np.random.default_rng(seed).permutation(len(y))
    fit, rest = order[: len(y) // 3], order[len(y) // 3 :]
    beta = _logistic_fit(x[fit], y[fit].astype(np.float64))
    return sigmoid(beta[0] + x[rest] @ beta[1:]), y[rest]


def caravan_stream(table: np.ndarray, seed: int):
    """ISLR ``Caravan``: Gaussian naive Bayes on the 85 features (per class means and variances,
    each variance plus 1e-9 times the largest feature variance, class shares as the prior) fitted
    on a random third, its posterior probabilities of a purchase on the rest in random order."""
    names = [n for n in table.dtype.names if n != "Purchase"]
    x = np.column_stack([table[n] for n in names]).astype(np.float64)
    y = table["Purchase"] == "Yes"
    order = np.random.default_rng(seed).permutation(len(y))
    fit, rest = order[: len(y) // 3], order[len(y) // 3 :]
    eps = 1e-9 * x[fit].var(axis=0).max()
    joint = []
    for cls in (False, True):
        part = x[fit][y[fit] == cls]
        mean, var = part.mean(axis=0), part.var(axis=0) + eps
        ll = -0.5 * (np.log(2 * np.pi * var) + (x[rest] - mean) ** 2 / var).sum(axis=1)
        joint.append(ll + np.log(part.shape[0] / len(fit)))
    return sigmoid(joint[1] - joint[0]), y[rest]


def scenario_stream(name, n, seed):
    from streamcal.replay import generate

    with tempfile.TemporaryDirectory() as tmp:
        generate(f"{tmp}/s.parquet", scenario=name, n=n, seed=seed)
        table = pq.read_table(f"{tmp}/s.parquet")
    return table.column("score").to_numpy(), table.column("label").to_numpy().astype(bool)


def run_case(name, streams, windows, kw=None):
    kw = kw or {}
    raw = np.zeros(len(windows))
    sums = {(c, prior): np.zeros(len(windows)) for c in CALIBRATORS for prior in ("auto", None)}
    seconds = dict.fromkeys(sums, 0.0)
    for s, y in streams:
        cut = [min(w, s.size) for w in windows]
        loss = np.cumsum(log_loss(s, y))
        raw += np.array([loss[c - 1] for c in cut])
        for c, make in CALIBRATORS.items():
            for prior in ("auto", None):
                t = time.process_time()
                p, _ = make(prior=prior, **kw.get(c, {})).prequential(s, y)
                seconds[c, prior] += time.process_time() - t
                loss = np.cumsum(log_loss(p, y))
                sums[c, prior] += np.array([loss[k - 1] for k in cut])
    print(f"\n{name}: raw log loss per event " + "  ".join(f"[0,{w}) {r / len(streams) / w:.4g}" for w, r in zip(windows, raw, strict=True)))
    print(f"  {'calibrator':10s}" + "".join(f"{'[0,' + str(w) + ')':>16s}" for w in windows) + "   (prior / none)")
    worst = {}
    for c in CALIBRATORS:
        cells = []
        for k in range(len(windows)):
            a, b = sums[c, "auto"][k] / raw[k], sums[c, None][k] / raw[k]
            cells.append(f"{a:7.3f}/{b:<7.3f}")
        worst[c] = float(np.max(sums[c, "auto"] / raw))
        cpu = f"{seconds[c, 'auto']:.1f}s/{seconds[c, None]:.1f}s"
        print(f"  {c:10s}" + " ".join(f"{x:>15s}" for x in cells) + f"   cpu {cpu}")
    return sums, raw, worst


def speed(rounds: int, n: int) -> None:
    """PAV ``prequential`` events per CPU second, 1024 logit buckets, a count window of 1e5:
    ``prior=None`` against the default, in alternating rounds, on the throughput benchmark's
    miscalibrated click-like stream (the prior's strength falls to 0) and on a calibrated one (it
    stays). Without ``prior`` support (an older streamcal on ``PYTHONPATH``) only the default runs."""
    import inspect

    has_prior = "prior" in inspect.signature(PAVCalibrator).parameters
    rng = np.random.default_rng(0)
    z = rng.normal(-3.0, 1.5, n)
    u = rng.uniform(size=n)
    streams = {
        "miscalibrated": (sigmoid(z), u < sigmoid(1.3 * z + 0.5)),
        "calibrated": (sigmoid(z), u < sigmoid(z)),
    }
    variants = {"default": {}, "prior=None": {"prior": None}} if has_prior else {"default": {}}
    PAVCalibrator(window=100_000).prequential(*streams["calibrated"])  # compile (or load) first
    best = {(k, v): 0.0 for k in streams for v in variants}
    for _ in range(rounds):
        for k, (s, y) in streams.items():
            for v, kw in variants.items():
                cal = PAVCalibrator(window=100_000, **kw)
                t = time.process_time()
                cal.prequential(s, y)
                best[k, v] = max(best[k, v], n / (time.process_time() - t))
    for k in streams:
        cells = "  ".join(f"{v} {best[k, v] / 1e6:.2f}M events/s" for v in variants)
        ratio = f"  default / prior=None {best[k, 'default'] / best[k, 'prior=None']:.3f}" if has_prior else ""
        print(f"speed, {k}: {cells}{ratio}")


def islr(folder: str, splits) -> None:
    """The ISLR cases and their goals: ``Default`` within 1 % of the raw score in every window
    from the first event on; ``Caravan``: the gains of the maps without the prior kept."""
    default = islr_table("Default", folder)
    _, _, worst = run_case(
        "Default (ISLR)", [default_stream(default, seed) for seed in splits], [100, 500, 2_000, 6_667]
    )
    caravan = islr_table("Caravan", folder)
    sums, _, _ = run_case(
        "Caravan (ISLR)", [caravan_stream(caravan, seed) for seed in splits], [100, 500, 2_000, 3_881]
    )
    print("\nGoals (ISLR)")
    cells = ", ".join(f"{c} {worst[c]:.3f}" for c in CALIBRATORS)
    print(f"  Default: worst window's log loss over the raw score's (goal <= 1.010): {cells}")
    k = 1  # [0, 500)
    cells = ", ".join(f"{c} {sums[c, 'auto'][k] / sums[c, None][k]:.3f}" for c in CALIBRATORS)
    print(f"  Caravan: [0,500) log loss with the prior over without it (goal: about 1): {cells}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--speed", action="store_true", help="PAV's prequential speed only")
    parser.add_argument("--only", choices=list(CALIBRATORS), help="one calibrator only")
    parser.add_argument("--islr", action="store_true", help="add the ISLR Default and Caravan cases")
    parser.add_argument("--only-islr", action="store_true", help="the ISLR cases alone")
    parser.add_argument("--exact", action="store_true",
                        help="the refitted maps at their exact defaults (a refit before every prediction that follows a label)")
    parser.add_argument("--islr-dir", default=os.path.join(tempfile.gettempdir(), "streamcal-islr"),
                        help="where the ISLR data (or the ISLP wheel holding it) is kept")
    args = parser.parse_args()
    if args.exact:
        for name in ("I-spline", "Platt", "GEV"):
            CALIBRATORS[name] = EXACT[name]
    if args.only:
        for name in [c for c in CALIBRATORS if c != args.only]:
            del CALIBRATORS[name]
    if args.speed:
        speed(rounds=3 if args.quick else 7, n=1_000_000 if args.quick else 4_000_000)
        return
    splits = range(3) if args.quick else range(10)
    if args.islr or args.only_islr:
        islr(args.islr_dir, splits)
        if args.only_islr:
            return
    seeds = range(2) if args.quick else range(4)
    n = 10_000 if args.quick else 30_000
    windows = [w for w in (300, 1_000, 3_000, 10_000, 30_000) if w <= n]
    summary = {}
    for name, shift, scale in RARE_CASES:
        _, _, worst = run_case(name, [rare_stream(n, seed, shift, scale) for seed in seeds], windows)
        summary[name] = worst
    _, _, summary["logistic-3.3%"] = run_case(
        "logistic-3.3%", [logistic_stream(4_000, seed) for seed in splits], [100, 500, 2_000, 4_000]
    )
    _, _, summary["naive-bayes"] = run_case(
        "naive-bayes", [naive_bayes_stream(4_000, seed) for seed in splits], [100, 500, 2_000, 4_000]
    )
    window = {c: {"window": 20_000} for c in CALIBRATORS}
    _, _, summary["drift"] = run_case(
        "drift (count window 20,000)", [scenario_stream("drift", 4 * n, seed) for seed in seeds], [1_000, 10_000, n, 4 * n], window
    )
    sums, _, _ = run_case("click", [scenario_stream("click", n, seed) for seed in seeds], [24, 1_000, 5_000, n])
    print("\nGoals")
    for name in ("calibrated", "mild+0.3", "mild-0.3", "logistic-3.3%"):
        cells = ", ".join(f"{c} {summary[name][c]:.3f}" for c in CALIBRATORS)
        print(f"  {name}: worst window's log loss over the raw score's (goal <= 1.010): {cells}")
    if "PAV" in CALIBRATORS and "I-spline" in CALIBRATORS:
        pav, spline = sums["PAV", "auto"][2], sums["I-spline", "auto"][2]
        print(f"  click: PAV's first 5,000 events over I-spline's (goal <= 1.10): {pav / spline:.3f}")


if __name__ == "__main__":
    main()
