"""The unconstrained-features model with any convex loss, any class sizes, and regression
(docs/ufm_general.md).

Problem (groups g = 1..G of n_g samples sharing one target index y_g; classification: the groups are the
classes; regression: one group per sample):

    f(W, H, b) = (1/N) sum_i loss(W h_i + b; y_i) + (lw/2)||W||^2 + (lh/2)||H||^2 (+ (lb/2)||b||^2).

Class-reduced convex problem (exact for d >= rank of the optimum). Samples of one group are exchangeable,
so by convexity an optimum has group-constant logits Z = Zc E (E: K... group indicators, G x N) and, with
D = diag(n_g) and X = Zc D^{1/2} (K x G), ||Z||_* = ||X||_*:

    P(X, b) = (1/N) sum_g n_g loss(x_g / sqrt(n_g) + b; y_g) + lam ||X||_* (+ (lb/2)||b||^2),  lam = sqrt(lw lh).

Groups with equal counts AND equal targets could be merged further; here one group per class.

Lower bound (docs/ufm_general.md, "Certificate"): any A = Ac E / N (per-sample gradient columns a_g) with
||A||_2 = ||Ac D^{1/2}||_2 / N <= lam and A 1 = 0 gives f* >= -(1/N) sum_g n_g loss*(a_g; y_g). We take
a_g = t (g_g - r), g_g the loss gradient at the candidate, r = sum_g n_g g_g / N (bias residual, ~1e-16 at a
bias-stationary candidate), t = min(1, lam / (an upper bound of ||(G - r 1^T) D^{1/2}||_2 / N)). Without a
conjugate (or out of its domain) the linearisation bound of the same section is used.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from solvers import lbfgs
from solvers.common import Certificate, Solution
from solvers.losses import Loss
from theory._validate import InputError, as_float, as_int

LAMBDA_MIN = 1e-12
LAMBDA_MAX = 1e12
UNIT_ROUNDOFF = 2.0 ** -53
#: Relative slack on the computed spectral norm (LAPACK's SVD is backward stable: computed singular values
#: are within ~ (size) u ||A|| of the true ones; 1e-12 covers sizes up to ~1e4).
SPECTRAL_SLACK = 1e-12
#: Relative rank threshold for singular values of X.
RANK_RTOL = 1e-7
#: Face tolerances of the uniqueness confirmation (same meaning and values as docs/ufm.md).
FACE_TOL = 1e-6
SPECTRAL_TOL = 1e-6
STRUCTURE_TOL = 1e-8
#: Size limits (class-reduced K x G matrices; full SVDs are O(K^2 G)). Budget: 2.5 GB, ~2 minutes.
MAX_ENTRIES = 4_000_000
FLOPS_PER_SECOND = 1e10


@dataclass
class GeneralUFM:
    """One instance: a loss object, K logits, groups (counts, target indices), d, weight decays."""

    loss: Loss
    K: int
    counts: np.ndarray
    y: np.ndarray
    d: int
    lw: float
    lh: float
    lb: float = 0.0
    kind: str = "classification"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.K = as_int("classes (K)", self.K, minimum=1)
        self.d = as_int("d (feature dimension)", self.d, minimum=1)
        c = np.asarray(self.counts)
        if c.ndim != 1 or c.size < 1:
            raise InputError("counts must be a non-empty list of positive integers")
        if not np.all(np.isfinite(c.astype(float))) or np.any(c != np.round(c)):
            raise InputError("counts must be integers")
        if np.any(c < 1):
            raise InputError(f"counts must all be >= 1 (a class with 0 samples has no loss term), got {c.tolist()[:20]}")
        self.counts = c.astype(np.int64)
        self.y = np.asarray(self.y, dtype=np.int64)
        if self.y.shape != self.counts.shape:
            raise InputError("one target index per group is required")
        for name in ("lw", "lh", "lb"):
            v = as_float({"lw": "lambda_w", "lh": "lambda_h", "lb": "lambda_b"}[name], getattr(self, name),
                         nonnegative=True)
            setattr(self, name, v)
            if name == "lb" and v == 0.0:
                continue
            if not LAMBDA_MIN <= v <= LAMBDA_MAX:
                raise InputError(f"{ {'lw': 'lambda_w', 'lh': 'lambda_h', 'lb': 'lambda_b'}[name]} must be in "
                                 f"[{LAMBDA_MIN:g}, {LAMBDA_MAX:g}] (float64 range of the stable formulas; "
                                 f"docs/ufm.md), got {v:g}")
        if self.K * self.counts.size > MAX_ENTRIES:
            raise InputError(f"K x groups = {self.K} x {self.counts.size} exceeds {MAX_ENTRIES} entries (memory and "
                             f"time budget of the class-reduced certificate; docs/ufm_general.md)")

    @property
    def N(self) -> int:
        return int(self.counts.sum())

    @property
    def G(self) -> int:
        return int(self.counts.size)

    @property
    def lam(self) -> float:
        return math.sqrt(self.lw * self.lh)

    def to_dict(self) -> dict:
        out = {"loss": self.loss.describe(), "classes": self.K, "groups": self.G, "N": self.N, "d": self.d,
               "lambda_w": self.lw, "lambda_h": self.lh, "lambda_b": self.lb, "kind": self.kind}
        if self.kind == "classification":
            out["counts"] = self.counts.tolist() if self.G <= 200 else {
                "distinct": int(np.unique(self.counts).size), "min": int(self.counts.min()),
                "max": int(self.counts.max())}
        out.update(self.meta)
        return out


def classification(loss: Loss, counts, d, lw, lh, lb=0.0, meta=None) -> GeneralUFM:
    counts = np.asarray(counts)
    return GeneralUFM(loss, int(counts.size), counts, np.arange(counts.size), d, lw, lh, lb, "classification",
                      dict(meta or {}))


def estimate(p: GeneralUFM, starts: int = 1) -> dict:
    """Memory (bytes) and time (s) of the class-reduced solve + certificate, from sizes alone: ~40 copies of
    K x G plus the SVDs (O(K G min(K, G))) and 400 evaluations of 4 K G r flops per start (r = min(K, G))."""
    K, G = float(p.K), float(p.G)
    r = min(K, G)
    flops = starts * 400 * 4 * K * G * r + 20 * K * G * r
    return {"bytes": 8.0 * 40 * K * G + 8.0 * 3 * r * r, "seconds": flops / FLOPS_PER_SECOND}


# ---------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------

def data_term(p: GeneralUFM, U: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(1/N) sum_g n_g loss(u_g; y_g), per-sample gradients (K x G) and per-group values."""
    vals, grads = p.loss.value_grad(U, p.y)
    return float(np.dot(p.counts, vals)) / p.N, grads, vals


def convex_value(p: GeneralUFM, X: np.ndarray, b: np.ndarray) -> float:
    """P(X, b) = data + lam ||X||_* (+ lb/2 ||b||^2): the factored objective of a balanced factorization of X
    when d >= rank X."""
    sq = np.sqrt(p.counts.astype(float))
    val, _, _ = data_term(p, X / sq + b[:, None])
    nuc = float(np.sum(np.linalg.svd(X, compute_uv=False)))
    return val + p.lam * nuc + 0.5 * p.lb * float(b @ b)


def truncate(X: np.ndarray, r: int) -> np.ndarray:
    """Best rank-r approximation (the dimension-d feasible point when rank X > d)."""
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    s = s.copy()
    s[r:] = 0.0
    return (U * s) @ Vt


# ---------------------------------------------------------------------------------------------------
# Factored solver in class coordinates: X = P Q (K x r, r x G), lw = lh = lam after the exact rescaling
# ---------------------------------------------------------------------------------------------------

def _fun(p: GeneralUFM, r: int, sq: np.ndarray, wts: np.ndarray):
    K, G, lam, lb = p.K, p.G, p.lam, p.lb

    def fun(x):
        P = x[:K * r].reshape(K, r)
        Q = x[K * r:K * r + r * G].reshape(r, G)
        b = x[K * r + r * G:]
        X = P @ Q
        vals, grads = p.loss.value_grad(X / sq + b[:, None], p.y)
        f = float(wts @ vals) + 0.5 * lam * (float(np.sum(P * P)) + float(np.sum(Q * Q))) + 0.5 * lb * float(b @ b)
        dU = grads * wts
        dX = dU / sq
        g = np.empty_like(x)
        g[:K * r] = (dX @ Q.T + lam * P).ravel()
        g[K * r:K * r + r * G] = (P.T @ dX + lam * Q).ravel()
        g[K * r + r * G:] = dU.sum(axis=1) + lb * b
        return f, g

    return fun


def solve_factored(p: GeneralUFM, *, rank: int | None = None, starts: int = 2, seed: int = 0,
                   gtol: float | None = None, maxiter: int = 20000, time_budget: float = 60.0,
                   x_init: tuple | None = None) -> Solution:
    """L-BFGS on (P, Q, b) with X = P Q in class coordinates (rank r = min(d, K, G) unless given), from random
    starts (and ``x_init`` = (X, b) when given). Returns X, b of the best start; value = P(X, b) exactly
    evaluated (a feasible value of the dimension-r problem)."""
    t0 = time.perf_counter()
    K, G = p.K, p.G
    r = int(rank if rank is not None else min(p.d, K, G))
    sq = np.sqrt(p.counts.astype(float))
    wts = p.counts / float(p.N)
    fun = _fun(p, r, sq, wts)
    gtol = gtol if gtol is not None else 1e-11 * max(1e-3, min(1.0, 10 * math.sqrt(p.lam)))
    rng = np.random.default_rng(seed)
    best, runs = None, []
    inits = []
    if x_init is not None:
        X0, b0 = x_init
        U_, s_, Vt_ = np.linalg.svd(X0, full_matrices=False)
        s_ = np.sqrt(s_[:r])
        P0 = np.zeros((K, r))
        Q0 = np.zeros((r, G))
        m = min(r, s_.size)
        P0[:, :m] = U_[:, :m] * s_[:m]
        Q0[:m, :] = s_[:m, None] * Vt_[:m]
        inits.append(np.concatenate([P0.ravel(), Q0.ravel(), np.asarray(b0, float)]))
    for _ in range(starts):
        x0 = rng.standard_normal(K * r + r * G + K) * 0.5 / math.sqrt(r)
        x0[-K:] = 0.0
        inits.append(x0)
    for x0 in inits:
        if time.perf_counter() - t0 > time_budget and best is not None:
            runs.append("skipped: time budget")
            continue
        x = x0
        for _round in range(20):  # restarts after rebalancing P, Q (same X, regulariser can only drop)
            res = lbfgs.minimize(fun, x, gtol=gtol, maxiter=2000)
            x = res.x
            P = x[:K * r].reshape(K, r)
            Q = x[K * r:K * r + r * G].reshape(r, G)
            U_, s_, Vt_ = np.linalg.svd(P @ Q, full_matrices=False)
            s_ = np.sqrt(s_[:r])
            x = np.concatenate([(U_[:, :r] * s_).ravel(), (s_[:, None] * Vt_[:r]).ravel(), x[K * r + r * G:]])
            if res.message.startswith("converged") or time.perf_counter() - t0 > time_budget:
                break
        P = x[:K * r].reshape(K, r)
        Q = x[K * r:K * r + r * G].reshape(r, G)
        b = x[K * r + r * G:].copy()
        X = P @ Q
        b = polish_bias(p, X, b)
        val = convex_value(p, X, b)
        runs.append(float(val))
        if best is None or val < best[0]:
            best = (val, X, b, res)
    val, X, b, res = best
    return Solution(val, "factored (class-reduced L-BFGS)", bool(res.message.startswith("converged")),
                    time.perf_counter() - t0, {"X": X, "b": b},
                    {"rank_limit": r, "start_values": runs, "message": res.message, "gtol": gtol})


def polish_bias(p: GeneralUFM, X: np.ndarray, b: np.ndarray, iters: int = 30) -> np.ndarray:
    """Newton steps on the bias alone (diagonal-plus-low-rank Hessian estimated by finite differences of the
    gradient): makes the bias residual r = sum_g n_g g_g / N + lb b ~ round-off before the certificate."""
    sq = np.sqrt(p.counts.astype(float))
    wts = p.counts / float(p.N)
    Zc = X / sq
    b = np.asarray(b, float).copy()
    K = p.K
    for _ in range(iters):
        _, grads = p.loss.value_grad(Zc + b[:, None], p.y)
        gb = grads @ wts + p.lb * b
        if float(np.max(np.abs(gb))) <= 1e-17 * max(1.0, float(np.max(np.abs(grads)))):
            break
        h = 1e-6
        Hs = np.empty((K, K))
        for j in range(K) if K <= 60 else ():
            e = np.zeros(K)
            e[j] = h
            _, g2 = p.loss.value_grad(Zc + (b + e)[:, None], p.y)
            Hs[:, j] = (g2 @ wts + p.lb * (b + e) - gb) / h
        if K > 60:
            break
        Hs = 0.5 * (Hs + Hs.T) + 1e-14 * np.eye(K)
        step = np.linalg.lstsq(Hs, gb, rcond=1e-12)[0]
        if p.loss.shift_invariant and p.lb == 0.0:
            step -= step.mean()
        b_new = b - step
        _, g3 = p.loss.value_grad(Zc + b_new[:, None], p.y)
        if np.max(np.abs(g3 @ wts + p.lb * b_new)) < np.max(np.abs(gb)):
            b = b_new
        else:
            break
    return b


# ---------------------------------------------------------------------------------------------------
# Certificate
# ---------------------------------------------------------------------------------------------------

def spectral_upper(A: np.ndarray) -> float:
    """An upper bound of ||A||_2: the largest computed singular value times (1 + SPECTRAL_SLACK), plus an
    absolute allowance of (size) u ||A||_F."""
    if A.size == 0:
        return 0.0
    s = float(np.linalg.svd(A, compute_uv=False)[0])
    return s * (1.0 + SPECTRAL_SLACK) + 4.0 * max(A.shape) * UNIT_ROUNDOFF * float(np.linalg.norm(A))


def certificate(p: GeneralUFM, X: np.ndarray, b: np.ndarray, *, upper: float | None = None) -> Certificate:
    """Proven lower bound at a candidate (X, b) (docs/ufm_general.md, "Certificate").

    Route "conjugate" when the loss has a conjugate and the scaled centred gradient lies in its domain,
    else "linearisation" (needs ``loss.infimum``). ``upper`` defaults to P(X, b)."""
    N, lam = p.N, p.lam
    sq = np.sqrt(p.counts.astype(float))
    wts = p.counts / float(N)
    U = X / sq + b[:, None]
    vals, grads = p.loss.value_grad(U, p.y)
    data = float(wts @ vals)
    nuc = float(np.sum(np.linalg.svd(X, compute_uv=False)))
    f0 = data + lam * nuc + 0.5 * p.lb * float(b @ b)
    if upper is None:
        upper = f0
    r = grads @ wts  # (1/N) sum_g n_g g_g = A 1 / ... (the bias gradient of the data term)
    if p.lb == 0.0:
        Gc = grads - r[:, None]
    else:
        Gc = grads
    sigma = spectral_upper(Gc * sq) / N  # ||A||_2, A = Gc E / N
    t = 1.0 if sigma <= lam else lam / sigma
    details = {"spectral_norm_of_gradient": sigma, "lam": lam, "scale_t": t,
               "bias_residual": float(np.max(np.abs(r + p.lb * b))) if p.lb else float(np.max(np.abs(Gc @ wts))),
               "bias_residual_raw": float(np.max(np.abs(r + p.lb * b)))}
    conj = p.loss.conjugate(t * Gc, p.y)
    if conj is not None and np.all(np.isfinite(conj)):
        terms = wts * conj
        lb_val = -float(np.sum(terms))
        absum = float(np.sum(np.abs(terms)))
        if p.lb > 0:
            a1 = t * (grads @ wts)
            extra = float(a1 @ a1) / (2.0 * p.lb)
            lb_val -= extra
            absum += extra
        allowance = (2 * (p.K + p.G) + 16) * UNIT_ROUNDOFF * absum
        details.update(bound="conjugate", roundoff_allowance=allowance,
                       why="weak duality: f* >= -(1/N) sum_i loss*(N A_i) for ||A||_2 <= lam, A 1 = 0")
        return Certificate(lb_val - allowance, upper, "dual (conjugate)", details)
    inf = p.loss.infimum
    if inf is None:
        details.update(bound=None, why="no conjugate in its domain and no infimum of the loss: no lower bound")
        return Certificate(-math.inf, upper, "none", details)
    # linearisation: L(U) >= L(U0) + <A, U - U0>; every optimum has lam ||Z||_* <= f0 - inf L =: lam R
    R = max(f0 - inf, 0.0) / lam
    lin = data - float(np.sum((Gc * wts) * (X / sq)))  # L(U0) - <A, Z0>, A = Gc E / N
    lb_val = lin + min(0.0, R * (lam - sigma))
    if p.lb > 0:
        # min_b <A 1, b> + lb/2 ||b||^2 = -||A 1||^2 / (2 lb); <A, b0 1^T> is included in lin through U0
        a1 = grads @ wts
        lb_val += float(a1 @ b) - float(a1 @ a1) / (2.0 * p.lb)
    absum = abs(data) + float(np.sum(np.abs(Gc * wts * X / sq))) + abs(R * (lam - sigma))
    allowance = (2 * (p.K + p.G) + 16) * UNIT_ROUNDOFF * absum
    details.update(bound="linearisation", radius_R=R, roundoff_allowance=allowance,
                   why="convexity: L(U) >= L(U0) + <grad L(U0), U - U0>; optimum within ||Z||_* <= R = "
                       "(f(candidate) - inf loss)/lam")
    return Certificate(lb_val - allowance, upper, "dual (linearisation)", details)


# ---------------------------------------------------------------------------------------------------
# Uniqueness confirmation and geometry in class coordinates
# ---------------------------------------------------------------------------------------------------

def uniqueness_conditions(p: GeneralUFM, X: np.ndarray, b: np.ndarray) -> dict:
    """The conditions of the uniqueness theorem of docs/ufm.md, in class coordinates, at the candidate:
    G = -A/lam (A the centred gradient), face = singular values >= 1 - FACE_TOL, strictly below off the face,
    X = U1 M V1^T with M symmetric PSD, V1^T sqrt(n) = 0 and (shift-invariant losses) U1^T 1 = 0."""
    N, lam = p.N, p.lam
    sq = np.sqrt(p.counts.astype(float))
    wts = p.counts / float(N)
    _, grads = p.loss.value_grad(X / sq + b[:, None], p.y)
    r = grads @ wts
    Gc = grads - r[:, None] if p.lb == 0.0 else grads
    Gs = -(Gc * sq) / (N * lam)
    Ug, sg, Vgt = np.linalg.svd(Gs, full_matrices=False)
    face = sg >= 1.0 - FACE_TOL
    r1 = int(face.sum())
    outside = float(sg[~face].max(initial=0.0))
    # singular values of Gs beyond min(K, G) are 0 (the complement), < 1
    U1, V1 = Ug[:, face], Vgt[face, :].T
    zn = float(np.linalg.norm(X))
    if r1 and zn > 0:
        M = U1.T @ X @ V1
        in_face = float(np.linalg.norm(X - U1 @ M @ V1.T)) / zn
        mf = float(np.linalg.norm(M))
        asym = float(np.linalg.norm(M - M.T)) / mf
        ev = np.linalg.eigvalsh(0.5 * (M + M.T))
        psd = float(ev.min()) >= -STRUCTURE_TOL * mf
    else:
        in_face = 0.0 if zn == 0.0 else math.inf
        asym, psd = 0.0, True
    ones_right = float(np.linalg.norm(V1.T @ sq)) / math.sqrt(N) if r1 else 0.0
    ones_left = float(np.linalg.norm(U1.T @ np.ones(p.K))) / math.sqrt(p.K) if r1 and p.loss.shift_invariant else 0.0
    checks = {"spectral_norm": float(sg[0]) <= 1.0 + SPECTRAL_TOL,
              "strict_off_face": outside <= 1.0 - FACE_TOL,
              "candidate_in_face": in_face <= STRUCTURE_TOL and asym <= STRUCTURE_TOL and psd,
              "injective": ones_left <= STRUCTURE_TOL and ones_right <= STRUCTURE_TOL,
              "gradient_determines_logits": p.loss.gradient_determines is not None}
    return {"valid": all(checks.values()), "conditions": checks, "spectral_norm": float(sg[0]), "face_dimension": r1,
            "delta": 1.0 - outside, "candidate_off_face_residual": in_face, "M_asymmetry": asym,
            "ones_left_residual": ones_left, "ones_right_residual": ones_right, "face_tol": FACE_TOL}


def _psd_sqrt(A: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(0.5 * (A + A.T))
    return (V * np.sqrt(np.clip(w, 0.0, None))) @ V.T


def _cos(Gr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nrm = np.sqrt(np.clip(np.diag(Gr), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        C = Gr / np.outer(nrm, nrm)
    C[~np.isfinite(C)] = 0.0
    return nrm, C


def geometry(p: GeneralUFM, X: np.ndarray, b: np.ndarray, *, max_cosines: int = 100) -> dict:
    """Gram matrices of every balanced factorization of X (W W^T = sqrt(lh/lw) (X X^T)^{1/2}; class-mean Gram
    D^{-1/2} sqrt(lw/lh) (X^T X)^{1/2} D^{-1/2}), class means centred by the UNWEIGHTED mean of the class means,
    per-class norms, cosine matrices and the minority-collapse measures."""
    q = math.sqrt(p.lh / p.lw)
    sq = np.sqrt(p.counts.astype(float))
    WW = q * _psd_sqrt(X @ X.T)
    S = _psd_sqrt(X.T @ X) / q
    MG = S / np.outer(sq, sq)
    G = p.G
    J = np.eye(G) - 1.0 / G
    MGc = J @ MG @ J
    mn, mc = _cos(MGc)
    wn, wc = _cos(WW)
    sv = np.linalg.svd(X, compute_uv=False)
    rank = int(np.sum(sv > RANK_RTOL * sv[0])) if sv.size and sv[0] > 0 else 0
    out = {"rank": rank, "class_mean_norms": mn.tolist() if G <= 10 * max_cosines else None,
           "classifier_norms": wn.tolist() if p.K <= 10 * max_cosines else None,
           "class_mean_cosines": mc.tolist() if G <= max_cosines else None,
           "classifier_cosines": wc.tolist() if p.K <= max_cosines else None,
           "bias": b.tolist() if p.K <= 10 * max_cosines else None,
           "centring": "class means centred by the unweighted mean of the class means",
           "self_duality_note": "mu_c = sqrt(lw/lh) W^T-direction per class only for balanced counts"}
    if p.kind == "classification" and np.unique(p.counts).size > 1:
        cmin, cmax = p.counts.min(), p.counts.max()
        mino = np.flatnonzero(p.counts == cmin)
        majo = np.flatnonzero(p.counts == cmax)
        mc_pairs = [wc[i, j] for i in mino for j in mino if i < j]
        out["minority"] = {
            "minority_classes": mino.tolist()[:100], "majority_classes": majo.tolist()[:100],
            "minority_classifier_cosine": float(np.mean(mc_pairs)) if mc_pairs else None,
            "minority_mean_cosine": float(np.mean([mc[i, j] for i in mino for j in mino if i < j])) if mc_pairs else None,
            "classifier_norm_ratio": float(wn[mino].mean() / wn[majo].mean()) if wn[majo].mean() > 0 else None,
            "mean_norm_ratio": float(mn[mino].mean() / mn[majo].mean()) if mn[majo].mean() > 0 else None,
            "minority_classifiers_zero": bool(np.all(wn[mino] <= 1e-6 * max(wn.max(), 1e-300)))}
    out["_cosines_full"] = (mc, wc)
    return out


# ---------------------------------------------------------------------------------------------------
# Regression (Andriopoulos et al. 2024)
# ---------------------------------------------------------------------------------------------------

def regression_closed_form(Y: np.ndarray, lw: float, lh: float) -> dict:
    """Y (N x m): the optimum of (1/(2N))||W H + b 1^T - Y^T||^2 + (lw/2)||W||^2 + (lh/2)||H||^2 for d >= m:
    b = target mean, Z = SVT of the centred targets Yc (m x N) at N lam; value
    (1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam, 0) (docs/ufm_general.md, "Regression")."""
    Y = np.asarray(Y, dtype=float)
    N, m = Y.shape
    lam = math.sqrt(lw * lh)
    bm = Y.mean(axis=0)
    Yc = (Y - bm).T
    U, s, Vt = np.linalg.svd(Yc, full_matrices=False)
    z = np.maximum(s - N * lam, 0.0)
    Z = (U * z) @ Vt
    val = float(np.sum(np.minimum(s, N * lam) ** 2) / (2 * N) + lam * np.sum(z))
    return {"Z": Z, "b": bm, "value": val, "singular_values": s, "shrunk": z, "threshold": N * lam,
            "rank": int(np.sum(z > 0))}
