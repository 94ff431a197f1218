"""A misnamed keyword on an array method: the TypeError names the class the caller used and, for
the weights, the keyword that method takes; the refused call changes nothing."""

import numpy as np
import pytest

import streamcal
from streamcal.persist import to_bytes

RNG = np.random.default_rng(7)
N = 40
SCORES = RNG.random(N)
LABELS = RNG.random(N) < SCORES
KEYS = np.array(["a", "b"] * (N // 2))
PROBA3 = RNG.dirichlet(np.ones(3), size=N)
LABELS3 = RNG.integers(0, 3, size=N)

BINARY = [
    streamcal.PAVCalibrator,
    streamcal.ISplineCalibrator,
    streamcal.VennAbersCalibrator,
    streamcal.GEVCalibrator,
    streamcal.PlattCalibrator,
]


def _args(cal, method):
    """The positional arguments of ``method`` for ``cal``'s kind of input."""
    if isinstance(cal, (streamcal.KeyedCalibrator, streamcal.KeyedOffsetCalibrator)):
        base = (KEYS, SCORES, LABELS)
    elif isinstance(cal, (streamcal.PairwiseCouplingCalibrator, streamcal.OneVsRestCalibrator)):
        base = (PROBA3, LABELS3)
    else:
        base = (SCORES, LABELS)
    if method.startswith("process"):
        return (*base, np.ones(N, dtype=bool))
    return base


def _learned(cls):
    multiclass = cls in (streamcal.PairwiseCouplingCalibrator, streamcal.OneVsRestCalibrator)
    cal = cls(classes=(0, 1, 2)) if multiclass else cls()
    cal.update(*_args(cal, "update"))
    return cal


STREAMING = [
    *BINARY,
    streamcal.KeyedCalibrator,
    streamcal.KeyedOffsetCalibrator,
    streamcal.PairwiseCouplingCalibrator,
    streamcal.OneVsRestCalibrator,
]


@pytest.mark.parametrize("cls", STREAMING, ids=lambda c: c.__name__)
@pytest.mark.parametrize("method", ["update", "prequential", "process"])
def test_sample_weight_on_a_streaming_face_names_weights(cls, method):
    cal = _learned(cls)
    before = to_bytes(cal)
    with pytest.raises(TypeError) as info:
        getattr(cal, method)(*_args(cal, method), sample_weight=np.ones(N))
    message = str(info.value)
    assert message.startswith(f"{cls.__name__}.{method}() got an unexpected keyword argument 'sample_weight'")
    assert message.endswith("it takes the weights as weights=")
    assert to_bytes(cal) == before
    # the keyword it names works
    getattr(cal, method)(*_args(cal, method), weights=np.ones(N))


@pytest.mark.parametrize("cls", BINARY, ids=lambda c: c.__name__)
def test_weights_on_fit_names_sample_weight(cls):
    cal = _learned(cls)
    before = to_bytes(cal)
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\.fit\(\) .* 'weights'; it takes the weights as sample_weight=$"):
        cal.fit(SCORES, LABELS, weights=np.ones(N))
    assert to_bytes(cal) == before


def test_batch_isotonic_fit_names_sample_weight():
    with pytest.raises(TypeError, match=r"^IsotonicCalibrator\.fit\(\) .* 'w'; it takes the weights as sample_weight=$"):
        streamcal.IsotonicCalibrator().fit(SCORES, LABELS, w=np.ones(N))


@pytest.mark.parametrize("cls", BINARY, ids=lambda c: c.__name__)
def test_other_unknown_keyword_names_the_public_class(cls):
    cal = _learned(cls)
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\.prequential\(\) got an unexpected keyword argument 'label'$"):
        cal.prequential(SCORES, label=LABELS)
    # the keywords a method takes still pass, and the signature stays the method's own
    proba, _ = cal.prequential(SCORES, labels=LABELS, weights=None, times=None)
    assert proba.shape == (N,)
    assert "weights" in str(__import__("inspect").signature(type(cal).prequential))


def test_venn_abers_interval_faces():
    cal = _learned(streamcal.VennAbersCalibrator)
    before = to_bytes(cal)
    for method in ("prequential_interval", "prequential_with_interval", "process_with_interval"):
        with pytest.raises(TypeError, match=rf"^VennAbersCalibrator\.{method}\(\) .*weights=$"):
            getattr(cal, method)(*_args(cal, method), sample_weight=np.ones(N))
    assert to_bytes(cal) == before
