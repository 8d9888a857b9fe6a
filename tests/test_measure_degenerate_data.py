"""`ncproofs measure` on degenerate and oddly stored data against a plain numpy computation written here from the
formulas of docs/metrics.md (boolean-mask means, eigh of the d x d Sigma_B, loops over class pairs, an N x K
distance table for NC4): d = 1, K = 2, a class collapsed to one point, collinear (rank-deficient) class means, a
singleton class in imbalanced data, ties in NC4, float16 / big-endian / Fortran-ordered / integer files, every
route (--passes auto, 1, 2) and small --batch-size chunks. Also: float16 labels are read without a stray
RuntimeWarning on stderr (the 2^53 range test overflowed float16)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

from proofs_check import measure as M


def _reference(H, y, W=None, b=None) -> dict:
    H = np.asarray(H, dtype=np.float64)
    N, d = H.shape
    K = int(y.max()) + 1
    mu = np.array([H[y == c].mean(axis=0) for c in range(K)])
    M_ = (mu - mu.mean(axis=0)).T
    A = H - mu[y]
    SW, SB = A.T @ A / N, M_ @ M_.T / K
    w, V = np.linalg.eigh(SB)
    keep = w > 1e-12 * w.max()
    out = {"nc1": np.trace(SW @ ((V[:, keep] / w[keep]) @ V[:, keep].T)) / K,
           "nc1_trace": np.trace(SW) / np.trace(SB)}
    sig = np.array([np.mean(np.sum((H[y == c] - mu[c]) ** 2, axis=1)) for c in range(K)])
    r = np.linalg.norm(M_, axis=0)
    cdnv, cos = [], []
    for c, e in itertools.combinations(range(K), 2):
        cdnv.append((sig[c] + sig[e]) / (2 * np.sum((mu[c] - mu[e]) ** 2)))
        cos.append(M_[:, c] @ M_[:, e] / (r[c] * r[e]))
    cdnv, cos = np.array(cdnv), np.array(cos)
    out.update(cdnv_mean=cdnv.mean(), cdnv_max=cdnv.max(), cdnv_min=cdnv.min(), cdnv_std=cdnv.std(),
               equinorm=r.std() / r.mean(), equiangularity=cos.std(),
               max_equiangularity=np.mean(np.abs(cos + 1 / (K - 1))))
    G, E = M_.T @ M_, np.eye(K) - 1.0 / K
    out["gram_distance_etf"] = np.linalg.norm(G / np.linalg.norm(G) - E / np.linalg.norm(E))
    U = mu @ mu.T
    out["gram_distance_of"] = np.linalg.norm(U / np.linalg.norm(U) - np.eye(K) / np.sqrt(K))
    if W is not None:
        # a zero W has no direction: nc3 is undefined (null with a reason, docs/metrics.md)
        out["nc3"] = (None if not np.any(W) else
                      np.linalg.norm(W.T / np.linalg.norm(W) - M_ / np.linalg.norm(M_)))
        logits = H @ W.T + (0 if b is None else b)
        dist = np.sum((H[:, None, :] - mu[None]) ** 2, axis=-1)
        out["nc4"] = np.mean(np.argmax(logits, axis=1) != np.argmin(dist, axis=1))
    return out


def _cases():
    rng = np.random.default_rng(11)
    y3 = np.repeat(np.arange(3), 5)
    rng.shuffle(y3)
    H = rng.normal(size=(15, 1)) + np.array([0.0, 1.0, 3.0])[y3][:, None]
    yield "d=1, K=3", H, y3, rng.normal(size=(3, 1)), None
    y2 = np.array([0, 0, 1, 1])
    yield "K=2, d=1, by hand", np.array([[0.0], [1.0], [2.0], [3.0]]), y2, np.array([[1.0], [-1.0]]), None
    H = rng.normal(size=(15, 4))
    H[y3 == 1] = [1.0, 2.0, 3.0, 4.0]
    yield "a class collapsed to one point", H, y3, rng.normal(size=(3, 4)), rng.normal(size=3)
    H = 0.1 * rng.normal(size=(15, 4)) + np.array([[0.0, 0, 0, 0], [1, 0, 0, 0], [2, 0, 0, 0]])[y3]
    yield "collinear class means (rank 1 < K - 1)", H, y3, rng.normal(size=(3, 4)), None
    yi = np.array([0, 1, 1, 1, 1, 1, 2, 2])
    yield "imbalanced, a singleton class", rng.normal(size=(8, 4)), yi, rng.normal(size=(3, 4)), None
    # NC4 ties: W = 0 gives all-equal logits (argmax -> class 0); sample 1 is equidistant from both means
    yield "NC4 ties", np.array([[-1.0], [1.0], [3.0], [5.0]]), y2, np.zeros((2, 1)), None
    y5 = np.repeat(np.arange(5), 3)
    yield "K = 5 > d = 3", rng.normal(size=(15, 3)), y5, rng.normal(size=(5, 3)), None
    yield "K = 2, d = 50, two samples per class", rng.normal(size=(4, 50)), y2, rng.normal(size=(2, 50)), None


CASES = list(_cases())


@pytest.mark.parametrize("passes", ["auto", 1, 2])
@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_metrics_match_plain_numpy_on_degenerate_data(tmp_path, case, passes):
    name, H, y, W, b = CASES[case]
    f = tmp_path / "f.npz"
    arrays = {"features": H, "labels": y, "weights": W}
    if b is not None:
        arrays["bias"] = b
    np.savez(f, **arrays)
    rep = M.measure(str(f), passes=passes, batch_size=3)
    ref = _reference(H, y, W, b)
    for key, want in ref.items():
        got = rep["metrics"][key]
        if want is None:
            assert got is None and rep["reasons"][key], (name, key)
            continue
        assert got is not None, (name, key, rep["reasons"].get(key))
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (name, key)


@pytest.mark.parametrize("store", ["float16", "big-endian", "fortran", "int64"])
def test_stored_dtypes_and_orders_match_plain_numpy(tmp_path, store):
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(3), 4)
    H = rng.normal(size=(12, 5)) * 4 + np.eye(3, 5)[y] * 6
    arr = {"float16": H.astype(np.float16), "big-endian": H.astype(">f8"), "fortran": np.asfortranarray(H),
           "int64": np.round(H).astype(np.int64)}[store]
    np.save(tmp_path / "f.npy", arr)
    np.save(tmp_path / "y.npy", y)
    ref = _reference(arr.astype(np.float64), y)
    for passes in ("auto", 1, 2):
        rep = M.measure(str(tmp_path / "f.npy"), str(tmp_path / "y.npy"), passes=passes, batch_size=5)
        for key, want in ref.items():
            assert rep["metrics"][key] == pytest.approx(want, rel=1e-9, abs=1e-12), (store, passes, key)


def test_identical_classes_give_nulls_with_reasons_not_numbers(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(5, 4))
    H, y = np.vstack([base] * 3), np.repeat(np.arange(3), 5)
    np.savez(tmp_path / "f.npz", features=H, labels=y, weights=rng.normal(size=(3, 4)))
    rep = M.measure(str(tmp_path / "f.npz"))
    for key in ("nc1", "nc1_trace", "cdnv_mean", "equiangularity", "gram_distance_etf", "nc3"):
        assert rep["metrics"][key] is None and rep["reasons"][key], key
    # NC4 is still defined: every class mean is the same point, so the nearest mean is class 0 (ties -> lowest)
    logits = H @ np.asarray(np.load(tmp_path / "f.npz")["weights"]).T
    assert rep["metrics"]["nc4"] == pytest.approx(np.mean(np.argmax(logits, axis=1) != 0))


def test_float16_labels_print_no_warning(tmp_path):
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(3), 3)
    np.save(tmp_path / "f.npy", rng.normal(size=(9, 2)))
    np.save(tmp_path / "y.npy", y.astype(np.float16))
    env = dict(os.environ, PYTHONWARNINGS="default")
    p = subprocess.run([sys.executable, "-m", "proofs_check", "measure", "f.npy", "--labels", "y.npy", "--json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0
    assert "Warning" not in p.stderr, p.stderr
