"""streamcal.plot: every plot rendered headless (Agg), checked through matplotlib's objects, and
the empirical cross-entropy against an independent loop."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pyarrow as pa  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from naive import naive_empirical_cross_entropy  # noqa: E402

from streamcal import plot  # noqa: E402
from streamcal.metrics import cllr, min_cllr  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def legend_texts(ax) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None, f"panel {ax.get_title()!r} has no legend"
    return [t.get_text() for t in legend.get_texts()]


def assert_distinct_styles(lines) -> None:
    """Every pair of lines differs in colour AND in line style or marker."""
    keys = [(matplotlib.colors.to_hex(ln.get_color()), str(ln.get_linestyle()), ln.get_marker()) for ln in lines]
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            assert keys[i][0] != keys[j][0], (keys[i], keys[j])
            assert keys[i][1:] != keys[j][1:], (keys[i], keys[j])
    dashes = {str(ln.get_linestyle()) for ln in lines}
    assert len(dashes) == len(lines), "line styles repeat"


def save_png(fig, path) -> None:
    fig.savefig(path)
    assert Path(path).read_bytes()[:8] == PNG


def rare_events(n=60_000, seed=3):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(-4.5 + z)))
    score = 1.0 / (1.0 + np.exp(-(-3.5 + 1.6 * z)))  # over-confident and too high
    return score, y


# ----------------------------------------------------------------------------- the extra


def test_import_without_matplotlib_and_the_install_hint():
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "import streamcal.plot as p\n"
        "try:\n"
        "    p.tippett_plot([0.0, 1.0], [0, 1])\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "from streamcal._install import install_hint\n"
        "print(install_hint('plot'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr
    error, hint = res.stdout.strip().splitlines()
    assert hint.startswith("pip install ")
    assert "[plot]" in hint
    assert error.endswith(hint)  # the command for the way streamcal is installed
    assert "matplotlib" in res.stdout


# ----------------------------------------------------------------------------- reliability


def test_reliability_diagram_panels_labels_legends(tmp_path):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 8_000)
    y = rng.uniform(size=p.size) < p
    sharp = p**3 / (p**3 + (1 - p) ** 3)
    flat = 0.5 + 0.4 * (p - 0.5)
    ax, counts_ax = plot.reliability_diagram({"calibrated": p, "too sharp": sharp, "too flat": flat}, y, n_bins=10)
    assert ax.figure is counts_ax.figure
    assert ax.get_ylabel() == "observed frequency of positives"
    assert ax.get_title() == "reliability"
    assert counts_ax.get_xlabel() == "predicted probability"
    assert counts_ax.get_ylabel() == "events per bin"
    assert counts_ax.get_yscale() == "log"
    assert legend_texts(ax) == ["calibrated", "too sharp", "too flat", "perfectly calibrated"]
    assert legend_texts(counts_ax) == ["calibrated", "too sharp", "too flat"]
    lines = ax.get_lines()
    assert len(lines) == 4  # three methods and the diagonal
    assert_distinct_styles(lines[:3])
    assert_distinct_styles(counts_ax.get_lines())
    save_png(ax.figure, tmp_path / "reliability.png")


def test_reliability_points_and_counts_match_a_naive_binning():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.1, 0.9, 3_000)
    y = rng.uniform(size=p.size) < p
    ax, counts_ax = plot.reliability_diagram(p, y, n_bins=8, min_count=1, scale="linear")
    edges = np.linspace(p.min(), p.max(), 9)
    xs, fs, cs = [], [], []
    for i in range(8):
        last = i == 7
        inside = [k for k in range(p.size) if edges[i] <= p[k] and (p[k] < edges[i + 1] or last)]
        xs.append(sum(p[k] for k in inside) / len(inside))
        fs.append(sum(float(y[k]) for k in inside) / len(inside))
        cs.append(len(inside))
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), xs, rtol=1e-12)
    np.testing.assert_allclose(line.get_ydata(), fs, rtol=1e-12)
    count_line = counts_ax.get_lines()[0]
    np.testing.assert_array_equal(count_line.get_ydata()[::2], cs)
    assert sum(cs) == p.size
    assert legend_texts(ax)[0] == "model"


def test_reliability_scale_follows_the_predictions():
    rng = np.random.default_rng(2)
    p = rng.uniform(0.05, 0.95, 2_000)
    y = rng.uniform(size=p.size) < p
    ax, _ = plot.reliability_diagram(p, y)
    assert ax.get_xscale() == "linear"
    assert ax.get_yscale() == "linear"
    score, y2 = rare_events()
    ax, counts_ax = plot.reliability_diagram(score, y2)
    assert ax.get_xscale() == "logit"
    assert ax.get_yscale() == "logit"
    assert counts_ax.get_xscale() == "logit"
    lo = ax.get_xlim()[0]
    assert 0.0 < lo < float(np.min(ax.get_lines()[0].get_xdata()))
    assert ax.get_xlim() == ax.get_ylim()  # the diagonal at 45 degrees
    ax, _ = plot.reliability_diagram(p, y, scale="logit")
    assert ax.get_xscale() == "logit"
    ax, _ = plot.reliability_diagram(score, y2, scale="linear")
    assert ax.get_xscale() == "linear"


def test_reliability_logit_keeps_informative_bins_and_clips_empty_ones_to_the_edge():
    edges = [1e-4, 1e-3, 1e-2, 1e-1, 0.5]
    bins = {
        # bin 0: 100 events at 5e-4 -> 0.05 expected positives, none seen: noise, left out
        # bin 1: 1,000 events at 5e-3 -> 5 expected, none seen: real, drawn on the bottom edge
        "m": ([100, 1_000, 1_000, 100], [0.05, 5.0, 50.0, 25.0], [0, 0, 60, 30]),
    }
    ax, _ = plot.reliability_diagram_from_bins(edges, bins, scale="logit")
    marker, line = ax.get_lines()[:2]
    # the bin that saw none: a downward triangle on the bottom edge, in the line's colour, not joined
    assert marker.get_marker() == "v"
    assert marker.get_linestyle() == "None"
    assert marker.get_color() == line.get_color()
    np.testing.assert_allclose(marker.get_xdata(), [5e-3])
    assert marker.get_ydata()[0] == ax.get_ylim()[0]  # on the edge
    # the line joins the bins with positives and negatives only
    x, f = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    np.testing.assert_allclose(x, [5e-2, 0.25])
    np.testing.assert_allclose(f, [0.06, 0.3])
    assert line.get_label() == "m"


def test_counts_break_over_an_empty_bin():
    bins = {"m": ([30, 0, 30], [4.5, 0.0, 25.5], [5, 0, 25])}
    _, counts_ax = plot.reliability_diagram_from_bins([0.0, 0.3, 0.6, 1.0], bins, scale="linear")
    line = counts_ax.get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), [0.0, 0.3, 0.3, 0.6, 0.6, 1.0])
    np.testing.assert_array_equal(line.get_ydata(), [30, 30, np.nan, np.nan, 30, 30])


def test_reliability_on_given_axes():
    rng = np.random.default_rng(4)
    p = rng.uniform(size=500)
    y = rng.uniform(size=p.size) < p
    fig, axes = plt.subplots(1, 2, layout="constrained")
    ax, counts_ax = plot.reliability_diagram(p, y, ax=axes[0], label="m")
    assert ax.figure is fig
    assert counts_ax.figure is fig
    assert axes[0] not in fig.axes  # its cell was split in two
    assert len(fig.axes) == 3
    ax2, none = plot.reliability_diagram(p, y, ax=axes[1], counts=False)
    assert ax2 is axes[1]
    assert none is None
    assert ax2.get_xlabel() == "predicted probability"
    fig2 = plt.figure()
    free = fig2.add_axes((0.1, 0.1, 0.8, 0.8))
    with pytest.raises(ValueError, match="counts_ax"):
        plot.reliability_diagram(p, y, ax=free)
    with pytest.raises(TypeError, match="`ax` must be a matplotlib Axes"):
        plot.reliability_diagram(p, y, ax="left")


def test_reliability_rejects_bad_input():
    p, y = [0.1, 0.5, 0.9], [0, 1, 1]
    with pytest.raises(ValueError, match=r"`proba` must hold probabilities in \[0, 1\]; got 1.5 at position 1"):
        plot.reliability_diagram([0.1, 1.5, 0.9], y)
    with pytest.raises(ValueError, match=r"`proba\['b'\]` must be finite|`proba\['b'\]` must hold probabilities"):
        plot.reliability_diagram({"a": p, "b": [0.1, np.nan, 0.2]}, y)
    with pytest.raises(ValueError, match=r"`proba\['b'\]` must have the same length"):
        plot.reliability_diagram({"a": p, "b": [0.1, 0.2]}, y)
    with pytest.raises(ValueError, match="`labels` must have the same length as `proba` \\(3\\); got 2"):
        plot.reliability_diagram(p, [0, 1])
    with pytest.raises(ValueError, match=r"`labels` must hold binary labels .* got 2 at position 2"):
        plot.reliability_diagram(p, [0, 1, 2])
    with pytest.raises(ValueError, match="`proba` must hold at least one array"):
        plot.reliability_diagram({}, y)
    with pytest.raises(ValueError, match="`n_bins`"):
        plot.reliability_diagram(p, y, n_bins=0)
    with pytest.raises(ValueError, match=r"`n_bins` must be an int in \[1, 10000\]"):
        plot.reliability_diagram(p, y, n_bins=10**9)
    with pytest.raises(TypeError, match="`n_bins` must be an int"):
        plot.reliability_diagram(p, y, n_bins=2.5)
    ax, _ = plot.reliability_diagram(p, y, n_bins=np.int64(3))  # numpy integers are integers
    assert len(ax.get_lines()) == 2
    with pytest.raises(ValueError, match="`scale` must be one of"):
        plot.reliability_diagram(p, y, scale="log")
    with pytest.raises(ValueError, match=r"`bins\['m'\]` must hold counts"):
        plot.reliability_diagram_from_bins([0.0, 0.5, 1.0], {"m": ([2, 2], [0.5, 1.5], [3, 1])})
    with pytest.raises(ValueError, match=r"`bins\['m'\]\[0\]` must have one value per bin \(2\)"):
        plot.reliability_diagram_from_bins([0.0, 0.5, 1.0], {"m": ([2], [0.5], [1])})
    with pytest.raises(ValueError, match="`edges` must be at least two increasing values"):
        plot.reliability_diagram_from_bins([0.5, 0.2], {"m": ([2], [0.5], [1])})


def test_many_lines_stay_pairwise_different():
    rng = np.random.default_rng(12)
    p = rng.uniform(0.1, 0.9, 400)
    y = rng.uniform(size=p.size) < p
    ax, _ = plot.reliability_diagram({f"m{k}": p for k in range(20)}, y, counts=False)
    keys = {(ln.get_color(), str(ln.get_linestyle()), ln.get_marker()) for ln in ax.get_lines()[:20]}
    assert len(keys) == 20


def test_constant_predictions_draw_one_bin():
    ax, _ = plot.reliability_diagram([0.3] * 50, [0, 1] * 25)
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), [0.3])
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [0.5])


# ----------------------------------------------------------------------------- metrics over time


def metrics_table(spike=0.09):
    methods = ["pav", "ispline", "raw"]
    rows = {"window": [], "method": [], "last_event": [], "cllr": [], "calibration_loss": [], "brier": []}
    for w in range(6):
        for k, m in enumerate(methods):
            rows["window"].append(w)
            rows["method"].append(m)
            rows["last_event"].append(1_000 * (w + 1) - 1)
            rows["cllr"].append(0.8 + 0.01 * k + 0.005 * w)
            rows["calibration_loss"].append((spike if (m == "pav" and w == 0) else 0.002) + 0.0005 * k)
            rows["brier"].append(0.05 if w != 3 else np.nan)
    return rows


def test_metrics_over_time_log_axis_where_values_span_decades(tmp_path):
    table = pa.table(metrics_table())
    ax = plot.metrics_over_time(table, "calibration_loss")
    assert ax.get_yscale() == "log"  # 0.09 vs 0.002: the spike would flatten the rest
    assert ax.get_ylabel() == "calibration loss"
    assert ax.get_xlabel() == "events replayed"
    assert ax.get_title() == "calibration loss"
    assert legend_texts(ax) == ["pav", "ispline", "raw"]
    assert_distinct_styles(ax.get_lines())
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(), [1_000, 2_000, 3_000, 4_000, 5_000, 6_000])
    ax = plot.metrics_over_time(pa.table(metrics_table(spike=0.004)), "calibration_loss")
    assert ax.get_yscale() == "linear"  # 0.002 .. 0.004: linear
    ax = plot.metrics_over_time(table, "cllr")
    assert ax.get_yscale() == "linear"
    assert ax.get_ylabel() == "Cllr (bits)"
    ax = plot.metrics_over_time(table, "calibration_loss", yscale="linear")
    assert ax.get_yscale() == "linear"
    ax = plot.metrics_over_time(table, "cllr", yscale="log", methods=["raw", "pav"], title="t", ylabel="y")
    assert ax.get_yscale() == "log"
    assert (ax.get_title(), ax.get_ylabel()) == ("t", "y")
    assert legend_texts(ax) == ["raw", "pav"]
    save_png(ax.figure, tmp_path / "metric.png")


def test_metrics_over_time_zero_or_nan_values_and_other_tables():
    rows = metrics_table()
    rows["calibration_loss"][1] = 0.0  # a zero cannot go on a log axis
    ax = plot.metrics_over_time(rows, "calibration_loss")
    assert ax.get_yscale() == "linear"
    ax = plot.metrics_over_time(rows, "brier")  # one window undefined: a gap
    y = np.asarray(ax.get_lines()[0].get_ydata(), dtype=float)
    assert np.isnan(y[3])
    assert np.isfinite(np.delete(y, 3)).all()
    pd = pytest.importorskip("pandas")
    ax = plot.metrics_over_time(pd.DataFrame(metrics_table()), "calibration_loss")
    assert ax.get_yscale() == "log"
    assert len(ax.get_lines()) == 3
    pl = pytest.importorskip("polars")
    ax = plot.metrics_over_time(pl.DataFrame(metrics_table()), "cllr")
    assert legend_texts(ax) == ["pav", "ispline", "raw"]


def test_metrics_over_time_on_event_time():
    import datetime as dt

    rows = metrics_table()
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    rows["end_time"] = [start + dt.timedelta(hours=w) for w in rows["window"]]
    ax = plot.metrics_over_time(pa.table(rows), "cllr", x="time")
    assert ax.get_xlabel() == "event time"
    # a week of windows: a few date ticks, each naming only what changed (no full dates side by side)
    week = metrics_table()
    week["end_time"] = [start + dt.timedelta(hours=8 * w) for w in week["window"]]
    ax = plot.metrics_over_time(pa.table(week), "cllr", x="time")
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert 2 <= len(labels) <= 7
    assert max(map(len, labels)) <= 6, labels
    with pytest.raises(ValueError, match="has no column 'end_time'"):
        plot.metrics_over_time(metrics_table(), "cllr", x="time")


def test_metrics_over_time_rejects_bad_input():
    table = metrics_table()
    with pytest.raises(ValueError, match="`table` has no column 'log_loss'"):
        plot.metrics_over_time(table, "log_loss")
    with pytest.raises(ValueError, match="`methods` names 'gev'"):
        plot.metrics_over_time(table, "cllr", methods=["gev"])
    with pytest.raises(TypeError, match="`table` must be a table"):
        plot.metrics_over_time([1, 2, 3], "cllr")
    with pytest.raises(ValueError, match="`yscale` must be one of"):
        plot.metrics_over_time(table, "cllr", yscale="symlog")
    with pytest.raises(ValueError, match="`x` must be one of"):
        plot.metrics_over_time(table, "cllr", x="window")
    bad = {**table, "cllr": ["a"] * len(table["cllr"])}
    with pytest.raises(ValueError, match="column 'cllr' must hold numbers; got 'a' at row 0"):
        plot.metrics_over_time(bad, "cllr")


# ----------------------------------------------------------------------------- ECE


def gaussian_llrs(n, mu, seed, scale=1.0, shift=0.0, base_rate=0.3):
    """Calibrated LLRs: with classes N(±mu, 2 mu), the LLR of x is x itself."""
    rng = np.random.default_rng(seed)
    y = rng.uniform(size=n) < base_rate
    x = np.where(y, rng.normal(mu, math.sqrt(2 * mu), n), rng.normal(-mu, math.sqrt(2 * mu), n))
    return scale * x + shift, y


def test_ece_curves_match_a_naive_loop():
    llr, y = gaussian_llrs(400, 1.0, seed=5, scale=1.7, shift=-0.4)
    thetas = [-5.0, -1.3, 0.0, 0.7, 4.0]
    c = plot.ece_curves(llr, y, prior_log_odds=thetas)
    np.testing.assert_allclose(c.llr, [naive_empirical_cross_entropy(llr, y, t) for t in thetas], rtol=1e-12)
    from streamcal.isotonic import pav_llr

    calibrated = pav_llr(llr, y, finite=False)
    # the exact PAV puts the lowest negatives at -inf and the highest positives at +inf: they cost nothing
    assert np.all(~y[calibrated == -np.inf])
    assert np.all(y[calibrated == np.inf])
    keep = np.isfinite(calibrated)
    expected = []
    for t in thetas:
        prior = 1.0 / (1.0 + math.exp(-t))
        pos = [v for v, k, lab in zip(calibrated, keep, y, strict=True) if lab and k]
        neg = [v for v, k, lab in zip(calibrated, keep, y, strict=True) if not lab and k]
        cost_pos = sum(math.log2(1.0 + math.exp(-(v + t))) for v in pos) / int(y.sum())
        cost_neg = sum(math.log2(1.0 + math.exp(v + t)) for v in neg) / int((~y).sum())
        expected.append(prior * cost_pos + (1.0 - prior) * cost_neg)
    np.testing.assert_allclose(c.pav, expected, rtol=1e-12)
    entropy = [-(q * math.log2(q) + (1 - q) * math.log2(1 - q)) for q in (1 / (1 + np.exp(-np.asarray(thetas))))]
    np.testing.assert_allclose(c.neutral, entropy, rtol=1e-12)


def test_ece_known_values():
    y = np.array([0, 1, 1, 0, 1, 0, 0, 0])
    c = plot.ece_curves(np.zeros(y.size), y)
    np.testing.assert_allclose(c.llr, c.neutral, rtol=1e-14, atol=0)  # LLR = 0 is the neutral reference
    i0 = int(np.argmin(np.abs(c.prior_log_odds)))
    assert c.prior_log_odds[i0] == 0.0
    assert c.neutral[i0] == pytest.approx(1.0, abs=1e-15)
    assert np.all(c.neutral <= 1.0 + 1e-15)
    llr, y = gaussian_llrs(3_000, 1.5, seed=6, scale=2.5, shift=0.8)
    c = plot.ece_curves(llr, y, prior_log_odds=[0.0])
    assert c.llr[0] == pytest.approx(cllr(y, llr), rel=1e-12)  # at even odds ECE is Cllr
    assert c.pav[0] == pytest.approx(min_cllr(y, llr), rel=1e-12)
    separated = plot.ece_curves([-3.0, -1.0, 2.0, 4.0], [0, 0, 1, 1], prior_log_odds=[-2.0, 0.0, 2.0])
    np.testing.assert_array_equal(separated.pav, [0.0, 0.0, 0.0])


@pytest.mark.parametrize(("scale", "shift"), [(1.0, 0.0), (3.0, 0.0), (0.4, 0.0), (1.0, 2.0)])
def test_ece_pav_is_the_floor(scale, shift):
    llr, y = gaussian_llrs(5_000, 1.0, seed=7, scale=scale, shift=shift)
    c = plot.ece_curves(llr, y)
    assert np.all(c.pav <= c.llr + 1e-12)
    assert np.all(c.pav <= c.neutral + 1e-12)
    gap = c.llr - c.pav
    if (scale, shift) == (1.0, 0.0):  # calibrated LLRs: next to the floor, well below neutral
        assert gap.max() < 0.02
        assert np.all(c.llr < c.neutral)
    else:
        assert gap.max() > 0.05


def test_ece_default_grid_covers_the_labels_prior():
    llr, y = gaussian_llrs(20_000, 2.0, seed=8, base_rate=0.0005)
    c = plot.ece_curves(llr, y)
    observed = math.log(y.sum() / (~y).sum())
    assert c.prior_log_odds[0] < observed - 1.0
    assert c.prior_log_odds[-1] > 7.0 - 1e-12
    assert np.all(np.diff(c.prior_log_odds) > 0)


def test_ece_plot_curves_labels_legend(tmp_path):
    llr, y = gaussian_llrs(2_000, 1.0, seed=9, scale=2.0)
    ax = plot.ece_plot(llr, y, label="my LLRs")
    curves = plot.ece_curves(llr, y)
    lines = ax.get_lines()
    assert len(lines) == 4  # three curves and the prior marker
    for line, expected in zip(lines[:3], (curves.llr, curves.pav, curves.neutral), strict=True):
        np.testing.assert_allclose(line.get_ydata(), expected)
    assert_distinct_styles(lines[:3])
    assert ax.get_xlabel() == "prior log-odds, ln(π / (1 − π))"
    assert ax.get_ylabel() == "empirical cross-entropy (bits)"
    assert legend_texts(ax) == [
        "my LLRs",
        "after PAV",
        "neutral (LLR = 0)",
        "prior of the labels",
    ]
    observed = math.log(y.sum() / (~y).sum())
    assert lines[3].get_xdata()[0] == pytest.approx(observed)
    assert ax.get_ylim()[0] == 0.0
    save_png(ax.figure, tmp_path / "ece.png")


def test_llr_plots_reject_bad_input():
    for fn in (plot.ece_plot, plot.tippett_plot, plot.ece_curves):
        with pytest.raises(ValueError, match="`llr` must be finite; got inf at position 1"):
            fn([0.0, np.inf, 1.0], [0, 1, 1])
        with pytest.raises(ValueError, match="`labels` must contain both classes; got 3 positive"):
            fn([0.0, 2.0, 1.0], [1, 1, 1])
        with pytest.raises(ValueError, match="`labels` must have the same length as `llr` \\(3\\); got 4"):
            fn([0.0, 2.0, 1.0], [1, 0, 1, 0])
        with pytest.raises(ValueError, match="`labels` must hold binary labels"):
            fn([0.0, 2.0, 1.0], [1, 0, 0.5])
    with pytest.raises(ValueError, match="`prior_log_odds` must be strictly increasing"):
        plot.ece_curves([0.0, 1.0], [0, 1], prior_log_odds=[1.0, 0.0])


# ----------------------------------------------------------------------------- Tippett


def test_tippett_plot_proportions_and_legend(tmp_path):
    llr, y = gaussian_llrs(600, 1.0, seed=10)
    ax = plot.tippett_plot(llr, y)
    pos_line, neg_line = ax.get_lines()[:2]
    for line, values in ((pos_line, llr[y]), (neg_line, llr[~y])):
        xs, share = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        inner = slice(1, -1)  # the ends are the axis edges at 1 and 0
        for x, s in zip(xs[inner], share[inner], strict=True):
            assert s == pytest.approx(sum(v >= x for v in values) / values.size, abs=1e-12)
        assert line.get_drawstyle() == "steps-pre"
        assert (share[0], share[-1]) == (1.0, 0.0)
    assert_distinct_styles([pos_line, neg_line])
    miss_pos = np.mean(llr[y] < 0)
    miss_neg = np.mean(llr[~y] >= 0)
    assert legend_texts(ax) == [
        f"positives, n = {int(y.sum()):,} ({miss_pos:.0%} with LLR < 0)",
        f"negatives, n = {int((~y).sum()):,} ({miss_neg:.0%} with LLR ≥ 0)",
        "LLR = 0",
    ]
    assert ax.get_ylabel() == "proportion with LLR ≥ x"
    assert ax.get_xlabel() == "x: LLR (natural log)"
    save_png(ax.figure, tmp_path / "tippett.png")


def test_tippett_with_ties():
    ax = plot.tippett_plot([1.0, 1.0, 1.0, -1.0, 1.0], [1, 1, 0, 0, 0])
    neg = ax.get_lines()[1]
    # negatives: -1, 1, 1 -> all three are >= -1, two are >= 1
    np.testing.assert_allclose(neg.get_ydata()[1:-1], [1.0, 2 / 3])


# ----------------------------------------------------------------------------- summary figure


def replay_bins():
    rng = np.random.default_rng(11)
    edges = 1.0 / (1.0 + np.exp(-np.linspace(-8.0, 2.0, 21)))
    edges = np.concatenate(([0.0], edges, [1.0]))
    bins = {}
    for name, bias in (("pav", 0.0), ("ispline", 0.0), ("raw", 0.8)):
        z = rng.normal(-4.0, 1.0, 50_000)
        p = 1.0 / (1.0 + np.exp(-z))
        y = rng.uniform(size=z.size) < 1.0 / (1.0 + np.exp(-(z + bias)))
        b = np.searchsorted(edges[1:-1], p, side="right")
        k = edges.size - 1
        bins[name] = (
            np.bincount(b, minlength=k),
            np.bincount(b, weights=p, minlength=k),
            np.bincount(b, weights=y, minlength=k),
        )
    return edges, bins


def test_replay_figure_every_panel_has_a_ylabel_and_one_legend_names_the_methods(tmp_path):
    edges, bins = replay_bins()
    fig = plot.replay_figure(pa.table(metrics_table()), edges=edges, bins=bins, title="a replay")
    axes = fig.axes
    assert len(axes) == 2 + 3  # reliability, its counts, one panel per metric
    titles = [ax.get_title() for ax in axes]
    assert titles == ["reliability", "", "Brier score", "Cllr", "calibration loss"]  # the replay's order
    for ax in axes:
        assert ax.get_ylabel(), f"panel {ax.get_title()!r} has no y-label"
    assert legend_texts(axes[0])
    assert legend_texts(axes[1])
    # the metric panels draw each method as the reliability diagram's legend shows it, with no
    # legend of their own
    shown = {ln.get_label(): ln for ln in axes[0].get_lines() if not ln.get_label().startswith("_")}
    for ax in axes[2:]:
        assert ax.get_legend() is None
        for ln in ax.get_lines():
            key = next(k for k in shown if k == ln.get_label() or k.startswith(ln.get_label() + " "))
            assert ln.get_color() == shown[key].get_color()
            assert ln.get_marker() == shown[key].get_marker()
    # without the reliability diagram the first panel names them
    bare = plot.replay_figure(metrics_table())
    assert legend_texts(bare.axes[0])
    assert all(ax.get_legend() is None for ax in bare.axes[1:])
    assert axes[0].get_xscale() == "logit"
    assert axes[3].get_yscale() == "linear"
    assert axes[4].get_yscale() == "log"
    assert fig.get_suptitle() == "a replay"
    save_png(fig, tmp_path / "replay.png")
    fig = plot.replay_figure(metrics_table(), metric_names=["cllr"])
    assert [ax.get_title() for ax in fig.axes] == ["Cllr"]
    with pytest.raises(ValueError, match="`edges` and `bins` go together"):
        plot.replay_figure(metrics_table(), edges=edges)
    with pytest.raises(TypeError, match="`metrics` must be a table"):
        plot.replay_figure([("pav", 0.1)])
    with pytest.raises(TypeError, match="`fig` must be a matplotlib Figure"):
        plot.replay_figure(metrics_table(), fig=plt.gca())


@pytest.mark.slow
def test_plot_replay_writes_the_png_without_pyplot(tmp_path):
    from streamcal.replay._evaluate import Reliability
    from streamcal.replay._plot import plot_replay

    score, y = rare_events(20_000)
    rel = Reliability(["pav", "raw", "score"])
    rel.add("pav", np.clip(score * 0.5, 0, 1), y.astype(float))
    rel.add("raw", score, y.astype(float))
    rel.add("score", score, y.astype(float))
    open_before = plt.get_fignums()
    fig = plot_replay(tmp_path / "r.png", rel, ["pav", "raw", "score"], pa.table(metrics_table()), title="t")
    assert plt.get_fignums() == open_before  # a bare Figure, not a pyplot one
    assert isinstance(fig, Figure)
    assert (tmp_path / "r.png").read_bytes()[:8] == PNG
    # the input score is the raw method's curve exactly: one line says both
    assert legend_texts(fig.axes[0]) == ["pav", "raw (the input score)", "perfectly calibrated"]
    rel2 = Reliability(["pav", "score"])
    rel2.add("pav", score, y.astype(float))
    rel2.add("score", score, y.astype(float))
    fig = plot_replay(tmp_path / "r2.png", rel2, ["pav", "score"], pa.table(metrics_table()))
    assert legend_texts(fig.axes[0]) == ["pav", "input score", "perfectly calibrated"]


def test_replay_with_plot_end_to_end(tmp_path):
    from streamcal.replay import generate, replay

    stream = generate(tmp_path / "drift.parquet", scenario="drift", n=6_000, seed=1)
    summary = replay(stream, "pav,raw", window=2_000, metrics_window=1_000, plot=tmp_path / "drift.png")
    assert summary.plot == tmp_path / "drift.png"
    assert (tmp_path / "drift.png").read_bytes()[:8] == PNG
