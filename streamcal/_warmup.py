"""``streamcal.warmup``: compile (or load) the streaming calibrators' kernels before they are needed."""

from __future__ import annotations

import inspect
import pickle
import time

__all__ = ["warmup"]

def _method_names(methods) -> list[str]:
    from streamcal._registry import BUILTIN_CALIBRATORS

    names = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods)
    for i, name in enumerate(names):
        if name not in BUILTIN_CALIBRATORS:
            known = ", ".join(BUILTIN_CALIBRATORS)
            msg = f"`methods` must name methods among {known}; got {name!r} at position {i}."
            raise ValueError(msg)
    return names


def warmup(methods="pav") -> float:
    """Switch the process to compiled kernels and compile (on a fresh install) or load (from numba's
    cache) the kernels of the named streaming calibrators; returns the seconds it took.

    A process's first small calls run interpreted and its first large call compiles or loads the
    kernels it needs (docs/first_calls.md). A service calls this at start-up so that no request
    waits for numba: it runs every face of each calibrator (``prequential``, ``update``, the array
    predictions, the river face, with a count window and a time window) on a tiny stream, and
    the river face of each calibrator that takes ``refit_every`` with it set (its lock-free calls
    between refits), and every face of each calibrator at its defaults on a stream that holds the
    score prior and on one that refutes it.

    Parameters
    ----------
    methods : str or list of str
        ``"pav"`` (default), ``"ispline"``, ``"gev"``, ``"platt"``, ``"venn-abers"``, as a list or a comma-separated
        string such as ``"pav,gev"``.

    Examples
    --------
    >>> import streamcal
    >>> seconds = streamcal.warmup("pav,platt")
    >>> from streamcal._kernels import _config
    >>> _config.is_compiled()
    True
    """

    from streamcal._kernels import _config

    names = _method_names(methods)
    start = time.perf_counter()
    _config.use_compiled_kernels()
    _warm(names, faces=True, defaults=True)
    return time.perf_counter() - start


def _warm(names: list[str], *, faces: bool, defaults: bool) -> None:
    """:func:`warmup`'s two halves, which the install's compile runs in different processes
    (``streamcal._precompile``): each face with small windows and ``refit_every``, and each
    calibrator at its defaults."""
    import numpy as np

    from streamcal._registry import builtin_calibrator
    from streamcal.windows import CountWindow, TimeWindow

    rng = np.random.default_rng(0)
    s = rng.uniform(0.01, 0.99, size=64)
    y = rng.uniform(size=64) < s
    t = np.arange(64, dtype=float)
    # the defaults' streams: labels that hold the score (the prior stays) and labels that refute it
    scores = rng.uniform(0.01, 0.99, size=400)
    calibrated = rng.uniform(size=400) < scores
    refuted = rng.uniform(size=400) < 1.0 - scores
    for name in names:
        calibrator_class = builtin_calibrator(name)
        takes_refit_every = "refit_every" in inspect.signature(calibrator_class).parameters
        if faces:
            for window, times in ((CountWindow(16), None), (TimeWindow(10.0), t)):
                cal = calibrator_class(window=window)
                cal.prequential(s[:32], y[:32], times=None if times is None else times[:32])
                cal.update(s[32:48], y[32:48], times=None if times is None else times[32:48])
                cal.predict_proba(s)
                cal.predict_llr(s)
                for i in range(48, 64):
                    x = {"score": float(s[i])}
                    cal.predict_proba_one(x)
                    cal.predict_llr_one(x)
                    cal.learn_one(x, bool(y[i]), t=None if times is None else float(times[i]))
            if takes_refit_every:
                _river_between_refits(calibrator_class(window=CountWindow(16), refit_every=8), s, y)
        if defaults:
            if takes_refit_every:
                _river_between_refits(calibrator_class(refit_every=8), s, y)
                between = calibrator_class(refit_every=8)
                between.update(s, y)
                between.predict_proba(s)
            for labels in (calibrated, refuted):
                _defaults(calibrator_class, scores, labels)


def _defaults(calibrator_class, s, y) -> None:
    """Every face of a calibrator at its defaults over ``s``, ``y``: the score prior's paths
    differ where the labels hold it and where they refute it (the I-spline and GLM maps' exact
    refits switch kernels there)."""
    cal = calibrator_class()
    for i in range(s.size):
        x = {"score": float(s[i])}
        cal.predict_proba_one(x)
        cal.learn_one(x, bool(y[i]))
    cal.predict_llr_one(x)
    named = calibrator_class(score_key="score")  # the score among other features: the generic path
    for i in range(s.size):
        features = {"score": float(s[i]), "other": 0.0}
        named.predict_proba_one(features)
        named.learn_one(features, bool(y[i]))
    restored = pickle.loads(pickle.dumps(cal))  # a restored state rebuilds its map
    restored.predict_proba_one(x)
    restored.learn_one(x, bool(y[0]))
    cal = calibrator_class()
    cal.prequential(s, y)
    cal.update(s, y)
    cal.predict_proba(s)
    cal.predict_llr(s)


def _river_between_refits(cal, s, y) -> None:
    """The river face with ``refit_every`` set: the lock-free learning and predictions between
    refits (``streamcal._kernels.deferred_face``), the refits, and the LLR under the lock."""
    for i in range(s.size):
        x = {"score": float(s[i])}
        cal.predict_proba_one(x)
        if i % 16 == 0:
            cal.predict_llr_one(x)
        cal.learn_one(x, bool(y[i]))
