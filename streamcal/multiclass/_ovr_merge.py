"""How two :class:`~streamcal.multiclass.OneVsRestCalibrator` merge (:func:`streamcal.merging.merge`).

Without fixed ``classes``, a one-vs-rest calibrator keeps an absent-class calibrator that learns
every event as a class absent from it (its score at the clip, label False), where the binary
calibrator takes every score it is given: the calibrator a class the side has not seen would
hold. So each side's class c is its calibrator, or where it has none its absent-class calibrator,
or nothing (a side without events, or one keeping no absent class); the merged class merges the
sides' calibrators, or copies the one side that has one. The absent-class calibrators merge the
same way. With fixed ``classes`` (equal, as every parameter) there is no absent class. Where the
binary calibrator may refuse a score no absent class is kept, and a class one side has not seen is
the other side's calibrator alone (as a class joining such a calibrator lacks the earlier events).
"""

from __future__ import annotations

import copy

from streamcal.multiclass._merge_parts import BinaryPartsMerging


def _absent(cal):
    """The absent-class calibrator ``cal`` keeps, or None (fixed classes, no event yet, or a
    binary calibrator that may refuse a score)."""
    if cal.classes is not None:
        return None
    return cal.__dict__.get("_absent")


class OvRMerging(BinaryPartsMerging):
    """The merge of one-vs-rest calibrators: into the calibrator that learned the first one's
    events, then the other's, over the classes of both (see :mod:`streamcal.multiclass._ovr_merge`)."""

    _PARTS = "classes'"

    def _merged_with(self, other):
        from streamcal.merging import merge

        with other._lock:
            mine = (self._known(), self._models, _absent(self), self._last_time)
            theirs = (other._known(), other._models, _absent(other), other._last_time)
            classes = sorted(set(mine[0]) | set(theirs[0]), key=self._order_key)
            models = {}
            for c in classes:
                sides = [side[1].get(c, side[2]) for side in (mine, theirs)]
                both = [model for model in sides if model is not None]
                if both:
                    models[c] = merge(*both) if len(both) == 2 else copy.deepcopy(both[0])
            absent = [side[2] for side in (mine, theirs) if side[2] is not None]
            if len(absent) == 2:
                absent = merge(*absent)
            elif absent:
                absent = copy.deepcopy(absent[0])
            else:
                absent = None
        if self.classes is None:
            self._classes = classes
        self._models = models
        if absent is not None:
            self.__dict__["_absent"] = absent
        self._last_time = max(mine[3], theirs[3])
        return self
