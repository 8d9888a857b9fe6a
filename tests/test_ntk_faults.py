"""Block-NTK family: faults and limits, one verdict engine, proven geometry.

- bad or oversized inputs exit 2 with one line (the parameter, the limit, the estimate), fast;
- every integration runs under a work (DOP853 steps) and a memory budget and reports INCONCLUSIVE
  "work budget reached at t = ..." instead of running on;
- false statements (a wrong limit, a wrong rate, a wrong block structure) are REFUTED, never VERIFIED;
- true boundary instances (C = 2, n = 1, the smallest and largest accepted init scales) are never
  REFUTED; a failed hypothesis is NOT_APPLICABLE and does not decide the verdict;
- consistency checks are marked independent=False and every VERIFIED statement has an independent check.
"""

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from proofs_check.claims import ntk as cl
from proofs_check.cli import main
from proofs_check.core import RunContext, SolveReport, Verdict
from solvers import ntk as sv
from theory import ntk as th
from theory._validate import InputError

QUICK = RunContext("quick")
REF = th.NTKInstance(3, 4, (1.0, 0.6, 0.2))


# ------------------------------------------------------------------ bad input: exit 2, one line

def _main(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors (one line, status 2)
        return exc.code


@pytest.mark.parametrize("args,needle", [
    (["--init-scale", "1e-320"], "init_scale must be in [1e-100, 1e+06]"),
    (["--init-scale", "1e300"], "init_scale must be in [1e-100, 1e+06]"),
    (["--init", "lazy", "--init-scale", "1e4"], "lazy construction must be in [1e-100, 1000]"),
    (["--time", "1e12"], "estimated ~"),
    (["--init-scale", "1e6"], "exceed the budget"),
    (["--s", "1e8", "--time", "30"], "exceed the budget"),  # an explicit T = 30 at s = 1e8 (the default is 30/s)
    (["--s", "1e300"], "s must be in [1e-08, 1e+08]"),
    (["--kappa", "1e300,0,0"], "outside [1e-30, 1e+30]"),
    (["--gamma", "1,0.999999999999999999,0"], "gamma: block kernel is not positive definite"),
    (["--gamma", "1,0.99999999,0"], "linear residual flow (--gamma): estimated"),
    (["--feature-dim", "100000000"], "n (feature dimension) = 100000000 exceeds the limit 256"),
    (["--classes", "100000", "--per-class", "100000"], "N = C m = 100000 x 100000 = 10000000000 samples exceeds"),
    (["--classes", "100000000"], "exceeds the limit 1000"),
    (["--per-class", "100000000"], "exceeds the limit 1000"),
    (["--classes", "10", "--per-class", "100", "--feature-dim", "200"], "ODE state size"),
    (["--classes", "10", "--per-class", "100", "--feature-dim", "11"], "GB of dense output"),
    (["--max-seconds", "0"], "max_seconds must be > 0"),
    (["--max-seconds", "-1"], "max_seconds must be > 0"),
    (["--max-seconds", "nan"], "nan"),  # (the CLI or check_instance names the parameter)
    (["--max-seconds", "1e9"], "max_seconds must be <="),
    (["--time", "inf"], "inf"),
    (["--init-scale", "nan"], "nan"),
    (["--seed", "-1"], "seed must be a non-negative integer"),  # the CLI's own check (names the option)
    (["--init", "e-zero", "--mean-weight", "1"], "mean_weight must be < 1"),
    (["--kappa", ""], "--kappa: expected comma-separated numbers"),  # the shared list parser refuses empty lists
    (["--classes", ""], "invalid int value"),
    (["--starts", "100000000"], "unrecognized arguments"),
    (["--dim", "100000000"], "unrecognized arguments"),
])
def test_solve_bad_input_one_line(args, needle, capsys):
    assert _main(["solve", "ntk", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ncproofs: error: ") and needle in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("args,needle", [
    (["--classes", ""], "--classes/-C: expected comma-separated integers"),
    (["--classes", ",,,"], "--classes/-C: expected comma-separated integers"),
    (["--per-class", ""], "--per-class/-m: expected comma-separated integers"),
    (["--classes", ",".join(str(c) for c in range(2, 502)), "--per-class", ",".join(str(m) for m in range(2, 502))],
     "rows, more than the limit"),
    (["--kappa", ""], "--kappa: expected comma-separated numbers"),
    (["--kappa", "1,2"], "kappa must have exactly 3"),
])
def test_table_bad_input_one_line(args, needle, capsys):
    assert _main(["table", "ntk", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ncproofs: error: ") and needle in err, err
    assert err.count("\n") == 1


@pytest.mark.parametrize("args", [
    ["--time", "1e12"],                                   # formerly never ended
    ["--init-scale", "1e-320"],                           # formerly never ended
    ["--init-scale", "1e300"],                            # formerly never ended
    ["--feature-dim", "100000000"],                       # formerly ran out of memory
])
def test_formerly_hanging_inputs_exit_2_in_a_subprocess(args):
    p = subprocess.run([sys.executable, "-m", "proofs_check.cli", "solve", "ntk", *args], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.startswith("ncproofs: error: ") and p.stderr.count("\n") == 1


def test_formerly_slow_lazy_default_ends_with_a_verdict():
    """--classes 3 --per-class 2 --init lazy ran 170 s and took 4.2 GB (default init scale 1e-6, T ~ 1e13)."""
    p = subprocess.run([sys.executable, "-m", "proofs_check.cli", "solve", "ntk", "--classes", "3", "--per-class", "2",
                        "--init", "lazy", "--init-scale", "1e-6", "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["instance"]["time"] == cl.LAZY_T_MAX  # 12/(s lambda_0^gamma) ~ 1.5e13, capped
    lazy = next(c for c in out["claims"] if c["id"] == "ntk-lazy-no-collapse")
    assert lazy["verdict"] == "NOT_APPLICABLE" and "not large" in lazy["reason"]
    assert out["verdict"] == "VERIFIED"
    assert out["budget"]["estimate_feature_flow"]["bytes"] < 1e8


# ------------------------------------------------------------------ budgets during a run

def test_work_budget_stops_the_flow_and_reports_inconclusive(monkeypatch):
    """With the estimate disabled, a 1e6-long horizon runs into the work budget (the DOP853 steps that
    --max-seconds buys at the model's rate): the report is INCONCLUSIVE with "work budget reached at
    t = ...", never VERIFIED."""
    monkeypatch.setattr(sv, "check_work", lambda *a, **k: None)
    rep = cl.check_instance(REF, T=1e6, max_seconds=1.0)
    assert isinstance(rep, SolveReport)
    out = rep.to_dict()
    assert out["verdict"] == "INCONCLUSIVE"
    assert "work budget reached at t = " in out["reason"]
    steps = out["budget"]["work_budget_steps_feature_flow"]
    assert out["routes"]["feature_flow"]["steps"] == steps
    assert out["routes"]["feature_flow"]["t_reached"] < 1e6
    assert any("work budget reached" in d for d in out["diagnostics"])
    for cid in ("ntk-invariant", "ntk-scatter", "ntk-nc1-bound", "ntk-small-init-limit"):
        c = next(c for c in out["claims"] if c["id"] == cid)
        assert c["verdict"] == "INCONCLUSIVE", (cid, c["reason"])


def test_linear_flow_time_budget(monkeypatch):
    monkeypatch.setattr(sv, "check_work", lambda *a, **k: None)
    lin = sv.linear_residual_flow(REF, -sv.targets(3, 4), T=1e7, deadline=time.perf_counter() + 0.5)
    assert lin.stopped and lin.stopped.startswith("stopped by the wall-clock safety limit (")
    assert lin.T < 1e7
    lin = sv.linear_residual_flow(REF, -sv.targets(3, 4), T=1e7, max_steps=50, safety_s=600.0)
    assert lin.stopped and lin.stopped.startswith("work budget reached at t = ") and "(50 DOP853 steps)" in lin.stopped
    assert lin.steps == 50 and lin.T < 1e7


def test_memory_budget_stops_the_flow():
    rep = sv.run_flow(REF, sv.init_random(REF, 4, 1e-6, seed=0), 30.0, max_bytes=2e5)
    d = rep.solution.diagnostics
    assert d["stopped"].startswith("memory budget reached at t = ")
    assert not rep.solution.converged and rep.trajectory.T < 30.0
    size = 3 * 4 + 3 + 4 * 12  # C n + C + n N
    assert 0 < d["steps"] and d["steps"] * (64 * size + sv.STEP_OVERHEAD_BYTES) <= 2e5


def test_estimate_refuses_before_allocating():
    with pytest.raises(InputError) as exc:
        cl.check_instance(REF, T=1e12)
    msg = str(exc.value)
    # the work and its limit in one unit (what --max-seconds 60 buys at the work model's fixed rate), the memory limit
    assert "estimated work" in msg and "flop-equivalents (limit 4e+10 flop-equivalents = --max-seconds 60" in msg
    assert "1.2 GB" in msg and "--max-seconds" in msg
    # a bigger budget lets a longer run through (the estimate scales with T)
    w1 = sv.estimate_flow_work(REF, sv.init_random(REF, 4, 1e-6), 30.0)
    w2 = sv.estimate_flow_work(REF, sv.init_random(REF, 4, 1e-6), 3000.0)
    assert w2["steps"] > 40 * w1["steps"]
    # stiffness grows like eps^2 for a large initialisation
    w3 = sv.estimate_flow_work(REF, sv.init_random(REF, 4, 100.0), 30.0)
    assert w3["lambda_max"] > 1e3 * w1["lambda_max"]


def test_dense_output_memory_is_bounded_by_the_steps():
    """The lazy run that took 4.2 GB stored every DOP853 step of a T ~ 1e13 integration; the estimate of
    stored bytes now bounds what is kept (8 state vectors per step)."""
    rep = sv.run_flow(REF, sv.init_random(REF, 4, 1e-6, seed=0), 30.0)
    steps = rep.solution.diagnostics["steps"]
    est = sv.estimate_flow_work(REF, sv.init_random(REF, 4, 1e-6, seed=0), 30.0)
    assert 0 < steps <= est["steps"]


# ------------------------------------------------------------------ false statements

@pytest.mark.parametrize("key,factor", [("gram_scale", 1.01), ("self_duality", 0.99), ("bias", 1.001),
                                        ("mean_sq_norm", 1.001), ("W_fro_sq", 1.001), ("escape_rate", 1.001),
                                        ("late_within_rate", 0.999)])
def test_wrong_limit_refuted_by_fixed_point_equations(key, factor):
    """The limit identities check the function under test: each value 0.1-1% off is REFUTED without a flow."""
    for inst in (REF, th.NTKInstance(2, 2, (1.0, 0.5, 0.1), s=0.7), th.NTKInstance(5, 3, (2.0, 0.1, 0.3))):
        lim = dict(th.small_init_limits(inst))
        lim[key] *= factor
        checks = cl.limit_fixed_point_checks(inst, lim)
        assert any(c.verdict == Verdict.REFUTED for c in checks), key
        true = cl.limit_fixed_point_checks(inst, th.small_init_limits(inst))
        assert all(c.verdict == Verdict.VERIFIED for c in true)
        # the stated norms are derived from gram_scale and self_duality: consistency checks, not independent
        # (tests/test_ntk_limit_consistency_checks.py); the residuals and rates are
        assert all(c.independent == (not c.name.startswith(("||mu_c - h_bar||^2", "||W||_F^2"))) for c in true)


@pytest.mark.parametrize("key", ["gram_scale", "bias"])
def test_wrong_limit_claim_refuted(key):
    def limits(inst):
        d = dict(th.small_init_limits(inst))
        d[key] *= 1.01
        return d

    res = cl.small_init_claim(limits, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED, res.reason


def test_wrong_limit_refuted_through_check_instance_even_without_convergence():
    def limits(inst):
        d = dict(th.small_init_limits(inst))
        d["escape_rate"] *= 1.01
        return d

    rep = cl.check_instance(REF, T=3.0, limits_fn=limits)  # too short to converge: flow checks INCONCLUSIVE
    small = next(c for c in rep.claims if c.name == "ntk-small-init-limit")
    assert small.verdict == Verdict.REFUTED and rep.verdict == Verdict.REFUTED
    assert "escape rate" in small.reason
    ok = cl.check_instance(REF, T=3.0)
    assert ok.verdict == Verdict.INCONCLUSIVE and "not converged" in ok.reason


def test_wrong_limit_never_verified_when_the_flow_is_undecided():
    """A false prediction with an inconclusive run: REFUTED (fixed-point witness) or INCONCLUSIVE, never VERIFIED."""
    def limits(inst):
        d = dict(th.small_init_limits(inst))
        d["late_within_rate"] *= 1.2
        return d

    rep = cl.check_instance(REF, init_scale=1e-100, limits_fn=limits)
    assert rep.verdict in (Verdict.REFUTED, Verdict.INCONCLUSIVE)
    assert rep.verdict == Verdict.REFUTED


def test_wrong_escape_rate_and_wrong_residual_rate_refuted():
    def rates(inst):
        r = th.residual_rates(inst)
        r["within"] *= 0.999
        return r

    assert cl.rates_claim(rates, claim_id="false").run(QUICK).verdict == Verdict.REFUTED


@pytest.mark.parametrize("mult", [
    lambda C, m: (C * (m - 1) - 1, C, 1),        # one eigenvector moved from the within-class to the class block
    lambda C, m: (C * (m - 1), C - 1, 2),        # a global block of dimension 2 (sizes no longer add up to N)
    lambda C, m: (C * m - C, 1, C - 1),          # class and global multiplicities swapped
], ids=["moved", "extra", "swapped"])
def test_wrong_block_structure_refuted(mult):
    res = cl.spectrum_claim(mult=mult, claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED
    bad = [c for c in res.checks if c.verdict == Verdict.REFUTED]
    assert any(c.name.startswith("eigenbasis complete") for c in bad)  # symbolically
    assert any(c.name.startswith("numeric spectrum") for c in bad)     # and numerically


def test_swapped_same_class_and_other_class_constants_refuted():
    """The block pattern with kappa_c and kappa_n exchanged (within-class <-> cross-class) is refuted."""
    res = cl.spectrum_claim(lambda C, m, kd, kc, kn: th.sym_eigenvalues(C, m, kd, kn, kc), claim_id="false").run(QUICK)
    assert res.verdict == Verdict.REFUTED


# ------------------------------------------------------------------ true boundary instances

@pytest.mark.parametrize("inst,kw,expect", [
    (th.NTKInstance(2, 2, (1.0, 0.6, 0.2)), dict(feature_dim=1), "VERIFIED"),           # C = 2, m = 2, n = 1
    (th.NTKInstance(2, 2, (1.0, 0.6, 0.2)), dict(feature_dim=1, init_scale=1e-100, T=300.0), None),
    (REF, dict(init_scale=1e-100), "INCONCLUSIVE"),  # smallest accepted scale: no escape by T = 30
    (REF, dict(init_scale=1e-20, T=100.0), None),     # scatter ~1e-40: the rounding floor decides, not noise
    (REF, dict(init_scale=cl.SMALL_INIT_MAX), None),  # boundary of the small-init hypothesis
    (REF, dict(init_scale=0.3), "VERIFIED"),          # small-init limit NOT_APPLICABLE, the rest VERIFIED
    (REF, dict(init_scale=1e3, T=1e-6), "VERIFIED"),  # large random init, a short horizon
    (REF, dict(init="lazy", init_scale=cl.LAZY_MIN_SCALE), "VERIFIED"),
    (REF, dict(init="lazy", init_scale=sv.LAZY_SCALE_MAX), "VERIFIED"),
    (th.NTKInstance(2, 2, (1.0, 0.6, 0.2)), dict(init="lazy", init_scale=1e-100), "VERIFIED"),
    (th.NTKInstance(2, 3, (1.0, 0.6, 0.2)), dict(init="e-zero", feature_dim=1, init_scale=1e-100), None),
    (REF, dict(init="e-zero", init_scale=10.0, T=1.0), None),
    (th.NTKInstance(3, 4, (1.0, 0.6, 0.2), s=1e-8), {}, None),
    (th.NTKInstance(3, 4, (1.0, 0.6, 0.2), s=1e4), dict(T=3e-3), None),
], ids=["C2m2n1", "C2-eps1e-100-T300", "eps1e-100", "eps1e-20", "eps0.01", "eps0.3", "eps1e3", "lazyL5",
        "lazyL1e3", "lazy-tiny", "ezero-tiny", "ezero-big", "s1e-8", "s1e4"])
def test_true_boundary_instances_never_refuted(inst, kw, expect):
    rep = cl.check_instance(inst, **kw)
    out = rep.to_dict()
    bad = [(c["id"], c["reason"]) for c in out["claims"] if c["verdict"] in ("REFUTED", "ERROR")]
    assert not bad, bad
    if expect:
        assert out["verdict"] == expect, out["reason"]
    for c in out["claims"]:
        if c["verdict"] == "NOT_APPLICABLE":
            assert "hypothesis fails" in c["reason"]


def test_not_applicable_does_not_decide_the_verdict():
    rep = cl.check_instance(REF, init_scale=0.3)
    verdicts = {c.name: c.verdict for c in rep.claims}
    assert verdicts.pop("ntk-small-init-limit") == Verdict.NOT_APPLICABLE
    assert set(verdicts.values()) == {Verdict.VERIFIED}
    assert rep.verdict == Verdict.VERIFIED and "1 not applicable" in rep.reason


# ------------------------------------------------------------------ independence

def test_every_verified_claim_has_an_independent_check():
    for claim in cl.CLAIMS:
        res = claim.run(QUICK)
        assert res.verdict == Verdict.VERIFIED, (claim.id, res.reason)
        assert any(c.independent and c.verdict == Verdict.VERIFIED for c in res.checks), claim.id


def test_consistency_checks_are_marked():
    res = cl.scatter_claim().run(QUICK)
    sign = next(c for c in res.checks if c.name.startswith("-2 s lambda_0"))
    assert sign.independent is False
    res = cl.nc1_bound_claim().run(QUICK)
    assert all(not c.independent for c in res.checks if "is stationary" in c.name)
    checks = cl.e_zero_checks(REF, cl.e_zero_run(REF, seed=3))
    assert next(c for c in checks if c.name.startswith("E(0) = 0")).independent is False


def test_symbolic_limit_identities_do_not_count_as_evidence_for_limits_fn():
    """They prove the spec's formulas, not the function under test: independent=False."""
    def limits(inst):
        return dict(th.small_init_limits(inst))

    res = cl.small_init_claim(limits, claim_id="copy").run(QUICK)
    sym = [c for c in res.checks if "symbolic" in c.name]
    assert len(sym) == 2 and all(c.verdict == Verdict.VERIFIED and not c.independent for c in sym)


def test_report_schema_and_summarise(capsys):
    assert main(["solve", "ntk", "--json", "--classes", "2", "--per-class", "2", "--feature-dim", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"family", "instance", "predicted", "solution", "certificate", "geometry", "routes", "verdict",
                        "reason", "claims", "diagnostics", "budget"}
    assert all(set(c) == {"id", "verdict", "reason", "independent", "evidence"} for c in out["claims"])
    assert all(c["id"].startswith("ntk-") and c["id"] == c["id"].lower() and " " not in c["id"] for c in out["claims"])
    assert out["instance"]["max_seconds"] == cl.DEFAULT_MAX_SECONDS
    assert np.isfinite(out["solution"]["value"])


def test_geometry_at_the_final_state_is_no_witness_against_the_limit():
    """A non-ETF Gram measured at a finite-time state gives INCONCLUSIVE, never REFUTED (no proof about
    the limit); the same check supports the statement when the state is an ETF."""
    rep, esc, late = cl.small_init_run(REF, T=30.0)
    ok = cl.small_init_checks(REF, rep, esc, late, cl.SMALL_EPS, 4)
    assert next(c for c in ok if "simplex ETF" in c.name).verdict == Verdict.VERIFIED
    G = rep.measures["gram"].copy()
    G[0, 0] *= 1.5
    rep.measures = {**rep.measures, "gram": G}
    checks = cl.small_init_checks(REF, rep, esc, late, cl.SMALL_EPS, 4)
    geo = next(c for c in checks if "simplex ETF" in c.name)
    assert geo.verdict == Verdict.INCONCLUSIVE and "not a witness" in geo.reason
