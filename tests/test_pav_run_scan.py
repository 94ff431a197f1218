"""The finite-LLR end runs over the prior's row (every bucket a knot) find each next block by
scanning the owners, not by the block links. After every event of decayed and count-window
streams whose runs cross blocks of several buckets, the refresh equals, bit for bit, the same
refresh made to follow the links (the state marked as keeping the knot list, which the runs read
for nothing else) and a loop over the linked blocks from the ends."""

from __future__ import annotations

import numpy as np
import pytest
from test_pav_checkpoints import blocks_of

from streamcal import PAVCalibrator
from streamcal._kernels import ipav as K
from streamcal._kernels.histogram import stored_unit
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Decay


def linked_blocks(pf, pi):
    """The blocks' ``(first, last, P, N)`` in order, by their links."""
    return blocks_of(pf, pi)[0]


def runs_from_the_ends(sf, pf, pi):
    """``(lo, hi)`` of the finite-LLR rule, each run summed from its end over the linked blocks,
    and the widest block either run pooled (in buckets)."""
    c = pf[K.PF_PSEUDO] * stored_unit(sf, sf[K.SF_KIND])
    blocks = linked_blocks(pf, pi)
    lp, ln, i = blocks[0][2] + c, blocks[0][3], 1
    while i < len(blocks) and lp * (blocks[i][2] + blocks[i][3]) >= blocks[i][2] * (lp + ln):
        lp, ln, i = lp + blocks[i][2], ln + blocks[i][3], i + 1
    if i == len(blocks):
        v = lp / (lp + (ln + c))
        return (v, v), max(b[1] - b[0] + 1 for b in blocks)
    rp, rn, j = blocks[-1][2], blocks[-1][3] + c, len(blocks) - 2
    while j >= i and blocks[j][2] * (rp + rn) >= rp * (blocks[j][2] + blocks[j][3]):
        rp, rn, j = blocks[j][2] + rp, blocks[j][3] + rn, j - 1
    widest = max(b[1] - b[0] + 1 for b in blocks[:i] + blocks[j + 1 :])
    if j < i and lp * (rp + rn) >= rp * (lp + ln):
        v = (lp + rp) / ((lp + rp) + (ln + rn))
        return (v, v), widest
    return (lp / (lp + ln), rp / (rp + rn)), widest


def bits(values):
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def click_stream(n, seed, slope):
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.5, 1.5, size=n)
    s = 1.0 / (1.0 + np.exp(-z))
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(slope * z + 0.5)))
    return s, y, rng.uniform(0.5, 1.5, size=n)


# (window, the truth's slope in the score's logit, whether the runs cross wide blocks)
CASES = [
    (Decay(half_life=100.0), 0.6, True),
    (CountWindow(150), 1.3, True),
    (Decay(half_life=700.0), 1.3, False),
    (CountWindow(1000), 1.3, False),
]


@pytest.mark.parametrize(("window", "slope", "wide_blocks"), CASES, ids=[repr(c[0]) for c in CASES])
def test_runs_over_the_prior_row_scan_as_the_links_lead(window, slope, wide_blocks):
    s, y, w = click_stream(1600, 5, slope)
    cal = PAVCalibrator(buckets=LogitGrid(128), window=window, prior="auto")
    cal.prequential(s[:200], y[:200], weights=w[:200])
    scanned = wide = 0
    for i in range(200, s.size):
        runs_before = K.packed_runs(cal.packed_state()).copy()
        cal.prequential(s[i : i + 1], y[i : i + 1], weights=w[i : i + 1])
        sf = cal.window_histogram.arrays()[0]
        pf, pi = cal.map_arrays()
        if pi[K.PI_KNOTS] != 0 or pi[K.PI_HEAD] == -1:
            continue  # the blocks are over the histogram: the runs follow the links
        scanned += 1
        (lo, hi), widest = runs_from_the_ends(sf, pf, pi)
        wide += widest > 1
        assert bits(pf[[K.PF_LO, K.PF_HI]]) == bits([lo, hi])
        # the refresh once more from both ends (every block marked changed), scanning the owners
        # and following the links (the knot-list flag set on a copy): the same values and points
        got = []
        for knots in (0, 1):
            f, g, runs = pf.copy(), pi.copy(), runs_before.copy()
            g[K.PI_CHG_LO], g[K.PI_CHG_HI] = 0, int(g[K.PI_B]) - 1
            g[K.PI_KNOTS] = knots
            K.pav_refresh_extremes_inplace(sf, f, g, runs)
            got.append((bits(f[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]]), bits(runs)))
        assert got[0] == got[1]
        assert got[0][0] == bits(pf[[K.PF_LO, K.PF_HI, K.PF_PRIOR_ODDS_INV]])
    assert scanned > 1000  # the prior held: most events' runs scanned the prior's row
    assert (wide > 0) == wide_blocks  # where expected, the runs crossed blocks of several buckets
