"""Rigorous (ball-arithmetic) bracket of the regression UFM optimum (docs/rigorous.md, "Regression";
docs/ufm_general.md, "Regression").

Problem (targets Y, N x m; W m x d, H d x N, free bias b):

    min (1/(2N)) ||W H + b 1^T - Y^T||_F^2 + (lw/2) ||W||_F^2 + (lh/2) ||H||_F^2,

for d >= rank Z* equal to the convex problem min_{Z, b} (1/(2N)) ||Z + b 1^T - Y^T||^2 + lam ||Z||_*,
lam = sqrt(lw lh) (at a balanced factorization (lw/2)||W||^2 + (lh/2)||H||^2 = lam (||P||^2 + ||Q||^2)/2 with
W = (lh/lw)^{1/4} P, H = (lw/lh)^{1/4} Q, Z = P Q).

Weak duality (docs/rigorous.md "Regression"): for every V (m x N) with V 1 = 0 and ||V||_2 <= lam,
lam ||Z||_* >= <V, Z> = <V, Z + b 1^T> (norm duality; V 1 = 0), so with U = Z + b 1^T

    f* >= min_U (1/(2N)) ||U - Y^T||^2 + <V, U> = D(V) = <V, Y^T> - (N/2) ||V||_F^2

(the minimiser is U = Y^T - N V: this is minus the conjugate of the squared error).
At the optimum V* = (Yc - Z*)/N = U diag(min(s_j, N lam)) W^T / N (Yc = U diag(s) W^T the centred targets),
and D(V*) = f*.

Recipe, every inequality decided in balls (python-flint arb):
1. dual point: the float matrix Vf = U diag(min(s, N lam)) W^T / N from the float SVD (this form, not
   (Yc - Z)/N, keeps the top singular values of Vf at lam up to a few ulps of lam, independent of ||Yc||),
   converted exactly; the bias constraint is enforced exactly by projection in balls, V := Vf - mu 1^T with
   mu = Vf 1 / N (the exact projected matrix has row sums exactly 0; ``project=False`` instead requires
   Vf 1 = 0 exactly);
2. ||V||_2 <= s proven by LDL^T of s^2 I - G, G = V V^T (m <= N) or V^T V (N < m) formed in balls with
   python-flint's arb_mat products (s just above the float estimate); the smaller side must be <= 120;
3. t: the largest convenient double <= 1 with t s <= lam for every point of the balls;
4. lower bound: D(t V) = t <V, Y^T> - t^2 (N/2) tr G, in balls;
5. feasible value: the candidate Z = P Q with P = U_r sqrt(z), Q = sqrt(z) W_r^T (z = max(s - N lam, 0) > 0,
   exact doubles, so the candidate is the exact product), b the exact best bias for it (row means of
   Y^T - P Q); value (1/(2N)) ||(Y^T - P Q)(I - 11^T/N)||^2 + lam (||P||_F^2 + ||Q||_F^2)/2 in balls, reported
   when d >= r (the number of columns of P), else ``upper`` is None with a note.

python-flint is imported lazily (it is optional).
"""

from __future__ import annotations

import hashlib
import math
import os
import time

import numpy as np

from solvers.rigorous.balls import (  # noqa: F401
    NotCertified, RigorousBound, Unsupported, _Precision, _Timer, _scale_down, certainly_le, exact,
    lower_float, upper_float,
)
from solvers.rigorous.linalg import (  # noqa: F401
    DENSE_MAX, SPECTRAL_LDL_BITS, SPECTRAL_RELS, ldl_positive_definite,
)

#: Targets listed inline in the report's instance when N m is at most this (so `--rigorous` can rebuild the
#: instance from the report alone); larger targets are referenced by the file path and its sha256.
INLINE_TARGETS_MAX = 10_000

#: A float singular value z_j = s_j - N lam of the candidate is dropped when z_j <= this x eps x s_max
#: (float SVD noise of a rank-deficient Yc: such components are not part of the closed form; dropping them is
#: only a choice of candidate, the feasible value stays an exact evaluation).
RANK_NOISE_ULPS = 64

#: Relative distances above the float estimate of ||V||_2 tried for s (each one LDL^T of at most 120 x 120). The
#: float closed form's dual point has its top singular values at lam to a few ulps, so the first steps usually
#: verify (bracket width ~1e-15 relative; measured); then the general steps of solvers.rigorous.
REGRESSION_RELS = (1e-15, 1e-14) + tuple(SPECTRAL_RELS)


def targets_sha256(Y) -> str:
    """sha256 of the targets as little-endian float64 in C order (what the report stores and the recipe checks)."""
    A = np.ascontiguousarray(np.asarray(Y, dtype="<f8"))
    return hashlib.sha256(A.tobytes()).hexdigest()


def _check_targets(Y) -> np.ndarray:
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or Y.shape[0] < 1 or Y.shape[1] < 1 or not np.all(np.isfinite(Y)):
        raise NotCertified("targets must be a finite (N, m) array")
    return Y


def float_dual_and_candidate(Y: np.ndarray, lw: float, lh: float):
    """(Vf, P, Q) from the float SVD of the centred targets: Vf = U diag(min(s, N lam)) W^T / N (m x N), the
    candidate Z = P Q with P = U_r sqrt(z_r), Q = sqrt(z_r) W_r^T, z = s - N lam > 0 (noise dropped)."""
    N, m = Y.shape
    lam = math.sqrt(float(lw) * float(lh))
    Yc = (Y - Y.mean(axis=0)).T
    U, s, Wt = np.linalg.svd(Yc, full_matrices=False)
    c = N * lam
    Vf = (U * (np.minimum(s, c) / N)) @ Wt
    z = s - c
    smax = float(s[0]) if s.size else 0.0
    keep = z > RANK_NOISE_ULPS * np.finfo(float).eps * smax * max(N, m)
    sq = np.sqrt(z[keep])
    P = U[:, keep] * sq[None, :]
    Q = sq[:, None] * Wt[keep, :]
    return Vf, P, Q


def _amat(A):
    from flint import arb_mat

    A = np.asarray(A, dtype=float)
    return arb_mat(A.tolist()) if A.size else arb_mat(A.shape[0], A.shape[1])


def _ones(n: int):
    from flint import arb_mat

    return arb_mat(n, 1, [1] * n)


def _vdot(A, B):
    """<A, B> (same shapes, doubles) in balls: one 1 x n by n x 1 product of exact entries."""
    from flint import arb, arb_mat

    a, b = np.asarray(A, dtype=float).ravel(), np.asarray(B, dtype=float).ravel()
    if a.size == 0:
        return arb(0)
    return (arb_mat(1, a.size, a.tolist()) * arb_mat(b.size, 1, b.tolist()))[0, 0]


def _gram_spectral_upper(G, guess: float):
    """A ball s with s^2 >= lambda_max(G) for every matrix in the symmetric ball matrix G (an arb_mat Gram
    matrix of size <= DENSE_MAX): s^2 I - G verified positive definite by LDL^T, s just above the float estimate
    ``guess`` of sqrt(lambda_max) (relative steps SPECTRAL_RELS); fallback sqrt(tr G) (Frobenius, looser)."""
    from flint import arb

    k = G.nrows()
    if k > DENSE_MAX:
        raise Unsupported(f"Gram matrix of size {k} > {DENSE_MAX} (dense LDL^T in balls)")
    rows = G.tolist()
    g = float(guess)
    if math.isfinite(g) and g > 0.0:
        for rel in REGRESSION_RELS:
            s = arb(g * (1.0 + rel))
            s2 = s * s
            S = [[(s2 if i == j else 0) - rows[i][j] for j in range(k)] for i in range(k)]
            if ldl_positive_definite(S):
                return s
    tr = sum((rows[i][i] for i in range(k)), arb(0))
    hi = upper_float(tr)
    if not math.isfinite(hi):
        raise NotCertified("spectral norm of the dual point not bounded (LDL^T and Frobenius in balls)")
    return arb(max(hi, 0.0)).sqrt()


def regression_from_targets(Y, lw: float, lh: float, d: int, *, prec: int = 128, dual=None,
                            project: bool = True, scale: float | None = None) -> RigorousBound:
    """Rigorous bracket [lower, upper] of the regression UFM optimum for targets ``Y`` (N x m doubles: they are
    the instance), weight decays ``lw``, ``lh`` and feature dimension ``d`` (module docstring).

    ``dual`` (m x N doubles, optional): a given dual point V instead of the float closed form's (sign convention
    V = (Yc - Z*)/N); ``project=False``: reject it unless V 1 = 0 holds exactly (instead of projecting);
    ``scale``: a forced t, rejected unless t ||V||_2 <= lam is certain. Raises Unsupported when both N and m
    exceed 120 (dense LDL^T), NotCertified when a ball check fails."""
    Y = _check_targets(Y)
    N, m = Y.shape
    small = min(N, m)
    if small > DENSE_MAX:
        raise Unsupported(f"targets of shape ({N}, {m}): the smaller side {small} > {DENSE_MAX} (dense LDL^T of "
                          f"the {small} x {small} Gram matrix in balls)")
    lw, lh, d = float(lw), float(lh), int(d)
    if not (lw > 0 and lh > 0 and math.isfinite(lw) and math.isfinite(lh)):
        raise NotCertified("lambda_w and lambda_h must be finite and > 0")
    timer = _Timer()
    Vf, P, Q = float_dual_and_candidate(Y, lw, lh)
    if dual is not None:
        Vf = np.asarray(dual, dtype=float)
        if Vf.shape != (m, N) or not np.all(np.isfinite(Vf)):
            raise NotCertified(f"dual point must be a finite ({m}, {N}) array")
    Vp = Vf - Vf.mean(axis=1, keepdims=True) if project else Vf
    guess = float(np.linalg.norm(Vp, 2)) if Vp.size else 0.0
    timer.lap("float svd")
    bits = max(int(prec), SPECTRAL_LDL_BITS)  # the cluster of singular values at lam needs the headroom
    with _Precision(bits):
        from flint import arb

        lam = (exact(lw) * exact(lh)).sqrt()
        Vb = _amat(Vf)                      # exact doubles
        Ytb = _amat(Y.T)                    # m x N, exact doubles
        colsum = Ytb * _ones(N)             # Y^T 1 (m x 1)
        rs = Vb * _ones(N)                  # row sums of Vf (m x 1)
        if project:
            mu = rs * (arb(1) / N)          # V = Vf - mu 1^T: the exact projected matrix has V 1 = 0 exactly
        else:
            if not all(rs[i, 0].is_zero() for i in range(m)):
                raise NotCertified("bias constraint V 1 = 0 does not hold exactly for the given dual point "
                                   "(project=False)")
            mu = None
        # Gram of V on the smaller side, and <V, Y^T> = <Vf, Y^T> - mu . (Y^T 1)
        if m <= N:
            G = Vb * Vb.transpose()
            if mu is not None:
                G = G - (mu * mu.transpose()) * N
        else:
            G = Vb.transpose() * Vb
            if mu is not None:
                c = Vb.transpose() * mu     # N x 1
                one = _ones(N)
                mm = (mu.transpose() * mu)[0, 0]
                G = G - c * one.transpose() - one * c.transpose() + (one * one.transpose()) * mm
        inner = _vdot(Vf, Y.T)
        if mu is not None:
            inner = inner - (mu.transpose() * colsum)[0, 0]
        fro2 = G.trace()
        timer.lap("gram")
        sigma = _gram_spectral_upper(G, guess)
        if scale is None:
            t = _scale_down(sigma, lam)
        else:
            t = float(scale)
            if not (0.0 < t <= 1.0 and certainly_le(exact(t) * sigma, lam)):
                raise NotCertified(f"forced scale t = {scale!r}: t ||V||_2 <= lam is not certain (spectral bound "
                                   f"{sigma} x t vs lam {lam})")
        timer.lap("spectral norm")
        tb = exact(t)
        lower = tb * inner - tb * tb * fro2 * N / 2
        timer.lap("dual value")
        # feasible value at the candidate Z = P Q (exact doubles), b the exact best bias for it
        # ||M (I - 11^T/N)||_F^2 = ||Y||^2 - 2 <Y^T, P Q> + tr(P^T P Q Q^T) - ||M 1||^2 / N, M = Y^T - P Q
        r = int(P.shape[1])
        res2 = _vdot(Y, Y)
        if r:
            Pb, Qb = _amat(P), _amat(Q)
            PtP, QQt = Pb.transpose() * Pb, Qb * Qb.transpose()
            # <Y^T, P Q> = tr(P^T (Y^T Q^T)) (m N r + r^2 m) or tr(Q (Y P)) (N m r + r^2 N): the cheaper order
            cross = ((Pb.transpose() * (Ytb * Qb.transpose())).trace() if m <= N else
                     (Qb * (Ytb.transpose() * Pb)).trace())
            res2 = res2 - 2 * cross + (PtP * QQt).trace()
            rm = colsum - Pb * (Qb * _ones(N))
            nuc = (PtP.trace() + QQt.trace()) / 2
        else:
            rm = colsum
            nuc = arb(0)
        res2 = res2 - (rm.transpose() * rm)[0, 0] / N
        upper = res2 / (2 * N) + lam * nuc
        timer.lap("feasible value")
    details = {"shape": [N, m], "scale_t": t, "spectral_norm_bound": upper_float(sigma), "lam": lower_float(lam),
               "candidate_rank": r, "d": d,
               "bias_constraint": ("exact (round-and-project: V = Vf - (Vf 1/N) 1^T in balls)" if project else
                                   "exact (given dual point, V 1 = 0 checked in balls)"),
               "dual_point": "given" if dual is not None else "float closed form U min(s, N lam) W^T / N"}
    if r > d:
        details["upper_note"] = (f"d = {d} < {r} (rank of the candidate): its convex value is not proven attained "
                                 f"by a factored point; only the lower bound holds")
        upper = None
    return RigorousBound(lower, upper, "dual (squared-error conjugate) and closed-form candidate in ball arithmetic",
                         bits, details, timer.steps)


def targets_from_instance(inst: dict) -> np.ndarray:
    """The targets of a `solve ufm-regression` report's instance: inline ``targets`` or the file
    ``targets_path``, checked against ``targets_sha256`` and ``targets_shape``. Unsupported when neither is
    there or the check fails."""
    want = inst.get("targets_sha256")
    shape = inst.get("targets_shape")
    if not isinstance(want, str):
        raise Unsupported("the report has no targets_sha256: the regression targets cannot be identified")
    if inst.get("targets") is not None:
        try:
            Y = np.asarray(inst["targets"], dtype=float)
        except (TypeError, ValueError) as exc:
            raise Unsupported(f"inline targets are not a numeric array: {exc}") from None
        where = "inline targets"
    elif isinstance(inst.get("targets_path"), str):
        path = inst["targets_path"]
        if not os.path.isfile(path):
            raise Unsupported(f"targets file {path} not found: the instance cannot be rebuilt")
        try:
            Y = np.asarray(np.load(path, allow_pickle=False), dtype=float)
        except (ValueError, OSError, EOFError, TypeError) as exc:
            raise Unsupported(f"cannot read the targets file {path}: {type(exc).__name__}: {exc}") from None
        where = f"targets file {path}"
    else:
        raise Unsupported("the report lists neither the targets nor their file: the instance cannot be rebuilt")
    if Y.ndim != 2 or (shape is not None and list(Y.shape) != list(shape)):
        raise Unsupported(f"{where}: shape {list(Y.shape)} differs from the report's {shape}")
    got = targets_sha256(Y)
    if got != want:
        raise Unsupported(f"{where}: sha256 {got[:16]}... differs from the report's {want[:16]}... (changed "
                          f"since the report was made)")
    return Y


def recipe(report: dict, prec: int) -> RigorousBound:
    """The `--rigorous` recipe for a `solve ufm-regression` report (``SolveReport.to_dict()``): rebuild the
    targets from the instance (hash-checked) and run :func:`regression_from_targets`. Register it as
    ``proofs_check.rigorous.RECIPES["ufm-regression"]``. Raises Unsupported when the instance cannot be
    rebuilt or is too large for the dense check."""
    inst = report.get("instance") or {}
    if inst.get("kind") != "regression":
        raise Unsupported(f"not a regression instance (kind {inst.get('kind')!r})")
    Y = targets_from_instance(inst)
    t0 = time.perf_counter()
    rb = regression_from_targets(Y, inst["lambda_w"], inst["lambda_h"], inst["d"], prec=prec)
    rb.steps["total"] = time.perf_counter() - t0
    return rb
