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

**Loading trusts nothing in a file without pickles.** Checksums only catch accidents (whoever
edits a file can recompute them), so :func:`load` checks every declared size against the file's
listing and ``max_bytes`` before reading, streams each array through its checksum into its own
memory, checks the JSON description's depth and structure value by value, and has every restored
streamcal object check its attributes (sizes, indices, counts, weights; the PAV blocks against a
rebuild from the histogram) before anything runs on them (:mod:`streamcal._state_check`). Whatever
is wrong is a :class:`StateFileError` naming the place; ``docs/persistence.md`` lists the checks and
what is trusted.

What is portable: ``None``, bools, ints, floats (bit-exact; NaN and infinities too), strings,
lists, tuples, dicts (any hashable portable keys), sets, deques, ``OrderedDict``, ``Counter``,
``defaultdict`` of a builtin factory, numpy arrays and scalars of numeric dtypes, ``random.Random``
and numpy ``Generator`` states, and objects of streamcal classes (and of river classes whose state
is itself portable). Identity is kept: an object referenced twice is restored once.

**Pickle fallback and security.** A value with no portable form — in practice the state of an
arbitrary river model wrapped by :class:`streamcal.CalibratedClassifier` (river keeps weights in
compiled containers) — is stored with :mod:`pickle` inside the file; the whole foreign object is
pickled, the streamcal parts stay portable. Unpickling can execute arbitrary code (passing
``allow_pickle=True`` means running the code the file names; no check can make that safe), so
:func:`load` refuses such files unless ``allow_pickle=True`` is passed, and names the pickled
parts in the error. Load files with pickles only from sources you trust. ``save(...,
allow_pickle=False)`` makes saving fail instead of falling back.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import importlib
import io
import json
import math
import numbers
import os
import pickle
import random
import re
import struct
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

import numpy as np

from streamcal._params import init_param_names as _init_param_names
from streamcal.exceptions import StateFileError, StatePickleError, StateVersionError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_STATE_BYTES",
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
_SCALAR_TYPES = frozenset({int, float, bool, str, type(None)})
_AS_IS_TYPES = frozenset({int, bool, str, type(None)})  # values ``_Encoder.encode`` returns unchanged
_FLOAT_ONLY = {float}
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
                elif t is not np.ndarray and not (t is list and _SCALAR_TYPES.issuperset(map(type, value))):
                    stack.extend(value)  # (a list of plain scalars, e.g. bucket cuts, holds nothing to mark)
            elif t is tuple:
                stack.extend(value)
            elif hasattr(value, "__dict__") and (_is_streamcal(t) or _is_river_estimator(t)):
                if id(value) in seen:
                    continue
                seen.add(id(value))
                state = _object_state(value) or {}
                self.keep.append(state)  # a state may hold fresh copies: alive, their ids stay unique
                stack.extend(state.values())

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
            types = set(map(type, value))
            if len(value) >= 8 and types == _FLOAT_ONLY:  # e.g. bucket cuts kept as a list
                name = f"a{len(self.arrays)}"
                self.arrays[name] = np.array(value, dtype=np.float64)
                return {"__floatlist__": name}
            if _AS_IS_TYPES.issuperset(types):  # e.g. a keyed calibrator's keys: each element encodes as itself
                return list(value)
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
        try:
            self.pickles[name] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:  # a local function, a lambda, a lock
            msg = f"`{where}` ({kind}) cannot be stored: it has no portable form and pickle refuses it ({exc})."
            raise TypeError(msg) from None
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


# ---------------------------------------------------------------------------------------- decoding
class _Located(StateFileError):
    """Internal: a :class:`StateFileError` whose message already names the place in the learner."""


# the keys a tagged node holds besides its tag (the encoder writes exactly these)
_TAG_KEYS = {
    "__float__": frozenset(),
    "__ndarray__": frozenset(),
    "__floatlist__": frozenset(),
    "__npscalar__": frozenset(),
    "__tuple__": frozenset(),
    "__dict__": frozenset(),
    "__odict__": frozenset(),
    "__counter__": frozenset(),
    "__defaultdict__": frozenset({"factory"}),
    "__set__": frozenset({"frozen"}),
    "__deque__": frozenset({"maxlen"}),
    "__random__": frozenset(),
    "__np_generator__": frozenset({"state"}),
    "__class__": frozenset(),
    "__ref__": frozenset(),
    "__shared__": frozenset({"id"}),
    "__object__": frozenset({"id", "params", "state"}),
    "__pickle__": frozenset(),
}

_U64 = (np.dtype(np.uint64), 1 << 64)
# the state of each numpy bit generator, checked before numpy sees it (numpy does not check
# every field: an MT19937 position past its key makes the next draw read out of bounds)
_GENERATOR_STATES = {
    "PCG64": {
        "state": {"state": (int, 1 << 128), "inc": (int, 1 << 128)},
        "has_uint32": (int, 2),
        "uinteger": (int, 1 << 32),
    },
    "MT19937": {"state": {"key": (np.dtype(np.uint32), (624,)), "pos": (int, 625)}},
    "Philox": {
        "state": {"counter": (np.dtype(np.uint64), (4,)), "key": (np.dtype(np.uint64), (2,))},
        "buffer": (np.dtype(np.uint64), (4,)),
        "buffer_pos": (int, 5),
        "has_uint32": (int, 2),
        "uinteger": (int, 1 << 64),
    },
    "SFC64": {"state": {"state": (np.dtype(np.uint64), (4,))}, "has_uint32": (int, 2), "uinteger": (int, 1 << 64)},
}
_GENERATOR_STATES["PCG64DXSM"] = _GENERATOR_STATES["PCG64"]


def _check_generator_state(value, schema: dict, where: str) -> None:
    """``value`` has exactly the fields of ``schema``: ints in ``[0, bound)``, arrays of a dtype and shape."""
    if type(value) is not dict or set(value) != set(schema):
        msg = f"{where} must be a dict with the fields {sorted(schema)}; got {_brief(value)}."
        raise StateFileError(msg)
    for key, spec in schema.items():
        v = value[key]
        if isinstance(spec, dict):
            _check_generator_state(v, spec, f"{where}[{key!r}]")
        elif spec[0] is int:
            if type(v) is not int or not 0 <= v < spec[1]:
                msg = f"{where}[{key!r}] must be an int in [0, {spec[1]}); got {_brief(v)}."
                raise StateFileError(msg)
        elif not (type(v) is np.ndarray and v.dtype == spec[0] and v.shape == spec[1]):
            msg = f"{where}[{key!r}] must be a {spec[0]} array of shape {spec[1]}; got {_brief(v)}."
            raise StateFileError(msg)


def _brief(value) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


class _Decoder:
    def __init__(self, arrays: dict, pickles: dict):
        self.arrays = arrays
        self.pickles = pickles
        self.objects: dict[int, object] = {}
        self.arrays_used: set[str] = set()
        self.ids: set[int] = set()

    def _array(self, name, where: str) -> np.ndarray:
        if type(name) is not str or name not in self.arrays:
            msg = f"{where} names array {_brief(name)}, which the file does not list."
            raise StateFileError(msg)
        if name in self.arrays_used:  # the encoder writes each array once; sharing goes through __shared__
            msg = f"{where} names array {name!r} a second time."
            raise StateFileError(msg)
        self.arrays_used.add(name)
        return self.arrays[name]

    def _id(self, number, where: str) -> int:
        if type(number) is not int or number in self.ids:
            msg = f"{where} has a missing or repeated object id {_brief(number)}."
            raise StateFileError(msg)
        self.ids.add(number)
        return number

    def _pairs(self, body, where: str) -> list:
        if type(body) is not list or not all(type(p) is list and len(p) == 2 for p in body):
            msg = f"{where} must hold a list of [key, value] pairs; got {_brief(body)}."
            raise StateFileError(msg)
        out = []
        for i, (k, v) in enumerate(body):
            key = self.decode(k, f"{where}.key[{i}]")
            try:
                hash(key)
            except TypeError:
                msg = f"{where}.key[{i}] must be hashable; got {_brief(key)}."
                raise StateFileError(msg) from None
            out.append((key, self.decode(v, f"{where}[{key!r}]")))
        return out

    def _items(self, body, where: str) -> list:
        if type(body) is not list:
            msg = f"{where} must hold a list; got {_brief(body)}."
            raise StateFileError(msg)
        return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(body)]

    def decode(self, node, where: str):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(node)]
        tags = [k for k in node if _is_tagged(k)]
        if not tags:
            return {k: self.decode(v, f"{where}[{k!r}]") for k, v in node.items()}
        tag = tags[0]
        extra = _TAG_KEYS.get(tag)
        if extra is None:
            msg = f"{where} has the unknown value tag {tag!r}."
            raise StateFileError(msg)
        if set(node) != {tag, *extra}:
            msg = f"{where} is a {tag} node with the keys {sorted(node)}; expected {sorted({tag, *extra})}."
            raise StateFileError(msg)
        body = node[tag]
        if tag == "__float__":
            if type(body) is not str or len(body) != 16:
                msg = f"{where} must hold the 16 hex digits of a float64; got {_brief(body)}."
                raise StateFileError(msg)
            return struct.unpack(">d", bytes.fromhex(body))[0]
        if tag == "__ndarray__":
            return self._array(body, where)
        if tag == "__floatlist__":
            arr = self._array(body, where)
            if arr.dtype != np.float64 or arr.ndim != 1:
                msg = f"{where} must be a 1-d float64 array (a list of floats); got {_brief(arr)}."
                raise StateFileError(msg)
            return arr.tolist()
        if tag == "__npscalar__":
            arr = self._array(body, where)
            if arr.ndim != 0:
                msg = f"{where} must be a 0-d array (a numpy scalar); got {_brief(arr)}."
                raise StateFileError(msg)
            return arr[()]
        if tag == "__tuple__":
            return tuple(self._items(body, where))
        if tag == "__dict__":
            return dict(self._pairs(body, where))
        if tag == "__odict__":
            return collections.OrderedDict(self._pairs(body, where))
        if tag == "__counter__":
            return collections.Counter(dict(self._pairs(body, where)))
        if tag == "__defaultdict__":
            factory = node["factory"]
            if factory is not None and (type(factory) is not str or factory not in _FACTORIES):
                msg = f"{where} names the unknown defaultdict factory {_brief(factory)}."
                raise StateFileError(msg)
            out = collections.defaultdict(_FACTORIES[factory])
            out.update(self._pairs(body, where))
            return out
        if tag == "__set__":
            items = self._items(body, where)
            if type(node["frozen"]) is not bool:
                msg = f"{where}: `frozen` must be a bool; got {_brief(node['frozen'])}."
                raise StateFileError(msg)
            try:
                return frozenset(items) if node["frozen"] else set(items)
            except TypeError:
                msg = f"{where} holds an unhashable item."
                raise StateFileError(msg) from None
        if tag == "__deque__":
            maxlen = node["maxlen"]
            if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
                msg = f"{where}: `maxlen` must be None or an int >= 0; got {_brief(maxlen)}."
                raise StateFileError(msg)
            return collections.deque(self._items(body, where), maxlen=maxlen)
        if tag == "__random__":
            r = random.Random()
            r.setstate(_as_tuples(self.decode(body, f"{where}.state")))
            return r
        if tag == "__np_generator__":
            if type(body) is not str or body not in _BIT_GENERATORS:
                msg = f"unknown numpy bit generator {_brief(body)} at {where}"
                raise StateFileError(msg)
            state = self.decode(node["state"], f"{where}.state")
            if type(state) is not dict or state.get("bit_generator") != body:
                msg = f"{where}.state must be the state of a {body} bit generator; got {_brief(state)}."
                raise StateFileError(msg)
            fields = {k: v for k, v in state.items() if k != "bit_generator"}
            _check_generator_state(fields, _GENERATOR_STATES[body], f"{where}.state")
            bg = getattr(np.random, body)()
            bg.state = state
            return np.random.Generator(bg)
        if tag == "__class__":
            if type(body) is not str:
                msg = f"{where} must name a class; got {_brief(body)}."
                raise StateFileError(msg)
            return _resolve_class(body, allow_builtins=True)
        if tag == "__ref__":
            if type(body) is not int or body not in self.objects:
                msg = f"{where} refers to object {_brief(body)}, which is not defined before it."
                raise StateFileError(msg)
            return self.objects[body]
        if tag == "__shared__":
            number = self._id(node["id"], where)
            value = self.decode(body, where)
            if type(value) not in _CONTAINERS:
                msg = f"{where}: only containers are shared; got a {type(value).__name__}."
                raise StateFileError(msg)
            self.objects[number] = value
            return value
        if tag == "__object__":
            return self._object(node, body, where)
        if type(body) is not str or body not in self.pickles:  # __pickle__
            msg = f"{where} names pickle {_brief(body)}, which the file does not list."
            raise StateFileError(msg)
        return pickle.loads(self.pickles[body])  # only with allow_pickle=True

    def _object(self, node, qualname, where: str):
        if type(qualname) is not str:
            msg = f"{where} must name a class; got {_brief(qualname)}."
            raise StateFileError(msg)
        cls = _resolve_class(qualname)
        number = self._id(node["id"], where)
        params, state = node["params"], node["state"]
        if type(params) is not dict or type(state) is not dict or set(params) & set(state):
            msg = f"{where}: `params` and `state` must be two dicts of distinct attribute names."
            raise StateFileError(msg)
        names = set(_init_param_names(cls))
        if not set(params) <= names:
            msg = (
                f"{where}: {sorted(set(params) - names)} are not parameters of {cls.__name__} "
                f"(its parameters: {sorted(names)})."
            )
            raise StateFileError(msg)
        obj = cls.__new__(cls)
        self.objects[number] = obj
        attrs = {k: self.decode(v, f"{where}.{k}") for k, v in params.items()}
        attrs.update((k, self.decode(v, f"{where}.{k}")) for k, v in state.items())
        try:
            if hasattr(cls, "__setstate__"):  # as pickle does: the class rebuilds its caches (and checks the state)
                obj.__setstate__(attrs)
            else:
                obj.__dict__.update(attrs)
            # the streaming calibrators check their state in their own ``__setstate__`` (so that
            # pickles and copies are checked too); every other streamcal class is checked here
            if _is_streamcal(cls) and not getattr(cls, "_checks_own_state", False):
                from streamcal._state_check import check_loaded

                check_loaded(obj)
        except _Located:
            raise
        except StateFileError as exc:
            msg = f"{where} ({cls.__name__}): {exc}"
            raise _Located(msg) from None
        return obj


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
def to_bytes(obj, *, allow_pickle: bool = True, compress: bool = True) -> bytes:
    """The state file of ``obj`` as bytes (what :func:`save` writes).

    Useful to keep checkpoints in a key-value store or a message; read back with
    :func:`from_bytes`. ``compress=False`` stores the members without deflating them: the same
    file, larger and several times faster to write, for a store that compresses what it keeps
    (Spark's state store does, with LZ4).
    """
    from streamcal import __version__

    enc = _Encoder(allow_pickle=allow_pickle)
    # a streamcal learner is read under its lock (streamcal._locking): a consistent snapshot even
    # while other threads use it (its parts change only under the same lock)
    lock = getattr(obj, "_lock", None) if _is_streamcal(type(obj)) else None
    members: dict[str, bytes] = {}
    arrays_meta, pickles_meta = {}, {}
    with lock if lock is not None else contextlib.nullcontext():
        enc.find_shared(obj)
        root = enc.encode(obj, "learner")
        # the encoder holds the learner's own arrays: they are written before the lock is let go
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
    how = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", compression=how, compresslevel=1 if compress else None) as zf:
        for name, data in [(_MANIFEST, text.encode("utf-8")), *members.items()]:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, compress_type=how, compresslevel=1 if compress else None)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------- reading
#: Default bound, in bytes, on the uncompressed contents a state file may declare (its JSON
#: description, arrays and pickles together); ``max_bytes`` of :func:`load` overrides it.
MAX_STATE_BYTES = 1 << 30
#: The JSON description may take at most this share of ``max_bytes`` (parsed JSON takes several
#: times its size in memory).
MANIFEST_SHARE = 16
#: Deepest nesting of lists and objects in the JSON description (a pipeline holding a river tree of
#: height 5 needs 30).
MAX_JSON_DEPTH = 256
_NPY_HEADER_MAX = 1 << 16  # the .npy header (magic, version, dict), far above numpy's own padding
_CHUNK = 1 << 20
# dtypes an array member may have: those the encoder writes (numbers, bools, strings, dates)
_ARRAY_KINDS = frozenset("biufcUSMm")
_ARRAY_NAME = re.compile(r"a[0-9]{1,9}")
_PICKLE_NAME = re.compile(r"p[0-9]{1,9}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_RECURSION_LOCK = threading.Lock()
_RECURSION_USERS = [0, 0]  # loads running, recursion limit before the first of them


class _HashingReader:
    """A zip member read through a SHA-256, so that its checksum is verified as it streams."""

    def __init__(self, raw):
        self.raw = raw
        self.sha = hashlib.sha256()
        self.n = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.sha.update(data)
        self.n += len(data)
        return data

    def readinto(self, view) -> int:
        n = self.raw.readinto(view)
        self.sha.update(view[:n])
        self.n += n
        return n


def _fail(where: str, what: str, exc: BaseException | None = None):
    detail = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    msg = f"{where} is damaged: {what}{detail}."
    raise StateFileError(msg)


def _json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text (brackets inside strings do not count)."""
    skeleton = _JSON_STRING.sub('""', text).encode("ascii", "replace")
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    at = np.flatnonzero((codes == ord("[")) | (codes == ord("{")) | (codes == ord("]")) | (codes == ord("}")))
    if at.size == 0:
        return 0
    opens = (codes[at] == ord("[")) | (codes[at] == ord("{"))
    return int(np.cumsum(np.where(opens, 1, -1).astype(np.int32)).max())


@contextlib.contextmanager
def _recursion_room(frames: int):
    """Let the decoder recurse ``frames`` deeper than the caller (restored when every load is done)."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    with _RECURSION_LOCK:
        if _RECURSION_USERS[0] == 0:
            _RECURSION_USERS[1] = sys.getrecursionlimit()
        _RECURSION_USERS[0] += 1
        if sys.getrecursionlimit() < depth + frames:
            sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        with _RECURSION_LOCK:
            _RECURSION_USERS[0] -= 1
            if _RECURSION_USERS[0] == 0:
                sys.setrecursionlimit(_RECURSION_USERS[1])


def _read_manifest(zf: zipfile.ZipFile, where: str, limit: int) -> dict:
    try:
        info = zf.getinfo(_MANIFEST)
    except KeyError:
        msg = f"{where} is a zip file but not a streamcal state file (no {_MANIFEST!r} member)."
        raise StateFileError(msg) from None
    if info.file_size > limit:
        msg = (
            f"{where} declares a {info.file_size}-byte {_MANIFEST!r}, over the limit of {limit} bytes "
            "(1/16 of `max_bytes`); pass a larger `max_bytes` to load it."
        )
        raise StateFileError(msg)
    try:
        with zf.open(info) as f:
            raw = f.read(limit + 1)
    except Exception as exc:  # bad CRC, bad header, unsupported zip features, ...
        _fail(where, f"{_MANIFEST!r} cannot be read", exc)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(where, f"its {_MANIFEST!r} is not valid JSON", exc)
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        _fail(where, f"its {_MANIFEST!r} nests {depth} levels deep, more than {MAX_JSON_DEPTH}")
    try:
        manifest = json.loads(text)
    except (ValueError, RecursionError, MemoryError) as exc:
        _fail(where, f"its {_MANIFEST!r} is not valid JSON", exc)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else f"a JSON {type(manifest).__name__}"
        msg = f"{where} is not a streamcal state file (format {found!r})."
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
    _check_members_listing(manifest, where)
    return manifest


def _check_members_listing(manifest: dict, where: str) -> None:
    """The ``arrays`` and ``pickles`` entries: their names, checksums, dtypes and shapes, type by type."""
    for key, pattern, fields in (
        ("arrays", _ARRAY_NAME, {"dtype", "shape", "sha256"}),
        ("pickles", _PICKLE_NAME, {"where", "type", "sha256"}),
    ):
        listing = manifest[key]
        if not isinstance(listing, dict):
            _fail(where, f"its {key!r} entry must be a JSON object; got a JSON {type(listing).__name__}")
        for name, meta in listing.items():
            if not pattern.fullmatch(name):
                _fail(where, f"{key} member name {name!r} is not one the format writes")
            if not isinstance(meta, dict) or set(meta) != fields:
                _fail(where, f"{key} entry {name!r} must be an object with the fields {sorted(fields)}")
            if not (isinstance(meta["sha256"], str) and _SHA256.fullmatch(meta["sha256"])):
                _fail(where, f"{key} entry {name!r} has no valid SHA-256")
            if key == "pickles":
                if not (isinstance(meta["where"], str) and isinstance(meta["type"], str)):
                    _fail(where, f"pickle entry {name!r} must name its place and type as strings")
                continue
            meta["_dtype"] = _array_dtype(meta["dtype"], name, where)
            shape = meta["shape"]
            if not (isinstance(shape, list) and len(shape) <= 32 and all(type(n) is int and n >= 0 for n in shape)):
                _fail(where, f"array {name!r} has the invalid shape {shape!r}")
            meta["_nbytes"] = math.prod(shape) * meta["_dtype"].itemsize


def _array_dtype(text, name: str, where: str) -> np.dtype:
    if not isinstance(text, str) or len(text) > 16:
        _fail(where, f"array {name!r} has the invalid dtype {text!r}")
    try:
        dtype = np.dtype(text)
    except Exception as exc:  # numpy raises TypeError or ValueError, depending on the string
        _fail(where, f"array {name!r} has the invalid dtype {text!r}", exc)
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.shape != () or dtype.itemsize == 0:
        _fail(where, f"array {name!r} has the dtype {text!r}, which the format does not write")
    return dtype


def _member_info(zf: zipfile.ZipFile, name: str, where: str) -> zipfile.ZipInfo:
    try:
        return zf.getinfo(name)
    except KeyError:
        msg = f"{where} is damaged: member {name!r} is missing."
        raise StateFileError(msg) from None


def _check_sizes(zf: zipfile.ZipFile, manifest: dict, where: str, max_bytes: int, manifest_size: int) -> None:
    """Every member's declared size against the listing and the limit, before anything is read."""
    total = manifest_size
    for name, meta in manifest["arrays"].items():
        info = _member_info(zf, f"arrays/{name}.npy", where)
        header = info.file_size - meta["_nbytes"]
        if not 10 <= header <= _NPY_HEADER_MAX:
            _fail(
                where,
                f"member 'arrays/{name}.npy' declares {info.file_size} bytes, which does not fit "
                f"a {meta['dtype']} array of shape {tuple(meta['shape'])} ({meta['_nbytes']} bytes of data)",
            )
        total += info.file_size
    for name in manifest["pickles"]:
        total += _member_info(zf, f"pickles/{name}.pkl", where).file_size
    if total > max_bytes:
        msg = (
            f"{where} declares {total} bytes of contents, over the limit of {max_bytes} bytes; "
            "pass a larger `max_bytes` to load it."
        )
        raise StateFileError(msg)


def _read_array(zf: zipfile.ZipFile, name: str, meta: dict, where: str) -> np.ndarray:
    """One ``.npy`` member, streamed into its array through the checksum; the header must agree
    with the listing (dtype, shape) and the member's size."""
    member = f"arrays/{name}.npy"
    info = zf.getinfo(member)
    try:
        with zf.open(info) as raw:
            f = _HashingReader(raw)
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                _fail(where, f"member {member!r} is a .npy file of version {version}, which the format does not write")
            if dtype != meta["_dtype"] or dtype.str != meta["_dtype"].str or list(shape) != meta["shape"]:
                _fail(
                    where,
                    f"member {member!r} holds a {dtype.str} array of shape {shape}, but the file lists "
                    f"{meta['dtype']} and {tuple(meta['shape'])}",
                )
            if f.n + meta["_nbytes"] != info.file_size:
                _fail(where, f"member {member!r} is {info.file_size} bytes, not its header and data")
            flat = np.empty(math.prod(shape), dtype=dtype)
            view = memoryview(flat.view(np.uint8))
            done = 0
            while done < view.nbytes:
                n = f.readinto(view[done : done + _CHUNK])
                if n == 0:
                    _fail(where, f"member {member!r} is truncated")
                done += n
            if f.read(1):  # also makes the zip module check the member's CRC
                _fail(where, f"member {member!r} is longer than its array")
    except StateFileError:
        raise
    except Exception as exc:  # bad CRC, bad .npy header, unsupported zip features, ...
        _fail(where, f"member {member!r} cannot be read", exc)
    if f.sha.hexdigest() != meta["sha256"]:
        msg = f"{where} is damaged: member {member!r} does not match its checksum."
        raise StateFileError(msg)
    return flat.reshape(shape, order="F" if fortran else "C")


def _read_pickle(zf: zipfile.ZipFile, name: str, meta: dict, where: str) -> bytes:
    member = f"pickles/{name}.pkl"
    info = zf.getinfo(member)
    try:
        with zf.open(info) as raw:
            data = raw.read(info.file_size + 1)
    except Exception as exc:  # bad CRC, bad header, unsupported zip features, ...
        _fail(where, f"member {member!r} cannot be read", exc)
    if len(data) != info.file_size or _sha(data) != meta["sha256"]:
        msg = f"{where} is damaged: member {member!r} does not match its checksum."
        raise StateFileError(msg)
    return data


def _read_state(source, *, allow_pickle: bool, where: str, max_bytes: int):
    from streamcal._validation import check_scalar

    check_scalar(max_bytes, "max_bytes", numbers.Integral, low=1)
    try:
        return _read_checked(source, allow_pickle=allow_pickle, where=where, max_bytes=max_bytes)
    except StateFileError:
        raise
    except Exception as exc:  # whatever else a crafted file provokes is a damaged file too
        msg = f"{where} is damaged: it cannot be read ({type(exc).__name__}: {exc})."
        raise StateFileError(msg) from None


def _read_checked(source, *, allow_pickle: bool, where: str, max_bytes: int):
    try:
        zf = zipfile.ZipFile(source)
    except Exception as exc:  # any failure to parse the container: not a state file, or damaged
        msg = f"{where} is not a streamcal state file, or it is truncated or damaged: {exc}."
        raise StateFileError(msg) from None
    with zf:
        manifest = _read_manifest(zf, where, max(max_bytes // MANIFEST_SHARE, 1))
        _check_sizes(zf, manifest, where, max_bytes, zf.getinfo(_MANIFEST).file_size)
        if manifest["pickles"] and not allow_pickle:
            parts = "; ".join(f"`{m['where']}` ({m['type']})" for m in manifest["pickles"].values())
            msg = (
                f"{where} holds pickled objects: {parts}. Unpickling can run arbitrary code; pass "
                "allow_pickle=True only if you trust the file."
            )
            raise StatePickleError(msg)
        arrays = {name: _read_array(zf, name, meta, where) for name, meta in manifest["arrays"].items()}
        pickles = {name: _read_pickle(zf, name, meta, where) for name, meta in manifest["pickles"].items()}
    try:
        with _recursion_room(3 * MAX_JSON_DEPTH + 100):
            return _Decoder(arrays, pickles).decode(manifest["root"], "learner")
    except StateFileError as exc:
        msg = f"{where} cannot be loaded: {exc}"
        raise StateFileError(msg) from None
    except Exception as exc:  # anything else a crafted description provokes is a damaged file too
        msg = f"{where} is damaged: its learner description cannot be decoded ({type(exc).__name__}: {exc})."
        raise StateFileError(msg) from None


def from_bytes(data: bytes, *, allow_pickle: bool = False, where: str = "the data", max_bytes: int = MAX_STATE_BYTES):
    """Rebuild a learner from the bytes of a state file (see :func:`to_bytes` and :func:`load`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        msg = f"`data` must be the bytes of a state file (as to_bytes gives them); got {type(data).__name__}."
        raise TypeError(msg)
    return _read_state(io.BytesIO(data), allow_pickle=allow_pickle, where=where, max_bytes=max_bytes)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save(obj, path, *, allow_pickle: bool = True) -> Path:
    """Write the state of ``obj`` to ``path`` atomically; returns the path.

    Parameters
    ----------
    obj
        A streamcal learner (any object of the kinds listed in :mod:`streamcal.persist`).
    path
        Destination file (a ``str`` or path-like; its directory must exist; the file is replaced
        atomically), or a binary file object open for writing (the bytes are written at its position).
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
    if not isinstance(path, (str, os.PathLike)) and hasattr(path, "write"):  # a binary file object
        data = to_bytes(obj, allow_pickle=allow_pickle)
        try:
            path.write(data)
        except TypeError:
            msg = f"`path` must be a file name or a binary file object; got a text file object {path!r}."
            raise TypeError(msg) from None
        return path
    path = _as_path(path)
    if path.is_dir():
        msg = f"`path` must name a file, not a directory; got the directory {str(path)!r}."
        raise IsADirectoryError(msg)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        msg = f"`path`'s directory {str(parent)!r} does not exist; got {str(path)!r}."
        raise FileNotFoundError(msg)
    data = to_bytes(obj, allow_pickle=allow_pickle)
    _atomic_write(path, data)
    return path


def _as_path(path) -> Path:
    """``path`` as a ``Path``, or a ``TypeError`` naming it."""
    if isinstance(path, (str, os.PathLike)):
        return Path(path)
    msg = f"`path` must be a file name (str or path-like) or a binary file object; got {type(path).__name__} {path!r}."
    raise TypeError(msg)


def load(path, *, allow_pickle: bool = False, max_bytes: int = MAX_STATE_BYTES):
    """Read a learner written by :func:`save`.

    Parameters
    ----------
    path
        The state file (a ``str`` or path-like), or a binary file object open for reading.
    allow_pickle
        Unpickle the parts stored with pickle (see :mod:`streamcal.persist`). Unpickling runs
        whatever code the file names: pass True only for files you trust.
    max_bytes
        Most bytes of contents the file may declare (its JSON description, arrays and pickles,
        uncompressed); a file declaring more is refused before any of it is read.


    Raises
    ------
    StateFileError
        The file is not a state file, is truncated or damaged, is over the size limits or
        describes an inconsistent learner (what is checked is listed in ``docs/persistence.md``).
    StateVersionError
        The file was written in a newer format version.
    StatePickleError
        The file holds pickles and ``allow_pickle`` is False.
    """
    if not isinstance(path, (str, os.PathLike)) and hasattr(path, "read"):  # a binary file object
        return _read_file_object(path, allow_pickle=allow_pickle, max_bytes=max_bytes)
    path = _as_path(path)
    try:
        f = path.open("rb")
    except IsADirectoryError:
        msg = f"`path` must be a state file; got the directory {str(path)!r}."
        raise StateFileError(msg) from None
    with f:
        return _read_state(f, allow_pickle=allow_pickle, where=f"{str(path)!r}", max_bytes=max_bytes)


def _read_file_object(f, *, allow_pickle: bool, max_bytes: int):
    """:func:`load` from a binary file object: read as it is where it can seek, else its bytes read
    first (at most the zip container's share of ``max_bytes`` more than the limit)."""
    where = f"the file object {getattr(f, 'name', None) or type(f).__name__!r}"
    try:
        probe = f.read(0)
    except Exception as exc:
        msg = f"`path` must be a binary file object open for reading; reading {where} failed ({exc})."
        raise TypeError(msg) from None
    if not isinstance(probe, bytes):
        msg = f"`path` must be a binary file object (open it with 'rb'); got a text file object {f!r}."
        raise TypeError(msg)
    seekable = getattr(f, "seekable", None)
    if callable(seekable) and seekable():
        return _read_state(f, allow_pickle=allow_pickle, where=where, max_bytes=max_bytes)
    data = f.read(2 * max_bytes + 1)
    if len(data) > 2 * max_bytes:
        msg = f"{where} holds more than twice max_bytes ({max_bytes:,}) bytes: refused before reading it all."
        raise StateFileError(msg)
    return _read_state(io.BytesIO(data), allow_pickle=allow_pickle, where=where, max_bytes=max_bytes)


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


def _article(name: str) -> str:
    """The indefinite article of a class name: "an IsotonicEProcess", "a PAVCalibrator"."""
    return "an" if name[:1] in "AEIOU" else "a"


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
    def load(cls, path, *, allow_pickle: bool = False, max_bytes: int = MAX_STATE_BYTES):
        """Read a learner of this class from ``path`` (see :func:`streamcal.persist.load`)."""
        obj = load(path, allow_pickle=allow_pickle, max_bytes=max_bytes)
        if not isinstance(obj, cls):
            got = type(obj).__name__
            msg = f"{str(path)!r} holds {_article(got)} {got}, not {_article(cls.__name__)} {cls.__name__}."
            raise TypeError(msg)
        return obj
