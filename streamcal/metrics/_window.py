"""The default metrics of one window of unit-weight events, computed together.

:func:`window_metrics` gives the values that :func:`~streamcal.metrics.brier_score`,
:func:`~streamcal.metrics.log_loss`, :func:`~streamcal.metrics.cllr`,
:func:`~streamcal.metrics.min_cllr`, :func:`~streamcal.metrics.ece` and
:func:`~streamcal.metrics.calibration_loss` give on the same arrays, bit for bit, for a caller
that asks for several of them per window (the replay): the inputs are checked once, in the
compiled pass that also writes the squared errors, the clipped probabilities and the bins' sums
(:func:`streamcal._kernels.metrics.window_terms`), and each metric then takes its sums the way
its own function takes them (numpy's sums, in event order).
"""

from __future__ import annotations

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import metrics as _k
from streamcal.metrics._array import _min_cllr_unit

__all__ = ["WINDOW_METRICS", "WindowWork", "window_metrics"]

#: the metrics :func:`window_metrics` computes
WINDOW_METRICS = frozenset({"brier", "log_loss", "cllr", "min_cllr", "ece", "calibration_loss"})

_N_BINS = 10  # ``ece`` and ``calibration_loss`` at their defaults: ten equal-width bins
# the bins' lower edges but the first, as ``uniform_bin_ids`` compares the probabilities with them
_INNER_EDGES = np.ascontiguousarray((np.arange(_N_BINS + 1) / _N_BINS)[1:-1])


class WindowWork:
    """Work arrays lent to the computations of one window after another: new arrays of a
    window's size would cost page faults in every window. For one thread at a time.

    Examples
    --------
    >>> work = WindowWork()
    >>> a = work.array("costs", 1_000)
    >>> b = work.array("costs", 500)  # the same memory, as long as it is large enough
    >>> b.size, bool(a.base is b.base)
    (500, True)
    """

    def __init__(self):
        self._arrays: dict[str, np.ndarray] = {}

    def array(self, name: str, n: int, dtype=np.float64) -> np.ndarray:
        """The array ``name`` of ``n`` elements (its contents are left over from before)."""
        held = self._arrays.get(name)
        if held is None or held.size < n or held.dtype != dtype:
            held = self._arrays[name] = np.empty(n, dtype=dtype)
        return held[:n]


def _plain(a) -> bool:
    return type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == 1 and a.flags.c_contiguous


def window_metrics(y, p, llr, wanted, *, eps: float, work: WindowWork | None = None) -> dict[str, float] | None:
    """The metrics named in ``wanted`` (of :data:`WINDOW_METRICS`) on one window, or None.

    ``y``: labels, ``p``: probabilities, ``llr``: LLRs, unit weights; ``log_loss`` clips with
    ``eps``, ``ece`` and ``calibration_loss`` take ten equal-width bins, ``min_cllr`` is taken
    over ``llr``. ``cllr`` and ``min_cllr`` need both classes: pass them only for a window
    that holds both.

    None when the compiled kernels are not loaded (a short run computes each metric on its own,
    without loading them), or when the arrays are not contiguous float64 arrays of one length
    holding labels 0.0 / 1.0, probabilities in [0, 1] and LLRs that are not NaN: then each
    metric's own function gives its value or its error. ``work`` lends the work arrays.
    """
    n = y.size if _plain(y) else 0
    if not (n and _plain(p) and _plain(llr) and p.size == n and llr.size == n and _config.is_compiled()):
        return None
    work = WindowWork() if work is None else work
    squared, clipped, terms = work.array("squared", n), work.array("clipped", n), work.array("terms", n)
    ids = work.array("bins", n, np.intp)
    sum_y, sum_p, count = np.empty(_N_BINS), np.empty(_N_BINS), np.empty(_N_BINS)
    bad = _k.window_terms(y, p, llr, _INNER_EDGES, eps, 1.0 - eps, squared, clipped, ids, sum_y, sum_p, count)
    if bad >= 0:
        return None
    size = float(n)
    out = {}
    for name in wanted:
        if name == "brier":
            out[name] = float(np.sum(squared) / size)
        elif name == "log_loss":
            out[name] = float(np.sum(_log_losses(y, clipped, terms, work.array("log1p", n))) / size)
        elif name == "cllr":
            k = _k.cllr_costs_in_event_order(y, llr, terms)
            out[name] = 0.5 * (float(np.sum(terms[:k])) / float(k) + float(np.sum(terms[k:])) / float(n - k))
        elif name == "min_cllr":
            out[name] = _min_cllr_unit(y, llr, work)
        elif name == "ece":
            out[name] = float(np.sum(np.abs(sum_y - sum_p)) / size)
        elif name == "calibration_loss":
            with np.errstate(invalid="ignore", divide="ignore"):
                fraction = np.where(count > 0.0, sum_y / count, 0.0)
            _k.binned_squared_terms(p, ids, fraction, terms)
            out[name] = float(np.sum(terms) / size)
    return out


def _log_losses(y, clipped, out, other):
    """``streamcal.metrics._array._log_losses(y, clipped)`` in ``out`` (``other``: a work
    array): ``-log(p)`` of the positives, ``-log1p(-p)`` of the negatives."""
    with np.errstate(divide="ignore"):
        np.log(clipped, out=out)
        np.negative(out, out=out)
        np.negative(clipped, out=other)
        np.log1p(other, out=other)
    np.negative(other, out=other)
    np.copyto(out, other, where=y != 1.0)
    return out
