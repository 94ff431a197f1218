"""Slow reference implementations that the tests check streamcal against.

Each ``naive_*`` function computes its quantity the obvious way (loops, textbook recursions,
quadrature, brute-force enumeration), independently of the kernel or method it checks. They are
kept in one module so every test file checks against the same definition.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import integrate, special, stats
from scipy.integrate import quad

from streamcal.gev import gev_canonical_loss, gev_cdf

# ----------------------------------------------------------------------------- isotonic regression (PAV)
# Three PAV references, each the definition one kind of test needs: the textbook pooling for the
# batch kernel, a one-pass stack over (value, weight) for the metrics, and the stack over bucket
# counts whose blocks the streaming kernel must reproduce bit for bit.


def naive_pav_textbook(y, w):
    """Textbook PAV: repeatedly pool the first adjacent violating pair of blocks (O(n²)).

    A pair violates when the left value is strictly above the right one; a block of zero weight
    has no value and pools with nothing. Returns the fitted value per input.
    """
    blocks = [[float(v) * float(wt), float(wt), 1] for v, wt in zip(y, w)]  # [Σwy, Σw, count]

    def value(b):
        return b[0] / b[1] if b[1] > 0 else None

    changed = True
    while changed:
        changed = False
        for k in range(len(blocks) - 1):
            a, b = value(blocks[k]), value(blocks[k + 1])
            if a is not None and b is not None and a > b:
                blocks[k] = [blocks[k][0] + blocks[k + 1][0], blocks[k][1] + blocks[k + 1][1], blocks[k][2] + blocks[k + 1][2]]
                del blocks[k + 1]
                changed = True
                break
    out = []
    for b in blocks:
        out.extend([value(b)] * b[2])
    return np.array(out)


def naive_pav_stack(y, w):
    """One-pass stack PAV with blocks (value, weight, count); returns the fitted value per input.

    Pools while the block below has a value at or above the top's, so ties are pooled too; a
    pooled pair of zero weight takes the top's value.
    """
    blocks = []
    for yi, wi in zip(y, w):
        blocks.append([float(yi), float(wi), 1])
        while len(blocks) > 1 and blocks[-2][0] >= blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            wt = w1 + w2
            blocks.append([(v1 * w1 + v2 * w2) / wt if wt > 0 else v2, wt, n1 + n2])
    out = []
    for v, _, n in blocks:
        out.extend([v] * n)
    return np.array(out)


def naive_pav_bucket_blocks(pos, neg):
    """Left-to-right stack PAV over the non-empty buckets: blocks (first, last, P, N).

    Pools while the block below has a rate >= the top's (by cross-multiplication), with sums
    below + top: the definition the kernel must reproduce bit for bit.
    """
    blocks = []
    for j in range(len(pos)):
        if not pos[j] + neg[j] > 0.0:
            continue
        blocks.append([j, j, pos[j], neg[j]])
        while len(blocks) >= 2:
            a, b = blocks[-2], blocks[-1]
            if a[2] * (b[2] + b[3]) >= b[2] * (a[2] + a[3]):  # rate(a) >= rate(b)
                blocks[-2] = [a[0], b[1], a[2] + b[2], a[3] + b[3]]
                blocks.pop()
            else:
                break
    return [tuple(b) for b in blocks]


def naive_pav_bucket_fit(blocks, centres):
    """Per-bucket owner and fitted value for ``blocks`` (the layout documented in ipav);
    flat before the first knot and after the last one."""
    B = len(centres)
    owner = np.full(B, -1, dtype=np.int64)
    fit = np.zeros(B)
    if not blocks:
        return owner, fit
    rates = [p / (p + n) for (_, _, p, n) in blocks]
    for i, (f, last, _, _) in enumerate(blocks):
        end = blocks[i + 1][0] if i + 1 < len(blocks) else B
        owner[f:end] = f
        fit[f : last + 1] = rates[i]
        for g in range(last + 1, end):
            if i + 1 < len(blocks):
                vl, vr = rates[i], rates[i + 1]
                cl, cr = centres[last], centres[blocks[i + 1][0]]
                v = vl + (vr - vl) * ((centres[g] - cl) / (cr - cl))
                fit[g] = min(max(v, vl), vr)
            else:
                fit[g] = rates[i]
    fit[: blocks[0][0]] = rates[0]
    return owner, fit


def naive_closed_form(labels, v1, v2):
    """Paper 001 eq. 6: p_t = max_{i<=t} min_{j>=t} r_ij, r_ij = m v1 / (m v1 + n v2)."""
    labels = np.asarray(labels)
    t_len = labels.size
    p = np.empty(t_len)
    for t in range(t_len):
        best = -np.inf
        for i in range(t + 1):
            worst = np.inf
            for j in range(t, t_len):
                m = labels[i : j + 1].sum()
                n = (j + 1 - i) - m
                worst = min(worst, m * v1 / (m * v1 + n * v2))
            best = max(best, worst)
        p[t] = best
    return p


# ----------------------------------------------------------------------------- buckets and windows


def naive_bucket_index(edges, scores):
    """Linear scan: the number of interior edges at or below each score."""
    return np.array([sum(1 for e in edges[1:-1] if e <= s) for s in scores], dtype=np.intp)


def naive_window_histogram(buckets, labels, weights, n_buckets):
    """pos / neg weight per bucket of the given events (already restricted to the window)."""
    pos = np.bincount(buckets, weights=weights * labels, minlength=n_buckets)
    neg = np.bincount(buckets, weights=weights * (1 - labels), minlength=n_buckets)
    return pos, neg


# ----------------------------------------------------------------------------- metrics and scoring rules


def naive_log_loss(y, p, w):
    total = 0.0
    for yi, pi, wi in zip(y, p, w):
        if wi == 0:
            continue
        if yi == 1:
            total += wi * (math.inf if pi == 0 else -math.log(pi))
        else:
            total += wi * (math.inf if pi == 1 else -math.log(1 - pi))
    return total / sum(w)


def naive_cllr(y, llr, w):
    """½ (weighted mean over positives of log2(1 + e^-llr) + the same over negatives with e^llr)."""
    pos = neg = wp = wn = 0.0
    for yi, x, wi in zip(y, llr, w):
        sign = -1.0 if yi == 1 else 1.0
        cost = 0.0 if wi == 0 else wi * math.log2(1.0 + math.exp(sign * x))
        if yi == 1:
            pos, wp = pos + cost, wp + wi
        else:
            neg, wn = neg + cost, wn + wi
    return 0.5 * (pos / wp + neg / wn)


def naive_min_cllr(y, s, w):
    order = np.lexsort((-y, s))  # ties: any order, pooled below
    ys, ss, ws = y[order], s[order], w[order]
    # pool ties first (one block per distinct score), then PAV over the blocks
    _, inv = np.unique(ss, return_inverse=True)
    pos = np.bincount(inv, weights=ws * ys)
    tot = np.bincount(inv, weights=ws)
    frac = naive_pav_stack(pos / tot, tot)
    p = frac[inv]
    prior = np.sum(ws * ys) / np.sum(ws)
    with np.errstate(divide="ignore"):
        llr = np.log(p) - np.log1p(-p) - math.log(prior / (1 - prior))
    return naive_cllr(ys, llr, ws)


def naive_ece_uniform(y, p, w, n_bins):
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        inside = [(yi, pi, wi) for yi, pi, wi in zip(y, p, w) if lo <= pi < hi or (k == n_bins - 1 and pi == hi)]
        wb = sum(t[2] for t in inside)
        if wb > 0:
            total += abs(sum(t[0] * t[2] for t in inside) - sum(t[1] * t[2] for t in inside))
    return total / sum(w)


def naive_calibration_loss(y, p, n_bins=10):
    bins = [min(next(k for k in range(n_bins + 1) if pi < (k + 1) / n_bins or k == n_bins - 1), n_bins - 1) for pi in p]
    total = 0.0
    for i, pi in enumerate(p):
        members = [j for j in range(len(p)) if bins[j] == bins[i]]
        frac = sum(y[j] for j in members) / len(members)
        total += (pi - frac) ** 2
    return total / len(p)


def naive_hosmer_lemeshow(y, p, n_groups):
    """Deciles of risk: sort, cut at the inverted-CDF quantiles, ties together."""
    n = len(p)
    ps = sorted(p)
    edges = [ps[max(math.ceil(k * n / n_groups) - 1, 0)] for k in range(n_groups + 1)]
    groups = [[] for _ in range(n_groups)]
    for yi, pi in zip(y, p):
        g = sum(1 for e in edges[1:-1] if e < pi)
        groups[g].append((yi, pi))
    stat, nonempty = 0.0, 0
    for grp in groups:
        if not grp:
            continue
        nonempty += 1
        o1 = sum(t[0] for t in grp)
        e1 = sum(t[1] for t in grp)
        o0 = len(grp) - o1
        e0 = len(grp) - e1
        stat += (o1 - e1) ** 2 / e1 + (o0 - e0) ** 2 / e0
    return stat, stats.chi2.sf(stat, nonempty - 2)


def naive_empirical_cross_entropy(llr, labels, theta):
    """The empirical cross-entropy at one prior log-odds, event by event."""
    prior = 1.0 / (1.0 + math.exp(-theta))
    pos = [v for v, t in zip(llr, labels, strict=True) if t]
    neg = [v for v, t in zip(llr, labels, strict=True) if not t]
    cost_pos = sum(math.log2(1.0 + math.exp(-(v + theta))) for v in pos) / len(pos)
    cost_neg = sum(math.log2(1.0 + math.exp(v + theta)) for v in neg) / len(neg)
    return prior * cost_pos + (1.0 - prior) * cost_neg


def naive_partial_losses(q, a, b):
    """Paper 001's integrals with ρ(c) = c^a (1-c)^b / B(a+1, b+1), by scipy quad one by one."""
    z = integrate.quad(lambda c: c**a * (1 - c) ** b, 0, 1)[0]
    t = integrate.quad(lambda c: c ** (a - 1) * (1 - c) ** b, q, 1, limit=400)[0] / z
    n = integrate.quad(lambda c: c**a * (1 - c) ** (b - 1), 0, q, limit=400)[0] / z
    return t, n


def naive_threshold_cost(y, p, t):
    total = 0.0
    for yi, pi in zip(y, p):
        if yi == 1 and pi <= t:
            total += 1 / t
        elif yi == 0 and pi > t:
            total += 1 / (1 - t)
    return total / len(y)


# ----------------------------------------------------------------------------- GEV family


def naive_upper_gamma(a, x):
    """Gamma(a, x) = int_x^inf s^(a-1) e^-s ds by quadrature after s = x e^u (smooth integrand)."""
    lx = math.log(x)
    upper = math.log(800.0 / x)  # beyond this the integrand is below e^-700

    def integrand(u):
        return math.exp(a * (lx + u) - x * math.exp(u))

    value, _ = integrate.quad(integrand, 0.0, upper, epsabs=0.0, epsrel=1e-13, limit=500)
    return value


def naive_gev_cdf(v, xi):
    if xi == 0.0:
        return 0.0 if v < -700.0 else math.exp(-math.exp(-v))
    z = 1.0 + xi * v
    if z <= 0.0:
        return 0.0 if xi > 0 else 1.0
    log_t = -math.log1p(xi * v) / xi
    return 0.0 if log_t > 700.0 else math.exp(-math.exp(log_t))


def naive_gev_canonical_loss(y, v, xi):
    """The canonical construction by quadrature: l(0, v) = int_lo^v F ds and, for xi < 1,
    l(1, v) = int_v^hi (1 - F) ds = int_0^t(v) (1 - e^-r) r^(-1-xi) dr (s -> r = t(s));
    for xi >= 1 the shifted l(1, v) = l(0, v) - v."""
    # below the score where t = 700, F < 1e-304: that piece of the integral is negligible
    lo = -math.log(700.0) if xi == 0.0 else math.expm1(-xi * math.log(700.0)) / xi
    l0 = integrate.quad(lambda s: naive_gev_cdf(s, xi), lo, v, epsabs=1e-15, epsrel=1e-13, limit=400)[0]
    if y == 0:
        return l0
    if xi >= 1.0:
        return l0 - v
    t = math.exp(-v) if xi == 0.0 else math.exp(-math.log1p(xi * v) / xi)
    value, _ = integrate.quad(lambda r: -math.expm1(-r) / r if r > 0 else 1.0, 0.0, t,
                              weight="alg", wvar=(-xi, 0.0), epsabs=1e-14, epsrel=1e-12, limit=400)
    return value


def naive_gev_risk(beta, Z, y, w, xi, l2):
    """Closed-form penalised risk and its gradient, written with the public array functions."""
    v = Z @ beta
    risk = float(w @ gev_canonical_loss(y, v, xi)) + 0.5 * float(l2 @ beta**2)
    grad = Z.T @ (w * (gev_cdf(v, xi) - y)) + l2 * beta
    return risk, grad


def naive_histogram_risk(beta, x, pos, neg, link, xi, l2):
    """Penalised risk of (slope, intercept) on buckets, with its gradient; the ridge is on the
    slope alone."""
    v = beta[0] * x + beta[1]
    if link == "logit":
        loss1, loss0 = np.logaddexp(0.0, -v), np.logaddexp(0.0, v)
        p = special.expit(v)
    else:
        loss1 = gev_canonical_loss(np.ones(v.size), v, xi)
        loss0 = gev_canonical_loss(np.zeros(v.size), v, xi)
        p = gev_cdf(v, xi)
    r = (pos + neg) * p - pos
    risk = float(pos @ loss1 + neg @ loss0) + 0.5 * l2 * float(beta[0] ** 2)
    return risk, np.array([r @ x + l2 * beta[0], r.sum()])


# ----------------------------------------------------------------------------- I-splines


def naive_bspline(t, i, order, x):
    """Cox-de Boor recursion for one B-spline, right-continuous, closed at the last knot."""
    if order == 1:
        if t[i] < t[i + 1] and (t[i] <= x < t[i + 1] or (x == t[-1] and t[i + 1] == t[-1])):
            return 1.0
        return 0.0
    out = 0.0
    if t[i + order - 1] > t[i]:
        out += (x - t[i]) / (t[i + order - 1] - t[i]) * naive_bspline(t, i, order - 1, x)
    if t[i + order] > t[i + 1]:
        right = (t[i + order] - x) / (t[i + order] - t[i + 1])
        out += right * naive_bspline(t, i + 1, order - 1, x)
    return out


def naive_mspline(t, i, order, x):
    """Ramsay's M-spline ``M_i = order B_{i,order} / (t_{i+order} - t_i)``."""
    return order * naive_bspline(t, i, order, x) / (t[i + order] - t[i])


def naive_ispline(t, i, order, x):
    """I-spline as the numerical integral of the M-spline from the left bound."""
    if x <= t[0]:
        return 0.0
    inner = [k for k in t if t[0] < k < min(x, t[-1])]
    value, _ = quad(
        lambda s: naive_mspline(t, i, order, s),
        t[0],
        min(x, t[-1]),
        points=inner or None,
        epsabs=1e-13,
        epsrel=1e-13,
        limit=200,
    )
    return value


def naive_capped_nnls(gram, rhs, cap):
    """Brute-force active-set enumeration for min 1/2 x'Gx - b'x, x >= 0, sum x <= cap.

    For every choice of zero set and cap-active flag, solve the equality-constrained problem by
    least squares; keep the feasible candidate with the lowest objective.
    """
    p = gram.shape[0]
    best, best_val = None, np.inf
    for free_mask in itertools.product([False, True], repeat=p):
        free = np.flatnonzero(free_mask)
        for cap_active in (False, True):
            x = np.zeros(p)
            if free.size:
                g = gram[np.ix_(free, free)]
                if cap_active:
                    ones = np.ones((free.size, 1))
                    kkt = np.block([[g, ones], [ones.T, np.zeros((1, 1))]])
                    sol = np.linalg.lstsq(kkt, np.append(rhs[free], cap), rcond=None)[0]
                    x[free] = sol[:-1]
                else:
                    x[free] = np.linalg.lstsq(g, rhs[free], rcond=None)[0]
            elif cap_active:
                continue
            if (x < -1e-12).any() or x.sum() > cap + 1e-12:
                continue
            val = 0.5 * x @ gram @ x - rhs @ x
            if val < best_val - 1e-15:
                best, best_val = x, val
    return best, best_val


# ----------------------------------------------------------------------------- multiclass coupling


def naive_ht_couple(r, n, tol, max_iter):
    """Paper 002's algorithm as written: one class at a time, renormalise after every update."""
    k = len(r)
    p = [2.0 / (k * (k - 1)) * sum(r[i][j] for j in range(k) if j != i) for i in range(k)]
    for _ in range(max_iter):
        for i in range(k):
            target = sum(n[i][j] * r[i][j] for j in range(k) if j != i)
            fitted = sum(n[i][j] * p[i] / (p[i] + p[j]) for j in range(k) if j != i)
            if fitted > 0:
                p[i] *= target / fitted
            total = sum(p)
            p = [v / total for v in p]
        if naive_score_residual(r, n, p) <= tol:
            break
    return np.array(p)


def naive_score_residual(r, n, p):
    k = len(r)
    worst = 0.0
    for i in range(k):
        tot = sum(n[i][j] for j in range(k) if j != i)
        num = sum(n[i][j] * (p[i] / (p[i] + p[j]) - r[i][j]) for j in range(k) if j != i)
        if tot > 0:
            worst = max(worst, abs(num) / tot)
    return worst


def naive_wlw_couple(r, n):
    """Wu–Lin–Weng method 2: the bordered system solved by LAPACK."""
    k = len(r)
    q = np.zeros((k, k))
    for i in range(k):
        for j in range(k):
            if j != i:
                q[i, i] += n[i][j] * r[j][i] ** 2
                q[i, j] = -n[i][j] * r[j][i] * r[i][j]
    a = np.zeros((k + 1, k + 1))
    a[:k, :k] = q
    a[:k, k] = 1.0
    a[k, :k] = 1.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    return np.linalg.solve(a, rhs)[:k], q


# ----------------------------------------------------------------------------- replay


def naive_replay(t, s, y, label_t, cal, w=None):
    """Event by event, through the river face: before predicting event k, learn every earlier
    event's label whose label time is at or before t[k], in order of (label time, event), at its
    label time; then predict event k."""
    pending = []  # (label time, event index)
    proba = np.empty(len(t))
    llr = np.empty(len(t))
    for k in range(len(t)):
        due = sorted(p for p in pending if p[0] <= t[k])
        for lt, i in due:
            wi = 1.0 if w is None else float(w[i])
            cal.learn_one({"score": float(s[i])}, bool(y[i]), w=wi, t=float(lt))
        pending = [p for p in pending if p[0] > t[k]]
        x = {"score": float(s[k])}
        proba[k] = cal.predict_proba_one(x)[True]
        llr[k] = cal.predict_llr_one(x)
        pending.append((label_t[k], k))
    return proba, llr


def naive_replay_ops(t, label_t):
    """The operation sequence the replay clock defines: ('learn', i) / ('predict', k)."""
    ops, pending = [], []
    for k in range(len(t)):
        due = sorted(p for p in pending if p[0] <= t[k])
        ops += [("learn", i) for _, i in due]
        pending = [p for p in pending if p[0] > t[k]]
        ops.append(("predict", k))
        pending.append((label_t[k], k))
    if len(t):
        ops += [("learn", i) for _, i in sorted(p for p in pending if p[0] <= t[-1])]
    return ops


# ----------------------------------------------------------------------------- replay metrics, as first computed


# The per-window metrics of a replay (unit weights), computed the way streamcal first computed
# them: every weight multiplied in, the bins found by binary search, minCllr through the ranks of
# the scores and the batch PAV-LLR. The replay's faster code must give the same bits.


def naive_replay_brier(y, p):
    w = np.ones(y.size)
    return float(np.sum(w * (p - y) ** 2) / np.sum(w))


def naive_replay_log_loss(y, p, eps):
    w = np.ones(y.size)
    p = np.clip(p, eps, 1.0 - eps)
    with np.errstate(divide="ignore"):
        loss = np.where(y == 1.0, -np.log(p), -np.log1p(-p))
    with np.errstate(invalid="ignore"):
        contrib = np.where(w > 0.0, w * loss, 0.0)
    return float(np.sum(contrib) / np.sum(w))


def naive_replay_cllr(y, llr):
    w = np.ones(y.size)
    w1, w0 = float(np.sum(w[y == 1.0])), float(np.sum(w[y == 0.0]))
    cost = np.logaddexp(0.0, np.where(y == 1.0, -llr, llr)) / math.log(2.0)
    with np.errstate(invalid="ignore"):
        contrib = np.where(w > 0.0, w * cost, 0.0)
    return 0.5 * (float(np.sum(contrib[y == 1.0])) / w1 + float(np.sum(contrib[y == 0.0])) / w0)


def naive_replay_min_cllr(y, llr):
    from streamcal.isotonic import pav_llr

    _, ranks = np.unique(llr, return_inverse=True)
    calibrated = pav_llr(ranks.astype(np.float64), y, finite=False)
    return naive_replay_cllr(y, np.asarray(calibrated, dtype=np.float64))


def _naive_uniform_bins(p, n_bins):
    edges = np.arange(n_bins + 1) / n_bins
    return np.minimum(np.searchsorted(edges, p, side="right") - 1, n_bins - 1)


def naive_replay_ece(y, p, n_bins=10):
    w = np.ones(y.size)
    ids = _naive_uniform_bins(p, n_bins)
    sum_y = np.bincount(ids, weights=w * y, minlength=n_bins)
    sum_p = np.bincount(ids, weights=w * p, minlength=n_bins)
    return float(np.sum(np.abs(sum_y - sum_p)) / np.sum(w))


def naive_replay_calibration_loss(y, p, n_bins=10):
    w = np.ones(y.size)
    ids = _naive_uniform_bins(p, n_bins)
    sum_w = np.bincount(ids, weights=w, minlength=n_bins)
    sum_y = np.bincount(ids, weights=w * y, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(sum_w > 0.0, sum_y / sum_w, 0.0)
    return float(np.sum(w * (p - frac[ids]) ** 2) / np.sum(w))


def naive_histogram_glm_risk(beta, x, pos, neg, link, xi, l2):
    """The histogram fit's objective (``fit_glm_on_histogram``, Platt's and GEV's refits): the
    link's canonical loss summed over the buckets plus the ridge on the slope alone,
    ``l2/2 slope^2``, for ``beta = (slope, intercept)``."""
    v = beta[0] * x + beta[1]
    if link == "logit":
        loss = pos * np.logaddexp(0.0, -v) + neg * np.logaddexp(0.0, v)
    else:
        loss = pos * gev_canonical_loss(np.ones_like(v), v, xi) + neg * gev_canonical_loss(np.zeros_like(v), v, xi)
    return float(np.sum(loss) + 0.5 * l2 * beta[0] ** 2)


def naive_shape_bound(shapes, rate: float, bins: int = 4) -> float:
    """The bound on the keyed prior's automatic strength (``streamcal._keyed_shape``) from the keys'
    exported shape sums (``export_key(key)["shape"]``: observed then expected positives per bin),
    written out from the method of moments."""
    excess = dof = positives = 0.0
    for shape in shapes:
        o, e = shape[:bins], shape[bins:]
        total_o, total_e = o.sum(), e.sum()
        if total_o < 2.0 or not total_e > 0.0:
            continue
        live = e > 0.0
        mu = total_o * e[live] / total_e
        d = live.sum() - 1.0
        excess += ((o[live] - mu) ** 2 / mu).sum() - d
        dof += d
        positives += total_o - 1.0
    excess -= math.sqrt(2.0 * dof)
    return math.inf if excess <= 0.0 else (bins - 1) / (excess / positives * rate)
