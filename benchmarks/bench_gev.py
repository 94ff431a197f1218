"""GEV-canonical regression benchmarks (issue 4).

1. One IRLS step on 1e6 x 10 against a numpy logistic IRLS step in the same process
   (goal: at most 2x its time).
2. A full batch fit against scikit-learn's ``LogisticRegression`` on the same data.
3. Streaming ``learn_many`` throughput with 10 features and mini-batches of 4,096 rows
   (goal: at least 1 million rows/s).

Numba compile (or cache-load) time is reported apart from steady state. Run:

    PYTHONPATH=. python benchmarks/bench_gev.py [--rows 1000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy.special import expit


def interleaved(fn_a, fn_b, repeats):
    """Time two functions alternately (so both see the same machine load): best and median of each,
    and the median of the per-pair ratios."""
    ta, tb = [], []
    for _ in range(repeats):
        for fn, times in ((fn_a, ta), (fn_b, tb)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    ratios = np.array(ta) / np.array(tb)
    return min(ta), float(np.median(ta)), min(tb), float(np.median(tb)), float(np.median(ratios))


def make_data(rng, n, k, xi):
    from streamcal.gev import gev_cdf

    X = rng.normal(size=(n, k))
    X[:, -1] = 1.0  # intercept column
    coef = rng.normal(scale=0.3, size=k)
    coef[-1] = -1.6
    y = (rng.random(n) < gev_cdf(X @ coef, xi)).astype(np.float64)
    return X, y


def numpy_logistic_irls_step(X, y, beta):
    """The textbook IRLS step for logistic regression, in plain numpy."""
    v = X @ beta
    p = expit(v)
    w = p * (1.0 - p)
    grad = X.T @ (p - y)
    hess = X.T @ (X * w[:, None])
    return beta - np.linalg.solve(hess, grad)


def bench_irls_step(X, y, xi, repeats):
    from streamcal._kernels.gev import gev_link
    from streamcal.gev._solver import irls_gev, irls_step

    n, k = X.shape
    w = np.ones(n)
    l2 = np.zeros(k)

    # first call (numpy only on this path), measured apart
    t0 = time.perf_counter()
    beta = np.zeros(k)
    irls_step(X[:100], y[:100], w[:100], xi, l2, beta, X[:100] @ beta, {})
    first = time.perf_counter() - t0

    # (a) one step from the same mid-fit point, weights computed from scratch
    start = np.zeros(k)
    start[-1] = -1.0

    def gev():
        beta = start.copy()
        v = X @ beta
        irls_step(X, y, w, xi, l2, beta, v, {})

    def logistic():
        numpy_logistic_irls_step(X, y, start)

    single = interleaved(gev, logistic, repeats)

    # (b) a whole IRLS fit from the usual start (intercept at the link of the mean), per step
    rate = float(y.mean())
    info = {}

    def gev_fit():
        beta = np.zeros(k)
        beta[-1] = gev_link(rate, xi)
        info["gev"] = irls_gev(X, y, w, xi, l2, beta, tol=1e-8)[0]

    def logistic_fit():
        beta = np.zeros(k)
        beta[-1] = np.log(rate / (1 - rate))
        steps = 0
        while steps < 100:
            new = numpy_logistic_irls_step(X, y, beta)
            steps += 1
            done = np.max(np.abs(new - beta)) < 1e-8
            beta = new
            if done:
                break
        info["logistic"] = steps

    t_gev_fit, _, t_log_fit, _, _ = interleaved(gev_fit, logistic_fit, max(1, repeats // 2))
    per_step = (t_gev_fit / max(info["gev"], 1), t_log_fit / info["logistic"], info)
    return first, single, per_step


def bench_full_fit(X, y, xi, repeats):
    from sklearn.linear_model import LogisticRegression

    from streamcal import GEVCanonicalRegression

    Xf = X[:, :-1]  # both fit their own intercept
    model = GEVCanonicalRegression(xi=xi, l2=1.0)
    sk = LogisticRegression(C=1.0)
    t_gev, _, t_sk, _, _ = interleaved(lambda: model.fit(Xf, y), lambda: sk.fit(Xf, y), repeats)
    return t_gev, model.n_iter_, t_sk, int(sk.n_iter_[0])


def bench_streaming(X, y, batch, xis, repeats):
    from streamcal.gev import GEVCanonicalClassifier

    Xf = pd.DataFrame(X[:, :-1], columns=[f"f{j}" for j in range(X.shape[1] - 1)])
    ys = pd.Series(y.astype(bool))
    n = (len(Xf) // batch) * batch
    frames = [(Xf.iloc[s : s + batch], ys.iloc[s : s + batch]) for s in range(0, n, batch)]

    def run():
        model = GEVCanonicalClassifier(xis=xis, batch_size=batch, half_life=1e6)
        model.learn_many(*frames[0])  # the first batch is fitted to convergence: keep it apart
        t0, c0 = time.perf_counter(), time.process_time()
        for Xb, yb in frames[1:]:
            model.learn_many(Xb, yb)
        return time.perf_counter() - t0, time.process_time() - c0

    times = [run() for _ in range(repeats)]
    rows = batch * (len(frames) - 1)
    wall = [t for t, _ in times]
    cpu = [c for _, c in times]
    return rows / min(wall), rows / float(np.median(wall)), rows / min(cpu)


def cold_compile_seconds() -> float:
    """Time ``streamcal.gev.warmup()`` in a fresh process with an empty numba cache."""
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        code = "import streamcal.gev as g; print(g.warmup())"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--xi", type=float, default=0.25)
    args = parser.parse_args()

    t0 = time.perf_counter()
    import streamcal.gev

    print(f"import streamcal.gev: {time.perf_counter() - t0:.2f} s")
    print(f"numba kernels, warm cache: streamcal.gev.warmup() {streamcal.gev.warmup():.2f} s")
    print(f"numba kernels, empty cache (fresh process): {cold_compile_seconds():.2f} s")
    rng = np.random.default_rng(0)
    X, y = make_data(rng, args.rows, args.features, args.xi)
    print(f"data: {args.rows:,} x {args.features} (incl. intercept), positive rate {y.mean():.3%}")

    first, single, per_step = bench_irls_step(X, y, args.xi, args.repeats)
    t_gev, m_gev, t_log, m_log, pair_ratio = single
    print("\n[1] one IRLS step")
    print(f"  first call (this path is numpy + BLAS, no numba): {first:.2f} s")
    print("  (a) a single step from a mid-fit point (weights computed from scratch)")
    print(f"      GEV-canonical IRLS step : best {t_gev * 1e3:7.1f} ms   median {m_gev * 1e3:7.1f} ms")
    print(f"      numpy logistic IRLS step: best {t_log * 1e3:7.1f} ms   median {m_log * 1e3:7.1f} ms")
    print(f"      ratio GEV / logistic    : of bests {t_gev / t_log:.2f}x  median of paired runs "
          f"{pair_ratio:.2f}x  (goal <= 2x)")
    s_gev, s_log, iters = per_step
    print("  (b) per step, averaged over a whole IRLS fit from the usual start")
    print(f"      GEV-canonical : {s_gev * 1e3:7.1f} ms/step ({iters['gev']} steps)")
    print(f"      numpy logistic: {s_log * 1e3:7.1f} ms/step ({iters['logistic']} steps)")
    print(f"      ratio GEV / logistic: {s_gev / s_log:.2f}x  (goal <= 2x)")

    t_fit, it_fit, t_sk, it_sk = bench_full_fit(X, y, args.xi, max(1, args.repeats // 2))
    print("\n[2] full batch fit (l2 = 1, i.e. C = 1)")
    print(f"  GEVCanonicalRegression : {t_fit:6.2f} s  ({it_fit} IRLS iterations)")
    print(f"  sklearn LogisticRegression (lbfgs): {t_sk:6.2f} s  ({it_sk} iterations)")
    print(f"  ratio GEV / sklearn    : {t_fit / t_sk:.2f}x")

    print("\n[3] streaming learn_many, mini-batches of 4,096 rows")
    for xis in ((args.xi,), (-0.5, -0.25, 0.0, 0.25, 0.5, 1.0)):
        best, median, cpu = bench_streaming(X, y, 4096, xis, max(1, args.repeats // 2))
        print(f"  {len(xis)} xi side by side: best {best / 1e6:5.2f} M rows/s   median "
              f"{median / 1e6:5.2f} M rows/s   per CPU second {cpu / 1e6:5.2f} M rows"
              "  (goal >= 1 M rows/s)")


if __name__ == "__main__":
    main()
