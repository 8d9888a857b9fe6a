"""The grouped UFM solver's stopping rules and the line search under flat values (solvers/lbfgs.py, "Flat values";
solvers/ufm_general.py, solve_grouped: certificate-driven stopping, stall detection; docs/benchmarks.md).

Background (measured): near the optimum the grouped objective is constant to the last bit while its gradient, and
so the dual certificate, still improves; the strong Wolfe line search then failed on rounding noise (23 evaluations
per line search) and the solve stalled at certified gaps 2e-10..4e-9 relative (lambda_b > 0, small lambda).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.special import expit

from solvers import lbfgs as LB
from solvers import losses as L
from solvers import ufm_general as SG
from solvers import ufm_general_grouped as SGG  # where the grouped solver reads its constants


# ---------------------------------------------------------------------------------------------------
# L-BFGS: the flat-value line search
# ---------------------------------------------------------------------------------------------------

def _smooth(a, c, offset=0.0):
    """sum log(1 + exp(a x)) + c/2 ||x||^2 - sum cos(x) + offset, and its gradient."""
    def f(x):
        z = a @ x
        return (float(np.sum(np.logaddexp(0.0, z)) + 0.5 * c * x @ x - np.sum(np.cos(x))) + offset,
                a.T @ expit(z) + c * x + np.sin(x))
    return f


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 8), seed=st.integers(0, 10**6), t0=st.sampled_from([1e-4, 1.0, 50.0]),
       flat=st.sampled_from([1e-14, 1e-6, 1e-2]))
def test_flat_line_search_accepts_only_curvature_steps_within_the_value_allowance(n, seed, t0, flat):
    rng = np.random.default_rng(seed)
    fun = _smooth(rng.standard_normal((3 * n, n)), 0.5)
    x = rng.standard_normal(n)
    f0, g0 = fun(x)
    d = -g0 + 0.3 * rng.standard_normal(n) * np.abs(g0)
    dg0 = float(d @ g0)
    if not dg0 < -1e-8:
        return
    allow = flat * abs(f0)
    t, ft, gt, xt, nfev = LB._wolfe(fun, x, f0, g0, d, dg0, t0, allow)
    assert t is not None and t > 0
    np.testing.assert_allclose(xt, x + t * d)
    assert ft == pytest.approx(fun(xt)[0])
    # sufficient decrease, or (approximate Wolfe) a value within the allowance of f0
    assert ft <= f0 + LB.C1 * t * dg0 or abs(ft - f0) <= allow
    assert abs(float(gt @ d)) <= -LB.C2 * dg0 + 1e-12  # the curvature condition (so s^T y > 0)


def _noisy_quadratic(n=40, cond=1e4, amp=2e-15, seed=0):
    """0.5 (x - 1)^T A (x - 1) + 1 + noise, eigenvalues of A 1 .. cond, the value perturbed by a deterministic
    pseudo-random relative error of amplitude ``amp`` (a few ulps: the rounding of a sum of many terms); the
    gradient exact. Near the minimiser the decrease asked for by the sufficient-decrease test is below the noise."""
    rng = np.random.default_rng(seed)
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Qm * np.geomspace(1.0, cond, n)) @ Qm.T
    w = rng.standard_normal(n)

    def f(x):
        r = x - 1.0
        Ar = A @ r
        z = float(w @ x) * 1e7
        return 0.5 * float(r @ Ar) + 1.0 + amp * (z - math.floor(z) - 0.5), Ar
    return f


def test_flat_values_let_the_gradient_go_below_the_value_noise():
    fun = _noisy_quadratic()
    x0 = np.zeros(40)
    gtol = 1e-9  # f - f* ~ gtol^2 ~ 1e-18, far below the value noise 2e-15
    flat = LB.minimize(fun, x0, gtol=gtol, maxiter=3000, flat_rtol=1e-14)
    assert flat.converged, flat.message
    assert np.max(np.abs(flat.x - 1.0)) <= 1e-8
    assert flat.nfev <= 1.5 * flat.nit + 20  # the line searches do not spend evaluations on the noise
    # the same run without the flat rule: line searches of ~8 evaluations and no convergence (measured: stopped at
    # the evaluation limit with max |g| 4.6e-8)
    plain = LB.minimize(fun, x0, gtol=gtol, maxiter=3000)
    assert not plain.converged and plain.nfev > 3 * plain.nit


def test_flat_rule_off_by_default_keeps_the_strong_wolfe_steps():
    rng = np.random.default_rng(3)
    fun = _smooth(rng.standard_normal((9, 3)), 0.5, offset=0.0)
    x = rng.standard_normal(3)
    f0, g0 = fun(x)
    a = LB._wolfe(fun, x, f0, g0, -g0, -float(g0 @ g0), 1.0)
    b = LB._wolfe(fun, x, f0, g0, -g0, -float(g0 @ g0), 1.0, 0.0)
    assert a[0] == b[0] and a[1] == b[1]


# ---------------------------------------------------------------------------------------------------
# The grouped solver: bias penalty, stall detection, warm start
# ---------------------------------------------------------------------------------------------------

def _tail(K=30, top=20, ratio=0.85):
    return [max(1, math.floor(top * ratio ** c)) for c in range(K)]


@pytest.mark.parametrize("lb", [0.01, 0.1])
def test_bias_penalty_reaches_the_target_gap(lb):
    """lambda_b > 0: the solve reaches its target 1e-11 x value (before the flat line search: ~3e-10, stopped by
    gtol). Cross-checked by the K x K certificate at the expanded point (an independent computation)."""
    counts = _tail()
    p = SG.classification(L.make_loss("ce", len(counts)), counts, len(counts), 1e-3, 1e-3, lb=lb)
    lay = SG.class_layout(p)
    sol = SG.solve_grouped(p, lay, starts=1, time_budget=30.0)
    assert sol.diagnostics["message"].startswith("converged: certified gap"), sol.diagnostics["message"]
    pt = SG.clean_grouped(p, sol.variables["point"], lay)
    c = SG.certificate_grouped(p, pt, lay)
    assert 0.0 <= c.gap <= SG.TARGET_GAP_RTOL * abs(c.upper)
    X, b = SG.grouped_full(p, pt, lay)
    full = SG.certificate(p, X, b)
    assert full.gap <= 2 * SG.TARGET_GAP_RTOL * abs(full.upper)
    assert abs(full.upper - c.upper) <= 1e-12 * abs(c.upper)
    # the bias block is stationary (the bias penalty's optimality condition r + lb b = 0)
    assert c.details["bias_residual"] <= 1e-12


def test_a_target_below_the_float_floor_stops_as_stalled_with_a_certified_gap():
    counts = _tail()
    p = SG.classification(L.make_loss("ce", len(counts)), counts, len(counts), 1e-3, 1e-3, lb=0.01)
    lay = SG.class_layout(p)
    sol = SG.solve_grouped(p, lay, starts=1, time_budget=60.0, target_gap_rtol=1e-17)
    d = sol.diagnostics
    assert d["message"].startswith("stalled"), d["message"]
    assert d["stalled"] is True and not sol.converged
    assert d["certified_gap_rtol"] <= SG.STALL_MAX_RTOL
    # the reported gap is the certificate's, recomputed here at the returned point
    pt = SG.clean_grouped(p, sol.variables["point"], lay)
    c = SG.certificate_grouped(p, pt, lay)
    assert c.lower_bound <= c.upper and c.gap <= 1e-10 * abs(c.upper)


def test_no_stall_stop_above_the_claims_need_while_the_gradient_is_not_small(monkeypatch):
    """Above STALL_MAX_RTOL x value a stall only ends the solve after the gradient met the default gtol once (where
    the solver used to stop unconditionally). With that bound at 0: gtol = 0 (never met) runs until the (small)
    work budget; the default gtol ends in the 'after max |gradient|' stall, with the certified gap reported."""
    counts = _tail()
    p = SG.classification(L.make_loss("ce", len(counts)), counts, len(counts), 1e-3, 1e-3, lb=0.01)
    lay = SG.class_layout(p)
    monkeypatch.setattr(SGG, "STALL_MAX_RTOL", 0.0)
    sol = SG.solve_grouped(p, lay, starts=1, max_evals=1500, target_gap_rtol=1e-17, gtol=0.0)
    assert sol.diagnostics["message"].startswith("work budget reached"), sol.diagnostics["message"]
    assert sol.diagnostics["stalled"] is False and sol.diagnostics["evaluations"] <= 1500 + 40
    # the wall-clock safety net says so when it stops a run
    sol = SG.solve_grouped(p, lay, starts=1, time_budget=1e-3, target_gap_rtol=1e-17, gtol=0.0)
    assert sol.diagnostics["message"].startswith(SG.SAFETY_MESSAGE) and sol.diagnostics["stopped_by_wall_safety"]
    sol = SG.solve_grouped(p, lay, starts=1, target_gap_rtol=1e-17)
    d = sol.diagnostics
    assert d["message"].startswith("stalled") and "after max |gradient|" in d["message"], d["message"]
    c = SG.certificate_grouped(p, SG.clean_grouped(p, sol.variables["point"], lay), lay)
    assert 0.0 <= c.gap <= 1e-10 * abs(c.upper) and d["certified_gap"] <= 1e-10 * abs(c.upper)


def test_warm_start_from_another_lambda_gives_the_same_certified_value():
    counts = _tail(K=40)
    K = len(counts)
    p_big = SG.classification(L.make_loss("ce", K), counts, K, 1e-3, 1e-3)
    p = SG.classification(L.make_loss("ce", K), counts, K, 2e-5, 2e-5)
    lay = SG.class_layout(p)
    warm = SG.solve_grouped(p_big, lay, starts=1).variables["point"]
    a = SG.solve_grouped(p, lay, starts=0, x_init=warm)
    b = SG.solve_grouped(p, lay, starts=1, seed=5)
    ca = SG.certificate_grouped(p, SG.clean_grouped(p, a.variables["point"], lay), lay)
    cb = SG.certificate_grouped(p, SG.clean_grouped(p, b.variables["point"], lay), lay)
    for c in (ca, cb):
        assert c.gap <= 1e-10 * abs(c.upper)
    # two certified brackets of the same optimum overlap
    assert ca.lower_bound <= cb.upper and cb.lower_bound <= ca.upper


# ---------------------------------------------------------------------------------------------------
# Gram square roots at rank-deficient points
# ---------------------------------------------------------------------------------------------------

def test_gram_square_roots_are_exact_on_the_null_space():
    rng = np.random.default_rng(0)
    K, r = 9, 5
    X = rng.standard_normal((K, r)) @ rng.standard_normal((r, K))
    WW, S = SG._gram_sqrts(X)
    nx = np.linalg.norm(X, 2)
    for R, M in ((WW, X @ X.T), (S, X.T @ X)):
        np.testing.assert_allclose(R, R.T, atol=1e-14 * nx)
        assert np.linalg.norm(R @ R - M) <= 1e-13 * nx ** 2
        assert np.linalg.eigvalsh(R).min() >= -1e-13 * nx
    # vectors orthogonal to the range: eigh of X X^T would leave ~sqrt(u) ||X|| ~ 1e-8 ||X|| there
    Ul, _, _ = np.linalg.svd(X)
    null_left = Ul[:, r:]
    assert np.linalg.norm(WW @ null_left) <= 1e-13 * nx


def test_low_rank_optimum_is_solved_with_fewer_factor_columns_and_the_same_certified_value(monkeypatch):
    """Zipf-like counts at a larger lambda: the optimum's A has rank ~8 of m = 87; the factors shrink to its rank
    plus slack (RANK_SLACK) and the certified bracket overlaps that of the full-rank factorization."""
    K = 1000
    counts = [max(1, 2000 // (c + 1)) for c in range(K)]
    p = SG.classification(L.make_loss("ce", K), counts, K, 1e-3, 1e-3)
    lay = SG.class_layout(p)
    small = SG.solve_grouped(p, lay, starts=1, time_budget=60.0)
    assert small.diagnostics["factor_rank"] < lay.m // 2
    monkeypatch.setattr(SGG, "RANK_SLACK", 10 ** 6)  # never shrink: rank m throughout
    full = SG.solve_grouped(p, lay, starts=1, time_budget=60.0)
    assert full.diagnostics["factor_rank"] == lay.m
    cs, cf = (SG.certificate_grouped(p, SG.clean_grouped(p, s.variables["point"], lay), lay) for s in (small, full))
    for c in (cs, cf):
        assert c.gap <= 1e-10 * abs(c.upper)
    assert cs.lower_bound <= cf.upper and cf.lower_bound <= cs.upper
