"""Streaming Venn–Abers throughput: ``prequential_interval`` against ``PAVCalibrator.prequential``.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_venn_abers.py            # 2e6 events, 5 rounds
    PYTHONPATH=. python benchmarks/bench_venn_abers.py --quick    # 4e5 events, 3 rounds

Also the river face: ``predict_proba_one`` then ``learn_one`` per event (30,000 pairs), the same
way against ``PAVCalibrator``.

``--log-loss`` prints instead two tables of prequential log losses on rare-event streams (4
seeds of 40,000 events each): the defaults, ``VennAbersCalibrator()`` against ``PAVCalibrator()``
(with the score prior; also Venn–Abers without the finite rule, the midpoint and the consistent
merge ``p0 / (1 - p1 + p0)``), and the maps without the prior, ``VennAbersCalibrator(prior=None)``
(the exact pair, with ``finite_rule=True``, and with the consistent merge, which takes the finite
rule) against ``PAVCalibrator(prior=None)`` (the finite PAV map). Each table ends with the count of
rows at or below PAV and the largest ratio, per Venn–Abers column.

Stream: click-like scores ``s = expit(z)``, ``z ~ N(-3, 1.5)``, labels from a miscalibrated
truth ``P(y = 1 | z) = expit(1.3 z + 0.5)`` (as ``bench_streaming_pav.py``). The calibrators, each
with its default score prior, and Venn–Abers also with ``finite_rule=False`` (the pair unclipped)
and with ``prior=None`` (the exact pair, no prior to refit): 1024 logit buckets, a count window of 1e5 events. Each round runs them on the same
stream, in rotating order, from fresh calibrators; the figure is CPU time (``process_time``, one
thread), the best round of each. The first call of each (compilation or cache load) is timed
apart, on a short stream.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from streamcal import PAVCalibrator, VennAbersCalibrator


def click_stream(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))
    return s, y


def cpu_seconds(run) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter stream and fewer rounds")
    parser.add_argument("--log-loss", action="store_true", help="the rare-event log-loss table instead")
    args = parser.parse_args()
    if args.log_loss:
        log_loss_table()
        return
    n, rounds = (400_000, 3) if args.quick else (2_000_000, 5)
    s, y = click_stream(n)
    window = 100_000

    def venn_abers():
        VennAbersCalibrator(buckets=1024, window=window).prequential_interval(s, y)

    def venn_abers_unclipped():
        VennAbersCalibrator(buckets=1024, window=window, finite_rule=False).prequential_interval(s, y)

    def venn_abers_exact():
        VennAbersCalibrator(buckets=1024, window=window, prior=None).prequential_interval(s, y)

    def pav():
        PAVCalibrator(buckets=1024, window=window).prequential(s, y)

    first = {
        "VennAbersCalibrator.prequential_interval": cpu_seconds(
            lambda: VennAbersCalibrator(buckets=1024, window=window).prequential_interval(s[:1000], y[:1000])
        ),
        "PAVCalibrator.prequential": cpu_seconds(
            lambda: PAVCalibrator(buckets=1024, window=window).prequential(s[:1000], y[:1000])
        ),
    }
    for name, seconds in first.items():
        print(f"first call (compile or cache load) {name}: {seconds:.2f} s CPU")
    runs = [("va", venn_abers), ("unclipped", venn_abers_unclipped), ("exact", venn_abers_exact), ("pav", pav)]
    best = dict.fromkeys((name for name, _ in runs), np.inf)
    for r in range(rounds):
        for name, run in runs[r % len(runs) :] + runs[: r % len(runs)]:
            best[name] = min(best[name], cpu_seconds(run))
    va_rate, exact_rate, pav_rate = n / best["va"], n / best["exact"], n / best["pav"]
    unclipped_rate = n / best["unclipped"]
    print(f"{n:,} events, 1024 logit buckets, count window {window:,}, best of {rounds} rotating rounds (CPU)")
    print(f"VennAbersCalibrator.prequential_interval: {va_rate / 1e6:6.2f} M events/s")
    print(f"  the same, finite_rule=False:            {unclipped_rate / 1e6:6.2f} M events/s")
    print(f"  the same, prior=None:                   {exact_rate / 1e6:6.2f} M events/s")
    print(f"PAVCalibrator.prequential (baseline):     {pav_rate / 1e6:6.2f} M events/s")
    print(f"ratio Venn-Abers / PAV: {va_rate / pav_rate:.2f}; prior=None / PAV: {exact_rate / pav_rate:.2f}")
    print(f"ratio Venn-Abers / finite_rule=False (the finite rule's cost): {va_rate / unclipped_rate:.3f}")
    river_face(s[:30_000], y[:30_000], window, rounds)


def river_face(s, y, window: int, rounds: int) -> None:
    """``predict_proba_one`` then ``learn_one`` per event, both calibrators, alternating rounds."""
    xs = [{"score": float(v)} for v in s]
    ys = [bool(v) for v in y]

    def loop(cls):
        cal = cls(buckets=1024, window=window)

        def run():
            for x, label in zip(xs, ys, strict=True):
                cal.predict_proba_one(x)
                cal.learn_one(x, label)

        return run

    for cls in (VennAbersCalibrator, PAVCalibrator):  # compile (or load) the river-face kernels first
        loop(cls)()
    best = {VennAbersCalibrator: np.inf, PAVCalibrator: np.inf}
    for r in range(rounds):
        for cls in (VennAbersCalibrator, PAVCalibrator) if r % 2 == 0 else (PAVCalibrator, VennAbersCalibrator):
            best[cls] = min(best[cls], cpu_seconds(loop(cls)))
    va, pav = len(xs) / best[VennAbersCalibrator], len(xs) / best[PAVCalibrator]
    print(f"river face, {len(xs):,} predict_proba_one + learn_one pairs, best of {rounds} alternating rounds (CPU)")
    print(f"VennAbersCalibrator: {va / 1e3:7.0f}k pairs/s")
    print(f"PAVCalibrator:       {pav / 1e3:7.0f}k pairs/s")
    print(f"ratio Venn-Abers / PAV: {va / pav:.2f}")


def rare_event_stream(seed: int, rate: float, kind: str, param: float, n: int = 40_000):
    """``"raw"``: scores ``expit(z)``, ``z ~ N(0, 1)``, truth ``expit(logit(rate) + param z)``;
    ``"probability"``: truth ``expit(z)``, ``z ~ N(logit(rate) - 0.5, 1)``, scores
    ``expit(z + param)``."""
    rng = np.random.default_rng(seed)
    logit = math.log(rate / (1.0 - rate))
    if kind == "raw":
        z = rng.normal(size=n)
        y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(logit + param * z)))
        return 1.0 / (1.0 + np.exp(-z)), y
    z = rng.normal(logit - 0.5, 1.0, size=n)
    return 1.0 / (1.0 + np.exp(-(z + param))), rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-z))


def log_loss_table(seeds: int = 4) -> None:
    """Mean prequential log loss over the seeds, one row per stream and window: two tables, the
    defaults (with the score prior) and the maps without it, each Venn–Abers beside its PAV."""
    rows = [(None, "raw", r, slope) for r in (0.005, 0.02) for slope in (0.5, 1.5, 3.0)]
    rows += [(5000, "raw", 0.005, slope) for slope in (0.5, 1.5, 3.0)] + [(5000, "raw", 0.02, 1.5)]
    rows += [(None, "probability", r, shift) for r in (0.005, 0.01, 0.02) for shift in (0.3, 1.0)]
    rows += [(5000, "probability", 0.005, 0.3)]
    makers = {
        "va": lambda w: VennAbersCalibrator(window=w),
        "va_exact_ends": lambda w: VennAbersCalibrator(window=w, finite_rule=False),
        "va_mean": lambda w: VennAbersCalibrator(window=w, merge_rule="mean"),
        "va_consistent": lambda w: VennAbersCalibrator(window=w, merge_rule="consistent"),
        "pav": lambda w: PAVCalibrator(window=w),
        "va_none": lambda w: VennAbersCalibrator(window=w, prior=None),
        "va_none_finite": lambda w: VennAbersCalibrator(window=w, prior=None, finite_rule=True),
        "va_none_consistent": lambda w: VennAbersCalibrator(window=w, prior=None, merge_rule="consistent"),
        "pav_none": lambda w: PAVCalibrator(window=w, prior=None),
    }
    results = []
    for window, kind, rate, param in rows:
        losses = {name: [] for name in makers}
        for seed in range(seeds):
            s, y = rare_event_stream(seed, rate, kind, param)
            for name, make in makers.items():
                p = make(window).prequential(s, y)[0]
                losses[name].append(-np.mean(np.where(y, np.log(p), np.log1p(-p))))
        name = "unbounded" if window is None else f"{window:,} events"
        results.append(
            (f"| {name} | {kind} | {rate * 100:g} % | {param} |", {k: np.mean(v) for k, v in losses.items()})
        )
    tables = (
        (
            "Defaults, with the score prior: `VennAbersCalibrator()` (finite rule on the pair) against "
            "`PAVCalibrator()`; also the pair without the finite rule (`finite_rule=False`), the midpoint "
            "and the consistent merge",
            ("va", "va_exact_ends", "va_mean", "va_consistent", "pav"),
            "| VA | VA `finite_rule=False` | VA `mean` | VA `consistent` | PAV | VA / PAV | `consistent` / PAV |",
            ("pav", "va", "va_consistent"),
        ),
        (
            "Without the score prior: `VennAbersCalibrator(prior=None)` (the exact pair) against "
            "`PAVCalibrator(prior=None)` (the finite PAV map); also the pair with PAV's finite rule, and "
            "the consistent merge (which takes it)",
            ("va_none", "va_none_finite", "va_none_consistent", "pav_none"),
            "| VA `prior=None` | VA `prior=None, finite_rule=True` | VA `prior=None, consistent` | PAV `prior=None` "
            "| exact VA / PAV | finite VA / PAV | `consistent` / PAV |",
            ("pav_none", "va_none", "va_none_finite", "va_none_consistent"),
        ),
    )
    for title, columns, header, ratio in tables:
        print(f"\n{title} ({seeds} seeds x 40,000 events, 1,024 logit buckets)\n")
        print("| window | scores | base rate | slope / shift " + header)
        print("|---|---|---:|---:|" + "---:|" * (header.count("|") - 1))
        base, *vas = ratio
        all_ratios = {va: [] for va in vas}
        for lead, m in results:
            ratios = [m[va] / m[base] for va in vas]
            for va, r in zip(vas, ratios, strict=True):
                all_ratios[va].append(r)
            cells = " | ".join(f"{m[c]:.5f}" for c in columns) + " | " + " | ".join(f"{r:.4f}" for r in ratios)
            print(f"{lead} {cells} |")
        print()
        for va, rs in all_ratios.items():
            rs = np.array(rs)
            print(f"{va} / {base}: at or below in {int(np.sum(rs <= 1.0))} of {rs.size} rows, largest {rs.max():.4f}")
        print(flush=True)


if __name__ == "__main__":
    main()
