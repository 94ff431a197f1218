"""Streaming parametric calibrators fitted on the bucket histogram: GEV-canonical and Platt."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import gev as _k
from streamcal._kernels import glm_refit as _g
from streamcal._kernels import histogram as _h
from streamcal._kernels._config import entry_point
from streamcal._refit import RefitCalibrator
from streamcal._validation import check_scalar
from streamcal.buckets import Buckets, LogitGrid
from streamcal.gev import _logistic
from streamcal.gev._river import ENTRIES, NO_SCORE, GLMRiverFace, entry_call
from streamcal.gev.histfit import refit_nonnegative
from streamcal.windows import Window

__all__ = ["CALIBRATOR_XI_GRID", "GEVCalibrator", "PlattCalibrator"]

CALIBRATOR_XI_GRID = (-0.5, -0.25, 0.0, 0.25, 0.5, 1.0)
_LOGIT_CLIP = 1e-12  # probability scores are clipped into [1e-12, 1 - 1e-12] before the logit
# the warm-started refit stops where its map is within this of the exact optimum's (Platt: a
# certified bound on every probability; GEV: the last Newton step's move of the linear predictor)
_REFIT_PROBA_TOL = 1e-10
_REFIT_STEP_TOL = 1e-7  # GEV: the last Newton step's largest move of v; the error left is its square
_REFIT_MAX_PASSES = 50
_LINK_CODES = {"gev": 0, "logit": 1}
#: GEV's predicted starts: the values per shape before the lazy shapes (15) and before the
#: third derivatives' change (25, before the served shape's certified refit without a pass) and
#: before the prior pattern's sums (43)
_OLDER_STEP_BLOCKS = (15, 25, 43)
_FLOOR_CODES = {
    "thinned": _g.FLOOR_THINNED,
    "span": _g.FLOOR_SPAN,
    "traffic": _g.FLOOR_TRAFFIC,
    "spread": _g.FLOOR_SPREAD,
}


@functools.cache
def _map_score():
    """The fitted map at one score, without numba's type dispatch (compiled or loaded on first use)."""
    return entry_point(_k.glm_map_score, 0.5, True, 0.5, 0.5, 0.5, True, 0.5)


def _with_floor_moments(state: dict) -> dict:
    """``state`` with its Taylor moments in the current layout: a state saved before the score
    prior's floor moments (the data's moments alone) or before the prior's ``D`` block gets them
    stale, and the next refit that needs them builds them."""
    moments = state.get("_glm_moments")
    if isinstance(moments, np.ndarray) and moments.shape in ((_g.MOM_DATA_SIZE,), (_g.MOM_SIZE_BEFORE_D,)):
        return {**state, "_glm_moments": np.concatenate((moments, np.zeros(_g.MOM_SIZE - moments.shape[0])))}
    return state


def _moments_stale(moments: np.ndarray) -> None:
    """Mark the Taylor moments stale, the map's and the score prior's ``D`` block: the next refit
    that needs them builds them."""
    moments[_g.MOM_VALID] = 0.0
    moments[_g.MOM_D + _g.MOM_VALID] = 0.0


def _check_moments(c, moments) -> None:
    """The loaded Taylor moments' checks: the layout, each part's valid flag, finite values where
    a part is valid (``c``: ``streamcal._state_check``)."""
    c.need_array(moments, "_glm_moments", np.float64, size=_g.MOM_SIZE)
    for at, end in ((_g.MOM_VALID, _g.MOM_SIZE), (_g.MOM_D + _g.MOM_VALID, _g.MOM_SIZE)):
        if moments[at] not in (0.0, 1.0):
            c.fail(f"`_glm_moments`: expected 0.0 or 1.0 at index {at}; found {c.brief(moments[at])}.")
        if moments[at] == 1.0:
            c.need_finite(moments[at:end], "_glm_moments")


@functools.cache
def _taylor_table() -> np.ndarray:
    return _g.logistic_taylor_table()


def _end_runs(pos: np.ndarray, neg: np.ndarray, c: float) -> tuple[float, float]:
    """The rates of the histogram's end runs by the kernels' own arithmetic
    (``glm_refit.end_run_bounds``)."""
    fit = np.zeros(_g.FIT_SIZE)
    _g.end_run_bounds(np.ascontiguousarray(pos, dtype=np.float64), np.ascontiguousarray(neg, dtype=np.float64), c, fit)
    return float(fit[_g.FIT_RUN_LOW]), float(fit[_g.FIT_RUN_HIGH])


def _past_support(p, xi: float, low: float, high: float):
    """The map's probabilities ``p`` of shape ``xi`` no surer than the end run's rate past its
    support's end (above for ``xi < 0``, below for ``xi > 0``), as ``glm_refit.glm_served_one``."""
    if xi < 0.0:
        return np.minimum(p, high)
    return np.maximum(p, low) if xi > 0.0 else p


def _check_end_runs(c, low: float, high: float) -> None:
    """A restored state's end-run rates: within [0, 1], the low one not above the high one."""
    low = c.need_float(low, "_run_low", low=0.0, high=1.0)
    high = c.need_float(high, "_run_high", low=0.0, high=1.0)
    if not low <= high:
        c.fail(f"`_run_low`/`_run_high`: expected low <= high; found {low!r} and {high!r}.")



def _river_consts(buf: np.ndarray, identity: bool, c: float, prior_on: bool, l2: float, x_lo: float, x_hi: float):
    """The river constants of the packed buffer (``glm_refit.glm_river_proba``'s ``k``)."""
    consts = buf[_g.BUF_CONSTS : _g.BUF_ANCHOR]
    consts[:] = (float(identity), _LOGIT_CLIP, c, float(prior_on), l2, x_lo, x_hi, _REFIT_PROBA_TOL)


def _packed_arrays(S: int, B: int, n_cuts: int, steps: np.ndarray, member: bool, gev: bool) -> SimpleNamespace:
    """The compiled refit's arrays as sections of two buffers (``glm_refit.PK_*``): ``fbuf``
    (float64: the packed buffer ``buf``, the refit's scratch and GEV's predicted starts, the logistic
    member's arrays where ``member``) and ``ibuf`` (int64: its head, then the shapes' flags), zero
    but for the starts, ``steps``' values where it is sized for ``S`` shapes (a new GEV calibrator's,
    or a state's in an older layout, is empty). GEV's river face hands over the two buffers alone
    (``glm_refit.gev_river_packed``): where ``gev``, ``fbuf`` also holds the constants that call
    reads (the cuts, grid, features, centres, shapes, Taylor table and the scalar arguments),
    written by :func:`_pack_constants`."""
    table_size = _taylor_table().size if gev else 0
    n_steps = _g.steps_size(S) if gev else 0
    m = 1 if member else 0
    f_sizes = [0] * (_g.PK_N_F)
    f_sizes[_g.PK_BUF] = _g.buf_size(S)
    f_sizes[_g.PK_POS] = f_sizes[_g.PK_NEG] = B
    f_sizes[_g.PK_PC] = 5 * B
    f_sizes[_g.PK_STEPS] = n_steps
    if gev:
        f_sizes[_g.PK_CUTS], f_sizes[_g.PK_GRID] = n_cuts, 3
        f_sizes[_g.PK_X] = f_sizes[_g.PK_CENTRES] = B
        f_sizes[_g.PK_XIS], f_sizes[_g.PK_TABLE], f_sizes[_g.PK_SCALARS] = S, table_size, _g.PS_SIZE
    f_sizes[_g.PK_M_XIS], f_sizes[_g.PK_M_BETAS], f_sizes[_g.PK_M_BRIERS] = m, 2 * m, m
    f_sizes[_g.PK_M_FIT], f_sizes[_g.PK_G_MOM] = _g.FIT_SIZE * m, _g.MOM_SIZE * m
    i_sizes = (S, S, m, m)  # has_warm, ok and the member's
    f_at = np.concatenate(([0], np.cumsum(f_sizes)))
    i_at = _g.PK_HEAD + np.concatenate(([0], np.cumsum(i_sizes)))
    fbuf = np.zeros(int(f_at[-1]))
    ibuf = np.zeros(int(i_at[-1]), dtype=np.int64)
    ibuf[: _g.PK_N_F + 1] = f_at
    ibuf[_g.PK_HAS_WARM : _g.PK_M_OK + 2] = i_at
    f = [fbuf[f_at[k] : f_at[k + 1]] for k in range(_g.PK_N_F)]
    i = [ibuf[i_at[k] : i_at[k + 1]] for k in range(len(i_sizes))]
    if steps.size == n_steps:
        f[_g.PK_STEPS][:] = steps
    return SimpleNamespace(fbuf=fbuf, ibuf=ibuf, f=f, i=i, pc=f[_g.PK_PC].reshape(5, B))


def _pack_constants(a: SimpleNamespace, grid: np.ndarray, clip: float, member_tol: float) -> None:
    """GEV's river call's constants into the packed buffers of cache ``a`` (:func:`_packed_arrays`):
    the values the unpacked call took as arguments (``glm_refit.glm_river_gev_proba``)."""
    f, ibuf = a.packed.f, a.packed.ibuf
    x, x_lo, x_hi, centres, identity, c, prior_on, floor, code, l2, tol, passes = a.args
    f[_g.PK_CUTS][:] = a.layout_cuts
    f[_g.PK_GRID][:] = grid
    f[_g.PK_X][:] = x
    f[_g.PK_CENTRES][:] = centres
    f[_g.PK_XIS][:] = a.xis
    f[_g.PK_TABLE][:] = a.table.ravel()
    f[_g.PK_SCALARS][:] = (x_lo, x_hi, float(identity), clip, c, float(prior_on), l2, tol, member_tol)
    ibuf[_g.PK_FLOOR : _g.PK_HEAD] = (floor, code, passes, floor, _logistic.LOGIT_CODE, x.size, a.table.shape[0])


class _HistogramGLMCalibrator(GLMRiverFace, RefitCalibrator):
    """A two-parameter link model ``P(y=1 | s) = F(slope * x(s) + intercept)``, ``slope >= 0``, from the histogram.

    ``x(s)`` is ``logit(s)`` for probability inputs (bucket strategies with ``probability_inputs``,
    such as the default logit grid) and ``s`` otherwise. Subclasses give the link.
    """

    _link = "logit"
    # the score prior's floor stays near the data (``streamcal._prior.score_prior``): a floor far
    # from it would pull a two-parameter link towards the prior there
    _PRIOR_FLOOR = "span"
    # ``_glm_cache``: the compiled refit's arrays (``_glm_arrays``); ``_beta``'s values are views
    # of its rows while it exists
    _CACHES = (*RefitCalibrator._CACHES, "_feature_cache", "_glm_cache")

    def _check_glm_params(self) -> None:
        check_scalar(self.l2, "l2", low=0.0)

    def _feature(self, scores: np.ndarray) -> np.ndarray:
        if self._identity:
            q = np.minimum(np.maximum(scores, _LOGIT_CLIP), 1.0 - _LOGIT_CLIP)  # np.clip, without its wrapper
            return np.log(q) - np.log1p(-q)
        return scores

    def _init_map_state(self) -> None:
        super()._init_map_state()
        self._beta = {}  # xi -> last [slope, intercept], the warm start of the next refit
        self._xi_served = None
        self._feature_cache = None
        self._glm_cache = None
        # Platt's Taylor moments of the histogram about an anchor fit (state: a calibrator
        # restored from them refits as the original; ``streamcal._kernels.glm_refit``)
        self._glm_moments = np.zeros(_g.MOM_SIZE)
        self._glm_moments_order = _g.MOM_K  # the Taylor order the moments are laid out for
        # GEV's predicted start of each shape's Newton iteration (state, as the moments are:
        # a restored calibrator refits as the original); sized at the first compiled refit
        self._glm_steps = np.zeros(0)
        self._glm_steps_block = _g.STEP_BLOCK  # the values per shape it is laid out for
        # the score prior's last fit of its recalibration, the warm start of the next (state, as
        # the moments are; ``glm_refit.ANCHOR_PRIOR``)
        self._glm_prior_start = np.zeros(_g.PRIOR_SIZE)
        self._glm_prior_start_size = _g.PRIOR_SIZE  # the layout it is saved in
        # GEV: the rates of the fitted histogram's end runs, which bound the map past its support's
        # end (``glm_refit.end_run_bounds``, set by every refit); 0 and 1 for Platt
        self._run_low, self._run_high = 0.0, 1.0

    def __setstate__(self, state):
        # a state saved before the Taylor moments existed (neither the moments nor their order)
        # loads without them: they are built at the next refit. A state holding one of them must
        # hold both.
        if "_beta" in state and "_glm_moments" not in state and "_glm_moments_order" not in state:
            state = {**state, "_glm_moments": np.zeros(_g.MOM_SIZE), "_glm_moments_order": _g.MOM_K}
        state = _with_floor_moments(state)
        # likewise a state saved before GEV's predicted starts (neither the array nor its layout)
        if "_beta" in state and "_glm_steps" not in state and "_glm_steps_block" not in state:
            state = {**state, "_glm_steps": np.zeros(0), "_glm_steps_block": _g.STEP_BLOCK}
        # or in an older layout (15 or 25 values per shape): rebuilt the same way
        if state.get("_glm_steps_block") in _OLDER_STEP_BLOCKS and "_glm_steps" in state:
            state = {**state, "_glm_steps": np.zeros(0), "_glm_steps_block": _g.STEP_BLOCK}
        # and before the prior's warm start (neither it nor its size): its first refit runs the
        # prior kernel from its cold start
        if "_beta" in state and "_glm_prior_start" not in state and "_glm_prior_start_size" not in state:
            state = {**state, "_glm_prior_start": np.zeros(_g.PRIOR_SIZE), "_glm_prior_start_size": _g.PRIOR_SIZE}
        if "_beta" in state and "_run_low" not in state and "_run_high" not in state:  # and before the end runs
            state = {**state, "_run_low": 0.0, "_run_high": 1.0}  # served as saved until the next refit
        super().__setstate__(state)

    def _candidate_xis(self) -> tuple[float, ...]:
        return (0.0,)

    def _features_of(self, centres: np.ndarray) -> tuple[np.ndarray, float, float]:
        """``x(centre)`` per bucket and the feature range ``[x_lo, x_hi]`` the map serves (cached:
        the centres are fixed once the bucket edges are known; the cache is dropped with the map
        state, and the ends and size are compared as a guard)."""
        cache = getattr(self, "_feature_cache", None)  # dropped by a reset, absent after loading
        if cache is None or not (
            cache[0].size == centres.size and cache[0][0] == centres[0] and cache[0][-1] == centres[-1]
        ):
            x = np.ascontiguousarray(self._feature(centres), dtype=np.float64)
            x_lo, x_hi = float(x.min()), float(x.max())
            if self._identity:  # every probability score: the clipped logit's whole range
                edge = float(self._feature(np.array([0.0]))[0])
                x_lo, x_hi = min(x_lo, edge), max(x_hi, -edge)
            cache = (centres.copy(), x, x_lo, x_hi)
            self._feature_cache = cache
        return cache[1], cache[2], cache[3]

    # the compiled exact default ----------------------------------------------------------------
    def _glm_arrays(self) -> SimpleNamespace:
        """The arrays of the compiled refit (``streamcal._kernels.glm_refit``), built from the
        map's state at first use (and after a copy or a load, which drop them): ``_beta``'s
        values become views of ``betas``' rows, so the kernels refit them in place."""
        cache = getattr(self, "_glm_cache", None)
        if cache is not None:
            return cache
        shapes = self._candidate_xis()
        S = len(shapes)
        centres = np.ascontiguousarray(self._hist.layout.centres, dtype=np.float64)
        B = centres.size
        x, x_lo, x_hi = self._features_of(centres)
        # the per-call arrays are views of one packed buffer (``glm_refit.BUF_*``), the
        # moments included: the river face's call passes the buffer alone; that buffer and the
        # refit's other arrays are sections of two buffers (GEV's river call passes those alone)
        hist = self._hist
        member = getattr(self, "_has_member", bool)()
        packed = _packed_arrays(S, B, hist.layout.cuts.size, self._glm_steps, member, self._link == "gev")
        buf = packed.f[_g.PK_BUF]
        self._glm_steps = packed.f[_g.PK_STEPS]  # the predicted starts kept (sized for the shapes)
        prior_on = getattr(self, "prior", None) is not None
        _river_consts(buf, bool(self._identity), float(self.llr_pseudo_count), prior_on, float(self.l2), x_lo, x_hi)
        moments = buf[_g.BUF_MOM : _g.BUF_PW]
        moments[:] = self._glm_moments
        self._glm_moments = moments
        prior_start = buf[_g.BUF_ANCHOR + _g.ANCHOR_PRIOR : _g.BUF_ANCHOR + _g.ANCHOR_PRIOR + _g.PRIOR_SIZE]
        prior_start[:] = self._glm_prior_start
        self._glm_prior_start = prior_start
        betas = buf[_g.BUF_BETAS : _g.BUF_BETAS + 2 * S].reshape(S, 2)
        has_warm = packed.i[0]
        for k, xi in enumerate(shapes):
            if xi in self._beta:
                betas[k] = self._beta[xi]
                has_warm[k] = 1
        pc = packed.pc
        if self._identity:
            _config.run(_g.prior_cache_fill, B, centres, pc)
        code = _LINK_CODES[self._link]
        cache = SimpleNamespace(
            packed=packed,
            shapes=shapes,
            index={xi: k for k, xi in enumerate(shapes)},
            xis=np.array(shapes, dtype=np.float64),
            buf=buf,
            betas=betas,
            has_warm=has_warm,
            briers=buf[_g.BUF_BETAS + 2 * S : _g.BUF_BETAS + 3 * S],
            ok=packed.i[1],
            pos_w=packed.f[_g.PK_POS],
            neg_w=packed.f[_g.PK_NEG],
            pc=pc,
            anchor=buf[_g.BUF_ANCHOR : _g.BUF_MOM],
            fit=buf[_g.BUF_FIT : _g.BUF_BETAS],
            # the river face: Platt's one call (one logistic shape), once it has a fit
            river=code == 1 and S == 1,
            gev_river=code == 0,  # GEV's one call per pair: the kept event, the refit, the map
            river_ready=False,  # ``river`` or ``gev_river`` with a previous fit and the scalars in sync
            river_learn=not (hist.uses_times or hist.grows_ring),  # no event times, no ring growth
            cuts=hist.layout.cuts_list,  # the river face's bucket search (the layout is fixed by now)
            layout_cuts=hist.layout.cuts,
            table=_taylor_table(),
            pw=buf[_g.BUF_PW : _g.BUF_FIT],
            # the refit's fixed arguments after the histogram's arrays
            args=(
                x,
                x_lo,
                x_hi,
                centres,
                bool(self._identity),
                float(self.llr_pseudo_count),
                getattr(self, "prior", None) is not None,
                _FLOOR_CODES[self._PRIOR_FLOOR],
                code,
                float(self.l2),
                _REFIT_PROBA_TOL if code == 1 else _REFIT_STEP_TOL,
                _REFIT_MAX_PASSES,
            ),
        )
        self._beta = {xi: betas[k] for k, xi in enumerate(shapes) if has_warm[k]}
        # the learn kernel's arguments after the event (the moments are replaced only with the
        # map state, which drops this cache)
        cache.learn_tail = (x, cache.table, moments, cache.pc, cache.anchor, self._glm_steps)
        # Platt's river face: the one-call kernel's arguments after the kept event, and the
        # deferred work (``streamcal.gev._river``): none yet
        grid = np.array(_h.grid_of_sorted(hist.layout.cuts))  # its call's bucket search (an arithmetic guess)
        cache.river_tail = (x, cache.table, hist.layout.cuts, grid, _FLOOR_CODES[self._PRIOR_FLOOR])
        # GEV's river face: the one-call kernel's arguments after the kept event
        if self._link == "gev":
            _pack_constants(cache, grid, _LOGIT_CLIP, _REFIT_PROBA_TOL)
        cache.gev_tail = (packed.fbuf, packed.ibuf)
        cache.gev_entry = "river_gev"  # its kernel: ``_river.GEV_ENTRIES``
        cache.live = False
        cache.pending = cache.no_event = NO_SCORE  # both keep the event's score: their calls find its bucket
        cache.live_tail = ()  # GEV's call's arguments after the event, while live (``_river_go_live``)
        self._glm_cache = cache
        return cache

    def _glm_state_in(self, a: SimpleNamespace) -> None:
        """The map's scalars into the kernels' ``fit`` array."""
        fit = a.fit
        fit[_g.FIT_FITTED] = 1.0 if self._fitted else 0.0
        fit[_g.FIT_DIRTY] = 1.0 if self._dirty else 0.0
        fit[_g.FIT_KAPPA] = self._prior_strength
        fit[_g.FIT_LOGODDS] = self._prior_logodds
        fit[_g.FIT_LOW] = self._proba_low
        fit[_g.FIT_HIGH] = self._proba_high
        fit[_g.FIT_RUN_LOW : _g.FIT_RUN_HIGH + 1] = self._run_low, self._run_high
        fit[_g.FIT_SERVED] = 0.0 if self._xi_served is None else float(a.index[self._xi_served])

    def _glm_state_out(self, a: SimpleNamespace) -> None:
        """The kernels' ``fit`` array back into the map's scalars."""
        fit = a.fit.tolist()
        self._fitted = fit[_g.FIT_FITTED] != 0.0
        self._dirty = fit[_g.FIT_DIRTY] != 0.0
        self._prior_strength = fit[_g.FIT_KAPPA]
        if self._fitted:
            self._prior_logodds = fit[_g.FIT_LOGODDS]
            self._proba_low = fit[_g.FIT_LOW]
            self._proba_high = fit[_g.FIT_HIGH]
            self._run_low, self._run_high = fit[_g.FIT_RUN_LOW], fit[_g.FIT_RUN_HIGH]
            self._xi_served = a.shapes[int(fit[_g.FIT_SERVED])]
        if len(self._beta) < len(a.shapes):
            self._beta = {xi: a.betas[k] for k, xi in enumerate(a.shapes) if a.has_warm[k]}
        a.river_ready = bool(a.has_warm[0]) if a.river else a.gev_river and self._fitted and bool(a.has_warm.all())

    def _river_proba(self, s: float) -> float:
        """Platt's river face in one compiled call, under the lock: the refit from the Taylor
        moments if labels came, then the served probability of the checked score ``s``
        (``streamcal._kernels.glm_refit.glm_river_proba``); -1.0 where that takes more (then
        the generic ``_proba_of`` runs the full refit, which takes the same steps first)."""
        a = self.__dict__.get("_glm_cache")
        if a is None or not (a.river and a.river_ready and self.refit_every is None):
            return -1.0
        dirty = self._dirty
        sf, si = self._hist.live_arrays()
        args = (sf, si, a.pc, a.buf, s, 1.0 if dirty else 0.0, *a.river_tail[:2], a.river_tail[4])
        river = ENTRIES.get("river")
        p = entry_call("river", _g.glm_river_proba, args) if river is None else river(*args)
        if p >= 0.0 and dirty:
            self._river_scalars_out(a)
        return p

    def _river_scalars_out(self, a: SimpleNamespace) -> None:
        """The map's scalars that a refit from the moments (``_river_proba``) changes, from the
        compiled fit's array."""
        fit = a.fit.tolist()
        self._dirty = fit[_g.FIT_DIRTY] != 0.0
        if a.gev_river:  # GEV's one call may refit from the histogram and change the served shape
            self._fitted = fit[_g.FIT_FITTED] != 0.0
            self._xi_served = a.shapes[int(fit[_g.FIT_SERVED])] if self._fitted else None
        self._prior_strength = fit[_g.FIT_KAPPA]
        self._prior_logodds = fit[_g.FIT_LOGODDS]
        self._proba_low = fit[_g.FIT_LOW]
        self._proba_high = fit[_g.FIT_HIGH]
        self._run_low, self._run_high = fit[_g.FIT_RUN_LOW], fit[_g.FIT_RUN_HIGH]

    def _proba_of(self, s: float) -> float:
        p = self._river_proba(s)
        return p if p >= 0.0 else super()._proba_of(s)

    def _generic_proba_of(self, s: float) -> float:
        """The served probability by the generic engine's path (the full refit)."""
        return super()._proba_of(s)

    def _glm_complete_refit(self, a: SimpleNamespace) -> None:
        """Complete a compiled refit that left shapes to the damped full refit (``a.ok`` 0)."""
        x, x_lo, x_hi = a.args[0], a.args[1], a.args[2]
        code = _LINK_CODES[self._link]
        for k, xi in enumerate(a.shapes):
            if a.ok[k]:
                continue
            beta, brier = self._refit_one(x, a.pos_w, a.neg_w, code, xi, x_lo, x_hi)
            a.betas[k] = beta
            a.briers[k] = brier
            a.has_warm[k] = 1
            self._beta[xi] = a.betas[k]
        _config.run(_g.glm_finish_refit, 0, a.briers, a.fit, float(self.llr_pseudo_count))

    def _engine_only(self) -> bool:
        """Whether an outside reader supplies the histogram the map is fitted to (an instance
        ``histogram``: a keyed calibrator's window plus its prior's pseudo-counts). The generic
        engine then refits from it, and the Taylor moments (of the window alone) stop serving."""
        if "histogram" not in self.__dict__:
            return False
        self._glm_untracked()
        return True

    def _glm_untracked(self) -> None:
        """The moments, the prior's predicted start and GEV's blocks stop following the events."""
        _moments_stale(self._glm_moments)
        self._glm_prior_start[_g.PRIOR_STEP_VALID] = 0.0
        if self._glm_steps.size:
            self._glm_steps[_g.STEP_VALID] = 0.0

    def _refit(self) -> None:
        """Refit the map from the histogram in compiled code (``streamcal._kernels.glm_refit``):
        the score prior, Newton's method from the previous fit per shape, the damped full refit
        for a shape where that fails, the served shape and bounds."""
        if self._engine_only():
            super()._refit()
            return
        self._n_since_refit = 0
        a = self._glm_arrays()
        self._glm_state_in(a)
        if getattr(self, "refit_every", None) is not None:
            # the array face learns between refits without the moments (and the predicted
            # starts of GEV and of the prior): both faces refit by passes from the previous fits
            self._glm_untracked()
        sf, si = self._hist.live_arrays()
        args = (sf, si, *a.args, *self._glm_shape_arrays(a))
        status = entry_call("refit", _g.glm_refit_inplace, args)
        if status != 0:
            self._glm_complete_refit(a)
        if getattr(self, "refit_every", None) is not None:
            # nor does the refit leave them to track: one state for both faces
            self._glm_untracked()
        self._glm_state_out(a)

    def _glm_shape_arrays(self, a: SimpleNamespace) -> tuple:
        per_shape = (a.xis, a.betas, a.has_warm, a.briers, a.ok)
        return (*per_shape, a.pos_w, a.neg_w, a.pc, a.anchor, a.fit, a.table, self._glm_moments, a.pw, self._glm_steps)

    def _learn_bucket(self, b: int, s: float, y: float, w: float, t: float) -> None:
        # the histogram and, while current, the Taylor moments (the array face's own learn step)
        if self._engine_only():
            super()._learn_bucket(b, s, y, w, t)
            return
        a = self.__dict__.get("_glm_cache") or self._glm_arrays()
        sf, si = self._hist.live_arrays()
        args = (sf, si, b, y, w, t, *a.learn_tail)
        learn = ENTRIES.get("learn")
        if learn is None:
            entry_call("learn", _g.glm_learn_one_inplace, args)
        else:
            learn(*args)
        self._after_learn(1)

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        """The lazy default (``refit_every=None``) event by event in one compiled loop
        (``streamcal._kernels.glm_refit.glm_run_ops_inplace``), which returns here only for a
        refit that needs the damped full refit; ``refit_every`` runs the engine's segments."""
        if getattr(self, "refit_every", None) is not None or self._engine_only():
            super()._run_ops(ops, b, s, y, w, t, out_p, out_llr)
            return
        if isinstance(ops, int):
            ops = np.full(b.size, ops, dtype=np.int64)
        a = self._glm_arrays()
        self._glm_state_in(a)
        sf, si = self._hist.live_arrays()
        b = np.ascontiguousarray(b, dtype=np.intp)
        extra = (sf, si, *a.args[:4], a.args[4], _LOGIT_CLIP, *a.args[5:], *self._glm_shape_arrays(a))
        n = ops.size
        i = 0
        while i < n:
            i = _config.run(_g.glm_run_ops_inplace, n - i, ops, b, s, y, w, t, out_p, out_llr, i, *extra)
            if i < n:  # the refit before operation i needs the damped full refit
                self._glm_complete_refit(a)
                a.has_warm[:] = 1
        self._glm_state_out(a)

    def _predict_arrays(self, b, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # the served map and LLR by the compiled loop's own scalar code
        if self._engine_only():
            return super()._predict_arrays(b, s)
        self._ensure_fitted()
        a = self._glm_arrays()
        self._glm_state_in(a)
        p = np.empty(s.size)
        llr = np.empty(s.size)
        code = _LINK_CODES[self._link]
        s = np.ascontiguousarray(s, dtype=np.float64)
        identity = bool(self._identity)
        _config.run(_g.glm_served_array, s.size, s, identity, _LOGIT_CLIP, code, a.xis, a.betas, a.fit, p, llr)
        return p, llr

    def _refit_from_histogram(self, centres: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
        """The refit hook of the generic engine, in Python (shape by shape); the compiled
        ``_refit`` does not call it."""
        self._glm_cache = None  # ``_beta``'s values are replaced: the compiled refit rebuilds its arrays
        x, x_lo, x_hi = self._features_of(centres)
        code = _LINK_CODES[self._link]
        candidates = self._candidate_xis()
        best = None
        for xi in candidates:
            beta, brier = self._refit_one(x, pos, neg, code, xi, x_lo, x_hi)
            self._beta[xi] = beta
            if best is None or brier < best[0]:
                best = (brier, xi)
        self._xi_served = best[1]
        self._run_low, self._run_high = _end_runs(pos, neg, float(self.llr_pseudo_count)) if code == 0 else (0.0, 1.0)

    def _refit_one(self, x, pos, neg, code: int, xi: float, x_lo: float, x_hi: float):
        """``(beta, brier)``: the optimum of one shape over ``slope >= 0`` and its Brier score over
        the histogram (``streamcal.gev.histfit.refit_nonnegative``): Newton's method from the
        previous fit, which stops once the map is within ``_REFIT_PROBA_TOL`` of the optimum's
        (see ``streamcal._kernels.gev.glm_refit_histogram_inplace``), the damped full refit where
        that fails, the intercept-only fit where the optimum's slope would be negative."""
        tol = _REFIT_PROBA_TOL if code == 1 else _REFIT_STEP_TOL
        newton_args = (x_lo, x_hi, tol, _REFIT_MAX_PASSES)
        return refit_nonnegative(x, pos, neg, code, xi, float(self.l2), self._beta.get(xi), newton_args)

    def _proba_for(self, x: np.ndarray, beta: np.ndarray, xi: float) -> np.ndarray:
        """The map with coefficients ``beta`` at features ``x`` (F is 0 / 1 beyond R_xi)."""
        return self._map(np.ascontiguousarray(x, dtype=np.float64), False, beta, xi)

    def _map(self, values: np.ndarray, logit_feature: bool, beta, xi: float) -> np.ndarray:
        out = np.empty(values.size)
        gev_link = self._link != "logit"
        _k.glm_map_array(values, logit_feature, _LOGIT_CLIP, float(beta[0]), float(beta[1]), gev_link, float(xi), out)
        return out

    def _predict_fitted(self, scores: np.ndarray) -> np.ndarray:
        xi = self._xi_served
        p = self._map(np.ascontiguousarray(scores, dtype=np.float64), self._identity, self._beta[xi], xi)
        return _past_support(p, xi, self._run_low, self._run_high)

    def _fitted_proba_one(self, s: float) -> float:
        # the array face's map (the same scalar kernel), called once
        xi = self._xi_served
        slope, intercept = self._beta[xi]
        gev_link = self._link != "logit"
        p = _map_score()(s, self._identity, _LOGIT_CLIP, float(slope), float(intercept), gev_link, float(xi))
        return float(_past_support(p, xi, self._run_low, self._run_high))

    def _check_loaded_map(self) -> None:
        """The fits of a restored calibrator: ``_beta`` maps candidate shapes to finite
        ``[slope, intercept]`` arrays; the served shape is one of them (or None before a fit)."""
        from streamcal import _state_check as c

        super()._check_loaded_map()
        c.need_params(self, self._check_glm_params)
        candidates = set(self._candidate_xis())
        for xi, beta in self._beta.items():
            if type(xi) is not float or xi not in candidates:
                c.fail(f"`_beta`: expected candidate shapes {sorted(candidates)} as keys; found {c.brief(xi)}.")
            c.need_array(beta, f"_beta[{xi!r}]", np.float64, size=2)
            c.need_finite(beta, f"_beta[{xi!r}]")
        c.need_int(self._glm_moments_order, "_glm_moments_order", _g.MOM_K, _g.MOM_K)
        _check_moments(c, self._glm_moments)
        c.need_int(self._glm_prior_start_size, "_glm_prior_start_size", _g.PRIOR_SIZE, _g.PRIOR_SIZE)
        start = c.need_array(self._glm_prior_start, "_glm_prior_start", np.float64, size=_g.PRIOR_SIZE)
        if start[0] not in (0.0, 1.0):
            c.fail(f"`_glm_prior_start`: expected 0.0 or 1.0 at index 0; found {c.brief(start[0])}.")
        if start[_g.PRIOR_STEP_VALID] not in (0.0, 1.0):
            c.fail(f"`_glm_prior_start`: expected 0.0 or 1.0 at index 5; found {c.brief(start[_g.PRIOR_STEP_VALID])}.")
        if start[0] == 1.0:
            c.need_finite(start, "_glm_prior_start")
            if not start[_g.PRIOR_SCALE] > 0.0:
                c.fail(f"`_glm_prior_start`: expected a positive scale at index 4; found {c.brief(start[4])}.")
        _check_end_runs(c, self._run_low, self._run_high)
        c.need_int(self._glm_steps_block, "_glm_steps_block", _g.STEP_BLOCK, _g.STEP_BLOCK)
        steps = c.need_array(self._glm_steps, "_glm_steps", np.float64)
        n_steps = _g.steps_size(len(candidates)) if self._link == "gev" else 0
        if steps.size not in (0, n_steps):
            c.fail(f"`_glm_steps`: expected 0 or {n_steps} values; found {steps.size}.")
        if steps.size and steps[_g.STEP_VALID] not in (0.0, 1.0):
            c.fail(f"`_glm_steps`: expected 0.0 or 1.0 at index 0; found {c.brief(steps[0])}.")
        if steps.size and steps[_g.STEP_VALID] == 1.0:
            # a shape's ranges of v are (inf, -inf) while they hold no bucket, and the v past the
            # support's end infinite while no bucket lies there
            ranges = np.zeros(steps.size, dtype=bool)
            for j in (_g.STEP_V_LO, _g.STEP_V_HI, _g.STEP_VI_LO, _g.STEP_VI_HI, _g.STEP_V_OUT):
                ranges[_g.STEP_HEADER + j :: _g.STEP_BLOCK] = True
            c.need_finite(np.where(ranges & np.isinf(steps), 0.0, steps), "_glm_steps")
        served = self._xi_served
        if served is None:
            if self._fitted and not self._logistic_served():
                c.fail("`_xi_served`: expected the served shape since `_fitted` is True; found None.")
        elif type(served) is not float or served not in self._beta:
            c.fail(f"`_xi_served`: expected one of the fitted shapes {sorted(self._beta)}; found {c.brief(served)}.")

    def _logistic_served(self) -> bool:
        return False

    @property
    def coef_(self) -> tuple[float, float] | None:
        """``(slope, intercept)`` of the served fit on ``x(s)`` (``slope >= 0``), or None before the first fit."""
        with self._lock:
            self._ensure_fitted()
            if not self._fitted:
                return None
            slope, intercept = self._logit_beta if self._logistic_served() else self._beta[self._xi_served]
        return float(slope), float(intercept)


class GEVCalibrator(_logistic.LogisticMember, _HistogramGLMCalibrator):
    """Streaming GEV-canonical calibration of a score, for rare positives (Agarwal et al. 2014).

    The calibrated probability is ``F_xi(slope * x(s) + intercept)`` with ``F_xi`` the GEV
    inverse link (``exp(-(1 + xi v)^(-1/xi))``, the Gumbel/cloglog-type ``exp(-exp(-v))`` at
    ``xi = 0``) and ``x(s) = logit(s)`` for probability scores (the default logit grid) or the
    score itself for other bucket strategies. The GEV link is asymmetric: its heavy tail lets
    a handful of positives among many negatives shape the upper end of the map, where a
    logistic link (:class:`PlattCalibrator`) is pulled by the bulk of negatives.

    The state is the windowed bucket histogram shared by every streaming calibrator
    (``buckets=``, ``window=``). The two coefficients are refitted from it by weighted IRLS on
    the GEV-canonical loss (each bucket contributes its positive weight with label 1 and its
    negative weight with label 0, at the bucket centre), warm-started from the previous fit:
    lazily when a prediction follows new labels (``refit_every=None``) or right after every
    ``refit_every``-th label. The slope is kept non-negative, so the map never falls as the score
    rises: where the unconstrained optimum's slope is negative (scores with no spread, one class)
    the optimum over ``slope >= 0`` of the same convex objective lies on the bound, slope 0 and
    the intercept-only fit, a constant map. With ``xi="auto"`` every shape in ``xi_grid`` is refitted and the
    one with the lowest Brier score over the histogram is served (two parameters against
    hundreds of buckets: the in-sample choice barely overfits). ``xi_`` tells which. While the
    score prior holds (``prior="auto"``, its strength above 0), ``xi="auto"`` serves the logistic
    link instead, ``PlattCalibrator()``'s map on the same histogram (the prior's pseudo-counts lie
    at the score's own rate, which no GEV link follows; docs: "GEV-canonical regression"), and its
    shapes are refitted once the data refute the prior; ``link_`` tells which link serves.

    A shape whose support ends (``F = 1`` past ``v = -1/xi`` for ``xi < 0``, ``F = 0`` below it
    for ``xi > 0``) serves no surer than the rate of the data's end run there: the highest (lowest)
    block of the PAV of the fitted histogram plus the finite rule's pseudo-negative above every
    score (pseudo-positive below), as ``PAVCalibrator``'s finite probabilities.

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); default ``LogitGrid()``. An int ``n`` means
        ``LogitGrid(n)``; ``"uniform:N"`` / ``"quantile:N"`` name the strategy
        (:func:`streamcal.buckets.as_buckets`).
    window
        Window strategy (:mod:`streamcal.windows`); default ``Unbounded()``. An int ``n`` (such
        as ``100_000``) means ``CountWindow(n)``, a duration such as ``"7d"`` or ``"12h"``
        ``TimeWindow(seconds)`` (:func:`streamcal.windows.as_window`).
    score_key
        Key of the score in ``x``; ``None``: ``x`` holds exactly one value.
    xi
        GEV shape, a float, or ``"auto"`` to choose it from ``xi_grid`` at each refit.
    xi_grid
        Candidate shapes for ``xi="auto"``.
    l2
        Ridge penalty ``l2/2 slope²`` (the intercept is free): the small default keeps the
        slope of a separable histogram finite and sends it to 0 where the window's data do not
        identify it (every event at one score: the map is the constant at the window's rate).
        A window of one class serves slope 0 and the finite rule's bound.
    refit_every
        ``None``: refit lazily when a prediction follows new labels; an int ``k``: refit after
        every ``k``-th learned event (the fast setting for ``prequential``).
    llr_pseudo_count
        Weight of the pseudo-positive and pseudo-negative of the finite-LLR rule.
    prior
        ``"auto"`` (default): the map is fitted to the histogram plus the pseudo-counts of a
        prior, the score itself for probability inputs or the window's base rate for raw
        scores, whose strength the evidence sets at every refit: strong while the score
        predicts the window as well as its best logistic recalibration, none once the data show
        it off (the docs' page "A prior for little evidence"). ``None``: the histogram alone.

    Attributes
    ----------
    xi_ : float or None
        The shape of the served fit (None while the logistic link serves).
    link_ : str or None
        ``"logistic"`` while ``xi="auto"`` serves the logistic link under the score prior,
        ``"gev"`` otherwise.
    coef_ : tuple or None
        ``(slope, intercept)`` of the served fit.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal import GEVCalibrator, PlattCalibrator
    >>> rng = np.random.default_rng(1)
    >>> z = rng.normal(size=50_000)
    >>> true_p = np.exp(-np.exp(-(0.8 * z - 1.9)))               # a GEV (xi = 0) truth, ~3 % positives
    >>> labels = rng.uniform(size=z.size) < true_p
    >>> scores = 1 / (1 + np.exp(-(z - 1.0)))                    # a miscalibrated model
    >>> cal = GEVCalibrator(refit_every=5_000)
    >>> proba, llr = cal.prequential(scores, labels)
    >>> round(float(labels.mean()), 3), round(float(proba[25_000:].mean()), 3), cal.xi_
    (0.028, 0.028, 0.0)
    >>> def rmse(p):
    ...     return round(float(np.sqrt(np.mean((p[25_000:] - true_p[25_000:]) ** 2))), 4)
    >>> platt, _ = PlattCalibrator(refit_every=5_000).prequential(scores, labels)
    >>> rmse(proba), rmse(platt)                                 # distance to the true probability
    (0.0027, 0.0167)

    River's progressive validation:

    >>> from river import evaluate, stream
    >>> from streamcal.metrics import Brier
    >>> events = stream.iter_array(scores[:2000, None], labels[:2000], feature_names=["score"])
    >>> evaluate.progressive_val_score(events, GEVCalibrator(refit_every=100), Brier())
    Brier: 0.031045

    References
    ----------
    Agarwal, Tewari, Chaudhuri et al., *GEV-canonical regression for accurate binary class
    probability estimation when one class is rare*, ICML 2014.
    """

    _link = "gev"

    def __init__(
        self,
        buckets: Buckets | int | str | None = None,
        window: Window | int | str | None = None,
        score_key: str | None = None,
        xi: float | str = "auto",
        xi_grid: tuple = CALIBRATOR_XI_GRID,
        l2: float = 1e-6,
        refit_every: int | None = None,
        llr_pseudo_count: float = 1.0,
        prior: str | None = "auto",
    ):
        self.prior = prior
        self.xi = xi
        self.xi_grid = xi_grid
        self.l2 = l2
        self.refit_every = refit_every
        self._check_glm_params()
        if xi == "auto":
            if len(xi_grid) == 0:
                msg = "`xi_grid` must hold at least one shape; got an empty grid."
                raise ValueError(msg)
            for i, v in enumerate(xi_grid):
                check_scalar(v, f"xi_grid[{i}]")
        else:
            check_scalar(xi, "xi")
        super().__init__(buckets=buckets, window=window, score_key=score_key, llr_pseudo_count=llr_pseudo_count)

    @classmethod
    def _unit_test_params(cls):
        yield from super()._unit_test_params()
        yield {
            "score_key": "empty_server_form_handler",
            "buckets": LogitGrid(n_buckets=16),
            "xi": 0.25,
            "refit_every": 7,
        }

    def _candidate_xis(self) -> tuple[float, ...]:
        return tuple(float(v) for v in self.xi_grid) if self.xi == "auto" else (float(self.xi),)

    # the logistic member while the score prior holds (``streamcal.gev._logistic``) -------------
    def _has_member(self) -> bool:
        """Whether the logistic member serves while the prior holds: ``xi="auto"`` with the prior."""
        return self.xi == "auto" and getattr(self, "prior", None) is not None

    @property
    def _PRIOR_FLOOR(self) -> str:
        # the member's pseudo-counts go where Platt's go. A fixed ``xi``'s GEV link does not hold
        # the identity over the logit grid: its prior spreads like the data, plus a few events'
        # weight over the whole grid, so that few buckets of data do not leave the fit free to
        # extrapolate far from the prior (``streamcal._prior.score_prior``)
        return "span" if self._has_member() else "spread"

    def _logistic_served(self) -> bool:
        return self._has_member() and self._fitted and self._prior_strength > 0.0

    def _init_map_state(self) -> None:
        super()._init_map_state()
        self._logit_beta = None  # the member's last fit [slope, intercept] (None before its first)

    def __setstate__(self, state):
        if "_beta" in state and "_logit_beta" not in state:
            # a state saved before the member: where its prior held, the GEV shape it served is
            # refitted at the next prediction (as the member)
            state = {**state, "_logit_beta": None}
            if state.get("_fitted") and state.get("_prior_strength", 0.0) > 0.0:
                state["_dirty"] = True
        super().__setstate__(state)

    def _glm_arrays(self) -> SimpleNamespace:
        cache = getattr(self, "_glm_cache", None)
        if cache is not None or not self._has_member():
            return super()._glm_arrays()
        cache = super()._glm_arrays()
        self._logit_beta = _logistic.add_member(cache, self._logit_beta, _REFIT_PROBA_TOL)
        return cache

    def _glm_state_in(self, a: SimpleNamespace) -> None:
        super()._glm_state_in(a)
        if self._has_member():
            self._member_state_in(a)

    def _glm_state_out(self, a: SimpleNamespace) -> None:
        if self._has_member():
            self._member_state_out(a)
        else:
            super()._glm_state_out(a)

    def _river_scalars_out(self, a: SimpleNamespace) -> None:
        if self._has_member():
            self._member_state_out(a)
        else:
            super()._river_scalars_out(a)

    def _river_gev_complete(self, a: SimpleNamespace) -> None:
        if not self._has_member():
            super()._river_gev_complete(a)
            return
        self._member_complete(a)
        self._glm_state_out(a)
        a.live = False

    def _refit(self) -> None:
        if self._has_member() and not self._engine_only():
            self._member_refit()
        else:
            super()._refit()

    def _run_ops(self, ops, b, s, y, w, t, out_p, out_llr) -> None:
        if self._has_member() and self.refit_every is None and not self._engine_only():
            self._member_run_ops(ops, b, s, y, w, t, out_p, out_llr, _LOGIT_CLIP)
        else:
            super()._run_ops(ops, b, s, y, w, t, out_p, out_llr)

    def _predict_arrays(self, b, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self._has_member() or self._engine_only():
            return super()._predict_arrays(b, s)
        self._ensure_fitted()
        return self._member_served_arrays(s, _LOGIT_CLIP)

    def _refit_from_histogram(self, centres: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
        if not (self._has_member() and self._prior_strength > 0.0):
            super()._refit_from_histogram(centres, pos, neg)
            return
        self._glm_cache = None  # the member's fit is replaced: the compiled refit rebuilds its arrays
        x, x_lo, x_hi = self._features_of(centres)
        self._logit_beta, _ = _logistic.refit_logit(x, pos, neg, self._logit_beta, float(self.l2), x_lo, x_hi)

    def _predict_fitted(self, scores: np.ndarray) -> np.ndarray:
        if not self._logistic_served():
            return super()._predict_fitted(scores)
        values = np.ascontiguousarray(scores, dtype=np.float64)
        return _logistic.map_logit(values, self._identity, self._logit_beta, _LOGIT_CLIP)

    def _fitted_proba_one(self, s: float) -> float:
        if not self._logistic_served():
            return super()._fitted_proba_one(s)
        slope, intercept = self._logit_beta
        return _map_score()(s, self._identity, _LOGIT_CLIP, float(slope), float(intercept), False, 0.0)

    def _between_refits_proba_args(self):
        if not self._logistic_served():
            return super()._between_refits_proba_args()
        clip = float(self._glm_cache.buf[_g.BUF_CONSTS + 1])
        slope, intercept = self._logit_beta
        return (
            "glm_proba_marked", self._score_low, self._score_high, bool(self._identity), clip, float(slope),
            float(intercept), False, 0.0, 0.0, 1.0, self._proba_low, self._proba_high,
        )  # fmt: skip

    def _check_loaded_map(self) -> None:
        from streamcal import _state_check as c

        super()._check_loaded_map()
        if self._logit_beta is not None:
            c.need_array(self._logit_beta, "_logit_beta", np.float64, size=2)
            c.need_finite(self._logit_beta, "_logit_beta")
        elif self._logistic_served() and not self._dirty:
            c.fail("`_logit_beta`: expected the served logistic fit since `_prior_strength` is above 0; found None.")

    @property
    def link_(self) -> str | None:
        """The served link: ``"logistic"`` while the score prior holds (``xi="auto"``: the
        logistic member), ``"gev"`` otherwise (None before the first fit)."""
        with self._lock:
            self._ensure_fitted()
            if not self._fitted:
                return None
            return "logistic" if self._logistic_served() else "gev"

    @property
    def xi_(self) -> float | None:
        """The GEV shape of the served fit (None before the first fit, and while the logistic
        member serves: ``link_``)."""
        with self._lock:
            self._ensure_fitted()
            return self._xi_served if self._fitted and not self._logistic_served() else None

    @property
    def shape_scores_(self) -> dict[float, float]:
        """Each candidate shape's squared error summed over the window (its Brier score times the
        window's weight) at the last fit; the lowest picks the served shape ``xi_`` ({} before
        the first fit). A shape whose refit waited at the last fit (its score certified above
        the served shape's, ``streamcal._kernels.glm_refit``) holds that lower bound instead.
        While the logistic link serves (``link_``) the shapes are not refitted: their scores are
        those of their last fit ({} before it)."""
        with self._lock:
            self._ensure_fitted()
            if not self._fitted or self._xi_served is None:
                return {}
            a = self._glm_arrays()
            return {float(xi): float(a.briers[k]) for xi, k in a.index.items()}


class PlattCalibrator(_HistogramGLMCalibrator):
    """Streaming Platt scaling: a logistic fit of the label on the score, from the bucket histogram.

    The calibrated probability is ``1 / (1 + exp(-(slope * x(s) + intercept)))`` with
    ``x(s) = logit(s)`` for probability scores (the default logit grid; the fit is then
    Cox/beta-style recalibration of the log-odds) and the score itself otherwise. It is the
    parametric baseline the other calibrators are compared with. The coefficients are refitted
    by weighted IRLS (log loss) on the windowed bucket histogram, warm-started from the
    previous fit, lazily or every ``refit_every`` labels, like :class:`GEVCalibrator`, with the
    slope kept non-negative (the map never falls as the score rises; as there).

    Parameters
    ----------
    buckets
        Bucket strategy (:mod:`streamcal.buckets`); default ``LogitGrid()``. An int ``n`` means
        ``LogitGrid(n)``; ``"uniform:N"`` / ``"quantile:N"`` name the strategy
        (:func:`streamcal.buckets.as_buckets`).
    window
        Window strategy (:mod:`streamcal.windows`); default ``Unbounded()``. An int ``n`` (such
        as ``100_000``) means ``CountWindow(n)``, a duration such as ``"7d"`` or ``"12h"``
        ``TimeWindow(seconds)`` (:func:`streamcal.windows.as_window`).
    score_key
        Key of the score in ``x``; ``None``: ``x`` holds exactly one value.
    l2
        Ridge penalty ``l2/2 slope²`` (the intercept is free; see ``GEVCalibrator``).
    refit_every
        ``None``: refit lazily when a prediction follows new labels; an int ``k``: refit after
        every ``k``-th learned event.
    llr_pseudo_count
        Weight of the pseudo-positive and pseudo-negative of the finite-LLR rule.
    prior
        ``"auto"`` (default): the map is fitted to the histogram plus the pseudo-counts of a
        prior, the score itself for probability inputs or the window's base rate for raw
        scores, whose strength the evidence sets at every refit: strong while the score
        predicts the window as well as its best logistic recalibration, none once the data show
        it off (the docs' page "A prior for little evidence"). ``None``: the histogram alone.

    Attributes
    ----------
    coef_ : tuple or None
        ``(slope, intercept)`` of the current fit.

    Examples
    --------
    >>> import numpy as np
    >>> from streamcal import PlattCalibrator
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=20_000)
    >>> labels = rng.uniform(size=z.size) < 1 / (1 + np.exp(-(0.5 * z - 2.0)))
    >>> scores = 1 / (1 + np.exp(-z))                      # over-confident and too high
    >>> cal = PlattCalibrator().update(scores, labels)
    >>> slope, intercept = cal.coef_
    >>> round(slope, 1), round(intercept, 1)
    (0.5, -2.0)
    >>> round(cal.predict_proba_one({"score": 0.5})[True], 2)
    0.12

    References
    ----------
    Platt, *Probabilistic outputs for support vector machines and comparisons to regularized
    likelihood methods*, Advances in Large Margin Classifiers (1999).
    """

    _link = "logit"

    def __init__(
        self,
        buckets: Buckets | int | str | None = None,
        window: Window | int | str | None = None,
        score_key: str | None = None,
        l2: float = 1e-6,
        refit_every: int | None = None,
        llr_pseudo_count: float = 1.0,
        prior: str | None = "auto",
    ):
        self.prior = prior
        self.l2 = l2
        self.refit_every = refit_every
        self._check_glm_params()
        super().__init__(buckets=buckets, window=window, score_key=score_key, llr_pseudo_count=llr_pseudo_count)

    @classmethod
    def _unit_test_params(cls):
        yield from super()._unit_test_params()
        yield {"score_key": "empty_server_form_handler", "buckets": LogitGrid(n_buckets=16), "refit_every": 7}
