"""The I-spline calibrator's per-event loops side by side, for the tests of its compiled loop.

``EngineLoop`` is the refit engine's loop (the full refit before every prediction that follows new
labels), ``FullRefitLoop`` the compiled loop with its full refit (the incremental refit's
fallback); ``calls_then_whole`` runs one of them over a stream, event by event and then whole.
"""

from __future__ import annotations

import numpy as np

from streamcal import ISplineCalibrator
from streamcal._kernels import ispline_prior as _kip
from streamcal._kernels import ispline_prior_stream as _kips


class EngineLoop(ISplineCalibrator):
    """The engine's loop: the full refit (score prior included) before every prediction that
    follows new labels, on both faces."""

    _STREAM_LOOP = False


class FullRefitLoop(ISplineCalibrator):
    """The compiled loop with its full refit before every prediction (the incremental refit's
    fallback), the engine's to the last bit."""

    _STREAM_INCREMENTAL = False


def calls_then_whole(cls, kw: dict, stream) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """``cls(**kw)`` over ``stream`` (scores, labels, weights, times, ops: 1 learn, 2 predict):
    each event as its own call, then the whole stream again as one ``prequential``."""
    scores, labels, weights, times, ops = stream
    learn = (ops & 1).astype(bool)
    predict = (ops & 2).astype(bool)
    cal = cls(**kw)
    got = []
    for i in range(scores.size):
        if predict[i]:
            got.append(cal.predict_proba(scores[i : i + 1])[0])
        if learn[i]:
            cal.update(scores[i : i + 1], labels[i : i + 1], weights=weights[i : i + 1], times=times[i : i + 1])
    return np.array(got), cal.prequential(scores, labels, weights=weights, times=times + times[-1])


def prior_scratch(B):
    """The score prior's kernels' scratch for ``B`` buckets: the grid's sums, the kept solve's
    state, its two small systems and the strength's work rows."""
    k1 = _kips.ORDER + 1
    six = _kip.ORDER + 1
    return (
        np.zeros(2 * B), np.zeros(_kips.K_SIZE), np.zeros((k1, k1)), np.zeros(2 * k1), np.empty(3 * B),
        np.empty((six, six)),
    )  # fmt: skip
