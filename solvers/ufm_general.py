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

import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from solvers import lbfgs
from solvers.common import Certificate, Solution, blas_threads
from solvers.losses import Loss
from theory._validate import InputError, as_float, as_int

LAMBDA_MIN = 1e-12
LAMBDA_MAX = 1e12
UNIT_ROUNDOFF = 2.0 ** -53
#: Relative slack on the computed spectral norm (LAPACK's SVD is backward stable: computed singular values
#: are within ~ (size) u ||A|| of the true ones; 1e-12 covers sizes up to ~1e4).
SPECTRAL_SLACK = 1e-12


def spectral_slack(n: int) -> float:
    """The relative slack for an n x n (or n-column) spectral computation: min(SPECTRAL_SLACK, 64 n u). Backward
    stable SVDs are accurate to ~(size) u ||A||; 64 n u is a 16x margin over the 4 n u of the absolute allowance, and
    the cap 1e-12 keeps the former value for n >= ~140. (At small n the fixed 1e-12 set a floor of ~1e-12 relative
    on every certified gap through the dual scale t, and hence on the geometry certificate's radius.)"""
    return min(SPECTRAL_SLACK, 64.0 * max(int(n), 1) * UNIT_ROUNDOFF)
#: Relative rank threshold for singular values of X.
RANK_RTOL = 1e-7
#: Singular values of a candidate below RANK_VALUE_RTOL x value / lam are set to exactly 0 before it is
#: certified (`clean_candidate`): one contributes lam s to the nuclear term and at most ~lam s to the data
#: term (the data gradient has spectral norm <= lam at an optimum), so removing all of them (at most K) moves
#: the value by ~2e-12 relative, far below the value tolerance 1e-8; the certificate is then evaluated at
#: the cleaned point, so nothing rests on this estimate. Without it a zero optimum (e.g. the prior-fitting
#: bias with Z = 0) showed round-off singular values ~1e-16 and was reported with rank K and noise cosines.
RANK_VALUE_RTOL = 1e-12
#: Face tolerances of the uniqueness confirmation (same meaning and values as docs/ufm.md).
FACE_TOL = 1e-6
SPECTRAL_TOL = 1e-6
STRUCTURE_TOL = 1e-8
#: Size limits (class-reduced K x G matrices; full SVDs are O(K^2 G)). Budget: 2.5 GB, ~2 minutes.
MAX_ENTRIES = 4_000_000
#: With grouping (docs/ufm_general.md, "Grouping exchangeable classes") the per-class work is O(K) per
#: evaluation; at most this many classes.
MAX_GROUPED_CLASSES = 100_000
FLOPS_PER_SECOND = 1e10
#: Work budgets of the solvers (docs/ufm_general.md, "Budgets"): objective evaluations per start. They are
#: counted, not timed, so the same input gives the same candidate, certificate and verdict at any machine load.
FACTORED_EVALS_PER_START = 40_000
GROUPED_EVALS_PER_START = 20_000
#: Wall-clock safety net of the solvers (seconds): far above the time the work budgets take on an idle machine
#: (measured: the largest accepted instances need < 60 s there). When it stops a run the output says so.
WALL_SAFETY_S = 1800.0
SAFETY_MESSAGE = "stopped by the wall-clock safety limit; the work budget was not reached"


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
        _cache_one_hot(self.loss)
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
        if self.K * self.counts.size > MAX_ENTRIES and not self._groups_fit():
            raise InputError(f"K x groups = {self.K} x {self.counts.size} exceeds {MAX_ENTRIES} entries (memory and "
                             f"time budget of the class-reduced certificate; docs/ufm_general.md)")

    def _groups_fit(self) -> bool:
        """Grouping exchangeable classes brings the work to (m + 1) x m slot matrices (m groups)."""
        if self.K > MAX_GROUPED_CLASSES:
            return False
        lay = class_layout(self)
        return lay is not None and (lay.m + 1) * lay.m <= MAX_ENTRIES

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
            # the whole instance, at every size: a report must let anyone (and `--rigorous`) rebuild it exactly;
            # 10 000 counts are ~60 kB of JSON, and the text output shortens long lists
            out["counts"] = self.counts.tolist()
        out.update(self.meta)
        return out


def _cache_one_hot(loss) -> None:
    """SquaredError._one_hot compares its K x K targets with the identity on every slot evaluation (measured: 57 of
    139 s of an imbalanced MSE solve at K = 1000). The targets of a problem are fixed, so its answer is computed once
    and kept on the instance (a local workaround; the loss module is not changed here)."""
    from solvers.losses import SquaredError

    if isinstance(loss, SquaredError) and "_one_hot" not in vars(loss):
        val = bool(SquaredError._one_hot(loss))
        loss._one_hot = lambda: val


def classification(loss: Loss, counts, d, lw, lh, lb=0.0, meta=None) -> GeneralUFM:
    counts = np.asarray(counts)
    return GeneralUFM(loss, int(counts.size), counts, np.arange(counts.size), d, lw, lh, lb, "classification",
                      dict(meta or {}))


#: Grouped solver cost model (measured on the shared 2-core machine, single-threaded BLAS): GROUPED_EVALS
#: evaluations per start (measured ~1230 until the certified gap closes, long tail K = 1000 with m = 100 groups
#: and Zipf K = 10 000 with m = 280; 4x margin), each ~GROUPED_EVAL_OVERHEAD s of Python/numpy overhead plus
#: ~GROUPED_FLOPS_M3 m^3 flops (three m x m products; measured 6.4 ms per evaluation at m = 280).
GROUPED_EVALS = 5000
GROUPED_EVAL_OVERHEAD = 2e-4
GROUPED_FLOPS_M3 = 4.0


def estimate(p: GeneralUFM, starts: int = 1, layout=None) -> dict:
    """Memory (bytes) and time (s) of the class-reduced solve + certificate, from sizes alone: ~40 copies of
    K x G plus the SVDs (O(K G min(K, G))) and 400 evaluations of 4 K G r flops per start (r = min(K, G)).
    Grouped (``layout`` given, m groups): ~40 copies of the (m + 1) x m slot matrices, GROUPED_EVALS
    evaluations per start (GROUPED_* constants), and, when K <= EXPAND_MAX, ~12 K x K matrices and ~30 K^3 flops for the geometry
    and the uniqueness conditions of the expanded candidate."""
    if layout is not None:
        m, K = float(layout.m), float(p.K)
        expand = p.K <= EXPAND_MAX
        secs = starts * GROUPED_EVALS * (GROUPED_EVAL_OVERHEAD + GROUPED_FLOPS_M3 * m ** 3 / FLOPS_PER_SECOND)
        secs += 30.0 * K ** 3 / FLOPS_PER_SECOND if expand else 0.0
        byts = 8.0 * 40 * (m + 1) * m + (8.0 * 12 * K * K if expand else 8.0 * 4 * K)
        return {"bytes": byts, "seconds": secs}
    K, G = float(p.K), float(p.G)
    r = min(K, G)
    flops = starts * 400 * 4 * K * G * r + 20 * K * G * r
    return {"bytes": 8.0 * 40 * K * G + 8.0 * 3 * r * r, "seconds": flops / FLOPS_PER_SECOND}


# ---------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------

def _small_blas(fn):
    """Run ``fn(p, pt_or_layout, layout, ...)`` with single-threaded BLAS when its m x m matrices are small
    (``solvers.common.blas_threads``: below SMALL_GEMM_FLOPS per product). Measured on the loaded 2-core machine:
    an SVD of a 100 x 100 matrix takes 0.6 ms single-threaded and ~290 ms with threaded BLAS (spin-waiting
    threads), and the grouped certificate, value and cleaning run outside the callers' single-threaded regions."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        lay = next((a for a in args if hasattr(a, "reps") and hasattr(a, "m")), None)
        with blas_threads(float(lay.m) ** 3 if lay is not None else 0.0):
            return fn(*args, **kwargs)

    return wrapper


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


def clean_candidate(p: "GeneralUFM", X: np.ndarray, b: np.ndarray) -> np.ndarray:
    """X with its singular values below RANK_VALUE_RTOL x P(X, b) / lam set to exactly 0."""
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    thr = RANK_VALUE_RTOL * abs(convex_value(p, X, b)) / p.lam
    if not np.any((s > 0) & (s <= thr)):
        return X
    s = np.where(s > thr, s, 0.0)
    return (U * s) @ Vt


@_small_blas
def clean_grouped(p: "GeneralUFM", pt: "GroupedPoint", layout) -> "GroupedPoint":
    """The grouped point with the singular values of A and the |beta_a| below RANK_VALUE_RTOL x value / lam set
    to exactly 0 (see RANK_VALUE_RTOL)."""
    thr = RANK_VALUE_RTOL * abs(grouped_value(p, pt, layout)) / p.lam
    U, s, Vt = np.linalg.svd(pt.A)
    A = pt.A if not np.any((s > 0) & (s <= thr)) else (U * np.where(s > thr, s, 0.0)) @ Vt
    beta = np.where(np.abs(pt.beta) > thr, pt.beta, 0.0)
    return GroupedPoint(A, beta, pt.b.copy())


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
                   gtol: float | None = None, maxiter: int = 20000, time_budget: float | None = None,
                   x_init: tuple | None = None, max_evals: int | None = None) -> Solution:
    """L-BFGS on (P, Q, b) with X = P Q in class coordinates (rank r = min(d, K, G) unless given), from random
    starts (and ``x_init`` = (X, b) when given). Returns X, b of the best start; value = P(X, b) exactly
    evaluated (a feasible value of the dimension-r problem).

    Budgets (docs/ufm_general.md, "Budgets"): ``max_evals`` objective evaluations per start (default
    FACTORED_EVALS_PER_START; a count, so the result is the same at any machine load; ``maxiter`` bounds the
    iterations per start as well); ``time_budget`` is only a wall-clock safety net (default WALL_SAFETY_S, far
    above the work budget's time): when it stops a run, the diagnostics say so (``SAFETY_MESSAGE``)."""
    t0 = time.perf_counter()
    K, G = p.K, p.G
    r = int(rank if rank is not None else min(p.d, K, G))
    per_start = int(max_evals if max_evals is not None else FACTORED_EVALS_PER_START)
    safety = float(time_budget if time_budget is not None else WALL_SAFETY_S)
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
    nfev_total, stop_reason = 0, None
    for x0 in inits:
        if stop_reason == "safety" and best is not None:
            runs.append(f"skipped: {SAFETY_MESSAGE}")
            continue
        x, used, iters = x0, 0, 0
        for _round in range(20):  # restarts after rebalancing P, Q (same X, regulariser can only drop)
            left = per_start - used
            res = lbfgs.minimize(fun, x, gtol=gtol, maxiter=min(2000, max(1, maxiter - iters)), maxfun=max(1, min(left, 8020)),
                                 deadline=t0 + safety)
            used += res.nfev
            iters += res.nit
            x = res.x
            P = x[:K * r].reshape(K, r)
            Q = x[K * r:K * r + r * G].reshape(r, G)
            U_, s_, Vt_ = np.linalg.svd(P @ Q, full_matrices=False)
            s_ = np.sqrt(s_[:r])
            x = np.concatenate([(U_[:, :r] * s_).ravel(), (s_[:, None] * Vt_[:r]).ravel(), x[K * r + r * G:]])
            if res.message == "time budget reached":
                res.message, stop_reason = SAFETY_MESSAGE, "safety"
                break
            if res.message.startswith("converged"):
                break
            if used >= per_start or iters >= maxiter:
                res.message = f"work budget reached ({used} evaluations, {iters} iterations)"
                break
        nfev_total += used
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
                    {"rank_limit": r, "start_values": runs, "message": res.message, "gtol": gtol,
                     "evaluations": nfev_total, "work_budget_evaluations_per_start": per_start,
                     "wall_safety_s": safety, "stopped_by_wall_safety": stop_reason == "safety"})


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

def _softmax_loss(loss) -> bool:
    from solvers.losses import CrossEntropy

    return isinstance(loss, CrossEntropy)


def repair_columns(p: GeneralUFM, V: np.ndarray) -> np.ndarray:
    """Softmax losses: the dual columns v_c must sum to 0 (pi_c = v_c / w + q_c in the simplex). t (p - q) computed
    in floats sums to ~u (absolute: p ~ 1 is rounded), which at small lambda (|v| ~ 1e-12) is relatively large; the
    own-class entry is replaced by minus the sum of the others, so the exact sum of the floats is ~K u |v|."""
    if not _softmax_loss(p.loss):
        return V
    V = V.copy()
    cols = np.arange(V.shape[1])
    own = V[p.y, cols].copy()
    V[p.y, cols] = 0.0
    V[p.y, cols] = -V.sum(axis=0)
    del own
    return V


def repair_slots(p: GeneralUFM, Vs: np.ndarray, layout) -> np.ndarray:
    """:func:`repair_columns` in slot form: the own slot = minus the multiplicity-weighted sum of the others."""
    if not _softmax_loss(p.loss):
        return Vs
    Vs = Vs.copy()
    m = layout.m
    Vs[m] = -np.sum(layout.mult[:m] * Vs[:m], axis=0)
    return Vs


def _xlogx_shift(q: np.ndarray, e: np.ndarray) -> np.ndarray:
    """(q + e) log(q + e) for q >= 0, q + e >= 0, accurate when |e| << q (log q + log1p(e / q)): the float sum q + e
    rounds e away at q ~ 1 (a relative error ~u / |e| in the term; it refuted a true closed form at lambda = 1e-12)."""
    x = q + e
    out = np.zeros_like(x)
    pos = q > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out[pos] = x[pos] * (np.log(q[pos]) + np.log1p(e[pos] / q[pos]))
        z = ~pos & (x > 0)
        out[z] = x[z] * np.log(x[z])
    return out


def conjugate_columns(p: GeneralUFM, V: np.ndarray) -> np.ndarray | None:
    """sum_i loss*(v_c; y_c) per column; softmax losses evaluated with :func:`_xlogx_shift` (domain: q + v/w >= 0
    and the column sums 0 up to 1e-12 relative), others by the loss object."""
    if not _softmax_loss(p.loss):
        return p.loss.conjugate(V, p.y)
    loss = p.loss
    w = loss.w[p.y].astype(float)
    Q = loss.targets(p.y)
    E = V / w
    out = w * np.sum(_xlogx_shift(Q, E), axis=0)
    Pm = Q + E
    bad = (np.min(Pm, axis=0) < 0.0) | (np.abs(E.sum(axis=0)) > 1e-12 * np.max(np.abs(E), axis=0) + 1e-300)
    out[bad] = np.inf
    return out


def conjugate_slots(p: GeneralUFM, Vs: np.ndarray, layout) -> np.ndarray | None:
    """Slot form of :func:`conjugate_columns`."""
    if not _softmax_loss(p.loss):
        return p.loss.conjugate_slots(Vs, layout)
    loss = p.loss
    Mu = layout.mult
    live = Mu > 0
    w = loss.w[layout.reps].astype(float)
    Q = np.full(Vs.shape, loss.q_other)
    Q[layout.m] = loss.q_true
    E = np.where(live, Vs / w, 0.0)
    Qe = np.where(live, Q, 0.0)
    out = w * np.sum(Mu * _xlogx_shift(Qe, E), axis=0)
    tot = np.sum(Mu * E, axis=0)
    bad = (np.min(np.where(live, Qe + E, 0.0), axis=0) < 0.0) | (np.abs(tot) > 1e-12 * np.max(np.abs(E), axis=0)
                                                                  + 1e-300)
    out[bad] = np.inf
    return out


def spectral_upper(A: np.ndarray) -> float:
    """An upper bound of ||A||_2: the largest computed singular value times (1 + SPECTRAL_SLACK), plus an
    absolute allowance of (size) u ||A||_F."""
    if A.size == 0:
        return 0.0
    s = float(np.linalg.svd(A, compute_uv=False)[0])
    return s * (1.0 + spectral_slack(max(A.shape))) + 4.0 * max(A.shape) * UNIT_ROUNDOFF * float(np.linalg.norm(A))


def certificate(p: GeneralUFM, X: np.ndarray, b: np.ndarray, *, upper: float | None = None,
                grads: np.ndarray | None = None) -> Certificate:
    """Proven lower bound at a candidate (X, b) (docs/ufm_general.md, "Certificate").

    Route "conjugate" when the loss has a conjugate and the scaled centred gradient lies in its domain,
    else "linearisation" (needs ``loss.infimum``). ``upper`` defaults to P(X, b). ``grads`` (K x G) replaces the
    per-group loss gradients at the candidate (the conjugate route only: any dual point gives a valid bound, its
    feasibility is checked here); the regression closed form passes its residual from the SVD of the targets, free
    of the cancellation in U - T (docs/ufm_general.md, "Regression")."""
    N, lam = p.N, p.lam
    sq = np.sqrt(p.counts.astype(float))
    wts = p.counts / float(N)
    U = X / sq + b[:, None]
    vals, grads_c = p.loss.value_grad(U, p.y)
    if grads is None:
        grads = grads_c
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
    conj = conjugate_columns(p, repair_columns(p, t * Gc))
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


def _gram_sqrts(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X X^T)^{1/2} = U S U^T and (X^T X)^{1/2} = V S V^T from the SVD X = U S V^T. Unlike square roots of the
    eigenvalues of X X^T, a zero singular value of X stays ~u ||X|| here (eigh of X X^T gives it as ~u ||X||^2,
    whose square root is ~1e-8 ||X||: the geometry of a rank-deficient optimum then carried 1e-8 noise)."""
    U, s, Vt = np.linalg.svd(X)
    k = s.size
    return (U[:, :k] * s) @ U[:, :k].T, (Vt[:k].T * s) @ Vt[:k]


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
    WW, S = _gram_sqrts(X)
    WW, S = q * WW, S / q
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
        w_zero = bool(np.all(wn[mino] <= 1e-6 * max(wn.max(), 1e-300)))
        m_zero = bool(np.all(mn[mino] <= 1e-6 * max(mn.max(), 1e-300)))
        mc_pairs = [wc[i, j] for i in mino for j in mino if i < j]
        out["minority"] = {
            "minority_classes": mino.tolist()[:100], "majority_classes": majo.tolist()[:100],
            # cosines between (numerically) zero vectors do not exist: null
            "minority_classifier_cosine": float(np.mean(mc_pairs)) if mc_pairs and not w_zero else None,
            "minority_mean_cosine": (float(np.mean([mc[i, j] for i in mino for j in mino if i < j]))
                                     if mc_pairs and not m_zero else None),
            "classifier_norm_ratio": float(wn[mino].mean() / wn[majo].mean()) if wn[majo].mean() > 0 else None,
            "mean_norm_ratio": float(mn[mino].mean() / mn[majo].mean()) if mn[majo].mean() > 0 else None,
            "minority_classifiers_zero": bool(np.all(wn[mino] <= 1e-6 * max(wn.max(), 1e-300)))}
    out["_cosines_full"] = (mc, wc)
    return out


# ---------------------------------------------------------------------------------------------------
# Regression (Andriopoulos et al. 2024)
# ---------------------------------------------------------------------------------------------------

#: Imbalanced MSE in closed form up to this many classes (a K x K SVD).
MSE_CLOSED_FORM_MAX = 2000


def mse_imbalanced_closed_form(p: GeneralUFM) -> dict | None:
    """Imbalanced MSE with one-hot targets and a free bias (docs/ufm_general.md, "Imbalanced MSE in closed form"):
    in class coordinates the data term is (1/(2N)) ||X + b sqrt(n)^T - D^{1/2}||_F^2; minimising over b projects
    on the right by P = I - sqrt(n) sqrt(n)^T / N, so X* = SVT of Yc = D^{1/2} P at N lam (the regression closed form
    of the centred one-hot targets), b* = n / N, f* = (1/(2N)) sum_j min(s_j, N lam)^2 + lam sum_j max(s_j - N lam,
    0). The gradient G D^{1/2} = X* - Yc = -U min(s, N lam) V^T comes from the SVD (no cancellation). None when it
    does not apply (other losses, lambda_b > 0, K > MSE_CLOSED_FORM_MAX)."""
    from solvers.losses import SquaredError

    loss = p.loss
    if (p.kind != "classification" or p.lb != 0.0 or not isinstance(loss, SquaredError) or loss.name != "mse"
            or not loss._one_hot() or p.G != p.K or p.K > MSE_CLOSED_FORM_MAX):
        return None
    n = p.counts.astype(float)
    sq = np.sqrt(n)
    N, lam = float(p.N), p.lam
    v = sq / math.sqrt(N)
    Yc = np.diag(sq) - np.outer(n, sq) / N  # D^{1/2} (I - sqrt(n) sqrt(n)^T / N)
    with blas_threads(0):
        U, s, Vt = np.linalg.svd(Yc)
    thr = N * lam
    z = np.maximum(s - thr, 0.0)
    X = (U * z) @ Vt
    X -= np.outer(X @ v, v)  # exactly orthogonal to sqrt(n) on the right (the SVD's rounding)
    grads = -((U * np.minimum(s, thr)) @ Vt) / sq[None, :]
    val = float(np.sum(np.minimum(s, thr) ** 2) / (2 * N) + lam * np.sum(z))
    return {"X": X, "b": n / N, "value": val, "rank": int(np.sum(z > 0)), "grads": grads, "singular_values": s,
            "threshold": thr}


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


# ---------------------------------------------------------------------------------------------------
# Grouping exchangeable classes (docs/ufm_general.md, "Grouping exchangeable classes")
# ---------------------------------------------------------------------------------------------------
#
# Classes a, b with equal counts and equal loss keys (CE: equal weights; MSE: always) are exchangeable: the
# problem is invariant under every permutation pi of the classes preserving (count, key), acting on X by
# X -> P X P^T and on b by b -> P b. Averaging an optimum over this finite group keeps it optimal (convexity),
# so an optimum lies in the commutant algebra of the permutation representation. With groups a = 1..m of
# sizes m_a, R^K = (the m-dimensional span of the group indicators) + (the sum-zero vectors of each group,
# dimension m_a - 1, pairwise inequivalent irreducible representations). An invariant X is therefore
# A (m x m, on the orthonormal indicator basis u_a = 1_a / sqrt(m_a)) plus beta_a Id on the sum-zero part of
# group a; its singular values are those of A and |beta_a| with multiplicity m_a - 1:
#     ||X||_* = ||A||_* + sum_a (m_a - 1) |beta_a|,   X_ij = (A_ea - [e == a] beta_a)/sqrt(m_e m_a) + [i == j] beta_a
# for i in group e, j in group a. Every per-class quantity of the certificate (logits, gradients, conjugates)
# is then that of one representative per group, times the group size.

#: Above this many classes the grouped candidate is not expanded to K x K matrices (geometry and uniqueness
#: conditions are then reported per group only).
EXPAND_MAX = 2000


def class_layout(p: GeneralUFM):
    """The groups of exchangeable classes (a ``solvers.losses.SlotLayout``) or None when the loss declares no
    symmetry (user losses), for regression, or when grouping would not reduce the size (every group a single
    class)."""
    from solvers.losses import SlotLayout

    if p.kind != "classification" or p.G != p.K:
        return None
    key = p.loss.exchangeable_key()
    if key is None:
        return None
    key = np.asarray(key, dtype=float).reshape(-1)
    if key.shape != (p.K,):
        return None
    labels = np.empty(p.K, dtype=np.int64)
    seen: dict = {}
    for i, (c, k) in enumerate(zip(p.counts.tolist(), key.tolist())):
        labels[i] = seen.setdefault((int(c), float(k)), len(seen))
    if len(seen) == p.K:
        return None
    return SlotLayout(labels)


@dataclass
class GroupedPoint:
    """An invariant candidate: A (m x m), beta (m), per-group bias b (m); layout of the groups."""

    A: np.ndarray
    beta: np.ndarray
    b: np.ndarray

    def nuclear(self, layout) -> float:
        with blas_threads(float(self.A.shape[0]) ** 3):
            sv = np.linalg.svd(self.A, compute_uv=False)
        return float(np.sum(sv)) + float(np.sum((layout.sizes - 1) * np.abs(self.beta)))

    def rank(self, layout) -> int:
        with blas_threads(float(self.A.shape[0]) ** 3):
            sv = np.linalg.svd(self.A, compute_uv=False)
        top = max(float(sv.max(initial=0.0)), float(np.max(np.abs(self.beta), initial=0.0)))
        if not top > 0:
            return 0
        return int(np.sum(sv > RANK_RTOL * top)) + int(np.sum((layout.sizes - 1) * (np.abs(self.beta) > RANK_RTOL * top)))


def invariant_to_full(R: np.ndarray, gam: np.ndarray, layout) -> np.ndarray:
    """The K x K invariant matrix with reduced form (R, gam): X_ij = (R_ea - [e == a] gam_a)/sqrt(m_e m_a)
    + [i == j] gam_a (i in group e, j in group a)."""
    sz = layout.sizes.astype(float)
    m = layout.m
    alpha = (R - np.diag(gam)) / np.sqrt(np.outer(sz, sz))
    X = alpha[np.ix_(layout.labels, layout.labels)]
    X[np.arange(layout.K), np.arange(layout.K)] += gam[layout.labels]
    del m
    return X


def grouped_full(p: GeneralUFM, pt: GroupedPoint, layout) -> tuple[np.ndarray, np.ndarray]:
    """The class-coordinate candidate (X = Zc D^{1/2}, K x K) and bias (K) of an invariant point."""
    return invariant_to_full(pt.A, pt.beta, layout), pt.b[layout.labels].copy()


def _group_counts(p: GeneralUFM, layout) -> np.ndarray:
    return p.counts[layout.reps].astype(float)


def slot_logits(p: GeneralUFM, pt: GroupedPoint, layout) -> np.ndarray:
    """Slot logits ((m + 1) x m) of the representatives: z = X[:, rep_a] / sqrt(n_a) + b."""
    sz = layout.sizes.astype(float)
    sqn = np.sqrt(_group_counts(p, layout))
    m = layout.m
    Zs = np.empty((m + 1, m))
    Zs[:m] = pt.A / np.sqrt(np.outer(sz, sz))
    d = np.arange(m)
    Zs[d, d] = (np.diag(pt.A) - pt.beta) / sz
    Zs[m] = np.diag(pt.A) / sz + pt.beta * (1.0 - 1.0 / sz)
    Zs /= sqn[None, :]
    Zs[:m] += pt.b[:, None]
    Zs[m] += pt.b
    return Zs


@_small_blas
def grouped_value(p: GeneralUFM, pt: GroupedPoint, layout) -> float:
    """P(X, b) of the invariant point: (1/N) sum_a m_a n_a loss(rep_a) + lam ||X||_* (+ lb/2 ||b||^2)."""
    wts = layout.sizes * _group_counts(p, layout) / p.N
    vals, _ = p.loss.value_grad_slots(slot_logits(p, pt, layout), layout)
    return float(wts @ vals) + p.lam * pt.nuclear(layout) + 0.5 * p.lb * float(layout.sizes @ (pt.b * pt.b))


def _grouped_fun(p: GeneralUFM, layout, r: int, pinned: np.ndarray | None = None):
    m = layout.m
    sz = layout.sizes.astype(float)
    cnt = _group_counts(p, layout)
    sqn = np.sqrt(cnt)
    wts = sz * cnt / p.N
    Mu = layout.mult
    lam, lb = p.lam, p.lb
    C = 1.0 / (np.sqrt(np.outer(sz, sz)) * sqn[None, :])
    mm1 = np.maximum(sz - 1.0, 0.0)
    sc = np.where(mm1 > 0, 1.0 / np.maximum(mm1, 1.0), 0.0)  # beta_a = p_a q_a / (m_a - 1)
    if pinned is not None:
        sc = np.where(pinned, 0.0, sc)  # beta_a = 0 exactly: identical classifiers and means within group a
    d = np.arange(m)
    nP, nQ = m * r, r * m

    def unpack(x):
        P = x[:nP].reshape(m, r)
        Q = x[nP:nP + nQ].reshape(r, m)
        pp = x[nP + nQ:nP + nQ + m]
        qq = x[nP + nQ + m:nP + nQ + 2 * m]
        b = x[nP + nQ + 2 * m:]
        return P, Q, pp, qq, b

    def fun(x):
        P, Q, pp, qq, b = unpack(x)
        pt = GroupedPoint(P @ Q, pp * qq * sc, b)
        vals, Gs = p.loss.value_grad_slots(slot_logits(p, pt, layout), layout)
        f = (float(wts @ vals) + 0.5 * lam * (float(np.sum(P * P)) + float(np.sum(Q * Q)) + float(pp @ pp)
                                              + float(qq @ qq)) + 0.5 * lb * float(sz @ (b * b)))
        T = wts[None, :] * Mu[:m] * Gs[:m]
        o = wts * Gs[m]
        dA = T * C
        dA[d, d] += o / (sz * sqn)
        dbeta = (-T[d, d] / sz + o * (1.0 - 1.0 / sz)) / sqn
        db = T.sum(axis=1) + o + lb * sz * b
        dbs = dbeta * sc
        g = np.concatenate([(dA @ Q.T + lam * P).ravel(), (P.T @ dA + lam * Q).ravel(), dbs * qq + lam * pp,
                            dbs * pp + lam * qq, db])
        return f, g

    return fun, unpack, sc


#: L-BFGS iterations between two certificate checks of the grouped solver.
ROUND_ITERATIONS = 300
#: The grouped solver stops once the certificate's gap is below this fraction of the value (100 times below
#: the value tolerance 1e-8 of proofs_check.claims.ufm, so that the claim's verdict is not at its edge).
TARGET_GAP_RTOL = 1e-11
#: Line-search values within FLAT_RTOL x |f| of the start are compared by their derivatives only
#: (solvers/lbfgs.py, "Flat values"): f is a sum of ~m^2 rounded terms, so differences below ~1e-14 |f| are noise.
FLAT_RTOL = 1e-14
#: Stall detection of the grouped solver: it stops when STALL_ROUNDS consecutive rounds did not bring the smallest
#: certified gap so far below STALL_FACTOR times its previous value (measured: once the gradient is at rounding
#: level the gap fluctuates by ~10x around its floor, 1.8e-12 x value at lambda = 1e-5 and ~1e-11 x value with
#: lambda_b = 0.01, and no further round improves it). The certificate is evaluated independently afterwards, so
#: stopping early only ever costs a wider gap, never validity. A stall ends the solve only once the certified gap
#: is within STALL_MAX_RTOL x value, 10 times inside the value tolerance 1e-8 of the claims
#: (proofs_check.claims.ufm.GEN_VALUE_RTOL), so that a verdict never rests on a stall far from the floor; above it
#: the solve goes on until its target or its time budget.
STALL_ROUNDS = 4
STALL_FACTOR = 0.5
STALL_MAX_RTOL = 1e-9
#: Slack columns of the grouped factors beyond the numerical rank of A (see solve_grouped).
RANK_SLACK = 10


@_small_blas
def solve_grouped(p: GeneralUFM, layout, *, starts: int = 1, seed: int = 0, gtol: float | None = None,
                  time_budget: float | None = None, x_init: GroupedPoint | None = None,
                  target_gap_rtol: float = TARGET_GAP_RTOL, pinned: np.ndarray | None = None,
                  max_evals: int | None = None) -> Solution:
    """L-BFGS on the invariant point (A = P Q, beta_a = p_a q_a / (m_a - 1), b), regulariser
    lam (||P||^2 + ||Q||^2 + ||p||^2 + ||q||^2) / 2 (= lam ||X||_* at a balanced factorization), rebalanced by
    an SVD between restarts; bias polished by Newton steps on the m group biases.

    Stopping (per start): after every round of ROUND_ITERATIONS iterations the certificate is evaluated and the
    round with the smallest certified gap is kept. The solve ends when that gap is <= ``target_gap_rtol`` x value
    ("converged: certified gap ..."); when the work budget (``max_evals`` objective evaluations per start, default
    GROUPED_EVALS_PER_START: a count, so the result does not depend on the machine's load) is spent; when the
    wall-clock safety net ``time_budget`` (default WALL_SAFETY_S, far above the work budget's time) stops it, which
    the message says (SAFETY_MESSAGE); when an explicitly given ``gtol`` is met; or
    as "stalled" when STALL_ROUNDS rounds did not halve the gap while it is already <= STALL_MAX_RTOL x value (the
    float64 floor of the certificate at this instance lies above the target, or progress is slow), or, at any
    gap, after the gradient met the default gtol once (where this solver stopped before the certificate was
    consulted: more rounds do not close such a gap; the verdict is then the certificate's). Without ``gtol`` a gradient below
    the default gtol is not a stop (it tightens gtol 100x): the certificate decides. The line search judges
    values at rounding level by their derivative (``lbfgs.minimize(flat_rtol=FLAT_RTOL)``): the gap is first
    order in the gradient (through the scale t of the dual point), so it keeps improving after f is constant to
    the last bit. ``diagnostics``: message, certified_gap (absolute) and certified_gap_rtol of the kept round,
    target_gap_rtol, stalled."""
    t0 = time.perf_counter()
    m = layout.m
    r = m
    per_start = int(max_evals if max_evals is not None else GROUPED_EVALS_PER_START)
    safety = float(time_budget if time_budget is not None else WALL_SAFETY_S)
    nfev_total, safety_hit = 0, False
    fun, unpack, sc = _grouped_fun(p, layout, r, pinned)
    explicit_gtol = gtol is not None
    gtol = gtol if gtol is not None else 1e-11 * max(1e-3, min(1.0, 10 * math.sqrt(p.lam)))
    rng = np.random.default_rng(seed)
    mm1 = np.maximum(layout.sizes - 1.0, 0.0)

    def pack(pt: GroupedPoint, rk: int = m):
        """Balanced factors of rank rk (the rk largest singular triples of A)."""
        U_, s_, Vt_ = np.linalg.svd(pt.A)
        s_ = np.sqrt(s_[:rk])
        mag = np.sqrt(np.abs(pt.beta) * mm1)  # p = q = sqrt(|beta| (m_a - 1)) (balanced), sign on q
        return np.concatenate([(U_[:, :rk] * s_).ravel(), (s_[:, None] * Vt_[:rk]).ravel(), mag,
                               np.sign(pt.beta) * mag, pt.b])

    inits = [] if x_init is None else [pack(x_init)]
    for _ in range(starts):
        x0 = rng.standard_normal(2 * m * r + 3 * m) * 0.5 / math.sqrt(r)
        x0[-m:] = 0.0
        x0[2 * m * r:2 * m * r + 2 * m] *= np.tile(mm1 > 0, 2)
        inits.append(x0)
    best, runs, res = None, [], None
    gap_info: dict = {}
    for x0 in inits:
        if safety_hit and best is not None:
            runs.append(f"skipped: {SAFETY_MESSAGE}")
            continue
        used = 0
        x, gt, gamma = x0, gtol, None
        rk, fun_r, unpack_r = r, fun, unpack  # the factor rank of this round (adapted below)
        best_c = None  # (gap, point, certificate) of the round with the smallest certified gap
        stale = 0
        small_gradient = False  # the default gtol was met once
        for _round in range(200):
            res = lbfgs.minimize(fun_r, x, gtol=gt, maxiter=ROUND_ITERATIONS, flat_rtol=FLAT_RTOL, gamma0=gamma,
                                 maxfun=max(1, per_start - used), deadline=t0 + safety)
            used += res.nfev
            gamma = res.gamma
            P, Q, pp, qq, b = unpack_r(res.x)
            cand = GroupedPoint(P @ Q, pp * qq * sc, b.copy())
            # the duality gap proven at this round's point (the certificate costs O(m^3), ~1 ms at m = 100)
            c = certificate_grouped(p, cand, layout, pinned=pinned)
            gap = c.gap if math.isfinite(c.gap) else math.inf
            if best_c is None or gap < best_c[0]:
                stale = 0 if best_c is None or gap <= STALL_FACTOR * best_c[0] else stale + 1
                best_c = (gap, cand, c)
            else:
                stale += 1
            # factor rank: the numerical rank k of A plus slack (RANK_SLACK); shrink when that is at most half the
            # current rank, grow (double) when the slack is used up. Directions beyond the rank of the optimum
            # have curvature ~ lam - sigma_i(gradient), ~0 for the many gradient singular values near lam, and
            # slowed L-BFGS down (Zipf K = 10 000: rank 13 of m = 280). The certificate does not depend on it.
            with blas_threads(float(m) ** 3):
                sv = np.linalg.svd(cand.A, compute_uv=False)
            k = int(np.sum(sv > RANK_RTOL * sv[0])) if sv.size and sv[0] > 0 else 0
            want = min(m, max(k + RANK_SLACK, 2 * k))
            new_rk = want if want <= rk // 2 else (min(m, 2 * rk) if k > rk - RANK_SLACK // 2 else rk)
            if new_rk != rk:
                rk = new_rk
                fun_r, unpack_r, _ = _grouped_fun(p, layout, rk, pinned)
            x = pack(cand, rk)
            if gap <= target_gap_rtol * abs(c.upper):
                res.message = f"converged: certified gap {gap:.2e} <= {target_gap_rtol:g} x value"
                break
            if res.message == "time budget reached":
                safety_hit = True
                res.message = f"{SAFETY_MESSAGE} (certified gap {best_c[0]:.2e})"
                break
            if used >= per_start:
                res.message = f"work budget reached ({used} evaluations; certified gap {best_c[0]:.2e})"
                break
            if res.message.startswith("converged"):
                if explicit_gtol:
                    break
                # max |gradient| <= gtol is only a proxy: the certificate decides; ask for a smaller gradient
                gt *= 1e-2
                small_gradient = True
            if stale >= STALL_ROUNDS and not best_c[0] <= STALL_MAX_RTOL * abs(c.upper) and small_gradient:
                # the gradient reached the default gtol (where this solver used to stop) and the gap has not
                # halved since: more rounds do not help; the verdict is the certificate's (not within tolerance)
                res.message = (f"stalled: certified gap {best_c[0]:.2e} = {best_c[0] / abs(c.upper):.1e} x value "
                               f"did not halve in {STALL_ROUNDS} rounds after max |gradient| <= {gtol:.1e} (above "
                               f"{STALL_MAX_RTOL:g} x value: the certificate does not close at this point)")
                break
            if stale >= STALL_ROUNDS and best_c[0] <= STALL_MAX_RTOL * abs(c.upper):
                # no round improved the proven gap 2x for STALL_ROUNDS rounds: it sits at the floor that the
                # float64 evaluation of the certificate allows at this instance (the target is below it), or the
                # progress is too slow to be worth the time once the gap is well inside the claims' tolerance
                res.message = (f"stalled: certified gap {best_c[0]:.2e} = {best_c[0] / abs(c.upper):.1e} x value "
                               f"did not halve in {STALL_ROUNDS} rounds of {ROUND_ITERATIONS} iterations (target "
                               f"{target_gap_rtol:g} x value not reached: the float64 floor of the certificate or slow "
                               f"progress; stopped since the gap is <= {STALL_MAX_RTOL:g} x value)")
                break
        nfev_total += used
        gap_b, cpt, cb = best_c
        pt = GroupedPoint(cpt.A.copy(), cpt.beta.copy(), cpt.b.copy())
        pt.b = polish_bias_grouped(p, pt, layout)
        val = grouped_value(p, pt, layout)
        runs.append(float(val))
        if best is None or val < best[0]:
            best = (val, pt, res)
            gap_info = {"factor_rank": rk, "certified_gap": gap_b, "certified_gap_rtol": gap_b / abs(cb.upper) if cb.upper else None,
                        "target_gap_rtol": target_gap_rtol, "stalled": res.message.startswith("stalled")}
    val, pt, res = best
    return Solution(val, f"factored (grouped: {m} groups of exchangeable classes, L-BFGS)",
                    bool(res.message.startswith("converged")), time.perf_counter() - t0,
                    {"point": pt}, {"groups": m, "start_values": runs, "message": res.message, "gtol": gtol,
                                    "evaluations": nfev_total, "work_budget_evaluations_per_start": per_start,
                                    "wall_safety_s": safety, "stopped_by_wall_safety": safety_hit, **gap_info})


def _grouped_bias_grad(p: GeneralUFM, pt: GroupedPoint, layout) -> np.ndarray:
    """Per-class bias gradient r_e (the same for every class of group e), data term plus lb b."""
    m = layout.m
    sz = layout.sizes.astype(float)
    wts = sz * _group_counts(p, layout) / p.N
    _, Gs = p.loss.value_grad_slots(slot_logits(p, pt, layout), layout)
    db = (wts[None, :] * layout.mult[:m] * Gs[:m]).sum(axis=1) + wts * Gs[m]
    return db / sz + p.lb * pt.b


@_small_blas
def polish_bias_grouped(p: GeneralUFM, pt: GroupedPoint, layout, iters: int = 30) -> np.ndarray:
    """Newton steps on the m group biases (Hessian by finite differences of the gradient; m <= 200)."""
    m = layout.m
    b = pt.b.copy()
    if m > 200:
        return b
    sz = layout.sizes.astype(float)
    for _ in range(iters):
        gb = _grouped_bias_grad(p, GroupedPoint(pt.A, pt.beta, b), layout)
        if float(np.max(np.abs(gb))) <= 1e-17:
            break
        h = 1e-6
        Hs = np.empty((m, m))
        for j in range(m):
            e = np.zeros(m)
            e[j] = h
            Hs[:, j] = (_grouped_bias_grad(p, GroupedPoint(pt.A, pt.beta, b + e), layout) - gb) / h
        # symmetrise in the metric of the group sizes (the Hessian in b is sz-weighted)
        Hs = 0.5 * (Hs + (Hs.T * sz[None, :]) / sz[:, None]) + 1e-14 * np.eye(m)
        step = np.linalg.lstsq(Hs, gb, rcond=1e-12)[0]
        if p.loss.shift_invariant and p.lb == 0.0:
            step -= float(sz @ step) / float(sz.sum())
        b_new = b - step
        g3 = _grouped_bias_grad(p, GroupedPoint(pt.A, pt.beta, b_new), layout)
        if np.max(np.abs(g3)) < np.max(np.abs(gb)):
            b = b_new
        else:
            break
    return b


@_small_blas
def certificate_grouped(p: GeneralUFM, pt: GroupedPoint, layout, *, pinned: np.ndarray | None = None) -> Certificate:
    """The conjugate dual bound of :func:`certificate` at the invariant point, computed per group.

    The dual point is the invariant matrix A = t (G - r 1^T) E / N built from the representatives' gradients
    (exactly invariant: equal slot logits give equal gradient entries); ||(G - r 1^T) D^{1/2}||_2 is the
    largest of the singular values of its reduced m x m form and of |beta_G,a| (m_a >= 2), each bounded from
    above as in :func:`spectral_upper`; the conjugate sum is sum_a m_a n_a loss*(t g_a; rep_a).

    ``pinned`` (bool per group): a lower bound of the problem restricted to X P_a = 0 = P_a X for those groups
    (P_a the projector on the sum-zero vectors of group a: identical classifiers and identical class means
    within the group). For such X, <A, X> = <(I - P) A (I - P), X>, so only the spectral norm of the projected
    dual point must be <= lam: the |beta_G,a| of pinned groups are left out of sigma."""
    N, lam = p.N, p.lam
    m = layout.m
    sz = layout.sizes.astype(float)
    cnt = _group_counts(p, layout)
    sqn = np.sqrt(cnt)
    wts = sz * cnt / N
    Mu = layout.mult
    Zs = slot_logits(p, pt, layout)
    vals, Gs = p.loss.value_grad_slots(Zs, layout)
    data = float(wts @ vals)
    f0 = data + lam * pt.nuclear(layout) + 0.5 * p.lb * float(sz @ (pt.b * pt.b))
    rb = ((wts[None, :] * Mu[:m] * Gs[:m]).sum(axis=1) + wts * Gs[m]) / sz  # per-class bias gradient of the data
    Gc = Gs.copy()
    if p.lb == 0.0:
        Gc[:m] -= rb[:, None]
        Gc[m] -= rb
    d = np.arange(m)
    # reduced form of M = Gc_full D^{1/2}: alpha_ea = Gc[e, a] sqrt(n_a) (e != a or off-diagonal within a),
    # diagonal Gc[m, a] sqrt(n_a); R = sqrt(m_e m_a) alpha + diag(beta), beta_a = (own - same) sqrt(n_a)
    alpha = Gc[:m] * sqn[None, :]
    betaG = (Gc[m] - Gc[d, d]) * sqn
    Rg = np.sqrt(np.outer(sz, sz)) * alpha
    Rg[d, d] += betaG
    s_red = spectral_upper(Rg)
    keep = sz >= 2 if pinned is None else (sz >= 2) & ~np.asarray(pinned, bool)
    s_beta = float(np.max(np.abs(betaG[keep]), initial=0.0)) * (1.0 + spectral_slack(p.K))
    sigma = max(s_red, s_beta) / N
    t = 1.0 if sigma <= lam else lam / sigma
    resid = float(np.max(np.abs(rb + p.lb * pt.b))) if p.lb else float(np.max(np.abs(
        ((wts[None, :] * Mu[:m] * Gc[:m]).sum(axis=1) + wts * Gc[m]) / sz)))
    details = {"spectral_norm_of_gradient": sigma, "lam": lam, "scale_t": t, "bias_residual": resid,
               "bias_residual_raw": float(np.max(np.abs(rb + p.lb * pt.b))), "groups": m,
               "grouping": "exchangeable classes grouped (docs/ufm_general.md, 'Grouping exchangeable classes')"}
    conj = conjugate_slots(p, repair_slots(p, t * Gc, layout), layout)
    if conj is None or not np.all(np.isfinite(conj)):
        details.update(bound=None, why="the scaled gradient is outside the conjugate's domain: no lower bound")
        return Certificate(-math.inf, f0, "none", details)
    terms = wts * conj
    lb_val = -float(np.sum(terms))
    absum = float(np.sum(np.abs(terms)))
    if p.lb > 0:
        extra = float(sz @ (t * rb) ** 2) / (2.0 * p.lb)
        lb_val -= extra
        absum += extra
    allowance = (2 * (p.K + p.G) + 16) * UNIT_ROUNDOFF * absum
    details.update(bound="conjugate", roundoff_allowance=allowance,
                   why="weak duality: f* >= -(1/N) sum_i loss*(N A_i) for ||A||_2 <= lam, A 1 = 0 (A invariant "
                       "under permutations of exchangeable classes)")
    return Certificate(lb_val - allowance, f0, "dual (conjugate, grouped)", details)


def _inv_entries(R: np.ndarray, gam: np.ndarray, layout) -> tuple[np.ndarray, np.ndarray]:
    """Entries of the invariant K x K matrix with reduced form (R, gam): alpha (m x m; the common entry of the
    (e, a) block off its diagonal) and the diagonal entry of each group, alpha_aa + gam_a."""
    sz = layout.sizes.astype(float)
    alpha = (R - np.diag(gam)) / np.sqrt(np.outer(sz, sz))
    return alpha, np.diag(alpha) + gam


@_small_blas
def geometry_grouped(p: GeneralUFM, pt: GroupedPoint, layout) -> dict:
    """The geometry of :func:`geometry`, per group, computed in the invariant algebra (no K x K matrix):
    W W^T = sqrt(lh/lw) (X X^T)^{1/2} -> (q (A A^T)^{1/2}, q |beta|); class-mean Gram
    D^{-1/2} (X^T X)^{1/2} D^{-1/2} / q, centred by the unweighted mean of the class means."""
    q = math.sqrt(p.lh / p.lw)
    m = layout.m
    sz = layout.sizes.astype(float)
    cnt = _group_counts(p, layout)
    Rw, Rm = _gram_sqrts(pt.A)
    gw = gm = np.abs(pt.beta)
    Rw, gw = q * Rw, q * gw
    dinv = 1.0 / np.sqrt(cnt)
    Rm = (Rm * np.outer(dinv, dinv)) / q
    gm = gm * dinv * dinv / q
    v = np.sqrt(sz / p.G)
    Jr = np.eye(m) - np.outer(v, v)
    Rm = Jr @ Rm @ Jr
    aw, dw = _inv_entries(Rw, gw, layout)
    am, dm = _inv_entries(Rm, gm, layout)
    wn = np.sqrt(np.clip(dw, 0.0, None))
    mn = np.sqrt(np.clip(dm, 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        wc = aw / np.outer(wn, wn)
        mc = am / np.outer(mn, mn)
    wc[~np.isfinite(wc)] = 0.0
    mc[~np.isfinite(mc)] = 0.0
    out = {"rank": pt.rank(layout), "groups": m,
           "group_sizes": layout.sizes.tolist() if m <= 1000 else None,
           "group_counts": cnt.astype(int).tolist() if m <= 1000 else None,
           "classifier_norms_per_group": wn.tolist() if m <= 1000 else None,
           "class_mean_norms_per_group": mn.tolist() if m <= 1000 else None,
           "classifier_cosine_within_group": [float(wc[a, a]) if sz[a] >= 2 else None for a in range(m)][:1000],
           "class_mean_cosine_within_group": [float(mc[a, a]) if sz[a] >= 2 else None for a in range(m)][:1000],
           "bias_per_group": pt.b.tolist() if m <= 1000 else None,
           "centring": "class means centred by the unweighted mean of the class means",
           "note": f"per group of exchangeable classes (K = {p.K} > {EXPAND_MAX}: no K x K matrix formed)"}
    if np.unique(cnt).size > 1:
        mino = np.flatnonzero(cnt == cnt.min())
        majo = np.flatnonzero(cnt == cnt.max())

        def mean_pair_cos(C):
            num, den = 0.0, 0.0
            for i, a in enumerate(mino):
                pairs = sz[a] * (sz[a] - 1) / 2
                num += pairs * C[a, a]
                den += pairs
                for e in mino[i + 1:]:
                    num += sz[a] * sz[e] * C[e, a]
                    den += sz[a] * sz[e]
            return float(num / den) if den > 0 else None

        def mean_norm(nrm, idx):
            return float(np.sum(sz[idx] * nrm[idx]) / np.sum(sz[idx]))

        w_zero = bool(np.all(wn[mino] <= 1e-6 * max(wn.max(), 1e-300)))
        m_zero = bool(np.all(mn[mino] <= 1e-6 * max(mn.max(), 1e-300)))
        out["minority"] = {
            "minority_groups": mino.tolist()[:100], "majority_groups": majo.tolist()[:100],
            # cosines between (numerically) zero vectors do not exist: null
            "minority_classifier_cosine": None if w_zero else mean_pair_cos(wc),
            "minority_mean_cosine": None if m_zero else mean_pair_cos(mc),
            "classifier_norm_ratio": mean_norm(wn, mino) / mean_norm(wn, majo) if mean_norm(wn, majo) > 0 else None,
            "mean_norm_ratio": mean_norm(mn, mino) / mean_norm(mn, majo) if mean_norm(mn, majo) > 0 else None,
            "minority_classifiers_zero": bool(np.all(wn[mino] <= 1e-6 * max(wn.max(), 1e-300)))}
    return out


# ---------------------------------------------------------------------------------------------------
# Dual margin on one group's sum-zero eigenspace (docs/ufm_general.md, "Minority collapse threshold")
# ---------------------------------------------------------------------------------------------------

def collapse_margin(p: GeneralUFM, pt: GroupedPoint, layout, group: int, *, cert: Certificate | None = None) -> dict:
    """The margin of the grouped dual point of :func:`certificate_grouped` (unpinned) on the sum-zero
    eigenspace of ``group`` (m_a >= 2 classes).

    The dual point in class coordinates is Y = fl(t Gc) D^{1/2} / N (K x K, invariant); on the sum-zero vectors
    P_a of group a it acts as y_a Id with y_a = (own - same) sqrt(n_a) / N, own/same the representative's
    centred, scaled gradient entries (its own logit, another class of its group). Returned: ``y_upper`` >= |y_a|
    (the float subtraction and products bounded with 4u allowances), ``delta`` = lam - y_upper lowered by 4u lam
    (a proven lower bound of the margin lam - |y_a|; <= 0 means no margin), ``lower_bound`` = the certificate's
    proven dual value D(y) (valid for the unrestricted problem) and ``upper`` = P(pt) as computed. With the
    margin, every (Z, b) satisfies F(Z, b) - D(y) >= delta dev_a(Z) (see :func:`minority_deviation`)."""
    a = int(group)
    if layout.sizes[a] < 2:
        raise InputError(f"group {a} has {int(layout.sizes[a])} class: no sum-zero eigenspace")
    cert = certificate_grouped(p, pt, layout) if cert is None else cert
    N, lam, m = p.N, p.lam, layout.m
    out = {"group": a, "lam": lam, "lower_bound": cert.lower_bound, "upper": cert.upper, "method": cert.method,
           "scale_t": cert.details.get("scale_t"), "y_upper": None, "delta": None}
    if not (math.isfinite(cert.lower_bound) and cert.method != "none"):
        out["why"] = "no dual bound at this point: no margin"
        return out
    # the same float operations as certificate_grouped (so the same dual point t * Gc)
    sz = layout.sizes.astype(float)
    cnt = _group_counts(p, layout)
    wts = sz * cnt / N
    Mu = layout.mult
    _, Gs = p.loss.value_grad_slots(slot_logits(p, pt, layout), layout)
    rb = ((wts[None, :] * Mu[:m] * Gs[:m]).sum(axis=1) + wts * Gs[m]) / sz
    Gc = Gs.copy()
    if p.lb == 0.0:
        Gc[:m] -= rb[:, None]
        Gc[m] -= rb
    Gt = repair_slots(p, float(cert.details["scale_t"]) * Gc, layout)  # the certificate's dual point
    own, same = float(Gt[m, a]), float(Gt[a, a])
    u = UNIT_ROUNDOFF
    y_up = (abs(own - same) + 4 * u * (abs(own) + abs(same))) * math.sqrt(float(cnt[a])) * (1 + 4 * u) / N
    out.update(y_upper=y_up, delta=(lam - y_up) - 4 * u * lam, margin_ratio=y_up / lam)
    return out


def minority_deviation(X: np.ndarray, labels: np.ndarray, group: int) -> float:
    """dev_a(X) = (tr(P_a (X X^T)^{1/2}) + tr(P_a (X^T X)^{1/2})) / 2 for a K x K class-coordinate X (P_a: the
    projector on the sum-zero vectors of group a). At a balanced factorization (W W^T = sqrt(lh/lw) (X X^T)^{1/2},
    class means M with n_a M^T M = sqrt(lw/lh) (X^T X)^{1/2} on group a) it is
    (sqrt(lw/lh) sum_{c in a} ||w_c - wbar_a||^2 + sqrt(lh/lw) n_a sum_{c in a} ||mu_c - mubar_a||^2) / 2, zero
    iff the classifiers and the class means of the group are identical; for an invariant X it is (m_a - 1)|beta_a|."""
    idx = np.flatnonzero(np.asarray(labels) == group)
    # from the SVD X = U S V^T: tr(P (X X^T)^{1/2}) = sum_i s_i ||P u_i||^2 (no square roots of round-off
    # eigenvalues of X X^T, which would be ~1e-8 ||X|| at an exactly collapsed X)
    U, s, Vt = np.linalg.svd(X)
    Uc = U[idx] - U[idx].mean(axis=0)
    Vc = Vt[:, idx] - Vt[:, idx].mean(axis=1, keepdims=True)
    return 0.5 * (float(s @ np.sum(Uc * Uc, axis=0)) + float(s @ np.sum(Vc * Vc, axis=1)))


# ---------------------------------------------------------------------------------------------------
# Geometry certificate (docs/ufm_general.md, "Geometry certificate"): a proven enclosure of the unique
# minimiser from the dual point of the value certificate
# ---------------------------------------------------------------------------------------------------

#: Relative allowance (x ||center||_F x size) for the float evaluation of the enclosure's centre and of the
#: square roots |X| = (X^T X)^{1/2} (backward-stable SVD: errors ~ (size) u ||X||).
GEOMETRY_FLOAT_FACTOR = 16.0
#: The quadratic lower bound e^s - 1 - s >= s^2 / 3 holds for |s| <= 1; every entry's bound tau must be below
#: min(e^-1, e - 2) to keep |s| <= 1 (docs/ufm_general.md, "Geometry certificate").
TAU_MAX = 1.0 / 3.0
E_MINUS_1 = math.e - 1.0


def dual_columns(p: GeneralUFM, X: np.ndarray, b: np.ndarray, cert: Certificate) -> np.ndarray:
    """The dual columns V = t (G - r 1^T) (K x G; class c's column is the per-sample dual vector N A_i of its
    samples) of :func:`certificate` at (X, b): the same float operations, so the same dual point."""
    sq = np.sqrt(p.counts.astype(float))
    wts = p.counts / float(p.N)
    _, grads = p.loss.value_grad(X / sq + b[:, None], p.y)
    r = grads @ wts
    Gc = grads - r[:, None] if p.lb == 0.0 else grads
    return repair_columns(p, float(cert.details["scale_t"]) * Gc)


def _grouped_dual_slots(p: GeneralUFM, pt: "GroupedPoint", layout, cert: Certificate) -> np.ndarray:
    """t Gc in slot form ((m + 1) x m): the dual point of :func:`certificate_grouped` (same float operations)."""
    m = layout.m
    sz = layout.sizes.astype(float)
    wts = sz * _group_counts(p, layout) / p.N
    Mu = layout.mult
    _, Gs = p.loss.value_grad_slots(slot_logits(p, pt, layout), layout)
    rb = ((wts[None, :] * Mu[:m] * Gs[:m]).sum(axis=1) + wts * Gs[m]) / sz
    Gc = Gs.copy()
    if p.lb == 0.0:
        Gc[:m] -= rb[:, None]
        Gc[m] -= rb
    return repair_slots(p, float(cert.details["scale_t"]) * Gc, layout)


def dual_columns_grouped(p: GeneralUFM, pt: "GroupedPoint", layout, cert: Certificate) -> np.ndarray:
    """The K x K dual columns of the grouped certificate (the invariant dual point, expanded)."""
    Gt = _grouped_dual_slots(p, pt, layout, cert)
    lab = layout.labels
    V = Gt[np.ix_(lab, lab)]
    V[np.arange(layout.K), np.arange(layout.K)] = Gt[layout.m, lab]
    return V


def minimiser_enclosure(p: GeneralUFM, V: np.ndarray, lower: float, upper: float) -> dict:
    """A proven enclosure of every minimiser (docs/ufm_general.md, "Geometry certificate").

    ``V`` (K x G): the dual columns of a certificate whose proven lower bound is ``lower``; ``upper``: a
    feasible value (raised here by the float-evaluation allowance of a value). For every (X, b) with
    F(X, b) <= f_up, weak duality with the gap kept gives (1/N) sum_c n_c FY_c(u_c) <= f_up - D, FY the
    Fenchel-Young gap of the loss: w KL(pi_c || softmax(u_c)) for softmax losses (pi_c = v_c / w_c + q_c),
    (1/2)||u_c - t_c - v_c||^2 for the squared error. With a free bias (lb = 0) every minimiser has
    X* sqrt(n) = 0 and (softmax) 1^T X* = 0, so X* = (J) U* D^{1/2} P (P the projector orthogonal to sqrt(n)),
    unique by strict convexity in the centred logits, and ||X* - Xhat||_F <= radius with Xhat built from
    the dual point alone. Also a rank bound of X* (structural and by Weyl's inequality on the dual point).

    Returns ``ok`` (False with ``why`` when no enclosure is proven), ``center`` (Xhat, K x G), ``radius``
    (Frobenius, float allowance included), ``rank_bound``, ``gap``, and the numbers of the derivation."""
    from solvers.losses import CrossEntropy, SquaredError

    u = UNIT_ROUNDOFF
    K, G, N, lam = p.K, p.G, p.N, p.lam
    out: dict = {"ok": False, "center": None, "radius": None, "rank_bound": None}
    up = upper + ((2 * (K + G) + 16) * u + spectral_slack(max(K, G))) * abs(upper)
    gap = up - lower if is_finite_pair(up, lower) else math.inf
    out["gap"] = gap
    if p.lb != 0.0:
        out["why"] = "the geometry certificate is derived for a free bias (lambda_b = 0)"
        return out
    if not (math.isfinite(gap) and gap >= 0.0):
        out["why"] = f"no finite certified gap ({gap!r})"
        return out
    cnt = p.counts.astype(float)
    sq = np.sqrt(cnt)
    loss = p.loss
    if isinstance(loss, CrossEntropy):
        w = loss.w[p.y].astype(float)
        Pi = V / w + loss.targets(p.y)
        # relative float error of the computed pi entries (a division and an addition)
        Pi_lo = Pi - 4 * u * (np.abs(V) / w + loss.targets(p.y))
        if not np.all(Pi_lo > 0.0):
            out["why"] = "the dual point has a zero probability: no quadratic growth of the Fenchel-Young gap there"
            return out
        wp = w * Pi_lo
        tau = N * gap / (cnt * wp)  # per entry: pi_ci psi(delta_ci) <= N gap / (n_c w_c)
        tmax = float(np.max(tau))
        out.update(kind="softmax", max_tau=tmax, min_w_pi=float(np.min(wp)))
        if not tmax < TAU_MAX:
            out["why"] = (f"the certified gap {gap:.3g} is too large for the quadratic bound (max tau = {tmax:.3g} "
                          f">= 1/3)")
            return out
        # sum_c n_c w_c sum_i pi_ci delta_ci^2 / 3 <= N gap  (e^s - 1 - s >= s^2/3 for |s| <= 1)
        r2 = 3.0 * N * gap / float(np.min(wp))
        logP = np.log(Pi)
        C = logP - logP.mean(axis=0, keepdims=True)  # centred logits of the dual point
        ferr = np.sqrt(float(np.sum(cnt[None, :] * (8 * u / Pi_lo + 4 * u * np.abs(logP)) ** 2))) * 2.0
        Uc = C * sq
        structural = min(K - 1, G - 1)
        # gradient at the minimiser vs the dual columns: |p - pi| <= pi (e - 1)|delta|
        e_grad = math.sqrt(E_MINUS_1 ** 2 * float(np.max(wp / np.maximum(Pi_lo, 1e-300) * Pi)) * 3.0 * N * gap) / N
        out["uniqueness"] = ("strictly convex in the centred logits (Hessian diag(p) - p p^T positive definite on "
                             "1-perp), so every minimiser has the same centred logits C*; 1^T X* = 0 and X* sqrt(n) = 0 "
                             "(KKT), hence X* = C* D^{1/2} P and the centred bias J b* = C* n / N are unique")
    elif isinstance(loss, SquaredError):
        T = loss.T[:, p.y]
        Uc = (T + V) * sq
        r2 = 2.0 * N * gap
        ferr = 4 * u * float(np.linalg.norm(np.abs(T) * sq + np.abs(V) * sq))
        structural = min(K, G - 1)
        e_grad = math.sqrt(2.0 * N * gap) / N
        out.update(kind="squared")
        out["uniqueness"] = ("strongly convex in the logits, so every minimiser has the same logits U*; X* sqrt(n) = 0 "
                             "(KKT with a free bias), hence X* = U* D^{1/2} P and b* = U* n / N are unique")
    else:
        out["why"] = f"no geometry certificate for the loss {loss.name!r} (its Fenchel-Young gap is not derived)"
        return out
    v = sq / math.sqrt(N)
    Xh = Uc - np.outer(Uc @ v, v)  # right projector P = I - sqrt(n) sqrt(n)^T / N
    nX = float(np.linalg.norm(Xh))
    radius = math.sqrt(r2) + ferr + GEOMETRY_FLOAT_FACTOR * (K + G) * u * nX
    # rank: -grad_X L(X*) in lam d||X*||_*, so rank X* <= #{sigma_i(grad*) >= lam}; Weyl with
    # ||grad* - Y||_2 <= e_grad (Y = V D^{1/2} / N the dual point in class coordinates)
    if structural <= p.d:
        dual_rank = structural  # the structural bound already covers d: no SVD needed (cost at K = 1000: ~1 s)
    else:
        sy = np.linalg.svd(V * sq / N, compute_uv=False)
        sy_up = sy * (1.0 + spectral_slack(max(K, G))) + 4.0 * max(K, G) * u * float(np.linalg.norm(V * sq)) / N
        dual_rank = int(np.sum(sy_up >= lam - e_grad))
    out.update(ok=True, center=Xh, radius=radius, radius_relative=radius / nX if nX > 0 else math.inf,
               center_norm=nX, rank_bound=min(structural, dual_rank), rank_bound_structural=structural,
               rank_bound_dual=dual_rank, gradient_radius=e_grad, float_allowance=radius - math.sqrt(r2),
               why="proven enclosure: ||X* - Xhat||_F <= radius for every minimiser (and every point with "
                   "F <= f_up)")
    return out


def structural_uniqueness(p: GeneralUFM) -> dict:
    """Uniqueness of the minimiser without numbers (docs/ufm_general.md, "Geometry certificate", Steps 2-3): for a
    softmax loss or the squared error with a free bias, the convex problem has a minimiser (coercive in Z through the
    nuclear norm and in the centred bias through the loss), it is unique in (Z, centred bias) by strict convexity in
    the centred logits, and its rank is at most min(K - 1, G - 1) (softmax) or min(K, G - 1) (squared error); when
    that is <= d the factored problem's minimisers are its balanced factorizations (unique up to rotations)."""
    from solvers.losses import CrossEntropy, SquaredError

    if p.lb != 0.0:
        return {"ok": False, "why": "derived for a free bias (lambda_b = 0)"}
    if isinstance(p.loss, CrossEntropy):
        r = min(p.K - 1, p.G - 1)
    elif isinstance(p.loss, SquaredError):
        r = min(p.K, p.G - 1)
    else:
        return {"ok": False, "why": f"no uniqueness theorem for the loss {p.loss.name!r}"}
    if r > p.d:
        return {"ok": False, "rank_bound_structural": r,
                "why": f"the structural rank bound {r} exceeds d = {p.d} (the dual bound needs K x K matrices)"}
    return {"ok": True, "rank_bound_structural": r,
            "why": f"strictly convex in the centred logits, 1^T X* = 0 and X* sqrt(n) = 0 (KKT), rank(Z*) <= {r} <= d "
                   f"= {p.d}, so every factored minimiser is a balanced factorization of the unique Z*"}


def is_finite_pair(a, b) -> bool:
    return a is not None and b is not None and math.isfinite(a) and math.isfinite(b)


def _interval_cos(Gc: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cosine and norm intervals from a Gram centre Gc and entrywise half-widths H (proven |G - Gc| <= H)."""
    d = np.diag(Gc)
    hd = np.diag(H)
    dlo = np.clip(d - hd, 0.0, None)
    dhi = d + hd
    nlo, nhi = np.sqrt(dlo), np.sqrt(dhi)
    den_lo = np.outer(nlo, nlo)
    den_hi = np.outer(nhi, nhi)
    lo_num, hi_num = Gc - H, Gc + H
    with np.errstate(divide="ignore", invalid="ignore"):
        c1 = np.where(den_lo > 0, lo_num / np.where(den_lo > 0, den_lo, 1.0), -np.inf)
        c2 = lo_num / np.where(den_hi > 0, den_hi, 1.0)
        c3 = np.where(den_lo > 0, hi_num / np.where(den_lo > 0, den_lo, 1.0), np.inf)
        c4 = hi_num / np.where(den_hi > 0, den_hi, 1.0)
    lo = np.minimum(c1, c2)
    hi = np.maximum(c3, c4)
    lo = np.where(den_lo > 0, lo, -1.0)
    hi = np.where(den_lo > 0, hi, 1.0)
    lo = np.clip(lo * (1 + 4 * UNIT_ROUNDOFF) - 4 * UNIT_ROUNDOFF, -1.0, 1.0)
    hi = np.clip(hi * (1 + 4 * UNIT_ROUNDOFF) + 4 * UNIT_ROUNDOFF, -1.0, 1.0)
    n = np.arange(d.size)
    lo[n, n] = np.where(dlo > 0, 1.0, lo[n, n])
    hi[n, n] = np.where(dlo > 0, 1.0, hi[n, n])
    return lo, hi, nlo, nhi


def geometry_enclosure(p: GeneralUFM, enc: dict, *, max_cosines: int = 100) -> dict:
    """Proven intervals of the geometry of every minimiser from :func:`minimiser_enclosure`.

    At a minimiser (d >= rank) every factorization is balanced: W W^T = q |X*^T|, class-mean Gram
    D^{-1/2} |X*| D^{-1/2} / q (q = sqrt(lh/lw), |A| = (A^T A)^{1/2}). Araki-Yamagami (Commun. Math. Phys. 81,
    1981): || |A| - |B| ||_F <= sqrt(2) ||A - B||_F, so both square roots lie within E = sqrt(2) radius (+ float
    allowance) of those of the centre in Frobenius norm. Classifier Gram entries: half-width q E; centred class-mean
    Gram J D^{-1/2} |X| D^{-1/2} J / q: entry (i, j) within E a_i a_j / q, a_i = ||D^{-1/2} J e_i||. Cosines and
    norms by interval arithmetic; minority measures (imbalanced counts) as intervals."""
    Xh = enc["center"]
    K, G = Xh.shape
    q = math.sqrt(p.lh / p.lw)
    U, s, Vt = np.linalg.svd(Xh, full_matrices=False)
    absT = (U * s) @ U.T  # (X X^T)^{1/2}
    absX = (Vt.T * s) @ Vt  # (X^T X)^{1/2}
    E = math.sqrt(2.0) * enc["radius"] + GEOMETRY_FLOAT_FACTOR * max(K, G) * UNIT_ROUNDOFF * float(np.sum(s))
    cnt = p.counts.astype(float)
    dinv = 1.0 / np.sqrt(cnt)
    MG = absX * np.outer(dinv, dinv) / q
    MG = MG - MG.mean(axis=0, keepdims=True)  # J MG J without K^3 products
    MG = MG - MG.mean(axis=1, keepdims=True)
    # ||D^{-1/2} J e_i||^2 = sum_k (delta_ki - 1/G)^2 / n_k = (1 - 2/G) / n_i + sum_k 1/n_k / G^2
    a = np.sqrt(np.clip((1.0 - 2.0 / G) / cnt + float(np.sum(1.0 / cnt)) / G ** 2, 0.0, None))
    Hm = E * np.outer(a, a) / q
    WG = q * absT
    Hw = np.full((K, K), q * E)
    mlo, mhi, mnlo, mnhi = _interval_cos(MG, Hm)
    wlo, whi, wnlo, wnhi = _interval_cos(WG, Hw)
    mcen, wcen = 0.5 * (mlo + mhi), 0.5 * (wlo + whi)
    out = {"class_mean_cosines": mcen.tolist() if G <= max_cosines else None,
           "class_mean_cosines_halfwidth": float(np.max(0.5 * (mhi - mlo))),
           "classifier_cosines": wcen.tolist() if K <= max_cosines else None,
           "classifier_cosines_halfwidth": float(np.max(0.5 * (whi - wlo))),
           "class_mean_norms": (0.5 * (mnlo + mnhi)).tolist() if G <= 10 * max_cosines else None,
           "class_mean_norms_halfwidth": float(np.max(0.5 * (mnhi - mnlo))),
           "classifier_norms": (0.5 * (wnlo + wnhi)).tolist() if K <= 10 * max_cosines else None,
           "classifier_norms_halfwidth": float(np.max(0.5 * (wnhi - wnlo))),
           "gram_frobenius_radius": E,
           "centring": "class means centred by the unweighted mean of the class means",
           "how": "every minimiser: Gram matrices within sqrt(2) x radius of the centre's (Araki-Yamagami), "
                  "cosines and norms by interval arithmetic (docs/ufm_general.md, 'Geometry certificate')"}
    out["_intervals"] = {"mean_cos": (mlo, mhi), "cls_cos": (wlo, whi), "mean_norm": (mnlo, mnhi),
                         "cls_norm": (wnlo, wnhi)}
    if p.kind == "classification" and np.unique(p.counts).size > 1:
        mino = np.flatnonzero(p.counts == p.counts.min())
        majo = np.flatnonzero(p.counts == p.counts.max())
        iu = [(i, j) for ii, i in enumerate(mino) for j in mino[ii + 1:]]

        def pair_mean(lo, hi):
            if not iu:
                return None
            return [float(np.mean([lo[i, j] for i, j in iu])), float(np.mean([hi[i, j] for i, j in iu]))]

        def ratio(nlo, nhi):
            dlo = float(np.mean(nlo[majo]))
            if not dlo > 0:
                return None
            return [float(np.mean(nlo[mino])) / float(np.mean(nhi[majo])), float(np.mean(nhi[mino])) / dlo]

        out["minority"] = {"minority_classes": mino.tolist()[:100], "majority_classes": majo.tolist()[:100],
                           "minority_classifier_cosine": pair_mean(wlo, whi),
                           "minority_mean_cosine": pair_mean(mlo, mhi),
                           "classifier_norm_ratio": ratio(wnlo, wnhi), "mean_norm_ratio": ratio(mnlo, mnhi),
                           "meaning": "proven intervals [lo, hi] at every minimiser"}
    return out
