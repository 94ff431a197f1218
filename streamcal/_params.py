"""The constructor parameters of a class, as river's ``_get_params`` and the state files read them."""

from __future__ import annotations

import functools
import inspect

__all__ = ["init_param_names"]


def init_param_names(cls: type) -> list[str]:
    """The names of ``cls.__init__``'s parameters (positional-or-keyword and keyword-only)."""
    return list(_init_param_tuple(cls))


@functools.lru_cache(maxsize=1024)
def _init_param_tuple(cls: type) -> tuple[str, ...]:
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in signature.parameters.values() if p.kind in kinds and p.name != "self")
