"""The replay's remark on label delays that differ between the classes (delayed-feedback bias)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamcal.replay import replay
from streamcal.replay._engine import LabelDelays, _duration_up
from streamcal.replay.generate import generate
from streamcal.windows import parse_duration


def _note(summary) -> str | None:
    found = [n for n in summary.notes if "delayed-feedback" in n]
    assert len(found) <= 1
    return found[0] if found else None


def _stream(n: int, delay_pos, delay_neg, seed: int = 0) -> pd.DataFrame:
    """``n`` events one second apart, labels after the given delays (arrays or scalars, seconds)."""
    rng = np.random.default_rng(seed)
    score = rng.uniform(0.01, 0.3, size=n)
    label = rng.uniform(size=n) < score
    t = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.arange(n), unit="s")
    delay = np.where(label, delay_pos, delay_neg)
    return pd.DataFrame(
        {"event_time": t, "score": score, "label": label, "label_time": t + pd.to_timedelta(delay, unit="s")}
    )


def test_asymmetric_delays_are_named_with_the_option_that_removes_them():
    frame = _stream(20_000, 1.0, 3600.0)
    summary = replay(frame, "pav")
    note = _note(summary)
    assert note is not None
    assert "positives' arrive after 1 s on average, negatives' after 1 h" in note
    value = note.rsplit("label_delay=", 1)[1].rstrip(".").strip("'")
    assert parse_duration(value, "label_delay") >= 3600.0  # learns no label before it arrives


def test_the_advice_removes_the_bias_on_the_click_scenario(tmp_path):
    path = generate(tmp_path / "click.parquet", "click", n=60_000, seed=3)
    biased = replay(path, "pav", output=tmp_path / "a.parquet")
    value = _note(biased).rsplit("label_delay=", 1)[1].rstrip(".").strip("'")
    fixed = replay(path, "pav", label_delay=value, output=tmp_path / "b.parquet")
    assert _note(fixed) is None
    truth = pd.read_parquet(path)["label"].to_numpy().sum()
    over = [pd.read_parquet(tmp_path / f)["proba_pav"].sum() / truth - 1.0 for f in ("a.parquet", "b.parquet")]
    assert over[0] > 0.05  # positives learned an hour before their negatives: over-predicts
    assert abs(over[1]) < over[0] / 2


@pytest.mark.parametrize(
    "delays",
    [
        (3600.0, 3600.0),  # the same delay
        (np.arange(20_000) % 97 * 60.0, np.arange(20_000) % 97 * 60.0),  # the same spread
        (0.5, 1.0),  # different, but shorter than 100 events at one event per second
    ],
)
def test_no_remark_when_the_classes_arrive_alike_or_the_gap_is_short(delays):
    assert _note(replay(_stream(20_000, *delays), "pav")) is None


def test_no_remark_with_a_fixed_delay_or_labels_at_once():
    frame = _stream(20_000, 1.0, 3600.0)
    assert _note(replay(frame, "pav", label_delay="2h")) is None
    assert _note(replay(frame, "pav", label_time_col=None)) is None


def test_the_command_line_names_its_flag(tmp_path, capsys):
    from streamcal.cli import main

    path = tmp_path / "s.parquet"
    _stream(20_000, 1.0, 3600.0).to_parquet(path)
    assert main(["replay", str(path), "--no-output"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "delayed-feedback bias" in out
    assert "--label-delay 1h" in out


def test_delays_tally_against_a_direct_computation():
    rng = np.random.default_rng(7)
    n = 5_000
    t = np.cumsum(rng.exponential(2.0, size=n))
    y = (rng.uniform(size=n) < 0.1).astype(np.float64)
    label_t = t + rng.exponential(np.where(y == 1.0, 10.0, 300.0))
    label_t[rng.uniform(size=n) < 0.05] = np.inf  # never arrives: not counted
    tally = LabelDelays()
    for part in np.array_split(np.arange(n), 7):  # batch by batch
        tally.add(t[part], y[part], label_t[part])
    known = np.isfinite(label_t)
    for c in (0, 1):
        mask = known & (y == c)
        assert tally.n[c] == mask.sum()
        assert tally.mean(c) == pytest.approx((label_t - t)[mask].mean(), rel=1e-12)
    assert tally.longest == (label_t - t)[known].max()
    assert tally.note(n, float(t[-1] - t[0]), timestamps=True) is not None
    assert LabelDelays().note(n, 100.0, timestamps=True) is None  # no labels yet


@pytest.mark.parametrize("seconds", [0.25, 59.5, 60.0, 3600.001, 86_400.0, 2_635_343.0])
def test_the_suggested_delay_is_never_shorter_than_the_longest(seconds):
    text = _duration_up(seconds)
    assert seconds <= parse_duration(text, "label_delay") <= seconds * 1.01 + 1e-9
