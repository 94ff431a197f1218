"""Streaming Venn–Abers: a probability interval per event, wide where the window knows little.

Install: ``pip install .`` (the plain install). Run: ``python examples/venn_abers.py``
"""

from __future__ import annotations

import numpy as np

from streamcal import PAVCalibrator, VennAbersCalibrator
from streamcal.windows import CountWindow

rng = np.random.default_rng(0)
n = 200_000
z = rng.normal(-3.0, 1.5, size=n)
scores = 1.0 / (1.0 + np.exp(-z))  # a click model's scores
labels = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(1.3 * z + 0.5)))  # a miscalibrated truth

# 1. The array face: (p0, p1) for each event with the state before its label, then the label.
cal = VennAbersCalibrator(window=CountWindow(50_000))
p0, p1 = cal.prequential_interval(scores, labels)
width = p1 - p0
print(f"intervals: median width {np.median(width):.4f}; widest 1 % wider than {np.quantile(width, 0.99):.4f}")
for lo, hi in ((0.0, 0.01), (0.01, 0.1), (0.1, 1.0)):
    at = (scores >= lo) & (scores < hi)
    print(f"  scores in [{lo}, {hi}): {at.sum():7,d} events, mean width {width[at].mean():.4f}")

# 2. Validity: among events whose merged probability falls in a bin, the observed rate lies
#    between the bin's mean p0 and mean p1 (up to sampling error).
merged = p1 / (1.0 - p0 + p1)
bins = np.minimum((merged * 10).astype(int), 9)
print("bin  events   mean p0  observed  mean p1")
for k in range(10):
    at = bins == k
    if at.sum() >= 100:
        print(f"{k:3d}  {at.sum():7,d}  {p0[at].mean():.4f}    {labels[at].mean():.4f}    {p1[at].mean():.4f}")

# 3. The merged probability against the finite PAV map, prequential log loss on the same stream.
def log_loss(p, y):
    return -np.mean(np.where(y, np.log(p), np.log1p(-p)))


for name, c in (("Venn-Abers", VennAbersCalibrator(window=50_000)), ("PAV", PAVCalibrator(window=50_000))):
    p, _ = c.prequential(scores, labels)
    print(f"{name:10s} prequential log loss {log_loss(p, labels):.5f}")

# 4. The score prior (the default): on a rare-event stream whose score is close to the truth, the
#    pair starts from the score instead of from a wide interval. prior=None is the exact pair.
z = rng.normal(-5.8, 1.0, size=40_000)  # base rate about 0.5 %
rare_labels = rng.uniform(size=z.size) < 1.0 / (1.0 + np.exp(-z))
rare_scores = 1.0 / (1.0 + np.exp(-(z + 0.3)))  # off by 0.3 in log-odds
print("rare events: prequential log loss over the first 1,000 events / all 40,000")
for name, c in (
    ("Venn-Abers", VennAbersCalibrator()),
    ("Venn-Abers, prior=None", VennAbersCalibrator(prior=None)),
    ("PAV", PAVCalibrator()),
):
    p, _ = c.prequential(rare_scores, rare_labels)
    print(f"  {name:22s} {log_loss(p[:1000], rare_labels[:1000]):.5f} / {log_loss(p, rare_labels):.5f}")

# 5. The river face: one event at a time.
x = {"score": 0.05}
lo, hi = cal.predict_interval_one(x)
print(f"score 0.05: interval [{lo:.4f}, {hi:.4f}], merged {cal.predict_proba_one(x)[True]:.4f}")
cal.learn_one(x, True)
