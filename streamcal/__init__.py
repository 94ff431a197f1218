"""streamcal: a streaming calibration engine.

Attach it to a stream of scored events; it learns from labels as they arrive and returns, per
event, a calibrated probability and a calibrated log-likelihood ratio (LLR).

Public names are imported lazily, so ``import streamcal`` is cheap and a command such as
``streamcal --help`` does not load numba.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0.dev0"

# another project's distribution, also named `streamcal`, installs a package of this name: say so
from streamcal._name_clash import warn_of_name_clash

warn_of_name_clash()
del warn_of_name_clash

# public name -> module that defines it
_EXPORTS = {
    "PAVCalibrator": "streamcal.isotonic.streaming",
    "VennAbersCalibrator": "streamcal.isotonic.venn_abers",
    "IsotonicCalibrator": "streamcal.isotonic.batch",
    "ISplineCalibrator": "streamcal.spline.calibrator",
    "GEVCalibrator": "streamcal.gev.calibrator",
    "PlattCalibrator": "streamcal.gev.calibrator",
    "GEVCanonicalRegression": "streamcal.gev.regression",
    "GEVCanonicalClassifier": "streamcal.gev.streaming",
    "pairwise_couple": "streamcal.multiclass.coupling",
    "PairwiseCouplingCalibrator": "streamcal.multiclass.streaming",
    "OneVsRestCalibrator": "streamcal.multiclass.streaming",
    "CalibratedClassifier": "streamcal.compose",
    "KeyedCalibrator": "streamcal.keyed",
    "KeyedOffsetCalibrator": "streamcal.keyed_offset",
    "merge": "streamcal.merging",
    "save": "streamcal.persist",
    "load": "streamcal.persist",
    "use_compiled_kernels": "streamcal._kernels._config",
    "warmup": "streamcal._warmup",
    "CountWindow": "streamcal.windows",
    "TimeWindow": "streamcal.windows",
    "Decay": "streamcal.windows",
    "Unbounded": "streamcal.windows",
    "LogitGrid": "streamcal.buckets",
    "UniformGrid": "streamcal.buckets",
    "QuantileEdges": "streamcal.buckets",
    "Edges": "streamcal.buckets",
}

_SUBMODULES = {
    "buckets",
    "windows",
    "isotonic",
    "metrics",
    "gev",
    "spline",
    "multiclass",
    "compose",
    "replay",
    "persist",
    "merging",
    "dask",
    "plot",
    "monitor",
    "keyed",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"streamcal.{name}")
        globals()[name] = module
        return module
    msg = f"module 'streamcal' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__():
    # the public names and the loaded public submodules: not the module's own imports (``importlib``)
    own = globals()
    loaded = (n for n, v in own.items() if not n.startswith("_") and getattr(v, "__name__", "") == f"streamcal.{n}")
    return sorted({*(n for n in own if n.startswith("__")), *loaded, *_EXPORTS, *_SUBMODULES})
