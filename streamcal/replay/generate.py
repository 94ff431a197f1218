"""Seeded synthetic event streams: ``streamcal generate``.

Each scenario draws, per event, a model logit ``m`` and turns it into

- ``score = sigmoid(m)``: what the (miscalibrated) model reported;
- ``p = sigmoid(a * m + b)``: the true probability of a positive, with the scenario's
  miscalibration ``(a, b)``; ``label ~ Bernoulli(p)``;
- ``event_time``: a Poisson process spread over the scenario's span (so label delays keep the
  same meaning whatever the number of rows);
- ``label_time``: when the label becomes known;
- ``key`` (the keyed scenarios only): the event's campaign, drawn with Zipf-like traffic; each key
  has a miscalibration of its own around the scenario's.

Streams are written batch by batch (never whole in memory), to Parquet, Arrow IPC or CSV. Every
column is drawn from its own child generator of ``numpy.random.SeedSequence(seed)``, so the data
depend only on ``seed``, ``scenario`` and ``n`` — not on ``batch_size`` or ``parts``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["SCENARIOS", "KeyEffects", "Scenario", "generate"]

DAY = 86_400.0
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z in milliseconds


@dataclass(frozen=True)
class Scenario:
    """Parameters of a synthetic stream.

    Parameters
    ----------
    name : str
        Scenario name.
    description : str
        One line for ``--help``.
    span_seconds : float
        The ``n`` events are spread over this many seconds of event time.
    logit_mean, logit_sd : float
        The model logit ``m`` is normal with this mean and standard deviation.
    slope, intercept : float
        True logit ``a * m + b`` before any drift.
    positive_delay, negative_delay : tuple of float
        Label delay in seconds for positives and negatives: ``fixed + Exponential(mean)`` given as
        ``(fixed, mean)``.
    drift : bool
        Whether the relation changes over the stream (abrupt shift of the intercept at one third,
        gradual change of the slope over the last third).
    n_keys : int
        The number of keys (0: an unkeyed stream). Key ``k`` (0, 1, ...) draws events in
        proportion to ``(k + 1) ** -zipf``, shifts the model logit's mean by its own amount and
        has its own slope and intercept: ``a_k * m + b_k`` with ``log(a_k / slope)`` and
        ``b_k - intercept`` normal with standard deviations ``key_slope_sd`` and
        ``key_intercept_sd``.
    """

    name: str
    description: str
    span_seconds: float
    logit_mean: float
    logit_sd: float
    slope: float
    intercept: float
    positive_delay: tuple[float, float]
    negative_delay: tuple[float, float]
    drift: bool = False
    n_keys: int = 0
    zipf: float = 1.1
    key_shift_sd: float = 0.0
    key_slope_sd: float = 0.0
    key_intercept_sd: float = 0.0

    def true_logit(self, m: np.ndarray, position: np.ndarray) -> np.ndarray:
        """True log-odds of each event given its model logit and its position in [0, 1)."""
        if not self.drift:
            return self.slope * m + self.intercept
        # abrupt: the intercept jumps by +1.2 at one third of the stream;
        # gradual: over the last third the slope falls linearly from `slope` to half of it.
        intercept = self.intercept + np.where(position >= 1.0 / 3.0, 1.2, 0.0)
        fall = np.clip((position - 2.0 / 3.0) * 3.0, 0.0, 1.0)
        slope = self.slope * (1.0 - 0.5 * fall)
        return slope * (m - self.logit_mean) + self.logit_mean * self.slope + intercept


SCENARIOS: dict[str, Scenario] = {
    "click": Scenario(
        name="click",
        description="ad clicks: base rate about 2 %, over-confident scores, labels within the hour",
        span_seconds=7 * DAY,
        logit_mean=-3.2,
        logit_sd=1.2,
        slope=0.7,
        intercept=-2.0,
        positive_delay=(5.0, 60.0),  # a click comes within a minute or so
        negative_delay=(3600.0, 0.0),  # no click is known after a one-hour attribution window
    ),
    "fraud": Scenario(
        name="fraud",
        description="card payments: base rate ~0.27 %, under-confident scores, labels days later",
        span_seconds=90 * DAY,
        logit_mean=-7.5,
        logit_sd=1.1,
        slope=1.5,
        intercept=4.0,
        positive_delay=(1 * DAY, 5 * DAY),  # chargebacks arrive days later
        negative_delay=(3 * DAY, 0.0),  # a payment counts as genuine after three days
    ),
    "drift": Scenario(
        name="drift",
        description="click-like; the score->probability relation shifts abruptly, then gradually",
        span_seconds=30 * DAY,
        logit_mean=-4.0,
        logit_sd=1.0,
        slope=1.0,
        intercept=0.0,
        positive_delay=(5.0, 60.0),
        negative_delay=(3600.0, 0.0),
        drift=True,
    ),
    "campaigns": Scenario(
        name="campaigns",
        description=(
            "click-like, 2,000 campaigns (a `key` column) with Zipf(1.1) traffic, each miscalibrated its own way"
        ),
        span_seconds=7 * DAY,
        logit_mean=-3.5,
        logit_sd=1.0,
        slope=0.8,
        intercept=-1.2,
        positive_delay=(5.0, 60.0),
        negative_delay=(3600.0, 0.0),
        n_keys=2000,
        zipf=1.1,
        key_shift_sd=0.5,
        key_slope_sd=0.25,
        key_intercept_sd=0.6,
    ),
}


@dataclass(frozen=True)
class KeyEffects:
    """The per-key draws of a keyed scenario: traffic share, logit shift, slope and intercept."""

    share: np.ndarray
    shift: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray

    @classmethod
    def draw(cls, spec: Scenario, rng: np.random.Generator) -> KeyEffects:
        k = spec.n_keys
        share = (np.arange(1, k + 1, dtype=np.float64)) ** -spec.zipf
        return cls(
            share=share / share.sum(),
            shift=rng.normal(0.0, spec.key_shift_sd, k),
            slope=spec.slope * np.exp(rng.normal(0.0, spec.key_slope_sd, k)),
            intercept=spec.intercept + rng.normal(0.0, spec.key_intercept_sd, k),
        )

    def events(self, spec: Scenario, keys: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(model logit, true logit)`` of events of these keys from standard normal draws ``z``."""
        m = spec.logit_mean + self.shift[keys] + spec.logit_sd * z
        return m, self.slope[keys] * m + self.intercept[keys]

_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "ipc",
    ".ipc": "ipc",
    ".feather": "ipc",
    ".csv": "csv",
}


def format_from_path(path: str | os.PathLike) -> str | None:
    """``"parquet"``, ``"ipc"`` or ``"csv"`` from a file name's suffix, else None."""
    return _FORMATS.get(Path(path).suffix.lower())


def _schema(keyed: bool = False):
    import pyarrow as pa

    ts = pa.timestamp("ms", tz="UTC")
    fields = [("event_time", ts), ("score", pa.float64()), ("label", pa.bool_()), ("label_time", ts)]
    return pa.schema([*fields, ("key", pa.int64())] if keyed else fields)


class _Writer:
    """Writes record batches to one file of the given format."""

    def __init__(self, path: Path, fmt: str, schema):
        import pyarrow as pa

        self.path = path
        if fmt == "parquet":
            import pyarrow.parquet as pq

            # page checksums, as on every Parquet file streamcal writes: replay verifies them on read
            self._writer = pq.ParquetWriter(path, schema, compression="snappy", write_page_checksum=True)
        elif fmt == "ipc":
            self._sink = pa.OSFile(str(path), "wb")
            self._writer = pa.ipc.new_file(self._sink, schema)
        else:
            import pyarrow.csv as pacsv

            self._writer = pacsv.CSVWriter(str(path), schema)

    def write(self, batch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()
        sink = getattr(self, "_sink", None)
        if sink is not None:
            sink.close()


def _check_int(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        msg = f"`{name}` must be an int; got {value!r} of type {type(value).__name__}."
        raise TypeError(msg)
    if value < low:
        msg = f"`{name}` must be an int in [{low}, inf); got {value!r}."
        raise ValueError(msg)
    return int(value)


def generate(
    path: str | os.PathLike,
    scenario: str = "click",
    n: int = 1_000_000,
    seed: int = 0,
    format: str | None = None,
    *,
    batch_size: int = 1_000_000,
    parts: int = 1,
) -> Path:
    """Write a seeded synthetic event stream.

    Columns: ``event_time`` (timestamp, ms, UTC), ``score`` (float64 in (0, 1)), ``label`` (bool),
    ``label_time`` (timestamp: when the label becomes known; never before ``event_time``).

    Parameters
    ----------
    path : str or path-like
        Output file; with ``parts > 1`` a directory that receives ``part-00000.<ext>``, ... (made
        if missing). The directory it goes in must exist. The output is written under a temporary
        name and renamed when complete.
    scenario : {"click", "fraud", "drift", "campaigns"}
        See :data:`SCENARIOS`; ``"campaigns"`` adds a ``key`` column (int64).
    n : int
        Number of events (rows); up to 1e8 and beyond, generated ``batch_size`` rows at a time.
    seed : int
        Seed; the data depend only on ``seed``, ``scenario`` and ``n``.
    format : {"parquet", "ipc", "csv"}, optional
        Output format; by default from the suffix of ``path`` (Parquet for a name without one). A
        single file named for another format (``x.csv`` with ``format="parquet"``), or with a suffix
        streamcal does not read (``x.txt``) without ``format``, is refused: replay reads a file by its
        name.
    batch_size : int
        Rows generated and written per batch (a Parquet row group / IPC record batch).
    parts : int
        Number of files to split the stream into, in event-time order.

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> import tempfile, pyarrow.parquet as pq
    >>> from streamcal.replay import generate
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = generate(f"{tmp}/clicks.parquet", scenario="click", n=20_000, seed=1)
    ...     table = pq.read_table(out)
    >>> table.column_names
    ['event_time', 'score', 'label', 'label_time']
    >>> print(f"{sum(table['label'].to_pylist()) / table.num_rows:.3f}")
    0.020
    """
    if scenario not in SCENARIOS:
        msg = f"`scenario` must be one of {sorted(SCENARIOS)!r}; got {scenario!r}."
        raise ValueError(msg)
    n = _check_int(n, "n", 0)
    seed = _check_int(seed, "seed", 0)
    batch_size = _check_int(batch_size, "batch_size", 1)
    parts = _check_int(parts, "parts", 1)
    path = Path(path)
    named = format_from_path(path)
    fmt = format if format is not None else (named or "parquet")
    if fmt not in ("parquet", "ipc", "csv"):
        msg = f"`format` must be one of ['parquet', 'ipc', 'csv']; got {fmt!r}."
        raise ValueError(msg)
    # a file that replay would read as another format, or whose format it cannot tell from its name
    if parts == 1 and path.suffix and named is None and format is None:
        msg = (
            f"`path` {str(path)!r} names no format streamcal reads (*.parquet, *.arrow, *.csv); rename it or "
            "pass `format`."
        )
        raise ValueError(msg)
    if parts == 1 and named is not None and named != fmt:
        msg = f"`path` {str(path)!r} is named as {named} but `format` is {fmt!r}; give them the same format."
        raise ValueError(msg)

    # the output goes into an existing directory (with ``parts``: the new directory that holds
    # the parts does), as replay's outputs do: a mistyped directory is refused, not created
    parent = Path(os.path.realpath(path)).parent
    if not parent.is_dir():
        what = "does not exist" if not parent.exists() else "is not a directory"
        msg = f"`path` {str(path)!r}: the directory {str(parent)!r} {what}."
        raise ValueError(msg)
    spec = SCENARIOS[scenario]
    schema = _schema(keyed=spec.n_keys > 0)
    if parts == 1:
        targets = [path]
    else:
        path.mkdir(exist_ok=True)
        ext = {"parquet": "parquet", "ipc": "arrow", "csv": "csv"}[fmt]
        targets = [path / f"part-{k:05d}.{ext}" for k in range(parts)]
    # rows per part, as even as possible
    bounds = [round(n * k / parts) for k in range(parts + 1)]

    # a child generator per column (the keyed scenarios add theirs after the others)
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(7)]
    gap_rng, logit_rng, label_rng, pos_delay_rng, neg_delay_rng, effects_rng, key_rng = streams
    effects = KeyEffects.draw(spec, effects_rng) if spec.n_keys else None
    mean_gap = spec.span_seconds / max(n, 1)
    # the clock runs in integer microseconds, so that summing the gaps batch by batch gives the
    # same times bit for bit whatever the batch size
    clock = 0  # microseconds since START
    done = 0
    for part, target in enumerate(targets):
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        writer = _Writer(tmp, fmt, schema)
        try:
            end = bounds[part + 1]
            while done < end:
                size = min(batch_size, end - done)
                gaps_us = np.round(gap_rng.exponential(mean_gap, size) * 1e6).astype(np.int64)
                t_us = clock + np.cumsum(gaps_us)
                clock = int(t_us[-1])
                if effects is None:
                    keys = None
                    m = logit_rng.normal(spec.logit_mean, spec.logit_sd, size)
                    position = (done + np.arange(size)) / max(n, 1)
                    p = _sigmoid(spec.true_logit(m, position))
                else:
                    keys = key_rng.choice(spec.n_keys, size=size, p=effects.share)
                    m, true_logit = effects.events(spec, keys, logit_rng.standard_normal(size))
                    p = _sigmoid(true_logit)
                label = label_rng.random(size) < p
                pos_delay = spec.positive_delay[0] + pos_delay_rng.exponential(1.0, size) * spec.positive_delay[1]
                neg_delay = spec.negative_delay[0] + neg_delay_rng.exponential(1.0, size) * spec.negative_delay[1]
                delay_us = np.round(np.where(label, pos_delay, neg_delay) * 1e6).astype(np.int64)
                writer.write(_batch(schema, t_us, _sigmoid(m), label, t_us + delay_us, keys))
                done += size
            writer.close()
        except BaseException:
            writer.close()
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, target)
    return path


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _batch(schema, t_us: np.ndarray, score: np.ndarray, label: np.ndarray, label_us: np.ndarray, keys=None):
    import pyarrow as pa

    # milliseconds; label times are rounded up so a label is never known before its event
    t_ms = START_MS + t_us // 1000
    lt_ms = START_MS - (-label_us // 1000)
    ts = schema.field("event_time").type
    columns = [pa.array(t_ms, ts), pa.array(score), pa.array(label), pa.array(lt_ms, ts)]
    if keys is not None:
        columns.append(pa.array(keys, pa.int64()))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def describe_scenarios() -> str:
    """One line per scenario, for ``--help``."""
    return "; ".join(f"{s.name}: {s.description}" for s in SCENARIOS.values())


def expected_base_rate(scenario: str, samples: int = 200_000, seed: int = 0) -> float:
    """Monte-Carlo base rate of a scenario (used by tests and docs); for a keyed scenario, with the
    key effects that ``generate`` draws for the same ``seed``."""
    spec = SCENARIOS[scenario]
    rng = np.random.default_rng(seed)
    if spec.n_keys:  # the key effects of ``generate(..., seed=seed)``
        effects = KeyEffects.draw(spec, np.random.default_rng(np.random.SeedSequence(seed).spawn(7)[5]))
        keys = rng.choice(spec.n_keys, size=samples, p=effects.share)
        return float(np.mean(_sigmoid(effects.events(spec, keys, rng.standard_normal(samples))[1])))
    m = rng.normal(spec.logit_mean, spec.logit_sd, samples)
    position = np.arange(samples) / samples
    return float(np.mean(_sigmoid(spec.true_logit(m, position))))
