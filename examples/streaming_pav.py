"""Streaming PAV: calibrate a drifting score stream, event by event and in arrays.

Install: ``pip install .`` (the plain install). Run: ``python examples/streaming_pav.py``
"""

from __future__ import annotations

import numpy as np
from river import linear_model, preprocessing

from streamcal.buckets import LogitGrid
from streamcal.demo import drifting_click_stream
from streamcal.isotonic.streaming import PAVCalibrator
from streamcal.windows import CountWindow, Decay

# 1. The array face: replay a stream prequentially in one call (each event is predicted with the
#    state before its own label is learned).
scores, labels, drift_at = drifting_click_stream(200_000, seed=1)
cal = PAVCalibrator(buckets=LogitGrid(1024), window=CountWindow(20_000))
proba, llr = cal.prequential(scores, labels)
after = slice(drift_at + 20_000, None)
print(f"mean predicted {proba[after].mean():.4f}  vs  observed rate {labels[after].mean():.4f} (after the drift)")
print(f"raw score mean {scores[after].mean():.4f}; the window holds {cal.window_weight:,.0f} events")

# 1b. Threads: n_jobs splits a long sequence over cores and gives the same numbers, bit for bit
#     (each thread replays the earlier labels into the histogram alone, then runs its chunk).
#     Threads start at 2**17 events per thread; this stream is 200,000 events, so run it twice over.
long_scores, long_labels = np.tile(scores, 2), np.tile(labels, 2)
one, two = (PAVCalibrator(window=CountWindow(20_000), n_jobs=k).prequential(long_scores, long_labels) for k in (1, 2))
print(f"n_jobs=2 gives the same probabilities and LLRs: {all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))}")

# 2. Late labels: `process` interleaves predictions (learn_mask False) and learning (True) in
#    one ordered call, which is how a replay serves labels that arrive after the prediction.
cal = PAVCalibrator(window=Decay(half_life=5_000))
order_scores = np.concatenate([scores[:1000], scores[:1000]])
order_labels = np.concatenate([np.zeros(1000), labels[:1000]])
learn_mask = np.r_[np.zeros(1000, bool), np.ones(1000, bool)]  # predict all, then learn all
p, _ = cal.process(order_scores, order_labels, learn_mask)
print(f"predictions before any label are the scores themselves: {np.allclose(p[:1000], scores[:1000])}")

# 3. The river face: calibrate a river model's scores online. The model scores each event before
#    it learns it, so the calibrator never sees in-sample scores.
model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
calibrator = PAVCalibrator(window=CountWindow(5_000))
rng = np.random.default_rng(2)
hits = 0.0
for _ in range(20_000):
    x = {"a": rng.normal(), "b": rng.normal()}
    y = rng.uniform() < 1 / (1 + np.exp(-(2 * x["a"] - x["b"] - 2)))
    score = model.predict_proba_one(x).get(True, 0.5)
    p = calibrator.predict_proba_one({"score": score})[True]
    llr = calibrator.predict_llr_one({"score": score})
    hits += (p > 0.5) == y
    calibrator.learn_one({"score": score}, y)
    model.learn_one(x, y)
print(f"accuracy of the calibrated river model: {hits / 20_000:.3f}; last LLR {llr:+.2f}")
