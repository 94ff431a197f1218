"""Checks of a restored :class:`streamcal.KeyedCalibrator` and of an exported key row.

Every array a keyed kernel indexes is checked before any kernel runs: the segments of each key in
the arenas lie inside what the arenas use and do not overlap, the atoms of a key are sorted by
bucket and in range, their weights finite and non-negative, their event counts those of the
key's ring (windows with a ring), and the scalars are those a key can hold. Whatever a state file
holds, no kernel reads or writes outside its arrays.
"""

from __future__ import annotations

import copy
import itertools
import math
import numbers

import numpy as np

from streamcal import _state_check as c
from streamcal._kernels import histogram as _h
from streamcal._kernels import keyed as _kk
from streamcal._keyed_rows import ring_clocks, ring_rows

__all__ = [
    "check_counters",
    "check_exported",
    "check_key_params",
    "check_keyed_state",
    "replace_global",
    "row_layout",
    "upgrade_ring",
    "upgrade_state",
]

_MAX_STORED = 1e300


def check_keyed_state(obj) -> None:
    """Raise :class:`streamcal.exceptions.StateFileError` unless ``obj``'s restored attributes are
    those of a keyed calibrator with its parameters (see the module notes)."""
    from streamcal.isotonic.streaming import PAVCalibrator

    state = vars(obj)
    params = ("calibrator", "key_key", "score_key", "prior_strength", "max_keys")
    learned = ("_global", "_kf", "_ki", "_atoms_b", "_atoms_f", "_atoms_n", "_ring_b", "_ring_f", "_arena",
               "_slot_keys", "_n_learned", "_evictions", "_strength", "_next_refresh", "_src_weight",
               "_src_fitted", "_src_blocks", "_src_base", "_prior_ver", "_shift_a", "_shift_rho")
    c.need_keys(obj, (*params, *learned), optional=obj._UNSAVED)
    try:
        fresh = type(obj)(**{name: state[name] for name in params})
    except (TypeError, ValueError, OverflowError) as exc:
        c.fail(f"invalid parameters for {type(obj).__name__}: {exc}")
    glob = state["_global"]
    if type(glob) is not type(fresh._global) or glob._get_params() != fresh._global._get_params():
        c.fail(f"`_global`: expected a {type(fresh._global).__name__} with the template's parameters.")
    if not isinstance(glob, PAVCalibrator):
        c.fail("`_global`: expected a PAVCalibrator.")
    check_counters(state)
    if glob.n_learned != state["_n_learned"] and not state["_evictions"] >= 0:
        c.fail("`_n_learned` does not match the global calibrator.")
    keys = state["_slot_keys"]
    if type(keys) is not list:
        c.fail(f"`_slot_keys`: expected a list; found {c.brief(keys)}.")
    check_slot_keys(keys, obj.max_keys)
    n = len(keys)
    kf = c.need_array(state["_kf"], "_kf", np.float64, ndim=2)
    ki = c.need_array(state["_ki"], "_ki", np.int64, ndim=2)
    if kf.shape[1] != _kk.KF_N or ki.shape[1] != _kk.KI_N or kf.shape[0] < n or ki.shape[0] != kf.shape[0]:
        c.fail(f"`_kf`/`_ki`: expected {n} rows or more of {_kk.KF_N} and {_kk.KI_N} values.")
    ab = c.need_array(state["_atoms_b"], "_atoms_b", np.int64)
    af = c.need_array(state["_atoms_f"], "_atoms_f", np.float64, ndim=2, shape=(2, ab.size))
    an = c.need_array(state["_atoms_n"], "_atoms_n", np.int64, ndim=2, shape=(2, ab.size))
    rb = c.need_array(state["_ring_b"], "_ring_b", np.int32)
    rows = ring_rows(fresh._cfg[_kk.CFG_KIND])
    rf = c.need_array(state["_ring_f"], "_ring_f", np.float64, ndim=2, shape=(rows, rb.size))
    arena = c.need_array(state["_arena"], "_arena", np.int64, size=3)
    if not (0 <= arena[0] <= ab.size and 0 <= arena[1] <= rb.size and arena[2] == 0):
        c.fail(f"`_arena`: expected used sizes within the arenas ({ab.size}, {rb.size}); found {arena.tolist()}.")
    cfg = fresh._cfg
    _check_prior_source(state, int(cfg[_kk.CFG_B]))
    for k in range(kf.shape[0]):
        if k >= n or keys[k] is None:
            if ki[k].any() or kf[k].any():
                c.fail(f"`_ki` row {k}: a free slot must hold zeros.")
            continue
        _check_slot(k, kf[k], ki[k], ab, af, an, rb, rf, arena, cfg, state["_prior_ver"])
    for name, off, cap in (("atoms", _kk.KI_A_OFF, _kk.KI_A_CAP), ("ring", _kk.KI_R_OFF, _kk.KI_R_CAP)):
        rows = [k for k in range(n) if keys[k] is not None and ki[k, cap] > 0]
        spans = sorted((int(ki[k, off]), int(ki[k, off] + ki[k, cap])) for k in rows)
        for (_, end), (start, _) in itertools.pairwise(spans):
            if start < end:
                c.fail(f"the keys' {name} segments overlap (at {start}).")


def _check_prior_source(state, B: int) -> None:
    """The global map's weights, fitted values and blocks the prior was taken from: blocks sorted,
    disjoint, in range and holding every bucket with weight (the prior's runs stay inside them)."""
    weight = c.need_array(state["_src_weight"], "_src_weight", np.float64, size=B)
    fitted = c.need_array(state["_src_fitted"], "_src_fitted", np.float64, size=B)
    blocks = c.need_array(state["_src_blocks"], "_src_blocks", np.int64, ndim=2)
    c.need_finite(weight, "_src_weight", low=0.0, high=_MAX_STORED)
    c.need_finite(fitted, "_src_fitted", low=0.0, high=1.0)
    base = c.need_array(state["_src_base"], "_src_base", np.float64, size=2)
    c.need_finite(base, "_src_base", low=0.0, high=_MAX_STORED)
    if blocks.shape[0] != 2:
        c.fail(f"`_src_blocks`: expected 2 rows (first, last); found {blocks.shape}.")
    first, last = blocks
    ok = (first.size == 0 or (first[0] >= 0 and last[-1] < B)) and (first <= last).all()
    ok = ok and (first[1:] > last[:-1]).all()
    covered = np.zeros(B, dtype=bool)
    if ok:
        for f, end in zip(first, last, strict=True):
            covered[f : end + 1] = True
    if not ok or (weight[~covered] > 0).any():
        c.fail("`_src_blocks`: expected sorted disjoint blocks in range holding every bucket with weight.")


def _check_slot(k, kf, ki, ab, af, an, rb, rf, arena, cfg, ver) -> None:
    kind = cfg[_kk.CFG_KIND]
    off, n, cap = (int(ki[i]) for i in (_kk.KI_A_OFF, _kk.KI_A_LEN, _kk.KI_A_CAP))
    if not (0 <= n <= cap and off >= 0 and off + cap <= arena[_kk.AR_ATOMS]):
        c.fail(f"key slot {k}: its atoms segment ({off}, {n} of {cap}) lies outside the arena.")
    roff, rcap, head, count = (int(ki[i]) for i in (_kk.KI_R_OFF, _kk.KI_R_CAP, _kk.KI_R_HEAD, _kk.KI_R_COUNT))
    ring_kind = kind in (_h.KIND_COUNT, _h.KIND_TIME)
    if not (0 <= count <= rcap and roff >= 0 and roff + rcap <= arena[_kk.AR_RING] and (head < rcap or rcap == 0)
            and head >= 0):
        c.fail(f"key slot {k}: its ring segment lies outside the arena.")
    if not ring_kind and rcap:
        c.fail(f"key slot {k}: a ring under a window without one.")
    if kind == _h.KIND_COUNT and (rcap > cfg[_kk.CFG_WINDOW_N] or count > cfg[_kk.CFG_WINDOW_N]):
        c.fail(f"key slot {k}: a ring larger than the count window.")
    row = {
        "bucket": ab[off : off + n], "pos": af[0, off : off + n], "neg": af[1, off : off + n],
        "n_pos": an[0, off : off + n], "n_neg": an[1, off : off + n],
    }
    order = roff + (head + np.arange(count)) % rcap if rcap else np.zeros(0, dtype=np.int64)
    code = rb[order].astype(np.int64)
    names = ("t_pos", "t_neg", "last_t", "n_learned", "t0", "n_renorm", "stamp", "observed", "expected")
    fields = (_kk.KF_T_POS, _kk.KF_T_NEG, _kk.KF_LAST_T, _kk.KF_N_LEARNED, _kk.KF_T0, _kk.KF_N_RENORM,
              _kk.KF_STAMP, _kk.KF_OBS, _kk.KF_EXP)
    row.update((name, float(kf[i])) for name, i in zip(names, fields, strict=True))
    if (code < 0).any():
        c.fail(f"key slot {k}: its ring holds a negative bucket code.")
    clock = rf[1, order] if rf.shape[0] > 1 else ring_clocks(count, row["n_learned"])
    row.update(ring_bucket=code >> 1, ring_weight=rf[0, order], ring_label=(code & 1).astype(np.float64),
               ring_clock=clock)
    try:
        _check_row(row, cfg)
    except ValueError as exc:
        c.fail(f"key slot {k}: {exc}")
    if ki[list(_kk.KI_CACHE)].any() or not -1 <= ki[_kk.KI_PVER] <= ver:
        c.fail(f"key slot {k}: expected no block cache and a prior version in [-1, {ver}].")
    if not (math.isfinite(kf[_kk.KF_PU]) and kf[_kk.KF_PU] >= 0.0):
        c.fail(f"key slot {k}: expected a finite prior unit >= 0.")
    taken = kf[[_kk.KF_ODDS, _kk.KF_PRIOR_T_POS, _kk.KF_PRIOR_T_NEG]]
    if not (np.isfinite(taken).all() and (taken >= 0.0).all()):
        c.fail(f"key slot {k}: expected a finite prior odds multiplier and prior totals >= 0.")
    shape = kf[_kk.KF_SHAPE_OBS : _kk.KF_N]
    if not (np.isfinite(shape).all() and (shape >= 0.0).all()):
        c.fail(f"key slot {k}: expected finite shape sums >= 0 (observed and expected positives per shape bin).")
    if ki[_kk.KI_N_POS] != int(row["n_pos"].sum()) or ki[_kk.KI_N_NEG] != int(row["n_neg"].sum()):
        c.fail(f"key slot {k}: its event counts do not add up.")


def check_counters(state: dict) -> None:
    """A restored keyed calibrator's counters: events learned, evictions, the prior's schedule,
    strength, version and shift."""
    c.need_int(state["_n_learned"], "_n_learned", 0)
    c.need_int(state["_evictions"], "_evictions", 0)
    c.need_int(state["_next_refresh"], "_next_refresh", 1)
    c.need_float(state["_strength"], "_strength", 0.0)
    c.need_int(state["_prior_ver"], "_prior_ver", 0)
    c.need_float(state["_shift_a"], "_shift_a", 0.0)
    c.need_float(state["_shift_rho"], "_shift_rho", 0.0)


def check_key_params(key_key, prior_strength, max_keys) -> None:
    """The keyed constructors' checks of ``key_key``, ``prior_strength`` and ``max_keys``."""
    if not isinstance(key_key, str):
        msg = f"`key_key` must be a string; got {key_key!r}."
        raise TypeError(msg)
    ok = isinstance(prior_strength, str) and prior_strength == "auto"
    ok = ok or (
        isinstance(prior_strength, numbers.Real)
        and not isinstance(prior_strength, bool)
        and math.isfinite(prior_strength)
        and prior_strength >= 0
    )
    if not ok:
        msg = f'`prior_strength` must be "auto" or a finite number >= 0 (pseudo-events); got {prior_strength!r}.'
        raise ValueError(msg)
    if max_keys is not None and (
        not isinstance(max_keys, numbers.Integral) or isinstance(max_keys, bool) or max_keys < 1
    ):
        msg = f"`max_keys` must be None or an integer >= 1; got {max_keys!r}."
        raise ValueError(msg)


def check_slot_keys(keys: list, max_keys) -> None:
    """A restored keyed calibrator's slot keys: ints or strings (one kind) and None for free
    slots, each key once, at most ``max_keys`` of them."""
    live = [key for key in keys if key is not None]
    kinds = {type(key) for key in live}
    if not kinds <= {int, str} or len(kinds) > 1:
        c.fail("`_slot_keys`: expected ints or strings (one kind) and None.")
    if len(set(live)) != len(live):
        c.fail("`_slot_keys`: a key appears twice.")
    if max_keys is not None and len(live) > max_keys:
        c.fail(f"`_slot_keys`: {len(live)} keys hold a state; max_keys is {max_keys}.")


def row_layout(global_cal) -> dict:
    """What a key row's buckets and clocks mean: the bucket edges and the window of the keyed
    calibrator's global map (``edges``, and ``window`` as ``(kind, n, seconds, half_life)``), which
    :meth:`streamcal.KeyedCalibrator.export_key` gives with the row and ``import_key`` checks."""
    hist = global_cal.window_histogram
    return {"edges": hist.layout.edges.copy(), "window": tuple(float(v) for v in hist.window_code)}


def _check_layout(state: dict, layout: dict) -> None:
    for name, what in (("edges", "bucket edges"), ("window", "window")):
        if name not in state:
            msg = f"`state` must hold {name!r}, the {what} its row was learned over (export_key's form)."
            raise ValueError(msg)
    edges, window = np.asarray(state["edges"]), state["window"]
    if edges.shape != layout["edges"].shape or not np.array_equal(edges, layout["edges"]):
        msg = (
            f"`state` was exported over other bucket edges ({edges.size - 1} buckets from "
            f"{float(edges.flat[0]) if edges.size else None!r}); this calibrator's are {layout['edges'].size - 1} "
            f"from {float(layout['edges'][0])!r}: its buckets would mean other scores."
        )
        raise ValueError(msg)
    try:
        same = tuple(float(v) for v in window) == layout["window"]
    except (TypeError, ValueError):
        same = False
    if not same:
        msg = (
            f"`state` was exported under another window ((kind, count, seconds, half-life) = {window!r}); "
            f"this calibrator's is {layout['window']!r}."
        )
        raise ValueError(msg)


def check_exported(state, cfg, layout: dict | None = None) -> dict:
    """An exported key row (:meth:`streamcal.KeyedCalibrator.export_key`), checked, as arrays of the
    kernels' types, against ``layout`` (:func:`row_layout`) when given; ValueError naming the first
    bad field."""
    if not isinstance(state, dict):
        msg = f"`state` must be a dict (KeyedCalibrator.export_key's form); got {type(state).__name__}."
        raise TypeError(msg)
    if layout is not None:
        _check_layout(state, layout)
    row = {}
    arrays = {"bucket": np.int64, "pos": np.float64, "neg": np.float64, "n_pos": np.int64, "n_neg": np.int64,
              "ring_bucket": np.int64, "ring_weight": np.float64, "ring_label": np.float64,
              "ring_clock": np.float64}
    for name, dtype in arrays.items():
        if name not in state:
            msg = f"`state` must hold {name!r}."
            raise ValueError(msg)
        value = np.asarray(state[name])
        if value.ndim != 1 or (value.size and value.dtype.kind not in ("iu" if dtype is np.int64 else "iuf")):
            msg = f"`state[{name!r}]` must be a 1-d array of {np.dtype(dtype).name}; got {value.dtype} {value.shape}."
            raise ValueError(msg)
        if dtype is np.int64 and value.size and value.dtype.kind == "u" and value.max() > np.iinfo(np.int64).max:
            msg = f"`state[{name!r}]` holds values beyond int64."
            raise ValueError(msg)
        row[name] = np.ascontiguousarray(value, dtype=dtype)
    for name in ("t_pos", "t_neg", "last_t", "n_learned", "t0", "n_renorm", "stamp", "observed", "expected"):
        value = state.get(name)
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            msg = f"`state[{name!r}]` must be a number; got {value!r}."
            raise ValueError(msg)
        row[name] = float(value)
    _check_row(row, cfg)
    row["shape"] = _exported_shape(state)
    return row


def _exported_shape(state: dict) -> np.ndarray:
    """An exported row's shape sums (``"shape"``), checked; zeros where the row has none (the
    form before them)."""
    size = _kk.KF_N - _kk.KF_SHAPE_OBS
    if "shape" not in state:
        return np.zeros(size)
    value = np.asarray(state["shape"])
    if value.shape != (size,) or value.dtype.kind not in "iuf":
        msg = f"`state['shape']` must be a 1-d array of {size} numbers; got {value.dtype} {value.shape}."
        raise ValueError(msg)
    value = value.astype(np.float64)
    bad = np.flatnonzero(~(np.isfinite(value) & (value >= 0.0)))
    if bad.size:
        msg = f"`state['shape']` must hold finite numbers >= 0; got {float(value[bad[0]])!r} at position {int(bad[0])}."
        raise ValueError(msg)
    return value


def _check_row(row: dict, cfg) -> None:
    """ValueError naming the first field of a key row that a key cannot hold."""
    B = int(cfg[_kk.CFG_B])
    kind = cfg[_kk.CFG_KIND]
    b = row["bucket"]
    n = b.size
    for name in ("pos", "neg", "n_pos", "n_neg"):
        if row[name].size != n:
            msg = f"`{name}` must hold one value per atom ({n}); got {row[name].size}."
            raise ValueError(msg)
    if n and (b.min() < 0 or b.max() >= B or (np.diff(b) <= 0).any()):
        msg = f"`bucket` must be strictly increasing buckets in [0, {B}); got {b[:8].tolist()}..."
        raise ValueError(msg)
    for name in ("pos", "neg"):
        v = row[name]
        if n and not (np.isfinite(v).all() and (v >= 0).all() and (v <= _MAX_STORED).all()):
            msg = f"`{name}` must hold finite weights >= 0."
            raise ValueError(msg)
    npos, nneg = row["n_pos"], row["n_neg"]
    if n and ((npos < 0).any() or (nneg < 0).any() or ((npos == 0) & (nneg == 0)).any()):
        msg = "`n_pos`/`n_neg` must be event counts >= 0, at least one event per atom."
        raise ValueError(msg)
    if n and (((npos == 0) & (row["pos"] != 0)).any() or ((nneg == 0) & (row["neg"] != 0)).any()):
        msg = "an atom holds weight of a class without events of it."
        raise ValueError(msg)
    for name in ("t_pos", "t_neg"):
        if not (math.isfinite(row[name]) and 0.0 <= row[name] <= _MAX_STORED):
            msg = f"`{name}` must be a finite weight >= 0; got {row[name]!r}."
            raise ValueError(msg)
    nl = row["n_learned"]
    if not (math.isfinite(nl) and nl >= 0 and nl == math.floor(nl) and nl >= npos.sum() + nneg.sum()):
        msg = f"`n_learned` must be a whole number of events at least the window's; got {nl!r}."
        raise ValueError(msg)
    for name in ("t0", "n_renorm", "stamp", "observed", "expected"):
        if not math.isfinite(row[name]) or (name != "t0" and row[name] < 0):
            msg = f"`{name}` must be finite{'' if name == 't0' else ' and >= 0'}; got {row[name]!r}."
            raise ValueError(msg)
    last = row["last_t"]
    if math.isnan(last) or last == math.inf or (nl > 0 and not math.isfinite(last)):
        msg = f"`last_t` must be the clock of the last learned event; got {last!r}."
        raise ValueError(msg)
    rb = row["ring_bucket"]
    count = rb.size
    ring_kind = kind in (_h.KIND_COUNT, _h.KIND_TIME)
    for name in ("ring_weight", "ring_label", "ring_clock"):
        if row[name].size != count:
            msg = f"`{name}` must hold one value per ring event ({count}); got {row[name].size}."
            raise ValueError(msg)
    if not ring_kind:
        if count:
            msg = "the window keeps no ring: `ring_*` must be empty."
            raise ValueError(msg)
        return
    if kind == _h.KIND_COUNT and count > cfg[_kk.CFG_WINDOW_N]:
        msg = f"the ring holds {count} events; the count window keeps {int(cfg[_kk.CFG_WINDOW_N])}."
        raise ValueError(msg)
    if count and (rb.min() < 0 or rb.max() >= B):
        msg = f"`ring_bucket` must hold buckets in [0, {B})."
        raise ValueError(msg)
    y, w, t = row["ring_label"], row["ring_weight"], row["ring_clock"]
    if count and not (np.isin(y, (0.0, 1.0)).all() and np.isfinite(w).all() and (w >= 0).all()
                      and np.isfinite(t).all() and (np.diff(t) >= 0).all()):
        msg = "the ring must hold labels 0/1, finite weights >= 0 and non-decreasing finite clocks."
        raise ValueError(msg)
    if kind == _h.KIND_COUNT and not np.array_equal(t, ring_clocks(count, row["n_learned"])):
        msg = "a count window's `ring_clock` must be the numbers of the key's last learned events, in order."
        raise ValueError(msg)
    # each atom's event counts are its ring events' (the expiry finds every leaving event's atom)
    cp = np.bincount(rb[y > 0.5], minlength=B)
    cn = np.bincount(rb[y <= 0.5], minlength=B)
    full_p = np.zeros(B, dtype=np.int64)
    full_n = np.zeros(B, dtype=np.int64)
    full_p[b] = npos
    full_n[b] = nneg
    if not (np.array_equal(cp, full_p) and np.array_equal(cn, full_n)):
        msg = "the atoms' event counts do not match the ring's events."
        raise ValueError(msg)


def upgrade_state(state: dict) -> dict:
    """A saved state in the current layout: its ring (:func:`upgrade_ring`), its keys' shape sums
    (:func:`upgrade_shape_sums`), and the global window's
    own totals for the LLR's prior odds (``_src_base``), which states written before it lack: zeros,
    the prior's totals, as those states read them until the next refresh of the prior."""
    state = upgrade_shape_sums(upgrade_ring(state))
    if type(state) is dict and "_src_base" not in state:
        state = {**state, "_src_base": np.zeros(2)}
    return state


def upgrade_shape_sums(state: dict) -> dict:
    """A saved state's per-key floats (``_kf``) with the keys' shape sums
    (:mod:`streamcal._keyed_shape`). States written before them hold ``SHAPE_BINS`` fewer
    columns per key; their keys start with none (zeros): the bound on the automatic strength reads
    the evidence the keys learn after loading, and none until then (the prior keeps the global
    map's weight). Other shapes are left for the state checks to reject."""
    kf = state.get("_kf") if type(state) is dict else None
    old = _kk.KF_SHAPE_OBS
    if not (type(kf) is np.ndarray and kf.ndim == 2 and kf.shape[1] == old and old < _kk.KF_N):
        return state
    return {**state, "_kf": np.concatenate([kf, np.zeros((kf.shape[0], _kk.KF_N - old), dtype=kf.dtype)], axis=1)}


def upgrade_ring(state: dict) -> dict:
    """A saved state's ring in the current layout. States written before the ring packed its
    labels into the bucket codes hold ``_ring_b`` as int64 buckets and ``_ring_f`` as three rows
    (weight, label, clock); those are repacked when their buckets and labels are in range (other
    values are left for :func:`check_keyed_state` to reject)."""
    rb, rf = state.get("_ring_b"), state.get("_ring_f")
    if not (type(rb) is np.ndarray and type(rf) is np.ndarray and rb.dtype == np.int64 and rb.ndim == 1
            and rf.dtype == np.float64 and rf.shape == (3, rb.size)):
        return state
    labels = rf[1]
    if rb.size and not ((rb >= 0).all() and (rb < 2**30).all() and np.isin(labels, (0.0, 1.0)).all()):
        return state
    cal = state.get("calibrator")
    window = getattr(cal, "window", None) if cal is not None else None
    kind = _h.KIND_TIME if type(window).__name__ == "TimeWindow" else _h.KIND_COUNT
    state = dict(state)
    state["_ring_b"] = (2 * rb + (labels > 0.5)).astype(np.int32)
    state["_ring_f"] = np.ascontiguousarray(rf[[0, 2]] if kind == _h.KIND_TIME else rf[:1])
    return state


def replace_global(obj, source, keyed_class) -> None:
    """Have the keyed calibrator ``obj`` pool toward ``source``'s global map, its keys' rows kept in
    place (:meth:`streamcal.KeyedCalibrator.replace_global` says what changes and what does not).

    ``source`` is a keyed calibrator of ``obj``'s class, template and prior strength (its global
    map and its prior are adopted as they stand), a calibrator of the template's class and
    parameters (it becomes the global map and the prior is taken from it now), or the bytes of
    either (:func:`streamcal.persist.to_bytes`, checked as :func:`streamcal.persist.from_bytes`
    checks a state). Everything is checked and copied before ``obj`` changes; the work is that of
    the global map (its buckets and window), not of the keys. ``keyed_class``: the keyed
    calibrator's base class (:class:`streamcal.KeyedCalibrator`)."""
    from streamcal.merging import _check_same_params
    from streamcal.persist import from_bytes

    if isinstance(source, (bytes, bytearray, memoryview)):
        source = from_bytes(bytes(source), where="`source`")
    keyed = isinstance(source, keyed_class)
    glob = source._global if keyed else source
    if keyed and type(source) is not type(obj):
        msg = (
            f"`source` must be a {type(obj).__name__} (a keyed calibrator of this kind); got a "
            f"{type(source).__name__}."
        )
        raise TypeError(msg)
    if type(glob) is not type(obj._global):
        msg = (
            f"`source` must be a {type(obj).__name__} or a {type(obj._global).__name__} of this template; "
            f"got a {type(source).__name__}."
        )
        raise TypeError(msg)
    if keyed and not _same_strength(source.prior_strength, obj.prior_strength):
        msg = (
            f"`source` must have this calibrator's prior_strength ({obj.prior_strength!r}); got "
            f"{source.prior_strength!r}."
        )
        raise ValueError(msg)
    try:
        _check_same_params(obj._global, glob, 0)
    except ValueError as exc:
        why = str(exc).partition(": ")[2].replace(" (position 0)", "") or str(exc)
        msg = f"`source` must hold a global map of this template: {why}"
        raise ValueError(msg) from None
    # the copy shares this calibrator's bucket layout (built once, never changed; equal edges)
    mine, theirs = obj._global.window_histogram.layout, glob.window_histogram.layout
    memo = {}
    if np.array_equal(mine.edges, theirs.edges):
        # the layout and its parts, which a calibrator's state also names on their own (its cuts
        # and centres as lists, a Python object per bucket to copy otherwise)
        memo = {id(theirs): mine}
        for name in ("edges", "cuts", "cuts_list", "guide", "centres", "centres_list"):
            memo[id(getattr(theirs, name))] = getattr(mine, name)
    if keyed:
        with source._lock:
            adopted = {name: copy.deepcopy(getattr(source, name), memo) for name in obj._GLOBAL_STATE}
            version = int(source._prior_ver)
    else:
        with source._lock:
            adopted = {"_global": copy.deepcopy(source, memo)}
        adopted["_n_learned"] = int(adopted["_global"].n_learned)
    with obj._lock:
        previous = int(obj._prior_ver)
        obj.__dict__.update(adopted)
        if keyed:  # the source's prior as it stands, under a version no key holds
            obj._prior_ver = max(previous, version) + 1
            obj._build_prior()
            obj._take_key_odds()
        else:  # the prior follows the new global map now, then on the schedule from its count
            obj._refresh_prior()


def _same_strength(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return float(a) == float(b)
