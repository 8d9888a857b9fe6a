"""Helpers shared by the NTK claim modules (proofs_check.claims.ntk, ntk_general, ntk_thread): the numeric
substitution points for the kernel constants, the entrywise symbolic-zero check, the rational-function zero check
and the memoised flows shared by several claims. Not a claims module (no
CLAIMS; the registry skips it)."""

from __future__ import annotations

from proofs_check.core import Check, Verdict, fmt, symbolic_zero
from solvers import ntk as sv
from theory import ntk as th

#: Flows shared by several claims of a module (ntk.invariant, ntk.scatter and ntk.nc1-bound read the same moderate
#: run), keyed by every parameter of the flow and its budget: the runner gives one worker all claims of a module in
#: order, so the flow is integrated once per process, as in a serial run. A flow that stopped (its work budget or the
#: wall-clock safety net) is not kept: the next claim integrates it again.
_FLOWS: dict = {}


def shared_flow(inst: th.NTKInstance, n: int, scale: float, seed: int, T: float, n_grid: int, budget: dict):
    """``sv.run_flow`` from ``sv.init_random(inst, n, scale, seed)`` on [0, T] with ``budget`` (max_steps,
    safety_s), memoised by all of them."""
    key = (inst, int(n), float(scale), int(seed), float(T), int(n_grid), tuple(sorted(budget.items())))
    rep = _FLOWS.get(key)
    if rep is None:
        rep = sv.run_flow(inst, sv.init_random(inst, n, scale, seed=seed), T, n_grid=n_grid, **budget)
        if rep.trajectory.stopped is None:
            _FLOWS[key] = rep
    return rep


def rational_zero(name: str, expr) -> Check:
    """A rational function that must be identically 0: VERIFIED when ``sympy.cancel`` (exact polynomial arithmetic
    on numerator and denominator) gives 0, a proof; otherwise ``core.symbolic_zero`` decides (expansion, then
    sympy.simplify), so a nonzero expression is never VERIFIED."""
    import sympy as sp

    expr = sp.sympify(expr)
    if sp.cancel(expr) == 0:
        return Check(name, Verdict.VERIFIED, "cancels to 0 (numerator and denominator in exact polynomial arithmetic)",
                     {"expression": str(expr)[:300]})
    return symbolic_zero(name, expr)


def subs_kappa():
    kd, kc, kn = th.kappa_symbols()
    return [{kd: 1.3, kc: 0.55, kn: 0.2}, {kd: 2.0, kc: 0.3, kn: -0.1}]


def matrix_zero(name: str, exprs, substitutions=(), note: str = "") -> Check:
    """All entries must be identically 0.

    Each entry is expanded first (entries here are polynomials, or rational functions with their
    denominators cleared): 0 after expansion is a proof. A nonzero entry that evaluates to more than
    1e-9 at one of the numeric ``substitutions`` is REFUTED with that point as witness; otherwise the
    entry goes through ``core.symbolic_zero`` (sympy.simplify), which decides VERIFIED / INCONCLUSIVE.
    """
    import sympy as sp

    exprs = list(exprs)
    pending = []
    for i, e in enumerate(exprs):
        ex = sp.expand(sp.sympify(e))
        if ex == 0:
            continue
        for sub in substitutions:
            val = complex(sp.N(ex.subs(sub), 30))
            if abs(val) > 1e-9:
                return Check(name, Verdict.REFUTED, f"entry {i} is nonzero ({fmt(abs(val), 3)}) at a numeric point",
                             {"entry": i, "expression": str(ex)[:300], "value": abs(val),
                              "witness": {str(k): float(v) for k, v in sub.items()}})
        pending.append((i, ex))
    for i, ex in pending:
        c = symbolic_zero(f"{name}[{i}]", ex, substitutions=substitutions)
        if c.verdict != Verdict.VERIFIED:
            return Check(name, c.verdict, f"entry {i}: {c.reason}", c.evidence)
    return Check(name, Verdict.VERIFIED, f"all {len(exprs)} distinct entries are identically 0"
                 + (f" ({note})" if note else ""), {"entries": len(exprs)})
