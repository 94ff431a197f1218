"""Calibrating river models online with CalibratedClassifier, on river's bundled datasets.

Datasets (both ship inside the river package, no download):

- Phishing: 1 250 web pages, 44 % phishing.
- Shuttle: NASA shuttle sensor readings as an imbalanced binary problem, 49 097 rows, 7.2 %
  positive ("anomaly").

Each river model runs bare and wrapped in ``CalibratedClassifier`` with every streamcal
calibrator available in this installation (PAVCalibrator; Platt, GEV and I-spline calibrators
when present, refitted every 100 labels). All metrics are progressive: each event is scored before the model (and the
calibrator) learn it. Log loss is clipped at 1e-15 as river's ``LogLoss`` does, because PAV's exact
map (``finite_proba=False``, shown for comparison) gives the extreme buckets exactly 0 or 1.

Install: ``pip install .`` (the plain install). Run: ``python examples/river_pipeline.py`` (a few minutes);
``--events N`` keeps the first N events of each dataset.
"""

from __future__ import annotations

import argparse
import time

from river import datasets, linear_model, naive_bayes, preprocessing

import streamcal
from streamcal import CalibratedClassifier, metrics
from streamcal.buckets import LogitGrid


def calibrators() -> dict:
    """The streamcal calibrators to try: PAV always, the others if this installation has them."""
    out = {
        "PAV (1024 buckets, exact map)": lambda: streamcal.PAVCalibrator(finite_proba=False),
        "PAV (64 buckets, exact map)": lambda: streamcal.PAVCalibrator(
            buckets=LogitGrid(n_buckets=64), finite_proba=False
        ),
        # the default: probabilities under the finite pseudo-count rule, never exactly 0 or 1
        "PAV (1024 buckets, default)": lambda: streamcal.PAVCalibrator(),
    }
    for label, name in [("Platt", "PlattCalibrator"), ("GEV", "GEVCalibrator"), ("I-spline", "ISplineCalibrator")]:
        try:
            cls = getattr(streamcal, name)
        except (ImportError, AttributeError):
            continue
        # maps fitted from the histogram refit every 100 labels here (lazily after every label by default)
        out[f"{label} (refit every 100)"] = lambda cls=cls: cls(refit_every=100)
    return out


MODELS = {
    "LogisticRegression": lambda: preprocessing.StandardScaler() | linear_model.LogisticRegression(),
    "GaussianNB": lambda: naive_bayes.GaussianNB(),
}

DATASETS = {"Phishing": datasets.Phishing, "Shuttle": datasets.Shuttle}


def wrap(make_model, make_calibrator):
    """The model with its final classifier wrapped: transformers stay in front of the wrapper."""
    model = make_model()
    if hasattr(model, "steps"):
        *front, last = list(model.steps.values())
        pipeline = front[0]
        for step in front[1:]:
            pipeline = pipeline | step
        return pipeline | CalibratedClassifier(last, make_calibrator(), pos_val=True)
    return CalibratedClassifier(model, make_calibrator(), pos_val=True)


def progressive(model, dataset) -> dict:
    """Progressive log loss, Brier and ECE: predict each event, score it, then learn it."""
    scores = {"log loss": metrics.LogLoss(eps=1e-15), "Brier": metrics.Brier(), "ECE": metrics.ECE(n_bins=10)}
    start = time.perf_counter()
    n = 0
    for x, y in dataset:
        y = bool(y)
        p = model.predict_proba_one(x)
        p = {True: p.get(True, 0.0), False: 1.0 - p.get(True, 0.0)}
        for metric in scores.values():
            metric.update(y, p)
        model.learn_one(x, y)
        n += 1
    out = {name: metric.get() for name, metric in scores.items()}
    out["µs/event"] = 1e6 * (time.perf_counter() - start) / n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=None, help="the first N events of each dataset (default: all)")
    args = parser.parse_args()
    if args.events is not None and args.events < 1:
        parser.error(f"--events must be a positive int; got {args.events}")
    cals = calibrators()
    print("| dataset | model | calibration | log loss | Brier | ECE | µs/event |")
    print("|---|---|---|---:|---:|---:|---:|")
    for ds_name, make_dataset in DATASETS.items():
        for model_name, make_model in MODELS.items():
            rows = [("none", make_model())] + [(name, wrap(make_model, make)) for name, make in cals.items()]
            for cal_name, model in rows:
                dataset = make_dataset() if args.events is None else make_dataset().take(args.events)
                r = progressive(model, dataset)
                print(
                    f"| {ds_name} | {model_name} | {cal_name} | {r['log loss']:.4f} | {r['Brier']:.4f} | "
                    f"{r['ECE']:.4f} | {r['µs/event']:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
