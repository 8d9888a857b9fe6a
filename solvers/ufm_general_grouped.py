"""Grouping exchangeable classes of the any-loss UFM (docs/ufm_general.md, "Grouping exchangeable classes"):
the invariant point (A, beta, b) of the groups, its values, the grouped L-BFGS solver, its bias polish and
certificate, the per-group geometry, and the dual margin on one group's sum-zero eigenspace (minority collapse).
The instance and the class-reduced routines are in :mod:`solvers.ufm_general_core`; the entry point is
:func:`solvers.ufm_general.solve`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from solvers import lbfgs
from solvers.common import Certificate, Solution, blas_threads
from solvers.ufm_general_core import (EXPAND_MAX, GROUPED_EVALS_PER_START, RANK_RTOL, RANK_VALUE_RTOL, SAFETY_MESSAGE,
                                      UNIT_ROUNDOFF, WALL_SAFETY_S, GeneralUFM, _gram_sqrts, _small_blas,
                                      conjugate_slots, repair_slots, spectral_slack, spectral_upper)
from theory._validate import InputError


@_small_blas
def clean_grouped(p: "GeneralUFM", pt: "GroupedPoint", layout) -> "GroupedPoint":
    """The grouped point with the singular values of A and the |beta_a| below RANK_VALUE_RTOL x value / lam set
    to exactly 0 (see RANK_VALUE_RTOL)."""
    thr = RANK_VALUE_RTOL * abs(grouped_value(p, pt, layout)) / p.lam
    U, s, Vt = np.linalg.svd(pt.A)
    A = pt.A if not np.any((s > 0) & (s <= thr)) else (U * np.where(s > thr, s, 0.0)) @ Vt
    beta = np.where(np.abs(pt.beta) > thr, pt.beta, 0.0)
    return GroupedPoint(A, beta, pt.b.copy())



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
