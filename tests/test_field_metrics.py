"""Per-key calibration metrics and the checks of key columns, against slow references."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal._keys import as_key_column
from streamcal.metrics import field_ece, field_rce, per_key_calibration


def naive_per_key(keys, y, p, w):
    table = {}
    for k, yi, pi, wi in zip(keys, y, p, w, strict=True):
        row = table.setdefault(k, [0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += wi
        row[2] += wi * yi
        row[3] += wi * pi
    return {k: table[k] for k in sorted(table)}


def naive_field_rce(keys, y, p, w):
    rows = [r for r in naive_per_key(keys, y, p, w).values() if r[2] > 0]
    if not rows:
        return math.nan
    # the relative error first: a tiny weight times a tiny difference would underflow to 0
    return sum(r[1] * (abs(r[2] - r[3]) / r[2]) for r in rows) / sum(r[1] for r in rows)


def naive_field_ece(keys, y, p, w):
    rows = naive_per_key(keys, y, p, w).values()
    return sum(abs(r[2] - r[3]) for r in rows) / sum(r[1] for r in rows)


@settings(deadline=None, max_examples=60)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.booleans(), st.floats(0.0, 1.0), st.floats(0.0, 3.0)),
        min_size=1,
        max_size=80,
    ),
    st.booleans(),
)
def test_field_metrics_equal_the_naive_sums(events, as_strings):
    keys = [f"k{k}" if as_strings else k for k, *_ in events]
    y = [float(e[1]) for e in events]
    p = [e[2] for e in events]
    w = [e[3] for e in events]
    if sum(w) == 0.0:
        w[0] = 1.0
    table = per_key_calibration(keys, y, p, w)
    want = naive_per_key(keys, y, p, w)
    assert table["key"] == list(want)
    np.testing.assert_array_equal(table["events"], [r[0] for r in want.values()])
    np.testing.assert_allclose(table["positives"], [r[2] for r in want.values()], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(table["predicted"], [r[3] for r in want.values()], rtol=1e-12, atol=1e-12)
    rce = field_rce(keys, y, p, w)
    want_rce = naive_field_rce(keys, y, p, w)
    assert (math.isnan(rce) and math.isnan(want_rce)) or rce == pytest.approx(want_rce, rel=1e-10, abs=1e-12)
    assert field_ece(keys, y, p, w) == pytest.approx(naive_field_ece(keys, y, p, w), rel=1e-10, abs=1e-12)


def test_a_globally_calibrated_stream_can_be_wrong_for_every_key():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2, size=200_000)
    p = np.full(keys.size, 0.1)
    y = rng.uniform(size=keys.size) < np.where(keys == 0, 0.05, 0.15)  # on average 0.1
    assert abs(np.mean(y) - 0.1) < 0.005
    assert field_ece(keys, y, p) == pytest.approx(0.05, abs=0.003)
    assert field_rce(keys, y, p) == pytest.approx(0.5 * (1.0 + 1.0 / 3.0), abs=0.03)
    ratio = per_key_calibration(keys, y, p)["ratio"]
    assert ratio[0] > 1.8
    assert ratio[1] < 0.7


def test_ratio_of_a_key_without_positives():
    table = per_key_calibration([1, 2, 2], [0, 1, 0], [0.2, 0.5, 0.0])
    assert table["ratio"][0] == math.inf
    assert field_rce([1, 1], [0, 0], [0.2, 0.3]) != field_rce([1, 1], [0, 0], [0.2, 0.3])  # nan: no positive


@pytest.mark.parametrize(
    "make",
    [
        lambda k: np.array(k),
        lambda k: list(k),
        lambda k: pa.array(k),
        lambda k: pa.chunked_array([k[:2], k[2:]]),
        lambda k: pd.Series(k),
        lambda k: pl.Series(k),
    ],
    ids=["numpy", "list", "arrow", "chunked", "pandas", "polars"],
)
@pytest.mark.parametrize("keys", [[3, 1, 3, 7], ["x", "a", "x", "b"]])
def test_every_column_form_codes_the_same_keys(make, keys):
    column = as_key_column(make(keys))
    assert column.keys == sorted(set(keys))
    assert [column.keys[c] for c in column.codes] == keys


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        ([1, None, 2], r"got None at position 1 \(a missing key\)"),
        (["a", float("nan")], r"at position 1 \(a missing key\)"),
        ([1, "a"], r"position 1 \(the keys before it are ints"),
        (np.array([1.0, 2.0]), r"position 0 \(a float\)"),
        (np.array([1.0, np.nan]), r"position 1 \(a missing key\)"),
        ([True, False], r"position 0 \(a bool\)"),
        ([1, [2]], r"position 1 \(a list\)"),
        (pa.array([1, None]), r"position 1 \(a missing key\)"),
        (pd.Series(["a", None]), r"position 1 \(a missing key\)"),
        (pl.Series([1, None]), r"position 1 \(a missing key\)"),
    ],
)
def test_bad_keys_are_refused_by_position(keys, match):
    with pytest.raises(ValueError, match=match):
        as_key_column(keys)
    with pytest.raises(ValueError, match=match):
        field_ece(keys, [0] * len(keys), [0.5] * len(keys))


def test_a_key_column_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match=r"`keys` must hold one key per event \(3\); got 2"):
        field_rce([1, 2], [0, 1, 0], [0.1, 0.2, 0.3])
