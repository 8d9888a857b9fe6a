"""Verified linear algebra: LDL^T positive definiteness and eigenvalue / spectral-norm bounds of ball
matrices, and (folded in from the former ``solvers/verified_linalg.py``, at the end of this module) verified floating-point Cholesky and
spectral norms for matrices above DENSE_MAX (docs/rigorous.md).

Verified floating point (formerly solvers/verified_linalg.py): linear algebra in floating point (docs/rigorous.md, "Large m: verified floating point").

Two proven statements about *real* matrices, computed with numpy/LAPACK in float64 plus a priori
rounding-error bounds (no ball arithmetic, O(n^3) BLAS/LAPACK work):

- :func:`is_positive_definite_verified` (T, E): True only when every real symmetric A with |A - T| <= E
  (entrywise) is positive definite;
- :func:`spectral_norm_upper` (M, Rad): a double s with ||A||_2 <= s for every real A with |A - M| <= Rad.

The theorems (u = 2^-53, the unit roundoff of binary64; gamma_k = k u / (1 - k u)):

1. *Inner products in any order* (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., Lemma 3.1
   and eq. (3.5)): for the computed product C = fl(A B) with inner dimension p, |C - A B| <= gamma_p |A| |B|
   entrywise, whatever the order of summation (blocked GEMM/SYRK kernels, fused multiply-adds, threads: every
   entry is still a sum of the p products, each rounding step with relative error <= u; FMA only removes
   roundings). Not covered: Strassen-like fast multiplication (OpenBLAS, MKL, BLIS do not use it for dgemm).
2. *Cholesky backward error* (Demmel 1989; Higham, Theorem 10.3; used for verification by S. M. Rump,
   "Verification of positive definiteness", BIT Numerical Mathematics 46 (2006) 433-452, Theorem 2.3 / Corollary
   2.4, who states that it holds for any order of evaluation of the inner products, so for LAPACK's blocked
   ``dpotrf``): if the floating-point Cholesky factorisation of a symmetric float matrix A runs to completion
   (every pivot > 0, the factor finite), then R^T R = A + dA with |dA| <= gamma_{n+1} |R^T| |R|. With
   ||r_i||^2 = a_ii + da_ii this gives |dA_ij| <= g sqrt(a_ii a_jj), g = gamma_{n+1} / (1 - gamma_{n+1}), so
   ||dA||_2 <= g tr(A), and A + dA = R^T R is positive definite (R is triangular with a positive diagonal), hence
   lambda_min(A) > -g tr(A). We use gamma_{n+CHOL_EXTRA} instead of gamma_{n+1}: triangular solves that multiply
   by a precomputed reciprocal of the pivot (OpenBLAS's trsm kernels do) add one rounding per entry.
3. *Weyl*: lambda_min(A + F) >= lambda_min(A) - ||F||_2 for symmetric F, and ||F||_2 <= || |F| ||_2 <=
   min(||E||_F, ||E||_inf) for |F| <= E (Perron-Frobenius monotonicity of the spectral norm on nonnegative
   matrices; E symmetric).

Assumptions (stated, not checked): IEEE 754 binary64 arithmetic with rounding to nearest in numpy and in the
BLAS/LAPACK it links (the default; no x87 extended precision: numpy on x86-64 and aarch64 uses SSE/AVX/NEON
registers), conventional (not Strassen) matrix multiplication. Underflow is handled by an absolute allowance
per operation of REALMIN = 2^-1022 (it also covers flush-to-zero and denormals-are-zero modes), made
negligible by scaling every input by a power of two first (so the largest entry is in [1/2, 1)). Overflow
cannot go unnoticed: every computed quantity is checked finite. Every bound is evaluated in floating point
with its own rounding; each is inflated by SAFETY (1 + 2^-30 >> 1 + (number of operations) u for the
dimensions allowed, n <= MAX_N) and the absolute allowances, so the evaluation of a bound never lowers it.

Accuracy: the proof needs a gap of about (n + CHOL_EXTRA) u tr(T) + ||E||_2 between lambda_min(T) and 0; for
spectral_norm_upper(M) the proven s is about ||M||_2 (1 + n^2 u) at worst (measured: a few 1e-12 relative at
n = 200, ~1e-10 at n = 2000).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from solvers.rigorous.balls import (  # noqa: F401
    NotCertified, Unsupported, _Precision, exact, lower_float, upper_float,
)


# ---------------------------------------------------------------------------------------------------
# Dense symmetric ball matrices: a verified lower bound on the smallest eigenvalue (small k)
# ---------------------------------------------------------------------------------------------------

#: Dense ball verification (LDL^T in Python-level ball arithmetic, O(k^3 / 6) operations) is used up to
#: this size; larger matrices must come with their structure (analytic eigenvalues).
DENSE_MAX = 120


def ldl_positive_definite(S) -> bool:
    """True when the symmetric ball matrix S (list of lists of arb) is positive definite for every matrix
    in the balls: the LDL^T elimination runs with every pivot certainly > 0 (Sylvester: the pivots are
    ratios of leading principal minors; a ball enclosure of each pivot that excludes 0 and is positive
    proves every leading minor positive for every enclosed matrix)."""
    from flint import arb

    k = len(S)
    A = [list(row) for row in S]  # only the lower triangle A[i][m], m <= i, is read and updated
    zero = arb(0)
    for j in range(k):
        d = A[j][j]
        if not d > zero:
            return False
        inv = 1 / d
        colj = [A[m][j] for m in range(k)]
        for i in range(j + 1, k):
            lij = colj[i] * inv
            if lij.is_zero():
                continue
            Ai = A[i]
            for m in range(j + 1, i + 1):
                Ai[m] = Ai[m] - lij * colj[m]
    return True


def lambda_min_lower(S, guess: float | None = None):
    """A ball whose lower end bounds the smallest eigenvalue of every symmetric matrix in the ball matrix S
    from below: sigma such that S - sigma I is verified positive definite by :func:`ldl_positive_definite`,
    with sigma just below the float estimate ``guess`` (tried at increasing distances); falls back to
    Gershgorin's bound min_i (S_ii - sum_j |S_ij|)."""
    from flint import arb

    k = len(S)
    gersh = None
    for i in range(k):
        r = S[i][i] - sum((abs(S[i][j]) for j in range(k) if j != i), arb(0))
        gersh = r if gersh is None else gersh.min(r)
    g_lo = arb(lower_float(gersh))
    if guess is None or not math.isfinite(guess) or k > DENSE_MAX:
        return g_lo
    scale = max(max(abs(float(S[i][j].mid())) for i in range(k) for j in range(k)), 1e-300)
    for rel in (1e-13, 1e-10, 1e-7, 1e-4):
        sigma = guess - rel * scale * k
        if sigma <= float(g_lo.mid()):
            break
        sb = arb(sigma)
        T = [[S[i][j] - (sb if i == j else 0) for j in range(k)] for i in range(k)]
        if ldl_positive_definite(T):
            return sb
    return g_lo




#: Working precision of the LDL^T test of s^2 I - R^T R. At an optimum many singular values of the dual matrix
#: equal lam (one per active direction), so s^2 I - R^T R has a cluster of eigenvalues ~1e-12 s^2 and the radii
#: of a 128-bit elimination grow past it (measured: long tail k = 200, 84 groups, verified only at s = (1 + 1e-6)
#: x the float estimate at 128 bits, at 1 + 1e-12 at 256 bits, for ~0.1 s more). The input radii matter as
#: well, so ``ufm_general_grouped`` builds the whole dual point at (at least) this precision.
SPECTRAL_LDL_BITS = 256
#: Relative distances above the float estimate tried for s (each one LDL^T; ~0.05 s at m = 84).
SPECTRAL_RELS = (1e-13, 1e-12, 3e-12, 1e-11, 1e-10, 1e-9, 1e-7, 1e-5, 1e-3)


def _spectral_upper_dense(R, guess: float):
    """A ball s with ||R||_2 <= s for every matrix in the ball matrix R (m x m, m <= DENSE_MAX): s^2 I - R^T R
    verified positive definite by LDL^T, s^2 just above the float estimate ``guess`` (tried at increasing
    distances); when none is verified, the Frobenius norm in balls (a valid, looser bound)."""
    from flint import arb

    m = len(R)
    if m > DENSE_MAX:
        raise Unsupported(f"reduced dual matrix of size {m} > {DENSE_MAX} (dense LDL^T in balls)")
    import flint

    with _Precision(max(flint.ctx.prec, SPECTRAL_LDL_BITS)):
        RtR = [[sum((R[l][i] * R[l][j] for l in range(m)), arb(0)) for j in range(m)] for i in range(m)]
        g = max(float(guess), 1e-300)
        for rel in SPECTRAL_RELS:
            s = arb(g * (1.0 + rel))
            s2 = s * s
            S = [[(s2 if i == j else 0) - RtR[i][j] for j in range(m)] for i in range(m)]
            if ldl_positive_definite(S):
                return s
    # fallback (for example a matrix that is 0 up to round-off): ||R||_2 <= ||R||_F, in balls
    # (entrywise upper ends as exact doubles first: the square of a ball around 0 may contain negatives)
    fro = sum((arb(upper_float(abs(x))) ** 2 for row in R for x in row), arb(0)).sqrt()
    if not fro.is_finite():
        raise NotCertified("spectral norm of the reduced dual matrix not bounded (LDL^T and Frobenius in balls)")
    return arb(upper_float(fro))


#: Largest number of groups of exchangeable classes for ``ufm_general_grouped``. Up to DENSE_MAX the spectral norm
#: of the reduced m x m form is verified by LDL^T in balls; above, by the verified floating-point Cholesky of
#: the verified floating point below (docs/rigorous.md "Large m: verified floating point"): O(m^3) BLAS/LAPACK work,
#: ~3 s at m = 2000 (the O(m^2) ball loops of the dual point and of the feasible value cost more).
VERIFIED_MAX = 2500


def ball_matrix_float_enclosure(B):
    """(Mid, Rad) float64 arrays with |x - Mid| <= Rad for every point x of every ball of the ball matrix B (list
    of lists of arb): Mid = the ball midpoints rounded to doubles, Rad = the ball radius (rounded up) + the
    rounding of the midpoint (< 2^-52 |Mid|, or < 2^-1022 in the subnormal range), evaluated upward."""
    import numpy as np

    Mid = np.array([[float(x) for x in row] for row in B], dtype=float)
    Rr = np.array([[float(x.rad()) for x in row] for row in B], dtype=float)
    if not (np.all(np.isfinite(Mid)) and np.all(np.isfinite(Rr))):
        raise NotCertified("a ball of the matrix is not finite (or outside the double range)")
    Rad = (Rr * (1.0 + 2.0 ** -50) + np.abs(Mid) * 2.0 ** -51) * (1.0 + 2.0 ** -50) + 2.0 ** -1021
    return Mid, Rad


def _spectral_upper_verified(R):
    """A ball (exact double) s with ||R||_2 <= s for every matrix in the ball matrix R of any size up to
    VERIFIED_MAX: ``spectral_norm_upper`` (verified floating point, below) on the float enclosure (Mid, Rad) of R (the
    verified floating-point Cholesky of s^2 I - Mid^T Mid after Rump 2006, plus ||Rad||_2). Returns (s, details)."""
    
    Mid, Rad = ball_matrix_float_enclosure(R)
    try:
        s, det = spectral_norm_upper(Mid, Rad, return_details=True)
    except (ValueError, OverflowError) as exc:
        raise NotCertified(f"spectral norm of the reduced dual matrix not bounded: {exc}") from exc
    if not math.isfinite(s):
        raise NotCertified("spectral norm of the reduced dual matrix not bounded (verified floating point)")
    return exact(s), det




# ---------------------------------------------------------------------------------------------------
# Verified floating point (no balls): O(n^3) BLAS/LAPACK work with a priori rounding-error bounds
# ---------------------------------------------------------------------------------------------------

#: Unit roundoff of IEEE binary64 (round to nearest).
U = 2.0 ** -53
#: Smallest positive normal double: the absolute allowance per operation for underflow (gradual underflow errs
#: by at most 2^-1075 per operation; flush-to-zero by less than REALMIN).
REALMIN = 2.0 ** -1022
#: Relative inflation of every bound evaluated in floating point with a few roundings of relative size u
#: (2^-30 ~ 9.3e-10 >> 10 u). Long sums (n^2 terms) carry their own factor 1 + gamma_{len} instead (_sum_up).
SAFETY = 1.0 + 2.0 ** -30
#: Extra roundings per entry allowed in the Cholesky backward error bound (theorem 2 in the module docstring):
#: gamma_{n+1} for division by the pivot, + 1 for a multiplication by a rounded reciprocal, + 2 spare.
CHOL_EXTRA = 4
#: Largest dimension accepted (the a priori bounds need (n + CHOL_EXTRA) u << 1; memory of a few n x n arrays).
MAX_N = 5000


def gamma(k: int) -> float:
    """An upper bound (a double) of gamma_k = k u / (1 - k u)."""
    k = int(k)
    if k < 0 or k * U >= 0.5:
        raise ValueError(f"gamma_k needs 0 <= k u < 1/2, got k = {k}")
    return _up(k * U / (1.0 - k * U))


def _up(x):
    """x (a nonnegative float or array computed with a few roundings) inflated to an upper bound."""
    return np.multiply(x, SAFETY) + REALMIN if isinstance(x, np.ndarray) else x * SAFETY + REALMIN


def _sum_up(a) -> float:
    """An upper bound of the exact sum of the nonnegative array ``a`` (any summation order in numpy): the
    computed sum times 1 + gamma_{len} (Higham, eq. (4.4)), plus an underflow allowance."""
    a = np.asarray(a, dtype=float).ravel()
    n = a.size
    if n == 0:
        return 0.0
    s = float(np.sum(a))
    return (s * (1.0 + gamma(n + 1)) + (2 * n + 2) * REALMIN) * SAFETY


def _sqrt_up(x: float) -> float:
    """An upper bound of sqrt(x) for a double x >= 0 (sqrt is correctly rounded; one step up)."""
    return math.nextafter(math.sqrt(x), math.inf)


def _add_up(a: float, b: float) -> float:
    return math.nextafter(a + b, math.inf)


def _pow2_scale(max_abs: float) -> int:
    """k with max_abs * 2^-k in [1/2, 1) (0 for max_abs = 0)."""
    if max_abs == 0.0:
        return 0
    return math.frexp(max_abs)[1]


def _check_array(name, X, square=False):
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got shape {X.shape}")
    if square and X.shape[0] != X.shape[1]:
        raise ValueError(f"{name} must be square, got shape {X.shape}")
    if max(X.shape) > MAX_N:
        raise ValueError(f"{name}: dimension {max(X.shape)} > {MAX_N} (the a priori error bounds need n u << 1)")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} must be finite")
    return X


def norm2_upper_of_nonneg(E) -> float:
    """An upper bound of ||E||_2 for a nonnegative matrix E: min(||E||_F, sqrt(||E||_1 ||E||_inf)), both
    evaluated upward (after scaling by a power of two, so that squares neither overflow nor underflow)."""
    E = np.asarray(E, dtype=float)
    if E.size == 0:
        return 0.0
    if not np.all(np.isfinite(E)) or np.any(E < 0):
        return math.inf
    mx = float(E.max())
    if mx == 0.0:
        return 0.0
    k = _pow2_scale(mx)
    Es = np.ldexp(E, -k) + REALMIN           # >= E 2^-k entrywise (scaling is exact except for subnormals)
    fro = _sqrt_up(_sum_up(Es * Es))
    col = float(np.max(Es.sum(axis=0))) * (1.0 + gamma(E.shape[0] + 1)) * SAFETY
    row = float(np.max(Es.sum(axis=1))) * (1.0 + gamma(E.shape[1] + 1)) * SAFETY
    mixed = _sqrt_up(_up(col * row))
    return math.ldexp(_up(min(fro, mixed)), k)


def is_positive_definite_verified(T, E=None, *, return_details: bool = False):
    """True only when every real symmetric matrix A with |A - T| <= E entrywise is positive definite.

    ``T``: a symmetric float64 matrix (only its lower triangle is used; an asymmetry is added to E), ``E`` >= 0
    (default 0: the statement is about the float matrix T itself, exactly).

    Method (S. M. Rump, "Verification of positive definiteness", BIT 46 (2006) 433-452; see the module
    docstring for the theorems and assumptions): scale T and E by a power of two (exact up to an underflow
    allowance); f >= ||E||_2 (theorem 3); c = f + g tr(T+) + 2 u max T_ii + (underflow allowance), g =
    gamma_{n+4} / (1 - gamma_{n+4}); the Cholesky factorisation (LAPACK ``dpotrf`` through numpy) of the float
    matrix fl(T - c I) runs to completion. Then lambda_min(fl(T - c I)) > -g tr(fl(T - c I)) (theorem 2),
    |T - c I - fl(T - c I)| <= 2 u max T_ii on the diagonal, so lambda_min(T) > c - g tr(T+) - 2 u max T_ii -
    allowance >= f >= ||A - T||_2, and A is positive definite (theorem 3). False means "not proven" (the
    matrix may still be positive definite, with a margin below the method's resolution ~ n u tr(T)).

    With ``return_details``: (bool, dict) with the shift c, f and the reason when False."""
    T = _check_array("T", T, square=True)
    n = T.shape[0]
    Tl = np.tril(T)
    Ts = Tl + np.tril(T, -1).T
    if E is None:
        E = np.zeros_like(Ts)
    else:
        E = _check_array("E", E, square=True)
        if E.shape != T.shape:
            raise ValueError(f"E must have the shape of T {T.shape}, got {E.shape}")
        if np.any(E < 0):
            raise ValueError("E must be >= 0 entrywise")
    asym = np.abs(T - Ts)
    if np.any(asym):
        E = E + asym                      # T's upper triangle differs from its lower one: cover both
        E = _up(np.maximum(E, E.T))

    def out(ok, **det):
        return (ok, det) if return_details else ok

    if n == 0:
        return out(True, reason="empty matrix")
    # scale by a power of two: PD is invariant; ldexp is exact except for entries that become subnormal
    # (error < REALMIN each, added to E)
    k = _pow2_scale(float(max(np.abs(Ts).max(), E.max())))
    Ts = np.ldexp(Ts, -k)
    E = np.ldexp(E, -k) + REALMIN
    f = norm2_upper_of_nonneg(np.maximum(E, E.T))
    d = np.diag(Ts)
    if not np.all(d > f):                 # a diagonal entry of some A may be <= 0
        return out(False, reason="a diagonal entry is not above the perturbation bound", f=f)
    g = gamma(n + CHOL_EXTRA)
    g = _up(g / (1.0 - g))
    trT = _sum_up(d)
    dmax = float(d.max())
    # underflow allowance in the Cholesky (each of the <= n^2 products and divisions per entry errs by less
    # than REALMIN times an entry bound 1 + dmax; norm of the n x n allowance matrix <= n x entry allowance)
    uf = _up(4.0 * (n + 2) ** 2 * n * (1.0 + dmax) * REALMIN)
    c = _up(f + g * trT + 2.0 * U * dmax * (1.0 + 2.0 * U) + uf)
    A = Ts.copy()
    A[np.diag_indices(n)] = d - c
    Ad = np.diag(A)
    if not np.all(Ad > 0):
        return out(False, reason="diagonal not above the Cholesky shift", c=c, f=f)
    # tr(A) <= tr(T): A_ii = fl(T_ii - c) <= T_ii because c > 0 and rounding is monotone; so g tr(T) bounds the
    # Cholesky backward error of the matrix actually factorised
    # LAPACK dpotrf (blocked, BLAS-3 updates) on the lower triangle; A is exactly symmetric, so the memory order
    # does not matter. info > 0: a pivot <= 0 or NaN (the factorisation did not run to completion).
    from scipy.linalg import lapack

    R, info = lapack.dpotrf(A, lower=1, clean=1, overwrite_a=1)
    if info != 0:
        return out(False, reason=f"floating-point Cholesky of T - c I did not run to completion (info {info})",
                   c=c, f=f)
    if not (np.all(np.isfinite(R)) and np.all(np.diag(R) > 0)):
        return out(False, reason="Cholesky factor not finite or a pivot not > 0", c=c, f=f)
    return out(True, reason="Cholesky of T - c I ran to completion", c=math.ldexp(c, k), f=math.ldexp(f, k))


def gram_enclosure(M):
    """(C, E) with |C - M^T M| <= E entrywise for the float matrix M (any shape): C = fl(M^T M) by BLAS and
    E = g (fl(|M|^T |M|) + 2p REALMIN) + 2p REALMIN, g = gamma_p / (1 - gamma_p), p the inner dimension
    (theorem 1 of the module docstring, applied to M^T M and, for the bound of |M|^T |M| itself, to
    |M|^T |M|: its exact value is <= (fl(|M|^T |M|) + 2p REALMIN) / (1 - gamma_p)); 2p REALMIN: underflow of
    the p products and p - 1 additions of each entry. Both symmetric exactly
    (symmetrised from the lower triangle; the difference is added to E)."""
    M = _check_array("M", M)
    p = M.shape[0]
    C = M.T @ M
    Ab = np.abs(M)
    P = Ab.T @ Ab
    g = gamma(p)
    g = _up(g / (1.0 - g))
    # underflow: each of the p products and p - 1 additions of a dot product errs by < REALMIN (gradual
    # underflow or flush-to-zero), so 2p REALMIN per entry
    E = _up(g * (P + 2 * p * REALMIN) + 2 * p * REALMIN)
    Cs = np.tril(C) + np.tril(C, -1).T
    E = E + np.abs(C - Cs)
    E = np.maximum(E, E.T)
    if not (np.all(np.isfinite(C)) and np.all(np.isfinite(E))):
        raise OverflowError("M^T M overflows")
    return Cs, E


def _lambda_max_estimate(C) -> float:
    """A float estimate of the largest eigenvalue of the symmetric C (only a choice: the proof decides):
    Lanczos (ARPACK) for n > 200, else (or when ARPACK does not converge) LAPACK's eigh."""
    n = C.shape[0]
    if n > 200:
        try:
            from scipy.sparse.linalg import eigsh

            v = eigsh(C, k=1, which="LA", tol=0, v0=np.ones(n), return_eigenvectors=False)
            return float(v[0])
        except Exception:  # noqa: BLE001 - any ARPACK trouble: fall back to the dense solver
            pass
    from scipy.linalg import eigh

    return float(eigh(C, eigvals_only=True, subset_by_index=[n - 1, n - 1])[0])


#: Relative distances above the float estimate of ||M||_2^2 tried for s^2, as multiples of the shift that the
#: verification needs (each try is one Cholesky); the last ones absorb a poor estimate.
SPECTRAL_STEPS = (2.0, 8.0, 64.0, 1024.0)


def spectral_norm_upper(M, Rad=None, *, guess: float | None = None, return_details: bool = False):
    """A double s >= ||A||_2 for every real matrix A with |A - M| <= Rad entrywise (M float64, Rad >= 0,
    default 0: then s bounds the norm of the float matrix M itself).

    ||A||_2 <= ||M||_2 + ||Rad||_2 (Weyl / triangle inequality; ||A - M||_2 <= || |A - M| ||_2 <= ||Rad||_2 by
    monotonicity on nonnegative matrices), ||Rad||_2 bounded by :func:`norm2_upper_of_nonneg`. For ||M||_2
    (M scaled by a power of two so that max |M_ij| is in [1/2, 1): exact up to subnormals, whose loss is added):
    with the Gram matrix of the smaller side, (C, E) = :func:`gram_enclosure` (theorem 1), the exact Gram matrix
    lies in C +- E; s2 a double just above the float estimate of lambda_max(C) (``guess`` = an estimate of
    ||M||_2, else LAPACK's largest eigenvalue of C), and s2 I - M^T M is proven positive definite by
    :func:`is_positive_definite_verified` on T = fl(s2 I - C) with E + the rounding of the diagonal (theorems 2,
    3). Then ||M||_2 < sqrt(s2), rounded up. s2 is raised stepwise (SPECTRAL_STEPS times the shift the proof
    needs, about (n + 4) u tr(T) + ||E||_2) until the proof succeeds; when none does, the Frobenius norm
    (evaluated upward) is returned, a valid and looser bound.

    With ``return_details``: (s, dict) with the method used and the relative excess over the float estimate."""
    M = _check_array("M", M)
    rad_norm = 0.0
    if Rad is not None:
        Rad = _check_array("Rad", Rad)
        if Rad.shape != M.shape:
            raise ValueError(f"Rad must have the shape of M {M.shape}, got {Rad.shape}")
        if np.any(Rad < 0):
            raise ValueError("Rad must be >= 0 entrywise")
        rad_norm = norm2_upper_of_nonneg(Rad)
    det = {}

    def out(s):
        s = _add_up(s, rad_norm) if rad_norm else s
        return (s, det) if return_details else s

    if M.size == 0:
        det["method"] = "empty"
        return out(0.0)
    mx = float(np.abs(M).max())
    if mx == 0.0:
        det["method"] = "zero matrix"
        return out(0.0)
    k = _pow2_scale(mx)
    Ms = np.ldexp(M, -k)
    # entries that became subnormal lost < REALMIN each: ||loss||_2 <= sqrt(#entries) REALMIN
    loss = _up(math.sqrt(M.size) * REALMIN) if np.any(np.abs(Ms) < REALMIN) else 0.0
    if Ms.shape[0] < Ms.shape[1]:
        Ms = Ms.T                           # Gram of the smaller side: ||M||_2 = ||M^T||_2
    n = Ms.shape[1]
    C, E = gram_enclosure(Ms)
    fro2 = _sum_up(Ms * Ms)                 # ||M||_F^2 upward (fallback and trace bound)
    fro = _sqrt_up(fro2)
    if guess is not None and math.isfinite(guess) and guess > 0:
        lam = (float(guess) * 2.0 ** -k) ** 2
    else:
        lam = _lambda_max_estimate(C)
    lam = max(lam, 0.0)
    f = norm2_upper_of_nonneg(E)
    g = gamma(n + CHOL_EXTRA)
    g = _up(g / (1.0 - g))
    trC = float(np.trace(C))
    tries = []
    best = None
    bases = [lam]
    if guess is None or not (math.isfinite(guess) and guess > 0):
        bases.append(None)                  # a second estimate (dense eigh) if the first one does not verify
    for base in bases:
        if base is None:
            from scipy.linalg import eigh

            base = max(float(eigh(C, eigvals_only=True, subset_by_index=[n - 1, n - 1])[0]), 0.0)
            if base <= lam:
                break
        best = _try_shifts(C, E, base, f, g, n, trC, fro2, tries)
        if best is not None:
            break
    if best is not None:
        s = _sqrt_up(best)
        det.update(method="verified Cholesky of s^2 I - M^T M (Rump 2006)", tries=len(tries),
                   relative_excess=(s / math.sqrt(lam) - 1.0) if lam > 0 else None)
    else:
        s = fro
        det.update(method="Frobenius norm (verified Cholesky not conclusive)", tries=len(tries))
    s = math.ldexp(_add_up(s, loss), k)
    if not math.isfinite(s):
        raise OverflowError("spectral norm bound overflows")
    return out(s)


def _try_shifts(C, E, base, f, g, n, trC, fro2, tries):
    """The first s2 = base + step x (the shift the proof needs) for which s2 I - (C +- E) is proven positive
    definite, or None."""
    for step in SPECTRAL_STEPS:
        # the shift the proof needs at s2 ~ base: f + g tr(s2 I - C) + 2 u s2 + (diag rounding of T ~ u s2)
        need = f + g * (max(n * base - trC, 0.0) + 8.0 * n * U * base) + 4.0 * U * base
        s2 = base + step * need + 4.0 * U * base   # a choice (the proof decides); no inflation needed
        if s2 > fro2:                       # the Frobenius bound is better: no need to go on
            break
        T = -C.copy()
        T[np.diag_indices(n)] = s2 - np.diag(C)
        ET = E.copy()
        ET[np.diag_indices(n)] += _up(2.0 * U * np.abs(np.diag(T)))   # rounding of s2 - C_ii
        ok = is_positive_definite_verified(T, ET)
        tries.append((step, s2))
        if ok:
            return s2
    return None
