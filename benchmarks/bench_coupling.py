"""Benchmark: pairwise coupling and the streaming multiclass calibrators.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_coupling.py

1. ``pairwise_couple`` on 1e5 events of K = 10 in one call, both methods, against named baselines
   run in the same process: for ``"ht"`` the paper's algorithm as a plain Python loop (on a
   subsample, scaled); for ``"wlw"`` NumPy's batched LAPACK solve of the same bordered systems.
2. The streaming calibrators for K = 3 and K = 10, pairwise coupling against one-vs-rest: the river
   face (``predict_proba_one`` then ``learn_one`` per event) and the array face (``predict_proba``
   then ``update`` per batch of events).
3. Prequential calibration for K = 5 (``--prequential-k``): ``prequential`` (bit for bit a loop of
   the river face; over ``PAVCalibrator`` pairs, each pair's events in one compiled loop on its
   state) against, in the same process and in alternating rounds, the per-pair path it replaces
   (each pair's own ``process``, the path other binary calibrators take), the river-face loop
   itself (``predict_proba_one`` then ``learn_one``, on the first ``--stream-events`` events; over
   ``PAVCalibrator`` pairs one kernel call per event) and that loop through the per-pair calls it
   replaces, and the batched array face of section 2. With ``--old REV``, also the river face and
   ``prequential`` of the calibrators in ``streamcal/multiclass/streaming.py`` at git revision
   ``REV`` (read with ``git show``, with that revision's coupling and pair kernels, which call this
   checkout's ``_kernels/ipav.py``: a revision whose pair kernels call it with other arguments does not
   compile) in the same rounds. CPU time (``time.process_time``), best of ``--repeat`` rounds.

4. The HT coupling alone on the pairs' r and n of a ``prequential`` run (K = 5): the calibrator's
   full Newton steps against the previous scheme (the paper's sweeps, then safeguarded Newton
   steps), both compiled, in alternating rounds.

numba compile time (first call) is reported apart from steady state (best of several runs).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

from streamcal import pairwise_couple
from streamcal.multiclass import OneVsRestCalibrator, PairwiseCouplingCalibrator


def random_r(rng, m, k):
    u = rng.uniform(size=(m, k, k))
    iu = np.triu_indices(k, 1)
    r = np.zeros((m, k, k))
    r[:, iu[0], iu[1]] = u[:, iu[0], iu[1]]
    r[:, iu[1], iu[0]] = 1.0 - u[:, iu[0], iu[1]]
    return r


def naive_ht(r, tol=1e-10, max_iter=1000):  # the paper's iteration alone
    k = len(r)
    p = [2.0 / (k * (k - 1)) * sum(r[i][j] for j in range(k) if j != i) for i in range(k)]
    for _ in range(max_iter):
        worst = 0.0
        for i in range(k):
            target = sum(r[i][j] for j in range(k) if j != i)
            fitted = sum(p[i] / (p[i] + p[j]) for j in range(k) if j != i)
            worst = max(worst, abs(fitted - target) / (k - 1))
            p[i] *= target / fitted
            total = sum(p)
            p = [v / total for v in p]
        if worst <= tol:
            break
    return p


def numpy_wlw(r):
    m, k = r.shape[0], r.shape[1]
    rt = np.swapaxes(r, 1, 2)
    q = -(r * rt)
    diag = (rt**2).sum(axis=2) - (rt[:, np.arange(k), np.arange(k)] ** 2)
    q[:, np.arange(k), np.arange(k)] = diag
    a = np.zeros((m, k + 1, k + 1))
    a[:, :k, :k] = q
    a[:, :k, k] = 1.0
    a[:, k, :k] = 1.0
    rhs = np.zeros((m, k + 1, 1))
    rhs[:, k] = 1.0
    return np.linalg.solve(a, rhs)[:, :k, 0]


def best_of(fn, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def binary_calibrator():
    try:
        from streamcal import PAVCalibrator

        return PAVCalibrator(), "PAVCalibrator()"
    except (ImportError, AttributeError):
        from river.base import Classifier

        class _Counts(Classifier):  # fallback when PAVCalibrator is not available
            def __init__(self):
                self._pos = np.zeros(34)
                self._tot = np.zeros(34)

            def learn_one(self, x, y):
                b = int(np.searchsorted(EDGES, next(iter(x.values()))))
                self._pos[b] += bool(y)
                self._tot[b] += 1.0

            def predict_proba_one(self, x):
                b = int(np.searchsorted(EDGES, next(iter(x.values()))))
                p = (self._pos[b] + 0.5) / (self._tot[b] + 1.0)
                return {False: 1.0 - p, True: p}

            @property
            def window_weight(self):
                return float(self._tot.sum())

        return _Counts(), "binned-frequency stand-in (PAVCalibrator not available)"


EDGES = np.linspace(-8, 8, 33)


COLD_SNIPPET = """
import time, numpy as np
from streamcal import pairwise_couple
r = np.array([[0, .9, .4], [.1, 0, .7], [.6, .3, 0]])
for method in ("ht", "wlw"):
    t = time.perf_counter(); pairwise_couple(r, method=method)
    print(f"{method} {time.perf_counter() - t:.2f}")
"""


def cold_compile_times():
    """numba compile time of each method's kernel, in a fresh process with an empty cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = subprocess.run(
            [sys.executable, "-c", COLD_SNIPPET], env=env, capture_output=True, text=True, check=True
        ).stdout
    return dict(line.split() for line in out.splitlines())


def bench_couple(m, k, repeat):
    rng = np.random.default_rng(0)
    r = random_r(rng, m, k)
    print(f"## pairwise_couple: {m} events, K = {k}, one call\n")
    t0 = time.perf_counter()
    pairwise_couple(r[:2], method="ht")
    compile_ht = time.perf_counter() - t0
    t0 = time.perf_counter()
    pairwise_couple(r[:2], method="wlw")
    compile_wlw = time.perf_counter() - t0
    cold = cold_compile_times()
    print(f"numba compile (fresh process, empty cache): ht {cold['ht']} s, wlw {cold['wlw']} s")
    print(f"first call here (cache load): ht {compile_ht:.2f} s, wlw {compile_wlw:.2f} s\n")

    t_ht, (p_ht, n_iter) = best_of(lambda: pairwise_couple(r, return_n_iter=True), repeat)
    t_plain, (_, n_plain) = best_of(lambda: pairwise_couple(r, newton=False, return_n_iter=True), repeat)
    t_wlw, p_wlw = best_of(lambda: pairwise_couple(r, method="wlw"), repeat)
    sub = 300
    t_naive, p_naive = best_of(lambda: [naive_ht(r[e]) for e in range(sub)], 1)
    t_naive *= m / sub
    assert np.allclose(p_naive, p_ht[:sub], atol=1e-8)
    t_np, p_np = best_of(lambda: numpy_wlw(r), repeat)
    assert np.allclose(p_np, p_wlw, atol=1e-10)

    print("Input: uniform random upper triangles.\n")
    print("| method | time (s) | events/s | baseline | baseline events/s | speed-up |")
    print("|---|---|---|---|---|---|")
    naive = f"paper's loop in Python (×{m // sub} from {sub} events) | {m / t_naive:,.0f}"
    print(
        f"| ht, Newton steps (tol 1e-10; mean {n_iter.mean():.1f} iterations, max {n_iter.max()}) "
        f"| {t_ht:.3f} | {m / t_ht:,.0f} | {naive} | {t_naive / t_ht:.0f}× |"
    )
    print(
        f"| ht, paper's sweeps alone (mean {n_plain.mean():.1f} sweeps, max {n_plain.max()}) "
        f"| {t_plain:.3f} | {m / t_plain:,.0f} | {naive} | {t_naive / t_plain:.0f}× |"
    )
    print(
        f"| wlw (exact) | {t_wlw:.3f} | {m / t_wlw:,.0f} | numpy batched `linalg.solve` | "
        f"{m / t_np:,.0f} | {t_np / t_wlw:.1f}× |"
    )
    print()

    # A confident model's calibrated pairs: one class usually dominates.
    p_true = rng.dirichlet(np.full(k, 0.3), size=m) + 1e-6
    logit = np.log(p_true)[:, :, None] - np.log(p_true)[:, None, :]
    logit += rng.normal(0.0, 0.3, size=logit.shape)
    logit = np.triu(logit, 1) - np.swapaxes(np.triu(logit, 1), 1, 2)
    rc = 1.0 / (1.0 + np.exp(-logit))
    t_ht, (_, n_iter) = best_of(lambda: pairwise_couple(rc, return_n_iter=True), repeat)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_plain, (_, n_plain) = best_of(lambda: pairwise_couple(rc, newton=False, return_n_iter=True), repeat)
    t_wlw, _ = best_of(lambda: pairwise_couple(rc, method="wlw"), repeat)
    print("Input: a confident model's pairs (p ~ Dirichlet(0.3), logit noise 0.3).\n")
    print("| method | time (s) | events/s | iterations (mean / max) | not converged in 1000 |")
    print("|---|---|---|---|---|")
    print(
        f"| ht, Newton steps | {t_ht:.3f} | {m / t_ht:,.0f} | {n_iter.mean():.1f} / {n_iter.max()} "
        f"| {np.mean(n_iter < 0):.1%} |"
    )
    print(
        f"| ht, paper's sweeps alone | {t_plain:.3f} | {m / t_plain:,.0f} | "
        f"{n_plain[n_plain >= 0].mean():.1f} / {n_plain[n_plain >= 0].max()} (converged events) "
        f"| {np.mean(n_plain < 0):.1%} |"
    )
    print(f"| wlw | {t_wlw:.3f} | {m / t_wlw:,.0f} | – | – |")
    print()


def bench_streaming(k, n_events, repeat):
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(k), size=n_events)
    ys = np.array([rng.choice(k, p=row) for row in p])
    q = p**2 / (p**2).sum(axis=1, keepdims=True)
    xs = [{c: float(row[c]) for c in range(k)} for row in q]
    cal, cal_name = binary_calibrator()
    rows = []
    for cls in (PairwiseCouplingCalibrator, OneVsRestCalibrator):
        model = cls(calibrator=cal)
        for x, y in zip(xs[:50], ys[:50], strict=True):  # warm up (compiles kernels)
            model.predict_proba_one(x)
            model.learn_one(x, int(y))

        def run(cls=cls):
            model = cls(calibrator=cal)
            for x, y in zip(xs, ys, strict=True):
                model.predict_proba_one(x)
                model.learn_one(x, int(y))

        t, _ = best_of(run, repeat)
        rows.append((cls.__name__, t))
    print(f"## streaming, K = {k}: river face, {n_events} events, predict_proba_one + learn_one each")
    print(f"binary calibrator: {cal_name}\n")
    print("| calibrator | time (s) | events/s |")
    print("|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t:.2f} | {n_events / t:,.0f} |")
    print(f"\nratio pairwise / one-vs-rest time: {rows[0][1] / rows[1][1]:.1f}×\n")


def bench_array_face(k, n_events, batch, repeat):
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(k), size=n_events)
    ys = np.array([rng.choice(k, p=row) for row in p])
    q = p**2 / (p**2).sum(axis=1, keepdims=True)
    cal, cal_name = binary_calibrator()
    classes = tuple(range(k))
    print(
        f"## streaming, K = {k}: array face, {n_events} events in batches of {batch} "
        f"(predict_proba on the batch, then update with it)"
    )
    print(f"binary calibrator: {cal_name}\n")
    print("| calibrator | time (s) | events/s |")
    print("|---|---|---|")
    variants = [
        ("PairwiseCouplingCalibrator (ht)", PairwiseCouplingCalibrator, {}),
        ("PairwiseCouplingCalibrator (wlw)", PairwiseCouplingCalibrator, {"method": "wlw"}),
        ("OneVsRestCalibrator", OneVsRestCalibrator, {}),
    ]
    for name, cls, extra in variants:
        cls(calibrator=cal, classes=classes, **extra).update(q[:100], ys[:100]).predict_proba(q[:100])

        def run(cls=cls, extra=extra):
            model = cls(calibrator=cal, classes=classes, **extra)
            for start in range(0, n_events, batch):
                model.predict_proba(q[start : start + batch])
                model.update(q[start : start + batch], ys[start : start + batch])

        t, _ = best_of(run, repeat)
        print(f"| {name} | {t:.2f} | {n_events / t:,.0f} |")
    print()


def _source_at(rev: str, path: str) -> str | None:
    """The file at ``path`` as it was at git revision ``rev``; ``None`` where it did not exist yet."""
    done = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    if done.returncode != 0:
        if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], capture_output=True).returncode:
            raise SystemExit(f"--old: {rev!r} is not a git revision of this repository")
        return None
    return done.stdout


# The kernel modules the calibrators' module uses, in the order they import one another: each
# (path, module name, the statements that import it where it is used).
_KERNEL_MODULES = (
    ("streamcal/_kernels/coupling.py", "coupling", ("from streamcal._kernels import coupling as _k",)),
    ("streamcal/_kernels/pairwise_pav.py", "pairwise_pav", ("from streamcal._kernels import pairwise_pav as _pp",)),
    ("streamcal/multiclass/_one_call.py", "one_call", ("from streamcal.multiclass import _one_call",)),
)
# how the kernel modules import each other: the statement's module, as it is spelled there
_KERNEL_IMPORTS = {
    "coupling": "from streamcal._kernels.coupling import",
    "pairwise_pav": "from streamcal._kernels.pairwise_pav import",
}


def streaming_at(rev: str) -> types.ModuleType:
    """The module ``streamcal/multiclass/streaming.py`` as it was at git revision ``rev``.

    Where that revision's kernels (``streamcal/_kernels/coupling.py``, ``pairwise_pav.py`` and
    ``streamcal/multiclass/_one_call.py``, which its river face, pair loop and coupling call)
    differ from this checkout's, they are loaded too, from files in a temporary directory (numba
    caches compiled kernels next to their source file), and the old module calls them."""
    import importlib.util

    source = _source_at(rev, "streamcal/multiclass/streaming.py")
    if source is None:
        raise SystemExit(f"--old: {rev!r} has no streamcal/multiclass/streaming.py")
    module = types.ModuleType(f"streaming_at_{rev}")
    tag = rev.replace("-", "_").replace("~", "_").replace("^", "_").replace(".", "_")
    folder = tempfile.mkdtemp(prefix="bench_coupling_")
    loaded = {}  # module name -> the name of the revision's module, where it differs
    for path, name, statements in _KERNEL_MODULES:
        kernels = _source_at(rev, path)
        if kernels is None:  # a module added after ``rev``: the revision's calibrators do not import it
            continue
        with open(path, encoding="utf-8") as f:
            if f.read() == kernels and not loaded:
                continue
        for other, at_rev in loaded.items():
            kernels = kernels.replace(_KERNEL_IMPORTS[other], f"from {at_rev} import")
        at_rev = f"{name}_at_{tag}"
        file = os.path.join(folder, f"{at_rev}.py")
        with open(file, "w", encoding="utf-8") as f:
            f.write(kernels)
        spec = importlib.util.spec_from_file_location(at_rev, file)
        old_kernels = importlib.util.module_from_spec(spec)
        sys.modules[at_rev] = old_kernels  # for the revision's kernel modules that import it
        spec.loader.exec_module(old_kernels)
        loaded[name] = at_rev
        alias = statements[0].rsplit(" ", 1)[1]
        module.__dict__[f"_{name.upper()}_AT_REV"] = old_kernels
        for statement in statements:
            source = source.replace(statement, f"{alias} = _{name.upper()}_AT_REV")
    exec(compile(source, f"{rev}:streamcal/multiclass/streaming.py", "exec"), module.__dict__)
    return module


def bench_prequential(k, n_events, stream_events, batch, repeat, old=None):
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(k), size=n_events)
    ys = (rng.random(n_events)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)  # y ~ p, row by row
    q = p**2 / (p**2).sum(axis=1, keepdims=True)
    classes = tuple(range(k))
    xs = [{c: float(row[c]) for c in range(k)} for row in q[:stream_events]]
    labels = ys[:stream_events].tolist()

    def river(cls, extra, fixed=True):
        model = cls(classes=classes, **extra) if fixed else cls(**extra)
        for x, y in zip(xs, labels, strict=True):
            model.predict_proba_one(x)
            model.learn_one(x, y)
        return stream_events

    def prequential(cls, extra):
        cls(classes=classes, **extra).prequential(q, ys)
        return n_events

    def prequential_per_pair(cls, extra):
        # the previous implementation, kept as the path for other binary calibrators: each
        # pair's events through its own array face (``process``), then one coupling call
        fused = PairwiseCouplingCalibrator._fused_pav_pairs
        PairwiseCouplingCalibrator._fused_pav_pairs = lambda self: False
        try:
            cls(classes=classes, **extra).prequential(q, ys)
        finally:
            PairwiseCouplingCalibrator._fused_pav_pairs = fused
        return n_events

    def river_per_pair(cls, extra):
        # the previous river face, kept for other binary calibrators: per event, each pair's
        # ``window_weight`` and ``predict_proba_one``, the coupling, each pair's ``learn_one``
        one_call = PairwiseCouplingCalibrator._river_states
        PairwiseCouplingCalibrator._river_states = lambda self, classes, params: None
        try:
            return river(cls, extra)
        finally:
            PairwiseCouplingCalibrator._river_states = one_call

    def batched(cls, extra):
        model = cls(classes=classes, **extra)
        for start in range(0, n_events, batch):
            model.predict_proba(q[start : start + batch])
            model.update(q[start : start + batch], ys[start : start + batch])
        return n_events

    variants = [
        ("PairwiseCouplingCalibrator (ht)", PairwiseCouplingCalibrator, {}),
        ("PairwiseCouplingCalibrator (wlw)", PairwiseCouplingCalibrator, {"method": "wlw"}),
        ("OneVsRestCalibrator", OneVsRestCalibrator, {}),
    ]
    faces = [
        ("prequential", prequential),
        ("prequential, per-pair path", prequential_per_pair),
        (f"predict_proba + update, batches of {batch}", batched),
        ("river face, per-pair calls", river_per_pair),
        ("river face", river),
    ]
    if old is not None:
        rev, module = old
        faces += [
            (f"prequential, code at {rev}", lambda cls, extra: prequential(getattr(module, cls.__name__), extra)),
            (f"river face, code at {rev}", lambda cls, extra: river(getattr(module, cls.__name__), extra)),
        ]
    # the river face without ``classes=``: the classes learned from the stream (and, for pairwise
    # coupling, the ghost pairs of each labelled class learning beside its pairs)
    faces.append(("river face, classes learned", lambda cls, extra: river(cls, extra, fixed=False)))
    if old is not None:
        faces.append(
            (
                f"river face, classes learned, code at {rev}",
                lambda cls, extra: river(getattr(module, cls.__name__), extra, fixed=False),
            )
        )
    for _, cls, extra in variants:  # compile (or load) the kernels
        cls(classes=classes, **extra).prequential(q[:200], ys[:200])
    best = {}
    for _ in range(repeat):  # alternating rounds: every variant and face once per round
        for name, cls, extra in variants:
            for face, fn in faces:
                t = time.process_time()
                n = fn(cls, extra)
                rate = n / (time.process_time() - t)
                best[name, face] = max(best.get((name, face), 0.0), rate)
    print(
        f"## prequential, K = {k}: {n_events} events (river face: the first {stream_events}), "
        f"PAVCalibrator() per pair or class; CPU time, best of {repeat} alternating rounds\n"
    )
    old_columns = "" if old is None else " | prequential / code before | river face / code before"
    old_columns += " | river face, classes learned / fixed"
    old_columns += "" if old is None else " | river face, classes learned / code before"
    print(
        "| calibrator | "
        + " | ".join(f"{face} (events/s)" for face, _ in faces)
        + " | prequential / per-pair path | river face / per-pair calls | prequential / river face"
        + old_columns
        + " |"
    )
    print("|---|" + "---:|" * (len(faces) + 4 + (0 if old is None else 3)))
    for name, _, _ in variants:
        rates = [best[name, face] for face, _ in faces]
        cells = " | ".join(f"{r:,.0f}" for r in rates)
        if name.startswith("Pairwise"):
            ratios = f"{rates[0] / rates[1]:.2f}x | {rates[4] / rates[3]:.2f}x"
        else:  # one-vs-rest has no pair loop and no one-call river face: both pairs of columns run one path
            ratios = "– | –"
        against_old = "" if old is None else f" | {rates[0] / rates[5]:.2f}x | {rates[4] / rates[6]:.2f}x"
        learned = best[name, "river face, classes learned"]
        against_old += f" | {learned / rates[4]:.2f}x"
        if old is not None:
            against_old += f" | {learned / best[name, faces[-1][0]]:.2f}x"
        print(f"| {name} | {cells} | {ratios} | {rates[0] / rates[4]:.1f}x{against_old} |")
    print()


def bench_ht_coupling(k, n_events, repeat):
    """The HT coupling alone, on the pairs' r and n of a ``prequential`` run (K = ``k``): the
    calibrator's full Newton steps (``ht_couple_upper``) against the previous scheme, the
    paper's sweeps then safeguarded Newton steps (``ht_couple_one`` with ``newton_after=8``), run
    per event by a loop compiled here; CPU time, best of ``repeat`` alternating rounds."""
    import numba

    from streamcal._kernels import coupling as _k
    from streamcal.multiclass.coupling import NEWTON_AFTER_SWEEPS

    @numba.njit(cache=False)
    def sweeps_then_newton(r_up, n_up, tol, max_iter, newton_after, p_out):
        m, kk = p_out.shape[0], p_out.shape[1]
        r = np.zeros((kk, kk))
        n = np.zeros((kk, kk))
        target = np.empty(kk)
        total_weight = np.empty(kk)
        scratch = (
            np.empty(kk),
            np.empty(kk),
            np.empty(kk, dtype=np.bool_),
            np.empty(kk, dtype=np.intp),
            np.empty((kk + 1, kk + 1)),
            np.empty(kk + 1),
        )
        for e in range(m):
            q = 0
            for a in range(kk):
                for b in range(a + 1, kk):
                    r[a, b] = r_up[q, e]
                    r[b, a] = 1.0 - r_up[q, e]
                    n[a, b] = n[b, a] = n_up[q, e]
                    q += 1
            _k.ht_couple_one(r, n, tol, max_iter, newton_after, p_out[e], target, total_weight, scratch)

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(k), size=n_events)
    ys = (rng.random(n_events)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    q = p**2 / (p**2).sum(axis=1, keepdims=True)
    captured = []
    couple = PairwiseCouplingCalibrator._couple_upper

    def record(self, r_up, n_up, kk):
        captured.append((r_up.copy(), n_up.copy()))
        return couple(self, r_up, n_up, kk)

    PairwiseCouplingCalibrator._couple_upper = record
    try:
        PairwiseCouplingCalibrator(classes=tuple(range(k))).prequential(q, ys)
    finally:
        PairwiseCouplingCalibrator._couple_upper = couple
    r_up, n_up = captured[0]
    new, old = np.empty((n_events, k)), np.empty((n_events, k))
    cases = {
        "full Newton steps (ht_couple_upper)": lambda: _k.ht_couple_upper(
            r_up, n_up, 1e-8, 200, NEWTON_AFTER_SWEEPS, new
        ),
        "sweeps, then safeguarded Newton": lambda: sweeps_then_newton(r_up, n_up, 1e-8, 200, NEWTON_AFTER_SWEEPS, old),
    }
    for fn in cases.values():  # compile
        fn()
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(repeat):
        for name, fn in cases.items():
            t = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - t)
    print(f"## HT coupling alone, K = {k}: the r and n of {n_events} prequential events; CPU time, best of {repeat}\n")
    print("| coupling | µs per event | events/s |")
    print("|---|---:|---:|")
    for name, t in best.items():
        print(f"| {name} | {1e6 * t / n_events:.2f} | {n_events / t:,.0f} |")
    names = list(best)
    print(
        f"\nfull Newton / before: {best[names[1]] / best[names[0]]:.2f}x faster; "
        f"largest |difference| of the two: {np.abs(new - old).max():.2e} (the previous scheme stops at tol = 1e-8)\n"
    )


def main():
    import streamcal

    streamcal.use_compiled_kernels()  # the figures are the compiled kernels' (docs/first_calls.md)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--stream-events", type=int, default=5_000)
    parser.add_argument("--array-events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--prequential-k", type=int, default=5)
    parser.add_argument("--only-prequential", action="store_true", help="run sections 3 and 4 alone")
    parser.add_argument("--old", metavar="REV", help="section 3: also time the calibrators of this git revision")
    args = parser.parse_args()
    old = (args.old, streaming_at(args.old)) if args.old else None
    bench_prequential(args.prequential_k, args.array_events, args.stream_events, args.batch, args.repeat, old)
    bench_ht_coupling(args.prequential_k, args.array_events, args.repeat)
    if args.only_prequential:
        return
    bench_couple(args.events, 10, args.repeat)
    for k in (3, 10):
        bench_streaming(k, args.stream_events, args.repeat)
    for k in (3, 10):
        bench_array_face(k, args.array_events, args.batch, args.repeat)


if __name__ == "__main__":
    main()
