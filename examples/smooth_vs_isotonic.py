"""Smooth (I-spline) versus isotonic (PAV), Platt and histogram-binning calibration.

Reproduces the kind of comparison paper 003 (Wu et al., AMIA 2012) reports: calibrators fitted on
held-out scores of a base model, evaluated on a test split, over repeated random splits. Reported
per method: Brier score, log loss, expected calibration error (10 equal-width bins), AUC, and the
Hosmer-Lemeshow pass rate (decile test at the 5% level, 8 degrees of freedom).

Two data sets:
- scikit-learn's bundled breast-cancer data (569 patients), with two base models: Gaussian naive
  Bayes (whose log-odds are notoriously over-confident and heavy-tailed) and a linear SVM (decision
  values, the classic case for Platt scaling); each split: 40% train the model, 30% calibrate,
  30% test.
- a synthetic scored stream: scores whose true positive rate is a non-logistic S-curve; the
  calibrators learn from the first 5,000 events and are scored on the next 2,000.

Run: ``PYTHONPATH=. python examples/smooth_vs_isotonic.py [--repeats 100]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import chi2
from sklearn.datasets import load_breast_cancer
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from streamcal import ISplineCalibrator

EPS = 1e-6  # probabilities are clipped to [EPS, 1 - EPS] for the log loss only


# ----------------------------------------------------------------------------- metrics


def log_loss(y, p):
    p = np.clip(p, EPS, 1 - EPS)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def ece(y, p, n_bins=10):
    bins = np.minimum((p * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        inside = bins == b
        if inside.any():
            total += inside.sum() * abs(y[inside].mean() - p[inside].mean())
    return total / y.size


def hosmer_lemeshow_pvalue(y, p, n_groups=10):
    order = np.argsort(p, kind="stable")
    stat = 0.0
    for group in np.array_split(order, n_groups):
        observed, expected, n = y[group].sum(), p[group].sum(), group.size
        mean = expected / n
        if 0.0 < mean < 1.0:
            stat += (observed - expected) ** 2 / (n * mean * (1 - mean))
        elif observed != expected:
            stat = np.inf
    return float(chi2.sf(stat, n_groups - 2))


def score_all(y, p):
    auc = roc_auc_score(y, p)
    passed = hosmer_lemeshow_pvalue(y, p) > 0.05
    return brier_score_loss(y, p), log_loss(y, p), ece(y, p), auc, passed


# ----------------------------------------------------------------------------- calibrators


def ispline(s_cal, y_cal, n_knots=None):
    cal = ISplineCalibrator(n_knots=n_knots).fit(s_cal, y_cal)
    return cal.predict_proba


def ispline_6(s_cal, y_cal):
    return ispline(s_cal, y_cal, n_knots=6)


def pav(s_cal, y_cal):
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(s_cal, y_cal)
    return iso.predict


def platt(s_cal, y_cal):
    lr = LogisticRegression(C=1e6).fit(s_cal[:, None], y_cal)
    return lambda s: lr.predict_proba(np.asarray(s)[:, None])[:, 1]


def binning(s_cal, y_cal, n_bins=10):
    edges = np.quantile(s_cal, np.linspace(0, 1, n_bins + 1))[1:-1]
    which = np.searchsorted(edges, s_cal, side="right")
    rate = np.array([y_cal[which == b].mean() if (which == b).any() else y_cal.mean() for b in range(n_bins)])
    return lambda s: rate[np.searchsorted(edges, s, side="right")]


METHODS = {
    "I-spline, paper's knot rule": ispline,
    "I-spline, 6 knots": ispline_6,
    "PAV (isotonic)": pav,
    "Platt": platt,
    "Histogram binning (10 quantile bins)": binning,
}


# ----------------------------------------------------------------------------- experiments


def gnb_scores(model, x):
    joint = model.predict_joint_log_proba(x)
    return np.clip(joint[:, 1] - joint[:, 0], -700, 700)


def breast_cancer_splits(repeats, rng, model_name):
    x, y = load_breast_cancer(return_X_y=True)
    y = y.astype(float)
    for _ in range(repeats):
        order = rng.permutation(y.size)
        a, b = int(0.4 * y.size), int(0.7 * y.size)
        train, cal, test = order[:a], order[a:b], order[b:]
        if model_name == "gnb":
            model = GaussianNB().fit(x[train], y[train])
            raw = model.predict_proba(x[test])[:, 1]
            yield gnb_scores(model, x[cal]), y[cal], gnb_scores(model, x[test]), y[test], raw
        else:  # a linear SVM's decision values, the classic case for Platt scaling
            model = make_pipeline(StandardScaler(), LinearSVC(C=0.01)).fit(x[train], y[train])
            s_cal, s_test = model.decision_function(x[cal]), model.decision_function(x[test])
            yield s_cal, y[cal], s_test, y[test], 1 / (1 + np.exp(-s_test))


def synthetic_stream_splits(repeats, rng, n_cal=5000, n_test=2000):
    def true_rate(s):  # an asymmetric S-curve, not a logistic in s
        return 0.02 + 0.9 / (1 + np.exp(-3 * (s - 0.3))) ** 2

    for _ in range(repeats):
        s = rng.normal(size=n_cal + n_test)
        y = (rng.random(s.size) < true_rate(s)).astype(float)
        raw = 1 / (1 + np.exp(-s))  # the model's own, miscalibrated, probability
        yield s[:n_cal], y[:n_cal], s[n_cal:], y[n_cal:], raw[n_cal:]


def run(name, splits):
    rows = {m: [] for m in ["Uncalibrated", *METHODS]}
    for s_cal, y_cal, s_test, y_test, raw in splits:
        rows["Uncalibrated"].append(score_all(y_test, raw))
        for method, make in METHODS.items():
            rows[method].append(score_all(y_test, make(s_cal, y_cal)(s_test)))
    n = len(rows["Uncalibrated"])
    print(f"\n### {name} ({n} random splits; mean over splits)\n")
    print("| method | Brier | log loss | ECE | AUC | HL pass rate |")
    print("|---|---|---|---|---|---|")
    for method, values in rows.items():
        v = np.array(values, dtype=float)
        print(
            f"| {method} | {v[:, 0].mean():.4f} | {v[:, 1].mean():.4f} | {v[:, 2].mean():.4f} | "
            f"{v[:, 3].mean():.4f} | {100 * v[:, 4].mean():.0f}% |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=100, help="random splits for breast cancer")
    parser.add_argument("--stream-repeats", type=int, default=50, help="synthetic stream repeats")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    run("Breast cancer, Gaussian naive Bayes log-odds", breast_cancer_splits(args.repeats, rng, "gnb"))
    run("Breast cancer, linear SVM decision values", breast_cancer_splits(args.repeats, rng, "svm"))
    run(
        "Synthetic stream: calibrate on 5,000 events, test on the next 2,000",
        synthetic_stream_splits(args.stream_repeats, rng),
    )


if __name__ == "__main__":
    main()
