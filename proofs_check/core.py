"""Claims, checks, evidence and verdicts.

A :class:`Claim` pairs a statement (with its source and provenance) with a check function.
The check function receives a :class:`RunContext` and yields :class:`Check` results; each
``Check`` carries a verdict, the reason and its evidence (numbers, not only booleans).
The claim's verdict is the worst of its checks' verdicts:
REFUTED over INCONCLUSIVE over VERIFIED (spec: DESIGN.md, "Verdicts are honest").

Helpers at the bottom build the common checks (a symbolic identity, a predicted value
against a certified optimum, a lower bound against a feasible point, a failed hypothesis)
so that each claim module states *what* is compared and with which tolerance.
"""

from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable

import numpy as np


class Verdict(str, Enum):
    VERIFIED = "VERIFIED"
    INCONCLUSIVE = "INCONCLUSIVE"
    REFUTED = "REFUTED"
    ERROR = "ERROR"  # the check itself crashed: a defect, never hidden

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


_SEVERITY = {Verdict.VERIFIED: 0, Verdict.INCONCLUSIVE: 1, Verdict.REFUTED: 2, Verdict.ERROR: 3}


def worst(verdicts: Iterable[Verdict | str]) -> Verdict:
    """Worst verdict: ERROR > REFUTED > INCONCLUSIVE > VERIFIED. Empty input is INCONCLUSIVE."""
    vs = [Verdict(v) for v in verdicts]
    if not vs:
        return Verdict.INCONCLUSIVE
    return max(vs, key=_SEVERITY.__getitem__)


class Provenance(str, Enum):
    QUOTED = "quoted"  # the statement is quoted from the source
    RECONSTRUCTED = "reconstructed"  # rebuilt from partial text / code, verified numerically
    DERIVED = "derived"  # derived in this project

    def __str__(self) -> str:  # pragma: no cover
        return self.value


def clean(obj: Any) -> Any:
    """Convert to JSON-safe Python: numpy scalars/arrays to lists, NaN/inf to None."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f" and bool(np.isfinite(obj).all()):  # fast path: large float arrays
            return obj.tolist()
        return clean(obj.tolist())
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and all(type(v) is float for v in obj) and all(map(math.isfinite, obj)):  # fast path
            return list(obj)
        return [clean(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return clean(obj.to_dict())
    try:  # sympy numbers
        return clean(float(obj))
    except Exception:
        return str(obj)


@dataclass
class Check:
    """One comparison: its verdict, why, and the numbers behind it."""

    name: str
    verdict: Verdict
    reason: str
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "verdict": self.verdict.value, "reason": self.reason,
                "evidence": clean(self.evidence)}


@dataclass(frozen=True)
class RunContext:
    """Options for a run: ``profile`` is "quick" (default, minutes) or "full" (exhaustive)."""

    profile: str = "quick"
    seed: int = 0

    @property
    def full(self) -> bool:
        return self.profile == "full"


@dataclass(frozen=True)
class Claim:
    """A statement with its source and provenance, and the function that checks it.

    ``check(ctx)`` yields :class:`Check` objects. ``key`` names evidence entries shown in the
    summary table (``"check name.evidence key"``, split at the last dot, or just an evidence key,
    taken from the first check whose evidence has it).
    """

    id: str
    family: str
    statement: str
    source: str
    provenance: Provenance
    check: Callable[[RunContext], Iterable[Check]]
    key: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "provenance", Provenance(self.provenance))

    def run(self, ctx: RunContext | None = None) -> "ClaimResult":
        ctx = ctx or RunContext()
        t0 = time.perf_counter()
        checks: list[Check] = []
        error = None
        try:
            for c in self.check(ctx):
                checks.append(c)
        except Exception as exc:  # a crash is an ERROR verdict with the traceback, never hidden
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            checks.append(Check("error", Verdict.ERROR, error,
                                {"traceback": traceback.format_exc(limit=8)}))
        seconds = time.perf_counter() - t0
        verdict = worst(c.verdict for c in checks)
        if not checks:
            reason = "no checks were run"
        else:
            bad = [c for c in checks if c.verdict == verdict and verdict != Verdict.VERIFIED]
            reason = "; ".join(f"{c.name}: {c.reason}" for c in bad[:3]) if bad else \
                f"all {len(checks)} checks hold"
        return ClaimResult(self, verdict, reason, checks, seconds)


@dataclass
class ClaimResult:
    claim: Claim
    verdict: Verdict
    reason: str
    checks: list[Check]
    seconds: float

    def key_numbers(self) -> dict:
        """Evidence entries named by the claim's ``key`` (first match over checks)."""
        out = {}
        for key in self.claim.key:
            if "." in key:
                cname, ekey = key.rsplit(".", 1)
                cands = [c for c in self.checks if c.name == cname]
            else:
                ekey, cands = key, self.checks
            for c in cands:
                if ekey in c.evidence:
                    out[key] = clean(c.evidence[ekey])
                    break
        return out

    def to_dict(self) -> dict:
        c = self.claim
        return {"id": c.id, "family": c.family, "statement": c.statement, "source": c.source,
                "provenance": c.provenance.value, "verdict": self.verdict.value, "reason": self.reason,
                "seconds": round(self.seconds, 4), "key_numbers": self.key_numbers(),
                "checks": [ch.to_dict() for ch in self.checks]}


# --------------------------------------------------------------------------------------
# Check builders
# --------------------------------------------------------------------------------------

def fmt(x: Any, digits: int = 8) -> str:
    if x is None:
        return "null"
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.{digits}g}"
    return str(x)


def symbolic_zero(name: str, expr, *, substitutions: Iterable[dict] = (), note: str = "") -> Check:
    """A sympy expression that must simplify to 0.

    VERIFIED when ``sympy.simplify`` gives 0. Otherwise, the expression is evaluated at the
    given numeric substitutions: any value off zero by more than 1e-9 is REFUTED (with the
    point as witness); if all are zero numerically but simplify could not prove it, the check
    is INCONCLUSIVE (never VERIFIED on numerics alone).
    """
    import sympy as sp

    expr = sp.sympify(expr)
    # Cheap proofs first (expansion), then cheap refutations (a numeric witness), and only then
    # the expensive general simplifier: a false identity is refuted in milliseconds.
    if expr == 0 or sp.expand(expr) == 0:
        return Check(name, Verdict.VERIFIED, "expands to 0" + (f" ({note})" if note else ""),
                     {"expression": str(expr)[:300]})
    for sub in substitutions:
        val = complex(sp.N(expr.subs(sub), 30))
        if abs(val) > 1e-9:
            return Check(name, Verdict.REFUTED, f"nonzero ({fmt(abs(val))}) at {sub}",
                         {"expression": str(expr)[:300], "witness": {str(k): float(v) for k, v in sub.items()},
                          "value": abs(val)})
    simplified = sp.simplify(expr)
    if simplified == 0:
        return Check(name, Verdict.VERIFIED, "simplifies to 0" + (f" ({note})" if note else ""),
                     {"expression": str(expr)[:300]})
    return Check(name, Verdict.INCONCLUSIVE,
                 "sympy could not simplify to 0" + (" (numerically zero at the test points)" if substitutions else ""),
                 {"expression": str(expr)[:300], "simplified": str(simplified)[:300]})


def symbolic_true(name: str, relation, *, note: str = "") -> Check:
    """A sympy relation / boolean that must simplify to True (False is REFUTED)."""
    import sympy as sp

    res = sp.simplify(relation)
    if res is sp.true or res is True:
        return Check(name, Verdict.VERIFIED, "simplifies to True" + (f" ({note})" if note else ""),
                     {"relation": str(relation)[:300]})
    if res is sp.false or res is False:
        return Check(name, Verdict.REFUTED, "simplifies to False", {"relation": str(relation)[:300]})
    return Check(name, Verdict.INCONCLUSIVE, "sympy could not decide", {"relation": str(relation)[:300],
                                                                         "simplified": str(res)[:300]})


def close(name: str, predicted, measured, *, rtol: float, atol: float = 0.0, what: str = "value",
          evidence: dict | None = None) -> Check:
    """An identity or predicted number: VERIFIED when |measured - predicted| <= atol + rtol |predicted|,
    REFUTED otherwise (an identity violated beyond its stated tolerance)."""
    ev = dict(evidence or {})
    if predicted is None or measured is None:
        ev.update(predicted=predicted, measured=measured)
        return Check(name, Verdict.INCONCLUSIVE, f"{what} is undefined (null)", ev)
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    if p.shape != m.shape:
        return Check(name, Verdict.REFUTED, f"{what}: shapes differ {p.shape} vs {m.shape}", ev)
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(m))):
        ev.update(predicted=p, measured=m)
        return Check(name, Verdict.INCONCLUSIVE, f"{what} is not finite", ev)
    err = float(np.max(np.abs(m - p))) if p.size else 0.0
    bound = atol + rtol * float(np.max(np.abs(p))) if p.size else atol
    ev.update(predicted=p if p.size <= 64 else None, measured=m if m.size <= 64 else None,
              abs_error=err, tolerance=bound)
    if err <= bound:
        return Check(name, Verdict.VERIFIED, f"{what} matches: |error| = {fmt(err, 3)} <= {fmt(bound, 3)}", ev)
    return Check(name, Verdict.REFUTED, f"{what} differs: |error| = {fmt(err, 3)} > {fmt(bound, 3)}"
                 f" (predicted {fmt(p.ravel()[0] if p.size == 1 else '…')}, measured {fmt(m.ravel()[0] if m.size == 1 else '…')})", ev)


def optimum_matches(name: str, predicted: float, *, attained: float, lower_bound: float | None,
                    tol: float, converged: bool = True, certificate: str = "",
                    evidence: dict | None = None) -> Check:
    """Predicted global optimum against a solver's attained value and a certified lower bound.

    - REFUTED if a feasible point is strictly below the prediction (attained < predicted - tol),
      or the certified lower bound is above it (lower_bound > predicted + tol).
    - INCONCLUSIVE if no certificate, the certificate gap (attained - lower_bound) exceeds tol,
      or the solver did not converge.
    - VERIFIED otherwise: predicted lies in [lower_bound - tol, attained + tol] with a gap <= tol.

    ``tol`` is absolute; callers scale it by the problem's value.
    """
    ev = dict(evidence or {})
    ev.update(predicted=predicted, attained=attained, lower_bound=lower_bound, tolerance=tol,
              certificate=certificate or None, converged=converged)
    if attained is not None and attained < predicted - tol:
        ev["witness_gap"] = predicted - attained
        return Check(name, Verdict.REFUTED, f"a feasible point attains {fmt(attained)} < predicted optimum "
                     f"{fmt(predicted)} (by {fmt(predicted - attained, 3)})", ev)
    if lower_bound is not None and lower_bound > predicted + tol:
        ev["witness_gap"] = lower_bound - predicted
        return Check(name, Verdict.REFUTED, f"certified lower bound {fmt(lower_bound)} > predicted optimum "
                     f"{fmt(predicted)} (by {fmt(lower_bound - predicted, 3)})", ev)
    if lower_bound is None:
        return Check(name, Verdict.INCONCLUSIVE, "no certificate (lower bound) for the global optimum", ev)
    gap = attained - lower_bound
    ev["gap"] = gap
    if gap > tol:
        return Check(name, Verdict.INCONCLUSIVE, f"certificate gap {fmt(gap, 3)} > tolerance {fmt(tol, 3)}", ev)
    if not converged:
        return Check(name, Verdict.INCONCLUSIVE, "solver did not report convergence", ev)
    return Check(name, Verdict.VERIFIED, f"optimum {fmt(predicted)} certified: gap {fmt(gap, 3)} <= {fmt(tol, 3)}"
                 + (f" ({certificate})" if certificate else ""), ev)


def lower_bound_holds(name: str, bound: float, feasible_value: float, *, tol: float,
                      evidence: dict | None = None) -> Check:
    """A claimed lower bound against the value at a feasible point: REFUTED iff value < bound - tol."""
    ev = dict(evidence or {})
    ev.update(bound=bound, feasible_value=feasible_value, tolerance=tol, slack=feasible_value - bound)
    if feasible_value < bound - tol:
        return Check(name, Verdict.REFUTED, f"feasible point at {fmt(feasible_value)} lies below the bound "
                     f"{fmt(bound)}", ev)
    return Check(name, Verdict.VERIFIED, f"bound {fmt(bound)} <= feasible value {fmt(feasible_value)}", ev)


def hypothesis_fails(name: str, reason: str, evidence: dict | None = None) -> Check:
    """A theorem hypothesis does not hold for this instance: INCONCLUSIVE with the reason."""
    return Check(name, Verdict.INCONCLUSIVE, f"hypothesis fails: {reason}", dict(evidence or {}))


def geometry_is(name: str, expected: str, geometry, *, evidence: dict | None = None) -> Check:
    """A classified geometry (``theory.geometry.GeometryClass``) must equal ``expected``."""
    ev = dict(evidence or {})
    ev.update(geometry.to_dict())
    if geometry.classification == expected:
        return Check(name, Verdict.VERIFIED, f"geometry is {expected}", ev)
    return Check(name, Verdict.REFUTED, f"geometry is {geometry.classification}, expected {expected}", ev)


def at_certified_point(check: Check, *, value: float | None, lower_bound: float | None, tol: float,
                       converged: bool = True) -> Check:
    """A statement about the solver's point (its geometry, its collapse) says something about the
    minimiser only when that point is a certified global minimiser (value - lower bound <= tol, and
    the solver converged). Otherwise the check becomes INCONCLUSIVE, whatever it found: a local
    minimum neither refutes nor verifies a statement about the global one."""
    gap = None if value is None or lower_bound is None else float(value - lower_bound)
    if gap is not None and gap <= tol and converged:
        return check
    why = ("no certificate" if gap is None else f"certificate gap {fmt(gap, 3)} > {fmt(tol, 3)}" if gap > tol
           else "the solver did not converge")
    return Check(check.name, Verdict.INCONCLUSIVE,
                 f"not judged: the solver's point is not a certified global minimiser ({why}); "
                 f"at that point: {check.verdict.value}, {check.reason}",
                 {**check.evidence, "certificate_gap": gap, "verdict_at_solver_point": check.verdict.value})


def condition(name: str, ok: bool, *, verified: str, refuted: str, evidence: dict | None = None,
              inconclusive: bool = False) -> Check:
    """A boolean measured statement. ``inconclusive=True`` turns a failure into INCONCLUSIVE."""
    if ok:
        return Check(name, Verdict.VERIFIED, verified, dict(evidence or {}))
    return Check(name, Verdict.INCONCLUSIVE if inconclusive else Verdict.REFUTED, refuted, dict(evidence or {}))
