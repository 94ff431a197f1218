"""Batch PAV: fit on 1e6 unsorted points vs scikit-learn, and the kernel vs scipy, in one process.

Run: python benchmarks/bench_batch_pav.py [--n 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.optimize
from sklearn.isotonic import IsotonicRegression

from streamcal._kernels.pav import pav_sorted
from streamcal.isotonic import IsotonicCalibrator


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.n
    scores = rng.uniform(size=n)
    labels = (rng.uniform(size=n) < scores**2).astype(np.float64)

    t0 = time.perf_counter()
    y_small = np.ascontiguousarray(labels[:100])
    pav_sorted(y_small, np.ones(100), np.empty(100))
    compile_s = time.perf_counter() - t0

    ours_fit = best_of(lambda: IsotonicCalibrator().fit(scores, labels), args.repeat)
    sk_fit = best_of(lambda: IsotonicRegression(out_of_bounds="clip").fit(scores, labels), args.repeat)

    order = np.argsort(scores)
    y_sorted = np.ascontiguousarray(labels[order] + rng.normal(scale=0.1, size=n))  # continuous values
    w = np.ones(n)
    out = np.empty(n)
    ours_kernel = best_of(lambda: pav_sorted(y_sorted, w, out), args.repeat)
    scipy_kernel = best_of(lambda: scipy.optimize.isotonic_regression(y_sorted, weights=w), args.repeat)
    np.testing.assert_allclose(out, scipy.optimize.isotonic_regression(y_sorted, weights=w).x, atol=1e-9)

    print(f"n = {n:,}; best of {args.repeat}; numba compile (or cache load) {compile_s:.2f} s")
    print(f"{'what':<46}{'seconds':>10}{'ratio':>10}")
    print(f"{'IsotonicCalibrator.fit (unsorted)':<46}{ours_fit:>10.4f}{'':>10}")
    print(f"{'sklearn IsotonicRegression.fit':<46}{sk_fit:>10.4f}{sk_fit / ours_fit:>9.2f}x  (sklearn / ours)")
    print(f"{'pav_sorted kernel (sorted, weight 1)':<46}{ours_kernel:>10.4f}{'':>10}")
    print(f"{'scipy.optimize.isotonic_regression':<46}{scipy_kernel:>10.4f}{ours_kernel / scipy_kernel:>9.2f}x  (ours / scipy)")


if __name__ == "__main__":
    main()
