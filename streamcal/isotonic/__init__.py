"""Isotonic (PAV) calibration: batch PAV, PAV-LLR, the batch calibrator and the streaming one."""

from __future__ import annotations

from streamcal.isotonic.batch import IsotonicCalibrator, pav, pav_binary, pav_llr

__all__ = ["IsotonicCalibrator", "PAVCalibrator", "VennAbersCalibrator", "pav", "pav_binary", "pav_llr"]


def __getattr__(name: str):
    if name == "PAVCalibrator":  # the streaming calibrator loads numba kernels: import on demand
        from streamcal.isotonic.streaming import PAVCalibrator

        return PAVCalibrator
    if name == "VennAbersCalibrator":
        from streamcal.isotonic.venn_abers import VennAbersCalibrator

        return VennAbersCalibrator
    msg = f"module 'streamcal.isotonic' has no attribute {name!r}"
    raise AttributeError(msg)
