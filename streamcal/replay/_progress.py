"""A light progress line for long replays: rows, rows/s and ETA, on stderr."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


def _fmt_seconds(s: float) -> str:
    s = round(s)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class Progress:
    """Shows progress only once a run has lasted ``delay`` seconds (short runs stay silent).

    On a terminal the line is rewritten in place every ``every`` seconds; otherwise a new line is
    printed every ``every_plain`` seconds.
    """

    def __init__(
        self,
        total: int | None,
        *,
        enabled: bool = True,
        stream=None,
        delay: float = 1.0,
        every: float = 0.25,
        every_plain: float = 10.0,
        label: str = "replay",
    ):
        self.total = total
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.delay = delay
        self.every = every if self.tty else every_plain
        self.label = label
        self.start = time.perf_counter()
        self._last = self.start
        self._shown = False
        self.done = 0

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        if self.total:
            pct = 100.0 * self.done / self.total
            text = f"{self.label}: {self.done:,} / {self.total:,} rows ({pct:.0f}%)"
        else:
            text = f"{self.label}: {self.done:,} rows"
        text += f"  {rate:,.0f} rows/s"
        if self.total and rate > 0:
            text += f"  ETA {_fmt_seconds(max(self.total - self.done, 0) / rate)}"
        return text

    def update(self, rows: int) -> None:
        self.done += rows
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.start < self.delay or now - self._last < self.every:
            return
        self._last = now
        self._write(self.line(now))

    def _write(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text.ljust(78))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self.enabled and self._shown:
            self._write(self.line(time.perf_counter()))
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()
