"""Replay a keyed stream per campaign (``group_col``), against one global calibration.

A synthetic campaigns stream (2,000 campaigns with Zipf traffic, the model miscalibrated
differently in each, labels up to an hour late) is written to Parquet and replayed twice, each
label learned when it arrives (``label_delay="1.01h"``, the command line's ``--label-delay 1.01h``), through
streaming PAV: once as one stream, once keyed by campaign (``group_col="key"``, the command
line's ``--group-col key``), each campaign's map pooled toward the global one. Both are scored
per campaign with the field-level errors of ``streamcal.metrics``; the keyed replay's summary
lists them itself, with the campaigns furthest from calibrated and the largest ones.

Install: ``pip install .`` (the plain install). Run: ``python examples/replay_keyed.py [--n 200000]``
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from streamcal.metrics import field_ece, field_rce, log_loss
from streamcal.replay import generate, replay


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="events (default 200,000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        stream = generate(tmp / "campaigns.parquet", scenario="campaigns", n=args.n, seed=3)
        print(f"wrote {stream.name}: {args.n:,} events")
        rows = []
        for label, keyed in (("global pav", None), ("keyed pav", "key")):
            out = tmp / f"{label.replace(' ', '_')}.parquet"
            # the labels arrive up to an hour after their events: each is learned when it arrives
            summary = replay(stream, "pav", group_col=keyed, output=out, metrics=None if keyed else {},
                             label_delay="1.01h")
            table = pq.read_table(out, columns=["key", "label", "proba_pav"])
            keys, y, p = table["key"].to_numpy(), table["label"].to_numpy(), table["proba_pav"].to_numpy()
            rows.append((label, log_loss(y, p), field_ece(keys, y, p), field_rce(keys, y, p)))
        print(f"\n{'replay':12s} {'log loss':>9s} {'field ECE':>10s} {'field RCE':>10s}")
        for label, loss, ece, rce in rows:
            print(f"{label:12s} {loss:9.4f} {ece:10.4f} {rce:10.4f}")
        print("\nThe keyed replay's own summary:")
        summary.print()


if __name__ == "__main__":
    main()
