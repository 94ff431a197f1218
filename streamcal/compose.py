"""Calibrate any river classifier on the fly: :class:`CalibratedClassifier`.

The wrapper scores each event with the wrapped model *before* that model learns it, lets the
model learn, then lets the calibrator learn from the out-of-sample score and the label. The
calibrator therefore never sees an in-sample score: its map corrects exactly the scores the model
gives to events it has not seen, which are the scores it will be asked to correct.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from river import base

from streamcal._locking import LockedState
from streamcal._streaming import StreamingCalibrator
from streamcal.exceptions import InvalidKeyError
from streamcal.isotonic.streaming import PAVCalibrator as _PAV
from streamcal.keyed import KeyedCalibrator
from streamcal.keyed_offset import KeyedOffsetCalibrator
from streamcal.multiclass.streaming import _ScoreDictCalibrator
from streamcal.persist import Persistable

__all__ = ["CalibratedClassifier"]

#: Model probabilities this far outside [0, 1] (rounding in a normalisation) are clipped; further is an error.
_ROUNDING = 1e-9

_fsum = math.fsum
_NAN = math.nan


def _key_key(calibrator) -> str | None:
    """The entry of ``x`` a keyed calibrator (:class:`streamcal.KeyedCalibrator`,
    :class:`streamcal.KeyedOffsetCalibrator`) reads each event's key from; None for any other."""
    return calibrator.key_key if isinstance(calibrator, (KeyedCalibrator, KeyedOffsetCalibrator)) else None


class CalibratedClassifier(LockedState, Persistable, base.Wrapper, base.Classifier):
    """A river classifier whose probabilities are calibrated online by a streamcal calibrator.

    For every learned event ``(x, y)``:

    1. the wrapped ``classifier`` scores ``x`` (its ``predict_proba_one``) with its current state,
       which has not learned ``x`` yet;
    2. the ``classifier`` learns ``(x, y)``;
    3. the ``calibrator`` learns from the out-of-sample score of step 1 and the label.

    A prediction is the calibrator's map applied to the classifier's current score.

    **Binary calibrators** (``PAVCalibrator``, ``ISplineCalibrator``, ``GEVCalibrator``,
    ``PlattCalibrator``, or any river classifier taking a one-score dict) get the model's
    probability of ``pos_val`` as ``{"score": p}`` (or ``{calibrator.score_key: p}``) and the label
    ``y == pos_val``. The wrapper is then a binary classifier: ``predict_proba_one``
    returns ``{False: 1 - p, True: p}`` (``False`` stands for the negative class: with labels other
    than bools and 0/1 it is replaced by the first label seen that is not ``pos_val``), and
    ``predict_llr_one`` gives the calibrated log-likelihood ratio. With a bool (or 0/1) ``pos_val``,
    such as the default ``True``, every label must be a bool or 0/1: any other label (``"spam"``,
    ``2``) is an error naming it, since learning it as a negative would silently calibrate the
    wrong question; pass ``pos_val="spam"`` to calibrate ``"spam"`` against the other labels.

    The default calibrator is ``PAVCalibrator()``: exact streaming PAV whose probabilities follow
    the finite pseudo-count rule, never exactly 0 or 1, so that one confident wrong prediction
    does not cost river's ``LogLoss`` its clip value.

    **A model that gives no probability for** ``pos_val``: river's models leave out the classes
    they have not learned (``{}`` before the first event, ``{False: 1.0}`` after negatives only),
    so such a model has learned no positive and gives no score to calibrate. The wrapper then
    serves the add-one (Laplace) probability of the ``n`` events learned so far, all negatives:
    ``1 / (n + 2)``, one half before any event, as a river binary classifier that knows nothing
    answers, and what the finite pseudo-count rule serves after ``n`` unanimous negatives;
    ``predict_llr_one`` gives 0 (no evidence either way) and ``predict_interval_one``
    ``(0, 1 / (n + 1))``. The calibrator still learns such an event, at score 0 (the probability
    river's metrics read for a missing class), and once the model gives a probability for
    ``pos_val`` the calibrator's map serves it.

    **Keyed calibrators** (:class:`streamcal.KeyedCalibrator`, :class:`streamcal.KeyedOffsetCalibrator`)
    calibrate per key (campaign, merchant): the wrapper reads each event's key from ``x`` under the
    calibrator's ``key_key`` and passes ``{key_key: x[key_key], "score": p}``; the model sees the whole
    ``x``, key included (a pipeline as ``classifier`` can drop it, e.g. with ``compose.Discard``). An
    ``x`` without the key is an error, before anything learns.

    **Multiclass calibrators** (calibrators whose ``_multiclass`` is true, such as
    ``streamcal.multiclass.PairwiseCouplingCalibrator``) get the model's whole ``predict_proba_one``
    dict and the label itself, and return a calibrated distribution over the classes.

    The wrapped classifier and calibrator learn in place (as the steps of a river pipeline do):
    after learning, ``model.classifier`` and ``model.calibrator`` are the fitted objects.

    Parameters
    ----------
    classifier
        Any river classifier with ``predict_proba_one``.
    calibrator
        A streamcal binary or multiclass streaming calibrator (or any river classifier with the
        same face: ``learn_one``/``predict_proba_one`` on a score dict). ``None`` (default):
        ``streamcal.PAVCalibrator()``.
    pos_val
        The positive label, for binary calibrators.

    Attributes
    ----------
    n_learned : int
        Number of events learned.

    Notes
    -----
    ``learn_one`` checks the label and the features before anything learns: a float feature that
    is NaN or infinite is an error (it would turn a linear model's weights into NaN for good), and
    the wrapped model and calibrator are then exactly as they were. The calibrator's own checks
    (label, weight, a time window's need of times, a multiclass calibrator's classes) run before
    the model learns too, and the model learns before the calibrator: after an error of the
    model's own ``learn_one`` the calibrator and the wrapper are as they were. A preprocessing step placed
    before the wrapper in a pipeline learns before the wrapper is called and is not protected.
    ``predict_proba_one`` and ``predict_llr_one`` take NaN features as the wrapped model does (a
    tree may handle them); when the model then answers a probability outside [0, 1] (NaN too),
    the error names the non-finite features of ``x``. A rejected call leaves the wrapper as it was.

    ``predict_proba_one`` remembers the last event it scored; when ``learn_one`` follows with an
    equal ``x`` (as in :func:`river.evaluate.progressive_val_score`), the remembered score is
    reused instead of asking the model again. The memory is cleared whenever the wrapper learns,
    so the reused score is always that of the current model; it assumes the wrapped model learns
    only through the wrapper.

    Thread safety: each method holds the wrapper's lock for its whole run (the model's scoring,
    the calibrator's and the model's learning), so threads may share one wrapper; the wrapped
    model and calibrator must then be used only through it.

    Examples
    --------
    >>> from river import datasets, evaluate, linear_model, preprocessing
    >>> from streamcal import CalibratedClassifier, PAVCalibrator, metrics
    >>> model = preprocessing.StandardScaler() | CalibratedClassifier(
    ...     linear_model.LogisticRegression(), PAVCalibrator()
    ... )
    >>> brier = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Brier())
    >>> print(f"{brier.get():.3f}")  # the bare logistic regression scores 0.097
    0.086
    >>> x, _ = next(iter(datasets.Phishing()))
    >>> p = model.predict_proba_one(x)
    >>> sorted(p), round(sum(p.values()), 6)
    ([False, True], 1.0)
    """

    def __init__(self, classifier: base.Classifier, calibrator: base.Classifier | None = None, pos_val=True):
        if not isinstance(classifier, base.Classifier):
            msg = f"`classifier` must be a river classifier; got {classifier!r}."
            raise TypeError(msg)
        if calibrator is None:
            calibrator = _PAV()
        if not isinstance(calibrator, base.Estimator) or not hasattr(calibrator, "learn_one"):
            msg = f"`calibrator` must be a streamcal calibrator (a river classifier); got {calibrator!r}."
            raise TypeError(msg)
        self.classifier = classifier
        self.calibrator = calibrator
        self.pos_val = pos_val
        self._neg_label = False
        self._last_x: dict | None = None
        self._last_proba: dict | None = None
        self.n_learned = 0
        self._init_lock()

    # ------------------------------------------------------------------ river plumbing
    @property
    def _wrapped_model(self):
        return self.classifier

    @property
    def _multiclass(self) -> bool:
        return bool(getattr(self.calibrator, "_multiclass", False)) and bool(self.classifier._multiclass)

    @property
    def _binary_calibrator(self) -> bool:
        return not getattr(self.calibrator, "_multiclass", False)

    @classmethod
    def _unit_test_params(cls):
        from river import linear_model, naive_bayes

        from streamcal import PAVCalibrator

        yield {"classifier": linear_model.LogisticRegression()}  # the default calibrator
        yield {"classifier": linear_model.LogisticRegression(), "calibrator": PAVCalibrator(finite_proba=False)}
        yield {"classifier": naive_bayes.GaussianNB(), "calibrator": PAVCalibrator()}

    # ------------------------------------------------------------------ a restored state
    def _check_loaded_state(self) -> None:
        """Check the attributes a state file restored (see :mod:`streamcal.persist`): a river
        classifier and a calibrator (the streamcal parts were checked when they were restored),
        hashable labels, the remembered score (both parts or neither) and the event count."""
        from streamcal import _state_check as c

        c.need_keys(self, ("classifier", "calibrator", "pos_val", "_neg_label", "_last_x", "_last_proba", "n_learned"))
        c.need_params(self, lambda: CalibratedClassifier(self.classifier, self.calibrator, self.pos_val))
        if self.calibrator is None:  # the constructor puts its default calibrator in place of None
            c.fail("`calibrator`: expected a calibrator; found None.")
        seen, part = {id(self)}, self.calibrator
        while True:  # a wrapper that (through other wrappers) wraps itself would recurse forever
            if id(part) in seen or self.classifier is self:
                c.fail("`calibrator`/`classifier`: a CalibratedClassifier cannot contain itself.")
            if not isinstance(part, CalibratedClassifier):
                break
            seen.add(id(part))
            part = part.calibrator
        for name in ("pos_val", "_neg_label"):
            c.need_params(self, lambda name=name: hash(getattr(self, name)))
        last_x, last_proba = self._last_x, self._last_proba
        if not ((last_x is None and last_proba is None) or (isinstance(last_x, dict) and isinstance(last_proba, dict))):
            found = f"{c.brief(last_x)} and {c.brief(last_proba)}"
            c.fail(f"`_last_x`/`_last_proba`: expected two dicts or two Nones; found {found}.")
        c.need_int(self.n_learned, "n_learned", 0)

    # ------------------------------------------------------------------ scoring
    def _model_proba(self, x: dict) -> dict:
        """The wrapped model's ``predict_proba_one(x)``, or the remembered one for an equal ``x``.

        Remembers nothing: a caller remembers the score (:meth:`_remember`) only once its call is
        accepted, so that a rejected call leaves the wrapper as it was."""
        last = self._last_x
        if last is not None and last == x:
            return self._last_proba
        return self.classifier.predict_proba_one(x)

    def _remember(self, x: dict, proba: dict) -> None:
        if proba is not self._last_proba:
            # a copy, which a caller's later change to x cannot reach (x.copy() is the cheaper copy of a dict)
            self._last_x = x.copy() if x.__class__ is dict else dict(x)
            self._last_proba = proba

    def _multiclass_input(self, proba: dict, x: dict) -> dict:
        for label, p in proba.items():
            if isinstance(p, numbers.Real) and math.isnan(p):
                msg = (
                    f"the wrapped classifier gave a probability of {p!r} to class {label!r}"
                    f"{_non_finite_features(x)}; a probability in [0, 1] is required."
                )
                raise ValueError(msg)
        return proba

    def _calibrator_input(self, x: dict):
        """The calibrator's input for ``x`` and the model's score it comes from; the input is None
        when the model gives a binary calibrator no probability for ``pos_val``."""
        proba = self._model_proba(x)
        if self._binary_calibrator:
            if self.pos_val not in proba:
                return None, proba
            return _score_input(self.calibrator, proba, self.pos_val, x), proba
        return self._multiclass_input(proba, x), proba

    # ------------------------------------------------------------------ river face
    # learn_one and predict_proba_one are the per-event path. They take the lock explicitly (half
    # the cost of a `with` statement), read each attribute once, and inline the common case of
    # the checks (a finite float sum of the features; bool labels; a float probability in [0, 1]),
    # calling the full check only where the common case does not hold.
    #
    # With a PAVCalibrator (its exact class) whose river face is on its lock-free fast path, the
    # wrapper calls the calibrator's packed single-score kernels itself, as that fast path does,
    # with the same conditions (a float score, a bool label, a float weight): the kernel checks
    # the score's range, the weight and the busy mark, and refuses, changing nothing, whatever the
    # calibrator's full checks would judge; the wrapper then hands the call to the calibrator's
    # own learn_one or predict_proba_one, which gives the same result or raises its error. The
    # commonest case (bool labels, ``pos_val=True``, no keyword arguments) runs first, on a lean
    # path with no per-label logic; whatever it refuses falls through to the full path with the
    # score it already took.
    def learn_one(self, x: dict, y, **kwargs) -> None:
        """Score ``x`` with the model, let the model learn ``(x, y)``, then the calibrator that score and ``y``.

        Extra keyword arguments go to the wrapped classifier. A sample weight ``w`` goes to the
        classifier and to the calibrator; an event time ``t`` to the calibrator alone (a calibrator
        windowed by time needs one with every event; river's classifiers take none). Everything
        the calibrator checks is checked before the model learns, and the model learns before the
        calibrator: a call that the wrapper, the model or the calibrator refuses leaves the whole
        wrapper as it was.
        """
        lock = self._lock
        lock.acquire()
        try:
            # the features first, before anything learns: math.fsum of the values (each read as a
            # C double, NumPy scalars too, with no NumPy warning) is finite only when none of them
            # is NaN or infinite; strings, an overflowing sum and the like go to the full check
            try:
                total = _fsum(x.values())
            except Exception:  # values fsum cannot add, or inf - inf: the full check judges
                total = _NAN
            if total - total != 0.0:
                _check_features(x)
            calibrator = self.calibrator
            last = self._last_x
            proba = self._last_proba if last is not None and last == x else self.classifier.predict_proba_one(x)
            if (
                y.__class__ is bool
                and calibrator.__class__ is _PAV
                and not kwargs
                and self.pos_val is True
                and calibrator._fast_learn
            ):
                # the lean path: bool labels of the default positive class, PAV's packed kernel,
                # which refuses a float probability in [0, 1] only while another thread holds the
                # calibrator (its learn_one then waits for it)
                p = proba.get(True, 0.0)
                if p.__class__ is float and 0.0 <= p <= 1.0:
                    self.classifier.learn_one(x, y)  # an error of the model's own changes nothing
                    self._last_x = self._last_proba = None
                    self.n_learned += 1
                    if not calibrator._learn_packed(calibrator._packed, p, y, 1.0, 0.0):
                        calibrator.learn_one({_score_key(calibrator): p}, y)
                    return
            w = kwargs.get("w", 1.0) if kwargs else 1.0
            t = kwargs.pop("t", None) if kwargs else None  # the calibrator's alone: a river model takes no time
            if calibrator.__class__ is not _PAV and getattr(calibrator, "_multiclass", False):
                cal_x, label = self._multiclass_input(proba, x), y
            else:
                pos_val = self.pos_val
                if y.__class__ is bool and pos_val.__class__ is bool:
                    label = y is pos_val
                else:
                    label = _binary_label(y, pos_val)
                p = proba.get(pos_val, 0.0)
                if p.__class__ is not float or not 0.0 <= p <= 1.0:
                    p = _probability_of(p, pos_val, x)
                cal_x = _binary_input(calibrator, p, x)
            _check_calibrator_event(calibrator, cal_x, label, w, t)
            if kwargs:
                self.classifier.learn_one(x, y, **kwargs)
            else:
                self.classifier.learn_one(x, y)
            self._last_x = None
            self._last_proba = None
            self.n_learned += 1
            if not (
                t is None
                and calibrator.__class__ is _PAV
                and w.__class__ is float
                and calibrator._fast_learn
                and calibrator._learn_packed(calibrator._packed, cal_x[_score_key(calibrator)], label, w, 0.0)
            ):
                given = {} if t is None else {"t": t}
                if "w" in kwargs:
                    given["w"] = w
                calibrator.learn_one(cal_x, label, **given)
            if (
                not label
                and self._neg_label is False
                and not getattr(calibrator, "_multiclass", False)
                and self.pos_val.__class__ is not bool
                and not _is_bool_like(self.pos_val)
            ):
                self._neg_label = y  # labels such as "spam" / "ham": the first negative names the class
        finally:
            lock.release()

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        """The calibrated distribution over the classes for ``x``."""
        lock = self._lock
        lock.acquire()
        try:
            calibrator = self.calibrator
            last = self._last_x
            proba = self._last_proba if last is not None and last == x else self.classifier.predict_proba_one(x)
            if calibrator.__class__ is _PAV and self.pos_val is True and calibrator._fast_predict:
                # the lean path: the default positive class, PAV's packed kernel (a model that gives
                # no probability for True takes the full path)
                p = proba.get(True)
                if p.__class__ is float and 0.0 <= p <= 1.0:
                    q = calibrator._proba_packed(calibrator._packed, p)
                    if q >= 0.0:  # -1.0: refused (out of range, busy): the full path below
                        if proba is not self._last_proba:
                            self._last_x = x.copy() if x.__class__ is dict else dict(x)
                            self._last_proba = proba
                        return {self._neg_label: 1.0 - q, True: q}
            if calibrator.__class__ is not _PAV and getattr(calibrator, "_multiclass", False):
                out = calibrator.predict_proba_one(self._multiclass_input(proba, x))
            else:
                pos_val = self.pos_val
                p = proba.get(pos_val)
                if p is None:  # no score to calibrate: the add-one rule on the negatives learned so far
                    q = _no_score_proba(self.n_learned)
                else:
                    if p.__class__ is not float or not 0.0 <= p <= 1.0:
                        p = _probability_of(p, pos_val, x)
                    q = (
                        calibrator._proba_packed(calibrator._packed, p)
                        if calibrator.__class__ is _PAV and calibrator._fast_predict
                        else -1.0
                    )
                    if q < 0.0:  # -1.0: not the packed path, or refused by it (out of range, busy)
                        q = calibrator.predict_proba_one(_binary_input(calibrator, p, x)).get(True, 0.0)
                        if q.__class__ is not float:
                            q = float(q)
                out = {self._neg_label: 1.0 - q, pos_val: q}
            if proba is not self._last_proba:  # remembered once the call is accepted (_remember, inline)
                self._last_x = x.copy() if x.__class__ is dict else dict(x)
                self._last_proba = proba
            return out
        finally:
            lock.release()

    def predict_one(self, x: dict, **kwargs):
        """The most probable class after calibration: in the binary case ``pos_val`` when its calibrated
        probability exceeds 0.5 (at exactly 0.5 the other class), as every streamcal calibrator decides."""
        with self._lock:
            proba = self.predict_proba_one(x)
            if self._binary_calibrator:
                return self.pos_val if proba.get(self.pos_val, 0.0) > 0.5 else self._neg_label
            return max(proba, key=proba.get) if proba else None

    def predict_llr_one(self, x: dict, **kwargs) -> float:
        """The calibrated log-likelihood ratio of ``pos_val`` against the rest (natural log).

        Only for binary calibrators that provide ``predict_llr_one``.
        """
        with self._lock:
            self._need_binary_calibrator_with("predict_llr_one")
            cal_x, proba = self._calibrator_input(x)
            # no score for pos_val: the add-one probability, whose LLR against the add-one prior is 0
            llr = 0.0 if cal_x is None else float(self.calibrator.predict_llr_one(cal_x))
            self._remember(x, proba)
            return llr

    def _need_binary_calibrator_with(self, method: str, example: str = "") -> None:
        if not self._binary_calibrator or not hasattr(self.calibrator, method):
            msg = (
                f"{method} needs a binary calibrator with a `{method}` method{example}; "
                f"got {type(self.calibrator).__name__}."
            )
            raise NotImplementedError(msg)

    def predict_interval_one(self, x: dict, **kwargs) -> tuple[float, float]:
        """The calibrated interval ``(p0, p1)`` of ``pos_val``, from a binary calibrator that gives one
        (:class:`streamcal.VennAbersCalibrator`): its probability were the event's label negative,
        and were it positive. The calibrated probability lies between them.
        """
        with self._lock:
            self._need_binary_calibrator_with("predict_interval_one", " (VennAbersCalibrator)")
            cal_x, proba = self._calibrator_input(x)
            if cal_x is None:  # no score for pos_val: the n events learned so far, all negatives
                p0, p1 = 0.0, 1.0 / (self.n_learned + 1.0)
            else:
                p0, p1 = self.calibrator.predict_interval_one(cal_x)
            self._remember(x, proba)
            return float(p0), float(p1)


def _is_bool_like(y) -> bool:
    return isinstance(y, (bool, np.bool_)) or (isinstance(y, numbers.Real) and y in (0, 1))


def _no_score_proba(n_learned: int) -> float:
    """The probability of ``pos_val`` when the model gives none: it has then learned no positive
    (river's models list every class they have learned), so the add-one (Laplace) rule on the
    ``n_learned`` events so far, all negatives."""
    return 1.0 / (n_learned + 2.0)


def _probability_of(p, pos_val, x) -> float:
    """The model's probability ``p`` of ``pos_val`` as a float in [0, 1]: clipped when a
    normalisation rounded it just past 0 or 1; any other value (NaN too) is an error naming the
    non-finite features of ``x``."""
    p = float(p)
    if not 0.0 <= p <= 1.0:
        if -_ROUNDING <= p <= 1.0 + _ROUNDING:
            p = min(max(p, 0.0), 1.0)  # a normalisation rounded just past 0 or 1
        else:  # NaN too
            msg = (
                f"the wrapped classifier gave a probability of {p!r} to `pos_val` = {pos_val!r}"
                f"{_non_finite_features(x)}; a probability in [0, 1] is required."
            )
            raise ValueError(msg)
    return p


def _score_key(calibrator) -> str:
    """The key of a binary calibrator's one-score dict: its ``score_key``, or ``"score"``."""
    key = getattr(calibrator, "score_key", None)
    return "score" if key is None else key


def _score_input(calibrator, proba: dict, pos_val, x) -> dict:
    """A binary calibrator's input (:func:`_binary_input`) for the model's probability of
    ``pos_val`` (0 when it gives none)."""
    return _binary_input(calibrator, _probability_of(proba.get(pos_val, 0.0), pos_val, x), x)


def _binary_input(calibrator, p: float, x: dict) -> dict:
    """A binary calibrator's input for the model's probability ``p``: ``{score_key: p}``; a keyed
    calibrator's also holds the event's key, read from ``x`` under the calibrator's ``key_key``."""
    key_key = _key_key(calibrator)
    if key_key is None:
        return {_score_key(calibrator): p}
    if not isinstance(x, dict) or key_key not in x:
        found = sorted(map(str, x)) if isinstance(x, dict) else type(x).__name__
        msg = (
            f"`x` must hold the key under {key_key!r} (the keyed calibrator's `key_key`), which the wrapper "
            f"passes to the calibrator with the model's score; got {found}."
        )
        raise InvalidKeyError(msg)
    return {key_key: x[key_key], _score_key(calibrator): p}


def _check_calibrator_event(calibrator, cal_x, label, w, t) -> None:
    """What a streamcal calibrator's ``learn_one(cal_x, label, w=w, t=t)`` checks, checked before the
    model learns, so that a refused event changes neither: the score (or score dict), the label,
    the weight, and the event time (a time window needs one, after the last it learned); a keyed
    calibrator's key too (its kind against the keys learned), through a prediction, which changes
    nothing. Another river calibrator is not checked in advance."""
    if isinstance(calibrator, StreamingCalibrator):
        calibrator._score_of(cal_x)
        if t is None:  # without its lock: with no event time the checks read only the calibrator's parameters
            calibrator._check_one(label, w, None)
        else:
            with calibrator._lock:
                calibrator._check_one(label, w, t)
    elif isinstance(calibrator, _ScoreDictCalibrator):
        with calibrator._lock:
            params = calibrator._checked_params()
            calibrator._check_x(cal_x, params)
            calibrator._check_y(label, params)
            calibrator._check_event(w, t, params)
    elif _key_key(calibrator) is not None:
        calibrator.predict_proba_one(cal_x)
        glob = calibrator._global  # itself, not the read-only copy `global_calibrator` gives
        _check_calibrator_event(glob, {_score_key(glob): cal_x[_score_key(calibrator)]}, label, w, t)


def _check_features(x) -> None:
    """Reject a NaN or infinite float feature (before anything learns it)."""
    if not isinstance(x, dict):
        return
    for key, v in x.items():
        if isinstance(v, (float, np.floating)) and not math.isfinite(v):
            msg = f"`x` must hold finite numbers; got {v!r} for feature {key!r}."
            raise ValueError(msg)


def _non_finite_features(x) -> str:
    """``" for `x` with feature 'a' = nan"`` naming the non-finite float features of ``x``
    (the likely reason a model answers NaN), or ``""`` when it has none."""
    if not isinstance(x, dict):
        return ""
    bad = [f"{key!r} = {v!r}" for key, v in x.items() if isinstance(v, (float, np.floating)) and not math.isfinite(v)]
    if not bad:
        return " (every float feature of `x` is finite)"
    shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    return f" for `x` with feature{'s' if len(bad) > 1 else ''} {shown}"


def _binary_label(y, pos_val) -> bool:
    if y is None or (isinstance(y, float) and math.isnan(y)):
        msg = f"`y` must be a class label; got {y!r}."
        raise ValueError(msg)
    positive = bool(y == pos_val)
    if not positive and _is_bool_like(pos_val) and not _is_bool_like(y):
        msg = (
            f"`y` = {y!r} is neither a bool (or 0/1) nor `pos_val` = {pos_val!r}; with a binary "
            f"calibrator, pass the positive label as `pos_val` (for instance pos_val={y!r}), or use "
            "a multiclass calibrator."
        )
        raise ValueError(msg)
    return positive
