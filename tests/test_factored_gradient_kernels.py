"""The fused factored UFM objective and gradient (``solvers.ufm.JointObjective``, one block) against a plain
reference written here in mpmath (200 bits): f and every gradient entry, each within a first-order float64 rounding
bound computed from the inputs and the reference (:func:`_bounds`), at ordinary scales, at a loss far below 1e-16
per sample, and with logits near and beyond the range of exp (where the evaluation changes route). The bounds are
those of float64 arithmetic, not of the code under test."""

import warnings

import mpmath as mp
import numpy as np
import pytest

from solvers import ufm as S
from theory import ufm as T


EPS = 2.0 ** -53  # unit roundoff of float64
#: The fused CE takes exp of the logits themselves: an exp that underflows (absolute error up to 2^-1074) is
#: then divided by a column sum >= 2^-960 (solvers.ufm.EXP_LABEL_MIN), an absolute error up to 2^-114 in a softmax
#: entry (the label-shifted evaluation it replaced rounded 1 + rest: up to 2^-53 in the label's entry).
SOFTMAX_FLOOR = 2.0 ** -114


def _reference(inst: T.UFMInstance, x: np.ndarray):
    """f, its gradient and what the rounding bounds need, in mpmath (200 bits) from the float64 x: the logits as
    exact sums, the max-shifted log-sum-exp and softmax, the products as exact sums."""
    k, d, N = inst.k, inst.d, inst.N
    y = inst.labels()
    with mp.workprec(200):
        W, H, b = S.unpack(inst, x)
        Wm = [[mp.mpf(float(v)) for v in row] for row in W]
        Hm = [[mp.mpf(float(v)) for v in row] for row in H]
        bm = [mp.mpf(float(v)) for v in b]
        U = [[mp.fsum(Wm[j][l] * Hm[l][i] for l in range(d)) + bm[j] for i in range(N)] for j in range(k)]
        losses, G = [], [[mp.mpf(0)] * N for _ in range(k)]
        for i in range(N):
            col = [U[j][i] for j in range(k)]
            if inst.loss == "ce":
                m = max(col)
                ex = [mp.exp(c - m) for c in col]
                s = mp.fsum(ex)
                losses.append(mp.log(s) + m - col[y[i]])
                for j in range(k):
                    G[j][i] = (ex[j] / s - (1 if j == y[i] else 0)) / N
            else:
                r = [col[j] - (1 if j == y[i] else 0) for j in range(k)]
                losses.append(mp.fsum(v * v for v in r) / 2)
                for j in range(k):
                    G[j][i] = r[j] / N
        data = mp.fsum(losses) / N
        reg = (inst.lw * mp.fsum(v * v for row in Wm for v in row) + inst.lh * mp.fsum(v * v for row in Hm for v in row)
               + inst.lb * mp.fsum(v * v for v in bm)) / 2
        gW = [[mp.fsum(G[j][i] * Hm[l][i] for i in range(N)) + inst.lw * Wm[j][l] for l in range(d)] for j in range(k)]
        gH = [[mp.fsum(Wm[j][l] * G[j][i] for j in range(k)) + inst.lh * Hm[l][i] for i in range(N)] for l in range(d)]
        gb = [mp.fsum(G[j][i] for i in range(N)) + inst.lb * bm[j] for j in range(k)]
    to = lambda a: np.array(a, dtype=float)  # noqa: E731
    return {"f": data + reg, "data": float(data), "reg": float(reg), "losses": to(losses), "G": to(G),
            "g": np.concatenate([to(gW).ravel(), to(gH).ravel(), to(gb)]), "g_mp": [*sum(gW, []), *sum(gH, []), *gb]}


def _bounds(inst, x, ref):
    """Float64 rounding bounds (first order, worst case, times 2) for f and for every gradient entry.

    The logits: |fl(u) - u| <= gamma_(d+1) (|W| |H| + |b|), gamma_m = m eps / (1 - m eps); a perturbation delta of
    the logits moves a CE loss by at most 2 (1 - p_y) max |delta| <= 2 min(1, loss) max |delta| and each softmax
    entry and 1 - p_y by a relative 2 max |delta|, the MSE residuals by delta itself. The evaluation of G adds a
    relative (k + 4) eps (CE: k exps and a sum) plus SOFTMAX_FLOOR / N, each product a relative gamma of its
    inner size, the regulariser terms 2 eps."""
    k, d, N = inst.k, inst.d, inst.N
    W, H, b = S.unpack(inst, x)
    gam = lambda m: m * EPS / (1 - m * EPS)  # noqa: E731
    delta = gam(d + 2) * (np.abs(W) @ np.abs(H) + np.abs(b)[:, None])  # bound on each logit's error
    dmax = delta.max(axis=0)  # per sample
    G, ell = np.abs(ref["G"]), ref["losses"]
    if inst.loss == "ce":
        m1 = np.minimum(1.0, ell)
        tol_data = np.sum(2 * m1 * dmax + (k + 6) * EPS * np.maximum(m1, ell)) / N + gam(N) * ref["data"]
        dG = (2 * dmax[None, :] + 2 * (k + 4) * EPS) * G + SOFTMAX_FLOOR / N
    else:
        R = N * G
        tol_data = np.sum(R * delta) / N + gam(k * N + 2) * ref["data"]
        dG = (delta + 2 * EPS * R) / N
    tol_f = 2 * (tol_data + gam(k * d + d * N + k + 4) * ref["reg"] + 4 * EPS * float(abs(ref["f"])))
    tW = (dG + gam(N + 3) * G) @ np.abs(H).T + 2 * EPS * inst.lw * np.abs(W)
    tH = np.abs(W).T @ (dG + gam(k + 3) * G) + 2 * EPS * inst.lh * np.abs(H)
    tb = np.sum(dG + gam(N + 3) * G, axis=1) + 2 * EPS * inst.lb * np.abs(b)
    return tol_f, 2 * np.concatenate([tW.ravel(), tH.ravel(), tb])


def _check(inst, x):
    """The fused evaluation of x against the reference, within the bounds; returns the errors in units of them."""
    J = S.JointObjective(inst, blocks=1)
    assert J.fused
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow or invalid-value warning is a defect
        f, g = J(x)
        f2, g2 = J(x)  # the buffers are reused: the same answer again
    assert f2 == f and np.array_equal(g2, g)
    ref = _reference(inst, x)
    tol_f, tol_g = _bounds(inst, x, ref)
    with mp.workprec(200):
        err_f = float(abs(mp.mpf(float(f)) - ref["f"]))
        err_g = np.array([float(abs(mp.mpf(float(a)) - v)) for a, v in zip(g, ref["g_mp"])])
    worst = int(np.argmax(err_g / tol_g))
    assert err_f <= tol_f, f"f = {f!r}, reference {mp.nstr(ref['f'], 20)}: error {err_f:.3g} > bound {tol_f:.3g}"
    assert np.all(err_g <= tol_g), (f"g[{worst}] = {g[worst]!r}, reference {ref['g'][worst]!r}: error "
                                    f"{err_g[worst]:.3g} > bound {tol_g[worst]:.3g}")
    return err_f / tol_f, float(np.max(err_g / tol_g))


def _point(inst, seed, scale, bias_scale, shift=0.0):
    rng = np.random.default_rng(seed)
    x = S.initial_points(inst, 1, seed, init_scale=scale)[0]
    x[-inst.k:] = bias_scale * rng.standard_normal(inst.k) + shift
    return x


@pytest.mark.parametrize("loss", ["ce", "mse"])
@pytest.mark.parametrize("seed", range(12))
def test_fused_objective_and_gradient_match_the_mpmath_reference(loss, seed):
    rng = np.random.default_rng(1000 + seed)
    k, n, d = int(rng.integers(2, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 6))
    lam = 10.0 ** rng.uniform(-8, -1)
    lb = float(rng.choice([0.0, 0.03])) if loss == "ce" else 0.0
    inst = T.UFMInstance(loss, k, n, d, lam, lam * 10.0 ** rng.uniform(-1, 1), lb)
    x = _point(inst, seed, 10.0 ** rng.uniform(-2, 1.3), 10.0 ** rng.uniform(-2, 1))
    _check(inst, x)


def _collapsed(k, n, margin, lam, noise_seed):
    """W = a I, H = a Y (+ tiny noise): every label logit exceeds the others by ~margin."""
    inst = T.UFMInstance("ce", k, n, k, lam, lam)
    a = np.sqrt(margin)
    W = a * np.eye(k)
    H = a * inst.onehot() + 1e-3 * np.random.default_rng(noise_seed).standard_normal((k, inst.N))
    return inst, np.concatenate([W.ravel(), H.ravel(), np.zeros(k)])


@pytest.mark.parametrize("margin", [30.0, 39.0, 45.0, 60.0])
def test_fused_ce_is_accurate_at_a_loss_far_below_one_ulp_of_one(margin):
    # per-sample loss ~ (k - 1) exp(-margin): 1e-13 .. 1e-26, the regularizer ~1e-10: f resolves the data term
    # (log(1 + rest) would round 1 + rest and lose it, and with it the data part of the gradient)
    inst, x = _collapsed(4, 2, margin, 1e-12, int(margin))
    _check(inst, x)


@pytest.mark.parametrize("shift", [-720.0, -700.0, -660.0, 650.0, 700.0, 705.0, 720.0, 2000.0])
def test_fused_ce_is_accurate_with_logits_near_and_beyond_the_range_of_exp(shift):
    # every bias shifted by the same amount: the loss is unchanged, the logits are not; below about -665 or
    # above ~709.78 the exp of a label logit is out of range and the label-shifted evaluation is used
    inst = T.UFMInstance("ce", 5, 3, 4, 1e-3, 1e-3)
    x = _point(inst, 7, 2.0, 1.0, shift)
    _check(inst, x)


def test_fused_ce_is_accurate_when_one_class_logit_exceeds_the_labels_beyond_exp_range():
    # class 0's bias 2000 above the others': its logits exceed their labels' by ~2000 (the max-shifted block)
    inst = T.UFMInstance("ce", 3, 2, 2, 1e-3, 1e-3)
    x = _point(inst, 0, 0.5, 0.0)
    x[-3:] = [2000.0, 0.0, 0.0]
    _check(inst, x)
