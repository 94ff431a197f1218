"""The array face with caller-given output arrays (``out=``), for the PAV calibrators.

A caller that runs batch after batch (a service, replay) passes the same two arrays each time and
allocates nothing per batch. The arrays are checked before anything changes: a rejected call
leaves the calibrator as it was.
"""

from __future__ import annotations

import numpy as np

from streamcal._streaming import OP_PREQUENTIAL
from streamcal._validation import keywords_named

__all__ = ["OutArrays"]


def _checked_out(out, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``out`` as a pair of float64 arrays to write ``n`` outputs into, or ValueError naming it."""
    if not (isinstance(out, tuple | list) and len(out) == 2):
        msg = f"`out` must be a pair of arrays (proba, llr); got {type(out).__name__}."
        raise ValueError(msg)
    for k, a in enumerate(out):
        if not (
            isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == 1 and a.size == n
            and a.flags.c_contiguous and a.flags.writeable
        ):
            got = f"{a.dtype} array of shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
            msg = f"`out[{k}]` must be a writeable, contiguous 1-d float64 array of length {n}; got {got}."
            raise ValueError(msg)
    if np.shares_memory(out[0], out[1]):
        msg = "`out[0]` and `out[1]` must not share memory."
        raise ValueError(msg)
    return out[0], out[1]


@keywords_named
class OutArrays:
    """``prequential(..., out=)`` and ``predict_both(..., out=)`` (a base of
    :class:`streamcal.PAVCalibrator`, not used alone)."""

    def prequential(self, scores, labels, *, weights=None, times=None, out=None) -> tuple[np.ndarray, np.ndarray]:
        """Predict each event with the state before its label, then learn it: ``(proba, llr)``.

        Equal, element for element, to a loop of ``predict_proba_one`` / ``predict_llr_one``
        then ``learn_one``. ``out``: a pair of float64 arrays, one-dimensional, contiguous,
        writeable and as long as ``scores``, that receive the outputs (and are returned): a
        caller running batch after batch allocates nothing per batch.
        """
        if out is None:
            return super().prequential(scores, labels, weights=weights, times=times)
        with self._lock:
            s, b = self._check_scores_and_buckets(scores)
            y, w, t = self._check_learn_arrays(s.size, labels, weights, times, None)
            out = _checked_out(out, s.size)
            return self._run(OP_PREQUENTIAL, s, y, w, t, b, out)

    def predict_both(self, scores, *, out=None) -> tuple[np.ndarray, np.ndarray]:
        """Calibrated probability and (finite) LLR of each score with the current state, in one
        pass: ``(proba, llr)``, as :meth:`streamcal.PAVCalibrator.predict_proba` and
        :meth:`streamcal.PAVCalibrator.predict_llr` give them.
        ``out``: a pair of arrays to write them into, as for :meth:`prequential`."""
        with self._lock:
            s, b = self._check_scores_and_buckets(scores)
            if out is None:
                return self._predict_both(s, b)
            out = _checked_out(out, s.size)
            if not self._hist.built:
                out[0][:] = self._warm_proba()
                out[1][:] = 0.0
                return out
            return self._predict_arrays(b, s, out)
