"""UFM verdicts under the verdict-engine contract: false statements are never VERIFIED, true boundary
instances are never REFUTED, every-minimiser statements need the uniqueness proof or a radius, bad input
and oversized instances are refused before any work (docs/ufm.md)."""

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from proofs_check.claims import ufm as C
from proofs_check.core import Verdict
from solvers import ufm as S
from theory import ufm as T
from theory._validate import InputError


def verdicts(rep):
    return {c.name: c.verdict for c in rep.claims}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "proofs_check.cli", *args], capture_output=True, text=True,
                          timeout=300)


# --- reference values (spec table, computed independently of this project) -------------------

@pytest.mark.parametrize("loss,k,n,lw,lh,ref", [
    ("ce", 3, 2, 0.01, 0.01, 0.14833175), ("ce", 5, 2, 0.001, 0.001, 0.04275647), ("ce", 4, 2, 0.2, 0.2, math.log(4)),
    ("mse", 3, 2, 0.01, 0.01, 0.02768427), ("mse", 3, 4, 0.05, 0.05, 0.17)])
def test_reference_values_are_verified_with_every_minimiser_statement(loss, k, n, lw, lh, ref):
    rep = C.check_instance(T.UFMInstance(loss, k, n, k, lw, lh), method="closed-form")
    assert rep.predicted["value"] == pytest.approx(ref, abs=1e-8)
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    v = verdicts(rep)
    assert v["minimiser-unique"] is Verdict.VERIFIED
    geo = "zero" if rep.predicted["trivial"] else "simplex-etf"
    assert v[f"geometry-{geo}"] is Verdict.VERIFIED


# --- false statements: REFUTED (or INCONCLUSIVE), never VERIFIED ---------------------------------

@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("lam", [1e-2, 1e-7, 1e-12, 3.0])
@pytest.mark.parametrize("factor", [1 + 1e-6, 1 - 1e-6])
def test_value_off_by_1e6_relative_is_refuted_at_every_scale(loss, lam, factor):
    inst = T.UFMInstance(loss, 3, 2, 3, lam, lam)
    ref = T.optimum(inst).value
    rep = C.check_instance(inst, method="closed-form", predict=lambda i: factor * ref)
    assert verdicts(rep)["optimal-value"] is Verdict.REFUTED
    assert rep.verdict is Verdict.REFUTED


@pytest.mark.parametrize("method", ["closed-form", "factored", "auto"])
def test_wrong_geometry_for_balanced_ce_is_refuted(method):
    rep = C.check_instance(T.UFMInstance("ce", 4, 2, 4, 1e-3, 1e-3), method=method, starts=1,
                           expected_geometry="orthogonal-frame")
    assert verdicts(rep)["geometry-orthogonal-frame"] is Verdict.REFUTED


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("method", ["convex", "closed-form"])
def test_etf_just_above_the_threshold_is_not_verified(loss, method):
    # lam = 1.00001 / (k sqrt(n)): the unique minimiser is W = H = 0 (class means all zero)
    lam = 1.00001 / (3 * math.sqrt(2))
    rep = C.check_instance(T.UFMInstance(loss, 3, 2, 3, lam, lam), method=method, expected_geometry="simplex-etf")
    assert rep.verdict is not Verdict.VERIFIED
    assert verdicts(rep)["geometry-simplex-etf"] is Verdict.REFUTED  # witness: the proven unique minimiser is 0
    assert rep.geometry["phase"]["phase"] == "zero"


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_the_zero_minimiser_statement_above_the_threshold_is_verified(loss):
    lam = 1.00001 / (3 * math.sqrt(2))
    rep = C.check_instance(T.UFMInstance(loss, 3, 2, 3, lam, lam), method="convex")
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    assert verdicts(rep)["geometry-zero"] is Verdict.VERIFIED


# --- true boundary instances: never REFUTED ---------------------------------------------------

@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("factor", [1.0, 1 - 1e-12, 1 + 1e-12, 0.99999])
def test_at_and_just_below_the_threshold_is_never_refuted(loss, factor):
    k, n = 3, 4
    lam = factor / (k * math.sqrt(n))
    rep = C.check_instance(T.UFMInstance(loss, k, n, k, lam, lam), method="auto", starts=2)
    assert rep.verdict is not Verdict.REFUTED, rep.reason
    assert verdicts(rep)["optimal-value"] is Verdict.VERIFIED
    if factor == 0.99999:  # just below: a (small) simplex ETF, provably
        assert rep.verdict is Verdict.VERIFIED and verdicts(rep)["geometry-simplex-etf"] is Verdict.VERIFIED


def test_cli_exactly_at_the_mse_threshold_is_not_refuted():
    r = cli("solve", "ufm-mse", "-k", "3", "-n", "4", "-d", "3", "--lambda-w", "0.16666666666666666",
            "--lambda-h", "0.16666666666666666")
    assert r.returncode == 0 and "REFUTED" not in r.stdout and "verdict: INCONCLUSIVE" in r.stdout


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("k,n,d,lam", [(2, 1, 1, 1e-2), (2, 1, 2, 1e-7), (3, 1, 2, 1e-7), (5, 3, 4, 1e-7),
                                       (4, 2, 3, 1e-12)])
def test_small_sizes_and_tiny_lambda_are_verified(loss, k, n, d, lam):
    rep = C.check_instance(T.UFMInstance(loss, k, n, d, lam, lam), method="closed-form")
    assert rep.verdict is Verdict.VERIFIED, rep.reason


def test_tiny_lambda_through_the_solvers_is_never_refuted():
    for loss in ("ce", "mse"):
        rep = C.check_instance(T.UFMInstance(loss, 3, 2, 3, 1e-7, 1e-7), method="auto", starts=1)
        assert rep.verdict is not Verdict.REFUTED and verdicts(rep)["optimal-value"] is Verdict.VERIFIED


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_d_below_k_minus_1_is_not_applicable(loss):
    rep = C.check_instance(T.UFMInstance(loss, 5, 2, 3, 1e-2, 1e-2), method="factored", starts=1)
    assert rep.verdict is Verdict.NOT_APPLICABLE and "d >= k-1" in rep.reason
    assert all(c.verdict is Verdict.NOT_APPLICABLE for c in rep.claims)


lams = st.floats(-7.0, 2.0).map(lambda e: 10.0 ** e)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 12), n=st.integers(1, 6), extra=st.integers(0, 3),
       lw=lams, lh=lams, sign=st.sampled_from([1.0, -1.0]))
def test_property_true_statements_verified_false_ones_not(loss, k, n, extra, lw, lh, sign):
    inst = T.UFMInstance(loss, k, n, k - 1 + extra, lw, lh)
    s = math.sqrt(n * lw * lh)
    assume(abs(k * s - 1.0) > 1e-6)  # the threshold band is tested above
    rep = C.check_instance(inst, method="closed-form")
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    ref = T.optimum(inst).value
    off = C.check_instance(inst, method="closed-form", predict=lambda i: ref * (1 + sign * 1e-6))
    assert off.verdict is Verdict.REFUTED
    wrong = "zero" if not T.optimum(inst).trivial else "simplex-etf"
    bad = C.check_instance(inst, method="closed-form", expected_geometry=wrong)
    assert bad.verdict is Verdict.REFUTED


@settings(max_examples=6, deadline=None)
@given(loss=st.sampled_from(["ce", "mse"]), k=st.integers(2, 5), n=st.integers(1, 3), seed=st.integers(0, 10**6))
def test_property_solver_routes_never_refute_a_true_instance(loss, k, n, seed):
    inst = T.UFMInstance(loss, k, n, k, 2e-3, 5e-3)
    rep = C.check_instance(inst, method="factored", starts=1, seed=seed)
    assert rep.verdict is Verdict.VERIFIED, rep.reason


# --- the uniqueness certificate can fail -------------------------------------------------------

def test_uniqueness_certificate_rejects_a_candidate_off_the_face():
    inst = T.UFMInstance("ce", 4, 2, 4, 1e-3, 1e-3)
    Zc, b = T.optimal_class_logits(inst)
    ok = S.uniqueness_certificate(inst, Zc, b)
    assert ok["valid"] and ok["face_dimension"] == 3 and ok["delta"] > 0.99
    bad = S.uniqueness_certificate(inst, Zc + 0.3 * np.ones((4, 4)), b)  # not optimal: G is no subgradient
    assert not bad["valid"]
    wrong_formula = S.uniqueness_certificate(inst, Zc, b, direction=1.01 * S.closed_form_direction(inst))
    assert not wrong_formula["valid"] and not wrong_formula["conditions"]["gradient_formula_agrees"]


# --- the radius in the zero phase, against brute force -----------------------------------------

@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("factor", [1.001, 1.5, 4.0])
def test_zero_phase_radius_contains_every_epsilon_optimal_point(loss, factor):
    k, n = 3, 2
    lam = factor / (k * math.sqrt(n))
    inst = T.UFMInstance(loss, k, n, k, lam, lam)
    fstar = T.optimum(inst).value
    delta = 1.0 - S.zero_phase_ratio(inst)["rho0"]
    assert delta > 0
    rng = np.random.default_rng(7)
    b0 = np.zeros(k) if loss == "ce" else np.full(k, 1.0 / k)
    tight = 0.0
    for scale in (1e-6, 1e-4, 1e-2, 1e-1, 1.0):
        for _ in range(20):
            Z = scale * rng.standard_normal((k, inst.N))
            b = b0 + scale * rng.standard_normal(k)
            gap = S.convex_objective(inst, Z, b) - fstar
            assert gap >= -1e-12 * fstar
            r = S.zero_phase_radius(inst, max(gap, 0.0), delta)
            assert np.linalg.norm(Z) <= r * (1 + 1e-9) + 1e-15
            tight = max(tight, np.linalg.norm(Z) / r if r > 0 else 0.0)
    # and points found by a loosely converged solver
    for seed in range(3):
        sol = S.solve_factored(inst, starts=1, seed=seed, gtol=1e-4)
        Zp = sol.variables["W"] @ sol.variables["H"]
        r = S.zero_phase_radius(inst, max(sol.value - fstar, 0.0), delta)
        assert np.linalg.norm(Zp) <= r * (1 + 1e-9) + 1e-15
    assert tight > 1e-3  # the bound is not vacuous on these samples


# --- auxiliary routes never block, warnings never print ----------------------------------------

def test_convex_route_warnings_go_to_diagnostics_and_the_value_is_verified():
    r = cli("solve", "ufm-ce", "-k", "12", "-n", "2", "-d", "12", "--lambda-w", "1e-3", "--lambda-h", "1e-3")
    assert r.returncode == 0, r.stderr
    assert "verdict: VERIFIED" in r.stdout
    assert "Warning" not in r.stderr and r.stderr.strip() == ""


@pytest.mark.slow
def test_k1000_closed_form_verifies_value_and_every_minimiser_geometry():
    rep = C.check_instance(T.UFMInstance("ce", 1000, 5, 1024, 1e-5, 1e-5), method="closed-form")
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    v = verdicts(rep)
    assert v["geometry-simplex-etf"] is Verdict.VERIFIED and v["minimiser-unique"] is Verdict.VERIFIED
    assert rep.geometry["uniqueness"]["face_dimension"] == 999


# --- input range and budgets --------------------------------------------------------------------

@pytest.mark.parametrize("lw,lh", [(1e-300, 1e300), (1e-300, 1e-300), (1e-13, 1.0), (1.0, 1e13)])
def test_lambda_outside_the_float64_range_is_an_input_error(lw, lh):
    with pytest.raises(InputError, match=r"must be in \[1e-12, 1e\+12\]"):
        T.UFMInstance("mse", 3, 2, 3, lw, lh)


@pytest.mark.parametrize("args,needle", [
    (["solve", "ufm-mse", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-300", "--lambda-h", "1e300"],
     "lambda_w must be in [1e-12, 1e+12]"),
    (["solve", "ufm-ce", "-k", "4", "-n", "2", "-d", "4", "--lambda-w", "1e-300", "--lambda-h", "1e-300",
      "--method", "closed-form", "--json"], "lambda_w must be in [1e-12, 1e+12]"),
    (["solve", "ufm-ce", "-k", "100000", "-n", "100000", "-d", "100000", "--lambda-w", "1e-3", "--lambda-h", "1e-3"],
     "too large"),
    (["solve", "ufm-ce", "-k", "500", "-n", "500", "-d", "500", "--lambda-w", "1e-3", "--lambda-h", "1e-3",
      "--method", "convex"], "--method convex is limited to small instances"),
    (["solve", "ufm-ce", "-k", "200", "-n", "50", "-d", "200", "--lambda-w", "1e-3", "--lambda-h", "1e-3",
      "--starts", "1000", "--method", "factored"], "the factored solver needs estimated"),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "100000000", "--lambda-w", "1e-3", "--lambda-h", "1e-3",
      "--method", "factored"], "limits"),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-3", "--lambda-h", "1e-3",
      "--max-memory", "lots"], "expected a size like 4G"),
    (["solve", "ufm-ce", "-k", "30", "-n", "20", "-d", "30", "--lambda-w", "1e-3", "--lambda-h", "1e-3",
      "--method", "factored", "--max-memory", "1M"], "limits 0.001 GB"),
    (["solve", "ufm-ce", "-k", "3", "-n", "2", "-d", "3", "--lambda-w", "1e-3", "--lambda-h", "1e-3",
      "--seed", "-1"], "--seed must be"),
])
def test_bad_or_oversized_input_is_one_line_exit_2(args, needle):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout[-500:], r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_auto_skips_oversized_routes_and_says_so():
    rep = C.check_instance(T.UFMInstance("ce", 3, 2, 100_000_000, 1e-3, 1e-3), method="auto", starts=3)
    assert rep.verdict is Verdict.VERIFIED and "factored" not in rep.routes and "closed-form" in rep.routes
    assert any("factored route skipped" in d for d in rep.diagnostics)
    rep = C.check_instance(T.UFMInstance("ce", 3, 2, 3, 1e-3, 1e-3), method="auto", starts=100_000_000)
    assert "factored" not in rep.routes and any("factored route skipped" in d for d in rep.diagnostics)


def test_estimates_grow_with_the_sizes():
    small = T.UFMInstance("ce", 10, 5, 10, 1e-3, 1e-3)
    big = T.UFMInstance("ce", 100, 5, 100, 1e-3, 1e-3)
    for route in ("closed-form", "factored", "convex"):
        a, b = S.estimate(small, route), S.estimate(big, route)
        assert b["bytes"] > a["bytes"] > 0 and b["seconds"] > a["seconds"] > 0
    assert S.estimate(small, "factored", 10)["seconds"] > S.estimate(small, "factored", 1)["seconds"]


def test_factored_time_budget_stops_the_starts():
    sol = S.solve_factored(T.UFMInstance("ce", 30, 20, 30, 1e-4, 1e-4), starts=50, time_budget=0.05)
    assert sol.diagnostics["time_budget_reached"] and sol.diagnostics["starts_run"] < 50


# --- stable loss --------------------------------------------------------------------------------

def test_cross_entropy_is_accurate_at_tiny_loss():
    import mpmath

    U = np.array([[0.0, 40.0], [-40.0, 0.0], [-38.0, -1.0]])
    y = np.array([0, 1])
    per, G = S.ce_parts(U, y)
    mpmath.mp.dps = 50
    for i in range(2):
        ref = mpmath.log(sum(mpmath.e ** mpmath.mpf(u) for u in U[:, i])) - mpmath.mpf(U[y[i], i])
        assert per[i] == pytest.approx(float(ref), rel=1e-14)
        p_y = mpmath.e ** (mpmath.mpf(U[y[i], i])) / sum(mpmath.e ** mpmath.mpf(u) for u in U[:, i])
        assert G[y[i], i] == pytest.approx(float(p_y - 1), rel=1e-13)


@pytest.mark.parametrize("loss,k,n,d,lw,lh", [
    ("mse", 6, 5, 5, 1.1111964499410522e-11, 36204973.70960383),  # class means of norm ~1e-5: still an ETF
    ("ce", 2, 6, 2, 0.20412414502521412, 0.20412414502521412),  # rho0 = 1 + 1.0e-9: a tiny ETF, just outside the band
    ("ce", 5, 2, 4, 1e-12, 1e6),  # lam = 1e-3, features scaled by (lw/lh)^(1/4) ~ 3e-5
])
def test_small_class_means_are_not_called_zero(loss, k, n, d, lw, lh):
    # found by a random sweep: an absolute zero threshold on the Gram refuted true ETF statements
    rep = C.check_instance(T.UFMInstance(loss, k, n, d, lw, lh), method="closed-form")
    assert rep.verdict is Verdict.VERIFIED, rep.reason
    assert verdicts(rep)["geometry-simplex-etf"] is Verdict.VERIFIED


@pytest.mark.parametrize("loss,lw,lh", [("ce", 1.3e-8, 6.7e8), ("ce", 6.8, 2.5e-11), ("mse", 5.2e-10, 1.07e10)])
def test_factored_solver_certifies_extreme_weight_decay_ratios(loss, lw, lh):
    # the balanced change of variables W = a W', H = H'/a makes these well conditioned (without it: gap 1e-5)
    inst = T.UFMInstance(loss, 8, 3, 9, lw, lh)
    sol = S.solve_factored(inst, starts=1, seed=0)
    W, H, b = sol.variables["W"], sol.variables["H"], sol.variables["b"]
    assert sol.value == pytest.approx(S.objective(inst, W, H, b), rel=1e-15)  # evaluated on the original instance
    rep = C.check_instance(inst, method="factored", starts=1)
    assert verdicts(rep)["optimal-value"] is Verdict.VERIFIED, rep.reason


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_factored_route_alone_certifies_tiny_lambda(loss):
    # the stopping tolerance follows sqrt(lam): with the fixed 1e-9 the relative gap stalled at ~1e-5
    rep = C.check_instance(T.UFMInstance(loss, 6, 3, 6, 1e-7, 1e-7), method="factored", starts=1)
    assert verdicts(rep)["optimal-value"] is Verdict.VERIFIED, rep.reason


def test_closed_form_benchmark_quick_runs(tmp_path):
    import json
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "b.json"
    r = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "ufm_closed_form.py"), "--quick",
                        "--repeat", "1", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert {(x["loss"], x["k"]) for x in rows} == {("ce", 10), ("ce", 100), ("mse", 10), ("mse", 100)}
    assert all(x["verdict"] == "VERIFIED" and x["delta"] > 0.99 for x in rows)
