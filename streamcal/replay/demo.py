"""The replay demo: generate a small stream, replay it with every available method, summarise."""

from __future__ import annotations

import os
import subprocess
import sys
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
# the click-like scenarios' attribution window: every label is known an hour after its event (the
# fraud scenario's labels come at their own times)
_DEMO_LABEL_DELAYS = {"click": "1h", "drift": "1h", "campaigns": "1h"}


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
    # load every method's kernels on a tiny stream first (compiling those that neither the install
    # nor an earlier run compiled), so that the summary's events/s is the steady state and the
    # one-off cost is reported apart
    start = time.perf_counter()
    _load_kernels(available_methods(), scenario, seed, window)
    print(
        f"(kernels loaded in {time.perf_counter() - start:.1f} s: numba compiles them once, "
        "when the package is installed or else on the first run, and caches them)",
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
        label_delay=_DEMO_LABEL_DELAYS.get(scenario),
    )
    delay = _DEMO_LABEL_DELAYS.get(scenario)
    labels = (
        "with late labels"
        if delay is None
        else f"with every label learned {delay} after its event (when the attribution window closes: "
        "learning clicks within minutes and non-clicks after the hour would bias every calibrator while "
        "non-clicks are in flight; `streamcal replay` without --label-delay shows that)"
    )
    print(
        f"streamcal demo: {n:,} synthetic '{scenario}' events (seed {seed}) replayed in event-time order "
        f"through {', '.join(summary.methods)}, {labels}",
        file=file,
    )
    summary.print(file=file)
    print(f"input: {stream}", file=file)
    return summary


# On a fresh install the map-fitting methods' kernels compile in a helper process while this one
# compiles PAV's and replay's (numba compiles one kernel at a time per process; its on-disk cache
# is shared), and this process then loads them from the cache.
_HELPER_METHODS = ("ispline", "gev", "platt")


def _replay_tiny(methods: list[str], scenario: str, seed: int, window: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tiny = generate(Path(tmp) / "warmup.parquet", scenario=scenario, n=2_000, seed=seed)
        replay(tiny, methods, window=window, method_options=_DEMO_OPTIONS, metrics_window=1_000)


def _kernels_cached() -> bool:
    """Whether numba's cache already holds the streaming I-spline refit kernel (then every method's
    kernels are most likely cached: the demo compiles them together). False when numba's cache
    cannot be read."""
    from streamcal._kernels import _config, ispline

    return _config.is_cached(ispline.ispline_refit_histogram)


def _start_helper(methods: list[str], scenario: str, seed: int, window: int) -> subprocess.Popen | None:
    """A process compiling ``methods``' kernels into numba's cache (None if it cannot start)."""
    import streamcal

    env = dict(os.environ)
    root = str(Path(streamcal.__file__).resolve().parents[1])  # the same streamcal as this process
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    code = "import sys; from streamcal.replay.demo import _helper_main; _helper_main(sys.argv[1:])"
    try:
        return subprocess.Popen(
            [sys.executable, "-c", code, scenario, str(seed), str(window), *methods],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _helper_main(argv: list[str]) -> None:
    """The helper process: ``argv`` is the scenario, the seed, the window, then the methods."""
    import streamcal

    streamcal.use_compiled_kernels()
    scenario, seed, window, *methods = argv
    _replay_tiny(methods, scenario, int(seed), int(window))


def _load_kernels(methods: list[str], scenario: str, seed: int, window: int, parallel: bool | None = None) -> None:
    """Load (on a fresh install: compile) every method's kernels by replaying a tiny stream.

    ``parallel`` (default: when numba's cache is empty) compiles the map-fitting methods' kernels
    in a helper process meanwhile; whatever it fails to compile, this process compiles after."""
    import streamcal

    streamcal.use_compiled_kernels()  # not the interpreted tier: the point is to load the kernels
    helped = [m for m in methods if m in _HELPER_METHODS]
    if parallel is None:
        parallel = bool(helped) and not _kernels_cached()
    helper = _start_helper(helped, scenario, seed, window) if parallel and helped else None
    try:
        mine = [m for m in methods if m not in helped] if helper is not None else methods
        if mine:
            _replay_tiny(mine, scenario, seed, window)
        if helper is not None:
            helper.wait()
            _replay_tiny(helped, scenario, seed, window)  # loads what the helper compiled
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()
