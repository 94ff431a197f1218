"""Take state files apart and put them back together with valid checksums (for the tests that
craft damaged or hostile files: someone who edits a file can always recompute its checksums)."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import zipfile

import numpy as np


def unpack(data: bytes) -> tuple[dict, dict, dict]:
    """``(manifest, arrays, pickles)`` of a state file: the JSON, the arrays by name, the pickle bytes."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        manifest = json.loads(zf.read("streamcal.json"))
        arrays = {name: np.load(io.BytesIO(zf.read(f"arrays/{name}.npy"))) for name in manifest["arrays"]}
        pickles = {name: zf.read(f"pickles/{name}.pkl") for name in manifest["pickles"]}
    return manifest, arrays, pickles


_NPY: dict = {}  # id(array) -> (array, its .npy bytes): the unchanged arrays of many mutated files


def npy_bytes(arr: np.ndarray) -> bytes:
    known = _NPY.get(id(arr))
    if known is not None and known[0] is arr:
        return known[1]
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    if len(_NPY) > 10_000:
        _NPY.clear()
    _NPY[id(arr)] = (arr, buf.getvalue())
    return buf.getvalue()


def pack(manifest: dict, arrays: dict, pickles: dict | None = None, *, raw: dict | None = None) -> bytes:
    """A state file of these parts, every checksum, dtype and shape in the manifest recomputed.

    ``raw`` maps member names to bytes stored as they are (listed arrays keep their manifest entry).
    """
    manifest = copy.deepcopy(manifest)
    members = {}
    for name, arr in arrays.items():
        data = (raw or {}).get(f"arrays/{name}.npy") or npy_bytes(arr)
        members[f"arrays/{name}.npy"] = data
        manifest["arrays"][name] = {
            "dtype": arr.dtype.str,
            "shape": list(arr.shape),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    for name, data in (pickles or {}).items():
        members[f"pickles/{name}.pkl"] = data
        manifest["pickles"][name]["sha256"] = hashlib.sha256(data).hexdigest()
    for name, data in (raw or {}).items():
        members.setdefault(name, data)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("streamcal.json", json.dumps(manifest))
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def objects(node, path: str = "learner"):
    """``(path, node)`` of every ``__object__`` node of a manifest's tree, outermost first."""
    if isinstance(node, dict):
        if "__object__" in node:
            yield path, node
            for part in ("params", "state"):
                for key, value in node[part].items():
                    yield from objects(value, f"{path}.{key}")
            return
        for key, value in node.items():
            yield from objects(value, f"{path}[{key!r}]")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from objects(value, f"{path}[{i}]")


def array_of(obj_node: dict, attr: str) -> str | None:
    """The array member name behind attribute ``attr`` of an ``__object__`` node, if it is an array."""
    value = obj_node["state"].get(attr, obj_node["params"].get(attr))
    if isinstance(value, dict):
        for tag in ("__ndarray__", "__floatlist__", "__npscalar__"):
            if tag in value:
                return value[tag]
    return None


# ---------------------------------------------------------------------------------------- the child
# A batch of state files runs in a child process (``child_main``): a file that crashes the
# interpreter (a kernel writing out of bounds) ends the child, not pytest. Before each file the
# child prints ``BEGIN i`` and after it ``END i <status>``, flushed, so a crash names its file.
#
# Status: ``refused`` (StateFileError), ``ok`` (loaded identically and every operation gave
# finite probabilities in [0, 1] and finite LLRs), ``bad ...`` (anything else).


def canonical(data: bytes):
    """The learner a state file describes, with object ids and array names replaced by their order
    of appearance and arrays by ``(dtype, shape, bytes)``: equal for files that describe one learner."""
    manifest, arrays, _ = unpack(data)
    ids: dict = {}

    def walk(node):
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        pairs = node.get("__dict__")
        if len(node) == 1 and isinstance(pairs, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and not p[0].startswith("__") for p in pairs
        ):  # a dict of plain string keys, written as pairs: the same dict as the plain form
            return {k: walk(v) for k, v in pairs}
        out = {}
        for key, value in node.items():
            if key in ("__ndarray__", "__floatlist__", "__npscalar__") and value in arrays:
                a = arrays[value]
                out[key] = (a.dtype.str, a.shape, a.tobytes())
            elif key in ("id", "__ref__") and isinstance(value, int):
                out[key] = ids.setdefault(value, len(ids))
            else:
                out[key] = walk(value)
        return out

    return walk(manifest["root"])


def same_file_contents(a: bytes, b: bytes) -> str | None:
    """``None`` when two state files describe the same learner, else what differs."""
    return None if canonical(a) == canonical(b) else "the learner description or its arrays differ"


def _proba(values, what: str) -> None:
    v = np.asarray(values, dtype=np.float64)
    if not (np.isfinite(v).all() and (v >= 0.0).all() and (v <= 1.0).all()):
        raise AssertionError(f"{what} gave probabilities outside [0, 1]: {v[~((v >= 0) & (v <= 1))][:3]}")


def _finite(values, what: str) -> None:
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise AssertionError(f"{what} gave non-finite values: {v[~np.isfinite(v)][:3]}")


def exercise(obj, rng) -> None:
    """Run the learner's operations on fresh inputs; raise AssertionError for invalid outputs."""
    from river import base

    from streamcal._streaming import StreamingCalibrator
    from streamcal.compose import CalibratedClassifier
    from streamcal.gev.regression import GEVCanonicalRegression
    from streamcal.gev.streaming import GEVCanonicalClassifier
    from streamcal.isotonic.batch import IsotonicCalibrator
    from streamcal.keyed import KeyedCalibrator
    from streamcal.multiclass.streaming import _ScoreDictCalibrator

    if isinstance(obj, KeyedCalibrator):
        hist = obj.global_calibrator.window_histogram
        kinds = {type(k) for k in obj.keys()}  # noqa: SIM118 - keys() is a method, the calibrator is not a dict
        pool = ["a", "b", "c", "d", "e"] if str in kinds else [0, 1, 2, 3, 7]

        def keyed_batch(n):
            s = rng.uniform(0.0, 1.0, size=n)
            start = hist.last_time()
            start = start if np.isfinite(start) else 0.0
            t = start + np.cumsum(rng.exponential(size=n)) if hist.uses_times else None
            keys = [pool[i] for i in rng.integers(0, len(pool), size=n)]
            return keys, s, rng.uniform(size=n) < 0.4, rng.choice([0.5, 1.0, 2.0], size=n), t

        keys, s, y, w, t = keyed_batch(40)
        _proba(obj.predict_proba(keys, s), "predict_proba")
        _finite(obj.predict_llr(keys, s), "predict_llr")
        for i in range(5):
            x = {obj.key_key: keys[i], "score": float(s[i])}
            _proba([obj.predict_proba_one(x)[True]], "predict_proba_one")
            _finite([obj.predict_llr_one(x)], "predict_llr_one")
            obj.learn_one(x, bool(y[i]), w=float(w[i]), t=None if t is None else float(t[i]))
        keys, s, y, w, t = keyed_batch(200)
        p, llr = obj.prequential(keys, s, y, weights=w, times=t)
        _proba(p, "prequential")
        _finite(llr, "prequential LLR")
        keys, s, y, w, t = keyed_batch(60)
        mask = rng.uniform(size=60) < 0.5
        p, llr = obj.process(keys, s, y, mask, weights=w, times=t)
        _proba(p[~mask], "process")
        _finite(llr[~mask], "process LLR")
        for key in obj.keys()[:3]:
            obj.key_state(key)
            obj.export_key(key)
    elif isinstance(obj, StreamingCalibrator):
        hist = obj.window_histogram
        lo, hi = hist.layout.score_low, hist.layout.score_high
        lo, hi = (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else (-1.0, 2.0)

        def batch(n):
            s = rng.uniform(lo, hi, size=n)
            y = rng.uniform(size=n) < 0.4
            w = rng.choice([0.5, 1.0, 2.0], size=n)
            start = hist.last_time()
            start = start if np.isfinite(start) else 0.0
            t = start + np.cumsum(rng.exponential(size=n)) if hist.uses_times else None
            return s, y, w, t

        s, y, w, t = batch(40)
        _proba(obj.predict_proba(s), "predict_proba")
        _finite(obj.predict_llr(s), "predict_llr")
        for i in range(5):
            x = {"score": float(s[i])} if obj.score_key is None else {obj.score_key: float(s[i])}
            _proba([obj.predict_proba_one(x)[True]], "predict_proba_one")
            _finite([obj.predict_llr_one(x)], "predict_llr_one")
            obj.learn_one(x, bool(y[i]), w=float(w[i]), t=None if t is None else float(t[i] + 0.0))
        s, y, w, t = batch(40)
        p, llr = obj.prequential(s, y, weights=w, times=t)
        _proba(p, "prequential")
        _finite(llr, "prequential LLR")
        s, y, w, t = batch(150)
        obj.update(s, y, weights=w, times=t)
        s, y, w, t = batch(60)
        mask = rng.uniform(size=60) < 0.5
        p, llr = obj.process(s, y, mask, weights=w, times=t)
        _proba(p[~mask], "process")
        _finite(llr[~mask], "process LLR")
        _proba(obj.predict_proba(s), "predict_proba after learning")
        _finite([obj.window_weight, obj.n_learned], "window_weight")
    elif isinstance(obj, _ScoreDictCalibrator):
        classes = list(obj.classes) if obj.classes is not None else [0, 1, 2]
        for i in range(30):
            p = rng.dirichlet(np.ones(len(classes)))
            x = {c: float(v) for c, v in zip(classes, p)}
            out = obj.predict_proba_one(x)
            _proba(list(out.values()), "predict_proba_one")
            obj.learn_one(x, classes[i % len(classes)])
        if obj.classes is not None:
            scores = rng.dirichlet(np.ones(len(classes)), size=50)
            labels = [classes[i % len(classes)] for i in range(50)]
            obj.update(scores, labels)
            _proba(obj.predict_proba(scores), "predict_proba")
    elif isinstance(obj, CalibratedClassifier):
        for i in range(30):
            x = {"a": float(rng.normal()), "b": float(rng.normal())}
            _proba(list(obj.predict_proba_one(x).values()), "predict_proba_one")
            _finite([obj.predict_llr_one(x)], "predict_llr_one")
            obj.learn_one(x, bool(i % 3 == 0))
    elif isinstance(obj, IsotonicCalibrator):
        if not hasattr(obj, "thresholds_"):
            return
        grid = np.linspace(-0.5, 1.5, 41)
        _proba(obj.predict_proba(grid), "predict_proba")
        llr = obj.predict_llr(grid)
        if np.isnan(llr).any():
            raise AssertionError("predict_llr gave NaN")
    elif isinstance(obj, GEVCanonicalRegression):
        if not hasattr(obj, "coef_"):
            return
        X = rng.normal(size=(30, obj.n_features_in_))
        _proba(obj.predict_proba(X), "predict_proba")
    elif isinstance(obj, GEVCanonicalClassifier):
        for i in range(20):
            x = {"a": float(rng.normal()), "b": float(rng.normal())}
            _proba([obj.predict_proba_one(x)[True]], "predict_proba_one")
            obj.learn_one(x, bool(i % 2))
    elif isinstance(obj, base.Base) and hasattr(obj, "update") and hasattr(obj, "get"):  # a metric
        try:
            for i in range(10):
                p = float(rng.uniform())
                obj.update(bool(i % 2), p)
            obj.get()
        except Exception:  # pure-Python sums: a damaged metric may raise, it cannot crash
            pass


def run_file(data: bytes, allow_pickle: bool, rng) -> str:
    from streamcal import persist

    try:
        obj = persist.from_bytes(data, allow_pickle=allow_pickle)
    except persist.StateFileError:
        return "refused"
    except Exception as exc:
        return f"bad: load raised {type(exc).__name__}: {exc}"
    try:
        differs = same_file_contents(data, persist.to_bytes(obj))
    except Exception as exc:
        return f"bad: saving the loaded learner raised {type(exc).__name__}: {exc}"
    if differs:
        return f"bad: loaded, but not identically ({differs})"
    try:
        exercise(obj, rng)
    except AssertionError as exc:
        return f"bad: {exc}"
    except (ValueError, OverflowError, MemoryError):
        # a loaded learner may refuse work as a constructed one does (a parameter that asks for
        # too much memory, a fit that cannot start); other exceptions mean an inconsistent state
        return "ok"
    except Exception as exc:
        return f"bad: an operation raised {type(exc).__name__}: {exc}"
    return "ok"


def child_main(batch_path: str, start: int) -> None:
    """Run the files of a pickled batch ``[(label, data, allow_pickle), ...]`` from ``start`` on."""
    import pickle
    import sys
    import warnings

    warnings.simplefilter("ignore")
    with open(batch_path, "rb") as f:
        batch = pickle.load(f)
    out = sys.stdout
    for i in range(start, len(batch)):
        _, data, allow_pickle = batch[i]
        out.write(f"BEGIN {i}\n")
        out.flush()
        status = run_file(data, allow_pickle, np.random.default_rng(i))
        out.write(f"END {i} {status}\n".replace("\n", " ").rstrip() + "\n")
        out.flush()


def run_batch(batch: list, workdir) -> list[tuple[str, str]]:
    """``(label, status)`` of every file of ``batch``, run in child processes; a file that ends its
    child gets the status ``crash (exit code)``, and the next child resumes after it."""
    import os
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    path = Path(workdir) / "batch.pkl"
    with open(path, "wb") as f:
        pickle.dump(batch, f)
    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(here).parent), here, env.get("PYTHONPATH", "")])
    status: dict[int, str] = {}
    start = 0
    while start < len(batch):
        code = f"from state_files import child_main; child_main({str(path)!r}, {start})"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
        begun = None
        for line in proc.stdout.splitlines():
            kind, _, rest = line.partition(" ")
            number, _, text = rest.partition(" ")
            if kind == "BEGIN":
                begun = int(number)
            elif kind == "END":
                status[int(number)] = text
                begun = None
        if proc.returncode == 0:
            break
        if begun is None:  # died outside any file (import error, ...): report it on the next one
            begun = max(status, default=start - 1) + 1
            if begun >= len(batch):
                break
        status[begun] = f"crash (exit code {proc.returncode}): {proc.stderr[-300:]}"
        start = begun + 1
    return [(batch[i][0], status.get(i, "not run")) for i in range(len(batch))]
