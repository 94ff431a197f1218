"""The LLR of a key pooled over a refitted template (I-spline, Platt, GEV): as the prior strength
grows it tends to the global map's LLR as the probability tends to its probability (the finite
rule's pseudo-count shared as in the PAV path, the prior odds read at the global map's own rate),
a medium strength lies between, and a saved state continues exactly."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from streamcal import GEVCalibrator, ISplineCalibrator, KeyedCalibrator, PlattCalibrator
from streamcal.keyed import TemplateKeyedCalibrator
from streamcal.persist import to_bytes
from streamcal.windows import CountWindow, Decay, TimeWindow

GRID = np.linspace(0.02, 0.98, 200)

# Each template with the stream length at which the keyed prior is refreshed (taken from the
# global map as it is): 4096 while refreshes double up to 2**14 events, and under a window that
# renews itself faster every half-span after 256 (256 + 200 j for 400 events, 256 + 250 j for a
# half-life of 500 events). Between refreshes the prior lags the global map by design.
AT_REFRESH = {
    "ispline": (ISplineCalibrator(prior=None), 4096),
    "ispline-score-prior": (ISplineCalibrator(), 4096),
    "ispline-count": (ISplineCalibrator(window=CountWindow(400), prior=None), 4056),
    "ispline-decay": (ISplineCalibrator(window=Decay(500)), 4006),
    "platt": (PlattCalibrator(prior=None), 4096),
    "platt-score-prior": (PlattCalibrator(), 4096),
    "platt-count": (PlattCalibrator(window=CountWindow(400), prior=None), 4056),
    "platt-time": (PlattCalibrator(window=TimeWindow(500.0)), 4096),
    "gev": (GEVCalibrator(prior=None), 4096),
    "gev-time": (GEVCalibrator(window=TimeWindow(1000.0), prior=None), 4096),
    "gev-count": (GEVCalibrator(window=CountWindow(400), prior=None), 4056),
    "gev-score-prior": (GEVCalibrator(), 4096),
}
# maps refitted every k labels take a moved prior before their key's next label
EVERY = {
    "ispline-count-every": (ISplineCalibrator(window=CountWindow(400), refit_every=5, prior=None), 4056),
    "gev-every": (GEVCalibrator(refit_every=7, prior=None), 4096),
}
# Where the probability gap is the fit's tolerance (I-spline, Platt), the LLR gap is bounded in
# log-odds; the GEV family fitted to the global map's served values (which the global map clips
# past its support) misfits them, by 1.7e-3 to 6.4e-3 in probability here, and the LLR follows
# it (0.06 to 0.14 where the probability is near 1). With its score prior on, the global GEV map
# serves its logistic member while the prior holds, which the keys' GEV family fits less well
# (1.7e-2 in probability, 1.2 in LLR at the score 0.02).
LLR_TOLERANCE = {"ispline": 1e-3, "platt": 1e-7, "gev": 0.25, "gev-score-prior": 1.5}


def stream(n, n_keys=4, seed=7):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, n_keys, size=n)
    s = rng.uniform(0.01, 0.99, size=n)
    t = np.cumsum(rng.exponential(1.0, size=n))
    slope = np.linspace(0.5, 2.0, n_keys)[keys]
    y = rng.uniform(size=n) < s**slope
    return keys, s, y, t


def logit(p):
    return np.log(p) - np.log1p(-p)


def gaps(cal, glob, n_keys=4):
    """The largest gaps over the keys and the grid between each key's and ``glob``'s: in the
    probability, in the LLR, and in the LLR beyond the probability's own gap in log-odds."""
    g_p, g_llr = glob.predict_proba(GRID), glob.predict_llr(GRID)
    out = np.zeros(3)
    for key in range(n_keys):
        k = np.full(GRID.size, key)
        p, llr = cal.predict_proba(k, GRID), cal.predict_llr(k, GRID)
        beyond = (llr - g_llr) - (logit(p) - logit(g_p))
        out = np.maximum(out, [np.abs(p - g_p).max(), np.abs(llr - g_llr).max(), np.abs(beyond).max()])
    return out


@pytest.mark.parametrize("name", list(AT_REFRESH))
def test_large_strength_llr_tends_to_the_global_llr(name):
    template, n = AT_REFRESH[name]
    keys, s, y, t = stream(n)
    cal = KeyedCalibrator(template, prior_strength=1e12).update(keys, s, y, times=t)
    _d_p, d_llr, beyond = gaps(cal, cal.global_calibrator)
    assert beyond < 1e-4  # the LLR departs from the global's no further than the probability does
    assert d_llr < LLR_TOLERANCE.get(name, LLR_TOLERANCE[name.split("-")[0]])
    # and far from it without the prior
    own = KeyedCalibrator(template, prior_strength=0).update(keys, s, y, times=t)
    assert gaps(own, cal.global_calibrator)[1] > 0.3


@pytest.mark.parametrize("name", list(EVERY))
def test_large_strength_llr_of_a_map_refitted_every_k_labels(name):
    template, n = EVERY[name]
    keys, s, y, t = stream(n + 40)
    cal = KeyedCalibrator(template, prior_strength=1e12).update(keys[:n], s[:n], y[:n], times=t[:n])
    glob = cal.global_calibrator  # the map the prior was just taken from
    for i in sorted(n + int(np.flatnonzero(keys[n:] == key)[0]) for key in range(4)):
        cal.update(keys[i : i + 1], s[i : i + 1], y[i : i + 1], times=t[i : i + 1])  # each key refits once
    _d_p, d_llr, beyond = gaps(cal, glob)
    assert beyond < 1e-4
    assert d_llr < LLR_TOLERANCE[name.split("-")[0]]


@pytest.mark.parametrize("name", ["ispline", "platt", "gev"])
def test_medium_strength_llr_lies_between_the_keys_own_and_the_global(name):
    template, _ = AT_REFRESH[name]
    keys, s, y, t = stream(2000, seed=8)
    grid = np.linspace(0.05, 0.95, 19)
    llr = {}
    for m in (0, 300.0, 1e12):
        cal = KeyedCalibrator(template, prior_strength=m).update(keys, s, y, times=t)
        llr[m] = np.stack([cal.predict_llr(np.full(19, key), grid) for key in range(4)])
        assert (np.diff(llr[m], axis=1) >= -1e-12).all()  # monotone in the score
    own, mid, glob = llr[0], llr[300.0], llr[1e12]
    for key in range(4):
        span = np.abs(glob[key] - own[key]).mean()
        assert np.abs(mid[key] - own[key]).mean() < span
        assert np.abs(mid[key] - glob[key]).mean() < span


@pytest.mark.parametrize("name", ["ispline-decay", "platt-time", "gev"])
def test_pooled_llr_continues_exactly_after_save_and_load(tmp_path, name):
    template, _ = AT_REFRESH[name]
    keys, s, y, t = stream(1500, seed=9)
    cal = KeyedCalibrator(template, prior_strength=50.0).update(keys[:1000], s[:1000], y[:1000], times=t[:1000])
    back = KeyedCalibrator.load(cal.save(tmp_path / "keyed.zip"))
    assert to_bytes(back) == to_bytes(cal)
    rest = (keys[1000:], s[1000:], y[1000:])
    a_p, a_llr = cal.prequential(*rest, times=t[1000:])  # through a refresh of the prior (at 1024)
    b_p, b_llr = back.prequential(*rest, times=t[1000:])
    assert np.array_equal(a_p, b_p)
    assert np.array_equal(a_llr, b_llr)


def test_a_state_without_the_global_rule_reads_its_own_until_the_next_refresh():
    # a state written before the prior kept the global map's finite rule: its keys read their
    # pooled fit's own rule, and from the next refresh of the prior on they are the current ones
    keys, s, y, _t = stream(1200, seed=10)
    cal = KeyedCalibrator(PlattCalibrator(), prior_strength=50.0).update(keys[:1000], s[:1000], y[:1000])
    state = copy.deepcopy(cal.__getstate__())
    del state["_src_rule"]
    old = TemplateKeyedCalibrator.__new__(TemplateKeyedCalibrator)
    old.__setstate__(state)
    rest = (keys[1000:], s[1000:], y[1000:])
    a_p, a_llr = cal.prequential(*rest)
    b_p, b_llr = old.prequential(*rest)
    # before the refresh the keys' refits (after their labels) read their own rule: the same
    # probabilities, another LLR; from the refresh on (at 1024) the keys refit as they take the prior
    after = np.arange(1000, 1200) >= 1024
    assert np.array_equal(a_p, b_p)
    assert not np.array_equal(a_llr[~after], b_llr[~after])
    assert np.array_equal(a_llr[after], b_llr[after])
    for key in range(4):
        k = np.full(GRID.size, key)
        assert np.array_equal(old.predict_llr(k, GRID), cal.predict_llr(k, GRID))
    assert to_bytes(old) == to_bytes(cal)
