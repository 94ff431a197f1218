"""A keyed calibrator's LLR: its prior odds are the global window's own, at the prior's share.

A key's LLR is ``logit(p) - log(prior odds)``, the prior odds those of the events its map was fit
to: the key's window plus the prior's pseudo-events standing for the global window's. Where the
global map holds its score prior, the prior's row also holds the score prior's pseudo-events in
every bucket, at rates that follow the score up to 1: their totals are not the window's odds, and
the global map's own LLR does not read them. These tests pin the limit and the shift."""

from __future__ import annotations

import io

import numpy as np
import pytest

import streamcal
from streamcal import KeyedCalibrator, PAVCalibrator


def _stream(n=16_382, keys=50, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.beta(1, 30, n)
    return rng.integers(0, keys, n), s, rng.uniform(size=n) < s


def _prior_log_odds(proba, llr):
    proba = np.asarray(proba, dtype=np.float64)
    return np.log(proba) - np.log1p(-proba) - np.asarray(llr)


@pytest.mark.parametrize(
    ("template", "n"),
    # the stream ends at a refresh: after 16,384 events unbounded; with a global window of 1,000
    # the refreshes double up to 512, then come every 500 (half the window): 16,012 is one
    [(PAVCalibrator(), 16_382), (PAVCalibrator(window=1000), 16_010), (PAVCalibrator(prior=None, window=1000), 16_010)],
)
def test_a_very_strong_prior_gives_the_global_maps_prior_odds(template, n):
    """With a strength of 1e12 a key's map is the global map's (within the runs the prior is read
    in), and its LLR's prior odds are the global map's: the key's two events weigh nothing."""
    k, s, y = _stream(n)
    cal = KeyedCalibrator(template, prior_strength=1e12)
    cal.update(k, s, y)
    cal.update([7777, 7777], [0.05, 0.05], [True, True])  # one more refresh comes with the second
    glob = cal.global_calibrator
    scores = np.array([0.01, 0.03, 0.05, 0.1])
    for key in (7777, 3):
        p, llr = cal.predict_proba([key] * 4, scores), cal.predict_llr([key] * 4, scores)
        g_p, g_llr = glob.predict_proba(scores), glob.predict_llr(scores)
        np.testing.assert_allclose(_prior_log_odds(p, llr), _prior_log_odds(g_p, g_llr), rtol=0, atol=1e-6)


def test_the_shifted_prior_shifts_the_prior_odds_by_the_keys_multiplier():
    """Under "auto" a key's prior is the global map with its odds multiplied by the key's shift: a
    key of no evidence of its own beyond that shift is served prior odds of the global window's
    odds times the shift (its own few events aside)."""
    rng = np.random.default_rng(1)
    n = 40_000
    k = rng.integers(0, 20, n)
    z = rng.normal(-3.0, 1.0, n)
    shift = np.linspace(-1.0, 1.0, 20)[k]
    s = 1 / (1 + np.exp(-z))
    y = rng.uniform(size=n) < 1 / (1 + np.exp(-(z + shift)))
    cal = KeyedCalibrator()  # the default template: the global map holds its score prior at first
    cal.prequential(k, s, y)
    row = cal.global_calibrator.window_histogram.row()
    global_odds = row.pos.sum() / row.neg.sum()
    for key in (0, 10, 19):
        e = cal.key_shift(key)
        assert e != 1.0
        own = cal.key_state(key).window_histogram.row()
        p = cal.predict_proba([key], [0.05])
        llr = cal.predict_llr([key], [0.05])
        implied = float(np.exp(_prior_log_odds(p, llr))[0])
        # the key's own events weigh against the prior's: its odds lie between the shifted
        # global odds and its own window's
        own_odds = own.pos.sum() / own.neg.sum()
        lo, hi = sorted((e * global_odds, own_odds))
        assert lo * 0.98 <= implied <= hi * 1.02, (key, e, implied, e * global_odds, own_odds)


def test_the_score_prior_does_not_move_the_llrs_prior_odds():
    """The template's score prior changes a key's first probabilities, not the prior odds its LLR
    is read against: on a stream of 300 Zipf keys, every event's prior log-odds (``logit(p) -
    llr``) with the default template lies within 1 of the template's without its score prior, 99 %
    of them within 0.25 and the median within 0.1, unbounded and with a count window (before, the
    medians differed by 0.6 and 1.5, the 99th percentiles by 2.5 and single events by up to 3.6)."""
    rng = np.random.default_rng(2)
    n = 30_000
    k = np.minimum(rng.zipf(1.3, n), 300)
    z = rng.normal(-3.0, 1.2, n)
    a = np.exp(rng.normal(0, 0.2, 301))[k]
    b = rng.normal(0, 0.5, 301)[k]
    s = 1 / (1 + np.exp(-z))
    y = rng.uniform(size=n) < 1 / (1 + np.exp(-(a * z + b)))
    for window in (None, 2000):
        odds = [_prior_log_odds(*KeyedCalibrator(PAVCalibrator(window=window, prior=prior)).prequential(k, s, y))
                for prior in ("auto", None)]
        gap = np.abs(odds[0] - odds[1])
        assert np.median(gap) < 0.1, (window, np.median(gap))
        assert np.percentile(gap, 99) < 0.25, (window, np.percentile(gap, 99))
        assert gap.max() < 1.0, (window, gap.max())


def test_a_state_saved_without_the_window_totals_loads_and_reads_the_prior_totals():
    """States written before the LLR read the global window's own odds load: they read the prior's
    totals, as they did, until the prior's next refresh takes the window's."""
    k, s, y = _stream(n=3000)
    cal = KeyedCalibrator()
    cal.update(k, s, y)
    state = cal.__getstate__()
    assert state["_src_base"].sum() > 0.0
    old = dict(state)
    del old["_src_base"]
    restored = KeyedCalibrator.__new__(KeyedCalibrator)
    restored.__setstate__(old)
    np.testing.assert_array_equal(restored.predict_proba([3], [0.05]), cal.predict_proba([3], [0.05]))
    buf = io.BytesIO()
    streamcal.save(cal, buf)
    buf.seek(0)
    again = streamcal.load(buf)
    np.testing.assert_array_equal(again.predict_llr(k[:50], s[:50]), cal.predict_llr(k[:50], s[:50]))


def test_a_damaged_window_total_is_refused():
    k, s, y = _stream(n=3000)
    cal = KeyedCalibrator()
    cal.update(k, s, y)
    state = cal.__getstate__()
    state["_src_base"] = np.array([-1.0, 5.0])
    with pytest.raises(streamcal.exceptions.StateFileError, match="_src_base"):
        KeyedCalibrator.__new__(KeyedCalibrator).__setstate__(state)
