"""Arrow arrays from numpy arrays and strings, made from their buffers.

``pyarrow.array`` imports pandas at its first call (to recognise pandas objects), a quarter of a
second that a short replay would spend on a library it never uses. The replay's outputs are
numbers, times and method names, which these build directly from their buffers: the same arrays,
without a copy of the numbers.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fixed_width_array", "string_array"]


def fixed_width_array(values: np.ndarray, arrow_type):
    """``values`` (a 1-d numpy array of the width of ``arrow_type``: float64 for ``float64``,
    int64 for ``int64`` and ``timestamp``) as an arrow array of that type, without nulls and
    without a copy."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.dtype.itemsize * 8 != arrow_type.bit_width:
        msg = f"`values` of type {values.dtype} do not fit the arrow type {arrow_type}."
        raise TypeError(msg)
    return pa.Array.from_buffers(arrow_type, values.size, [None, pa.py_buffer(values)])


def string_array(values: list[str]):
    """``values`` as an arrow ``string`` array without nulls."""
    import pyarrow as pa

    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)
