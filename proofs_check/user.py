"""Public API for researchers' own claims, checked as property tests with plain ``pytest``.

A user claim is a statement (with source and provenance), a hypothesis strategy for the
instance parameters, the prediction, the solver call and the tolerances. It is checked with
the same machinery as the built-in claims (:mod:`proofs_check.core`: ``Claim``, ``Check``,
``Verdict`` and the check builders ``close``, ``lower_bound_holds``, ``optimum_matches``,
``geometry_is``), so the verdict rules are the same: REFUTED needs a witness beyond the stated
tolerance, a solver that did not converge or an uncertified optimum is INCONCLUSIVE, never
VERIFIED.

Two equivalent forms, in any test file::

    import hypothesis.strategies as st
    from proofs_check.user import UserClaim, user_claim, classes

    @user_claim(id="mine.etf-cosine", statement="...", source="my notes, Conj. 1",
                params={"k": classes(2, 8)}, predict=lambda p: -1 / (p["k"] - 1),
                kind="equals", rtol=1e-9)
    def test_etf_cosine(p):          # the solver call: returns the measured value
        ...

    claim = UserClaim(id=..., statement=..., source=..., params=..., predict=..., solve=..., atol=1e-8)
    test_my_claim = claim.as_test()

A failing claim raises :class:`ClaimFailure` (an ``AssertionError``) whose message holds the
instance, the reason and the evidence; hypothesis shrinks the instance to a minimal one
and prints it as the falsifying example ("Failing test case" in newer hypothesis).

Kinds (``kind=``) and what ``predict(p)`` / ``solve(p)`` return:

- ``"equals"``: a number or array / the measured one; VERIFIED iff
  ``max|measured - predicted| <= atol + rtol * max|predicted|`` (``core.close``).
- ``"lower_bound"``: the statement "min >= L" with L = ``predict(p)``. ``solve`` returns what it
  knows about the minimum: values at feasible points (a number or a sequence: each is an upper
  bound on the minimum), a :class:`Bounds` (feasible values and a proven lower bound), a
  ``solvers.common.Solution`` (its certificate's lower bound is the proven one), a dict
  ``{"value", "lower_bound"}``, or a ``core.SolveReport`` / its ``to_dict()`` (``solution.value``,
  ``certificate.lower_bound``). VERIFIED only by a proven lower bound >= L - tol; REFUTED by a
  feasible value < L - tol (a witness); otherwise ("no counterexample among N feasible points")
  INCONCLUSIVE with N in the evidence (``core.lower_bound_claim``).
- ``"upper_bound"``: the statement "min <= U": VERIFIED by a feasible value <= U + tol, REFUTED by
  a proven lower bound > U + tol, otherwise INCONCLUSIVE (``core.upper_bound_claim``).
- ``"optimum"``: the predicted global optimum / a ``solvers.common.Solution`` with a
  certificate, a dict ``{"value", "lower_bound", "converged"}`` or a SolveReport
  (``core.optimum_matches``).
- ``"geometry"``: the expected classification of the minimiser's class means ("simplex-etf",
  "orthogonal-frame", "other", "zero") / the class-mean Gram *with a proof about the point*: a
  :class:`ProvenPoint` (``unique=True``: the minimiser is proven unique and equal to this point;
  or ``radius=r``: every minimiser's normalised Gram is proven within r of this one, judged with
  ``core.point_statement``), or a SolveReport / its dict (the family's own geometry statement,
  judged with its certificates). A bare Gram matrix from a solver is a point not proven to be the
  minimiser: INCONCLUSIVE ("no geometry certificate"), with what the point shows in the evidence.
  Classified by ``theory.geometry.classify_gram`` at ``geometry_tol``.
- ``"custom"``: no prediction; ``solve(p)`` returns a ``core.Check`` or a list of them.

``solve`` may take ``(p)`` or ``(p, ctx)``; ``ctx`` is a :class:`UserContext` with the options
of the pytest plugin (``--ncproofs-solver``, ``--ncproofs-max-k``) and the seed. It may return
``Measured(value, evidence={...})`` to attach its own numbers to the evidence.
``requires(p)`` returns ``None`` when the theorem's hypotheses hold for ``p``, or a reason;
an instance outside the hypotheses is NOT_APPLICABLE (with the reason): it is discarded from the
property test (a test where no instance satisfies the hypotheses is skipped with the reason),
never counted as VERIFIED.

Bad arguments to this API raise ``theory._validate.InputError`` (a ``ValueError``) or ``TypeError``
with a message naming the parameter and the constraint.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from proofs_check.core import (Check, Claim, ClaimResult, Provenance, RunContext, Verdict, at_certified_point, clean,
                               close, fmt, geometry_is, hypothesis_fails, is_finite, lower_bound_claim,
                               optimum_matches, point_statement, tolerance, upper_bound_claim)
from theory._validate import InputError

KINDS = ("equals", "lower_bound", "upper_bound", "optimum", "geometry", "custom")
PROFILES = ("quick", "full")
ON_INCONCLUSIVE = ("fail", "discard")


# ---- argument validation (the API's boundary: InputError / TypeError naming the parameter) ----

def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _want_int(name: str, v, minimum: int) -> int:
    if not _is_int(v):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {type(v).__name__} {v!r}")
    if v < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {v!r}")
    if v > 2 ** 63 - 1:
        raise InputError(f"{name} must be an integer of at most 2^63 - 1, got {str(int(v))[:30]}")
    return int(v)


def _want_str(name: str, v, *, empty: bool = False) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a string, got {type(v).__name__} {v!r}")
    if not empty and not v.strip():
        raise InputError(f"{name} must be a non-empty string, got {v!r}")
    return v


def _want_tol(name: str, v, owner: str = "") -> float | None:
    if v is None:
        return None
    pre = f"{owner}: " if owner else ""
    if not _is_real(v):
        raise TypeError(f"{pre}{name} must be a finite number >= 0, got {type(v).__name__} {v!r}")
    if not (math.isfinite(float(v)) and float(v) >= 0):
        raise InputError(f"{pre}{name} must be a finite number >= 0, got {v!r}")
    if name == "geometry_tol" and float(v) >= MAX_GEOMETRY_TOL:
        raise InputError(f"{pre}{name} must be < {MAX_GEOMETRY_TOL:g} (it bounds distances between unit-norm Grams, "
                         f"which are at most 2: a tolerance of 1 or more accepts Grams far from the geometry), "
                         f"got {v!r}")
    if name.endswith("rtol") and float(v) >= MAX_RTOL:
        raise InputError(f"{pre}{name} must be < {MAX_RTOL:g} (a relative tolerance of 1 or more accepts 0 for any "
                         f"prediction: the statement would be vacuous), got {v!r}")
    return float(v)


#: Largest relative tolerance a user claim may state (exclusive): with rtol >= 1 the measured value 0
#: matches every prediction, so the statement could not fail.
MAX_RTOL = 1.0
#: An absolute tolerance must be below this multiple of max(1, |prediction|) at each instance (exclusive): with
#: atol at the prediction's own scale the measured value 0 (and everything of that size) matches it, so the
#: statement could not fail; 1e300 made every statement VERIFIED. Below 1 the floor 1 keeps atol = 1e-8 about a
#: predicted 0 meaningful. Checked per instance (the prediction is known only there): :meth:`UserClaim.checks`.
MAX_ATOL_SCALE = 1.0
#: Largest geometry tolerance (exclusive): theory.geometry.classify_gram compares distances of Grams scaled to
#: unit Frobenius norm (at most 2 apart), so a tolerance near 2 classifies every Gram as the geometry.
MAX_GEOMETRY_TOL = 1.0


def _want_callable(name: str, v, optional: bool = False):
    if v is None and optional:
        return None
    if not callable(v):
        raise TypeError(f"{name} must be callable{' or None' if optional else ''}, got {type(v).__name__} {v!r}")
    return v


def _want_params(name: str, v) -> dict:
    if not isinstance(v, Mapping):
        raise TypeError(f"{name} must be a dict of instance parameters, got {type(v).__name__} {v!r}")
    bad = [k for k in v if not isinstance(k, str)]
    if bad:
        raise TypeError(f"{name} keys must be parameter names (strings), got {bad[0]!r}")
    return dict(v)


def _want_ctx(name: str, v) -> "UserContext | None":
    if v is not None and not isinstance(v, UserContext):
        raise TypeError(f"{name} must be a proofs_check.user.UserContext or None, got {type(v).__name__}")
    return v


@dataclass(frozen=True)
class UserContext:
    """Options a user claim's ``solve`` may read: run profile and seed, the solver backend
    requested with ``--ncproofs-solver`` ("auto" by default) and the class-count cap."""

    profile: str = "quick"
    seed: int = 0
    solver: str = "auto"
    max_k: int | None = None

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise InputError(f"profile must be 'quick' or 'full', got {self.profile!r}")
        _want_int("seed", self.seed, 0)
        _want_str("solver", self.solver)
        if self.max_k is not None:
            _want_int("max_k", self.max_k, 2)

    @property
    def run_context(self) -> RunContext:
        return RunContext(self.profile, self.seed)


def _env_max_k() -> int | None:
    v = os.environ.get("NCPROOFS_MAX_K")
    return int(v) if v and v.strip().isdigit() and int(v) >= 2 else None


_CURRENT = {"ctx": UserContext(max_k=_env_max_k(), solver=os.environ.get("NCPROOFS_SOLVER", "").strip() or "auto")}


_UNSET = object()


def configure(*, max_k: Any = _UNSET, solver: Any = _UNSET, profile: Any = _UNSET, seed: Any = _UNSET) -> UserContext:
    """Set the options user claims see (the pytest plugin calls this from its command-line
    options). Arguments not given are left as they are; ``max_k=None`` removes the cap."""
    old = _CURRENT["ctx"]
    ctx = UserContext(profile=old.profile if profile is _UNSET else profile,
                      seed=old.seed if seed is _UNSET else seed,
                      solver=old.solver if solver is _UNSET else solver,
                      max_k=old.max_k if max_k is _UNSET else max_k)
    _CURRENT["ctx"] = ctx
    return ctx


def current_context() -> UserContext:
    return _CURRENT["ctx"]


def classes(min_value: int = 2, max_value: int = 8):
    """Strategy for a class count k in [min_value, max_value], capped by ``--ncproofs-max-k``
    (read when the test runs, so the plugin option applies to strategies built at import)."""
    import hypothesis.strategies as st

    min_value = _want_int("min_value", min_value, 1)
    max_value = _want_int("max_value", max_value, 1)
    if max_value < min_value:
        raise InputError(f"max_value must be >= min_value = {min_value}, got {max_value}")

    def build():
        cap = current_context().max_k
        hi = max_value if cap is None else min(max_value, cap)
        if hi < min_value:
            raise InputError(f"--ncproofs-max-k={cap} is below this claim's minimum class count {min_value}")
        return st.integers(min_value, hi)

    return st.deferred(build)


@dataclass
class Measured:
    """A measured value with the solver's own evidence (iterations, residuals, ...)."""

    value: Any
    evidence: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.evidence, Mapping):
            raise TypeError(f"evidence must be a dict, got {type(self.evidence).__name__}")
        self.evidence = dict(self.evidence)


@dataclass
class Bounds:
    """What a solve knows about the minimum of its problem, for the ``lower_bound``/``upper_bound``
    kinds: ``feasible`` (the objective at feasible points: each an upper bound on the minimum; a
    number or a sequence), ``proven_lower`` (a proven lower bound on the minimum: a certificate, such
    as a dual objective at an exactly feasible dual point) and ``certificate`` (how it was proven)."""

    feasible: Any = None
    proven_lower: float | None = None
    certificate: str = ""

    def __post_init__(self):
        if self.feasible is not None:
            self.feasible = _real_values("feasible", self.feasible)
        if self.proven_lower is not None and not _is_real(self.proven_lower):
            raise TypeError(f"proven_lower must be a real number or None, got {type(self.proven_lower).__name__}")
        _want_str("certificate", self.certificate, empty=True)
        if self.feasible is None and self.proven_lower is None:
            raise InputError("Bounds needs feasible= (values at feasible points) and/or proven_lower=")


@dataclass
class ProvenPoint:
    """The class-mean Gram matrix at a point, with a proof relating the point to the minimisers
    (for the ``geometry`` kind; a value gap alone does not certify a point):

    - ``unique=True``: the minimiser is proven unique and equal to this point (e.g. a closed form
      certified by a strictly complementary dual certificate, or an exact construction);
    - ``radius=r``: every minimiser's normalised Gram G/||G||_F is proven to lie within Frobenius
      distance r of this point's (the distances to the ETF/OF templates are 1-Lipschitz in it;
      ``lipschitz`` scales r if the proof is in other coordinates).

    ``how`` says how it was proven (it goes into the evidence). ``zero_tol``: the Frobenius norm at
    or below which the Gram counts as zero (the natural scale of your class means). Without it a
    nonzero Gram of norm <= ``theory.geometry.ZERO_TOL`` is ambiguous (a zero minimiser with rounding
    noise, or a small nonzero configuration at tiny regularisation) and a statement that needs
    to tell them apart is INCONCLUSIVE."""

    gram: Any
    how: str
    unique: bool = False
    radius: float | None = None
    lipschitz: float = 1.0
    zero_tol: float | None = None

    def __post_init__(self):
        from theory.geometry import _as_gram

        self.gram = _as_gram(self.gram, "gram")
        _want_str("how", self.how)
        if not isinstance(self.unique, (bool, np.bool_)):
            raise TypeError(f"unique must be True or False, got {type(self.unique).__name__}")
        if self.radius is not None:
            if not _is_real(self.radius):
                raise TypeError(f"radius must be a finite number >= 0 or None, got {type(self.radius).__name__}")
            if not (math.isfinite(float(self.radius)) and self.radius >= 0):
                raise InputError(f"radius must be a finite number >= 0, got {self.radius!r}")
        if not _is_real(self.lipschitz):
            raise TypeError(f"lipschitz must be a finite number > 0, got {type(self.lipschitz).__name__}")
        if not (math.isfinite(float(self.lipschitz)) and self.lipschitz > 0):
            raise InputError(f"lipschitz must be a finite number > 0, got {self.lipschitz!r}")
        if self.zero_tol is not None:
            if not _is_real(self.zero_tol):
                raise TypeError(f"zero_tol must be a finite number >= 0 or None, got {type(self.zero_tol).__name__}")
            if not (math.isfinite(float(self.zero_tol)) and self.zero_tol >= 0):
                raise InputError(f"zero_tol must be a finite number >= 0, got {self.zero_tol!r}")
        if not self.unique and self.radius is None:
            raise InputError("ProvenPoint needs unique=True or radius= (a proof about the point); a point "
                             "without one is a bare Gram matrix")


class ClaimFailure(AssertionError):
    """A user claim was REFUTED (or errored, or was inconclusive under ``on_inconclusive="fail"``)
    on an instance. The message holds the instance, the reason and the evidence."""

    def __init__(self, message: str, result: ClaimResult, params: dict):
        super().__init__(message)
        self.result, self.params = result, params


class UserCodeError(Exception):
    """The user's own ``solve``, ``predict`` or ``requires`` raised: an ERROR verdict whose reason names the
    exception and the line of the user's file where it was raised (``user_traceback`` holds the user's
    frames only, without ncproofs' own)."""

    def __init__(self, what: str, exc: BaseException):
        import traceback

        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _own_frame(f.filename)]
        self.what, self.original = what, exc
        self.user_traceback = "".join(traceback.format_list(frames)) + \
            "".join(traceback.format_exception_only(type(exc), exc))
        where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        super().__init__(f"{what} raised {type(exc).__name__}: {exc}{where}")


_OWN_DIR = os.path.dirname(os.path.abspath(__file__))


def _own_frame(filename: str) -> bool:
    """A frame of ncproofs itself (proofs_check/), not of the user's code."""
    return os.path.abspath(filename).startswith(_OWN_DIR + os.sep)


def _user_call(what: str, fn: Callable, *args):
    """Call the user's function; its exception becomes :class:`UserCodeError` (naming the user's line)."""
    try:
        return fn(*args)
    except Exception as exc:
        raise UserCodeError(what, exc) from exc


def user_traceback_of(res: ClaimResult) -> str | None:
    """The user's frames of the exception behind an ERROR result (from the error check's traceback)."""
    for c in res.checks:
        tb = c.evidence.get("traceback") if isinstance(c.evidence, dict) else None
        if c.verdict is Verdict.ERROR and tb:
            return _user_frames(tb)
    return None


def _user_frames(tb_text: str) -> str:
    """From a formatted traceback (possibly chained), the first exception's frames outside ncproofs."""
    first = tb_text.split("\nThe above exception was the direct cause")[0]
    out, skip = [], False
    for line in first.splitlines():
        if line.startswith("  File "):
            m = re.match(r'  File "([^"]+)"', line)
            skip = bool(m) and _own_frame(m.group(1))
        elif not line.startswith("    "):
            skip = False
        if not skip and not line.startswith("Traceback (most recent call last)"):
            out.append(line)
    return "\n".join(out).strip()


class _Discard(Exception):
    """Internal: the instance is outside the theorem's hypotheses (or inconclusive under "discard")."""


def _tol(rtol: float | None, atol: float | None, scale) -> float:
    s = float(np.max(np.abs(np.asarray(scale, dtype=float)))) if scale is not None else 0.0
    return tolerance(s, rtol=rtol or 0.0, atol=atol or 0.0)


def _real_values(name: str, v) -> list[float]:
    """A number or a sequence of numbers as a list of floats (non-finite entries kept: they fail closed)."""
    if isinstance(v, (str, bytes)) or isinstance(v, Mapping):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {type(v).__name__}")
    try:
        arr = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {type(v).__name__}") from None
    vals = arr.ravel().tolist()
    if not vals:
        raise InputError(f"{name} must hold at least one value, got an empty sequence")
    return vals


def _evidence_text(checks: list[Check], limit: int = 1500) -> str:
    lines = []
    for c in checks:
        ev = clean(c.evidence)
        ev.pop("traceback", None) if isinstance(ev, dict) else None
        items = ", ".join(f"{k}={_short(v)}" for k, v in ev.items()) if isinstance(ev, dict) else str(ev)
        lines.append(f"    [{c.verdict.value}] {c.name}: {c.reason}")
        if items:
            lines.append(f"        {items}")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit] + " …"


def _short(v) -> str:
    if isinstance(v, float):
        return fmt(v, 10)
    if isinstance(v, (list, dict)):
        flat = str(v)
        return flat if len(flat) <= 120 else flat[:117] + "…"
    return "null" if v is None else str(v)


def _arity(fn: Callable) -> int:
    try:
        ps = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return len(ps)
    except (TypeError, ValueError):  # builtins without a signature
        return 1


def _report_dict(m) -> dict | None:
    """A family's ``check_instance`` result (a ``core.SolveReport``) or its ``to_dict()`` (the
    ``solve --json`` schema) as a dict; None for anything else."""
    from proofs_check.core import SolveReport

    if isinstance(m, SolveReport):
        return m.to_dict()
    if isinstance(m, Mapping) and "family" in m and ("solution" in m or "certificate" in m or "claims" in m):
        return dict(m)
    return None


def _float_or_none(v) -> float | None:
    return float(v) if _is_real(v) else None


def _bound_parts(m) -> tuple[list[float], float | None, str]:
    """(feasible values, proven lower bound, how it was proven) from what a bound claim's solve returned."""
    rep = _report_dict(m)
    if rep is not None:
        sol, cert = rep.get("solution") or {}, rep.get("certificate") or {}
        val = _float_or_none(sol.get("value"))
        return ([] if val is None else [val]), _float_or_none(cert.get("lower_bound")), str(cert.get("method") or "")
    if isinstance(m, Bounds):
        return list(m.feasible or []), _float_or_none(m.proven_lower), m.certificate
    if isinstance(m, Mapping):
        unknown = set(m) - {"value", "feasible", "lower_bound", "proven_lower", "method", "certificate", "converged"}
        if unknown:
            raise TypeError(f"a bound claim's solve returned a dict with unknown keys {sorted(unknown)} (expected "
                            "'value'/'feasible' and 'lower_bound'/'proven_lower')")
        feas = m.get("feasible", m.get("value"))
        lb = m.get("proven_lower", m.get("lower_bound"))
        how = m.get("certificate", m.get("method", ""))
        return ([] if feas is None else _real_values("solve()['value']", feas)), _float_or_none(lb), str(how or "")
    if hasattr(m, "value") and hasattr(m, "converged"):  # solvers.common.Solution
        cert = getattr(m, "certificate", None)
        return ([float(m.value)], None if cert is None else _float_or_none(cert.lower_bound),
                "" if cert is None else str(cert.method))
    return _real_values("the value returned by solve", m), None, ""


def _solution_number(what: str, v) -> float | None:
    """A value or lower bound an optimum claim's solve returned: a real number (NaN/inf kept: they fail closed) or
    None; a string or a boolean is the caller's error (``float("1.0")`` and ``float(True)`` made
    ``{"value": True, "lower_bound": True}`` VERIFY "min = 1")."""
    if v is None:
        return None
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(-1)[0]
    if not _is_real(v):
        raise TypeError(f"an optimum claim's solve returned {what} = {v!r} ({type(v).__name__}): it must be a real "
                        "number or None")
    return float(v)


def _solution_parts(m) -> tuple[float | None, float | None, bool, str]:
    rep = _report_dict(m)
    if rep is not None:
        sol, cert = rep.get("solution") or {}, rep.get("certificate") or {}
        return (_float_or_none(sol.get("value")), _float_or_none(cert.get("lower_bound")),
                bool(sol.get("converged", True)), str(cert.get("method") or ""))
    if isinstance(m, Bounds):  # the least feasible value and the proven lower bound
        finite = [v for v in (m.feasible or []) if math.isfinite(v)]
        val = min(finite) if finite else (m.feasible[0] if m.feasible else None)
        return val, _float_or_none(m.proven_lower), True, m.certificate
    if isinstance(m, Mapping):
        return (_solution_number("value", m.get("value")), _solution_number("lower_bound", m.get("lower_bound")),
                bool(m.get("converged", True)), str(m.get("method", "")))
    cert = getattr(m, "certificate", None)
    if hasattr(m, "value") and hasattr(m, "converged"):
        return (_solution_number("Solution.value", m.value),
                None if cert is None else _solution_number("Solution.certificate.lower_bound", cert.lower_bound),
                bool(m.converged), "" if cert is None else str(cert.method))
    raise TypeError("an optimum claim's solve must return a solvers.common.Solution, a core.SolveReport (or its "
                    "to_dict()), Bounds(feasible=..., proven_lower=...) or a dict {'value', 'lower_bound', "
                    "'converged'}")


def _geometry_check(expected: str, measured, tol: float, extra: dict) -> Check:
    """The statement "the minimiser's class means have geometry ``expected``", judged only with a
    proof about the point (core: a value gap does not certify a point)."""
    from theory.geometry import GEOMETRY_CLASSES, classify_gram

    if expected not in GEOMETRY_CLASSES:
        raise InputError(f"predict(p) must return one of {', '.join(GEOMETRY_CLASSES)} for kind 'geometry', "
                         f"got {expected!r}")
    rep = _report_dict(measured)
    if rep is not None:
        return _geometry_from_report(expected, rep, extra)
    if isinstance(measured, ProvenPoint):
        from theory.geometry import ZERO_TOL

        zt = measured.zero_tol
        scale = float(np.linalg.norm(measured.gram))
        if zt is None and 0.0 < scale <= ZERO_TOL:
            # zero (rounding noise) or a small nonzero configuration (tiny regularisation): not decided
            g0 = classify_gram(measured.gram, tol, zero_tol=0.0)
            return Check("geometry", Verdict.INCONCLUSIVE,
                         f"not judged: the Gram's norm {fmt(scale, 3)} is nonzero but <= ZERO_TOL = {ZERO_TOL:g}: a "
                         f"zero minimiser with rounding noise, or a small {g0.classification}; state the scale with "
                         "ProvenPoint(..., zero_tol=...)",
                         {**extra, **g0.to_dict(), "scale_free_classification": g0.classification,
                          "radius": measured.radius, "radius_proof": measured.how})
        g = classify_gram(measured.gram, tol, zero_tol=ZERO_TOL if zt is None else zt)
        at_point = geometry_is("geometry", expected, g, evidence=extra)
        if measured.unique:
            return Check("geometry", at_point.verdict,
                         f"{at_point.reason} at the proven unique minimiser ({measured.how})",
                         {**at_point.evidence, "geometry_certificate": measured.how}, True)
        if expected in ("simplex-etf", "orthogonal-frame"):
            dev = g.distance_etf if expected == "simplex-etf" else g.distance_of
            return point_statement("geometry", dev, tol, radius=measured.radius, lipschitz=measured.lipschitz,
                                   how=measured.how, what=f"distance to the {expected} template",
                                   evidence={**extra, **g.to_dict()})
        return Check("geometry", Verdict.INCONCLUSIVE,
                     f"not judged: a proven radius decides only simplex-etf/orthogonal-frame statements, not "
                     f"{expected!r} (at the point: {g.classification})",
                     {**extra, **g.to_dict(), "radius": measured.radius, "radius_proof": measured.how})
    g = classify_gram(measured, tol)
    chk = at_certified_point(geometry_is("geometry", expected, g, evidence=extra), value=None, lower_bound=None,
                             tol=0.0)
    return Check(chk.name, chk.verdict, chk.reason + " (return ProvenPoint(gram, how=..., unique=True or "
                 "radius=...) to judge the minimiser)", chk.evidence, chk.independent)


def _geometry_from_report(expected: str, rep: dict, extra: dict) -> Check:
    """Judge with the family's own geometry statement (made with its certificates and proofs about the point)."""
    pred = (rep.get("predicted") or {}).get("geometry")
    geo = [c for c in rep.get("claims") or [] if str(c.get("id", "")).split("[")[0].startswith("geometry")]
    ev = {**extra, "family": rep.get("family"), "family_predicted_geometry": pred,
          "family_geometry_checks": [{k: c.get(k) for k in ("id", "verdict", "reason")} for c in geo],
          "classification_at_solver_point": (rep.get("geometry") or {}).get("classification")}
    if not geo or pred is None:
        return Check("geometry", Verdict.INCONCLUSIVE, "not judged: the report has no geometry statement about the "
                     "minimiser (no predicted geometry or no geometry check)", ev)
    verdicts = [Verdict(c.get("verdict")) for c in geo]
    if pred == expected:
        if all(v is Verdict.NOT_APPLICABLE for v in verdicts):
            return Check("geometry", Verdict.NOT_APPLICABLE, "; ".join(str(c.get("reason")) for c in geo[:2]), ev)
        if all(v in (Verdict.VERIFIED, Verdict.NOT_APPLICABLE) for v in verdicts):
            return Check("geometry", Verdict.VERIFIED, f"the family proved the minimiser is {expected} "
                         f"({geo[0].get('id')}: {geo[0].get('reason')})", ev)
        bad = [c for c, v in zip(geo, verdicts) if v in (Verdict.REFUTED, Verdict.ERROR, Verdict.INCONCLUSIVE)]
        worst_v = max((Verdict(c["verdict"]) for c in bad),
                      key=[Verdict.INCONCLUSIVE, Verdict.REFUTED, Verdict.ERROR].index)
        return Check("geometry", Verdict.INCONCLUSIVE if worst_v is Verdict.ERROR else worst_v,
                     f"the family's geometry statement ({expected}) is {worst_v.value}: "
                     f"{bad[0].get('id')}: {bad[0].get('reason')}", ev)
    if all(v is Verdict.VERIFIED for v in verdicts):
        return Check("geometry", Verdict.REFUTED, f"the family proved the minimiser is {pred}, not {expected} "
                     f"({geo[0].get('id')}: {geo[0].get('reason')})", ev)
    return Check("geometry", Verdict.INCONCLUSIVE, f"not judged: the family predicts {pred} and has not proven it "
                 f"({', '.join(v.value for v in verdicts)}); nothing is proven about {expected}", ev)


@dataclass(frozen=True)
class UserClaim:
    """A researcher's claim: statement, parameter strategy, prediction, solver call, tolerances.

    ``params``: a dict ``{name: hypothesis strategy}`` or a strategy producing dicts.
    ``rtol``/``atol``: the tolerances are part of the statement; numeric kinds require at
    least one of them to be given explicitly (``0`` is allowed, stated on purpose).
    ``on_inconclusive``: "fail" (default: a property test passes only if every tried instance
    is VERIFIED) or "discard" (inconclusive instances are discarded like failed hypotheses).
    """

    id: str
    statement: str
    source: str
    params: Any
    solve: Callable
    predict: Callable | None = None
    kind: str = "equals"
    rtol: float | None = None
    atol: float | None = None
    provenance: str = "derived"
    requires: Callable[[dict], str | None] | None = None
    geometry_tol: float | None = None
    on_inconclusive: str = "fail"
    max_examples: int | None = None
    examples: tuple = ()
    family: str = "user"
    tags: tuple = ()

    def __post_init__(self):
        _want_str("id", self.id)
        _want_str("statement", self.statement)
        _want_str("source", self.source)
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise InputError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if isinstance(self.provenance, Provenance):
            object.__setattr__(self, "provenance", self.provenance.value)
        if not isinstance(self.provenance, str) or self.provenance not in [p.value for p in Provenance]:
            raise InputError(f"provenance must be one of {', '.join(p.value for p in Provenance)}, "
                             f"got {self.provenance!r}")
        _want_callable("solve", self.solve)
        _want_callable("predict", self.predict, optional=True)
        _want_callable("requires", self.requires, optional=True)
        if self.kind != "custom" and self.predict is None:
            raise InputError(f"claim {self.id!r}: predict is required for kind {self.kind!r}")
        if self.kind == "custom" and self.predict is not None:
            raise InputError(f"claim {self.id!r}: predict must be None for kind 'custom' (solve returns Checks)")
        for name in ("rtol", "atol", "geometry_tol"):
            _want_tol(name, getattr(self, name), f"claim {self.id!r}")
        if self.kind in ("equals", "lower_bound", "upper_bound", "optimum") and self.rtol is None and self.atol is None:
            raise InputError(f"claim {self.id!r}: state the tolerance (rtol= and/or atol=) for kind {self.kind!r}")
        if not isinstance(self.on_inconclusive, str) or self.on_inconclusive not in ON_INCONCLUSIVE:
            raise InputError(f"on_inconclusive must be 'fail' or 'discard', got {self.on_inconclusive!r}")
        if self.max_examples is not None:
            _want_int("max_examples", self.max_examples, 1)
        _want_str("family", self.family)
        if isinstance(self.tags, (str, bytes)) or not isinstance(self.tags, Iterable):
            raise TypeError(f"tags must be a list of strings, got {type(self.tags).__name__} {self.tags!r}")
        tags = tuple(self.tags)
        for i, t in enumerate(tags):
            _want_str(f"tags[{i}]", t)
        object.__setattr__(self, "tags", tags)
        if isinstance(self.examples, (str, bytes, Mapping)) or not isinstance(self.examples, Iterable):
            raise TypeError(f"examples must be a list of dicts (instances), got {type(self.examples).__name__}")
        exs = tuple(self.examples)
        for i, e in enumerate(exs):
            _want_params(f"examples[{i}]", e)
        object.__setattr__(self, "examples", exs)
        self._check_params()

    def _check_params(self) -> None:
        try:
            import hypothesis.strategies as st
        except ImportError:  # pragma: no cover - hypothesis is a test dependency
            return
        if isinstance(self.params, Mapping):
            for k, v in self.params.items():
                if not isinstance(k, str):
                    raise TypeError(f"params keys must be parameter names (strings), got {k!r}")
                if not isinstance(v, st.SearchStrategy):
                    raise TypeError(f"params[{k!r}] must be a hypothesis strategy (e.g. st.integers(2, 8)), got "
                                    f"{type(v).__name__} {v!r}")
        elif not isinstance(self.params, st.SearchStrategy):
            raise TypeError(f"params must be a dict of hypothesis strategies or a strategy of dicts, got "
                            f"{type(self.params).__name__} {self.params!r}")

    def _check_atol(self, pred) -> None:
        """Refuse (InputError naming ``atol``) an absolute tolerance >= MAX_ATOL_SCALE x max(1, |prediction|) at
        this instance: the statement could not fail (:data:`MAX_ATOL_SCALE`)."""
        if not self.atol:
            return
        try:
            vals = np.abs(np.asarray(pred, dtype=float)).reshape(-1)
        except (TypeError, ValueError):  # not numbers: the comparison itself reports it
            return
        vals = vals[np.isfinite(vals)]
        scale = max(1.0, float(vals.max())) if vals.size else 1.0
        if not self.atol < MAX_ATOL_SCALE * scale:
            raise InputError(f"claim {self.id!r}: atol must be < {MAX_ATOL_SCALE:g} x max(1, |prediction|) = "
                             f"{MAX_ATOL_SCALE * scale:g} at this instance (an absolute tolerance at the prediction's "
                             f"scale accepts 0 for any prediction: the statement could not fail), got {self.atol!r}")

    # ---- one instance -------------------------------------------------------------------

    def checks(self, params: Mapping, ctx: UserContext | None = None) -> list[Check]:
        """The core Checks for one instance (raises on a crash; :meth:`check_instance` catches)."""
        p = _want_params("params", params)
        ctx = _want_ctx("ctx", ctx) or current_context()
        if self.requires is not None:
            why = _user_call("requires", self.requires, p)
            if why:
                return [hypothesis_fails("hypotheses", str(why), {"instance": p})]
        measured = _user_call("solve", self.solve, p, ctx) if _arity(self.solve) >= 2 else \
            _user_call("solve", self.solve, p)
        extra = {"instance": p}
        if isinstance(measured, Measured):
            extra.update(measured.evidence)
            measured = measured.value
        if self.kind == "custom":
            out = [measured] if isinstance(measured, Check) else list(measured)
            if not out or not all(isinstance(c, Check) for c in out):
                raise TypeError(f"claim {self.id!r}: a custom solve must return Check(s) from proofs_check.core")
            for c in out:
                c.evidence.setdefault("instance", p)
            return out
        pred = _user_call("predict", self.predict, p)
        if self.kind != "geometry":
            self._check_atol(pred)
        if self.kind in ("lower_bound", "upper_bound", "optimum") and isinstance(pred, np.ndarray) and pred.size == 1:
            pred = pred.item()
        if self.kind == "equals":
            return [close("prediction", pred, measured, rtol=self.rtol or 0.0, atol=self.atol or 0.0,
                          evidence=extra)]
        if self.kind in ("lower_bound", "upper_bound"):
            if not _is_real(pred):
                raise TypeError(f"claim {self.id!r}: predict(p) must return the claimed bound (a real number), got "
                                f"{type(pred).__name__}")
            bound = float(pred)
            feasible, proven, how = _bound_parts(measured)
            finite = [v for v in feasible if is_finite(v)]
            tol = _tol(self.rtol, self.atol, bound)
            extra.update(feasible_values_given=len(feasible), feasible_values_finite=len(finite), rtol=self.rtol,
                         atol=self.atol)
            best = min(finite) if finite else None
            if self.kind == "lower_bound":
                return [lower_bound_claim("lower-bound", bound, proven_lower=proven, feasible_value=best, tol=tol,
                                          feasible_points=len(finite), certificate=how, evidence=extra)]
            return [upper_bound_claim("upper-bound", bound, feasible_value=best, proven_lower=proven, tol=tol,
                                      evidence={**extra, "certificate": how or None})]
        if self.kind == "optimum":
            if not _is_real(pred):
                raise TypeError(f"claim {self.id!r}: predict(p) must return the predicted optimum (a real number), "
                                f"got {type(pred).__name__}")
            pred = float(pred)
            val, lb, conv, method = _solution_parts(measured)
            return [optimum_matches("optimum", pred, attained=val, lower_bound=lb, converged=conv,
                                    tol=_tol(self.rtol, self.atol, pred), certificate=method, evidence=extra)]
        # geometry
        from theory.geometry import GEOMETRY_TOL

        return [_geometry_check(str(pred), measured,
                                self.geometry_tol if self.geometry_tol is not None else GEOMETRY_TOL, extra)]

    def as_claim(self, instances: Iterable[Mapping] | None = None, ctx: UserContext | None = None) -> Claim:
        """A :class:`proofs_check.core.Claim` checking the given instances (default: ``examples``),
        usable with ``run_claims`` and the reports like any built-in claim."""
        if instances is not None and (isinstance(instances, (str, bytes, Mapping)) or
                                      not isinstance(instances, Iterable)):
            raise TypeError(f"instances must be a list of dicts (instances), got {type(instances).__name__}")
        insts = [_want_params(f"instances[{i}]", inst)
                 for i, inst in enumerate(self.examples if instances is None else instances)]
        _want_ctx("ctx", ctx)
        if not insts:
            raise InputError(f"instances: claim {self.id!r}: as_claim needs at least one instance (or examples=)")

        def check(run_ctx: RunContext):
            uctx = ctx or current_context()
            uctx = UserContext(run_ctx.profile, run_ctx.seed, uctx.solver, uctx.max_k)
            for inst in insts:
                tag = ",".join(f"{k}={v}" for k, v in inst.items())
                for c in self.checks(inst, uctx):
                    yield Check(f"{c.name}[{tag}]", c.verdict, c.reason, c.evidence, c.independent)

        return Claim(self.id, self.family, self.statement, self.source, Provenance(self.provenance), check,
                     key=("abs_error", "witness_gap", "gap", "distance_etf"), tags=tuple(self.tags) + ("user",))

    def check_instance(self, params: Mapping, ctx: UserContext | None = None) -> ClaimResult:
        """Check one instance; a crash is an ERROR verdict with the traceback (core.Claim.run)."""
        p = _want_params("params", params)
        uctx = _want_ctx("ctx", ctx) or current_context()
        claim = Claim(self.id, self.family, self.statement, self.source, Provenance(self.provenance),
                      lambda _ctx: self.checks(p, uctx), tags=tuple(self.tags) + ("user",))
        return claim.run(uctx.run_context)

    def failure_message(self, res: ClaimResult, params: Mapping) -> str:
        if not isinstance(res, ClaimResult):
            raise TypeError(f"res must be a ClaimResult (from check_instance), got {type(res).__name__}")
        params = _want_params("params", params)
        inst = ", ".join(f"{k}={v!r}" for k, v in params.items())
        text = (f"ncproofs claim {self.id!r} {res.verdict.value} at instance ({inst})\n"
                f"  statement: {self.statement}\n"
                f"  source: {self.source} ({self.provenance})\n"
                f"  reason: {res.reason}\n"
                f"  evidence:\n{_evidence_text(res.checks)}")
        tb = user_traceback_of(res)
        if tb:
            text += "\n  your code raised (traceback of your frames):\n" + "\n".join("    " + ln for ln in tb.splitlines())
        return text

    def assert_instance(self, params: Mapping, ctx: UserContext | None = None, *, record: bool = False) -> ClaimResult:
        """Check one instance and raise :class:`ClaimFailure` unless it is VERIFIED
        (instances outside the hypotheses raise an internal discard signal)."""
        __tracebackhide__ = True
        if not isinstance(record, (bool, np.bool_)):
            raise TypeError(f"record must be True or False, got {type(record).__name__}")
        p = _want_params("params", params)
        res = self.check_instance(p, ctx)
        if record:
            _record(self.id, res.verdict)
        if res.verdict == Verdict.VERIFIED:
            return res
        if res.verdict == Verdict.NOT_APPLICABLE or \
                (res.verdict == Verdict.INCONCLUSIVE and self.on_inconclusive == "discard"):
            raise _Discard(res.reason, res.verdict)
        raise ClaimFailure(self.failure_message(res, p), res, p)

    # ---- property test ------------------------------------------------------------------

    def strategy(self):
        import hypothesis.strategies as st

        if isinstance(self.params, dict):
            return st.fixed_dictionaries(dict(self.params))
        return self.params

    def as_test(self, name: str | None = None) -> Callable:
        """A pytest test function (hypothesis ``@given`` over the parameter strategy), marked ``proof``.

        Instances outside the hypotheses (NOT_APPLICABLE) are discarded; when no instance tried
        satisfies them, the test is skipped with the failed hypothesis as the reason."""
        from hypothesis import assume, example, given, settings
        from hypothesis.errors import FailedHealthCheck, Unsatisfiable

        if name is not None:
            _want_str("name", name)
            if not name.isidentifier():
                raise InputError(f"name must be a Python identifier (a test function name), got {name!r}")
        claim = self
        seen = {"applicable": 0, "not_applicable": 0, "reason": ""}

        def test(p):
            __tracebackhide__ = True
            if not isinstance(p, dict):
                raise TypeError(f"claim {claim.id!r}: the parameter strategy must produce dicts, got {type(p).__name__}")
            cap = current_context().max_k
            if cap is not None and isinstance(p.get("k"), int):
                assume(p["k"] <= cap)
            try:
                claim.assert_instance(p, record=True)
            except _Discard as exc:
                if exc.args[1] is Verdict.NOT_APPLICABLE:
                    seen["not_applicable"] += 1
                    seen["reason"] = exc.args[0]
                else:  # INCONCLUSIVE under on_inconclusive="discard": applicable, not decided
                    seen["applicable"] += 1
                assume(False)
            seen["applicable"] += 1

        test.__name__ = name or "test_" + re.sub(r"\W+", "_", self.id).strip("_")
        test.__qualname__ = test.__name__
        test.__doc__ = f"{self.statement} [{self.source}, {self.provenance}]"
        kw = {"deadline": None}
        if self.max_examples is not None:
            kw["max_examples"] = self.max_examples
        wrapped = test
        for ex in reversed(self.examples):
            wrapped = example(p=dict(ex))(wrapped)
        inner = settings(**kw)(given(p=self.strategy())(wrapped))

        def outer():
            __tracebackhide__ = True
            seen.update(applicable=0, not_applicable=0, reason="")
            try:
                inner()
            except (Unsatisfiable, FailedHealthCheck):
                if seen["applicable"] == 0 and seen["not_applicable"] > 0:
                    import pytest

                    pytest.skip(f"NOT_APPLICABLE: no instance tried satisfies the hypotheses "
                                f"({seen['not_applicable']} tried); {seen['reason']}")
                raise
            if seen["applicable"] == 0 and seen["not_applicable"] > 0:  # only explicit examples, all outside
                import pytest

                pytest.skip(f"NOT_APPLICABLE: {seen['reason']}")

        outer.__name__ = test.__name__
        outer.__qualname__ = test.__qualname__
        outer.__doc__ = test.__doc__
        try:
            import pytest

            outer = pytest.mark.proof(outer)
        except ImportError:  # pragma: no cover - pytest is a test dependency
            pass
        outer.claim = self
        outer.hypothesis_test = inner
        return outer

    # ---- sweeps -------------------------------------------------------------------------

    def sweepable(self) -> Callable[[dict, int], dict]:
        """``fn(params, seed) -> dict`` for :func:`proofs_check.sweep.register_sweepable`."""
        from proofs_check.sweep import result_from_claim

        def fn(params: dict, seed: int) -> dict:
            base = current_context()
            res = self.check_instance(params, UserContext(base.profile, seed, base.solver, base.max_k))
            score = None
            for c in res.checks:
                for key in ("abs_error", "witness_gap", "gap", "distance_etf"):
                    if isinstance(c.evidence.get(key), (int, float)):
                        score = float(c.evidence[key])
                        break
            return result_from_claim(res, score=score)

        return fn


def user_claim(*, id: str, statement: str, source: str, params: Any, predict: Callable | None = None,
               kind: str = "equals", rtol: float | None = None, atol: float | None = None,
               provenance: str = "derived", requires: Callable | None = None, geometry_tol: float | None = None,
               on_inconclusive: str = "fail", max_examples: int | None = None, examples: Iterable = (),
               family: str = "user", tags: Iterable[str] = ()) -> Callable[[Callable], Callable]:
    """Decorator: the decorated function is the solver call ``solve(p)`` (or ``solve(p, ctx)``);
    the result is a pytest test (keeps the function's name) with ``.claim`` set to the UserClaim.
    The arguments are validated when the decorator is built (before any function is decorated)."""
    if isinstance(examples, (str, bytes, Mapping)) or not isinstance(examples, Iterable):
        raise TypeError(f"examples must be a list of dicts (instances), got {type(examples).__name__}")
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Iterable):
        raise TypeError(f"tags must be a list of strings, got {type(tags).__name__} {tags!r}")
    examples, tags = tuple(examples), tuple(tags)

    def make(fn):
        return UserClaim(id=id, statement=statement, source=source, params=params, solve=fn, predict=predict,
                         kind=kind, rtol=rtol, atol=atol, provenance=provenance, requires=requires,
                         geometry_tol=geometry_tol, on_inconclusive=on_inconclusive, max_examples=max_examples,
                         examples=examples, family=family, tags=tags)

    make(lambda p: None)  # validate now: a bad argument is reported where the decorator is written

    def deco(fn: Callable) -> Callable:
        _want_callable("fn (the decorated solve function)", fn)
        c = make(fn)
        t = c.as_test(name=fn.__name__ if fn.__name__.isidentifier() else None)
        t.__module__ = fn.__module__
        return t

    return deco


# ---- tallies for the pytest plugin's terminal summary -----------------------------------

_TALLY: dict[str, dict[str, int]] = {}


def _record(claim_id: str, verdict: Verdict) -> None:
    t = _TALLY.setdefault(claim_id, {"VERIFIED": 0, "NOT_APPLICABLE": 0, "INCONCLUSIVE": 0, "REFUTED": 0, "ERROR": 0,
                                     "outside": 0})
    t[Verdict(verdict).value] += 1
    if Verdict(verdict) is Verdict.NOT_APPLICABLE:
        t["outside"] += 1  # older name of the same count (outside the theorem's hypotheses)


def tallies() -> dict[str, dict[str, int]]:
    """Verdict counts per user claim id over the instances tried in this process
    (``outside`` = ``NOT_APPLICABLE``, kept for older readers)."""
    return {k: dict(v) for k, v in _TALLY.items()}
