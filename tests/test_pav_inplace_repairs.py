"""The in-place repair of a block under floating-point weights (``_repair_block_inplace``), where
the resumed sweep pushes knots as elements of their own above the block's first element (a stack
of any depth) and pools them back before the block ends: the block keeps its extent and the repair writes what the
resumed sweep writes, bit for bit. The reference is the resumed sweep itself (``_resweep_inplace``)
on a copy of the same state, and a from-scratch sweep (``naive_pav_bucket_blocks``) and a
rebuild after every update."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pav_checkpoints import NASTY, assert_equals_sweep, assert_state_equals_rebuild, blocks_of

from streamcal._kernels import ipav as K


def fractional_state(B):
    centres = np.linspace(0.05, 0.95, B) if B > 1 else np.array([0.5])
    pf, pi = K.empty_pav_state(centres, 1.0, True, True)
    pi[K.PI_INTEGRAL] = 0  # floating weights: the checkpoints are kept and read
    return centres, pf, pi


def without_scratch(pf, pi):
    """Copies of the state with the stack scratch zeroed (a sweep writes it before reading it)."""
    B = int(pi[K.PI_B])
    f, i = pf.copy(), pi.copy()
    f[K.PF_HEADER + K._PF_RECORD * B : K.PF_HEADER + (K._PF_RECORD + K._STACK_RECORD) * B] = 0.0
    i[K.PI_HEADER + K._PI_RECORD * B : K.pav_state_sizes_before_knots(B)] = 0
    return f.view(np.int64).tolist(), i.tolist()


def is_knot(hist, B, k):
    return hist[k] + hist[B + k] > 0.0


def depth_after(hist, pi, k):
    """The deepest stack, in elements above the block's first one, that the records of the knots
    after ``k`` in ``k``'s block show: a record's top starts at ``f`` (0), at a knot whose own
    record starts at ``f`` (1), and so on."""
    B = int(pi[K.PI_B])
    f = int(pi[K.OWNER + K._PI_RECORD * k])
    last = int(pi[K.BEND + K._PI_RECORD * f])
    deepest = 0
    for j in range(k + 1, last + 1):
        if is_knot(hist, B, j):
            depth, g = 0, int(pi[K.BEND + K._PI_RECORD * j])
            while g != f:
                depth, g = depth + 1, int(pi[K.BEND + K._PI_RECORD * g])
            deepest = max(deepest, depth)
    return deepest


def resumed_depth(pi, k):
    """The elements above the block's first one on the stack that ``k``'s checkpoint shows."""
    f = int(pi[K.OWNER + K._PI_RECORD * k])
    depth, g = 0, (int(pi[K.BEND + K._PI_RECORD * k]) if k != f else f)
    while g != f:
        depth, g = depth + 1, int(pi[K.BEND + K._PI_RECORD * g])
    return depth


def repair_against_resweep(hist, pf, pi, k, old_p, old_n, walk):
    """``_repair_block_inplace`` on copies of the state; where it repairs, the state equals the
    resumed sweep's on other copies. Returns whether it repaired in place, and its state."""
    B = int(pi[K.PI_B])
    dp, dn = hist[k] - old_p, hist[B + k] - old_n
    af, ai = pf.copy(), pi.copy()
    done = K._repair_block_inplace(hist, 0, af, ai, k, dp, dn, walk)
    if done:
        bf, bi = pf.copy(), pi.copy()
        K._resweep_inplace(hist, 0, bf, bi, k, walk)
        assert without_scratch(af, ai) == without_scratch(bf, bi)
    return done, ai


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 16), st.booleans())
def test_in_place_repairs_equal_the_resumed_sweep(data, B, walk):
    _, pf, pi = fractional_state(B)
    hist = np.zeros(2 * B)
    live = []
    for _ in range(data.draw(st.integers(1, 80))):
        if live and data.draw(st.booleans()):
            b, cls, w = live.pop(data.draw(st.integers(0, len(live) - 1)))
            add = False
        else:
            b, cls, w = data.draw(st.integers(0, B - 1)), data.draw(st.integers(0, 1)), data.draw(st.sampled_from(NASTY))
            live.append((b, cls, w))
            add = True
        old_p, old_n = float(hist[b]), float(hist[B + b])
        was = is_knot(hist, B, b)
        hist[cls * B + b] = hist[cls * B + b] + w if add else max(hist[cls * B + b] - w, 0.0)
        if was and is_knot(hist, B, b):  # the repair's precondition: b stays a knot
            repair_against_resweep(hist, pf, pi, b, old_p, old_n, np.int64(1 if walk else 0))
        K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, old_p, old_n)


def test_a_knot_pushed_above_the_first_element_and_pooled_back_is_repaired_in_place():
    # blocks: [0] at rate 0.1, [1, 3] (rates 0.9, 0.5, 0.2: one block), [4] at 0.95; then knot 1
    # falls to 0.3: the sweep pushes knot 2 (0.5) above it, pools knot 3 into it (0.275), and that
    # element back into knot 1's (0.3 >= 0.275): the block keeps its extent
    B = 5
    centres, pf, pi = fractional_state(B)
    hist = np.zeros(2 * B)
    for k, (p, n) in enumerate([(0.1, 0.9), (0.9, 0.1), (0.5, 0.5), (0.6, 2.4), (0.95, 0.05)]):
        old = float(hist[k]), float(hist[B + k])
        hist[k], hist[B + k] = p, n
        K.pav_bucket_delta_inplace(hist, 0, pf, pi, k, *old)
    assert [(f, last) for f, last, _, _ in blocks_of(pf, pi)[0]] == [(0, 0), (1, 3), (4, 4)]
    old = float(hist[1]), float(hist[B + 1])
    hist[1], hist[B + 1] = 0.3, 0.7
    done, ai = repair_against_resweep(hist, pf, pi, 1, *old, np.int64(0))
    assert done
    assert depth_after(hist, ai, 1) == 1
    K.pav_bucket_delta_inplace(hist, 0, pf, pi, 1, *old)
    assert_equals_sweep(hist, B, centres, pf, pi)
    assert_state_equals_rebuild(hist, pf, pi)


def test_long_stream_takes_the_new_path_and_equals_a_sweep_after_every_update():
    B = 64
    rng = np.random.default_rng(5)
    centres, pf, pi = fractional_state(B)
    hist = np.zeros(2 * B)
    live = []
    pushed, resumed = [0] * 5, [0] * 5  # in-place repairs by stack depth above the first element (4: 4 or more)
    for _ in range(3000):
        if len(live) > 120 or (live and rng.uniform() < 0.4):
            b, c, w = live.pop(0)
            add = False
        else:
            x = rng.beta(2.0, 2.0)
            b, c, w = min(int(x * B), B - 1), int(rng.uniform() < x), float(rng.uniform(0.5, 1.5))
            live.append((b, c, w))
            add = True
        old_p, old_n = float(hist[b]), float(hist[B + b])
        was = is_knot(hist, B, b)
        hist[c * B + b] = hist[c * B + b] + w if add else max(hist[c * B + b] - w, 0.0)
        if was and is_knot(hist, B, b):
            depth = resumed_depth(pi, b)
            done, ai = repair_against_resweep(hist, pf, pi, b, old_p, old_n, np.int64(0))
            if done:
                pushed[min(depth_after(hist, ai, b), 4)] += 1
                resumed[min(depth, 4)] += 1
        K.pav_bucket_delta_inplace(hist, 0, pf, pi, b, old_p, old_n)
        assert_equals_sweep(hist, B, centres, pf, pi)
        assert_state_equals_rebuild(hist, pf, pi)
    # every path is taken: one to four or more elements pushed above the first, and a repair
    # resumed at each of those depths (the stack is held in the scratch at any depth)
    assert min(pushed[1:] + resumed[1:]) >= 10
