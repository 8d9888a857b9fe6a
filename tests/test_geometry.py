"""Geometry constructors, the classifier and NC metrics (spec/geometry.md)."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from theory import geometry as G
from theory._validate import InstanceError


@given(k=st.integers(2, 12), extra=st.integers(0, 3), r=st.floats(0.1, 10))
def test_simplex_etf_gram_and_cosines(k, extra, r):
    E = G.simplex_etf(k, k - 1 + extra, r)
    gram = E.T @ E
    assert np.allclose(np.diag(gram), r * r)
    off = gram[~np.eye(k, dtype=bool)] / (r * r)
    assert np.allclose(off, -1.0 / (k - 1))  # every inner product, not only norms
    assert np.allclose(E.sum(axis=1), 0.0)
    assert G.classify_gram(gram).classification == "simplex-etf"


@given(k=st.integers(1, 10), r=st.floats(0.1, 10))
def test_orthogonal_frame(k, r):
    F = G.orthogonal_frame(k, k + 1, r)
    assert np.allclose(F.T @ F, r * r * np.eye(k))
    assert np.all(F >= 0)
    if k >= 2:
        assert G.classify_gram(F.T @ F).classification == "orthogonal-frame"


def test_dimension_requirements_are_clear_errors():
    with pytest.raises(InstanceError, match="d must be >= k-1"):
        G.simplex_etf(5, 3)
    with pytest.raises(InstanceError, match="d must be >= k"):
        G.orthogonal_frame(4, 3)


@given(k=st.integers(2, 9))
def test_centering_an_of_by_the_unweighted_mean_gives_an_etf(k):
    F = G.orthogonal_frame(k)
    M = F - F.mean(axis=1, keepdims=True)
    cos = np.array(G.cosine_matrix(M), dtype=float)
    assert np.allclose(cos[~np.eye(k, dtype=bool)], -1.0 / (k - 1))


def test_weighted_centering_of_an_of_is_not_an_etf():
    # reference values from spec/geometry.md for n = (5, 3, 2)
    F = G.orthogonal_frame(3)
    w = np.array([5, 3, 2]) / 10
    M = F - (F @ w)[:, None]
    cos = np.array(G.cosine_matrix(M), dtype=float)
    assert sorted([cos[0, 1], cos[0, 2], cos[1, 2]]) == pytest.approx([-0.7715, -0.5244, -0.1373], abs=5e-5)
    assert G.classify_gram(M.T @ M).classification == "other"


def test_unit_norm_zero_sum_is_not_enough_for_k4():
    # k = 4 unit vectors summing to zero that are not equiangular: +-e1, +-e2
    V = np.array([[1, -1, 0, 0], [0, 0, 1, -1.0]])
    assert np.allclose(V.sum(axis=1), 0) and np.allclose(np.linalg.norm(V, axis=0), 1)
    assert G.classify_gram(V.T @ V).classification == "other"


def test_zero_gram_is_zero_and_cosines_are_null():
    assert G.classify_gram(np.zeros((3, 3))).classification == "zero"
    assert G.cosine_matrix(np.zeros((2, 3))) == [[None] * 3] * 3


def test_etf_vs_of_squared_distance():
    k, r = 5, 1.7
    E, F = G.simplex_etf(k, k, r), G.orthogonal_frame(k, k, r)
    assert np.sum((E[:, 0] - E[:, 1]) ** 2) == pytest.approx(2 * r * r * k / (k - 1))
    assert np.sum((F[:, 0] - F[:, 1]) ** 2) == pytest.approx(2 * r * r)


def _collapsed(k=4, n=3, d=5, seed=0):
    E = G.simplex_etf(k, d)
    y = np.repeat(np.arange(k), n)
    return E[:, y], y, E.T.copy()


def test_nc_metrics_zero_at_exact_collapse():
    H, y, W = _collapsed()
    m = G.nc_metrics(H, y, W, np.zeros(4))
    for name in ("NC1", "NC1_pinv", "NC2_etf", "NC3", "NC4", "equinorm"):
        assert getattr(m, name) == pytest.approx(0.0, abs=1e-12), name
    assert m.NC2_of > 0.1  # an ETF is not an orthogonal frame


@given(seed=st.integers(0, 10**6), noise=st.floats(1e-3, 1.0))
def test_nc_metrics_positive_without_collapse(seed, noise):
    H, y, W = _collapsed()
    rng = np.random.default_rng(seed)
    Hn = H + noise * rng.standard_normal(H.shape)
    m = G.nc_metrics(Hn, y, W)
    assert m.NC1 > 0 and m.NC2_etf > 0 and m.NC3 > 0


def test_nc1_undefined_when_class_means_coincide():
    H = np.ones((3, 6))
    m = G.nc_metrics(H, np.repeat([0, 1, 2], 2))
    assert m.NC1 is None and m.NC2_etf is None and m.equinorm is None


def test_bad_inputs_name_the_parameter():
    H, y, W = _collapsed()
    with pytest.raises(InstanceError, match="labels: class 1 is empty"):
        G.nc_metrics(H[:, :3], np.array([0, 2, 2]))
    Hn = H.copy()
    Hn[0, 0] = np.nan
    with pytest.raises(InstanceError, match="H must contain only finite"):
        G.nc_metrics(Hn, y)
    with pytest.raises(InstanceError, match="W must be k x d = 4 x 5"):
        G.nc_metrics(H, y, W[:, :2])
    with pytest.raises(InstanceError, match=r"did you pass W\^T \(d x k\)\? transpose it"):
        G.nc_metrics(H, y, W.T)


def test_cosines_with_some_zero_columns_are_null_only_there():
    V = np.array([[1.0, 0.0, 2.0, 1e-12], [0.0, 0.0, 2.0, 0.0]])
    cos = G.cosine_matrix(V)
    for i in range(4):
        for j in range(4):
            if i in (1, 3) or j in (1, 3):
                assert cos[i][j] is None
    assert cos[0][2] == pytest.approx(1 / np.sqrt(2)) and cos[2][0] == pytest.approx(1 / np.sqrt(2))
    assert cos[0][0] == pytest.approx(1.0) and cos[2][2] == pytest.approx(1.0)


@pytest.mark.parametrize("k,r", [(2, 1.0), (3, 0.5), (6, 3.0)])
def test_classify_gram_reports_the_scale_it_normalises_away(k, r):
    # closed forms (spec/geometry.md): ETF Gram r^2 k/(k-1) J_k has trace k r^2 and Frobenius norm
    # r^2 k/(k-1) sqrt(k-1); the OF Gram r^2 I_k has norm r^2 sqrt(k)
    g = G.classify_gram(G.etf_gram(k, r))
    assert g.classification == "simplex-etf"
    assert g.trace == pytest.approx(k * r * r, rel=1e-12)
    assert g.scale == pytest.approx(r * r * k / (k - 1) * np.sqrt(k - 1), rel=1e-12)
    o = G.classify_gram(r * r * np.eye(k))
    assert o.classification == "orthogonal-frame" and o.scale == pytest.approx(r * r * np.sqrt(k), rel=1e-12)
    assert set(g.to_dict()) >= {"classification", "distance_etf", "distance_of", "tol", "scale", "trace"}


def test_zero_and_tiny_grams_are_zero_not_etf_or_other():
    for gram in (np.zeros((4, 4)), 1e-12 * G.etf_gram(4), 1e-11 * np.eye(4)):
        g = G.classify_gram(gram)
        assert g.classification == "zero" and g.is_zero
        assert g.distance_etf is None and g.distance_of is None
        assert g.scale <= G.ZERO_TOL
    # a caller that knows its scale can lower the threshold and read the scale back
    tiny = G.classify_gram(1e-12 * G.etf_gram(4), zero_tol=0.0)
    assert tiny.classification == "simplex-etf" and tiny.scale == pytest.approx(1e-12 * 4 / 3 * np.sqrt(3))
    # ... or raise it: an ETF of squared norm 1e-4 counts as zero at zero_tol = 1e-3
    assert G.classify_gram(1e-4 * G.etf_gram(4), zero_tol=1e-3).classification == "zero"


def test_geometry_class_built_by_hand_keeps_working():
    g = G.GeometryClass("simplex-etf", 0.0, 1.0, G.GEOMETRY_TOL)
    assert g.scale is None and g.to_dict()["classification"] == "simplex-etf"


@given(seed=st.integers(0, 10**6), d=st.integers(1, 12), k=st.integers(2, 5))
def test_nc1_pinv_equals_the_d_by_d_pseudo_inverse_formula(seed, d, k):
    # reference: the definition tr(Sigma_W Sigma_B^+)/k with d x d matrices and numpy's pinv
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), 3)
    H = rng.standard_normal((d, y.size))
    m = G.nc_metrics(H, y)
    mu = np.stack([H[:, y == c].mean(axis=1) for c in range(k)], axis=1)
    M = mu - mu.mean(axis=1, keepdims=True)
    dev = H - mu[:, y]
    Sw, Sb = dev @ dev.T / y.size, M @ M.T / k
    ref = float(np.trace(Sw @ np.linalg.pinv(Sb, rcond=1e-10, hermitian=True)) / k)
    if m.NC1 is None:
        assert m.NC1_pinv is None
    else:
        assert m.NC1_pinv == pytest.approx(ref, rel=1e-8, abs=1e-12)


def test_class_means_large_label_count_path_matches_the_definition():
    # k N > 5e7 takes the scatter-add path instead of the one-hot product
    rng = np.random.default_rng(0)
    k, N = 8000, 8000
    y = rng.permutation(np.arange(N) % k)
    H = rng.standard_normal((2, N))
    mu = G.class_means(H, y)
    assert np.allclose(mu[:, y], H)  # one sample per class: the mean is the sample
