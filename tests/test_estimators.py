"""river's checks on every public streamcal estimator and metric, each check its own test case.

The classes are discovered, as river's own ``test_estimators.py`` discovers river's: every class
in the ``__all__`` of a public streamcal module that is a river estimator or a river metric, built
with each of its ``_unit_test_params``. A new estimator is checked without being listed here.
``CONFIGURATIONS`` adds models the unit-test parameters do not cover.

A check that does not apply is skipped with its reason: an estimator lists such checks in its
``_unit_test_skips``, with the reason next to each name; ``NOT_APPLICABLE`` below gives the
reasons for whole kinds of object.

The multiclass calibrators read a dict of *class scores*, not of features: river's check datasets
(Phishing, ImageSegments) as they are would only exercise error paths. Their dataset checks run on
the same datasets as river would choose, turned into what such a calibrator sees in production:
each event scored by a river multiclass model (Gaussian naive Bayes) *before* that model learns
it. Those score dicts start empty, grow as classes appear, and carry exact zeros and ones.
"""

from __future__ import annotations

import collections
import functools
import itertools

import numpy as np
import pytest
from river import base, datasets, naive_bayes, tree
from river.checks import yield_checks
from river.metrics.base import Metric
from river_cases import FrequencyBlend, HistogramPAV, streamcal_estimators, streamcal_metrics

from streamcal.buckets import LogitGrid
from streamcal.compose import CalibratedClassifier
from streamcal.isotonic import PAVCalibrator
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator
from streamcal.windows import CountWindow

ESTIMATORS = streamcal_estimators()
METRICS = streamcal_metrics()

# Models beyond the classes' own unit-test parameters: calibrators inside CalibratedClassifier
# around other river models, with a window, a tree, and multiclass calibrators.
CONFIGURATIONS = {
    "CalibratedClassifier-gaussiannb-pav": lambda: CalibratedClassifier(
        naive_bayes.GaussianNB(), PAVCalibrator(window=CountWindow(50))
    ),
    "CalibratedClassifier-hoeffdingtree-standin": lambda: CalibratedClassifier(
        tree.HoeffdingTreeClassifier(), HistogramPAV()
    ),
    "CalibratedClassifier-gaussiannb-standin-multiclass": lambda: CalibratedClassifier(
        naive_bayes.GaussianNB(), FrequencyBlend()
    ),
    "CalibratedClassifier-gaussiannb-pairwise": lambda: CalibratedClassifier(
        naive_bayes.GaussianNB(), PairwiseCouplingCalibrator(PAVCalibrator(buckets=LogitGrid(n_buckets=64)))
    ),
}

# (kind of object, check) -> why the check does not apply to that kind.
NOT_APPLICABLE = {
    (Metric, "check_tags"): "a river metric is not an estimator: it has no tags to check",
}

# river's dataset order for a multiclass classifier: Phishing, Phishing with numpy bool labels,
# ImageSegments; 200 events each (2000 for the memory-growth check).
DATASET_NAMES = ("Phishing", "Phishing-np.bool_", "ImageSegments")


def reads_class_scores(model) -> bool:
    """A multiclass classifier that wraps no model: a calibrator of a dict of class scores."""
    return isinstance(model, base.Classifier) and model._multiclass and not isinstance(model, base.Wrapper)


def _scored(dataset):
    model = naive_bayes.GaussianNB()
    out = []
    for x, y in dataset:
        out.append((model.predict_proba_one(x), y))
        model.learn_one(x, y)
    return out


@functools.cache
def score_dict_dataset(index: int, size: int) -> tuple:
    if index == 2:
        return tuple(_scored(datasets.ImageSegments().take(size)))
    phishing = _scored(datasets.Phishing().take(size))
    if index == 1:
        return tuple((x, np.bool_(y)) for x, y in phishing)
    return tuple(phishing)


def on_score_dicts(check, index: int, size: int):
    """``check`` on the class-score version of river's dataset ``index``, built when it runs."""

    def run(model):
        check(model, dataset=list(score_dict_dataset(index, size)))

    run.__name__ = check.__name__
    return run


def _build(cls, params):
    return cls(**params).clone()


def models():
    """``(label, make)`` for every model the checks run on; ``make()`` builds a fresh one."""
    for cls in itertools.chain(ESTIMATORS.values(), METRICS.values()):
        for i, params in enumerate(cls._unit_test_params()):
            yield f"{cls.__name__}-params{i}", functools.partial(_build, cls, params)
    yield from CONFIGURATIONS.items()


def skip_reason(model, name: str) -> str | None:
    skips = model._unit_test_skips() if hasattr(model, "_unit_test_skips") else ()
    if name in skips:
        if isinstance(skips, dict):
            return skips[name]
        return f"listed in {type(model).__name__}._unit_test_skips, which gives the reason next to the name"
    return next((why for (kind, check), why in NOT_APPLICABLE.items() if isinstance(model, kind) and check == name), None)


def river_cases():
    for label, make in models():
        model = make()
        seen = collections.Counter()
        for check in yield_checks(model):
            name = check.__name__
            case_id = f"{label}-{name}"
            if isinstance(check, functools.partial) and "dataset" in check.keywords:
                index = seen[name]
                seen[name] += 1
                case_id += f"-{DATASET_NAMES[index % 3] if isinstance(model, base.Classifier) else index}"
                if reads_class_scores(model):
                    size = 2000 if name == "check_bounded_memory_growth" else 200
                    check = on_score_dicts(check.func, index % 3, size)
            reason = skip_reason(model, name)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            if name == "check_bounded_memory_growth":  # ten times river's usual stream
                marks.append(pytest.mark.slow)
            yield pytest.param(make, check, id=case_id, marks=marks)


CASES = list(river_cases())


@pytest.mark.parametrize(("make", "check"), CASES)
def test_river_check(make, check):
    check(make())


def test_every_estimator_and_check_is_collected():
    names = {cls.__name__ for cls in ESTIMATORS.values()} | {cls.__name__ for cls in METRICS.values()}
    assert {
        "PAVCalibrator",
        "ISplineCalibrator",
        "GEVCalibrator",
        "PlattCalibrator",
        "GEVCanonicalClassifier",
        "CalibratedClassifier",
        "OneVsRestCalibrator",
        "PairwiseCouplingCalibrator",
        "LogLoss",
        "ECE",
    } <= names
    pav_checks = {c.values[1].__name__ for c in CASES if c.id.startswith("PAVCalibrator-")}
    assert {"check_learn_one", "check_pickling", "check_predict_proba_one_binary"} <= pav_checks
    scored = {cls.__name__ for cls in ESTIMATORS.values() if reads_class_scores(cls(**next(iter(cls._unit_test_params()))))}
    assert {OneVsRestCalibrator.__name__, PairwiseCouplingCalibrator.__name__} <= scored
    assert not {"PAVCalibrator", "CalibratedClassifier", "GEVCanonicalClassifier"} & scored


def test_score_dict_datasets_look_like_a_model_stream():
    stream = score_dict_dataset(2, 200)
    assert stream[0][0] == {}  # the model has seen nothing yet
    sizes = [len(x) for x, _ in stream]
    assert sizes == sorted(sizes)  # classes join as they appear
    assert len({y for _, y in stream}) == 7
    assert all(abs(sum(x.values()) - 1.0) < 1e-9 for x, _ in itertools.islice(stream, 1, None))
