"""First calls: a small first call runs without numba, a large one compiles; the bits are the same.

A process's first calls that hand the kernels fewer events than its allowance
(``STREAMCAL_INTERPRETED_EVENTS``, default 20,000) run the kernels' Python source, with numba not
even imported; the first call beyond it switches the process to numba's compiled kernels for good
(compiling them on a fresh install, loading them from numba's cache after). A service that wants
every request at compiled speed calls ``streamcal.warmup()`` at start-up instead.

Install: ``pip install .`` (the plain install). Run: ``python examples/first_calls.py``
"""

from __future__ import annotations

import sys
import time

import numpy as np

import streamcal
from streamcal import PAVCalibrator

rng = np.random.default_rng(0)
scores = rng.beta(1, 30, 300_000)
labels = rng.uniform(size=scores.size) < 0.6 * scores

t = time.perf_counter()
small_p, small_llr = PAVCalibrator(window=2_000).prequential(scores[:5_000], labels[:5_000])
print(f"first call, 5,000 events:   {time.perf_counter() - t:6.2f} s   numba imported: {'numba' in sys.modules}")

t = time.perf_counter()
PAVCalibrator(window=100_000).prequential(scores, labels)
print(f"next call, 300,000 events:  {time.perf_counter() - t:6.2f} s   numba imported: {'numba' in sys.modules}"
      "   (compiles on a fresh install)")

t = time.perf_counter()
again_p, again_llr = PAVCalibrator(window=2_000).prequential(scores[:5_000], labels[:5_000])
print(f"5,000 events again, compiled: {time.perf_counter() - t:5.3f} s")

same = np.array_equal(small_p.view(np.int64), again_p.view(np.int64)) and np.array_equal(
    small_llr.view(np.int64), again_llr.view(np.int64)
)
print(f"interpreted and compiled answers equal bit for bit: {same}")
if not same:
    raise SystemExit("the two tiers disagree")
seconds = streamcal.warmup()  # what a service calls at start-up: here the kernels are loaded already
print(f"streamcal.warmup(): {seconds:.2f} s")
