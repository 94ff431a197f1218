"""``streamcal replay`` keeps the memory it frees (glibc's ``mallopt``), and goes on without it
where the C library has no ``mallopt`` or cannot be opened."""

from __future__ import annotations

import ctypes

import pytest

from streamcal.replay import _cli


def test_the_thresholds_are_raised_through_mallopt(monkeypatch):
    calls = []

    class Libc:
        def mallopt(self, option, value):
            calls.append((option, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc())
    _cli._keep_freed_memory()
    assert calls == [(-3, 32 << 20), (-1, 128 << 20)]  # M_MMAP_THRESHOLD, then M_TRIM_THRESHOLD


@pytest.mark.parametrize("error", [OSError, AttributeError, TypeError])
def test_without_mallopt_nothing_happens(monkeypatch, error):
    def cdll(name):
        raise error("no C library here")

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    _cli._keep_freed_memory()  # no error


def test_on_this_platform_it_runs():
    _cli._keep_freed_memory()
