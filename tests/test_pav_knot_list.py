"""The knot list of the streaming PAV state: after every update it links exactly the histogram's
non-empty buckets, and the blocks of a sparse histogram (many buckets, a short window) equal a
from-scratch sweep bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal import PAVCalibrator
from streamcal._kernels import ipav as K
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, Decay


def naive_knot_links(pos, neg):
    """(next, previous) of each bucket: the neighbouring non-empty buckets, UNLINKED when empty."""
    knots = np.flatnonzero(pos + neg > 0.0)
    nxt = np.full(pos.size, K.UNLINKED)
    prv = np.full(pos.size, K.UNLINKED)
    for i, k in enumerate(knots):
        nxt[k] = knots[i + 1] if i + 1 < knots.size else -1
        prv[k] = knots[i - 1] if i > 0 else -1
    return nxt, prv


def knot_links(pi):
    B = int(pi[K.PI_B])
    at = K.pav_state_sizes_before_knots(B)
    return pi[at + K._KNEXT : at + K._KNOT_RECORD * B : K._KNOT_RECORD], pi[
        at + K._KPREV : at + K._KNOT_RECORD * B : K._KNOT_RECORD
    ]


@pytest.mark.parametrize("exact", [1, 0])
def test_knot_list_links_the_non_empty_buckets_after_each_update(exact):
    rng = np.random.default_rng(exact)
    B = 200
    centres = np.linspace(0.0, 1.0, B)
    pf, pi = K.empty_pav_state(centres, 1.0, True, False)
    hist = np.zeros(2 * B)
    live = []
    for _ in range(3000):
        pi[K.PI_EXACT] = exact
        if live and rng.uniform() < 0.5:
            b, c, w = live.pop(int(rng.integers(len(live))))
            old = hist[b], hist[B + b]
            hist[c * B + b] = max(hist[c * B + b] - w, 0.0)
        else:
            b, c = int(rng.integers(B)), int(rng.integers(2))
            w = float(rng.integers(0, 3)) if exact else float(rng.uniform(0.0, 2.0))
            live.append((b, c, w))
            old = hist[b], hist[B + b]
            hist[c * B + b] += w
        K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, *old)
        nxt, prv = naive_knot_links(hist[:B], hist[B:])
        got_next, got_prev = knot_links(pi)
        np.testing.assert_array_equal(got_next, nxt)
        np.testing.assert_array_equal(got_prev, prv)
        assert int(pi[K.PI_N_KNOTS]) == int((hist[:B] + hist[B:] > 0.0).sum())
        again_f, again_i = K.empty_pav_state(centres, 1.0, True, False)
        K.pav_bucket_changed_inplace(hist, 0, again_f, again_i, -1)  # a full sweep
        np.testing.assert_array_equal(pi[K.PI_HEAD : K.PI_LAST + 1], again_i[K.PI_HEAD : K.PI_LAST + 1])
        np.testing.assert_array_equal(knot_links(pi)[0], knot_links(again_i)[0])


def test_owners_equal_a_full_sweeps_after_each_whole_number_update():
    """Whole numbers over a sparse histogram: a resweep rewrites the owners of a new block only
    past the end of the old block that started at the same knot; after every update the owners,
    the blocks' fit owners and every fitted value over the knots' span equal a full sweep's."""
    rng = np.random.default_rng(11)
    B = 300
    centres = np.linspace(0.0, 1.0, B)
    pf, pi = K.empty_pav_state(centres, 1.0, True, False)
    hist = np.zeros(2 * B)
    live = []
    resweeps = 0
    for _ in range(4000):
        pi[K.PI_EXACT] = 1
        if live and rng.uniform() < 0.5:
            b, c = live.pop(int(rng.integers(len(live))))
            old = hist[b], hist[B + b]
            hist[c * B + b] -= 1.0
        else:
            b, c = int(rng.integers(20, 80)) if rng.uniform() < 0.8 else int(rng.integers(B)), int(rng.integers(2))
            live.append((b, c))
            old = hist[b], hist[B + b]
            hist[c * B + b] += 1.0
        before = K.pav_blocks_view(pf, pi)["owner"].copy()
        K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, *old)
        again_f, again_i = K.empty_pav_state(centres, 1.0, True, False)
        K.pav_bucket_changed_inplace(hist, 0, again_f, again_i, -1)  # a full sweep
        head, last = int(again_i[K.PI_HEAD]), int(again_i[K.PI_LAST])
        assert (int(pi[K.PI_HEAD]), int(pi[K.PI_LAST])) == (head, last)
        if head == -1:
            continue
        got, want = K.pav_blocks_view(pf, pi), K.pav_blocks_view(again_f, again_i)
        span = slice(head, last + 1)
        resweeps += not np.array_equal(before[span], got["owner"][span])
        for field in ("owner", "fit_owner", "fit"):
            assert got[field][span].tolist() == want[field][span].tolist(), field
    assert resweeps > 100  # the blocks did split and merge


@pytest.mark.parametrize("window", [CountWindow(50), CountWindow(400), Decay(half_life=100.0)])
@pytest.mark.parametrize("weights", ["whole", "fractional"])
def test_sparse_histogram_blocks_equal_a_rebuild_bit_for_bit(window, weights):
    rng = np.random.default_rng(7)
    n = 3000
    s = 1.0 / (1.0 + np.exp(-rng.normal(-1.0, 1.5, size=n)))
    y = rng.uniform(size=n) < s
    w = np.ones(n) if weights == "whole" else rng.uniform(0.5, 1.5, size=n)
    cal = PAVCalibrator(buckets=LogitGrid(8192), window=window, prior=None)
    for lo in range(0, n, 500):
        cal.prequential(s[lo : lo + 500], y[lo : lo + 500], weights=w[lo : lo + 500])
        sf, si = cal.window_histogram.arrays()
        pf, pi = (a.copy() for a in cal.map_arrays())
        again_f, again_i = pf.copy(), pi.copy()
        K.pav_rebuild_inplace(sf, si, again_f, again_i)
        B = 8192
        scratch_f = slice(K.PF_HEADER + K._PF_RECORD * B, K.PF_HEADER + (K._PF_RECORD + K._STACK_RECORD) * B)
        scratch_i = slice(K.PI_HEADER + K._PI_RECORD * B, K.pav_state_sizes_before_knots(B))
        again_f[scratch_f] = pf[scratch_f]
        again_i[scratch_i] = pi[scratch_i]
        assert again_f.view(np.int64).tolist() == pf.view(np.int64).tolist()
        assert again_i.tolist() == pi.tolist()


@pytest.mark.parametrize("buckets", [LogitGrid(64), "quantile:16"])
def test_out_arrays_receive_the_outputs_bit_for_bit(buckets):
    rng = np.random.default_rng(3)
    s = rng.uniform(size=3000)
    y = rng.uniform(size=3000) < s
    a = PAVCalibrator(buckets=buckets, window=CountWindow(500))
    b = PAVCalibrator(buckets=buckets, window=CountWindow(500))
    out = (np.full(1000, 7.0), np.full(1000, 7.0))
    for lo in range(0, 3000, 1000):  # the same arrays batch after batch
        proba, llr = a.prequential(s[lo : lo + 1000], y[lo : lo + 1000])
        got = b.prequential(s[lo : lo + 1000], y[lo : lo + 1000], out=out)
        assert got[0] is out[0]
        assert got[1] is out[1]
        assert proba.tobytes() == out[0].tobytes()
        assert llr.tobytes() == out[1].tobytes()
    pair = (np.empty(3), np.empty(3))
    b.predict_both([0.1, 0.5, 0.9], out=pair)
    assert pair[0].tobytes() == a.predict_proba([0.1, 0.5, 0.9]).tobytes()
    assert pair[1].tobytes() == a.predict_llr([0.1, 0.5, 0.9]).tobytes()


@pytest.mark.parametrize(
    "out",
    [None, (np.empty(4),), (np.empty(3), np.empty(4)), (np.empty(4, dtype=np.float32), np.empty(4)), "x"],
)
def test_bad_out_arrays_are_rejected_and_change_nothing(out):
    cal = PAVCalibrator(window=CountWindow(10)).fit([0.2, 0.4, 0.6], [0, 1, 1])
    before = cal.map_arrays()[0].tobytes(), cal.n_learned
    if out is None:
        shared = np.empty(8)
        out = (shared[:4], shared[:4])
    with pytest.raises(ValueError, match="`out"):
        cal.prequential([0.1, 0.3, 0.5, 0.7], [0, 0, 1, 1], out=out)
    assert (cal.map_arrays()[0].tobytes(), cal.n_learned) == before
