"""Feature collapse beyond the symmetric model: no weight decay, random latents (numbers only).

- No weight decay (lambda = 0): latent groups (classes sharing a latent variable), the infimum of the
  cross-entropy H = sum_g (m_g/K) log m_g, a ray along which CE decreases to H (``ray_values``), and the
  max-margin problem min ||Z||_* s.t. every margin >= 1 with a dual point (``max_margin_bracket``).
- Random latents: lower bounds of the network objective (no LayerNorm) over points whose embedding Gram
  W W^T lies in a linear subspace (``subspace_lower_bound``: tied words, equiangular concepts), and the
  constrained candidates (``solve_tied``, ``solve_equiangular``). Derivations: docs/feature_collapse.md
  ("Random latents").
"""

from __future__ import annotations

import math

import numpy as np

from solvers.feature_collapse import EPS, LBFGS_FTOL, LBFGS_GTOL, ROUNDOFF_C, FCProblem
from theory.feature_collapse import FCInstance, concept_vectors

#: L-BFGS iterations per constrained solve (work budget).
CONSTRAINED_MAXITER = 5000


# ---------------------------------------------------------------------------------------------
# No weight decay
# ---------------------------------------------------------------------------------------------

def latent_groups(inst: FCInstance) -> list[int]:
    """Multiplicities m_g of the distinct latent variables (classes sharing one latent form a group)."""
    _, counts = np.unique(inst.latent_vars, axis=0, return_counts=True)
    return sorted(int(c) for c in counts)


def infimum_ce(inst: FCInstance) -> float:
    """H = sum_g (m_g/K) log m_g: the infimum of the cross-entropy over all scores (docs: Gibbs + a ray)."""
    return float(sum(m / inst.K * math.log(m) for m in latent_groups(inst)))


def ray_direction(inst: FCInstance) -> np.ndarray:
    """Score matrix Z1 (K L x n_w) of the ray: without LayerNorm Z1[(k,l), v] = 1 if word v is in concept z_{k,l};
    with LayerNorm the type-II scores u_{k,l} = f_{z_kl}, phi(w) = sqrt(d) f_alpha (d >= n_c)."""
    alpha = np.repeat(np.arange(inst.n_c), inst.s_c)
    z = inst.latent_vars.reshape(-1)
    if not inst.layernorm:
        return (z[:, None] == alpha[None, :]).astype(float)
    F = concept_vectors(inst.n_c, inst.d, orthogonal_to_ones=True)
    return F[z] @ (math.sqrt(inst.d) * F[alpha]).T


def ray_values(inst: FCInstance, Z1: np.ndarray | None = None, ts=(1, 2, 4, 8, 16)) -> dict:
    """Exact (enumerated) CE at t Z1 for the given t, with each value's round-off allowance (relative: the CE
    evaluation's allowance plus ROUNDOFF_C EPS |value| for the final sum). t stops at 16 so that CE - H
    (~ e^-16 per margin) stays resolvable next to H's rounding."""
    prob = FCProblem(inst)
    Z1 = ray_direction(inst) if Z1 is None else Z1
    vals, errs = [], []
    for t in ts:
        v = prob.ce(t * Z1, grad=False)
        vals.append(v)
        errs.append(prob.ce_roundoff(t * Z1, v) + ROUNDOFF_C * EPS * abs(v))
    return {"t": list(ts), "values": vals, "roundoff": errs}


def margins(prob: FCProblem, Z: np.ndarray) -> np.ndarray:
    """(K, S) margins h_y(x) - h_j(x) (the label's own entry is +inf)."""
    sc = prob.scores(Z)
    m = sc[prob.y, prob.cols][None, :] - sc
    m[prob.y, prob.cols] = np.inf
    return m


def max_margin_bracket(inst: FCInstance, Z: np.ndarray, active_rtol: float = 1e-9) -> dict:
    """Bracket [dual, primal] of the max-margin value min ||Z||_* s.t. all margins >= 1 (no LayerNorm).

    Primal: Z / gamma (gamma = the smallest margin of Z) is feasible with value ||Z||_* / gamma. Dual: alpha
    uniform on the pairs (sentence, class) whose margin is within active_rtol of gamma, scaled to
    ||sum alpha A||_2 = 1 (A the margin's matrix): value N_active / ||M||_2 (weak duality)."""
    prob = FCProblem(inst)
    m = margins(prob, Z)
    gamma = float(m.min())
    nuc = float(np.linalg.svd(Z, compute_uv=False).sum())
    if not gamma > 0:
        return {"gamma": gamma, "primal": None, "dual": None, "n_active": 0}
    act = np.argwhere(m <= gamma * (1 + active_rtol))
    K, L, n_w = inst.K, inst.L, inst.n_w
    M = np.zeros((K, L, n_w))
    for j, s in act:
        y = prob.y[s]
        for l in range(L):
            M[y, l, prob.X[s, l]] += 1.0
            M[j, l, prob.X[s, l]] -= 1.0
    sn = float(np.linalg.norm(M.reshape(K * L, n_w), 2))
    n = len(act)
    err = ROUNDOFF_C * EPS * (n + math.sqrt(M.size)) * float(np.linalg.norm(M))
    return {"gamma": gamma, "primal": nuc / gamma, "dual": n / (sn + err) if sn > 0 else None, "n_active": int(n),
            "nuclear_norm": nuc}


# ---------------------------------------------------------------------------------------------
# Random latents: bounds over embedding Grams in a subspace (no LayerNorm)
# ---------------------------------------------------------------------------------------------

def tie_matrix(inst: FCInstance, groups: list[list[int]]) -> np.ndarray:
    """0/1 matrix T (n_w x m): column j is the indicator of the tied word group j (words not listed stay alone)."""
    listed = {v for g in groups for v in g}
    cols = [list(g) for g in groups] + [[v] for v in range(inst.n_w) if v not in listed]
    T = np.zeros((inst.n_w, len(cols)))
    for j, g in enumerate(cols):
        T[g, j] = 1.0
    return T


def tied_lower_bound(prob: FCProblem, Z0: np.ndarray, T: np.ndarray) -> dict:
    """Proven lower bound of the network objective over points W = T M (tied words), no LayerNorm.

    Over such points the objective is >= min_Y CE(Y D^{-1/2} T^T) + lambda ||Y||_* (D = T^T T), a nuclear-norm
    program; the bound of solvers.feature_collapse.nuclear_lower_bound applies with G' = G T D^{-1/2}.
    Z0 must be tied (Z0 = Z0 T D^{-1} T^T)."""
    inst = prob.inst
    lam = inst.lam
    ce, G = prob.ce(Z0)
    Dm = np.sqrt(np.diag(T.T @ T))
    Gp = (G @ T) / Dm[None, :]
    gnorm = float(np.linalg.norm(Gp, 2))
    R = math.log(inst.K) / lam
    g_err = ROUNDOFF_C * math.sqrt(Gp.size) * EPS * float(np.linalg.norm(Gp)) * (1 + float(Dm.max()))
    inner = float(np.sum(G * Z0))
    tie_err = float(np.abs(Z0 - (Z0 @ T / Dm ** 2) @ T.T).max(initial=0.0))
    roundoff = (prob.ce_roundoff(Z0, ce) + ROUNDOFF_C * G.size * EPS * float(np.sum(np.abs(G * Z0))) + R * g_err)
    lb = ce - inner - R * max(0.0, gnorm + g_err - lam) - roundoff
    return {"lower_bound": lb, "grad_spectral_norm": gnorm, "roundoff": roundoff, "tie_residual": tie_err}


def equiangular_basis(inst: FCInstance) -> list[np.ndarray]:
    """P1 = C C^T (same concept), P2 = 1 1^T: W W^T in span{P1, P2} means collapsed words and concept
    embeddings with equal norms and equal pairwise inner products (a scaled equiangular set)."""
    C = np.zeros((inst.n_w, inst.n_c))
    C[np.arange(inst.n_w), np.repeat(np.arange(inst.n_c), inst.s_c)] = 1.0
    return [C @ C.T, np.ones((inst.n_w, inst.n_w))]


def subspace_lower_bound(prob: FCProblem, Z0: np.ndarray, basis: list[np.ndarray]) -> dict:
    """Proven lower bound of the network objective (no LayerNorm) over points with W W^T in span(basis).

    Lifting X = [[A, Z^T], [Z, B]] >= 0, A = W W^T in the subspace, objective CE(Z) + (lambda/2)(tr A + tr B).
    With G = grad CE(Z0), A_G = G^T G/(2 lambda) and D = A_G + Pi((lambda/2) I - A_G) (Pi the Frobenius
    projection onto the subspace), <D, A> = (lambda/2) tr A on the subspace and
    S_D = [[D, G^T/2], [G/2, (lambda/2) I]] >= diag(D - A_G, 0); since tr X <= 2 log K/lambda at every point
    below log K, min >= CE(Z0) - <G, Z0> + min(0, lambda_min(D - A_G)) 2 log K / lambda."""
    inst = prob.inst
    lam = inst.lam
    ce, G = prob.ce(Z0)
    AG = G.T @ G / (2 * lam)
    B = np.array([b.ravel() for b in basis])
    Mx = (lam / 2) * np.eye(inst.n_w) - AG
    coef = np.linalg.solve(B @ B.T, B @ Mx.ravel())
    corr = (coef @ B).reshape(inst.n_w, inst.n_w)
    corr = (corr + corr.T) / 2
    n = inst.n_w
    lmin = float(np.linalg.eigvalsh(corr).min())
    eig_err = ROUNDOFF_C * EPS * (n * float(np.linalg.norm(corr)) + float(np.linalg.norm(Mx)) * n
                                  + G.shape[0] * float(np.sum(G * G)) / (2 * lam))
    R = 2 * math.log(inst.K) / lam
    roundoff = (prob.ce_roundoff(Z0, ce) + ROUNDOFF_C * G.size * EPS * float(np.sum(np.abs(G * Z0)))
                + R * eig_err)
    lb = ce - float(np.sum(G * Z0)) + min(0.0, lmin - eig_err) * R - roundoff
    return {"lower_bound": lb, "lambda_min": lmin, "coefficients": coef.tolist(), "roundoff": roundoff}


def _lbfgs(fun, x0, maxiter):
    from scipy.optimize import minimize  # here: importing scipy.optimize costs ~0.5 s at start-up

    return minimize(fun, x0, jac=True, method="L-BFGS-B",
                    options={"maxiter": int(maxiter), "maxcor": 30, "ftol": LBFGS_FTOL, "gtol": LBFGS_GTOL,
                             "maxfun": 2 * int(maxiter)})


def solve_tied(inst: FCInstance, T: np.ndarray, *, n_starts: int = 2, seed: int = 0,
               maxiter: int = CONSTRAINED_MAXITER) -> dict:
    """Best point of the network objective (no LayerNorm) over W = T M (L-BFGS, ``maxiter`` per start)."""
    prob = FCProblem(inst)
    m, d, KL = T.shape[1], inst.d, inst.K * inst.L
    rng = np.random.default_rng(seed)

    def fun(x):
        M = x[:m * d].reshape(m, d)
        U = x[m * d:].reshape(KL, d)
        W = T @ M
        v, dW, dU = prob.objective(W, U)
        return v, np.concatenate([(T.T @ dW).ravel(), dU.ravel()])

    best = None
    for _ in range(n_starts):
        res = _lbfgs(fun, rng.normal(scale=1 / math.sqrt(d), size=(m + KL) * d), maxiter)
        if best is None or res.fun < best.fun:
            best = res
    M = best.x[:m * d].reshape(m, d)
    U = best.x[m * d:].reshape(KL, d)
    W = T @ M
    return {"value": float(prob.objective(W, U, grad=False)), "W": W, "U": U, "Z": U @ W.T, "iterations": int(best.nit)}


def solve_equiangular(inst: FCInstance, *, n_starts: int = 2, seed: int = 0, maxiter: int = CONSTRAINED_MAXITER) -> dict:
    """Best point over collapsed words with concept embeddings a f_alpha + c e (f a simplex ETF, e a unit vector
    orthogonal to it): W W^T in span{P1, P2} (needs d >= n_c)."""
    prob = FCProblem(inst)
    d, KL = inst.d, inst.K * inst.L
    F = concept_vectors(inst.n_c, d, orthogonal_to_ones=True)  # rows orthogonal to 1 (d >= n_c)
    e = np.ones(d) / math.sqrt(d)
    alpha = np.repeat(np.arange(inst.n_c), inst.s_c)
    rng = np.random.default_rng(seed)

    def build(x):
        return (x[0] * F + x[1] * e[None, :])[alpha], x[2:].reshape(KL, d)

    def fun(x):
        W, U = build(x)
        v, dW, dU = prob.objective(W, U)
        da = float(np.sum(dW * F[alpha]))
        dc = float(np.sum(dW @ e))
        return v, np.concatenate([[da, dc], dU.ravel()])

    best = None
    for _ in range(n_starts):
        x0 = np.concatenate([[1.0, 0.1], rng.normal(scale=1 / math.sqrt(d), size=KL * d)])
        res = _lbfgs(fun, x0, maxiter)
        if best is None or res.fun < best.fun:
            best = res
    W, U = build(best.x)
    return {"value": float(prob.objective(W, U, grad=False)), "W": W, "U": U, "Z": U @ W.T, "a": float(best.x[0]),
            "c": float(best.x[1]), "iterations": int(best.nit)}
