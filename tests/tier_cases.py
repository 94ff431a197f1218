"""Streams that exercise every PAV kernel, run in one tier (compiled or interpreted).

``tests/test_tiers.py`` runs :func:`run_all` in the test process with compiled kernels and in a
fresh process whose allowance of interpreted events covers everything (numba never imported
there), and compares the two bit for bit. Run as a script, this module writes the fresh
process's results: ``python tier_cases.py OUT.npz``.
"""

from __future__ import annotations

import sys

import numpy as np

from streamcal import PAVCalibrator
from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid
from streamcal.windows import CountWindow, Decay, TimeWindow

N = 700  # events per case: every case's kernels see some thousands of events in all


def cases() -> dict[str, dict]:
    """Case name -> calibrator parameters and the kind of stream."""
    windows = {
        "unbounded": None,
        "count": CountWindow(60),
        "time": TimeWindow(40.0),
        "decay-events": Decay(50.0),
        "decay-time": Decay(30.0, by="time"),
    }
    out = {}
    for name, window in windows.items():
        for weights in ("none", "whole", "fractional"):
            out[f"{name}/{weights}"] = {"params": {"window": window}, "weights": weights}
    out["exact-map"] = {"params": {"finite_proba": False, "window": CountWindow(80)}, "weights": "whole"}
    out["exact-map-step"] = {"params": {"finite_proba": False, "interpolation": "step"}, "weights": "none"}
    out["step/pseudo-count"] = {"params": {"interpolation": "step", "llr_pseudo_count": 0.25}, "weights": "zeros"}
    out["uniform-grid"] = {"params": {"buckets": UniformGrid(37)}, "weights": "fractional"}
    out["few-logit-buckets"] = {"params": {"buckets": LogitGrid(8)}, "weights": "huge"}
    out["quantile-warm-up"] = {"params": {"buckets": QuantileEdges(32, warmup=100)}, "weights": "none"}
    out["raw-scores"] = {"params": {"buckets": Edges([-2.0, -0.5, 0.0, 0.1, 3.0])}, "weights": "whole", "raw": True}
    return out


def stream(case: dict, seed: int):
    """Scores, labels, weights (or None) and times of one case's stream."""
    rng = np.random.default_rng(seed)
    if case.get("raw"):
        s = rng.normal(0.0, 2.0, size=N)
    else:
        s = rng.beta(0.6, 3.0, size=N)
        s[::97] = 0.0  # a model's exact 0 and 1
        s[::89] = 1.0
    y = rng.uniform(size=N) < (1.0 / (1.0 + np.exp(-3.0 * (s - 0.3))) if case.get("raw") else s)
    kind = case["weights"]
    w = {
        "none": None,
        "whole": rng.integers(0, 4, size=N).astype(float),
        "fractional": rng.uniform(0.0, 2.0, size=N),
        "zeros": np.where(rng.uniform(size=N) < 0.3, 0.0, 1.0),
        "huge": np.where(rng.uniform(size=N) < 0.05, 1e30, rng.uniform(0.5, 1.5, size=N)),
    }[kind]
    t = np.cumsum(rng.exponential(1.0, size=N))
    return s, y, w, t


def run_case(case: dict, seed: int) -> dict[str, np.ndarray]:
    """Every face of one calibrator on one stream: outputs and the saved state's arrays."""
    s, y, w, t = stream(case, seed)
    times = t if case["params"].get("window") is not None and case["params"]["window"].uses_times else None
    out: dict[str, np.ndarray] = {}
    cal = PAVCalibrator(**case["params"])
    third = N // 3
    p, llr = cal.prequential(
        s[:third], y[:third], weights=None if w is None else w[:third], times=None if times is None else times[:third]
    )
    out["prequential_p"], out["prequential_llr"] = p, llr
    cal.update(s[third : 2 * third], y[third : 2 * third], weights=None if w is None else w[third : 2 * third],
               times=None if times is None else times[third : 2 * third])
    out["predict_proba"] = cal.predict_proba(s)
    out["predict_llr"] = cal.predict_llr(s)
    river_p, river_llr = [], []
    for i in range(2 * third, N):
        x = {"score": float(s[i])}
        river_p.append(cal.predict_proba_one(x)[True])
        river_llr.append(cal.predict_llr_one(x))
        cal.learn_one(x, bool(y[i]), w=1.0 if w is None else float(w[i]), t=None if times is None else float(times[i]))
    out["river_p"], out["river_llr"] = np.array(river_p), np.array(river_llr)
    for key, value in cal.__getstate__().items():
        if isinstance(value, np.ndarray) and value.dtype.kind in "fiub":
            out[f"state.{key}"] = value.copy()
    return out


def run_keyed(window, strength, seed: int) -> dict[str, np.ndarray]:
    """A keyed calibrator over PAV: the array face, then the river face's single-event path."""
    from streamcal import KeyedCalibrator

    rng = np.random.default_rng(seed)
    s = rng.beta(0.6, 3.0, size=N)
    y = rng.uniform(size=N) < s
    keys = [str(k) for k in rng.integers(0, 5, size=N)]
    cal = KeyedCalibrator(PAVCalibrator(window=window), prior_strength=strength)
    half = N // 2
    out = dict(zip(("prequential_p", "prequential_llr"), cal.prequential(keys[:half], s[:half], y[:half])))
    river_p, river_llr = [], []
    for i in range(half, N):
        x = {"key": keys[i], "score": float(s[i])}
        river_p.append(cal.predict_proba_one(x)[True])
        river_llr.append(cal.predict_llr_one(x))
        cal.learn_one(x, bool(y[i]))
    out["river_p"], out["river_llr"] = np.array(river_p), np.array(river_llr)
    out["predict_proba"] = cal.predict_proba(["0"] * N, s)
    return out


def run_all() -> dict[str, np.ndarray]:
    """All cases, two seeds each, flattened to ``"case|seed|output"`` -> array."""
    out = {}
    for name, case in cases().items():
        for seed in (0, 1):
            for key, value in run_case(case, seed).items():
                out[f"{name}|{seed}|{key}"] = value
    for name, window, strength in (("keyed-count", CountWindow(60), "auto"), ("keyed-decay", Decay(50.0), 30.0)):
        for seed in (0, 1):
            for key, value in run_keyed(window, strength, seed).items():
                out[f"{name}|{seed}|{key}"] = value
    return out


def bits(a: np.ndarray) -> np.ndarray:
    """The array's bytes as integers: equality of these is equality bit for bit (NaNs, -0.0)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint8)


if __name__ == "__main__":
    results = run_all()
    results["numba imported"] = np.array("numba" in sys.modules)
    np.savez(sys.argv[1], **results)
