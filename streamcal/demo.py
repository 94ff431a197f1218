"""The streaming demo: streaming PAV on a click-like stream whose calibration drifts.

``streamcal demo`` runs :func:`run_streaming_demo`: a seeded stream of click-like scores whose
score → probability relation changes abruptly halfway through, calibrated prequentially (each
event predicted with the state before its label) by ``PAVCalibrator`` with a count window and
with an unbounded window. It prints log loss, Brier score, ECE and Cllr of the raw scores and
of both calibrators, before the drift, just after it, and once the window has refilled.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["drifting_click_stream", "run_streaming_demo"]


def drifting_click_stream(n: int, seed: int = 0, drift_at: float = 0.5):
    """Scores, labels and the index of the drift for a seeded click-like stream.

    The model's log-odds ``z ~ N(-3, 1.5)``; the score is ``expit(z)``. Before the drift the
    true click probability is ``expit(1.3 z + 0.5)`` (the model is under-confident), after it
    ``expit(0.6 z - 1.2)`` (over-confident and biased high): a calibrator must relearn.
    """
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, size=n)
    at = int(n * drift_at)
    logit_true = np.where(np.arange(n) < at, 1.3 * z + 0.5, 0.6 * z - 1.2)
    labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit_true))
    return 1.0 / (1.0 + np.exp(-z)), labels, at


def _metrics(y: np.ndarray, p: np.ndarray, llr: np.ndarray) -> dict[str, float]:
    from streamcal import metrics as m

    return {
        "log loss": float(m.log_loss(y, p)),  # unclipped: PAV's default map is never exactly 0 or 1
        "Brier": float(m.brier_score(y, p)),
        "ECE": float(m.ece(y, p)),
        # Cllr weighs each class by its own count: NaN where a short segment holds one class only
        "Cllr": float(m.cllr(y, llr)) if 0 < int(np.count_nonzero(y)) < y.size else float("nan"),
    }


def run_streaming_demo(
    seed: int = 0, n: int = 400_000, window: int = 20_000, out: Callable[[str], None] | None = print
) -> list[dict]:
    """Run the drift demo; print the table through ``out`` (None: silent) and return its rows.

    Each row holds ``segment``, ``calibrator`` and the metrics ``log loss``, ``Brier``, ``ECE``
    and ``Cllr`` (Cllr of the raw scores uses their log-odds as LLRs).

    Examples
    --------
    >>> rows = run_streaming_demo(n=40_000, window=4_000, out=None)
    >>> after = {r["calibrator"]: r["log loss"] for r in rows if r["segment"] == "after drift, window refilled"}
    >>> after["PAV, count window 4,000"] < after["PAV, unbounded"] < after["raw score"]
    True
    """
    from streamcal.isotonic.streaming import PAVCalibrator
    from streamcal.replay.methods import RawScoreCalibrator
    from streamcal.windows import CountWindow, Unbounded

    scores, labels, at = drifting_click_stream(n, seed)
    # the raw score's LLR as replay's `raw` method gives it: logit(score) - logit(running base rate)
    runs = {"raw score": RawScoreCalibrator().prequential(scores, labels)}
    for name, win in ((f"PAV, count window {window:,}", CountWindow(window)), ("PAV, unbounded", Unbounded())):
        runs[name] = PAVCalibrator(window=win).prequential(scores, labels)
    segments = {
        "before drift": slice(window, at),
        "just after drift": slice(at, at + window),
        "after drift, window refilled": slice(at + window, n),
    }
    rows = []
    for seg, sl in segments.items():
        if sl.start >= min(sl.stop, n):  # a stream too short for this segment
            continue
        for name, (p, llr) in runs.items():
            rows.append({"segment": seg, "calibrator": name, **_metrics(labels[sl], p[sl], llr[sl])})
    if out is not None:
        out(
            f"Streaming PAV on a drifting click stream: {n:,} events, seed {seed}, drift at event "
            f"{at:,}; prequential (each event predicted before its label is learned)."
        )
        header = f"{'segment':<30} {'calibrator':<28} {'log loss':>9} {'Brier':>9} {'ECE':>8} {'Cllr':>8}"
        out(header)
        out("-" * len(header))
        for r in rows:
            out(
                f"{r['segment']:<30} {r['calibrator']:<28} {r['log loss']:>9.5f} {r['Brier']:>9.5f} "
                f"{r['ECE']:>8.5f} {r['Cllr']:>8.4f}"
            )
    return rows
