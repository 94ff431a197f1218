"""The record every replay stage passes on: one batch of events, as columns.

The source stage yields :class:`EventBatch` es, the planner turns each into an operation
sequence, the runners calibrate it and the sinks consume it with the methods' outputs. Stages that
move rows (sorting the input, cutting it into batches, carrying labels in flight from batch to
batch) do it through this type's :meth:`EventBatch.columns`, so a new per-event column (say a key
for keyed calibration) is a new field here, and only the stages that fill or read it change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np

__all__ = ["PLANNED_COLUMN", "TIME_COLUMN", "EventBatch"]


# field metadata of the per-event columns (1-d arrays, or None when the input lacks one): the
# planner handles the times itself; every other column goes with its label through the labels in
# flight and the operation sequence, by name
TIME_COLUMN = {"column": True, "planned": False}
PLANNED_COLUMN = {"column": True, "planned": True}


@dataclass
class EventBatch:
    """One record batch of events, converted and checked.

    Attributes
    ----------
    source : Source
        The input the rows come from (named in messages).
    row0 : int
        The first row's position within that input.
    kept : pyarrow.RecordBatch
        The input columns copied to the output (a pyarrow Table in a batch made by
        :meth:`concat`; :meth:`slice` cuts it into record batches again).
    t : ndarray
        Event time, float64 seconds; in file order the event's index in the stream.
    s : ndarray
        The score, float64.
    y : ndarray
        The label, float64 0.0 / 1.0.
    label_t : ndarray or None
        When the label becomes known, float64 seconds (+inf: never); None when labels are known
        at once.
    w : ndarray or None
        The sample weight, float64; None without a weight column.
    key : ndarray or None
        The key of each event (int64, or an object array of str) for keyed calibration; None without a group
        column.
    """

    source: object  # a streamcal.replay._source.Source (not imported: _source imports this module)
    row0: int
    kept: object  # pyarrow.RecordBatch (a Table from `concat`)
    t: np.ndarray = field(metadata=TIME_COLUMN)
    s: np.ndarray = field(metadata=PLANNED_COLUMN)
    y: np.ndarray = field(metadata=PLANNED_COLUMN)
    label_t: np.ndarray | None = field(metadata=TIME_COLUMN)
    w: np.ndarray | None = field(metadata=PLANNED_COLUMN)
    key: np.ndarray | None = field(default=None, metadata=PLANNED_COLUMN)

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The names of the per-event columns, in field order."""
        return tuple(f.name for f in fields(cls) if f.metadata.get("column"))

    @classmethod
    def planned_columns(cls) -> tuple[str, ...]:
        """The per-event columns that go with each label through the planner, by name."""
        return tuple(f.name for f in fields(cls) if f.metadata.get("column") and f.metadata["planned"])

    def __len__(self) -> int:
        return int(self.s.size)

    def where(self, column: str | None, i: int) -> str:
        """ "file 'x.parquet', column 'score', row 17" for row ``i`` of this batch."""
        return self.source.where(column, self.row0 + i)

    def _map(self, fn, kept, **changes) -> EventBatch:
        cols = {name: None if (a := getattr(self, name)) is None else fn(a) for name in self.columns()}
        return replace(self, kept=kept, **cols, **changes)

    def slice(self, start: int, stop: int) -> EventBatch:
        """Rows ``start:stop`` (views, no copy); ``row0`` moves with them."""
        import pyarrow as pa

        stop = min(stop, len(self))
        kept = self.kept.slice(start, stop - start)
        if isinstance(kept, pa.Table):
            parts = kept.combine_chunks().to_batches()
            kept = parts[0] if parts else pa.RecordBatch.from_pylist([], schema=kept.schema)
        return self._map(lambda a: a[start:stop], kept, row0=self.row0 + start)

    def take(self, indices: np.ndarray) -> EventBatch:
        """The rows at ``indices``, in that order (a copy)."""
        import pyarrow as pa

        return self._map(lambda a: a[indices], self.kept.take(pa.array(indices)))

    @staticmethod
    def concat(batches: Sequence[EventBatch], source) -> EventBatch:
        """The rows of ``batches`` (all of one type) one after the other (a copy), as rows 0, 1,
        ... of ``source``; ``kept`` is a pyarrow Table."""
        import pyarrow as pa

        first = batches[0]
        kept = pa.Table.from_batches([b.kept for b in batches]).combine_chunks()
        cols = {
            name: None if getattr(first, name) is None else np.concatenate([getattr(b, name) for b in batches])
            for name in type(first).columns()
        }
        return replace(first, source=source, row0=0, kept=kept, **cols)
