"""``--plot``: reliability diagrams and metrics over time (needs matplotlib, the ``plot`` extra)."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_replay"]

MIN_BIN_EVENTS = 20  # reliability bins with fewer events are too noisy to draw


def plot_replay(path, reliability, names: list[str], metrics_table, title: str = "") -> None:
    """Write a PNG: a reliability diagram (log-log, so rare positives show; bins with fewer than
    ``MIN_BIN_EVENTS`` events or no positive left out) and each metric per window of events, one
    line per method."""
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - depends on the installation
        msg = "`plot` needs matplotlib: pip install 'streamcal-engine[plot]'."
        raise ImportError(msg) from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    present = set(metrics_table.column_names)
    # one panel per metric; minCllr goes dashed into the Cllr panel (their gap is the
    # calibration loss of the LLRs)
    panel_metrics = [c for c in ("brier", "log_loss", "cllr", "ece", "calibration_loss") if c in present]
    if "min_cllr" in present and "cllr" not in present:
        panel_metrics.append("min_cllr")
    panels = 1 + len(panel_metrics)
    ncols = 3
    nrows = -(-panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.0 * ncols, 4.0 * nrows), squeeze=False)
    axes = axes.ravel()
    ax = axes[0]
    lo = 1.0
    for name in names:
        x, y, count = reliability.curve(name)
        keep = (count >= MIN_BIN_EVENTS) & (y > 0)  # a log axis cannot show a frequency of 0
        if not keep.any():
            continue
        label = "input score" if name == "score" else name
        style = {"color": "black", "ls": ":"} if name == "score" else {}
        ax.plot(x[keep], y[keep], marker="o", ms=3, label=label, **style)
        lo = min(lo, float(np.min(x[keep])), float(np.min(y[keep])))
    lo = max(lo / 2.0, 1e-6)
    ax.plot([lo, 1.0], [lo, 1.0], color="grey", lw=0.8, ls="--", label="perfect")
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(lo, 1.0),
        ylim=(lo, 1.0),
        xlabel="predicted probability",
        ylabel="observed frequency",
        title="reliability",
    )
    ax.legend(fontsize=8)
    methods = metrics_table.column("method").to_pylist()
    x_all = np.asarray(metrics_table.column("last_event").to_pylist(), dtype=np.float64) + 1.0
    for ax, metric in zip(axes[1:], panel_metrics, strict=False):
        values = np.asarray(metrics_table.column(metric).to_pylist(), dtype=np.float64)
        extra = None
        if metric == "cllr" and "min_cllr" in present:
            extra = np.asarray(metrics_table.column("min_cllr").to_pylist(), dtype=np.float64)
        for k, name in enumerate(dict.fromkeys(methods)):
            sel = np.asarray([m == name for m in methods])
            color = f"C{k}"
            ax.plot(x_all[sel], values[sel], marker=".", color=color, label=name)
            if extra is not None:
                ax.plot(x_all[sel], extra[sel], ls="--", color=color, label=f"{name} (min)")
        panel_title = "Cllr (solid) and minCllr (dashed), bits" if extra is not None else metric.replace("_", " ")
        ax.set(title=panel_title, xlabel="events")
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    axes[1].legend(fontsize=8)
    for ax in axes[panels:]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
