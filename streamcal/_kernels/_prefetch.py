"""Cache prefetch hints for the compiled kernels; no-ops in the interpreted tier.

A kernel that walks scattered rows (the keyed kernel: each event's key has its scalars and
segments in their own places of large arrays) asks the processor to start loading the rows of
events a few positions ahead, so that their cache misses overlap the current event's work
instead of stalling it. A hint changes no value: it reads nothing the kernel sees, and it never
faults, whatever the address.

The functions here are the interpreted tier's: :func:`compiled_tier` is False and the hints do
nothing. Once the process switches to compiled kernels, :mod:`streamcal._kernels._prefetch_compiled`
gives numba their compiled forms (``compiled_tier`` True, each hint one ``llvm.prefetch``), so
this module, like every kernel module, does not import numba.
"""

from __future__ import annotations


def compiled_tier() -> bool:
    """Whether the calling kernel runs compiled (a constant there): the hints are skipped when not."""
    return False


def prefetch_1d(arr, i) -> None:
    """Hint: ``arr[i]`` will be read soon."""


def prefetch_2d(arr, r, c) -> None:
    """Hint: ``arr[r, c]`` will be read soon."""
