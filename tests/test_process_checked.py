"""``_process_checked``: the array face's ``process`` for operations the caller has checked (the
replay's), with its output arrays reused. Its predictions equal ``process``'s bit for bit and it
leaves the same state; whatever its own checks reject (scores outside the buckets' range, weights
above the largest weight of one event) and whatever it does not handle (time windows, the
quantile warm-up) goes through ``process``'s checks, which raise the same errors."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal import GEVCalibrator, ISplineCalibrator, PAVCalibrator, PlattCalibrator
from streamcal.replay._runners import _checked_entry, _Outputs
from streamcal.replay.methods import RawScoreCalibrator
from streamcal.windows import CountWindow, Decay, TimeWindow

GRID = np.linspace(0.0, 1.0, 201)


def operations(n: int, seed: int, weighted: bool):
    """A replay-like operation sequence: predictions, with runs of labels between them; times in
    order; labels 0/1 everywhere (the learn positions' matter); weights finite and non-negative."""
    rng = np.random.default_rng(seed)
    s = rng.beta(0.6, 2.0, n)
    s[rng.random(n) < 0.02] = rng.choice([0.0, 1.0])  # the ends of the range
    y = (rng.random(n) < s).astype(np.float64)
    learn = rng.random(n) < 0.5
    learn[rng.integers(0, n, n // 20)] = True
    t = np.cumsum(rng.choice([0.0, 1.0, 3.0], n))
    w = rng.uniform(0.0, 2.0, n) if weighted else None
    return s, y, learn, w, t


CALIBRATORS = {
    "pav": lambda: PAVCalibrator(window=CountWindow(300)),
    "pav, two threads": lambda: PAVCalibrator(window=CountWindow(300), n_jobs=2),
    "pav, whole history": PAVCalibrator,
    "pav, decay": lambda: PAVCalibrator(window=Decay(half_life=200)),
    "pav, uniform buckets": lambda: PAVCalibrator(buckets="uniform:32"),
    "pav, quantile warm-up": lambda: PAVCalibrator(buckets="quantile:16"),
    "pav, time window": lambda: PAVCalibrator(window=TimeWindow(500.0)),
    "ispline": lambda: ISplineCalibrator(window=CountWindow(300), refit_every=50),
    "platt": lambda: PlattCalibrator(window=CountWindow(300), refit_every=50),
    "gev": lambda: GEVCalibrator(window=CountWindow(300), refit_every=50),
}


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", list(CALIBRATORS))
def test_checked_entry_equals_process_bit_for_bit(name, weighted):
    make = CALIBRATORS[name]
    a, b = make(), make()
    entry = _checked_entry(b)
    assert entry is not None
    outs = _Outputs()
    for k in range(6):
        s, y, learn, w, t = operations(700 + 37 * k, seed=k, weighted=weighted)
        t = t + 10_000.0 * k  # batch after batch, times never go backwards
        p_a, l_a = a.process(s, y, learn, weights=w, times=t)
        p_b, l_b = entry(s, y, learn, w, t, outs.get(s.size))
        predict = ~learn
        np.testing.assert_array_equal(p_a[predict], p_b[predict])
        np.testing.assert_array_equal(l_a[predict], l_b[predict])
    assert a.n_learned == b.n_learned
    np.testing.assert_array_equal(a.predict_proba(GRID), b.predict_proba(GRID))
    np.testing.assert_array_equal(a.predict_llr(GRID), b.predict_llr(GRID))


def test_the_fast_path_reuses_the_output_arrays():
    cal, outs = PAVCalibrator(window=CountWindow(300)), _Outputs()
    s, y, learn, w, t = operations(500, seed=3, weighted=False)
    entry = _checked_entry(cal)
    first = entry(s, y, learn, w, t, outs.get(s.size))[0]
    again = entry(s[:400], y[:400], learn[:400], w, t[:400], outs.get(400))[0]
    assert np.shares_memory(first, again)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda s, y, w, t: s.__setitem__(5, 1.5), r"`scores` must .* at position 5"),
        (lambda s, y, w, t: w.__setitem__(7, 1e101), r"`weights` must be at most .* at position 7"),
    ],
)
def test_what_its_own_checks_reject_raises_as_process_does(change, match):
    s, y, learn, w, t = operations(300, seed=5, weighted=True)
    learn[:10] = True
    change(s, y, w, t)
    a, b = PAVCalibrator(window=CountWindow(100)), PAVCalibrator(window=CountWindow(100))
    with pytest.raises(ValueError, match=match) as expected:
        a.process(s, y, learn, weights=w, times=t)
    with pytest.raises(ValueError, match=match) as got:
        _checked_entry(b)(s, y, learn, w, t, _Outputs().get(s.size))
    assert str(got.value) == str(expected.value)
    assert b.n_learned == 0  # rejected before anything was learned


def test_a_time_window_still_checks_the_times_against_its_last_learned_time():
    cal = PAVCalibrator(window=TimeWindow(100.0))
    cal.learn_one({"score": 0.5}, True, t=1_000.0)
    s, y, learn, w, t = operations(50, seed=2, weighted=False)
    learn[0] = True
    with pytest.raises(ValueError, match="`times` must not go backwards"):
        _checked_entry(cal)(s, y, learn, w, t, _Outputs().get(s.size))
    assert cal.n_learned == 1


def test_calibrators_without_it_or_overriding_process_take_process():
    class OwnProcess(PAVCalibrator):
        def process(self, scores, labels, learn_mask, *, weights=None, times=None):
            return super().process(scores, labels, learn_mask, weights=weights, times=times)

    assert _checked_entry(RawScoreCalibrator()) is None
    assert _checked_entry(OwnProcess()) is None
    assert _checked_entry(PAVCalibrator()) is not None
