"""The claim/verdict framework: verdict ordering, check builders, reports."""

import json

import numpy as np
import pytest
import sympy as sp

from proofs_check import core
from proofs_check.core import Check, Claim, Provenance, RunContext, Verdict
from proofs_check.runner import markdown_report, run_claims, write_reports


def test_worst_ordering():
    V = Verdict
    assert core.worst([V.VERIFIED, V.INCONCLUSIVE]) is V.INCONCLUSIVE
    assert core.worst([V.INCONCLUSIVE, V.REFUTED, V.VERIFIED]) is V.REFUTED
    assert core.worst([V.REFUTED, V.ERROR]) is V.ERROR
    assert core.worst([]) is V.INCONCLUSIVE  # nothing checked is never VERIFIED


def test_symbolic_zero_true_and_false():
    x = sp.Symbol("x", positive=True)
    assert core.symbolic_zero("id", sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1).verdict is Verdict.VERIFIED
    bad = core.symbolic_zero("bad", sp.log(x * 2) - sp.log(x) - sp.log(3), substitutions=[{x: 1}])
    assert bad.verdict is Verdict.REFUTED and "witness" in bad.evidence


def test_optimum_matches_branches():
    om = core.optimum_matches
    assert om("a", 1.0, attained=1.0, lower_bound=1.0 - 1e-12, tol=1e-9).verdict is Verdict.VERIFIED
    # a feasible point below the predicted optimum refutes it
    assert om("b", 1.0, attained=0.99, lower_bound=0.98, tol=1e-9).verdict is Verdict.REFUTED
    # a certified lower bound above the prediction refutes it
    assert om("c", 1.0, attained=1.2, lower_bound=1.1, tol=1e-9).verdict is Verdict.REFUTED
    # gap too large or no certificate: never VERIFIED
    assert om("d", 1.0, attained=1.0, lower_bound=0.9, tol=1e-9).verdict is Verdict.INCONCLUSIVE
    assert om("e", 1.0, attained=1.0, lower_bound=None, tol=1e-9).verdict is Verdict.INCONCLUSIVE
    # a feasible value and a proven bound decide: a route's convergence flag is only a diagnostic
    f = om("f", 1.0, attained=1.0, lower_bound=1.0, tol=1e-9, converged=False)
    assert f.verdict is Verdict.VERIFIED and f.evidence["converged"] is False


def test_close_and_null():
    assert core.close("x", 1.0, 1.0 + 1e-12, rtol=1e-9).verdict is Verdict.VERIFIED
    assert core.close("x", 1.0, 1.001, rtol=1e-9).verdict is Verdict.REFUTED
    assert core.close("x", None, 1.0, rtol=1e-9).verdict is Verdict.INCONCLUSIVE


def test_clean_turns_nan_into_null():
    out = core.clean({"a": float("nan"), "b": np.array([1.0, np.inf]), "c": np.float32(2)})
    assert out == {"a": None, "b": [1.0, None], "c": 2.0}


def test_clean_fast_paths_give_the_same_json_safe_values():
    M = np.arange(6.0).reshape(2, 3)
    assert core.clean(M) == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert core.clean([[0.5, float("inf")], [1.5, 2.5]]) == [[0.5, None], [1.5, 2.5]]
    assert core.clean([1.0, np.float64(np.nan), 2]) == [1.0, None, 2]
    assert core.clean(np.array([[1.0, np.nan]])) == [[1.0, None]]
    assert core.clean(np.array([1, 2])) == [1, 2] and core.clean([]) == []


def _claim(check, cid="t"):
    return Claim(cid, "test", "statement", "source", "derived", check)


def test_claim_crash_is_error_and_exit_status_1(tmp_path):
    def boom(ctx):
        yield Check("ok", Verdict.VERIFIED, "fine")
        raise RuntimeError("kaput")

    ok = _claim(lambda ctx: iter([Check("ok", Verdict.VERIFIED, "fine", {"v": float("nan")})]), "ok")
    run = run_claims([ok, _claim(boom, "boom")], RunContext(), progress=False)
    assert [r.verdict for r in run.results] == [Verdict.VERIFIED, Verdict.ERROR]
    assert run.exit_status == 1
    write_reports(run, str(tmp_path / "r.md"), str(tmp_path / "r.json"))
    data = json.loads((tmp_path / "r.json").read_text())  # strict JSON: NaN would not parse back as null
    assert data["claims"][0]["checks"][0]["evidence"]["v"] is None
    assert data["overall_verdict"] == "ERROR"
    assert "kaput" in markdown_report(run)


def test_inconclusive_run_exits_0_but_refuted_exits_1():
    inc = _claim(lambda ctx: iter([Check("x", Verdict.INCONCLUSIVE, "gap")]), "inc")
    ref = _claim(lambda ctx: iter([Check("x", Verdict.REFUTED, "witness")]), "ref")
    assert run_claims([inc], progress=False).exit_status == 0
    assert run_claims([inc, ref], progress=False).exit_status == 1


def test_provenance_is_validated():
    with pytest.raises(ValueError):
        Claim("x", "f", "s", "src", "guessed", lambda ctx: iter(()))
    assert _claim(lambda c: iter(())).provenance is Provenance.DERIVED


def test_registered_claims_have_source_and_provenance():
    from proofs_check.registry import all_claims

    claims = all_claims()
    assert claims, "no claims registered"
    for c in claims:
        assert c.source and c.statement and isinstance(c.provenance, Provenance)


def test_checks_at_a_point_need_a_geometry_certificate():
    refuted = Check("geometry", Verdict.REFUTED, "geometry is other", {"x": 1})
    verified = Check("geometry", Verdict.VERIFIED, "geometry is orthogonal-frame")
    # a value gap alone never certifies the point, whatever the check found there
    for c in (refuted, verified):
        out = core.at_certified_point(c, value=1.0, lower_bound=1.0 - 1e-12, tol=1e-6)
        assert out.verdict is Verdict.INCONCLUSIVE and "no geometry certificate" in out.reason
    # proven unique minimiser at this point: the check stands
    out = core.at_certified_point(refuted, value=1.0, lower_bound=1.0 - 1e-9, tol=1e-6, unique=True, how="strict")
    assert out.verdict is Verdict.REFUTED and out.evidence["geometry_certificate"] == "strict"
    # a gap above tolerance, no certificate: INCONCLUSIVE even with a uniqueness proof
    for kw in ({"value": 1.7, "lower_bound": 1.0}, {"value": 1.0, "lower_bound": None},
               {"value": float("nan"), "lower_bound": 1.0}):
        for c in (refuted, verified):
            out = core.at_certified_point(c, tol=1e-6, unique=True, **kw)
            assert out.verdict is Verdict.INCONCLUSIVE and out.name == c.name and c.verdict.value in out.reason
    assert core.at_certified_point(refuted, value=1.7, lower_bound=1.0, tol=1e-6).evidence["certificate_gap"] == pytest.approx(0.7)
