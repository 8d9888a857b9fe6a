"""Classic unconstrained-features model (UFM): cross-entropy and MSE with weight decay.

Spec: ``docs/ufm.md``. Balanced classes: k classes, n samples each, N = n k, features
H (d x N) ordered class by class, classifier W (k x d), bias b (k).

- CE (Zhu et al., NeurIPS 2021, "A geometric analysis of neural collapse with unconstrained
  features"): f = (1/N) sum_i CE(W h_i + b, y_i) + lw/2 ||W||^2 + lh/2 ||H||^2 (+ lb/2 ||b||^2).
- MSE (Zhou et al., ICML 2022; Han, Papyan, Donoho, ICLR 2022): f = 1/(2N) ||W H + b 1^T - Y||^2
  + lw/2 ||W||^2 + lh/2 ||H||^2, bias unregularised.

Closed forms (derived in this project; the symbolic derivations below are checked by claims):

- CE: s = sqrt(n lw lh). If s >= 1/k, W = H = 0 and f* = log k. Otherwise the optimal
  logit margin is c* = log(1/s - (k-1)) and f* = -log(1 - (k-1) s) + (k-1) s c*.
- MSE: lam = sqrt(lw lh), z = max(sqrt(n) - N lam, 0), f* = (k-1)((sqrt(n) - z)^2/(2N) + lam z).

Both rest on the same reduction: min over W H = Z of (lw||W||^2 + lh||H||^2)/2 equals
sqrt(lw lh) ||Z||_* when d >= rank Z, and by symmetry plus convexity the optimal Z is
Z = c J_k Y (J_k Y has k-1 singular values sqrt(n)), leaving one scalar c.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from theory._validate import InstanceError, as_float, as_int

LOSSES = ("ce", "mse")

#: Accepted range of each weight decay (lambda_w, lambda_h and a nonzero lambda_b). Inside it the
#: products and square roots the closed forms use (lw lh in [1e-24, 1e24], s = sqrt(n lw lh),
#: c* = log(1/s - (k-1)) <= 30 + log of the sizes, factor scales (lh/lw)^(1/4) in [1e-6, 1e6]) are far
#: from float64 underflow/overflow, and every value is evaluated with stable formulas (log1p, one
#: softmax pass with the largest entry factored out) to a relative accuracy of ~1e-13 (docs/ufm.md).
#: Outside it (e.g. lambda_w = 1e-300, lambda_h = 1e300) the value would be computed as 0, inf or NaN:
#: such inputs are refused, never "certified".
LAMBDA_MIN = 1e-12
LAMBDA_MAX = 1e12


@dataclass(frozen=True)
class UFMInstance:
    """A balanced UFM instance. Validated on construction (errors name the field)."""

    loss: str
    k: int
    n: int
    d: int
    lw: float
    lh: float
    lb: float = 0.0

    def __post_init__(self):
        if not isinstance(self.loss, str) or self.loss not in LOSSES:
            raise InstanceError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        object.__setattr__(self, "k", as_int("k (classes)", self.k, minimum=2))
        object.__setattr__(self, "n", as_int("n (samples per class)", self.n, minimum=1))
        object.__setattr__(self, "d", as_int("d (feature dimension)", self.d, minimum=1))
        object.__setattr__(self, "lw", as_float("lambda_w", self.lw, nonnegative=True))
        object.__setattr__(self, "lh", as_float("lambda_h", self.lh, nonnegative=True))
        object.__setattr__(self, "lb", as_float("lambda_b", self.lb, nonnegative=True))
        if self.loss == "mse" and self.lb != 0.0:
            raise InstanceError("lambda_b must be 0 for ufm-mse: the MSE closed form has an unregularized bias")
        if self.lw == 0.0 or self.lh == 0.0:
            raise InstanceError("lambda_w and lambda_h must be > 0 (without weight decay the infimum is not attained)")
        for name, v in (("lambda_w", self.lw), ("lambda_h", self.lh), ("lambda_b", self.lb)):
            if name == "lambda_b" and v == 0.0:
                continue
            if not LAMBDA_MIN <= v <= LAMBDA_MAX:
                raise InstanceError(f"{name} must be in [{LAMBDA_MIN:g}, {LAMBDA_MAX:g}] (the range where float64 "
                                    f"evaluation with stable formulas is accurate; docs/ufm.md), got {v:g}")

    @property
    def N(self) -> int:
        return self.n * self.k

    @property
    def lam(self) -> float:
        """sqrt(lw lh): the nuclear-norm weight of the convex reformulation."""
        return math.sqrt(self.lw * self.lh)

    def labels(self) -> np.ndarray:
        """Labels ordered class by class."""
        return np.repeat(np.arange(self.k), self.n)

    def onehot(self) -> np.ndarray:
        """Y (k x N) one-hot."""
        Y = np.zeros((self.k, self.N))
        Y[self.labels(), np.arange(self.N)] = 1.0
        return Y

    def hypotheses(self) -> list[str]:
        """Hypotheses of the closed forms that fail for this instance (empty when all hold)."""
        out = []
        if self.d < self.k - 1:
            out.append(f"d >= k-1 (closed forms need room for a simplex ETF): d = {self.d} < k-1 = {self.k - 1}")
        return out

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class UFMPrediction:
    """Predicted optimum of a UFM instance (closed form)."""

    value: float
    trivial: bool  # W = H = 0 is the unique minimizer
    margin: float  # optimal logit margin c* (CE) or singular value z (MSE)
    geometry: str  # "simplex-etf" or "zero"

    def to_dict(self) -> dict:
        return asdict(self)


def ce_threshold(inst: UFMInstance) -> float:
    """s = sqrt(n lw lh); the trivial phase is s >= 1/k."""
    return math.sqrt(inst.n * inst.lw * inst.lh)


def ce_optimum(inst: UFMInstance) -> UFMPrediction:
    """CE closed form: f* = -log(1 - (k-1)s) + (k-1) s log(1/s - (k-1)) for s < 1/k, else log k.

    Derived (docs/ufm.md); statement of the geometry from Zhu et al. 2021. A regularized bias
    does not change the value (the optimal bias is 0).
    """
    k, s = inst.k, ce_threshold(inst)
    if s * k >= 1.0:
        return UFMPrediction(math.log(k), True, 0.0, "zero")
    c = math.log(1.0 / s - (k - 1))
    value = -math.log1p(-(k - 1) * s) + (k - 1) * s * c
    return UFMPrediction(value, False, c, "simplex-etf")


def mse_optimum(inst: UFMInstance) -> UFMPrediction:
    """MSE closed form: z = max(sqrt(n) - N lam, 0), f* = (k-1)((sqrt(n)-z)^2/(2N) + lam z).

    Derived (docs/ufm.md) by singular-value soft thresholding of the centred labels; the
    geometry statement is from Zhou et al. 2022 / Han, Papyan, Donoho 2022. Bias b* = 1/k.
    """
    k, N, lam = inst.k, inst.N, inst.lam
    rn = math.sqrt(inst.n)
    z = max(rn - N * lam, 0.0)
    value = (k - 1) * ((rn - z) ** 2 / (2 * N) + lam * z)
    return UFMPrediction(value, z == 0.0, z, "zero" if z == 0.0 else "simplex-etf")


def optimum(inst: UFMInstance) -> UFMPrediction:
    """Closed-form optimum for the instance's loss (CE or MSE)."""
    return ce_optimum(inst) if inst.loss == "ce" else mse_optimum(inst)


def optimal_logits(inst: UFMInstance) -> tuple[np.ndarray, np.ndarray]:
    """The closed-form optimal Z = W H (k x N) and bias b (k)."""
    pred = optimum(inst)
    JY = inst.onehot() - 1.0 / inst.k
    if inst.loss == "ce":
        return pred.margin * JY, np.zeros(inst.k)
    # MSE: Z = (z / sqrt(n)) * J_k Y (soft-thresholded centred labels), b = 1/k.
    return (pred.margin / math.sqrt(inst.n)) * JY, np.full(inst.k, 1.0 / inst.k)


def optimal_class_logits(inst: UFMInstance) -> tuple[np.ndarray, np.ndarray]:
    """The closed-form optimum in class coordinates: Zc (k x k, column c = the logits of every sample
    of class c, so Z = Zc (I_k kron 1_n^T)) and the bias b. O(k^2) memory, independent of n and d."""
    pred = optimum(inst)
    J = np.eye(inst.k) - 1.0 / inst.k
    if inst.loss == "ce":
        return pred.margin * J, np.zeros(inst.k)
    return (pred.margin / math.sqrt(inst.n)) * J, np.full(inst.k, 1.0 / inst.k)


def helmert_basis(k: int, d: int) -> np.ndarray:
    """d x k matrix U with U^T U = J_k = I - 11^T/k (d >= k - 1): the Helmert rows
    (1, ..., 1, -j, 0, ..., 0)/sqrt(j (j + 1)), j = 1..k-1, are orthonormal and span 1^perp; padded with zero
    rows. Its columns, scaled by sqrt(k/(k-1)), are a unit simplex ETF."""
    if d < k - 1:
        raise InstanceError(f"d must be >= k-1 = {k - 1} for a simplex ETF of k = {k} vectors, got d = {d}")
    U = np.zeros((d, k))
    for j in range(1, k):
        c = 1.0 / math.sqrt(j * (j + 1))
        U[j - 1, :j] = c
        U[j - 1, j] = -j * c
    return U


def optimal_class_point(inst: UFMInstance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The closed-form minimiser in class coordinates: W (k x r), class means Mu (r x k) and b, with
    r = min(d, k). Features are collapsed (h_i = mu_{y_i}), so this is the whole point; embedding it in
    R^d by zero padding changes no value or Gram matrix. O(k^2) memory, independent of n and d."""
    if inst.d < inst.k - 1:
        raise InstanceError(f"d must be >= k-1 = {inst.k - 1} for the closed-form minimizer, got d = {inst.d}")
    small = UFMInstance(inst.loss, inst.k, inst.n, min(inst.d, inst.k), inst.lw, inst.lh, inst.lb)
    W, H, b = optimal_point(small, _means_only=True)
    return W, H, b


def optimal_point(inst: UFMInstance, _means_only: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A closed-form global minimizer (W, H, b) in dimension d (requires d >= k-1).

    Class means form a simplex ETF, H collapsed, self-dual: mu_c = sqrt(lw/(n lh)) w_c.
    Balanced factorization of Z = c J_k Y: lw ||W||^2 = lh ||H||^2.
    """
    if inst.d < inst.k - 1:
        raise InstanceError(f"d must be >= k-1 = {inst.k - 1} for the closed-form minimizer, got d = {inst.d}")
    k, n = inst.k, inst.n
    pred = optimum(inst)
    b = np.zeros(k) if inst.loss == "ce" else np.full(k, 1.0 / k)
    # Z = prod * J_k Y with prod = c* (CE) or z / sqrt(n) (MSE); ||Z||_2 = prod sqrt(n)
    prod = pred.margin if inst.loss == "ce" else pred.margin / math.sqrt(n)
    U = helmert_basis(k, inst.d)  # d x k, U^T U = J_k (a simplex ETF up to scale), O(k d) without an eigh
    # W = alpha U^T, H = beta U Y, so W H = alpha beta J_k Y = Z (alpha * beta = prod)
    # balance lw ||W||^2 = lh ||H||^2 with ||W||^2 = alpha^2 (k-1), ||H||^2 = beta^2 n (k-1)
    ratio = math.sqrt(inst.lh * n / inst.lw)  # alpha / beta
    alpha = math.sqrt(prod * ratio)
    beta = math.sqrt(prod / ratio)
    W = alpha * U.T
    if _means_only:
        return W, beta * U, b
    H = beta * U[:, inst.labels()]
    return W, H, b


# ---------------------------------------------------------------------------------------
# Symbolic derivations (sympy). Each returns expressions that must simplify to 0.
# ---------------------------------------------------------------------------------------

def symbolic_ce_reduction():
    """The one-scalar CE problem g(c) = log(1 + (k-1) e^{-c}) + (k-1) s c and its solution.

    Returns a dict of sympy expressions that must each simplify to 0:
    - ``stationarity``: g'(c*) with c* = log(1/s - (k-1));
    - ``value``: g(c*) = f*_closed, as the identity (1 + (k-1) e^{-c*})(1 - (k-1) s) - 1 = 0;
    - ``threshold``: g'(0) at s = 1/k (the trivial phase starts where g'(0) >= 0);
    - ``convexity_identity``: g'' - (k-1)e^{-c}/(1 + (k-1)e^{-c})^2 (so g'' > 0: unique minimiser);
    - ``nuclear_norm``: ||c J_k Y||_* - (k-1) sqrt(n) c via the eigenvalues of (J Y)(J Y)^T = n J (k = 4).
    """
    import sympy as sp

    c, s = sp.symbols("c s", positive=True)
    k = sp.Symbol("k", integer=True, positive=True)
    n = sp.Symbol("n", positive=True)
    g = sp.log(1 + (k - 1) * sp.exp(-c)) + (k - 1) * s * c
    cstar = sp.log(1 / s - (k - 1))
    dg = sp.diff(g, c)
    out = {
        "stationarity": sp.simplify(dg.subs(c, cstar)),
        # the linear terms agree by construction; the log terms agree iff this product is 1
        "value": sp.simplify((1 + (k - 1) * sp.exp(-cstar)) * (1 - (k - 1) * s) - 1),
        "threshold": sp.simplify(dg.subs(c, 0).subs(s, 1 / k)),
    }
    g2 = sp.diff(g, c, 2)
    out["convexity_identity"] = sp.simplify(g2 - (k - 1) * sp.exp(-c) / (1 + (k - 1) * sp.exp(-c)) ** 2)
    kk = 4
    J = sp.eye(kk) - sp.ones(kk, kk) / kk
    evs = (n * J).eigenvals()
    out["nuclear_norm"] = sp.simplify(sum(sp.sqrt(ev) * mult for ev, mult in evs.items()) - (kk - 1) * sp.sqrt(n))
    return out


def symbolic_mse_reduction():
    """The one-scalar MSE problem q(z) = (k-1)((sqrt(n) - z)^2/(2N) + lam z) after soft thresholding.

    Returns expressions that must simplify to 0: ``stationarity`` (q'(z*) at z* = sqrt(n) - N lam),
    ``value`` (q at its stationary point solved from q' = 0, minus the closed form written with the stated z*),
    ``prox`` (the proximal step of lam||.||_* on a singular value sigma = sqrt(n) with step N: z = sigma - N lam
    when positive) and ``singular_values`` (the centred labels J_k Y have k - 1 singular values sqrt(n): the
    eigenvalues of (J Y)(J Y)^T = n J, k = 4).
    """
    import sympy as sp

    z, lam, n = sp.symbols("z lam n", positive=True)
    k = sp.Symbol("k", integer=True, positive=True)
    N = n * k
    q = (k - 1) * ((sp.sqrt(n) - z) ** 2 / (2 * N) + lam * z)
    zs = sp.sqrt(n) - N * lam
    closed = (k - 1) * ((sp.sqrt(n) - zs) ** 2 / (2 * N) + lam * zs)
    per = (sp.sqrt(n) - z) ** 2 / (2 * N) + lam * z
    z_solved = sp.solve(sp.diff(q, z), z)[0]
    kk = 4
    J = sp.eye(kk) - sp.ones(kk, kk) / kk
    evs = (n * J).eigenvals()
    return {
        "stationarity": sp.simplify(sp.diff(q, z).subs(z, zs)),
        "value": sp.simplify(q.subs(z, z_solved) - closed),
        "prox": sp.simplify(sp.solve(sp.diff(per, z), z)[0] - zs),
        "singular_values": sp.simplify(sum(sp.sqrt(ev) * mult for ev, mult in evs.items()) - (kk - 1) * sp.sqrt(n)
                                       + sp.Abs(sum(mult for ev, mult in evs.items() if ev != 0) - (kk - 1))),
    }


def minority_collapse_hypotheses(target_gap: float) -> list[str]:
    """The hypotheses of :func:`minority_collapse_ratio` (its derivation takes q_true > q_other; with the `others`
    smoothing convention and eps > (K-1)/K the gap is negative and the formula does not apply). Returns the failed
    ones, as sentences (empty: it applies)."""
    if not float(target_gap) > 0.0:
        return [f"the minority threshold needs a positive target gap q_true - q_other, got {float(target_gap):g}"]
    return []


def minority_collapse_ratio(count: int, N: int, lw: float, lh: float, *, weight: float = 1.0,
                            target_gap: float = 1.0) -> float:
    """theta_a = w_a (q_true - q_other) sqrt(n_a) / (N sqrt(lw lh)) of a group of m_a >= 2 exchangeable classes
    (equal count n_a, equal weight w_a) in the regularised UFM with a cross-entropy-type loss (CE: target gap
    q_true - q_other = 1; label smoothing: the gap of its target; MSE with one-hot targets: w = 1, gap 1).

    Derived in this project (docs/ufm_general.md, "Minority collapse threshold"; reconstructed in the spirit
    of Fang et al., PNAS 2021 and Hong & Ling 2023, not quoted from them): with d >= the rank of the convex
    optimum, if theta_a < 1 every minimiser has identical classifiers and identical feature means on the
    classes of the group; if theta_a > 1 no minimiser has identical classifiers (nor identical class means)
    on them. Returns theta_a."""
    count = as_int("count", count, minimum=1)
    N = as_int("N", N, minimum=1)
    lw = as_float("lambda_w", lw, positive=True)
    lh = as_float("lambda_h", lh, positive=True)
    return float(weight) * float(target_gap) * math.sqrt(count) / (N * math.sqrt(lw * lh))
