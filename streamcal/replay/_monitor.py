"""``--monitor``: anytime-valid calibration alarms on the input score and every method's output.

:class:`MonitorSink` is a sink like the others (``add(batch, proba, llr)``): per stream watched
(each method's probabilities, and the input score while every score is a probability) it runs
an :class:`~streamcal.monitor.IsotonicEProcess` and a :class:`~streamcal.monitor.MeanBiasCS` at
level ``alpha``, each event with its label and the probability served for it, in event order.
An alarm is reported at the event whose label raised it (its position and event time); in a
live service it rises when that label arrives.

In a keyed replay (``--group-col``) the same monitors watch the whole stream, every key's events
together (if each key's probabilities are calibrated, so are all of them together), and a
:class:`~streamcal.monitor.KeyedMonitor` of mean-bias sequences watches every key on its own, with
the level spent over the keys as they appear (the ``k``-th key gets ``alpha / (k (k + 1))``): the
chance that any key of a calibrated stream ever alarms stays at most ``alpha`` per stream.
"""

from __future__ import annotations

from datetime import UTC

import numpy as np

from streamcal.monitor import IsotonicEProcess, KeyedMonitor, MeanBiasCS
from streamcal.replay._batch import EventBatch
from streamcal.replay._keyed import counted

__all__ = ["KEY_MONITORS", "MONITORS", "MonitorSink", "mark_alarms"]

MONITORS = {"isotonic": IsotonicEProcess, "mean bias": MeanBiasCS}
#: The monitors of each key on its own (keyed): calibration in the large, a few numbers per key.
#: The isotonic test keeps a PAV state per key and needs more events than most keys hold to
#: find a shape; it watches the whole stream.
KEY_MONITORS = ("mean bias",)


class MonitorSink:
    """The monitors of each method's output and of the input score; :meth:`alarms` reads them."""

    def __init__(self, names: list[str], alpha: float = 0.05, keyed: bool = False):
        self.names = list(names)
        self.alpha = alpha
        self.monitors = {
            name: {kind: make(alpha=alpha) for kind, make in MONITORS.items()} for name in [*names, "score"]
        }
        self.first = {name: dict.fromkeys(MONITORS) for name in self.monitors}  # (event, time) of the first alarm
        # keyed: every key on its own, and (event, time, key) of the first key's alarm
        self.per_key = None
        if keyed:
            self.per_key = {
                name: {kind: KeyedMonitor(MONITORS[kind](), alpha=alpha) for kind in KEY_MONITORS}
                for name in self.monitors
            }
        self.first_key = {name: dict.fromkeys(KEY_MONITORS) for name in self.monitors}
        self.watch_score = True
        # the methods whose every probability so far is the input score itself (the raw method):
        # the summary gives them and the input score one line
        self.score_itself = dict.fromkeys(self.names, True)
        self._n = 0

    def add(self, batch: EventBatch, proba: dict, llr: dict, intervals=None) -> None:
        streams = {name: proba[name] for name in self.names}
        if self.watch_score and bool(np.all((batch.s >= 0.0) & (batch.s <= 1.0))):
            streams["score"] = batch.s
        else:
            self.watch_score = False
        for name in self.names:
            if self.score_itself[name] and not np.array_equal(streams[name], batch.s):
                self.score_itself[name] = False
        for name, p in streams.items():
            for kind, monitor in self.monitors[name].items():
                monitor.update_many(batch.y, p)
                if monitor.first_alarm_at is not None and self.first[name][kind] is None:
                    self.first[name][kind] = self._where(batch, monitor.first_alarm_at)
            if self.per_key is None:
                continue
            for kind, monitors in self.per_key[name].items():
                monitors.update_many(batch.key, batch.y, p)
                at = monitors.first_alarm_at
                if at is not None and self.first_key[name][kind] is None:
                    self.first_key[name][kind] = (*self._where(batch, at), monitors.first_alarm_key)
        self._n += len(batch)

    def _where(self, batch: EventBatch, at: int) -> tuple:
        """``(event index, event time)`` of the alarm raised by the ``at``-th event (this batch's)."""
        i = at - 1 - self._n  # its position in this batch
        return at - 1, None if batch.t is None else float(batch.t[i])

    def key_alarms(self) -> dict | None:
        """Keyed: ``{stream: {monitor: {"keys_watched", "keys_flagged", "first"}}}`` (plain values,
        ready for JSON), ``first`` the ``{"event", "time", "key"}`` of the first key's alarm or
        None; the input score as ``"score"`` (left out if a score was not a probability). None
        when not keyed."""
        if self.per_key is None:
            return None
        shown = self.names + (["score"] if self.watch_score else [])
        out = {}
        for name in shown:
            out[name] = {}
            for kind, monitors in self.per_key[name].items():
                hit = self.first_key[name][kind]
                out[name][kind] = {
                    "keys_watched": len(monitors.keys()),
                    "keys_flagged": len(monitors.alarmed_keys()),
                    "first": None if hit is None else {"event": hit[0], "time": hit[1], "key": hit[2]},
                }
        return out

    def alarms(self) -> dict:
        """``{stream: {monitor: (event index, event time) or None}}``; the input score as ``"score"``
        (left out if a score was not a probability)."""
        shown = self.names + (["score"] if self.watch_score else [])
        return {name: dict(self.first[name]) for name in shown}

    def first_learner_alarms(self) -> dict:
        """``{method: (event index, event time)}``: the earliest alarm of any monitor on each method
        that learns (not the input score itself), for the methods flagged."""
        out = {}
        for name in self.names:
            hits = [hit for hit in self.first[name].values() if hit is not None]
            if hits and not self.score_itself[name]:
                out[name] = min(hits)
        return out

    def lines(self, time_kind: str | None = None) -> list[str]:
        """One summary line per stream watched: when each monitor first flagged it, with its
        event time as a UTC date (``time_kind="timestamp"``), a number (``"number"``) or not at
        all (None: a replay in file order)."""
        out = [f"Calibration monitors (anytime-valid, alpha = {self.alpha} per monitor and stream):"]
        for name, found in self._shown(self.alarms()).items():
            parts = []
            for kind, hit in found.items():
                if hit is None:
                    parts.append(f"{kind}: no alarm")
                else:
                    event, t = hit
                    when = "" if t is None or time_kind is None else f" ({_when(t, time_kind)})"
                    parts.append(f"{kind}: flagged at event {event:,}{when}")
            out.append(f"  {name}: " + "; ".join(parts))
        if self.per_key is not None:
            out.extend(self._key_lines(time_kind))
        return out

    def _key_lines(self, time_kind: str | None) -> list[str]:
        out = [
            f"Per key (each key's mean bias on its own; alpha = {self.alpha} per stream over all keys, the k-th "
            "key seen given alpha / (k (k + 1))):"
        ]
        for name, found in self._shown(self.key_alarms()).items():
            parts = []
            for kind, got in found.items():
                hit = got["first"]
                if hit is None:
                    parts.append(f"{kind}: no key flagged of {got['keys_watched']:,}")
                    continue
                t = hit["time"]
                when = "" if t is None or time_kind is None else f" ({_when(t, time_kind)})"
                parts.append(
                    f"{kind}: {got['keys_flagged']:,} of {counted(got['keys_watched'], 'key')} flagged, first key "
                    f"{hit['key']} at event {hit['event']:,}{when}"
                )
            out.append(f"  {name}: " + "; ".join(parts))
        return out

    def _shown(self, found: dict) -> dict:
        """``found`` by the names the summary shows: the input score as "input score", and one
        entry for it and the methods whose probabilities are the input score itself."""
        same = [name for name in self.names if self.score_itself[name]] if "score" in found else []
        shown = {}
        for name, value in found.items():
            if name in same:
                shown[f"{name} (the input score itself)"] = value
            elif name != "score":
                shown[name] = value
            elif not same:
                shown["input score"] = value
        return shown


def _when(t: float, time_kind: str) -> str:
    if time_kind == "timestamp":
        from datetime import datetime

        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"time {t:g}"


def mark_alarms(fig, alarms: dict) -> None:
    """Mark each first alarm on the figure's metrics-over-time panels (x: events replayed) with a
    vertical line in the colour of its method's curve, the input score's in grey, and list them,
    with their events, in a box in the reliability panel's lower right corner: alarms often come
    within the first metric window, where their lines sit on the panels' left edge, and several
    can fall on nearly the same event."""
    styles = {"isotonic": "--", "mean bias": ":"}
    listing = []
    for name, found in alarms.items():
        shown = "input score" if name == "score" else name
        hits = [f"{kind} at event {hit[0] + 1:,}" for kind, hit in found.items() if hit is not None]
        listing.append(f"{shown}: " + (", ".join(hits) if hits else "no alarm"))
    if not any(hit is not None for found in alarms.values() for hit in found.values()):
        return
    for ax in fig.axes:
        if "events" not in ax.get_xlabel():
            continue
        colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
        for name, found in alarms.items():
            for kind, hit in found.items():
                if hit is not None:
                    colour = colours.get(name, "0.4")
                    label = f"{'input score' if name == 'score' else name}: {kind} alarm"
                    ax.axvline(hit[0] + 1, color=colour, linestyle=styles[kind], linewidth=1.4, label=label)
    box = "\n".join(
        ["first calibration alarms (lines in the metrics panels:", "dashed isotonic, dotted mean bias)", *listing]
    )
    panels = [ax for ax in fig.axes if ax.get_title() == "reliability"]
    where = panels[0] if panels else fig.axes[0]
    where.text(0.98, 0.02, box, transform=where.transAxes, ha="right", va="bottom", fontsize=9,
               bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.6", "alpha": 0.9})
