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
- ``"lower_bound"``: the claimed bound / the value at a feasible point (or a sequence of such
  values); REFUTED iff a value lies below ``bound - (atol + rtol |bound|)``.
- ``"upper_bound"``: the mirror image.
- ``"optimum"``: the predicted global optimum / a ``solvers.common.Solution`` with a
  certificate, or a dict ``{"value", "lower_bound", "converged"}`` (``core.optimum_matches``).
- ``"geometry"``: the expected classification ("simplex-etf", "orthogonal-frame") / a Gram
  matrix of class means, classified by ``theory.geometry.classify_gram`` at ``geometry_tol``.
- ``"custom"``: no prediction; ``solve(p)`` returns a ``core.Check`` or a list of them.

``solve`` may take ``(p)`` or ``(p, ctx)``; ``ctx`` is a :class:`UserContext` with the options
of the pytest plugin (``--ncproofs-solver``, ``--ncproofs-max-k``) and the seed. It may return
``Measured(value, evidence={...})`` to attach its own numbers to the evidence.
``requires(p)`` returns ``None`` when the theorem's hypotheses hold for ``p``, or a reason;
instances outside the hypotheses are discarded from the property test (INCONCLUSIVE with
the reason when checked directly), never counted as VERIFIED.
"""

from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from proofs_check.core import (Check, Claim, ClaimResult, Provenance, RunContext, Verdict, clean, close, condition,
                               fmt, geometry_is, hypothesis_fails, lower_bound_holds, optimum_matches)

KINDS = ("equals", "lower_bound", "upper_bound", "optimum", "geometry", "custom")


@dataclass(frozen=True)
class UserContext:
    """Options a user claim's ``solve`` may read: run profile and seed, the solver backend
    requested with ``--ncproofs-solver`` ("auto" by default) and the class-count cap."""

    profile: str = "quick"
    seed: int = 0
    solver: str = "auto"
    max_k: int | None = None

    @property
    def run_context(self) -> RunContext:
        return RunContext(self.profile, self.seed)


def _env_max_k() -> int | None:
    v = os.environ.get("NCPROOFS_MAX_K")
    return int(v) if v and v.strip().isdigit() else None


_CURRENT = {"ctx": UserContext(max_k=_env_max_k(), solver=os.environ.get("NCPROOFS_SOLVER", "auto"))}


_UNSET = object()


def configure(*, max_k: Any = _UNSET, solver: Any = _UNSET, profile: Any = _UNSET, seed: Any = _UNSET) -> UserContext:
    """Set the options user claims see (the pytest plugin calls this from its command-line
    options). Arguments not given are left as they are; ``max_k=None`` removes the cap."""
    old = _CURRENT["ctx"]
    if max_k is not _UNSET and max_k is not None and (isinstance(max_k, bool) or not isinstance(max_k, int)
                                                      or max_k < 2):
        raise ValueError(f"max_k must be an integer >= 2, got {max_k!r}")
    if profile is not _UNSET and profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    ctx = UserContext(profile=old.profile if profile is _UNSET else profile,
                      seed=old.seed if seed is _UNSET else int(seed),
                      solver=old.solver if solver is _UNSET else str(solver),
                      max_k=old.max_k if max_k is _UNSET else max_k)
    _CURRENT["ctx"] = ctx
    return ctx


def current_context() -> UserContext:
    return _CURRENT["ctx"]


def classes(min_value: int = 2, max_value: int = 8):
    """Strategy for a class count k in [min_value, max_value], capped by ``--ncproofs-max-k``
    (read when the test runs, so the plugin option applies to strategies built at import)."""
    import hypothesis.strategies as st

    def build():
        cap = current_context().max_k
        hi = max_value if cap is None else min(max_value, cap)
        if hi < min_value:
            raise ValueError(f"--ncproofs-max-k={cap} is below this claim's minimum class count {min_value}")
        return st.integers(min_value, hi)

    return st.deferred(build)


@dataclass
class Measured:
    """A measured value with the solver's own evidence (iterations, residuals, ...)."""

    value: Any
    evidence: dict = field(default_factory=dict)


class ClaimFailure(AssertionError):
    """A user claim was REFUTED (or errored, or was inconclusive under ``on_inconclusive="fail"``)
    on an instance. The message holds the instance, the reason and the evidence."""

    def __init__(self, message: str, result: ClaimResult, params: dict):
        super().__init__(message)
        self.result, self.params = result, params


class _Discard(Exception):
    """Internal: the instance is outside the theorem's hypotheses."""


def _tol(rtol: float | None, atol: float | None, scale) -> float:
    s = float(np.max(np.abs(np.asarray(scale, dtype=float)))) if scale is not None else 0.0
    return (atol or 0.0) + (rtol or 0.0) * s


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
    if isinstance(v, list):
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
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("id must be a non-empty string")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "provenance", Provenance(self.provenance).value)
        if self.kind != "custom" and self.predict is None:
            raise ValueError(f"claim {self.id!r}: kind {self.kind!r} needs predict=")
        if self.kind in ("equals", "lower_bound", "upper_bound", "optimum") and self.rtol is None and self.atol is None:
            raise ValueError(f"claim {self.id!r}: state the tolerance (rtol= and/or atol=) for kind {self.kind!r}")
        for name in ("rtol", "atol", "geometry_tol"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and v >= 0 and np.isfinite(v)):
                raise ValueError(f"claim {self.id!r}: {name} must be a finite number >= 0, got {v!r}")
        if self.on_inconclusive not in ("fail", "discard"):
            raise ValueError(f"on_inconclusive must be 'fail' or 'discard', got {self.on_inconclusive!r}")
        if not callable(self.solve):
            raise ValueError(f"claim {self.id!r}: solve must be callable")
        object.__setattr__(self, "examples", tuple(self.examples))

    # ---- one instance -------------------------------------------------------------------

    def checks(self, params: dict, ctx: UserContext | None = None) -> list[Check]:
        """The core Checks for one instance (raises on a crash; :meth:`check_instance` catches)."""
        ctx = ctx or current_context()
        p = dict(params)
        if self.requires is not None:
            why = self.requires(p)
            if why:
                return [hypothesis_fails("hypotheses", str(why), {"instance": p})]
        measured = self.solve(p, ctx) if _arity(self.solve) >= 2 else self.solve(p)
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
        pred = self.predict(p)
        if self.kind == "equals":
            return [close("prediction", pred, measured, rtol=self.rtol or 0.0, atol=self.atol or 0.0,
                          evidence=extra)]
        if self.kind in ("lower_bound", "upper_bound"):
            values = np.atleast_1d(np.asarray(measured, dtype=float)).ravel()
            bound = float(pred)
            tol = _tol(self.rtol, self.atol, bound)
            if self.kind == "lower_bound":
                v = float(values.min())
                return [lower_bound_holds("lower-bound", bound, v, tol=tol, evidence=extra)]
            v = float(values.max())
            extra.update(bound=bound, feasible_value=v, tolerance=tol, slack=bound - v)
            return [condition("upper-bound", v <= bound + tol, verified=f"value {fmt(v)} <= bound {fmt(bound)}",
                              refuted=f"feasible point at {fmt(v)} lies above the bound {fmt(bound)}", evidence=extra)]
        if self.kind == "optimum":
            pred = float(pred)
            val, lb, conv, method = _solution_parts(measured)
            return [optimum_matches("optimum", pred, attained=val, lower_bound=lb, converged=conv,
                                    tol=_tol(self.rtol, self.atol, pred), certificate=method, evidence=extra)]
        # geometry
        from theory.geometry import GEOMETRY_TOL, classify_gram

        g = classify_gram(measured, self.geometry_tol if self.geometry_tol is not None else GEOMETRY_TOL)
        return [geometry_is("geometry", str(pred), g, evidence=extra)]

    def as_claim(self, instances: Iterable[Mapping] | None = None, ctx: UserContext | None = None) -> Claim:
        """A :class:`proofs_check.core.Claim` checking the given instances (default: ``examples``),
        usable with ``run_claims`` and the reports like any built-in claim."""
        insts = [dict(i) for i in (self.examples if instances is None else instances)]
        if not insts:
            raise ValueError(f"claim {self.id!r}: as_claim needs instances (or examples=)")

        def check(run_ctx: RunContext):
            uctx = ctx or current_context()
            uctx = UserContext(run_ctx.profile, run_ctx.seed, uctx.solver, uctx.max_k)
            for inst in insts:
                tag = ",".join(f"{k}={v}" for k, v in inst.items())
                for c in self.checks(inst, uctx):
                    yield Check(f"{c.name}[{tag}]", c.verdict, c.reason, c.evidence)

        return Claim(self.id, self.family, self.statement, self.source, Provenance(self.provenance), check,
                     key=("abs_error", "slack", "gap", "distance_etf"), tags=tuple(self.tags) + ("user",))

    def check_instance(self, params: Mapping, ctx: UserContext | None = None) -> ClaimResult:
        """Check one instance; a crash is an ERROR verdict with the traceback (core.Claim.run)."""
        p = dict(params)
        uctx = ctx or current_context()
        claim = Claim(self.id, self.family, self.statement, self.source, Provenance(self.provenance),
                      lambda _ctx: self.checks(p, uctx), tags=tuple(self.tags) + ("user",))
        return claim.run(uctx.run_context)

    def failure_message(self, res: ClaimResult, params: Mapping) -> str:
        inst = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return (f"ncproofs claim {self.id!r} {res.verdict.value} at instance ({inst})\n"
                f"  statement: {self.statement}\n"
                f"  source: {self.source} ({self.provenance})\n"
                f"  reason: {res.reason}\n"
                f"  evidence:\n{_evidence_text(res.checks)}")

    def assert_instance(self, params: Mapping, ctx: UserContext | None = None, *, record: bool = False) -> ClaimResult:
        """Check one instance and raise :class:`ClaimFailure` unless it is VERIFIED
        (instances outside the hypotheses raise an internal discard signal)."""
        p = dict(params)
        res = self.check_instance(p, ctx)
        if record:
            _record(self.id, res.verdict, outside=_outside(res))
        if res.verdict == Verdict.VERIFIED:
            return res
        if res.verdict == Verdict.INCONCLUSIVE and (_outside(res) or self.on_inconclusive == "discard"):
            raise _Discard(res.reason)
        raise ClaimFailure(self.failure_message(res, p), res, p)

    # ---- property test ------------------------------------------------------------------

    def strategy(self):
        import hypothesis.strategies as st

        if isinstance(self.params, dict):
            return st.fixed_dictionaries(dict(self.params))
        if isinstance(self.params, st.SearchStrategy):
            return self.params
        raise TypeError(f"claim {self.id!r}: params must be a dict of strategies or a strategy of dicts")

    def as_test(self, name: str | None = None) -> Callable:
        """A pytest test function (hypothesis ``@given`` over the parameter strategy), marked ``proof``."""
        from hypothesis import assume, example, given, settings

        claim = self

        def test(p):
            if not isinstance(p, dict):
                raise TypeError(f"claim {claim.id!r}: the parameter strategy must produce dicts, got {type(p).__name__}")
            cap = current_context().max_k
            if cap is not None and isinstance(p.get("k"), int):
                assume(p["k"] <= cap)
            try:
                claim.assert_instance(p, record=True)
            except _Discard:
                assume(False)

        test.__name__ = name or "test_" + re.sub(r"\W+", "_", self.id).strip("_")
        test.__qualname__ = test.__name__
        test.__doc__ = f"{self.statement} [{self.source}, {self.provenance}]"
        kw = {"deadline": None}
        if self.max_examples is not None:
            kw["max_examples"] = self.max_examples
        wrapped = test
        for ex in reversed(self.examples):
            wrapped = example(p=dict(ex))(wrapped)
        wrapped = settings(**kw)(given(p=self.strategy())(wrapped))
        try:
            import pytest

            wrapped = pytest.mark.proof(wrapped)
        except ImportError:  # pragma: no cover - pytest is a test dependency
            pass
        wrapped.claim = self
        return wrapped

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


def _outside(res: ClaimResult) -> bool:
    """True when the only non-VERIFIED checks are failed theorem hypotheses."""
    bad = [c for c in res.checks if c.verdict != Verdict.VERIFIED]
    return bool(bad) and all(c.verdict == Verdict.INCONCLUSIVE and c.reason.startswith("hypothesis fails") for c in bad)


def _solution_parts(m) -> tuple[float | None, float | None, bool, str]:
    if isinstance(m, Mapping):
        return (None if m.get("value") is None else float(m["value"]),
                None if m.get("lower_bound") is None else float(m["lower_bound"]),
                bool(m.get("converged", True)), str(m.get("method", "")))
    cert = getattr(m, "certificate", None)
    if hasattr(m, "value") and hasattr(m, "converged"):
        return (float(m.value), None if cert is None else float(cert.lower_bound), bool(m.converged),
                "" if cert is None else str(cert.method))
    raise TypeError("an optimum claim's solve must return a solvers.common.Solution or a dict "
                    "{'value', 'lower_bound', 'converged'}")


def user_claim(*, id: str, statement: str, source: str, params: Any, predict: Callable | None = None,
               kind: str = "equals", rtol: float | None = None, atol: float | None = None,
               provenance: str = "derived", requires: Callable | None = None, geometry_tol: float | None = None,
               on_inconclusive: str = "fail", max_examples: int | None = None, examples: Iterable = (),
               family: str = "user", tags: Iterable[str] = ()) -> Callable[[Callable], Callable]:
    """Decorator: the decorated function is the solver call ``solve(p)`` (or ``solve(p, ctx)``);
    the result is a pytest test (keeps the function's name) with ``.claim`` set to the UserClaim."""

    def deco(fn: Callable) -> Callable:
        c = UserClaim(id=id, statement=statement, source=source, params=params, solve=fn, predict=predict,
                      kind=kind, rtol=rtol, atol=atol, provenance=provenance, requires=requires,
                      geometry_tol=geometry_tol, on_inconclusive=on_inconclusive, max_examples=max_examples,
                      examples=tuple(examples), family=family, tags=tuple(tags))
        t = c.as_test(name=fn.__name__)
        t.__module__ = fn.__module__
        return t

    return deco


# ---- tallies for the pytest plugin's terminal summary -----------------------------------

_TALLY: dict[str, dict[str, int]] = {}


def _record(claim_id: str, verdict: Verdict, *, outside: bool = False) -> None:
    t = _TALLY.setdefault(claim_id, {"VERIFIED": 0, "INCONCLUSIVE": 0, "REFUTED": 0, "ERROR": 0, "outside": 0})
    if outside:
        t["outside"] += 1
    else:
        t[verdict.value] += 1


def tallies() -> dict[str, dict[str, int]]:
    """Verdict counts per user claim id over the instances tried in this process."""
    return {k: dict(v) for k, v in _TALLY.items()}
