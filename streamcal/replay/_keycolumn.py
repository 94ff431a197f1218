"""The group column's values as the keyed calibrators take them (``group_col=``).

Apart from :mod:`streamcal.replay._keyed` so that the source stage, which fills
:attr:`~streamcal.replay._batch.EventBatch.key`, reads it without importing the keyed stages.
"""

from __future__ import annotations

import numpy as np

__all__ = ["key_values"]


def key_values(arr) -> np.ndarray:
    """The keys of an Arrow column without nulls: int64 (uint64 kept as such), or an object array
    of Python ``str`` for a string column.

    Strings are coded by Arrow's dictionary encoding and each distinct key becomes one ``str``
    that its events share: no fixed-width numpy strings, whose width is the batch's longest key
    (one long key would cost every row its length) and which drop trailing NULs (``"a"`` and
    ``"a\\x00"`` would be one key)."""
    import pyarrow.compute as pc
    import pyarrow.types as pt

    if pt.is_dictionary(arr.type) and pt.is_integer(arr.type.value_type):
        arr = arr.dictionary_decode()
    if pt.is_integer(arr.type):
        values = np.asarray(arr.to_numpy(zero_copy_only=False))
        return values if values.dtype == np.uint64 else values.astype(np.int64, copy=False)
    if len(arr) == 0:
        return np.empty(0, dtype=object)
    coded = arr if pt.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    words = coded.dictionary.to_numpy(zero_copy_only=False)
    return words[np.asarray(coded.indices.to_numpy(zero_copy_only=False), dtype=np.intp)]
