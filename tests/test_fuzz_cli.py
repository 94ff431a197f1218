"""Fuzzing the command line: random argument lists and random or damaged input files end with exit
status 0 or 2 and, on error, one line ``streamcal: error: ...`` — never a traceback, never an
internal error, never a crash.

The runs are in-process through ``streamcal.cli.main`` (fast), seeded (the hypothesis profile is
derandomized) and bounded (a few dozen examples on files of a few hundred events); a few run as
real processes to check the exit status and that no signal ended them. ``--plot`` is left out
(drawing a PNG costs a second per run; its path is checked like the other outputs in
test_cli_safety.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.cli import main
from streamcal.replay import generate

ROOT = Path(__file__).resolve().parents[1]

VALUES = {
    "--method": ["pav", "raw", "pav,raw", "nope", "", ",", "pav,pav", "raw,"],
    "--buckets": ["16", "0", "-3", "uniform:8", "quantile:4", "logit:x", "abc", "1e3", "nan"],
    "--window": ["100", "0", "-1", "7d", "1h", "x", "nan", "1e400", "2.5"],
    "--decay": ["100", "0", "-1", "3d", "x", "nan", "inf"],
    "--time-col": ["", "event_time", "score", "label", "label_time", "nope"],
    "--score-col": ["score", "", "label", "event_time", "nope"],
    "--label-col": ["label", "score", "", "nope", "event_time"],
    "--label-time-col": ["", "label_time", "event_time", "nope", "score"],
    "--weight-col": ["", "score", "nope", "label"],
    "--keep-columns": ["", "score", "nope", "score,label", ","],
    "--label-delay": ["0", "30", "1h", "-1", "nan", "x", "1e400", "inf"],
    "--format": ["parquet", "csv", "ipc", "xls"],
    "--unsorted": ["error", "sort", "x"],
    "-o": ["out.parquet", "good.parquet", "sub", "missing/out.parquet", "", "out.csv", "/dev/null"],
    "--metrics-output": ["m.parquet", "out.parquet", "good.parquet", "", "sub"],
    "--metrics-window": ["1", "100", "0", "-5", "nan", "1e400", "x", "2.5"],
    "--metrics": ["all", "none", "brier", "auc", "", "brier,,ece"],
    "--batch-size": ["1", "7", "1000", "0", "-1", "nan", "inf", "1e400", "x"],
    "--refit-every": ["lazy", "1", "50", "0", "-1", "x", "nan"],
    "--jobs": ["1", "2", "-1", "0", "x", "-5"],
}
SWITCHES = ["--no-output", "--help"]
INPUTS = [
    "good.parquet",
    "good.csv",
    "good.arrow",
    "parts",
    "noevents.parquet",
    "zero.parquet",
    "zero.csv",
    "garbage.parquet",
    "nocols.parquet",
    "notes.txt",
    "missing.parquet",
    "sub",
    "damaged.parquet",
    "random.csv",
    "",
    "-",
]
GENERATE_VALUES = {
    "-n": ["0", "10", "1e3", "-1", "x", "1e400", "nan", "2.5"],
    "--scenario": ["click", "fraud", "drift", "x"],
    "--seed": ["0", "7", "-1", "x"],
    "--parts": ["1", "3", "0", "x"],
    "--batch-size": ["1", "100", "0", "nan"],
    "--format": ["parquet", "csv", "ipc", "x"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The input files every example starts from (copied into its own directory)."""
    d = tmp_path_factory.mktemp("fuzz")
    generate(d / "good.parquet", "click", n=400, seed=3, batch_size=150)
    table = pq.read_table(d / "good.parquet")
    pacsv.write_csv(table, d / "good.csv")
    feather.write_feather(table, d / "good.arrow")
    (d / "parts").mkdir()
    pq.write_table(table.slice(0, 200), d / "parts" / "a.parquet", write_page_checksum=True)
    pq.write_table(table.slice(200), d / "parts" / "b.parquet")
    pq.write_table(table.slice(0, 0), d / "noevents.parquet")
    (d / "zero.parquet").write_bytes(b"")
    (d / "zero.csv").write_bytes(b"")
    (d / "garbage.parquet").write_bytes(bytes(range(256)) * 8)
    pq.write_table(pa.table({"a": [1, 2], "b": [0.5, 0.25]}), d / "nocols.parquet")
    (d / "notes.txt").write_text("score,label\n0.5,1\n")
    (d / "sub").mkdir()
    return d


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check(code: int, out: str, err: str, argv) -> None:
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err + out, (argv, err)
    if code == 2:
        assert err.startswith("streamcal: error: "), (argv, err)
        assert err.count("\n") == 1, (argv, err)
        assert "internal error" not in err, (argv, err)


@st.composite
def replay_argv(draw):
    # mostly the good inputs and the listed values, sometimes anything: so that runs get past the
    # first error often enough to reach the later checks
    inputs = draw(st.lists(st.sampled_from(["good.parquet"] * 6 + INPUTS), max_size=2))
    argv = ["replay", *inputs, "-q"]
    for flag in draw(st.lists(st.sampled_from([*VALUES, *SWITCHES]), max_size=4)):
        argv.append(flag)
        if flag in VALUES:
            listed = st.sampled_from(VALUES[flag])
            argv.append(draw(st.one_of(listed, listed, listed, st.text(max_size=6))))
    return argv


@st.composite
def generate_argv(draw):
    path = draw(st.sampled_from(["g.parquet", "g.csv", "sub/g.arrow", "", "sub", "missing/g.parquet"]))
    # -n always given, from a list of small or bad values (the default is a million events)
    argv = ["generate", path, "-q", "-n", draw(st.sampled_from(GENERATE_VALUES["-n"]))]
    for flag in draw(st.lists(st.sampled_from(sorted(set(GENERATE_VALUES) - {"-n"})), max_size=4, unique=True)):
        argv += [flag, draw(st.sampled_from(GENERATE_VALUES[flag]))]
    return argv


def damage(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for position, value in edits:
        out[position % len(out)] = value
    return bytes(out)


@pytest.mark.slow
@settings(max_examples=50)
@given(
    argv=st.one_of(replay_argv(), replay_argv(), replay_argv(), generate_argv()),
    edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=8),
    noise=st.binary(max_size=300),
)
def test_random_argument_lists_and_files_end_in_status_0_or_2(files, argv, edits, noise):
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(files, work)
        (work / "damaged.parquet").write_bytes(damage((work / "good.parquet").read_bytes(), edits))
        (work / "random.csv").write_bytes(noise)
        cwd = os.getcwd()
        os.chdir(work)
        try:
            code, out, err = run_main(argv)
        finally:
            os.chdir(cwd)
        check(code, out, err, argv)
        if code == 2 and argv[0] == "replay":  # a failed replay leaves nothing behind
            assert not [p for p in work.rglob(".*") if p.is_file()], argv


@settings(max_examples=40)
@given(data=st.binary(min_size=1, max_size=2_000), suffix=st.sampled_from([".parquet", ".csv", ".arrow"]))
def test_random_bytes_as_input_files(files, data, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"random{suffix}"
        path.write_bytes(data)
        argv = ["replay", str(path), "-q", "-m", "raw", "-o", str(Path(tmp) / "out.parquet")]
        check(*run_main(argv), argv)


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "garbage.parquet"],
        ["replay", "zero.csv", "-q"],
        ["replay", "good.parquet", "--batch-size", "nan"],
        ["replay", "good.parquet", "-o", "good.parquet"],
        ["replay", "good.csv", "-m", "raw", "-q", "-o", "out.parquet"],
        ["generate", "sub", "-n", "-1"],
    ],
)
def test_real_processes_exit_with_status_0_or_2(files, tmp_path, argv):
    work = tmp_path / "w"
    shutil.copytree(files, work)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-m", "streamcal.cli", *argv], cwd=work, env=env, capture_output=True, text=True, check=False, timeout=600
    )
    assert res.returncode >= 0, f"killed by signal {-res.returncode}"
    check(res.returncode, res.stdout, res.stderr, argv)
