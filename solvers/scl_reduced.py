"""Supervised contrastive loss: the convex Gram relaxations solved by a conic solver (N x N, and reduced by
class symmetry to k x k) and the class-reduced dual bound at candidate class matrices (O(k^3), no conic solver).
Every value they return as a bound is a repaired dual point's objective (never the conic solver's). Part of the
SCL engine (``solvers.scl`` re-exports every name).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from solvers.common import Certificate, Solution
from solvers.scl_batching import _loss_gram, compile_batching
from solvers.scl_dual import EPS, ROUND_SAFETY, _eig_error, gram_certificate
from theory._validate import InstanceError, as_finite_array
from theory.scl import SCLInstance, validate_tau

#: Largest N for the convex Gram relaxations: the N x N PSD cone plus ~N^2 exponential cones
#: per batch; N = 60 solves in seconds with Clarabel, beyond that the factored solver (with the
#: theorem bound as certificate) is the route.
MAX_CERTIFICATE_SAMPLES = 60
#: Largest k for which the class-reduced relaxation is solved with a conic solver (it returns an
#: optimal Gram; measured 0.05 s at k = 10 and 816 s at k = 100). Beyond, its dual bound at
#: candidate points (:func:`class_reduced_dual`, O(k^3)) certifies the value.
REDUCED_CONIC_MAX_CLASSES = 30


@dataclass
class GramRelaxation:
    """Result of :func:`gram_relaxation` / :func:`class_reduced_relaxation` / :func:`class_reduced_dual`.

    ``value`` is a PROVEN lower bound on the loss at every d: the objective of a dual point repaired to
    exact feasibility and evaluated in float64 with a stated allowance (:func:`gram_certificate`,
    :func:`class_reduced_dual`), never the conic solver's reported objective (``objective``, kept
    for diagnostics). ``G`` is the solver's primal Gram (a candidate point), ``loss_at_G`` the loss
    re-evaluated there (an upper bound on the relaxation's optimum; feasible up to solver tolerance).
    """

    value: float | None
    G: np.ndarray | None
    status: str
    solver: str
    kind: str  # "doubly-nonnegative" | "sdp"
    seconds: float
    loss_at_G: float | None
    attempts: list = field(default_factory=list)
    free_samples: list = field(default_factory=list)  # samples the objective does not see
    objective: float | None = None  # the conic solver's reported objective (not a proof)
    warnings: list = field(default_factory=list)

    def distance_to(self, G_ref: np.ndarray) -> float | None:
        """max |G - G_ref| at the solver's point (a diagnostic only: never a witness)."""
        if self.G is None:
            return None
        d = float(np.max(np.abs(self.G - G_ref)))
        return max(d, 1.0) if self.free_samples else d

    @property
    def ok(self) -> bool:
        return self.value is not None and math.isfinite(self.value)


def gram_relaxation(counts: Sequence[int], batches, tau: float, *, nonneg: bool = True,
                    solver: str = "CLARABEL") -> GramRelaxation:
    """Minimise the loss over G PSD with diag(G) = 1 (and G >= 0 entrywise for UFM+) with a conic
    solver (through ``solvers.common.solve_conic``), then prove a lower bound by the repaired dual
    point built at the solver's primal Gram (:func:`gram_certificate`). Since every feasible H gives
    a feasible G = H^T H, the bound holds for the loss at every dimension d."""
    import cvxpy as cp
    import scipy.sparse as sps

    from solvers.common import solve_conic

    inst = SCLInstance(tuple(counts), tau, 1, nonneg, batches)
    N = inst.N
    if N > MAX_CERTIFICATE_SAMPLES:
        raise InstanceError(f"counts: the convex certificate handles N <= {MAX_CERTIFICATE_SAMPLES} samples, got N = {N}")
    solver = str(solver).upper()
    if solver not in ("CLARABEL", "SCS"):
        raise InstanceError(f"solver must be CLARABEL or SCS, got {solver!r}")
    tau = inst.tau
    cb = compile_batching(inst.labels, inst.batches)
    t0 = time.perf_counter()
    # Only samples in a batch holding an anchor enter the objective; the others are free (any
    # nonnegative unit vector). They are left out of the program (a large free face slows
    # interior-point convergence) and put back on fresh orthogonal directions (G_uu = 1, G_uj = 0).
    used = sorted({int(i) for g in cb.groups for t in np.flatnonzero(g.anchor.any(axis=1)) for i in g.idx[t]})
    free = sorted(set(range(N)) - set(used))
    n = len(used)
    loc = np.full(N, -1)
    loc[used] = np.arange(n)
    tried: list = []
    caught: list = []
    obj = None
    if n == 0:
        Gv, status = np.eye(N), "optimal"
        obj = 0.0
    else:
        G = cp.Variable((n, n), symmetric=True)
        vecG = cp.vec(G, order="C")  # vecG[i * n + j] = G[i, j]
        lin = np.zeros((n, n))
        terms = []
        for g in cb.groups:
            b, m = g.idx.shape
            rows_t, rows_i = np.nonzero(g.anchor)
            R = rows_t.size
            if R == 0:
                continue
            offs = np.array([[l for l in range(m) if l != i] for i in range(m)])  # (m, m-1)
            gi = loc[g.idx[rows_t, rows_i]]  # local anchor index, (R,)
            gl = loc[g.idx[rows_t[:, None], offs[rows_i]]]  # local negatives+positives, (R, m-1)
            cols = (gi[:, None] * n + gl).ravel()
            sel = sps.csr_matrix((np.ones(cols.size), (np.arange(cols.size), cols)), shape=(cols.size, n * n))
            X = cp.reshape(sel @ vecG, (R, m - 1), order="C")
            terms.append(cp.sum(cp.log_sum_exp(X / tau, axis=1)))
            w = (g.pos[rows_t, rows_i] / g.npos[rows_t, rows_i][:, None])  # (R, m) weights on positives
            np.add.at(lin, (np.broadcast_to(gi[:, None], w.shape), loc[g.idx[rows_t]]), w)
        objective = cp.sum(terms) - cp.sum(cp.multiply(lin, G)) / tau
        cons = [G >> 0, cp.diag(G) == 1]
        if nonneg:
            cons.append(G >= 0)
        prob = cp.Problem(cp.Minimize(objective), cons)
        res = solve_conic(prob, solver=solver)
        status, tried, caught = res["status"], res["attempts"], res["warnings"]
        obj = None if prob.value is None or not np.isfinite(prob.value) else float(prob.value)
        Gv = None
        if G.value is not None and np.all(np.isfinite(G.value)):
            Gv = np.eye(N)
            Gv[np.ix_(used, used)] = 0.5 * (G.value + G.value.T)
    loss_at = None
    val = None
    if Gv is not None:
        loss_at = float(_loss_gram(Gv, cb, tau, False)[0])
        cert = gram_certificate(Gv, inst.labels, cb, tau, nonneg=nonneg, method="repaired dual at the conic solver's point")
        val = cert.lower_bound
    secs = time.perf_counter() - t0
    return GramRelaxation(val, Gv, status, solver, "doubly-nonnegative" if nonneg else "sdp", secs, loss_at, tried,
                          free, obj, caught)


def class_reduced_relaxation(counts: Sequence[int], tau: float, *, nonneg: bool = True,
                             solver: str = "CLARABEL") -> GramRelaxation:
    """The full-batch convex Gram relaxation reduced by symmetry to a k x k class matrix.

    The full-batch loss and the constraints (G PSD, diag G = 1, and G >= 0 for UFM+) are
    invariant under permuting samples within a class, and the problem is convex, so averaging an
    optimal G over those permutations gives an optimal G of the form: 1 on the diagonal, a_c
    between two samples of class c, b_cc' between classes c and c'. Such a G is PSD iff
    a_c <= 1 (eigenvalue 1 - a_c on within-class zero-sum vectors) and the class matrix
    M_cc = 1 + (n_c - 1) a_c, M_cc' = sqrt(n_c n_c') b_cc' is PSD (G on the span of the class
    indicators). So this k x k program has exactly the optimal value of the N x N one. The conic
    solver's point M is only a candidate: ``value`` is the proven bound of :func:`class_reduced_dual`
    at M (a repaired dual point), never the solver's objective. The returned G is the N x N
    expansion of M, and ``loss_at_G`` re-evaluates it with the one definition of the loss."""
    import cvxpy as cp

    from solvers.common import solve_conic

    inst = SCLInstance(tuple(counts), tau, 1, nonneg, None)
    n = np.asarray(inst.counts, dtype=float)
    k, N, tau = inst.k, inst.N, inst.tau
    solver = str(solver).upper()
    if solver not in ("CLARABEL", "SCS"):
        raise InstanceError(f"solver must be CLARABEL or SCS, got {solver!r}")
    t0 = time.perf_counter()
    M = cp.Variable((k, k), symmetric=True)
    multi = np.flatnonzero(n >= 2)
    single = np.flatnonzero(n < 2)
    nm = np.where(n >= 2, n - 1, 1.0)  # n_c - 1 (1 for singletons: their rows are not used)
    dM = cp.diag(M)
    a = (dM - 1) / nm  # a_c (meaningful for n_c >= 2)
    cons = [M >> 0]
    if single.size:
        cons.append(dM[single] == 1)
    if multi.size:
        cons.append(dM[multi] <= n[multi])
    if nonneg:
        cons.append(M >= 0)  # b_cc' >= 0
        if multi.size:
            cons.append(dM[multi] >= 1)  # a_c >= 0
    terms = []
    if multi.size:
        isq = 1.0 / np.sqrt(n)
        B = cp.multiply(M, np.outer(isq, isq))  # b_cc' off the diagonal
        corr = a / tau + np.log(nm) - (cp.multiply(dM, 1.0 / n) / tau + np.log(n))
        Z = B / tau + np.tile(np.log(n), (k, 1)) + cp.diag(corr)
        lse = cp.log_sum_exp(Z[multi, :], axis=1)
        terms.append(n[multi] @ (lse - a[multi] / tau))
    tried: list = []
    caught: list = []
    if not terms:
        Mv, obj, status = np.eye(k), 0.0, "optimal"
    else:
        prob = cp.Problem(cp.Minimize(terms[0]), cons)
        res = solve_conic(prob, solver=solver)
        status, tried, caught = res["status"], res["attempts"], res["warnings"]
        obj = None if prob.value is None or not np.isfinite(prob.value) else float(prob.value)
        Mv = None if M.value is None or not np.all(np.isfinite(M.value)) else 0.5 * (M.value + M.value.T)
    Gv = None
    loss_at = None
    val = None
    if Mv is not None:
        y = inst.labels
        sq = np.sqrt(n)
        B = Mv / np.outer(sq, sq)  # b_cc' off the diagonal
        for c in range(k):
            B[c, c] = (Mv[c, c] - 1) / (n[c] - 1) if n[c] >= 2 else 1.0
        if N <= 20_000:
            Gv = B[np.ix_(y, y)]
            np.fill_diagonal(Gv, 1.0)
            loss_at = float(_loss_gram(Gv, compile_batching(y, None), tau, False)[0])
        val = class_reduced_dual(inst.counts, tau, nonneg=nonneg, candidates=[Mv]).value
    return GramRelaxation(val, Gv, status, solver, ("doubly-nonnegative" if nonneg else "sdp") + ", class-reduced k x k",
                          time.perf_counter() - t0, loss_at, tried, [], obj, caught)


# --------------------------------------------------------------------------------------
# Class-reduced dual (KKT) bound: the k x k relaxation certified without a conic solver
# --------------------------------------------------------------------------------------

def class_matrix(G_or_H: np.ndarray, counts: Sequence[int], *, features: bool) -> np.ndarray:
    """The k x k class matrix M = D^{-1/2} E^T G E D^{-1/2} of a sample Gram G (E: class
    indicators, D = diag(n_c)), or of features H (G = H^T H, computed from the class sums).

    For a class-symmetric G (1 on the diagonal, a_c within, b_cc' between classes) this is the
    matrix of :func:`class_reduced_relaxation`: M_cc = 1 + (n_c - 1) a_c, M_cc' = sqrt(n_c n_c') b_cc'.
    """
    counts = as_int_tuple_counts(counts)
    n = np.asarray(counts, dtype=float)
    y = np.repeat(np.arange(n.size), counts)
    N = y.size
    E = np.zeros((N, n.size))
    E[np.arange(N), y] = 1.0
    if features:
        H = as_finite_array("H", G_or_H, ndim=2)
        if H.shape[1] != N:
            raise InstanceError(f"H must have one column per sample: {N} (sum of counts), got {H.shape[1]}")
        S = H @ E  # class sums (d x k)
        B = S.T @ S
    else:
        G = as_finite_array("G", G_or_H, ndim=2, shape=(N, N))
        B = E.T @ G @ E
    isq = 1.0 / np.sqrt(n)
    return B * np.outer(isq, isq)


def reduced_loss(M: np.ndarray, counts: Sequence[int], tau: float) -> tuple[float, np.ndarray]:
    """Full-batch loss of the class-symmetric Gram with class matrix M, and its gradient C.

    F(M) = sum_{c: n_c >= 2} n_c [LSE_c - a_c/tau], LSE_c = log((n_c - 1) e^{a_c/tau} +
    sum_{c' != c} n_c' e^{b_cc'/tau}), a_c = (M_cc - 1)/(n_c - 1), b_cc' = M_cc'/sqrt(n_c n_c').
    C is symmetric with dF = sum_{c,c'} C_cc' dM_cc' for symmetric dM. F is convex (a sum of
    log-sum-exps of affine functions of M), defined for every symmetric M.
    """
    n = np.asarray(counts, dtype=float)
    k = n.size
    M = as_finite_array("class matrix M", M, ndim=2, shape=(k, k))
    tau = validate_tau(tau)
    multi = n >= 2
    sq = np.sqrt(n)
    nm = np.where(multi, n - 1.0, 1.0)
    a = (np.diag(M) - 1.0) / nm
    Z = M / np.outer(sq, sq) / tau + np.log(n)[None, :]  # b_cc'/tau + log n_c'
    np.fill_diagonal(Z, a / tau + np.log(nm))  # a_c/tau + log(n_c - 1)
    Zm = Z[multi]
    zmax = Zm.max(axis=1, keepdims=True)
    P = np.exp(Zm - zmax)
    ssum = P.sum(axis=1, keepdims=True)
    lse = (np.log(ssum) + zmax)[:, 0]
    P /= ssum  # softmax weights of each anchor row
    F = float(n[multi] @ (lse - a[multi] / tau))
    R = np.zeros((k, k))
    R[multi] = n[multi, None] * P / tau  # dF/dZ-scaled rows: n_c p_cc' / tau
    # off-diagonal: dM_cc' enters rows c and c' through b_cc' = M_cc'/sqrt(n_c n_c')
    C = (R + R.T) / (2.0 * np.outer(sq, sq))
    diag = np.where(multi, (np.diag(R) - n / tau) / nm, 0.0)  # through a_c, including the -a_c/tau term
    np.fill_diagonal(C, diag)
    return F, C


#: Off-diagonal entries of a candidate class matrix at most this fraction of sqrt(M_cc M_c'c')
#: are treated as active nonnegativity constraints (UFM+) when building the dual point.
ACTIVE_COSINE = 1e-2


def class_reduced_dual(counts: Sequence[int], tau: float, *, nonneg: bool = True,
                       candidates: Sequence[np.ndarray] = ()) -> GramRelaxation:
    """A proven lower bound on the full-batch loss from the k x k class-reduced relaxation,
    built from the KKT conditions at candidate class matrices (no conic solver: O(k^3)).

    The relaxation is min F(M) over K = {M PSD; M_cc = 1 for singleton classes and L_c <= M_cc <= n_c
    otherwise (L_c = 1 for UFM+, 0 for UFM); M_cc' >= 0 for UFM+} (:func:`class_reduced_relaxation`).
    For any symmetric candidate M0 with gradient C = grad F(M0), convexity gives
    F(M) >= F(M0) + <C, M - M0>, and for any N >= 0 (zero diagonal; UFM+ only) and mu with
    S = C - N - Diag(mu) PSD, <C, M> = <S, M> + <N, M> + sum mu_c M_cc >= sum_c h_c(mu_c) on K,
    with h_c(mu) = mu for singletons and min(mu L_c, mu n_c) otherwise. So
    LB = F(M0) - <C, M0> + sum_c h_c(mu_c) is a lower bound, whatever M0, N and mu.
    N and mu come from complementary slackness at M0 (N = C's positive off-diagonal part where
    M0 is at its nonnegativity bound; mu by least squares from S M0 = 0), then mu is lowered by
    the most negative eigenvalue of S so that S is PSD. The bound is tight when M0 is optimal.
    Returns the best bound over the candidates as a GramRelaxation (G = None: no primal Gram).
    """
    t0 = time.perf_counter()
    n = np.asarray(as_int_tuple_counts(counts), dtype=float)
    tau = validate_tau(tau)
    k = n.size
    multi = n >= 2
    lower_diag = np.where(multi, 1.0 if nonneg else 0.0, 1.0)
    upper_diag = np.where(multi, n, 1.0)
    best, attempts = None, []
    for M0 in candidates:
        M0 = as_finite_array("candidate class matrix", M0, ndim=2)
        if M0.shape != (k, k):
            raise InstanceError(f"candidate class matrix must be {k} x {k}, got {M0.shape[0]} x {M0.shape[1]}")
        M0 = 0.5 * (M0 + M0.T)
        F0, C = reduced_loss(M0, n, tau)
        Nm = np.zeros((k, k))
        if nonneg:
            dg = np.sqrt(np.maximum(np.diag(M0), 0.0))
            active = M0 <= ACTIVE_COSINE * np.outer(dg, dg)
            np.fill_diagonal(active, False)
            Nm = np.where(active, np.maximum(C, 0.0), 0.0)
        A = C - Nm
        rows = np.einsum("ij,ij->i", A @ M0, M0)
        norms = np.einsum("ij,ij->i", M0, M0)
        mu = np.where(norms > 0, rows / np.where(norms > 0, norms, 1.0), np.diag(A))
        S = A - np.diag(mu)
        evs = np.linalg.eigvalsh(0.5 * (S + S.T))
        lam = float(evs[0])
        shift = max(0.0, -lam) + _eig_error(k, float(np.abs(evs).max(initial=0.0))) \
            + EPS * float(np.abs(np.diag(A)).max(initial=0.0) + np.abs(mu).max(initial=0.0))
        mu = mu - shift
        h = np.where(mu < 0, mu * upper_diag, mu * lower_diag)
        CM = C * M0
        lb = F0 - float(np.sum(CM)) + float(h.sum())
        # stated round-off allowance (docs/scl.md): the loss (k rows of k + 1 logits of size |Z|), the
        # gradient's rounding times the diameter N + ||M0||_F of the feasible set (tr M <= N), and the sums
        zmag = float(np.abs(M0 / np.outer(np.sqrt(n), np.sqrt(n))).max(initial=0.0)) / tau + float(np.log(n).max()) + 1.0
        allow = ROUND_SAFETY * EPS * (math.log2(k + 1) + 4.0) * (
            float(n.sum()) * 2.0 * zmag
            + float(np.linalg.norm(C)) * (float(n.sum()) + float(np.linalg.norm(M0)))
            + abs(F0) + float(np.abs(CM).sum()) + float(np.abs(h).sum()))
        lb -= allow
        attempts.append({"candidate_value": F0, "lower_bound": lb, "psd_shift": shift, "allowance": allow})
        if best is None or lb > best:
            best = lb
    status = "optimal" if best is not None and math.isfinite(best) else "no candidate"
    return GramRelaxation(best, None, status, "kkt-dual", ("doubly-nonnegative" if nonneg else "sdp")
                          + ", class-reduced k x k, dual bound at candidates", time.perf_counter() - t0, None, attempts, [])


def reduced_candidates(inst: SCLInstance, H: np.ndarray | None = None) -> list[np.ndarray]:
    """Candidate class matrices for :func:`class_reduced_dual`: the solver's features (if given)
    and the predicted optima (collapsed OF for UFM+; collapsed ETF for balanced UFM). The bound
    is valid whatever the candidate; a predicted optimum only makes it tight when it is right."""
    n = np.asarray(inst.counts, dtype=float)
    out = [] if H is None else [class_matrix(H, inst.counts, features=True)]
    if inst.nonneg:
        out.append(np.diag(n))  # a_c = 1, b = 0
    elif len(set(inst.counts)) == 1:
        k = n.size
        out.append(n[0] * k / (k - 1) * (np.eye(k) - 1.0 / k))  # a_c = 1, b = -1/(k-1)
    return out


def as_int_tuple_counts(counts) -> tuple[int, ...]:
    from theory._validate import as_int_tuple

    return as_int_tuple("counts", counts, minimum=1, min_len=2)


def certify(solution: Solution, relax: GramRelaxation) -> Certificate | None:
    """Attach the relaxation's optimal value as a lower bound to a factored solution."""
    if not relax.ok:
        return None
    return Certificate(lower_bound=relax.value, upper=solution.value,
                       method=f"convex Gram relaxation ({relax.kind}, {relax.solver})",
                       details={"status": relax.status, "relaxation_seconds": relax.seconds})


def class_mean_gram(H: np.ndarray, labels) -> np.ndarray:
    """Gram of the (uncentred) class means."""
    from theory.geometry import class_means

    M = class_means(H, labels)
    return M.T @ M
