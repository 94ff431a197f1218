"""Checks of a learner's state as a state file restores it (used by :mod:`streamcal.persist`).

A state file describes a learner as its attributes; :func:`streamcal.persist.load` recreates the
object without running its constructor, so nothing guarantees that the attributes agree with each
other. The compiled kernels trust that they do (array sizes, indices, counts): a learner whose
arrays disagree could make them read or write out of bounds. So every streamcal class checks the
state it was given before anything runs on it, and raises :class:`StateFileError` naming the
attribute, what was expected and what was found:

- classes with ``__setstate__`` (the streaming calibrators) call their ``_check_loaded_state``
  there, before any kernel runs (pickle and ``copy`` get the same checks);
- other classes that hold more than their parameters define ``_check_loaded_state`` too (the
  bucket and window strategies, the metrics, the batch isotonic calibrator), which
  :func:`check_loaded` runs once the attributes are set; this module knows none of the classes:
  it is the floor of the import graph, holding only the helpers the checks are written with;
- any other streamcal class following river's conventions (a ``river.base.Base``, whose constructor
  only stores and checks its parameters) gets :func:`check_like_fresh`: its parameters must build an
  object whose attributes the loaded ones match in name and type. Other streamcal classes (the
  replay machinery, file writers...) are refused: a state file cannot hold them.

The helpers below raise with messages such as "`_si` ring count: expected an int in [0, 300];
found 1000000000".
"""

from __future__ import annotations

import math
import sys

import numpy as np

from streamcal.exceptions import StateFileError

__all__ = [
    "check_histogram",
    "check_like_fresh",
    "check_loaded",
    "fail",
    "need_array",
    "need_bool",
    "need_float",
    "need_int",
    "need_keys",
    "need_params",
]


def fail(msg: str):
    """Raise :class:`StateFileError` with ``msg``."""
    raise StateFileError(msg)


def brief(value) -> str:
    """A short description of a value for a message."""
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def need_keys(obj, expected, *, optional=()) -> None:
    """The object's attributes are exactly ``expected`` (plus any of ``optional``)."""
    have = set(vars(obj))
    expected = set(expected)
    missing = sorted(expected - have)
    # what is never saved (a lock, streamcal._locking) may be there, made anew by the restore
    extra = sorted(have - expected - set(optional) - set(getattr(obj, "_UNSAVED", ())))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        fail(f"the attributes do not match a {type(obj).__name__}: {'; '.join(parts)}.")


def need_bool(value, name: str) -> bool:
    if type(value) is not bool:
        fail(f"`{name}`: expected a bool; found {brief(value)}.")
    return value


def need_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """An int (not a bool) in ``[low, high]``."""
    if type(value) is not int or (low is not None and value < low) or (high is not None and value > high):
        interval = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        fail(f"`{name}`: expected an int in {interval}; found {brief(value)}.")
    return value


def need_float(value, name: str, low: float | None = None, high: float | None = None, *, finite: bool = True):
    """A float, finite (unless ``finite=False``) and in ``[low, high]``."""
    ok = type(value) is float and not math.isnan(value)
    if ok and finite:
        ok = math.isfinite(value)
    if ok and low is not None:
        ok = value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        what = "a finite float" if finite else "a float"
        bounds = "" if low is None and high is None else f" in [{low}, {high}]"
        fail(f"`{name}`: expected {what}{bounds}; found {brief(value)}.")
    return value


def need_array(value, name: str, dtype, *, ndim: int = 1, size: int | None = None, shape=None) -> np.ndarray:
    """A C-contiguous, writeable numpy array of exactly ``dtype`` (native byte order)."""
    dtype = np.dtype(dtype)
    if not (
        type(value) is np.ndarray
        and value.dtype == dtype
        and value.dtype.isnative
        and value.ndim == ndim
        and value.flags.c_contiguous
        and value.flags.writeable
        and value.flags.aligned
    ):
        fail(f"`{name}`: expected a C-contiguous {ndim}-d {dtype} array; found {brief(value)}.")
    if size is not None and value.size != size:
        fail(f"`{name}`: expected {size} values; found {value.size}.")
    if shape is not None and value.shape != tuple(shape):
        fail(f"`{name}`: expected shape {tuple(shape)}; found {value.shape}.")
    return value


def need_finite(a: np.ndarray, name: str, *, low: float | None = None, high: float | None = None) -> None:
    """Every value finite and in ``[low, high]``; the first bad position is named."""
    bad = ~np.isfinite(a)
    if low is not None:
        bad |= a < low
    if high is not None:
        bad |= a > high
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        bounds = "" if low is None and high is None else f" in [{low}, {high}]"
        fail(f"`{name}`: expected finite values{bounds}; found {a.reshape(-1)[i]!r} at position {i}.")


def need_increasing(a: np.ndarray, name: str, *, strict: bool = True) -> None:
    steps = np.diff(a)
    bad = ~(steps > 0) if strict else ~(steps >= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0]) + 1
        fail(
            f"`{name}`: expected {'strictly ' if strict else ''}increasing values; found {a[i]!r} at "
            f"position {i} after {a[i - 1]!r}."
        )


def need_params(obj, check) -> None:
    """Run a parameter check (a callable raising ``ValueError``/``TypeError``) as a state check."""
    try:
        check()
    except (TypeError, ValueError, OverflowError) as exc:
        fail(f"invalid parameters for {type(obj).__name__}: {exc}")


def same_float(a: float, b: float) -> bool:
    """Equal as float64 bits (NaN equal to NaN)."""
    return np.float64(a).tobytes() == np.float64(b).tobytes()


def close_to(loaded: np.ndarray, computed: np.ndarray, name: str, what: str) -> None:
    """``loaded`` equals ``computed`` to rounding (a value computed by numpy may differ in its last bits
    between machines)."""
    if loaded.shape != computed.shape or not np.allclose(loaded, computed, rtol=1e-12, atol=0.0):
        fail(f"`{name}` does not match {what}.")


# ---------------------------------------------------------------------------------------- histogram
def check_histogram(sf, si, n_buckets: int, window) -> None:
    """The windowed histogram ``(sf, si)`` of ``n_buckets`` buckets (layout in
    :mod:`streamcal._kernels.histogram`) for ``window`` (a :class:`streamcal.windows.Window`):
    every invariant the kernels rely on, and the bookkeeping that the kernels keep. What depends
    on the window's kind (its ring, its clock, its decay) the window says
    (``check_saved_ring_capacity``, ``check_saved_ring``, ``event_clock``, ``decays``).

    Sizes agree with the bucket count and the ring capacity; the header holds the window's
    parameters; weights are finite and non-negative, with a finite total in real units; event
    counts are non-negative, and a bucket or class with no event holds no weight; the ring's
    head and count are within its capacity, and each event in it has a bucket in range, a 0/1
    label, a finite non-negative weight and a clock in order, and the events agree with the
    per-bucket counts; clocks, decay frame and renormalisation counter agree with the number of
    learned events.
    """
    from streamcal._kernels import histogram as h

    B = n_buckets
    kind, n, seconds, half_life = window.code()
    need_array(sf, "_sf", np.float64)
    need_array(si, "_si", np.int64)
    if si.size < h.SI_HEADER or sf.size < h.SF_HEADER:
        fail(f"`_sf`/`_si`: expected at least {h.SF_HEADER}/{h.SI_HEADER} values; found {sf.size}/{si.size}.")
    if int(si[h.SI_B]) != B:
        fail(f"`_si` bucket count: expected {B} (the bucket centres); found {int(si[h.SI_B])}.")
    W = int(si[h.SI_W])
    ring = window.keeps_ring
    checks = sys.modules[__name__]  # the helpers below, for the window's own checks
    window.check_saved_ring_capacity(W, checks)
    nf, ni = h.state_sizes(B, W)
    if sf.size != nf or si.size != ni:
        fail(f"`_sf`/`_si`: expected {nf}/{ni} values for {B} buckets and a ring of {W}; found {sf.size}/{si.size}.")
    header = {
        "kind": (h.SF_KIND, float(kind)),
        "count window size": (h.SF_WINDOW_N, float(n)),
        "time window span": (h.SF_SECONDS, float(seconds)),
        "half-life": (h.SF_HALF_LIFE, float(half_life)),
    }
    for what, (i, want) in header.items():
        if sf[i] != want:  # also NaN
            fail(f"`_sf` window {what}: expected {want!r} (from the window's parameters); found {float(sf[i])!r}.")

    n_learned = float(sf[h.SF_N_LEARNED])
    if not (0.0 <= n_learned <= 2.0**53 and n_learned == math.floor(n_learned)):
        fail(f"`_sf` number of learned events: expected a whole number >= 0; found {n_learned!r}.")
    last_t, t0, renorm = float(sf[h.SF_LAST_T]), float(sf[h.SF_T0]), float(sf[h.SF_N_RENORM])
    decay = window.decays
    event_clock = window.event_clock
    if not (0.0 <= renorm <= n_learned and renorm == math.floor(renorm)) or (renorm and not decay):
        fail(f"`_sf` renormalisation count: expected a whole number in [0, learned events]; found {renorm!r}.")
    if not math.isfinite(t0) or (t0 != 0.0 and (not decay or n_learned == 0)):
        fail(f"`_sf` decay reference clock: expected 0.0 here; found {t0!r}.")
    if n_learned == 0:
        if last_t != -math.inf:
            fail(f"`_sf` last clock: expected -inf before any learned event; found {last_t!r}.")
    elif event_clock and last_t != n_learned - 1.0:
        fail(f"`_sf` last clock: expected {n_learned - 1.0!r} (the last event's number); found {last_t!r}.")
    elif not math.isfinite(last_t):
        fail(f"`_sf` last clock: expected a finite time; found {last_t!r}.")

    pos = sf[h.SF_HEADER : h.SF_HEADER + B]
    neg = sf[h.SF_HEADER + B : h.SF_HEADER + 2 * B]
    npos = si[h.SI_HEADER : h.SI_HEADER + B]
    nneg = si[h.SI_HEADER + B : h.SI_HEADER + 2 * B]
    need_finite(pos, "_sf positive weights", low=0.0)
    need_finite(neg, "_sf negative weights", low=0.0)
    t_pos, t_neg = float(sf[h.SF_T_POS]), float(sf[h.SF_T_NEG])
    for what, v in (("positive", t_pos), ("negative", t_neg)):
        if not (math.isfinite(v) and v >= 0.0):
            fail(f"`_sf` total {what} weight: expected a finite number >= 0; found {v!r}.")
    for name, counts in (("_si positive counts", npos), ("_si negative counts", nneg)):
        if (counts < 0).any():
            i = int(np.flatnonzero(counts < 0)[0])
            fail(f"`{name}`: expected counts >= 0; found {int(counts[i])} at bucket {i}.")
    for cls, weights, counts in (("positive", pos, npos), ("negative", neg, nneg)):
        phantom = (counts == 0) & (weights != 0.0)
        if phantom.any():
            i = int(np.flatnonzero(phantom)[0])
            fail(f"`_sf` {cls} weight of bucket {i}: expected 0.0 (the bucket holds no event); found {weights[i]!r}.")
    with np.errstate(over="ignore"):
        total = float(pos.sum()) + float(neg.sum()) + t_pos + t_neg
    unit = 1.0
    if decay and n_learned > 0:
        exponent = (last_t - t0) / float(half_life)
        if not exponent <= h.DECAY_RENORM_EXPONENT:  # also NaN
            fail(
                f"`_sf` decay frame: expected (last clock - reference) / half-life <= "
                f"{h.DECAY_RENORM_EXPONENT}; found {exponent!r}."
            )
        unit = 2.0**exponent
    if not math.isfinite(total) or (unit == 0.0 and total != 0.0) or (unit > 0.0 and not math.isfinite(total / unit)):
        fail("`_sf` weights: expected a finite total weight in real units; found an overflowing one.")

    n_pos, n_neg = int(si[h.SI_N_POS]), int(si[h.SI_N_NEG])
    if n_pos != int(npos.sum()) or n_neg != int(nneg.sum()):
        fail(
            f"`_si` class counts: expected {int(npos.sum())} and {int(nneg.sum())} (the sums over buckets); "
            f"found {n_pos} and {n_neg}."
        )
    if (n_pos == 0 and t_pos != 0.0) or (n_neg == 0 and t_neg != 0.0):
        fail("`_sf` class totals: expected 0.0 for a class with no event in the window.")
    if n_pos + n_neg > n_learned:
        fail(f"`_si` class counts: {n_pos + n_neg} events in the window, more than the {n_learned!r} learned.")

    head, count = int(si[h.SI_RING_HEAD]), int(si[h.SI_RING_COUNT])
    if not ring:
        if head != 0 or count != 0:
            fail(f"`_si` ring head and count: expected 0 and 0 (no ring); found {head} and {count}.")
        return
    if not 0 <= count <= W:
        fail(f"`_si` ring count: expected an int in [0, {W}]; found {count}.")
    if not 0 <= head < W:
        fail(f"`_si` ring head: expected an int in [0, {W - 1}]; found {head}.")
    if count != n_pos + n_neg:
        fail(f"`_si` ring count: expected {n_pos + n_neg} (the events in the window); found {count}.")
    window.check_saved_ring_count(count, n_learned, checks)
    at = (head + np.arange(count)) % W
    base = h.SF_HEADER + 2 * B
    rw = sf[base : base + W][at]
    ry = sf[base + W : base + 2 * W][at]
    rt = sf[base + 2 * W : base + 3 * W][at]
    rb = si[h.SI_HEADER + 2 * B : h.SI_HEADER + 2 * B + W][at]
    if ((rb < 0) | (rb >= B)).any():
        i = int(np.flatnonzero((rb < 0) | (rb >= B))[0])
        fail(f"`_si` ring buckets: expected buckets in [0, {B - 1}]; found {int(rb[i])} at ring position {int(at[i])}.")
    if not ((ry == 0.0) | (ry == 1.0)).all():
        i = int(np.flatnonzero(~((ry == 0.0) | (ry == 1.0)))[0])
        fail(f"`_sf` ring labels: expected 0.0 or 1.0; found {ry[i]!r} at ring position {int(at[i])}.")
    need_finite(rw, "_sf ring weights", low=0.0)
    need_finite(rt, "_sf ring clocks")
    positive = ry == 1.0
    for cls, mask, counts in (("positive", positive, npos), ("negative", ~positive, nneg)):
        if not np.array_equal(np.bincount(rb[mask], minlength=B), counts):
            fail(f"`_si` {cls} counts per bucket: expected the ring's {cls} events per bucket.")
    if count:
        window.check_saved_ring_clocks(rt, n_learned, last_t, checks)


# ---------------------------------------------------------------------------------------- dispatch
def check_loaded(obj) -> None:
    """Check a streamcal object whose attributes a state file has just set (no ``__setstate__``)."""
    method = getattr(type(obj), "_check_loaded_state", None)
    if method is not None:  # each class checks its own state; this module knows none of them
        method(obj)
        return
    from river import base

    if not isinstance(obj, base.Base):  # only river-style classes build without side effects
        fail(f"a state file cannot hold a {type(obj).__module__}.{type(obj).__qualname__}.")
    check_like_fresh(obj)


def _init_params(obj) -> dict:
    from streamcal._params import init_param_names

    state = vars(obj)
    return {k: state[k] for k in init_param_names(type(obj)) if k in state}


def check_like_fresh(obj, *, learned=()) -> object:
    """The object's parameters build a fresh object (its constructor validates them), and every
    attribute of that fresh object is there with a value of the same type (arrays: the same dtype
    and number of dimensions; ``None`` in the fresh object: anything). Attributes in ``learned``
    may be missing (set by learning). Returns the fresh object."""
    cls = type(obj)
    params = _init_params(obj)
    try:
        fresh = cls(**params)
    except (TypeError, ValueError, OverflowError) as exc:
        fail(f"invalid parameters for {cls.__name__}: {exc}")
    state = vars(obj)
    missing = sorted(set(vars(fresh)) - set(state) - set(learned))
    if missing:
        fail(f"the attributes do not match a {cls.__name__}: missing {missing}.")
    for name, want in vars(fresh).items():
        if name in params or name not in state or want is None:
            continue
        _need_like(state[name], want, name)
    return fresh


def _need_like(value, want, name: str) -> None:
    """``value`` has the type of ``want``; fixed-size lists of scalars keep their length and types."""
    if isinstance(want, np.ndarray):
        if not (type(value) is np.ndarray and value.dtype == want.dtype and value.ndim == want.ndim):
            fail(f"`{name}`: expected a {want.ndim}-d {want.dtype} array; found {brief(value)}.")
        return
    if type(value) is not type(want):
        fail(f"`{name}`: expected a {type(want).__name__}; found {brief(value)}.")
    if type(want) is list and want:
        if len(value) != len(want):
            fail(f"`{name}`: expected {len(want)} values; found {len(value)}.")
        for i, (v, w) in enumerate(zip(value, want, strict=True)):
            _need_like(v, w, f"{name}[{i}]")
    if type(want) is float and not math.isfinite(value) and math.isfinite(want):
        fail(f"`{name}`: expected a finite float; found {value!r}.")
