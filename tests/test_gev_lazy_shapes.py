"""GEVCalibrator's lazy shapes (``xi="auto"``) against full refits.

The exact default refits the served shape before each prediction that follows new labels, and
each other candidate shape only where a lower bound on the Brier score its refit would find
does not lie above the served one's (``streamcal._kernels.glm_refit._shape_brier_lower_bound``);
the others wait. Checked here: the bound never exceeds the Brier score of a converged cold refit
of the shape on random streams, windows, weights and numbers of events since the shape's fit;
it separates the shapes on a long stream (most shapes wait); every prediction stays within
1e-9 of a converged full refit of every shape on a stream whose best shape changes (waiting
shapes are refitted when the bound no longer separates them, and served); hypothesis streams
serve what the Python engine's six-shape refit serves (where the shapes differ, their Brier
scores tie within 1e-9); copies continue bit for bit while shapes wait; a state saved in the
layout before the lazy shapes loads and continues; the river face's one compiled call per pair
equals ``prequential`` bit for bit, also where a shape needs the damped full refit and readers
come between the pairs.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gev_compiled_refit import _python_engine, assert_same_or_tied, glm_arrays, naive_prior_refit_proba

from streamcal import GEVCalibrator
from streamcal._kernels import glm_refit as _g
from streamcal.buckets import LogitGrid
from streamcal.gev import fit_glm_on_histogram, gev_cdf
from streamcal.gev.calibrator import _REFIT_STEP_TOL
from streamcal.windows import CountWindow, Decay, Unbounded

TOL = 1e-9


def naive_shape_briers(cal):
    """Each candidate shape's Brier score (summed over the window) at a converged cold refit of
    ``cal``'s histogram (no prior pseudo-counts: the callers use ``prior=None``)."""
    centres, pos, neg = cal.histogram()
    q = np.clip(centres, 1e-12, 1 - 1e-12)
    x = np.log(q) - np.log1p(-q)
    out = []
    for xi in cal.xi_grid:
        beta = fit_glm_on_histogram(x, pos, neg, link="gev", xi=float(xi), l2=cal.l2, tol=1e-16, max_iter=2000)
        p = gev_cdf(beta[0] * x + beta[1], float(xi))
        out.append(float(np.dot(pos, (1 - p) ** 2) + np.dot(neg, p**2)))
    return np.array(out)


def waiting_shapes(cal) -> int:
    """How many shapes waited at ``cal``'s last refit (white box)."""
    return int(np.sum(glm_arrays(cal).ok == 2))


def _stream(rng, n, kind):
    z = rng.normal(rng.uniform(-3.0, 0.5), rng.uniform(0.5, 2.5), n)
    scores = 1 / (1 + np.exp(-z))
    if kind == "few buckets":
        scores = rng.choice([0.05, 0.3, 0.6], n)
        z = np.log(scores) - np.log1p(-scores)
    v = rng.uniform(0.3, 1.5) * z + rng.uniform(-2.5, 0.5)
    truth = {"gev heavy": gev_cdf(v, 1.0), "gev light": gev_cdf(v, -0.5)}.get(kind, 1 / (1 + np.exp(-v)))
    return scores, rng.uniform(size=n) < truth


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(["logistic", "rare", "gev heavy", "gev light", "few buckets"]),
    st.integers(60, 900),
    st.integers(1, 60),
    st.sampled_from(["unbounded", "count 150"]),
    st.booleans(),
)
def test_the_bound_never_exceeds_a_converged_refits_brier_score(seed, kind, warmup, since, window, weighted):
    rng = np.random.default_rng(seed)
    scores, labels = _stream(rng, warmup + since, kind)
    weights = rng.choice([0.0, 0.5, 1.0, 2.0], warmup + since) if weighted else np.ones(warmup + since)
    cal = GEVCalibrator(prior=None, window=Unbounded() if window == "unbounded" else CountWindow(150))
    # a bulk update leaves the shapes' blocks to the next warm refit: a cold refit, one more event
    # and a warm refit, after which every shape's block describes the histogram
    cal.update(scores[: warmup - 1], labels[: warmup - 1], weights=weights[: warmup - 1])
    cal.predict_proba(scores[:1])
    cal.update(scores[warmup - 1 : warmup], labels[warmup - 1 : warmup], weights=weights[warmup - 1 : warmup])
    cal.predict_proba(scores[:1])
    for i in range(warmup, warmup + since):
        cal.learn_one({"score": float(scores[i])}, bool(labels[i]), w=float(weights[i]))
    a = glm_arrays(cal)
    steps = cal._glm_steps
    assert steps.size  # the bound is checked on every example
    _, pos, neg = cal.histogram()
    if not (pos.sum() > 0.0 and neg.sum() > 0.0):  # one class: the slope-0 limit, nothing to bound
        return
    assert steps[_g.STEP_VALID] == 1.0
    if cal.window_weight == 0.0:  # weights of 0 only: no Brier score to bound
        return
    exact = naive_shape_briers(cal)
    x_lo, x_hi = a.args[1], a.args[2]
    for k in range(len(cal.xi_grid)):
        # the last argument, a prior's strength above 0, takes the tight bound on |f'/f|
        for kappa in (0.0, 1.0):
            bound = _g._shape_brier_lower_bound(
                steps, k, 1.0, cal.l2, cal.window_weight, x_lo, x_hi, _REFIT_STEP_TOL, kappa
            )
            assert bound <= exact[k], (k, kappa, bound, exact[k])


def test_the_bound_separates_the_shapes_on_a_long_stream():
    # a setting like the benchmarks': most shapes wait at most events, and the bound (the
    # scores of the shapes that waited) lies close below each shape's converged Brier score
    rng = np.random.default_rng(7)
    z = rng.normal(-2.5, 1.2, 12_000)
    scores = 1 / (1 + np.exp(-z))
    labels = rng.uniform(size=z.size) < gev_cdf(0.8 * z - 0.6, -0.25)
    cal = GEVCalibrator(prior=None)
    cal.prequential(scores[:10_000], labels[:10_000])
    waits = []
    for i in range(10_000, 10_400):
        cal.predict_proba_one({"score": float(scores[i])})
        waits.append(waiting_shapes(cal))
        cal.learn_one({"score": float(scores[i])}, bool(labels[i]))
    assert np.mean(waits) >= 4.0
    bounds = np.array(list(cal.shape_scores_.values()))
    cal.predict_proba_one({"score": 0.5})
    exact = naive_shape_briers(cal)
    assert np.all(bounds <= exact + 1e-6)
    assert np.all(exact - np.array(list(cal.shape_scores_.values())) <= 0.02 * exact)


def _shifting_stream(n, seed):
    """Labels from a light-tailed GEV link, then from a heavy-tailed one: the best shape moves."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.5, 1.5, n)
    v = 0.9 * z - 0.5
    half = n // 2
    truth = np.concatenate([gev_cdf(v[:half], -0.5), gev_cdf(v[half:], 1.0)])
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < truth


@pytest.mark.parametrize(
    ("window", "prior"), [(Unbounded(), None), (CountWindow(400), None), (CountWindow(400), "auto")]
)
def test_every_prediction_stays_within_the_tolerance_while_the_best_shape_changes(window, prior):
    scores, labels = _shifting_stream(2400, 11)
    cal = GEVCalibrator(window=window, prior=prior, buckets=LogitGrid(256))
    cal.prequential(scores[:600], labels[:600])
    worst, shapes, waits, woken = 0.0, [], 0, 0
    for i in range(600, scores.size):
        x = {"score": float(scores[i])}
        before = glm_arrays(cal).ok.copy()
        p = cal.predict_proba_one(x)[True]
        ok = glm_arrays(cal).ok
        waits += int(np.sum(ok == 2))
        woken += int(np.sum((before == 2) & (ok == 1)))
        shapes.append(cal.xi_)
        worst = max(worst, abs(p - float(naive_prior_refit_proba(cal, scores[i : i + 1])[0])))
        cal.learn_one(x, bool(labels[i]))
    assert worst <= TOL
    assert len(set(shapes)) >= 2  # the served shape changed
    assert waits > 2 * len(shapes)  # shapes waited at most refits
    assert woken > 0  # and were refitted where the bound no longer separated them


@pytest.mark.parametrize("window", [Unbounded(), CountWindow(300), Decay(200.0)])
def test_the_array_face_equals_a_loop_of_the_river_face_while_shapes_wait(window):
    scores, labels = _shifting_stream(1500, 12)
    cal = GEVCalibrator(window=window)
    cal.prequential(scores[:700], labels[:700])
    river = copy.deepcopy(cal)
    want, _ = cal.prequential(scores[700:], labels[700:])
    got = []
    for s, y in zip(scores[700:], labels[700:], strict=True):
        got.append(river.predict_proba_one({"score": float(s)})[True])
        river.learn_one({"score": float(s)}, bool(y))
    assert np.array_equal(np.array(got), want)


@st.composite
def streams(draw):
    n = draw(st.integers(250, 600))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scores, labels = _stream(rng, n, draw(st.sampled_from(["logistic", "rare", "gev heavy", "gev light"])))
    if draw(st.booleans()):  # the truth changes half way
        tail = _stream(rng, n - n // 2, draw(st.sampled_from(["gev heavy", "gev light"])))
        scores, labels = np.concatenate([scores[: n // 2], tail[0]]), np.concatenate([labels[: n // 2], tail[1]])
    weights = rng.choice([0.0, 0.5, 1.0, 1.0, 2.0], n) if draw(st.booleans()) else np.ones(n)
    return scores, labels, weights, draw(st.sampled_from(["unbounded", "count 120", "decay 150"]))


@settings(max_examples=25, deadline=None)
@given(streams(), st.sampled_from(["auto", None]))
def test_lazy_shapes_serve_what_the_python_engines_six_shape_refit_serves(stream, prior):
    scores, labels, weights, window = stream
    kinds = {"unbounded": Unbounded, "count 120": lambda: CountWindow(120), "decay 150": lambda: Decay(150.0)}
    ours = GEVCalibrator(prior=prior, buckets=LogitGrid(128), window=kinds[window]())
    python = _python_engine(GEVCalibrator)(prior=prior, buckets=LogitGrid(128), window=kinds[window]())
    for i in range(scores.size):
        x = {"score": float(scores[i])}
        p, ref = ours.predict_proba_one(x)[True], python.predict_proba_one(x)[True]
        assert_same_or_tied(ours, python, p, ref, i)
        for cal in (ours, python):
            cal.learn_one(x, bool(labels[i]), w=float(weights[i]))


def test_a_copy_and_a_pickle_continue_bit_for_bit_while_shapes_wait():
    scores, labels = _shifting_stream(1600, 13)
    cal = GEVCalibrator(prior=None)
    cal.prequential(scores[:900], labels[:900])
    i = 900
    while waiting_shapes(cal) == 0:  # on to a refit where shapes waited
        cal.predict_proba_one({"score": float(scores[i])})
        cal.learn_one({"score": float(scores[i])}, bool(labels[i]))
        i += 1
    assert i < 1000
    assert_copies_continue(cal, scores[i:], labels[i:])


def assert_an_older_layout_continues(cal, scores, labels, split, header, block):
    """``cal``, having learned ``[:split]``, saved with its shapes' blocks in an older layout
    (``header`` values, then ``block`` per shape, all zero: nothing to resume from), loads and
    continues within ``TOL`` of ``cal`` itself."""
    state = cal.__getstate__()
    state["_glm_steps"] = np.zeros(header + block * len(cal.xi_grid))
    state["_glm_steps_block"] = block
    older = type(cal).__new__(type(cal))
    older.__setstate__(state)
    a, _ = cal.prequential(scores[split:], labels[split:])
    b, _ = older.prequential(scores[split:], labels[split:])
    assert float(np.max(np.abs(a - b))) <= TOL


def test_a_state_in_the_layout_before_the_lazy_shapes_loads_and_continues():
    scores, labels = _shifting_stream(1200, 14)
    cal = GEVCalibrator()
    cal.prequential(scores[:800], labels[:800])
    assert_an_older_layout_continues(cal, scores, labels, 800, 4, 15)  # 15 values per shape


@pytest.mark.parametrize("seed", [0, 1])
def test_the_one_call_river_face_equals_prequential_where_shapes_need_the_damped_refit(seed, monkeypatch):
    # three buckets and a window of three events: some refits leave a shape to the damped full
    # refit, which the river face's one call hands back to Python; readers between the pairs
    # settle the deferred work. Both faces give the same bits.
    rng = np.random.default_rng(seed)
    scores = rng.choice([0.02, 0.4, 0.9], 2100)
    labels = rng.uniform(size=2100) < np.select([scores < 0.1, scores < 0.5], [0.1, 0.5], 0.9)
    completed = []
    complete = GEVCalibrator._river_gev_complete
    monkeypatch.setattr(GEVCalibrator, "_river_gev_complete", lambda self, a: completed.append(complete(self, a)))
    make = lambda: GEVCalibrator(window=CountWindow(3), prior=None, buckets=LogitGrid(64))  # noqa: E731
    want, _ = make().prequential(scores, labels)
    cal, got, served = make(), [], []
    for i, (s, y) in enumerate(zip(scores, labels, strict=True)):
        got.append(cal.predict_proba_one({"score": float(s)})[True])
        if i % 7 == 0:
            served.append(cal.xi_)  # a reader: settles the kept scalars
        cal.learn_one({"score": float(s)}, bool(y))
    assert np.array_equal(np.array(got), want)
    assert len(completed) >= 8
    assert len(set(served)) >= 2


def test_the_interpreted_and_compiled_tiers_give_the_same_bits_while_shapes_wait():
    from streamcal._kernels import _config

    scores, labels = _shifting_stream(900, 15)
    make = lambda: GEVCalibrator(prior=None, buckets=LogitGrid(128))  # noqa: E731
    _config.use_compiled_kernels()
    compiled = make()
    want = compiled.prequential(scores, labels)
    with _config.interpreting():
        interpreted = make().prequential(scores, labels)
        river = make()
        got, waits = [], 0
        for s, y in zip(scores, labels, strict=True):
            got.append(river.predict_proba_one({"score": float(s)})[True])
            waits += waiting_shapes(river)
            river.learn_one({"score": float(s)}, bool(y))
    assert np.array_equal(interpreted[0], want[0])
    assert np.array_equal(interpreted[1], want[1])
    assert np.array_equal(np.array(got), want[0])
    assert waits > scores.size  # shapes waited at most refits


def assert_copies_continue(cal, scores, labels):
    """A deep copy and a pickle of ``cal`` continue on ``scores``/``labels`` bit for bit as ``cal`` does."""
    twins = [copy.deepcopy(cal), pickle.loads(pickle.dumps(cal))]
    want = cal.prequential(scores, labels)
    for twin in twins:
        got = twin.prequential(scores, labels)
        assert np.array_equal(got[0], want[0])
        assert np.array_equal(got[1], want[1])
