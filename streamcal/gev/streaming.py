"""Streaming GEV-canonical regression: mini-batch Newton steps with forgotten Newton statistics."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np
from river import base

from streamcal._kernels import gev as _k
from streamcal._locking import LockedState
from streamcal._validation import as_binary_label, as_binary_labels, as_real_array, check_scalar, is_real_number
from streamcal.gev._solver import WEIGHT_FLOOR, line_search, weighted_gram
from streamcal.gev._vectorized import irls_weights
from streamcal.merging import Mergeable
from streamcal.persist import Persistable

__all__ = ["GEVCanonicalClassifier"]


def _frame_to_matrix(X, name: str = "X") -> tuple[list, np.ndarray]:
    """Column names and a new float64 matrix from a pandas / polars / pyarrow frame or 2-d array.

    Every value must be a finite real number or a bool (read as 0 / 1); column names must be
    distinct.
    """
    names, arr = _convert_frame(X, name)
    if len(set(names)) != len(names):
        seen = set()
        dup = next(c for c in names if c in seen or seen.add(c))
        msg = f"`{name}` must have distinct column names; got {dup!r} more than once."
        raise ValueError(msg)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        msg = f"`{name}` must be finite; got {float(arr[i, j])!r} at row {i}, column {names[j]!r}."
        raise ValueError(msg)
    return names, arr


def _float_columns(columns: list, n_rows: int, name: str, names: list) -> np.ndarray:
    """Stack 1-d columns (each checked to hold real numbers or bools) into a float64 matrix."""
    out = np.empty((n_rows, len(columns)), dtype=np.float64)
    for j, col in enumerate(columns):
        raw = as_real_array(col, f"{name}[{names[j]!r}]", allow_bool=True, what="a column of numbers")
        try:
            out[:, j] = raw
        except OverflowError:
            msg = f"`{name}[{names[j]!r}]` must hold numbers within the float64 range."
            raise ValueError(msg) from None
    return out


def _convert_frame(X, name: str) -> tuple[list, np.ndarray]:
    module = type(X).__module__.split(".")[0]
    if module == "pandas" and hasattr(X, "columns"):
        names = list(X.columns)
        cols = []
        for j in range(X.shape[1]):
            col = X.iloc[:, j]
            kind = getattr(col.dtype, "kind", "O")
            if kind in "iuf" and not isinstance(col.dtype, np.dtype):  # nullable: NA -> NaN
                cols.append(col.to_numpy(dtype=np.float64, na_value=np.nan))
            else:
                cols.append(col.to_numpy())
        return names, _float_columns(cols, X.shape[0], name, names)
    if module == "polars" and hasattr(X, "columns"):
        names = list(X.columns)
        return names, _float_columns([X.get_column(c).to_numpy() for c in names], X.height, name, names)
    if module == "pyarrow" and hasattr(X, "column_names"):
        names = list(X.column_names)
        cols = [X.column(i).to_numpy(zero_copy_only=False) for i in range(X.num_columns)]
        return names, _float_columns(cols, X.num_rows, name, names)
    raw = as_real_array(X, name, allow_bool=True, what="a 2-d array or a data frame of numbers")
    if raw.ndim != 2:
        msg = f"`{name}` must be 2-d; got shape {raw.shape}."
        raise ValueError(msg)
    names = list(range(raw.shape[1]))
    return names, _float_columns(list(raw.T), raw.shape[0], name, names)


def _labels_from(y, n: int) -> np.ndarray:
    if hasattr(y, "to_numpy") and not isinstance(y, np.ndarray):
        module = type(y).__module__.split(".")[0]
        y = y.to_numpy(zero_copy_only=False) if module == "pyarrow" else y.to_numpy()
    labels = as_binary_labels(y, "y", allow_empty=True)
    if labels.size != n:
        msg = f"`y` must have one label per row of `X` ({n}); got {labels.size}."
        raise ValueError(msg)
    return labels


def _check_features(x) -> tuple[list, list[float]]:
    """The names and float values of a feature dict: finite real numbers, or bools (as 0 / 1)."""
    if not isinstance(x, Mapping):
        msg = f"`x` must be a dict of features; got a {type(x).__name__}."
        raise TypeError(msg)
    names = list(x)
    values = []
    for name in names:
        value = x[name]
        if not (is_real_number(value) or isinstance(value, (bool, np.bool_))):
            msg = f"`x` must map feature names to numbers; got {value!r} of type {type(value).__name__} for {name!r}."
            raise TypeError(msg)
        try:
            value = float(value)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            msg = f"`x` must be finite; got {x[name]!r} for feature {name!r}."
            raise ValueError(msg)
        values.append(value)
    return names, values


def _sort_key(name):
    return (type(name).__name__, repr(name))


class GEVCanonicalClassifier(LockedState, Persistable, Mergeable, base.MiniBatchClassifier):
    """Streaming GEV-canonical regression with several ``xi`` side by side.

    Rows are buffered and every ``batch_size`` rows each candidate shape ``xi`` takes a damped
    Newton step on its objective: the current mini-batch's exact GEV-canonical risk plus the
    exponentially forgotten quadratic models of all earlier mini-batches (Newton statistics
    ``A = sum rho X^T W X`` and ``b = sum rho X^T W z``, z the IRLS working response) plus
    ``l2/2 |coef|^2``. Forgetting is per row: evidence ``half_life`` rows old weighs half. This is
    a stochastic Newton method: each batch's quadratic model is accurate near the point where it
    was linearised, so the first mini-batch is fitted to convergence (up to 30 Newton steps) and
    every later one is linearised near the optimum; a stationary stream converges to the batch fit.

    Before a mini-batch is learned, every candidate predicts it, and its squared error (Brier) is
    added to a forgotten prequential score; the candidate with the lowest score serves the
    predictions. (Brier, not each candidate's own loss, because the canonical losses of different
    ``xi`` are not on one scale; the paper also selects ``xi`` by Brier.)

    ``learn_one`` buffers the row; ``learn_many`` appends a frame's rows to the same buffer. Both
    take a step whenever ``batch_size`` rows are waiting, so ``learn_many(X, y)`` is exactly a loop
    of ``learn_one`` (predictions change only at batch boundaries). Features are named: a feature
    absent from a row or frame counts as 0, new features join with coefficient 0. Feature values
    must be finite real numbers (bools count as 0 / 1; strings, ``None``, NaN and ±inf are
    refused, in predictions too); a frame's column names must be distinct.

    Parameters
    ----------
    xis
        Candidate shapes.
    l2
        L2 penalty on the coefficients (not on the intercept).
    batch_size
        Rows per Newton step.
    half_life
        Forgetting half-life in rows; ``None`` keeps all evidence (no forgetting).
    fit_intercept
        Whether to learn an unpenalised intercept.
    newton_steps
        Newton steps per mini-batch (each re-linearises the mini-batch's risk).

    Attributes
    ----------
    xi_
        The shape currently serving predictions.
    coef_
        Its coefficients by feature name.
    intercept_
        Its intercept.

    Examples
    --------
    Event by event, with river's prequential evaluation:

    >>> import numpy as np
    >>> from river import evaluate, metrics
    >>> from streamcal.gev import GEVCanonicalClassifier, gev_cdf
    >>> rng = np.random.default_rng(1)
    >>> def events(n):
    ...     for _ in range(n):
    ...         x = {"a": rng.normal(), "b": rng.normal()}
    ...         p = gev_cdf(0.8 * x["a"] - 0.5 * x["b"] - 1.2, xi=0.5)
    ...         yield x, bool(rng.random() < p)
    >>> model = GEVCanonicalClassifier(batch_size=256)
    >>> loss = evaluate.progressive_val_score(events(5_000), model, metrics.LogLoss())
    >>> round(loss.get(), 3)
    0.207

    Mini-batches from a frame (pandas, polars or pyarrow):

    >>> import pandas as pd
    >>> X = pd.DataFrame(rng.normal(size=(50_000, 2)), columns=["a", "b"])
    >>> y = rng.random(50_000) < gev_cdf(0.8 * X["a"] - 0.5 * X["b"] - 1.2, xi=0.5)
    >>> model.learn_many(X, y)
    >>> print({k: round(v, 1) for k, v in model.coef_.items()}, round(model.intercept_, 1))
    {'a': 0.8, 'b': -0.5} -1.2
    >>> model.xi_
    0.5
    """

    def __init__(
        self,
        xis: tuple = (-0.5, -0.25, 0.0, 0.25, 0.5, 1.0),
        l2: float = 1.0,
        batch_size: int = 256,
        half_life: float | None = None,
        fit_intercept: bool = True,
        newton_steps: int = 1,
    ):
        self.xis = xis
        self.l2 = l2
        self.batch_size = batch_size
        self.half_life = half_life
        self.fit_intercept = fit_intercept
        self.newton_steps = newton_steps
        self._check_params()
        m = len(xis)
        self._xis = np.array([float(x) for x in xis])
        self._names: list = []
        self._index: dict = {}
        self._beta = np.zeros((m, 1))  # last column: intercept
        self._A = np.zeros((m, 1, 1))
        self._b = np.zeros((m, 1))
        self._score = np.zeros(m)
        self._score_weight = 0.0
        self._serving = int(np.argmin(np.abs(self._xis)))
        self._buffer: list = []  # blocks (names, matrix, labels)
        self._buffered = 0
        self._n_seen = 0
        self._init_lock()

    def _check_params(self) -> None:
        if not isinstance(self.xis, (tuple, list)) or len(self.xis) == 0:
            msg = f"`xis` must be a non-empty tuple of numbers; got {self.xis!r}."
            raise ValueError(msg)
        for value in self.xis:
            check_scalar(value, "xis", numbers.Real)
        check_scalar(self.l2, "l2", numbers.Real, low=0.0)
        check_scalar(self.batch_size, "batch_size", numbers.Integral, low=1)
        if self.half_life is not None:
            check_scalar(self.half_life, "half_life", numbers.Real, low=0.0, low_inclusive=False)
        check_scalar(self.newton_steps, "newton_steps", numbers.Integral, low=1)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            msg = f"`fit_intercept` must be a bool; got {self.fit_intercept!r}."
            raise TypeError(msg)

    @classmethod
    def _unit_test_params(cls):
        yield {"batch_size": 8, "xis": (-0.25, 0.0, 0.5)}
        yield {"batch_size": 1, "half_life": 50.0, "l2": 0.1, "newton_steps": 2}

    # -- public state --------------------------------------------------------------------------

    @property
    def xi_(self) -> float:
        with self._lock:
            return float(self._xis[self._serving])

    @property
    def coef_(self) -> dict:
        with self._lock:
            beta = self._beta[self._serving]
            return {name: float(beta[j]) for j, name in enumerate(self._names)}

    @property
    def intercept_(self) -> float:
        with self._lock:
            return float(self._beta[self._serving, -1])

    @property
    def prequential_brier_(self) -> dict:
        """Forgotten mean prequential Brier score per candidate ``xi``."""
        with self._lock:
            w = max(self._score_weight, 1e-300)
            return {float(x): float(s / w) for x, s in zip(self._xis, self._score, strict=True)}

    # -- learning ------------------------------------------------------------------------------

    def learn_one(self, x: dict, y, **kwargs) -> None:
        with self._lock:
            label = as_binary_label(y, "y")
            names, values = _check_features(x)
            row = np.array([values], dtype=np.float64).reshape(1, len(names))
            self._buffer.append((names, row, np.array([1.0 if label else 0.0])))
            self._buffered += 1
            if self._buffered >= self.batch_size:
                self._flush()

    def learn_many(self, X, y, **kwargs) -> None:
        with self._lock:
            names, arr = _frame_to_matrix(X)
            labels = _labels_from(y, arr.shape[0])
            if arr.shape[0] == 0:
                return
            start = 0
            n = arr.shape[0]
            while start < n:
                take = min(self.batch_size - self._buffered, n - start)
                self._buffer.append((names, arr[start : start + take], labels[start : start + take]))
                self._buffered += take
                start += take
                if self._buffered >= self.batch_size:
                    self._flush()

    def _flush(self) -> None:
        blocks, self._buffer, self._buffered = self._buffer, [], 0
        new = {name for names, _, _ in blocks for name in names if name not in self._index}
        if new:
            self._grow(sorted(new, key=_sort_key))
        n = sum(block.shape[0] for _, block, _ in blocks)
        k = len(self._names)
        Z = np.zeros((n, k + 1))
        Z[:, k] = 1.0 if self.fit_intercept else 0.0
        y = np.empty(n)
        row = 0
        for names, block, labels in blocks:
            m = block.shape[0]
            cols = [self._index[name] for name in names]
            Z[row : row + m, cols] = block
            y[row : row + m] = labels
            row += m
        self._learn_batch(Z, y)

    def _grow(self, names: list) -> None:
        m, k1 = self._beta.shape
        add = len(names)
        for name in names:
            self._index[name] = len(self._names)
            self._names.append(name)
        beta = np.zeros((m, k1 + add))
        beta[:, : k1 - 1] = self._beta[:, :-1]
        beta[:, -1] = self._beta[:, -1]
        A = np.zeros((m, k1 + add, k1 + add))
        idx = np.r_[0 : k1 - 1, k1 + add - 1]
        A[np.ix_(range(m), idx, idx)] = self._A
        b = np.zeros((m, k1 + add))
        b[:, idx] = self._b
        self._beta, self._A, self._b = beta, A, b

    def _merged_with(self, other):
        """Merge another learner's forgotten Newton statistics into this one (``streamcal.merge``).

        Each learner keeps, per candidate ``xi``, the sum of its mini-batches' quadratic models of
        the risk, ``A = Σ ρ XᵀWX`` and ``b = Σ ρ XᵀWz``, and the forgotten prequential Brier sums.
        Merging ``[self, other]`` (in stream order) ages ``self``'s sums by the rows ``other``
        learned, ``ρ = 2^(−n_other / half_life)`` (1 without forgetting), adds them feature by
        feature (features are matched by name; one learner's unknown features have zero
        statistics), and solves the merged quadratic model for the coefficients:
        ``β = (A + diag(l2))⁻¹ b``. Rows still buffered (fewer than ``batch_size`` since a
        learner's last step) are carried over in order and learned as the next mini-batch.
        """
        with other._lock:
            new = [name for name in other._names if name not in self._index]
            if new:
                self._grow(sorted(new, key=_sort_key))
            k1 = len(self._names) + 1
            idx = np.array([self._index[name] for name in other._names] + [k1 - 1], dtype=np.intp)
            rho = 1.0 if self.half_life is None else 0.5 ** (other._n_seen / float(self.half_life))
            A = self._A * rho
            vec = self._b * rho
            A[:, idx[:, None], idx[None, :]] += other._A
            vec[:, idx] += other._b
            self._A, self._b = A, vec
            self._score = self._score * rho + other._score
            self._score_weight = self._score_weight * rho + other._score_weight
            self._n_seen += other._n_seen
            if self._n_seen:
                beta = np.zeros_like(self._beta)
                penalty = self._penalty(k1)
                for j in range(self._xis.size):
                    hess = A[j].copy()
                    hess[np.diag_indices(k1)] += penalty
                    beta[j] = _solve_pd(hess, vec[j])
                self._beta = beta
                order = np.lexsort((np.abs(self._xis), self._score))
                self._serving = int(order[0])
            buffered = [(list(names), block.copy(), labels.copy()) for names, block, labels in other._buffer]
            self._buffer = self._buffer + buffered
            self._buffered += other._buffered
            if self._buffered >= self.batch_size:
                self._flush()
        return self

    def _penalty(self, k1: int) -> np.ndarray:
        l2 = np.full(k1, float(self.l2))
        # the intercept is unpenalised; without one its (all-zero) column gets a unit ridge
        l2[-1] = 0.0 if self.fit_intercept else 1.0
        return l2

    def _learn_batch(self, Z: np.ndarray, y: np.ndarray) -> None:
        n, k1 = Z.shape
        rho = 1.0 if self.half_life is None else 0.5 ** (n / float(self.half_life))
        l2 = self._penalty(k1)
        w = np.ones(n)
        ZT = np.ascontiguousarray(Z.T)
        self._score *= rho
        self._score_weight = rho * self._score_weight + n
        # the first mini-batch is fitted to convergence: every later batch is then linearised
        # near the optimum, so the quadratic models kept in the statistics are accurate
        steps = int(self.newton_steps) if self._n_seen else max(int(self.newton_steps), 30)
        for j, xi in enumerate(self._xis):
            beta = self._beta[j]
            A_old = rho * self._A[j]
            b_old = rho * self._b[j]
            v = Z @ beta
            for step in range(steps):
                resid, hess_w = irls_weights(v, y, w, xi, WEIGHT_FLOOR)
                if step == 0:  # prequential Brier: resid = F - y before this batch is learned
                    self._score[j] += float(resid @ resid)
                H = weighted_gram(Z, hess_w, ZT)
                g = ZT @ resid
                lin_beta = beta.copy()  # where H and g were computed
                grad = A_old @ beta - b_old + g + l2 * beta
                if step > 0 and np.max(np.abs(grad)) <= 1e-9 * n:
                    break
                hess = A_old + H
                hess[np.diag_indices(k1)] += l2
                d = _solve_pd(hess, -grad)
                slope0 = float(grad @ d)
                if slope0 < 0.0:
                    dv = Z @ d
                    Ad = A_old @ d
                    base_pen = float((A_old @ beta - b_old + l2 * beta) @ d)
                    quad_pen = float(d @ Ad + (l2 * d) @ d)
                    alpha = line_search(v, dv, y, w, xi, lambda a, b0=base_pen, q=quad_pen: b0 + a * q, slope0)
                    beta = beta + alpha * d
                    v = v + alpha * dv
            # fold this mini-batch's quadratic model (at the last linearisation) into the stats
            self._A[j] = A_old + H
            self._b[j] = b_old + H @ lin_beta - g
            self._beta[j] = beta
        order = np.lexsort((np.abs(self._xis), self._score))
        self._serving = int(order[0])
        self._n_seen += n

    # -- a restored state ---------------------------------------------------------------------

    def _check_loaded_state(self) -> None:
        """Check the attributes a state file restored (see :mod:`streamcal.persist`): valid
        parameters; the candidate shapes; feature names and their index; Newton statistics and
        coefficients of the sizes they give, finite; the serving candidate in range; the buffered
        rows (finite, 0/1 labels) fewer than a batch and as many as counted."""
        from streamcal import _state_check as c

        c.need_params(self, self._check_params)
        c.check_like_fresh(self)
        m = len(self.xis)
        xis = c.need_array(self._xis, "_xis", np.float64, size=m)
        if not np.array_equal(xis, np.array([float(x) for x in self.xis])):
            c.fail("`_xis`: expected the candidate shapes `xis`.")
        names = self._names
        try:
            index = {name: j for j, name in enumerate(names)}
        except TypeError:
            c.fail("`_names`: expected hashable feature names.")
        if len(index) != len(names) or self._index != index:
            c.fail("`_names`/`_index`: expected distinct feature names and their positions.")
        k1 = len(names) + 1
        for name, shape in (("_beta", (m, k1)), ("_A", (m, k1, k1)), ("_b", (m, k1)), ("_score", (m,))):
            a = c.need_array(getattr(self, name), name, np.float64, ndim=len(shape), shape=shape)
            c.need_finite(a, name, low=0.0 if name == "_score" else None)
        c.need_float(self._score_weight, "_score_weight", low=0.0)
        c.need_int(self._serving, "_serving", 0, m - 1)
        c.need_int(self._n_seen, "_n_seen", 0)
        c.need_int(self._buffered, "_buffered", 0, self.batch_size - 1)
        rows = 0
        for i, block in enumerate(self._buffer):
            if not (type(block) is tuple and len(block) == 3 and type(block[0]) is list):
                c.fail(f"`_buffer[{i}]`: expected a (names, rows, labels) tuple; found {c.brief(block)}.")
            block_names, values, labels = block
            try:
                distinct = len(set(block_names)) == len(block_names)
            except TypeError:
                distinct = False
            if not distinct:
                c.fail(f"`_buffer[{i}]` names: expected distinct hashable feature names.")
            c.need_array(values, f"_buffer[{i}] rows", np.float64, ndim=2)
            if values.shape[1] != len(block_names) or values.shape[0] < 1:
                c.fail(f"`_buffer[{i}]` rows: expected rows of {len(block_names)} features; found {values.shape}.")
            c.need_finite(values, f"_buffer[{i}] rows")
            c.need_array(labels, f"_buffer[{i}] labels", np.float64, size=values.shape[0])
            if not ((labels == 0.0) | (labels == 1.0)).all():
                c.fail(f"`_buffer[{i}]` labels: expected 0.0 or 1.0.")
            rows += values.shape[0]
        if rows != self._buffered:
            c.fail(f"`_buffered`: expected the {rows} buffered rows; found {self._buffered}.")

    # -- prediction ----------------------------------------------------------------------------

    def _score_one(self, x: dict) -> float:
        names, values = _check_features(x)
        beta = self._beta[self._serving]
        v = float(beta[-1]) if self.fit_intercept else 0.0
        for name, value in zip(names, values, strict=True):
            j = self._index.get(name)
            if j is not None:
                v += float(beta[j]) * value
        return v

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        with self._lock:
            xi = float(self._xis[self._serving])
            p = float(_k.gev_cdf(_k.gev_clip(self._score_one(x), xi), xi))
            return {False: 1.0 - p, True: p}

    def predict_proba_many(self, X):
        with self._lock:
            import pandas as pd

            names, arr = _frame_to_matrix(X)
            beta = self._beta[self._serving]
            coef = np.array([beta[self._index[n]] if n in self._index else 0.0 for n in names])
            v = arr @ coef + (beta[-1] if self.fit_intercept else 0.0)
            xi = float(self._xis[self._serving])
            p = np.empty(v.size)
            _k.gev_clip_array(np.ascontiguousarray(v, dtype=np.float64), xi, p)
            _k.gev_cdf_array(p, xi, p)
            index = X.index if type(X).__module__.split(".")[0] == "pandas" else None
            return pd.DataFrame({False: 1.0 - p, True: p}, index=index)


def _solve_pd(hess: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve a symmetric positive (semi-)definite system, adding a tiny ridge if needed."""
    x = rhs.copy()
    if _k.cholesky_solve_spd_inplace(hess.copy(), x):
        return x
    jitter = 1e-10 * max(float(np.max(np.abs(np.diag(hess)))), 1.0)
    return np.linalg.lstsq(hess + jitter * np.eye(hess.shape[0]), rhs, rcond=None)[0]
