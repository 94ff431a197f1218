"""Per-key calibration as a global map plus a per-key logit offset shrunk by empirical Bayes.

The baseline for keyed calibration that batch tools offer (a random-effects offset per segment,
with the DerSimonian–Laird between-segment variance), run on a stream: :class:`KeyedOffsetCalibrator`.
"""

from __future__ import annotations

import copy
import re

import numpy as np
from river import base

from streamcal._kernels import _config
from streamcal._kernels import keyed_offset as _ko
from streamcal._kernels.histogram import MAX_WEIGHT
from streamcal._keys import KeyedRiverChecks, as_key_column
from streamcal._locking import LockedState
from streamcal._streaming import StreamingCalibrator
from streamcal._validation import (
    as_binary_label,
    as_binary_labels,
    check_learn_arrays,
    check_same_length,
    check_scalar,
    fmt,
    keywords_named,
)
from streamcal.exceptions import InvalidKeyError
from streamcal.persist import Persistable

__all__ = ["KeyedOffsetCalibrator"]

_POSITION = re.compile(r"at position (\d+)")


@keywords_named
class KeyedOffsetCalibrator(KeyedRiverChecks, LockedState, Persistable, base.Classifier):
    """A global streaming calibrator plus a per-key logit offset shrunk by empirical Bayes.

    Every event teaches one global calibrator (a copy of ``calibrator``, ``PAVCalibrator()`` by
    default), whatever its key. Each key then moves the global map by a logit offset:

    ``p = sigmoid(logit(g(s)) + λ_k · δ_k)``, ``λ_k = τ² / (τ² + v_k)``,

    with ``g`` the global map, ``δ_k`` the key's estimated offset, ``v_k`` its variance and
    ``τ²`` the variance of the true offsets between keys. A key with little evidence (large
    ``v_k``) keeps the global map; a key with much evidence keeps its own offset; with keys that
    do not differ (``τ² = 0``) every key gets the global map. This is the random-effects model
    of a meta-analysis, with the keys as its studies (DerSimonian & Laird, "Meta-analysis in
    clinical trials", 1986), and the per-segment offsets of batch calibration tools, run on a
    stream.

    Per key the state is four sums: the key's weight ``N``, its weighted positives ``Y``, its
    positives expected under the global map ``E = Σp`` and the information ``I = Σp(1 − p)``,
    each event counted at the global map's probability ``p`` before its label, as it was served.
    From them:

    - ``δ_k = logit((Y + ½) / (N + 1)) − logit((E + ½) / (N + 1))``, the difference of the
      observed and expected empirical logits with Haldane's half pseudo-event per class: the
      offset-only logistic fit for a key whose events share one global probability, and
      ``log(Y / E)`` for rare positives; 0 when the key is calibrated in the large (``Y = E``);
    - ``v_k = 1 / I``, the variance of the offset's score estimate ``z_k = (Y − E) / I`` when the
      key has no offset (exactly so, whatever the key's size: each ``y − p`` has mean 0 and
      variance ``p (1 − p)`` given what came before);
    - ``τ²`` by DerSimonian and Laird's method of moments on the score estimates, over the keys
      with ``I > 0``: ``max(0, (Q − (K − 1)) / (ΣI − ΣI² / ΣI))`` with
      ``Q = Σ I (z_k − z̄)²``; 0 with fewer than two keys. The score scale keeps the moment
      equation true for the many sparse keys of a Zipf stream, whose log-scale estimates
      (with their continuity corrections) vary far less than their nominal variances and would
      pull ``τ²`` to 0. Its sums are kept per event, so ``τ²`` follows the stream at O(1) per event.

    The sums are cumulative (no window); the global calibrator keeps its own window. Memory is
    five float64 per key plus the key's entry in a dict, whatever the number of score buckets.
    ``prequential`` predicts each event with the state before its label. The LLR served is the
    global map's: the offset model moves a key's prior odds, not the evidence of its score.

    Parameters
    ----------
    calibrator
        The template of the global calibrator: an unkeyed streaming binary calibrator
        (``PAVCalibrator``, ``ISplineCalibrator``, ``GEVCalibrator``, ``PlattCalibrator``...); it
        is cloned, never changed. ``None``: ``PAVCalibrator()``.
    key_key
        Key of the event's key (campaign, merchant...) in the ``x`` dicts of the river face.
    score_key
        Key of the score in ``x``; ``None``: ``x`` holds exactly one entry besides ``key_key``.
    between_key_variance
        ``None`` (default): ``τ²`` is estimated from the data (DerSimonian–Laird); a float
        ``>= 0`` fixes it (0: every key gets the global map).

    Attributes
    ----------
    n_keys : int
        Number of keys learned so far (a key only predicted has no state and is not counted).
    tau2 : float
        The between-key variance ``τ²`` in use now.
    global_calibrator
        A copy of the global calibrator.

    Examples
    --------
    Ten campaigns, each miscalibrated by its own logit shift, scored by one model:

    >>> import numpy as np
    >>> from streamcal import KeyedOffsetCalibrator, PAVCalibrator
    >>> from streamcal.metrics import field_ece, log_loss
    >>> rng = np.random.default_rng(0)
    >>> keys = rng.integers(0, 10, 20_000)
    >>> logit = rng.normal(-3.0, 1.0, 20_000)
    >>> scores = 1 / (1 + np.exp(-logit))
    >>> shift = np.linspace(-1.0, 1.0, 10)[keys]
    >>> labels = rng.uniform(size=20_000) < 1 / (1 + np.exp(-(logit + shift)))
    >>> cal = KeyedOffsetCalibrator()
    >>> proba, llr = cal.prequential(keys, scores, labels)
    >>> global_proba, _ = PAVCalibrator().prequential(scores, labels)
    >>> print(f"{log_loss(labels, global_proba):.4f} {log_loss(labels, proba):.4f}")
    0.2477 0.2361
    >>> print(f"{field_ece(keys, labels, global_proba):.4f} {field_ece(keys, labels, proba):.4f}")
    0.0351 0.0064
    >>> cal.n_keys, round(cal.tau2, 2)
    (10, 0.48)
    >>> cal.learn_one({"key": 3, "score": 0.05}, True)
    >>> round(cal.predict_proba_one({"key": 3, "score": 0.05})[True], 4)
    0.0358

    References
    ----------
    DerSimonian, R. and Laird, N. *Meta-analysis in clinical trials.* Controlled Clinical
    Trials, 1986.
    """

    # why streamcal.merge refuses it (read by streamcal.merging, which this module imports)
    _not_merged_because = (
        "each key's sums count its events at the probability its part's global map served then, and "
        "another part's global map served others, so no combination of the parts' sums is the calibrator "
        "of the whole stream; KeyedCalibrator merges"
    )

    def __init__(
        self,
        calibrator: StreamingCalibrator | None = None,
        *,
        key_key: str = "key",
        score_key: str | None = None,
        between_key_variance: float | None = None,
    ):
        if calibrator is not None and not isinstance(calibrator, StreamingCalibrator):
            msg = (
                "`calibrator` must be an unkeyed streaming binary calibrator (PAVCalibrator, ISplineCalibrator, "
                f"GEVCalibrator, PlattCalibrator...); got {type(calibrator).__name__}."
            )
            raise TypeError(msg)
        if between_key_variance is not None:
            check_scalar(between_key_variance, "between_key_variance", low=0.0, high=1e300)
        for name, value in (("key_key", key_key), ("score_key", score_key)):
            if value is not None and not isinstance(value, str):
                msg = f"`{name}` must be a str; got {fmt(value)}."
                raise TypeError(msg)
        self.calibrator = calibrator
        self.key_key = key_key
        self.score_key = score_key
        self.between_key_variance = between_key_variance
        self._init_lock()
        self._reset()

    def _reset(self) -> None:
        if self.calibrator is None:
            from streamcal.isotonic.streaming import PAVCalibrator

            self._global = PAVCalibrator()
        else:
            self._global = self.calibrator.clone()
        self._fixed_tau2 = -1.0 if self.between_key_variance is None else float(self.between_key_variance)
        self._slots: dict = {}  # key -> slot
        self._key_kind: str | None = None  # "int" or "str", once a key is learned
        capacity = 16
        self._weight = np.zeros(capacity)
        self._positives = np.zeros(capacity)
        self._expected = np.zeros(capacity)
        self._information = np.zeros(capacity)
        self._offset = np.zeros(capacity)
        self._agg = np.zeros(6)

    # ------------------------------------------------------------------ inspection
    @property
    def n_keys(self) -> int:
        """Number of keys seen by a learning call (a key only predicted is not counted)."""
        with self._lock:
            return len(self._slots)

    def keys(self) -> list:
        """The keys learned so far, in the order they were first seen."""
        with self._lock:
            return list(self._slots)

    @property
    def tau2(self) -> float:
        """The between-key variance ``τ²`` in use now (fixed, or DerSimonian–Laird's estimate)."""
        with self._lock:
            return float(_config.run_interpreted(_ko.between_key_variance, self._agg, self._fixed_tau2))

    @property
    def global_calibrator(self) -> StreamingCalibrator:
        """A copy of the global calibrator (every event, whatever its key)."""
        with self._lock:
            return copy.deepcopy(self._global)

    def key_offsets(self) -> dict:
        """Each learned key's sums and offset: a dict of columns, one row per key (as :meth:`keys`).

        ``key``; ``weight``, ``positives``, ``expected``, ``information`` (the sums); ``offset``
        (``δ_k``), ``variance`` (``v_k = 1 / information``, ``inf`` for a key without any);
        ``shrinkage`` (``λ_k``) and ``applied`` (``λ_k · δ_k``, the logit offset served).
        """
        with self._lock:
            n = len(self._slots)
            tau2 = float(_config.run_interpreted(_ko.between_key_variance, self._agg, self._fixed_tau2))
            information = self._information[:n].copy()
            with np.errstate(divide="ignore"):
                variance = np.where(information > 0.0, 1.0 / information, np.inf)
            shrinkage = np.where(information > 0.0, tau2 / (tau2 + variance), 0.0) if tau2 > 0.0 else np.zeros(n)
            offset = self._offset[:n].copy()
            return {
                "key": list(self._slots),
                "weight": self._weight[:n].copy(),
                "positives": self._positives[:n].copy(),
                "expected": self._expected[:n].copy(),
                "information": information,
                "offset": offset,
                "variance": variance,
                "shrinkage": shrinkage,
                "applied": offset * shrinkage,
            }

    def _check_loaded_state(self) -> None:
        """Check the attributes a state file restored (see :mod:`streamcal.persist`): valid
        parameters; a global calibrator of the template's class; per-key sums that are finite,
        consistent and as long as the key table; offsets and DerSimonian–Laird sums that match
        the sums they come from."""
        from streamcal import _state_check as c
        from streamcal.isotonic.streaming import PAVCalibrator

        c.check_like_fresh(self)
        kind = PAVCalibrator if self.calibrator is None else type(self.calibrator)
        if type(self._global) is not kind or self._global is self.calibrator:
            c.fail(f"`_global`: expected a {kind.__name__} of its own; found {c.brief(self._global)}.")
        fixed = -1.0 if self.between_key_variance is None else float(self.between_key_variance)
        if not c.same_float(self._fixed_tau2, fixed):
            c.fail(f"`_fixed_tau2`: expected {fixed!r} from `between_key_variance`; found {c.brief(self._fixed_tau2)}.")
        slots = self._slots
        if type(slots) is not dict or sorted(slots.values()) != list(range(len(slots))):
            c.fail(f"`_slots`: expected a dict of keys to the slots 0, 1, ...; found {c.brief(slots)}.")
        kinds = {type(key).__name__ for key in slots}
        if self._key_kind not in (None, "int", "str") or kinds - {self._key_kind} or (slots and not kinds):
            c.fail(f"`_key_kind`: expected the one kind of the keys ('int' or 'str'); found {c.brief(self._key_kind)}.")
        n = len(slots)
        arrays = {}
        for name in ("_weight", "_positives", "_expected", "_information", "_offset"):
            arr = c.need_array(getattr(self, name), name, np.float64, size=self._weight.size)
            c.need_finite(arr, name, low=None if name == "_offset" else 0.0)
            if arr.size < max(n, 16) or np.any(arr[n:] != 0.0):
                c.fail(f"`{name}`: expected one value per key ({n}), then zeros; found {arr.size} values.")
            arrays[name] = arr[:n]
        weight, positives, expected = arrays["_weight"], arrays["_positives"], arrays["_expected"]
        slack = 1.0 + 1e-9
        if np.any(positives > weight * slack) or np.any(expected > weight * slack):
            c.fail("`_positives` / `_expected`: expected at most each key's weight.")
        if np.any(arrays["_information"] > expected * slack):
            c.fail("`_information`: expected at most each key's expected positives.")
        offsets = np.array(
            [
                _config.run_interpreted(_ko.offset_estimate, *row)
                for row in zip(weight, positives, expected, strict=True)
            ]
        )
        c.close_to(arrays["_offset"], offsets.reshape(-1), "_offset", "the offsets of the keys' sums")
        agg = c.need_array(self._agg, "_agg", np.float64, size=6)
        c.need_finite(agg, "_agg")
        fresh = np.zeros(6)
        _config.run_interpreted(_ko.refresh_sums, positives, expected, arrays["_information"], n, fresh)
        if agg[4] != fresh[4] or not (0.0 <= agg[5] < n + _ko.REFRESH_FLOOR) or agg[5] != int(agg[5]):
            c.fail("`_agg`: the key count or the update count does not match the keys' sums.")
        if not np.allclose(agg[:4], fresh[:4], rtol=1e-6, atol=1e-9 * (1.0 + abs(fresh[0]))):
            c.fail("`_agg`: the DerSimonian–Laird sums do not match the keys' sums.")

    # ------------------------------------------------------------------ keys
    def _checked_keys(self, keys, scores=None, name: str = "keys"):
        """The key column, coded, its kind checked against the keys seen before, one key per score
        (when ``scores`` are given); changes nothing."""
        column = as_key_column(keys, name, _length(scores))
        if column.keys and self._key_kind is not None and type(column.keys[0]).__name__ != self._key_kind:
            # a column holds one kind of key, so its first event already has the other kind
            msg = (
                f"`{name}` must hold {self._key_kind} keys, as this calibrator learned before; "
                f"got {fmt(column.keys[column.codes[0]])} at position 0 (one kind of key per calibrator)."
            )
            raise InvalidKeyError(msg)
        return column

    def _codes(self, column, learn: bool, learned: np.ndarray | None = None) -> np.ndarray:
        """Each event's slot. A learning call gives the keys it learns (at the ``learned``
        positions; all if None) slots, in the order of their first learned events, as a loop of
        ``learn_one`` does; a key that has none gets -1 (the global map)."""
        slots = self._slots
        if learn:
            if column.keys and self._key_kind is None:
                self._key_kind = type(column.keys[0]).__name__
            size = column.codes.size
            positions = np.arange(size) if learned is None else np.flatnonzero(learned)
            first = np.full(len(column.keys), size, dtype=np.intp)
            np.minimum.at(first, column.codes[positions], positions)
            for j in np.argsort(first, kind="stable").tolist():
                if first[j] == size:
                    break
                key = column.keys[j]
                if key not in slots:
                    slots[key] = len(slots)
            self._grow(len(slots))
        of_unique = np.array([slots.get(key, -1) for key in column.keys], dtype=np.intp)
        return of_unique[column.codes] if column.codes.size else np.zeros(0, dtype=np.intp)

    def _grow(self, n: int) -> None:
        capacity = self._weight.size
        if n <= capacity:
            return
        new = max(n, 2 * capacity)
        for name in ("_weight", "_positives", "_expected", "_information", "_offset"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(new - capacity)]))

    def _run_kernel(self, ops, codes, p0, y, w, out_p) -> None:
        _config.run(
            _ko.keyed_offset_run,
            int(codes.size),
            ops,
            codes,
            p0,
            y,
            w,
            self._weight,
            self._positives,
            self._expected,
            self._information,
            self._offset,
            len(self._slots),
            self._agg,
            self._fixed_tau2,
            out_p,
        )

    def _labels_and_weights(self, n: int, labels, weights, learn=None) -> tuple[np.ndarray, np.ndarray]:
        y, w, _ = check_learn_arrays(
            n, labels, weights, None, learn, max_weight=MAX_WEIGHT, needs_times=False, last_time=0.0, window_name=""
        )
        return y, w

    # ------------------------------------------------------------------ array face
    def update(self, keys, scores, labels, *, weights=None, times=None):
        """Learn labelled events in order; returns ``self``. Same state as :meth:`prequential`."""
        self.prequential(keys, scores, labels, weights=weights, times=times)
        return self

    def prequential(self, keys, scores, labels, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Predict each event with the state before its label, then learn it: ``(proba, llr)``.

        Equal, element for element, to a loop of ``predict_proba_one`` / ``predict_llr_one`` then
        ``learn_one``. ``keys`` are ints or strings (numpy, list, Arrow, pandas or polars); the
        other arguments as in the template calibrator's ``prequential``. The input is checked
        before anything changes.
        """
        with self._lock:
            column = self._checked_keys(keys, scores)
            y, w = self._labels_and_weights(len(column), labels, weights)
            p0, llr = self._global.prequential(scores, labels, weights=weights, times=times)
            codes = self._codes(column, learn=True)
            out = np.empty(codes.size)
            ops = np.full(codes.size, _ko.OP_PREQUENTIAL, dtype=np.int64)
            self._run_kernel(ops, codes, p0, y, w, out)
            return out, llr

    def process(self, keys, scores, labels, learn_mask, *, weights=None, times=None) -> tuple[np.ndarray, np.ndarray]:
        """Run an ordered sequence of operations: learn where ``learn_mask``, else predict.

        As the template calibrator's ``process``: ``(proba, llr)``, NaN at the learn positions.
        A learned event counts toward its key's expected positives at the global map's
        probability just before it is learned.
        """
        with self._lock:
            column = self._checked_keys(keys, scores)
            n = len(column)
            learn = as_binary_labels(learn_mask, "learn_mask", allow_empty=True).astype(bool)
            check_same_length(n, learn.size, "learn_mask")
            y, w = self._labels_and_weights(n, labels, weights, learn)
            # each learned event becomes a prediction then the learning, so that the global map's
            # probability at the moment of learning is known
            source = np.repeat(np.arange(n), np.where(learn, 2, 1))
            learn_op = np.zeros(source.size, dtype=bool)
            learn_op[np.cumsum(np.where(learn, 2, 1)) - 1] = learn
            p0, llr = self._run_global_process(scores, labels, weights, times, source, learn_op, n)
            codes = self._codes(column, learn=True, learned=learn)
            before = np.flatnonzero(~learn_op)  # the predictions, one per event, in order
            ops = np.where(learn, _ko.OP_PREQUENTIAL, _ko.OP_PREDICT).astype(np.int64)
            out = np.empty(n)
            self._run_kernel(ops, codes, p0[before], y, w, out)
            out[learn] = np.nan
            served_llr = llr[before]
            served_llr[learn] = np.nan
            return out, served_llr

    def _run_global_process(self, scores, labels, weights, times, source, learn_op, n):
        """The global calibrator's ``process`` over the expanded sequence, its errors naming the
        caller's positions."""
        expanded = []
        for name, value in (("scores", scores), ("labels", labels), ("weights", weights), ("times", times)):
            if value is None:
                expanded.append(None)
                continue
            arr = _as_column(value)
            if arr.ndim != 1 or arr.size != n:
                msg = f"`{name}` must hold one value per event ({n}); got an array of shape {arr.shape}."
                raise ValueError(msg)
            expanded.append(arr[source])
        s, y, w, t = expanded
        try:
            return self._global.process(s, y, learn_op, weights=w, times=t)
        except (ValueError, TypeError) as error:
            text = _POSITION.sub(lambda m: f"at position {int(source[int(m.group(1))])}", str(error))
            raise type(error)(text) from None

    def predict_proba(self, keys, scores) -> np.ndarray:
        """Calibrated probability of each (key, score) with the current state; a key never learned
        gets the global map's probability."""
        with self._lock:
            column = self._checked_keys(keys, scores)
            p0 = self._global.predict_proba(scores)
            check_same_length(len(column), p0.size, "scores")
            codes = self._codes(column, learn=False)
            out = np.empty(codes.size)
            ops = np.full(codes.size, _ko.OP_PREDICT, dtype=np.int64)
            self._run_kernel(ops, codes, p0, np.zeros(0), np.zeros(0), out)
            return out

    def predict_llr(self, keys, scores) -> np.ndarray:
        """Calibrated (finite) LLR of each score: the global map's (see the class docstring)."""
        with self._lock:
            column = self._checked_keys(keys, scores)
            llr = self._global.predict_llr(scores)
            check_same_length(len(column), llr.size, "scores")
            return llr

    # ------------------------------------------------------------------ river face
    def _key_and_score(self, x) -> tuple:
        """The event's key and the dict the global calibrator reads its score from."""
        if not isinstance(x, dict):
            msg = f"`x` must be a dict holding the key and the score; got {type(x).__name__}."
            raise TypeError(msg)
        if self.key_key not in x:
            msg = f"`x` must hold the key under {self.key_key!r}; got the keys {sorted(map(str, x))!r}."
            raise InvalidKeyError(msg)
        try:
            column = self._checked_keys([x[self.key_key]], name=f"x[{self.key_key!r}]")
        except InvalidKeyError as exc:  # one event: its key has no position
            raise InvalidKeyError(str(exc).replace(" at position 0", "")) from None
        if self.score_key is not None:
            if self.score_key not in x:
                msg = f"`x` must hold the score under {self.score_key!r}; got the keys {sorted(map(str, x))!r}."
                raise ValueError(msg)
            s = x[self.score_key]
        else:
            rest = [value for name, value in x.items() if name != self.key_key]
            if len(rest) != 1:
                msg = (
                    f"`x` must hold exactly one entry besides {self.key_key!r} (the score), or set `score_key`; "
                    f"got {len(rest)}."
                )
                raise ValueError(msg)
            s = rest[0]
        score_key = self._global.score_key
        return column, {score_key if score_key is not None else "score": s}

    def learn_one(self, x: dict, y, w: float = 1.0, t: float | None = None) -> None:
        """Learn one labelled event: ``x`` holds the key and the score, ``y`` the label."""
        with self._lock:
            column, gx = self._key_and_score(x)
            p0 = self._global.predict_proba_one(gx)[True]
            self._global.learn_one(gx, y, w, t)  # checks the label, the weight and the time
            label = 1.0 if as_binary_label(y) else 0.0
            codes = self._codes(column, learn=True)
            ops = np.full(1, _ko.OP_LEARN, dtype=np.int64)
            self._run_kernel(ops, codes, np.array([p0]), np.array([label]), np.array([float(w)]), np.zeros(1))

    def _proba_one(self, x) -> float:
        column, gx = self._key_and_score(x)
        p0 = self._global.predict_proba_one(gx)[True]
        codes = self._codes(column, learn=False)
        out = np.zeros(1)
        self._run_kernel(
            np.full(1, _ko.OP_PREDICT, dtype=np.int64), codes, np.array([p0]), np.zeros(0), np.zeros(0), out
        )
        return float(out[0])

    def predict_proba_one(self, x: dict) -> dict:
        """``{False: 1 - p, True: p}`` with ``p`` the key's calibrated probability of the score."""
        with self._lock:
            p = self._proba_one(x)
        return {False: 1.0 - p, True: p}

    def predict_one(self, x: dict) -> bool:
        """True when the key's calibrated probability exceeds 0.5."""
        with self._lock:
            return self._proba_one(x) > 0.5

    def predict_llr_one(self, x: dict) -> float:
        """Calibrated LLR of the score: the global map's (see the class docstring)."""
        with self._lock:
            _, gx = self._key_and_score(x)
            return float(self._global.predict_llr_one(gx))


def _length(scores) -> int | None:
    """The number of scores of a column of them; None for what is not one (the template's checks
    then name what is wrong with it)."""
    if scores is None or isinstance(scores, (str, bytes, dict)):
        return None
    try:
        arr = _as_column(scores)
    except (TypeError, ValueError):
        return None
    return int(arr.size) if arr.ndim == 1 else None


def _as_column(value) -> np.ndarray:
    """A 1-d numpy view of an array-like argument, its values as given (checked later)."""
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):
        module = type(value).__module__.split(".")[0]
        arr = value.to_numpy(zero_copy_only=False) if module == "pyarrow" else value.to_numpy()
    else:
        arr = np.asarray(value) if not isinstance(value, (list, tuple)) else np.asarray(value, dtype=object)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return arr
