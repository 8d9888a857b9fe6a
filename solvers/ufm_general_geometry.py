"""The geometry certificate of the any-loss UFM (docs/ufm_general.md, "Geometry certificate"): a proven enclosure
of the unique minimiser from the dual point of the value certificate, the structural uniqueness theorem, and proven
intervals of the geometry (cosines, norms, minority measures) of every minimiser. The entry point is
:func:`solvers.ufm_general.solve`."""

from __future__ import annotations

import math

import numpy as np

from solvers.common import Certificate
from solvers.ufm_general_core import UNIT_ROUNDOFF, GeneralUFM, repair_columns, repair_slots, spectral_slack
from solvers.ufm_general_grouped import GroupedPoint, _group_counts, slot_logits

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
    if p.lb != 0.0 and not isinstance(p.loss, (SquaredError, CrossEntropy)):
        out["why"] = ("the geometry certificate is derived for a free bias (lambda_b = 0), or for the softmax losses "
                      "and the squared error with a regularised bias; not for the loss " + repr(p.loss.name)
                      + " with lambda_b > 0")
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
        if p.lb > 0.0:
            # regularised bias (docs/ufm_general.md, "Softmax losses with a regularised bias"): F - D >= (1/N) sum_c
            # n_c FY_c + (lb/2) ||b - bhat||^2, bhat = -V n / (N lb); 1^T X* = 0 still (gradient columns sum to 0),
            # but not X* sqrt(n) = 0: X* = (C* - J b* 1^T) D^{1/2}, Xhat = (Chat - J bhat 1^T) D^{1/2}, and
            # ||X* - Xhat||_F <= sqrt(3 N g1 / min w pi) + sqrt(N) sqrt(2 g2 / lb) <= sqrt(N g (3 / min w pi + 2 / lb))
            a1 = V @ (cnt / N)
            bhat = -a1 / p.lb
            jb = bhat - bhat.mean()
            Uc = (C - jb[:, None]) * sq
            r2 = N * gap * (3.0 / float(np.min(wp)) + 2.0 / p.lb)
            # float: J bhat and its products (as the squared-error branch), on top of the centred logits' allowance
            ferr += (4 * u * float(np.linalg.norm(np.abs(jb)[:, None] * sq))
                     + (G + 8) * u * float(np.linalg.norm((np.abs(V) @ (cnt / N)) / p.lb)) * 2.0 * math.sqrt(N))
            structural = min(K - 1, G)
            out.update(kind="softmax, regularised bias", bias_center=bhat.tolist() if K <= 100 else None)
            out["uniqueness"] = ("strictly convex in (C, b) (the loss in the centred logits C = J U, Hessian "
                                 "diag(p) - p p^T positive definite on 1-perp; (lb/2)||b||^2 with lb > 0), so every "
                                 "minimiser has the same C* and b*; 1^T X* = 0 (KKT: the gradient columns sum to 0), "
                                 "hence X* = (C* - J b* 1^T) D^{1/2} is unique; class-constant, rank X* <= min(K - 1, G)")
    elif isinstance(loss, SquaredError) and p.lb > 0.0:
        # regularised bias (docs/ufm_general.md, "MSE with a regularised bias"): F - D >= (1/(2N)) sum_c n_c
        # ||u_c - t_c - v_c||^2 + (lb/2) ||b - bhat||^2, bhat = -V n / (N lb); X = (U - b 1^T) D^{1/2}, so
        # ||X* - Xhat||_F <= sqrt(2 N g) + sqrt(N) sqrt(2 g / lb) <= sqrt(2 N g (1 + 1/lb)) (Cauchy-Schwarz)
        T = loss.T[:, p.y]
        a1 = V @ (cnt / N)
        bhat = -a1 / p.lb
        Uc = (T + V - bhat[:, None]) * sq
        r2 = 2.0 * N * gap * (1.0 + 1.0 / p.lb)
        # float: T + V - bhat and the products (4u per entry), bhat = -(V n / N) / lb (G + 4 u per entry)
        ferr = (4 * u * float(np.linalg.norm((np.abs(T) + np.abs(V) + np.abs(bhat)[:, None]) * sq))
                + (G + 4) * u * float(np.linalg.norm((np.abs(V) @ (cnt / N)) / p.lb)) * math.sqrt(N))
        structural = min(K, G)
        e_grad = math.sqrt(2.0 * N * gap) / N
        out.update(kind="squared, regularised bias", bias_center=bhat.tolist() if K <= 100 else None)
        out["uniqueness"] = ("strongly convex in (U, b) (squared error in the logits U, (lb/2)||b||^2 with lb > 0), "
                             "and (X, b) -> (U, b) is a linear bijection: (X*, b*) is unique; class-constant by the "
                             "within-class permutations, so rank X* <= min(K, G)")
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
    if out.get("kind") in ("squared, regularised bias", "softmax, regularised bias"):
        Xh = Uc  # no projector: with lb > 0 the row space of X* need not be orthogonal to sqrt(n)
    else:
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

    if p.lb != 0.0 and isinstance(p.loss, (SquaredError, CrossEntropy)):
        # a decayed bias (lb > 0), coercive through (lb/2)||b||^2 + lam ||Z||_*, so a minimiser exists; class-constant.
        # Squared error: strongly convex in (U, b), rank <= min(K, G) (docs/ufm_general.md, "MSE with a regularised
        # bias"). Softmax: strictly convex in (C, b) (centred logits), 1^T Z* = 0, rank <= min(K - 1, G) ("Softmax
        # losses with a regularised bias").
        if isinstance(p.loss, SquaredError):
            r, how = min(p.K, p.G), "squared error with lambda_b > 0: strongly convex in (U, b)"
        else:
            r = min(p.K - 1, p.G)
            how = f"{p.loss.name} with lambda_b > 0: strictly convex in the centred logits and the bias, 1^T Z* = 0"
        if r > p.d:
            return {"ok": False, "rank_bound_structural": r,
                    "why": f"the structural rank bound {r} exceeds d = {p.d} (the dual bound needs K x K matrices)"}
        return {"ok": True, "rank_bound_structural": r,
                "why": f"{how}, so (Z*, b*) is unique, class-constant, rank(Z*) <= {r} <= d = {p.d}: every factored "
                       f"minimiser is a balanced factorization of Z*"}
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
