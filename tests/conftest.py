"""Shared fixtures and hypothesis settings.

Shared code lives in helper modules, which test files import (no test file imports another):
``naive.py`` (slow reference implementations), ``river_cases.py`` (streamcal's public estimators,
stand-in river models, the river-loop reference), ``fuzz_cases.py`` (hypothesis strategies and
checks for bad input), ``state_files.py`` (building and running state files) and ``spark_cases.py``
(the Spark processor's streams, references and runs).
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "streamcal",
    deadline=None,
    derandomize=True,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("streamcal"), max_examples=600)
settings.load_profile(os.environ.get("STREAMCAL_HYPOTHESIS_PROFILE", "streamcal"))


if os.environ.get("STREAMCAL_TEST_FORCE_INTERPRETED") == "1":
    # ``tests/test_tiers.py`` reruns streaming PAV's test files so: every kernel call that states
    # its events runs in the interpreted tier, even after a direct kernel call compiled the rest

    @pytest.fixture(autouse=True)
    def _every_stated_call_interpreted():
        from streamcal._kernels import _config

        with _config.interpreting():
            yield


@pytest.fixture
def rng():
    """A seeded generator: every test that draws random data is reproducible."""
    return np.random.default_rng(20261122)


@pytest.fixture(scope="session")
def click_stream(tmp_path_factory):
    """Generated click streams in Parquet, written once per session and shared by every module:
    ``click_stream(n, seed=..., batch_size=...)`` returns the path. Tests read them, never write."""
    from streamcal.replay import generate

    made = {}

    def make(n: int, *, seed: int, batch_size: int):
        key = (n, seed, batch_size)
        if key not in made:
            folder = tmp_path_factory.mktemp(f"clicks-{n}-{seed}-{batch_size}")
            made[key] = generate(folder / "clicks.parquet", "click", n=n, seed=seed, batch_size=batch_size)
        return made[key]

    return make


@pytest.fixture(scope="module")
def spark():
    """A local Spark session for a test module's queries (skipped without a Java runtime)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (Spark 4 needs Java 17); .ci/run installs it")
    from streamcal.spark import local_session

    session = local_session("streamcal-test", **{"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()
