"""Decay by time counts the window's events apart from their weights, so that PAV's score prior
refits at the events' pace whatever the weights (tests/test_pav_prior_schedule.py has the rule).

With unit weights the counts are the class totals bit for bit (the same additions of the same
units), so the schedule, and every output, is what it was when the refits followed the weights.
"""

from __future__ import annotations

import numpy as np
import pytest

import streamcal as sc
from streamcal import persist
from streamcal._kernels import histogram as H
from streamcal._kernels import ipav
from streamcal.merging import merge
from streamcal.windows import CountWindow, Decay
from tests.state_files import array_of, objects, pack, unpack

CLASSES = [sc.PAVCalibrator, sc.ISplineCalibrator, sc.PlattCalibrator, sc.GEVCalibrator, sc.VennAbersCalibrator]


def _stream(n, seed=0, gap=1.0):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.01, 0.99, n)
    y = (rng.random(n) < s).astype(float)
    t = np.cumsum(rng.exponential(gap, n))
    return s, y, t


def _header(cal):
    sf = cal.__getstate__()["_sf"]
    return sf[H.SF_T_POS], sf[H.SF_T_NEG], sf[H.SF_EVENTS_POS], sf[H.SF_EVENTS_NEG]


def _next_refit(cal):
    pf, pi = cal.map_arrays()
    return float(pf[ipav.pav_state_sizes_before_prior(int(pi[ipav.PI_B])) + ipav.PR_NEXT])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_unit_weights_count_their_events_as_their_weights_bit_for_bit(cls):
    # gaps of 40 half-lives' worth over the stream bring renormalisations of the frame
    s, y, t = _stream(3000, gap=3.0)
    cal = cls(window=Decay(half_life=20.0, by="time"))
    cal.update(s[:1000], y[:1000], times=t[:1000])
    for i in range(1000, 1200):
        cal.learn_one({"s": float(s[i])}, bool(y[i]), t=float(t[i]))
    cal.prequential(s[1200:], y[1200:], times=t[1200:])
    assert cal.window_histogram.renormalisations() > 0
    t_pos, t_neg, e_pos, e_neg = _header(cal)
    assert t_pos > 0.0
    assert t_neg > 0.0
    assert (e_pos, e_neg) == (t_pos, t_neg)
    # and through a merge, which ages each part to the latest time
    a, b = cls(window=Decay(half_life=20.0, by="time")), cls(window=Decay(half_life=20.0, by="time"))
    odd = np.arange(3000) % 2 == 1
    a.update(s[odd], y[odd], times=t[odd])
    b.update(s[~odd], y[~odd], times=t[~odd])
    t_pos, t_neg, e_pos, e_neg = _header(merge(a, b))
    assert (e_pos, e_neg) == (t_pos, t_neg)


@pytest.mark.parametrize("scale", [1e-3, 0.0, 40.0])
def test_the_counts_follow_the_events_whatever_their_weights(scale):
    s, y, t = _stream(2000)
    h = 50.0
    cal = sc.PAVCalibrator(window=Decay(half_life=h, by="time"))
    cal.update(s, y, weights=np.full(s.size, scale), times=t)
    _, _, e_pos, e_neg = _header(cal)
    unit = 2.0 ** ((t[-1] - cal.__getstate__()["_sf"][H.SF_T0]) / h)
    decayed = 2.0 ** (-(t[-1] - t) / h)
    np.testing.assert_allclose(e_pos / unit, decayed[y == 1.0].sum(), rtol=1e-12)
    np.testing.assert_allclose(e_neg / unit, decayed[y == 0.0].sum(), rtol=1e-12)


def test_small_weights_refit_rarely_under_decay_by_time():
    s, y, t = _stream(20_000, seed=7)
    for weight in (1.0, 1e-3):
        cal = sc.PAVCalibrator(window=Decay(half_life=2000.0, by="time"))
        refits, last = 0, _next_refit(cal)
        for lo in range(0, s.size, 100):
            part = slice(lo, lo + 100)
            cal.update(s[part], y[part], weights=np.full(100, weight), times=t[part])
            refits += _next_refit(cal) != last
            last = _next_refit(cal)
        # half steps of at most the window's events (about 2,900 here): far fewer than the 200
        # chunks; the weights' own total (about 2.9 at 1e-3) would bring a refit at every event
        assert refits <= 40, (weight, refits)


def _saved_arrays(cal):
    manifest, arrays, pickles = unpack(persist.to_bytes(cal, allow_pickle=False))
    (_, node), *_ = objects(manifest)
    return manifest, arrays, pickles, array_of(node, "_sf")


def test_a_file_written_before_the_counts_loads_and_counts_the_weights():
    """An older file holds 0.0 in the counts' slots: it loads, takes each class's weight as its
    count (what its refits followed), and continues as the calibrator whose counts were its weights."""
    s, y, t = _stream(600)
    cal = sc.PAVCalibrator(window=Decay(half_life=50.0, by="time"))
    cal.update(s[:400], y[:400], weights=np.full(400, 0.5), times=t[:400])
    manifest, arrays, pickles, name = _saved_arrays(cal)
    sf = arrays[name].copy()
    assert sf[H.SF_EVENTS_POS] > 0.0
    sf[H.SF_EVENTS_POS] = sf[H.SF_EVENTS_NEG] = 0.0
    old = persist.from_bytes(pack(manifest, {**arrays, name: sf}, pickles))
    t_pos, t_neg, e_pos, e_neg = _header(old)
    assert (e_pos, e_neg) == (t_pos, t_neg)
    np.testing.assert_array_equal(old.predict_proba(s[400:]), cal.predict_proba(s[400:]))
    old.update(s[400:], y[400:], weights=np.full(200, 0.5), times=t[400:])
    assert old.n_learned == 600


@pytest.mark.parametrize("value", [-1.0, np.nan, np.inf])
def test_a_file_with_a_bad_count_is_refused(value):
    s, y, t = _stream(50)
    cal = sc.PAVCalibrator(window=Decay(half_life=50.0, by="time"))
    cal.update(s, y, times=t)
    manifest, arrays, pickles, name = _saved_arrays(cal)
    sf = arrays[name].copy()
    sf[H.SF_EVENTS_NEG] = value
    with pytest.raises(sc.exceptions.StateFileError, match="decayed count of negative events"):
        persist.from_bytes(pack(manifest, {**arrays, name: sf}, pickles))


@pytest.mark.parametrize("window", [CountWindow(n=30), Decay(half_life=10.0)], ids=repr)
def test_other_windows_keep_no_counts_and_refuse_a_file_with_them(window):
    s, y, _ = _stream(50)
    cal = sc.PAVCalibrator(window=window)
    cal.update(s, y)
    assert _header(cal)[2:] == (0.0, 0.0)
    manifest, arrays, pickles, name = _saved_arrays(cal)
    sf = arrays[name].copy()
    sf[H.SF_EVENTS_POS] = 3.0
    with pytest.raises(sc.exceptions.StateFileError, match="decayed event counts"):
        persist.from_bytes(pack(manifest, {**arrays, name: sf}, pickles))
