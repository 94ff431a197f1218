"""Merging one-vs-rest calibrators (streamcal.merging.merge): the merge of parts equals the
calibrator that learned their events in order, over the classes of every part (a class a part has
not seen: its absent-class calibrator stands in)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from streamcal import PAVCalibrator
from streamcal.merging import merge
from streamcal.multiclass import OneVsRestCalibrator
from streamcal.persist import from_bytes, to_bytes
from streamcal.windows import CountWindow, Decay, TimeWindow
from tests.same_state import Counting, assert_same_binary, merges_while_learning

WINDOWS = {"unbounded": None, "count": CountWindow(40), "time": TimeWindow(90.0)}
GRID = np.linspace(0.0, 1.0, 65)
PROBE = [{1: 0.3, 2: 0.5, 3: 0.2}, {1: 0.9, 2: 0.1}, {0: 0.2, 1: 0.2, 2: 0.2, 3: 0.4}, {5: 1.0}]


def late_stream(rng, m=700):
    """Classes 1 and 2 from the start (always scored); class 0 first labelled at event 150 and
    never scored; class 3 scored from event 300 and labelled from 350 on; class 4 labelled only
    in events 50 to 119, never scored; integer weights 0-2; increasing times."""
    xs, ys = [], []
    for i in range(m):
        p1 = float(rng.uniform(0.05, 0.95))
        x = {1: p1, 2: 1.0 - p1} if i < 300 else {1: p1 * 0.7, 2: (1.0 - p1) * 0.7, 3: 0.3}
        pool = [1, 2] + ([0] if i >= 150 else []) + ([3] if i >= 350 else []) + ([4] if 50 <= i < 120 else [])
        xs.append(x)
        ys.append(0 if i == 150 else int(rng.choice(pool)))
    ws = rng.integers(0, 3, size=m).astype(float).tolist()
    ts = np.cumsum(rng.uniform(0.0, 5.0, size=m)).tolist()
    return xs, ys, ws, ts


def learn(cal, events, part=slice(None)):
    window = getattr(cal.calibrator, "window", None)
    timed = window is not None and window.uses_times
    for x, y, w, t in zip(*(column[part] for column in events), strict=True):
        cal.learn_one(x, y, w=w, t=t if timed else None)
    return cal


def assert_same_ovr(mine, theirs):
    """The same classes, per-class calibrators, absent class, clock and predictions, bit for bit."""
    assert mine.classes_ == theirs.classes_
    assert mine.calibrators_.keys() == theirs.calibrators_.keys()
    for c, model in theirs.calibrators_.items():
        assert_same_binary(mine.calibrators_[c], model)
    assert (mine.absent_ is None) == (theirs.absent_ is None)
    if theirs.absent_ is not None:
        assert_same_binary(mine.absent_, theirs.absent_)
    assert mine.last_time == theirs.last_time
    # a class not seen (5) is served by learned classes only where the classes are not fixed
    probe = [x for x in PROBE if mine.classes is None or set(x) <= set(mine.classes)]
    assert [mine.predict_proba_one(x) for x in probe] == [theirs.predict_proba_one(x) for x in probe]


@pytest.mark.parametrize("cut", [100, 150, 320, 500])
@pytest.mark.parametrize("window", list(WINDOWS))
def test_merged_parts_with_other_classes_equal_the_run_over_both_streams(window, cut, rng):
    # the first part lacks classes 0 and 3 (cut 100) or 3 (cut 150, 320); the second lacks class
    # 4 (cut 150, 320, 500): where a part lacks a class, its absent-class calibrator stands in
    events = late_stream(rng)
    kw = {"calibrator": PAVCalibrator(window=WINDOWS[window], prior=None)}
    first, second, whole = (OneVsRestCalibrator(**kw) for _ in range(3))
    learn(first, events, slice(0, cut))
    learn(second, events, slice(cut, None))
    learn(whole, events)
    before = [first.predict_proba_one(x) for x in PROBE], first.classes_, second.classes_
    merged = merge(first, second)
    assert merged.classes_ == [0, 1, 2, 3, 4]
    assert set(first.classes_) != set(second.classes_)
    assert_same_ovr(merged, whole)
    # the inputs are unchanged; the merged calibrator continues as the single one
    assert ([first.predict_proba_one(x) for x in PROBE], first.classes_, second.classes_) == before
    more = late_stream(np.random.default_rng(5), m=60)
    shift = whole.last_time if np.isfinite(whole.last_time) else 0.0
    more = (*more[:3], [t + shift for t in more[3]])
    learn(merged, more)
    learn(whole, more)
    assert_same_ovr(merged, whole)


@pytest.mark.parametrize("window", list(WINDOWS))
def test_merged_parts_with_the_classes_fixed_equal_the_run_over_both_streams(window, rng):
    events = late_stream(rng)
    kw = {"calibrator": PAVCalibrator(window=WINDOWS[window], prior=None), "classes": (0, 1, 2, 3, 4)}
    parts = [OneVsRestCalibrator(**kw) for _ in range(4)]
    for cal, part in zip(parts, (slice(0, 200), slice(200, 450), slice(450, None), slice(None)), strict=True):
        learn(cal, events, part)
    merged = merge(parts[:3])
    assert merged.absent_ is None
    assert_same_ovr(merged, parts[3])
    # a part without events brings nothing
    assert_same_ovr(merge(OneVsRestCalibrator(**kw), parts[3]), parts[3])


def test_three_parts_merge_as_a_tree_or_in_a_row(rng):
    events = late_stream(rng)
    kw = {"calibrator": PAVCalibrator(window=CountWindow(300), prior=None)}
    parts = [OneVsRestCalibrator(**kw) for _ in range(4)]
    for cal, part in zip(parts, (slice(0, 120), slice(120, 330), slice(330, None), slice(None)), strict=True):
        learn(cal, events, part)
    assert_same_ovr(merge(parts[:3]), parts[3])
    assert_same_ovr(merge(merge(parts[0], parts[1]), parts[2]), parts[3])
    assert_same_ovr(parts[0].merge(merge(parts[1], parts[2])), parts[3])
    # a part without events brings nothing, first or last
    empty = OneVsRestCalibrator(**kw)
    assert_same_ovr(merge(empty, parts[3]), parts[3])
    assert_same_ovr(merge(parts[3], empty), parts[3])


@pytest.mark.parametrize("window", ["unbounded", "count"])
def test_parts_learned_through_the_array_face_merge_into_the_run_over_both(window, rng):
    events = late_stream(rng)
    scores = np.array([[x.get(c, 0.0) for c in range(5)] for x in events[0]])
    labels, weights = np.array(events[1]), np.array(events[2])
    kw = {"calibrator": PAVCalibrator(window=WINDOWS[window], prior=None), "classes": (0, 1, 2, 3, 4)}
    parts = [OneVsRestCalibrator(**kw) for _ in range(3)]
    for cal, part in zip(parts, (slice(0, 250), slice(250, None), slice(None)), strict=True):
        cal.update(scores[part], labels[part], weights=weights[part])
    merged = merge(parts[:2])
    assert_same_ovr(merged, parts[2])
    np.testing.assert_array_equal(merged.predict_proba(scores[:50]), parts[2].predict_proba(scores[:50]))


def calibrated_stream(rng, m):
    """Calibrated three-class events (the label drawn from the scores): PAV's prior holds."""
    xs, ys = [], []
    for _ in range(m):
        p = rng.dirichlet([2.0, 2.0, 2.0])
        xs.append({c: float(p[c]) for c in range(3)})
        ys.append(int(rng.choice(3, p=p)))
    return xs, ys, [1.0] * m, [None] * m


def test_merge_with_the_default_prior_is_within_the_documented_tolerance(rng):
    # PAV's prior refits its strength to the merged window (docs/distributed.md): the windows
    # merge exactly, the probabilities within 1e-3
    events = calibrated_stream(rng, 4000)
    parts = [OneVsRestCalibrator() for _ in range(5)]
    for i, cal in enumerate(parts[:4]):
        learn(cal, events, slice(1000 * i, 1000 * (i + 1)))
    whole = learn(parts[4], events)
    merged = merge(parts[:4])
    for c, model in whole.calibrators_.items():
        for a, b in zip(merged.calibrators_[c].histogram(), model.histogram(), strict=True):
            np.testing.assert_array_equal(a, b)
    probe = [{c: float(p[c]) for c in range(3)} for p in rng.dirichlet([1.0, 1.0, 1.0], size=200)]
    got = np.array([list(merged.predict_proba_one(x).values()) for x in probe])
    want = np.array([list(whole.predict_proba_one(x).values()) for x in probe])
    np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-3)


@pytest.mark.parametrize("how", ["state file", "pickle"])
def test_a_merged_calibrator_saves_and_loads(how, rng):
    events = late_stream(rng)
    kw = {"calibrator": PAVCalibrator(window=CountWindow(40), prior=None)}
    first, second = OneVsRestCalibrator(**kw), OneVsRestCalibrator(**kw)
    merged = merge(learn(first, events, slice(0, 100)), learn(second, events, slice(100, 400)))
    if how == "pickle":
        twin = pickle.loads(pickle.dumps(merged))
    else:
        twin = from_bytes(to_bytes(merged, allow_pickle=False))
    assert_same_ovr(twin, merged)
    learn(twin, events, slice(400, None))
    learn(merged, events, slice(400, None))
    assert_same_ovr(twin, merged)


def test_classes_whose_calibrator_does_not_merge_are_refused():
    a, b = OneVsRestCalibrator(Counting()), OneVsRestCalibrator(Counting())
    a.learn_one({0: 0.6, 1: 0.4}, 0)
    with pytest.raises(TypeError, match="classes' calibrator Counting does not merge"):
        merge(a, b)
    with pytest.raises(TypeError, match="classes' calibrator Counting does not merge"):
        a.merge(b)
    assert a.classes_ == [0, 1]
    assert [model.window_weight for model in a.calibrators_.values()] == [1.0, 1.0]
    assert b.classes_ == []


def test_refused_merges_change_nothing(rng):
    events = late_stream(rng)
    a = learn(OneVsRestCalibrator(PAVCalibrator(prior=None)), events, slice(0, 200))
    before = [a.predict_proba_one(x) for x in PROBE], a.classes_, a.absent_.n_learned
    with pytest.raises(ValueError, match="one calibrator twice"):
        merge(a, a)
    with pytest.raises(ValueError, match="classes"):
        merge(a, OneVsRestCalibrator(PAVCalibrator(prior=None), classes=(0, 1, 2, 3)))
    with pytest.raises(ValueError, match="classes"):
        merge(
            OneVsRestCalibrator(PAVCalibrator(prior=None), classes=(0, 1)),
            OneVsRestCalibrator(PAVCalibrator(prior=None), classes=(1, 0)),
        )
    with pytest.raises(ValueError, match="window"):
        merge(a, OneVsRestCalibrator(PAVCalibrator(prior=None, window=CountWindow(40))))
    with pytest.raises(TypeError, match="one class"):
        merge(a, PAVCalibrator(prior=None))
    assert ([a.predict_proba_one(x) for x in PROBE], a.classes_, a.absent_.n_learned) == before


@pytest.mark.parametrize("window", [Decay(half_life=60.0), Decay(half_life=150.0, by="time")], ids=["events", "time"])
def test_decayed_parts_merge_into_the_run_over_both_to_rounding(window, rng):
    # decay: a part's weights age by the other's events (or to the latest time), so the sums agree
    # to rounding (docs/distributed.md), as for the binary calibrators
    events = late_stream(rng)
    kw = {"calibrator": PAVCalibrator(window=window, prior=None)}
    first, second, whole = (OneVsRestCalibrator(**kw) for _ in range(3))
    learn(first, events, slice(0, 320))
    learn(second, events, slice(320, None))
    learn(whole, events)
    merged = merge(first, second)
    assert merged.classes_ == whole.classes_ == [0, 1, 2, 3, 4]
    assert (merged.absent_ is None) == (whole.absent_ is None)
    pairs = [(merged.calibrators_[c], model) for c, model in whole.calibrators_.items()]
    if whole.absent_ is not None:
        pairs.append((merged.absent_, whole.absent_))
    for mine, theirs in pairs:
        assert mine.n_learned == theirs.n_learned
        for a, b in zip(mine.histogram()[1:], theirs.histogram()[1:], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(mine.predict_proba(GRID), theirs.predict_proba(GRID), rtol=1e-9, atol=1e-12)
    assert merged.last_time == whole.last_time
    for x in PROBE:
        got, want = merged.predict_proba_one(x), whole.predict_proba_one(x)
        assert got.keys() == want.keys()
        np.testing.assert_allclose(list(got.values()), list(want.values()), rtol=1e-9, atol=1e-12)


def test_a_merge_while_a_part_learns_on_another_thread_reads_a_consistent_part(rng):
    # the merge copies the first part and reads the second under their locks: each merged
    # calibrator is the merge of some prefix of the learning part's events, never a torn mix
    import time

    events = calibrated_stream(rng, 2400)
    kw = {"calibrator": PAVCalibrator(window=CountWindow(500), prior=None), "classes": (0, 1, 2)}
    other = learn(OneVsRestCalibrator(**kw), events, slice(2000, None))
    for busy_first in (True, False):
        busy = learn(OneVsRestCalibrator(**kw), events, slice(0, 200))

        def run(cal=busy):
            for i in range(200, 2000, 10):
                learn(cal, events, slice(i, i + 10))
                time.sleep(0)  # lets the merging thread in between, as well as within, the calls

        merged = merges_while_learning(run, lambda: merge(busy, other) if busy_first else merge(other, busy))
        assert len(merged) >= 2
        prefixes = set()
        for m in merged:
            counts = {model.n_learned for model in m.calibrators_.values()}
            assert len(counts) == 1, counts  # every class learned the same events
            prefixes.add(counts.pop() - 400)
        assert all(200 <= k <= 2000 for k in prefixes)
        for m in merged[:: max(1, len(merged) // 4)]:  # a few, against the run they must equal
            k = next(iter(m.calibrators_.values())).n_learned - 400
            part = learn(OneVsRestCalibrator(**kw), events, slice(0, k))
            assert_same_ovr(m, merge(part, other) if busy_first else merge(other, part))
