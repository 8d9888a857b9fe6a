"""Feature collapse with a trainable LayerNorm: learned gain g and bias beta per coordinate.

Network (docs/feature_collapse.md, "Trainable LayerNorm"): embeddings W (n_w x d), LayerNorm
phi (eps = 0) as in the fixed case, then the affine part f(w) = g * phi(w) + beta (g, beta in R^d,
elementwise product), the bias-free classifier U (K L x d). Scores
h_k(x) = sum_l <u_{k,l}, g * phi(w_{x_l}) + beta>, i.e. Z = U F^T with F = phi(W) diag(g) + 1 beta^T.
Objective: CE(Z) + (lambda/2)||U||^2 + (lambda_LN/2)(||g||^2 + ||beta||^2); W is not decayed (LayerNorm
makes the objective invariant to the scale of each embedding, as in Theorem 3).

Reduction (derived here). Per coordinate i, the scores receive the rank-one term
(g_i u_i)(e_i + tau_i 1)^T with e_i = phi(W)[:, i], tau_i = beta_i / g_i, at cost
(lambda/2)||u_i||^2 + (lambda_LN/2) g_i^2 (1 + tau_i^2) >= mu ||g_i u_i|| sqrt(1 + tau_i^2), mu = sqrt(lambda lambda_LN)
(AM-GM, equality iff |g_i| = sqrt(lambda/lambda_LN) ||u_i||). So the objective is >= CE(Z) + mu N(Z), N the
atomic gauge with atoms a b^T, ||a|| <= 1, b in B = {(e + tau 1)/sqrt(1 + tau^2)}: e a column of LayerNorm
outputs, whose entries satisfy |e_v| <= sqrt(d - 1) (e is orthogonal to 1 with ||e||^2 = d). The dual gauge
is D(G) = max over sign vectors sigma of sqrt(lambda_max(Gram(G 1, sqrt(d-1) G sigma))) (for fixed tau the
maximum over the box is at a vertex; the maximum over tau is a 2 x 2 Rayleigh quotient). Linearising CE at
any Z0 (gradient G) and using N(Z*) <= log K / mu:

    min >= CE(Z0) - <G, Z0> - (log K / mu) max(0, D(G) - mu)      ("atomic-dual" bound)

computed by enumerating the 2^(n_w - 1) sign vectors (n_w <= MAX_SIGN_WORDS), with a round-off allowance.

Without decay on (g, beta) (lambda_LN = 0) the rescaling (U, g, beta) -> (U/c, c g, c beta) leaves every
score unchanged and divides (lambda/2)||U||^2 by c^2: the infimum is not attained (``rescaling_sequence``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from solvers.common import Certificate, Solution, blas_threads
from solvers.feature_collapse import (EPS, LBFGS_FTOL, LBFGS_GTOL, LBFGS_MAXITER, ROUNDOFF_C, FCProblem,
                                      check_budget)
from theory import _work
from theory._validate import InstanceError, as_float
from theory.feature_collapse import FCInstance

#: Largest n_w for the sign-vector enumeration of the atomic dual gauge (2^(n_w - 1) vectors, each a
#: K L x n_w product): 2^15 vectors at n_w = 16.
MAX_SIGN_WORDS = 16
#: Largest work (sign vectors x K L x n_w multiply-adds: one GEMM) of the enumeration; the refusal compares this
#: count, never a time. SECONDS_PER_SIGN_MAC (2 flops at the calibration machine's GEMM rate) only states the
#: seconds here.
MAX_SIGN_WORK = 2e8
SECONDS_PER_SIGN_MAC = 2.0 / _work.CALIBRATION_FLOPS
#: Accepted range of lambda_LN (0 allowed: no decay on the affine parameters).
LN_DECAY_MAX = 1e4
#: Evaluations budget of the multi-start search: L-BFGS iterations per start (work, not seconds).
LN_MAXITER = 6000
#: Initial scale of the random starts (entries N(0, 1/d)); g starts near 1 (the fixed-LN point).
INIT_SCALE = 1.0


def validate_ln_decay(ln_decay) -> float:
    """lambda_LN >= 0 (0: no decay on g and beta), finite, <= LN_DECAY_MAX; one-line InputError otherwise."""
    v = as_float("ln_decay (--ln-decay)", ln_decay)
    if not (0.0 <= v <= LN_DECAY_MAX):
        raise InstanceError(f"ln_decay (--ln-decay) must be in [0, {LN_DECAY_MAX:g}] (0: no decay on the LayerNorm "
                            f"gain and bias), got {ln_decay!r}")
    return v


def ln_instance(inst: FCInstance) -> FCInstance:
    if not inst.layernorm:
        raise InstanceError("a trainable LayerNorm needs --layernorm")
    return inst


@dataclass
class TrainableLN:
    """Exact objective of the trainable-LayerNorm network with analytic gradient."""

    inst: FCInstance
    ln_decay: float

    def __post_init__(self):
        ln_instance(self.inst)
        self.ln_decay = validate_ln_decay(self.ln_decay)
        self.prob = FCProblem(self.inst)

    @property
    def mu(self) -> float:
        return math.sqrt(self.inst.lam * self.ln_decay)

    def sizes(self):
        i = self.inst
        return i.n_w * i.d, i.K * i.L * i.d, i.d, i.d

    def unpack(self, x):
        i = self.inst
        a, b, c, _ = self.sizes()
        W = x[:a].reshape(i.n_w, i.d)
        U = x[a:a + b].reshape(i.K * i.L, i.d)
        g = x[a + b:a + b + c]
        beta = x[a + b + c:]
        return W, U, g, beta

    @staticmethod
    def pack(W, U, g, beta):
        return np.concatenate([W.ravel(), U.ravel(), np.ravel(g), np.ravel(beta)])

    def post_features(self, W, g, beta):
        E, cache = self.prob.features(W)
        return E, E * g[None, :] + beta[None, :], cache

    def scores_matrix(self, W, U, g, beta):
        _, F, _ = self.post_features(W, g, beta)
        return U @ F.T

    def objective(self, W, U, g, beta, grad: bool = True):
        inst, lam, lg = self.inst, self.inst.lam, self.ln_decay
        E, F, cache = self.post_features(W, g, beta)
        Z = U @ F.T
        reg = 0.5 * lam * float(np.sum(U * U)) + 0.5 * lg * (float(g @ g) + float(beta @ beta))
        if not grad:
            return self.prob.ce(Z, grad=False) + reg
        val, G = self.prob.ce(Z)
        dU = G @ F + lam * U
        dF = G.T @ U
        dg = np.sum(dF * E, axis=0) + lg * g
        db = dF.sum(axis=0) + lg * beta
        dE = dF * g[None, :]
        V, nrm = cache
        eh = V / nrm
        dV = math.sqrt(inst.d) / nrm * (dE - np.sum(dE * eh, axis=1, keepdims=True) * eh)
        dW = dV - dV.mean(axis=1, keepdims=True)
        return val + reg, dW, dU, dg, db

    def fun(self, x):
        v, *gr = self.objective(*self.unpack(x))
        return v, self.pack(*gr)


def rescaling_sequence(model: TrainableLN, W, U, g, beta, factors=(1, 2, 4, 8, 16, 32, 64)) -> dict:
    """Values of the exact objective at (W, U/c, c g, c beta): the scores are unchanged (sympy identity in the
    claims), the penalty on U is divided by c^2. With lambda_LN = 0 the values decrease strictly to CE."""
    vals, ces = [], []
    for c in factors:
        Uc, gc, bc = U / c, g * c, beta * c
        vals.append(model.objective(W, Uc, gc, bc, grad=False))
        ces.append(model.prob.ce(model.scores_matrix(W, Uc, gc, bc), grad=False))
    return {"factors": list(factors), "values": vals, "cross_entropies": ces,
            "score_change": float(np.max(np.abs(model.scores_matrix(W, U / factors[-1], g * factors[-1],
                                                                     beta * factors[-1])
                                                 - model.scores_matrix(W, U, g, beta))))}


def solve_trainable(inst: FCInstance, ln_decay: float, *, n_starts: int = 4, seed: int = 0,
                    maxiter: int = LN_MAXITER) -> Solution:
    """Multi-start L-BFGS on (W, U, g, beta); budget in iterations (``maxiter`` per start)."""
    from scipy.optimize import minimize  # here: importing scipy.optimize costs ~0.5 s at start-up

    if isinstance(n_starts, bool) or not isinstance(n_starts, (int, np.integer)) or not 1 <= n_starts <= 64:
        raise InstanceError(f"n_starts (--starts) must be an integer in [1, 64], got {n_starts!r}")
    check_budget(inst, int(n_starts))
    model = TrainableLN(inst, ln_decay)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    d = inst.d
    best, runs = None, []
    for _ in range(n_starts):
        W0 = rng.normal(scale=INIT_SCALE / math.sqrt(d), size=(inst.n_w, d))
        U0 = rng.normal(scale=INIT_SCALE / math.sqrt(d), size=(inst.K * inst.L, d))
        g0 = 1.0 + 0.1 * rng.normal(size=d)
        b0 = 0.1 * rng.normal(size=d)
        try:
            with blas_threads(0.0):  # small products: single-threaded BLAS
                res = minimize(model.fun, model.pack(W0, U0, g0, b0), jac=True, method="L-BFGS-B",
                               options={"maxiter": int(maxiter), "maxcor": 30, "ftol": LBFGS_FTOL,
                                        "gtol": LBFGS_GTOL, "maxfun": 2 * int(maxiter)})
            parts = model.unpack(res.x)
            val = model.objective(*parts, grad=False)
        except FloatingPointError as exc:
            runs.append({"value": None, "failed": str(exc)})
            continue
        gr = model.objective(*parts)[1:]
        gn = float(math.sqrt(sum(float(np.sum(x * x)) for x in gr)))
        runs.append({"value": val, "grad_norm": gn, "iterations": int(res.nit)})
        if best is None or val < best[0]:
            best = (val, parts, gn)
    diag = {"n_starts": n_starts, "seed": seed, "start_values": [r["value"] for r in runs],
            "iterations": [r.get("iterations") for r in runs], "maxiter": maxiter, "ln_decay": model.ln_decay}
    if best is None:
        return Solution(float("nan"), "L-BFGS (trainable LN)", False, time.perf_counter() - t0, {}, diag, None)
    val, (W, U, g, beta), gn = best
    diag["grad_norm"] = gn
    E, F, _ = model.post_features(W, g, beta)
    return Solution(val, f"L-BFGS x{n_starts} (trainable LN)", gn <= 1e-6, time.perf_counter() - t0,
                    {"W": W, "U": U, "g": g, "beta": beta, "E": E, "F": F, "Z": U @ F.T}, diag, None)


# ---------------------------------------------------------------------------------------------
# The atomic-dual lower bound (lambda_LN > 0)
# ---------------------------------------------------------------------------------------------

def check_bound_budget(inst: FCInstance) -> None:
    """Refuse (InstanceError, before any work) an instance whose atomic-dual bound cannot be enumerated."""
    work = 2 ** (inst.n_w - 1) * inst.K * inst.L * inst.n_w if inst.n_w <= 64 else float("inf")
    if inst.n_w > MAX_SIGN_WORDS:
        raise InstanceError(f"n_w = {inst.n_w} words > limit {MAX_SIGN_WORDS}: the trainable-LN certificate enumerates "
                            "2^(n_w-1) sign vectors; reduce --concepts or --words-per-concept")
    if work > MAX_SIGN_WORK:
        raise InstanceError(f"the trainable-LN certificate enumerates 2^(n_w-1) sign vectors x K L x n_w = 2^{inst.n_w - 1}"
                            f" x {inst.K * inst.L} x {inst.n_w}: "
                            + _work.work_text(work, MAX_SIGN_WORK, "multiply-adds", seconds_per_unit=SECONDS_PER_SIGN_MAC)
                            + "; reduce --concepts, --words-per-concept, K or L")


def sign_vectors(n: int) -> np.ndarray:
    """All 2^(n-1) sign vectors with first entry +1 (sigma and -sigma give the same gauge value)."""
    if n > MAX_SIGN_WORDS:
        raise InstanceError(f"n_w = {n} > {MAX_SIGN_WORDS}: the sign-vector enumeration of the trainable-LN bound is "
                            f"too large (2^(n_w-1) vectors)")
    m = 2 ** (n - 1)
    bits = (np.arange(m)[:, None] >> np.arange(n - 1)[None, :]) & 1
    return np.hstack([np.ones((m, 1)), 1.0 - 2.0 * bits])


def dual_gauge(G: np.ndarray, d: int) -> dict:
    """D(G) = max_sigma sqrt(lambda_max([[p.p, p.q], [p.q, q.q]])), p = G 1, q = sqrt(d-1) G sigma, and the
    values of every sign vector (for the face of the certificate)."""
    n = G.shape[1]
    if (2 ** (n - 1)) * G.size > MAX_SIGN_WORK:
        raise InstanceError("sign enumeration too large: " + _work.work_text(
            (2 ** (n - 1)) * G.size, MAX_SIGN_WORK, "multiply-adds", seconds_per_unit=SECONDS_PER_SIGN_MAC))
    sig = sign_vectors(n)
    s = math.sqrt(d - 1)
    Q = s * (G @ sig.T)  # (KL, m)
    p = G.sum(axis=1)
    pp = float(p @ p)
    pq = p @ Q
    qq = np.einsum("ij,ij->j", Q, Q)
    tr, det = pp + qq, pp * qq - pq * pq
    lam_max = tr / 2 + np.sqrt(np.maximum(tr * tr / 4 - det, 0.0))
    vals = np.sqrt(np.maximum(lam_max, 0.0))
    j = int(np.argmax(vals))
    return {"value": float(vals[j]), "argmax": sig[j], "values": vals, "signs": sig, "G": G}


def atomic_lower_bound(model: TrainableLN, Z0: np.ndarray) -> dict:
    """Proven lower bound of the trainable-LN objective (lambda_LN > 0) from any score matrix Z0 (module doc).

    Round-off: the CE evaluation (FCProblem.ce_roundoff), <G, Z0> (n EPS sum|G Z|), and the gauge (each
    ||G sigma|| and the 2 x 2 eigenvalue computed within ROUNDOFF_C n_w EPS ||G||_F sqrt(d)) times the radius.
    """
    inst = model.inst
    mu = model.mu
    if not mu > 0:
        raise InstanceError("the atomic-dual bound needs lambda > 0 and lambda_LN > 0")
    ce, G = model.prob.ce(Z0)
    D = dual_gauge(G, inst.d)
    R = math.log(inst.K) / mu
    g_err = ROUNDOFF_C * (inst.n_w + 4) * EPS * float(np.linalg.norm(G)) * math.sqrt(inst.d)
    inner = float(np.sum(G * Z0))
    roundoff = (model.prob.ce_roundoff(Z0, ce) + ROUNDOFF_C * G.size * EPS * float(np.sum(np.abs(G * Z0)))
                + R * g_err)
    lb = ce - inner - R * max(0.0, D["value"] + g_err - mu) - roundoff
    return {"lower_bound": lb, "dual_gauge": D["value"], "mu": mu, "radius": R, "roundoff": roundoff,
            "gauge": D, "G": G}


# ---------------------------------------------------------------------------------------------
# The coordinate-aligned type-II candidate (n_c = 2, latent symmetry) and its certificate
# ---------------------------------------------------------------------------------------------

def aligned_features(inst: FCInstance, coord: int = 0) -> np.ndarray:
    """LayerNorm outputs of the n_c = 2 candidate: e_v = sigma_v (sqrt(d-1) on ``coord``, -1/sqrt(d-1) elsewhere),
    sigma_v = +1 for concept 0, -1 for concept 1 (= sqrt(d) sigma_v f, f = (d e_coord - 1)/sqrt(d(d-1)))."""
    d = inst.d
    base = np.full(d, -1.0 / math.sqrt(d - 1))
    base[coord] = math.sqrt(d - 1)
    sig = np.where(np.repeat(np.arange(inst.n_c), inst.s_c) == 0, 1.0, -1.0)
    return sig[:, None] * base[None, :]


def aligned_reduced(inst: FCInstance, ln_decay: float):
    """c* minimising log(1 + N0 + rho[(1 + e^{-2 s c})^L - 1]) + mu sqrt(K L) c, s = sqrt(d-1) (mpmath, 40 digits);
    0 when the derivative at 0 is >= 0 (then U = 0)."""
    import mpmath as mp

    from theory.feature_collapse import MP_DPS

    with mp.workdps(MP_DPS):
        K, L = inst.K, inst.L
        s = mp.sqrt(inst.d - 1)
        mu = mp.sqrt(mp.mpf(inst.lam) * mp.mpf(ln_decay))
        rho = mp.mpf(K) / mp.mpf(2) ** L
        N0 = inst.duplicates

        def dphi(c):
            q = 1 + mp.exp(-2 * s * c)
            return -rho * L * q ** (L - 1) * 2 * s * mp.exp(-2 * s * c) / (1 + N0 + rho * (q ** L - 1)) \
                + mu * mp.sqrt(K * L)

        if dphi(mp.mpf(0)) >= 0:
            return 0.0
        lo, hi = mp.mpf(0), mp.mpf(1)
        while dphi(hi) < 0:
            hi *= 2
        c = mp.findroot(dphi, (lo, hi), solver="anderson")
        return float(c)


def aligned_candidate(inst: FCInstance, ln_decay: float, coord: int = 0):
    """(W, U, g, beta) of the coordinate-aligned type-II point for n_c = 2 (symmetric latents), or None."""
    if inst.n_c != 2 or not inst.symmetric or not ln_decay > 0:
        return None
    c = aligned_reduced(inst, ln_decay)
    E = aligned_features(inst, coord)
    sig_z = np.where(inst.latent_vars.reshape(-1) == 0, 1.0, -1.0)
    a = c * sig_z  # V[:, coord]
    na = float(np.linalg.norm(a))
    g = np.zeros(inst.d)
    U = np.zeros((inst.K * inst.L, inst.d))
    if na > 0:
        g[coord] = (inst.lam / ln_decay) ** 0.25 * math.sqrt(na)
        U[:, coord] = a / g[coord]
    return E.copy(), U, g, np.zeros(inst.d), c


def face_certificate(model: TrainableLN, gauge: dict, sigma_star: np.ndarray, gap_rtol: float) -> dict:
    """The atoms of every minimiser of the relaxation lie on +-sigma_star: every other sign vector's gauge value is
    below mu (1 - gap_rtol) (so the exposed face of the dual gauge is the single ray of sigma_star)."""
    vals, sig = gauge["values"], gauge["signs"]
    s_star = sigma_star * (1.0 if sigma_star[0] > 0 else -1.0)
    is_star = np.all(sig == s_star[None, :], axis=1)
    others = vals[~is_star]
    second = float(others.max()) if others.size else 0.0
    mu = model.mu
    # every column of G nonzero: ||G b||^2 is then strictly convex along every edge of the box, so its maximisers
    # over the box are vertices only (a convex function maximal inside a face is constant on it)
    G = gauge.get("G")
    col = float(np.linalg.norm(G, axis=0).min() / np.linalg.norm(G)) if G is not None and np.linalg.norm(G) > 0 else 0.0
    return {"top": float(vals[is_star].max()) if is_star.any() else None, "second": second, "mu": mu,
            "second_relative": second / mu, "min_column_relative": col,
            "unique_face": bool(is_star.any() and second <= mu * (1 - gap_rtol) and col >= gap_rtol)}
