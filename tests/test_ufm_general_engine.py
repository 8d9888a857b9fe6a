"""The any-loss engine's one entry point, ``solvers.ufm_general.solve`` (docs/DEVELOPING.md, "Layers"): alone,
without the claims layer, it returns the point, its certificate, the geometry and the routes it tried; the claim
(``proofs_check.claims.ufm_general.check_general``) asks it once and only judges. Expected values come from
elsewhere: the classic closed form (theory/ufm.py), the simplex ETF's cosine -1/(K - 1), the sample-level
one-hot regression formula of the imbalanced MSE optimum."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from solvers import losses as L
from solvers import ufm_general as SG
from theory import ufm as T


def _ce(counts, d, lw=5e-3, lh=5e-3):
    return SG.classification(L.make_loss("ce", len(counts)), list(counts), d, lw, lh)


def test_balanced_ce_alone_gives_point_certificate_geometry_and_routes():
    K, n = 4, 3
    s = SG.solve(_ce([n] * K, K), starts=1)
    ref = T.optimum(T.UFMInstance("ce", K, n, K, 5e-3, 5e-3)).value  # the classic family's closed form
    c = s.certificate
    assert c.lower_bound <= c.upper and c.gap <= 1e-10 * abs(c.upper)
    assert c.lower_bound - 1e-12 <= ref <= c.upper + 1e-12
    assert s.point is not None and s.layout is not None and s.layout.m == 1  # the balanced classes: one group
    assert s.X.shape == (K, K) and s.b.shape == (K,) and s.tight and s.rank == K - 1
    # uniqueness at the closed form: strictly complementary certificate; the geometry is that of the minimiser
    assert s.uniqueness["route"] == "closed-form" and s.uniqueness["conditions"]["valid"]
    assert s.geometry_how is not None
    mc = np.asarray(s.cosines[0])
    off = mc[~np.eye(K, dtype=bool)]
    assert np.allclose(off, -1.0 / (K - 1), atol=1e-9)  # simplex ETF
    assert set(s.routes) == {"factored"} and "grouped" in s.routes["factored"]["method"]
    assert any(line.startswith("grouped") for line in s.plan)
    assert s.live["problem"] is s.problem and s.live["point"] is s.point


def test_imbalanced_mse_alone_matches_the_sample_level_closed_form():
    counts, lw, lh = (5, 2, 1), 5e-3, 5e-3
    p = SG.classification(L.make_loss("mse", 3), list(counts), 3, lw, lh)
    s = SG.solve(p, starts=1)
    # (1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0), s_j of the centred N x K one-hot matrix
    y = np.repeat(np.arange(3), counts)
    Y = np.eye(3)[y]
    N, lam = y.size, math.sqrt(lw * lh)
    sv = np.linalg.svd(Y - Y.mean(axis=0), compute_uv=False)
    ref = float(np.sum(np.minimum(sv, N * lam) ** 2) / (2 * N) + lam * np.sum(np.maximum(sv - N * lam, 0.0)))
    c = s.certificate
    assert abs(c.upper - ref) <= 1e-12 * ref and c.lower_bound <= ref * (1 + 1e-12)
    assert s.mse_closed_form is not None and s.point is None and any("mse-closed-form" in x for x in s.plan)
    # no exchangeable classes, no closed-form uniqueness: the geometry certificate decides
    assert s.uniqueness["route"] == "enclosure" and s.enclosure["ok"]
    assert 0.0 < s.enclosure["radius"] < s.enclosure["center_norm"]
    assert s.intervals["class_mean_cosines_halfwidth"] < 1e-4 and s.geometry_how is not None


def test_imbalanced_ce_alone_gives_minority_evidence_and_proven_intervals():
    s = SG.solve(_ce((6, 6, 2, 1), 4), starts=1)
    assert s.tight and s.uniqueness["route"] == "enclosure" and s.enclosure["rank_bound"] <= 4
    lo, hi = s.intervals["_intervals"]["mean_cos"]
    assert np.all(lo <= hi) and np.all(lo >= -1.0) and np.all(hi <= 1.0)
    m = s.minority
    assert m is not None and m["group"] == 0 and m["size"] == 2 and m["count"] == 6  # the two classes of 6 samples
    r = m["restricted"]
    # the collapsed (restricted) problem's optimum is >= the unrestricted one: its feasible value is above f*'s bound
    assert r.lower_bound <= r.upper and r.upper >= m["f_star_lower"]
    assert m["radius"]["radius"] is not None and m["radius"]["radius"] >= 0.0


def test_below_the_rank_alone_searches_dimension_d():
    s = SG.solve(_ce((6, 6, 2, 1), 1), starts=1)
    assert not s.tight and s.rank > 1
    rd = s.rank_d
    assert rd["route"] == "factored" and set(s.routes) == {"factored-relaxation", "factored-d"}
    # a feasible value in dimension 1 is >= the relaxation's proven lower bound
    assert rd["best"] >= s.certificate.lower_bound


def test_too_large_is_refused_before_any_solve():
    from theory._validate import InputError

    p = SG.classification(L.make_loss("ce", 1500), list(range(1, 1501)), 1500, 1e-3, 1e-3)
    with pytest.raises(InputError, match="too large"):
        SG.solve(p)


def test_the_engine_runs_without_the_claims_layer():
    code = ("import sys, json; from solvers import losses as L, ufm_general as SG; "
            "p = SG.classification(L.make_loss('ls', 3, smoothing=0.1), [4, 3, 2], 3, 5e-3, 5e-3); "
            "s = SG.solve(p, starts=1); "
            "print(json.dumps([any(m.startswith('proofs_check') for m in sys.modules), s.certificate.gap, "
            "s.uniqueness['route'], sorted(s.routes)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded, gap, route, routes = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded is False and 0.0 <= gap <= 1e-8 and route == "enclosure" and routes == ["factored"]


GUARDED = ("solve_grouped", "solve_factored", "certificate", "certificate_grouped", "clean_candidate", "clean_grouped",
           "geometry", "geometry_grouped", "minimiser_enclosure", "geometry_enclosure", "uniqueness_conditions",
           "structural_uniqueness", "minority_evidence", "mse_imbalanced_closed_form", "class_layout")


@pytest.mark.parametrize("counts,d", [((3, 3, 3, 3), 4), ((6, 6, 2, 1), 4), ((6, 6, 2, 1), 1)])
def test_check_general_asks_the_engine_once_and_only_judges(monkeypatch, counts, d):
    from proofs_check.claims.ufm_general import check_general

    state = {"calls": 0, "inside": False}
    real_solve = SG.solve

    def counting(*a, **k):
        state["calls"] += 1
        state["inside"] = True
        try:
            return real_solve(*a, **k)
        finally:
            state["inside"] = False

    monkeypatch.setattr(SG, "solve", counting)
    for name in GUARDED:
        def guard(*a, _real=getattr(SG, name), _name=name, **k):
            assert state["inside"], f"the claims layer called solvers.ufm_general.{_name} itself"
            return _real(*a, **k)

        monkeypatch.setattr(SG, name, guard)
    rep = check_general(_ce(counts, d), starts=1)
    assert state["calls"] == 1 and rep.claims


def test_a_false_value_through_check_general_is_refuted():
    from proofs_check.claims.ufm_general import check_general

    K, n = 4, 3
    ref = T.optimum(T.UFMInstance("ce", K, n, K, 5e-3, 5e-3)).value
    rep = check_general(_ce([n] * K, K), starts=1, claimed_value=ref * (1 + 1e-6))
    val = next(c for c in rep.claims if c.name == "optimal-value")
    assert val.verdict.value == "REFUTED", val.reason
    rep = check_general(_ce([n] * K, K), starts=1, claimed_value=ref)
    assert next(c for c in rep.claims if c.name == "optimal-value").verdict.value == "VERIFIED"


def test_false_geometry_through_check_general_is_refuted():
    from proofs_check.claims.ufm_general import check_general

    K = 4
    etf = (np.eye(K) * K - 1.0) / (K - 1)  # the balanced simplex ETF: false for imbalanced counts
    rep = check_general(_ce((6, 6, 2, 1), 4), starts=1, geometry_expected={"class_mean_cosines": etf.tolist()})
    cos = next(c for c in rep.claims if c.name == "class-mean-cosines")
    assert cos.verdict.value == "REFUTED", cos.reason


def _regression_problem(Y, d, lw, lh):
    m = Y.shape[1]
    return SG.GeneralUFM(L.SquaredError(Y.T, "squared-error (regression)"), m, np.ones(Y.shape[0], dtype=np.int64),
                         np.arange(Y.shape[0]), d, lw, lh, 0.0, "regression")


def test_regression_alone_matches_soft_thresholding_and_needs_its_targets():
    from theory._validate import InputError

    Y = np.random.default_rng(5).normal(size=(12, 3))
    lw, lh = 1e-2, 2e-2
    s = SG.solve(_regression_problem(Y, 3, lw, lh), targets=Y)
    N, lam = Y.shape[0], math.sqrt(lw * lh)
    sv = np.linalg.svd(Y - Y.mean(axis=0), compute_uv=False)
    ref = float(np.sum(np.minimum(sv, N * lam) ** 2) / (2 * N) + lam * np.sum(np.maximum(sv - N * lam, 0.0)))
    c = s.certificate
    assert c.lower_bound <= ref * (1 + 1e-12) and abs(c.upper - ref) <= 1e-12 * ref
    assert s.tight and s.uniqueness["route"] == "strict-convexity" and "factored" in s.routes
    assert len(s.geometry["classifier_norms"]) == 3
    low = SG.solve(_regression_problem(Y, 1, lw, lh), targets=Y)  # d below the rank 3: von Neumann's bound
    assert not low.tight and low.rank_d["route"] == "von-neumann" and low.rank_d["lower_d"] <= low.rank_d["best"]
    with pytest.raises(InputError, match="targets"):
        SG.solve(_regression_problem(Y, 3, lw, lh))


def test_value_only_evidence_certifies_the_closed_forms_point():
    from theory._validate import InputError

    K, n = 5, 2
    s = SG.solve(_ce([n] * K, K), evidence="value")
    ref = T.optimum(T.UFMInstance("ce", K, n, K, 5e-3, 5e-3)).value
    assert s.candidate == "closed form's point" and s.run is None and s.point is not None
    assert s.certificate.lower_bound - 1e-12 <= ref <= s.certificate.upper + 1e-12
    assert s.certificate.gap <= 1e-10 * ref and s.uniqueness is None  # no minimiser evidence in this mode
    with pytest.raises(InputError, match="evidence"):
        SG.solve(_ce([n] * K, K), evidence="everything")


@pytest.mark.parametrize("which", ["regression", "value"])
def test_regression_and_table_rows_ask_the_engine_once(monkeypatch, which):
    from proofs_check.claims.ufm_general import certify_value, check_regression

    state = {"calls": 0, "inside": False}
    real_solve = SG.solve

    def counting(*a, **k):
        state["calls"] += 1
        state["inside"] = True
        try:
            return real_solve(*a, **k)
        finally:
            state["inside"] = False

    monkeypatch.setattr(SG, "solve", counting)
    for name in GUARDED + ("regression_closed_form", "convex_value", "truncate", "estimate_value"):
        def guard(*a, _real=getattr(SG, name), _name=name, **k):
            assert state["inside"], f"the claims layer called solvers.ufm_general.{_name} itself"
            return _real(*a, **k)

        monkeypatch.setattr(SG, name, guard)
    if which == "regression":
        check_regression(np.random.default_rng(2).normal(size=(10, 3)), 3, 1e-2, 1e-2)
    else:
        certify_value(_ce((6, 6, 2, 1), 4))
    assert state["calls"] == 1
