"""I-spline's refit with the score prior in one compiled call (``ISplineCalibrator``'s base)."""

from __future__ import annotations

import numpy as np

from streamcal import _prior
from streamcal._kernels import _config
from streamcal._kernels import glm_refit as _glm
from streamcal._kernels import histogram as _h
from streamcal._kernels import ispline_prior as _kip
from streamcal._kernels import ispline_prior_stream as _kips
from streamcal._streaming import OP_PREDICT

_NO_KNOTS = np.empty(0)
_NO_TOUCHED = np.zeros(0, dtype=np.int64)

_REFIT_ENTRY = []  # ``prior_refit_packed``'s compiled entry point for the types ``_prior_refit`` passes, once made


def _run_prior_refit(exact_types: bool, *args):
    """``ispline_prior_stream.prior_refit_packed(*args)`` as ``_config.run`` runs it (no events), by its
    compiled entry point once the process is compiled and ``exact_types`` holds (the arrays the
    calibrator makes itself, the same types on every call: no user's knots), which skips numba's
    type dispatch over its arguments; else by the dispatcher."""
    if not exact_types or _config.may_interpret(0):
        return _config.run(_kips.prior_refit_packed, 0, *args)
    if not _REFIT_ENTRY:
        _REFIT_ENTRY.append(_config.entry_point(_kips.prior_refit_packed, *args))
    return _REFIT_ENTRY[0](*args)


class ISplinePriorRefit:
    """``RefitCalibrator._refit`` of ``ISplineCalibrator`` for probability inputs with the score
    prior, in one compiled call (``ispline_prior_stream.prior_refit``): the same steps and
    operations as the engine's refit with I-spline's hooks (the row in real units, its totals, the
    strength from the moments kept per event, its pseudo-counts, the knot count of the window's
    weight and the warm-started fit), without the Python between them. In ``prequential``'s loop
    (``_prior_loop``) the refit is served from the augmented normal equations kept per event
    (``ispline_prior_incr``) where they serve, within rounding of that refit, and so is the refit
    of the river face and of ``refit_every``; False: always the refit itself (the engine's bits)."""

    _PRIOR_INCREMENTAL = True

    def _prior_refit(self, own_hooks: bool) -> bool:
        """The refit, where it applies; False (nothing done) where the engine refits: no prior,
        raw scores, an outside reader's histogram, another floor, a subclass's own refit hooks
        (``own_hooks`` False), an empty window or weights beyond the fit's scaling range."""
        args = self._prior_args() if own_hooks else None
        if args is None:
            return False
        _, B, _, _, _, basis, basis_knots, _, inner = args
        order = int(self.order)
        # the packed kernel's arguments: the cache's buffer holds the centres, grid, scratch, kept sums and row
        code, kappa, knots, coef, beta, total, _, t_pos, t_neg = _run_prior_refit(
            inner is None, self._hist.live_arrays()[0], self._prior_grid[4], B, self._prior_start, order,
            -1 if self.n_knots is None else int(self.n_knots), _NO_KNOTS if inner is None else inner,
            inner is not None, _NO_KNOTS if self._knots is None else self._knots, basis_knots, basis,
            _glm.FLOOR_THINNED, self._prior_incremental(), _NO_KNOTS if self._coef is None else self._coef,
            *self._prior_listed(),
        )  # fmt: skip
        if code != _kips.REFIT_DONE:
            self._prior_touched = None
            return False
        # the kept sums follow the row from here: the river face's labels list their buckets (an
        # unbounded window's learn changes its bucket alone); a list that misses a change is never
        # passed (``_prior_listed`` checks the learned count)
        sf = self._hist.live_arrays()[0]
        listed = getattr(self, "_prior_touched", None)
        if sf[_h.SF_KIND] != _h.KIND_UNBOUNDED:
            self._prior_touched = None
        elif listed is None:
            self._prior_touched = [np.empty(_kips.TOUCHED_MAX, dtype=np.int64), 0, sf, sf[_h.SF_N_LEARNED]]
        else:
            listed[1:] = 0, sf, sf[_h.SF_N_LEARNED]
        self._n_since_refit = 0
        self._dirty = False
        self._prior_strength = kappa
        self._basis_cache = (basis, knots)
        # ``_set_map_arrays``, without its log-odds of the fitted row (the data's replace them)
        self._knots = np.ascontiguousarray(knots, dtype=np.float64)
        self._coef = np.ascontiguousarray(coef, dtype=np.float64)
        self._bspline_coef = np.ascontiguousarray(beta, dtype=np.float64)
        self._fit_weight = total
        self._prior_logodds = _prior.prior_logodds(t_pos, t_neg, float(self.llr_pseudo_count))
        self._set_proba_bounds(total)
        self._fitted = True
        return True

    def _prior_loop(self, ops, b, s, y, w, t, first, out_p, out_llr, own_hooks: bool) -> int:
        """Operations ``first..`` while the score prior holds, in one compiled call
        (``ispline_prior_stream.prior_run``): the engine's refit before each prediction that follows
        labels, its prediction and LLR, each label learned; the map and bookkeeping published after.
        Returns the operation it stopped before (``first`` where it did not run, as
        ``_prior_refit``): the engine's refit for an empty window or weights beyond the fit's
        scaling range, or the loop without the prior after a refit that found its strength 0."""
        args = self._prior_args() if own_hooks else None
        if args is None:
            return first
        centres, _, grid, scratch, incr, basis, basis_knots, rows, inner = args
        c = float(self.llr_pseudo_count)
        fit = np.array([1.0 if self._dirty else 0.0, self._fit_weight, self._prior_logodds, self._proba_low,
                        self._proba_high, self._prior_strength, c, 0.0])  # fmt: skip
        logodds = np.empty(ops.size)
        hist = self._hist
        sf, si = hist.live_arrays()
        stop, _, knots, coef, beta, basis_knots = _config.run(
            _kips.prior_run, ops.size - first, ops, b, s, y, w, t, first, sf, si, centres, grid, self._prior_start,
            *scratch, int(self.order), -1 if self.n_knots is None else int(self.n_knots),
            _NO_KNOTS if inner is None else inner, inner is not None, self._knots, self._coef, self._bspline_coef,
            fit, basis_knots, basis, rows[0], rows[1], _glm.FLOOR_THINNED, out_p, out_llr, logodds,
            self._prior_incremental(), incr,
        )  # fmt: skip
        dirty, weight, logodds_now, low, high, kappa, _, pos_weight = fit.tolist()
        if coef is not self._coef:  # refitted (a new coefficient array each refit): the map and its bookkeeping
            self._basis_cache = (basis, knots)
            self._set_map_arrays(knots, coef, beta, weight, pos_weight)
            self._prior_logodds, self._proba_low, self._proba_high = logodds_now, low, high
            self._prior_strength = kappa
            self._n_since_refit = 0
        self._dirty = dirty != 0.0
        at = first + np.flatnonzero(ops[first:stop] & OP_PREDICT)
        # the engine's LLR (``_predict_llr_fitted``) of each prediction, from its fit's weight
        q = _prior.smoothed(out_p[at], out_llr[at], c)
        out_llr[at] = _prior.llr_from_proba(q, logodds[at])
        return int(stop)

    def _prior_touch(self, b: int) -> None:
        """Bucket ``b`` listed as changed since the last refit (a river face's label under the prior)."""
        listed = getattr(self, "_prior_touched", None)
        if listed is not None and listed[1] < _kips.TOUCHED_MAX:
            listed[0][listed[1]] = b
            listed[1] += 1

    def _prior_listed(self):
        """``(touched, n_touched)`` for the refit: the buckets listed since the last refit where they
        are every change of the row (the same histogram arrays, every label since listed), else
        ``n_touched`` -1 (unknown: the refit compares the whole row)."""
        listed = getattr(self, "_prior_touched", None)
        if listed is None:
            return _NO_TOUCHED, -1
        touched, n, floats, n_learned = listed
        sf = self._hist.live_arrays()[0]
        if floats is sf and sf[_h.SF_N_LEARNED] == n_learned + n:
            return touched, n
        return touched, -1

    def _prior_incremental(self) -> bool:
        """Whether the refit under the prior is served from the kept sums: not where the loop without
        the prior refits in full (``_STREAM_INCREMENTAL`` False) or the engine's loop runs
        (``_STREAM_LOOP`` False), whose refits stay the engine's to the last bit."""
        loops = getattr(self, "_STREAM_INCREMENTAL", True) and getattr(self, "_STREAM_LOOP", True)
        return bool(self._PRIOR_INCREMENTAL and loops)

    def _prior_args(self):
        """The compiled refit's arrays, or None where the engine refits (see ``_prior_refit``)."""
        hist = self._hist
        if not (
            getattr(self, "prior", None) is not None
            and self._identity
            and "histogram" not in self.__dict__
            and self._PRIOR_FLOOR == "thinned"
            and hist.built
        ):
            return None
        centres = np.ascontiguousarray(hist.layout.centres, dtype=np.float64)
        B = int(centres.size)
        grid, scratch, incr = self._prior_scratch(centres)
        order = int(self.order)
        basis, basis_knots = getattr(self, "_basis_cache", None) or (None, _NO_KNOTS)
        if basis is None or basis.shape != (B + 1, order + 3):
            basis = np.full((B + 1, order + 3), -1.0)
            basis[0, 0] = 0.0
            basis_knots = _NO_KNOTS
        rows = self._prior_grid[5]  # the fitted row's arrays (views of the cache's buffer)
        return centres, B, grid, scratch, incr, basis, basis_knots, rows, self._inner_knots

    def _prior_scratch(self, centres):
        """The grid's prior constants (``ispline_prior.prior_grid_constants``) and the strength's
        arrays (``ispline_prior_stream.prior_strength_kept``'s), kept while the histogram's layout
        keeps its centres (``centres`` a copy)."""
        key = self._hist.layout.centres
        cache = getattr(self, "_prior_grid", None)
        if cache is None or cache[0] is not key or key.size != centres.size or cache[3][1].shape[1] != self.order + 1:
            B, order = int(centres.size), int(self.order)
            # one buffer (``ispline_prior_stream.prior_views``' layout) holds the centres' copy, the grid's
            # constants, the strength's kept sums, moments and scratch, the augmented normal equations'
            # kept sums (``ispline_prior_incr``) and the fitted row: the packed refit takes it alone
            buf = np.zeros(_kips.prior_buffer_size(B, order))
            c, grid, scratch, incr, pos_w, neg_w = _config.run_interpreted(_kips.prior_views, buf, B, order)
            c[:] = centres
            _config.run(_kip.prior_grid_constants, 0, centres, B, 0.5, grid)
            cache = self._prior_grid = (key, grid, scratch, incr, buf, (pos_w, neg_w))
        return cache[1], cache[2], cache[3]
