"""The feature-collapse engine's one entry point, ``solvers.feature_collapse_engine.solve_instance``
(docs/DEVELOPING.md, "One entry point per engine"): alone, without the claims layer, it returns the point (the
certified predicted configuration, or the search's point), its certificate, the geometry evidence and the routes
it tried with why; ``proofs_check.claims.feature_collapse.check_instance`` asks it once and only states and
judges. Expected values come from elsewhere: the spec's quoted constants (objective 1.161977, lambda_crit
0.19245, the Zipf threshold 0.1732), log K for W = U = 0, theory/feature_collapse.py's predictions, the
equiangular cosine -1/(n_c - 1)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from proofs_check.claims import feature_collapse as FC
from proofs_check.core import Verdict
from solvers import feature_collapse_engine as FE
from theory import feature_collapse as T
from theory._validate import InputError
from theory.feature_collapse import FCInstance


def _brackets(s, ref, slack):
    """The proven bracket [lower bound, least feasible value] holds ``ref`` (to ``slack``) and is narrow."""
    c = s.certificate
    return (c["lower_bound"] <= c["upper"] and c["gap"] <= 1e-10 * abs(c["upper"])
            and c["lower_bound"] - slack <= ref <= c["upper"] + slack)


def _concept_cosines(inst, E):
    means = E.reshape(inst.n_c, inst.s_c, inst.d).mean(axis=1)
    nrm = np.linalg.norm(means, axis=1)
    cos = means @ means.T / np.outer(nrm, nrm)
    return cos[~np.eye(inst.n_c, dtype=bool)]


def test_type1_below_threshold_alone_gives_certified_point_bound_threshold_and_routes():
    inst = FCInstance(3, 2, 2, 4, 0.05)  # spec row: objective 1.161977, lambda_crit 0.19245
    s = FE.solve_instance(inst, n_starts=1, cvxpy="no")
    assert s.prediction.geometry == "type-I" and s.hypotheses_failed == []
    assert _brackets(s, 1.161977, slack=5e-7) and s.lower_bound == s.certificate["lower_bound"]
    assert "at the claimed configuration" in s.certificate["method"] and s.attained == s.certificate["upper"]
    assert abs(s.threshold["spectral_norm"] - 0.19245) <= 5e-6 and s.threshold["roundoff"] < 1e-12
    # routes: the search ran (cvxpy not, and the plan says why), the configuration's certificates always run
    assert list(s.routes) == ["lbfgs", "closed-form"] and s.lbfgs is not None
    assert s.plan[0].startswith("lbfgs: auxiliary") and s.plan[1] == "cvxpy: not run (not asked for: cvxpy = 'no')"
    assert "uniqueness_certificate" in s.routes["closed-form"] and s.routes["lbfgs"]["certificate"]["lower_bound"]
    # the point: the certified unique minimiser is the type-I configuration (equiangular concept means)
    assert s.certified_unique and s.uniqueness["unique"] is True
    W, U, E = s.point
    assert s.point is s.configuration and W.shape == (inst.n_w, inst.d) and U.shape == (inst.K * inst.L, inst.d)
    assert np.allclose(_concept_cosines(inst, E), -1.0 / (inst.n_c - 1), atol=1e-12)
    assert abs(s.configuration_value - T.type1_prediction(inst).objective) <= 1e-12
    assert s.geometry["classification"] == "simplex-etf" and "certified unique" in s.geometry["source"]
    m = s.configuration_geometry["measured_at_claimed_configuration"]
    assert m["within_concept_deviation"] <= 1e-12 and s.configuration_geometry["max_abs_U"] > 0
    assert set(s.lbfgs_distance) == {"lbfgs_Z_distance", "lbfgs_Z_rel_distance"}


def test_above_threshold_the_zero_point_is_certified_at_log_k():
    inst = FCInstance(3, 2, 2, 4, 0.3)  # lambda > lambda_crit = 0.19245: W = U = 0, CE = log K
    s = FE.solve_instance(inst, n_starts=1, cvxpy="no")
    assert s.prediction.geometry == "trivial" and _brackets(s, math.log(inst.K), slack=1e-12)
    assert s.threshold["spectral_norm"] < inst.lam and s.certified_unique
    W, U, _ = s.point
    assert not W.any() and not U.any() and s.geometry["classification"] == "zero"
    assert s.configuration_geometry["max_abs_U"] == 0.0 == s.configuration_geometry["max_abs_W"]


def test_layernorm_and_zipf_points_match_the_theory_predictions():
    ln = FCInstance(3, 2, 2, 3, 0.05, layernorm=True)
    s = FE.solve_instance(ln, n_starts=1, cvxpy="no")
    assert s.threshold is None and s.prediction.geometry == "type-II" and s.certified_unique
    assert _brackets(s, T.type2_prediction(ln).objective, slack=1e-12) and s.certificate["method"].startswith("sdp-dual")
    zipf = FCInstance(3, 2, 3, 4, 0.05, freqs=T.zipf_freqs(3))
    z = FE.solve_instance(zipf, n_starts=1, cvxpy="no")
    assert z.prediction.geometry == "type-III" and z.certified_unique
    assert _brackets(z, T.type3_prediction(zipf).objective, slack=1e-12)
    assert abs(z.threshold["spectral_norm"] - 0.1732) <= 5e-5  # the spec's quoted threshold


def test_failed_hypothesis_gives_the_search_certificate_and_no_configuration():
    inst = FCInstance(3, 2, 2, 1, 0.05)  # d = 1 < n_c - 1
    s = FE.solve_instance(inst, n_starts=1, cvxpy="no")
    assert s.hypotheses_failed and s.configuration is None and s.uniqueness is None
    assert s.certificate["method"] == "nuclear-kkt" and "closed-form" not in s.routes
    assert "not certified" in s.geometry["source"] and s.point is not None and not s.certified_unique


def test_without_search_the_configuration_alone_certifies_the_value():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    s = FE.solve_instance(inst, solve=False)
    assert s.lbfgs is None and list(s.routes) == ["closed-form"] and s.plan == ["lbfgs: not run (solve = False)"]
    assert _brackets(s, 1.161977, slack=5e-7) and s.certificate["upper_from"] == "claimed configuration"
    assert s.solution_report() is None and s.lbfgs_distance == {}


def test_a_prediction_without_constants_has_no_configuration_and_says_why():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    s = FE.solve_instance(inst, predict=lambda i: dataclasses.replace(T.predict(i), b=None), solve=False)
    assert s.configuration is None and "no constant b" in s.why_no_configuration
    assert s.certificate["lower_bound"] is None and any("no claimed configuration" in d for d in s.diagnostics)


def test_too_many_starts_is_refused_before_any_work():
    with pytest.raises(InputError):
        FE.solve_instance(FCInstance(3, 2, 2, 4, 0.05), n_starts=10 ** 6)


def test_check_instance_asks_the_engine_exactly_once(monkeypatch):
    calls = []
    real = FE.solve_instance

    def counting(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(FE, "solve_instance", counting)
    rep = FC.check_instance(FCInstance(3, 2, 2, 4, 0.05), n_starts=1, cvxpy="no")
    assert len(calls) == 1
    assert {c.name: c.verdict for c in rep.claims} == {
        "optimal-value": Verdict.VERIFIED, "predicted-value-identity": Verdict.VERIFIED,
        "constants-identity": Verdict.VERIFIED, "threshold": Verdict.VERIFIED, "minimiser-type-i": Verdict.VERIFIED}


def test_false_statements_through_the_engine_are_refuted_with_a_witness():
    inst = FCInstance(3, 2, 2, 4, 0.05)
    off = FC.check_instance(inst, n_starts=1, cvxpy="no",
                            predict=lambda i: dataclasses.replace(T.predict(i), objective=1.01 * T.predict(i).objective))
    v = {c.name: c.verdict for c in off.claims}
    assert v["optimal-value"] is Verdict.REFUTED and v["predicted-value-identity"] is Verdict.REFUTED
    # "the minimiser is W = U = 0" below lambda_crit: the search's point is a feasible witness below log K
    zero = FC.check_instance(inst, n_starts=1, cvxpy="no",
                             predict=lambda i: dataclasses.replace(T.predict(i), geometry="trivial", objective=math.log(i.K),
                                                                 a=0.0, b=0.0, t=0.0))
    chk = next(c for c in zero.claims if c.name == "minimiser-zero")
    assert chk.verdict is Verdict.REFUTED and chk.evidence["witness_gap"] > 1.0


def test_route_plan_says_why_cvxpy_runs_or_not():
    small, big = FCInstance(3, 2, 2, 4, 0.05), FCInstance(3, 3, 3, 4, 0.05)  # PSD block K L + n_w: 24 and 90 (limit 60)
    plan: list = []
    assert FE.plan_routes(small, solve=True, cvxpy="auto", plan=plan) == {"lbfgs": True, "cvxpy": True}
    assert plan[1].startswith("cvxpy: auto")
    plan = []
    assert FE.plan_routes(big, solve=True, cvxpy="auto", plan=plan) == {"lbfgs": True, "cvxpy": False}
    assert plan[1].startswith("cvxpy: not run (auto") and "K L + n_w > 60" in plan[1]
    assert FE.plan_routes(big, solve=True, cvxpy="yes")["cvxpy"] is True
    assert FE.plan_routes(small, solve=False, cvxpy="yes") == {"lbfgs": False, "cvxpy": False}
