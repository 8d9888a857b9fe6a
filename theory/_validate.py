"""Validation helpers shared by every instance dataclass.

Every failure raises :class:`InstanceError` (a ``ValueError``) whose message names the
parameter and the constraint it violates, so that bad input never reaches numpy.
"""

from __future__ import annotations

import math
import re
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


# ---- numbers typed as text (command-line options, list entries, ``--batches``) ----------------------------
#
# One syntax for every integer and every real option, so that a value means the same thing wherever it is typed:
#
# * integer: an optional sign and the ASCII digits 0-9 (``3``, ``+3``, ``-0``, ``007``); no underscore (Python's
#   int() reads ``3_0`` as 30), no other script's digits (int() reads ``٣`` as 3), no decimal point, exponent or
#   base prefix (``3.0``, ``1e3``, ``0x10``), at most 2^63 - 1 in magnitude;
# * real: a decimal number with an optional fraction and exponent, ASCII only (``0.5``, ``+1e-3``, ``.5``, ``2.``);
#   no underscore, no ``inf`` / ``nan`` (no option means "unbounded" by inf), nothing beyond the float64 range
#   (``1e400``); a value below the smallest subnormal reads as 0 (``1e-400``), as float() reads it;
# * blanks (space, tab, CR, LF) around a value or a list entry are ignored (``" 3 "``, ``"2, 3"``), other
#   whitespace is not.

#: the ASCII blanks ignored around a number typed as text
TEXT_BLANKS = " \t\r\n"
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_REAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: the syntax, as the messages state it
INT_SYNTAX = "an integer (an optional sign and the digits 0-9)"
REAL_SYNTAX = "a finite decimal number (e.g. 0.5, 1e-3)"


def _shown(text: str) -> str:
    r = repr(text)
    return r if len(r) <= 60 else r[:40] + "..." + r[-12:]


def _subject(name: str | None, constraint: str) -> str:
    return f"{name} {constraint}" if name else constraint


def int_from_text(text, name: str | None = None) -> int:
    """The integer ``text`` spells in the syntax above; :class:`InputError` ``"<name> must be an integer ...,
    got '<text>'"`` otherwise (without ``name`` the message starts with "must": argparse prefixes the option)."""
    if not isinstance(text, str):
        raise InputError(_subject(name, f"must be {INT_SYNTAX} given as text, got {type(text).__name__}"))
    t = text.strip(TEXT_BLANKS)
    if not _INT_TEXT.fullmatch(t):
        raise InputError(_subject(name, f"must be {INT_SYNTAX}, got {_shown(text)}"))
    digits = t.lstrip("+-").lstrip("0")
    if len(digits) > 19 or abs(int(t)) > INT64_MAX:  # 19 digits: never int() of 5000 digits (Python's limit 4300)
        raise InputError(_subject(name, f"must be an integer of at most 2^63 - 1 in magnitude, got "
                                        f"{_short_int(t.lstrip('+'))}"))
    return int(t)


def float_from_text(text, name: str | None = None) -> float:
    """The real number ``text`` spells in the syntax above (finite, in the float64 range); :class:`InputError`
    naming ``name`` and the constraint otherwise."""
    if not isinstance(text, str):
        raise InputError(_subject(name, f"must be {REAL_SYNTAX} given as text, got {type(text).__name__}"))
    t = text.strip(TEXT_BLANKS)
    if not _REAL_TEXT.fullmatch(t):
        low = t.lower().lstrip("+-")
        if low in ("inf", "infinity", "nan"):
            raise InputError(_subject(name, f"must be a finite number, got {_shown(text)}"))
        raise InputError(_subject(name, f"must be {REAL_SYNTAX}, got {_shown(text)}"))
    value = float(t)
    if not math.isfinite(value):
        raise InputError(_subject(name, f"must be a finite number in the float64 range (|x| <= 1.8e308), "
                                        f"got {_shown(text)}"))
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


def _sequence(name: str, values, what: str) -> list:
    """The entries of an ordered sequence (list, tuple, 1-D array, range, generator); a string, bytes, a
    mapping or a set is refused (``"123"`` would be the entries '1', '2', '3'; ``b"12"`` the integers 49, 50; a
    dict its keys; a set an arbitrary order)."""
    from collections.abc import Mapping, Set

    if isinstance(values, (str, bytes, bytearray, Mapping, Set)):
        raise InstanceError(f"{name} must be a sequence of {what} (a list or tuple), got {type(values).__name__} "
                            f"{_shown(values) if isinstance(values, str) else ''}".rstrip())
    try:
        return list(values)
    except TypeError:
        raise InstanceError(f"{name} must be a sequence of {what}, got {values!r}"[:300]) from None


def as_int_tuple(name: str, values: Iterable, *, minimum: int | None = None, min_len: int = 1) -> tuple[int, ...]:
    """Return a tuple of ints, each ``>= minimum``, with at least ``min_len`` entries."""
    seq = _sequence(name, values, "integers")
    if len(seq) < min_len:
        raise InstanceError(f"{name} must have at least {min_len} entries, got {len(seq)}")
    return tuple(as_int(f"{name}[{i}]", v, minimum=minimum) for i, v in enumerate(seq))


def as_float_tuple(name: str, values: Iterable, *, positive: bool = False, nonnegative: bool = False,
                   min_len: int = 1) -> tuple[float, ...]:
    seq = _sequence(name, values, "numbers")
    if len(seq) < min_len:
        raise InstanceError(f"{name} must have at least {min_len} entries, got {len(seq)}")
    return tuple(as_float(f"{name}[{i}]", v, positive=positive, nonnegative=nonnegative)
                 for i, v in enumerate(seq))


def as_finite_array(name: str, value, *, ndim: int | None = None, shape: Sequence[int | None] | None = None) -> np.ndarray:
    """Return a float64 array, checking dimensionality, shape and that every entry is finite.

    Real numbers only: strings (numpy would parse ``"1.5"``), booleans, complex numbers (numpy would drop the
    imaginary part with a warning), dates and records are refused, as is an integer beyond the float64 range."""
    if isinstance(value, (str, bytes, bytearray)):
        raise InstanceError(f"{name} must be a numeric array, got {type(value).__name__}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise InstanceError(f"{name} must be a numeric array") from None
    kind = raw.dtype.kind
    if kind == "O":  # Python objects: ints beyond int64, Fractions, None, strings, ...
        bad = next((x for x in raw.ravel() if x is None or isinstance(x, (str, bytes, bool, np.bool_, complex,
                                                                          np.complexfloating))), raw)
        if bad is not raw:
            raise InstanceError(f"{name} must hold real numbers only, got an entry {bad!r}"[:300])
    elif kind not in "fiu":
        what = {"b": "booleans", "c": "complex numbers", "U": "strings", "S": "bytes", "M": "dates",
                "m": "time spans", "V": "records"}.get(kind, f"dtype {raw.dtype}")
        raise InstanceError(f"{name} must be an array of real numbers, got {what}")
    try:
        arr = raw.astype(np.float64, copy=False)
    except OverflowError:
        raise InstanceError(f"{name} must contain only finite numbers (an entry is beyond the float64 range)") from None
    except (TypeError, ValueError):
        raise InstanceError(f"{name} must be a numeric array") from None
    if ndim is not None and arr.ndim != ndim:
        raise InstanceError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if shape is not None and arr.ndim != len(shape):
        raise InstanceError(f"{name} must be {len(shape)}-dimensional, got shape {arr.shape}")
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
        if not (np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise InstanceError(f"{name} must contain integer class labels")
    if n_samples is not None and arr.size != n_samples:
        raise InstanceError(f"{name} must have {n_samples} entries (one per sample), got {arr.size}")
    def shown(v) -> str:
        return _short_int(int(v)) if np.issubdtype(arr.dtype, np.integer) else f"{float(v):.6g}"

    if arr.min() < 0:
        raise InstanceError(f"{name} must be >= 0, got {shown(arr.min())}")
    if arr.max() >= arr.size:  # before counting: np.bincount of a label 2^40 allocated 8 TiB
        raise InstanceError(f"{name}: label {shown(arr.max())} needs more classes than the {arr.size} samples "
                            f"(labels must use every class 0..K-1)")
    arr = arr.astype(np.int64)
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
