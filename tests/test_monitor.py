"""Calibration monitors: the wealth recursions against slow references, both faces, validity
by Monte Carlo, power, input checks, bounded state, reset / restart and the keyed wrapper."""

from __future__ import annotations

import math
import pickle
import threading

import numpy as np
import pytest

from streamcal import PAVCalibrator
from streamcal._kernels import _config
from streamcal._kernels import monitor as _km
from streamcal.monitor import IsotonicEProcess, KeyedMonitor, MeanBiasCS, default_grid
from streamcal.windows import Decay

# ----------------------------------------------------------------------------- slow references


def naive_isotonic_evalues(p, y, alpha=0.05, bets=(0.1, 0.3, 0.5, 0.7, 0.9), buckets=None, restart=False):
    """The isotonic e-process event by event: the alternative from a PAVCalibrator's river face
    (``predict_proba_one`` before ``learn_one``), the wealth of each bet in plain Python floats.
    Returns (e-values, the events seen at each alarm)."""
    recal = PAVCalibrator(buckets=buckets)
    wealth = [1.0] * len(bets)
    out, alarms, alarmed = [], [], False
    for i, (pi, yi) in enumerate(zip(p, y, strict=True)):
        q = recal.predict_proba_one({"p": float(pi)})[True]
        recal.learn_one({"p": float(pi)}, bool(yi))
        num, den = (q, pi) if yi == 1 else (1.0 - q, 1.0 - pi)
        if den == 0.0:
            wealth = [math.inf] * len(bets)
        else:
            wealth = [w * (1.0 + b * (num / den - 1.0)) for w, b in zip(wealth, bets, strict=True)]
        e = sum(wealth) / len(wealth)
        if (restart or not alarmed) and e >= 1.0 / alpha:
            alarms.append(i + 1)
            alarmed = True
            if restart:  # the event's e-value is the restarted wealth's
                wealth, alarmed = [1.0] * len(bets), False
                e = sum(wealth) / len(wealth)
        out.append(e)
    return np.array(out), alarms


def naive_mean_bias(p, y, alpha=0.05, grid=None, max_bet=0.5):
    """Both capitals of every candidate, the stake recomputed from the list of past ``z``;
    a candidate is out from below once ``K+ / 2`` has reached ``1 / alpha``, from above once
    ``K- / 2`` has. Returns (hedged capital of candidate 0 after each event, (low, high))."""
    grid = default_grid() if grid is None else np.asarray(grid, dtype=float)
    cap = max_bet / (1.0 + np.abs(grid).max())
    scales = (1.0, 3.0, 9.0)
    zs = []
    up = [[1.0] * len(scales) for _ in grid]
    down = [[1.0] * len(scales) for _ in grid]
    out_below = [False] * grid.size
    out_above = [False] * grid.size
    zero = int(np.flatnonzero(grid == 0.0)[0])
    out = []
    for pi, yi in zip(p, y, strict=True):
        z = float(yi) - float(pi)
        t = len(zs) + 1
        errors = [zs[i] - sum(zs[:i]) / (i + 1) for i in range(len(zs))]
        var = (1.0 + sum(e * e for e in errors)) / t
        lam = math.sqrt(2.0 * math.log(2.0 / alpha) / (var * t * math.log(1.0 + t)))
        for g, m in enumerate(grid):
            for k, scale in enumerate(scales):
                stake = min(lam * scale, cap)
                up[g][k] *= 1.0 + stake * (z - m)
                down[g][k] *= 1.0 - stake * (z - m)
            out_below[g] |= 0.5 * sum(up[g]) / len(scales) >= 1.0 / alpha
            out_above[g] |= 0.5 * sum(down[g]) / len(scales) >= 1.0 / alpha
        zs.append(z)
        out.append(0.5 * (sum(up[zero]) / len(scales) + sum(down[zero]) / len(scales)))
    below = [g for g in range(grid.size) if out_below[g]]
    above = [g for g in range(grid.size) if out_above[g]]
    low = float(grid[max(below)]) if below else -1.0
    high = float(grid[min(above)]) if above else 1.0
    return np.array(out), (low, high)


def calibrated(rng, n, low=0.02, high=0.6):
    p = rng.uniform(low, high, size=n)
    return p, (rng.uniform(size=n) < p).astype(float)


def state_of(monitor) -> bytes:
    return pickle.dumps(monitor.__getstate__())


def state_size(obj) -> int:
    """Bytes of the arrays and items of the containers in a state, through streamcal's objects."""
    total = 0
    state = obj.__getstate__() if hasattr(obj, "__getstate__") else vars(obj)
    for value in (state or {}).values():
        if isinstance(value, np.ndarray):
            total += value.nbytes
        elif isinstance(value, (list, dict, tuple, set)):
            total += len(value)
        elif type(value).__module__.startswith("streamcal") and hasattr(value, "__dict__"):
            total += state_size(value)
    return total


# ----------------------------------------------------------------------------- references


@pytest.mark.parametrize("restart", [False, True])
def test_isotonic_evalues_equal_the_slow_reference(rng, restart):
    p = rng.uniform(0.05, 0.95, size=3000)
    y = (rng.uniform(size=p.size) < p**1.3).astype(float)
    expected, alarms = naive_isotonic_evalues(p, y, restart=restart, buckets=64)
    monitor = IsotonicEProcess(buckets=64, restart=restart)
    got = monitor.update_many(y, p)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert alarms, "the miscalibrated stream must alarm for the test to compare alarms"
    assert monitor.first_alarm_at == alarms[0]
    assert monitor.last_alarm_at == alarms[-1]
    assert monitor.n_alarms == len(alarms)
    assert (len(alarms) > 1) == restart


@pytest.mark.parametrize(("factor", "shift"), [(0.85, 0.0), (1.0, 0.0), (1.0, 0.03)])
def test_mean_bias_capital_and_interval_equal_the_slow_reference(rng, factor, shift):
    p = rng.uniform(0.0, 0.3, size=1500)
    y = (rng.uniform(size=p.size) < factor * p + shift).astype(float)
    expected, bounds = naive_mean_bias(p, y)
    monitor = MeanBiasCS()
    got = monitor.update_many(y, p)
    # the kernel freezes candidate 0 once it is out; until then the capitals agree
    stop = monitor.first_alarm_at or p.size
    np.testing.assert_allclose(got[:stop], expected[:stop], rtol=1e-9)
    assert monitor.interval == bounds
    assert monitor.interval[0] > -0.5
    assert monitor.interval[1] < 0.5


def test_mean_bias_on_a_custom_grid_equals_the_slow_reference(rng):
    grid = [-0.3, -0.1, -0.02, 0.0, 0.05, 0.2]
    p = rng.uniform(0.1, 0.9, size=800)
    y = (rng.uniform(size=p.size) < np.clip(p + 0.05, 0, 1)).astype(float)
    expected, bounds = naive_mean_bias(p, y, alpha=0.1, grid=grid, max_bet=0.8)
    monitor = MeanBiasCS(alpha=0.1, grid=grid, max_bet=0.8)
    got = monitor.update_many(y, p)
    stop = monitor.first_alarm_at or p.size
    np.testing.assert_allclose(got[:stop], expected[:stop], rtol=1e-9)
    assert monitor.interval == bounds


def test_kernels_give_the_same_bits_interpreted_and_compiled(rng):
    p, y = calibrated(rng, 500)
    q = np.clip(p * 1.1, 0.0, 1.0)
    lam = np.array([0.2, 0.6])
    grid = default_grid()
    outs = []
    for run in (_config.run_interpreted, lambda k, *a: _config.compiled(k)(*a)):
        wealth, ev = np.ones(2), np.empty(p.size)
        done = run(_km.isotonic_wealth_inplace, p, y, q, lam, wealth, 20.0, False, ev)
        sums, up, down, ev2 = np.zeros(3), np.ones((2, grid.size)), np.ones((2, grid.size)), np.empty(p.size)
        bounds = np.array([-1.0, float(grid.size)])
        scales = np.array([1.0, 3.0])
        done2 = run(
            _km.mean_bias_wealth_inplace,
            y - p,
            grid,
            scales,
            np.empty(2),
            0.25,
            7.4,
            sums,
            up,
            down,
            bounds,
            20.0,
            40,
            False,
            ev2,
        )
        outs.append((done, wealth, ev, done2, sums, up, down, bounds, ev2))
    for a, b in zip(*outs, strict=True):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- faces


@pytest.mark.parametrize("make", [lambda: IsotonicEProcess(buckets=32, restart=True), lambda: MeanBiasCS(restart=True)])
def test_river_face_equals_the_array_face(rng, make):
    p = rng.uniform(0.05, 0.5, size=1200)
    y = (rng.uniform(size=p.size) < 1.4 * p).astype(float)
    batch, loop = make(), make()
    e_batch = batch.update_many(y, p)
    e_loop = []
    for k, (yi, pi) in enumerate(zip(y, p, strict=True)):
        loop.update(bool(yi), {False: 1.0 - pi, True: pi} if k % 2 else float(pi))
        e_loop.append(loop.get())
    # event for event what ``get`` says after ``update``: at an alarm event the restarted 1.0
    np.testing.assert_array_equal(e_batch, e_loop)
    assert not (e_batch >= 20.0).any()
    assert batch.n_alarms == loop.n_alarms > 1
    assert batch.first_alarm_at == loop.first_alarm_at
    assert batch.n_seen == loop.n_seen == p.size


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
def test_batches_of_any_split_give_the_same_evalues(rng, make):
    p, y = calibrated(rng, 2000)
    y[1500:] = (rng.uniform(size=500) < 0.5 * p[1500:]).astype(float)
    whole, split = make(), make()
    e_whole = whole.update_many(y, p)
    e_split = np.concatenate(
        [split.update_many(y[a:b], p[a:b]) for a, b in [(0, 7), (7, 1000), (1000, 1000), (1000, 2000)]]
    )
    np.testing.assert_array_equal(e_whole, e_split)
    assert whole.first_alarm_at == split.first_alarm_at


def test_river_evaluate_loop_runs_a_monitor():
    from river import datasets, evaluate, linear_model

    monitor = IsotonicEProcess()
    evaluate.progressive_val_score(datasets.Phishing(), linear_model.LogisticRegression(), monitor)
    assert monitor.n_seen == 1250
    assert monitor.get() == monitor.e_value > 0.0


# ----------------------------------------------------------------------------- validity and power


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
def test_false_alarm_rate_is_at_most_alpha_on_calibrated_streams(make):
    # Monte Carlo: 300 seeded calibrated streams of 3,000 events at alpha = 0.1
    streams, alpha = 300, 0.1
    alarms = 0
    for seed in range(streams):
        p, y = calibrated(np.random.default_rng(seed), 3000)
        monitor = make(alpha=alpha)
        monitor.update_many(y, p)
        alarms += monitor.alarm
    assert alarms / streams <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / streams)


def test_mean_bias_sequence_covers_a_constant_bias():
    streams, alpha, bias = 200, 0.1, 0.0123  # between two grid points: the ends are valid anyway
    missed = 0
    for seed in range(streams):
        rng = np.random.default_rng(1000 + seed)
        p = rng.uniform(0.05, 0.3, size=4000)
        y = (rng.uniform(size=p.size) < p + bias).astype(float)
        monitor = MeanBiasCS(alpha=alpha)
        monitor.update_many(y, p)
        low, high = monitor.interval
        missed += not (low < bias < high)
    assert missed / streams <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / streams)


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
def test_monitors_alarm_on_miscalibrated_streams(rng, make):
    p = rng.uniform(0.05, 0.6, size=20_000)
    y = (rng.uniform(size=p.size) < 0.7 * p).astype(float)
    monitor = make()
    monitor.update_many(y, p)
    assert monitor.alarm
    assert monitor.first_alarm_at < 5000
    assert monitor.p_value <= 0.05


def test_isotonic_monitor_sees_a_miscalibration_invisible_in_the_mean(rng):
    # over-confident scores: too high above 0.5, too low below; the mean bias is about 0
    p = rng.uniform(0.0, 1.0, size=30_000)
    truth = 0.5 + 0.6 * (p - 0.5)
    y = (rng.uniform(size=p.size) < truth).astype(float)
    iso, mean = IsotonicEProcess(), MeanBiasCS()
    iso.update_many(y, p)
    mean.update_many(y, p)
    assert iso.alarm
    assert iso.first_alarm_at < 5000
    assert not mean.alarm


def test_ratio_interval_covers_the_ratio():
    rng = np.random.default_rng(5)
    p = rng.uniform(0.01, 0.1, size=100_000)
    y = (rng.uniform(size=p.size) < 1.25 * p).astype(float)  # the model predicts 0.8 of what happens
    monitor = MeanBiasCS()
    monitor.update_many(y, p)
    low, high = monitor.ratio_interval
    assert monitor.alarm
    assert low < 0.8 < high
    assert low < monitor.ratio < high


# ----------------------------------------------------------------------------- reset, state, inputs


def test_reset_starts_again_and_keeps_the_record(rng):
    p = rng.uniform(0.05, 0.6, size=5000)
    y = (rng.uniform(size=p.size) < 0.6 * p).astype(float)
    monitor = MeanBiasCS()
    monitor.update_many(y, p)
    first = monitor.first_alarm_at
    assert monitor.alarm
    assert first is not None
    monitor.reset()
    assert not monitor.alarm
    assert monitor.e_value == 1.0
    assert monitor.n_since_reset == 0
    assert monitor.interval == (-1.0, 1.0)
    monitor.update_many(y, p)
    assert monitor.alarm
    assert monitor.first_alarm_at == first
    assert monitor.n_alarms == 2


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
def test_state_is_bounded(rng, make):
    sizes = []
    for n in (10_000, 100_000):
        p, y = calibrated(rng, n)
        monitor = make()
        monitor.update_many(y, p)
        sizes.append(state_size(monitor))
    assert sizes[0] == sizes[1] > 0


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
def test_pickle_and_clone_round_trip(rng, make):
    p, y = calibrated(rng, 3000)
    monitor = make()
    monitor.update_many(y[:2000], p[:2000])
    copy = pickle.loads(pickle.dumps(monitor))
    np.testing.assert_array_equal(copy.update_many(y[2000:], p[2000:]), monitor.update_many(y[2000:], p[2000:]))
    fresh = monitor.clone()
    assert fresh.n_seen == 0
    assert fresh.alpha == monitor.alpha


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
@pytest.mark.parametrize(
    ("labels", "proba", "error", "match"),
    [
        (
            [0, 1, 1],
            [0.1, float("nan"), 0.3],
            ValueError,
            r"`proba` must hold probabilities in \[0, 1\]; got nan at position 1",
        ),
        ([0, 1, 1], [0.1, 0.2, 1.3], ValueError, r"got 1.3 at position 2"),
        ([0, 2, 1], [0.1, 0.2, 0.3], ValueError, r"`labels` must hold binary labels .* got 2 at position 1"),
        ([0, 1], [0.1, 0.2, 0.3], ValueError, r"`proba` must have the same length as `labels` \(2\); got 3"),
        (["a", 1, 0], [0.1, 0.2, 0.3], ValueError, r"`labels`"),
        ([0, 1, 0], ["0.1", 0.2, 0.3], TypeError, r"`proba`"),
    ],
)
def test_bad_batches_are_refused_and_change_nothing(rng, make, labels, proba, error, match):
    p, y = calibrated(rng, 500)
    monitor = make()
    monitor.update_many(y, p)
    before = state_of(monitor)
    with pytest.raises(error, match=match):
        monitor.update_many(labels, proba)
    assert state_of(monitor) == before


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
@pytest.mark.parametrize(
    ("y_true", "y_pred", "w", "match"),
    [
        (True, 1.5, 1.0, r"`y_pred` must be a probability"),
        (True, {False: 0.5}, 1.0, r"`y_pred`"),
        (3, 0.5, 1.0, r"`y_true`"),
        (True, float("nan"), 1.0, r"`y_pred`"),
        (True, 0.5, 2.0, r"`w` must be 1"),
    ],
)
def test_bad_events_are_refused_and_change_nothing(make, y_true, y_pred, w, match):
    monitor = make()
    monitor.update(True, 0.4)
    before = state_of(monitor)
    with pytest.raises(ValueError, match=match):
        monitor.update(y_true, y_pred, w)
    assert state_of(monitor) == before


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, "`alpha`"),
        ({"alpha": 1.5}, "`alpha`"),
        ({"restart": "yes"}, "`restart`"),
    ],
)
@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
def test_bad_parameters_are_refused(make, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bets": ()}, "`bets`"),
        ({"bets": (0.5, 1.0)}, r"`bets` must hold fractions in \(0, 1\); got 1.0 at position 1"),
        ({"buckets": "uniform"}, "`buckets`"),
        ({"window": "7d"}, "`window` must count events"),  # its events carry no time
        ({"window": Decay(60.0, by="time")}, "`window` must count events"),
        # a float is not read as a time (which the monitor would refuse): the hint is a count
        ({"window": 10.5}, r"`window` must count events: an int \(such as 10\), CountWindow or Decay by events"),
        ({"window": np.float64(0.5)}, r"an int \(such as 1000\).*; got 0.5\.$"),
    ],
)
def test_bad_isotonic_parameters_are_refused(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match) as caught:
        IsotonicEProcess(**kwargs)
    assert "'10.5s'" not in str(caught.value)


@pytest.mark.parametrize(
    ("grid", "match"),
    [
        ([-0.5, 0.5], "must hold 0"),
        ([0.0, 1.0], r"in \(-1, 1\); got 1.0 at position 1"),
        ([0.0, -0.5], "strictly increasing"),
    ],
)
def test_bad_grids_are_refused(grid, match):
    with pytest.raises(ValueError, match=match):
        MeanBiasCS(grid=grid)


def test_impossible_outcome_alarms_at_once():
    monitor = IsotonicEProcess()
    monitor.update_many([0, 0, 1], [0.3, 0.2, 0.0])
    assert monitor.alarm
    assert monitor.first_alarm_at == 3
    assert monitor.e_value == math.inf


@pytest.mark.parametrize("restart", [False, True])
def test_impossible_outcome_alarms_at_once_on_the_river_face(restart):
    monitor = IsotonicEProcess(restart=restart)
    monitor.update(False, 0.3)
    monitor.update(False, 1.0)
    assert monitor.first_alarm_at == 2
    assert monitor.alarm is not restart
    assert monitor.e_value == (1.0 if restart else math.inf)


def test_revert_is_refused():
    with pytest.raises(NotImplementedError, match="cannot revert"):
        MeanBiasCS().revert(True, 0.5)


def test_threads_share_a_monitor(rng):
    p, y = calibrated(rng, 40_000)
    monitor = IsotonicEProcess()
    chunks = np.array_split(np.arange(p.size), 40)

    def work(part):
        for idx in part:
            monitor.update_many(y[idx], p[idx])

    threads = [threading.Thread(target=work, args=(chunks[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert monitor.n_seen == p.size
    assert monitor._recalibration.n_learned == p.size


# ----------------------------------------------------------------------------- keyed


def test_keyed_spending_rule_sums_to_alpha():
    keyed = KeyedMonitor(MeanBiasCS(), alpha=0.05)
    for k in range(50):
        keyed.update(f"key{k}", True, 0.5)
    shares = [keyed.alpha_of(f"key{k}") for k in range(50)]
    assert shares[0] == 0.025
    assert shares[1] == 0.05 / 6
    assert sum(shares) < 0.05
    assert keyed["key3"].alpha == shares[3]


def test_keyed_batch_equals_a_loop_and_finds_the_bad_key(rng):
    n = 30_000
    keys = rng.choice(np.array([3, 1, 2]), size=n)
    p = rng.uniform(0.05, 0.4, size=n)
    y = (rng.uniform(size=n) < np.where(keys == 2, 0.6 * p, p)).astype(float)
    batch, loop = KeyedMonitor(IsotonicEProcess(buckets=32)), KeyedMonitor(IsotonicEProcess(buckets=32))
    e_batch = np.concatenate(
        [batch.update_many(keys[a : a + 7000], y[a : a + 7000], p[a : a + 7000]) for a in range(0, n, 7000)]
    )
    e_loop = []
    for k, yi, pi in zip(keys, y, p, strict=True):
        loop.update(int(k), yi, pi)
        e_loop.append(loop[int(k)].get())
    np.testing.assert_allclose(e_batch, e_loop, rtol=1e-12)
    assert batch.keys() == loop.keys() == [int(k) for k in dict.fromkeys(keys.tolist())]
    assert batch.alarmed_keys() == loop.alarmed_keys() == [2]
    assert batch.first_alarm_at == loop.first_alarm_at
    assert batch.first_alarm_key == 2


@pytest.mark.parametrize(
    "prototype",
    [MeanBiasCS(), MeanBiasCS(grid=[-0.5, 0.0, 0.5], max_bet=0.9, restart=True), IsotonicEProcess(buckets=16)],
)
def test_each_key_starts_as_a_fresh_monitor_at_its_share(rng, prototype):
    from streamcal import persist

    keys = rng.integers(0, 6, size=3_000)
    p = rng.uniform(0.05, 0.5, size=keys.size)
    y = (rng.uniform(size=keys.size) < np.where(keys == 4, 0.5 * p, p)).astype(float)
    keyed = KeyedMonitor(prototype, alpha=0.05)
    keyed.update_many(keys, y, p)
    seen = keyed.keys()
    assert sorted(seen) == list(range(6))
    for key in seen:
        alone = prototype.clone({"alpha": keyed.alpha_of(key)})
        alone.update_many(y[keys == key], p[keys == key])
        assert persist.to_bytes(keyed[key]) == persist.to_bytes(alone)  # the same state, bit for bit


def test_keyed_reads_a_key_never_seen_as_a_key_error_naming_it():
    keyed = KeyedMonitor(MeanBiasCS())
    with pytest.raises(KeyError, match=r"key 123 has no monitor: it has not been seen \(0 keys seen\)"):
        keyed[123]
    keyed.update_many(list(range(7)), [1, 0] * 3 + [1], [0.5] * 7)
    before = pickle.dumps(keyed)
    seen = r"\(7 keys seen: 0, 1, 2, 3, 4, \.\.\.\)"
    with pytest.raises(KeyError, match=r"key 123 has no monitor: it has not been seen " + seen):
        keyed.alpha_of(123)
    with pytest.raises(KeyError, match=r"key '3' has no monitor"):
        keyed["3"]
    with pytest.raises(ValueError, match=r"`key` must hold integer or string keys; got 2.5"):
        keyed.alpha_of(2.5)
    assert pickle.dumps(keyed) == before
    assert keyed[np.int64(3)] is keyed[3]  # the live monitor
    assert keyed.alpha_of(np.int64(0)) == 0.025
    assert 3 in keyed
    assert np.int64(6) in keyed
    assert 123 not in keyed
    assert "3" not in keyed
    assert 2.5 not in keyed  # a float cannot be a key: not held, no error
    assert None not in keyed
    assert pickle.dumps(keyed) == before


def test_keyed_reset_restarts_every_key_and_one_key_through_its_monitor(rng):
    n = 6_000
    keys = rng.choice(np.array(["a", "b", "c"]), size=n)
    p = rng.uniform(0.05, 0.4, size=n)
    y = (rng.uniform(size=n) < np.where(keys == "c", p, 2.0 * p)).astype(float)
    keyed = KeyedMonitor(MeanBiasCS())
    keyed.update_many(keys, y, p)
    assert keyed.alarmed_keys() == ["a", "b"]
    first = (keyed.first_alarm_at, keyed.first_alarm_key)
    keyed["a"].reset()  # the live monitor: one key restarts
    assert keyed.alarmed_keys() == ["b"]
    assert keyed["a"].e_value == 1.0
    keyed.reset()
    assert keyed.alarmed_keys() == []
    assert keyed.get() == {"a": 1.0, "b": 1.0, "c": 1.0}
    assert (keyed.first_alarm_at, keyed.first_alarm_key) == first  # the record stays
    assert keyed.keys() == ["a", "b", "c"]
    assert keyed["b"].n_alarms == 1
    alone = MeanBiasCS(alpha=keyed.alpha_of("b"))
    alone.update_many(y[keys == "b"], p[keys == "b"])
    alone.reset()
    assert keyed["b"].e_value == alone.e_value


def test_keyed_refuses_a_key_beyond_n_keys_and_changes_nothing():
    keyed = KeyedMonitor(MeanBiasCS(), n_keys=2)
    keyed.update_many(["a", "b"], [1, 0], [0.5, 0.5])
    before = pickle.dumps(keyed)
    with pytest.raises(ValueError, match="more distinct keys than `n_keys` = 2"):
        keyed.update_many(["a", "c"], [1, 0], [0.5, 0.5])
    with pytest.raises(ValueError, match="`labels`"):
        keyed.update_many(["a", "b"], [1, 5], [0.5, 0.5])
    assert pickle.dumps(keyed) == before
    assert keyed.alpha_of("a") == 0.025


def test_keyed_takes_the_keys_a_keyed_calibrator_takes_and_changes_nothing_on_others():
    # ints or strings, one kind per monitor; a missing key, a bool or a float (which a dict would
    # merge with the int 1) is refused with its position
    keyed = KeyedMonitor(MeanBiasCS(), n_keys=3)
    keyed.update_many([1, 2], [1, 0], [0.5, 0.5])
    before = pickle.dumps(keyed)
    for keys, error, match in [
        ([1, None], ValueError, "got None at position 1"),
        ([True, 1], ValueError, "got True at position 0"),
        (np.array([1.0, 2.0]), ValueError, "got 1.0 at position 0"),
        (["a", "b"], TypeError, r"kind already seen \(int\); got 'a' at position 0"),
        ([1, 5, 6], ValueError, "the first beyond it is 6 at position 2"),
    ]:
        with pytest.raises(error, match=match):
            keyed.update_many(keys, [1] * len(keys), [0.5] * len(keys))
    for key, error in [(None, ValueError), (1.0, ValueError), (False, ValueError), ("a", TypeError)]:
        with pytest.raises(error, match="`key`"):
            keyed.update(key, True, 0.5)
    assert pickle.dumps(keyed) == before
    keyed.update(np.int64(2), True, 0.5)  # numpy ints are ints
    assert keyed.keys() == [1, 2]


def test_keyed_family_wise_false_alarms_are_at_most_alpha():
    streams, alpha = 150, 0.1
    alarms = 0
    for seed in range(streams):
        rng = np.random.default_rng(5000 + seed)
        keys = rng.integers(0, 5, size=4000)
        p, y = calibrated(rng, keys.size)
        keyed = KeyedMonitor(MeanBiasCS(), alpha=alpha)
        keyed.update_many(keys, y, p)
        alarms += keyed.first_alarm_at is not None
    assert alarms / streams <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / streams)


@pytest.mark.parametrize("make", [IsotonicEProcess, MeanBiasCS])
def test_a_proba_dict_that_is_not_a_distribution_is_refused_and_changes_nothing(make):
    monitor = make()
    for y, p in ((True, 0.3), (False, 0.2), (True, 0.6)):
        monitor.update(y, {False: 1.0 - p, True: p})  # river's form, accepted
    before = pickle.dumps(monitor)
    for bad in ({True: 0.3, False: 0.3}, {True: 0.3, False: "0.7"}, {True: 0.3, False: float("nan")}):
        with pytest.raises(ValueError, match="must be a dict \\{False: 1 - p, True: p\\}"):
            monitor.update(True, bad)
    assert pickle.dumps(monitor) == before
    monitor.update(True, {False: 0.7, True: 0.3})  # 1 - 0.3 to rounding
    assert monitor.n_seen == 4


# ----------------------------------------------------------------------------- restored states
def test_a_monitor_whose_e_value_is_infinite_saves_and_loads():
    """An outcome the null cannot produce makes the e-value +inf: the alarmed monitor (and a keyed
    monitor holding it) restores from its checkpoint as it was."""
    from streamcal import persist

    monitor = IsotonicEProcess()
    monitor.update(True, 0.0)
    assert monitor.e_value == math.inf
    assert monitor.alarm
    back = persist.from_bytes(persist.to_bytes(monitor))
    assert back.e_value == math.inf
    assert back.alarm
    assert back.first_alarm_at == 1
    keyed = KeyedMonitor(IsotonicEProcess())
    keyed.update_many([1, 2], [True, True], [0.0, 0.5])
    back = persist.from_bytes(persist.to_bytes(keyed))
    assert back[1].e_value == math.inf
    assert back.first_alarm_key == 1


def _edited(monitor, edit):
    """``monitor``'s state file after ``edit(root node, arrays)``, checksums recomputed."""
    from state_files import pack, unpack

    from streamcal import persist

    manifest, arrays, pickles = unpack(persist.to_bytes(monitor))
    edit(manifest["root"], arrays)
    return pack(manifest, arrays, pickles)


def test_restored_monitor_states_are_checked():
    """Edited files that would load and then misbehave are refused: a NaN e-value, a negative sum
    of squared errors (its stake's square root), a recalibration of other parameters than the
    monitor's (its score key)."""
    from state_files import array_of

    from streamcal import persist
    from streamcal.exceptions import StateFileError

    iso = IsotonicEProcess()
    iso.update_many(np.array([True, False, True]), np.array([0.3, 0.2, 0.6]))

    def nan_e(root, arrays):
        root["state"]["_last_e"] = {"__float__": "7ff8000000000000"}  # NaN's bits

    def other_score_key(root, arrays):
        root["state"]["_recalibration"]["params"]["score_key"] = -1

    mb = MeanBiasCS()
    mb.update_many(np.array([True, False, True]), np.array([0.3, 0.2, 0.6]))

    def negative_squares(root, arrays):
        arrays[array_of(root, "_sums")][2] = -1.0

    for monitor, edit, match in (
        (iso, nan_e, "`_last_e`"),
        (iso, other_score_key, r"`_recalibration`: expected the parameters .* \['score_key'\]"),
        (mb, negative_squares, "sum of squared errors"),
    ):
        with pytest.raises(StateFileError, match=match):
            persist.from_bytes(_edited(monitor, edit))


@pytest.mark.parametrize("make", [lambda: MeanBiasCS(restart=True), lambda: IsotonicEProcess(restart=True)])
def test_keyed_first_alarm_of_restarting_monitors_on_both_faces(make):
    """A key's monitor that restarts clears its alarm at once; the keyed monitor still records the
    first one, the same on the river face (one event at a time) as on the array face."""
    rng = np.random.default_rng(4)
    n = 20_000
    p = rng.uniform(0.01, 0.2, n)
    k = rng.integers(0, 6, n)
    y = rng.uniform(size=n) < np.where(k == 3, 1.5 * p, p)
    batch = KeyedMonitor(make())
    batch.update_many(k, y, p)
    loop = KeyedMonitor(make())
    for ki, yi, pi in zip(k, y, p, strict=True):
        loop.update(int(ki), bool(yi), float(pi))
    assert batch.first_alarm_at is not None
    assert batch[3].n_alarms >= 1
    assert (loop.first_alarm_at, loop.first_alarm_key) == (batch.first_alarm_at, batch.first_alarm_key)
    assert loop[3].n_alarms == batch[3].n_alarms


def test_keyed_family_wise_level_defaults_to_the_prototypes_alpha():
    assert KeyedMonitor(MeanBiasCS(alpha=0.01)).alpha == 0.01
    assert KeyedMonitor(MeanBiasCS()).alpha == 0.05
    assert KeyedMonitor(IsotonicEProcess(), alpha=0.01).alpha == 0.01
    assert KeyedMonitor(MeanBiasCS(alpha=0.01), alpha=0.01).alpha == 0.01
    keyed = KeyedMonitor(MeanBiasCS(alpha=0.01), n_keys=4)
    keyed.update("a", True, 0.5)
    assert keyed.alpha_of("a") == 0.01 / 4
    with pytest.raises(ValueError, match=r"`alpha` must agree with the monitor's own alpha.*0\.02.*0\.01"):
        KeyedMonitor(MeanBiasCS(alpha=0.01), alpha=0.02)


@pytest.mark.parametrize("make", [MeanBiasCS, IsotonicEProcess, lambda: KeyedMonitor(MeanBiasCS())])
def test_monitors_save_and_load_themselves_as_the_calibrators_do(make, tmp_path):
    monitor = make()
    if isinstance(monitor, KeyedMonitor):
        monitor.update_many(["a", "b", "a"], [True, False, True], [0.2, 0.3, 0.4])
    else:
        monitor.update_many([True, False, True], [0.2, 0.3, 0.4])
    path = monitor.save(tmp_path / "monitor.zip")
    back = type(monitor).load(path)
    assert back.n_seen == monitor.n_seen == 3
    other = IsotonicEProcess if type(monitor) is not IsotonicEProcess else MeanBiasCS
    with pytest.raises(TypeError, match=r"holds an? \w+, not an? " + other.__name__):
        other.load(path)
