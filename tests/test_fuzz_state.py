"""Hostile state files: every savable class, mutated field by field, size by size, index by index.

A state file can be edited and its checksums recomputed, so ``load`` must not trust anything in it.
Each mutated file runs in a child process (a batch per child, with a BEGIN/END sentinel per file,
so that a crash fails the test and names the mutation instead of killing pytest). Each file must
either be refused with ``StateFileError``, or load identically (saving the loaded learner gives
the same description and arrays) and then run ``update``/``prequential``/``process``/
``learn_one``/``predict_*`` with finite probabilities in [0, 1] and finite LLRs.
"""

from __future__ import annotations

import copy
import functools
import math
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from state_files import array_of, objects, pack, run_batch, unpack

from streamcal import persist
from streamcal._kernels.glm_refit import MOM_DATA_SIZE, MOM_SIZE_BEFORE_D
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.windows import CountWindow, Decay, TimeWindow


# ---------------------------------------------------------------------------------------- learners
def _stream(n, seed=0, low=0.0, high=1.0):
    rng = np.random.default_rng(seed)
    s = rng.uniform(low, high, size=n)
    y = rng.uniform(size=n) < (s - low) / (high - low)
    w = rng.choice([0.5, 1.0, 2.0], size=n)
    t = np.cumsum(rng.exponential(size=n))
    return s, y, w, t


def _streaming(make, n, *, weights=False, times=False, low=0.0, high=1.0):
    def build():
        cal = make()
        s, y, w, t = _stream(n, low=low, high=high)
        cal.prequential(s, y, weights=w if weights else None, times=t if times else None)
        return cal

    return build


def _pav(**kw):
    from streamcal import PAVCalibrator

    return lambda: PAVCalibrator(**kw)


def _multiclass_pairwise():
    from streamcal import PAVCalibrator
    from streamcal.multiclass import PairwiseCouplingCalibrator

    cal = PairwiseCouplingCalibrator(calibrator=PAVCalibrator(buckets=LogitGrid(6), window=CountWindow(20)))
    rng = np.random.default_rng(1)
    for i in range(60):
        p = rng.dirichlet(np.ones(3))
        cal.learn_one({c: float(v) for c, v in enumerate(p)}, i % 3)
    return cal


def _multiclass_ovr():
    from streamcal import PlattCalibrator
    from streamcal.multiclass import OneVsRestCalibrator

    cal = OneVsRestCalibrator(calibrator=PlattCalibrator(buckets=LogitGrid(6)), classes=("a", "b", "c"))
    rng = np.random.default_rng(2)
    cal.update(rng.dirichlet(np.ones(3), size=60), ["abc"[i % 3] for i in range(60)])
    return cal


def _calibrated_classifier():
    from river import tree

    from streamcal import CalibratedClassifier, PAVCalibrator

    model = CalibratedClassifier(tree.HoeffdingTreeClassifier(grace_period=10), PAVCalibrator(buckets=LogitGrid(6)))
    rng = np.random.default_rng(3)
    for i in range(40):
        x = {"a": float(rng.normal()), "b": float(rng.normal())}
        model.learn_one(x, bool(x["a"] + 0.3 * rng.normal() > 0))
    return model


def _isotonic():
    from streamcal import IsotonicCalibrator

    s, y, w, _ = _stream(25)
    return IsotonicCalibrator(finite_llr=False).fit(s, y, w)


def _gev_regression():
    from streamcal import GEVCanonicalRegression

    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 2))
    return GEVCanonicalRegression(xi=0.25).fit(X, X[:, 0] + rng.normal(size=80) > 1.0)


def _gev_classifier():
    from streamcal import GEVCanonicalClassifier

    model = GEVCanonicalClassifier(xis=(0.0, 0.5), batch_size=8)
    rng = np.random.default_rng(5)
    for i in range(21):
        model.learn_one({"a": float(rng.normal()), "b": float(rng.normal())}, bool(i % 3 == 0))
    return model


def _metric(make):
    def build():
        metric = make()
        rng = np.random.default_rng(6)
        for i in range(12):
            p = float(rng.uniform())
            metric.update(bool(i % 2), p if "Cllr" not in type(metric).__name__ else math.log(p / (1 - p)))
        return metric

    return build


def _monitor(make, keyed=False):
    def build():
        monitor = make()
        rng = np.random.default_rng(7)
        p = rng.uniform(0.05, 0.6, size=300)
        y = rng.uniform(size=300) < np.minimum(1.5 * p, 1.0)
        if keyed:
            monitor.update_many(rng.integers(0, 4, size=300), y, p)
        else:
            monitor.update_many(y, p)
        return monitor

    return build


def _keyed(window, *, times=False, strength="auto"):
    def build():
        from streamcal import KeyedCalibrator, PAVCalibrator

        cal = KeyedCalibrator(PAVCalibrator(buckets=LogitGrid(n_buckets=8), window=window), prior_strength=strength)
        s, y, w, t = _stream(60)
        keys = np.arange(60) % 4
        cal.prequential(keys, s, y, weights=w, times=t if times else None)
        return cal

    return build


def _learners():
    from streamcal import GEVCalibrator, ISplineCalibrator, PlattCalibrator, VennAbersCalibrator
    from streamcal import metrics as m
    from streamcal import monitor as mon

    small = LogitGrid(n_buckets=8)
    return {
        # every window kind, both interpolations, the finite-probability rule, weights and times
        "pav-count": _streaming(_pav(buckets=small, window=CountWindow(12), finite_proba=True), 30, weights=True),
        "pav-time": _streaming(
            _pav(buckets=UniformGrid(6), window=TimeWindow(seconds=6.0), interpolation="step"), 30, times=True
        ),
        "pav-decay-events": _streaming(_pav(buckets=small, window=Decay(half_life=10.0)), 40, weights=True),
        "pav-decay-time": _streaming(_pav(buckets=small, window=Decay(half_life=5.0, by="time")), 30, times=True),
        "pav-unbounded": _streaming(_pav(buckets=small), 30),
        "pav-empty": _pav(buckets=small, window=CountWindow(5)),
        "pav-quantile-warming": _streaming(_pav(buckets=QuantileEdges(6, warmup=50)), 20, weights=True),
        "pav-quantile-done": _streaming(_pav(buckets=QuantileEdges(6, warmup=20), window=CountWindow(15)), 40),
        "pav-edges": _streaming(
            _pav(buckets=Edges((0.0, 0.2, 0.5, 0.9, 1.0), centres=(0.1, 0.3, 0.7, 0.95)), score_key="p"), 30
        ),
        "ispline": _streaming(lambda: ISplineCalibrator(buckets=small, n_knots=1), 40),
        "ispline-count-refit": _streaming(
            lambda: ISplineCalibrator(buckets=small, window=CountWindow(15), refit_every=7, knots=(0.4, 0.6)), 30
        ),
        "ispline-quantile-warming": _streaming(
            lambda: ISplineCalibrator(buckets=QuantileEdges(6, warmup=30), order=2), 10, times=True
        ),
        "gev-auto": _streaming(lambda: GEVCalibrator(buckets=small, xi_grid=(0.0, 0.5)), 30),
        "gev-time-refit": _streaming(
            lambda: GEVCalibrator(buckets=small, window=TimeWindow(8.0), xi=0.25, refit_every=5), 30, times=True
        ),
        "venn-abers-decay": _streaming(
            lambda: VennAbersCalibrator(buckets=small, window=Decay(15.0), merge_rule="mean"), 30, weights=True
        ),
        "platt-decay": _streaming(
            lambda: PlattCalibrator(buckets=UniformGrid(6, -3.0, 3.0), window=Decay(20.0)), 30, low=-3.0, high=3.0
        ),
        "keyed-count": _keyed(CountWindow(6)),
        "keyed-decay-time": _keyed(Decay(half_life=5.0, by="time"), times=True, strength=3.0),
        "keyed-time": _keyed(TimeWindow(seconds=6.0), times=True),
        "pairwise": _multiclass_pairwise,
        "one-vs-rest": _multiclass_ovr,
        "calibrated-classifier": _calibrated_classifier,
        "isotonic": _isotonic,
        "gev-regression": _gev_regression,
        "gev-classifier": _gev_classifier,
        "metric-ece": _metric(lambda: m.ECE(n_bins=4)),
        "metric-calibration-loss": _metric(lambda: m.CalibrationLoss(n_bins=3)),
        "metric-logloss": _metric(m.LogLoss),
        "metric-brier": _metric(m.Brier),
        "metric-rule": _metric(lambda: m.ProperScoringRule(m.BetaWeighting(2.0, 1.0))),
        "metric-cllr": _metric(m.Cllr),
        "metric-mincllr": _metric(m.MinCllr),
        "metric-hosmer-lemeshow": _metric(lambda: m.HosmerLemeshow(n_groups=3)),
        "monitor-isotonic": _monitor(lambda: mon.IsotonicEProcess(buckets=small)),
        "monitor-mean-bias": _monitor(lambda: mon.MeanBiasCS(restart=True)),
        "monitor-keyed": _monitor(lambda: mon.KeyedMonitor(mon.MeanBiasCS()), keyed=True),
    }


LEARNERS = list(_learners())


@functools.cache
def base_file(name: str) -> bytes:
    return persist.to_bytes(_learners()[name](), allow_pickle=False)


# ---------------------------------------------------------------------------------------- mutations
def _hex(x: float) -> dict:
    return {"__float__": struct.pack(">d", x).hex()}


def _json_variants(value) -> list[tuple[str, object]]:
    """Replacements for a JSON attribute value (a scalar, a tagged value, an object)."""
    out = [("None", None), ("a string", "x")]
    if isinstance(value, bool):
        out += [("negated", not value), ("an int", int(value))]
    elif isinstance(value, int):
        out += [("-1", -1), ("+1", value + 1), ("2**62", 2**62), ("a float", float(value) + 0.5)]
    elif isinstance(value, float) or (isinstance(value, dict) and "__float__" in value):
        v = value if isinstance(value, float) else struct.unpack(">d", bytes.fromhex(value["__float__"]))[0]
        out += [("nan", _hex(math.nan)), ("inf", _hex(math.inf)), ("-1.0", -1.0), ("2x+1", 2 * v + 1 if math.isfinite(v) else 0.0), ("an int", 3)]
    elif isinstance(value, dict) and "__tuple__" in value:
        items = value["__tuple__"]
        out += [("tuple shorter", {"__tuple__": items[:-1]}), ("tuple longer", {"__tuple__": [*items, 0.0]})]
        if items:
            out += [("tuple item None", {"__tuple__": [None, *items[1:]]})]
    elif isinstance(value, list):
        out += [("list shorter", value[:-1]), ("list longer", [*value, value[-1] if value else 0.0])]
    elif isinstance(value, dict) and "__dict__" in value:
        pairs = value["__dict__"]
        out += [("dict emptied", {"__dict__": []})]
        if pairs:
            out += [("dict key changed", {"__dict__": [[{"__tuple__": ["zz", "zz"]}, pairs[0][1]], *pairs[1:]]})]
    elif isinstance(value, dict) and "__ref__" in value:
        out += [("ref to the root", {"__ref__": 0})]
    elif isinstance(value, str):
        out += [("other string", value + "x")]
    return out


def _index_values(arr: np.ndarray, i: int) -> list[tuple[str, object]]:
    v = arr.reshape(-1)[i]
    if arr.dtype.kind == "f":
        return [("nan", np.nan), ("-1", -1.0), ("+1", v + 1.0 if v else 0.5)]
    if arr.dtype.kind in "iu":
        big = ("2**40", 2**40) if np.iinfo(arr.dtype).max >= 2**40 else ("max", int(np.iinfo(arr.dtype).max))
        return [("-1", -1), ("+1", v + 1), big]
    if arr.dtype.kind == "b":
        return [("flipped", not v)]
    return []


# the arrays the compiled kernels index (their headers hold sizes, positions and counts)
_KERNEL_STATE = {"_sf", "_si", "_pf", "_pi", "_warm", "_kf", "_ki", "_atoms_b", "_atoms_f", "_atoms_n", "_ring_b",
                 "_ring_f", "_arena", "_src_weight", "_src_fitted", "_src_blocks"}


# arrays whose older layouts were a prefix of today's, of these sizes: a file cut to one of them is a
# file of that older format, which loads as such (the refitted maps' Taylor moments before the score
# prior's floor moments, and before the prior's D block: tests/test_platt_prior_moments.py and
# tests/test_platt_prior_d.py check that such files refit as they should)
_OLDER_LAYOUT_SIZES = {"_glm_moments": {MOM_DATA_SIZE, MOM_SIZE_BEFORE_D}}


def _array_variants(arr: np.ndarray, indices: str, attr: str) -> list[tuple[str, np.ndarray]]:
    """Sizes, dtypes, dimensions, then values index by index: at every index (``indices="all"``),
    at the first 12 and a few more for the kernels' state arrays and at both ends and the middle
    of the others (``"some"``), or none (``"none"``)."""
    flat = arr.reshape(-1)
    n = flat.size
    out = []
    if arr.ndim == 1:
        older = _OLDER_LAYOUT_SIZES.get(attr, set())
        out += [(f"size {k}", flat[:k].copy()) for k in sorted({0, 1, n // 2, n - 1} - older) if 0 <= k < n]
        out.append((f"size {n + 1}", np.concatenate([flat, flat[-1:] if n else np.zeros(1, arr.dtype)])))
    else:
        out.append(("one row fewer", arr[:-1].copy()))
        out.append(("one column fewer", arr[..., :-1].copy()))
        out.append(("flattened", flat.copy()))
    if arr.dtype.kind in "fiu":
        other = np.float32 if arr.dtype == np.float64 else (np.float64 if arr.dtype.kind in "iu" else np.int64)
        out.append((f"as {np.dtype(other)}", arr.astype(other)))
        out.append(("big-endian", arr.astype(arr.dtype.newbyteorder(">"))))
    out.append(("2-d", arr.reshape(1, -1).copy() if arr.ndim == 1 else arr.reshape(-1, 1).copy()))
    if indices == "all":
        at = range(n)
    elif indices == "some" and attr in _KERNEL_STATE:
        at = sorted({*range(min(n, 12)), n // 3, n // 2, (2 * n) // 3, n - 1} - {-1})
    elif indices == "some":
        at = sorted({0, n // 2, n - 1} - {-1})
    else:
        at = []
    at = [i for i in at if i < n]  # an empty array has no index to change
    for i in at:
        for label, value in _index_values(arr, i):
            changed = arr.copy()
            changed.reshape(-1)[i] = value
            out.append((f"[{i}] = {label}", changed))
    return out


# parameters and state that files of older formats lack: a file without one loads as such a file,
# with the older behaviour (``VennAbersCalibrator``'s ``finite_rule``: False; tests/test_venn_abers.py
# checks that such a file predicts as it was saved; ``ISplineCalibrator``'s ``_prior_start``, the score
# prior's warm start: (0, 0), within 1e-9 of the saved calibrator,
# tests/test_ispline_prior_incremental.py; ``GEVCalibrator``'s ``_logit_beta``, the logistic member
# it serves while the score prior holds: refitted at the next prediction,
# tests/test_gev_logistic_prior.py; ``KeyedCalibrator``'s ``_src_base``, the global window's totals for
# the LLR's prior odds: the prior's totals until the next refresh, tests/test_keyed_llr_prior.py; the
# river metrics' per-class counts of the revert check, ``_by_class``, ``_n_pos`` and ``_counts_pos``:
# rebuilt where a part holds one class, else unknown and the part's totals checked until it empties,
# tests/test_metrics_river.py), so removing one is not a damage to refuse
_OLDER_FORMATS_LACK = {"finite_rule", "_prior_start", "_logit_beta", "_src_base", "_by_class", "_n_pos", "_counts_pos"}


def mutations(name: str, *, indices: str):
    """``(label, file bytes)`` for every mutation of every attribute of every streamcal object of
    the learner (river objects inside are the river library's own business)."""
    manifest, arrays, _ = unpack(base_file(name))
    seen = set()
    for path, node in objects(manifest["root"]):
        if not node["__object__"].startswith("streamcal."):
            continue
        if node["__object__"] in seen:  # a second object of a class: mutated like the first
            continue
        seen.add(node["__object__"])
        for part in ("params", "state"):
            for attr in list(node[part]):
                where = f"{name}: {path}.{attr}"
                array = array_of(node, attr) if attr in node[part] else None
                if array is not None and arrays[array].dtype.kind != "U":
                    for label, changed in _array_variants(arrays[array], indices, attr):
                        yield f"{where} {label}", pack(manifest, {**arrays, array: changed})
                else:
                    for label, value in _json_variants(node[part][attr]):
                        saved = node[part][attr]
                        node[part][attr] = value
                        yield f"{where} {label}", pack(manifest, arrays)
                        node[part][attr] = saved
                if attr in _OLDER_FORMATS_LACK:
                    continue  # its removal is a file of an older format (tested where it is defined)
                saved = node[part]
                node[part] = {k: v for k, v in saved.items() if k != attr}
                yield f"{where} removed", pack(manifest, arrays)
                node[part] = saved
        node["state"]["_unexpected"] = 1
        yield f"{name}: {path} with an unexpected attribute", pack(manifest, arrays)
        del node["state"]["_unexpected"]


# how many indices of each array are changed (see ``_array_variants``); wrappers: none, their
# calibrators' arrays are changed in the calibrators' own files
INDICES = {"pav-count": "all", "pav-quantile-warming": "all", "keyed-count": "all"}
INDICES.update(dict.fromkeys(("pairwise", "one-vs-rest", "calibrated-classifier"), "none"))


def _check(results) -> None:
    bad = [f"{label}: {status}" for label, status in results if status not in ("ok", "refused")]
    assert not bad, f"{len(bad)} of {len(results)} mutated files misbehaved:\n" + "\n".join(bad[:40])


# one child process per group, of similar run times; the last group takes every other learner
GROUPS = {
    "pav-count": ["pav-count"],
    "pav-time-decay-events": ["pav-time", "pav-decay-events"],
    "pav-decay-time-unbounded-empty": ["pav-decay-time", "pav-unbounded", "pav-empty"],
    "pav-quantile": ["pav-quantile-warming", "pav-quantile-done"],
    "pav-edges": ["pav-edges"],
    "ispline": ["ispline"],
    "ispline-count-refit": ["ispline-count-refit"],
    "ispline-quantile-gev-auto": ["ispline-quantile-warming", "gev-auto"],
    "gev-time-platt": ["gev-time-refit", "platt-decay"],
    "wrappers": ["pairwise", "one-vs-rest", "calibrated-classifier"],
    "keyed": ["keyed-count", "keyed-decay-time", "keyed-time"],
}
GROUPS["batch-metrics"] = [n for n in LEARNERS if not any(n in g for g in GROUPS.values())]


@pytest.mark.slow
@pytest.mark.parametrize("names", list(GROUPS.values()), ids=list(GROUPS))
def test_mutated_files_load_identically_or_are_refused(names, tmp_path):
    batch = []
    for name in names:
        batch.append((f"{name}: unmutated", base_file(name), False))
        batch += [(label, data, False) for label, data in mutations(name, indices=INDICES.get(name, "some"))]
    results = run_batch(batch, tmp_path)
    _check(results)
    status = dict(results)
    for name in names:  # the unmutated files load and run; the mutations reach the checks
        assert status[f"{name}: unmutated"] == "ok"
    assert sum(s == "refused" for _, s in results) > len(results) // 3


# ---------------------------------------------------------------------------------------- random
_SPECIAL = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-300, 1e300, math.inf, -math.inf, math.nan, 2.0**53])
_VALUES = st.one_of(_SPECIAL, st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**63), 2**63 - 1))


@st.composite
def _random_mutation(draw, names):
    """A learner, and one to three (array, index, value) changes to its arrays."""
    name = draw(st.sampled_from(names))
    _, arrays, _ = unpack(base_file(name))
    names_with_values = sorted(a for a, v in arrays.items() if v.size and v.dtype.kind in "fiu")
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        array = draw(st.sampled_from(names_with_values))
        index = draw(st.integers(0, arrays[array].size - 1))
        changes.append((array, index, draw(_VALUES)))
    return name, changes


_STREAMING = [n for n in LEARNERS if n.split("-")[0] in ("pav", "ispline", "gev", "platt", "keyed")]


@pytest.mark.slow
@settings(max_examples=1, phases=[Phase.generate], suppress_health_check=list(HealthCheck), deadline=None)
@given(st.lists(_random_mutation(_STREAMING), min_size=300, max_size=300))
def test_random_array_mutations_load_identically_or_are_refused(tmp_path_factory, draws):
    batch = []
    for k, (name, changes) in enumerate(draws):
        manifest, arrays, _ = unpack(base_file(name))
        arrays = copy.copy(arrays)
        for array, index, value in changes:
            changed = arrays[array].copy()
            flat = changed.reshape(-1)
            try:
                flat[index] = value
            except (OverflowError, ValueError):  # an int too big for the dtype, NaN into an int
                continue
            arrays[array] = changed
        batch.append((f"random {k}: {name} {changes}", pack(manifest, arrays), False))
    _check(run_batch(batch, tmp_path_factory.mktemp("random")))
