"""GEV's river face hands its one compiled call two packed buffers (``glm_refit.gev_river_packed``).

The call reads the refit's arrays as sections of the buffers, and the kept event's tuple holds
the call's arguments while the face is live; the reference is ``prequential``'s array face,
which runs neither. A save and load and an array ``update`` in the middle of the river stream
rebuild the buffers and end the live state; the pairs still serve ``prequential``'s bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamcal import GEVCalibrator, persist


def _stream(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(-2.0, 1.5, n)
    return 1 / (1 + np.exp(-z)), rng.uniform(size=n) < 1 / (1 + np.exp(-(0.6 * z - 1.0)))


@pytest.mark.parametrize(
    "make",
    [GEVCalibrator, lambda: GEVCalibrator(xi=0.25), lambda: GEVCalibrator(prior=None)],
    ids=["default", "fixed-xi", "no-prior"],
)
def test_the_packed_river_face_serves_prequential_bits_across_a_load_and_an_update(make):
    scores, labels = _stream(1500, 21)
    proba, _ = make().prequential(scores, labels)
    cal = make()
    served = []
    links = set()
    for i, (s, y) in enumerate(zip(scores, labels, strict=True)):
        if i == 700:  # the buffers rebuilt from the saved state
            cal = persist.from_bytes(persist.to_bytes(cal), allow_pickle=True)
        if 900 <= i < 920:  # the array face in the middle, then the river face again
            served.append(float(cal.predict_proba(scores[i : i + 1])[0]))
            cal.update(scores[i : i + 1], labels[i : i + 1])
            continue
        x = {"score": float(s)}
        served.append(cal.predict_proba_one(x)[True])
        cal.learn_one(x, bool(y))
        links.add(cal.link_)
    np.testing.assert_array_equal(np.array(served), proba)
    assert "gev" in links  # the GEV shapes served (the default's after the prior is refuted)
