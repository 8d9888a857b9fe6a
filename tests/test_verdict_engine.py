"""The verdict engine's rules (DESIGN.md, "Verdicts are honest"), each fed a case that must fail.

- every comparison fails closed (NaN, inf, None never pass);
- "min >= L" needs a proof, "min <= U" needs a feasible point; witnesses refute;
- statements about a point need a proven radius or uniqueness;
- NOT_APPLICABLE does not count; VERIFIED needs an independent check.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proofs_check import core
from proofs_check.core import Check, Claim, RunContext, SolveReport, Verdict
from proofs_check.runner import run_claims, summary_table

BAD = [float("nan"), float("inf"), -float("inf"), None]
V = Verdict


@pytest.mark.parametrize("bad", BAD)
def test_every_value_builder_fails_closed(bad):
    """NaN/inf/None anywhere in a value comparison is never VERIFIED (and never a witness)."""
    om = core.optimum_matches
    cases = [
        om("a", 1.0, attained=bad, lower_bound=1.0, tol=1e-9),
        om("b", 1.0, attained=1.0, lower_bound=bad, tol=1e-9),
        om("c", bad, attained=1.0, lower_bound=1.0, tol=1e-9) if bad is not None else
        om("c", float("nan"), attained=1.0, lower_bound=1.0, tol=1e-9),
        om("d", 1.0, attained=1.0, lower_bound=1.0, tol=bad if bad is not None else float("nan")),
        core.close("e", 1.0, bad, rtol=1e-9),
        core.close("f", bad, 1.0, rtol=1e-9),
        core.close("g", [1.0, 2.0], [1.0, bad], rtol=1e-9) if bad is not None else core.close("g", 1.0, None, rtol=1),
        core.close("h", 1.0, 1.0, rtol=float("nan")),
        core.lower_bound_claim("i", 1.0, proven_lower=bad, feasible_value=bad, tol=1e-9),
        core.lower_bound_claim("j", bad if bad is not None else float("nan"), proven_lower=2.0, feasible_value=2.0,
                               tol=1e-9),
        core.upper_bound_claim("k", 1.0, feasible_value=bad, proven_lower=bad, tol=1e-9),
        core.upper_bound_claim("l", 1.0, feasible_value=0.5, proven_lower=None, tol=bad if bad is not None else math.nan),
        core.point_statement("m", bad, 1e-3, radius=0.0),
        core.point_statement("n", 0.0, 1e-3, radius=bad),
        core.point_statement("o", 0.0, bad if bad is not None else math.nan, radius=0.0),
        core.condition("p", bad, verified="ok", refuted="bad"),
    ]
    for c in cases:
        assert c.verdict is V.INCONCLUSIVE, (c.name, c.verdict, c.reason)


def test_nan_gap_never_certifies():
    """The 'gap nan' case of the reliability run: attained NaN with a finite bound."""
    c = core.optimum_matches("v", 0.5, attained=float("nan"), lower_bound=0.5, tol=1e-8)
    assert c.verdict is V.INCONCLUSIVE
    assert not core.within(float("nan"), 1.0) and not core.within(1.0, float("nan"))
    assert not core.exceeds(float("nan"), 0.0) and not core.exceeds(float("inf"), 1.0)
    assert core.within(0.0, 0.0) and not core.within(1e-300, 0.0)


def test_lower_bound_claims_need_a_proof():
    # "min >= 1.35" with the true minimum 1.3383 and a feasible value 1.4 (not optimal): not proven
    c = core.lower_bound_claim("lb", 1.35, proven_lower=None, feasible_value=1.4, tol=1e-9, feasible_points=20)
    assert c.verdict is V.INCONCLUSIVE and "20 feasible points" in c.reason
    # a proven bound below the claim does not prove it either
    c = core.lower_bound_claim("lb", 1.35, proven_lower=1.3383, feasible_value=1.4, tol=1e-9)
    assert c.verdict is V.INCONCLUSIVE
    # a feasible point below the claim refutes it
    c = core.lower_bound_claim("lb", 1.35, proven_lower=1.3383, feasible_value=1.3383, tol=1e-9)
    assert c.verdict is V.REFUTED and c.evidence["witness_gap"] > 0
    # a proven bound above the claim proves it
    c = core.lower_bound_claim("lb", 1.33, proven_lower=1.3383, feasible_value=1.3383, tol=1e-9)
    assert c.verdict is V.VERIFIED
    # the old name cannot verify without a proof any more
    assert core.lower_bound_holds("lb", 1.0, 2.0, tol=1e-9).verdict is V.INCONCLUSIVE
    assert core.lower_bound_holds("lb", 1.0, 0.5, tol=1e-9).verdict is V.REFUTED


def test_upper_bound_claims():
    ub = core.upper_bound_claim
    assert ub("u", 2.0, feasible_value=1.5, proven_lower=1.4, tol=1e-9).verdict is V.VERIFIED
    assert ub("u", 1.0, feasible_value=1.5, proven_lower=1.4, tol=1e-9).verdict is V.REFUTED
    assert ub("u", 1.45, feasible_value=1.5, proven_lower=1.4, tol=1e-9).verdict is V.INCONCLUSIVE


@given(dev=st.floats(0, 1), r=st.floats(0, 1), tau=st.floats(1e-6, 1), lip=st.floats(0.1, 10))
def test_point_statement_decides_only_with_margin(dev, r, tau, lip):
    c = core.point_statement("p", dev, tau, radius=r, lipschitz=lip)
    if dev + lip * r <= tau:
        assert c.verdict is V.VERIFIED
    elif dev - lip * r > tau:
        assert c.verdict is V.REFUTED
    else:
        assert c.verdict is V.INCONCLUSIVE
    # no radius: never decided
    assert core.point_statement("p", dev, tau, radius=None).verdict is V.INCONCLUSIVE


def test_tolerance_is_scale_aware():
    # an optimum of size 1e-7 cannot accept a 1% error
    tol = core.tolerance(1e-7, rtol=1e-8, atol=1e-14)
    c = core.optimum_matches("v", 1e-7, attained=1.01e-7, lower_bound=1.01e-7, tol=tol)
    assert c.verdict is V.REFUTED


def test_not_applicable_does_not_count_and_all_na_is_na():
    ok = Check("a", V.VERIFIED, "fine")
    na = core.hypothesis_fails("b", "init scale 0.3 is not small")
    assert na.verdict is V.NOT_APPLICABLE and "init scale" in na.reason
    assert core.summarise([ok, na])[0] is V.VERIFIED
    assert core.summarise([na, na])[0] is V.NOT_APPLICABLE
    assert core.summarise([na, Check("c", V.INCONCLUSIVE, "gap")])[0] is V.INCONCLUSIVE
    assert core.worst([V.NOT_APPLICABLE, V.REFUTED]) is V.REFUTED
    assert core.summarise([])[0] is V.INCONCLUSIVE


def test_verified_needs_an_independent_check():
    same = Check("restatement", V.VERIFIED, "formula equals itself", independent=False)
    assert core.summarise([same])[0] is V.INCONCLUSIVE
    assert core.summarise([same, Check("solver", V.VERIFIED, "certified")])[0] is V.VERIFIED
    # a consistency check can still refute
    bad = Check("restatement", V.REFUTED, "differs", independent=False)
    assert core.summarise([bad, Check("solver", V.VERIFIED, "ok")])[0] is V.REFUTED


def test_run_summary_names_reasons_and_na_does_not_count():
    claims = [Claim("ok", "t", "s", "src", "derived", lambda ctx: iter([Check("x", V.VERIFIED, "fine")])),
              Claim("na", "t", "s", "src", "derived",
                    lambda ctx: iter([core.hypothesis_fails("x", "init scale 0.3 is not small")])),
              Claim("inc", "t", "s", "src", "derived",
                    lambda ctx: iter([Check("x", V.INCONCLUSIVE, "open discrepancy, see docs/crh.md " + "x" * 300)]))]
    run = run_claims(claims[:2], progress=False)
    assert run.verdict is V.VERIFIED and run.exit_status == 0
    run = run_claims(claims, progress=False)
    assert run.verdict is V.INCONCLUSIVE
    text = summary_table(run)
    assert "open discrepancy, see docs/crh.md" in text and "init scale 0.3" in text
    assert max(len(line) for line in text.splitlines() if "open discrepancy" in line) <= 200
    assert text.splitlines()[-1].startswith("why: ")


def test_solve_report_schema_and_verdict():
    rep = SolveReport("demo", {"k": 3}, {"value": 1.0}, claims=[
        Check("optimal-value", V.VERIFIED, "certified", {"gap": float("nan")}),
        core.hypothesis_fails("small-init-limit", "init scale 0.3 is not small")],
        diagnostics=["convex route: optimal_inaccurate"])
    d = rep.to_dict()
    assert d["verdict"] == "VERIFIED" and rep["verdict"] == "VERIFIED"
    assert [c["id"] for c in d["claims"]] == ["optimal-value", "small-init-limit"]
    assert d["claims"][1]["verdict"] == "NOT_APPLICABLE"
    assert d["claims"][0]["evidence"]["gap"] is None  # NaN never reaches JSON
    assert d["diagnostics"] == ["convex route: optimal_inaccurate"]


@pytest.mark.parametrize("bad", [{"profile": "bogus"}, {"seed": -1}, {"seed": 1.5}, {"seed": True}])
def test_run_context_validates(bad):
    from theory._validate import InputError

    with pytest.raises(InputError, match="profile|seed"):
        RunContext(**bad)


def test_cli_internal_error_is_not_bad_input(monkeypatch, capsys):
    """A defect (any exception that is not an InputError) exits 1 with one line, never 2."""
    from proofs_check import cli

    def boom(*a, **k):
        raise ValueError("a defect that happens to be a ValueError")

    monkeypatch.setattr(cli, "_dispatch", boom)
    assert cli.main(["list"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ncproofs: internal error in list") and "--debug" in err[0]


def test_cli_input_error_exit_2(monkeypatch, capsys):
    from proofs_check import cli
    from theory._validate import InputError

    def bad(*a, **k):
        raise InputError("--classes must be >= 2, got 1")

    monkeypatch.setattr(cli, "_dispatch", bad)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ncproofs: error: --classes must be >= 2, got 1"]
