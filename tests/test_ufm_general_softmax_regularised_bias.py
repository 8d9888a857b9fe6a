"""Softmax losses (CE, label smoothing, weighted CE) with a regularised bias, lambda_b > 0 (docs/ufm_general.md,
"Softmax losses with a regularised bias"): the minimiser (Z*, b*) is unique (strictly convex in the centred
logits and the bias; 1^T Z* = 0 from the KKT conditions) and every minimiser lies within the proven radius
sqrt(N g (3 / min w pi + 2 / lb)) of the centre built from the dual point. Before, every such instance was
INCONCLUSIVE ("derived for a free bias").

Independent evidence: the factored objective f(W, H, b) written here from its definition (sample level, mean over
the N samples, (lw/2)||W||^2 + (lh/2)||H||^2 + (lb/2)||b||^2), minimised by scipy from several random starts; its
class means, classifiers and bias are compared with the proven intervals and the proven ball."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from proofs_check.claims.ufm_general import check_general
from proofs_check.core import Verdict
from solvers import losses as L
from solvers import ufm_general as SG


def _targets(K, smoothing):
    """Label-smoothing targets of this package's convention (torch: eps/K off the label, 1 - eps + eps/K on it)."""
    T = np.full((K, K), smoothing / K)
    np.fill_diagonal(T, 1.0 - smoothing + smoothing / K)
    return T


def _objective(counts, d, lw, lh, lb, smoothing=0.0, weights=None):
    K = len(counts)
    y = np.repeat(np.arange(K), counts)
    N = y.size
    Q = _targets(K, smoothing)[:, y]  # K x N target distributions
    w = np.ones(K) if weights is None else np.asarray(weights, float)
    ws = w[y]

    def f(x):
        W = x[:K * d].reshape(K, d)
        H = x[K * d:K * d + d * N].reshape(d, N)
        b = x[K * d + d * N:]
        U = W @ H + b[:, None]
        val = float(np.sum(ws * (logsumexp(U, axis=0) - np.sum(Q * U, axis=0)))) / N
        val += 0.5 * (lw * float(np.sum(W * W)) + lh * float(np.sum(H * H)) + lb * float(b @ b))
        R = (softmax(U, axis=0) - Q) * ws / N
        g = np.concatenate([(R @ H.T + lw * W).ravel(), (W.T @ R + lh * H).ravel(), R.sum(axis=1) + lb * b])
        return val, g
    return f, K * d + d * N + K, y


def _scipy_min(counts, d, lw, lh, lb, starts=4, **kw):
    f, size, y = _objective(counts, d, lw, lh, lb, **kw)
    rng = np.random.default_rng(7)
    best = None
    for _ in range(starts):
        res = minimize(f, rng.normal(scale=0.5, size=size), jac=True, method="L-BFGS-B",
                       options={"maxiter": 20000, "gtol": 1e-12, "ftol": 1e-16, "maxcor": 30})
        if best is None or res.fun < best.fun:
            best = res
    K, N = len(counts), y.size
    W = best.x[:K * d].reshape(K, d)
    H = best.x[K * d:K * d + d * N].reshape(d, N)
    b = best.x[K * d + d * N:]
    return best.fun, W, H, b, y


def _problem(counts, d, lw, lh, lb, loss="ce", **kw):
    K = len(counts)
    return SG.classification(L.make_loss(loss, K, **kw), list(counts), d, lw, lh, lb)


def _claims(rep):
    return {c.name: c for c in rep.claims}


def _cos(M):
    n = np.linalg.norm(M, axis=0)
    return (M.T @ M) / np.outer(n, n)


@pytest.mark.parametrize("counts", [(3, 2, 1), (2, 2, 2), (4, 1, 1, 1)])
def test_enclosure_contains_the_scipy_minimiser_and_its_geometry(counts):
    K, lw, lb = len(counts), 0.01, 0.1
    d = K
    p = _problem(counts, d, lw, lw, lb)
    s = SG.solve(p)
    enc = s.enclosure
    assert enc["ok"] and enc["kind"] == "softmax, regularised bias", enc.get("why")
    fs, W, H, b, y = _scipy_min(counts, d, lw, lw, lb)
    lower = s.certificate.lower_bound
    assert fs >= lower - 1e-12  # the proven bound holds at the independent point
    assert fs - lower <= 1e-9  # and scipy reached the optimum
    cnt = np.asarray(counts, float)
    Zc = np.stack([(W @ H)[:, y == c].mean(axis=1) for c in range(K)], axis=1)  # class-constant at the optimum
    X = Zc * np.sqrt(cnt)
    assert abs(float(np.sum(X, axis=0) @ np.ones(K))) < 1e-5  # 1^T Z* = 0 (the KKT relation used)
    # scipy's point is optimal only to its own gap: bound its distance with that gap through the same inequality
    gap = max(fs - lower, 0.0)
    slack = math.sqrt(p.N * gap * (3.0 / enc["min_w_pi"] + 2.0 / lb))
    assert np.linalg.norm(X - enc["center"]) <= enc["radius"] + slack + 1e-7
    # a centre without the bias term (the free-bias formula) would be off by about sqrt(N) ||J bhat||
    bc = np.asarray(enc["bias_center"])
    jb = bc - bc.mean()
    if np.linalg.norm(jb) > 1e-3:
        assert np.linalg.norm(jb[:, None] * np.sqrt(cnt)) > 10 * enc["radius"]
    # the bias of any point: (lb/2) ||b - bhat||^2 <= F(point) - D <= F(point) - lower
    assert np.linalg.norm(b - bc) <= math.sqrt(2 * gap / lb) + 1e-9
    # the class-mean cosines at scipy's point lie in the certified intervals (+ scipy's own distance)
    rep = check_general(p, starts=1)
    cl = _claims(rep)
    assert cl["minimiser-unique"].verdict == Verdict.VERIFIED, cl["minimiser-unique"].reason
    C = np.array(rep.to_dict()["geometry"]["class_mean_cosines"])
    Mh = np.stack([H[:, y == c].mean(axis=1) for c in range(K)], axis=1)
    Mh = Mh - Mh.mean(axis=1, keepdims=True)
    assert np.allclose(_cos(Mh), C, atol=2e-4)


def test_balanced_lb_positive_is_an_etf_and_false_geometries_are_refuted():
    counts, lw, lb = (2, 2, 2), 0.01, 0.1
    p = _problem(counts, 3, lw, lw, lb)
    rep = check_general(p, starts=1)
    cl = _claims(rep)
    assert cl["minimiser-unique"].verdict == Verdict.VERIFIED
    assert cl["geometry-simplex-etf"].verdict == Verdict.VERIFIED, cl["geometry-simplex-etf"].reason
    bad = _claims(check_general(p, starts=1, expected_geometry="orthogonal-frame"))
    assert any(c.verdict == Verdict.REFUTED for c in bad.values()), {k: c.verdict for k, c in bad.items()}
    off = np.full((3, 3), -0.5 + 5e-4)
    np.fill_diagonal(off, 1.0)
    bad = _claims(check_general(p, starts=1, geometry_expected={"class_mean_cosines": off}))
    assert bad["class-mean-cosines"].verdict == Verdict.REFUTED
    # the independent minimiser is an ETF too (centred class means at cosine -1/2)
    _, W, H, b, y = _scipy_min(counts, 3, lw, lw, lb)
    Mh = np.stack([H[:, y == c].mean(axis=1) for c in range(3)], axis=1)
    Mh = Mh - Mh.mean(axis=1, keepdims=True)
    C = _cos(Mh)
    assert np.allclose(C[~np.eye(3, dtype=bool)], -0.5, atol=1e-5)


def test_imbalanced_false_cosine_refuted_true_verified():
    counts, lw, lb = (6, 6, 2, 1), 5e-3, 0.05
    p = _problem(counts, 4, lw, lw, lb)
    rep = check_general(p, starts=1)
    d = rep.to_dict()
    cl = _claims(rep)
    assert cl["minimiser-unique"].verdict == Verdict.VERIFIED
    C = np.array(d["geometry"]["class_mean_cosines"])
    ok = _claims(check_general(p, starts=1, geometry_expected={"class_mean_cosines": C}))
    if ok["class-mean-cosines"].verdict != Verdict.VERIFIED:  # only when the intervals are wider than the tolerance
        assert ok["class-mean-cosines"].verdict == Verdict.INCONCLUSIVE
    C2 = C.copy()
    C2[0, 3] = C2[3, 0] = C[0, 3] + 2e-3
    bad = _claims(check_general(p, starts=1, geometry_expected={"class_mean_cosines": C2}))
    assert bad["class-mean-cosines"].verdict == Verdict.REFUTED
    etf = (np.eye(4) * 4 - 1.0) / 3.0
    bad = _claims(check_general(p, starts=1, geometry_expected={"class_mean_cosines": etf}))
    assert bad["class-mean-cosines"].verdict == Verdict.REFUTED
    # independent: scipy's class-mean cosines agree with the certified ones
    _, W, H, b, y = _scipy_min(counts, 4, lw, lw, lb, starts=3)
    Mh = np.stack([H[:, y == c].mean(axis=1) for c in range(4)], axis=1)
    Mh = Mh - Mh.mean(axis=1, keepdims=True)
    assert np.allclose(_cos(Mh), C, atol=5e-4)


@pytest.mark.parametrize("loss,kw,okw", [("ls", {"smoothing": 0.2}, {"smoothing": 0.2}),
                                         ("weighted-ce", {"weights": [1.0, 2.0, 0.5]}, {"weights": [1.0, 2.0, 0.5]})])
def test_label_smoothing_and_weighted_ce_with_a_regularised_bias(loss, kw, okw):
    counts, lw, lb = (3, 2, 1), 0.01, 0.2
    p = _problem(counts, 3, lw, lw, lb, loss=loss, **kw)
    s = SG.solve(p)
    enc = s.enclosure
    assert enc["ok"] and enc["kind"] == "softmax, regularised bias", enc.get("why")
    fs, W, H, b, y = _scipy_min(counts, 3, lw, lw, lb, **okw)
    assert abs(fs - s.certificate.lower_bound) <= 1e-8 * max(1.0, abs(fs))  # the same problem, solved independently
    cnt = np.asarray(counts, float)
    X = np.stack([(W @ H)[:, y == c].mean(axis=1) for c in range(3)], axis=1) * np.sqrt(cnt)
    gap = max(fs - s.certificate.lower_bound, 0.0)
    slack = math.sqrt(p.N * gap * (3.0 / enc["min_w_pi"] + 2.0 / lb))
    assert np.linalg.norm(X - enc["center"]) <= enc["radius"] + slack + 1e-7


def test_d_below_the_structural_rank_is_not_claimed_unique_structurally():
    # softmax with lb > 0: rank Z* <= min(K - 1, G); at d = K - 2 the structural bound does not cover d
    st = SG.structural_uniqueness(_problem((2, 2, 2, 2), 2, 0.01, 0.01, 0.1))
    assert not st["ok"]
    st = SG.structural_uniqueness(_problem((2, 2, 2, 2), 3, 0.01, 0.01, 0.1))
    assert st["ok"] and st["rank_bound_structural"] == 3
