"""``--monitor``: anytime-valid calibration alarms on the input score and every method's output.

:class:`MonitorSink` is a sink like the others (``add(batch, proba, llr)``): per stream watched
(each method's probabilities, and the input score while every score is a probability) it runs
an :class:`~streamcal.monitor.IsotonicEProcess` and a :class:`~streamcal.monitor.MeanBiasCS` at
level ``alpha``, each event with its label and the probability served for it, in event order.
An alarm is reported at the event whose label raised it (its position and event time); in a
live service it rises when that label arrives.
"""

from __future__ import annotations

import numpy as np

from streamcal.monitor import IsotonicEProcess, MeanBiasCS
from streamcal.replay._batch import EventBatch

__all__ = ["MONITORS", "MonitorSink", "mark_alarms"]

MONITORS = {"isotonic": IsotonicEProcess, "mean bias": MeanBiasCS}


class MonitorSink:
    """The monitors of each method's output and of the input score; :meth:`alarms` reads them."""

    def __init__(self, names: list[str], alpha: float = 0.05):
        self.names = list(names)
        self.alpha = alpha
        self.monitors = {
            name: {kind: make(alpha=alpha) for kind, make in MONITORS.items()} for name in [*names, "score"]
        }
        self.first = {name: dict.fromkeys(MONITORS) for name in self.monitors}  # (event, time) of the first alarm
        self.watch_score = True
        self._n = 0

    def add(self, batch: EventBatch, proba: dict, llr: dict, intervals=None) -> None:
        streams = {name: proba[name] for name in self.names}
        if self.watch_score and bool(np.all((batch.s >= 0.0) & (batch.s <= 1.0))):
            streams["score"] = batch.s
        else:
            self.watch_score = False
        for name, p in streams.items():
            for kind, monitor in self.monitors[name].items():
                monitor.update_many(batch.y, p)
                at = monitor.first_alarm_at
                if at is not None and self.first[name][kind] is None:
                    i = at - 1 - self._n  # its position in this batch
                    when = None if batch.t is None else float(batch.t[i])
                    self.first[name][kind] = (at - 1, when)
        self._n += len(batch)

    def alarms(self) -> dict:
        """``{stream: {monitor: (event index, event time) or None}}``; the input score as ``"score"``
        (left out if a score was not a probability)."""
        shown = self.names + (["score"] if self.watch_score else [])
        return {name: dict(self.first[name]) for name in shown}

    def lines(self, time_kind: str | None = None) -> list[str]:
        """One summary line per stream watched: when each monitor first flagged it, with its
        event time as a UTC date (``time_kind="timestamp"``), a number (``"number"``) or not at
        all (None: a replay in file order)."""
        out = [f"Calibration monitors (anytime-valid, alpha = {self.alpha} per monitor and stream):"]
        for name, found in self.alarms().items():
            shown = "input score" if name == "score" else name
            parts = []
            for kind, hit in found.items():
                if hit is None:
                    parts.append(f"{kind}: no alarm")
                else:
                    event, t = hit
                    when = "" if t is None or time_kind is None else f" ({_when(t, time_kind)})"
                    parts.append(f"{kind}: flagged at event {event:,}{when}")
            out.append(f"  {shown}: " + "; ".join(parts))
        return out


def _when(t: float, time_kind: str) -> str:
    if time_kind == "timestamp":
        from datetime import datetime, timezone

        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"time {t:g}"


def mark_alarms(fig, alarms: dict) -> None:
    """Mark each first alarm on the figure's metrics-over-time panels (x: events replayed) with a
    vertical line in the colour of its method's curve; the input score's in grey."""
    styles = {"isotonic": "--", "mean bias": ":"}
    if any(hit is not None for found in alarms.values() for hit in found.values()):
        fig.text(
            0.998,
            0.998,
            "vertical lines: first monitor alarm (dashed: isotonic, dotted: mean bias; grey: input score)",
            ha="right",
            va="top",
            fontsize=8,
            color="0.3",
        )
    for ax in fig.axes:
        if "events" not in ax.get_xlabel():
            continue
        colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
        for name, found in alarms.items():
            for kind, hit in found.items():
                if hit is not None:
                    colour = colours.get(name, "0.4")
                    label = f"{'input score' if name == 'score' else name}: {kind} alarm"
                    ax.axvline(hit[0] + 1, color=colour, linestyle=styles[kind], linewidth=1.2, label=label)
