"""The compiled I-spline loop's state, packed: one float64 and one int64 buffer and the ``free`` flags.

:mod:`streamcal._kernels.ispline_stream` runs the exact lazy refit in one compiled loop over
some thirty arrays. Each array a compiled call receives costs numba an unboxing, which for a
river-face call of one event is most of its cost; so the arrays are sections of two buffers
(``fbuf``, ``ibuf``), whose header (``ibuf[:PK_HEADER]``) holds the scalar parameters and the
sections' offsets, and a call hands over the buffers (``stream_packed_run``,
``stream_packed_one``). The sections are also returned as views, for the Python side to read
and seed.
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels import ispline_stream as _ks

__all__ = ["packed_state"]


def packed_state(centres: np.ndarray, order: int, wanted: int, inner: np.ndarray, use_inner: bool) -> dict:
    """The zeroed loop state for ``B = centres.size`` buckets: ``{"fbuf", "ibuf", "free"}`` and a
    view per section (named as the kernel's arguments; 2-d sections shaped as it reads them),
    with the centres, the interior knots and the parameters written in."""
    B = centres.size
    k1 = order + 1
    P = B + k1 + 1
    shapes = {
        "st": (_ks.ST_HEADER,),
        "knots": (B + 2 * k1 + 2,),
        "scratch": (B + 2 * k1 + 2,),
        "rows": (B, k1),
        "band": (P, k1),
        "cross": (P,),
        "coef": (P,),
        "beta": (P,),
        **dict.fromkeys(("lpos", "lneg", "spos", "sneg", "xcov"), (B,)),
        "tree": (B + 1,),
        "red": (P, k1),
        "vecs": (6, P),
        "centres": (B,),
        "inner": (inner.size,),
        "held": (P, k1 + _ks.H_COLUMNS),
        "kv": (3, k1),
        "one_f": (_ks.ONE_F,),
        "ist": (_ks.IS_HEADER,),
        "base": (2, B),
        "grp": (3, P),
        "one_i": (_ks.ONE_I,),
    }
    sizes = {name: int(np.prod(shape)) for name, shape in shapes.items()}
    f_ends = np.cumsum([0] + [sizes[name] for name in _ks.FLOAT_SECTIONS])
    i_ends = _ks.PK_HEADER + np.cumsum([0] + [sizes[name] for name in _ks.INT_SECTIONS])
    fbuf = np.zeros(int(f_ends[-1]))
    ibuf = np.zeros(int(i_ends[-1]), dtype=np.int64)
    ibuf[_ks.PK_ORDER] = order
    ibuf[_ks.PK_WANTED] = wanted
    ibuf[_ks.PK_USE_INNER] = 1 if use_inner else 0
    ibuf[_ks.PK_INCREMENTAL] = 1
    ibuf[_ks.PK_F : _ks.PK_F + f_ends.size] = f_ends
    ibuf[_ks.PK_I : _ks.PK_I + i_ends.size] = i_ends
    state = {"fbuf": fbuf, "ibuf": ibuf, "free": np.zeros(P, dtype=np.bool_)}
    for buf, names, ends in ((fbuf, _ks.FLOAT_SECTIONS, f_ends), (ibuf, _ks.INT_SECTIONS, i_ends)):
        for k, name in enumerate(names):
            state[name] = buf[ends[k] : ends[k + 1]].reshape(shapes[name])
    state["centres"][:] = centres
    state["inner"][:] = inner
    return state
