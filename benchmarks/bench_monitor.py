"""Calibration monitors: throughput of the array face, false-alarm rate, detection delay.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_monitor.py speed      # events/s, 2e6 events, best of 5
    PYTHONPATH=. python benchmarks/bench_monitor.py validity   # 1,000 calibrated streams of 1e4
    PYTHONPATH=. python benchmarks/bench_monitor.py power      # detection delays, 200 streams each
    PYTHONPATH=. python benchmarks/bench_monitor.py all

Streams: the scores of the ``drift`` scenario of ``streamcal generate`` (model logit
``N(-4, 1)``, served probability its sigmoid), labels drawn from the scenario's true probability
(``SCENARIOS["drift"].true_logit``), seeded per stream.

- **speed**: ``update_many`` of :class:`IsotonicEProcess` and :class:`MeanBiasCS` on 2e6
  calibrated events, CPU time (``process_time``), in rounds alternating with the baseline run in
  the same process: ``PAVCalibrator.prequential`` on the same events (what the isotonic monitor
  runs before its own kernel). Compile time is reported apart.
- **validity**: the share of 1,000 calibrated streams of 1e4 events on which each test ever
  alarms at alpha = 0.05, with its standard error; the naive test is a Hosmer-Lemeshow test
  (10 groups of risk, ``streamcal.metrics.hosmer_lemeshow``) on each block of 1,000 events at
  level alpha.
- **power**: the median detection delay (events from the change to the alarm; streams that
  never alarm count as the stream's remaining length, and the share detected is printed) on
  the drift scenario (1.2 added to the true log-odds at a third of the stream: calibrated
  before) and on a slow drift (from event 5,000 of 30,000, the true log-odds rise by 0.5 per
  10,000 events). Baselines: the naive Hosmer-Lemeshow test, and a two-sided Bernoulli CUSUM
  for a shift of ±0.5 in log-odds whose threshold is set, by simulation on other seeds, to the
  same false-alarm rate (alpha over the stream's length): CUSUM knows the horizon, the monitors
  do not.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import streamcal
from streamcal import PAVCalibrator
from streamcal.metrics import hosmer_lemeshow
from streamcal.monitor import IsotonicEProcess, MeanBiasCS
from streamcal.replay.generate import SCENARIOS

ALPHA = 0.05
DRIFT = SCENARIOS["drift"]


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def stream(seed: int, n: int, truth=None):
    """Served probabilities and labels; ``truth(m, i)``: the true log-odds of the events ``i`` of
    model logit ``m`` (``None``: ``m``, calibrated)."""
    rng = np.random.default_rng(seed)
    m = rng.normal(DRIFT.logit_mean, DRIFT.logit_sd, n)
    true_logit = m if truth is None else truth(m, np.arange(n))
    return _sigmoid(m), (rng.random(n) < _sigmoid(true_logit)).astype(np.float64)


def drift_truth(n: int):
    """The drift scenario's true log-odds (``SCENARIOS["drift"].true_logit``) over ``n`` events."""
    return lambda m, i: DRIFT.true_logit(m, i / n)


def slow_truth(start: int, per_event: float):
    return lambda m, i: m + np.maximum(i - start, 0) * per_event


# ---------------------------------------------------------------- baselines
def naive_hl_alarm(p, y, block: int = 1000, alpha: float = ALPHA):
    """Events seen at the first block whose Hosmer-Lemeshow p-value is below ``alpha`` (None)."""
    for end in range(block, p.size + 1, block):
        pvalue = hosmer_lemeshow(y[end - block : end], p[end - block : end])[1]
        if pvalue < alpha:
            return end
    return None


def cusum_paths(p, y, delta: float = 0.5):
    """Two-sided Bernoulli CUSUM statistics for a log-odds shift of ±delta; ``p``, ``y``: (streams, n)."""
    logit = np.log(p) - np.log1p(-p)
    up = np.zeros(p.shape[0])
    down = np.zeros(p.shape[0])
    out = np.empty(p.shape)
    for t in range(p.shape[1]):
        for sign, state in ((1.0, up), (-1.0, down)):
            q = _sigmoid(logit[:, t] + sign * delta)
            llr = np.where(y[:, t] == 1.0, np.log(q / p[:, t]), np.log((1.0 - q) / (1.0 - p[:, t])))
            np.maximum(state + llr, 0.0, out=state)
        out[:, t] = np.maximum(up, down)
    return out


def cusum_threshold(n: int, streams: int = 1000, seed: int = 10_000) -> float:
    """The CUSUM threshold with false-alarm probability ``ALPHA`` over ``n`` calibrated events."""
    data = [stream(seed + k, n) for k in range(streams)]
    paths = cusum_paths(np.array([d[0] for d in data]), np.array([d[1] for d in data]))
    return float(np.quantile(paths.max(axis=1), 1.0 - ALPHA))


def cusum_alarms(p, y, h: float):
    paths = cusum_paths(p, y)
    hit = paths >= h
    return [int(np.argmax(row)) + 1 if row.any() else None for row in hit]


def monitor_alarm(cls, p, y):
    monitor = cls(alpha=ALPHA)
    monitor.update_many(y, p)
    return monitor.first_alarm_at


# ---------------------------------------------------------------- the three runs
def run_speed(n: int, repeat: int) -> None:
    p, y = stream(0, n)
    t0 = time.perf_counter()
    streamcal.use_compiled_kernels()
    for cls in (IsotonicEProcess, MeanBiasCS):
        cls().update_many(y[:1000], p[:1000])
    PAVCalibrator().prequential(p[:1000], y[:1000])
    print(f"compile or cache load: {time.perf_counter() - t0:.2f} s")
    runs = {
        "IsotonicEProcess.update_many": lambda: IsotonicEProcess().update_many(y, p),
        "MeanBiasCS.update_many": lambda: MeanBiasCS().update_many(y, p),
        "baseline: PAVCalibrator.prequential": lambda: PAVCalibrator().prequential(p, y),
    }
    best = dict.fromkeys(runs, np.inf)
    for _ in range(repeat):
        for name, run in runs.items():
            t = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - t)
    base = best["baseline: PAVCalibrator.prequential"]
    print(f"{n:,} calibrated events, CPU time, best of {repeat} alternating rounds")
    for name, seconds in best.items():
        print(f"  {name:40s} {n / seconds / 1e6:7.2f}M events/s   {seconds / base:5.2f}x the baseline's time")


def run_validity(streams: int, n: int) -> None:
    counts = {"IsotonicEProcess": 0, "MeanBiasCS": 0, "naive Hosmer-Lemeshow every 1,000": 0}
    for k in range(streams):
        p, y = stream(k, n)
        counts["IsotonicEProcess"] += monitor_alarm(IsotonicEProcess, p, y) is not None
        counts["MeanBiasCS"] += monitor_alarm(MeanBiasCS, p, y) is not None
        counts["naive Hosmer-Lemeshow every 1,000"] += naive_hl_alarm(p, y) is not None
    print(f"{streams:,} calibrated streams of {n:,} events, alpha = {ALPHA}: share that ever alarms")
    for name, c in counts.items():
        share = c / streams
        se = np.sqrt(share * (1 - share) / streams)
        bound = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / streams)
        print(f"  {name:36s} {share:.3f} ± {se:.3f}  (alpha + 3 s.e. = {bound:.3f})")


def run_power(streams: int) -> None:
    cases = {
        "drift scenario (abrupt +1.2 at 1/3), n = 10,000": (10_000, drift_truth(10_000), -(-10_000 // 3)),
        "slow drift (+0.5 per 10,000 from 5,000), n = 30,000": (30_000, slow_truth(5_000, 0.5e-4), 5_000),
    }
    for title, (n, truth, start) in cases.items():
        h = cusum_threshold(n)
        data = [stream(20_000 + k, n, truth) for k in range(streams)]
        alarms = {
            "IsotonicEProcess": [monitor_alarm(IsotonicEProcess, p, y) for p, y in data],
            "MeanBiasCS": [monitor_alarm(MeanBiasCS, p, y) for p, y in data],
            "naive Hosmer-Lemeshow every 1,000": [naive_hl_alarm(p, y) for p, y in data],
            f"CUSUM ±0.5, threshold {h:.2f} (alpha over n)": cusum_alarms(
                np.array([d[0] for d in data]), np.array([d[1] for d in data]), h
            ),
        }
        print(f"{title}; {streams} streams; the change starts at event {start:,}")
        for name, found in alarms.items():
            early = sum(a is not None and a < start for a in found)
            delays = [(a if a is not None else n) - start for a in found if a is None or a >= start]
            detected = sum(a is not None and a >= start for a in found)
            print(
                f"  {name:44s} median delay {np.median(delays):8,.0f} events; detected {detected / streams:.2f}; "
                f"alarmed before the change {early / streams:.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("speed", "validity", "power", "all"), nargs="?", default="speed")
    parser.add_argument("--n", type=int, default=2_000_000, help="events of the speed run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--streams", type=int, default=1000, help="streams of the validity run")
    parser.add_argument("--power-streams", type=int, default=200)
    args = parser.parse_args()
    streamcal.use_compiled_kernels()
    if args.what in ("speed", "all"):
        run_speed(args.n, args.repeat)
    if args.what in ("validity", "all"):
        run_validity(args.streams, 10_000)
    if args.what in ("power", "all"):
        run_power(args.power_streams)


if __name__ == "__main__":
    main()
