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


from proofs_check import statements as st  # noqa: E402  (statement types and the one judging rule)
from proofs_check.statements import Verdict  # noqa: E402,F401  (defined there, re-exported here)
from theory._validate import finite


# NOT_APPLICABLE has no severity: it never enters the worst verdict over applicable statements.
_SEVERITY = {Verdict.VERIFIED: 0, Verdict.INCONCLUSIVE: 1, Verdict.REFUTED: 2, Verdict.ERROR: 3}


def worst(verdicts: Iterable[Verdict | str]) -> Verdict:
    """Worst verdict over the applicable ones: ERROR > REFUTED > INCONCLUSIVE > VERIFIED.

    NOT_APPLICABLE verdicts are left out; when every verdict is NOT_APPLICABLE the result is
    NOT_APPLICABLE. Empty input is INCONCLUSIVE (nothing checked is never VERIFIED).

    Returns a :class:`Verdict`; raises ``ValueError`` for a string that names no verdict.
    """
    vs = [Verdict(v) for v in verdicts]
    if not vs:
        return Verdict.INCONCLUSIVE
    applicable = [v for v in vs if v is not Verdict.NOT_APPLICABLE]
    if not applicable:
        return Verdict.NOT_APPLICABLE
    return max(applicable, key=_SEVERITY.__getitem__)


#: The console shows at most this many characters of a reason (the full text is in the JSON).
SHORT_REASON = 160


def shorten(text: str, limit: int = SHORT_REASON) -> str:
    """One line of at most ``limit`` characters (whitespace collapsed, an ellipsis when cut)."""
    t = " ".join(str(text).split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def summarise(items: Iterable[Any], *, what: str = "checks") -> tuple[Verdict, str]:
    """The one place that turns a list of checks (or claim results, or anything with ``verdict``,
    ``reason``, a name and optionally ``independent``) into a verdict and its reason.

    - Verdict: the worst over the applicable items (:func:`worst`); all NOT_APPLICABLE gives
      NOT_APPLICABLE; nothing checked is INCONCLUSIVE.
    - A VERIFIED result needs at least one VERIFIED item marked ``independent`` (a comparison with
      a separate computation); restatements alone give INCONCLUSIVE.
    - Reason: the names and reasons of the items that decided the verdict (at most three).
    """
    items = list(items)
    if not items:
        return Verdict.INCONCLUSIVE, f"no {what} were run"

    def name_of(x):
        return getattr(x, "name", None) or getattr(getattr(x, "claim", None), "id", None) or getattr(x, "id", "?")

    verdict = worst(x.verdict for x in items)
    if verdict is Verdict.NOT_APPLICABLE:
        return verdict, "; ".join(f"{name_of(x)}: {x.reason}" for x in items[:3])
    if verdict is Verdict.VERIFIED:
        applicable = [x for x in items if x.verdict is not Verdict.NOT_APPLICABLE]
        if not any(getattr(x, "independent", True) for x in applicable):
            return Verdict.INCONCLUSIVE, ("only consistency checks passed (restatements); no independent "
                                          "check supports the statement")
        na = len(items) - len(applicable)
        return verdict, f"all {len(applicable)} applicable {what} hold" + (f" ({na} not applicable)" if na else "")
    bad = [x for x in items if x.verdict is verdict]
    return verdict, "; ".join(f"{name_of(x)}: {x.reason}" for x in bad[:3]) + \
        (f" (and {len(bad) - 3} more)" if len(bad) > 3 else "")


class Provenance(str, Enum):
    QUOTED = "quoted"  # the statement is quoted from the source
    RECONSTRUCTED = "reconstructed"  # rebuilt from partial text / code, verified numerically
    DERIVED = "derived"  # derived in this project

    def __str__(self) -> str:  # pragma: no cover
        return self.value


def clean(obj: Any) -> Any:
    """Convert to JSON-safe Python: numpy scalars/arrays to lists, NaN/inf to None.

    Returns plain dicts/lists/str/int/float/bool/None (objects with ``to_dict`` are converted
    through it; anything else becomes its ``str``). Never raises for unusual input."""
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
    #: True when the check compares with a separate computation (a solver, a certificate, an exact
    #: enumeration, a symbolic proof, a numeric evaluation of an identity at random points); False
    #: for a consistency check (a restatement that cannot fail independently of the formula).
    independent: bool = True
    #: Only for value statements judged under ``--rigorous`` (docs/rigorous.md): True when the verdict
    #: VERIFIED was proven in ball arithmetic, False when the bracket did not prove it; None otherwise.
    rigorous: bool | None = None
    #: What the check states (a :mod:`proofs_check.statements` value: "the optimum equals v", "min >= B", ...)
    #: when a builder made it; ``--rigorous`` re-judges that statement with a proven bracket. None for checks
    #: whose verdict is not a comparison of one quantity with a bracket (symbolic identities, hypotheses).
    statement: st.Statement | None = field(default=None, compare=False)

    def __post_init__(self):
        self.verdict = Verdict(self.verdict)

    def evidence_out(self) -> dict:
        """The evidence as reported: with ``"statement"`` (its :meth:`~proofs_check.statements.Statement.to_dict`)
        when the check has one, so a saved report can be re-judged (``solve --rigorous REPORT.json``)."""
        if self.statement is None:
            return self.evidence
        return {**self.evidence, "statement": self.statement.to_dict()}

    def to_dict(self) -> dict:
        out = {"name": self.name, "verdict": self.verdict.value, "reason": self.reason,
               "independent": bool(self.independent), "evidence": clean(self.evidence_out())}
        if self.rigorous is not None:
            out["rigorous"] = bool(self.rigorous)
        return out


@dataclass(frozen=True)
class RunContext:
    """Options for a run: ``profile`` is "quick" (default, minutes) or "full" (exhaustive)."""

    profile: str = "quick"
    seed: int = 0
    #: Re-derive value certificates in ball arithmetic (``run --rigorous``, docs/rigorous.md); needs
    #: python-flint. Claims apply it through :func:`proofs_check.rigorous.judge_report`.
    rigorous: bool = False

    def __post_init__(self):
        from theory._validate import InputError

        if self.profile not in ("quick", "full"):
            raise InputError(f"profile must be 'quick' or 'full', got {self.profile!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise InputError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not isinstance(self.rigorous, bool):
            raise InputError(f"rigorous must be True or False, got {self.rigorous!r}")

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
        verdict, reason = summarise(checks)
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

    @property
    def independent_checks(self) -> int:
        return sum(1 for ch in self.checks if ch.independent)

    @property
    def rigorous(self) -> bool:
        """VERIFIED with its value statements proven in ball arithmetic: at least one check judged under
        ``--rigorous`` and every judged check proven (``Check.rigorous``); statements about points keep
        their float evidence (docs/rigorous.md)."""
        judged = [ch.rigorous for ch in self.checks if ch.rigorous is not None]
        return self.verdict is Verdict.VERIFIED and bool(judged) and all(judged)

    def to_dict(self) -> dict:
        c = self.claim
        return {"id": c.id, "family": c.family, "statement": c.statement, "source": c.source,
                "provenance": c.provenance.value, "verdict": self.verdict.value, "reason": self.reason,
                "independent_checks": self.independent_checks,
                "consistency_checks": len(self.checks) - self.independent_checks,
                "seconds": round(self.seconds, 4), "key_numbers": self.key_numbers(),
                "rigorous": self.rigorous,
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
        if val != val:  # NaN (either part): no witness, and not "numerically zero" either
            return Check(name, Verdict.INCONCLUSIVE, f"not a number (NaN) at {sub}: not decided",
                         {"expression": str(expr)[:300], "witness": None})
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


# ---- fail-closed numeric comparisons -------------------------------------------------------
# Every comparison that decides a verdict goes through these: NaN or inf never passes.

is_finite = finite


def tolerance(scale: float, *, rtol: float, atol: float) -> float:
    """A scale-aware tolerance ``atol + rtol * |scale|`` (so a value of size 1e-7 cannot accept a 1%
    error through an absolute part sized for values near 1). Not finite scale: ``atol``."""
    return float(atol + rtol * abs(float(scale))) if is_finite(scale) else float(atol)


def within(err, tol) -> bool:
    """``err <= tol`` that fails closed: False whenever either side is NaN, inf or missing."""
    return is_finite(err, tol) and float(err) <= float(tol)


def exceeds(err, tol) -> bool:
    """``err > tol`` with both sides finite (a witness needs real numbers): False otherwise."""
    return is_finite(err, tol) and float(err) > float(tol)


def _not_numeric(x) -> bool:
    """A string, bytes, boolean, or an array of them / of objects: not a number for a comparison."""
    if isinstance(x, (str, bytes, bool, np.bool_)):
        return True
    try:
        arr = np.asarray(x)
    except Exception:  # noqa: BLE001 - anything numpy cannot even hold is not a number
        return True
    if arr.dtype.kind == "O":  # sympy / mpmath / Fraction numbers are numbers; strings and booleans are not
        return any(isinstance(e, (str, bytes, bool, np.bool_)) for e in arr.ravel().tolist())
    return arr.dtype.kind in "bUSV"


def close(name: str, predicted, measured, *, rtol: float, atol: float = 0.0, what: str = "value",
          evidence: dict | None = None, independent: bool = True) -> Check:
    """An identity or predicted number: VERIFIED when |measured - predicted| <= atol + rtol |predicted|,
    REFUTED otherwise (an identity violated beyond its stated tolerance). Undefined or non-finite
    numbers on either side: INCONCLUSIVE (fails closed)."""
    ev = dict(evidence or {})
    if predicted is None or measured is None:
        ev.update(predicted=predicted, measured=measured)
        return Check(name, Verdict.INCONCLUSIVE, f"{what} is undefined (null)", ev, independent)
    if _not_numeric(predicted) or _not_numeric(measured):  # "1.0" or True is not a number (never coerced)
        ev.update(predicted=repr(predicted)[:80], measured=repr(measured)[:80])
        return Check(name, Verdict.INCONCLUSIVE, f"{what} is not a number (a string, boolean or object)", ev,
                     independent)
    try:
        p = np.asarray(predicted, dtype=float)
        m = np.asarray(measured, dtype=float)
    except (TypeError, ValueError):
        return Check(name, Verdict.INCONCLUSIVE, f"{what} is not a number", ev, independent)
    if p.size == 0 or m.size == 0:  # nothing to compare is never a pass
        ev.update(predicted_size=int(p.size), measured_size=int(m.size))
        return Check(name, Verdict.INCONCLUSIVE, f"{what}: nothing to compare (an empty array)", ev, independent)
    if p.shape != m.shape:
        return Check(name, Verdict.REFUTED, f"{what}: shapes differ {p.shape} vs {m.shape}", ev, independent)
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(m))) or not is_finite(rtol, atol):
        ev.update(predicted=p, measured=m)
        return Check(name, Verdict.INCONCLUSIVE, f"{what} is not finite", ev, independent)
    err = float(np.max(np.abs(m - p))) if p.size else 0.0
    bound = atol + rtol * float(np.max(np.abs(p))) if p.size else atol
    ev.update(predicted=p if p.size <= 64 else None, measured=m if m.size <= 64 else None,
              abs_error=err, tolerance=bound, rtol=rtol, atol=atol)
    if within(err, bound):
        return Check(name, Verdict.VERIFIED, f"{what} matches: |error| = {fmt(err, 3)} <= {fmt(bound, 3)}", ev,
                     independent)
    if not is_finite(err):
        return Check(name, Verdict.INCONCLUSIVE, f"{what}: error is not finite", ev, independent)
    return Check(name, Verdict.REFUTED, f"{what} differs: |error| = {fmt(err, 3)} > {fmt(bound, 3)}"
                 f" (predicted {fmt(p.ravel()[0] if p.size == 1 else '…')}, measured {fmt(m.ravel()[0] if m.size == 1 else '…')})",
                 ev, independent)


def judged(name: str, statement: "st.Statement", bracket: "st.Bracket", *, evidence: dict | None = None,
           independent: bool = True, note: str = "") -> Check:
    """The :class:`Check` of ``statement`` judged on ``bracket`` (the one rule,
    :meth:`proofs_check.statements.Statement.judge`); ``note`` is appended to a VERIFIED reason."""
    verdict, reason, extra = statement.judge(bracket)
    ev = dict(evidence or {})
    ev.update(extra)
    if note and verdict is Verdict.VERIFIED:
        reason += f" ({note})"
    return Check(name, verdict, reason, ev, independent, statement=statement)


def optimum_matches(name: str, predicted: float, *, attained: float | None, lower_bound: float | None,
                    tol: float, converged: bool = True, certificate: str = "",
                    evidence: dict | None = None) -> Check:
    """Predicted global optimum against a feasible value and a proven lower bound: the statement
    :class:`~proofs_check.statements.ValueEquals` judged on the float bracket [lower_bound, attained].

    - REFUTED if a feasible point is below the prediction (attained < predicted - tol), or the
      proven lower bound is above it (lower_bound > predicted + tol). Both need finite numbers.
    - INCONCLUSIVE if any number is missing or not finite, there is no certificate, or the
      certificate gap (attained - lower_bound) exceeds tol.
    - VERIFIED when [lower_bound, attained] lies in [predicted - tol, predicted + tol] (so the gap is <= tol
      and every value the optimum can take is within tol of the prediction); INCONCLUSIVE when the bracket
      straddles predicted +- tol.

    ``attained`` must be the objective evaluated at a feasible point, so it is an upper bound on
    the optimum whether or not the solver reported convergence: ``converged`` is recorded in the
    evidence but does not decide (an auxiliary route's trouble never blocks a proven statement).
    ``tol`` is absolute; build it with :func:`tolerance`.
    """
    ev = dict(evidence or {})
    ev.update(predicted=predicted, attained=attained, lower_bound=lower_bound, tolerance=tol,
              certificate=certificate or None, converged=converged)
    return judged(name, st.ValueEquals(_num(predicted), _num(tol)),
                  st.FloatBracket(_num(lower_bound), _num(attained)), evidence=ev, note=certificate)


def _num(x):
    """A plain float for a statement or bracket (None when missing or not a number)."""
    if x is None or isinstance(x, (bool, np.bool_)):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def lower_bound_claim(name: str, claimed: float, *, proven_lower: float | None, feasible_value: float | None,
                      tol: float, feasible_points: int | None = None, certificate: str = "",
                      evidence: dict | None = None) -> Check:
    """The statement "min >= claimed" (:class:`~proofs_check.statements.AtLeast` on the float bracket
    [proven_lower, feasible_value]).

    VERIFIED only by a proof: a proven lower bound >= claimed - tol. REFUTED by a witness: a feasible
    point with value < claimed - tol. Anything else (for example "no counterexample among N feasible
    points") is INCONCLUSIVE, with N in the evidence.
    """
    ev = dict(evidence or {})
    ev.update(claimed_lower_bound=claimed, proven_lower_bound=proven_lower, feasible_value=feasible_value,
              tolerance=tol, feasible_points=feasible_points, certificate=certificate or None)
    return judged(name, st.AtLeast(_num(claimed), _num(tol), feasible_points),
                  st.FloatBracket(_num(proven_lower), _num(feasible_value)), evidence=ev, note=certificate)


def upper_bound_claim(name: str, claimed: float, *, feasible_value: float | None, proven_lower: float | None,
                      tol: float, evidence: dict | None = None) -> Check:
    """The statement "min <= claimed" (:class:`~proofs_check.statements.AtMost`): VERIFIED by a feasible
    point with value <= claimed + tol; REFUTED by a proven lower bound > claimed + tol; INCONCLUSIVE
    otherwise."""
    ev = dict(evidence or {})
    ev.update(claimed_upper_bound=claimed, feasible_value=feasible_value, proven_lower_bound=proven_lower,
              tolerance=tol)
    return judged(name, st.AtMost(_num(claimed), _num(tol)), st.FloatBracket(_num(proven_lower), _num(feasible_value)),
                  evidence=ev)


def min_below(name: str, reference: float, *, feasible_value: float | None, proven_lower: float | None,
              tol: float, allowance: float = 0.0, what: str = "reference", evidence: dict | None = None) -> Check:
    """The statement "min < reference" (:class:`~proofs_check.statements.MinBelow`) on the float bracket
    [proven_lower, feasible_value] widened by ``allowance``: VERIFIED by a feasible point below reference -
    tol, REFUTED by a proven lower bound >= reference, INCONCLUSIVE otherwise."""
    ev = dict(evidence or {})
    ev.update(reference=reference, feasible_value=feasible_value, proven_lower_bound=proven_lower, tolerance=tol)
    return judged(name, st.MinBelow(_num(reference), _num(tol), what),
                  st.FloatBracket(_num(proven_lower), _num(feasible_value), _num(allowance)), evidence=ev)


def certified_optimum(name: str, value: float, *, proven_lower: float | None, tol: float, note: str = "",
                      evidence: dict | None = None) -> Check:
    """The statement "the reported feasible value ``value`` is the optimum" within ``tol``
    (:class:`~proofs_check.statements.CertifiedOptimum` on the float bracket [proven_lower, value]): VERIFIED
    when value - proven_lower <= tol, INCONCLUSIVE otherwise."""
    ev = dict(evidence or {})
    ev.update(feasible_value=value, proven_lower_bound=proven_lower, tolerance=tol)
    return judged(name, st.CertifiedOptimum(_num(value), _num(tol)), st.FloatBracket(_num(proven_lower), _num(value)),
                  evidence=ev, note=note)


def lower_bound_holds(name: str, bound: float, feasible_value: float, *, tol: float,
                      proven_lower: float | None = None, feasible_points: int | None = None,
                      evidence: dict | None = None) -> Check:
    """Backward-compatible name for :func:`lower_bound_claim` ("min >= bound"): a feasible value
    can only refute; VERIFIED needs ``proven_lower``."""
    return lower_bound_claim(name, bound, proven_lower=proven_lower, feasible_value=feasible_value, tol=tol,
                             feasible_points=feasible_points, evidence=evidence)


def hypothesis_fails(name: str, reason: str, evidence: dict | None = None) -> Check:
    """A theorem hypothesis does not hold for this instance: NOT_APPLICABLE with the failed
    hypothesis. It does not count in the overall verdict."""
    return Check(name, Verdict.NOT_APPLICABLE, f"hypothesis fails: {reason}", dict(evidence or {}))


def geometry_is(name: str, expected: str, geometry, *, evidence: dict | None = None) -> Check:
    """A classified geometry (``theory.geometry.GeometryClass``) must equal ``expected``.

    This compares a *point's* geometry; about the minimiser it says something only through
    :func:`at_certified_point` (a proven radius) or when the point is the proven unique minimiser.
    """
    ev = dict(evidence or {})
    ev.update(geometry.to_dict())
    if geometry.classification == expected:
        return Check(name, Verdict.VERIFIED, f"geometry is {expected}", ev)
    return Check(name, Verdict.REFUTED, f"geometry is {geometry.classification}, expected {expected}", ev)


def point_statement(name: str, deviation: float | None, tau: float, *, radius: float | None,
                    lipschitz: float = 1.0, how: str = "", what: str = "deviation",
                    evidence: dict | None = None) -> Check:
    """A statement measured at a solver's point, about every minimiser
    (:class:`~proofs_check.statements.PointWithinRadius`).

    ``deviation`` is the measured violation at the point (0 = the statement holds exactly),
    ``tau`` the statement's tolerance, ``radius`` a proven bound on the distance from the point to
    every minimiser (in the coordinates where the statement's measure is ``lipschitz``-Lipschitz),
    and ``how`` says how ``radius`` was proven.

    - VERIFIED when deviation + lipschitz * radius <= tau (it holds at every minimiser);
    - REFUTED when deviation - lipschitz * radius > tau (violated at every point within the radius);
    - INCONCLUSIVE otherwise, or without a radius ("no geometry certificate"), or with non-finite
      numbers.
    """
    ev = dict(evidence or {})
    ev.update(deviation=deviation, tolerance=tau, radius=radius, lipschitz=lipschitz,
              radius_proof=how or None)
    s = st.PointWithinRadius(_num(deviation), _num(tau), _num(radius), _num(lipschitz), what, how)
    return judged(name, s, s.bracket(), evidence=ev)


def at_certified_point(check: Check, *, value: float | None, lower_bound: float | None, tol: float,
                       converged: bool = True, unique: bool = False, how: str = "") -> Check:
    """A statement about the solver's point (its geometry, its collapse) says something about the
    minimiser only when the point is proven to be *the* minimiser in the coordinates the statement
    uses. A value within tolerance of a proven lower bound is not enough (in a flat landscape an
    epsilon-optimal point can be far from every minimiser), so without ``unique=True`` (a proof that
    the minimiser is unique and equal to this point, ``how`` saying which) the check becomes
    INCONCLUSIVE ("no geometry certificate"). For tolerance statements at an approximate point use
    :func:`point_statement` with a proven radius."""
    gap = None if not is_finite(value, lower_bound) else float(value - lower_bound)
    if unique and within(gap, tol):
        return Check(check.name, check.verdict, check.reason + (f" (unique minimiser: {how})" if how else ""),
                     {**check.evidence, "certificate_gap": gap, "geometry_certificate": how or "unique"},
                     check.independent)
    if gap is None:
        why = "no certificate"
    elif not within(gap, tol):
        why = f"certificate gap {fmt(gap, 3)} > {fmt(tol, 3)}"
    else:
        why = "no geometry certificate: a value gap does not certify the point"
    return Check(check.name, Verdict.INCONCLUSIVE,
                 f"not judged: the point is not proven to be the minimiser ({why}); "
                 f"at that point: {check.verdict.value}, {check.reason}",
                 {**check.evidence, "certificate_gap": gap, "verdict_at_solver_point": check.verdict.value},
                 check.independent)


def condition(name: str, ok: bool, *, verified: str, refuted: str, evidence: dict | None = None,
              inconclusive: bool = False, independent: bool = True) -> Check:
    """A boolean measured statement. ``inconclusive=True`` turns a failure into INCONCLUSIVE.
    ``ok`` must be a real boolean (numpy bools accepted); anything else fails closed."""
    if isinstance(ok, (bool, np.bool_)) and bool(ok):
        return Check(name, Verdict.VERIFIED, verified, dict(evidence or {}), independent)
    return Check(name, Verdict.INCONCLUSIVE if inconclusive or not isinstance(ok, (bool, np.bool_)) else Verdict.REFUTED,
                 refuted, dict(evidence or {}), independent)


# --------------------------------------------------------------------------------------
# The one report type of `ncproofs solve` (and check_instance, sweeps, plots, the plugin)
# --------------------------------------------------------------------------------------

@dataclass
class SolveReport:
    """Everything one instance check found, built by ``check_instance`` of a family.

    The CLI, the runner, sweeps, plots and the pytest plugin only render or store it.
    ``to_dict()`` is the documented ``solve --json`` schema (docs/DEVELOPING.md); the verdict and
    its reason come from :func:`summarise` over ``claims`` (one :class:`Check` per statement, its
    ``name`` the statement id in kebab-case). ``diagnostics`` collects route trouble and solver
    warnings that do not decide anything; ``extra`` holds family-specific top-level keys.
    """

    family: str
    instance: dict
    predicted: dict = field(default_factory=dict)
    solution: dict | None = None
    certificate: dict | None = None
    geometry: dict = field(default_factory=dict)
    claims: list[Check] = field(default_factory=list)
    routes: dict = field(default_factory=dict)
    diagnostics: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    seconds: float | None = None
    #: Live objects of the check (the problem, the candidate point, its layout), never serialised: under
    #: ``--rigorous`` the family's ball-arithmetic recipe bounds this candidate instead of solving again
    #: (:func:`proofs_check.rigorous.judge_report`).
    live: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def verdict(self) -> Verdict:
        return summarise(self.claims, what="statements")[0]

    @property
    def reason(self) -> str:
        return summarise(self.claims, what="statements")[1]

    def to_dict(self) -> dict:
        v, r = summarise(self.claims, what="statements")
        out = {"family": self.family, "instance": self.instance, "predicted": self.predicted,
               "solution": self.solution, "certificate": self.certificate, "geometry": self.geometry,
               "routes": self.routes, "verdict": v.value, "reason": r,
               "claims": [{"id": c.name, "verdict": c.verdict.value, "reason": c.reason,
                           "independent": bool(c.independent), "evidence": c.evidence_out(),
                           **({"rigorous": bool(c.rigorous)} if c.rigorous is not None else {})}
                          for c in self.claims],
               "diagnostics": list(self.diagnostics)}
        if self.seconds is not None:
            out["seconds"] = self.seconds
        for k, val in self.extra.items():
            out.setdefault(k, val)
        return clean(out)

    # dict-style read access keeps older callers (``out["verdict"]``) working
    def __getitem__(self, key):
        return self.to_dict()[key]

    def get(self, key, default=None):
        return self.to_dict().get(key, default)
