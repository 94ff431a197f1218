"""Calibration metrics as river metrics that update per event.

Each metric keeps running sums, so ``update`` and ``revert`` are O(1) (O(log distinct scores)
for :class:`MinCllr`) and ``get`` equals the array function of the same name on the events seen
so far. The positive class is ``pos_val`` (``True`` unless given), as in river's binary metrics: a
label is positive when it equals ``pos_val``. ``y_pred`` is what river passes to a probabilistic
metric: a probability of the positive class or a ``predict_proba_one`` dict, read at ``pos_val`` (a
dict without it gives the positive class probability 0, as river's models leave out the classes
they have not learned, when its other probabilities add up to 1); :class:`Cllr` takes LLRs
instead, see there. Every update validates its event before touching the state.
"""

from __future__ import annotations

import bisect
import math
import numbers

import numpy as np
from river import metrics

from streamcal._locking import LockedState, locked
from streamcal._validation import check_scalar
from streamcal.metrics._array import _min_cllr, hl_from_sums, hosmer_lemeshow
from streamcal.metrics._inputs import check_pos_val, event_proba, event_score, event_weight, metric_label
from streamcal.metrics._scoring_rules import _check_weighting, _partial_losses

__all__ = [
    "ECE",
    "Brier",
    "CalibrationLoss",
    "Cllr",
    "HosmerLemeshow",
    "LogLoss",
    "MinCllr",
    "ProperScoringRule",
]

_LN2 = math.log(2.0)


# Relative slack of the weight check of ``revert``: the running sums carry rounding errors.
_REVERT_SLACK = 1e-6


def _event(y_true, y_pred, w) -> str:
    """The event of a refused ``revert``, as its error names it."""
    return f"(`y_true`, `y_pred`, `w`) = ({y_true!r}, {y_pred!r}, {w!r})"


def _check_left(count: int, weight: float, w: float, where: str, event: str) -> None:
    """Refuse a revert of weight ``w`` from a part of the state (``where``: "in bin 3") holding
    ``count`` events of total ``weight``: no event left there, or less weight than ``w``."""
    if count <= 0:
        msg = f"cannot revert the event {event}: it was never added; the metric holds no event {where}."
        raise ValueError(msg)
    if w > weight * (1.0 + _REVERT_SLACK) + _REVERT_SLACK * w:
        msg = (
            f"cannot revert the event {event}: it was never added; `w` = {w!r} exceeds the weight left "
            f"{where}, {weight!r}."
        )
        raise ValueError(msg)


def _check_sums(sums, where: str, scale: float, event: str) -> None:
    """Refuse a revert that would take more from a running sum of non-negative terms than it holds:
    ``sums`` is ``[(name, held, taken), ...]``; ``scale`` (the weight of that part of the state)
    sets the rounding slack."""
    for name, held, taken in sums:
        if taken - held > _REVERT_SLACK * (abs(held) + taken + scale):
            msg = (
                f"cannot revert the event {event}: it was never added; it would take "
                f"{taken!r} from the {name} {where}, which holds {held!r}."
            )
            raise ValueError(msg)


def _positives(counts: list, weights: list, positive_weights: list) -> list:
    """The positive counts of the parts (bins, groups) of a state saved without them: 0 where a
    part holds no positive weight, all its events where it holds nothing else (the two sums then
    took the same additions), -1 (unknown) where it holds both classes."""
    return [
        0 if wy == 0.0 else (n if wy == w else -1)
        for n, w, wy in zip(counts, weights, positive_weights, strict=False)
    ]


class _ProbaMetric(LockedState, metrics.base.BinaryMetric):
    """Base: a binary metric on probabilities, lower is better, no confusion matrix.

    ``update``, ``revert`` and ``get`` hold the metric's lock (``streamcal._locking``): a thread
    may read a metric while another updates it.
    """

    _fmt = ".6f"

    def _check_loaded_state(self) -> None:
        """A restored metric (:mod:`streamcal.persist`): pure Python sums; sizes that follow a
        parameter are checked before the parameter builds a fresh metric."""
        from streamcal import _state_check as c

        state = vars(self)
        for param, attr in (("n_bins", "_n"), ("n_groups", "_counts")):
            if param in state:
                n, have = state[param], state.get(attr)
                if type(have) is not list or type(n) is not int or len(have) != n:
                    c.fail(f"`{attr}`: expected a list of `{param}` = {c.brief(n)} counts; found {c.brief(have)}.")
        fresh = c.check_like_fresh(self)
        if "_edges" in vars(fresh) and state["_edges"] != fresh._edges:
            c.fail("`_edges`: expected the bin edges of `n_bins` equal bins.")
        for total, positives in (("_n", "_n_pos"), ("_counts", "_counts_pos")):
            if positives not in state:
                continue
            if not all(-1 <= a <= b for a, b in zip(state[positives], state[total], strict=True)):
                found = c.brief(state[positives])
                c.fail(f"`{positives}`: expected counts between 0 (-1: unknown) and those of `{total}`; found {found}.")
        for i, event in enumerate(state.get("_events") or ()):
            if not (
                type(event) is tuple
                and len(event) == 3
                and type(event[0]) is bool
                and type(event[1]) is float
                and type(event[2]) is float
            ):
                c.fail(f"`_events[{i}]`: expected a (label, probability, weight) tuple; found {c.brief(event)}.")
        for table in ("_pos", "_neg"):
            for key, entry in (state.get(table) or {}).items():
                if not (
                    type(key) is float
                    and type(entry) is list
                    and len(entry) == 2
                    and type(entry[0]) is float
                    and type(entry[1]) is int
                ):
                    c.fail(f"`{table}[{key!r}]`: expected a score mapped to [weight, count]; found {c.brief(entry)}.")

    def __setstate__(self, state):
        super().__setstate__(self._with_class_counts(state))

    @staticmethod
    def _with_class_counts(state: dict) -> dict:
        """A state saved before the per-class counts of the revert check, with them added: the
        counts follow from the sums where a part of the state holds one class only, and are
        marked unknown (-1) elsewhere, where ``revert`` checks the part's totals until it empties."""
        return state

    def __init__(self, pos_val=True):
        # BinaryMetric.__init__ would build a confusion matrix we never use
        self.pos_val = check_pos_val(pos_val)
        self._init_lock()

    @property
    def bigger_is_better(self) -> bool:
        return False

    @property
    def requires_labels(self) -> bool:
        return False

    @property
    def works_with_weights(self) -> bool:
        return True

    @locked
    def update(self, y_true, y_pred, w=1.0) -> None:
        y, p, w = metric_label(y_true, self.pos_val), event_proba(y_pred, self.pos_val), event_weight(w)
        self._add(y, p, w)

    @locked
    def revert(self, y_true, y_pred, w=1.0) -> None:
        """Remove an event added by ``update`` (same arguments).

        The metric keeps sums, not events, so it cannot tell every event that was never added;
        it refuses, changing nothing, a revert that no sequence of updates could explain: with
        no event left where this one would be, or taking more from a running sum there (weight,
        loss, positives...) than it holds.
        """
        y, p, w = metric_label(y_true, self.pos_val), event_proba(y_pred, self.pos_val), event_weight(w)
        if w > 0.0:
            self._check_revert(y, p, w, _event(y_true, y_pred, w))
        self._add(y, p, -w)

    def _add(self, y: bool, p: float, w: float) -> None:
        raise NotImplementedError

    def _check_revert(self, y: bool, p: float, w: float, event: str) -> None:
        raise NotImplementedError


class _MeanLoss(_ProbaMetric):
    """A weighted mean of a per-event loss that may be infinite.

    Infinite losses are counted apart from the finite sum, so that reverting them works; event
    counts reset the sums to exactly 0 when everything has been reverted. The same counts and
    sums are kept per class (``_by_class``: negatives, positives), so that ``revert`` refuses an
    event of a class the metric holds none of, or less of than the event takes; ``get`` reads
    the totals.
    """

    def __init__(self, pos_val=True):
        super().__init__(pos_val)
        self._n = 0
        self._n_inf = 0
        self._weight = 0.0
        self._sum = 0.0
        # per class: [events, events with an infinite loss, weight, sum of the finite losses]
        self._by_class = [[0, 0, 0.0, 0.0], [0, 0, 0.0, 0.0]]

    def _check_loaded_state(self) -> None:
        """As :meth:`_ProbaMetric._check_loaded_state`, and the classes' event counts add up to the totals."""
        super()._check_loaded_state()
        from streamcal import _state_check as c

        negatives, positives = self._by_class
        if negatives[0] == positives[0] == -1:  # unknown (a state saved before them, not empty)
            return
        if min(negatives[0], negatives[1], positives[0], positives[1]) < 0 or (
            negatives[0] + positives[0] != self._n or negatives[1] + positives[1] != self._n_inf
        ):
            found = c.brief(self._by_class)
            c.fail(f"`_by_class`: expected the classes' event counts to add up to `_n` and `_n_inf`; found {found}.")

    @staticmethod
    def _with_class_counts(state):
        if "_by_class" in state or type(state.get("_n")) is not int:
            return state
        unknown = -1 if state["_n"] else 0
        return {**state, "_by_class": [[unknown, 0, 0.0, 0.0], [unknown, 0, 0.0, 0.0]]}

    def _loss(self, y: bool, p: float) -> float:
        raise NotImplementedError

    def _check_revert(self, y, p, w, event):
        loss = self._loss(y, p)
        infinite = math.isinf(loss)
        n, n_inf, weight, total = self._by_class[1 if y else 0]
        if n < 0:  # per-class counts unknown: the totals
            n, n_inf, weight, total = self._n, self._n_inf, self._weight, self._sum
        where = f"among the {'positives' if y else 'negatives'}"
        _check_left(n_inf if infinite else n - n_inf, weight, w,
                    f"{where} with {'an infinite' if infinite else 'a finite'} loss", event)
        if not infinite:
            _check_sums([("sum of losses", total, w * loss)], f"{where} with a finite loss", weight, event)

    def _add(self, y, p, w):
        loss = self._loss(y, p)
        if w == 0.0:
            return
        step = 1 if w > 0.0 else -1
        part = self._by_class[1 if y else 0]
        if part[0] < 0:  # per-class counts unknown (a state saved before them): kept apart until empty
            part = [0, 0, 0.0, 0.0]
        self._n += step
        self._weight += w
        part[0] += step
        part[2] += w
        if math.isinf(loss):
            self._n_inf += step
            part[1] += step
        else:
            self._sum += w * loss
            part[3] += w * loss
        if part[0] == 0:
            part[2] = part[3] = 0.0
        if self._n == 0:
            self._weight = self._sum = 0.0
            if self._by_class[0][0] < 0:  # unknown per-class counts: known again, none
                self._by_class = [[0, 0, 0.0, 0.0], [0, 0, 0.0, 0.0]]

    @locked
    def get(self) -> float:
        if self._n_inf > 0:
            return math.inf
        if self._n <= 0 or not self._weight > 0.0:  # no event, or weights lost to rounding
            return 0.0
        return self._sum / self._weight


class Brier(_MeanLoss):
    """Brier score, updated per event: equals :func:`streamcal.metrics.brier_score` so far.

    Parameters
    ----------
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and a dict ``y_pred`` is read at ``pos_val``. With a bool (or 0/1)
        ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import Brier
    >>> metric = Brier()
    >>> for y, p in [(True, 0.9), (False, 0.2), (True, {True: 0.6, False: 0.4})]:
    ...     metric.update(y, p)
    >>> round(metric.get(), 4)
    0.07

    With labels other than bools, ``pos_val`` names the positive one; ``y_pred`` is then a
    probability of ``pos_val`` or a ``predict_proba_one`` dict keyed by the labels:

    >>> metric = Brier(pos_val="fraud")
    >>> for y, p in [("fraud", 0.9), ("legit", {"legit": 0.8, "fraud": 0.2}), ("fraud", {"fraud": 0.6, "legit": 0.4})]:
    ...     metric.update(y, p)
    >>> round(metric.get(), 4)
    0.07
    """

    def __init__(self, pos_val=True):
        super().__init__(pos_val)

    def _loss(self, y, p):
        return (p - float(y)) ** 2


class LogLoss(_MeanLoss):
    """Log loss in nats, updated per event: equals :func:`streamcal.metrics.log_loss` so far.

    Unlike ``river.metrics.LogLoss`` nothing is clipped unless ``eps`` is given: a confident
    wrong prediction makes the loss ``inf`` until it is reverted.

    Parameters
    ----------
    eps : float, optional
        Clip probabilities into ``[eps, 1 - eps]``.
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and a dict ``y_pred`` is read at ``pos_val``. With a bool (or 0/1)
        ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import LogLoss
    >>> metric = LogLoss()
    >>> for y, p in [(True, 0.9), (False, 0.2), (True, 0.6)]:
    ...     metric.update(y, p)
    >>> round(metric.get(), 4)
    0.2798
    >>> metric.update(True, 0.0)
    >>> metric.get()
    inf
    >>> metric.revert(True, 0.0)
    >>> round(metric.get(), 4)
    0.2798
    """

    def __init__(self, eps: float | None = None, pos_val=True):
        if eps is not None:
            check_scalar(eps, "eps", low=0.0, high=0.5, high_inclusive=False)
        super().__init__(pos_val)
        self.eps = eps

    def _loss(self, y, p):
        if self.eps is not None:
            p = min(max(p, self.eps), 1.0 - self.eps)
        if y:
            return math.inf if p == 0.0 else -math.log(p)
        return math.inf if p == 1.0 else -math.log1p(-p)


class ProperScoringRule(_MeanLoss):
    """A regular binary proper scoring rule (Brümmer & du Preez 2013), updated per event.

    Equals :func:`streamcal.metrics.proper_scoring_rule` on the events so far.

    Parameters
    ----------
    weighting : BetaWeighting, ThresholdWeighting or callable
        The rule (see :func:`streamcal.metrics.partial_losses`). Callables are integrated per
        event, which is slow; prefer the closed forms.
    normalize : bool, default True
        Paper 001's normalisation.
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and a dict ``y_pred`` is read at ``pos_val``. With a bool (or 0/1)
        ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import ProperScoringRule, ThresholdWeighting
    >>> metric = ProperScoringRule(ThresholdWeighting(0.5))
    >>> for y, p in [(True, 0.9), (False, 0.7), (True, 0.4), (False, 0.1)]:
    ...     metric.update(y, p)
    >>> metric.get()
    1.0
    """

    def __init__(self, weighting, normalize: bool = True, pos_val=True):
        _check_weighting(weighting)
        check_scalar(normalize, "normalize", choices=(True, False))
        super().__init__(pos_val)
        self.weighting = weighting
        self.normalize = normalize

    @classmethod
    def _unit_test_params(cls):
        from streamcal.metrics._scoring_rules import BetaWeighting

        yield {"weighting": BetaWeighting(1.0, 1.0)}

    def _loss(self, y, p):
        target, nontarget = _partial_losses(np.array([p]), self.weighting, self.normalize)
        return float(target[0] if y else nontarget[0])


class Cllr(_ProbaMetric):
    """Cllr in bits, updated per event: equals :func:`streamcal.metrics.cllr` so far.

    ``y_pred`` is a log-likelihood ratio (a float; ``±inf`` allowed), as a calibrator's
    ``predict_llr_one`` gives. A probability dict (``predict_proba_one``) is accepted only when
    ``prior`` is given: it is turned into the LLR ``logit(p) - logit(prior)``. ``get`` is NaN
    until both classes have been seen.

    Parameters
    ----------
    prior : float, optional
        The positive prior behind posterior probabilities passed as dicts, in (0, 1).
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and ``y_pred`` is the LLR of ``pos_val`` (a dict is read at
        ``pos_val``). With a bool (or 0/1) ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import Cllr
    >>> metric = Cllr()
    >>> for y, llr in [(False, -2.0), (False, 0.5), (True, 1.0), (True, 3.0)]:
    ...     metric.update(y, llr)
    >>> round(metric.get(), 4)
    0.5276
    """

    def __init__(self, prior: float | None = None, pos_val=True):
        if prior is not None:
            check_scalar(prior, "prior", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        super().__init__(pos_val)
        self.prior = prior
        self._n = [0, 0]  # by class: negatives, positives
        self._n_inf = [0, 0]
        self._weight = [0.0, 0.0]
        self._sum = [0.0, 0.0]

    def _llr(self, y_pred) -> float:
        if isinstance(y_pred, dict):
            if self.prior is None:
                msg = (
                    "`y_pred` must be an LLR (a float) for Cllr; got a probability dict. Pass "
                    "the calibrator's predict_llr_one output, or construct Cllr(prior=...) to "
                    "convert posteriors."
                )
                raise TypeError(msg)
            p = event_proba(y_pred, self.pos_val)
            with np.errstate(divide="ignore"):
                return float(np.log(p) - np.log1p(-p)) - math.log(self.prior / (1.0 - self.prior))
        return event_score(y_pred, self.pos_val)

    @locked
    def update(self, y_true, y_pred, w=1.0) -> None:
        y, x, w = metric_label(y_true, self.pos_val), self._llr(y_pred), event_weight(w)
        self._add_llr(y, x, w)

    @locked
    def revert(self, y_true, y_pred, w=1.0) -> None:
        y, x, w = metric_label(y_true, self.pos_val), self._llr(y_pred), event_weight(w)
        if w > 0.0:
            k = int(y)
            infinite = math.isinf(self._cost(y, x))
            left = self._n_inf[k] if infinite else self._n[k] - self._n_inf[k]
            cost = "an infinite" if infinite else "a finite"
            where = f"among the {'positives' if y else 'negatives'}"
            event = _event(y_true, y_pred, w)
            _check_left(left, self._weight[k], w, f"with {cost} cost {where}", event)
            if not infinite:
                _check_sums([("sum of costs", self._sum[k], w * self._cost(y, x))], where, self._weight[k], event)
        self._add_llr(y, x, -w)

    @staticmethod
    def _cost(y: bool, x: float) -> float:
        return float(np.logaddexp(0.0, -x if y else x)) / _LN2

    def _add_llr(self, y: bool, x: float, w: float) -> None:
        if w == 0.0:
            return
        k, step = int(y), (1 if w > 0.0 else -1)
        cost = self._cost(y, x)
        self._n[k] += step
        self._weight[k] += w
        if math.isinf(cost):
            self._n_inf[k] += step
        else:
            self._sum[k] += w * cost
        if self._n[k] == 0:
            self._weight[k] = self._sum[k] = 0.0

    @locked
    def get(self) -> float:
        if not (self._n[0] > 0 and self._n[1] > 0):
            return math.nan
        if self._n_inf[0] > 0 or self._n_inf[1] > 0:
            return math.inf
        if not (self._weight[0] > 0.0 and self._weight[1] > 0.0):  # weights lost to rounding
            return math.nan
        return 0.5 * (self._sum[1] / self._weight[1] + self._sum[0] / self._weight[0])


class MinCllr(_ProbaMetric):
    """minCllr, exact per event: equals :func:`streamcal.metrics.min_cllr` on the events so far.

    Keeps the positive and negative weight of every distinct score (memory O(distinct scores));
    ``get`` runs PAV-LLR over them (O(distinct scores)). Bucket or round the scores first to
    bound memory. ``y_pred`` is any score that increases with the evidence for the positive
    class (an LLR, a probability, or a probability dict). ``get`` is NaN until both classes have
    been seen.

    Parameters
    ----------
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and a dict ``y_pred`` is read at ``pos_val``. With a bool (or 0/1)
        ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import MinCllr
    >>> metric = MinCllr()
    >>> for y, s in [(False, 0.1), (True, 0.2), (False, 0.3), (True, 0.4)]:
    ...     metric.update(y, s)
    >>> metric.get()
    0.5
    """

    def __init__(self, pos_val=True):
        super().__init__(pos_val)
        self._pos: dict[float, list] = {}  # score -> [weight, count]
        self._neg: dict[float, list] = {}

    @locked
    def update(self, y_true, y_pred, w=1.0) -> None:
        y, s, w = metric_label(y_true, self.pos_val), event_score(y_pred, self.pos_val), event_weight(w)
        self._add_score(y, s, w)

    @locked
    def revert(self, y_true, y_pred, w=1.0) -> None:
        y, s, w = metric_label(y_true, self.pos_val), event_score(y_pred, self.pos_val), event_weight(w)
        if w > 0.0:
            entry = (self._pos if y else self._neg).get(s + 0.0, (0.0, 0))
            where = f"that is a {'positive' if y else 'negative'} of score {s!r}"
            _check_left(entry[1], entry[0], w, where, _event(y_true, y_pred, w))
        self._add_score(y, s, -w)

    def _add_score(self, y: bool, s: float, w: float) -> None:
        if w == 0.0:
            return
        s = s + 0.0  # -0.0 and 0.0 are one score
        table = self._pos if y else self._neg
        entry = table.setdefault(s, [0.0, 0])
        entry[0] += w
        entry[1] += 1 if w > 0.0 else -1
        if entry[1] <= 0:
            del table[s]

    @locked
    def get(self) -> float:
        if not (self._pos and self._neg):
            return math.nan
        pos_s = np.fromiter(self._pos.keys(), dtype=np.float64, count=len(self._pos))
        neg_s = np.fromiter(self._neg.keys(), dtype=np.float64, count=len(self._neg))
        s = np.concatenate((pos_s, neg_s))
        y = np.concatenate((np.ones(pos_s.size), np.zeros(neg_s.size)))
        w = np.concatenate(
            (
                np.fromiter((e[0] for e in self._pos.values()), dtype=np.float64, count=len(self._pos)),
                np.fromiter((e[0] for e in self._neg.values()), dtype=np.float64, count=len(self._neg)),
            )
        )
        return _min_cllr(y, s, w)


class _BinnedMetric(_ProbaMetric):
    """Per-bin weighted sums over fixed equal-width bins ``[k/n, (k+1)/n)`` (the last closed)."""

    def __init__(self, n_bins: int, pos_val=True):
        check_scalar(n_bins, "n_bins", numbers.Integral, low=1)
        super().__init__(pos_val)
        self.n_bins = n_bins
        self._edges = (np.arange(n_bins + 1) / n_bins).tolist()  # same edges as the array functions
        self._n = [0] * n_bins
        self._n_pos = [0] * n_bins  # the positives among them: a revert of a class a bin holds none of is refused
        self._w = [0.0] * n_bins
        self._wy = [0.0] * n_bins
        self._wp = [0.0] * n_bins

    @staticmethod
    def _with_class_counts(state):
        if "_n_pos" in state or not all(type(state.get(a)) is list for a in ("_n", "_w", "_wy")):
            return state
        return {**state, "_n_pos": _positives(state["_n"], state["_w"], state["_wy"])}

    def _bin(self, p: float) -> int:
        return min(bisect.bisect_right(self._edges, p) - 1, self.n_bins - 1)

    def _check_revert(self, y, p, w, event):
        k = self._bin(p)
        if self._n_pos[k] < 0:  # the bin's per-class counts unknown: its totals
            count, weight = self._n[k], self._w[k]
        elif y:
            count, weight = self._n_pos[k], self._wy[k]
        else:
            count, weight = self._n[k] - self._n_pos[k], self._w[k] - self._wy[k]
        _check_left(count, weight, w, f"among the {'positives' if y else 'negatives'} in bin {k}", event)
        yf = float(y)
        _check_sums(
            [
                ("weight of positives", self._wy[k], w * yf),
                ("weight of negatives", self._w[k] - self._wy[k], w * (1.0 - yf)),
                ("sum of probabilities", self._wp[k], w * p),
                ("sum of complements", self._w[k] - self._wp[k], w * (1.0 - p)),
                *self._more_sums(k, p, w),
            ],
            f"in bin {k}",
            self._w[k],
            event,
        )

    def _more_sums(self, k: int, p: float, w: float) -> list:
        return []

    def _add(self, y, p, w):
        if w == 0.0:
            return
        k = self._bin(p)
        self._n[k] += 1 if w > 0.0 else -1
        if y and self._n_pos[k] >= 0:
            self._n_pos[k] += 1 if w > 0.0 else -1
        self._w[k] += w
        self._wy[k] += w * float(y)
        self._wp[k] += w * p
        self._add_more(k, y, p, w)
        if self._n[k] == 0:  # an emptied bin is exactly empty
            self._n_pos[k] = 0
            for sums in self._all_sums():
                sums[k] = 0.0

    def _add_more(self, k: int, y: bool, p: float, w: float) -> None:
        pass

    def _all_sums(self) -> list[list[float]]:
        return [self._w, self._wy, self._wp]


class ECE(_BinnedMetric):
    """Expected calibration error over fixed equal-width bins, exact per event.

    Equals :func:`streamcal.metrics.ece` with ``strategy="uniform"`` on the events so far.

    Parameters
    ----------
    n_bins : int, default 10
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and a dict ``y_pred`` is read at ``pos_val``. With a bool (or 0/1)
        ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import ECE
    >>> metric = ECE()
    >>> for y, p in [(False, 0.1), (False, 0.2), (True, 0.7), (True, 0.9)]:
    ...     metric.update(y, p)
    >>> round(metric.get(), 4)
    0.175
    """

    def __init__(self, n_bins: int = 10, pos_val=True):
        super().__init__(n_bins, pos_val)

    @locked
    def get(self) -> float:
        total = sum(self._w)
        if sum(self._n) <= 0 or not total > 0.0:  # no event, or weights lost to rounding
            return 0.0
        return sum(abs(a - b) for a, b in zip(self._wy, self._wp, strict=True)) / total


class CalibrationLoss(_BinnedMetric):
    """The 10-bin calibration loss of Agarwal et al. (2014), exact per event.

    Equals :func:`streamcal.metrics.calibration_loss` on the events so far (kept as per-bin sums
    of ``w``, ``w y``, ``w p`` and ``w p²``).

    Parameters
    ----------
    n_bins : int, default 10
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and a dict ``y_pred`` is read at ``pos_val``. With a bool (or 0/1)
        ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import CalibrationLoss
    >>> metric = CalibrationLoss()
    >>> for y, p in [(False, 0.12), (True, 0.18), (False, 0.81), (True, 0.85)]:
    ...     metric.update(y, p)
    >>> round(metric.get(), 5)
    0.11635
    """

    def __init__(self, n_bins: int = 10, pos_val=True):
        super().__init__(n_bins, pos_val)
        self._wpp = [0.0] * n_bins

    def _add_more(self, k, y, p, w):
        self._wpp[k] += w * p * p

    def _more_sums(self, k, p, w):
        return [("sum of squared probabilities", self._wpp[k], w * p * p)]

    def _all_sums(self):
        return [self._w, self._wy, self._wp, self._wpp]

    @locked
    def get(self) -> float:
        total = sum(self._w)
        if sum(self._n) <= 0 or not total > 0.0:  # no event, or weights lost to rounding
            return 0.0
        loss = 0.0
        for w, wy, wp, wpp in zip(self._w, self._wy, self._wp, self._wpp, strict=True):
            if w > 0.0:
                frac = wy / w
                loss += wpp - 2.0 * frac * wp + frac * frac * w
        return max(loss, 0.0) / total


class HosmerLemeshow(_ProbaMetric):
    """The Hosmer–Lemeshow statistic, updated per event; ``pvalue`` gives its p-value.

    Equals :func:`streamcal.metrics.hosmer_lemeshow` on the events so far.

    - ``strategy="uniform"`` (fixed equal-width groups, Hosmer–Lemeshow's Ĥ): per-group sums,
      O(n_groups) memory, O(1) updates.
    - ``strategy="quantile"`` (deciles of risk, Ĉ): the groups move with every event, so the
      metric keeps every (label, probability, weight) it has seen — O(events) memory — and
      recomputes on ``get``. Use it on bounded streams or windows (``revert``).

    Parameters
    ----------
    n_groups : int, default 10
    strategy : {"quantile", "uniform"}, default "quantile"
    pos_val : hashable, default True
        The positive label, as in river's binary metrics: an event is positive when
        ``y_true == pos_val``, and a dict ``y_pred`` is read at ``pos_val``. With a bool (or 0/1)
        ``pos_val`` every label must be a bool or 0/1.

    Examples
    --------
    >>> from streamcal.metrics import HosmerLemeshow
    >>> metric = HosmerLemeshow(n_groups=4, strategy="uniform")
    >>> for y, p in [(False, 0.1), (True, 0.3), (False, 0.4), (True, 0.8), (True, 0.9)]:
    ...     metric.update(y, p)
    >>> round(metric.get(), 3), round(metric.pvalue, 3)
    (0.662, 0.416)
    """

    def __init__(self, n_groups: int = 10, strategy: str = "quantile", pos_val=True):
        check_scalar(n_groups, "n_groups", numbers.Integral, low=1)
        check_scalar(strategy, "strategy", choices=("uniform", "quantile"))
        super().__init__(pos_val)
        self.n_groups = n_groups
        self.strategy = strategy
        self._edges = (np.arange(n_groups + 1) / n_groups).tolist()
        self._counts = [0] * n_groups
        self._counts_pos = [0] * n_groups  # the positives among them
        self._sums = [[0.0] * n_groups for _ in range(5)]  # n, o1, e1, o0, e0
        self._events: list[tuple[bool, float, float]] = []

    def _add(self, y, p, w):
        if w == 0.0:
            return
        if self.strategy == "quantile":
            if w > 0.0:
                self._events.append((y, p, w))
            else:
                self._remove((y, p, -w))
            return
        k = self._group(p)
        self._counts[k] += 1 if w > 0.0 else -1
        if y and self._counts_pos[k] >= 0:
            self._counts_pos[k] += 1 if w > 0.0 else -1
        if not self._counts[k]:
            self._counts_pos[k] = 0
        for sums, value in zip(self._sums, (1.0, float(y), p, 1.0 - float(y), 1.0 - p), strict=True):
            sums[k] = w * value + sums[k] if self._counts[k] else 0.0

    def _remove(self, event) -> None:
        for i in range(len(self._events) - 1, -1, -1):
            if self._events[i] == event:
                del self._events[i]
                return
        msg = f"cannot revert this event (`y_true`, `y_pred`, `w`) = {event!r}: it was never added."
        raise ValueError(msg)

    @locked
    def revert(self, y_true, y_pred, w=1.0) -> None:
        y, p, w = metric_label(y_true, self.pos_val), event_proba(y_pred, self.pos_val), event_weight(w)
        if self.strategy == "quantile" and w > 0.0:
            self._remove((y, p, w))  # raises before changing anything if absent
            return
        if w > 0.0:
            k = self._group(p)
            event = _event(y_true, y_pred, w)
            # the class's events and weight in the group: sums[1] observed positives, sums[3] observed
            # negatives (the group's, sums[0], where its per-class counts are unknown)
            if self._counts_pos[k] < 0:
                count, weight = self._counts[k], self._sums[0][k]
            else:
                count = self._counts_pos[k] if y else self._counts[k] - self._counts_pos[k]
                weight = self._sums[1 if y else 3][k]
            _check_left(count, weight, w, f"among the {'positives' if y else 'negatives'} in group {k}", event)
            yf = float(y)
            names = ("weight", "observed positives", "expected positives", "observed negatives", "expected negatives")
            taken = (w, w * yf, w * p, w * (1.0 - yf), w * (1.0 - p))
            held = [(n, s[k], t) for n, s, t in zip(names, self._sums, taken, strict=True)]
            _check_sums(held, f"in group {k}", self._sums[0][k], event)
        self._add(y, p, -w)

    @staticmethod
    def _with_class_counts(state):
        sums = state.get("_sums")
        if "_counts_pos" in state or type(state.get("_counts")) is not list or type(sums) is not list:
            return state
        if len(sums) < 2 or type(sums[0]) is not list or type(sums[1]) is not list:
            return state  # the state check names what is wrong
        return {**state, "_counts_pos": _positives(state["_counts"], sums[0], sums[1])}

    def _group(self, p: float) -> int:
        return min(bisect.bisect_right(self._edges, p) - 1, self.n_groups - 1)

    def _result(self) -> tuple[float, float]:
        if self.strategy == "quantile":
            if not self._events:
                return 0.0, math.nan
            y, p, w = (np.array(col, dtype=np.float64) for col in zip(*self._events, strict=True))
            if not w.sum() > 0.0:
                return 0.0, math.nan
            return hosmer_lemeshow(y, p, self.n_groups, strategy="quantile", weights=w)
        return hl_from_sums(*self._sums)

    @locked
    def get(self) -> float:
        return self._result()[0]

    @property
    @locked
    def pvalue(self) -> float:
        """The chi-square p-value of the current statistic (NaN with fewer than 3 groups)."""
        return self._result()[1]
