"""One key's rows of a micro-batch, in columns: which are bad, which join a pending score, and the
calibrator operations they make (no Spark here; the processor calls it with the key's state)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["OUTPUT_COLUMNS", "Pending", "run_rows"]

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

    def drop_oldest(self, bound: int) -> dict:
        """Drop the oldest scores beyond ``bound``: one ``"dropped"`` output row each (columns)."""
        dropped = []
        while len(self.rows) > bound:
            event_id = next(iter(self.rows))
            score, time, _ = self.rows.pop(event_id)
            dropped.append((event_id, time, score))
        ids, times, scores = zip(*dropped, strict=True) if dropped else ((), (), ())
        error = f"more than max_pending={bound} scores await labels"
        return {
            "event_id": np.array(ids, dtype=object),
            "time": np.array(times, dtype=np.float64),
            "score": np.array(scores, dtype=np.float64),
            "status": np.full(len(ids), "dropped", dtype=object),
            "error": np.full(len(ids), error, dtype=object),
        }


def _errors(key_is_null: bool, ids: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Why each row cannot be used (the first reason that applies), or None."""
    no_score, no_label = np.isnan(s), np.isnan(y)
    checks = [
        (np.full(s.size, key_is_null), lambda i: "the key is null"),
        (~no_score & ~np.isfinite(s), lambda i: f"score must be finite; got {float(s[i])!r}"),
        (~no_label & (y != 0.0) & (y != 1.0), lambda i: f"label must be 0 or 1; got {float(y[i])!r}"),
        (no_score & no_label, lambda i: "the row has neither a score nor a label (a NaN score counts as none)"),
        (no_score & pd.isna(ids), lambda i: "a label row without score needs an event id to find its score"),
    ]
    errors = np.full(s.size, None, dtype=object)
    for mask, reason in checks:
        for i in np.flatnonzero(mask & pd.isna(errors)):
            errors[i] = reason(i)
    return errors


def run_rows(calibrator, frame: pd.DataFrame, pending: Pending, *, key_is_null: bool, remember: bool):
    """Run one key's rows (columns ``event_id, score, label, time, order``) through ``calibrator``.

    Rows go by ascending ``order`` (ties in arrival order). A score row is predicted with the state
    before it and, when ``remember`` and it has an event id, waits in ``pending`` for its label; a
    label row learns the pending score of its event id; a row with both predicts, then learns. One
    ``calibrator.process`` call runs them all. Returns ``(output columns, events learned)``; the output
    has every row, bad ones with status ``"rejected"`` or ``"unmatched"`` and an ``error``.
    """
    if not frame["order"].is_monotonic_increasing:
        frame = frame.sort_values("order", kind="stable", na_position="last", ignore_index=True)
    ids = frame["event_id"].to_numpy(dtype=object)
    s = frame["score"].to_numpy(dtype=np.float64, na_value=np.nan)
    y = frame["label"].to_numpy(dtype=np.float64, na_value=np.nan)
    t = frame["time"].to_numpy(dtype=np.float64, na_value=np.nan)
    errors = _errors(key_is_null, ids, s, y)
    ok = pd.isna(errors)
    has_score = ok & ~np.isnan(s)
    both = has_score & ~np.isnan(y)
    label_only = ok & np.isnan(s)
    score, time, joined = s.copy(), t.copy(), np.zeros(s.size, dtype=bool)
    waits = has_score & ~both & ~pd.isna(ids) if remember else np.zeros(s.size, dtype=bool)
    orders = frame["order"].to_numpy(dtype=np.float64, na_value=np.nan)
    for i in np.flatnonzero(waits | label_only):  # in order: a label may join a score of this batch
        if waits[i]:
            pending.rows.pop(ids[i], None)  # a repeated event id keeps its latest score, as the newest
            pending.rows[ids[i]] = (s[i], t[i], orders[i])
        elif (found := pending.rows.pop(ids[i], None)) is not None:
            score[i], joined[i] = found[0], True
            time[i] = found[1] if np.isnan(t[i]) else t[i]

    # the operations: a predict for each row with a score, then a learn for each row with a label
    learns = both | joined
    op_row = np.repeat(np.arange(s.size), has_score.astype(np.int64) + learns)
    first = np.ones(op_row.size, dtype=bool)
    first[1:] = op_row[1:] != op_row[:-1]
    op_learn = ~(first & has_score[op_row])
    proba, llr = np.full(s.size, np.nan), np.full(s.size, np.nan)
    if op_row.size:
        op_time = time[op_row]
        times = op_time if op_learn.any() and not np.isnan(op_time[op_learn]).any() else None
        labels = np.where(op_learn, y[op_row], 0.0)
        op_proba, op_llr = calibrator.process(score[op_row], labels, op_learn, times=times)
        proba[op_row[~op_learn]], llr[op_row[~op_learn]] = op_proba[~op_learn], op_llr[~op_learn]

    unmatched = label_only & ~joined
    errors[unmatched] = [f"no pending score for event id {e!r}" for e in ids[unmatched]]
    status = np.select(
        [~ok, both, has_score, joined], ["rejected", "scored_learned", "scored", "learned"], default="unmatched"
    )
    out = {
        "event_id": ids,
        "time": t,
        "score": np.where(joined, score, s),
        "label": y,
        "proba": proba,
        "llr": llr,
        "status": status.astype(object),
        "error": errors,
    }
    return out, int(learns.sum())
