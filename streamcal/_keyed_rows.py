"""The keys' rows of :class:`streamcal.KeyedCalibrator`: slots, arenas, the prior, one key as values.

:class:`KeyedRows` is a base of the keyed calibrator (not used alone). It owns the per-key arrays
the keyed kernels (:mod:`streamcal._kernels.keyed`) read: a slot per key (``_kf``, ``_ki``), the
atom and ring arenas and their compaction, the prior taken from the global map, and the
conversions between a key's row, its exported values and a template calibrator.
"""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np

from streamcal import _prior
from streamcal._kernels import _config
from streamcal._kernels import histogram as _h
from streamcal._kernels import keyed as _kk
from streamcal._kernels import pav as _pav
from streamcal._keyed_shape import shape_bound, shape_cuts
from streamcal.isotonic.streaming import PAVCalibrator

__all__ = ["KeyedRows", "auto_strength", "calibrator_to_row", "ring_rows", "row_to_calibrator"]

# The prior follows the global map after 1, 2, 4, ..., PRIOR_EVERY learned events, then every
# PRIOR_EVERY or PRIOR_PER_KEY learned events per key that has learned, whichever is longer
# (PRIOR_EVERY, or half the global map's span where that is shorter: ``prior_floor``). A
# refresh makes each key that learns or reads before the next one resweep its blocks once, so the
# spacing in proportion to the keys bounds that cost per event whatever the number of keys.
PRIOR_EVERY = 1 << 14
PRIOR_PER_KEY = 2
# While the score prior holds, the prior's source is read in runs (KeyedRows._take_prior_source):
# at most RUN_FINE in log-odds wide where a run holds 1 / RUN_SHARE of the weight, RUN_COARSE elsewhere.
RUN_FINE = 0.2
RUN_COARSE = 1.0
RUN_SHARE = 64
# A sweep into the scratch writes the prior's runs outside a key's atoms instead of sweeping them
# where their rates allow (see "Whole runs" in streamcal._kernels.keyed): the same bits; off only
# to compare the two.
WHOLE_RUNS = True
# The keys' kernel visits a piece of at least GROUP_MIN events (with at most GROUP_SLOTS key slots
# per event: the grouping's counting sort passes over every slot) grouped by key (KeyedRows._kernel):
# shorter pieces hold too few events per key for the gathering to pay.
GROUP_MIN = 1 << 14
GROUP_SLOTS = 8
_SCALARS = ("t_pos", "t_neg", "last_t", "n_learned", "t0", "n_renorm", "stamp", "observed", "expected")
_KF_OF = dict(zip(_SCALARS, (_kk.KF_T_POS, _kk.KF_T_NEG, _kk.KF_LAST_T, _kk.KF_N_LEARNED, _kk.KF_T0,
                             _kk.KF_N_RENORM, _kk.KF_STAMP, _kk.KF_OBS, _kk.KF_EXP), strict=True))


def prior_floor(glob) -> int:
    """The least spacing of the prior's refreshes: ``PRIOR_EVERY`` learned events, or half the
    global map's span where that is shorter (a count window's size, a decay by events' half-life),
    so that the prior follows a global map that renews itself faster than ``PRIOR_EVERY``."""
    kind, n, _seconds, half_life = (float(v) for v in glob.window_histogram.window_code)
    span = n if kind == _h.KIND_COUNT else (half_life if kind == _h.KIND_DECAY_EVENTS else math.inf)
    half = span / 2.0
    return PRIOR_EVERY if not half < PRIOR_EVERY else max(1, int(half))


def ring_rows(kind: float) -> int:
    """Rows of the ring's float arena under a window of ``kind``: the weight, and a time window's
    clock (a count window's clocks are the key's last event numbers; see :mod:`streamcal._kernels.keyed`)."""
    return 2 if kind == _h.KIND_TIME else 1


def ring_clocks(count: int, n_learned: float) -> np.ndarray:
    """A count window's ring clocks: the numbers of the key's last ``count`` learned events."""
    return n_learned - count + np.arange(count, dtype=np.float64)


class KeyedRows:
    """Slots, arenas and the prior of a keyed calibrator (a base of
    :class:`streamcal.KeyedCalibrator`, not used alone)."""

    # ------------------------------------------------------------------ keys
    def _new_slot(self, key) -> int:
        if self._free:
            k = self._free.pop()
            self._slot_keys[k] = key
        else:
            k = len(self._slot_keys)
            self._slot_keys.append(key)
            if k >= self._kf.shape[0]:
                grow = max(16, 2 * self._kf.shape[0])
                self._kf = np.concatenate([self._kf, np.zeros((grow - self._kf.shape[0], _kk.KF_N))])
                self._ki = np.concatenate([self._ki, np.zeros((grow - self._ki.shape[0], _kk.KI_N), dtype=np.int64)])
        self._kf[k] = 0.0
        self._ki[k] = 0
        self._kf[k, _kk.KF_LAST_T] = -np.inf
        self._ki[k, _kk.KI_PVER] = -1  # takes the prior when first read or learned
        self._slot_of[key] = k
        return k

    def _new_slots(self, keys: list) -> np.ndarray:
        """Slots for ``keys`` (new, in order), as :meth:`_new_slot` gives them one by one."""
        out = np.empty(len(keys), dtype=np.int64)
        i = 0
        while self._free and i < len(keys):
            out[i] = self._new_slot(keys[i])
            i += 1
        rest = keys[i:]
        if not rest:
            return out
        start = len(self._slot_keys)
        stop = start + len(rest)
        if stop > self._kf.shape[0]:
            grow = max(16, 2 * self._kf.shape[0], stop)
            self._kf = np.concatenate([self._kf, np.zeros((grow - self._kf.shape[0], _kk.KF_N))])
            self._ki = np.concatenate([self._ki, np.zeros((grow - self._ki.shape[0], _kk.KI_N), dtype=np.int64)])
        self._slot_keys.extend(rest)
        self._kf[start:stop] = 0.0
        self._ki[start:stop] = 0
        self._kf[start:stop, _kk.KF_LAST_T] = -np.inf
        self._ki[start:stop, _kk.KI_PVER] = -1  # each takes the prior when first read or learned
        self._slot_of.update(zip(rest, range(start, stop), strict=True))
        out[i:] = np.arange(start, stop)
        return out

    def _slot_table(self, keys: list) -> np.ndarray:
        """The slot of each of ``keys`` (-1: the key has no state)."""
        return np.fromiter(map(self._slot_of.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys))

    def _admit_all(self, run, learn: np.ndarray) -> None:
        """Without ``max_keys`` (no eviction): a slot for every key without a state that learns in
        this call, in the order of their first learned events (as :meth:`_admit_keys` gives them
        one by one), and each event's slot in ``run.slots`` (-1 before its key's first learned
        event: the global map answers there)."""
        n = learn.size
        codes = run.kc.codes
        table = run.table
        first = np.full(table.size, n, dtype=np.int64)
        at = np.flatnonzero(learn)
        np.minimum.at(first, codes[at], at)
        new = np.flatnonzero((table < 0) & (first < n))
        new = new[np.argsort(first[new], kind="stable")]
        table[new] = self._new_slots([run.kc.keys[code] for code in new])
        fresh = np.zeros(table.size, dtype=bool)
        fresh[new] = True
        slots = table[codes]
        slots[fresh[codes] & (np.arange(n) < first[codes])] = -1
        run.slots[:] = slots

    def drop_key(self, key) -> None:
        """Forget ``key``'s state (its row, window and per-key sums): until it learns again it is
        served the global map, as a key never seen. KeyError if it has none. Not an eviction (a
        caller's choice, as an expiry by time to live), so ``evictions`` does not count it."""
        with self._lock:
            self._drop(self._slot(key))

    def _admit_keys(self, run, heap, push_next, pos: int, stop: int):
        """Give a slot to each key of ``heap`` (``(first learn position, code)``) that arrives before
        ``stop``, in order, evicting the least recently updated key first when ``max_keys`` is
        reached (an evicted key of this call is queued again by ``push_next`` from ``pos``).
        Returns ``(end, admitted)``: the events ``pos .. end - 1`` can run now (an arrival that
        needs an eviction after ``pos`` ends them), and the ``(position, code)`` admitted."""
        end = stop
        admitted = []
        limit = self._key_limit()
        while heap and heap[0][0] < end:
            if limit is not None and self.n_keys >= limit:
                if heap[0][0] > pos:
                    end = heap[0][0]  # run up to the arrival, then evict
                    break
                evicted = self._evict_lru()
                code = run.kc.code(evicted)
                if code >= 0:
                    run.table[code] = -1
                    push_next(code, pos)
            at, code = heapq.heappop(heap)
            run.table[code] = self._new_slot(run.kc.keys[code])
            admitted.append((at, code))
        return end, admitted

    def _key_limit(self) -> int | None:
        """The most keys that keep a state (None: no limit): ``max_keys``."""
        return self.max_keys

    def _evict_lru(self):
        """Evict the least recently updated key; returns it."""
        stamps = self._kf[: len(self._slot_keys), _kk.KF_STAMP].copy()
        stamps[self._free] = np.inf  # free slots hold no key
        k = int(np.argmin(stamps))
        key = self._slot_keys[k]
        self._drop(k)
        self._evictions += 1
        return key

    def _drop(self, k: int) -> None:
        key = self._slot_keys[k]
        self._slot_keys[k] = None
        del self._slot_of[key]
        self._free.append(k)
        self._kf[k] = 0.0
        self._ki[k] = 0

    # ------------------------------------------------------------------ the keys' kernel
    def _kernel(self, run, pos: int, end: int) -> int:
        """Run the keys' kernel on events ``pos .. end - 1`` of ``run`` (one prior). A piece of at
        least ``GROUP_MIN`` events, with at most ``GROUP_SLOTS`` slots per event of it, runs grouped
        by key: its events gathered in the order of their slots (each key's in their own order), run,
        and their outputs written back to their positions. A key's state depends only on its own
        events in order, the prior and their columns, so the outputs and each key's state are the
        same; a key's rows and segments stay in cache across its events. Returns ``end``."""
        n_slots = len(self._slot_keys)
        if end - pos < GROUP_MIN or n_slots > GROUP_SLOTS * (end - pos):
            self._run_keys(run.columns(), run.out_p, run.out_llr, pos, end)
            return end
        order = np.empty(end - pos, dtype=np.int64)
        counts = np.zeros(n_slots + 1, dtype=np.int64)
        _config.run(_kk.group_by_slot, end - pos, run.slots, pos, end, counts, order)
        out_p = run.out_p[order]  # a learn-only event's output stays as it is
        out_llr = run.out_llr[order]
        self._run_keys(tuple(c[order] for c in run.columns()), out_p, out_llr, 0, order.size)
        run.out_p[order] = out_p
        run.out_llr[order] = out_llr
        return end

    def _run_keys(self, columns: tuple, out_p: np.ndarray, out_llr: np.ndarray, pos: int, end: int) -> None:
        """``_kernels.keyed.run_ops`` on ``pos .. end - 1`` of ``columns``, growing the arenas where
        it stops for room (at the event it could not place) and resuming there."""
        while True:
            stopped = _config.run(
                _kk.run_ops, end - pos, self._cfg, self._cen, self._kf, self._ki, self._atoms_b, self._atoms_f,
                self._atoms_n, self._ring_b, self._ring_f, self._blocks_b, self._blocks_f, self._arena, self._holes,
                self._prior, self._pri, self._scratch_b, self._scratch_w, *columns, out_p, out_llr, pos, end,
            )
            if stopped == _kk.DONE:
                return
            pos = int(stopped)
            self._make_room(int(columns[0][pos]))

    # ------------------------------------------------------------------ arenas
    def _make_room(self, k: int) -> None:
        """Make room in the arenas that lack it for key ``k``'s next event, then leave each of them
        free room for a quarter of what it uses plus that event's need (so that stops stay rare: each
        one is paid for by the quarter's worth of events that fill the room it leaves). An arena with
        room is left as it is. A short arena is compacted first (every segment of it moves) only
        where its gaps hold more than an eighth of what it uses: the atom and ring arenas reuse a
        key's old segment as a hole of its size class (see ``_kernels.keyed``), so their gaps stay
        small and growing them alone is the cheaper way to room; the block arena has no holes."""
        needs = [int(v) for v in _config.run(_kk.room_needed, 0, self._ki, self._cfg, self._holes, k)]
        short = tuple(i for i, prefix in enumerate(("_atoms", "_ring", "_blocks"))
                      if int(self._arena[i]) + needs[i] > getattr(self, prefix + "_b").shape[-1])
        self._compact(tuple(i for i in short if self._gaps(i) > int(self._arena[i]) >> 3))
        used = self._arena
        self._reserve(*(needs[i] + (int(used[i]) >> 2) if i in short else needs[i] for i in range(3)))

    def _gaps(self, arena: int) -> int:
        """Slots of ``arena`` (``AR_ATOMS``, ``AR_RING``, ``AR_BLOCKS``) below its used end that no
        live key's segment holds: holes and the segments of dropped keys."""
        if arena == _kk.AR_BLOCKS:
            return int(self._arena[arena])  # always compacted: its segments have no size classes
        cap = _kk.KI_A_CAP if arena == _kk.AR_ATOMS else _kk.KI_R_CAP
        return int(self._arena[arena]) - int(self._ki[: len(self._slot_keys), cap].sum())

    def _has_ring(self) -> bool:
        kind = self._cfg[_kk.CFG_KIND]
        return kind in (_h.KIND_COUNT, _h.KIND_TIME)

    def _compact(self, arenas=(_kk.AR_ATOMS, _kk.AR_RING, _kk.AR_BLOCKS)) -> None:
        """Move every live key's segments to the start of the ``arenas`` (all three by default), in
        the order they lie (no gaps; in place, each segment moving left)."""
        ki = self._ki
        n = len(self._slot_keys)
        for off, cap, arrays, used in (
            (_kk.KI_A_OFF, _kk.KI_A_CAP, (self._atoms_b, self._atoms_f, self._atoms_n), _kk.AR_ATOMS),
            (_kk.KI_R_OFF, _kk.KI_R_CAP, (self._ring_b, self._ring_f), _kk.AR_RING),
            (_kk.KI_B_OFF, _kk.KI_B_CAP, (self._blocks_b, self._blocks_f), _kk.AR_BLOCKS),
        ):
            if used not in arenas:
                continue
            held = np.flatnonzero(ki[:n, cap] > 0)
            order = held[np.argsort(ki[held, off], kind="stable")]
            src = np.ascontiguousarray(ki[order, off])
            caps = np.ascontiguousarray(ki[order, cap])
            ends = np.cumsum(caps)
            total = int(ends[-1]) if ends.size else 0
            dst = (ends - caps).astype(np.int64)
            before = int(self._arena[used])
            for arr in arrays:
                rows = arr if arr.ndim == 2 else arr[None, :]
                _config.run(_kk.move_segments, total, rows, src, dst, caps, order.size)
                arr[..., total:before] = 0
            ki[order, off] = dst
            ki[:n, off][ki[:n, cap] == 0] = 0
            self._arena[used] = total
            if used != _kk.AR_BLOCKS:
                self._holes[used] = -1  # the holes were closed

    def _drop_block_caches(self) -> None:
        self._ki[:, list(_kk.KI_CACHE)] = 0
        self._arena[_kk.AR_BLOCKS] = 0
        if "_blocks_b" not in self.__dict__:
            self._blocks_b = np.zeros((2, 0), dtype=np.int64)
            self._blocks_f = np.zeros((2, 0))

    # ------------------------------------------------------------------ the prior
    def _strength_now(self, total: float) -> float:
        """The prior strength: the parameter, or under ``"auto"`` ``total``, the weight the global
        map rests on (as :meth:`_take_prior_source` returns it), at most the events at which a
        key's own shape is as reliable as the prior's (:func:`streamcal._keyed_shape.shape_bound`),
        with the keys' shift set from the between-key estimate (see "Shifted prior" in the kernels)."""
        if self.prior_strength != "auto":
            return float(self.prior_strength)
        k, s_o, s_e, s_e2, s_o2e = _moments(self._kf, len(self._slot_keys))
        rate = self._global_rate()
        self._shift_a = auto_strength(k, s_o, s_e, s_e2, s_o2e, rate, total) * rate
        self._shift_rho = s_o / s_e if s_e > 0.0 else 1.0
        return min(max(total, 0.0), shape_bound(self._kf, len(self._slot_keys), rate))

    def _odds_of(self, k: int) -> float:
        """Key ``k``'s prior odds multiplier: the one it took, or the one it takes when next read."""
        if self._ki[k, _kk.KI_PVER] == self._prior_ver:
            return float(self._kf[k, _kk.KF_ODDS])
        a, rho = self._cfg[_kk.CFG_SHIFT_A], self._cfg[_kk.CFG_SHIFT_RHO]
        if a <= 0.0:
            return 1.0
        return float((self._kf[k, _kk.KF_OBS] + a) / (rho * self._kf[k, _kk.KF_EXP] + a))

    def _global_rate(self) -> float:
        row = self._global.window_histogram.row()
        pos, tot = float(row.pos.sum()), float(row.pos.sum() + row.neg.sum())
        return pos / tot if tot > 0 else 0.0

    def _run_between_refreshes(self, run, counts: np.ndarray) -> None:
        """Run a call's events (``self._run_chunk``) in pieces that end at the events where the
        prior refreshes (``counts``: the global learned count after each event), refreshing it
        there: every event runs under the prior in force when it comes."""
        n = counts.size
        pos = 0
        while pos < n:
            stop = n
            if counts[-1] >= self._next_refresh:  # the piece ends at the event that reaches the refresh
                stop = max(pos + 1, int(np.searchsorted(counts, self._next_refresh)) + 1)
            self._run_chunk(run, pos, stop)
            pos = stop
            if self._n_learned >= self._next_refresh:
                self._refresh_prior()

    def _refresh_prior(self) -> None:
        """Take the prior from the global map as it is now; schedule the next refresh."""
        n = self._n_learned
        self._next_refresh = 2 * n if n < prior_floor(self._global) else n + self._refresh_interval()
        self._strength = self._strength_now(self._take_prior_source())
        self._prior_ver += 1
        self._build_prior()

    def _refresh_interval(self) -> int:
        """Learned events from a refresh (after the first ``prior_floor``) to the next: ``prior_floor``,
        or ``PRIOR_PER_KEY`` per key that has learned (a stamp), when that is longer and the keys
        pool. Every call ends its pieces at the refresh, so both faces count the same keys."""
        if self.prior_strength == 0:
            return prior_floor(self._global)
        n = len(self._slot_keys)
        learned = int(np.count_nonzero(self._kf[:n, _kk.KF_STAMP] > 0.0))
        return max(prior_floor(self._global), PRIOR_PER_KEY * learned)

    def _take_prior_source(self) -> float:
        """Keep what the prior reads of the global map as it is now (state: the prior lags the
        global map): the weight per bucket and the isotonic fit of the row the global map fits.
        Returns the weight the global map rests on: its window's, plus the score prior's
        pseudo-events while that holds.

        Without a score prior (its strength 0: ``prior=None``, or refuted by the data) that row is
        the global window's, and its exact fit has few blocks. While the score prior holds, it is
        the window plus the score prior's pseudo-events, ``kappa (n_b + 1)`` per bucket at the
        prior's rate (:mod:`streamcal._kernels.prior`): the prior then follows the score where
        the global window has few events or none, as the global map does, and keys lean on it
        from their first event. That fit follows the score bucket by bucket, so its blocks are
        read in runs (:func:`streamcal._kernels.keyed.prior_runs`, rate: the run's pooled rate):
        each spans at most ``RUN_FINE`` in log-odds where the traffic is (runs holding at least
        ``1 / RUN_SHARE`` of the weight), at most ``RUN_COARSE`` elsewhere. A key's map visits
        one run per block of the source, so its work stays in proportion to its own evidence."""
        glob = self._global
        row = glob.window_histogram.row()
        pos, neg = row.pos, row.neg
        kappa = glob.prior_strength
        if kappa > 0.0:
            pos, neg = _with_score_prior(glob, pos, neg, kappa)
        weight = np.ascontiguousarray(pos + neg)
        B = weight.size
        has = np.flatnonzero(weight > 0.0)
        fitted = np.zeros(B)
        first = last = np.zeros(0, dtype=np.int64)
        if has.size:
            ends = np.zeros(has.size, dtype=np.int64)
            values = np.zeros(has.size)
            sums = np.zeros(has.size)
            n = _config.run(_pav.pav_blocks_sorted, has.size, pos[has] / weight[has], weight[has], ends, values,
                            sums)
            if kappa > 0.0:
                n, ends, values = _runs_of(n, ends, values, sums, pos[has], weight[has])
            starts = np.concatenate([[0], ends[: n - 1]])
            first, last = has[starts], has[ends[:n] - 1]
            owner = np.repeat(np.arange(n), np.diff(np.concatenate([first, [B]])))
            fitted[first[0]:] = values[:n][owner]
        self._src_weight = weight
        self._src_fitted = fitted
        self._src_blocks = np.ascontiguousarray(np.stack([first, last]).astype(np.int64))
        # the window's own positives and negatives: the LLR's prior odds where the row holds the
        # score prior's pseudo-events, whose rates follow the score over every bucket (0, 0: none)
        self._src_base = np.array([row.pos.sum(), row.neg.sum()]) if kappa > 0.0 else np.zeros(2)
        return float(weight.sum()) if kappa > 0.0 else glob.window_weight

    def _build_prior(self) -> None:
        """The kernels' prior arrays, of strength ``_strength``, from the kept source."""
        m = self._strength
        B = int(self._cfg[_kk.CFG_B])
        weight = self._src_weight
        fitted = self._src_fitted
        total = float(weight.sum())
        cfg = self._cfg
        runs = self._src_blocks.shape[1] if m > 0.0 and total > 0.0 else 0
        self._prior = np.zeros(3 * B + 3 + 5 * runs)  # see _whole_runs for the last 3 * runs
        self._pri = np.empty((_kk.PR_N, B), dtype=np.int64)
        self._pri[_kk.PR_SEG] = -1
        self._pri[_kk.PR_BLK_LAST] = 0
        self._pri[_kk.PR_NZ_NEXT] = B
        self._pri[_kk.PR_NZ_PREV] = -1
        self._pri[_kk.PR_RUN_LO :] = 0
        cfg[_kk.CFG_FILL : _kk.CFG_FILL_ODDS + 1] = 0.0
        cfg[_kk.CFG_PRIOR_ON] = 0.0
        cfg[_kk.CFG_PRIOR_T_POS] = cfg[_kk.CFG_PRIOR_T_NEG] = cfg[_kk.CFG_PRIOR_PSEUDO] = 0.0
        cfg[_kk.CFG_BASE_POS] = cfg[_kk.CFG_BASE_NEG] = cfg[_kk.CFG_BASE_PSEUDO] = 0.0
        cfg[_kk.CFG_PRIOR_VER] = float(self._prior_ver)
        cfg[_kk.CFG_PRIOR_RUNS] = 0.0
        cfg[_kk.CFG_SHIFT_A] = cfg[_kk.CFG_SHIFT_RHO] = 0.0
        cfg[_kk.CFG_SHAPE_CUT : _kk.CFG_N] = shape_cuts(weight, fitted)
        if m <= 0.0 or total <= 0.0:
            return
        scale = m / total
        pp = scale * weight * fitted
        pn = scale * weight * (1.0 - fitted)
        np.cumsum(pp, out=self._prior[1 : B + 1])
        np.cumsum(pn, out=self._prior[B + 2 : 2 * B + 2])
        np.cumsum(scale * weight, out=self._prior[2 * B + 3 : 3 * B + 3])
        first, last = self._src_blocks
        self._prior[3 * B + 3 : 3 * B + 3 + runs] = fitted[first]
        cw = self._prior[2 * B + 2 : 3 * B + 3]
        self._prior[3 * B + 3 + runs : 3 * B + 3 + 2 * runs] = cw[last + 1] - cw[first]
        for i, (f, end) in enumerate(zip(first, last, strict=True)):
            self._pri[_kk.PR_SEG, f : end + 1] = i
        self._pri[_kk.PR_BLK_LAST, : last.size] = last
        has = weight > 0.0
        idx = np.arange(B)
        self._pri[_kk.PR_NZ_PREV] = np.maximum.accumulate(np.where(has, idx, -1))
        self._pri[_kk.PR_NZ_NEXT] = np.minimum.accumulate(np.where(has, idx, B)[::-1])[::-1]
        cfg[_kk.CFG_PRIOR_RUNS] = float(last.size)
        cfg[_kk.CFG_PRIOR_ON] = 1.0
        cfg[_kk.CFG_PRIOR_T_POS] = float(pp.sum())
        cfg[_kk.CFG_PRIOR_T_NEG] = float(pn.sum())
        cfg[_kk.CFG_PRIOR_PSEUDO] = scale * float(self._global.llr_pseudo_count)
        base = float(self._src_base.sum())
        if base > 0.0:
            # the prior's m pseudo-events stand for the global window's events in the LLR's prior odds,
            # as the global map's LLR reads its window's, not the score prior's pseudo-events
            cfg[_kk.CFG_BASE_POS] = m * (float(self._src_base[0]) / base)
            cfg[_kk.CFG_BASE_NEG] = m * (float(self._src_base[1]) / base)
            cfg[_kk.CFG_BASE_PSEUDO] = m * (float(self._global.llr_pseudo_count) / base)
        if self.prior_strength == "auto":
            cfg[_kk.CFG_SHIFT_A] = self._shift_a
            cfg[_kk.CFG_SHIFT_RHO] = self._shift_rho
        self._whole_runs(first, last)

    def _whole_runs(self, first: np.ndarray, last: np.ndarray) -> None:
        """The prior's runs read whole (see "Whole runs" in :mod:`streamcal._kernels.keyed`): each
        run's first and last bucket with prior weight (``pri``), its pseudo-positives,
        pseudo-negatives and weight over them as the sweep subtracts them (the end of ``prior``),
        and the margins that allow a sweep to write them instead of sweeping them (``cfg``)."""
        B = int(self._cfg[_kk.CFG_B])
        cfg, prior, pri = self._cfg, self._prior, self._pri
        runs = last.size
        if runs == 0:
            return
        start = np.concatenate([[0], last[:-1] + 1])
        lo = pri[_kk.PR_NZ_NEXT, start]
        top = pri[_kk.PR_NZ_PREV, last]
        inside = (lo >= first) & (lo <= last) & (top >= lo)
        lo = np.where(inside, lo, 0)
        top = np.where(inside, top, 0)
        pri[_kk.PR_RUN_LO, :runs] = lo
        pri[_kk.PR_RUN_TOP, :runs] = top
        whole = 3 * B + 3 + 2 * runs
        pos = prior[top + 1] - prior[lo]
        neg = prior[B + 1 + top + 1] - prior[B + 1 + lo]
        weight = prior[2 * B + 2 + top + 1] - prior[2 * B + 2 + lo]
        prior[whole : whole + runs] = pos
        prior[whole + runs : whole + 2 * runs] = neg
        prior[whole + 2 * runs : whole + 3 * runs] = weight
        tiny = 1e-200  # far from underflow at any unit the kernel fills at (1e-100 .. 1e100)
        if not (WHOLE_RUNS and inside.all() and (weight > tiny).all() and (pos + neg > tiny).all()):
            return
        cfg[_kk.CFG_FILL] = 1.0
        rate = pos / (pos + neg)
        margin = _kk.FILL_MARGIN
        cfg[_kk.CFG_FILL_PLAIN] = 1.0 if bool(np.all(rate[1:] - rate[:-1] > margin * rate[1:])) else 0.0
        q = prior[3 * B + 3 : 3 * B + 3 + runs]
        if runs >= 2 and bool(np.all(q[1:] > q[:-1])) and q[1] > 1e-100 and q[-2] < 1.0:
            odds = q[:-1] / (1.0 - q[:-1])
            with np.errstate(divide="ignore", invalid="ignore"):
                next_odds = q[1:] / (1.0 - q[1:])
                gap = np.where(next_odds == np.inf, 1.0, 1.0 - odds / next_odds)
            # the figures rounded toward safety: the gap down, the odds up, by far more than their error
            cfg[_kk.CFG_FILL_GAP] = max(float(gap.min()) * (1.0 - 1e-6), 0.0)
            cfg[_kk.CFG_FILL_ODDS] = float(odds.max()) * (1.0 + 1e-6)
        elif runs == 1:
            cfg[_kk.CFG_FILL_GAP] = 1.0

    # ------------------------------------------------------------------ one key as values
    def _export(self, k: int) -> dict:
        ki, kf = self._ki[k], self._kf[k]
        off, n = int(ki[_kk.KI_A_OFF]), int(ki[_kk.KI_A_LEN])
        out = {
            "bucket": self._atoms_b[off : off + n].copy(),
            "pos": self._atoms_f[0, off : off + n].copy(),
            "neg": self._atoms_f[1, off : off + n].copy(),
            "n_pos": self._atoms_n[0, off : off + n].copy(),
            "n_neg": self._atoms_n[1, off : off + n].copy(),
        }
        roff, cap, head, count = (int(ki[i]) for i in (_kk.KI_R_OFF, _kk.KI_R_CAP, _kk.KI_R_HEAD, _kk.KI_R_COUNT))
        order = roff + (head + np.arange(count)) % cap if cap else np.zeros(0, dtype=np.int64)
        code = self._ring_b[order]
        out["ring_bucket"] = (code >> 1).astype(np.int64)
        out["ring_weight"] = self._ring_f[0, order].copy()
        out["ring_label"] = (code & 1).astype(np.float64)
        for name, i in _KF_OF.items():
            out[name] = float(kf[i])
        if self._ring_f.shape[0] > 1:
            out["ring_clock"] = self._ring_f[1, order].copy()
        else:
            out["ring_clock"] = ring_clocks(count, out["n_learned"]) if count else np.zeros(0)
        return out

    def _import(self, k: int, row: dict) -> None:
        """Write a checked exported row into slot ``k`` (fresh segments at the arenas' ends)."""
        n = row["bucket"].size
        count = row["ring_bucket"].size
        kind = self._cfg[_kk.CFG_KIND]
        cap_r = 0
        if kind in (_h.KIND_COUNT, _h.KIND_TIME) and count:
            cap_r = max(count, _kk.FIRST_CAP)
        self._reserve(max(n, _kk.FIRST_CAP), cap_r)
        ki, kf = self._ki[k], self._kf[k]
        ki[:] = 0
        ki[_kk.KI_PVER] = -1
        off = int(self._arena[_kk.AR_ATOMS])
        cap_a = max(n, _kk.FIRST_CAP)
        self._atoms_b[off : off + n] = row["bucket"]
        self._atoms_f[0, off : off + n] = row["pos"]
        self._atoms_f[1, off : off + n] = row["neg"]
        self._atoms_n[0, off : off + n] = row["n_pos"]
        self._atoms_n[1, off : off + n] = row["n_neg"]
        self._arena[_kk.AR_ATOMS] = off + cap_a
        ki[_kk.KI_A_OFF], ki[_kk.KI_A_LEN], ki[_kk.KI_A_CAP] = off, n, cap_a
        roff = int(self._arena[_kk.AR_RING])
        if cap_r:
            self._ring_b[roff : roff + count] = 2 * row["ring_bucket"] + (row["ring_label"] > 0.5)
            self._ring_f[0, roff : roff + count] = row["ring_weight"]
            if self._ring_f.shape[0] > 1:
                self._ring_f[1, roff : roff + count] = row["ring_clock"]
            self._arena[_kk.AR_RING] = roff + cap_r
        ki[_kk.KI_R_OFF], ki[_kk.KI_R_CAP], ki[_kk.KI_R_COUNT] = roff, cap_r, count
        ki[_kk.KI_N_POS] = int(row["n_pos"].sum())
        ki[_kk.KI_N_NEG] = int(row["n_neg"].sum())
        for name, i in _KF_OF.items():
            kf[i] = row[name]

    def _reserve(self, atoms: int, ring: int, blocks: int = 0) -> None:
        """Room for ``atoms``, ``ring`` and ``blocks`` slots at the arenas' ends."""
        for prefix, need, used in (("_atoms", atoms, _kk.AR_ATOMS), ("_ring", ring, _kk.AR_RING),
                                   ("_blocks", blocks, _kk.AR_BLOCKS)):
            used = int(self._arena[used])
            size = getattr(self, prefix + "_b").shape[-1]
            if used + need <= size:
                continue
            # a quarter more than needed: the arenas hold the keys' whole windows, so slack costs
            # memory in proportion to the state (growth stays geometric: amortised O(1) per slot)
            new = max(1024, size + (size >> 2), used + need)
            for suffix in ("_b", "_f", "_n"):
                arr = getattr(self, prefix + suffix, None)
                if arr is None:
                    continue
                grown = np.zeros((*arr.shape[:-1], new), dtype=arr.dtype)
                grown[..., : arr.shape[-1]] = arr
                setattr(self, prefix + suffix, grown)

    def _key_calibrator(self, k: int) -> PAVCalibrator:
        """The template calibrator holding key ``k``'s window (a new object)."""
        return row_to_calibrator(self._export(k), self._global)


def _moments(kf: np.ndarray, n: int) -> tuple[float, ...]:
    out = np.zeros(5)
    _config.run(_kk.between_key_moments, n, kf, n, out)
    return tuple(float(v) for v in out)


def _with_score_prior(glob, pos: np.ndarray, neg: np.ndarray, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """A row (real units) plus the global calibrator's score prior of strength ``kappa``, as its
    kernels add it (:func:`streamcal._prior.pseudo_counts`, one floor event in every bucket)."""
    layout = glob.window_histogram.layout
    prior_pos, prior_neg = _prior.pseudo_counts(layout.centres, pos, neg, kappa, layout.probability_inputs,
                                                float(glob.llr_pseudo_count))
    return pos + prior_pos, neg + prior_neg


def _runs_of(n: int, ends: np.ndarray, values: np.ndarray, weights: np.ndarray, pos: np.ndarray,
             weight: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """The ``n`` blocks of a fit (``ends``, ``values``, ``weights`` as ``pav_blocks_sorted`` gives
    them, over the points ``pos``, ``weight``) read in runs (``prior_runs``): the runs' ends and
    pooled rates, increasing as the blocks' are."""
    starts = np.zeros(max(n, 1), dtype=np.int64)
    runs = _config.run(_kk.prior_runs, n, values, weights, n, RUN_FINE, RUN_COARSE, 1.0 / RUN_SHARE, starts)
    block_start = np.concatenate([[0], ends[: n - 1]])
    at = block_start[starts[:runs]]
    run_ends = np.concatenate([at[1:], [ends[n - 1]]]).astype(np.int64)
    rates = np.add.reduceat(pos, at) / np.add.reduceat(weight, at)
    return runs, run_ends, rates


def auto_strength(k: float, s_o: float, s_e: float, s_e2: float, s_o2e: float, rate: float, total: float) -> float:
    """The prior strength (pseudo-events) from the keys' observed ``O`` and expected ``E`` positives.

    A gamma-Poisson model: ``O_k ~ Poisson(E_k rho_k)``, ``rho_k`` of mean ``rho`` and variance
    ``tau2`` between keys. The DerSimonian–Laird moment estimate
    ``tau2 = (Q - rho (K - 1)) / (sum E - sum E^2 / sum E)``, ``Q = sum (O - rho E)^2 / E``, with
    the excess of ``Q`` over its mean without between-key variance counted only beyond one standard
    deviation of ``Q`` there, ``sqrt((K - 1) (rho + 2 rho^2))`` (a Poisson count ``O`` of mean
    ``mu = rho E`` has ``Var((O - mu)^2 / E) = (mu + 2 mu^2) / E^2``, at most ``rho + 2 rho^2``
    for the keys counted, ``E >= 1``): with few keys and few positives, ``Q``'s noise alone would
    give the keys large shifts. ``tau2`` gives the gamma prior's shape ``rho^2 / tau2``
    pseudo-positives, that is ``rho^2 / (tau2 * rate)`` pseudo-events at the global base rate
    ``rate``. No between-key variance seen (``tau2 <= 0``, or fewer than two keys): ``total``, the
    weight the global map rests on (the keys follow the global map).
    """
    cap = max(total, 0.0)
    if k < 2 or s_e <= 0.0 or rate <= 0.0:
        return cap
    rho = s_o / s_e
    q = s_o2e - rho * s_o
    denom = s_e - s_e2 / s_e
    excess = q - rho * (k - 1.0) - math.sqrt((k - 1.0) * (rho + 2.0 * rho * rho))
    tau2 = excess / denom if denom > 0.0 else 0.0
    if not tau2 > 0.0 or rho <= 0.0:
        return cap
    return min(cap, rho * rho / (tau2 * rate))


def calibrator_to_row(cal: PAVCalibrator) -> dict:
    """A template calibrator's window as an exported key row (stored units)."""
    sf, si = cal.window_histogram.arrays()
    B = int(si[_h.SI_B])
    pos = sf[_h.SF_HEADER : _h.SF_HEADER + B]
    neg = sf[_h.SF_HEADER + B : _h.SF_HEADER + 2 * B]
    npos = si[_h.SI_HEADER : _h.SI_HEADER + B]
    nneg = si[_h.SI_HEADER + B : _h.SI_HEADER + 2 * B]
    keep = np.flatnonzero((npos > 0) | (nneg > 0))
    ring_b, ring_y, ring_w, ring_t = cal.window_histogram.ring()
    return {
        "bucket": keep.astype(np.int64),
        "pos": pos[keep].copy(),
        "neg": neg[keep].copy(),
        "n_pos": npos[keep].copy(),
        "n_neg": nneg[keep].copy(),
        "ring_bucket": np.asarray(ring_b, dtype=np.int64),
        "ring_weight": np.asarray(ring_w, dtype=np.float64),
        "ring_label": np.asarray(ring_y, dtype=np.float64),
        "ring_clock": np.asarray(ring_t, dtype=np.float64),
        "t_pos": float(sf[_h.SF_T_POS]),
        "t_neg": float(sf[_h.SF_T_NEG]),
        "last_t": float(sf[_h.SF_LAST_T]),
        "n_learned": float(sf[_h.SF_N_LEARNED]),
        "t0": float(sf[_h.SF_T0]),
        "n_renorm": float(sf[_h.SF_N_RENORM]),
        "stamp": 0.0,
        "observed": 0.0,
        "expected": 0.0,
    }


def row_to_calibrator(row: dict, template: PAVCalibrator) -> PAVCalibrator:
    """A new template calibrator (``template``'s parameters, without its score prior: the keyed
    prior takes its place) holding an exported key row."""
    cal = template.clone({"prior": None}) if "prior" in template._get_params() else template.clone()
    hist = cal.window_histogram
    B = int(hist.n_buckets)
    count = row["ring_bucket"].size
    capacity = hist.ring_size()
    if hist.grows_ring:
        capacity = max(capacity, count)
    sf, si = _h.empty_state(B, capacity, hist.window_code)
    H, G = _h.SF_HEADER, _h.SI_HEADER
    b = row["bucket"]
    sf[H + b] = row["pos"]
    sf[H + B + b] = row["neg"]
    si[G + b] = row["n_pos"]
    si[G + B + b] = row["n_neg"]
    sf[_h.SF_T_POS], sf[_h.SF_T_NEG] = row["t_pos"], row["t_neg"]
    sf[_h.SF_LAST_T], sf[_h.SF_N_LEARNED] = row["last_t"], row["n_learned"]
    sf[_h.SF_T0], sf[_h.SF_N_RENORM] = row["t0"], row["n_renorm"]
    si[_h.SI_N_POS] = int(row["n_pos"].sum())
    si[_h.SI_N_NEG] = int(row["n_neg"].sum())
    if capacity:
        R = H + 2 * B
        sf[R : R + count] = row["ring_weight"]
        sf[R + capacity : R + capacity + count] = row["ring_label"]
        sf[R + 2 * capacity : R + 2 * capacity + count] = row["ring_clock"]
        si[G + 2 * B : G + 2 * B + count] = row["ring_bucket"]
        si[_h.SI_RING_COUNT] = count
    cal._hist.adopt_arrays(sf, si)
    cal._rebuild_map_after_merge(cal)  # a full sweep; whole-number shortcuts off (always exact)
    return cal


