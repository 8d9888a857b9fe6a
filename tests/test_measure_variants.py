"""Metric variants of docs/metrics.md ("Variants": NC1 by a rank-(K-1) SVD, the CDNV summary, the
hyperspherical-uniformity form of NC2, uniform duality, NC5), each against an independent dense numpy
implementation written here from the definition (explicit loops over pairs and classes, np.linalg.svd),
never from theory/metrics.py; closed-form configurations (a simplex ETF has uniformity gap 0)."""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from measure_reference import synthetic  # noqa: E402

from proofs_check import cli  # noqa: E402
from theory import metrics as MT  # noqa: E402


def dense_variants(H, y, W=None, ood=None):
    H = np.asarray(H, dtype=np.float64)
    N, d = H.shape
    K = int(y.max()) + 1
    mu = np.array([H[y == c].mean(axis=0) for c in range(K)])
    mG = mu.mean(axis=0)
    M = mu - mG                                             # K x d (rows)
    dev = H - mu[y]
    Sw = dev.T @ dev / N
    Sb = M.T @ M / K
    U, s, _ = np.linalg.svd(Sb)                              # Sigma_B = U diag(s) U^T (symmetric PSD)
    r = min(K - 1, d)
    pinv_r = (U[:, :r] / s[:r]) @ U[:, :r].T
    out = {"nc1_svd": float(np.trace(Sw @ pinv_r)) / K}
    var = np.array([np.mean(np.sum((H[y == c] - mu[c]) ** 2, axis=1)) for c in range(K)])
    V, E = [], []
    for a in range(K):
        for b in range(a + 1, K):
            V.append((var[a] + var[b]) / (2 * np.sum((mu[a] - mu[b]) ** 2)))
            ua, ub = M[a] / np.linalg.norm(M[a]), M[b] / np.linalg.norm(M[b])
            E.append(-math.log(np.linalg.norm(ua - ub)))
    out.update(cdnv_std=float(np.std(V)), cdnv_min=float(np.min(V)), nc2_log_energy=float(np.mean(E)),
               nc2_log_energy_std=float(np.std(E)),
               nc2_uniformity_gap=float(np.mean(E)) - (-0.5 * math.log(2 * K / (K - 1))))
    if W is not None:
        cs = np.array([W[c] @ M[c] / (np.linalg.norm(W[c]) * np.linalg.norm(M[c])) for c in range(K)])
        out.update(duality_cos_mean=float(cs.mean()), uniform_duality=float(cs.std() / abs(cs.mean())))
    if ood is not None:
        o = np.asarray(ood, dtype=np.float64).mean(axis=0) - mG
        out["nc5"] = float(np.mean([abs(M[c] @ o) / (np.linalg.norm(M[c]) * np.linalg.norm(o)) for c in range(K)]))
        o2 = np.asarray(ood, dtype=np.float64).mean(axis=0)
        out["nc5_ood_uncentred"] = float(np.mean([abs(M[c] @ o2) / (np.linalg.norm(M[c]) * np.linalg.norm(o2))
                                                  for c in range(K)]))
    return out


def _close(got, ref, rtol=1e-8):
    for k, v in ref.items():
        assert got[k] is not None, (k, got.get(k))
        assert abs(got[k] - v) <= rtol * max(abs(v), 1e-300) + 1e-14, (k, got[k], v)


@pytest.mark.parametrize("K,d,passes", [(6, 4, 1), (5, 12, 1), (9, 9, 2), (30, 8, "auto")])
def test_variants_match_the_dense_implementation(K, d, passes):
    H, y, W, b = synthetic(seed=K * d, N=60 * K, d=d, K=K, imbalance=True)
    ood = np.random.default_rng(1).normal(size=(200, d)) + 0.3
    ref = dense_variants(H, y, W, ood)
    st = MT.ClassStats(K, d) if passes != 2 else None
    if passes == 2:
        acc = MT.ClassMeans(K, d).update(H, y)
        sc = MT.ClassScatter(acc, W, b, tile_bytes=8 * 7 * K * 3).update(H, y)
        got = MT.collapse_metrics(acc, sc, ood_mean=ood.mean(axis=0)).metrics
    else:
        for s in range(0, len(y), 97):
            st.update(H[s:s + 97], y[s:s + 97])
        nc4 = MT.NC4Pass(st, W, b).update(H, y)
        got = MT.collapse_metrics(st, nc4, ood_mean=ood.mean(axis=0), tile_bytes=8 * 7 * K * 4).metrics
    _close(got, ref)


def test_simplex_etf_has_zero_uniformity_gap_and_unit_duality():
    from theory.geometry import simplex_etf

    K, d = 5, 7
    Mu = simplex_etf(K, d, 1.5).T
    y = np.repeat(np.arange(K), 3)
    H = Mu[y] + np.random.default_rng(0).normal(size=(3 * K, d)) * 1e-3
    H -= np.stack([H[y == c].mean(0) for c in range(K)])[y] - Mu[y]  # class means exactly Mu
    m = MT.measure_arrays(H, y, weights=2.0 * Mu).metrics
    assert m["nc2_uniformity_gap"] == pytest.approx(0.0, abs=1e-12)
    assert m["nc2_log_energy_std"] == pytest.approx(0.0, abs=1e-12)
    assert m["duality_cos_mean"] == pytest.approx(1.0, abs=1e-12) and m["uniform_duality"] == pytest.approx(0, abs=1e-12)
    # a non-ETF has a positive gap (the ETF minimises the mean log energy: docs/metrics.md)
    H2, y2, _, _ = synthetic(seed=2, N=300, d=7, K=5)
    assert MT.measure_arrays(H2, y2).metrics["nc2_uniformity_gap"] > 1e-3


def test_nc1_svd_null_when_sigma_b_is_rank_deficient():
    # K = 4 class means on a line (rank 1 < K - 1): the rank-(K-1) pseudo-inverse is unbounded
    y = np.repeat(np.arange(4), 5)
    H = np.zeros((20, 3))
    H[:, 0] = y * 1.0
    H += np.random.default_rng(0).normal(size=H.shape) * 0.1
    H[:, 0] -= np.array([H[y == c, 0].mean() for c in range(4)])[y] - y  # means exactly 0, 1, 2, 3 on axis 0
    H[:, 1:] -= np.array([H[y == c, 1:].mean(0) for c in range(4)])[y]
    res = MT.measure_arrays(H, y)
    assert res.metrics["nc1_svd"] is None and "rank" in res.reasons["nc1_svd"]
    assert res.metrics["nc1"] is not None


def test_cli_ood_file_gives_nc5(tmp_path, capsys):
    H, y, W, b = synthetic(seed=3, N=400, d=6, K=4)
    ood = np.random.default_rng(5).normal(size=(150, 6)) * 0.5 + 1.0
    np.savez(tmp_path / "a.npz", features=H, labels=y, weights=W)
    np.save(tmp_path / "ood.npy", ood)
    rc = cli.main(["measure", str(tmp_path / "a.npz"), "--ood", str(tmp_path / "ood.npy"), "--batch-size", "33", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    ref = dense_variants(H, y, W, ood)
    _close(out["metrics"], ref)
    rc = cli.main(["measure", str(tmp_path / "a.npz"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"]["nc5"] is None and "--ood" in out["reasons"]["nc5"]


def test_false_definition_would_be_caught():
    """The comparison can fail: a variant computed with the global mean as centre (a different definition)
    differs from ours on imbalanced data by far more than the tolerance."""
    H, y, W, _ = synthetic(seed=7, N=500, d=5, K=4, imbalance=True)
    got = MT.measure_arrays(H, y, W).metrics
    wrong = dense_variants(H - H.mean(0) + np.stack([H[y == c].mean(0) for c in range(4)]).mean(0), y, W)
    # shifting every sample by the same vector moves nothing (centring is by the mean of class means) ...
    _close(got, wrong)
    # ... but centring the class means by the global (sample-weighted) mean changes the duality cosines
    mu = np.stack([H[y == c].mean(0) for c in range(4)])
    Mg = mu - H.mean(0)
    cs = np.array([W[c] @ Mg[c] / (np.linalg.norm(W[c]) * np.linalg.norm(Mg[c])) for c in range(4)])
    assert abs(cs.mean() - got["duality_cos_mean"]) > 1e-4


def test_network_ufm_objective_and_gap(tmp_path, capsys):
    """The network's UFM objective, against a direct computation here; the gap to the certified optimum is
    >= 0 (any network point is feasible for the model) and is printed in the text output."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(4)
    K, n, d, lw, lh = 4, 25, 6, 5e-3, 1e-4
    y = np.repeat(np.arange(K), n)
    W = rng.normal(size=(K, d))
    H = W[y] * 0.8 + 0.3 * rng.normal(size=(K * n, d))
    b = 0.1 * rng.normal(size=K)
    np.savez(tmp_path / "a.npz", features=H, labels=y, weights=W, bias=b)
    args = [str(tmp_path / "a.npz"), "--predict", "ufm-ce", "--lambda-w", str(lw), "--lambda-h", str(lh)]
    assert cli.main(["measure", *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    Z = H @ W.T + b
    f = float(np.mean(logsumexp(Z, axis=1) - Z[np.arange(K * n), y]) + lw / 2 * np.sum(W ** 2)
              + lh / 2 * np.sum(H ** 2))
    obj = out["network_objective"]
    assert obj["value"] == pytest.approx(f, rel=1e-12)
    assert obj["gap"] >= 0 and obj["gap"] == pytest.approx(f - out["predicted"]["value"], rel=1e-12)
    assert cli.main(["measure", *args]) == 0
    text = capsys.readouterr().out
    assert "network UFM objective (ce): f = " in text and "gap f - f* = " in text
    # MSE: (1/2N) sum ||W h + b - e_y||^2 + penalties
    args[2] = "ufm-mse"
    assert cli.main(["measure", *args, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)["network_objective"]
    E = np.eye(K)[y]
    f_mse = float(0.5 * np.mean(np.sum((Z - E) ** 2, axis=1)) + lw / 2 * np.sum(W ** 2) + lh / 2 * np.sum(H ** 2))
    assert obj["value"] == pytest.approx(f_mse, rel=1e-12) and obj["gap"] >= 0


def test_geometry_fit_bound_and_message(tmp_path, capsys):
    from proofs_check import measure as PM

    K, d = 12, 5
    g = PM.geometry_fit(K, d)
    assert not g["simplex_etf"]["fits"] and g["simplex_etf"]["needs_d"] == K - 1
    bound = g["simplex_etf"]["min_distance"]
    assert bound == pytest.approx(math.sqrt(2 - 2 * math.sqrt(d / (K - 1))), rel=1e-15)
    # attained by a projector onto d directions of the centred space; random rank-d Grams stay above it
    J = np.eye(K) - 1.0 / K
    w, V = np.linalg.eigh(J)
    G = V[:, -d:] @ V[:, -d:].T
    dist = np.linalg.norm(G / np.linalg.norm(G) - J / np.linalg.norm(J))
    assert dist == pytest.approx(bound, rel=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(200):
        M = rng.normal(size=(K, d))
        M -= M.mean(0)
        Gr = M @ M.T
        assert np.linalg.norm(Gr / np.linalg.norm(Gr) - J / np.linalg.norm(J)) >= bound - 1e-12
    assert PM.geometry_fit(4, 3)["simplex_etf"] == {"fits": True, "needs_d": 3, "min_distance": 0.0}
    H, y, _, _ = synthetic(seed=1, N=240, d=d, K=K)
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    assert cli.main(["measure", str(tmp_path / "a.npz")]) == 0
    text = capsys.readouterr().out
    assert f"{K} simplex-ETF vectors need d >= {K - 1}, d = {d}: the geometry cannot fit" in text
    assert f"{K} orthogonal-frame vectors need d >= {K}" in text
