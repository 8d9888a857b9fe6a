"""Rigorous certificates in ball arithmetic (python-flint's arb): docs/rigorous.md.

Every certificate of the float pipeline (solvers.ufm, solvers.scl, solvers.feature_collapse) is a
weak-duality bound: a dual point, its feasibility (equality constraints, a spectral-norm or PSD
condition, a simplex) and its dual objective. Here the same recipe is re-run so that every step is a
proof about real numbers:

1. the float dual point is converted *exactly* (every double is an exact arb ball of radius 0);
2. its equality constraints are enforced *exactly* by construction (round-and-project: the class
   structure a I + b 11^T with a := -k b makes the row sums exactly 0);
3. its spectral norm is bounded from above rigorously (analytic eigenvalues of the class-structured
   matrix, evaluated in balls), the scaling t is a double rounded *downward* until
   t ||Lambda||_2 <= lambda holds for every point of the balls;
4. the dual value and the primal value at the candidate are evaluated in balls (arb's functions
   return enclosures), so the lower bound is the lower end of a ball and the feasible value the
   upper end of another.

Nothing is hidden in a round-off allowance: the only floating-point numbers that remain are the
inputs (the instance's parameters are doubles, and they *are* the instance) and the choice of the dual
point and candidate, which only affects tightness, never validity.

A dual point that fails a feasibility condition raises :class:`NotCertified` (no bound is returned).
python-flint is optional: :func:`require_flint` raises ImportError with the install hint.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

#: Working precision of the balls (bits). 128 bits leave ~20 decimal digits of headroom over float64,
#: so the width of every bracket is the candidate's distance from the optimum, not the arithmetic's
#: (measured: CE-UFM k = 1000 lower bound radius ~1e-37).
PRECISION_BITS = 128

INSTALL_HINT = 'pip install "ncproofs[rigorous]"  (or: pip install "python-flint>=0.6")'


class NotCertified(Exception):
    """The dual point (or the candidate) fails a condition in ball arithmetic: no bound is proven."""


class Unsupported(NotCertified):
    """No ball-arithmetic recipe for this instance (for example a mini-batch SCL instance)."""


def available() -> bool:
    """True when python-flint can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("flint") is not None


def require_flint():
    """Import flint or raise ImportError with the install hint."""
    try:
        import flint
    except ImportError as exc:  # pragma: no cover - exercised only without python-flint
        raise ImportError(f"rigorous certificates need python-flint: {INSTALL_HINT}") from exc
    return flint


class _Precision:
    """Context manager setting flint's working precision (restored afterwards)."""

    def __init__(self, bits: int):
        self.bits = int(bits)

    def __enter__(self):
        flint = require_flint()
        self.old = flint.ctx.prec
        flint.ctx.prec = self.bits
        return flint

    def __exit__(self, *exc):
        import flint

        flint.ctx.prec = self.old
        return False


# ---------------------------------------------------------------------------------------------------
# Exact conversions and outward rounding
# ---------------------------------------------------------------------------------------------------

def exact(x):
    """An exact ball (radius 0) for a finite double or an int; a Fraction becomes the tightest ball."""
    from flint import arb, fmpq

    if isinstance(x, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(x, int):
        return arb(x)
    if isinstance(x, Fraction):
        return arb(fmpq(x.numerator, x.denominator))
    xf = float(x)
    if not math.isfinite(xf):
        raise NotCertified(f"non-finite input {x!r}")
    b = arb(xf)
    if not b.is_exact():  # pragma: no cover - a double always converts exactly
        raise AssertionError("double did not convert exactly")
    return b


def _to_fraction(b_exact) -> Fraction:
    """The exact rational value of an exact ball (radius 0)."""
    man, exp = b_exact.man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** (-exp))


def _float_down(q: Fraction) -> float:
    f = float(q)  # nearest (ties to even)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def _float_up(q: Fraction) -> float:
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


#: Precision used to read a ball's endpoints (arb rounds lower()/upper() outward at the context precision;
#: at this precision the endpoints of a 128-bit ball are exact).
ENDPOINT_BITS = 1024


def endpoints(b) -> tuple[Fraction, Fraction]:
    """Rationals lo <= every point of the ball <= hi (exact endpoints of mid -+ rad)."""
    if not b.is_finite():
        raise NotCertified("a ball is not finite")
    with _Precision(max(ENDPOINT_BITS, 4 * b.mid().bits() + 64)):
        return _to_fraction(b.lower()), _to_fraction(b.upper())


def outward(b) -> list[float]:
    """[lo, hi] doubles with lo <= every point of the ball <= hi (rounded outward, exactly checked)."""
    lo, hi = endpoints(b)
    return [_float_down(lo), _float_up(hi)]


def lower_float(b) -> float:
    return outward(b)[0]


def upper_float(b) -> float:
    return outward(b)[1]


def certainly_le(a, b) -> bool:
    """a <= b for every pair of points of the two balls."""
    return bool(a <= b)


def certainly_ge(a, b) -> bool:
    return bool(a >= b)


def certainly_positive(a) -> bool:
    from flint import arb

    return bool(a > arb(0))


def xlogx(x):
    """x log x for a ball x >= 0 (0 log 0 = 0); raises NotCertified when x may be negative."""
    from flint import arb

    if x.is_zero():
        return arb(0)
    if not certainly_positive(x):
        raise NotCertified(f"entropy term of a ball that may be <= 0: {x}")
    return x * x.log()


# ---------------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------------

@dataclass
class RigorousBound:
    """A rigorous bracket of an optimum: every point of ``lower`` is a proven lower bound, every point of
    ``upper`` a feasible value (so the optimum is <= its upper end). ``steps`` records seconds per step."""

    lower: object
    upper: object | None
    method: str
    precision_bits: int
    details: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)

    @property
    def lower_bound(self) -> float:
        """The proven lower bound as a double (the lower end of the ball, rounded down)."""
        return outward(self.lower)[0]

    @property
    def upper_bound(self) -> float | None:
        """The proven feasible value as a double (the upper end of the ball, rounded up)."""
        return None if self.upper is None else outward(self.upper)[1]

    def to_dict(self) -> dict:
        out = {"lower": outward(self.lower), "upper": None if self.upper is None else outward(self.upper),
               "method": self.method, "precision_bits": self.precision_bits}
        if self.upper is not None:
            out["width"] = _float_up(endpoints(self.upper)[1] - endpoints(self.lower)[0])
        out["details"] = dict(self.details)
        out["seconds"] = {k: round(v, 6) for k, v in self.steps.items()}
        return out


class _Timer:
    def __init__(self):
        self.steps: dict = {}
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.steps[name] = self.steps.get(name, 0.0) + (now - self.t)
        self.t = now


# ---------------------------------------------------------------------------------------------------
# Class-structured k x k matrices a I + b 11^T (the balanced symmetry)
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClassSym:
    """The k x k matrix a I + b 1 1^T (balls a, b). Its eigenvalues are exactly a (multiplicity k - 1, on
    the complement of 1) and a + k b (on 1): it is symmetric and 1 is an eigenvector, 1^perp is
    invariant. So ||.||_2 = max(|a|, |a + k b|) and ||.||_* = (k - 1)|a| + |a + k b|; row sums a + k b."""

    a: object
    b: object
    k: int

    @property
    def row_sum(self):
        return self.a + self.k * self.b

    def spectral_norm(self):
        return max_ball(abs(self.a), abs(self.row_sum))

    def nuclear_norm(self):
        return (self.k - 1) * abs(self.a) + abs(self.row_sum)

    def trace(self):
        return self.k * (self.a + self.b)

    def frobenius_sq(self):
        d = self.a + self.b
        return self.k * d * d + (self.k * self.k - self.k) * self.b * self.b


def max_ball(x, y):
    """A ball containing max(u, v) for every u in x, v in y."""
    return x.max(y)


def projected_class_sym(offdiag: float, k: int) -> ClassSym:
    """Round-and-project: the exact class-structured matrix with off-diagonal ``offdiag`` (a double, kept
    exactly) and diagonal -(k - 1) offdiag, i.e. a = -k offdiag, b = offdiag: row sums exactly 0."""
    b = exact(offdiag)
    return ClassSym(exact(-k) * b, b, k)  # k * double: <= 53 + 64 bits, exact at 128 bits


def _scale_down(norm_unit, lam) -> float:
    """The largest convenient double t in (0, 1] with t * norm_unit <= lam for every point of the balls
    (t = 1 when norm_unit <= lam already). Raises NotCertified when no positive t is found."""
    from flint import arb

    if certainly_le(norm_unit, lam):
        return 1.0
    if not certainly_positive(norm_unit):
        raise NotCertified("spectral norm bound is not positive")
    t = min(lower_float(lam / norm_unit), 1.0)
    for i in range(64):
        if not t > 0.0:
            break
        if certainly_le(arb(t) * norm_unit, lam):
            return t
        t = math.nextafter(t * (1.0 - 2.0 ** (i - 52)), 0.0)  # further down each round
    raise NotCertified("could not round the dual scaling down to a feasible value")
