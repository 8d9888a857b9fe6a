"""A straightforward, independent numpy implementation of docs/metrics.md (dense, in memory).

Used by tests/test_measure*.py as the reference and by benchmarks/measure_bench.py as the
one-shot baseline: every quantity is built literally from its definition (dense K x K matrices,
np.linalg.pinv of the d x d Sigma_B, explicit loops over class pairs), never from theory/metrics.py.
"""

from __future__ import annotations

import numpy as np


def reference_metrics(H, y, W=None, b=None, P=None):
    """H: N x d, y: (N,) ints 0..K-1 (every class present), W: K x d, b: K, P: K x K predicted centred Gram."""
    H = np.asarray(H, dtype=np.float64)
    y = np.asarray(y)
    N, d = H.shape
    K = int(y.max()) + 1
    n = np.bincount(y, minlength=K)
    mu = np.stack([H[y == c].mean(axis=0) for c in range(K)])          # K x d
    mu_G = mu.mean(axis=0)
    M = (mu - mu_G).T                                                    # d x K
    dev = H - mu[y]
    Sw = dev.T @ dev / N
    Sb = M @ M.T / K
    out = {}
    out["nc1"] = float(np.trace(Sw @ np.linalg.pinv(Sb, rcond=1e-12, hermitian=False))) / K
    out["nc1_trace"] = float(np.trace(Sw) / np.trace(Sb))
    sig2 = np.array([np.mean(np.sum(dev[y == c] ** 2, axis=1)) for c in range(K)])
    V = []
    for c in range(K):
        for c2 in range(c + 1, K):
            V.append((sig2[c] + sig2[c2]) / (2 * np.sum((mu[c] - mu[c2]) ** 2)))
    out["cdnv_mean"] = float(np.mean(V))
    out["cdnv_max"] = float(np.max(V))
    r = np.linalg.norm(M, axis=0)
    out["equinorm"] = float(np.std(r) / np.mean(r))
    cos = [float(M[:, c] @ M[:, c2] / (r[c] * r[c2])) for c in range(K) for c2 in range(c + 1, K)]
    out["equiangularity"] = float(np.std(cos))
    out["max_equiangularity"] = float(np.mean(np.abs(np.array(cos) + 1.0 / (K - 1))))
    G = M.T @ M
    E = np.eye(K) - np.ones((K, K)) / K
    out["gram_distance_etf"] = float(np.linalg.norm(G / np.linalg.norm(G) - E / np.linalg.norm(E)))
    U = mu @ mu.T
    out["gram_distance_of"] = float(np.linalg.norm(U / np.linalg.norm(U) - np.eye(K) / np.sqrt(K)))
    out["gram_distance_predicted"] = None if P is None else float(
        np.linalg.norm(G / np.linalg.norm(G) - P / np.linalg.norm(P)))
    if W is None:
        out["nc3"] = out["nc4"] = None
    else:
        W = np.asarray(W, dtype=np.float64)
        out["nc3"] = float(np.linalg.norm(W.T / np.linalg.norm(W) - M / np.linalg.norm(M)))
        logits = H @ W.T + (0.0 if b is None else np.asarray(b, dtype=np.float64))
        dist = ((H[:, None, :] - mu[None, :, :]) ** 2).sum(axis=2)
        out["nc4"] = float(np.mean(np.argmax(logits, axis=1) != np.argmin(dist, axis=1)))
    return out


def synthetic(seed=0, N=600, d=12, K=5, spread=0.5, imbalance=False, dtype=np.float64):
    """Features around random class means (known structure), labels shuffled, W = noisy means."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(K, d)) * 2.0
    if imbalance:
        p = np.arange(1, K + 1, dtype=float)
        y = rng.choice(K, size=N, p=p / p.sum())
    else:
        y = rng.integers(0, K, size=N)
    y[:K] = np.arange(K)
    rng.shuffle(y)
    H = (means[y] + spread * rng.normal(size=(N, d))).astype(dtype)
    W = means + 0.7 * rng.normal(size=(K, d))
    b = 0.3 * rng.normal(size=K)
    return H, y, W, b
