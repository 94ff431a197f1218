"""The compiled exact default of PlattCalibrator and GEVCalibrator against a full refit.

The lazy default (``refit_every=None``) refits before every prediction that follows new labels,
in compiled code (``streamcal._kernels.glm_refit``): the score prior's strength (certified 0
without its kernel where an anchor allows), Newton's method from the previous fit, the served
shape. Every prediction is compared with :func:`naive_prior_refit_proba`, a converged cold full
refit of the histogram before the event with the score prior as ``streamcal._prior.score_prior``
computes it (the Python full refit): within 1e-9, on every window kind, with and without the
prior, for probability and raw scores. The certificate is checked against the prior kernel
itself, and the array face against a loop of the river face, element for element.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import GEVCalibrator, PlattCalibrator, _prior
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import prior as _kp
from streamcal._refit import RefitCalibrator
from streamcal.buckets import Edges, LogitGrid
from streamcal.gev import fit_glm_on_histogram, gev_cdf
from streamcal.windows import CountWindow, Decay, TimeWindow, Unbounded

TOL = 1e-9


class ShapesUnderThePrior(GEVCalibrator):
    """``GEVCalibrator(xi="auto")`` without its logistic member: the GEV shapes fitted under the
    score prior (floor ``"spread"``), which the kernels' lazy shapes and certificates follow."""

    def _has_member(self) -> bool:
        return False


# the compiled refit's own arrays, read in two places only (white-box checks of its kernels)
def glm_arrays(cal):
    """The compiled refit's argument arrays of ``cal`` (its kernels' inputs)."""
    return cal._glm_arrays()


def glm_moments(cal):
    """The Taylor moments ``cal``'s compiled refit keeps."""
    return cal._glm_moments


def naive_end_runs(pos, neg, c):
    """``(low, high)``: the rates of the lowest and highest PAV blocks of the histogram plus one
    pseudo-positive of weight ``c`` below every score and one pseudo-negative above (the extreme
    prefix and suffix rates, and the whole row's)."""
    pos, neg = np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)
    whole = (pos.sum() + c) / (pos.sum() + neg.sum() + 2 * c)
    prefix_p, prefix_w = np.cumsum(pos), np.cumsum(pos + neg)
    suffix_p, suffix_w = np.cumsum(pos[::-1]), np.cumsum((pos + neg)[::-1])
    low = min(whole, float(np.min((c + prefix_p) / (c + prefix_w))))
    high = max(whole, float(np.max(suffix_p / (suffix_w + c))))
    return low, high


def end_run_bounded(p, xi, pos, neg, c):
    """GEV's served map past its support's end: no surer than the end run's rate there."""
    low, high = naive_end_runs(pos, neg, c)
    if xi < 0:
        return np.minimum(p, high)
    return np.maximum(p, low) if xi > 0 else p


def naive_prior_refit_proba(cal, scores):
    """The served probabilities at ``scores`` of a converged cold full refit of ``cal``'s
    histogram, with the score prior (``cal.prior == "auto"``) as the Python full refit adds it."""
    centres, pos, neg = cal.histogram()
    identity = cal.window_histogram.layout.probability_inputs
    c = float(cal.llr_pseudo_count)
    kappa = 0.0
    if cal.prior is not None:
        kappa, prior_pos, prior_neg = _prior.score_prior(centres, pos, neg, identity, c, floor=cal._PRIOR_FLOOR)
        if kappa > 0.0:
            pos, neg = pos + prior_pos, neg + prior_neg

    def feature(v):
        q = np.clip(v, 1e-12, 1 - 1e-12)
        return np.log(q) - np.log1p(-q) if identity else v

    x, xs = feature(centres), feature(scores)
    # GEV with xi="auto" serves its logistic member (Platt's map) while the prior holds
    member = isinstance(cal, GEVCalibrator) and not isinstance(cal, ShapesUnderThePrior)
    member = member and cal.xi == "auto" and kappa > 0.0
    link = "logit" if isinstance(cal, PlattCalibrator) or member else "gev"
    shapes = (0.0,) if link == "logit" else tuple(float(v) for v in cal.xi_grid) if cal.xi == "auto" else (cal.xi,)

    def proba(beta, xi, at):
        v = beta[0] * at + beta[1]
        return 1 / (1 + np.exp(-v)) if link == "logit" else gev_cdf(v, xi)

    best = None
    for xi in shapes:
        beta = fit_glm_on_histogram(x, pos, neg, link=link, xi=xi, l2=cal.l2, tol=1e-16, max_iter=2000)
        p = proba(beta, xi, x)
        brier = float(np.dot(pos, (1 - p) ** 2) + np.dot(neg, p**2))
        if best is None or brier < best[0]:
            best = (brier, xi, beta)
    _, xi, beta = best
    low, high = _prior.proba_bounds(float(pos.sum()) + float(neg.sum()), c)
    return np.clip(end_run_bounded(proba(beta, xi, xs), xi, pos, neg, c), low, high)


def assert_same_or_tied(ours, python, p, ref, i, relative=False):
    """The compiled and Python refits serve the same prediction within ``TOL`` where they chose the
    same shape; where they chose different shapes, those shapes' Brier scores tie within ``TOL``
    (relative to the score when ``relative``): exact ties on tiny windows fall to rounding."""
    if ours.xi_ == python.xi_:
        assert abs(p - ref) <= TOL
    else:
        briers = ours.shape_scores_
        gap = briers[ours.xi_] - briers[python.xi_]
        assert abs(gap) <= TOL * ((1.0 + briers[ours.xi_]) if relative else 1.0), (i, gap, briers)


def _python_engine(cls):
    """``cls`` refitted by the generic engine in Python (score prior, then the hook per shape)."""
    return type(
        f"Python{cls.__name__}",
        (cls,),
        {
            "_refit": RefitCalibrator._refit,
            "_run_ops": RefitCalibrator._run_ops,
            "_predict_arrays": RefitCalibrator._predict_arrays,
        },
    )


WINDOWS = {
    "unbounded": Unbounded(),
    "count 7": CountWindow(7),
    "count 40": CountWindow(40),
    "time 12": TimeWindow(12.0),
    "decay 10 events": Decay(10.0),
    "decay 4 events": Decay(4.0),
    "decay 8 by time": Decay(8.0, by="time"),
}


@st.composite
def streams(draw):
    n = draw(st.integers(30, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["logistic", "rare", "calibrated", "extreme", "few buckets"]))
    z = rng.normal(draw(st.floats(-3.0, 1.0)), draw(st.floats(0.3, 3.0)), n)
    if kind == "extreme":
        z *= 6.0
    scores = 1 / (1 + np.exp(-z))
    if kind == "few buckets":
        scores = rng.choice([0.2, 0.5, 0.7], n)
    truth = scores if kind == "calibrated" else 1 / (1 + np.exp(-(0.7 * z - (2.5 if kind == "rare" else 0.5))))
    labels = rng.uniform(size=n) < truth
    weights = rng.choice([0.0, 0.4, 1.0, 1.0, 2.5], n) if draw(st.booleans()) else np.ones(n)
    times = np.cumsum(rng.exponential(1.0, n))
    window = draw(st.sampled_from(sorted(WINDOWS)))
    return scores, labels, weights, times, window


def _check_every_event(make, window, scores, labels, weights, times):
    times = times if WINDOWS[window].uses_times else None
    cal = make()
    proba, _ = cal.prequential(scores, labels, weights=weights, times=times)
    hist = make()  # the histogram before each event, refitted from scratch
    worst = 0.0
    for i in range(scores.size):
        if hist.n_learned and hist.window_weight > 0.0:
            ref = naive_prior_refit_proba(hist, scores[i : i + 1])
            worst = max(worst, abs(float(proba[i]) - float(ref[0])))
        hist.update(scores[i : i + 1], labels[i : i + 1], weights=weights[i : i + 1], times=None if times is None else times[i : i + 1])
    assert worst <= TOL


@settings(max_examples=40, deadline=None)
@given(streams(), st.sampled_from(["auto", None]))
def test_platt_prequential_matches_a_full_refit_with_the_prior_on_every_event(stream, prior):
    scores, labels, weights, times, window = stream
    _check_every_event(
        lambda: PlattCalibrator(prior=prior, buckets=LogitGrid(64), window=WINDOWS[window]),
        window, scores, labels, weights, times,
    )  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(streams(), st.sampled_from(["auto", None]))
def test_gev_auto_prequential_matches_the_python_full_refit_on_every_event(stream, prior):
    # GEV with xi="auto" serves the shape of the lowest Brier score, which the refit takes from its
    # last pass to first order: on windows of a handful of events shapes can tie within that
    # error (every shape fits two non-empty buckets exactly), and the Python engine's refit then
    # serves another shape than the compiled one. The reference here is that Python refit: the
    # same prediction where both serve the same shape, Brier scores that tie where they do not.
    # (``prequential`` equals this river-face loop bit for bit: tested below.)
    scores, labels, weights, times, window = stream
    uses_times = WINDOWS[window].uses_times
    make = lambda cls: cls(prior=prior, buckets=LogitGrid(64), window=WINDOWS[window])  # noqa: E731
    ours, python = make(GEVCalibrator), make(_python_engine(GEVCalibrator))
    for i in range(scores.size):
        x = {"score": float(scores[i])}
        p, ref = ours.predict_proba_one(x)[True], python.predict_proba_one(x)[True]
        assert_same_or_tied(ours, python, p, ref, i, relative=True)
        t = float(times[i]) if uses_times else None
        for cal in (ours, python):
            cal.learn_one(x, bool(labels[i]), w=float(weights[i]), t=t)


@settings(max_examples=15, deadline=None)
@given(streams(), st.sampled_from([PlattCalibrator, GEVCalibrator]))
def test_raw_scores_match_the_python_full_refit_with_the_base_rate_prior(stream, cls):
    # raw scores: the prior is the window's base rate. The reference is the engine's Python
    # refit (a cold converged fit differs from it by more than 1e-9 on some one-class GEV windows,
    # where the fit runs off towards a separating slope and stops by its tolerance)
    scores, labels, weights, times, window = stream
    raw = 4.0 * scores - 2.0
    edges = Edges(np.linspace(-2.0, 2.0, 24))
    times = times if WINDOWS[window].uses_times else None
    ours = cls(buckets=edges, window=WINDOWS[window]).prequential(raw, labels, weights=weights, times=times)
    python = _python_engine(cls)(buckets=edges, window=WINDOWS[window]).prequential(raw, labels, weights=weights, times=times)
    assert float(np.max(np.abs(ours[0] - python[0]))) <= TOL


def _long_stream(n, seed, miscalibrated=True):
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.0, 1.5, n)
    truth = 1 / (1 + np.exp(-(0.6 * z - 1.0))) if miscalibrated else 1 / (1 + np.exp(-z))
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < truth


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
def test_default_grid_long_stream_with_the_prior_matches_at_probe_scores(cls):
    # the default 1024-bucket grid and prior: the certificate of a zero strength takes over as
    # the evidence grows; the whole map (probe scores over the clipped logit range) is checked
    # against a full refit after a sample of events
    scores, labels = _long_stream(3000, 5)
    probes = np.array([1e-15, 1e-9, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-9, 1.0])
    cal = cls()
    worst = 0.0
    for start in range(0, scores.size, 100):
        cal.prequential(scores[start : start + 100], labels[start : start + 100])
        got = cal.predict_proba(probes)
        worst = max(worst, float(np.max(np.abs(got - naive_prior_refit_proba(cal, probes)))))
    assert worst <= TOL
    assert cal.prior_strength == 0.0
    assert glm_arrays(cal).anchor[0] == 1.0  # the certificate's anchor is in use


@st.composite
def histograms(draw):
    B = draw(st.integers(2, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    centres = np.sort(rng.uniform(1e-6, 1 - 1e-6, B))
    scale = 10.0 ** draw(st.floats(0.0, 4.0))
    n = rng.exponential(scale, B) * (rng.uniform(size=B) < draw(st.floats(0.2, 1.0)))
    slope, shift = draw(st.floats(0.2, 2.0)), draw(st.floats(-2.0, 2.0))
    rate = 1 / (1 + np.exp(-(slope * (np.log(centres) - np.log1p(-centres)) + shift)))
    pos = np.round(n * rate, 1) if draw(st.booleans()) else n * rate
    return centres, pos, n - pos if draw(st.booleans()) else n * (1 - rate)


@settings(max_examples=300, deadline=None)
@given(histograms(), histograms())
def test_the_certificate_of_a_zero_strength_holds_against_the_prior_kernel(anchored, h):
    # an anchor fitted on one histogram certifies a zero strength on another only where the
    # prior kernel (its cold start, as the full refit runs it) returns exactly 0
    centres, pos0, neg0 = anchored
    _, pos, neg = h
    B = min(centres.size, pos.size)
    centres, pos0, neg0, pos, neg = centres[:B], pos0[:B], neg0[:B], pos[:B], neg[:B]
    pc = np.zeros((5, B))
    _g.prior_cache_fill(centres, pc)
    anchor = np.zeros(_g.ANCHOR_SIZE)
    row0 = np.concatenate((pos0, neg0))
    if not (pos0 + neg0).sum() > 0.0:
        return
    _kp.prior_strength_from(row0, 0, B, 1.0, centres, 0, 1, 0.5, True, anchor[1:3])
    _g.set_anchor(row0, 0, B, 1.0, pc, anchor)
    for p, q in ((pos0, neg0), (pos, neg), (pos0 + pos, neg0 + neg)):
        row = np.concatenate((p, q))
        if _g.prior_strength_is_zero(row, 0, B, 1.0, pc, anchor):
            kappa = _kp.prior_strength(row, 0, B, 1.0, centres, 0, 1, 0.5, True)
            assert kappa == 0.0


def test_the_certificate_fires_on_a_long_miscalibrated_window():
    scores, labels = _long_stream(20_000, 1)
    cal = PlattCalibrator().update(scores, labels)
    cal.predict_proba(scores[:1])
    a = glm_arrays(cal)
    _, pos, neg = cal.histogram()
    B = pos.size
    assert cal.prior_strength == 0.0
    assert _g.prior_strength_is_zero(np.concatenate((pos, neg)), 0, B, 1.0, a.pc, a.anchor)
    # and it does not fire where the score is calibrated and the evidence short: the strength is > 0
    scores, labels = _long_stream(300, 2, miscalibrated=False)
    cal = PlattCalibrator().update(scores, labels)
    assert cal.prior_strength > 0.0
    a = glm_arrays(cal)
    _, pos, neg = cal.histogram()
    assert not _g.prior_strength_is_zero(np.concatenate((pos, neg)), 0, B, 1.0, a.pc, a.anchor)


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
@pytest.mark.parametrize("window", ["unbounded", "count 40", "time 12", "decay 10 events"])
def test_compiled_refit_agrees_with_the_python_engine(cls, window):
    rng = np.random.default_rng(11)
    n = 400
    scores, labels = _long_stream(n, 3)
    weights = rng.choice([0.0, 0.5, 1.0, 2.0], n)
    times = np.cumsum(rng.exponential(1.0, n)) if WINDOWS[window].uses_times else None
    ours = cls(window=WINDOWS[window]).prequential(scores, labels, weights=weights, times=times)
    python = _python_engine(cls)(window=WINDOWS[window]).prequential(scores, labels, weights=weights, times=times)
    # Platt's refit from the data's and the score prior's moments is certified within the refit's
    # tolerance (1e-10) of the optimum; the python engine's Newton iteration stops about 1e-12
    # from it (both within 1e-9 of a converged refit: ``test_platt_prior_moments.py``). GEV's
    # default serves the same logistic fit while the prior holds.
    np.testing.assert_allclose(ours[0], python[0], rtol=0.0, atol=1e-10)
    np.testing.assert_allclose(ours[1], python[1], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
@pytest.mark.parametrize("refit_every", [None, 1, 7])
@pytest.mark.parametrize("window", ["unbounded", "count 7", "time 12", "decay 4 events"])
def test_prequential_equals_a_loop_of_the_river_face(cls, refit_every, window):
    rng = np.random.default_rng(5)
    n = 250
    scores, labels = _long_stream(n, 4)
    weights = rng.choice([0.0, 0.5, 1.0, 2.0], n)
    times = np.cumsum(rng.exponential(1.0, n))
    uses_times = WINDOWS[window].uses_times
    make = lambda: cls(window=copy.deepcopy(WINDOWS[window]), refit_every=refit_every)  # noqa: E731
    proba, llr = make().prequential(scores, labels, weights=weights, times=times if uses_times else None)
    cal = make()
    for i in range(n):
        x = {"score": float(scores[i])}
        assert cal.predict_proba_one(x)[True] == proba[i]
        assert cal.predict_llr_one(x) == llr[i]
        cal.learn_one(x, bool(labels[i]), w=float(weights[i]), t=float(times[i]) if uses_times else None)


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
def test_process_with_interleaved_predictions_equals_the_river_face(cls):
    rng = np.random.default_rng(9)
    n = 300
    scores, labels = _long_stream(n, 6)
    learn = rng.uniform(size=n) < 0.6
    proba, llr = cls(window=50).process(scores, labels, learn)
    cal = cls(window=50)
    for i in range(n):
        x = {"score": float(scores[i])}
        if learn[i]:
            cal.learn_one(x, bool(labels[i]))
        else:
            assert cal.predict_proba_one(x)[True] == proba[i]
            assert cal.predict_llr_one(x) == llr[i]


@pytest.mark.parametrize("cls", [PlattCalibrator, GEVCalibrator])
def test_a_copy_continues_bit_for_bit(cls):
    # the compiled refit's arrays are a cache: a copy (a saved and loaded state) rebuilds them
    # from the map's state and continues exactly as the original
    scores, labels = _long_stream(1200, 8)
    cal = cls()
    cal.prequential(scores[:800], labels[:800])
    twin = copy.deepcopy(cal)
    a = cal.prequential(scores[800:], labels[800:])
    b = twin.prequential(scores[800:], labels[800:])
    assert np.array_equal(a[0], b[0])
    assert np.array_equal(a[1], b[1])


@pytest.mark.parametrize("prior", ["auto", None])
@pytest.mark.parametrize("window", ["unbounded", "count 300", "time 200", "decay 400 events"])
def test_platt_taylor_moments_match_a_full_refit_on_every_event(window, prior):
    # long enough for the Taylor moments to serve most refits: every prediction against a
    # converged full refit, and the moments' own rebuilds counted (a rebuild is a refit by passes)
    windows = {**WINDOWS, "count 300": CountWindow(300), "time 200": TimeWindow(200.0), "decay 400 events": Decay(400.0)}
    rng = np.random.default_rng(21)
    n_warm, n = 2500, 400
    scores, labels = _long_stream(n_warm + n, 12)
    times = np.cumsum(rng.exponential(1.0, n_warm + n)) if windows[window].uses_times else None
    weights = rng.choice([0.5, 1.0, 1.0, 2.0], n_warm + n)
    cal = PlattCalibrator(window=windows[window], prior=prior, buckets=LogitGrid(256))
    cal.prequential(scores[:n_warm], labels[:n_warm], weights=weights[:n_warm], times=None if times is None else times[:n_warm])
    moments_served = 0
    worst = 0.0
    for i in range(n_warm, n_warm + n):
        x = {"score": float(scores[i])}
        p = cal.predict_proba_one(x)[True]
        moments_served += glm_moments(cal)[_g.MOM_UPDATES] > 0
        worst = max(worst, abs(p - float(naive_prior_refit_proba(cal, scores[i : i + 1])[0])))
        cal.learn_one(x, bool(labels[i]), w=float(weights[i]), t=None if times is None else float(times[i]))
    assert worst <= TOL
    if cal.prior_strength == 0.0:
        assert moments_served > n // 2


@st.composite
def moment_cases(draw):
    B = draw(st.integers(3, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = np.sort(rng.normal(0.0, draw(st.floats(0.5, 8.0)), B))
    n = rng.exponential(10.0 ** draw(st.floats(1.0, 4.0)), B) * (rng.uniform(size=B) < 0.8)
    rate = 1 / (1 + np.exp(-(draw(st.floats(0.2, 2.0)) * x + draw(st.floats(-4.0, 1.0)))))
    pos = np.round(n * rate)
    neg = np.round(n) - pos
    moves = rng.integers(0, B, draw(st.integers(1, 200)))
    return x, np.maximum(pos, 0.0), np.maximum(neg, 0.0), moves, rng.uniform(size=moves.size) < 0.3


@settings(max_examples=150, deadline=None)
@given(moment_cases())
def test_a_certified_taylor_solve_is_within_the_tolerance_of_the_optimum(case):
    # moments built about the optimum of one histogram, events added and removed, the solve on
    # the result: where it certifies, its map is within 1e-10 (and so the served map within
    # 1e-9) of a converged full refit at every feature from -30 to 30
    x, pos, neg, moves, positive = case
    if not (pos + neg).sum() > 0.0:
        return
    from streamcal._kernels import histogram as _hk

    B = x.size
    sf, si = _hk.empty_state(B, 0, (_hk.KIND_UNBOUNDED, 0.0, 0.0, 0.0))
    for b in range(B):
        for label, count in ((1.0, pos[b]), (0.0, neg[b])):
            if count > 0.0:
                _hk.histogram_learn_one_inplace(sf, si, b, label, count, 0.0)
    table = _g.logistic_taylor_table()
    mom = np.zeros(_g.MOM_SIZE)

    def hist():
        H = _hk.SF_HEADER
        return sf[H : H + B].copy(), sf[H + B : H + 2 * B].copy()

    beta = fit_glm_on_histogram(x, *hist(), link="logit", l2=1e-6, tol=1e-16, max_iter=2000)
    _g.moments_rebuild(sf, si, x, table, mom, float(beta[0]), float(beta[1]))
    for b, label in zip(moves, positive, strict=True):  # events of weight 1 into an unbounded window
        label = 1.0 if label else 0.0
        _g.glm_learn_one_inplace(
            sf, si, int(b), label, 1.0, 0.0, x, table, mom, np.zeros((5, B)), np.zeros(_g.ANCHOR_SIZE), np.zeros(0)
        )
    assert _g.moments_current(mom, sf)
    got = beta.copy()
    pw = np.zeros(2 * (_g.MOM_K + 1))
    if _g.moments_solve(mom, pw, 1.0, 1e-6, -30.0, 30.0, 1e-10, got):
        ref = fit_glm_on_histogram(x, *hist(), link="logit", l2=1e-6, tol=1e-16, max_iter=2000)
        grid = np.linspace(-30.0, 30.0, 241)
        p_got = 1 / (1 + np.exp(-(got[0] * grid + got[1])))
        p_ref = 1 / (1 + np.exp(-(ref[0] * grid + ref[1])))
        assert float(np.max(np.abs(p_got - p_ref))) <= 2e-10


def test_the_taylor_table_gives_the_logistic_derivatives():
    # c_k = sigma^(k) / k! against finite differences of a high-precision series, and Cauchy's
    # bound |c_k| <= (2 / pi)^k that the certificate uses
    import math

    table = _g.logistic_taylor_table()
    for v in (-6.0, -1.3, 0.0, 0.4, 2.5, 9.0):
        p = 1 / (1 + math.exp(-v))
        c = [sum(table[k, d] * p**d for d in range(table.shape[1])) for k in range(table.shape[0])]
        # the Taylor polynomial reproduces sigma at v + h
        for h in (0.05, -0.1, 0.2):
            approx = sum(c[k] * h**k for k in range(len(c)))
            assert abs(approx - 1 / (1 + math.exp(-(v + h)))) <= (2 * abs(h) / math.pi) ** len(c) / (1 - 2 * abs(h) / math.pi) + 1e-15
        for k, ck in enumerate(c):
            assert abs(ck) <= (2 / math.pi) ** k + 1e-15


def test_a_state_saved_before_the_moments_loads_and_builds_them():
    scores, labels = _long_stream(1500, 13)
    cal = PlattCalibrator()
    cal.prequential(scores[:1000], labels[:1000])
    state = cal.__getstate__()
    del state["_glm_moments"], state["_glm_moments_order"]
    older = PlattCalibrator.__new__(PlattCalibrator)
    older.__setstate__(state)
    assert glm_moments(older)[_g.MOM_VALID] == 0.0
    a, _ = cal.prequential(scores[1000:], labels[1000:])
    b, _ = older.prequential(scores[1000:], labels[1000:])
    assert float(np.max(np.abs(a - b))) <= TOL
    assert glm_moments(older)[_g.MOM_VALID] == 1.0


@pytest.mark.parametrize("window", [None, CountWindow(3000), Decay(2000.0), TimeWindow(3000.0)])
def test_the_running_sums_of_the_certificate_follow_the_histogram(window):
    # the learn kernel keeps the certificate's sums while the window moves (windows long enough
    # for a zero prior strength, where they serve); they agree with a pass over the buckets
    rng = np.random.default_rng(17)
    scores, labels = _long_stream(6000, 14)
    times = np.cumsum(rng.exponential(1.0, scores.size))
    cal = PlattCalibrator(window=window)
    cal.prequential(scores, labels, times=times if window is not None and window.uses_times else None)
    a = glm_arrays(cal)
    sf, _ = cal.window_histogram.live_arrays()
    assert cal.prior_strength == 0.0
    assert a.anchor[_g.ANCHOR_SUMS_VALID] == 1.0
    assert a.anchor[_g.ANCHOR_N_LEARNED] == sf[3]  # the fingerprint: events learned
    _, pos, neg = cal.histogram()
    unit = cal.window_histogram.stored_unit()
    n_all, mean, _, log_s, loglik = _g._prior_sums(np.concatenate((pos, neg)), 0, pos.size, 1.0, a.pc)
    np.testing.assert_allclose(a.anchor[_g.ANCHOR_N] / unit, n_all, rtol=1e-9)
    np.testing.assert_allclose(a.anchor[_g.ANCHOR_SX] / a.anchor[_g.ANCHOR_N], mean, rtol=1e-9)
    np.testing.assert_allclose(a.anchor[_g.ANCHOR_LS] / unit, log_s, rtol=1e-9)
    np.testing.assert_allclose(a.anchor[_g.ANCHOR_LL] / unit, loglik, rtol=1e-9)


@pytest.mark.parametrize("make", [GEVCalibrator, lambda: GEVCalibrator(xi=0.2), lambda: GEVCalibrator(prior=None)])
def test_the_one_call_river_face_finds_the_buckets_of_scores_on_and_beside_the_cuts(make):
    # the river face's one call finds the kept event's bucket itself (an arithmetic guess on the
    # cuts' grid): scores on a cut, one float either side of it, and the range's ends take the
    # buckets ``prequential``'s search takes, so the pairs serve its bits
    cuts = make().window_histogram.layout.cuts
    rng = np.random.default_rng(11)
    base, labels = _long_stream(2000, 12)
    picked = cuts[rng.integers(0, cuts.shape[0], 400)]
    near = np.concatenate([picked, np.nextafter(picked, 0.0), np.nextafter(picked, 1.0), [0.0, 1.0, cuts[0], cuts[-1]]])
    scores = base.copy()
    at = rng.choice(np.arange(300, 2000), near.shape[0], replace=False)
    scores[at] = near
    proba, _ = make().prequential(scores, labels)
    cal = make()
    served = []
    for s, y in zip(scores, labels, strict=True):
        x = {"score": float(s)}
        served.append(cal.predict_proba_one(x)[True])
        cal.learn_one(x, bool(y))
    np.testing.assert_array_equal(np.array(served), proba)
