"""Independent checks of the deep UFM family (reviewer audit): every expected value is recomputed here with
plain numpy / scipy / mpmath / fractions, never with the code under test.

- the deep linear MSE optimum: per class min_{s>=0} (s - sqrt(n_c))^2/(2N) + C s^{2/(L+1)}, minimised by brute
  force on a fine grid plus mpmath refinement at 50 digits, summed over the min(D, K) largest classes;
- an own implementation of the deep linear network objective, multi-started with scipy L-BFGS: no point below
  the package's proven lower bound, and the best point reaches it;
- the stored ReLU witnesses re-evaluated exactly with Fractions against K phi(s_+) computed in mpmath;
- false variants through the factories (value off by 5x the tolerance, wrong rank, wrong DNC value, "DNC
  optimal" where a point below exists) are REFUTED; boundary instances (K = 2, n = 1, D = K - 1, tiny lambda,
  L = 1) are not.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy.optimize import minimize

pytest.importorskip("flint")

from proofs_check.claims import deep_ufm as C  # noqa: E402
from proofs_check.core import RunContext, Verdict  # noqa: E402
from solvers import deep_ufm as S  # noqa: E402
from theory import deep_ufm as T  # noqa: E402
from tests._reference import fraction_objective  # noqa: E402

CTX = RunContext()
mp.mp.dps = 50


# ------------------------------------------------------------------------------------------
# independent scalar problem (mpmath, 50 digits)
# ------------------------------------------------------------------------------------------

def _mp_scalar_min(count: int, N: int, lams, L: int):
    """(global min, minimiser) of phi(s) = (s - y)^2/(2N) + C s^{2/(L+1)} over s >= 0, y = sqrt(count):
    brute force over t = s^{1/(L+1)} on a fine float grid of [0, 1.2 y^{1/(L+1)}], then mpmath refinement of
    every grid-local minimum (root of dphi/dt), compared with phi(0)."""
    y = mp.sqrt(count)
    Cm = mp.mpf(L + 1) / 2 * mp.exp(mp.fsum(mp.log(mp.mpf(v)) for v in lams) / (L + 1))
    Nm = mp.mpf(N)

    def ph(t):
        return (t ** (L + 1) - y) ** 2 / (2 * Nm) + Cm * t * t

    def dph(t):
        return (L + 1) * t ** L * (t ** (L + 1) - y) / Nm + 2 * Cm * t

    T_ = 1.2 * float(y) ** (1.0 / (L + 1))
    tg = np.linspace(0.0, T_, 200_001)
    yf, Cf = float(y), float(Cm)
    vals = (tg ** (L + 1) - yf) ** 2 / (2 * N) + Cf * tg * tg
    best_v, best_t = ph(mp.mpf(0)), mp.mpf(0)
    idx = [i for i in range(1, tg.size - 1) if vals[i] <= vals[i - 1] and vals[i] <= vals[i + 1]]
    for i in idx:
        try:
            t = mp.findroot(dph, (mp.mpf(tg[i - 1]), mp.mpf(tg[i + 1])), solver="anderson")
        except (ValueError, ZeroDivisionError):
            t = mp.mpf(tg[i])
        if t < 0:
            continue
        v = ph(t)
        assert v <= mp.mpf(vals[i]) + mp.mpf(1e-12)  # the refinement only improves the grid point
        if v < best_v:
            best_v, best_t = v, t
    return best_v, best_t ** (L + 1)


def _mp_optimum(inst: T.DeepUFMInstance):
    counts = sorted(inst.counts, reverse=True)
    r = min(inst.width, inst.K, inst.N)
    total, rank = mp.mpf(0), 0
    for i, c in enumerate(counts):
        if i < r:
            v, s = _mp_scalar_min(c, inst.N, inst.lams, inst.layers)
            total += v
            rank += s > mp.mpf(1e-30)
        else:
            total += mp.mpf(c) / (2 * inst.N)
    return total, rank


LINEAR_INSTANCES = [
    T.balanced(3, "linear", "mse", 3, 2, 3, 0.01),
    T.DeepUFMInstance(3, "linear", "mse", (9, 4, 1, 1), 3, (0.01,)),
    T.DeepUFMInstance(2, "linear", "mse", (8, 3, 1), 3, (0.05,)),
    T.balanced(1, "linear", "mse", 2, 1, 2, 0.3),
    T.balanced(1, "linear", "mse", 2, 1, 2, 2.0),  # L = 1 above the soft threshold: zero point
    T.balanced(2, "linear", "mse", 2, 1, 1, 0.02),  # K = 2, n = 1, D = K - 1
    T.balanced(4, "linear", "mse", 3, 1, 3, 1e-12),  # tiny lambda
    T.DeepUFMInstance(4, "linear", "mse", (5, 3, 2, 1), 4, (1e-3, 2e-3, 1e-3, 5e-3, 1e-2)),  # unequal lambdas
    T.balanced(3, "linear", "mse", 4, 2, 4, 0.5),  # above the rank threshold: optimum 0
]


@pytest.mark.parametrize("inst", LINEAR_INSTANCES, ids=lambda i: i.label())
def test_linear_optimum_matches_50_digit_scalar_minima(inst):
    v_mp, rank_mp = _mp_optimum(inst)
    cert = S.certify_linear_mse(inst)
    v = float(v_mp)
    # the proven enclosure contains the independent value and is tight
    assert cert.lower_bound <= v * (1 + 1e-15) + 1e-300
    assert v <= cert.upper * (1 + 1e-15)
    assert cert.upper - cert.lower_bound <= 1e-12 * max(v, 1e-300)
    assert cert.details["rank"] == rank_mp
    # the package's float prediction
    pred = T.linear_mse_optimum(inst)
    assert abs(pred.value - v) <= 1e-10 * v
    assert pred.rank == rank_mp
    # the claim as shipped (statement with the package's prediction) is VERIFIED
    res = C.make_linear_optimum_claim(instances=lambda ctx, i=inst: [i]).run(CTX)
    assert res.verdict is Verdict.VERIFIED, res.reason


# ------------------------------------------------------------------------------------------
# own deep linear objective, multi-started with scipy
# ------------------------------------------------------------------------------------------

def _own_objective(inst):
    K, D, L, counts = inst.K, inst.width, inst.layers, inst.counts
    N = sum(counts)
    Y = np.zeros((K, N))
    Y[np.repeat(np.arange(K), counts), np.arange(N)] = 1.0
    shapes = [(D, N)] + [(D, D)] * (L - 1) + [(K, D)]
    sizes = [a * b for a, b in shapes]
    lams = inst.lams

    def f(x):
        mats, i = [], 0
        for sh, sz in zip(shapes, sizes):
            mats.append(x[i:i + sz].reshape(sh))
            i += sz
        # mats[0] = H, mats[1..L] = W_1..W_L; P = W_L ... W_1 H
        left = [np.eye(K)]
        for M in reversed(mats[1:]):  # left[j] = W_L ... W_{L-j+1}
            left.append(left[-1] @ M)
        right = [np.eye(N)]  # right[j] = M_{j-1} ... M_0
        for M in mats:
            right.append(M @ right[-1])
        P = right[-1]
        R = P - Y
        val = 0.5 / N * float(np.sum(R * R)) + sum(0.5 * lam * float(np.sum(M * M)) for lam, M in zip(lams, mats))
        grads = []
        nm = len(mats)
        for j, M in enumerate(mats):
            Lft = left[nm - 1 - j]  # product of the factors after M
            Rgt = right[j]  # product of the factors before M
            grads.append(Lft.T @ (R / N) @ Rgt.T + lams[j] * M)
        return val, np.concatenate([g.ravel() for g in grads])

    return f, sum(sizes)


@pytest.mark.parametrize("inst", [T.balanced(2, "linear", "mse", 3, 2, 3, 0.01),
                                  T.DeepUFMInstance(2, "linear", "mse", (8, 3, 1), 3, (0.05,)),
                                  T.DeepUFMInstance(3, "linear", "mse", (4, 2, 1), 2, (0.01,))],
                         ids=lambda i: i.label())
def test_own_multistart_never_below_proven_bound_and_reaches_it(inst):
    f, n = _own_objective(inst)
    cert = S.certify_linear_mse(inst)
    rng = np.random.default_rng(12345)
    best = math.inf
    for _ in range(4):
        x0 = rng.standard_normal(n) * 0.6
        res = minimize(f, x0, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-12, "ftol": 1e-15})
        val = f(res.x)[0]
        assert val >= cert.lower_bound - 1e-12, (val, cert.lower_bound)
        best = min(best, val)
    v_mp = float(_mp_optimum(inst)[0])
    assert best <= v_mp + 1e-8, (best, v_mp)


def _own_relu_objective(inst):
    """Own ReLU deep UFM objective with MSE on the full model (one column per sample) and its gradient by hand:
    A_0 = H, A_l = max(W_l A_{l-1}, 0) for l < L, O = W_L A_{L-1}."""
    K, D, L, counts = inst.K, inst.width, inst.layers, inst.counts
    N = sum(counts)
    Y = np.zeros((K, N))
    Y[np.repeat(np.arange(K), counts), np.arange(N)] = 1.0
    shapes = [(D, N)] + [(D, D)] * (L - 1) + [(K, D)]
    sizes = [a * b for a, b in shapes]
    lams = inst.lams

    def f(x):
        mats, i = [], 0
        for sh, sz in zip(shapes, sizes):
            mats.append(x[i:i + sz].reshape(sh))
            i += sz
        acts, pre = [mats[0]], []
        for W in mats[1:-1]:
            pre.append(W @ acts[-1])
            acts.append(np.maximum(pre[-1], 0.0))
        R = mats[-1] @ acts[-1] - Y
        val = 0.5 / N * float(np.sum(R * R)) + sum(0.5 * lam * float(np.sum(M * M)) for lam, M in zip(lams, mats))
        grads = [None] * len(mats)
        back = R / N
        grads[-1] = back @ acts[-1].T + lams[-1] * mats[-1]
        back = mats[-1].T @ back
        for j in range(len(mats) - 2, 0, -1):  # W_j, j = L-1 .. 1
            back = back * (pre[j - 1] > 0)
            grads[j] = back @ acts[j - 1].T + lams[j] * mats[j]
            back = mats[j].T @ back
        grads[0] = back + lams[0] * mats[0]
        return val, np.concatenate([g.ravel() for g in grads])

    return f, sum(sizes)


@pytest.mark.parametrize("inst", [T.balanced(4, "relu", "mse", 2, 1, 2, 0.01),
                                  T.balanced(3, "relu", "mse", 2, 2, 3, 0.01),
                                  T.DeepUFMInstance(3, "relu", "mse", (3, 1), 3, (0.004,))],
                         ids=lambda i: i.label())
def test_own_relu_multistart_two_classes_never_below_the_two_class_bound(inst):
    # K = 2, any depth (docs/deep_ufm.md, "Two classes, any depth"): the package's proven bound is the deep linear
    # optimum; own ReLU objective, scipy L-BFGS from random starts; no point below the bound (a bound above a
    # feasible point would be a bug in the proof) and the best reaches the 50-digit linear optimum
    f, n = _own_relu_objective(inst)
    bound = S.certify_relu_two_class_bound(inst)["lower_bound"]
    lin = T.DeepUFMInstance(inst.layers, "linear", "mse", inst.counts, inst.width, inst.lams)
    v_mp = float(_mp_optimum(lin)[0])
    assert bound <= v_mp * (1 + 1e-15)
    rng = np.random.default_rng(2024)
    best = math.inf
    D, N = inst.width, inst.N
    eye_start = np.concatenate([np.eye(D, N).ravel() * 0.8] + [np.eye(D).ravel() * 0.8] * (inst.layers - 1)
                               + [np.eye(2, D).ravel() * 0.8])  # nonnegative, near-diagonal: ReLU active
    eye_start[D * N:D * N + D * D] += 0.05  # (not collapsed: H's columns differ within a class)
    for k in range(7):
        x0 = rng.standard_normal(n) * (0.4 + 0.3 * k)
        if k >= 3:  # nonnegative starts (random Gaussian starts of narrow deep ReLU nets often die)
            x0 = np.abs(x0) if k < 6 else eye_start + 0.05 * np.abs(rng.standard_normal(n))
        assert f(x0)[0] >= bound
        res = minimize(f, x0, jac=True, method="L-BFGS-B", options={"maxiter": 2000, "gtol": 1e-12, "ftol": 1e-15})
        val = f(res.x)[0]
        assert val >= bound - 1e-12, (val, bound)
        best = min(best, val)
    assert best <= v_mp + 1e-7, (best, v_mp)


def test_scalar_reduction_value_at_a_rotated_balanced_point():
    """The objective at an explicit balanced factorisation of the aligned product equals the sum of the scalar
    values (own objective; the factors built here, not by the package)."""
    inst = T.DeepUFMInstance(3, "linear", "mse", (3, 2, 1), 3, (0.02, 0.01, 0.03, 0.02))
    f, n = _own_objective(inst)
    K, D, L, N = inst.K, inst.width, inst.layers, inst.N
    svals = [float(_mp_scalar_min(c, N, inst.lams, L)[1]) for c in inst.counts]
    g = float(np.prod(inst.lams))
    a = np.array([[((s * s * g) ** (1.0 / (2 * (L + 1)))) / math.sqrt(lam) for s in svals] for lam in inst.lams])
    rng = np.random.default_rng(3)
    Qs = [np.linalg.qr(rng.standard_normal((D, D)))[0] for _ in range(L)]
    U = np.zeros((K, N))
    for c, (lo, hi) in enumerate(zip(np.cumsum([0] + list(inst.counts[:-1])), np.cumsum(inst.counts))):
        U[c, lo:hi] = 1 / math.sqrt(inst.counts[c])
    mats = [Qs[0] @ np.diag(a[0]) @ U]
    for l in range(1, L):
        mats.append(Qs[l] @ np.diag(a[l]) @ Qs[l - 1].T)
    mats.append(np.diag(a[L]) @ Qs[L - 1].T)
    x = np.concatenate([m.ravel() for m in mats])
    v_mp = float(_mp_optimum(inst)[0])
    assert abs(f(x)[0] - v_mp) <= 1e-12


# ------------------------------------------------------------------------------------------
# ReLU witnesses: exact own evaluation against the 50-digit DNC value
# ------------------------------------------------------------------------------------------

def test_stored_relu_witnesses_below_the_50_digit_dnc_value():
    ws = [(i, x) for i, x in S.stored_witnesses() if i.K <= 5]
    assert ws, "no stored witnesses"
    for inst, x in ws:
        assert inst.activation == "relu" and inst.layers >= 3 and inst.K >= 3 and inst.balanced
        v_exact = fraction_objective(inst, x)
        # best DNC value: K phi(s_+) at the positive local minimiser (the DNC point, ReLU inactive on it)
        y = mp.sqrt(inst.n)
        L = inst.layers
        Cm = mp.mpf(L + 1) / 2 * mp.exp(mp.fsum(mp.log(mp.mpf(v)) for v in inst.lams) / (L + 1))
        q = lambda t: (L + 1) * t ** (2 * L) - (L + 1) * y * t ** (L - 1) + 2 * inst.N * Cm  # noqa: E731
        t2 = mp.findroot(q, y ** (mp.mpf(1) / (L + 1)) * mp.mpf("0.99"))
        assert t2 > ((L - 1) * y / (2 * L)) ** (mp.mpf(1) / (L + 1))  # the larger root (local minimum)
        dnc = inst.K * ((t2 ** (L + 1) - y) ** 2 / (2 * inst.N) + Cm * t2 ** 2)
        assert mp.mpf(v_exact.numerator) / v_exact.denominator < dnc - mp.mpf(1e-6)
        enc = S.certify_dnc(inst)
        assert enc[0] <= float(dnc) <= enc[1]


# ------------------------------------------------------------------------------------------
# false variants through every factory; boundary instances
# ------------------------------------------------------------------------------------------

def _one(inst):
    return lambda ctx: [inst]


def test_value_just_above_tolerance_refuted():
    inst = T.DeepUFMInstance(2, "linear", "mse", (8, 3, 1), 3, (0.05,))
    v = float(_mp_optimum(inst)[0])
    for f in (1 + 5e-10, 1 - 5e-10):  # VALUE_RTOL = 1e-10
        res = C.make_linear_optimum_claim(predict_value=lambda i, f=f: v * f, instances=_one(inst)).run(CTX)
        assert res.verdict is Verdict.REFUTED, res.reason
    ok = C.make_linear_optimum_claim(predict_value=lambda i: v, instances=_one(inst)).run(CTX)
    assert ok.verdict is Verdict.VERIFIED, ok.reason


def test_wrong_rank_refuted_both_directions():
    inst = T.DeepUFMInstance(2, "linear", "mse", (8, 3, 1), 3, (0.05,))
    r = _mp_optimum(inst)[1]
    assert r == 2  # the minority class drops out (own computation)
    for bad in (r - 1, r + 1):
        res = C.make_linear_optimum_claim(predict_rank=lambda i, b=bad: b, instances=_one(inst)).run(CTX)
        assert res.verdict is Verdict.REFUTED, res.reason


def test_wrong_dnc_value_and_dnc_optimal_refuted():
    inst = T.balanced(5, "relu", "mse", 3, 1, 6, 0.003)
    dnc = T.dnc_value(inst)
    res = C.make_dnc_suboptimal_claim(predict_dnc_value=lambda i: dnc * (1 + 1e-8), instances=_one(inst)).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason
    res = C.make_dnc_suboptimal_claim(predict_optimal=lambda i: True, instances=_one(inst)).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason
    assert any(c.verdict is Verdict.REFUTED and c.evidence.get("witness_gap", 0) > 0 for c in res.checks)
    # linear deep model: DNC (rank K) is the certified optimum; "DNC is not optimal" is refuted by the bound
    lin = T.balanced(4, "linear", "mse", 5, 1, 5, 0.004)
    res = C.make_dnc_suboptimal_claim(predict_optimal=lambda i: False, instances=_one(lin)).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason
    res = C.make_dnc_shallow_claim(predict_optimal=lambda i: False,
                                   instances=_one(T.balanced(2, "linear", "mse", 3, 2, 3, 0.01))).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason


def test_ce_false_bound_refuted():
    res = C.make_ce_claim(bound=lambda inst, tau: 0, instances=lambda ctx: [T.balanced(1, "linear", "ce", 3, 1, 3,
                                                                                          0.01)]).run(CTX)
    assert res.verdict is Verdict.REFUTED, res.reason


def test_ce_bound_holds_at_own_points():
    """Own check of the derived CE bound: at points with value <= log K (own random points scaled down), the number of
    singular values above tau of W_L...W_1 H is <= floor(log K / (C tau^{2/(L+1)}))."""
    inst = T.balanced(2, "linear", "ce", 3, 1, 3, 0.3)
    K, D, L, N = 3, 3, 2, 3
    Cc = (L + 1) / 2 * (0.3 ** 3) ** (1 / 3)
    tau = 0.2
    B = T.ce_rank_bound(inst, tau)
    assert B == math.floor(math.log(K) / (Cc * tau ** (2 / 3)))
    rng = np.random.default_rng(0)
    for _ in range(200):
        H, W1, W2 = (rng.standard_normal((D, N)), rng.standard_normal((D, D)), rng.standard_normal((K, D)))
        sc = rng.uniform(0.05, 1.5)
        H, W1, W2 = sc * H, sc * W1, sc * W2
        O = W2 @ W1 @ H
        Om = O - O.max(axis=0)
        ce = float(np.mean(np.log(np.exp(Om).sum(axis=0)) - Om[np.arange(K), np.arange(N)]))
        val = ce + 0.15 * (np.sum(H * H) + np.sum(W1 * W1) + np.sum(W2 * W2))
        if val <= math.log(K):
            assert int(np.sum(np.linalg.svd(O, compute_uv=False) > tau)) <= B


def test_ce_bound_violation_needs_a_point_below_the_zero_point():
    """The CE rank bound is derived for points with objective <= log K: a 'violation' at a point above log K is no
    witness (INCONCLUSIVE); below log K it is (REFUTED)."""
    inst = T.balanced(2, "linear", "ce", 3, 1, 3, 0.01)
    above = {"tau": 0.1, "zero_value": math.log(3), "per_seed": [{"seed": 0, "value": 1.2, "count": 3}]}
    below = {"tau": 0.1, "zero_value": math.log(3), "per_seed": [{"seed": 0, "value": 0.5, "count": 3}]}
    assert C.ce_bound_check("x", inst, above, 1).verdict is Verdict.INCONCLUSIVE
    assert C.ce_bound_check("x", inst, below, 1).verdict is Verdict.REFUTED
    assert C.ce_bound_check("x", inst, below, 3).verdict is Verdict.VERIFIED
