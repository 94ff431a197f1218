"""How this streamcal was installed, and the pip command that adds an extra to it.

streamcal's distribution is ``streamcal-engine`` and is not on the package index; it is
installed from a clone (``pip install .``, or ``pip install -e .``), from a built wheel, or from
a repository URL. :func:`install_hint` reads the installed metadata (``direct_url.json``, the
record pip keeps of where a distribution came from) and gives the command that works for that.
Every install hint streamcal prints comes from it.
"""

from __future__ import annotations

import os

__all__ = ["DISTRIBUTION", "install_command", "install_hint"]

#: streamcal's distribution name (the package index's ``streamcal`` is another project).
DISTRIBUTION = "streamcal-engine"


def _source() -> dict | None:
    """streamcal-engine's ``direct_url.json`` as a dict, ``{}`` when it was installed from an
    index (no such file), or None when it is not installed (run from a source tree).

    The metadata with a ``direct_url.json`` wins: run inside a clone, the current directory
    (first on ``sys.path``) may hold the build's ``streamcal_engine.egg-info``, which has none."""
    import json
    from importlib import metadata

    found = None
    for dist in metadata.distributions(name=DISTRIBUTION):
        text = dist.read_text("direct_url.json")
        if text:
            try:
                source = json.loads(text)
            except ValueError:
                continue
            if isinstance(source, dict):
                return source
        found = {} if found is None else found
    return found


def _local_path(url: str):
    from pathlib import Path
    from urllib.parse import unquote, urlparse
    from urllib.request import url2pathname

    parts = urlparse(url)
    if parts.scheme != "file":
        return None
    return Path(url2pathname(unquote(parts.path)))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'" if os.name != "nt" else f'"{text}"'


def _source_tree():
    """The checkout this package is imported from, when it is one (a ``pyproject.toml`` that
    names streamcal-engine beside the package folder), as a ``Path``, else None."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if f'name = "{DISTRIBUTION}"' in text else None


def _directory_target(path, extra: str | None) -> str:
    """``'.[plot]'`` in the directory ``path`` itself, else ``'/abs/path[plot]'``."""
    from pathlib import Path

    try:
        here = Path.cwd().resolve() == path.resolve()
    except OSError:
        here = False
    where = "." if here else str(path)
    return _quote(f"{where}[{extra}]" if extra else where)


def install_command(extra: str | None = None, *, reinstall: bool = False) -> str:
    """The pip command that installs streamcal (with ``extra``) the way it is installed now.

    From a clone: ``pip install '.[plot]'`` in the clone (its path elsewhere), with ``-e`` for
    an editable install; from a repository URL or a wheel: the same URL; from an index:
    ``pip install 'streamcal-engine[plot]'``. ``reinstall`` adds ``--force-reinstall --no-deps``
    (streamcal's own files again, not its dependencies).
    """
    source = _source()
    named = f"{DISTRIBUTION}[{extra}]" if extra else DISTRIBUTION
    flags = "--force-reinstall --no-deps " if reinstall else ""
    if source is None:  # not installed: run from a source tree, say
        tree = _source_tree()
        if tree is not None:
            return f"pip install {flags}{_directory_target(tree, extra)}"
        return f"pip install {flags}{_quote(named)}"
    url = source.get("url")
    if not isinstance(url, str) or not url:
        return f"pip install {flags}{_quote(named)}"
    if isinstance(source.get("dir_info"), dict):
        path = _local_path(url)
        if path is not None:
            editable = "-e " if source["dir_info"].get("editable") else ""
            return f"pip install {flags}{editable}{_directory_target(path, extra)}"
    vcs = source.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        commit = vcs.get("requested_revision") or vcs.get("commit_id")
        pinned = f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
        return f"pip install {flags}{_quote(f'{named} @ {pinned}')}"
    return f"pip install {flags}{_quote(f'{named} @ {url}')}"


def install_hint(extra: str) -> str:
    """The command that adds an extra (``"plot"``, ``"dask"``, ``"cli"``) to this streamcal.

    Examples
    --------
    >>> from streamcal._install import install_hint
    >>> install_hint("plot").startswith("pip install ")
    True
    """
    try:
        return install_command(extra)
    except Exception:  # a hint must never turn an ImportError into another error
        return f"pip install {_quote(f'{DISTRIBUTION}[{extra}]')} (from where streamcal was installed)"
