"""The built-in streaming binary calibrators by name: the one table that replay, the command line
and :func:`streamcal.warmup` read.

It names modules rather than importing them, so that reading it costs nothing and a calibrator's
module is imported only when asked for; the core does not depend on replay, replay reads the core.
"""

from __future__ import annotations

import importlib

__all__ = ["BUILTIN_CALIBRATORS", "builtin_calibrator"]

#: method name -> (module, class name)
BUILTIN_CALIBRATORS: dict[str, tuple[str, str]] = {
    "pav": ("streamcal.isotonic.streaming", "PAVCalibrator"),
    "ispline": ("streamcal.spline.calibrator", "ISplineCalibrator"),
    "gev": ("streamcal.gev.calibrator", "GEVCalibrator"),
    "platt": ("streamcal.gev.calibrator", "PlattCalibrator"),
    "venn-abers": ("streamcal.isotonic.venn_abers", "VennAbersCalibrator"),
}


def builtin_calibrator(name: str) -> type:
    """The class of the built-in calibrator ``name`` (KeyError if there is none of that name)."""
    module, cls = BUILTIN_CALIBRATORS[name]
    return getattr(importlib.import_module(module), cls)
