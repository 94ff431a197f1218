"""Reading replay input: files and in-memory tables, columns, types, and checks that name the
input, the column and the row.

An input is a list of *sources*, each read record batch by record batch:

- files (Parquet, Arrow IPC, CSV; a directory is the list of its files), read with bounded
  memory: Parquet one row group at a time, streamed in batches of ``batch_size`` rows, with page
  checksums verified where the file has them;
- a pyarrow ``Table``, ``RecordBatch`` or ``RecordBatchReader``, a pandas or a polars
  ``DataFrame`` (pandas and polars are never imported here: an object is recognised only if its
  library is already loaded), or any object with the Arrow C stream interface.

Messages name options as the user spells them: Python's ``time_col='ts'`` by default, a command
line's ``--time-col ts`` inside :func:`option_spelling`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import queue
import shlex
import stat
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from streamcal.replay._batch import EventBatch
from streamcal.replay._keycolumn import key_values
from streamcal.replay.generate import format_from_path

__all__ = [
    "DEFAULT_LABEL_TIME_COL",
    "DEFAULT_TIME_COL",
    "Columns",
    "EventSource",
    "Prefetch",
    "ReplayInputError",
    "Source",
    "list_input_files",
    "list_sources",
    "opt",
    "option_spelling",
    "prepare",
    "read_chunks",
]


class ReplayInputError(ValueError):
    """The replay input is unusable; the message names the input, the column and the row."""


# ---------------------------------------------------------------- how options are spelled

_FLAGS: ContextVar[Mapping[str, str] | None] = ContextVar("streamcal_replay_flags", default=None)


def opt(name: str, *value) -> str:
    """Option ``name`` (set to ``value`` if given) as the user spells it.

    Python: ```time_col``` / ``time_col='ts'``; inside ``option_spelling({"time_col":
    "--time-col"})``: ``--time-col`` / ``--time-col ts`` (None and ``""`` as ``''``).
    """
    flags = _FLAGS.get()
    if flags is None or name not in flags:
        return f"`{name}`" if not value else f"{name}={value[0]!r}"
    if not value:
        return flags[name]
    v = value[0]
    return f"{flags[name]} {shlex.quote('' if v is None else str(v))}"


@contextlib.contextmanager
def option_spelling(flags: Mapping[str, str]):
    """Within this block, :func:`opt` spells the options in ``flags`` as command-line flags."""
    token = _FLAGS.set(dict(flags))
    try:
        yield
    finally:
        _FLAGS.reset(token)


class _DefaultName(str):
    """A column name the user did not choose (the default): absent is not an error."""

    __slots__ = ()


#: ``time_col``'s default: the ``event_time`` column if the input has one, else file order.
DEFAULT_TIME_COL = _DefaultName("event_time")
#: ``label_time_col``'s default: the ``label_time`` column if the input has one, else labels
#: known at once.
DEFAULT_LABEL_TIME_COL = _DefaultName("label_time")


@dataclass(frozen=True)
class Columns:
    """Which input columns replay reads, and under which names.

    Parameters
    ----------
    time : str or None
        Event time (timestamp, date, or a number of seconds). None: replay in file order, event
        ``k`` at time ``k``. :data:`DEFAULT_TIME_COL`: ``event_time`` if the input has it, else
        file order.
    score : str
        The model's score (a number).
    label : str
        The binary label (bool, or a number 0 / 1).
    label_time : str or None
        When the label becomes known (same kind as ``time``; null: never). Ignored when a
        ``label_delay`` is given. :data:`DEFAULT_LABEL_TIME_COL`: ``label_time`` if the input has
        it, else labels are known at once; a name given explicitly must be present.
    weight : str or None
        Optional non-negative sample weight.
    keep : tuple of str or None
        Input columns copied to the output (None: all of them).
    key : str or None
        The key of each event (integers or strings) for keyed calibration; None: no key.
    """

    time: str | None = DEFAULT_TIME_COL
    score: str = "score"
    label: str = "label"
    label_time: str | None = DEFAULT_LABEL_TIME_COL
    weight: str | None = None
    keep: tuple[str, ...] | None = None
    key: str | None = None


# ---------------------------------------------------------------- sources


class Source:
    """One input read in record batches: a file or an in-memory table."""

    noun = "input"
    path: str | None = None

    def __init__(self, label: str, where: str):
        self.label = label  # as listed in the summary
        self._where = where  # as named in messages

    def where(self, column: str | None = None, row: int | None = None) -> str:
        """``"file 'x.parquet', column 'score', row 17"`` (or the in-memory input's name)."""
        col = f", column {column!r}" if column else ""
        r = f", row {row}" if row is not None else ""
        return f"{self._where}{col}{r}"

    def schema(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def read_as_text(self, name: str) -> None:
        """Read column ``name`` as written (a string column), where the input's types are
        inferred from its text; a typed input (Parquet, Arrow, a data frame) keeps its types."""

    def first_not_a_number(self, name: str, bools: bool = False, times: bool = False) -> tuple[int, str] | None:
        """Where a text input's column ``name`` holds a cell that is not a number (see
        :meth:`FileSource.first_not_a_number`); None for a typed input."""
        return None

    def batches(self, columns: list[str], batch_size: int) -> Iterator:  # pragma: no cover - abstract
        raise NotImplementedError

    def count_rows(self) -> int | None:
        return None


class FileSource(Source):
    """A Parquet, Arrow IPC or CSV file."""

    noun = "file"

    def __init__(self, path: str, fmt: str):
        super().__init__(path, f"file {path!r}")
        self.path = path
        self.fmt = fmt
        self._schema = None
        self._text_columns: list[str] = []

    def _fail(self, exc: Exception):
        found = _format_by_magic(self.path)
        if found is not None and found != self.fmt:
            msg = (
                f"{self.where()}: is a {_FORMAT_NAMES[found]} file, not {_FORMAT_NAMES[self.fmt]} as "
                f"{opt('format', self.fmt)} says; give {opt('format', found)}."
            )
            return ReplayInputError(msg)
        msg = f"{self.where()}: cannot be read as {_FORMAT_NAMES[self.fmt]}: {_printable(str(exc))}"
        return ReplayInputError(msg)

    def _parquet(self):
        import pyarrow.parquet as pq

        # no pre-buffering (it holds whole column chunks), buffered page reads, and the page
        # checksums verified where the writer stored them
        return pq.ParquetFile(self.path, buffer_size=1 << 20, pre_buffer=False, page_checksum_verification=True)

    def _dataset(self):
        import pyarrow.dataset as ds

        if self.fmt == "csv" and self._text_columns:
            import pyarrow as pa
            import pyarrow.csv as pacsv

            types = {name: pa.string() for name in self._text_columns}
            csv = ds.CsvFileFormat(convert_options=pacsv.ConvertOptions(column_types=types))
            return ds.dataset(self.path, format=csv)
        return ds.dataset(self.path, format=self.fmt)

    def read_as_text(self, name: str) -> None:
        """A CSV column's types are inferred from its first block: ``name`` is read as a string
        column instead (a key ``"005"`` stays apart from ``"5"``, and a key that is not a number
        after the first block is not a conversion error)."""
        if self.fmt == "csv" and name not in self._text_columns:
            self._text_columns.append(name)
            self._schema = None

    def first_not_a_number(self, name: str, bools: bool = False, times: bool = False) -> tuple[int, str] | None:
        """The first cell of CSV column ``name`` that is not a number (nor ``true`` / ``false`` with
        ``bools``, nor an ISO 8601 timestamp with ``times``), as ``(row, text)``: what made the
        column's inferred type a string (None for another format, or none found)."""
        if self.fmt != "csv":
            return None
        import pyarrow as pa
        import pyarrow.csv as pacsv
        import pyarrow.dataset as ds

        csv = ds.CsvFileFormat(convert_options=pacsv.ConvertOptions(column_types={name: pa.string()}))
        row = 0
        try:
            for batch in ds.dataset(self.path, format=csv).to_batches(columns=[name]):
                for text in batch.column(0).to_pylist():
                    try:
                        float(text)
                    except (TypeError, ValueError):
                        boolean = bools and text is not None and text.lower() in ("true", "false")
                        if text is not None and not boolean and not (times and _is_timestamp(text)):
                            return row, text
                    row += 1
        except (pa.ArrowException, OSError, ValueError):
            return None
        return None

    def schema(self):
        import pyarrow as pa

        if self._schema is None:
            try:
                if self.fmt == "parquet":
                    with self._parquet() as pf:
                        self._schema = pf.schema_arrow
                else:
                    self._schema = self._dataset().schema
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise self._fail(exc) from None
        return self._schema

    def batches(self, columns, batch_size):
        if self.fmt != "parquet":
            # one record batch (IPC) or block (CSV) at a time, one ahead
            yield from self._dataset().to_batches(
                columns=columns, batch_size=batch_size, batch_readahead=1, fragment_readahead=1
            )
            return
        # one row group at a time, streamed in batches: memory is set by the batch size (and
        # the compressed size of a row group), never by the file
        with self._parquet() as pf:
            for group in range(pf.metadata.num_row_groups):
                yield from pf.iter_batches(batch_size=batch_size, row_groups=[group], columns=columns)

    def count_rows(self):
        import pyarrow as pa

        if self.fmt == "csv":
            return _csv_lines(self.path)
        try:
            if self.fmt == "parquet":
                with self._parquet() as pf:
                    return pf.metadata.num_rows
            return self._dataset().count_rows()
        except (pa.ArrowException, OSError, ValueError):
            return None


_FORMAT_NAMES = {"parquet": "Parquet", "ipc": "Arrow IPC", "csv": "CSV"}
# a CSV file up to this size has its rows counted before the replay (its lines, header aside): a
# second read of at most a few tenths of a second, for the metric windows' size and the progress;
# a larger one gets the default for long inputs
_CSV_COUNT_BYTES = 256 << 20


def _csv_lines(path: str) -> int | None:
    """The rows of an uncompressed CSV file of at most ``_CSV_COUNT_BYTES``, by its line breaks
    (a quoted field holding a line break counts twice: the figure sizes windows, it is not a
    check); None for a larger or compressed file, or one that cannot be read."""
    if path.lower().endswith((".gz", ".bz2", ".zst", ".lz4", ".br", ".zip", ".xz")):
        return None
    try:
        if os.path.getsize(path) > _CSV_COUNT_BYTES:
            return None
        lines, last = 0, b"\n"
        with open(path, "rb") as f:
            while chunk := f.read(1 << 23):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return None
    lines += last != b"\n"  # a last line without its line break
    return max(lines - 1, 0)  # the header line


def _format_by_magic(path: str) -> str | None:
    """``"parquet"`` or ``"ipc"`` when the file starts with that format's magic bytes, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return None
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith((b"ARROW1", b"\xff\xff\xff\xff")):
        return "ipc"
    return None


def _printable(text: str, limit: int = 300) -> str:
    """``text`` cut before its first character that is not printable (a reader's message may quote
    the bytes of a binary file), and to ``limit`` characters."""
    cut = next((i for i, c in enumerate(text) if not c.isprintable()), len(text))
    text = text[:cut].rstrip()
    return text if len(text) <= limit else text[:limit] + "..."


def _check_format(fmt: str | None) -> None:
    if fmt is not None and fmt not in _FORMAT_NAMES:
        msg = f"{opt('format')} must be one of ['parquet', 'ipc', 'csv']; got {fmt!r}."
        raise ValueError(msg)


def _is_timestamp(text: str) -> bool:
    """Whether ``text`` reads as an ISO 8601 date or timestamp (as a CSV time column holds them)."""
    from datetime import datetime

    try:
        datetime.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def _brief_text(text: str) -> str:
    """``repr(text)``, cut to 40 characters."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


class ArrowSource(Source):
    """A pyarrow Table or RecordBatchReader (read once), its record batches cut to ``batch_size``
    rows (no copy)."""

    def __init__(self, data, label: str, where: str):
        super().__init__(label, where)
        self.data = data

    def schema(self):
        return self.data.schema

    def batches(self, columns, batch_size):
        import pyarrow as pa

        if isinstance(self.data, pa.Table):
            batches = self.data.select(columns).to_batches()
        else:
            batches = (batch.select(columns) for batch in self.data)
        for batch in batches:
            for start in range(0, batch.num_rows, batch_size):
                yield batch.slice(start, batch_size)

    def count_rows(self):
        import pyarrow as pa

        return self.data.num_rows if isinstance(self.data, pa.Table) else None


class PandasSource(Source):
    """A pandas DataFrame, converted to Arrow ``batch_size`` rows at a time.

    Named index levels (say a DatetimeIndex named ``event_time``) are columns too, unless a
    column has that name; an unnamed index is left out.
    """

    def __init__(self, frame, label: str, where: str):
        super().__init__(label, where)
        self.frame = frame
        self._schema = None

    def _columns(self, frame):
        names = [n for n in frame.index.names if n is not None]
        if names and not any(n in frame.columns for n in names):
            return frame.reset_index(level=names)
        return frame

    def _convert(self, fn, rows: str):
        import pyarrow as pa

        try:
            return fn()
        except (pa.ArrowException, ValueError, TypeError) as exc:
            msg = f"{self.where()}{rows}: cannot be converted to Arrow: {exc}"
            raise ReplayInputError(msg) from None

    def schema(self):
        import pyarrow as pa

        if self._schema is None:
            frame = self._columns(self.frame)
            self._schema = self._convert(lambda: pa.Schema.from_pandas(frame, preserve_index=False), "")
        return self._schema

    def batches(self, columns, batch_size):
        import pyarrow as pa

        schema = pa.schema([self.schema().field(c) for c in columns])
        for start in range(0, len(self.frame), batch_size):
            part = self._columns(self.frame.iloc[start : start + batch_size])[columns]
            rows = f", rows {start}-{start + len(part) - 1}"
            yield self._convert(lambda p=part: pa.RecordBatch.from_pandas(p, schema=schema, preserve_index=False), rows)

    def count_rows(self):
        return len(self.frame)


class PolarsSource(Source):
    """A polars DataFrame, handed to Arrow ``batch_size`` rows at a time (zero-copy where polars
    can)."""

    def __init__(self, frame, label: str, where: str):
        super().__init__(label, where)
        self.frame = frame

    def schema(self):
        return self.frame.head(0).to_arrow().schema

    def batches(self, columns, batch_size):
        frame = self.frame.select(columns)
        for start in range(0, frame.height, batch_size):
            yield from frame.slice(start, batch_size).to_arrow().to_batches()

    def count_rows(self):
        return self.frame.height


def _in_memory(obj, position: int | None) -> Source | None:
    """The source for an in-memory table, or None if ``obj`` is not one."""
    import pyarrow as pa

    def named(kind: str):
        label = f"<{kind}>"
        where = f"the {kind}" if position is None else f"input {position} (a {kind})"
        return label, where

    if isinstance(obj, pa.Table):
        return ArrowSource(obj, *named("pyarrow Table"))
    if isinstance(obj, pa.RecordBatch):
        return ArrowSource(pa.Table.from_batches([obj]), *named("pyarrow RecordBatch"))
    if isinstance(obj, pa.RecordBatchReader):
        return ArrowSource(obj, *named("pyarrow RecordBatchReader"))
    pd = sys.modules.get("pandas")  # a pandas object exists only if pandas is loaded
    if pd is not None and isinstance(obj, pd.DataFrame):
        return PandasSource(obj, *named("pandas DataFrame"))
    pl = sys.modules.get("polars")
    if pl is not None and isinstance(obj, pl.DataFrame):
        return PolarsSource(obj, *named("polars DataFrame"))
    if pl is not None and isinstance(obj, pl.LazyFrame):
        msg = f"{opt('input')}: a polars LazyFrame is a query, not data; replay its `.collect()`."
        raise TypeError(msg)
    if hasattr(obj, "__arrow_c_stream__") and hasattr(pa.RecordBatchReader, "from_stream"):
        kind = type(obj).__name__
        return ArrowSource(pa.RecordBatchReader.from_stream(obj), *named(f"{kind} (Arrow stream)"))
    return None


def list_sources(input, fmt: str | None = None) -> list[Source]:
    """The sources of ``input``: a path (file or directory), an in-memory table, or a list of them
    (replayed in the order given)."""
    _check_format(fmt)
    if isinstance(input, (list, tuple)):
        if not input:
            msg = f"{opt('input')} must name at least one file, directory or table; got an empty list."
            raise ValueError(msg)
        items = list(input)
    else:
        items = [input]
    sources: list[Source] = []
    for k, item in enumerate(items):
        source = _in_memory(item, k if len(items) > 1 else None)
        if source is not None:
            sources.append(source)
        elif isinstance(item, (str, os.PathLike)):
            sources += [FileSource(f, f_fmt) for f, f_fmt in list_input_files(item, fmt)]
        else:
            msg = (
                f"{opt('input')} must be a path (Parquet, Arrow IPC or CSV file, or a directory), a pyarrow "
                f"Table or RecordBatchReader, a pandas or polars DataFrame, or a list of them; got "
                f"{type(item).__name__}."
            )
            raise TypeError(msg)
    return sources


def _check_file(path: Path, fmt: str) -> None:
    """A regular file holding at least one byte."""
    try:
        info = path.stat()
    except OSError as exc:
        msg = f"file {str(path)!r} cannot be read: {exc.strerror or exc}."
        raise ReplayInputError(msg) from None
    if not stat.S_ISREG(info.st_mode):
        msg = f"input {str(path)!r} is not a regular file or a directory."
        raise ReplayInputError(msg)
    if info.st_size == 0:
        what = {
            "parquet": "not a Parquet file",
            "ipc": "not an Arrow IPC file",
            "csv": "a CSV file starts with a header line",
        }[fmt]
        msg = f"file {str(path)!r} is empty (0 bytes): {what}."
        raise ReplayInputError(msg)


def list_input_files(path, fmt: str | None = None) -> list[tuple[str, str]]:
    """``(file, format)`` pairs for a file or a directory (files sorted by path).

    In a directory, files whose names start with ``.`` or ``_`` are skipped (``_SUCCESS``,
    ``_metadata``), and so are files whose format is not recognised when ``fmt`` is None. Every
    file must be a regular file with at least one byte (a zero-byte file is a truncated or
    failed write, never an empty table).
    """
    _check_format(fmt)
    path = Path(path)
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
        for f, f_fmt in files:
            _check_file(Path(f), f_fmt)
        return files
    if not path.exists():
        msg = f"input {str(path)!r} does not exist."
        raise ReplayInputError(msg)
    f_fmt = fmt or format_from_path(path)
    if f_fmt is None:
        msg = (
            f"cannot tell the format of {str(path)!r} from its name; name it *.parquet, *.arrow "
            f"or *.csv, or pass {opt('format', 'parquet')} ('ipc', 'csv')."
        )
        raise ReplayInputError(msg)
    _check_file(path, f_fmt)
    return [(str(path), f_fmt)]


# ---------------------------------------------------------------- columns


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
    if pt.is_string(field_type) or pt.is_large_string(field_type):
        return "string"
    if pt.is_dictionary(field_type) and _kind(field_type.value_type) == "string":
        return "string"
    return "other"


# a column of type null (all values missing, e.g. a header-only CSV) passes here; its values are
# then rejected row by row, so an empty file is fine and a file of nulls names its first row
_ALLOWED = {
    "score": ("int", "float", "null"),
    "label": ("bool", "int", "float", "null"),
    "time": ("time", "int", "float", "null"),
    "label_time": ("time", "int", "float", "null"),
    "weight": ("int", "float", "null"),
    "key": ("int", "string", "null"),
}
_ROLE_NAME = {
    "score": "score",
    "label": "label",
    "time": "event time",
    "label_time": "label time",
    "weight": "weight",
    "key": "key",
}
_ROLE_OPTION = {
    "score": "score_col",
    "label": "label_col",
    "time": "time_col",
    "label_time": "label_time_col",
    "weight": "weight_col",
    "key": "group_col",
}


def _missing_column(source: Source, role: str, name: str, schema, taken) -> ReplayInputError:
    """The column for ``role`` is not in the input: list the columns, and say how to choose one."""
    import difflib

    names = schema.names
    option = _ROLE_OPTION[role]
    what = _ROLE_NAME[role]
    # a likely candidate, among the columns no other role uses: a close name, or for times the
    # one timestamp column
    free = [c for c in names if c not in taken]
    candidates = difflib.get_close_matches(name, free, n=1, cutoff=0.6)
    if not candidates and role in ("time", "label_time"):
        timed = [f.name for f in schema if f.name in free and _kind(f.type) == "time"]
        candidates = timed if len(timed) == 1 else []
    hint = f"choose the {what} column with {opt(option, candidates[0] if candidates else 'NAME')}"
    if role == "time":
        hint += f", or replay in file order with {opt(option, None)}"
    msg = f"{source.where(name)}: the {what} column {name!r} is missing; the input has columns {names}; {hint}."
    return ReplayInputError(msg)


class _Plan:
    """The columns to read from one source and how to convert them."""

    def __init__(self, source: Source, schema, columns: Columns, use_time: bool, use_label_time: bool):
        self.source = source
        names = schema.names
        self.roles: dict[str, str] = {"score": columns.score, "label": columns.label}
        if use_time:
            self.roles["time"] = columns.time
        if use_label_time:
            self.roles["label_time"] = columns.label_time
        if columns.weight is not None:
            self.roles["weight"] = columns.weight
        if columns.key is not None:
            self.roles["key"] = columns.key
        for role, name in self.roles.items():
            if name not in names:
                taken = {c for c in (columns.score, columns.label, columns.time, columns.label_time) if c != name}
                raise _missing_column(source, role, name, schema, taken)
            kind = _kind(schema.field(name).type)
            if kind not in _ALLOWED[role]:
                msg = (
                    f"{source.where(name)}: the {_ROLE_NAME[role]} column must be "
                    f"{' or '.join(k for k in _ALLOWED[role] if k != 'null')}; "
                    f"got type {schema.field(name).type}."
                )
                bools = "bool" in _ALLOWED[role]
                times = "time" in _ALLOWED[role]
                found = None
                if kind == "string" and role != "key":
                    found = source.first_not_a_number(name, bools, times)
                if found is not None:
                    row, text = found
                    what = "not a number"
                    if bools or times:
                        what = f"neither a number nor {'true / false' if bools else 'a timestamp'}"
                    msg += f" Its row {row} holds {_brief_text(text)}, which is {what}."
                if role == "key" and kind == "float":
                    msg += (
                        " A float key column usually means missing keys (NaN) in an integer column (pandas "
                        "stores such a column as float): drop or fill them; as pandas' nullable 'Int64' the column "
                        "stays integer and replay names the row of the first missing key."
                    )
                raise ReplayInputError(msg)
        if columns.keep is None:
            self.keep = list(names)
        else:
            missing = [c for c in columns.keep if c not in names]
            if missing:
                msg = (
                    f"{source.where(missing[0])}: column to keep is missing; the input has columns {names} "
                    f"(see {opt('keep_columns')})."
                )
                raise ReplayInputError(msg)
            self.keep = list(columns.keep)
        self.read = list(dict.fromkeys([*self.keep, *self.roles.values()]))
        self.kept_schema = _schema_of(schema, self.keep)
        self.time_type = schema.field(self.roles["time"]).type if use_time else None
        self.time_kind = _kind(self.time_type) if use_time else None
        if use_label_time:
            lt_kind = _kind(schema.field(self.roles["label_time"]).type)
            if lt_kind != "null" and (lt_kind == "time") != (self.time_kind == "time"):
                msg = (
                    f"{source.where(self.roles['label_time'])}: the label time column is "
                    f"{schema.field(self.roles['label_time']).type} but the event time column is "
                    f"{schema.field(self.roles['time']).type}; "
                    "both must be timestamps or both numbers of seconds."
                )
                raise ReplayInputError(msg)
            _check_zones(source, schema, self.roles["time"], self.roles["label_time"])


def _check_zones(source: Source, schema, time_col: str, label_time_col: str) -> None:
    """Refuse event and label timestamps of which one has a time zone and the other none: a time
    without a zone is a wall-clock time of an unknown zone, so their difference is not known."""
    import pyarrow.types as pt

    types = schema.field(time_col).type, schema.field(label_time_col).type
    if not all(pt.is_timestamp(t) for t in types) or (types[0].tz is None) == (types[1].tz is None):
        return
    msg = (
        f"{source.where()}: the event time column {time_col!r} is {types[0]} but the label time column "
        f"{label_time_col!r} is {types[1]}; give both a time zone or neither (a time without a zone is "
        "a wall-clock time of an unknown zone, so the delay between the two is not known)."
    )
    raise ReplayInputError(msg)


def _schema_of(schema, names):
    import pyarrow as pa

    return pa.schema([schema.field(c) for c in names])


@dataclass
class Prepared:
    """Every source checked against the columns, before anything is read.

    ``time_col`` is the event time column used (None: file order), ``label_mode`` ``"column"``,
    ``"delay"`` or ``"immediate"``, ``notes`` one-line remarks for the summary.
    """

    plans: list[_Plan]
    kept_schema: object
    time_col: str | None
    time_type: object
    label_mode: str
    label_delay: float | None
    notes: list[str] = field(default_factory=list)


def _named_schema(source: Source):
    """The source's schema, its column names checked to be text."""
    schema = source.schema()
    try:
        schema.names  # noqa: B018 - decodes every name
    except UnicodeDecodeError as exc:
        msg = f"{source.where()}: its column names are not valid UTF-8 text ({exc.reason} at byte {exc.start})."
        raise ReplayInputError(msg) from None
    return schema


def _check_alike(plan: _Plan, schema, first: _Plan, first_schema) -> None:
    """A later input's event times and keys are of the first input's kinds."""
    where = plan.source.where
    if (plan.time_kind == "time") != (first.time_kind == "time"):
        kinds = ("timestamps", "numbers") if first.time_kind == "time" else ("numbers", "timestamps")
        msg = f"{where(plan.roles['time'])}: event times are {kinds[1]} here but {kinds[0]} in earlier inputs."
        raise ReplayInputError(msg)
    if "key" in plan.roles:
        name = plan.roles["key"]
        here, there = schema.field(name).type, first_schema.field(name).type
        if _kind(here) != _kind(there) and "null" not in (_kind(here), _kind(there)):
            msg = (
                f"{where(name)}: the key column is {here} here but {there} in {first.source.where(name)}; "
                "every input's keys must be of one kind (all integers or all text)."
            )
            raise ReplayInputError(msg)


def prepare(sources: list[Source], columns: Columns, label_delay: float | None) -> Prepared:
    """Check every source's columns and types (reading schemas only) and fix the replay's event
    order and label mode, the same for all sources. A CSV input's key column is read as written
    (strings), not as the type its first block suggests."""
    notes: list[str] = []
    if columns.key is not None:
        for source in sources:
            source.read_as_text(columns.key)
    schemas = [_named_schema(s) for s in sources]
    first = sources[0]
    if columns.time is None:
        use_time = False
        if label_delay is None and columns.label_time is not None and columns.label_time in schemas[0].names:
            notes.append(
                f"Replayed in file order ({opt('time_col', None)}): the input's {columns.label_time!r} column is "
                "ignored and labels are known at once."
            )
    elif isinstance(columns.time, _DefaultName) and columns.time not in schemas[0].names:
        use_time = False
        if label_delay is not None:
            msg = (
                f"{opt('label_delay')} needs event times, but {first.where()} has no {columns.time!r} column; "
                f"choose the event time column with {opt('time_col', 'NAME')}."
            )
            raise ReplayInputError(msg)
        ignored = ""
        if columns.label_time is not None and columns.label_time in schemas[0].names:
            ignored = f", so its {columns.label_time!r} column is ignored and labels are known at once"
        notes.append(
            f"Replayed in file order: the input has no {columns.time!r} column{ignored} "
            f"(name the event time column with {opt('time_col', 'NAME')})."
        )
        for source, schema in zip(sources[1:], schemas[1:], strict=True):
            if columns.time in schema.names:
                msg = (
                    f"{source.where(columns.time)}: this input has an event time column but the first input "
                    f"has none (so the replay runs in file order); choose with {opt('time_col', 'NAME')} "
                    f"or {opt('time_col', None)}."
                )
                raise ReplayInputError(msg)
    else:
        use_time = True
    explicit_label_time = columns.label_time is not None and not isinstance(columns.label_time, _DefaultName)
    if explicit_label_time and label_delay is None and not use_time:
        msg = (
            f"{opt('label_time_col', columns.label_time)} needs event times, but the replay runs in file order; "
            f"choose the event time column with {opt('time_col', 'NAME')}."
        )
        raise ReplayInputError(msg)
    plans = []
    mode = None
    for source, schema in zip(sources, schemas, strict=True):
        if explicit_label_time and label_delay is None and columns.label_time not in schema.names:
            taken = {columns.score, columns.label, columns.time}
            raise _missing_column(source, "label_time", columns.label_time, schema, taken)
        use_label_time = (
            label_delay is None and use_time and columns.label_time is not None and columns.label_time in schema.names
        )
        plan = _Plan(source, schema, columns, use_time, use_label_time)
        this = "column" if use_label_time else ("delay" if label_delay is not None else "immediate")
        if mode is None:
            mode = this
        elif this != mode:
            msg = (
                f"{source.where(columns.label_time)}: this input "
                f"{'has' if use_label_time else 'lacks'} the label time column but earlier inputs "
                f"{'lack' if use_label_time else 'have'} it."
            )
            raise ReplayInputError(msg)
        if plans:
            _check_alike(plan, schema, plans[0], schemas[0])
        plans.append(plan)
    return Prepared(
        plans=plans,
        kept_schema=plans[0].kept_schema,
        time_col=columns.time if use_time else None,
        time_type=plans[0].time_type,
        label_mode=mode,
        label_delay=label_delay,
        notes=notes,
    )


# ---------------------------------------------------------------- record batches


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


# numpy's type of each fixed-width arrow number type (pyarrow's own name for it, ``str(type)``)
_NUMPY_OF_ARROW = {
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "halffloat": np.float16,
    "float": np.float32,
    "double": np.float64,
}


def _values(arr) -> np.ndarray:
    """The values of an arrow array as a numpy array (nulls: whatever the buffer holds there).

    Numbers, times (their int64 or int32 counts) and dates are read from the array's data buffer
    (no copy), booleans unpacked from its bits: ``pyarrow.Array.to_numpy`` loads pandas at its
    first call on the arrays a Parquet reader yields, and ``cast`` loads ``pyarrow.compute``,
    together most of the time a short replay takes. Other types go through ``to_numpy``."""
    import pyarrow as pa
    import pyarrow.types as pt

    if not isinstance(arr, pa.Array):
        return arr.to_numpy(zero_copy_only=False)
    typ = arr.type
    n, offset = len(arr), arr.offset
    data = arr.buffers()[1] if typ.num_buffers > 1 else None
    if pt.is_boolean(typ):
        if data is None or n == 0:
            return np.zeros(n, dtype=np.uint8)
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
        return bits[offset : offset + n]
    if pt.is_timestamp(typ) or pt.is_date64(typ):
        dtype = np.int64
    elif pt.is_date32(typ):
        dtype = np.int32
    else:
        dtype = _NUMPY_OF_ARROW.get(str(typ))
    if dtype is None:
        return arr.to_numpy(zero_copy_only=False)
    if data is None or n == 0:  # an empty array may have no buffer
        return np.empty(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=n, offset=offset * np.dtype(dtype).itemsize)


def _seconds(arr) -> np.ndarray:
    """float64 seconds from a timestamp / date / numeric arrow array; nulls become NaN."""
    import pyarrow.types as pt

    typ = arr.type
    # a timestamp's seconds are its count of units divided by the units in a second: one rounding
    # (the double nearest the exact seconds while the count is below 2**53, as for s, ms and us
    # counts of any date near ours), as pandas' ``total_seconds()`` and ``count / 1000`` give them;
    # a product with 1e-3 rounds twice, which shows under a decay by time
    per_second = 1.0
    days = False
    if pt.is_timestamp(typ):
        per_second = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[typ.unit]
        raw = _values(arr)  # the int64 counts of the unit
    elif pt.is_date32(typ):
        days = True
        raw = _values(arr)  # int32 days
    elif pt.is_date64(typ):
        per_second = 1e3
        raw = _values(arr)  # int64 milliseconds
    elif pt.is_null(typ):
        return np.full(len(arr), np.nan)
    else:
        raw = _values(arr)
    if days:
        out = raw * 86_400.0
    else:
        out = raw.astype(np.float64) if per_second == 1.0 else raw / per_second
    if arr.null_count:
        out = np.array(out, dtype=np.float64)
        out[_values(arr.is_null()).astype(bool)] = np.nan
    return out


def _convert(batch, plan: _Plan, row0: int, index0: int, label_delay: float | None) -> EventBatch:
    source = plan.source
    roles = plan.roles
    n = batch.num_rows
    col = batch.column

    def where(role: str, i: int) -> str:
        return source.where(roles[role], row0 + i)

    def floats(role: str) -> np.ndarray:
        """The column of ``role`` as float64; a null is an error naming its row."""
        arr = col(roles[role])
        if arr.null_count:
            i = _first(_values(arr.is_null()).astype(bool))
            msg = f"{where(role, i)}: the {role} is null."
            raise ReplayInputError(msg)
        return np.asarray(_values(arr), dtype=np.float64)

    s = floats("score")
    bad = ~np.isfinite(s)
    if bad.any():
        i = _first(bad)
        msg = f"{where('score', i)}: the score must be finite; got {float(s[i])!r}."
        raise ReplayInputError(msg)
    y = floats("label")
    bad = (y != 0.0) & (y != 1.0)
    if bad.any():
        i = _first(bad)
        given = col(roles["label"])[i].as_py()
        msg = (
            f"{where('label', i)}: the label must be binary (0/1 or False/True); got {given!r} "
            f"(choose the label column with {opt('label_col', 'NAME')})."
        )
        raise ReplayInputError(msg)
    if "time" in roles:
        t_arr = col(roles["time"])
        t = _seconds(t_arr)
        bad = ~np.isfinite(t)
        if bad.any():
            i = _first(bad)
            what = "null" if t_arr[i].as_py() is None else f"{float(t[i])!r}"
            msg = f"{where('time', i)}: the event time must be finite; got {what}."
            raise ReplayInputError(msg)
    else:
        t = np.arange(index0, index0 + n, dtype=np.float64)
    if label_delay is not None:
        label_t = t + label_delay
    elif "label_time" in roles:
        lt_arr = col(roles["label_time"])
        label_t = _seconds(lt_arr)
        if lt_arr.null_count:
            label_t[_values(lt_arr.is_null()).astype(bool)] = np.inf  # a label that never arrives
        bad = np.isnan(label_t) | (label_t == -np.inf)
        if bad.any():
            i = _first(bad)
            msg = f"{where('label_time', i)}: the label time must be a time or null; got {float(label_t[i])!r}."
            raise ReplayInputError(msg)
        bad = label_t < t
        if bad.any():
            i = _first(bad)
            label_text, event_text = _two_times(float(label_t[i]), float(t[i]))
            msg = (
                f"{where('label_time', i)}: the label time ({label_text} s) is before the event time "
                f"({event_text} s)."
            )
            raise ReplayInputError(msg)
    else:
        label_t = None
    w = None
    if "weight" in roles:
        w = floats("weight")
        bad = ~(np.isfinite(w) & (w >= 0.0))
        if bad.any():
            i = _first(bad)
            msg = f"{where('weight', i)}: the weight must be finite and non-negative; got {float(w[i])!r}."
            raise ReplayInputError(msg)
    key = None
    if "key" in roles:
        k_arr = col(roles["key"])
        if k_arr.null_count:
            i = _first(_values(k_arr.is_null()).astype(bool))
            msg = f"{where('key', i)}: the key is null; every event needs a key with {opt('group_col')}."
            raise ReplayInputError(msg)
        key = key_values(k_arr)
    kept = batch.select(plan.keep)
    return EventBatch(source=source, row0=row0, kept=kept, t=t, s=s, y=y, label_t=label_t, w=w, key=key)


def _cast_error(source: Source, row0: int, kept, target, exc: Exception) -> ReplayInputError:
    """The kept columns of a later input do not convert to the first input's types: name the first
    column that does not, and both its types."""
    import pyarrow as pa

    if kept.schema.names == target.names:
        for name, want in zip(target.names, target.types, strict=True):
            have = kept.schema.field(name).type
            if have == want:
                continue
            try:
                kept.column(name).cast(want)
            except (pa.ArrowException, ValueError, TypeError) as column_exc:
                msg = (
                    f"{source.where(name, row0)}: the column is {have} here but {want} in the first input, "
                    f"and does not convert: {_printable(str(column_exc))}"
                )
                return ReplayInputError(msg)
    msg = (
        f"{source.where(None, row0)}: its columns {kept.schema.names} "
        f"do not match the first input's ({target}): {_printable(str(exc))}"
    )
    return ReplayInputError(msg)


def read_chunks(prepared: Prepared, *, batch_size: int) -> Iterator[EventBatch]:
    """Yield checked :class:`~streamcal.replay._batch.EventBatch` es source by source, batch by batch.

    Later sources' kept columns are cast to the first source's types (an error names the source if
    that fails).
    """
    import pyarrow as pa

    target = prepared.kept_schema
    index0 = 0  # events so far, over all sources (the clock of file order)
    for plan in prepared.plans:
        source = plan.source
        row0 = 0
        batches = source.batches(plan.read, batch_size)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except ReplayInputError:
                raise
            except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
                msg = f"{source.where(None, row0)}: cannot read the {source.noun} at or after this row: {exc}"
                raise ReplayInputError(msg) from None
            if batch.num_rows == 0:
                continue
            events = _convert(batch, plan, row0, index0, prepared.label_delay)
            if not events.kept.schema.equals(target):
                try:
                    events.kept = events.kept.cast(target)
                except (pa.ArrowException, ValueError, TypeError) as exc:
                    raise _cast_error(source, row0, events.kept, target, exc) from None
            yield events
            row0 += batch.num_rows
            index0 += batch.num_rows


class Prefetch:
    """Iterate ``items`` on a worker thread, at most ``depth`` items ahead of the consumer.

    Reading and checking the next record batches (pyarrow decodes without the GIL) goes on while
    the calling thread plans and hands out the current one; memory stays bounded by ``depth``
    batches. Items come out in order; an exception raised while producing them is raised in the
    consumer, in its place. The worker runs in a copy of the caller's context (so messages spell
    options as the caller's :func:`option_spelling` says). :meth:`close` stops the worker.
    """

    _DONE = object()

    def __init__(self, items: Iterable, depth: int = 2):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._produce, items), name="streamcal-replay-reader", daemon=True
        )
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
            except queue.Full:
                continue
            return True
        return False

    def _produce(self, items) -> None:
        iterator = iter(items)
        try:
            for item in iterator:
                if not self._put((item, None)):
                    return
            self._put((self._DONE, None))
        except BaseException as exc:  # handed to the consumer, raised there
            self._put((None, exc))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Iterator:
        while True:
            item, exc = self._queue.get()
            if exc is not None:
                raise exc
            if item is self._DONE:
                return
            yield item

    def close(self) -> None:
        """Stop the worker (it may be blocked on a full queue) and wait for it."""
        self._stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
        self._thread.join()


# ---------------------------------------------------------------- the source stage


def _two_times(a: float, b: float) -> tuple[str, str]:
    """Seconds ``a`` and ``b`` to 15 significant digits (without the last bits' noise of a
    conversion, as 1767227207.7840002), or in full where that would print them alike."""
    short = f"{a:.15g}", f"{b:.15g}"
    return short if short[0] != short[1] or a == b else (repr(a), repr(b))


def _check_order(batch: EventBatch, last: float, column: str | None) -> None:
    """Raise if event times go backwards within ``batch`` or from ``last`` (the previous batch's
    last time) to its first."""
    t = batch.t
    if t.size == 0:
        return
    if t[0] < last:
        i = 0
        prev = last
    else:
        back = t[1:] < t[:-1]
        if not back.any():
            return
        i = int(np.flatnonzero(back)[0]) + 1
        prev = t[i - 1]
    now, before = _two_times(float(t[i]), float(prev))
    msg = (
        f"{batch.where(column, i)}: event times go backwards "
        f"({now} s after {before} s). "
        f"Sort the input, or replay with {opt('on_unsorted', 'sort')}."
    )
    raise ReplayInputError(msg)


_SORTED = Source("<sorted input>", "the input sorted by event time")


def _sorted_batches(batches: Iterable[EventBatch], batch_size: int) -> Iterator[EventBatch]:
    """Read everything, sort stably by event time, and cut into batches again (in memory)."""
    batches = list(batches)
    if not batches:
        return
    whole = EventBatch.concat(batches, _SORTED)
    del batches
    whole = whole.take(np.argsort(whole.t, kind="stable"))
    for start in range(0, len(whole), batch_size):
        yield whole.slice(start, start + batch_size)


class EventSource:
    """The source stage: the input's :class:`~streamcal.replay._batch.EventBatch` es, checked and
    in event-time order.

    ``batches`` (from :func:`read_chunks`) are read and converted on a worker thread, at most two
    batches ahead of the consumer (:class:`Prefetch`). Event times going backwards are an error
    naming the input, column and row, or with ``on_unsorted="sort"`` the whole input is sorted
    first (in memory). :meth:`close` stops the worker.
    """

    def __init__(self, batches: Iterable[EventBatch], *, batch_size: int, on_unsorted: str, time_col: str | None):
        self._reader = Prefetch(batches, depth=2)
        self._batch_size = batch_size
        self._sort = on_unsorted == "sort"
        self._time_col = time_col

    def __iter__(self) -> Iterator[EventBatch]:
        batches = iter(self._reader)
        if self._sort:
            batches = _sorted_batches(batches, self._batch_size)
        last = -np.inf
        for batch in batches:
            _check_order(batch, last, self._time_col)
            last = float(batch.t[-1])
            yield batch

    def close(self) -> None:
        self._reader.close()
