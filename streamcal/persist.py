"""Durable state: save a learner to a versioned, portable file and load it back, bit for bit.

A stream processor checkpoints a calibrator with ``save(learner, path)`` (or ``learner.save(path)``
for classes that mix in :class:`Persistable`) and resumes with ``load(path)``; the restored learner
continues with exactly the outputs the original would have given.

The file is a zip archive (deterministic bytes for a given state) holding

- ``streamcal.json``: the format name and version, the streamcal version that wrote it, and the
  learner as a JSON tree: each object as its class, its constructor parameters (``params``) and
  the rest of its attributes (``state``: the ``_``-prefixed learned state);
- ``arrays/aN.npy``: every numpy array, in numpy's own ``.npy`` format (no pickles);
- ``pickles/pN.pkl``: only for values that have no portable form (see below).

Every member carries a SHA-256 in ``streamcal.json`` on top of the zip's own CRC, so a truncated or
damaged file is rejected with :class:`StateFileError`, and a file written by a newer format version
with :class:`StateVersionError`. Files are written atomically: to a temporary file in the same
directory, flushed and fsynced, then moved over ``path`` with :func:`os.replace`; a reader never
sees a half-written checkpoint, and a crash leaves the previous checkpoint intact.

What is portable: ``None``, bools, ints, floats (bit-exact; NaN and infinities too), strings,
lists, tuples, dicts (any hashable portable keys), sets, deques, ``OrderedDict``, ``Counter``,
``defaultdict`` of a builtin factory, numpy arrays and scalars of numeric dtypes, ``random.Random``
and numpy ``Generator`` states, and objects of streamcal classes (and of river classes whose state
is itself portable). Identity is kept: an object referenced twice is restored once.

**Pickle fallback and security.** A value with no portable form — in practice the state of an
arbitrary river model wrapped by :class:`streamcal.CalibratedClassifier` (river keeps weights in
compiled containers) — is stored with :mod:`pickle` inside the file; the whole foreign object is
pickled, the streamcal parts stay portable. Unpickling can execute arbitrary code, so
:func:`load` refuses such files unless ``allow_pickle=True`` is passed, and names the pickled
parts in the error. Load files with pickles only from sources you trust. ``save(...,
allow_pickle=False)`` makes saving fail instead of falling back.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import importlib
import inspect
import io
import json
import math
import os
import pickle
import random
import struct
import tempfile
import zipfile
from pathlib import Path

import numpy as np

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Persistable",
    "StateFileError",
    "StatePickleError",
    "StateVersionError",
    "from_bytes",
    "load",
    "save",
    "to_bytes",
]

#: Name written into every state file.
FORMAT = "streamcal-state"
#: Version of the file layout this streamcal writes; it reads this version and older ones.
#: 1: streamcal 0.1.0. 2: ``PAVCalibrator`` keeps each block's rate once (its ``_pf`` records grew
#: from 4 to 5 fields); a version-1 PAV state is rebuilt from its histogram on loading, exactly.
#: A streamcal that reads only version 1 refuses version-2 files instead of misreading them.
FORMAT_VERSION = 2

_MANIFEST = "streamcal.json"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed member times: the same state gives the same bytes
# modules whose classes a state file may name (objects are rebuilt without running any code of theirs)
_TRUSTED_MODULES = ("streamcal.", "river.")


class StateFileError(ValueError):
    """The file is not a readable streamcal state file (not one at all, truncated, or damaged)."""


class StateVersionError(StateFileError):
    """The file was written in a newer format version than this streamcal can read."""


class StatePickleError(StateFileError):
    """The file holds pickled objects and ``allow_pickle`` was not given."""


class _NeedsPickle(Exception):
    """Internal: a value inside a foreign object has no portable form."""


def _qualname(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_streamcal(cls: type) -> bool:
    return cls.__module__ == "streamcal" or cls.__module__.startswith("streamcal.")


def _is_river_estimator(cls: type) -> bool:
    if not cls.__module__.startswith("river."):
        return False
    from river import base

    return issubclass(cls, base.Base)


def _is_tagged(key: str) -> bool:
    return key.startswith("__") and key.endswith("__")


# mutable containers whose identity is kept when they are reachable twice
_CONTAINERS = frozenset(
    {
        list,
        dict,
        set,
        collections.deque,
        collections.OrderedDict,
        collections.Counter,
        collections.defaultdict,
        np.ndarray,
    }
)

_BIT_GENERATORS = frozenset({"PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"})

_FACTORIES = {None: None, "int": int, "float": float, "list": list, "dict": dict, "set": set}


# ---------------------------------------------------------------------------------------- encoding
class _Encoder:
    def __init__(self, allow_pickle: bool):
        self.allow_pickle = allow_pickle
        self.arrays: dict[str, np.ndarray] = {}
        self.pickles: dict[str, bytes] = {}
        self.pickled_where: dict[str, dict] = {}
        self.memo: dict[int, int] = {}  # id(object) -> object number
        self.keep: list = []  # keep encoded objects alive so their ids stay unique
        self.strict = 0  # > 0 while encoding a foreign object: unknown values raise _NeedsPickle
        self.shared: set[int] = set()  # ids of containers reachable more than once

    def find_shared(self, root) -> None:
        """Mark the containers reachable by more than one path, so that they are restored once."""
        seen: set[int] = set()
        stack = [root]
        while stack:
            value = stack.pop()
            t = type(value)
            if t in _CONTAINERS:
                if id(value) in seen:
                    self.shared.add(id(value))
                    continue
                seen.add(id(value))
                if t in (dict, collections.OrderedDict, collections.Counter, collections.defaultdict):
                    stack.extend(value.values())
                elif t is not np.ndarray:
                    stack.extend(value)
            elif t is tuple:
                stack.extend(value)
            elif hasattr(value, "__dict__") and (_is_streamcal(t) or _is_river_estimator(t)):
                if id(value) in seen:
                    continue
                seen.add(id(value))
                stack.extend((_object_state(value) or {}).values())

    def encode(self, value, where: str):
        if value is None or isinstance(value, (bool, str)):
            return value
        t = type(value)
        if t in _CONTAINERS and id(value) in self.shared:
            key = id(value)
            if key in self.memo:
                return {"__ref__": self.memo[key]}
            number = len(self.memo)
            self.memo[key] = number
            self.keep.append(value)
            return {"__shared__": self._encode_value(value, t, where), "id": number}
        return self._encode_value(value, t, where)

    def _encode_value(self, value, t: type, where: str):
        if t is int:
            return value
        if t is float:
            if math.isfinite(value):
                return value
            return {"__float__": struct.pack(">d", value).hex()}  # NaN and infinities: the exact 64 bits
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject or value.dtype.kind == "V":
                return self._fallback(value, where)
            name = f"a{len(self.arrays)}"
            self.arrays[name] = value
            return {"__ndarray__": name}
        if isinstance(value, np.generic):
            if value.dtype.hasobject:
                return self._fallback(value, where)
            name = f"a{len(self.arrays)}"
            self.arrays[name] = np.asarray(value)
            return {"__npscalar__": name}
        if t is list:
            if len(value) >= 8 and all(type(v) is float for v in value):  # e.g. bucket cuts kept as a list
                name = f"a{len(self.arrays)}"
                self.arrays[name] = np.array(value, dtype=np.float64)
                return {"__floatlist__": name}
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if t is tuple:
            return {"__tuple__": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if t is dict:
            if all(isinstance(k, str) and not _is_tagged(k) for k in value):
                return {k: self.encode(v, f"{where}[{k!r}]") for k, v in value.items()}
            return {"__dict__": self._pairs(value, where)}
        if t is collections.OrderedDict:
            return {"__odict__": self._pairs(value, where)}
        if t is collections.Counter:
            return {"__counter__": self._pairs(value, where)}
        if t is collections.defaultdict:
            factory = value.default_factory
            name = None if factory is None else getattr(factory, "__name__", None)
            if name not in _FACTORIES or _FACTORIES[name] is not factory:
                return self._fallback(value, where)
            return {"__defaultdict__": self._pairs(value, where), "factory": name}
        if t in (set, frozenset):
            items = [self.encode(v, f"{where}{{}}") for v in value]
            return {"__set__": items, "frozen": t is frozenset}
        if t is collections.deque:
            items = [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return {"__deque__": items, "maxlen": value.maxlen}
        if t is random.Random:
            return {"__random__": self.encode(value.getstate(), f"{where}.state")}
        if t is np.random.Generator and type(value.bit_generator).__name__ in _BIT_GENERATORS:
            bg = value.bit_generator
            return {"__np_generator__": type(bg).__name__, "state": self.encode(bg.state, f"{where}.state")}
        if isinstance(value, type) and (_is_streamcal(value) or value.__module__ in ("builtins",)):
            return {"__class__": _qualname(value)}
        if hasattr(value, "__dict__") and not isinstance(value, type) and (_is_streamcal(t) or _is_river_estimator(t)):
            return self._object(value, where)
        return self._fallback(value, where)

    def _pairs(self, mapping, where: str) -> list:
        return [[self.encode(k, f"{where}.key"), self.encode(v, f"{where}[{k!r}]")] for k, v in mapping.items()]

    def _object(self, obj, where: str):
        key = id(obj)
        if key in self.memo:
            return {"__ref__": self.memo[key]}
        cls = type(obj)
        foreign = not _is_streamcal(cls)
        n_arrays, memo, keep = len(self.arrays), dict(self.memo), len(self.keep)
        number = len(self.memo)
        self.memo[key] = number
        self.keep.append(obj)
        if foreign:
            self.strict += 1
        try:
            attrs = _object_state(obj)
            if attrs is None:
                raise _NeedsPickle
            names = _init_param_names(cls)
            params = {k: self.encode(attrs[k], f"{where}.{k}") for k in names if k in attrs}
            state = {k: self.encode(v, f"{where}.{k}") for k, v in attrs.items() if k not in params}
        except _NeedsPickle:
            if not foreign:
                raise
            for name in list(self.arrays)[n_arrays:]:
                del self.arrays[name]
            self.memo, self.keep = memo, self.keep[:keep]
            self.strict -= 1
            return self._pickle(obj, where)
        if foreign:
            self.strict -= 1
        return {"__object__": _qualname(cls), "id": number, "params": params, "state": state}

    def _fallback(self, value, where: str):
        if self.strict:
            raise _NeedsPickle
        return self._pickle(value, where)

    def _pickle(self, value, where: str):
        if self.strict:
            raise _NeedsPickle
        kind = _qualname(type(value))
        if not self.allow_pickle:
            msg = (
                f"`{where}` ({kind}) has no portable form and would have to be pickled; "
                "pass allow_pickle=True to store it with pickle (see streamcal.persist)."
            )
            raise TypeError(msg)
        name = f"p{len(self.pickles)}"
        self.pickles[name] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self.pickled_where[name] = {"where": where, "type": kind}
        return {"__pickle__": name}


_DEFAULT_GETSTATE = getattr(object, "__getstate__", None)  # Python >= 3.11 has a default


def _object_state(obj) -> dict | None:
    """The attributes pickle would save: ``__getstate__()`` if the class defines one, else ``__dict__``.

    ``None`` when the class's ``__getstate__`` does not return a dict (then only pickle can store it).
    """
    getstate = getattr(type(obj), "__getstate__", None)
    if getstate is None or getstate is _DEFAULT_GETSTATE:
        return vars(obj)
    state = obj.__getstate__()
    return state if type(state) is dict else None


def _init_param_names(cls: type) -> list[str]:
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in signature.parameters.values() if p.kind in kinds and p.name != "self"]


# ---------------------------------------------------------------------------------------- decoding
class _Decoder:
    def __init__(self, arrays: dict, pickles: dict):
        self.arrays = arrays
        self.pickles = pickles
        self.objects: dict[int, object] = {}

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict):
            msg = f"unexpected JSON value {node!r}"
            raise StateFileError(msg)
        tags = [k for k in node if _is_tagged(k)]
        if not tags:
            return {k: self.decode(v) for k, v in node.items()}
        tag = tags[0]
        body = node[tag]
        if tag == "__float__":
            return struct.unpack(">d", bytes.fromhex(body))[0]
        if tag == "__ndarray__":
            return self.arrays[body]
        if tag == "__floatlist__":
            return self.arrays[body].tolist()
        if tag == "__npscalar__":
            return self.arrays[body][()]
        if tag == "__tuple__":
            return tuple(self.decode(v) for v in body)
        if tag == "__dict__":
            return {self.decode(k): self.decode(v) for k, v in body}
        if tag == "__odict__":
            return collections.OrderedDict((self.decode(k), self.decode(v)) for k, v in body)
        if tag == "__counter__":
            return collections.Counter({self.decode(k): self.decode(v) for k, v in body})
        if tag == "__defaultdict__":
            out = collections.defaultdict(_FACTORIES[node["factory"]])
            out.update((self.decode(k), self.decode(v)) for k, v in body)
            return out
        if tag == "__set__":
            items = (self.decode(v) for v in body)
            return frozenset(items) if node["frozen"] else set(items)
        if tag == "__deque__":
            return collections.deque((self.decode(v) for v in body), maxlen=node["maxlen"])
        if tag == "__random__":
            r = random.Random()
            r.setstate(_as_tuples(self.decode(body)))
            return r
        if tag == "__np_generator__":
            if body not in _BIT_GENERATORS:
                msg = f"unknown numpy bit generator {body!r}"
                raise StateFileError(msg)
            bg = getattr(np.random, body)()
            bg.state = self.decode(node["state"])
            return np.random.Generator(bg)
        if tag == "__class__":
            return _resolve_class(body, allow_builtins=True)
        if tag == "__ref__":
            return self.objects[body]
        if tag == "__shared__":
            value = self.decode(body)
            self.objects[node["id"]] = value
            return value
        if tag == "__object__":
            cls = _resolve_class(body)
            obj = cls.__new__(cls)
            self.objects[node["id"]] = obj
            attrs = {k: self.decode(v) for k, v in node["params"].items()}
            attrs.update((k, self.decode(v)) for k, v in node["state"].items())
            if hasattr(cls, "__setstate__"):  # as pickle does: the class rebuilds its caches
                obj.__setstate__(attrs)
            else:
                obj.__dict__.update(attrs)
            return obj
        if tag == "__pickle__":
            return pickle.loads(self.pickles[body])  # only with allow_pickle=True
        msg = f"unknown value tag {tag!r}"
        raise StateFileError(msg)


def _as_tuples(value):
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(v) for v in value)
    return value


def _resolve_class(qualname: str, *, allow_builtins: bool = False) -> type:
    module_name, _, name = qualname.partition(":")
    trusted = module_name == "streamcal" or module_name.startswith(_TRUSTED_MODULES)
    if allow_builtins and module_name == "builtins":
        trusted = True
    if not trusted:
        msg = f"the file names class {qualname!r}, outside streamcal and river; refusing to load it."
        raise StateFileError(msg)
    try:
        obj = importlib.import_module(module_name)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        msg = f"the file names class {qualname!r}, which this installation does not have ({exc})."
        raise StateFileError(msg) from None
    if not isinstance(obj, type):
        msg = f"the file names {qualname!r}, which is not a class."
        raise StateFileError(msg)
    if not allow_builtins and not (_is_streamcal(obj) or _is_river_estimator(obj)):
        msg = f"the file names class {qualname!r}, which is neither a streamcal class nor a river estimator."
        raise StateFileError(msg)
    return obj


# ---------------------------------------------------------------------------------------- the file
def to_bytes(obj, *, allow_pickle: bool = True) -> bytes:
    """The state file of ``obj`` as bytes (what :func:`save` writes).

    Useful to keep checkpoints in a key-value store or a message; read back with
    :func:`from_bytes`.
    """
    from streamcal import __version__

    enc = _Encoder(allow_pickle=allow_pickle)
    # a streamcal learner is read under its lock (streamcal._locking): a consistent snapshot even
    # while other threads use it (its parts change only under the same lock)
    lock = getattr(obj, "_lock", None) if _is_streamcal(type(obj)) else None
    with lock if lock is not None else contextlib.nullcontext():
        enc.find_shared(obj)
        root = enc.encode(obj, "learner")
    members: dict[str, bytes] = {}
    arrays_meta, pickles_meta = {}, {}
    for name, arr in enc.arrays.items():
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        data = buf.getvalue()
        members[f"arrays/{name}.npy"] = data
        arrays_meta[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "sha256": _sha(data)}
    for name, data in enc.pickles.items():
        members[f"pickles/{name}.pkl"] = data
        pickles_meta[name] = {**enc.pickled_where[name], "sha256": _sha(data)}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "streamcal_version": __version__,
        "type": _qualname(type(obj)),
        "arrays": arrays_meta,
        "pickles": pickles_meta,
        "root": root,
    }
    text = json.dumps(manifest, allow_nan=False, separators=(",", ":"), sort_keys=False)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, data in [(_MANIFEST, text.encode("utf-8")), *members.items()]:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def from_bytes(data: bytes, *, allow_pickle: bool = False, where: str = "the data"):
    """Rebuild a learner from the bytes of a state file (see :func:`to_bytes`)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except Exception as exc:  # any failure to parse the container: not a state file, or damaged
        msg = f"{where} is not a streamcal state file, or it is truncated or damaged: {exc}."
        raise StateFileError(msg) from None
    with zf:
        manifest = _read_manifest(zf, where)
        arrays, pickles = {}, {}
        for name, meta in manifest["arrays"].items():
            raw = _read_member(zf, f"arrays/{name}.npy", meta, where)
            try:
                arrays[name] = np.load(io.BytesIO(raw), allow_pickle=False)
            except Exception as exc:  # a .npy header or body that numpy cannot parse
                msg = f"{where} is damaged: array {name!r} cannot be read ({exc})."
                raise StateFileError(msg) from None
        if manifest["pickles"] and not allow_pickle:
            parts = "; ".join(f"`{m['where']}` ({m['type']})" for m in manifest["pickles"].values())
            msg = (
                f"{where} holds pickled objects: {parts}. Unpickling can run arbitrary code; pass "
                "allow_pickle=True only if you trust the file."
            )
            raise StatePickleError(msg)
        for name, meta in manifest["pickles"].items():
            pickles[name] = _read_member(zf, f"pickles/{name}.pkl", meta, where)
    try:
        return _Decoder(arrays, pickles).decode(manifest["root"])
    except StateFileError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        msg = f"{where} is damaged: its learner description cannot be decoded ({type(exc).__name__}: {exc})."
        raise StateFileError(msg) from None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_manifest(zf: zipfile.ZipFile, where: str) -> dict:
    try:
        raw = zf.read(_MANIFEST)
    except KeyError:
        msg = f"{where} is a zip file but not a streamcal state file (no {_MANIFEST!r} member)."
        raise StateFileError(msg) from None
    except Exception as exc:  # bad CRC, bad header, unsupported zip features, ...
        msg = f"{where} is damaged: {exc}."
        raise StateFileError(msg) from None
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        msg = f"{where} is damaged: its {_MANIFEST!r} is not valid JSON ({exc})."
        raise StateFileError(msg) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        msg = f"{where} is not a streamcal state file (format {manifest.get('format')!r})."
        raise StateFileError(msg)
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        msg = f"{where} is damaged: format version {version!r} is not a positive integer."
        raise StateFileError(msg)
    if version > FORMAT_VERSION:
        msg = (
            f"{where} was written in state format version {version} (by streamcal "
            f"{manifest.get('streamcal_version')!r}); this streamcal reads versions up to "
            f"{FORMAT_VERSION}. Upgrade streamcal to load it."
        )
        raise StateVersionError(msg)
    for key in ("arrays", "pickles", "root"):
        if key not in manifest:
            msg = f"{where} is damaged: its {_MANIFEST!r} has no {key!r} entry."
            raise StateFileError(msg)
    return manifest


def _read_member(zf: zipfile.ZipFile, name: str, meta: dict, where: str) -> bytes:
    try:
        data = zf.read(name)
    except KeyError:
        msg = f"{where} is damaged: member {name!r} is missing."
        raise StateFileError(msg) from None
    except Exception as exc:  # bad CRC, bad header, unsupported zip features, ...
        msg = f"{where} is damaged: member {name!r} cannot be read ({exc})."
        raise StateFileError(msg) from None
    if _sha(data) != meta.get("sha256"):
        msg = f"{where} is damaged: member {name!r} does not match its checksum."
        raise StateFileError(msg)
    return data


def save(obj, path, *, allow_pickle: bool = True) -> Path:
    """Write the state of ``obj`` to ``path`` atomically; returns the path.

    Parameters
    ----------
    obj
        A streamcal learner (any object of the kinds listed in :mod:`streamcal.persist`).
    path
        Destination file. Its directory must exist. The file is replaced atomically.
    allow_pickle
        Store values that have no portable form with pickle (True), or raise ``TypeError`` (False).

    Examples
    --------
    >>> import os, tempfile
    >>> from streamcal import persist
    >>> path = os.path.join(tempfile.mkdtemp(), "state.zip")
    >>> persist.save({"weights": [1.0, 2.0]}, path).name
    'state.zip'
    >>> persist.load(path)
    {'weights': [1.0, 2.0]}
    """
    data = to_bytes(obj, allow_pickle=allow_pickle)
    path = Path(path)
    _atomic_write(path, data)
    return path


def load(path, *, allow_pickle: bool = False):
    """Read a learner written by :func:`save`.

    Raises :class:`StateFileError` if the file is not a state file or is truncated or damaged,
    :class:`StateVersionError` if it was written in a newer format version, and
    :class:`StatePickleError` if it holds pickles and ``allow_pickle`` is False.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        msg = f"`path` must be a state file; got the directory {str(path)!r}."
        raise StateFileError(msg) from None
    return from_bytes(data, allow_pickle=allow_pickle, where=f"{str(path)!r}")


def _atomic_write(path: Path, data: bytes) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        try:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)


class Persistable:
    """Mixin giving a learner ``save(path)`` and ``Class.load(path)`` (see :mod:`streamcal.persist`).

    No per-class code is needed: the learner's constructor parameters and learned attributes are
    written generically.

    Examples
    --------
    >>> import os, tempfile
    >>> from river import datasets, linear_model
    >>> from streamcal import CalibratedClassifier, PAVCalibrator
    >>> model = CalibratedClassifier(linear_model.LogisticRegression(), PAVCalibrator())
    >>> stream = list(datasets.Phishing().take(400))
    >>> for x, y in stream[:200]:
    ...     model.learn_one(x, y)
    >>> path = model.save(os.path.join(tempfile.mkdtemp(), "checkpoint.zip"))
    >>> resumed = CalibratedClassifier.load(path, allow_pickle=True)  # the river model inside is pickled
    >>> for x, y in stream[200:]:
    ...     assert resumed.predict_proba_one(x) == model.predict_proba_one(x)
    ...     model.learn_one(x, y)
    ...     resumed.learn_one(x, y)
    >>> resumed.n_learned
    400
    """

    def save(self, path, *, allow_pickle: bool = True) -> Path:
        """Write this learner's state to ``path`` atomically (see :func:`streamcal.persist.save`)."""
        return save(self, path, allow_pickle=allow_pickle)

    @classmethod
    def load(cls, path, *, allow_pickle: bool = False):
        """Read a learner of this class from ``path`` (see :func:`streamcal.persist.load`)."""
        obj = load(path, allow_pickle=allow_pickle)
        if not isinstance(obj, cls):
            msg = f"{str(path)!r} holds a {type(obj).__name__}, not a {cls.__name__}."
            raise TypeError(msg)
        return obj
