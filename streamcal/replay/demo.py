"""The replay demo: generate a small stream, replay it with every available method, summarise."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from streamcal.replay._replay import ReplaySummary, replay
from streamcal.replay.generate import generate
from streamcal.replay.methods import available_methods

__all__ = ["replay_demo"]

# keeps the demo quick: the map-fitting methods (I-spline, GEV, Platt) refit every 1,000 labels,
# not lazily before every prediction that follows a new label
_DEMO_OPTIONS = {"refit_every": 1_000}


def replay_demo(
    directory=None,
    *,
    scenario: str = "drift",
    n: int = 200_000,
    seed: int = 0,
    window: int = 50_000,
    plot: bool = True,
    progress: bool = False,
    file=None,
) -> ReplaySummary:
    """Generate ``n`` events of ``scenario`` into ``directory`` (a new temporary folder by default,
    kept), replay them with every available method (count window of ``window`` events), print
    the summary and where the outputs are, and return the summary.

    Examples
    --------
    >>> import io, tempfile
    >>> from streamcal.replay.demo import replay_demo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     summary = replay_demo(tmp, n=3_000, window=1_000, plot=False, file=io.StringIO())
    >>> summary.n_events, "raw" in summary.methods
    (3000, True)
    """
    out_dir = Path(tempfile.mkdtemp(prefix="streamcal-demo-")) if directory is None else Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    # load (on the very first run: compile) every method's kernels on a tiny stream first, so that
    # the summary's events/s is the steady state and the one-off cost is reported apart
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tiny = generate(Path(tmp) / "warmup.parquet", scenario=scenario, n=2_000, seed=seed)
        replay(tiny, available_methods(), window=window, method_options=_DEMO_OPTIONS, metrics_window=1_000)
    print(
        f"(kernels loaded in {time.perf_counter() - start:.1f} s: numba compiles them on the first run "
        "and caches them for the next ones)",
        file=file,
    )
    stream = generate(out_dir / f"{scenario}.parquet", scenario=scenario, n=n, seed=seed)
    draw = None
    if plot:
        try:
            import matplotlib  # noqa: F401 - only to know whether a plot can be drawn
        except ImportError:
            draw = None
        else:
            draw = out_dir / f"{scenario}.png"
    summary = replay(
        stream,
        available_methods(),
        window=window,
        method_options=_DEMO_OPTIONS,
        output=out_dir / f"{scenario}.replay.parquet",
        metrics_output=out_dir / f"{scenario}.metrics.parquet",
        metrics_window=max(n // 10, 1),
        plot=draw,
        progress=progress,
    )
    print(
        f"streamcal demo: {n:,} synthetic '{scenario}' events (seed {seed}) replayed in event-time order "
        f"with late labels through {', '.join(summary.methods)}",
        file=file,
    )
    summary.print(file=file)
    print(f"input: {stream}", file=file)
    return summary
