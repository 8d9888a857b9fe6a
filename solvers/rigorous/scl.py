"""SCL in ball arithmetic: the full-batch class-reduced bounds and the mini-batch Gram relaxation
(docs/rigorous.md "SCL")."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

from solvers.rigorous.balls import (  # noqa: F401
    NotCertified, PRECISION_BITS, RigorousBound, Unsupported, _Precision, _Timer, certainly_ge,
    certainly_le, certainly_positive, endpoints, exact, lower_float, outward, upper_float,
)
from solvers.rigorous.linalg import (  # noqa: F401
    DENSE_MAX, lambda_min_lower,
)


# ---------------------------------------------------------------------------------------------------
# SCL, full batch, class-reduced k x k relaxation (docs/scl.md "Class-reduced dual bound")
# ---------------------------------------------------------------------------------------------------

def _scl_reduced_loss_balls(M, counts, tau_b):
    """F(M) and its gradient C (solvers.scl.reduced_loss) for a ball matrix M, in balls (O(k^2))."""
    from flint import arb

    k = len(counts)
    n = [arb(c) for c in counts]
    sq = [x.sqrt() for x in n]
    F = arb(0)
    R = [[arb(0)] * k for _ in range(k)]
    for c in range(k):
        if counts[c] < 2:
            continue
        nm = arb(counts[c] - 1)
        a = (M[c][c] - 1) / nm
        z = [((M[c][j] / (sq[c] * sq[j])) / tau_b + n[j].log()) if j != c else (a / tau_b + nm.log())
             for j in range(k)]
        zmax = max(float(x.mid()) for x in z)
        e = [(x - zmax).exp() for x in z]
        ssum = sum(e, arb(0))
        F += n[c] * (ssum.log() + zmax - a / tau_b)
        R[c] = [n[c] * ej / ssum / tau_b for ej in e]
    C = [[(R[i][j] + R[j][i]) / (2 * sq[i] * sq[j]) for j in range(k)] for i in range(k)]
    for c in range(k):
        C[c][c] = (R[c][c] - n[c] / tau_b) / (counts[c] - 1) if counts[c] >= 2 else arb(0)
    return F, C


def scl_reduced_dense(counts, tau: float, nonneg: bool, M0, *, prec: int = PRECISION_BITS,
                      mu=None, repair: bool = True, active_cosine: float = 1e-2) -> RigorousBound:
    """Rigorous class-reduced dual bound at any float candidate class matrix M0 (k <= DENSE_MAX).

    Same construction as solvers.scl.class_reduced_dual, every step in balls: M0 converted exactly
    (symmetrised exactly: (M0 + M0^T)/2 of doubles is exact in balls), F(M0) and C = grad F(M0) in balls;
    N_ij = max(C_ij, 0) exactly on the active entries (UFM+), mu a float vector (least squares from
    S M0 = 0 unless given), S = C - N - Diag(mu); when ``repair`` mu is lowered by a verified lower bound
    of lambda_min(S) (LDL^T in balls), else S must be verified PSD (NotCertified otherwise). Then
    LB = F(M0) - <C, M0> + sum_c h_c(mu_c) (docs/scl.md). No feasible value is returned (upper None).
    """
    import numpy as np
    from flint import arb

    tm = _Timer()
    counts = [int(c) for c in counts]
    k = len(counts)
    if k > DENSE_MAX:
        raise NotCertified(f"dense ball verification is limited to k <= {DENSE_MAX} (got k = {k})")
    M0 = np.asarray(M0, dtype=float)
    with _Precision(prec):
        tau_b = exact(tau)
        Mb = [[(exact(M0[i, j]) + exact(M0[j, i])) / 2 for j in range(k)] for i in range(k)]
        tm.lap("candidate (exact conversion)")
        F0, C = _scl_reduced_loss_balls(Mb, counts, tau_b)
        tm.lap("loss and gradient")
        Ms = 0.5 * (M0 + M0.T)
        Nb = [[arb(0)] * k for _ in range(k)]
        if nonneg:
            dg = np.sqrt(np.maximum(np.diag(Ms), 0.0))
            for i in range(k):
                for j in range(k):
                    if i != j and Ms[i, j] <= active_cosine * dg[i] * dg[j]:
                        Nb[i][j] = C[i][j].max(arb(0)) if not C[i][j] <= 0 else arb(0)
        A = [[C[i][j] - Nb[i][j] for j in range(k)] for i in range(k)]
        if mu is None:
            Af = np.array([[float(x.mid()) for x in row] for row in A])
            rows = np.einsum("ij,ij->i", Af @ Ms, Ms)
            norms = np.einsum("ij,ij->i", Ms, Ms)
            mu = np.where(norms > 0, rows / np.where(norms > 0, norms, 1.0), np.diag(Af))
        mub = [exact(float(x)) for x in mu]
        S = [[A[i][j] - (mub[i] if i == j else 0) for j in range(k)] for i in range(k)]
        tm.lap("dual point")
        Sf = np.array([[float(x.mid()) for x in row] for row in S])
        guess = float(np.linalg.eigvalsh(0.5 * (Sf + Sf.T))[0])
        lmin = lambda_min_lower(S, guess)
        shift = arb(0)
        if not lmin >= 0:
            if not repair:
                raise NotCertified(f"S = C - N - Diag(mu) is not verified PSD (lambda_min >= {lower_float(lmin)})")
            shift = -lmin  # exact double
        mub = [m - shift for m in mub]
        tm.lap("PSD verification (LDL^T in balls)")
        lower = F0 - sum((C[i][j] * Mb[i][j] for i in range(k) for j in range(k)), arb(0))
        for c in range(k):
            if counts[c] < 2:
                h = mub[c]
            else:
                lo_c = arb(1 if nonneg else 0)
                h = (mub[c] * lo_c).min(mub[c] * counts[c])
            lower += h
        tm.lap("dual value")
    return RigorousBound(lower, None, "ball-arithmetic class-reduced dual (dense, LDL^T-verified PSD shift)", prec,
                         {"psd_shift": upper_float(shift) if not shift.is_zero() else 0.0, "candidate_value":
                          outward(F0)}, tm.steps)


def scl_structured(counts, tau: float, nonneg: bool, d: int, *, prec: int = PRECISION_BITS) -> RigorousBound:
    """Rigorous bracket of the full-batch SCL optimum at the predicted configuration, O(k) ball operations.

    UFM+ (any counts): candidate M0 = diag(n) (collapsed orthogonal frame). Every off-diagonal logit is 0,
    so the anchor row of class c (n_c >= 2) has LSE log Z_c, Z_c = (n_c - 1) e^{1/tau} + (N - n_c), and
    F(M0) = sum n_c (log Z_c - 1/tau) = sum n_c log1p(n_c - 2 + (N - n_c) e^{-1/tau}) (evaluated so). Dual point, exactly: N = the off-diagonal part of C (each entry is
    (R_cc' + R_c'c) / (2 sqrt(n_c n_c')) with softmax weights R >= 0, so N >= 0), mu = diag(C), hence
    S = C - N - Diag(mu) = 0 (PSD). C_cc = n_c (P_cc - 1)/(tau (n_c - 1)), P_cc = (n_c - 1) e^{1/tau}/Z_c
    (0 for singletons). LB = F(M0) - sum_c n_c C_cc + sum_c h_c(C_cc).
    Balanced UFM (n >= 2): candidate M0 = n k/(k - 1) J_k (collapsed simplex ETF, exact rationals). C =
    alpha I + beta 11^T with alpha = n (P_cc - 1)/(tau (n - 1)), beta = P_off / tau (P_off = n e^{-1/((k-1) tau)}
    / Z, Z = (n - 1) e^{1/tau} + (N - n) e^{-1/((k-1) tau)}); mu = alpha, N = 0, S = beta 11^T with eigenvalues
    0 and k beta >= 0. LB = F(M0) - alpha tr(M0) + k min(0, n alpha).
    Feasible value: F(M0), attained by the configuration when d >= k (OF; d >= required_dim_for_bound with
    shared singleton directions: the multi-class anchor rows see the same logits) or d >= k - 1 (ETF).
    """
    from flint import arb

    tm = _Timer()
    counts = [int(c) for c in counts]
    k, N = len(counts), sum(counts)
    with _Precision(prec):
        tau_b = exact(tau)
        # stable forms (no cancellation at tiny tau): with D = Z e^{-1/tau},
        # log Z - 1/tau = log1p(D - 1) and P_cc - 1 = -(D - (n_c - 1)) / D
        em = (-1 / tau_b).exp()
        F0 = arb(0)
        lower_extra = arb(0)
        if nonneg:
            for c, nc in enumerate(counts):
                if nc < 2:
                    continue  # C_cc = 0 = mu_c: h = 0, <C, M0> term 0
                q = (N - nc) * em
                D = (nc - 1) + q
                Fc = nc * ((nc - 2) + q).log1p()
                Ccc = -nc * (q / D) / (tau_b * (nc - 1))
                h = Ccc.min(Ccc * nc)  # L_c = 1 (UFM+), upper n_c
                F0 += Fc
                lower_extra += -nc * Ccc + h
            method = "ball-arithmetic class-reduced dual at the collapsed orthogonal frame (S = 0 exactly)"
            need = sum(1 for x in counts if x >= 2) + (1 if any(x == 1 for x in counts) else 0)
            attained = d >= need
        else:
            if len(set(counts)) != 1 or counts[0] < 2:
                raise NotCertified("the structured SCL recipe for UFM needs balanced classes with n >= 2")
            n = counts[0]
            ek = (-k / (tau_b * (k - 1))).exp()  # e^{b/tau - a/tau} with b = -1/(k-1), a = 1
            q = (N - n) * ek
            D = (n - 1) + q
            F0 = N * ((n - 2) + q).log1p()
            alpha = -n * (q / D) / (tau_b * (n - 1))
            beta = (n * ek / D) / tau_b
            if not beta >= 0:
                raise NotCertified("S = beta 11^T is not verified PSD")
            lower_extra = -alpha * (k * n) + k * (arb(0).min(n * alpha))
            method = "ball-arithmetic class-reduced dual at the collapsed simplex ETF (S = beta 11^T, analytic)"
            attained = d >= k - 1
        lower = F0 + lower_extra
        tm.lap("loss, gradient and dual value (class-structured)")
    return RigorousBound(lower, F0 if attained else None, method, prec,
                         {"candidate": "orthogonal frame" if nonneg else "simplex ETF",
                          "feasible_value_attained": bool(attained)}, tm.steps)


def scl_from_instance(params: dict, *, prec: int = PRECISION_BITS, H=None) -> RigorousBound:
    """The rigorous SCL recipe for a report's instance dict (counts, tau, d, nonneg, batches): full batch
    UFM+ (any counts) and balanced UFM; mini-batches through :func:`scl_minibatch` (``H``: the check's own
    float candidate features, d x N, when it has them: no second solve). Others raise NotCertified with the
    reason."""
    if params.get("batches"):
        return scl_minibatch(params, prec=prec, H=H)
    counts = [int(c) for c in params["counts"]]
    nonneg = bool(params.get("nonneg", True))
    if not nonneg and (len(set(counts)) != 1 or counts[0] < 2):
        # imbalanced (or n = 1) full-batch SCL-UFM: no closed form; the dense Gram recipe of the mini-batch
        # case with the full batch as the one batch (N <= DENSE_MAX)
        return scl_minibatch({**params, "batches": None}, prec=prec, H=H)
    return scl_structured(counts, float(params["tau"]), nonneg, int(params["d"]), prec=prec)


# ---------------------------------------------------------------------------------------------------
# SCL, mini-batches: the N x N Gram relaxation (docs/scl.md "Proven lower bounds (repaired dual points)";
# docs/rigorous.md "SCL, mini-batches")
# ---------------------------------------------------------------------------------------------------

#: Float candidate of `solve scl --batches ... --no-nonneg --rigorous` (mini-batch UFM has no closed-form
#: minimiser): starts of the family's factored solver (seed 0; its work budget is their iteration limit,
#: a count, so the candidate is the same at any machine load) and its wall-clock safety net (s), the SCL
#: engine's WALL_SAFETY_S, far above the work budget's time. A choice: only the tightness of the bracket
#: depends on it.
SCL_MINIBATCH_STARTS = 3
SCL_MINIBATCH_SOLVER_BUDGET_S = 600.0
#: Mini-batch SCL-UFM: when the bracket at the factored solver's point is wider than this (relative), the dual
#: point is also built at a conic solver's primal Gram (solvers.scl.gram_relaxation, N <= MAX_CERTIFICATE_SAMPLES),
#: as the float pipeline does. 1e-10 is 10x below the family's value tolerance (proofs_check.claims.scl.VALUE_RTOL):
#: at the solver's point alone the PSD shift cost up to 2e-6 relative ((5,3,2), tau = 0.1; measured).
SCL_MINIBATCH_TIGHT_RTOL = 1e-10
#: Entries of a candidate Gram at or below this are the active nonnegativity constraints (UFM+), as
#: solvers.scl.ACTIVE_ENTRY (a choice of the dual point, not a tolerance).
SCL_ACTIVE_ENTRY = 1e-6


def _scl_batch_list(counts, batches):
    """(labels, batches as index tuples of size >= 2) for a validated instance (batches None: the full batch)."""
    from theory import scl as TS

    inst = TS.SCLInstance(tuple(int(c) for c in counts), 1.0, 1, True, batches)
    y = [int(v) for v in inst.labels]
    return y, [tuple(int(i) for i in b) for b in inst.batch_list() if len(b) >= 2]


def scl_minibatch_of(counts, batches, tau: float, d: int, *, mu=None, prec: int = PRECISION_BITS) -> RigorousBound:
    """Rigorous bracket of the mini-batch SCL-UFM+ optimum (any counts, any batching) at the collapsed orthogonal
    frame G0 (G0_ij = 1 within a class, 0 between): the dual point of solvers.scl.gram_certificate at G0, built in
    balls from the per-(batch, class) structure (O(#batches k + sum |B|) ball operations, no N x N matrix).

    At G0, an anchor of class c in batch B (n = n_{B,c} >= 2, q = |B| - n, e = e^{-1/tau}, D = n - 1 + q e) has the
    logits 1/tau (n - 1 positives) and 0 (q others), so C = grad F(G0) has, per (B, c): within-class entries
    w = -q e / ((n - 1) D tau) <= 0 and between entries (A_il + A_li)/2 with A_il = e / (D tau) >= 0 (checked
    for every point of the balls); C_ii = 0 (the loss never sees G_ii). Dual point: N = the between-class part of
    C (>= 0; G0 is 0 there), mu_i = sum_{l in class(i)} C_il (exact real row sums, enclosed in balls), so
    S = C - N - Diag(mu) = sum_{B,c} (-w) L_{B,c} (L: the Laplacian of the complete graph on class c's members of
    B) is PSD for every point of the balls (a nonnegative combination of Laplacians). With a given ``mu``
    (doubles, one per sample) S = that sum + Diag(mu_exact - mu), accepted only when mu_i <= the exact row sum for
    every i (certain in balls), else NotCertified. LB = F(G0) - <C, G0> + sum_i mu_i (docs/scl.md), with
    F(G0) = sum_{B,c} n log1p(n - 2 + q e) (stable at tiny tau). Feasible value F(G0) when d >= k (the OF exists);
    the lower bound holds at every d (relaxation)."""
    from flint import arb

    tm = _Timer()
    counts = [int(c) for c in counts]
    k = len(counts)
    y, blist = _scl_batch_list(counts, batches)
    Ns = len(y)
    with _Precision(prec):
        tau_b = exact(tau)
        em = (-1 / tau_b).exp()
        zero = arb(0)
        F0, CG0 = zero, zero
        mu_ex = [zero] * Ns
        pairs = 0
        for B in blist:
            m = len(B)
            members: dict = {}
            for i in B:
                members.setdefault(y[i], []).append(i)
            for c, idx in members.items():
                n = len(idx)
                if n < 2:
                    continue
                q = m - n
                qe = q * em
                D = (n - 1) + qe
                F0 += n * ((n - 2) + qe).log1p()
                w = -qe / ((n - 1) * D * tau_b)  # C entry of every within-class pair of c in B
                if not certainly_le(w, zero):
                    raise NotCertified(f"within-class gradient entry {w} is not certainly <= 0 (Laplacian weight)")
                if q and not certainly_ge(em / (D * tau_b), zero):
                    raise NotCertified("between-class gradient entry not certainly >= 0 (nonnegativity multiplier)")
                CG0 += (n * (n - 1)) * w
                for i in idx:
                    mu_ex[i] = mu_ex[i] + (n - 1) * w
                pairs += 1
        tm.lap("loss and gradient (per batch and class)")
        if mu is None:
            mub = mu_ex
            delta_min = 0.0
        else:
            if len(mu) != Ns:
                raise ValueError(f"mu must have one entry per sample ({Ns}), got {len(mu)}")
            mub = [exact(float(v)) for v in mu]
            deltas = [mu_ex[i] - mub[i] for i in range(Ns)]
            bad = [i for i in range(Ns) if not certainly_ge(deltas[i], zero)]
            if bad:
                raise NotCertified(f"S = C - N - Diag(mu) is not verified PSD: mu_{bad[0]} = {float(mu[bad[0]])!r} may "
                                   f"exceed the row sum {mu_ex[bad[0]]} of its class block")
            delta_min = min(lower_float(x) for x in deltas) if deltas else 0.0
        lower = F0 - CG0 + sum(mub, zero)
        tm.lap("dual value")
    attained = int(d) >= k
    det = {"candidate": "orthogonal frame (sample Gram)", "batch_class_terms": pairs, "samples": Ns,
           "batches": len(blist), "psd": "S is a nonnegative combination of complete-graph Laplacians "
           "(weights certainly >= 0 in balls)" + ("" if mu is None else " plus Diag(row sum - mu) >= 0"),
           "feasible_value_attained": bool(attained), "min_mu_slack": delta_min}
    if not attained:
        det["upper_note"] = f"d = {int(d)} < k = {k}: no orthogonal frame; only the lower bound holds"
    return RigorousBound(lower, F0 if attained else None,
                         "ball-arithmetic Gram dual at the collapsed orthogonal frame (mini-batch; S a sum of "
                         "Laplacians)", prec, det, tm.steps)


def _scl_gram_loss_balls(Gb, y, blist, tau_b, want_grad: bool = True):
    """The batching's loss F(G) and its symmetric gradient C (solvers.scl.scl_loss with gram=True) for a ball
    matrix G (list of lists), in balls: O(sum |B|^2)."""
    from flint import arb

    Ns = len(Gb)
    zero = arb(0)
    F = zero
    A = [[zero] * Ns for _ in range(Ns)] if want_grad else None
    for B in blist:
        for i in B:
            pos = [j for j in B if j != i and y[j] == y[i]]
            if not pos:
                continue
            oth = [l for l in B if l != i]
            z = [Gb[i][l] / tau_b for l in oth]
            zmax = exact(max(float(v.mid()) for v in z))
            e = [(v - zmax).exp() for v in z]
            s = sum(e, zero)
            npos = len(pos)
            F += zmax + s.log() - sum((Gb[i][j] for j in pos), zero) / (npos * tau_b)
            if want_grad:
                Ai = A[i]
                for l, el in zip(oth, e):
                    Ai[l] = Ai[l] + el / (s * tau_b)
                for j in pos:
                    Ai[j] = Ai[j] - 1 / (npos * tau_b)
    if not want_grad:
        return F, None
    C = [[(A[i][j] + A[j][i]) / 2 for j in range(Ns)] for i in range(Ns)]
    return F, C


def scl_gram_dense(counts, batches, tau: float, nonneg: bool, G0, *, mu=None, repair: bool = True,
                   prec: int = PRECISION_BITS) -> RigorousBound:
    """Rigorous lower bound of the (mini-batch) SCL optimum from the dual point of solvers.scl.gram_certificate
    at any float candidate Gram G0 (N <= DENSE_MAX samples), every step in balls: G0 symmetrised in floats (UFM+:
    off-diagonal entries <= SCL_ACTIVE_ENTRY set to 0, the active nonnegativity constraints) and converted
    exactly; F(G0) and C = grad F(G0) in balls; N_ij = max(C_ij, 0) exactly on the active entries (UFM+); mu a
    float vector (least squares from S G0 = 0 unless given); S = C - N - Diag(mu); with ``repair`` mu is lowered
    by a verified lower bound of lambda_min(S) (LDL^T in balls), else S must be verified PSD (NotCertified
    otherwise). LB = F(G0) - <C, G0> + sum_i mu_i (diag G = 1 on the feasible set). No feasible value."""
    import numpy as np
    from flint import arb

    tm = _Timer()
    counts = [int(c) for c in counts]
    y, blist = _scl_batch_list(counts, batches)
    Ns = len(y)
    if Ns > DENSE_MAX:
        raise Unsupported(f"N = {Ns} samples > {DENSE_MAX}: the N x N dual slack is verified by dense LDL^T in balls")
    G0 = np.asarray(G0, dtype=float)
    if G0.shape != (Ns, Ns) or not np.all(np.isfinite(G0)):
        raise NotCertified(f"candidate Gram must be a finite {Ns} x {Ns} array")
    G0 = 0.5 * (G0 + G0.T)
    active = np.zeros((Ns, Ns), dtype=bool)
    if nonneg:
        active = G0 <= SCL_ACTIVE_ENTRY
        np.fill_diagonal(active, False)
        G0 = np.where(active, 0.0, G0)
    with _Precision(prec):
        zero = arb(0)
        tau_b = exact(tau)
        Gb = [[exact(float(G0[i, j])) for j in range(Ns)] for i in range(Ns)]
        F0, C = _scl_gram_loss_balls(Gb, y, blist, tau_b)
        tm.lap("loss and gradient")
        Nb = [[(C[i][j].max(zero) if not C[i][j] <= zero else zero) if active[i, j] else zero for j in range(Ns)]
              for i in range(Ns)]
        Am = [[C[i][j] - Nb[i][j] for j in range(Ns)] for i in range(Ns)]
        if mu is None:
            Af = np.array([[float(x.mid()) for x in row] for row in Am])
            rows = np.einsum("ij,ij->i", Af @ G0, G0)
            norms = np.einsum("ij,ij->i", G0, G0)
            mu = np.where(norms > 0, rows / np.where(norms > 0, norms, 1.0), np.diag(Af))
        mu = np.asarray(mu, dtype=float)
        if mu.shape != (Ns,) or not np.all(np.isfinite(mu)):
            raise NotCertified(f"mu must be a finite vector of {Ns} entries")
        mub = [exact(float(v)) for v in mu]
        S = [[Am[i][j] - (mub[i] if i == j else 0) for j in range(Ns)] for i in range(Ns)]
        tm.lap("dual point")
        Sf = np.array([[float(x.mid()) for x in row] for row in S])
        guess = float(np.linalg.eigvalsh(0.5 * (Sf + Sf.T))[0])
        lmin = lambda_min_lower(S, guess)
        shift = zero
        if not lmin >= 0:
            if not repair:
                raise NotCertified(f"S = C - N - Diag(mu) is not verified PSD (lambda_min >= {lower_float(lmin)})")
            shift = -lmin  # an exact double (or Gershgorin's ball)
        tm.lap("PSD verification (LDL^T in balls)")
        lower = F0 - sum((C[i][j] * Gb[i][j] for i in range(Ns) for j in range(Ns)), zero) + \
            sum(mub, zero) - Ns * shift
        tm.lap("dual value")
    return RigorousBound(lower, None, "ball-arithmetic Gram dual (dense, LDL^T-verified PSD shift)", prec,
                         {"psd_shift": upper_float(shift) if not shift.is_zero() else 0.0, "samples": Ns,
                          "candidate_value": outward(F0), "active_entries": int(active.sum())}, tm.steps)


def scl_gram_feasible(counts, batches, tau: float, nonneg: bool, H, *, prec: int = PRECISION_BITS):
    """The batching's loss at the features h_i / ||h_i|| (H: d x N doubles, exact), in balls: the Gram of the
    exactly normalised columns (arb matrix product, diagonal exactly 1) and F(G). That configuration is feasible
    at dimension d (UFM+: H >= 0 is required), so the upper end of the ball bounds the optimum from above."""
    import numpy as np
    from flint import arb, arb_mat

    counts = [int(c) for c in counts]
    y, blist = _scl_batch_list(counts, batches)
    H = np.asarray(H, dtype=float)
    Ns = len(y)
    if H.ndim != 2 or H.shape[1] != Ns or not np.all(np.isfinite(H)):
        raise NotCertified(f"candidate features must be a finite d x {Ns} array")
    if nonneg and np.any(H < 0):
        raise NotCertified("UFM+ candidate has a negative feature entry")
    with _Precision(prec):
        Hb = arb_mat(H.tolist())
        Gr = Hb.transpose() * Hb
        nrm = [Gr[i, i].sqrt() for i in range(Ns)]
        if not all(certainly_positive(x) for x in nrm):
            raise NotCertified("a candidate feature is zero")
        Gb = [[arb(1) if i == j else Gr[i, j] / (nrm[i] * nrm[j]) for j in range(Ns)] for i in range(Ns)]
        F, _ = _scl_gram_loss_balls(Gb, y, blist, exact(tau), want_grad=False)
    return F


def scl_minibatch(params: dict, *, prec: int = PRECISION_BITS, H=None) -> RigorousBound:
    """The rigorous recipe of a mini-batch SCL report instance (counts, tau, d, nonneg, batches).
    UFM+: :func:`scl_minibatch_of` (any size). UFM (no closed-form minimiser): the float candidate is recomputed
    with the family's factored solver (SCL_MINIBATCH_STARTS starts, seed 0, SCL_MINIBATCH_SOLVER_BUDGET_S), the
    lower bound is :func:`scl_gram_dense` at its Gram and the feasible value :func:`scl_gram_feasible` at its
    features; N > DENSE_MAX samples raise Unsupported before the solve."""
    import numpy as np

    from solvers import scl as SS
    from theory import scl as TS

    counts = [int(c) for c in params["counts"]]
    tau, d, nonneg = float(params["tau"]), int(params["d"]), bool(params.get("nonneg", True))
    batches = [list(b) for b in params["batches"]] if params.get("batches") else None  # None: the full batch
    inst = TS.SCLInstance(tuple(counts), tau, d, nonneg, batches)
    if nonneg:
        if batches is None:
            raise Unsupported("full-batch SCL with ReLU goes through scl_structured, not the mini-batch recipe")
        return scl_minibatch_of(counts, batches, tau, d, prec=prec)
    if inst.N > DENSE_MAX:
        raise Unsupported(f"mini-batch SCL-UFM with N = {inst.N} samples > {DENSE_MAX}: no closed-form candidate, "
                          f"and the N x N dual slack is verified by dense LDL^T in balls")
    tm = _Timer()
    if H is not None and np.shape(H) == (d, inst.N) and np.all(np.isfinite(H)) and np.all(np.any(H != 0, axis=0)):
        candidate = "the check's own float candidate (no second solve)"
        H = np.asarray(H, dtype=float)
        H = H / np.linalg.norm(H, axis=0, keepdims=True)
        float_value = None
    else:  # a saved report: solve again for a candidate (only the tightness depends on it)
        sol = SS.solve_factored(inst, starts=SCL_MINIBATCH_STARTS, seed=0, time_budget=SCL_MINIBATCH_SOLVER_BUDGET_S)
        H = np.asarray(sol.variables["H"], dtype=float)
        H = H / np.linalg.norm(H, axis=0, keepdims=True)
        candidate, float_value = f"solvers.scl.solve_factored, {SCL_MINIBATCH_STARTS} starts, seed 0", float(sol.value)
        if sol.diagnostics.get("time_budget_reached"):
            candidate += (f" (stopped by the wall-clock safety limit ({SCL_MINIBATCH_SOLVER_BUDGET_S:g} s); the work "
                          "budget was not reached)")
        tm.lap("float candidate (factored solver)")
    rb = scl_gram_dense(counts, batches, tau, False, H.T @ H, prec=prec)
    tm.lap("lower bound")
    rb.upper = scl_gram_feasible(counts, batches, tau, False, H, prec=prec)
    tm.lap("feasible value (normalised candidate features)")
    width = endpoints(rb.upper)[1] - endpoints(rb.lower)[0]
    routes = {"dual at the solver's point": rb.lower_bound}
    if width > Fraction(SCL_MINIBATCH_TIGHT_RTOL) * abs(endpoints(rb.upper)[1]):
        if inst.N <= SS.MAX_CERTIFICATE_SAMPLES and TS.estimate_cost(inst)["exp_cones"] <= TS.CONIC_MAX_CONES:
            rel = SS.gram_relaxation(counts, batches, tau, nonneg=False)
            tm.lap("conic solver's point (solvers.scl.gram_relaxation)")
            if rel.G is not None:
                rb2 = scl_gram_dense(counts, batches, tau, False, rel.G, prec=prec)
                tm.lap("lower bound at the conic point")
                routes["dual at the conic solver's point"] = rb2.lower_bound
                if rb2.lower_bound > rb.lower_bound:
                    rb.lower, rb.details["psd_shift"] = rb2.lower, rb2.details["psd_shift"]
        else:
            rb.details["conic_note"] = (f"bracket wider than {SCL_MINIBATCH_TIGHT_RTOL:g} relative; no conic route "
                                        f"(N = {inst.N} > {SS.MAX_CERTIFICATE_SAMPLES} or too many cones)")
    rb.details["routes"] = routes
    rb.method = "ball-arithmetic Gram dual at the factored solver's point (dense LDL^T) and its loss"
    rb.details.update(candidate=candidate, candidate_float_value=float_value)
    rb.steps = {**{k_: v for k_, v in tm.steps.items()}, **{"dense: " + k_: v for k_, v in rb.steps.items()}}
    return rb
