"""Supervised contrastive loss: proven lower bounds and geometry certificates on the Gram matrix (the repaired
dual point of the convex Gram relaxation at a candidate, the closed-form dual points at the collapsed ETF / OF,
the growth bounds that turn a certified gap into a radius, and the collapsed-candidate certificate of imbalanced
UFM). docs/scl.md, "Certificates". Part of the SCL engine (``solvers.scl`` re-exports every name).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from solvers.scl_batching import CompiledBatching, _as_compiled, _loss_gram
from theory._validate import InstanceError, as_finite_array, as_labels
from theory.scl import validate_tau


# --------------------------------------------------------------------------------------
# Proven lower bounds and geometry certificates on the Gram matrix (docs/scl.md, "Certificates")
# --------------------------------------------------------------------------------------

EPS = float(np.finfo(float).eps)
#: Safety factor applied to every textbook rounding bound below (the allowances are stated, not
#: tuned: removing them does not change any measured verdict, they only make the bounds honest).
ROUND_SAFETY = 8.0
#: Off-diagonal entries of a candidate Gram at or below this are treated as active nonnegativity
#: constraints (UFM+): they are set to 0 in the candidate (any symmetric candidate gives a valid
#: bound) and carry the multiplier N. Exactly 0 at the predicted OF Gram; an interior-point solution
#: leaves them at ~1e-8 (measured), so 1e-9 missed them and cost the bound up to 3 units.
ACTIVE_ENTRY = 1e-6


def _eig_error(n: int, norm2: float) -> float:
    """Bound on |computed - exact| for each eigenvalue of a symmetric n x n matrix of 2-norm ``norm2``:
    LAPACK's symmetric eigensolvers are backward stable (exact eigenvalues of S + E with
    ||E||_2 <= p(n) eps ||S||_2) and Weyl's inequality moves every eigenvalue by at most ||E||_2;
    p(n) = n, times ROUND_SAFETY."""
    return ROUND_SAFETY * n * EPS * float(norm2)


def loss_rounding(cb: "CompiledBatching", tau: float, gmax: float = 1.0) -> float:
    """Bound on |computed - exact| of :func:`scl_loss` at a Gram with |G_ij| <= gmax: each anchor
    term LSE - mean is formed from logits of size <= gmax/tau (max-shifted exponentials, pairwise sums,
    one log) to about (log2 m + 4) eps of (2 gmax/tau + log m + 1), and the anchor terms are summed
    pairwise (log2 R more)."""
    tot, R = 0.0, 0
    for g in cb.groups:
        m = g.idx.shape[1]
        r = int(g.anchor.sum())
        R += r
        tot += r * (math.log2(m) + 4.0) * (2.0 * gmax / tau + math.log(m) + 1.0)
    return ROUND_SAFETY * EPS * tot * (1.0 + math.log2(max(R, 1)))


#: Local radii rho (in units of tau) tried by the ETF face growth bound (:func:`etf_face_radius`):
#: every rho gives a valid radius (the smallest is kept). Small rho keeps the softmax weights near
#: their values at the ETF (factor >= e^{-2 rho/tau}), large rho keeps more points in the quadratic
#: regime; 1/16 .. 8 tau covers both ends (measured: the best is 1/16 .. 1/8 tau at tau <= 1).
GROWTH_RHOS = (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def etf_face_growth(counts: Sequence[int], tau: float, rho: float, alpha_max: float = 0.0) -> dict:
    """Curvature of the balanced full-batch loss around the collapsed simplex ETF, along the class
    Grams (docs/scl.md, "Growth on the ETF face (k >= 4)").

    For a class-symmetric Gram (1 on the diagonal, a_c within class c, b_cc' between classes c, c')
    the anchor terms of class c are n copies of LSE(x_c) - a_c/tau with the k-vector of logits
    x_c = (a_c/tau + log(n - 1), b_cc'/tau + log n for c' != c). Along the segment from the ETF
    (a = 1, b = b0 = -1/(k-1)) to such a Gram, as long as |b_cc'(s) - b0| <= rho and
    a_c(s) >= 1 - alpha_max, the softmax weights of x_c(s) satisfy

        p_pos >= P  = (n-1) e^{(1 - alpha_max)/tau} / Zmax,
        p_c'  >= pi = n e^{max(b0 - rho, -1)/tau} / Zmax,  Zmax = (n-1) e^{1/tau} + n (k-1) e^{min(b0 + rho, 1)/tau}

    (a <= 1 and |b| <= 1 on the feasible set). The LSE Hessian's quadratic form along v is the
    variance of v under the softmax weights, min_c sum_l p_l (v_l - c)^2, which only grows with the
    weights, so it is >= the same with weights (P, pi, ..., pi). With v = (alpha, beta)/tau,
    beta = b - b0, alpha = a - 1, beta = beta_perp + mean(beta) 1 (beta_perp centred), that is

        pi ||beta_perp||^2 / tau^2 + kappa (mean(beta) - alpha)^2 / tau^2,  kappa = P pi (k-1) / (P + pi (k-1)),

    so (per anchor, in the coordinates b of the class Gram) the curvature is >= ``mu_centred`` =
    pi / tau^2 on centred directions (the face: rows of A sum to 0) and >= ``mu`` =
    P pi / (P + pi (k-1)) / tau^2 on ||beta - alpha 1||^2 (every direction).
    Computed in log space (no overflow at tau = 1e-4; 0 when it underflows: no bound)."""
    counts = tuple(int(c) for c in counts)
    k, n = len(counts), float(counts[0])
    tau = float(tau)
    b0 = -1.0 / (k - 1)
    log_zmax = float(np.logaddexp(math.log(n - 1.0) + 1.0 / tau, math.log(n * (k - 1)) + min(b0 + rho, 1.0) / tau))
    log_P = math.log(n - 1.0) + (1.0 - min(alpha_max, 2.0)) / tau - log_zmax
    log_pi = math.log(n) + max(b0 - rho, -1.0) / tau - log_zmax
    # P pi / (P + pi (k-1)) = pi / (1 + (k-1) pi / P), in logs
    log_mu = log_pi - float(np.logaddexp(0.0, math.log(k - 1.0) + log_pi - log_P)) - 2.0 * math.log(tau)
    log_mu_c = log_pi - 2.0 * math.log(tau)
    # 1 - 1e-12: the few roundings of the logs and exps (relative ~1e-15 each)
    mu = math.exp(log_mu) * (1.0 - 1e-12) if log_mu > -700.0 else 0.0
    mu_c = math.exp(log_mu_c) * (1.0 - 1e-12) if log_mu_c > -700.0 else 0.0
    return {"mu": mu, "mu_centred": mu_c, "rho": float(rho), "log_P": log_P, "log_pi": log_pi,
            "alpha_max": float(alpha_max)}


def _growth_solve(q: float, offset: float, rho: float) -> float:
    """Bound on sum_c Y_c^2 from sum_c h(Y_c) <= q, h(Y) = Y^2 min(1, rho / (Y + offset)) (h is increasing,
    so every Y_c <= Y* = h^{-1}(q); for Y <= Y*, h(Y) >= Y^2 min(1, rho / (Y* + offset)))."""
    y_quad = math.sqrt(q)
    if y_quad + offset <= rho:
        return q
    y_star = max(y_quad, 0.5 * (q + math.sqrt(q * q + 4.0 * q * offset * rho)) / rho)  # rho Y^2 = q (Y + offset)
    return q * max(1.0, (y_star + offset) / rho)


def etf_face_radius(counts: Sequence[int], tau: float, E: float, t: float) -> dict | None:
    """Bound on sqrt(sum_{c != c'} (m_cc' - m0_cc')^2) (class-mean Gram, off the diagonal) for every
    feasible G with D_F(G, G0) <= E and tr(QG) <= t, G0 the balanced collapsed ETF (docs/scl.md,
    "Growth on the ETF face (k >= 4)"). None when no rho gives a finite bound.

    Per class row c (beta_c = m_c. - m0_c. off the diagonal, alpha_c = a_c - 1): n D_c summed over c is
    <= E, and along the segment D_c >= (curvature / 2) min(1, rho / ||beta_c||_inf) (convexity beyond
    the rho-ball). Two ways to use the curvature of :func:`etf_face_growth`, the better one is kept:
    (A) ``mu`` on Y_c^2 = ||beta_c - alpha_c 1||^2; (B) ``mu_centred`` on U_c^2 = ||centred beta_c||^2 and
    the row means from the dual margin: sum_c beta_cc' = (m 1)_c + (1 - m_cc) with ||m 1|| <= k sqrt(t/n)
    (1/sqrt(N) in range Q: 1^T m 1 <= k t / n, m PSD with tr m <= k) and sum_c (1 - m_cc) <= t / n."""
    k, n = len(counts), float(counts[0])
    if E <= 0 and t <= 0:  # exact dual point (E = 0): D_F(G, G0) = 0 and G on the face; the curvature on the
        # face is > 0 for every tau (pi > 0), so G = G0; report the constant at the smallest rho (log: no underflow)
        g = etf_face_growth(counts, tau, GROWTH_RHOS[0] * float(tau))
        return {"offdiag_radius": 0.0, "growth_mu": g["mu_centred"], "growth_rho": g["rho"],
                "growth_kind": "exact (E = 0)", "growth_log_mu": g["log_pi"] - 2.0 * math.log(float(tau))}
    # 1 - a_c = n (1 - m_cc) / (n - 1) and sum_c n (1 - m_cc) <= t: sum_c |alpha_c| <= t / (n - 1)
    alpha_hat = min(t / (n - 1.0), 2.0)
    # (B): W_c = sqrt(k-1) |mean(beta_c) - alpha_c| = |sum beta_c - (k-1) alpha_c| / sqrt(k-1); over c,
    # sqrt(sum W_c^2) <= (||m 1|| + sqrt(k) t / n + (k-1) sum |alpha_c|) / sqrt(k-1)
    w_tot = (k * math.sqrt(t / n) + math.sqrt(k) * t / n + (k - 1) * alpha_hat) / math.sqrt(k - 1.0)
    best = None
    for r in GROWTH_RHOS:
        rho = r * float(tau)
        g = etf_face_growth(counts, tau, rho, alpha_hat)
        cands = []
        if g["mu"] > 0:  # (A): ||beta_c||_inf <= Y_c + |alpha_c|
            cands.append(("full", _growth_solve(2.0 * E / (n * g["mu"]), alpha_hat, rho), g["mu"]))
        if g["mu_centred"] > 0:  # (B): ||beta_c||_inf <= ||beta_c - alpha_c 1|| + |alpha_c| <= U_c + W_c + alpha_hat
            u2 = _growth_solve(2.0 * E / (n * g["mu_centred"]), w_tot + alpha_hat, rho)
            cands.append(("centred", u2 + w_tot ** 2, g["mu_centred"]))
        for kind, y2, mu in cands:
            # beta_c = (beta_c - alpha_c 1) + alpha_c 1: sqrt(sum_c ||beta_c||^2) <= sqrt(sum Y_c^2) + sqrt(k-1) sum |alpha_c|
            x_tot = math.sqrt(y2) + math.sqrt(k - 1.0) * alpha_hat
            if math.isfinite(x_tot) and (best is None or x_tot < best["offdiag_radius"]):
                best = {"offdiag_radius": x_tot, "growth_mu": mu, "growth_rho": rho, "growth_kind": kind}
    return best


@dataclass
class GramCertificate:
    """What a dual point built at a Gram G0 proves.

    Always: ``lower_bound`` <= the loss of every feasible Gram (G PSD, diag G = 1, and G >= 0 for
    UFM+), hence <= the loss at every feature dimension d; None when not finite.

    With a ``face`` ("orthogonal-frame" or "simplex-etf", G0 the collapsed configuration): constants
    (sigma, eta, the between-class multipliers) such that every feasible G with loss <= F(G0) + eps
    satisfies sigma tr(QG) + <N, G> <= E(eps) (Q: projector onto the complement of range G0), from
    which :meth:`bounds` derives the distance of G to G0. ``face_reason`` says why there is none.
    """

    lower_bound: float | None
    center_value: float
    complementarity: float  # <C, G0> - sum(mu): 0 for an exactly complementary dual point
    psd_shift: float  # how far mu was lowered to make S PSD (costs N * shift: tr G = N)
    allowance: float  # stated round-off allowance subtracted from the bound
    method: str
    N: int
    counts: tuple = ()
    face: str | None = None
    sigma: float | None = None
    eta: float | None = None
    nu_blocks: np.ndarray | None = None  # UFM+: largest multiplier N_ij in each class block (c, c')
    face_reason: str = ""
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.lower_bound is not None and math.isfinite(self.lower_bound)

    def excess(self, eps: float = 0.0) -> float:
        """E(eps) = eps + complementarity + eta N + allowance (eps: loss above F(G0), exact)."""
        return float(max(eps, 0.0) + max(self.complementarity, 0.0) + (self.eta or 0.0) * self.N + self.allowance)

    def bounds(self, eps: float = 0.0) -> dict | None:
        """Proven bounds for every feasible Gram G with loss <= F(G0) + eps (eps = 0: every minimiser,
        since G0 is feasible): ``t`` >= tr(QG); ``collapse`` >= max_i ||h_i - mu_{y_i}||; ``gram_radius``
        >= ||G - G0||_F; ``class_gram_radius`` >= ||M - M0||_F for the Gram M of the class means.
        None without a face certificate. Derivation: docs/scl.md, "Geometry certificate"."""
        exact = bool(self.details.get("exact_dual"))
        if self.face is None or not (exact or (self.sigma and self.sigma > 0)):
            return None
        n = np.asarray(self.counts, dtype=float)
        k = n.size
        E = self.excess(eps)
        if exact and E <= 0:  # closed-form dual point: tr(QG) = 0 exactly (sigma > 0 analytically)
            t = 0.0
        elif self.sigma and self.sigma > 0:
            t = E / self.sigma
        else:
            return None
        if not math.isfinite(t):
            return None
        sq = math.sqrt(t)
        within = t  # sum_c n_c (1 - m_cc) <= tr(Q1 G) <= t
        if self.face == "orthogonal-frame":
            nu = self.nu_blocks
            if nu is None:
                return None
            offd = ~np.eye(k, dtype=bool)
            if not np.all(nu[offd] > 0):
                return None
            with np.errstate(divide="ignore", over="ignore"):
                off = np.where(offd, np.minimum(1.0, E / (2.0 * np.where(offd, nu, 1.0)) + 2.0 * sq), 0.0)
        elif self.face == "simplex-etf":
            if len(set(self.counts)) != 1 or n[0] < 2:
                return None
            nc = float(n[0])
            linv = {2: 1.0, 3: 1.5}.get(k)
            if linv is not None:  # k <= 3: the face is the single point G0; row sums decide the rest
                dev = linv * (t / nc + k * math.sqrt(t / nc))
                off = np.full((k, k), min(2.0, dev))
                np.fill_diagonal(off, 0.0)
            else:  # k >= 4: growth of the loss along the face (docs/scl.md, "Growth on the ETF face")
                g = etf_face_radius(self.counts, self.details.get("tau", 0.0), E, t)
                if g is None:
                    return None
                # off_sq: sum_{c != c'} (m_cc' - m0_cc')^2 <= offdiag_radius^2; each entry of m lies in
                # [-1, 1], so also <= k (k - 1) (1 + 1/(k-1))^2
                off_sq = min(g["offdiag_radius"] ** 2, k * (k - 1) * (1.0 + 1.0 / (k - 1)) ** 2)
                block = math.sqrt(within ** 2 + nc * nc * off_sq)
                gram_radius = t + 2.0 * math.sqrt(self.N * t) + block
                class_gram_radius = min(gram_radius / nc, math.sqrt((within / nc) ** 2 + off_sq))
                return {"excess": E, "t": t, "collapse": sq, "gram_radius": gram_radius,
                        "class_gram_radius": class_gram_radius,
                        "max_between_block_mean_deviation": min(math.sqrt(off_sq), 1.0 + 1.0 / (k - 1)),
                        "growth_mu": g["growth_mu"], "growth_rho": g["growth_rho"], "growth_kind": g["growth_kind"],
                        "offdiag_class_gram_radius": math.sqrt(off_sq)}
        elif self.face == "collapsed":  # docs/scl.md, "Imbalanced UFM: a radius around the solver's candidate"
            A0 = np.asarray(self.details["A0"], dtype=float)
            dev0 = float(self.details["dev0"])
            t_w = t + self.N * float(self.details["projector_defect"])  # >= sum_c n_c (1 - m_cc)
            g = collapsed_growth_radius(self.counts, self.details["tau"], A0, E, t_w, dev0)
            if g is None:
                return None
            R = g["R"]
            diag_dev = t_w / float(n.min()) + k * dev0  # sum_c |m_cc - A0_cc|
            class_gram_radius = math.sqrt(diag_dev ** 2 + 2.0 * R * R)
            gram_radius = t_w + 2.0 * math.sqrt(self.N * t_w) + float(n.max()) * class_gram_radius
            dl = t_w / float(n.min())  # 1 - m_cc <= dl
            cos_radius = (R / (1.0 - dl) + (1.0 + dev0) * (dl / (1.0 - dl) + 2.0 * dev0)) if dl < 0.5 else math.inf
            return {"excess": E, "t": t_w, "collapse": math.sqrt(t_w), "gram_radius": gram_radius,
                    "class_gram_radius": class_gram_radius, "offdiag_class_gram_radius": math.sqrt(2.0) * R,
                    "max_between_block_mean_deviation": R, "cosine_radius": cos_radius,
                    "growth_curvature": g["curvature"], "growth_rho": g["growth_rho"], "growth_gamma": g["gamma"]}
        else:
            return None
        # ||P1 G P1 - G0||_F^2 = sum_c n_c^2 (1 - m_cc)^2 + sum_{c != c'} n_c n_c' (m_cc' - m0_cc')^2
        block = math.sqrt(within ** 2 + float(np.sum(np.outer(n, n) * off ** 2)))
        gram_radius = t + 2.0 * math.sqrt(self.N * t) + block
        class_gram_radius = min(gram_radius / float(n.min()),
                                math.sqrt((within / float(n.min())) ** 2 + float(np.sum(off ** 2))))
        return {"excess": E, "t": t, "collapse": sq, "gram_radius": gram_radius,
                "class_gram_radius": class_gram_radius, "max_between_block_mean_deviation": float(off.max(initial=0.0))}

    def to_dict(self) -> dict:
        b = self.bounds(0.0)
        return {"lower_bound": self.lower_bound, "center_value": self.center_value,
                "complementarity": self.complementarity, "psd_shift": self.psd_shift, "allowance": self.allowance,
                "method": self.method, "face": self.face, "sigma": self.sigma, "eta": self.eta,
                "face_reason": self.face_reason or None, "minimiser_bounds": b, **self.details}


def face_projector(counts: Sequence[int], face: str) -> np.ndarray:
    """Projector P onto the range of the collapsed OF Gram (block averaging) or, for a balanced
    collapsed ETF, onto the block averages orthogonal to the all-ones vector."""
    y = np.repeat(np.arange(len(counts)), counts)
    n = np.asarray(counts, dtype=float)
    P = (y[:, None] == y[None, :]) / n[y][:, None]
    if face == "simplex-etf":
        P = P - 1.0 / y.size
    return P


def gram_certificate(G0: np.ndarray, labels, batches, tau: float, *, nonneg: bool, face: str | None = None,
                     counts: Sequence[int] | None = None, method: str = "", projector: np.ndarray | None = None,
                     rank: int | None = None) -> GramCertificate:
    """A dual point of the convex Gram relaxation built at the symmetric matrix G0, repaired to exact
    feasibility, and the lower bound it proves (docs/scl.md, "Proven lower bounds").

    F is convex, so F(G) >= F(G0) + <C, G - G0> with C = grad F(G0). For N >= 0 (zero diagonal, only
    for UFM+: G >= 0 there) and mu with S = C - N - Diag(mu) PSD, every feasible G (PSD, diag G = 1)
    has <C, G> = <S, G> + <N, G> + sum_i mu_i >= sum_i mu_i. N and mu come from complementary
    slackness at G0 (N: the positive part of C on the entries where G0 is 0; mu: least squares from
    S G0 = 0); then mu is lowered by the smallest eigenvalue of S plus its rounding bound, so S is
    PSD in exact arithmetic (the cost is N times the shift, since tr G = N). The bound
    F(G0) - <C, G0> + sum mu is then lowered by a stated round-off allowance (loss evaluation, the
    sums, and the gradient's rounding times the diameter 2N of the feasible set). Valid for every
    G0; tight when G0 is optimal.

    ``face``: also build the geometry certificate at G0 (which must then be the exactly feasible
    collapsed configuration of that kind): see :class:`GramCertificate`. ``face="collapsed"``: a collapsed
    candidate of rank ``rank`` with the float ``projector`` onto its range (:func:`collapsed_certificate`,
    which also accounts for the candidate's feasibility defect).
    """
    y = as_labels("labels", labels)
    tau = validate_tau(tau)
    cb = _as_compiled(y, batches)
    N = y.size
    G0 = as_finite_array("G0", G0, ndim=2, shape=(N, N))
    G0 = 0.5 * (G0 + G0.T)
    active = None
    if nonneg:
        active = G0 <= ACTIVE_ENTRY
        np.fill_diagonal(active, False)
        G0 = np.where(active, 0.0, G0)
    gmax = max(1.0, float(np.abs(G0).max()))
    F0, C = _loss_gram(G0, cb, tau, True)
    Nn = np.zeros((N, N))
    if nonneg:
        Nn = np.where(active, np.maximum(C, 0.0), 0.0)
    A = C - Nn
    rows = np.einsum("ij,ij->i", A @ G0, G0)
    norms = np.einsum("ij,ij->i", G0, G0)
    mu = np.where(norms > 0, rows / np.where(norms > 0, norms, 1.0), np.diag(A))
    S = A - np.diag(mu)
    S = 0.5 * (S + S.T)
    ev = np.linalg.eigvalsh(S)
    norm2 = float(np.abs(ev).max(initial=0.0))
    err = _eig_error(N, norm2) + EPS * float(np.abs(np.diag(A)).max(initial=0.0) + np.abs(mu).max(initial=0.0))
    shift = max(0.0, -float(ev[0])) + err
    mu_lb = mu - shift
    CG = C * G0
    CG0 = float(CG.sum())
    cnorm = float(np.linalg.norm(C))
    n_entries = float(N) * N
    grad_err = ROUND_SAFETY * EPS * (math.log2(N + 1) + 4.0) * cnorm * (2.0 * N * gmax)
    allowance = (loss_rounding(cb, tau, gmax) + grad_err
                 + ROUND_SAFETY * EPS * (math.log2(n_entries + 1) + 2.0) * (float(np.abs(CG).sum()) + float(np.abs(mu_lb).sum())))
    lb = F0 - CG0 + float(mu_lb.sum()) - allowance
    cert = GramCertificate(lb if math.isfinite(lb) else None, float(F0), CG0 - float(mu.sum()), shift, allowance,
                           method or "linearisation dual at a candidate Gram", N, tuple(counts or ()),
                           details={"smallest_eigenvalue_of_S": float(ev[0]), "eigenvalue_error_bound": err})
    if face is None:
        return cert
    cert.face = face
    if counts is None:
        raise InstanceError("counts are needed for a face certificate")
    counts = tuple(int(c) for c in counts)
    if face == "collapsed":
        if projector is None or rank is None:
            raise InstanceError("a collapsed-candidate face needs its projector and rank")
        P, r = np.asarray(projector, dtype=float), int(rank)
    else:
        P = face_projector(counts, face)
        r = len(counts) if face == "orthogonal-frame" else len(counts) - 1
    gap_ev = float(ev[r]) if r < N else 0.0
    if not gap_ev > 1e3 * err:
        cert.face = None
        cert.face_reason = (f"not strictly complementary: eigenvalue {r + 1} of the dual slack S is {gap_ev:.3g} "
                            f"(rounding bound {err:.3g}); the optimal face may hold other Grams")
        return cert
    sigma = 0.5 * gap_ev
    T2 = S - sigma * (np.eye(N) - P)
    T2 = 0.5 * (T2 + T2.T)
    ev2 = np.linalg.eigvalsh(T2)
    eta = max(0.0, -float(ev2[0])) + _eig_error(N, float(np.abs(ev2).max(initial=0.0))) + EPS * N * sigma
    cert.sigma, cert.eta = sigma, eta
    if face == "orthogonal-frame":
        if not nonneg:
            cert.face, cert.face_reason = None, "the orthogonal-frame face needs the nonnegativity multipliers (UFM+)"
            return cert
        k = len(counts)
        nu = np.zeros((k, k))
        for c in range(k):
            for c2 in range(k):
                if c != c2:
                    blk = Nn[np.ix_(y == c, y == c2)]
                    nu[c, c2] = float(blk.max(initial=0.0))
        cert.nu_blocks = nu
        if not np.all(nu[~np.eye(k, dtype=bool)] > 0):
            bad = [(int(a), int(b)) for a, b in zip(*np.nonzero((nu <= 0) & ~np.eye(k, dtype=bool))) if a < b]
            cert.face = None
            cert.face_reason = (f"no positive nonnegativity multiplier between classes {bad[:3]} (the loss does not "
                                "push them apart at first order: e.g. two singleton classes, or exp(-1/tau) underflows)")
    elif face == "simplex-etf":
        if len(set(counts)) != 1 or counts[0] < 2:
            cert.face = None
            cert.face_reason = ("the ETF face certificate needs balanced classes with n >= 2 (imbalanced UFM has no "
                                "closed-form minimiser)")
        elif len(counts) >= 4:
            cert.details["tau"] = float(tau)  # the growth bound on the face (k >= 4) needs tau
            if not etf_face_growth(counts, tau, GROWTH_RHOS[-1] * tau)["mu"] > 0:
                cert.face = None
                cert.face_reason = ("the growth constant of the loss on the ETF face {A PSD, diag A = 1, A 1 = 0} "
                                    f"underflows at tau = {tau:g} (weights ~ e^{{-k/((k-1) tau)}})")
    return cert


# --------------------------------------------------------------------------------------
# Closed-form dual point at the balanced collapsed ETF (docs/scl.md, "Closed-form dual point at the ETF")
# --------------------------------------------------------------------------------------

def _etf_closed_form_scalars(counts: Sequence[int], tau: float) -> dict:
    """Logs of the closed-form dual quantities at the balanced collapsed simplex ETF (every tau:
    no overflow, no underflow of the logs). L = k/((k-1) tau) is the logit gap (1 - b0)/tau, b0 = -1/(k-1);
    p_neg = 1/((n-1) e^L + N - n) the softmax weight of one negative, so
    log p_neg = -L - log1p(n - 2 + (N - n) e^{-L})."""
    counts = tuple(int(c) for c in counts)
    k, n = len(counts), counts[0]
    N = n * k
    L = k / ((k - 1.0) * tau)
    q = (N - n) * math.exp(-L)  # underflows to 0 harmlessly (inside log1p)
    log1 = math.log1p((n - 2.0) + q)  # log((n - 1) + (N - n) e^{-L}) = LSE - 1/tau of one anchor
    log_pneg = -L - log1
    return {"k": k, "n": n, "N": N, "L": L, "log_p_neg": log_pneg, "anchor_value": log1,
            "log_sigma": math.log(N) + log_pneg - math.log(tau)}


def etf_closed_form_certificate(counts: Sequence[int], tau: float) -> GramCertificate:
    """The dual point of the Gram relaxation at the balanced collapsed simplex ETF G0, in closed form
    (docs/scl.md, "Closed-form dual point at the ETF"). By class symmetry the gradient of the loss at G0 is
    C = c_w (within-class pairs) + c_b (between-class pairs), 0 on the diagonal, with
    c_b = p_neg / tau, c_w = -(N - n) p_neg / ((n - 1) tau); mu = (c_w - c_b) n - c_w = -N p_neg / tau and
    S = C - Diag(mu) has the exact eigenvalues 0 on range G0 = {U v : v orthogonal to 1}, N p_neg / tau on
    the all-ones vector and n (N - 1) p_neg / ((n - 1) tau) on the within-class zero-sum vectors. So S is PSD,
    S G0 = 0 and <C, G0> = sum mu exactly (complementarity 0, no PSD shift), and S - sigma Q >= 0 with
    sigma = N p_neg / tau (Q = I - P): eta = 0. Nothing of the proof is a float computation; float64 only
    evaluates the magnitudes sigma (from its log, times 1 - 1e-12) for radii at eps > 0. For every feasible G,
    F(G) - F(G0) = D_F(G, G0) + <S, G> exactly, so E(eps) = eps (``allowance`` = 0); every minimiser has
    eps <= 0 (G0 is feasible), hence tr(QG) = 0 and D_F(G, G0) = 0: G = G0 (the face growth constant is
    > 0 for every tau). ``lower_bound`` = F(G0) minus its own evaluation rounding."""
    counts = tuple(int(c) for c in counts)
    tau = validate_tau(tau)
    if len(counts) < 2 or len(set(counts)) != 1 or counts[0] < 2:
        raise InstanceError("the closed-form ETF dual point needs k >= 2 balanced classes with n >= 2 samples")
    s = _etf_closed_form_scalars(counts, tau)
    N = s["N"]
    F0 = N * s["anchor_value"]
    lb = F0 - ROUND_SAFETY * EPS * (abs(F0) + N * 4.0)  # log1p, one exp, one product (a few ulps each)
    sigma = math.exp(s["log_sigma"]) * (1.0 - 1e-12) if s["log_sigma"] > -700.0 else 0.0
    details = {"tau": float(tau), "exact_dual": True, "log_sigma": s["log_sigma"], "log_p_neg": s["log_p_neg"],
               "S_eigenvalues": "0 on range G0 (k-1), N p_neg/tau on 1, n (N-1) p_neg/((n-1) tau) within classes",
               "smallest_eigenvalue_of_S": 0.0}
    return GramCertificate(lb, F0, 0.0, 0.0, 0.0, "closed-form dual point at the collapsed simplex ETF (exact "
                           "complementarity, S's spectrum analytic)", N, counts, face="simplex-etf", sigma=sigma,
                           eta=0.0, details=details)


def of_closed_form_certificate(counts: Sequence[int], tau: float, F0: float | None = None,
                               F0_rounding: float | None = None) -> GramCertificate:
    """The dual point of the UFM+ Gram relaxation (full batch) at the collapsed orthogonal frame G0 = U U^T, in
    closed form (docs/scl.md, "Closed-form dual point at the OF"): O(k), no N x N matrix.

    At G0 an anchor of class c (n_c >= 2) gives each negative the softmax weight p_c = e^{-1/tau} / ((n_c - 1) +
    (N - n_c) e^{-1/tau}) and each positive e^{1/tau} p_c, so the gradient of the loss in the symmetric matrices is
    C = c_cc' on the pairs of classes (c, c') (0 on the diagonal) with c_cc = -(N - n_c) p_c / ((n_c - 1) tau) < 0
    and c_cc' = ([n_c >= 2] p_c + [n_c' >= 2] p_c') / (2 tau) >= 0. Multipliers: N = C on the between-class entries
    (where G0 = 0), mu_i = (n_c - 1) c_cc. Then S = C - N - Diag(mu) is block diagonal with eigenvalue 0 on the
    class indicators and n_c (N - n_c) p_c / ((n_c - 1) tau) > 0 on the within-class zero-sum vectors: S is PSD,
    S G0 = 0, <C, G0> = sum mu (complementarity 0, no shift), S - sigma Q >= 0 with sigma the smallest of those
    eigenvalues (eta = 0), and nu_cc' > 0 unless both classes are singletons. Every minimiser G has
    0 >= F(G) - F(G0) >= <S, G> + <N, G> >= 0, so range G lies in the class indicators and G_ij = 0 between
    classes: G = G0 (unique) when at most one class is a singleton. Nothing of the proof is a float computation;
    ``lower_bound`` is F(G0) (``F0``: the loss evaluated at the OF by the caller, else the closed form) minus its
    evaluation rounding (``F0_rounding``, e.g. :func:`loss_rounding`, when larger than the few-ulps default)."""
    counts = tuple(int(c) for c in counts)
    tau = validate_tau(tau)
    n = np.asarray(counts, dtype=float)
    k, N = n.size, float(n.sum())
    if k < 2:
        raise InstanceError("the closed-form OF dual point needs k >= 2 classes")
    multi = n >= 2
    e = math.exp(-1.0 / tau)
    logp = np.where(multi, -1.0 / tau - np.log(np.maximum(n - 1.0, 1.0) + (N - n) * e), -np.inf)
    p = np.exp(logp)
    if F0 is None:
        F0 = float(sum(nc * math.log((nc - 1) + (N - nc) * e) for nc in counts if nc >= 2))
    rnd = ROUND_SAFETY * EPS * (abs(F0) + N * (1.0 / tau + math.log(N) + 4.0))
    lb = float(F0) - max(rnd, float(F0_rounding or 0.0))
    nu = (p[:, None] + p[None, :]) / (2.0 * tau)
    np.fill_diagonal(nu, 0.0)
    analytic_pos = (multi[:, None] | multi[None, :]) & ~np.eye(k, dtype=bool)
    # analytically > 0 (the proof needs only the sign); float underflow at tiny tau is replaced by the tiniest double
    nu = np.where(analytic_pos & (nu <= 0), np.finfo(float).tiny, nu)
    lam = np.where(multi, n * (N - n) * p / (np.maximum(n - 1.0, 1.0) * tau), np.inf)
    sigma = float(lam.min()) * (1.0 - 1e-12) if np.any(multi) else 0.0
    details = {"tau": float(tau), "exact_dual": True, "class_level": True,
               "log_p_neg_min": float(np.max(logp[multi])) if np.any(multi) else None,
               "S_eigenvalues": "0 on the class indicators (k), n_c (N - n_c) p_c / ((n_c - 1) tau) within classes",
               "smallest_eigenvalue_of_S": 0.0}
    cert = GramCertificate(lb, float(F0), 0.0, 0.0, 0.0, "closed-form dual point at the collapsed orthogonal frame "
                           "(exact complementarity, S's spectrum analytic)", int(N), counts, face="orthogonal-frame",
                           sigma=sigma, eta=0.0, nu_blocks=nu, details=details)
    pairs = ~analytic_pos & ~np.eye(k, dtype=bool)
    if np.any(pairs):
        a, b = [int(x) for x in np.argwhere(pairs)[0]]
        cert.face = None
        cert.face_reason = (f"classes {a} and {b} are both singletons: no multiplier keeps them apart (they may share "
                            "a direction)")
    return cert


def low_rank_gap(counts: Sequence[int], tau: float, d: int) -> dict | None:
    """A proven strict gap of the full-batch UFM+ below the required dimension (docs/scl.md, "Strict gap below
    d = k"). Let R be the classes with n_c >= 2 plus one singleton class if there is one (|R| is the dimension count
    of theory.scl.required_dim_for_bound), and d < |R|. With the closed-form dual point at the OF (exact
    complementarity: F(G) - F(G0) >= <S, G> + <N, G> for every feasible G), S >= sigma Q and N >= nu_min between
    the classes of R give, for t = tr(QG) = sum_c n_c (1 - ||mu_c||^2) and the class means mu_c (rank <= d < |R|):
    the |R| means of R have nonnegative inner products and norms^2 >= r^2 = 1 - t/n_min (n_min over the classes
    with n_c >= 2; a singleton's mean is a unit vector); if all their pairwise inner products were < r^2/(|R|-1)
    their Gram would be positive definite (Gershgorin), of rank |R| > d; so some pair has mu_c.mu_c' >= r^2/(|R|-1)
    and F(G) - F(G0) >= sigma t + 2 nu_min m^2 (1 - t/n_min)/(|R|-1) >= delta = min(sigma n_min,
    2 nu_min m^2/(|R|-1)) (m the smallest count in R; linear in t on [0, n_min]). None when the hypothesis fails or
    delta underflows."""
    counts = tuple(int(c) for c in counts)
    n = np.asarray(counts, dtype=float)
    multi = n >= 2
    R = [int(c) for c in np.flatnonzero(multi)] + [int(c) for c in np.flatnonzero(~multi)][:1]
    kk = len(R)
    if not np.any(multi) or kk < 2 or d >= kk:
        return None
    cert = of_closed_form_certificate(counts, tau)
    sub = cert.nu_blocks[np.ix_(R, R)]
    nu_min = float(sub[~np.eye(kk, dtype=bool)].min()) * (1.0 - 1e-12)
    sigma = float(cert.sigma)
    nmin = float(n[multi].min())
    m = float(n[R].min())
    delta = min(sigma * nmin, 2.0 * nu_min * m * m / (kk - 1))
    if not delta > 0 or not math.isfinite(delta):
        return None
    return {"delta": delta, "sigma": sigma, "nu_min": nu_min, "n_min": nmin, "classes": R, "required_dim": kk,
            "d": int(d), "how": "closed-form OF dual point + Gershgorin on the class-mean Gram of rank <= d (docs/scl.md)"}


def etf_closed_form_dual_matrices(counts: Sequence[int], tau: float) -> dict:
    """The dense C, mu, S of :func:`etf_closed_form_certificate` (for tests against the loss's own gradient;
    small N only, and tau where p_neg does not underflow)."""
    counts = tuple(int(c) for c in counts)
    s = _etf_closed_form_scalars(counts, validate_tau(tau))
    k, n, N = s["k"], s["n"], s["N"]
    pneg = math.exp(s["log_p_neg"])
    cb = pneg / tau
    cw = -(N - n) * pneg / ((n - 1.0) * tau)
    y = np.repeat(np.arange(k), n)
    same = y[:, None] == y[None, :]
    C = np.where(same, cw, cb)
    np.fill_diagonal(C, 0.0)
    mu = np.full(N, (cw - cb) * n - cw)
    return {"C": C, "mu": mu, "S": C - np.diag(mu), "c_w": cw, "c_b": cb, "sigma": N * pneg / tau,
            "within_eigenvalue": n * (N - 1.0) * pneg / ((n - 1.0) * tau)}


# --------------------------------------------------------------------------------------
# Imbalanced full-batch UFM: a collapsed candidate, its dual certificate and a growth radius
# (docs/scl.md, "Imbalanced UFM: a radius around the solver's candidate")
# --------------------------------------------------------------------------------------

#: Rank cut for the candidate's class-mean Gram: eigenvalues below this fraction of the largest are
#: taken as 0 (measured at the solver's points: 1e-16 for the zero one, >= 0.5 for the others).
CANDIDATE_RANK_RTOL = 1e-6
#: Newton polishing steps of the collapsed candidate (the finite-difference Hessian is accurate to
#: ~1e-7, so each step multiplies the gradient by ~1e-7; measured: gradient 1e-15 after 2 steps).
CANDIDATE_NEWTON_STEPS = 3
#: The growth radius is computed for the weights lowered on a ball of radius rho (in units of tau) and
#: the alpha weight gamma (in units of the second-smallest curvature); every choice is valid, the
#: smallest radius is kept.
CANDIDATE_RHOS = (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0)
CANDIDATE_GAMMAS = (0.1, 1.0, 10.0)


def collapsed_loss(W: np.ndarray, counts: Sequence[int], tau: float, want_grad: bool = True):
    """Full-batch loss of the collapsed configuration with class directions the columns of W (r x k, unit
    columns: h_i = w_{y_i}), and its gradient with respect to W (not projected). Per anchor of class c
    (n_c >= 2): LSE(x_c) - A_cc/tau, x_c = (A_cc/tau + log(n_c - 1), A_cc'/tau + log n_c' for c' != c),
    A = W^T W (equal to :func:`scl_loss` of W[:, y]; tested)."""
    n = np.asarray(counts, dtype=float)
    k = n.size
    A = W.T @ W
    multi = n >= 2
    X = A / tau + np.log(n)[None, :]
    np.fill_diagonal(X, np.diag(A) / tau + np.log(np.where(multi, n - 1.0, 1.0)))
    Xm = X[multi]
    xmax = Xm.max(axis=1, keepdims=True)
    P = np.exp(Xm - xmax)
    ssum = P.sum(axis=1, keepdims=True)
    lse = (np.log(ssum) + xmax)[:, 0]
    f = float(n[multi] @ (lse - np.diag(A)[multi] / tau))
    if not want_grad:
        return f, None
    P /= ssum
    g = np.zeros((k, k))
    g[multi] = n[multi, None] * P / tau
    g[np.flatnonzero(multi), np.flatnonzero(multi)] -= n[multi] / tau
    return f, W @ (g + g.T)


def _collapsed_value_grad(v, r, k, counts, tau):
    V = v.reshape(r, k)
    nr = np.linalg.norm(V, axis=0)
    W = V / nr
    f, gW = collapsed_loss(W, counts, tau)
    gV = (gW - W * np.sum(W * gW, axis=0)) / nr
    return f, gV.ravel()


def polish_collapsed_candidate(counts: Sequence[int], tau: float, A_init: np.ndarray) -> dict:
    """A collapsed candidate for the full-batch UFM minimiser, polished to float64 precision: the class
    directions W (r x k, unit columns, r = numerical rank of the initial class-mean Gram A_init, e.g. the
    solver's) minimise :func:`collapsed_loss` (L-BFGS, then Newton steps with a finite-difference Hessian
    on the sphere product, pseudo-inverse for the rotation invariance). Only a candidate: what it proves
    comes from :func:`collapsed_certificate`."""
    from scipy.optimize import minimize

    counts = tuple(int(c) for c in counts)
    tau = validate_tau(tau)
    k = len(counts)
    A_init = as_finite_array("A_init", A_init, ndim=2, shape=(k, k))
    w, V = np.linalg.eigh(0.5 * (A_init + A_init.T))
    keep = w > CANDIDATE_RANK_RTOL * max(float(w[-1]), 1e-300)
    keep[-1] = True  # at least one direction
    r = int(keep.sum())
    W = (V[:, keep] * np.sqrt(np.clip(w[keep], 0.0, None))).T
    nr = np.linalg.norm(W, axis=0)
    if not np.all(nr > 1e-8):  # a class mean (near) zero: start from random directions of the same rank
        W = np.random.default_rng(0).standard_normal((r, k))
        nr = np.linalg.norm(W, axis=0)
    W = W / nr
    fun = lambda v: _collapsed_value_grad(v, r, k, counts, tau)  # noqa: E731
    res = minimize(fun, W.ravel(), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-14, "ftol": 1e-16, "maxcor": 30})
    v = res.x.reshape(r, k)
    v = (v / np.linalg.norm(v, axis=0)).ravel()
    for _ in range(CANDIDATE_NEWTON_STEPS):
        f0, g0 = fun(v)
        h = 1e-6
        m = v.size
        Hs = np.empty((m, m))
        for j in range(m):
            e = np.zeros(m)
            e[j] = h
            Hs[:, j] = (fun(v + e)[1] - fun(v - e)[1]) / (2.0 * h)
        Hs = 0.5 * (Hs + Hs.T)
        step = -np.linalg.lstsq(Hs, g0, rcond=1e-9)[0]
        vn = (v + step).reshape(r, k)
        vn = (vn / np.linalg.norm(vn, axis=0)).ravel()
        if fun(vn)[0] <= f0 + 1e-15 * max(1.0, abs(f0)):
            v = vn
    W = v.reshape(r, k)
    W = W / np.linalg.norm(W, axis=0)
    f, g = fun(W.ravel())
    return {"W": W, "A0": W.T @ W, "rank": r, "value": f, "grad_max": float(np.abs(g).max()),
            "lbfgs_iterations": int(res.nit)}


def collapsed_growth_radius(counts: Sequence[int], tau: float, A0: np.ndarray, E: float, t_w: float,
                            dev0: float = 0.0) -> dict | None:
    """Bound R on ||z|| = ||(alpha, beta)|| for every feasible G with D_F(G, G0) <= E and
    sum_c n_c (1 - m_cc) <= t_w, G0 = the collapsed Gram with class Gram A0 (|A0_cc - 1| <= dev0):
    alpha_c = a_c - A0_cc (within-class average of G, classes with n_c >= 2), beta_cc' = m_cc' - A0_cc'
    (c < c', the class-mean Gram). docs/scl.md, "Imbalanced UFM": averaging over within-class permutations
    does not increase D_F, D_F(Gbar, G0) = sum_c n_c D_LSE(x_c, x0_c), and on the segment, while every
    |s beta| <= rho, the softmax weights are >= w0 e^{-2 rho'/tau} (negatives) and
    >= w0 e^{-(alpha_hat + 2 rho')/tau} (the positive), rho' = rho + dev0, so the LSE Hessian's form (the
    weighted variance, monotone in the weights) is >= z^T K z / tau^2 with K built from those weights.
    K is PSD with the all-equal direction in its kernel; ||alpha|| <= alpha_hat = t_w / min(n_c - 1) + k dev0
    pins it: lam_gamma ||z||^2 <= z^T K z / tau^2 + gamma ||alpha||^2. Beyond rho the bound grows linearly.
    None when no (rho, gamma) gives a positive lam_gamma."""
    counts = tuple(int(c) for c in counts)
    n = np.asarray(counts, dtype=float)
    k = n.size
    multi = np.flatnonzero(n >= 2)
    if multi.size == 0:
        return None
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    pidx = {}
    for p, (i, j) in enumerate(pairs):
        pidx[(i, j)] = pidx[(j, i)] = p
    na = multi.size
    dim = na + len(pairs)
    aidx = {int(c): a for a, c in enumerate(multi)}
    alpha_hat = min(t_w / float(np.min(n[multi] - 1.0)) + k * dev0, 2.0)
    # logits at G0 and their softmax weights, per anchor row
    X = A0 / tau + np.log(n)[None, :]
    np.fill_diagonal(X, np.diag(A0) / tau + np.log(np.where(n >= 2, n - 1.0, 1.0)))
    logw0 = X - np.logaddexp.reduce(X, axis=1, keepdims=True)
    best = None
    for rr in CANDIDATE_RHOS:
        rho = rr * tau
        rho_p = rho + dev0
        K = np.zeros((dim, dim))
        for c in multi:
            lw = logw0[c] - 2.0 * rho_p / tau
            lw[c] = logw0[c, c] - (alpha_hat + 2.0 * rho_p) / tau
            wv = np.exp(lw) * (1.0 - 1e-12)
            Lc = np.diag(wv) - np.outer(wv, wv) / wv.sum()
            T_ = np.zeros((k, dim))  # v_c = T z (in units of 1/tau)
            T_[c, aidx[int(c)]] = 1.0
            for c2 in range(k):
                if c2 != c:
                    T_[c2, na + pidx[(int(c), c2)]] = 1.0
            K += n[c] * (T_.T @ Lc @ T_)
        K /= tau * tau
        K = 0.5 * (K + K.T)
        evK = np.linalg.eigvalsh(K)
        errK = _eig_error(dim, float(np.abs(evK).max())) * 2.0
        lam2 = float(evK[1]) - errK if dim > 1 else 0.0
        if not lam2 > 0:
            continue
        Pa = np.zeros(dim)
        Pa[:na] = 1.0
        for gm in CANDIDATE_GAMMAS:
            gamma = gm * lam2
            ev = np.linalg.eigvalsh(K + np.diag(gamma * Pa))
            lam = float(ev[0]) - errK - _eig_error(dim, float(np.abs(ev).max()))
            if not lam > 0:
                continue
            R1 = math.sqrt((2.0 * E + gamma * alpha_hat ** 2) / lam)
            if R1 <= rho:
                R = R1
            else:  # lam R^2 <= 2 E R / rho + gamma alpha_hat^2 (linear growth beyond the rho-ball)
                b = 2.0 * E / rho
                R = (b + math.sqrt(b * b + 4.0 * lam * gamma * alpha_hat ** 2)) / (2.0 * lam)
            if math.isfinite(R) and (best is None or R < best["R"]):
                best = {"R": R, "curvature": lam, "growth_rho": rho, "gamma": gamma, "alpha_hat": alpha_hat}
    return best


def collapsed_certificate(counts: Sequence[int], tau: float, A_init: np.ndarray) -> GramCertificate:
    """Geometry certificate for full-batch UFM (any counts, n_c >= 2 somewhere) around a collapsed candidate:
    polish the candidate (:func:`polish_collapsed_candidate`), build G0 = A0[y][:, y] (exactly constant on
    class blocks), the projector P onto U range(W^T) = range of G0 up to rounding, and the dual point of
    :func:`gram_certificate` with that face; the candidate's feasibility defect (its columns are unit only to
    rounding) is added to the allowance. ``bounds(eps)`` then gives the collapse, class-mean Gram and Gram
    radii (docs/scl.md, "Imbalanced UFM")."""
    counts = tuple(int(c) for c in counts)
    tau = validate_tau(tau)
    k = len(counts)
    pol = polish_collapsed_candidate(counts, tau, A_init)
    W, A0 = pol["W"], pol["A0"]
    y = np.repeat(np.arange(k), counts)
    N = y.size
    G0 = A0[np.ix_(y, y)]
    n = np.asarray(counts, dtype=float)
    B = np.repeat(W.T, counts, axis=0)  # U W^T (N x r): exact copies of float data
    Qb, _ = np.linalg.qr(B)
    P = Qb @ Qb.T
    cert = gram_certificate(G0, y, None, tau, nonneg=False, face="collapsed", counts=counts,
                            method="dual at the polished collapsed candidate", projector=P, rank=pol["rank"])
    # G0 is feasible only to rounding: the exactly normalised W has a Gram within dist of A0 (entrywise), and
    # F changes by at most 2 (#anchors) / tau per unit of max-entry change
    r = W.shape[0]
    col_dev = float(np.abs(np.sum(W * W, axis=0) - 1.0).max()) + (r + 2) * EPS
    dist = ROUND_SAFETY * (2.0 * col_dev + (r + 2) * EPS)
    anchors = float(n[n >= 2].sum())
    feas = 2.0 * anchors / tau * dist
    cert.allowance += feas
    if cert.lower_bound is not None:
        cert.lower_bound -= feas
    # Q >= I - P1 up to rounding: tr((I - P1) G) <= tr(QG) + N * neg, neg = max(0, -lambda_min(P1 - P))
    P1 = (y[:, None] == y[None, :]) / n[y][:, None]
    D = 0.5 * ((P1 - P) + (P1 - P).T)
    evD = np.linalg.eigvalsh(D)
    neg = max(0.0, -float(evD[0])) + _eig_error(N, float(np.abs(evD).max(initial=1.0)))
    cert.details.update({"tau": float(tau), "A0": A0.tolist(), "W": W.tolist(), "rank": pol["rank"], "candidate_grad_max": pol["grad_max"],
                         "feasibility_allowance": feas, "projector_defect": neg,
                         "dev0": float(np.abs(np.diag(A0) - 1.0).max()) + dist})
    return cert
