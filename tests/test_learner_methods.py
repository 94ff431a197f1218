"""Every learner has ``save``/``load`` methods; every streaming calibrator has ``merge``."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal import (
    GEVCalibrator,
    GEVCanonicalClassifier,
    ISplineCalibrator,
    OneVsRestCalibrator,
    PairwiseCouplingCalibrator,
    PAVCalibrator,
    PlattCalibrator,
)
from streamcal.persist import Persistable
from streamcal.windows import CountWindow

BINARY = [PAVCalibrator, ISplineCalibrator, GEVCalibrator, PlattCalibrator]


@pytest.mark.parametrize("cls", [*BINARY, PairwiseCouplingCalibrator, OneVsRestCalibrator, GEVCanonicalClassifier])
def test_every_learner_is_persistable(cls):
    assert issubclass(cls, Persistable)


@pytest.mark.parametrize("cls", BINARY)
def test_save_load_method_round_trip_continues_identically(cls, tmp_path, rng):
    scores = rng.uniform(size=4000)
    labels = rng.uniform(size=4000) < scores**2
    kwargs = {} if cls is PAVCalibrator else {"refit_every": 100}
    cal = cls(window=CountWindow(1000), **kwargs).update(scores[:2000], labels[:2000])
    restored = cls.load(cal.save(tmp_path / "state.zip"))
    np.testing.assert_array_equal(
        restored.prequential(scores[2000:], labels[2000:]), cal.prequential(scores[2000:], labels[2000:])
    )


@pytest.mark.parametrize("cls", [PAVCalibrator, ISplineCalibrator])
def test_merge_method_equals_one_calibrator_over_the_union(cls, rng):
    scores = rng.uniform(size=3000)
    labels = rng.uniform(size=3000) < scores
    # prior=None: a merged PAV refits its score prior's strength to the merged window, which one
    # calibrator refitted at its own counts (I-spline refits it from the histogram at every refit)
    make = (lambda: cls(prior=None)) if cls is PAVCalibrator else cls
    parts = [make().update(scores[i : i + 1000], labels[i : i + 1000]) for i in range(0, 3000, 1000)]
    merged = parts[0].merge(*parts[1:])
    whole = make().update(scores, labels)
    assert merged.histogram()[1].tolist() == whole.histogram()[1].tolist()
    np.testing.assert_allclose(merged.predict_proba(scores), whole.predict_proba(scores), rtol=1e-12)
    assert parts[0].window_weight == 1000.0  # the inputs are not modified


@pytest.mark.parametrize("cls", BINARY)
def test_array_methods_leave_the_callers_arrays_alone(cls, rng):
    # the scores are read in place (not copied) once checked: no path may write into them
    scores = rng.uniform(size=3000)
    labels = rng.uniform(size=3000) < scores
    learn = rng.uniform(size=3000) < 0.5
    kept = scores.copy(), labels.copy(), learn.copy()
    kwargs = {} if cls is PAVCalibrator else {"refit_every": 100}
    cal = cls(window=CountWindow(1000), **kwargs)
    cal.update(scores[:1000], labels[:1000])
    first = cal.prequential(scores, labels)
    cal.process(scores, labels, learn)
    cal.predict_proba(scores)
    cal.predict_llr(scores)
    for array, before in zip((scores, labels, learn), kept, strict=True):
        np.testing.assert_array_equal(array, before)
    # read-only inputs (Arrow buffers, memory maps) give the same outputs
    frozen = scores.copy()
    frozen.flags.writeable = False
    again = cls(window=CountWindow(1000), **kwargs)
    again.update(frozen[:1000], labels[:1000])
    np.testing.assert_array_equal(np.concatenate(again.prequential(frozen, labels)), np.concatenate(first))
