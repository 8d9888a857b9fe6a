"""A two-level hierarchical version of the feature-collapse data model (docs/feature_collapse.md, "Hierarchy").

Tree: n_m meta-concepts; meta-concept mu has n_c concepts (its own: concept (mu, c)), concept (mu, c) has s_c words
(word (mu, c, b), index (mu n_c + c) s_c + b). A class k has a latent variable z_k in [n_m]^{L2} (all n_m^{L2}
sequences, K = n_m^{L2}). A sentence of class k has L = L1 L2 words in L2 chunks: chunk j draws L1 concepts of
meta-concept z_{k,j} uniformly and independently, and each concept draws one of its words uniformly.

Network (two layers with LayerNorm at each level, eps = 0, no affine part): e_v = phi(w_v) in R^{d1};
chunk j: q_j = phi(A [e_{x_{j,1}}; ...; e_{x_{j,L1}}]) in R^{d2} (A in R^{d2 x L1 d1}, shared by the chunks);
scores h_k(x) = sum_j <u_{k,j}, q_j>; objective = mean cross-entropy + (lambda/2)||U||^2. W and A are not
decayed: LayerNorm makes the objective invariant to their scale (phi(c v) = phi(v), c > 0), so decay on them
would only push them to 0 without a minimiser.

Level-2 relaxation: replacing q(omega) by free LayerNorm outputs per chunk omega gives exactly the fixed-LN
feature-collapse instance with the chunks as words: ``level2_instance`` (n_m concepts, L2 positions,
(n_c s_c)^{L1} words per concept, uniform frequencies, d2). Theorem 3 predicts its optimum (type II).
This module imports nothing from ``solvers`` or ``proofs_check``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from theory._validate import InstanceError, as_float, as_int
from theory.feature_collapse import LAMBDA_MAX, LAMBDA_MIN, FCInstance, concept_vectors

#: Largest number of (class, sentence) pairs of the exact hierarchical risk (K ((n_c s_c)^{L1})^{L2}).
MAX_HIER_SENTENCES = 200_000


@dataclass(frozen=True)
class HierInstance:
    """Two-level instance (validated). Defaults: the Performance instance of issue 23 (3 concepts per level,
    2 levels, length 4)."""

    n_m: int = 3
    n_c: int = 3
    s_c: int = 2
    L1: int = 2
    L2: int = 2
    d1: int = 4
    d2: int = 4
    lam: float = 0.05

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("n_m", as_int("n_m (--meta-concepts)", self.n_m, minimum=2, maximum=50))
        set_("n_c", as_int("n_c (--concepts-per-meta)", self.n_c, minimum=1, maximum=50))
        set_("s_c", as_int("s_c (--words-per-concept)", self.s_c, minimum=1, maximum=50))
        set_("L1", as_int("L1 (--chunk)", self.L1, minimum=1, maximum=10))
        set_("L2", as_int("L2 (--length / --chunk)", self.L2, minimum=1, maximum=10))
        # at most 1000: the constructed minimiser's QR is O(d^3) (d = 10000 ran for minutes before any check)
        set_("d1", as_int("d1 (--dims)", self.d1, minimum=2, maximum=1000))
        set_("d2", as_int("d2 (--dims)", self.d2, minimum=2, maximum=1000))
        for name, d in (("d1", self.d1), ("d2", self.d2)):
            # the relaxation's prediction and the constructed minimiser put a simplex ETF of the n_m meta-concepts
            # among LayerNorm outputs (orthogonal to 1): d >= n_m. Below it the refusal came from the flat
            # instance, naming "n_c" and "d" (neither is an option here)
            if d < self.n_m:
                raise InstanceError(f"{name} (--dims) must be >= n_m (--meta-concepts) = {self.n_m}: the level-2 "
                                    f"relaxation and the constructed minimiser need a simplex ETF of the {self.n_m} "
                                    f"meta-concepts among LayerNorm outputs (orthogonal to 1), got {name} = {d}")
        set_("lam", as_float("lambda (--lambda)", self.lam, positive=True))
        if not LAMBDA_MIN <= self.lam <= LAMBDA_MAX:
            raise InstanceError(f"lambda (--lambda) must be in [{LAMBDA_MIN:g}, {LAMBDA_MAX:g}], got {self.lam!r}")
        if self.n_sentences > MAX_HIER_SENTENCES:
            raise InstanceError(f"instance too large to enumerate: K ((n_c s_c)^L1)^L2 = {self.n_sentences} sentences "
                                f"(limit {MAX_HIER_SENTENCES}); reduce --meta-concepts, --concepts-per-meta, "
                                "--words-per-concept or --length")

    @property
    def K(self) -> int:
        return self.n_m ** self.L2

    @property
    def L(self) -> int:
        return self.L1 * self.L2

    @property
    def n_w(self) -> int:
        return self.n_m * self.n_c * self.s_c

    @property
    def chunks_per_meta(self) -> int:
        return (self.n_c * self.s_c) ** self.L1

    @property
    def n_sentences(self) -> int:
        return self.n_m ** self.L2 * self.chunks_per_meta ** self.L2

    def to_dict(self) -> dict:
        return {"levels": 2, "n_m": self.n_m, "n_c": self.n_c, "s_c": self.s_c, "L1": self.L1, "L2": self.L2,
                "length": self.L, "n_w": self.n_w, "K": self.K, "d1": self.d1, "d2": self.d2, "lambda": self.lam}


def level2_instance(h: HierInstance) -> FCInstance:
    """The relaxation: fixed-LN feature collapse with the chunks as words (chunk index mu * s2 + beta2)."""
    return FCInstance(h.n_m, h.L2, h.chunks_per_meta, h.d2, h.lam, layernorm=True)


def chunk_words(h: HierInstance) -> np.ndarray:
    """(n_m s2, L1) word indices of every chunk, in the order of level2_instance's words: chunk beta2 of meta mu
    enumerates (c_1..c_L1, b_1..b_L1) lexicographically over (concept, word) pairs per slot."""
    out = []
    per_slot = list(itertools.product(range(h.n_c), range(h.s_c)))  # (c, b)
    for mu in range(h.n_m):
        for combo in itertools.product(per_slot, repeat=h.L1):
            out.append([(mu * h.n_c + c) * h.s_c + b for c, b in combo])
    return np.asarray(out, dtype=np.int64)


def word_concept(h: HierInstance) -> np.ndarray:
    """Concept index (mu n_c + c) of every word."""
    return np.arange(h.n_w) // h.s_c


def word_meta(h: HierInstance) -> np.ndarray:
    return np.arange(h.n_w) // (h.n_c * h.s_c)


def constructed_minimiser(h: HierInstance, b: float, extra_angle: float | None = None):
    """(W, A, U) attaining the level-2 relaxation's type-II value (derived in docs): e_v = sqrt(d1) h_{mu(v)}
    (meta-concept ETF in R^{d1}), A = [M ... M] with M h_mu = g_mu (meta ETF in R^{d2}), u_{k,j} = b g_{z_kj}.

    ``extra_angle``: word 0 is rotated to sqrt(d1)(cos t h_mu + sin t k), k a unit vector orthogonal to 1 and
    to the ETF (needs d1 >= n_m + 1; M k = 0): every chunk feature is a positive multiple of the same g_mu, so
    the scores, hence the objective, are unchanged (the witness against 'layer 1 collapses at every minimiser')."""
    Hm = concept_vectors(h.n_m, h.d1, orthogonal_to_ones=True)  # n_m x d1
    Gm = concept_vectors(h.n_m, h.d2, orthogonal_to_ones=True)  # n_m x d2
    M = (h.n_m - 1) / h.n_m * Gm.T @ Hm  # d2 x d1: M h_nu = g_nu
    A = np.hstack([M] * h.L1)
    W = math.sqrt(h.d1) * Hm[word_meta(h)]
    if extra_angle is not None:
        if h.d1 < h.n_m + 1:
            raise InstanceError(f"the layer-1 witness needs d1 >= n_m + 1 = {h.n_m + 1}, got d1 = {h.d1}")
        P = np.column_stack([np.ones(h.d1), Hm.T])  # rank n_m (the ETF spans n_m - 1 dimensions)
        res = np.eye(h.d1) - P @ np.linalg.pinv(P)  # projector onto the complement
        k = res[:, int(np.argmax(np.linalg.norm(res, axis=0)))]
        k = k / np.linalg.norm(k)  # orthogonal to 1 and to every h_mu
        mu = word_meta(h)[0]
        W = W.copy()
        W[0] = math.sqrt(h.d1) * (math.cos(extra_angle) * Hm[mu] + math.sin(extra_angle) * k)
    z = level2_instance(h).latent_vars.reshape(-1)
    U = b * Gm[z]
    return W, A, U
