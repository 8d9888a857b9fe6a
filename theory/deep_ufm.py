"""Deep unconstrained features model (deep UFM / DUFM): predictions and derivations (docs/deep_ufm.md).

The model (conventions of docs/deep_ufm.md): classes c = 1..K with n_c samples, N = sum n_c;
features H (D x N, unconstrained), weights W_1..W_{L-1} (D x D) and W_L (K x D), no biases;

    f = loss(W_L s(W_{L-1} ... s(W_1 H))) + sum_l (lambda_l / 2) ||W_l||_F^2 + (lambda_H / 2) ||H||_F^2,

s = identity (``linear``) or ReLU between consecutive weight layers (L - 1 ReLUs; none after W_L
and none on H). ``mse``: (1/(2N)) ||out - Y||_F^2 with one-hot Y; ``ce``: mean cross-entropy.

Predictions here (numpy / mpmath floats; the certified versions live in ``solvers.deep_ufm``):

- deep linear MSE: the global optimum reduces to one scalar problem per singular value
  y_c = sqrt(n_c) of Y: min_{s >= 0} phi(s) = (s - y)^2 / (2N) + C s^{2/(L+1)} with
  C = ((L+1)/2) (lambda_H prod_l lambda_l)^{1/(L+1)} (Dang et al., ICML 2023, reconstructed; derived
  in docs/deep_ufm.md);
- the best deep-neural-collapse (DNC) point (balanced classes): K phi(s_+) at the positive local
  minimiser s_+ (the same for ReLU and linear: DNC representations are nonnegative);
- the literature's statement on DNC optimality (Súkeník, Lampert, Mondelli, NeurIPS 2024;
  reconstructed: DNC is not optimal beyond two layers and two classes);
- a proven bound on the number of singular values above tau at the global minima of the deep linear
  CE model (derived: every point below the zero point obeys it).

Imports nothing from solvers or proofs_check.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import sympy as sp

from theory._validate import InstanceError, as_float, as_int

#: accepted ranges (docs/deep_ufm.md, "Ranges"): depth, width, classes, weight decays
MAX_LAYERS = 12
MAX_WIDTH = 4096
MAX_CLASSES = 10_000
MAX_SAMPLES = 10_000_000
LAMBDA_RANGE = (1e-12, 1e6)
ACTIVATIONS = ("linear", "relu")
LOSSES = ("mse", "ce")


@dataclass(frozen=True)
class DeepUFMInstance:
    """One deep UFM instance. ``lams`` = (lambda_H, lambda_1, ..., lambda_L) (one value: all equal)."""

    layers: int
    activation: str
    loss: str
    counts: tuple
    width: int
    lams: tuple

    def __post_init__(self):
        L = as_int("layers", self.layers, minimum=1, maximum=MAX_LAYERS)
        if not isinstance(self.activation, str) or self.activation not in ACTIVATIONS:
            raise InstanceError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if not isinstance(self.loss, str) or self.loss not in LOSSES:
            raise InstanceError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        try:
            counts = tuple(self.counts)
        except TypeError:
            raise InstanceError(f"counts must be a sequence of class sizes, got {self.counts!r}") from None
        if not 2 <= len(counts) <= MAX_CLASSES:
            raise InstanceError(f"counts: the number of classes must be in [2, {MAX_CLASSES}], got {len(counts)}")
        counts = tuple(as_int(f"counts[{i}]", c, minimum=1) for i, c in enumerate(counts))
        if sum(counts) > MAX_SAMPLES:
            raise InstanceError(f"counts: at most {MAX_SAMPLES} samples in total, got {sum(counts)}")
        D = as_int("width", self.width, minimum=1, maximum=MAX_WIDTH)
        try:
            lams = tuple(self.lams) if not isinstance(self.lams, (int, float)) else (self.lams,)
        except TypeError:
            raise InstanceError(f"lams must be a number or a sequence of numbers, got {self.lams!r}") from None
        if len(lams) == 1:
            lams = lams * (L + 1)
        if len(lams) != L + 1:
            raise InstanceError(f"lambda: give one value or L + 1 = {L + 1} values (lambda_H, lambda_1..lambda_L), "
                                f"got {len(lams)}")
        lams = tuple(as_float(f"lambda[{i}]", v, positive=True) for i, v in enumerate(lams))
        for i, v in enumerate(lams):
            if not LAMBDA_RANGE[0] <= v <= LAMBDA_RANGE[1]:
                raise InstanceError(f"lambda[{i}] must be in [{LAMBDA_RANGE[0]:g}, {LAMBDA_RANGE[1]:g}], got {v:g}")
        object.__setattr__(self, "layers", L)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "width", D)
        object.__setattr__(self, "lams", lams)

    @property
    def K(self) -> int:
        return len(self.counts)

    @property
    def N(self) -> int:
        return sum(self.counts)

    @property
    def balanced(self) -> bool:
        return len(set(self.counts)) == 1

    @property
    def n(self) -> int | None:
        return self.counts[0] if self.balanced else None

    def to_dict(self) -> dict:
        d = {"layers": self.layers, "activation": self.activation, "loss": self.loss, "classes": self.K,
             "counts": list(self.counts), "width": self.width, "lambda_H": self.lams[0],
             "lambda_W": list(self.lams[1:])}
        if self.balanced:
            d["per_class"] = self.n
        return d

    def label(self) -> str:
        lam = f"{self.lams[0]:g}" if len(set(self.lams)) == 1 else ",".join(f"{v:g}" for v in self.lams)
        cnt = f"n={self.n}" if self.balanced else "counts=" + ",".join(map(str, self.counts[:6])) + \
            ("..." if self.K > 6 else "")
        return f"L={self.layers} {self.activation} {self.loss} K={self.K} {cnt} D={self.width} lambda={lam}"


def balanced(L: int, activation: str, loss: str, K: int, n: int, D: int, lam) -> DeepUFMInstance:
    return DeepUFMInstance(L, activation, loss, (n,) * int(K), D, lam if isinstance(lam, (tuple, list)) else (lam,))


# ------------------------------------------------------------------------------------------
# the scalar problem of the deep linear MSE model
# ------------------------------------------------------------------------------------------

def reg_constant(inst: DeepUFMInstance) -> float:
    """C = ((L+1)/2) (lambda_H prod lambda_l)^{1/(L+1)}: min regulariser of a product with singular values
    s_i is C sum s_i^{2/(L+1)} (docs/deep_ufm.md, "Factorisation")."""
    L = inst.layers
    logp = sum(math.log(v) for v in inst.lams)
    return (L + 1) / 2.0 * math.exp(logp / (L + 1))


def phi(s: float, y: float, N: int, C: float, L: int) -> float:
    """Scalar objective (s - y)^2 / (2N) + C s^{2/(L+1)}."""
    return (s - y) ** 2 / (2.0 * N) + C * s ** (2.0 / (L + 1))


def q_coefficients(y: float, N: int, C: float, L: int) -> dict[int, float]:
    """q(t) = (L+1) t^{2L} - (L+1) y t^{L-1} + 2 N C (degree: coefficient); dphi/dt = (t/N) q(t) at s = t^{L+1}."""
    out = {2 * L: float(L + 1)}
    out[L - 1] = out.get(L - 1, 0.0) - (L + 1) * y
    out[0] = out.get(0, 0.0) + 2.0 * N * C
    return out


def _q(t: float, y: float, N: int, C: float, L: int) -> float:
    return (L + 1) * t ** (2 * L) - (L + 1) * y * t ** (L - 1) + 2.0 * N * C


@dataclass(frozen=True)
class ScalarSolution:
    y: float
    s_opt: float  # global minimiser (0 or s_plus)
    value: float  # global minimum
    s_plus: float | None  # positive local minimiser (None: none exists)
    value_plus: float | None


def scalar_solution(y: float, N: int, C: float, L: int) -> ScalarSolution:
    """Global minimum of phi over s >= 0 in float64 (the prediction; the proof is solvers.deep_ufm)."""
    v0 = y * y / (2.0 * N)
    if L == 1:  # convex: soft threshold
        s = max(0.0, y - N * C)
        return ScalarSolution(y, s, phi(s, y, N, C, L), s if s > 0 else None, phi(s, y, N, C, L) if s > 0 else None)
    tstar = ((L - 1) * y / (2.0 * L)) ** (1.0 / (L + 1))
    if _q(tstar, y, N, C, L) >= 0:
        return ScalarSolution(y, 0.0, v0, None, None)
    lo, hi = tstar, y ** (1.0 / (L + 1))  # q(lo) < 0 < q(hi) = 2 N C, q increasing on [t*, inf)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _q(mid, y, N, C, L) < 0:
            lo = mid
        else:
            hi = mid
    t2 = 0.5 * (lo + hi)
    sp_ = t2 ** (L + 1)
    vp = phi(sp_, y, N, C, L)
    if vp < v0:
        return ScalarSolution(y, sp_, vp, sp_, vp)
    return ScalarSolution(y, 0.0, v0, sp_, vp)


@dataclass(frozen=True)
class LinearMSEPrediction:
    value: float
    rank: int
    singular_values: tuple  # of the optimal product W_L ... W_1 H, aligned with the classes (sorted by n_c desc)
    thresholds: dict


def rank_limit(inst: DeepUFMInstance) -> int:
    """The product W_L...W_1 H has rank <= min(D, K, N) (every hidden width is D)."""
    return min(inst.width, inst.K, inst.N)


def linear_mse_optimum(inst: DeepUFMInstance) -> LinearMSEPrediction:
    """Global optimum of the deep linear MSE model: sum of scalar minima over y_c = sqrt(n_c), the r = min(D, K)
    largest y_c allowed to be positive (docs/deep_ufm.md, "Reduction")."""
    C, L, N = reg_constant(inst), inst.layers, inst.N
    ys = sorted((math.sqrt(c) for c in inst.counts), reverse=True)
    cache: dict[float, ScalarSolution] = {}
    total, svals, r = 0.0, [], 0
    rmax = rank_limit(inst)
    for i, y in enumerate(ys):
        if i < rmax:
            sol = cache.get(y) or cache.setdefault(y, scalar_solution(y, N, C, L))
            total += sol.value
            svals.append(sol.s_opt)
            r += sol.s_opt > 0
        else:
            total += y * y / (2.0 * N)
            svals.append(0.0)
    return LinearMSEPrediction(total, r, tuple(svals), {})


def dnc_value(inst: DeepUFMInstance) -> float | None:
    """Best value over DNC points (balanced classes): K phi(s_+) at the positive local minimiser; None when phi
    has no positive local minimiser (then the DNC family only approaches the zero point). Needs D >= K."""
    if not inst.balanced or inst.width < inst.K:
        return None
    sol = scalar_solution(math.sqrt(inst.n), inst.N, reg_constant(inst), inst.layers)
    return None if sol.value_plus is None else inst.K * sol.value_plus


def dnc_hypotheses(inst: DeepUFMInstance) -> list[str]:
    """Failed hypotheses for statements about the DNC point (MSE, balanced, width >= K, a positive DNC scale)."""
    out = []
    if inst.loss != "mse":
        out.append("the DNC statements are about the MSE loss")
    if not inst.balanced:
        out.append("DNC is defined here for balanced classes")
    if inst.width < inst.K:
        out.append(f"DNC needs width D >= K ({inst.width} < {inst.K})")
    if not out and dnc_value(inst) is None:
        out.append("no DNC point with a positive scale is a critical point (phi has no positive local minimiser)")
    return out


def relu_chain_bound(inst: DeepUFMInstance) -> float | None:
    """Derived lower bound of the deep UFM optimum with ReLU (or identity) between layers, MSE, balanced classes
    (docs/deep_ufm.md, "A proven lower bound for ReLU"): K min_sigma phi(sigma; sqrt n) with C replaced by
    C / K^{(L-1)/(L+1)} (the regulariser is >= C ||O||_*^{2/(L+1)} for ReLU networks too). Float prediction; the
    proof is solvers.deep_ufm.certify_relu_chain_bound. None for unbalanced classes or CE."""
    if inst.loss != "mse" or not inst.balanced:
        return None
    L, K = inst.layers, inst.K
    C = reg_constant(inst) / K ** ((L - 1) / (L + 1))
    return K * scalar_solution(math.sqrt(inst.n), inst.N, C, L).value


def literature_dnc_optimal(inst: DeepUFMInstance) -> bool:
    """What the literature states (reconstructed, docs/deep_ufm.md): DNC is the global optimum for deep linear
    models (Dang et al. 2023, where the rank-K point beats zero), for L <= 2 layers and for K = 2 classes
    (Súkeník et al. 2023/2024); it is not optimal for ReLU models with L >= 3 and K >= 3 (Súkeník, Lampert,
    Mondelli 2024: "as soon as we go beyond two layers or two classes")."""
    if inst.activation == "linear":  # DNC is the rank-K point: optimal iff it beats the zero point
        sol = scalar_solution(math.sqrt(inst.counts[0]), inst.N, reg_constant(inst), inst.layers)
        return sol.value_plus is not None and sol.value_plus < inst.counts[0] / (2.0 * inst.N)
    return inst.layers <= 2 or inst.K == 2


def ce_rank_bound(inst: DeepUFMInstance, tau: float) -> int:
    """Deep linear CE: every point with objective <= log K (the zero point's value) has at most
    floor(log K / (C tau^{2/(L+1)})) singular values of W_L...W_1 H above tau (regulariser >= C sum s^{2/(L+1)},
    CE >= 0), so every global minimiser does (derived; the low-rank bias of Garrod & Keating 2025 as L grows)."""
    tau = as_float("tau", tau, positive=True)
    C = reg_constant(inst)
    den = C * tau ** (2.0 / (inst.layers + 1))
    if not (den > 0 and math.isfinite(math.log(inst.K) / den)):  # tau = 1e-320: 0 or inf (was ZeroDivisionError)
        raise InstanceError(f"tau = {tau:g} is too small: the bound log K / (C tau^(2/(L+1))) overflows float64")
    return int(math.floor(math.log(inst.K) / den))


# ------------------------------------------------------------------------------------------
# symbolic derivations (each must simplify to 0)
# ------------------------------------------------------------------------------------------

def derivation_stationarity(L: int):
    """d/dt phi(t^{L+1}) - (t/N) q(t) == 0."""
    t, y, N, C = sp.symbols("t y N C", positive=True)
    ph = (t ** (L + 1) - y) ** 2 / (2 * N) + C * t ** 2
    q = (L + 1) * t ** (2 * L) - (L + 1) * y * t ** (L - 1) + 2 * N * C
    return sp.expand(sp.diff(ph, t) - t / N * q)


def derivation_qmin(L: int):
    """q'(t*) == 0 at t*^{L+1} = (L-1) y / (2L) (the only positive critical point of q, its minimum)."""
    t, y = sp.symbols("t y", positive=True)
    q = (L + 1) * t ** (2 * L) - (L + 1) * y * t ** (L - 1)
    dq = sp.diff(q, t)
    # dq = (L+1) t^{L-2} (2L t^{L+1} - (L-1) y)
    return sp.expand(dq - (L + 1) * t ** (L - 2) * (2 * L * t ** (L + 1) - (L - 1) * y))


def derivation_balanced_factorisation(L: int):
    """Balanced factors a_j = (P^2 prod lam)^{1/(2(L+1))} / sqrt(lam_j) have product P and regulariser
    sum lam_j a_j^2 / 2 = ((L+1)/2) (prod lam)^{1/(L+1)} P^{2/(L+1)}: returns both differences."""
    P = sp.symbols("P", positive=True)
    lam = sp.symbols(f"l0:{L + 1}", positive=True)
    g = sp.Mul(*lam)
    a = [(P ** 2 * g) ** sp.Rational(1, 2 * (L + 1)) / sp.sqrt(l) for l in lam]
    prod = sp.powsimp(sp.Mul(*a), force=True)
    reg = sum(l * x ** 2 for l, x in zip(lam, a)) / 2
    target = sp.Rational(L + 1, 2) * g ** sp.Rational(1, L + 1) * P ** sp.Rational(2, L + 1)
    return sp.simplify(prod - P), sp.simplify(sp.powsimp(reg - target, force=True))


def derivation_amgm_two(L: int = 1):
    """The two-factor AM-GM step: (la a^2 + lb b^2)/2 - sqrt(la lb) a b - (sqrt(la) a - sqrt(lb) b)^2 / 2 == 0."""
    a, b, la, lb = sp.symbols("a b la lb", positive=True)
    return sp.expand((la * a ** 2 + lb * b ** 2) / 2 - sp.sqrt(la * lb) * a * b
                     - (sp.sqrt(la) * a - sp.sqrt(lb) * b) ** 2 / 2)


@functools.lru_cache(maxsize=4)
def derivation_balancedness(d: int = 2, N: int = 1, K: int = 2):
    """At any point: W2^T dF/dW2 - dF/dW1 W1^T == lam2 W2^T W2 - lam1 W1 W1^T for
    F = ||W2 W1 H - Y||^2/(2N) + (lam2/2)||W2||^2 + (lam1/2)||W1||^2 (entries of the difference), so at a critical
    point lam2 W2^T W2 = lam1 W1 W1^T (balancedness; the same identity holds between any two adjacent layers and
    between W_1 and H)."""
    W1 = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"a{i}{j}"))
    W2 = sp.Matrix(K, d, lambda i, j: sp.Symbol(f"b{i}{j}"))
    H = sp.Matrix(d, N, lambda i, j: sp.Symbol(f"h{i}{j}"))
    Y = sp.Matrix(K, N, lambda i, j: sp.Symbol(f"y{i}{j}"))
    l1, l2 = sp.symbols("lam1 lam2", positive=True)
    R = W2 * W1 * H - Y
    F = sum(x ** 2 for x in R) / (2 * N) + l2 / 2 * sum(x ** 2 for x in W2) + l1 / 2 * sum(x ** 2 for x in W1)
    g1 = sp.Matrix(d, d, lambda i, j: sp.diff(F, W1[i, j]))
    g2 = sp.Matrix(K, d, lambda i, j: sp.diff(F, W2[i, j]))
    diff = W2.T * g2 - g1 * W1.T - (l2 * W2.T * W2 - l1 * W1 * W1.T)
    return tuple(sp.expand(x) for x in diff)
