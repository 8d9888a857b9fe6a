"""proofs_check/claims/<family>.py: compare the prediction with the truth; build the report."""

from __future__ import annotations

from proofs_check.core import (Claim, Provenance, RunContext, SolveReport, optimum_matches, point_statement,
                               symbolic_zero, tolerance)

# import the two layers under their family names, e.g. `from theory import demo as T`
from docs.template import solvers_demo as S  # noqa: E402  (template only)
from docs.template import theory_demo as T  # noqa: E402  (template only)

#: Values: the solver's point is optimal to ~1e-12 relative; 1e-9 relative leaves room for
#: round-off while a formula off by 1e-6 relative is refuted. Absolute part: float64 round-off.
VALUE_RTOL, VALUE_ATOL = 1e-9, 1e-300
#: Statement about the minimiser "x* = 1/lam", relative.
POINT_RTOL = 1e-6
SOURCE = "Demo, docs/template/README.md"


def check_instance(inst, *, predict=T.optimum, predict_point=T.minimiser) -> SolveReport:
    """Every statement about one instance; ``predict*`` replace the theory (tests feed false ones)."""
    rep = SolveReport("demo", {"lam": inst.lam})
    failed = inst.hypotheses()
    if failed:  # the theorem does not apply: say which hypothesis fails; nothing else is decided
        from proofs_check.core import hypothesis_fails

        rep.claims.append(hypothesis_fails("optimal-value", "; ".join(failed)))
        return rep
    sol = S.solve(inst)
    cert = S.certificate(inst, sol.variables["x"])
    value, x_pred = predict(inst), predict_point(inst)
    rep.predicted = {"value": value, "minimiser": x_pred}
    rep.solution, rep.certificate = sol.to_dict(), cert.to_dict()
    if not sol.converged:
        rep.diagnostics.append("bounded-brent did not report convergence (the certificate decides)")
    tol = tolerance(value, rtol=VALUE_RTOL, atol=VALUE_ATOL)
    rep.claims.append(optimum_matches("optimal-value", value, attained=sol.value, lower_bound=cert.lower_bound,
                                      tol=tol, certificate=cert.method))
    # a statement about the minimiser: the measured deviation plus the proven radius decides
    x = sol.variables["x"]
    rep.claims.append(point_statement("minimiser", abs(x - x_pred), POINT_RTOL * abs(x_pred),
                                      radius=cert.details["radius"], how="strong convexity: |x - x*| <= |f'(x)|/lam"))
    rep.claims.append(symbolic_zero("stationarity", T.derivation()))
    return rep


def make_value_claim(predict=T.optimum, lams=(0.1, 1.0, 10.0)) -> Claim:
    def check(ctx: RunContext):
        for lam in lams:
            for c in check_instance(T.DemoInstance(lam), predict=predict).claims:
                c.name = f"{c.name} (lam={lam:g})"
                yield c

    return Claim("demo-optimal-value", "demo", "min (lam/2) x^2 - x = -1/(2 lam)", SOURCE, Provenance.DERIVED,
                 check)


# CLAIMS = [make_value_claim()]   # in a real family module: discovered by the registry
