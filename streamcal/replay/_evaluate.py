"""Prequential evaluation during replay: metrics per window of events, reliability counts."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["METRIC_NAMES", "MetricWindows", "Reliability", "default_metrics"]

LOG_LOSS_EPS = 1e-6
METRIC_NAMES = ("brier", "log_loss", "cllr", "min_cllr", "ece", "calibration_loss")
# metrics that need both classes in the window (NaN otherwise)
_BOTH_CLASSES = {"cllr", "min_cllr"}

MetricFn = Callable[[np.ndarray, np.ndarray, np.ndarray], float]


def _metrics_module():
    return importlib.import_module("streamcal.metrics")


def _brier(y, p, llr):
    return _metrics_module().brier_score(y, p)


def _log_loss(y, p, llr):
    return _metrics_module().log_loss(y, p, eps=LOG_LOSS_EPS)


def _cllr(y, p, llr):
    return _metrics_module().cllr(y, llr)


def _min_cllr(y, p, llr):
    return _metrics_module().min_cllr(y, llr)


def _ece(y, p, llr):
    return _metrics_module().ece(y, p)


def _calibration_loss(y, p, llr):
    return _metrics_module().calibration_loss(y, p)


# each default metric's function, and the name under which ``window_metrics`` computes it
_DEFAULTS = {
    "brier": _brier,
    "log_loss": _log_loss,
    "cllr": _cllr,
    "min_cllr": _min_cllr,
    "ece": _ece,
    "calibration_loss": _calibration_loss,
}


def _default_name(fn) -> str | None:
    """The name of the default metric whose function ``fn`` is (None for any other callable)."""
    return next((name for name, default in _DEFAULTS.items() if default is fn), None)


def default_metrics() -> dict[str, MetricFn]:
    """The metrics replay reports, from :mod:`streamcal.metrics`, as ``f(labels, proba, llr)``.

    ``min_cllr`` is taken over the method's LLR output (the best Cllr any monotone recalibration of
    that output could reach), so ``cllr - min_cllr`` is the calibration part of its Cllr.
    ``log_loss`` clips probabilities into ``[1e-6, 1 - 1e-6]`` (PAV legitimately predicts 0 or 1
    at the ends, which would make a whole window's log loss infinite). A window's default metrics
    are computed together (:func:`streamcal.metrics._window.window_metrics`), with the same
    values as each function alone.
    """
    return dict(_DEFAULTS)


class MetricWindows:
    """Collects (label, proba, llr) per method and emits metric rows every ``size`` events.

    With an ``executor`` the metrics of a finished window are computed on it while the replay
    goes on (at most ``MAX_PENDING`` windows in flight, so memory stays bounded); rows come out
    in window order either way.
    """

    MAX_PENDING = 2

    def __init__(self, methods: list[str], size: int, metrics: Mapping[str, MetricFn], executor=None):
        self.methods = methods
        self.executor = executor
        self._pending: list = []  # futures (or plain results) of metric values, in window order
        self.size = size
        self.metrics = dict(metrics)
        self.rows: dict[str, list] = {
            k: []
            for k in (
                "window",
                "first_event",
                "last_event",
                "start_time",
                "end_time",
                "n_events",
                "n_positive",
                "method",
                *self.metrics,
            )
        }
        self._y: list[np.ndarray] = []
        self._t: list[np.ndarray] = []
        self._p: dict[str, list[np.ndarray]] = {name: [] for name in methods}
        self._l: dict[str, list[np.ndarray]] = {name: [] for name in methods}
        self._count = 0
        self._first = 0
        self._window = 0
        self._work: dict[int, object] = {}  # per thread computing windows, its work arrays

    def add(self, t: np.ndarray, y: np.ndarray, proba: dict, llr: dict) -> None:
        self._t.append(t)
        self._y.append(y)
        if self.metrics:  # without metrics, a window is its counts and times only
            for name in self.methods:
                self._p[name].append(proba[name])
                self._l[name].append(llr[name])
        self._count += y.size
        if self._count >= self.size:
            self._emit(final=False)

    def finish(self) -> None:
        if self._count:
            self._emit(final=True)
        self._resolve(0)

    def _resolve(self, keep: int) -> None:
        """Move computed metric values into the rows, leaving at most ``keep`` windows pending."""
        while len(self._pending) > keep:
            item = self._pending.pop(0)
            values = item.result() if hasattr(item, "result") else item
            for per_method in values:
                for metric, value in zip(self.metrics, per_method, strict=True):
                    self.rows[metric].append(value)

    def _emit(self, *, final: bool) -> None:
        t = np.concatenate(self._t)
        y = np.concatenate(self._y)
        p = {k: np.concatenate(v) for k, v in self._p.items() if v}
        llr = {k: np.concatenate(v) for k, v in self._l.items() if v}
        start = 0
        while self._count - start >= self.size or (final and start < self._count):
            stop = min(start + self.size, self._count)
            self._row(
                t[start:stop],
                y[start:stop],
                {k: v[start:stop] for k, v in p.items()},
                {k: v[start:stop] for k, v in llr.items()},
            )
            start = stop
        self._t = [t[start:]]
        self._y = [y[start:]]
        self._p = {k: [p[k][start:]] if k in p else [] for k in self.methods}
        self._l = {k: [llr[k][start:]] if k in llr else [] for k in self.methods}
        self._count -= start

    def _values(self, y, p, llr, both: bool) -> list[list[float]]:
        # the default metrics of a window in one pass (None: each on its own, as below)
        together = [
            name
            for fn in self.metrics.values()
            if (name := _default_name(fn)) is not None and (both or name not in _BOTH_CLASSES)
        ]
        out = []
        for name in self.methods:
            computed = None
            if together:
                from streamcal.metrics._window import WindowWork, window_metrics

                work = self._work.setdefault(threading.get_ident(), WindowWork())
                computed = window_metrics(y, p[name], llr[name], together, eps=LOG_LOSS_EPS, work=work)
            row = []
            for metric, fn in self.metrics.items():
                if metric in _BOTH_CLASSES and not both:
                    row.append(float("nan"))
                elif computed is not None and _default_name(fn) in computed:
                    row.append(computed[_default_name(fn)])
                else:
                    row.append(float(fn(y, p[name], llr[name])))
            out.append(row)
        return out

    def _row(self, t, y, p, llr) -> None:
        n = y.size
        npos = int(y.sum())
        both = 0 < npos < n
        if self.executor is None:
            self._pending.append(self._values(y, p, llr, both))
        else:
            self._pending.append(self.executor.submit(self._values, y, p, llr, both))
        self._resolve(self.MAX_PENDING)
        for name in self.methods:
            self.rows["window"].append(self._window)
            self.rows["first_event"].append(self._first)
            self.rows["last_event"].append(self._first + n - 1)
            self.rows["start_time"].append(float(t[0]))
            self.rows["end_time"].append(float(t[-1]))
            self.rows["n_events"].append(n)
            self.rows["n_positive"].append(npos)
            self.rows["method"].append(name)
        self._first += n
        self._window += 1

    def table(self, time_type=None):
        """The metrics over time as a pyarrow Table (one row per window and method)."""
        import pyarrow as pa

        from streamcal.replay._arrow import fixed_width_array, string_array

        self._resolve(0)
        cols = {}
        for key, values in self.rows.items():
            if key in ("start_time", "end_time") and time_type is not None:
                arr = np.asarray(values, dtype=np.float64)
                ms = np.round(arr * 1000.0).astype(np.int64)
                cols[key] = fixed_width_array(ms, pa.timestamp("ms", tz=getattr(time_type, "tz", None)))
            elif key == "method":
                cols[key] = string_array(values)
            elif key in ("window", "first_event", "last_event", "n_events", "n_positive"):
                cols[key] = fixed_width_array(np.asarray(values, dtype=np.int64), pa.int64())
            else:
                cols[key] = fixed_width_array(np.asarray(values, dtype=np.float64), pa.float64())
        return pa.Table.from_arrays(list(cols.values()), names=list(cols))

    def overall(self) -> dict[str, dict[str, float]]:
        """Per method, each metric averaged over windows weighted by their number of events
        (windows where the metric is undefined are left out)."""
        self._resolve(0)
        out: dict[str, dict[str, float]] = {}
        n = np.asarray(self.rows["n_events"], dtype=np.float64)
        method = np.asarray(self.rows["method"], dtype=object)
        for name in self.methods:
            sel = method == name
            out[name] = {}
            for metric in self.metrics:
                v = np.asarray(self.rows[metric], dtype=np.float64)[sel]
                w = n[sel]
                ok = np.isfinite(v)
                out[name][metric] = float(np.sum(v[ok] * w[ok]) / np.sum(w[ok])) if ok.any() else float("nan")
        return out


class Reliability:
    """Exact reliability counts on a fixed logit-spaced grid of predicted probabilities.

    Bin edges are ``sigmoid(z)`` for ``z`` = -10, -9.5, ..., 10 (plus the ends 0 and 1), so rare
    event rates near 1e-4 are resolved as well as rates near 0.5.
    """

    EDGES = 1.0 / (1.0 + np.exp(-np.linspace(-10.0, 10.0, 41)))

    def __init__(self, names: list[str]):
        k = self.EDGES.size + 1
        self.count = {name: np.zeros(k) for name in names}
        self.sum_p = {name: np.zeros(k) for name in names}
        self.sum_y = {name: np.zeros(k) for name in names}

    def add(self, name: str, p: np.ndarray, y: np.ndarray) -> None:
        k = self.EDGES.size + 1
        b = np.searchsorted(self.EDGES, p, side="right")
        self.count[name] += np.bincount(b, minlength=k)
        self.sum_p[name] += np.bincount(b, weights=p, minlength=k)
        self.sum_y[name] += np.bincount(b, weights=y, minlength=k)

    def curve(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean predicted, observed frequency, count) over the non-empty bins."""
        c = self.count[name]
        ok = c > 0
        return self.sum_p[name][ok] / c[ok], self.sum_y[name][ok] / c[ok], c[ok]
