"""Merge streaming calibrator states (``merge``): partitioned and distributed fitting (docs/design.md §1, §8).

A streaming calibrator's state is a histogram over score buckets (plus, for count and time
windows, the ring of events in the window), so two calibrators over the same bucket edges merge
into the calibrator that would have learned both streams. What "both streams" means depends on
the window's clock:

- **Event clocks** (``Unbounded``, ``CountWindow``, ``Decay(by="events")``): the merge of
  ``[a, b, c]`` is one calibrator that learned ``a``'s events, then ``b``'s, then ``c``'s, in that
  order (concatenation). Merging is associative, so partitions of an ordered dataset can be
  reduced as a tree, keeping their order. For ``Unbounded`` the order does not matter.
  ``CountWindow(n)`` keeps the last ``n`` events of the concatenation (the rings hold every
  event's bucket, label and weight, so this is exact). ``Decay(by="events")`` ages the earlier
  partitions' weights by the number of events learned after them: ``2**(-n_later / half_life)``.
- **Time clocks** (``TimeWindow``, ``Decay(by="time")``): the merge is one calibrator that learned
  all the events in time order, whatever the partitioning (by key, by shard, interleaved).
  ``Decay(by="time")`` scales each state's weights to the latest time, ``2**(-(T - t_last) /
  half_life)`` (the weight of an event depends only on its own time and the current time);
  ``TimeWindow(s)`` merges the rings by time and keeps the events within ``s`` of the latest.

Exactness: the merged histogram holds the same sums as the single calibrator's, added in a
different order; with integer weights (unit weights, counts) the sums are exact and the merged
calibrator equals the single one bit for bit (its fitted map is rebuilt from the histogram, and
streaming PAV's blocks equal a from-scratch PAV bit for bit). With fractional weights or decay the
sums agree to rounding. PAV's score prior (``prior="auto"``, the default) refits its strength
to the merged window, where the single calibrator refitted it at its own counts: the merged map
then equals the single one's window map pooled with a prior of a possibly different strength; with
``prior=None`` the equality above holds bit for bit.

Each mergeable class merges its own kind (:class:`Mergeable`): a streaming calibrator merges its
histogram through its window's rule (:meth:`streamcal.windows.Window.merge_histograms`) and
rebuilds its map; ``GEVCanonicalClassifier`` (streaming GEV-canonical regression) merges its
forgotten Newton statistics instead. This module checks the inputs and dispatches.

Quantile edges (``QuantileEdges``) are learned from each calibrator's own warm-up, so calibrators
built from different data have different edges and cannot merge: fix the edges first (for example
``Edges(edges)`` from a sample of the whole dataset; :func:`streamcal.dask.fit` does this). States
still in their warm-up merge by replaying the buffered events.
"""

from __future__ import annotations

import copy

import numpy as np

__all__ = ["Mergeable", "merge"]


class Mergeable:
    """Mixin of the learners whose states merge (:func:`merge`).

    A subclass implements :meth:`_merged_with`; :func:`merge` checks that the inputs are of one
    class with equal parameters, copies the first and folds the others into the copy in order.
    """

    def _check_merge(self, items: list) -> None:
        """Refuse, before anything is copied, inputs of one class and parameters whose states
        cannot merge (a class-specific check; none by default)."""

    def _merged_with(self, other):
        """The merge of ``self`` (a copy that this call may modify and return) and ``other`` (an
        input of the same class and parameters, read only, under its lock): the learner that
        learned ``self``'s events then ``other``'s (see the module notes for each clock)."""
        raise NotImplementedError  # pragma: no cover - abstract


def _public_name(cal) -> str:
    """The class name a user wrote: ``KeyedCalibrator(VennAbersCalibrator())`` makes a
    ``TemplateKeyedCalibrator``, named by its template."""
    name = type(cal).__name__
    if name == "TemplateKeyedCalibrator":
        template = getattr(cal, "calibrator", None)
        return f"KeyedCalibrator over a {type(template).__name__} template"
    if name == "KeyedCalibrator":
        return "KeyedCalibrator over a PAVCalibrator template"
    return name


def merge(*calibrators):
    """Merge streaming calibrators over the same bucket edges into one (a new object).

    Parameters
    ----------
    *calibrators
        Streaming calibrators of one class with equal parameters (``PAVCalibrator``, or any
        subclass of the streaming base), in stream order for event-clock windows (see
        :mod:`streamcal.merging`), given one by one (``merge(a, b, c)``) or as one iterable
        (``merge([a, b, c])``). The inputs are not modified.

    Returns
    -------
    The merged calibrator: the one that learned all the events (see the module notes for the order).

    Raises
    ------
    TypeError
        If the calibrators are not streaming calibrators of one class.
    ValueError
        If their parameters or bucket edges differ.

    Examples
    --------
    Three shards of a stream, calibrated apart and merged, give the calibrator of the whole stream.

    >>> import numpy as np
    >>> from streamcal import PAVCalibrator
    >>> from streamcal.merging import merge
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=3000)
    >>> labels = rng.uniform(size=3000) < scores**2
    >>> shards = [PAVCalibrator().update(s, y) for s, y in zip(np.split(scores, 3), np.split(labels, 3))]
    >>> merged = merge(shards)
    >>> whole = PAVCalibrator().update(scores, labels)
    >>> merged.n_learned, bool((merged.predict_proba(scores) == whole.predict_proba(scores)).all())
    (3000, True)
    >>> merge(*shards).n_learned  # the same, given one by one
    3000
    """
    items = list(calibrators)
    if len(items) == 1 and not isinstance(items[0], Mergeable):  # one iterable of calibrators
        given = items[0]
        try:
            items = list(given)
        except TypeError:
            raise TypeError(_not_mergeable(given, 0, alone=True)) from None
    if not items:
        msg = "`calibrators` must hold at least one calibrator; got none."
        raise ValueError(msg)
    first = items[0]
    seen: dict = {}
    for i, cal in enumerate(items):
        if not isinstance(cal, Mergeable):
            raise TypeError(_not_mergeable(cal, i))
        if id(cal) in seen:  # its events would count twice: a copy (copy.deepcopy) says so on purpose
            msg = (
                f"`calibrators` must not hold one calibrator twice (its events would count twice); got the "
                f"calibrator at position {seen[id(cal)]} again at position {i}."
            )
            raise ValueError(msg)
        seen[id(cal)] = i
        if type(cal) is not type(first):
            name = _public_name(first)
            msg = (
                f"`calibrators` must all be {name} (one class); got {_a(_public_name(cal))} at position {i}."
            )
            raise TypeError(msg)
        _check_same_params(first, cal, i)
    first._check_merge(items)
    out = copy.deepcopy(first)  # a consistent snapshot of ``first``; ``out`` is ours alone
    for cal in items[1:]:
        out = out._merged_with(cal)
    return out


# ---------------------------------------------------------------------------------------- checks
def _not_mergeable(cal, i: int, alone: bool = False) -> str:
    """The refusal of ``cal`` (at position ``i``; ``alone``: the only argument, not an iterable),
    which is not :class:`Mergeable`."""
    name = type(cal).__name__
    why = getattr(type(cal), "_not_merged_because", None)  # a learner of the package that says why not
    if type(why) is str:
        return f"`calibrators` cannot be merged: {name} (position {i}) does not merge: {why}."
    if alone:
        return (
            "`calibrators` must be streamcal streaming calibrators, given one by one (merge(a, b, ...)) or as "
            f"one iterable (merge([a, b, ...])); got {cal!r}."
        )
    return (
        f"`calibrators` must hold streamcal streaming calibrators; got {_a(name)} at position {i}. The binary "
        "streaming calibrators, KeyedCalibrator, GEVCanonicalClassifier, PairwiseCouplingCalibrator and "
        "OneVsRestCalibrator merge; KeyedOffsetCalibrator and CalibratedClassifier do not."
    )


def _a(name: str) -> str:
    """``name`` with its indefinite article: "a float", "an ISplineCalibrator"."""
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _param_key(value):
    from river import base

    if isinstance(value, base.Base):
        return (type(value), repr(value))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    return value


# parameters that change how fast a calibrator computes, never what: parts may differ in them
_EXECUTION_PARAMS = frozenset({"n_jobs"})
# parameters given as shorthands, compared as the strategies they mean: ``window=100`` and
# ``window=CountWindow(100)`` are the same parameter
_STRATEGY_PARAMS = ("buckets", "window")


def _strategies(cal, params: dict) -> dict:
    from streamcal.buckets import as_buckets
    from streamcal.windows import as_window

    parsers = {"buckets": as_buckets, "window": as_window}
    # a parameter is stored under its own name (river's convention)
    return {name: parsers[name](getattr(cal, name)) for name in _STRATEGY_PARAMS if name in params}


def _check_same_params(a, b, position: int) -> None:
    pa, pb = a._get_params(), b._get_params()  # river's parameter API
    sa, sb = _strategies(a, pa), _strategies(b, pb)
    for name in pa:
        if name in sa:  # compared, and named, as the strategies they mean (None: the default's)
            va, vb = sa[name], sb.get(name)
            same = _param_key(va) == _param_key(vb)
        else:
            va, vb = pa[name], pb.get(name)
            same = _param_key(va) == _param_key(vb)
        if name not in _EXECUTION_PARAMS and not same:
            msg = f"`calibrators` cannot be merged: different `{name}`, {va!r} and {vb!r} (position {position})."
            raise ValueError(msg)
