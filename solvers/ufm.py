"""Solvers for the classic UFM (docs/ufm.md): factored nonconvex, convex nuclear-norm, and a
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
from scipy.special import softmax

from solvers import lbfgs
from solvers.losses import max_shifted_softmax
from solvers.common import Certificate, Solution, blas_all_threads, blas_threads, solve_conic, usable_cores
from theory.ufm import UFMInstance

#: Gradient tolerance for L-BFGS (max-abs entry of the gradient); the
#: objective is smooth and strongly convex near the ETF optimum (away from s = 1/k), so
#: 1e-9 gives values accurate to ~1e-12.
LBFGS_GTOL = 1e-9
#: In float32 the gradient cannot go much below ~1e-6 of its scale; the result is then
#: reported with its float64 gradient and is "converged" only if that is small too.
LBFGS_GTOL_FLOAT32 = 1e-5
#: Largest ``gtol`` solve_factored accepts (the default is LBFGS_GTOL = 1e-9): for objectives of order 1 a
#: max-abs gradient entry above 1e-2 is no convergence test; gtol = 1e300 stopped every start at its random point
#: and reported it converged (|grad| <= 10 gtol).
GTOL_MAX = 1e-2
#: Variable projection (MSE) is the default only when N lh >= this: B = (W W^T + N lh I)^{-1} is then well
#: conditioned. Measured: k = 20, n = 3, relative gap ~1e-12 in 18-144 evaluations for lam = 1e-2..1e-5
#: (N lh >= 6e-4); k = 6, n = 3, lam = 1e-7 (N lh = 1.8e-6): gap 1e-8 after 80000 evaluations, while the
#: joint route reached 1.4e-12 in 392.
VP_MIN_NLH = 1e-4
#: L-BFGS memory. Measured (benchmarks, CE/MSE k = 50..300): 10 pairs need about as many
#: evaluations as 20 or 30, while the per-iteration work grows with the memory, so 10 is fastest.
LBFGS_MEMORY = 10

#: Consecutive iterations without progress (value above rounding, or 1% of max |g|) after which a start stops
#: (lbfgs.minimize ``stall_iters``): a start whose gradient's rounding floor sits just above gtol ran to its
#: 80 020-evaluation limit (ufm-mse k = 3, n = 2, d = 3, one start in six: max |g| 1.6e-9 against gtol 1e-9).
LBFGS_STALL_ITERS = 50
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
#: Above this many entries of the (reduced) candidate the KKT residuals (a full SVD) are skipped;
#: the dual bound does not need them.
KKT_MAX_SIZE = 250_000


# ---------------------------------------------------------------------------------------
# The loss (defined once)
# ---------------------------------------------------------------------------------------

def ce_parts(U: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column cross-entropy and its gradient P - Y (k x m), in stable form.

    With m_i the largest logit of column i, E = exp(U - m) has one entry exactly 1 and
    ``rest`` = the sum of the others; the loss is (m_i - u_{y_i}) + log1p(rest) (exact when the label
    is the largest logit, where the naive log(1 + rest) loses all digits below 1e-16), and the label
    entry of P - Y is -rest/(1 + rest) there (no cancellation of 1 - p_y). Relative accuracy ~1e-15
    per entry at every scale of the loss (tested at lambda = 1e-7).
    """
    cols = np.arange(U.shape[1])
    am, mx, rest, P = max_shifted_softmax(U)
    loss = (mx - U[y, cols]) + np.log1p(rest)
    label_is_max = am == y
    py_minus_1 = np.where(label_is_max, -rest / (1.0 + rest), P[y, cols] - 1.0)
    P[y, cols] = py_minus_1
    return loss, P


def data_loss(loss: str, U: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean data loss over samples and its gradient with respect to the logits U (k x N).

    CE: (1/N) sum_i [logsumexp(u_i) - u_{i, y_i}], gradient (softmax(U) - Y)/N (stable: :func:`ce_parts`).
    MSE: (1/(2N)) ||U - Y||_F^2, gradient (U - Y)/N.
    """
    k, N = U.shape
    idx = (y, np.arange(N))
    if loss == "ce":
        per, G = ce_parts(U, y)
        return float(np.sum(per) / N), G / N
    R = U.copy()
    R[idx] -= 1.0
    return float(0.5 * np.sum(R * R) / N), R / N


def objective(inst: UFMInstance, W: np.ndarray, H: np.ndarray, b: np.ndarray) -> float:
    """Factored objective f(W, H, b) of docs/ufm.md."""
    val, _ = data_loss(inst.loss, W @ H + b[:, None], inst.labels())
    return val + 0.5 * (inst.lw * np.sum(W * W) + inst.lh * np.sum(H * H) + inst.lb * np.sum(b * b))


def objective_and_grad(x: np.ndarray, inst: UFMInstance, y: np.ndarray | None = None):
    """Packed objective and gradient for optimizers: x = [vec(W), vec(H), b].

    The same loss as :func:`data_loss` (a test checks both against finite differences); see
    :class:`JointObjective` for the evaluation, which solvers reuse across calls.
    """
    return JointObjective(inst, blocks=1)(x)


#: Column blocks are worth a thread only when each block's matrix products reach this many flops.
#: Measured on the shared 2-core machine under load (issue 28: threaded blocks collapse when the other core is
#: busy): k = 100, n = 10 (2e7 flops per product) one block 2.7 ms vs two 5.7 ms; k = 100, n = 50: 29 vs 31 ms;
#: k = 200, n = 20 (3.2e8): 91 vs 94 ms. (Idle, two blocks were 1.3-2x faster from 1.3e7 flops.) Below this size the
#: gradient runs single-threaded in one block: the same speed at any load (solvers.common.SMALL_GEMM_FLOPS).
BLOCK_MIN_FLOPS = 2e8
#: At most this many column blocks. The number of blocks depends on the sizes only (never on the cores), so the
#: summation order, and with it every bit of the value and gradient, is the same on any machine and at any number
#: of threads; the threads (min(usable cores, blocks)) only decide which block runs where.
MAX_BLOCKS = 8
#: The fused CE evaluation (:meth:`JointObjective._ce_exp`) takes exp of the logits themselves when every label's
#: term exp(u_y) is at least this (label logits >= about -665): an exp of another logit that underflows (absolute
#: error up to 2^-1074) is then off by at most 2^-114 of the label's term, far under the 2^-53 rounding of the sum
#: 1 + rest in the label-shifted evaluation, which is used below it (and above exp's range, ~709.78).
EXP_LABEL_MIN = 2.0 ** -960
FLOAT64_MAX = float(np.finfo(np.float64).max)


class JointObjective:
    """f(W, H, b) and its gradient for one instance, with buffers reused across evaluations.

    Three matrix products (W H, G H^T, W^T G) and one pass of exp over the logits, in place. Use inside
    :func:`single_threaded_blas` (``blas_threads(0)``). Below ``BLOCK_MIN_FLOPS`` per product (``blocks=1``)
    one fused single-threaded evaluation (:meth:`_single`: no temporaries, the bias and the regularisers enter
    the products through BLAS's beta and 1/N through its alpha, CE without a max or shift pass;
    docs/benchmarks.md has its speed against three single-thread GEMMs of the same shapes). Above it the samples are split into column blocks that run on
    threads (numpy and BLAS release the GIL), each with single-threaded BLAS. The number of blocks depends on
    the sizes only (``MAX_BLOCKS``), so the result is bit-identical at any number of threads or cores.
    """

    def __init__(self, inst: UFMInstance, blocks: int | None = None, fused: bool = True):
        k, d, N = inst.k, inst.d, inst.N
        if blocks is None:
            blocks = min(MAX_BLOCKS, int(2.0 * k * d * N // BLOCK_MIN_FLOPS))
        blocks = max(1, min(int(blocks), N))
        self.inst, self.blocks = inst, blocks
        self.workers = min(usable_cores(), blocks)
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
        self.fused = fused and blocks == 1  # False: the blocked evaluation in one block (benchmarks, tests)
        if self.fused:
            from scipy.linalg.blas import dgemm  # imported here: it is 1.5 us per call inside the evaluation

            self._dgemm = dgemm
            self.ones_k, self.ones_n = np.ones(k), np.ones(N)
            self.colsum, self.label_g, self.logs, self.rest = np.empty(N), np.empty(N), np.empty(N), np.empty(N)

    def __call__(self, x: np.ndarray):
        self.nfev += 1
        if self.fused:
            return self._single(x)
        inst, kd, dN = self.inst, self.kd, self.dN
        k, d, N = inst.k, inst.d, inst.N
        W = x[:kd].reshape(k, d)
        H = x[kd: kd + dN].reshape(d, N)
        b = x[kd + dN:]
        g = np.empty_like(x)
        gH = g[kd: kd + dN].reshape(d, N)
        nw = min(self.workers, self.blocks)

        def run(t):  # thread t evaluates blocks t, t + nw, ...
            return [self._block(j, W, H, b, gH) for j in range(t, self.blocks, nw)]

        if nw == 1:
            parts = run(0)
        else:
            pool = _thread_pool(nw - 1)
            futures = [pool.submit(run, t) for t in range(1, nw)]
            mine = run(0)
            per_thread = [mine] + [f.result() for f in futures]
            parts = [per_thread[j % nw][j // nw] for j in range(self.blocks)]  # summed in block order
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

    def _single(self, x: np.ndarray):
        """One block, fused, no temporaries. U = b 1^T (one broadcast copy) + W H (GEMM with beta = 1); U then
        becomes N G in place (CE: :meth:`_ce_exp`, or :meth:`_ce_label_shifted` when a label logit is outside
        the range of exp; MSE: U - Y), and 1/N enters the two gradient products as BLAS's alpha (one rounding of
        each product instead of one per entry of G), lh H and lw W as their beta, G 1 as a matrix-vector
        product. When a logit exceeds its label's by more than ~700 the max-shifted :meth:`_block` is used."""
        dgemm = self._dgemm
        inst, kd, dN = self.inst, self.kd, self.dN
        k, d, N = inst.k, inst.d, inst.N
        x = np.asarray(x, dtype=np.float64)  # the products write into float64 buffers in place
        xw, xh, b = x[:kd], x[kd: kd + dN], x[kd + dN:]
        W, H = xw.reshape(k, d), xh.reshape(d, N)
        g = np.empty_like(x)
        gW, gH, gb = g[:kd].reshape(k, d), g[kd: kd + dN].reshape(d, N), g[kd + dN:]
        U, flat = self.U[0], self.label_pos[0]
        Uf, Ut, Wt, Ht = U.reshape(-1), U.T, W.T, H.T
        np.copyto(U, b[:, None])  # U = b 1^T: one pass (fill + ger were two; the same bits)
        dgemm(1.0, Ht, Wt, 1.0, Ut, 0, 0, 1)  # U += W H (positional: f2py parses keywords slowly)
        if inst.loss == "ce":
            val = self._ce_exp(U, Uf, flat)
            if val is None:  # U was overwritten: the logits again, shifted by their labels'
                np.copyto(U, b[:, None])
                dgemm(1.0, Ht, Wt, 1.0, Ut, 0, 0, 1)
                val = self._ce_label_shifted(U, Uf, flat)
                if val is None:
                    return self._fallback(x)
        else:
            Uf[flat] -= 1.0  # N G = U - Y
            val = 0.5 * float(np.dot(Uf, Uf))
        inv_n = 1.0 / N
        np.multiply(H, inst.lh, out=gH)
        hh = float(np.dot(xh, xh))  # while H is in cache
        dgemm(inv_n, Ut, Wt, 1.0, gH.T, 0, 1, 1)  # gH = W^T G + lh H
        np.multiply(W, inst.lw, out=gW)
        dgemm(inv_n, Ht, Ut, 1.0, gW.T, 1, 0, 1)  # gW = G H^T + lw W
        np.dot(U, self.ones_n, out=gb)
        np.multiply(gb, inv_n, out=gb)  # G 1
        if inst.lb:
            gb += inst.lb * b
        dot = np.dot  # np.dot: the same BLAS ddot as @, with less overhead
        f = val / N + 0.5 * (inst.lw * float(dot(xw, xw)) + inst.lh * hh + inst.lb * float(dot(b, b)))
        return f, g

    def _ce_exp(self, U, Uf, flat):
        """CE on the logits U (k x N, in place): the summed loss, U = N (softmax - Y); None (U destroyed) when a
        label logit is outside [log EXP_LABEL_MIN, ~709.78] or a column sum of exp overflows.

        exp of the logits themselves (no shift pass): e_i = exp(u_{y_i i}) is the label's term, rest_i the sum of
        the others (the label entries are zeroed before the column sums, so rest_i is a sum of positive terms and
        carries no cancellation); loss_i = log1p(rest_i / e_i), accurate to a few ulp at every size of the loss
        (the label-shifted log(1 + rest) rounds 1 + rest, losing every digit of a loss below 1e-16), and the
        label entry of N G is -rest_i / (e_i + rest_i), without the cancellation of p_y - 1. Every exp is
        that of a float64 input (no rounded difference of logits inside it)."""
        rest, t, r = self.rest, self.colsum, self.logs
        with np.errstate(over="ignore", under="ignore"):
            np.exp(U, out=U)
            e = Uf[flat]
            Uf[flat] = 0.0
            np.dot(self.ones_k, U, out=rest)
            np.add(e, rest, out=t)  # the column sums of exp
            # t finite: no exp overflowed (t >= every term, all >= 0; a NaN fails the test too)
            if not (np.minimum.reduce(e) >= EXP_LABEL_MIN and np.maximum.reduce(t) <= FLOAT64_MAX):
                return None
            np.divide(rest, e, out=r)
            val = float(np.add.reduce(np.log1p(r, out=r)))  # add.reduce: np.sum's pairwise sum, less overhead
        if not math.isfinite(val):  # rest / e overflowed
            return None
        np.divide(rest, t, out=rest)
        np.divide(1.0, t, out=t)
        np.multiply(U, t, out=U)  # N softmax, label entries 0
        Uf[flat] = np.negative(rest, out=rest)  # N (p_y - 1) = -rest / t
        return val

    def _ce_label_shifted(self, U, Uf, flat):
        """CE on the logits U (in place), each sample shifted by its label logit: the label entry becomes exactly
        0, so every column sum s of exp is >= 1 and loss_i = log(s_i), with no max pass; U = N (softmax - Y).
        For label logits outside the range of :meth:`_ce_exp`; None when a logit exceeds its label's by more
        than ~700 (a column sum overflows)."""
        s = self.colsum
        np.subtract(U, Uf[flat], out=U)  # U_y = 0 exactly
        with np.errstate(over="ignore"):
            np.exp(U, out=U)
        np.dot(self.ones_k, U, out=s)
        # s >= 1, so the sum of the logs is finite iff every s is
        val = float(np.add.reduce(np.log(s, out=self.logs)))
        if not math.isfinite(val):
            return None
        np.divide(1.0, s, out=s)
        np.multiply(U, s, out=U)  # N softmax; the label entries are exp(0) / s = 1 / s exactly
        Uf[flat] = np.subtract(s, 1.0, out=self.label_g)  # N (P - Y)
        return val

    def _fallback(self, x: np.ndarray):
        """The max-shifted evaluation of one block (logits far above their label's)."""
        inst, kd, dN = self.inst, self.kd, self.dN
        k, d, N = inst.k, inst.d, inst.N
        W, H, b = x[:kd].reshape(k, d), x[kd: kd + dN].reshape(d, N), x[kd + dN:]
        g = np.empty_like(x)
        val, pW, pb = self._block(0, W, H, b, g[kd: kd + dN].reshape(d, N))
        g[:kd] = (inst.lw * W + pW).reshape(-1)
        g[kd + dN:] = inst.lb * b + pb
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
    return list(iter_initial_points(inst, starts, seed, init_scale))


def iter_initial_points(inst: UFMInstance, starts: int, seed: int, init_scale: float = 0.5):
    """The same starts as :func:`initial_points`, one at a time (memory of one start, not ``starts``)."""
    rng = np.random.default_rng(seed)
    size = inst.k * inst.d + inst.d * inst.N + inst.k
    for _ in range(starts):
        x0 = rng.standard_normal(size) * init_scale / math.sqrt(inst.d)
        x0[-inst.k:] = 0.0
        yield x0


def solve_factored(inst: UFMInstance, *, starts: int = 3, seed: int = 0, init_scale: float = 0.5,
                   maxiter: int = 20000, gtol: float | None = None, backend: str = "numpy",
                   device: str | None = None, dtype: str = "float64", stop_at: float | None = None,
                   rebalance_every: int | None = REBALANCE_EVERY,
                   variable_projection: bool | None = None, time_budget: float | None = None,
                   balance_decay: bool = True) -> Solution:
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

    ``time_budget`` (seconds, numpy backend): no new start begins and the running one stops at its best
    point once the wall-clock time since the call exceeds it (``diagnostics["time_budget_reached"]``,
    and the result is then reported as not converged unless its gradient says otherwise).
    """
    from solvers.backends import resolve
    from theory._validate import InputError, as_float, as_int

    # every option checked before work, naming the parameter (NaN maxiter/gtol/stop_at were silently accepted,
    # rebalance_every = -1 never ended)
    starts = as_int("starts", starts, minimum=1)
    seed = as_int("seed", seed, minimum=0)
    init_scale = as_float("init_scale", init_scale, positive=True)
    if init_scale > 1e6:  # the random starts overflow (1e300: 'SVD did not converge')
        raise InputError(f"init_scale must be in (0, 1e6], got {init_scale:g}")
    maxiter = as_int("maxiter", maxiter, minimum=1)
    gtol = None if gtol is None else as_float("gtol", gtol, nonnegative=True)
    if gtol is not None and gtol > GTOL_MAX:
        raise InputError(f"gtol must be in [0, {GTOL_MAX:g}] (L-BFGS stops once the gradient's max-abs entry is "
                         f"below it; default {LBFGS_GTOL:g}), got {gtol:g}")
    stop_at = None if stop_at is None else as_float("stop_at", stop_at)
    rebalance_every = None if rebalance_every is None else as_int("rebalance_every", rebalance_every, minimum=1)
    if time_budget is not None:  # NaN would switch the budget off (every comparison with NaN is False)
        time_budget = as_float("time_budget", time_budget, positive=True)
    if balance_decay and inst.lw != inst.lh:
        # Exact change of variables W = a W', H = H'/a with a = (lh/lw)^(1/4): the data term is unchanged and
        # (lw ||W||^2 + lh ||H||^2)/2 = lam (||W'||^2 + ||H'||^2)/2, lam = sqrt(lw lh). Solving the balanced
        # instance removes the ill-conditioning of extreme ratios (measured: lw = 1e-8, lh = 7e8 stopped at a
        # relative gap 1e-5 without it). The value and gradient are re-evaluated on the original instance.
        bal = UFMInstance(inst.loss, inst.k, inst.n, inst.d, inst.lam, inst.lam, inst.lb)
        sol = solve_factored(bal, starts=starts, seed=seed, init_scale=init_scale, maxiter=maxiter, gtol=gtol,
                             backend=backend, device=device, dtype=dtype, stop_at=stop_at,
                             rebalance_every=rebalance_every, variable_projection=variable_projection,
                             time_budget=time_budget, balance_decay=False)
        a = (inst.lh / inst.lw) ** 0.25
        W, H, b = a * sol.variables["W"], sol.variables["H"] / a, sol.variables["b"]
        sol.variables.update(W=W, H=H)
        sol.value = objective(inst, W, H, b)
        sol.diagnostics["balanced_decay"] = f"solved with lw = lh = {inst.lam:g} and W = {a:g} W', H = H'/{a:g}"
        return sol
    choice = resolve(backend, device, dtype)
    if variable_projection is None:
        variable_projection = inst.loss == "mse" and choice.backend == "numpy" and inst.N * inst.lh >= VP_MIN_NLH
    elif variable_projection and (inst.loss != "mse" or choice.backend != "numpy"):
        raise ValueError("variable_projection needs loss 'mse' and the numpy backend "
                         f"(got loss {inst.loss!r}, backend {choice.backend!r})")
    if gtol is None:
        # below lam = 1e-2 the gradient (and the objective, ~ lam) shrink with lam: the float64 stopping
        # tolerance shrinks as sqrt(lam) so that the value reaches ~1e-10 relative (measured: lam = 3.5e-8,
        # CE k = 23: relative gap 7.7e-6 with 1e-9, 1.3e-11 with 1e-12)
        gtol = (LBFGS_GTOL * min(1.0, 10.0 * math.sqrt(inst.lam)) if choice.dtype == "float64"
                else LBFGS_GTOL_FLOAT32)
    t0 = time.perf_counter()
    # one BLAS thread; the joint objective runs its column blocks on threads (JointObjective)
    with blas_threads(0.0):
        return _solve_factored(inst, starts, seed, init_scale, maxiter, gtol, choice, stop_at, t0, rebalance_every,
                               variable_projection, None if time_budget is None else t0 + float(time_budget))


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
        r = lbfgs.minimize(fun, x0, gtol=gtol, maxiter=maxiter, memory=LBFGS_MEMORY, stall_iters=LBFGS_STALL_ITERS)
        return r.x, r.nit, r.message
    x, nit, r = rebalance(inst, x0), 0, None
    while nit < maxiter:
        # a restart keeps the storage and the last inverse-Hessian scale, not the stale pairs
        # (measured: the scale saves 3-12% of the evaluations on the benchmark instances)
        r = lbfgs.minimize(fun, x, gtol=gtol, maxiter=min(every, maxiter - nit), memory=LBFGS_MEMORY,
                           stall_iters=LBFGS_STALL_ITERS,
                           state=r.state if r else None, gamma0=r.gamma if r else None)
        nit += r.nit
        if r.converged or r.nit == 0 or not r.message.startswith("maximum number of iterations"):
            return r.x, nit, r.message
        x = rebalance(inst, r.x)
    return x, nit, "maximum number of iterations reached"


def _solve_factored(inst, starts, seed, init_scale, maxiter, gtol, choice, stop_at, t0, rebalance_every,
                    variable_projection, deadline=None) -> Solution:
    y = inst.labels()
    best, runs = None, []
    nfev_total = 0
    fallback = None
    budget_hit = False
    for x0 in iter_initial_points(inst, starts, seed, init_scale):
        if deadline is not None and runs and time.perf_counter() > deadline:
            budget_hit = True
            break
        x = None
        if variable_projection and fallback is None:
            fun = _Objective(inst, stop_at, projected_objective_and_grad, deadline=deadline)
            try:
                try:
                    res = lbfgs.minimize(fun, x0[: inst.k * inst.d], gtol=gtol, maxiter=maxiter, memory=LBFGS_MEMORY,
                                         stall_iters=LBFGS_STALL_ITERS)
                    w, nit, msg = res.x, res.nit, res.message
                except _TargetReached:
                    w, nit, msg = fun.x_hit, fun.nfev, "target value reached"
                except _BudgetReached:
                    w, nit, msg = fun.x_best, fun.nfev, "time budget reached"
                    budget_hit = True
                x = projected_point(inst, w)
            except FloatingPointError as exc:  # N lh below rounding: the joint route still works
                fallback = f"{exc}; ran the joint route instead"
            nfev_total += fun.nfev
        if x is None and choice.backend == "numpy":
            fun = _Objective(inst, stop_at, deadline=deadline)
            try:
                x, nit, msg = _lbfgs_rebalanced(inst, fun, x0, maxiter, gtol, rebalance_every)
            except _TargetReached:
                x, nit, msg = fun.x_hit, fun.nfev, "target value reached"
            except _BudgetReached:
                x, nit, msg = fun.x_best, fun.nfev, "time budget reached"
                budget_hit = True
            nfev_total += fun.nfev
        elif x is None:
            x, nit, msg = _lbfgs_torch(inst, x0, maxiter=maxiter, gtol=gtol, device=choice.device, dtype=choice.dtype)
        f, g = objective_and_grad(x, inst, y)
        W_, H_, b_ = unpack(inst, x)
        f = objective(inst, W_, H_, b_)  # the stable loss (log1p): the fast path loses digits at tiny loss
        gnorm = float(np.max(np.abs(g)))
        runs.append({"value": float(f), "iterations": nit, "grad_max": gnorm,
                     "converged": bool(gnorm <= 10 * gtol), "message": msg})
        if best is None or f < best[0]:
            best = (float(f), x, gnorm, nit)
        if budget_hit:
            break
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
                     "starts_run": len(runs), "time_budget_reached": budget_hit,
                     **choice.to_dict()})


class _TargetReached(Exception):
    pass


class _BudgetReached(Exception):
    pass


class _Objective:
    """objective_and_grad with an evaluation counter and an optional early stop at a target value."""

    def __init__(self, inst: UFMInstance, stop_at: float | None, fn=None, deadline: float | None = None):
        self.inst, self.stop_at, self.nfev, self.y = inst, stop_at, 0, inst.labels()
        self.x_hit = None
        self.deadline, self.f_best, self.x_best = deadline, math.inf, None
        self.fn = fn
        self.joint = JointObjective(inst) if fn is None else None

    def __call__(self, x):
        self.nfev += 1
        f, g = self.joint(x) if self.fn is None else self.fn(x, self.inst)
        if self.stop_at is not None and f <= self.stop_at:
            self.x_hit = x.copy()
            raise _TargetReached
        if self.deadline is not None:
            if f < self.f_best:
                self.f_best, self.x_best = f, x.copy()
            if time.perf_counter() > self.deadline and self.x_best is not None:
                raise _BudgetReached
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
    try:
        B, u = _projection(inst, W)
    except FloatingPointError:
        if not np.all(np.isfinite(W)):
            raise
        # a line-search trial far out (||W||^2 beyond N lh / rounding): f(W) >= (lw/2) ||W||^2 exceeds every point
        # seen, so report it as such (the line search backtracks on a non-finite value) instead of giving up the
        # route; at the start point L-BFGS stops on it and the caller's projected_point raises as before
        return math.inf, np.full(w.shape, np.nan)
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
    # one solve-with-fallback policy; solver warnings are captured as data, never printed
    run = solve_conic(prob, solver=solver)
    ok = bool(run["optimal"])
    Zv = np.asarray(Z.value) if Z.value is not None else np.zeros((k, N))
    bv = np.asarray(b.value) if b.value is not None else np.zeros(k)
    if not (np.all(np.isfinite(Zv)) and np.all(np.isfinite(bv))):
        Zv, bv = np.zeros((k, N)), np.zeros(k)
        run["warnings"].append("solver returned non-finite values; the point Z = 0 is reported instead")
    bv = polish_bias(inst, Zv, bv)
    val = convex_objective(inst, Zv, bv)
    cert = certificate(inst, Zv, bv)
    return Solution(val, f"convex-cvxpy({run['solver']})", ok, time.perf_counter() - t0, {"Z": Zv, "b": bv},
                    {"status": run["status"], "solver_value": float(prob.value) if prob.value is not None else None,
                     "attempts": run["attempts"], "solver_warnings": run["warnings"]},
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


#: Round-off allowance of the dual value: each term is evaluated with a relative error of a few units
#: of round-off u (stable formulas: log1p, no cancellation of 1 - p_y), and recursive summation (k entries of a
#: column, then m columns) adds at most 1.01 (k + m) u of their absolute sum (Higham, "Accuracy and Stability of Numerical
#: Algorithms", eq. 4.4). The proven bound is the computed dual value minus
#: (2 (k + m) + 16) u * (sum of |terms|), so it errs on the safe side.
UNIT_ROUNDOFF = 2.0 ** -53


def _certificate(inst: UFMInstance, Zu: np.ndarray, b: np.ndarray, yu: np.ndarray, w: np.ndarray,
                 method: str, direction: np.ndarray | None = None, kkt_max: int = KKT_MAX_SIZE) -> Certificate:
    """Certificate on unique columns Zu (k x m) with labels yu and multiplicities w (sum w = N).

    Z = Zu E with E E^T = diag(w), so every Frobenius/spectral quantity of Z equals that of
    Zu diag(sqrt(w)) and every sum over samples is a w-weighted sum over unique columns.
    ``direction`` (k x m, optional): the per-column loss gradient P - Y (CE) or U - Y (MSE) from an
    exact formula, used to build the dual point instead of the one computed at the float candidate
    (for MSE at small lambda, U - Y cancels to a few digits). Any direction gives a valid bound: the
    dual point's feasibility (spectral norm, simplex, centred rows) is checked numerically here.
    """
    N, lam = inst.N, inst.lam
    m = Zu.shape[1]
    idx = (yu, np.arange(m))
    sw = np.sqrt(w)
    Uo = Zu + b[:, None]
    details: dict = {}
    if inst.loss == "ce":
        per, V = ce_parts(Uo, yu)  # V = P - Y per column, stable
        data = float(np.dot(w, per)) / N
    else:
        V = Uo.copy()
        V[idx] -= 1.0
        data = 0.5 * float(np.dot(w, np.sum(V * V, axis=0))) / N
    if direction is not None:
        V = np.array(direction, dtype=float)
        details["dual_direction"] = "closed-form gradient"
    Zs = Zu * sw  # same singular values as Z
    kkt = Zs.size <= kkt_max
    if kkt:
        Uz, S, Vt = _svd(Zs)
    else:
        S = _svd(Zs, compute_uv=False)
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
        # dual point p_i = e_{y_i} + t v_i in the simplex: off-label entries t v_j >= 0, label entry 1 - q
        # with q = -t v_y in [0, 1]; -CE*(p) = -sum p log p, evaluated as q-terms without cancellation.
        Pd = t * Vc
        q = -Pd[idx]
        Pd[idx] = 0.0
        floor = -64 * UNIT_ROUNDOFF * max(float(np.max(np.abs(Pd), initial=0.0)), 1e-300)
        if float(np.min(Pd)) < floor or float(np.min(q)) < floor or float(np.max(q)) > 1.0:
            valid = False
        Pd = np.maximum(Pd, 0.0)
        q = np.clip(q, 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            off = np.where(Pd > 0, Pd * np.log(np.where(Pd > 0, Pd, 1.0)), 0.0)
            lab = np.where(q < 1.0, (1.0 - q) * np.log1p(-np.where(q < 1.0, q, 0.0)), 0.0)
        terms = off.sum(axis=0) + lab
        lower = -float(np.dot(w, terms)) / N
        abs_sum = (float(np.dot(w, np.abs(off).sum(axis=0))) + float(np.dot(w, np.abs(lab)))) / N
        if not bias_free:
            pen = float(np.sum((t * (V @ w) / N) ** 2)) / (2 * inst.lb)
            lower -= pen
            abs_sum += pen
    else:
        Lam = t * Vc / N
        t1 = -float(np.dot(w, Lam[idx]))
        t2 = 0.5 * N * float(np.dot(w, np.sum(Lam * Lam, axis=0)))
        lower = t1 - t2
        abs_sum = abs(t1) + t2
    allowance = (2 * (m + inst.k) + 16) * UNIT_ROUNDOFF * abs_sum
    details["roundoff_allowance"] = allowance
    lower -= allowance
    details["valid"] = valid
    if kkt:
        details.update(_kkt_residuals(-(V * sw) / N / (lam if lam > 0 else 1.0), Uz, S, Vt))
    else:
        details.update(kkt_residual=None, kkt_spectral=None, rank=None,
                       kkt_note=f"KKT residuals skipped above {kkt_max} entries; the dual gap certifies")
    return Certificate(lower if valid else -math.inf, upper, method, details)


def _svd(A: np.ndarray, compute_uv: bool = True):
    """Thin SVD; an exactly symmetric square matrix goes through eigh instead (measured 3-5x faster at
    k = 1000): A = Q diag(l) Q^T = (Q sign(l)) |l| Q^T, singular values |l| in decreasing order."""
    if A.ndim == 2 and A.shape[0] == A.shape[1] and np.array_equal(A, A.T):
        if not compute_uv:
            return np.sort(np.abs(np.linalg.eigvalsh(A)))[::-1]
        lam, Q = np.linalg.eigh(A)
        order = np.argsort(-np.abs(lam), kind="stable")
        lam, Q = lam[order], Q[:, order]
        return Q * np.where(lam < 0, -1.0, 1.0), np.abs(lam), Q.T
    return np.linalg.svd(A, full_matrices=False, compute_uv=compute_uv)


def _spectral_norm_upper(A: np.ndarray) -> float:
    """An upper bound on ||A||_2 (the dual point must be feasible, so never underestimate).

    eigvalsh of the smaller Gram matrix is accurate to ~1e-15 ||A||^2 in absolute terms; the
    returned value adds that slack, which is far below any tolerance used for gaps.
    """
    if A.size and A.shape[0] == A.shape[1] and np.array_equal(A, A.T):
        top = float(np.max(np.abs(np.linalg.eigvalsh(A))))  # accurate to ~1e-15 ||A|| (symmetric)
        return top * (1 + 1e-12) + 1e-300
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
    if Wp.size <= 40_000:
        spec, how = float(np.linalg.norm(Wp, 2)), "exact"
    else:  # ||A||_2 <= sqrt(||A||_1 ||A||_inf): an upper bound without an O(k^3) decomposition
        spec, how = math.sqrt(float(np.abs(Wp).sum(axis=0).max()) * float(np.abs(Wp).sum(axis=1).max())), \
            "upper bound sqrt(||.||_1 ||.||_inf)"
    return {"kkt_residual": float(max(res)), "kkt_spectral": spec, "kkt_spectral_how": how, "rank": r}


#: The class-reduced closed-form certificate reports KKT residuals only up to this many entries (k <= 200):
#: the bound does not need them, and uniqueness_certificate checks the KKT structure at every k.
CLOSED_FORM_KKT_MAX = 40_000


def closed_form_direction(inst: UFMInstance) -> np.ndarray:
    """The exact per-class loss gradient at the closed form, k x k: P - Y = -min(1, k s) J_k (CE: the
    off-label probability is min(s, 1/k)) and U - Y = -min(1, k s) J_k (MSE: N lam / sqrt(n) = k s),
    s = sqrt(n lw lh) (docs/ufm.md, "Uniqueness"). Used only to choose the dual point."""
    k = inst.k
    g = min(1.0, k * math.sqrt(inst.n * inst.lw * inst.lh))
    return -g * (np.eye(k) - 1.0 / k)


def closed_form_certificate(inst: UFMInstance, *, reduced: bool = True) -> Certificate:
    """The kkt-dual certificate at the closed-form optimum of theory.ufm.

    ``reduced`` (default) uses the class-reduced k x k computation (exact for the balanced,
    class-constant candidate; O(k^3) instead of O(k^2 N)) with the dual point built from the exact
    gradient (:func:`closed_form_direction`); ``reduced=False`` builds the full Z and the dual point
    from the gradient computed at the float candidate.
    """
    from theory.ufm import optimal_class_logits, optimal_logits

    if reduced:
        Zc, b = optimal_class_logits(inst)
        return _certificate(inst, Zc, b, np.arange(inst.k), np.full(inst.k, float(inst.n)),
                            "kkt-dual (class-reduced)", direction=closed_form_direction(inst),
                            kkt_max=CLOSED_FORM_KKT_MAX)
    Z, b = optimal_logits(inst)
    return certificate(inst, Z, b)


# ---------------------------------------------------------------------------------------
# Uniqueness of the minimiser and the phase, in class coordinates (docs/ufm.md, "Uniqueness")
# ---------------------------------------------------------------------------------------

#: Singular values of the scaled negative gradient G = -grad L / lam at or above 1 - FACE_TOL count
#: as the face of the nuclear norm where minimisers may lie. Over-approximating the face is safe (the
#: uniqueness argument needs injectivity on a face that contains the true one); every singular value
#: outside is then <= 1 - FACE_TOL, i.e. strictly below 1 by far more than round-off (~1e-15 at
#: lambda >= 1e-7; ~1e-9 for MSE at lambda = 1e-7, where U - Y cancels).
FACE_TOL = 1e-6
#: ||G||_2 may exceed 1 by at most this (round-off of a dual-feasible gradient; same scale as above).
SPECTRAL_TOL = 1e-6
#: Relative residuals of the structural conditions (candidate in the face, M symmetric PSD, face
#: orthogonal to the all-ones vectors): exact zeros in exact arithmetic, ~1e-15 in float64.
STRUCTURE_TOL = 1e-8


def class_gradient(inst: UFMInstance, Zc: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-class gradient of one sample's loss at logits Zc + b (k x k): P - Y (CE) or U - Y (MSE)."""
    Uo = np.asarray(Zc, dtype=float) + b[:, None]
    if inst.loss == "ce":
        return ce_parts(Uo, np.arange(inst.k))[1]
    V = Uo.copy()
    V[np.arange(inst.k), np.arange(inst.k)] -= 1.0
    return V


def zero_phase_ratio(inst: UFMInstance) -> dict:
    """rho0 = ||grad L(0, b0)||_2 / lam, computed by value (class coordinates), with b0 the optimal bias at
    Z = 0 (balanced classes: softmax(b0) = 1/k, so b0 = 0 for CE; b0 = 1/k for MSE).

    Z = 0 is a minimiser iff rho0 <= 1 (KKT of the convex problem at Z = 0) and the unique one when
    rho0 < 1; the closed form predicts rho0 = 1/(k s). ``bias_residual`` is max |grad_b| at (0, b0).
    """
    k, n, N = inst.k, inst.n, inst.N
    b0 = np.zeros(k) if inst.loss == "ce" else np.full(k, 1.0 / k)
    V = class_gradient(inst, np.zeros((k, k)), b0)
    Gs = V * math.sqrt(n) / N  # the full gradient's nonzero singular values are those of Gs
    sv = float(_svd(Gs, compute_uv=False)[0])
    return {"rho0": sv / inst.lam, "grad_norm_at_zero": sv, "bias_residual": float(np.max(np.abs(V.sum(axis=1)) * n / N)),
            "bias_at_zero": float(b0[0])}


def uniqueness_certificate(inst: UFMInstance, Zc: np.ndarray, b: np.ndarray,
                           direction: np.ndarray | None = None) -> dict:
    """Numeric confirmation of the uniqueness conditions at a class-constant candidate Z = Zc E.

    With G = -grad L(Z + b 1^T)/lam (reduced: Gs = G E'^T, k x k; the N - k directions orthogonal to the
    class indicators carry G = 0), let (U1, V1) span the singular vectors of Gs with singular value
    >= 1 - FACE_TOL (the face). Conditions (docs/ufm.md, "Uniqueness"):
    (a) ||G||_2 <= 1 + SPECTRAL_TOL (G is a subgradient direction of the nuclear norm);
    (b) every other singular value is <= 1 - FACE_TOL (strict complementarity off the face, delta);
    (c) the candidate lies in the face, Zs = U1 M V1^T with M symmetric positive semidefinite;
    (d) injectivity: U1^T 1_k = 0 and V1^T 1_N = 0 (so (Delta, beta) -> U1 Delta V1^T + beta 1^T, and its
        column-centred version for CE, vanish only for Delta = 0 and a constant beta).
    Then every minimiser has Z = Z*, and b = b* (MSE, or CE with lambda_b > 0) or b = b* + c 1 (CE, free bias).
    ``direction``: the exact gradient (P - Y or U - Y per class) from a formula; it is used for G when it
    agrees with the gradient computed at the float candidate up to that computation's round-off
    (64 u (1 + max|U|) per entry: for MSE at small lambda, U - Y cancels), else ``valid`` is False.
    Returns the measured numbers and ``valid``.
    """
    k, n, N, lam = inst.k, inst.n, inst.N, inst.lam
    Zc = np.asarray(Zc, dtype=float)
    sw = math.sqrt(n)
    V = class_gradient(inst, Zc, b)
    formula_ok, formula_diff = True, None
    if direction is not None:
        D = np.asarray(direction, dtype=float)
        formula_diff = float(np.max(np.abs(V - D)))
        allowed = 64 * UNIT_ROUNDOFF * (1.0 + float(np.max(np.abs(Zc + b[:, None]))))
        formula_ok = formula_diff <= max(allowed, 1e-12 * float(np.max(np.abs(D))))
        V = D
    Gs = -V * sw / N / lam
    Ug, sg, Vgt = _svd(Gs)
    face = sg >= 1.0 - FACE_TOL
    r1 = int(np.sum(face))
    outside = float(sg[~face].max(initial=0.0))
    U1, V1 = Ug[:, face], Vgt[face, :].T
    Zs = Zc * sw
    zn = float(np.linalg.norm(Zs))
    if r1:
        M = U1.T @ Zs @ V1
        in_face = float(np.linalg.norm(Zs - U1 @ M @ V1.T)) / zn if zn > 0 else 0.0
        Msym = 0.5 * (M + M.T)
        mf = max(float(np.linalg.norm(M)), 1e-300)
        asym = float(np.linalg.norm(M - M.T)) / mf if zn > 0 else 0.0
        # M PSD up to STRUCTURE_TOL ||M||_F: Msym + STRUCTURE_TOL ||M||_F I has a Cholesky factor (O(r^3 / 3))
        try:
            np.linalg.cholesky(Msym + STRUCTURE_TOL * mf * np.eye(r1)) if zn > 0 else None
            mmin = 0.0
        except np.linalg.LinAlgError:
            mmin = -math.inf
        ones_left = float(np.linalg.norm(U1.T @ np.ones(k))) / math.sqrt(k)
        ones_right = float(np.linalg.norm(V1.T @ np.full(k, sw))) / math.sqrt(N)
    else:
        in_face = 0.0 if zn == 0.0 else math.inf
        asym = mmin = ones_left = ones_right = 0.0
    checks = {"spectral_norm": float(sg[0]) <= 1.0 + SPECTRAL_TOL,
              "strict_off_face": outside <= 1.0 - FACE_TOL,
              "candidate_in_face": in_face <= STRUCTURE_TOL and asym <= STRUCTURE_TOL and mmin >= -STRUCTURE_TOL,
              "injective": ones_left <= STRUCTURE_TOL and ones_right <= STRUCTURE_TOL,
              "gradient_formula_agrees": formula_ok}
    return {"valid": all(checks.values()), "conditions": checks, "spectral_norm": float(sg[0]),
            "face_dimension": r1, "delta": 1.0 - outside, "largest_off_face": outside,
            "candidate_off_face_residual": in_face, "M_asymmetry": asym, "M_psd_up_to_structure_tol": mmin == 0.0,
            "ones_left_residual": ones_left, "ones_right_residual": ones_right,
            "gradient_formula_max_diff": formula_diff, "face_tol": FACE_TOL, "spectral_tol": SPECTRAL_TOL, "structure_tol": STRUCTURE_TOL}


def factor_classwise(inst: UFMInstance, Zc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Balanced factorization of a class-constant Z = Zc E, by an SVD (independent of theory.geometry's
    constructors): returns W (k x r) and the class means M (r x k), r = numerical rank (<= d when
    d >= k - 1). Every balanced factorization of Z has these Gram matrices (W W^T, M^T M, W M)."""
    Zs = np.asarray(Zc, dtype=float) * math.sqrt(inst.n)
    Uz, S, Vt = _svd(Zs)
    r = int(np.sum(S > RANK_RTOL * S[0])) if S.size and S[0] > 0 else 0
    if r == 0:
        return np.zeros((inst.k, 1)), np.zeros((1, inst.k))
    q = (inst.lh / inst.lw) ** 0.25
    s = np.sqrt(S[:r])
    W = q * Uz[:, :r] * s
    M = (s[:, None] * Vt[:r, :]) / (q * math.sqrt(inst.n))
    return W, M


def zero_phase_radius(inst: UFMInstance, gap: float, delta: float) -> float | None:
    """Zero phase (rho0 = 1 - delta < 1): every point (Z, b) with objective within ``gap`` of the optimum has
    ||Z||_F <= ||Z||_* <= gap / (lam delta) (docs/ufm.md, "Radius"): the minimiser Z* = 0 is within that
    distance. None when the inputs are not finite or delta <= 0."""
    if not (math.isfinite(gap) and math.isfinite(delta)) or delta <= 0 or gap < 0:
        return None
    return gap / (inst.lam * delta)


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


# ---------------------------------------------------------------------------------------
# Resource estimates (checked before anything is allocated; proofs_check decides and refuses)
# ---------------------------------------------------------------------------------------

#: Sustained matrix-product throughput assumed by the time estimates. Measured on the 2-core reference
#: machine: CE k = 1000, 106 evaluations of 3e10 flops in 81 s (4e10 flop/s); 1e10 leaves a 4x margin
#: for a machine shared with other work.
FLOPS_PER_SECOND = 1e10
#: Objective evaluations per start assumed by the time estimate (measured 35-120 to gtol 1e-9 at
#: k = 10..1000 away from the phase threshold; the wall-clock budget of solve_factored stops the rest).
EVALS_PER_START = 300
#: The same for MSE with variable projection (one evaluation solves the bias and H in closed form, so L-BFGS
#: runs on W alone): measured ~20 evaluations of ~6e9 flops at k = 1000, n = 5, d = 1024 (12 s on the loaded
#: 2-core machine, 4 s unloaded); 40 is a 2x margin on top of the 4x one of FLOPS_PER_SECOND. With 300 the
#: estimate was 185 s and refused that 12-second instance (audit).
EVALS_PER_START_VP = 40
#: Time model of the convex route (cvxpy/Clarabel on the nuclear-norm program: an SDP block of size
#: k + N and, for CE, k N exponential cones). Measured on the shared 2-core machine, CE, lw = lh = 1e-3:
#: k + N = 36 (k = 12, n = 2): 3.2 s; k + N = 50 (k = 10, n = 4): 7.1 s; k + N = 100 (k = 20, n = 4): 164 s,
#: i.e. about (k + N)^4.5. The estimate is CONVEX_SECONDS_AT_50 ((k + N)/50)^4.5 (a 1.4x margin).
CONVEX_SECONDS_AT_50 = 10.0
CONVEX_EXPONENT = 4.5


def estimate(inst: UFMInstance, route: str, starts: int = 1) -> dict:
    """Memory (bytes) and time (seconds, at FLOPS_PER_SECOND) of one route, from the sizes alone.

    - ``closed-form``: class-reduced k x k work (three symmetric eigendecompositions, the certificate, the
      Gram and cosine matrices): ~24 k^2 doubles plus ~100 bytes per cosine of output (Python list and JSON
      text); 30 k^3 flops (measured 1.2 s CPU at k = 1000, i.e. a 2.5x margin at 1e10 flop/s).
    - ``factored``: the variables x (k d + d N + k) about 26 times (L-BFGS pairs, gradient, line search,
      a start), the logits/gradient buffers and the final certificate's k x N SVD (~8 k N), the feature
      matrix copies of the NC metrics (~4 d N); time EVALS_PER_START evaluations of 6 k d N flops per start
      (MSE with variable projection: 4 k^2 d + 2 k^3) plus the certificate (4 k^2 N).
    - ``convex``: the cvxpy program (~200 k N doubles for the cone data and factorisations) and the
      measured time model CONVEX_SECONDS_AT_50 ((k + N)/50)^4.5.
    """
    k, n, d, N = inst.k, inst.n, inst.d, inst.N
    kf, df, Nf = float(k), float(d), float(N)
    if route == "closed-form":
        # measured at k = 1000: 1.1-1.2 s CPU, 240 MB peak (~100 MB of it the interpreter and imports)
        return {"bytes": 8.0 * 24 * kf * kf + 100.0 * kf * kf, "seconds": 30.0 * kf ** 3 / FLOPS_PER_SECOND}
    if route == "factored":
        nvar = kf * df + df * Nf + kf
        vp = inst.loss == "mse"
        if vp:
            per_eval = 4.0 * kf * kf * df + 2.0 * kf ** 3
            mem = 26.0 * kf * df + 3.0 * df * Nf
        else:
            per_eval = 6.0 * kf * df * Nf + 20.0 * kf * Nf
            mem = 26.0 * nvar
        mem += 8.0 * kf * Nf + 4.0 * df * Nf + 3.0 * kf * kf
        evals = EVALS_PER_START_VP if vp else EVALS_PER_START
        secs = float(starts) * evals * per_eval / FLOPS_PER_SECOND + 4.0 * kf * kf * Nf / FLOPS_PER_SECOND
        return {"bytes": 8.0 * mem, "seconds": secs}
    if route == "convex":
        return {"bytes": 8.0 * 200 * kf * Nf + 8.0 * (kf + Nf) ** 2 * 4,
                "seconds": CONVEX_SECONDS_AT_50 * ((kf + Nf) / 50.0) ** CONVEX_EXPONENT}
    raise ValueError(f"route must be closed-form, factored or convex, got {route!r}")


def collapsed_objective(inst: UFMInstance, W: np.ndarray, Mu: np.ndarray, b: np.ndarray) -> float:
    """The factored objective at a collapsed point h_i = mu_{y_i} (W: k x r, Mu: r x k class means), without
    forming H: (1/k) sum_c loss(W mu_c + b, c) + lw/2 ||W||^2 + lh n/2 ||Mu||^2 (+ lb/2 ||b||^2), balanced classes."""
    k = inst.k
    Uc = W @ Mu + b[:, None]
    if inst.loss == "ce":
        data = float(np.sum(ce_parts(Uc, np.arange(k))[0])) / k
    else:
        R = Uc.copy()
        R[np.arange(k), np.arange(k)] -= 1.0
        data = 0.5 * float(np.sum(R * R)) / k
    return data + 0.5 * (inst.lw * float(np.sum(W * W)) + inst.lh * inst.n * float(np.sum(Mu * Mu))
                         + inst.lb * float(b @ b))
