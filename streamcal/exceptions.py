"""Warnings and errors shared across streamcal."""

from __future__ import annotations

__all__ = [
    "ConvergenceWarning",
    "InvalidKeyError",
    "MemoryBoundWarning",
    "NameClashWarning",
    "StateFileError",
    "StatePickleError",
    "StateVersionError",
]


class ConvergenceWarning(RuntimeWarning):
    """An iterative solver (GEV IRLS, Hastie–Tibshirani coupling) stopped at ``max_iter`` before ``tol``.

    Examples
    --------
    >>> import warnings
    >>> from streamcal.exceptions import ConvergenceWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("stopped early", ConvergenceWarning)
    >>> caught[0].category.__name__
    'ConvergenceWarning'
    """


class InvalidKeyError(ValueError, TypeError):
    """A key that cannot be a key (missing, a float, a bool, unhashable), or of the other kind than
    the keys before it (ints and strings never mix). It is both a ``ValueError`` and a
    ``TypeError``: code that catches either catches it, whichever face or column form raised it.

    Examples
    --------
    >>> import streamcal
    >>> from streamcal.exceptions import InvalidKeyError
    >>> cal = streamcal.KeyedCalibrator()
    >>> try:
    ...     cal.update([1, None], [0.2, 0.7], [0, 1])
    ... except ValueError as exc:
    ...     print(type(exc).__name__, "-", exc)
    InvalidKeyError - `keys` must hold integer or string keys; got None at position 1 (a missing key).
    >>> issubclass(InvalidKeyError, TypeError)
    True
    """


class MemoryBoundWarning(RuntimeWarning):
    """A keyed calibrator with a template clone per key and no ``max_keys`` reached its memory bound
    (``key_limit``: the keys whose clones fill half the machine's memory): from then on it evicts the
    least recently updated keys, counted in ``evictions``. Shown by default, once per calibrator.

    Examples
    --------
    >>> import warnings
    >>> from streamcal.exceptions import MemoryBoundWarning
    >>> warnings.simplefilter("error", MemoryBoundWarning)  # make reaching the bound an error instead
    >>> warnings.resetwarnings()
    >>> issubclass(MemoryBoundWarning, RuntimeWarning)
    True
    """


class NameClashWarning(UserWarning):
    """The unrelated distribution also named ``streamcal`` is installed beside streamcal-engine: both
    install a top-level ``streamcal`` package, so one shadows the other. ``import streamcal`` warns
    with this category, naming the other distribution and what to do.

    Examples
    --------
    >>> import warnings
    >>> from streamcal.exceptions import NameClashWarning
    >>> warnings.simplefilter("error", NameClashWarning)  # make the clash an error in a deployment
    >>> warnings.resetwarnings()
    >>> issubclass(NameClashWarning, UserWarning)
    True
    """


class StateFileError(ValueError):
    """A state file that :func:`streamcal.persist.load` refuses: not a streamcal state file, truncated,
    damaged, over the size limits, or describing a learner whose state is inconsistent.

    The message names the file, the part of it (member, attribute path, field) and what was expected
    and found.

    Examples
    --------
    >>> from streamcal import persist
    >>> from streamcal.exceptions import StateFileError
    >>> try:
    ...     persist.from_bytes(b"not a zip file")
    ... except StateFileError as exc:
    ...     print(str(exc)[:48])
    the data is not a streamcal state file, or it is
    """


class StateVersionError(StateFileError):
    """The file was written in a newer format version than this streamcal can read.

    Examples
    --------
    >>> from streamcal.exceptions import StateFileError, StateVersionError
    >>> issubclass(StateVersionError, StateFileError)
    True
    """


class StatePickleError(StateFileError):
    """The file holds pickled objects and ``allow_pickle`` was not given.

    Examples
    --------
    >>> from streamcal.exceptions import StateFileError, StatePickleError
    >>> issubclass(StatePickleError, StateFileError)
    True
    """
