"""Plots of calibration: reliability diagrams, metrics over time, ECE and Tippett plots.

Needs matplotlib (the ``plot`` extra: ``pip install ".[plot]"`` from a clone); matplotlib is
imported only when a plot is drawn, so ``import streamcal.plot`` works without it.

- :func:`reliability_diagram` — observed frequency of positives against predicted probability,
  several methods overlaid, with the number of events per bin beneath on a log axis;
  :func:`reliability_diagram_from_bins` draws the same from per-bin sums collected elsewhere
  (what ``streamcal replay --plot`` does).
- :func:`metrics_over_time` — one metric per window of events, one line per method, on a log axis
  when its values span a decade or more.
- :func:`ece_plot` — the empirical cross-entropy of LLRs against the prior log-odds, with their
  PAV-calibrated version and the neutral reference (Ramos & Gonzalez-Rodriguez; BOSARIS);
  :func:`ece_curves` computes those curves.
- :func:`tippett_plot` — the share of positives' and of negatives' LLRs at or above each value.
- :func:`replay_figure` — the summary figure of a replay (reliability and every metric over time).

Every function draws on ``ax=`` when given one (otherwise on a new pyplot figure) and returns
the axes it drew on. Every panel gets a title, a y-label and a legend; lines of different methods
differ in colour, line style and marker, so they stay apart where they overlap and in grey print.
"""

from __future__ import annotations

import datetime
import math
import numbers
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from streamcal._validation import as_binary_labels, as_finite, as_probabilities, check_scalar

__all__ = [
    "ECECurves",
    "ece_curves",
    "ece_plot",
    "metrics_over_time",
    "reliability_diagram",
    "reliability_diagram_from_bins",
    "replay_figure",
    "tippett_plot",
]

# A metric whose positive values span at least this many decades goes on a log axis: on a linear
# one, values a decade below the largest are squeezed into the bottom tenth of the panel.
LOG_SCALE_DECADES = 1.0

# Probabilities below this (or above 1 minus this) are where a linear reliability axis crushes
# the predictions into its ends; the logit axis is used when the predictions reach them.
LOGIT_SCALE_BELOW = 0.01

MAX_BINS = 10_000  # reliability bins; more cannot be told apart on a figure

# On a logit reliability axis, predictions further than this many decades beyond every observed
# frequency are drawn on the edge of the axes.
EDGE_DECADES = 2.0

# Okabe & Ito's colour-blind-safe palette, a line style and a hollow marker per method; line widths
# fall along the cycle so a line drawn over an identical one leaves the wider one visible.
_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999")
_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 2)), (0, (3, 1, 1, 1)))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_WIDTHS = (3.0, 2.5, 2.1, 1.8, 1.5, 1.3, 1.1, 1.0)
_REFERENCE = {"color": "#777777", "lw": 1.0, "ls": (0, (4, 3))}

# Titles and y-labels of the metrics streamcal replay reports.
_METRIC_LABELS = {
    "brier": ("Brier score", "Brier score"),
    "log_loss": ("log loss", "log loss (nats)"),
    "cllr": ("Cllr", "Cllr (bits)"),
    "min_cllr": ("minCllr (after the best monotone recalibration)", "minCllr (bits)"),
    "ece": ("expected calibration error", "ECE (10 bins)"),
    "calibration_loss": ("calibration loss", "calibration loss"),
}


# ----------------------------------------------------------------------------- helpers


def _matplotlib():
    """Import matplotlib, or raise an ImportError that says how to install it."""
    try:
        import matplotlib
    except ImportError:
        from streamcal._install import install_hint

        msg = f"streamcal.plot needs matplotlib, which is not installed: {install_hint('plot')}"
        raise ImportError(msg) from None
    return matplotlib


def _new_axes(nrows: int = 1, **kwargs):
    _matplotlib()
    import matplotlib.pyplot as plt

    kwargs.setdefault("layout", "constrained")
    _, axes = plt.subplots(nrows, 1, **kwargs)
    return axes


def _style(k: int) -> dict:
    """Colour, line style, marker and width of the ``k``-th line of a panel (past eight lines the
    style and marker cycles shift against the colours, so 64 lines are pairwise different)."""
    n = len(_COLORS)
    turn = k // n
    return {
        "color": _COLORS[k % n],
        "ls": _LINESTYLES[(k + turn) % n],
        "marker": _MARKERS[(k + 2 * turn) % n],
        "lw": _WIDTHS[k % n],
        "markerfacecolor": "none",
        "markeredgewidth": 1.3,
        "ms": 7,
        "zorder": 3 + k,
    }


def _markevery(n_points: int, k: int):
    """About ten markers per line, shifted per line so identical lines show all their markers."""
    if n_points <= 12:
        return None
    step = max(n_points // 10, 1)
    return (k * step // 4 % step, step)


def _legend(ax, **kwargs) -> None:
    kwargs.setdefault("fontsize", 8)
    kwargs.setdefault("framealpha", 0.85)
    ax.legend(**kwargs)


def _legend_above(ax, title: str) -> None:
    """The legend in rows between the title and the axes, where it cannot hide a line."""
    n = len(ax.get_legend_handles_labels()[1])
    ncols = min(n, 5)
    rows = -(-n // ncols)
    ax.legend(
        loc="lower center",
        bbox_to_anchor=(0.5, 1.01),
        ncols=ncols,
        fontsize=8,
        frameon=False,
        borderaxespad=0.0,
        handlelength=4.0,
        handletextpad=0.4,
        columnspacing=0.8,
    )
    ax.set_title(title, pad=6.0 + 13.0 * rows)


def _check_ax(ax, name: str = "ax") -> None:
    from matplotlib.axes import Axes

    if ax is not None and not isinstance(ax, Axes):
        msg = f"`{name}` must be a matplotlib Axes or None; got {type(ax).__name__}."
        raise TypeError(msg)


def _as_series(values, name: str, checker) -> dict[str, np.ndarray]:
    """One array, or a mapping of labelled arrays, as ``{label: checked array}``."""
    if isinstance(values, Mapping):
        if not values:
            msg = f"`{name}` must hold at least one array; got an empty mapping."
            raise ValueError(msg)
        return {str(key): checker(v, f"{name}[{key!r}]") for key, v in values.items()}
    return {"": checker(values, name)}


def _labels_for(y, n: int, what: str, *, both: bool = False) -> np.ndarray:
    labels = as_binary_labels(y, "labels")
    if labels.size != n:
        msg = f"`labels` must have the same length as `{what}` ({n}); got {labels.size}."
        raise ValueError(msg)
    if both and not 0.0 < labels.sum() < labels.size:
        msg = f"`labels` must contain both classes; got {int(labels.sum())} positive(s) out of {labels.size}."
        raise ValueError(msg)
    return labels


def _logit(p):
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def _spans_decades(values: np.ndarray, decades: float = LOG_SCALE_DECADES) -> bool:
    v = values[np.isfinite(values)]
    if v.size < 2 or np.any(v <= 0.0):
        return False
    return math.log10(float(v.max()) / float(v.min())) >= decades


# ----------------------------------------------------------------------------- reliability


def _reliability_scale(p: np.ndarray) -> str:
    lo, hi = float(np.min(p)), float(np.max(p))
    return "logit" if lo < LOGIT_SCALE_BELOW or hi > 1.0 - LOGIT_SCALE_BELOW else "linear"


def _reliability_axes(ax, counts_ax, counts: bool):
    """The diagram's axes and the count axes beneath it (``ax``'s grid cell split in two when only
    ``ax`` is given)."""
    _check_ax(ax, "ax")
    _check_ax(counts_ax, "counts_ax")
    if ax is None:
        if counts_ax is not None:
            msg = "`counts_ax` needs `ax` too (the diagram's axes)."
            raise ValueError(msg)
        if not counts:
            return _new_axes(1, figsize=(5.5, 5.0)), None
        ax, counts_ax = _new_axes(2, figsize=(5.5, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
        return ax, counts_ax
    if not counts:
        return ax, None
    if counts_ax is not None:
        return ax, counts_ax
    spec = ax.get_subplotspec()
    if spec is None:
        msg = "`ax` is not in a grid, so it cannot be split for the counts: pass `counts_ax=` or `counts=False`."
        raise ValueError(msg)
    fig = ax.figure
    inner = spec.subgridspec(2, 1, height_ratios=[3, 1], hspace=0.08)
    ax.remove()
    top = fig.add_subplot(inner[0])
    return top, fig.add_subplot(inner[1], sharex=top)


def reliability_diagram(
    proba,
    labels,
    *,
    n_bins: int = 15,
    scale: str = "auto",
    min_count: int = 10,
    label: str | None = None,
    counts: bool = True,
    ax=None,
    counts_ax=None,
    title: str = "reliability",
):
    """Draw a reliability diagram: observed frequency of positives against predicted probability.

    The predictions are cut into ``n_bins`` bins of equal width on the axis (linear or logit); each
    bin with at least ``min_count`` events is a point at (mean prediction, share of positives). A
    calibrated method lies on the diagonal. Beneath, on a log axis, the number of events per bin
    shows where the predictions are and how much each point can be trusted.

    Parameters
    ----------
    proba : array-like of shape (n,) or mapping of str to array-like
        Predicted probabilities of the positive class, in [0, 1]; a mapping ``{name: proba}``
        overlays several methods scored on the same labels.
    labels : array-like of shape (n,)
        Binary labels.
    n_bins : int, default 15
        Number of bins, equally wide on the axis between the lowest and the highest prediction.
    scale : {"auto", "linear", "logit"}, default "auto"
        Axis scale. ``"auto"`` takes the logit scale when a prediction is below 0.01 or above
        0.99 (rare events: a linear axis would crush them into a corner), linear otherwise.
    min_count : int, default 10
        Bins with fewer events are left out of the diagram (still counted beneath).
    label : str, optional
        Legend entry of a single array (default ``"model"``); a mapping's keys are its entries.
    counts : bool, default True
        Draw the count histogram beneath.
    ax, counts_ax : matplotlib Axes, optional
        Where to draw. With ``ax`` alone, its grid cell is split: the diagram on top (a new Axes
        replaces ``ax``) and the counts beneath. With neither, a new figure.
    title : str, default "reliability"
        Title of the diagram.

    Returns
    -------
    (ax, counts_ax) : tuple of matplotlib Axes
        The diagram's axes and the counts' axes (None with ``counts=False``).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from streamcal.plot import reliability_diagram
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.05, 0.95, 5_000)
    >>> y = rng.uniform(size=p.size) < p
    >>> ax, counts_ax = reliability_diagram({"calibrated": p, "too sharp": p**2 / (p**2 + (1 - p)**2)}, y)
    >>> ax.get_ylabel(), counts_ax.get_xlabel(), counts_ax.get_yscale()
    ('observed frequency of positives', 'predicted probability', 'log')
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['calibrated', 'too sharp', 'perfectly calibrated']
    >>> plt.close("all")
    """
    series = _as_series(proba, "proba", lambda v, name: as_probabilities(v, name))
    n = next(iter(series.values())).size
    for key, p in series.items():
        if p.size != n:
            msg = f"`proba[{key!r}]` must have the same length as the other arrays ({n}); got {p.size}."
            raise ValueError(msg)
    y = _labels_for(labels, n, "proba")
    check_scalar(n_bins, "n_bins", kind=numbers.Integral, low=1, high=MAX_BINS)
    check_scalar(scale, "scale", choices=("auto", "linear", "logit"))
    if label is not None and not isinstance(label, str):
        msg = f"`label` must be a str or None; got {type(label).__name__}."
        raise TypeError(msg)
    if "" in series:
        series = {label or "model": series[""]}
    everything = np.concatenate(list(series.values()))
    if scale == "auto":
        scale = _reliability_scale(everything)
    if scale == "logit":
        z = np.clip(_logit(everything), -15.0, 15.0)
        edges = _sigmoid(np.linspace(z.min(), z.max(), n_bins + 1)) if z.max() > z.min() else None
    else:
        lo, hi = float(everything.min()), float(everything.max())
        edges = np.linspace(lo, hi, n_bins + 1) if hi > lo else None
    if edges is None:  # every prediction equal: one bin around it
        c = float(everything[0])
        edges = np.array([max(c - 1e-3, 0.0), min(c + 1e-3, 1.0)]) if 0.0 < c < 1.0 else np.array([c, c])
    bins = {}
    inner = edges[1:-1]
    k = edges.size - 1
    for name, p in series.items():
        b = np.searchsorted(inner, p, side="right")
        bins[name] = (
            np.bincount(b, minlength=k).astype(np.float64),
            np.bincount(b, weights=p, minlength=k),
            np.bincount(b, weights=y, minlength=k),
        )
    return reliability_diagram_from_bins(
        edges,
        bins,
        scale=scale,
        min_count=min_count,
        counts=counts,
        ax=ax,
        counts_ax=counts_ax,
        title=title,
    )


def reliability_diagram_from_bins(
    edges,
    bins,
    *,
    scale: str = "auto",
    min_count: int = 10,
    counts: bool = True,
    ax=None,
    counts_ax=None,
    title: str = "reliability",
):
    """Draw a reliability diagram from per-bin sums (what a stream collects in one pass).

    Parameters
    ----------
    edges : array-like of shape (k + 1,)
        Increasing bin edges in [0, 1]; bin ``i`` holds the predictions in
        ``[edges[i], edges[i + 1])``.
    bins : mapping of str to (count, sum_proba, sum_labels)
        Per method, three arrays of shape (k,): the number of events in each bin, the sum of
        their predictions and the number of positives among them.
    scale : {"auto", "linear", "logit"}, default "auto"
        As in :func:`reliability_diagram`; ``"auto"`` looks at the mean predictions of the bins
        that are drawn.
    min_count, counts, ax, counts_ax, title
        As in :func:`reliability_diagram`.

    Returns
    -------
    (ax, counts_ax) : tuple of matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from streamcal.plot import reliability_diagram_from_bins
    >>> edges = [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> bins = {"pav": ([40, 60, 60, 40], [5.0, 22.0, 38.0, 35.0], [6, 21, 40, 34])}
    >>> ax, counts_ax = reliability_diagram_from_bins(edges, bins)
    >>> ax.get_xscale(), len(ax.get_lines())  # the method and the diagonal
    ('linear', 2)
    >>> plt.close("all")
    """
    _matplotlib()
    e = as_finite(edges, "edges")
    if e.size < 2 or np.any(np.diff(e) < 0.0) or e[0] < 0.0 or e[-1] > 1.0:
        msg = f"`edges` must be at least two increasing values in [0, 1]; got {e.tolist()!r}."
        raise ValueError(msg)
    k = e.size - 1
    if not isinstance(bins, Mapping) or not bins:
        msg = "`bins` must be a non-empty mapping of name to (count, sum_proba, sum_labels)."
        raise TypeError(msg) if not isinstance(bins, Mapping) else ValueError(msg)
    check_scalar(scale, "scale", choices=("auto", "linear", "logit"))
    check_scalar(min_count, "min_count", kind=numbers.Integral, low=1)
    curves = _checked_bins(bins, k)
    ax, counts_ax = _reliability_axes(ax, counts_ax, counts)

    if scale == "auto":
        with np.errstate(invalid="ignore", divide="ignore"):
            means = [sum_p[count >= min_count] / count[count >= min_count] for count, sum_p, _ in curves.values()]
        means = np.concatenate(means)
        scale = _reliability_scale(means) if means.size else "linear"
    points = {}
    for name, (count, sum_p, sum_y) in curves.items():
        keep = count >= min_count
        if scale == "logit":
            # on a logit axis a frequency of 0 or 1 has no place: a bin is drawn only when it
            # expects or holds at least one positive and one negative (otherwise its frequency
            # is noise around 0 or 1); a bin that expected some and holds none sits on the edge
            keep &= (np.maximum(sum_p, sum_y) >= 1.0) & (np.maximum(count - sum_p, count - sum_y) >= 1.0)
        points[name] = (sum_p[keep] / count[keep], sum_y[keep] / count[keep])
    if scale == "logit":
        both = np.concatenate([np.concatenate(xf) for xf in points.values()])
        inside = both[(both > 0.0) & (both < 1.0)]
        if inside.size == 0:
            inside = np.array([0.01, 0.99])
        z_lo, z_hi = float(np.min(_logit(inside))), float(np.max(_logit(inside)))
        freqs = np.concatenate([f for _, f in points.values()])
        freqs = _logit(freqs[(freqs > 0.0) & (freqs < 1.0)])
        if freqs.size:
            # a prediction more than EDGE_DECADES beyond every observed frequency (say PAV's
            # zeros) goes on the edge rather than stretching the axes over empty decades
            reach = EDGE_DECADES * math.log(10.0)
            z_lo = max(z_lo, float(freqs.min()) - reach)
            z_hi = min(z_hi, float(freqs.max()) + reach)
        pad = 0.1 * max(z_hi - z_lo, 2.0)
        lo, hi = float(_sigmoid(z_lo - pad)), float(_sigmoid(z_hi + pad))
    else:
        lo, hi = 0.0, 1.0

    for i, (name, (x, f)) in enumerate(points.items()):
        style = _style(i)
        if scale == "logit":
            # a bin with no positive (or only positives) has no place on a logit axis: it is marked
            # on the bottom (top) edge by a triangle pointing off the axis, apart from the line
            x = np.clip(x, lo, hi)
            inside = (f > 0.0) & (f < 1.0)
            for edge, value, marker in ((f <= 0.0, lo, "v"), (f >= 1.0, hi, "^")):
                if edge.any():
                    ax.plot(x[edge], np.full(int(edge.sum()), value), linestyle="none", marker=marker,
                            markersize=6, markerfacecolor="none", color=style["color"], clip_on=False)
            x, f = x[inside], f[inside]
        ax.plot(x, f, label=name, markevery=_markevery(x.size, i), **style, clip_on=False)
    ax.plot([lo, hi], [lo, hi], label="perfectly calibrated", **_REFERENCE, zorder=2)
    ax.set_xscale(scale)
    ax.set_yscale(scale)
    if scale == "logit":
        _readable_logit_ticks(ax.xaxis, lo, hi)
        _readable_logit_ticks(ax.yaxis, lo, hi)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_ylabel("observed frequency of positives")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax, loc="upper left")
    if counts_ax is None:
        ax.set_xlabel("predicted probability")
        return ax, None

    _draw_bin_counts(counts_ax, e, curves, scale, lo, hi)
    ax.tick_params(labelbottom=False)
    return ax, counts_ax


def _checked_bins(bins, k: int) -> dict:
    """``bins`` of :func:`reliability_diagram_from_bins`, checked: name -> (count, sum_p, sum_y)."""
    curves = {}
    for name, item in bins.items():
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            msg = f"`bins[{name!r}]` must be (count, sum_proba, sum_labels); got {type(item).__name__}."
            raise ValueError(msg)
        parts = [as_finite(a, f"bins[{name!r}][{i}]") for i, a in enumerate(item)]
        for i, a in enumerate(parts):
            if a.size != k:
                msg = f"`bins[{name!r}][{i}]` must have one value per bin ({k}); got {a.size}."
                raise ValueError(msg)
        count, sum_p, sum_y = parts
        if np.any(count < 0) or np.any(sum_y < 0) or np.any(sum_y > count) or np.any(sum_p < 0):
            msg = f"`bins[{name!r}]` must hold counts >= 0 and 0 <= sum_labels <= count."
            raise ValueError(msg)
        curves[str(name)] = (count, sum_p, sum_y)
    return curves


def _draw_bin_counts(counts_ax, e, curves: dict, scale: str, lo: float, hi: float) -> None:
    """The events per bin of each curve, under a reliability diagram."""
    top = 1.0
    for i, (name, (count, _, _)) in enumerate(curves.items()):
        style = _style(i)
        left = np.clip(e[:-1], lo, hi)
        right = np.clip(e[1:], lo, hi)
        ok = (count > 0) & (right > left)
        if not ok.any():
            continue
        # a flat step per bin, drawn as one polyline so the style matches the diagram; an empty
        # bin (no place on a log axis) breaks the line instead of bridging it
        xs = np.column_stack([left, right]).ravel()
        ys = np.repeat(np.where(ok, count, np.nan), 2)
        counts_ax.plot(
            xs,
            ys,
            color=style["color"],
            ls=style["ls"],
            lw=max(style["lw"] - 0.6, 1.0),
            label=name,
            zorder=style["zorder"],
        )
        top = max(top, float(count.max()))
    counts_ax.set_xscale(scale)
    if scale == "logit":
        _readable_logit_ticks(counts_ax.xaxis, lo, hi)
    counts_ax.set_yscale("log")
    counts_ax.set_ylim(0.7, top * 3.0)
    counts_ax.set_xlim(lo, hi)
    counts_ax.set_xlabel("predicted probability")
    counts_ax.set_ylabel("events per bin")
    counts_ax.grid(alpha=0.3)
    if counts_ax.get_lines():
        _legend(counts_ax, loc="upper left", fontsize=7, ncols=min(len(curves), 3))
        # room above the tallest bin for the legend: the counts fill the lower 60 % of the axis
        counts_ax.set_ylim(0.7, 0.7 * (top / 0.7) ** (1.0 / 0.6))


def _probability_label(v: float) -> str:
    if v < 1e-3:
        return f"1e{math.log10(v):.0f}"
    if v > 1.0 - 1e-3:
        return f"1−1e{math.log10(1.0 - v):.0f}"
    return f"{v:.6g}"


def _readable_logit_ticks(axis, lo: float, hi: float) -> None:
    """Ticks at 1e-k, 0.1, 0.5, 0.9 and 1 − 1e-k, labelled as plain probabilities."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    candidates = [10.0**-k for k in range(12, 0, -1)] + [0.5] + [1.0 - 10.0**-k for k in range(1, 13)]
    ticks = [v for v in candidates if lo <= v <= hi]
    if len(ticks) > 7:  # every other power of ten, keeping 0.5
        ticks = [v for v in ticks if v == 0.5 or round(abs(_logit(v)) / math.log(10.0)) % 2 == 1]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _probability_label(v)))
    axis.set_minor_formatter(NullFormatter())


# ----------------------------------------------------------------------------- metrics over time


def _column_names(table, argument: str) -> list:
    """The column names of a pyarrow Table, a pandas / polars DataFrame or a mapping of columns."""
    if hasattr(table, "column_names"):  # pyarrow
        return list(table.column_names)
    if hasattr(table, "columns"):  # pandas, polars
        return list(table.columns)
    if isinstance(table, Mapping):
        return list(table)
    kind = type(table).__name__
    msg = f"`{argument}` must be a table (pyarrow Table, DataFrame or mapping of columns); got {kind}."
    raise TypeError(msg)


def _column(table, name: str, argument: str) -> np.ndarray:
    """Column ``name`` of a pyarrow Table, a pandas / polars DataFrame or a mapping of columns."""
    columns = _column_names(table, argument)
    if name not in columns:
        msg = f"`{argument}` has no column {name!r}; its columns are {columns!r}."
        raise ValueError(msg)
    if hasattr(table, "column_names"):  # pyarrow
        return np.asarray(table.column(name).to_pylist(), dtype=object)
    col = table[name]
    values = col.to_list() if hasattr(col, "to_list") else list(col)
    return np.asarray(values, dtype=object)


def _floats(values: np.ndarray, name: str) -> np.ndarray:
    out = np.empty(values.size, dtype=np.float64)
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            msg = f"column {name!r} must hold numbers; got {v!r} at row {i}."
            raise ValueError(msg) from None
    return out


def metrics_over_time(
    table,
    metric: str,
    *,
    x: str = "events",
    methods=None,
    yscale: str = "auto",
    ax=None,
    title: str | None = None,
    ylabel: str | None = None,
):
    """Draw one metric per window of events, one line per method.

    Parameters
    ----------
    table : pyarrow Table, pandas or polars DataFrame, or mapping of columns
        One row per window and method, with a ``method`` column, the metric's column and the x
        column: what :func:`streamcal.replay.replay` returns as ``metrics_table`` and writes to
        ``metrics_output``.
    metric : str
        The column to draw (``"brier"``, ``"log_loss"``, ``"cllr"``, ...).
    x : {"events", "time"}, default "events"
        Horizontal axis: events replayed by the end of each window (``last_event + 1``), or the
        event time of its last event (``end_time``).
    methods : sequence of str, optional
        The methods to draw, in this order (default: all, in the table's order).
    yscale : {"auto", "linear", "log"}, default "auto"
        ``"auto"``: log when the metric's values are positive and span at least
        ``LOG_SCALE_DECADES`` decades (one spiking window would otherwise flatten every other
        one), linear otherwise.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).
    title, ylabel : str, optional
        Defaults name the metric (and its unit where it has one).

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from streamcal.plot import metrics_over_time
    >>> table = {
    ...     "method": ["pav", "raw"] * 3,
    ...     "last_event": [999, 999, 1999, 1999, 2999, 2999],
    ...     "calibration_loss": [0.09, 0.004, 0.002, 0.004, 0.001, 0.005],
    ... }
    >>> ax = metrics_over_time(table, "calibration_loss")
    >>> ax.get_yscale(), ax.get_ylabel(), [t.get_text() for t in ax.get_legend().get_texts()]
    ('log', 'calibration loss', ['pav', 'raw'])
    >>> plt.close("all")
    """
    if not isinstance(metric, str):
        msg = f"`metric` must be a column name (str); got {type(metric).__name__}."
        raise TypeError(msg)
    check_scalar(x, "x", choices=("events", "time"))
    check_scalar(yscale, "yscale", choices=("auto", "linear", "log"))
    _matplotlib()
    _check_ax(ax)
    method = np.asarray([str(m) for m in _column(table, "method", "table")], dtype=object)
    values = _floats(_column(table, metric, "table"), metric)
    if x == "events":
        xs = _floats(_column(table, "last_event", "table"), "last_event") + 1.0
    else:
        xs = _column(table, "end_time", "table")
    present = list(dict.fromkeys(method.tolist()))
    if methods is None:
        methods = present
    else:
        if isinstance(methods, str):
            methods = [methods]
        methods = [str(m) for m in methods]
        for m in methods:
            if m not in present:
                msg = f"`methods` names {m!r}, which is not in the table's `method` column {present!r}."
                raise ValueError(msg)
    if ax is None:
        ax = _new_axes(1, figsize=(6.0, 4.0))
    drawn = np.concatenate([values[method == m] for m in methods]) if methods else np.empty(0)
    if yscale == "auto":
        yscale = "log" if _spans_decades(drawn) else "linear"
    for k, name in enumerate(methods):
        sel = method == name
        ax.plot(xs[sel], values[sel], label=name, markevery=_markevery(int(sel.sum()), k), **_style(k))
    default_title, default_ylabel = _METRIC_LABELS.get(metric, (metric.replace("_", " "), metric.replace("_", " ")))
    ax.set_yscale(yscale)
    if yscale == "log":
        _readable_log_ticks(ax)
    ax.set_ylabel(default_ylabel if ylabel is None else ylabel)
    ax.set_xlabel("events replayed" if x == "events" else "event time")
    ax.grid(alpha=0.3)
    if x == "events":
        from matplotlib.ticker import FuncFormatter, MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    elif len(xs) and isinstance(xs[0], (datetime.datetime, np.datetime64)):
        # dates: a few ticks, each giving only what changes from the last (day, then hours)
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator(maxticks=6)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    if methods:
        _legend_above(ax, default_title if title is None else title)
    else:
        ax.set_title(default_title if title is None else title)
        ax.text(0.5, 0.5, "no windows to draw", transform=ax.transAxes, ha="center", va="center", color="#777777")
    return ax


def _readable_log_ticks(ax) -> None:
    """Plain-number tick labels at 1, 2 and 5 times each power of ten (a log axis spanning a
    decade or two otherwise has one or two labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


# ----------------------------------------------------------------------------- LLR plots


class ECECurves(NamedTuple):
    """Empirical cross-entropy (bits) at each prior log-odds: the LLRs, their PAV-calibrated
    version and the neutral reference (LLR = 0, i.e. the prior entropy)."""

    prior_log_odds: np.ndarray
    llr: np.ndarray
    pav: np.ndarray
    neutral: np.ndarray


def _cross_entropy(llr_pos: np.ndarray, llr_neg: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """ECE(θ) = π E_pos[log2(1 + e^-(llr+θ))] + (1 − π) E_neg[log2(1 + e^(llr+θ))], π = σ(θ)."""
    out = np.empty(theta.size)
    prior = _sigmoid(theta)
    block = max(1, 4_000_000 // max(llr_pos.size + llr_neg.size, 1))
    for start in range(0, theta.size, block):
        t = theta[start : start + block, None]
        pos = np.logaddexp(0.0, -(llr_pos[None, :] + t)).mean(axis=1)
        neg = np.logaddexp(0.0, llr_neg[None, :] + t).mean(axis=1)
        pi = prior[start : start + block]
        out[start : start + block] = (pi * pos + (1.0 - pi) * neg) / math.log(2.0)
    return out


def _llr_and_labels(llr, labels) -> tuple[np.ndarray, np.ndarray]:
    values = as_finite(llr, "llr")
    return values, _labels_for(labels, values.size, "llr", both=True)


def _prior_grid(y: np.ndarray, prior_log_odds) -> np.ndarray:
    if prior_log_odds is not None:
        grid = as_finite(prior_log_odds, "prior_log_odds")
        if np.any(np.diff(grid) <= 0.0):
            msg = "`prior_log_odds` must be strictly increasing."
            raise ValueError(msg)
        return grid
    observed = math.log(y.sum() / (y.size - y.sum()))
    half = max(7.0, abs(observed) + 1.5)
    return np.linspace(-half, half, 281)


def ece_curves(llr, labels, prior_log_odds=None) -> ECECurves:
    """Empirical cross-entropy of LLRs at each prior log-odds, with its PAV and neutral references.

    At prior log-odds ``θ`` (prior probability ``π = σ(θ)`` of a positive), the empirical
    cross-entropy in bits is ``π · mean over positives of log2(1 + e^-(llr + θ)) + (1 − π) · mean
    over negatives of log2(1 + e^(llr + θ))`` (Ramos & Gonzalez-Rodriguez, "Reliable support:
    measuring calibration of likelihood ratios", 2013; Brümmer & du Preez, 2006). At ``θ = 0``
    it is Cllr. The PAV curve scores the LLRs after the best monotone recalibration (exact
    PAV-LLR, :func:`streamcal.isotonic.pav_llr` with ``finite=False``): it is the lowest any
    monotone map of these LLRs can reach, at every prior, and equals minCllr at ``θ = 0``. The
    neutral reference (every LLR 0) is the prior entropy ``−π log2 π − (1 − π) log2(1 − π)``:
    LLRs above it do worse than no evidence at all.

    Parameters
    ----------
    llr : array-like of shape (n,)
        Finite log-likelihood ratios (natural log) in favour of the positive class.
    labels : array-like of shape (n,)
        Binary labels; both classes must be present.
    prior_log_odds : array-like, optional
        Strictly increasing prior log-odds (natural log) to evaluate at. Default: 281 points
        over ``[-7, 7]``, widened to include the labels' own prior log-odds with a margin.

    Returns
    -------
    ECECurves
        ``(prior_log_odds, llr, pav, neutral)``, each an array over the priors.

    Examples
    --------
    >>> from streamcal.plot import ece_curves
    >>> c = ece_curves([-2.0, 0.5, 1.0, 3.0], [0, 0, 1, 1], prior_log_odds=[-1.0, 0.0, 1.0])
    >>> c.llr.round(4).tolist(), c.pav.tolist(), c.neutral.round(4).tolist()
    ([0.4347, 0.5276, 0.4674], [0.0, 0.0, 0.0], [0.8399, 1.0, 0.8399])
    """
    from streamcal.isotonic import pav_llr

    values, y = _llr_and_labels(llr, labels)
    theta = _prior_grid(y, prior_log_odds)
    pos, neg = y == 1.0, y == 0.0
    calibrated = pav_llr(values, y, finite=False)
    zero = np.zeros(1)
    return ECECurves(
        prior_log_odds=theta,
        llr=_cross_entropy(values[pos], values[neg], theta),
        pav=_cross_entropy(calibrated[pos], calibrated[neg], theta),
        neutral=_cross_entropy(zero, zero, theta),
    )


def ece_plot(llr, labels, *, prior_log_odds=None, ax=None, label: str = "LLRs", title: str = "empirical cross-entropy"):
    """Draw the empirical cross-entropy (ECE) plot of LLRs (Ramos & Gonzalez-Rodriguez; BOSARIS).

    Three curves against the prior log-odds: the cross-entropy of the LLRs, of their
    PAV-calibrated version (the discrimination floor: what no monotone recalibration can beat)
    and of the neutral reference LLR = 0 (the prior entropy). The gap between the first two is
    the calibration loss at each prior; where the LLRs' curve rises above the neutral one, they
    mislead more than they help. A dotted vertical line marks the labels' own prior log-odds; a
    top axis shows the prior as a probability. (This ECE is the empirical cross-entropy, not the
    expected calibration error of :func:`streamcal.metrics.ece`.)

    Parameters
    ----------
    llr, labels, prior_log_odds
        As in :func:`ece_curves`.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).
    label : str, default "LLRs"
        Legend entry of the LLRs' curve.
    title : str, default "empirical cross-entropy"

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from streamcal.plot import ece_plot
    >>> rng = np.random.default_rng(0)
    >>> y = rng.uniform(size=2_000) < 0.3
    >>> llr = np.where(y, rng.normal(1.0, 1.5, y.size), rng.normal(-1.0, 1.5, y.size))
    >>> ax = ece_plot(llr, y)
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('prior log-odds, ln(π / (1 − π))', 'empirical cross-entropy (bits)')
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['LLRs', 'after PAV', 'neutral (LLR = 0)', 'prior of the labels']
    >>> plt.close("all")
    """
    curves = ece_curves(llr, labels, prior_log_odds)
    _matplotlib()
    _check_ax(ax)
    y = _llr_and_labels(llr, labels)[1]
    if ax is None:
        ax = _new_axes(1, figsize=(6.5, 4.5))
    theta = curves.prior_log_odds
    ax.plot(theta, curves.llr, label=label, **{**_style(0), "marker": None})
    ax.plot(theta, curves.pav, label="after PAV", **{**_style(1), "marker": None})
    ax.plot(theta, curves.neutral, label="neutral (LLR = 0)", **{**_style(6), "marker": None, "ls": ":"})
    observed = math.log(y.sum() / (y.size - y.sum()))
    ax.axvline(observed, **_REFERENCE, label="prior of the labels")
    top = float(np.max(curves.neutral))
    worst = float(np.max(curves.llr))
    # the LLRs' curve is cut at 2.5 times the prior entropy's peak (a badly miscalibrated set can
    # reach many bits at extreme priors); the top quarter is left to the legend
    ax.set_ylim(0.0, max(top, min(worst, 2.5 * top)) / 0.75)
    ax.set_xlim(float(theta[0]), float(theta[-1]))
    ax.set_xlabel("prior log-odds, ln(π / (1 − π))")
    ax.set_ylabel("empirical cross-entropy (bits)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _prior_probability_axis(ax, float(theta[0]), float(theta[-1]))
    _legend(ax, loc="upper left")
    return ax


def _prior_probability_axis(ax, lo: float, hi: float) -> None:
    """A top axis showing prior log-odds as prior probabilities."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    top = ax.secondary_xaxis("top", functions=(_sigmoid, _logit))
    candidates = [1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-4, 1 - 1e-5, 1 - 1e-6]
    ticks = [p for p in candidates if lo <= math.log(p / (1 - p)) <= hi]
    top.xaxis.set_major_locator(FixedLocator(ticks))
    top.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.6g}"))
    top.set_xlabel("prior probability of a positive", fontsize=9)
    top.tick_params(labelsize=8)


def tippett_plot(llr, labels, *, ax=None, title: str = "Tippett plot"):
    """Draw a Tippett plot: the share of positives' and of negatives' LLRs at or above each value.

    Read at a value ``x`` of the LLR: the solid curve is the proportion of positives (targets)
    whose LLR is at least ``x``, the dashed one that of negatives (non-targets). Good LLRs keep
    the positives' curve high and push the negatives' curve down early; at ``x = 0`` (the dotted
    line) the gaps to 1 and to 0 are the rates of misleading evidence, given in the legend:
    positives with LLR < 0 and negatives with LLR ≥ 0.

    Parameters
    ----------
    llr : array-like of shape (n,)
        Finite log-likelihood ratios (natural log) in favour of the positive class.
    labels : array-like of shape (n,)
        Binary labels; both classes must be present.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).
    title : str, default "Tippett plot"

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from streamcal.plot import tippett_plot
    >>> ax = tippett_plot([-2.0, -1.0, 0.5, 1.0, 3.0], [0, 0, 0, 1, 1])
    >>> ax.get_ylabel()
    'proportion with LLR ≥ x'
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['positives, n = 2 (0% with LLR < 0)', 'negatives, n = 3 (33% with LLR ≥ 0)', 'LLR = 0']
    >>> plt.close("all")
    """
    values, y = _llr_and_labels(llr, labels)
    _matplotlib()
    _check_ax(ax)
    if ax is None:
        ax = _new_axes(1, figsize=(6.5, 4.5))
    lo, hi = float(values.min()), float(values.max())
    pad = 0.05 * max(hi - lo, 1.0)
    lo, hi = lo - pad, hi + pad
    pos, neg = values[y == 1.0], values[y == 0.0]
    for k, (name, v, misleading) in enumerate(
        (
            ("positives", pos, f"{np.mean(pos < 0.0):.0%} with LLR < 0"),
            ("negatives", neg, f"{np.mean(neg >= 0.0):.0%} with LLR ≥ 0"),
        )
    ):
        xs, share = _share_at_or_above(v)
        style = {**_style(k), "marker": None}
        ax.step([lo, *xs, hi], [1.0, *share, 0.0], where="pre", label=f"{name}, n = {v.size:,} ({misleading})", **style)
    ax.axvline(0.0, **{**_REFERENCE, "ls": ":"}, label="LLR = 0")
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("x: LLR (natural log)")
    ax.set_ylabel("proportion with LLR ≥ x")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(ax, loc="lower left")
    return ax


def _share_at_or_above(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of ``v`` and the share of ``v`` at or above each."""
    u, counts = np.unique(v, return_counts=True)
    below = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return u, 1.0 - below / v.size


# ----------------------------------------------------------------------------- summary figure


def replay_figure(
    metrics,
    *,
    edges=None,
    bins=None,
    metric_names=None,
    methods=None,
    min_count: int = 10,
    title: str | None = None,
    fig=None,
):
    """The summary figure of a replay: a reliability diagram with counts, and metrics over time.

    Parameters
    ----------
    metrics : table
        The replay's metrics table (``ReplaySummary.metrics_table`` or the ``metrics_output``
        file read back): see :func:`metrics_over_time`.
    edges, bins : optional
        Per-bin reliability sums, as in :func:`reliability_diagram_from_bins`; without them the
        figure has no reliability diagram.
    metric_names : sequence of str, optional
        The metrics to draw, one panel each (default: every numeric metric column of the table,
        in the replay's order).
    methods : sequence of str, optional
        The methods whose metrics are drawn (default: all).
    min_count : int, default 10
        Reliability bins with fewer events are left out of the diagram.
    title : str, optional
        The figure's title.
    fig : matplotlib Figure, optional
        Where to draw (default: a new pyplot figure). ``streamcal replay`` passes a bare
        ``matplotlib.figure.Figure``, so no pyplot state is involved.

    Returns
    -------
    matplotlib Figure

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from streamcal.plot import replay_figure
    >>> table = {
    ...     "method": ["pav", "raw"] * 2,
    ...     "last_event": [999, 999, 1999, 1999],
    ...     "brier": [0.020, 0.025, 0.019, 0.026],
    ...     "cllr": [0.71, 0.93, 0.70, 0.95],
    ... }
    >>> fig = replay_figure(table, title="two windows")
    >>> [ax.get_title() for ax in fig.axes]
    ['Brier score', 'Cllr']
    >>> plt.close(fig)
    """
    _matplotlib()
    from matplotlib.figure import Figure

    if fig is not None and not isinstance(fig, Figure):
        msg = f"`fig` must be a matplotlib Figure or None; got {type(fig).__name__}."
        raise TypeError(msg)
    if (edges is None) != (bins is None):
        msg = "`edges` and `bins` go together: pass both or neither."
        raise ValueError(msg)
    columns = _column_names(metrics, "metrics")
    if metric_names is None:
        skip = {"window", "first_event", "last_event", "start_time", "end_time", "n_events", "n_positive", "method"}
        known = [m for m in _METRIC_LABELS if m in columns]
        metric_names = known + [c for c in columns if c not in skip and c not in known]
    else:
        metric_names = [metric_names] if isinstance(metric_names, str) else list(metric_names)
    has_reliability = edges is not None
    n_panels = len(metric_names)
    if fig is None:
        import matplotlib.pyplot as plt

        width = (6.0 if has_reliability else 0.0) + 5.0 * min(max(n_panels, 1), 2)
        height = 3.3 * max(-(-n_panels // 2), 2 if has_reliability else 1)
        fig = plt.figure(figsize=(width, height), layout="constrained")
    elif fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    if has_reliability:
        outer = fig.add_gridspec(1, 2, width_ratios=[1.3, 2.0] if n_panels > 1 else [1.0, 1.0])
        left = outer[0].subgridspec(2, 1, height_ratios=[3, 1])
        right = outer[1]
        rel_ax = fig.add_subplot(left[0])
        counts_ax = fig.add_subplot(left[1], sharex=rel_ax)
        reliability_diagram_from_bins(edges, bins, min_count=min_count, ax=rel_ax, counts_ax=counts_ax)
    else:
        right = fig.add_gridspec(1, 1)[0]
    if n_panels:
        ncols = 1 if n_panels == 1 else 2
        grid = right.subgridspec(-(-n_panels // ncols), ncols)
        panels = []
        for i, metric in enumerate(metric_names):
            ax = fig.add_subplot(grid[i // ncols, i % ncols])
            metrics_over_time(metrics, metric, methods=methods, ax=ax)
            panels.append(ax)
    if title:
        fig.suptitle(title)
    if n_panels > 1 or has_reliability:
        _one_legend_for(panels[1:] if not has_reliability else panels)
    return fig


def _one_legend_for(panels: list) -> None:
    """No legend on ``panels``: every panel draws the methods alike, as the reliability diagram's
    legend (or, without it, the first panel's) names them; six copies of one legend took the
    panels' room and wrapped where the methods are many."""
    for ax in panels:
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
        ax.set_title(ax.get_title(), pad=6.0)
