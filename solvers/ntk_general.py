"""Feature-model flows beyond the block kernel (docs/ntk.md, "Beyond the block kernel").

Model: classes of sizes ``counts`` (samples ordered class by class, N = sum), one-hot targets Y = S,
features H (n x N), classifier W (C x n), bias b (C), outputs Z = W H + b 1^T, a fixed symmetric
positive definite feature kernel K (N x N), and G = dL/dZ:

- MSE: L = (s/2) ||Z - Y||_F^2, G = s (Z - Y);
- CE:  L = s sum_i (logsumexp(z_i) - z_{i, y_i}), G = s (softmax(Z) - Y) (softmax per column).

Gradient flow: dW/dt = -G H^T, db/dt = -G 1, dH/dt = -W^T G K. Mini-batches enter only through G
(columns outside the batch set to 0); a discrete step applies the same right-hand side with a step
size eta at the old state.

MSE flows are integrated in the eigenbasis of K (K = V diag(lambda) V^T, Ht = H V: the product with K
is diagonal, O(C n N) per right-hand side after one O(N^3) eigendecomposition); CE flows in the
original basis (O(n N^2) per right-hand side). DOP853 (scipy's stepper, driven step by step) with a
STEP budget (work, not seconds); only the states at the grid times are kept (bounded memory).

Everything returns data (arrays, floats, None), never verdicts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from theory import _work as budgets
from theory import ntk as th
from theory._validate import InstanceError, as_float, as_int
from theory.geometry import classify_gram, cosine_matrix, nc_metrics

RTOL = 1e-11
ATOL = 1e-13
#: The error-estimate run uses tolerances this much tighter (rtol 1e-12: the difference of the two runs'
#: measured quantities estimates the integration error of the primary run; the tighter run's own error is
#: ~10x smaller). 1e-13 is too close to float64 rounding: DOP853 then shrinks its steps (measured: 4656
#: steps instead of 149 on the block kernel).
ERROR_RUN_FACTOR = 1e-1
#: DOP853 step budget of one flow (work, not seconds). Estimated before the run (refused beyond it)
#: and enforced during it (then ``stopped`` says where).
MAX_STEPS = 200_000
#: Budget on floating-point work of one flow: steps x 12 right-hand sides x flops per right-hand side.
MAX_FLOPS = 4e12
#: Seconds per counted flop on the 2-core calibration machine, only to state the seconds here (never a decision):
#: measured ~33 s for ~1.1e10 counted flops (the primary and check flows of --kernel-perturbation 0.3 --counts
#: 300,300,300, 1.6e5 right-hand sides of 6 C n N flops: small products, Python overhead included).
SECONDS_PER_FLOP = 3e-9
#: Discrete runs: at most this many steps.
MAX_DISCRETE_STEPS = 1_000_000
LOSSES = ("mse", "ce")


@dataclass
class GeneralModel:
    """A fixed SPD kernel K with class sizes ``counts``, loss scale s and loss ("mse" or "ce")."""

    K: np.ndarray
    counts: tuple
    s: float = 1.0
    loss: str = "mse"
    description: dict = field(default_factory=dict)

    def __post_init__(self):
        self.counts = th.check_counts(self.counts)
        self.N = int(sum(self.counts))
        self.C = len(self.counts)
        if self.N > th.MAX_GENERAL_SAMPLES:
            raise InstanceError(f"N = {self.N} samples exceeds the limit {th.MAX_GENERAL_SAMPLES} for a general kernel "
                                f"(N x N eigendecomposition and dense products)")
        self.K = th.validate_kernel(self.K, self.N)
        s = as_float("s", self.s, positive=True)
        if not th.S_RANGE[0] <= s <= th.S_RANGE[1]:
            raise InstanceError(f"s must be in [{th.S_RANGE[0]:g}, {th.S_RANGE[1]:g}], got {s:g}")
        self.s = s
        if self.loss not in LOSSES:
            raise InstanceError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        self.Y = th.class_indicator(self.counts)
        self.labels = th.labels_from_counts(self.counts)
        self._eig = None
        self._Kinv = None

    @property
    def eig(self):
        if self._eig is None:
            lam, V = np.linalg.eigh(self.K)
            self._eig = (lam, V)
        return self._eig

    @property
    def Kinv(self) -> np.ndarray:
        if self._Kinv is None:
            lam, V = self.eig
            A = (V / lam) @ V.T
            self._Kinv = (A + A.T) / 2
        return self._Kinv

    def to_dict(self) -> dict:
        lam, _ = self.eig
        return {"counts": list(self.counts), "N": self.N, "C": self.C, "s": self.s, "loss": self.loss,
                "kernel_eigenvalue_range": [float(lam[0]), float(lam[-1])], **self.description}


def block_model(counts, kappa, rho: float = 0.0, seed: int = 0, s: float = 1.0, loss: str = "mse") -> GeneralModel:
    """K = Kb + K0: Kb the (possibly imbalanced) block kernel with constants kappa, K0 the seeded random PSD
    perturbation of relative Frobenius size rho (theory.ntk.perturbation)."""
    counts = th.check_counts(counts)
    kappa = tuple(as_float(f"kappa[{i}]", k) for i, k in enumerate(kappa))
    rho = as_float("kernel perturbation rho", rho, nonnegative=True)
    if rho > 1e3:
        raise InstanceError(f"kernel perturbation rho must be <= 1000 (relative Frobenius size), got {rho:g}")
    seed = as_int("seed", seed, minimum=0)
    N = int(sum(counts))
    if N > th.MAX_GENERAL_SAMPLES:
        raise InstanceError(f"N = {N} samples exceeds the limit {th.MAX_GENERAL_SAMPLES} for a general kernel")
    th.check_imbalanced_pd(counts, kappa)
    Kb = th.imbalanced_block_kernel(counts, kappa)
    K = Kb + th.perturbation(N, float(np.linalg.norm(Kb)), rho, seed)
    return GeneralModel(K, counts, s, loss, {"kappa": list(kappa), "perturbation": rho, "kernel_seed": seed})


# --------------------------------------------------------------------------------------
# States and initialisations
# --------------------------------------------------------------------------------------

@dataclass
class GState:
    W: np.ndarray
    b: np.ndarray
    H: np.ndarray

    def copy(self) -> "GState":
        return GState(self.W.copy(), self.b.copy(), self.H.copy())


def init_random(model: GeneralModel, n: int, eps: float, seed: int = 0) -> GState:
    """W (C x n), H (n x N) i.i.d. N(0, eps^2) from np.random.default_rng(seed) (W first, then H), b = 0
    (the block solver's initialisation, solvers.ntk.init_random)."""
    n = as_int("n (feature dimension)", n, minimum=1)
    eps = as_float("init_scale", eps, positive=True)
    rng = np.random.default_rng(as_int("seed", seed, minimum=0))
    W = eps * rng.standard_normal((model.C, n))
    H = eps * rng.standard_normal((n, model.N))
    return GState(W, np.zeros(model.C), H)


def init_e_zero(model: GeneralModel, n: int, eps: float, seed: int = 0) -> GState:
    """E = W^T W - H K^-1 H^T = 0 exactly (to rounding): H = W^T Omega K^(1/2) with Omega (C x N) having
    orthonormal rows (QR of a seeded Gaussian), W i.i.d. N(0, eps^2)."""
    n = as_int("n (feature dimension)", n, minimum=1)
    eps = as_float("init_scale", eps, positive=True)
    rng = np.random.default_rng(as_int("seed", seed, minimum=0))
    W = eps * rng.standard_normal((model.C, n))
    Q, _ = np.linalg.qr(rng.standard_normal((model.N, model.C)))
    lam, V = model.eig
    Khalf = (V * np.sqrt(lam)) @ V.T
    return GState(W, np.zeros(model.C), W.T @ Q.T @ Khalf)


# --------------------------------------------------------------------------------------
# Gradients, right-hand sides
# --------------------------------------------------------------------------------------

def softmax_cols(Z: np.ndarray) -> np.ndarray:
    Z = Z - Z.max(axis=0, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=0, keepdims=True)


def loss_grad(model: GeneralModel, st: GState) -> tuple[float, np.ndarray]:
    """(L, G = dL/dZ) at a state."""
    Z = st.W @ st.H + st.b[:, None]
    if model.loss == "mse":
        R = Z - model.Y
        return 0.5 * model.s * float(np.sum(R * R)), model.s * R
    Zs = Z - Z.max(axis=0, keepdims=True)
    lse = np.log(np.exp(Zs).sum(axis=0))
    L = model.s * float(np.sum(lse - np.sum(Zs * model.Y, axis=0)))
    return L, model.s * (softmax_cols(Z) - model.Y)


def _pack(W, b, H):
    return np.concatenate([W.ravel(), b, H.ravel()])


def _unpack(y, C, n, N):
    return y[:C * n].reshape(C, n), y[C * n:C * n + C], y[C * n + C:].reshape(n, N)


def make_rhs(model: GeneralModel, n: int, mask: np.ndarray | None = None):
    """Right-hand side on packed states. MSE: in the eigenbasis (state (W, b - b_ref, H V), b_ref from
    :func:`bias_reference`); CE: original basis.
    ``mask`` (N,) of 0/1 restricts G to a mini-batch (mini-batch flow)."""
    C, N, s = model.C, model.N, model.s
    if model.loss == "mse":
        lam, V = model.eig
        u = V.T @ np.ones(N)  # 1^T V
        # the solver's bias is beta = b - b_ref (see bias_reference): the constant part of the residual,
        # b_ref 1^T V - Y V, is formed once, so R = W Ht + beta u^T + const has no O(1) cancellation left
        const = np.outer(bias_reference(model), u) - model.Y @ V
        Mv = None if mask is None else V.T @ (mask[:, None] * V)  # masking in the rotated basis: V^T diag(mask) V

        def rhs(_t, y):
            W, beta, Ht = _unpack(y, C, n, N)
            Rt = W @ Ht + beta[:, None] * u + const  # = np.outer(beta, u) (the same products), without its call overhead
            if Mv is not None:
                Rt = Rt @ Mv
            dW = -s * (Rt @ Ht.T)
            db = -s * (Rt @ u)
            dHt = -s * ((W.T @ Rt) * lam)
            return _pack(dW, db, dHt)

        return rhs
    K = model.K

    def rhs(_t, y):
        W, b, H = _unpack(y, C, n, N)
        G = s * (softmax_cols(W @ H + b[:, None]) - model.Y)
        if mask is not None:
            G = G * mask[None, :]
        return _pack(-(G @ H.T), -G.sum(axis=1), -(W.T @ G) @ K)

    return rhs


def bias_reference(model: GeneralModel) -> np.ndarray:
    """The bias the MSE solver's coordinates are centred on: b_ref = n/N, the fitted bias at W = H = 0.

    Why (measured): in coordinates (W, b, H V) the residual's global-mean column is sqrt(N)(b - n/N) + W h_bar,
    a difference of O(1) numbers with an absolute rounding error ~1e-16 while b - n/N and h_bar stay small
    (O(eps) for a block kernel from a small start). DOP853's error estimate of the h_bar components was then
    rounding noise (~1e-16 h) against a tolerance of rtol |h_bar| ~ 1e-18..1e-21, and the step size collapsed
    to 1e-10 for a while: 28055 steps instead of ~230 (counts 3,3,3,3, error-estimate run), 345 / 2236 / 35533
    for seeds 0 / 1 / 2 of counts 4,4,4, while a perturbation rho = 1e-3 took ~230. Integrating
    beta = b - b_ref instead removes the cancellation (same ODE, beta' = b')."""
    return np.asarray(model.counts, float) / model.N


def to_solver_coords(model: GeneralModel, st: GState) -> np.ndarray:
    if model.loss == "mse":
        return _pack(st.W, st.b - bias_reference(model), st.H @ model.eig[1])
    return _pack(st.W, st.b, st.H)


def from_solver_coords(model: GeneralModel, y: np.ndarray, n: int) -> GState:
    W, b, H = _unpack(np.asarray(y), model.C, n, model.N)
    if model.loss == "mse":
        H = H @ model.eig[1].T
        b = b + bias_reference(model)
    return GState(W.copy(), b.copy(), H.copy())


def rhs_state(model: GeneralModel, st: GState) -> GState:
    """(dW, db, dH) at a state, in the original coordinates, from the definition (no eigenbasis)."""
    _, G = loss_grad(model, st)
    return GState(-(G @ st.H.T), -G.sum(axis=1), -(st.W.T @ G) @ model.K)


# --------------------------------------------------------------------------------------
# Work estimate and integration
# --------------------------------------------------------------------------------------

def flops_per_rhs(model: GeneralModel, n: int) -> float:
    C, N = model.C, model.N
    return 6.0 * C * n * N + (2.0 * n * N * N if model.loss == "ce" else 0.0)


def estimate_steps(model: GeneralModel, st: GState, T: float) -> dict:
    """DOP853 steps ~ 300 + T lambda_max / 4 at the stability limit, with the stiffness bounded by
    s (N + ||H||^2 + lambda_max(K) ||W||^2 + sqrt(lambda_max(K)) ||R||) at t = 0 or at the collapsed scale
    (||W||^2 ~ C, ||H||^2 ~ N), whichever is larger."""
    lam = model.eig[0]
    kmax = float(lam[-1])
    w2 = max(float(np.sum(st.W ** 2)), float(model.C))
    h2 = max(float(np.sum(st.H ** 2)), math.sqrt(kmax / max(model.counts)) * model.N)
    r = math.sqrt(w2 * h2) + math.sqrt(model.N)
    stiff = model.s * (model.N + h2 + kmax * w2 / max(model.counts) + math.sqrt(kmax) * r)
    steps = 300 + T * stiff / 4.0
    n = st.W.shape[1]
    return {"stiffness": stiff, "steps": steps, "flops": steps * 12 * flops_per_rhs(model, n)}


def flops_text(flops: float, limit: float | None = None) -> str:
    """The work statement of a refusal: counted flops, the limit in flops (default MAX_FLOPS), and the seconds here
    (informative)."""
    return budgets.work_text(flops, MAX_FLOPS if limit is None else limit, "flops", seconds_per_unit=SECONDS_PER_FLOP)


def check_budget(what: str, est: dict, max_steps: int = MAX_STEPS) -> None:
    """Refuse (InstanceError) a flow estimated beyond the work budget: DOP853 steps above ``max_steps`` or counted
    flops above MAX_FLOPS (counts from the sizes: the same on every machine)."""
    if not (est["steps"] <= max_steps and est["flops"] <= MAX_FLOPS):
        raise InstanceError(f"{what}: estimated ~{est['steps']:.3g} DOP853 steps (limit {max_steps} steps; stiffness "
                            f"~{est['stiffness']:.3g}) x 12 right-hand sides exceed the work budget: "
                            f"{flops_text(est['flops'])}; reduce --time or the sizes")


@dataclass
class GeneralTrajectory:
    model: GeneralModel
    n: int
    t_grid: np.ndarray
    states: list
    steps: int
    nfev: int
    T: float
    T_requested: float
    stopped: str | None
    seconds: float

    @property
    def final(self) -> GState:
        return self.states[-1]


def integrate_grid(fun, T: float, y0: np.ndarray, t_grid: np.ndarray, *, rtol: float, atol, max_steps: int):
    """DOP853 step by step; the state at each grid time from the step's dense output (only those kept).
    Returns (states at the grid times reached, steps, nfev, t reached, stopped reason or None)."""
    from scipy.integrate import DOP853  # here: scipy.integrate costs ~0.6 s to import

    out = [np.array(y0, dtype=float)]
    gi = 1
    stopped = None
    steps = 0
    with np.errstate(over="ignore", invalid="ignore"):
        solver = DOP853(fun, 0.0, np.array(y0, dtype=float), T, rtol=rtol, atol=atol)
        while solver.status == "running" and gi < t_grid.size:
            if steps >= max_steps:
                stopped = f"step budget ({max_steps} DOP853 steps) reached at t = {solver.t:.6g} of T = {T:.6g}"
                break
            msg = solver.step()
            steps += 1
            if solver.status == "failed":
                stopped = f"integration failed at t = {solver.t:.6g} of T = {T:.6g}: {msg}"
                break
            if gi < t_grid.size and t_grid[gi] <= solver.t:
                dense = solver.dense_output()
                while gi < t_grid.size and t_grid[gi] <= solver.t:
                    out.append(dense(t_grid[gi]))
                    gi += 1
    t_reached = float(t_grid[len(out) - 1])
    return out, steps, int(solver.nfev), t_reached, stopped


def flow(model: GeneralModel, st0: GState, T: float, *, n_grid: int = 201, rtol: float = RTOL,
         atol_scale: float = 1.0, max_steps: int = MAX_STEPS, mask: np.ndarray | None = None) -> GeneralTrajectory:
    """Integrate the gradient flow from ``st0`` on [0, T]; states at ``n_grid`` evenly spaced times."""
    T = as_float("time", T, positive=True)
    n = st0.W.shape[1]
    t0 = time.perf_counter()
    size = max(float(np.max(np.abs(st0.W))), float(np.max(np.abs(st0.H))), 1e-300)
    C = model.C
    atol = np.full(C * n + C + n * model.N, ATOL * atol_scale * min(1.0, size * size))
    atol[C * n:C * n + C] = ATOL * atol_scale
    grid = np.linspace(0.0, T, n_grid)
    from solvers.common import blas_threads

    # the products are small (C n N flops): threaded BLAS only adds spin-waiting (measured on the loaded 2-core
    # machine: 27 ms per right-hand side at N = 2000 threaded, 1.1 ms single-threaded)
    with blas_threads(2.0 * model.C * n * model.N + (2.0 * n * model.N ** 2 if model.loss == "ce" else 0.0)):
        ys, steps, nfev, t_reached, stopped = integrate_grid(make_rhs(model, n, mask), T, to_solver_coords(model, st0),
                                                             grid, rtol=rtol, atol=atol, max_steps=max_steps)
    states = [from_solver_coords(model, y, n) for y in ys]
    states[0] = st0.copy()
    return GeneralTrajectory(model, n, grid[:len(states)], states, steps, nfev, t_reached, T, stopped,
                             time.perf_counter() - t0)


# --------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------

def class_decompose(H: np.ndarray, counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(U = class means n x C, M = U - unweighted mean of the class means, D = H - class means)."""
    S = th.class_indicator(counts)
    U = (H @ S.T) / np.asarray(counts, float)[None, :]
    M = U - U.mean(axis=1, keepdims=True)
    return U, M, H - U @ S


def measure(model: GeneralModel, st: GState, Kinv: np.ndarray | None = None) -> dict:
    """Loss, residual, NC1 (trace ratio, theory.geometry.nc_metrics), the centred class-mean cosines and
    Gram, its distance to the simplex ETF, tr(D D^T), and E (when ``Kinv`` is given)."""
    L, G = loss_grad(model, st)
    U, M, D = class_decompose(st.H, model.counts)
    met = nc_metrics(st.H, model.labels)
    geo = classify_gram(M.T @ M)
    Ms = U - st.H.mean(axis=1, keepdims=True)  # centred by the sample mean (differs from M for unequal classes)
    out = {"loss": L, "grad_norm": float(np.linalg.norm(G)), "nc1": met.NC1, "nc1_pinv": met.NC1_pinv,
           "scatter": float(np.sum(D * D)), "cosines": np.array(cosine_matrix(M), dtype=float),
           "cosines_sample_mean": np.array(cosine_matrix(Ms), dtype=float),
           "gram": M.T @ M, "distance_etf": geo.distance_etf, "classification": geo.classification,
           "bias": st.b.copy(), "W_fro_sq": float(np.sum(st.W ** 2))}
    if Kinv is not None:
        out["E"] = th.general_invariant(st.W, st.H, Kinv)
    return out


def _series(model: GeneralModel, traj: GeneralTrajectory) -> dict:
    Kinv = model.Kinv
    E0 = th.general_invariant(traj.states[0].W, traj.states[0].H, Kinv)
    drift, scale, loss, scatter, mnorm = [], [], [], [], []
    for st in traj.states:
        WtW = st.W.T @ st.W
        HKH = st.H @ Kinv @ st.H.T
        drift.append(float(np.linalg.norm(WtW - HKH - E0)))
        scale.append(float(np.linalg.norm(WtW) + np.linalg.norm(HKH)))
        L, _ = loss_grad(model, st)
        loss.append(L)
        _, M, D = class_decompose(st.H, model.counts)
        scatter.append(float(np.sum(D * D)))
        mnorm.append(float(np.linalg.norm(M)))
    return {"E_drift": np.array(drift), "E_scale": np.array(scale), "loss": np.array(loss),
            "scatter": np.array(scatter), "M_norm": np.array(mnorm), "E0": E0}


def fit_escape(traj: GeneralTrajectory, series: dict, skip: float = 5.0, end_fraction: float = 1e-2) -> dict:
    """Growth rate of ||M(t)|| on the grid points between e^skip ||M(0)|| and end_fraction max ||M||
    (least squares on the log); None with the reason when the window has fewer than 5 points."""
    v = series["M_norm"]
    t = traj.t_grid
    lo, hi = v[0] * math.exp(skip), end_fraction * float(v.max())
    keep = (v >= lo) & (v <= hi)
    idx = np.flatnonzero(keep)
    if idx.size < 5 or not (hi > lo):
        return {"rate": None, "reason": f"no escape window with >= 5 grid points (||M|| must grow from e^{skip:g} of its "
                f"initial size to {end_fraction:g} of its maximum; use a smaller init scale or a finer grid)"}
    idx = np.arange(idx[0], idx[-1] + 1)
    A = np.vstack([t[idx], np.ones(idx.size)]).T
    coef, *_ = np.linalg.lstsq(A, np.log(v[idx]), rcond=None)
    return {"rate": float(coef[0]), "t_start": float(t[idx[0]]), "t_end": float(t[idx[-1]]), "points": int(idx.size)}


@dataclass
class GeneralFlowReport:
    trajectory: GeneralTrajectory
    series: dict
    final: dict
    error: dict
    escape: dict
    check_run: GeneralTrajectory | None = None
    #: With ``check_grid``: |primary - tight| at every grid time for the series "scatter" and "M_norm".
    series_error: dict | None = None


def _quantities(m: dict) -> dict:
    return {"nc1": m["nc1"], "cosines": m["cosines"], "distance_etf": m["distance_etf"], "gram": m["gram"],
            "bias": m["bias"]}


def run_flow(model: GeneralModel, st0: GState, T: float, *, n_grid: int = 201, error_estimate: bool = True,
             max_steps: int = MAX_STEPS, check_grid: bool = False) -> GeneralFlowReport:
    """The primary flow (rtol 1e-11) and, with ``error_estimate``, a second one at 10x tighter tolerances:
    ``error[q]`` = max |q_primary - q_tight| for NC1, the cosines, the ETF distance, the Gram and the bias
    (an estimate of the primary run's integration error, used in the tolerances). With ``check_grid`` the second
    run keeps the same grid (its steps do not depend on the grid: dense output) and ``series_error`` holds the
    difference of the scatter and of ||M|| at every grid time."""
    check_budget("feature-model flow", estimate_steps(model, st0, T), max_steps)
    traj = flow(model, st0, T, n_grid=n_grid, max_steps=max_steps)
    series = _series(model, traj)
    fin = measure(model, traj.final, model.Kinv)
    err = {}
    chk = None
    serr = None
    if error_estimate and traj.stopped is None:
        chk = flow(model, st0, T, n_grid=n_grid if check_grid else 2, rtol=RTOL * ERROR_RUN_FACTOR,
                   atol_scale=ERROR_RUN_FACTOR, max_steps=max_steps)
        if chk.stopped is None and check_grid:
            s2 = _series(model, chk)
            serr = {k: np.abs(series[k] - s2[k]) for k in ("scatter", "M_norm")}
        if chk.stopped is None:
            f2 = measure(model, chk.final)
            for k, v in _quantities(fin).items():
                w = _quantities(f2)[k]
                if v is None or w is None:
                    err[k] = None
                else:
                    a, b = np.asarray(v, float), np.asarray(w, float)
                    err[k] = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
        else:
            err = {k: None for k in _quantities(fin)}
    else:
        err = {k: None for k in _quantities(fin)}
    return GeneralFlowReport(traj, series, fin, err, fit_escape(traj, series), chk, serr)


# --------------------------------------------------------------------------------------
# Discrete (mini-batch) steps and mini-batch flows
# --------------------------------------------------------------------------------------

def batch_schedule(N: int, batch: int, steps: int, seed: int):
    """Batches of consecutive chunks of B of an epoch permutation np.random.default_rng(2_000_000 + seed)
    .permutation(N) (a new permutation every epoch; the last chunk of an epoch may be smaller)."""
    rng = np.random.default_rng(2_000_000 + seed)
    k = 0
    while k < steps:
        perm = rng.permutation(N)
        for i in range(0, N, batch):
            if k >= steps:
                return
            yield perm[i:i + batch]
            k += 1


def discrete_run(model: GeneralModel, st0: GState, eta: float, batch: int, steps: int, seed: int = 0,
                 checks: int = 20) -> dict:
    """Discrete mini-batch gradient steps W -= eta G_B H^T, b -= eta G_B 1, H -= eta W^T G_B K (G_B: G with
    the columns outside the batch set to 0, all at the old state). At ``checks`` evenly spaced steps the
    exact change of E is recorded next to theory.ntk.discrete_step_change. Returns the final state, the
    per-step records and the total drift of E."""
    eta = as_float("step size", eta, positive=True)
    batch = as_int("sgd batch", batch, minimum=1, maximum=model.N)
    steps = as_int("steps", steps, minimum=1, maximum=MAX_DISCRETE_STEPS)
    Kinv = model.Kinv
    st = st0.copy()
    E0 = th.general_invariant(st.W, st.H, Kinv)
    check_at = set(np.unique(np.linspace(0, steps - 1, min(checks, steps)).round().astype(int)).tolist())
    records = []
    for k, B in enumerate(batch_schedule(model.N, batch, steps, seed)):
        _, G = loss_grad(model, st)
        GB = np.zeros_like(G)
        GB[:, B] = G[:, B]
        dW = -eta * (GB[:, B] @ st.H[:, B].T)
        db = -eta * GB[:, B].sum(axis=1)
        dH = -eta * (st.W.T @ GB[:, B]) @ model.K[B, :]
        if k in check_at:
            Eb = th.general_invariant(st.W, st.H, Kinv)
            pred = th.discrete_step_change(st.W, st.H, GB, model.K, eta)
        new = GState(st.W + dW, st.b + db, st.H + dH)
        if k in check_at:
            Ea = th.general_invariant(new.W, new.H, Kinv)
            scale = float(np.linalg.norm(st.W.T @ st.W) + np.linalg.norm(st.H @ Kinv @ st.H.T))
            records.append({"step": k, "change": float(np.linalg.norm(Ea - Eb)), "predicted": float(np.linalg.norm(pred)),
                            "mismatch": float(np.linalg.norm(Ea - Eb - pred)), "scale": scale})
        st = new
        if not (np.all(np.isfinite(st.W)) and np.all(np.isfinite(st.H))):
            return {"final": st, "records": records, "diverged_at": k, "E_drift": None, "steps": k + 1}
    E1 = th.general_invariant(st.W, st.H, Kinv)
    return {"final": st, "records": records, "diverged_at": None, "E_drift": float(np.linalg.norm(E1 - E0)),
            "E0": E0, "steps": steps}


def minibatch_flow(model: GeneralModel, st0: GState, batches, dt: float, *, rtol: float = RTOL) -> tuple[GState, dict]:
    """Piecewise gradient flow: for each batch in turn, the flow with G masked to the batch for a time dt.
    Returns the final state and the max drift of E at the switching times (with its scale)."""
    Kinv = model.Kinv
    E0 = th.general_invariant(st0.W, st0.H, Kinv)
    st = st0.copy()
    drift, scale = 0.0, 1.0
    steps = 0
    for B in batches:
        mask = np.zeros(model.N)
        mask[np.asarray(B)] = 1.0
        tr = flow(model, st, dt, n_grid=2, rtol=rtol, mask=mask)
        steps += tr.steps
        if tr.stopped:
            return st, {"stopped": tr.stopped, "max_drift": drift, "scale": scale, "steps": steps}
        st = tr.final
        E = th.general_invariant(st.W, st.H, Kinv)
        drift = max(drift, float(np.linalg.norm(E - E0)))
        scale = max(scale, float(np.linalg.norm(st.W.T @ st.W) + np.linalg.norm(st.H @ Kinv @ st.H.T)))
    return st, {"stopped": None, "max_drift": drift, "scale": scale, "steps": steps}
