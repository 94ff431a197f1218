"""Where numba caches streamcal's compiled kernels, and when a cached kernel is fresh (imported
when the process switches to compiled kernels, before any kernel is handed to numba).

numba keeps a kernel compiled with ``cache=True`` in the ``__pycache__`` folder beside its source
file: an index (``.nbi``) and the machine code (``.nbc``). The index holds a stamp of the source
file and numba loads the code only while the stamp matches. A numba that stamps a source file
with its modification time (numba's releases before content hashes) would miss every cache a
wheel carries, since installing a file gives it a new time. :class:`SourceContentsLocator` is
numba's in-tree locator for streamcal's own source files with a stamp of the file's contents: its
size and SHA-256 digest, and numpy's version, so that the kernels compiled when the wheel is
built (``setup.py``) load after ``pip install`` and a different numpy never loads them.

numba's own key of each compiled version still holds its signature, the CPU's name and features,
numba's version and a digest of the function's bytecode: a cache built on another machine or
with another numba is a miss, and the kernel compiles as it would without a cache.

The locator comes after numba's ``UserProvidedCacheLocator``: with ``NUMBA_CACHE_DIR`` set, the
kernels are cached there, with numba's own stamp. Where a kernel's folder is not writable, it
declines, and numba's next locator (the user-wide cache) serves the kernel, as without it.
"""

from __future__ import annotations

import functools
import hashlib
import os

import numpy as np
from numba.core import caching

# numba's names for them (with a leading underscore before numba 0.60 or so)
_IN_TREE = getattr(caching, "InTreeCacheLocator", None) or caching._InTreeCacheLocator
_USER_PROVIDED = getattr(caching, "UserProvidedCacheLocator", None) or getattr(
    caching, "_UserProvidedCacheLocator", None
)
_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl

_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


@functools.cache
def contents_stamp(path: str, mtime_ns: int, size: int) -> tuple:
    """The stamp of the source file ``path``: its size, the SHA-256 digest of its bytes and
    numpy's version. ``mtime_ns`` and ``size`` only key the memo, so that a file rewritten while
    the process runs is read again."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return ("streamcal-source", size, digest, "numpy", np.__version__)


def in_package(path: str) -> bool:
    """Whether ``path`` is a file of the streamcal package this module belongs to."""
    try:
        return os.path.commonpath([_PACKAGE, os.path.realpath(path)]) == _PACKAGE
    except ValueError:  # another drive
        return False


class SourceContentsLocator(_IN_TREE):
    """numba's in-tree cache locator for streamcal's source files, stamped by their contents."""

    def get_source_stamp(self):
        st = os.stat(self._py_file)
        return contents_stamp(self._py_file, st.st_mtime_ns, st.st_size)

    @classmethod
    def from_function(cls, py_func, py_file):
        if not in_package(py_file):
            return None
        return super().from_function(py_func, py_file)


def install() -> None:
    """Put :class:`SourceContentsLocator` among numba's locators, just after the one that
    honours ``NUMBA_CACHE_DIR`` (first if this numba has none by that name); idempotent."""
    classes = _IMPL._locator_classes
    if any(c.__name__ == SourceContentsLocator.__name__ and c.__module__ == __name__ for c in classes):
        return
    at = classes.index(_USER_PROVIDED) + 1 if _USER_PROVIDED in classes else 0
    classes.insert(at, SourceContentsLocator)
