"""The check, at ``import streamcal``, for the unrelated distribution also called ``streamcal``.

Another project publishes a distribution named ``streamcal`` whose top-level package is also
``streamcal`` (this project's distribution is ``streamcal-engine``): with both installed, one
silently shadows or overwrites the other's files. :func:`warn_of_name_clash` warns when that
distribution is installed and says what to do. It looks for the other distribution's metadata
folder (``streamcal-<version>.dist-info``) by name in the directories on ``sys.path``, reading
the listings the import system keeps of them: tens of microseconds, where importing
:mod:`importlib.metadata` alone costs tens of milliseconds. This module is imported by every
``import streamcal``; it imports nothing beyond what the interpreter has loaded at start-up.
"""

from __future__ import annotations

import os
import sys
import warnings

from streamcal.exceptions import NameClashWarning

__all__ = ["NameClashWarning", "name_clash_message", "name_clashes", "warn_of_name_clash"]

#: The other project's distribution name.
CLASHING = "streamcal"




def _installs_streamcal(meta: str) -> bool:
    """Whether the metadata folder ``meta`` lists a top-level ``streamcal`` package (its
    ``top_level.txt``, else the files it installed: ``RECORD`` or ``installed-files.txt``)."""
    for name in ("top_level.txt", "RECORD", "installed-files.txt", "SOURCES.txt"):
        try:
            with open(os.path.join(meta, name), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if name == "top_level.txt":
            return "streamcal" in (line.strip() for line in lines)
        return any(line.replace("\\", "/").lstrip("./").startswith("streamcal/") for line in lines)
    return False


def _names_in(directory: str):
    """The names in ``directory``: the import system's listing of it when it holds one (the
    finder of each ``sys.path`` entry lists its directory once and keeps the names), else
    :func:`os.listdir`. Reading the kept listing costs microseconds; a new listing of a
    site-packages of a few hundred entries costs up to a millisecond."""
    kept = getattr(sys.path_importer_cache.get(directory), "_path_cache", None)
    if isinstance(kept, set) and kept:
        return kept
    return os.listdir(directory)


def name_clashes(paths=None) -> list[tuple[str, str]]:
    """``(version, metadata folder)`` of each installed ``streamcal`` distribution (the other
    project's) that installs a top-level ``streamcal`` package, on ``paths`` (default
    ``sys.path``; the current directory, ``""``, is not searched)."""
    found = []
    for entry in sys.path if paths is None else paths:
        if not entry or not isinstance(entry, str):
            continue
        try:
            names = _names_in(entry)
        except (OSError, ValueError):
            continue
        # "streamcal-1.0.dist-info" (streamcal-engine's own is "streamcal_engine-0.2.0.dist-info"):
        # one search of the joined names, then a look at each name only where it matched
        if "\nstreamcal-" not in "\n".join(("", *names)).lower():
            continue
        for name in names:
            if name[:10].lower() == "streamcal-" and name.endswith((".dist-info", ".egg-info")):
                meta = os.path.join(entry, name)
                if _installs_streamcal(meta):
                    version = name[10:].rsplit(".", 1)[0].split("-")[0]
                    found.append((version or "of unknown version", meta))
    return found


def name_clash_message(clashes) -> str:
    """What the warning says: which distributions clash, where, and what to do."""
    from streamcal._install import DISTRIBUTION, install_command

    where = "; ".join(f"streamcal {version} at {meta}" for version, meta in clashes)
    return (
        f"Two distributions install the `streamcal` package: {DISTRIBUTION}, this streaming "
        f"calibration engine, and the unrelated distribution `{CLASHING}` ({where}). With both "
        "installed, one silently shadows or overwrites the other's files. Keep them in separate "
        f"virtual environments, or uninstall the other with `pip uninstall {CLASHING}` and then "
        f"reinstall this one: `{install_command(reinstall=True)}`."
    )


def warn_of_name_clash() -> None:
    """Warn (:class:`NameClashWarning`) when the other ``streamcal`` distribution is installed.

    Raises only the warning itself, where a warnings filter makes it an error: a failure of the
    check is never a reason for ``import streamcal`` to fail."""
    try:
        clashes = name_clashes()
        if clashes:
            warnings.warn(name_clash_message(clashes), NameClashWarning, stacklevel=3)
    except NameClashWarning:
        raise  # turned into an error by a warnings filter: the user asked for it
    except Exception:  # the check is advice, never a reason to fail the import
        pass
