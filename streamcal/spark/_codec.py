"""A key's exported state (:meth:`streamcal.KeyedCalibrator.export_key`: numpy arrays and floats) as
bytes for Spark's state store, and back: a length-prefixed JSON header naming each value (a float, or
an array's dtype and shape), then the arrays' raw bytes. No pickles; what is read back is checked by
``import_key`` before it is used."""

from __future__ import annotations

import json
import struct

import numpy as np

__all__ = ["decode_state", "encode_state"]

_DTYPES = {"<f8", "<i8"}


def encode_state(state: dict) -> bytes:
    header, arrays = {}, []
    for name, value in state.items():
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
            header[name] = [array.dtype.str, list(array.shape)]
            arrays.append(array.tobytes())
        else:
            header[name] = float(value)
    text = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([struct.pack("<I", len(text)), text, *arrays])


def decode_state(data: bytes) -> dict:
    """The dict :func:`encode_state` wrote; ValueError naming the problem if ``data`` is not one."""
    data = bytes(data)
    try:
        (size,) = struct.unpack_from("<I", data)
        header = json.loads(data[4 : 4 + size])
        state, at = {}, 4 + size
        for name, spec in header.items():
            if isinstance(spec, float | int):
                state[name] = float(spec)
                continue
            kind, shape = spec
            if kind not in _DTYPES:
                msg = f"dtype {kind!r}"
                raise ValueError(msg)
            count = int(np.prod(shape, dtype=np.int64))
            state[name] = np.frombuffer(data, dtype=kind, count=count, offset=at).reshape(shape).copy()
            at += count * 8
    except (struct.error, ValueError, TypeError, KeyError) as exc:
        msg = f"a key's calibrator state in Spark's state store is not readable: {exc}"
        raise ValueError(msg) from None
    if at != len(data):
        msg = f"a key's calibrator state in Spark's state store has {len(data) - at} bytes too many"
        raise ValueError(msg)
    return state
