"""Feature collapse: the network's exact population risk, its gradient, solvers, certificates.

The network (``docs/feature_collapse.md``): embeddings W (n_w x d), optional LayerNorm
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

from solvers.common import Certificate, Solution, solve_conic
from theory import _work
from theory._validate import InstanceError
from theory.feature_collapse import FCInstance, sentence_distribution

#: Largest number of (class, sentence) pairs enumerated for the exact risk, and the largest
#: K * (number of pairs) (one evaluation costs that many exponentials). Beyond these the risk is
#: not computed (clear error with the size instead of a memory error).
MAX_SENTENCES = 200_000
MAX_WORK = 30_000_000

#: Memory budget of one instance (bytes): the K x S score arrays of an evaluation (about
#: ARRAYS_PER_EVAL of them live at once) and the one-hot matrices. Refused above it (InputError).
MEMORY_BUDGET = 2.0e9
ARRAYS_PER_EVAL = 6

#: Seconds per score entry (K * S * (L + 4)) of one objective-and-gradient evaluation, measured on
#: the shared 2-core development machine (numpy, float64: 1.0e-8 at 5e5 scores, 1.0e-8 at 1.9e6,
#: 3.9e-8 at 1.7e7 where it is memory-bound; 1.2e-8 taken), and the fewest
#: evaluations a start needs to get anywhere. An instance whose estimate (starts x MIN_EVALS x one
#: evaluation) exceeds TIME_BUDGET at that rate (WORK_LIMIT_ENTRIES score entries) is refused before any
#: work; within it, the starts share a work budget of :func:`eval_budget` objective evaluations (what SOLVE_BUDGET_S buys at the model's rate,
#: one evaluation costing its seconds_per_eval plus EVAL_OVERHEAD_S of Python and scipy overhead), a
#: count, so the result is the same at any machine load (the certificates do not depend on the
#: solver). SAFETY_WALL_S is only the wall-clock safety net, 20 times the work budget's time at the
#: model's rate: a run it stops says "stopped by the wall-clock safety limit".
SECONDS_PER_ENTRY = 1.2e-8
MIN_EVALS = 60
TIME_BUDGET = 120.0
#: The refusal compares WORK (score entries: starts x MIN_EVALS x K S (L + 4)) with this fixed limit, what
#: TIME_BUDGET buys at SECONDS_PER_ENTRY (1e10 entries), so an instance is refused identically on every machine.
WORK_LIMIT_ENTRIES = TIME_BUDGET / SECONDS_PER_ENTRY
SOLVE_BUDGET_S = 60.0
EVAL_OVERHEAD_S = 1e-4  # measured: 1-2e-4 s per evaluation on the quick profile's instances (tiny arrays)
SAFETY_WALL_S = 20 * SOLVE_BUDGET_S

#: cvxpy certificate only when K * (number of pairs) is at most this (exponential cones).
MAX_CVXPY_WORK = 20_000
#: Largest PSD block (K L + n_w) of a cvxpy cross-check (nuclear norm / SDP relaxation). Measured
#: with --cvxpy yes on the shared machine: block 24 (n_c = 3, L = 2, s_c = 2) 1 s; 50 (K = 2, L = 24) 4 s;
#: 84 (n_c = 3, L = 3, s_c = 1) 49 s and 0.8 GB; 162 and 196 ran past 150 s; K = 10, L = 1000 (block
#: 10002) ran past 2 minutes inside cvxpy's canonicalisation. Beyond this the cross-check is skipped.
MAX_CVXPY_PSD_DIM = 60


def cvxpy_fits(inst: FCInstance, prob: "FCProblem | None" = None) -> bool:
    """True when the cvxpy cross-checks are small enough: K * sentences <= MAX_CVXPY_WORK and the PSD
    block K L + n_w <= MAX_CVXPY_PSD_DIM."""
    sentences = prob.S if prob is not None else inst.n_sentences
    return sentences * inst.K <= MAX_CVXPY_WORK and inst.K * inst.L + inst.n_w <= MAX_CVXPY_PSD_DIM

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

#: Unit round-off of float64 and the constant of the round-off allowances of the certificates:
#: a sum of n products computed in float64 is within n * EPS * sum |terms| of the exact one
#: (Higham, Accuracy and Stability, Thm 3.1: gamma_n <= n u / (1 - n u), u = EPS / 2); we use
#: ROUNDOFF_C * n * EPS * sum |terms| (ROUNDOFF_C = 4 covers the 1 / (1 - n u) factor and the
#: exp/log evaluations, each correct to a few ulps).
EPS = float(np.finfo(float).eps)
ROUNDOFF_C = 4.0

#: Dual (uniqueness) certificate: the candidate satisfies the KKT conditions of the SDP lifting when
#: ||S Y||_F <= KKT_RTOL * scale * ||Y||_F (float64 evaluation of an exact KKT point gives ~1e-15;
#: 1e-9 leaves six orders for round-off); eigenvalues of the dual slack within NULL_RTOL * scale of 0
#: count as its null space; strict complementarity needs the next eigenvalue >= GAP_RTOL * scale
#: (a margin 100x above NULL_RTOL) and injectivity needs sigma_min / sigma_max >= INJ_RTOL of the
#: linear map on the face (round-off there is ~1e-15).
KKT_RTOL = 1e-9
NULL_RTOL = 1e-9
GAP_RTOL = 1e-7
INJ_RTOL = 1e-7

#: Largest number of entries (face dimension x K x S) of the injectivity map of the uniqueness certificate.
MAX_CERT_ENTRIES = 30_000_000
#: Largest n_w for the eigen-decomposition of the dual slack (n_w x n_w).
MAX_CERT_NW = 3000


#: Peak bytes per factored variable (L-BFGS workspace, gradients, copies), measured on the
#: largest accepted dimensions (see ``budget``).
BYTES_PER_FACTOR_VARIABLE = 1100.0


def budget(inst: FCInstance, n_starts: int = 1) -> dict:
    """Size, memory and time estimates of solving ``inst`` with ``n_starts`` starts, before any work."""
    S = inst.n_sentences
    work = S * inst.K
    mem = ARRAYS_PER_EVAL * 8.0 * work + 8.0 * S * inst.L * 3
    # The factored variables (W: K L x d, U: d x n_w) and the solver's workspace grow with d: measured
    # 0.66 GB at d = 20 000 and 2.55 GB at d = 100 000 for K L + n_w = 24, i.e. ~1000 bytes per variable.
    mem += BYTES_PER_FACTOR_VARIABLE * inst.d * (inst.K * inst.L + inst.n_w)
    entries = float(work) * (inst.L + 4)  # score entries touched by one objective-and-gradient evaluation
    t_eval = SECONDS_PER_ENTRY * entries
    return {"sentences": S, "scores": work, "memory_bytes": mem, "seconds_per_eval": t_eval,
            "work_entries": n_starts * MIN_EVALS * entries, "seconds_estimate": n_starts * MIN_EVALS * t_eval}


def eval_budget(inst: FCInstance) -> int:
    """The work budget of :func:`solve`: objective evaluations shared by all starts (SOLVE_BUDGET_S at the
    work model's rate, at least MIN_EVALS)."""
    t_eval = budget(inst)["seconds_per_eval"] + EVAL_OVERHEAD_S
    return max(MIN_EVALS, int(SOLVE_BUDGET_S / t_eval))


def check_budget(inst: FCInstance, n_starts: int = 1) -> dict:
    """Raise InstanceError (with the estimate and the limit) for an instance beyond the budgets."""
    b = budget(inst, n_starts)
    S = b["sentences"]
    if S > MAX_SENTENCES or b["scores"] > MAX_WORK:
        raise InstanceError(
            f"instance too large to enumerate: K * s_c^L = {inst.K} * {inst.s_c}^{inst.L} = {S} sentences "
            f"x K = {inst.K} scores (limits {MAX_SENTENCES} sentences, {MAX_WORK} scores); "
            f"reduce K, s_c or L (predictions at any size: `ncproofs table feature-collapse`)")
    if b["memory_bytes"] > MEMORY_BUDGET:
        raise InstanceError(f"instance needs about {b['memory_bytes'] / 1e9:.2f} GB (limit {MEMORY_BUDGET / 1e9:.1f} GB); "
                            f"reduce --dim, K, s_c or L")
    if b["work_entries"] > WORK_LIMIT_ENTRIES:
        raise InstanceError(f"instance too large: {n_starts} start(s) x {MIN_EVALS} evaluations x K * sentences * (L + 4) "
                            f"= {inst.K} * {S} * {inst.L + 4} score entries: "
                            + _work.work_text(b["work_entries"], WORK_LIMIT_ENTRIES, "score entries",
                                              seconds_per_unit=SECONDS_PER_ENTRY)
                            + "; reduce --starts, K, s_c or L")
    return b


@dataclass
class FCProblem:
    """The exact risk of one instance, with analytic gradients."""

    inst: FCInstance

    def __post_init__(self):
        inst = self.inst
        check_budget(inst, 1)
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
        """Exact cross-entropy CE(Z) and its gradient dCE/dZ ((K L) x n_w).

        Stable in float64 also when the loss is tiny (small lambda): with r_j = h_j - h_y and
        m = max_j r_j >= 0, the loss of a sentence is log1p(sum_{j != y} e^{r_j}) when m = 0 and
        m + log(e^{-m} + sum_{j != y} e^{r_j - m}) otherwise; the label's gradient entry is
        -(sum_{j != y} e^{r_j - m}) / (sum_j e^{r_j - m}) (no 1 - (1 - tiny) cancellation).
        """
        inst = self.inst
        sc = self.scores(Z)
        sy = sc[self.y, self.cols]
        sc -= sy
        m = sc.max(axis=0)
        ex = np.exp(sc - m)
        ex_y = np.exp(-m)
        ex[self.y, self.cols] = 0.0
        off = ex.sum(axis=0)
        se = off + ex_y
        with np.errstate(divide="ignore"):
            loss = np.where(m == 0.0, np.log1p(off), m + np.log(se))
        val = float(np.dot(self.p, loss))
        if not grad:
            return val
        dS = ex / se
        dS[self.y, self.cols] = -off / se
        dS *= self.p
        G3 = np.zeros((inst.K, inst.L, inst.n_w))
        for l in range(inst.L):
            # G3[j, l, v] = sum_{s: X[s,l] = v} dS[j, s]
            G3[:, l, :] = (self.onehot_T[l] @ dS.T).T
        return val, G3.reshape(inst.K * inst.L, inst.n_w)

    def ce_roundoff(self, Z: np.ndarray, value: float) -> float:
        """Round-off allowance of :meth:`ce` at Z (``value`` = the computed CE) in float64.

        Scores carry errors <= 2 L EPS max|Z| (a sum of L entries, then h_j - h_y); a sentence's loss
        l = log(1 + sum_{j != y} e^{r_j}) moves by at most (1 - pi_y) max|dr| <= 2 l max|dr| under
        them (1 - pi_y <= l, and 1 - pi_y >= 1/2 when m > 0), and the exp/log1p/sum evaluations add
        (K + 2) EPS l; the weighted sum of S losses adds S EPS CE. So the error is at most
        ROUNDOFF_C EPS (K + L + S) (1 + 2 L max|Z|) CE: relative to CE, which keeps the allowance
        meaningful when the loss is tiny (small lambda).
        """
        inst = self.inst
        big = 1.0 + 2.0 * inst.L * float(np.abs(Z).max(initial=0.0))
        return ROUNDOFF_C * EPS * (inst.K + inst.L + self.S) * big * abs(float(value))

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


def exact_risk(inst: FCInstance, W, U) -> float:
    """The exact population objective of the network at (W, U)."""
    return FCProblem(inst).objective(np.asarray(W, float), np.asarray(U, float), grad=False)


# ---------------------------------------------------------------------------------------------
# Certificates
# ---------------------------------------------------------------------------------------------

def nuclear_lower_bound(prob: FCProblem, Z: np.ndarray) -> dict:
    """Proven lower bound on min_Z CE(Z) + lambda ||Z||_* from any candidate Z (no LayerNorm).

    min F >= CE(Z0) - <G, Z0> - R max(0, ||G||_2 - lambda), R = log(K)/lambda (every minimiser has
    ||Z||_* <= R since F(Z*) <= F(0) = log K and CE >= 0). Evaluated in float64 and lowered by a
    round-off allowance (``roundoff``): the CE evaluation (:meth:`FCProblem.ce_roundoff`), the inner
    product (n EPS sum |G Z|) and the spectral norm (backward-stable SVD: ||G||_2 is computed within
    sqrt(m n) EPS ||G||_F). ``lower_bound`` already includes the allowance.
    """
    inst = prob.inst
    lam = inst.lam
    ce, G = prob.ce(Z)
    gnorm = float(np.linalg.norm(G, 2)) if G.size else 0.0
    R = math.log(inst.K) / lam
    g_err = ROUNDOFF_C * math.sqrt(G.size) * EPS * float(np.linalg.norm(G))
    inner = float(np.sum(G * Z))
    roundoff = (prob.ce_roundoff(Z, ce) + ROUNDOFF_C * G.size * EPS * float(np.sum(np.abs(G * Z)))
                + R * g_err)
    lb = ce - inner - R * max(0.0, gnorm + g_err - lam) - roundoff
    nuc = float(np.linalg.svd(Z, compute_uv=False).sum()) if Z.size else 0.0
    return {"lower_bound": lb, "convex_value": ce + lam * nuc, "grad_spectral_norm": gnorm,
            "nuclear_radius": R, "roundoff": roundoff}


def zero_gradient_spectral_norm(inst: FCInstance) -> float:
    """||grad CE(0)||_2: the exact threshold without LayerNorm (Z = 0 optimal iff <= lambda)."""
    return zero_gradient(inst)["spectral_norm"]


def zero_gradient(inst: FCInstance) -> dict:
    """||grad CE(0)||_2 with its round-off allowance (float64 enumeration + backward-stable SVD)."""
    prob = FCProblem(inst)
    _, G = prob.ce(np.zeros((inst.K * inst.L, inst.n_w)))
    g = float(np.linalg.norm(G, 2))
    # each entry sums S terms of size <= p_s (error S EPS max|entry| per entry), then the SVD
    err = ROUNDOFF_C * EPS * (prob.S + math.sqrt(G.size)) * float(np.linalg.norm(G))
    return {"spectral_norm": g, "roundoff": err, "gradient": G}


#: The zero phase decided in exact rationals (:func:`exact_zero_phase`): grad CE(0) has K L x n_w rational entries
#: (formed up to EXACT_PHASE_MAX_ENTRIES) and lambda^2 I minus its smaller Gram matrix (dimension min(K L, n_w), up
#: to EXACT_PHASE_MAX_DIM) is tested for PSD by exact symmetric elimination (O(dim^3) Fraction operations; the Gram
#: matrix of the integer numerators is formed with Python ints). Measured on the shared machine: 0.4 s at dimension
#: 48 when the matrix is PSD (the full elimination), 2-4 s at dimension 100.
EXACT_PHASE_MAX_ENTRIES = 200_000
EXACT_PHASE_MAX_DIM = 48

HOW_EXACT_ZERO = ("exact phase: lambda^2 I - Gamma^T Gamma is PSD in exact rational arithmetic (Gamma = grad CE(0), "
                  "entries (mu_beta / K)(c_l(alpha)/K - [z_(j,l) = alpha]), the instance's doubles as rationals), so "
                  "||grad CE(0)||_2 <= lambda: Z = 0 minimises CE(Z) + lambda ||Z||_*, and uniquely, also at equality "
                  "(another minimiser Z' would make CE affine on [0, Z'], so every sentence's scores constant in the "
                  "class, CE(Z') = CE(0) and ||Z'||_* = 0); every network minimiser has U E^T = 0 and then U = 0, "
                  "W = 0 (docs/feature_collapse.md, 'Exact phase at the threshold')")


def exact_word_masses(inst: FCInstance) -> list:
    """mu_beta as exact rationals (the convention of ``solvers.rigorous``): uniform 1/s_c (the doubles 1/3 do not sum
    to 1); given frequencies (the instance's doubles) normalised exactly to sum 1."""
    from fractions import Fraction

    if inst.uniform:
        return [Fraction(1, inst.s_c)] * inst.s_c
    tot = sum(Fraction(float(f)) for f in inst.freqs)
    return [Fraction(float(f)) / tot for f in inst.freqs]


def exact_zero_gradient(inst: FCInstance) -> tuple[list, int]:
    """grad CE(0) (K L x n_w, row j L + l, column alpha s_c + beta) in exact rationals, as (integer numerators,
    common denominator): at Z = 0 every class has probability 1/K, so entry = P(x_l = w)/K - P(y = j, x_l = w) =
    (mu_beta / K)(c_l(alpha)/K - [z_(j,l) = alpha]), c_l(alpha) the number of classes with concept alpha at position
    l (classes uniform, the words of a concept drawn by mu independently per position; no sentence enumeration).
    With mu_beta = m_beta / D: numerator m_beta (c_l(alpha) - K [z_(j,l) = alpha]), denominator K^2 D."""
    import math as _m

    K, L, n_c, s_c = inst.K, inst.L, inst.n_c, inst.s_c
    mu = exact_word_masses(inst)
    D = 1
    for m in mu:
        D = D * m.denominator // _m.gcd(D, m.denominator)
    num = [int(m * D) for m in mu]
    z = inst.latent_vars
    cnt = [[int(np.sum(z[:, l] == a)) for a in range(n_c)] for l in range(L)]
    G = [[num[b] * (cnt[l][a] - (K if z[j, l] == a else 0)) for a in range(n_c) for b in range(s_c)]
         for j in range(K) for l in range(L)]
    return G, K * K * D


def exact_psd(A: list) -> tuple[bool, int]:
    """(A is PSD, the number of zero pivots) for a symmetric matrix of Fractions, by exact symmetric elimination: a
    pivot < 0 means not PSD; a zero pivot needs its remaining row to vanish (else not PSD: a 2 x 2 minor [[0, x],
    [x, .]] is indefinite); a positive pivot passes to its Schur complement. Zero pivots of a PSD matrix count its
    nullity."""
    A = [list(r) for r in A]
    n = len(A)
    zeros = 0
    for k in range(n):
        p = A[k][k]
        if p < 0:
            return False, zeros
        if p == 0:
            if any(A[k][j] != 0 for j in range(k + 1, n)):
                return False, zeros
            zeros += 1
            continue
        row = A[k]
        for i in range(k + 1, n):
            f = A[i][k] / p
            if f == 0:
                continue
            Ai = A[i]
            for j in range(k + 1, n):
                if row[j]:
                    Ai[j] -= f * row[j]
    return True, zeros


def exact_zero_phase(inst: FCInstance, float_gradient: np.ndarray | None = None) -> dict | None:
    """Whether ||grad CE(0)||_2 <= lambda, decided in exact rational arithmetic (no LayerNorm; None with it: there
    is no trivial phase). The instance is its doubles (lambda, the frequencies normalised exactly; uniform: 1/s_c):
    Gamma = :func:`exact_zero_gradient`, and ||Gamma||_2 <= lambda iff lambda^2 I - Gamma^T Gamma (or Gamma
    Gamma^T, the smaller) is PSD (:func:`exact_psd`); singular and PSD: ||Gamma||_2 = lambda exactly. Then Z = 0 is
    the unique minimiser (HOW_EXACT_ZERO). ``float_gradient`` (the float64 enumeration, ``zero_gradient``) is
    compared entrywise with the rationals (a defect when they differ beyond round-off).

    Returns {"decided": True, "zero_minimiser": bool, "at_threshold": bool, "dimension": int, "lambda_squared":
    "p/q", "float_agreement": float | None} or {"decided": False, "why": ...} beyond EXACT_PHASE_MAX_ENTRIES /
    EXACT_PHASE_MAX_DIM."""
    from fractions import Fraction

    if inst.layernorm:
        return None
    KL, n_w = inst.K * inst.L, inst.n_w
    dim = min(KL, n_w)
    if KL * n_w > EXACT_PHASE_MAX_ENTRIES or dim > EXACT_PHASE_MAX_DIM:
        return {"decided": False, "why": f"grad CE(0) is {KL} x {n_w}: the exact PSD test runs up to "
                                         f"{EXACT_PHASE_MAX_ENTRIES} entries and dimension {EXACT_PHASE_MAX_DIM}"}
    G, den = exact_zero_gradient(inst)
    agree = None
    if float_gradient is not None:
        Gf = np.asarray(float_gradient, dtype=float)
        agree = float(np.max(np.abs(np.array([[float(Fraction(x, den)) for x in r] for r in G]) - Gf), initial=0.0))
        scale = float(np.max(np.abs(Gf), initial=0.0))
        if not agree <= 64 * EPS * max(scale, 1e-300) * (1 + inst.L):
            raise AssertionError(f"exact zero phase: grad CE(0) in rationals differs from the float enumeration by "
                                 f"{agree:.3g} (entries up to {scale:.3g})")
    lam2 = Fraction(float(inst.lam)) ** 2
    # Gamma Gamma^T or Gamma^T Gamma (the smaller) of the integer numerators, exact (numpy object arrays of Python
    # ints); lambda^2 I - Gram / den^2 is PSD iff lambda^2 den^2 q I - q Gram is, q the denominator of lambda^2
    A = np.array(G, dtype=object)
    gram = A.dot(A.T) if KL <= n_w else A.T.dot(A)
    diag = lam2.numerator * den * den
    q = lam2.denominator
    M = [[Fraction((diag if i == j else 0) - q * int(gram[i, j])) for j in range(dim)] for i in range(dim)]
    psd, zeros = exact_psd(M)
    return {"decided": True, "zero_minimiser": psd, "at_threshold": psd and zeros > 0, "dimension": dim,
            "lambda_squared": f"{lam2.numerator}/{lam2.denominator}", "float_agreement": agree}


def sdp_lower_bound(prob: FCProblem, E: np.ndarray, U: np.ndarray) -> dict:
    """Proven lower bound for the LayerNorm network from the SDP relaxation's dual (see module doc).

    nu is shifted by the computed most negative eigenvalue of diag(nu) - A plus the eigenvalue
    round-off allowance (backward-stable eigh: eigenvalues within ROUNDOFF_C n EPS ||M||_F), so that
    diag(nu) - A is PSD in exact arithmetic; the bound is lowered by the round-off of CE, <G, Z> and
    d sum(nu). ``lower_bound`` already includes the allowance (``roundoff``).
    """
    inst = prob.inst
    lam, d = inst.lam, inst.d
    Z = U @ E.T
    ce, G = prob.ce(Z)
    A = G.T @ G / (2 * lam)
    nu = np.einsum("ij,ij->i", A @ E, E) / d
    M = np.diag(nu) - A
    M = (M + M.T) / 2
    n = M.shape[0]
    # eigh is backward stable (n EPS ||M||_F) and forming A sums K L products per entry
    eig_err = ROUNDOFF_C * EPS * (n * float(np.linalg.norm(M)) + G.shape[0] * float(np.sum(G * G)) / (2 * lam))
    shift = max(0.0, -float(np.linalg.eigvalsh(M).min())) + eig_err
    nu = nu + shift
    roundoff = (prob.ce_roundoff(Z, ce) + ROUNDOFF_C * G.size * EPS * float(np.sum(np.abs(G * Z)))
                + ROUNDOFF_C * n * EPS * d * float(np.abs(nu).sum()))
    lb = ce - float(np.sum(G * Z)) - d * float(nu.sum()) - roundoff
    return {"lower_bound": lb, "dual_shift": shift, "roundoff": roundoff}


def dual_certificate(prob: FCProblem, E: np.ndarray, U: np.ndarray) -> dict:
    """Uniqueness certificate of a candidate (features E, classifier U) through the SDP lifting.

    The network objective is >= the SDP  min CE(Z) + (lw/2) tr G + (lu/2) tr T  over
    X = [[G, Z^T], [Z, T]] >= 0 (with LayerNorm: lw = 0 and diag G = d), attained at
    X0 = Y Y^T, Y = [E; U]. With Gamma = grad CE(Z0), the dual slack is
    S = [[D, Gamma^T/2], [Gamma/2, (lambda/2) I]], D = (lambda/2) I (no LN) or diag(nu) (LN, nu from
    the candidate), and S >= 0 iff Ms = D - Gamma^T Gamma/(2 lambda) >= 0 (Schur complement); its null
    space is {[x; -Gamma x/lambda] : Ms x = 0}. The candidate is the UNIQUE minimiser of the SDP (so
    every network minimiser has U U^T, E E^T, U E^T equal to the candidate's) when
      (1) KKT: S Y = 0 (residual ``kkt_residual`` <= KKT_RTOL),
      (2) dual feasibility and strict complementarity: Ms >= 0 with exactly rank(Y) eigenvalues at 0
          and the next one >= GAP_RTOL * scale,
      (3) injectivity: on the face {V M V^T}, V a basis of null(S), the only symmetric M whose
          per-sentence centred scores (and, with LN, diag of the G block) vanish is M = 0.
    Derivation and conditions: docs/feature_collapse.md ("Uniqueness certificate"). Returns the
    numbers and ``unique`` (bool) with ``why`` when not.
    """
    inst = prob.inst
    lam = inst.lam
    n_w = inst.n_w
    out: dict = {"unique": False}
    if n_w > MAX_CERT_NW:
        out["why"] = f"n_w = {n_w} > {MAX_CERT_NW}: the certificate's eigen-decomposition is too large"
        return out
    Z = U @ E.T
    _, G = prob.ce(Z)
    A = G.T @ G / (2 * lam)
    if inst.layernorm:
        nu = np.einsum("ij,ij->i", A @ E, E) / inst.d
    else:
        nu = np.full(n_w, lam / 2)
    Ms = np.diag(nu) - A
    Ms = (Ms + Ms.T) / 2
    scale = max(float(np.abs(nu).max()), float(np.linalg.norm(A, 2)))
    if not scale > 0:
        out["why"] = "the dual slack vanishes (no scale to judge its eigenvalues)"
        return out
    Y = np.vstack([E, U])
    sv = np.linalg.svd(Y, compute_uv=False) if Y.size else np.zeros(0)
    r = int(np.sum(sv > 1e-9 * sv[0])) if sv.size and sv[0] > 0 else 0
    R1 = nu[:, None] * E + G.T @ U / 2
    R2 = (G @ E + lam * U) / 2
    ynorm = float(np.linalg.norm(Y))
    kkt = float(math.sqrt(np.sum(R1 * R1) + np.sum(R2 * R2))) / (scale * ynorm) if ynorm > 0 else 0.0
    evals, evecs = np.linalg.eigh(Ms)
    ev = evals / scale
    out.update(rank=r, scale=scale, kkt_residual=kkt, min_eigenvalue=float(ev[0]),
               null_eigenvalue_max=float(np.abs(ev[:r]).max()) if r else 0.0,
               complementarity_gap=float(ev[r]) if r < n_w else None)
    if not kkt <= KKT_RTOL:
        out["why"] = f"KKT residual {kkt:.3g} > {KKT_RTOL:g}: the candidate is not a stationary point of the lifting"
        return out
    if not ev[0] >= -NULL_RTOL:
        out["why"] = f"dual slack not PSD (smallest eigenvalue {ev[0]:.3g} x scale)"
        return out
    if r and not np.abs(ev[:r]).max() <= NULL_RTOL:
        out["why"] = f"dual slack has fewer than rank(Y) = {r} zero eigenvalues"
        return out
    if r < n_w and not ev[r] >= GAP_RTOL:
        out["why"] = (f"not strictly complementary: eigenvalue {r + 1} of the dual slack is {ev[r]:.3g} x scale "
                      f"< {GAP_RTOL:g} (a flat direction: near a threshold the minimiser need not be unique)")
        return out
    out["face_dimension"] = r
    if r:
        entries = r * (r + 1) // 2 * prob.S * inst.K
        if entries > MAX_CERT_ENTRIES:
            out["why"] = f"injectivity map has {entries} entries > {MAX_CERT_ENTRIES}"
            return out
        VE = evecs[:, :r]
        VU = -G @ VE / lam
        w = np.sqrt(prob.p)
        cols = []
        for i in range(r):
            for j in range(i, r):
                B = np.zeros((r, r))
                B[i, j] = B[j, i] = 1.0
                sc = prob.scores(VU @ B @ VE.T)
                sc = (sc - sc.mean(axis=0)) * w
                parts = [sc.ravel()]
                if inst.layernorm:
                    parts.append(np.einsum("ij,ij->i", VE @ B, VE))
                cols.append(parts)
        blocks = []
        for k in range(len(cols[0])):
            Bk = np.column_stack([c[k] for c in cols])
            nk = float(np.linalg.norm(Bk))
            blocks.append(Bk / nk if nk > 0 else Bk)
        Mmap = np.vstack(blocks)
        s = np.linalg.svd(Mmap, compute_uv=False)
        inj = float(s[-1] / s[0]) if s[0] > 0 else 0.0
        out["injectivity"] = inj
        if not inj >= INJ_RTOL:
            out["why"] = f"the face is not pinned down by the scores (sigma_min/sigma_max = {inj:.3g} < {INJ_RTOL:g})"
            return out
    out["unique"] = True
    return out


def cvxpy_convex_optimum(inst: FCInstance, prob: FCProblem | None = None) -> dict:
    """Solve min_Z CE(Z) + lambda ||Z||_* with cvxpy (no LayerNorm, small instances).

    Returns the solver's value, its Z and the rigorous nuclear-kkt bound at that Z.
    """
    import cvxpy as cp

    if inst.layernorm:
        raise InstanceError("the convex (nuclear-norm) form exists only without LayerNorm")
    prob = prob or FCProblem(inst)
    if not cvxpy_fits(inst, prob):
        raise InstanceError(f"instance too large for the cvxpy certificate: K * sentences = {prob.S * inst.K} "
                            f"(limit {MAX_CVXPY_WORK}), PSD block K L + n_w = {inst.K * inst.L + inst.n_w} "
                            f"(limit {MAX_CVXPY_PSD_DIM})")
    K, L, n_w = inst.K, inst.L, inst.n_w
    Z = cp.Variable((K * L, n_w))
    obj = _cvx_cross_entropy(Z, prob, L, n_w, K) + inst.lam * cp.normNuc(Z)
    cpp = cp.Problem(cp.Minimize(obj))
    t0 = time.perf_counter()
    run = solve_conic(cpp)
    if Z.value is None:
        return {"lower_bound": None, "cvxpy_value": None, "status": run["status"], "warnings": run["warnings"],
                "seconds": time.perf_counter() - t0, "Z": None}
    Zv = np.asarray(Z.value, dtype=float)
    out = nuclear_lower_bound(prob, Zv)  # the proof: the KKT/dual bound at cvxpy's point, not its reported value
    out.update(cvxpy_value=float(cpp.value) if cpp.value is not None else None, status=run["status"],
               warnings=run["warnings"], seconds=time.perf_counter() - t0, Z=Zv)
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
    if not cvxpy_fits(inst, prob):
        raise InstanceError(f"instance too large for the cvxpy SDP: K * sentences = {prob.S * inst.K} "
                            f"(limit {MAX_CVXPY_WORK}), PSD block K L + n_w = {inst.K * inst.L + inst.n_w} "
                            f"(limit {MAX_CVXPY_PSD_DIM})")
    K, L, n_w = inst.K, inst.L, inst.n_w
    M = cp.Variable((n_w + K * L, n_w + K * L), PSD=True)
    Z = M[n_w:, :n_w]
    obj = _cvx_cross_entropy(Z, prob, L, n_w, K) + inst.lam / 2 * cp.trace(M[n_w:, n_w:])
    cpp = cp.Problem(cp.Minimize(obj), [cp.diag(M[:n_w, :n_w]) == inst.d])
    t0 = time.perf_counter()
    run = solve_conic(cpp)
    return {"cvxpy_value": float(cpp.value) if cpp.value is not None else None, "status": run["status"],
            "warnings": run["warnings"], "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------
# Solver
# ---------------------------------------------------------------------------------------------

def solve(inst: FCInstance, *, n_starts: int = 4, seed: int = 0, certify: bool = True,
          cvxpy: bool = False, backend: str = "numpy", device: str = "cpu",
          budget_s: float = SAFETY_WALL_S, max_evals: int | None = None) -> Solution:
    """Global optimum search of the network from ``n_starts`` random starts (scipy L-BFGS).

    Starts are random Gaussian (never the critical point 0). The starts share a work budget of
    ``max_evals`` objective evaluations (default :func:`eval_budget`; at most 4 LBFGS_MAXITER per start),
    so the result is the same at any machine load; ``budget_s`` (seconds, default SAFETY_WALL_S) is only a
    wall-clock safety net. ``diagnostics["budget_reached"]`` says when either stopped the starts,
    ``diagnostics["message"]`` which. A start that runs into
    the set where LayerNorm is undefined (an embedding proportional to 1) is recorded and skipped.
    The best start is returned with variables W, U, E (features), Z; its certificate is nuclear-kkt
    (no LN) or sdp-dual (LN), plus the cvxpy convex program when ``cvxpy`` (small instances; with LN
    the SDP relaxation's value is reported as a cross-check, the proven bound stays the sdp-dual one).
    Every lower bound includes its float64 round-off allowance.
    ``backend="torch"`` evaluates the objective with torch autograd (optional dependency).
    """
    from scipy.optimize import minimize  # here: importing scipy.optimize costs ~0.5 s at start-up

    if isinstance(n_starts, bool) or not isinstance(n_starts, (int, np.integer)) or not 1 <= n_starts <= 64:
        raise InstanceError(f"n_starts (--starts) must be an integer in [1, 64], got {n_starts!r}")
    from theory._validate import as_float, as_int

    seed = as_int("seed", seed, minimum=0)  # NaN / strings reached SeedSequence (a message without the name)
    budget_s = as_float("budget_s", budget_s, positive=True)  # NaN switched the wall-clock safety net off
    check_budget(inst, int(n_starts))
    total = eval_budget(inst) if max_evals is None else as_int("max_evals", max_evals, minimum=1)
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
    used, stop = 0, None  # stop: "work" or "safety"
    deadline = t0 + budget_s
    calls = [0]  # objective evaluations, counted here (a failed start has no scipy result to read them from)

    def counted(x):
        calls[0] += 1
        return fun(x)

    def callback(intermediate_result=None):
        if time.perf_counter() > deadline:
            raise StopIteration

    for s in range(n_starts):
        if used >= total:
            stop = "work"
            break
        if time.perf_counter() > deadline:
            stop = "safety"
            break
        x0 = rng.normal(scale=INIT_SCALE / math.sqrt(inst.d), size=n)
        maxfun = min(4 * LBFGS_MAXITER, total - used)
        try:
            res = minimize(counted, x0, jac=True, method="L-BFGS-B", callback=callback,
                           options={"maxiter": LBFGS_MAXITER, "maxcor": 30, "ftol": LBFGS_FTOL,
                                    "gtol": LBFGS_GTOL, "maxfun": maxfun})
            W, U = prob.unpack(res.x)
            val = prob.objective(W, U, grad=False)
            gn = prob.grad_norm(W, U)
        except FloatingPointError as exc:  # LayerNorm undefined on this path: the start is lost
            runs.append({"value": None, "failed": str(exc)})
            used = calls[0]
            continue
        used = calls[0]
        if time.perf_counter() > deadline:
            stop = "safety"
        elif maxfun < 4 * LBFGS_MAXITER and used >= total:
            stop = "work"  # this start was cut by the shared budget
        runs.append({"value": val, "grad_norm": gn, "iterations": int(res.nit), "evaluations": int(res.nfev)})
        if best is None or val < best[0]:
            best = (val, W, U, gn)
        if stop == "safety":
            break
    values = np.array([r["value"] for r in runs if r.get("value") is not None])
    diag = {"n_starts": n_starts, "seed": seed, "start_values": values.tolist(),
            "start_spread": float(values.max() - values.min()) if values.size else None,
            "failed_starts": sum(1 for r in runs if r.get("value") is None), "n_sentences": prob.S,
            "backend": backend, "budget_s": budget_s, "work_budget_evals": total, "evaluations": used,
            "budget_reached": stop is not None, "stopped_by_wall_safety": stop == "safety",
            "message": {None: "work budget not reached",
                        "work": f"work budget reached ({total} evaluations)",
                        "safety": (f"stopped by the wall-clock safety limit ({budget_s:g} s); the work budget "
                                   f"({total} evaluations) was not reached")}[stop]}
    if best is None:
        return Solution(value=float("nan"), method=f"L-BFGS x{n_starts} ({backend})", converged=False,
                        seconds=time.perf_counter() - t0, variables={}, diagnostics=diag, certificate=None)
    val, W, U, gn = best
    diag["grad_norm"] = gn
    E, _ = prob.features(W)
    Z = U @ E.T
    cert = None
    if certify:
        cert = certificate_at(prob, E, U, val, cvxpy=cvxpy)
    return Solution(value=val, method=f"L-BFGS x{n_starts} ({backend})", converged=gn <= CONVERGED_GRAD,
                    seconds=time.perf_counter() - t0, variables={"W": W, "U": U, "E": E, "Z": Z},
                    diagnostics=diag, certificate=cert)


def certificate_at(prob: FCProblem, E: np.ndarray, U: np.ndarray, upper: float, *, cvxpy: bool = False) -> Certificate:
    """The proven lower bound at a candidate (features E, classifier U), with ``upper`` a feasible value."""
    inst = prob.inst
    if inst.layernorm:
        b = sdp_lower_bound(prob, E, U)
        details = {"note": "dual of the SDP relaxation (derived in ncproofs), valid for every d",
                   "dual_shift": b["dual_shift"], "roundoff": b["roundoff"]}
        if cvxpy and cvxpy_fits(inst, prob):  # cross-check: the relaxation solved by cvxpy
            c = cvxpy_sdp_relaxation(inst, prob)
            details.update(cvxpy_sdp_value=c["cvxpy_value"], cvxpy_status=c["status"],
                           cvxpy_warnings=c["warnings"], cvxpy_seconds=c["seconds"])
        return Certificate(b["lower_bound"], upper, "sdp-dual", details)
    Z = U @ E.T
    b = nuclear_lower_bound(prob, Z)
    details = {"grad_spectral_norm": b["grad_spectral_norm"], "lambda": inst.lam, "roundoff": b["roundoff"],
               "note": "nuclear-norm convex form, KKT/dual bound at the candidate (round-off included)"}
    lb, method = b["lower_bound"], "nuclear-kkt"
    if cvxpy and not cvxpy_fits(inst, prob):
        details["cvxpy_skipped"] = (f"K * sentences = {prob.S * inst.K} (limit {MAX_CVXPY_WORK}) or PSD block "
                                    f"K L + n_w = {inst.K * inst.L + inst.n_w} (limit {MAX_CVXPY_PSD_DIM}) too large")
    elif cvxpy:
        c = cvxpy_convex_optimum(inst, prob)
        details.update(cvxpy_value=c["cvxpy_value"], cvxpy_status=c["status"], cvxpy_warnings=c["warnings"],
                       cvxpy_lower_bound=c["lower_bound"], cvxpy_seconds=c["seconds"])
        if c["lower_bound"] is not None and c["lower_bound"] > lb:
            lb, method = c["lower_bound"], "convex-program (cvxpy) + nuclear-kkt bound"
    return Certificate(lb, upper, method, details)


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
