"""The keyed kernel's cache prefetch hints: compiled only, never faulting, changing no bit."""

from __future__ import annotations

import numpy as np

from streamcal import KeyedCalibrator, PAVCalibrator, use_compiled_kernels
from streamcal._kernels import _config, _prefetch
from streamcal.windows import CountWindow


def test_the_hints_do_nothing_in_the_interpreted_tier():
    a = np.zeros((2, 3))
    assert _prefetch.compiled_tier() is False
    assert _prefetch.prefetch_1d(a[0], 10**6) is None
    assert _prefetch.prefetch_2d(a, 5, -(10**6)) is None
    assert np.array_equal(a, np.zeros((2, 3)))


def _probe(a1, a2, i):
    _prefetch.prefetch_1d(a1, i)
    _prefetch.prefetch_2d(a2, 1, i)
    return _prefetch.compiled_tier()


def test_the_compiled_hints_compile_and_never_fault():
    use_compiled_kernels()
    probe = _config.jit(_probe, cache=False)
    a1 = np.arange(4.0)
    a2 = np.arange(8, dtype=np.int64).reshape(2, 4)
    # far outside both arrays: a prefetch hint never faults and reads nothing the kernel sees
    assert probe(a1, a2, 10**6) is True
    assert probe(a1, a2, 2) is True
    assert np.array_equal(a1, np.arange(4.0))
    assert np.array_equal(a2, np.arange(8).reshape(2, 4))


def _keyed_run(keys, scores, labels):
    cal = KeyedCalibrator(PAVCalibrator(window=CountWindow(300)))
    p, llr = cal.prequential(keys, scores, labels)
    return p, llr, cal.n_keys


def test_keyed_prequential_gives_the_same_bits_with_and_without_the_hints():
    # a few heavy keys (block caches, full count windows: expiries) among many light ones
    rng = np.random.default_rng(5)
    n = 2_500
    keys = (rng.zipf(1.3, size=n) % 300).astype(np.int64)
    scores = rng.uniform(0.01, 0.99, size=n)
    labels = rng.uniform(size=n) < scores
    use_compiled_kernels()
    compiled = _keyed_run(keys, scores, labels)
    with _config.interpreting():  # the kernels' Python source: compiled_tier() is False, no hints
        interpreted = _keyed_run(keys, scores, labels)
    assert np.array_equal(compiled[0], interpreted[0])
    assert np.array_equal(compiled[1], interpreted[1])
    assert compiled[2] == interpreted[2]
    assert np.bincount(keys).max() > 300  # the busiest key's window is full
