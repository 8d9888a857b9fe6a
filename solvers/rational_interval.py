"""Intervals with exact rational (Fraction) endpoints: the standard-library fallback of the deep-UFM ball
arithmetic (docs/deep_ufm.md, "Without python-flint").

+, -, *, / and integer powers are exact on the endpoints (no rounding, so rigorous by construction); only when an
endpoint's numerator or denominator grows beyond :data:`LIMIT_BITS` is it rounded **outward** (the lower end down,
the upper end up) to a dyadic rational with :data:`PREC_BITS` significant bits, which keeps the enclosure valid
and the integers bounded. The only non-rational operation is the n-th root (:func:`root_enclosure`): an integer
n-th root of a scaled integer, checked by exact powers a^n <= x <= b^n. Comparisons are *certain* ones, like
python-flint's arb: ``x < y`` is True only when every point of x is below every point of y.

Standard library only (fractions, integers).
"""

from __future__ import annotations

import math
from fractions import Fraction

#: significant bits kept when an endpoint is rounded outward
PREC_BITS = 256
#: an endpoint whose numerator or denominator has more bits than this is rounded outward to PREC_BITS bits
LIMIT_BITS = 640
#: bits of the n-th root enclosures (relative width about 2^-ROOT_BITS)
ROOT_BITS = 192


def _frac(x) -> Fraction:
    """An exact rational: ints, Fractions and finite floats (dyadic rationals) convert exactly."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, bool):
        raise TypeError("a bool is not a number here")
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"not a finite number: {x!r}")
        return Fraction(*x.as_integer_ratio())
    if hasattr(x, "__index__"):
        return Fraction(int(x))
    if hasattr(x, "__float__"):  # numpy floats
        return _frac(float(x))
    raise TypeError(f"not a rational number: {type(x).__name__}")


def round_down(x: Fraction, bits: int = PREC_BITS) -> Fraction:
    """The largest dyadic rational with ``bits`` significant bits that is <= x (x itself when it is shorter)."""
    n, d = x.numerator, x.denominator
    if max(n.bit_length(), d.bit_length()) <= bits:
        return x
    e = abs(n).bit_length() - d.bit_length()
    k = bits - e
    if k >= 0:
        return Fraction((n << k) // d, 1 << k)  # floor division rounds toward -inf
    return Fraction((n // (d << -k)) << -k)


def round_up(x: Fraction, bits: int = PREC_BITS) -> Fraction:
    """The smallest dyadic rational with ``bits`` significant bits that is >= x."""
    return -round_down(-x, bits)


def _big(x: Fraction) -> bool:
    return max(abs(x.numerator).bit_length(), x.denominator.bit_length()) > LIMIT_BITS


def iroot(m: int, n: int) -> int:
    """floor(m^(1/n)) for an integer m >= 0 and n >= 1 (integer Newton iteration, checked exactly)."""
    if m < 0 or n < 1:
        raise ValueError("iroot needs m >= 0 and n >= 1")
    if m < 2 or n == 1:
        return m
    if n == 2:
        return math.isqrt(m)
    x = 1 << -(-m.bit_length() // n)  # 2^ceil(bits/n) >= m^(1/n)
    while True:
        y = ((n - 1) * x + m // x ** (n - 1)) // n
        if y >= x:
            break
        x = y
    while x ** n > m:  # the exact check (Newton from above ends at the floor; this guards it)
        x -= 1
    while (x + 1) ** n <= m:
        x += 1
    return x


def root_enclosure(x, n: int, bits: int | None = None) -> tuple[Fraction, Fraction]:
    """(a, b) with a^n <= x <= b^n, a, b >= 0 dyadic, b - a = 2^-k, for a rational x >= 0 and an integer n >= 1,
    from the integer n-th root of floor(x 2^{nk}); the inequalities are checked in exact arithmetic. ``bits``:
    default :data:`ROOT_BITS` (read at the call)."""
    bits = ROOT_BITS if bits is None else int(bits)
    x = _frac(x)
    if x < 0:
        raise ValueError("root_enclosure needs x >= 0")
    if n == 1:
        return x, x
    if x == 0:
        return Fraction(0), Fraction(0)
    # k such that x^(1/n) 2^k has about ``bits`` bits
    e = (x.numerator.bit_length() - x.denominator.bit_length()) // n
    k = max(0, bits - e)
    m = (x.numerator << (n * k)) // x.denominator
    r = iroot(m, n)
    a, b = Fraction(r, 1 << k), Fraction(r + 1, 1 << k)
    if r ** n == m and (x.numerator << (n * k)) % x.denominator == 0:
        b = a  # the root is exact
    if not (a ** n <= x <= b ** n):  # pragma: no cover - an arithmetic defect, never a verdict
        raise ArithmeticError("n-th root enclosure failed its exact check")
    return a, b


class RInterval:
    """[lo, hi] with exact Fraction endpoints; the arithmetic of python-flint's ``arb`` that the deep-UFM
    certificates use (``lower()``, ``upper()``, ``mid()``, ``rad()``, certain comparisons)."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi=None):
        lo = _frac(lo)
        hi = lo if hi is None else _frac(hi)
        if hi < lo:
            raise ValueError("an interval needs lo <= hi")
        if _big(lo):
            lo = round_down(lo)
        if _big(hi):
            hi = round_up(hi)
        self.lo, self.hi = lo, hi

    @classmethod
    def mid_rad(cls, mid, rad) -> "RInterval":
        """[mid - |rad|, mid + |rad|] exactly (floats are exact dyadic rationals)."""
        m, r = _frac(mid), abs(_frac(rad))
        return cls(m - r, m + r)

    @classmethod
    def root(cls, x, n: int, bits: int | None = None) -> "RInterval":
        """An enclosure of the n-th root of every point of x >= 0 (monotone: the ends' enclosures)."""
        x = x if isinstance(x, RInterval) else RInterval(x)
        if x.lo < 0:
            raise ValueError("the n-th root needs a nonnegative interval")
        return cls(root_enclosure(x.lo, n, bits)[0], root_enclosure(x.hi, n, bits)[1])

    # ---- the arb-like accessors ----
    def lower(self) -> Fraction:
        return self.lo

    def upper(self) -> Fraction:
        return self.hi

    def mid(self) -> Fraction:
        return (self.lo + self.hi) / 2

    def rad(self) -> Fraction:
        return (self.hi - self.lo) / 2

    def contains(self, x) -> bool:
        v = _frac(x)
        return self.lo <= v <= self.hi

    def __repr__(self) -> str:
        return f"RInterval([{float(self.lo)!r}, {float(self.hi)!r}])"

    # ---- arithmetic ----
    @staticmethod
    def _of(x) -> "RInterval":
        return x if isinstance(x, RInterval) else RInterval(x)

    def __neg__(self):
        return RInterval(-self.hi, -self.lo)

    def __add__(self, o):
        o = self._of(o)
        return RInterval(self.lo + o.lo, self.hi + o.hi)

    __radd__ = __add__

    def __sub__(self, o):
        o = self._of(o)
        return RInterval(self.lo - o.hi, self.hi - o.lo)

    def __rsub__(self, o):
        return self._of(o) - self

    def __mul__(self, o):
        o = self._of(o)
        if o.lo == o.hi:  # a point: two products
            p, q = self.lo * o.lo, self.hi * o.lo
        elif self.lo == self.hi:
            p, q = self.lo * o.lo, self.lo * o.hi
        else:
            ps = (self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi)
            return RInterval(min(ps), max(ps))
        return RInterval(min(p, q), max(p, q))

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = self._of(o)
        if o.lo <= 0 <= o.hi:
            raise ZeroDivisionError("interval division by an interval containing 0")
        return self * RInterval(1 / o.hi, 1 / o.lo)

    def __rtruediv__(self, o):
        return self._of(o) / self

    def __pow__(self, n):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TypeError("RInterval powers are nonnegative integers (use RInterval.root for roots)")
        if n == 0:
            return RInterval(1)
        a, b = self.lo ** n, self.hi ** n
        if n % 2 == 1 or self.lo >= 0:
            return RInterval(a, b)
        if self.hi <= 0:
            return RInterval(b, a)
        return RInterval(0, max(a, b))

    # ---- certain comparisons (True only when proven for every point) ----
    def __lt__(self, o):
        o = self._of(o)
        return self.hi < o.lo

    def __le__(self, o):
        o = self._of(o)
        return self.hi <= o.lo

    def __gt__(self, o):
        o = self._of(o)
        return self.lo > o.hi

    def __ge__(self, o):
        o = self._of(o)
        return self.lo >= o.hi

    __hash__ = None
