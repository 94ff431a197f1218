"""The keyed prior's source while the template's score prior holds, and the between-key noise margin.

The prior a key leans on is the isotonic fit of the row the global map fits: the global window
plus the score prior's pseudo-events while that holds, read in runs of bounded width in log-odds
(``streamcal._keyed_rows``); the automatic strength counts between-key variance only beyond the
noise of its statistic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal._kernels import _config
from streamcal._kernels import keyed as _kk
from streamcal._keyed_rows import RUN_COARSE, RUN_FINE, auto_strength


def _log_odds(p: float) -> float:
    q = min(max(p, 2.0**-53), 1.0 - 2.0**-53)
    return math.log(q) - math.log1p(-q)


def naive_prior_runs(values, weights, fine, coarse, share):
    """The runs' first blocks, by the rule as stated: a block opens a run when its log-odds are
    more than ``coarse`` above the run's first block's, or more than ``fine`` once the run holds
    ``share`` of the total weight."""
    need = share * sum(weights)
    starts, first, held = [0], _log_odds(values[0]), weights[0]
    for i in range(1, len(values)):
        span = _log_odds(values[i]) - first
        if span > coarse or (span > fine and held >= need):
            starts.append(i)
            first, held = _log_odds(values[i]), 0.0
        held += weights[i]
    return starts


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(1e-9, 1.0 - 1e-9), min_size=1, max_size=80, unique=True),
    st.lists(st.floats(0.0, 50.0), min_size=80, max_size=80),
    st.sampled_from([(0.2, 1.0), (0.0, 0.5), (0.5, 0.5)]),
    st.sampled_from([1 / 64, 1 / 4, 0.0]),
)
def test_prior_runs_follow_their_rule(values, weights, widths, share):
    values = np.sort(np.array(values))
    weights = np.array(weights[: values.size]) + 1e-3
    fine, coarse = widths
    starts = np.zeros(values.size, dtype=np.int64)
    n = _config.run(_kk.prior_runs, values.size, values, weights, values.size, fine, coarse, share, starts)
    expected = naive_prior_runs(values.tolist(), weights.tolist(), fine, coarse, share)
    assert starts[:n].tolist() == expected
    ends = [*expected[1:], values.size]
    for a, b in zip(expected, ends, strict=True):
        # every run spans at most ``coarse`` in log-odds, and more than ``fine`` only while light
        assert _log_odds(values[b - 1]) - _log_odds(values[a]) <= coarse + 1e-12


def _first_events(n):
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 10, size=30_000)
    score = rng.uniform(0.02, 0.3, size=keys.size)
    label = (rng.uniform(size=keys.size) < np.where(keys == 3, 0.5 * score, score)).astype(float)
    return keys[:n], score[:n], label[:n]


def test_a_keys_first_events_follow_the_global_map():
    # with a prior read from the global window's own fit alone, key 1 was served 0.70 at a score of
    # 0.051 after one positive at 0.191 (the global map served 0.051); the score prior's
    # pseudo-events in the source keep the keys' maps near the global map's until the keys' own
    # evidence says otherwise
    keys, score, label = _first_events(30)
    keyed, glob = KeyedCalibrator(), PAVCalibrator()
    for i in range(30):
        p_key = keyed.predict_proba([keys[i]], [score[i]])[0]
        p_glob = glob.predict_proba([score[i]])[0]
        assert abs(_log_odds(p_key) - _log_odds(p_glob)) < 0.5, (i, p_key, p_glob)
        keyed.update([keys[i]], [score[i]], [label[i]])
        glob.update([score[i]], [label[i]])
    assert keyed.global_calibrator.prior_strength > 0.0  # the case under test: the score prior holds


@pytest.mark.parametrize("n", [32, 512, 4096, 32_768])  # the prior has just followed the global map
def test_a_large_strength_serves_the_global_map_within_the_runs_width(n):
    # while the score prior holds, the prior is the fit of the global window plus the score
    # prior's pseudo-events, read in runs: a run's pooled rate lies within its log-odds span of
    # the fit, at most RUN_COARSE, and RUN_FINE where the traffic is; the finite rule moves the
    # two maps by less than 0.05 in log-odds more at these weights (without the score prior the
    # limit is exact: tests/test_keyed.py)
    rng = np.random.default_rng(n)
    keys = rng.integers(0, 10, size=n)
    s = rng.uniform(0.02, 0.3, size=n)
    y = (rng.uniform(size=n) < s).astype(float)
    cal = KeyedCalibrator(PAVCalibrator(interpolation="step"), prior_strength=1e12).update(keys, s, y)
    glob = cal.global_calibrator
    assert glob.prior_strength > 0.0
    centres = glob.centres
    gap = np.abs(
        np.array([_log_odds(p) for p in cal.predict_proba(np.full(centres.size, 3), centres)])
        - np.array([_log_odds(p) for p in glob.predict_proba(centres)])
    )
    assert gap.max() <= RUN_COARSE + 0.05
    if n >= 4096:  # the traffic holds the weight: narrow runs there
        traffic = (centres > 0.02) & (centres < 0.3)
        assert gap[traffic].max() <= RUN_FINE


def test_the_automatic_strength_counts_between_key_variance_beyond_the_noise():
    # K keys of E expected positives each, rho = 1: Q without between-key variance has mean K - 1
    # and (bounded) standard deviation sqrt(3 (K - 1)); an excess below that is noise
    k, e, total, rate = 10.0, 5.0, 1e4, 0.01
    s_e, s_e2, s_o = k * e, k * e * e, k * e
    denom = s_e - s_e2 / s_e
    sd = math.sqrt((k - 1.0) * 3.0)
    for excess, pooled in ((0.5 * sd, False), (0.99 * sd, False), (1.5 * sd, True), (4 * sd, True)):
        q = (k - 1.0) + excess  # Q = sum O^2 / E - rho sum O, so sum O^2 / E = Q + s_o
        m = auto_strength(k, s_o, s_e, s_e2, q + s_o, rate, total)
        if pooled:
            assert m == pytest.approx(1.0 / ((excess - sd) / denom * rate), rel=1e-12)
            assert m < total
        else:
            assert m == total  # no variance seen beyond the noise: the keys follow the global map
