"""Keyed calibration: one streaming calibration per key (campaign, merchant, country), pooled
toward the global map.

:class:`KeyedCalibrator` keeps, per key, a sparse windowed row of the template calibrator's bucket
histogram (only the buckets the key's window holds), plus one global calibrator over every event.
A key's map is PAV over its row plus a *prior*: pseudo-counts from the global map, ``m`` events
spread over the buckets like the global traffic, positives at the global map's fitted rate
(:mod:`streamcal._kernels.keyed`). Pooling happens inside the fit, so every key's map is monotone
in the score after every event; with ``m = 0`` each key is an independent copy of the template,
bit for bit, and as ``m`` grows each key's map tends to the global one.
"""

from __future__ import annotations

import copy
import heapq
import numbers

import numpy as np
from river import base

from streamcal._kernels import _config
from streamcal._kernels import histogram as _h
from streamcal._kernels import keyed as _kk
from streamcal._keyed_river import LEAN_PLAIN, LEAN_TIMES, KeyedRiverFace, one_event
from streamcal._keyed_rows import KeyedRows, calibrator_to_row, ring_rows
from streamcal._keyed_state import check_key_params, row_layout
from streamcal._keyed_templates import TemplateKeys
from streamcal._keys import KeyedRiverChecks, as_key_column, check_key_kind
from streamcal._locking import LockedState
from streamcal._validation import as_1d_float, as_binary_labels, check_learn_arrays, check_same_length, keywords_named
from streamcal.exceptions import InvalidKeyError
from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.merging import Mergeable
from streamcal.persist import Persistable

__all__ = ["KeyedCalibrator"]

_OP_LEARN, _OP_PREDICT, _OP_BOTH = 1, 2, 3
_CHUNK = 1 << 18  # events per pass of a long array-face call (bounds its temporaries)
_FIELDS = ("bucket", "pos", "neg", "n_pos", "n_neg")
_RING_FIELDS = ("ring_bucket", "ring_weight", "ring_label", "ring_clock")


def _template_per_key(calibrator, prior_strength) -> bool:
    """Whether ``KeyedCalibrator(calibrator, prior_strength=...)`` keeps a template clone per key:
    every template but a fixed-edge ``PAVCalibrator``, and with ``prior_strength=0`` a PAV template
    whose score prior is on (the sparse rows carry the keyed prior, not a score prior per key)."""
    template = PAVCalibrator() if calibrator is None else calibrator
    if not (type(template) is PAVCalibrator and template.window_histogram.built):
        return True
    independent = isinstance(prior_strength, numbers.Real) and not isinstance(prior_strength, bool)
    independent = independent and prior_strength == 0
    return independent and template.prior is not None and bool(template.finite_proba)


def _check_merge_kinds(firsts: list) -> None:
    """Refuse keyed calibrators to merge whose keys are of two kinds (``firsts``: each one's
    first key, None where it holds none)."""
    kinds = [(i, type(key)) for i, key in enumerate(firsts) if key is not None]
    for i, kind in kinds:
        if kind is not kinds[0][1]:
            msg = (
                f"`calibrators` must hold keys of one kind; got {kind.__name__} keys at position {i} and "
                f"{kinds[0][1].__name__} keys at position {kinds[0][0]}."
            )
            raise TypeError(msg)


@keywords_named
class KeyedCalibrator(KeyedRiverChecks, KeyedRiverFace, KeyedRows, LockedState, Persistable, Mergeable,
                      base.Classifier):
    """One streaming calibrator per key, pooled toward the global map.

    Each key (an int or a string: a campaign, a merchant, a country) gets its own windowed state,
    a clone of ``calibrator``'s (streaming PAV by default), and one more state learns every event:
    the global map. A key with little evidence leans on the global map, a key with much evidence
    uses its own: the key's map is PAV over its window's histogram plus ``m`` pseudo-events spread
    over the buckets like the weight the global map rests on, positives at the global map's fitted
    rate (read in runs of bounded width in log-odds while the score prior holds). Pooling
    inside the fit keeps every key's map monotone in the score after every event.

    A key's memory grows with the evidence it holds: its row stores only the buckets its window
    holds (and, for count and time windows, its window's events), never the full bucket array.

    Parameters
    ----------
    calibrator
        The template, any streaming binary calibrator; default ``PAVCalibrator()``. A
        :class:`streamcal.PAVCalibrator` with fixed bucket edges runs in compiled sparse rows (its
        buckets, window, interpolation and finite rule apply to every key and to the global map);
        any other template, and with ``prior_strength=0`` a PAV template with its score prior on
        (the default), makes a ``TemplateKeyedCalibrator`` that keeps one clone of the template
        per key, dense (see the docs' keyed page, "Other templates"). Each key's window counts that
        key's own events (a count window of ``n`` keeps the key's last ``n`` events; decay by
        events ages a key per its own events).
    key_key
        Key of the key in the river face's ``x``.
    score_key
        Key of the score in ``x``; ``None``: the one entry of ``x`` other than ``key_key``.
    prior_strength
        ``m``, the prior's weight in pseudo-events (``>= 0``): the global map's rates, spread over
        the buckets like the global traffic. ``0``: every key is an independent copy of the
        template, bit for bit (``PAVCalibrator(prior=None)`` keeps such keys in sparse rows).
        ``"auto"`` (default): each key's prior is the global map with its odds multiplied by the
        key's own rate ratio, shrunk by empirical Bayes (observed against expected positives,
        gamma–Poisson with a DerSimonian–Laird between-key variance; see :attr:`key_shift`), at
        the weight the global map rests on (its window, plus the score prior's pseudo-events
        while the template's score prior holds), at most the evidence at which a key's own shape is
        as reliable as the prior's, set from how much the keys' shapes differ (at most 500
        positives' worth): a key takes the global map's
        shape at its own level, and its own evidence corrects that shape as it grows (the docs'
        keyed page says how). A template the prior cannot pool into (Venn–Abers, quantile edges)
        keeps independent keys under ``"auto"``, as under ``0``.
    max_keys
        At most this many keys keep a state: the least recently updated key is evicted when a new
        one arrives, counted in ``evictions``, and falls back to the global map. ``None``: no limit
        over the sparse rows; with a template clone per key, the memory bound of ``key_limit``.

    Attributes
    ----------
    n_keys : int
        Keys with a state.
    evictions : int
        Keys evicted by ``max_keys`` (or, for template clones, the memory bound) so far.
    key_limit : int or None
        The most keys that keep a state: ``max_keys``; without it ``None`` (no limit) over the
        sparse rows, and for a template clone per key (``TemplateKeyedCalibrator``) the keys whose
        clones fill half the machine's memory, past which the least recently updated are evicted
        with a ``MemoryBoundWarning``.
    strength : float
        The prior strength ``m`` in use (pseudo-events).
    key_shift(key) : float
        The odds multiplier of ``key``'s prior (1.0 unless ``prior_strength="auto"``).

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal import KeyedCalibrator
    >>> rng = np.random.default_rng(0)
    >>> keys = rng.integers(0, 3, size=6000)
    >>> scores = rng.uniform(0.01, 0.99, size=6000)
    >>> truth = np.clip(scores * np.array([0.5, 1.0, 1.5])[keys], 0, 1)   # key 0 over-scored, key 2 under
    >>> labels = rng.uniform(size=6000) < truth
    >>> cal = KeyedCalibrator()
    >>> proba, llr = cal.prequential(keys, scores, labels)
    >>> cal.n_keys, sorted(cal.keys())
    (3, [0, 1, 2])
    >>> np.round(cal.predict_proba([0, 1, 2], [0.5, 0.5, 0.5]), 1).tolist()
    [0.3, 0.5, 0.7]
    >>> round(cal.predict_proba_one({"key": 2, "score": 0.5})[True], 1)
    0.7
    """

    def __new__(cls, calibrator=None, *args, **kwargs):
        # every template but a fixed-edge PAVCalibrator, and independent keys of a template with a
        # score prior (a key is then the template as it is): one template clone per key
        per_key = _template_per_key(calibrator, kwargs.get("prior_strength", "auto"))
        if cls is KeyedCalibrator and per_key:
            cls = TemplateKeyedCalibrator
        elif cls is TemplateKeyedCalibrator and not per_key and (calibrator is not None or args or kwargs):
            # a clone with parameters the sparse rows run (river's ``clone`` calls the class it
            # clones); a bare allocation (unpickling) stays what it was
            return KeyedCalibrator(calibrator, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, calibrator=None, *, key_key: str = "key", score_key=None, prior_strength="auto",
                 max_keys: int | None = None):
        if calibrator is not None and not isinstance(calibrator, PAVCalibrator):
            msg = (
                "`calibrator` must be a streamcal.PAVCalibrator (the template of every key's state) or None; "
                f"got {type(calibrator).__name__}."
            )
            raise TypeError(msg)
        check_key_params(key_key, prior_strength, max_keys)
        self.calibrator = calibrator
        self.key_key = key_key
        self.score_key = score_key
        self.prior_strength = prior_strength
        self.max_keys = max_keys
        self._init_lock()
        self._reset()

    def _check_loaded_state(self) -> None:
        """Check a restored state (``__setstate__`` does; see :mod:`streamcal._keyed_state`)."""
        from streamcal._keyed_state import check_keyed_state

        check_keyed_state(self)

    # ------------------------------------------------------------------ state
    def _reset(self) -> None:
        template = self.calibrator if self.calibrator is not None else PAVCalibrator()
        glob = template.clone()
        hist = glob.window_histogram
        if not hist.built:
            msg = (
                "`calibrator` must have fixed bucket edges (every key shares them); quantile edges are learned "
                "from a warm-up: fix them with streamcal.buckets.Edges."
            )
            raise ValueError(msg)
        self._global = glob
        self._kf = np.zeros((0, _kk.KF_N))
        self._ki = np.zeros((0, _kk.KI_N), dtype=np.int64)
        self._atoms_b = np.zeros(0, dtype=np.int64)
        self._atoms_f = np.zeros((2, 0))  # pos, neg (stored units)
        self._atoms_n = np.zeros((2, 0), dtype=np.int64)  # event counts
        self._ring_b = np.zeros(0, dtype=np.int32)  # 2 * bucket + label
        self._ring_f = np.zeros((ring_rows(hist.window_code[0]), 0))  # weight (stored units); a time window's clock
        self._arena = np.zeros(3, dtype=np.int64)  # used slots: atoms, ring, blocks
        self._slot_keys: list = []  # the key of each slot (None: free)
        self._n_learned = 0
        self._evictions = 0
        self._strength = 0.0
        self._shift_a = 0.0  # the keys' shift (see KeyedRows._strength_now)
        self._shift_rho = 1.0
        self._next_refresh = 1
        self._prior_ver = 0
        self._take_prior_source()
        self._rebuild_caches()

    def _rebuild_caches(self) -> None:
        """What the parameters, the global map and the strength give (not state): the kernels'
        configuration, the prior, the key table and the sweep's scratch."""
        glob = self._global
        hist = glob.window_histogram
        B = int(glob.n_buckets)
        cfg = np.zeros(_kk.CFG_N)
        cfg[_kk.CFG_B] = B
        cfg[_kk.CFG_KIND : _kk.CFG_HALF_LIFE + 1] = hist.window_code
        cfg[_kk.CFG_PSEUDO] = float(glob.llr_pseudo_count)
        cfg[_kk.CFG_FINITE] = 1.0 if glob.finite_proba else 0.0
        cfg[_kk.CFG_LINEAR] = 1.0 if glob.interpolation == "linear" else 0.0
        cfg[_kk.CFG_PROB_INPUTS] = 1.0 if hist.layout.probability_inputs else 0.0
        self._cfg = cfg
        self._lean = LEAN_TIMES if hist.uses_times else LEAN_PLAIN  # the river face (streamcal._keyed_river)
        self._cen = np.ascontiguousarray(glob.centres, dtype=np.float64)
        self._build_prior()
        self._slot_of = {key: k for k, key in enumerate(self._slot_keys) if key is not None}
        self._free = [k for k, key in enumerate(self._slot_keys) if key is None]
        self._scratch_b = np.zeros((2, 2 * B + 4), dtype=np.int64)
        self._scratch_w = np.zeros((2, 2 * B + 4))
        self._holes = np.full((2, _kk.HOLE_CLASSES), -1, dtype=np.int64)  # no segment is free yet
        if "_blocks_b" not in self.__dict__:  # the block cache starts empty (a restored state)
            self._drop_block_caches()

    _CACHES = ("_cfg", "_lean", "_cen", "_prior", "_pri", "_slot_of", "_free", "_scratch_b", "_scratch_w", "_blocks_b",
               "_blocks_f", "_holes")
    _UNSAVED = ("_lock", *_CACHES)
    # what replace_global takes from a keyed source: the global map and the prior it gives
    _GLOBAL_STATE = ("_global", "_n_learned", "_next_refresh", "_strength", "_src_weight", "_src_fitted", "_src_blocks",
                     "_src_base", "_shift_a", "_shift_rho")

    def __getstate__(self):
        with self._lock:
            self._compact()
            state = super().__getstate__()
        # the arenas up to what they use, without the block cache (rebuilt on demand)
        for prefix, used in (("_atoms", _kk.AR_ATOMS), ("_ring", _kk.AR_RING)):
            n = int(self._arena[used])
            for suffix in ("_b", "_f", "_n"):
                name = prefix + suffix
                if name in state:
                    state[name] = np.ascontiguousarray(state[name][..., :n])
        state["_ki"] = state["_ki"].copy()
        state["_ki"][:, list(_kk.KI_CACHE)] = 0
        state["_arena"] = state["_arena"].copy()
        state["_arena"][_kk.AR_BLOCKS] = 0
        state["_slot_keys"] = list(state["_slot_keys"])
        return state

    def __setstate__(self, state):
        from streamcal._keyed_state import check_keyed_state, upgrade_state

        state = upgrade_state(state)
        self.__dict__.update(state)
        self._init_lock()
        for name, value in state.items():
            if type(value) is np.ndarray:
                self.__dict__[name] = np.array(value, order="C", copy=True)
        check_keyed_state(self)
        self._rebuild_caches()

    _checks_own_state = True

    # ------------------------------------------------------------------ inspection
    @property
    def n_keys(self) -> int:
        return len(self._slot_of)

    def keys(self) -> list:
        """The keys with a state, in the order they first learned."""
        with self._lock:
            return [key for key in self._slot_keys if key is not None]

    def __contains__(self, key) -> bool:
        """Whether ``key`` has a state."""
        return key in self._slot_of

    @property
    def evictions(self) -> int:
        return self._evictions

    @property
    def key_limit(self) -> int | None:
        return self._key_limit()

    @property
    def strength(self) -> float:
        """The weight, in pseudo-events, of every key's prior since the last refresh.

        Under ``prior_strength="auto"`` it is the weight the global map rests on: the global
        window's events plus, while the template's score prior holds, that prior's pseudo-events
        (many times the window's events where the scores are calibrated: the data confirm the score),
        at most the evidence at which a key's own shape is as reliable as the prior's (set from the
        spread of the keys' shapes, at most 500 positives' worth), so that a key with
        more evidence than that follows its own shape. A key's
        own events weigh against it bucket by bucket, where its rates depart from its prior's; its
        level comes from its shift (:meth:`key_shift`), not from this weight. A number given as
        ``prior_strength`` is used as it is."""
        return self._strength

    @property
    def n_learned(self) -> int:
        return self._n_learned

    @property
    def last_time(self) -> float:
        """The clock of the last learned event, which the next learned time may not precede under a
        time window or a decay by time (the time; else the event's number); ``-inf`` before any."""
        return self._global.window_histogram.last_time()

    @property
    def global_calibrator(self) -> PAVCalibrator:
        """A copy of the global calibrator (every event learned)."""
        with self._lock:
            return copy.deepcopy(self._global)

    def key_state(self, key) -> PAVCalibrator:
        """A copy of ``key``'s own calibrator: a template calibrator holding the key's window alone
        (without the keyed prior, and without the template's score prior: ``prior=None``). KeyError
        if the key has no state."""
        with self._lock:
            return self._key_calibrator(self._slot(key))

    def key_shift(self, key) -> float:
        """The odds multiplier of ``key``'s prior: under ``prior_strength="auto"``,
        ``(O + a) / (rho E + a)`` with ``O`` the key's observed and ``E`` its expected positives
        (the global map's predictions before its events), ``rho`` the keys' overall ratio and ``a``
        the between-key shape, as the prior last refreshed; 1.0 otherwise. KeyError if the key has
        no state."""
        with self._lock:
            return self._odds_of(self._slot(key))

    def export_key(self, key) -> dict:
        """``key``'s state as plain values (numpy arrays and floats): its row and window, and its
        shape sums (``"shape"``: observed then expected positives per shape bin)."""
        with self._lock:
            k = self._slot(key)
            return {**self._export(k), **row_layout(self._global),
                    "shape": self._kf[k, _kk.KF_SHAPE_OBS : _kk.KF_N].copy()}

    def import_key(self, key, state: dict) -> None:
        """Replace (or create) ``key``'s state by ``state`` (:meth:`export_key`'s form), checked first."""
        from streamcal._keyed_state import check_exported

        with self._lock:
            key = self._checked_key(key, "key")
            check_key_kind(self._slot_of, key)
            row = check_exported(state, self._cfg, row_layout(self._global))
            k = self._slot_of.get(key)
            if k is None:
                if self.max_keys is not None and self.n_keys >= self.max_keys:
                    self._evict_lru()
                k = self._new_slot(key)
            self._import(k, row)
            self._kf[k, _kk.KF_SHAPE_OBS : _kk.KF_N] = row["shape"]

    def replace_global(self, source) -> None:
        """Pool toward ``source``'s global map from now on, every key's row kept as it is.

        For a stream sharded by key whose global map of all traffic is kept elsewhere (one shard
        per worker, the map merged from every shard's share): swap the map in, instead of moving
        the keys' rows into a calibrator that holds it. The call's work is the global map's (its
        buckets and window), not the keys'.

        Parameters
        ----------
        source
            One of:

            * a ``KeyedCalibrator`` of this template and ``prior_strength`` (its keys are not read):
              its global map, its learned count and its prior are taken **as they stand** (the
              prior follows a global map on a schedule, so it may lag it); the prior next
              refreshes when the source's would, and the spacing after that counts this
              calibrator's keys (every 16,384 learned events or two per key that has learned,
              whichever is longer). Each key takes the new prior as at a refresh
              of the prior (under ``"auto"`` its odds multiplier from the source's between-key
              shift and its own evidence, until the next refresh estimates the shift again from
              this calibrator's keys). With a fixed-edge ``PAVCalibrator`` template (sparse rows)
              each key then predicts and learns exactly as it would, bit for bit, had its row been
              moved into ``source`` with :meth:`export_key` / :meth:`import_key`;
            * a calibrator of the template's class and parameters (for example another keyed
              calibrator's :attr:`global_calibrator`): it becomes the global map, the learned count
              becomes its ``n_learned``, and the prior is taken from it now, with the strength
              (and under ``"auto"`` the keys' shift) estimated now, then refreshes on the usual
              schedule from that count;
            * the bytes of either (:func:`streamcal.persist.to_bytes`), checked as
              :func:`streamcal.persist.from_bytes` checks a state.

        Notes
        -----
        What stays: every key's row and window, its event counts and its observed and expected
        positives (under ``"auto"`` a key's expected positives remain the sum of the predictions of
        the global map in force when each of its events was learned; the events learned after the
        swap add the new map's), the evictions, and the keys' recency stamps. Each key takes the
        new prior the next time it is read or learned. :attr:`global_calibrator` and
        ``n_learned`` are then the new map's (plus what this calibrator learns after).
        Recency under ``max_keys`` compares the stamps (the learned count when each key last
        learned): swap in maps that have learned at least as much as this one, as a map of all
        traffic does. A rejected call (a source of another kind, template, layout or strength;
        damaged bytes) raises and changes nothing.

        Examples
        --------
        >>> import copy
        >>> import numpy as np
        >>> from streamcal import KeyedCalibrator, PAVCalibrator
        >>> rng = np.random.default_rng(0)
        >>> template = PAVCalibrator(prior=None)
        >>> s = rng.uniform(0.01, 0.99, size=4000)
        >>> y = rng.uniform(size=4000) < s
        >>> everything = KeyedCalibrator(template, prior_strength=50).update(np.zeros(4000, int), s, y)
        >>> everything.drop_key(0)                              # a map of all traffic, no keys
        >>> shard = KeyedCalibrator(template, prior_strength=50).update([7] * 20, s[:20], y[:20])
        >>> moved = copy.deepcopy(everything)                  # the row moved into the map's calibrator
        >>> moved.import_key(7, shard.export_key(7))
        >>> shard.replace_global(everything)                   # the row stays where it is
        >>> shard.n_learned == everything.n_learned == 4000
        True
        >>> grid = np.linspace(0.05, 0.95, 7)
        >>> np.array_equal(shard.predict_proba([7] * 7, grid), moved.predict_proba([7] * 7, grid))
        True
        """
        from streamcal._keyed_state import replace_global

        replace_global(self, source, KeyedCalibrator)

    def _take_key_odds(self) -> None:
        """The keys take their prior's odds multiplier when next read or learned (the kernels)."""

    def _slot(self, key) -> int:
        key = self._checked_key(key, "key")
        k = self._slot_of.get(key)
        if k is None:
            msg = f"no state for key {key!r} ({self.n_keys} keys have one)."
            raise KeyError(msg)
        return k

    @staticmethod
    def _checked_key(key, name: str):
        if isinstance(key, str):  # np.str_ too
            return str(key)
        if isinstance(key, numbers.Integral) and not isinstance(key, (bool, np.bool_)):
            return int(key)
        msg = f"`{name}` must be an int or a string; got {key!r}."
        raise InvalidKeyError(msg)

    # ------------------------------------------------------------------ array face
    def update(self, keys, scores, labels, *, weights=None, times=None):
        """Learn labelled events in order; returns ``self``."""
        with self._lock:
            self._apply(keys, scores, labels, None, weights, times, _OP_LEARN)
        return self

    def prequential(self, keys, scores, labels, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Predict each event with the state before its label, then learn it: ``(proba, llr)``."""
        with self._lock:
            return self._apply(keys, scores, labels, None, weights, times, _OP_BOTH)

    def process(self, keys, scores, labels, learn_mask, *, weights=None, times=None):
        """Learn where ``learn_mask``, else predict, in order: ``(proba, llr)``, NaN at learn positions."""
        with self._lock:
            return self._apply(keys, scores, labels, learn_mask, weights, times, None)

    def predict_proba(self, keys, scores) -> np.ndarray:
        """Calibrated probability of each (key, score) with the current state."""
        with self._lock:
            return self._predict(keys, scores)[0]

    def predict_llr(self, keys, scores) -> np.ndarray:
        """Calibrated (finite) LLR of each (key, score) with the current state."""
        with self._lock:
            return self._predict(keys, scores)[1]

    def _apply(self, keys, scores, labels, learn_mask, weights, times, op):
        """Check a call whole, then run it. A call longer than ``_CHUNK`` events whose columns are
        1-d numpy arrays of one length is checked chunk by chunk, every chunk before any is learned
        (a failing chunk has the whole call checked, so the error names the call's position), then
        run chunk by chunk: its temporaries stay those of one chunk, with the same results."""
        columns = (keys, scores, labels, learn_mask, weights, times)
        n = scores.size if type(scores) is np.ndarray else 0
        if n <= _CHUNK or not all(c is None or (type(c) is np.ndarray and c.shape == (n,)) for c in columns):
            return self._run_checked(*self._checked(*columns, op))
        cuts = [(a, min(a + _CHUNK, n)) for a in range(0, n, _CHUNK)]
        hist = self._global.window_histogram
        last = hist.last_time() if hist.uses_times else None
        kind = None
        for a, z in cuts:
            part = [c if c is None else c[a:z] for c in columns]
            try:
                kc, ops, _s, _b, _y, _w, t = self._checked(*part, op, last_time=last, code=False)
                if kc.keys and kind is not None and type(kc.keys[0]) is not kind:
                    raise TypeError
            except (TypeError, ValueError, OverflowError):
                self._checked(*columns, op)  # names the position in the whole call
                raise
            if kc.keys:
                kind = type(kc.keys[0])
            learned = np.flatnonzero(ops & _OP_LEARN)
            if last is not None and learned.size:
                last = float(t[learned[-1]])
        out_p = np.empty(n)
        out_llr = np.empty(n)
        for a, z in cuts:
            out_p[a:z], out_llr[a:z] = self._run_checked(*self._checked(*(c if c is None else c[a:z] for c in columns),
                                                                        op))
        return out_p, out_llr

    def _scores(self, scores) -> tuple[np.ndarray, np.ndarray]:
        s = as_1d_float(scores, "scores", allow_empty=True, copy=False)
        b, bad = self._global.window_histogram.layout.buckets_checked(s)
        if bad >= 0:  # the unkeyed calibrator's message: the range, and the buckets for other scores
            msg = self._global._bad_score_message(float(s[bad]), "scores", f" at position {bad}", scores)
            raise ValueError(msg)
        return s, b

    def _codes(self, keys, n: int, *, code: bool = True):
        kc = as_key_column(keys, "keys", n, code=code)
        if kc.keys and self._slot_of:
            first = next(iter(self._slot_of))
            if type(kc.keys[0]) is not type(first):
                if kc.codes is None:  # checked only: code it for the error's key
                    kc = as_key_column(keys, "keys", n)
                # a column holds one kind of key, so its first event already has the other kind
                msg = (
                    f"`keys` must be of the kind already learned ({type(first).__name__}); got "
                    f"{kc.keys[kc.codes[0]]!r} at position 0."
                )
                raise InvalidKeyError(msg)
        return kc

    def _checked(self, keys, scores, labels, learn_mask, weights, times, op, *, last_time=None, code=True):
        s, b = self._scores(scores)
        kc = self._codes(keys, s.size, code=code)
        if op is None:
            learn = as_binary_labels(learn_mask, "learn_mask", allow_empty=True).astype(bool)
            check_same_length(s.size, learn.size, "learn_mask")
            ops = np.where(learn, _OP_LEARN, _OP_PREDICT).astype(np.int64)
        else:
            learn = None
            ops = np.full(s.size, op, dtype=np.int64)
        hist = self._global.window_histogram
        window = type(self._global.window_histogram.window).__name__
        y, w, t = check_learn_arrays(
            s.size, labels, weights, times, learn, max_weight=_h.MAX_WEIGHT, needs_times=hist.uses_times,
            last_time=(hist.last_time() if last_time is None else last_time) if hist.uses_times else None,
            window_name=window, weights_name="weights",
        )
        return kc, ops, s, b, y, w, t

    def _predict(self, keys, scores):
        s, b = self._scores(scores)
        kc = self._codes(keys, s.size)
        slots = self._slot_table(kc.keys)[kc.codes] if s.size else np.zeros(0, dtype=np.int64)
        g_p = self._global.predict_proba(s)
        g_llr = self._global.predict_llr(s)
        out_p = np.empty(s.size)
        out_llr = np.empty(s.size)
        _config.run(
            _kk.predict_many, s.size, self._cfg, self._cen, self._kf, self._ki, self._atoms_b, self._atoms_f,
            self._prior, self._pri, self._blocks_b, self._blocks_f, self._scratch_b, self._scratch_w, slots, b, s,
            g_p, g_llr, out_p, out_llr,
        )
        return out_p, out_llr

    # ------------------------------------------------------------------ the operation loop
    def _run_checked(self, kc, ops, s, b, y, w, t):
        n = s.size
        out_p = np.full(n, np.nan)
        out_llr = np.full(n, np.nan)
        if n == 0:
            return out_p, out_llr
        learn = (ops & _OP_LEARN) != 0
        # the global learned count after each event (the keys' stamps), and the prior's refreshes
        counts = self._n_learned + np.cumsum(learn)
        run = _Run(kc, ops, s, b, y, w, t, out_p, out_llr, counts)
        run.table = self._slot_table(kc.keys)
        if self.max_keys is None:
            self._admit_all(run, learn)  # no eviction: every slot at once
        else:
            run.arrivals(learn)
        self._run_between_refreshes(run, counts)
        return out_p, out_llr

    def _run_chunk(self, run, pos: int, stop: int) -> None:
        """Run events ``pos .. stop - 1``: the global map, then the keys, with one prior."""
        ops = run.ops
        g_ops = np.where(ops[pos:stop] & _OP_LEARN, _OP_BOTH, _OP_PREDICT).astype(np.int64)
        g = self._global
        run.g_p[pos:stop], run.g_llr[pos:stop] = g._run(
            g_ops, run.s[pos:stop], run.y[pos:stop], run.w[pos:stop], run.t[pos:stop], run.b[pos:stop]
        )
        while pos < stop:
            end = stop
            if run.heap is not None:
                end, _ = self._admit_keys(run, run.heap, run.push_next, pos, stop)
                run.slots[pos:end] = run.table[run.kc.codes[pos:end]]
            pos = self._kernel(run, pos, end)
        self._n_learned = int(run.stamps[stop - 1])

    # ------------------------------------------------------------------ merge
    def _check_merge(self, items: list) -> None:
        _check_merge_kinds([next(iter(cal._slot_of), None) for cal in items])

    def _merged_with(self, other):
        """Per key: the template's merge of both keys' windows (keys in one part are copied);
        the global maps merge; the other part's events count as learned after this one's."""
        from streamcal.merging import merge

        for key in list(other._slot_of):
            theirs = other._key_calibrator(other._slot_of[key])
            k = self._slot_of.get(key)
            stats = other._kf[other._slot_of[key]]
            if k is None:
                if self.max_keys is not None and self.n_keys >= self.max_keys:
                    self._evict_lru()
                k = self._new_slot(key)
                row = calibrator_to_row(theirs)
            else:
                mine = self._key_calibrator(k)
                row = calibrator_to_row(merge([mine, theirs]))
                row["observed"] += float(self._kf[k, _kk.KF_OBS])
                row["expected"] += float(self._kf[k, _kk.KF_EXP])
            row["observed"] += float(stats[_kk.KF_OBS])
            row["expected"] += float(stats[_kk.KF_EXP])
            row["stamp"] = float(stats[_kk.KF_STAMP]) + self._n_learned
            self._import(k, row)
            self._kf[k, _kk.KF_SHAPE_OBS : _kk.KF_N] += stats[_kk.KF_SHAPE_OBS : _kk.KF_N]
        self._global = merge([self._global, other._global])
        self._n_learned += other._n_learned
        self._evictions += other._evictions
        self._refresh_prior()
        return self


class TemplateKeyedCalibrator(TemplateKeys, KeyedCalibrator):
    """:class:`KeyedCalibrator` over any other streaming binary calibrator: one template clone per
    key (:class:`streamcal._keyed_templates.TemplateKeys`); ``KeyedCalibrator(template)`` makes it.

    Over a :class:`streamcal.VennAbersCalibrator` template it also gives the Venn–Abers interval
    of every prediction, each key's from its own calibrator (the global calibrator's for a key
    without a state): ``predict_interval``, ``predict_interval_one``, ``prequential_with_interval``
    and ``process_with_interval``. The last three exist only then (``hasattr`` tells), as on the
    unkeyed calibrators.
    """

    @property
    def prequential_with_interval(self):
        """``prequential(keys, scores, labels, *, weights=None, times=None)`` with the interval:
        ``(proba, llr, p0, p1)`` (a Venn–Abers template only)."""
        self._need_intervals("prequential_with_interval")

        def prequential_with_interval(keys, scores, labels, *, weights=None, times=None):
            return self._with_interval(keys, scores, labels, None, weights, times, _OP_BOTH)

        return prequential_with_interval

    @property
    def process_with_interval(self):
        """``process(keys, scores, labels, learn_mask, *, weights=None, times=None)`` with the
        interval: ``(proba, llr, p0, p1)``, NaN at the learn positions (a Venn–Abers template only)."""
        self._need_intervals("process_with_interval")

        def process_with_interval(keys, scores, labels, learn_mask, *, weights=None, times=None):
            return self._with_interval(keys, scores, labels, learn_mask, weights, times, None)

        return process_with_interval

    @property
    def predict_interval_one(self):
        """``predict_interval_one(x) -> (p0, p1)``: the Venn–Abers interval of the key and score in
        ``x`` with the current state, as Python floats: the key's own calibrator's, the global
        calibrator's for a key without a state (a Venn–Abers template only)."""
        self._need_intervals("predict_interval_one")

        def predict_interval_one(x: dict) -> tuple[float, float]:
            keys, scores, name = self._split(x)
            with self._lock, one_event(self.key_key, name):
                p0, p1 = self.predict_interval(keys, scores)
            return float(p0[0]), float(p1[0])

        return predict_interval_one

    def _need_intervals(self, name: str) -> None:
        from streamcal.isotonic.venn_abers import VennAbersCalibrator

        if not isinstance(self.__dict__.get("_global"), VennAbersCalibrator):
            kind = type(self.__dict__.get("_global")).__name__
            msg = f"`{name}` needs a VennAbersCalibrator template; this one is a {kind}."
            raise AttributeError(msg)

    def _with_interval(self, keys, scores, labels, learn_mask, weights, times, op):
        """The call, with each run's intervals kept (``_run_checked`` appends one pair per run)."""
        with self._lock:
            self._intervals = []
            try:
                p, llr = self._apply(keys, scores, labels, learn_mask, weights, times, op)
                parts = self._intervals
            finally:
                del self._intervals
        p0 = np.concatenate([a for a, _ in parts]) if parts else np.full(p.size, np.nan)
        p1 = np.concatenate([b for _, b in parts]) if parts else np.full(p.size, np.nan)
        return p, llr, p0, p1


class _Run:
    """One checked operation sequence being run: its arrays and the arrivals of new keys."""

    def __init__(self, kc, ops, s, b, y, w, t, out_p, out_llr, counts):
        self.kc, self.ops, self.s, self.b, self.y, self.w, self.t = kc, ops, s, b, y, w, t
        self.out_p, self.out_llr = out_p, out_llr
        n = s.size
        self.stamps = counts.astype(np.float64)
        self.slots = np.full(n, -1, dtype=np.int64)
        self.g_p = np.empty(n)
        self.g_llr = np.empty(n)
        self.b = np.ascontiguousarray(b, dtype=np.int64)
        self.heap = None  # the arrivals of new keys when they may evict (``arrivals``)

    def arrivals(self, learn: np.ndarray) -> None:
        """A heap of (next learn position, code) of the keys without a state that learn here."""
        learn_pos = np.flatnonzero(learn)
        codes = self.kc.codes[learn_pos]
        order = np.argsort(codes, kind="stable")
        self.positions = learn_pos[order]  # each code's learn positions, in order
        self.starts = np.searchsorted(codes[order], np.arange(len(self.kc.keys) + 1))
        self.heap = []
        for code in range(len(self.kc.keys)):
            if self.table[code] < 0:
                self.push_next(code, 0)

    def push_next(self, code: int, after: int) -> None:
        """Queue ``code``'s first learn position at or after ``after``, if any."""
        lo, hi = self.starts[code], self.starts[code + 1]
        j = lo + int(np.searchsorted(self.positions[lo:hi], after))
        if j < hi:
            heapq.heappush(self.heap, (int(self.positions[j]), code))

    def columns(self) -> tuple:
        """The keys' kernel's event columns (``_kernels.keyed.run_ops``'s ``slots .. stamps``)."""
        return self.slots, self.b, self.s, self.y, self.w, self.t, self.ops, self.g_p, self.g_llr, self.stamps
