"""Cross-entropy UFM with nonnegative (post-ReLU) features: best point and a proven lower bound from the
doubly nonnegative (DNN) relaxation (docs/scl.md, "Cross-entropy with ReLU features").

Problem (no bias; conventions of docs/ufm_general.md otherwise: mean loss, weight decays lw/2, lh/2):

    f(W, H) = (1/N) sum_i loss(W h_i; y_i) + (lw/2)||W||_F^2 + (lh/2)||H||_F^2,   W (K x d), H >= 0 (d x N).

Collapse is exact, not assumed: for fixed W the objective is a sum over samples of strictly convex functions
of h_i >= 0 that are identical within a class, so every minimiser has h_i = h_{y_i}. The solver works with
class features u_c = sqrt(n_c) h_c (d x K, u >= 0; then (lh/2)||H||^2 = (lh/2)||U||^2 and z_c = W u_c/sqrt(n_c)).

Lower bound (valid at every d). For V = [W; H^T] the Gram X = V V^T = [[A, Z], [Z^T, B]] is PSD with B = H^T H
>= 0 entrywise, and f = F(Z) + (lw/2) tr A + (lh/2) tr B. Weak duality (Fenchel): for any Gamma (K x N),
F(Z) >= <Gamma, Z> - F*(Gamma), and <Gamma, Z> + (lw/2) tr A + (lh/2) tr B = <C, X> with
C = (1/2)[[lw I, Gamma], [Gamma^T, lh I]] is >= 0 on the DNN cone iff C = S + Nn with S PSD and Nn >= 0
supported on the B block. With class-constant Gamma = V E / N (V = [v_c] the per-sample loss gradients scaled
by t in [0, 1], E the N x K... class indicator transposed) and Nn = E^T (m/2) E (m >= 0, K x K), the Schur
complement of lw I reduces S >= 0 to

    lambda_max( D^{1/2} (V^T V / N^2 + lw m) D^{1/2} ) <= lw lh,      D = diag(n_c),

and the bound is f* >= -(1/N) sum_c n_c loss*(v_c; c). The multipliers m come from the KKT conditions of
H >= 0 at the best point (Lambda = grad_H f = H M), or from the class-reduced relaxation solved by a conic
solver (its dual point (P, m) only: repaired, checked with the eigenvalue bound; its objective is never used).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from solvers.common import Certificate, Solution, blas_threads
from solvers.ufm_general import GeneralUFM
from theory._validate import InputError

EPS = float(np.finfo(float).eps)
#: Safety factor on every textbook rounding bound below (stated, not tuned).
ROUND_SAFETY = 8.0
#: L-BFGS-B stopping: projected gradient and relative decrease (scipy's pgtol / factr x eps).
PGTOL = 1e-13
FACTR = 10.0
#: Work budget of one start (objective + gradient evaluations): a verdict never depends on wall time.
MAX_EVALS_PER_START = 20_000
#: Largest K for the conic refinement of the multipliers (K^2 exponential cones, a 2K x 2K PSD block).
CONIC_MAX_CLASSES = 30
#: Largest K x d of the factored solve (variables; memory and work stay small).
MAX_VARIABLES = 2_000_000


@dataclass
class NonnegPoint:
    W: np.ndarray   # K x d
    U: np.ndarray   # d x K, u_c = sqrt(n_c) h_c >= 0
    value: float
    evals: int = 0
    start: str = ""


def _split(x, K, d):
    return x[:K * d].reshape(K, d), x[K * d:].reshape(d, K)


def class_logits(p: GeneralUFM, W: np.ndarray, U: np.ndarray) -> np.ndarray:
    sq = np.sqrt(p.counts.astype(float))
    return (W @ U) / sq[None, :]


def objective(p: GeneralUFM, W: np.ndarray, U: np.ndarray, grad: bool = True):
    """f at the class-level point (the full-sample value of the collapsed point it represents, exactly)."""
    K = p.K
    n = p.counts.astype(float)
    sq = np.sqrt(n)
    wts = n / p.N
    Zc = (W @ U) / sq[None, :]
    vals, G = p.loss.value_grad(Zc, np.arange(K))
    f = float(wts @ vals) + 0.5 * p.lw * float(np.sum(W * W)) + 0.5 * p.lh * float(np.sum(U * U))
    if not grad:
        return f
    gZ = G * (wts / sq)[None, :]          # d f / d (W U) column c
    gW = gZ @ U.T + p.lw * W
    gU = W.T @ gZ + p.lh * U
    return f, gW, gU


def full_features(p: GeneralUFM, U: np.ndarray) -> np.ndarray:
    """The d x N feature matrix of the collapsed point (samples class by class)."""
    n = p.counts.astype(float)
    Hc = U / np.sqrt(n)[None, :]
    return np.repeat(Hc, p.counts, axis=1)


def of_start(p: GeneralUFM) -> tuple[np.ndarray, np.ndarray] | None:
    """Orthogonal-frame start (d >= K): u_c = a e_c, W = b (I - J/K) padded with zeros."""
    K, d = p.K, p.d
    if d < K:
        return None
    U = np.zeros((d, K))
    U[np.arange(K), np.arange(K)] = 1.0
    W = np.zeros((K, d))
    W[:, :K] = np.eye(K) - 1.0 / K
    return W, U


def solve(p: GeneralUFM, *, starts: int = 3, seed: int = 0, max_evals: int = MAX_EVALS_PER_START) -> Solution:
    """Best point of the nonconvex problem from ``starts`` random nonnegative starts plus the OF start (d >= K),
    L-BFGS-B with bounds u >= 0. Budget: ``max_evals`` evaluations per start (work, not seconds)."""
    from scipy.optimize import minimize

    K, d = p.K, p.d
    if K * d + d * K > MAX_VARIABLES:
        raise InputError(f"--dim: K x d = {K * d} x 2 variables exceeds {MAX_VARIABLES} (memory and work budget of "
                         "the nonnegative factored solve)")
    rng = np.random.default_rng(seed)
    inits = []
    ofs = of_start(p)
    if ofs is not None:
        inits.append(("orthogonal-frame start", ofs))
    for s in range(starts):
        W0 = rng.standard_normal((K, d)) / math.sqrt(d)
        U0 = np.abs(rng.standard_normal((d, K))) / math.sqrt(d)
        inits.append((f"random start {s}", (W0, U0)))
    bounds = [(None, None)] * (K * d) + [(0.0, None)] * (d * K)
    best, results = None, []
    t0 = time.perf_counter()
    with blas_threads(2.0 * K * K * d):
        for name, (W0, U0) in inits:
            # a few scales of the start: the OF direction is right for every lambda but its scale is not
            cands = []
            for sc in ((0.3, 1.0, 3.0) if name.startswith("orthogonal") else (1.0,)):
                x0 = np.concatenate([(sc * W0).ravel(), (sc * U0).ravel()])
                cnt = [0]

                def fun(x):
                    cnt[0] += 1
                    W, U = _split(x, K, d)
                    f, gW, gU = objective(p, W, U)
                    return f, np.concatenate([gW.ravel(), gU.ravel()])

                r = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                             options={"maxfun": max_evals, "maxiter": max_evals, "ftol": FACTR * EPS, "gtol": PGTOL,
                                      "maxcor": 30})
                W, U = _split(r.x, K, d)
                U = np.maximum(U, 0.0)
                cands.append(NonnegPoint(W, U, objective(p, W, U, grad=False), cnt[0], name))
            pt = min(cands, key=lambda c: c.value)
            pt.evals = sum(c.evals for c in cands)
            results.append(pt)
            if best is None or pt.value < best.value:
                best = pt
    secs = time.perf_counter() - t0
    return Solution(best.value, "L-BFGS-B on (W, U >= 0), class-level (collapse exact)", True, secs,
                    {"W": best.W, "U": best.U},
                    {"start_values": {r.start: r.value for r in results}, "best_start": best.start,
                     "evaluations": int(sum(r.evals for r in results)), "budget_evals_per_start": max_evals})


# ---------------------------------------------------------------------------------------------------
# The DNN dual certificate
# ---------------------------------------------------------------------------------------------------

def kkt_multipliers(p: GeneralUFM, W: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Class-level multipliers m (K x K, symmetric, >= 0, zero diagonal) from Lambda = grad_H f = H M at the point:
    per sample, lambda_c = W^T v_c / N + lh h_c; with block-constant M, lambda_{c'} = sum_c n_c h_c m_{c c'}."""
    n = p.counts.astype(float)
    sq = np.sqrt(n)
    Zc = (W @ U) / sq[None, :]
    _, Vg = p.loss.value_grad(Zc, np.arange(p.K))
    Hc = U / sq[None, :]
    Lam = W.T @ Vg / p.N + p.lh * Hc
    A = Hc * n[None, :]
    m, *_ = np.linalg.lstsq(A, Lam, rcond=1e-10)
    m = 0.5 * (m + m.T)
    np.fill_diagonal(m, 0.0)
    return np.maximum(m, 0.0)


def dual_bound(p: GeneralUFM, V: np.ndarray, m: np.ndarray, *, upper: float | None = None,
               method: str = "") -> Certificate:
    """Proven lower bound from per-class dual gradients V (K x K: column c is a point v_c of the domain of
    loss*(.; c), scaled below by t) and multipliers m (K x K, >= 0 is enforced here, diagonal ignored).

    Check: lambda_max(D^{1/2}(V^T V / N^2 + lw m) D^{1/2}) is bounded above by the LAPACK value plus a stated
    allowance (backward-stable eigensolver, Weyl: ROUND_SAFETY K eps ||M||_F; forming the matrix: ROUND_SAFETY
    (K + 2) eps (|V|^T |V| / N^2 + lw m) entrywise, whose spectral norm is at most its Frobenius norm). Then
    t = min(1, sqrt(lw lh / lambda_upper)) scales (V, m) to (t V, t^2 m), which is exactly feasible, and
    f* >= -(1/N) sum_c n_c loss*(t v_c; c) - allowance (ROUND_SAFETY (K + 4) eps sum |terms|; t v_c + q_c stays
    in the simplex for t in [0, 1], q_c the target)."""
    K, N = p.K, p.N
    n = p.counts.astype(float)
    sq = np.sqrt(n)
    m = np.maximum(0.5 * (m + m.T), 0.0)
    np.fill_diagonal(m, 0.0)
    core = V.T @ V / N ** 2 + p.lw * m
    Mk = sq[:, None] * core * sq[None, :]
    absM = sq[:, None] * (np.abs(V).T @ np.abs(V) / N ** 2 + p.lw * m) * sq[None, :]
    form_err = ROUND_SAFETY * (K + 2) * EPS * float(np.linalg.norm(absM))
    ev = np.linalg.eigvalsh(0.5 * (Mk + Mk.T))
    lam_up = float(ev[-1]) + ROUND_SAFETY * K * EPS * float(np.linalg.norm(Mk)) + form_err
    target = p.lw * p.lh
    t = 1.0 if lam_up <= target else math.sqrt(target / lam_up) * (1.0 - 4 * EPS)
    conj = p.loss.conjugate(t * V, np.arange(K))
    wts = n / N
    details = {"lambda_max_upper": lam_up, "lw_lh": target, "scale_t": t, "multipliers_min_offdiag":
               float(np.min(m + np.diag(np.full(K, np.inf)))) if K > 1 else None,
               "why": "weak duality on the DNN relaxation (docs/scl.md, Cross-entropy with ReLU features)"}
    if conj is None or not np.all(np.isfinite(conj)):
        return Certificate(-math.inf, upper if upper is not None else math.inf, "dnn dual (out of domain)", details)
    terms = wts * conj
    allowance = ROUND_SAFETY * (K + 4) * EPS * float(np.sum(np.abs(terms)) + 1.0)
    lb = -float(np.sum(terms)) - allowance
    details.update(roundoff_allowance=allowance)
    cert = Certificate(lb, upper if upper is not None else math.inf, method or "dnn dual", details)
    # the exactly feasible dual point (for the point bounds; not serialised)
    cert.dual = {"V": t * V, "m": (t * t) * m}
    return cert


def point_bounds(p: GeneralUFM, cert: Certificate, upper: float) -> dict | None:
    """Proven statements about EVERY minimiser (W*, H*) of the nonconvex problem, at any d, from the gap
    E = upper - lower bound of a DNN dual point (docs/scl.md, "Every minimiser"). For X* = Gram of
    [W*; H*^T] (value f* <= upper, feasible for the relaxation), f(X*) - LB is the sum of three nonnegative terms
    (Fenchel-Young gaps, <S, X*>, <Nn, B*>), each <= E:

    - cross-class inner products: n_c n_c' m_cc' h_c.h_c' <= E (m the scaled multipliers, one per unordered pair);
    - logits: (n_c w_c / N) KL(p_c || softmax(z_c)) <= E, so (Pinsker) |softmax(z_c) - p_c|_inf <= delta_c =
      sqrt(N E / (2 n_c w_c)), p_c = v_c / w_c + q_c the dual probability vector;
    - norms: ||h_c|| >= ||z_c|| / ||W*||_F, ||W*||_F^2 <= 2 upper / lw, ||z_c|| >= log(s_cc / s_cj) / sqrt 2;
    - the classifier: W* = -grad F(Z*) H*^T / lw (stationarity in the free W), so the logit z_c[c'] = w_c'.h_c
      satisfies -N lw z_c[c'] >= n_c w_c (s_c[c'] - q_c[c']) ||h_c||^2 - sum_{c'' != c} n_c'' w_c'' h_c.h_c'';
      when the proven bounds make that positive, w_c' has a negative entry (h_c >= 0 and w_c'.h_c < 0).

    Returns None without a finite gap; else the proven bounds (max cross-class cosine, per class lower bounds of
    the norms, whether every minimiser's classifier has a negative entry)."""
    dual = getattr(cert, "dual", None)
    # the float value at the best point may sit a few ulps below its exact value: widen E by that rounding
    E = float(upper) - float(cert.lower_bound) + ROUND_SAFETY * (p.K + 4) * EPS * (abs(float(upper)) + 1.0)
    if dual is None or not (math.isfinite(E) and E >= 0):
        return None
    loss = p.loss
    if not hasattr(loss, "targets"):
        return None
    K, N, d = p.K, p.N, p.d
    n = p.counts.astype(float)
    w = np.asarray(loss.w, float)
    Q = loss.targets(np.arange(K))
    P = dual["V"] / w[None, :] + Q
    m = dual["m"]
    delta = np.sqrt(N * E / (2.0 * n * w))
    wf = math.sqrt(2.0 * max(upper, 0.0) / p.lw)
    norm_lo = np.zeros(K)
    for c in range(K):
        others = [j for j in range(K) if j != c]
        j = min(others, key=lambda j: P[j, c])
        num, den = P[c, c] - delta[c], P[j, c] + delta[c]
        if num > 0 and den > 0 and num > den:
            norm_lo[c] = math.log(num / den) / math.sqrt(2.0) / wf
    with np.errstate(divide="ignore", invalid="ignore"):
        ip = E / (np.outer(n, n) * m)          # h_c.h_c' upper bounds
    np.fill_diagonal(ip, 0.0)
    ip[~np.isfinite(ip)] = np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        cosb = ip / np.outer(norm_lo, norm_lo)
    np.fill_diagonal(cosb, 0.0)
    cosb[~np.isfinite(cosb)] = np.inf
    # the full sign pattern of the logits of every minimiser: z_c[c'] < 0 (c' != c) and z_c[c] > 0
    pattern = np.zeros((K, K), dtype=bool)
    for c in range(K):
        rest = float(sum(n[cc] * w[cc] * ip[c, cc] for cc in range(K) if cc != c))
        for cp in range(K):
            lead = n[c] * w[c] * ((P[cp, c] - delta[c] - Q[cp, c]) if cp != c else (Q[c, c] - P[c, c] - delta[c]))
            pattern[cp, c] = bool(lead * norm_lo[c] ** 2 > rest)
    neg = []
    for c in range(K):
        # z_c[c'] = w_c'.h_c = -(1/(N lw)) sum_c'' n_c'' g_c''[c'] h_c''.h_c; a negative logit of a nonnegative
        # feature forces a negative entry of w_c' (on the support of h_c)
        rest = float(sum(n[cc] * w[cc] * ip[c, cc] for cc in range(K) if cc != c))
        ok = any(n[c] * w[c] * (P[cp, c] - delta[c] - Q[cp, c]) * norm_lo[c] ** 2 > rest for cp in range(K) if cp != c)
        neg.append(bool(ok))
    return {"gap": E, "max_cross_cosine_upper": float(np.max(cosb)) if K > 1 else 0.0,
            "max_cross_inner_upper": float(np.max(ip)) if K > 1 else 0.0, "norm_lower": norm_lo.tolist(),
            "softmax_deviation": delta.tolist(), "classifier_negative_entry_proven": bool(all(neg)),
            "classifier_negative_per_class": neg, "logit_sign_pattern_proven": bool(pattern.all())}


def certificate_at(p: GeneralUFM, W: np.ndarray, U: np.ndarray, *, upper: float | None = None) -> Certificate:
    """The DNN dual point built from the best point: loss gradients at its logits and KKT multipliers."""
    n = p.counts.astype(float)
    Zc = (W @ U) / np.sqrt(n)[None, :]
    _, Vg = p.loss.value_grad(Zc, np.arange(p.K))
    m = kkt_multipliers(p, W, U)
    return dual_bound(p, Vg, m, upper=upper, method="dnn dual at the best point (gradient + KKT multipliers)")


def conic_dual(p: GeneralUFM, *, solver: str = "CLARABEL") -> dict:
    """An independent route: the class-reduced DNN relaxation's DUAL solved by a conic solver,
        max (1/N) sum_c n_c H(p_c)  s.t.  [[I, V D^{1/2}/N], [D^{1/2} V^T/N, lw lh I - lw D^{1/2} m D^{1/2}]] >= 0,
    V = w_c (p_c - q_c), m >= 0 (plain / smoothed / weighted CE). Only its point (P, m) is used: projected onto the
    simplex and m >= 0, then judged by :func:`dual_bound`. Returns {"certificate", "status", "solver_objective"}."""
    import cvxpy as cp

    K, N = p.K, p.N
    loss = p.loss
    if not hasattr(loss, "targets") or K > CONIC_MAX_CLASSES:
        return {"certificate": None, "status": "skipped"}
    n = p.counts.astype(float)
    sq = np.sqrt(n)
    Q = loss.targets(np.arange(K))
    w = loss.w
    P = cp.Variable((K, K), nonneg=True)
    m = cp.Variable((K, K), symmetric=True)
    V = cp.multiply(P - Q, np.tile(w, (K, 1)))
    Vs = V @ np.diag(sq / N)
    M = cp.bmat([[np.eye(K), Vs], [Vs.T, p.lw * p.lh * np.eye(K) - p.lw * (np.diag(sq) @ m @ np.diag(sq))]])
    cons = [cp.sum(P, axis=0) == 1, m >= 0, cp.diag(m) == 0, 0.5 * (M + M.T) >> 0]
    obj = cp.Maximize(cp.sum(cp.multiply(np.tile(n * w / N, (K, 1)), cp.entr(P))))
    prob = cp.Problem(obj, cons)
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "inaccurate" solutions are fine: only the repaired point is used
            prob.solve(solver=solver)
    except Exception as exc:  # a solver failure is route trouble, not a verdict
        return {"certificate": None, "status": f"failed: {exc}"}
    if P.value is None:
        return {"certificate": None, "status": prob.status}
    Pv = np.maximum(np.asarray(P.value), 0.0)
    Pv = Pv / Pv.sum(axis=0, keepdims=True)
    Vv = (Pv - Q) * w[None, :]
    cert = dual_bound(p, Vv, np.asarray(m.value), method="dnn dual from the conic solver's dual point (repaired)")
    return {"certificate": cert, "status": prob.status, "solver_objective": prob.value}


# ---------------------------------------------------------------------------------------------------
# Geometry at a point
# ---------------------------------------------------------------------------------------------------

def geometry(p: GeneralUFM, W: np.ndarray, U: np.ndarray) -> dict:
    """Class-mean cosines (features), classifier entries' signs, at the point (not a statement)."""
    n = p.counts.astype(float)
    Hc = U / np.sqrt(n)[None, :]
    nr = np.linalg.norm(Hc, axis=0)
    G = Hc.T @ Hc
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = G / np.outer(nr, nr)
    cos[~np.isfinite(cos)] = np.nan
    scale = float(np.max(np.abs(W))) if W.size else 0.0
    neg = int(np.sum(W < -1e-8 * scale)) if scale > 0 else 0
    return {"class_mean_cosines": cos, "feature_norms": nr, "classifier_min_entry": float(np.min(W)) if W.size else None,
            "classifier_negative_entries": neg, "max_offdiag_cosine": float(np.nanmax(np.abs(cos - np.diag(np.diag(cos)))))
            if p.K > 1 else None}


# ---------------------------------------------------------------------------------------------------
# With a free classifier bias (the package's default convention, lb = 0): best point, and a proven lower bound
# over every orthogonal-frame configuration (docs/scl.md, "With a free bias")
# ---------------------------------------------------------------------------------------------------

def _multistart(fun, rng, K, d, starts, bounds, max_evals):
    from scipy.optimize import minimize

    best = None
    for _ in range(starts):
        x0 = np.concatenate([rng.standard_normal(K * d) / math.sqrt(d), np.abs(rng.standard_normal(d * K)) / math.sqrt(d),
                             np.zeros(K)])
        r = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"maxfun": max_evals, "maxiter": max_evals, "ftol": FACTR * EPS, "gtol": PGTOL})
        if best is None or r.fun < best.fun:
            best = r
    return best


def solve_with_bias(p: GeneralUFM, *, starts: int = 4, seed: int = 0, max_evals: int = MAX_EVALS_PER_START) -> dict:
    """Best point of f(W, H, b) = (1/N) sum_i loss(W h_i + b; y_i) + decays, H >= 0, b free (class level: collapse
    is exact for fixed (W, b) as without a bias). Returns {"value", "W", "U", "b"}."""
    from scipy.optimize import minimize

    K, d = p.K, p.d
    n = p.counts.astype(float)
    sq, wts = np.sqrt(n), n / p.N
    y = np.arange(K)

    def fun(x):
        W, U, b = x[:K * d].reshape(K, d), x[K * d:K * d + d * K].reshape(d, K), x[K * d + d * K:]
        Z = (W @ U) / sq[None, :] + b[:, None]
        vals, G = p.loss.value_grad(Z, y)
        gZ = G * wts[None, :]
        f = float(wts @ vals) + 0.5 * p.lw * float(np.sum(W * W)) + 0.5 * p.lh * float(np.sum(U * U))
        gW = (gZ / sq[None, :]) @ U.T + p.lw * W
        gU = W.T @ (gZ / sq[None, :]) + p.lh * U
        return f, np.concatenate([gW.ravel(), gU.ravel(), gZ.sum(axis=1)])

    rng = np.random.default_rng(seed)
    bounds = [(None, None)] * (K * d) + [(0.0, None)] * (d * K) + [(None, None)] * K
    with blas_threads(0):  # tiny products: threads only spin (setulb measured 6 ms per call threaded under load)
        best = _multistart(fun, rng, K, d, starts, bounds, max_evals)
    x = best.x
    W, U, b = x[:K * d].reshape(K, d), np.maximum(x[K * d:K * d + d * K].reshape(d, K), 0.0), x[K * d + d * K:]
    val = fun(np.concatenate([W.ravel(), U.ravel(), b]))[0]
    return {"value": float(val), "W": W, "U": U, "b": b}


def of_restricted_bias_bound(p: GeneralUFM, *, seed: int = 0, conic: bool = True) -> dict:
    """A proven lower bound on f over EVERY configuration with pairwise orthogonal class means (any d), with a free
    bias. Orthogonal nonnegative means have disjoint supports, collapse is exact, and minimising the scale of h_c
    turns class c's part into sqrt(lw lh n_c) ||u_c|| with u_c = W h_c free: the restricted problem is the convex
    min_{u, b} sum_c w_c loss(u_c + b; c) + sum_c beta_c ||u_c||, w_c = n_c / N, beta_c = sqrt(lw lh n_c). Weak
    duality: for g_c in the conjugate's domain with sum_c w_c g_c = 0 and ||w_c g_c|| <= beta_c,
    sum_c w_c loss(u_c + b) >= sum_c w_c <g_c, u_c> - sum_c w_c loss*(g_c) >= -sum_c beta_c ||u_c|| - sum_c w_c loss*(g_c).
    g_c: the loss gradients at a numerical solution, centred (sum_c w_c g_c = 0 up to rounding, as in
    docs/ufm_general.md), scaled by t = min(1, min_c beta_c / ||w_c g_c||); the conjugate sum lowered by its rounding
    allowance. ``conic``: the numerical point from Clarabel (accurate; ~seconds of cvxpy compilation), else from
    L-BFGS on a smoothed norm (fast, a looser but equally valid bound). Returns {"lower_bound", "upper" (the
    restricted problem's value at the numerical point), ...}."""
    from scipy.optimize import minimize

    K = p.K
    n = p.counts.astype(float)
    w = n / p.N
    beta = np.sqrt(p.lw * p.lh * n)
    y = np.arange(K)
    SM = 1e-30  # smoothing of the norm inside the numerical solve only (the bound below does not use it)

    def fun(x):
        Uc, b = x[:K * K].reshape(K, K), x[K * K:]
        Z = Uc + b[:, None]
        vals, G = p.loss.value_grad(Z, y)
        nr = np.sqrt(np.sum(Uc * Uc, axis=0) + SM)
        f = float(w @ vals) + float(beta @ nr)
        gU = G * w[None, :] + Uc * (beta / nr)[None, :]
        return f, np.concatenate([gU.ravel(), (G * w[None, :]).sum(axis=1)])

    Uc = b = None
    if conic and hasattr(p.loss, "targets"):  # the convex restricted problem by a conic solver: only its point is used
        import warnings

        import cvxpy as cp

        Uv, bv = cp.Variable((K, K)), cp.Variable(K)
        Q = p.loss.targets(y)
        Zv = Uv + cp.reshape(bv, (K, 1), order="F") @ np.ones((1, K))
        obj = sum(w[c] * p.loss.w[c] * (cp.log_sum_exp(Zv[:, c]) - Q[:, c] @ Zv[:, c]) + beta[c] * cp.norm(Uv[:, c])
                  for c in range(K))
        prob = cp.Problem(cp.Minimize(obj))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prob.solve(solver="CLARABEL")
            if Uv.value is not None:
                Uc, b = np.asarray(Uv.value), np.asarray(bv.value)
        except Exception:  # route trouble: fall back to L-BFGS below
            Uc = None
    if Uc is None:
        with blas_threads(0):
            best = None
            for s_ in range(3):
                x0 = np.concatenate([(np.eye(K) - 1.0 / K).ravel() * (1.0 + s_), np.zeros(K)])
                r = minimize(fun, x0, jac=True, method="L-BFGS-B",
                             options={"maxfun": MAX_EVALS_PER_START, "maxiter": MAX_EVALS_PER_START,
                                      "ftol": FACTR * EPS, "gtol": PGTOL})
                if best is None or r.fun < best.fun:
                    best = r
        Uc, b = best.x[:K * K].reshape(K, K), best.x[K * K:]
    upper_val = fun(np.concatenate([Uc.ravel(), b]))[0]
    _, G = p.loss.value_grad(Uc + b[:, None], y)
    r_ = G @ w  # sum_c w_c g_c: the bias residual
    Gc = G - r_[:, None]
    nrm = np.linalg.norm(Gc * w[None, :], axis=0)
    t = float(min(1.0, np.min(beta / np.where(nrm > 0, nrm, np.inf)))) * (1.0 - 4 * EPS)
    conj = p.loss.conjugate(t * Gc, y)
    if conj is None or not np.all(np.isfinite(conj)):
        return {"lower_bound": -math.inf, "upper": float(upper_val), "why": "dual point out of the conjugate's domain"}
    terms = w * conj
    allowance = ROUND_SAFETY * (K + 4) * EPS * (float(np.sum(np.abs(terms))) + 1.0)
    return {"lower_bound": -float(np.sum(terms)) - allowance, "upper": float(upper_val), "scale_t": t,
            "bias_residual": float(np.max(np.abs(r_))), "allowance": allowance}
