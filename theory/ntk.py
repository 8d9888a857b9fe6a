"""Block-structured NTK dynamics under MSE (neural tangent kernel collapse).

Model (docs/ntk.md; Seleznova, Weitzner, Giryes, Kutyniok, Chou, "Neural (Tangent
Kernel) Collapse", NeurIPS 2023): C balanced classes of m samples, ordered class by class,
N = C m. Features H (n x N), classifier W (C x n), bias b (C), outputs F = W H + b 1^T,
one-hot targets Y = I_C (x) 1_m^T, residual R = F - Y, loss (s/2)||R||_F^2. The "feature model"
gradient flow holds the block feature kernel K fixed:

    dW/dt = -s R H^T,   db/dt = -s R 1,   dH/dt = -s W^T R K,

K_ij = kappa_d (i = j), kappa_c (same class), kappa_n (otherwise).

Everything here is a pure function of the instance: closed forms with numpy, and symbolic
derivations with sympy returning expressions that must simplify to zero. The paper's theorem
wording was not available; the statements are derived here (provenance "derived") and the paper
is the source of the model and the invariant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from theory._validate import InstanceError, as_float, as_float_tuple, as_int

SOURCE = "Seleznova et al., Neural (Tangent Kernel) Collapse, NeurIPS 2023 (arXiv 2305.16427)"

EIGEN_NAMES = ("lambda_0", "lambda_c", "lambda_g")

#: Accepted loss scale s: it multiplies every rate (and the stiffness of the flow); outside
#: [1e-8, 1e8] the rates under- or overflow the integration's tolerances.
S_RANGE = (1e-8, 1e8)
#: Kernel eigenvalues must lie in this range: the invariant divides by them and the flow multiplies
#: by them (1/lambda and lambda times squared feature norms must stay far inside float64).
EIGEN_RANGE = (1e-30, 1e30)


# --------------------------------------------------------------------------------------
# Instance
# --------------------------------------------------------------------------------------

def block_eigenvalues(C: int, m: int, kd: float, kc: float, kn: float) -> tuple[float, float, float]:
    """(lambda_0, lambda_c, lambda_g) of the block kernel (docs/ntk.md, "Spectrum")."""
    return (kd - kc, kd + (m - 1) * kc - m * kn, kd + (m - 1) * kc + m * (C - 1) * kn)


def check_positive_definite(name: str, C: int, m: int, consts) -> tuple[float, float, float]:
    """Raise InstanceError naming the first eigenvalue <= 0 (with its formula and multiplicity)."""
    kd, kc, kn = consts
    lam = block_eigenvalues(C, m, kd, kc, kn)
    what = (
        ("lambda_0", f"{name}_d - {name}_c", "within-class", C * (m - 1)),
        ("lambda_c", f"{name}_d + (m-1) {name}_c - m {name}_n", "class-mean", C - 1),
        ("lambda_g", f"{name}_d + (m-1) {name}_c + m(C-1) {name}_n", "global-mean", 1),
    )
    for value, (lname, formula, kind, mult) in zip(lam, what):
        if not value > 0:
            raise InstanceError(
                f"{name}: block kernel is not positive definite: {lname} = {formula} = {value:.6g} <= 0 "
                f"({kind} eigenvalue, multiplicity {mult}, for C = {C}, m = {m})")
        if not EIGEN_RANGE[0] <= value <= EIGEN_RANGE[1]:
            raise InstanceError(
                f"{name}: {lname} = {formula} = {value:.6g} is outside [{EIGEN_RANGE[0]:g}, {EIGEN_RANGE[1]:g}] "
                f"(float64-safe range: the invariant divides by the eigenvalues; C = {C}, m = {m})")
    return lam


@dataclass(frozen=True)
class NTKInstance:
    """C classes of m samples each with block kernel constants kappa = (kappa_d, kappa_c, kappa_n).

    ``s`` rescales time only (rates scale by s; limits and the invariant do not change).
    The kernel must be positive definite (every eigenvalue > 0); the error names the eigenvalue.
    """

    classes: int
    per_class: int
    kappa: tuple[float, float, float]
    s: float = 1.0

    def __post_init__(self):
        C = as_int("C (classes)", self.classes, minimum=2)
        m = as_int("m (samples per class)", self.per_class, minimum=2)
        kappa = as_float_tuple("kappa", self.kappa, min_len=3)
        if len(kappa) != 3:
            raise InstanceError(f"kappa must have exactly 3 entries (kappa_d, kappa_c, kappa_n), got {len(kappa)}")
        s = as_float("s", self.s, positive=True)
        if not S_RANGE[0] <= s <= S_RANGE[1]:
            raise InstanceError(f"s must be in [{S_RANGE[0]:g}, {S_RANGE[1]:g}] (it rescales time and every rate), got {s:g}")
        check_positive_definite("kappa", C, m, kappa)
        object.__setattr__(self, "classes", C)
        object.__setattr__(self, "per_class", m)
        object.__setattr__(self, "kappa", kappa)
        object.__setattr__(self, "s", s)

    @property
    def N(self) -> int:
        return self.classes * self.per_class

    @property
    def eigenvalues(self) -> tuple[float, float, float]:
        return block_eigenvalues(self.classes, self.per_class, *self.kappa)

    @property
    def labels(self) -> np.ndarray:
        return np.repeat(np.arange(self.classes), self.per_class)

    def to_dict(self) -> dict:
        return {"classes": self.classes, "per_class": self.per_class, "kappa": list(self.kappa), "s": self.s}


# --------------------------------------------------------------------------------------
# Closed forms (numpy)
# --------------------------------------------------------------------------------------

def block_kernel(C: int, m: int, consts) -> np.ndarray:
    """K = (kd - kc) I_N + (kc - kn) (I_C (x) 1_m 1_m^T) + kn 1_N 1_N^T."""
    kd, kc, kn = consts
    N = C * m
    return (kd - kc) * np.eye(N) + (kc - kn) * np.kron(np.eye(C), np.ones((m, m))) + kn * np.ones((N, N))


def projectors(C: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthogonal projectors (P_0, P_c, P_g) onto within-class, centred class-mean, global-mean spaces."""
    N = C * m
    Pg = np.ones((N, N)) / N
    Pclass = np.kron(np.eye(C), np.ones((m, m)) / m)
    return np.eye(N) - Pclass, Pclass - Pg, Pg


def multiplicities(C: int, m: int) -> tuple[int, int, int]:
    return (C * (m - 1), C - 1, 1)


def spectrum(inst: NTKInstance) -> list[dict]:
    """Predicted eigenvalues with multiplicities, in the order (lambda_0, lambda_c, lambda_g)."""
    return [{"name": n, "value": v, "multiplicity": k}
            for n, v, k in zip(EIGEN_NAMES, inst.eigenvalues, multiplicities(inst.classes, inst.per_class))]


def kernel_inverse(inst: NTKInstance) -> np.ndarray:
    """K^{-1} = P_0/lambda_0 + P_c/lambda_c + P_g/lambda_g."""
    P = projectors(inst.classes, inst.per_class)
    return sum(p / lam for p, lam in zip(P, inst.eigenvalues))


def alpha(inst: NTKInstance) -> float:
    """alpha = m kappa_n / lambda_g (the authors' code constant); 1 - alpha C = lambda_c/lambda_g."""
    return inst.per_class * inst.kappa[2] / inst.eigenvalues[2]


def residual_rates(inst: NTKInstance) -> dict:
    """Decay rates of the residual under dR/dt = -s R K (K = the output kernel, gamma block).

    global mean: s lambda_g, centred class means: s lambda_c, within class: s lambda_0.
    """
    l0, lc, lg = inst.eigenvalues
    return {"global": inst.s * lg, "class": inst.s * lc, "within": inst.s * l0}


def output_kernel_constants(kappa, omega: float, a) -> tuple[float, float, float]:
    """gamma = omega kappa + a + 1 when W W^T = omega I and h_i.h_j has block values a."""
    return tuple(omega * k + ai + 1.0 for k, ai in zip(kappa, a))


def small_init_limits(inst: NTKInstance) -> dict:
    """Predicted small-initialisation limit (E -> 0, M^T h_bar = 0, h_bar -> 0, zero loss).

    mean_sq_norm = ||mu_c - h_bar||^2 = sqrt(lambda_c/m)(1 - 1/C) (simplex ETF),
    W_fro_sq = ||W||_F^2 = sqrt(m/lambda_c)(C - 1),
    escape_rate = s sqrt(m lambda_c), late_within_rate = s lambda_0 sqrt(m/lambda_c).
    """
    C, m, s = inst.classes, inst.per_class, inst.s
    l0, lc, lg = inst.eigenvalues
    r = math.sqrt(lc / m)
    return {
        "gram_scale": r,  # M^T M = sqrt(lambda_c/m) J_C
        "mean_sq_norm": r * (1 - 1 / C),
        "W_fro_sq": (C - 1) / r,
        "escape_rate": s * math.sqrt(m * lc),
        "late_within_rate": s * l0 / r,
        "self_duality": 1 / r,  # J_C W = sqrt(m/lambda_c) M^T
        "bias": 1 / C,
    }


def decompose(H: np.ndarray, C: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """H = h_bar 1^T + M (I_C (x) 1_m^T) + D: global mean (n,), centred means M (n x C), deviations D (n x N)."""
    n = H.shape[0]
    mu = H.reshape(n, C, m).mean(axis=2)
    hbar = mu.mean(axis=1)
    M = mu - hbar[:, None]
    D = H - np.repeat(mu, m, axis=1)
    return hbar, M, D


def invariant(W: np.ndarray, H: np.ndarray, inst: NTKInstance) -> np.ndarray:
    """E = W^T W - D D^T/lambda_0 - m M M^T/lambda_c - N h_bar h_bar^T/lambda_g (= W^T W - H K^-1 H^T)."""
    C, m = inst.classes, inst.per_class
    l0, lc, lg = inst.eigenvalues
    hbar, M, D = decompose(H, C, m)
    return W.T @ W - D @ D.T / l0 - m * M @ M.T / lc - inst.N * np.outer(hbar, hbar) / lg


def invariant_code_form(W: np.ndarray, H: np.ndarray, inst: NTKInstance) -> np.ndarray:
    """The authors' code form: W^T W - (m/lc) Hbar Hbar^T - D D^T/l0 + (alpha C^2 m/lc) h_bar h_bar^T,
    Hbar = uncentred class means (n x C)."""
    C, m = inst.classes, inst.per_class
    l0, lc, lg = inst.eigenvalues
    hbar, M, D = decompose(H, C, m)
    Hbar = M + hbar[:, None]
    a = alpha(inst)
    return W.T @ W - (m / lc) * Hbar @ Hbar.T - D @ D.T / l0 + (a * C * C * m / lc) * np.outer(hbar, hbar)


def nc1_zero_loss_bound(inst: NTKInstance, E: np.ndarray, rank: int) -> float:
    """||D||_F^2 <= rank(D) lambda_0 max(0, -lambda_min(E)) at zero loss."""
    lmin = float(np.linalg.eigvalsh((E + E.T) / 2)[0])
    return rank * inst.eigenvalues[0] * max(0.0, -lmin)


def nonetf_gram(inst: NTKInstance, g: np.ndarray) -> np.ndarray:
    """The Gram G = M^T M forced by E = 0, D = 0, zero loss when g = M^T h_bar (C-vector, g ⟂ 1):
    (m/lambda_c) G^2 + (N/lambda_g) g g^T = J_C, G PSD with G 1 = 0."""
    C, m = inst.classes, inst.per_class
    l0, lc, lg = inst.eigenvalues
    J = np.eye(C) - np.ones((C, C)) / C
    A = J - inst.N / lg * np.outer(g, g)
    w, V = np.linalg.eigh((A + A.T) / 2)
    if w.min() < -1e-12:
        raise InstanceError(f"g: (N/lambda_g) g g^T must not exceed J_C (need (N/lambda_g)|g|^2 <= 1), "
                            f"smallest eigenvalue {w.min():.3g}")
    w = np.where(w > 1e-12, w, 0.0)  # the zero eigenvalue (direction 1) must stay exactly 0 under sqrt
    return math.sqrt(lc / m) * (V * np.sqrt(w)) @ V.T


# --------------------------------------------------------------------------------------
# Symbolic derivations (sympy). Each returns expressions that must simplify to 0.
# --------------------------------------------------------------------------------------

def _sp():
    import sympy as sp

    return sp


@lru_cache(maxsize=None)
def kappa_symbols():
    sp = _sp()
    return sp.symbols("kappa_d kappa_c kappa_n", real=True)


def distinct(exprs) -> list:
    """Distinct expressions (matrices built from block patterns repeat entries)."""
    out, seen = [], set()
    for e in exprs:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


def _poly_domain(*matrices, extra=()):
    """The polynomial ring QQ[symbols] of the given sympy matrices (plus ``extra`` symbols), for exact expansion:
    products of :class:`DomainMatrix` over it are expanded polynomials with rational coefficients (about 20x faster
    than ``sympy.expand`` of the same products; the entries come back by ``to_Matrix()`` in expanded form)."""
    sp = _sp()
    syms = set(extra)
    for M in matrices:
        syms |= set().union(*[sp.sympify(e).free_symbols for e in M]) if len(M) else set()
    return sp.QQ[tuple(sorted(syms, key=str))]


def _dm(M, K):
    """A sympy matrix (entries polynomial in K's symbols) as a DomainMatrix over the ring K."""
    from sympy.polys.matrices import DomainMatrix

    return DomainMatrix.from_Matrix(_sp().Matrix(M)).convert_to(K)


def _dm_trace(A, K):
    """The trace of a square DomainMatrix over K (an element of K)."""
    return sum(A.diagonal(), K.zero)


def sym_eigenvalues(C, m, kd, kc, kn):
    """Symbolic (lambda_0, lambda_c, lambda_g); C and m may be symbols."""
    return (kd - kc, kd + (m - 1) * kc - m * kn, kd + (m - 1) * kc + m * (C - 1) * kn)


def sym_block_kernel(C: int, m: int, consts=None):
    sp = _sp()
    kd, kc, kn = consts or kappa_symbols()
    N = C * m
    return sp.Matrix(N, N, lambda i, j: kd if i == j else (kc if i // m == j // m else kn))


def sym_eigenbasis(C: int, m: int):
    """Explicit eigenvectors (rational): within-class e_{c,0} - e_{c,j}; class e_{0-block} - e_{c-block};
    global all-ones. Returned as three lists of column vectors."""
    sp = _sp()
    N = C * m
    within, cls = [], []
    for c in range(C):
        for j in range(1, m):
            v = sp.zeros(N, 1)
            v[c * m, 0], v[c * m + j, 0] = 1, -1
            within.append(v)
    for c in range(1, C):
        v = sp.zeros(N, 1)
        for i in range(m):
            v[i, 0], v[c * m + i, 0] = 1, -1
        cls.append(v)
    return within, cls, [sp.ones(N, 1)]


def sym_spectrum_residuals(C: int, m: int, eigen=None):
    """Expressions K v - lambda v (entries) for each eigenvector of the explicit basis, and the
    rank deficit of the basis (must be 0: then the multiplicities are complete).

    ``eigen`` = function (C, m, kd, kc, kn) -> (l0, lc, lg); default the closed forms of docs/ntk.md. Returns
    (list of expressions, rank deficit int).
    """
    sp = _sp()
    kd, kc, kn = kappa_symbols()
    K = sym_block_kernel(C, m)
    lams = (eigen or sym_eigenvalues)(C, m, kd, kc, kn)
    exprs = []
    basis = sym_eigenbasis(C, m)
    for vecs, lam in zip(basis, lams):
        for v in vecs:
            exprs.extend(list(K * v - lam * v))
    V = sp.Matrix.hstack(*[v for vecs in basis for v in vecs])
    return exprs, C * m - V.rank()


def sym_projectors(C: int, m: int):
    sp = _sp()
    N = C * m
    Pg = sp.ones(N, N) / N
    Pclass = sp.Matrix(N, N, lambda i, j: sp.Rational(1, m) if i // m == j // m else 0)
    return sp.eye(N) - Pclass, Pclass - Pg, Pg


def sym_inverse_residual(C: int, m: int):
    """Entries of K (P_0/l0 + P_c/lc + P_g/lg) - I with the (nonzero) denominators cleared, i.e.
    K (lc lg P_0 + l0 lg P_c + l0 lc P_g) - l0 lc lg I, expanded (must all be 0).

    Returns (distinct residual entries, K^{-1} as a sympy matrix of rational functions).
    """
    sp = _sp()
    kd, kc, kn = kappa_symbols()
    K = sym_block_kernel(C, m)
    P0, Pc, Pg = sym_projectors(C, m)
    l0, lc, lg = sym_eigenvalues(C, m, kd, kc, kn)
    # K num - l0 lc lg I expanded exactly in QQ[kappa] (DomainMatrix products)
    R = _poly_domain(extra=(kd, kc, kn))
    l0d, lcd, lgd = (R.from_sympy(sp.expand(x)) for x in (l0, lc, lg))
    P0d, Pcd, Pgd = (_dm(P, R) for P in (P0, Pc, Pg))
    num = P0d * (lcd * lgd) + Pcd * (l0d * lgd) + Pgd * (l0d * lcd)
    resid = _dm(K, R) * num - _dm(sp.eye(C * m), R) * (l0d * lcd * lgd)
    Kinv = P0 / l0 + Pc / lc + Pg / lg
    return distinct(resid.to_Matrix()), Kinv


def sym_alpha_identities():
    """alpha (code form) - m kappa_n/lambda_g, and 1 - alpha C - lambda_c/lambda_g, for symbolic C, m."""
    sp = _sp()
    kd, kc, kn = kappa_symbols()
    C, m = sp.symbols("C m", positive=True, integer=True)
    l0, lc, lg = sym_eigenvalues(C, m, kd, kc, kn)
    a_code = kn / (l0 / m + kc + (C - 1) * kn)
    return [a_code - m * kn / lg, 1 - a_code * C - lc / lg]


def _sym_state(C: int, m: int, n: int):
    sp = _sp()
    W = sp.Matrix(C, n, lambda i, j: sp.Symbol(f"w{i}{j}", real=True))
    H = sp.Matrix(n, C * m, lambda i, j: sp.Symbol(f"h{i}_{j}", real=True))
    b = sp.Matrix(C, 1, lambda i, j: sp.Symbol(f"b{i}", real=True))
    return W, H, b


def _sym_flow(C: int, m: int, n: int):
    sp = _sp()
    s = sp.Symbol("s", positive=True)
    W, H, b = _sym_state(C, m, n)
    N = C * m
    Y = sp.Matrix(C, N, lambda i, j: 1 if j // m == i else 0)
    K = sym_block_kernel(C, m)
    R = W * H + b * sp.ones(1, N) - Y
    dW = -s * R * H.T
    db = -s * R * sp.ones(N, 1)
    dH = -s * W.T * R * K
    return dict(s=s, W=W, H=H, b=b, Y=Y, K=K, R=R, dW=dW, db=db, dH=dH)


def sym_invariant_derivative(C: int = 2, m: int = 2, n: int = 2):
    """Entries of dE/dt for E = W^T W - H K^{-1} H^T along the flow, with K^{-1} written through the
    projectors (symbolic W, H, b, kappa, s). Must all simplify to 0.

    dH K^{-1} is evaluated as (-s W^T R)(K K^{-1}) (associativity of dH = -s W^T R K), with
    K K^{-1} formed from the projector formula and reduced exactly by rational cancellation.
    """
    sp = _sp()
    s = sp.Symbol("s", positive=True)
    W, H, b = _sym_state(C, m, n)
    N = C * m
    # dH K^{-1} = -s W^T R (K K^{-1}); K K^{-1} is formed and reduced exactly first (each entry of
    # K (lc lg P0 + l0 lg Pc + l0 lc Pg) divided exactly by l0 lc lg in QQ[kappa]), so the remaining
    # expression is a polynomial in W, H, b, s, expanded exactly in QQ[W, H, b, s, kappa] (DomainMatrix products).
    kd, kc, kn = kappa_symbols()
    l0, lc, lg = sym_eigenvalues(C, m, kd, kc, kn)
    P0, Pc, Pg = sym_projectors(C, m)
    R = _poly_domain(W, H, b, extra=(s, kd, kc, kn))
    l0d, lcd, lgd = (R.from_sympy(sp.expand(x)) for x in (l0, lc, lg))
    num = _dm(sym_block_kernel(C, m), R) * (_dm(P0, R) * (lcd * lgd) + _dm(Pc, R) * (l0d * lgd) + _dm(Pg, R) * (l0d * lcd))
    prod = l0d * lcd * lgd
    rows = num.to_list()
    if any(e % prod for row in rows for e in row):  # not an exact multiple: no cancellation to a polynomial
        raise ArithmeticError("K (P0/l0 + Pc/lc + Pg/lg) did not reduce to a polynomial matrix")
    from sympy.polys.matrices import DomainMatrix

    KKinv = DomainMatrix([[R.exquo(e, prod) for e in row] for row in rows], (N, N), R)
    Wd, Hd, sd = _dm(W, R), _dm(H, R), R.from_sympy(s)
    Rd = Wd * Hd + _dm(b, R) * _dm(sp.ones(1, N), R) - _dm(sp.Matrix(C, N, lambda i, j: 1 if j // m == i else 0), R)
    dW = Rd * Hd.transpose() * (-sd)
    dHKinv = Wd.transpose() * Rd * KKinv * (-sd)
    dE = dW.transpose() * Wd + Wd.transpose() * dW - dHKinv * Hd.transpose() - Hd * dHKinv.transpose()
    return distinct(dE.to_Matrix())


def sym_invariant_forms(C: int = 3, m: int = 2, n: int = 2, weights=(1, 1, 1)):
    """The three forms of E agree (symbolic W, H, kappa):

    - definition: W^T W - H K^{-1} H^T with K^{-1} = P_0/l0 + P_c/lc + P_g/lg (checked separately);
    - decomposition: W^T W - w0 D D^T/l0 - wc m M M^T/lc - wg N h_bar h_bar^T/lg, the statement being
      weights (1, 1, 1) (other values exist to test that a wrong form is refuted);
    - authors' code: W^T W - (m/lc) Hbar Hbar^T - D D^T/l0 + (alpha C^2 m/lc) h_bar h_bar^T, alpha = m kn/lg.

    Since H K^{-1} H^T = sum_i H P_i H^T / l_i, the first equality reduces to H P_0 H^T = D D^T,
    H P_c H^T = m M M^T, H P_g H^T = N h_bar h_bar^T (no kappa involved) plus the weights; the
    difference (decomposition - definition) is returned with denominators cleared (times l0 lc lg).
    Returns (entries of decomposition - definition, entries of code - decomposition), expanded.
    """
    sp = _sp()
    kd, kc, kn = kappa_symbols()
    _, H, _ = _sym_state(C, m, n)
    N = C * m
    P0, Pc, Pg = sym_projectors(C, m)
    l0, lc, lg = sym_eigenvalues(C, m, kd, kc, kn)
    mu = sp.Matrix(n, C, lambda i, c: sum(H[i, c * m + j] for j in range(m)) / m)
    hbar = sp.Matrix(n, 1, lambda i, _: sum(mu[i, c] for c in range(C)) / C)
    M = mu - hbar * sp.ones(1, C)
    D = H - sp.Matrix(n, N, lambda i, j: mu[i, j // m])
    parts = [(P0, D * D.T), (Pc, m * M * M.T), (Pg, N * hbar * hbar.T)]
    # the polynomial identities H P H^T = form, expanded exactly in QQ[H, kappa] (DomainMatrix products)
    R = _poly_domain(H, extra=(kd, kc, kn))
    Hd, mud = _dm(H, R), _dm(mu, R)
    hbd = mud * _dm(sp.ones(C, 1) / C, R)
    Md = mud - hbd * _dm(sp.ones(1, C), R)
    Dd = Hd - mud * _dm(sp.Matrix(C, N, lambda c, j: 1 if j // m == c else 0), R)
    forms_d = [Dd * Dd.transpose(), Md * Md.transpose() * R.convert(m), hbd * hbd.transpose() * R.convert(N)]
    comps = []
    for (P, _), fd in zip(parts, forms_d):
        comps.extend((Hd * _dm(P, R) * Hd.transpose() - fd).to_Matrix())
    w = [sp.nsimplify(x) for x in weights]
    cleared = [lc * lg, l0 * lg, l0 * lc]  # l0 lc lg / l_i
    # (decomposition - definition) * l0 lc lg = sum_i (1 - w_i) (l0 lc lg / l_i) form_i
    diff = sp.zeros(n, n)
    for wi, ci, (_, form) in zip(w, cleared, parts):
        if wi != 1:
            diff += (1 - wi) * ci * form
    dec = comps + [sp.expand(e) for e in diff]
    # (code - decomposition) * lc lg: the W^T W and D D^T terms cancel identically
    lcd, lgd, knd = (R.from_sympy(sp.expand(x)) for x in (lc, lg, kn))
    code = ((mud * mud.transpose()) * (-lgd * m) + (hbd * hbd.transpose()) * (knd * (C * C * m * m))
            + (Md * Md.transpose()) * (lgd * m) + (hbd * hbd.transpose()) * (lcd * N))
    return distinct(dec), distinct(code.to_Matrix())


def sym_deviation_ode(C: int = 2, m: int = 2, n: int = 2, eigen_index: int = 0):
    """dD/dt + s lambda_0 W^T W D (entries, must be 0) and d/dt tr(D D^T) + 2 s lambda_0 ||W D||_F^2
    (must be 0); also returns the latter right-hand side -2 s lambda_0 ||WD||^2 for a sign check.
    ``eigen_index`` picks the eigenvalue in the ODE (0: lambda_0, the statement)."""
    sp = _sp()
    kd, kc, kn = kappa_symbols()
    P0, _, _ = sym_projectors(C, m)
    l0 = kd - kc
    lam = sym_eigenvalues(C, m, kd, kc, kn)[eigen_index]
    s = sp.Symbol("s", positive=True)
    W, H, b = _sym_state(C, m, n)
    N = C * m
    # the flow of _sym_flow, expanded exactly in QQ[W, H, b, s, kappa] (DomainMatrix products)
    R = _poly_domain(W, H, b, extra=(s, kd, kc, kn))
    Wd, Hd, P0d = _dm(W, R), _dm(H, R), _dm(P0, R)
    Rd = Wd * Hd + _dm(b, R) * _dm(sp.ones(1, N), R) - _dm(sp.Matrix(C, N, lambda i, j: 1 if j // m == i else 0), R)
    sd = R.from_sympy(s)
    dHd = Wd.transpose() * Rd * _dm(sym_block_kernel(C, m), R) * (-sd)
    Dd = Hd * P0d
    dDd = dHd * P0d
    ode = list((dDd + Wd.transpose() * Wd * Dd * (sd * R.from_sympy(sp.expand(lam)))).to_Matrix())
    WDd = Wd * Dd
    scatter = R.to_sympy(_dm_trace(Dd.transpose() * dDd, R) * 2
                         + _dm_trace(WDd.transpose() * WDd, R) * (sd * R.from_sympy(l0) * 2))
    WD = W * (H * P0)
    rhs = -2 * s * sp.Symbol("lambda_0", positive=True) * sum(x ** 2 for x in WD)
    return distinct(ode), scatter, rhs


def numeric_substitutions(exprs, count: int = 2, seed: int = 0) -> list[dict]:
    """Deterministic numeric values for every free symbol of ``exprs`` (kappa's kept positive definite),
    used as witnesses when an expression does not simplify to 0."""
    sp = _sp()
    syms = sorted(set().union(*[sp.sympify(e).free_symbols for e in exprs]), key=str)
    kd, kc, kn = kappa_symbols()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        sub = {x: float(rng.uniform(0.2, 1.2)) for x in syms}
        sub.update({kd: 1.3, kc: 0.55, kn: 0.2})
        out.append({x: v for x, v in sub.items() if x in syms})
    return out


def sym_limit_identities():
    """Closed-form limit identities with symbolic C, m, lambda_c, lambda_0 (each must simplify to 0):

    - G = sqrt(lc/m) J solves (m/lc) G^2 = J (J idempotent), so ||mu_c - h_bar||^2 = sqrt(lc/m)(1-1/C);
    - ||W||_F^2 = (m/lc) tr G = sqrt(m/lc)(C-1) when h_bar = 0;
    - escape: [[0, m],[lc, 0]] has eigenvalue sqrt(m lc) with eigenvector (sqrt(m/lc), 1), i.e. J W = sqrt(m/lc) M^T;
    - late within-class rate: lambda_0 times the nonzero eigenvalue of (m/lc) M M^T = lambda_0 sqrt(m/lc).
    """
    sp = _sp()
    C, m, lc, l0 = sp.symbols("C m lambda_c lambda_0", positive=True)
    r = sp.sqrt(lc / m)
    out = {}
    # (m/lc) G^2 = J with G = r J and J^2 = J: coefficient identity (m/lc) r^2 - 1 = 0
    out["gram_square"] = (m / lc) * r ** 2 - 1
    # diagonal of r J is r (1 - 1/C)
    out["mean_sq_norm"] = r * (1 - 1 / C) - sp.sqrt(lc / m) * (C - 1) / C
    # tr(W^T W) = (m/lc) tr(M M^T) = (m/lc) r (C - 1)
    out["W_fro_sq"] = (m / lc) * r * (C - 1) - sp.sqrt(m / lc) * (C - 1)
    A = sp.Matrix([[0, m], [lc, 0]])
    v = sp.Matrix([sp.sqrt(m / lc), 1])
    ev = A * v - sp.sqrt(m * lc) * v
    out["escape_eigvec_0"], out["escape_eigvec_1"] = ev[0], ev[1]
    out["escape_charpoly"] = sp.expand((A - sp.sqrt(m * lc) * sp.eye(2)).det())
    out["late_within_rate"] = l0 * (m / lc) * r - l0 * sp.sqrt(m / lc)
    return out


def sym_etf_configuration(C: int = 3):
    """An explicit limit configuration for C classes (features in R^C, h_bar = 0, D = 0):
    M = sqrt(r) J_C (Gram r J_C with r = sqrt(lc/m)), W = sqrt(m/lc) M^T, b = 1/C.
    Returns entries of W M - J (zero loss at class means), of E restricted (W^T W - (m/lc) M M^T),
    and of M^T M - r J (ETF Gram)."""
    sp = _sp()
    m, lc = sp.symbols("m lambda_c", positive=True)
    r = sp.sqrt(lc / m)
    J = sp.eye(C) - sp.ones(C, C) / C
    M = sp.sqrt(r) * J
    W = sp.sqrt(m / lc) * M.T
    b = sp.ones(C, 1) / C
    fit = W * M + b * sp.ones(1, C) - sp.eye(C)
    E = W.T * W - (m / lc) * M * M.T
    G = M.T * M - r * J
    return [sp.simplify(x) for x in fit], [sp.simplify(x) for x in E], [sp.simplify(x) for x in G]


def sym_nonetf_identity(C: int = 3):
    """With g = M^T h_bar = t u (u = (1,-1,0,..)/sqrt 2), G = sqrt(lc/m)(J - (1 - sqrt(1 - beta t^2)) u u^T),
    beta = N/lg, solves (m/lc) G^2 + beta g g^T = J; its normalised distance to J is positive for t != 0.

    Returns (entries of the identity residual, the ratio of G's eigenvalue along u to the one on
    the rest of 1^perp, which equals 1 only for t = 0 (an ETF needs ratio 1)).
    """
    sp = _sp()
    m, lc, beta, t = sp.symbols("m lambda_c beta t", positive=True)
    r = sp.sqrt(lc / m)
    J = sp.eye(C) - sp.ones(C, C) / C
    u = sp.zeros(C, 1)
    u[0, 0], u[1, 0] = 1 / sp.sqrt(2), -1 / sp.sqrt(2)
    q = sp.sqrt(1 - beta * t ** 2)
    G = r * (J - (1 - q) * u * u.T)
    g = t * u
    # expansion proves the entries (sqrt(x)^2 = x for positive symbols); simplify only an entry it leaves nonzero
    ident = [_expand_or_simplify(x) for x in ((m / lc) * G * G + beta * g * g.T - J)]
    ratio = sp.expand((u.T * G * u)[0] / r)  # u^T J u = 1 and (u^T u)^2 = 1 exactly: the expansion is sqrt(1 - beta t^2)
    return ident, ratio


def _expand_or_simplify(x):
    """0 when ``sympy.expand`` gives 0 (then ``simplify`` would too), else ``sympy.simplify(x)``."""
    sp = _sp()
    e = sp.expand(x)
    return e if e == 0 else sp.simplify(x)


# --------------------------------------------------------------------------------------
# Beyond the block kernel (docs/ntk.md, "Beyond the block kernel"): a general fixed SPD feature
# kernel K (N x N, samples ordered by class, class sizes ``counts``), imbalanced block kernels,
# any loss through G = dL/dZ, discrete steps, and the reviewer's chain-rule implications.
# --------------------------------------------------------------------------------------

#: Largest N accepted for a general kernel (an N x N eigendecomposition and dense products).
MAX_GENERAL_SAMPLES = 4000
#: A kernel counts as symmetric when max|K - K^T| <= this times max|K| (float rounding of a file).
KERNEL_SYMMETRY_RTOL = 1e-12
#: Smallest accepted eigenvalue relative to the largest (the invariant uses K^-1): condition <= 1e12.
KERNEL_MIN_RELATIVE_EIGENVALUE = 1e-12


def check_counts(counts) -> tuple[int, ...]:
    """Class sizes n_c >= 1, at least two classes (samples ordered class by class)."""
    counts = as_int_tuple_checked("counts", counts)
    if len(counts) < 2:
        raise InstanceError(f"counts must list at least 2 classes, got {len(counts)}")
    return counts


def as_int_tuple_checked(name: str, values) -> tuple[int, ...]:
    from theory._validate import as_int_tuple

    return as_int_tuple(name, values, minimum=1, min_len=1)


def class_indicator(counts) -> np.ndarray:
    """S (C x N): S[c, i] = 1 when sample i is in class c (the one-hot targets Y = S)."""
    counts = tuple(int(c) for c in counts)
    return np.repeat(np.eye(len(counts)), counts, axis=1)


def labels_from_counts(counts) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), counts)


def within_projector(counts) -> np.ndarray:
    """P_0 = I - S^T diag(n)^-1 S: orthogonal projector onto Q^perp (zero sum inside every class)."""
    S = class_indicator(counts)
    return np.eye(S.shape[1]) - S.T @ (S / np.asarray(counts, float)[:, None])


def imbalanced_block_kernel(counts, consts) -> np.ndarray:
    """K_ij = kappa_d (i = j), kappa_c (same class), kappa_n (otherwise), for class sizes ``counts``."""
    kd, kc, kn = consts
    S = class_indicator(counts)
    N = S.shape[1]
    return (kd - kc) * np.eye(N) + (kc - kn) * (S.T @ S) + kn * np.ones((N, N))


def imbalanced_class_matrix(counts, consts) -> np.ndarray:
    """Gamma (C x C) with K S^T = S^T Gamma for the imbalanced block kernel:
    Gamma = diag(lambda_0 + n_c (kappa_c - kappa_n)) + kappa_n 1 n^T (column c carries n_c kappa_n)."""
    kd, kc, kn = consts
    n = np.asarray(counts, float)
    return np.diag((kd - kc) + n * (kc - kn)) + kn * np.outer(np.ones(n.size), n)


def imbalanced_eigenvalues(counts, consts) -> dict:
    """Spectrum of the imbalanced block kernel: lambda_0 = kappa_d - kappa_c on Q^perp (multiplicity
    N - C) and the C eigenvalues of Gamma (K restricted to the class-indicator space Q)."""
    kd, kc, kn = consts
    G = imbalanced_class_matrix(counts, consts)
    return {"lambda_0": kd - kc, "multiplicity_0": int(sum(counts)) - len(counts),
            "class_level": np.sort(np.linalg.eigvals(G).real)}


def check_imbalanced_pd(counts, consts) -> None:
    """InstanceError naming the eigenvalue when the imbalanced block kernel is not positive definite."""
    kd, kc, kn = consts
    if not kd - kc > 0 and int(sum(counts)) > len(counts):
        raise InstanceError(f"kappa: block kernel is not positive definite: lambda_0 = kappa_d - kappa_c = "
                            f"{kd - kc:.6g} <= 0 (within-class eigenvalue, multiplicity {sum(counts) - len(counts)})")
    ev = imbalanced_eigenvalues(counts, consts)["class_level"]
    if not ev[0] > 0:
        raise InstanceError(f"kappa: block kernel is not positive definite: a class-level eigenvalue is "
                            f"{ev[0]:.6g} <= 0 (eigenvalues of Gamma = K restricted to the class indicators, "
                            f"counts {list(counts)})")


def perturbation(N: int, norm: float, rho: float, seed: int) -> np.ndarray:
    """K0 = rho ||Kb||_F A A^T / ||A A^T||_F with A = np.random.default_rng(1_000_000 + seed).standard_normal((N, N))
    (a random PSD matrix of relative Frobenius size rho; ``norm`` = ||Kb||_F)."""
    if rho == 0:
        return np.zeros((N, N))
    A = np.random.default_rng(1_000_000 + seed).standard_normal((N, N))
    K0 = A @ A.T
    return (rho * norm / np.linalg.norm(K0)) * K0


def validate_kernel(K, N: int, name: str = "kernel") -> np.ndarray:
    """An N x N finite symmetric positive definite float64 matrix (InstanceError naming what fails)."""
    K = np.asarray(K)
    if K.dtype.kind not in "fiu":
        raise InstanceError(f"{name}: must be a numeric N x N array, got dtype {K.dtype}")
    K = K.astype(float)
    if K.ndim != 2 or K.shape != (N, N):
        raise InstanceError(f"{name}: must be N x N = {N} x {N} (N = sum of the class counts), got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise InstanceError(f"{name}: has {int(np.sum(~np.isfinite(K)))} non-finite entries (NaN or inf)")
    big = float(np.max(np.abs(K))) if K.size else 0.0
    if not big <= EIGEN_RANGE[1]:  # |K_ij| <= max K_ii <= the largest eigenvalue of a PSD kernel; 1e308 overflowed
        raise InstanceError(f"{name}: entries up to {big:.3g} leave the float64-safe range (|entries| <= "
                            f"{EIGEN_RANGE[1]:g}, the eigenvalue range)")
    asym = float(np.max(np.abs(K - K.T))) if K.size else 0.0
    if not asym <= KERNEL_SYMMETRY_RTOL * max(big, 1e-300):
        raise InstanceError(f"{name}: is not symmetric: max|K - K^T| = {asym:.3g} > {KERNEL_SYMMETRY_RTOL:g} max|K|")
    K = (K + K.T) / 2
    ev = np.linalg.eigvalsh(K)
    if not ev[0] > KERNEL_MIN_RELATIVE_EIGENVALUE * max(float(ev[-1]), 1e-300):
        raise InstanceError(f"{name}: is not positive definite: smallest eigenvalue {ev[0]:.6g} <= "
                            f"{KERNEL_MIN_RELATIVE_EIGENVALUE:g} x largest {ev[-1]:.6g}")
    if not (EIGEN_RANGE[0] <= ev[0] and ev[-1] <= EIGEN_RANGE[1]):
        raise InstanceError(f"{name}: eigenvalues [{ev[0]:.3g}, {ev[-1]:.3g}] leave [{EIGEN_RANGE[0]:g}, "
                            f"{EIGEN_RANGE[1]:g}] (float64-safe range)")
    return K


def general_invariant(W: np.ndarray, H: np.ndarray, Kinv: np.ndarray) -> np.ndarray:
    """E = W^T W - H K^-1 H^T (any fixed SPD kernel)."""
    return W.T @ W - H @ Kinv @ H.T


def discrete_step_change(W: np.ndarray, H: np.ndarray, G: np.ndarray, K: np.ndarray, eta: float) -> np.ndarray:
    """E(after) - E(before) for one discrete step W -= eta G H^T, H -= eta W^T G K (G = dL/dZ at the
    old state, any loss, any batch mask inside G): exactly eta^2 (H G^T G H^T - W^T G K G^T W)."""
    return eta * eta * (H @ G.T @ G @ H.T - W.T @ G @ K @ G.T @ W)


def compressed_within_eigenvalue(K: np.ndarray, counts) -> float:
    """Lambda_0 = lambda_max(P_0 K P_0): the largest eigenvalue of K compressed to Q^perp (lambda_0 for a
    block kernel). It is the constant of the general NC1 bound."""
    P0 = within_projector(counts)
    return float(np.linalg.eigvalsh(P0 @ K @ P0)[-1])


def general_nc1_bound(W: np.ndarray, H: np.ndarray, E: np.ndarray, K: np.ndarray, counts,
                      constant: float = 1.0, Lambda0: float | None = None) -> dict:
    """||D||_F^2 <= (r L/2)(e + sqrt(e^2 + 4 ||W D||_F^2/(r L))), L = Lambda_0 = lambda_max(P_0 K P_0),
    e = max(0, -lambda_min(E)), r = rank D, at EVERY state (any loss): from
    H^T (W^T W - E) H = H^T H K^-1 H^T H, K^-1 >= P_0 (P_0 K P_0)^+ P_0 and ||D^T D||_F^2 >= ||D||_F^4/r.
    ``constant`` multiplies L (1 is the statement; other values exist to test that a false bound is refuted)."""
    L = (compressed_within_eigenvalue(K, counts) if Lambda0 is None else Lambda0) * constant
    P0 = within_projector(counts)
    D = H @ P0
    sv = np.linalg.svd(D, compute_uv=False)
    r = int(np.count_nonzero(sv > 1e-10 * max(float(sv[0]) if sv.size else 0.0, 1e-300)))
    x = float(np.sum(D * D))
    e = max(0.0, -float(np.linalg.eigvalsh((E + E.T) / 2)[0]))
    wd = float(np.linalg.norm(W @ D))
    if r == 0:
        return {"scatter": x, "bound": 0.0, "rank": 0, "e": e, "WD": wd, "Lambda0": L}
    bound = 0.5 * r * L * (e + math.hypot(e, 2 * wd / math.sqrt(r * L)))
    return {"scatter": x, "bound": bound, "rank": r, "e": e, "WD": wd, "Lambda0": L}


def class_level_inverse(K: np.ndarray, counts) -> np.ndarray:
    """Xi^-1 = S K^-1 S^T (C x C): at D = 0, H K^-1 H^T = U Xi^-1 U^T with U the class means (n x C)."""
    S = class_indicator(counts)
    X = np.linalg.solve(K, S.T)
    A = S @ X
    return (A + A.T) / 2


def imbalanced_class_inverse(counts, consts) -> np.ndarray:
    """Closed form of S K^-1 S^T for the imbalanced block kernel: diag(n) Gamma^-1 (K S^T = S^T Gamma)."""
    n = np.asarray(counts, float)
    A = np.diag(n) @ np.linalg.inv(imbalanced_class_matrix(counts, consts))
    return (A + A.T) / 2


def _psd_sqrt(A: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh((A + A.T) / 2)
    return (V * np.sqrt(np.clip(w, 0, None))) @ V.T


def zero_loss_class_gram(Xi_inv: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The unique PSD uncentred class-mean Gram U^T U at a state with E = 0, D = 0 and zero loss, given the
    bias b: U^T U Xi^-1 U^T U = B^T B with B = I - b 1^T, i.e.
    U^T U = X^-1/2 (X^1/2 B^T B X^1/2)^1/2 X^-1/2 with X = Xi^-1."""
    C = Xi_inv.shape[0]
    B = np.eye(C) - np.outer(b, np.ones(C))
    Xh = _psd_sqrt(Xi_inv)
    Xih = np.linalg.inv(Xh)
    return Xih @ _psd_sqrt(Xh @ B.T @ B @ Xh) @ Xih


def block_sum_structure(K: np.ndarray, counts) -> dict:
    """The ETF condition of a general kernel: K S^T = S^T (a I + c 1 1^T) (K maps the class-indicator space
    into itself and acts there like a balanced block kernel). Returns a, c (least squares), the relative
    defect ||K S^T - S^T (a I + c 11^T)||_F / ||K S^T||_F and whether the classes are balanced."""
    S = class_indicator(counts)
    C = S.shape[0]
    KS = K @ S.T
    X1 = S.T  # coefficient of a
    X2 = S.T @ np.ones((C, C))  # coefficient of c
    A = np.stack([X1.ravel(), X2.ravel()], axis=1)
    coef, *_ = np.linalg.lstsq(A, KS.ravel(), rcond=None)
    a, c = float(coef[0]), float(coef[1])
    defect = float(np.linalg.norm(KS - a * X1 - c * X2) / max(np.linalg.norm(KS), 1e-300))
    return {"a": a, "c": c, "defect": defect, "balanced": len(set(int(x) for x in counts)) == 1}


def escape_rate_general(K: np.ndarray, counts, s: float = 1.0) -> float:
    """Growth rate of the small-init escape: linearising at W = H = 0 with the bias fitted
    (R_0 = (n/N) 1^T - Y, the same for MSE and for CE: softmax(b) = n/N), d^2W/dt^2 = s^2 R_0 K R_0^T W,
    so the rate is s sqrt(lambda_max(R_0 K R_0^T)) (= s sqrt(m lambda_c) for a balanced block kernel)."""
    S = class_indicator(counts)
    n = np.asarray(counts, float)
    R0 = np.outer(n / n.sum(), np.ones(S.shape[1])) - S
    A = R0 @ K @ R0.T
    return s * math.sqrt(max(float(np.linalg.eigvalsh((A + A.T) / 2)[-1]), 0.0))


# ---- chain rule and Assumption 3.2 (reviewer's implications) ---------------------------------------

def chain_rule_output_kernel(W: np.ndarray, Hgram: np.ndarray, Kfeat) -> np.ndarray:
    """Theta[(k,i),(k',j)] = sum_{s,s'} W_ks W_k's' Kfeat[s,s'][i,j] + delta_kk' (<h_i, h_j> + 1).

    ``Kfeat`` is either an N x N scalar kernel (independent neurons with the same kernel: Kfeat[s,s'] =
    delta_ss' kappa) or an array (n, n, N, N) of per-neuron-pair feature kernels. Index order (k, i):
    row k * N + i."""
    C = W.shape[0]
    Kf = np.asarray(Kfeat, float)
    if Kf.ndim == 2:
        out = np.kron(W @ W.T, Kf)
    else:
        out = np.einsum("ks,qt,stij->kiqj", W, W, Kf).reshape(C * Kf.shape[2], C * Kf.shape[3])
    return out + np.kron(np.eye(C), Hgram + 1.0)


def assumption_consequences(kappa, gamma, omega: float) -> dict:
    """What Assumption 3.2 (independent neurons with block feature kernel kappa, and a block-diagonal output
    kernel with constants gamma) forces: <W_k, W_k'> = 0 (k != k'), ||W_k||^2 = omega for every k, and the
    feature Gram block constants a_t = gamma_t - 1 - omega kappa_t for t in (d, c, n); where kappa_t != 0,
    omega = (gamma_t - a_t - 1)/kappa_t."""
    a = tuple(g - 1.0 - omega * k for g, k in zip(gamma, kappa))
    return {"WWt_offdiag": 0.0, "W_sq_norm": omega, "feature_gram": a}


def collapse_consistency(kappa, gamma) -> dict:
    """Both halves of Assumption 3.2 at a collapsed state (within-class features equal: a_d = a_c) need
    gamma_d - gamma_c = omega (kappa_d - kappa_c) with one omega >= 0 for every pair type, i.e.
    omega = (gamma_d - gamma_c)/(kappa_d - kappa_c); then a = gamma_d - 1 - omega kappa_d (= a_c) and
    a_n = gamma_n - 1 - omega kappa_n, and the class-level Gram (a - a_n) I + a_n 1 1^T must be PSD:
    a >= a_n and a + (C - 1) a_n >= 0 (checked for C >= 2 by the caller with its C)."""
    kd, kc, kn = kappa
    gd, gc, gn = gamma
    omega = (gd - gc) / (kd - kc)
    a = gd - 1.0 - omega * kd
    a_c = gc - 1.0 - omega * kc
    a_n = gn - 1.0 - omega * kn
    return {"omega": omega, "a": a, "a_c": a_c, "a_n": a_n}


def reviewer_first_implications(kappa, gamma, WWt: np.ndarray) -> dict:
    """The reviewer's first list, as written: (i) <W_k, W_s> identical for k != s; (ii) <W_k, W_k - W_s>
    = gamma_d/kappa_d = gamma_c/kappa_c = gamma_n/kappa_n; (iii) <h(x), h(x')> = -kappa <W_k, W_s>.
    Returns the predicted values at a state with Gram W W^T (for each pair type t)."""
    C = WWt.shape[0]
    off = WWt[0, 1] if C > 1 else 0.0
    return {"ii": tuple(g / k if k != 0 else None for g, k in zip(gamma, kappa)),
            "iii": tuple(-k * off for k in kappa)}


def reviewer_corrected_norm(kappa_t: float, gamma_t: float, hh: float, sign: float = 1.0) -> float:
    """The reviewer's corrected formula <W_k, W_k> = gamma/kappa + (<h(x), h(x')> + 1)/kappa (sign = +1, as
    written); sign = -1 gives the formula derived from the chain rule."""
    return gamma_t / kappa_t + sign * (hh + 1.0) / kappa_t


# ---- symbolic derivations for general kernels ----------------------------------------------------

def _sym_general(N: int, C: int, d: int):
    sp = _sp()
    W = sp.Matrix(C, d, lambda i, j: sp.Symbol(f"w{i}{j}", real=True))
    H = sp.Matrix(d, N, lambda i, j: sp.Symbol(f"h{i}_{j}", real=True))
    G = sp.Matrix(C, N, lambda i, j: sp.Symbol(f"g{i}_{j}", real=True))
    K = sp.Matrix(N, N, lambda i, j: sp.Symbol(f"k{min(i, j)}_{max(i, j)}", real=True))
    return W, H, G, K


@lru_cache(maxsize=None)
def sym_general_invariant_derivative(N: int = 3, C: int = 2, d: int = 2):
    """Entries of dE/dt for E = W^T W - H K^-1 H^T along dW = -G H^T, dH = -W^T G K with a generic symmetric
    K (symbols k_ij = k_ji, K^-1 = adj(K)/det(K)) and a generic G = dL/dZ (symbols: any loss, any batch
    mask): must all vanish. Returned with the denominator det(K) cleared."""
    W, H, G, K = _sym_general(N, C, d)
    # expanded exactly in QQ[W, H, G, K] (DomainMatrix products)
    R = _poly_domain(W, H, G, K)
    Wd, Hd, Gd, Kd = (_dm(x, R) for x in (W, H, G, K))
    adj, det = Kd.adjugate(), Kd.det()
    dW = -(Gd * Hd.transpose())
    dH = -(Wd.transpose() * Gd * Kd)
    # d/dt (H K^-1 H^T) * det = dH adj H^T + H adj dH^T
    dE = (dW.transpose() * Wd + Wd.transpose() * dW) * det - (dH * adj * Hd.transpose() + Hd * adj * dH.transpose())
    return tuple(distinct(dE.to_Matrix()))


def sym_discrete_step_change(N: int = 3, C: int = 2, d: int = 2, predicted=None):
    """E(W', H') - E(W, H) - predicted for W' = W - eta G H^T, H' = H - eta W^T G K (det K cleared).
    ``predicted(W, H, G, K, eta)`` defaults to eta^2 (H G^T G H^T - W^T G K G^T W). Must all vanish."""
    sp = _sp()
    W, H, G, K = _sym_general(N, C, d)
    eta = sp.Symbol("eta", positive=True)
    if predicted is None:  # the default prediction, expanded exactly in QQ[W, H, G, K, eta] (DomainMatrix products)
        R = _poly_domain(W, H, G, K, extra=(eta,))
        Wd, Hd, Gd, Kd = (_dm(x, R) for x in (W, H, G, K))
        e = R.from_sympy(eta)
        adj, det = Kd.adjugate(), Kd.det()
        W1 = Wd - Gd * Hd.transpose() * e
        H1 = Hd - Wd.transpose() * Gd * Kd * e
        pred = (Hd * Gd.transpose() * Gd * Hd.transpose() - Wd.transpose() * Gd * Kd * Gd.transpose() * Wd) * (e * e)
        diff = (W1.transpose() * W1 - Wd.transpose() * Wd - pred) * det - (H1 * adj * H1.transpose()
                                                                          - Hd * adj * Hd.transpose())
        return tuple(distinct(diff.to_Matrix()))
    adj, det = K.adjugate(), K.det()
    W1 = W - eta * G * H.T
    H1 = H - eta * W.T * G * K
    pred = (predicted or (lambda W, H, G, K, e: e ** 2 * (H * G.T * G * H.T - W.T * G * K * G.T * W)))(W, H, G, K, eta)
    diff = (W1.T * W1 - W.T * W - pred) * det - (H1 * adj * H1.T - H * adj * H.T)
    return tuple(distinct(sp.expand(e) for e in diff))


@lru_cache(maxsize=None)
def sym_discrete_step_change_default(N: int = 3, C: int = 2, d: int = 2):
    """:func:`sym_discrete_step_change` with the default prediction (cached)."""
    return sym_discrete_step_change(N, C, d)


def sym_assumption_solution(C: int = 2):
    """Solve the chain-rule equations of Assumption 3.2 symbolically: for each pair type t,
    Theta_kk'(t) = kappa_t P_kk' + delta_kk' (a_t + 1) must equal delta_kk' gamma_t, with P = W W^T unknown.
    Returns (solution dict for P's entries, per type) as sympy expressions in kappa_t, gamma_t, a_t."""
    sp = _sp()
    kt, gt, at = sp.symbols("kappa_t gamma_t a_t", real=True)
    P = sp.Matrix(C, C, lambda i, j: sp.Symbol(f"p{min(i, j)}{max(i, j)}", real=True))
    eqs = []
    for i in range(C):
        for j in range(i, C):
            eqs.append(sp.Eq(kt * P[i, j] + (at + 1 if i == j else 0), gt if i == j else 0))
    unknowns = sorted(set(P), key=str)
    sol = sp.solve(eqs, unknowns, dict=True)
    return sol[0] if sol else {}, (kt, gt, at), P


def within_class_perturbation(counts, norm: float, rho: float, seed: int) -> np.ndarray:
    """P_0 A A^T P_0 scaled to Frobenius size rho ||Kb||_F (``norm``), A as in :func:`perturbation`: a PSD
    perturbation that keeps K S^T = S^T Gamma (the ETF block-sum condition) intact."""
    N = int(sum(counts))
    if rho == 0:
        return np.zeros((N, N))
    P0 = within_projector(counts)
    A = np.random.default_rng(1_000_000 + seed).standard_normal((N, N))
    K0 = P0 @ A @ A.T @ P0
    K0 = (K0 + K0.T) / 2
    return (rho * norm / np.linalg.norm(K0)) * K0


def gram_identity_remainder(W, b, H, K, counts, Kinv=None) -> dict:
    """At any state: W U = I - b 1^T + Rbar (Rbar = class-mean residual of MSE targets), and
    (W U)^T (W U) = U^T E U + G_u Xi^-1 G_u + U^T X U with X = U S K^-1 D^T + D K^-1 S^T U^T + D K^-1 D^T.
    Returns B = I - b 1^T, G_u = U^T U and the bound 2||B|| ||Rbar|| + ||Rbar||^2 + ||U||^2 (||E|| + ||X||) on
    ||G_u Xi^-1 G_u - B^T B||_F (0 at E = 0, D = 0, zero loss)."""
    S = class_indicator(counts)
    n = np.asarray(counts, float)
    C = S.shape[0]
    Kinv = np.linalg.inv(K) if Kinv is None else Kinv
    U = (H @ S.T) / n[None, :]
    D = H - U @ S
    R = W @ H + b[:, None] - S
    Rbar = (R @ S.T) / n[None, :]
    B = np.eye(C) - np.outer(b, np.ones(C))
    E = W.T @ W - H @ Kinv @ H.T
    X = U @ S @ Kinv @ D.T + D @ Kinv @ S.T @ U.T + D @ Kinv @ D.T
    u2 = float(np.linalg.norm(U, 2)) ** 2
    bound = (2 * float(np.linalg.norm(B, 2)) * float(np.linalg.norm(Rbar)) + float(np.linalg.norm(Rbar)) ** 2
             + u2 * (float(np.linalg.norm(E)) + float(np.linalg.norm(X))))
    return {"B": B, "Gu": U.T @ U, "bound": bound, "Rbar": float(np.linalg.norm(Rbar)), "E": float(np.linalg.norm(E)),
            "X": float(np.linalg.norm(X))}


# ---- cross-entropy: the within-class dissipation (docs/ntk.md, "Cross-entropy") ------------------

def commutes_with_within(K: np.ndarray, counts, rtol: float = 1e-12) -> bool:
    """Whether K maps the within-class space Q^perp into itself (K P_0 = P_0 K, to ``rtol`` of ||K||): true for
    block kernels with any class sizes and for within-class perturbations; false for a generic K."""
    P0 = within_projector(counts)
    A = K @ P0
    return bool(np.linalg.norm(A - A.T) <= rtol * max(float(np.linalg.norm(K)), 1e-300))


def _softmax_col(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def _softmax_difference(z: np.ndarray, zbar: np.ndarray) -> np.ndarray:
    """softmax(z) - softmax(zbar) without cancellation: softmax_k(zbar) expm1(d_k - L), d = z - zbar,
    L = lse(z) - lse(zbar) = log1p(sum_j softmax_j(zbar) expm1(d_j)) (relative accuracy also for tiny d)."""
    p = _softmax_col(zbar)
    d = z - zbar
    L = np.log1p(float(np.dot(p, np.expm1(d))))
    return p * np.expm1(d - L)


def ce_within_dissipation(W: np.ndarray, b: np.ndarray, H: np.ndarray, counts) -> dict:
    """The within-class dissipation of the CE flow at a state (loss scale s = 1; both parts scale with s).

    With Z = W H + b 1^T, Delta_i = z_i - zbar_c (zbar_c the class mean of the outputs, i.e. the output of the class
    mean feature) and sigma = softmax:

    - ``exact`` = sum_i <Delta_i, sigma(z_i) - sigma(zbar_c)> (= <W D, G P_0>/s, since sum_{i in c} Delta_i = 0): for a
      kernel with K P_0 = P_0 K, d/dt tr(D K^-1 D^T) = -2 s ``exact`` (block kernel: d/dt ||D||_F^2 = -2 s lambda_0
      ``exact``);
    - ``lower`` = sum_i q_i ||J Delta_i||^2, q_i = min_k min(sigma_k(z_i), sigma_k(zbar_c)), J = I - 1 1^T/C: the proven
      lower bound ``exact`` >= ``lower`` >= 0 (mean value theorem along the segment, the softmax Jacobian's quadratic
      form is a variance >= min_k sigma_k ||J v||^2, and log sigma_k is concave, so its minimum on the segment is at
      an end). Equality is approached as Delta -> 0 at uniform logits.

    Returns ``exact``, ``lower``, ``ratio`` = exact/lower (None when lower = 0) and ``q_min``."""
    counts = tuple(int(c) for c in counts)
    Z = W @ H + b[:, None]
    exact = lower = 0.0
    qmin = 1.0
    start = 0
    for n_c in counts:  # the samples of a class at once (columns); the sums over samples in sample order
        Zc = Z[:, start:start + n_c]
        start += n_c
        zbar = Zc.mean(axis=1)
        pbar = _softmax_col(zbar)
        dlt = Zc - zbar[:, None]
        # softmax(z_i) - softmax(zbar) = pbar expm1(d_i - L_i), L_i = log1p(pbar . expm1(d_i)) (_softmax_difference)
        L = np.log1p(pbar @ np.expm1(dlt))
        sdiff = pbar[:, None] * np.expm1(dlt - L[None, :])
        ex = np.sum(dlt * sdiff, axis=0)
        E = np.exp(Zc - Zc.max(axis=0, keepdims=True))
        q = np.minimum(pbar.min(), (E / E.sum(axis=0, keepdims=True)).min(axis=0))
        jd = dlt - dlt.mean(axis=0, keepdims=True)
        lo = q * np.sum(jd * jd, axis=0)
        for i in range(n_c):
            exact += float(ex[i])
            qmin = min(qmin, float(q[i]))
            lower += float(lo[i])
    return {"exact": exact, "lower": lower, "ratio": exact / lower if lower > 0 else None, "q_min": qmin}


def ce_nc1_upper_bound(scatter0_weighted: float, M: np.ndarray, N: int) -> float | None:
    """NC1(t) <= (C/N) Lambda_0 Phi(0) / ||M(t)||_F^2 (Phi = tr(D K^-1 D^T) never increases under CE when
    K P_0 = P_0 K, and ||D||^2 <= Lambda_0 Phi); ``scatter0_weighted`` = Lambda_0 Phi(0) (= ||D(0)||^2 for a block
    kernel), M the centred (unweighted) class means at t. None when M = 0."""
    C = M.shape[1]
    m2 = float(np.sum(M * M))
    return (C / N) * scatter0_weighted / m2 if m2 > 0 else None


@lru_cache(maxsize=None)
def sym_ce_within_derivative(counts: tuple = (2, 2), n: int = 2, eigen_index: int = 0):
    """Entries that must vanish for d/dt ||D||_F^2 = -2 lambda <W D, G> along dH = -W^T G K with the block kernel
    (symbolic kappa) and a generic G (symbols: any loss, CE included), D = H P_0. ``eigen_index`` 0 puts lambda_0
    (the statement); other values put a wrong eigenvalue (tests). Returns (residual,)."""
    sp = _sp()
    kd, kc, kn = kappa_symbols()
    C, N = len(counts), int(sum(counts))
    S = sp.Matrix(class_indicator(counts).astype(int))
    K = (kd - kc) * sp.eye(N) + (kc - kn) * (S.T * S) + kn * sp.ones(N, N)
    P0 = sp.eye(N) - S.T * sp.diag(*[sp.Rational(1, c) for c in counts]) * S
    W = sp.Matrix(C, n, lambda i, j: sp.Symbol(f"w{i}{j}", real=True))
    H = sp.Matrix(n, N, lambda i, j: sp.Symbol(f"h{i}_{j}", real=True))
    G = sp.Matrix(C, N, lambda i, j: sp.Symbol(f"g{i}_{j}", real=True))
    m = counts[0]
    lam = [kd - kc, kd + (m - 1) * kc - m * kn, kd + (m - 1) * kc + m * (C - 1) * kn][eigen_index]
    # expanded exactly in QQ[W, H, G, kappa] (DomainMatrix products)
    R = _poly_domain(W, H, G, extra=(kd, kc, kn))
    Wd, Hd, Gd, P0d = _dm(W, R), _dm(H, R), _dm(G, R), _dm(P0, R)
    Dd = Hd * P0d
    dDd = -(Wd.transpose() * Gd * _dm(K, R)) * P0d
    resid = (_dm_trace(Dd.transpose() * dDd, R) * 2
             + _dm_trace((Wd * Dd).transpose() * Gd, R) * (R.from_sympy(sp.expand(lam)) * 2))
    return (R.to_sympy(resid),)


def sym_softmax_lemmas(C: int = 3):
    """Expressions that must vanish for the two facts behind ``ce_within_dissipation``'s lower bound:
    (1) the Hessian of log softmax_0 equals -(diag sigma - sigma sigma^T) (so log sigma_k is concave: the softmax
    Jacobian is a covariance matrix); (2) sum_k sigma_k (v_k - c)^2 = v^T (diag sigma - sigma sigma^T) v
    + (c - sigma^T v)^2 when sum sigma = 1 (the quadratic form is the minimum over c of a sigma-weighted sum of
    squares, hence >= min_k sigma_k min_c ||v - c 1||^2 = min_k sigma_k ||J v||^2)."""
    sp = _sp()
    z = sp.symbols(f"z0:{C}", real=True)
    Z = sum(sp.exp(zi) for zi in z)
    sig = [sp.exp(zi) / Z for zi in z]
    logs0 = z[0] - sp.log(Z)
    out = []
    for i in range(C):
        for j in range(C):
            hij = sp.diff(logs0, z[i], z[j])
            e = hij + (sig[i] if i == j else 0) - sig[i] * sig[j]
            c = sp.cancel(e)  # a rational function of exp(z_0..z_{C-1}): 0 after cancelling is a proof
            out.append(c if c == 0 else sp.simplify(e))
    p = sp.symbols(f"p0:{C - 1}", positive=True)
    pl = list(p) + [1 - sum(p)]
    v = sp.symbols(f"v0:{C}", real=True)
    c = sp.Symbol("c", real=True)
    quad = sum(pl[k] * v[k] ** 2 for k in range(C)) - sum(pl[k] * v[k] for k in range(C)) ** 2
    out.append(sp.expand(sum(pl[k] * (v[k] - c) ** 2 for k in range(C)) - quad - (c - sum(pl[k] * v[k] for k in range(C))) ** 2))
    return tuple(out)
