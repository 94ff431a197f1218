"""``group_col=`` (``--group-col``): keyed replay, one calibration per key pooled toward the global map.

Each method runs as a :class:`streamcal.KeyedCalibrator` over its own calibrator as the template
(PAV, I-spline, Platt or GEV). The source reads the group column into
:attr:`~streamcal.replay._batch.EventBatch.key` (a null key is an error naming its row), the
planner carries each label's key with it through the labels in flight (``ops.extra["key"]``),
:func:`keyed_step` hands the keys to the calibrator's ``prequential`` / ``process``, and
:class:`KeyedSink` counts each key's events, positives and predicted positives per method for the
summary: the field-level errors (:func:`streamcal.metrics.field_ece`,
:func:`streamcal.metrics.field_rce`), the keys surest to be miscalibrated and the largest keys.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal.replay._batch import EventBatch
from streamcal.replay._source import opt

__all__ = [
    "MIN_KEY_EVENTS",
    "KeyedSink",
    "check_keyed_options",
    "counted",
    "keyed_calibrators",
    "keyed_learn",
    "keyed_step",
    "summary_lines",
]

#: A key enters the summary's worst keys from this many events on (fewer: too noisy to rank).
MIN_KEY_EVENTS = 100
#: Keys listed in the summary as the worst and as the largest.
TOP_KEYS = 5


def keyed_calibrators(calibrators: dict, group_col, prior_strength, max_keys) -> dict:
    """With a group column, each method as a ``streamcal.KeyedCalibrator``: a calibrator with fixed
    bucket edges becomes the template of a new one (``prior_strength`` None: ``"auto"``), a
    ``KeyedCalibrator`` given as such runs as it is; Venn–Abers keys are independent (its interval
    is the key's own evidence: ``prior_strength`` 0, any other refused) and write their intervals;
    learned edges are refused, naming the method.
    The raw score (method ``raw``) stays as it is: the same score for every key.
    Without one, the methods as they are, a ``KeyedCalibrator`` among them refused."""
    from streamcal import KeyedCalibrator, VennAbersCalibrator

    if group_col is None:
        for name, cal in calibrators.items():
            if isinstance(cal, KeyedCalibrator):
                msg = f"calibrator {name!r} is keyed: name its key column with {opt('group_col', 'NAME')}."
                raise ValueError(msg)
        return calibrators
    from streamcal.replay.methods import RawScoreCalibrator

    out = {}
    for name, cal in calibrators.items():
        if isinstance(cal, RawScoreCalibrator):  # the score itself: one for every key, unkeyed
            out[name] = cal
            continue
        if isinstance(cal, KeyedCalibrator):
            out[name] = cal
            continue
        strength = "auto" if prior_strength is None else prior_strength
        if isinstance(cal, VennAbersCalibrator):
            if prior_strength not in (None, 0):
                msg = (
                    f"method {name!r} ({type(cal).__name__}) runs its keys independently (each key's interval is "
                    f"its own evidence), so {opt('prior_strength', prior_strength)} does not apply to it: leave "
                    f"it out, or give 0."
                )
                raise ValueError(msg)
            strength = 0
        if not cal.window_histogram.built:
            msg = (
                f"method {name!r} cannot run keyed: keyed replay ({opt('group_col')}) needs bucket edges fixed "
                f"before the stream (every key shares them), not learned from it; choose them with "
                f"{opt('buckets', 'logit:1024')} (or a number, or uniform:N)."
            )
            raise ValueError(msg)
        out[name] = KeyedCalibrator(cal, prior_strength=strength, max_keys=max_keys)
    return out


def check_keyed_options(group_col, prior_strength, max_keys) -> None:
    """Refuse the keyed options without ``group_col``."""
    if group_col is None:
        for name, value in (("prior_strength", prior_strength), ("max_keys", max_keys)):
            if value is not None:
                msg = f"{opt(name, value)} needs a group column; give it with {opt('group_col', 'NAME')}."
                raise ValueError(msg)


def keyed_step(cal, batch: EventBatch, ops, times):
    """One keyed method on one batch: ``(proba, llr)`` per event, or the exception it raised on
    input (as the unkeyed runner's step). ``ops`` None: ``prequential`` on the batch. A keyed
    Venn–Abers method gives ``(proba, llr, p0, p1)``."""
    try:
        with_interval = getattr(cal, "process_with_interval", None)
        if with_interval is not None:
            if ops is None:
                out = cal.prequential_with_interval(batch.key, batch.s, batch.y, weights=batch.w, times=times)
                return tuple(np.asarray(a) for a in out)
            out = with_interval(ops.extra["key"], ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)
            return tuple(np.asarray(a)[ops.pred_pos] for a in out)
        if ops is None:
            proba, llr = cal.prequential(batch.key, batch.s, batch.y, weights=batch.w, times=times)
            return np.asarray(proba), np.asarray(llr)
        proba, llr = cal.process(ops.extra["key"], ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)
        return np.asarray(proba)[ops.pred_pos], np.asarray(llr)[ops.pred_pos]
    except (ValueError, TypeError) as exc:
        return exc


def keyed_learn(cal, ops) -> None:
    """A keyed method learns the labels of ``ops`` (the end of the stream)."""
    cal.process(ops.extra["key"], ops.s, ops.y, ops.learn, weights=ops.w, times=ops.t)


class KeyedSink:
    """Per key and method, the events, positives and predicted positives (the sum of the
    probabilities served), unweighted like the replay's other metrics; :meth:`finish` turns them
    into the summary's field-level errors and keys."""

    def __init__(self, names: list[str], group_col: str):
        self.names = list(names)
        self.group_col = group_col
        self._index: dict = {}  # key -> its row in the sums
        self._keys: list = []
        self._events = np.zeros(0)
        self._pos = np.zeros(0)
        self._pred = {name: np.zeros(0) for name in self.names}

    def _rows(self, keys: np.ndarray) -> np.ndarray:
        """Each event's row in the sums (new keys get new rows)."""
        from streamcal._keys import as_key_column

        column = as_key_column(keys, "keys")
        rows = np.empty(len(column.keys), dtype=np.intp)
        for j, key in enumerate(column.keys):
            row = self._index.get(key)
            if row is None:
                row = self._index[key] = len(self._keys)
                self._keys.append(key)
            rows[j] = row
        grow = len(self._keys) - self._events.size
        if grow > 0:
            self._events = np.concatenate((self._events, np.zeros(grow)))
            self._pos = np.concatenate((self._pos, np.zeros(grow)))
            for name in self.names:
                self._pred[name] = np.concatenate((self._pred[name], np.zeros(grow)))
        return rows[column.codes]

    def add(self, batch: EventBatch, proba: dict, llr: dict, intervals=None) -> None:
        rows = self._rows(batch.key)
        k = len(self._keys)
        self._events += np.bincount(rows, minlength=k)
        self._pos += np.bincount(rows, weights=batch.y, minlength=k)
        for name in self.names:
            self._pred[name] += np.bincount(rows, weights=np.asarray(proba[name], dtype=np.float64), minlength=k)

    def finish(self, calibrators: dict) -> dict:
        """The summary's keyed part (plain numbers and strings): the group column, the keys seen,
        the minimum events of a ranked key, and per method ``field_ece``, ``field_rce``, the
        calibrator's keys held, evictions and prior strength (None for the raw score), ``worst`` (the keys of at least
        :data:`MIN_KEY_EVENTS` events whose miss is surest: the largest Poisson deviance of their
        positives against the sum of their probabilities, ties by the larger miss) and
        ``largest`` (most events), each key as ``{"key", "events", "positives", "predicted",
        "ratio", "deviance"}``."""
        events, pos = self._events, self._pos
        methods = {}
        for name in self.names:
            pred = self._pred[name]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = pred / pos
            cal = calibrators[name]
            keyed = hasattr(cal, "n_keys")  # (else the raw score: one for every key, no state per key)
            methods[name] = {
                "field_ece": _field_ece(events, pos, pred),
                "field_rce": _field_rce(events, pos, pred),
                "keys_held": int(cal.n_keys) if keyed else None,
                "evictions": int(cal.evictions) if keyed else None,
                "prior_strength": float(cal.strength) if keyed else None,
                "worst": self._worst(events, pos, pred, ratio),
                "largest": [self._entry(i, events, pos, pred, ratio) for i in _top(events, TOP_KEYS)],
            }
        return {
            "group_col": self.group_col,
            "n_keys": len(self._keys),
            "min_events": MIN_KEY_EVENTS,
            "methods": methods,
        }

    def _worst(self, events, pos, pred, ratio) -> list[dict]:
        dev = _deviance(pos, pred)
        ranked = (events >= MIN_KEY_EVENTS) & ~np.isnan(ratio) & ~np.isnan(dev)
        candidates = np.flatnonzero(ranked)
        # the surest misses first (the largest deviance: a large key's modest miss outranks a
        # small key's ratio that its noise explains); ties by the larger miss, then first seen
        miss = np.abs(pos - pred)
        order = np.lexsort((candidates, -miss[candidates], -dev[candidates]))
        return [self._entry(i, events, pos, pred, ratio) for i in candidates[order][:TOP_KEYS]]

    def _entry(self, i, events, pos, pred, ratio) -> dict:
        return {
            "key": self._keys[i],
            "events": int(events[i]),
            "positives": int(pos[i]),
            "predicted": float(pred[i]),
            "ratio": float(ratio[i]),
            "deviance": float(_deviance(pos[i : i + 1], pred[i : i + 1])[0]),
        }


def _top(events: np.ndarray, k: int) -> np.ndarray:
    """The rows of the ``k`` largest counts, largest first (ties: first seen)."""
    return np.lexsort((np.arange(events.size), -events))[:k]


def _field_ece(events, pos, pred) -> float:
    """:func:`streamcal.metrics.field_ece` from per-key sums (unit weights)."""
    keep = events > 0
    return float(np.sum(np.abs(pos[keep] - pred[keep])) / np.sum(events[keep])) if keep.any() else math.nan


def _field_rce(events, pos, pred) -> float:
    """:func:`streamcal.metrics.field_rce` from per-key sums (unit weights)."""
    has = pos > 0.0
    if not has.any():
        return math.nan
    rel = np.abs(pos[has] - pred[has]) / pos[has]
    return float(np.sum(events[has] * rel) / np.sum(events[has]))


def _deviance(pos: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Per key the Poisson deviance of the positives seen against the sum of the served
    probabilities, ``2 (y log(y / p) - (y - p))``: how much evidence the key's events give that
    its probabilities are off (0 where they match; ``2 p`` for a key with no positive)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(pos > 0.0, pos * np.log(pos / pred), 0.0)
    return 2.0 * (term - (pos - pred))


def counted(n: int, noun: str) -> str:
    """``"1 key"``, ``"1,612 keys"``: a count with its noun, plural unless one."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _ratio(x: float) -> str:
    return "inf" if math.isinf(x) else ("nan" if math.isnan(x) else f"{x:.3f}")


def _key_rows(entries: list[dict]) -> list[str]:
    return [
        f"      {e['key']!s}: {counted(e['events'], 'event')}, {counted(e['positives'], 'positive')}, "
        f"sum of p {e['predicted']:,.1f}, ratio {_ratio(e['ratio'])}, deviance {e['deviance']:,.1f}"
        for e in entries
    ]


def _not_held(n_keys: int, m: dict) -> str:
    """Why fewer keys are held than seen: the others learned no label yet (or were evicted)."""
    other = n_keys - m["keys_held"]
    if other <= 0:
        return ""
    why = "no label learned yet" + (" or evicted" if m["evictions"] else "")
    return f" (the other {counted(other, 'key')} seen: {why})"


def summary_lines(keyed: dict | None) -> list[str]:
    """The summary's keyed part as text lines (none without a group column)."""
    if not keyed:
        return []
    lines = [
        f"Keyed by {keyed['group_col']!r}: {counted(keyed['n_keys'], 'key')}. Field-level errors over the whole "
        "stream (per key |positives - sum of p|; ratio = sum of p / positives, above 1 over-predicts):"
    ]
    for name, m in keyed["methods"].items():
        held = (
            "the score itself, unkeyed"
            if m["keys_held"] is None
            else f"{counted(m['keys_held'], 'key')} held{_not_held(keyed['n_keys'], m)}, {m['evictions']:,} evicted, "
            f"prior strength {m['prior_strength']:.4g}"
        )
        lines.append(f"  {name}: field ECE {m['field_ece']:.4f}, field RCE {m['field_rce']:.4f}; {held}")
        lines.append(f"    worst keys (at least {keyed['min_events']:,} events; surest miss first, by deviance):")
        lines.extend(_key_rows(m["worst"]) or ["      none"])
        lines.append("    largest keys:")
        lines.extend(_key_rows(m["largest"]))
    return lines
