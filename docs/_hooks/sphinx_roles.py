"""Sphinx roles in docstrings become cross-references in the documentation site.

The package's docstrings name other objects with Sphinx roles (``:func:`streamcal.buckets.as_buckets```,
``:class:`~streamcal.replay._batch.EventBatch```, ``:meth:`close```). mkdocstrings renders Markdown, where
such a role would show as raw text. This file serves the site build twice:

- ``SphinxRolesExtension`` is a griffe extension (mkdocstrings' python handler loads it through
  ``extensions:`` in mkdocs.yml). Once the package is loaded it rewrites every role in every docstring into
  a cross-reference that mkdocs-autorefs turns into a link. A target is looked up as Sphinx's Python
  domain does, in the object's own class and module first (their members include imported names), then
  in their enclosing packages, then as a full path, and last by importing it. A role whose target names
  nothing logs an error, which fails ``mkdocs build --strict``.
- ``on_page_content`` is an mkdocs hook (``hooks:`` in mkdocs.yml). It looks for a raw role left in the
  HTML of every page, Markdown pages included, and logs an error for each, which fails the strict build.

A target whose path is public (no component starts with ``_``) becomes a Markdown reference,
``[`as_buckets`][streamcal.buckets.as_buckets]``: the strict build fails if no API page documents it. A
private target (a kernel, a private method, a private module) becomes an optional reference: a link when
an API page documents it, its name in code otherwise. A target outside the loaded packages that Python can
import (``:mod:`pickle```) is an optional reference too.
"""

from __future__ import annotations

import html
import importlib
import inspect
import logging
import re
from typing import TYPE_CHECKING, Any

from griffe import AliasResolutionError, CyclicAliasError, Extension

if TYPE_CHECKING:
    from griffe import GriffeLoader, Module, Object

# loggers under "mkdocs" are counted by ``mkdocs build --strict``
_log = logging.getLogger("mkdocs.plugins.streamcal_sphinx_roles")

# ``:func:`target```, ``:py:func:`target```, ``:func:`~target```, ``:func:`title <target>```
ROLE = re.compile(r"(?<![\w`]):(?:py:)?(?P<role>[a-z]+):`(?P<body>[^`]+)`")
# what a role left in rendered HTML looks like: the Markdown turns the backquoted target into a code span
RAW_ROLE_IN_HTML = re.compile(r":(?:py:)?[a-z]+:(?:<code>|`|&#96;)")
_CODE_BLOCK = re.compile(r"<pre\b.*?</pre>", re.DOTALL)
_TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _is_private(path: str) -> bool:
    return any(part.startswith("_") for part in path.split("."))


def _lookup(scope: Any, dotted: str) -> str | None:
    """The path of the object `dotted` names inside `scope` (following imports), or None.

    `scope` is a griffe object or the collection of loaded modules.
    """
    try:
        found = scope[dotted]
    except (KeyError, AliasResolutionError, CyclicAliasError):
        return None
    if found.is_alias:
        try:
            return found.final_target.path
        except (AliasResolutionError, CyclicAliasError):  # an import from a package that is not loaded
            return found.target_path
    return found.path


def _is_module(collection: Any, path: str) -> bool:
    try:
        return collection[path].is_module
    except (KeyError, AliasResolutionError, CyclicAliasError):
        return False


_MISSING = object()


def _import_object(dotted: str) -> Any:
    """What Python's attribute access finds for `dotted` once its modules are imported, or _MISSING.

    An attribute wins over a submodule of the same name, as it does in Python.
    """
    first, *rest = dotted.split(".")
    try:
        value = importlib.import_module(first)
    except ImportError:
        return _MISSING
    for i, part in enumerate(rest, start=1):
        if hasattr(value, part):
            value = getattr(value, part)
            continue
        if not inspect.ismodule(value):
            return _MISSING
        try:
            value = importlib.import_module(".".join([first, *rest[:i]]))
        except ImportError:
            return _MISSING
    return value


def resolve(obj: Object, target: str, loader: GriffeLoader, *, role: str = "obj") -> str | None:
    """The full path of the object a role in `obj`'s docstring names, or None when it names nothing.

    The target is looked up in `obj`'s class and module, then in their enclosing packages, then as an
    absolute path; first in the loaded API (griffe's), then by importing it, which finds what a package
    exports at run time only (a module ``__getattr__``) and what other packages define. Only a ``:mod:``
    role may name a module: a package that imports a function under the name of its submodule
    (``from streamcal.replay.generate import generate``) means the function.
    """
    target = target.lstrip(".")
    collection = loader.modules_collection
    scopes = []
    scope = obj if (obj.is_module or obj.is_class) else obj.parent
    while scope is not None:
        scopes.append(scope.path)
        scope = scope.parent
    candidates = [f"{path}.{target}" for path in scopes] + [target]

    def acceptable(path: str | None) -> bool:
        return path is not None and (role == "mod" or not _is_module(collection, path))

    for candidate in candidates:
        path = _lookup(collection, candidate)
        if acceptable(path):
            return path
    for candidate in candidates:
        value = _import_object(candidate)
        if value is _MISSING or (role != "mod" and inspect.ismodule(value)):
            continue
        if inspect.ismodule(value):
            return value.__name__
        canonical = f"{getattr(value, '__module__', None)}.{getattr(value, '__qualname__', None)}"
        if acceptable(_lookup(collection, canonical)):
            return canonical
        # outside the loaded packages: the name as written, when it is a full path of its own
        return target if _import_object(target) is value else candidate
    return None


def cross_reference(role_body: str, resolved: str, *, outside_api: bool = False) -> str:
    """The Markdown (or inline HTML) that replaces one role."""
    titled = _TITLED.match(role_body)
    if titled:
        title = titled["title"]
    else:
        target = role_body.lstrip("!.")
        title = target.removeprefix("~").rsplit(".", 1)[-1] if target.startswith("~") else target
    if role_body.startswith("!"):
        return f"`{title}`"
    if outside_api or _is_private(resolved):
        return f'<autoref identifier="{html.escape(resolved)}" optional><code>{html.escape(title)}</code></autoref>'
    return f"[`{title}`][{resolved}]"


def rewrite_roles(obj: Object, loader: GriffeLoader) -> list[str]:
    """Rewrite the roles of `obj`'s docstring in place; return a message for each role that names nothing."""
    if obj.docstring is None or ":`" not in obj.docstring.value:
        return []
    unresolved = []
    lines = obj.docstring.value.split("\n")
    in_fence = False

    def replace(match: re.Match[str]) -> str:
        body = match["body"]
        titled = _TITLED.match(body)
        target = (titled["target"] if titled else body).lstrip("!~")
        resolved = resolve(obj, target, loader, role=match["role"])
        if resolved is None:
            unresolved.append(f"{obj.path}: {match[0]} (not in its class, module or packages, nor a full path)")
            return match[0]
        top = resolved.split(".", 1)[0]
        return cross_reference(body, resolved, outside_api=top not in loader.modules_collection)

    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
        if in_fence or line.lstrip().startswith((">>>", "...")):
            continue
        lines[i] = ROLE.sub(replace, line)
    obj.docstring.value = "\n".join(lines)
    return unresolved


def _walk(obj: Object):
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)


class SphinxRolesExtension(Extension):
    """Rewrite the Sphinx roles of a loaded package's docstrings into cross-references."""

    def on_package(self, *, pkg: Module, loader: GriffeLoader, **kwargs: Any) -> None:
        for obj in _walk(pkg):
            for message in rewrite_roles(obj, loader):
                _log.error("Sphinx role that names nothing: %s", message)


def on_page_content(html_text: str, page: Any, **kwargs: Any) -> str:
    """mkdocs hook: log an error for each raw Sphinx role left in a page's HTML outside code blocks."""
    prose = _CODE_BLOCK.sub("", html_text)  # a source listing or an example may quote a role
    for match in RAW_ROLE_IN_HTML.finditer(prose):
        context = prose[max(0, match.start() - 60) : match.end() + 60].replace("\n", " ")
        _log.error("raw Sphinx role in %s: ...%s...", page.file.src_uri, context)
    return html_text
