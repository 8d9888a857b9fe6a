"""Validation helpers shared by every instance dataclass.

Every failure raises :class:`InstanceError` (a ``ValueError``) whose message names the
parameter and the constraint it violates, so that bad input never reaches numpy.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Iterable, Sequence

import numpy as np


class InputError(ValueError):
    """Bad input from the user (a parameter outside its domain, a malformed file or option).

    The one exception class for the user's mistakes: the CLI prints its message as one line
    and exits with status 2. Anything else that escapes is a defect of the tool (exit 1).
    The message names the parameter and the constraint.
    """


class InstanceError(InputError):
    """An instance parameter violates its constraint. The message names both."""


def finite(*xs) -> bool:
    """True when every argument is a finite real number (None, NaN, inf, booleans and non-numbers are
    not): the one fail-closed test behind every comparison that decides a verdict (``proofs_check.core``
    and the solvers' engines use it)."""
    for x in xs:
        if x is None or isinstance(x, (bool, np.bool_)):
            return False
        try:
            if not math.isfinite(float(x)):
                return False
        except (TypeError, ValueError, OverflowError):
            return False
    return True


def at_most(err, tol) -> bool:
    """``err <= tol``, failing closed (False when either side is not a finite number)."""
    return finite(err, tol) and float(err) <= float(tol)


def _is_bool(x) -> bool:
    return isinstance(x, (bool, np.bool_))


#: the largest integer magnitude any parameter accepts (integers are stored as int64)
INT64_MAX = 2 ** 63 - 1


def _short_int(value: int) -> str:
    text = str(value)
    return text if len(text) <= 30 else f"{text[:12]}...({len(text)} digits)"


def as_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an int, checking ``minimum <= value <= maximum``."""
    if _is_bool(value) or not isinstance(value, (Integral, np.integer)):
        if isinstance(value, (Real, np.floating)) and not _is_bool(value) and float(value).is_integer():
            value = int(value)
        else:
            raise InstanceError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if abs(value) > INT64_MAX:  # stored as int64 (numpy, SQLite, JSON readers); 1e300 became a 301-digit integer
        raise InstanceError(f"{name} must be an integer of at most 2^63 - 1 in magnitude, got {_short_int(value)}")
    if minimum is not None and value < minimum:
        raise InstanceError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InstanceError(f"{name} must be <= {maximum}, got {value}")
    return value


def as_float(
    name: str,
    value,
    *,
    positive: bool = False,
    nonnegative: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a finite float (not NaN), optionally ``> 0`` or ``>= 0``."""
    if _is_bool(value) or not isinstance(value, (Real, np.floating, np.integer)):
        raise InstanceError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise InstanceError(f"{name} must be a number, got NaN")
    if math.isinf(value) and not allow_inf:
        raise InstanceError(f"{name} must be finite, got {value}")
    if positive and not value > 0:
        raise InstanceError(f"{name} must be > 0, got {value}")
    if nonnegative and not value >= 0:
        raise InstanceError(f"{name} must be >= 0, got {value}")
    return value


def as_int_tuple(name: str, values: Iterable, *, minimum: int | None = None, min_len: int = 1) -> tuple[int, ...]:
    """Return a tuple of ints, each ``>= minimum``, with at least ``min_len`` entries."""
    try:
        seq = list(values)
    except TypeError:
        raise InstanceError(f"{name} must be a sequence of integers, got {values!r}") from None
    if len(seq) < min_len:
        raise InstanceError(f"{name} must have at least {min_len} entries, got {len(seq)}")
    return tuple(as_int(f"{name}[{i}]", v, minimum=minimum) for i, v in enumerate(seq))


def as_float_tuple(name: str, values: Iterable, *, positive: bool = False, nonnegative: bool = False,
                   min_len: int = 1) -> tuple[float, ...]:
    try:
        seq = list(values)
    except TypeError:
        raise InstanceError(f"{name} must be a sequence of numbers, got {values!r}") from None
    if len(seq) < min_len:
        raise InstanceError(f"{name} must have at least {min_len} entries, got {len(seq)}")
    return tuple(as_float(f"{name}[{i}]", v, positive=positive, nonnegative=nonnegative)
                 for i, v in enumerate(seq))


def as_finite_array(name: str, value, *, ndim: int | None = None, shape: Sequence[int | None] | None = None) -> np.ndarray:
    """Return a float64 array, checking dimensionality, shape and that every entry is finite."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InstanceError(f"{name} must be a numeric array") from None
    if ndim is not None and arr.ndim != ndim:
        raise InstanceError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if shape is not None:
        for axis, want in enumerate(shape):
            if want is not None and arr.shape[axis] != want:
                raise InstanceError(f"{name} must have size {want} along axis {axis}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InstanceError(f"{name} must contain only finite numbers (found NaN or inf)")
    return arr


def as_labels(name: str, labels, n_samples: int | None = None) -> np.ndarray:
    """Integer class labels 0..k-1, every class present (no empty class)."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise InstanceError(f"{name} must be a 1-dimensional array of class labels")
    if arr.size == 0:
        raise InstanceError(f"{name} must not be empty")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InstanceError(f"{name} must contain integer class labels")
    if n_samples is not None and arr.size != n_samples:
        raise InstanceError(f"{name} must have {n_samples} entries (one per sample), got {arr.size}")
    if arr.min() < 0:
        raise InstanceError(f"{name} must be >= 0, got {int(arr.min())}")
    k = int(arr.max()) + 1
    counts = np.bincount(arr, minlength=k)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise InstanceError(f"{name}: class {int(empty[0])} is empty (labels must use every class 0..{k - 1})")
    return arr.astype(np.int64)


def input_file(option: str, path, *, max_bytes: int | None = None) -> str:
    """Check, before opening it, that ``path`` is a regular readable file of at most ``max_bytes``.

    A FIFO, a character device (``/dev/zero``), a socket or a directory would block or never end
    when read: each is refused from ``os.stat`` alone (which never blocks), as is a file larger than
    the budget. Returns the path as a string; raises :class:`InputError` naming ``option``.
    """
    import os
    import stat as _stat

    if path is None or (isinstance(path, str) and path == ""):
        raise InputError(f"{option}: no file given")
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"{option}: a path is needed, got {type(path).__name__}")
    shown = os.fspath(path)
    try:
        st = os.stat(shown)
    except FileNotFoundError:
        raise InputError(f"{option}: no such file: {shown}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{option}: cannot open {shown} ({getattr(exc, 'strerror', None) or exc})") from None
    mode = st.st_mode
    if _stat.S_ISDIR(mode):
        raise InputError(f"{option}: {shown} is a directory, not a file")
    if not _stat.S_ISREG(mode):
        kind = ("a FIFO (named pipe)" if _stat.S_ISFIFO(mode) else "a character device" if _stat.S_ISCHR(mode)
                else "a block device" if _stat.S_ISBLK(mode) else "a socket" if _stat.S_ISSOCK(mode)
                else "not a regular file")
        raise InputError(f"{option}: {shown} is {kind}, not a regular file")
    if not os.access(shown, os.R_OK):
        raise InputError(f"{option}: {shown} is not readable")
    if max_bytes is not None and st.st_size > max_bytes:
        raise InputError(f"{option}: {shown} holds {st.st_size} bytes, above the limit of {max_bytes} bytes")
    return shown
