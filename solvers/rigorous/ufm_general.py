"""UFM with any loss object and any counts in ball arithmetic: the ball forms of the loss classes and the
grouped dual and feasible value (docs/rigorous.md "UFM, any loss, imbalanced counts")."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from types import SimpleNamespace

from solvers.rigorous.balls import (  # noqa: F401
    NotCertified, PRECISION_BITS, RigorousBound, Unsupported, _Precision, _Timer, _scale_down,
    certainly_le, exact, lower_float, max_ball, upper_float, xlogx,
)
from solvers.rigorous.linalg import (  # noqa: F401
    DENSE_MAX, SPECTRAL_LDL_BITS, VERIFIED_MAX, _spectral_upper_dense, _spectral_upper_verified,
)
from solvers.rigorous.ufm import (  # noqa: F401
    balanced_targets,
)


# ---------------------------------------------------------------------------------------------------
# UFM with any loss and any counts, grouped by exchangeable classes (docs/ufm_general.md "Certificate",
# "Grouping exchangeable classes"; docs/rigorous.md "UFM, any loss, imbalanced counts")
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BallLoss:
    """The ball form of a UFM loss object: its targets and weights as exact numbers. ``softmax``: the
    cross-entropy family w_y (lse(z) - <q, z>) with q_y = ``q_true``, q_c = ``q_other`` (exact rationals of the
    smoothing double, summing to exactly 1); else one-hot squared error. ``weights``: the class weights (the
    doubles given, exact)."""

    name: str
    softmax: bool
    q_true: Fraction = Fraction(1)
    q_other: Fraction = Fraction(0)
    weights: tuple = ()


def _ce_ball_form(loss) -> BallLoss:
    q_true, q_other = balanced_targets(loss.K, loss.eps, loss.convention)
    return BallLoss(loss.name, True, q_true, q_other, tuple(float(x) for x in loss.w))


def _squared_ball_form(loss) -> BallLoss:
    if not loss._one_hot():
        raise Unsupported(f"loss {loss.name!r} (SquaredError with regression targets) has no ball form here: "
                          f"regression has its own recipe (solvers.rigorous.regression)")
    return BallLoss(loss.name, False)


def ball_forms() -> dict:
    """The table loss class -> ball form (the cvxpy way: one entry per class of ``solvers.losses``)."""
    from solvers import losses as L

    return {L.CrossEntropy: _ce_ball_form, L.SquaredError: _squared_ball_form}


def ball_form(loss) -> BallLoss:
    """The :class:`BallLoss` of a loss object, looked up by its class (and its bases); a loss class without
    one (a ``UserLoss``) raises Unsupported naming it."""
    table = ball_forms()
    for cls in type(loss).__mro__:
        if cls in table:
            return table[cls](loss)
    raise Unsupported(f"loss {getattr(loss, 'name', '?')!r} ({type(loss).__name__}) has no ball form "
                      f"(solvers.rigorous.ball_forms: {', '.join(c.__name__ for c in table)})")


#: Dual variants of ``ufm_general_grouped`` with a bias penalty lb > 0 (docs/rigorous.md "UFM, any loss"):
#: "penalty": a_c = t g_c, the bias left free, the term -||t r||^2 / (2 lb) (tight at an optimum, where
#: r = -lb b); "projected": a_c = t (g_c - r), no penalty term (the bound of the lb = 0 problem, whose optimum is
#: <= the penalised one because (lb/2)||b||^2 >= 0). "best" computes both and keeps the larger lower bound.
UFM_GENERAL_VARIANTS = ("best", "penalty", "projected")


def _slot_gradients(Zs, dual, softmax: bool, qt, qo, w, Mu, cnt, sz, N):
    """(g, r) of :func:`ufm_general_grouped` in balls: per-slot loss gradients g[e][a] (e = m: the own slot;
    the given ``dual`` or the gradient at the slot logits ``Zs``: softmax columns summing to exactly 1) and the
    exact bias gradient per class of group e, r_e = (1/N)[sum_a n_a (m_a - [a == e]) g[e][a] + n_e g[m][e]]."""
    import numpy as np
    from flint import arb

    m = len(sz)
    zero = arb(0)
    g = [[None] * m for _ in range(m + 1)]
    if dual is not None:
        D = np.asarray(dual, dtype=float)
        if D.shape != (m + 1, m) or not np.all(np.isfinite(D)):
            raise NotCertified("dual point must be a finite (m + 1) x m array")
        for a in range(m):
            for e in range(m + 1):
                g[e][a] = exact(float(D[e, a]))
            if softmax:
                cs = g[m][a] + sum((Mu[e][a] * g[e][a] for e in range(m) if Mu[e][a]), zero)
                if not cs.is_zero():
                    raise NotCertified(f"column {a} of the dual point does not sum to exactly 0 (not on the "
                                       f"simplex after the shift): {cs}")
    elif softmax:
        for a in range(m):
            col = [exact(float(Zs[e, a])) for e in range(m + 1)]
            mx = max(float(Zs[e, a]) for e in range(m + 1) if e == m or Mu[e][a] > 0)
            mxb = exact(mx)
            ex = [(c - mxb).exp() for c in col]
            S = ex[m] + sum((Mu[e][a] * ex[e] for e in range(m) if Mu[e][a] > 0), zero)
            for e in range(m + 1):
                g[e][a] = w[a] * (ex[e] / S - (qt if e == m else qo))
    else:
        for a in range(m):
            for e in range(m + 1):
                g[e][a] = exact(float(Zs[e, a])) - (1 if e == m else 0)
    r = []
    for e in range(m):
        acc = cnt[e] * g[m][e]
        for a in range(m):
            if Mu[e][a]:
                acc += cnt[a] * Mu[e][a] * g[e][a] if a == e else cnt[a] * sz[a] * g[e][a]
        r.append(acc / N)
    return g, r


def _variant_bound(name, env):
    """(lower ball, t, sigma ball, penalty ball or None) of one dual variant of :func:`ufm_general_grouped`
    ("projected" or "penalty"); ``env`` holds that function's balls (a SimpleNamespace). NotCertified on failure."""
    import numpy as np
    from flint import arb

    v = env
    g, r, m, sz, cnt, Mu, N, sqn, sqrt_int = v.g, v.r, v.m, v.sz, v.cnt, v.Mu, v.N, v.sqn, v.sqrt_int
    softmax, qt, qo, w, lam, scale, lbf, spectral_how = (v.softmax, v.qt, v.qo, v.w, v.lam, v.scale, v.lbf,
                                                         v.spectral_how)
    zero = arb(0)
    if name == "projected":
        # centred gradients (slot e < m of column a: g - r_e; own slot of column a: g - r_a)
        Gc = [[g[e][a] - r[e] for a in range(m)] for e in range(m)] + [[g[m][a] - r[a] for a in range(m)]]
    else:
        Gc = g
    # reduced form of Gc D^{1/2}: R = sqrt(m_e m_a) alpha + diag(beta)
    beta = [(Gc[m][a] - Gc[a][a]) * sqn[a] for a in range(m)]
    R = [[(sqrt_int(sz[e] * sz[a]) * Gc[e][a] * sqn[a]) + (beta[a] if e == a else 0)
          for a in range(m)] for e in range(m)]
    if m > DENSE_MAX:
        sigma, spectral_how[name] = _spectral_upper_verified(R)
    else:
        Rf = np.array([[float(x.mid()) for x in row] for row in R])
        guess = float(np.linalg.svd(Rf, compute_uv=False)[0]) if m else 0.0
        sigma = _spectral_upper_dense(R, guess)
    for a in range(m):
        if sz[a] >= 2:
            sigma = max_ball(sigma, abs(beta[a]))
    sigma = sigma / N
    if scale is None:
        t = _scale_down(sigma, lam)
    else:
        t = float(scale)
        if not (0.0 < t <= 1.0 and certainly_le(exact(t) * sigma, lam)):
            raise NotCertified(f"forced scale t = {scale!r}: t ||A||_2 <= lam is not certain ({name} "
                               f"variant: spectral bound {sigma} x t vs lam {lam})")
    tb = exact(t)
    # conjugate sum
    total = zero
    for a in range(m):
        conj = zero
        for e in range(m + 1):
            mult = 1 if e == m else Mu[e][a]
            if not mult:
                continue
            v = tb * Gc[e][a]
            if softmax:
                x = v / w[a] + (qt if e == m else qo)
                conj += mult * w[a] * xlogx(x)
            else:
                conj += mult * (v * v / 2 + (v if e == m else 0))
        total += sz[a] * cnt[a] * conj
    low = -total / N
    pen = None
    if name == "penalty":
        # inf_b <t r, b> + (lb/2)||b||^2 = -||t r||^2 / (2 lb), ||r||^2 = sum_e m_e r_e^2 (per class)
        pen = sum((sz[e] * (tb * r[e]) ** 2 for e in range(m)), zero) / (2 * exact(lbf))
        low = low - pen
    if not low.is_finite():
        raise NotCertified(f"{name} variant: dual value not finite in balls")
    return low, t, sigma, pen


def ufm_general_grouped(loss, counts, lw: float, lh: float, lb: float, layout, Zs, *, dual=None,
                        project: bool = True, scale: float | None = None, variant: str = "best",
                        prec: int = PRECISION_BITS) -> RigorousBound:
    """Rigorous lower bound of the UFM optimum with any counts for the cross-entropy family (CE, label
    smoothing, class weights) and MSE with one-hot targets, from the grouped dual point of
    ``solvers.ufm_general.certificate_grouped`` rebuilt in balls.

    ``loss``: a ``solvers.losses.CrossEntropy`` or one-hot ``SquaredError``; ``counts`` (K,) integers;
    ``lb`` >= 0: the bias penalty (lb/2)||b||^2; ``layout``: the ``SlotLayout`` of exchangeable classes; ``Zs``
    ((m + 1) x m doubles): the slot logits of the float candidate (a choice: only the tightness depends on it).

    Dual point (exact reals, enclosed by balls): g = the per-slot loss gradient at Zs (softmax in balls: the
    exact softmax columns sum to exactly 1), r = sum_c n_c g_c / N (the bias gradient, exact).
    - "projected" (the only variant when lb = 0): a_c = t (g_c - r). Then sum_c n_c a_c = 0 exactly (bias
      constraint; round-and-project), and for the softmax losses each column of v/w + q = t p + (1 - t) q -
      t r / w sums to exactly 1 (sum_i r_i = 0 because every column of g sums to 0); its entries are checked
      >= 0 in balls (else NotCertified). Bound: -(1/N) sum_a m_a n_a loss*(a_a; rep_a).
    - "penalty" (lb > 0): a_c = t g_c, the bias is free: inf_b t <r, b> + (lb/2)||b||^2 = -||t r||^2 / (2 lb)
      with ||r||^2 = sum over groups of m_e r_e^2 (the per-class value times the group size). Bound:
      -(1/N) sum_a m_a n_a loss*(a_a; rep_a) - ||t r||^2 / (2 lb). Columns of v/w + q = t p + (1 - t) q sum to
      exactly 1.
    With lb > 0 the projected bound is valid as well (it bounds the lb = 0 optimum, which is <= the penalised
    one); ``variant="best"`` (default) computes both and keeps the larger lower bound (``details["variant"]``,
    ``details["variants"]``); "penalty" / "projected" compute only that one.
    ||A||_2 = t ||(G - r 1^T) D^{1/2}||_2 / N (projected; G D^{1/2} for penalty) is the largest of the spectral
    norm of the reduced m x m form (verified by LDL^T on s^2 I - R^T R) and the |beta_a| (m_a >= 2); t is
    rounded down until t sigma <= lam for every point of the balls.

    ``dual`` ((m + 1) x m doubles, optional): a given per-slot gradient g instead of the one at ``Zs`` (for the
    softmax losses its columns must sum to exactly 0 with the slot multiplicities, checked in balls);
    ``project=False``: reject a dual point whose bias constraint sum_c n_c g_c = 0 does not hold exactly
    (instead of subtracting r; with lb > 0 only the penalty variant, which needs no bias constraint, is then
    computed); ``scale``: a forced t, rejected unless t sigma <= lam for every point of the balls. Every failed
    condition raises NotCertified (with "best": when no variant is certified)."""
    import numpy as np
    from flint import arb

    lbf = float(lb)
    if not (math.isfinite(lbf) and lbf >= 0.0):
        raise NotCertified(f"bias penalty lb must be a finite number >= 0, got {lb!r}")
    if variant not in UFM_GENERAL_VARIANTS:
        raise ValueError(f"variant must be one of {UFM_GENERAL_VARIANTS}, got {variant!r}")
    if lbf == 0.0:
        if variant == "penalty":
            raise NotCertified("the penalty variant needs a bias penalty lb > 0 (with lb = 0 the bias constraint "
                               "sum_c n_c a_c = 0 is required: variant 'projected')")
        variants = ["projected"]
    elif variant == "best":
        variants = ["penalty", "projected"] if project else ["penalty"]
    else:
        variants = [variant]
    form = ball_form(loss)
    softmax = form.softmax
    counts = np.asarray(counts, dtype=np.int64)
    m = int(layout.m)
    if m > VERIFIED_MAX:
        raise Unsupported(f"{m} groups of exchangeable classes > {VERIFIED_MAX} (verified floating-point Cholesky "
                          f"of the reduced m x m form)")
    Zs = np.asarray(Zs, dtype=float)
    if Zs.shape != (m + 1, m) or not np.all(np.isfinite(Zs)):
        raise NotCertified("slot logits must be a finite (m + 1) x m array")
    if m <= DENSE_MAX:
        prec = max(int(prec), SPECTRAL_LDL_BITS)  # the whole dual point at that precision (see SPECTRAL_LDL_BITS)
    # m > DENSE_MAX: the spectral norm is proven in floating point (resolution ~ m^2 u relative), so the balls'
    # radii at the given precision (128 bits: ~1e-38 relative) are negligible
    spectral_how = {}
    timer = _Timer()
    with _Precision(prec):
        sz = [int(s) for s in layout.sizes]
        cnt = [int(counts[int(r)]) for r in layout.reps]
        N = int(counts.sum())
        Mu = [[int(layout.mult[e][a]) for a in range(m)] for e in range(m + 1)]
        zero = arb(0)
        qt = qo = w = None
        if softmax:
            qt, qo = exact(form.q_true), exact(form.q_other)
            w = [exact(form.weights[int(r)]) for r in layout.reps]
        g, r = _slot_gradients(Zs, dual, softmax, qt, qo, w, Mu, cnt, sz, N)
        if not project and "projected" in variants and not all(x.is_zero() for x in r):
            raise NotCertified("bias constraint sum_c n_c a_c = 0 does not hold exactly (project=False)")
        timer.lap("gradient")
        lam = (exact(lw) * exact(lh)).sqrt()
        sqn = [exact(c).sqrt() for c in cnt]
        sqrt_cache = {}

        def sqrt_int(v):
            """sqrt(v) for an integer v, as the ball exact(v).sqrt() (computed once per value)."""
            b = sqrt_cache.get(v)
            if b is None:
                b = sqrt_cache[v] = exact(v).sqrt()
            return b

        env = SimpleNamespace(g=g, r=r, m=m, sz=sz, cnt=cnt, Mu=Mu, N=N, sqn=sqn, sqrt_int=sqrt_int,
                              softmax=softmax, qt=qt, qo=qo, w=w, lam=lam, scale=scale, lbf=lbf,
                              spectral_how=spectral_how)

        def bound_of(name):
            return _variant_bound(name, env)

        results, failures = {}, {}
        for name in variants:
            try:
                results[name] = bound_of(name)
            except NotCertified as exc:
                if len(variants) == 1:
                    raise
                failures[name] = str(exc)
            timer.lap(f"dual value ({name})" if len(variants) > 1 else "dual value")
        if not results:
            raise NotCertified("no dual variant certified: " + "; ".join(f"{k}: {v}" for k, v in failures.items()))
        best = max(results, key=lambda k: lower_float(results[k][0]))
        lower, t, sigma, pen = results[best]
    if best == "projected":
        how = "exact (round-and-project: a_c = t (g_c - r), r the exact bias gradient)"
    else:
        how = "free (bias penalty: a_c = t g_c, term -||t r||^2 / (2 lb))"
    det = {"groups": m, "classes": int(layout.K), "scale_t": t, "spectral_norm_bound": upper_float(sigma),
           "lam": lower_float(lam), "bias_constraint": how, "loss": getattr(loss, "name", "?"), "lb": lbf,
           "variant": best}
    if pen is not None:
        det["bias_penalty_term"] = upper_float(pen)
    if best in spectral_how:
        sh = spectral_how[best]
        det["spectral_method"] = sh.get("method")
        det["spectral_relative_excess"] = sh.get("relative_excess")
    else:
        det["spectral_method"] = "LDL^T in balls"
    if len(variants) > 1:
        det["variants"] = {k: {"lower": lower_float(v[0]), "scale_t": v[1]} for k, v in results.items()}
        det["variants"].update({k: {"not_certified": v} for k, v in failures.items()})
    return RigorousBound(lower, None, "dual (conjugate, grouped) in ball arithmetic", prec, det, timer.steps)


def ufm_general_feasible(loss, counts, lw: float, lh: float, layout, A, beta, b, *, lb: float = 0.0,
                        prec: int = PRECISION_BITS):
    """Rigorous upper end of the grouped UFM optimum: the convex objective (1/N) sum_a m_a n_a loss(z_a; rep_a)
    + lam ||X||_* at an explicit invariant candidate, in balls. The candidate is built from doubles: A ~ P Q with
    P = U sqrt(S), Q = sqrt(S) V^T from the float SVD of ``A`` (exact doubles; the candidate is the exact product
    P Q, evaluated in balls), ``beta`` and the group biases ``b`` as given. ||P Q||_* <= (||P||_F^2 +
    ||Q||_F^2)/2 and ||X||_* = ||A||_* + sum_a (m_a - 1)|beta_a| (docs/ufm_general.md). ``lb`` > 0 (the bias
    penalty of the instance; the caller must pass it, the default 0 is the unpenalised problem): the value
    includes (lb/2) ||b||^2 = (lb/2) sum_a m_a b_a^2 (sum over classes), in balls. Returns (ball, rank):
    ``rank`` bounds rank X from above (columns of P + sum of m_a - 1 over beta_a != 0); the value is that of a
    factored point only when d >= rank."""
    import numpy as np
    from flint import arb

    lbf = float(lb)
    if not (math.isfinite(lbf) and lbf >= 0.0):
        raise NotCertified(f"bias penalty lb must be a finite number >= 0, got {lb!r}")
    form = ball_form(loss)
    softmax = form.softmax
    A = np.asarray(A, dtype=float)
    m = int(layout.m)
    U, S, Vt = np.linalg.svd(A)
    keep = S > 0
    sq = np.sqrt(S[keep])
    P = U[:, keep] * sq[None, :]
    Q = sq[:, None] * Vt[keep, :]
    beta = np.asarray(beta, dtype=float)
    b = np.asarray(b, dtype=float)
    if not (np.all(np.isfinite(P)) and np.all(np.isfinite(Q)) and np.all(np.isfinite(beta)) and np.all(np.isfinite(b))):
        raise NotCertified("non-finite candidate")
    r = int(P.shape[1])
    rank = r + int(sum(int(layout.sizes[a]) - 1 for a in range(m) if beta[a] != 0.0))
    counts = np.asarray(counts, dtype=np.int64)
    zero = arb(0)
    with _Precision(prec):
        sz = [int(s) for s in layout.sizes]
        cnt = [int(counts[int(x)]) for x in layout.reps]
        N = int(counts.sum())
        Pb = [[exact(float(P[i, j])) for j in range(r)] for i in range(m)]
        Qb = [[exact(float(Q[i, j])) for j in range(m)] for i in range(r)]
        if m > DENSE_MAX and r > 0:
            # the exact product of exact doubles enclosed by FLINT's arb_mat product (C level; the Python loop
            # below is O(m^2 r) ball operations: ~1e9 at m = 1000)
            from flint import arb_mat

            Pm = arb_mat(P.tolist())
            Qm = arb_mat(Q.tolist())
            Am = Pm * Qm
            Ab = [[Am[i, j] for j in range(m)] for i in range(m)]
        else:
            Ab = [[sum((Pb[i][l] * Qb[l][j] for l in range(r)), zero) for j in range(m)] for i in range(m)]
        bb = [exact(float(x)) for x in b]
        be = [exact(float(x)) for x in beta]
        nuc = (sum((x * x for row in Pb for x in row), zero) + sum((x * x for row in Qb for x in row), zero)) / 2
        nuc += sum(((sz[a] - 1) * abs(be[a]) for a in range(m)), zero)
        data = zero
        for a in range(m):
            sqn = exact(cnt[a]).sqrt()
            z = []
            for e in range(m):
                if e == a:
                    z.append((Ab[a][a] - be[a]) / sz[a] / sqn + bb[a])
                else:
                    z.append(Ab[e][a] / exact(sz[e] * sz[a]).sqrt() / sqn + bb[e])
            z.append((Ab[a][a] / sz[a] + be[a] * (1 - arb(1) / sz[a])) / sqn + bb[a])
            mult = [int(layout.mult[e][a]) for e in range(m)] + [1]
            if softmax:
                mx = max(float(z[e].mid()) for e in range(m + 1) if mult[e])
                mxb = exact(mx)
                lse = mxb + sum((mult[e] * (z[e] - mxb).exp() for e in range(m + 1) if mult[e]), zero).log()
                qz = exact(form.q_true) * z[m] + exact(form.q_other) * sum(
                    (mult[e] * z[e] for e in range(m) if mult[e]), zero)
                val = exact(form.weights[int(layout.reps[a])]) * (lse - qz)
            else:
                val = sum((mult[e] * z[e] * z[e] for e in range(m) if mult[e]), zero) / 2 + (z[m] - 1) ** 2 / 2
            data += sz[a] * cnt[a] * val
        lam = (exact(lw) * exact(lh)).sqrt()
        value = data / N + lam * nuc
        if lbf != 0.0:
            value += exact(lbf) / 2 * sum((sz[a] * bb[a] * bb[a] for a in range(m)), zero)
    return value, rank
