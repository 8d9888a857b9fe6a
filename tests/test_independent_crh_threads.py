"""Independent recomputation of the algebraic CRH / PAH review-thread claims (Ziyin et al.; docs/crh.md,
docs/review_threads.md). Expected values are own numpy code from the formulas in docs/crh.md; theory.crh's
helpers are only the values under test.

- crh.linear-regression.normalisation(-corrected): ridge stationarity E[(y - W x) x^T] = gamma W solved here by
  an own normal-equation solve; Z_a ~ H^{-1} iff A^T A ~ (H + gamma)^2 H^{-3}; at gamma = 0 the whitening
  teacher gives H_b ~ I; a random teacher is a counterexample to the thread's unconditional statement;
- crh.identity.transfer-inverse: own projector W (W^T W)^{-1} W^T and its trace (= rank; a rank-deficient W
  is the counterexample to "every W");
- crh.noise-injection.rga: with zero-mean noise of covariance sigma^2 I uncorrelated with x (constructed exactly),
  the noise-averaged gradient is the clean one plus sigma^2 W (extra weight decay), the stationary W is the ridge
  solution at gamma + sigma^2, and the noise adds sigma^2 Z_a^2 to G_a = W^T G_b W.
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs_check.claims import crh as C
from proofs_check.core import RunContext, Verdict
from theory import crh as T

CTX = RunContext()


def _rot(rng, d):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _fn(H, f):
    w, V = np.linalg.eigh((H + H.T) / 2)
    return (V * f(w)) @ V.T


def _cos(A, B):
    return float(np.sum(A * B) / (np.linalg.norm(A) * np.linalg.norm(B)))


def _samples(rng, H, n):
    """n samples (rows) with zero mean and second moment exactly H."""
    Z = rng.standard_normal((n, H.shape[0]))
    Z -= Z.mean(axis=0)
    Z = Z @ _fn(Z.T @ Z / n, lambda w: w ** -0.5)
    return Z @ _fn(H, np.sqrt)


def _ridge_own(X, Y, gamma):
    n, d = X.shape
    return np.linalg.solve(X.T @ X / n + gamma * np.eye(d), X.T @ Y / n).T


@pytest.mark.parametrize("gamma", [0.0, 0.1, 0.7])
def test_ridge_normalisation_condition(gamma):
    rng = np.random.default_rng(31)
    d, n = 4, 200
    R = _rot(rng, d)
    H = R @ np.diag([0.3, 0.8, 1.5, 2.5]) @ R.T
    H = (H + H.T) / 2
    X = _samples(rng, H, n)
    M_own = _fn(H, lambda w: (w + gamma) ** 2 / w ** 3)
    assert np.allclose(T.normalisation_condition(H, gamma), M_own, rtol=1e-10, atol=1e-12)
    Hinv = np.linalg.inv(H)
    for teacher in ("corrected", "random"):
        A = _rot(rng, d) @ _fn(M_own, np.sqrt) if teacher == "corrected" else rng.standard_normal((d, d))
        W = _ridge_own(X, X @ A.T, gamma)
        # stationarity and the closed form W = A H (H + gamma)^{-1}
        assert np.allclose((X @ A.T - X @ W.T).T @ X / n, gamma * W, atol=1e-10)
        assert np.allclose(W, A @ H @ np.linalg.inv(H + gamma * np.eye(d)), atol=1e-10)
        assert np.allclose(T.ridge_weights(H, A @ H, gamma), W, atol=1e-10)
        cos = _cos(W.T @ W, Hinv)
        if teacher == "corrected":
            assert cos == pytest.approx(1.0, abs=1e-10)
        else:
            assert cos < 1 - 1e-2  # the thread's "for any teacher" fails
    # the whitening teacher A^T A ~ H^{-1}: Z_a ~ H^{-1} only at gamma = 0, and then H_b = W H W^T ~ I
    A = _rot(rng, d) @ _fn(H, lambda w: w ** -0.5)
    W = _ridge_own(X, X @ A.T, gamma)
    if gamma == 0.0:
        assert _cos(W.T @ W, Hinv) == pytest.approx(1.0, abs=1e-10)
        assert _cos(W @ H @ W.T, np.eye(d)) == pytest.approx(1.0, abs=1e-10)
    else:
        assert _cos(W.T @ W, Hinv) < 1 - 1e-4


def test_transfer_inverse_projector():
    rng = np.random.default_rng(5)
    for m, n, r in [(5, 3, 3), (7, 2, 2), (6, 4, 4), (5, 3, 2)]:
        W = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
        Za = W.T @ W
        if r == n:
            P = W @ np.linalg.inv(Za) @ W.T
        else:
            P = W @ np.linalg.pinv(Za) @ W.T
        assert np.allclose(P @ P, P, atol=1e-9) and np.allclose(P, P.T, atol=1e-12)
        assert np.trace(P) == pytest.approx(r, abs=1e-9)
        # H_a = c Z_a^{-1}: H_b = c P, d_a eigenvalues c iff W has full column rank
        ev = np.sort(np.linalg.eigvalsh(1.7 * P))[::-1]
        assert np.count_nonzero(ev > 0.85) == r
        assert (r == n) == (np.count_nonzero(ev > 0.85) == n)
    assert C.transfer_inverse_claim().run(CTX).verdict is Verdict.VERIFIED
    assert C.transfer_inverse_claim(full_rank=False, claim_id="x").run(CTX).verdict is Verdict.REFUTED


def test_gradient_condition_number_power():
    """G_b = Z_b^y gives G_a = W^T Z_b^y W = Z_a^(y+1) on the range (own eigen-computation)."""
    rng = np.random.default_rng(9)
    W = rng.standard_normal((3, 5))  # full row rank
    Zb, Za = W @ W.T, W.T @ W
    for y in (1.0, 2.0, 0.5):
        Ga = W.T @ _fn(Zb, lambda w: w ** y) @ W
        U, s, Vt = np.linalg.svd(W, full_matrices=False)
        assert np.allclose(Ga, (Vt.T * s ** (2 * (y + 1))) @ Vt, atol=1e-9)
        lam = np.linalg.eigvalsh(Zb)
        la = np.linalg.eigvalsh(Ga)
        la = la[la > 1e-9 * la.max()]
        assert la.max() / la.min() == pytest.approx((lam.max() / lam.min()) ** (y + 1), rel=1e-9)


@pytest.mark.parametrize("sigma,gamma", [(0.3, 0.05), (0.5, 0.0)])
def test_noise_injection_is_extra_weight_decay(sigma, gamma):
    rng = np.random.default_rng(123)
    d_in, d_out, n = 3, 2, 60
    F = rng.standard_normal((d_in, d_in))
    H = F @ F.T + 0.5 * np.eye(d_in)
    X = _samples(rng, H, n)
    A = rng.standard_normal((d_out, d_in))
    Y = X @ A.T
    # noise: zero mean, covariance exactly sigma^2 I and uncorrelated with x, built on the orthogonal
    # complement of [1, X] (n noise rows for each clean sample's copy: exact averages over the n pairs)
    B = np.column_stack([np.ones(n), X])
    Q, _ = np.linalg.qr(np.column_stack([B, rng.standard_normal((n, d_in))]))
    E = Q[:, B.shape[1]:] * np.sqrt(n) * sigma
    assert np.allclose(E.T @ E / n, sigma ** 2 * np.eye(d_in), atol=1e-12)
    assert np.allclose(E.T @ X, 0, atol=1e-10) and np.allclose(E.sum(axis=0), 0, atol=1e-10)
    Xn = X + E
    W = rng.standard_normal((d_out, d_in))
    # noise-averaged gradient of (1/2)||W x~ - y||^2 + (gamma/2)||W||^2 = clean gradient + sigma^2 W
    g_noisy = (Xn @ W.T - Y).T @ Xn / n + gamma * W
    g_clean = (X @ W.T - Y).T @ X / n + gamma * W
    assert np.allclose(g_noisy, g_clean + sigma ** 2 * W, atol=1e-10)
    # stationary W of the noisy problem: ridge at gamma + sigma^2; clean E[g_b h^T] = (gamma + sigma^2) W
    Ws = _ridge_own(Xn, Y, gamma)
    assert np.allclose(Ws, A @ H @ np.linalg.inv(H + (gamma + sigma ** 2) * np.eye(d_in)), atol=1e-10)
    assert np.allclose(T.ridge_weights(H, A @ H, gamma + sigma ** 2), Ws, atol=1e-10)
    gb = Y - X @ Ws.T  # minus the output gradient of the clean network
    assert np.allclose(gb.T @ X / n, (gamma + sigma ** 2) * Ws, atol=1e-10)
    # gradient covariance at the input: the noise adds sigma^2 Z_a^2 to G_a = W^T G_b W (cross terms vanish
    # because the noise is uncorrelated with the clean residual, exactly here)
    r_clean, r_noisy = X @ Ws.T - Y, Xn @ Ws.T - Y
    Ga_clean = Ws.T @ (r_clean.T @ r_clean / n) @ Ws
    Ga_noisy = Ws.T @ (r_noisy.T @ r_noisy / n) @ Ws
    Za = Ws.T @ Ws
    assert np.allclose(Ga_noisy - Ga_clean, sigma ** 2 * Za @ Za, atol=1e-10)
