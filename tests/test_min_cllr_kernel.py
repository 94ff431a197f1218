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


def sorted_by_radix(x):
    out = np.empty(x.size, dtype=np.uint64)
    tmp = np.empty(x.size, dtype=np.uint64)
    counts = np.empty(_k.RADIX_COUNTS, dtype=np.int64)
    ok = _config.compiled(_k.sort_float_bits)(x.view(np.uint64), out, tmp, counts)
    return ok, out.view(np.float64)


@pytest.mark.parametrize("kind", ["normal", "ties", "extremes", "one digit", "short"])
def test_radix_sort_gives_numpys_sorted_values(kind):
    rng = np.random.default_rng(11)
    if kind == "normal":
        x = rng.normal(size=50_000) * 7.0
    elif kind == "ties":
        x = rng.integers(-4, 4, 20_000).astype(np.float64)
    elif kind == "extremes":
        pool = [0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 1e308, -1e308, 2.2e-308, 1.0, -1.0]
        x = np.concatenate((rng.choice(pool, 5_000), rng.normal(size=5_000)))
    elif kind == "one digit":  # every value shares the high digits: those passes are skipped
        x = 1.0 + rng.integers(0, 1 << 20, 10_000) * 2.0**-52
    else:
        x = np.array([3.0, -0.0, 0.0, -2.0])
    ok, got = sorted_by_radix(x.copy())
    want = np.sort(x)
    assert ok
    np.testing.assert_array_equal(got, want)
    # the zeros' signs may differ from numpy's order (equal floats); every other value's bits do not
    nonzero = want != 0.0
    np.testing.assert_array_equal(got[nonzero].view(np.uint64), want[nonzero].view(np.uint64))
    assert np.count_nonzero(np.signbit(got) & ~nonzero) == np.count_nonzero(np.signbit(x) & (x == 0.0))


def test_radix_sort_declines_nan():
    for nan in (np.nan, -np.nan):
        ok, _ = sorted_by_radix(np.array([1.0, nan, -2.0]))
        assert not ok


@pytest.mark.parametrize("ties", [False, True])
def test_min_cllr_by_radix_sort_equals_numpys_sort(monkeypatch, ties):
    """minCllr from the radix-sorted scores is the value from numpy's sort, bit for bit."""
    from streamcal.metrics import min_cllr

    _config.use_compiled_kernels()
    rng = np.random.default_rng(5)
    n = 30_000
    s = rng.normal(size=n) * 3.0
    if ties:
        s = np.round(s, 1)
        s[rng.integers(0, n, 300)] = rng.choice([np.inf, -np.inf, 0.0, -0.0], 300)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-np.clip(s, -30, 30)))).astype(np.float64)
    got = min_cllr(y, s)
    monkeypatch.setattr("streamcal.metrics._array._RADIX_MIN", n + 1)
    want = min_cllr(y, s)
    assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64)
