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
from river_cases import HistogramPAV, public_classes, streamcal_estimators

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
    with pytest.raises(TypeError, match="holds an ECE, not a CalibratedClassifier"):
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



def test_save_and_load_take_binary_file_objects(tmp_path):
    cal = PAVCalibrator().update(np.array([0.1, 0.5, 0.9, 0.4]), np.array([0, 1, 1, 0]))
    grid = np.linspace(0.0, 1.0, 33)
    buffer = io.BytesIO()
    assert persist.save(cal, buffer) is buffer
    assert buffer.getvalue() == persist.to_bytes(cal)
    buffer.seek(0)
    np.testing.assert_array_equal(persist.load(buffer).predict_proba(grid), cal.predict_proba(grid))
    persist.save(cal, tmp_path / "s.zip")
    with (tmp_path / "s.zip").open("rb") as f:
        np.testing.assert_array_equal(persist.load(f).predict_proba(grid), cal.predict_proba(grid))

    class Stream:  # a file object that cannot seek: read whole first
        def __init__(self, data):
            self.data = io.BytesIO(data)

        def read(self, n=-1):
            return self.data.read(n)

    loaded = persist.load(Stream(persist.to_bytes(cal)))
    np.testing.assert_array_equal(loaded.predict_proba(grid), cal.predict_proba(grid))
    with pytest.raises(persist.StateFileError, match=r"file object 'BytesIO' is not a streamcal state file"):
        persist.load(io.BytesIO(b"junk"))


def test_save_and_load_name_a_bad_path(tmp_path):
    cal = PAVCalibrator()
    for call in (lambda: persist.save(cal, 123), lambda: persist.load(123)):
        with pytest.raises(TypeError, match=r"`path` must be a file name .* got int 123"):
            call()
    with pytest.raises(IsADirectoryError, match=r"not a directory; got the directory"):
        persist.save(cal, tmp_path)
    with pytest.raises(FileNotFoundError, match=r"directory .*missing.* does not exist"):
        persist.save(cal, tmp_path / "missing" / "s.zip")
    (tmp_path / "t.txt").write_text("x")
    with (tmp_path / "t.txt").open() as f, pytest.raises(TypeError, match="open it with 'rb'"):
        persist.load(f)
    with (tmp_path / "u.txt").open("w") as f, pytest.raises(TypeError, match="text file object"):
        persist.save(cal, f)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt", "u.txt"]  # no temporary file left


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
    for name, cls in streamcal_estimators().items():
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


# --------------------------------------------------------------------------------------- hostile files
# Someone who edits a state file can recompute its checksums (``state_files.pack`` does): these
# files pass the checksums and must still be refused. tests/test_fuzz_state.py mutates every
# attribute of every savable class; the cases below are the ones of the bug report, and the
# container's own limits.
from state_files import array_of, objects, pack, unpack  # noqa: E402


def _count_window_pav():
    rng = np.random.default_rng(11)
    s = rng.uniform(size=2000)
    return PAVCalibrator(window=CountWindow(300)).update(s, rng.uniform(size=2000) < s)


def _edit(cal, attr, change):
    manifest, arrays, pickles = unpack(persist.to_bytes(cal))
    node = next(objects(manifest["root"]))[1]
    name = array_of(node, attr)
    arrays[name] = change(arrays[name].copy())
    return pack(manifest, arrays, pickles)


def _set(index, value):
    def change(a):
        a[index] = value
        return a

    return change


@pytest.mark.parametrize(
    ("attr", "change", "match"),
    [
        ("_si", _set(3, 10**9), r"`_si` ring count: expected an int in \[0, 300\]; found 1000000000"),
        ("_sf", lambda a: a[:20], r"`_sf`/`_si`: expected 2960/2356 values .* found 20/2356"),
        ("_cuts", lambda a: a[:3], r"`_cuts`: expected 1023 values; found 3"),
        ("_pi", _set(slice(12, 12 + 4 * 64, 4), 10**6), r"`_pi` owner of bucket 0: expected -1 or a bucket"),
        ("_pi", _set(1, 5), r"`_pi` header slot 1: the PAV blocks do not match the histogram"),
        ("_sf", _set(12 + 0, 7.0), r"`_sf` positive weight of bucket 0: expected 0.0 \(the bucket holds no event\)"),
        ("_si", _set(8 + 2048 + 17, 1024), r"`_si` ring buckets: expected buckets in \[0, 1023\]; found 1024"),
    ],
    ids=["ring-count-1e9", "sf-truncated", "cuts-of-3", "pi-owners", "pi-head", "phantom-weight", "ring-bucket"],
)
def test_inconsistent_pav_state_is_refused(attr, change, match):
    """The files of the bug report: each made ``update`` read or write out of bounds."""
    data = _edit(_count_window_pav(), attr, change)
    with pytest.raises(persist.StateFileError, match=match) as info:
        persist.from_bytes(data)
    assert "learner (PAVCalibrator)" in str(info.value)  # where in the learner


def test_manifest_that_is_not_an_object_is_refused():
    for text in (b"[1, 2]", b"null", b'"streamcal-state"', b"3"):
        with pytest.raises(persist.StateFileError, match="not a streamcal state file"):
            persist.from_bytes(rezip({"streamcal.json": text}))


def test_deeply_nested_manifest_is_refused():
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(persist.StateFileError, match="nests 100000 levels deep"):
        persist.from_bytes(rezip({"streamcal.json": deep}))
    # brackets inside strings do not nest; a learner nested up to the limit loads
    value = "[{" * 1000
    for _ in range(persist.MAX_JSON_DEPTH - 1):  # the manifest itself is one level
        value = [value]
    assert persist.from_bytes(persist.to_bytes(value)) == value
    with pytest.raises(persist.StateFileError, match=f"nests {persist.MAX_JSON_DEPTH + 1} levels deep"):
        persist.from_bytes(persist.to_bytes([value]))


def _zip_with_zeros(files: dict, name: str, n_bytes: int) -> bytes:
    """A zip of ``files`` plus a member ``name`` of ``n_bytes`` zero bytes (a few hundred KB deflated)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in files.items():
            if member != name:
                zf.writestr(member, data)
        with zf.open(name, "w", force_zip64=True) as f:
            block = bytes(1 << 20)
            for _ in range(n_bytes >> 20):
                f.write(block)
    return buf.getvalue()


def _peak_bytes(call) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_declared_sizes_are_checked_before_reading():
    """A member declaring far more bytes than its listed array is refused before it is read."""
    data = persist.to_bytes(_count_window_pav())
    files = members(data)
    bomb = _zip_with_zeros(files, "arrays/a0.npy", 256 << 20)
    assert len(bomb) < 2 << 20

    def load():
        with pytest.raises(persist.StateFileError, match=r"member 'arrays/a0.npy' declares 268435456 bytes"):
            persist.from_bytes(bomb)

    assert _peak_bytes(load) < 16 << 20


def test_max_bytes_bounds_what_is_read():
    cal = _count_window_pav()
    data = persist.to_bytes(cal)
    size = sum(len(v) for v in members(data).values())
    with pytest.raises(persist.StateFileError, match=rf"declares {size} bytes of contents, over the limit of {size // 2} "):
        persist.from_bytes(data, max_bytes=size // 2)
    assert type(persist.from_bytes(data, max_bytes=size)) is PAVCalibrator
    with pytest.raises(persist.StateFileError, match="over the limit"):
        persist.from_bytes(data, max_bytes=size - 1)
    # the manifest may take 1/16 of the limit
    with pytest.raises(persist.StateFileError, match=r"'streamcal\.json', over the limit"):
        persist.from_bytes(data, max_bytes=16 * (len(members(data)["streamcal.json"]) - 1))
    for bad, error in ((0, ValueError), (-5, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match=r"`max_bytes` must be"):
            persist.from_bytes(data, max_bytes=bad)


def test_a_large_listed_array_streams_through_its_checksum():
    """A 64 MB array listed with a wrong checksum: read once, into its own memory only."""
    manifest, arrays, _ = unpack(persist.to_bytes({"x": np.zeros(3)}))
    name = next(iter(arrays))
    good = pack(manifest, {name: np.zeros(8 << 20)})
    files = members(good)
    listing = json.loads(files["streamcal.json"])
    listing["arrays"][name]["sha256"] = "0" * 64
    files["streamcal.json"] = json.dumps(listing).encode()
    damaged = rezip(files)
    del files

    def load():
        with pytest.raises(persist.StateFileError, match="does not match its checksum"):
            persist.from_bytes(damaged)

    assert _peak_bytes(load) < (64 << 20) + (8 << 20)  # one copy of the array, not two
    assert persist.from_bytes(good)["x"].shape == (8 << 20,)


def test_array_members_must_agree_with_their_listing():
    manifest, arrays, _ = unpack(persist.to_bytes({"x": np.arange(3.0)}))
    name = next(iter(arrays))
    raw = {f"arrays/{name}.npy": _npy(np.arange(3))}  # int64 data where float64 is listed
    with pytest.raises(persist.StateFileError, match=r"holds a <i8 array of shape \(3,\), but the file lists <f8"):
        persist.from_bytes(pack(manifest, {name: np.arange(3.0)}, raw=raw))
    for dtype in ("O", "V8", "|O", "<U0", "(2,)f8", "x" * 40, 7):
        listing = {**manifest, "arrays": {name: {"dtype": dtype, "shape": [3], "sha256": "0" * 64}}}
        with pytest.raises(persist.StateFileError, match="dtype"):
            persist.from_bytes(rezip({"streamcal.json": json.dumps(listing).encode()}))
    for shape in ([-1], [3.0], "3", [2**40, 2**40, 2**40]):
        listing = {**manifest, "arrays": {name: {"dtype": "<f8", "shape": shape, "sha256": "0" * 64}}}
        with pytest.raises(persist.StateFileError):
            persist.from_bytes(rezip({"streamcal.json": json.dumps(listing).encode()}))


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _with_root(root, arrays=None) -> bytes:
    manifest, _, _ = unpack(persist.to_bytes(None))
    manifest["root"] = root
    return pack(manifest, arrays or {})


@pytest.mark.parametrize(
    ("root", "match"),
    [
        ({"__float__": "zz"}, "hex digits"),
        ({"__float__": "00"}, "hex digits"),
        ({"__tuple__": 5}, "must hold a list"),
        ({"__dict__": [[1]]}, r"\[key, value\] pairs"),
        ({"__dict__": [[[1], 2]]}, "must be hashable"),
        ({"__set__": [[1]], "frozen": False}, "unhashable"),
        ({"__deque__": [], "maxlen": -1}, "maxlen"),
        ({"__defaultdict__": [], "factory": "eval"}, "factory"),
        ({"__ref__": 3}, "not defined before it"),
        ({"__ndarray__": "a9"}, "does not list"),
        ({"__tuple__": [], "extra": 1}, "keys"),
        ({"__nope__": 1}, "unknown value tag"),
        ({"__object__": "streamcal.metrics:ECE", "id": 0, "params": [], "state": {}}, "two dicts"),
        ({"__object__": "streamcal.metrics:ECE", "id": 0, "params": {"zz": 1}, "state": {}}, "not parameters of ECE"),
        ({"__object__": "streamcal.metrics:ECE", "id": 0, "params": {"n_bins": 10**12}, "state": {}}, "n_bins"),
        ({"__class__": "builtins:eval"}, "not a class"),
        ({"__object__": "streamcal.replay.generate:_Writer", "id": 0, "params": {}, "state": {}}, "cannot hold"),
        ({"__random__": [3, [1, 2], None]}, "cannot be decoded"),
    ],
)
def test_malformed_descriptions_are_refused(root, match):
    with pytest.raises(persist.StateFileError, match=match):
        persist.from_bytes(_with_root(root))


def test_a_wrapper_cannot_contain_itself():
    model = CalibratedClassifier(tree.HoeffdingTreeClassifier(), PAVCalibrator())
    manifest, arrays, _ = unpack(persist.to_bytes(model, allow_pickle=False))
    manifest["root"]["params"]["calibrator"] = {"__ref__": 0}
    with pytest.raises(persist.StateFileError, match="cannot contain itself"):
        persist.from_bytes(pack(manifest, arrays))


def test_an_array_may_be_named_once():
    data = _with_root([{"__ndarray__": "a0"}, {"__ndarray__": "a0"}], {"a0": np.zeros(2)})
    with pytest.raises(persist.StateFileError, match="names array 'a0' a second time"):
        persist.from_bytes(data)


@pytest.mark.parametrize("kind", ["PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"])
def test_numpy_generator_states_are_checked(kind):
    """numpy does not bound an MT19937 state's position: past its key, the next draw read out of
    bounds. Every field of every bit generator's state is checked before numpy sees it."""
    g = np.random.Generator(getattr(np.random, kind)(5))
    g.random()
    data = persist.to_bytes({"g": g}, allow_pickle=False)
    back = persist.from_bytes(data)["g"]
    assert back.random() == g.random()
    manifest, arrays, _ = unpack(data)
    state = manifest["root"]["g"]["state"]
    if kind == "MT19937":
        state["state"]["pos"] = 10**7
    elif kind == "Philox":
        state["buffer_pos"] = 5
    else:
        state["has_uint32"] = 2
    with pytest.raises(persist.StateFileError, match=r"must be an int in \[0, "):
        persist.from_bytes(pack(manifest, arrays))


def test_every_savable_streamcal_class_checks_its_restored_state():
    """A class whose methods hand arrays to compiled kernels must check them when restored: every
    public streamcal class that a state file can hold has a check of its own (or is a streaming
    calibrator, checked by ``__setstate__``)."""
    import streamcal
    from streamcal._streaming import StreamingCalibrator

    bases = {streamcal.buckets.Buckets, streamcal.windows.Window}  # no state; their subclasses are checked
    unchecked = []
    for cls in public_classes().values():
        if issubclass(cls, Exception):
            continue
        if not any(hasattr(cls, m) for m in ("learn_one", "fit", "update", "bucket_edges", "code")):
            continue  # not a learner, metric or strategy
        if issubclass(cls, StreamingCalibrator) or hasattr(cls, "_check_loaded_state") or cls in bases:
            continue
        unchecked.append(f"{cls.__module__}.{cls.__qualname__}")
    assert not unchecked, unchecked


def test_members_are_deflated_or_stored_as_asked_and_load_the_same():
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 40, 3_000)
    s = rng.uniform(size=keys.size)
    y = rng.uniform(size=keys.size) < s
    from streamcal import KeyedCalibrator

    cal = KeyedCalibrator(PAVCalibrator(prior=None), prior_strength=0)
    cal.update(keys, s, y)
    deflated, stored = persist.to_bytes(cal), persist.to_bytes(cal, compress=False)
    kinds = {
        data: {info.compress_type for info in zipfile.ZipFile(io.BytesIO(data)).infolist()}
        for data in (deflated, stored)
    }
    assert kinds[deflated] == {zipfile.ZIP_DEFLATED}
    assert kinds[stored] == {zipfile.ZIP_STORED}
    assert len(stored) > 2 * len(deflated)
    probe = rng.uniform(size=50)
    want = cal.predict_proba(keys[:50], probe)
    for data in (deflated, stored):
        back = persist.from_bytes(data)
        assert back.keys() == cal.keys()
        np.testing.assert_array_equal(back.predict_proba(keys[:50], probe), want)
        assert persist.to_bytes(back, compress=False) == stored  # the same state, member for member


def test_lists_of_plain_values_are_written_as_they_are():
    values = [3, "a", None, True, -7, "b", 0, 12, False]
    enc = persist._Encoder(allow_pickle=False)
    enc.find_shared(values)
    assert enc.encode(values, "x") == values
    nested = [[1.0] * 8, [1, 2], {"k": [None, "z"]}]
    enc = persist._Encoder(allow_pickle=False)
    enc.find_shared(nested)
    encoded = enc.encode(nested, "x")
    assert encoded[0] == {"__floatlist__": "a0"}
    assert encoded[1:] == [[1, 2], {"k": [None, "z"]}]


def test_what_pickle_refuses_and_bytes_that_are_not_bytes_get_clear_errors(tmp_path):
    """A value pickle cannot store is a TypeError naming where it sits; a non-bytes ``data`` a
    TypeError naming the argument; a refused save leaves no file."""
    with pytest.raises(TypeError, match=r"`learner` \(builtins:function\) cannot be stored: .* pickle refuses it"):
        persist.save(lambda x: x, tmp_path / "f.streamcal")
    assert not (tmp_path / "f.streamcal").exists()
    with pytest.raises(TypeError, match=r"`data` must be the bytes of a state file .* got str"):
        persist.from_bytes("abc")
