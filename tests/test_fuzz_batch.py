"""Fuzz of the batch functions, the metrics, bucket lookup and merge.

Every generated input must either give well-formed output or raise a ValueError / TypeError
naming the argument, leaving every object passed in (metric, calibrator) byte-identical
(:func:`fuzz_cases.call`).
"""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest
from fuzz_cases import (
    FUZZ_SCALE,
    arrays,
    assert_finite,
    assert_probabilities,
    bad_labels,
    bad_number,
    bad_numbers,
    call,
    labels,
    non_real,
    scalars,
    snapshot,
    weights,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import (
    GEVCanonicalClassifier,
    IsotonicCalibrator,
    ISplineCalibrator,
    PAVCalibrator,
    gev,
    merge,
    pairwise_couple,
)
from streamcal import metrics as m
from streamcal.buckets import Edges, QuantileEdges, UniformGrid, bucket_index
from streamcal.isotonic import pav, pav_binary, pav_llr
from streamcal.multiclass import ConvergenceWarning
from streamcal.windows import CountWindow, Decay, TimeWindow

FUZZ = settings(max_examples=40 * FUZZ_SCALE, deadline=None, derandomize=True)
FEW = settings(max_examples=20 * FUZZ_SCALE, deadline=None, derandomize=True)

SCORES = arrays(scalars())
PROBAS = arrays(scalars(probability_heavy=True))
LABELS = arrays(labels())
WEIGHTS = st.one_of(st.none(), arrays(weights()))


# --- isotonic ------------------------------------------------------------------------------------


@FUZZ
@given(y=SCORES, w=WEIGHTS, increasing=st.one_of(st.booleans(), scalars()))
def test_pav(y, w, increasing):
    out, error = call((), lambda: pav(y, w, increasing=increasing), ("y", "w", "increasing"))
    if bad_numbers(y) or (w is not None and bad_numbers(w, low=0.0)) or not isinstance(increasing, (bool, np.bool_)):
        assert error is not None
    if error is None:
        assert_finite(out)
        steps = np.diff(out)
        assert (steps >= -1e-12 * (1 + np.abs(out[1:])) if increasing else steps <= 1e-12 * (1 + np.abs(out[1:]))).all()


@FUZZ
@given(s=SCORES, y=LABELS, w=WEIGHTS, pw=scalars(), nw=scalars())
def test_pav_binary(s, y, w, pw, nw):
    out, error = call(
        (), lambda: pav_binary(s, y, w, positive_weight=pw, negative_weight=nw), ("scores", "labels", "weights", "positive_weight", "negative_weight")
    )
    if bad_numbers(s) or bad_labels(y) or (w is not None and bad_numbers(w, low=0.0)):
        assert error is not None
    if error is None:
        assert_probabilities(out)


@FUZZ
@given(s=SCORES, y=LABELS, w=WEIGHTS, finite=st.one_of(st.booleans(), scalars()))
def test_pav_llr(s, y, w, finite):
    out, error = call((), lambda: pav_llr(s, y, w, finite=finite), ("scores", "labels", "weights", "finite"))
    if bad_numbers(s) or bad_labels(y) or (w is not None and bad_numbers(w, low=0.0)):
        assert error is not None
    if error is None:
        out = np.asarray(out)
        assert not np.isnan(out).any()
        if finite:
            assert_finite(out)


_FITTED = pickle.dumps(IsotonicCalibrator().fit([0.1, 0.4, 0.5, 0.9], [0, 1, 0, 1]))


@FUZZ
@given(s=SCORES, y=LABELS, w=WEIGHTS, new=SCORES)
def test_isotonic_calibrator(s, y, w, new):
    cal = pickle.loads(_FITTED)
    _, ferror = call(cal, lambda: cal.fit(s, y, sample_weight=w), ("scores", "labels", "sample_weight"))
    if bad_numbers(s) or bad_labels(y) or (w is not None and bad_numbers(w, low=0.0)):
        assert ferror is not None
    p, error = call(cal, lambda: cal.predict_proba(new), ("scores",))
    if bad_numbers(new):
        assert error is not None
    if error is None:
        assert_probabilities(p)
    llr, error = call(cal, lambda: cal.predict_llr(new), ("scores",))
    if error is None:
        assert_finite(llr)


# --- pairwise coupling -----------------------------------------------------------------------------


@st.composite
def pairwise_matrices(draw):
    """Mostly consistent r matrices (r_ji = 1 - r_ij), some broken in one entry, some malformed."""
    kind = draw(st.sampled_from(["good", "good", "broken", "malformed"]))
    if kind == "malformed":
        return draw(st.one_of(arrays(scalars()), st.sampled_from([np.zeros((2, 3)), np.zeros((0, 0)), np.zeros((1, 2, 2, 2)), [[0.5, "a"], ["b", 0.5]], "r", None])))
    k = draw(st.integers(1, 5))
    stacked = draw(st.booleans())
    m = draw(st.integers(0, 3)) if stacked else 1
    values = draw(st.lists(st.floats(0.0, 1.0), min_size=m * k * k, max_size=m * k * k))
    upper = np.triu(np.asarray(values, dtype=float).reshape(m, k, k), 1)
    r = upper + np.tril(1.0 - np.swapaxes(upper, 1, 2), -1)  # r[j, i] = 1 - r[i, j], diagonal 0
    if kind == "broken" and k > 1 and m > 0:
        r = r.astype(object)
        r[0, 0, 1] = draw(scalars())  # any value, even a non-number
    return r if stacked else r[0]


@FUZZ
@given(
    r=pairwise_matrices(),
    n=st.one_of(st.none(), arrays(weights()), st.builds(lambda k, v: np.full((k, k), v), st.integers(1, 5), st.floats(0.0, 5.0))),
    method=st.one_of(st.sampled_from(["ht", "wlw"]), scalars()),
    tol=st.one_of(st.just(1e-10), scalars()),
    # a valid max_iter is run in full when tol is never met (tol=0): keep the valid ones small
    max_iter=st.one_of(st.integers(0, 300), st.sampled_from([-1, 2**64, 10**400, 1.5, "10", None, True, np.int64(50), np.uint64(2**63)])),
)
def test_pairwise_couple(r, n, method, tol, max_iter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        p, error = call((), lambda: pairwise_couple(r, n, method, tol=tol, max_iter=max_iter), ("r", "n", "method", "tol", "max_iter"))
    if non_real(r) or (n is not None and non_real(n)):
        assert error is not None
    if error is None:
        p = np.asarray(p)
        assert_probabilities(p)
        if p.size:
            assert np.allclose(p.sum(axis=-1), 1.0)


# --- metrics: array functions ----------------------------------------------------------------------

_PROBA_FUNCTIONS = {
    "brier_score": lambda y, p, w, x: m.brier_score(y, p, w),
    "log_loss": lambda y, p, w, x: m.log_loss(y, p, w, eps=x),
    "ece": lambda y, p, w, x: m.ece(y, p, n_bins=x, weights=w),
    "ece_quantile": lambda y, p, w, x: m.ece(y, p, n_bins=x, strategy="quantile", weights=w),
    "calibration_loss": lambda y, p, w, x: m.calibration_loss(y, p, w, n_bins=x),
    "hosmer_lemeshow": lambda y, p, w, x: m.hosmer_lemeshow(y, p, x, weights=w),
    "hosmer_lemeshow_uniform": lambda y, p, w, x: m.hosmer_lemeshow(y, p, x, strategy="uniform", weights=w),
    "beta_scoring_rule": lambda y, p, w, x: m.beta_scoring_rule(y, p, x, 1.0, w),
    "threshold_cost": lambda y, p, w, x: m.threshold_cost(y, p, x, w),
    "proper_scoring_rule": lambda y, p, w, x: m.proper_scoring_rule(y, p, m.BetaWeighting(0.5, 0.5), w, normalize=x),
}
_NAMES = ("labels", "proba", "weights", "eps", "n_bins", "n_groups", "a", "threshold", "normalize")


@pytest.mark.parametrize("name", sorted(_PROBA_FUNCTIONS))
@FUZZ
@given(y=LABELS, p=PROBAS, w=WEIGHTS, x=st.one_of(st.sampled_from([None, 10, 0.25, True]), scalars()))
def test_metric_functions_on_probabilities(name, y, p, w, x):
    out, error = call((), lambda: _PROBA_FUNCTIONS[name](y, p, w, x), _NAMES)
    if bad_labels(y) or bad_numbers(p, low=0.0, high=1.0) or (w is not None and bad_numbers(w, low=0.0)):
        assert error is not None
    if error is None:
        values = out if isinstance(out, tuple) else (out,)
        assert all(isinstance(v, float) for v in values)
        assert not math.isnan(values[0])
        assert values[0] >= 0.0


@pytest.mark.parametrize("fn", [m.cllr, m.min_cllr], ids=lambda f: f.__name__)
@FUZZ
@given(y=LABELS, s=SCORES, w=WEIGHTS)
def test_metric_functions_on_scores(fn, y, s, w):
    out, error = call((), lambda: fn(y, s, w), ("labels", "llr", "scores", "weights"))
    if bad_labels(y) or bad_numbers(s, allow_inf=True) or (w is not None and bad_numbers(w, low=0.0)):
        assert error is not None
    if error is None:
        assert isinstance(out, float)
        assert out >= 0.0  # may be inf (a confident wrong LLR), never NaN


@FUZZ
@given(p=PROBAS, weighting=st.one_of(st.sampled_from([m.BetaWeighting(1.0, 1.0), m.ThresholdWeighting(0.3), "log", None, 1.0]), st.just(lambda c: 1.0)))
def test_partial_losses(p, weighting):
    out, error = call((), lambda: m.partial_losses(p, weighting), ("proba", "weighting"))
    if bad_numbers(p, low=0.0, high=1.0):
        assert error is not None
    if error is None:
        target, nontarget = out
        assert not np.isnan(target).any()
        assert not np.isnan(nontarget).any()


# --- metrics: river metrics ------------------------------------------------------------------------

_RIVER_METRICS = {
    "Brier": m.Brier,
    "LogLoss": m.LogLoss,
    "Cllr": m.Cllr,
    "Cllr-prior": lambda: m.Cllr(prior=0.3),
    "MinCllr": m.MinCllr,
    "ECE": m.ECE,
    "CalibrationLoss": m.CalibrationLoss,
    "HosmerLemeshow": m.HosmerLemeshow,
    "HosmerLemeshow-uniform": lambda: m.HosmerLemeshow(strategy="uniform"),
    "ProperScoringRule": lambda: m.ProperScoringRule(m.BetaWeighting(1.0, 1.0)),
}

_Y_PRED = st.one_of(
    scalars(probability_heavy=True),
    st.builds(lambda p: {False: 1.0 - p, True: p}, st.floats(0.0, 1.0)),
    st.sampled_from([{}, {False: 0.4}, {True: 0.5, "other": 0.5}, {True: math.nan}, {True: "0.5"}, {1: 0.25, 0: 0.75}]),
)
_EVENTS = st.lists(st.tuples(st.sampled_from(["update", "revert"]), labels(), _Y_PRED, weights()), min_size=1, max_size=8)


@pytest.mark.parametrize("name", sorted(_RIVER_METRICS))
@FUZZ
@given(events=_EVENTS)
def test_river_metrics(name, events):
    metric = _RIVER_METRICS[name]()
    for method, y, p, w in events:
        _, error = call(metric, lambda: getattr(metric, method)(y, p, w=w), ("y_true", "y_pred", "w"))
        positive = p.get(True) if isinstance(p, dict) and set(p) <= {True, False} else (None if isinstance(p, dict) else p)
        limits = {"allow_inf": True} if name.startswith(("Cllr", "MinCllr")) else {"low": 0.0, "high": 1.0}
        if bad_labels([y]) or bad_number(w, low=0.0) or positive is None or bad_number(positive, **limits):
            assert error is not None
        value = metric.get()
        assert isinstance(value, float)
        assert math.isnan(value) or value >= 0.0


@pytest.mark.parametrize("name", sorted(_RIVER_METRICS))
def test_reverting_what_was_never_added_is_refused(name):
    """The issue's case: Brier().revert on an empty metric drove its count negative, and the
    next update reset the sums, losing that update."""
    metric = _RIVER_METRICS[name]()
    _, error = call(metric, lambda: metric.revert(True, 0.5), ("y_true", "y_pred"))
    assert error is not None
    metric.update(True, 0.5)
    metric.update(False, 0.25)
    _, error = call(metric, lambda: metric.revert(True, 0.5, w=3.0), ("w", "y_pred"))
    assert error is not None
    reference = _RIVER_METRICS[name]()
    reference.update(True, 0.5)
    reference.update(False, 0.25)
    assert snapshot(metric) == snapshot(reference)


def test_proba_dicts_must_hold_the_positive_class():
    for bad in ({}, {False: 0.4}, {True: 0.5, 2: 0.5}):
        with pytest.raises(ValueError, match="`y_pred`"):
            m.Brier().update(True, bad)
    metric = m.Brier()
    metric.update(True, {0: 0.25, 1: 0.75})  # 1 == True: river's integer-keyed dicts work
    assert metric.get() == 0.0625


# --- bucket lookup -------------------------------------------------------------------------------


@FUZZ
@given(edges=st.one_of(arrays(st.floats(-10.0, 10.0), min_size=2), arrays(scalars())), s=SCORES)
def test_bucket_index(edges, s):
    out, error = call((), lambda: bucket_index(edges, s), ("edges", "scores"))
    if bad_numbers(edges) or bad_numbers(s, allow_inf=True):
        assert error is not None
    if error is None:
        e = np.asarray(edges, dtype=float)
        assert out.dtype == np.intp
        assert ((out >= 0) & (out <= e.size - 2)).all()
        expected = np.searchsorted(e[1:-1], np.asarray(s, dtype=float).reshape(-1), side="right")
        assert out.tolist() == expected.tolist()


def test_bucket_index_rejects_nan_and_unsorted_edges():
    with pytest.raises(ValueError, match="`edges` must be strictly increasing"):
        bucket_index([0.0, 2.0, 1.0], [0.5])
    with pytest.raises(ValueError, match="`edges` must be finite"):
        bucket_index([0.0, math.nan, 1.0], [0.5])
    with pytest.raises(ValueError, match="`scores` must not be NaN"):
        bucket_index([0.0, 1.0, 2.0], [0.5, math.nan])
    assert bucket_index([0.0, 1.0, 2.0], [-math.inf, math.inf]).tolist() == [0, 1]


# --- merge ----------------------------------------------------------------------------------------


def _train(cal, n, seed=0, times=False):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.05, 0.95, n)
    cal.update(s, rng.uniform(size=n) < s, times=np.arange(n, dtype=float) + 100 * seed if times else None)
    return cal


def _gev(seed):
    model = GEVCanonicalClassifier(batch_size=3, xis=(0.0,))
    rng = np.random.default_rng(seed)
    for _ in range(7):
        model.learn_one({"a": float(rng.normal())}, bool(rng.random() < 0.4))
    return model


_POOL = {
    "pav": lambda seed: _train(PAVCalibrator(), 20, seed),
    "pav-count": lambda seed: _train(PAVCalibrator(window=CountWindow(15)), 20, seed),
    "pav-count-other-n": lambda seed: _train(PAVCalibrator(window=CountWindow(16)), 20, seed),
    "pav-decay": lambda seed: _train(PAVCalibrator(window=Decay(5.0)), 20, seed),
    "pav-time": lambda seed: _train(PAVCalibrator(window=TimeWindow(30.0)), 20, seed, times=True),
    "pav-uniform": lambda seed: _train(PAVCalibrator(buckets=UniformGrid(8)), 20, seed),
    "pav-edges": lambda seed: _train(PAVCalibrator(buckets=Edges((0.0, 0.5, 1.0))), 20, seed),
    "pav-step": lambda seed: _train(PAVCalibrator(interpolation="step"), 20, seed),
    "pav-quantile-warming": lambda seed: _train(PAVCalibrator(buckets=QuantileEdges(4, warmup=10)), 3 + seed, seed),
    "pav-quantile-warm": lambda seed: _train(PAVCalibrator(buckets=QuantileEdges(4, warmup=10)), 20, seed),
    "ispline": lambda seed: _train(ISplineCalibrator(), 20, seed),
    "gev-classifier": _gev,
    "not-a-calibrator": lambda seed: {"pav": seed},
    "none": lambda seed: None,
}


@FUZZ
@given(names=st.lists(st.sampled_from(sorted(_POOL)), min_size=0, max_size=3), seeds=st.lists(st.integers(0, 2), min_size=3, max_size=3))
def test_merge_raises_clearly_and_mutates_nothing(names, seeds):
    items = [_POOL[name](seed) for name, seed in zip(names, seeds, strict=False)]
    inputs = tuple(items)
    merged, error = call(inputs, lambda: merge(items), ("calibrators",))
    for item, before in zip(items, [snapshot(i) for i in inputs], strict=True):
        assert snapshot(item) == before  # neither a rejected nor an accepted merge modifies its inputs
    if error is None:
        assert all(merged is not item for item in items)
        if isinstance(merged, GEVCanonicalClassifier):
            assert_probabilities([merged.predict_proba_one({"a": 0.3})[True]])
        else:
            assert_probabilities(merged.predict_proba([0.1, 0.5, 0.9]))
            assert merged.n_learned == sum(item.n_learned for item in items)


def test_merge_of_mismatched_calibrators_names_the_difference():
    a = _POOL["pav-count"](0)
    b = _POOL["pav-count-other-n"](1)
    with pytest.raises(ValueError, match="`calibrators`"):
        merge([a, b])
    with pytest.raises(TypeError, match="`calibrators`"):
        merge([a, _POOL["ispline"](0)])
    with pytest.raises(ValueError, match="`calibrators`"):
        merge([_POOL["pav-quantile-warm"](0), _POOL["pav-quantile-warm"](1)])


# --- the GEV family --------------------------------------------------------------------------------

_XI = st.one_of(st.floats(-1.0, 1.5), scalars())


@FUZZ
@given(v=st.one_of(SCORES, scalars()), y=st.one_of(LABELS, labels()), xi=_XI)
def test_gev_family(v, y, xi):
    names = ("v", "eta", "y", "xi")
    p, error = call((), lambda: gev.gev_cdf(v, xi), names)
    if bad_numbers(v, allow_inf=True) or bad_number(xi):
        assert error is not None
    if error is None:
        assert_probabilities(p)
    d, error = call((), lambda: gev.gev_pdf(v, xi), names)
    if error is None:
        assert not np.isnan(d).any()
        assert (np.asarray(d) >= 0.0).all()
    c, error = call((), lambda: gev.gev_clip(v, xi), names)
    if error is None:
        assert not np.isnan(c).any()
    eta, error = call((), lambda: gev.gev_link(v, xi), names)
    if bad_numbers(v, low=0.0, high=1.0):
        assert error is not None
    if error is None:
        assert not np.isnan(eta).any()
    for loss in (gev.gev_canonical_loss, gev.gev_log_loss):
        out, error = call((), lambda: loss(y, v, xi), names)
        if bad_labels(y):
            assert error is not None
        if error is None:
            assert not np.isnan(out).any()
            if loss is gev.gev_log_loss:  # the canonical loss is defined up to a constant
                assert (np.asarray(out) >= 0.0).all()


@pytest.mark.parametrize(("v", "xi"), [(math.inf, 1.0), (-math.inf, -1e6), (0.5, 1e20)])
def test_gev_canonical_loss_at_the_extremes(v, xi):
    assert not np.isnan(gev.gev_canonical_loss([1, 0], [v, v], xi)).any()


def test_gev_cdf_where_xi_v_overflows():
    """1 + xi v beyond float64 (v = ±inf, or huge v and xi) is beyond an end of the support."""
    v = np.array([math.inf, 1e308, -1e308, -math.inf])
    assert gev.gev_cdf(v, 2.0).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert gev.gev_cdf(v, -2.0).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert gev.gev_cdf(2.0, 1e308) == pytest.approx(gev.gev_cdf(2.0, 1e300), rel=1e-12)  # -> exp(-1)
    assert not np.isnan(gev.gev_pdf(v, 2.0)).any()
