"""What replay says about its inputs and its results: errors name the column, row, value and
types at fault; the summary's notes say what its counts and flags mean."""

from __future__ import annotations

import csv

import pytest

from streamcal.replay import ReplayInputError, generate, replay


@pytest.fixture(scope="module")
def click_csv(tmp_path_factory):
    """2,000 click events in CSV (timestamps as text, label times late)."""
    path = tmp_path_factory.mktemp("clicks-csv") / "clicks.csv"
    generate(path, "click", n=2_000, seed=5)
    return path


def with_cell(src, dst, column: str, row: int, text: str):
    """``src`` with data row ``row`` (0: the first after the header) of ``column`` set to ``text``."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    rows[1 + row][rows[0].index(column)] = text
    with open(dst, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return dst


@pytest.mark.parametrize("column", ["event_time", "label_time"])
def test_a_csv_time_cell_that_is_neither_number_nor_timestamp_is_named_with_its_row(tmp_path, click_csv, column):
    bad = with_cell(click_csv, tmp_path / "bad.csv", column, 49, "notatime")
    with pytest.raises(ReplayInputError) as err:
        replay(bad, "raw")
    msg = str(err.value)
    assert f"column '{column}'" in msg
    assert "Its row 49 holds 'notatime', which is neither a number nor a timestamp." in msg
