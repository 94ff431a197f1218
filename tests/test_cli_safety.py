"""The command line never destroys data: outputs that collide with each other or with an input,
or that cannot be written, are refused before the run; temporary names are unique; zero-byte,
empty and corrupted inputs are clear errors; every error is one line with exit status 2."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamcal.replay._replay as replay_module
from streamcal.cli import main
from streamcal.replay import ReplayInputError, replay
from streamcal.replay._replay import _reserve_tmp


@pytest.fixture(scope="module")
def clicks(click_stream):
    return click_stream(3_000, seed=4, batch_size=1_000)


@pytest.fixture
def work(tmp_path, clicks, monkeypatch):
    """A working directory holding ``in.parquet`` (a copy of the stream) and an unrelated file
    ``x.parquet``; the tests run in it."""
    (tmp_path / "in.parquet").write_bytes(Path(clicks).read_bytes())
    (tmp_path / "x.parquet").write_bytes(b"precious results")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def snapshot(root: Path) -> dict:
    """Every file under ``root``: its bytes and modification time (to the nanosecond)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() or p.is_symlink():
            st = p.lstat()
            out[str(p.relative_to(root))] = (p.read_bytes() if p.is_file() else os.readlink(p), st.st_mtime_ns)
    return out


def cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *parts):
    assert code == 2, err
    assert err.startswith("streamcal: error: "), err
    assert err.count("\n") == 1, err
    assert err.endswith("\n"), err
    assert "Traceback" not in err
    for part in parts:
        assert part in err, (part, err)


def refused(capsys, monkeypatch, root, args, *parts, before_the_run=True):
    """The command fails with a one-line error (before reading any event, unless the error is
    in the events themselves), and every file under ``root`` is exactly as it was (bytes and
    mtime); no file is added."""

    def must_not_run(*_a, **_k):
        raise AssertionError("the replay started")

    before = snapshot(root)
    with monkeypatch.context() as patch:
        if before_the_run:
            patch.setattr(replay_module, "read_chunks", must_not_run)
        code, _, err = cli(capsys, "replay", *args, "--quiet")
    assert_one_line_error(code, err, *parts)
    assert snapshot(root) == before
    return err


# ---------------------------------------------------------------- outputs that collide


def test_outputs_that_collide_are_refused_before_the_run(work, capsys, monkeypatch):
    os.symlink(work / "in.parquet", work / "link.parquet")
    os.link(work / "in.parquet", work / "hard.parquet")
    (work / "sub").mkdir()
    cases = [
        (["in.parquet", "-o", "x.parquet", "--metrics-output", "x.parquet"], "--metrics-output and --output are the same file 'x.parquet'"),
        (["in.parquet", "-o", "x.parquet", "--metrics-output", "./sub/../x.parquet"], "are the same file"),
        (["in.parquet", "-o", "x.parquet", "--plot", "x.parquet"], "--plot and --output are the same file"),
        (["in.parquet", "-o", "in.parquet"], "--output would overwrite the input file 'in.parquet'"),
        (["in.parquet", "--metrics-output", "in.parquet"], "--metrics-output would overwrite the input file"),
        (["in.parquet", "--no-output", "--plot", "in.parquet"], "--plot would overwrite the input file"),
        (["in.parquet", "-o", "sub/../in.parquet"], "would overwrite the input file"),
        (["in.parquet", "-o", "link.parquet"], "--output would overwrite the input file"),  # symlink
        (["link.parquet", "-o", "in.parquet"], "--output would overwrite the input file"),
        (["in.parquet", "-o", "hard.parquet"], "--output would overwrite the input file"),  # hard link
        # the default output (in.replay.parquet) is given as the metrics output
        (["in.parquet", "--metrics-output", "in.replay.parquet"], "are the same file 'in.replay.parquet'"),
        (["in.parquet", "x.parquet", "-o", "x.parquet"], "would overwrite the input file 'x.parquet'"),
    ]
    for args, part in cases:
        refused(capsys, monkeypatch, work, args, part)


def test_outputs_inside_an_input_directory_are_refused(work, capsys, monkeypatch, clicks):
    d = work / "parts"
    d.mkdir()
    (d / "a.parquet").write_bytes(Path(clicks).read_bytes())
    refused(capsys, monkeypatch, work, ["parts", "-o", "parts/out.parquet"], "--output parts/out.parquet: is inside the input directory 'parts'")
    refused(capsys, monkeypatch, work, ["parts", "-o", "out.parquet", "--plot", "parts/p.png"], "--plot parts/p.png: is inside the input directory")


def test_output_paths_that_cannot_be_written_are_refused_before_the_run(work, capsys, monkeypatch):
    (work / "adir").mkdir()
    cases = [
        (["in.parquet", "-o", "adir"], "--output adir: is a directory; give a file name."),
        (["in.parquet", "-o", "missing/x.parquet"], "--output missing/x.parquet: the directory", "does not exist"),
        (["in.parquet", "--metrics-output", "missing/m.parquet"], "--metrics-output missing/m.parquet: the directory"),
        (["in.parquet", "-o", "in.parquet/x.parquet"], "is not a directory"),
        (["in.parquet", "--plot", "missing/p.png"], "--plot missing/p.png: the directory"),
        (["in.parquet", "--plot", "adir"], "--plot adir: is a directory"),
        (["in.parquet", "-o", "/dev/null"], "--output /dev/null: exists and is not a regular file"),
    ]
    for args, *parts in cases:
        refused(capsys, monkeypatch, work, args, *parts)
    assert Path("/dev/null").exists()
    assert not Path("/dev/null").is_file()


def test_python_api_refuses_the_same_before_the_run(work, monkeypatch):
    monkeypatch.setattr(replay_module, "read_chunks", lambda *a, **k: pytest.fail("the replay started"))
    before = snapshot(work)
    with pytest.raises(ValueError, match=r"^`metrics_output` and `output` are the same file 'x.parquet'"):
        replay("in.parquet", "raw", output="x.parquet", metrics_output="x.parquet")
    with pytest.raises(ValueError, match=r"^`output` would overwrite the input file"):
        replay("in.parquet", "raw", output=Path("in.parquet").resolve())
    with pytest.raises(ValueError, match=r"^output='missing/x.parquet': the directory '.*missing' does not exist"):
        replay("in.parquet", "raw", output="missing/x.parquet")
    assert snapshot(work) == before


# ---------------------------------------------------------------- temporary names


def test_temporary_names_are_unique_and_renamed_at_the_end(work, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    renames = []
    real_replace = os.replace

    def recording_replace(src, dst):
        if work in Path(os.path.abspath(dst)).parents:  # not numba's cache files, which a first compile writes so
            renames.append((Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(replay_module.os, "replace", recording_replace)
    (work / "out").mkdir()
    code, _, err = cli(
        capsys, "replay", "in.parquet", "-m", "raw", "-o", "out/r.parquet", "--metrics-output", "out/m.parquet", "--plot", "p.png", "-q"
    )
    assert code == 0, err
    assert [dst.name for _, dst in renames] == ["r.parquet", "m.parquet", "p.png"]
    sources = [src for src, _ in renames]
    assert len(set(sources)) == 3
    for src, dst in renames:
        assert src.parent == dst.parent  # renamed within its directory: atomic
        assert src.name.startswith(f".{dst.name}.")
        assert src.name.endswith(f".tmp{dst.suffix}")
    assert sorted(p.name for p in (work / "out").iterdir()) == ["m.parquet", "r.parquet"]
    assert not any(p.name.startswith(".") for p in work.rglob("*"))
    # two reservations of the same final name never share a temporary file
    a, b = _reserve_tmp("output", work / "r.parquet"), _reserve_tmp("output", work / "r.parquet")
    assert a != b
    assert a.exists()
    assert b.exists()


def test_an_existing_output_survives_a_failed_run(work, monkeypatch):
    table = pq.read_table("in.parquet")
    scores = table["score"].to_numpy().copy()
    scores[2_500] = np.nan  # the run fails after more than 2,000 events are written
    bad = table.set_column(table.schema.get_field_index("score"), "score", pa.array(scores))
    pq.write_table(bad, "bad.parquet")
    (work / "r.parquet").write_bytes(b"yesterday's results")
    before = snapshot(work)
    written = []
    real_open = replay_module._open_writer
    monkeypatch.setattr(replay_module, "_open_writer", lambda *a: written.append(a[0]) or real_open(*a))
    with pytest.raises(ReplayInputError, match=r"bad\.parquet', column 'score', row 2500"):
        replay("bad.parquet", "pav", output="r.parquet", metrics_output="m.parquet", batch_size=500)
    assert written  # batches were written before the error: under the temporary name only
    assert snapshot(work) == before


# ---------------------------------------------------------------- empty and corrupted inputs


def test_zero_byte_files_are_errors_naming_the_file(work, capsys, monkeypatch):
    (work / "zero.parquet").write_bytes(b"")
    (work / "zero.csv").write_bytes(b"")
    refused(capsys, monkeypatch, work, ["zero.parquet"], "file 'zero.parquet' is empty (0 bytes): not a Parquet file.")
    refused(capsys, monkeypatch, work, ["zero.csv"], "file 'zero.csv' is empty (0 bytes): a CSV file starts with a header line.")
    (work / "d").mkdir()
    (work / "d" / "a.parquet").write_bytes((work / "in.parquet").read_bytes())
    (work / "d" / "b.parquet").write_bytes(b"")
    refused(capsys, monkeypatch, work, ["d"], "file 'd/b.parquet' is empty (0 bytes)")


def test_an_empty_valid_file_is_an_error(work, capsys):
    pq.write_table(pq.read_table("in.parquet").slice(0, 0), "none.parquet")
    before = snapshot(work)
    code, _, err = cli(capsys, "replay", "none.parquet", "-q")
    assert_one_line_error(code, err, "the input holds no events: file 'none.parquet' has the columns but no rows.")
    assert snapshot(work) == before


def corrupt_middle_of_column(path: Path, column: str, n_bytes: int = 64) -> None:
    """Zero ``n_bytes`` in the middle of the first data page of ``column``."""
    meta = pq.ParquetFile(path).metadata.row_group(0)
    names = [meta.column(i).path_in_schema for i in range(meta.num_columns)]
    chunk = meta.column(names.index(column))
    start = chunk.data_page_offset + chunk.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[start : start + n_bytes] = bytes(n_bytes)
    path.write_bytes(bytes(data))


def test_a_corrupted_page_is_an_error_and_no_output_is_written(work, capsys):
    table = pq.read_table("in.parquet")
    options = {"compression": "none", "use_dictionary": False}
    pq.write_table(table, "sum.parquet", write_page_checksum=True, **options)
    pq.write_table(table, "nosum.parquet", **options)
    for name in ("sum.parquet", "nosum.parquet"):
        corrupt_middle_of_column(work / name, "score")
    before = snapshot(work)
    code, _, err = cli(capsys, "replay", "sum.parquet", "-q")
    assert_one_line_error(code, err, "file 'sum.parquet'", "CRC checksum verification failed")
    assert snapshot(work) == before
    # why the checksums matter: without them the same damage passes as data
    code, _, err = cli(capsys, "replay", "nosum.parquet", "-m", "raw", "-q", "-o", "nosum.out.parquet")
    assert code == 0, err
    changed = pq.read_table("nosum.out.parquet")["score"].to_numpy() != table["score"].to_numpy()
    assert 0 < changed.sum() <= 9  # 64 bytes: 8 doubles, or parts of 9


def test_outputs_carry_page_checksums(work, capsys):
    code, _, err = cli(capsys, "replay", "in.parquet", "-m", "raw", "-q", "-o", "r.parquet", "--metrics-output", "m.parquet")
    assert code == 0, err
    for name in ("r.parquet", "m.parquet"):
        corrupt_middle_of_column(work / name, "n_events" if name == "m.parquet" else "score", 16)
        with pytest.raises(OSError, match="CRC checksum verification failed"):
            pq.read_table(name, page_checksum_verification=True)
    code, _, err = cli(capsys, "replay", "r.parquet", "-m", "raw", "-q", "--no-output", "--keep-columns", "score")
    assert_one_line_error(code, err, "file 'r.parquet'", "CRC checksum verification failed")


# ---------------------------------------------------------------- one-line errors


def test_cli_errors_are_one_line_naming_the_option_and_value(work, capsys, monkeypatch):
    (work / "garbage.parquet").write_bytes(os.urandom(3_000))
    (work / "notes.txt").write_text("score,label\n0.5,1\n")
    pq.write_table(pa.table({"p": [0.2, 0.8], "label": [0, 1]}), "nocol.parquet")
    pq.write_table(pa.table({"score": [0.2, 0.8], "y": [0, 1]}), "nolabel.parquet")
    pq.write_table(pa.table({"score": [0.2, 0.8], "label": [0, 3]}), "threes.parquet")
    cases = [
        (["nope.parquet"], "input 'nope.parquet' does not exist."),
        (["garbage.parquet"], "file 'garbage.parquet': cannot be read as Parquet"),
        (["notes.txt"], "cannot tell the format of 'notes.txt'", "--format parquet"),
        (["nocol.parquet"], "the score column 'score' is missing; the input has columns ['p', 'label']; choose the score column with --score-col NAME."),
        (["nolabel.parquet"], "the label column 'label' is missing", "--label-col NAME"),
        (["in.parquet", "--time-col", "ts"], "the event time column 'ts' is missing", "choose the event time column with --time-col event_time, or replay in file order with --time-col ''."),
        (["in.parquet", "--time-col", "label_time", "--label-time-col", "lt"], "the label time column 'lt' is missing", "choose the label time column with --label-time-col event_time."),
        (["in.parquet", "--method", "pav,nope"], "--method: unknown method 'nope'; available methods: pav"),
        (["in.parquet", "--method", ","], "--method must name at least one method"),
        (["in.parquet", "--batch-size", "0"], "argument --batch-size: expected a positive number of rows", "got '0'"),
        (["in.parquet", "--batch-size", "nan"], "argument --batch-size:", "got 'nan'"),
        (["in.parquet", "--max-keys", "0"], "argument --max-keys: expected a positive number of keys", "got '0'"),
        (["in.parquet", "--batch-size", "-5"], "argument --batch-size:", "got '-5'"),
        (["in.parquet", "--batch-size", "2.5"], "argument --batch-size:", "got '2.5'"),
        (["in.parquet", "--metrics-window", "-1"], "argument --metrics-window:", "got '-1'"),
        (["in.parquet", "--metrics-window", "inf"], "argument --metrics-window:", "got 'inf'"),
        (["in.parquet", "--max-keys", "1e20"], "at most 2**53 = 9,007,199,254,740,992 (leave --max-keys out: no limit); got '1e20'"),
        (["in.parquet", "--label-delay", "nan"], "argument --label-delay: expected a delay >= 0", "got 'nan'"),
        (["in.parquet", "--label-delay", "-3"], "argument --label-delay: expected a delay >= 0: seconds, or a duration such as 30m, 2h, 3d; got '-3'"),
        (["in.parquet", "--label-delay=-1h"], "argument --label-delay: expected a delay >= 0", "got '-1h'"),
        # argparse reads "-1h" as an option: the message still says what a delay is
        (["in.parquet", "--label-delay", "-1h"], "argument --label-delay: expected a delay >= 0: seconds, or a duration such as 30m, 2h, 3d (see"),
        (["in.parquet", "--window", "-7d"], "argument --window: expected a window > 0: a number of events"),
        (["in.parquet", "--refit-every", "-3"], "argument --refit-every:", "got '-3'"),
        (["in.parquet", "--jobs", "x"], "argument --jobs: invalid int value: 'x'"),
        (["in.parquet", "--jobs", "0"], "--jobs must be"),
        (["in.parquet", "--buckets", "many"], "--buckets must be", "got 'many'"),
        (["in.parquet", "--metrics", "brier,auc"], "argument --metrics: unknown metric 'auc'"),
        (["in.parquet", "--score-col", ""], "--score-col must be a column name; got ''"),
        (["in.parquet", "--keep-columns", "nope"], "column 'nope': column to keep is missing", "--keep-columns"),
        (["in.parquet", "--format", "xls"], "argument --format: invalid choice: 'xls'"),
        (["in.parquet", "--no-output", "-o", "r.parquet"], "--no-output contradicts --output"),
        (["in.parquet", "--bogus"], "unrecognized arguments: --bogus (see 'streamcal replay --help')"),
        (["in.parquet", "--methd", "pav"], "unrecognized arguments: --methd pav; did you mean --method?"),
    ]
    for args, *parts in cases:
        refused(capsys, monkeypatch, work, args, *parts)
    # errors in the values themselves come while reading: still one line, still nothing written
    refused(
        capsys,
        monkeypatch,
        work,
        ["threes.parquet"],
        "column 'label', row 1: the label must be binary (0/1 or False/True); got 3 (choose the label column with --label-col NAME)",
        before_the_run=False,
    )


def test_an_unreadable_file_is_a_one_line_error(work, capsys, monkeypatch):
    from streamcal.replay._source import FileSource

    def denied(self):
        raise PermissionError(13, "Permission denied", self.path)

    monkeypatch.setattr(FileSource, "_parquet", denied)
    code, _, err = cli(capsys, "replay", "in.parquet", "-q")
    assert_one_line_error(code, err, "file 'in.parquet': cannot be read as Parquet: [Errno 13] Permission denied")


def test_generate_and_demo_errors_are_one_line(work, capsys):
    for args, part in (
        (["generate", "g.parquet", "--seed", "-1"], "argument --seed: expected a whole number 0 or more; got '-1'"),
        (["generate", "g.parquet", "-n", "1e400"], "argument -n/--rows:"),
        (["generate", "adir_missing/g.parquet", "--format", "csv", "--parts", "0"], "argument --parts:"),
        (["demo", "--n", "0"], "argument --n:"),
        (["nope"], "invalid choice: 'nope'"),
        (["--bogus"], "unrecognized arguments: --bogus (see 'streamcal --help')"),
        (["demo", "--nplot"], "unrecognized arguments: --nplot; did you mean --no-plot? (see 'streamcal demo --help')"),
        (["generate", "g.parquet", "--out", "x"], "unrecognized arguments: --out x (see 'streamcal generate --help')"),
        (["generate", "g.txt"], "PATH 'g.txt' names no format streamcal reads (*.parquet, *.arrow, *.csv)"),
        (["generate", "g.csv", "--format", "parquet"], "PATH 'g.csv' is named as csv but --format is 'parquet'"),
    ):
        code, _, err = cli(capsys, *args)
        assert_one_line_error(code, err, part)


def test_python_messages_keep_python_spelling(work):
    with pytest.raises(ReplayInputError, match=r"time_col='event_time', or replay in file order with time_col=None\.$") as info:
        replay("in.parquet", "raw", time_col="ts")
    assert "--" not in str(info.value)
    with pytest.raises(ValueError, match=r"^`batch_size` must be an int"):
        replay("in.parquet", "raw", batch_size=0)


def test_default_outputs_of_two_inputs_that_share_a_stem_are_not_the_same_file(work, capsys):
    """``in.parquet`` writes ``in.replay.parquet``; ``in.csv`` and ``in.2.csv`` keep their whole names,
    so no run overwrites another input's outputs."""
    table = pq.read_table(work / "in.parquet").select(["event_time", "score", "label"])
    import pyarrow.csv as pv

    for name in ("in.csv", "in.2.csv"):
        pv.write_csv(table, work / name)
    for name in ("in.parquet", "in.csv", "in.2.csv"):
        assert main(["replay", name, "--method", "pav", "--quiet"]) == 0
    capsys.readouterr()
    for name, stem in (("in.parquet", "in"), ("in.csv", "in.csv"), ("in.2.csv", "in.2.csv")):
        assert pq.read_table(work / f"{stem}.replay.parquet").num_rows == table.num_rows
        assert (work / f"{stem}.metrics.parquet").exists()
    assert (work / "x.parquet").read_bytes() == b"precious results"
