"""Two-level hierarchical feature collapse: exact risk, gradient, multi-start L-BFGS, relaxation certificate.

Model and relaxation: ``theory.feature_collapse_hier`` and docs/feature_collapse.md ("Hierarchy"). The exact
risk is the level-2 fixed-LN risk (``solvers.feature_collapse.FCProblem`` of ``level2_instance``) evaluated at
the chunk features Q(omega) = phi(A [e_{w_1}; ...; e_{w_L1}]), so the relaxation bound (Q free) is the family's
sdp-dual bound of the level-2 instance, and its uniqueness certificate pins the chunk features of every
minimiser whenever a network point attains the bound.
"""

from __future__ import annotations

import math
import time

import numpy as np

from solvers.common import Solution, blas_threads
from solvers.feature_collapse import LBFGS_FTOL, LBFGS_GTOL, FCProblem, certificate_at, dual_certificate
from theory._validate import InstanceError
from theory.feature_collapse_hier import HierInstance, chunk_words, level2_instance

#: L-BFGS iterations per start (the work budget; no wall-clock limit).
HIER_MAXITER = 3000


def _ln(X):
    V = X - X.mean(axis=1, keepdims=True)
    n = np.linalg.norm(V, axis=1, keepdims=True)
    if np.any(n == 0):
        raise FloatingPointError("LayerNorm undefined: a vector proportional to the all-ones vector")
    return math.sqrt(X.shape[1]) * V / n, (V, n)


def _ln_back(dOut, cache, d):
    V, n = cache
    eh = V / n
    dV = math.sqrt(d) / n * (dOut - np.sum(dOut * eh, axis=1, keepdims=True) * eh)
    return dV - dV.mean(axis=1, keepdims=True)


class HierProblem:
    """Exact objective of the two-layer network with analytic gradient."""

    def __init__(self, h: HierInstance):
        self.h = h
        self.inst2 = level2_instance(h)
        self.prob2 = FCProblem(self.inst2)
        self.chunks = chunk_words(h)  # (n_chunks, L1)

    def chunk_features(self, W, A):
        E, c1 = _ln(W)
        Ecat = E[self.chunks].reshape(len(self.chunks), -1)
        Q, c2 = _ln(Ecat @ A.T)
        return E, Ecat, Q, (c1, c2)

    def objective(self, W, A, U, grad: bool = True):
        h = self.h
        E, Ecat, Q, (c1, c2) = self.chunk_features(W, A)
        Z = U @ Q.T
        reg = 0.5 * h.lam * float(np.sum(U * U))
        if not grad:
            return self.prob2.ce(Z, grad=False) + reg
        v, G = self.prob2.ce(Z)
        dU = G @ Q + h.lam * U
        dY = _ln_back(G.T @ U, c2, h.d2)
        dA = dY.T @ Ecat
        dEcat = (dY @ A).reshape(len(self.chunks), h.L1, h.d1)
        dE = np.zeros_like(E)
        for l in range(h.L1):
            np.add.at(dE, self.chunks[:, l], dEcat[:, l, :])
        dW = _ln_back(dE, c1, h.d1)
        return v + reg, dW, dA, dU

    def sizes(self):
        h = self.h
        return h.n_w * h.d1, h.d2 * h.L1 * h.d1, h.K * h.L2 * h.d2

    def unpack(self, x):
        h = self.h
        a, b, _ = self.sizes()
        return (x[:a].reshape(h.n_w, h.d1), x[a:a + b].reshape(h.d2, h.L1 * h.d1),
                x[a + b:].reshape(h.K * h.L2, h.d2))

    def fun(self, x):
        v, *g = self.objective(*self.unpack(x))
        return v, np.concatenate([t.ravel() for t in g])


#: work of one search at most: starts x 2 maxiter evaluations (L-BFGS's maxfun) x the flop-equivalents of one
#: evaluation (eval_flops); --starts 64 --iterations 100000 ran for minutes, --dims 1000,1000 --iterations 50 26 s
#: (1.35e11 flops: ~4e9 flop/s measured here), the default instance ~1.2 ms of Python overhead per evaluation;
#: the limit admits solve_hier's defaults (4 starts x 3000 iterations) on the default instance (1.47e11)
HIER_MAX_FLOPS = 1.5e11
#: flop-equivalents of the per-evaluation overhead (numpy calls, LayerNorm, the L-BFGS step; ~1.2 ms at 4e9 flop/s)
HIER_EVAL_OVERHEAD = 5e6


def eval_flops(h: HierInstance) -> float:
    """Flop-equivalents of one objective + gradient evaluation, from the sizes: the chunk products (A and U against
    the chunk features, forward and back), the vector work on every variable, the cross-entropy over the sentences
    and a fixed overhead."""
    nch = len(chunk_words(h))
    return (6.0 * (nch * h.L1 * h.d1 * h.d2 + h.K * h.L2 * h.d2 * nch)
            + 20.0 * (h.n_w * h.d1 + h.d2 * h.L1 * h.d1 + h.K * h.L2 * h.d2) + 10.0 * h.n_sentences * h.K
            + HIER_EVAL_OVERHEAD)


def check_budget(h: HierInstance, n_starts: int, maxiter: int) -> None:
    """InstanceError (before any work) when the search's nominal work exceeds HIER_MAX_FLOPS."""
    if isinstance(n_starts, bool) or not isinstance(n_starts, (int, np.integer)) or not 0 <= n_starts <= 64:
        raise InstanceError(f"n_starts (--starts) must be an integer in [0, 64], got {n_starts!r}")
    if isinstance(maxiter, bool) or not isinstance(maxiter, (int, np.integer)) or not 1 <= maxiter <= 100_000:
        raise InstanceError(f"maxiter (--iterations) must be an integer in [1, 100000], got {maxiter!r}")
    work = n_starts * 2.0 * maxiter * eval_flops(h)
    if work > HIER_MAX_FLOPS:
        raise InstanceError(f"the L-BFGS search needs up to {n_starts} starts x {2 * maxiter} evaluations x "
                            f"{eval_flops(h):.3g} flops = {work:.3g} flops, above the work budget {HIER_MAX_FLOPS:g}; "
                            "reduce --starts, --iterations or --dims")


def solve_hier(h: HierInstance, *, n_starts: int = 4, seed: int = 0, maxiter: int = HIER_MAXITER) -> Solution:
    """Best point of several random starts (L-BFGS, ``maxiter`` iterations per start: a work budget)."""
    if isinstance(n_starts, bool) or not isinstance(n_starts, (int, np.integer)) or not 1 <= n_starts <= 64:
        raise InstanceError(f"n_starts (--starts) must be an integer in [1, 64], got {n_starts!r}")
    check_budget(h, n_starts, maxiter)
    P = HierProblem(h)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    n = sum(P.sizes())
    with blas_threads(0.0):  # small products: threaded BLAS only spins (measured 7x slower wall time under load)
        best, vals, its = _starts(P, rng, n, n_starts, maxiter)
    diag = {"n_starts": n_starts, "seed": seed, "start_values": vals, "iterations": its, "maxiter": maxiter}
    if best is None:
        return Solution(float("nan"), "L-BFGS (hierarchical)", False, time.perf_counter() - t0, {}, diag)
    v, (W, A, U) = best
    E, _, Q, _ = P.chunk_features(W, A)
    return Solution(v, f"L-BFGS x{n_starts} (hierarchical)", True, time.perf_counter() - t0,
                    {"W": W, "A": A, "U": U, "E": E, "Q": Q}, diag)


def _starts(P, rng, n, n_starts, maxiter):
    from scipy.optimize import minimize  # here: importing scipy.optimize costs ~0.5 s at start-up

    best, vals, its = None, [], []
    for _ in range(n_starts):
        x0 = rng.normal(scale=1.0, size=n)
        try:
            res = minimize(P.fun, x0, jac=True, method="L-BFGS-B",
                           options={"maxiter": int(maxiter), "maxcor": 30, "ftol": LBFGS_FTOL, "gtol": LBFGS_GTOL,
                                    "maxfun": 2 * int(maxiter)})
            parts = P.unpack(res.x)
            v = P.objective(*parts, grad=False)
        except FloatingPointError:
            vals.append(None)
            continue
        vals.append(v)
        its.append(int(res.nit))
        if best is None or v < best[0]:
            best = (v, parts)
    return best, vals, its


def relaxation_certificate(P: HierProblem, Q: np.ndarray, U: np.ndarray) -> dict:
    """Proven lower bound of the hierarchical objective (the level-2 relaxation's sdp-dual bound at (Q, U)) and the
    level-2 uniqueness certificate at the same point."""
    val = P.prob2.objective(Q, U, grad=False)  # features already LayerNorm outputs: LN(Q) = Q
    cert = certificate_at(P.prob2, Q, U, val)
    return {"lower_bound": cert.lower_bound, "level2_value": val, "uniqueness": dual_certificate(P.prob2, Q, U)}
