"""minCllr's per-event pass (``streamcal._kernels.metrics.costs_in_event_order``) against numpy's
binary search: each event's block, whichever way the kernel finds it (a table cell, its forward
scan, a binary search in a crowded cell, every score in one cell where the blocks' range is
subnormal, overflows or is infinite), in both tiers."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal._kernels import _config
from streamcal._kernels import metrics as _k


def expected(s, y, lowest, cost_pos, cost_neg):
    block = np.searchsorted(lowest, s, side="right") - 1
    positive = y == 1.0
    return np.concatenate((cost_pos[block[positive]], cost_neg[block[~positive]])), int(positive.sum())


def lowest_scores(kind: str, rng, nb: int) -> np.ndarray:
    if kind == "uniform":
        inner = rng.uniform(-5.0, 5.0, nb - 1)
    elif kind == "crowded":  # most boundaries inside one cell of a table over a wide range
        inner = np.concatenate((rng.uniform(0.0, 1e-9, max(nb - 3, 1)), [-1e6, 1e6]))
    elif kind == "overflowing":
        inner = np.concatenate((rng.normal(size=max(nb - 3, 1)), [-1e308, 1e308]))
    elif kind == "subnormal":
        inner = rng.integers(1, 50, nb - 1) * 5e-324
    else:  # infinite ends
        inner = np.concatenate((rng.normal(size=max(nb - 2, 1)), [np.inf]))
    return np.concatenate(([-np.inf], np.unique(inner)))


@pytest.mark.parametrize("tier", ["compiled", "interpreted"])
@pytest.mark.parametrize("kind", ["uniform", "crowded", "overflowing", "subnormal", "infinite"])
@pytest.mark.parametrize("nb", [1, 2, 40, 900])
def test_each_event_gets_the_block_a_binary_search_gives(tier, kind, nb):
    rng = np.random.default_rng(nb)
    lowest = lowest_scores(kind, rng, nb) if nb > 1 else np.array([-np.inf])
    n = 3_000
    s = np.concatenate((rng.choice(lowest, n // 3), rng.choice(lowest, n // 3) * (1 + 1e-16), rng.normal(size=n // 3)))
    s = np.concatenate((s, [np.inf, -np.inf, 0.0, -0.0]))
    rng.shuffle(s)
    y = (rng.uniform(size=s.size) < 0.3).astype(np.float64)
    cost_pos, cost_neg = rng.uniform(size=lowest.size), rng.uniform(size=lowest.size)
    out = np.full(s.size, np.nan)
    table = np.empty(32 * lowest.size, dtype=np.int32)
    args = (s, y, lowest, cost_pos, cost_neg, table, out)
    if tier == "compiled":
        k = _config.compiled(_k.costs_in_event_order)(*args)
    else:
        k = _config.run_interpreted(_k.costs_in_event_order, *args)
    want, k_want = expected(s, y, lowest, cost_pos, cost_neg)
    assert k == k_want
    np.testing.assert_array_equal(out, want)
