"""``streamcal.merge`` dispatches to each class's own merge; the merged state is the single one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamcal import PAVCalibrator, merge
from streamcal._kernels import ipav as K
from streamcal.merging import Mergeable
from streamcal.windows import CountWindow, TimeWindow, Unbounded


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(300), TimeWindow(50.0)], ids=repr)
@pytest.mark.parametrize("fractional", [False, True], ids=["whole", "fractional"])
def test_merged_pav_keeps_the_whole_weights_flag_of_the_single_calibrator(window, fractional):
    rng = np.random.default_rng(3)
    n = 900
    scores = rng.uniform(size=n)
    labels = rng.uniform(size=n) < scores
    weights = rng.choice([1.0, 2.0], size=n)
    if fractional:
        weights[n // 3 + 7] = 0.25  # in the second part only
    times = np.cumsum(rng.uniform(size=n))
    # prior=None: a merge refits the score prior's strength to the merged window, which the single
    # calibrator refitted at its own counts; the bit-for-bit claim is about the window's map
    make = lambda: PAVCalibrator(buckets=32, window=window, prior=None)  # noqa: E731
    cuts = [0, n // 3, 2 * n // 3, n]
    parts = []
    for lo, hi in itertools.pairwise(cuts):
        part = make()
        part.update(scores[lo:hi], labels[lo:hi], weights=weights[lo:hi], times=times[lo:hi])
        parts.append(part)
    merged = merge(parts)
    single = make().update(scores, labels, weights=weights, times=times)
    assert int(merged.map_arrays()[1][K.PI_INTEGRAL]) == int(single.map_arrays()[1][K.PI_INTEGRAL]) == int(not fractional)
    # and so the two stay equal, bit for bit, as they go on learning
    t = times[-1]
    for i in range(200):
        t += 0.5
        x, y = {"s": float(scores[i])}, bool(labels[i])
        for cal in (merged, single):
            cal.learn_one(x, y, w=1.0, t=t)
        assert merged.predict_proba_one(x) == single.predict_proba_one(x)
    (merged_pf, merged_pi), (single_pf, single_pi) = merged.map_arrays(), single.map_arrays()
    np.testing.assert_array_equal(merged_pf.view(np.int64), single_pf.view(np.int64))
    np.testing.assert_array_equal(merged_pi, single_pi)


def test_merge_dispatches_to_the_class_of_the_first_learner():
    class Counter(Mergeable):
        def __init__(self, n=0):
            self.n = n

        def _get_params(self):
            return {}

        def _merged_with(self, other):
            self.n += other.n
            return self

    parts = [Counter(1), Counter(2), Counter(3)]
    merged = merge(parts)
    assert merged.n == 6
    assert [p.n for p in parts] == [1, 2, 3]  # inputs untouched
    with pytest.raises(TypeError, match="must all be Counter"):
        merge([Counter(1), PAVCalibrator()])


def test_merge_and_dask_read_no_private_state_of_other_objects():
    # the dispatcher calls the merge protocol (`_check_merge`, `_merged_with`) and river's
    # parameter API (`_get_params`); everything else it reads of another object is public
    import ast
    from pathlib import Path

    import streamcal

    allowed = {"_check_merge", "_merged_with", "_get_params"}
    for name in ("merging.py", "dask.py"):
        tree = ast.parse((Path(streamcal.__file__).parent / name).read_text(encoding="utf-8"))
        private = sorted(
            {
                node.attr
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in allowed
            }
        )
        assert private == [], (name, private)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("streamcal"):
                assert all(not alias.name.startswith("_") for alias in node.names), (name, node.module)
