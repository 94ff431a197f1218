"""Anytime-valid calibration monitors: alarms whose false-alarm rate holds however long the stream.

Each monitor is a sequential test of calibration built on a nonnegative wealth process that is a
martingale while the stream is calibrated, so that, by Ville's inequality,

    P(the monitor ever alarms | calibrated) <= alpha,

however long it runs and however often it is read. Memory is bounded: the recalibration's
histogram, or a fixed grid, never the stream.

- :class:`IsotonicEProcess`: the whole calibration map, betting on a predictable online isotonic
  recalibration of the past (power against any monotone miscalibration).
- :class:`MeanBiasCS`: calibration in the large, a betting confidence sequence for the mean of
  ``y - p`` with the predicted / observed ratio and its anytime-valid interval.
- :class:`KeyedMonitor`: one monitor per key, the false-alarm budget spent across keys.

Faces: river-metric ``update(y_true, y_pred)`` / ``get()``, array ``update_many(labels, proba)``.
"""

from __future__ import annotations

from streamcal.monitor.isotonic import IsotonicEProcess
from streamcal.monitor.keyed import KeyedMonitor
from streamcal.monitor.mean_bias import MeanBiasCS, default_grid

__all__ = ["IsotonicEProcess", "KeyedMonitor", "MeanBiasCS", "default_grid"]
