"""A window's default metrics computed together equal each metric's own function bit for bit,
and the computation steps aside (None) for whatever input a function would judge itself."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal._kernels import _config
from streamcal.metrics import brier_score, calibration_loss, cllr, ece, log_loss, min_cllr
from streamcal.metrics._window import WINDOW_METRICS, WindowWork, window_metrics
from streamcal.replay._evaluate import LOG_LOSS_EPS, MetricWindows, default_metrics

ORDER = ("brier", "log_loss", "cllr", "min_cllr", "ece", "calibration_loss")


def each_alone(y, p, llr) -> dict[str, float]:
    out = {
        "brier": brier_score(y, p),
        "log_loss": log_loss(y, p, eps=LOG_LOSS_EPS),
        "ece": ece(y, p),
        "calibration_loss": calibration_loss(y, p),
    }
    if 0 < y.sum() < y.size:
        out["cllr"] = cllr(y, llr)
        out["min_cllr"] = min_cllr(y, llr)
    return out


def window(rng, n):
    """Probabilities with ties, bin edges, 0 and 1; LLRs with ties and infinities."""
    p = rng.uniform(size=n)
    tied = rng.uniform(size=n) < 0.3
    p[tied] = np.round(p[tied], 2)
    edges = rng.uniform(size=n) < 0.1
    p[edges] = rng.integers(0, 11, size=int(edges.sum())) / 10
    p[rng.uniform(size=n) < 0.02] = 0.0
    p[rng.uniform(size=n) < 0.02] = 1.0
    y = (rng.uniform(size=n) < p).astype(np.float64)
    with np.errstate(divide="ignore"):
        llr = np.log(p) - np.log1p(-p)
    llr[rng.uniform(size=n) < 0.05] = 0.0
    return y, p, llr


@pytest.fixture(autouse=True)
def compiled():
    _config.use_compiled_kernels()  # the one-pass computation runs in the compiled tier only


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 127, 128, 129, 1_000, 4_097, 100_000])
def test_each_metric_equals_its_function_bit_for_bit(n):
    rng = np.random.default_rng(n)
    for _ in range(3 if n < 10_000 else 1):
        y, p, llr = window(rng, n)
        want = each_alone(y, p, llr)
        got = window_metrics(y, p, llr, [m for m in ORDER if m in want], eps=LOG_LOSS_EPS)
        assert set(got) == set(want)
        for name, value in want.items():
            assert np.float64(got[name]).tobytes() == np.float64(value).tobytes(), name
            assert type(got[name]) is float


def test_work_arrays_lent_from_window_to_window():
    """One set of work arrays for windows of growing and shrinking sizes: what a window leaves
    in them changes nothing of the next."""
    rng = np.random.default_rng(8)
    work = WindowWork()
    for n in (5_000, 200, 5_000, 9_000, 1, 3_000):
        y, p, llr = window(rng, n)
        want = each_alone(y, p, llr)
        assert window_metrics(y, p, llr, [m for m in ORDER if m in want], eps=LOG_LOSS_EPS, work=work) == want
        if n > 1:
            assert min_cllr(y, llr) == want["min_cllr"]


def test_each_metric_alone_and_in_any_order():
    rng = np.random.default_rng(3)
    y, p, llr = window(rng, 5_000)
    want = each_alone(y, p, llr)
    assert set(want) == WINDOW_METRICS
    for name in ORDER:
        assert window_metrics(y, p, llr, [name], eps=LOG_LOSS_EPS) == {name: want[name]}
    assert window_metrics(y, p, llr, ORDER[::-1], eps=LOG_LOSS_EPS) == want


@pytest.mark.parametrize(
    "change",
    [
        lambda y, p, llr: (y.__setitem__(3, 2.0), y, p, llr)[1:],
        lambda y, p, llr: (y.__setitem__(3, np.nan), y, p, llr)[1:],
        lambda y, p, llr: (p.__setitem__(3, 1.5), y, p, llr)[1:],
        lambda y, p, llr: (p.__setitem__(3, -0.1), y, p, llr)[1:],
        lambda y, p, llr: (p.__setitem__(3, np.nan), y, p, llr)[1:],
        lambda y, p, llr: (llr.__setitem__(3, np.nan), y, p, llr)[1:],
        lambda y, p, llr: (y, p.astype(np.float32), llr),
        lambda y, p, llr: (y.astype(bool), p, llr),
        lambda y, p, llr: (y, p[::2], llr[::2]),
        lambda y, p, llr: (y, p[:-1], llr),
        lambda y, p, llr: (list(y), p, llr),
        lambda y, p, llr: (y[:0], p[:0], llr[:0]),
    ],
)
def test_inputs_a_function_would_judge_are_left_to_it(change):
    rng = np.random.default_rng(4)
    y, p, llr = change(*window(rng, 1_000))
    assert window_metrics(y, p, llr, ORDER, eps=LOG_LOSS_EPS) is None


def test_the_inputs_are_not_changed():
    rng = np.random.default_rng(5)
    y, p, llr = window(rng, 2_000)
    copies = [a.copy() for a in (y, p, llr)]
    window_metrics(y, p, llr, ORDER, eps=LOG_LOSS_EPS)
    for a, b in zip((y, p, llr), copies, strict=True):
        assert a.tobytes() == b.tobytes()


def test_metric_windows_rows_equal_each_function_alone():
    """The replay's windows: default metrics (computed together), the same functions behind
    other callables (each alone), a default function under another name, and a window with one
    class only (the Cllrs NaN, or the function's error under another name)."""
    rng = np.random.default_rng(6)
    y, p, llr = window(rng, 7_000)
    y[3_000:4_000] = 0.0  # the window of events 3,000 to 3,999 holds negatives only
    defaults = default_metrics()
    wrapped = {name: (lambda fn: lambda *a: fn(*a))(fn) for name, fn in defaults.items()}
    rows = {}
    for label, metrics in (("together", defaults), ("alone", wrapped)):
        windows = MetricWindows(["m"], 1_000, metrics)
        for start in range(0, 7_000, 1_500):
            stop = start + 1_500
            t = np.arange(start, stop, dtype=np.float64)
            windows.add(t, y[start:stop], {"m": p[start:stop]}, {"m": llr[start:stop]})
        windows.finish()
        rows[label] = windows.table().to_pylist()
    assert len(rows["together"]) == 7
    assert np.isnan(rows["together"][3]["cllr"])
    for a, b in zip(rows["together"], rows["alone"], strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], float):
                assert np.float64(a[key]).tobytes() == np.float64(b[key]).tobytes(), key
            else:
                assert a[key] == b[key], key
    renamed = MetricWindows(["m"], 1_000, {"mine": defaults["cllr"], "brier": defaults["brier"]})
    with pytest.raises(ValueError, match="Cllr needs both classes"):
        renamed.add(np.arange(1_000.0), y[3_000:4_000], {"m": p[3_000:4_000]}, {"m": llr[3_000:4_000]})
