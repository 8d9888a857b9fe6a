"""Balanced UFM in ball arithmetic: the class-reduced closed-form certificate (CE, MSE) and the uniqueness
and geometry proof of the balanced closed form (docs/rigorous.md "Per family", "Uniqueness and geometry")."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

from solvers.rigorous.balls import (  # noqa: F401
    ClassSym, NotCertified, PRECISION_BITS, RigorousBound, Unsupported, _Precision, _Timer,
    _float_down, _float_up, _scale_down, certainly_ge, certainly_le, certainly_positive, exact,
    lower_float, max_ball, outward, projected_class_sym, xlogx,
)


# ---------------------------------------------------------------------------------------------------
# UFM (balanced, class-reduced): docs/ufm.md "Convex reformulation and the value certificate"
# ---------------------------------------------------------------------------------------------------

def ufm_closed_form(loss: str, k: int, n: int, lw: float, lh: float, lb: float, *, margin: float,
                    dual_offdiag: float, scale: float | None = None, project: bool = True,
                    dual_diag: float | None = None, prec: int = PRECISION_BITS) -> RigorousBound:
    """Rigorous bracket of the balanced UFM optimum (CE or MSE) at a class-structured candidate.

    Candidate (primal, exact): Z = m J_k Y (class coordinates Zc = m J_k, m = ``margin`` a double),
    bias b = 0 (CE) or 1/k (MSE, exact rational). Its convex objective L(Z + b 1^T) + lam ||Z||_*
    (+ lb/2 ||b||^2) is a feasible value of the factored problem when d >= k - 1 (balanced
    factorization), evaluated in balls with the exact spectrum of J_k (||Z||_* = sqrt(n)(k - 1)|m|).

    Dual point: per class the loss gradient V = a I + b 11^T (CE: P - Y; MSE: U - Y) with b =
    ``dual_offdiag`` (a double, exact) and, when ``project``, a = -k b (exact: rows sum to 0, the
    constraint Lambda 1 = 0 of the free bias). Without ``project``, a = ``dual_diag`` and the row sums
    must be exactly zero when the bias is free (else NotCertified). Lambda = t V E / N (E = I_k kron 1_n^T)
    with ||Lambda||_2 = t sqrt(n) ||V||_2 / N, ||V||_2 = max(|a|, |a + k b|) exactly; t = ``scale``
    if given (then it must be feasible), else the largest double <= lam N / (sqrt(n) ||V||_2) found by
    rounding down (<= 1). Weak duality: f* >= -L*(-Lambda) (- ||Lambda 1||^2 / (2 lb) with a bias
    penalty), evaluated in balls:
      CE: p = e_y + t v must lie in the simplex (checked for every point of the balls);
          value H(p) = -(k - 1) x log x - y log y, x = t b, y = 1 + t (a + b);
      MSE: -(t/k) tr V - t^2 ||V||_F^2 / (2 k).
    """
    if loss not in ("ce", "mse"):
        raise ValueError(f"loss must be 'ce' or 'mse', got {loss!r}")
    tm = _Timer()
    with _Precision(prec) as flint:
        arb = flint.arb
        kk, nn = int(k), int(n)
        N = kk * nn
        lam = (exact(lw) * exact(lh)).sqrt()
        sqn = arb(nn).sqrt()
        # --- 1. the dual point, converted exactly and projected --------------------------------------
        if project:
            V = projected_class_sym(dual_offdiag, kk)
        else:
            if dual_diag is None:
                raise ValueError("dual_diag is needed when project=False")
            V = ClassSym(exact(dual_diag) - exact(dual_offdiag), exact(dual_offdiag), kk)
        rs = V.row_sum
        if lb == 0.0 and not rs.is_zero():
            raise NotCertified(f"the dual point violates Lambda 1 = 0 (row sum {rs}); the bias is free")
        tm.lap("dual point (exact conversion, projection)")
        # --- 2. spectral norm (analytic eigenvalues) and the scaling, rounded down ---------------------
        norm_unit = sqn * V.spectral_norm() / N  # ||V E / N||_2
        if scale is None:
            t = _scale_down(norm_unit, lam)
        else:
            t = float(scale)
            if not certainly_le(arb(t) * norm_unit, lam):
                raise NotCertified(f"||Lambda||_2 = {arb(t) * norm_unit} is not <= lambda = {lam}: the dual point "
                                   "is not feasible")
        tb = arb(t)
        tm.lap("spectral norm bound and scaling")
        # --- 3. the dual value in balls ---------------------------------------------------------------
        if loss == "ce":
            x = tb * V.b  # off-label entries of p
            y_minus_1 = tb * (V.a + V.b)  # label entry minus 1
            y = 1 + y_minus_1
            if not (x.is_zero() or certainly_positive(x)):
                raise NotCertified(f"dual point outside the simplex: off-label entry {x} may be negative")
            if not certainly_ge(y, arb(0)):
                raise NotCertified(f"dual point outside the simplex: label entry {y} may be negative")
            # a column of p sums to 1 + t (a + k b) = 1 + t * row sum: the simplex needs the row sum 0
            if not rs.is_zero():
                raise NotCertified(f"columns of p sum to 1 + t ({rs}) != 1: outside the simplex")
            ylogy = arb(0) if y.is_zero() else (y * y_minus_1.log1p() if certainly_positive(y) else None)
            if ylogy is None:
                raise NotCertified(f"label entry {y} may be 0 or negative")
            lower = -(kk - 1) * xlogx(x) - ylogy
        else:
            lower = -(tb / kk) * V.trace() - tb * tb * V.frobenius_sq() / (2 * kk)
        if lb != 0.0:
            # Lambda 1 = t n (V 1) / N per row (k rows): inf_b lb/2 ||b||^2 + <Lambda 1, b> = -||Lambda 1||^2/(2 lb)
            r = tb * nn * rs / N
            lower = lower - kk * r * r / (2 * exact(lb))
        tm.lap("dual value")
        # --- 4. the primal value at the candidate in balls --------------------------------------------
        m = exact(margin)
        nuc = lam * sqn * (kk - 1) * abs(m)
        if loss == "ce":
            data = ((kk - 1) * (-m).exp()).log1p()  # CE of a column m (e_c - 1/k): log(1 + (k-1) e^{-m})
            upper = data + nuc  # bias 0: no penalty
        else:
            mm1 = m - 1
            data = mm1 * mm1 * (kk - 1) / (2 * kk)  # residual (m - 1) J e_c, bias 1/k exactly
            upper = data + nuc
        tm.lap("primal value")
    if not (lower.is_finite() and upper.is_finite()):
        raise NotCertified("a bound is not finite")
    details = {"dual_scale": t, "dual_offdiag": float(dual_offdiag), "projected": bool(project),
               "candidate_margin": float(margin),
               "spectral_norm_le_lambda": "t ||Lambda||_2 <= lambda holds for every point of the balls",
               "spectral_norm_over_lambda_mid": float((norm_unit * tb / lam).mid()),
               "spectral_norm_how": "analytic eigenvalues of the class-structured a I + b 11^T (a, a + k b)",
               "lambda_ball": outward(lam)}
    return RigorousBound(lower, upper, f"ball-arithmetic kkt-dual, class-structured ({loss.upper()}-UFM)", prec,
                         details, tm.steps)


def ufm_from_instance(loss: str, k: int, n: int, lw: float, lh: float, lb: float = 0.0, *,
                      prec: int = PRECISION_BITS) -> RigorousBound:
    """The float pipeline's closed-form certificate (solvers.ufm.closed_form_certificate) made rigorous:
    the candidate margin from theory.ufm.optimum and the dual point from solvers.ufm.closed_form_direction
    (its off-diagonal double; the diagonal is re-derived by projection)."""
    from theory import ufm as T

    tm = _Timer()
    inst = T.UFMInstance(loss, k, n, max(k - 1, 1), lw, lh, lb)
    pred = T.optimum(inst)
    margin = pred.margin if loss == "ce" else pred.margin / math.sqrt(n)
    # the off-diagonal entry of S.closed_form_direction = -g (I - 11^T/k), computed as numpy does it
    # (the same double; no k x k matrix needed; a test compares it with solvers.ufm)
    g = min(1.0, k * math.sqrt(n * lw * lh))
    off = -g * (0.0 - 1.0 / k)
    tm.lap("float candidate and dual point")
    rb = ufm_closed_form(loss, k, n, lw, lh, lb, margin=margin, dual_offdiag=off, prec=prec)
    rb.steps = {**tm.steps, **rb.steps}
    return rb



# ---------------------------------------------------------------------------------------------------
# Uniqueness and geometry of the balanced closed form (UFM): docs/ufm.md "Uniqueness", docs/rigorous.md
# "Uniqueness and geometry (UFM)"
# ---------------------------------------------------------------------------------------------------

#: Losses of the balanced uniqueness recipe: the softmax family (CE, label smoothing, equal class weights:
#: w (lse(z) - <q, z>) with targets q_y = q_true, q_c = q_other) and MSE (one-hot targets).
BALANCED_SOFTMAX_LOSSES = ("ce", "ls", "weighted-ce", "weighted-ls")


def balanced_targets(K: int, smoothing: float = 0.0, convention: str = "torch") -> tuple[Fraction, Fraction]:
    """(q_true, q_other) as exact rationals of the smoothing double eps: torch q_other = eps/K, others
    eps/(K - 1); q_true = 1 - (K - 1) q_other, so every target column sums to exactly 1 (the loss is then
    invariant under constant shifts of the logits, which the free bias needs)."""
    K = int(K)
    eps = Fraction(float(smoothing))
    if not (0 <= eps < 1):
        raise NotCertified(f"smoothing {smoothing!r} is not in [0, 1)")
    q_other = eps / K if convention == "torch" else eps / (K - 1)
    return 1 - (K - 1) * q_other, q_other


def balanced_phase(K: int, n: int, lw: float, lh: float, *, weight=1.0, kappa=Fraction(1)) -> tuple[str, Fraction]:
    """The phase of the balanced UFM decided in exact rationals. rho0 = w kappa / (K s) (s = sqrt(n lw lh),
    kappa = q_true - q_other; CE and MSE: w = kappa = 1, rho0 = 1/(K s)) is ||grad L(0, b0)||_2 / lam, the
    largest singular value of the dual at Z = 0; rho0^2 = (w kappa)^2 / (K^2 n lw lh) is a rational of the
    doubles. Returns ("collapse" | "threshold" | "zero", rho0^2): rho0 > 1, = 1, < 1."""
    w, kap = Fraction(float(weight)) if not isinstance(weight, Fraction) else weight, Fraction(kappa)
    den = Fraction(int(K) ** 2 * int(n)) * Fraction(float(lw)) * Fraction(float(lh))
    if not den > 0:
        raise NotCertified("lambda_w lambda_h must be > 0")
    r2 = (w * kap) ** 2 / den
    return ("collapse" if r2 > 1 else "threshold" if r2 == 1 else "zero"), r2


def class_sym_strict_complementarity(V: ClassSym, n: int, lam, *, face: str, margin=None) -> dict:
    """The conditions of the uniqueness theorem (docs/ufm.md) for the dual G = -(V E) / (N lam), V = a I + b 11^T
    (balls; E = I_k kron 1_n^T, E E^T = n I), evaluated in balls. Exact spectrum (no matrix is formed): G has
    the singular value sigma_perp = |a| sqrt(n) / (N lam) on 1^perp (multiplicity k - 1; left vectors u in 1^perp,
    right vectors E^T u / sqrt(n)), sigma_one = |a + k b| sqrt(n) / (N lam) on 1_k (right vector 1_N / sqrt(N)),
    and 0 on the N - k directions orthogonal to the class indicators.

    ``face="perp"``: the face is 1^perp (the caller proves sigma_perp = 1 exactly, by an identity or in
    rationals; here its ball must contain 1, else NotCertified). Off the face the largest singular value is
    max(sigma_one, 0), and delta = 1 - that must be certainly > 0 (strict complementarity, condition 2). The
    candidate Z = m J_k E = (m sqrt(n)) U1 V1^T with U1 V1^T = J_k E / sqrt(n) lies in the face with M = m sqrt(n)
    I, PSD iff m >= 0 (``margin`` m: a ball certainly >= 0) and G = sigma_perp U1 V1^T needs -a > 0 when m > 0
    (G aligned with Z: <G, Z> = ||Z||_*). Injectivity (condition 4): U1^T 1_k = 0 and V1^T 1_N = U1^T (E 1_N) /
    sqrt(n) = sqrt(n) U1^T 1_k = 0, exact.
    ``face="empty"``: every singular value certainly < 1 (then Z* = 0 is the unique minimiser); ``margin`` unused.

    Returns the balls (outward float pairs) and raises NotCertified when a condition is not proven."""
    from flint import arb

    k = V.k
    N = k * int(n)
    sqn = arb(int(n)).sqrt()
    s_perp = abs(V.a) * sqn / (N * lam)
    s_one = abs(V.row_sum) * sqn / (N * lam)
    one = arb(1)
    out = {"sigma_perp": outward(s_perp), "sigma_one": outward(s_one)}
    if face == "perp":
        if not s_perp.contains(one):
            raise NotCertified(f"the singular value on the face 1^perp is {s_perp}, not 1: G is not the dual "
                               "certificate of the candidate")
        off = max_ball(s_one, arb(0))
        delta = one - off
        if not certainly_positive(delta):
            raise NotCertified(f"strict complementarity fails: the largest singular value off the face is {off}, "
                               f"not certainly < 1 (delta = {delta})")
        if margin is not None:
            if not certainly_ge(margin, arb(0)):
                raise NotCertified(f"the candidate's margin {margin} may be negative: M = m sqrt(n) I is not PSD")
            if not margin.is_zero() and not certainly_positive(-V.a):
                raise NotCertified(f"G is not aligned with the candidate (diagonal part a = {V.a} is not certainly "
                                   "< 0): <G, Z> != ||Z||_*")
        out.update(face="1^perp (left) x E^T 1^perp / sqrt(n) (right)", face_dimension=k - 1,
                   face_singular_value=outward(s_perp), largest_off_face=outward(off))
    elif face == "empty":
        top = max_ball(s_perp, s_one)
        delta = one - top
        if not certainly_positive(delta):
            raise NotCertified(f"the largest singular value {top} of G is not certainly < 1: the face is not empty")
        out.update(face="empty", face_dimension=0, face_singular_value=None, largest_off_face=outward(top))
    else:
        raise ValueError(f"face must be 'perp' or 'empty', got {face!r}")
    out["delta"] = outward(delta)
    out["delta_lower"] = lower_float(delta)
    return out


def ufm_balanced_uniqueness(loss: str, K: int, n: int, lw: float, lh: float, lb: float = 0.0, d: int | None = None,
                            *, smoothing: float = 0.0, convention: str = "torch", weight: float = 1.0,
                            dual: tuple[float, float] | None = None, prec: int = PRECISION_BITS) -> dict:
    """Ball-arithmetic proof that the balanced closed form is the unique minimiser (docs/ufm.md "Uniqueness";
    docs/rigorous.md "Uniqueness and geometry (UFM)"), and the exact geometry every minimiser then has.

    ``loss``: "ce" (any of the softmax family: label smoothing ``smoothing``/``convention``, equal class weight
    ``weight``) or "mse" (lb must be 0). The phase is decided in exact rationals (:func:`balanced_phase`).
    - collapse (rho0 > 1): candidate Z* = m J_K E with the exact margin m = c* = log((1 - a)(K - 1)/a), a =
      (1 - q_true) + (K - 1) s / w (CE: c* = log(1/s - (K - 1))), b* = 0; MSE m = 1 - K s, b* = 1/K. The dual is
      the loss gradient at Z* in balls (softmax at c*: x = 1/(e^c + K - 1) off the label, label minus 1 =
      -(K - 1) x; MSE: (m - 1) J_K), class-symmetric V = w (P - Q). The singular value on the face equals 1
      exactly by the stationarity identity (x - q_other = s / w, so a = -K s); its ball must contain 1. The
      off-face value |row sum| (exactly 0: softmax and targets sum to 1) must be certainly < 1. m > 0 follows
      from rho0 > 1 (exact), d >= K - 1 is needed for the factored problem.
    - zero (rho0 < 1): Z* = 0, b0 = 0 (softmax; uniform p) or 1/K (MSE), dual V = -w kappa J_K exactly
      (rationals): every singular value rho0 < 1; delta >= (1 - rho0^2)/2 (exact) and the ball 1 - rho0.
    - threshold (rho0 = 1 exactly): Z* = 0 in the face 1^perp (M = 0), delta = 1 off it: Z* = 0 unique.
    ``dual``: (diagonal, off-diagonal) doubles replacing the gradient (tests: a perturbed dual must be
    rejected). Raises NotCertified (a condition fails) or Unsupported (no recipe for the instance).
    Returns {"phase", "proven", "unique": "...", "geometry", "bias", "self_dual", ...balls as float pairs}."""
    tm = _Timer()
    loss = str(loss)
    K, n = int(K), int(n)
    softmax = loss in BALANCED_SOFTMAX_LOSSES
    if not softmax and loss != "mse":
        raise Unsupported(f"no uniqueness recipe for loss {loss!r} (softmax family or mse)")
    if K < 2 or n < 1:
        raise Unsupported("needs K >= 2 classes and n >= 1 samples per class")
    if loss == "mse" and float(lb) != 0.0:
        raise Unsupported("MSE with a bias penalty has no closed form here")
    if softmax:
        q_t, q_o = balanced_targets(K, smoothing, convention)
        w = Fraction(float(weight))
        if not w > 0:
            raise Unsupported("class weight must be > 0")
    else:
        q_t, q_o, w = Fraction(1), Fraction(0), Fraction(1)
    kappa = q_t - q_o
    if kappa < 0:
        raise Unsupported("targets favour the other classes (q_true < q_other): no closed form")
    phase, r2 = balanced_phase(K, n, lw, lh, weight=w, kappa=kappa)
    identities = []
    with _Precision(prec) as flint:
        arb = flint.arb
        N = K * n
        lam = (exact(lw) * exact(lh)).sqrt()
        s = exact(n).sqrt() * lam
        wb, qtb, qob = exact(w), exact(q_t), exact(q_o)
        if phase == "collapse":
            if softmax:
                acf = (1 - qtb) + (K - 1) * s / wb
                margin = ((1 - acf) * (K - 1) / acf).log()
                E = margin.exp()
                x = 1 / (E + (K - 1))
                ym1 = -(K - 1) * x  # label probability minus 1 (the probabilities sum to 1)
                diag, off = wb * (ym1 + (1 - qtb)), wb * (x - qob)
                identities.append("stationarity: x = 1/(e^c* + K - 1) = q_other + s/w exactly, so the diagonal part "
                                  "a = -K s and the face singular value K s sqrt(n)/(N lam) = 1")
            else:
                margin = 1 - K * s
                diag, off = (margin - 1) * (1 - arb(1) / K), -(margin - 1) / K
                identities.append("MSE: m - 1 = -K s, so the face singular value K s sqrt(n)/(N lam) = 1")
            identities.append("rows of V sum to 0 (probabilities and targets sum to 1): the singular value on 1_k "
                              "and the bias gradient vanish exactly")
            face = "perp"
        else:
            margin = arb(0)
            # Z = 0, uniform probabilities 1/K (softmax, bias 0) or U = 1/K (MSE, bias 1/K): V = w (11^T/K - Q)
            diag, off = wb * (arb(1) / K - qtb), wb * (arb(1) / K - qob)
            face = "perp" if phase == "threshold" else "empty"
            if phase == "threshold":
                identities.append("rho0^2 = 1 exactly (rationals): the singular values on 1^perp equal 1")
        if dual is not None:
            diag, off = exact(dual[0]), exact(dual[1])
        V = ClassSym(diag - off, off, K)
        tm.lap("dual at the closed form")
        sc = class_sym_strict_complementarity(V, n, lam, face=face, margin=margin if face == "perp" else None)
        if phase == "zero" and dual is None:
            # the exact rational margin, valid however close rho0 is to 1: 1 - rho0 >= (1 - rho0^2)/2
            dl = max(sc["delta_lower"], _float_down((1 - r2) / 2))
            sc["delta_lower"] = dl
        if not sc["delta_lower"] > 0.0:
            raise NotCertified(f"no positive margin: delta >= {sc['delta_lower']!r}")
        bias_grad = V.row_sum * int(n) / N  # per-row bias gradient (1/N) sum_i (p_i - q_i)
        tm.lap("strict complementarity (analytic spectrum in balls)")
    if phase == "collapse" and d is not None and int(d) < K - 1:
        raise Unsupported(f"d = {d} < K - 1 = {K - 1}: the closed form's rank does not fit (hypothesis d >= K - 1)")
    geometry = "simplex-etf" if phase == "collapse" else "zero"
    out = {"phase": phase, "rho0_squared": [_float_down(r2), _float_up(r2)], "precision_bits": int(prec),
           "loss": loss, "margin": outward(margin), "margin_how": (
               "exact: rho0 > 1 (rationals) gives m > 0" if phase == "collapse" else "Z* = 0"),
           **sc, "bias_gradient": outward(bias_grad), "geometry": geometry,
           "bias": ("1/K" if loss == "mse" else "constant (b* = 0 up to a shift" +
                    (", fixed to 0 by the bias penalty)" if float(lb) > 0 else ")")),
           "self_dual": softmax or loss == "mse", "identities": identities,
           "conditions": {"spectral_norm": True, "strict_off_face": True, "candidate_in_face": True,
                          "injective": True, "gradient_determines_logits": True},
           "targets": {"q_true": str(q_t), "q_other": str(q_o), "weight": float(w)},
           "seconds": {k_: round(v, 6) for k_, v in tm.steps.items()}}
    if dual is not None:
        out["dual_override"] = [float(dual[0]), float(dual[1])]
    return out
