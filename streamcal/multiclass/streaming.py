"""Streaming multiclass calibrators: pairwise coupling, and one-vs-rest as the baseline.

Both take, per event, a dict of per-class scores from some multiclass model (its
``predict_proba_one`` output, or per-class logits) and return a calibrated distribution over the
classes. Both are river multiclass classifiers whose binary building block is any streamcal binary
streaming calibrator (``PAVCalibrator`` by default), cloned once per pair or per class.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import math
import numbers
from collections.abc import Iterable, Mapping

import numpy as np
from river import base

from streamcal import _prior
from streamcal._kernels import coupling as _k
from streamcal._locking import LockedState
from streamcal._validation import as_real_array, check_scalar, is_real_number
from streamcal.multiclass.coupling import MAX_ITER_LIMIT, NEWTON_AFTER_SWEEPS
from streamcal.persist import Persistable

__all__ = ["OneVsRestCalibrator", "PairwiseCouplingCalibrator"]

#: Pairwise (and one-vs-rest) log-odds are clipped to [-MAX_LOG_ODDS, MAX_LOG_ODDS]; a class with
#: probability 0, or missing from the score dict, has log-score -inf and lands on the clip.
MAX_LOG_ODDS = 50.0

#: Weight n_ij given in the coupling to a pair that has learned nothing yet (see
#: :class:`PairwiseCouplingCalibrator`): small enough not to matter once the pair has data.
UNSEEN_PAIR_WEIGHT = 1e-6

_SCORE_KINDS = ("proba", "logit")


def _class_order(c):
    """A total order on class labels of mixed types: numbers, then strings, then the rest."""
    if isinstance(c, (numbers.Real, np.bool_)):
        return (0, float(c), "")
    if isinstance(c, str):
        return (1, 0.0, c)
    return (2, 0.0, repr(c))


def _sigmoid(d: float) -> float:
    if d >= 0.0:
        return 1.0 / (1.0 + math.exp(-d))
    e = math.exp(d)
    return e / (1.0 + e)


def _sigmoid_array(d: np.ndarray) -> np.ndarray:
    out = np.empty_like(d)
    pos = d >= 0.0
    out[pos] = 1.0 / (1.0 + np.exp(-d[pos]))
    e = np.exp(d[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _pairwise_log_odds(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        d = sa - sb
    d[np.isnan(d)] = 0.0
    return np.clip(d, -MAX_LOG_ODDS, MAX_LOG_ODDS)


def _within_add_one_bounds(proba: float, weight: float) -> float:
    """A binary calibrator's probability kept within ``[1/(T+2), (T+1)/(T+2)]``, T = its window
    weight: no estimate from T events is surer than add-one smoothing of T unanimous ones.

    PAV's exact map (``finite_proba=False``), like other calibrators given, may return exact 0 and 1;
    coupled or normalised, those become class probabilities of exactly 0, which no finite window
    supports. NaN becomes 0.5.
    """
    if proba != proba:
        return 0.5
    bound = _prior.add_one_bound(weight)
    return min(max(proba, bound), 1.0 - bound)


def _clip(d: float) -> float:
    return MAX_LOG_ODDS if d > MAX_LOG_ODDS else (-MAX_LOG_ODDS if d < -MAX_LOG_ODDS else d)


def _takes_probabilities(buckets) -> bool:
    """Whether a binary calibrator's ``buckets`` parameter means probability scores: ``None`` (the
    default logit grid), a strategy with ``probability_inputs``, or a shorthand meaning one (an
    int or a string, read by :func:`streamcal.buckets.as_buckets`)."""
    if buckets is None:
        return True
    if isinstance(buckets, (numbers.Integral, str)) and not isinstance(buckets, bool):
        return _shorthand_takes_probabilities(buckets)
    return bool(getattr(buckets, "probability_inputs", False))


@functools.lru_cache(maxsize=64)
def _shorthand_takes_probabilities(buckets) -> bool:
    from streamcal.buckets import as_buckets

    try:
        return bool(as_buckets(buckets).probability_inputs)
    except (TypeError, ValueError):
        return False


def _check_class(c, name: str, what: str = "a class label") -> None:
    """Raise unless ``c`` can be a class label: hashable, not None, not NaN.

    The message reads "`name` must be/hold ``what``; got ``c``"."""
    verb = "must be" if what.startswith("a ") else "must have"
    try:
        hash(c)
    except TypeError:
        hashable = what.replace("a class", "a hashable class").replace("class labels", "hashable class labels")
        msg = f"`{name}` {verb} {hashable}; got {c!r} of type {type(c).__name__}."
        raise TypeError(msg) from None
    try:
        nan = bool(c != c)  # NaN of any type (float, numpy, Decimal): never equal to itself
    except Exception:  # a type whose comparison with itself fails is no usable label either
        nan = True
    if c is None or nan:
        msg = f"`{name}` {verb} {what}; got {c!r} (None and NaN are not class labels)."
        raise ValueError(msg)


def _learn_events(events) -> None:
    """Feed each binary calibrator its event, after checking every score dict first (streamcal
    calibrators: ``_score_of``, which changes nothing), so that one refused event leaves all of
    them unchanged."""
    for model, xd, _ in events:
        check = getattr(model, "_score_of", None)
        if check is not None:
            check(xd)
    for model, xd, label in events:
        model.learn_one(xd, label)


def _learn_array(model, values, log_odds, labels, score_dict) -> None:
    """Feed a binary calibrator labelled events: its array face if it has one, else one by one."""
    if hasattr(model, "update"):
        model.update(values, labels)
        return
    for d, y in zip(log_odds.tolist(), labels.tolist(), strict=True):
        model.learn_one(score_dict(model, d), bool(y))


def _predict_array(model, values, log_odds, score_dict) -> np.ndarray:
    if hasattr(model, "predict_proba"):
        return np.asarray(model.predict_proba(values), dtype=np.float64)
    return np.array([float(model.predict_proba_one(score_dict(model, d)).get(True, 0.5)) for d in log_odds])


class _ScoreDictCalibrator(LockedState, Persistable, base.Classifier):
    """Shared machinery: validation of score dicts, the class register, binary calibrator clones.

    Thread safety: each public method holds the calibrator's lock (``streamcal._locking``) for
    its whole run, its binary calibrators included (they are reached only through it).
    """

    def __init__(self, calibrator=None, scores: str = "proba", classes: tuple | None = None):
        self.calibrator = calibrator
        self.scores = scores
        self.classes = classes
        self._classes: list = []  # known classes, in the canonical order
        self._models: dict = {}  # pair (a, b) or class c -> binary calibrator
        self._init_lock()

    @property
    def _multiclass(self) -> bool:
        return True

    # -- parameters and the class register ---------------------------------------------------

    def _check_params(self) -> None:
        check_scalar(self.scores, "scores", choices=_SCORE_KINDS)
        if self.classes is not None:
            if isinstance(self.classes, (str, bytes, Mapping)) or not isinstance(self.classes, Iterable):
                msg = f"`classes` must be a tuple of class labels; got {self.classes!r}."
                raise TypeError(msg)
            fixed = list(self.classes)
            if not fixed:
                msg = "`classes` must name at least one class; got an empty tuple."
                raise ValueError(msg)
            for c in fixed:
                _check_class(c, "classes", "class labels as elements")
            if len(set(fixed)) != len(fixed):
                msg = f"`classes` must not repeat a class; got {self.classes!r}."
                raise ValueError(msg)
        calibrator = self.calibrator
        if calibrator is not None:
            for name in ("learn_one", "predict_proba_one", "clone", "window_weight"):
                if not hasattr(calibrator, name):
                    msg = (
                        f"`calibrator` must be a binary streaming calibrator (with learn_one, "
                        f"predict_proba_one, clone and window_weight); got {calibrator!r}, which has no {name}."
                    )
                    raise TypeError(msg)
            window = getattr(calibrator, "window", None)
            if getattr(window, "uses_times", False):
                msg = (
                    f"`calibrator` must not use a time window ({type(window).__name__}): the multiclass "
                    "calibrators pass no event times to it."
                )
                raise ValueError(msg)

    def _order_key(self, c):
        if self.classes is not None:
            return list(self.classes).index(c)
        return _class_order(c)

    def _known(self) -> list:
        return list(self.classes) if self.classes is not None else self._classes

    def _new_binary(self):
        if self.calibrator is None:
            from streamcal import PAVCalibrator

            return PAVCalibrator()
        return self.calibrator.clone()

    @staticmethod
    def _score_dict(model, log_odds: float) -> dict:
        """The one-score dict a binary calibrator is given for a (pairwise or class) log-odds.

        streamcal calibrators whose bucket strategy takes probabilities (``LogitGrid``, their
        default) get ``sigmoid(log_odds)``: the same order, and their logit-spaced grid is then an
        even grid on the log-odds. Any other calibrator gets the log-odds itself.
        """
        key = getattr(model, "score_key", None)
        if hasattr(model, "buckets") and _takes_probabilities(model.buckets):
            return {key if key is not None else "score": _sigmoid(log_odds)}
        return {key if key is not None else "score": log_odds}

    # -- a restored state ---------------------------------------------------------------------

    def _check_loaded_state(self) -> None:
        """Check the attributes a state file restored (see :mod:`streamcal.persist`): valid
        parameters; the learned classes distinct and in order (none with fixed ``classes``); one
        binary calibrator of the prototype's class per pair of known classes (pairwise coupling)
        or per known class (one-vs-rest), each checked when it was restored."""
        from streamcal import _state_check as c

        c.check_like_fresh(self)
        c.need_params(self, self._check_params)
        if self.calibrator is not None and not (
            isinstance(self.calibrator, base.Classifier) and hasattr(self.calibrator, "window_weight")
        ):
            found = c.brief(self.calibrator)
            c.fail(f"`calibrator`: expected a binary streaming calibrator or None; found {found}.")
        learned = self._classes
        if self.classes is not None and learned:
            c.fail(f"`_classes`: expected no learned classes when `classes` is fixed; found {c.brief(learned)}.")
        try:
            keys = [_class_order(cls) for cls in learned]
            ordered = len(set(learned)) == len(learned) and all(a <= b for a, b in itertools.pairwise(keys))
        except TypeError:
            ordered = False
        if not ordered:
            c.fail(f"`_classes`: expected distinct classes in their canonical order; found {c.brief(learned)}.")
        known = self._known()
        rank = {cls: i for i, cls in enumerate(known)}
        if self.classes is not None:
            rank = {cls: self._order_key(cls) for cls in known}
        if self.calibrator is None:
            from streamcal import PAVCalibrator

            kind = PAVCalibrator
        else:
            kind = type(self.calibrator)
        pairs = isinstance(self, PairwiseCouplingCalibrator)
        for key, model in self._models.items():
            if pairs:
                ok = type(key) is tuple and len(key) == 2 and all(k in rank for k in key)
                ok = ok and rank[key[0]] < rank[key[1]]
            else:
                ok = key in rank
            if not ok:
                c.fail(f"`_models`: {c.brief(key)} is not a {'pair of known classes' if pairs else 'known class'}.")
            if type(model) is not kind or model is self.calibrator:
                c.fail(f"`_models[{key!r}]`: expected a {kind.__name__} of its own; found {c.brief(model)}.")

    # -- validation ---------------------------------------------------------------------------

    def _check_x(self, x) -> dict:
        """Validate a score dict; return {class: log-score} (``-inf`` for probability 0)."""
        if not isinstance(x, Mapping):
            msg = f"`x` must be a dict of per-class scores; got a {type(x).__name__}."
            raise TypeError(msg)
        fixed = None if self.classes is None else set(self.classes)
        out = {}
        for c, v in x.items():
            if fixed is not None and c not in fixed:
                msg = f"`x` holds a score for class {c!r}, which is not among `classes` {list(self.classes)!r}."
                raise ValueError(msg)
            _check_class(c, "x", "class labels as keys")
            if not is_real_number(v):
                msg = f"`x` must map classes to numbers; got {v!r} for class {c!r}."
                raise TypeError(msg)
            try:
                v = float(v)
            except OverflowError:
                msg = f"`x` must hold numbers within the float64 range; got {v!r} for class {c!r}."
                raise ValueError(msg) from None
            if self.scores == "proba":
                if not 0.0 <= v <= 1.0:
                    msg = f"`x` must hold probabilities in [0, 1]; got {v!r} for class {c!r}."
                    raise ValueError(msg)
                out[c] = math.log(v) if v > 0.0 else -math.inf
            else:
                if not math.isfinite(v):
                    msg = f"`x` must hold finite logits; got {v!r} for class {c!r}."
                    raise ValueError(msg)
                out[c] = v
        return out

    def _check_y(self, y) -> None:
        _check_class(y, "y")
        if self.classes is not None and y not in set(self.classes):
            msg = f"`y` = {y!r} is not among `classes` {list(self.classes)!r}."
            raise ValueError(msg)

    # -- array face ----------------------------------------------------------------------

    def _fixed_classes(self, method: str) -> list:
        if self.classes is None:
            msg = (
                f"`{method}` needs the classes fixed in advance: construct with "
                f"`classes=(...)`, naming the columns of `scores` in order."
            )
            raise ValueError(msg)
        return list(self.classes)

    def _check_score_array(self, scores, classes: list) -> np.ndarray:
        """Validate an (m, K) score array; return its log-scores (-inf for probability 0)."""
        raw = as_real_array(scores, "scores", what="an (m, K) array of numbers")
        try:
            arr = np.array(raw, dtype=np.float64, copy=True, order="C")
        except OverflowError:
            msg = "`scores` must hold numbers within the float64 range."
            raise ValueError(msg) from None
        k = len(classes)
        if arr.ndim != 2 or arr.shape[1] != k:
            msg = (
                f"`scores` must have shape (m, {k}), one column per class of `classes`; got an "
                f"array of shape {arr.shape}."
            )
            raise ValueError(msg)
        if self.scores == "proba":
            bad = ~((arr >= 0.0) & (arr <= 1.0))
            what = "probabilities in [0, 1]"
        else:
            bad = ~np.isfinite(arr)
            what = "finite logits"
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            msg = f"`scores` must hold {what}; got {float(arr[i, j])!r} at position ({i}, {j}) (class {classes[j]!r})."
            raise ValueError(msg)
        if self.scores == "proba":
            with np.errstate(divide="ignore"):
                return np.log(arr)
        return arr

    def _check_label_array(self, labels, m: int, classes: list) -> np.ndarray:
        """Validate labels against the fixed classes; return their column indices (intp)."""
        if isinstance(labels, (str, bytes)):
            msg = f"`labels` must be a 1-d sequence of class labels; got a {type(labels).__name__}."
            raise TypeError(msg)
        values = list(labels)
        if len(values) != m:
            msg = f"`labels` must have the same length as the scores ({m}); got {len(values)}."
            raise ValueError(msg)
        index = {c: i for i, c in enumerate(classes)}
        out = np.empty(m, dtype=np.intp)
        for t, y in enumerate(values):
            try:
                out[t] = index[y]
            except (KeyError, TypeError):
                msg = f"`labels` holds {y!r} at position {t}, which is not among `classes` {classes!r}."
                raise ValueError(msg) from None
        return out

    @staticmethod
    def _score_array(model, log_odds: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`_score_dict`: what the binary calibrator's array face is given."""
        if hasattr(model, "buckets") and _takes_probabilities(model.buckets):
            return _sigmoid_array(log_odds)
        return log_odds

    def _register(self, new) -> None:
        if self.classes is not None:
            return
        known = set(self._classes)
        for c in new:
            if c not in known:
                bisect.insort(self._classes, c, key=_class_order)
                known.add(c)

    @contextlib.contextmanager
    def _registering(self, new):
        """Register the classes ``new`` for one ``learn_one``; yields ``new_model(key)``, which
        adds a fresh binary calibrator. If the body raises, the classes and calibrators it added
        are removed again, so a rejected event leaves the register as it was."""
        classes = list(self._classes)
        added = []

        def new_model(key):
            model = self._models[key] = self._new_binary()
            added.append(key)
            return model

        self._register(new)
        try:
            yield new_model
        except BaseException:
            self._classes[:] = classes
            for key in added:
                del self._models[key]
            raise

    def _output_classes(self, s: dict) -> list:
        known = self._known()
        extra = [c for c in s if c not in set(known)]
        if not extra:
            return list(known)
        return sorted([*known, *extra], key=_class_order)


class PairwiseCouplingCalibrator(_ScoreDictCalibrator):
    """Multiclass calibration by pairwise coupling (Hastie & Tibshirani 1998).

    For every pair of classes (i, j) a binary streaming calibrator learns, from the events of
    class i or j only, P(i | i or j) as a function of the pairwise log-odds s_i - s_j (s_i = log p_i
    for probabilities, the logit itself for logits). A prediction evaluates every pair's calibrator
    on the event's own pairwise log-odds and couples the r_ij into one distribution with
    :func:`streamcal.pairwise_couple`, weighting each pair by n_ij = its calibrator's
    ``window_weight``: pairs with much evidence in their window count for more.

    Classes may appear at any time (as a label, or as a key of a score dict): a new class joins
    with fresh pairs. A pair that has learned nothing yet (or whose window is empty) takes the
    model's own pairwise probability ``sigmoid(s_i - s_j)`` with the tiny weight
    ``UNSEEN_PAIR_WEIGHT``, so before any learning the output is the model's distribution
    (normalised; softmax of the logits), and unseen pairs never outweigh pairs with data.

    A pair's calibrated probability is kept within the add-one bounds of its window,
    ``[1/(T+2), (T+1)/(T+2)]`` with T its ``window_weight``: PAV's exact map
    (``finite_proba=False``) says exactly 0 or 1 at the ends of its range, and coupling such r_ij
    gives class probabilities of exactly 0, which no finite window supports (and which log loss
    punishes without limit). The default ``PAVCalibrator()`` never does.

    Parameters
    ----------
    calibrator
        A binary streaming calibrator (river classifier with ``learn_one``/``predict_proba_one`` on
        a one-score dict and a ``window_weight`` property), cloned for every pair. ``None``:
        ``streamcal.PAVCalibrator()``.
    scores
        ``"proba"``: the dict values are class probabilities (a class missing from the dict has
        probability 0). ``"logit"``: they are per-class logits (a missing class counts as -inf).
        Pairwise log-odds are clipped to ``[-MAX_LOG_ODDS, MAX_LOG_ODDS]`` (50).
    method
        Coupling method of :func:`streamcal.pairwise_couple`: ``"ht"`` or ``"wlw"``.
    tol
        Coupling tolerance (``"ht"``).
    max_iter
        Most coupling iterations per prediction (``"ht"``, with Newton steps; see
        :func:`streamcal.pairwise_couple`); a prediction that has not converged by then is the
        last iterate, silently.
    classes
        The fixed set of classes, if known in advance; a score or label for any other class is
        then an error. ``None``: classes are learned from the stream.

    Attributes
    ----------
    pairs_ : dict
        (class_i, class_j) -> the binary calibrator of that pair, for the pairs that have learned.

    Examples
    --------
    A three-class stream whose model is over-confident: its probabilities are the true ones
    squared and renormalised. Multiclass log loss (cross-entropy) of the model and of the
    calibrated probabilities, each event predicted before it is learned, after 1000 events:

    >>> import numpy as np
    >>> from river import metrics
    >>> from streamcal.multiclass import PairwiseCouplingCalibrator
    >>> rng = np.random.default_rng(0)
    >>> cal = PairwiseCouplingCalibrator()
    >>> raw, calibrated = metrics.CrossEntropy(), metrics.CrossEntropy()
    >>> for t in range(3000):
    ...     p = rng.dirichlet([1.0, 1.0, 1.0])
    ...     y = int(rng.choice(3, p=p))
    ...     q = p**2 / (p**2).sum()
    ...     x = {c: float(q[c]) for c in range(3)}
    ...     if t >= 1000:
    ...         raw.update(y, x)
    ...         calibrated.update(y, cal.predict_proba_one(x))
    ...     cal.learn_one(x, y)
    >>> print(f"{raw.get():.3f} -> {calibrated.get():.3f}")
    0.980 -> 0.862
    """

    def __init__(
        self,
        calibrator=None,
        scores: str = "proba",
        method: str = "ht",
        tol: float = 1e-8,
        max_iter: int = 200,
        classes: tuple | None = None,
    ):
        super().__init__(calibrator=calibrator, scores=scores, classes=classes)
        self.method = method
        self.tol = tol
        self.max_iter = max_iter

    @property
    def pairs_(self) -> dict:
        with self._lock:
            return dict(self._models)

    def _check_params(self) -> None:
        super()._check_params()
        check_scalar(self.method, "method", choices=("ht", "wlw"))
        check_scalar(self.tol, "tol", numbers.Real, low=0.0)
        check_scalar(self.max_iter, "max_iter", numbers.Integral, low=0, high=MAX_ITER_LIMIT)

    def learn_one(self, x, y) -> None:
        """Learn one event: every pair (y, j) sees the pairwise log-odds s_y - s_j."""
        with self._lock:
            self._check_params()
            s = self._check_x(x)
            self._check_y(y)
            with self._registering([*s, y]) as new_model:
                neg_inf = -math.inf
                sy = s.get(y, neg_inf)
                ky = self._order_key(y)
                events = []
                for c in self._known():
                    if c == y:
                        continue
                    sc = s.get(c, neg_inf)
                    if self._order_key(c) > ky:
                        pair, d, label = (y, c), sy - sc, True
                    else:
                        pair, d, label = (c, y), sc - sy, False
                    d = 0.0 if math.isnan(d) else _clip(d)
                    model = self._models.get(pair)
                    if model is None:
                        model = new_model(pair)
                    events.append((model, self._score_dict(model, d), label))
                _learn_events(events)

    def _pairwise(self, x):
        """Validated classes, r and n ((1, K, K) each) for one score dict."""
        s = self._check_x(x)
        classes = self._output_classes(s)
        k = len(classes)
        neg_inf = -math.inf
        logs = [s.get(c, neg_inf) for c in classes]
        models = self._models
        r_upper = []
        n_upper = []
        for a in range(k):
            ca, la = classes[a], logs[a]
            for b in range(a + 1, k):
                d = la - logs[b]
                d = 0.0 if d != d else _clip(d)
                model = models.get((ca, classes[b]))
                weight = 0.0 if model is None else float(model.window_weight)
                if weight > 0.0:
                    rab = float(model.predict_proba_one(self._score_dict(model, d)).get(True, 0.5))
                    rab = _within_add_one_bounds(rab, weight)
                else:
                    rab, weight = _sigmoid(d), UNSEEN_PAIR_WEIGHT
                r_upper.append(rab)
                n_upper.append(weight)
        iu, ju = np.triu_indices(k, 1)
        r = np.zeros((1, k, k))
        n = np.zeros((1, k, k))
        r_up = np.array(r_upper)
        r[0, iu, ju] = r_up
        r[0, ju, iu] = 1.0 - r_up
        n[0, iu, ju] = n[0, ju, iu] = n_upper
        return classes, r, n

    def predict_proba_one(self, x) -> dict:
        """Calibrated distribution over the known classes and any new class scored in ``x``."""
        with self._lock:
            self._check_params()
            classes, r, n = self._pairwise(x)
            k = len(classes)
            if k <= 2:
                return {c: float(r[0, i, 1 - i]) if k == 2 else 1.0 for i, c in enumerate(classes)}
            p = np.empty((1, k))
            if self.method == "ht":
                _k.ht_couple_batch(
                    r, n, float(self.tol), int(self.max_iter), NEWTON_AFTER_SWEEPS, p, np.empty(1, np.intp)
                )
            else:
                _k.wlw_couple_batch(r, n, p, np.empty(1, np.bool_))
            return {c: float(p[0, i]) for i, c in enumerate(classes)}

    def update(self, scores, labels):
        """Learn events in order from an (m, K) score array; equal to a loop of ``learn_one``.

        Needs ``classes`` fixed: column k of ``scores`` is the score of ``classes[k]``. Each pair's
        calibrator learns its own events (those labelled with either of its classes) in one call
        of its array face (``update``), or event by event if it has none. Returns ``self``.
        """
        with self._lock:
            self._check_params()
            classes = self._fixed_classes("update")
            logs = self._check_score_array(scores, classes)
            y = self._check_label_array(labels, logs.shape[0], classes)
            k = len(classes)
            for a in range(k):
                for b in range(a + 1, k):
                    mine = (y == a) | (y == b)
                    if not mine.any():
                        continue
                    pair = (classes[a], classes[b])
                    model = self._models.get(pair)
                    if model is None:
                        model = self._models[pair] = self._new_binary()
                    d = _pairwise_log_odds(logs[mine, a], logs[mine, b])
                    _learn_array(model, self._score_array(model, d), d, y[mine] == a, self._score_dict)
            return self

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated probabilities (m, K) for an (m, K) score array, columns as ``classes``.

        Equal to stacking ``predict_proba_one`` over the rows; the coupling of all rows is one
        kernel call.
        """
        with self._lock:
            self._check_params()
            classes = self._fixed_classes("predict_proba")
            logs = self._check_score_array(scores, classes)
            m, k = logs.shape
            if k == 1:
                return np.ones((m, 1))
            r = np.zeros((m, k, k))
            n = np.zeros((1, k, k))
            for a in range(k):
                for b in range(a + 1, k):
                    d = _pairwise_log_odds(logs[:, a], logs[:, b])
                    model = self._models.get((classes[a], classes[b]))
                    weight = 0.0 if model is None else float(model.window_weight)
                    if weight > 0.0:
                        rab = _predict_array(model, self._score_array(model, d), d, self._score_dict)
                        bound = _prior.add_one_bound(weight)
                        rab = np.clip(np.nan_to_num(rab, nan=0.5), bound, 1.0 - bound)
                    else:
                        rab, weight = _sigmoid_array(d), UNSEEN_PAIR_WEIGHT
                    r[:, a, b] = rab
                    r[:, b, a] = 1.0 - rab
                    n[0, a, b] = n[0, b, a] = weight
            if k == 2:
                return np.column_stack([r[:, 0, 1], r[:, 1, 0]])
            p = np.empty((m, k))
            if self.method == "ht":
                _k.ht_couple_batch(
                    r, n, float(self.tol), int(self.max_iter), NEWTON_AFTER_SWEEPS, p, np.empty(m, np.intp)
                )
            else:
                _k.wlw_couple_batch(r, n, p, np.empty(m, np.bool_))
            return p

    @classmethod
    def _unit_test_params(cls):
        from streamcal import PAVCalibrator
        from streamcal.windows import CountWindow

        yield {}
        yield {"method": "wlw", "calibrator": PAVCalibrator(window=CountWindow(100))}


class OneVsRestCalibrator(_ScoreDictCalibrator):
    """One-vs-rest calibration, then normalisation: the baseline for pairwise coupling.

    For every class c a binary streaming calibrator learns P(y = c) from *every* event, as a
    function of the class's own log-odds (``logit(p_c)`` for probabilities, the logit itself for
    logits). A prediction calibrates each class separately and divides by the sum. A class whose
    calibrator has learned nothing yet uses the model's own probability (``sigmoid`` of its logit).
    As for pairs, each class's calibrated probability is kept within the add-one bounds of its
    window, ``[1/(T+2), (T+1)/(T+2)]``.

    Parameters
    ----------
    calibrator
        A binary streaming calibrator, cloned for every class. ``None``:
        ``streamcal.PAVCalibrator()``.
    scores
        ``"proba"`` or ``"logit"``, as for :class:`PairwiseCouplingCalibrator`.
    classes
        The fixed set of classes, or ``None`` to learn them from the stream.

    Examples
    --------
    >>> import numpy as np
    >>> from river import metrics
    >>> from streamcal.multiclass import OneVsRestCalibrator
    >>> rng = np.random.default_rng(0)
    >>> cal = OneVsRestCalibrator()
    >>> raw, calibrated = metrics.CrossEntropy(), metrics.CrossEntropy()
    >>> for t in range(3000):
    ...     p = rng.dirichlet([1.0, 1.0, 1.0])
    ...     y = int(rng.choice(3, p=p))
    ...     q = p**2 / (p**2).sum()
    ...     x = {c: float(q[c]) for c in range(3)}
    ...     if t >= 1000:
    ...         raw.update(y, x)
    ...         calibrated.update(y, cal.predict_proba_one(x))
    ...     cal.learn_one(x, y)
    >>> print(f"{raw.get():.3f} -> {calibrated.get():.3f}")
    0.980 -> 0.861
    """

    @classmethod
    def _unit_test_params(cls):
        from streamcal import PAVCalibrator
        from streamcal.windows import CountWindow

        yield {}
        yield {"calibrator": PAVCalibrator(window=CountWindow(100))}

    @property
    def calibrators_(self) -> dict:
        """class -> its binary calibrator."""
        with self._lock:
            return dict(self._models)

    def _class_log_odds(self, s: dict, c) -> float:
        v = s.get(c, -math.inf)
        if self.scores == "proba":
            if v == -math.inf:
                return -MAX_LOG_ODDS
            p = math.exp(v)
            d = v - math.log1p(-p) if p < 1.0 else math.inf
        else:
            d = v
        return _clip(d)

    def learn_one(self, x, y) -> None:
        """Learn one event: every known class c sees its own log-odds with label ``y == c``."""
        with self._lock:
            self._check_params()
            s = self._check_x(x)
            self._check_y(y)
            with self._registering([*s, y]) as new_model:
                events = []
                for c in self._known():
                    model = self._models.get(c)
                    if model is None:
                        model = new_model(c)
                    events.append((model, self._score_dict(model, self._class_log_odds(s, c)), c == y))
                _learn_events(events)

    def _class_log_odds_array(self, logs: np.ndarray) -> np.ndarray:
        if self.scores == "proba":
            p = np.exp(logs)
            with np.errstate(divide="ignore"):
                d = logs - np.log1p(-p)
        else:
            d = logs
        return np.clip(d, -MAX_LOG_ODDS, MAX_LOG_ODDS)

    def update(self, scores, labels):
        """Learn events in order from an (m, K) score array; equal to a loop of ``learn_one``.

        Needs ``classes`` fixed: column k of ``scores`` is the score of ``classes[k]``.
        Returns ``self``.
        """
        with self._lock:
            self._check_params()
            classes = self._fixed_classes("update")
            logs = self._check_score_array(scores, classes)
            y = self._check_label_array(labels, logs.shape[0], classes)
            if y.size == 0:
                return self
            for c, name in enumerate(classes):
                model = self._models.get(name)
                if model is None:
                    model = self._models[name] = self._new_binary()
                d = self._class_log_odds_array(logs[:, c])
                _learn_array(model, self._score_array(model, d), d, y == c, self._score_dict)
            return self

    def predict_proba(self, scores) -> np.ndarray:
        """Calibrated, normalised probabilities (m, K) for an (m, K) score array."""
        with self._lock:
            self._check_params()
            classes = self._fixed_classes("predict_proba")
            logs = self._check_score_array(scores, classes)
            q = np.empty_like(logs)
            for c, name in enumerate(classes):
                d = self._class_log_odds_array(logs[:, c])
                model = self._models.get(name)
                weight = 0.0 if model is None else float(model.window_weight)
                if weight > 0.0:
                    v = _predict_array(model, self._score_array(model, d), d, self._score_dict)
                    bound = _prior.add_one_bound(weight)
                    q[:, c] = np.clip(np.nan_to_num(v, nan=0.5), bound, 1.0 - bound)
                else:
                    q[:, c] = _sigmoid_array(d)
            total = q.sum(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                p = q / total
            p[total[:, 0] == 0.0] = 1.0 / logs.shape[1]
            return p

    def predict_proba_one(self, x) -> dict:
        """Calibrated one-vs-rest probabilities, normalised to sum to 1."""
        with self._lock:
            self._check_params()
            s = self._check_x(x)
            classes = self._output_classes(s)
            if not classes:
                return {}
            q = []
            for c in classes:
                d = self._class_log_odds(s, c)
                model = self._models.get(c)
                weight = 0.0 if model is None else float(model.window_weight)
                if weight > 0.0:
                    v = float(model.predict_proba_one(self._score_dict(model, d)).get(True, 0.5))
                    v = _within_add_one_bounds(v, weight)
                else:
                    v = _sigmoid(d)
                q.append(v)
            total = sum(q)
            if total > 0.0:
                return {c: v / total for c, v in zip(classes, q, strict=True)}
            return {c: 1.0 / len(classes) for c in classes}
