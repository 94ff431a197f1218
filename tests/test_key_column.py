"""Integer key columns are coded as ``np.unique`` codes them (sorted keys, inverse), through the
table over a narrow span of keys and through the sort for wide ones, for every integer dtype."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streamcal._keys import as_key_column

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def unique_coding(arr):
    keys, codes = np.unique(arr, return_inverse=True)
    return codes.reshape(-1), [int(v) for v in keys.tolist()]


def check(arr):
    column = as_key_column(arr)
    codes, keys = unique_coding(arr)
    assert column.keys == keys
    assert all(type(k) is int for k in column.keys)
    assert np.array_equal(column.codes, codes)
    assert column.codes.dtype == np.intp


@settings(max_examples=200, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_integer_columns_code_as_unique_does(data, dtype):
    info = np.iinfo(dtype)
    # narrow spans (the table) next to any value of the dtype, and the dtype's whole range (the sort)
    base = data.draw(st.integers(int(info.min), int(info.max)))
    width = data.draw(st.sampled_from([1, 3, 300, 70_000, int(info.max) - int(info.min)]))
    lo = max(int(info.min), min(base, int(info.max) - width))
    hi = min(int(info.max), lo + width)
    arr = data.draw(hnp.arrays(dtype, st.integers(0, 60), elements=st.integers(lo, hi)))
    check(arr)


@pytest.mark.parametrize("dtype", DTYPES)
def test_extremes_of_each_dtype(dtype):
    info = np.iinfo(dtype)
    for values in ([info.min, info.max], [info.max, info.max - 2, info.max - 1], [info.min + 1, info.min], [info.max]):
        check(np.array(values, dtype=dtype))
    check(np.array([], dtype=dtype))
    check(np.random.default_rng(0).integers(info.min, info.max, 5000, dtype=dtype, endpoint=True))
