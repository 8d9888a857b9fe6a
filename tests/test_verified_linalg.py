"""Verified floating-point linear algebra (solvers/rigorous/linalg.py, formerly solvers/verified_linalg.py; docs/rigorous.md "Large m: verified
floating point").

Independent references: singular values and eigenvalues of the *float* matrices under test computed by mpmath
at 50 digits (mpmath.svd_r / mpmath.eigsy on the exact doubles), never by the code under test.
"""

import math

import numpy as np
import pytest

mpmath = pytest.importorskip("mpmath")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from solvers.rigorous import linalg as VL  # noqa: E402

#: Tightness required on well-conditioned small matrices (n <= 8): the method's resolution is ~(n + 4)^2 u
#: relative (~2e-14 at n = 8), so 1e-10 leaves a wide margin and still catches a bound that is merely "valid".
TIGHT_RTOL = 1e-10


def _norm_mp(M) -> mpmath.mpf:
    """||M||_2 of the exact doubles of M, by mpmath at 50 digits."""
    with mpmath.workdps(50):
        A = mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in np.asarray(M)])
        return max(mpmath.svd_r(A, compute_uv=False))


def _lambda_min_mp(T) -> mpmath.mpf:
    with mpmath.workdps(50):
        A = mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in np.asarray(T)])
        return min(mpmath.eigsy(A, eigvals_only=True))


def _matrix(seed, m, n, scale, kind):
    """Random test matrices: Gaussian, rank-deficient (rank 1 .. min - 1), or with clustered top singular
    values (a cluster of 3 within 1e-13 relative, as at a UFM optimum where many equal lam)."""
    rng = np.random.default_rng(seed)
    if kind == "gauss":
        M = rng.standard_normal((m, n))
    elif kind == "rankdef":
        r = max(1, min(m, n) - 1)
        M = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
    else:
        U, _ = np.linalg.qr(rng.standard_normal((m, m)))
        V, _ = np.linalg.qr(rng.standard_normal((n, n)))
        k = min(m, n)
        s = np.sort(rng.uniform(0.1, 0.9, k))[::-1]
        s[:min(3, k)] = 1.0 - np.arange(min(3, k)) * 1e-13
        M = (U[:, :k] * s) @ V[:, :k].T
    return M * scale


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), m=st.integers(1, 7), n=st.integers(1, 7),
       e=st.integers(-8, 8), kind=st.sampled_from(["gauss", "rankdef", "cluster"]))
def test_spectral_norm_upper_is_an_upper_bound_and_tight(seed, m, n, e, kind):
    M = _matrix(seed, m, n, 10.0 ** e, kind)
    s = VL.spectral_norm_upper(M)
    true = _norm_mp(M)
    assert mpmath.mpf(s) >= true                                       # proven upper bound
    if kind != "rankdef":                                              # well conditioned: tight
        assert mpmath.mpf(s) <= true * (1 + TIGHT_RTOL) + mpmath.mpf(1e-300)
    else:                                                              # rank-deficient: within 1e-7 still
        assert mpmath.mpf(s) <= true * (1 + 1e-7) + mpmath.mpf(1e-300)


def test_spectral_norm_of_special_matrices():
    assert VL.spectral_norm_upper(np.zeros((3, 4))) == 0.0
    # one nonzero entry (norm = that entry), huge and tiny scales, subnormal entries
    for v in (1.0, 1e300, 1e-300, 5e-324):
        M = np.zeros((4, 3))
        M[2, 1] = v
        s = VL.spectral_norm_upper(M)
        assert s >= v and s <= v * (1 + 1e-12) + 1e-300
    M = np.full((5, 5), 1.0 / 3.0)          # rank one, norm 5/3 of the double 1/3 = 5 x fl(1/3)
    s = VL.spectral_norm_upper(M)
    assert mpmath.mpf(s) >= 5 * mpmath.mpf(1.0 / 3.0) and s <= 5 / 3 * (1 + 1e-10)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 6), e=st.integers(-8, 8),
       rad_rel=st.sampled_from([0.0, 1e-12, 1e-3, 0.5]))
def test_spectral_norm_upper_covers_every_matrix_in_the_balls(seed, n, e, rad_rel):
    """Every vertex M + S o Rad (S a sign matrix) and random interior points have ||.||_2 <= the bound."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, n + 1)) * 10.0 ** e
    Rad = np.abs(rng.standard_normal(M.shape)) * rad_rel * 10.0 ** e
    s = VL.spectral_norm_upper(M, Rad)
    # the worst vertex for the top singular pair of M: S = sign(u v^T) (and a few random ones)
    U, _, Vt = np.linalg.svd(M)
    signs = [np.sign(np.outer(U[:, 0], Vt[0])), np.ones(M.shape)] + [rng.choice([-1.0, 1.0], M.shape)
                                                                       for _ in range(3)]
    with mpmath.workdps(50):
        for S in signs:
            A = mpmath.matrix([[mpmath.mpf(float(M[i, j])) + int(S[i, j]) * mpmath.mpf(float(Rad[i, j]))
                                for j in range(M.shape[1])] for i in range(n)])
            assert mpmath.mpf(s) >= max(mpmath.svd_r(A, compute_uv=False))


def test_spectral_norm_upper_rejects_bad_input():
    with pytest.raises(ValueError):
        VL.spectral_norm_upper(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError):
        VL.spectral_norm_upper(np.eye(2), -np.ones((2, 2)))
    with pytest.raises(ValueError):
        VL.spectral_norm_upper(np.eye(2), np.ones((3, 3)))


def _sym_with_spectrum(seed, lam):
    rng = np.random.default_rng(seed)
    n = len(lam)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    T = (Q * np.asarray(lam)) @ Q.T
    return np.tril(T) + np.tril(T, -1).T     # exactly symmetric doubles


@pytest.mark.parametrize("rel", [1e-12, 1e-14, 1e-15])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_indefinite_matrix_is_rejected(seed, rel):
    """lambda_min(T) = -rel x ||T|| (checked at 50 digits on the doubles actually passed): never verified.
    A plain float Cholesky accepts some of these (the control below), so the shift of the theorem matters."""
    n = 20
    lam = np.linspace(1.0, 2.0, n)
    lam[0] = 0.0
    T = _sym_with_spectrum(seed, lam)
    # push the exact smallest eigenvalue of the double matrix to -rel x 2 (shift the diagonal; rounding checked)
    lmin = _lambda_min_mp(T)
    T = T - (float(lmin) + 2.0 * rel) * np.eye(n)
    T = np.tril(T) + np.tril(T, -1).T
    lm = _lambda_min_mp(T)
    assert lm < 0 and abs(lm + 2.0 * rel) < 2.0 * rel * 0.5 + 1e-15
    assert VL.is_positive_definite_verified(T) is False


def test_indefinite_gram_accepted_by_plain_cholesky_is_rejected():
    """The float Gram X X^T of a rank-deficient X (12 x 10) has an exact smallest eigenvalue of either sign at
    the 1e-16 level (50 digits on the doubles). A plain float Cholesky runs to completion on some of the
    indefinite ones (control: so the rejection is the theorem's shift at work; which seeds fool it depends on the
    LAPACK build, so seeds are drawn until two have); the verified test rejects every indefinite one seen."""
    n = 12
    fooled = 0
    for seed in range(200):
        if fooled >= 2:
            break
        X = np.random.default_rng(seed).standard_normal((n, n - 2))
        T = X @ X.T
        T = np.tril(T) + np.tril(T, -1).T
        if _lambda_min_mp(T) >= 0:
            continue
        try:
            np.linalg.cholesky(T)
            fooled += 1
        except np.linalg.LinAlgError:
            pass
        assert VL.is_positive_definite_verified(T) is False
    assert fooled >= 1


@pytest.mark.parametrize("n", [1, 5, 50, 300])
def test_positive_definite_matrix_is_verified(n):
    lam = np.linspace(1e-6, 1.0, n) if n > 1 else np.array([1e-6])
    T = _sym_with_spectrum(n, lam)
    ok, det = VL.is_positive_definite_verified(T, return_details=True)
    assert ok is True, det
    if n <= 50:
        assert _lambda_min_mp(T) > 0


def test_perturbation_radius_is_respected():
    """T is PD with lambda_min ~ 1e-3, but the balls |A - T| <= E contain T - 2e-3 v v^T-like matrices whose
    smallest eigenvalue is negative: must not be verified. A smaller E (1e-6) is verified."""
    n = 10
    lam = np.linspace(1e-3, 1.0, n)
    T = _sym_with_spectrum(3, lam)
    assert _lambda_min_mp(T) > 0
    E = np.full((n, n), 2e-3 / n)           # contains T - 2e-3 (1 1^T / n)-type matrices, and T - 2e-3/n I
    # witness: some matrix in the balls is indefinite (T - E o sign(v v^T) with v the bottom eigenvector)
    w, V = np.linalg.eigh(T)
    v = V[:, 0]
    A = T - E * np.sign(np.outer(v, v))
    assert _lambda_min_mp(np.tril(A) + np.tril(A, -1).T) < 0
    assert VL.is_positive_definite_verified(T, E) is False
    assert VL.is_positive_definite_verified(T, np.full((n, n), 1e-6 / n)) is True


def test_asymmetric_input_is_covered():
    """Only the lower triangle is factorised; an upper triangle that differs widens the perturbation (the
    statement covers the symmetric matrices between both)."""
    T = np.array([[1.0, 0.0], [0.0, 1.0]])
    T[0, 1] = 2.0                            # symmetric versions [[1, 0], [0, 1]] .. [[1, 2], [2, 1]]: indefinite
    assert VL.is_positive_definite_verified(T) is False
    T[0, 1] = 0.1
    assert VL.is_positive_definite_verified(T) is True


@pytest.mark.slow
@pytest.mark.parametrize("n", [1000, 2000])
def test_large_spectral_norm_against_lapack_svd(n):
    """Large n: against the float SVD (accurate to ~n u relative for this well-conditioned Gaussian matrix; the
    bound must be above it by less than 1e-8 relative and not below it by more than 1e-13)."""
    rng = np.random.default_rng(n)
    M = rng.standard_normal((n, n))
    s = VL.spectral_norm_upper(M)
    ref = float(np.linalg.svd(M, compute_uv=False)[0])
    assert s >= ref * (1 - 1e-13)
    assert s <= ref * (1 + 1e-8)
    assert math.isfinite(s)


@pytest.mark.parametrize("factor", [0.5, 0.999, 1.0, 2.0])
def test_a_wrong_estimate_never_gives_a_wrong_bound(factor):
    """The float estimate only chooses s: too low (no proof possible at s -> the Frobenius fallback) or too high
    (a looser bound); the result is an upper bound in every case (50-digit reference)."""
    M = _matrix(7, 6, 5, 3.0, "cluster")
    true = _norm_mp(M)
    s, det = VL.spectral_norm_upper(M, guess=float(true) * factor, return_details=True)
    assert mpmath.mpf(s) >= true
    if factor < 1:
        assert det["method"].startswith("Frobenius")
