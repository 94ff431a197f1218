"""Smooth (I-spline) versus isotonic (PAV), Platt and histogram-binning calibration.

Reproduces the kind of comparison Wu et al. (AMIA 2012) reports: calibrators fitted on
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

Install: ``pip install ".[test]"`` (it needs scikit-learn, which the test extra includes).
Run: ``python examples/smooth_vs_isotonic.py [--repeats 100]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from streamcal import ISplineCalibrator, PAVCalibrator
from streamcal.buckets import UniformGrid
from streamcal.isotonic import IsotonicCalibrator
from streamcal.metrics import brier_score, ece, hosmer_lemeshow, log_loss
from streamcal.windows import CountWindow

EPS = 1e-6  # probabilities are clipped to [EPS, 1 - EPS] for the log loss only


def score_all(y, p):
    passed = hosmer_lemeshow(y, p)[1] > 0.05  # deciles of risk; NaN (ties) counts as a fail
    return brier_score(y, p), log_loss(y, p, eps=EPS), ece(y, p), roc_auc_score(y, p), passed


# ----------------------------------------------------------------------------- calibrators


def ispline(s_cal, y_cal, n_knots=None):
    # raw scores (not probabilities): a uniform grid over their range for the window histogram;
    # the batch fit itself is exact on the raw scores
    grid = UniformGrid(256, float(s_cal.min()), float(s_cal.max()))
    cal = ISplineCalibrator(buckets=grid, n_knots=n_knots).fit(s_cal, y_cal)
    return cal.predict_proba


def ispline_6(s_cal, y_cal):
    return ispline(s_cal, y_cal, n_knots=6)


def pav(s_cal, y_cal):
    return IsotonicCalibrator().fit(s_cal, y_cal).predict_proba


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


def streaming_comparison(repeats, rng, n=200_000, window=20_000):
    """Prequential (predict, then learn) on a drifting synthetic stream of probabilities."""
    rows = {"Uncalibrated": [], "I-spline, streaming (refit every 1,000)": [], "PAV, streaming": []}
    for _ in range(repeats):
        p_model = 1 / (1 + np.exp(-rng.normal(-1.0, 1.5, n)))  # the model's probability
        drift = np.linspace(0.0, 1.0, n)  # the truth drifts from p^2 towards p
        truth = p_model ** (2.0 - drift)
        y = (rng.random(n) < truth).astype(float)
        calibrators = {
            "I-spline, streaming (refit every 1,000)": ISplineCalibrator(
                window=CountWindow(window), n_knots=6, refit_every=1000
            ),
            "PAV, streaming": PAVCalibrator(window=CountWindow(window)),
        }
        tail = slice(n // 2, n)  # score the second half (the first includes the warm-up)
        rows["Uncalibrated"].append(score_all(y[tail], p_model[tail]))
        for name, cal in calibrators.items():
            proba, _ = cal.prequential(p_model, y)
            rows[name].append(score_all(y[tail], proba[tail]))
    return rows


def print_rows(title, rows):
    n = len(next(iter(rows.values())))
    print(f"\n### {title} ({n} repeats; mean)\n")
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
    parser.add_argument("--drift-repeats", type=int, default=5, help="drifting stream repeats")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    run("Breast cancer, Gaussian naive Bayes log-odds", breast_cancer_splits(args.repeats, rng, "gnb"))
    run("Breast cancer, linear SVM decision values", breast_cancer_splits(args.repeats, rng, "svm"))
    run(
        "Synthetic stream: calibrate on 5,000 events, test on the next 2,000",
        synthetic_stream_splits(args.stream_repeats, rng),
    )
    print_rows(
        "Drifting stream of 200,000 probabilities, prequential, window of 20,000 labels; "
        "metrics on the second half",
        streaming_comparison(args.drift_repeats, rng),
    )


if __name__ == "__main__":
    main()
