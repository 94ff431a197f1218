"""``GEVCalibrator(xi="auto")`` serves its logistic member while the score prior holds.

While the prior's strength is above 0 the default serves ``PlattCalibrator()``'s map on the same
histogram (the logistic link, Platt's floor ``"span"``); once the data refute the prior (strength
0) it serves the lowest Brier score of its GEV shapes, as before. Checked here: (a) the member
equals ``PlattCalibrator()`` while the prior holds; (b) a miscalibrated stream serves the shapes,
as the Python full refit does; (c) the compiled path equals the Python full refit on every event
of streams where the strength switches on and off; (d) copies, saved files and merges across the
switch.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gev_compiled_refit import _python_engine, assert_same_or_tied

import streamcal
from streamcal import GEVCalibrator, PlattCalibrator
from streamcal.buckets import LogitGrid
from streamcal.persist import from_bytes, to_bytes
from streamcal.windows import CountWindow

TOL = 1e-9


def _expit(z):
    return 1.0 / (1.0 + np.exp(-z))


def calibrated_stream(n, seed, mean=-3.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(mean, 1.5, n)
    return _expit(z), rng.uniform(size=n) < _expit(z)


def switching_stream(seed, n=300):
    """Calibrated, then far off (the truth's log-odds half the score's, 1.5 lower), then
    calibrated again: over a count window the prior's strength falls to 0 and comes back."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.5, 1.5, 3 * n)
    truth = _expit(z)
    truth[n : 2 * n] = _expit(0.3 * z[n : 2 * n] - 2.5)
    return _expit(z), rng.uniform(size=z.size) < truth


def strengths_and_links(make, scores, labels):
    """The river face's prediction, the prior's strength and the served link at every event."""
    cal = make()
    p, kappa, links = [], [], []
    for s, y in zip(scores, labels, strict=True):
        x = {"score": float(s)}
        p.append(cal.predict_proba_one(x)[True])
        kappa.append(cal.prior_strength)
        links.append(getattr(cal, "link_", None))
        cal.learn_one(x, bool(y))
    return np.array(p), np.array(kappa), links


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(40, 400), st.floats(-4.0, -1.0), st.sampled_from([64, 1024]))
def test_while_the_prior_holds_the_default_serves_platts_map(seed, n, mean, buckets):
    scores, labels = calibrated_stream(n, seed, mean)
    gev_p, gev_llr = GEVCalibrator(buckets=LogitGrid(buckets)).prequential(scores, labels)
    platt_p, platt_llr = PlattCalibrator(buckets=LogitGrid(buckets)).prequential(scores, labels)
    _, kappa, _ = strengths_and_links(lambda: PlattCalibrator(buckets=LogitGrid(buckets)), scores, labels)
    # up to the first refit where the prior is refuted: the same steps on the same state (the
    # same bits); after it the member's fit is warm-started from an older fit (certified, 1e-10)
    held = int(np.argmax(kappa == 0.0)) if np.any(kappa == 0.0) else n
    np.testing.assert_allclose(gev_p[:held], platt_p[:held], rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(gev_llr[:held], platt_llr[:held], rtol=0.0, atol=1e-12)
    where = kappa > 0.0
    np.testing.assert_allclose(gev_p[where], platt_p[where], rtol=0.0, atol=TOL)


def test_the_member_is_reported_and_a_fixed_xi_or_no_prior_has_none():
    scores, labels = calibrated_stream(600, 1)
    cal = GEVCalibrator().update(scores, labels)
    platt = PlattCalibrator().update(scores, labels)
    assert cal.prior_strength > 0.0
    assert cal.link_ == "logistic"
    assert cal.xi_ is None
    assert cal.coef_ == platt.coef_
    np.testing.assert_array_equal(cal.predict_proba(scores[:50]), platt.predict_proba(scores[:50]))
    for other in (GEVCalibrator(xi=-0.25), GEVCalibrator(prior=None)):
        other.update(scores, labels)
        assert other.link_ == "gev"
        assert other.xi_ is not None
    assert GEVCalibrator().link_ is None


def _miscalibrated(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.0, 1.5, n)
    return _expit(z), rng.uniform(size=n) < _expit(0.4 * z - 2.0)


def test_a_refuted_prior_serves_the_gev_shapes_as_the_python_full_refit():
    scores, labels = _miscalibrated(1500, 4)
    ours, python = GEVCalibrator(), _python_engine(GEVCalibrator)()
    links = set()
    for i in range(scores.size):
        x = {"score": float(scores[i])}
        p, ref = ours.predict_proba_one(x)[True], python.predict_proba_one(x)[True]
        assert ours.link_ == python.link_
        assert_same_or_tied(ours, python, p, ref, i, relative=True)
        links.add(ours.link_)
        for cal in (ours, python):
            cal.learn_one(x, bool(labels[i]))
    assert ours.link_ == "gev"
    assert ours.prior_strength == 0.0
    assert ours.xi_ is not None
    assert "gev" in links


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_compiled_path_equals_the_python_full_refit_where_the_strength_switches(seed):
    scores, labels = switching_stream(seed)
    make = lambda cls: cls(window=CountWindow(150))  # noqa: E731
    ours, python = make(GEVCalibrator), make(_python_engine(GEVCalibrator))
    links = []
    for i in range(scores.size):
        x = {"score": float(scores[i])}
        p, ref = ours.predict_proba_one(x)[True], python.predict_proba_one(x)[True]
        assert ours.link_ == python.link_, i
        assert_same_or_tied(ours, python, p, ref, i, relative=True)
        links.append(ours.link_)
        for cal in (ours, python):
            cal.learn_one(x, bool(labels[i]))
    want, _ = make(GEVCalibrator).prequential(scores, labels)  # the array face: the river face's bits
    got, _, _ = strengths_and_links(lambda: make(GEVCalibrator), scores, labels)
    assert np.array_equal(got, want)
    switches = sum(a != b for a, b in zip(links[1:], links[:-1], strict=True) if a and b)
    assert switches >= 2, links  # logistic -> gev -> logistic


@pytest.mark.parametrize("seed", [0, 1])
def test_copies_and_saved_files_continue_bit_for_bit_across_the_switch(seed):
    scores, labels = switching_stream(seed)
    make = lambda: GEVCalibrator(window=CountWindow(150))  # noqa: E731
    want, want_llr = make().prequential(scores, labels)
    seen = set()
    for cut in range(50, scores.size, 97):
        cal = make()
        cal.prequential(scores[:cut], labels[:cut])
        seen.add(cal.link_)
        for twin in (copy.deepcopy(cal), from_bytes(to_bytes(cal, allow_pickle=False))):
            p, llr = twin.prequential(scores[cut:], labels[cut:])
            assert np.array_equal(p, want[cut:]), cut
            assert np.array_equal(llr, want_llr[cut:]), cut
    assert seen == {"logistic", "gev"}


def test_a_state_saved_before_the_member_loads_and_refits_as_the_member():
    scores, labels = calibrated_stream(500, 5)
    cal = GEVCalibrator().update(scores[:300], labels[:300])
    assert cal.link_ == "logistic"
    state = cal.__getstate__()
    del state["_logit_beta"]  # a file of the format before the member
    old = GEVCalibrator.__new__(GEVCalibrator)
    old.__setstate__(state)
    assert old.link_ == "logistic"
    np.testing.assert_allclose(old.predict_proba(scores), cal.predict_proba(scores), rtol=0.0, atol=TOL)
    p, _ = old.prequential(scores[300:], labels[300:])
    q, _ = cal.prequential(scores[300:], labels[300:])
    np.testing.assert_allclose(p, q, rtol=0.0, atol=TOL)


@pytest.mark.parametrize("cut", [100, 250, 400, 700])
def test_a_merge_across_the_switch_serves_the_single_calibrators_map(cut):
    scores, labels = switching_stream(3)
    single = GEVCalibrator().update(scores, labels)
    merged = streamcal.merge([GEVCalibrator().update(scores[:cut], labels[:cut]),
                              GEVCalibrator().update(scores[cut:], labels[cut:])])  # fmt: skip
    assert merged.link_ == single.link_
    assert merged.prior_strength == pytest.approx(single.prior_strength, rel=1e-6, abs=1e-12)
    probes = np.linspace(0.001, 0.999, 101)
    np.testing.assert_allclose(merged.predict_proba(probes), single.predict_proba(probes), rtol=0.0, atol=1e-8)
