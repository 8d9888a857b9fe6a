"""Feature collapse (Laurent, von Brecht, Bresson, ICLR 2024): predictions and derivations.

Specification: ``docs/feature_collapse.md`` (provenance: *reconstructed*). Notation:

- ``n_c`` concepts, ``s_c`` words per concept, ``n_w = n_c s_c`` words; word ``(alpha, beta)``
  has index ``alpha * s_c + beta`` (0-based). Within-concept frequencies ``mu`` (length s_c).
- ``L`` positions; a latent variable is a sequence of ``L`` concepts; ``K`` classes, class ``k``
  has latent ``z_k``. ``latents="full"`` uses every latent once (K = n_c^L, the symmetric case);
  ``latents="random"`` draws K latents uniformly (with a seed; duplicates possible).
- Network: embeddings ``w_v`` in R^d, optional LayerNorm ``phi`` (eps = 0, no affine part),
  classifier blocks ``u_{k,l}``; score ``h_k(x) = sum_l <u_{k,l}, phi(w_{x_l})>``; softmax
  cross-entropy averaged over sentences plus ``(lw/2)||W||^2 + (lu/2)||U||^2`` with
  lw = lu = lambda (no LN) or lw = 0, lu = lambda (LN).

Predictions:

- Theorem 1 (no LN, uniform mu): type-I collapse, constants t*, a*, b*, lambda_crit.
- Theorem 2 (no LN, non-uniform mu, K = n_c^L): type-III critical points from (E1)-(E2),
  solved with mpmath to high precision. Global optimality is a *conjecture* of the paper.
- Theorem 3 (LN, any mu > 0): type-II collapse, constant b*, no trivial phase; needs d >= n_c.

This module imports nothing from ``solvers`` or ``proofs_check``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import mpmath as mp
import numpy as np

from theory._validate import InstanceError, as_float, as_float_tuple, as_int
from theory.geometry import simplex_etf

SOURCE = "Laurent, von Brecht, Bresson, Feature Collapse, ICLR 2024 (arXiv 2305.16162)"

#: Frequencies must sum to 1 within this (user input is often rounded decimals like 0.8,0.2).
FREQ_SUM_TOL = 1e-9

#: Working precision (decimal digits) of the mpmath root finding for t*, b*, (E1)-(E2).
MP_DPS = 40

#: Residual of a high-precision root (E1)-(E2), the t* stationarity or the LN equation,
#: relative to the size of its terms, below which the root counts as solved. With 40 digits
#: Newton reaches ~1e-38; 1e-25 leaves ample room.
MP_RESIDUAL_TOL = 1e-25

#: Largest number of latent variables enumerated for ``latents="full"`` (K = n_c^L), and the largest
#: K drawn with ``latents="random"`` (K x L integers are stored).
MAX_FULL_LATENTS = 10 ** 6
MAX_RANDOM_K = 10 ** 6

#: Accepted range of lambda. Below LAMBDA_MIN the optimum's loss (~ lambda) and the certificates'
#: radius log(K)/lambda leave float64 (relative round-off of the CE gradient ~ 1e-16 / lambda);
#: above LAMBDA_MAX the LayerNorm scale b* ~ 1/lambda and the objective's variation fall below the
#: round-off of log K. Inside the range every formula is evaluated stably (log1p, mpmath roots).
LAMBDA_MIN = 1e-10
LAMBDA_MAX = 1e4

#: Largest n_c, L, s_c, d accepted (the predictions work at any size; the solver has its own budget).
MAX_N_C = 10_000
MAX_L = 1_000
MAX_S_C = 100_000
MAX_D = 100_000


def _mu_is_uniform(mu) -> bool:
    mu = np.asarray(mu, dtype=float)
    return bool(np.max(np.abs(mu - mu.mean())) <= 1e-12)


def zipf_freqs(s_c: int) -> tuple[float, ...]:
    """Zipf within-concept frequencies mu_beta proportional to 1/beta (beta = 1..s_c)."""
    s_c = as_int("s_c", s_c, minimum=1)
    w = [1.0 / b for b in range(1, s_c + 1)]
    tot = math.fsum(w)
    return tuple(x / tot for x in w)


@dataclass(frozen=True)
class FCInstance:
    """One feature-collapse problem instance (validated on construction).

    ``freqs`` = None means uniform within-concept frequencies. ``K`` = None is allowed only with
    ``latents="full"`` (then K = n_c^L); with "full" a different K is an error.
    """

    n_c: int
    L: int
    s_c: int
    d: int
    lam: float
    K: int | None = None
    layernorm: bool = False
    freqs: tuple[float, ...] | None = None
    latents: str = "full"
    seed: int = 0
    _latent_array: tuple = field(default=(), repr=False, compare=False)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("n_c", as_int("n_c (--concepts)", self.n_c, minimum=2, maximum=MAX_N_C))
        set_("L", as_int("L (--length)", self.L, minimum=1, maximum=MAX_L))
        set_("s_c", as_int("s_c (--words-per-concept)", self.s_c, minimum=1, maximum=MAX_S_C))
        set_("d", as_int("d (--dim)", self.d, minimum=1, maximum=MAX_D))
        set_("lam", as_float("lambda (--lambda)", self.lam, positive=True))
        if not LAMBDA_MIN <= self.lam <= LAMBDA_MAX:
            raise InstanceError(f"lambda (--lambda) must be in [{LAMBDA_MIN:g}, {LAMBDA_MAX:g}] (the range where the "
                                f"float64 evaluation and certificates are reliable), got {self.lam!r}")
        if not isinstance(self.layernorm, (bool, np.bool_)):
            raise InstanceError(f"layernorm must be True or False, got {self.layernorm!r}")
        set_("layernorm", bool(self.layernorm))
        if self.layernorm and self.d < 2:
            raise InstanceError(f"d (--dim) must be >= 2 with LayerNorm (in R^1 every embedding is proportional to "
                                f"the all-ones vector, where LayerNorm is undefined), got d = {self.d}")
        set_("seed", as_int("seed", self.seed, minimum=0))
        if not isinstance(self.latents, str) or self.latents not in ("full", "random"):
            raise InstanceError(f"latents must be 'full' or 'random', got {self.latents!r}")
        n_lat = self.n_c ** self.L if self.L * math.log10(self.n_c) <= 18 else 10 ** 19
        if self.latents == "full":
            if n_lat > MAX_FULL_LATENTS:
                raise InstanceError(f"latents='full' needs K = n_c^L = {n_lat} classes, more than the limit "
                                    f"{MAX_FULL_LATENTS}; use latents='random' with a K")
            if self.K is not None:
                K = as_int("K (--classes)", self.K, minimum=1)
                if K != n_lat:
                    raise InstanceError(f"K (--classes) = {K} is inconsistent with latents='full', which "
                                        f"uses all n_c^L = {n_lat} latent variables (omit K or pass {n_lat})")
            set_("K", n_lat)
        else:
            if self.K is None:
                raise InstanceError("K (--classes) is required with latents='random'")
            set_("K", as_int("K (--classes)", self.K, minimum=2, maximum=MAX_RANDOM_K))
        if self.freqs is None:
            mu = tuple([1.0 / self.s_c] * self.s_c)
        else:
            mu = as_float_tuple("freqs (--freqs)", self.freqs, positive=True)
            if len(mu) != self.s_c:
                raise InstanceError(f"freqs (--freqs) must have s_c = {self.s_c} entries (one per word of a "
                                    f"concept), got {len(mu)}")
            if any(x > 1.0 for x in mu):  # before fsum (1e308 + 1e308 overflowed in it)
                raise InstanceError(f"freqs (--freqs) must be frequencies in (0, 1] summing to 1, got {max(mu)!r}")
            tot = math.fsum(mu)
            if abs(tot - 1.0) > FREQ_SUM_TOL:
                raise InstanceError(f"freqs (--freqs) must sum to 1, got sum {tot!r}")
            mu = tuple(x / tot for x in mu)
        set_("freqs", mu)
        set_("_latent_array", tuple(map(tuple, self._draw_latents())))

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def n_w(self) -> int:
        return self.n_c * self.s_c

    @property
    def mu(self) -> np.ndarray:
        return np.asarray(self.freqs, dtype=float)

    @property
    def uniform(self) -> bool:
        return _mu_is_uniform(self.freqs)

    @property
    def lw(self) -> float:
        return 0.0 if self.layernorm else self.lam

    @property
    def lu(self) -> float:
        return self.lam

    @property
    def duplicates(self) -> int:
        """Other classes sharing a class's latent variable when every latent is used equally often
        (K = m n_c^L, symmetric): m - 1; 0 otherwise (the spec's idealisation for K < n_c^L)."""
        if not self.symmetric:
            return 0
        return self.K // self.n_c ** self.L - 1

    @property
    def n_sentences(self) -> int:
        """Number of (class, sentence) pairs in the exact risk: K * s_c^L."""
        return self.K * self.s_c ** self.L

    def _draw_latents(self) -> np.ndarray:
        if self.latents == "full":
            return np.array(list(itertools.product(range(self.n_c), repeat=self.L)), dtype=np.int64)
        rng = np.random.default_rng(self.seed)
        return rng.integers(0, self.n_c, size=(self.K, self.L), dtype=np.int64)

    @property
    def latent_vars(self) -> np.ndarray:
        """K x L array of concepts z_{k,l}."""
        return np.asarray(self._latent_array, dtype=np.int64).reshape(self.K, self.L)

    @property
    def symmetric(self) -> bool:
        """The latent symmetry assumption holds exactly: every latent used equally often."""
        if self.L * math.log10(self.n_c) > 7:  # more latent variables than MAX_RANDOM_K: never all used
            return False
        z = self.latent_vars
        n_lat = self.n_c ** self.L
        if self.K % n_lat:
            return False
        codes = z @ (self.n_c ** np.arange(self.L)[::-1])
        counts = np.bincount(codes, minlength=n_lat)
        return bool(np.all(counts == self.K // n_lat))

    def to_dict(self) -> dict:
        return {"n_c": self.n_c, "L": self.L, "s_c": self.s_c, "n_w": self.n_w, "K": self.K, "d": self.d,
                "lambda": self.lam, "layernorm": self.layernorm, "freqs": list(self.freqs),
                "latents": self.latents, "seed": self.seed, "symmetric": self.symmetric}


def instance_from_words(n_c: int, L: int, n_w: int, d: int, lam: float, **kw) -> FCInstance:
    """Build an instance from the total number of words n_w (must be a multiple of n_c)."""
    n_c = as_int("n_c (--concepts)", n_c, minimum=2)
    n_w = as_int("n_w (--words)", n_w, minimum=1)
    if n_w % n_c:
        raise InstanceError(f"n_w (--words) = {n_w} must be divisible by n_c (--concepts) = {n_c} "
                            f"(each concept has s_c = n_w/n_c words)")
    return FCInstance(n_c=n_c, L=L, s_c=n_w // n_c, d=d, lam=lam, **kw)


# ---------------------------------------------------------------------------------------------
# Data model: exact sentence distribution and a sampler
# ---------------------------------------------------------------------------------------------

def word_index(inst: FCInstance, alpha, beta):
    return np.asarray(alpha) * inst.s_c + np.asarray(beta)


def sentence_distribution(inst: FCInstance, max_sentences: int | None = None):
    """All (class, sentence) pairs of the population risk.

    Returns ``(X, y, p)``: X (S, L) word indices, y (S,) class labels, p (S,) probabilities
    (each class has mass 1/K, a sentence prod_l mu_{beta_l}), S = K s_c^L. Raises
    InstanceError naming the size when S exceeds ``max_sentences``.
    """
    S = inst.n_sentences
    if max_sentences is not None and S > max_sentences:
        raise InstanceError(f"instance too large to enumerate: K * s_c^L = {inst.K} * {inst.s_c}^{inst.L} = {S} "
                            f"sentences (limit {max_sentences}); reduce K, s_c or L")
    betas = np.array(list(itertools.product(range(inst.s_c), repeat=inst.L)), dtype=np.int64)  # (B, L)
    pb = np.prod(inst.mu[betas], axis=1)  # (B,)
    z = inst.latent_vars  # (K, L)
    X = (z[:, None, :] * inst.s_c + betas[None, :, :]).reshape(-1, inst.L)
    y = np.repeat(np.arange(inst.K), betas.shape[0])
    p = np.tile(pb, inst.K) / inst.K
    return X, y, p


def sample_sentences(inst: FCInstance, n_per_class: int, seed: int = 0):
    """Sample ``n_per_class`` sentences for every class (the training set of the data model).

    Returns ``(X, y)``: X (K n_per_class, L) word indices ``alpha * s_c + beta``, y class labels.
    Word beta_l ~ mu independently at every position; the concept at position l is z_{k,l}.
    """
    n = as_int("n_per_class", n_per_class, minimum=1)
    rng = np.random.default_rng(as_int("seed", seed, minimum=0))
    z = inst.latent_vars
    betas = rng.choice(inst.s_c, size=(inst.K, n, inst.L), p=inst.mu)
    X = (z[:, None, :] * inst.s_c + betas).reshape(-1, inst.L)
    y = np.repeat(np.arange(inst.K), n)
    return X, y


# ---------------------------------------------------------------------------------------------
# Hamming spheres and closed forms
# ---------------------------------------------------------------------------------------------

def sphere_sizes(n_c: int, L: int) -> list[int]:
    """|sphere of radius r| = C(L, r) (n_c - 1)^r, r = 0..L (sums to n_c^L)."""
    return [math.comb(L, r) * (n_c - 1) ** r for r in range(L + 1)]


def hamming_counts(inst: FCInstance) -> np.ndarray:
    """(K, L+1) array: for each class k, the number of *other* classes at Hamming distance r."""
    z = inst.latent_vars
    dist = (z[:, None, :] != z[None, :, :]).sum(axis=2)
    out = np.zeros((inst.K, inst.L + 1), dtype=np.int64)
    for k in range(inst.K):
        out[k] = np.bincount(dist[k], minlength=inst.L + 1)
    out[:, 0] -= 1  # class k itself
    return out


def lambda_crit(inst: FCInstance) -> float:
    """Theorem 1 threshold for uniform mu, no LN: sqrt(K L/n_w) / (1 + N0 + K - K n_c^-L).

    N0 = ``inst.duplicates`` (classes sharing a latent variable, K = m n_c^L symmetric: m - 1; then the
    threshold is sqrt(L/(n_w K))); N0 = 0 is the spec's formula. Derived in docs/feature_collapse.md.
    """
    K, L, n_c, n_w = inst.K, inst.L, inst.n_c, inst.n_w
    return math.sqrt(K * L / n_w) / (1 + inst.duplicates + K - K * float(n_c) ** (-L))


def lambda_crit_symmetric_freqs(inst: FCInstance) -> float:
    """Exact threshold without LN for K = n_c^L and any mu: sqrt(L sum mu^2 / (K n_c))."""
    return math.sqrt(inst.L * float(np.sum(inst.mu ** 2)) / (inst.K * inst.n_c))


def _rho(inst) -> mp.mpf:
    return mp.mpf(inst.K) / mp.mpf(inst.n_c) ** inst.L


@dataclass
class Prediction:
    """Predicted optimum for an instance. Missing constants are None."""

    theorem: str  # "theorem-1" | "theorem-2" | "theorem-3"
    geometry: str  # "type-I" | "type-II" | "type-III" | "trivial"
    objective: float
    cross_entropy: float
    t: float | None = None
    a: float | None = None
    b: float | None = None
    r: tuple[float, ...] | None = None
    lambda_crit: float | None = None
    kappa: float | None = None
    conjecture: bool = False  # Theorem 2: global optimality is a conjecture
    residual: float | None = None
    notes: str = ""

    def to_dict(self) -> dict:
        return {"theorem": self.theorem, "geometry": self.geometry, "value": self.objective,
                "cross_entropy": self.cross_entropy, "t": self.t, "a": self.a, "b": self.b,
                "r_beta": list(self.r) if self.r is not None else None, "lambda_crit": self.lambda_crit,
                "kappa": self.kappa, "global_optimality": "conjecture" if self.conjecture else "theorem",
                "residual": self.residual, "notes": self.notes}


def _reduced_ce(inst, c):
    """log(1 + N0 + rho [(1 + (n_c-1) e^-c)^L - 1]) in mpmath (c = margin per unit distance, N0 the
    duplicates of a class's latent variable: margin 0)."""
    n_c, L = inst.n_c, inst.L
    return mp.log(1 + inst.duplicates + _rho(inst) * ((1 + (n_c - 1) * mp.exp(-c)) ** L - 1))


def _increasing_root(f, what: str):
    """Root of an increasing function f on (0, inf) with f(0) < 0 < f(inf): bracket, bisect to
    MP_DPS - 5 digits, then polish with Newton (secant) when it stays in the bracket."""
    lo, hi = mp.mpf(0), mp.mpf(1)
    for _ in range(2000):
        if f(hi) > 0:
            break
        lo, hi = hi, hi * 2
    else:  # pragma: no cover - f increases to +inf
        raise ArithmeticError(f"{what}: root not bracketed")
    for _ in range(4 * MP_DPS):
        mid = (lo + hi) / 2
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= hi * mp.mpf(10) ** (-(MP_DPS - 5)):
            break
    x = (lo + hi) / 2
    try:
        y = mp.findroot(f, x, solver="newton")
        if lo <= y <= hi:
            x = y
    except (ValueError, ZeroDivisionError):
        pass
    return x


def type1_prediction(inst: FCInstance) -> Prediction:
    """Theorem 1 constants (no LN; the formula assumes uniform mu and the latent symmetry).

    t* minimises phi(t) = log(1 + rho[(1 + (n_c-1) e^{-c})^L - 1]) + Lambda t with
    c = n_c t/(n_c-1), Lambda = lambda sqrt(n_w K L); solved with mpmath at MP_DPS digits.
    """
    with mp.workdps(MP_DPS):
        n_c, L, K, n_w = inst.n_c, inst.L, inst.K, inst.n_w
        lam = mp.mpf(inst.lam)
        Lam = lam * mp.sqrt(n_w * K * L)
        kfac = mp.mpf(n_c) / (n_c - 1)
        lc = lambda_crit(inst)

        N0 = inst.duplicates

        def dphi(t):
            c = kfac * t
            q = 1 + (n_c - 1) * mp.exp(-c)
            num = -_rho(inst) * L * q ** (L - 1) * n_c * mp.exp(-c)
            return num / (1 + N0 + _rho(inst) * (q ** L - 1)) + Lam

        if dphi(mp.mpf(0)) >= 0:  # convex with phi'(0) >= 0: the minimum is t = 0
            ce = float(_reduced_ce(inst, mp.mpf(0)))
            return Prediction("theorem-1", "trivial", ce, ce, t=0.0, a=0.0, b=0.0, lambda_crit=lc,
                              notes="lambda >= lambda_crit: W = U = 0")
        t = _increasing_root(dphi, "t*")
        res = abs(dphi(t)) / Lam
        ce = _reduced_ce(inst, kfac * t)
        a = (t ** 2 * K * L / n_w) ** mp.mpf(0.25)
        b = (t ** 2 * n_w / (K * L)) ** mp.mpf(0.25)
        return Prediction("theorem-1", "type-I", float(ce + Lam * t), float(ce), t=float(t), a=float(a),
                          b=float(b), lambda_crit=lc, residual=float(res))


def type1_closed_form(inst: FCInstance) -> dict:
    """K = n_c^L closed forms: t*, CE*, lambda_crit (spec, Theorem 1)."""
    n_c, L, K, n_w, lam = inst.n_c, inst.L, inst.K, inst.n_w, inst.lam
    Lam = lam * math.sqrt(n_w * K * L)
    arg = (n_c / lam) * math.sqrt(L / (n_w * K)) - (n_c - 1)
    t = (n_c - 1) / n_c * math.log(arg) if arg > 1 else None
    ce = L * math.log(L * n_c / (L * n_c - (n_c - 1) * Lam)) if L * n_c > (n_c - 1) * Lam else None
    return {"t": t, "cross_entropy": ce, "lambda_crit": math.sqrt(L / (n_w * n_c ** L))}


def type2_prediction(inst: FCInstance) -> Prediction:
    """Theorem 3 (LayerNorm): b* minimises log(1 + rho[(1+(n_c-1)e^{-kappa b})^L - 1]) + (lambda/2) K L b^2."""
    with mp.workdps(MP_DPS):
        n_c, L, K = inst.n_c, inst.L, inst.K
        lam = mp.mpf(inst.lam)
        kappa = mp.sqrt(inst.d) * mp.mpf(n_c) / (n_c - 1)

        N0 = inst.duplicates

        def dpsi(b):
            c = kappa * b
            q = 1 + (n_c - 1) * mp.exp(-c)
            num = -_rho(inst) * L * q ** (L - 1) * (n_c - 1) * kappa * mp.exp(-c)
            return num / (1 + N0 + _rho(inst) * (q ** L - 1)) + lam * K * L * b

        b = _increasing_root(dpsi, "b*")
        ce = _reduced_ce(inst, kappa * b)
        obj = ce + lam / 2 * K * L * b ** 2
        res = abs(dpsi(b)) / (lam * K * L * b)
        return Prediction("theorem-3", "type-II", float(obj), float(ce), b=float(b), kappa=float(kappa),
                          residual=float(res))


def type3_system(inst: FCInstance, r, b):
    """Residuals of (E1) (one per beta) and (E2) in mpmath, relative to their right-hand sides."""
    n_c, L, K = inst.n_c, inst.L, inst.K
    lam = mp.mpf(inst.lam)
    mu = [mp.mpf(x) for x in inst.freqs]
    gamma = mp.mpf(n_c) / (n_c - 1) * b
    e1 = [r[i] * (mp.exp(gamma * r[i]) + n_c - 1) - L * mu[i] * b / lam for i in range(len(mu))]
    e2 = lam * K * b - n_c * mp.fsum(mu[i] * r[i] / (mp.exp(gamma * r[i]) + n_c - 1) for i in range(len(mu)))
    return e1, e2


def type3_restricted_risk(inst: FCInstance, r, b):
    """L sum mu log(1 + (n_c-1) e^{-gamma r}) + (lambda/2)(n_c sum r^2 + K L b^2) (mpmath)."""
    n_c, L, K = inst.n_c, inst.L, inst.K
    lam = mp.mpf(inst.lam)
    gamma = mp.mpf(n_c) / (n_c - 1) * b
    ce = L * mp.fsum(mp.mpf(m) * mp.log(1 + (n_c - 1) * mp.exp(-gamma * ri)) for m, ri in zip(inst.freqs, r))
    return ce, ce + lam / 2 * (n_c * mp.fsum(ri ** 2 for ri in r) + K * L * b ** 2)


def type3_prediction(inst: FCInstance) -> Prediction:
    """Theorem 2: the type-III critical point from (E1)-(E2), K = n_c^L, no LN.

    For b > 0, (E1) has a unique root r_beta(b) (its left side increases in r); given (E1),
    (E2) is equivalent to the balance K L b^2 = n_c sum r_beta^2. A nontrivial root exists iff
    lambda < sqrt(L sum mu^2/(K n_c)); otherwise the point is trivial (r = b = 0).
    The 1-D root is bracketed and then the full (s_c + 1)-dimensional system is polished by
    Newton at MP_DPS digits.
    """
    if inst.layernorm:
        raise InstanceError("type-III prediction is for the network without LayerNorm")
    n_c, L, K = inst.n_c, inst.L, inst.K
    with mp.workdps(MP_DPS):
        lam = mp.mpf(inst.lam)
        mu = [mp.mpf(x) for x in inst.freqs]
        thr = lambda_crit_symmetric_freqs(inst)
        if inst.lam >= thr:
            ce, obj = type3_restricted_risk(inst, [mp.mpf(0)] * inst.s_c, mp.mpf(0))
            return Prediction("theorem-2", "trivial", float(obj), float(ce), b=0.0, r=tuple([0.0] * inst.s_c),
                              lambda_crit=thr, conjecture=True, notes="lambda >= exact threshold: W = U = 0")

        def r_of(b, m):
            # f(r) = r (e^{gamma r} + n_c - 1) - c is convex and increasing on r >= 0, so Newton started
            # above the root (both c/n_c and W(gamma c)/gamma are upper bounds) decreases monotonically to it.
            gamma = mp.mpf(n_c) / (n_c - 1) * b
            c = L * m * b / lam
            if c <= 0:
                return mp.mpf(0)
            r = min(c / n_c, mp.lambertw(gamma * c).real / gamma)
            for _ in range(500):
                e = mp.exp(gamma * r)
                step = (r * (e + n_c - 1) - c) / (e + n_c - 1 + gamma * r * e)
                r -= step
                if abs(step) <= r * mp.mpf(10) ** (-mp.mp.dps + 3):
                    break
            return r

        def g(b):
            rs = [r_of(b, m) for m in mu]
            return (n_c * mp.fsum(x ** 2 for x in rs) - K * L * b ** 2) / b ** 2

        lo, hi = mp.mpf("1e-6"), mp.mpf(1)
        while g(lo) <= 0:
            lo /= 10
            if lo < mp.mpf("1e-30"):
                raise ArithmeticError("type-III root not bracketed near b = 0")
        while g(hi) > 0:
            hi *= 2
        for _ in range(200):  # bisection to 1e-20 relative (g > 0 below the root, < 0 above)
            mid = (lo + hi) / 2
            if g(mid) > 0:
                lo = mid
            else:
                hi = mid
            if hi - lo <= hi * mp.mpf(10) ** -20:  # then Newton on the full system
                break
        b = (lo + hi) / 2
        r = [r_of(b, m) for m in mu]

        def F(*v):
            e1, e2 = type3_system(inst, list(v[:-1]), v[-1])
            return e1 + [e2]

        sol = mp.findroot(F, r + [b], solver="mdnewton")
        sol = [sol[i] for i in range(inst.s_c + 1)]
        r, b = sol[:-1], sol[-1]
        e1, e2 = type3_system(inst, r, b)
        scale = max(abs(L * m * b / lam) for m in mu)
        res = max([abs(x) for x in e1] + [abs(e2)]) / scale
        ce, obj = type3_restricted_risk(inst, r, b)
        return Prediction("theorem-2", "type-III", float(obj), float(ce), b=float(b), r=tuple(float(x) for x in r),
                          lambda_crit=thr, conjecture=True, residual=float(res))


def predict(inst: FCInstance) -> Prediction:
    """The prediction of the applicable theorem: LN -> Theorem 3, uniform -> Theorem 1, else Theorem 2."""
    if inst.layernorm:
        return type2_prediction(inst)
    if inst.uniform:
        return type1_prediction(inst)
    return type3_prediction(inst)


def hypotheses(inst: FCInstance) -> list[str]:
    """Hypotheses of the applicable theorem that fail for this instance (empty: all hold)."""
    out = []
    if not inst.symmetric:
        out.append("latent symmetry assumption (every latent variable used equally often, e.g. latents='full')")
    if inst.layernorm:
        if inst.d < inst.n_c:
            out.append(f"d >= n_c (LayerNorm features orthogonal to 1 need d >= {inst.n_c}), got d = {inst.d}")
    else:
        if inst.d < inst.n_c - 1:
            out.append(f"d >= n_c - 1 = {inst.n_c - 1} (room for the simplex ETF of concepts), got d = {inst.d}")
        if not inst.uniform and inst.K != inst.n_c ** inst.L:
            out.append("K = n_c^L (Theorem 2)")
    return out


# ---------------------------------------------------------------------------------------------
# Constructed configurations
# ---------------------------------------------------------------------------------------------

def concept_vectors(n_c: int, d: int, orthogonal_to_ones: bool = False) -> np.ndarray:
    """Unit equiangular vectors f_1..f_{n_c} as rows (n_c x d); with ``orthogonal_to_ones``
    they are also orthogonal to the all-ones vector (needs d >= n_c)."""
    if not orthogonal_to_ones:
        return simplex_etf(n_c, d).T
    if d < n_c:
        raise InstanceError(f"d must be >= n_c = {n_c} for equiangular vectors orthogonal to 1, got d = {d}")
    F = simplex_etf(n_c, d - 1).T  # n_c x (d-1)
    # orthonormal basis of 1^perp in R^d (columns)
    Q, _ = np.linalg.qr(np.column_stack([np.ones(d), np.eye(d)[:, : d - 1]]))
    basis = Q[:, 1:d]
    return F @ basis.T


def configuration(inst: FCInstance, pred: Prediction | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The predicted (W, U): W (n_w x d) embeddings, U (K L x d) with row k*L + l = u_{k,l}.

    Type I: w = a f_alpha; type III: w = r_beta f_alpha; type II: w = sqrt(d) f_alpha (so that
    LN(w) = w); u_{k,l} = b f_{z_{k,l}}. Trivial: zeros.
    """
    pred = pred or predict(inst)
    F = concept_vectors(inst.n_c, inst.d, orthogonal_to_ones=inst.layernorm)
    alpha = np.repeat(np.arange(inst.n_c), inst.s_c)
    beta = np.tile(np.arange(inst.s_c), inst.n_c)
    if pred.geometry == "type-I" or (pred.geometry == "trivial" and pred.r is None):
        scale = np.full(inst.n_w, pred.a or 0.0)
    elif pred.geometry in ("type-III", "trivial"):
        scale = np.asarray(pred.r)[beta]
    elif pred.geometry == "type-II":
        scale = np.full(inst.n_w, math.sqrt(inst.d))
    else:  # pragma: no cover
        raise ValueError(pred.geometry)
    W = scale[:, None] * F[alpha]
    U = (pred.b or 0.0) * F[inst.latent_vars.reshape(-1)]
    return W, U


def type1_configuration(inst: FCInstance) -> tuple[np.ndarray, np.ndarray, Prediction]:
    """The best type-I point (Theorem 1 constants) for any mu: the type-I objective does not depend on mu."""
    p = type1_prediction(FCInstance(inst.n_c, inst.L, inst.s_c, inst.d, inst.lam, K=inst.K, latents=inst.latents,
                                    seed=inst.seed))
    W, U = configuration(FCInstance(inst.n_c, inst.L, inst.s_c, inst.d, inst.lam, K=inst.K, latents=inst.latents,
                                    seed=inst.seed), p)
    return W, U, p


# ---------------------------------------------------------------------------------------------
# Symbolic derivations (sympy): each returns expressions that must simplify to 0
# ---------------------------------------------------------------------------------------------

def symbolic_derivations() -> dict:
    """Name -> sympy expression that must simplify to 0 (or relation that must be True).

    Variables are positive symbols; L is taken at concrete values where sympy needs it.
    """
    import sympy as sp

    n, t, lam, nw, K, b, d, m = sp.symbols("n_c t lambda n_w K b d m", positive=True)
    r = sp.symbols("r", integer=True, nonnegative=True)
    out = {}
    # 1. sphere sizes sum to n_c^L (binomial theorem), L = 1..6
    for L in range(1, 7):
        out[f"sphere sizes sum to n_c^L (L={L})"] = sp.expand(
            sum(sp.binomial(L, k) * (n - 1) ** k for k in range(L + 1)) - n ** L)
    # 2. margin sum over spheres r >= 1 equals (1 + (n_c-1) e^-m)^L - 1
    for L in range(1, 7):
        out[f"sum_r>=1 N_r e^(-m r) = (1+(n_c-1)e^-m)^L - 1 (L={L})"] = sp.expand(
            sum(sp.binomial(L, k) * (n - 1) ** k * sp.exp(-m * k) for k in range(1, L + 1))
            - ((1 + (n - 1) * sp.exp(-m)) ** L - 1))
    # 3. margin per differing position under type I: a b (<f,f> - <f,f'>) = n_c/(n_c-1) a b
    a = sp.symbols("a", positive=True)
    out["type-I margin per position = n_c/(n_c-1) a b"] = a * b * (1 - (-1 / (n - 1))) - n / (n - 1) * a * b
    # 4. reduced objective for K = n_c^L (rho = 1): phi'(t*) = 0 and CE(t*) closed form
    for L in (1, 2, 3, 4):
        Lam = lam * sp.sqrt(nw * n ** L * L)
        c = n / (n - 1) * t
        phi = L * sp.log(1 + (n - 1) * sp.exp(-c)) + Lam * t
        tstar = (n - 1) / n * sp.log((n / lam) * sp.sqrt(sp.Integer(L) / (nw * n ** L)) - (n - 1))
        out[f"phi'(t*) = 0 for K = n_c^L (L={L})"] = sp.diff(phi, t).subs(t, tstar)
        ce_star = L * sp.log(L * n / (L * n - (n - 1) * Lam))
        out[f"CE(t*) closed form (L={L})"] = sp.exp((L * sp.log(1 + (n - 1) * sp.exp(-c))).subs(t, tstar) / L) \
            - sp.exp(ce_star / L)
    # 5. lambda_crit: phi'(0) = 0 at lambda = sqrt(K L/n_w)/(1 + N0 + K - K n_c^-L) (general K, rho = K/n_c^L,
    #    N0 classes sharing a class's latent variable: margin 0)
    N0 = sp.symbols("N_0", nonnegative=True)
    for L in (1, 2, 3):
        rho = K / n ** L
        Lam = lam * sp.sqrt(nw * K * L)
        c = n / (n - 1) * t
        phi = sp.log(1 + N0 + rho * ((1 + (n - 1) * sp.exp(-c)) ** L - 1)) + Lam * t
        lc = sp.sqrt(K * L / nw) / (1 + N0 + K - K * n ** (-L))
        out[f"phi'(0) = 0 at lambda_crit (L={L})"] = sp.diff(phi, t).subs(t, 0).subs(lam, lc)
    # 6. balance: a*, b* satisfy a b = t and n_w a^2 = K L b^2, and attain 2 sqrt(n_w K L) t
    Lsym = sp.symbols("L", positive=True)
    astar = (t ** 2 * K * Lsym / nw) ** sp.Rational(1, 4)
    bstar = (t ** 2 * nw / (K * Lsym)) ** sp.Rational(1, 4)
    out["a* b* = t"] = sp.powsimp(astar * bstar, force=True) - t
    out["balance n_w a*^2 = K L b*^2"] = sp.powsimp(nw * astar ** 2 - K * Lsym * bstar ** 2, force=True)
    out["penalty n_w a*^2 + K L b*^2 = 2 sqrt(n_w K L) t"] = sp.powsimp(
        nw * astar ** 2 + K * Lsym * bstar ** 2 - 2 * sp.sqrt(nw * K * Lsym) * t, force=True)
    # 7. type III: (E1), (E2) are the stationarity of the restricted risk (s_c = 2 symbols)
    r1, r2, m1, m2 = sp.symbols("r_1 r_2 mu_1 mu_2", positive=True)
    for L in (1, 2, 3):
        gamma = n / (n - 1) * b
        R = L * (m1 * sp.log(1 + (n - 1) * sp.exp(-gamma * r1)) + m2 * sp.log(1 + (n - 1) * sp.exp(-gamma * r2))) \
            + lam / 2 * (n * (r1 ** 2 + r2 ** 2) + K * L * b ** 2)
        # dR/dr1 * (e^{gamma r1} + n_c - 1)/(lambda n_c) = r1 (e + n_c - 1)... written as (E1)
        e1 = r1 * (sp.exp(gamma * r1) + n - 1) - L * m1 * b / lam
        out[f"(E1) <=> dR/dr_beta = 0 (L={L})"] = sp.diff(R, r1) * (sp.exp(gamma * r1) + n - 1) / (lam * n) - e1 / 1 \
            + 0 * r2
        e2 = lam * K * b - n * (m1 * r1 / (sp.exp(gamma * r1) + n - 1) + m2 * r2 / (sp.exp(gamma * r2) + n - 1))
        out[f"(E2) <=> dR/db = 0 (L={L})"] = sp.diff(R, b) / L - e2
    # 8. LayerNorm: for K = n_c^L, psi'(b) = 0 <=> b (e^{kappa b} + n_c - 1) = n_c sqrt(d)/(lambda K)
    for L in (1, 2, 3):
        kappa = sp.sqrt(d) * n / (n - 1)
        Kf = n ** L
        psi = L * sp.log(1 + (n - 1) * sp.exp(-kappa * b)) + lam / 2 * Kf * L * b ** 2
        lhs = b * (sp.exp(kappa * b) + n - 1) - n * sp.sqrt(d) / (lam * Kf)
        out[f"LN equation for b* (L={L})"] = sp.diff(psi, b) * (sp.exp(kappa * b) + n - 1) / (lam * Kf * L) - lhs
    return out


#: The claimed geometries a configuration can be built for (keys: ``Prediction.geometry``).
CONFIGURATION_GEOMETRIES = ("type-I", "type-II", "type-III", "trivial")


def claimed_configuration(inst: FCInstance, pred: Prediction):
    """(W, U, E) of the claimed optimum, or None with the reason when it cannot be built.

    The trivial phase with LayerNorm means U = 0 (features of norm sqrt(d) cannot vanish): then the
    features are any valid LayerNorm outputs (the type-II directions) and U = 0. (Moved here from
    proofs_check/claims/feature_collapse.py: the claims and the ball-arithmetic recipe both build it.)
    """
    need = inst.n_c if inst.layernorm else inst.n_c - 1
    if inst.d < max(need, 1):
        return None, f"d = {inst.d} < {need}: the claimed geometry does not fit in R^d"
    for v in (pred.a, pred.b, pred.objective):
        if v is not None and (isinstance(v, bool) or not (isinstance(v, (int, float, np.floating, np.integer))
                                                       and math.isfinite(float(v)))):
            return None, "the prediction has non-finite constants"
    # the constants each claimed geometry is built from (a prediction fed from outside may lack them)
    if pred.geometry not in CONFIGURATION_GEOMETRIES:
        return None, f"unknown geometry {pred.geometry!r} (known: {', '.join(CONFIGURATION_GEOMETRIES)})"
    if pred.geometry in ("type-I", "type-II", "type-III") and pred.b is None:
        return None, f"the {pred.geometry} prediction gives no constant b"
    if pred.geometry == "type-I" and pred.a is None:
        return None, "the type-I prediction gives no constant a"
    if pred.geometry == "type-III" or (pred.geometry == "trivial" and pred.r is not None and not inst.layernorm):
        r = np.asarray(pred.r if pred.r is not None else (), dtype=float).ravel()
        if r.size != inst.s_c or not np.all(np.isfinite(r)):
            return None, (f"the {pred.geometry} prediction needs {inst.s_c} finite r_beta (one per word of a "
                          f"concept), got {pred.r!r}")
    if inst.layernorm and pred.geometry == "trivial":
        F = concept_vectors(inst.n_c, inst.d, orthogonal_to_ones=True)
        W = math.sqrt(inst.d) * F[np.repeat(np.arange(inst.n_c), inst.s_c)]
        U = np.zeros((inst.K * inst.L, inst.d))
    else:
        W, U = configuration(inst, pred)
    if inst.layernorm:
        V = W - W.mean(axis=1, keepdims=True)
        nrm = np.linalg.norm(V, axis=1, keepdims=True)
        if not np.all(nrm > 0):
            return None, "the claimed embeddings are proportional to 1 (LayerNorm undefined there)"
        E = math.sqrt(inst.d) * V / nrm
    else:
        E = W
    return (W, U, E), ""
