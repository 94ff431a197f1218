"""A class that first appears late in a PairwiseCouplingCalibrator without fixed classes.

Its pairs start as copies of the ghost pairs (``ghosts_``): each equals, bit for bit, the pair of a
run with ``classes=`` given from the start on the same stream, and from the join on the served
probabilities are that run's.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from state_files import pack, unpack

from streamcal import PAVCalibrator
from streamcal.merging import merge
from streamcal.multiclass import PairwiseCouplingCalibrator
from streamcal.persist import StateFileError, from_bytes, to_bytes
from streamcal.windows import CountWindow, Decay, TimeWindow
from tests.same_state import Counting, assert_same_binary, merges_while_learning

WINDOWS = {
    "unbounded": None,
    "count": CountWindow(40),
    "time": TimeWindow(90.0),
    "decay-events": Decay(half_life=50),
    "decay-time": Decay(half_life=120.0, by="time"),
}


def late_stream(rng, m=700, scores="proba"):
    """Events of classes 1 and 2 from the start (always scored); class 0 first labelled at event
    150 and never scored; class 3 first scored at event 300 and labelled from 350 on. Some events
    give their label's class probability 0 (log-odds 0 against a class not seen)."""
    xs, ys = [], []
    for i in range(m):
        if scores == "proba":
            p1 = float(rng.uniform(0.05, 0.95))
            x = {1: p1, 2: 1.0 - p1}
            if i >= 300:
                x = {1: p1 * 0.7, 2: (1.0 - p1) * 0.7, 3: 0.3}
            if rng.random() < 0.05:
                x[1] = 0.0
        else:
            x = {1: float(rng.normal()), 2: float(rng.normal())}
            if i >= 300:
                x[3] = float(rng.normal())
        pool = [1, 2] + ([0] if i >= 150 else []) + ([3] if i >= 350 else [])
        y = 0 if i == 150 else int(rng.choice(pool))
        xs.append(x)
        ys.append(y)
    return xs, ys


def run_river(cal, xs, ys, ws, ts, after=None):
    """Predict then learn each event; return the predictions (and call ``after(i)`` after each)."""
    out = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        out.append(cal.predict_proba_one(x))
        cal.learn_one(x, y, w=ws[i], t=ts[i])
        if after is not None:
            after(i)
    return out


def assert_pairs_equal(late, fixed):
    """Every pair the late run holds equals the fixed run's pair of the same classes."""
    mine, theirs = late.pairs_, fixed.pairs_
    assert mine  # something to compare
    for key, model in mine.items():
        assert_same_binary(model, theirs[key])


def events_of(rng, m, window):
    ws = rng.integers(0, 3, size=m).astype(float).tolist()
    ts = np.cumsum(rng.uniform(0.0, 5.0, size=m)).tolist() if window is not None and window.uses_times else [None] * m
    return ws, ts


@pytest.mark.parametrize("method", ["ht", "wlw"])
@pytest.mark.parametrize("window", list(WINDOWS))
def test_late_classes_get_the_pairs_of_a_run_with_the_classes_fixed(window, method, rng):
    win = WINDOWS[window]
    xs, ys = late_stream(rng)
    ws, ts = events_of(rng, len(xs), win)
    kw = {"calibrator": PAVCalibrator(window=win), "method": method}
    late = PairwiseCouplingCalibrator(**kw)
    fixed = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3), **kw)
    checked = []

    def after(i):
        # the fixed run learns the same event; each pair the late run holds then equals the fixed
        # run's, right after each join and now and then
        fixed.learn_one(xs[i], ys[i], w=ws[i], t=ts[i])
        if i >= 150 and (i in (150, 151, 300, 301, 350, 351) or i % 97 == 0):
            assert_pairs_equal(late, fixed)
            checked.append(i)

    got = run_river(late, xs, ys, ws, ts, after=after)
    assert len(checked) > 6
    expected = run_river(PairwiseCouplingCalibrator(classes=(0, 1, 2, 3), **kw), xs, ys, ws, ts)
    # from the join of the last class on, the served probabilities are the fixed run's, bit for bit
    assert got[300:] == expected[300:]
    # and for the classes known before then, the distribution among them
    assert all(p.keys() == {0, 1, 2} for p in got[151:300])
    assert late.pairs_.keys() == fixed.pairs_.keys()
    assert_pairs_equal(late, fixed)


@pytest.mark.parametrize("window", list(WINDOWS))
def test_late_classes_equal_the_array_face_of_a_run_with_the_classes_fixed(window, rng):
    win = WINDOWS[window]
    xs, ys = late_stream(rng)
    ws, ts = events_of(rng, len(xs), win)
    times = None if ts[0] is None else np.asarray(ts)
    kw = {"calibrator": PAVCalibrator(window=win)}
    late = PairwiseCouplingCalibrator(**kw)
    got = run_river(late, xs, ys, ws, ts)
    scores = np.array([[x.get(c, 0.0) for c in range(4)] for x in xs])
    fixed = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3), **kw)
    proba = fixed.prequential(scores, ys, weights=ws, times=times)
    for i in range(300, len(xs)):
        assert list(got[i].values()) == proba[i].tolist()
    assert_pairs_equal(late, fixed)
    updated = PairwiseCouplingCalibrator(classes=(0, 1, 2, 3), **kw)
    for part in np.array_split(np.arange(len(xs)), 7):
        at = None if times is None else times[part]
        updated.update(scores[part], np.asarray(ys)[part], weights=np.asarray(ws)[part], times=at)
    assert_pairs_equal(late, updated)


@pytest.mark.parametrize("scores", ["proba", "logit"])
def test_late_classes_with_logits_or_probabilities_through_the_one_call_path(scores, rng):
    # the default pairs: the river face runs one kernel call per event once every pair exists,
    # and the ghosts learn beside it
    xs, ys = late_stream(rng, scores=scores)
    late = PairwiseCouplingCalibrator(scores=scores)
    got = run_river(late, xs, ys, [1.0] * len(xs), [None] * len(xs))
    assert late.river_in_one_call
    fixed = PairwiseCouplingCalibrator(scores=scores, classes=(0, 1, 2, 3))
    expected = run_river(fixed, xs, ys, [1.0] * len(xs), [None] * len(xs))
    assert got[300:] == expected[300:]
    assert_pairs_equal(late, fixed)


def reviewer_stream(seed=0, m=4000, late=2400):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for i in range(m):
        p0 = float(rng.uniform(0.05, 0.95))
        xs.append({0: p0, 1: 1.0 - p0})  # the model never scores class 2
        if i == late or (i > late and rng.random() < 0.005):
            ys.append(2)
        else:
            ys.append(int(rng.random() > p0))
    return xs, ys


def test_a_class_never_scored_first_seen_late_is_served_as_with_the_classes_fixed():
    xs, ys = reviewer_stream()
    late, fixed = PairwiseCouplingCalibrator(), PairwiseCouplingCalibrator(classes=(0, 1, 2))
    got = run_river(late, xs, ys, [1.0] * len(xs), [None] * len(xs))
    expected = run_river(fixed, xs, ys, [1.0] * len(xs), [None] * len(xs))
    after = [p[2] for p in got[2401:]]
    assert max(after) < 0.01  # fresh pairs served 0.469 at the first event after the join
    assert got[2401:] == expected[2401:]


def test_ghosts_learn_each_labelled_class_and_none_with_fixed_classes(rng):
    xs, ys = late_stream(rng, m=200)
    late, fixed = PairwiseCouplingCalibrator(), PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    run_river(late, xs, ys, [1.0] * 200, [None] * 200)
    run_river(fixed, xs, ys, [1.0] * 200, [None] * 200)
    assert fixed.ghosts_ == {}
    assert sorted(late.ghosts_) == [0, 1, 2]  # class 3, scored from event 300, is not seen yet
    for c, (low, high) in late.ghosts_.items():
        assert low.n_learned == high.n_learned == ys.count(c)
    # a binary calibrator that may refuse a score keeps none (as one-vs-rest keeps no absent class)
    warm = PairwiseCouplingCalibrator(calibrator=PAVCalibrator(buckets="quantile:16"))
    run_river(warm, xs[:50], ys[:50], [1.0] * 50, [None] * 50)
    assert warm.ghosts_ == {}


def test_a_class_scored_before_its_label_joins_with_the_ghost_pairs(rng):
    # class 3 is scored from event 300: its pairs with classes whose events come later stand in
    # as the ghosts in predictions before they learn, as the fixed run's pairs do
    xs, ys = late_stream(rng, m=320)
    ys = [y if y != 3 else 1 for y in ys]
    late, fixed = PairwiseCouplingCalibrator(), PairwiseCouplingCalibrator(classes=(0, 1, 2, 3))
    got = run_river(late, xs, ys, [1.0] * 320, [None] * 320)
    expected = run_river(fixed, xs, ys, [1.0] * 320, [None] * 320)
    assert got[300:] == expected[300:]
    _, r, n = late.coupling_inputs(xs[-1])
    _, r_fixed, n_fixed = fixed.coupling_inputs(xs[-1])
    np.testing.assert_array_equal(r, r_fixed)
    np.testing.assert_array_equal(n, n_fixed)


@pytest.mark.parametrize("how", ["state file", "pickle"])
def test_saved_and_loaded_calibrators_keep_their_ghosts(how, rng):
    xs, ys = late_stream(rng)
    kw = {"calibrator": PAVCalibrator(window=CountWindow(40))}
    late = PairwiseCouplingCalibrator(**kw)
    run_river(late, xs[:200], ys[:200], [1.0] * 200, [None] * 200)
    if how == "pickle":
        twin = pickle.loads(pickle.dumps(late))
    else:
        twin = from_bytes(to_bytes(late, allow_pickle=False))
    assert twin.ghosts_.keys() == late.ghosts_.keys()
    rest = run_river(late, xs[200:], ys[200:], [1.0] * 500, [None] * 500)
    assert run_river(twin, xs[200:], ys[200:], [1.0] * 500, [None] * 500) == rest
    assert_pairs_equal(twin, late)


def ghost_nodes(manifest):
    """The state file's ``_ghosts`` dict node: its list of [class, (low, high)] entries."""
    return manifest["root"]["state"]["_ghosts"]


def saved_with_ghosts(rng):
    xs, ys = late_stream(rng, m=200)
    cal = PairwiseCouplingCalibrator(calibrator=PAVCalibrator(window=CountWindow(40)))
    run_river(cal, xs, ys, [1.0] * 200, [None] * 200)
    return to_bytes(cal, allow_pickle=False)


def test_a_state_file_with_inconsistent_ghosts_is_refused(rng):
    data = saved_with_ghosts(rng)
    manifest, arrays, _ = unpack(data)
    node = ghost_nodes(manifest)
    assert from_bytes(pack(manifest, arrays)).ghosts_.keys() == {0, 1, 2}

    def refused(change, match):
        bad = unpack(data)[0]
        change(ghost_nodes(bad))
        with pytest.raises(StateFileError, match=match):
            from_bytes(pack(bad, arrays))

    entries = node["__dict__"]
    assert sorted(e[0] for e in entries) == [0, 1, 2]

    def unknown_class(n):
        n["__dict__"][0][0] = 7

    def one_ghost(n):
        n["__dict__"][0][1] = {"__tuple__": n["__dict__"][0][1]["__tuple__"][:1]}

    def shared(n):  # class 2's high ghost is class 1's
        first = n["__dict__"][0][1]["__tuple__"][1]
        n["__dict__"][1][1]["__tuple__"][1] = {"__ref__": first["id"]}

    def swapped(n):  # the low ghosts of classes 1 and 2 swapped: each pair learned other events
        a, b = n["__dict__"][0][1]["__tuple__"], n["__dict__"][1][1]["__tuple__"]
        a[0], b[0] = b[0], a[0]

    refused(unknown_class, "not a known class")
    refused(one_ghost, "tuple of two PAVCalibrators")
    refused(shared, "of their own")
    refused(swapped, "learned the same events")


def test_a_state_file_with_ghosts_of_two_classes_without_their_pair_is_refused(rng):
    data = saved_with_ghosts(rng)
    manifest, arrays, _ = unpack(data)
    models = manifest["root"]["state"]["_models"]["__dict__"]
    kept = [e for e in models if e[0] != {"__tuple__": [0, 1]}]
    assert len(kept) == len(models) - 1
    manifest["root"]["state"]["_models"]["__dict__"] = kept
    with pytest.raises(StateFileError, match="both have ghosts but no pair"):
        from_bytes(pack(manifest, arrays))


def test_a_state_file_with_ghosts_and_fixed_classes_is_refused(rng):
    manifest, arrays, _ = unpack(saved_with_ghosts(rng))
    manifest["root"]["params"]["classes"] = {"__tuple__": [0, 1, 2]}
    with pytest.raises(StateFileError, match=r"ghosts|learned classes"):
        from_bytes(pack(manifest, arrays))


@pytest.mark.parametrize("window", ["unbounded", "count"])
def test_calibrators_with_other_classes_merge_into_the_run_over_both_streams(window, rng):
    # the first part knows classes 1 and 2; the second 1, 2 and 0 (first labelled at its start)
    # and 3 (scored from event 300): the merge is the calibrator that learned both parts in order
    # (PAV's score prior off: merged, it refits its strength to the merged window; see
    # streamcal.merging)
    win = WINDOWS[window]
    xs, ys = late_stream(rng)
    ws = rng.integers(0, 3, size=len(xs)).astype(float).tolist()
    kw = {"calibrator": PAVCalibrator(window=win, prior=None)}
    first, second, whole = (PairwiseCouplingCalibrator(**kw) for _ in range(3))
    run_river(first, xs[:150], ys[:150], ws[:150], [None] * 150)
    run_river(second, xs[150:], ys[150:], ws[150:], [None] * 550)
    run_river(whole, xs, ys, ws, [None] * len(xs))
    merged = merge(first, second)
    assert merged.classes_ == whole.classes_ == [0, 1, 2, 3]
    assert merged.pairs_.keys() == whole.pairs_.keys()
    assert_pairs_equal(merged, whole)
    assert merged.ghosts_.keys() == whole.ghosts_.keys()
    for c, ghosts in whole.ghosts_.items():
        for mine, theirs in zip(merged.ghosts_[c], ghosts, strict=True):
            assert_same_binary(mine, theirs)
    probe = [{1: 0.3, 2: 0.5, 3: 0.2}, {1: 0.9, 2: 0.1}, {0: 0.2, 1: 0.2, 2: 0.2, 3: 0.4}]
    assert [merged.predict_proba_one(x) for x in probe] == [whole.predict_proba_one(x) for x in probe]
    # the inputs are unchanged, and a merge with the classes fixed merges pair by pair
    assert first.classes_ == [1, 2]
    fixed = [PairwiseCouplingCalibrator(classes=(0, 1, 2, 3), **kw) for _ in range(3)]
    for cal, part in zip(fixed, (slice(0, 150), slice(150, None), slice(None)), strict=True):
        run_river(cal, xs[part], ys[part], ws[part], [None] * len(xs[part]))
    assert merge(fixed[0], fixed[1]).ghosts_ == {}
    assert_pairs_equal(merge(fixed[0], fixed[1]), fixed[2])
    assert_pairs_equal(merged, fixed[2])


def test_merged_ghosts_make_the_pairs_of_a_class_that_joins_after_the_merge(rng):
    xs, ys = late_stream(rng)
    first, second, whole = (PairwiseCouplingCalibrator(PAVCalibrator(prior=None)) for _ in range(3))
    run_river(first, xs[:100], ys[:100], [1.0] * 100, [None] * 100)
    run_river(second, xs[100:140], ys[100:140], [1.0] * 40, [None] * 40)
    run_river(whole, xs[:140], ys[:140], [1.0] * 140, [None] * 140)
    merged = merge(first, second)
    # classes 0 and 3 join after the merge: their pairs come from the merged ghosts
    assert run_river(merged, xs[140:], ys[140:], [1.0] * 560, [None] * 560) == run_river(
        whole, xs[140:], ys[140:], [1.0] * 560, [None] * 560
    )
    assert_pairs_equal(merged, whole)


def test_a_state_saved_without_ghosts_loads_and_starts_them(rng):
    # as a file written before the ghosts were kept: it loads, and its ghosts learn from then on
    manifest, arrays, _ = unpack(saved_with_ghosts(rng))
    del manifest["root"]["state"]["_ghosts"]
    cal = from_bytes(pack(manifest, arrays))
    assert cal.ghosts_ == {}
    cal.learn_one({1: 0.4, 2: 0.6}, 1)
    assert cal.ghosts_.keys() == {1}
    assert cal.ghosts_[1][0].n_learned == 1


def test_pairs_whose_calibrator_does_not_merge_are_refused():
    a, b = PairwiseCouplingCalibrator(Counting()), PairwiseCouplingCalibrator(Counting())
    a.learn_one({0: 0.6, 1: 0.4}, 0)
    with pytest.raises(TypeError, match="pairs' calibrator Counting does not merge"):
        merge(a, b)
    assert a.pairs_[(0, 1)].window_weight == 1.0


def test_a_merge_while_a_part_learns_on_another_thread_reads_a_consistent_part(rng):
    # the merge copies the first part and reads the second under their locks: each merged
    # calibrator equals the merge of some prefix of the learning part's events, never a torn mix
    import time

    xs, ys = late_stream(rng, m=1400)
    kw = {"calibrator": PAVCalibrator(window=CountWindow(300), prior=None), "classes": (0, 1, 2, 3)}
    other = PairwiseCouplingCalibrator(**kw)
    run_river(other, xs[1200:], ys[1200:], [1.0] * 200, [None] * 200)
    fed = sum(model.n_learned for model in other.pairs_.values())
    for busy_first in (True, False):
        busy = PairwiseCouplingCalibrator(**kw)

        def run(cal=busy):
            for i in range(1200):
                cal.learn_one(xs[i], ys[i])
                if i % 10 == 9:
                    time.sleep(0)  # lets the merging thread in between, as well as within, the calls

        merged = merges_while_learning(run, lambda: merge(busy, other) if busy_first else merge(other, busy))
        assert len(merged) >= 2
        for m in merged[:: max(1, len(merged) // 6)]:
            # with the classes fixed an event feeds the three pairs of its label's class
            k, torn = divmod(sum(model.n_learned for model in m.pairs_.values()) - fed, 3)
            assert torn == 0
            part = PairwiseCouplingCalibrator(**kw)
            run_river(part, xs[:k], ys[:k], [1.0] * k, [None] * k)
            assert_pairs_equal(m, merge(part, other) if busy_first else merge(other, part))
