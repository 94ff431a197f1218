"""Anytime-valid calibration alarms on a stream whose calibration breaks a third of the way in.

Install: ``pip install .`` (the plain install). Run: ``python examples/monitor_alarms.py``

The stream is the ``drift`` scenario of ``streamcal generate`` (calibrated at first, then 1.2
added to the true log-odds): the monitors watch the raw score, and a streaming PAV calibrator's
output, served before each label. Then one monitor per segment with the false-alarm budget
spent across segments, and the river face.
"""

from __future__ import annotations

import numpy as np

from streamcal import PAVCalibrator
from streamcal.monitor import IsotonicEProcess, KeyedMonitor, MeanBiasCS
from streamcal.replay.generate import SCENARIOS


def main() -> None:
    rng = np.random.default_rng(3)
    n = 60_000
    drift = SCENARIOS["drift"]
    m = rng.normal(drift.logit_mean, drift.logit_sd, n)
    score = 1.0 / (1.0 + np.exp(-m))
    truth = 1.0 / (1.0 + np.exp(-drift.true_logit(m, np.arange(n) / n)))
    labels = rng.uniform(size=n) < truth
    change = n // 3

    calibrated = PAVCalibrator(window=10_000).prequential(score, labels)[0]
    print(f"{n:,} events; the true log-odds jump by 1.2 at event {change:,}; alpha = 0.05\n")
    print(f"{'served probability':22s} {'monitor':18s} {'first alarm at':>15s} {'e-value at the end':>20s}")
    for name, proba in (("raw score", score), ("PAV, window 10,000", calibrated)):
        for monitor in (IsotonicEProcess(), MeanBiasCS()):
            monitor.update_many(labels, proba)
            at = "never" if monitor.first_alarm_at is None else f"{monitor.first_alarm_at:,}"
            print(f"{name:22s} {type(monitor).__name__:18s} {at:>15s} {monitor.e_value:20.3g}")

    # the raw score before the change: calibrated, so no alarm (with probability 0.95)
    quiet = MeanBiasCS()
    quiet.update_many(labels[:change], score[:change])
    low, high = quiet.interval
    print(f"\nbefore the change, raw score: mean bias in [{low:.5f}, {high:.5f}], alarm: {quiet.alarm}")
    after = MeanBiasCS()
    after.update_many(labels[change:], score[change:])
    ratio_low, ratio_high = after.ratio_interval
    print(
        f"after the change: predicted / observed = {after.ratio:.3f}, anytime-valid interval "
        f"[{ratio_low:.3f}, {ratio_high:.3f}]"
    )

    # one monitor per segment; only segment "b" sees the change
    segment = rng.choice(np.array(["a", "b", "c", "d"]), size=n)
    mixed = np.where(segment == "b", labels, rng.uniform(size=n) < score)
    keyed = KeyedMonitor(MeanBiasCS(), alpha=0.05, n_keys=4)
    keyed.update_many(segment, mixed, score)
    print(
        f"\nper segment (alpha / 4 each): alarmed {keyed.alarmed_keys()}, first at event "
        f"{keyed.first_alarm_at:,} (segment {keyed.first_alarm_key!r})"
    )

    # river face: one event at a time, with restarts after each alarm
    live = IsotonicEProcess(restart=True)
    for y, p in zip(labels[change:], score[change:], strict=True):
        live.update(bool(y), {False: 1.0 - p, True: p})
    print(f"river face with restart, after the change: {live.n_alarms} alarms in {live.n_seen:,} events")


if __name__ == "__main__":
    main()
