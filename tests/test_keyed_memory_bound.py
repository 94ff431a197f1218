"""A template clone per key without ``max_keys``: the keys' clones fill at most half the machine's
memory, past which the least recently updated keys are evicted with one MemoryBoundWarning, exactly as
with ``max_keys`` at that bound; the sparse rows keep no bound."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from streamcal import KeyedCalibrator, PAVCalibrator, VennAbersCalibrator
from streamcal.buckets import LogitGrid
from streamcal.exceptions import MemoryBoundWarning


def _stream(n=600, keys=40, seed=0):
    rng = np.random.default_rng(seed)
    k = rng.integers(0, keys, n)
    s = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < s).astype(np.int8)
    return k, s, y


def _memory(monkeypatch, pages: int) -> None:
    real = os.sysconf

    def sysconf(name):
        if name == "SC_PHYS_PAGES":
            return pages
        if name == "SC_PAGE_SIZE":
            return 4096
        return real(name)

    monkeypatch.setattr(os, "sysconf", sysconf)


def _template():
    return VennAbersCalibrator(buckets=LogitGrid(16))


def test_the_bound_is_half_the_memory_over_a_clone_and_evicts_as_max_keys_would(monkeypatch):
    keys, scores, labels = _stream()
    big = KeyedCalibrator(_template(), prior_strength=0)
    per_key_limit = big.key_limit
    assert per_key_limit is not None
    assert per_key_limit > 1_000
    _memory(monkeypatch, 64)  # 256 KiB of memory in all
    cal = KeyedCalibrator(_template(), prior_strength=0)
    limit = cal.key_limit
    assert 1 <= limit < 40  # the stream's 40 keys do not fit
    with pytest.warns(MemoryBoundWarning, match="max_keys") as caught:
        proba, llr = cal.prequential(keys, scores, labels)
    assert sum(issubclass(w.category, MemoryBoundWarning) for w in caught) == 1  # one warning, not one per eviction
    assert cal.n_keys == limit
    assert cal.evictions > 0
    bounded = KeyedCalibrator(_template(), prior_strength=0, max_keys=limit)
    p2, l2 = bounded.prequential(keys, scores, labels)
    assert np.array_equal(proba, p2)
    assert np.array_equal(llr, l2)
    assert bounded.evictions == cal.evictions
    assert cal.keys() == bounded.keys()


def test_max_keys_overrides_the_memory_bound_and_warns_nothing(monkeypatch):
    keys, scores, labels = _stream()
    _memory(monkeypatch, 64)
    cal = KeyedCalibrator(_template(), prior_strength=0, max_keys=30)
    assert cal.key_limit == 30
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBoundWarning)
        cal.prequential(keys, scores, labels)
    assert cal.n_keys == 30


def test_unknown_memory_leaves_the_keys_unbounded(monkeypatch):
    keys, scores, labels = _stream()

    def no_sysconf(name):
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", no_sysconf)
    cal = KeyedCalibrator(_template(), prior_strength=0)
    assert cal.key_limit is None
    cal.prequential(keys, scores, labels)
    assert cal.n_keys == 40
    assert cal.evictions == 0


def test_the_sparse_rows_keep_no_bound(monkeypatch):
    keys, scores, labels = _stream()
    _memory(monkeypatch, 64)
    cal = KeyedCalibrator(PAVCalibrator(buckets=LogitGrid(16)))
    assert cal.key_limit is None
    cal.prequential(keys, scores, labels)
    assert cal.n_keys == 40
    assert cal.evictions == 0
