"""GEV's logistic member: what ``GEVCalibrator(xi="auto")`` serves while the score prior holds.

While the score prior's strength is above 0 (the score predicts the window as well as its best
logistic recalibration), ``GEVCalibrator(xi="auto", prior="auto")`` serves the logistic link, the
score's own, fitted to the histogram plus the prior's pseudo-counts with Platt's floor
(``"span"``): ``PlattCalibrator()``'s map on the same events, by the same compiled steps. Its GEV
shapes are then not refitted (the strength does not depend on the link, so they would not enter
the served map). Once the data refute the prior (strength 0) the shapes are refitted and the
lowest Brier score serves, as without the member. The measured reason: while the prior holds, a
GEV link fitted to pseudo-counts at the logistic score's own rate serves about 1-2 % more log
loss than the score over the first hundreds of events (docs/benchmarks.md, "GEV's shape choice
under the prior").

The class and functions here hold the member's part of the calibrator (``streamcal.gev.calibrator``): its
compiled arrays (``streamcal._kernels.glm_refit.gev_logistic_refit``), the map's scalars in and
out of them, the Python refit of the generic engine, and its served map. Its state is the
calibrator's ``_logit_beta`` (the member's last fit, its warm start; None before its first fit);
the member's Taylor moments, ``D`` block and prior warm start are the calibrator's
``_glm_moments`` and ``_glm_prior_start``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import gev as _k
from streamcal._kernels import glm_refit as _g
from streamcal.gev._river import entry_call
from streamcal.gev.histfit import refit_nonnegative

LOGIT_CODE = 1  # ``calibrator._LINK_CODES["logit"]``


def add_member(a: SimpleNamespace, logit_beta, proba_tol: float) -> np.ndarray | None:
    """The member's arrays into the compiled refit's cache ``a`` (``a.member``: the arguments of
    :func:`streamcal._kernels.glm_refit.gev_logistic_refit` after the shapes'); returns the view
    of ``logit_beta`` in them (None before the member's first fit)."""
    f, i = a.packed.f, a.packed.i  # the sections the cache's buffers hold for the member (zero)
    a.m_xis = f[_g.PK_M_XIS]
    a.m_betas = f[_g.PK_M_BETAS].reshape(1, 2)
    a.m_has_warm = i[2]
    a.m_fit = f[_g.PK_M_FIT]
    a.m_briers = f[_g.PK_M_BRIERS]
    f[_g.PK_SCALARS][_g.PS_M_TOL] = proba_tol
    if logit_beta is not None:
        a.m_betas[0] = logit_beta
        a.m_has_warm[0] = 1
    floor = a.args[7]  # the calibrator's floor code (``"span"`` with the member)
    a.member = (
        a.m_xis, a.m_betas, a.m_has_warm, a.m_briers, i[3], a.m_fit, f[_g.PK_G_MOM], floor, LOGIT_CODE, proba_tol,
    )  # fmt: skip
    # the river face's one call: ``gev_logistic_river_proba`` on the packed buffers (``a.gev_tail``)
    a.gev_entry = "river_gev_logistic"  # ``_river.GEV_ENTRIES``
    return a.m_betas[0] if logit_beta is not None else None


class LogisticMember:
    """The member's part of ``GEVCalibrator`` (a base class of it): its compiled arrays' scalars in
    and out, the compiled refit and its completion, the lazy default's loop and the served arrays.
    ``GEVCalibrator`` calls these where the member applies (``_has_member``)."""

    def _member_state_in(self, a: SimpleNamespace) -> None:
        """The served map's scalars into the member's fit array too (the shapes' is the base's)."""
        m = a.m_fit
        m[:] = a.fit
        m[_g.FIT_SERVED] = 0.0
        m[_g.FIT_RUN_LOW : _g.FIT_RUN_HIGH + 1] = 0.0, 1.0

    def _member_state_out(self, a: SimpleNamespace) -> None:
        """The compiled fits back into the map's scalars: the served part's bounds and log-odds (the
        member's while the strength is above 0), the shapes' served shape and end runs once fitted."""
        fit = a.fit.tolist()
        kappa = fit[_g.FIT_KAPPA]
        served = a.m_fit.tolist() if kappa > 0.0 else fit
        self._fitted = served[_g.FIT_FITTED] != 0.0
        self._dirty = fit[_g.FIT_DIRTY] != 0.0
        self._prior_strength = kappa
        if self._fitted:
            self._prior_logodds = served[_g.FIT_LOGODDS]
            self._proba_low = served[_g.FIT_LOW]
            self._proba_high = served[_g.FIT_HIGH]
        if a.has_warm.all():  # the shapes have a fit
            self._run_low, self._run_high = fit[_g.FIT_RUN_LOW], fit[_g.FIT_RUN_HIGH]
            self._xi_served = a.shapes[int(fit[_g.FIT_SERVED])]
        if len(self._beta) < len(a.shapes):
            self._beta = {xi: a.betas[k] for k, xi in enumerate(a.shapes) if a.has_warm[k]}
        if a.m_has_warm[0]:
            self._logit_beta = a.m_betas[0]
        a.river_ready = a.gev_river and self._fitted

    def _member_complete(self, a: SimpleNamespace) -> None:
        """Complete a compiled refit that left the served part to the damped full refit."""
        if not a.fit[_g.FIT_KAPPA] > 0.0:
            self._glm_complete_refit(a)
            a.has_warm[:] = 1
            return
        x, x_lo, x_hi = a.args[0], a.args[1], a.args[2]
        beta, brier = refit_logit(x, a.pos_w, a.neg_w, self._logit_beta, float(self.l2), x_lo, x_hi)
        a.m_betas[0] = beta
        a.m_briers[0] = brier
        a.m_has_warm[0] = 1
        self._logit_beta = a.m_betas[0]
        _config.run(_g.glm_finish_refit, 0, a.m_briers, a.m_fit, float(self.llr_pseudo_count))
        a.fit[_g.FIT_DIRTY] = 0.0

    def _member_refit(self) -> None:
        """The compiled refit (``streamcal._kernels.glm_refit.gev_logistic_refit``), as the base's."""
        self._n_since_refit = 0
        a = self._glm_arrays()
        self._glm_state_in(a)
        between = getattr(self, "refit_every", None) is not None
        if between:
            self._glm_untracked()  # as the base's: one state for both faces
        sf, si = self._hist.live_arrays()
        args = (sf, si, *a.args, *self._glm_shape_arrays(a), *a.member)
        if entry_call("refit_logistic", _g.gev_logistic_refit, args) != 0:
            self._member_complete(a)
        if between:
            self._glm_untracked()
        self._glm_state_out(a)

    def _member_run_ops(self, ops, b, s, y, w, t, out_p, out_llr, clip: float) -> None:
        """The lazy default's operations in one compiled loop (``gev_logistic_run_ops_inplace``)."""
        if isinstance(ops, int):
            ops = np.full(b.size, ops, dtype=np.int64)
        a = self._glm_arrays()
        self._glm_state_in(a)
        sf, si = self._hist.live_arrays()
        b = np.ascontiguousarray(b, dtype=np.intp)
        extra = (sf, si, *a.args[:5], clip, *a.args[5:], *self._glm_shape_arrays(a), *a.member)
        n = ops.size
        i = 0
        while i < n:
            i = _config.run(_g.gev_logistic_run_ops_inplace, n - i, ops, b, s, y, w, t, out_p, out_llr, i, *extra)
            if i < n:  # the refit before operation i needs the damped full refit
                self._member_complete(a)
        self._glm_state_out(a)

    def _member_served_arrays(self, s: np.ndarray, clip: float) -> tuple[np.ndarray, np.ndarray]:
        """The served map and LLR at the scores ``s`` by the compiled loop's scalar code."""
        a = self._glm_arrays()
        self._glm_state_in(a)
        p = np.empty(s.size)
        llr = np.empty(s.size)
        s = np.ascontiguousarray(s, dtype=np.float64)
        gev = (0, a.xis, a.betas, a.fit)
        member = (LOGIT_CODE, a.m_xis, a.m_betas, a.m_fit)
        _config.run(_g.gev_logistic_served_array, s.size, s, bool(self._identity), clip, *gev, *member, p, llr)
        return p, llr


def refit_logit(x, pos, neg, warm, l2: float, x_lo: float, x_hi: float):
    """``(beta, brier)``: the logistic link's optimum over ``slope >= 0`` on the histogram, as
    ``PlattCalibrator``'s ``_refit_one`` finds it (``streamcal.gev.histfit.refit_nonnegative``)."""
    tol = 1e-10  # ``calibrator._REFIT_PROBA_TOL``
    return refit_nonnegative(x, pos, neg, LOGIT_CODE, 0.0, l2, warm, (x_lo, x_hi, tol, 50))


def map_logit(values: np.ndarray, logit_feature: bool, beta, clip: float) -> np.ndarray:
    """The logistic map with coefficients ``beta`` at scores (``logit_feature``) or features."""
    out = np.empty(values.size)
    _k.glm_map_array(values, logit_feature, clip, float(beta[0]), float(beta[1]), False, 0.0, out)
    return out
