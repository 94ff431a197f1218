"""Reading replay input: files, columns, types, and checks that name file, column and row."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from streamcal.replay.generate import format_from_path

__all__ = ["Chunk", "Columns", "ReplayInputError", "list_input_files", "read_chunks"]


class ReplayInputError(ValueError):
    """The replay input is unusable; the message names the file, the column and the row."""


@dataclass(frozen=True)
class Columns:
    """Which input columns replay reads, and under which names.

    Parameters
    ----------
    time : str or None
        Event time (timestamp, date, or a number of seconds). None: replay in file order, event
        ``k`` at time ``k``.
    score : str
        The model's score (a number).
    label : str
        The binary label (bool, or a number 0 / 1).
    label_time : str or None
        When the label becomes known (same kind as ``time``; null: never). Ignored when a
        ``label_delay`` is given; when the column is absent, labels are known at once.
    weight : str or None
        Optional non-negative sample weight.
    keep : tuple of str or None
        Input columns copied to the output (None: all of them).
    """

    time: str | None = "event_time"
    score: str = "score"
    label: str = "label"
    label_time: str | None = "label_time"
    weight: str | None = None
    keep: tuple[str, ...] | None = None


@dataclass
class Chunk:
    """One record batch of input, converted and checked.

    ``t`` / ``label_t`` are float64 seconds (``label_t`` +inf where a label never comes, None when
    labels are known at once); ``kept`` is the record batch of columns copied to the output.
    """

    file: str
    row0: int
    kept: object  # pyarrow.RecordBatch
    t: np.ndarray
    s: np.ndarray
    y: np.ndarray
    label_t: np.ndarray | None
    w: np.ndarray | None

    def __len__(self) -> int:
        return int(self.s.size)

    def where(self, column: str | None, i: int) -> str:
        """ "file 'x.parquet', column 'score', row 17" for row ``i`` of this chunk."""
        col = f", column {column!r}" if column else ""
        return f"file {self.file!r}{col}, row {self.row0 + i}"


def _where(file: str, column: str | None, row: int | None) -> str:
    col = f", column {column!r}" if column else ""
    r = f", row {row}" if row is not None else ""
    return f"file {file!r}{col}{r}"


def list_input_files(path, fmt: str | None = None) -> list[tuple[str, str]]:
    """``(file, format)`` pairs for a file or a directory (files sorted by path).

    In a directory, files whose names start with ``.`` or ``_`` are skipped (``_SUCCESS``,
    ``_metadata``), and so are files whose format is not recognised when ``fmt`` is None.
    """
    path = Path(path)
    if fmt is not None and fmt not in ("parquet", "ipc", "csv"):
        msg = f"`format` must be one of ['parquet', 'ipc', 'csv']; got {fmt!r}."
        raise ValueError(msg)
    if path.is_dir():
        files = []
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            for name in sorted(names):
                if name.startswith((".", "_")):
                    continue
                f = Path(root) / name
                f_fmt = fmt or format_from_path(f)
                if f_fmt is not None:
                    files.append((str(f), f_fmt))
        files.sort()
        if not files:
            msg = f"input directory {str(path)!r} holds no Parquet, Arrow IPC or CSV files."
            raise ReplayInputError(msg)
        return files
    if not path.exists():
        msg = f"input {str(path)!r} does not exist."
        raise ReplayInputError(msg)
    f_fmt = fmt or format_from_path(path)
    if f_fmt is None:
        msg = (
            f"cannot tell the format of {str(path)!r} from its name; name it *.parquet, *.arrow "
            "or *.csv, or pass format='parquet' / 'ipc' / 'csv'."
        )
        raise ReplayInputError(msg)
    return [(str(path), f_fmt)]


def _open(file: str, fmt: str):
    import pyarrow as pa
    import pyarrow.dataset as ds

    try:
        return ds.dataset(file, format=fmt)
    except (pa.ArrowException, OSError) as exc:
        msg = f"{_where(file, None, None)}: cannot be read as {fmt}: {exc}"
        raise ReplayInputError(msg) from None


def _kind(field_type) -> str:
    import pyarrow.types as pt

    if pt.is_boolean(field_type):
        return "bool"
    if pt.is_integer(field_type):
        return "int"
    if pt.is_floating(field_type):
        return "float"
    if pt.is_timestamp(field_type) or pt.is_date(field_type):
        return "time"
    if pt.is_null(field_type):
        return "null"
    return "other"


# a column of type null (all values missing, e.g. a header-only CSV) passes here; its values are
# then rejected row by row, so an empty file is fine and a file of nulls names its first row
_ALLOWED = {
    "score": ("int", "float", "null"),
    "label": ("bool", "int", "float", "null"),
    "time": ("time", "int", "float", "null"),
    "label_time": ("time", "int", "float", "null"),
    "weight": ("int", "float", "null"),
}


class _FilePlan:
    """The columns to read from one file and how to convert them."""

    def __init__(self, file: str, dataset, columns: Columns, use_label_time: bool):
        self.file = file
        schema = dataset.schema
        names = schema.names
        self.roles: dict[str, str] = {"score": columns.score, "label": columns.label}
        if columns.time is not None:
            self.roles["time"] = columns.time
        if use_label_time:
            self.roles["label_time"] = columns.label_time
        if columns.weight is not None:
            self.roles["weight"] = columns.weight
        for role, name in self.roles.items():
            if name not in names:
                hint = (
                    " (pass the right column name, or time_col=None to replay in file order)" if role == "time" else ""
                )
                msg = (
                    f"{_where(file, name, None)}: the {role.replace('_', ' ')} column is missing; "
                    f"the file has columns {names}{hint}."
                )
                raise ReplayInputError(msg)
            kind = _kind(schema.field(name).type)
            if kind not in _ALLOWED[role]:
                msg = (
                    f"{_where(file, name, None)}: the {role.replace('_', ' ')} column must be "
                    f"{' or '.join(k for k in _ALLOWED[role] if k != 'null')}; "
                    f"got type {schema.field(name).type}."
                )
                raise ReplayInputError(msg)
        if columns.keep is None:
            self.keep = list(names)
        else:
            missing = [c for c in columns.keep if c not in names]
            if missing:
                msg = f"{_where(file, missing[0], None)}: column to keep is missing; the file has columns {names}."
                raise ReplayInputError(msg)
            self.keep = list(columns.keep)
        self.read = list(dict.fromkeys([*self.keep, *self.roles.values()]))
        self.time_kind = _kind(schema.field(self.roles["time"]).type) if "time" in self.roles else None
        if "label_time" in self.roles:
            lt_kind = _kind(schema.field(self.roles["label_time"]).type)
            if lt_kind != "null" and (lt_kind == "time") != (self.time_kind == "time"):
                msg = (
                    f"{_where(file, self.roles['label_time'], None)}: the label time column is "
                    f"{schema.field(self.roles['label_time']).type} but the event time column is "
                    f"{schema.field(self.roles['time']).type}; "
                    "both must be timestamps or both numbers of seconds."
                )
                raise ReplayInputError(msg)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _seconds(arr, file: str, column: str, row0: int) -> np.ndarray:
    """float64 seconds from a timestamp / date / numeric arrow array; nulls become NaN."""
    import pyarrow as pa
    import pyarrow.types as pt

    typ = arr.type
    if pt.is_timestamp(typ):
        scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[typ.unit]
        raw = arr.cast(pa.int64()).to_numpy(zero_copy_only=False)
    elif pt.is_date32(typ):
        scale = 86_400.0
        raw = arr.cast(pa.int32()).to_numpy(zero_copy_only=False)
    elif pt.is_date64(typ):
        scale = 1e-3
        raw = arr.cast(pa.int64()).to_numpy(zero_copy_only=False)
    elif pt.is_null(typ):
        return np.full(len(arr), np.nan)
    else:
        scale = 1.0
        raw = arr.to_numpy(zero_copy_only=False)
    out = raw.astype(np.float64) if scale == 1.0 else raw * scale
    if arr.null_count:
        out = np.array(out, dtype=np.float64)
        out[np.asarray(arr.is_null())] = np.nan
    return out


def _numeric(arr, file: str, column: str, row0: int, what: str) -> np.ndarray:
    if arr.null_count:
        i = _first(np.asarray(arr.is_null()))
        msg = f"{_where(file, column, row0 + i)}: {what} is null."
        raise ReplayInputError(msg)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)


def _convert(batch, plan: _FilePlan, row0: int, label_delay: float | None) -> Chunk:
    file = plan.file
    roles = plan.roles
    n = batch.num_rows
    col = batch.column
    s = _numeric(col(roles["score"]), file, roles["score"], row0, "the score")
    bad = ~np.isfinite(s)
    if bad.any():
        i = _first(bad)
        where = _where(file, roles["score"], row0 + i)
        msg = f"{where}: the score must be finite; got {float(s[i])!r}."
        raise ReplayInputError(msg)
    y_arr = col(roles["label"])
    y = _numeric(y_arr, file, roles["label"], row0, "the label")
    bad = (y != 0.0) & (y != 1.0)
    if bad.any():
        i = _first(bad)
        msg = (
            f"{_where(file, roles['label'], row0 + i)}: the label must be binary "
            f"(0/1 or False/True); got {y_arr[i].as_py()!r}."
        )
        raise ReplayInputError(msg)
    if "time" in roles:
        t = _seconds(col(roles["time"]), file, roles["time"], row0)
        bad = ~np.isfinite(t)
        if bad.any():
            i = _first(bad)
            what = "null" if col(roles["time"])[i].as_py() is None else f"{float(t[i])!r}"
            where = _where(file, roles["time"], row0 + i)
            msg = f"{where}: the event time must be finite; got {what}."
            raise ReplayInputError(msg)
    else:
        t = np.arange(row0, row0 + n, dtype=np.float64)
    if label_delay is not None:
        label_t = t + label_delay
    elif "label_time" in roles:
        label_t = _seconds(col(roles["label_time"]), file, roles["label_time"], row0)
        is_null = np.asarray(col(roles["label_time"]).is_null()) if col(roles["label_time"]).null_count else None
        if is_null is not None:
            label_t[is_null] = np.inf  # a label that never arrives
        bad = np.isnan(label_t) | (label_t == -np.inf)
        if bad.any():
            i = _first(bad)
            where = _where(file, roles["label_time"], row0 + i)
            msg = f"{where}: the label time must be a time or null; got {float(label_t[i])!r}."
            raise ReplayInputError(msg)
        bad = label_t < t
        if bad.any():
            i = _first(bad)
            where = _where(file, roles["label_time"], row0 + i)
            msg = f"{where}: the label time ({float(label_t[i])!r} s) is before the event time ({float(t[i])!r} s)."
            raise ReplayInputError(msg)
    else:
        label_t = None
    w = None
    if "weight" in roles:
        w = _numeric(col(roles["weight"]), file, roles["weight"], row0, "the weight")
        bad = ~(np.isfinite(w) & (w >= 0.0))
        if bad.any():
            i = _first(bad)
            where = _where(file, roles["weight"], row0 + i)
            msg = f"{where}: the weight must be finite and non-negative; got {float(w[i])!r}."
            raise ReplayInputError(msg)
    kept = batch.select(plan.keep)
    return Chunk(file=file, row0=row0, kept=kept, t=t, s=s, y=y, label_t=label_t, w=w)


def read_chunks(
    files: list[tuple[str, str]],
    columns: Columns,
    *,
    batch_size: int,
    label_delay: float | None,
    output_schema_holder: dict,
) -> Iterator[Chunk]:
    """Yield checked :class:`Chunk` s file by file, batch by batch.

    ``output_schema_holder["kept"]`` receives the schema of the kept columns of the first file;
    later files' kept columns are cast to it (an error names the file if that fails).
    """
    import pyarrow as pa

    time_kind = None
    for file, fmt in files:
        if os.path.getsize(file) == 0:
            continue  # an empty file holds no events
        dataset = _open(file, fmt)
        use_label_time = (
            label_delay is None
            and columns.time is not None
            and columns.label_time is not None
            and columns.label_time in dataset.schema.names
        )
        plan = _FilePlan(file, dataset, columns, use_label_time)
        if plan.time_kind is not None:
            if time_kind is None:
                time_kind = plan.time_kind
            elif (time_kind == "time") != (plan.time_kind == "time"):
                kinds = ("timestamps", "numbers") if time_kind == "time" else ("numbers", "timestamps")
                where = _where(file, plan.roles["time"], None)
                msg = f"{where}: event times are {kinds[1]} here but {kinds[0]} in earlier files."
                raise ReplayInputError(msg)
        if "time" in plan.roles:
            output_schema_holder.setdefault("time_type", dataset.schema.field(plan.roles["time"]).type)
        kept_schema = pa.schema([dataset.schema.field(c) for c in plan.keep])
        target = output_schema_holder.setdefault("kept", kept_schema)
        mode = "column" if use_label_time else ("delay" if label_delay is not None else "immediate")
        if output_schema_holder.setdefault("label_mode", mode) != mode:
            msg = (
                f"{_where(file, columns.label_time, None)}: this file "
                f"{'has' if use_label_time else 'lacks'} the label time column but earlier files "
                f"{'lack' if use_label_time else 'have'} it."
            )
            raise ReplayInputError(msg)
        row0 = 0
        try:
            batches = dataset.to_batches(columns=plan.read, batch_size=batch_size)
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except (pa.ArrowException, OSError) as exc:
                    where = _where(file, None, row0)
                    msg = f"{where}: cannot read the file at or after this row: {exc}"
                    raise ReplayInputError(msg) from None
                if batch.num_rows == 0:
                    continue
                chunk = _convert(batch, plan, row0, label_delay)
                if not chunk.kept.schema.equals(target):
                    try:
                        chunk.kept = chunk.kept.cast(target)
                    except (pa.ArrowException, ValueError) as exc:
                        msg = (
                            f"{_where(file, None, row0)}: its columns {chunk.kept.schema.names} "
                            f"do not match the first file's ({target}): {exc}"
                        )
                        raise ReplayInputError(msg) from None
                yield chunk
                row0 += batch.num_rows
        except (pa.ArrowException, OSError) as exc:
            msg = f"{_where(file, None, row0)}: cannot read the file: {exc}"
            raise ReplayInputError(msg) from None
