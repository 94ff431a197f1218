"""Durable state: portable round trips, save -> load -> continue == never stopping, damaged files."""

from __future__ import annotations

import collections
import io
import json
import math
import os
import pickle
import random
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from river import datasets, linear_model, naive_bayes, preprocessing, tree
from test_compose import HistogramPAV

from streamcal import persist
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.compose import CalibratedClassifier
from streamcal.isotonic import IsotonicCalibrator, PAVCalibrator
from streamcal.metrics import ECE, LogLoss
from streamcal.windows import CountWindow, Decay, TimeWindow

PHISHING = list(datasets.Phishing())


def members(data: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def rezip(files: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def same(a, b) -> bool:
    """Equal values of equal types, floats compared bit for bit (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple, collections.deque)):
        return len(a) == len(b) and all(same(u, v) for u, v in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


# --------------------------------------------------------------------------------------- values
VALUES = {
    "scalars": [None, True, False, 0, -(2**70), 1.5, -0.0, math.nan, math.inf, -math.inf, 5e-324, "é\n"],
    "arrays": [np.arange(5, dtype=np.intp), np.array([[1.0, np.nan], [-np.inf, 2.0]]), np.zeros(0, np.float32)],
    "numpy scalars": [np.float64(0.1), np.int32(7), np.bool_(True)],
    "containers": {
        "t": (1, (2.0, "x")),
        "d": {1: "a", (2, 3): [4], False: None, "__x__": 1},
        "od": collections.OrderedDict([("b", 1), ("a", 2)]),
        "counter": collections.Counter({"a": 3}),
        "dd": collections.defaultdict(float, {"w": 0.25}),
        "set": {1, 2, 3},
        "fs": frozenset({"a"}),
        "deque": collections.deque([1.0, 2.0], maxlen=3),
    },
}


@pytest.mark.parametrize("name", list(VALUES))
def test_portable_values_round_trip_exactly(name):
    value = VALUES[name]
    data = persist.to_bytes(value, allow_pickle=False)
    back = persist.from_bytes(data)
    assert same(back, value)
    assert same(persist.from_bytes(persist.to_bytes(back)), value)


def test_random_states_round_trip():
    r = random.Random(3)
    g = np.random.default_rng(4)
    r.random(), g.normal()
    r2, g2 = persist.from_bytes(persist.to_bytes([r, g], allow_pickle=False))
    assert [r.random() for _ in range(5)] == [r2.random() for _ in range(5)]
    assert same(g.normal(size=5), g2.normal(size=5))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=20))
def test_floats_are_bit_exact(xs):
    back = persist.from_bytes(persist.to_bytes({"xs": xs, "arr": np.array(xs, dtype=np.float64)}))
    assert same(back["xs"], xs)
    assert same(back["arr"], np.array(xs, dtype=np.float64))


def test_shared_objects_and_containers_are_restored_once():
    shared = [1.0]
    ece = ECE()
    value = {"a": shared, "b": shared, "m1": ece, "m2": ece}
    back = persist.from_bytes(persist.to_bytes(value, allow_pickle=False))
    assert back["a"] is back["b"]
    assert back["m1"] is back["m2"]


def test_same_state_gives_the_same_bytes():
    cal = IsotonicCalibrator().fit([0.1, 0.5, 0.7], [0, 1, 1])
    assert persist.to_bytes(cal) == persist.to_bytes(cal)


# --------------------------------------------------------------------------------------- learners
def test_streamcal_learner_is_stored_without_pickle(tmp_path):
    metric = ECE(n_bins=5)
    for x, y in PHISHING[:100]:
        metric.update(y, {True: x["is_popular"], False: 1 - x["is_popular"]})
    path = persist.save(metric, tmp_path / "ece.zip", allow_pickle=False)
    back = persist.load(path)
    assert type(back) is ECE
    assert back.get() == metric.get()
    assert pickle.loads(pickle.dumps(back)).get() == metric.get()


def test_batch_calibrator_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    s = rng.uniform(size=500)
    cal = IsotonicCalibrator(interpolation="step").fit(s, rng.uniform(size=500) < s)
    back = persist.load(persist.save(cal, tmp_path / "iso.zip", allow_pickle=False))
    grid = np.linspace(-0.1, 1.1, 101)
    assert same(back.predict_proba(grid), cal.predict_proba(grid))
    assert same(back.predict_llr(grid), cal.predict_llr(grid))


STREAMING = {
    "unbounded": lambda: PAVCalibrator(),
    "count": lambda: PAVCalibrator(window=CountWindow(300), interpolation="step"),
    "time": lambda: PAVCalibrator(buckets=UniformGrid(n_buckets=40), window=TimeWindow(seconds=50.0)),
    "decay-events": lambda: PAVCalibrator(buckets=LogitGrid(n_buckets=64), window=Decay(half_life=200.0)),
    "decay-time": lambda: PAVCalibrator(window=Decay(half_life=30.0, by="time"), llr_pseudo_count=0.5),
    "quantile": lambda: PAVCalibrator(buckets=QuantileEdges(n_buckets=16, warmup=500)),
    "edges": lambda: PAVCalibrator(buckets=Edges([0.0, 0.2, 0.5, 0.9, 1.0])),
}


@pytest.mark.parametrize("kind", list(STREAMING))
def test_streaming_calibrator_checkpoint_resume_is_bit_identical(tmp_path, kind):
    rng = np.random.default_rng(7)
    n = 3000
    scores = rng.uniform(size=n)
    labels = rng.uniform(size=n) < scores**2
    weights = rng.choice([0.5, 1.0, 2.0], size=n)
    times = np.cumsum(rng.exponential(size=n))
    a, b = STREAMING[kind](), STREAMING[kind]()
    path = tmp_path / "pav.zip"
    outs_a, outs_b = [], []
    for chunk in np.array_split(np.arange(n), 6):  # b is checkpointed and restored between chunks
        args = (scores[chunk], labels[chunk])
        kw = {"weights": weights[chunk], "times": times[chunk]}
        outs_a.append(a.prequential(*args, **kw))
        outs_b.append(b.prequential(*args, **kw))
        persist.save(b, path, allow_pickle=False)
        b = persist.load(path)
    for (pa, la), (pb, lb) in zip(outs_a, outs_b):
        assert same(pa, pb)
        assert same(la, lb)
    x = {"score": 0.3}
    assert a.predict_proba_one(x) == b.predict_proba_one(x)
    assert a.predict_llr_one(x) == b.predict_llr_one(x)
    assert persist.to_bytes(a) == persist.to_bytes(b)


@pytest.mark.parametrize(
    "make",
    [
        lambda: CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator()),
        lambda: CalibratedClassifier(naive_bayes.GaussianNB(), HistogramPAV()),
        lambda: preprocessing.StandardScaler() | CalibratedClassifier(tree.HoeffdingTreeClassifier(), HistogramPAV()),
    ],
    ids=["logreg", "gaussiannb", "pipeline-tree"],
)
def test_save_load_continue_equals_never_stopping(tmp_path, make):
    metric_a, metric_b = LogLoss(), LogLoss()
    a = make()
    b = make()
    path = tmp_path / "checkpoint.zip"
    for k, (x, y) in enumerate(PHISHING[:600]):
        pa, pb = a.predict_proba_one(x), b.predict_proba_one(x)
        assert pa == pb
        metric_a.update(y, pa)
        metric_b.update(y, pb)
        a.learn_one(x, y)
        b.learn_one(x, y)
        if k % 150 == 149:  # b checkpoints and is restored from the file, a never stops
            b.save(path) if hasattr(b, "save") else persist.save(b, path)
            b = persist.load(path, allow_pickle=True)
            persist.save(metric_b, path)
            metric_b = persist.load(path)
    assert metric_a.get() == metric_b.get()
    assert pickle.dumps(a.predict_proba_one(x)) == pickle.dumps(b.predict_proba_one(x))


def test_calibrated_classifier_load_checks_the_class(tmp_path):
    model = CalibratedClassifier(linear_model.LogisticRegression(), HistogramPAV())
    path = model.save(tmp_path / "m.zip")
    assert type(CalibratedClassifier.load(path, allow_pickle=True)) is CalibratedClassifier
    persist.save(ECE(), path)
    with pytest.raises(TypeError, match="holds a ECE, not a CalibratedClassifier"):
        CalibratedClassifier.load(path)


# --------------------------------------------------------------------------------------- pickles
def test_foreign_models_need_allow_pickle_to_load(tmp_path):
    model = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator())
    for x, y in PHISHING[:50]:
        model.learn_one(x, y)
    path = model.save(tmp_path / "m.zip")
    manifest = json.loads(members(path.read_bytes())["streamcal.json"])
    # only the river model is pickled; the calibrator stays portable
    assert [m["where"] for m in manifest["pickles"].values()] == ["learner.classifier"]
    with pytest.raises(persist.StatePickleError, match=r"`learner.classifier` \(river.linear_model"):
        persist.load(path)
    back = CalibratedClassifier.load(path, allow_pickle=True)
    assert back.predict_proba_one(x) == model.predict_proba_one(x)


def test_save_without_pickle_names_the_value():
    with pytest.raises(TypeError, match=r"`learner\.classifier` .* allow_pickle=True"):
        persist.to_bytes(CalibratedClassifier(linear_model.LogisticRegression(), HistogramPAV()), allow_pickle=False)
    with pytest.raises(TypeError, match=r"`learner\['f'\]`"):
        persist.to_bytes({"f": len}, allow_pickle=False)


def test_only_numpy_bit_generators_are_created():
    files = members(persist.to_bytes({"g": np.random.default_rng(1)}, allow_pickle=False))
    manifest = json.loads(files["streamcal.json"])
    manifest["root"]["g"]["__np_generator__"] = "seed"  # would call np.random.seed()
    files["streamcal.json"] = json.dumps(manifest).encode()
    with pytest.raises(persist.StateFileError, match="unknown numpy bit generator 'seed'"):
        persist.from_bytes(rezip(files))


def test_untrusted_class_names_are_refused():
    data = persist.to_bytes(ECE())
    files = members(data)
    manifest = json.loads(files["streamcal.json"])
    manifest["root"]["__object__"] = "os:system"
    files["streamcal.json"] = json.dumps(manifest).encode()
    with pytest.raises(persist.StateFileError, match="outside streamcal and river"):
        persist.from_bytes(rezip(files))


# --------------------------------------------------------------------------------------- damage
@pytest.fixture(scope="module")
def checkpoint():
    cal = IsotonicCalibrator().fit(np.linspace(0, 1, 50), np.arange(50) % 3 == 0)
    return cal, persist.to_bytes(cal)


def test_truncated_files_are_rejected(checkpoint):
    _, data = checkpoint
    for n in range(0, len(data), max(1, len(data) // 97)):
        with pytest.raises(persist.StateFileError):
            persist.from_bytes(data[:n])


def test_damaged_bytes_are_rejected_or_harmless(checkpoint):
    cal, data = checkpoint
    grid = np.linspace(0, 1, 33)
    rejected = 0
    for i in range(len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0x5A
        try:
            back = persist.from_bytes(bytes(damaged))
        except persist.StateFileError:
            rejected += 1
            continue
        # the flip hit a byte that carries no content (a zip header field): the learner is intact
        assert same(back.predict_proba(grid), cal.predict_proba(grid))
        assert same(back.__getstate__(), cal.__getstate__())
    assert rejected > 0.8 * len(data)


def test_future_version_is_rejected(checkpoint):
    _, data = checkpoint
    files = members(data)
    manifest = json.loads(files["streamcal.json"])
    manifest["format_version"] = persist.FORMAT_VERSION + 1
    files["streamcal.json"] = json.dumps(manifest).encode()
    newer, ours = persist.FORMAT_VERSION + 1, persist.FORMAT_VERSION
    with pytest.raises(persist.StateVersionError, match=rf"format version {newer} .* reads versions up to {ours}"):
        persist.from_bytes(rezip(files))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "not a streamcal state file"),
        (b"hello world", "not a streamcal state file"),
        (rezip({"other.txt": b"x"}), "no 'streamcal.json' member"),
        (rezip({"streamcal.json": b"{not json"}), "not valid JSON"),
        (rezip({"streamcal.json": b'{"format": "other"}'}), "format 'other'"),
        (rezip({"streamcal.json": b'{"format": "streamcal-state", "format_version": "1"}'}), "format version '1'"),
    ],
)
def test_other_files_are_rejected(data, match):
    with pytest.raises(persist.StateFileError, match=match):
        persist.from_bytes(data)


def test_missing_or_altered_array_member_is_rejected(checkpoint):
    _, data = checkpoint
    files = members(data)
    name = next(n for n in files if n.startswith("arrays/"))
    altered = dict(files)
    altered[name] = files[name][:-8] + np.zeros(1).tobytes()
    with pytest.raises(persist.StateFileError, match="does not match its checksum"):
        persist.from_bytes(rezip(altered))
    del files[name]
    with pytest.raises(persist.StateFileError, match="is missing"):
        persist.from_bytes(rezip(files))


def test_load_of_a_directory_or_damaged_path_names_the_path(tmp_path):
    with pytest.raises(persist.StateFileError, match="directory"):
        persist.load(tmp_path)
    (tmp_path / "x.zip").write_bytes(b"garbage")
    with pytest.raises(persist.StateFileError, match=r"x\.zip"):
        persist.load(tmp_path / "x.zip")


# --------------------------------------------------------------------------------------- atomicity
def test_a_failed_write_leaves_the_old_checkpoint_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "state.zip"
    persist.save({"v": 1}, path)

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        persist.save({"v": 2}, path)
    monkeypatch.undo()
    assert persist.load(path) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.zip"]


def test_save_replaces_an_existing_file(tmp_path):
    path = tmp_path / "state.zip"
    persist.save({"v": 1}, path)
    persist.save({"v": 2}, str(path))
    assert persist.load(str(path)) == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.zip"]


# --------------------------------------------------------------------------------------- every learner
def _streamcal_learners():
    """Every public river estimator class of streamcal (in a module's ``__all__``) with unit-test parameters."""
    import importlib
    import inspect
    import pkgutil

    from river import base

    import streamcal

    seen = {}
    for info in pkgutil.walk_packages(streamcal.__path__, "streamcal."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue  # private modules: base classes and kernels
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            cls = getattr(module, name)
            if (
                inspect.isclass(cls)
                and cls.__module__.startswith("streamcal")
                and issubclass(cls, base.Estimator)
                and not inspect.isabstract(cls)
                and hasattr(cls, "_unit_test_params")
            ):
                seen[f"{cls.__module__}.{cls.__qualname__}"] = cls
    for name, cls in sorted(seen.items()):
        for k, params in enumerate(cls._unit_test_params()):
            yield pytest.param(cls, params, id=f"{name}-{k}")


@pytest.mark.parametrize(("cls", "params"), list(_streamcal_learners()))
def test_every_streamcal_learner_resumes_bit_for_bit(tmp_path, cls, params):
    """Generic persistence: no per-class code; save -> load -> continue == never stopping."""
    from river.checks import _yield_datasets

    a = cls(**params)
    dataset = list(next(iter(_yield_datasets(a))))
    b = a.clone()
    half = len(dataset) // 2
    for x, y in dataset[:half]:
        a.learn_one(x, y)
        b.learn_one(x, y)
    path = persist.save(b, tmp_path / "learner.zip")
    b = persist.load(path, allow_pickle=True)
    assert type(b) is cls
    for x, y in dataset[half:]:
        assert pickle.dumps(a.predict_proba_one(x)) == pickle.dumps(b.predict_proba_one(x))
        a.learn_one(x, y)
        b.learn_one(x, y)
    data_a = persist.to_bytes(a)
    if not json.loads(members(data_a)["streamcal.json"])["pickles"]:
        assert data_a == persist.to_bytes(b)  # portable state: the very same file
