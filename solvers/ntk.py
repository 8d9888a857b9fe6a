"""Gradient flows of the block-structured NTK model (docs/ntk.md).

- :func:`feature_flow` integrates the feature model dW/dt = -s R H^T, db/dt = -s R 1,
  dH/dt = -s W^T R K (K the block feature kernel, held fixed) with scipy's DOP853 at tight
  tolerances and returns a :class:`Trajectory` (dense output) plus diagnostics.
- :func:`linear_residual_flow` integrates dR/dt = -s R K_gamma (output kernel held fixed).
- Rates are fitted on per-component windows chosen from the data (each component on its own
  window: one common window underestimates the fastest rate because that component reaches the
  integration noise floor first).
- Initialisations: small random (:func:`init_random`), exact E = 0 (:func:`init_e_zero`), and the
  lazy regime (:func:`init_lazy`: large W with W W^T = omega I and block features).

Everything returns data (arrays, floats, None for numbers that do not exist), never verdicts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from solvers.common import Solution
from theory import _work as budgets
from theory import ntk as th
from theory._validate import InstanceError, as_float, as_int

#: DOP853 tolerances (docs/ntk.md, "Numerics": rtol about 1e-11, atol about 1e-13). ``atol`` is further
#: multiplied by min(1, init_scale^2) for small initialisations so that states of size eps are
#: still resolved to ~1e-11 relative.
RTOL = 1e-11
ATOL = 1e-13

#: Rate windows: a decaying component is fitted while it lies between e^-0.25 and
#: e^-RATE_WINDOW_EFOLDS of its initial size (10 e-folds keeps it far above the ~1e-13 noise
#: floor of an O(1) state).
RATE_WINDOW_EFOLDS = 10.0
#: Points per fitting window (dense output is resampled on each window).
WINDOW_POINTS = 80
#: Escape window: start once ||M|| has grown by e^ESCAPE_SKIP (the decaying partner mode has then
#: shrunk by e^-2 ESCAPE_SKIP ~ 5e-5 relative), end at ESCAPE_END_FRACTION of the final ||M||
#: (nonlinear saturation is ~ fraction^2 = 1e-4 relative there).
ESCAPE_SKIP = 5.0
ESCAPE_END_FRACTION = 1e-2
#: Late within-class window: starts once the centred class-mean residual has fallen below
#: LATE_START_RESIDUAL of its initial size, spans at most LATE_EFOLDS e-folds of ||J W D||.
LATE_START_RESIDUAL = 1e-6
LATE_EFOLDS = 10.0
#: ``Solution.converged``: the integration reached T and the output-centred residual ||J_C R||_F fell
#: below this fraction of its initial value (the all-ones output direction is excluded: slow mode).
CONVERGED_CENTRED_RESIDUAL = 1e-6
#: The late window ends where ||J W D|| reaches this multiple of max|H| (rounding noise of D = H - means
#: is ~1e-15 max|H|; measured).
LATE_NOISE_FLOOR = 1e-12
#: The late window needs ||J W D|| still above this fraction of its peak when it starts (otherwise the
#: within-class phase ended before the class means were fitted and the fit would see coupling or noise).
LATE_MIN_REMAINING = 1e-4
#: A fitted rate needs a window of at least this many e-folds (otherwise: None).
MIN_WINDOW_EFOLDS = 1.5

# ---- input ranges and work budgets (issue "Faults and limits") ------------------------------------
#: Accepted initialisation scales. The flow evaluates eps^2 (atol, the invariant, the scatter) and
#: eps^4 (the loss of a large start), and the lazy construction cancels terms of size L^2 to a
#: relative 1e-16 (its initial outputs are O(1) only while 1e-16 L^2 << 1): [1e-100, 1e6] keeps all of
#: that inside float64 with room to spare.
INIT_SCALE_MIN = 1e-100
INIT_SCALE_MAX = 1e6
#: The lazy construction's initial outputs W H = O(1) are differences of O(L^2) products: rounding
#: leaves ~1e-16 L^2 in the residual, which the rate windows (down to e^-12 of R(0)) must resolve.
#: Measured rate errors: 2e-5 at L = 3e3 (inside the 1e-4 tolerance), 1.5e-4 at 1e4, 6e-2 at 1e5
#: (false REFUTED); the accepted range stops at 1e3.
LAZY_SCALE_MAX = 1e3
#: Sizes: N = C m samples, n features. Post-processing forms (grid x n x n) and (grid x n x N)
#: arrays in chunks and the spectrum check an N x N eigendecomposition; these limits keep every
#: accepted instance under ~2 minutes and ~2.5 GB on 2 cores.
MAX_SAMPLES = 1000
MAX_FEATURE_DIM = 256
#: State size C n + C + n N of the ODE (floats).
MAX_STATE = 20_000
#: Stored dense output (DOP853 keeps 8 state vectors per accepted step): refuse before and stop
#: during a run whose interpolants would exceed this many bytes (the rest of the process -- python,
#: numpy, scipy, the measurements -- stays under ~0.8 GB for the accepted sizes).
MAX_DENSE_BYTES = 1.2e9
#: Work model for the estimate before a run (measured on this machine, 2 shared cores: 20-40 us per
#: right-hand side at the default sizes, 15 evaluations per accepted DOP853 step with dense output,
#: steps ~ T lambda_max / 5 at the stability limit; the estimate rounds all of these up).
EVALS_PER_STEP = 16
EVAL_BASE_SECONDS = 4e-5
FLOP_SECONDS = 1.5e-9
STABILITY_STEP = 4.0
BASE_STEPS = 300
#: Bytes per accepted step beyond the 8 stored state vectors (python objects of the interpolant).
STEP_OVERHEAD_BYTES = 600


# --------------------------------------------------------------------------------------
# State and right-hand side
# --------------------------------------------------------------------------------------

@dataclass
class State:
    W: np.ndarray  # C x n
    b: np.ndarray  # C
    H: np.ndarray  # n x N

    def pack(self) -> np.ndarray:
        return np.concatenate([self.W.ravel(), self.b, self.H.ravel()])

    @staticmethod
    def unpack(y: np.ndarray, C: int, n: int, N: int) -> "State":
        W = y[: C * n].reshape(C, n)
        b = y[C * n: C * n + C]
        H = y[C * n + C:].reshape(n, N)
        return State(W, b, H)


def unpack_batch(Ys: np.ndarray, C: int, n: int, N: int):
    """Columns of ``Ys`` are packed states; returns W (T, C, n), b (T, C), H (T, n, N)."""
    Ys = np.asarray(Ys).T
    W = Ys[:, : C * n].reshape(-1, C, n)
    b = Ys[:, C * n: C * n + C]
    H = Ys[:, C * n + C:].reshape(-1, n, N)
    return W, b, H


def batch_decompose(H: np.ndarray, C: int, m: int):
    """Batched :func:`theory.ntk.decompose`: h_bar (T, n), M (T, n, C), D (T, n, N)."""
    T, n, N = H.shape
    mu = H.reshape(T, n, C, m).mean(axis=3)
    hbar = mu.mean(axis=2)
    M = mu - hbar[:, :, None]
    D = H - np.repeat(mu, m, axis=2)
    return hbar, M, D


def batch_residual_components(R: np.ndarray, C: int, m: int) -> dict:
    """Batched :func:`residual_components` for R of shape (T, rows, N)."""
    T, rows, N = R.shape
    cls = R.reshape(T, rows, C, m).mean(axis=3)
    glob = cls.mean(axis=2)
    return {"global": math.sqrt(N) * np.linalg.norm(glob, axis=1),
            "class": math.sqrt(m) * np.linalg.norm((cls - glob[:, :, None]).reshape(T, -1), axis=1),
            "within": np.linalg.norm((R - np.repeat(cls, m, axis=2)).reshape(T, -1), axis=1)}


def targets(C: int, m: int) -> np.ndarray:
    """Y = I_C (x) 1_m^T (C x N), samples ordered class by class."""
    return np.repeat(np.eye(C), m, axis=1)


def apply_block_kernel(R: np.ndarray, C: int, m: int, consts) -> np.ndarray:
    """R K for the block kernel, in O(rows x N): (kd-kc) R + (kc-kn) class sums + kn total sums."""
    kd, kc, kn = consts
    rows = R.shape[0]
    cls = R.reshape(rows, C, m).sum(axis=2)
    tot = cls.sum(axis=1)
    return (kd - kc) * R + (kc - kn) * np.repeat(cls, m, axis=1) + kn * tot[:, None]


def residual(st: State, Y: np.ndarray) -> np.ndarray:
    return st.W @ st.H + st.b[:, None] - Y


def make_rhs(inst: th.NTKInstance, n: int):
    """Vectorised right-hand side of the feature model."""
    C, m, N, s, kappa = inst.classes, inst.per_class, inst.N, inst.s, inst.kappa
    Y = targets(C, m)
    iw, ib = C * n, C * n + C

    def rhs(_t, y):
        W = y[:iw].reshape(C, n)
        b = y[iw:ib]
        H = y[ib:].reshape(n, N)
        R = W @ H + b[:, None] - Y
        dW = -s * (R @ H.T)
        db = -s * R.sum(axis=1)
        dH = -s * (W.T @ apply_block_kernel(R, C, m, kappa))
        return np.concatenate([dW.ravel(), db, dH.ravel()])

    return rhs


def rhs_state(inst: th.NTKInstance, st: State) -> State:
    """The flow's time derivative at a state (as a State)."""
    n = st.W.shape[1]
    y = make_rhs(inst, n)(0.0, st.pack())
    return State.unpack(y, inst.classes, n, inst.N)


# --------------------------------------------------------------------------------------
# Initialisations
# --------------------------------------------------------------------------------------

def check_init_scale(eps) -> float:
    """init_scale as a float inside the float64-safe range [INIT_SCALE_MIN, INIT_SCALE_MAX]."""
    eps = as_float("init_scale", eps, positive=True)
    if not INIT_SCALE_MIN <= eps <= INIT_SCALE_MAX:
        raise InstanceError(f"init_scale must be in [{INIT_SCALE_MIN:g}, {INIT_SCALE_MAX:g}] (float64-safe range: the "
                            f"flow evaluates init_scale^2 and init_scale^4), got {eps:g}")
    return eps


def check_sizes(C: int, m: int, n: int) -> None:
    """Refuse instances whose arrays or post-processing exceed the budget (before anything is allocated)."""
    N = C * m
    if N > MAX_SAMPLES:
        raise InstanceError(f"N = C m = {C} x {m} = {N} samples exceeds the limit {MAX_SAMPLES} (an N x N kernel "
                            f"needs {8 * N * N / 1e9:.3g} GB and O(N^3) work)")
    if n > MAX_FEATURE_DIM:
        raise InstanceError(f"n (feature dimension) = {n} exceeds the limit {MAX_FEATURE_DIM} (the invariant is n x n "
                            f"at every grid time)")
    size = C * n + C + n * N
    if size > MAX_STATE:
        raise InstanceError(f"ODE state size C n + C + n N = {size} exceeds the limit {MAX_STATE} "
                            f"(C = {C}, m = {m}, n = {n})")


def _check_flow_args(n, eps, seed):
    n = as_int("n (feature dimension)", n, minimum=1)
    eps = check_init_scale(eps)
    seed = as_int("seed", seed, minimum=0)
    return n, eps, seed


def init_random(inst: th.NTKInstance, n: int, eps: float, seed: int = 0) -> State:
    """W, H with i.i.d. N(0, eps^2) entries, b = 0 (small initialisation when eps << 1)."""
    n, eps, seed = _check_flow_args(n, eps, seed)
    rng = np.random.default_rng(seed)
    W = eps * rng.standard_normal((inst.classes, n))
    H = eps * rng.standard_normal((n, inst.N))
    return State(W, np.zeros(inst.classes), H)


def _orthonormal_rows(rng, rows: int, cols: int) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.standard_normal((cols, rows)))
    return Q[:, :rows].T


def sqrtm_psd(A: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh((A + A.T) / 2)
    return (V * np.sqrt(np.clip(w, 0, None))) @ V.T


def init_e_zero(inst: th.NTKInstance, n: int, eps: float, seed: int = 0, mean_weight: float = 0.0) -> State:
    """An initialisation with E = W^T W - H K^{-1} H^T = 0 exactly (to rounding).

    W has i.i.d. N(0, eps^2) entries; H = W^T Omega K^{1/2} with Omega (C x N) having orthonormal
    rows, so H K^{-1} H^T = W^T Omega Omega^T W = W^T W. ``mean_weight`` in [0, 1) mixes the
    all-ones direction into Omega's first row (a larger global mean h_bar, hence M^T h_bar != 0).
    """
    n, eps, seed = _check_flow_args(n, eps, seed)
    mw = as_float("mean_weight", mean_weight, nonnegative=True)
    if mw >= 1:
        raise InstanceError(f"mean_weight must be < 1, got {mw}")
    rng = np.random.default_rng(seed)
    C, N = inst.classes, inst.N
    W = eps * rng.standard_normal((C, n))
    G = rng.standard_normal((N, C))
    if mw > 0:
        ones = np.ones(N) / math.sqrt(N)
        G[:, 0] = G[:, 0] - ones * (ones @ G[:, 0])
        G[:, 0] = mw * ones * np.linalg.norm(G[:, 0]) / math.sqrt(1 - mw * mw) + G[:, 0]
    Q, _ = np.linalg.qr(G)
    Omega = Q[:, :C].T
    K = th.block_kernel(inst.classes, inst.per_class, inst.kappa)
    H = W.T @ Omega @ sqrtm_psd(K)
    return State(W, np.zeros(C), H)


@dataclass
class LazySetup:
    state: State
    omega: float
    a: tuple[float, float, float]
    gamma: tuple[float, float, float]


def init_lazy(inst: th.NTKInstance, n: int, scale: float, seed: int = 0, a=None,
              output_scale: float = 1.0) -> LazySetup:
    """Lazy regime: large features H = L Phi with Phi^T Phi block (a_d, a_c, a_n), and
    W = L (sqrt(1 - delta^2) Q_perp + delta Q_par) with orthonormal rows, so W W^T = L^2 I exactly.
    Q_perp is orthogonal to the features, Q_par lies in their span, delta = output_scale/L^2 keeps
    the initial outputs O(output_scale). The output kernel at t = 0 is then block with
    gamma = L^2 kappa + L^2 a + 1 (docs/ntk.md: gamma = omega kappa + a + 1). Needs n >= N + C.
    """
    n = as_int("n (feature dimension)", n, minimum=1)
    L = check_init_scale(scale)
    if L > LAZY_SCALE_MAX:
        raise InstanceError(f"init_scale L of the lazy construction must be in [{INIT_SCALE_MIN:g}, {LAZY_SCALE_MAX:g}] "
                            f"(float64-safe range: its O(1) outputs are differences of O(L^2) products, rounding "
                            f"~1e-16 L^2), got {L:g}")
    seed = as_int("seed", seed, minimum=0)
    C, m, N = inst.classes, inst.per_class, inst.N
    if n < N + C:
        raise InstanceError(f"n (feature dimension) must be >= N + C = {N + C} for the lazy construction, got {n}")
    a = tuple(inst.kappa) if a is None else tuple(as_float(f"a[{i}]", x) for i, x in enumerate(a))
    th.check_positive_definite("a", C, m, a)
    rng = np.random.default_rng(seed)
    Ga = th.block_kernel(C, m, a)
    U = _orthonormal_rows(rng, n, n).T  # n x n orthogonal
    Upar, Uperp = U[:, :N], U[:, N:]
    Phi = Upar @ sqrtm_psd(Ga)
    Qpar = _orthonormal_rows(rng, C, N) @ Upar.T
    Qperp = _orthonormal_rows(rng, C, n - N) @ Uperp.T
    delta = min(0.5, output_scale / (L * L))
    W = L * (math.sqrt(1 - delta * delta) * Qperp + delta * Qpar)
    H = L * Phi
    gamma = th.output_kernel_constants(inst.kappa, L * L, tuple(L * L * x for x in a))
    return LazySetup(State(W, np.zeros(C), H), L * L, tuple(L * L * x for x in a), gamma)


def output_kernel_matrix(st: State, inst: th.NTKInstance) -> np.ndarray:
    """The (C N) x (C N) output NTK of the feature model at a state:
    Theta[(p,i),(q,j)] = (h_i.h_j + 1) delta_pq + (W W^T)_pq K_ij."""
    K = th.block_kernel(inst.classes, inst.per_class, inst.kappa)
    C = inst.classes
    return np.kron(np.eye(C), st.H.T @ st.H + 1.0) + np.kron(st.W @ st.W.T, K)


# --------------------------------------------------------------------------------------
# Integration
# --------------------------------------------------------------------------------------

class _ConstantSolution:
    """Dense output of a run that made no step: the initial state at every time."""

    def __init__(self, y0: np.ndarray):
        self.y0 = np.array(y0, dtype=float)

    def __call__(self, t):
        t = np.asarray(t, dtype=float)
        if t.ndim == 0:
            return self.y0.copy()
        return np.repeat(self.y0[:, None], t.size, axis=1)


@dataclass
class Integration:
    """One DOP853 integration on [0, T] under a work budget (DOP853 steps), a memory budget and a
    wall-clock safety net (data only).

    ``t_reached`` is where it stopped; ``stopped`` is None when it reached T, else the reason
    ("work budget reached at t = ... (M DOP853 steps)", "memory budget reached at t = ...", "stopped by
    the wall-clock safety limit (N s) at t = ...; the work budget (M steps) was not reached",
    "integration failed at t = ...").
    """

    sol: object
    T_requested: float
    t_reached: float
    steps: int
    nfev: int
    stopped: str | None
    seconds: float
    stored_bytes: int

    @property
    def success(self) -> bool:
        return self.stopped is None


def integrate(fun, T: float, y0: np.ndarray, *, rtol: float, atol: float, deadline: float | None = None,
              max_bytes: float = MAX_DENSE_BYTES, max_steps: int | None = None,
              safety_s: float | None = None) -> Integration:
    """DOP853 step by step with dense output. The budgets that stop it are counted in work and so give
    the same result at any machine load: ``max_steps`` accepted steps (the work budget) and the stored
    interpolants passing ``max_bytes`` (a step count too). The wall clock is only a safety net:
    ``safety_s`` seconds after the call, or the ``time.perf_counter()`` value ``deadline``, whichever
    comes first (each reported, never silent; a run the safety net stops says so)."""
    from scipy.integrate import DOP853, OdeSolution  # here: scipy.integrate costs ~0.6 s to import

    t0 = time.perf_counter()
    limit = math.inf if deadline is None else float(deadline)
    if safety_s is not None:
        limit = min(limit, t0 + float(safety_s))
    y0 = np.asarray(y0, dtype=float)
    per_step = 8 * 8 * y0.size + STEP_OVERHEAD_BYTES
    interps, ts = [], [0.0]
    stopped = None
    with np.errstate(over="ignore", invalid="ignore"):  # rejected trial steps may overflow; DOP853 retries
        solver = DOP853(fun, 0.0, y0, T, rtol=rtol, atol=atol)
        while solver.status == "running":
            if max_steps is not None and len(interps) >= max_steps:
                stopped = f"work budget reached at t = {solver.t:.6g} of T = {T:.6g} ({max_steps} DOP853 steps)"
                break
            if time.perf_counter() > limit:
                work = "" if max_steps is None else f"; the work budget ({max_steps} DOP853 steps) was not reached"
                stopped = (f"stopped by the wall-clock safety limit ({limit - t0:.3g} s) at t = {solver.t:.6g} "
                           f"of T = {T:.6g} after {len(interps)} steps{work}")
                break
            if (len(interps) + 1) * per_step > max_bytes:
                stopped = (f"memory budget reached at t = {solver.t:.6g} of T = {T:.6g} "
                           f"({len(interps)} steps, {len(interps) * per_step / 1e9:.2g} GB of dense output)")
                break
            msg = solver.step()
            if solver.status == "failed":
                stopped = f"integration failed at t = {solver.t:.6g} of T = {T:.6g}: {msg}"
                break
            interps.append(solver.dense_output())
            ts.append(solver.t)
    sol = OdeSolution(np.array(ts), interps) if interps else _ConstantSolution(y0)
    return Integration(sol, float(T), float(ts[-1]), len(interps), int(solver.nfev), stopped,
                       time.perf_counter() - t0, len(interps) * per_step)


def steps_for_seconds(work: dict, seconds: float) -> int:
    """The work budget (DOP853 steps) that ``seconds`` buys at the work model's rate of ``work`` (an
    :func:`estimate_flow_work` / :func:`estimate_linear_work` result): a count, the same at any load."""
    per_step = work["seconds"] / work["steps"]
    return max(1, int(math.ceil(float(seconds) / per_step)))


def _eval_seconds(C: int, n: int, N: int) -> float:
    """Seconds per right-hand side of the feature model (work model constants above)."""
    return EVAL_BASE_SECONDS + FLOP_SECONDS * 8.0 * C * n * N


def estimate_flow_work(inst: th.NTKInstance, state0: State, T: float) -> dict:
    """Estimated DOP853 work of the feature model from ``state0`` on [0, T], before running it.

    lambda_max: a bound on the stiffness along the run, s (N + ||H||_F^2 + lambda_max(K) ||W||_F^2 +
    sqrt(lambda_max(K)) ||R||_F) (output NTK plus the residual term of the Jacobian), with the norms at
    t = 0 or at the small-initialisation limit, whichever is larger. Explicit DOP853 needs about
    T lambda_max / 5 steps at its stability limit (more in transients: BASE_STEPS).
    """
    C, m, N, s = inst.classes, inst.per_class, inst.N, inst.s
    n = state0.W.shape[1]
    l0, lc, lg = inst.eigenvalues
    kmax = max(l0, lc, lg)
    w2 = max(float(np.sum(state0.W ** 2)), math.sqrt(m / lc) * (C - 1))
    h2 = max(float(np.sum(state0.H ** 2)), math.sqrt(lc / m) * (C - 1) * m)
    r = float(np.linalg.norm(residual(state0, targets(C, m))))
    lam = s * (N + h2 + kmax * w2 + math.sqrt(kmax) * r)
    return _work(T, lam, C * n + C + n * N, _eval_seconds(C, n, N))


def estimate_flow_work_from_scale(inst: th.NTKInstance, n: int, scale: float, init: str, T: float) -> dict:
    """The same estimate before the initial state exists (nothing allocated): expected squared norms of
    the initialisations -- random: ||W||^2 = eps^2 C n, ||H||^2 = eps^2 n N; E = 0: ||H||^2 <= lambda_max(K)
    ||W||^2; lazy: ||W||^2 = L^2 C, ||H||^2 = L^2 N kappa_d -- and ||R|| <= ||W|| ||H|| + sqrt(N)."""
    C, m, N, s = inst.classes, inst.per_class, inst.N, inst.s
    l0, lc, lg = inst.eigenvalues
    kmax = max(l0, lc, lg)
    e2 = scale * scale
    if init == "lazy":
        w2, h2 = e2 * C, e2 * N * abs(inst.kappa[0])
    elif init == "e-zero":
        w2 = e2 * C * n
        h2 = kmax * w2
    else:
        w2, h2 = e2 * C * n, e2 * n * N
    w2 = max(w2, math.sqrt(m / lc) * (C - 1))
    h2 = max(h2, math.sqrt(lc / m) * (C - 1) * m)
    r = math.sqrt(w2 * h2) + math.sqrt(N)
    lam = s * (N + h2 + kmax * w2 + math.sqrt(kmax) * r)
    return _work(T, lam, C * n + C + n * N, _eval_seconds(C, n, N))


def _work(T: float, lam: float, size: int, eval_seconds: float) -> dict:
    steps = BASE_STEPS + T * lam / STABILITY_STEP
    return {"lambda_max": lam, "steps": steps, "seconds": steps * EVALS_PER_STEP * eval_seconds,
            "bytes": steps * (64.0 * size + STEP_OVERHEAD_BYTES), "state_size": size}


def work_flops(work: dict) -> float:
    """The work of an :func:`estimate_flow_work` / :func:`estimate_linear_work` estimate in flop-equivalents (its
    seconds at the work model's fixed rate 1 / FLOP_SECONDS: a count from the sizes, never a measured time)."""
    return float(work["seconds"]) / FLOP_SECONDS


def check_work(what: str, work: dict, max_seconds: float, max_bytes: float = MAX_DENSE_BYTES) -> None:
    """Refuse (InstanceError with the estimate and the limit) a run estimated beyond the budget: work in
    flop-equivalents above what ``max_seconds`` buys at the work model's fixed rate (the same on every machine), or
    dense output above ``max_bytes``."""
    flops, limit = work_flops(work), float(max_seconds) / FLOP_SECONDS
    if not (flops <= limit and work["bytes"] <= max_bytes):
        raise InstanceError(
            f"{what}: estimated ~{work['steps']:.3g} DOP853 steps (stiffness ~{work['lambda_max']:.3g}) x "
            f"{EVALS_PER_STEP} right-hand sides exceed the budget in work or memory: " + budgets.work_text(
                flops, limit, "flop-equivalents", seconds_per_unit=FLOP_SECONDS,
                limit_note=f"= --max-seconds {max_seconds:g} at the work model's fixed {1 / FLOP_SECONDS:.3g} flop/s")
            + f" and ~{work['bytes'] / 1e9:.3g} GB of dense output (limit {max_bytes / 1e9:g} GB); reduce --time, "
            "--init-scale or the sizes, or raise --max-seconds")


@dataclass
class Trajectory:
    inst: th.NTKInstance
    n: int
    T: float  # the end of the integrated interval (T_requested unless a budget stopped the run)
    sol: object  # scipy OdeSolution (dense output)
    t_grid: np.ndarray
    states: list  # State at t_grid
    nfev: int
    success: bool
    message: str
    seconds: float
    T_requested: float | None = None
    stopped: str | None = None
    steps: int = 0

    def at(self, t) -> State:
        return State.unpack(self.sol(t), self.inst.classes, self.n, self.inst.N)

    def states_at(self, ts: np.ndarray) -> list:
        Y = self.sol(np.asarray(ts))
        return [State.unpack(Y[:, i], self.inst.classes, self.n, self.inst.N) for i in range(Y.shape[1])]

    def batch(self, ts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(W, b, H) stacked over times: shapes (T, C, n), (T, C), (T, n, N)."""
        return unpack_batch(self.sol(np.asarray(ts, dtype=float)), self.inst.classes, self.n, self.inst.N)

    def chunk(self) -> int:
        """Times per batch so that one batch of states (and a few arrays like it) stays ~16 MB."""
        size = self.inst.classes * self.n + self.inst.classes + self.n * self.inst.N + self.n * self.n
        return max(1, int(2e6 // max(size, 1)))

    def map_batches(self, ts, fn) -> np.ndarray | tuple:
        """Apply ``fn(W, b, H)`` (returning an array or a tuple of arrays over the batch's times) to the
        states at ``ts`` in chunks, concatenating the results (bounded memory for long time lists)."""
        ts = np.asarray(ts, dtype=float)
        k = self.chunk()
        parts = [fn(*self.batch(ts[i:i + k])) for i in range(0, ts.size, k)]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate([p[j] for p in parts]) for j in range(len(parts[0])))
        return np.concatenate(parts)

    @property
    def final(self) -> State:
        return self.states[-1]


def feature_flow(inst: th.NTKInstance, state0: State, T: float, *, n_grid: int = 401,
                 rtol: float = RTOL, atol: float | None = None, deadline: float | None = None,
                 max_bytes: float = MAX_DENSE_BYTES, max_steps: int | None = None,
                 safety_s: float | None = None) -> Trajectory:
    """Integrate the feature model from ``state0`` on [0, T] (DOP853, dense output) under the budgets
    of :func:`integrate` (work: ``max_steps``, ``max_bytes``; wall-clock safety net: ``safety_s`` /
    ``deadline``): a stopped run returns the part it integrated, with ``stopped`` saying where and why."""
    T = as_float("time", T, nonnegative=True)
    if T <= 0:
        raise InstanceError(f"time must be > 0, got {T}")
    n = state0.W.shape[1]
    check_sizes(inst.classes, inst.per_class, n)
    if atol is None:
        # W and H: scaled with the init size (states of size eps resolved to ~1e-11 relative); b starts at 0
        # and moves to O(1), so its absolute tolerance is ATOL itself (scaling it too stalls DOP853 at t = 0
        # with "step size less than spacing" for eps = 1e-100).
        size = max(float(np.max(np.abs(state0.W))), float(np.max(np.abs(state0.H))), 1e-300)
        C = inst.classes
        atol = np.full(C * n + C + n * inst.N, ATOL * min(1.0, size * size))
        atol[C * n: C * n + C] = ATOL
    run = integrate(make_rhs(inst, n), T, state0.pack(), rtol=rtol, atol=atol, deadline=deadline, max_bytes=max_bytes,
                    max_steps=max_steps, safety_s=safety_s)
    grid = np.linspace(0.0, run.t_reached, n_grid)
    Ys = run.sol(grid)
    Ys[:, 0] = state0.pack()
    states = [State.unpack(Ys[:, i].copy(), inst.classes, n, inst.N) for i in range(n_grid)]
    return Trajectory(inst, n, run.t_reached, run.sol, grid, states, run.nfev, run.success,
                      run.stopped or "reached T", run.seconds, T, run.stopped, run.steps)


# --------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------

def residual_components(R: np.ndarray, C: int, m: int) -> dict:
    """Frobenius norms of the global-mean, centred class-mean and within-class parts of R (rows x N)."""
    rows = R.shape[0]
    cls = R.reshape(rows, C, m).mean(axis=2)  # rows x C
    glob = cls.mean(axis=1)
    n_g = math.sqrt(C * m) * float(np.linalg.norm(glob))
    n_c = math.sqrt(m) * float(np.linalg.norm(cls - glob[:, None]))
    n_0 = float(np.linalg.norm(R - np.repeat(cls, m, axis=1)))
    return {"global": n_g, "class": n_c, "within": n_0}


def fit_log_slope(t: np.ndarray, y: np.ndarray) -> dict | None:
    """Least-squares slope of log y against t. Returns slope, the max log-residual, the e-folds spanned."""
    t = np.asarray(t, float)
    y = np.asarray(y, float)
    ok = y > 0
    t, y = t[ok], y[ok]
    if t.size < 3:
        return None
    ly = np.log(y)
    A = np.vstack([t, np.ones_like(t)]).T
    coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
    resid = ly - A @ coef
    return {"slope": float(coef[0]), "max_log_residual": float(np.max(np.abs(resid))),
            "efolds": float(abs(ly[-1] - ly[0])), "t_start": float(t[0]), "t_end": float(t[-1]),
            "points": int(t.size)}


def _decay_window(times: np.ndarray, values: np.ndarray, efolds: float) -> tuple[float, float] | None:
    """[t_a, t_b]: from where the component has decayed by e^-0.25 to where it first drops below
    e^-efolds of its initial value (or the last time)."""
    v0 = values[0]
    if not v0 > 0:
        return None
    rel = values / v0
    start = np.flatnonzero(rel <= math.exp(-0.25))
    if start.size == 0:
        return None
    below = np.flatnonzero(rel <= math.exp(-efolds))
    t_a = times[start[0]]
    t_b = times[below[0]] if below.size else times[-1]
    if t_b <= t_a:
        return None
    return float(t_a), float(t_b)


def fit_decay_rates(sample, T: float, names=("global", "class", "within"), *, efolds: float = RATE_WINDOW_EFOLDS,
                    scan_points: int = 4001) -> dict:
    """Fit the decay rate of each named component on its own window.

    ``sample(ts)`` returns a dict name -> array of component norms at the times ``ts``. Each
    component is scanned on a fine grid to find its window (data-driven), then resampled on
    WINDOW_POINTS points inside that window. A component that is (numerically) zero at t = 0, or
    whose window spans fewer than MIN_WINDOW_EFOLDS e-folds, gets rate None with the reason.
    """
    scan_t = np.linspace(0.0, T, scan_points)
    scan = sample(scan_t)
    out = {}
    for name in names:
        vals = np.asarray(scan[name])
        scale = max(float(np.max(np.abs(vals))), 1e-300)
        if vals[0] <= 1e-12 * max(scale, max(float(np.max(np.asarray(scan[k]))) for k in names)):
            out[name] = {"rate": None, "reason": "component is zero at t = 0"}
            continue
        # zoom in while the component decays within a few scan steps (fast components of long runs)
        grid, gv = scan_t, vals
        for _ in range(6):
            gone = np.flatnonzero(gv <= gv[0] * math.exp(-efolds))
            if gone.size == 0 or gone[0] >= 40:
                break
            grid = np.linspace(0.0, grid[min(gone[0] + 1, grid.size - 1)], scan_points)
            gv = np.asarray(sample(grid)[name])
        win = _decay_window(grid, gv, efolds)
        if win is None:
            out[name] = {"rate": None, "reason": "component does not decay on [0, T]"}
            continue
        ts = np.linspace(win[0], win[1], WINDOW_POINTS)
        fit = fit_log_slope(ts, np.asarray(sample(ts)[name]))
        if fit is None or fit["efolds"] < MIN_WINDOW_EFOLDS:
            out[name] = {"rate": None, "reason": f"window spans fewer than {MIN_WINDOW_EFOLDS} e-folds", **(fit or {})}
            continue
        out[name] = {"rate": -fit["slope"], **fit}
    return out


@dataclass
class LinearResidualResult:
    T: float
    rates: dict
    predicted: dict
    sol: object
    seconds: float
    stopped: str | None = None
    T_requested: float | None = None
    steps: int = 0


def linear_residual_T(gamma_inst: th.NTKInstance) -> float:
    """Default horizon of the linear residual flow: (RATE_WINDOW_EFOLDS + 2)/(s lambda_0)."""
    return (RATE_WINDOW_EFOLDS + 2.0) / min(th.residual_rates(gamma_inst).values())


def estimate_linear_work(gamma_inst: th.NTKInstance, T: float | None = None) -> dict:
    """Estimated DOP853 work of dR/dt = -s R K_gamma: stiffness s lambda_max(K_gamma), and the
    default horizon makes the step count ~ 12 lambda_max/lambda_min (the kernel's condition number)."""
    T = linear_residual_T(gamma_inst) if T is None else T
    C, N = gamma_inst.classes, gamma_inst.N
    lam = gamma_inst.s * max(gamma_inst.eigenvalues)
    return _work(T, lam, C * N, EVAL_BASE_SECONDS + FLOP_SECONDS * 6.0 * C * N)


def linear_residual_flow(gamma_inst: th.NTKInstance, R0: np.ndarray, T: float | None = None, *,
                         deadline: float | None = None, max_bytes: float = MAX_DENSE_BYTES,
                         max_steps: int | None = None, safety_s: float | None = None) -> LinearResidualResult:
    """Integrate dR/dt = -s R K_gamma (DOP853) and fit the three rates on per-component windows.

    T defaults to (RATE_WINDOW_EFOLDS + 2)/(s lambda_0) so the slowest component spans its window.
    A run stopped by the budgets fits on the part it integrated (``stopped`` says where and why).
    """
    C, m = gamma_inst.classes, gamma_inst.per_class
    R0 = np.asarray(R0, dtype=float)
    if R0.shape != (C, gamma_inst.N):
        raise InstanceError(f"R0 must have shape ({C}, {gamma_inst.N}), got {R0.shape}")
    pred = th.residual_rates(gamma_inst)
    if T is None:
        T = linear_residual_T(gamma_inst)
    s, g = gamma_inst.s, gamma_inst.kappa

    def rhs(_t, y):
        return (-s * apply_block_kernel(y.reshape(C, -1), C, m, g)).ravel()

    run = integrate(rhs, T, R0.ravel(), rtol=RTOL, atol=ATOL, deadline=deadline, max_bytes=max_bytes,
                    max_steps=max_steps, safety_s=safety_s)
    chunk = max(1, int(2e6 // max(R0.size, 1)))

    def sample(ts):
        ts = np.asarray(ts, dtype=float)
        parts = []
        for i in range(0, ts.size, chunk):
            Ys = np.asarray(run.sol(ts[i:i + chunk])).T.reshape(-1, C, gamma_inst.N)
            parts.append(batch_residual_components(Ys, C, m))
        return {k: np.concatenate([p[k] for p in parts]) for k in ("global", "class", "within")}

    rates = fit_decay_rates(sample, run.t_reached) if run.t_reached > 0 else {
        k: {"rate": None, "reason": run.stopped or "no step"} for k in ("global", "class", "within")}
    return LinearResidualResult(run.t_reached, rates, pred, run.sol, run.seconds, run.stopped, T, run.steps)


def _class_mean_norms(traj: Trajectory, ts) -> np.ndarray:
    C, m = traj.inst.classes, traj.inst.per_class

    def fn(W, b, H):
        _, M, _ = batch_decompose(H, C, m)
        return np.linalg.norm(M.reshape(M.shape[0], -1), axis=1)

    return traj.map_batches(ts, fn)


def _late_series(traj: Trajectory, ts) -> tuple[np.ndarray, np.ndarray]:
    """(centred class-mean residual norm, ||J_C W D||_F) at the times ts."""
    C, m = traj.inst.classes, traj.inst.per_class
    Y = targets(C, m)[None]

    def fn(W, b, H):
        R = W @ H + b[:, :, None] - Y
        rc = batch_residual_components(R, C, m)["class"]
        _, _, D = batch_decompose(H, C, m)
        WD = W @ D
        WD = WD - WD.mean(axis=1, keepdims=True)
        return rc, np.linalg.norm(WD.reshape(WD.shape[0], -1), axis=1)

    return traj.map_batches(ts, fn)


def fit_escape_rate(traj: Trajectory, scan_points: int = 4001) -> dict:
    """Growth rate of ||M(t)|| (centred class means) in the linear escape phase (window: see
    ESCAPE_SKIP, ESCAPE_END_FRACTION)."""
    ts = np.linspace(0.0, traj.T, scan_points)
    vals = _class_mean_norms(traj, ts)
    v0, vmax = vals[0], float(vals.max())
    if not v0 > 0:
        return {"rate": None, "reason": "class means are zero at t = 0"}
    lo = v0 * math.exp(ESCAPE_SKIP)
    hi = ESCAPE_END_FRACTION * vmax
    if not hi > lo * math.exp(MIN_WINDOW_EFOLDS):
        return {"rate": None, "reason": f"no linear escape window (||M|| must grow by more than "
                f"e^{ESCAPE_SKIP + MIN_WINDOW_EFOLDS:g} before reaching {ESCAPE_END_FRACTION:g} of its final size; "
                f"use a smaller init scale)", "growth": vmax / v0}
    ia = np.flatnonzero(vals >= lo)[0]
    ib = np.flatnonzero(vals >= hi)[0]
    tw = np.linspace(ts[max(ia - 1, 0)], ts[ib], WINDOW_POINTS * 4)
    vw = _class_mean_norms(traj, tw)
    keep = (vw >= lo) & (vw <= hi)
    fit = fit_log_slope(tw[keep], vw[keep])
    if fit is None or fit["efolds"] < MIN_WINDOW_EFOLDS:
        return {"rate": None, "reason": "escape window too short", **(fit or {})}
    return {"rate": fit["slope"], **fit}


def fit_late_within_rate(traj: Trajectory, scan_points: int = 4001) -> dict:
    """Decay rate of ||J W D|| once the class means are fitted (window: see LATE_START_RESIDUAL)."""
    ts = np.linspace(0.0, traj.T, scan_points)
    rc, wd = _late_series(traj, ts)
    start = np.flatnonzero(rc <= LATE_START_RESIDUAL * rc[0])
    if start.size == 0:
        return {"rate": None, "reason": f"class-mean residual never fell below {LATE_START_RESIDUAL:g} of its "
                f"initial size (run longer)", "class_residual_end": float(rc[-1])}
    ia = start[0]
    w0 = wd[ia]
    if not w0 > 0:
        return {"rate": None, "reason": "within-class residual is zero"}
    if w0 < LATE_MIN_REMAINING * float(wd.max()):
        return {"rate": None, "reason": f"the within-class residual had already fallen to {w0 / wd.max():.1e} of its "
                f"peak when the class means were fitted: no separate late within-class phase"}
    # D = H - class means is a small difference of O(|H|) numbers: below ~1e-15 |H| it is rounding noise.
    _, _, Hs = traj.batch(ts[ia:ia + 1])
    floor = LATE_NOISE_FLOOR * max(1.0, float(np.max(np.abs(Hs))))
    below = np.flatnonzero(wd[ia:] <= max(w0 * math.exp(-LATE_EFOLDS), floor))
    ib = ia + below[0] if below.size else scan_points - 1
    if ib <= ia + 1:
        return {"rate": None, "reason": "late window too short (run longer)"}
    tw = np.linspace(ts[ia], ts[ib], WINDOW_POINTS)
    _, vw = _late_series(traj, tw)
    fit = fit_log_slope(tw, vw)
    if fit is None or fit["efolds"] < MIN_WINDOW_EFOLDS:
        return {"rate": None, "reason": f"late window spans fewer than {MIN_WINDOW_EFOLDS} e-folds (run longer)",
                **(fit or {})}
    return {"rate": -fit["slope"], **fit}


def _etf_distances(M: np.ndarray) -> np.ndarray:
    """Frobenius distance ||G/||G||_F - J/||J||_F||_F of the class-mean Gram G = M^T M to the simplex ETF
    (theory.geometry.classify_gram's ``distance_etf``) for a stack M (T, n, C); NaN where M = 0.

    The means are divided by their largest entry before the Gram is formed, so means of size 1e-100
    (tiny initialisations) neither underflow nor lose precision (the distance is scale-free)."""
    T, _, C = M.shape
    big = np.max(np.abs(M.reshape(T, -1)), axis=1)
    ok = np.isfinite(big) & (big > 0)
    Mn = M / np.where(ok, big, 1.0)[:, None, None]
    G = np.swapaxes(Mn, 1, 2) @ Mn
    scale = np.linalg.norm(G.reshape(T, -1), axis=1)
    J = np.eye(C) - np.ones((C, C)) / C
    Jn = J / np.linalg.norm(J)
    d = np.linalg.norm((G / np.where(scale > 0, scale, 1.0)[:, None, None] - Jn[None]).reshape(T, -1), axis=1)
    return np.where(ok & (scale > 0), d, np.nan)


def trajectory_series(traj: Trajectory) -> dict:
    """Per grid time: loss, residual components, ||R||_F, scatter tr(D D^T), ||E(t) - E(0)||_F, ||M||, the
    invariant's scale ||W^T W||_F + ||H K^-1 H^T||_F and the class means' distance to the simplex ETF
    (computed in chunks of times: bounded memory)."""
    inst = traj.inst
    C, m, N = inst.classes, inst.per_class, inst.N
    l0, lc, lg = inst.eigenvalues
    E0 = th.invariant(traj.states[0].W, traj.states[0].H, inst)
    Y = targets(C, m)[None]

    def fn(W, b, H):
        R = W @ H + b[:, :, None] - Y
        comps = batch_residual_components(R, C, m)
        hbar, M, D = batch_decompose(H, C, m)
        WtW = np.swapaxes(W, 1, 2) @ W
        HKH = D @ np.swapaxes(D, 1, 2) / l0 + m * M @ np.swapaxes(M, 1, 2) / lc + N * hbar[:, :, None] * hbar[:, None, :] / lg
        E = WtW - HKH
        return (0.5 * inst.s * np.sum(R * R, axis=(1, 2)), comps["global"], comps["class"], comps["within"],
                np.sum(D * D, axis=(1, 2)), np.linalg.norm((E - E0[None]).reshape(E.shape[0], -1), axis=1),
                np.linalg.norm(M.reshape(M.shape[0], -1), axis=1),
                np.linalg.norm(WtW.reshape(E.shape[0], -1), axis=1) + np.linalg.norm(HKH.reshape(E.shape[0], -1), axis=1),
                np.sum(H * H, axis=(1, 2)), np.linalg.norm(R.reshape(R.shape[0], -1), axis=1), _etf_distances(M))

    keys = ("loss", "global", "class", "within", "scatter", "E_drift", "M_norm", "E_scale", "H_sq", "residual_norm",
            "etf_distance")
    return dict(zip(keys, traj.map_batches(traj.t_grid, fn)))


#: Rounding floor of tr(D D^T): D = H - class means and the within-class part of the right-hand side
#: (R K mixes class sums) carry rounding ~1e-16 |H| per entry, accumulated along the run; allow
#: (SCATTER_ROUNDING ||H||_F)^2 absolute (below it an "increase" of the scatter is not resolved).
#: Measured: eps = 1e-20 gives tr(D D^T) ~ 1e-40 and grid-to-grid noise ~ 7e-33 with ||H||_F ~ 2.4.
SCATTER_ROUNDING = 1e-13


def scatter_noise_floor(series: dict) -> float:
    """Absolute increase of tr(D D^T) that rounding alone can produce on this run."""
    return float((SCATTER_ROUNDING * math.sqrt(float(np.max(series["H_sq"])))) ** 2)


def scatter_increase(series: dict) -> float:
    """Largest increase of tr(D D^T) between consecutive grid times, relative to its initial value
    (0 when monotone non-increasing)."""
    sc = series["scatter"]
    inc = np.diff(sc)
    return float(max(0.0, inc.max(initial=0.0)) / max(sc[0], 1e-300))


#: Most points of a dynamics curve in a report (``flow_curves``): the integration's grid (401 times by
#: default) is kept whole below this, thinned evenly (first and last time kept) above it.
MAX_CURVE_POINTS = 500
#: Dynamics curves of :func:`flow_curves`: report name -> (series key, description).
CURVES = {
    "loss": ("loss", "loss (s/2) ||W H + b 1^T - Y||_F^2"),
    "residual ||R||_F": ("residual_norm", "Frobenius norm of the residual R = W H + b 1^T - Y"),
    "scatter tr(D D^T)": ("scatter", "within-class scatter tr(D D^T), D = H - class means (NC1)"),
    "ETF distance of class means": ("etf_distance", "||G/||G||_F - J/||J||_F||_F, G = M^T M (NC2; null where M = 0)"),
}


def curve_indices(n: int, max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
    """Indices of at most ``max_points`` evenly spread entries of a length-n series (first and last kept)."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(int))


def flow_curves(t: np.ndarray, series: dict, max_points: int = MAX_CURVE_POINTS) -> dict:
    """The dynamics of one run as report curves ``{name: {"x": times, "y": values, ...}}`` (see
    :data:`CURVES`): the values the measurements already computed at the grid times (no second
    integration), thinned to ``max_points``; times that repeat (a run stopped at t = 0) are dropped,
    so x is strictly increasing. Non-finite values become NaN here and null in the JSON. Data only."""
    t = np.asarray(t, dtype=float)
    idx = curve_indices(t.size, max_points)
    keep = np.concatenate([[True], np.diff(t[idx]) > 0]) if idx.size else idx.astype(bool)
    idx = idx[keep]
    x = t[idx].tolist()
    out = {}
    for name, (key, what) in CURVES.items():
        y = np.asarray(series[key], dtype=float)[idx]
        out[name] = {"x": x, "y": [float(v) if math.isfinite(v) else None for v in y], "x_label": "time t",
                     "description": what}
    return out


@dataclass
class FlowReport:
    """Everything measured on one feature-model run (data only)."""

    solution: Solution
    trajectory: Trajectory
    series: dict
    E0: np.ndarray
    measures: dict = field(default_factory=dict)


def final_measures(inst: th.NTKInstance, st: State) -> dict:
    """Geometry of a final state: ||mu_c - h_bar||^2 per class, ||W||_F^2, h_bar, g = M^T h_bar,
    the Gram G = M^T M, the self-duality ratio J W / M^T, and the zero-loss identity residual
    (m/lc) G^2 + (N/lg) g g^T - J_C."""
    C, m = inst.classes, inst.per_class
    l0, lc, lg = inst.eigenvalues
    hbar, M, D = th.decompose(st.H, C, m)
    G = M.T @ M
    g = M.T @ hbar
    J = np.eye(C) - np.ones((C, C)) / C
    JW = J @ st.W
    # best scalar c with J W = c M^T, and the relative misfit
    c = float(np.sum(JW * M.T) / max(np.sum(M * M), 1e-300))
    misfit = float(np.linalg.norm(JW - c * M.T) / max(np.linalg.norm(JW), 1e-300))
    ident = (m / lc) * G @ G + (inst.N / lg) * np.outer(g, g) - J
    return {
        "mean_sq_norms": np.diag(G), "W_fro_sq": float(np.sum(st.W ** 2)), "hbar_norm": float(np.linalg.norm(hbar)),
        "g": g, "g_norm": float(np.linalg.norm(g)), "gram": G, "self_duality_ratio": c,
        "self_duality_misfit": misfit, "bias": st.b.copy(), "identity_residual": float(np.max(np.abs(ident))),
        "scatter": float(np.sum(D * D)),
    }


#: Singular values of D below this fraction of the largest count as numerically zero for rank(D);
#: their squares are added back to the bound's right-hand side, so the check stays valid.
RANK_RTOL = 1e-8


def nc1_finite_time_bound(inst: th.NTKInstance, W: np.ndarray, H: np.ndarray, E: np.ndarray | None,
                          constant: float = 1.0, lmin: float | None = None) -> dict:
    """||D||_F^2 <= (r l0 / 2)(e + sqrt(e^2 + 4 ||W D||_F^2/(r l0))) + tail, valid at every time.

    Derivation: W^T W - E = D D^T/l0 + (PSD) gives ||W D||^2 >= ||D^T D||^2/l0 - e ||D||^2 with
    e = max(0, -lambda_min(E)), and ||D^T D||_F^2 >= ||D||_F^4 / r (r = rank D). At zero loss
    (W D = 0) it is the zero-loss bound ||D||^2 <= r l0 e. Here D is split into its r numerically nonzero
    singular directions and a tail (sum of the neglected squared singular values, added back).
    ``lmin`` (lambda_min(E)) may be passed instead of recomputing it from ``E``.
    ``constant`` multiplies l0 (1 is the claim; other values exist to test that a false bound is
    refuted).
    """
    l0 = inst.eigenvalues[0] * constant
    _, _, D = th.decompose(H, inst.classes, inst.per_class)
    U, sv_, Vt = np.linalg.svd(D, full_matrices=False)
    big = sv_ > RANK_RTOL * max(float(sv_[0]) if sv_.size else 0.0, 1e-300)
    r = int(np.count_nonzero(big))
    tail = float(np.sum(sv_[~big] ** 2))
    x = float(np.sum(D * D))
    if lmin is None:  # lambda_min(E), computed once by callers that evaluate the bound along a run
        lmin = float(np.linalg.eigvalsh((E + E.T) / 2)[0])
    e = max(0.0, -lmin)
    if r == 0:
        return {"scatter": x, "bound": tail, "rank": 0, "e": e, "WD": 0.0, "zero_loss_bound": 0.0}
    Dbig = (U[:, big] * sv_[big]) @ Vt[big]
    # ||W D||_F without under/overflow (||D||, ||W|| down to 1e-100: their squares would underflow)
    sig = float(np.max(np.abs(Dbig)))
    wd = sig * float(np.linalg.norm(W @ (Dbig / sig))) if sig > 0 else 0.0
    bound = 0.5 * r * l0 * (e + math.hypot(e, 2 * wd / math.sqrt(r * l0))) + tail
    return {"scatter": x, "bound": bound, "rank": r, "e": e, "WD": wd, "zero_loss_bound": r * l0 * e}


def tight_nc1_instance(inst: th.NTKInstance, delta: float = 0.3) -> State:
    """A zero-loss (stationary) state where the zero-loss NC1 bound is attained with equality:
    n = C + 1, class means r J_C (r^4 = lambda_c/m, so E vanishes there), W = [I_C 0]/r, b = 1/C,
    and a rank-one deviation delta e_n u^T (u zero-sum inside class 0) orthogonal to everything."""
    C, m, N = inst.classes, inst.per_class, inst.N
    lc = inst.eigenvalues[1]
    r = (lc / m) ** 0.25
    n = C + 1
    J = np.eye(C) - np.ones((C, C)) / C
    M = np.zeros((n, C))
    M[:C] = r * J
    H = np.repeat(M, m, axis=1)
    u = np.zeros(N)
    u[0], u[1] = 1.0, -1.0
    H[n - 1] += delta * u
    W = np.zeros((C, n))
    W[:, :C] = np.eye(C) / r
    return State(W, np.full(C, 1.0 / C), H)


def run_flow(inst: th.NTKInstance, state0: State, T: float, *, n_grid: int = 401, method: str = "",
             deadline: float | None = None, max_bytes: float = MAX_DENSE_BYTES, max_steps: int | None = None,
             safety_s: float | None = None) -> FlowReport:
    """Integrate and measure: the Solution's value is the final loss; diagnostics carry the
    max invariant drift, the scatter monotonicity and the solver statistics. The budgets: see
    :func:`feature_flow` (``diagnostics["stopped"]`` says where a budget stopped it)."""
    traj = feature_flow(inst, state0, T, n_grid=n_grid, deadline=deadline, max_bytes=max_bytes, max_steps=max_steps,
                        safety_s=safety_s)
    series = trajectory_series(traj)
    E0 = th.invariant(state0.W, state0.H, inst)
    st = traj.final
    diag = {"time": traj.T, "time_requested": traj.T_requested, "stopped": traj.stopped, "steps": traj.steps,
            "nfev": traj.nfev, "solver_message": traj.message,
            "max_invariant_drift": float(series["E_drift"].max()),
            "invariant_tolerance_scale": float(max(1.0, series["E_scale"].max())),
            "invariant_scale": float(np.linalg.norm(E0)),
            "scatter_max_relative_increase": scatter_increase(series),
            "scatter_max_increase": float(max(0.0, np.diff(series["scatter"]).max(initial=0.0))),
            "scatter_noise_floor": scatter_noise_floor(series),
            "loss_initial": float(series["loss"][0]), "residual_final": float(math.sqrt(2 * series["loss"][-1] / inst.s))}
    # Convergence is judged on the output-centred residual J_C R, not on the loss: the all-ones output
    # direction carries a slow mode decaying at rate O(eps^2) (docs/ntk.md), which a loss threshold would mistake
    # for non-convergence (or, with a loose threshold, hide).
    Y = targets(inst.classes, inst.per_class)
    R0, R1 = residual(state0, Y), residual(st, Y)
    c0 = float(np.linalg.norm(R0 - R0.mean(axis=0)))
    c1 = float(np.linalg.norm(R1 - R1.mean(axis=0)))
    diag["centred_residual_initial"], diag["centred_residual_final"] = c0, c1
    converged = traj.success and c1 <= CONVERGED_CENTRED_RESIDUAL * max(c0, 1e-300)
    sol = Solution(float(series["loss"][-1]), method or "DOP853 feature-model gradient flow", converged,
                   traj.seconds, {"W": st.W, "b": st.b, "H": st.H}, diag)
    return FlowReport(sol, traj, series, E0, final_measures(inst, st))
