"""Shared code of the Spark processor's tests (``tests/test_spark.py``,
``tests/test_spark_dead_letters.py``): micro-batch rows of a seeded keyed stream, the in-process
references a processor's output must equal, and the runs of a processor over micro-batches with
Spark's ``TwsTester``. Imported only after the tests have skipped where pyspark is missing."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd

from streamcal import KeyedCalibrator, PAVCalibrator


def stream_rows(rng, n_events: int, keys: list, *, label_delay: int | None):
    """Rows of a keyed stream in arrival order: a score row per event and, ``label_delay`` rows later
    (``None``: in the same row), its label row. Columns as the processor reads them."""
    key = rng.choice(np.array(keys, dtype=object), size=n_events)
    score = rng.beta(2, 3, size=n_events)
    label = (rng.uniform(size=n_events) < score**1.5).astype(np.float64)
    rows = []
    for i in range(n_events):
        event = f"e{i}"
        if label_delay is None:
            rows.append((2 * i, key[i], event, score[i], label[i]))
        else:
            rows.append((2 * i, key[i], event, score[i], np.nan))
            rows.append((2 * (i + label_delay) + 1, key[i], event, np.nan, label[i]))
    rows.sort(key=lambda r: r[0])
    frame = pd.DataFrame(rows, columns=["order", "key", "event_id", "score", "label"])
    frame["order"] = np.arange(len(frame), dtype=np.float64)
    frame["time"] = np.nan
    return frame


def operations(rows: pd.DataFrame, scores_of: dict | None = None):
    """The in-process operations of ``rows`` in ``order``: a score row predicts, a label row learns
    its event's score, a row with both predicts then learns. Returns ``(keys, scores, labels,
    learn, scored)``, ``scored`` the (event id, operation) of each prediction. ``scores_of`` (event
    id -> score) carries the scores of earlier rows whose labels come here."""
    scores_of = {} if scores_of is None else scores_of
    ops, scored = [], []
    for r in rows.sort_values("order").itertuples():
        if not math.isnan(r.score):
            scores_of[r.event_id] = r.score
            scored.append((r.event_id, len(ops)))
            ops.append((str(r.key), r.score, 0.0, False))
            if not math.isnan(r.label):
                ops.append((str(r.key), r.score, r.label, True))
        else:
            ops.append((str(r.key), scores_of[r.event_id], r.label, True))
    k, s, y, learn = (np.array(c) for c in zip(*ops, strict=True))
    return k, s, y, learn, scored


def scored_frame(scored, proba, llr) -> pd.DataFrame:
    at = [j for _, j in scored]
    return pd.DataFrame({"event_id": [e for e, _ in scored], "proba": proba[at], "llr": llr[at]})


def reference(frame: pd.DataFrame, key) -> pd.DataFrame:
    """One in-process calibrator over ``key``'s rows in order: the scored rows with ``proba`` and
    ``llr``."""
    _k, s, y, learn, scored = operations(frame[frame["key"] == key])
    return scored_frame(scored, *PAVCalibrator(prior=None).process(s, y, learn))


def shard_of(key, shards: int = 3) -> int:
    """A stable shard of ``key`` for the tests (the query uses Spark's ``xxhash64``; any split works)."""
    return sum(str(key).encode()) % shards


def run_in_batches(tester, frame: pd.DataFrame, n_batches: int, rng) -> pd.DataFrame:
    """Feed ``frame`` to the tester in ``n_batches`` micro-batches, grouped by shard, each shard's
    rows shuffled (Spark does not keep the order inside a group; the ``order`` column restores it).
    The key reaches the processor as a string; the output's key goes back to the frame's."""
    outs = []
    kinds = {str(key): key for key in frame["key"].unique()}
    for bounds in np.array_split(np.arange(len(frame)), n_batches):
        part = frame.iloc[bounds].assign(key=lambda f: f["key"].astype(str))
        for shard, rows in part.groupby(part["key"].map(shard_of), sort=False):
            shuffled = rows.sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
            outs.append(tester.testInPandas(shard, shuffled.reset_index(drop=True)))
    out = pd.concat(outs, ignore_index=True)
    return out.assign(key=out["key"].map(kinds))


def key_state(tester, key, shard=None):
    """``(n_learned, pending event ids)`` of ``key`` in its shard's state (None if it has none)."""
    row = tester.peekValueState("shard", shard_of(key) if shard is None else shard)
    if row is None or str(key) not in row[1]:
        return None
    at = row[1].index(str(key))
    return row[3][at], [i for k, i in zip(row[5], row[6], strict=True) if k == str(key)]


def keyed_reference(frame: pd.DataFrame, key) -> pd.DataFrame:
    """``KeyedCalibrator(prior_strength=0).process`` over ``key``'s rows in order (one call per key,
    as the processor sees one key): the scored rows with ``proba`` and ``llr``."""
    k, s, y, learn, scored = operations(frame[frame["key"] == key])
    return scored_frame(scored, *KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=0).process(k, s, y, learn))


def assert_equal_to_reference(out: pd.DataFrame, frame: pd.DataFrame, keys) -> None:
    for key in keys:
        mine = out[(out["key"] == key) & out["status"].isin(["scored", "scored_learned"])]
        expected = keyed_reference(frame, key)
        assert mine["event_id"].tolist() == expected["event_id"].tolist()
        assert np.array_equal(mine["proba"].to_numpy(), expected["proba"].to_numpy())  # bit for bit
        assert np.array_equal(mine["llr"].to_numpy(), expected["llr"].to_numpy())
    for key in keys:
        mine = out[(out["key"] == key) & out["status"].isin(["scored", "scored_learned"])]
        expected = reference(frame, key)
        assert mine["event_id"].tolist() == expected["event_id"].tolist()
        assert np.array_equal(mine["proba"].to_numpy(), expected["proba"].to_numpy())  # bit for bit
        assert np.array_equal(mine["llr"].to_numpy(), expected["llr"].to_numpy())


def lagged_reference(batches: list, shard_of_key, strength: float) -> pd.DataFrame:
    """The in-process reference of pooling toward all traffic, lagged by one micro-batch, built from
    KeyedCalibrator pieces: per micro-batch and shard (in shard order), a copy of the all-traffic
    keyed calibrator after the previous micro-batch (no keys) takes the rows of the shard's keys
    that have rows here, processes the shard's operations in order, and gives the rows back; the
    all-traffic calibrator is then merged with each shard's labelled events of the micro-batch (a
    keyed calibrator without keys that learned them), in shard order. Returns the scored rows with
    ``proba`` and ``llr``."""
    from streamcal import merge

    template = PAVCalibrator(prior=None)
    everything = None  # the all-traffic keyed calibrator after the micro-batches so far
    rows_of, scores_of, scored_frames = {}, {}, []
    for batch in batches:
        deltas = []
        shards = batch["key"].map(shard_of_key)
        for shard in sorted(shards.unique()):
            k, s, y, learn, scored = operations(batch[shards == shard], scores_of)
            engine = KeyedCalibrator(template, prior_strength=strength)
            if everything is not None:
                engine = copy.deepcopy(everything)
            names = sorted(set(k.tolist()))
            for key in names:
                if key in rows_of:
                    engine.import_key(key, rows_of[key])
            proba, llr = engine.process(k, s, y, learn)
            rows_of.update({key: engine.export_key(key) for key in names if key in engine})
            scored_frames.append(scored_frame(scored, proba, llr))
            delta = KeyedCalibrator(template, prior_strength=strength)
            if learn.any():
                delta.update(np.zeros(int(learn.sum()), dtype=np.int64), s[learn], y[learn]).drop_key(0)
                deltas.append(delta)
        if deltas:
            everything = merge(deltas if everything is None else [everything, *deltas])
    return pd.concat(scored_frames, ignore_index=True)


def run_pooled(tester, frame: pd.DataFrame, n_batches: int, rng, global_dir: str) -> tuple[pd.DataFrame, list]:
    """Feed ``frame`` to a pooled processor in ``n_batches`` micro-batches (timestamps 1 s, 2 s,
    ...), merging each micro-batch's partial rows into ``global_dir`` as the query's sink does.
    Returns the output without the partial rows and the micro-batches fed."""
    from streamcal.spark._pool import merge_partials

    outs, batches = [], []
    for b, bounds in enumerate(np.array_split(np.arange(len(frame)), n_batches)):
        part = frame.iloc[bounds].assign(key=lambda f: f["key"].astype(str), batch_ms=1000 * (b + 1))
        batches.append(part)
        got = [
            tester.testInPandas(shard, rows.sample(frac=1.0, random_state=int(rng.integers(1 << 30))))
            for shard, rows in part.groupby(part["key"].map(shard_of), sort=False)
        ]
        out = pd.concat(got, ignore_index=True)
        partial = out[out["status"] == "partial"]
        assert (partial["time"] == 1000 * (b + 1)).all()
        merge_partials(global_dir, 1000 * (b + 1), b, [(int(r.event_id), r.partial) for r in partial.itertuples()])
        outs.append(out[out["status"] != "partial"])
    return pd.concat(outs, ignore_index=True), batches
