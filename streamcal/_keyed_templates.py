"""Keyed calibration over any streaming binary calibrator: one template clone per key.

:class:`streamcal.KeyedCalibrator` runs a fixed-edge ``PAVCalibrator`` template in its own
compiled kernels over sparse rows. Every other template (``ISplineCalibrator``,
``PlattCalibrator``, ``GEVCalibrator``, ``VennAbersCalibrator``, a template with quantile bucket
edges, a calibrator of one's own), and with ``prior_strength=0`` a ``PAVCalibrator`` with its
score prior on (each key is then that template itself), takes this path:
``KeyedCalibrator(template)`` returns a
``streamcal.keyed.TemplateKeyedCalibrator`` (:class:`TemplateKeys` before ``KeyedCalibrator``),
which keeps one real clone of the template per key (without its score prior, ``prior=None``: the
keyed prior takes its place) and one clone learning every event, the global map. Each key runs
its own events through its clone's array face, so a key is the template itself, with its dense
histogram, its window and its refit policy.

Pooling works for templates whose map is refitted from the histogram
(:class:`streamcal._refit.RefitCalibrator`, with fixed bucket edges): while a key's clone runs,
its refits read its window plus the keyed prior's pseudo-counts, ``m w_b q_b / W`` positives and
``m w_b (1 - q_b) / W`` negatives in bucket ``b`` (the rule of the PAV path, with ``q_b`` the
global map at the bucket centre), and the finite LLR rule of the refit shares its pseudo-count
between the window and the prior as the PAV path does (:func:`pooled_finite_rule`), so that a key's
LLR, like its probability, tends to the global map's as the strength grows. A map fitted in the
PAV kernels (Venn–Abers, PAV over quantile edges) reads no histogram row to add them to, and a
template with quantile edges learns its own edges per key, so these templates keep independent
copies per key (``prior_strength`` ``"auto"`` or ``0``).
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import math
import numbers
import os
import warnings

import numpy as np

from streamcal import _state_check as c
from streamcal._kernels import keyed as _kk
from streamcal._keyed_shape import add_shape_sums
from streamcal._keyed_state import check_counters, check_key_params, check_slot_keys, upgrade_shape_sums
from streamcal._keys import check_key_kind
from streamcal._locking import LockedState
from streamcal._operations import OP_LEARN, OP_PREDICT
from streamcal._refit import RefitCalibrator
from streamcal._streaming import StreamingCalibrator
from streamcal._validation import as_1d_float
from streamcal.exceptions import MemoryBoundWarning, StateFileError

__all__ = ["TemplateKeys", "check_template_keyed_state", "key_prior", "pooled_finite_rule", "pooled_histogram"]


@contextlib.contextmanager
def pooled_histogram(cal: RefitCalibrator, prior_pos: np.ndarray | None, prior_neg: np.ndarray | None, rule=None):
    """While open, ``cal.histogram()`` (what its refits read) returns its window plus the prior's
    pseudo-counts (real units, one per bucket), and with ``rule`` (:func:`key_prior`'s) its refits
    read the finite LLR rule of :func:`pooled_finite_rule`; ``prior_pos is None``: nothing changes.
    The calibrator is the keyed calibrator's own (never handed out), and the overrides are instance
    attributes removed on leaving, so they are never copied, saved or seen outside."""
    if prior_pos is None:
        yield
        return
    own = cal.histogram
    window = [None, None]  # the window's rows at the last read (the refit's own)

    def window_plus_prior():
        centres, pos, neg = own()
        window[:] = pos, neg
        return centres, pos + prior_pos, neg + prior_neg

    def finite_rule(t_pos: float, t_neg: float, total: float) -> tuple[float, float]:
        n_pos, n_neg = float(window[0].sum()), float(window[1].sum())
        return pooled_finite_rule(float(cal.llr_pseudo_count), n_pos, n_neg, rule, total)

    cal.histogram = window_plus_prior
    if rule is not None:
        cal._finite_rule = finite_rule
    try:
        yield
    finally:
        del cal.histogram
        cal.__dict__.pop("_finite_rule", None)


def pooled_finite_rule(c: float, n_pos: float, n_neg: float, rule, total: float) -> tuple[float, float]:
    """``(logodds, weight)`` of a key's map fitted on ``total`` weight, its window (class totals
    ``n_pos``, ``n_neg``) plus ``m`` pseudo-events of the prior, as ``RefitCalibrator._finite_rule``
    gives them. The finite rule's pseudo-count ``c`` is shared as in the PAV path: the key's window
    carries ``c`` times its share ``n / (n + m)`` of the fit, and the prior ``m c / T`` of the global
    map's (``T`` the weight the global map was fitted on). The LLR's prior odds are the window's
    class totals plus ``M = m (W + 2c) / W`` pseudo-events (``W`` the global window's weight) split
    at the global map's own prior rate, ``sigmoid(L)`` (with its odds multiplied by the key's shift);
    the bounds and the I-spline's smoothing read the weight ``total c / c'`` whose add-``c``
    pseudo-events are the fit's ``c'``. As ``m`` grows, both tend to the global map's rule."""
    m, odds_pos, odds_neg, share = rule
    n = n_pos + n_neg
    c_own = c * (n / (n + m)) if n > 0.0 else 0.0
    logodds = math.log(n_pos + c_own + odds_pos) - math.log(n_neg + c_own + odds_neg)
    c_fit = c_own + m * share
    return logodds, (total * (c / c_fit) if c > 0.0 and c_fit > 0.0 else total)


def key_prior(prior_pos, prior_neg, fitted, rule, e: float):
    """``(pos, neg, rule)``: a key's prior pseudo-counts and finite-rule terms (see
    :func:`pooled_finite_rule`) with the global map's odds multiplied by ``e``, the key's shift
    (the shared ones where ``e`` is 1)."""
    if prior_pos is None or e == 1.0:
        return prior_pos, prior_neg, rule
    r = fitted * e / (fitted * e + (1.0 - fitted))
    weight = prior_pos + prior_neg
    pos = weight * r
    if rule is not None:
        m, odds_pos, odds_neg, share = rule
        shifted = e * odds_pos
        big = odds_pos + odds_neg
        rule = (m, big * (shifted / (shifted + odds_neg)), big * (odds_neg / (shifted + odds_neg)), share)
    return pos, weight - pos, rule


def prior_rule(m: float, src_weight: np.ndarray, src_rule: np.ndarray, c: float):
    """The finite-rule terms of a prior of ``m`` pseudo-events over the global window's weight
    ``src_weight`` (:func:`pooled_finite_rule`), from the global map's ``(logodds, low)``
    (``src_rule``; None where a state saved before it lacks it: the pooled fit's own rule)."""
    if src_rule.size != 2:
        return None
    logodds, low = float(src_rule[0]), float(src_rule[1])
    big = m * ((float(src_weight.sum()) + 2.0 * c) / float(src_weight.sum()))
    return m, big * _sigmoid(logodds), big * _sigmoid(-logodds), low / (1.0 - 2.0 * low)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0.0 else math.exp(x) / (1.0 + math.exp(x))


def _pools(template: StreamingCalibrator) -> bool:
    """Whether the keyed prior can pool ``template``'s keys: a map refitted from the histogram
    row (``histogram()``) over bucket edges every key shares."""
    return isinstance(template, RefitCalibrator) and template.window_histogram.built


def _independent(prior_strength, template: StreamingCalibrator) -> bool:
    """Whether every key is an independent copy of ``template``: ``prior_strength=0``, or
    ``"auto"`` over a template the keyed prior cannot pool."""
    return prior_strength == 0 or (prior_strength == "auto" and not _pools(template))


def _check_params(calibrator, key_key, prior_strength, max_keys) -> None:
    """The constructor's checks (the PAV path's, with any streaming binary calibrator as template)."""
    if calibrator is not None and not (isinstance(calibrator, StreamingCalibrator) and not calibrator._multiclass):
        got = (
            f"the class {calibrator.__name__}: pass an instance, such as {calibrator.__name__}()"
            if isinstance(calibrator, type)
            else type(calibrator).__name__
        )
        msg = (
            "`calibrator` must be a streamcal streaming binary calibrator (the template of every key's "
            f"state) or None; got {got}."
        )
        raise TypeError(msg)
    check_key_params(key_key, prior_strength, max_keys)


class _Arrivals:
    """The keys without a state that learn in a checked operation sequence: a heap of (next
    learn position, code), as the PAV path's loop orders them."""

    def __init__(self, codes: np.ndarray, n_codes: int, learn: np.ndarray, table: np.ndarray):
        learn_pos = np.flatnonzero(learn)
        learn_codes = codes[learn_pos]
        order = np.argsort(learn_codes, kind="stable")
        self.positions = learn_pos[order]  # each code's learn positions, in order
        self.starts = np.searchsorted(learn_codes[order], np.arange(n_codes + 1))
        self.heap: list = []
        for code in np.flatnonzero(table < 0).tolist():
            self.push_next(code, 0)

    def push_next(self, code: int, after: int) -> None:
        lo, hi = self.starts[code], self.starts[code + 1]
        j = lo + int(np.searchsorted(self.positions[lo:hi], after))
        if j < hi:
            heapq.heappush(self.heap, (int(self.positions[j]), code))


class TemplateKeys:
    """What :class:`streamcal.keyed.TemplateKeyedCalibrator` adds to :class:`streamcal.KeyedCalibrator`
    (a base placed before it, not used alone): one clone of the template per key, pooled toward the
    global map for templates refitted from the histogram.

    ``KeyedCalibrator(template)`` returns a ``TemplateKeyedCalibrator`` for every template other
    than a fixed-edge :class:`streamcal.PAVCalibrator`; the parameters, faces, inspection,
    eviction, persistence and merging are :class:`streamcal.KeyedCalibrator`'s.

    Parameters
    ----------
    calibrator
        The template: any streaming binary calibrator (``ISplineCalibrator``, ``PlattCalibrator``,
        ``GEVCalibrator``, ``VennAbersCalibrator``, ``PAVCalibrator`` with quantile edges, ...).
        Each key holds a clone of it with ``prior=None`` (where it has a score prior) and its
        own window, map and refit policy; the global map is a clone with the template's prior.
    key_key, score_key, max_keys
        As in :class:`streamcal.KeyedCalibrator`.
    prior_strength
        ``m``, the keyed prior's weight in pseudo-events, or ``"auto"`` (the DerSimonian–Laird
        estimate of the PAV path, from each key's observed positives against those the prior's
        map expects). Templates refitted from the histogram with fixed bucket edges (I-spline,
        Platt, GEV) take any strength; the others (Venn–Abers, PAV-derived maps, quantile edges)
        have nothing to pool into: ``"auto"`` and ``0`` give each key an independent copy of the
        template, and any other strength is refused.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal import KeyedCalibrator, PlattCalibrator
    >>> rng = np.random.default_rng(0)
    >>> keys = rng.integers(0, 3, size=3000)
    >>> scores = rng.uniform(0.01, 0.99, size=3000)
    >>> truth = np.clip(scores * np.array([0.5, 1.0, 1.5])[keys], 0, 1)   # key 0 over-scored, key 2 under
    >>> labels = rng.uniform(size=3000) < truth
    >>> cal = KeyedCalibrator(PlattCalibrator(refit_every=100))
    >>> type(cal).__name__
    'TemplateKeyedCalibrator'
    >>> proba, llr = cal.prequential(keys, scores, labels)
    >>> np.round(cal.predict_proba([0, 1, 2], [0.5, 0.5, 0.5]), 1).tolist()
    [0.3, 0.5, 0.7]
    """

    def __init__(
        self,
        calibrator=None,
        *,
        key_key: str = "key",
        score_key=None,
        prior_strength="auto",
        max_keys: int | None = None,
    ):
        _check_params(calibrator, key_key, prior_strength, max_keys)
        self.calibrator = calibrator
        self.key_key = key_key
        self.score_key = score_key
        self.prior_strength = prior_strength
        self.max_keys = max_keys
        self._init_lock()
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        from streamcal import ISplineCalibrator, PlattCalibrator, VennAbersCalibrator
        from streamcal.buckets import LogitGrid

        for params in super()._unit_test_params():
            yield {**params, "calibrator": ISplineCalibrator(buckets=LogitGrid(16), refit_every=7)}
            yield {**params, "calibrator": PlattCalibrator(buckets=LogitGrid(16)), "prior_strength": 20.0}
            yield {**params, "calibrator": VennAbersCalibrator(buckets=LogitGrid(16)), "prior_strength": 0}

    # ------------------------------------------------------------------ state
    def _template(self) -> StreamingCalibrator:
        from streamcal.isotonic.streaming import PAVCalibrator

        return self.calibrator if self.calibrator is not None else PAVCalibrator()

    def _reset(self) -> None:
        template = self._template()
        self._global = template.clone()
        if not _pools(template) and self.prior_strength not in (0, "auto"):
            why = (
                "its bucket edges are learned per key from a quantile warm-up, and pooling needs fixed bucket "
                "edges (streamcal.buckets.Edges)"
                if not template.window_histogram.built
                else "its map is fitted in its own kernels, not refitted from a histogram row"
            )
            msg = (
                f"`prior_strength` must be \"auto\" or 0 for this template, {type(template).__name__} ({why}: the "
                f"keyed prior has nothing to pool into; each key is an independent copy); got {self.prior_strength!r}."
            )
            raise ValueError(msg)
        self._kf = np.zeros((0, _kk.KF_N))
        self._ki = np.zeros((0, _kk.KI_N), dtype=np.int64)
        self._cals: list = []  # each slot's calibrator (None: free)
        self._pver = np.zeros(0, dtype=np.int64)  # the prior version each key's map took (-1: none)
        self._slot_keys: list = []
        self._n_learned = 0
        self._evictions = 0
        self._strength = 0.0
        self._shift_a = 0.0  # the keys' shift (KeyedRows._strength_now)
        self._shift_rho = 1.0
        self._next_refresh = 1
        self._prior_ver = 0
        self._take_prior_source()
        self._rebuild_caches()

    def _key_template(self) -> StreamingCalibrator:
        """A fresh key calibrator: the template without its score prior when the keyed prior takes
        its place, the template as it is (its score prior included) when keys do not pool."""
        template = self._template()
        if _independent(self.prior_strength, template) or "prior" not in template._get_params():
            return template.clone()
        return template.clone({"prior": None})

    def _rebuild_caches(self) -> None:
        self._new_key = self._key_template()
        self._pooling = _pools(self._new_key)
        self._prior_used = self._pooling and self.prior_strength != 0
        # fixed edges (no quantile warm-up): every clone has the global's layout and buckets
        self._shared_edges = self._new_key.window_histogram.built
        self._slot_of = {key: k for k, key in enumerate(self._slot_keys) if key is not None}
        self._free = [k for k, key in enumerate(self._slot_keys) if key is None]
        self._per_key_bytes = max(1, int(KEY_GROWTH * _array_bytes(self._new_key)))
        memory = machine_memory()  # read once: the bound is checked at every admission of keys
        self._memory_keys = None if memory is None else max(1, int(MEMORY_SHARE * memory) // self._per_key_bytes)
        self._memory_warned = False
        self._build_prior()

    _CACHES = (
        "_per_key_bytes",
        "_memory_keys",
        "_memory_warned",
        "_pooling",
        "_prior_used",
        "_shared_edges",
        "_new_key",
        "_slot_of",
        "_free",
        "_prior_pos",
        "_prior_neg",
        "_prior_on",
        "_prior_rule",
    )
    _UNSAVED = ("_lock", *_CACHES)
    # what replace_global takes from a keyed source: the global map and the prior it gives
    _GLOBAL_STATE = ("_global", "_n_learned", "_next_refresh", "_strength", "_src_weight", "_src_fitted", "_src_rule",
                     "_shift_a", "_shift_rho")

    def __getstate__(self):
        state = LockedState.__getstate__(self)
        n = len(state["_slot_keys"])
        state["_slot_keys"] = list(state["_slot_keys"])
        state["_cals"] = list(state["_cals"])
        state["_kf"] = np.ascontiguousarray(state["_kf"][:n])
        state["_ki"] = np.zeros((n, _kk.KI_N), dtype=np.int64)
        state["_pver"] = np.ascontiguousarray(state["_pver"][:n])
        if not state["_src_rule"].size:  # no finite rule to keep: saved as before it existed
            del state["_src_rule"]
        return state

    def _check_loaded_state(self) -> None:
        check_template_keyed_state(self)

    def __setstate__(self, state):
        self.__dict__.update(state := _upgraded(state))
        self._init_lock()
        for name, value in state.items():
            if type(value) is np.ndarray:
                self.__dict__[name] = np.array(value, order="C", copy=True)
        self._check_loaded_state()
        self._rebuild_caches()

    # ------------------------------------------------------------------ slots
    def _new_slot(self, key) -> int:
        k = super()._new_slot(key)
        self._kf[k, _kk.KF_ODDS] = 1.0  # the global map's odds until the next refresh
        cal = self._new_key.clone()
        if k == len(self._cals):
            self._cals.append(cal)
        else:
            self._cals[k] = cal
        if k >= self._pver.size:
            self._pver = np.concatenate([self._pver, np.full(max(16, self._pver.size), -1, dtype=np.int64)])
        self._pver[k] = -1
        return k

    def _drop(self, k: int) -> None:
        super()._drop(k)
        self._cals[k] = None

    def _key_limit(self) -> int | None:
        """``max_keys``, or without it the keys whose clones fill ``MEMORY_SHARE`` of the machine's
        memory, read when the calibrator was made or loaded (None where the memory is unknown)."""
        return self.max_keys if self.max_keys is not None else self._memory_keys

    def _evict_lru(self):
        if self.max_keys is None and not self._memory_warned:
            self._memory_warned = True
            warnings.warn(_memory_message(self.n_keys, self._new_key, self._per_key_bytes), MemoryBoundWarning, 2)
        return super()._evict_lru()

    # ------------------------------------------------------------------ the prior
    def _take_prior_source(self) -> float:
        """Keep what the prior reads of the global map as it is now: the window's weight per
        bucket and the served map at the bucket centres (read from a copy, so that the global
        calibrator's own refits are those of the template alone). Returns the global window's
        weight, which the source rests on."""
        glob = self._global
        if not (_pools(glob) and self.prior_strength != 0):
            self._src_weight, self._src_fitted, self._src_rule = np.zeros(0), np.zeros(0), np.zeros(0)
            return glob.window_weight
        centres, pos, neg = glob.histogram()
        self._src_weight = np.ascontiguousarray(pos + neg)
        served = copy.deepcopy(glob)
        self._src_fitted = np.ascontiguousarray(served.predict_proba(centres), dtype=np.float64)
        self._src_rule = np.array(served._llr_rule())  # the finite LLR rule of the map it served
        return glob.window_weight

    def _build_prior(self) -> None:
        """The prior's pseudo-counts (real units), of strength ``_strength``, from the kept source."""
        m = self._strength
        weight = self._src_weight
        total = float(weight.sum())
        self._prior_on = bool(self._pooling and m > 0.0 and total > 0.0)
        self._prior_pos = self._prior_neg = self._prior_rule = None
        if self._prior_on:
            scale = m / total
            self._prior_pos = scale * weight * self._src_fitted
            self._prior_neg = scale * weight * (1.0 - self._src_fitted)
            self._prior_rule = prior_rule(m, weight, self._src_rule, float(self._global.llr_pseudo_count))

    def _strength_now(self, total: float) -> float:
        """As the PAV path's; 0 where keys are independent copies (nothing to pool into)."""
        return 0.0 if _independent(self.prior_strength, self._template()) else super()._strength_now(total)

    def _refresh_prior(self) -> None:
        """As the PAV path's, and every key takes its prior's odds multiplier now (a key created
        before the next refresh holds 1: its prior is the global map's)."""
        super()._refresh_prior()
        self._take_key_odds()

    def _take_key_odds(self) -> None:
        """Every key takes its prior's odds multiplier from the shift in force."""
        n = len(self._slot_keys)
        kf = self._kf[:n]
        kf[:, _kk.KF_ODDS] = 1.0
        if self.prior_strength == "auto" and self._prior_on and self._shift_a > 0.0:
            a = self._shift_a
            kf[:, _kk.KF_ODDS] = (kf[:, _kk.KF_OBS] + a) / (self._shift_rho * kf[:, _kk.KF_EXP] + a)

    def _odds_of(self, k: int) -> float:
        return float(self._kf[k, _kk.KF_ODDS])

    def _key_prior(self, k: int):
        """Key ``k``'s prior pseudo-counts and finite-rule terms, with the key's odds multiplier."""
        return key_prior(self._prior_pos, self._prior_neg, self._src_fitted, self._prior_rule, self._kf[k, _kk.KF_ODDS])

    def _current_pver(self) -> int:
        return self._prior_ver if self._prior_on else -1

    # ------------------------------------------------------------------ inspection and one key
    def key_state(self, key):
        """A copy of ``key``'s own calibrator: a template clone (``prior=None``) holding the key's
        window, its map refitted from that window alone (without the keyed prior). KeyError if
        the key has no state."""
        with self._lock:
            k = self._slot(key)
            out = copy.deepcopy(self._cals[k])
            if self._pver[k] != -1:  # its map holds the keyed prior: refit it from the window alone
                out._rebuild_map_after_merge(out)
            return out

    def export_key(self, key) -> dict:
        """``key``'s state as plain values: ``"state"``, its calibrator's saved form
        (:func:`streamcal.persist.to_bytes`), and the key's ``"stamp"``, ``"observed"`` and
        ``"expected"`` sums."""
        from streamcal.persist import to_bytes

        with self._lock:
            k = self._slot(key)
            kf = self._kf[k]
            return {
                "state": to_bytes(self._cals[k], allow_pickle=False),
                "stamp": float(kf[_kk.KF_STAMP]),
                "observed": float(kf[_kk.KF_OBS]),
                "expected": float(kf[_kk.KF_EXP]),
            }

    def import_key(self, key, state: dict) -> None:
        """Replace (or create) ``key``'s state by ``state`` (:meth:`export_key`'s form), checked first."""
        from streamcal.persist import from_bytes

        with self._lock:
            key = self._checked_key(key, "key")
            if type(state) is not dict or set(state) != {"state", "stamp", "observed", "expected"}:
                msg = "`state` must be a dict of `state`, `stamp`, `observed` and `expected` (export_key's form)."
                raise ValueError(msg)
            try:
                cal = from_bytes(state["state"])
                _need_like(cal, self._new_key, "state")
            except (StateFileError, TypeError, ValueError) as exc:
                msg = f"`state` must hold a key calibrator of this template: {exc}"
                raise ValueError(msg) from None
            sums = []
            for name in ("stamp", "observed", "expected"):
                value = state[name]
                if not (isinstance(value, numbers.Real) and np.isfinite(value) and value >= 0):
                    msg = f"`state[{name!r}]` must be a finite number >= 0; got {value!r}."
                    raise ValueError(msg)
                sums.append(float(value))
            check_key_kind(self._slot_of, key)
            k = self._slot_of.get(key)
            if k is None:
                if self._key_limit() is not None and self.n_keys >= self._key_limit():
                    self._evict_lru()
                k = self._new_slot(key)
            self._cals[k] = cal
            self._kf[k, _kk.KF_STAMP], self._kf[k, _kk.KF_OBS], self._kf[k, _kk.KF_EXP] = sums
            self._kf[k, _kk.KF_SHAPE_OBS : _kk.KF_N] = 0.0  # export_key's form holds no shape sums
            self._pver[k] = -2 if self._pooling and self.prior_strength != 0 else -1

    # ------------------------------------------------------------------ array face
    def _scores(self, scores):
        layout = self._global.window_histogram.layout
        if self._shared_edges:
            return super()._scores(scores)
        s = as_1d_float(scores, "scores", allow_empty=True, copy=False)
        bad = ~((s >= layout.score_low) & (s <= layout.score_high))  # NaN and infinities too
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(self._global._bad_score_message(float(s[i]), "scores", f" at position {i}", scores))
        return s, None

    def _predict(self, keys, scores):
        s, b = self._scores(scores)
        kc = self._codes(keys, s.size)
        table = np.array([self._slot_of.get(key, -1) for key in kc.keys], dtype=np.int64)
        slots = table[kc.codes] if s.size else np.zeros(0, dtype=np.int64)
        out_p = np.empty(s.size)
        out_llr = np.empty(s.size)
        alone = np.flatnonzero(slots < 0)
        if alone.size:
            out_p[alone], out_llr[alone] = self._predict_with(self._global, s[alone], _take(b, alone))
        for k, at in _groups(slots):
            cal = self._cals[k]
            self._follow_prior(k, lazy_only=True)
            with pooled_histogram(cal, *self._key_prior(k)):
                out_p[at], out_llr[at] = self._predict_with(cal, s[at], _take(b, at))
        return out_p, out_llr

    def predict_interval(self, keys, scores) -> tuple[np.ndarray, np.ndarray]:
        """A Venn–Abers template's ``(p0, p1)`` of each (key, score) with the current state: the
        key's own calibrator's interval, or the global calibrator's for a key without a state.
        TypeError for a template without intervals."""
        from streamcal.isotonic.venn_abers import VennAbersCalibrator

        if not isinstance(self._global, VennAbersCalibrator):
            msg = f"predict_interval needs a VennAbersCalibrator template; this one is {type(self._global).__name__}."
            raise TypeError(msg)
        with self._lock:
            s, _b = self._scores(scores)
            kc = self._codes(keys, s.size)
            table = np.array([self._slot_of.get(key, -1) for key in kc.keys], dtype=np.int64)
            slots = table[kc.codes] if s.size else np.zeros(0, dtype=np.int64)
            p0 = np.empty(s.size)
            p1 = np.empty(s.size)
            alone = np.flatnonzero(slots < 0)
            if alone.size:
                p0[alone], p1[alone] = self._global.predict_interval(s[alone])
            for k, at in _groups(slots):
                p0[at], p1[at] = self._cals[k].predict_interval(s[at])
            return p0, p1

    def _predict_with(self, cal, s, b):
        if b is None:
            s, b = cal._check_scores_and_buckets(s)
        return cal._predict_both(s, b)

    def _follow_prior(self, k: int, *, lazy_only: bool) -> None:
        """Have key ``k``'s map take the prior in force, if it moved since the key's last fit:
        a lazily refitted map refits at its next prediction (also when read); a map refitted
        every ``refit_every`` labels refits now (only before a label: reads change nothing)."""
        cur = self._current_pver()
        if self._pver[k] == cur:
            return
        cal = self._cals[k]
        lazy = getattr(cal, "refit_every", None) is None
        if lazy_only and not lazy:
            return
        with pooled_histogram(cal, *self._key_prior(k)):
            cal._rebuild_map_after_merge(cal)
        self._pver[k] = cur

    # ------------------------------------------------------------------ the operation loop
    def _run_checked(self, kc, ops, s, b, y, w, t):
        n = s.size
        out_p = np.full(n, np.nan)
        out_llr = np.full(n, np.nan)
        wanted = self.__dict__.get("_intervals")  # a call that keeps Venn–Abers intervals
        if wanted is not None:
            wanted.append((np.full(n, np.nan), np.full(n, np.nan)))
        if n == 0:
            return out_p, out_llr
        learn = (ops & OP_LEARN) != 0
        counts = self._n_learned + np.cumsum(learn)  # the global learned count after each event
        table = np.array([self._slot_of.get(key, -1) for key in kc.keys], dtype=np.int64)
        run = _Run(kc, ops, s, b, y, w, t, out_p, out_llr, counts, table, learn)
        if wanted is not None:
            run.p0, run.p1 = wanted[-1]
        if not self._prior_used:  # no prior to follow: one chunk, the refresh schedule kept as it goes
            self._run_chunk(run, 0, n)
            learned = self._n_learned
            while self._next_refresh <= learned:
                self._n_learned = self._next_refresh
                self._refresh_prior()
            self._n_learned = learned
            return out_p, out_llr
        self._run_between_refreshes(run, counts)
        return out_p, out_llr

    def _run_chunk(self, run, pos: int, stop: int) -> None:
        """Events ``pos .. stop - 1`` under one prior: segments between the evictions that new
        keys force, each run per key (the keys' events are independent under one prior)."""
        while pos < stop:
            end, admitted = self._admit_keys(run, run.arrivals.heap, run.arrivals.push_next, pos, stop)
            for at, code in admitted:
                run.arrive[code] = at
            self._run_segment(run, pos, end)
            pos = end
        self._n_learned = int(run.counts[stop - 1])

    def _run_segment(self, run, pos: int, end: int) -> None:
        """Events ``pos .. end - 1`` with a fixed set of keys: the global calibrator learns every
        event and predicts those of keys without a state; each key runs its own events."""
        part = slice(pos, end)
        codes = run.kc.codes[part]
        at_pos = np.arange(pos, end)
        arrive = run.arrive[codes]
        slots = np.where(arrive <= at_pos, run.table[codes], -1)
        ops = run.ops[part]
        learn = run.learn[part]
        # a key without learned events (before or at its first label) is served the global map
        alone = ((slots < 0) | (arrive == at_pos)) & ((ops & OP_PREDICT) != 0)
        g_ops = np.where(learn, OP_LEARN, 0) | np.where(alone, OP_PREDICT, 0)
        key_ops = np.where(arrive == at_pos, ops & OP_LEARN, ops)
        g_at = np.flatnonzero(g_ops) + pos
        if g_at.size:
            _through(self._global, run, g_at, g_ops[g_at - pos], alone[g_at - pos])
        for k, at in _groups(slots):
            self._run_key(k, run, at + pos, key_ops[at])
        # the keys' sums, event by event in order (np.*.at), as the river face adds them
        learned = np.flatnonzero(learn)
        if learned.size:
            at = learned + pos
            k = slots[learned]
            np.maximum.at(self._kf[:, _kk.KF_STAMP], k, run.counts[at].astype(np.float64))
            if self.prior_strength == "auto" and self._pooling:
                wy = run.w[at] * run.y[at]
                np.add.at(self._kf[:, _kk.KF_OBS], k, wy)
                np.add.at(self._kf[:, _kk.KF_EXP], k, run.w[at] * self._src_fitted[run.b[at]])
                add_shape_sums(self._kf, k, run.b[at], wy, run.w[at], self._src_weight, self._src_fitted)
        run.arrive[codes] = -1  # every key of the segment now holds its state from the start

    def _run_key(self, k: int, run, at: np.ndarray, ops: np.ndarray) -> None:
        """Key ``k``'s operations ``ops`` on events ``at`` through its calibrator (under the
        prior while it pools)."""
        cal = self._cals[k]
        first = 0
        if self._pver[k] != self._current_pver():
            # a map refitted every refit_every labels takes the moved prior before its next
            # label; a lazily refitted one at once (it refits at its next prediction)
            learns = np.flatnonzero((ops & OP_LEARN) != 0)
            if getattr(cal, "refit_every", None) is None:
                self._follow_prior(k, lazy_only=False)
            elif learns.size:  # up to the first label's prediction, the refit, then the label on
                first = int(learns[0])
                head = ops[: first + 1].copy()
                head[-1] &= OP_PREDICT
                kept = head != 0
                self._ops_through(k, cal, run, at[: first + 1][kept], head[kept])
                self._follow_prior(k, lazy_only=False)
                ops = ops.copy()
                ops[first] &= OP_LEARN
        self._ops_through(k, cal, run, at[first:], ops[first:])

    def _ops_through(self, k: int, cal, run, at: np.ndarray, ops: np.ndarray) -> None:
        if not at.size:
            return
        with pooled_histogram(cal, *self._key_prior(k)):
            _through(cal, run, at, ops, (ops & OP_PREDICT) != 0)

    # ------------------------------------------------------------------ merge
    def _merged_with(self, other):
        """Per key: the template's merge of both keys' calibrators (keys in one part are copied);
        the global calibrators merge; the other part's events count as learned after this one's.
        Then the prior is taken from the merged global map and every key's map takes it."""
        from streamcal.merging import merge

        for key in list(other._slot_of):
            ko = other._slot_of[key]
            theirs = other._cals[ko]
            stats = other._kf[ko]
            k = self._slot_of.get(key)
            if k is None:
                if self._key_limit() is not None and self.n_keys >= self._key_limit():
                    self._evict_lru()
                k = self._new_slot(key)
                self._cals[k] = copy.deepcopy(theirs)
            else:
                self._cals[k] = merge([self._cals[k], theirs])
            self._kf[k, _kk.KF_OBS] += stats[_kk.KF_OBS]
            self._kf[k, _kk.KF_EXP] += stats[_kk.KF_EXP]
            self._kf[k, _kk.KF_SHAPE_OBS : _kk.KF_N] += stats[_kk.KF_SHAPE_OBS : _kk.KF_N]
            self._kf[k, _kk.KF_STAMP] = float(other._kf[ko, _kk.KF_STAMP]) + self._n_learned
            self._pver[k] = -2 if self._pooling and self.prior_strength != 0 else -1
        self._global = merge([self._global, other._global])
        self._n_learned += other._n_learned
        self._evictions += other._evictions
        self._refresh_prior()
        for k, key in enumerate(self._slot_keys):
            if key is not None and self._pver[k] == -2:
                self._follow_prior(k, lazy_only=False)
        return self


# Without ``max_keys``, the keys' clones may fill at most this share of the machine's memory
# (``machine_memory``): past it the least recently updated keys are evicted, with a warning, rather
# than the process running out of memory. A key takes more than a fresh clone's arrays: a refitted
# map's fit and a time window's ring grow after its first events (up to 1.5x), and the Python
# objects and the allocator's slack add to it (a PAV clone with a count window measured 1.18 MB in
# the process for 0.68 MB of arrays), so a key is counted at KEY_GROWTH times a fresh clone's arrays.
MEMORY_SHARE = 0.5
KEY_GROWTH = 2.0


def machine_memory() -> int | None:
    """The bytes of physical memory this process may use: the machine's, or its control group's
    limit where lower (a container); None where unknown."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                limit = f.read().strip()
        except OSError:
            continue
        if limit.isdigit():
            memory = min(memory, int(limit))
    return memory if memory > 0 else None


def _memory_message(n_keys: int, clone, per_key: int) -> str:
    return (
        f"KeyedCalibrator: {n_keys:,} keys, each a {type(clone).__name__} clone of about {per_key / 1e6:.2f} MB, "
        f"fill {MEMORY_SHARE:.0%} of this machine's memory; the least recently updated keys are evicted from "
        "now on (served the global map, counted in `evictions`). Set `max_keys` to choose the bound."
    )


def _array_bytes(obj) -> int:
    """The bytes of the numpy arrays reachable from ``obj`` through attributes, lists, tuples and
    dicts, each buffer once."""
    seen: set = set()
    total = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            base = o
            while isinstance(base.base, np.ndarray):
                base = base.base
            if base is o or id(base) not in seen:
                seen.add(id(base))
                total += base.nbytes
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif hasattr(o, "__dict__") and not isinstance(o, type):
            stack.extend(vars(o).values())
    return total


def check_template_keyed_state(obj) -> None:
    """Raise :class:`streamcal.exceptions.StateFileError` unless ``obj``'s restored attributes are
    those of its class with its parameters: the global
    calibrator and each key's calibrator of the template's class and parameters (each checked
    its own state when restored), one slot per key, the per-key sums finite."""
    state = vars(obj)
    params = ("calibrator", "key_key", "score_key", "prior_strength", "max_keys")
    learned = (
        "_global",
        "_kf",
        "_ki",
        "_cals",
        "_pver",
        "_slot_keys",
        "_n_learned",
        "_evictions",
        "_strength",
        "_next_refresh",
        "_prior_ver",
        "_src_weight",
        "_src_fitted",
        "_src_rule",
        "_shift_a",
        "_shift_rho",
    )
    c.need_keys(obj, (*params, *learned), optional=obj._UNSAVED)
    try:
        fresh = type(obj)(**{name: state[name] for name in params})
    except (TypeError, ValueError, OverflowError) as exc:
        c.fail(f"invalid parameters for {type(obj).__name__}: {exc}")
    _need_like(state["_global"], fresh._global, "_global")
    check_counters(state)
    keys = state["_slot_keys"]
    cals = state["_cals"]
    if type(keys) is not list or type(cals) is not list or len(cals) != len(keys):
        c.fail("`_slot_keys`/`_cals`: expected two lists of one entry per slot.")
    check_slot_keys(keys, obj.max_keys)
    n = len(keys)
    kf = c.need_array(state["_kf"], "_kf", np.float64, ndim=2)
    ki = c.need_array(state["_ki"], "_ki", np.int64, ndim=2)
    if kf.shape != (n, _kk.KF_N) or ki.shape != (n, _kk.KI_N):
        c.fail(f"`_kf`/`_ki`: expected {n} rows of {_kk.KF_N} and {_kk.KI_N} values.")
    sums = np.ascontiguousarray(kf[:, [_kk.KF_STAMP, _kk.KF_OBS, _kk.KF_EXP, _kk.KF_ODDS,
                                      *range(_kk.KF_SHAPE_OBS, _kk.KF_N)]])
    c.need_finite(sums, "_kf", low=0.0)
    pver = c.need_array(state["_pver"], "_pver", np.int64, size=n)
    if n and not ((pver >= -2) & (pver <= state["_prior_ver"])).all():
        c.fail("`_pver`: expected prior versions between -2 and `_prior_ver`.")
    for k, (key, cal) in enumerate(zip(keys, cals, strict=True)):
        if key is None:
            if cal is not None:
                c.fail(f"`_cals[{k}]`: expected None for a free slot.")
            continue
        _need_like(cal, fresh._new_key, f"_cals[{k}]")
    B = fresh._global.n_buckets if fresh._prior_used else 0
    weight = c.need_array(state["_src_weight"], "_src_weight", np.float64, size=B)
    fitted = c.need_array(state["_src_fitted"], "_src_fitted", np.float64, size=B)
    c.need_finite(weight, "_src_weight")
    c.need_finite(fitted, "_src_fitted")
    if not ((weight >= 0).all() and (fitted >= 0).all() and (fitted <= 1).all()):
        c.fail("`_src_weight`/`_src_fitted`: expected weights >= 0 and rates in [0, 1].")
    rule = c.need_array(state["_src_rule"], "_src_rule", np.float64)
    c.need_finite(rule, "_src_rule")
    if rule.size not in ((0, 2) if B else (0,)) or (rule.size and not 0.0 <= rule[1] < 0.5):
        c.fail("`_src_rule`: expected the global map's log-odds and least probability in [0, 0.5), or nothing.")


def _upgraded(state: dict) -> dict:
    """A saved state in the current layout: its keys' shape sums (:func:`upgrade_shape_sums`),
    and the global map's finite LLR rule (``_src_rule``): a state without it has none: its keys do
    not pool, or (written before the prior kept the rule) they read their pooled fit's own rule
    until the next refresh of the prior, as they did."""
    state = upgrade_shape_sums(state)
    if type(state) is dict and "_src_rule" not in state:
        state = {**state, "_src_rule": np.zeros(0)}
    return state


class _Run:
    """One checked operation sequence being run: its arrays, the key table and the arrivals."""

    def __init__(self, kc, ops, s, b, y, w, t, out_p, out_llr, counts, table, learn):
        self.kc, self.ops, self.s, self.y, self.w, self.t = kc, ops, s, y, w, t
        self.b = None if b is None else np.ascontiguousarray(b, dtype=np.int64)
        self.out_p, self.out_llr = out_p, out_llr
        self.counts = counts
        self.learn = learn
        self.table = table
        self.arrive = np.full(len(kc.keys), -1, dtype=np.int64)  # a key's first event with its state
        self.arrivals = _Arrivals(kc.codes, len(kc.keys), learn, table)
        self.p0 = self.p1 = None  # a Venn–Abers template's intervals, when the call keeps them


def _take(b, at):
    return None if b is None else b[at]


def _through(cal, run, at: np.ndarray, ops: np.ndarray, shown: np.ndarray) -> None:
    """``cal`` runs ``ops`` on the run's events ``at``; the outputs of the events ``shown`` (a mask
    over ``at``) go to the run's outputs, with the interval when the run keeps one."""
    args = (ops, run.s[at], run.y[at], run.w[at], run.t[at], _take(run.b, at))
    if run.p0 is None:
        p, llr = cal._run(*args)
    else:
        p, llr, p0, p1 = cal._run_with_interval(*args)
        run.p0[at[shown]] = p0[shown]
        run.p1[at[shown]] = p1[shown]
    run.out_p[at[shown]] = p[shown]
    run.out_llr[at[shown]] = llr[shown]


def _groups(slots: np.ndarray):
    """``(slot, positions)`` for each slot >= 0 in ``slots``, positions in order."""
    held = np.flatnonzero(slots >= 0)
    if not held.size:
        return
    order = held[np.argsort(slots[held], kind="stable")]
    ks = slots[order]
    cuts = np.flatnonzero(ks[1:] != ks[:-1]) + 1
    for part in np.split(order, cuts):
        yield int(slots[part[0]]), part


def _need_like(cal, like, where: str) -> None:
    """``cal`` is a calibrator of ``like``'s class with its parameters (StateFileError if not)."""
    from streamcal.merging import _check_same_params

    if type(cal) is not type(like):
        c.fail(f"`{where}`: expected a {type(like).__name__}; found {c.brief(cal)}.")
    try:
        _check_same_params(like, cal, 0)
    except ValueError as exc:
        c.fail(f"`{where}`: expected the template's parameters: {exc}")
