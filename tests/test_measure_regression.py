"""NRC1-3 (docs/metrics.md, "Regression"; Andriopoulos et al., NeurIPS 2024) against a dense numpy
implementation written here from the definitions (np.linalg.svd for the PCA, a fine grid over gamma
for NRC3), and closed-form collapsed configurations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from proofs_check import cli
from theory import metrics as MT


def dense_nrc(H, Y, W):
    H = np.asarray(H, float)
    Y = np.asarray(Y, float).reshape(len(H), -1)
    n = Y.shape[1]
    G = H - H.mean(0)
    G = G / np.linalg.norm(G, axis=1, keepdims=True)
    _, _, Vt = np.linalg.svd(G, full_matrices=False)  # principal directions of the normalised features
    P = Vt[:n].T @ Vt[:n]
    nrc1 = float(np.mean(np.sum((G - G @ P) ** 2, axis=1)))
    Q, _ = np.linalg.qr(W.T)
    nrc2 = float(np.mean(np.sum((G - G @ Q @ Q.T) ** 2, axis=1)))
    Yc = Y - Y.mean(0)
    S = Yc.T @ Yc / len(Y)
    w, V = np.linalg.eigh(S)
    A = W @ W.T / np.linalg.norm(W @ W.T)
    best = np.inf
    for g in np.linspace(0, w.min() * (1 - 1e-9), 20001):
        B = V @ np.diag(np.sqrt(w) - np.sqrt(g)) @ V.T
        best = min(best, float(np.sum((A - B / np.linalg.norm(B)) ** 2)))
    return {"nrc1": nrc1, "nrc2": nrc2, "nrc3": best}


def _run(H, Y, W, step=None):
    st = MT.RegressionStats(H.shape[1], 1 if Y.ndim == 1 else Y.shape[1])
    step = step or len(H)
    for s in range(0, len(H), step):
        st.update1(H[s:s + step], Y[s:s + step])
    for s in range(0, len(H), step):
        st.update2(H[s:s + step])
    return MT.regression_metrics(st, W).metrics


def test_nrc_match_dense_implementation():
    rng = np.random.default_rng(0)
    N, d, n = 500, 8, 3
    Y = rng.normal(size=(N, n)) @ rng.normal(size=(n, n))
    H = Y @ rng.normal(size=(n, d)) + 0.2 * rng.normal(size=(N, d)) + 1.0
    W = rng.normal(size=(n, d))
    ref = dense_nrc(H, Y, W)
    got = _run(H, Y, W, step=77)
    assert got["nrc1"] == pytest.approx(ref["nrc1"], rel=1e-9)
    assert got["nrc2"] == pytest.approx(ref["nrc2"], rel=1e-9)
    # the grid's minimum is within its spacing of the exact one: ours may only be lower (or equal)
    assert got["nrc3"] <= ref["nrc3"] + 1e-12 and got["nrc3"] == pytest.approx(ref["nrc3"], rel=1e-5, abs=1e-9)


def test_collapsed_regression_features_give_zero():
    rng = np.random.default_rng(1)
    N, d, n = 300, 6, 2
    Y = rng.normal(size=(N, n)) * np.array([2.0, 0.5])
    Sroot_eig = None
    B = rng.normal(size=(n, d))
    H = Y @ B  # features exactly in an n-dimensional subspace (the row space of B)
    # W with W W^T proportional to Sigma^(1/2) and row space = row space of B (via B's polar factor)
    S = np.cov(Y.T, bias=True)
    w, V = np.linalg.eigh(S)
    root = V @ np.diag(np.sqrt(w)) @ V.T
    Qb, _ = np.linalg.qr(B.T)  # d x n orthonormal basis of the row space of B
    L = np.linalg.cholesky(root)
    W = L @ Qb.T  # W W^T = L L^T = Sigma^(1/2)
    m = _run(H, Y, W)
    assert m["nrc1"] == pytest.approx(0.0, abs=1e-12)
    assert m["nrc2"] == pytest.approx(0.0, abs=1e-12)
    assert m["nrc3"] == pytest.approx(0.0, abs=1e-12)
    assert Sroot_eig is None
    # a W orthogonal to the features' subspace: NRC2 = 1 (every normalised feature is lost)
    P = np.eye(d) - Qb @ Qb.T
    W2 = rng.normal(size=(n, d)) @ P
    assert _run(H, Y, W2)["nrc2"] == pytest.approx(1.0, abs=1e-10)


def test_cli_targets(tmp_path, capsys):
    rng = np.random.default_rng(2)
    N, d = 200, 5
    Y = rng.normal(size=N)
    H = np.outer(Y, rng.normal(size=d)) + 0.1 * rng.normal(size=(N, d))
    W = rng.normal(size=(1, d))
    np.savez(tmp_path / "r.npz", features=H, targets=Y, weights=W)
    rc = cli.main(["measure", str(tmp_path / "r.npz"), "--targets", str(tmp_path / "r.npz"), "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    ref = dense_nrc(H, Y, W)
    assert out["metrics"]["nrc1"] == pytest.approx(ref["nrc1"], rel=1e-9)
    assert out["metrics"]["nrc2"] == pytest.approx(ref["nrc2"], rel=1e-9)
    assert out["metrics"]["nrc3"] == pytest.approx(0.0, abs=1e-12)  # n = 1: both normalised 1 x 1 matrices are 1
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "short.npy", Y[:-1])
    capsys.readouterr()
    rc = cli.main(["measure", str(tmp_path / "h.npy"), "--targets", str(tmp_path / "short.npy")])
    err = capsys.readouterr().err
    assert rc == 2 and "199 labels" in err or "199" in err, err
