"""river's estimator checks for the streaming multiclass calibrators, each check its own case.

A calibrator's input is a dict of *class scores*, not of features, so feeding it river's check
datasets (Phishing, ImageSegments) as they are would only exercise error paths. Instead every
dataset check runs on the same datasets as river would choose, turned into what the calibrator
really sees in production: each event scored by a river multiclass model (Gaussian naive Bayes)
*before* that model learns it. Those score dicts start empty, grow as classes appear, and carry
exact zeros and ones — the stream the calibrators must handle. The checks that need no data run
unchanged.
"""

from __future__ import annotations

import collections
import functools
import itertools

import numpy as np
import pytest
from river import datasets, naive_bayes
from river.checks import yield_checks

from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator

# river's _yield_datasets order for a multiclass classifier: Phishing, Phishing with numpy bool
# labels, ImageSegments; 200 events each (2000 for the memory-growth check).
DATASET_NAMES = ("Phishing", "Phishing-np.bool_", "ImageSegments")


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


def make_models():
    for cls in (PairwiseCouplingCalibrator, OneVsRestCalibrator):
        for params in cls._unit_test_params():
            yield cls(**params)  # the default binary calibrator: streamcal.PAVCalibrator


def river_cases():
    for variant, model in enumerate(make_models()):
        seen = collections.Counter()
        for check in yield_checks(model):
            name = check.__name__
            label = f"{model.__class__.__name__}{variant}"
            if isinstance(check, functools.partial) and "dataset" in check.keywords:
                index = seen[name]
                seen[name] += 1
                size = 2000 if name == "check_bounded_memory_growth" else 200
                case = (model, check.func, index % 3, size)
                yield pytest.param(*case, id=f"{label}-{name}-{DATASET_NAMES[index % 3]}")
            else:
                yield pytest.param(model, check, None, None, id=f"{label}-{name}")


@pytest.mark.parametrize(("model", "check", "dataset_index", "size"), list(river_cases()))
def test_river_check(model, check, dataset_index, size):
    skips = model._unit_test_skips()
    if check.__name__ in skips:
        pytest.skip(skips[check.__name__] if isinstance(skips, dict) else "skipped by the model")
    if dataset_index is None:
        check(model.clone())
    else:
        check(model.clone(), dataset=list(score_dict_dataset(dataset_index, size)))


def test_score_dict_datasets_look_like_a_model_stream():
    stream = score_dict_dataset(2, 200)
    assert stream[0][0] == {}  # the model has seen nothing yet
    sizes = [len(x) for x, _ in stream]
    assert sizes == sorted(sizes)  # classes join as they appear
    assert len({y for _, y in stream}) == 7
    assert all(abs(sum(x.values()) - 1.0) < 1e-9 for x, _ in itertools.islice(stream, 1, None))
