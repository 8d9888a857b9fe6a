"""Typed statements and the one rule that judges them (docs/DEVELOPING.md "Verdict rules").

A statement is a frozen value saying what is claimed about one quantity (the optimal value of the
instance, or a number measured at a point): "it equals v within tol", "it is at least B", "at most U",
"below the reference R", "the reported feasible value is the optimum", "a violation measured at a point,
widened by a proven radius, stays below tau". Each has ONE ``judge(bracket)`` that returns
``(Verdict, reason, evidence)`` from a :class:`Bracket` [lower, upper] enclosing the quantity:

- :class:`FloatBracket`: ends computed in float64 (a proven lower bound evaluated with its round-off
  allowance, the objective at a feasible point), widened outward by ``allowance``;
- :class:`ExactBracket`: ends proven in ball arithmetic (python-flint Arb balls, rounded outward to
  doubles, or exact rationals).

Both are compared the same way: every end converts exactly to a rational (:class:`fractions.Fraction`),
so the comparisons are exact and a float and an exact bracket holding the same numbers give the same
verdict (tests/test_statements.py). A missing or non-finite number never passes and is never a witness.

The builders of :mod:`proofs_check.core` (``optimum_matches``, ``lower_bound_claim``, ``upper_bound_claim``,
``point_statement``) construct a statement and a float bracket and call ``judge``; the :class:`Check` keeps
the statement, and ``--rigorous`` re-judges the same statement with the proven bracket
(:mod:`proofs_check.rigorous`). Statements serialise with :meth:`Statement.to_dict` /
:func:`from_dict` (the ``evidence["statement"]`` of a check in a saved report).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from fractions import Fraction
from typing import Any

from enum import Enum


class Verdict(str, Enum):
    """The verdict of a check (re-exported by :mod:`proofs_check.core`, where the rules are documented)."""

    VERIFIED = "VERIFIED"
    NOT_APPLICABLE = "NOT_APPLICABLE"  # a hypothesis of the theorem fails for the instance
    INCONCLUSIVE = "INCONCLUSIVE"
    REFUTED = "REFUTED"
    ERROR = "ERROR"  # the check itself crashed: a defect, never hidden

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


__all__ = ["Verdict", "Bracket", "FloatBracket", "ExactBracket", "Statement", "ValueEquals", "CertifiedOptimum", "AtLeast",
           "AtMost", "MinBelow", "PointWithinRadius", "EveryMinimiser", "MINIMISER_PROPERTIES", "from_dict", "OPTIMUM", "to_fraction"]

#: ``Statement.about`` of a statement about the optimal value of the check's instance: the statements that
#: ``--rigorous`` re-judges with the proven bracket of that optimum.
OPTIMUM = "optimum"


def to_fraction(x: Any, end: str = "mid") -> Fraction | None:
    """``x`` as an exact rational, or None when it is missing or not a finite real number.

    Floats, ints and Fractions convert exactly; an Arb ball (python-flint ``arb``) gives its lower end
    (``end="lower"``), its upper end (``"upper"``) or its midpoint (``"mid"``), exactly."""
    if x is None or isinstance(x, bool):
        return None
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if hasattr(x, "man_exp") and hasattr(x, "lower"):  # flint.arb
        if not x.is_finite():
            return None
        p = x.lower() if end == "lower" else x.upper() if end == "upper" else x.mid()
        man, exp = p.mid().man_exp()
        man, exp = int(man), int(exp)
        return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** -exp)
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return Fraction(f) if math.isfinite(f) else None


def _fmt(x, digits: int) -> str:
    if x is None:
        return "null"
    return f"{float(x):.{digits}g}"


# ---------------------------------------------------------------------------------------------------
# Brackets
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bracket:
    """[lower, upper] enclosing one quantity; either end may be None (not known)."""

    lower: Any = None
    upper: Any = None

    #: "float" or "exact"
    kind = "float"
    #: digits in the reasons (an exact bracket prints its ends to 17 digits)
    digits = 8

    def lo(self) -> Fraction | None:
        """The lower end as an exact rational (None when unknown)."""
        return to_fraction(self.lower, "lower")

    def hi(self) -> Fraction | None:
        """The upper end as an exact rational (None when unknown)."""
        return to_fraction(self.upper, "upper")

    def suffix(self) -> str:
        """Appended to a reason: where the bracket comes from."""
        return ""

    def f(self, x, digits: int | None = None) -> str:
        return _fmt(x, digits or self.digits)


@dataclass(frozen=True)
class FloatBracket(Bracket):
    """Ends computed in float64; ``allowance`` >= 0 (a round-off allowance) widens both ends outward."""

    allowance: float = 0.0
    kind = "float"

    def _allow(self) -> Fraction | None:
        a = to_fraction(self.allowance)
        return None if a is None or a < 0 else a

    def lo(self):
        x, a = to_fraction(self.lower), self._allow()
        return None if x is None or a is None else x - a

    def hi(self):
        x, a = to_fraction(self.upper), self._allow()
        return None if x is None or a is None else x + a


@dataclass(frozen=True)
class ExactBracket(Bracket):
    """Ends proven in ball arithmetic (Arb balls: the lower end of ``lower`` and the upper end of ``upper``;
    or doubles already rounded outward; or exact rationals). ``source`` names the proof."""

    source: str = "ball arithmetic"
    kind = "exact"
    digits = 17

    def suffix(self):
        return f" ({self.source})"


# ---------------------------------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------------------------------

def _tol_ok(tol) -> Fraction | None:
    t = to_fraction(tol)
    return t if t is not None and t >= 0 else None


@dataclass(frozen=True)
class Statement:
    """Base class: ``about`` is :data:`OPTIMUM` (the optimal value of the check's instance) or "point"
    (a number measured at a point)."""

    def judge(self, bracket: Bracket) -> tuple[Verdict, str, dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def about(self) -> str:
        return OPTIMUM

    def to_dict(self) -> dict:
        return {"type": type(self).__name__, **{k: _plain(v) for k, v in asdict(self).items()}}


def _plain(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    try:
        import numpy as np

        if isinstance(v, np.generic):
            return v.item()
    except ImportError:  # pragma: no cover
        pass
    return v


@dataclass(frozen=True)
class ValueEquals(Statement):
    """"The optimum equals ``predicted``" within the absolute tolerance ``tol``.

    REFUTED when upper < predicted - tol (a feasible point below it) or lower > predicted + tol (a proven
    lower bound above it); VERIFIED when the whole bracket lies in [predicted - tol, predicted + tol] (every
    value the optimum can take is within tol of the prediction); INCONCLUSIVE otherwise (an end missing, a
    bracket wider than tol, or one that straddles predicted +- tol). Widening a bracket never turns one
    decision into the other."""

    predicted: Any
    tol: Any

    def _what(self) -> str:
        return "predicted optimum"

    def judge(self, b: Bracket):
        p, t, lo, hi, f = to_fraction(self.predicted), _tol_ok(self.tol), b.lo(), b.hi(), b.f
        sx = b.suffix()
        if p is None:
            return Verdict.INCONCLUSIVE, f"{self._what()} is not a finite number ({self.predicted})", {}
        if t is None:
            return Verdict.INCONCLUSIVE, f"tolerance is not a finite number >= 0 ({self.tol})", {}
        if hi is not None and p - hi > t:
            return Verdict.REFUTED, (f"a feasible point attains {f(hi)} < {self._what()} {f(p)} (by "
                                     f"{f(p - hi, 3)} > tolerance {f(t, 3)}){sx}"), {"witness_gap": float(p - hi)}
        if lo is not None and lo - p > t:
            return Verdict.REFUTED, (f"proven lower bound {f(lo)} > {self._what()} {f(p)} (by {f(lo - p, 3)} > "
                                     f"tolerance {f(t, 3)}){sx}"), {"witness_gap": float(lo - p)}
        if hi is None:
            return Verdict.INCONCLUSIVE, "no finite feasible value" + sx, {}
        if lo is None:
            return Verdict.INCONCLUSIVE, self._no_lower() + sx, {}
        gap = hi - lo
        if gap > t:
            return Verdict.INCONCLUSIVE, f"certificate gap {f(gap, 3)} > tolerance {f(t, 3)}{sx}", {"gap": float(gap)}
        if hi - p > t or p - lo > t:  # the bracket is not inside [p - tol, p + tol]: some value in it is not p
            return Verdict.INCONCLUSIVE, (f"bracket [{f(lo)}, {f(hi)}] is not within the tolerance {f(t, 3)} of the "
                                          f"{self._what()} {f(p)}{sx}"), {"gap": float(gap)}
        return Verdict.VERIFIED, self._verified(b, gap, t) + sx, {"gap": float(gap)}

    def _no_lower(self) -> str:
        return "no certificate (proven lower bound) for the global optimum"

    def _verified(self, b, gap, t) -> str:
        return f"optimum {b.f(to_fraction(self.predicted))} certified: gap {b.f(gap, 3)} <= {b.f(t, 3)}"


@dataclass(frozen=True)
class CertifiedOptimum(ValueEquals):
    """"The reported feasible value ``predicted`` is the optimum" within ``tol``: the rule of
    :class:`ValueEquals` (a float bracket has upper = the feasible value itself, so only a proven lower bound
    within tol of it decides; an exact bracket can also refute it with a better proven feasible value)."""

    def _what(self) -> str:
        return "reported optimum"

    def _no_lower(self) -> str:
        return "no proven lower bound"

    def _verified(self, b, gap, t) -> str:
        return (f"feasible value {b.f(to_fraction(self.predicted))} is within {b.f(gap, 3)} of the proven lower "
                f"bound")


@dataclass(frozen=True)
class AtLeast(Statement):
    """"min >= bound": VERIFIED only by a proof, lower >= bound - tol; REFUTED by a feasible point, upper <
    bound - tol; INCONCLUSIVE otherwise (``feasible_points``: how many points were tried, for the reason)."""

    bound: Any
    tol: Any
    feasible_points: int | None = None

    def judge(self, b: Bracket):
        B, t, lo, hi, f, sx = to_fraction(self.bound), _tol_ok(self.tol), b.lo(), b.hi(), b.f, b.suffix()
        if B is None or t is None:
            return Verdict.INCONCLUSIVE, f"claimed bound or tolerance is not finite ({self.bound}, {self.tol})", {}
        if hi is not None and B - hi > t:
            return Verdict.REFUTED, (f"a feasible point attains {f(hi)} < claimed lower bound {f(B)}{sx}"
                                     ), {"witness_gap": float(B - hi)}
        if lo is not None and B - lo <= t:
            return Verdict.VERIFIED, f"proven lower bound {f(lo)} >= claimed {f(B)}{sx}", {}
        why = ("no proven lower bound" if lo is None
               else f"the best proven lower bound {f(lo)} is below the claimed {f(B)}")
        n = f"; no counterexample among {self.feasible_points} feasible points" if self.feasible_points else ""
        return Verdict.INCONCLUSIVE, f"not proven: {why}{n}{sx}", {}


@dataclass(frozen=True)
class AtMost(Statement):
    """"min <= bound": VERIFIED by a feasible point, upper <= bound + tol; REFUTED by a proven lower bound,
    lower > bound + tol; INCONCLUSIVE otherwise."""

    bound: Any
    tol: Any

    def judge(self, b: Bracket):
        U, t, lo, hi, f, sx = to_fraction(self.bound), _tol_ok(self.tol), b.lo(), b.hi(), b.f, b.suffix()
        if U is None or t is None:
            return Verdict.INCONCLUSIVE, f"claimed bound or tolerance is not finite ({self.bound}, {self.tol})", {}
        if lo is not None and lo - U > t:
            return Verdict.REFUTED, (f"proven lower bound {f(lo)} > claimed upper bound {f(U)}{sx}"
                                     ), {"witness_gap": float(lo - U)}
        if hi is not None and hi - U <= t:
            return Verdict.VERIFIED, f"a feasible point attains {f(hi)} <= {f(U)}{sx}", {}
        return Verdict.INCONCLUSIVE, ("not proven: no feasible point at or below the claimed upper bound and no "
                                      "proven lower bound above it" + sx), {}


@dataclass(frozen=True)
class MinBelow(Statement):
    """"min < reference", decided with the resolution ``tol``: VERIFIED by a feasible point, upper <
    reference - tol; REFUTED by a proof that min >= reference (lower >= reference); INCONCLUSIVE otherwise,
    and for an inconsistent bracket that would do both. ``what`` names the reference in the reasons."""

    reference: Any
    tol: Any
    what: str = "reference"

    def judge(self, b: Bracket):
        R, t, lo, hi, f, sx = to_fraction(self.reference), _tol_ok(self.tol), b.lo(), b.hi(), b.f, b.suffix()
        if R is None or t is None:
            return Verdict.INCONCLUSIVE, f"reference or tolerance is not finite ({self.reference}, {self.tol})", {}
        below = hi is not None and R - hi > t
        above = lo is not None and lo >= R
        if below and above:
            return Verdict.INCONCLUSIVE, (f"inconsistent bracket [{f(lo)}, {f(hi)}]: a feasible value below the "
                                          f"{self.what} and a proven lower bound above it{sx}"), {}
        if below:
            return Verdict.VERIFIED, (f"a feasible point attains {f(hi)} < {self.what} {f(R)} (by {f(R - hi, 3)})"
                                      f"{sx}"), {}
        if above:
            return Verdict.REFUTED, (f"proven lower bound {f(lo)} >= {self.what} {f(R)}: the optimum is not below "
                                     f"it{sx}"), {"witness_gap": float(lo - R)}
        return Verdict.INCONCLUSIVE, (f"no feasible point below the {self.what} by more than {f(t, 3)} and no "
                                      f"proven bound excluding one{sx}"), {}


@dataclass(frozen=True)
class PointWithinRadius(Statement):
    """A statement measured at a solver's point, about every minimiser: ``deviation`` (the violation at the
    point, 0 = holds exactly) <= ``tau`` at every point within the proven ``radius`` of the point, the
    measure being ``lipschitz``-Lipschitz. The quantity judged is the violation over the minimisers, enclosed
    by :meth:`bracket` = [deviation - L r, deviation + L r]: VERIFIED when upper <= tau, REFUTED when lower >
    tau (violated at every minimiser), INCONCLUSIVE otherwise or without a radius."""

    deviation: Any
    tau: Any
    radius: Any = None
    lipschitz: Any = 1.0
    what: str = "deviation"
    how: str = ""

    @property
    def about(self) -> str:
        return "point"

    def bracket(self) -> FloatBracket:
        d, r, L = (to_fraction(x) for x in (self.deviation, self.radius, self.lipschitz))
        if d is None or r is None or L is None or r < 0:
            return FloatBracket(None, None)
        return FloatBracket(d - L * r, d + L * r)

    def judge(self, b: Bracket | None = None):
        b = self.bracket() if b is None else b
        d, tau, L, r = (to_fraction(x) for x in (self.deviation, self.tau, self.lipschitz, self.radius))
        f, sx, how = b.f, b.suffix(), (f" ({self.how})" if self.how else "")
        if d is None or tau is None or L is None:
            return Verdict.INCONCLUSIVE, f"{self.what} at the point is not a finite number", {}
        lo, hi = b.lo(), b.hi()
        if r is None or r < 0 or lo is None or hi is None:
            return Verdict.INCONCLUSIVE, (f"no geometry certificate: a value gap does not certify the point "
                                          f"({self.what} at the point {f(d, 3)}, tolerance {f(tau, 3)})"), {}
        slack = L * r
        if hi <= tau:
            return Verdict.VERIFIED, (f"{self.what} {f(d, 3)} + proven radius term {f(slack, 3)} <= {f(tau, 3)}"
                                      f"{how}{sx}"), {}
        if lo > tau:
            return Verdict.REFUTED, (f"{self.what} {f(d, 3)} - proven radius term {f(slack, 3)} > {f(tau, 3)}: "
                                     f"violated at every minimiser{how}{sx}"), {}
        return Verdict.INCONCLUSIVE, (f"{self.what} {f(d, 3)} within the proven radius term {f(slack, 3)} of the "
                                      f"tolerance {f(tau, 3)}: not decided{sx}"), {}


#: The properties an :class:`EveryMinimiser` statement can name (docs/rigorous.md "Uniqueness and geometry (UFM)").
MINIMISER_PROPERTIES = ("unique", "geometry", "collapse", "self-duality", "constant-bias", "bias-one-over-k",
                        "minority-geometry")


@dataclass(frozen=True)
class EveryMinimiser(Statement):
    """"Every minimiser of the check's instance has ``property``": ``"unique"`` (the minimiser is unique, up to
    the family's symmetries), ``"geometry"`` (its class means are ``geometry``, e.g. ``"simplex-etf"`` or
    ``"zero"``), ``"collapse"`` (h_i = mu_{y_i}), ``"self-duality"`` (mu_c proportional to w_c),
    ``"constant-bias"`` (the bias is constant up to a shift), ``"bias-one-over-k"`` (b = 1/K, MSE) or
    ``"minority-geometry"`` (the minority classes' measures).

    A label, not a rule on a bracket: the float verdict of such a check is made by its claim from the
    evidence at the solver's point (uniqueness certificate, ``at_certified_point``), exactly as before this
    type existed, so labelling changes no verdict. What the label is for: ``--rigorous``
    (:mod:`proofs_check.rigorous`) finds the statements about every minimiser by this type (never by the
    check's id) and marks them proven when the family's ball-arithmetic uniqueness proof implies
    ``property``. :meth:`judge` therefore never decides: INCONCLUSIVE with the reason."""

    property: str
    geometry: str | None = None

    def __post_init__(self):
        if self.property not in MINIMISER_PROPERTIES or (self.geometry is not None) != (self.property == "geometry") \
                or not isinstance(self.geometry, (str, type(None))):
            raise ValueError(f"EveryMinimiser: property must be one of {', '.join(MINIMISER_PROPERTIES)} (geometry "
                             f"named exactly for 'geometry'), got {self.property!r}, {self.geometry!r}")

    @property
    def about(self) -> str:
        return "every-minimiser"

    def judge(self, bracket: Bracket | None = None):
        return Verdict.INCONCLUSIVE, (f"every minimiser has {self.property}"
                                      + (f" {self.geometry}" if self.geometry else "")
                                      + ": not decided by a bracket (judged by its claim's evidence)"), {}


_TYPES = {c.__name__: c for c in (ValueEquals, CertifiedOptimum, AtLeast, AtMost, MinBelow, PointWithinRadius,
                                  EveryMinimiser)}


def from_dict(d) -> Statement | None:
    """The statement serialised by :meth:`Statement.to_dict` (a saved report's ``evidence["statement"]``), or
    None for anything else."""
    if not isinstance(d, dict) or d.get("type") not in _TYPES:
        return None
    cls = _TYPES[d["type"]]
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in d.items() if k in names})
    except (TypeError, ValueError):
        return None
