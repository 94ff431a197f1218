"""The bucket layout of a histogram: its score domain, bucket edges and centres.

One :class:`BucketLayout` is shared by every row of a histogram (one row per calibrator, or one
per key). It knows the score domain from the bucket strategy at once, and the edges and centres
from the start or, for quantile edges, once the warm-up sample is known (:meth:`BucketLayout.build`).
It finds scores' buckets (the kernels' guided search, and Python's ``bisect`` for one score), and
checks a restored copy of itself.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from streamcal._kernels import _config
from streamcal._kernels import histogram as _h
from streamcal._validation import as_1d_float
from streamcal.buckets import LogitGrid, UniformGrid, bucket_of_score, check_edges

__all__ = ["BucketLayout", "check_layout", "finite_range"]


class BucketLayout:
    """The buckets that every row of a histogram shares.

    Parameters
    ----------
    buckets
        The bucket strategy (:mod:`streamcal.buckets`), already parsed from any shorthand.

    Attributes
    ----------
    score_low, score_high : float
        The accepted score range, infinite ends replaced by the largest floats so that one
        comparison ``score_low <= s <= score_high`` also rejects NaN and infinities.
    probability_inputs : bool
        Whether the scores are probabilities (the strategy's flag).
    kind : str
        The strategy's class name (for messages).
    edges, cuts, centres : numpy.ndarray or None
        The ``B + 1`` edges, the ``B - 1`` interior edges and the ``B`` centres; None until the
        edges are known.

    Examples
    --------
    >>> from streamcal._layout import BucketLayout
    >>> from streamcal.buckets import UniformGrid
    >>> layout = BucketLayout(UniformGrid(4, 0.0, 2.0))
    >>> layout.n_buckets, layout.bucket_of(1.2), layout.centres.tolist()
    (4, 2, [0.25, 0.75, 1.25, 1.75])
    """

    def __init__(self, buckets):
        self.score_low, self.score_high = finite_range(buckets.score_range)
        self.probability_inputs = bool(buckets.probability_inputs)
        self.kind = type(buckets).__name__
        self.edges = self.cuts = self.centres = None
        if not buckets.warmup:
            key = _grid_key(buckets)
            built = _BUILT.get(key) if key is not None else None
            if built is None:
                self.build(buckets.bucket_edges(), buckets.bucket_centres())
                if key is not None:
                    if len(_BUILT) >= _BUILT_MAX:
                        _BUILT.clear()
                    _BUILT[key] = {name: self.__dict__[name] for name in _BUILT_NAMES}
            else:
                self.__dict__.update(built)

    def build(self, edges, centres) -> None:
        """Set the edges and centres (checked: :func:`check_layout`)."""
        edges, centres = check_layout(edges, centres)
        self.edges = edges
        self.cuts = np.ascontiguousarray(edges[1:-1])
        self.cuts_list = self.cuts.tolist()
        self.guide = _h.bucket_guide(self.cuts)
        self.centres = centres
        self.centres_list = centres.tolist()

    @property
    def built(self) -> bool:
        """Whether the edges are known."""
        return self.edges is not None

    @property
    def n_buckets(self) -> int | None:
        return None if self.centres is None else int(self.centres.size)

    def bucket_of(self, s: float) -> int:
        """The bucket of one checked score."""
        return bucket_of_score(self.cuts_list, s)

    def buckets_checked(self, s: np.ndarray) -> tuple[np.ndarray, int]:
        """``(buckets, bad)``: the scores' buckets, found in the pass that checks them; ``bad`` is
        the position of the first score that is not finite or outside the domain (-1: none; then
        the buckets are not all written)."""
        b = np.empty(s.size, dtype=np.intp)
        bad = _config.run(_h.check_bucket_index, s.size, self.cuts, self.guide, self.score_low, self.score_high, s, b)
        return b, bad

    def same_as(self, other: BucketLayout) -> bool:
        """Whether both have the same edges and centres."""
        return np.array_equal(self.edges, other.edges) and np.array_equal(self.centres, other.centres)

    # saved state ---------------------------------------------------------------------------------
    #: the attributes under the names a calibrator's saved state gives them
    SAVED_NAMES: ClassVar[dict[str, str]] = {
        "_edges": "edges",
        "_cuts": "cuts",
        "_cuts_list": "cuts_list",
        "_centres": "centres",
        "_centres_list": "centres_list",
    }

    def saved(self) -> dict:
        """The edges, cuts and centres under their saved names (copies; none before they are known)."""
        if not self.built:
            return {}
        # copies: layouts of equal grids share these (see _BUILT), a saved state holds its own
        return {key: self.__dict__[name].copy() for key, name in self.SAVED_NAMES.items()}

    @classmethod
    def from_saved(cls, state: dict, buckets) -> BucketLayout:
        """The layout of a checked saved state (its attributes are popped from ``state``)."""
        layout = cls.__new__(cls)
        layout.score_low, layout.score_high = finite_range(buckets.score_range)
        layout.probability_inputs = bool(buckets.probability_inputs)
        layout.kind = type(buckets).__name__
        layout.edges = layout.cuts = layout.centres = None
        for key, name in cls.SAVED_NAMES.items():
            if key in state:
                layout.__dict__[name] = state.pop(key)
        if layout.built:
            layout.guide = _h.bucket_guide(layout.cuts)
        return layout

    @staticmethod
    def check_saved(state: dict, buckets) -> int:
        """Check the saved edges, cuts and centres of a built layout against the strategy
        ``buckets``; returns the number of buckets. Raises
        :class:`streamcal.exceptions.StateFileError` naming what is wrong."""
        from streamcal import _state_check as c
        from streamcal.buckets import Edges, LogitGrid, QuantileEdges, UniformGrid

        edges = c.need_array(state["_edges"], "_edges", np.float64)
        centres = c.need_array(state["_centres"], "_centres", np.float64)
        B = centres.size
        if B < 1 or edges.size != B + 1:
            c.fail(f"`_edges`: expected one more edge than the {B} bucket centres; found {edges.size}.")
        for name, a in (("_edges", edges), ("_centres", centres)):
            c.need_finite(a, name)
            c.need_increasing(a, name)
        cuts = c.need_array(state["_cuts"], "_cuts", np.float64, size=B - 1)
        if not np.array_equal(cuts, edges[1:-1]):
            c.fail("`_cuts`: expected the interior bucket edges, `_edges[1:-1]`.")
        for name, array in (("_cuts_list", cuts), ("_centres_list", centres)):
            value = state[name]
            if type(value) is not list or len(value) != array.size or value != array.tolist():
                found = c.brief(value)
                c.fail(f"`{name}`: expected the {array.size} values of `{name[:-5]}` as a list; found {found}.")
        kind = type(buckets)
        if kind is QuantileEdges and buckets.n_buckets < B:
            c.fail(f"`_centres`: expected at most `n_buckets` = {buckets.n_buckets} buckets; found {B}.")
        elif kind in (LogitGrid, UniformGrid):
            if buckets.n_buckets != B:
                c.fail(f"`_centres`: expected `n_buckets` = {buckets.n_buckets} buckets; found {B}.")
            c.close_to(edges, buckets.bucket_edges(), "_edges", f"the edges of {kind.__name__}")
            c.close_to(centres, buckets.bucket_centres(), "_centres", f"the centres of {kind.__name__}")
        elif kind is Edges and not (
            np.array_equal(edges, buckets.bucket_edges()) and np.array_equal(centres, buckets.bucket_centres())
        ):
            c.fail("`_edges`/`_centres`: expected the edges and centres given to Edges.")
        return B


def check_layout(edges, centres) -> tuple[np.ndarray, np.ndarray]:
    """A bucket strategy's edges and centres, checked: ``B + 1`` finite, strictly increasing edges
    and ``B`` finite, strictly increasing centres, each within its bucket."""
    e = check_edges(edges, "edges")
    c = as_1d_float(centres, "centres", allow_empty=True)
    if c.size != e.size - 1:
        msg = f"`centres` must hold one value per bucket ({e.size - 1}); got {c.size}."
        raise ValueError(msg)
    bad = ~((c >= e[:-1]) & (c <= e[1:]))  # also NaN
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        msg = (
            f"`centres` must lie within their buckets; got {float(c[b])!r} for bucket {b}, "
            f"[{float(e[b])!r}, {float(e[b + 1])!r}]."
        )
        raise ValueError(msg)
    if c.size > 1 and not (np.diff(c) > 0.0).all():
        b = int(np.flatnonzero(~(np.diff(c) > 0.0))[0]) + 1
        msg = f"`centres` must be strictly increasing; got {float(c[b])!r} at position {b} after {float(c[b - 1])!r}."
        raise ValueError(msg)
    return np.ascontiguousarray(e, dtype=np.float64), np.ascontiguousarray(c, dtype=np.float64)


def finite_range(score_range) -> tuple[float, float]:
    """A bucket strategy's score range with its infinite ends replaced by the largest floats, so
    that one comparison ``low <= s <= high`` rejects ±inf and NaN (both faces, and the kernels)."""
    low, high = (float(v) for v in score_range)
    return max(low, -_BIG), min(high, _BIG)


_BIG = float(np.finfo(np.float64).max)

# The built layouts of the fixed grids, shared between layouts of equal grids: a grid's edges,
# centres and search guide are a function of its three parameters, and nothing writes into them
# once built (a restored or rebuilt layout gets arrays of its own). Building them is most of a
# calibrator's construction (pairwise coupling builds one per pair of classes, keyed templates
# one per clone).
_BUILT: dict = {}
_BUILT_MAX = 64
_BUILT_NAMES = ("edges", "cuts", "cuts_list", "guide", "centres", "centres_list")


def _grid_key(buckets):
    """The key of a fixed grid's built layout in :data:`_BUILT`, or None for other strategies
    (and for parameters other than plain ints and floats, whose equality may not decide the edges)."""
    kind = type(buckets)
    if kind is not LogitGrid and kind is not UniformGrid:
        return None
    params = (buckets.n_buckets, buckets.low, buckets.high)
    if any(type(v) is not float and type(v) is not int for v in params):
        return None
    return (kind, *((type(v), repr(v)) for v in params))  # repr: -0.0 is not 0.0 here
