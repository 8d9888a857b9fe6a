"""User claims of the bound, optimum and geometry kinds follow the verdict engine: a bound is
proven by a certificate, refuted by a feasible point; a geometry statement about the minimiser
is judged only at a proven point.

The instance is a cross-entropy UFM (k = 4, n = 1, d = 4, lambda_w = lambda_h = 0.2) whose
global minimum 1.3321790402... comes from the closed form of theory.ufm (Zhu et al. 2021), an
independent computation from the user-claim code under test; the feasible values come from the
factored solver (solvers.ufm.solve_factored) and the proven lower bound from the KKT dual
certificate (solvers.ufm.closed_form_certificate).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs_check.core import Check, SolveReport, Verdict, hypothesis_fails
from proofs_check.user import Bounds, Measured, ProvenPoint, UserClaim
from solvers.common import Solution
from theory.geometry import class_means, etf_gram, orthogonal_frame, simplex_etf
from theory.ufm import UFMInstance, optimum

INST = UFMInstance("ce", 4, 1, 4, 0.2, 0.2)
TRUE_MIN = 1.3321790402101226  # theory.ufm closed form for INST (checked below against the solver)


def _feasible(maxiter: int) -> Solution:
    from solvers.ufm import solve_factored

    return solve_factored(INST, starts=1, seed=0, maxiter=maxiter)


def _certified() -> Bounds:
    from solvers.ufm import closed_form_certificate

    cert = closed_form_certificate(INST)
    sol = _feasible(20000)
    return Bounds(feasible=sol.value, proven_lower=cert.lower_bound, certificate=cert.method)


def bound_claim(kind: str, bound: float, solve) -> UserClaim:
    return UserClaim(id="t.ufm-bound", statement=f"min of the UFM {kind.replace('_', ' ')} {bound}",
                     source="test", params={}, predict=lambda p: bound, solve=solve, kind=kind, rtol=1e-9)


def test_reference_minimum():
    assert optimum(INST).value == pytest.approx(TRUE_MIN, rel=1e-12)


def test_false_lower_bound_with_only_a_non_optimal_feasible_point_is_inconclusive():
    # "min >= 1.35" is false (the minimum is 1.3322); an early-stopped solve stays above 1.35, which
    # used to VERIFY the claim. One feasible value is no proof: INCONCLUSIVE with N = 1 in the evidence.
    early = _feasible(3)
    assert early.value > 1.35  # the situation of the issue: a non-optimal feasible value above the claim
    res = bound_claim("lower_bound", 1.35, lambda p: early.value).check_instance({})
    assert res.verdict == Verdict.INCONCLUSIVE
    ev = res.checks[0].evidence
    assert ev["feasible_points"] == 1 and ev["proven_lower_bound"] is None
    assert "no counterexample among 1 feasible points" in res.reason
    # a sequence of feasible values: still no proof, N counted
    res = bound_claim("lower_bound", 1.35, lambda p: [early.value, early.value + 0.1, early.value + 0.2]) \
        .check_instance({})
    assert res.verdict == Verdict.INCONCLUSIVE and res.checks[0].evidence["feasible_points"] == 3


def test_false_lower_bound_refuted_by_a_feasible_point_below_it():
    # "min >= 1.34" is false: the converged solve finds a feasible point at 1.33218 < 1.34
    res = bound_claim("lower_bound", 1.34, lambda p: _feasible(20000)).check_instance({})
    assert res.verdict == Verdict.REFUTED and "a feasible point attains" in res.reason
    assert res.checks[0].evidence["witness_gap"] == pytest.approx(1.34 - TRUE_MIN, abs=1e-8)


def test_true_lower_bound_with_a_certificate_is_verified():
    res = bound_claim("lower_bound", 1.33, lambda p: _certified()).check_instance({})
    assert res.verdict == Verdict.VERIFIED and "proven lower bound" in res.checks[0].reason
    assert res.checks[0].evidence["proven_lower_bound"] == pytest.approx(TRUE_MIN, abs=1e-9)
    # the bound at the optimum itself is proven too (certificate gap ~2e-13 within rtol 1e-9)
    assert bound_claim("lower_bound", TRUE_MIN, lambda p: _certified()).check_instance({}).verdict == Verdict.VERIFIED
    # ... but a true bound without the certificate is not
    res = bound_claim("lower_bound", 1.33, lambda p: _feasible(20000)).check_instance({})
    assert res.verdict == Verdict.INCONCLUSIVE


def test_a_solution_with_its_certificate_and_a_solve_report_carry_the_proof():
    from solvers.ufm import closed_form_certificate

    cert = closed_form_certificate(INST)
    sol = _feasible(20000)
    sol_with_cert = Solution(value=sol.value, method=sol.method, converged=sol.converged, seconds=0.0,
                             certificate=cert)
    assert bound_claim("lower_bound", 1.33, lambda p: sol_with_cert).check_instance({}).verdict == Verdict.VERIFIED
    report = SolveReport("ufm-ce", INST.to_dict(), solution={"value": sol.value, "converged": True},
                         certificate={"lower_bound": cert.lower_bound, "method": cert.method})
    for given in (report, report.to_dict()):
        assert bound_claim("lower_bound", 1.33, lambda p: given).check_instance({}).verdict == Verdict.VERIFIED
        assert bound_claim("lower_bound", 1.34, lambda p: given).check_instance({}).verdict == Verdict.REFUTED
        assert bound_claim("upper_bound", 1.33, lambda p: given).check_instance({}).verdict == Verdict.REFUTED
        opt = UserClaim(id="t.opt", statement="s", source="s", params={}, predict=lambda p: TRUE_MIN,
                        solve=lambda p: given, kind="optimum", rtol=1e-9)
        assert opt.check_instance({}).verdict == Verdict.VERIFIED
    d = {"value": sol.value, "lower_bound": cert.lower_bound}
    assert bound_claim("lower_bound", 1.33, lambda p: d).check_instance({}).verdict == Verdict.VERIFIED


def test_upper_bound_is_verified_by_a_feasible_point_and_refuted_only_by_a_proof():
    conv = _feasible(20000)
    assert bound_claim("upper_bound", 1.34, lambda p: conv).check_instance({}).verdict == Verdict.VERIFIED
    # "min <= 1.33" is false, but a feasible point above it proves nothing
    res = bound_claim("upper_bound", 1.33, lambda p: conv).check_instance({})
    assert res.verdict == Verdict.INCONCLUSIVE
    # the proven lower bound 1.33218 > 1.33 is the witness
    res = bound_claim("upper_bound", 1.33, lambda p: _certified()).check_instance({})
    assert res.verdict == Verdict.REFUTED and res.checks[0].evidence["witness_gap"] == pytest.approx(
        TRUE_MIN - 1.33, abs=1e-8)


def test_bound_tolerance_is_relative_and_absolute():
    # claimed 1.0 + 5e-10 against a proven bound 1.0: within rtol 1e-9 (tolerance 1e-9) -> VERIFIED;
    # with rtol 1e-10 the proof is short by 5e-10 > 1e-10 -> INCONCLUSIVE (never REFUTED without a point below)
    proof = Bounds(proven_lower=1.0, certificate="given")
    ok = UserClaim(id="t", statement="s", source="s", params={}, predict=lambda p: 1.0 + 5e-10,
                   solve=lambda p: proof, kind="lower_bound", rtol=1e-9)
    assert ok.check_instance({}).verdict == Verdict.VERIFIED
    tight = UserClaim(id="t", statement="s", source="s", params={}, predict=lambda p: 1.0 + 5e-10,
                      solve=lambda p: proof, kind="lower_bound", rtol=1e-10)
    res = tight.check_instance({})
    assert res.verdict == Verdict.INCONCLUSIVE and res.checks[0].evidence["tolerance"] == pytest.approx(1e-10)


def test_non_finite_values_never_decide():
    def const(v):
        return lambda p: v

    for bad in (float("nan"), float("inf"), [float("nan"), float("nan")]):
        assert bound_claim("lower_bound", 1.0, const(bad)).check_instance({}).verdict == Verdict.INCONCLUSIVE
        assert bound_claim("upper_bound", 1.0, const(bad)).check_instance({}).verdict == Verdict.INCONCLUSIVE
    # -inf is not a value at a feasible point either: it never refutes
    assert bound_claim("lower_bound", 1.0, const(float("-inf"))).check_instance({}).verdict == Verdict.INCONCLUSIVE
    nan_proof = Bounds(feasible=2.0, proven_lower=float("nan"))
    assert bound_claim("lower_bound", 1.0, lambda p: nan_proof).check_instance({}).verdict == Verdict.INCONCLUSIVE


def test_bound_solve_returning_garbage_is_an_error_naming_it():
    res = bound_claim("lower_bound", 1.0, lambda p: "1.3").check_instance({})
    assert res.verdict == Verdict.ERROR and "the value returned by solve must be a number" in res.reason
    res = bound_claim("lower_bound", 1.0, lambda p: {"valeu": 1.3}).check_instance({})
    assert res.verdict == Verdict.ERROR and "unknown keys ['valeu']" in res.reason


# ---- geometry: only at a proven point ---------------------------------------------------------

def _ufm_gram(k: int, d: int) -> np.ndarray:
    from solvers.ufm import solve_factored

    inst = UFMInstance("ce", k, 2, d, 0.05, 0.05)
    sol = solve_factored(inst, starts=2, seed=0)
    mu = class_means(sol.variables["H"], inst.labels())
    M = mu - mu.mean(axis=1, keepdims=True)
    return M.T @ M


def geometry_claim(expected: str, solve, **kw) -> UserClaim:
    return UserClaim(id="t.geo", statement=f"the optimal class means form a {expected}", source="test",
                     params={}, predict=lambda p: expected, solve=solve,
                     kind="geometry", **kw)


def test_geometry_at_an_uncertified_solver_point_below_k_minus_1_is_inconclusive_not_refuted():
    # d = 2 < k - 1 = 3: no simplex ETF exists; the solver point is "other". That used to be REFUTED.
    gram = _ufm_gram(4, 2)
    res = geometry_claim("simplex-etf", lambda p: gram).check_instance({"k": 4, "d": 2})
    assert res.verdict == Verdict.INCONCLUSIVE
    assert res.checks[0].evidence["verdict_at_solver_point"] == "REFUTED"
    # with the theorem's hypothesis stated, the instance is NOT_APPLICABLE
    need = lambda p: None if p["d"] >= p["k"] - 1 else f"d >= k-1 (d = {p['d']}, k = {p['k']})"  # noqa: E731
    res = geometry_claim("simplex-etf", lambda p: gram, requires=need).check_instance({"k": 4, "d": 2})
    assert res.verdict == Verdict.NOT_APPLICABLE and "d >= k-1" in res.reason


def test_geometry_with_a_proven_radius():
    k = 3
    etf = etf_gram(k)
    of = orthogonal_frame(k).T @ orthogonal_frame(k)
    # closed form: || I/sqrt(k) - J/sqrt(k-1) ||_F = sqrt(2 - 2 sqrt((k-1)/k)) (spec: ETF vs OF)
    d_of_etf = math.sqrt(2 - 2 * math.sqrt((k - 1) / k))
    tol = 1e-3

    def run(expected, gram, radius):
        return geometry_claim(expected, lambda p: ProvenPoint(gram, how="test radius", radius=radius),
                              geometry_tol=tol).check_instance({})

    assert run("simplex-etf", etf, 0.5 * tol).verdict == Verdict.VERIFIED
    res = run("simplex-etf", etf, 2 * tol)  # the radius term exceeds the tolerance: not decided
    assert res.verdict == Verdict.INCONCLUSIVE
    res = run("simplex-etf", of, 0.1)  # an OF, proven within 0.1 of every minimiser: not an ETF anywhere
    assert res.verdict == Verdict.REFUTED
    assert res.checks[0].evidence["deviation"] == pytest.approx(d_of_etf, rel=1e-12)
    assert run("simplex-etf", of, d_of_etf).verdict == Verdict.INCONCLUSIVE  # radius covers an ETF
    assert run("orthogonal-frame", of, 0.0).verdict == Verdict.VERIFIED


def test_geometry_unique_point_and_wrong_expected_names():
    etf = simplex_etf(4)
    ok = geometry_claim("simplex-etf", lambda p: ProvenPoint(etf.T @ etf, how="closed form, unique", unique=True))
    res = ok.check_instance({})
    assert res.verdict == Verdict.VERIFIED and res.checks[0].evidence["geometry_certificate"] == "closed form, unique"
    zero = geometry_claim("zero", lambda p: ProvenPoint(np.zeros((4, 4)), how="trivial phase proven", unique=True))
    assert zero.check_instance({}).verdict == Verdict.VERIFIED
    not_zero = geometry_claim("zero", lambda p: ProvenPoint(etf.T @ etf, how="x", unique=True))
    assert not_zero.check_instance({}).verdict == Verdict.REFUTED
    typo = geometry_claim("simplex_etf", lambda p: ProvenPoint(etf.T @ etf, how="x", unique=True))
    res = typo.check_instance({})
    assert res.verdict == Verdict.ERROR and "predict(p) must return one of" in res.reason


def test_geometry_from_a_family_report():
    def report(pred, verdict):
        checks = [Check("geometry", verdict, "family reason")] if verdict != "na" else \
            [hypothesis_fails("geometry", "d >= k-1 fails")]
        return SolveReport("ufm-ce", {"k": 3}, predicted={"geometry": pred}, claims=checks,
                           geometry={"classification": "simplex-etf"})

    def run(expected, rep):
        return geometry_claim(expected, lambda p: rep).check_instance({}).verdict

    proven = report("simplex-etf", Verdict.VERIFIED)
    assert run("simplex-etf", proven) == Verdict.VERIFIED
    assert run("simplex-etf", proven.to_dict()) == Verdict.VERIFIED
    assert run("orthogonal-frame", proven) == Verdict.REFUTED  # the family proved another geometry
    unproven = report("simplex-etf", Verdict.INCONCLUSIVE)
    assert run("simplex-etf", unproven) == Verdict.INCONCLUSIVE
    assert run("orthogonal-frame", unproven) == Verdict.INCONCLUSIVE
    assert run("simplex-etf", report("simplex-etf", "na")) == Verdict.NOT_APPLICABLE
    assert run("simplex-etf", SolveReport("x", {}, claims=[Check("value", Verdict.VERIFIED, "ok")])) == \
        Verdict.INCONCLUSIVE


def test_measured_evidence_reaches_bound_checks():
    c = bound_claim("upper_bound", 2.0, lambda p: Measured([1.5, 3.0], {"iterations": 7}))
    res = c.check_instance({})
    assert res.verdict == Verdict.VERIFIED and res.checks[0].evidence["iterations"] == 7
    assert res.checks[0].evidence["feasible_value"] == 1.5
