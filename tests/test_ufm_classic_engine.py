"""The classic UFM engine's one entry point, ``solvers.ufm_classic.solve_instance`` (docs/DEVELOPING.md, "One
entry point per engine"): alone, without the claims layer, it returns the point (W, H, b), its certificate, the
geometry evidence and the routes it tried with why; ``proofs_check.claims.ufm.check_instance`` asks it once and
only states and judges. Expected values come from elsewhere: the closed form of theory/ufm.py, values computed
independently in tests/test_ufm.py, the simplex ETF's cosine -1/(k - 1), the phase ratio 1/(k s) and the zero
phase's value log k."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from solvers import ufm as S
from solvers import ufm_classic as CS
from theory import ufm as T
from theory._validate import InputError


def _gap_ok(cert, ref, slack=1e-12):
    """A proven bracket [lower, upper] of relative width <= 1e-10 that holds ``ref`` (to ``slack``)."""
    return cert.lower_bound <= cert.upper and cert.gap <= 1e-10 * abs(cert.upper) \
        and cert.lower_bound - slack <= ref <= cert.upper + slack


def test_balanced_ce_alone_gives_point_certificate_geometry_and_routes():
    k, n, lw, lh = 4, 3, 5e-3, 5e-3
    inst = T.UFMInstance("ce", k, n, k, lw, lh)
    s = CS.solve_instance(inst, starts=1)
    ref = T.optimum(inst).value
    assert _gap_ok(s.certificate, ref) and "at the closed form" in s.certificate.method
    assert abs(s.attained - ref) <= 1e-12 * ref and s.lower_bound == s.certificate.lower_bound
    # routes: the small instance runs every route, and the plan says why each ran
    assert s.routes_run == ["closed-form", "convex", "factored"] and set(s.routes) == set(s.routes_run)
    assert set(s.feasible) == set(s.routes_run) and len(s.plan) == 3 and s.plan[2].startswith("factored: auto")
    assert len(s.certificates) == 3 and all(v >= s.lower_bound - 1e-9 * ref for v in s.feasible.values())
    # the point: collapsed, simplex-ETF class means, self-dual (mu_c = sqrt(lw/(n lh)) w_c), constant bias
    W, H, b = s.point
    assert W.shape == (k, k - 1) and H.shape == (k - 1, k * n) and b.shape == (k,)
    mu = H[:, ::n]
    cos = (mu.T @ mu) / np.outer(np.linalg.norm(mu, axis=0), np.linalg.norm(mu, axis=0))
    assert np.allclose(cos[~np.eye(k, dtype=bool)], -1.0 / (k - 1), atol=1e-12)
    assert np.allclose(H, np.repeat(mu, n, axis=1), atol=0)
    assert np.allclose(mu, math.sqrt(lw / (n * lh)) * W.T, atol=1e-12)
    ev = s.minimiser
    assert ev["classification"].classification == "simplex-etf" and ev["self_duality_error"] < 1e-12
    assert ev["bias"]["bias_spread"] <= 1e-14 and ev["bias"]["stationarity_residual"] <= 1e-14
    # phase and uniqueness: rho0 = 1/(k s) from the closed form, the uniqueness certificate valid
    rho0 = s.closed_form["phase"]["rho0"]
    assert s.phase == "collapse" and rho0 == pytest.approx(1.0 / (k * math.sqrt(n * lw * lh)), rel=1e-12)
    assert s.closed_form["uniq"]["valid"] and s.geometry["uniqueness"] is s.closed_form["uniq"]
    assert s.geometry["classification"] == "simplex-etf" and s.geometry["phase"]["phase"] == "collapse"
    assert [p["route"] for p in s.geometry["solver_points"]] == ["convex", "factored"]
    assert s.live == {"instance": inst}


def test_mse_at_d_equal_k_minus_1_matches_the_independent_value_and_bias_one_over_k():
    inst = T.UFMInstance("mse", 3, 2, 2, 0.01, 0.01)
    s = CS.solve_instance(inst, method="closed-form")
    assert _gap_ok(s.certificate, 0.02768427, slack=1e-8) and abs(s.attained - 0.02768427) <= 1e-8  # test_ufm.py
    assert s.routes_run == ["closed-form"] and s.convex is None and s.factored is None
    assert s.minimiser["bias"]["max_abs_b_minus_1_over_k"] <= 1e-14 and "self_duality_error" not in s.minimiser
    W, H, b = s.point
    assert W.shape == (3, 2) and H.shape == (2, 6) and np.allclose(b, 1.0 / 3, atol=1e-14)


def test_zero_phase_alone_gives_log_k_and_a_proven_radius_for_the_solver_point():
    k, n = 3, 2
    inst = T.UFMInstance("ce", k, n, k, 0.5, 0.5)  # s = sqrt(n lw lh) = 0.71 > 1/k
    s = CS.solve_instance(inst, method="factored", starts=1)
    assert s.phase == "zero" and s.closed_form["phase"]["rho0"] < 1.0
    assert _gap_ok(s.certificate, math.log(k)) and "bound only" in s.closed_form["cert"].method
    assert s.routes_run == ["factored"] and s.minimiser["classification"].classification == "zero"
    (pt,) = s.geometry["solver_points"]
    assert pt["route"] == "factored" and pt["radius"] is not None and pt["norm_Z"] <= pt["radius"] * (1 + 1e-9)
    assert "radius_proof" in pt and "statement_zero" not in pt  # the statement is the claim's
    assert any("within the proven radius" in d for d in s.diagnostics)


def test_at_the_phase_threshold_the_exact_rationals_decide_zero():
    s = CS.solve_instance(T.UFMInstance("ce", 4, 1, 4, 0.25, 0.25), method="closed-form")  # s = 1/k exactly
    # float64 puts rho0 in the band; exact rationals give rho0 = 1: Z = 0 is the unique minimiser
    assert s.geometry["phase"]["exact"]["at_threshold"] is True
    assert s.phase == "zero" and s.minimiser["classification"].classification == "zero"
    assert _gap_ok(s.certificate, math.log(4))


def test_inside_the_band_on_the_collapse_side_the_phase_stays_threshold():
    lam = float(np.nextafter(0.25, 0.0))  # exact rho0 > 1 by one ulp: a vanishing ETF, float64 cannot tell
    s = CS.solve_instance(T.UFMInstance("ce", 4, 1, 4, 0.25, lam), method="closed-form")
    assert s.geometry["phase"]["exact"]["zero_minimiser"] is False
    assert s.phase == "threshold" and "classification" not in s.minimiser


def test_below_k_minus_1_no_closed_form_and_the_factored_point_decides_nothing():
    inst = T.UFMInstance("ce", 5, 2, 3, 5e-3, 5e-3)
    s = CS.solve_instance(inst, method="factored", starts=1)
    assert s.hypotheses_failed and s.closed_form is None and s.certificate is None and s.minimiser is None
    assert s.plan[0].startswith("closed-form: not run") and s.routes_run == ["factored"]
    # the rank-3 problem's value is >= the relaxation's (d >= k - 1) optimum
    assert s.attained >= T.optimum(T.UFMInstance("ce", 5, 2, 5, 5e-3, 5e-3)).value
    assert s.geometry["source"].startswith("factored point") and s.point[1].shape == (3, 10)


def test_value_only_evidence_certifies_the_closed_form_without_geometry():
    inst = T.UFMInstance("ce", 40, 5, 40, 1e-3, 1e-3)
    s = CS.solve_instance(inst, method="closed-form", evidence="value")
    assert _gap_ok(s.certificate, T.optimum(inst).value) and s.routes_run == ["closed-form"]
    assert s.minimiser is None and s.closed_form["uniq"] is None and s.geometry == {} and s.point is None
    with pytest.raises(InputError, match="evidence"):
        CS.solve_instance(inst, evidence="everything")


def test_routes_are_refused_or_skipped_with_why():
    big = T.UFMInstance("ce", 80, 50, 80, 1e-3, 1e-3)
    with pytest.raises(InputError, match="--method convex is limited"):
        CS.solve_instance(big, method="convex")
    routes, diags = CS.plan_routes(big, "auto", 1, 2.5e9)
    assert "convex" not in routes and diags[0].startswith("convex route skipped (estimated")
    with pytest.raises(InputError, match="method must be one of"):
        CS.solve_instance(big, method="nope")
    with pytest.raises(InputError, match="max_memory"):
        CS.solve_instance(big, max_memory=-1.0)


def test_the_engine_runs_without_the_claims_layer():
    code = ("import sys, json; from solvers import ufm_classic as CS; from theory import ufm as T; "
            "s = CS.solve_instance(T.UFMInstance('ce', 3, 2, 3, 0.01, 0.01), method='closed-form'); "
            "print(json.dumps([any(m.startswith('proofs_check') for m in sys.modules), s.attained, s.phase]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded, value, phase = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded is False and abs(value - 0.14833175) <= 1e-8 and phase == "collapse"  # tests/test_ufm.py


GUARDED_S = ("closed_form_certificate", "zero_phase_ratio", "uniqueness_certificate", "factor_classwise",
             "solve_factored", "solve_convex", "certificate", "certificate_classwise", "class_gradient",
             "collapsed_objective", "estimate", "zero_phase_radius")
GUARDED_CS = ("plan_routes", "memory_limit", "point_geometry", "classify_scale_free")


@pytest.mark.parametrize("loss,k,n,d,lw,lh,method", [("ce", 4, 3, 4, 5e-3, 5e-3, "auto"),
                                                     ("mse", 3, 2, 3, 0.5, 0.5, "factored"),
                                                     ("ce", 5, 2, 3, 5e-3, 5e-3, "factored")])
def test_check_instance_asks_the_engine_once_and_only_judges(monkeypatch, loss, k, n, d, lw, lh, method):
    from proofs_check.claims import ufm as C

    state = {"calls": 0, "inside": False}
    real = CS.solve_instance

    def counting(*a, **kw):
        state["calls"] += 1
        state["inside"] = True
        try:
            return real(*a, **kw)
        finally:
            state["inside"] = False

    monkeypatch.setattr(CS, "solve_instance", counting)
    for mod, names in ((S, GUARDED_S), (CS, GUARDED_CS)):
        for name in names:
            def guard(*a, _real=getattr(mod, name), _name=name, **kw):
                assert state["inside"], f"the claims layer called {_name} itself"
                return _real(*a, **kw)

            monkeypatch.setattr(mod, name, guard)
    rep = C.check_instance(T.UFMInstance(loss, k, n, d, lw, lh), method=method, starts=1)
    assert state["calls"] == 1 and rep.claims


def test_false_statements_through_check_instance_are_refuted():
    from proofs_check.claims import ufm as C

    inst = T.UFMInstance("ce", 4, 3, 4, 5e-3, 5e-3)
    ref = T.optimum(inst).value
    verdicts = lambda rep: {c.name: c.verdict.value for c in rep.claims}  # noqa: E731
    assert verdicts(C.check_instance(inst, method="closed-form"))["optimal-value"] == "VERIFIED"
    rep = C.check_instance(inst, method="closed-form", predict=lambda i: ref * (1 + 1e-6))
    assert verdicts(rep)["optimal-value"] == "REFUTED"
    rep = C.check_instance(inst, method="closed-form", expected_geometry="orthogonal-frame")
    assert verdicts(rep)["geometry-orthogonal-frame"] == "REFUTED"


def test_a_false_phase_threshold_is_refuted_with_the_engines_witness():
    from proofs_check.claims import ufm as C
    from proofs_check.core import RunContext

    checks = list(C.trivial_phase_claim(threshold=lambda k: 1.2 / k).check(RunContext()))
    assert checks and all(c.verdict.value == "REFUTED" for c in checks if c.name.startswith("k="))
    w = checks[0].evidence["witness"]
    assert w["rho0"] <= 1.0 and w["zero_value"] == pytest.approx(math.log(2), rel=1e-15)  # Z = 0 at k = 2: log 2
