"""Loose ends across the package: generated files carry page checksums that replay verifies,
rejected calls on the composed classifier change nothing, bucket grids too wide to divide say
so, install hints match how streamcal was installed, and a clashing ``streamcal`` distribution
is named at import."""

from __future__ import annotations

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
