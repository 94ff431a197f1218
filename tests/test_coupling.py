"""Pairwise coupling: Hastie–Tibshirani iterative scaling and Wu–Lin–Weng method 2."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_ht_couple, naive_score_residual, naive_wlw_couple
from scipy.optimize import minimize

from streamcal import pairwise_couple
from streamcal._kernels.coupling import ht_score_residual
from streamcal.multiclass import ConvergenceWarning


def neg_kl(r, n, p):
    """Paper 002 eq. 2.4 with its sign for maximisation: -sum_{i<j} n_ij KL(r_ij || mu_ij)."""
    k = len(r)
    total = 0.0
    for i in range(k):
        for j in range(i + 1, k):
            mu = p[i] / (p[i] + p[j])
            for a, b in ((r[i][j], mu), (1 - r[i][j], 1 - mu)):
                if a > 0:
                    total -= n[i][j] * a * np.log(a / b)
    return total


def random_r(rng, k, m=None, low=0.0, high=1.0):
    shape = (k, k) if m is None else (m, k, k)
    r = rng.uniform(low, high, size=shape)
    iu = np.triu_indices(k, 1)
    out = np.zeros(shape)
    out[..., iu[0], iu[1]] = r[..., iu[0], iu[1]]
    out[..., iu[1], iu[0]] = 1.0 - r[..., iu[0], iu[1]]
    return out


def random_n(rng, k, m=None):
    shape = (k, k) if m is None else (m, k, k)
    n = rng.integers(1, 50, size=shape).astype(float)
    n = np.triu(n, 1)
    return n + np.swapaxes(n, -1, -2)


def consistent_r(p):
    return p[:, None] / (p[:, None] + p[None, :])


# --- golden values (Hastie & Tibshirani, 1998, section 3, unit weights) ---------------------------------------

PAPER_3_10 = np.array([[0, 0.56, 0.51, 0.60], [0.44, 0, 0.96, 0.44], [0.49, 0.04, 0, 0.59], [0.40, 0.56, 0.41, 0]])
PAPER_3_12 = np.array([[0, 0.51, 0.53, 0.51], [0.49, 0, 0.54, 0.55], [0.47, 0.46, 0, 0.59], [0.49, 0.45, 0.41, 0]])
PAPER_1_1 = np.array([[0, 0.9, 0.4], [0.1, 0, 0.7], [0.6, 0.3, 0]])


def test_ht_matches_paper_3_10_and_its_fitted_mu_3_11():
    p = pairwise_couple(PAPER_3_10)
    np.testing.assert_allclose(p, [0.29, 0.34, 0.16, 0.21], atol=0.005)
    mu = p[:, None] / (p[:, None] + p[None, :])
    paper_mu = np.array([[0, 0.46, 0.64, 0.57], [0.54, 0, 0.67, 0.62], [0.36, 0.33, 0, 0.44], [0.43, 0.38, 0.56, 0]])
    off = ~np.eye(4, dtype=bool)
    # The paper's two-decimal mu are truncated rather than rounded in places (0.576 printed 0.57).
    np.testing.assert_allclose(mu[off], paper_mu[off], atol=0.01)


def test_ht_matches_paper_3_12():
    np.testing.assert_allclose(pairwise_couple(PAPER_3_12), [0.262, 0.270, 0.254, 0.214], atol=0.0005)


def test_ht_on_paper_1_1_matches_a_direct_optimiser():
    # The paper prints (0.47, 0.25, 0.28); a direct optimiser of eq. 2.4 (below) and this
    # implementation agree on (0.481, 0.242, 0.277), so the printed value is slightly off.
    p = pairwise_couple(PAPER_1_1)
    np.testing.assert_allclose(p, [0.47, 0.25, 0.28], atol=0.012)

    def loss(theta):
        q = np.exp(theta - theta.max())
        return -neg_kl(PAPER_1_1, np.ones((3, 3)), q / q.sum())

    res = minimize(loss, np.zeros(3), method="BFGS", tol=1e-12)
    q = np.exp(res.x - res.x.max())
    np.testing.assert_allclose(p, q / q.sum(), atol=1e-6)


# --- Hastie–Tibshirani properties -----------------------------------------------------------


@pytest.mark.parametrize("k", [3, 4, 7, 12])
def test_ht_score_equations_hold_at_convergence(rng, k):
    r = random_r(rng, k, m=20)
    n = random_n(rng, k, m=20)
    tol = 1e-11
    p, n_iter = pairwise_couple(r, n, tol=tol, return_n_iter=True)
    assert (n_iter >= 0).all()
    for e in range(20):
        target = (n[e] * r[e]).sum(axis=1)
        mu = p[e][:, None] / (p[e][:, None] + p[e][None, :])
        np.fill_diagonal(mu, 0.0)
        fitted = (n[e] * mu).sum(axis=1)
        assert np.all(np.abs(fitted - target) <= tol * n[e].sum(axis=1) * (1 + 1e-9))


@pytest.mark.parametrize("newton", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_ht_criterion_never_decreases_between_sweeps(rng, weighted, newton):
    for _ in range(5):
        k = int(rng.integers(3, 9))
        r = random_r(rng, k, low=0.02, high=0.98)
        n = random_n(rng, k) if weighted else np.ones((k, k))
        values = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for sweeps in range(25):
                p = pairwise_couple(r, n, max_iter=sweeps, tol=0.0, newton=newton)
                values.append(neg_kl(r, n, p))
        diffs = np.diff(values)
        assert np.all(diffs >= -1e-12 * np.abs(values[:-1]).max())
        assert values[-1] > values[0]


def test_ht_zero_sweeps_returns_the_row_average_estimate(rng):
    r = random_r(rng, 6)
    with pytest.warns(ConvergenceWarning):
        p0 = pairwise_couple(r, max_iter=0)
    np.testing.assert_allclose(p0, r.sum(axis=1) * 2 / (6 * 5), rtol=1e-14)
    np.testing.assert_allclose(p0.sum(), 1.0, rtol=1e-14)


@given(seed=st.integers(0, 2**32 - 1), k=st.integers(3, 9))
def test_row_average_orders_classes_as_the_solution_does(seed, k):
    # Theorem 1 (Hastie & Tibshirani, 1998): p~_i > p~_j iff p^_i > p^_j, with equal weights.
    rng = np.random.default_rng(seed)
    r = random_r(rng, k)
    p_tilde = r.sum(axis=1)
    p_hat = pairwise_couple(r, tol=1e-13)
    for i in range(k):
        for j in range(k):
            if p_tilde[i] - p_tilde[j] > 1e-9:
                assert p_hat[i] > p_hat[j]


@pytest.mark.parametrize("method", ["ht", "wlw"])
@pytest.mark.parametrize("weighted", [False, True])
def test_both_methods_recover_the_true_p(rng, method, weighted):
    m, k = 50, 6
    p = rng.dirichlet(np.ones(k) * 0.7, size=m) + 1e-3
    p /= p.sum(axis=1, keepdims=True)
    r = np.stack([consistent_r(row) for row in p])
    n = random_n(rng, k, m=m) if weighted else None
    np.testing.assert_allclose(pairwise_couple(r, n, method=method), p, atol=1e-9)


# --- Wu–Lin–Weng ----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [3, 5, 10])
@pytest.mark.parametrize("weighted", [False, True])
def test_wlw_satisfies_its_linear_system(rng, k, weighted):
    m = 30
    r = random_r(rng, k, m=m)
    r[:5] = np.round(r[:5])  # some events with hard 0/1 pairwise probabilities
    r[:5][:, np.arange(k), np.arange(k)] = 0.0
    n = random_n(rng, k, m=m) if weighted else np.ones((m, k, k))
    p = pairwise_couple(r, n if weighted else None, method="wlw")
    assert np.all(p >= 0.0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-14)
    for e in range(m):
        _, q = naive_wlw_couple(r[e], n[e])
        qp = q @ p[e]
        b = -(p[e] @ qp)  # Q p + b 1 = 0 at the optimum
        np.testing.assert_allclose(qp + b, 0.0, atol=1e-12 * max(1.0, np.abs(q).max()))


def test_wlw_matches_libsvm_objective_solved_by_lapack(rng):
    r = random_r(rng, 7, m=40, low=0.05, high=0.95)
    p = pairwise_couple(r, method="wlw")
    for e in range(40):
        expected, _ = naive_wlw_couple(r[e], np.ones((7, 7)))
        np.testing.assert_allclose(p[e], expected, atol=1e-12)


def test_wlw_with_zero_weights_that_disconnect_classes_still_returns_a_distribution():
    r = np.array([[0, 0.5, 1], [0.5, 0, 1], [0, 0, 0]], dtype=float)
    n = np.array([[0, 0, 1], [0, 0, 1], [1, 1, 0]], dtype=float)  # nothing links classes 0 and 1
    p = pairwise_couple(r, n, method="wlw")
    np.testing.assert_allclose(p, [0.5, 0.5, 0.0], atol=1e-9)


# --- kernel == naive loop ---------------------------------------------------------------------


@pytest.mark.parametrize("k", [3, 5, 9])
def test_vectorised_ht_equals_naive_per_event_loop(rng, k):
    m = 25
    r = random_r(rng, k, m=m, low=0.01, high=0.99)
    n = random_n(rng, k, m=m)
    got = pairwise_couple(r, n, tol=1e-12)
    for e in range(m):
        np.testing.assert_allclose(got[e], naive_ht_couple(r[e], n[e], 1e-12, 1000), atol=1e-10)
        np.testing.assert_array_equal(got[e], pairwise_couple(r[e], n[e], tol=1e-12))


@pytest.mark.parametrize("k", [3, 5, 9])
def test_vectorised_wlw_equals_naive_per_event_loop(rng, k):
    m = 25
    r = random_r(rng, k, m=m)
    n = random_n(rng, k, m=m)
    got = pairwise_couple(r, n, method="wlw")
    for e in range(m):
        np.testing.assert_allclose(got[e], naive_wlw_couple(r[e], n[e])[0], atol=1e-11)
        np.testing.assert_array_equal(got[e], pairwise_couple(r[e], n[e], method="wlw"))


def test_shared_weight_matrix_equals_per_event_copies(rng):
    r = random_r(rng, 5, m=10)
    n = random_n(rng, 5)
    for method in ("ht", "wlw"):
        np.testing.assert_array_equal(
            pairwise_couple(r, n, method=method),
            pairwise_couple(r, np.broadcast_to(n, (10, 5, 5)), method=method),
        )


def test_kernel_residual_equals_naive(rng):
    r = random_r(rng, 6)
    n = random_n(rng, 6)
    p = rng.dirichlet(np.ones(6))
    assert ht_score_residual(r, n, p) == pytest.approx(naive_score_residual(r, n, p), rel=1e-12)


# --- shapes, edge cases ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["ht", "wlw"])
def test_two_classes_return_r_itself(rng, method):
    r = random_r(rng, 2, m=8)
    p = pairwise_couple(r, random_n(rng, 2, m=8), method=method)
    np.testing.assert_array_equal(p[:, 0], r[:, 0, 1])
    np.testing.assert_array_equal(p[:, 1], r[:, 1, 0])
    np.testing.assert_array_equal(pairwise_couple(r[0], method=method), [r[0, 0, 1], r[0, 1, 0]])


def test_one_class_and_no_events():
    np.testing.assert_array_equal(pairwise_couple([[0.0]]), [1.0])
    assert pairwise_couple(np.zeros((0, 4, 4))).shape == (0, 4)


@pytest.mark.parametrize("method", ["ht", "wlw"])
def test_large_k(rng, method):
    k = 60
    p_true = rng.dirichlet(np.ones(k)) + 1e-3
    p_true /= p_true.sum()
    r = consistent_r(p_true)
    noisy = np.clip(r + np.triu(rng.normal(0, 0.02, (k, k)), 1), 0, 1)
    noisy = np.triu(noisy, 1) + np.triu(1 - noisy, 1).T
    np.testing.assert_allclose(pairwise_couple(r, method=method), p_true, atol=1e-9)
    p = pairwise_couple(noisy, method=method)
    assert p.shape == (k,)
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0)


def test_hard_zero_one_pairs_give_a_distribution(rng):
    r = np.round(random_r(rng, 5, m=20))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        p = pairwise_couple(r, max_iter=50)
    assert np.all(np.isfinite(p))
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_rows_without_weight_keep_their_start_value():
    r = np.array([[0, 0.7, 0.8], [0.3, 0, 0.6], [0.2, 0.4, 0]])
    n = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]], dtype=float)
    p = pairwise_couple(r, n)
    assert p[0] == pytest.approx((0.7 + 0.8) / 3)
    assert p[1] / (p[1] + p[2]) == pytest.approx(0.6)


def test_non_convergence_warns_and_counts(rng):
    r = random_r(rng, 6, m=4)
    with pytest.warns(ConvergenceWarning, match="4 of 4 events did not reach tol=0.0"):
        _, n_iter = pairwise_couple(r, tol=0.0, max_iter=3, return_n_iter=True)
    np.testing.assert_array_equal(n_iter, -1)


def test_inputs_are_not_mutated(rng):
    r = random_r(rng, 5, m=3)
    r[:, 0, 0] = np.nan  # the diagonal is ignored
    n = random_n(rng, 5, m=3)
    r0, n0 = r.copy(), n.copy()
    for method in ("ht", "wlw"):
        pairwise_couple(r, n, method=method)
    np.testing.assert_array_equal(r, r0)
    np.testing.assert_array_equal(n, n0)


# --- bad input ----------------------------------------------------------------------------


def test_r_outside_unit_interval_names_the_position():
    r = np.array(PAPER_1_1)
    r[1, 2] = 1.3
    pattern = r"`r` must hold probabilities in \[0, 1\].*1\.3 at position \(i=1, j=2\)"
    with pytest.raises(ValueError, match=pattern):
        pairwise_couple(r)


def test_nan_in_a_stack_names_the_event():
    r = np.stack([PAPER_1_1, PAPER_1_1, PAPER_1_1])
    r[2, 0, 1] = np.nan
    with pytest.raises(ValueError, match=r"got nan at position \(event 2, i=0, j=1\)"):
        pairwise_couple(r)


@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 3, 4), (2, 2, 2, 2)])
def test_non_square_r_is_rejected(shape):
    with pytest.raises(ValueError, match=r"`r` must be a square matrix .* got an array of shape"):
        pairwise_couple(np.full(shape, 0.5))


def test_inconsistent_pair_is_rejected():
    r = np.array(PAPER_1_1)
    r[2, 1] = 0.5
    with pytest.raises(ValueError, match=r"r\[1, 2\] = 0.7 and r\[2, 1\] = 0.5"):
        pairwise_couple(r)


def test_non_numeric_r_is_rejected():
    with pytest.raises(TypeError, match="`r` must hold real numbers only; got strings"):
        pairwise_couple([["a", "b"], ["c", "d"]])
    with pytest.raises(TypeError, match=r"`r` must hold real numbers only; got '0\.5'"):
        pairwise_couple(np.array([[0.0, "0.5"], [0.5, 0.0]], dtype=object))
    with pytest.raises(TypeError, match="`r` must be an array of numbers"):
        pairwise_couple("r")


@pytest.mark.parametrize(
    ("n", "pattern"),
    [
        (np.ones((4, 4)), r"`n` must have shape \(3, 3\) to match `r`; got .*\(4, 4\)"),
        (np.ones((2, 3, 3)), r"`n` must have shape \(3, 3\) to match a single matrix `r`"),
        (
            np.array([[0, -1, 1], [-1, 0, 1], [1, 1, 0]]),
            r"non-negative.*-1.0 at position \(i=0, j=1\)",
        ),
        (
            np.array([[0, 2, 1], [3, 0, 1], [1, 1, 0]]),
            r"symmetric.*n\[0, 1\] = 2.0 and n\[1, 0\] = 3.0",
        ),
        (np.array([[0, np.inf, 1], [np.inf, 0, 1], [1, 1, 0]]), r"finite.*inf at position"),
    ],
)
def test_bad_weights_are_rejected(n, pattern):
    with pytest.raises(ValueError, match=pattern):
        pairwise_couple(PAPER_1_1, n)


def test_stacked_weights_must_match_the_number_of_events():
    r = np.stack([PAPER_1_1] * 4)
    with pytest.raises(ValueError, match=r"`n` must have shape \(3, 3\) or \(4, 3, 3\)"):
        pairwise_couple(r, np.ones((3, 3, 3)))


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="`method` must be one of"):
        pairwise_couple(PAPER_1_1, method="newton")
    with pytest.raises(ValueError, match="`tol` must be a number in"):
        pairwise_couple(PAPER_1_1, tol=-1.0)
    with pytest.raises(TypeError, match=r"`max_iter` must be an? int"):
        pairwise_couple(PAPER_1_1, max_iter=2.5)
    with pytest.raises(ValueError, match="`newton` must be one of"):
        pairwise_couple(PAPER_1_1, newton="yes")


def test_ht_with_weights_matches_a_direct_optimiser(rng):
    k = 5
    r = random_r(rng, k, low=0.05, high=0.95)
    n = random_n(rng, k)

    def loss(theta):
        q = np.exp(theta - theta.max())
        return -neg_kl(r, n, q / q.sum())

    res = minimize(loss, np.zeros(k), method="BFGS", tol=1e-12)
    q = np.exp(res.x - res.x.max())
    np.testing.assert_allclose(pairwise_couple(r, n, tol=1e-12), q / q.sum(), atol=1e-6)


@pytest.mark.parametrize("k", [3, 6])
def test_newton_steps_reach_the_paper_iterations_fixed_point(rng, k):
    r = random_r(rng, k, m=20, low=0.03, high=0.97)
    n = random_n(rng, k, m=20)
    plain = pairwise_couple(r, n, tol=1e-12, newton=False, max_iter=100_000)
    np.testing.assert_allclose(pairwise_couple(r, n, tol=1e-12), plain, atol=1e-10)


def test_newton_steps_converge_where_the_plain_iteration_crawls():
    # One class dominating: the plain sweeps converge at a rate close to 1 (and like 1/sweeps when
    # the optimum is on the boundary, r in {0, 1}); Newton steps on log p take a few iterations.
    near = np.array([[0, 0.0065, 0.0047], [0.9935, 0, 0.0029], [0.9953, 0.9971, 0]])
    hard = np.array([[0, 1, 1], [0, 0, 0.9984], [0, 0.0016, 0]], dtype=float)
    for r in (near, hard):
        with pytest.warns(ConvergenceWarning):
            pairwise_couple(r, newton=False, max_iter=1000)
        p, n_iter = pairwise_couple(r, return_n_iter=True)
        assert 0 <= n_iter <= 30
        assert naive_score_residual(r, np.ones((3, 3)), p) <= 1e-10
    np.testing.assert_allclose(pairwise_couple(near), [8.44590890e-05, 7.51426676e-03, 0.992401274])


@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(2, 8),
    method=st.sampled_from(["ht", "wlw"]),
    hard=st.booleans(),
)
def test_any_valid_input_gives_a_distribution(seed, k, method, hard):
    rng = np.random.default_rng(seed)
    r = random_r(rng, k, m=4)
    if hard:
        r = np.round(r)  # pairwise certainties
        r[:, np.arange(k), np.arange(k)] = 0.0
    n = random_n(rng, k, m=4) * (rng.random((4, k, k)) < 0.7)  # some zero weights
    n = np.triu(n, 1) + np.swapaxes(np.triu(n, 1), 1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        p = pairwise_couple(r, n, method=method, max_iter=200)
    assert np.all(np.isfinite(p))
    assert np.all(p >= 0.0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)


# --- the calibrator's HT solve: full Newton steps (ht_couple_newton_one) ------------------------------------


def _coupling_scratch(k):
    """The work arrays the one-event coupling kernels take."""
    return (
        np.empty(k),
        np.empty(k),
        np.empty(k, dtype=np.bool_),
        np.empty(k, dtype=np.intp),
        np.empty((k + 1, k + 1)),
        np.empty(k + 1),
    )


def _newton_couple(r, n, tol=1e-8, max_iter=200):
    from streamcal._kernels.coupling import ht_couple_newton_one

    k = len(r)
    p = np.empty(k)
    scratch = _coupling_scratch(k)
    steps = ht_couple_newton_one(
        np.ascontiguousarray(r), np.ascontiguousarray(n), tol, max_iter, 8, p, np.empty(k), np.empty(k), scratch,
        np.empty((k, k)),
    )  # fmt: skip
    return p, steps


def _old_couple(r, n, tol=1e-8, max_iter=200):
    from streamcal._kernels.coupling import ht_couple_one

    k = len(r)
    p = np.empty(k)
    scratch = _coupling_scratch(k)
    steps = ht_couple_one(
        np.ascontiguousarray(r), np.ascontiguousarray(n), tol, max_iter, 8, p, np.empty(k), np.empty(k), scratch
    )
    return p, steps


@pytest.mark.parametrize("case", ["uniform", "extreme", "tiny weights"])
def test_full_newton_equals_the_paper_iterations_fixed_point_to_1e_12(rng, case):
    """Interior inputs (every r_ij in (0, 1), every n_ij > 0), as the calibrator couples them:
    the result equals the paper's iteration run to a residual of 1e-15 (the naive reference,
    one class at a time) within 1e-12, although the tolerance is 1e-8."""
    tested = 0
    for _ in range(40):
        k = int(rng.integers(3, 8))
        if case == "extreme":
            r = random_r(rng, k)
            r = np.where(np.eye(k, dtype=bool), 0.0, np.clip(r, 1e-4, 1 - 1e-4))
            r = np.triu(r, 1) + np.tril(1.0 - np.triu(r, 1).T, -1)
        else:
            r = random_r(rng, k, low=0.02, high=0.98)
        n = random_n(rng, k) * 10.0
        if case == "tiny weights":  # pairs that have learned nothing, beside pairs with thousands of events
            iu = np.triu_indices(k, 1)
            tiny = rng.random(len(iu[0])) < 0.3
            n[iu[0][tiny], iu[1][tiny]] = n[iu[1][tiny], iu[0][tiny]] = 1e-6
        p, steps = _newton_couple(r, n)
        assert 0 < steps <= 30  # full Newton steps, no fall-back
        reference = naive_ht_couple(r.tolist(), n.tolist(), 1e-15, 100_000)
        if naive_score_residual(r.tolist(), n.tolist(), reference) > 1e-14:
            continue  # the plain iteration has not reached its fixed point: no reference
        tested += 1
        np.testing.assert_allclose(p, reference, rtol=0, atol=1e-12)
        assert naive_score_residual(r.tolist(), n.tolist(), p) <= 1e-8
    assert tested >= 30


def test_full_newton_starts_at_the_solution_when_the_pairs_are_consistent(rng):
    """Pairs consistent with one distribution (r_ij = p_i / (p_i + p_j)), any weights: the mean
    pairwise log-odds start is that distribution, and no step is taken."""
    for _ in range(20):
        k = int(rng.integers(3, 9))
        p = rng.dirichlet(np.ones(k))
        r = consistent_r(p)
        n = random_n(rng, k) * 10.0 ** rng.integers(-6, 4)
        got, steps = _newton_couple(r, n)
        assert steps == 0
        np.testing.assert_allclose(got, p, rtol=1e-13, atol=0)


@pytest.mark.parametrize("noise", [0.3, 1.5])
def test_full_newton_from_either_start_reaches_the_fixed_point_on_inconsistent_pairs(rng, noise):
    """Pairs far from consistent, weights spanning ten orders of magnitude: where steps from the
    mean log-odds start fail, they start again from the row average; either way the result is
    the paper's fixed point within 1e-12, by full Newton steps (no fall-back)."""
    tested = 0
    for _ in range(60):
        k = int(rng.integers(3, 8))
        p = rng.dirichlet(np.full(k, 0.7)).clip(1e-4)
        log_odds = np.log(p)[:, None] - np.log(p)[None, :] + np.triu(rng.normal(0.0, noise, (k, k)), 1)
        log_odds = np.triu(log_odds, 1) - np.triu(log_odds, 1).T
        r = np.where(np.eye(k, dtype=bool), 0.0, 1.0 / (1.0 + np.exp(-log_odds)))
        r = np.triu(r, 1) + np.tril(1.0 - np.triu(r, 1).T, -1)
        f = np.exp(rng.uniform(0.0, np.log(1e10), k))
        n = np.triu((f[:, None] + f[None, :]) * rng.uniform(0.5, 1.5, (k, k)), 1)
        n = n + n.T
        got, steps = _newton_couple(r, n)
        assert 0 < steps <= 30
        reference = naive_ht_couple(r.tolist(), n.tolist(), 1e-15, 100_000)
        if naive_score_residual(r.tolist(), n.tolist(), reference) > 1e-14:
            continue  # the plain iteration has not reached its fixed point: no reference
        tested += 1
        np.testing.assert_allclose(got, reference, rtol=0, atol=1e-12)
    assert tested >= 30


def test_full_newton_hands_boundary_cases_to_the_paper_iteration_bit_for_bit(rng):
    """An r_ij of exactly 0 or 1, an n_ij of 0 or max_iter = 0: the maximum may sit on the
    boundary (or the start estimate is asked for), and the result is ht_couple_one's, bit for bit."""
    k = 4
    r = random_r(rng, k, low=0.1, high=0.9)
    n = random_n(rng, k)
    hard = r.copy()
    hard[0, 1], hard[1, 0] = 1.0, 0.0
    unweighted = n.copy()
    unweighted[2, 3] = unweighted[3, 2] = 0.0
    for rr, nn, max_iter in ((hard, n, 200), (r, unweighted, 200), (r, n, 0), (hard, unweighted, 3)):
        got, steps = _newton_couple(rr, nn, max_iter=max_iter)
        want, want_steps = _old_couple(rr, nn, max_iter=max_iter)
        assert got.tobytes() == want.tobytes()
        assert steps == want_steps


def test_the_calibrators_ht_coupling_is_within_tol_of_pairwise_couple(rng):
    """The calibrator couples with full Newton steps, pairwise_couple with the paper's sweeps and
    safeguarded Newton steps: both reach the same fixed point."""
    from streamcal.multiclass import PairwiseCouplingCalibrator

    p = rng.dirichlet(np.ones(5), size=400)
    y = rng.integers(0, 5, size=400)
    cal = PairwiseCouplingCalibrator(classes=tuple(range(5)))
    cal.update(p, y)
    for row in p[:20]:
        x = {c: float(v) for c, v in enumerate(row)}
        _, r, n = cal.coupling_inputs(x)
        np.testing.assert_allclose(
            list(cal.predict_proba_one(x).values()), pairwise_couple(r, n, tol=1e-13), atol=1e-12
        )
