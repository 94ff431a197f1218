"""Keyed replay (``group_col=`` / ``--group-col``): outputs equal KeyedCalibrator's own
``prequential`` / ``process`` on the same columns bit for bit, with labels at once and late; the
summary's field-level errors equal ``streamcal.metrics`` on the outputs; null keys, unsupported
methods and options that make no sense with keys are refused and leave nothing behind."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.stats

from streamcal import KeyedCalibrator, PAVCalibrator
from streamcal.cli import main
from streamcal.metrics import field_ece, field_rce, per_key_calibration
from streamcal.replay import ReplayInputError, generate, replay
from streamcal.windows import CountWindow, Decay, TimeWindow

N = 3_000


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """A campaigns stream (int64 keys, late labels), 3,000 events in row groups of 1,000."""
    path = tmp_path_factory.mktemp("keyed") / "campaigns.parquet"
    return generate(path, scenario="campaigns", n=N, seed=5, batch_size=1_000)


def seconds(column) -> np.ndarray:
    """Event / label times in seconds as replay reads them (ms counts scaled)."""
    return column.cast(pa.int64()).to_numpy() * 1e-3


def columns(path):
    t = pq.read_table(path)
    return (
        t["key"].to_numpy(),
        t["score"].to_numpy(),
        t["label"].to_numpy().astype(np.float64),
        seconds(t["event_time"]),
        seconds(t["label_time"]),
    )


def naive_operations(t, label_t):
    """The replay clock written out event by event: the label of ``i`` goes just before the first
    later event ``j > i`` with ``t[j] >= label_t[i]``, labels before one event in order of (label
    time, event); returns ``[(kind, event)]`` for the events, then the labels due by the last time."""
    waiting = []  # (label time, event)
    out = []
    for j in range(t.size):
        waiting.sort()
        due = [item for item in waiting if item[0] <= t[j]]
        waiting = [item for item in waiting if item[0] > t[j]]
        out.extend(("learn", i) for _, i in due)
        out.append(("predict", j))
        waiting.append((label_t[j], j))
    waiting.sort()
    out.extend(("learn", i) for lt, i in waiting if lt <= t[-1])
    return out


def reference_process(cal, keys, s, y, t, label_t):
    """``cal.process`` over the naive operation sequence (a learn carries its label time as
    time): each event's ``(proba, llr)``."""
    ops = naive_operations(t, label_t)
    idx = np.array([i for _, i in ops])
    learn = np.array([kind == "learn" for kind, _ in ops])
    times = np.where(learn, label_t[idx], t[idx])
    proba, llr = cal.process(keys[idx], s[idx], y[idx], learn, times=times)
    return proba[~learn], llr[~learn]


def outputs(path, name="pav"):
    out = pq.read_table(path)
    return out[f"proba_{name}"].to_numpy(), out[f"llr_{name}"].to_numpy(), out


def same_bits(a, b):
    return np.asarray(a, dtype=np.float64).tobytes() == np.asarray(b, dtype=np.float64).tobytes()


def test_labels_at_once_equal_prequential_bit_for_bit(tmp_path, campaigns):
    keys, s, y, t, _ = columns(campaigns)
    out = tmp_path / "out.parquet"
    summary = replay(
        campaigns, "pav", group_col="key", label_time_col=None, output=out, batch_size=777, metrics_window=1_000
    )
    proba, llr, table = outputs(out)
    want_p, want_llr = KeyedCalibrator(PAVCalibrator()).prequential(keys, s, y, times=t)
    assert same_bits(proba, want_p)
    assert same_bits(llr, want_llr)
    # the key column goes to the output like every kept input column
    assert table["key"].to_numpy().tolist() == keys.tolist()
    assert summary.label_mode == "immediate"
    assert isinstance(summary.calibrators["pav"], KeyedCalibrator)


def test_refit_templates_run_keyed_equal_to_their_keyed_calibrator(tmp_path, campaigns):
    from streamcal import PlattCalibrator

    keys, s, y, t, _ = columns(campaigns)
    keys, s, y, t = keys[:3000], s[:3000], y[:3000], t[:3000]
    small = tmp_path / "small.parquet"
    pq.write_table(pq.read_table(campaigns).slice(0, 3000), small)
    out = tmp_path / "out.parquet"
    summary = replay(small, "platt", group_col="key", label_time_col=None, output=out, batch_size=700)
    proba, llr, _table = outputs(out, "platt")
    want_p, want_llr = KeyedCalibrator(PlattCalibrator()).prequential(keys, s, y, times=t)
    assert same_bits(proba, want_p)
    assert same_bits(llr, want_llr)
    assert type(summary.calibrators["platt"].calibrator) is PlattCalibrator


@pytest.mark.parametrize("late", [False, True], ids=["at-once", "late-labels"])
def test_venn_abers_runs_keyed_and_writes_each_keys_interval(tmp_path, campaigns, late):
    # Venn–Abers keys are independent (strength 0): the output's probability, LLR and interval
    # equal the keyed calibrator's own, bit for bit, with labels at once and on the replay clock
    from streamcal import VennAbersCalibrator

    keys, s, y, t, label_t = columns(campaigns)
    out = tmp_path / "out.parquet"
    summary = replay(
        campaigns, "pav,venn-abers", group_col="key", label_time_col="label_time" if late else None, output=out,
        batch_size=700,
    )
    proba, llr, table = outputs(out, "venn-abers")
    reference = KeyedCalibrator(VennAbersCalibrator(), prior_strength=0)
    if late:
        ops = naive_operations(t, label_t)
        idx = np.array([i for _, i in ops])
        learn = np.array([kind == "learn" for kind, _ in ops])
        times = np.where(learn, label_t[idx], t[idx])
        want = [a[~learn] for a in reference.process_with_interval(keys[idx], s[idx], y[idx], learn, times=times)]
    else:
        want = reference.prequential_with_interval(keys, s, y, times=t)
    for got, expected in zip((proba, llr, table["p0_venn-abers"], table["p1_venn-abers"]), want, strict=True):
        assert same_bits(got, expected)
    p0, p1 = table["p0_venn-abers"].to_numpy(), table["p1_venn-abers"].to_numpy()
    assert (p0 <= proba).all()
    assert (proba <= p1).all()
    assert "p0_pav" not in table.column_names  # PAV gives no interval
    assert summary.calibrators["venn-abers"].strength == 0


@pytest.mark.parametrize(
    "window",
    [None, CountWindow(200), Decay(300), TimeWindow(6 * 3600.0)],
    ids=["unbounded", "count", "decay", "time"],
)
def test_late_labels_equal_process_on_the_replay_clock_bit_for_bit(tmp_path, campaigns, window):
    keys, s, y, t, label_t = columns(campaigns)
    out = tmp_path / "out.parquet"
    summary = replay(campaigns, "pav", group_col="key", window=window, output=out, batch_size=500, metrics_window=1_000)
    assert summary.label_mode == "column"
    assert summary.n_in_flight > 0
    proba, llr, _ = outputs(out)
    template = PAVCalibrator() if window is None else PAVCalibrator(window=window)
    reference = KeyedCalibrator(template)
    want_p, want_llr = reference_process(reference, keys, s, y, t, label_t)
    assert same_bits(proba, want_p)
    assert same_bits(llr, want_llr)
    # and the end of the stream learned the same labels: the same maps afterwards
    cal = summary.calibrators["pav"]
    grid_keys = np.repeat(np.unique(keys)[:20], 5)
    grid_s = np.tile([0.001, 0.01, 0.05, 0.2, 0.6], 20)
    assert same_bits(cal.predict_proba(grid_keys, grid_s), reference.predict_proba(grid_keys, grid_s))
    assert cal.n_learned == reference.n_learned == summary.n_learned


def test_summary_holds_the_field_level_errors_of_the_outputs(tmp_path, campaigns):
    keys, _, y, _, _ = columns(campaigns)
    out = tmp_path / "out.parquet"
    summary = replay(campaigns, "pav", group_col="key", output=out, batch_size=600, metrics_window=1_000)
    proba, _, _ = outputs(out)
    keyed = summary.keyed
    got = keyed["methods"]["pav"]
    assert keyed["group_col"] == "key"
    assert keyed["n_keys"] == np.unique(keys).size
    assert got["field_ece"] == pytest.approx(field_ece(keys, y, proba), rel=1e-12, abs=0)
    assert got["field_rce"] == pytest.approx(field_rce(keys, y, proba), rel=1e-12, abs=0)
    table = per_key_calibration(keys, y, proba)
    by_key = {k: i for i, k in enumerate(table["key"])}
    # the largest keys: most events first, each with the per-key table's figures
    events = np.asarray(table["events"])
    assert [e["events"] for e in got["largest"]] == sorted(events.tolist(), reverse=True)[:5]
    # the worst keys: the largest Poisson deviance of positives against the sum of p, among keys
    # of at least 100 events (scipy's Poisson log-pmf: deviance = 2 (logpmf(y; y) - logpmf(y; sum p)))
    ratio = np.asarray(table["ratio"])
    pos, pred = np.asarray(table["positives"], float), np.asarray(table["predicted"], float)
    dev = 2.0 * (scipy.stats.poisson.logpmf(pos, pos) - scipy.stats.poisson.logpmf(pos, pred))
    ranked = np.flatnonzero((events >= keyed["min_events"]) & ~np.isnan(ratio))
    miss = np.abs(pos - pred)
    order = sorted(ranked, key=lambda i: (-dev[i], -miss[i]))
    want = [table["key"][i] for i in order[:5]]
    assert len(want) >= 3  # enough ranked keys for the order to mean something
    assert [e["key"] for e in got["worst"]] == want
    for entry in got["worst"]:
        assert entry["deviance"] == pytest.approx(dev[by_key[entry["key"]]], rel=1e-9, abs=1e-9)
    # a surer miss outranks a larger ratio: the ranked keys' deviances fall down the list
    devs = [e["deviance"] for e in got["worst"]]
    assert devs == sorted(devs, reverse=True)
    for entry in got["worst"] + got["largest"]:
        i = by_key[entry["key"]]
        assert entry["events"] == events[i]
        assert entry["positives"] == table["positives"][i]
        assert entry["predicted"] == pytest.approx(table["predicted"][i], rel=1e-12)
    assert json.loads(json.dumps(keyed)) == keyed  # plain numbers and strings
    text = summary.to_text()
    assert "Keyed by 'key'" in text
    assert f"field ECE {got['field_ece']:.4f}" in text
    assert "worst keys" in text


def test_string_keys_from_any_input_equal_prequential(tmp_path, campaigns):
    pd = pytest.importorskip("pandas")
    keys, s, y, t, _ = columns(campaigns)
    names = np.array([f"campaign-{k}" for k in keys])
    want_p, want_llr = KeyedCalibrator().prequential(names, s, y, times=t)
    frame = pd.DataFrame({"score": s, "label": y, "campaign": names})
    table = pa.table({"score": s, "label": y, "campaign": pa.array(names).dictionary_encode()})
    inputs = [frame, table, pa.table({"score": s, "label": y, "campaign": pa.array(names, pa.large_string())})]
    try:
        import polars as pl

        inputs.append(pl.DataFrame({"score": s, "label": y, "campaign": names}))
    except ImportError:  # polars is optional
        pass
    for i, data in enumerate(inputs):
        out = tmp_path / f"out{i}.parquet"
        summary = replay(data, "pav", group_col="campaign", output=out, batch_size=900, metrics={})
        proba, llr, _ = outputs(out)
        # in file order the replay's times are the event indices, which an unbounded window ignores
        assert same_bits(proba, want_p)
        assert same_bits(llr, want_llr)
        assert summary.keyed["methods"]["pav"]["largest"][0]["key"] == "campaign-0"


def test_weights_and_kept_columns_as_without_a_key(tmp_path, campaigns):
    keys, s, y, t, _ = columns(campaigns)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=s.size)
    table = pq.read_table(campaigns).append_column("w", pa.array(w))
    out = tmp_path / "out.parquet"
    replay(
        table,
        "pav",
        group_col="key",
        weight_col="w",
        label_time_col=None,
        keep_columns=["score"],
        output=out,
        metrics={},
    )
    proba, llr, written = outputs(out)
    want_p, want_llr = KeyedCalibrator().prequential(keys, s, y, weights=w, times=t)
    assert same_bits(proba, want_p)
    assert same_bits(llr, want_llr)
    assert written.column_names == ["score", "proba_pav", "llr_pav"]  # the key read, not kept


def test_sorting_the_input_moves_each_key_with_its_row(tmp_path, campaigns):
    table = pq.read_table(campaigns)
    t = seconds(table["event_time"])
    assert np.all(t[1:] > t[:-1])  # no ties: the sorted order is the file's
    order = np.random.default_rng(0).permutation(table.num_rows)
    shuffled = tmp_path / "shuffled.parquet"
    pq.write_table(table.take(order), shuffled, row_group_size=700)
    a = replay(campaigns, "pav", group_col="key", output=tmp_path / "a.parquet", metrics={}, batch_size=600)
    b = replay(shuffled, "pav", group_col="key", on_unsorted="sort", output=tmp_path / "b.parquet", metrics={})
    out_a, out_b = pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "b.parquet")
    assert out_b["key"].to_pylist() == out_a["key"].to_pylist()
    assert same_bits(out_b["proba_pav"].to_numpy(), out_a["proba_pav"].to_numpy())
    largest_a, largest_b = a.keyed["methods"]["pav"]["largest"], b.keyed["methods"]["pav"]["largest"]
    assert [e["key"] for e in largest_b] == [e["key"] for e in largest_a]
    assert [e["predicted"] for e in largest_b] == pytest.approx([e["predicted"] for e in largest_a], rel=1e-12)


def test_max_keys_and_prior_strength_pass_through(tmp_path, campaigns):
    keys, s, y, t, _ = columns(campaigns)
    out = tmp_path / "out.parquet"
    summary = replay(
        campaigns, "pav", group_col="key", label_time_col=None, prior_strength=20.0, max_keys=50, output=out, metrics={}
    )
    proba, _, _ = outputs(out)
    reference = KeyedCalibrator(prior_strength=20.0, max_keys=50)
    want_p, _ = reference.prequential(keys, s, y, times=t)
    assert same_bits(proba, want_p)
    got = summary.keyed["methods"]["pav"]
    assert got["keys_held"] == 50
    assert got["evictions"] == reference.evictions > 0
    assert got["prior_strength"] == 20.0
    # a KeyedCalibrator given as such runs as it is, and needs a group column
    given = KeyedCalibrator(prior_strength=20.0, max_keys=50)
    again = replay(campaigns, {"mine": given}, group_col="key", label_time_col=None, metrics={})
    assert again.calibrators["mine"] is given
    assert same_bits(given.predict_proba(keys, s), reference.predict_proba(keys, s))
    with pytest.raises(ValueError, match=r"calibrator 'mine' is keyed: name its key column with group_col='NAME'"):
        replay(campaigns, {"mine": given}, label_time_col=None, metrics={})


def test_null_key_is_refused_naming_its_row_and_nothing_is_written(tmp_path, campaigns):
    table = pq.read_table(campaigns)
    key = table["key"].to_pylist()
    key[2_345] = None
    bad = tmp_path / "bad.parquet"
    pq.write_table(
        table.set_column(table.schema.get_field_index("key"), "key", pa.array(key, pa.int64())),
        bad,
        row_group_size=1_000,
    )
    out = tmp_path / "out.parquet"
    with pytest.raises(ReplayInputError, match=r"column 'key', row 2345: the key is null"):
        replay(bad, "pav", group_col="key", output=out, metrics_output=tmp_path / "m.parquet", batch_size=500)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet"]


def test_unsupported_methods_and_options_are_refused_before_anything_is_written(tmp_path, campaigns, capsys):
    out = tmp_path / "out.parquet"
    with pytest.raises(ValueError, match=r"method 'venn-abers' \(VennAbersCalibrator\) runs its keys independently"):
        replay(campaigns, "pav,venn-abers", group_col="key", prior_strength=5.0, output=out)
    with pytest.raises(ValueError, match=r"method 'pav' cannot run keyed: .*bucket edges fixed.*buckets='logit:1024'"):
        replay(campaigns, "pav", group_col="key", buckets="quantile:64", output=out)
    with pytest.raises(ValueError, match=r"max_keys=10 needs a group column"):
        replay(campaigns, "pav", max_keys=10, output=out)
    with pytest.raises(ValueError, match=r"prior_strength"):
        replay(campaigns, "pav", group_col="key", prior_strength=-1.0, output=out)
    with pytest.raises(ReplayInputError, match=r"the key column 'campaign' is missing.*--group-col|group_col"):
        replay(campaigns, "pav", group_col="campaign", output=out)
    with pytest.raises(ReplayInputError, match=r"the key column must be int or string; got type double"):
        replay(campaigns, "pav", group_col="score", output=out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
    # the command line: one line naming the flags, status 2
    for argv, said in (
        (
            ["--method", "venn-abers", "--group-col", "key", "--prior-strength", "5"],
            "method 'venn-abers' (VennAbersCalibrator) runs its keys independently (each key's interval is its own "
            "evidence), so --prior-strength 5.0 does not apply to it",
        ),
        (["--prior-strength", "5"], "--prior-strength 5.0 needs a group column; give it with --group-col NAME"),
    ):
        assert main(["replay", str(campaigns), "-o", str(out), "-q", *argv]) == 2
        assert said in capsys.readouterr().err
    assert main(["replay", str(campaigns), "-q", "--group-col", "key", "--prior-strength", "-2"]) == 2
    assert "--prior-strength: expected 'auto' or a number" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_command_line_prints_the_keyed_summary(tmp_path, campaigns, capsys):
    out = tmp_path / "out.parquet"
    code = main(
        ["replay", str(campaigns), "-o", str(out), "-q", "--group-col", "key", "--max-keys", "1e2", "--metrics", "none"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "Keyed by 'key'" in printed
    assert "largest keys:" in printed
    assert "100 keys held" in printed
    assert pq.read_table(out).column_names[-2:] == ["proba_pav", "llr_pav"]


def test_monitors_watch_the_whole_stream_and_each_key(tmp_path, campaigns, capsys):
    import pandas as pd

    from streamcal.monitor import KeyedMonitor, MeanBiasCS

    # ten keys; the score of key 3 states twice its rate, the others' are right
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 10, size=30_000)
    score = rng.uniform(0.02, 0.3, size=keys.size)
    label = rng.uniform(size=keys.size) < np.where(keys == 3, 0.5 * score, score)
    events = pd.DataFrame({"key": keys, "score": score, "label": label})
    out = tmp_path / "out.parquet"
    summary = replay(events, "pav", group_col="key", monitor=True, output=out, batch_size=3_000)
    # the whole stream, as without keys
    assert set(summary.alarms) == {"pav", "score"}
    # each key on its own: the same as a keyed monitor run on the outputs in event order
    table = pq.read_table(out)
    y = table["label"].to_numpy().astype(float)
    watched = summary.keyed["monitors"]
    assert set(watched) == {"pav", "score"}
    for name, p in (("pav", table["proba_pav"].to_numpy()), ("score", table["score"].to_numpy())):
        reference = KeyedMonitor(MeanBiasCS(), alpha=0.05)
        reference.update_many(table["key"].to_numpy(), y, p)
        got = watched[name]["mean bias"]
        assert got["keys_watched"] == len(reference.keys()) == 10
        assert got["keys_flagged"] == len(reference.alarmed_keys())
        if reference.first_alarm_at is None:
            assert got["first"] is None
        else:
            assert got["first"]["event"] == reference.first_alarm_at - 1
            assert got["first"]["key"] == reference.first_alarm_key
    assert watched["score"]["mean bias"]["first"]["key"] == 3  # the one key whose score is wrong
    assert watched["score"]["mean bias"]["keys_flagged"] == 1
    text = summary.to_text()
    assert "Per key (each key's mean bias on its own; alpha = 0.05 per stream over all keys" in text
    assert "input score: mean bias: 1 of 10 keys flagged, first key 3 at event" in text
    assert main(["replay", str(campaigns), "-q", "--group-col", "key", "--monitor", "--metrics", "none"]) == 0
    assert "Per key (each key's mean bias on its own" in capsys.readouterr().out


@pytest.mark.parametrize("late", [False, True], ids=["at-once", "late-labels"])
def test_the_raw_score_runs_unkeyed_beside_keyed_methods(tmp_path, campaigns, late):
    # the score itself is one map for every key: it passes through, its field-level errors are
    # those of the scores, and the keyed methods beside it are those of a replay without it
    keys, s, y, _, _ = columns(campaigns)
    label_col = {} if late else {"label_time_col": None}
    out, alone = tmp_path / "out.parquet", tmp_path / "alone.parquet"
    summary = replay(campaigns, "raw,pav", group_col="key", output=out, batch_size=900, monitor=True, **label_col)
    replay(campaigns, "pav", group_col="key", output=alone, batch_size=900, **label_col)
    raw_p, _, _ = outputs(out, "raw")
    assert same_bits(raw_p, s)
    assert same_bits(outputs(out)[0], outputs(alone)[0])
    got = summary.keyed["methods"]["raw"]
    assert got["field_ece"] == pytest.approx(field_ece(keys, y, s), rel=1e-12, abs=0)
    assert got["keys_held"] is None
    assert got["prior_strength"] is None
    assert isinstance(summary.calibrators["pav"], KeyedCalibrator)
    assert "raw: field ECE" in summary.to_text()
