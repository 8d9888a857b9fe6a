"""The unconstrained-features model with any convex loss, any class sizes, and regression: the instance, its
values, the class-reduced factored solver, the dual certificate, the uniqueness conditions and the geometry at a
point, the closed forms (docs/ufm_general.md). The entry point is :func:`solvers.ufm_general.solve`.

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

#: Largest count of samples in one class (N stays far inside int64 and float64's exact integers).
MAX_COUNT = 10 ** 12
#: With grouping (docs/ufm_general.md, "Grouping exchangeable classes") the per-class work is O(K) per
#: evaluation; at most this many classes.
MAX_GROUPED_CLASSES = 100_000
FLOPS_PER_SECOND = 1e10
#: Work budgets of the solvers (docs/ufm_general.md, "Budgets"): objective evaluations per start. They are
#: counted, not timed, so the same input gives the same candidate, certificate and verdict at any machine load.
FACTORED_EVALS_PER_START = 40_000

#: Consecutive L-BFGS iterations without progress (value above rounding, or 1% of max |g|) after which a start of
#: the factored solver stops (``lbfgs.minimize`` ``stall_iters``, as solvers.ufm.LBFGS_STALL_ITERS): at gtol below
#: the gradient's rounding floor the runs otherwise spend their whole evaluation budget at a point that no longer
#: moves (the quick regression claim: 19 400 evaluations over five runs).
LBFGS_STALL_ITERS = 50
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
        if not isinstance(self.loss, Loss):  # None or 'ce' failed later with "has no attribute 'exchangeable_key'"
            raise InputError(f"loss must be a solvers.losses loss object (make_loss('ce', K), CrossEntropy, "
                             f"SquaredError, UserLoss), got {type(self.loss).__name__} {self.loss!r}"[:300])
        self.K = as_int("classes (K)", self.K, minimum=1)
        self.d = as_int("d (feature dimension)", self.d, minimum=1)
        _no_booleans(self.counts)
        c = np.asarray(self.counts)
        if c.ndim != 1 or c.size < 1:
            raise InputError("counts must be a non-empty list of positive integers")
        if c.dtype.kind not in "iuf":  # booleans, objects (integers beyond int64), strings: one at a time, named
            c = np.array([as_int(f"counts[{i}]", v, minimum=1, maximum=MAX_COUNT) for i, v in enumerate(c.tolist())],
                         dtype=np.int64)
        if not np.all(np.isfinite(c.astype(float))) or np.any(c != np.round(c)):
            raise InputError("counts must be integers")
        if np.any(c > MAX_COUNT):
            raise InputError(f"counts must all be <= {MAX_COUNT:.0e} (samples per class), got {c.max():.3g}")
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


def _no_booleans(counts) -> None:
    """A list such as [True, 2, 2] becomes [1, 2, 2] in np.asarray: refuse it first, naming the entry."""
    if isinstance(counts, (list, tuple)):
        for i, v in enumerate(counts):
            if isinstance(v, (bool, np.bool_)):
                raise InputError(f"counts[{i}] must be an integer, got {v!r}")


def classification(loss: Loss, counts, d, lw, lh, lb=0.0, meta=None) -> GeneralUFM:
    _no_booleans(counts)
    counts = np.asarray(counts)
    lk = getattr(loss, "K", None)
    if lk is not None and counts.ndim == 1 and counts.size != lk:
        raise InputError(f"counts: one count per class of the loss is needed ({lk} classes), got {counts.size}")
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
                                 deadline=t0 + safety, stall_iters=LBFGS_STALL_ITERS)
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
# Groups of exchangeable classes (the layout; the grouped solver is solvers/ufm_general_grouped.py)
# ---------------------------------------------------------------------------------------------------

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
