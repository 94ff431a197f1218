"""KeyedCalibrator's keys' kernel visits a long piece's events grouped by key (each key's events in
their own order, the outputs written back to their positions): the outputs and every key's state
equal the stream-order run's bit for bit, through stops for room, evictions, predict-only events and
events of keys without a state."""

from __future__ import annotations

import numpy as np
import pytest
from test_keyed_holes import zipf_stream

from streamcal import KeyedCalibrator, PAVCalibrator, use_compiled_kernels
from streamcal import _keyed_rows as keyed_rows
from streamcal._kernels import _config
from streamcal._kernels import keyed as kk
from streamcal.windows import CountWindow, Decay, TimeWindow


def naive_group_by_slot(slots, start, stop):
    """The positions ``start .. stop - 1`` by slot, each slot's in their order (a stable sort)."""
    return start + np.argsort(slots[start:stop], kind="stable")


@pytest.mark.parametrize("tier", ["interpreted", "compiled"])
def test_group_by_slot_is_a_stable_sort_by_slot(tier):
    rng = np.random.default_rng(4)
    for n_slots, n, start, stop in ((1, 10, 0, 10), (7, 500, 3, 480), (300, 2000, 0, 2000), (50, 40, 40, 40)):
        slots = rng.integers(-1, n_slots, size=n)
        counts = np.zeros(n_slots + 1, dtype=np.int64)
        order = np.full(stop - start, -7, dtype=np.int64)
        args = (slots, np.int64(start), np.int64(stop), counts, order)
        if tier == "interpreted":
            _config.run_interpreted(kk.group_by_slot, *args)
        else:
            use_compiled_kernels()
            kk.group_by_slot(*args)
        assert np.array_equal(order, naive_group_by_slot(slots, start, stop))


TEMPLATES = {
    "count": lambda prior: PAVCalibrator(window=CountWindow(60), **prior),
    "decay": lambda prior: PAVCalibrator(window=Decay(40), **prior),
    "time": lambda prior: PAVCalibrator(window=TimeWindow(30.0), **prior),
}


def run(monkeypatch, grouped: bool, name: str, strength, max_keys):
    """A prequential call, a call mixing learning and prediction, and predictions after them; the
    outputs, and each key's exported state and prior shift."""
    monkeypatch.setattr(keyed_rows, "GROUP_MIN", 1 if grouped else 1 << 62)
    monkeypatch.setattr(keyed_rows, "GROUP_SLOTS", 1 << 62)
    keys, s, y, w, t = zipf_stream(9000, 500, seed=8)
    template = TEMPLATES[name]({"prior": None} if strength == 0 else {})
    cal = KeyedCalibrator(template, prior_strength=strength, max_keys=max_keys)
    cut = 6000
    p1, llr1 = cal.prequential(keys[:cut], s[:cut], y[:cut], weights=w[:cut], times=t[:cut])
    mask = np.random.default_rng(2).uniform(size=keys.size - cut) < 0.6
    p2, llr2 = cal.process(keys[cut:], s[cut:], y[cut:], mask, weights=w[cut:], times=t[cut:])
    grid = np.linspace(0.02, 0.98, 25)
    probe = np.repeat(np.arange(0, 500, 9), grid.size)
    q = cal.predict_proba(probe, np.tile(grid, probe.size // grid.size))
    held = cal.keys()
    states = {k: (cal.export_key(k), cal.key_shift(k)) for k in held}
    return (p1, llr1, p2, llr2, q), states, cal.evictions


@pytest.mark.parametrize("name", list(TEMPLATES))
@pytest.mark.parametrize("strength", ["auto", 30.0, 0])
@pytest.mark.parametrize("max_keys", [None, 80])
def test_grouped_keys_give_the_stream_orders_outputs_and_states(monkeypatch, name, strength, max_keys):
    use_compiled_kernels()
    groupings = []
    spied = kk.group_by_slot

    def spy(slots, start, stop, counts, order):
        groupings.append(stop - start)
        spied(slots, start, stop, counts, order)

    monkeypatch.setattr(kk, "group_by_slot", spy)
    outs, states, evictions = run(monkeypatch, True, name, strength, max_keys)
    assert sum(groupings) == 9000  # every event ran grouped
    ref_outs, ref_states, ref_evictions = run(monkeypatch, False, name, strength, max_keys)
    assert sum(groupings) == 9000  # none in the stream-order run
    assert evictions == ref_evictions
    if max_keys is not None:
        assert evictions > 500
    for out, ref in zip(outs, ref_outs, strict=True):
        assert np.isnan(out).sum() == np.isnan(ref).sum()
        assert np.array_equal(out, ref, equal_nan=True)
    assert np.isnan(outs[2]).sum() > 1000  # learn-only events keep no output
    assert sorted(states) == sorted(ref_states)
    for key, (state, shift) in states.items():
        ref_state, ref_shift = ref_states[key]
        assert shift == ref_shift
        assert sorted(state) == sorted(ref_state)
        for field, value in state.items():
            assert np.array_equal(value, ref_state[field]), (key, field)
