"""Ghost pairs: what a pair with a class not seen yet would hold, for classes that appear late.

Without fixed ``classes``, a :class:`~streamcal.multiclass.PairwiseCouplingCalibrator` learns the
classes from the stream. With them fixed, the pair (j, k) of a class k not scored by any event
so far has learned every event of class j at the same pairwise log-odds: ``s_j - s_k`` with
``s_k = -inf`` (a class missing from the score dict), clipped to ``MAX_LOG_ODDS`` (0 where ``s_j``
is ``-inf`` too), with label ``y == j``. That state does not depend on k, only on which side of j
the class k sorts. So per labelled class j two binary calibrators, the ghosts, learn every event
of class j: ``low`` as the pair (j, k) of a class k sorting after j (log-odds ``+d``, label
True) and ``high`` as the pair (k, j) of one sorting before it (``-d``, label False). A pair that
joins starts as a copy of the ghost of its class that has events: the pair of the fixed-classes
run, bit for bit, whatever its window (the same calls with the same scores, weights and times).

At most one of a missing pair's classes has a ghost that learned since the other joined: an
event of either class after both are known creates the pair. So a pair (a, b) missing from the
register stands in as ``ghosts[a].low``, else ``ghosts[b].high``, else a fresh calibrator.

The ghosts are kept where the classes are not fixed and the binary calibrator takes every score
it is given (as :class:`~streamcal.multiclass.OneVsRestCalibrator` keeps its absent class).
"""

from __future__ import annotations

import copy

from streamcal.multiclass._merge_parts import BinaryPartsMerging


def kept(cal, params) -> dict | None:
    """The ghosts of ``cal`` (an empty dict before the first, stored by :func:`adopt`), or None
    where none are kept: fixed classes, or a binary calibrator that may refuse a score."""
    if params.fixed is not None or not params.takes_any_score:
        return None
    ghosts = cal.__dict__.get("_ghosts")
    return {} if ghosts is None else ghosts


def adopt(cal, ghosts: dict, y, new: tuple | None) -> None:
    """Store the new ghosts of ``y`` (None: nothing new) once they have learned their first event."""
    if new is not None:
        ghosts[y] = new
        cal.__dict__["_ghosts"] = ghosts
        # the river face's one-call kernels bind the ghosts: bound again at the next call
        river = cal.__dict__.pop("_river_pairs", None)
        if river is not None and river.busy is not None:
            river.busy[0] = 1.0


def held(cal) -> dict | None:
    """The ghosts ``cal`` holds (without fixed classes), for reading: None or a dict."""
    if cal.classes is not None:
        return None
    return cal.__dict__.get("_ghosts")


def stand_in(ghosts: dict | None, a, b):
    """The ghost that stands in for the missing pair (a, b), a before b, or None."""
    if not ghosts:
        return None
    mine = ghosts.get(a)
    if mine is not None:
        return mine[0]
    mine = ghosts.get(b)
    return None if mine is None else mine[1]


def pair_or_stand_in(models: dict, ghosts: dict | None, a, b):
    """The calibrator of the pair (a, b), a before b, or the ghost standing in for it, or None."""
    model = models.get((a, b))
    return stand_in(ghosts, a, b) if model is None else model


def missing_pairs_stand_in(ghosts: dict | None, classes: list, models: dict) -> bool:
    """Whether a pair of ``classes`` missing from ``models`` has a ghost standing in for it."""
    if not ghosts:
        return False
    k = len(classes)
    for a in range(k):
        for b in range(a + 1, k):
            if (classes[a], classes[b]) not in models and (classes[a] in ghosts or classes[b] in ghosts):
                return True
    return False


def events(ghosts: dict, y, finite: bool, make, params, limit: float, sigmoid) -> tuple[list, tuple | None]:
    """The ghosts' events for one event of label ``y``: ``(events, new)``, the events as
    ``(calibrator, score dict, label)`` and the new ghosts of ``y`` (its first event: to be stored
    once they have learned it), else None. ``finite``: whether the label's log-score is finite
    (log-odds ``limit`` against a class not seen, else 0); ``sigmoid`` maps log-odds to the
    probability a binary calibrator taking probabilities is given."""
    mine = ghosts.get(y)
    new = None
    if mine is None:
        mine = new = (make(), make())
    key = params.score_key
    if not finite:
        low = high = sigmoid(0.0) if params.probabilities else 0.0
    elif params.probabilities:
        low, high = sigmoid(limit), sigmoid(-limit)
    else:
        low, high = limit, -limit
    return [(mine[0], {key: low}, True), (mine[1], {key: high}, False)], new


def check_loaded(cal, kind, rank: dict, fail, brief) -> None:
    """Refuse ghosts a state file restored that the calibrator could not have made."""
    ghosts = cal.__dict__.get("_ghosts")
    if ghosts is None:
        return
    if type(ghosts) is not dict:
        fail(f"`_ghosts`: expected None or a dict of class -> (low, high); found {brief(ghosts)}.")
    if ghosts and cal.classes is not None:
        fail(f"`_ghosts`: expected none when `classes` is fixed; found {len(ghosts)}.")
    models = cal._models
    seen = {id(cal.calibrator)} | {id(model) for model in models.values()}
    for c, pair in ghosts.items():
        if c not in rank:
            fail(f"`_ghosts`: {brief(c)} is not a known class.")
        if type(pair) is not tuple or len(pair) != 2 or any(type(g) is not kind or id(g) in seen for g in pair):
            want = f"a tuple of two {kind.__name__}s of their own"
            fail(f"`_ghosts[{c!r}]`: expected {want}; found {brief(pair)}.")
        if pair[0] is pair[1]:
            fail(f"`_ghosts[{c!r}]`: expected two {kind.__name__}s of their own; found one twice.")
        seen.update((id(pair[0]), id(pair[1])))
        counts = [getattr(g, "n_learned", None) for g in pair]
        weights = [float(g.window_weight) for g in pair]
        if counts[0] != counts[1] or weights[0] != weights[1]:
            fail(
                f"`_ghosts[{c!r}]`: expected two ghosts that learned the same events; found n_learned "
                f"{counts} and window weights {weights}."
            )
    known = [c for c in rank if c in ghosts]
    for i, a in enumerate(known):
        for b in known[i + 1 :]:
            pair = (a, b) if rank[a] < rank[b] else (b, a)
            if pair not in models:
                fail(
                    f"`_ghosts`: classes {a!r} and {b!r} both have ghosts but no pair: an event of the later "
                    "one would have made it."
                )


class PairMerging(BinaryPartsMerging):
    """How two :class:`~streamcal.multiclass.PairwiseCouplingCalibrator` merge
    (:func:`streamcal.merging.merge`): into the calibrator that learned the first one's events,
    then the other's, with the classes of both.

    Each side's pair (a, b) is its pair, or where it has none the ghost that stands in for it (a
    class the side has not seen has the pairs the side would have held with the classes fixed,
    :func:`stand_in`), or nothing where the side knows neither class; the merged pair is the
    merge of the sides' pairs (:func:`streamcal.merging.merge` of the binary calibrators), or a
    copy of the one side that has one. The ghosts of each class merge the same way. With fixed
    ``classes`` (equal, as every parameter) there are no ghosts and the pairs merge alike.
    """

    _PARTS = "pairs'"

    def _merged_with(self, other):
        from streamcal.merging import merge

        with other._lock:
            theirs = (other._known(), other._models, held(other), other._last_time)
            mine = (self._known(), self._models, held(self), self._last_time)
            classes = sorted(set(mine[0]) | set(theirs[0]), key=self._order_key)
            models = {}
            for i, a in enumerate(classes):
                for b in classes[i + 1 :]:
                    sides = [pair_or_stand_in(side[1], side[2], a, b) for side in (mine, theirs)]
                    both = [model for model in sides if model is not None]
                    if both:
                        models[a, b] = merge(*both) if len(both) == 2 else copy.deepcopy(both[0])
            ghosts = {}
            for c in classes:
                sides = [side[2].get(c) for side in (mine, theirs) if side[2] and side[2].get(c) is not None]
                if sides:
                    ghosts[c] = tuple(
                        merge(sides[0][j], sides[1][j]) if len(sides) == 2 else copy.deepcopy(sides[0][j])
                        for j in (0, 1)
                    )
        if self.classes is None:
            self._classes = classes
        self._models = models
        if ghosts:
            self.__dict__["_ghosts"] = ghosts
        self._last_time = max(mine[3], theirs[3])
        return self
