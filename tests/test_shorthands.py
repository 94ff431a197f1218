"""The values people type: ``buckets=1024``, ``window=100_000``, ``window="7d"``, ``fit``, and
every reasonable form of an array argument (lists, ``(n, 1)`` arrays, pandas / polars)."""

from __future__ import annotations

import inspect
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamcal import (
    GEVCalibrator,
    IsotonicCalibrator,
    ISplineCalibrator,
    OneVsRestCalibrator,
    PairwiseCouplingCalibrator,
    PAVCalibrator,
    PlattCalibrator,
    merge,
)
from streamcal._validation import as_1d_float, call_repr
from streamcal.buckets import MAX_BUCKETS, Edges, LogitGrid, QuantileEdges, UniformGrid, as_buckets
from streamcal.persist import from_bytes, to_bytes
from streamcal.replay.methods import make_buckets, make_calibrator, make_window
from streamcal.windows import (
    MAX_WINDOW_EVENTS,
    CountWindow,
    Decay,
    TimeWindow,
    Unbounded,
    as_decay,
    as_window,
)

ROOT = Path(__file__).resolve().parents[1]


def params_of(strategy) -> dict:
    """A strategy's constructor parameters as it stores them, under their own names (what
    river's ``clone`` reads back)."""
    return {name: getattr(strategy, name) for name in inspect.signature(type(strategy)).parameters}

# every binary streaming calibrator, with parameters that make them refit often enough to matter
CALIBRATORS = [
    (PAVCalibrator, {}),
    (ISplineCalibrator, {"refit_every": 50}),
    (GEVCalibrator, {"refit_every": 50}),
    (PlattCalibrator, {"refit_every": 50}),
]
CAL_IDS = [cls.__name__ for cls, _ in CALIBRATORS]


def events(rng, n=2_000):
    s = rng.uniform(size=n)
    y = rng.uniform(size=n) < s**2
    w = rng.integers(1, 4, size=n).astype(np.float64)
    t = np.cumsum(rng.exponential(30.0, size=n))
    return s, y, w, t


def state(cal) -> bytes:
    """The learned state (the ``_``-prefixed attributes) as bytes: equal states, equal bytes."""
    return pickle.dumps(sorted((k, v) for k, v in cal.__getstate__().items() if k.startswith("_")))


def outputs(cal, grid=np.linspace(0.0, 1.0, 101)):
    return cal.predict_proba(grid), cal.predict_llr(grid)


def assert_same(a, b):
    for x, y in zip(outputs(a), outputs(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert state(a) == state(b)


# ---------------------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, Unbounded()),
        (100_000, CountWindow(100_000)),
        (np.int64(500), CountWindow(500)),
        ("100000", CountWindow(100_000)),
        ("100_000", CountWindow(100_000)),
        ("1e5", CountWindow(100_000)),
        (" 250 ", CountWindow(250)),
        (MAX_WINDOW_EVENTS, CountWindow(MAX_WINDOW_EVENTS)),
        ("7d", TimeWindow(604_800.0)),
        ("12h", TimeWindow(43_200.0)),
        ("30m", TimeWindow(1_800.0)),
        ("30min", TimeWindow(1_800.0)),
        ("3600s", TimeWindow(3_600.0)),
        ("1w", TimeWindow(604_800.0)),
        ("1.5h", TimeWindow(5_400.0)),
        ("0.1s", TimeWindow(0.1)),
        ("500ms", TimeWindow(0.5)),
        ("2 d", TimeWindow(172_800.0)),
    ],
    ids=repr,
)
def test_as_window_reads_the_shorthands(value, expected):
    got = as_window(value)
    assert type(got) is type(expected)
    assert params_of(got) == params_of(expected)
    assert type(params_of(got).get("n", 0)) is int  # a numpy int becomes an int


def test_as_window_passes_strategies_through():
    for w in (CountWindow(5), TimeWindow(2.0), Decay(7.0), Unbounded()):
        assert as_window(w) is w


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (0, ValueError, r"`window` must be a positive number of events, an int in \[1, 2\*\*53\]; got 0\."),
        (-5, ValueError, r"`window` must be a positive number of events.*got -5\."),
        ("0", ValueError, r"`window` must be a positive number of events.*got '0'\."),
        ("-5", ValueError, r"got '-5'"),
        ("7x", ValueError, r"`window` = '7x' has an unknown unit 'x'; the units are ms, s, m"),
        ("7D", ValueError, r"unknown unit 'D'"),
        ("abc", ValueError, r"`window` must be a whole number of events .* or a duration .*got 'abc'"),
        ("", ValueError, r"`window` must be a whole number of events"),
        ("inf", ValueError, r"got 'inf'"),
        ("nan", ValueError, r"got 'nan'"),
        ("1.5", ValueError, r"`window` = '1.5' is not a whole number of events; .* '1.5s'"),
        ("0s", ValueError, r"`window` must be a positive duration; got '0s'"),
        ("-3h", ValueError, r"`window` must be a positive duration; got '-3h'"),
        ("1e400d", ValueError, r"`window` = '1e400d' is too large: a duration must be a finite"),
        (99999999999999999999, ValueError, r"`window` = 99999999999999999999 is too large: .*\[1, 2\*\*53\]"),
        ("99999999999999999999", ValueError, r"`window` = '99999999999999999999' is too large"),
        (MAX_WINDOW_EVENTS + 1, ValueError, r"is too large"),
        (1.5, TypeError, r"`window` must be an int .*got 1.5 of type float.*'1.5s'"),
        (100_000.0, TypeError, r"got 100000.0 of type float"),
        (True, TypeError, r"`window` must be .*got True of type bool\."),
        (np.bool_(True), TypeError, r"of type bool"),
        ([100], TypeError, r"got \[100\] of type list"),
        (CountWindow, TypeError, r"of type type"),
    ],
    ids=repr,
)
def test_as_window_rejects_with_a_clear_message(value, error, match):
    with pytest.raises(error, match=match):
        as_window(value)


def test_as_decay():
    assert params_of(as_decay(10_000)) == params_of(Decay(10_000.0))
    assert params_of(as_decay("3d")) == params_of(Decay(259_200.0, by="time"))
    d = Decay(5.0)
    assert as_decay(d) is d
    with pytest.raises(TypeError, match=r"`decay` must be a half-life.*got 1.5 of type float.*Decay\(1.5\)"):
        as_decay(1.5)
    with pytest.raises(TypeError, match=r"`decay` must be a half-life"):
        as_decay(CountWindow(5))
    with pytest.raises(ValueError, match=r"`--decay` must be a positive number of events"):
        as_decay("0", "--decay")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, LogitGrid()),
        (1024, LogitGrid(1024)),
        (np.int32(16), LogitGrid(16)),
        (2, LogitGrid(2)),
        (MAX_BUCKETS, LogitGrid(MAX_BUCKETS)),
        ("256", LogitGrid(256)),
        ("1_024", LogitGrid(1024)),
        ("logit:512", LogitGrid(512)),
        ("uniform:100", UniformGrid(100)),
        ("quantile:64", QuantileEdges(64)),
        (" Quantile : 8 ", QuantileEdges(8)),
        ("uniform:64:-8:8", UniformGrid(64, low=-8.0, high=8.0)),
        ("uniform:10:0:1e3", UniformGrid(10, low=0.0, high=1000.0)),
        (" uniform : 5 : -1.5 : .5 ", UniformGrid(5, low=-1.5, high=0.5)),
    ],
    ids=repr,
)
def test_as_buckets_reads_the_shorthands(value, expected):
    got = as_buckets(value)
    assert type(got) is type(expected)
    assert params_of(got) == params_of(expected)
    assert type(got.n_buckets) is int


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (1, ValueError, r"`buckets` must be a number of buckets in \[2, 16777216\]; got 1 \(one bucket"),
        (0, ValueError, r"`buckets` must be a number of buckets in \[2, 16777216\]; got 0\.$"),
        (-3, ValueError, r"got -3\."),
        ("logit:1", ValueError, r"got 'logit:1' \(one bucket"),
        (MAX_BUCKETS + 1, ValueError, r"`buckets` = 16777217 is too large"),
        (10**20, ValueError, r"is too large: the number of buckets must be an int in \[2, 16777216\]"),
        (True, TypeError, r"`buckets` must be an int number of buckets .*got True of type bool"),
        (1.5, TypeError, r"got 1.5 of type float"),
        (1024.0, TypeError, r"got 1024.0 of type float"),
        ("cubic:5", ValueError, r"got 'cubic:5'"),
        ("x", ValueError, r"`buckets` must be .*got 'x'"),
        ([0.0, 1.0], TypeError, r"of type list"),
        ("uniform:5:3:1", ValueError, r"`buckets` = 'uniform:5:3:1': the range must be finite with LOW < HIGH"),
        ("uniform:5:0:1e400", ValueError, r"the range must be finite"),
        ("uniform:5:-8", ValueError, r"'uniform:N:LOW:HIGH'.*got 'uniform:5:-8'"),
        ("quantile:5:0:1", ValueError, r"got 'quantile:5:0:1'"),
    ],
    ids=repr,
)
def test_as_buckets_rejects_with_a_clear_message(value, error, match):
    with pytest.raises(error, match=match):
        as_buckets(value)


def test_explicit_strategies_check_their_limits():
    # the explicit forms are bounded as the shorthands are: a clear error, not numpy's
    with pytest.raises(ValueError, match=r"`n` must be an int in \[1, 9007199254740992\]; got 100000000000000000000"):
        PAVCalibrator(window=CountWindow(10**20))
    with pytest.raises(ValueError, match=r"`n_buckets` must be an int in \[1, 16777216\]"):
        PAVCalibrator(buckets=LogitGrid(10**20))
    # a ring too large to allocate is a clear error too, not a MemoryError
    with pytest.raises(ValueError, match=r"window=CountWindow\(n=1125899906842624\)\) needs .* GiB"):
        PAVCalibrator(window=CountWindow(2**50))


def test_replay_and_its_cli_use_the_same_parsers():
    assert repr(make_window("7d")) == repr(as_window("7d"))
    assert repr(make_window(100)) == repr(CountWindow(100))
    assert repr(make_window(decay="3d")) == repr(as_decay("3d"))
    assert repr(make_buckets("uniform:50")) == repr(UniformGrid(50))
    custom = object()  # a registered method's own window or buckets pass through
    assert make_window(custom) is custom
    assert make_buckets(custom) is custom
    with pytest.raises(TypeError, match="`window`"):
        make_window(1.5)
    cal = make_calibrator("pav", buckets=64, window="2h")
    assert repr(cal.window) == "TimeWindow(seconds=7200.0)"
    assert repr(cal.buckets) == "LogitGrid(n_buckets=64)"


def cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "streamcal.replay", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--window", "99999999999999999999", "`--window` = '99999999999999999999' is too large"),
        ("--window", "7x", "`--window` = '7x' has an unknown unit 'x'"),
        ("--window", "0", "`--window` must be a positive number of events"),
        ("--window", "1.5", "`--window` = '1.5' is not a whole number of events"),
        ("--decay", "1.5", "`--decay` = '1.5' is not a whole number of events"),
        ("--buckets", "1", "`--buckets` must be a number of buckets in [2, 16777216]"),
        ("--buckets", "cubic:4", "`--buckets` must be an int number of buckets"),
    ],
)
def test_cli_options_give_one_clear_line(tmp_path, option, value, message):
    res = cli("replay", "missing.parquet", option, value, "--quiet", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("streamcal: error: " + message.replace(f"`{option}`", option))
    assert res.stderr.count("\n") == 1
    assert "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------- reprs


def test_strategy_reprs_read_as_calls():
    assert repr(CountWindow(100_000)) == "CountWindow(n=100000)"
    assert repr(TimeWindow(3600.0)) == "TimeWindow(seconds=3600.0)"
    assert repr(Decay(1000.0)) == "Decay(half_life=1000.0)"
    assert repr(Decay(60.0, by="time")) == "Decay(half_life=60.0, by='time')"
    assert repr(Unbounded()) == "Unbounded()"
    assert repr(LogitGrid(1024)) == "LogitGrid(n_buckets=1024)"
    assert repr(LogitGrid(8, low=0.01)) == "LogitGrid(n_buckets=8, low=0.01)"
    assert repr(UniformGrid(10, -1.0, 1.0)) == "UniformGrid(n_buckets=10, low=-1.0)"
    assert repr(QuantileEdges(32, warmup=500)) == "QuantileEdges(n_buckets=32, warmup=500)"
    assert repr(Edges((0.0, 0.5, 1.0))) == "Edges(edges=(0.0, 0.5, 1.0))"
    long = Edges(tuple(np.linspace(0.0, 1.0, 11)))
    assert repr(long) == "Edges(edges=(0.0, 0.1, ...11 values..., 1.0))"
    for obj in (CountWindow(7), TimeWindow(2.5), Decay(3.0, by="time"), LogitGrid(8, low=0.01), UniformGrid(3)):
        namespace = {cls.__name__: cls for cls in (CountWindow, TimeWindow, Decay, LogitGrid, UniformGrid)}
        again = eval(repr(obj), namespace)  # short reprs are the calls that make them
        assert params_of(again) == params_of(obj)
    assert str(CountWindow(5)) == repr(CountWindow(5))
    assert call_repr(CountWindow(5)) == "CountWindow(n=5)"


@pytest.mark.parametrize(("cls", "params"), CALIBRATORS, ids=CAL_IDS)
def test_calibrator_repr_shows_the_parameters(cls, params):
    text = repr(cls(buckets=LogitGrid(1024), window=CountWindow(100_000), **params))
    assert "buckets=LogitGrid(n_buckets=1024)" in text
    assert "window=CountWindow(n=100000)" in text
    text = repr(cls(buckets=1024, window="7d", **params))
    assert "buckets=1024" in text
    assert 'window="7d"' in text


# ------------------------------------------------------------------ shorthands == explicit forms


SHORTHANDS = [
    ({"buckets": 256}, {"buckets": LogitGrid(256)}, False),
    ({"buckets": "uniform:50"}, {"buckets": UniformGrid(50)}, False),
    ({"buckets": "quantile:32"}, {"buckets": QuantileEdges(32)}, False),
    ({"window": 300}, {"window": CountWindow(300)}, False),
    ({"window": "300"}, {"window": CountWindow(300)}, False),
    ({"window": np.int64(300)}, {"window": CountWindow(300)}, False),
    ({"window": "2h"}, {"window": TimeWindow(7200.0)}, True),
    ({"buckets": 64, "window": "1d"}, {"buckets": LogitGrid(64), "window": TimeWindow(86_400.0)}, True),
]


@pytest.mark.parametrize(("cls", "params"), CALIBRATORS, ids=CAL_IDS)
@pytest.mark.parametrize(("short", "explicit", "timed"), SHORTHANDS, ids=[repr(s) for s, _, _ in SHORTHANDS])
def test_shorthand_equals_its_explicit_form(cls, params, short, explicit, timed, rng):
    s, y, w, t = events(rng)
    a, b = cls(**short, **params), cls(**explicit, **params)
    times = {"times": t} if timed else {}
    pa = a.prequential(s, y, weights=w, **times)
    pb = b.prequential(s, y, weights=w, **times)
    for x, z in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(x, z)
    assert_same(a, b)
    # the parameter is stored as given; clone and a save/load keep it and the state
    for name, value in short.items():
        assert getattr(a, name) is value
        assert getattr(a.clone(), name) == value
    loaded = from_bytes(to_bytes(a))
    assert {k: getattr(loaded, k) for k in short} == short
    assert_same(loaded, b)
    follow = rng.uniform(size=50)
    more = {"times": t[-1] + np.arange(1.0, 51.0)} if timed else {}
    loaded.update(follow, follow > 0.5, **more)
    b.update(follow, follow > 0.5, **more)
    assert_same(loaded, b)


def test_a_river_loop_with_shorthands_equals_the_explicit_forms(rng):
    s, y, _, t = events(rng, 500)
    a = PAVCalibrator(buckets=128, window="1h")
    b = PAVCalibrator(buckets=LogitGrid(128), window=TimeWindow(3600.0))
    for si, yi, ti in zip(s.tolist(), y.tolist(), t.tolist(), strict=True):
        assert a.predict_proba_one({"s": si}) == b.predict_proba_one({"s": si})
        a.learn_one({"s": si}, yi, t=ti)
        b.learn_one({"s": si}, yi, t=ti)
    assert_same(a, b)


@pytest.mark.parametrize(("cls", "params"), CALIBRATORS, ids=CAL_IDS)
@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        ({"window": 0}, ValueError, "`window`"),
        ({"window": -5}, ValueError, "`window`"),
        ({"window": "7x"}, ValueError, "`window` = '7x'"),
        ({"window": 1.5}, TypeError, "`window`"),
        ({"window": True}, TypeError, "`window`"),
        ({"buckets": 1}, ValueError, "`buckets`"),
        ({"buckets": True}, TypeError, "`buckets`"),
        ({"buckets": 1.5}, TypeError, "`buckets`"),
    ],
    ids=repr,
)
def test_bad_shorthands_are_rejected_at_construction(cls, params, bad, error, match):
    with pytest.raises(error, match=match):
        cls(**bad, **params)


def test_merge_treats_a_shorthand_as_its_explicit_form(rng):
    s, y, _, _ = events(rng, 1_000)
    a = PAVCalibrator(window=400).update(s[:500], y[:500])
    b = PAVCalibrator(window=CountWindow(400)).update(s[500:], y[500:])
    whole = PAVCalibrator(window=400).update(s, y)
    merged = merge([a, b])
    for x, z in zip(outputs(merged), outputs(whole), strict=True):
        np.testing.assert_array_equal(x, z)
    for x, z in zip(merged.histogram(), whole.histogram(), strict=True):
        np.testing.assert_array_equal(x, z)
    with pytest.raises(ValueError, match="different `window`"):
        merge([a, PAVCalibrator(window=401)])


@pytest.mark.parametrize("cls", [PairwiseCouplingCalibrator, OneVsRestCalibrator])
def test_multiclass_calibrators_read_a_binary_shorthand(cls, rng):
    p = rng.dirichlet(np.ones(3), size=300)
    y = np.array([rng.choice(3, p=row) for row in p])
    a, b = cls(calibrator=PAVCalibrator(buckets=64)), cls(calibrator=PAVCalibrator(buckets=LogitGrid(64)))
    for row, label in zip(p, y.tolist(), strict=True):
        x = {c: float(row[c]) for c in range(3)}
        assert a.predict_proba_one(x) == b.predict_proba_one(x)
        a.learn_one(x, label)
        b.learn_one(x, label)
    assert a.predict_proba_one({0: 0.2, 1: 0.3, 2: 0.5}) == b.predict_proba_one({0: 0.2, 1: 0.3, 2: 0.5})


# ----------------------------------------------------------------------------------------- fit


FIT_WINDOWS = [
    (None, False),
    (CountWindow(300), False),
    ("1h", True),
    (Decay(200.0), False),
    ("quantile", False),
]


FIT_CALIBRATORS = [c for c in CALIBRATORS if c[0] is not ISplineCalibrator]  # its fit: see below


@pytest.mark.parametrize(("cls", "params"), FIT_CALIBRATORS, ids=[c.__name__ for c, _ in FIT_CALIBRATORS])
@pytest.mark.parametrize(("window", "timed"), FIT_WINDOWS, ids=repr)
def test_fit_equals_a_fresh_calibrator_plus_update(cls, params, window, timed, rng):
    s, y, w, t = events(rng)
    kw = {"buckets": QuantileEdges(64, warmup=300)} if window == "quantile" else {"window": window}
    times = {"times": t} if timed else {}
    fresh = cls(**kw, **params).update(s, y, weights=w, **times)
    cal = cls(**kw, **params)
    old = rng.uniform(size=100)  # state to be replaced
    cal.update(old, old > 0.5, **({"times": np.arange(100.0)} if timed else {}))
    cal.predict_proba(old)
    window_obj = cal.window
    assert cal.fit(s, y, sample_weight=w, **times) is cal
    assert cal.window is window_obj  # the parameter objects are the caller's
    assert_same(cal, fresh)
    assert to_bytes(cal) == to_bytes(fresh)  # the whole saved file, parameters included
    # positional sample_weight, as scikit-learn passes it
    again = cls(**kw, **params).fit(s, y, w, **times)
    assert to_bytes(again) == to_bytes(fresh)
    # and it goes on as the fresh one does
    more = rng.uniform(size=40)
    extra = {"times": t[-1] + np.arange(40.0)} if timed else {}
    np.testing.assert_array_equal(
        cal.prequential(more, more > 0.3, **extra)[0], fresh.prequential(more, more > 0.3, **extra)[0]
    )
    assert to_bytes(cal) == to_bytes(fresh)


def test_ispline_fit_keeps_its_exact_map_over_the_same_window_state(rng):
    # ISplineCalibrator.fit is documented to fit its map exactly on the raw scores (not on the
    # bucket centres): its window state is that of a fresh calibrator plus update, its map is
    # the batch fit
    s, y, w, _ = events(rng)
    cal = ISplineCalibrator(window=500).fit(s, y, sample_weight=w)
    fresh = ISplineCalibrator(window=500).update(s, y, weights=w)
    for got, want in zip(cal.window_histogram.arrays(), fresh.window_histogram.arrays(), strict=True):
        np.testing.assert_array_equal(got, want)
    assert cal.n_learned == fresh.n_learned


@pytest.mark.parametrize(("cls", "params"), CALIBRATORS, ids=CAL_IDS)
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda c, s, y: c.fit(s, y[:-1]), ValueError, "`labels` must have the same length"),
        (lambda c, s, y: c.fit(s, y, -np.ones(s.size)), ValueError, "`sample_weight` must be finite and non-neg"),
        (lambda c, s, y: c.fit(np.column_stack([s, s]), y), ValueError, r"`scores` must be 1-d or a single column"),
        (lambda c, s, y: c.fit(s + 1j, y), TypeError, r"`scores` must hold real numbers only; got complex numbers"),
        (lambda c, s, y: c.fit(s, y, times=s), ValueError, "needs event times|must not go backwards"),
    ],
    ids=["labels", "weights", "2 columns", "complex", "times"],
)
def test_a_rejected_fit_leaves_the_state_unchanged(cls, params, call, error, match, rng):
    s, y, _, t = events(rng, 300)
    cal = cls(window="1h", **params).update(s, y, times=t)
    before = to_bytes(cal)
    with pytest.raises(error, match=match):
        call(cal, s[::-1].copy(), y)
    assert to_bytes(cal) == before


def test_batch_isotonic_fit_takes_sample_weight_and_every_form(rng):
    s, y, w, _ = events(rng, 300)
    ref = IsotonicCalibrator().fit(s, y, sample_weight=w)
    for form in (s.tolist(), s[:, None], tuple(s)):
        got = IsotonicCalibrator().fit(form, y.tolist(), w[:, None])
        np.testing.assert_array_equal(got.predict_proba(s), ref.predict_proba(s))
        np.testing.assert_array_equal(got.predict_llr(s[:, None]), ref.predict_llr(s))


# --------------------------------------------------------------------------------- input forms


def _forms(x):
    """The forms of a 1-d array a user may pass, each with a name."""
    out = {
        "list": x.tolist(),
        "tuple": tuple(x.tolist()),
        "column": x[:, None],
        "list of rows": [[v] for v in x.tolist()],
        "read-only": np.frombuffer(x.tobytes(), dtype=x.dtype),
        "strided view": np.repeat(x, 2)[::2],
        "Fortran column": np.asfortranarray(np.column_stack([x, x]))[:, :1],
        "big-endian": x.astype(x.dtype.newbyteorder(">")),
    }
    try:
        import pandas as pd
    except ImportError:
        pass
    else:
        out["pandas Series"] = pd.Series(x, index=np.arange(x.size)[::-1])  # position, not index, counts
        out["pandas DataFrame"] = pd.DataFrame({"col": x})
    try:
        import polars as pl
    except ImportError:
        pass
    else:
        out["polars Series"] = pl.Series("col", x)
        out["polars DataFrame"] = pl.DataFrame({"col": x})
    try:
        import pyarrow as pa
    except ImportError:
        pass
    else:
        out["pyarrow Array"] = pa.array(x)
        out["pyarrow ChunkedArray"] = pa.chunked_array([x[:3], x[3:]])
        out["pyarrow Table"] = pa.table({"col": x})
    return out


def test_pandas_and_polars_forms_are_exercised():
    # pandas and polars are optional: streamcal never imports them; this suite has both, so the
    # forms below are really tested (see _forms)
    pytest.importorskip("pandas", reason="pandas is optional; its forms are tested where it is installed")
    pytest.importorskip("polars", reason="polars is optional; its forms are tested where it is installed")
    assert {"pandas Series", "pandas DataFrame", "polars Series", "polars DataFrame"} <= set(_forms(np.zeros(2)))


def test_streamcal_does_not_import_pandas_or_polars():
    code = (
        "import sys, numpy as np; from streamcal import PAVCalibrator; "
        "c = PAVCalibrator(window=100).fit(np.array([0.1, 0.9]), [0, 1]); c.predict_proba([[0.5]]); "
        "print(sorted(m for m in ('pandas', 'polars') if m in sys.modules))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert res.stdout.strip() == "[]"


@pytest.mark.parametrize(("cls", "params"), CALIBRATORS, ids=CAL_IDS)
def test_every_input_form_gives_the_outputs_of_a_float64_array(cls, params, rng):
    s, y, w, t = events(rng, 400)
    ref = cls(window="1h", **params)
    want = ref.prequential(s, y, weights=w, times=t)
    want_p = ref.predict_proba(s)
    for name, form in _forms(s).items():
        cal = cls(window="1h", **params)
        got = cal.prequential(form, y, weights=w, times=t)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
        np.testing.assert_array_equal(cal.predict_proba(form), want_p, err_msg=name)
        assert state(cal) == state(ref), name
    for field, x in (("labels", y), ("weights", w), ("times", t)):
        for name, form in _forms(x).items():
            cal = cls(window="1h", **params)
            kw = {"scores": s, "labels": y, "weights": w, "times": t, field: form}
            got = cal.prequential(kw["scores"], kw["labels"], weights=kw["weights"], times=kw["times"])
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b, err_msg=f"{field} as {name}")
    # other numeric dtypes of the scores: converted exactly
    grid = np.array([0.0, 0.25, 0.5, 1.0])
    for form in (grid.astype(np.float32), np.array([0, 1], dtype=np.int8), np.array([0, 1], dtype=np.uint64)):
        np.testing.assert_array_equal(ref.predict_proba(form), ref.predict_proba(form.astype(np.float64)))
    # process() takes the forms too, including its learn mask
    mask = rng.uniform(size=s.size) < 0.5
    a = cls(**params).process(s, y, mask)
    b = cls(**params).process(s[:, None], y.tolist(), mask[:, None])
    for x, z in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, z)


BAD_FORMS = [
    ("two columns", lambda s: np.column_stack([s, s]), ValueError, r"`scores` must be 1-d or a single column; got an array of shape \(\d+, 2\)"),
    ("a row of several", lambda s: s[None, :], ValueError, r"got an array of shape \(1, \d+\)"),
    ("3-d", lambda s: s[:, None, None], ValueError, r"shape \(\d+, 1, 1\)"),
    ("list of pairs", lambda s: [[v, v] for v in s.tolist()], ValueError, r"`scores` must be 1-d or a single column; got a list of shape \(\d+, 2\)"),
    ("complex", lambda s: s.astype(complex), TypeError, r"`scores` must hold real numbers only; got complex numbers \(dtype complex128\)"),
    ("complex, zero imaginary part", lambda s: s + 0j, TypeError, r"dtype complex128"),
    ("datetime64", lambda s: np.arange(s.size).astype("datetime64[s]"), TypeError, r"`scores` must hold real numbers only; got datetimes \(dtype datetime64\[s\]\)"),
    ("timedelta64", lambda s: np.arange(s.size).astype("timedelta64[s]"), TypeError, r"dtype timedelta64\[s\]"),
    ("strings", lambda s: [str(v) for v in s.tolist()], TypeError, r"`scores` must hold real numbers only; got strings \(dtype <U\d+\), such as '0\.\d+' at position 0"),
    ("object strings", lambda s: np.array([str(v) for v in s.tolist()], dtype=object), TypeError, r"`scores` must hold real numbers only; got '0\.\d+' of type str at position 0"),
    ("None inside", lambda s: [*s.tolist()[:3], None], TypeError, r"got None of type NoneType at position 3"),
    ("bytes", lambda s: np.array([b"0.5"] * s.size), TypeError, r"`scores` must hold real numbers only; got bytes \(dtype \|S3\), such as b'0\.5' at position 0"),
    ("bools", lambda s: s > 0.5, TypeError, r"`scores` must hold real numbers only; got bools \(dtype bool\)"),
    ("a string", lambda s: "0.5", TypeError, r"`scores` must be a 1-d array of numbers; got a str"),
    ("masked", lambda s: np.ma.masked_less(s, 0.5), TypeError, r"`scores` must be a 1-d array of numbers; got a masked array"),
    ("ragged", lambda s: [[0.1], [0.2, 0.3]], TypeError, r"`scores` must be a 1-d array of numbers; could not convert it"),
]


@pytest.mark.parametrize(("cls", "params"), CALIBRATORS, ids=CAL_IDS)
@pytest.mark.parametrize(("name", "make", "error", "match"), BAD_FORMS, ids=[b[0] for b in BAD_FORMS])
def test_bad_score_forms_are_rejected_and_leave_the_state_unchanged(cls, params, name, make, error, match, rng):
    s, y, _, _ = events(rng, 300)
    cal = cls(**params).update(s, y)
    before = to_bytes(cal)
    bad = make(s)
    for call in (
        lambda: cal.update(bad, y),
        lambda: cal.prequential(bad, y),
        lambda: cal.predict_proba(bad),
        lambda: cal.predict_llr(bad),
        lambda: cal.fit(bad, y),
    ):
        with pytest.raises(error, match=match):
            call()
        assert to_bytes(cal) == before


def test_bad_frames_name_their_shape():
    pd = pytest.importorskip("pandas", reason="pandas is optional; its forms are tested where it is installed")
    pl = pytest.importorskip("polars", reason="polars is optional; its forms are tested where it is installed")
    cal = PAVCalibrator()
    with pytest.raises(ValueError, match=r"`scores` must be 1-d or a single column; got a DataFrame of shape \(2, 2\)"):
        cal.predict_proba(pd.DataFrame({"a": [0.1, 0.2], "b": [0.3, 0.4]}))
    with pytest.raises(ValueError, match=r"`scores` must be 1-d or a single column; got a DataFrame of shape \(2, 3\)"):
        cal.predict_proba(pl.DataFrame({"a": [0.1, 0.2], "b": [0.3, 0.4], "c": [0.5, 0.6]}))
    with pytest.raises(TypeError, match=r"`scores` must hold real numbers only; got datetimes"):
        cal.predict_proba(pd.Series(pd.to_datetime(["2024-01-01", "2024-01-02"])))
    with pytest.raises(TypeError, match=r"`scores` must hold real numbers only; got (strings|'a' of type str at position 0)"):
        cal.predict_proba(pl.Series(["a", "b"]))
    with pytest.raises(ValueError, match=r"`labels` must be 1-d or a single column; got a DataFrame of shape \(2, 2\)"):
        cal.update([0.1, 0.2], pd.DataFrame({"a": [0, 1], "b": [1, 0]}))


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"labels": np.zeros((4, 2))}, ValueError, r"`labels` must be 1-d or a single column"),
        ({"weights": np.ones(4, dtype=bool)}, TypeError, r"`weights` must hold real numbers only; got bools"),
        ({"weights": np.ones(4, dtype=complex)}, TypeError, r"`weights` must hold real numbers only; got complex numbers \(dtype complex128\)"),
        ({"weights": np.ones((4, 2))}, ValueError, r"`weights` must be 1-d or a single column"),
        ({"times": np.arange(4).astype("datetime64[s]")}, TypeError, r"`times` must hold real numbers only; got datetimes"),
    ],
    ids=["labels 2 columns", "bool weights", "complex weights", "weights 2 columns", "datetime times"],
)
def test_bad_label_weight_and_time_forms(kw, error, match):
    cal = PAVCalibrator(window="1h").update([0.5], [1], times=[0.0])
    before = to_bytes(cal)
    args = {"scores": [0.1, 0.2, 0.3, 0.4], "labels": [0, 1, 0, 1], "weights": None, "times": [1.0, 2.0, 3.0, 4.0], **kw}
    with pytest.raises(error, match=match):
        cal.update(args["scores"], args["labels"], weights=args["weights"], times=args["times"])
    assert to_bytes(cal) == before


def test_the_float64_array_face_reads_the_callers_array_without_a_copy():
    x = np.linspace(0.0, 1.0, 11)
    assert as_1d_float(x, "scores", copy=False) is x
    assert as_1d_float(x, "scores") is not x
    cal = PAVCalibrator().update(x, x > 0.5)
    s, _ = cal._check_scores_and_buckets(x)  # the array face's checked scores: no public face
    assert s is x
    # a column, a list, a read-only array: converted once, into a fresh writeable array
    for form in (x[:, None], x.tolist(), np.frombuffer(x.tobytes())):
        got = as_1d_float(form, "scores", copy=False)
        assert got.flags.c_contiguous
        assert got.flags.writeable
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, x)


def test_labels_keep_the_callers_values_in_messages():
    cal = PAVCalibrator()
    with pytest.raises(ValueError, match=r"`labels` must hold binary labels .* got 'a' at position 1"):
        cal.update([0.1, 0.2], [0, "a"])
    with pytest.raises(ValueError, match=r"`labels` .* got 2 at position 1"):
        cal.update([0.1, 0.2], [[0], [2]])


def test_dask_fit_reads_the_shorthands(rng):
    dd = pytest.importorskip("dask.dataframe", reason="dask is optional; streamcal.dask is tested where it is installed")
    import pandas as pd

    s, y, w, t = events(rng, 3_000)
    frame = pd.DataFrame({"score": s, "label": y, "weight": w, "time": t})
    ddf = dd.from_pandas(frame, npartitions=4)
    from streamcal import dask as scd

    # quantile edges from the first rows (a shorthand has no `warmup` attribute of its own)
    fitted = scd.fit(PAVCalibrator(buckets="quantile:32"), ddf, "score", "label", scheduler="sync")
    single = PAVCalibrator(buckets=QuantileEdges(32)).update(s, y)
    np.testing.assert_array_equal(fitted.edges, single.edges)
    for a, b in zip(outputs(fitted), outputs(single), strict=True):
        np.testing.assert_array_equal(a, b)
    # a time window given as a duration needs the time column, and says so by its strategy's name
    with pytest.raises(ValueError, match="TimeWindow needs event times"):
        scd.fit(PAVCalibrator(window="2h"), ddf, "score", "label", scheduler="sync")
    fitted = scd.fit(PAVCalibrator(window="2h"), ddf, "score", "label", weight="weight", time="time", scheduler="sync")
    single = PAVCalibrator(window=TimeWindow(7200.0)).update(s, y, weights=w, times=t)
    for a, b in zip(outputs(fitted), outputs(single), strict=True):
        np.testing.assert_array_equal(a, b)
