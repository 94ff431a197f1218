"""benchmarks/bench_keyed.py runs at a small size, and its stream and state measure are what it says."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_keyed.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_keyed", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stream_is_seeded_zipf_and_miscalibrated_per_key():
    bench = _bench()
    keys, scores, labels = bench.keyed_stream(200_000, 1_000)
    again = bench.keyed_stream(200_000, 1_000)
    assert all(np.array_equal(a, b) for a, b in zip((keys, scores, labels), again, strict=True))
    counts = np.sort(np.bincount(keys, minlength=1_000))[::-1]
    p = np.arange(1, 1_001) ** -1.1
    expected = p / p.sum() * keys.size
    assert np.allclose(counts[:5], expected[:5], rtol=0.05)  # Zipf(1.1) head
    assert scores.min() > 0.0
    assert scores.max() < 1.0
    assert 0.02 < labels.mean() < 0.2
    # per key the labels' rate departs from the mean score more than sampling explains
    busy = np.flatnonzero(np.bincount(keys) >= 2_000)
    gaps = [labels[keys == k].mean() / scores[keys == k].mean() for k in busy]
    assert np.std(np.log(gaps)) > 0.1


def test_the_state_measure_counts_the_keyed_arrays_and_stays_below_dense_rows():
    bench = _bench()
    keys, scores, labels = bench.keyed_stream(20_000, 500)
    cal = bench.make_keyed("count", "auto")
    empty = bench.state_bytes(cal)
    cal.prequential(keys, scores, labels)
    full = bench.state_bytes(cal)
    assert empty < full < cal.n_keys * 1024 * 3 * 8
    assert full > sum(v.nbytes for v in cal.__getstate__().values() if isinstance(v, np.ndarray))


def test_the_script_runs_small():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--events", "3000", "--keys", "50", "--rounds", "1", "--windows", "count"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "keyed prior_strength=auto:" in out
    assert "keyed prior_strength=0:" in out
    assert out.count("peak RSS") == 3
    assert "dense rows" in out


def test_the_size_classes_split_the_events_and_keys_of_the_stream():
    bench = _bench()
    keys, scores, labels = bench.keyed_stream(60_000, 300)
    rows = bench.bench_by_size(keys, scores, labels, "count")
    classes, total = rows[:-1], rows[-1]
    assert total[:3] == ("all", keys.size, np.unique(keys).size)
    assert sum(r[1] for r in classes) == keys.size  # every event in exactly one class
    assert sum(r[2] for r in classes) == np.unique(keys).size
    sizes = np.bincount(keys)
    assert classes[2][2] == int(np.sum(sizes >= 10_000))  # the heavy class: keys with >= 1e4 events
    assert classes[2][2] >= 1
    assert all(r[3] > 0.0 for r in rows if r[1] > 0)


def test_the_ab_child_reports_this_tree_and_a_digest_per_case():
    bench = _bench()
    out = bench.ab_child(3_000, 50, ["count", "decay"], ["auto"])
    assert Path(out["streamcal"]).resolve().is_relative_to(ROOT)
    assert set(out["cases"]) == {"count, prior_strength=auto", "decay, prior_strength=auto"}
    again = bench.ab_child(3_000, 50, ["count"], ["auto"])
    case = out["cases"]["count, prior_strength=auto"]
    assert case["digest"] == again["cases"]["count, prior_strength=auto"]["digest"]  # the same stream, same bits
    assert case["digest"] != out["cases"]["decay, prior_strength=auto"]["digest"]
    assert case["seconds"] > 0.0


def test_old_refuses_an_unknown_revision_by_name():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--events", "3000", "--keys", "50", "--old", "no-such-revision-xyz"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode != 0
    assert "--old must name a git revision" in result.stderr
    assert "no-such-revision-xyz" in result.stderr
