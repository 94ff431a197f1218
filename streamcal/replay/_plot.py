"""``--plot``: the replay's summary figure, drawn by :func:`streamcal.plot.replay_figure`."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_replay"]

MIN_BIN_EVENTS = 20  # reliability bins with fewer events are too noisy to draw


def plot_replay(path, reliability, names: list[str], metrics_table, title: str = "", alarms=None):
    """Write a PNG: a reliability diagram (logit-spaced bins of the replay's ``Reliability``;
    bins with fewer than ``MIN_BIN_EVENTS`` events left out) with the events per bin beneath,
    and each metric per window of events, one line per method.

    ``names`` are the methods whose reliability is drawn; ``"score"`` is the input score, drawn
    as "input score" unless it is exactly the ``raw`` method's curve (then one line says both).
    ``alarms`` (``--monitor``): the first alarm of each calibration monitor, marked on the
    metrics panels. Returns the (bare, non-pyplot) matplotlib Figure.
    """
    from streamcal.plot import _matplotlib, replay_figure

    _matplotlib()
    from matplotlib.figure import Figure

    edges = np.concatenate(([0.0], reliability.EDGES, [1.0]))
    bins = {}
    for name in names:
        sums = (reliability.count[name], reliability.sum_p[name], reliability.sum_y[name])
        if name == "score":
            if "raw" in bins and all(np.array_equal(a, b) for a, b in zip(sums, bins["raw"], strict=True)):
                # renamed in place: a method keeps its place, so its style, in every panel
                bins = {("raw (the input score)" if k == "raw" else k): v for k, v in bins.items()}
                continue
            name = "input score"
        bins[name] = sums
    methods = list(dict.fromkeys(metrics_table.column("method").to_pylist()))
    fig = Figure(figsize=(16.0, 10.0), layout="constrained")
    replay_figure(
        metrics_table,
        edges=edges,
        bins=bins,
        min_count=MIN_BIN_EVENTS,
        methods=methods,
        title=title or None,
        fig=fig,
    )
    if alarms:
        from streamcal.replay._monitor import mark_alarms

        mark_alarms(fig, alarms)
    fig.savefig(path, dpi=90)
    return fig
