"""Couple pairwise probabilities r_ij = P(i | i or j) into one distribution over K classes.

Two methods:

- ``"ht"``: Hastie & Tibshirani (1998), *Classification by pairwise coupling*. The
  Bradley–Terry model mu_ij = p_i / (p_i + p_j) is fitted to the r_ij by maximising the negative
  weighted Kullback–Leibler criterion (eq. 2.4) with the paper's iterative scaling, started from the
  row-average estimate (eq. 3.7).
- ``"wlw"``: Wu, Lin & Weng (2004), *Probability estimates for multi-class classification by
  pairwise coupling*, method 2 (the one LIBSVM uses):
  ``min_p sum_{i<j} n_ij (r_ji p_i - r_ij p_j)^2`` subject to ``sum_i p_i = 1``, solved exactly
  from its linear optimality system.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from streamcal._kernels import coupling as _k
from streamcal._validation import as_real_array, check_scalar
from streamcal.exceptions import ConvergenceWarning

__all__ = ["ConvergenceWarning", "pairwise_couple"]

#: How far ``r[i, j] + r[j, i]`` may be from 1 before ``r`` is rejected.
CONSISTENCY_ATOL = 1e-6

#: With ``newton=True``, Newton steps join the iteration after this many plain sweeps: the cheap
#: sweeps do the coarse work, Newton the rest (fastest on both easy and dominated inputs in
#: ``benchmarks/bench_coupling.py``).
NEWTON_AFTER_SWEEPS = 8

#: The largest ``max_iter``: the kernels count iterations in a 64-bit integer.
MAX_ITER_LIMIT = int(np.iinfo(np.int64).max)


def _where(index: tuple[int, ...], stacked: bool) -> str:
    """Name a position (event, i, j) the way error messages do."""
    if stacked:
        e, i, j = index
        return f"(event {e}, i={i}, j={j})"
    _, i, j = index
    return f"(i={i}, j={j})"


def _as_matrix_stack(x, name: str) -> tuple[np.ndarray, bool]:
    raw = as_real_array(x, name)
    try:
        arr = np.array(raw, dtype=np.float64, copy=True, order="C")
    except OverflowError:
        msg = f"`{name}` must hold numbers within the float64 range."
        raise ValueError(msg) from None
    if arr.ndim not in (2, 3) or arr.shape[-1] != arr.shape[-2]:
        msg = (
            f"`{name}` must be a square matrix (K, K) or a stack of them (m, K, K); "
            f"got an array of shape {arr.shape}."
        )
        raise ValueError(msg)
    if arr.shape[-1] == 0:
        msg = f"`{name}` must have at least one class; got an array of shape {arr.shape}."
        raise ValueError(msg)
    stacked = arr.ndim == 3
    if not stacked:
        arr = arr[np.newaxis]
    return np.ascontiguousarray(arr), stacked


def _check_r(r) -> tuple[np.ndarray, bool]:
    """Validate ``r``; return a (m, K, K) copy with r_ji = 1 - r_ij exactly, and whether stacked."""
    arr, stacked = _as_matrix_stack(r, "r")
    k = arr.shape[-1]
    off = ~np.eye(k, dtype=bool)
    bad = ~((arr >= 0.0) & (arr <= 1.0)) & off  # also catches NaN
    if bad.any():
        idx = tuple(int(v) for v in np.argwhere(bad)[0])
        msg = (
            f"`r` must hold probabilities in [0, 1] off the diagonal; got {float(arr[idx])!r} at "
            f"position {_where(idx, stacked)}."
        )
        raise ValueError(msg)
    upper = np.triu(off)
    gap = np.abs(arr + np.swapaxes(arr, 1, 2) - 1.0)
    bad = (gap > CONSISTENCY_ATOL) & upper
    if bad.any():
        e, i, j = (int(v) for v in np.argwhere(bad)[0])
        where = f" in event {e}" if stacked else ""
        msg = (
            f"`r` must satisfy r[i, j] + r[j, i] = 1 (r_ij = P(i | i or j)); got "
            f"r[{i}, {j}] = {float(arr[e, i, j])!r} and "
            f"r[{j}, {i}] = {float(arr[e, j, i])!r}{where}."
        )
        raise ValueError(msg)
    # Use the upper triangle and make the lower one its exact complement.
    ii, jj = np.nonzero(upper)
    arr[:, jj, ii] = 1.0 - arr[:, ii, jj]
    arr[:, np.arange(k), np.arange(k)] = 0.0
    return arr, stacked


def _check_n(n, m: int, k: int, stacked: bool) -> np.ndarray:
    """Validate pair weights; return a (1, K, K) or (m, K, K) copy with a zero diagonal."""
    if n is None:
        out = np.ones((1, k, k))
        out[0, np.arange(k), np.arange(k)] = 0.0
        return out
    arr, n_stacked = _as_matrix_stack(n, "n")
    if n_stacked and not stacked:
        msg = f"`n` must have shape ({k}, {k}) to match a single matrix `r`; got {arr.shape}."
        raise ValueError(msg)
    if arr.shape[-1] != k or (n_stacked and arr.shape[0] != m):
        got = arr.shape if n_stacked else arr.shape[1:]
        want = f"({k}, {k}) or ({m}, {k}, {k})" if stacked else f"({k}, {k})"
        msg = f"`n` must have shape {want} to match `r`; got an array of shape {got}."
        raise ValueError(msg)
    off = ~np.eye(k, dtype=bool)
    bad = ~(np.isfinite(arr) & (arr >= 0.0)) & off
    if bad.any():
        idx = tuple(int(v) for v in np.argwhere(bad)[0])
        msg = (
            f"`n` must hold finite, non-negative weights off the diagonal; got "
            f"{float(arr[idx])!r} at position {_where(idx, n_stacked)}."
        )
        raise ValueError(msg)
    asym = (arr != np.swapaxes(arr, 1, 2)) & np.triu(off)
    if asym.any():
        e, i, j = (int(v) for v in np.argwhere(asym)[0])
        where = f" in event {e}" if n_stacked else ""
        msg = (
            f"`n` must be symmetric (n_ij is the weight of the pair i, j); got "
            f"n[{i}, {j}] = {float(arr[e, i, j])!r} and "
            f"n[{j}, {i}] = {float(arr[e, j, i])!r}{where}."
        )
        raise ValueError(msg)
    arr[:, np.arange(k), np.arange(k)] = 0.0
    return arr


def pairwise_couple(
    r,
    n=None,
    method: str = "ht",
    *,
    tol: float = 1e-10,
    max_iter: int = 1000,
    newton: bool = True,
    return_n_iter: bool = False,
):
    """Couple pairwise class probabilities into one probability distribution.

    Parameters
    ----------
    r : array-like of shape (K, K) or (m, K, K)
        ``r[i, j]`` = P(class i | class i or class j), one matrix per event. Off-diagonal entries
        must lie in [0, 1] with ``r[i, j] + r[j, i] = 1`` (within 1e-6; the upper triangle is used
        and the lower one taken as its complement). The diagonal is ignored.
    n : array-like of shape (K, K) or (m, K, K), optional
        Non-negative symmetric pair weights n_ij (for instance the number of training events of
        classes i or j). One (K, K) matrix serves all events. Default: all ones. Pairs of weight 0
        are ignored.
    method : {"ht", "wlw"}
        ``"ht"``: Hastie–Tibshirani iterative scaling (see Notes). ``"wlw"``: Wu–Lin–Weng method 2,
        solved exactly.
    tol : float
        ``"ht"`` stops once every score equation holds to within ``tol`` per unit weight:
        ``max_i |sum_j n_ij (mu_ij - r_ij)| / sum_j n_ij <= tol``.
    max_iter : int
        Most ``"ht"`` iterations per event (an iteration is one sweep over the classes, plus one
        Newton step with ``newton``). Events that have not converged by then are returned as they
        stand and a :class:`ConvergenceWarning` is issued.
    newton : bool
        ``"ht"`` only: after 8 sweeps of the paper's iterative scaling, follow each sweep with a
        safeguarded Newton step on ``log p`` (see Notes). ``False`` runs the paper's iteration
        alone.
    return_n_iter : bool
        Also return the iterations each event took (``"ht"``; -1 where ``max_iter`` was hit, 0 for
        ``"wlw"``).

    Returns
    -------
    p : ndarray of shape (K,) or (m, K)
        Class probabilities, non-negative, summing to 1. For K = 2, ``p = (r[0, 1], r[1, 0])``.
    n_iter : ndarray of shape () or (m,), only with ``return_n_iter``

    Notes
    -----
    ``"ht"`` maximises ``-sum_{i<j} n_ij KL(r_ij || mu_ij)`` with mu_ij = p_i / (p_i + p_j)
    (Hastie & Tibshirani 1998, eq. 2.4). It starts from the row averages
    ``p~_i = 2 / (K (K - 1)) * sum_{j != i} r_ij`` (eq. 3.7), which already order the classes as
    the solution does (theorem 1), and repeats ``p_i <- p_i sum_j n_ij r_ij / sum_j n_ij mu_ij``,
    class by class, renormalising each sweep; the criterion never decreases (paper's appendix).
    Classes all of whose pairs have weight 0 keep their start value. When the pairs of positive
    weight do not link all classes, how the probability splits between the unlinked groups is not
    determined by the data.

    The paper's iteration converges linearly, and very slowly when one class dominates (rate
    close to 1) or when some r_ij sit at 0 or 1 (the optimum is then on the boundary p_i = 0 and
    the residual shrinks like 1/sweeps): calibrated confident models produce exactly such r. So by
    default (``newton=True``), after 8 plain sweeps, each sweep is followed by a Newton step on
    ``theta = log p``: the
    criterion is concave in ``theta``, its gradient is the score equations and its Hessian minus
    a graph Laplacian with weights ``n_ij mu_ij (1 - mu_ij)``; the step (with ``sum(delta) = 0``)
    is halved until the criterion does not decrease, so the criterion still never decreases from
    one iteration to the next, and the fixed point is the same. A random K = 10 matrix then
    converges in about 9 iterations instead of 44 sweeps; a boundary case in about 20 instead of
    never.
    Classes at probability 0 are held there; if the Newton system is singular (pairs of weight 0
    leave classes unlinked) the step is skipped.

    ``"wlw"`` solves ``[[Q, 1], [1^T, 0]] [p; b] = [0; 1]`` with
    ``Q_ii = sum_{s != i} n_is r_si^2``, ``Q_ij = -n_ij r_ji r_ij`` by Gaussian elimination with
    partial pivoting; its solution is non-negative (Wu, Lin & Weng 2004). The system is nonsingular
    when every n_ij > 0; if zero weights make it singular, they are replaced by 1e-9 times the
    largest weight.

    References
    ----------
    T. Hastie and R. Tibshirani (1998). Classification by pairwise coupling. *Ann. Statist.* 26(2).
    T.-F. Wu, C.-J. Lin and R. C. Weng (2004). Probability estimates for multi-class
    classification by pairwise coupling. *JMLR* 5, 975–1005.

    Examples
    --------
    The matrix of Hastie & Tibshirani (1998), eq. 3.12, whose solution the paper prints as
    (0.262, 0.270, 0.254, 0.214):

    >>> import numpy as np
    >>> from streamcal import pairwise_couple
    >>> r = np.array([[0.00, 0.51, 0.53, 0.51],
    ...               [0.49, 0.00, 0.54, 0.55],
    ...               [0.47, 0.46, 0.00, 0.59],
    ...               [0.49, 0.45, 0.41, 0.00]])
    >>> print(np.round(pairwise_couple(r), 3))
    [0.262 0.27  0.254 0.214]
    >>> print(np.round(pairwise_couple(r, method="wlw"), 3))
    [0.264 0.271 0.251 0.214]

    Many events at once, with pair weights:

    >>> rs = np.stack([r, r.T])
    >>> n = np.array([[0, 9, 1, 1], [9, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]])
    >>> print(np.round(pairwise_couple(rs, n), 3))
    [[0.269 0.262 0.254 0.214]
     [0.23  0.236 0.244 0.289]]
    """
    check_scalar(method, "method", choices=("ht", "wlw"))
    check_scalar(tol, "tol", numbers.Real, low=0.0)
    check_scalar(max_iter, "max_iter", numbers.Integral, low=0, high=MAX_ITER_LIMIT)
    check_scalar(newton, "newton", choices=(True, False))
    rr, stacked = _check_r(r)
    m, k = rr.shape[0], rr.shape[1]
    nn = _check_n(n, m, k, stacked)

    n_iter = np.zeros(m, dtype=np.intp)
    if k == 1:
        p = np.ones((m, 1))
    elif k == 2:
        p = np.empty((m, 2))
        p[:, 0] = rr[:, 0, 1]
        p[:, 1] = rr[:, 1, 0]
    elif m == 0:
        p = np.empty((0, k))
    elif method == "ht":
        p = np.empty((m, k))
        newton_after = NEWTON_AFTER_SWEEPS if newton else -1
        _k.ht_couple_batch(rr, nn, float(tol), int(max_iter), newton_after, p, n_iter)
        stalled = n_iter < 0
        if stalled.any():
            first = int(np.flatnonzero(stalled)[0])
            where = f" (first: event {first})" if stacked else ""
            msg = (
                f"pairwise_couple: {int(stalled.sum())} of {m} events did not reach tol={tol} "
                f"within max_iter={max_iter} sweeps{where}; returning the last iterate."
            )
            warnings.warn(msg, ConvergenceWarning, stacklevel=2)
            n_iter[stalled] = -1
    else:
        p = np.empty((m, k))
        exact = np.empty(m, dtype=np.bool_)
        _k.wlw_couple_batch(rr, nn, p, exact)

    if not stacked:
        p = p[0]
        n_iter = n_iter[0]
    if return_n_iter:
        return p, n_iter
    return p
