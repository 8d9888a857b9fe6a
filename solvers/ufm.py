"""Solvers for the classic UFM (spec/ufm.md): factored nonconvex, convex nuclear-norm, and a
dual (KKT) certificate that turns any candidate into a proven lower bound.

The loss is defined once (:func:`data_loss`) on logits U = Z + b 1^T and used by every route.

Certificate ("kkt-dual"): the problem equals min_{Z,b} L(Z + b 1^T) + lam ||Z||_* (+ lb/2||b||^2)
with lam = sqrt(lw lh) (when d >= rank Z). For any Lambda with ||Lambda||_2 <= lam (and
Lambda 1 = 0 when the bias is free), weak duality gives the lower bound -L^*(-Lambda) (+ bias
term). We build Lambda from the gradient of L at the candidate (scaled into the spectral-norm
ball when needed), so the bound is tight exactly when the candidate satisfies the KKT
conditions: -grad/lam = U V^T + W, U^T W = 0, W V = 0, ||W||_2 <= 1. That costs a few matrix
products and one SVD, scales to large k, and certifies a candidate found by any route.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import log_softmax, logsumexp, softmax

from solvers import lbfgs
from solvers.common import Certificate, Solution, blas_all_threads, blas_threads, usable_cores
from theory.ufm import UFMInstance

#: Gradient tolerance for L-BFGS (max-abs entry of the gradient); the
#: objective is smooth and strongly convex near the ETF optimum (away from s = 1/k), so
#: 1e-9 gives values accurate to ~1e-12.
LBFGS_GTOL = 1e-9
#: In float32 the gradient cannot go much below ~1e-6 of its scale; the result is then
#: reported with its float64 gradient and is "converged" only if that is small too.
LBFGS_GTOL_FLOAT32 = 1e-5
#: L-BFGS memory. Measured (benchmarks, CE/MSE k = 50..300): 10 pairs need about as many
#: evaluations as 20 or 30, while the per-iteration work grows with the memory, so 10 is fastest.
LBFGS_MEMORY = 10
#: Rebalance (W, H) and restart L-BFGS every this many iterations. With scipy's L-BFGS-B, 20 beat
#: 50, 100, 200 and no rebalancing (CE and MSE, k = 10..200). With solvers.lbfgs (restarts keep the
#: scale), evaluations to a 1e-6 gap, CE, every 20 -> 40: k = 10: 37 -> 35, k = 50: 63 -> 63,
#: k = 100: 71 -> 73, k = 300: 118 -> 112, k = 1000: 116 -> 106 (95 s -> 77 s; none: 176, 125 s).
REBALANCE_EVERY = 40
#: Above this k N min(k, N) the rebalancing SVD runs on every core (it is outside the objective's
#: threads; measured 2.6 s on one core at k = 1000, N = 5000).
LARGE_SVD = 1e8
#: Relative rank threshold for singular values when reading the support of Z.
RANK_RTOL = 1e-7
#: Largest k*N for which ``auto`` also solves the convex program outright (cvxpy/Clarabel).
CONVEX_MAX_SIZE = 400
#: Above this many entries of the (reduced) candidate the KKT residuals (a full SVD) are skipped;
#: the dual bound does not need them.
KKT_MAX_SIZE = 250_000
CLARABEL_TIGHT = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "tol_ktratio": 1e-10,
                  "max_iter": 500}


# ---------------------------------------------------------------------------------------
# The loss (defined once)
# ---------------------------------------------------------------------------------------

def data_loss(loss: str, U: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean data loss over samples and its gradient with respect to the logits U (k x N).

    CE: (1/N) sum_i [logsumexp(u_i) - u_{i, y_i}], gradient (softmax(U) - Y)/N.
    MSE: (1/(2N)) ||U - Y||_F^2, gradient (U - Y)/N.
    """
    k, N = U.shape
    idx = (y, np.arange(N))
    if loss == "ce":
        lse = logsumexp(U, axis=0)
        val = float(np.mean(lse - U[idx]))
        G = np.exp(U - lse)
        G[idx] -= 1.0
        return val, G / N
    R = U.copy()
    R[idx] -= 1.0
    return float(0.5 * np.sum(R * R) / N), R / N


def objective(inst: UFMInstance, W: np.ndarray, H: np.ndarray, b: np.ndarray) -> float:
    """Factored objective f(W, H, b) of spec/ufm.md."""
    val, _ = data_loss(inst.loss, W @ H + b[:, None], inst.labels())
    return val + 0.5 * (inst.lw * np.sum(W * W) + inst.lh * np.sum(H * H) + inst.lb * np.sum(b * b))


def objective_and_grad(x: np.ndarray, inst: UFMInstance, y: np.ndarray | None = None):
    """Packed objective and gradient for optimizers: x = [vec(W), vec(H), b].

    The same loss as :func:`data_loss` (a test checks both against finite differences); see
    :class:`JointObjective` for the evaluation, which solvers reuse across calls.
    """
    return JointObjective(inst, blocks=1)(x)


#: Column blocks are worth a thread only when each block's matrix products reach this many flops
#: (measured, 2-core machine: at 1.6 MFLOP per product (k = 50) two blocks were slower than one,
#: at 12.8 MFLOP (k = 100) and above they were 1.3-2x faster).
BLOCK_MIN_FLOPS = 5e6


class JointObjective:
    """f(W, H, b) and its gradient for one instance, with buffers reused across evaluations.

    Three matrix products per column block (W H_j, G_j H_j^T, W^T G_j) and one pass of exp over
    the logits, in place. The samples are split into ``blocks`` column blocks that run on
    threads (numpy and BLAS release the GIL), each with single-threaded BLAS: on small and
    medium products this beats multithreaded BLAS (whose threads spin and, on a loaded machine,
    were measured 25x slower) and it also parallelizes the exp pass. Use inside
    :func:`single_threaded_blas` for that; the result does not depend on the blocking beyond
    rounding. ``blocks=None`` picks min(usable cores, flops per product / BLOCK_MIN_FLOPS).
    """

    def __init__(self, inst: UFMInstance, blocks: int | None = None):
        k, d, N = inst.k, inst.d, inst.N
        if blocks is None:
            blocks = min(usable_cores(), int(2.0 * k * d * N // BLOCK_MIN_FLOPS))
        blocks = max(1, min(int(blocks), N))
        self.inst, self.blocks = inst, blocks
        self.kd, self.dN = k * d, d * N
        self.y = inst.labels()
        self.edges = [int(e) for e in np.linspace(0, N, blocks + 1)]
        # per-block buffers, reused: fresh large arrays cost page faults on every evaluation
        # (measured: about 1 ms of a 2.6 ms gradient at k = 100)
        self.U = [np.empty((k, b - a)) for a, b in zip(self.edges, self.edges[1:])]
        self.T = [np.empty((d, b - a)) for a, b in zip(self.edges, self.edges[1:])]
        self.PW = [np.empty((k, d)) for _ in range(blocks)]
        # flat positions of the label entries (row y_i, column i) in each block's U
        self.label_pos = [self.y[a:b] * (b - a) + np.arange(b - a) for a, b in zip(self.edges, self.edges[1:])]
        self.nfev = 0

    def __call__(self, x: np.ndarray):
        inst, kd, dN = self.inst, self.kd, self.dN
        k, d, N = inst.k, inst.d, inst.N
        self.nfev += 1
        W = x[:kd].reshape(k, d)
        H = x[kd: kd + dN].reshape(d, N)
        b = x[kd + dN:]
        g = np.empty_like(x)
        gH = g[kd: kd + dN].reshape(d, N)
        if self.blocks == 1:
            parts = [self._block(0, W, H, b, gH)]
        else:
            pool = _thread_pool(self.blocks - 1)
            futures = [pool.submit(self._block, j, W, H, b, gH) for j in range(1, self.blocks)]
            parts = [self._block(0, W, H, b, gH)] + [f.result() for f in futures]
        gW = g[:kd].reshape(k, d)
        np.multiply(W, inst.lw, out=gW)
        gb = inst.lb * b
        val = 0.0
        for v, pW, pb in parts:
            val += v
            gW += pW
            gb += pb
        g[kd + dN:] = gb
        xw, xh = x[:kd], x[kd: kd + dN]
        f = val / N + 0.5 * (inst.lw * float(xw @ xw) + inst.lh * float(xh @ xh) + inst.lb * float(b @ b))
        return f, g

    def _block(self, j, W, H, b, gH):
        """Samples edges[j]:edges[j+1]: (sum of their data losses, their G H^T, their G 1); writes W^T G + lh H."""
        a, e = self.edges[j], self.edges[j + 1]
        N = self.inst.N
        U, flat = self.U[j], self.label_pos[j]
        Uf = U.reshape(-1)  # a view: U is contiguous
        Hj = H[:, a:e]
        np.matmul(W, Hj, out=U)
        U += b[:, None]
        if self.inst.loss == "ce":
            zy = Uf[flat]
            m = U.max(axis=0)
            U -= m
            np.exp(U, out=U)
            ssum = U.sum(axis=0)
            val = float(np.sum(np.log(ssum) + m - zy))
            U *= 1.0 / (N * ssum)  # softmax / N
            Uf[flat] -= 1.0 / N  # G = (P - Y) / N
        else:
            Uf[flat] -= 1.0
            val = 0.5 * float(np.vdot(U, U))
            U *= 1.0 / N  # G = (U - Y) / N
        gHj = gH[:, a:e]
        np.matmul(W.T, U, out=gHj)
        gHj += np.multiply(Hj, self.inst.lh, out=self.T[j])
        return val, np.matmul(U, Hj.T, out=self.PW[j]), U.sum(axis=1)


_POOL = None
_POOL_WORKERS = 0


def _thread_pool(workers: int):
    """One process-wide pool for the column blocks, grown when more workers are needed."""
    global _POOL, _POOL_WORKERS
    if _POOL is None or _POOL_WORKERS < workers:
        from concurrent.futures import ThreadPoolExecutor

        # the old pool is not shut down: another thread may be submitting to it right now
        _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ncproofs-ufm")
        _POOL_WORKERS = workers
    return _POOL


def unpack(inst: UFMInstance, x: np.ndarray):
    k, d, N = inst.k, inst.d, inst.N
    return x[: k * d].reshape(k, d), x[k * d: k * d + d * N].reshape(d, N), x[k * d + d * N:]


# ---------------------------------------------------------------------------------------
# Factored nonconvex route
# ---------------------------------------------------------------------------------------

def initial_points(inst: UFMInstance, starts: int, seed: int, init_scale: float = 0.5) -> list[np.ndarray]:
    """Random starts shared by every backend (numpy's generator, so backends start identically).

    Gaussian with standard deviation ``init_scale``/sqrt(d), bias 0 (away from the critical point at 0).
    """
    rng = np.random.default_rng(seed)
    size = inst.k * inst.d + inst.d * inst.N + inst.k
    out = []
    for _ in range(starts):
        x0 = rng.standard_normal(size) * init_scale / math.sqrt(inst.d)
        x0[-inst.k:] = 0.0
        out.append(x0)
    return out


def solve_factored(inst: UFMInstance, *, starts: int = 3, seed: int = 0, init_scale: float = 0.5,
                   maxiter: int = 20000, gtol: float | None = None, backend: str = "numpy",
                   device: str | None = None, dtype: str = "float64", stop_at: float | None = None,
                   rebalance_every: int | None = REBALANCE_EVERY,
                   variable_projection: bool | None = None) -> Solution:
    """Minimise f(W, H, b) with L-BFGS (analytic or autograd gradient) from ``starts`` random starts.

    ``backend="numpy"`` uses :mod:`solvers.lbfgs`; ``backend="torch"`` uses torch.optim.LBFGS with a
    strong-Wolfe line search on ``device`` in ``dtype`` (see solvers.backends for fallbacks).
    Whatever the backend, the reported value and gradient are re-evaluated in float64 numpy,
    and ``converged`` means the float64 gradient's max-abs entry is <= 10 gtol.
    The numpy route restarts L-BFGS every ``rebalance_every`` iterations after replacing (W, H)
    by the balanced factorization of the same Z = W H (:func:`rebalance`): the data term is
    unchanged and the regularizer can only drop, so the objective never increases; it removes
    the slow "balancing" directions whose only curvature is the weight decay (measured: 1.1-4x
    fewer evaluations on the benchmark instances; ``None`` disables it).
    ``stop_at`` (numpy backend) stops a start as soon as the objective is <= that value
    (benchmarks: time to a target accuracy). Returns the best start; diagnostics list every
    start's value and the number of objective evaluations.

    ``variable_projection`` (MSE, numpy backend; default on there): minimise over W only, with
    (H, b) replaced by their exact minimiser for that W (:func:`projected_objective_and_grad`).
    The problem and its global minima are unchanged (min_{W,H,b} f = min_W min_{H,b} f); only W
    starts at random (the W part of the same start), and the joint gradient of the result is
    checked as for the joint route. ``False`` runs L-BFGS on (W, H, b) jointly.
    """
    from solvers.backends import resolve

    if starts < 1:
        raise ValueError(f"starts must be >= 1, got {starts}")
    choice = resolve(backend, device, dtype)
    if variable_projection is None:
        variable_projection = inst.loss == "mse" and choice.backend == "numpy"
    elif variable_projection and (inst.loss != "mse" or choice.backend != "numpy"):
        raise ValueError("variable_projection needs loss 'mse' and the numpy backend "
                         f"(got loss {inst.loss!r}, backend {choice.backend!r})")
    if gtol is None:
        gtol = LBFGS_GTOL if choice.dtype == "float64" else LBFGS_GTOL_FLOAT32
    t0 = time.perf_counter()
    # one BLAS thread; the joint objective runs its column blocks on threads (JointObjective)
    with blas_threads(0.0):
        return _solve_factored(inst, starts, seed, init_scale, maxiter, gtol, choice, stop_at, t0, rebalance_every,
                               variable_projection)


def rebalance(inst: UFMInstance, x: np.ndarray) -> np.ndarray:
    """(W, H, b) -> the balanced factorization of the same Z = W H (lw ||W||^2 = lh ||H||^2, minimal).

    Exact when d >= rank Z, which always holds for Z = W H; the objective cannot increase.
    """
    W, H, b = unpack(inst, x)
    if inst.k * inst.N * min(inst.k, inst.N) >= LARGE_SVD:  # an SVD of seconds: use every core
        with blas_all_threads():
            W2, H2, _ = factor(inst, W @ H, b)
    else:
        W2, H2, _ = factor(inst, W @ H, b)
    return np.concatenate([W2.ravel(), H2.ravel(), b])


def _lbfgs_rebalanced(inst, fun, x0, maxiter, gtol, every):
    if not every:
        r = lbfgs.minimize(fun, x0, gtol=gtol, maxiter=maxiter, memory=LBFGS_MEMORY)
        return r.x, r.nit, r.message
    x, nit, r = rebalance(inst, x0), 0, None
    while nit < maxiter:
        # a restart keeps the storage and the last inverse-Hessian scale, not the stale pairs
        # (measured: the scale saves 3-12% of the evaluations on the benchmark instances)
        r = lbfgs.minimize(fun, x, gtol=gtol, maxiter=min(every, maxiter - nit), memory=LBFGS_MEMORY,
                           state=r.state if r else None, gamma0=r.gamma if r else None)
        nit += r.nit
        if r.converged or r.nit == 0 or not r.message.startswith("maximum number of iterations"):
            return r.x, nit, r.message
        x = rebalance(inst, r.x)
    return x, nit, "maximum number of iterations reached"


def _solve_factored(inst, starts, seed, init_scale, maxiter, gtol, choice, stop_at, t0, rebalance_every,
                    variable_projection) -> Solution:
    y = inst.labels()
    best, runs = None, []
    nfev_total = 0
    fallback = None
    for x0 in initial_points(inst, starts, seed, init_scale):
        x = None
        if variable_projection and fallback is None:
            fun = _Objective(inst, stop_at, projected_objective_and_grad)
            try:
                try:
                    res = lbfgs.minimize(fun, x0[: inst.k * inst.d], gtol=gtol, maxiter=maxiter, memory=LBFGS_MEMORY)
                    w, nit, msg = res.x, res.nit, res.message
                except _TargetReached:
                    w, nit, msg = fun.x_hit, fun.nfev, "target value reached"
                x = projected_point(inst, w)
            except FloatingPointError as exc:  # N lh below rounding: the joint route still works
                fallback = f"{exc}; ran the joint route instead"
            nfev_total += fun.nfev
        if x is None and choice.backend == "numpy":
            fun = _Objective(inst, stop_at)
            try:
                x, nit, msg = _lbfgs_rebalanced(inst, fun, x0, maxiter, gtol, rebalance_every)
            except _TargetReached:
                x, nit, msg = fun.x_hit, fun.nfev, "target value reached"
            nfev_total += fun.nfev
        elif x is None:
            x, nit, msg = _lbfgs_torch(inst, x0, maxiter=maxiter, gtol=gtol, device=choice.device, dtype=choice.dtype)
        f, g = objective_and_grad(x, inst, y)
        gnorm = float(np.max(np.abs(g)))
        runs.append({"value": float(f), "iterations": nit, "grad_max": gnorm,
                     "converged": bool(gnorm <= 10 * gtol), "message": msg})
        if best is None or f < best[0]:
            best = (float(f), x, gnorm, nit)
    f, x, gnorm, nit = best
    W, H, b = unpack(inst, x)
    variable_projection = variable_projection and fallback is None
    method = "factored-lbfgs(numpy, variable projection)" if variable_projection else f"factored-lbfgs({choice.backend})"
    return Solution(f, method, gnorm <= 10 * gtol, time.perf_counter() - t0,
                    {"W": W, "H": H, "b": b},
                    {"iterations": nit, "grad_max": gnorm, "starts": starts, "seed": seed, "evaluations": nfev_total,
                     "start_values": [r["value"] for r in runs],
                     "start_spread": float(max(r["value"] for r in runs) - min(r["value"] for r in runs)),
                     "variable_projection": bool(variable_projection), "variable_projection_fallback": fallback,
                     **choice.to_dict()})


class _TargetReached(Exception):
    pass


class _Objective:
    """objective_and_grad with an evaluation counter and an optional early stop at a target value."""

    def __init__(self, inst: UFMInstance, stop_at: float | None, fn=None):
        self.inst, self.stop_at, self.nfev, self.y = inst, stop_at, 0, inst.labels()
        self.x_hit = None
        self.fn = fn
        self.joint = JointObjective(inst) if fn is None else None

    def __call__(self, x):
        self.nfev += 1
        f, g = self.joint(x) if self.fn is None else self.fn(x, self.inst)
        if self.stop_at is not None and f <= self.stop_at:
            self.x_hit = x.copy()
            raise _TargetReached
        return f, g


# ---------------------------------------------------------------------------------------
# Variable projection (MSE): (H, b) eliminated in closed form
# ---------------------------------------------------------------------------------------

def _projection(inst: UFMInstance, W: np.ndarray):
    """For MSE and a given W: B = (W W^T + c I)^{-1} with c = N lh, and u = B 1 (k x k, k).

    Derivation (docs/DEVELOPING.md, "variable projection"): for fixed W the objective is a
    strictly convex quadratic in (H, b). Its minimiser is b = 1/k (balanced classes; the
    bias is unregularized) and, for every sample of class c, h = W^T B (e_c - 1/k) (by
    h = (W^T W + c I)^{-1} W^T t = W^T (W W^T + c I)^{-1} t). The residual of that sample is
    -c B (e_c - 1/k), and the value reduces to f(W) = (lh n / 2) tr(B P) + (lw / 2) ||W||^2
    with P = I - 11^T/k; by the envelope theorem grad f(W) = lw W - lh n B P B W.
    """
    from scipy.linalg import lapack  # LAPACK directly: scipy.linalg's wrappers cost more than a k = 10 solve

    k = inst.k
    M = W @ W.T
    M.flat[:: k + 1] += inst.N * inst.lh
    L, info = lapack.dpotrf(M, lower=True, clean=True, overwrite_a=True)
    if info == 0:
        L, info = lapack.dpotri(L, lower=True, overwrite_c=True)
    if info != 0:  # c = N lh below rounding of ||W||^2 (or W not finite): no reliable projection
        raise FloatingPointError(f"variable projection: W W^T + N lh I is not numerically positive definite "
                                 f"(N lh = {inst.N * inst.lh:g}, LAPACK info {info}); use variable_projection=False")
    B = L + L.T  # dpotri filled the lower triangle; the upper one is zero (clean=True)
    B.flat[:: k + 1] *= 0.5
    return B, B.sum(axis=1)


def projected_objective_and_grad(w: np.ndarray, inst: UFMInstance):
    """MSE: f(W) = min_{H,b} objective(W, H, b) and its gradient, for w = vec(W) (see :func:`_projection`).

    Costs O(k^2 d + k^3) per evaluation, independent of the number of samples N.
    """
    k, d = inst.k, inst.d
    W = w.reshape(k, d)
    B, u = _projection(inst, W)
    scale = inst.lh * inst.n
    f = 0.5 * scale * (np.trace(B) - u.sum() / k) + 0.5 * inst.lw * float(w @ w)
    # B P B W = B (B W) - u (u^T W) / k, ordered to do the cheaper products
    BW = B @ (B @ W) if d < k else (B @ B) @ W
    G = inst.lw * W - scale * (BW - np.outer(u, u @ W) / k)
    return float(f), G.ravel()


def projected_point(inst: UFMInstance, w: np.ndarray) -> np.ndarray:
    """The packed point (W, H*(W), b*(W)) whose objective equals :func:`projected_objective_and_grad`."""
    k, d = inst.k, inst.d
    W = w.reshape(k, d)
    B, u = _projection(inst, W)
    Hc = W.T @ (B - u[:, None] / k)  # column c: W^T B (e_c - 1/k)
    H = np.repeat(Hc, inst.n, axis=1)
    return np.concatenate([W.ravel(), H.ravel(), np.full(k, 1.0 / k)])


def _lbfgs_torch(inst: UFMInstance, x0: np.ndarray, *, maxiter: int, gtol: float, device: str, dtype: str):
    """torch.optim.LBFGS (strong Wolfe) on the same objective, written with torch primitives."""
    import torch
    import torch.nn.functional as F

    tdt = torch.float64 if dtype == "float64" else torch.float32
    k, d, N = inst.k, inst.d, inst.N
    xt = torch.tensor(x0, dtype=tdt, device=device)
    W = xt[: k * d].reshape(k, d).clone().requires_grad_(True)
    H = xt[k * d: k * d + d * N].reshape(d, N).clone().requires_grad_(True)
    b = xt[k * d + d * N:].clone().requires_grad_(True)
    y = torch.as_tensor(inst.labels(), device=device)
    Y = F.one_hot(y, k).T.to(tdt) if inst.loss == "mse" else None
    lw, lh, lb = inst.lw, inst.lh, inst.lb

    def f():
        U = W @ H + b[:, None]
        data = F.cross_entropy(U.T, y) if inst.loss == "ce" else 0.5 * ((U - Y) ** 2).sum() / N
        return data + 0.5 * (lw * (W * W).sum() + lh * (H * H).sum() + lb * (b * b).sum())

    opt = torch.optim.LBFGS([W, H, b], lr=1.0, max_iter=maxiter, max_eval=2 * maxiter, tolerance_grad=gtol,
                            tolerance_change=0.0, history_size=30, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        val = f()
        val.backward()
        return val

    opt.step(closure)
    nit = int(opt.state[opt._params[0]].get("n_iter", 0))
    x = torch.cat([W.detach().reshape(-1), H.detach().reshape(-1), b.detach()]).to("cpu", torch.float64).numpy()
    return x, nit, f"torch LBFGS on {device} ({dtype})"


# ---------------------------------------------------------------------------------------
# Convex route (cvxpy)
# ---------------------------------------------------------------------------------------

def solve_convex(inst: UFMInstance, *, solver: str | None = None) -> Solution:
    """Solve min_{Z,b} L(Z + b 1^T) + sqrt(lw lh)||Z||_* (+ lb/2||b||^2) with cvxpy.

    Exact for the factored problem when d >= rank of the optimal Z (d >= k-1 suffices here).
    The returned Solution carries the dual certificate of its own Z (kkt-dual), so its
    lower bound does not rely on the interior-point solver's stopping tolerance.
    """
    import cvxpy as cp

    t0 = time.perf_counter()
    k, N = inst.k, inst.N
    Y = inst.onehot()
    Z = cp.Variable((k, N))
    b = cp.Variable(k)
    U = Z + cp.reshape(b, (k, 1), order="F") @ np.ones((1, N))
    if inst.loss == "ce":
        data = (cp.sum(cp.log_sum_exp(U, axis=0)) - cp.sum(cp.multiply(Y, U))) / N
    else:
        data = cp.sum_squares(U - Y) / (2 * N)
    obj = data + inst.lam * cp.normNuc(Z)
    if inst.lb:
        obj = obj + 0.5 * inst.lb * cp.sum_squares(b)
    prob = cp.Problem(cp.Minimize(obj))
    chosen = solver or ("CLARABEL" if "CLARABEL" in cp.installed_solvers() else "SCS")
    if chosen == "CLARABEL":
        # Tight interior-point tolerances: the dual certificate built from Z inherits Z's error
        # (default tolerances leave gaps ~1e-5 on CE; these give ~1e-9).
        prob.solve(solver=chosen, **CLARABEL_TIGHT)
    else:
        prob.solve(solver=chosen, eps=1e-9, max_iters=100000)
    ok = prob.status == cp.OPTIMAL
    Zv = np.asarray(Z.value) if Z.value is not None else np.zeros((k, N))
    bv = np.asarray(b.value) if b.value is not None else np.zeros(k)
    bv = polish_bias(inst, Zv, bv)
    val = convex_objective(inst, Zv, bv)
    cert = certificate(inst, Zv, bv)
    return Solution(val, f"convex-cvxpy({chosen})", ok, time.perf_counter() - t0, {"Z": Zv, "b": bv},
                    {"status": prob.status, "solver_value": float(prob.value) if prob.value is not None else None},
                    cert)


def convex_objective(inst: UFMInstance, Z: np.ndarray, b: np.ndarray) -> float:
    val, _ = data_loss(inst.loss, Z + b[:, None], inst.labels())
    return val + inst.lam * float(np.sum(np.linalg.svd(Z, compute_uv=False))) + 0.5 * inst.lb * float(b @ b)


def polish_bias(inst: UFMInstance, Z: np.ndarray, b: np.ndarray, iters: int = 50) -> np.ndarray:
    """Optimal bias for fixed Z (Newton's method for CE, closed form for MSE)."""
    y = inst.labels()
    if inst.loss == "mse":
        Y = inst.onehot()
        return (Y - Z).mean(axis=1)
    b = b.copy()
    N = inst.N
    for _ in range(iters):
        P = softmax(Z + b[:, None], axis=0)
        g = P.sum(axis=1) - np.bincount(y, minlength=inst.k) + inst.lb * N * b
        if np.max(np.abs(g)) <= 1e-14 * N:
            break
        Hs = np.diag(P.sum(axis=1)) - P @ P.T + inst.lb * N * np.eye(inst.k)
        step = np.linalg.lstsq(Hs, g, rcond=1e-12)[0]
        step -= step.mean() if inst.lb == 0 else 0.0  # the all-ones direction is flat when lb = 0
        b -= step
    return b


# ---------------------------------------------------------------------------------------
# KKT / dual certificate
# ---------------------------------------------------------------------------------------

def certificate(inst: UFMInstance, Z: np.ndarray, b: np.ndarray) -> Certificate:
    """Proven lower bound from a candidate (Z, b) of the convex problem (see module docstring).

    Returns a Certificate with ``upper`` = the convex objective at (Z, b) (attained by a
    factored point when d >= rank Z), ``lower_bound`` = the dual value, and details: the KKT
    residuals (``kkt_residual``: max of ||U^T G V - I||, ||U^T G P_V^perp||, ||P_U^perp G V||;
    ``kkt_spectral``: ||P_U^perp G P_V^perp||_2 which must be <= 1), the dual scaling t and
    whether the bound is valid (``valid`` false when no dual point could be built).
    """
    return _certificate(inst, Z, b, inst.labels(), np.ones(inst.N), "kkt-dual")


def certificate_classwise(inst: UFMInstance, Zc: np.ndarray, b: np.ndarray) -> Certificate:
    """The same certificate for a class-constant candidate Z = Zc (I_k (x) 1_n^T), in O(k^3).

    Symmetry reduction: with balanced classes the convex objective is invariant under
    permutations of the samples inside a class, so averaging any optimum over that group gives
    an optimum with identical columns inside each class. For such Z = Zc E (E stacks n copies
    of each column, E E^T = n I), the singular values of Z are sqrt(n) times those of Zc, and
    the loss, the dual value and the KKT residuals are the full problem's, computed on the
    k x k matrix Zc sqrt(n) with multiplicity n per column: no k x N matrix is formed.
    """
    Zc = np.asarray(Zc, dtype=float)
    if Zc.shape != (inst.k, inst.k):
        raise ValueError(f"Zc must be k x k = {inst.k} x {inst.k}, got {Zc.shape}")
    return _certificate(inst, Zc, b, np.arange(inst.k), np.full(inst.k, float(inst.n)), "kkt-dual (class-reduced)")


def _certificate(inst: UFMInstance, Zu: np.ndarray, b: np.ndarray, yu: np.ndarray, w: np.ndarray,
                 method: str) -> Certificate:
    """Certificate on unique columns Zu (k x m) with labels yu and multiplicities w (sum w = N).

    Z = Zu E with E E^T = diag(w), so every Frobenius/spectral quantity of Z equals that of
    Zu diag(sqrt(w)) and every sum over samples is a w-weighted sum over unique columns.
    """
    N, lam = inst.N, inst.lam
    m = Zu.shape[1]
    idx = (yu, np.arange(m))
    sw = np.sqrt(w)
    Uo = Zu + b[:, None]
    details: dict = {}
    if inst.loss == "ce":
        logP = log_softmax(Uo, axis=0)
        V = np.exp(logP)
        V[idx] -= 1.0  # gradient of each sample's CE wrt its logits
        data = float(np.dot(w, -logP[idx])) / N
    else:
        V = Uo.copy()
        V[idx] -= 1.0
        data = 0.5 * float(np.dot(w, np.sum(V * V, axis=0))) / N
    Zs = Zu * sw  # same singular values as Z
    kkt = Zs.size <= KKT_MAX_SIZE
    if kkt:
        Uz, S, Vt = np.linalg.svd(Zs, full_matrices=False)
    else:
        S = np.linalg.svd(Zs, compute_uv=False)
    upper = data + lam * float(np.sum(S)) + 0.5 * inst.lb * float(b @ b)
    bias_free = inst.lb == 0.0
    if bias_free:
        delta = (V @ w) / N  # exact Lambda 1 = 0 needs centred rows
        details["bias_residual"] = float(np.max(np.abs(delta)))
        Vc = V - delta[:, None]
    else:
        Vc = V
    sigma = _spectral_norm_upper(Vc * sw) / N
    t = 1.0 if sigma <= lam else lam / sigma
    details["dual_scale"] = t
    valid = True
    if inst.loss == "ce":
        # p_i = e_{y_i} + t v_i must lie in the simplex (it sums to 1 by construction).
        Pd = t * Vc
        Pd[idx] += 1.0
        if np.min(Pd) < 0.0:
            if np.min(Pd) > -1e-15:
                Pd = np.maximum(Pd, 0.0)
                Pd /= Pd.sum(axis=0, keepdims=True)
            else:
                valid = False
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = np.where(Pd > 0, Pd * np.log(np.where(Pd > 0, Pd, 1.0)), 0.0)
        lower = -float(np.dot(w, ent.sum(axis=0))) / N
        if not bias_free:
            lower -= float(np.sum((t * (V @ w) / N) ** 2)) / (2 * inst.lb)
    else:
        Lam = t * Vc / N
        lower = -float(np.dot(w, Lam[idx])) - 0.5 * N * float(np.dot(w, np.sum(Lam * Lam, axis=0)))
    details["valid"] = valid
    if kkt:
        details.update(_kkt_residuals(-(V * sw) / N / (lam if lam > 0 else 1.0), Uz, S, Vt))
    else:
        details.update(kkt_residual=None, kkt_spectral=None, rank=None,
                       kkt_note=f"KKT residuals skipped above {KKT_MAX_SIZE} entries; the dual gap certifies")
    return Certificate(lower if valid else -math.inf, upper, method, details)


def _spectral_norm_upper(A: np.ndarray) -> float:
    """An upper bound on ||A||_2 (the dual point must be feasible, so never underestimate).

    eigvalsh of the smaller Gram matrix is accurate to ~1e-15 ||A||^2 in absolute terms; the
    returned value adds that slack, which is far below any tolerance used for gaps.
    """
    Gm = A @ A.T if A.shape[0] <= A.shape[1] else A.T @ A
    top = float(np.linalg.eigvalsh(Gm)[-1]) if Gm.size else 0.0
    return math.sqrt(max(top, 0.0) * (1 + 1e-12) + 1e-300)


def _kkt_residuals(G: np.ndarray, Uz: np.ndarray, S: np.ndarray, Vt: np.ndarray) -> dict:
    """Residuals of G = U V^T + W, U^T W = 0, W V = 0, ||W||_2 <= 1 at Z = U S V^T."""
    r = int(np.sum(S > RANK_RTOL * S[0])) if S.size and S[0] > 0 else 0
    Ur, Vr = Uz[:, :r], Vt[:r, :].T
    GV = G @ Vr
    UG = Ur.T @ G
    res = [np.linalg.norm(Ur.T @ GV - np.eye(r)) if r else 0.0,
           np.linalg.norm(UG - (UG @ Vr) @ Vr.T) if r else 0.0,
           np.linalg.norm(GV - Ur @ (Ur.T @ GV)) if r else 0.0]
    Wp = G - Ur @ UG - GV @ Vr.T + Ur @ (UG @ Vr) @ Vr.T
    return {"kkt_residual": float(max(res)), "kkt_spectral": float(np.linalg.norm(Wp, 2)), "rank": r}


def closed_form_certificate(inst: UFMInstance, *, reduced: bool = True) -> Certificate:
    """The kkt-dual certificate at the closed-form optimum of theory.ufm.

    ``reduced`` (default) uses the class-reduced k x k computation (exact for the balanced,
    class-constant candidate; O(k^3) instead of O(k^2 N)); ``reduced=False`` builds the full Z.
    """
    from theory.ufm import optimal_logits

    Z, b = optimal_logits(inst)
    if reduced:
        return certificate_classwise(inst, Z[:, :: inst.n], b)
    return certificate(inst, Z, b)


def factor(inst: UFMInstance, Z: np.ndarray, b: np.ndarray):
    """Balanced factorization W H = Z of a convex solution (d >= rank Z): W = (lh/lw)^(1/4) U S^(1/2)."""
    Uz, S, Vt = np.linalg.svd(Z, full_matrices=False)
    r = min(inst.d, S.size)
    s = np.sqrt(S[:r])
    W = np.zeros((inst.k, inst.d))
    H = np.zeros((inst.d, inst.N))
    q = (inst.lh / inst.lw) ** 0.25
    W[:, :r] = q * Uz[:, :r] * s
    H[:r, :] = (s[:, None] * Vt[:r, :]) / q
    return W, H, b
