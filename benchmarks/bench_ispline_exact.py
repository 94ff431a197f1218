"""ISplineCalibrator at its exact default (a refit before every prediction that follows new labels).

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_ispline_exact.py [--rounds 5] [--n 20000] [--warmup 20000] [--old REV]

The click-like stream of ``bench_streaming_pav.py`` (``LogitGrid()``, unbounded window, the
score prior ``"auto"``); each calibrator first learns a warm-up, then runs ``prequential`` on the
next ``n`` events and, apart, the river face (``predict_proba_one`` then ``learn_one``) on a
fifth of them. In the same process, in rotating rounds, by CPU time: the compiled loop's
incremental refit (the default), the compiled loop's full refit before every prediction
(``_STREAM_INCREMENTAL = False``) and the refit engine's own per-event loop (``_STREAM_LOOP =
False``: the full refit, score prior included, before every prediction). Checked on every round:
the full-refit loop equals the engine bit for bit, and the incremental refit is within 1e-9 of
it, probabilities and LLRs. Prints events per second and the ratios. With ``--old REV``, also the
calibrator of ``streamcal/spline/calibrator.py`` at git revision ``REV`` (read with ``git show``)
on the I-spline kernels of that revision (``streamcal/_kernels/ispline.py`` and
``ispline_stream.py``, loaded from a temporary folder where they differ from today's) in the
same rounds, its outputs checked equal to today's bit for bit on both faces where the kernels
are the same, else within 1e-9 (both within 1e-9 of the full refit).

``--state prior`` times a state where the score prior is in force instead (every refit the engine's
full refit of the row plus the prior's pseudo-counts, in one compiled loop):

    PYTHONPATH=. python benchmarks/bench_ispline_exact.py --state prior [--rounds 3] [--n 400] [--old REV] [--river-repeats 1]

A calibrated stream (labels drawn with the score as their probability, rare positives, so the
prior's strength is in the thousands); each calibrator learns ``--warmup`` events (default
4,000) with ``refit_every=50``, then runs ``prequential`` on the next ``n`` events and, apart, the
river face on the next ``n // 4`` at the exact default (``--river-repeats`` times a round, each from
the same warmed state and checked to serve the same bits, their CPU times summed: less noise on a
loaded machine). Every round checks both faces' probabilities within 1e-9 of a naive full refit before every event
(the prior's ``score_prior``, then ``fit_distinct`` from its cold start with the knot count of the
data's weight, computed once). With ``--old REV`` the code of that revision runs in the same
rounds from the same warmed state (its own ``streamcal/spline/_prior_refit.py`` and
``_kernels/ispline_prior_stream.py`` and ``ispline_prior_incr.py`` where they differ from today's, and its
river face's ``_kernels/ispline_prior_river.py`` on them), the largest gap to today's
printed (not checked: before 2026-11-29 the knot count followed the pseudo-counts' total, another
fit).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_streaming_pav import click_stream

import streamcal
from streamcal import ISplineCalibrator
from streamcal._kernels import _config
from streamcal._kernels import ispline as _k
from streamcal._kernels import ispline_stream as _ks
from streamcal._prior import proba_bounds, score_prior
from streamcal.spline.basis import default_n_knots
from streamcal.spline.fit import evaluate_map, fit_scaled_histogram, unit_scaled

GOAL_PREQUENTIAL = 300_000
GOAL_RIVER = 200_000


class EngineLoop(ISplineCalibrator):
    """The engine's loop: the full refit (score prior included) before every prediction that
    follows new labels, on both faces."""

    _STREAM_LOOP = False


class FullRefitLoop(ISplineCalibrator):
    """The compiled loop with its full refit before every prediction (the engine's, bit for bit)."""

    _STREAM_INCREMENTAL = False


TOL = 1e-9


ROOT = Path(__file__).resolve().parent.parent


def source_at(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], check=True, capture_output=True, text=True, cwd=ROOT).stdout


def kernels_at(rev: str):
    """``(ispline, ispline_stream)``: the I-spline kernel modules at git revision ``rev``, each
    today's module where its source is unchanged, else the old source loaded from a file in a
    temporary folder (numba caches compiled functions by file), the stream kernels importing the
    old ``ispline`` module. ``None`` for both when neither changed."""
    names = {"ispline": "streamcal/_kernels/ispline.py", "ispline_stream": "streamcal/_kernels/ispline_stream.py"}
    old = {name: source_at(rev, path) for name, path in names.items()}
    changed = {name for name, path in names.items() if old[name] != (ROOT / path).read_text(encoding="utf-8")}
    if not changed:
        return None, None
    folder = Path(tempfile.gettempdir()) / f"streamcal_bench_ispline_at_{rev}"
    folder.mkdir(exist_ok=True)
    modules = {"ispline": _k, "ispline_stream": _ks}
    for name in ("ispline", "ispline_stream"):  # the stream kernels import the other module
        text = old[name]
        if name == "ispline_stream" and "ispline" in changed:
            text = text.replace("from streamcal._kernels.ispline import", f"from ispline_at_{rev} import")
        elif name not in changed:
            continue
        file = folder / f"{name}_at_{rev}.py"
        if not file.exists() or file.read_text(encoding="utf-8") != text:
            file.write_text(text, encoding="utf-8")
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        spec = importlib.util.spec_from_file_location(f"{name}_at_{rev}", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules["ispline"], modules["ispline_stream"]


def river_face_at(rev: str, old_ks):
    """The module ``streamcal/spline/_river.py`` at git revision ``rev`` (None where it has
    none), on that revision's stream kernels (``old_ks``, when they differ from today's), with
    its own table of compiled entry points (the one it imports is shared by name with today's
    face, whose kernels may differ)."""
    path = "streamcal/spline/_river.py"
    try:
        text = source_at(rev, path)
    except subprocess.CalledProcessError:
        return None
    module = types.ModuleType(f"ispline_river_at_{rev}")
    exec(compile(text, f"{rev}:{path}", "exec"), module.__dict__)
    if old_ks is not None:
        module._ks = old_ks
    entries = {}

    def entry_call(name, kernel, args):
        found = entries.get(name)
        if found is None:
            found = entries[name] = _config.entry_point(kernel, *args)
        return found(*args)

    module.entry_call = entry_call
    module.ENTRIES = entries  # where its first calls find their entry points (else today's face's)
    return module


def load_at(rev: str, name: str, text: str, *, importable: bool = False):
    """A module ``name`` made of a revision's source ``text``, written to a file in a temporary
    folder (numba caches a kernel by its file) and loaded; ``importable`` puts that folder on the
    path, for the modules that import it by name."""
    folder = Path(tempfile.gettempdir()) / f"streamcal_bench_ispline_at_{rev}"
    folder.mkdir(exist_ok=True)
    file = folder / f"{name}.py"
    if not file.exists() or file.read_text(encoding="utf-8") != text:
        file.write_text(text, encoding="utf-8")
    if importable and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def prior_river_at(rev: str, kips, old_k):
    """The module ``streamcal/_kernels/ispline_prior_river.py`` at git revision ``rev`` on the prior's
    stream kernels ``kips`` of that revision (and ``old_k`` where the I-spline kernels differ), loaded
    from a file in a temporary folder; None where that revision has none."""
    path = "streamcal/_kernels/ispline_prior_river.py"
    try:
        text = source_at(rev, path)
    except subprocess.CalledProcessError:
        return None
    text = text.replace("from streamcal._kernels.ispline_prior_stream import", f"from {kips.__name__} import")
    if old_k is not None:
        text = text.replace("from streamcal._kernels.ispline import", f"from {old_k.__name__} import")
    return load_at(rev, f"ispline_prior_river_at_{rev}", text)


def prior_refit_at(rev: str, old_k):
    """The module ``streamcal/spline/_prior_refit.py`` at git revision ``rev`` (None where it has none
    or it is today's), on that revision's ``ispline_prior_stream`` kernels (loaded from a file in a
    temporary folder where they differ from today's, on ``old_k`` where the I-spline kernels differ)."""
    path = "streamcal/spline/_prior_refit.py"
    try:
        text = source_at(rev, path)
        kernel_text = source_at(rev, "streamcal/_kernels/ispline_prior_stream.py")
    except subprocess.CalledProcessError:
        return None
    today = (ROOT / "streamcal/_kernels/ispline_prior_stream.py").read_text(encoding="utf-8")
    incr = prior_incr_at(rev, old_k)
    if text == (ROOT / path).read_text(encoding="utf-8") and kernel_text == today and incr is None:
        return None
    kips = sys.modules["streamcal._kernels.ispline_prior_stream"]
    if kernel_text != today or old_k is not None or incr is not None:
        if old_k is not None:
            kernel_text = kernel_text.replace("from streamcal._kernels.ispline import", f"from {old_k.__name__} import")
        if incr is not None:
            kernel_text = kernel_text.replace("from streamcal._kernels.ispline_prior_incr import", f"from {incr} import")
        folder = Path(tempfile.gettempdir()) / f"streamcal_bench_ispline_at_{rev}"
        folder.mkdir(exist_ok=True)
        file = folder / f"ispline_prior_stream_at_{rev}.py"
        if not file.exists() or file.read_text(encoding="utf-8") != kernel_text:
            file.write_text(kernel_text, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(f"ispline_prior_stream_at_{rev}", file)
        kips = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = kips
        spec.loader.exec_module(kips)
    module = types.ModuleType(f"ispline_prior_refit_at_{rev}")
    exec(compile(text, f"{rev}:{path}", "exec"), module.__dict__)
    module._kips = kips
    return module


def prior_incr_at(rev: str, old_k):
    """The name of the module ``streamcal/_kernels/ispline_prior_incr.py`` at git revision ``rev``, loaded
    from a file in a temporary folder (on ``old_k`` where the I-spline kernels differ), or None where
    it is today's and the I-spline kernels are too."""
    path = "streamcal/_kernels/ispline_prior_incr.py"
    try:
        text = source_at(rev, path)
    except subprocess.CalledProcessError:
        return None
    if text == (ROOT / path).read_text(encoding="utf-8") and old_k is None:
        return None
    if old_k is not None:
        text = text.replace("from streamcal._kernels.ispline import", f"from {old_k.__name__} import")
    return load_at(rev, f"ispline_prior_incr_at_{rev}", text, importable=True).__name__


def calibrator_at(rev: str):
    """The ``ISplineCalibrator`` class of ``streamcal/spline/calibrator.py`` at git revision ``rev``,
    on the I-spline kernels of that revision (``kernels_at``), its refit under the score prior
    (``prior_refit_at``) and, where those differ, the packed state's layout of that revision;
    whether the kernels differ from today's."""
    path = "streamcal/spline/calibrator.py"
    module = types.ModuleType(f"ispline_at_{rev}")
    old_k, old_ks = kernels_at(rev)
    face = river_face_at(rev, old_ks)
    prior = prior_refit_at(rev, old_k if old_ks is not None else None)
    if face is not None and prior is not None and hasattr(face, "_kpr"):
        # the face's one call per pair under the prior, on that revision's refit kernels
        river = prior_river_at(rev, prior._kips, old_k if old_ks is not None else None)
        if river is not None:
            face._kpr = river
    today = sys.modules.get("streamcal.spline._river")
    today_prior = sys.modules.get("streamcal.spline._prior_refit")
    # the calibrator of that revision imports its own river face and prior refit, by module name
    # and as the package's attributes (``from streamcal.spline import _river``, whose table of the
    # class's own steps it fills: filled into today's face, today's calibrator would take the
    # generic path there)
    package = sys.modules["streamcal.spline"]
    if face is not None:
        sys.modules["streamcal.spline._river"] = package._river = face
    if prior is not None:
        sys.modules["streamcal.spline._prior_refit"] = package._prior_refit = prior
    try:
        exec(compile(source_at(rev, path), f"{rev}:{path}", "exec"), module.__dict__)
    finally:
        sys.modules["streamcal.spline._river"] = package._river = today
        sys.modules["streamcal.spline._prior_refit"] = package._prior_refit = today_prior
    if prior is not None:
        module._kips = prior._kips
    if old_ks is not None:
        module._k, module._ks = old_k, old_ks
    if old_ks is not None and "packed_state" in module.__dict__:
        # the packed state's layout at that revision, for its kernels' sections
        state_path = "streamcal/spline/stream_state.py"
        state = types.ModuleType(f"ispline_stream_state_at_{rev}")
        exec(compile(source_at(rev, state_path), f"{rev}:{state_path}", "exec"), state.__dict__)
        state._ks = old_ks
        module.packed_state = state.packed_state
    return module.ISplineCalibrator, old_ks is not None


def prepared(cls, s, y, warmup):
    cal = cls()
    cal.prequential(s[:warmup], y[:warmup])
    return cal


def time_prequential(cal, s, y):
    t0 = time.process_time()
    out = cal.prequential(s, y)
    return time.process_time() - t0, out


def time_river(cal, s, y):
    xs = [{"s": float(v)} for v in s]
    ys = [bool(v) for v in y]
    out = []
    t0 = time.process_time()
    for x, label in zip(xs, ys, strict=True):
        out.append(cal.predict_proba_one(x)[True])
        cal.learn_one(x, label)
    return time.process_time() - t0, out


def calibrated_stream(n, seed):
    """Scores of a logistic model and labels drawn with the score as their probability (about 8 %
    positive): the score prior holds."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, n)
    scores = 1.0 / (1.0 + np.exp(-z))
    return scores, rng.uniform(size=n) < scores


def naive_prior_reference(cal, s, y):
    """The probabilities of ``prequential`` on ``s``, ``y`` from ``cal``'s state (a copy is run), each
    refitted naively before its event: the score prior's strength and pseudo-counts
    (``streamcal._prior.score_prior``), then the Python fit ``fit_distinct`` from its cold start with
    the knot count of the data's weight, kept within the served bounds."""
    cal = copy.deepcopy(cal)
    out = np.empty(s.size)
    for i in range(s.size):
        centres, pos, neg = cal.histogram()
        data_weight = float(pos.sum() + neg.sum())
        kappa, prior_pos, prior_neg = score_prior(centres, pos, neg, True, float(cal.llr_pseudo_count), floor="thinned")
        if kappa > 0.0:
            pos, neg = pos + prior_pos, neg + prior_neg
        pos, neg, total, _ = unit_scaled(pos, neg)
        fitted = fit_scaled_histogram(centres, pos, neg, total, cal.order, default_n_knots(data_weight), None, None)
        low, high = proba_bounds(total, float(cal.llr_pseudo_count))
        out[i] = np.clip(evaluate_map(s[i : i + 1], fitted.knots, cal.order, fitted.bspline_coef)[0], low, high)
        cal.update(s[i : i + 1], y[i : i + 1])
    return out


def main_prior(args):
    """``--state prior``: today's exact default (and the code at ``--old``) where the prior holds."""
    n = 400 if args.n is None else args.n
    warmup = 4_000 if args.warmup is None else args.warmup
    s, y = calibrated_stream(warmup + n, seed=3)
    ts, ty = s[warmup:], y[warmup:]
    n_river = max(1, n // 4)
    classes = {"today": ISplineCalibrator}
    kernels_differ = False
    if args.old:
        classes["before"], kernels_differ = calibrator_at(args.old)
    warmed = {}
    for name, cls in classes.items():  # the warm-up once (refit every 50 events), then copies
        cal = cls(refit_every=50)
        cal.prequential(s[:warmup], y[:warmup])
        cal.refit_every = None
        warmed[name] = cal
        time_prequential(copy.deepcopy(cal), ts[:5], ty[:5])  # compile both faces
        time_river(copy.deepcopy(cal), ts[:5], ty[:5])
    reference = naive_prior_reference(warmed["today"], ts, ty)
    rates = {name: [] for name in classes}
    river = {name: [] for name in classes}
    gap, gap_llr, kappa, gap_ref = 0.0, 0.0, None, 0.0
    for r in range(args.rounds):
        order = list(classes)[r % len(classes) :] + list(classes)[: r % len(classes)]
        outs, faces = {}, {}
        for name in order:
            cal = copy.deepcopy(warmed[name])
            cpu, outs[name] = time_prequential(cal, ts, ty)
            rates[name].append(n / cpu)
            kappa = cal.prior_strength if name == "today" else kappa
        for name in order:  # ``--river-repeats`` runs from the same state: the same outputs, more CPU time
            cpu = 0.0
            for i in range(args.river_repeats):
                seconds, served = time_river(copy.deepcopy(warmed[name]), ts[:n_river], ty[:n_river])
                cpu += seconds
                if i == 0:
                    faces[name] = served
                elif served != faces[name]:
                    raise AssertionError(f"{name}: the river face's runs from the same state differ")
            river[name].append(args.river_repeats * n_river / cpu)
        gap_ref = max(gap_ref, float(np.abs(outs["today"][0] - reference).max()))
        gap_ref = max(gap_ref, float(np.abs(np.array(faces["today"]) - reference[:n_river]).max()))
        if not gap_ref <= TOL:
            raise AssertionError(f"the probabilities differ from the naive full refit by {gap_ref:.3g}")
        if args.old:
            # not asserted: the code before may count its knots by another rule (the pseudo-counts'
            # total before 2026-11-29), its own refit then a different fit
            gap = max(gap, float(np.abs(outs["before"][0] - outs["today"][0]).max()))
            gap = max(gap, float(np.max(np.abs(np.array(faces["before"]) - np.array(faces["today"])))))
            gap_llr = max(gap_llr, float(np.abs(outs["before"][1] - outs["today"][1]).max()))
    new, r_new = float(np.median(rates["today"])), float(np.median(river["today"]))
    print(
        f"ISplineCalibrator exact default, score prior in force (calibrated stream, warm-up {warmup:,} "
        f"refitting every 50), {n:,} events, {args.rounds} rounds, CPU time (median); prior strength {kappa:.0f}"
    )
    print(f"  prequential:              {new:10,.0f} events/s")
    print(f"  river face:               {r_new:10,.0f} pairs/s")
    print(f"  both within {gap_ref:.2g} of the naive full refit (cold start, the data's knot count), every round")
    if args.old:
        before, r_before = float(np.median(rates["before"])), float(np.median(river["before"]))
        paired = float(np.median(np.array(rates["today"]) / np.array(rates["before"])))
        r_paired = float(np.median(np.array(river["today"]) / np.array(river["before"])))
        kernels = "its own kernels" if kernels_differ else "today's kernels (the same source)"
        print(f"  the code at {args.old}, on {kernels}:")
        print(
            f"  prequential, at {args.old}: {before:10,.0f} events/s   ratio {new / before:6.2f}x, "
            f"median of the rounds' ratios {paired:.2f}x"
        )
        print(
            f"  river face, at {args.old}:  {r_before:10,.0f} pairs/s    ratio {r_new / r_before:6.2f}x, "
            f"median of the rounds' ratios {r_paired:.2f}x"
        )
        print(f"  probabilities within {gap:.2g} of the code before (LLRs within {gap_llr:.2g})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=None, help="events timed (20,000; 400 with --state prior)")
    parser.add_argument(
        "--warmup", type=int, default=None, help="events learned first (20,000; 4,000 with --state prior)"
    )
    parser.add_argument("--old", metavar="REV", help="also time the calibrator of this git revision")
    parser.add_argument(
        "--river-repeats", type=int, default=1, help="with --state prior: river face runs per round (each from the same state)"
    )
    parser.add_argument(
        "--state", choices=("click", "prior"), default="click", help="the click-like stream, or the prior in force"
    )
    args = parser.parse_args()
    if args.river_repeats < 1:
        parser.error(f"--river-repeats {args.river_repeats}: expected a whole number >= 1")
    streamcal.use_compiled_kernels()
    if args.state == "prior":
        main_prior(args)
        return
    args.n = 20_000 if args.n is None else args.n
    args.warmup = 20_000 if args.warmup is None else args.warmup
    s, y = click_stream(args.warmup + args.n, seed=3)
    ws, wy = s[: args.warmup], y[: args.warmup]
    ts, ty = s[args.warmup :], y[args.warmup :]
    n_old = max(1, args.n // 10)  # the engine's loop is slow: a tenth of the events
    n_river = max(1, args.n // 5)
    classes = {"incremental": ISplineCalibrator, "full": FullRefitLoop, "engine": EngineLoop}
    kernels_differ = False
    if args.old:
        classes["before"], kernels_differ = calibrator_at(args.old)
    for cls in classes.values():  # compile and warm both faces
        time_prequential(prepared(cls, ws, wy, args.warmup), ts[:200], ty[:200])
        time_river(prepared(cls, ws, wy, args.warmup), ts[:20], ty[:20])
    sizes = {"incremental": args.n, "full": args.n // 2, "engine": n_old, "before": args.n}
    rates = {name: [] for name in classes}
    river = {name: [] for name in classes}
    kappa = None
    gap_before = 0.0
    for r in range(args.rounds):
        order = list(classes)[r % len(classes) :] + list(classes)[: r % len(classes)]
        outs = {}
        for name in order:
            cal = prepared(classes[name], ws, wy, args.warmup)
            cpu, outs[name] = time_prequential(cal, ts[: sizes[name]], ty[: sizes[name]])
            rates[name].append(sizes[name] / cpu)
            kappa = cal.prior_strength if name == "incremental" else kappa
        (p_new, l_new), (p_full, l_full), (p_old, l_old) = (outs[k] for k in ("incremental", "full", "engine"))
        if args.old:
            same = np.array_equal(outs["before"][0], p_new) and np.array_equal(outs["before"][1], l_new)
            gap = max(np.abs(outs["before"][0] - p_new).max(), np.abs(outs["before"][1] - l_new).max())
            # the code before on the same kernels gives the same bits; on its own kernels, the
            # incremental refit's rounding: both within TOL of the full refit
            if not (same or (kernels_differ and gap <= TOL)):
                raise AssertionError(f"prequential differs from the code at {args.old} by {gap:.3g}")
            gap_before = max(gap_before, gap)
        if not (np.array_equal(p_full[:n_old], p_old) and np.array_equal(l_full[:n_old], l_old)):
            raise AssertionError("the compiled loop's full refit and the engine's loop disagree")
        worst = max(np.abs(p_new[: p_full.size] - p_full).max(), np.abs(l_new[: l_full.size] - l_full).max())
        if not worst <= TOL:
            raise AssertionError(f"the incremental refit is {worst:.3g} from the full refit")
        faces = {}
        for name in order:
            m = n_river if name in ("incremental", "before") else n_old
            cal = prepared(classes[name], ws, wy, args.warmup)
            cpu, faces[name] = time_river(cal, ts[:m], ty[:m])
            river[name].append(m / cpu)
        if faces["engine"] != faces["full"][:n_old]:
            raise AssertionError("the river face: the compiled loop's full refit and the engine's loop disagree")
        if args.old:
            gap = float(np.max(np.abs(np.array(faces["before"]) - np.array(faces["incremental"]))))
            if not (faces["before"] == faces["incremental"] or (kernels_differ and gap <= TOL)):
                raise AssertionError(f"the river face differs from the code at {args.old} by {gap:.3g}")
            gap_before = max(gap_before, gap)
    new, full, old = (float(np.median(rates[k])) for k in ("incremental", "full", "engine"))
    r_new, r_full, r_old = (float(np.median(river[k])) for k in ("incremental", "full", "engine"))
    print(
        f"ISplineCalibrator exact default, click-like stream, warm-up {args.warmup:,}, "
        f"{args.rounds} rounds, CPU time (median); prior strength at the end {kappa}"
    )
    print(f"  prequential, incremental refit:    {new:12,.0f} events/s  (within {TOL:g} of the full refit)")
    print(
        f"  prequential, loop's full refit:    {full:12,.0f} events/s   ratio {new / full:6.1f}x (bit for bit the engine)"
    )
    print(f"  prequential, the engine's loop:    {old:12,.0f} events/s   ratio {new / old:6.1f}x")
    print(f"  river face, incremental refit:     {r_new:12,.0f} pairs/s")
    print(f"  river face, loop's full refit:     {r_full:12,.0f} pairs/s    ratio {r_new / r_full:6.1f}x")
    print(f"  river face, the engine's loop:     {r_old:12,.0f} pairs/s    ratio {r_new / r_old:6.1f}x")
    if args.old:
        before, r_before = float(np.median(rates["before"])), float(np.median(river["before"]))
        # each round's own ratio: the two runs of a round are close in time, so a burst of other
        # work on a shared machine moves them together more often than it moves the medians
        paired = float(np.median(np.array(rates["incremental"]) / np.array(rates["before"])))
        r_paired = float(np.median(np.array(river["incremental"]) / np.array(river["before"])))
        same = "bit for bit" if gap_before == 0.0 else f"within {gap_before:.2g}"
        kernels = "its own kernels" if kernels_differ else "today's kernels (the same source)"
        print(f"  the code at {args.old}, on {kernels}:")
        print(
            f"  prequential, the code at {args.old}: {before:12,.0f} events/s   ratio {new / before:6.2f}x, "
            f"median of the rounds' ratios {paired:.2f}x ({same})"
        )
        print(
            f"  river face, the code at {args.old}:  {r_before:12,.0f} pairs/s    ratio {r_new / r_before:6.2f}x, "
            f"median of the rounds' ratios {r_paired:.2f}x ({same})"
        )
    print(
        f"  goals: prequential >= {GOAL_PREQUENTIAL:,} ({'met' if new >= GOAL_PREQUENTIAL else 'not met'}), "
        f"river face >= {GOAL_RIVER:,} ({'met' if r_new >= GOAL_RIVER else 'not met'})"
    )


if __name__ == "__main__":
    main()
