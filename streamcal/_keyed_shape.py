"""The bound on the keyed prior's automatic strength, set by how much the keys' shapes differ.

Under ``prior_strength="auto"`` (:class:`streamcal.KeyedCalibrator`) a key's prior is the global map
shifted to the key's level; its weight is the weight the global map rests on, at most the evidence at
which a key's own shape is as reliable as the prior's. Each key keeps its observed and expected
positives (the global map's predictions before its events) in ``SHAPE_BINS`` bins of the buckets
that split the prior's positives in equal parts (``KF_SHAPE_OBS``, ``KF_SHAPE_EXP`` in
:mod:`streamcal._kernels.keyed`, the bins' edges ``CFG_SHAPE_CUT`` set at each refresh). Given
its ``O`` positives, a key whose shape is the global map's at its own level spreads them over its
bins as a multinomial of proportions ``pi_j = E_j / E``; its Pearson statistic
``X = sum_j (O_j - O pi_j)^2 / (O pi_j)`` has mean ``d`` (its bins with ``E_j > 0``, less one)
there, and ``d + (O - 1) phi`` where its proportions depart by the chi-square distance ``phi``.
The moment estimate over the keys with at least two positives,

    phi = (sum (X - d) - sqrt(2 sum d)) / sum (O - 1),

counts a spread within one standard deviation of the keys' summed ``X`` without departures
(``sqrt(2 d)`` each) as none. A key with ``P`` positives reads its proportions with the noise
``d / P`` in that distance, so its shape is as reliable as the prior's at ``P = (SHAPE_BINS - 1) / phi``
positives: the bound is ``(SHAPE_BINS - 1) / (phi r)`` events at the global positive rate ``r``, at
most ``SHAPE_POSITIVES / r`` (the evidence of 500 positives, about what a key needs to fit a shape
of its own). The more the keys' shapes differ, the sooner a key follows its own. The cap keeps the
estimate from pooling without limit where it sees no departure: with few keys (three keys whose
rates are the score times 0.5, 1 and 1.5, 2,000 events each) the moment estimate cannot tell their
shapes apart from their noise, and pooling them fully served the third 0.63 at a score of 0.5 (its
rate 0.75) where the cap serves 0.68 (and independent keys 0.73).
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import keyed as _kk

__all__ = ["SHAPE_BINS", "SHAPE_POSITIVES", "add_shape_sums", "shape_bound", "shape_cuts"]

SHAPE_BINS = _kk.SHAPE_BINS
#: the bound's cap, in positives at the global rate (see the module's docstring)
SHAPE_POSITIVES = 500.0


def shape_cuts(weight: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """The ``SHAPE_BINS - 1`` buckets that end the shape bins: the first bucket where the prior's
    positives (``weight * fitted`` per bucket, cumulated) reach each ``j / SHAPE_BINS`` of their
    total (bucket ``b`` lies in bin ``j``, the number of cuts below ``b``). No positives: one bin."""
    cum = np.cumsum(weight * fitted)
    if not cum.size or not cum[-1] > 0.0:
        return np.full(SHAPE_BINS - 1, float(weight.size))
    shares = cum[-1] * np.arange(1, SHAPE_BINS) / SHAPE_BINS
    return np.searchsorted(cum, shares, side="left").astype(np.float64)


def shape_bound(kf: np.ndarray, n_keys: int, rate: float) -> float:
    """The events at which a key's own shape is as reliable as the prior's (the module's docstring):
    ``(SHAPE_BINS - 1) / (phi * rate)``, from the first ``n_keys`` rows of ``kf``, at most
    ``SHAPE_POSITIVES / rate`` (also where the keys show no shape departure beyond their noise);
    ``inf`` where the rate is 0."""
    if not rate > 0.0:
        return math.inf
    out = np.zeros(3)
    _config.run(_kk.shape_moments, n_keys, kf, n_keys, out)
    excess, dof, positives = (float(v) for v in out)
    excess -= math.sqrt(2.0 * dof)
    cap = SHAPE_POSITIVES / rate
    if not (excess > 0.0 and positives > 0.0):
        return cap
    return min((SHAPE_BINS - 1) / (excess / positives * rate), cap)


def add_shape_sums(kf: np.ndarray, slots: np.ndarray, buckets: np.ndarray, observed: np.ndarray,
                   weights: np.ndarray, weight: np.ndarray, fitted: np.ndarray) -> None:
    """Add events' ``observed`` positives and expected ones (their ``weights`` times the prior's
    ``fitted`` rate of their ``buckets``) to their keys' (``slots``) shape bins (the prior's cuts:
    :func:`shape_cuts` of ``weight``, ``fitted``), event by event in order (``np.add.at``), as the
    keys' kernel adds them one event at a time."""
    j = np.searchsorted(shape_cuts(weight, fitted), buckets, side="left")  # the cuts below each bucket
    np.add.at(kf, (slots, _kk.KF_SHAPE_OBS + j), observed)
    np.add.at(kf, (slots, _kk.KF_SHAPE_EXP + j), weights * fitted[buckets])
