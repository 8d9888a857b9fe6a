"""Geometry and NC metrics of finite inputs whose squares overflow (entries ~1e200-1e308).

The metrics are scale-invariant, so features scaled by a power of two must give the same numbers; before,
``nc_metrics`` raised "G must contain only finite numbers" for finite features (the internal Gram overflowed),
``cosine_matrix`` returned None for every pair, and ``classify_gram`` called a two-class simplex ETF Gram of
entries 1e308 "other" (its Frobenius norm, 2e308, is above the largest float, and G / inf = 0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theory import geometry as G


def _cosines(V):
    """Plain numpy cosines of the columns of V (entries of moderate size)."""
    n = np.sqrt((V * V).sum(axis=0))
    return (V.T @ V) / np.outer(n, n)


def _nc1(H, y):
    """tr(Sigma_W) / tr(Sigma_B), written out (moderate entries)."""
    k = int(y.max()) + 1
    mu = np.stack([H[:, y == c].mean(axis=1) for c in range(k)], axis=1)
    dev = H - mu[:, y]
    M = mu - mu.mean(axis=1, keepdims=True)
    return (np.sum(dev * dev) / H.shape[1]) / (np.sum(M * M) / k)


def test_two_class_etf_gram_at_the_top_of_the_float_range_is_an_etf():
    a = 1e308
    Gm = np.array([[a, -a], [-a, a]])
    c = G.classify_gram(Gm)
    assert c.classification == "simplex-etf"
    assert c.distance_etf == 0.0
    assert G.is_simplex_etf_gram(Gm)
    assert G.distance_to_etf(Gm) == 0.0
    assert G.distance_to_of(np.eye(3) * 1e308) == 0.0
    assert not G.is_orthogonal_frame_gram(Gm)  # and a false statement about it stays false


def test_huge_orthogonal_frame_is_not_called_an_etf():
    c = G.classify_gram(np.eye(4) * 1e308)
    assert c.classification == "orthogonal-frame"


@pytest.mark.parametrize("exp", [0, 300, 600, 900, 1020])
def test_nc_metrics_of_features_scaled_by_a_power_of_two_are_unchanged(exp):
    rng = np.random.default_rng(3)
    M = G.simplex_etf(3, 4)
    y = np.repeat(np.arange(3), 3)
    H0 = np.repeat(M, 3, axis=1) + 1e-2 * rng.standard_normal((4, 9))
    W0 = rng.standard_normal((3, 4))
    b0 = rng.standard_normal(3)
    ref = _nc1(H0, y)
    s = math.ldexp(1.0, exp)
    m = G.nc_metrics(H0 * s, y, W0, b0 * s)  # the logits W H + b scale by s: NC4 unchanged
    assert m.NC1 == pytest.approx(ref, rel=1e-12)
    m0 = G.nc_metrics(H0, y, W0, b0)
    for key in ("NC1", "NC1_pinv", "NC2_etf", "NC2_of", "NC3", "NC4", "equinorm"):
        assert getattr(m, key) is not None, key
        assert getattr(m, key) == pytest.approx(getattr(m0, key), rel=1e-12, abs=1e-15), key
    mw = G.nc_metrics(H0, y, W0 * s, b0 * s)  # a huge classifier: NC3 and NC4 unchanged
    assert mw.NC3 == pytest.approx(m0.NC3, rel=1e-12)
    assert mw.NC4 == m0.NC4


def test_cosines_of_huge_vectors_match_plain_numpy_of_the_unscaled_ones():
    rng = np.random.default_rng(5)
    V0 = rng.standard_normal((6, 4))
    ref = _cosines(V0)
    C = np.array(G.cosine_matrix(V0 * 1e300), dtype=float)
    assert np.allclose(C, ref, rtol=1e-13, atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(exp=st.integers(0, 1020), k=st.integers(2, 5), d=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_scaled_features_give_the_metrics_of_plain_numpy(exp, k, d, seed):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), 2)
    H0 = rng.standard_normal((d, 2 * k))
    H = H0 * math.ldexp(1.0, exp)
    assert np.isfinite(H).all()
    m = G.nc_metrics(H, y)
    ref = _nc1(H0, y)
    if m.NC1 is None:  # only where the class means coincide at the ZERO_TOL scale
        assert not np.isfinite(ref) or ref > 1e6
    else:
        assert m.NC1 == pytest.approx(ref, rel=1e-10)
    C = np.array(G.cosine_matrix(H), dtype=float)
    assert np.allclose(C, _cosines(H0), rtol=1e-12, atol=1e-14)
