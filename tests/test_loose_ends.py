"""Loose ends across the package: generated files carry page checksums that replay verifies,
rejected calls on the composed classifier change nothing, bucket grids too wide to divide say
so, install hints match how streamcal was installed, and a clashing ``streamcal`` distribution
is named at import."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streamcal.cli import main

# ---------------------------------------------------------------- page checksums


def zero_middle_of_file(path: Path, n_bytes: int = 64) -> None:
    """Zero ``n_bytes`` in the middle of the file."""
    data = bytearray(path.read_bytes())
    start = len(data) // 2
    data[start : start + n_bytes] = bytes(n_bytes)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("parts", [1, 2])
def test_generated_parquet_carries_page_checksums_and_replay_refuses_damage(tmp_path, capsys, monkeypatch, parts):
    monkeypatch.chdir(tmp_path)
    target = "gen" if parts > 1 else "gen.parquet"
    assert main(["generate", target, "-n", "3000", "--seed", "1", "--parts", str(parts), "-q"]) == 0
    files = sorted(Path(target).glob("*.parquet")) if parts > 1 else [Path(target)]
    assert len(files) == parts
    for path in files:
        clean = pq.read_table(path, page_checksum_verification=True)
        zero_middle_of_file(path)
        with pytest.raises(OSError, match="CRC checksum verification failed"):
            pq.read_table(path, page_checksum_verification=True)
    if parts == 1:
        # the damage is silent without the checksums: the file still reads, with other scores
        changed = pq.read_table(files[0])["score"].to_numpy() != clean["score"].to_numpy()
        assert 0 < changed.sum() <= 9
    capsys.readouterr()
    code = main(["replay", target, "-q", "--no-output"])
    _, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith("streamcal: error: "), err
    assert "CRC checksum verification failed" in err


# ---------------------------------------------------------------- rejected calls on the wrapper


def fitted_wrapper(calibrator=None, classifier=None):
    from river import datasets, linear_model

    from streamcal import CalibratedClassifier

    model = CalibratedClassifier(classifier or linear_model.LogisticRegression(), calibrator)
    for x, y in datasets.Phishing():
        model.learn_one(x, y)
    return model, x


@pytest.mark.parametrize("remembered", [False, True])
@pytest.mark.parametrize("method", ["predict_proba_one", "predict_llr_one", "predict_one"])
def test_a_nan_answer_is_rejected_naming_the_feature_and_changes_nothing(method, remembered):
    import math
    import pickle

    model, x = fitted_wrapper()
    if remembered:
        model.predict_proba_one(x)  # the wrapper remembers this score for a following learn_one
    feature = next(iter(x))
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match=rf"probability of nan .* with feature '{feature}' = nan;"):
        getattr(model, method)({**x, feature: math.nan})
    assert pickle.dumps(model) == before
    # two non-finite features are both named
    with pytest.raises(ValueError, match=rf"with features '{feature}' = nan, 'extra' = inf;"):
        getattr(model, method)({**x, feature: math.nan, "extra": math.inf})
    assert pickle.dumps(model) == before


def test_a_nan_answer_from_finite_features_says_so():
    import pickle

    from river import linear_model

    model, _ = fitted_wrapper()
    # weights of 1e308 overflow the dot product to inf - inf = nan
    model.classifier._weights = type(model.classifier._weights)({"a": 1e308, "b": -1e308})
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match=r"every float feature of `x` is finite"):
        model.predict_proba_one({"a": 1e308, "b": 1e308})
    assert pickle.dumps(model) == before
    assert isinstance(model.classifier, linear_model.LogisticRegression)


def test_a_rejected_learn_one_keeps_the_remembered_score():
    import pickle

    model, x = fitted_wrapper()
    model.predict_proba_one(x)
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="`w`"):
        model.learn_one(x, True, w=-1.0)
    assert pickle.dumps(model) == before
    model, x = fitted_wrapper()
    other = {**x, next(iter(x)): 0.123}
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="`w`"):
        model.learn_one(other, True, w=-1.0)  # scored, not remembered
    assert pickle.dumps(model) == before


# ---------------------------------------------------------------- bucket grids at the float64 limits


def test_a_uniform_grid_too_wide_names_both_arguments_and_the_largest_range():
    from streamcal import PAVCalibrator
    from streamcal.buckets import MAX_RANGE, UniformGrid

    assert MAX_RANGE == 1.7976931348623157e308
    for low, high in [(-1e308, 1e308), (-MAX_RANGE, 1e300), (-MAX_RANGE, MAX_RANGE)]:
        with pytest.raises(ValueError, match=r"too wide to divide into buckets") as info:
            PAVCalibrator(buckets=UniformGrid(16, low, high))
        text = str(info.value)
        assert "`low`" in text
        assert "`high`" in text
        assert f"[{low!r}, {high!r}]" in text
        assert "must be at most 1.7976931348623157e+308" in text
        assert "nan" not in text
        assert "inf" not in text
    # the widest range accepted gives finite, increasing edges and finite centres
    for low, high in [(0.0, MAX_RANGE), (-MAX_RANGE, 0.0), (-1e308, 7.9e307)]:
        grid = UniformGrid(16, low, high)
        edges, centres = grid.bucket_edges(), grid.bucket_centres()
        assert edges[0] == low
        assert edges[-1] == high
        assert (edges[1:] > edges[:-1]).all()
        assert ((centres > edges[:-1]) & (centres < edges[1:])).all()
        PAVCalibrator(buckets=grid).learn_one({"score": high}, True)


@pytest.mark.parametrize(
    ("grid", "where"),
    [
        ("UniformGrid(16, 1.0, 1.0 + 1e-15)", "[1.0, 1.000000000000001]"),
        ("UniformGrid(2**24, 0.0, 1e-320)", "[0.0, 1e-320]"),
        ("LogitGrid(1024, 0.5, 1 - 1e-15)", "[0.5, 0.999999999999999]"),
        ("LogitGrid(16, 0.5, 0.5 + 1e-15)", "[0.5, 0.500000000000001]"),
    ],
)
def test_a_grid_too_narrow_for_its_buckets_says_so(grid, where):
    from streamcal import PAVCalibrator
    from streamcal.buckets import LogitGrid, UniformGrid

    strategy = eval(grid, {"UniformGrid": UniformGrid, "LogitGrid": LogitGrid})
    with pytest.raises(ValueError, match=r"too narrow to divide into `n_buckets` = \d+ buckets") as info:
        PAVCalibrator(buckets=strategy)
    assert f"[`low`, `high`] = {where}" in str(info.value)
    assert "fewer buckets or a wider range" in str(info.value)


def test_extreme_logit_and_quantile_grids_stay_finite_and_increasing():
    import warnings

    import numpy as np

    from streamcal import PAVCalibrator
    from streamcal.buckets import Edges, LogitGrid, QuantileEdges

    big = 1.7976931348623157e308
    cases = [
        (LogitGrid(16, 5e-324, 0.5), None),
        (LogitGrid(4, 1e-300, 1 - 1e-16), None),
        (Edges((-big, big)), None),
        (QuantileEdges(4, 2), np.array([-big, big])),
        (QuantileEdges(4, 3), np.array([-1.7e308, 1.7e308, 1.7e308])),
        (QuantileEdges(4, 2), np.array([big, big])),
        (QuantileEdges(4, 2), np.array([-big, -big])),
        (QuantileEdges(4, 2), np.array([1e17, 1e17])),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way either
        for strategy, sample in cases:
            edges, centres = strategy.bucket_edges(sample), strategy.bucket_centres(sample)
            assert np.isfinite(edges).all(), strategy
            assert np.isfinite(centres).all(), strategy
            assert (edges[1:] > edges[:-1]).all(), (strategy, edges)
            assert ((centres >= edges[:-1]) & (centres <= edges[1:])).all(), (strategy, edges, centres)
        # a calibrator warms up on such a sample and predicts
        cal = PAVCalibrator(buckets=QuantileEdges(4, 2))
        cal.learn_one({"score": -big}, False)
        cal.learn_one({"score": big}, True)
        p = cal.predict_proba_one({"score": big})[True]
        assert 0.0 < p < 1.0


# ---------------------------------------------------------------- install hints

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("source", "inside", "expected"),
    [
        ({"url": "file:///srv/clone", "dir_info": {"editable": True}}, True, "pip install -e '.[plot]'"),
        ({"url": "file:///srv/clone", "dir_info": {}}, True, "pip install '.[plot]'"),
        ({"url": "file:///srv/clone", "dir_info": {}}, False, "pip install '/srv/clone[plot]'"),
        (
            {"url": "https://example.org/s.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
            False,
            "pip install 'streamcal-engine[plot] @ git+https://example.org/s.git@abc123'",
        ),
        (
            {"url": "file:///w/streamcal_engine-0.2-py3-none-any.whl", "archive_info": {}},
            False,
            "pip install 'streamcal-engine[plot] @ file:///w/streamcal_engine-0.2-py3-none-any.whl'",
        ),
        ({}, False, "pip install 'streamcal-engine[plot]'"),  # from an index
    ],
)
def test_the_install_hint_follows_how_streamcal_was_installed(monkeypatch, tmp_path, source, inside, expected):
    from streamcal import _install

    if "dir_info" in source:
        clone = tmp_path / "srv" / "clone"
        clone.mkdir(parents=True)
        source = {**source, "url": clone.as_uri()}
        expected = expected.replace("/srv/clone", str(clone))
        monkeypatch.chdir(clone if inside else tmp_path)
    monkeypatch.setattr(_install, "_source", lambda: source)
    assert _install.install_hint("plot") == expected
    assert _install.install_command(reinstall=True).startswith("pip install --force-reinstall --no-deps ")


def test_run_from_a_source_tree_the_hint_names_the_tree(monkeypatch):
    from streamcal import _install

    monkeypatch.setattr(_install, "_source", lambda: None)
    monkeypatch.chdir(ROOT)
    assert _install.install_hint("dask") == "pip install '.[dask]'"


def run_python(code: str, *paths: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter whose ``sys.path`` starts with this checkout, then ``paths``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *map(str, paths)])
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_hint_reads_the_installed_metadata(tmp_path):
    clone = tmp_path / "my clone"
    clone.mkdir()
    site = tmp_path / "site"
    meta = site / "streamcal_engine-0.2.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: streamcal-engine\nVersion: 0.2.0\n")
    (meta / "direct_url.json").write_text(json.dumps({"url": clone.as_uri(), "dir_info": {}}))
    code = "from streamcal._install import install_hint; print(install_hint('plot'))"
    out = run_python(code, site, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"pip install '{clone}[plot]'"
    out = run_python(code, site, cwd=clone)
    assert out.stdout.strip() == "pip install '.[plot]'"


def test_every_missing_extra_message_uses_the_one_hint(monkeypatch, capsys):
    import streamcal.demo
    import streamcal.replay
    from streamcal import _install, cli, dask, plot
    from streamcal.replay import _replay

    monkeypatch.setattr(_install, "install_command", lambda extra=None, **_: f"HINT[{extra}]")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r"HINT\[plot\]"):
        plot._matplotlib()
    with pytest.raises(ImportError, match=r"HINT\[plot\]"):
        _replay._check_matplotlib()
    with pytest.raises(ImportError, match=r"HINT\[dask\]"):
        dask._require_dask()
    calls = []
    monkeypatch.setattr(streamcal.replay, "replay_demo", lambda *a, **k: calls.append(k["plot"]))
    monkeypatch.setattr(streamcal.demo, "run_streaming_demo", lambda **k: None)
    assert cli.main(["demo", "--dir", "out"]) == 0
    assert calls == [False]
    assert "`HINT[plot]` adds it" in capsys.readouterr().out
    # and no other hint is written out anywhere in the package
    spelled = re.compile(r"pip install\s+['\"`]?streamcal-engine\[")
    for path in (ROOT / "streamcal").rglob("*.py"):
        if path.name != "_install.py":
            assert not spelled.search(path.read_text(encoding="utf-8")), path


# ---------------------------------------------------------------- the other `streamcal` distribution


def fake_distribution(site: Path, folder: str, files: dict) -> Path:
    meta = site / folder
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: streamcal\nVersion: 1.0\n")
    for name, text in files.items():
        (meta / name).write_text(text)
    return meta


IMPORT = "import warnings; warnings.simplefilter('always'); import streamcal; print(streamcal.__file__)"


@pytest.mark.parametrize(
    ("folder", "files"),
    [
        ("streamcal-1.0.dist-info", {"RECORD": "streamcal/__init__.py,,\nstreamcal-1.0.dist-info/METADATA,,\n"}),
        ("Streamcal-1.0.dist-info", {"top_level.txt": "streamcal\n"}),
        ("streamcal-1.0-py3.11.egg-info", {"installed-files.txt": "../streamcal/__init__.py\n"}),
    ],
)
def test_the_other_streamcal_distribution_is_named_at_import(tmp_path, folder, files):
    meta = fake_distribution(tmp_path / "site", folder, files)
    out = run_python(IMPORT, tmp_path / "site", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(ROOT / "streamcal" / "__init__.py")
    assert "NameClashWarning" in out.stderr
    for part in ("streamcal-engine", "unrelated distribution `streamcal`", str(meta), "pip uninstall streamcal"):
        assert part in out.stderr, (part, out.stderr)
    assert "pip install --force-reinstall --no-deps" in out.stderr
    # a warnings filter that makes it an error stops the import, as asked
    strict = IMPORT.replace("'always'", "'error'")
    assert run_python(strict, tmp_path / "site", cwd=tmp_path).returncode == 1


def test_no_warning_without_the_other_distribution(tmp_path):
    site = tmp_path / "site"
    # named streamcal but installing another package, and streamcal-engine's own metadata
    fake_distribution(site, "streamcal-1.0.dist-info", {"RECORD": "other/__init__.py,,\n"})
    fake_distribution(site, "streamcal_engine-0.2.0.dist-info", {"RECORD": "streamcal/__init__.py,,\n"})
    fake_distribution(site, "streamcalx-1.0.dist-info", {"RECORD": "streamcal/__init__.py,,\n"})
    out = run_python(IMPORT, site, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


def test_name_clashes_lists_each_clash_with_its_version(tmp_path):
    from streamcal._name_clash import name_clash_message, name_clashes

    a = fake_distribution(tmp_path / "a", "streamcal-1.0.dist-info", {"RECORD": "streamcal/x.py,,\n"})
    b = fake_distribution(tmp_path / "b", "streamcal-2.3.1.dist-info", {"top_level.txt": "streamcal\n"})
    found = name_clashes([str(tmp_path / "a"), "", str(tmp_path / "missing"), str(tmp_path / "b")])
    assert found == [("1.0", str(a)), ("2.3.1", str(b))]
    text = name_clash_message(found)
    assert f"streamcal 1.0 at {a}; streamcal 2.3.1 at {b}" in text


# ---------------------------------------------------------------- the wrapper's per-event fast paths


@pytest.mark.parametrize(
    ("x", "feature"),
    [
        ({"a": 1.0, "b": float("nan")}, "b"),
        ({"a": float("inf"), "b": float("-inf")}, "a"),  # the sum is NaN
        ({"a": "text", "b": float("nan")}, "b"),  # the sum fails: the full check judges
        ({"a": 10**400, "b": float("inf")}, "b"),  # the sum overflows (OverflowError)
        ({"a": 1, "b": float("nan")}, "b"),
    ],
)
def test_learn_one_rejects_every_non_finite_float_feature(x, feature):
    import pickle

    import numpy as np

    model, _ = fitted_wrapper()
    before = pickle.dumps(model)
    for features in (x, {k: np.float32(v) if isinstance(v, float) else v for k, v in x.items()}):
        with pytest.raises(ValueError, match=rf"`x` must hold finite numbers; got .* for feature '{feature}'"):
            model.learn_one(features, True)
        assert pickle.dumps(model) == before


def test_learn_one_accepts_finite_features_whose_sum_overflows():
    import warnings

    import numpy as np
    from river import linear_model

    from streamcal import CalibratedClassifier

    model = CalibratedClassifier(linear_model.LogisticRegression())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and NumPy scalars raise no overflow warning on the way
        model.learn_one({"a": 1.5e308, "b": 1.5e308, "c": 1, "d": True}, True)  # the sum is inf, no feature is
        model.learn_one({"a": np.float32(3e38), "b": np.float32(3e38)}, False)
    assert model.n_learned == 2


@pytest.mark.parametrize(
    ("y", "pos_val", "label"),
    [(True, True, True), (False, True, False), (1, True, True), (0, True, False), (False, False, True)],
)
def test_label_fast_path_agrees_with_the_full_check(y, pos_val, label):
    import numpy as np
    from river import linear_model

    from streamcal import CalibratedClassifier, PAVCalibrator

    for y_given in (y, np.bool_(y)) if isinstance(y, bool) else (y,):
        cal = PAVCalibrator()
        model = CalibratedClassifier(linear_model.LogisticRegression(), cal, pos_val=pos_val)
        model.learn_one({"a": 0.5}, y_given)
        # the calibrator learned the label `label`: its prior moved that way
        assert (cal.predict_proba_one({"score": 0.5})[True] > 0.5) == label
    with pytest.raises(ValueError, match="is neither a bool"):
        CalibratedClassifier(linear_model.LogisticRegression()).learn_one({"a": 0.5}, "spam")
