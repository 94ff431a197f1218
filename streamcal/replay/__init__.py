"""Replay recorded event streams through streaming calibrators, and generate synthetic ones.

- :func:`generate` writes seeded synthetic streams (scenarios ``click``, ``fraud``, ``drift``) to
  Parquet, Arrow IPC or CSV, batch by batch.
- :func:`replay` reads Parquet / Arrow IPC / CSV files, or a pyarrow Table or a pandas / polars
  DataFrame in memory, in record batches (memory set by the batch size, not the input), in
  event-time order, runs calibrators side by side prequentially, learns each label once its label
  time has passed, and writes calibrated probabilities, LLRs and metrics over time (outputs
  checked before the run, written under unique temporary names, with page checksums).
- :func:`replay_demo` generates a small stream and replays it with every available method (what
  ``streamcal demo`` can run).
- ``add_generate_arguments`` / ``run_generate`` and ``add_replay_arguments`` / ``run_replay`` are
  the argparse faces behind ``streamcal generate`` and ``streamcal replay``
  (also ``python -m streamcal.replay generate|replay ...``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from streamcal.replay._cli import (
    add_generate_arguments,
    add_replay_arguments,
    run_generate,
    run_replay,
)
from streamcal.replay._evaluate import METRIC_NAMES, default_metrics
from streamcal.replay._replay import ReplaySummary, replay
from streamcal.replay._source import ReplayInputError
from streamcal.replay.generate import SCENARIOS, generate
from streamcal.replay.methods import (
    RawScoreCalibrator,
    UnavailableMethodError,
    available_methods,
    register_method,
)

if TYPE_CHECKING:  # imported at first use (``__getattr__`` below); named here for the API pages
    from streamcal.replay.demo import replay_demo

__all__ = [
    "METRIC_NAMES",
    "SCENARIOS",
    "RawScoreCalibrator",
    "ReplayInputError",
    "ReplaySummary",
    "UnavailableMethodError",
    "add_generate_arguments",
    "add_replay_arguments",
    "available_methods",
    "default_metrics",
    "generate",
    "register_method",
    "replay",
    "replay_demo",
    "run_generate",
    "run_replay",
]


def __getattr__(name: str):
    # ``replay_demo`` is imported at first use: its module loads ``subprocess`` and ``tempfile``,
    # which a replay does not need
    if name == "replay_demo":
        value = importlib.import_module("streamcal.replay.demo").replay_demo
        globals()[name] = value
        return value
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__():
    return sorted({*globals(), *__all__})
