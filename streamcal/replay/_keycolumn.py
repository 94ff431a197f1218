"""The group column's values as the keyed calibrators take them (``group_col=``).

Apart from :mod:`streamcal.replay._keyed` so that the source stage, which fills
:attr:`~streamcal.replay._batch.EventBatch.key`, reads it without importing the keyed stages.
"""

from __future__ import annotations

import numpy as np

__all__ = ["key_values"]


def key_values(arr) -> np.ndarray:
    """The keys of an Arrow column without nulls: int64 (uint64 kept as such) or fixed-width
    strings (what :func:`numpy.unique` codes without a Python loop per event)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pt.is_integer(arr.type):
        values = np.asarray(arr.to_numpy(zero_copy_only=False))
        return values if values.dtype == np.uint64 else values.astype(np.int64, copy=False)
    if len(arr) == 0:
        return np.zeros(0, dtype=np.str_)
    return pa.array(arr).to_numpy(zero_copy_only=False).astype(np.str_)
