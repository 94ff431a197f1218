"""Keyed streaming PAV: one sparse windowed row per key over one bucket layout, pooled with a prior (numba).

Rows. A key's row holds only its non-empty buckets, as *atoms* ``(bucket, pos, neg, npos, nneg)``
sorted by bucket, in a segment of the atom arena (``ab``; ``af``: weights; ``an``: counts); a key's
memory grows with the distinct buckets its window holds, never with the bucket count. A count or
time window keeps the key's events in a ring segment of the ring arena that grows by half up to the
window: ``rb`` (int32) holds ``2 * bucket + label`` per event, ``rf`` its weight (stored units) and,
for time windows only, its clock (a count window's clocks are the key's last event numbers, so the
ring does not keep them: 12 bytes per event under a count window, 20 under a time window).
A segment that grows moves to a *hole* of its new size (the capacities ``_grown`` gives from
``FIRST_CAP`` are the size classes; ``holes`` holds, per arena and class, the first of a chain of
free segments linked through their first slot), else to the end of its arena, and leaves its old
segment as a hole of its class: keys that grow later take the segments earlier keys outgrew, so an
arena's gaps stay a few per cent of it. The caller enlarges the arenas when a kernel stops for room
(it returns the position of the event it could not place, before touching it) and compacts one
(``KeyedRows._compact``, which closes its holes) only where its gaps are large.

Per key scalars (``kf`` float64 and ``ki`` int64, one row per key slot): the window's totals,
clock, decay frame and counts, exactly the fields of the unkeyed histogram
(:mod:`streamcal._kernels.histogram`), updated by the same arithmetic in the same order: a key's
row equals, bit for bit, the histogram an unkeyed calibrator with the same window builds from that
key's events (tested).

Map. A key's map is PAV (the stack sweep of :mod:`streamcal._kernels.ipav`, same pooling test,
same additions) over the key's atoms plus the *prior*: pseudo-counts per bucket from the global
map (``prior_pos[b]``, ``prior_neg[b]``, real units, scaled to the key's stored units). Buckets
without key evidence are pooled per run inside one global block (their prior rates are equal, and
pooling adjacent points of equal rate leaves the isotonic fit unchanged), so a sweep visits the
key's atoms plus at most one run per global block. With no prior (strength 0) the sweep visits
exactly the key's knots with the unkeyed kernel's values, and its fitted values, interpolation,
finite-LLR rule and outputs are the unkeyed calibrator's, bit for bit (tested).

Block cache. A key with at least ``CACHE_MIN_ATOMS`` atoms keeps its blocks (first and last bucket,
weights) in a segment of the block arena (``qb``, ``qf``) and repairs them after each change of its
row as :mod:`streamcal._kernels.ipav` does: the sweep resumes at the block holding the changed
bucket (the blocks on its left are the sweep's stack there; where the bucket's atom left the
window, at the block holding the bucket before it, since the prior's runs on both sides of it now
form one unit) and stops at the end of the first old
block it rebuilds without pooling it into the stack below, from where it would repeat what it did
before; the result equals a from-scratch sweep bit for bit. A key with fewer atoms sweeps its few
atoms and the prior's runs per prediction.

Shifted prior. Under ``prior_strength="auto"`` each key's prior is the global map with its odds
multiplied by the key's shrunk rate ratio ``e = (O + a) / (rho E + a)`` (``KF_ODDS``; ``a`` and ``rho``
in ``cfg``): a run of the prior of weight ``W`` inside global block ``g`` (fitted ``q``) holds
``W q e / (q e + 1 - q)`` pseudo-positives and the rest pseudo-negatives, so the rates stay equal
inside a global block and increasing across blocks. A key takes ``e`` with the prior (see "Prior
units"), and with it its prior's totals (``KF_PRIOR_T_POS``, ``KF_PRIOR_T_NEG``), which its LLR's prior
odds read: the shifted runs' totals, or, where the prior's source holds the score prior's pseudo-events
(``CFG_BASE_POS``, ``CFG_BASE_NEG``), the global window's own totals with their odds multiplied by ``e``.
With ``e = 1`` the runs are read as without the shift, bit for bit.

Prior units. The prior is in real units; a key's row in stored units (decay windows). A key takes
the prior at its stored unit of the moment (``KF_PU``) the first time it is read or learned after
the prior changed (``KI_PVER`` against ``CFG_PRIOR_VER``); between two such moments the prior decays
with the key's row, so that one event changes one bucket and the blocks repair locally. Without
decay the unit is 1.

Whole runs. A sweep into the scratch (a key without cached blocks) visits every run of the prior,
though a key with a few atoms changes few of them: the runs left of its first atom and right of
the first run after its last atom that the sweep pushes alone are pushed one after the other, never
pooled, when their rates, as the sweep computes them, increase with a margin. The sweep writes
those runs straight to the scratch (the same values by the same operations, from ``prior``'s table
of the runs read whole) and runs the stack only between them: the same blocks, bit for bit. The
margin (``FILL_MARGIN``, relative, against a rounding error of a few units in the last place) is
checked once per prior for the unshifted rates (``CFG_FILL_PLAIN``) and per key for a shift ``e``
from two figures of the prior: adjacent runs' rates shifted by ``e`` differ relatively by
``(1 - o_g / o_{g+1}) / (1 + e o_g)`` (``o``: the odds), at least ``CFG_FILL_GAP / (1 + e
CFG_FILL_ODDS)``.
"""

from __future__ import annotations

import math

import numpy as np

from streamcal._kernels._config import jit_noalloc
from streamcal._kernels._prefetch import compiled_tier, prefetch_1d, prefetch_2d
from streamcal._kernels.histogram import (
    DECAY_FORGET_EXPONENT,
    DECAY_RENORM_EXPONENT,
    KIND_COUNT,
    KIND_DECAY_EVENTS,
    KIND_DECAY_TIME,
    KIND_TIME,
    MAX_WEIGHT,
)
from streamcal._kernels.ipav import (
    PACK_BUSY,
    PACK_END,
    PACK_HEADER,
    PACK_O_PF,
    PACK_O_PI,
    PACK_O_SI,
    RUNS_SIZE,
    SF_KIND,
    _map_section,
    _score_ok,
    _stays_below,
    pav_bucket_of,
    pav_learn_one_inplace,
    pav_llr_from_proba,
    pav_predict_one,
    pav_proba_out,
)

# kf: per key floats
KF_T_POS = 0
KF_T_NEG = 1
KF_LAST_T = 2
KF_N_LEARNED = 3
KF_T0 = 4
KF_N_RENORM = 5
KF_STAMP = 6  # the global number of learned events when the key last learned (least recently updated)
KF_OBS = 7  # sum of w * y over the key's learned events (real weights): the between-key variance
KF_EXP = 8  # sum of w * p over them, p the global map's prediction before the event
KF_PU = 9  # the key's stored unit when it took the prior (see "Prior units")
KF_ODDS = 10  # the odds multiplier of the key's prior (see "Shifted prior"; 1: the global map's rates)
KF_PRIOR_T_POS = 11  # the key's prior's positive and negative totals for its LLR's prior odds (real units)
KF_PRIOR_T_NEG = 12
# the key's observed and expected positives (as KF_OBS, KF_EXP) in each of SHAPE_BINS bins of the
# buckets (CFG_SHAPE_CUT): the between-key variance of the keys' shapes (streamcal._keyed_shape)
SHAPE_BINS = 4
KF_SHAPE_OBS = 13  # SHAPE_BINS columns
KF_SHAPE_EXP = KF_SHAPE_OBS + SHAPE_BINS  # SHAPE_BINS columns
KF_N = KF_SHAPE_EXP + SHAPE_BINS

# ki: per key ints
KI_A_OFF = 0
KI_A_LEN = 1
KI_A_CAP = 2
KI_R_OFF = 3
KI_R_CAP = 4
KI_R_HEAD = 5
KI_R_COUNT = 6
KI_N_POS = 7
KI_N_NEG = 8
KI_PVER = 9  # the prior version the key took (see "Prior units")
KI_B_OFF = 10  # block cache: segment, blocks used, capacity (0: no cache), valid flag
KI_B_LEN = 11
KI_B_CAP = 12
KI_B_VALID = 13
KI_N = 14
KI_CACHE = (KI_B_OFF, KI_B_LEN, KI_B_CAP, KI_B_VALID)  # not state: rebuilt on demand

# cfg: the layout and window, read by every kernel
CFG_B = 0
CFG_KIND = 1
CFG_WINDOW_N = 2
CFG_SECONDS = 3
CFG_HALF_LIFE = 4
CFG_PSEUDO = 5  # c, the finite rule's pseudo-count (real units)
CFG_FINITE = 6  # 1.0: probabilities under the finite rule
CFG_LINEAR = 7  # 1.0: linear interpolation between bucket centres
CFG_PROB_INPUTS = 8  # 1.0: probability inputs (the fallback before any weight is the score)
CFG_PRIOR_ON = 9  # 1.0: the prior holds weight
CFG_PRIOR_T_POS = 10  # the prior's total pseudo-positive and pseudo-negative weight (real units)
CFG_PRIOR_T_NEG = 11
CFG_PRIOR_PSEUDO = 12  # extra finite-rule pseudo-count the prior carries (its share of the global's)
CFG_PRIOR_VER = 13  # the prior's version (changes at each refresh)
CFG_PRIOR_RUNS = 14  # the global map's number of blocks (bounds a key's prior runs)
CFG_SHIFT_A = 15  # the shifted prior's gamma shape in pseudo-positives (0: no shift)
CFG_SHIFT_RHO = 16  # the keys' mean observed / expected ratio
CFG_FILL = 17  # 1.0: every run of the prior holds weight inside its block (see "Whole runs")
CFG_FILL_PLAIN = 18  # 1.0: the whole runs' rates increase by more than FILL_MARGIN (no shift)
CFG_FILL_GAP = 19  # min over adjacent runs of 1 - odds / next odds (the shifted prior's margin)
CFG_FILL_ODDS = 20  # max odds of a run below the last (the shifted prior's margin)
CFG_BASE_POS = 21  # the prior's weight split at the global window's own rate (0, 0: use the prior's
CFG_BASE_NEG = 22  # totals), the LLR's prior odds where the source holds the score prior's pseudo-events
CFG_BASE_PSEUDO = 23  # then the LLR's finite-rule pseudo-count the prior carries (the global's, at that scale)
CFG_SHAPE_CUT = 24  # SHAPE_BINS - 1 buckets: a bucket above the j-th of them lies in shape bin j + 1 or above
CFG_N = CFG_SHAPE_CUT + SHAPE_BINS - 1

# pri: the prior's int arrays (rows)
PR_SEG = 0  # the global block holding each bucket (-1: a gap of the global map)
PR_BLK_LAST = 1  # each global block's last bucket
PR_NZ_NEXT = 2  # the first bucket at or after each with prior weight (B: none)
PR_NZ_PREV = 3  # the last bucket at or before each with prior weight (-1: none)
PR_RUN_LO = 4  # each run's first and last bucket with prior weight (the run read whole)
PR_RUN_TOP = 5
PR_N = 6

# arena: used slots of the atom, ring and block arenas
AR_ATOMS = 0
AR_RING = 1
AR_BLOCKS = 2

FIRST_CAP = 4
# holes: the free segments of the atom and ring arenas (rows AR_ATOMS, AR_RING), one list per size
# class (the capacities ``_grown`` gives from FIRST_CAP), each a chain through its segments' first slot
HOLE_CLASSES = 64
NO_HOLE = np.int64(-1)
# int64 constants for the callees' arguments: a literal ``0`` or ``-1`` would compile a callee a
# second time, for the literal's type
_ZERO = np.int64(0)
_REBUILD = np.int64(-1)  # ``_resweep``'s changed bucket when every block is rebuilt
_INEXACT = np.bool_(False)  # ``ipav._stays_below``'s ``exact``: a key's sums are not taken as exact
_HOLE_ATOMS = np.int64(AR_ATOMS)
_HOLE_RING = np.int64(AR_RING)
CACHE_MIN_ATOMS = 48  # keys with this many atoms keep their blocks
FILL_MARGIN = 1e-9  # the whole runs' least relative rate increase (see "Whole runs")

_ONE_BELOW = 1.0 - 2.0**-53
_NOT_SURE_LOW = 2.0**-53

# status of the runners: >= 0 is the position of an event that needs room
DONE = -1
# what the river face's single-event learning returns besides DONE (nothing of the event done)
REFUSED = -2  # the packed global state is busy, or the score or the weight is not one the checks accept
NEW_KEY = -3  # a valid event of a key without a slot
NO_ROOM = -4  # the arenas lack room for the key's event


@jit_noalloc(forceinline=True)
def _violates(p_left, n_left, p_right, n_right):
    return p_left * (p_right + n_right) >= p_right * (p_left + n_left)


@jit_noalloc(forceinline=True)
def stored_unit(cfg, kf, k):
    """Factor from real weights to the key's stored units (decay windows), else 1."""
    kind = cfg[CFG_KIND]
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        return math.pow(2.0, (kf[k, KF_LAST_T] - kf[k, KF_T0]) / cfg[CFG_HALF_LIFE])
    return 1.0


@jit_noalloc(forceinline=True)
def _grown(cap):
    """A key's next segment capacity: half as large again (a segment holds the key's window, so
    its slack is memory in proportion to the key's evidence; growth stays geometric)."""
    return FIRST_CAP if cap == 0 else cap + (cap >> 1)


@jit_noalloc(forceinline=True)
def _find_atom(ab, off, n, b):
    """Position (in ``off .. off + n``) of the first atom whose bucket is >= ``b``."""
    lo = off
    hi = off + n
    while lo < hi:
        mid = (lo + hi) >> 1
        if ab[mid] < b:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit_noalloc(forceinline=True)
def _move_atom(ab, af, an, dst, src):
    ab[dst] = ab[src]
    af[0, dst] = af[0, src]
    af[1, dst] = af[1, src]
    an[0, dst] = an[0, src]
    an[1, dst] = an[1, src]


@jit_noalloc(forceinline=True)
def _block_bound(cfg, ki, k):
    """The most blocks key ``k`` can have after its next event: its units (atoms and prior runs)."""
    return 2 * (ki[k, KI_A_LEN] + 1) + np.int64(cfg[CFG_PRIOR_RUNS]) + 2


@jit_noalloc
def move_segments(arr, src, dst, length, n):
    """Move ``n`` column segments of ``arr`` (rows x slots) in place: ``arr[:, src[i] : src[i] +
    length[i]]`` to column ``dst[i]``, for segments in increasing ``src`` with ``dst[i] <= src[i]``
    (a compaction: every move is to the left of what is still to move, so forward copies are safe)."""
    rows = arr.shape[0]
    for i in range(n):
        a = src[i]
        d = dst[i]
        if a == d:
            continue
        for r in range(rows):
            for q in range(length[i]):
                arr[r, d + q] = arr[r, a + q]
    return 0


@jit_noalloc(forceinline=True)
def room_needed(ki, cfg, holes, k):
    """``(atoms, ring, blocks)``: free slots a learned event of key ``k`` may need at the arenas' ends
    (none for a segment a hole of its size class gives)."""
    atoms = 0
    if ki[k, KI_A_LEN] == ki[k, KI_A_CAP]:
        atoms = _grown(ki[k, KI_A_CAP])
        if _has_hole(holes, _HOLE_ATOMS, atoms):
            atoms = 0
    ring = 0
    kind = cfg[CFG_KIND]
    if (kind == KIND_COUNT) | (kind == KIND_TIME):
        cap = ki[k, KI_R_CAP]
        full = ki[k, KI_R_COUNT] == cap
        if full and (kind == KIND_TIME or cap < cfg[CFG_WINDOW_N]):
            ring = _grown(cap)
            if kind == KIND_COUNT and ring > cfg[CFG_WINDOW_N]:
                ring = np.int64(cfg[CFG_WINDOW_N])
            if _has_hole(holes, _HOLE_RING, ring):
                ring = 0
    blocks = 0
    if ki[k, KI_A_LEN] + 1 >= CACHE_MIN_ATOMS or ki[k, KI_B_CAP] > 0:
        bound = _block_bound(cfg, ki, k) + 2  # the bound after a new atom
        if ki[k, KI_B_CAP] < bound:
            blocks = bound + (bound >> 1)
    return atoms, ring, blocks


@jit_noalloc(forceinline=True)
def _expire_next(cfg, kf, ki, ab, af, an, rb, rf, k, clock):
    """Remove the key's oldest event if it leaves before an event at ``clock`` (as
    ``histogram.window_expire_next_inplace``); returns its bucket or -1."""
    count = ki[k, KI_R_COUNT]
    if count == 0:
        return -1
    kind = cfg[CFG_KIND]
    roff = ki[k, KI_R_OFF]
    cap = ki[k, KI_R_CAP]
    head = ki[k, KI_R_HEAD]
    if kind == KIND_COUNT:
        if count < cfg[CFG_WINDOW_N]:
            return -1
    elif kind == KIND_TIME:
        if not (clock - rf[1, roff + head] >= cfg[CFG_SECONDS]):
            return -1
    else:
        return -1
    code = rb[roff + head]
    b = np.int64(code >> 1)
    w = rf[0, roff + head]
    off = ki[k, KI_A_OFF]
    n = ki[k, KI_A_LEN]
    j = _find_atom(ab, off, n, b)
    cls = 0 if code & 1 else 1
    tot = KF_T_POS if cls == 0 else KF_T_NEG
    ncls = KI_N_POS if cls == 0 else KI_N_NEG
    an[cls, j] -= 1
    if an[cls, j] == 0:
        af[cls, j] = 0.0
    else:
        v = af[cls, j] - w
        af[cls, j] = 0.0 if v < 0.0 else v
    ki[k, ncls] -= 1
    if ki[k, ncls] == 0:
        kf[k, tot] = 0.0
    else:
        v = kf[k, tot] - w
        kf[k, tot] = 0.0 if v < 0.0 else v
    if an[0, j] == 0 and an[1, j] == 0:  # the bucket left the key's window: drop its atom
        for q in range(j, off + n - 1):
            _move_atom(ab, af, an, q, q + 1)
        ki[k, KI_A_LEN] = n - 1
    ki[k, KI_R_HEAD] = head + 1 if head + 1 < cap else 0
    ki[k, KI_R_COUNT] = count - 1
    return b


@jit_noalloc(forceinline=True)
def _size_class(cap):
    """The size class of a segment of ``cap`` slots: how many ``_grown`` steps lead to it from
    ``FIRST_CAP``; -1 for a capacity outside that sequence (a restored row's, a count window's full
    ring) or beyond the last class: such a segment is left as a gap until a compaction."""
    c = np.int64(FIRST_CAP)  # an int64 from the start: ``_grown`` compiles for int64 alone
    i = 0
    while c < cap:
        c = _grown(c)
        i += 1
    return i if c == cap and i < HOLE_CLASSES else -1


@jit_noalloc(forceinline=True)
def _has_hole(holes, row, cap):
    cls = _size_class(cap)
    return cls >= 0 and holes[row, cls] >= 0


@jit_noalloc(forceinline=True)
def _hole_next(ab, rf, row, off):
    return ab[off] if row == AR_ATOMS else np.int64(rf[0, off])


@jit_noalloc(forceinline=True)
def _take_segment(holes, ab, rf, arena, row, cap):
    """The offset of a segment of ``cap`` slots: a hole of its size class, else the arena's end."""
    cls = _size_class(cap)
    if cls >= 0:
        off = holes[row, cls]
        if off >= 0:
            holes[row, cls] = _hole_next(ab, rf, row, off)
            return off
    off = arena[row]
    arena[row] = off + cap
    return off


@jit_noalloc(forceinline=True)
def _give_segment(holes, ab, rf, row, off, cap):
    """Make the segment at ``off`` (``cap`` slots, no longer a key's) a hole of its size class."""
    cls = _size_class(cap)
    if cls < 0:
        return
    if row == AR_ATOMS:
        ab[off] = holes[row, cls]
    else:
        rf[0, off] = holes[row, cls]
    holes[row, cls] = off


@jit_noalloc(forceinline=True)
def _grow_atoms(ab, af, an, rf, ki, arena, holes, k):
    """Move the key's atoms to a larger segment (``_grown``): a hole of its size, else the arena's
    end (room checked); the slots past the atoms are zero, as at the arena's end."""
    cap = ki[k, KI_A_CAP]
    new_cap = _grown(cap)
    new_off = _take_segment(holes, ab, rf, arena, _HOLE_ATOMS, new_cap)
    off = ki[k, KI_A_OFF]
    n = ki[k, KI_A_LEN]
    for q in range(n):
        _move_atom(ab, af, an, new_off + q, off + q)
    for q in range(new_off + n, new_off + new_cap):
        ab[q] = 0
        af[0, q] = 0.0
        af[1, q] = 0.0
        an[0, q] = 0
        an[1, q] = 0
    if cap > 0:
        _give_segment(holes, ab, rf, _HOLE_ATOMS, off, cap)
    ki[k, KI_A_OFF] = new_off
    ki[k, KI_A_CAP] = new_cap


@jit_noalloc(forceinline=True)
def _grow_ring(ab, rb, rf, ki, arena, holes, k, new_cap):
    """Move the key's ring, oldest first, to a segment of ``new_cap`` slots: a hole of its size,
    else the arena's end (room checked); the slots past its events are zero."""
    cap = ki[k, KI_R_CAP]
    off = ki[k, KI_R_OFF]
    head = ki[k, KI_R_HEAD]
    count = ki[k, KI_R_COUNT]
    new_off = _take_segment(holes, ab, rf, arena, _HOLE_RING, new_cap)
    for q in range(count):
        src = head + q
        if src >= cap:
            src -= cap
        rb[new_off + q] = rb[off + src]
        for r in range(rf.shape[0]):
            rf[r, new_off + q] = rf[r, off + src]
    for q in range(new_off + count, new_off + new_cap):
        rb[q] = 0
        for r in range(rf.shape[0]):
            rf[r, q] = 0.0
    if cap > 0:
        _give_segment(holes, ab, rf, _HOLE_RING, off, cap)
    ki[k, KI_R_OFF] = new_off
    ki[k, KI_R_CAP] = new_cap
    ki[k, KI_R_HEAD] = 0


@jit_noalloc(forceinline=True)
def _add(cfg, kf, ki, ab, af, an, rb, rf, arena, holes, k, b, y, w, clock):
    """Add one event to key ``k``'s row (as ``histogram.window_add_inplace``); returns True if a
    decay renormalisation ran (every atom changed)."""
    kind = cfg[CFG_KIND]
    ws = w
    renormalised = False
    if (kind == KIND_DECAY_EVENTS) | (kind == KIND_DECAY_TIME):
        half_life = cfg[CFG_HALF_LIFE]
        exponent = (clock - kf[k, KF_T0]) / half_life
        if exponent > DECAY_RENORM_EXPONENT:
            m = np.floor(exponent)
            t0 = kf[k, KF_T0] + m * half_life
            rest = (clock - t0) / half_life
            if m <= DECAY_FORGET_EXPONENT and -1.0 <= rest <= DECAY_RENORM_EXPONENT:
                factor = 2.0 ** (-m)
            else:
                factor = math.pow(2.0, -exponent) if exponent <= DECAY_FORGET_EXPONENT else 0.0
                t0 = clock
                rest = 0.0
            off = ki[k, KI_A_OFF]
            for q in range(off, off + ki[k, KI_A_LEN]):
                af[0, q] *= factor
                af[1, q] *= factor
            kf[k, KF_T_POS] *= factor
            kf[k, KF_T_NEG] *= factor
            kf[k, KF_T0] = t0
            kf[k, KF_N_RENORM] += 1.0
            kf[k, KF_PU] *= factor  # the prior, taken in the old frame, in the new one
            exponent = rest
            renormalised = True
        elif exponent < -DECAY_RENORM_EXPONENT:
            kf[k, KF_T0] = clock
            exponent = 0.0
            renormalised = True
        ws = w * math.pow(2.0, exponent)
    off = ki[k, KI_A_OFF]
    n = ki[k, KI_A_LEN]
    j = _find_atom(ab, off, n, b)
    if j == off + n or ab[j] != b:  # a new atom: shift the ones above it
        if n == ki[k, KI_A_CAP]:
            _grow_atoms(ab, af, an, rf, ki, arena, holes, k)
            j = j - off + ki[k, KI_A_OFF]
            off = ki[k, KI_A_OFF]
        q = off + n
        while q > j:
            _move_atom(ab, af, an, q, q - 1)
            q -= 1
        ab[j] = b
        af[0, j] = 0.0
        af[1, j] = 0.0
        an[0, j] = 0
        an[1, j] = 0
        ki[k, KI_A_LEN] = n + 1
    if y > 0.5:
        af[0, j] += ws
        an[0, j] += 1
        kf[k, KF_T_POS] += ws
        ki[k, KI_N_POS] += 1
    else:
        af[1, j] += ws
        an[1, j] += 1
        kf[k, KF_T_NEG] += ws
        ki[k, KI_N_NEG] += 1
    if (kind == KIND_COUNT) | (kind == KIND_TIME):
        cap = ki[k, KI_R_CAP]
        count = ki[k, KI_R_COUNT]
        if count == cap:
            new_cap = _grown(cap)
            if kind == KIND_COUNT and new_cap > cfg[CFG_WINDOW_N]:
                new_cap = np.int64(cfg[CFG_WINDOW_N])
            _grow_ring(ab, rb, rf, ki, arena, holes, k, new_cap)
            cap = new_cap
        roff = ki[k, KI_R_OFF]
        tail = ki[k, KI_R_HEAD] + count
        if tail >= cap:
            tail -= cap
        rf[0, roff + tail] = ws
        if kind == KIND_TIME:
            rf[1, roff + tail] = clock
        rb[roff + tail] = 2 * b + (1 if y > 0.5 else 0)
        ki[k, KI_R_COUNT] = count + 1
    kf[k, KF_LAST_T] = clock
    kf[k, KF_N_LEARNED] += 1.0
    return renormalised


# ------------------------------------------------------------------------------------ the map
@jit_noalloc(forceinline=True)
def _shifted_rate(q, e):
    """The rate ``q`` with its odds multiplied by ``e``."""
    qe = q * e
    return qe / (qe + (1.0 - q))


@jit_noalloc(forceinline=True)
def _shifted_total(cfg, prior, e):
    """The prior's pseudo-positive total with every global block's odds multiplied by ``e``."""
    B = np.int64(cfg[CFG_B])
    runs = np.int64(cfg[CFG_PRIOR_RUNS])
    tot = 0.0
    for g in range(runs):
        tot += prior[3 * B + 3 + runs + g] * _shifted_rate(prior[3 * B + 3 + g], e)
    return tot


@jit_noalloc(forceinline=True)
def _sync_prior(cfg, kf, ki, prior, k):
    """The key takes the current prior, at its current stored unit, if it has not yet."""
    ver = np.int64(cfg[CFG_PRIOR_VER])
    if ki[k, KI_PVER] != ver:
        ki[k, KI_PVER] = ver
        kf[k, KF_PU] = stored_unit(cfg, kf, k)
        ki[k, KI_B_VALID] = 0
        a = cfg[CFG_SHIFT_A]
        e = 1.0
        if a > 0.0:
            e = (kf[k, KF_OBS] + a) / (cfg[CFG_SHIFT_RHO] * kf[k, KF_EXP] + a)
        kf[k, KF_ODDS] = e
        bp = cfg[CFG_BASE_POS]
        bn = cfg[CFG_BASE_NEG]
        if bp + bn > 0.0:
            # the LLR's prior odds: the global window's own, multiplied by the key's shift
            if e == 1.0:
                kf[k, KF_PRIOR_T_POS] = bp
                kf[k, KF_PRIOR_T_NEG] = bn
            else:
                shifted = e * bp
                kf[k, KF_PRIOR_T_POS] = (bp + bn) * (shifted / (shifted + bn))
                kf[k, KF_PRIOR_T_NEG] = (bp + bn) * (bn / (shifted + bn))
        elif e == 1.0:
            kf[k, KF_PRIOR_T_POS] = cfg[CFG_PRIOR_T_POS]
            kf[k, KF_PRIOR_T_NEG] = cfg[CFG_PRIOR_T_NEG]
        else:
            tp = _shifted_total(cfg, prior, e)
            kf[k, KF_PRIOR_T_POS] = tp
            kf[k, KF_PRIOR_T_NEG] = (cfg[CFG_PRIOR_T_POS] + cfg[CFG_PRIOR_T_NEG]) - tp


@jit_noalloc(forceinline=True)
def _next_unit(cfg, prior, pri, ab, af, off, end, x, q, u, e):
    """The next unit of the sweep from bucket ``x`` (next key atom ``q``): a key atom plus the
    prior on its bucket, or a run of the prior inside one global block between key atoms.

    Returns ``(first, last, pos, neg, x, q)``, the cursor advanced past it; ``first = -1`` at the end.
    """
    B = pri.shape[1]
    on = cfg[CFG_PRIOR_ON] > 0.5
    while x < B:
        nb = ab[q] if q < end else B
        if x < nb:
            if not on:
                x = nb
                continue
            g = pri[PR_SEG, x]
            if g < 0:  # a gap of the global map: no prior weight
                nx = pri[PR_NZ_NEXT, x]
                x = nx if nx < nb else nb
                continue
            hi = pri[PR_BLK_LAST, g]
            hi = hi if hi < nb - 1 else nb - 1
            lo = pri[PR_NZ_NEXT, x]
            top = pri[PR_NZ_PREV, hi]
            x = hi + 1
            if lo <= top:
                if e == 1.0:
                    p = (prior[top + 1] - prior[lo]) * u
                    n = (prior[B + 1 + top + 1] - prior[B + 1 + lo]) * u
                else:
                    wsum = (prior[2 * B + 2 + top + 1] - prior[2 * B + 2 + lo]) * u
                    p = wsum * _shifted_rate(prior[3 * B + 3 + g], e)
                    n = wsum - p
                if p + n > 0.0:
                    return lo, top, p, n, x, q
            continue
        p = af[0, q]
        n = af[1, q]
        if on:
            if e == 1.0:
                p = p + (prior[nb + 1] - prior[nb]) * u
                n = n + (prior[B + 1 + nb + 1] - prior[B + 1 + nb]) * u
            else:
                g = pri[PR_SEG, nb]
                if g >= 0:
                    wb = (prior[2 * B + 2 + nb + 1] - prior[2 * B + 2 + nb]) * u
                    pb = wb * _shifted_rate(prior[3 * B + 3 + g], e)
                    p = p + pb
                    n = n + (wb - pb)
        q += 1
        x = nb + 1
        if p + n > 0.0:
            return nb, nb, p, n, x, q
    return -1, -1, 0.0, 0.0, x, q


@jit_noalloc(forceinline=True)
def _whole_run(cfg, prior, pri, g, u, e):
    """Run ``g`` of the prior read whole, ``(first, last, pos, neg)``, as ``_next_unit`` gives it
    between key atoms outside it."""
    B = pri.shape[1]
    runs = np.int64(cfg[CFG_PRIOR_RUNS])
    whole = 3 * B + 3 + 2 * runs
    if e == 1.0:
        p = prior[whole + g] * u
        n = prior[whole + runs + g] * u
    else:
        wsum = prior[whole + 2 * runs + g] * u
        p = wsum * _shifted_rate(prior[3 * B + 3 + g], e)
        n = wsum - p
    return pri[PR_RUN_LO, g], pri[PR_RUN_TOP, g], p, n


@jit_noalloc(forceinline=True)
def _runs_increase(cfg, u, e):
    """Whether the prior's whole runs, at unit ``u`` and shift ``e``, increase with the margin
    (see "Whole runs")."""
    if cfg[CFG_FILL] < 0.5 or not (1e-100 < u < 1e100):
        return False
    if e == 1.0:
        return cfg[CFG_FILL_PLAIN] > 0.5
    return cfg[CFG_FILL_GAP] / (1.0 + e * cfg[CFG_FILL_ODDS]) > FILL_MARGIN


@jit_noalloc(forceinline=True)
def _run_at_or_after(pri, b, runs):
    """The first run of the prior that ends at or after bucket ``b`` (``runs``: none); the runs
    before it end before ``b``. Whole runs only (a gap holds no prior weight)."""
    g = pri[PR_SEG, b]
    if g < 0:  # a gap: the run of the next bucket with prior weight
        nx = pri[PR_NZ_NEXT, b]
        g = pri[PR_SEG, nx] if nx < pri.shape[1] else runs
    return g


@jit_noalloc(forceinline=True)
def _fill_runs(cfg, prior, pri, sb, sw, sp, g_from, g_to, u, e):
    """Push the whole runs ``g_from .. g_to - 1`` on the scratch stack at ``sp`` (none pools);
    returns the new depth."""
    for g in range(g_from, g_to):
        f, last, p, n = _whole_run(cfg, prior, pri, g, u, e)
        sb[0, sp] = f
        sb[1, sp] = last
        sw[0, sp] = p
        sw[1, sp] = n
        sp += 1
    return sp


@jit_noalloc(forceinline=True)
def _sweep_scratch(cfg, ki, ab, af, prior, pri, sb, sw, k, u, e):
    """PAV from scratch over key ``k``'s units into the scratch stack (``sb``: first, last;
    ``sw``: weights); returns the number of blocks. The whole runs outside the key's atoms are
    written, not swept, where their rates allow it (see "Whole runs")."""
    off = ki[k, KI_A_OFF]
    end = off + ki[k, KI_A_LEN]
    x = 0
    q = off
    sp = 0
    runs = np.int64(cfg[CFG_PRIOR_RUNS])
    fill = end > off and cfg[CFG_PRIOR_ON] > 0.5 and _runs_increase(cfg, u, e)
    if fill:  # the runs wholly left of the first atom
        g0 = _run_at_or_after(pri, ab[off], runs)
        sp = _fill_runs(cfg, prior, pri, sb, sw, _ZERO, _ZERO, g0, u, e)
        x = pri[PR_BLK_LAST, g0 - 1] + 1 if g0 > 0 else 0
    while True:
        q_before = q
        f, last, p, n, x, q = _next_unit(cfg, prior, pri, ab, af, off, end, x, q, u, e)
        if f < 0:
            return sp
        pooled = False
        if sp > 0 and _violates(sw[0, sp - 1], sw[1, sp - 1], p, n):
            sb[1, sp - 1] = last
            sw[0, sp - 1] = sw[0, sp - 1] + p
            sw[1, sp - 1] = sw[1, sp - 1] + n
            pooled = True
        else:
            sb[0, sp] = f
            sb[1, sp] = last
            sw[0, sp] = p
            sw[1, sp] = n
            sp += 1
        while sp >= 2 and _violates(sw[0, sp - 2], sw[1, sp - 2], sw[0, sp - 1], sw[1, sp - 1]):
            sb[1, sp - 2] = sb[1, sp - 1]
            sw[0, sp - 2] = sw[0, sp - 2] + sw[0, sp - 1]
            sw[1, sp - 2] = sw[1, sp - 2] + sw[1, sp - 1]
            sp -= 1
            pooled = True
        if fill and not pooled and q_before == q:
            # a run of the prior pushed alone: if it is run g read whole, the whole runs after it,
            # up to the next atom's, are pushed alone too
            g = pri[PR_SEG, f]
            if g >= 0 and f == pri[PR_RUN_LO, g] and last == pri[PR_RUN_TOP, g]:
                g_next = _run_at_or_after(pri, ab[q], runs) if q < end else runs
                if g_next > g + 1:
                    sp = _fill_runs(cfg, prior, pri, sb, sw, sp, g + 1, g_next, u, e)
                    x = pri[PR_BLK_LAST, g_next - 1] + 1
                if q == end:
                    return sp


@jit_noalloc(forceinline=True)
def _push(sb, sw, sp, first, last, p, n):
    """Push the block ``(first, last, p, n)`` on the scratch stack of depth ``sp``; returns the new depth."""
    sb[0, sp] = first
    sb[1, sp] = last
    sw[0, sp] = p
    sw[1, sp] = n
    return sp + 1


@jit_noalloc(forceinline=True)
def _block_at(qb, boff, blen, c):
    """The last of the blocks ``0 .. blen - 1`` (segment ``boff``) starting at or before bucket ``c``; -1 if none."""
    lo = 0
    hi = blen
    while lo < hi:
        mid = (lo + hi) >> 1
        if qb[0, boff + mid] <= c:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@jit_noalloc
def _resweep(cfg, ki, ab, af, prior, pri, qb, qf, sb, sw, k, u, e, c, a):
    """Repair key ``k``'s cached blocks after bucket ``c`` changed (``c = -1``: rebuild them all),
    resuming the sweep at the block holding bucket ``a``: ``c``, or ``c - 1`` where ``c``'s atom left
    the window (the prior's runs on both sides of it now form one unit); see "Block cache". The
    segment has room for every block (``_block_bound``)."""
    B = pri.shape[1]
    boff = ki[k, KI_B_OFF]
    blen = ki[k, KI_B_LEN]
    off = ki[k, KI_A_OFF]
    end = off + ki[k, KI_A_LEN]
    full = c < 0 or ki[k, KI_B_VALID] == 0
    region_end = B
    if full:
        r = -1
        blen = 0
    else:  # the last old block starting at or before c
        r = _block_at(qb, boff, blen, c)
        # the old blocks up to the one holding c are the region the change reaches
        region_end = c if r < 0 or qb[1, boff + r] <= c else qb[1, boff + r]
        if a < c:
            r = _block_at(qb, boff, r + 1, a)
    if r < 0:
        x = 0
        chain = -1
        qold = 0
    else:
        x = qb[0, boff + r]
        chain = r - 1
        qold = r
    q = _find_atom(ab, off, end - off, x)
    sp = _ZERO  # int64, not the literal 0: ``_push`` compiles once
    has_top = False
    tf = _ZERO
    tl = _ZERO
    tp = 0.0
    tn = 0.0
    stopped = False
    qs = qold  # the old blocks' cursor for the early stop
    while True:
        f, last, p, n, x, q = _next_unit(cfg, prior, pri, ab, af, off, end, x, q, u, e)
        if f < 0:
            break
        if has_top and f > region_end:
            # f starts an old block R right of the change: if the top pools with none of the
            # prefixes R's own sweep formed (ipav's margin test), R and every block after it are
            # as they were: keep them (the sweep from f would repeat R's operations bit for bit)
            while qs < blen and qb[0, boff + qs] < f:
                qs += 1
            if qs < blen and qb[0, boff + qs] == f and _stays_below(
                _INEXACT, tp, tn, p + n, qf[0, boff + qs], qf[1, boff + qs]
            ):
                sp = _push(sb, sw, sp, tf, tl, tp, tn)
                tf = f
                tl = qb[1, boff + qs]
                qold = qs
                stopped = True
                break
        if has_top and _violates(tp, tn, p, n):
            tl = last
            tp = tp + p
            tn = tn + n
        else:
            if has_top:
                sp = _push(sb, sw, sp, tf, tl, tp, tn)
            tf = f
            tl = last
            tp = p
            tn = n
            has_top = True
        while True:  # pool the top with the new stack below it, then with the kept blocks
            if sp >= 1 and _violates(sw[0, sp - 1], sw[1, sp - 1], tp, tn):
                tf = sb[0, sp - 1]
                tp = sw[0, sp - 1] + tp
                tn = sw[1, sp - 1] + tn
                sp -= 1
                continue
            if sp == 0 and chain >= 0 and _violates(qf[0, boff + chain], qf[1, boff + chain], tp, tn):
                tf = qb[0, boff + chain]
                tp = qf[0, boff + chain] + tp
                tn = qf[1, boff + chain] + tn
                chain -= 1
                continue
            break
        if last > region_end:  # the old block ending here, rebuilt alone: the rest repeats
            while qold < blen and qb[1, boff + qold] < last:
                qold += 1
            if qold < blen and qb[1, boff + qold] == last and qb[0, boff + qold] == tf:
                stopped = True
                break
    # write back: blocks 0..chain kept, the new ones, then (after a stop) the old tail
    base = chain + 1
    n_new = sp + (1 if has_top else 0)
    if stopped:
        keep_p = qf[0, boff + qold]  # the stopping block is unchanged (its old sums)
        keep_n = qf[1, boff + qold]
        tail = blen - qold - 1
        src = boff + qold + 1
        dst = boff + base + n_new
        if dst < src:
            for i in range(tail):
                qb[0, dst + i] = qb[0, src + i]
                qb[1, dst + i] = qb[1, src + i]
                qf[0, dst + i] = qf[0, src + i]
                qf[1, dst + i] = qf[1, src + i]
        elif dst > src:
            for i in range(tail - 1, -1, -1):
                qb[0, dst + i] = qb[0, src + i]
                qb[1, dst + i] = qb[1, src + i]
                qf[0, dst + i] = qf[0, src + i]
                qf[1, dst + i] = qf[1, src + i]
        tp = keep_p
        tn = keep_n
    else:
        tail = 0
    for i in range(sp):
        qb[0, boff + base + i] = sb[0, i]
        qb[1, boff + base + i] = sb[1, i]
        qf[0, boff + base + i] = sw[0, i]
        qf[1, boff + base + i] = sw[1, i]
    if has_top:
        qb[0, boff + base + sp] = tf
        qb[1, boff + base + sp] = tl
        qf[0, boff + base + sp] = tp
        qf[1, boff + base + sp] = tn
    ki[k, KI_B_LEN] = base + n_new + tail
    ki[k, KI_B_VALID] = 1


@jit_noalloc(forceinline=True)
def _ensure_blocks(cfg, ki, arena, qb, qf, k):
    """Give key ``k`` a block segment with room for ``_block_bound`` blocks (room checked); returns
    True if its blocks moved to a new, larger segment or were created (they are then rebuilt)."""
    bound = _block_bound(cfg, ki, k)
    if ki[k, KI_B_CAP] >= bound:
        return False
    new_cap = bound + (bound >> 1)
    new_off = arena[AR_BLOCKS]
    off = ki[k, KI_B_OFF]
    for i in range(ki[k, KI_B_LEN]):
        qb[0, new_off + i] = qb[0, off + i]
        qb[1, new_off + i] = qb[1, off + i]
        qf[0, new_off + i] = qf[0, off + i]
        qf[1, new_off + i] = qf[1, off + i]
    ki[k, KI_B_OFF] = new_off
    ki[k, KI_B_CAP] = new_cap
    arena[AR_BLOCKS] = new_off + new_cap
    return True


@jit_noalloc(forceinline=True)
def learn_one(cfg, kf, ki, ab, af, an, rb, rf, qb, qf, arena, holes, prior, pri, sb, sw, k, b, y, w, t, p_global,
              stamp):
    """Learn one event of key ``k`` (expiry, then the event) and repair its blocks; room checked."""
    _sync_prior(cfg, kf, ki, prior, k)
    kind = cfg[CFG_KIND]
    clock = t if (kind == KIND_TIME) | (kind == KIND_DECAY_TIME) else kf[k, KF_N_LEARNED]
    cached = ki[k, KI_B_CAP] > 0 and ki[k, KI_B_VALID] == 1
    u = kf[k, KF_PU]
    while True:
        atoms = ki[k, KI_A_LEN]
        gone = _expire_next(cfg, kf, ki, ab, af, an, rb, rf, k, clock)
        if gone < 0:
            break
        if cached:
            at = gone - 1 if ki[k, KI_A_LEN] < atoms and gone > 0 else gone  # its atom left
            _resweep(cfg, ki, ab, af, prior, pri, qb, qf, sb, sw, k, u, kf[k, KF_ODDS], gone, at)
    if _add(cfg, kf, ki, ab, af, an, rb, rf, arena, holes, k, b, y, w, clock):
        ki[k, KI_B_VALID] = 0
        cached = False
    if ki[k, KI_A_LEN] >= CACHE_MIN_ATOMS or ki[k, KI_B_CAP] > 0:
        u = kf[k, KF_PU]
        _ensure_blocks(cfg, ki, arena, qb, qf, k)
        if cached:
            _resweep(cfg, ki, ab, af, prior, pri, qb, qf, sb, sw, k, u, kf[k, KF_ODDS], b, b)
        else:
            _resweep(cfg, ki, ab, af, prior, pri, qb, qf, sb, sw, k, u, kf[k, KF_ODDS], _REBUILD, _REBUILD)
    kf[k, KF_STAMP] = stamp
    kf[k, KF_OBS] += w * y
    kf[k, KF_EXP] += w * p_global
    j = np.int64(0)
    for c in range(CFG_SHAPE_CUT, CFG_N):
        j += b > cfg[c]
    kf[k, KF_SHAPE_OBS + j] += w * y
    kf[k, KF_SHAPE_EXP + j] += w * p_global


@jit_noalloc(forceinline=True)
def _fitted_at(cen, bb, bw, o, sp, j):
    """Fitted value of bucket ``j`` (between the first and the last knot) by the blocks
    ``o .. o + sp - 1`` of ``bb`` (first, last) and ``bw`` (weights): its block's rate, or in a gap
    the interpolation by bucket centre between the neighbouring knots, clipped to them."""
    lo = o
    hi = o + sp - 1
    while lo < hi:  # the last block whose first knot is <= j
        mid = (lo + hi + 1) >> 1
        if bb[0, mid] <= j:
            lo = mid
        else:
            hi = mid - 1
    v_left = bw[0, lo] / (bw[0, lo] + bw[1, lo])
    if j <= bb[1, lo]:
        return v_left
    v_right = bw[0, lo + 1] / (bw[0, lo + 1] + bw[1, lo + 1])
    c_left = cen[bb[1, lo]]
    c_right = cen[bb[0, lo + 1]]
    v = v_left + (v_right - v_left) * ((cen[j] - c_left) / (c_right - c_left))
    v = v_left if v_left > v else v
    return v_right if v_right < v else v


@jit_noalloc(forceinline=True)
def _raw_proba(cfg, cen, bb, bw, o, sp, b, s):
    """The map's value at score ``s`` in bucket ``b`` (``ipav.pav_predict_one``)."""
    first = bb[0, o]
    last = bb[1, o + sp - 1]
    if cfg[CFG_LINEAR] < 0.5:
        return _fitted_at(cen, bb, bw, o, sp, last if b > last else (first if b < first else b))
    j = b if s >= cen[b] else b - 1
    if j < first:
        return _fitted_at(cen, bb, bw, o, sp, first)
    if j >= last:
        return _fitted_at(cen, bb, bw, o, sp, last)
    lo = _fitted_at(cen, bb, bw, o, sp, j)
    hi = _fitted_at(cen, bb, bw, o, sp, j + 1)
    p = lo + (hi - lo) * ((s - cen[j]) / (cen[j + 1] - cen[j]))
    p = lo if lo > p else p
    return hi if hi < p else p


@jit_noalloc(forceinline=True)
def _extremes(bw, o, sp, c):
    """``(lo, hi)``: the rates of the two end runs of the PAV augmented by one pseudo-positive
    below and one pseudo-negative above, each of weight ``c`` (``ipav.pav_refresh_extremes_inplace``)."""
    lp = bw[0, o] + c
    ln = bw[1, o]
    nxt = 1
    while nxt < sp and _violates(lp, ln, bw[0, o + nxt], bw[1, o + nxt]):
        lp = lp + bw[0, o + nxt]
        ln = ln + bw[1, o + nxt]
        nxt += 1
    if nxt == sp:
        v = lp / (lp + (ln + c))
        return v, v
    left_last = nxt - 1
    rp = bw[0, o + sp - 1]
    rn = bw[1, o + sp - 1] + c
    prv = sp - 2
    while prv != left_last and _violates(bw[0, o + prv], bw[1, o + prv], rp, rn):
        rp = bw[0, o + prv] + rp
        rn = bw[1, o + prv] + rn
        prv -= 1
    lo = lp / (lp + ln)
    hi = rp / (rp + rn)
    if prv == left_last and _violates(lp, ln, rp, rn):
        v = (lp + rp) / ((lp + rp) + (ln + rn))
        return v, v
    return lo, hi


@jit_noalloc(forceinline=True)
def _fallback(cfg, s):
    """Probability and LLR before any weight: the score for probability inputs, else 0.5."""
    p = 0.5
    if cfg[CFG_PROB_INPUTS] > 0.5:
        p = 1.0 if s > 1.0 else (0.0 if s < 0.0 else s)
    if cfg[CFG_FINITE] > 0.5:
        p = _NOT_SURE_LOW if p < _NOT_SURE_LOW else p
        p = _ONE_BELOW if p > _ONE_BELOW else p
    return p, 0.0


@jit_noalloc(forceinline=True)
def predict_key(cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, k, b, s):
    """``(proba, llr)`` of score ``s`` (bucket ``b``) by key ``k``'s pooled map (its cached blocks,
    or a sweep into the scratch)."""
    _sync_prior(cfg, kf, ki, prior, k)
    u = kf[k, KF_PU]
    if ki[k, KI_B_CAP] > 0 and ki[k, KI_B_VALID] == 0 and ki[k, KI_B_CAP] >= _block_bound(cfg, ki, k):
        # a key that keeps blocks, invalidated by a new prior or a decay renormalisation: rebuild
        # them here (the same sweep as into the scratch), so its next reads and repairs use them
        _resweep(cfg, ki, ab, af, prior, pri, qb, qf, sb, sw, k, u, kf[k, KF_ODDS], _REBUILD, _REBUILD)
    if ki[k, KI_B_CAP] > 0 and ki[k, KI_B_VALID] == 1:
        bb = qb
        bw = qf
        o = ki[k, KI_B_OFF]
        sp = ki[k, KI_B_LEN]
    else:
        bb = sb
        bw = sw
        o = 0
        sp = _sweep_scratch(cfg, ki, ab, af, prior, pri, sb, sw, k, u, kf[k, KF_ODDS])
    if sp == 0:
        return _fallback(cfg, s)
    p = _raw_proba(cfg, cen, bb, bw, o, sp, b, s)
    # the finite rule's pseudo-events: the key's own weigh as its window's share of the pooled fit
    # (all of it without a prior: T / (T + 0) is exactly 1), plus the prior's share of the global's
    t_key = kf[k, KF_T_POS] + kf[k, KF_T_NEG]
    t_prior = (cfg[CFG_PRIOR_T_POS] + cfg[CFG_PRIOR_T_NEG]) * u
    own = t_key / (t_key + t_prior) if t_key > 0.0 else 0.0
    c = cfg[CFG_PSEUDO] * stored_unit(cfg, kf, k) * own + cfg[CFG_PRIOR_PSEUDO] * u
    lo, hi = _extremes(bw, o, sp, c)
    q = lo if lo > p else p
    q = hi if hi < q else q
    out = q if cfg[CFG_FINITE] > 0.5 else p
    t_pos = kf[k, KF_T_POS] + kf[k, KF_PRIOR_T_POS] * u
    t_neg = kf[k, KF_T_NEG] + kf[k, KF_PRIOR_T_NEG] * u
    if cfg[CFG_BASE_PSEUDO] > 0.0:  # the prior's pseudo-events as the global window's events (see _sync_prior)
        c = cfg[CFG_PSEUDO] * stored_unit(cfg, kf, k) * own + cfg[CFG_BASE_PSEUDO] * u
    odds_inv = (t_neg + c) / (t_pos + c)
    r = (q * odds_inv) / (1.0 - q)
    if 0.0 < r < math.inf:
        return out, math.log(r)
    q = _ONE_BELOW if q > _ONE_BELOW else q
    return out, (math.log(q) - math.log1p(-q)) + math.log(odds_inv)


@jit_noalloc(forceinline=True)
def _answer(cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, k, buckets, scores, g_p, g_llr, out_p, out_llr, i):
    """Write event ``i``'s prediction: key ``k``'s pooled map, or the global map's (``g_p``,
    ``g_llr``) for a key without a state or that has not learned yet."""
    if k < 0 or kf[k, KF_N_LEARNED] == 0.0:
        out_p[i] = g_p[i]
        out_llr[i] = g_llr[i]
    else:
        p, llr = predict_key(cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, k, buckets[i], scores[i])
        out_p[i] = p
        out_llr[i] = llr


# events ahead whose key rows (``ki``, ``kf``) and, later, segments (atoms, ring, blocks, read
# through the prefetched rows) the kernel asks the processor to load: a light key's event
# touches a dozen cache lines no other event touches, and their misses otherwise stall in turn
ROWS_AHEAD = 12
SEGMENTS_AHEAD = 5


@jit_noalloc(forceinline=True)
def _prefetch_ahead(kf, ki, ab, af, an, rb, rf, qb, qf, slots, i, stop):
    """Prefetch hints for the events ``ROWS_AHEAD`` and ``SEGMENTS_AHEAD`` after event ``i``
    (compiled tier only; reads nothing but ``slots`` and the rows of the key ``SEGMENTS_AHEAD``
    ahead, and changes nothing)."""
    if i + ROWS_AHEAD < stop:
        k = slots[i + ROWS_AHEAD]
        if k >= 0:
            prefetch_2d(ki, k, 0)
            prefetch_2d(ki, k, KI_N - 1)
            prefetch_2d(kf, k, 0)
            prefetch_2d(kf, k, KF_N - 1)
    if i + SEGMENTS_AHEAD < stop:
        k = slots[i + SEGMENTS_AHEAD]
        if k >= 0:
            a = ki[k, KI_A_OFF] + (ki[k, KI_A_LEN] >> 1)  # where the atom search starts
            prefetch_1d(ab, a)
            prefetch_2d(af, 0, a)
            prefetch_2d(af, 1, a)
            prefetch_2d(an, 0, a)
            prefetch_2d(an, 1, a)
            cap = ki[k, KI_R_CAP]
            if cap > 0:
                off = ki[k, KI_R_OFF]
                head = ki[k, KI_R_HEAD]
                tail = head + ki[k, KI_R_COUNT]
                tail = tail - cap if tail >= cap else tail
                prefetch_1d(rb, off + head)  # the event an expiry removes
                prefetch_2d(rf, rf.shape[0] - 1, off + head)
                prefetch_1d(rb, off + tail)  # where the new event goes
                prefetch_2d(rf, 0, off + tail)
            if ki[k, KI_B_CAP] > 0:
                b = ki[k, KI_B_OFF]
                prefetch_2d(qb, 0, b)
                prefetch_2d(qb, 1, b)
                prefetch_2d(qf, 0, b)
                prefetch_2d(qf, 1, b)


@jit_noalloc
def run_ops(
    cfg, cen, kf, ki, ab, af, an, rb, rf, qb, qf, arena, holes, prior, pri, sb, sw, slots, buckets, scores,
    labels, weights, times, ops, g_p, g_llr, stamps, out_p, out_llr, start, stop,
):
    """Run operations ``start .. stop - 1`` (``ops``: 1 learn, 2 predict, 3 predict then learn) on the
    keys' rows; ``slots[i]`` the key's slot (-1: the key has no row: the global map's ``g_p``,
    ``g_llr`` answer). Returns :data:`DONE`, or the position of the first event whose learning
    needs more room in the arenas (nothing of that event done)."""
    hints = compiled_tier()
    for i in range(start, stop):
        if hints:
            _prefetch_ahead(kf, ki, ab, af, an, rb, rf, qb, qf, slots, i, stop)
        k = slots[i]
        op = ops[i]
        if op & 1:
            atoms, ring, blocks = room_needed(ki, cfg, holes, k)
            if (
                arena[AR_ATOMS] + atoms > ab.shape[0]
                or arena[AR_RING] + ring > rb.shape[0]
                or arena[AR_BLOCKS] + blocks > qb.shape[1]
            ):
                return i
        if op & 2:
            _answer(cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, k, buckets, scores, g_p, g_llr, out_p,
                    out_llr, i)
        if op & 1:
            learn_one(
                cfg, kf, ki, ab, af, an, rb, rf, qb, qf, arena, holes, prior, pri, sb, sw, k, buckets[i], labels[i],
                weights[i], times[i], g_p[i], stamps[i],
            )
    return DONE


@jit_noalloc
def predict_many(cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, slots, buckets, scores, g_p, g_llr, out_p,
                 out_llr):
    """``(proba, llr)`` of each (key slot, score) with the current state (no learning)."""
    for i in range(slots.shape[0]):
        _answer(cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, slots[i], buckets, scores, g_p, g_llr, out_p,
                out_llr, i)


@jit_noalloc
def between_key_moments(kf, n_keys, out):
    """``out = [K, sum O, sum E, sum E^2, sum O^2 / E]`` over the keys with ``E >= 1``: the sums of
    the DerSimonian–Laird moment estimate of the between-key variance."""
    for j in range(5):
        out[j] = 0.0
    for k in range(n_keys):
        e = kf[k, KF_EXP]
        if e >= 1.0:  # keys expecting less than one positive add noise, not information
            o = kf[k, KF_OBS]
            out[0] += 1.0
            out[1] += o
            out[2] += e
            out[3] += e * e
            out[4] += o * o / e


@jit_noalloc
def shape_moments(kf, n_keys, out):
    """``out = [sum (X - d), sum d, sum (O - 1)]`` over the keys with ``O >= 2`` observed positives
    in their shape bins: ``X`` the key's Pearson statistic of its bins' observed positives against
    its ``O`` spread as its expected ones (``sum_j (O_j - O pi_j)^2 / (O pi_j)``, ``pi_j = E_j / E``,
    over its ``d + 1`` bins with ``E_j > 0``): the sums of the moment estimate of the keys' shape
    departures (:func:`streamcal._keyed_shape.shape_bound`)."""
    for j in range(3):
        out[j] = 0.0
    for k in range(n_keys):
        o = 0.0
        e = 0.0
        for j in range(SHAPE_BINS):
            o += kf[k, KF_SHAPE_OBS + j]
            e += kf[k, KF_SHAPE_EXP + j]
        if o < 2.0 or not e > 0.0:
            continue
        x = 0.0
        d = -1.0
        for j in range(SHAPE_BINS):
            ej = kf[k, KF_SHAPE_EXP + j]
            if ej > 0.0:
                mu = o * (ej / e)
                dev = kf[k, KF_SHAPE_OBS + j] - mu
                x += dev * dev / mu
                d += 1.0
        out[0] += x - d
        out[1] += d
        out[2] += o - 1.0


@jit_noalloc(forceinline=True)
def _log_odds(p):
    """``log(p / (1 - p))`` with ``p`` kept within ``[2**-53, 1 - 2**-53]``: finite."""
    q = _NOT_SURE_LOW if p < _NOT_SURE_LOW else (_ONE_BELOW if p > _ONE_BELOW else p)
    return math.log(q) - math.log1p(-q)


@jit_noalloc
def prior_runs(values, weights, n, fine, coarse, share, starts):
    """The runs a prior of ``n`` increasing block rates ``values`` (weights ``weights``) is read in:
    block ``i`` opens a new run when its log-odds are more than ``coarse`` above the run's first
    block's, or more than ``fine`` above them once the run holds ``share`` of the total weight.
    Writes the first block of each run to ``starts``; returns the number of runs. A run spans at
    most ``coarse`` in log-odds, and at most ``fine`` unless it holds less than ``share`` of the
    weight: runs stay few however many blocks the map has, and narrow where the traffic is."""
    if n == 0:
        return 0
    total = 0.0
    for i in range(n):
        total += weights[i]
    need = share * total
    runs = 1
    starts[0] = 0
    first = _log_odds(values[0])
    held = weights[0]
    for i in range(1, n):
        lo = _log_odds(values[i])
        span = lo - first
        if span > coarse or (span > fine and held >= need):
            starts[runs] = i
            runs += 1
            first = lo
            held = 0.0
        held += weights[i]
    return runs


@jit_noalloc
def group_by_slot(slots, start, stop, counts, order):
    """Write to ``order`` (``stop - start`` long) the positions ``start .. stop - 1`` grouped by
    their slot in ``slots`` (-1 first, then by slot), each slot's positions in their order: a
    counting sort. ``counts``: zeros, at least the largest slot + 2 long (overwritten)."""
    for i in range(start, stop):
        counts[slots[i] + 1] += 1
    at = np.int64(0)
    for c in range(counts.shape[0]):
        m = counts[c]
        counts[c] = at
        at += m
    for i in range(start, stop):
        c = slots[i] + 1
        order[counts[c]] = i
        counts[c] += 1


@jit_noalloc(nogil=False)  # a per-event call: releasing the GIL would cost more than the kernel saves
def river_learn(packed, cfg, kf, ki, ab, af, an, rb, rf, qb, qf, arena, holes, prior, pri, sb, sw, k, s, y, w, t,
                stamp):
    """Learn one event of key slot ``k`` (score ``s``, label ``y`` as 0.0 or 1.0, weight ``w``, time
    ``t``, the global learned count after it ``stamp``): the global map, packed by
    ``ipav.pack_state``, predicts and learns it, then the key learns it as ``run_ops`` learns an
    event. Returns :data:`DONE`, or having changed nothing :data:`REFUSED` (the global state busy,
    the score not finite or out of range, the weight outside ``[0, MAX_WEIGHT]``), :data:`NEW_KEY`
    (``k < 0``) or :data:`NO_ROOM` (the arenas lack room for the key's event)."""
    if not (packed[PACK_BUSY] == 0.0 and math.isfinite(s) and _score_ok(packed, s) and 0.0 <= w <= MAX_WEIGHT):
        return REFUSED
    if k < 0:
        return NEW_KEY
    atoms, ring, blocks = room_needed(ki, cfg, holes, k)
    if arena[AR_ATOMS] + atoms > ab.shape[0] or arena[AR_RING] + ring > rb.shape[0] or (
        arena[AR_BLOCKS] + blocks > qb.shape[1]
    ):
        return NO_ROOM
    o_si, o_pf = int(packed[PACK_O_SI]), int(packed[PACK_O_PF])
    o_pi, end = int(packed[PACK_O_PI]), int(packed[PACK_END])
    sf, si = packed[PACK_HEADER:o_si], packed[o_si:o_pf].view(np.int64)
    pf, pi = packed[o_pf:o_pi], packed[o_pi:end].view(np.int64)
    runs = packed[end : end + RUNS_SIZE]
    b = pav_bucket_of(pf, s)
    p_global = pav_proba_out(pf, pav_predict_one(pf, b, s))
    pav_learn_one_inplace(sf, si, pf, pi, runs, b, y, w, t, sf[SF_KIND])
    learn_one(cfg, kf, ki, ab, af, an, rb, rf, qb, qf, arena, holes, prior, pri, sb, sw, k, b, y, w, t, p_global,
              stamp)
    return DONE


@jit_noalloc(nogil=False)  # a per-event call: releasing the GIL would cost more than the kernel saves
def river_predict(packed, cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, k, s):
    """``(proba, llr)`` of score ``s`` for key slot ``k`` as ``predict_many`` gives them, the global
    map (packed by ``ipav.pack_state``) answering for ``k < 0`` or a key that has not learned;
    ``(-1.0, nan)`` (never a probability), having changed nothing, when the global state is busy
    or the score is not finite or out of range."""
    if not (packed[PACK_BUSY] == 0.0 and math.isfinite(s) and _score_ok(packed, s)):
        return -1.0, math.nan
    pf = _map_section(packed)
    b = pav_bucket_of(pf, s)
    if k < 0 or kf[k, KF_N_LEARNED] == 0.0:
        p = pav_predict_one(pf, b, s)
        return pav_proba_out(pf, p), pav_llr_from_proba(pf, p)
    return predict_key(cfg, cen, kf, ki, ab, af, prior, pri, qb, qf, sb, sw, k, b, s)
