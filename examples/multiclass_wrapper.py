"""A river multiclass model calibrated online: CalibratedClassifier with the coupling calibrators.

River's bundled ImageSegments dataset (2 310 events, 7 classes; no download), progressive: each event
is scored by the bare Gaussian naive Bayes model and by the wrapped one before either learns it.
The multiclass calibrators run with their default binary calibrator, ``PAVCalibrator()`` (finite
probabilities), and with the exact PAV map (``PAVCalibrator(finite_proba=False)``) for comparison.

Install: ``pip install .`` (the plain install). Run: ``python examples/multiclass_wrapper.py``; the table
is recorded in ``docs/compose.md``. ``--events N`` keeps the first N events.
"""

from __future__ import annotations

import argparse

from river import datasets, metrics, naive_bayes

from streamcal import CalibratedClassifier, PAVCalibrator
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator

CALIBRATORS = {
    "PairwiseCouplingCalibrator()": PairwiseCouplingCalibrator,
    "OneVsRestCalibrator()": OneVsRestCalibrator,
    "PairwiseCouplingCalibrator(PAVCalibrator(finite_proba=False))": lambda: PairwiseCouplingCalibrator(
        PAVCalibrator(finite_proba=False)
    ),
    "OneVsRestCalibrator(PAVCalibrator(finite_proba=False))": lambda: OneVsRestCalibrator(
        PAVCalibrator(finite_proba=False)
    ),
}


def progressive(model, n_events: int | None = None) -> tuple[float, float]:
    loss, accuracy = metrics.CrossEntropy(), metrics.Accuracy()
    for x, y in datasets.ImageSegments().take(n_events) if n_events else datasets.ImageSegments():
        loss.update(y, model.predict_proba_one(x))
        accuracy.update(y, model.predict_one(x))
        model.learn_one(x, y)
    return loss.get(), accuracy.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=None, help="the first N events (default: all 2,310)")
    args = parser.parse_args()
    if args.events is not None and args.events < 1:
        parser.error(f"--events must be a positive int; got {args.events}")
    print("| model | cross-entropy | accuracy |")
    print("|---|---:|---:|")
    loss, accuracy = progressive(naive_bayes.GaussianNB(), args.events)
    print(f"| GaussianNB, bare | {loss:.2f} | {accuracy:.1%} |")
    for name, make in CALIBRATORS.items():
        loss, accuracy = progressive(CalibratedClassifier(naive_bayes.GaussianNB(), make()), args.events)
        print(f"| GaussianNB, {name} | {loss:.2f} | {accuracy:.1%} |")


if __name__ == "__main__":
    main()
