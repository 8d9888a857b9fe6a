"""Deep UFM: the objective (defined once), its gradient, multi-start solves, certificates (docs/deep_ufm.md).

- :func:`certify_scalar` / :func:`certify_linear_mse`: the deep linear MSE optimum, proven in ball arithmetic
  (python-flint arb when installed, else intervals with exact rational endpoints, :mod:`solvers.rational_interval`,
  standard library only): each scalar problem min_{s >= 0} phi(s) is decided from the explicit root structure of
  its stationarity polynomial q (sign of q at its only positive critical point t*, the larger root isolated
  by sign changes proven in arb, phi enclosed on the isolating interval, compared with phi(0)).
- :class:`DeepModel`: objective and analytic gradient of the full model, on columns with multiplicities
  (every sample its own column, or one column per class with multiplicity n_c: a class-collapsed point).
- :func:`multistart`: L-BFGS (scipy) from random and structured starts; work budget (evaluations) checked
  before any work.
- :func:`exact_mse_value`: the MSE objective of a class-collapsed point evaluated exactly in rational
  arithmetic (python-flint fmpq when installed, else Python integers with a power-of-two scale and a Fraction):
  the value of a witness is a proof, not a float.

Returns data (Solution, Certificate, dicts), never verdicts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers.common import Certificate, Solution
from solvers.rational_interval import RInterval
from theory import _work as budgets
from theory import deep_ufm as T
from theory._validate import InputError

#: working precision (bits) of the ball-arithmetic certificates; the floats of the instance are exact in it
ARB_PREC = 128
#: the larger root of q is isolated to a relative width of 2^-90 (well inside ARB_PREC)
ROOT_REL_WIDTH = 2.0 ** -90
#: refuse a multi-start solve above this many objective evaluations x flops per evaluation (work, not seconds;
#: about 60 s of a loaded 2-core machine at the measured ~2 GFLOP/s for these small products plus overhead)
WORK_LIMIT_FLOP = 2e11
#: seconds per counted flop at that measured ~2 GFLOP/s, only to state the seconds here (no decision uses it)
SECONDS_PER_FLOP = 5e-10
#: per-evaluation Python overhead expressed in flops for the budget (measured ~40 us per evaluation)
EVAL_OVERHEAD_FLOP = 8e4


def _flint():
    try:
        import flint
    except ImportError:  # pragma: no cover - the callers take the standard-library path without it
        raise InputError("this path needs python-flint (pip install python-flint)") from None
    return flint


def _flint_or_none():
    """python-flint when it can be imported (looked up at every call, so a test can hide it), else None."""
    try:
        import flint
    except ImportError:
        return None
    return flint


#: the arithmetic that proves the certificates, as said in the evidence
ARB_ARITHMETIC = "python-flint arb"
RATIONAL_ARITHMETIC = "exact rationals (fractions)"


def arithmetic() -> str:
    """Which arithmetic proves the certificates here: python-flint's arb balls when python-flint is installed,
    else intervals with exact rational endpoints (:mod:`solvers.rational_interval`, standard library only)."""
    return ARB_ARITHMETIC if _flint_or_none() is not None else RATIONAL_ARITHMETIC


class _prec:
    def __init__(self, bits: int):
        self.bits = bits

    def __enter__(self):
        fl = _flint()
        self.old = fl.ctx.prec
        fl.ctx.prec = self.bits

    def __exit__(self, *exc):
        _flint().ctx.prec = self.old


class _ArbBackend:
    """python-flint arb balls at ARB_PREC bits (the numbers of every release before the rational fallback)."""

    name = ARB_ARITHMETIC

    def __init__(self, fl):
        self.fl = fl

    def prec(self):
        return _prec(ARB_PREC)

    def num(self, x):
        return self.fl.arb(x)

    def ball(self, mid, rad):
        return self.fl.arb(mid, rad)

    def root(self, x, n: int):
        return x ** (self.fl.arb(1) / n)

    def hull(self, a, b):
        ball = (a + b) / 2
        return self.fl.arb(ball.mid(), (b - a).upper() / 2 + ball.rad())

    def consts(self, lams, L: int, count: int, spread: int):
        arb = self.fl.arb
        logp = sum((arb(v).log() for v in lams), arb(0))
        if spread > 1:
            logp = logp - (L - 1) * arb(spread).log()
        C = arb(L + 1) / 2 * (logp / (L + 1)).exp()
        return C, arb(count).sqrt()


class _RationalBackend:
    """Intervals with exact Fraction endpoints (standard library): +, -, *, / and integer powers exact (outward
    rounding only to bound the integers' sizes), the only roots enclosed by integer n-th roots checked by exact
    powers. C = (L+1)/2 (prod lambda / K^{L-1})^{1/(L+1)} is the (L+1)-th root of the exact rational product (the
    floats are dyadic rationals), no log/exp."""

    name = RATIONAL_ARITHMETIC

    def prec(self):
        import contextlib

        return contextlib.nullcontext()

    def num(self, x):
        return RInterval(x)

    def ball(self, mid, rad):
        return RInterval.mid_rad(mid, rad)

    def root(self, x, n: int):
        return RInterval.root(x, n)

    def hull(self, a, b):
        return RInterval(min(a.lo, b.lo), max(a.hi, b.hi))

    def consts(self, lams, L: int, count: int, spread: int):
        P = Fraction(1)
        for v in lams:
            P *= Fraction(*float(v).as_integer_ratio())
        if spread > 1:
            P /= Fraction(spread) ** (L - 1)
        C = RInterval(Fraction(L + 1, 2)) * RInterval.root(P, L + 1)
        return C, RInterval.root(count, 2)


def _backend():
    fl = _flint_or_none()
    return _ArbBackend(fl) if fl is not None else _RationalBackend()


def _down(x) -> float:
    """A float <= every point of the ball or interval x."""
    v = float(x.lower())
    return float(np.nextafter(v, -np.inf))


def _up(x) -> float:
    v = float(x.upper())
    return float(np.nextafter(v, np.inf))


# ------------------------------------------------------------------------------------------
# certified scalar problems (deep linear MSE)
# ------------------------------------------------------------------------------------------

@dataclass
class ScalarCertificate:
    """min_{s>=0} phi(s) enclosed in [lower, upper]; ``branch``: "zero" (s = 0 is the unique minimiser),
    "positive" (the unique minimiser is s_plus > 0), "undecided" (the two candidates' values overlap);
    ``arithmetic``: what proved it (:func:`arithmetic`)."""

    count: int
    lower: float
    upper: float
    branch: str
    s_plus: tuple | None  # enclosure (lo, hi) of the positive local minimiser
    value_plus: tuple | None  # enclosure of phi(s_plus)
    value_zero: tuple
    how: str
    arithmetic: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def certify_scalar(count: int, N: int, lams, L: int, spread: int = 1) -> ScalarCertificate:
    """Proven global minimum of phi(s) = (s - y)^2/(2N) + C s^{2/(L+1)}, y = sqrt(count), over s >= 0
    (``spread`` = K > 1: with C / K^{(L-1)/(L+1)} in place of C, for :func:`certify_relu_chain_bound`).

    L = 1: convex (soft threshold s = max(0, y - N C)). L >= 2, s = t^{L+1}: dphi/dt = (t/N) q(t) with
    q(t) = (L+1) t^{2L} - (L+1) y t^{L-1} + 2NC, q(0) > 0, and q' vanishes on t > 0 only at t*^{L+1} =
    (L-1) y/(2L) (theory.deep_ufm.derivation_qmin). If q(t*) > 0 (proven), phi increases on t > 0 and s = 0 is
    the unique minimiser. If q(t*) < 0, q has exactly two positive roots t1 < t* < t2 and phi's local minima are
    t = 0 and t2; t2 is isolated in [a, b] with q(a) < 0 < q(b) proven, phi(t2) enclosed by phi([a, b]) (phi is
    monotone on [t*, inf) near t2 only up to the enclosure width, so the interval evaluation is used).

    Proven in python-flint arb balls when python-flint is installed, else in intervals with exact rational
    endpoints (:mod:`solvers.rational_interval`; same steps, same branches): ``arithmetic`` says which.
    """
    B = _backend()
    sc = _certify_scalar(B, count, N, lams, L, spread)
    sc.arithmetic = B.name
    return sc


def _certify_scalar(B, count: int, N: int, lams, L: int, spread: int) -> ScalarCertificate:
    with B.prec():
        C, y = B.consts(lams, L, count, spread)
        Nn = B.num(N)
        v0 = y * y / (2 * Nn)
        vz = (_down(v0), _up(v0))
        if L == 1:
            s = y - Nn * C
            if s < 0:
                return ScalarCertificate(count, vz[0], vz[1], "zero", None, None, vz,
                                         "convex (L = 1): y - N C < 0 proven, soft threshold at 0")
            if s > 0:
                val = (s - y) ** 2 / (2 * Nn) + C * s
                return ScalarCertificate(count, _down(val), _up(val), "positive", (_down(s), _up(s)),
                                         (_down(val), _up(val)), vz, "convex (L = 1): soft threshold y - N C > 0")
            return ScalarCertificate(count, min(vz[0], 0.0), vz[1], "undecided", None, None, vz,
                                     "convex (L = 1): y - N C not separated from 0")

        def q(t):
            return (L + 1) * t ** (2 * L) - (L + 1) * y * t ** (L - 1) + 2 * Nn * C

        def ph(t):
            return (t ** (L + 1) - y) ** 2 / (2 * Nn) + C * t * t

        tstar = B.root((L - 1) * y / (2 * L), L + 1)
        qs = q(tstar)
        if qs > 0:
            return ScalarCertificate(count, vz[0], vz[1], "zero", None, None, vz,
                                     "q(t*) > 0 proven: phi increasing on s > 0, s = 0 the unique minimiser")
        if not qs < 0:  # a double root within the ball: bound phi on a fine interval cover instead
            return _cover_bound(B, count, N, lams, L, vz, "q(t*) not separated from 0 (near the threshold)",
                                spread=spread)
        # isolate t2 in (t*, T], T = y^{1/(L+1)}, q(T) = 2 N C > 0; q increasing on [t*, inf)
        lo = float(tstar.mid())
        hi = float(B.root(y, L + 1).upper()) * (1 + 1e-15)
        qf = lambda t: (L + 1) * t ** (2 * L) - (L + 1) * math.sqrt(count) * t ** (L - 1) + 2.0 * N * float(C.mid())
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if qf(mid) < 0:
                lo = mid
            else:
                hi = mid
        t2 = 0.5 * (lo + hi)
        # widen until the signs are proven (the float root may be a few ulps off)
        a, b = None, None
        for k in range(0, 60):
            w = t2 * 2.0 ** (-50 + k)
            aa, bb = B.num(t2) - B.num(w), B.num(t2) + B.num(w)
            if aa > tstar and q(aa) < 0 and q(bb) > 0:
                a, b = aa, bb
                break
        if a is None:
            return _cover_bound(B, count, N, lams, L, vz, "could not isolate the larger root of q", spread=spread)
        ball = B.hull(a, b)
        vp = ph(ball)
        sp_ = ball ** (L + 1)
        vpe = (_down(vp), _up(vp))
        spe = (_down(sp_), _up(sp_))
        if vp < v0:
            return ScalarCertificate(count, vpe[0], vpe[1], "positive", spe, vpe, vz,
                                     "two positive roots of q (q(t*) < 0); phi(t2) < phi(0) proven")
        if vp > v0:
            return ScalarCertificate(count, vz[0], vz[1], "zero", spe, vpe, vz,
                                     "two positive roots of q (q(t*) < 0); phi(t2) > phi(0) proven")
        return ScalarCertificate(count, min(vz[0], vpe[0]), min(vz[1], vpe[1]), "undecided", spe, vpe, vz,
                                 "phi(t2) and phi(0) not separated (at the rank threshold)")


def _cover_bound(B, count, N, lams, L, vz, why: str, pieces: int = 4000, spread: int = 1) -> ScalarCertificate:
    """Interval branch over a cover of t in [0, y^{1/(L+1)}] (the minimiser lies there: for s > y both terms
    increase): a proven lower bound, not tight; the branch stays undecided."""
    with B.prec():
        C, y = B.consts(lams, L, count, spread)
        Nn = B.num(N)
        T_ = float(B.root(y, L + 1).upper()) * (1 + 1e-12)
        lo = None
        for i in range(pieces):
            a, b = T_ * i / pieces, T_ * (i + 1) / pieces
            t = B.ball((a + b) / 2, (b - a) / 2 * (1 + 1e-12))
            v = (t ** (L + 1) - y) ** 2 / (2 * Nn) + C * t * t
            d = _down(v)
            lo = d if lo is None else min(lo, d)
    return ScalarCertificate(count, min(lo, vz[0]), vz[1], "undecided", None, None, vz, why + "; interval cover bound")


def certify_linear_mse(inst: T.DeepUFMInstance) -> Certificate:
    """Proven enclosure of the deep linear MSE optimum (docs/deep_ufm.md, "Reduction"): the product has singular
    values s_c aligned with Y (von Neumann), at most r = min(D, K) of them nonzero, the largest counts first.
    ``details``: rank (of every minimiser, when proven), per-count scalar certificates."""
    t0 = time.perf_counter()
    L, N = inst.layers, inst.N
    counts = sorted(inst.counts, reverse=True)
    rmax = T.rank_limit(inst)
    certs: dict[int, ScalarCertificate] = {}
    lo = up = 0.0
    lo_terms, up_terms = [], []
    rank_lo = rank_hi = 0
    for i, c in enumerate(counts):
        if i < rmax:
            sc = certs.get(c) or certs.setdefault(c, certify_scalar(c, N, inst.lams, L))
            lo_terms.append(sc.lower)
            up_terms.append(sc.upper)
            rank_lo += sc.branch == "positive"
            rank_hi += sc.branch != "zero"
        else:
            v = c / (2.0 * N)  # within 1.1e-16 relative; the products below round once more
            lo_terms.append(v * (1 - 4e-16))
            up_terms.append(v * (1 + 4e-16))
    lo = math.fsum(lo_terms)
    up = math.fsum(up_terms)
    n_terms = len(lo_terms)
    # fsum of floats is correctly rounded: one relative ulp per sum plus the terms' own outward rounding
    lo = float(np.nextafter(lo - abs(lo) * 2.3e-16 * 2, -np.inf))
    up = float(np.nextafter(up + abs(up) * 2.3e-16 * 2, np.inf))
    rank = rank_lo if rank_lo == rank_hi else None
    how = arithmetic()
    method = ("scalar reduction + arb root isolation" if how == ARB_ARITHMETIC
              else "scalar reduction + root isolation in exact rationals (fractions)")
    return Certificate(lo, up, method,
                       {"rank": rank, "arithmetic": how, "rank_range": [rank_lo, rank_hi], "rank_limit": rmax, "terms": n_terms,
                        "scalar": {str(c): sc.to_dict() for c, sc in certs.items()},
                        "seconds": time.perf_counter() - t0})


def certify_dnc(inst: T.DeepUFMInstance) -> tuple[float, float] | None:
    """Enclosure of the best DNC value K phi(s_+) (balanced, D >= K); None where phi has no positive local
    minimiser or it could not be isolated."""
    if not inst.balanced or inst.width < inst.K:
        return None
    sc = certify_scalar(inst.n, inst.N, inst.lams, inst.layers)
    if sc.value_plus is None:
        return None
    K = inst.K
    return (float(np.nextafter(sc.value_plus[0] * K, -np.inf)), float(np.nextafter(sc.value_plus[1] * K, np.inf)))


def certify_relu_chain_bound(inst: T.DeepUFMInstance) -> dict | None:
    """A proven lower bound of the deep UFM objective with ReLU (or identity) between the layers, MSE, balanced
    classes, at **every** point of the full model (docs/deep_ufm.md, "A proven lower bound for ReLU"):

    ||O||_* <= ||W_L||_F ||A_{L-1}||_F (Hoelder for Schatten norms) and ||A_l||_F = ||relu(W_l A_{l-1})||_F <=
    ||W_l||_F ||A_{l-1}||_F (ReLU is 1-Lipschitz with relu(0) = 0; A_0 = H), so by AM-GM the regulariser is
    >= C ||O||_*^{2/(L+1)}; von Neumann's trace inequality and the equal split of a fixed nuclear norm t over the
    K singular values give ||O - Y||_F^2 >= K (t/K - sqrt n)^2. With sigma = t/K the objective is >= K min_sigma
    (sigma - sqrt n)^2/(2N) + C K^{-(L-1)/(L+1)} sigma^{2/(L+1)}: the scalar problem with a smaller constant,
    certified by :func:`certify_scalar` (arb balls or exact rational intervals). For L = 1 it is the linear optimum; for L >= 2 and
    K >= 2 it lies strictly below the best DNC value (C is divided by K^{(L-1)/(L+1)} > 1), so it never closes
    the gap to DNC by itself. None for unbalanced classes or another loss."""
    if inst.loss != "mse" or not inst.balanced:
        return None
    K = inst.K
    sc = certify_scalar(inst.n, inst.N, inst.lams, inst.layers, spread=K)
    lower = float(np.nextafter(sc.lower * K, -np.inf))
    return {"lower_bound": lower, "scalar": sc.to_dict(), "spread": K, "arithmetic": sc.arithmetic,
            "method": "nuclear-Frobenius chain (ReLU 1-Lipschitz) + von Neumann, scalar problem in "
                      + ("ball arithmetic" if sc.arithmetic == ARB_ARITHMETIC else "exact rational intervals")}


def certify_relu_two_column_bound(inst: T.DeepUFMInstance) -> dict | None:
    """Two samples, one ReLU (N = 2, L = 2, MSE): a proven lower bound equal to the deep **linear** optimum's
    (docs/deep_ufm.md, "Two samples and one ReLU"). Lemma: ||relu(Z)||_* <= ||Z||_* for every D x 2 matrix Z
    (proved there; false for three columns). Then (lambda_1/2)||W_1||^2 + (lambda_H/2)||H||^2 >= g ||W_1 H||_* >=
    g ||relu(W_1 H)||_*, g = sqrt(lambda_1 lambda_H), and Hoelder (||W_2 A||_{S_{2/3}} <= ||W_2||_F ||A||_*) with
    AM-GM give the regulariser >= C sum_i s_i(O)^{2/3}, the bound of the linear model, whose certified lower
    bound (:func:`certify_linear_mse` of the same instance with identity activations) therefore holds for the
    ReLU model. None outside N = 2, L = 2, MSE."""
    if inst.loss != "mse" or inst.layers != 2 or inst.N != 2:
        return None
    lin = T.DeepUFMInstance(2, "linear", "mse", inst.counts, inst.width, inst.lams)
    cert = certify_linear_mse(lin)
    return {"lower_bound": cert.lower_bound, "linear_certificate": cert.to_dict(),
            "method": "two-column lemma ||relu(Z)||_* <= ||Z||_* + the deep linear scalar reduction"}


def certify_relu_two_class_bound(inst: T.DeepUFMInstance) -> dict | None:
    """Two classes (K = 2, MSE; any depth L, any class counts, any width D): a proven lower bound of the ReLU
    model equal to the deep **linear** optimum's (docs/deep_ufm.md, "Two classes, any depth"), and it is attained
    (the canonical nonnegative realisation of the linear optimum is a ReLU point with the same value), so the ReLU
    optimum equals the linear one. The proof maps every ReLU point to a linear point of the same width with the
    same output and no larger objective: (1) for fixed weights the objective is a sum over samples, so giving
    every sample of a class the best feature vector of its class does not increase it (two distinct columns);
    (2) for l >= 2 the input A_{l-1} >= 0 has two columns, so G = A^T A has G_12 >= 0 and G^{-1} has a
    nonpositive off-diagonal, and row by row relu(r)^T G^{-1} relu(r) <= r^T G^{-1} r: the linear map
    W'_l = relu(W_l A) A^+ satisfies W'_l A = relu(W_l A) and ||W'_l||_F <= ||W_l||_F (rank-1 and zero inputs
    separately); (3) the first layer: the two-column lemma ||relu(Z)||_* <= ||Z||_* with Z = W_1 H N^{1/2} and the
    balanced factorisation. The certified lower bound is :func:`certify_linear_mse` of the identity-activation
    twin. None outside K = 2, MSE."""
    if inst.loss != "mse" or inst.K != 2:
        return None
    lin = T.DeepUFMInstance(inst.layers, "linear", "mse", inst.counts, inst.width, inst.lams)
    cert = certify_linear_mse(lin)
    return {"lower_bound": cert.lower_bound, "upper": cert.upper, "linear_certificate": cert.to_dict(),
            "method": "two classes: class collapse + nonnegative two-column layers + two-column lemma -> the deep "
                      "linear scalar reduction"}


# ------------------------------------------------------------------------------------------
# the model (the one definition of the objective)
# ------------------------------------------------------------------------------------------

class DeepModel:
    """Objective and gradient on columns: ``labels[j]`` the class of column j, ``mult[j]`` its multiplicity
    (1: a sample; n_c: a class-collapsed column). Parameters packed as [H (D x m), W_1, ..., W_L]."""

    def __init__(self, inst: T.DeepUFMInstance, collapsed: bool = True):
        self.inst = inst
        K, D, L = inst.K, inst.width, inst.layers
        if collapsed:
            self.labels = np.arange(K)
            self.mult = np.asarray(inst.counts, dtype=float)
        else:
            self.labels = np.repeat(np.arange(K), inst.counts)
            self.mult = np.ones(inst.N)
        self.m = len(self.labels)
        self.shapes = [(D, self.m)] + [(D, D)] * (L - 1) + [(K, D)]
        self.sizes = [a * b for a, b in self.shapes]
        self.nvar = sum(self.sizes)
        self.Y = np.zeros((K, self.m))
        self.Y[self.labels, np.arange(self.m)] = 1.0
        self.relu = inst.activation == "relu"
        self.evals = 0

    def flops(self) -> float:
        return 6.0 * sum(a * b for a, b in self.shapes[1:]) * self.m + EVAL_OVERHEAD_FLOP

    def unpack(self, x):
        out, i = [], 0
        for (a, b), s in zip(self.shapes, self.sizes):
            out.append(x[i:i + s].reshape(a, b))
            i += s
        return out[0], out[1:]

    @staticmethod
    def pack(H, Ws) -> np.ndarray:
        return np.concatenate([np.asarray(H, float).ravel()] + [np.asarray(W, float).ravel() for W in Ws])

    def forward(self, H, Ws):
        """Per-layer inputs [H_1, ..., H_L] and pre-activations, and the output."""
        hs, zs, h = [H], [], H
        for l in range(len(Ws) - 1):
            z = Ws[l] @ h
            zs.append(z)
            h = np.maximum(z, 0.0) if self.relu else z
            hs.append(h)
        return hs, zs, Ws[-1] @ h

    def value_grad(self, x):
        self.evals += 1
        inst = self.inst
        H, Ws = self.unpack(x)
        lh, lw = inst.lams[0], inst.lams[1:]
        hs, zs, O = self.forward(H, Ws)
        N = inst.N
        w = self.mult
        if inst.loss == "mse":
            R = O - self.Y
            f = 0.5 / N * float(np.sum(w * np.sum(R * R, axis=0)))
            G = R * (w / N)
        else:
            Om = O - O.max(axis=0, keepdims=True)
            lse = np.log(np.sum(np.exp(Om), axis=0))
            f = float(np.sum(w * (lse - Om[self.labels, np.arange(self.m)]))) / N
            P = np.exp(Om - lse)
            G = (P - self.Y) * (w / N)
        f += 0.5 * lh * float(np.sum(w * np.sum(H * H, axis=0))) + sum(0.5 * lw[l] * float(np.sum(W * W))
                                                                        for l, W in enumerate(Ws))
        L = len(Ws)
        gW = [None] * L
        gW[L - 1] = G @ hs[L - 1].T + lw[L - 1] * Ws[L - 1]
        g = Ws[L - 1].T @ G
        for l in range(L - 2, -1, -1):
            if self.relu:
                g = g * (zs[l] > 0)
            gW[l] = g @ hs[l].T + lw[l] * Ws[l]
            g = Ws[l].T @ g
        gH = g + lh * H * w
        return f, self.pack(gH, gW)

    def value(self, x) -> float:
        return self.value_grad(x)[0]


class TorchObjective:
    """The same objective as :meth:`DeepModel.value_grad`, by torch autograd on ``device`` (``dtype``) for wide
    models on a GPU. The optimiser stays in numpy (solvers.lbfgs); every returned point is re-evaluated by the
    float64 numpy objective, so nothing is judged in the torch precision."""

    def __init__(self, model: DeepModel, device: str = "cpu", dtype: str = "float64"):
        import torch

        self.torch, self.model = torch, model
        self.dev, self.dt = device, getattr(torch, dtype)
        self.Y = torch.tensor(model.Y, device=device, dtype=self.dt)
        self.w = torch.tensor(model.mult, device=device, dtype=self.dt)
        self.labels = torch.tensor(model.labels, device=device, dtype=torch.long)

    def value_grad(self, x):
        torch, m, inst = self.torch, self.model, self.model.inst
        m.evals += 1
        t = torch.tensor(np.asarray(x), device=self.dev, dtype=self.dt, requires_grad=True)
        parts, i = [], 0
        for (a, b), sz in zip(m.shapes, m.sizes):
            parts.append(t[i:i + sz].reshape(a, b))
            i += sz
        H, Ws = parts[0], parts[1:]
        h = H
        for W in Ws[:-1]:
            h = W @ h
            if m.relu:
                h = torch.relu(h)
        O = Ws[-1] @ h
        N = inst.N
        if inst.loss == "mse":
            f = 0.5 / N * torch.sum(self.w * torch.sum((O - self.Y) ** 2, dim=0))
        else:
            lse = torch.logsumexp(O, dim=0)
            f = torch.sum(self.w * (lse - O[self.labels, torch.arange(m.m, device=self.dev)])) / N
        f = f + 0.5 * inst.lams[0] * torch.sum(self.w * torch.sum(H * H, dim=0))
        for l, W in enumerate(Ws):
            f = f + 0.5 * inst.lams[l + 1] * torch.sum(W * W)
        f.backward()
        return float(f.detach()), t.grad.detach().to("cpu", torch.float64).numpy()


def linear_point(inst: T.DeepUFMInstance, svals, *, collapsed: bool = False, seed: int | None = 0):
    """Balanced factors whose product W_L...W_1 H has singular value svals[i] on the i-th largest class (aligned
    with Y), rotated by random orthogonal matrices between layers (the objective is invariant; the rotation makes
    the evaluation an independent computation, not the scalar formula). Needs svals nonzero on <= D classes."""
    K, D, L = inst.K, inst.width, inst.layers
    order = np.argsort(-np.asarray(inst.counts), kind="stable")
    s = np.zeros(K)
    s[order[:len(svals)]] = np.asarray(svals, float)[:K]
    pos = np.flatnonzero(s > 0)
    if len(pos) > D:
        raise InputError(f"the point needs width >= {len(pos)} (got {D})")
    lams = np.asarray(inst.lams)
    g = float(np.exp(np.sum(np.log(lams))))
    a = np.zeros((L + 1, K))
    for c in pos:
        base = (s[c] ** 2 * g) ** (1.0 / (2 * (L + 1)))
        a[:, c] = base / np.sqrt(lams)
    E = np.zeros((D, K))
    for j, c in enumerate(pos):
        E[j, c] = 1.0
    model = DeepModel(inst, collapsed=collapsed)
    # Y = sum_c sqrt(n_c) e_c u_c^T with u_c the normalised indicator of class c; a collapsed column stands for
    # n_c equal samples, each the per-sample column
    U = (np.zeros((K, model.m)) + (model.labels[None, :] == np.arange(K)[:, None])) / \
        np.sqrt(np.asarray(inst.counts, float))[:, None]
    rng = np.random.default_rng(seed)

    def orth(k):
        if seed is None:
            return np.eye(k)
        q, r = np.linalg.qr(rng.standard_normal((k, k)))
        return q * np.sign(np.diag(r))

    Q = [orth(D) for _ in range(L)]
    H = Q[0] @ E @ np.diag(a[0]) @ U
    Ws = []
    for l in range(1, L):
        Ws.append(Q[l] @ E @ np.diag(a[l]) @ E.T @ Q[l - 1].T)
    Ws.append(np.diag(a[L]) @ E.T @ Q[L - 1].T)
    return model, model.pack(H, Ws)


def two_class_linear_point(model: DeepModel, x):
    """The construction in the proof of :func:`certify_relu_two_class_bound` (docs/deep_ufm.md, "Two classes, any
    depth"), run on a point ``x`` of the ReLU model ``model`` (K = 2, MSE, full or collapsed): a point of the
    identity-activation twin (same width, one column per sample) with the same output on the collapsed features
    and, by inequalities (1)-(4) there, no larger objective. Steps: (1) every sample of class c gets the feature
    vector of its class with the smallest per-sample term; (2) layers l = 2..L-1 become W'_l = A_l A_{l-1}^+ on the
    two distinct columns; (3) H and W_1 become the balanced factorisation of A_1 N^{1/2}; W_L is kept. Returns
    (linear model, x). For tests of the proof: it never computes a bound."""
    inst = model.inst
    if inst.K != 2 or inst.loss != "mse":
        raise InputError("two_class_linear_point needs K = 2 and MSE")
    L, D, N = inst.layers, inst.width, inst.N
    lin_inst = T.DeepUFMInstance(L, "linear", "mse", inst.counts, D, inst.lams)
    lin = DeepModel(lin_inst, collapsed=False)
    H, Ws = model.unpack(np.asarray(x, float))
    _, _, O = model.forward(H, Ws)
    per = 0.5 / N * np.sum((O - model.Y) ** 2, axis=0) + 0.5 * inst.lams[0] * np.sum(H * H, axis=0)
    Hb = np.stack([H[:, np.flatnonzero(model.labels == c)[np.argmin(per[model.labels == c])]] for c in (0, 1)], 1)
    if L == 1:
        return lin, lin.pack(Hb[:, lin.labels], Ws)
    A = [Hb]
    for W in Ws[:-1]:
        A.append(np.maximum(W @ A[-1], 0.0))
    n_half = np.sqrt(np.asarray(inst.counts, float))
    U, sv, Vt = np.linalg.svd(A[1] * n_half, full_matrices=False)  # A_1 N^{1/2} = U diag(sv) Vt
    r = len(sv)
    c = (inst.lams[1] / inst.lams[0]) ** 0.25
    E = np.eye(D)[:, :r]
    H1 = c * (E * np.sqrt(sv)) @ Vt / n_half  # H'' N^{1/2} = c E S^{1/2} V^T
    W1 = (U * np.sqrt(sv)) @ E.T / c
    new_Ws = [W1] + [A[l] @ np.linalg.pinv(A[l - 1]) for l in range(2, L)] + [Ws[-1]]
    return lin, lin.pack(H1[:, lin.labels], new_Ws)


def dnc_point(inst: T.DeepUFMInstance, s_plus: float):
    """The DNC point at scale s_+ (class-collapsed, orthogonal nonnegative class means at every layer, no
    rotation: ReLU is inactive on it). Its value is K phi(s_+) for ReLU and linear alike."""
    model, x = linear_point(inst, [s_plus] * inst.K, collapsed=True, seed=None)
    return model, x


# ------------------------------------------------------------------------------------------
# multi-start local solves
# ------------------------------------------------------------------------------------------

def estimate_work(model: DeepModel, starts: int, max_evals: int) -> float:
    return float(starts) * max_evals * model.flops()


def work_text(work: float, limit: float) -> str:
    """The work statement of a refusal: counted flops, the limit in flops, and the seconds here (informative)."""
    return budgets.work_text(work, limit, "flop", seconds_per_unit=SECONDS_PER_FLOP)


def check_budget(model: DeepModel, starts: int, max_evals: int, limit: float = WORK_LIMIT_FLOP) -> float:
    """Refuse (InputError) a multi-start solve whose counted work (starts x evaluations x flops per evaluation)
    exceeds ``limit`` flops: a count from the sizes, the same on every machine."""
    w = estimate_work(model, starts, max_evals)
    if w > limit:
        raise InputError(f"work budget: {starts} starts x {max_evals} evaluations x {model.flops():.3g} flop: "
                         f"{work_text(w, limit)}; fewer --starts or --max-evals or a smaller instance")
    return w


@dataclass
class _Res:
    x: np.ndarray
    nfev: int
    success: bool


def _lbfgs(model: DeepModel, x0, max_evals: int, gtol: float = 1e-9, fun=None):
    """solvers.lbfgs (numpy only: scipy's Fortran L-BFGS-B brings its own threaded BLAS, measured 15 ms per
    iteration on the loaded 2-core machine for 700 variables). ``max_evals`` bounds the work."""
    from solvers import lbfgs

    res = lbfgs.minimize(fun or model.value_grad, x0, gtol=gtol, maxiter=max_evals, maxfun=max_evals, memory=20)
    return _Res(res.x, int(res.nfev), bool(res.converged))


def random_start(model: DeepModel, rng, scale: float = 0.5, rank: int | None = None):
    """Gaussian start; ``rank``: H of that rank (a low-rank structured start)."""
    H0 = rng.standard_normal(model.shapes[0]) * scale
    if rank is not None and rank < min(H0.shape):
        U, s, Vt = np.linalg.svd(H0, full_matrices=False)
        H0 = (U[:, :rank] * s[:rank]) @ Vt[:rank]
    Ws = [rng.standard_normal(sh) * scale / math.sqrt(max(1, sh[1]) / 4) for sh in model.shapes[1:]]
    return model.pack(H0, Ws)


def multistart(inst: T.DeepUFMInstance, *, starts: int = 4, seed: int = 0, max_evals: int = 3000,
               collapsed: bool = True, extra_starts=(), scale: float = 0.5, low_rank: bool = True,
               backend: str = "numpy", device: str | None = None, dtype: str = "float64") -> Solution:
    """Best point over random starts (half of them with a low-rank H when ``low_rank``) and ``extra_starts``
    (structured candidates). Budget (evaluations x flops) checked before any work."""
    model = DeepModel(inst, collapsed=collapsed)
    n_total = starts + len(extra_starts)
    check_budget(model, n_total, max_evals)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    runs = []
    best_x, best_f, best_conv = None, math.inf, False
    x0s = [("structured", np.asarray(x, float)) for x in extra_starts]
    m_ = min(inst.K, inst.width)
    ranks = [r for r in dict.fromkeys([max(1, m_ // 2), max(1, m_ - 1), max(1, 2 * m_ // 3), max(1, m_ // 3)])
             if r > 1] or [1]  # a rank-1 start ends at the zero point (measured)
    for i in range(starts):
        r = None
        if low_rank and i % 2 == 1:  # low-rank starts cycle through ranks below min(K, D)
            r = ranks[(i // 2) % len(ranks)]
        x0s.append((f"random rank {r}" if r else "random", random_start(model, rng, scale, rank=r)))
    from solvers.backends import resolve
    from solvers.common import blas_threads

    choice = resolve(backend, device, dtype)
    fun = TorchObjective(model, choice.device, choice.dtype).value_grad if choice.backend == "torch" else None
    for kind, x0 in x0s:
        with blas_threads(0):  # tiny products: threaded BLAS was measured 20x slower on the loaded machine
            res = _lbfgs(model, x0, max_evals, fun=fun)
            f = model.value(res.x)  # re-evaluated at the returned point
        runs.append({"start": kind, "value": f, "evaluations": int(res.nfev), "converged": bool(res.success)})
        if f < best_f:
            best_x, best_f, best_conv = res.x, f, bool(res.success)
    sol = Solution(best_f, "multi-start L-BFGS" + (" (class-collapsed)" if collapsed else "")
                   + (f" [torch {choice.device} {choice.dtype}]" if choice.backend == "torch" else ""), best_conv,
                   time.perf_counter() - t0, {"x": best_x},
                   {"starts": len(x0s), "runs": runs, "evaluations": model.evals,
                    "work_flop": estimate_work(model, n_total, max_evals), "backend": choice.to_dict()})
    sol.variables["model"] = model
    return sol


# ------------------------------------------------------------------------------------------
# exact evaluation (a witness's value is proven)
# ------------------------------------------------------------------------------------------

def _fmpq_mat(A):
    fl = _flint()
    r, c = A.shape
    return fl.fmpq_mat(r, c, [fl.fmpq(*float(v).as_integer_ratio()) for v in A.ravel()])


def exact_mse_value(inst: T.DeepUFMInstance, x) -> "object":
    """The MSE objective at a class-collapsed point (float parameters taken as exact rationals), evaluated in
    exact rational arithmetic: an fmpq (python-flint) when python-flint is installed, else a
    :class:`fractions.Fraction` (:func:`exact_mse_fraction`). ReLU is exact on rationals."""
    fl = _flint_or_none()
    if fl is None:
        return exact_mse_fraction(inst, x)
    model = DeepModel(inst, collapsed=True)
    H, Ws = model.unpack(np.asarray(x, float))
    K, N = inst.K, inst.N
    Hq = _fmpq_mat(H)
    h = Hq
    for l in range(len(Ws) - 1):
        z = _fmpq_mat(Ws[l]) * h
        if model.relu:
            entries = [[z[i, j] if z[i, j] > 0 else fl.fmpq(0) for j in range(z.ncols())] for i in range(z.nrows())]
            z = fl.fmpq_mat(entries)
        h = z
    O = _fmpq_mat(Ws[-1]) * h
    loss = fl.fmpq(0)
    for c in range(K):
        col = fl.fmpq(0)
        for i in range(K):
            d = O[i, c] - (1 if i == c else 0)
            col += d * d
        loss += col * inst.counts[c]
    total = loss / (2 * N)
    lh = fl.fmpq(*float(inst.lams[0]).as_integer_ratio())
    hn = fl.fmpq(0)
    for c in range(K):
        col = fl.fmpq(0)
        for i in range(Hq.nrows()):
            col += Hq[i, c] * Hq[i, c]
        hn += col * inst.counts[c]
    total += lh * hn / 2
    for l, W in enumerate(Ws):
        lw = fl.fmpq(*float(inst.lams[l + 1]).as_integer_ratio())
        Wq = _fmpq_mat(W)
        sq = fl.fmpq(0)
        for i in range(Wq.nrows()):
            for j in range(Wq.ncols()):
                sq += Wq[i, j] * Wq[i, j]
        total += lw * sq / 2
    return total


def _dyadic_matrix(A) -> tuple[np.ndarray, int]:
    """(M, k): an object array of Python ints and k >= 0 with A = M / 2^k exactly (floats are dyadic)."""
    A = np.asarray(A, float)
    ratios = [float(v).as_integer_ratio() for v in A.ravel()]  # denominators are powers of two
    k = max((d.bit_length() - 1 for _, d in ratios), default=0)
    M = np.empty(len(ratios), dtype=object)
    for i, (n, d) in enumerate(ratios):
        M[i] = n << (k - (d.bit_length() - 1))
    return M.reshape(A.shape), k


def _int_sum(a) -> int:
    return sum((int(v) for v in np.asarray(a, dtype=object).ravel()), 0)


def exact_mse_fraction(inst: T.DeepUFMInstance, x) -> Fraction:
    """The MSE objective at a class-collapsed point evaluated exactly with the standard library: every float
    matrix is an integer matrix times a power of two, the products are integer products (numpy object arrays of
    Python ints), ReLU is max(., 0) on the integers (the scale is positive), and the value is one Fraction."""
    model = DeepModel(inst, collapsed=True)
    H, Ws = model.unpack(np.asarray(x, float))
    K, N = inst.K, inst.N
    counts = np.array([int(c) for c in inst.counts], dtype=object)
    Hm, kH = _dyadic_matrix(H)
    h, kh = Hm, kH
    for W in Ws[:-1]:
        Wm, kW = _dyadic_matrix(W)
        h, kh = Wm.dot(h), kh + kW
        if model.relu:
            h = np.array([v if v > 0 else 0 for v in h.ravel()], dtype=object).reshape(h.shape)
    WL, kL = _dyadic_matrix(Ws[-1])
    O, kO = WL.dot(h), kh + kL
    R = O.copy()
    for c in range(K):
        R[c, c] = R[c, c] - (1 << kO)  # O - Y, scaled by 2^kO
    loss = _int_sum((R * R).sum(axis=0) * counts)
    total = Fraction(loss, (1 << (2 * kO)) * 2 * N)
    lh = Fraction(*float(inst.lams[0]).as_integer_ratio())
    total += lh * Fraction(_int_sum((Hm * Hm).sum(axis=0) * counts), 1 << (2 * kH)) / 2
    for l, W in enumerate(Ws):
        lw = Fraction(*float(inst.lams[l + 1]).as_integer_ratio())
        Wm, kW = _dyadic_matrix(W)
        total += lw * Fraction(_int_sum(Wm * Wm), 1 << (2 * kW)) / 2
    return total


def exact_num_den(value) -> tuple[int, int]:
    """(numerator, denominator) of an exact value (fmpq or Fraction)."""
    if isinstance(value, Fraction):
        return value.numerator, value.denominator
    return int(value.p), int(value.q)


def fmpq_below(value, bound: float) -> bool:
    """True when the exact rational ``value`` (fmpq or Fraction) is < the float ``bound`` (exact comparison)."""
    if isinstance(value, Fraction):
        return bool(value < Fraction(*float(bound).as_integer_ratio()))
    fl = _flint()
    return bool(value < fl.fmpq(*float(bound).as_integer_ratio()))


def fmpq_float(value) -> float:
    """The exact value as a float (a Fraction: correctly rounded)."""
    if isinstance(value, Fraction):
        return float(value)
    return float(value.p) / float(value.q) if abs(value.p) < 2 ** 1000 else float(value)


# ------------------------------------------------------------------------------------------
# structure of a point
# ------------------------------------------------------------------------------------------

#: a singular value counts toward the reported numerical rank of a layer when above this fraction of the largest
#: (a reporting threshold; the witnesses' dropped directions are ~3e-3 of the largest)
RANK_RTOL = 1e-2


def layer_structure(model: DeepModel, x) -> dict:
    """Per layer: singular values of the class means of its input features (H_1..H_L) and of the output,
    numerical ranks (relative threshold RANK_RTOL), the weights' singular values."""
    H, Ws = model.unpack(np.asarray(x, float))
    hs, zs, O = model.forward(H, Ws)
    K = model.inst.K
    out = {"features": [], "weights": [], "rank_rtol": RANK_RTOL}
    for l, h in enumerate(hs + [O]):
        M = np.zeros((h.shape[0], K))
        for c in range(K):
            M[:, c] = h[:, model.labels == c].mean(axis=1)
        s = np.linalg.svd(M, compute_uv=False)
        rank = int(np.sum(s > RANK_RTOL * s[0])) if s.size and s[0] > 0 else 0
        spread = 0.0
        if model.m > K:
            dev = h - M[:, model.labels]
            spread = float(np.sum(dev * dev) / max(np.sum(M * M), 1e-300))
        from theory.geometry import distance_to_etf, distance_to_of

        G = M.T @ M
        Mc = M - M.mean(axis=1, keepdims=True)
        out["features"].append({"layer": "output" if l == len(hs) else l + 1, "singular_values": s[:16].tolist(),
                                "rank": rank, "nc1_within_over_between": spread,
                                "nc2_of": distance_to_of(G) if np.isfinite(G).all() else None,
                                "nc2_etf": distance_to_etf(Mc.T @ Mc) if np.isfinite(G).all() else None})
    for l, W in enumerate(Ws):
        s = np.linalg.svd(W, compute_uv=False)
        out["weights"].append({"layer": l + 1, "singular_values": s[:16].tolist(),
                               "rank": int(np.sum(s > RANK_RTOL * s[0])) if s[0] > 0 else 0})
    return out


def product_singular_values(model: DeepModel, x) -> np.ndarray:
    """Singular values of the output (W_L...W_1 H for linear models) on the samples: collapsed columns are
    weighted by sqrt(n_c) so that they equal those of the N-column output."""
    H, Ws = model.unpack(np.asarray(x, float))
    _, _, O = model.forward(H, Ws)
    return np.linalg.svd(O * np.sqrt(model.mult)[None, :], compute_uv=False)


# ------------------------------------------------------------------------------------------
# DNC versus lower-rank points (ReLU, MSE)
# ------------------------------------------------------------------------------------------

def dnc_start(inst: T.DeepUFMInstance, rng, noise: float = 0.05):
    """The DNC point perturbed (a structured start: a local solve from it shows whether DNC is a local minimum)."""
    sol = T.scalar_solution(math.sqrt(inst.counts[0]), inst.N, T.reg_constant(inst), inst.layers)
    if sol.s_plus is None or inst.width < inst.K:
        return None
    model, x = dnc_point(inst, sol.s_plus)
    return x + noise * rng.standard_normal(x.shape) * (np.abs(x).max() or 1.0)


def witness_search(inst: T.DeepUFMInstance, *, starts: int = 6, seed: int = 0, max_evals: int = 4000,
                   extra_starts=(), **backend) -> dict:
    """Best class-collapsed point of the ReLU/linear MSE model from random (full and low-rank) starts, the
    perturbed DNC point and ``extra_starts``; its value evaluated exactly (fmpq or Fraction) and compared exactly with the
    proven lower end of the best DNC value. Returns a dict (data only)."""
    rng = np.random.default_rng(seed + 7919)
    extra = list(extra_starts)
    ds = dnc_start(inst, rng)
    if ds is not None:
        extra.append(ds)
    sol = multistart(inst, starts=starts, seed=seed, max_evals=max_evals, collapsed=True, extra_starts=extra,
                     **backend)
    return witness_report(inst, sol.variables["x"], search=sol)


def witness_report(inst: T.DeepUFMInstance, x, search: Solution | None = None, origin: str = "search") -> dict:
    model = DeepModel(inst, collapsed=True)
    x = np.asarray(x, float)
    dnc = certify_dnc(inst)
    exact = exact_mse_value(inst, x)
    num, den = exact_num_den(exact)
    below = dnc is not None and fmpq_below(exact, dnc[0])
    out = {"value_float": model.value(x), "value_exact": fmpq_float(exact),
           "value_exact_fraction": f"{num}/{den}" if den.bit_length() < 1300 and num.bit_length() < 4000 else None,
           "arithmetic": arithmetic(),
           "dnc_enclosure": list(dnc) if dnc else None, "below_dnc_proven": bool(below),
           "margin": (dnc[0] - fmpq_float(exact)) if dnc else None, "structure": layer_structure(model, x),
           "origin": origin, "x": x}
    if search is not None:
        out.update(search=search.to_dict(), runs=search.diagnostics.get("runs"))
    return out


def witness_to_json(inst: T.DeepUFMInstance, x) -> dict:
    """A witness in a file: the instance and the parameters as exact hex floats."""
    return {"instance": inst.to_dict(), "x": [float(v).hex() for v in np.asarray(x, float)]}


def witness_from_json(d: dict) -> tuple[T.DeepUFMInstance, np.ndarray]:
    i = d["instance"]
    inst = T.DeepUFMInstance(i["layers"], i["activation"], i["loss"], tuple(i["counts"]), i["width"],
                             tuple([i["lambda_H"]] + list(i["lambda_W"])))
    return inst, np.array([float.fromhex(v) for v in d["x"]])


def stored_witnesses() -> list[tuple[T.DeepUFMInstance, np.ndarray]]:
    """Witnesses found once by :func:`witness_search` (seeds in the file) and shipped with the package: their
    values are re-proven by exact evaluation at every use, so where they came from does not matter."""
    import json
    from pathlib import Path

    p = Path(__file__).with_name("deep_ufm_witnesses.json")
    if not p.exists():
        return []
    return [witness_from_json(d) for d in json.loads(p.read_text())["witnesses"]]


def find_stored_witness(inst: T.DeepUFMInstance):
    for w_inst, x in stored_witnesses():
        if w_inst == inst:
            return x
    return None


# ------------------------------------------------------------------------------------------
# CE: low-rank bias measurement
# ------------------------------------------------------------------------------------------

def ce_rank_measurement(inst: T.DeepUFMInstance, tau: float, *, seeds=(0, 1), starts: int = 2,
                        max_evals: int = 3000, **backend) -> dict:
    """For each seed: the best point of a multi-start solve, its value and the number of singular values of the
    (sample) output above tau. A measurement: points found, not proven minimisers."""
    per = []
    model = DeepModel(inst, collapsed=True)
    check_budget(model, len(seeds) * starts, max_evals)
    for s in seeds:
        sol = multistart(inst, starts=starts, seed=s, max_evals=max_evals, collapsed=True, low_rank=False, **backend)
        sv = product_singular_values(sol.variables["model"], sol.variables["x"])
        per.append({"seed": s, "value": sol.value, "count": int(np.sum(sv > tau)), "singular_values": sv[:12].tolist(),
                    "converged": sol.converged, "evaluations": sol.diagnostics["evaluations"]})
    return {"tau": tau, "per_seed": per, "zero_value": math.log(inst.K)}
