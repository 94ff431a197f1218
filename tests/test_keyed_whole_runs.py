"""A key's sweep into the scratch writes the prior's whole runs outside its atoms instead of
sweeping them (see "Whole runs" in streamcal._kernels.keyed): the same bits as the full sweep."""

from __future__ import annotations

import numpy as np
import pytest

import streamcal._keyed_rows as keyed_rows
from streamcal import KeyedCalibrator, PAVCalibrator, use_compiled_kernels
from streamcal.windows import CountWindow, Decay, TimeWindow

WINDOWS = {
    "unbounded": None,
    "count": CountWindow(60),
    "decay": Decay(40),
    "time": TimeWindow(50.0),
}


def _stream(n, n_keys, seed):
    # many light keys (a few atoms each: most of the prior's runs lie outside them) and a few
    # heavy ones; click-like scores over the buckets, fractional weights, keys miscalibrated apart
    rng = np.random.default_rng(seed)
    keys = (rng.zipf(1.2, size=n) % n_keys).astype(np.int64)
    z = rng.normal(-2.0, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    shift = rng.normal(0.0, 0.7, size=n_keys)[keys]
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(z + shift)))
    w = np.where(rng.uniform(size=n) < 0.5, 1.0, rng.uniform(0.5, 1.5, size=n))
    t = np.cumsum(rng.exponential(1.0, size=n))
    return keys, s, y, w, t


def _run(window, strength, data):
    keys, s, y, w, t = data
    template = PAVCalibrator(buckets=256) if window is None else PAVCalibrator(buckets=256, window=window)
    cal = KeyedCalibrator(template, prior_strength=strength)
    p, llr = cal.prequential(keys, s, y, weights=w, times=t)
    grid = np.linspace(0.0, 1.0, 97)
    reads = [cal.predict_llr(np.full(grid.size, key), grid) for key in range(0, 400, 7)]
    return p, llr, np.concatenate(reads)


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("strength", ["auto", 30.0])
def test_whole_runs_give_the_bits_of_the_full_sweep(monkeypatch, name, strength):
    use_compiled_kernels()
    data = _stream(12_000, 400, seed=3)
    written = _run(WINDOWS[name], strength, data)
    monkeypatch.setattr(keyed_rows, "WHOLE_RUNS", False)
    swept = _run(WINDOWS[name], strength, data)
    for a, b in zip(written, swept, strict=True):
        assert np.array_equal(a, b)
    assert np.isfinite(written[1]).all()
    # the keys' maps differ from the global map's: the keys' sweeps ran
    assert not np.array_equal(written[2][:97], written[2][97:194])
