"""One calibrator shared by threads: a label consumer learns while request threads predict.

A service scores requests with a model and calibrates the scores with one ``PAVCalibrator``. Labels
arrive later, on a queue, and a consumer thread learns them (one by one, and in batches through the
array face); two request threads predict meanwhile. Every public method is atomic (see
``docs/architecture.md``, "Thread safety"): nothing learned is lost, and every prediction sees the
state before or after each update, never part of the way.

Install: ``pip install .`` (the plain install). Run: ``python examples/thread_safety.py``
"""

from __future__ import annotations

import queue
import threading

import numpy as np

from streamcal import PAVCalibrator
from streamcal.windows import CountWindow

N = 60_000
rng = np.random.default_rng(0)
scores = 1.0 / (1.0 + np.exp(-rng.normal(-1.0, 1.5, size=N)))
labels = rng.uniform(size=N) < scores**1.5  # the model is over-confident

calibrator = PAVCalibrator(window=CountWindow(20_000))
labelled: queue.Queue = queue.Queue()
stop = threading.Event()


def label_consumer():
    """Learn the labels as they come: single events through the river face, batches through the array face."""
    while True:
        item = labelled.get()
        if item is None:
            return
        s, y = item
        if np.ndim(s) == 0:
            calibrator.learn_one({"score": float(s)}, bool(y))
        else:
            calibrator.update(s, y)


def request_thread(seed: int, served: list):
    """Calibrate fresh scores until the labels are all in; check every answer."""
    local = np.random.default_rng(seed)
    while not stop.is_set():
        p = calibrator.predict_proba_one({"score": float(local.uniform())})[True]
        batch = calibrator.predict_proba(np.sort(local.uniform(size=64)))
        assert 0.0 <= p <= 1.0
        assert np.all(np.diff(batch) >= 0.0)  # the isotonic map is never seen half-updated
        served.append(1 + batch.size)


served: list = []
threads = [threading.Thread(target=label_consumer)]
threads += [threading.Thread(target=request_thread, args=(k, served)) for k in range(2)]
for t in threads:
    t.start()
i = 0
while i < N:  # labels arrive one by one, or in batches of up to 500
    size = 1 if rng.uniform() < 0.5 else int(rng.integers(2, 500))
    if size == 1:
        labelled.put((scores[i], labels[i]))
    else:
        labelled.put((scores[i : i + size], labels[i : i + size]))
    i += size
labelled.put(None)
threads[0].join()
stop.set()
for t in threads[1:]:
    t.join()

serial = PAVCalibrator(window=CountWindow(20_000)).update(scores, labels)
grid = np.linspace(0.05, 0.95, 7)
print(f"events learned: {calibrator.n_learned:,} of {N:,}; in the window: {calibrator.window_weight:,.0f}")
print(f"predictions served meanwhile: {sum(served):,}")
print("same map as one thread learning them in order:", bool(np.array_equal(calibrator.predict_proba(grid), serial.predict_proba(grid))))
print("calibrated at", grid.round(2).tolist(), "->", calibrator.predict_proba(grid).round(3).tolist())
