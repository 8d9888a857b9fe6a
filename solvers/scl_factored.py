"""Supervised contrastive loss: the factored search (L-BFGS on a parametrisation of the sphere / sphere x
nonnegative orthant, numpy and torch backends, basin hopping, the exhaustive d = 1 case). Part of the SCL engine
(``solvers.scl`` re-exports every name). Returns ``solvers.common.Solution`` (data, never verdicts).
"""

from __future__ import annotations

import time

import numpy as np

from solvers.common import Solution
from solvers.scl_batching import CompiledBatching, _loss_features, compile_batching
from theory._validate import InstanceError, as_finite_array, as_float, as_int
from theory.scl import SCLInstance

#: Factored solver: stop when the projected gradient (scipy's gtol, max-norm) is below this.
#: The loss is O(N log N) in size and float64; 1e-10 is ~1e6 ulps of a value of ~10.
FACTORED_GTOL = 1e-10

#: KKT residual accepted as "converged" for the factored solver: max-norm of the Riemannian
#: gradient on the sphere (UFM) or of min(h, residual) on sphere x orthant (UFM+). Observed
#: ~1e-8 at the optima of the spec's instances; 1e-5 leaves room for slow tails.
KKT_TOL = 1e-5

#: Basin-hopping perturbation (UFM): Gaussian noise of this fraction of the largest coordinate.
HOP_SIZE = 0.3
#: Basin-hopping perturbation (UFM+): every feature coordinate grows by a uniform amount up to this
#: fraction of the largest one. Measured (UFM+, d = k + 1, 6 starts then hops): 1.0 certified
#: k = 31 / 50 with n = 2 and k = 50 with n = 10 after 1, 2, 3 hops; 0.3 needed 1, >20, 3.
HOP_SIZE_NONNEG = 1.0


# --------------------------------------------------------------------------------------

def _features_from_params(V: np.ndarray, nonneg: bool):
    """UFM: h = v/||v||. UFM+: h = v∘v / ||v∘v|| (the optimisers run UFM+ on the bounded form u >= 0 and use
    this map with v = sqrt(h)). Smooth, onto the feasible set, unconstrained, so plain L-BFGS applies; the UFM+ map has spurious stationary points where v_j = 0 but the
    true KKT multiplier is negative, which multi-start and the certificate guard against."""
    W = V * V if nonneg else V
    nr = np.linalg.norm(W, axis=0)
    nr = np.where(nr > 0, nr, 1.0)
    return W / nr, W, nr


def _param_grad(V, H, nr, gH, nonneg: bool):
    radial = np.sum(gH * H, axis=0)
    gW = (gH - H * radial) / nr
    return 2.0 * V * gW if nonneg else gW


def kkt_residual(H: np.ndarray, gH: np.ndarray, nonneg: bool) -> float:
    """First-order optimality residual of unit columns H with loss gradient gH.

    UFM: max-norm of the Riemannian gradient gH - h (h.gH). UFM+: the residual r of the same
    Lagrangian must vanish where h > 0 and be >= 0 where h = 0 (the orthant multiplier), measured
    as max |min(h, r)| (the standard complementarity residual)."""
    r = gH - H * np.sum(gH * H, axis=0)
    if nonneg:
        return float(np.max(np.abs(np.minimum(H, r))))
    return float(np.max(np.abs(r)))


#: Projected-gradient stop of torch's L-BFGS in float32: the gradient cannot go much below ~1e-6
#: of its scale in single precision; the result is then judged by its float64 KKT residual.
FACTORED_GTOL_FLOAT32 = 1e-5
#: Relative change of the loss below which L-BFGS stops (scipy's ftol; for torch scaled by the loss):
#: ~5 ulps in float64. In float32, 1e-10 (far below one ulp) only stops a run whose loss no longer
#: changes at all: a larger value (1e-7) was measured to stop N = 200 runs at a relative gap of 1.5e-6.
FACTORED_FTOL = {"float64": 1e-15, "float32": 1e-10}
#: L-BFGS memory (pairs), both backends. Measured on N = 200, k = 10 UFM+ (benchmarks/scl_bench.py):
#: 20 pairs need fewer iterations than 10 at a negligible per-iteration cost for d*N ~ 2000.
FACTORED_MEMORY = 20


def initial_params(inst: SCLInstance, starts: int, seed: int) -> list[np.ndarray]:
    """Random starts shared by every backend (numpy's generator, so backends start identically)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((inst.d, inst.N)) for _ in range(starts)]


def solve_factored(inst: SCLInstance, *, starts: int = 6, seed: int = 0, maxiter: int = 5000,
                   init: np.ndarray | None = None, backend: str = "numpy", device: str | None = None,
                   dtype: str = "float64", stop_at: float | None = None, hops: int = 0,
                   hop_until: float | None = None, time_budget: float | None = None) -> Solution:
    """Minimise the loss over unit (and, for UFM+, nonnegative) features in R^d by L-BFGS on
    a parametrisation, from ``starts`` random points (seeded) plus ``init`` if given; keep the best.

    ``backend="numpy"``: scipy's L-BFGS-B with the analytic gradient. ``backend="torch"``: the same loss written
    in torch on ``device`` in ``dtype`` (fallbacks with messages: solvers.backends.resolve); UFM: minimised by
    torch.optim.LBFGS (strong Wolfe); UFM+: scipy's L-BFGS-B on the bounded form, torch evaluating loss and
    gradient (:func:`_torch_evaluator`: why not the smooth map). Whatever the
    backend, value, gradient and KKT residual are re-evaluated in float64 numpy, so ``converged``
    (KKT residual <= KKT_TOL) does not depend on the dtype. ``stop_at``: a start stops as soon as the
    loss is <= that value and no further start is run (benchmarks: time to a target accuracy).

    ``hops``: after the starts, up to this many perturbation restarts from the best point
    (monotonic basin hopping: every feature coordinate is pushed by a random amount, L-BFGS is
    rerun, and the result replaces the best point only if it is lower; numpy backend), stopping
    early once the best value is <= ``hop_until`` (e.g. a proven lower bound plus the tolerance:
    certified). It escapes the non-global KKT points that UFM+ meets at large k, such as two classes
    sharing one direction (measured, d = k + 1, where 6 starts all failed: n = 2 with k = 31 and
    50, n = 10 with k = 50, certified after 1, 7 and 1 hops). It uses no prediction: only the
    objective and, to stop, a lower bound.
    """
    from solvers.backends import resolve
    from solvers.common import blas_threads

    starts = as_int("starts", starts, minimum=1)
    seed = as_int("seed", seed, minimum=0)
    if time_budget is not None:
        time_budget = as_float("time_budget", time_budget, positive=True)
    maxiter = as_int("maxiter", maxiter, minimum=1)
    hops = as_int("hops", hops, minimum=0)
    # NaN, strings and objects were silently accepted (a NaN target never stops; a string failed inside)
    stop_at = None if stop_at is None else as_float("stop_at", stop_at)
    hop_until = None if hop_until is None else as_float("hop_until", hop_until)
    choice = resolve(backend, device, dtype)
    t0 = time.perf_counter()
    y = inst.labels
    cb = compile_batching(y, inst.batches)
    d, N, tau, nonneg = inst.d, inst.N, inst.tau, inst.nonneg
    first = []
    if init is not None:
        H0 = as_finite_array("init", init, ndim=2, shape=(d, N))
        if nonneg:
            if np.any(H0 < 0):
                raise InstanceError("init must be nonnegative for the UFM+ model")
            first.append(np.sqrt(H0))
        else:
            first.append(H0.copy())

    def _inits():  # the same sequence as initial_params, drawn lazily (never `starts` arrays at once)
        yield from first
        rng0 = np.random.default_rng(seed)
        for _ in range(starts):
            yield rng0.standard_normal((d, N))

    inits = _inits()
    deadline = None if time_budget is None else t0 + float(time_budget)

    if d == 1:
        sol = _solve_line(inst, cb, t0)
        sol.diagnostics.update(choice.to_dict())
        return sol

    # Products here are d x N x N: tiny, so single-threaded BLAS (threads cost more than they save).
    with blas_threads(2.0 * d * N * N):
        best, runs = None, []
        budget_hit = False
        for V0 in inits:
            if best is not None and deadline is not None and time.perf_counter() > deadline:
                budget_hit = True
                break
            if choice.backend == "numpy":
                V, nit, msg, nfev = _lbfgs_numpy(V0, cb, tau, nonneg, maxiter, stop_at, deadline)
            elif nonneg:  # UFM+ on torch: the bounded form, torch evaluating (see _torch_evaluator)
                V, nit, msg, nfev = _lbfgs_numpy(V0, cb, tau, nonneg, maxiter, stop_at, deadline,
                                                 evaluate=_torch_evaluator(cb, tau, choice.device, choice.dtype, d, N),
                                                 dtype=choice.dtype)
                msg = f"{msg} (L-BFGS-B, torch evaluations on {choice.device} ({choice.dtype}))"
            else:
                gtol = FACTORED_GTOL if choice.dtype == "float64" else FACTORED_GTOL_FLOAT32
                V, nit, msg, nfev = _lbfgs_torch(V0, cb, tau, nonneg, maxiter, gtol, choice.device, choice.dtype,
                                                 stop_at)
            H, _, _ = _features_from_params(V, nonneg)
            f, gH = _loss_features(H, cb, tau, True)  # float64 re-evaluation, whatever the backend
            kkt = kkt_residual(H, gH, nonneg)
            runs.append({"value": f, "kkt": kkt, "iterations": nit, "evaluations": nfev, "message": msg})
            if best is None or f < best[0]:
                best = (f, H, kkt, nit)
            if stop_at is not None and f <= stop_at:
                break
        rng = np.random.default_rng([seed, 1])
        n_hops = accepted = 0
        while (n_hops < hops and choice.backend == "numpy" and not (stop_at is not None and best[0] <= stop_at)
               and not (hop_until is not None and best[0] <= hop_until)):
            if deadline is not None and time.perf_counter() > deadline:
                budget_hit = True
                break
            n_hops += 1
            Hb = best[1]
            if nonneg:  # push every feature coordinate up (zeros included), in feature space
                Vp = np.sqrt(Hb + rng.uniform(0.0, HOP_SIZE_NONNEG * float(Hb.max()), Hb.shape))
            else:
                Vp = Hb + rng.normal(0.0, HOP_SIZE * float(np.abs(Hb).max()), Hb.shape)
            V, nit, msg, nfev = _lbfgs_numpy(Vp, cb, tau, nonneg, maxiter, stop_at, deadline)
            H, _, _ = _features_from_params(V, nonneg)
            f, gH = _loss_features(H, cb, tau, True)
            kkt = kkt_residual(H, gH, nonneg)
            runs.append({"value": f, "kkt": kkt, "iterations": nit, "evaluations": nfev, "message": msg, "hop": n_hops})
            if f < best[0]:
                best = (f, H, kkt, nit)
                accepted += 1
    f, H, kkt, nit = best
    values = [r["value"] for r in runs if "hop" not in r]
    param = "sphere, h = v/||v||" if not nonneg else "sphere x orthant, h = u/||u||, u >= 0 by bounds"
    return Solution(
        value=f, method=f"factored L-BFGS ({param}, {choice.backend}), {len(values)} starts"
                       + (f", {n_hops} hops" if n_hops else ""),
        converged=kkt <= KKT_TOL, seconds=time.perf_counter() - t0,
        variables={"H": H, "G": H.T @ H},
        diagnostics={"kkt_residual": kkt, "iterations": nit, "starts": len(runs) - n_hops,
                     "time_budget": time_budget, "time_budget_reached": bool(budget_hit
                                                                             or any(r["message"] == "time budget reached"
                                                                                    for r in runs)),
                     "hops": n_hops, "hops_accepted": accepted,
                     "evaluations": sum(r["evaluations"] for r in runs),
                     "start_values": values, "spread": max(values) - min(values), **choice.to_dict()},
    )


class _TargetReached(Exception):
    pass


class _Deadline(Exception):
    pass


def _lbfgs_numpy(V0, cb, tau, nonneg, maxiter, stop_at, deadline=None, evaluate=None, dtype="float64"):
    """scipy L-BFGS-B from the parameters V0 (``evaluate(H) -> (loss, dloss/dH)``: default numpy's float64 loss;
    ``dtype`` picks the gradient and loss tolerances). UFM: h = v/||v|| unconstrained. UFM+: the same map
    on u >= 0 with L-BFGS-B's bounds (u starts at the features of V0), which handles the orthant
    exactly: zeros are reached in finitely many steps and a zero coordinate that should grow is
    freed by the projected gradient, where the smooth map h = v∘v/||v∘v|| (still used by the torch
    backend) only approaches them. Measured on UFM+ full batch, 6 starts, N = 200: 144-263 instead
    of 2900-4800 evaluations, 10-25x less time; the non-global end points are genuine KKT points
    (residual ~1e-8) in both forms. Returns parameters in the v∘v form (v = sqrt(h) for UFM+)."""
    from scipy.optimize import minimize

    d, N = V0.shape
    hit = {"nfev": 0}
    evaluate = evaluate or (lambda H: _loss_features(H, cb, tau, True))
    gtol = FACTORED_GTOL if dtype == "float64" else FACTORED_GTOL_FLOAT32

    def to_params(U):
        return np.sqrt(_features_from_params(U, False)[0]) if nonneg else U

    def fun(x):
        hit["nfev"] += 1
        U = x.reshape(d, N)
        H, _, nr = _features_from_params(U, False)  # h = u/||u|| (u >= 0 for UFM+)
        f, gH = evaluate(H)
        if stop_at is not None and f <= stop_at:
            hit["V"] = to_params(U.copy())
            raise _TargetReached
        if deadline is not None:
            if hit.get("best") is None or f < hit["best"][0]:
                hit["best"] = (f, x.copy())
            if time.perf_counter() > deadline:
                raise _Deadline
        return f, _param_grad(U, H, nr, gH, False).ravel()

    x0 = _features_from_params(V0, True)[0] if nonneg else V0
    bounds = [(0.0, None)] * x0.size if nonneg else None
    try:
        res = minimize(fun, x0.ravel(), jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": maxiter, "gtol": gtol, "ftol": FACTORED_FTOL[dtype],
                                "maxcor": FACTORED_MEMORY})
    except _TargetReached:
        return hit["V"], None, "target value reached", hit["nfev"]
    except _Deadline:
        return to_params(hit["best"][1].reshape(d, N)), None, "time budget reached", hit["nfev"]
    return to_params(res.x.reshape(d, N)), int(res.nit), str(res.message), hit["nfev"]


def _torch_evaluator(cb: CompiledBatching, tau: float, device, dtype: str, d: int, N: int):
    """``evaluate(H) -> (loss, dloss/dH)`` for :func:`_lbfgs_numpy`: :func:`torch_loss` and autograd on ``device`` in
    ``dtype`` (numbers handed back in float64).

    UFM+ on torch runs scipy's L-BFGS-B on the bounded form, as the numpy backend does, with torch evaluating. The
    smooth map h = v∘v/||v∘v|| that torch.optim.LBFGS needed turns a weakly active orthant constraint (multiplier
    ~0, residual r ~ c h near the minimiser) into a quartic c v^4 in v, and the tail converges sublinearly.
    Measured on counts (2, 2, 3), d = 4, tau = 0.5, batches [[0, 1, 4, 5], [2, 3, 6], [0, 2, 5, 6]] (where
    classes 0 and 1 never meet): one start of torch's L-BFGS took 4926 evaluations / 3152 iterations, its value
    creeping 2e-10 -> 6e-11 above the optimum; the bounded form, 33 evaluations for two starts. On 10 x 2 samples,
    tau = 0.3, two batches of five classes, the 200-iteration confirmation solve ended at KKT residual 1.9e-5
    (not converged); the bounded form converges in 17 iterations."""
    import torch

    from solvers.common import SMALL_GEMM_FLOPS

    tdt = torch.float64 if dtype == "float64" else torch.float32
    prepared = _torch_groups(cb, device, tdt)
    one_thread = torch.device(device).type == "cpu" and 2.0 * d * N ** 2 < SMALL_GEMM_FLOPS

    def evaluate(H):
        threads = torch.get_num_threads()
        try:
            if one_thread:  # small products on the CPU: one thread (see _lbfgs_torch)
                torch.set_num_threads(1)
            Ht = torch.tensor(H, dtype=tdt, device=device, requires_grad=True)
            val = torch_loss(Ht, cb, tau, prepared)
            val.backward()
        finally:
            torch.set_num_threads(threads)
        return float(val.detach()), Ht.grad.detach().to("cpu", torch.float64).numpy()

    return evaluate


def _torch_groups(cb: CompiledBatching, device, dtype):
    """The batching's index/mask arrays as torch tensors on ``device`` (prepared once per solve)."""
    import torch

    out = []
    for g in cb.groups:
        m = g.idx.shape[1]
        out.append((None if cb.full else torch.as_tensor(g.idx, device=device),
                    torch.as_tensor(g.pos, device=device),
                    torch.as_tensor(1.0 / np.maximum(g.npos, 1), device=device, dtype=dtype),
                    torch.eye(m, dtype=torch.bool, device=device),
                    torch.as_tensor(g.anchor, device=device)))
    return out


def torch_loss(H, cb: CompiledBatching, tau: float, prepared=None):
    """The loss of :func:`scl_loss` written with torch primitives (autograd gives the gradient).

    ``H``: a torch tensor d x N (any dtype/device); ``cb``: a :class:`CompiledBatching`. Same
    formula: per batch, LSE over l != i of G_il/tau minus the mean over positives, anchors without
    a positive contribute 0, the batching's loss is the sum over batches. ``prepared``: the output
    of ``_torch_groups`` for H's device and dtype (saves the host-to-device copies in loops)."""
    import torch

    groups = prepared if prepared is not None else _torch_groups(cb, H.device, H.dtype)
    total = (H * 0).sum()  # zero, but on the graph (a batching may have no anchor at all)
    for idx, pos, inv, eye, anchor in groups:
        if idx is None:  # full batch in natural order
            S = (H.T @ H)[None] / tau
        else:
            HB = H.T[idx]  # (b, m, d)
            S = HB @ HB.transpose(1, 2) / tau
        pos_mean = (S * pos).sum(-1) * inv
        lse = torch.logsumexp(S.masked_fill(eye, float("-inf")), dim=-1)
        total = total + torch.where(anchor, lse - pos_mean, torch.zeros_like(lse)).sum()
    return total


def torch_features(V, nonneg: bool):
    """torch version of :func:`_features_from_params` (same map, zero columns left as zero)."""
    import torch

    W = V * V if nonneg else V
    nr = torch.linalg.vector_norm(W, dim=0)
    nr = torch.where(nr > 0, nr, torch.ones_like(nr))
    return W / nr


def _lbfgs_torch(V0, cb, tau, nonneg, maxiter, gtol, device, dtype, stop_at):
    import torch

    tdt = torch.float64 if dtype == "float64" else torch.float32
    V = torch.tensor(V0, dtype=tdt, device=device, requires_grad=True)
    # torch's tolerance_change is absolute (on loss changes and steps); scale the relative FTOL by the
    # starting loss, as scipy's ftol is relative. Without it a start stuck at a local minimum runs to
    # max_eval (measured: 4981 evaluations instead of ~500 at N = 200).
    f0 = _loss_features(_features_from_params(V0, nonneg)[0], cb, tau, False)[0]
    tol_change = FACTORED_FTOL[dtype] * max(1.0, abs(f0))
    opt = torch.optim.LBFGS([V], lr=1.0, max_iter=maxiter, max_eval=2 * maxiter, tolerance_grad=gtol,
                            tolerance_change=tol_change, history_size=FACTORED_MEMORY, line_search_fn="strong_wolfe")
    hit = {"nfev": 0}
    prepared = _torch_groups(cb, V.device, tdt)

    def closure():
        hit["nfev"] += 1
        opt.zero_grad()
        val = torch_loss(torch_features(V, nonneg), cb, tau, prepared)
        if stop_at is not None and float(val.detach()) <= stop_at:
            hit["V"] = V.detach().to("cpu", torch.float64).numpy().copy()
            raise _TargetReached
        val.backward()
        return val

    from solvers.common import SMALL_GEMM_FLOPS

    # Small products on the CPU: one thread (as blas_threads does for numpy). Measured on the shared
    # 2-core machine, N = 200, d = 11: 1.4 ms per evaluation with one thread, 2.5 ms to 80 ms with two.
    threads = torch.get_num_threads()
    one_thread = V.device.type == "cpu" and 2.0 * V0.shape[0] * V0.shape[1] ** 2 < SMALL_GEMM_FLOPS
    try:
        if one_thread:
            torch.set_num_threads(1)
        opt.step(closure)
    except _TargetReached:
        return hit["V"], None, "target value reached", hit["nfev"]
    finally:
        torch.set_num_threads(threads)
    nit = int(opt.state[opt._params[0]].get("n_iter", 0))
    return V.detach().to("cpu", torch.float64).numpy(), nit, f"torch LBFGS on {device} ({dtype})", hit["nfev"]


#: d = 1 without nonnegativity: the sphere is {-1, +1}, so gradients carry no information; the
#: problem is enumerated exactly (first sign fixed by symmetry) up to this many samples.
MAX_EXHAUSTIVE_LINE = 16


def _solve_line(inst: SCLInstance, cb: CompiledBatching, t0: float) -> Solution:
    """d = 1: UFM+ has the single feasible point h = 1; UFM is a sign assignment, enumerated."""
    N, tau = inst.N, inst.tau
    if inst.nonneg:
        H = np.ones((1, N))
        f = _loss_features(H, cb, tau, False)[0]
        return Solution(f, "d = 1, UFM+: the only feasible point (all features +1)", True,
                        time.perf_counter() - t0, {"H": H, "G": H.T @ H},
                        {"kkt_residual": 0.0, "starts": 1, "start_values": [f], "spread": 0.0})
    if N > MAX_EXHAUSTIVE_LINE:
        raise InstanceError(f"d = 1 without nonnegativity is a sign problem; exhaustive search handles "
                            f"N <= {MAX_EXHAUSTIVE_LINE} samples, got N = {N}")
    best = None
    for code in range(2 ** (N - 1)):
        signs = np.ones(N)
        bits = (code >> np.arange(N - 1)) & 1
        signs[1:] = 1.0 - 2.0 * bits
        f = _loss_features(signs[None, :], cb, tau, False)[0]
        if best is None or f < best[0]:
            best = (f, signs)
    f, signs = best
    H = signs[None, :]
    return Solution(f, f"d = 1, UFM: exhaustive over {2 ** (N - 1)} sign patterns", True,
                    time.perf_counter() - t0, {"H": H, "G": H.T @ H}, {"kkt_residual": 0.0, "starts": 2 ** (N - 1),
                                                                     "start_values": [f], "spread": 0.0})
