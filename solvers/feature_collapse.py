"""Feature collapse: the network's exact population risk, its gradient, solvers, certificates.

The network (``spec/feature_collapse.md``): embeddings W (n_w x d), optional LayerNorm
phi(w) = sqrt(d) (w - mean(w)) / ||w - mean(w)|| (eps = 0, no affine part), classifier U
(K L x d, row ``k*L + l`` is u_{k,l}); score h_k(x) = sum_l <u_{k,l}, phi(w_{x_l})>. The scores
depend on the parameters only through Z = U E^T (E = phi(W) or W), a (K L) x n_w matrix.

Exact risk: the average of the softmax cross-entropy over all K s_c^L (class, sentence)
pairs weighted by their probabilities (``theory.feature_collapse.sentence_distribution``),
plus (lw/2)||W||^2 + (lu/2)||U||^2. Everything is float64, log-sum-exp is stabilised, the
gradient is analytic (tests compare it with finite differences).

Certificates (lower bounds on the global optimum, valid for every d):

- no LayerNorm, "nuclear-kkt": the network objective is >= F(Z) = CE(Z) + lambda ||Z||_*
  (since (||U||^2 + ||W||^2)/2 >= ||U W^T||_*), a convex function. Linearising CE at a
  candidate Z0 with gradient G, and using that every minimiser has ||Z||_* <= R = log(K)/lambda
  (F(Z*) <= F(0) = log K and CE >= 0), gives
  min F >= CE(Z0) - <G, Z0> - R max(0, ||G||_2 - lambda).
- no LayerNorm, "convex-program": the same convex program solved by cvxpy (small instances);
  the rigorous bound is then the nuclear-kkt bound at cvxpy's solution.
- LayerNorm, "sdp-dual" (derived in this project, not in the paper): with E of rows of norm
  sqrt(d), [[E E^T, Z^T], [Z, U U^T]] is PSD with diag(E E^T) = d, so the objective is >= the
  SDP min CE(Z) + (lambda/2) tr T over [[G, Z^T], [Z, T]] >= 0, diag G = d. Its Lagrange dual at
  the linearisation gives, for any nu with diag(nu) >= A := G0^T G0 / (2 lambda) (G0 the CE gradient
  at Z0), the bound CE(Z0) - <G0, Z0> - d sum(nu). nu is built from the candidate and shifted
  by the most negative eigenvalue of diag(nu) - A so that it is feasible.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from solvers.common import Certificate, Solution
from theory._validate import InstanceError
from theory.feature_collapse import FCInstance, sentence_distribution

#: Largest number of (class, sentence) pairs enumerated for the exact risk, and the largest
#: K * (number of pairs) (one evaluation costs that many exponentials). Beyond these the risk is
#: not computed (clear error with the size instead of a memory error).
MAX_SENTENCES = 200_000
MAX_WORK = 30_000_000

#: cvxpy certificate only when K * (number of pairs) is at most this (exponential cones).
MAX_CVXPY_WORK = 20_000

#: L-BFGS stopping: gradient max-norm and relative decrease. Values near machine precision so that
#: objective values are accurate to ~1e-12 (the claims compare to 1e-6 relative).
LBFGS_GTOL = 1e-11
LBFGS_FTOL = 1e-15
LBFGS_MAXITER = 20_000

#: A start counts as converged when its final gradient norm (2-norm over all parameters)
#: is below this; a few orders above what L-BFGS reaches on these smooth problems.
CONVERGED_GRAD = 1e-6

#: Initial parameter scale of the random starts: entries N(0, INIT_SCALE^2 / d). Away from the
#: critical point at 0 (and from w proportional to 1, where LayerNorm is undefined).
INIT_SCALE = 1.0


def _problem_key(inst: FCInstance):
    return (inst.n_c, inst.L, inst.s_c, inst.K, inst.freqs, inst.latents, inst.seed)


@dataclass
class FCProblem:
    """The exact risk of one instance, with analytic gradients."""

    inst: FCInstance

    def __post_init__(self):
        inst = self.inst
        S = inst.n_sentences
        if S > MAX_SENTENCES or S * inst.K > MAX_WORK:
            raise InstanceError(
                f"instance too large to enumerate: K * s_c^L = {inst.K} * {inst.s_c}^{inst.L} = {S} sentences "
                f"x K = {inst.K} scores (limits {MAX_SENTENCES} sentences, {MAX_WORK} scores); "
                f"reduce K, s_c or L (predictions at any size: `ncproofs table feature-collapse`)")
        self.X, self.y, self.p = sentence_distribution(inst)
        self.S = self.X.shape[0]
        self.cols = np.arange(self.S)
        from scipy.sparse import csr_matrix

        # one-hot (n_w x S) word-at-position-l matrices for the gradient G_l = dS O_l^T
        self.onehot_T = [csr_matrix((np.ones(self.S), (self.X[:, l], self.cols)), shape=(inst.n_w, self.S))
                         for l in range(inst.L)]

    # ---- cross-entropy as a function of Z ---------------------------------------------------
    def scores(self, Z: np.ndarray) -> np.ndarray:
        """(K, S) scores from Z ((K L) x n_w)."""
        inst = self.inst
        Z3 = Z.reshape(inst.K, inst.L, inst.n_w)
        sc = np.zeros((inst.K, self.S))
        for l in range(inst.L):
            sc += Z3[:, l, :][:, self.X[:, l]]
        return sc

    def ce(self, Z: np.ndarray, grad: bool = True):
        """Exact cross-entropy CE(Z) and its gradient dCE/dZ ((K L) x n_w)."""
        inst = self.inst
        sc = self.scores(Z)
        m = sc.max(axis=0)
        ex = np.exp(sc - m)
        se = ex.sum(axis=0)
        lse = m + np.log(se)
        val = float(np.dot(self.p, lse - sc[self.y, self.cols]))
        if not grad:
            return val
        dS = ex / se
        dS[self.y, self.cols] -= 1.0
        dS *= self.p
        G3 = np.zeros((inst.K, inst.L, inst.n_w))
        for l in range(inst.L):
            # G3[j, l, v] = sum_{s: X[s,l] = v} dS[j, s]
            G3[:, l, :] = (self.onehot_T[l] @ dS.T).T
        return val, G3.reshape(inst.K * inst.L, inst.n_w)

    # ---- the network ------------------------------------------------------------------------
    def features(self, W: np.ndarray):
        """E = phi(W) (LayerNorm, eps = 0) or W; also returns (V, norms) for the backward pass."""
        if not self.inst.layernorm:
            return W, None
        V = W - W.mean(axis=1, keepdims=True)
        nrm = np.linalg.norm(V, axis=1, keepdims=True)
        if np.any(nrm == 0):
            raise FloatingPointError("LayerNorm undefined: an embedding is proportional to the all-ones vector")
        return math.sqrt(self.inst.d) * V / nrm, (V, nrm)

    def objective(self, W: np.ndarray, U: np.ndarray, grad: bool = True):
        """Network objective CE + (lw/2)||W||^2 + (lu/2)||U||^2 and its gradient (dW, dU)."""
        inst = self.inst
        E, cache = self.features(W)
        Z = U @ E.T
        reg = 0.5 * inst.lw * float(np.sum(W * W)) + 0.5 * inst.lu * float(np.sum(U * U))
        if not grad:
            return self.ce(Z, grad=False) + reg
        val, G = self.ce(Z)
        dU = G @ E + inst.lu * U
        dE = G.T @ U
        if cache is None:
            dW = dE
        else:
            V, nrm = cache
            eh = V / nrm
            dV = math.sqrt(inst.d) / nrm * (dE - np.sum(dE * eh, axis=1, keepdims=True) * eh)
            dW = dV - dV.mean(axis=1, keepdims=True)
        dW = dW + inst.lw * W
        return val + reg, dW, dU

    def pack(self, W, U):
        return np.concatenate([W.ravel(), U.ravel()])

    def unpack(self, x):
        inst = self.inst
        nW = inst.n_w * inst.d
        return x[:nW].reshape(inst.n_w, inst.d), x[nW:].reshape(inst.K * inst.L, inst.d)

    def fun(self, x):
        W, U = self.unpack(x)
        v, dW, dU = self.objective(W, U)
        return v, self.pack(dW, dU)

    def grad_norm(self, W, U) -> float:
        _, dW, dU = self.objective(W, U)
        return float(math.sqrt(np.sum(dW * dW) + np.sum(dU * dU)))


def problem(inst: FCInstance) -> FCProblem:
    return FCProblem(inst)


def exact_risk(inst: FCInstance, W, U) -> float:
    """The exact population objective of the network at (W, U)."""
    return FCProblem(inst).objective(np.asarray(W, float), np.asarray(U, float), grad=False)


# ---------------------------------------------------------------------------------------------
# Certificates
# ---------------------------------------------------------------------------------------------

def nuclear_lower_bound(prob: FCProblem, Z: np.ndarray) -> dict:
    """Rigorous lower bound on min_Z CE(Z) + lambda ||Z||_* from a candidate Z (no LayerNorm)."""
    inst = prob.inst
    lam = inst.lam
    ce, G = prob.ce(Z)
    gnorm = float(np.linalg.norm(G, 2))
    R = math.log(inst.K) / lam
    lb = ce - float(np.sum(G * Z)) - R * max(0.0, gnorm - lam)
    nuc = float(np.linalg.svd(Z, compute_uv=False).sum()) if Z.size else 0.0
    return {"lower_bound": lb, "convex_value": ce + lam * nuc, "grad_spectral_norm": gnorm,
            "nuclear_radius": R}


def zero_gradient_spectral_norm(inst: FCInstance) -> float:
    """||grad CE(0)||_2: the exact threshold without LayerNorm (Z = 0 optimal iff <= lambda)."""
    prob = FCProblem(inst)
    _, G = prob.ce(np.zeros((inst.K * inst.L, inst.n_w)))
    return float(np.linalg.norm(G, 2))


def sdp_lower_bound(prob: FCProblem, E: np.ndarray, U: np.ndarray) -> dict:
    """Rigorous lower bound for the LayerNorm network from the SDP relaxation's dual (see module doc)."""
    inst = prob.inst
    lam, d = inst.lam, inst.d
    Z = U @ E.T
    ce, G = prob.ce(Z)
    A = G.T @ G / (2 * lam)
    G0 = E @ E.T
    nu = np.diag(A @ G0) / d
    M = np.diag(nu) - A
    shift = max(0.0, -float(np.linalg.eigvalsh((M + M.T) / 2).min()))
    nu = nu + shift
    lb = ce - float(np.sum(G * Z)) - d * float(nu.sum())
    return {"lower_bound": lb, "dual_shift": shift}


def cvxpy_convex_optimum(inst: FCInstance, prob: FCProblem | None = None) -> dict:
    """Solve min_Z CE(Z) + lambda ||Z||_* with cvxpy (no LayerNorm, small instances).

    Returns the solver's value, its Z and the rigorous nuclear-kkt bound at that Z.
    """
    import cvxpy as cp

    if inst.layernorm:
        raise InstanceError("the convex (nuclear-norm) form exists only without LayerNorm")
    prob = prob or FCProblem(inst)
    if prob.S * inst.K > MAX_CVXPY_WORK:
        raise InstanceError(f"instance too large for the cvxpy certificate: K * sentences = {prob.S * inst.K} "
                            f"> {MAX_CVXPY_WORK}")
    K, L, n_w = inst.K, inst.L, inst.n_w
    Z = cp.Variable((K * L, n_w))
    obj = _cvx_cross_entropy(Z, prob, L, n_w, K) + inst.lam * cp.normNuc(Z)
    cpp = cp.Problem(cp.Minimize(obj))
    t0 = time.perf_counter()
    try:
        cpp.solve(solver=cp.CLARABEL)
    except Exception:  # pragma: no cover - solver fallback
        cpp.solve(solver=cp.SCS, eps=1e-9, max_iters=100000)
    Zv = np.asarray(Z.value, dtype=float)
    out = nuclear_lower_bound(prob, Zv)
    out.update(cvxpy_value=float(cpp.value), status=cpp.status, seconds=time.perf_counter() - t0, Z=Zv)
    return out


def _cvx_cross_entropy(Z, prob: FCProblem, L: int, n_w: int, K: int):
    """Exact population cross-entropy of the scores h_k(x) = sum_l Z[(k,l), x_l] as a cvxpy expression."""
    import cvxpy as cp

    sc = 0
    for l in range(L):
        O = np.zeros((n_w, prob.S))
        O[prob.X[:, l], prob.cols] = 1.0
        sc = sc + Z[l::L, :] @ O
    Py = np.zeros((K, prob.S))
    Py[prob.y, prob.cols] = prob.p
    return prob.p @ cp.log_sum_exp(sc, axis=0) - cp.sum(cp.multiply(Py, sc))


def cvxpy_sdp_relaxation(inst: FCInstance, prob: FCProblem | None = None) -> dict:
    """Solve the SDP relaxation of the LayerNorm problem with cvxpy (tiny instances; a cross-check
    of the sdp-dual bound): min CE(Z) + (lambda/2) tr T over [[G, Z^T], [Z, T]] >= 0, diag G = d."""
    import cvxpy as cp

    if not inst.layernorm:
        raise InstanceError("the SDP relaxation is for the LayerNorm network")
    prob = prob or FCProblem(inst)
    if prob.S * inst.K > MAX_CVXPY_WORK:
        raise InstanceError(f"instance too large for the cvxpy SDP: K * sentences = {prob.S * inst.K} "
                            f"> {MAX_CVXPY_WORK}")
    K, L, n_w = inst.K, inst.L, inst.n_w
    M = cp.Variable((n_w + K * L, n_w + K * L), PSD=True)
    Z = M[n_w:, :n_w]
    obj = _cvx_cross_entropy(Z, prob, L, n_w, K) + inst.lam / 2 * cp.trace(M[n_w:, n_w:])
    cpp = cp.Problem(cp.Minimize(obj), [cp.diag(M[:n_w, :n_w]) == inst.d])
    t0 = time.perf_counter()
    cpp.solve(solver=cp.CLARABEL)
    return {"cvxpy_value": float(cpp.value), "status": cpp.status, "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------
# Solver
# ---------------------------------------------------------------------------------------------

def _lbfgs(prob: FCProblem, x0: np.ndarray):
    res = minimize(prob.fun, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": LBFGS_MAXITER, "maxcor": 30, "ftol": LBFGS_FTOL, "gtol": LBFGS_GTOL,
                            "maxfun": 4 * LBFGS_MAXITER})
    return res


def solve(inst: FCInstance, *, n_starts: int = 4, seed: int = 0, certify: bool = True,
          cvxpy: bool = False, backend: str = "numpy", device: str = "cpu") -> Solution:
    """Global optimum of the network from ``n_starts`` random starts (scipy L-BFGS).

    Starts are random Gaussian (never the critical point 0). The best start is returned with
    variables W, U, E (features), Z; its certificate is nuclear-kkt (no LN) or sdp-dual (LN),
    plus the cvxpy convex program when ``cvxpy`` (small instances; with LN the SDP relaxation's
    value is reported as a cross-check, the rigorous bound stays the sdp-dual one).
    ``backend="torch"`` evaluates the objective with torch autograd (optional dependency).
    """
    if n_starts < 1:
        raise InstanceError(f"n_starts must be >= 1, got {n_starts}")
    t0 = time.perf_counter()
    prob = FCProblem(inst)
    fun = prob.fun
    if backend == "torch":
        fun = _torch_fun(prob, device)
    elif backend != "numpy":
        raise InstanceError(f"backend must be 'numpy' or 'torch', got {backend!r}")
    rng = np.random.default_rng(seed)
    n = (inst.n_w + inst.K * inst.L) * inst.d
    runs = []
    best = None
    for s in range(n_starts):
        x0 = rng.normal(scale=INIT_SCALE / math.sqrt(inst.d), size=n)
        res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                       options={"maxiter": LBFGS_MAXITER, "maxcor": 30, "ftol": LBFGS_FTOL,
                                "gtol": LBFGS_GTOL, "maxfun": 4 * LBFGS_MAXITER})
        W, U = prob.unpack(res.x)
        val = prob.objective(W, U, grad=False)
        gn = prob.grad_norm(W, U)
        runs.append({"value": val, "grad_norm": gn, "iterations": int(res.nit)})
        if best is None or val < best[0]:
            best = (val, W, U, gn)
    val, W, U, gn = best
    E, _ = prob.features(W)
    Z = U @ E.T
    values = np.array([r["value"] for r in runs])
    diag = {"n_starts": n_starts, "seed": seed, "grad_norm": gn, "start_values": values.tolist(),
            "start_spread": float(values.max() - values.min()), "n_sentences": prob.S, "backend": backend}
    cert = None
    if certify:
        if inst.layernorm:
            b = sdp_lower_bound(prob, E, U)
            details = {"note": "dual of the SDP relaxation (derived in ncproofs), valid for every d",
                       "dual_shift": b["dual_shift"]}
            if cvxpy and prob.S * inst.K <= MAX_CVXPY_WORK:  # cross-check: the relaxation solved by cvxpy
                c = cvxpy_sdp_relaxation(inst, prob)
                details.update(cvxpy_sdp_value=c["cvxpy_value"], cvxpy_status=c["status"],
                               cvxpy_seconds=c["seconds"])
            cert = Certificate(b["lower_bound"], val, "sdp-dual", details)
        else:
            b = nuclear_lower_bound(prob, Z)
            details = {"grad_spectral_norm": b["grad_spectral_norm"], "lambda": inst.lam,
                       "note": "nuclear-norm convex form, KKT/dual bound at the L-BFGS point"}
            lb, method = b["lower_bound"], "nuclear-kkt"
            if cvxpy and prob.S * inst.K > MAX_CVXPY_WORK:
                details["cvxpy_skipped"] = f"K * sentences = {prob.S * inst.K} > {MAX_CVXPY_WORK}"
            elif cvxpy:
                c = cvxpy_convex_optimum(inst, prob)
                details.update(cvxpy_value=c["cvxpy_value"], cvxpy_status=c["status"],
                               cvxpy_lower_bound=c["lower_bound"], cvxpy_seconds=c["seconds"])
                if c["lower_bound"] > lb:
                    lb, method = c["lower_bound"], "convex-program (cvxpy) + nuclear-kkt bound"
            cert = Certificate(lb, val, method, details)
    return Solution(value=val, method=f"L-BFGS x{n_starts} ({backend})", converged=gn <= CONVERGED_GRAD,
                    seconds=time.perf_counter() - t0, variables={"W": W, "U": U, "E": E, "Z": Z},
                    diagnostics=diag, certificate=cert)


def _torch_fun(prob: FCProblem, device: str):
    """value-and-gradient with torch autograd (float64). Clear error when torch/CUDA is missing."""
    try:
        import torch
    except ImportError:
        raise InstanceError("backend 'torch' needs torch: pip install -e '.[torch]'") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InstanceError(f"device {device!r} requested but CUDA is not available")
    inst = prob.inst
    X = torch.as_tensor(prob.X, device=device)
    y = torch.as_tensor(prob.y, device=device)
    p = torch.as_tensor(prob.p, device=device, dtype=torch.float64)

    def fun(x):
        xt = torch.tensor(x, dtype=torch.float64, device=device, requires_grad=True)
        nW = inst.n_w * inst.d
        W = xt[:nW].reshape(inst.n_w, inst.d)
        U = xt[nW:].reshape(inst.K * inst.L, inst.d)
        if inst.layernorm:
            V = W - W.mean(dim=1, keepdim=True)
            E = math.sqrt(inst.d) * V / V.norm(dim=1, keepdim=True)
        else:
            E = W
        Z3 = (U @ E.T).reshape(inst.K, inst.L, inst.n_w)
        sc = sum(Z3[:, l, :][:, X[:, l]] for l in range(inst.L))
        ce = (p * (torch.logsumexp(sc, dim=0) - sc[y, torch.arange(sc.shape[1], device=device)])).sum()
        val = ce + 0.5 * inst.lw * (W * W).sum() + 0.5 * inst.lu * (U * U).sum()
        val.backward()
        return float(val.detach()), xt.grad.detach().cpu().numpy()

    return fun


# ---------------------------------------------------------------------------------------------
# Measurements of a configuration (numbers only)
# ---------------------------------------------------------------------------------------------

#: Features and classifier vectors all below this norm: the trivial phase (L-BFGS stops ~1e-8
#: away from 0 there); directions and cosines are then undefined (None), not noise.
TRIVIAL_TOL = 1e-6

#: Singular values below this fraction of the largest count as zero in the numerical rank.
RANK_RTOL = 1e-6


def measure(inst: FCInstance, W: np.ndarray, U: np.ndarray, *, b_pred: float | None = None,
            Z_pred: np.ndarray | None = None) -> dict:
    """Geometry of a configuration: within-concept deviation, concept cosines, u-norms, rank of W.

    - ``within_concept_deviation``: max over concepts of max_beta ||e_(a,b)/|e_(a,b)| - mean dir||
      (directions; type III has different norms but the same direction) relative, and
      ``within_concept_spread`` the same for the vectors themselves relative to the largest norm.
    - ``concept_cosines``: cosines between the concept mean features (None for zero vectors).
    - ``u_norms``: min and max of ||u_{k,l}||, compared with b* when given.
    - ``rank_W``: numerical rank of the embedding matrix (RANK_RTOL).
    - ``Z_rel_error``: ||Z - Z_pred|| / ||Z_pred|| (rotation invariant) when Z_pred is given.
    """
    from theory.geometry import cosine_matrix

    prob_E = W
    if inst.layernorm:
        V = W - W.mean(axis=1, keepdims=True)
        nrm = np.linalg.norm(V, axis=1, keepdims=True)
        prob_E = math.sqrt(inst.d) * V / np.where(nrm > 0, nrm, 1.0)
    E = prob_E
    scale = float(np.linalg.norm(E, axis=1).max(initial=0.0))
    out: dict = {}
    if scale <= TRIVIAL_TOL and float(np.linalg.norm(U, axis=1).max(initial=0.0)) <= TRIVIAL_TOL:
        out.update(trivial=True, within_concept_deviation=None, within_concept_spread=0.0, concept_cosines=None,
                   concept_cosine_offdiag=None, rank_W=0)
    else:
        E3 = E.reshape(inst.n_c, inst.s_c, inst.d)
        norms = np.linalg.norm(E3, axis=2, keepdims=True)
        dirs = E3 / np.where(norms > 0, norms, 1.0)
        dev = dirs - dirs.mean(axis=1, keepdims=True)
        spread = E3 - E3.mean(axis=1, keepdims=True)
        means = E3.mean(axis=1)  # n_c x d
        cos = cosine_matrix(means.T)
        off = [cos[i][j] for i in range(inst.n_c) for j in range(inst.n_c) if i != j and cos[i][j] is not None]
        sv = np.linalg.svd(W, compute_uv=False)
        out.update(trivial=False,
                   within_concept_deviation=float(np.linalg.norm(dev, axis=2).max()),
                   within_concept_spread=float(np.linalg.norm(spread, axis=2).max() / scale),
                   concept_cosines=cos,
                   concept_cosine_offdiag={"min": min(off) if off else None, "max": max(off) if off else None,
                                           "etf": -1.0 / (inst.n_c - 1)},
                   word_norms=np.linalg.norm(E, axis=1).reshape(inst.n_c, inst.s_c).mean(axis=0).tolist(),
                   rank_W=int(np.sum(sv > RANK_RTOL * sv[0])))
    un = np.linalg.norm(U, axis=1)
    out["u_norms"] = {"min": float(un.min()), "max": float(un.max()), "b_pred": b_pred}
    if Z_pred is not None:
        Z = U @ E.T
        nz = float(np.linalg.norm(Z_pred))
        out["Z_rel_error"] = float(np.linalg.norm(Z - Z_pred) / nz) if nz > 0 else float(np.linalg.norm(Z))
    return out
