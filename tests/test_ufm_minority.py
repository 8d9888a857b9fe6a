"""The minority-collapse threshold of the regularised imbalanced UFM (docs/ufm_general.md, "Minority collapse
threshold"; derived here): theta_a = w_a (q_true - q_other) sqrt(n_a) / (N lam); collapse (identical classifiers
and class means on the smallest-count group) iff theta_a < 1. Checked against the restricted (collapsed)
problem solved and certified independently of the formula; false thresholds are never VERIFIED."""

from __future__ import annotations

import math

import pytest

from proofs_check.claims.ufm import check_general
from solvers import losses as L
from solvers import ufm_general as SG
from theory import ufm as T

COUNTS = [40] * 5 + [4] * 5  # N = 220, minority n = 4 (sqrt 2)
N = sum(COUNTS)


def _claim(loss, lam, threshold=1.0):
    p = SG.classification(loss, COUNTS, 10, lam, lam)
    rep = check_general(p, starts=1, minority_threshold=threshold).to_dict()
    return next(c for c in rep["claims"] if c["id"] == "minority-collapse-threshold"), rep


def test_theta_formula():
    assert math.isclose(T.minority_collapse_ratio(4, 220, 1e-2, 1e-2), 2.0 / 2.2, rel_tol=1e-15)
    assert math.isclose(T.minority_collapse_ratio(4, 220, 1e-2, 1e-2, weight=3.0, target_gap=0.5), 3.0 / 2.2,
                        rel_tol=1e-15)


@pytest.mark.parametrize("lam,collapse", [(1e-2, True), (8e-3, False), (2e-2, True), (5e-3, False)])
def test_ce_threshold_both_sides_verified(lam, collapse):
    theta = math.sqrt(4) / (N * lam)  # 0.909, 1.136, 0.455, 1.818
    assert (theta < 1) == collapse
    c, rep = _claim(L.make_loss("ce", 10), lam)
    assert c["verdict"] == "VERIFIED", c["reason"]
    assert c["evidence"]["predicted"] == ("collapse" if collapse else "no collapse")
    if not collapse:
        assert c["evidence"]["excess_lower"] > c["evidence"]["tolerance"]
    cos = rep["geometry"]["minority"]["minority_classifier_cosine"]
    if collapse and cos is not None:  # nonzero minority classifiers: identical within round-off at the candidate
        assert cos > 1 - 1e-5


def test_false_threshold_predicting_collapse_is_refuted():
    # theta = 1.136: the truth is "no collapse"; a threshold of 2 predicts collapse
    c, _ = _claim(L.make_loss("ce", 10), 8e-3, threshold=2.0)
    assert c["verdict"] == "REFUTED", c["reason"]


@pytest.mark.parametrize("threshold", [0.5, 0.9])
def test_false_threshold_predicting_no_collapse_is_never_verified(threshold):
    # theta = 0.909 < 1: the truth is collapse; thresholds below theta predict no collapse
    c, _ = _claim(L.make_loss("ce", 10), 1e-2, threshold=threshold)
    assert c["verdict"] != "VERIFIED", c["reason"]


@pytest.mark.parametrize("lam,collapse", [(5.5e-3, True), (4e-3, False)])
def test_label_smoothing_uses_the_target_gap(lam, collapse):
    # eps = 0.5, torch convention: q_true - q_other = 0.5, so theta = 0.5 sqrt(4) / (N lam): 0.826, 1.136
    # (the CE formula without the gap would give 1.65 and 2.27: "no collapse" in both cases)
    c, _ = _claim(L.make_loss("ls", 10, smoothing=0.5), lam)
    assert c["verdict"] == "VERIFIED", c["reason"]
    assert c["evidence"]["predicted"] == ("collapse" if collapse else "no collapse")


@pytest.mark.parametrize("lam,collapse", [(1e-2, True), (8e-3, False)])
def test_mse_threshold(lam, collapse):
    c, _ = _claim(L.make_loss("mse", 10), lam)
    assert c["verdict"] == "VERIFIED", c["reason"]
    assert c["evidence"]["predicted"] == ("collapse" if collapse else "no collapse")


# ---------------------------------------------------------------------------------------------------
# The collapse side is proven by a radius (dual margin), never by a value: false thresholds near the truth
# ---------------------------------------------------------------------------------------------------

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402

from proofs_check.claims.ufm import minority_collapse_check  # noqa: E402


def _loss(kind):
    # label smoothing eps = 0.1 (torch convention): target gap 0.9
    return (L.make_loss("ce", 10), 1.0) if kind == "ce" else (L.make_loss("ls", 10, smoothing=0.1), 0.9)


def _certified(kind, theta):
    loss, gap = _loss(kind)
    lam = gap * math.sqrt(4) / (N * theta)
    p = SG.classification(loss, COUNTS, 10, lam, lam)
    assert math.isclose(T.minority_collapse_ratio(4, N, lam, lam, target_gap=gap), theta, rel_tol=1e-12)
    lay = SG.class_layout(p)
    sol = SG.solve_grouped(p, lay, starts=1, seed=0)
    return p, lay, SG.certificate_grouped(p, SG.clean_grouped(p, sol.variables["point"], lay), lay)


def test_reported_bug_false_collapse_threshold_not_verified():
    # the reported instance: theta = 1.0001 (the truth: no collapse), a claimed threshold 1.05 predicts collapse;
    # a collapsed point attains the optimum within the value tolerance, which used to be VERIFIED
    lam = 2 / (220 * 1.0001)
    c, _ = _claim(L.make_loss("ce", 10), lam, threshold=1.05)
    assert c["evidence"]["predicted"] == "collapse"
    assert c["verdict"] != "VERIFIED", c["reason"]
    assert c["evidence"]["excess_upper"] <= c["evidence"]["value_tolerance"]  # the value argument would have passed


@pytest.mark.parametrize("kind", ["ce", "ls"])
@pytest.mark.parametrize("theta", [1.0001, 1.001, 0.999, 0.9999])
def test_false_thresholds_near_the_truth_are_never_verified(kind, theta):
    p, lay, cert = _certified(kind, theta)
    for threshold in (1.05, 0.95):
        c = minority_collapse_check(p, lay, cert, threshold=threshold)
        predicted_collapse = theta <= threshold
        assert c.evidence["predicted"] == ("collapse" if predicted_collapse else "no collapse")
        true = predicted_collapse == (theta < 1)
        if not true:
            assert c.verdict.value != "VERIFIED", (theta, threshold, c.reason)
        else:
            assert c.verdict.value != "REFUTED", (theta, threshold, c.reason)
        if theta > 1:  # the margin vanishes above the threshold: no radius below the tolerance
            r = c.evidence["radius"]
            assert r is None or r > c.evidence["deviation_tolerance"]


@pytest.mark.parametrize("kind", ["ce", "ls"])
def test_margin_tends_to_zero_at_the_threshold(kind):
    # delta / lam = 1 - theta for theta < 1 (at the collapsed optimum |y_a| = theta lam), ~0 above
    for theta in (0.95, 0.999, 0.9999, 1.001):
        p, lay, cert = _certified(kind, theta)
        c = minority_collapse_check(p, lay, cert, threshold=1.0)
        ratio = c.evidence["margin_delta"] / p.lam
        assert math.isclose(ratio, max(1.0 - theta, 0.0), abs_tol=1e-8), (theta, ratio)


@pytest.mark.parametrize("theta", [0.9, 0.5])
def test_true_collapse_is_verified_with_a_radius(theta):
    lam = math.sqrt(4) / (N * theta)
    c, _ = _claim(L.make_loss("ce", 10), lam, threshold=1.0)
    assert c["verdict"] == "VERIFIED", c["reason"]
    ev = c["evidence"]
    assert ev["predicted"] == "collapse"
    assert ev["radius"] is not None and 0 <= ev["radius"] <= ev["deviation_tolerance"]
    assert ev["radius_proof"] and "margin" in ev["radius_proof"]
    # the tolerance is relative (1e-8 of the collapsed candidate's nuclear norm), not a value tolerance
    assert ev["deviation_tolerance"] <= 1e-7 * ev["deviation_scale"]


def _full_dual(p, X, b):
    """The K x K dual point Y = Gc D^{1/2} / N of the ungrouped certificate at (X, b) (gradients from the K x K
    loss, not the slot forms), its spectral norm and the full value P(X, b)."""
    sq = np.sqrt(p.counts.astype(float))
    _, grads = p.loss.value_grad(X / sq + b[:, None], p.y)
    Gc = grads - (grads @ (p.counts / p.N))[:, None]
    Y = Gc * sq / p.N
    return Y, float(np.linalg.svd(Y, compute_uv=False)[0])


@pytest.mark.parametrize("kind,theta", [("ce", 0.9), ("ce", 0.6), ("ls", 0.8)])
def test_margin_inequality_at_non_invariant_points(kind, theta):
    """The lemma behind the radius: F(X, b) - D(y) >= delta dev_a(X) for EVERY X (not only invariant ones),
    evaluated with the K x K objective (SG.convex_value) at random and adversarial points; and it is tight along
    the P_a block (so a wrong constant or a wrong y_a would fail)."""
    loss, gap = _loss(kind)
    lam = gap * math.sqrt(4) / (N * theta)
    p = SG.classification(loss, COUNTS, 10, lam, lam)
    lay = SG.class_layout(p)
    a = 1
    assert lay.sizes[a] == 5 and p.counts[lay.reps[a]] == 4
    pinned = np.zeros(lay.m, bool)
    pinned[a] = True
    pt = SG.solve_grouped(p, lay, starts=1, seed=0, pinned=pinned).variables["point"]
    cm = SG.collapse_margin(p, pt, lay, a)
    delta, D = cm["delta"], cm["lower_bound"]
    assert math.isclose(delta / lam, 1 - theta, abs_tol=1e-8)
    Xs, bs = SG.grouped_full(p, pt, lay)
    assert SG.minority_deviation(Xs, lay.labels, a) <= 1e-12 * np.abs(Xs).sum()  # collapsed candidate
    Y, ynorm = _full_dual(p, Xs, bs)
    assert ynorm <= lam * (1 + 1e-9)  # the dual point is feasible (t = 1)
    idx = np.flatnonzero(lay.labels == a)
    Pa = np.zeros((p.K, p.K))
    Pa[np.ix_(idx, idx)] = np.eye(idx.size) - 1.0 / idx.size
    y_a = float(np.trace(Pa @ Y @ Pa)) / (idx.size - 1)  # the eigenvalue of Y on P_a, from the K x K gradients
    assert np.linalg.norm(Pa @ Y - y_a * Pa) <= 1e-12 * np.linalg.norm(Y)
    assert math.isclose(lam - abs(y_a), delta, rel_tol=1e-8)
    U, s, Vt = np.linalg.svd(-Y)
    u, v = U[:, 0], Vt[0]
    w = Pa @ np.random.default_rng(1).standard_normal(p.K)
    w /= np.linalg.norm(w)
    e = -np.sign(y_a) * w  # w^T Y e = -|y_a|
    rng = np.random.default_rng(0)
    scale = float(np.linalg.norm(Xs))
    checked = 0
    for trial in range(60):
        if trial < 20:  # random points around the candidate, all directions
            Xt = Xs + scale * 10.0 ** rng.uniform(-4, 0) * rng.standard_normal((p.K, p.K))
        elif trial < 45:  # rank-one mixing of the top singular pair of -Y with the P_a directions
            phi, psi = rng.uniform(0, math.pi / 2, 2)
            x = math.cos(phi) * u + math.sin(phi) * w
            y = math.cos(psi) * v + math.sin(psi) * e
            Xt = Xs + scale * 10.0 ** rng.uniform(-3, 0) * np.outer(x, y)
        else:  # pure P_a block (the direction where the bound is tight)
            Xt = Xs + scale * 10.0 ** rng.uniform(-5, -3) * np.outer(w, e)
        bt = bs + (0.0 if trial % 2 or trial >= 45 else 1e-3 * rng.standard_normal(p.K))
        F = SG.convex_value(p, Xt, bt)
        dev = SG.minority_deviation(Xt, lay.labels, a)
        assert dev >= 0
        slack = 1e-12 * (abs(F) + abs(D)) + 1e-9 * delta * dev
        assert F - D >= delta * dev - slack, (trial, F - D, delta * dev)
        checked += 1
        if trial >= 45:  # tight: F - D = gap + delta dev + O(s^2)
            assert F - D <= 1.05 * delta * dev + (cm["upper"] - D), (trial, F - D, delta * dev)
    assert checked == 60


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(hst.integers(2, 4), hst.integers(15, 60), hst.integers(2, 4), hst.integers(1, 9),
       hst.floats(0.3, 1.7), hst.floats(0.6, 1.4))
def test_random_instances_verdicts_agree_with_the_theorem(m1, n1, m2, n2, theta, threshold):
    """Random counts and lambda: a VERIFIED collapse carries a proven radius <= the deviation tolerance, and no
    verdict contradicts the derived theorem (collapse iff theta < 1)."""
    if abs(theta - 1) < 1e-3 or abs(theta - threshold) < 1e-9:
        return
    counts = [n1] * m1 + [n2] * m2
    n_tot = sum(counts)
    lam = math.sqrt(n2) / (n_tot * theta)
    p = SG.classification(L.make_loss("ce", len(counts)), counts, len(counts), lam, lam)
    rep = check_general(p, starts=1, minority_threshold=threshold).to_dict()
    c = next(c for c in rep["claims"] if c["id"] == "minority-collapse-threshold")
    ev = c["evidence"]
    assert math.isclose(ev["theta"], theta, rel_tol=1e-9)
    predicted_collapse = theta <= threshold
    true = predicted_collapse == (theta < 1)
    if c["verdict"] == "VERIFIED":
        assert true, c["reason"]
        if predicted_collapse:
            assert ev["radius"] is not None and ev["radius"] <= ev["deviation_tolerance"], ev
    if c["verdict"] == "REFUTED":
        assert not true, c["reason"]
