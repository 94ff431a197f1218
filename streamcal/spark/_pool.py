"""Pooling toward the global map of all traffic: the maps written between micro-batches.

No shard sees all traffic, so each shard emits, per micro-batch, the *delta* of what its keys
learned: a :class:`streamcal.KeyedCalibrator` without keys whose global map learned the shard's
labelled events of the micro-batch in order. The query's sink (:func:`merge_partials`, on the
driver, before the micro-batch commits) merges the previous all-traffic map with the deltas in
shard order (``streamcal.merge``: exact, as one calibrator that learned them in that order) and
writes the result to ``global_dir``, named by the micro-batch's timestamp and id. A shard running
the micro-batch with timestamp ``T`` reads the newest map written for a timestamp before ``T``
(:func:`read_map`): the map of all traffic up to the end of the previous micro-batch. Spark keeps
each micro-batch's timestamp in its offset log and reuses it when it runs the micro-batch again
after a restart, so a micro-batch run again reads the map it read the first time.

The directory is read and written through ``pyarrow.fs`` (a local path, or ``hdfs://``, ``s3://``,
``gs://`` and the other schemes pyarrow knows), so the Python workers of a cluster reach it.
"""

from __future__ import annotations

import uuid

__all__ = ["KEEP_MAPS", "check_pooling", "empty_map", "learned_delta", "merge_partials", "read_map", "shared_map"]

_SUFFIX = ".streamcal"
#: Maps kept in ``global_dir``: a micro-batch reads the newest before its own (older ones are
#: deleted; a few more are kept for a reader still listing the directory).
KEEP_MAPS = 8
_CACHE: dict = {}  # path of a map -> the map (a worker reads and checks each map once)


def check_pooling(prior_strength, global_dir):
    """``prior_strength`` as a float, checked with ``global_dir``: ``0`` (keys on their own) or a
    positive number of pseudo-events with the directory of the all-traffic maps."""
    import math
    import numbers

    if prior_strength == "auto":
        msg = (
            "`prior_strength` must be a number >= 0 in Spark; got 'auto', whose between-key shift reads the "
            "evidence of every key, which no shard holds (see docs/spark.md)."
        )
        raise ValueError(msg)
    if (
        isinstance(prior_strength, bool)
        or not isinstance(prior_strength, numbers.Real)
        or not math.isfinite(prior_strength)
        or prior_strength < 0
    ):
        msg = f"`prior_strength` must be a finite number >= 0; got {prior_strength!r}."
        raise ValueError(msg)
    if prior_strength > 0 and not (isinstance(global_dir, str) and global_dir):
        msg = (
            "`global_dir` must name the directory of the all-traffic maps when `prior_strength` > 0 (for "
            f"example a folder under the query's checkpoint), or set prior_strength=0; got {global_dir!r}."
        )
        raise ValueError(msg)
    return float(prior_strength)


def _filesystem(global_dir: str):
    from pyarrow import fs

    return fs.FileSystem.from_uri(global_dir)


def _maps(filesystem, root: str) -> list[tuple[int, int, str]]:
    """``(timestamp ms, batch id, path)`` of every map in ``root``, oldest first."""
    from pyarrow import fs

    found = []
    for info in filesystem.get_file_info(fs.FileSelector(root, allow_not_found=True)):
        name = info.base_name
        if info.type != fs.FileType.File or not name.endswith(_SUFFIX):
            continue
        stamp, _, batch = name[: -len(_SUFFIX)].partition("-")
        if stamp.isdigit() and batch.isdigit():
            found.append((int(stamp), int(batch), info.path))
    return sorted(found)


def empty_map(template, strength: float):
    """The all-traffic map before any event: a keyed calibrator that has learned nothing."""
    from streamcal.keyed import KeyedCalibrator

    return KeyedCalibrator(template, prior_strength=strength)


def read_map(global_dir: str, before_ms: int, template, strength: float):
    """The newest all-traffic map written for a micro-batch timestamp earlier than ``before_ms`` (a
    keyed calibrator without keys, a new object), or the empty map if there is none."""
    import copy

    return copy.deepcopy(shared_map(global_dir, before_ms, template, strength))


def shared_map(global_dir: str, before_ms: int, template, strength: float):
    """:func:`read_map`'s map, read and checked once per worker and shared: read it only (the
    processor hands it to :meth:`streamcal.KeyedCalibrator.replace_global`, which copies what it
    takes)."""
    from streamcal.persist import from_bytes

    filesystem, root = _filesystem(global_dir)
    earlier = [path for stamp, _, path in _maps(filesystem, root) if stamp < before_ms]
    if not earlier:
        return empty_map(template, strength)
    path = earlier[-1]
    if path not in _CACHE:
        with filesystem.open_input_stream(path) as stream:
            data = stream.read()
        _CACHE.clear()
        _CACHE[path] = from_bytes(data, where=f"the global map {path}")
    return _CACHE[path]


def learned_delta(template, strength: float, scores, labels, times):
    """A keyed calibrator without keys whose global map learned ``scores``, ``labels`` (and
    ``times``) in order: a shard's share of one micro-batch, as :func:`merge_partials` merges it."""
    delta = empty_map(template, strength)
    if len(scores):
        # the global map alone learns them (no key's row: a clone of the template, as a keyed
        # calibrator's global map is), then becomes the delta's global map
        glob = template.clone()
        glob.update(scores, labels, times=times)
        delta.replace_global(glob)
    return delta


def merge_partials(global_dir: str, batch_ms: int, batch_id: int, partials: list[tuple[int, bytes]]) -> None:
    """Write the all-traffic map after micro-batch ``batch_id`` (timestamp ``batch_ms``): the newest
    map written before it merged with ``partials`` (``(shard, delta bytes)``, merged in shard
    order). Written whole under a temporary name, then renamed; maps older than the last
    ``KEEP_MAPS`` are deleted. Called again for the same micro-batch (a micro-batch run again),
    it writes the same map."""
    from streamcal.merging import merge
    from streamcal.persist import from_bytes, to_bytes

    filesystem, root = _filesystem(global_dir)
    filesystem.create_dir(root, recursive=True)
    maps = _maps(filesystem, root)
    earlier = [path for stamp, batch, path in maps if (stamp, batch) < (batch_ms, batch_id)]
    parts = [from_bytes(data, where=f"the partial map of shard {shard}") for shard, data in sorted(partials)]
    if earlier:
        with filesystem.open_input_stream(earlier[-1]) as stream:
            parts.insert(0, from_bytes(stream.read(), where=f"the global map {earlier[-1]}"))
    merged = merge(parts) if len(parts) > 1 else parts[0]
    path = f"{root}/{batch_ms:016d}-{batch_id:012d}{_SUFFIX}"
    temporary = f"{root}/.{uuid.uuid4().hex}.tmp"
    with filesystem.open_output_stream(temporary) as stream:
        stream.write(to_bytes(merged, allow_pickle=False))
    filesystem.move(temporary, path)
    for _, _, old in _maps(filesystem, root)[:-KEEP_MAPS]:
        filesystem.delete_file(old)
