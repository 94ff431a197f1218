"""Helpers for tests that compare binary calibrators held inside wrappers (multiclass pairs and
classes, merges): equality of two calibrators' states and maps, bit for bit, and a binary
calibrator that does not merge, and merges made while a part learns on another thread."""

from __future__ import annotations

import numpy as np
from river import base

GRID = np.linspace(0.0, 1.0, 65)


def assert_same_binary(mine, theirs, grid=GRID):
    """The same learned count, window weight, histogram, blocks and map on ``grid``, bit for bit."""
    assert mine.n_learned == theirs.n_learned
    assert mine.window_weight == theirs.window_weight
    np.testing.assert_array_equal(mine.predict_proba(grid), theirs.predict_proba(grid))
    np.testing.assert_array_equal(mine.predict_llr(grid), theirs.predict_llr(grid))
    for a, b in zip(mine.histogram(), theirs.histogram(), strict=True):
        np.testing.assert_array_equal(a, b)
    a, b = mine.blocks(), theirs.blocks()
    for field in ("first", "last", "pos", "neg"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


class Counting(base.Classifier):
    """A binary calibrator that does not merge."""

    def __init__(self):
        self.n = 0

    def learn_one(self, x, y):
        self.n += 1

    def predict_proba_one(self, x):
        return {True: 0.5, False: 0.5}

    @property
    def window_weight(self):
        return float(self.n)


def merges_while_learning(learn, merge_once) -> list:
    """Call ``merge_once()`` again and again while ``learn()`` runs on another thread, the
    interpreter switching threads every microsecond; return the merges made."""
    import sys
    import threading

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        thread = threading.Thread(target=learn)
        thread.start()
        merged = []
        while thread.is_alive():
            merged.append(merge_once())
        thread.join()
    finally:
        sys.setswitchinterval(old)
    return merged
