"""A null in a pandas, polars or pyarrow column is named as a missing value, at its position.

These libraries hand their nulls to numpy as NaN; the error says what the user's column holds
(a null), not the NaN it became, and a rejected call changes nothing.
"""

import pickle
import re

import numpy as np
import pytest

import streamcal
from streamcal import metrics

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

MISSING = re.escape("got a missing value (null / NA) at position")


def _columns():
    """(library, a float column with a null at position 1, an int column with a null at 2)."""
    out = [
        ("pandas", pd.Series([0.1, None, 0.3, 0.4], dtype="Float64"), pd.Series([1, 0, None, 1], dtype="Int64")),
        ("pyarrow", pa.array([0.1, None, 0.3, 0.4]), pa.array([1, 0, None, 1])),
    ]
    try:
        import polars as pl
    except ImportError:  # polars is optional: the other two libraries still run
        return out
    out.append(("polars", pl.Series([0.1, None, 0.3, 0.4]), pl.Series([1, 0, None, 1])))
    return out


COLUMNS = _columns()
IDS = [c[0] for c in COLUMNS]


def _rejects(cal, call, needle):
    before = pickle.dumps(cal.__getstate__())
    with pytest.raises(ValueError, match=needle):
        call()
    assert pickle.dumps(cal.__getstate__()) == before


@pytest.mark.parametrize(("lib", "floats", "ints"), COLUMNS, ids=IDS)
def test_pav_names_nulls(lib, floats, ints):
    cal = streamcal.PAVCalibrator()
    cal.update([0.2, 0.6, 0.7, 0.9], [0, 1, 0, 1])
    good = [0.1, 0.2, 0.3, 0.4]
    _rejects(cal, lambda: cal.update(floats, [1, 0, 0, 1]), rf"`scores` must be finite; {MISSING} 1\.")
    _rejects(cal, lambda: cal.update(good, ints), rf"`labels` .*; {MISSING} 2\.")
    _rejects(cal, lambda: cal.update(good, [1, 0, 0, 1], weights=floats), rf"`weights` .*; {MISSING} 1\.")
    _rejects(cal, lambda: cal.process(good, ints, [True, True, True, False]), rf"`labels` .*; {MISSING} 2\.")
    with pytest.raises(ValueError, match=rf"`scores` must be finite; {MISSING} 1\."):
        cal.predict_proba(floats)


@pytest.mark.parametrize(("lib", "floats", "ints"), COLUMNS, ids=IDS)
def test_times_and_refitted_maps_name_nulls(lib, floats, ints):
    timed = streamcal.PAVCalibrator(window=streamcal.TimeWindow(10.0))
    _rejects(timed, lambda: timed.update([0.1, 0.2, 0.3, 0.4], [1, 0, 0, 1], times=floats), rf"`times` .*; {MISSING} 1\.")
    platt = streamcal.PlattCalibrator()
    _rejects(platt, lambda: platt.update(floats, [1, 0, 0, 1]), rf"`scores` must be finite; {MISSING} 1\.")


@pytest.mark.parametrize(("lib", "floats", "ints"), COLUMNS, ids=IDS)
def test_keyed_names_nulls(lib, floats, ints):
    for cal in (streamcal.KeyedCalibrator(), streamcal.KeyedCalibrator(streamcal.PlattCalibrator())):
        cal.update([1, 2], [0.3, 0.6], [0, 1])
        keys = [1, 2, 3, 4]
        _rejects(cal, lambda c=cal: c.update(keys, floats, [1, 0, 0, 1]), rf"`scores` must be finite; {MISSING} 1\.")
        _rejects(cal, lambda c=cal: c.update(keys, [0.1, 0.2, 0.3, 0.4], ints), rf"`labels` .*; {MISSING} 2\.")


@pytest.mark.parametrize(("lib", "floats", "ints"), COLUMNS, ids=IDS)
def test_metrics_name_nulls(lib, floats, ints):
    with pytest.raises(ValueError, match=rf"`proba` .*; {MISSING} 1\."):
        metrics.log_loss([1, 0, 1, 0], floats)
    with pytest.raises(ValueError, match=rf"`labels` .*; {MISSING} 2\."):
        metrics.log_loss(ints, [0.1, 0.2, 0.3, 0.4])


def test_numpy_nan_is_still_nan():
    """A NaN the caller wrote as one is shown as one."""
    cal = streamcal.PAVCalibrator()
    with pytest.raises(ValueError, match=r"`scores` must be finite; got nan at position 1\."):
        cal.update(np.array([0.1, np.nan]), [0, 1])
    with pytest.raises(ValueError, match=r"`labels` .*; got nan at position 1\."):
        cal.update([0.1, 0.2], np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match=r"`weights` .*; got nan at position 0\."):
        cal.update([0.1, 0.2], [0, 1], weights=[np.nan, 1.0])


def test_a_float32_parameter_is_checked_against_its_bounds_without_a_numpy_warning():
    """A NumPy float32 compared with a bound beyond its range (1e300) overflowed in the cast, with a
    RuntimeWarning; it is compared as the Python float it holds."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for cls in (streamcal.PAVCalibrator, streamcal.ISplineCalibrator):
            cal = cls(llr_pseudo_count=np.float32(2.5))
            assert cal.llr_pseudo_count == 2.5
            with pytest.raises(ValueError, match=r"`llr_pseudo_count` must be a number in"):
                cls(llr_pseudo_count=np.float32(0.0))
        assert streamcal.KeyedOffsetCalibrator(between_key_variance=np.float32(0.5)) is not None
