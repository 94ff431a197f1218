"""The operation loop of a streaming calibrator's array face.

:class:`OperationLoop` is a base of :class:`streamcal._streaming.StreamingCalibrator`: it runs
a checked sequence of operations (learn, predict, or predict then learn: ``OP_*``) through the
quantile warm-up, if any, then through the map's kernels, growing and shrinking a time window's
ring around them.
"""

from __future__ import annotations

import numpy as np

from streamcal import _prior
from streamcal._validation import as_1d_float

__all__ = ["OP_LEARN", "OP_PREDICT", "OP_PREQUENTIAL", "OperationLoop"]

OP_LEARN = 1
OP_PREDICT = 2
OP_PREQUENTIAL = 3  # predict with the state before the label, then learn


class OperationLoop:
    """Runs operation sequences over the histogram and the map (a base of
    :class:`streamcal._streaming.StreamingCalibrator`, not used alone)."""

    def _run(self, ops, s, y, w, t, b=None, out=None) -> tuple[np.ndarray, np.ndarray]:
        """Run the operations ``ops`` (an array, or one ``OP_*`` int for every event).

        ``b``: the buckets of all the scores when already known (:meth:`_check_scores_and_buckets`
        gives them once the edges are known, so no warm-up then runs here), else None. ``out``:
        the ``(proba, llr)`` arrays to write the predictions into (their learn-only positions are
        left as they are), else new arrays, NaN at those positions.
        """
        n = s.size
        uniform = isinstance(ops, int)
        if out is None:
            out_p = np.full(n, np.nan)
            out_llr = np.full(n, np.nan)
        else:
            out_p, out_llr = out
        i = 0
        layout = None
        if not self._hist.built:  # the warm-up's end, computed before anything is buffered
            layout = self._hist.warm_layout_after(s if uniform else s[(ops & OP_LEARN) != 0])
        while i < n and not self._hist.built:  # quantile warm-up: event by event, as learn_one
            op = ops if uniform else ops[i]
            if op & OP_PREDICT:
                out_p[i] = self._warm_proba()
                out_llr[i] = 0.0
            if op & OP_LEARN:
                self._warm_add(s[i], y[i], w[i], t[i], layout)
            i += 1
        if i < n:
            if not uniform:
                ops = ops[i:]
            s, y, w, t = s[i:], y[i:], w[i:], t[i:]
            b = self._buckets_of(s) if b is None else b[i:]
            if self._hist.grows_ring:
                if uniform:
                    self._ensure_ring(s.size if ops & OP_LEARN else 0, t if ops & OP_LEARN else None)
                else:
                    learned = t[(ops & OP_LEARN) != 0]
                    self._ensure_ring(learned.size, learned)
            self._run_ops(ops, b, s, y, w, t, out_p[i:], out_llr[i:])
            if self._hist.grows_ring:
                self._shrink_ring()
        return out_p, out_llr

    def _predict_both(self, s: np.ndarray, b: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if not self._hist.built:
            return np.full(s.size, self._warm_proba()), np.zeros(s.size)
        return self._predict_arrays(b, s)

    def _buckets_of(self, s: np.ndarray) -> np.ndarray:
        """Buckets of scores already checked."""
        b, _ = self._checked_buckets(s)
        return b

    def _checked_buckets(self, s: np.ndarray) -> tuple[np.ndarray, int]:
        """``(buckets, bad)``: the scores' buckets, found through the bucket guide in the pass that
        checks them; ``bad`` is the position of the first score that is not finite or outside the
        bucket strategy's range (-1: none; then the buckets are not all written)."""
        return self._hist.layout.buckets_checked(s)

    def _check_scores_and_buckets(self, scores) -> tuple[np.ndarray, np.ndarray | None]:
        """``(scores, buckets)``, both checked; the buckets are None while the edges are unknown.

        One pass over the scores does both (:meth:`_checked_buckets`); a bad score is reported
        by ``_check_scores``, as by every other entry point. The scores are not copied: the
        caller's array is read as it is during the call (numpy's rule for any array argument).
        """
        if not self._hist.built:
            return self._check_scores(scores), None
        s = as_1d_float(scores, "scores", allow_empty=True, copy=False)  # only read from here on
        b, bad = self._checked_buckets(s)
        if bad >= 0:
            self._check_scores(scores)  # raises, naming the first bad score (a null as one)
            msg = f"`scores` must be finite and in the buckets' range; got {s[bad]!r} at position {bad}."
            raise ValueError(msg)
        return s, b

    def _ensure_ring(self, extra: int, times: np.ndarray | None = None) -> None:
        if self._hist.ensure_ring(extra, times):
            self._histogram_replaced()

    def _shrink_ring(self) -> None:
        if self._hist.shrink_ring():
            self._histogram_replaced()

    def _histogram_replaced(self) -> None:
        """Hook: the histogram's arrays were replaced by new ones (a subclass holding views of them rebinds)."""

    # quantile warm-up ---------------------------------------------------------------------
    def _warm_proba(self) -> float:
        # the finite prior of the buffered events: no edges, no map yet
        hist = self._hist
        return _prior.finite_prior(hist.warm_pos, hist.warm_tot, float(self.llr_pseudo_count))

    def _warm_add(self, s: float, y: float, w: float, t: float, layout=None) -> None:
        s, y, w, t = float(s), float(y), float(w), float(t)
        hist = self._hist
        if hist.n_warm + 1 == hist.warmup and layout is None:
            layout = self._hist.warm_layout_after(np.array([s]))
        if hist.warm_add(s, y, w, t):  # the buffer is full: build the edges, learn the buffered events
            buffered = hist.warm
            self._build(*layout)
            hist.drop_warmup_buffer()
            n = buffered.shape[1]
            b = self._buckets_of(np.ascontiguousarray(buffered[0]))
            if hist.grows_ring:
                self._ensure_ring(n)
            nan = np.full(n, np.nan)
            self._run_ops(
                np.full(n, OP_LEARN, dtype=np.int64), b, *(np.ascontiguousarray(r) for r in buffered), nan, nan.copy()
            )
