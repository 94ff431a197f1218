"""Compile the kernels of ``streamcal demo`` and of the built-in calibrators into numba's cache.

``pip install .`` runs this while it builds the wheel (``setup.py``), on the package copied into
the build folder, so that the wheel carries the compiled kernels beside their sources and the
installed package's first run loads them instead of compiling (docs/first_calls.md). It runs in
two processes at once, as ``streamcal demo`` does on an empty cache: numba compiles one kernel
at a time per process. ``python -m streamcal._precompile`` runs it on the streamcal it imports
(an editable install, say); it exits with status 0 when both parts compiled.
"""

from __future__ import annotations

import subprocess
import sys
import time

__all__ = ["PARTS", "compile_part", "main"]

#: The two halves of the work, about equally long on an empty cache: PAV, Venn-ABERS and the
#: replay's own kernels (the demo's streaming comparison included); the map-fitting methods.
PARTS = {
    "replay": ("pav", "venn-abers", "raw"),
    "maps": ("ispline", "gev", "platt"),
}


def compile_part(part: str) -> None:
    """Compile (or load) the kernels of ``part`` (a key of :data:`PARTS`) in this process: a tiny
    replay through its methods as ``streamcal demo`` runs it first and what
    :func:`streamcal.warmup` runs for its calibrators; the maps' half also compiles the wrappers'
    own kernels (keyed PAV, pairwise coupling), and the PAV half I-spline's defaults. The two
    halves together cover every built-in calibrator's :func:`streamcal.warmup`."""
    import streamcal
    from streamcal._registry import BUILTIN_CALIBRATORS
    from streamcal._warmup import _warm
    from streamcal.replay.demo import _replay_tiny
    from streamcal.replay.methods import available_methods

    streamcal.use_compiled_kernels()
    methods = [m for m in PARTS[part] if m in available_methods()]
    _replay_tiny(methods, "drift", 0, 1_000)
    calibrators = [m for m in methods if m in BUILTIN_CALIBRATORS]
    if part == "replay":
        from streamcal.demo import run_streaming_demo

        _warm(calibrators, faces=True, defaults=True)
        run_streaming_demo(n=4_000, window=1_000, out=None)
        _metric_windows()
        # I-spline at its defaults (its river face's incremental kernels, the longest compile of
        # all) evens out the two halves; by now the other half has compiled the kernels they share
        _warm([m for m in PARTS["maps"] if m in _BALANCED], faces=False, defaults=True)
    else:
        _warm(calibrators, faces=True, defaults=False)
        _warm([m for m in calibrators if m not in _BALANCED], faces=False, defaults=True)
        _keyed()
        _coupling()


def _metric_windows() -> None:
    """``min_cllr`` of a window as long as the demo's metric windows: its radix sort of the scores
    runs from 4,096 scores on, more than the tiny replay's windows hold."""
    import numpy as np

    from streamcal.metrics import min_cllr

    rng = np.random.default_rng(0)
    scores = rng.uniform(size=5_000)
    min_cllr(rng.uniform(size=5_000) < scores, scores)


# the methods whose defaults the PAV half compiles (see ``compile_part``)
_BALANCED = ("ispline",)


def _keyed() -> None:
    """``KeyedCalibrator`` over PAV (its default) on both faces, a time window's river face, and a
    saved one loaded back."""
    import pickle

    import numpy as np

    from streamcal import KeyedCalibrator, PAVCalibrator

    rng = np.random.default_rng(0)
    s = rng.uniform(0.01, 0.99, size=40_000)  # calls long enough to run pieces grouped by key
    y = rng.uniform(size=s.size) < s
    keys = [str(k) for k in rng.integers(0, 40, size=s.size)]
    for window in (None, 100):
        cal = KeyedCalibrator(PAVCalibrator(window=window))
        cal.prequential(keys, s, y)
        cal.update(keys, s, y)
        for i in range(200):
            x = {"key": keys[i], "score": float(s[i])}
            cal.predict_proba_one(x)
            cal.learn_one(x, bool(y[i]))
        pickle.loads(pickle.dumps(cal)).predict_proba(keys, s)
    cal = KeyedCalibrator(PAVCalibrator(window="1h"))  # the river face's events with a time
    for i in range(200):
        x = {"key": keys[i], "score": float(s[i])}
        cal.predict_proba_one(x)
        cal.learn_one(x, bool(y[i]), t=10.0 * i)


def _coupling() -> None:
    """``PairwiseCouplingCalibrator`` at its defaults, four classes, on both faces."""
    import numpy as np

    from streamcal import PairwiseCouplingCalibrator

    rng = np.random.default_rng(0)
    scores = rng.dirichlet(np.ones(4), size=2_000)
    labels = (scores.cumsum(axis=1) < rng.uniform(size=(scores.shape[0], 1))).sum(axis=1)
    PairwiseCouplingCalibrator(classes=(0, 1, 2, 3)).prequential(scores, labels)
    cal = PairwiseCouplingCalibrator()
    for row, label in zip(scores[:200], labels[:200], strict=True):
        x = dict(enumerate(row.tolist()))
        cal.predict_proba_one(x)
        cal.learn_one(x, int(label))


def main(argv: list[str] | None = None) -> int:
    """``python -m streamcal._precompile [PART]``: one part in this process, or (no argument)
    every part, each in a process of its own, at once; the exit status (0: all compiled)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        compile_part(argv[0])
        return 0
    start = time.perf_counter()
    code = "import sys; from streamcal._precompile import main; sys.exit(main(sys.argv[1:]))"
    workers = [subprocess.Popen([sys.executable, "-c", code, part]) for part in PARTS]
    status = 0
    for worker in workers:
        status = status or worker.wait()
    outcome = "compiled" if status == 0 else "not all compiled (they compile at their first use)"
    print(f"streamcal: kernels {outcome} in {time.perf_counter() - start:.1f} s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
