"""Output files of a replay: checked before anything is read, written under unique temporary
names, renamed over their final names only when the whole replay has succeeded."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from streamcal.replay._source import Source, opt

__all__ = ["OutputFiles", "check_outputs", "reserve_tmp"]


def _same_file(a, b) -> bool:
    """Whether two paths name the same file: the same real path (through symlinks), or the same
    file on disk (hard links; only when both exist)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def check_outputs(targets: dict[str, Path], sources: list[Source], input_dirs: list[str]) -> None:
    """Refuse, before anything is read, outputs that are directories, in missing or unwritable
    directories, not regular files, the same as each other or as an input, or inside an input
    directory."""
    seen: list[tuple[str, Path]] = []
    inputs = [s.path for s in sources if s.path is not None]
    for name, path in targets.items():
        given = opt(name, str(path))
        if path.is_dir():
            msg = f"{given}: is a directory; give a file name."
            raise ValueError(msg)
        parent = Path(os.path.realpath(path)).parent
        if not parent.is_dir():
            what = "does not exist" if not parent.exists() else "is not a directory"
            msg = f"{given}: the directory {str(parent)!r} {what}."
            raise ValueError(msg)
        if path.exists() and not path.is_file():
            msg = f"{given}: exists and is not a regular file; give a file name."
            raise ValueError(msg)
        if not os.access(parent, os.W_OK | os.X_OK):
            msg = f"{given}: cannot write in the directory {str(parent)!r}."
            raise ValueError(msg)
        for other, other_path in seen:
            if _same_file(path, other_path):
                msg = f"{opt(name)} and {opt(other)} are the same file {str(path)!r}; give them different names."
                raise ValueError(msg)
        for f in inputs:
            if _same_file(path, f):
                msg = f"{opt(name)} would overwrite the input file {f!r}; choose another path."
                raise ValueError(msg)
        for d in input_dirs:
            if os.path.realpath(path).startswith(os.path.join(os.path.realpath(d), "")):
                msg = f"{given}: is inside the input directory {d!r}, whose files are replayed; write it elsewhere."
                raise ValueError(msg)
        seen.append((name, path))


def reserve_tmp(name: str, final: Path) -> Path:
    """A new, unique temporary file next to ``final`` (its real path, through symlinks), created
    empty; it replaces ``final`` atomically once complete. Hidden (``.`` first, so a directory
    listing of inputs skips it) and with ``final``'s suffix (matplotlib picks the format by it)."""
    real = Path(os.path.realpath(final))
    while True:
        tmp = real.with_name(f".{real.name}.{os.urandom(4).hex()}.tmp{real.suffix}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            msg = f"{opt(name, str(final))}: cannot write in the directory {str(real.parent)!r}: {exc.strerror or exc}."
            raise ValueError(msg) from None
        os.close(fd)
        return tmp


class OutputFiles:
    """The replay's output files (option name -> final path), each written under its own unique
    temporary name (:meth:`reserve`, so that an unwritable directory fails before the run) and
    renamed over its final name by :meth:`commit`; :meth:`discard` removes what is left."""

    def __init__(self, targets: dict[str, Path]):
        self.targets = targets
        self.tmp: dict[str, Path] = {}

    def reserve(self) -> None:
        for name, path in self.targets.items():
            self.tmp[name] = reserve_tmp(name, path)

    def commit(self) -> None:
        """Everything written: give the files their final names (real paths, through symlinks)."""
        for name, path in self.targets.items():
            os.replace(self.tmp.pop(name), os.path.realpath(path))

    def discard(self) -> None:
        for tmp in self.tmp.values():
            tmp.unlink(missing_ok=True)
