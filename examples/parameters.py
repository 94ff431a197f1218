"""Parameter shorthands, ``fit``, and the input forms every array argument takes.

Install: ``pip install .`` (the plain install). Run: ``python examples/parameters.py``
"""

from __future__ import annotations

import numpy as np

from streamcal import PAVCalibrator
from streamcal.buckets import LogitGrid
from streamcal.windows import CountWindow, TimeWindow

rng = np.random.default_rng(3)
n = 50_000
scores = rng.uniform(size=n)
labels = rng.uniform(size=n) < scores**2  # a miscalibrated model: the true rate is score squared
times = np.cumsum(rng.exponential(20.0, size=n))  # seconds

# 1. Shorthands: an int is a number of buckets or of events, a duration string a time window.
short = PAVCalibrator(buckets=1024, window=10_000)
explicit = PAVCalibrator(buckets=LogitGrid(1024), window=CountWindow(10_000))
same = all(np.array_equal(a, b) for a, b in zip(short.prequential(scores, labels), explicit.prequential(scores, labels), strict=True))
print(f"buckets=1024, window=10_000 equals LogitGrid(1024), CountWindow(10_000) bit for bit: {same}")
print(f"the parameter is kept as given: window={short.window!r}; the explicit one reads {explicit.window!r}")

day = PAVCalibrator(window="1d").update(scores, labels, times=times)
print(f"window='1d' is {TimeWindow(86_400.0)!r}: it holds {day.window_weight:,.0f} of the {n:,} events")

# 2. fit replaces the state, as scikit-learn's fit does: a fresh calibrator plus update.
cal = PAVCalibrator(window=10_000).update(scores[:100], labels[:100])
cal.fit(scores, labels, sample_weight=np.ones(n))
fresh = PAVCalibrator(window=10_000).update(scores, labels)
grid = np.linspace(0.0, 1.0, 5)
print(f"fit == fresh + update: {np.array_equal(cal.predict_proba(grid), fresh.predict_proba(grid))}; p(grid) = {np.round(cal.predict_proba(grid), 3)}")

# 3. Input forms: an (n, 1) column, a list, pandas / polars when installed; all equal to 1-d arrays.
forms = {"(n, 1) array": scores[:, None], "list": scores.tolist()}
try:
    import pandas as pd

    frame = pd.DataFrame({"score": scores, "label": labels})
    forms["pandas DataFrame[['score']]"] = frame[["score"]]
    forms["pandas Series"] = frame["score"]
except ImportError:
    print("(pandas is not installed: its forms are skipped here)")
reference = PAVCalibrator().fit(scores, labels).predict_proba(grid)
for name, form in forms.items():
    got = PAVCalibrator().fit(form, labels).predict_proba(grid)
    print(f"scores as {name:28s} -> same predictions: {np.array_equal(got, reference)}")

# 4. Bad values say what is wrong.
for bad in ({"window": 1.5}, {"window": "7x"}, {"buckets": 1}):
    try:
        PAVCalibrator(**bad)
    except (TypeError, ValueError) as exc:
        print(f"{bad}: {type(exc).__name__}: {exc}")
try:
    cal.predict_proba(np.column_stack([scores, scores]))
except ValueError as exc:
    print(f"two columns: {exc}")
