"""Canonical representation hypothesis (CRH) and polynomial alignment (PAH): exact identities.

Conventions: docs/crh.md. Source of the hypotheses: Ziyin, Chuang, Galanti, Poggio, "Formation of
Representations in Neural Networks", ICLR 2025 (arXiv 2410.03006). The identities and lemmas in
this module are *derived* in this project (they are not quoted from the paper); the paper's
theorems are reconstructed statements and live as measured claims in ``proofs_check.claims.crh``.

Setting: one fully connected layer without bias, ``h_b = W h_a`` with ``W`` of shape (d_b, d_a);
``g_a = -dl/dh_a``, ``g_b = -dl/dh_b``; second moments ``H_a = E[h_a h_a^T]``, ``H_b``, ``G_a``,
``G_b`` and ``Z_a = W^T W``, ``Z_b = W W^T``.

Every ``sym_*`` function returns sympy objects (matrices or scalars) that must simplify to zero
(or relations that must simplify to True); they are pure functions of their arguments. The
numeric counterparts (machine-precision checks on random matrices) live in ``solvers.crh``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import sympy as sp

from theory._validate import InstanceError, as_float, as_float_tuple, as_int, as_int_tuple

# --------------------------------------------------------------------------------------------
# The six relations
# --------------------------------------------------------------------------------------------

#: relation name -> (first matrix, second matrix). "~" is proportionality with a positive constant.
#: Sides are labelled a (Z_a = W^T W, input side) and b (Z_b = W W^T, output side) because the
#: paper's "forward/backward" naming is not pinned down (docs/crh.md).
RELATIONS: dict[str, tuple[str, str]] = {
    "a-RGA": ("H_a", "G_a"),
    "a-RWA": ("H_a", "Z_a"),
    "a-GWA": ("G_a", "Z_a"),
    "b-RGA": ("H_b", "G_b"),
    "b-RWA": ("H_b", "Z_b"),
    "b-GWA": ("G_b", "Z_b"),
}
RELATION_NAMES: tuple[str, ...] = tuple(RELATIONS)


# --------------------------------------------------------------------------------------------
# Experiment instance (shared by solvers and claims)
# --------------------------------------------------------------------------------------------

#: Ranges accepted by :class:`CRHExperiment` (plain input validation; whether an accepted instance
#: fits the time and memory budget is decided by ``solvers.crh.experiment_budget`` before any work).
#: The step size and weight decay ranges are far beyond where SGD on this model is stable (the
#: reference values are lr 0.05 and gamma <= 1e-2); within them a diverging run is reported, not
#: raised. gamma^2 stays a normal float64 for every gamma in range (the magnitude ratio divides
#: by gamma twice, never by gamma^2).
MAX_STEPS = 10 ** 9
MIN_LR, MAX_LR = 1e-12, 100.0
MAX_WEIGHT_DECAY = 100.0
MAX_SAMPLES = 10 ** 7
MAX_WIDTH = 4096
MAX_LAYERS = 16
MAX_NOISE = 1e6
#: At most this many repetitions (seeds) in one experiment; the lazy scale S within this range.
MAX_SEEDS = 64
MIN_INIT_SCALE, MAX_INIT_SCALE = 1e-3, 1e6
#: Exact (sympy) computations: the symbolic identities use explicit matrices of at most this size and
#: this many samples, the NC closed form at most this many classes (they take seconds beyond).
MAX_SYMBOLIC_DIM = 4
MAX_SYMBOLIC_SAMPLES = 4
MAX_SYMBOLIC_CLASSES = 64


def _sym_sizes(**sizes) -> tuple[int, ...]:
    out = []
    for name, v in sizes.items():
        cap = MAX_SYMBOLIC_SAMPLES if name == "n_samples" else MAX_SYMBOLIC_DIM
        out.append(as_int(name, v, minimum=1, maximum=cap))
    return tuple(out)


@dataclass(frozen=True)
class CRHExperiment:
    """The small MLP experiment of docs/crh.md ("Small experiment that shows the effect").

    Inputs x ~ N(0, I_{widths[0]}), ``n_samples`` of them; targets
    y = A tanh(2 B x) + ``noise`` * eps with B of shape (task_rank, d_in) and A of shape
    (d_out, task_rank); MLP with the given widths, ``activation`` (tanh or relu) between layers,
    no biases, per-sample loss l = ||f(x) - y||^2 / 2; SGD with batch ``batch_size``, step ``lr``
    and weight decay gamma (one independent run per entry of ``weight_decays``, all runs share
    data, initialisation and minibatch order); matrices averaged over ``n_records`` evenly spaced
    checkpoints in the second half of training.
    """

    weight_decays: tuple[float, ...] = (0.0, 1e-2)
    steps: int = 200_000
    lr: float = 0.05
    batch_size: int = 8
    n_samples: int = 512
    widths: tuple[int, ...] = (16, 32, 32, 32, 4)
    task_rank: int = 4
    noise: float = 0.1
    seed: int = 0
    n_records: int = 200
    activation: str = "tanh"
    #: Independent repetitions: every seed draws its own data, teacher, initialisation and minibatch
    #: order; the runs are all (seed, weight decay) pairs, seed-major. Empty: the single ``seed``.
    seeds: tuple[int, ...] = ()
    #: Lazy-training scale S (Chizat, Oyallon, Bach 2019): the model is S (f(x; W) - f(x; W_0)) with the
    #: loss ||S (f - f_0) - y||^2 / (2 S^2), i.e. f is trained on the targets f_0 + y / S (the weights move
    #: O(1/S): lazy at large S, feature learning at small S). None: the plain model f.
    init_scale: float | None = None
    #: Gaussian noise N(0, neuron_noise^2 I) added to the neurons h = s(z) output by layer ``noise_layer``
    #: (1-based, a hidden layer: 1 <= L <= n_layers - 1) in every SGD step (training only; fresh per sample
    #: and step; the checkpoint statistics use the clean network). 0: no noise.
    neuron_noise: float = 0.0
    noise_layer: int | None = None

    def __post_init__(self):
        wd = as_float_tuple("weight_decays", self.weight_decays, min_len=1)
        for i, g in enumerate(wd):
            if not 0.0 <= g <= MAX_WEIGHT_DECAY:
                raise InstanceError(f"weight_decays[{i}] (weight decay) must be in [0, {MAX_WEIGHT_DECAY:g}], got {g}")
        object.__setattr__(self, "weight_decays", wd)
        object.__setattr__(self, "steps", as_int("steps", self.steps, minimum=2, maximum=MAX_STEPS))
        lr = as_float("lr", self.lr, positive=True)
        if not MIN_LR <= lr <= MAX_LR:
            raise InstanceError(f"lr (SGD step size) must be in [{MIN_LR:g}, {MAX_LR:g}], got {lr:g}")
        object.__setattr__(self, "lr", lr)
        object.__setattr__(self, "n_samples", as_int("n_samples", self.n_samples, minimum=2, maximum=MAX_SAMPLES))
        object.__setattr__(self, "batch_size", as_int("batch_size", self.batch_size, minimum=1,
                                                      maximum=self.n_samples))
        widths = as_int_tuple("widths", self.widths, minimum=1, min_len=2)
        if len(widths) > MAX_LAYERS + 1:
            raise InstanceError(f"widths must have at most {MAX_LAYERS + 1} entries ({MAX_LAYERS} layers), "
                                f"got {len(widths)}")
        for i, w in enumerate(widths):
            if w > MAX_WIDTH:
                raise InstanceError(f"widths[{i}] must be <= {MAX_WIDTH}, got {w}")
        object.__setattr__(self, "widths", widths)
        object.__setattr__(self, "task_rank", as_int("task_rank", self.task_rank, minimum=1, maximum=MAX_WIDTH))
        noise = as_float("noise", self.noise, nonnegative=True)
        if noise > MAX_NOISE:
            raise InstanceError(f"noise must be in [0, {MAX_NOISE:g}], got {noise:g}")
        object.__setattr__(self, "noise", noise)
        object.__setattr__(self, "seed", as_int("seed", self.seed, minimum=0, maximum=2 ** 63 - 1))
        object.__setattr__(self, "n_records", as_int("n_records", self.n_records, minimum=1,
                                                     maximum=max(1, self.steps - self.steps // 2)))
        if not isinstance(self.activation, str) or self.activation not in ("tanh", "relu"):
            raise InstanceError(f"activation must be 'tanh' or 'relu', got {self.activation!r}")
        seeds = as_int_tuple("seeds", self.seeds, minimum=0, min_len=0)
        if len(seeds) > MAX_SEEDS:
            raise InstanceError(f"seeds must have at most {MAX_SEEDS} entries, got {len(seeds)}")
        if len(set(seeds)) != len(seeds):
            raise InstanceError(f"seeds must be distinct, got {list(seeds)}")
        for i, sd in enumerate(seeds):
            if sd > 2 ** 63 - 1:
                raise InstanceError(f"seeds[{i}] must be in [0, 2^63 - 1], got {sd}")
        object.__setattr__(self, "seeds", seeds)
        if self.init_scale is not None:
            sc = as_float("init_scale", self.init_scale, positive=True)
            if not MIN_INIT_SCALE <= sc <= MAX_INIT_SCALE:
                raise InstanceError(f"init_scale (lazy-training scale S) must be in [{MIN_INIT_SCALE:g}, "
                                    f"{MAX_INIT_SCALE:g}], got {sc:g}")
            object.__setattr__(self, "init_scale", sc)
        nn = as_float("neuron_noise", self.neuron_noise, nonnegative=True)
        if nn > MAX_NOISE:
            raise InstanceError(f"neuron_noise must be in [0, {MAX_NOISE:g}], got {nn:g}")
        object.__setattr__(self, "neuron_noise", nn)
        if self.noise_layer is not None:
            object.__setattr__(self, "noise_layer", as_int("noise_layer", self.noise_layer, minimum=1,
                                                           maximum=max(1, len(widths) - 2)))
            if len(widths) < 3:
                raise InstanceError("noise_layer needs a hidden layer (at least two layers)")
        if nn > 0 and self.noise_layer is None:
            raise InstanceError("neuron_noise > 0 needs noise_layer (the hidden layer whose neurons get the noise)")

    @property
    def run_seeds(self) -> tuple[int, ...]:
        """The seeds of the repetitions (``seeds`` or the single ``seed``)."""
        return self.seeds or (self.seed,)

    @property
    def runs(self) -> list[tuple[int, float]]:
        """(seed, weight decay) of every run, seed-major (run index = seed index * len(weight_decays) + j)."""
        return [(s, g) for s in self.run_seeds for g in self.weight_decays]

    @property
    def n_layers(self) -> int:
        return len(self.widths) - 1

    def to_dict(self) -> dict:
        out = {"weight_decays": list(self.weight_decays), "steps": self.steps, "lr": self.lr,
               "batch_size": self.batch_size, "n_samples": self.n_samples, "widths": list(self.widths),
               "task_rank": self.task_rank, "noise": self.noise, "seed": self.seed,
               "n_records": self.n_records, "activation": self.activation}
        if self.seeds:
            out["seeds"] = list(self.seeds)
        if self.init_scale is not None:
            out["init_scale"] = self.init_scale
        if self.noise_layer is not None:
            out["neuron_noise"] = self.neuron_noise
            out["noise_layer"] = self.noise_layer
        return out


# --------------------------------------------------------------------------------------------
# Symbolic helpers
# --------------------------------------------------------------------------------------------

def _mat(name: str, rows: int, cols: int) -> sp.Matrix:
    return sp.Matrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{i}{j}", real=True))


def _vec(name: str, n: int) -> sp.Matrix:
    return sp.Matrix(n, 1, lambda i, _: sp.Symbol(f"{name}_{i}", real=True))


def _cs(t):
    """(cos, sin) of a rotation in the rational (Cayley) parametrisation t = tan(angle/2): every
    rotation except by pi, and expressions stay rational functions (fast exact cancellation)."""
    return (1 - t ** 2) / (1 + t ** 2), 2 * t / (1 + t ** 2)


def _rot(t) -> sp.Matrix:
    c, s = _cs(t)
    return sp.Matrix([[c, -s], [s, c]])


def _canon(e):
    """Fast exact normal form for the rational expressions (with symbolic powers) built here."""
    return sp.cancel(sp.powsimp(sp.expand(e), force=True))


# --------------------------------------------------------------------------------------------
# Exact identities (derived): functions returning expressions that must simplify to 0
# --------------------------------------------------------------------------------------------

def sym_backprop(m: int = 2, n: int = 3, n_samples: int = 2, *, predict_H_b=None, predict_G_a=None) -> dict:
    """g_a = W^T g_b (chain rule), H_b = W H_a W^T, G_a = W^T G_b W.

    Returns {name: sympy Matrix that must be zero}. ``predict_H_b(W, H_a)`` and
    ``predict_G_a(W, G_b)`` are the statements under test (defaults: the true identities); they
    must accept sympy matrices (use ``@`` or ``*``).
    """
    m, n, n_samples = _sym_sizes(m=m, n=n, n_samples=n_samples)
    predict_H_b = predict_H_b or (lambda W, H: W @ H @ W.T)
    predict_G_a = predict_G_a or (lambda W, G: W.T @ G @ W)
    W = _mat("w", m, n)
    # Chain rule with a generic smooth per-sample loss l(h_b).
    h = _vec("h", n)
    u = _vec("u", m)
    ell = sp.Function("l")(*u)
    hb = W * h
    loss_of_h = ell.subs(dict(zip(u, hb)), simultaneous=True)
    g_a = sp.Matrix([-sp.diff(loss_of_h, h[i]) for i in range(n)])
    g_b = sp.Matrix([-sp.diff(ell, u[j]) for j in range(m)]).subs(dict(zip(u, hb)), simultaneous=True)
    chain = (g_a - W.T * g_b).applyfunc(lambda e: sp.simplify(e.doit()))
    # Second moments over n_samples explicit samples.
    hs = [_vec(f"x{k}", n) for k in range(n_samples)]
    gs = [_vec(f"y{k}", m) for k in range(n_samples)]
    H_a = sum((x * x.T for x in hs), sp.zeros(n, n)) / n_samples
    H_b = sum(((W * x) * (W * x).T for x in hs), sp.zeros(m, m)) / n_samples
    G_b = sum((y * y.T for y in gs), sp.zeros(m, m)) / n_samples
    G_a = sum(((W.T * y) * (W.T * y).T for y in gs), sp.zeros(n, n)) / n_samples
    return {"g_a = W^T g_b": chain,
            "H_b = W H_a W^T": (H_b - sp.Matrix(predict_H_b(W, H_a))).expand(),
            "G_a = W^T G_b W": (G_a - sp.Matrix(predict_G_a(W, G_b))).expand()}


def sym_transfer(*, shift=1) -> dict:
    """Transfer: W (W^T W)^p W^T = (W W^T)^(p + shift), true for shift = 1, real p >= 0.

    With the SVD W = U S V^T (U, V orthogonal) and the PSD power (Q A Q^T)^p = Q A^p Q^T, both
    sides are conjugates by U of diagonal matrices, so the identity reduces to
    S (S^T S)^p S^T = (S S^T)^(p + shift) for the rectangular diagonal S; checked here for S of
    shape 2 x 3 and 3 x 2, full rank and rank one (0^p = 0 for p > 0). Also H_a = V phi(S^T S) V^T
    gives H_b = U S S^T phi(S S^T) U^T for an arbitrary function phi. Returns {name: Matrix == 0}.
    (The general-W statement is checked numerically in the claim.)
    """
    s1, s2 = sp.symbols("s1 s2", positive=True)
    p = sp.Symbol("p", positive=True)
    phi = sp.Function("phi")

    def dpow(D, q):  # power of a diagonal PSD matrix, 0^q = 0 for q > 0
        return sp.diag(*[sp.Integer(0) if D[i, i] == 0 else D[i, i] ** q for i in range(D.shape[0])])

    def dfun(D):
        return sp.diag(*[phi(D[i, i]) for i in range(D.shape[0])])

    out = {}
    for label, svals in (("full rank", (s1, s2)), ("rank one", (s1, sp.Integer(0)))):
        for shape in ((2, 3), (3, 2)):
            Sm = sp.zeros(*shape)
            for i, v in enumerate(svals):
                Sm[i, i] = v
            lhs = Sm * dpow(Sm.T * Sm, p) * Sm.T
            rhs = dpow(Sm * Sm.T, p + shift)
            out[f"S (S^T S)^p S^T = (S S^T)^(p+{shift}) ({label}, {shape[0]}x{shape[1]})"] = \
                (lhs - rhs).applyfunc(lambda e: sp.powsimp(sp.expand(e), force=True))
            phi_lhs = Sm * dfun(Sm.T * Sm) * Sm.T
            phi_rhs = Sm * Sm.T * dfun(Sm * Sm.T)
            # phi(0) on the null directions is killed by S: compare on the range only.
            out[f"S phi(S^T S) S^T = S S^T phi(S S^T) ({label}, {shape[0]}x{shape[1]})"] = \
                (phi_lhs - phi_rhs).applyfunc(sp.expand)
    return out


def sym_scaled_projector() -> dict:
    """Scaled projector: for symmetric A = Q diag(lambda) Q^T, A^2 - cA = Q diag(lambda^2 - c lambda) Q^T,
    so A^2 = cA iff every eigenvalue is 0 or c; full CRH (H_a ~ Z_a and H_b ~ Z_b) forces Z_b^2 ~ Z_b,
    i.e. equal nonzero singular values.

    Returns {name: (kind, object)} with kind "zero" (must simplify to 0) or "true" (relation).
    """
    lam, c = sp.symbols("lambda c", real=True)
    th = sp.Symbol("t", real=True)
    l1, l2 = sp.symbols("l1 l2", real=True)
    Q = _rot(th)
    A = Q * sp.diag(l1, l2) * Q.T
    out = {
        "A^2 - cA = Q diag(l^2 - c l) Q^T": ("zero", (A * A - c * A - Q * sp.diag(l1 ** 2 - c * l1,
                                                                            l2 ** 2 - c * l2) * Q.T).applyfunc(_canon)),
        "roots of l^2 - c l are {0, c}": ("true", sp.Eq(sp.solveset(lam ** 2 - c * lam, lam, sp.S.Reals),
                                                         sp.FiniteSet(0, c))),
    }
    # Full CRH: H_a = k1 Z_a => H_b = W H_a W^T = k1 Z_b^2; with H_b = k2 Z_b this is
    # k1 s^4 = k2 s^2 in each singular direction: every nonzero s^2 equals k2/k1.
    s, k1, k2 = sp.symbols("s k1 k2", positive=True)
    out["full CRH: k1 s^4 = k2 s^2 (s > 0) iff s^2 = k2/k1"] = (
        "true", sp.Eq(sp.solveset(k1 * s ** 4 - k2 * s ** 2, s, sp.Interval.open(0, sp.oo)),
                      sp.FiniteSet(sp.sqrt(k2 / k1))))
    return out


def sym_isotropy_on_range() -> dict:
    """W X W^T = U S (V^T X V) S U^T for W = U S V^T (compact SVD: S invertible r x r, U
    orthogonal, V with orthonormal columns), and with V^T V = I: V^T (H - cI) V = V^T H V - c I_r.
    Since U S is invertible, W (H_a - cI) W^T = 0 iff V^T H_a V = c I_r, i.e. H_a compressed to
    row(W) is c times the identity. Checked for W of shape 2 x 3 with generic symbol matrices
    (the orthonormality of V enters only through V^T V = I, substituted as a symbol-free identity)."""
    c = sp.Symbol("c", positive=True)
    s1, s2 = sp.symbols("s1 s2", positive=True)
    U = _mat("u", 2, 2)
    Vt = _mat("v", 2, 3)
    S = sp.diag(s1, s2)
    W = U * S * Vt
    X = sp.Matrix(3, 3, lambda i, j: sp.Symbol(f"x_{min(i, j)}{max(i, j)}", real=True))
    lhs = W * (X - c * sp.eye(3)) * W.T
    rhs = U * S * (Vt * X * Vt.T - c * Vt * Vt.T) * S * U.T
    return {"W (H - cI) W^T = U S (V^T H V - c V^T V) S U^T": ("zero", (lhs - rhs).applyfunc(sp.expand))}


def sym_stationarity(m: int = 2, n: int = 2, n_samples: int = 2, *, predict_b=None, predict_a=None) -> dict:
    """Mean stationarity: E[g_b h_a^T] = gamma W implies E[g_b h_b^T] = gamma Z_b and
    E[g_a h_a^T] = gamma Z_a. ``predict_b(W, gamma)`` / ``predict_a(W, gamma)`` are the
    statements under test (defaults gamma W W^T and gamma W^T W).

    The stationarity constraint is imposed by solving it for W (W = E[g_b h_a^T] / gamma) and
    substituting, so the check uses nothing else. Also the ReLU per-neuron balance:
    relu(a x) = a relu(x) for a > 0, and d/dt at t = 0 of (gamma/2)(e^{2t}|w_in|^2 + e^{-2t}|w_out|^2)
    is gamma(|w_in|^2 - |w_out|^2): at a critical point of loss + weight decay the loss part of
    that derivative is 0, so |w_in|^2 = |w_out|^2, i.e. diag(Z_b of layer l) = diag(Z_a of layer l+1).
    """
    m, n, n_samples = _sym_sizes(m=m, n=n, n_samples=n_samples)
    predict_b = predict_b or (lambda W, g: g * W * W.T)
    predict_a = predict_a or (lambda W, g: g * W.T * W)
    gam = sp.Symbol("gamma", positive=True)
    hs = [_vec(f"x{k}", n) for k in range(n_samples)]
    gs = [_vec(f"y{k}", m) for k in range(n_samples)]
    S = sum((y * x.T for y, x in zip(gs, hs)), sp.zeros(m, n)) / n_samples
    W = S / gam  # the unique W with E[g_b h_a^T] = gamma W
    E_gb_hb = sum((y * (W * x).T for y, x in zip(gs, hs)), sp.zeros(m, m)) / n_samples
    E_ga_ha = sum(((W.T * y) * x.T for y, x in zip(gs, hs)), sp.zeros(n, n)) / n_samples
    # entries are Laurent polynomials in gamma (W = S / gamma): expansion is canonical and 10x cheaper than simplify
    out = {"E[g_b h_b^T] = gamma Z_b": ("zero", (E_gb_hb - sp.Matrix(predict_b(W, gam))).applyfunc(sp.expand)),
           "E[g_a h_a^T] = gamma Z_a": ("zero", (E_ga_ha - sp.Matrix(predict_a(W, gam))).applyfunc(sp.expand))}
    a = sp.Symbol("a", positive=True)
    xp, xn = sp.Symbol("x", positive=True), sp.Symbol("x", negative=True)
    out["relu(a x) = a relu(x), a > 0, x > 0"] = ("zero", sp.Max(0, a * xp) - a * sp.Max(0, xp))
    out["relu(a x) = a relu(x), a > 0, x < 0"] = ("zero", sp.Max(0, a * xn) - a * sp.Max(0, xn))
    t = sp.Symbol("t", real=True)
    win, wout = sp.symbols("win2 wout2", nonnegative=True)
    pen = gam / 2 * (sp.exp(2 * t) * win + sp.exp(-2 * t) * wout)
    out["d/dt penalty at t=0 = gamma(|w_in|^2 - |w_out|^2)"] = (
        "zero", sp.diff(pen, t).subs(t, 0) - gam * (win - wout))
    return out


def sym_one_step(m: int = 2, n: int = 3, *, eta2_coefficient=None) -> dict:
    """One SGD step Delta W = eta (S - gamma W):
    Delta Z_b = eta (S W^T + W S^T - 2 gamma Z_b) + eta^2 (S - gamma W)(S - gamma W)^T and
    Delta Z_a = eta (S^T W + W^T S - 2 gamma Z_a) + eta^2 (S - gamma W)^T (S - gamma W), exactly.
    ``eta2_coefficient(S, W, gamma)`` replaces the second-order term of Delta Z_b (for false statements).
    """
    m, n = _sym_sizes(m=m, n=n)
    eta, gam = sp.symbols("eta gamma", real=True)
    W, S = _mat("w", m, n), _mat("s", m, n)
    D = S - gam * W
    second = eta2_coefficient(S, W, gam) if eta2_coefficient is not None else D * D.T
    Wn = W + eta * D
    dZb = Wn * Wn.T - W * W.T
    dZa = Wn.T * Wn - W.T * W
    pred_b = eta * (S * W.T + W * S.T - 2 * gam * W * W.T) + eta ** 2 * sp.Matrix(second)
    pred_a = eta * (S.T * W + W.T * S - 2 * gam * W.T * W) + eta ** 2 * D.T * D
    return {"Delta Z_b": (dZb - pred_b).expand(), "Delta Z_a": (dZa - pred_a).expand()}


# --------------------------------------------------------------------------------------------
# Exponent bookkeeping (PAH): nine pairs of relations, one per side
# --------------------------------------------------------------------------------------------

#: Exponents in the exponent table are stated in the form "first ~ second^e" for each relation:
#: a-RGA: H_a ~ G_a^e, a-RWA: H_a ~ Z_a^e, a-GWA: G_a ~ Z_a^e, and the same on side b.
#: With H_a ~ Z_a^x and G_b ~ Z_b^y, the transfer lemma gives H_b ~ Z_b^(x+1), G_a ~ Z_a^(y+1).
SIDE_A = ("a-RGA", "a-RWA", "a-GWA")
SIDE_B = ("b-RGA", "b-RWA", "b-GWA")

#: The value reported for an RGA exponent when both matrices are isotropic (0/0): any exponent fits.
ANY = "any"


def _relation_equation(rel: str, x, y):
    """Exponent equation of a relation in terms of x (H_a ~ Z_a^x) and y (G_b ~ Z_b^y)."""
    ha, ga, hb, gb = x, y + 1, x + 1, y  # Z-exponents of H_a, G_a, H_b, G_b
    return {"a-RGA": sp.Eq(ha, ga), "a-RWA": sp.Eq(ha, 1), "a-GWA": sp.Eq(ga, 1),
            "b-RGA": sp.Eq(hb, gb), "b-RWA": sp.Eq(hb, 1), "b-GWA": sp.Eq(gb, 1)}[rel]


def _ratio(num, den):
    if den == 0:
        return ANY if num == 0 else None
    return sp.Rational(num) / sp.Rational(den)


def exponent_table() -> dict:
    """For each of the nine pairs (one relation on side a, one on side b): solve for the exponents.

    Returns {(rel_a, rel_b): entry}; entry is {"degenerate": True} when the two relations are
    inconsistent for a Z with distinct nonzero eigenvalues (then Z must be a scaled projector),
    else {"degenerate": False, "x": x, "y": y, "exponents": {relation: e}} with e a sympy Rational,
    ``ANY`` (both sides isotropic) or None (no power law of this form).
    """
    x, y = sp.symbols("x y", real=True)
    out = {}
    for ra in SIDE_A:
        for rb in SIDE_B:
            sol = sp.linsolve([_relation_equation(ra, x, y), _relation_equation(rb, x, y)], [x, y])
            if sol == sp.EmptySet:
                out[(ra, rb)] = {"degenerate": True}
                continue
            (xv, yv), = tuple(sol)
            ha, ga, hb, gb = xv, yv + 1, xv + 1, yv
            exps = {"a-RGA": _ratio(ha, ga), "a-RWA": sp.Rational(ha), "a-GWA": sp.Rational(ga),
                    "b-RGA": _ratio(hb, gb), "b-RWA": sp.Rational(hb), "b-GWA": sp.Rational(gb)}
            out[(ra, rb)] = {"degenerate": False, "x": sp.Rational(xv), "y": sp.Rational(yv), "exponents": exps}
    return out


#: The exponent table written out by hand (docs/crh.md, "Exact identities"): the reference the
#: sympy solution of :func:`exponent_table` is compared with. (x, y) per finite pair.
REFERENCE_PAIRS: dict[tuple[str, str], tuple[Fraction, Fraction] | None] = {
    ("a-RGA", "b-RGA"): None, ("a-RWA", "b-RWA"): None, ("a-GWA", "b-GWA"): None,
    ("a-RGA", "b-RWA"): (Fraction(0), Fraction(-1)),
    ("a-RGA", "b-GWA"): (Fraction(2), Fraction(1)),
    ("a-RWA", "b-RGA"): (Fraction(1), Fraction(2)),
    ("a-RWA", "b-GWA"): (Fraction(1), Fraction(1)),
    ("a-GWA", "b-RGA"): (Fraction(-1), Fraction(0)),
    ("a-GWA", "b-RWA"): (Fraction(0), Fraction(0)),
}

#: Every finite exponent of the table lies in this set (docs/crh.md).
REFERENCE_EXPONENT_SET = frozenset({Fraction(-1), Fraction(0), Fraction(1, 3), Fraction(1, 2),
                                    Fraction(1), Fraction(2), Fraction(3)})


def exponent_values(table: dict | None = None) -> set[Fraction]:
    """All finite exponents (excluding ``ANY`` and None) in an exponent table."""
    table = exponent_table() if table is None else table
    vals = set()
    for entry in table.values():
        if entry["degenerate"]:
            continue
        for e in entry["exponents"].values():
            if e is not None and e != ANY:
                vals.add(Fraction(int(sp.numer(e)), int(sp.denom(e))))
    return vals


def z_exponents(x, y) -> dict[str, float]:
    """Z-exponents implied by H_a ~ Z_a^x, G_b ~ Z_b^y: H_b ~ Z_b^(x+1), G_a ~ Z_a^(y+1)."""
    return {"H_a": float(x), "G_a": float(y) + 1.0, "H_b": float(x) + 1.0, "G_b": float(y)}


def psd_power(A, p: float, *, rel_floor: float = 0.0) -> np.ndarray:
    """PSD matrix power via eigh (eigenvalues clipped at 0; 0^0 = 1, 0^p = 0 for p > 0; negative
    p inverts on the range only, eigenvalues <= rel_floor * max treated as 0)."""
    A = np.asarray(A, dtype=np.float64)
    lam, V = np.linalg.eigh((A + A.T) / 2)
    lam = np.clip(lam, 0.0, None)
    top = lam.max(initial=0.0)
    if p == 0:
        f = np.ones_like(lam)
    else:
        zero = lam <= rel_floor * top if rel_floor > 0 else lam <= 0
        f = np.where(zero, 0.0, np.power(np.where(zero, 1.0, lam), p))
    return (V * f) @ V.T


# --------------------------------------------------------------------------------------------
# Neural collapse at the last layer: closed-form alignments (derived)
# --------------------------------------------------------------------------------------------

def nc_imbalanced_cosine(counts) -> sp.Expr:
    """Exact alpha_cos of the four non-RGA relations at an exact NC geometry (simplex-ETF class
    means M, classifier W proportional to M^T, label-only gradients g_b proportional to J e_y) when
    class c has counts[c] samples.

    With D = diag(pi), pi_c = n_c / N: Z_b ~ J, H_b ~ J D J, G_b ~ J D J, and on side a the same
    numbers through M^T M ~ J, so every one of the four equals
    cos(J D J, J) = tr(J D) / (sqrt(tr(J D J D)) sqrt(k - 1)) (J idempotent, ||J||_F^2 = k - 1).
    The two RGA relations stay exactly 1 (W^T g_c ~ mu_c). Balanced classes give 1.
    """
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    if len(counts) > MAX_SYMBOLIC_CLASSES:
        raise InstanceError(f"counts must have at most {MAX_SYMBOLIC_CLASSES} classes (exact sympy arithmetic), "
                            f"got {len(counts)}")
    # exact rational traces (J_ii = 1 - 1/k, J_ij = -1/k, sum pi = 1): tr(J D) = (k - 1)/k and
    # tr(J D J D) = sum_ij J_ij^2 pi_i pi_j = (1 - 1/k)^2 S + (1 - S)/k^2 with S = sum pi^2; sympy's
    # sqrt of a rational is its canonical radical. (Formerly sympy matrices, simplify and nsimplify: 0.14 CPU s
    # at import of the claims, and nsimplify returned a nearby non-exact power product for some counts.)
    k = len(counts)
    N = sum(counts)
    s2 = sum(Fraction(n, N) ** 2 for n in counts)
    num = Fraction(k - 1, k)
    rad = ((1 - Fraction(1, k)) ** 2 * s2 + (1 - s2) / k ** 2) * (k - 1)
    return sp.Rational(num.numerator, num.denominator) / sp.sqrt(sp.Rational(rad.numerator, rad.denominator))


#: Which alignments stay exactly 1 when one neural-collapse property is broken at the last layer,
#: for balanced classes and label-only gradients g_b = J e_y (the quasi-interpolation hypothesis),
#: derived here (M = centred class means, W the classifier, J M^T = M^T, J W = W):
#:
#: - NC1 broken by isotropic within-class scatter (H_a = M M^T / k + s^2 I, M still an ETF, W ~ M^T):
#:   G_a = W^T J W / k ~ M M^T ~ Z_a, and H_b = W H_a W^T ~ J^2 + c J ~ J ~ Z_b ~ G_b, so only the
#:   two relations involving H_a (a-RGA, a-RWA) drop.
#: - NC2 broken (means M centred but not an ETF, W = M^T): H_a ~ M M^T ~ Z_a ~ M J M^T ~ G_a, so side a
#:   stays 1; side b compares Z_b = M^T M, H_b ~ (M^T M)^2 and G_b ~ J, which differ: all three drop.
#: - NC3 broken (M an ETF, W = M^T + E with J E = E): G_a = W^T J W / k = W^T W / k ~ Z_a stays 1;
#:   the other five drop.
NC_BREAK_UNAFFECTED: dict[str, frozenset[str]] = {
    "NC1": frozenset({"a-GWA", "b-RGA", "b-RWA", "b-GWA"}),
    "NC2": frozenset({"a-RGA", "a-RWA", "a-GWA"}),
    "NC3": frozenset({"a-GWA"}),
}


# --------------------------------------------------------------------------------------------
# Inverse powers and linear regression (derived; docs/crh.md, "Normalisation")
# --------------------------------------------------------------------------------------------

def sym_transfer_inverse() -> dict:
    """For W of full column rank: P = W (W^T W)^{-1} W^T satisfies P^2 = P, P^T = P and tr P = d_a (the
    orthogonal projector onto col(W)); so H_a = c Z_a^{-1} gives H_b = W H_a W^T = c P (H_b normalised:
    every nonzero eigenvalue equals c). P depends on col(W) only (W G has the same P for invertible G), and
    a generic 3 x 2 W has col(W) = col([I; b^T]) (G = W_top^{-1}), so the symbolic check uses W = [I; b^T]
    with free b (3 x 2) and, dually, W = [I, b] (2 x 3, full row rank): G_b = c Z_b^{-1} gives
    G_a = W^T G_b W = c W^T (W W^T)^{-1} W, the projector onto row(W). Returns {name: ("zero", expr)}."""
    b1, b2 = sp.symbols("b1 b2", real=True)
    W = sp.Matrix([[1, 0], [0, 1], [b1, b2]])
    P = (W * (W.T * W).inv() * W.T).applyfunc(sp.cancel)
    V = W.T
    Q = (V.T * (V * V.T).inv() * V).applyfunc(sp.cancel)
    return {"P^2 = P (W 3x2 full column rank)": ("zero", (P * P - P).applyfunc(sp.cancel)),
            "P^T = P": ("zero", (P.T - P).applyfunc(sp.cancel)),
            "tr P = d_a = 2": ("zero", sp.cancel(P.trace() - 2)),
            "G_a / c = W^T (W W^T)^{-1} W is a projector (W 2x3 full row rank)": ("zero", (Q * Q - Q).applyfunc(sp.cancel)),
            "tr G_a / c = d_b = 2": ("zero", sp.cancel(Q.trace() - 2))}


def ridge_weights(H: np.ndarray, C_yx: np.ndarray, gamma: float) -> np.ndarray:
    """Stationary weights of ridge regression min E||y - W x||^2 / 2 + (gamma/2) ||W||^2:
    E[(y - W x) x^T] = gamma W, i.e. W = C_yx (H + gamma I)^{-1} (H = E[x x^T], C_yx = E[y x^T])."""
    H = np.asarray(H, dtype=np.float64)
    return np.linalg.solve((H + gamma * np.eye(H.shape[0])).T, np.asarray(C_yx, dtype=np.float64).T).T


def normalisation_condition(H: np.ndarray, gamma: float) -> np.ndarray:
    """The teacher Gram matrix M = A^T A for which ridge regression of y = A x gives Z_a ~ H_a^{-1}:
    M ~ (H + gamma I)^2 H^{-3} (at gamma = 0: M ~ H^{-1}, the whitening teacher A = Q H^{-1/2})."""
    lam, V = np.linalg.eigh((H + H.T) / 2)
    return (V * ((lam + gamma) ** 2 / lam ** 3)) @ V.T


def sym_linear_regression(*, condition: str = "corrected") -> dict:
    """Ridge regression y = A x (noise independent of x), H = E[x x^T] (2 x 2, generic positive definite in
    its eigenbasis H = R diag(l1, l2) R^T), weight decay gamma. Stationarity E[(y - W x) x^T] = gamma W
    gives W = A H (H + gamma I)^{-1} and Z_a = W^T W = (H + gamma)^{-1} H M H (H + gamma)^{-1}, M = A^T A.

    ``condition`` picks M: "corrected" M = k (H + gamma)^2 H^{-3} (then Z_a H = k I exactly: the derived
    condition), "whitening" M = k H^{-1} (the gamma = 0 condition used at gamma > 0), "any" M generic
    symmetric (the thread's unconditional statement). Returns {"Z_a H - k I": ("zero", Matrix)} where k is
    taken as tr(Z_a H)/2 for "any"."""
    l1, l2, gam, k = sp.symbols("l1 l2 gamma k", positive=True)
    # Conjugation by the orthogonal eigenbasis R of H leaves "Z_a H = k I" invariant (R^T (Z_a H) R), so
    # H = diag(l1, l2) and a generic symmetric M in that basis cover every case exactly.
    H = sp.diag(l1, l2)
    Hg_inv = sp.diag(1 / (l1 + gam), 1 / (l2 + gam))
    if condition == "corrected":
        M = k * sp.diag((l1 + gam) ** 2 / l1 ** 3, (l2 + gam) ** 2 / l2 ** 3)
    elif condition == "whitening":
        M = k * sp.diag(1 / l1, 1 / l2)
    elif condition == "any":
        m1, m2, m3 = sp.symbols("m1 m2 m3", real=True)
        M = sp.Matrix([[m1, m2], [m2, m3]])
    else:
        raise InstanceError(f"condition must be 'corrected', 'whitening' or 'any', got {condition!r}")
    Za = Hg_inv * H * M * H * Hg_inv
    ZH = (Za * H).applyfunc(sp.cancel)
    kk = k if condition != "any" else sp.cancel(ZH.trace() / 2)
    return {f"Z_a H_a - k I ({condition})": ("zero", (ZH - kk * sp.eye(2)).applyfunc(sp.cancel))}
