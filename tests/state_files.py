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


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
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
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
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
