"""Balanced one-hot MSE UFM with a regularised bias (lambda_b > 0; docs/ufm_general.md, "MSE with a regularised
bias"): the zero phase (Z = 0, b0 = 1/(K (1 + lb))) decided in exact rationals, its threshold K^2 n lw lh = 1, and
the geometry certificate extended to lb > 0 (strong convexity in (U, b)).

Independent evidence: the factored objective f(W, H, b) written here from its definition (sample level, mean over
N samples, (lw/2)||W||^2 + (lh/2)||H||^2 + (lb/2)||b||^2) minimised by scipy from several random starts, and the
closed form derived in the docs recomputed here from the separable one-dimensional problems (not from the code)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from proofs_check.claims import ufm_general as CG
from proofs_check.core import Verdict
from solvers import losses as L
from solvers import ufm_general as SG


def _problem(K, n, lw, lh, lb, d=None, loss="mse"):
    return SG.classification(L.make_loss(loss, K), [n] * K, d if d is not None else K, lw, lh, lb)


def _objective(K, n, d, lw, lh, lb):
    N = K * n
    Y = np.repeat(np.eye(K), n, axis=1)  # one-hot targets, K x N

    def f(x):
        W = x[:K * d].reshape(K, d)
        H = x[K * d:K * d + d * N].reshape(d, N)
        b = x[K * d + d * N:]
        R = W @ H + b[:, None] - Y
        val = 0.5 * float(np.sum(R * R)) / N + 0.5 * lw * float(np.sum(W * W)) + 0.5 * lh * float(np.sum(H * H)) \
            + 0.5 * lb * float(b @ b)
        gW = (R @ H.T) / N + lw * W
        gH = (W.T @ R) / N + lh * H
        gb = R.sum(axis=1) / N + lb * b
        return val, np.concatenate([gW.ravel(), gH.ravel(), gb])
    return f, K * d + d * N + K


def _scipy_min(K, n, d, lw, lh, lb, starts=3):
    f, size = _objective(K, n, d, lw, lh, lb)
    rng = np.random.default_rng(1)
    best = None
    for _ in range(starts):
        res = minimize(f, rng.normal(scale=0.5, size=size), jac=True, method="L-BFGS-B",
                       options={"maxiter": 4000, "gtol": 1e-11, "ftol": 1e-16})
        if best is None or res.fun < best.fun:
            best = res
    return best, f


def _closed_form(K, n, lw, lh, lb):
    """Separable derivation (docs): alpha on the sum-zero block, g = gamma / K on the all-ones direction."""
    mu = math.sqrt(n * lw * lh)
    alpha = max(0.0, 1.0 - K * mu)
    g = max(0.0, 1.0 / K - mu * (1.0 + lb) / lb)
    b = (1.0 / K - g) / (1.0 + lb)
    val = (K - 1) * ((alpha - 1.0) ** 2 / (2 * K) + mu * alpha) \
        + K * (0.5 * (b + g - 1.0 / K) ** 2 + 0.5 * lb * b * b + mu * g)
    return val, alpha, K * g, b


def _claims(rep):
    return {c.name: c for c in rep.claims}


def test_zero_phase_value_point_and_uniqueness():
    K, n, lw, lh, lb = 3, 2, 0.3, 0.3, 0.1  # K^2 n lw lh = 1.62 > 1
    p = _problem(K, n, lw, lh, lb)
    ex = SG.regularised_bias_mse_phase(p)
    assert ex["phase"] == "zero" and ex["zero_minimiser"] and not ex["at_threshold"]
    b0 = 1.0 / (K * (1.0 + lb))
    f, size = _objective(K, n, K, lw, lh, lb)
    x0 = np.concatenate([np.zeros(size - K), np.full(K, b0)])
    f0, g0 = f(x0)
    assert abs(f0 - 0.5 * (1.0 - b0)) < 1e-15 and np.max(np.abs(g0)) < 1e-15  # stationary at (0, 0, b0)
    rep = CG.check_general(p)
    c = _claims(rep)
    assert c["optimal-value"].verdict == Verdict.VERIFIED
    assert c["minimiser-unique"].verdict == Verdict.VERIFIED
    assert c["geometry-zero"].verdict == Verdict.VERIFIED  # the unique minimiser is Z = 0
    claimed = _claims(CG.check_general(p, expected_geometry="simplex-etf"))
    assert claimed["geometry-simplex-etf"].verdict == Verdict.REFUTED
    sol = rep.solution
    lower = rep.certificate["lower_bound"]
    assert abs(sol["value"] - f0) < 1e-12 and lower <= f0 + 1e-15
    best, _ = _scipy_min(K, n, K, lw, lh, lb)
    assert best.fun >= lower - 1e-12  # a feasible point below the proven bound would be a counterexample
    assert abs(best.fun - f0) < 1e-9
    W = best.x[:K * K]
    assert np.max(np.abs(W)) < 1e-4 and np.max(np.abs(best.x[-K:] - b0)) < 1e-5


def test_boundary_exact_threshold_is_zero():
    # K^2 n lw lh = 4 * 0.25 = 1 exactly (dyadic doubles): the KKT condition ||grad||_2 = lam holds with equality
    p = _problem(2, 1, 0.5, 0.5, 0.25)
    ex = SG.regularised_bias_mse_phase(p)
    assert ex["at_threshold"] and ex["zero_minimiser"] and ex["K2_n_lw_lh"] == "1/1"
    assert ex["bias_b0"] == "2/5"  # 1 / (K (1 + lb)) = 1 / 2.5
    rep = CG.check_general(p)
    c = _claims(rep)
    assert c["minimiser-unique"].verdict == Verdict.VERIFIED
    assert c["geometry-zero"].verdict == Verdict.VERIFIED
    claimed = _claims(CG.check_general(p, expected_geometry="simplex-etf"))
    assert claimed["geometry-simplex-etf"].verdict == Verdict.REFUTED
    best, _ = _scipy_min(2, 1, 2, 0.5, 0.5, 0.25)
    assert best.fun >= rep.certificate["lower_bound"] - 1e-12
    assert abs(best.fun - 0.5 * (1.0 - 0.4)) < 1e-7


def test_one_double_below_threshold_is_not_claimed_zero():
    # lam just below 1/(K sqrt n): the minimiser is a simplex ETF of vanishing scale; nothing about its geometry
    # may be VERIFIED or REFUTED from float64
    lam = 1.0 / (3 * math.sqrt(2))
    p = _problem(3, 2, lam, lam, 0.1)
    ex = SG.regularised_bias_mse_phase(p)
    assert not ex["zero_minimiser"]
    rep = CG.check_general(p)
    assert _claims(rep)["geometry-simplex-etf"].verdict == Verdict.INCONCLUSIVE


@pytest.mark.parametrize("lw,phase,rank", [(0.05, "simplex-etf", 2), (0.01, "simplex-etf-shifted", 3)])
def test_collapse_phases_against_scipy_and_closed_form(lw, phase, rank):
    K, n, lb = 3, 2, 0.1  # K mu = 3 sqrt(2) lw: 0.212 (above lb/(1+lb) = 0.0909) and 0.0424 (below)
    p = _problem(K, n, lw, lw, lb)
    ex = SG.regularised_bias_mse_phase(p)
    assert ex["phase"] == phase and ex["rank"] == rank
    val, alpha, gamma, b = _closed_form(K, n, lw, lw, lb)
    assert (gamma > 0) == (phase == "simplex-etf-shifted") and alpha > 0
    rep = CG.check_general(p)
    c = _claims(rep)
    assert c["optimal-value"].verdict == Verdict.VERIFIED
    assert c["minimiser-unique"].verdict == Verdict.VERIFIED
    assert c["geometry-simplex-etf"].verdict == Verdict.VERIFIED  # centred class means
    lower, upper = rep.certificate["lower_bound"], rep.solution["value"]
    assert lower - 1e-12 <= val <= upper + 1e-12 and abs(ex["value"] - val) < 1e-14
    best, f = _scipy_min(K, n, K, lw, lw, lb)
    assert best.fun >= lower - 1e-12 and abs(best.fun - val) < 1e-8
    assert np.max(np.abs(best.x[-K:] - b)) < 1e-4  # the bias of the closed form
    # the closed-form point itself, factored by hand (balanced square root of Zc = alpha (I - J/K) + gamma J/K)
    Zc = alpha * (np.eye(K) - 1.0 / K) + gamma / K
    Z = np.repeat(Zc, n, axis=1)
    U_, s_, Vt = np.linalg.svd(Z)
    W = U_ * np.sqrt(s_)  # lw = lh: W W^T = (Z Z^T)^{1/2}, H^T H = (Z^T Z)^{1/2}
    H = np.sqrt(s_)[:, None] * Vt[:K]
    x = np.concatenate([W.ravel(), H.ravel(), np.full(K, b)])
    assert abs(f(x)[0] - val) < 1e-13


def test_false_value_refuted_and_free_bias_formula_wrong():
    K, n, lw, lb = 3, 2, 0.05, 0.1
    p = _problem(K, n, lw, lw, lb)
    # the free-bias closed form ((K-1)((sqrt n - z)^2/(2N) + lam z), b = 1/K) is not the optimum here
    free = L.make_loss("mse", K).closed_form(K, n, lw)["value"]
    val = _closed_form(K, n, lw, lw, lb)[0]
    assert abs(free - val) > 1e-3
    rep = CG.check_general(p, claimed_value=free)
    assert _claims(rep)["optimal-value"].verdict == Verdict.REFUTED
    rep = CG.check_general(p, claimed_value=val * (1 + 1e-5))
    assert _claims(rep)["optimal-value"].verdict == Verdict.REFUTED


def test_outside_hypotheses():
    # CE with a regularised bias: decided by its own enclosure since the softmax losses were derived with lb > 0
    # (tests/test_ufm_general_softmax_regularised_bias.py checks it against scipy)
    rep = CG.check_general(_problem(3, 2, 0.05, 0.05, 0.1, loss="ce"))
    u = _claims(rep)["minimiser-unique"]
    assert u.verdict == Verdict.VERIFIED, u.reason
    # imbalanced MSE with lb > 0: no exact phase (None), but the enclosure (strong convexity) still holds
    p = SG.classification(L.make_loss("mse", 3), [3, 2, 1], 3, 0.05, 0.05, 0.1)
    assert SG.regularised_bias_mse_phase(p) is None
    assert SG.regularised_bias_mse_phase(_problem(3, 2, 0.05, 0.05, 0.0)) is None
    rep = CG.check_general(p)
    assert _claims(rep)["minimiser-unique"].verdict == Verdict.VERIFIED
    # d below the structural rank K of the shifted phase: not claimed unique from the structural bound
    st = SG.structural_uniqueness(_problem(3, 2, 0.01, 0.01, 0.1, d=2))
    assert not st["ok"]


def test_enclosure_contains_scipy_minimiser():
    K, n, lw, lb = 3, 2, 0.01, 0.1
    p = _problem(K, n, lw, lw, lb)
    s = SG.solve(p)
    enc = s.enclosure
    assert enc["ok"] and enc["kind"] == "squared, regularised bias"
    best, _ = _scipy_min(K, n, K, lw, lw, lb)
    W = best.x[:K * K].reshape(K, K)
    H = best.x[K * K:K * K + K * K * n].reshape(K, K * n)
    Zc = (W @ H).reshape(K, K, n).mean(axis=2)  # class-constant at the optimum
    X = Zc * math.sqrt(n)
    # the scipy point is only ~1e-8 optimal: its distance is bounded by the enclosure of its own value gap, so compare
    # with the radius plus the scipy point's own distance scale (sqrt of its gap)
    gap = max(best.fun - s.certificate.lower_bound, 0.0)
    slack = math.sqrt(2 * p.N * gap * (1 + 1 / lb))
    assert np.linalg.norm(X - enc["center"]) <= enc["radius"] + slack
    # the exact minimiser (closed form recomputed here) lies inside the proven ball; a centre without the bias term
    # bhat (the free-bias centre) would be off by ~ sqrt(n) ||bhat|| >> radius
    _, alpha, gamma, _ = _closed_form(K, n, lw, lw, lb)
    Xc = (alpha * (np.eye(K) - 1.0 / K) + gamma / K) * math.sqrt(n)
    assert np.linalg.norm(Xc - enc["center"]) <= enc["radius"] < 1e-4
