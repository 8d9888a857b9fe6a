"""Rigorous certificates in ball arithmetic (python-flint's arb): docs/rigorous.md.

Every certificate of the float pipeline (solvers.ufm, solvers.scl, solvers.feature_collapse) is a
weak-duality bound: a dual point, its feasibility (equality constraints, a spectral-norm or PSD
condition, a simplex) and its dual objective. Here the same recipe is re-run so that every step is a
proof about real numbers:

1. the float dual point is converted *exactly* (every double is an exact arb ball of radius 0);
2. its equality constraints are enforced *exactly* by construction (round-and-project: the class
   structure a I + b 11^T with a := -k b makes the row sums exactly 0);
3. its spectral norm is bounded from above rigorously (analytic eigenvalues of the class-structured
   matrix, evaluated in balls), the scaling t is a double rounded *downward* until
   t ||Lambda||_2 <= lambda holds for every point of the balls;
4. the dual value and the primal value at the candidate are evaluated in balls (arb's functions
   return enclosures), so the lower bound is the lower end of a ball and the feasible value the
   upper end of another.

Nothing is hidden in a round-off allowance: the only floating-point numbers that remain are the
inputs (the instance's parameters are doubles, and they *are* the instance) and the choice of the dual
point and candidate, which only affects tightness, never validity.

A dual point that fails a feasibility condition raises :class:`NotCertified` (no bound is returned).
python-flint is optional: :func:`require_flint` raises ImportError with the install hint.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

#: Working precision of the balls (bits). 128 bits leave ~20 decimal digits of headroom over float64,
#: so the width of every bracket is the candidate's distance from the optimum, not the arithmetic's
#: (measured: CE-UFM k = 1000 lower bound radius ~1e-37).
PRECISION_BITS = 128

INSTALL_HINT = 'pip install "ncproofs[rigorous]"  (or: pip install "python-flint>=0.6")'


class NotCertified(Exception):
    """The dual point (or the candidate) fails a condition in ball arithmetic: no bound is proven."""


class Unsupported(NotCertified):
    """No ball-arithmetic recipe for this instance (for example a mini-batch SCL instance)."""


def available() -> bool:
    """True when python-flint can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("flint") is not None


def require_flint():
    """Import flint or raise ImportError with the install hint."""
    try:
        import flint
    except ImportError as exc:  # pragma: no cover - exercised only without python-flint
        raise ImportError(f"rigorous certificates need python-flint: {INSTALL_HINT}") from exc
    return flint


class _Precision:
    """Context manager setting flint's working precision (restored afterwards)."""

    def __init__(self, bits: int):
        self.bits = int(bits)

    def __enter__(self):
        flint = require_flint()
        self.old = flint.ctx.prec
        flint.ctx.prec = self.bits
        return flint

    def __exit__(self, *exc):
        import flint

        flint.ctx.prec = self.old
        return False


# ---------------------------------------------------------------------------------------------------
# Exact conversions and outward rounding
# ---------------------------------------------------------------------------------------------------

def exact(x):
    """An exact ball (radius 0) for a finite double or an int; a Fraction becomes the tightest ball."""
    from flint import arb, fmpq

    if isinstance(x, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(x, int):
        return arb(x)
    if isinstance(x, Fraction):
        return arb(fmpq(x.numerator, x.denominator))
    xf = float(x)
    if not math.isfinite(xf):
        raise NotCertified(f"non-finite input {x!r}")
    b = arb(xf)
    if not b.is_exact():  # pragma: no cover - a double always converts exactly
        raise AssertionError("double did not convert exactly")
    return b


def _to_fraction(b_exact) -> Fraction:
    """The exact rational value of an exact ball (radius 0)."""
    man, exp = b_exact.man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** (-exp))


def _float_down(q: Fraction) -> float:
    f = float(q)  # nearest (ties to even)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def _float_up(q: Fraction) -> float:
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


#: Precision used to read a ball's endpoints (arb rounds lower()/upper() outward at the context precision;
#: at this precision the endpoints of a 128-bit ball are exact).
ENDPOINT_BITS = 1024


def endpoints(b) -> tuple[Fraction, Fraction]:
    """Rationals lo <= every point of the ball <= hi (exact endpoints of mid -+ rad)."""
    if not b.is_finite():
        raise NotCertified("a ball is not finite")
    with _Precision(max(ENDPOINT_BITS, 4 * b.mid().bits() + 64)):
        return _to_fraction(b.lower()), _to_fraction(b.upper())


def outward(b) -> list[float]:
    """[lo, hi] doubles with lo <= every point of the ball <= hi (rounded outward, exactly checked)."""
    lo, hi = endpoints(b)
    return [_float_down(lo), _float_up(hi)]


def lower_float(b) -> float:
    return outward(b)[0]


def upper_float(b) -> float:
    return outward(b)[1]


def certainly_le(a, b) -> bool:
    """a <= b for every pair of points of the two balls."""
    return bool(a <= b)


def certainly_ge(a, b) -> bool:
    return bool(a >= b)


def certainly_positive(a) -> bool:
    from flint import arb

    return bool(a > arb(0))


def xlogx(x):
    """x log x for a ball x >= 0 (0 log 0 = 0); raises NotCertified when x may be negative."""
    from flint import arb

    if x.is_zero():
        return arb(0)
    if not certainly_positive(x):
        raise NotCertified(f"entropy term of a ball that may be <= 0: {x}")
    return x * x.log()


# ---------------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------------

@dataclass
class RigorousBound:
    """A rigorous bracket of an optimum: every point of ``lower`` is a proven lower bound, every point of
    ``upper`` a feasible value (so the optimum is <= its upper end). ``steps`` records seconds per step."""

    lower: object
    upper: object | None
    method: str
    precision_bits: int
    details: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)

    @property
    def lower_bound(self) -> float:
        """The proven lower bound as a double (the lower end of the ball, rounded down)."""
        return outward(self.lower)[0]

    @property
    def upper_bound(self) -> float | None:
        """The proven feasible value as a double (the upper end of the ball, rounded up)."""
        return None if self.upper is None else outward(self.upper)[1]

    def to_dict(self) -> dict:
        out = {"lower": outward(self.lower), "upper": None if self.upper is None else outward(self.upper),
               "method": self.method, "precision_bits": self.precision_bits}
        if self.upper is not None:
            out["width"] = _float_up(endpoints(self.upper)[1] - endpoints(self.lower)[0])
        out["details"] = dict(self.details)
        out["seconds"] = {k: round(v, 6) for k, v in self.steps.items()}
        return out


class _Timer:
    def __init__(self):
        self.steps: dict = {}
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.steps[name] = self.steps.get(name, 0.0) + (now - self.t)
        self.t = now


# ---------------------------------------------------------------------------------------------------
# Class-structured k x k matrices a I + b 11^T (the balanced symmetry)
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClassSym:
    """The k x k matrix a I + b 1 1^T (balls a, b). Its eigenvalues are exactly a (multiplicity k - 1, on
    the complement of 1) and a + k b (on 1): it is symmetric and 1 is an eigenvector, 1^perp is
    invariant. So ||.||_2 = max(|a|, |a + k b|) and ||.||_* = (k - 1)|a| + |a + k b|; row sums a + k b."""

    a: object
    b: object
    k: int

    @property
    def row_sum(self):
        return self.a + self.k * self.b

    def spectral_norm(self):
        return max_ball(abs(self.a), abs(self.row_sum))

    def nuclear_norm(self):
        return (self.k - 1) * abs(self.a) + abs(self.row_sum)

    def trace(self):
        return self.k * (self.a + self.b)

    def frobenius_sq(self):
        d = self.a + self.b
        return self.k * d * d + (self.k * self.k - self.k) * self.b * self.b


def max_ball(x, y):
    """A ball containing max(u, v) for every u in x, v in y."""
    return x.max(y)


def projected_class_sym(offdiag: float, k: int) -> ClassSym:
    """Round-and-project: the exact class-structured matrix with off-diagonal ``offdiag`` (a double, kept
    exactly) and diagonal -(k - 1) offdiag, i.e. a = -k offdiag, b = offdiag: row sums exactly 0."""
    b = exact(offdiag)
    return ClassSym(exact(-k) * b, b, k)  # k * double: <= 53 + 64 bits, exact at 128 bits


def _scale_down(norm_unit, lam) -> float:
    """The largest convenient double t in (0, 1] with t * norm_unit <= lam for every point of the balls
    (t = 1 when norm_unit <= lam already). Raises NotCertified when no positive t is found."""
    from flint import arb

    if certainly_le(norm_unit, lam):
        return 1.0
    if not certainly_positive(norm_unit):
        raise NotCertified("spectral norm bound is not positive")
    t = min(lower_float(lam / norm_unit), 1.0)
    for i in range(64):
        if not t > 0.0:
            break
        if certainly_le(arb(t) * norm_unit, lam):
            return t
        t = math.nextafter(t * (1.0 - 2.0 ** (i - 52)), 0.0)  # further down each round
    raise NotCertified("could not round the dual scaling down to a feasible value")


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
# Dense symmetric ball matrices: a verified lower bound on the smallest eigenvalue (small k)
# ---------------------------------------------------------------------------------------------------

#: Dense ball verification (LDL^T in Python-level ball arithmetic, O(k^3 / 6) operations) is used up to
#: this size; larger matrices must come with their structure (analytic eigenvalues).
DENSE_MAX = 120


def ldl_positive_definite(S) -> bool:
    """True when the symmetric ball matrix S (list of lists of arb) is positive definite for every matrix
    in the balls: the LDL^T elimination runs with every pivot certainly > 0 (Sylvester: the pivots are
    ratios of leading principal minors; a ball enclosure of each pivot that excludes 0 and is positive
    proves every leading minor positive for every enclosed matrix)."""
    from flint import arb

    k = len(S)
    A = [list(row) for row in S]  # only the lower triangle A[i][m], m <= i, is read and updated
    zero = arb(0)
    for j in range(k):
        d = A[j][j]
        if not d > zero:
            return False
        inv = 1 / d
        colj = [A[m][j] for m in range(k)]
        for i in range(j + 1, k):
            lij = colj[i] * inv
            if lij.is_zero():
                continue
            Ai = A[i]
            for m in range(j + 1, i + 1):
                Ai[m] = Ai[m] - lij * colj[m]
    return True


def lambda_min_lower(S, guess: float | None = None):
    """A ball whose lower end bounds the smallest eigenvalue of every symmetric matrix in the ball matrix S
    from below: sigma such that S - sigma I is verified positive definite by :func:`ldl_positive_definite`,
    with sigma just below the float estimate ``guess`` (tried at increasing distances); falls back to
    Gershgorin's bound min_i (S_ii - sum_j |S_ij|)."""
    from flint import arb

    k = len(S)
    gersh = None
    for i in range(k):
        r = S[i][i] - sum((abs(S[i][j]) for j in range(k) if j != i), arb(0))
        gersh = r if gersh is None else gersh.min(r)
    g_lo = arb(lower_float(gersh))
    if guess is None or not math.isfinite(guess) or k > DENSE_MAX:
        return g_lo
    scale = max(max(abs(float(S[i][j].mid())) for i in range(k) for j in range(k)), 1e-300)
    for rel in (1e-13, 1e-10, 1e-7, 1e-4):
        sigma = guess - rel * scale * k
        if sigma <= float(g_lo.mid()):
            break
        sb = arb(sigma)
        T = [[S[i][j] - (sb if i == j else 0) for j in range(k)] for i in range(k)]
        if ldl_positive_definite(T):
            return sb
    return g_lo


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
#: minimiser): starts of the family's factored solver (seed 0) and its wall-clock budget (s), inside the CLI's
#: 2-minute limit. A choice: only the tightness of the bracket depends on it.
SCL_MINIBATCH_STARTS = 3
SCL_MINIBATCH_SOLVER_BUDGET_S = 60.0
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


# ---------------------------------------------------------------------------------------------------
# Feature collapse (docs/feature_collapse.md "Certificates"): nuclear-norm bound and the LayerNorm SDP dual
# ---------------------------------------------------------------------------------------------------

#: Ball evaluations of the exact risk are Python-level: K x sentences x L score terms up to this many.
FC_MAX_TERMS = 300_000


def _fc_ce_balls(Zb, X, y, p_b, K, L, n_w):
    """CE(Z) = sum_s p_s log sum_j exp(h_j(s) - h_y(s)) and its gradient (K L x n_w) for a ball matrix Z
    (list of K L rows of n_w balls), h_j(s) = sum_l Z[j L + l][X[s, l]]; returns (CE, G)."""
    from flint import arb

    S = len(y)
    ce = arb(0)
    G = [[arb(0)] * n_w for _ in range(K * L)]
    for s in range(S):
        xs = X[s]
        h = [sum((Zb[j * L + l][int(xs[l])] for l in range(L)), arb(0)) for j in range(K)]
        ys = int(y[s])
        r = [h[j] - h[ys] for j in range(K)]
        m = max(float(x.mid()) for x in r)
        e = [(x - m).exp() for x in r]
        off = sum((e[j] for j in range(K) if j != ys), arb(0))
        tot = off + e[ys]
        # loss = log(sum_j e^{r_j}) = m + log(tot); stable: log1p(off) when m = 0 (the label is the largest)
        loss = off.log1p() if m == 0.0 else m + tot.log()
        ce += p_b[s] * loss
        for j in range(K):
            g = (-off / tot) if j == ys else e[j] / tot
            g = p_b[s] * g
            for l in range(L):
                G[j * L + l][int(xs[l])] += g
    return ce, G


def _matmul_balls(A, B):
    n, m, q = len(A), len(B), len(B[0]) if B else 0
    from flint import arb

    return [[sum((A[i][t] * B[t][j] for t in range(m)), arb(0)) for j in range(q)] for i in range(n)]


def _feature_collapse_enumerated(params: dict, *, prec: int = PRECISION_BITS) -> RigorousBound:
    """The reference recipe (kept for the tests of :func:`feature_collapse_from_instance`, which computes the same
    bracket from the exact structure): every (class, sentence) pair enumerated in Python-level balls, so limited to
    K x sentences x L <= FC_MAX_TERMS and n_w <= DENSE_MAX. Rigorous bracket at the claimed configuration
    (proofs_check.claims.feature_collapse.claimed_configuration builds it from theory):

    - the exact risk is re-enumerated in balls: sentence probabilities p_s = (1/K) prod_l mu(word) from the
      instance's frequencies taken as exact rationals (uniform: 1/s_c; given doubles: normalised exactly to
      sum 1), scores, softmax, CE (stable log1p form) and its gradient G;
    - candidate: W, U (doubles, exact); without LayerNorm E = W, with it E = sqrt(d) (W - mean) / ||.|| in
      balls; Z = U E^T in balls; feasible value CE(Z) + (lw/2)||W||^2 + (lu/2)||U||^2;
    - no LayerNorm (nuclear-kkt): LB = CE(Z) - <G, Z> - R max(0, ||G||_2 - lambda), R = log(K)/lambda, with
      ||G||_2^2 <= s verified by an LDL^T in balls of s I - G^T G (s just above the float estimate);
    - LayerNorm (sdp-dual): nu_i = <(A E)_i, E_i>/d, A = G^T G/(2 lambda), shifted by a verified lower bound of
      lambda_min(diag(nu) - A) (LDL^T in balls); LB = CE(Z) - <G, Z> - d sum(nu).
    """
    import numpy as np
    from flint import arb

    from theory import feature_collapse as T

    tm = _Timer()
    inst = _fc_instance(params)
    K, L, n_w, s_c, d = inst.K, inst.L, inst.n_w, inst.s_c, inst.d
    if K * inst.n_sentences * L > FC_MAX_TERMS or n_w > DENSE_MAX:
        raise Unsupported(f"ball enumeration limited to K x sentences x L <= {FC_MAX_TERMS} and n_w <= {DENSE_MAX} "
                          f"(got {K * inst.n_sentences * L}, n_w = {n_w})")
    from proofs_check.claims.feature_collapse import claimed_configuration  # noqa: PLC0415 (see docs/rigorous.md)

    pred = T.predict(inst)
    cfg, why = claimed_configuration(inst, pred)
    if cfg is None:
        raise Unsupported(f"no claimed configuration to certify: {why}")
    W, U, _E = (np.asarray(a, dtype=float) for a in cfg)
    X, y, p = T.sentence_distribution(inst)
    freqs = inst.freqs
    tm.lap("float candidate and sentences")
    with _Precision(prec):
        # the instance's word distribution, exactly: uniform is 1/s_c (the doubles 1/3 do not sum to 1), and
        # given frequencies are normalised exactly to sum 1 (mu_beta = f_beta / sum f, rationals)
        if getattr(inst, "uniform", False) or params.get("freqs") is None:
            fq = [Fraction(1, s_c)] * s_c
        else:
            tot = sum(Fraction(float(f)) for f in freqs)
            fq = [Fraction(float(f)) / tot for f in freqs]
        fb = [exact(f) for f in fq]
        p_b = []
        for s in range(len(y)):
            v = arb(1)
            for l in range(L):
                v *= fb[int(X[s, l]) % s_c]
            p_b.append(v / K)
        if abs(float(sum(p_b, arb(0)).mid()) - 1.0) > 1e-9 or max(abs(float(pb.mid()) - ps) for pb, ps in
                                                                    zip(p_b, p)) > 1e-12:
            raise NotCertified("sentence probabilities from the frequencies do not match the enumeration")
        Wb = [[exact(x) for x in row] for row in W]
        Ub = [[exact(x) for x in row] for row in U]
        Eb = _layernorm_balls(Wb, d) if inst.layernorm else Wb
        Zb = _matmul_balls(Ub, [list(col) for col in zip(*Eb)])  # U E^T: (K L) x n_w
        tm.lap("candidate in balls")
        ce, G = _fc_ce_balls(Zb, X, y, p_b, K, L, n_w)
        tm.lap("exact risk and gradient in balls")
        reg = (exact(inst.lw) / 2) * sum((x * x for row in Wb for x in row), arb(0)) + \
            (exact(inst.lu) / 2) * sum((x * x for row in Ub for x in row), arb(0))
        upper = ce + reg
        inner = sum((G[i][j] * Zb[i][j] for i in range(K * L) for j in range(n_w)), arb(0))
        lam = exact(inst.lam)
        Gf = np.array([[float(x.mid()) for x in row] for row in G])
        GtG = _matmul_balls([list(col) for col in zip(*G)], G)  # n_w x n_w
        details: dict = {}
        if not inst.layernorm:
            top = float(np.linalg.eigvalsh(Gf.T @ Gf)[-1]) if Gf.size else 0.0
            s_ok = None
            for rel in (1e-14, 1e-12, 1e-10, 1e-8, 1e-6):
                s_try = top * (1 + rel) + 1e-300
                T_ = [[(arb(s_try) if i == j else arb(0)) - GtG[i][j] for j in range(n_w)] for i in range(n_w)]
                if ldl_positive_definite(T_):
                    s_ok = arb(s_try)
                    break
            if s_ok is None:
                raise NotCertified("could not verify an upper bound on ||G||_2")
            gnorm = s_ok.sqrt()
            R_ = arb(K).log() / lam
            excess = (gnorm - lam).max(arb(0))
            lower = ce - inner - R_ * excess
            method = "ball-arithmetic nuclear-kkt (||G||_2 verified by LDL^T of s I - G^T G)"
            details.update(grad_spectral_norm_upper=upper_float(gnorm), nuclear_radius=upper_float(R_))
        else:
            A = [[GtG[i][j] / (2 * lam) for j in range(n_w)] for i in range(n_w)]
            Af = np.array([[float(x.mid()) for x in row] for row in A])
            Ef = np.array([[float(x.mid()) for x in row] for row in Eb])
            nu = np.einsum("ij,ij->i", Af @ Ef, Ef) / d
            nub = [exact(float(v)) for v in nu]
            Mm = [[(nub[i] if i == j else arb(0)) - A[i][j] for j in range(n_w)] for i in range(n_w)]
            Mf = np.diag(nu) - Af
            lmin = lambda_min_lower(Mm, float(np.linalg.eigvalsh(0.5 * (Mf + Mf.T))[0]))
            shift = arb(0) if lmin >= 0 else -lmin
            lower = ce - inner - d * (sum(nub, arb(0)) + n_w * shift)
            method = "ball-arithmetic sdp-dual (PSD shift verified by LDL^T)"
            details.update(dual_shift=upper_float(shift) if not shift.is_zero() else 0.0)
        tm.lap("dual value")
    details["sentences"] = len(y)
    return RigorousBound(lower, upper, method, prec, details, tm.steps)


#: Structured recipe (:func:`feature_collapse_from_instance`) with latents that are not all n_c^L tuples equally
#: often: one softmax entry in Python-level balls per (class type, sentence group). Seconds per entry, measured on
#: the shared 2-core machine (python-flint 0.9, 128 bits): sub + exp + sums + weights ~1.3 us, plus 0.05 us per
#: position (arb_mat column additions of the scores), plus the gradient accumulation: dense incidence products
#: 0.25 us + 0.016 us per (position x cell), or column additions 0.45 us + 0.05 us per position, whichever the model
#: says is cheaper (measured totals: 2.7 us dense / 3.4 us columns at L = 15 with 3 cells, 1.7 us at L = 5 with 9
#: cells, 1.2 us at L = 2 with 100 cells; the model gives 3.0 / 3.3, 2.5, 2.0). Refused (Unsupported, with the
#: count and the estimate) above FC_MAX_GROUPED_SECONDS before any ball work.
FC_SECONDS_PER_ENTRY = 1.3e-6
FC_SECONDS_PER_ENTRY_POSITION = 0.05e-6
FC_SECONDS_DENSE_INCIDENCE = (0.25e-6, 0.016e-6)
FC_SECONDS_COLUMN_INCIDENCE = (0.45e-6, 0.05e-6)
FC_MAX_GROUPED_SECONDS = 30.0
#: Sentence groups per arb_mat product of the dense gradient accumulation (memory: (class types + L cells) x FC_CHUNK
#: balls).
FC_CHUNK = 256
#: Largest dense matrix of the structured recipe's LDL^T tests (spectral norm: min(cells, rows of the reduced
#: gradient); LayerNorm: cells). One LDL^T in 128-bit balls: 0.11 s at 120, 0.34 s at 200, 1.1 s at 300 (measured).
FC_DENSE_MAX = 300
#: Consistency check of the structured risk and gradient against the float enumeration of every sentence
#: (solvers.feature_collapse.FCProblem.ce at the same candidate): relative deviation allowed on CE (plus the float
#: evaluation's own round-off allowance) and on the largest entry of the cell-summed gradient (plus 4 S EPS, the
#: float summation error of an entry whose terms sum to <= 1). A formula error gives O(1) relative deviations.
FC_FLOAT_CHECK_RTOL = 1e-9


def _fc_instance(params: dict):
    from theory import feature_collapse as T

    return T.FCInstance(params["n_c"], params["L"], params["s_c"], params["d"], params["lambda"], K=params.get("K"),
                        layernorm=bool(params.get("layernorm", False)), freqs=tuple(params["freqs"]) if
                        params.get("freqs") else None, latents=params.get("latents", "full"),
                        seed=int(params.get("seed", 0)))


def _fc_word_masses(inst, params: dict) -> list:
    """mu_beta as exact rationals: uniform 1/s_c (the doubles 1/3 do not sum to 1); given frequencies (the
    instance's doubles) normalised exactly to sum 1."""
    if getattr(inst, "uniform", False) or params.get("freqs") is None:
        return [Fraction(1, inst.s_c)] * inst.s_c
    tot = sum(Fraction(float(f)) for f in inst.freqs)
    return [Fraction(float(f)) / tot for f in inst.freqs]


def _fc_candidate(inst):
    """(W, U) of the claimed configuration (doubles), or Unsupported."""
    import numpy as np

    from theory import feature_collapse as T
    from theory.feature_collapse import claimed_configuration

    cfg, why = claimed_configuration(inst, T.predict(inst))
    if cfg is None:
        raise Unsupported(f"no claimed configuration to certify: {why}")
    W, U, E = (np.asarray(a, dtype=float) for a in cfg)
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(U))):
        raise NotCertified("non-finite claimed configuration")
    return W, U, E


@dataclass
class _FCStructure:
    """Exact structure of a candidate (W, U) (docs/rigorous.md "Feature collapse"), found on the doubles.

    cells: the words of one concept whose rows of W are identical doubles (so are their rows of E); the
    gradient's columns within a cell are proportional to the words' masses. urows: the distinct rows of U,
    rowtype[j, l] the one of U_(j,l). product: every latent tuple is used exactly m times and U_(j,l) depends on
    (l, z_(j,l)) only (then CE and its gradient factorise over positions); else classes with the same latent
    and rows of U form types (multiplicity) and the sentences of a type form groups (one cell per position)."""

    cell_concept: list
    cell_words: list
    cells_of: list
    urows: object
    rowtype: object
    product: bool
    m: int = 1
    rowtype_lc: list = field(default_factory=list)
    types: list = field(default_factory=list)
    type_of_class: object = None
    sentence_groups: int = 0


def _fc_structure(inst, W, U) -> _FCStructure:
    import numpy as np

    n_c, s_c, K, L = inst.n_c, inst.s_c, inst.K, inst.L
    Wk, Uk = W + 0.0, U + 0.0  # -0.0 -> +0.0: equal reals get equal bytes
    cell_concept, cell_words, cells_of = [], [], []
    for a in range(n_c):
        idx: dict = {}
        for w in range(a * s_c, (a + 1) * s_c):
            key = Wk[w].tobytes()
            if key not in idx:
                idx[key] = len(cell_words)
                cell_concept.append(a)
                cell_words.append([])
            cell_words[idx[key]].append(w)
        cells_of.append(sorted(set(idx.values())))
    uidx: dict = {}
    rowtype = np.empty(K * L, dtype=np.int64)
    for i in range(K * L):
        rowtype[i] = uidx.setdefault(Uk[i].tobytes(), len(uidx))
    urows = np.zeros((len(uidx), U.shape[1]))
    for key, i in uidx.items():
        urows[i] = np.frombuffer(key, dtype=float)
    rowtype = rowtype.reshape(K, L)
    z = inst.latent_vars
    st = _FCStructure(cell_concept, cell_words, cells_of, urows, rowtype, product=False)
    if inst.symmetric:
        lc = [[-1] * n_c for _ in range(L)]
        ok = True
        for l in range(L):
            for c in range(n_c):
                r = np.unique(rowtype[z[:, l] == c, l])
                if r.size != 1:
                    ok = False
                    break
                lc[l][c] = int(r[0])
            if not ok:
                break
        if ok:
            st.product, st.m, st.rowtype_lc = True, K // n_c ** L, lc
            st.sentence_groups = L * len(cell_concept)
            return st
    tidx: dict = {}
    st.type_of_class = np.empty(K, dtype=np.int64)
    for j in range(K):
        key = (tuple(int(c) for c in z[j]), tuple(int(r) for r in rowtype[j]))
        if key not in tidx:
            tidx[key] = len(st.types)
            st.types.append([key[0], key[1], 0])
        t = tidx[key]
        st.types[t][2] += 1
        st.type_of_class[j] = t
    st.sentence_groups = sum(math.prod(len(cells_of[c]) for c in lat) for lat, _r, _n in st.types)
    return st


def _fc_product_balls(inst, st: _FCStructure, V, mass_b):
    """CE and the cell-summed gradient Gc ((K L) x cells) when every latent is used m times and U_(j,l) = u_l(z_jl):
    sum_j exp(h_j(x)) = m prod_l sum_c exp(V_l[c, x_l]), so with q_l(c | cell) the softmax over concepts at position l,
    A_l(c) = sum_cells mass(cell) q_l(c | cell) (cell masses within their concept):
    CE = log m + (1/n_c) sum_l sum_cells mass(cell) log1p(sum_{c != concept} e^{V_l[c, cell] - V_l[concept, cell]}),
    Gc[(j,l), cell] = (mass(cell)/K) (q_l(z_jl | cell) prod_{l' != l} A_l'(z_jl') - [concept(cell) = z_jl])."""
    from flint import arb

    n_c, L, K = inst.n_c, inst.L, inst.K
    nC = len(mass_b)
    one, zero = arb(1), arb(0)
    rt = st.rowtype_lc
    q = [[None] * nC for _ in range(L)]
    ce = zero
    for l in range(L):
        for cell in range(nC):
            a = st.cell_concept[cell]
            base = V[rt[l][a]][cell]
            e = [zero if c == a else (V[rt[l][c]][cell] - base).exp() for c in range(n_c)]
            off = sum(e, zero)
            e[a] = one
            den = 1 + off
            ce += mass_b[cell] * off.log1p()
            q[l][cell] = [x / den for x in e]
    ce = ce / n_c + (arb(st.m).log() if st.m > 1 else zero)
    A = [[sum((mass_b[cell] * q[l][cell][c] for cell in range(nC)), zero) for c in range(n_c)] for l in range(L)]
    mk = [mb / K for mb in mass_b]
    z = inst.latent_vars
    rows, row_u = [], []
    for j in range(K):
        zj = [int(c) for c in z[j]]
        vals = [A[l][zj[l]] for l in range(L)]
        pre = [one]
        for v in vals:
            pre.append(pre[-1] * v)
        suf = [one] * (L + 1)
        for l in range(L - 1, -1, -1):
            suf[l] = suf[l + 1] * vals[l]
        for l in range(L):
            ex, c = pre[l] * suf[l + 1], zj[l]
            ql = q[l]
            rows.append([mk[cell] * (ql[cell][c] * ex - (1 if st.cell_concept[cell] == c else 0)) for cell in range(nC)])
            row_u.append(rt[l][c])
    return ce, rows, row_u, [1] * len(rows)


def _fc_grouped_cost(L: int, nC: int):
    """(seconds per softmax entry, dense incidence products?) of :func:`_fc_grouped_balls` (model: FC_SECONDS_*)."""
    dense = FC_SECONDS_DENSE_INCIDENCE[0] + FC_SECONDS_DENSE_INCIDENCE[1] * L * nC
    cols = FC_SECONDS_COLUMN_INCIDENCE[0] + FC_SECONDS_COLUMN_INCIDENCE[1] * L
    return FC_SECONDS_PER_ENTRY + FC_SECONDS_PER_ENTRY_POSITION * L + min(dense, cols), dense <= cols


def _fc_grouped_balls(inst, st: _FCStructure, V, mass_b):
    """CE and Gc per class type: for each type tau and each sentence group (one cell per position, within the
    concepts of its latent; probability (1/K) prod_l mass(cell_l), exact rationals' balls) the scores of every type
    (sum over positions of the arb_mat columns V[rows of U, cell]), the softmax (types counted with multiplicity;
    stable log1p) and the gradient's first term (arb_mat product of FC_CHUNK weighted softmax columns with the
    groups' 0/1 incidence matrix); the label term is
    (mass(cell)/K) [concept(cell) = z_tl] (the marginal of a class's sentences at position l)."""
    import itertools

    from flint import arb, arb_mat

    L, K = inst.L, inst.K
    nC = len(mass_b)
    nLC = L * nC
    T_ = len(st.types)
    one, zero = arb(1), arb(0)
    mult = [n for _lat, _r, n in st.types]
    dup = any(n > 1 for n in mult)
    Vcol = [[arb_mat([[V[rts[l]][cell]] for _lat, rts, _n in st.types]) for cell in range(nC)] for l in range(L)]
    # gradient accumulation: dense products of FC_CHUNK weighted columns with the 0/1 incidence matrix (cost
    # ~ L cells per entry, C-level) while that is cheaper, else one T x 1 column added per (group, position)
    dense = _fc_grouped_cost(L, nC)[1]
    Gfirst = arb_mat(T_, nLC)
    Gcol = None if dense else [[arb_mat(T_, 1) for _ in range(nC)] for _ in range(L)]
    invK = exact(Fraction(1, K))
    ce = zero

    def groups():
        for tau, (lat, _rts, _n) in enumerate(st.types):
            for combo in itertools.product(*(st.cells_of[c] for c in lat)):
                yield tau, combo

    it = groups()
    while True:
        chunk = list(itertools.islice(it, FC_CHUNK))
        if not chunk:
            break
        cols = []
        for tau, combo in chunk:
            hm = Vcol[0][combo[0]]
            for l in range(1, L):
                hm = hm + Vcol[l][combo[l]]
            h = hm.entries()
            hy = h[tau]
            e = [(x - hy).exp() for x in h]
            e[tau] = zero
            off = sum(((x * n if n > 1 else x) for x, n in zip(e, mult)), arb(mult[tau] - 1)) if dup else sum(e, zero)
            e[tau] = one
            P = invK
            for c in combo:
                P = P * mass_b[c]
            wt = P * mult[tau] if mult[tau] > 1 else P
            ce += wt * off.log1p()
            coef = wt / (1 + off)
            if dense:
                cols.append([coef * x for x in e])
            else:
                wcol = arb_mat([[coef * x] for x in e])
                for l, c in enumerate(combo):
                    Gcol[l][c] = Gcol[l][c] + wcol
        if dense:
            C = len(chunk)
            B = [[0] * nLC for _ in range(C)]
            for col, (_tau, combo) in enumerate(chunk):
                for l, c in enumerate(combo):
                    B[col][l * nC + c] = 1
            Gfirst += arb_mat([list(r) for r in zip(*cols)]) * arb_mat(B)
    if not dense:
        Gfirst = arb_mat([[Gcol[l][cell][t, 0] for l in range(L) for cell in range(nC)] for t in range(T_)])
    mk = [mb / K for mb in mass_b]
    Gl = Gfirst.tolist()
    rows, row_u, row_w = [], [], []
    for t, (lat, rts, n_t) in enumerate(st.types):
        for l in range(L):
            g = Gl[t][l * nC:(l + 1) * nC]
            rows.append([g[cell] - (mk[cell] if st.cell_concept[cell] == lat[l] else 0) for cell in range(nC)])
            row_u.append(rts[l])
            row_w.append(n_t)
    return ce, rows, row_u, row_w


def _fc_float_check(inst, W, U, E, st: _FCStructure, ce, rows) -> dict:
    """Compare the structured CE and gradient (ball midpoints) with the float enumeration of every sentence
    (independent code: solvers.feature_collapse.FCProblem); NotCertified beyond FC_FLOAT_CHECK_RTOL. Skipped (and
    said so) when the float problem is beyond its own budget."""
    import numpy as np

    from solvers.feature_collapse import EPS, FCProblem
    from theory._validate import InputError

    try:
        prob = FCProblem(inst)
    except InputError as exc:
        return {"float_check": f"skipped: {exc}"}
    Z = U @ E.T
    ce_f, G_f = prob.ce(Z)
    Ind = np.zeros((inst.n_w, len(st.cell_words)))
    for c, ws in enumerate(st.cell_words):
        Ind[ws, c] = 1.0
    Gcf = G_f @ Ind
    Gm = np.array([[float(x.mid()) for x in row] for row in rows])
    if not st.product:
        idx = (st.type_of_class[:, None] * inst.L + np.arange(inst.L)[None, :]).reshape(-1)
        Gm = Gm[idx]
    ce_m = float(ce.mid())
    ce_dev = abs(ce_m - ce_f)
    ce_tol = FC_FLOAT_CHECK_RTOL * abs(ce_f) + prob.ce_roundoff(Z, ce_f)
    g_dev = float(np.abs(Gm - Gcf).max(initial=0.0))
    g_tol = FC_FLOAT_CHECK_RTOL * float(np.abs(Gcf).max(initial=0.0)) + 4 * prob.S * EPS
    if not (ce_dev <= ce_tol and g_dev <= g_tol):
        raise NotCertified(f"structured risk disagrees with the float enumeration (CE deviation {ce_dev:.3g}, "
                           f"tolerance {ce_tol:.3g}; gradient deviation {g_dev:.3g}, tolerance {g_tol:.3g})")
    return {"float_check": "agrees", "float_check_ce_deviation": ce_dev, "float_check_grad_deviation": g_dev}


def _fc_gram_upper(Gram, top: float):
    """A ball s with Gram <= s I for every matrix in the symmetric ball matrix ``Gram`` (so ||G||_2^2 <= s when
    Gram = G^T G or G G^T): s I - Gram verified positive definite by LDL^T, s just above the float estimate ``top``
    (relative steps 1e-14 .. 1e-6); NotCertified when none is verified."""
    from flint import arb

    n = len(Gram)
    for rel in (1e-14, 1e-12, 1e-10, 1e-8, 1e-6):
        s_try = arb(max(top, 0.0) * (1 + rel) + 1e-300)
        if ldl_positive_definite([[(s_try if i == j else 0) - Gram[i][j] for j in range(n)] for i in range(n)]):
            return s_try
    raise NotCertified("could not verify an upper bound on ||G||_2")


def _fc_lambda_min_lower(S, guess: float):
    """As :func:`lambda_min_lower` (LDL^T just below the float estimate, Gershgorin fallback) up to FC_DENSE_MAX."""
    from flint import arb

    k = len(S)
    gersh = None
    for i in range(k):
        r = S[i][i] - sum((abs(S[i][j]) for j in range(k) if j != i), arb(0))
        gersh = r if gersh is None else gersh.min(r)
    g_lo = arb(lower_float(gersh))
    if not math.isfinite(guess):
        return g_lo
    scale = max(max(abs(float(S[i][j].mid())) for i in range(k) for j in range(k)), 1e-300)
    for rel in (1e-13, 1e-10, 1e-7, 1e-4):
        sigma = guess - rel * scale * k
        if sigma <= float(g_lo.mid()):
            break
        sb = arb(sigma)
        if ldl_positive_definite([[S[i][j] - (sb if i == j else 0) for j in range(k)] for i in range(k)]):
            return sb
    return g_lo


def _layernorm_balls(rows, d: int):
    """LayerNorm without affine part or eps, in balls: sqrt(d) (w - mean(w)) / ||w - mean(w)|| per row (rows of
    balls); NotCertified when a centred row is not certainly nonzero."""
    from flint import arb

    out = []
    sd = arb(d).sqrt()
    for row in rows:
        mean = sum(row, arb(0)) / len(row)
        v = [x - mean for x in row]
        nrm = sum((x * x for x in v), arb(0)).sqrt()
        if not certainly_positive(nrm):
            raise NotCertified("LayerNorm undefined at the candidate")
        out.append([sd * x / nrm for x in v])
    return out


def feature_collapse_from_instance(params: dict, *, prec: int = PRECISION_BITS) -> RigorousBound:
    """Rigorous bracket for a feature-collapse instance (report dict ``instance``) at the claimed configuration
    (proofs_check.claims.feature_collapse.claimed_configuration builds it from theory), computed from the exact
    structure (docs/rigorous.md "Feature collapse"; the reference enumeration of every sentence is
    :func:`_feature_collapse_enumerated`):

    - cells: words of one concept with identical rows of W (doubles). The risk depends on a sentence only through
      its cells, so sentences are grouped by (class, cell at each position); a group's probability is the exact
      rational product of its cells' masses (sums of the words' rational masses), and the gradient's column of a
      word is its cell's column times mass(word)/mass(cell) (exact);
    - with every latent used m times and U_(j,l) a function of (l, z_jl): CE and the gradient factorise over
      positions (:func:`_fc_product_balls`, K L x cells work); otherwise one softmax per (class type, sentence group)
      (:func:`_fc_grouped_balls`), refused above an estimated FC_MAX_GROUPED_SECONDS;
    - the reduced gradient Gc (rows x cells) gives <G, Z> = <Gc, Zc>, ||G||_2 = ||Gc diag(rho)||_2 with
      rho_cell = ||(mass(w)/mass(cell))_w||_2 (verified by LDL^T of s I minus the smaller Gram matrix), and with
      LayerNorm the dual point nu_w = (mass(w)/mass(cell)) nu_cell, feasible when diag(nu_cell) - Gc^T Gc/(2 lambda)
      is PSD (Cauchy-Schwarz within a cell), dual value d sum(nu_cell);
    - the structured CE and gradient are checked against the float enumeration (NotCertified when they disagree).
    """
    import numpy as np
    from flint import arb, arb_mat

    tm = _Timer()
    inst = _fc_instance(params)
    K, L, s_c, d, n_c = inst.K, inst.L, inst.s_c, inst.d, inst.n_c
    W, U, E = _fc_candidate(inst)
    st = _fc_structure(inst, W, U)
    nC = len(st.cell_concept)
    n_rows = K * L if st.product else len(st.types) * L
    dense = nC if inst.layernorm else min(nC, n_rows)
    if dense > FC_DENSE_MAX:
        raise Unsupported(f"reduced dual matrix of size {dense} > {FC_DENSE_MAX} (dense LDL^T in balls; {nC} cells of "
                          f"words with identical embeddings, {n_rows} gradient rows)")
    if not st.product:
        entries = len(st.types) * st.sentence_groups
        est = entries * _fc_grouped_cost(L, nC)[0]
        if est > FC_MAX_GROUPED_SECONDS:
            raise Unsupported(f"{len(st.types)} class types x {st.sentence_groups} sentence groups = {entries} softmax "
                              f"entries in balls, about {est:.0f} s (limit {FC_MAX_GROUPED_SECONDS:.0f} s; the latents "
                              f"are not all n_c^L tuples equally often, so the risk does not factorise over positions)")
    mu = _fc_word_masses(inst, params)
    cell_mass = [sum((mu[w % s_c] for w in ws), Fraction(0)) for ws in st.cell_words]
    for a in range(n_c):
        if sum((cell_mass[c] for c in st.cells_of[a]), Fraction(0)) != 1:
            raise NotCertified(f"word masses of concept {a} do not sum to 1 exactly")
    # the exact masses are the instance's: each within 1e-12 of the float sum of its words' frequencies
    mu_f = inst.mu
    if max(abs(float(q) - math.fsum(mu_f[w % s_c] for w in ws)) for q, ws in zip(cell_mass, st.cell_words)) > 1e-12:
        raise NotCertified("cell masses from the frequencies do not match the instance's frequencies")
    rho2 = [sum(((mu[w % s_c] / q) ** 2 for w in ws), Fraction(0)) for q, ws in zip(cell_mass, st.cell_words)]
    tm.lap("float candidate and structure")
    with _Precision(prec):
        mass_b = [exact(q) for q in cell_mass]
        reps = [ws[0] for ws in st.cell_words]
        Wr = [[exact(x) for x in W[w]] for w in reps]
        Ec = _layernorm_balls(Wr, d) if inst.layernorm else Wr
        V = (arb_mat([[exact(x) for x in row] for row in st.urows]) * arb_mat(Ec).transpose()).tolist()
        ucount = np.bincount(st.rowtype.reshape(-1), minlength=len(st.urows))
        reg = (exact(inst.lw) / 2) * sum((len(ws) * sum((x * x for x in row), arb(0))
                                          for ws, row in zip(st.cell_words, Wr)), arb(0)) + \
            (exact(inst.lu) / 2) * sum((int(n) * sum((exact(x) * exact(x) for x in urow), arb(0))
                                        for n, urow in zip(ucount, st.urows)), arb(0))
        tm.lap("candidate in balls")
        if st.product:
            ce, rows, row_u, row_w = _fc_product_balls(inst, st, V, mass_b)
        else:
            ce, rows, row_u, row_w = _fc_grouped_balls(inst, st, V, mass_b)
        tm.lap("exact risk and gradient in balls")
        details = _fc_float_check(inst, W, U, E, st, ce, rows)
        tm.lap("float enumeration check")
        upper = ce + reg
        inner = sum(((sum((g * v for g, v in zip(row, V[u])), arb(0)) * (n if n > 1 else 1))
                     for row, u, n in zip(rows, row_u, row_w)), arb(0))
        lam = exact(inst.lam)
        wrow = [arb(n).sqrt() if n > 1 else None for n in row_w]
        if not inst.layernorm:
            rho = [exact(r).sqrt() for r in rho2]
            Gs = arb_mat([[g * r for g, r in zip(row, rho)] if w is None else [g * r * w for g, r in zip(row, rho)]
                          for row, w in zip(rows, wrow)])
            Gram = Gs.transpose() * Gs if nC <= len(rows) else Gs * Gs.transpose()
            Gl = Gram.tolist()
            Gf = np.array([[float(x.mid()) for x in row] for row in Gl])
            top = float(np.linalg.eigvalsh(0.5 * (Gf + Gf.T))[-1]) if Gf.size else 0.0
            gnorm = _fc_gram_upper(Gl, top).sqrt()
            R_ = arb(K).log() / lam
            lower = ce - inner - R_ * (gnorm - lam).max(arb(0))
            method = "ball-arithmetic nuclear-kkt, structured (||G||_2 verified by LDL^T of the reduced Gram matrix)"
            details.update(grad_spectral_norm_upper=upper_float(gnorm), nuclear_radius=upper_float(R_))
        else:
            Gs = arb_mat([row if w is None else [g * w for g in row] for row, w in zip(rows, wrow)])
            A = (Gs.transpose() * Gs).tolist()
            A = [[x / (2 * lam) for x in row] for row in A]
            Af = np.array([[float(x.mid()) for x in row] for row in A])
            Ef = np.array([[float(x.mid()) for x in row] for row in Ec])
            nu = np.einsum("ij,ij->i", Af @ Ef, Ef) / d
            nub = [exact(float(v)) for v in nu]
            Mm = [[(nub[i] if i == j else arb(0)) - A[i][j] for j in range(nC)] for i in range(nC)]
            Mf = np.diag(nu) - Af
            lmin = _fc_lambda_min_lower(Mm, float(np.linalg.eigvalsh(0.5 * (Mf + Mf.T))[0]))
            shift = arb(0) if lmin >= 0 else -lmin
            lower = ce - inner - d * (sum(nub, arb(0)) + nC * shift)
            method = "ball-arithmetic sdp-dual, structured (PSD shift verified by LDL^T on cells)"
            details.update(dual_shift=upper_float(shift) if not shift.is_zero() else 0.0)
        tm.lap("dual value")
    details.update(sentences=inst.n_sentences, cells=nC, path="product over positions" if st.product else
                   "grouped sentences", sentence_groups=st.sentence_groups,
                   class_types=K if st.product else len(st.types))
    return RigorousBound(lower, upper, method, prec, details, tm.steps)


# ---------------------------------------------------------------------------------------------------
# UFM with any loss and any counts, grouped by exchangeable classes (docs/ufm_general.md "Certificate",
# "Grouping exchangeable classes"; docs/rigorous.md "UFM, any loss, imbalanced counts")
# ---------------------------------------------------------------------------------------------------

#: Working precision of the LDL^T test of s^2 I - R^T R. At an optimum many singular values of the dual matrix
#: equal lam (one per active direction), so s^2 I - R^T R has a cluster of eigenvalues ~1e-12 s^2 and the radii
#: of a 128-bit elimination grow past it (measured: long tail k = 200, 84 groups, verified only at s = (1 + 1e-6)
#: x the float estimate at 128 bits, at 1 + 1e-12 at 256 bits, for ~0.1 s more). The input radii matter as
#: well, so ``ufm_general_grouped`` builds the whole dual point at (at least) this precision.
SPECTRAL_LDL_BITS = 256
#: Relative distances above the float estimate tried for s (each one LDL^T; ~0.05 s at m = 84).
SPECTRAL_RELS = (1e-13, 1e-12, 3e-12, 1e-11, 1e-10, 1e-9, 1e-7, 1e-5, 1e-3)


def _spectral_upper_dense(R, guess: float):
    """A ball s with ||R||_2 <= s for every matrix in the ball matrix R (m x m, m <= DENSE_MAX): s^2 I - R^T R
    verified positive definite by LDL^T, s^2 just above the float estimate ``guess`` (tried at increasing
    distances); when none is verified, the Frobenius norm in balls (a valid, looser bound)."""
    from flint import arb

    m = len(R)
    if m > DENSE_MAX:
        raise Unsupported(f"reduced dual matrix of size {m} > {DENSE_MAX} (dense LDL^T in balls)")
    import flint

    with _Precision(max(flint.ctx.prec, SPECTRAL_LDL_BITS)):
        RtR = [[sum((R[l][i] * R[l][j] for l in range(m)), arb(0)) for j in range(m)] for i in range(m)]
        g = max(float(guess), 1e-300)
        for rel in SPECTRAL_RELS:
            s = arb(g * (1.0 + rel))
            s2 = s * s
            S = [[(s2 if i == j else 0) - RtR[i][j] for j in range(m)] for i in range(m)]
            if ldl_positive_definite(S):
                return s
    # fallback (for example a matrix that is 0 up to round-off): ||R||_2 <= ||R||_F, in balls
    # (entrywise upper ends as exact doubles first: the square of a ball around 0 may contain negatives)
    fro = sum((arb(upper_float(abs(x))) ** 2 for row in R for x in row), arb(0)).sqrt()
    if not fro.is_finite():
        raise NotCertified("spectral norm of the reduced dual matrix not bounded (LDL^T and Frobenius in balls)")
    return arb(upper_float(fro))


#: Largest number of groups of exchangeable classes for ``ufm_general_grouped``. Up to DENSE_MAX the spectral norm
#: of the reduced m x m form is verified by LDL^T in balls; above, by the verified floating-point Cholesky of
#: ``solvers.verified_linalg`` (docs/rigorous.md "Large m: verified floating point"): O(m^3) BLAS/LAPACK work,
#: ~3 s at m = 2000 (the O(m^2) ball loops of the dual point and of the feasible value cost more).
VERIFIED_MAX = 2500


def ball_matrix_float_enclosure(B):
    """(Mid, Rad) float64 arrays with |x - Mid| <= Rad for every point x of every ball of the ball matrix B (list
    of lists of arb): Mid = the ball midpoints rounded to doubles, Rad = the ball radius (rounded up) + the
    rounding of the midpoint (< 2^-52 |Mid|, or < 2^-1022 in the subnormal range), evaluated upward."""
    import numpy as np

    Mid = np.array([[float(x) for x in row] for row in B], dtype=float)
    Rr = np.array([[float(x.rad()) for x in row] for row in B], dtype=float)
    if not (np.all(np.isfinite(Mid)) and np.all(np.isfinite(Rr))):
        raise NotCertified("a ball of the matrix is not finite (or outside the double range)")
    Rad = (Rr * (1.0 + 2.0 ** -50) + np.abs(Mid) * 2.0 ** -51) * (1.0 + 2.0 ** -50) + 2.0 ** -1021
    return Mid, Rad


def _spectral_upper_verified(R):
    """A ball (exact double) s with ||R||_2 <= s for every matrix in the ball matrix R of any size up to
    VERIFIED_MAX: ``solvers.verified_linalg.spectral_norm_upper`` on the float enclosure (Mid, Rad) of R (the
    verified floating-point Cholesky of s^2 I - Mid^T Mid after Rump 2006, plus ||Rad||_2). Returns (s, details)."""
    from solvers import verified_linalg as VL

    Mid, Rad = ball_matrix_float_enclosure(R)
    try:
        s, det = VL.spectral_norm_upper(Mid, Rad, return_details=True)
    except (ValueError, OverflowError) as exc:
        raise NotCertified(f"spectral norm of the reduced dual matrix not bounded: {exc}") from exc
    if not math.isfinite(s):
        raise NotCertified("spectral norm of the reduced dual matrix not bounded (verified floating point)")
    return exact(s), det


#: Dual variants of ``ufm_general_grouped`` with a bias penalty lb > 0 (docs/rigorous.md "UFM, any loss"):
#: "penalty": a_c = t g_c, the bias left free, the term -||t r||^2 / (2 lb) (tight at an optimum, where
#: r = -lb b); "projected": a_c = t (g_c - r), no penalty term (the bound of the lb = 0 problem, whose optimum is
#: <= the penalised one because (lb/2)||b||^2 >= 0). "best" computes both and keeps the larger lower bound.
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
                          f"regression has its own recipe (solvers.rigorous_regression)")
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


UFM_GENERAL_VARIANTS = ("best", "penalty", "projected")


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
        # per-slot gradients g[e][a] (e = m: own slot) as balls
        g = [[None] * m for _ in range(m + 1)]
        if softmax:
            qt, qo = exact(form.q_true), exact(form.q_other)
            w = [exact(form.weights[int(r)]) for r in layout.reps]
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
            P = [[None] * m for _ in range(m + 1)]
            for a in range(m):
                col = [exact(float(Zs[e, a])) for e in range(m + 1)]
                mx = max(float(Zs[e, a]) for e in range(m + 1) if e == m or Mu[e][a] > 0)
                mxb = exact(mx)
                ex = [(c - mxb).exp() for c in col]
                S = ex[m] + sum((Mu[e][a] * ex[e] for e in range(m) if Mu[e][a] > 0), zero)
                for e in range(m + 1):
                    P[e][a] = ex[e] / S
                    g[e][a] = w[a] * (P[e][a] - (qt if e == m else qo))
        else:
            for a in range(m):
                for e in range(m + 1):
                    g[e][a] = exact(float(Zs[e, a])) - (1 if e == m else 0)
        # bias gradient per class of group e: r_e = (1/N)[sum_a n_a (m_a - [a == e]) g[e][a] + n_e g[m][e]]
        r = []
        for e in range(m):
            acc = cnt[e] * g[m][e]
            for a in range(m):
                if Mu[e][a]:
                    acc += cnt[a] * Mu[e][a] * g[e][a] if a == e else cnt[a] * sz[a] * g[e][a]
            r.append(acc / N)
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

        def bound_of(name):
            """(lower ball, t, sigma ball, penalty ball or None) of one variant; NotCertified on failure."""
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
