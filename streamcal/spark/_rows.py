"""A shard's rows of a micro-batch, in columns: which are bad, which join a pending score, and the
calibrator operations they make, run for all the shard's keys in one compiled call (no Spark here;
the processor calls it with the shard's state)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from streamcal._validation import bad_score_message
from streamcal.windows import as_window

__all__ = ["OUTPUT_COLUMNS", "KeyState", "Pending", "forget_unused_keys", "run_rows"]

# The processor's output, after the key column (whose type is the input's).
OUTPUT_COLUMNS = {
    "event_id": "string",
    "time": "double",
    "score": "double",
    "label": "double",
    "proba": "double",
    "llr": "double",
    "status": "string",
    "error": "string",
    "n_learned": "long",
    "n_pending": "long",
}


class Pending:
    """A key's scores awaiting their labels, oldest first: event id -> (score, time, order)."""

    def __init__(self, ids=(), scores=(), times=(), orders=()):
        self.rows = {i: (s, t, o) for i, s, t, o in zip(ids, scores, times, orders, strict=True)}

    def __len__(self) -> int:
        return len(self.rows)

    def columns(self) -> tuple[list, list, list, list]:
        values = list(self.rows.values())
        return list(self.rows), [v[0] for v in values], [v[1] for v in values], [v[2] for v in values]

    def drop_oldest(self, bound: int) -> list[tuple]:
        """Drop the oldest scores beyond ``bound``: ``(event id, time, score)`` of each."""
        dropped = []
        while len(self.rows) > bound:
            event_id = next(iter(self.rows))
            score, time, _ = self.rows.pop(event_id)
            dropped.append((event_id, time, score))
        return dropped


class KeyState:
    """One key's bookkeeping between micro-batches: its number in the shard's
    :class:`streamcal.KeyedCalibrator` (whose keys are ints), events learned, pending scores, the
    processing time of its last row that was not a dead letter."""

    __slots__ = ("n_learned", "number", "pending", "seen_ms")

    def __init__(self, number: int, n_learned: int = 0, pending: Pending | None = None, seen_ms: int = 0):
        self.number, self.n_learned, self.seen_ms = number, n_learned, seen_ms
        self.pending = Pending() if pending is None else pending


def forget_unused_keys(states: dict, seen: dict, out: dict) -> None:
    """Undo the registration of a micro-batch's keys for the keys none of whose rows in ``out`` was
    used (a row is used when its status is ``"scored"``, ``"learned"`` or ``"scored_learned"``;
    every row of such a key is a dead letter): a key new in the micro-batch is forgotten, another
    gets back the time of its last row before. ``seen``: key -> its ``seen_ms`` before the
    micro-batch, None for a new key."""
    status = out["status"]
    dead = (status == "rejected") | (status == "unmatched")
    if not dead.any():
        return  # every key's rows were used
    used = set(out["key"][~dead & (status != "dropped")].tolist())
    for name, before in seen.items():
        if name not in used:
            if before is None:
                del states[name]
            else:
                states[name].seen_ms = before


def _errors(key_is_null: np.ndarray, no_id: np.ndarray, s: np.ndarray, y: np.ndarray, t: np.ndarray, layout,
            window: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Why each row cannot be used (the first reason that applies), or None; and whether it can.

    ``layout`` is the bucket layout of the engine's template: a score outside its domain is refused
    as the engine's array face refuses it (``layout.score_low <= s <= layout.score_high``), with the
    engine's message. ``window`` names a window that learns at event times (None: the template's
    window counts events): a row with a score and a label then needs a time, and no row may carry
    an infinite one."""
    no_score, no_label = np.isnan(s), np.isnan(y)
    low, high = layout.score_low, layout.score_high
    checks = [
        (key_is_null, lambda i: "the key is null"),
        (~no_score & ~np.isfinite(s), lambda i: f"score must be finite; got {float(s[i])!r}"),
        (~no_score & ~((s >= low) & (s <= high)),
         lambda i: bad_score_message(float(s[i]), "score", "", low, high, layout.kind)),
        (~no_label & (y != 0.0) & (y != 1.0), lambda i: f"label must be 0 or 1; got {float(y[i])!r}"),
        (no_score & no_label, lambda i: "the row has neither a score nor a label (a NaN score counts as none)"),
        (no_score & no_id, lambda i: "a label row without score needs an event id to find its score"),
    ]
    if window is not None:
        checks += [
            (np.isinf(t), lambda i: f"time must be finite; got {float(t[i])!r}"),
            (~no_score & ~no_label & np.isnan(t), lambda i: f"{window} learns at event times: the row has no time"),
        ]
    errors = np.full(s.size, None, dtype=object)
    unset = np.ones(s.size, dtype=bool)
    for mask, reason in checks:
        for i in np.flatnonzero(mask & unset):
            errors[i] = reason(i)
            unset[i] = False
    return errors, unset


def _behind(time: float, clock: float, window: str) -> str:
    return (
        f"{window} learns at event times that never go backwards: the row's time {time!r} is before {clock!r}, "
        "the shard's clock (the latest time learned before the row)"
    )


def _time_window(engine) -> str | None:
    """The engine's window as its call (``TimeWindow(seconds=3600.0)``) if it learns at event
    times, else None."""
    window = as_window(engine.calibrator.window)
    return repr(window) if window.uses_times else None


def _join(touched: list, codes, ids, s, y, t, orders, waits, label_only, ok, errors, window: str | None, clock: float):
    """Walk the rows in order: a score row that ``waits`` joins its key's pending scores (a repeated
    event id keeps its latest score, as the newest), and a label row takes the pending score of its
    event id, which leaves the pending scores. Returns ``(score, time, joined)``: each row's score
    (a joined label row's is its pending score's), the time it learns at, and whether it joined.

    The label row learns at its own time, or without one at its score's. Under a ``window`` that
    learns at event times, whose clock (the latest time learned; ``clock`` before the rows) never
    goes back, a label row without a time learns at its score's time or the clock, whichever is
    later (its label arrives now); one with a time before the clock, or without a time whose score
    has none either, is refused (``ok`` False, ``errors`` says why, its score stays pending), and so
    is a row with score and label whose time is before the clock."""
    score, time, joined = s.copy(), t.copy(), np.zeros(s.size, dtype=bool)
    both = ok & ~np.isnan(s) & ~np.isnan(y)
    if window is not None:
        # the clock before each row, from the rows with score and label before it (a refused one is
        # behind the clock, so counting it changes nothing)
        from_both = np.fmax.accumulate(np.concatenate(([clock], np.where(both, t, np.nan))))[:-1]
    at_rows = np.flatnonzero(waits | label_only)  # in order: a label may join a score of this batch
    # the loop's rows as Python values, where numpy's scalars cost more than the work
    columns = (at_rows, codes[at_rows], ids[at_rows], s[at_rows], t[at_rows], orders[at_rows], waits[at_rows])
    clocks = from_both[at_rows].tolist() if window is not None else [None] * at_rows.size
    rows_of = zip(*(c.tolist() for c in columns), strict=True)
    for (i, code, event_id, score_i, own, order_i, wait), before in zip(rows_of, clocks, strict=True):
        rows = touched[code].pending.rows
        if wait:
            rows.pop(event_id, None)
            rows[event_id] = (score_i, own, order_i)
            continue
        found = rows.get(event_id)
        if found is None:
            continue  # unmatched
        at = found[1] if math.isnan(own) else own
        if window is not None:
            now = max(clock, before)
            if math.isnan(at):
                errors[i] = f"{window} learns at event times: neither the label row nor its score has a time"
                ok[i] = False
                continue
            if own < now:  # its own time (a null one is never before)
                errors[i], ok[i] = _behind(own, now, window), False
                continue
            at = clock = max(at, now)
        del rows[event_id]
        score[i], time[i], joined[i] = found[0], at, True
    if window is not None:  # the rows with score and label, against the clock of the label rows before them too
        learned = np.fmax.accumulate(np.concatenate(([-np.inf], np.where(joined, time, np.nan))))[:-1]
        now = np.fmax(from_both, learned)
        for i in np.flatnonzero(both & (t < now)):
            errors[i], ok[i] = _behind(float(t[i]), float(now[i]), window), False
    return score, time, joined


def run_rows(template, engine, frame: pd.DataFrame, states: dict, *, remember: bool, max_pending: int):
    """Run a shard's rows (columns ``key, event_id, score, label, time, order``) through ``engine``,
    the shard's :class:`streamcal.KeyedCalibrator` (``prior_strength=0``: every key on its own; else
    the micro-batch's engine, pooled toward the global map of all traffic it was built with).

    Rows go by ascending ``order`` (ties in arrival order); the keys do not interact, so each key sees
    its own rows in that order. A score row is predicted with its key's state before it and, when
    ``remember`` and it has an event id, waits in the key's pending scores for its label; a label row
    learns the pending score of its event id; a row with both predicts, then learns. Without
    pooling, a key the engine holds no state for answers as a fresh ``template`` until its first
    label; pooled, from the engine's global map. A label row learns at its own time, or at its
    score's without one; under a window that learns at event times, the rows :func:`_join` refuses
    (a time before the shard's clock, or no time at all) are rejected, and a label row without a
    time learns no earlier than the clock. ``engine`` and
    ``states`` (key -> :class:`KeyState`, one per non-null key of ``frame``) are updated in place. Returns the output
    columns (with ``key``): every row, bad ones with status ``"rejected"`` or ``"unmatched"`` and an
    ``error``, then a ``"dropped"`` row per pending score pushed out by ``max_pending``; and the
    events learned, ``(scores, labels, times)`` in order (``times`` None without event times).
    """
    if not frame["order"].is_monotonic_increasing:
        frame = frame.sort_values("order", kind="stable", na_position="last", ignore_index=True)
    keys = frame["key"].to_numpy(dtype=object)
    ids = frame["event_id"].to_numpy(dtype=object)
    s = frame["score"].to_numpy(dtype=np.float64, na_value=np.nan)
    y = frame["label"].to_numpy(dtype=np.float64, na_value=np.nan)
    t = frame["time"].to_numpy(dtype=np.float64, na_value=np.nan)
    # the columns' own null tests and codes (for Arrow-backed strings, without a Python object per row)
    null_key, no_id = frame["key"].isna().to_numpy(), frame["event_id"].isna().to_numpy()
    codes, uniques = frame["key"].factorize()  # -1 for a null key
    uniques = uniques.tolist()
    touched = [states[key] for key in uniques]
    window = _time_window(engine)
    errors, ok = _errors(null_key, no_id, s, y, t, engine.calibrator.window_histogram.layout, window)
    waits = ok & ~np.isnan(s) & np.isnan(y) & ~no_id if remember else np.zeros(s.size, dtype=bool)
    label_only = ok & np.isnan(s)
    clock = -np.inf
    if window is not None and (ok & ~np.isnan(y)).any():
        clock = engine.last_time  # what the engine checks times against
    orders = frame["order"].to_numpy(dtype=np.float64, na_value=np.nan)
    score, time, joined = _join(touched, codes, ids, s, y, t, orders, waits, label_only, ok, errors, window, clock)
    has_score = ok & ~np.isnan(s)  # ok now also excludes the rows refused for their time
    both = has_score & ~np.isnan(y)

    # the operations: a predict for each row with a score, then a learn for each row with a label
    learns = both | joined
    op_row = np.repeat(np.arange(s.size), has_score.astype(np.int64) + learns)
    first = np.ones(op_row.size, dtype=bool)
    first[1:] = op_row[1:] != op_row[:-1]
    op_learn = ~(first & has_score[op_row])
    proba, llr = np.full(s.size, np.nan), np.full(s.size, np.nan)
    learned = np.zeros(len(uniques), dtype=np.int64)
    taught = (np.zeros(0), np.zeros(0), None)  # the learned (score, label, time), in order
    if op_row.size:
        op_code = codes[op_row]
        op_time = time[op_row]
        times = op_time if op_learn.any() and np.isfinite(op_time[op_learn]).all() else None
        labels = np.where(op_learn, y[op_row], 0.0)
        numbers = np.array([state.number for state in touched], dtype=np.int64)
        has_state = np.array([number in engine for number in numbers.tolist()], dtype=bool)
        op_proba, op_llr = engine.process(numbers[op_code], score[op_row], labels, op_learn, times=times)
        taught = (score[op_row][op_learn], labels[op_learn], None if times is None else times[op_learn])
        # a key with no state yet answers as a fresh calibrator until its first learn (the engine's
        # global map, which has learned the other keys' events, would answer it otherwise)
        fresh = ~op_learn & ~has_state[op_code]
        if engine.prior_strength == 0 and fresh.any():  # pooled keys answer from the global map
            learned_before = pd.Series(op_learn).groupby(op_code).cumsum().to_numpy() - op_learn
            fresh &= learned_before == 0
            cold = template.clone()
            op_proba[fresh], op_llr[fresh] = (
                cold.predict_proba(score[op_row][fresh]),
                cold.predict_llr(score[op_row][fresh]),
            )
        proba[op_row[~op_learn]], llr[op_row[~op_learn]] = op_proba[~op_learn], op_llr[~op_learn]
        learned = np.bincount(op_code[op_learn], minlength=len(uniques)).astype(np.int64)
    dropped = []
    for code, state in enumerate(touched):
        state.n_learned += int(learned[code])
        if len(state.pending.rows) > max_pending:
            dropped.extend((uniques[code], *row) for row in state.pending.drop_oldest(max_pending))

    unmatched = label_only & ok & ~joined
    errors[unmatched] = [f"no pending score for event id {e!r}" for e in ids[unmatched]]
    status = np.select(
        [~ok, both, has_score, joined], ["rejected", "scored_learned", "scored", "learned"], default="unmatched"
    )
    n_learned = np.array([state.n_learned for state in touched] + [0], dtype=np.int64)
    n_pending = np.array([len(state.pending.rows) for state in touched] + [0], dtype=np.int64)
    out = {
        "key": keys,
        "event_id": ids,
        "time": t,
        "score": np.where(joined, score, s),
        "label": y,
        "proba": proba,
        "llr": llr,
        "status": status.astype(object),
        "error": errors,
        "n_learned": n_learned[codes],
        "n_pending": n_pending[codes],
    }
    if dropped:
        out = _stack(out, _dropped_rows(dropped, max_pending, uniques, n_learned, n_pending))
    return out, taught


def _dropped_rows(dropped: list[tuple], bound: int, uniques, n_learned, n_pending) -> dict:
    keys, ids, times, scores = (np.array(c, dtype=object) for c in zip(*dropped, strict=True))
    code = pd.Index(uniques).get_indexer(keys)
    return {
        "key": keys,
        "event_id": ids,
        "time": times.astype(np.float64),
        "score": scores.astype(np.float64),
        "status": np.full(len(ids), "dropped", dtype=object),
        "error": np.full(len(ids), f"more than max_pending={bound} scores await labels", dtype=object),
        "n_learned": n_learned[code],
        "n_pending": n_pending[code],
    }


def _stack(out: dict, more: dict) -> dict:
    """The rows of ``out`` then those of ``more`` (columns missing from ``more`` are null)."""
    n = len(more["status"])
    return {
        name: np.concatenate([column, more.get(name, np.full(n, None if column.dtype == object else np.nan))])
        for name, column in out.items()
    }
