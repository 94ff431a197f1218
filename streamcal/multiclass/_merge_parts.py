"""What the two multiclass calibrators' merges share: the public ``merge`` and the refusal of a
binary calibrator that does not merge. Each merges its parts in ``_merged_with``
(:mod:`streamcal.multiclass._ghosts` for pairwise coupling, :mod:`streamcal.multiclass._ovr_merge`
for one-vs-rest)."""

from __future__ import annotations

from streamcal.merging import Mergeable


class BinaryPartsMerging(Mergeable):
    """A multiclass calibrator made of binary calibrators (its pairs or its classes), which
    merges part by part."""

    _PARTS = "parts'"  # how the refusal names the parts: "pairs'", "classes'"

    def merge(self, *others):
        """A new calibrator equal to one that learned the events of ``self``, then of ``others``,
        over the classes of all of them. None of them is modified.

        Examples
        --------
        >>> from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator
        >>> a, b = PairwiseCouplingCalibrator(), PairwiseCouplingCalibrator()
        >>> a.learn_one({0: 0.7, 1: 0.3}, 0)
        >>> b.learn_one({1: 0.4, 2: 0.6}, 2)
        >>> merged = a.merge(b)
        >>> merged.classes_, sorted(merged.pairs_)
        ([0, 1, 2], [(0, 1), (0, 2), (1, 2)])
        >>> a, b = OneVsRestCalibrator(), OneVsRestCalibrator()
        >>> a.learn_one({0: 0.7, 1: 0.3}, 0)
        >>> b.learn_one({1: 0.4, 2: 0.6}, 2)
        >>> merged = a.merge(b)
        >>> merged.classes_, [m.n_learned for m in merged.calibrators_.values()]
        ([0, 1, 2], [2, 2, 2])
        """
        from streamcal.merging import merge

        return merge([self, *others])

    def _check_merge(self, items: list) -> None:
        prototype = self._new_binary()
        if not isinstance(prototype, Mergeable):
            name = type(prototype).__name__
            msg = f"`calibrators` cannot be merged: their {self._PARTS} calibrator {name} does not merge."
            raise TypeError(msg)
