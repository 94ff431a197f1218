"""Fit and apply streaming calibrators over Dask dataframes (docs/design.md §8; extra ``streamcal-engine[dask]``).

:func:`fit` builds one calibrator state per partition (each a plain ``update`` over the partition's
columns, in the worker that holds it) and reduces the states by a tree of
:func:`streamcal.merging.merge` calls, keeping the partitions' order. Because merging is exact, the
result is the calibrator that one process would have built by learning every row in order (see
:mod:`streamcal.merging` for what the order means per window): with integer weights, bit for bit.

:func:`predict` maps a fitted calibrator over the partitions of a score column (predictions never
change a calibrator, so partitions are independent).

Dask is imported only when these functions are called; without it they raise an ``ImportError``
naming the extra to install.

Examples
--------
>>> import numpy as np, pandas as pd
>>> import dask.dataframe as dd
>>> from streamcal import PAVCalibrator
>>> from streamcal import dask as scd
>>> rng = np.random.default_rng(0)
>>> s = rng.uniform(size=4000)
>>> frame = pd.DataFrame({"score": s, "label": rng.uniform(size=4000) < s**2})
>>> ddf = dd.from_pandas(frame, npartitions=4)
>>> cal = scd.fit(PAVCalibrator(), ddf, score="score", label="label", scheduler="sync")
>>> cal.n_learned, np.array_equal(cal.predict_proba(s), PAVCalibrator().update(s, frame["label"]).predict_proba(s))
(4000, True)
>>> scd.predict(cal, ddf, score="score").compute(scheduler="sync").round(2).head(3).tolist()
[0.38, 0.06, 0.0]
"""

from __future__ import annotations

import numpy as np

from streamcal.merging import merge
from streamcal.windows import as_window

__all__ = ["fit", "predict"]

_OUTPUTS = ("proba", "llr", "both")


def _require_dask():
    try:
        import dask
        import dask.dataframe
    except ImportError as exc:
        from streamcal._install import install_hint

        msg = (
            "streamcal.dask needs dask with dataframes: install the extra, "
            f"`{install_hint('dask')}` ({exc})."
        )
        raise ImportError(msg) from None
    return dask


def _check_columns(data, names: dict) -> None:
    columns = list(data.columns)
    for arg, col in names.items():
        if col is not None and col not in columns:
            msg = f"`{arg}` must name a column of `data`; got {col!r}, columns are {columns[:10]!r}."
            raise KeyError(msg)


def _keyed_kind(calibrator, key: str | None) -> bool:
    """Whether ``calibrator`` is keyed (then ``key`` names the key column); refuses a key column
    for an unkeyed calibrator, a keyed one without it, and a keyed calibrator that cannot merge."""
    from streamcal.keyed import KeyedCalibrator
    from streamcal.keyed_offset import KeyedOffsetCalibrator

    if isinstance(calibrator, KeyedOffsetCalibrator):
        msg = (
            "`calibrator` must be one that merges; KeyedOffsetCalibrator does not (each key's sums count its "
            "events at the global map's probability of their moment, which a partition cannot know): use "
            "KeyedCalibrator, or its own `update` in one process."
        )
        raise TypeError(msg)
    keyed = isinstance(calibrator, KeyedCalibrator)
    if keyed and key is None:
        msg = f"`key` must name the key column of `data` for a {type(calibrator).__name__}; got None."
        raise ValueError(msg)
    if not keyed and key is not None:
        msg = f"`key` is for keyed calibrators (KeyedCalibrator); got key={key!r} with a {type(calibrator).__name__}."
        raise ValueError(msg)
    return keyed


def _window_of(calibrator):
    """The window of ``calibrator``'s events: a keyed calibrator's template's (every key's and the global map's)."""
    from streamcal.keyed import KeyedCalibrator

    if isinstance(calibrator, KeyedCalibrator):
        return as_window(calibrator.global_calibrator.window)
    return as_window(calibrator.window)


def _template(calibrator, data, score: str):
    """An empty calibrator to clone per partition; quantile edges are fixed from the first rows."""
    from streamcal._streaming import StreamingCalibrator
    from streamcal.keyed import KeyedCalibrator

    if isinstance(calibrator, KeyedCalibrator):
        if calibrator.n_learned:
            msg = (
                f"`calibrator` must be fresh (it is cloned per partition); it has learned "
                f"{calibrator.n_learned} events."
            )
            raise ValueError(msg)
        return calibrator.clone()
    if not isinstance(calibrator, StreamingCalibrator):
        msg = f"`calibrator` must be a streamcal streaming calibrator; got {type(calibrator).__name__}."
        raise TypeError(msg)
    if calibrator.n_learned:
        msg = f"`calibrator` must be fresh (it is cloned per partition); it has learned {calibrator.n_learned} events."
        raise ValueError(msg)
    template = calibrator.clone()
    from streamcal.buckets import as_buckets

    buckets = as_buckets(calibrator.buckets)  # the strategy a shorthand (buckets=1024) means
    warmup = int(buckets.warmup)
    if warmup:
        # a single calibrator would learn its edges from the first `warmup` scores: use those
        from streamcal.buckets import Edges

        sample = data[score].head(warmup, npartitions=-1, compute=True).to_numpy(dtype=np.float64)
        if sample.size < warmup:
            msg = f"`data` has {sample.size} rows, fewer than the {warmup} the quantile edges need."
            raise ValueError(msg)
        edges = buckets.bucket_edges(sample)
        centres = buckets.bucket_centres(sample)
        template = template.clone({"buckets": Edges(edges=tuple(edges), centres=tuple(centres))})
    return template


def _seconds(column) -> np.ndarray:
    """A time column as float seconds: datetimes (time zone or not) as seconds since the Unix
    epoch (UTC for a zone), time differences as seconds, numbers as they are (as ``streamcal
    replay`` reads a timestamp column)."""
    import pandas as pd

    dtype = column.dtype
    if pd.api.types.is_datetime64_any_dtype(dtype):
        epoch = pd.Timestamp(0, tz="UTC") if getattr(dtype, "tz", None) is not None else pd.Timestamp(0)
        return ((column - epoch) / pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64, na_value=np.nan)
    if pd.api.types.is_timedelta64_dtype(dtype):
        return (column / pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64, na_value=np.nan)
    return column.to_numpy(dtype=np.float64)


def _in_partition(exc: Exception, number: int):
    """``exc`` (a refused value) with the partition it came from named: positions in streamcal's
    messages count from the partition's first row."""
    msg = f"{exc} (in partition {number} of `data`; positions count from that partition's first row)"
    try:
        return type(exc)(msg)
    except Exception:  # an exception class that takes other arguments keeps its own message
        return exc


def _fit_partition(template, frame, score, label, weight, time, number=0, key=None):
    cal = template.clone()
    if len(frame) == 0:
        return cal
    if time is not None and _window_of(cal).uses_times:
        frame = frame.sort_values(time, kind="stable")  # time-clock windows learn in time order
    columns = (
        frame[score].to_numpy(dtype=np.float64),
        frame[label].to_numpy(),
    )
    given = {
        "weights": None if weight is None else frame[weight].to_numpy(dtype=np.float64),
        "times": None if time is None else _seconds(frame[time]),
    }
    try:
        if key is not None:
            cal.update(frame[key].to_numpy(), *columns, **given)
        else:
            cal.update(*columns, **given)
    except (ValueError, TypeError) as exc:
        raise _in_partition(exc, number) from None
    return cal


def _merge_states(states):
    return merge(states)


def fit(
    calibrator,
    data,
    score: str,
    label: str,
    *,
    weight: str | None = None,
    time: str | None = None,
    split_every: int = 8,
    scheduler=None,
    compute: bool = True,
    key: str | None = None,
):
    """Fit a streaming calibrator over a Dask dataframe: one state per partition, tree-merged.

    Parameters
    ----------
    calibrator
        A fresh streamcal streaming calibrator (``PAVCalibrator(...)``, ...) or
        :class:`streamcal.KeyedCalibrator` (then ``key`` names the key column): it is cloned per
        partition and left untouched. ``QuantileEdges`` buckets are fixed first from the first
        ``warmup`` scores of ``data`` (what one calibrator over the rows in order would use); the
        result then has ``Edges`` buckets with those edges. ``KeyedOffsetCalibrator`` does not
        merge and is refused.
    data
        A ``dask.dataframe.DataFrame`` (for instance ``dask.dataframe.read_parquet`` of a
        directory). Its partitions are taken in order: for count windows and decay by events the
        rows must be in stream order across partitions; time windows and decay by time sort each
        partition by ``time`` and need no global order.
    score, label
        Names of the score and binary label columns.
    weight, time
        Optional names of the sample weight and event time columns (``time`` is required by
        time windows and decay by time). A datetime column is read as seconds since the Unix
        epoch (UTC), a time-difference column as seconds, as ``streamcal replay`` reads them:
        ``window="1h"`` is then one hour.
    split_every
        Fan-in of the merge tree.
    scheduler
        Passed to ``dask.compute`` (``None``: the current default, or the active
        ``distributed.Client``).
    compute
        Return the fitted calibrator (True) or the ``dask.delayed`` object that computes it.
    key
        The key column of a keyed calibrator (ints or strings; a null key is refused, naming
        its partition and row). Each partition builds its own keyed state (every key's window
        and the global map over the partition's rows) and the states merge per key as
        :func:`streamcal.merging.merge` merges keyed calibrators: every key's window and the
        global map are those of one calibrator over the rows in order. What the partitions
        cannot share is the pooled prior's history: each key's expected positives (the
        automatic strength's shift) are counted against its partition's global map, not the
        whole stream's; with a numeric ``prior_strength`` or 0 that history plays no part. The
        merged calibrator's prior is taken from the merged global map (one calibrator's lags on
        its refresh schedule: ``replace_global(cal.global_calibrator)`` brings it to the same
        point). PAV's score-prior strength, where a key's template keeps it, is refitted to the
        merged window, as :func:`~streamcal.merging.merge` does.

    Returns
    -------
    The fitted calibrator (or a delayed one).
    """
    dask = _require_dask()
    from dask import dataframe as dd

    from streamcal._validation import check_scalar

    if not isinstance(data, dd.DataFrame):
        msg = (
            f"`data` must be a dask DataFrame; got a {type(data).__module__.split('.')[0]} {type(data).__name__} "
            "(a pandas frame: dask.dataframe.from_pandas(frame, npartitions=...), or the calibrator's own `update`)."
        )
        raise TypeError(msg)
    check_scalar(split_every, "split_every", int, low=2)
    _keyed_kind(calibrator, key)
    _check_columns(data, {"score": score, "label": label, "weight": weight, "time": time, "key": key})
    template = _template(calibrator, data, score)
    window = _window_of(template)
    if window.uses_times and time is None:
        msg = f"{type(window).__name__} needs event times: pass `time=` (a column of `data`)."
        raise ValueError(msg)
    columns = [c for c in dict.fromkeys((key, score, label, weight, time)) if c is not None]
    parts = data[columns].to_delayed()
    fit_part = dask.delayed(_fit_partition, pure=True)
    merge_parts = dask.delayed(_merge_states, pure=True)
    states = [fit_part(template, part, score, label, weight, time, i, key) for i, part in enumerate(parts)]
    while len(states) > 1:
        states = [merge_parts(states[i : i + split_every]) for i in range(0, len(states), split_every)]
    result = states[0]
    if not compute:
        return result
    (fitted,) = dask.compute(result, scheduler=scheduler)
    return fitted


def _predict_partition(series, calibrator, output, key=None, partition_info=None):
    import pandas as pd

    if key is not None:  # a frame of the key and score columns
        args = (series[key].to_numpy(), series.drop(columns=key).iloc[:, 0].to_numpy(dtype=np.float64))
    else:
        args = (series.to_numpy(dtype=np.float64),)
    try:
        if output == "proba":
            return pd.Series(calibrator.predict_proba(*args), index=series.index, name="proba")
        if output == "llr":
            return pd.Series(calibrator.predict_llr(*args), index=series.index, name="llr")
        return pd.DataFrame(
            {"proba": calibrator.predict_proba(*args), "llr": calibrator.predict_llr(*args)},
            index=series.index,
        )
    except (ValueError, TypeError) as exc:
        number = partition_info["number"] if partition_info else 0
        raise _in_partition(exc, number) from None


def predict(calibrator, data, score: str | None = None, *, output: str = "proba", key: str | None = None):
    """Calibrated probabilities and/or LLRs of a Dask score column (lazy).

    Parameters
    ----------
    calibrator
        A fitted streamcal streaming calibrator or :class:`streamcal.KeyedCalibrator` (it is not
        changed).
    data
        A Dask dataframe (then ``score`` names the column) or a Dask series of scores (not for
        a keyed calibrator, which reads two columns).
    score
        Name of the score column of a dataframe.
    output
        ``"proba"`` or ``"llr"`` (a series of that name), or ``"both"`` (a dataframe with columns
        ``proba`` and ``llr``).
    key
        The key column of a dataframe, for a keyed calibrator: each row is served its key's map
        (the global map for a key without a state).

    Returns
    -------
    A Dask series or dataframe aligned with ``data``; add it with ``data.assign(...)``.
    """
    _require_dask()
    import pandas as pd
    from dask import dataframe as dd

    from streamcal._validation import check_scalar

    check_scalar(output, "output", choices=_OUTPUTS)
    keyed = _keyed_kind(calibrator, key)
    if keyed and not isinstance(data, dd.DataFrame):
        msg = (
            "`data` must be a dask DataFrame holding the key and score columns for a keyed calibrator; "
            f"got {type(data).__name__}."
        )
        raise TypeError(msg)
    if isinstance(data, dd.DataFrame):
        if score is None:
            msg = "`score` must name the score column when `data` is a dataframe."
            raise ValueError(msg)
        _check_columns(data, {"score": score, "key": key})
        if keyed and key == score:
            msg = f"`key` and `score` must name two columns; got {key!r} for both."
            raise ValueError(msg)
        series = data[[key, score]] if keyed else data[score]
    elif isinstance(data, dd.Series):
        series = data
    else:
        msg = f"`data` must be a dask DataFrame or Series; got {type(data).__name__}."
        raise TypeError(msg)
    if output == "both":
        meta = pd.DataFrame({"proba": pd.Series(dtype="float64"), "llr": pd.Series(dtype="float64")})
    else:
        meta = pd.Series(dtype="float64", name=output)
    return series.map_partitions(_predict_partition, calibrator, output, key, meta=meta)
