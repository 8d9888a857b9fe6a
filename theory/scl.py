"""Supervised contrastive loss (SCL): lower bounds, predicted geometry, batching conditions.

Spec: ``docs/scl.md``. Sources: Kini, Vakilian, Behnia, Gill, Thrampoulidis, ICLR 2024
(arXiv 2306.07960) for Theorems 1, 2 and the batching corollary; Graf, Hofer, Niethammer,
Kwitt, ICML 2021 for the balanced ETF value. The statements are *reconstructed* (from the
abstracts, the authors' code and an independent derivation), not quoted: the papers'
normalisation may differ (e.g. ||h||^2 = 1/tau instead of unit norm and logits h.h'/tau).

Convention used everywhere here: unit-norm features h_i, logits h_i.h_l / tau, and the loss
is a *sum* over anchors (no 1/N). Samples are indexed class by class: class 0 holds indices
0..n_0-1, class 1 the next n_1, and so on.

Loss of a batch B (spec): for each anchor i in B whose class has n_{B,y_i} >= 2 members in B,

    1/(n_{B,y_i}-1) sum_{j in P_B(i)} log sum_{l in B, l != i} exp((h_i.h_l - h_i.h_j)/tau),

which equals LSE_{l in B, l != i}(G_il/tau) - mean_{j in P_B(i)} G_ij/tau with G = H^T H.

Everything in this module is a pure function of the instance (numpy/mpmath/sympy). The
numeric loss, its gradient and the solvers live in ``solvers/scl.py``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from theory import _work
from theory._validate import TEXT_BLANKS, InputError, InstanceError, as_float, as_int, as_int_tuple, int_from_text

# --------------------------------------------------------------------------------------
# Instance
# --------------------------------------------------------------------------------------

#: Largest instance (number of samples) accepted; the dense N x N Gram of the full batch is
#: the limiting object. Far above what the convex certificates handle (they check N).
MAX_SAMPLES = 200_000

#: Largest feature dimension (an instance never needs more than N + 1: the Gram of N unit vectors
#: lives in R^N; the budget check refuses what does not fit in memory long before this).
MAX_DIM = 1_000_000

#: Accepted temperatures. Lower end: the loss is a difference of log-sum-exps of logits G/tau of size
#: up to 1/tau, so float64 evaluates it (with the stable formulas used everywhere) to an absolute error
#: of about N (a few ulps) / tau; at tau = 1e-4 that is ~1e-12 * N, far below the value tolerance
#: (1e-6 relative, >= 1e-6 absolute), while at tau = 1e-10 it would reach the tolerance itself.
#: Upper end: the loss depends on the features only through G/tau, a variation of ~1/tau per anchor on
#: a value of ~log N; at tau = 1e8 that is still 1e8 ulps, beyond it the geometry drowns in rounding.
TAU_MIN = 1e-4
TAU_MAX = 1e8


def validate_tau(tau) -> float:
    """tau as a float in [TAU_MIN, TAU_MAX] (InstanceError naming the range otherwise)."""
    t = as_float("tau", tau, positive=True)
    if not TAU_MIN <= t <= TAU_MAX:
        raise InstanceError(f"tau must lie in [{TAU_MIN:g}, {TAU_MAX:g}] (float64 evaluation of the loss with "
                            f"stable formulas is accurate there), got {t:g}")
    return t


def validate_batches(batches, N: int) -> tuple[tuple[int, ...], ...]:
    """Validate a batching: a non-empty list of non-empty batches of distinct indices in [0, N)."""
    if isinstance(batches, (str, bytes)):
        raise InstanceError(f"batches must be a list of lists of sample indices, got {batches!r}")
    try:
        seq = list(batches)
    except TypeError:
        raise InstanceError(f"batches must be a list of lists of sample indices, got {batches!r}") from None
    if not seq:
        raise InstanceError("batches must contain at least one batch (omit it for the full batch)")
    out = []
    for b, batch in enumerate(seq):
        if isinstance(batch, (str, bytes)):
            raise InstanceError(f"batches[{b}] must be a list of sample indices, got {batch!r}")
        try:
            items = list(batch)
        except TypeError:
            raise InstanceError(f"batches[{b}] must be a list of sample indices, got {batch!r}") from None
        if not items:
            raise InstanceError(f"batches[{b}] is empty (every batch needs at least one sample)")
        idx = tuple(as_int(f"batches[{b}][{t}]", v, minimum=0) for t, v in enumerate(items))
        bad = [i for i in idx if i >= N]
        if bad:
            raise InstanceError(f"batches[{b}] has sample index {bad[0]} out of range (N = {N} samples: 0..{N - 1})")
        if len(set(idx)) != len(idx):
            dup = next(i for i in idx if idx.count(i) > 1)
            raise InstanceError(f"batches[{b}] repeats sample index {dup} (a batch is a set of samples)")
        out.append(idx)
    return tuple(out)


def parse_batches_text(text: str) -> list[list[int]]:
    """Parse the CLI form "0,1,4,5;2,3,6,7" (batches separated by ';', indices by ',')."""
    if not isinstance(text, str) or not text.strip():
        raise InstanceError("batches must be a non-empty string like '0,1,4,5;2,3,6,7'")
    out = []
    for b, part in enumerate(text.split(";")):
        items = [x.strip(TEXT_BLANKS) for x in part.split(",")]
        if not any(items):
            raise InstanceError(f"batches[{b}] is empty (every batch needs at least one sample)")
        if not all(items):  # "0,,1", "0,1,": an empty entry is an error, never dropped (as in every list option)
            raise InstanceError(f"batches[{b}] has an empty entry, got {part.strip()[:60]!r}")
        try:
            # the integer syntax of every option: no 3_0 (30 for int()), no other scripts' digits
            out.append([int_from_text(x) for x in items])
        except InputError:
            raise InstanceError(f"batches[{b}] must be comma-separated integers (an optional sign and the digits "
                                f"0-9), got {part.strip()[:60]!r}") from None
    return out


@dataclass(frozen=True)
class SCLInstance:
    """An SCL problem: class sizes, temperature, feature dimension, nonnegativity, batching.

    ``batches=None`` means the full batch (one batch holding every sample). ``nonneg=True``
    is the UFM+ model (ReLU before normalisation), ``False`` the plain UFM on the sphere.
    """

    counts: tuple[int, ...]
    tau: float
    d: int
    nonneg: bool = True
    batches: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self):
        counts = as_int_tuple("counts", self.counts, minimum=1, min_len=2)
        object.__setattr__(self, "counts", counts)
        if sum(counts) > MAX_SAMPLES:
            raise InstanceError(f"counts must sum to at most {MAX_SAMPLES} samples, got {sum(counts)}")
        object.__setattr__(self, "tau", validate_tau(self.tau))
        object.__setattr__(self, "d", as_int("d", self.d, minimum=1, maximum=MAX_DIM))
        if not isinstance(self.nonneg, (bool, np.bool_)):
            raise InstanceError(f"nonneg must be True or False, got {self.nonneg!r}")
        object.__setattr__(self, "nonneg", bool(self.nonneg))
        if self.batches is not None:
            object.__setattr__(self, "batches", validate_batches(self.batches, sum(counts)))

    @property
    def k(self) -> int:
        return len(self.counts)

    @property
    def N(self) -> int:
        return sum(self.counts)

    @property
    def labels(self) -> np.ndarray:
        return labels_from_counts(self.counts)

    @property
    def full_batch(self) -> bool:
        return self.batches is None

    def batch_list(self) -> tuple[tuple[int, ...], ...]:
        """The batches, with the full batch spelled out."""
        return self.batches if self.batches is not None else (tuple(range(self.N)),)

    @property
    def balanced(self) -> bool:
        return len(set(self.counts)) == 1

    def to_dict(self) -> dict:
        return {"counts": list(self.counts), "tau": self.tau, "d": self.d, "nonneg": self.nonneg,
                "batches": None if self.batches is None else [list(b) for b in self.batches],
                "k": self.k, "N": self.N}


def labels_from_counts(counts: Sequence[int]) -> np.ndarray:
    """Labels 0..k-1, class by class (class c repeated n_c times)."""
    counts = as_int_tuple("counts", counts, minimum=1)
    return np.repeat(np.arange(len(counts)), counts)


def class_offsets(counts: Sequence[int]) -> list[int]:
    """Index of the first sample of each class."""
    return [0] + list(itertools.accumulate(counts))[:-1]


# --------------------------------------------------------------------------------------
# Closed-form values (float; mpmath where precision matters)
# --------------------------------------------------------------------------------------

def per_anchor_bound(n: int, m: int, tau: float) -> float:
    """log(n - 1 + (m - n) e^{-1/tau}): the Theorem 1 bound of one anchor whose class has
    n >= 2 members in a batch of m samples. Stable for tiny tau (the exponential underflows to 0)."""
    n = as_int("n", n, minimum=2)
    m = as_int("m", m, minimum=n)
    tau = validate_tau(tau)
    return math.log((n - 1) + (m - n) * math.exp(-1.0 / tau))


def batch_class_counts(labels: np.ndarray, batch: Sequence[int], k: int) -> np.ndarray:
    return np.bincount(np.asarray(labels)[list(batch)], minlength=k)


def theorem2_bound(counts: Sequence[int], batches, tau: float) -> float:
    """Theorem 2 (Kini et al., reconstructed): sum over batches B and classes c with n_{B,c} >= 2
    of n_{B,c} log(n_{B,c} - 1 + (|B| - n_{B,c}) e^{-1/tau}). ``batches=None`` is the full batch."""
    inst = SCLInstance(tuple(counts), tau, 1, True, batches)
    y = inst.labels
    total = 0.0
    for b in inst.batch_list():
        nb = batch_class_counts(y, b, inst.k)
        for n in nb.tolist():
            if n >= 2:
                total += n * per_anchor_bound(n, len(b), inst.tau)
    return float(total)


def theorem1_bound(counts: Sequence[int], tau: float) -> float:
    """Theorem 1 (full batch, UFM+): sum over classes with n_c >= 2 of n_c log(n_c - 1 + (N - n_c) e^{-1/tau})."""
    return theorem2_bound(counts, None, tau)


def etf_value(counts: Sequence[int], tau: float) -> float:
    """Full-batch loss at a collapsed simplex ETF (class means pairwise cosine -1/(k-1)):
    sum over classes with n_c >= 2 of n_c log(n_c - 1 + (N - n_c) e^{-k/((k-1) tau)}).

    For balanced classes this is the Graf et al. minimum of the UFM (d >= k-1)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    tau = validate_tau(tau)
    k, N = len(counts), sum(counts)
    a = math.exp(-k / ((k - 1) * tau))
    return float(sum(n * math.log((n - 1) + (N - n) * a) for n in counts if n >= 2))


def graf_balanced_value(k: int, n: int, tau: float) -> float:
    """Graf et al. (balanced, full batch, d >= k-1): N log(n - 1 + (N - n) e^{-k/((k-1) tau)}), N = k n."""
    k = as_int("k", k, minimum=2)
    n = as_int("n", n, minimum=2)
    return etf_value((n,) * k, tau)


def relu_cost(counts: Sequence[int], tau: float) -> float | None:
    """Theorem 1 value minus the ETF value on balanced counts (the price of nonnegativity);
    None when the counts are imbalanced (the UFM optimum is then not the ETF value)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    if len(set(counts)) != 1 or counts[0] < 2:
        return None
    return theorem1_bound(counts, tau) - etf_value(counts, tau)


def tau_limits(n: int, N: int) -> tuple[float, float]:
    """Limits of the per-anchor bound: log(n-1) as tau -> 0+, log(N-1) as tau -> infinity."""
    n = as_int("n", n, minimum=2)
    N = as_int("N", N, minimum=n)
    return math.log(n - 1), math.log(N - 1)


# --------------------------------------------------------------------------------------
# Predicted configurations
# --------------------------------------------------------------------------------------

def of_features(counts: Sequence[int], d: int) -> np.ndarray:
    """Collapsed orthogonal frame: h_i = e_{y_i} in R^d (d x N, nonnegative). Needs d >= k."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=1)
    d = as_int("d", d, minimum=1)
    k = len(counts)
    if d < k:
        raise InstanceError(f"d must be >= k = {k} for an orthogonal frame, got d = {d}")
    y = labels_from_counts(counts)
    H = np.zeros((d, y.size))
    H[y, np.arange(y.size)] = 1.0
    return H


def of_gram(counts: Sequence[int]) -> np.ndarray:
    """Sample Gram of the collapsed orthogonal frame: G_ij = 1 if y_i = y_j else 0."""
    y = labels_from_counts(counts)
    return (y[:, None] == y[None, :]).astype(float)


def etf_features(counts: Sequence[int], d: int) -> np.ndarray:
    """Collapsed simplex ETF with unit-norm means (d x N). Needs d >= k-1."""
    from theory.geometry import simplex_etf

    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    M = simplex_etf(len(counts), d, 1.0)
    return M[:, labels_from_counts(counts)]


def required_dim_for_bound(counts: Sequence[int]) -> int:
    """Smallest d at which the Theorem 1 bound is attained in UFM+ (derived from the equality
    conditions): every class with n_c >= 2 needs its own coordinate (collapse + orthogonality to
    all other samples, and nonnegative orthogonal vectors have disjoint supports), and all the
    singleton classes can share one more coordinate (they are never constrained against each
    other)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    multi = sum(1 for n in counts if n >= 2)
    return multi + (1 if any(n == 1 for n in counts) else 0)


def shared_singletons_features(counts: Sequence[int], d: int) -> np.ndarray:
    """A minimiser of the full-batch UFM+ bound in which every singleton class shares one
    direction (so it needs only ``required_dim_for_bound`` coordinates)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    need = required_dim_for_bound(counts)
    d = as_int("d", d, minimum=need)
    y = labels_from_counts(counts)
    coord, slot = {}, 0
    for c, n in enumerate(counts):
        if n >= 2:
            coord[c] = slot
            slot += 1
    for c, n in enumerate(counts):
        if n == 1:
            coord[c] = slot
    H = np.zeros((d, y.size))
    for i, c in enumerate(y):
        H[coord[int(c)], i] = 1.0
    return H


# --------------------------------------------------------------------------------------
# Imbalance profiles (as in the authors' code)
# --------------------------------------------------------------------------------------

def _profile_classes(k) -> int:
    """The K of a profile, refused before its counts are built: every class has >= 1 sample, so K > MAX_SAMPLES
    can never pass the instance's sample limit (`table scl --profile step --classes 100000000` built a tuple of
    10^8 counts for minutes before that refusal)."""
    k = as_int("classes", k, minimum=2)
    if k > MAX_SAMPLES:
        raise InstanceError(f"classes (--classes) = {k}: every class has at least one sample, so N >= {k} exceeds the "
                            f"limit of {MAX_SAMPLES} samples")
    return k


def step_counts(k: int, n_maj: int, ratio: float, rho: float = 0.5) -> tuple[int, ...]:
    """STEP(R, rho): the first floor(rho k) classes have n_maj samples, the others floor(n_maj / R)."""
    k = _profile_classes(k)
    n_maj = as_int("majority", n_maj, minimum=1)
    ratio = as_float("ratio", ratio, positive=True)
    rho = as_float("step_fraction", rho, nonnegative=True)
    if ratio < 1:
        raise InstanceError(f"ratio must be >= 1, got {ratio}")
    if rho > 1:
        raise InstanceError(f"step_fraction must be <= 1, got {rho}")
    n_maj_classes = math.floor(rho * k)
    n_min = math.floor(n_maj / ratio)
    if n_min < 1 and n_maj_classes < k:
        raise InstanceError(f"majority/ratio = {n_maj}/{ratio} < 1 leaves minority classes empty")
    return tuple([n_maj] * n_maj_classes + [n_min] * (k - n_maj_classes))


def longtail_counts(k: int, n_maj: int, ratio: float) -> tuple[int, ...]:
    """Long-tail: n_c = floor(n_maj * R^(-c/(k-1))), c = 0..k-1."""
    k = _profile_classes(k)
    n_maj = as_int("majority", n_maj, minimum=1)
    ratio = as_float("ratio", ratio, positive=True)
    if ratio < 1:
        raise InstanceError(f"ratio must be >= 1, got {ratio}")
    # a small epsilon guards floor() against representation error (e.g. 10 * 10^-1 = 0.99999)
    out = tuple(int(math.floor(n_maj * ratio ** (-c / (k - 1)) + 1e-9)) for c in range(k))
    if min(out) < 1:
        raise InstanceError(f"majority {n_maj} with ratio {ratio} leaves class {out.index(min(out))} empty")
    return out


# --------------------------------------------------------------------------------------
# Batching: conditions C1, C2, uniqueness of the orthogonal frame, batch-binding
# --------------------------------------------------------------------------------------

class _DSU:
    def __init__(self, items: Iterable[int]):
        self.p = {i: i for i in items}

    def find(self, i):
        while self.p[i] != i:
            self.p[i] = self.p[self.p[i]]
            i = self.p[i]
        return i

    def union(self, a, b) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.p[rb] = ra
        return True


@dataclass
class BatchingAnalysis:
    """Conditions C1/C2 for a batching and what they imply (spec: Corollary, reconstructed).

    ``C1_per_class[c]``: the same-batch graph of class c is connected, where an edge counts
    only when the batch also holds a sample of another class (see ``C1_literal`` and the note
    below). ``C2_per_pair[(c, c')]``: some batch holds both classes and >= 2 members of one.
    ``of_unique``: True/False when decided (with a witness construction for False), None when
    undecided (the reason says why).

    Note (derived here): a batch holding one class only has no negatives, and its loss
    log sum_j e^{G_ij/tau} - mean_j G_ij/tau is minimised by *equal* similarities, not by
    collapse (for two samples it is identically 0). Edges from such batches therefore do not
    force collapse; the spec's literal C1 counts them and then over-predicts uniqueness.
    """

    counts: tuple[int, ...]
    batches: tuple[tuple[int, ...], ...]
    d: int
    C1_per_class: list[bool]
    C1_literal_per_class: list[bool]
    components: list[list[list[int]]]  # per class, the components (sample indices) of the C1 graph
    C2_per_pair: dict[tuple[int, int], bool]
    uncovered: list[int]  # samples that lie in no batch
    of_unique: bool | None
    reason: str
    witness: str | None = None  # name of the construction proving non-uniqueness
    notes: list[str] = field(default_factory=list)
    witness_pair: tuple[int, int] | None = None  # C2 witness: the two classes to merge
    witness_class: int | None = None  # C1 witness: the class whose component(s) move
    witness_moving: list[list[int]] | None = None  # C1 witness: components moved to fresh directions

    @property
    def C1(self) -> bool:
        return all(self.C1_per_class)

    @property
    def C1_literal(self) -> bool:
        return all(self.C1_literal_per_class)

    @property
    def C2(self) -> bool:
        return all(self.C2_per_pair.values())

    def to_dict(self) -> dict:
        k = len(self.counts)
        return {"counts": list(self.counts), "batches": [list(b) for b in self.batches], "d": self.d,
                "C1": self.C1, "C2": self.C2, "C1_literal": self.C1_literal,
                "C1_per_class": {str(c): self.C1_per_class[c] for c in range(k)},
                "C1_literal_per_class": {str(c): self.C1_literal_per_class[c] for c in range(k)},
                "C1_components": {str(c): self.components[c] for c in range(k)},
                "C2_per_pair": {f"{a},{b}": v for (a, b), v in self.C2_per_pair.items()},
                "uncovered_samples": self.uncovered,
                "of_unique": self.of_unique, "reason": self.reason, "witness": self.witness,
                "notes": self.notes}


def analyze_batching(counts: Sequence[int], batches, d: int | None = None) -> BatchingAnalysis:
    """C1 and C2 per class / class pair and whether the OF is the unique minimiser at dimension d
    (default k + 1). Pure combinatorics; the proofs are in docs/scl.md.

    - C1 and C2 -> unique (equality conditions force collapse along C1 edges and orthogonality
      along C2 batches).
    - C2 fails for (c, c') -> not unique: give both classes one direction ("merge" witness).
    - C1 fails for class c -> not unique when a component of c can move to a fresh direction
      (needs d >= k + 1, and no single-class batch of >= 3 samples linking that component to
      the rest of c, since such a batch forces equal similarities). Otherwise undecided (None).
    """
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    k, N = len(counts), sum(counts)
    d = k + 1 if d is None else as_int("dim", d, minimum=1)
    if d < k:
        raise InstanceError(f"dim must be >= k = {k} (the orthogonal frame needs k dimensions), got {d}")
    batches = validate_batches(batches, N) if batches is not None else (tuple(range(N)),)
    y = labels_from_counts(counts)
    classes = [list(np.flatnonzero(y == c)) for c in range(k)]

    dsu = _DSU(range(N))
    dsu_lit = _DSU(range(N))
    covered = set()
    single_class_big: list[tuple[int, list[int]]] = []  # (class, members) of one-class batches with >= 3
    C2 = {(a, b): False for a in range(k) for b in range(a + 1, k)}
    for b in batches:
        covered.update(b)
        nb = np.bincount(y[list(b)], minlength=k)
        present = np.flatnonzero(nb)
        for c in present:
            mem = [i for i in b if y[i] == c]
            for i in mem[1:]:
                dsu_lit.union(mem[0], i)
                if len(present) >= 2:
                    dsu.union(mem[0], i)
            if len(present) == 1 and len(mem) >= 3:
                single_class_big.append((int(c), mem))
        for a, bb in itertools.combinations(present, 2):
            if nb[a] >= 2 or nb[bb] >= 2:
                C2[(int(a), int(bb))] = True

    # One-class batches with >= 3 samples force equal pairwise similarities: if two of their
    # members are already collapsed (same component) the whole batch collapses. Close under this.
    changed = True
    while changed:
        changed = False
        for c, mem in single_class_big:
            roots = [dsu.find(i) for i in mem]
            if len(set(roots)) < len(roots):
                for i in mem[1:]:
                    changed |= dsu.union(mem[0], i)

    def comps(ds):
        out = []
        for c in range(k):
            groups: dict[int, list[int]] = {}
            for i in classes[c]:
                groups.setdefault(ds.find(i), []).append(int(i))
            out.append(sorted(groups.values()))
        return out

    components = comps(dsu)
    lit = comps(dsu_lit)
    C1 = [len(components[c]) == 1 for c in range(k)]
    C1_lit = [len(lit[c]) == 1 for c in range(k)]
    uncovered = sorted(set(range(N)) - covered)
    notes = []
    if C1 != C1_lit:
        bad = [c for c in range(k) if C1_lit[c] and not C1[c]]
        notes.append(f"class(es) {bad}: connected only through batches holding one class; such batches "
                     "have no negatives and do not force collapse, so C1 counts only batches with >= 2 classes")
    if uncovered:
        notes.append(f"samples {uncovered[:10]}{'…' if len(uncovered) > 10 else ''} lie in no batch (unconstrained)")

    witness = None
    w_pair = w_class = w_moving = None
    if all(C1) and all(C2.values()):
        unique, reason = True, "C1 and C2 hold: the equality conditions force the orthogonal frame"
    elif not all(C2.values()):
        a, b = next(p for p, v in C2.items() if not v)
        unique, witness, w_pair = False, f"merge classes {a} and {b}", (a, b)
        reason = (f"C2 fails for classes ({a}, {b}): no batch holds both with >= 2 members of one, "
                  "so giving both classes one direction also attains the bound")
    else:
        c = next(c for c in range(k) if not C1[c])
        linked = set()
        for cc, mem in single_class_big:
            if cc == c:
                roots = {dsu.find(i) for i in mem}
                if len(roots) >= 2:
                    linked.update(roots)
        free = [comp for comp in components[c] if dsu.find(comp[0]) not in linked]
        if d >= k + 1 and free:
            unique, witness = False, f"fresh direction for samples {free[-1]} of class {c}"
            w_class, w_moving = c, [free[-1]]
            reason = (f"C1 fails for class {c} (components {components[c]}): moving one component to a "
                      "fresh direction also attains the bound")
        elif d >= k + len(components[c]) - 1:
            unique, witness = False, f"fresh direction for every component of class {c}"
            w_class, w_moving = c, components[c][1:]
            reason = (f"C1 fails for class {c}: every component of the class on its own direction "
                      "also attains the bound")
        elif d == k:
            unique = None
            reason = (f"C1 fails for class {c}, but at d = k there is no fresh direction; "
                      "C1's necessity needs d >= k + 1 (undecided here)")
        else:
            unique = None
            reason = (f"C1 fails for class {c}, but one-class batches link its components; "
                      f"the constructions need d >= {k + len(components[c]) - 1} (undecided at d = {d})")
    return BatchingAnalysis(counts, batches, d, C1, C1_lit, components, C2, uncovered, unique, reason,
                            witness, notes, w_pair, w_class, w_moving)


def alternative_minimiser(counts: Sequence[int], batches, d: int) -> np.ndarray | None:
    """A minimiser of the UFM+ batched loss (attaining the Theorem 2 bound) whose Gram differs from
    the orthogonal frame's, built by the witness construction of ``analyze_batching``; None when
    the OF is unique or undecided. Columns are unit, nonnegative, d x N."""
    an = analyze_batching(counts, batches, d)
    if an.of_unique is not False:
        return None
    k = len(counts)
    y = labels_from_counts(counts)
    H = of_features(counts, d)
    if an.witness_pair is not None:
        a, b = an.witness_pair
        H[:, y == b] = 0.0
        H[a, y == b] = 1.0
    else:
        for t, comp in enumerate(an.witness_moving):
            H[:, comp] = 0.0
            H[k + t, comp] = 1.0
    return H


def batch_binding(counts: Sequence[int], batches) -> tuple[tuple[int, ...], ...]:
    """Batch-binding: add the first sample of every class to every batch (where missing)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    N = sum(counts)
    batches = validate_batches(batches, N)
    anchors = class_offsets(counts)
    return tuple(tuple(b) + tuple(a for a in anchors if a not in b) for b in batches)


# --------------------------------------------------------------------------------------
# Symbolic derivations (sympy): each returns an expression that must simplify to 0 / True
# --------------------------------------------------------------------------------------

def _sym():
    import sympy as sp

    n, N, m, q = sp.symbols("n N m q", positive=True)  # q = |B| - n > 0 (number of negatives)
    tau, s = sp.symbols("tau s", positive=True)
    mu = sp.symbols("mu", real=True)  # mean positive similarity
    return sp, n, N, m, q, tau, s, mu


def sym_per_anchor_rewrite_zero():
    """The anchor bound after Jensen and G_il >= 0 for the q negatives, rewritten:
    log((n-1) e^{mu/tau} + q) - mu/tau == log(n-1 + q e^{-mu/tau}). Returns
    exp(left) - exp(right) (must simplify to 0; exp is injective)."""
    sp, n, N, m, q, tau, s, mu = _sym()
    lhs = sp.log((n - 1) * sp.exp(mu / tau) + q) - mu / tau
    rhs = sp.log(n - 1 + q * sp.exp(-mu / tau))
    return sp.simplify(sp.exp(lhs)) - sp.simplify(sp.exp(rhs))


def sym_jensen_convexity():
    """The Jensen step uses convexity of s -> e^{s/tau}: its second derivative is > 0."""
    sp, n, N, m, q, tau, s, mu = _sym()
    return sp.diff(sp.exp(s / tau), s, 2) > 0


def sym_bound_decreasing():
    """d/dmu log(n-1 + q e^{-mu/tau}) < 0 for n >= 2 (n-1 > 0), q > 0: the bound is decreasing in
    the mean positive similarity, so mu <= 1 gives the minimum at mu = 1. Returns the derivative
    written with p = n - 1 > 0 and the relation derivative < 0."""
    import sympy as sp

    p, q, tau = sp.symbols("p q tau", positive=True)
    mu = sp.symbols("mu", real=True)
    f = sp.log(p + q * sp.exp(-mu / tau))
    df = sp.simplify(sp.diff(f, mu))
    return df, (df < 0)


def sym_of_anchor_value():
    """Anchor loss at the collapsed OF (positives at similarity 1, q negatives at 0), minus the
    anchor bound log(n-1 + q e^{-1/tau}): must simplify to 0 (equality is attained)."""
    sp, n, N, m, q, tau, s, mu = _sym()
    at_of = sp.log((n - 1) * sp.exp(1 / tau) + q * sp.exp(0)) - 1 / tau
    bound = sp.log(n - 1 + q * sp.exp(-1 / tau))
    return sp.simplify(sp.exp(at_of) - sp.exp(bound))


def sym_etf_two_forms():
    """Graf et al. ETF value, two forms: the anchor loss at a collapsed ETF,
    log((n-1) e^{1/tau} + (N-n) e^{-1/((k-1) tau)}) - 1/tau, against
    log(n-1 + (N-n) e^{-k/((k-1) tau)}). Returns exp(first) - exp(second) (must be 0)."""
    import sympy as sp

    n, N, tau = sp.symbols("n N tau", positive=True)
    k = sp.symbols("k", positive=True)
    first = sp.log((n - 1) * sp.exp(1 / tau) + (N - n) * sp.exp(-1 / ((k - 1) * tau))) - 1 / tau
    second = sp.log(n - 1 + (N - n) * sp.exp(-k / ((k - 1) * tau)))
    return sp.simplify(sp.expand(sp.exp(first)) - sp.exp(second))


def sym_relu_cost_positive():
    """Balanced ReLU cost per anchor: log(n-1 + (N-n) e^{-1/tau}) - log(n-1 + (N-n) e^{-k/((k-1) tau)})
    > 0 because k/(k-1) > 1. Returned as the relation between the arguments' exponents:
    e^{-1/tau} - e^{-k/((k-1)tau)} > 0, written with k = 1 + r (r > 0)."""
    import sympy as sp

    r, tau = sp.symbols("r tau", positive=True)
    k = 1 + r
    # -1/tau > -k/((k-1) tau)  <=>  k/(k-1) - 1 = 1/r > 0
    return sp.simplify(k / ((k - 1) * tau) - 1 / tau) > 0


def sym_centering_of_to_etf(k: int):
    """Centering an orthogonal frame by the unweighted mean of its vectors: Gram(J_k I_k) =
    J_k, i.e. a simplex ETF with norm sqrt((k-1)/k). Returns Gram - J_k (must be the zero matrix)."""
    import sympy as sp

    k = as_int("k", k, minimum=2)
    J = sp.eye(k) - sp.ones(k, k) / k
    M = sp.eye(k) * J  # columns e_c - (1/k) 1
    return sp.simplify(M.T * M - J)


def sym_tau_limits():
    """Limits of the per-anchor bound f = log(n-1 + (N-n) e^{-1/tau}) for 1 < n < N:
    returns (lim_{tau->0+} f - log(n-1), lim_{tau->oo} f - log(N-1)) (both must be 0)."""
    import sympy as sp

    p, q, tau = sp.symbols("p q tau", positive=True)  # p = n - 1, q = N - n
    f = sp.log(p + q * sp.exp(-1 / tau))
    low = sp.limit(f, tau, 0, "+") - sp.log(p)
    high = sp.limit(f, tau, sp.oo) - sp.log(p + q)  # p + q = N - 1
    return sp.simplify(low), sp.simplify(high)


def weighted_centering_cosines(counts: Sequence[int]) -> np.ndarray:
    """Cosines of the OF class means after centring by the *sample-weighted* mean (not an ETF under
    imbalance; the geometry reference values give -0.7715, -0.5244, -0.1373 for (5,3,2))."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    k = len(counts)
    w = np.asarray(counts, float) / sum(counts)
    M = np.eye(k) - w[:, None]  # column c: e_c - sum_j w_j e_j
    G = M.T @ M
    nr = np.sqrt(np.diag(G))
    return G / np.outer(nr, nr)


# --------------------------------------------------------------------------------------
# Budgets: what an instance check will cost, estimated from its sizes before any work
# --------------------------------------------------------------------------------------

#: Every instance check must end within ~2 minutes on 2 cores and stay under 2.5 GB.
MEMORY_LIMIT_BYTES = 2.5e9
TIME_LIMIT_S = 120.0
#: Effective float64 throughput assumed by the estimates: the loss is made of small products
#: (N x N x d) run single-threaded on a shared 2-core machine; measured ~1 ms per evaluation at
#: N = 200, d = 11 (~0.5 GFLOP/s with the exponentials).
FLOPS_PER_S = 5e8
#: The refusal compares WORK (flop-equivalents: the factored starts' flops plus the certificates' eigendecompositions
#: counted at FLOPS_PER_S / EIG_N3_PER_S) with this fixed limit, what TIME_LIMIT_S buys at FLOPS_PER_S: the same on
#: every machine and at any load.
WORK_LIMIT_FLOPS = TIME_LIMIT_S * FLOPS_PER_S
#: Fewest L-BFGS evaluations one start needs (measured 50-260 per start at N = 200): an instance
#: whose starts cannot do this many within the time limit is refused before any work.
MIN_EVALS_PER_START = 30
#: The N x N Gram certificates (dual bound and geometry certificate: a few symmetric
#: eigendecompositions, ~10 N^3 flops each) are computed up to this many samples.
GRAM_CERT_MAX = 1500
#: Symmetric eigendecompositions (LAPACK, threaded): measured 8.5 s for N = 1500 on the loaded 2-core
#: machine, i.e. N^3 / 4e8 seconds; a certificate set needs up to 4 of them.
EIG_N3_PER_S = 4e8
#: Largest number of exponential cones handed to the conic solver (N = 60 full batch: 3540; the
#: conic route only proposes a candidate point, so beyond this it is skipped, not refused).
CONIC_MAX_CONES = 20_000


def _batch_sizes(inst: "SCLInstance") -> list[int]:
    return [inst.N] if inst.batches is None else [len(b) for b in inst.batches]


def certificate_first_applies(inst: "SCLInstance") -> bool:
    """Whether `solve scl` can decide the instance from a certificate at a predicted closed form without a factored
    solve (docs/scl.md, "Certificate first"): UFM+ with d >= k (full batch: the closed-form dual point at the OF;
    mini-batches with N <= GRAM_CERT_MAX: the dense dual at the OF), or balanced full-batch UFM with n >= 2 and
    d >= k - 1 (the ETF). Whether the certificate then closes is decided by the numbers, not here."""
    if inst.nonneg:
        return inst.d >= inst.k and (inst.full_batch or inst.N <= GRAM_CERT_MAX)
    return inst.full_batch and inst.balanced and inst.counts[0] >= 2 and inst.d >= inst.k - 1


def dimension_below_closed_forms(inst: "SCLInstance") -> bool:
    """Full batch with d below the dimension the closed forms need (k - 1; k with nonnegative features): the value and
    geometry statements do not apply, the class-reduced dual proves the lower bound, and `solve scl` runs only a
    bounded confirmation instead of the multi-start search (docs/scl.md, "Certificate first")."""
    return inst.full_batch and inst.d < (inst.k if inst.nonneg else inst.k - 1)


def estimate_cost(inst: "SCLInstance", *, starts: int = 1, hops: int = 0, factored: bool = True) -> dict:
    """Memory (bytes) and time (seconds) an instance check needs at least, from its sizes only:
    ``starts`` factored starts of MIN_EVALS_PER_START loss evaluations each, plus the N x N Gram
    certificates when N <= GRAM_CERT_MAX. ``hops`` run under the solver's wall-clock budget and are
    not counted. Nothing is allocated here."""
    starts = as_int("starts", starts, minimum=1)
    as_int("hops", hops, minimum=0)
    N, d = inst.N, inst.d
    sizes = [m for m in _batch_sizes(inst) if m >= 2]
    entries = sum(m * m for m in sizes)
    # one evaluation: Gram blocks (2 d m^2) plus ~30 flops per entry (exp, softmax, gradient)
    eval_flops = float(sum(m * m * (2.0 * d + 30.0) for m in sizes))
    by_size: dict[int, int] = {}
    for m in sizes:
        by_size[m] = by_size.get(m, 0) + m * m
    biggest_group = max(by_size.values(), default=0)
    # ~5 float arrays of a group's size (Gram blocks, working buffer, gradient) + its bool masks,
    # and the parameters: L-BFGS memory (2 x 20 pairs) plus ~10 work copies of d x N
    eval_bytes = 5 * 8.0 * biggest_group + 2.0 * biggest_group
    param_bytes = 8.0 * d * N * (2 * 20 + 10)
    cert = N <= GRAM_CERT_MAX
    k = inst.k
    if not factored and inst.nonneg and inst.full_batch:
        # closed-form dual at the OF (O(k)) + the class-reduced dual (a few k x k eigendecompositions) + the loss at
        # the OF (one N x N evaluation); no dense N x N certificate
        cert = False
        cert_bytes = 8.0 * (8 * k * k + 4 * N * N)
        cert_seconds = 6.0 * k ** 3 / EIG_N3_PER_S + 40.0 * N * N / FLOPS_PER_S
    else:
        cert_bytes = 12 * 8.0 * N * N if cert else 0.0
        cert_seconds = 4.0 * N ** 3 / EIG_N3_PER_S if cert else 0.0
    solve_flops = starts * MIN_EVALS_PER_START * eval_flops if factored else 0.0
    seconds = solve_flops / FLOPS_PER_S + cert_seconds
    # certificate first keeps the memory of a possible confirmation solve (one start) in the estimate
    memory = max(eval_bytes + param_bytes, cert_bytes)
    exp_cones = sum(m * (m - 1) for m in sizes)
    return {"memory_bytes": memory, "seconds": seconds, "eval_flops": eval_flops, "gram_entries": entries,
            "work_flops": solve_flops + cert_seconds * FLOPS_PER_S, "factored": bool(factored),
            "certificate_seconds": cert_seconds,
            "gram_certificate": cert, "exp_cones": exp_cones, "starts": starts}


def check_budget(inst: "SCLInstance", *, starts: int = 1, hops: int = 0, factored: bool = True) -> dict:
    """:func:`estimate_cost`, raising InstanceError (one line: the estimated work, the machine rate it assumes and
    the limit) when the instance would exceed MEMORY_LIMIT_BYTES or WORK_LIMIT_FLOPS (TIME_LIMIT_S x FLOPS_PER_S) of
    work; the decision counts work, the machine's measured rate is only stated.
    ``factored=False``: only the certificate route (certificate first)."""
    est = estimate_cost(inst, starts=starts, hops=hops, factored=factored)
    if est["memory_bytes"] > MEMORY_LIMIT_BYTES:
        raise InstanceError(f"instance too large: N = {inst.N}, d = {inst.d}, largest batch group "
                            f"{est['gram_entries']} Gram entries needs ~{est['memory_bytes'] / 1e9:.3g} GB, "
                            f"limit {MEMORY_LIMIT_BYTES / 1e9:g} GB (reduce counts, dim or batch sizes)")
    if est["work_flops"] > WORK_LIMIT_FLOPS:
        solve = (f"{starts} starts x {MIN_EVALS_PER_START} evaluations of ~{est['eval_flops']:.3g} flops + "
                 if est["factored"] else "")
        raise InstanceError(f"instance too large (N = {inst.N}, d = {inst.d}): {solve}certificates: "
                            + _work.work_text(est["work_flops"], WORK_LIMIT_FLOPS, "flop-equivalents",
                                              seconds_per_unit=1.0 / FLOPS_PER_S)
                            + "; reduce starts, dim or counts")
    return est


# --------------------------------------------------------------------------------------
# Activations before the normalisation (docs/scl.md, "Other activations")
# --------------------------------------------------------------------------------------

def _gelu(v):
    from scipy.special import erf

    v = np.asarray(v, dtype=float)
    return 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))


#: LeakyReLU negative slope (PyTorch's default).
LEAKY_SLOPE = 0.01

#: name -> (function, category). Categories: "nonneg-closed": range [0, a) with 0 attained (features may have exact
#: zeros: UFM+); "positive-open": range (0, a) (every feature strictly positive: the UFM+ bound is an infimum only);
#: "signed": the range contains a neighbourhood of 0 (every unit direction is realised: the plain UFM).
ACTIVATIONS = {
    "relu": (lambda v: np.maximum(np.asarray(v, float), 0.0), "nonneg-closed"),
    "relu6": (lambda v: np.clip(np.asarray(v, float), 0.0, 6.0), "nonneg-closed"),
    "softplus": (lambda v: np.logaddexp(0.0, np.asarray(v, float)), "positive-open"),
    "sigmoid": (lambda v: 0.5 * (1.0 + np.tanh(0.5 * np.asarray(v, float))), "positive-open"),
    "gelu": (_gelu, "signed"),
    "silu": (lambda v: np.asarray(v, float) * 0.5 * (1.0 + np.tanh(0.5 * np.asarray(v, float))), "signed"),
    "leaky-relu": (lambda v: np.where(np.asarray(v, float) >= 0, np.asarray(v, float), LEAKY_SLOPE * np.asarray(v, float)),
                   "signed"),
}


def activation_category(name: str) -> str:
    if name not in ACTIVATIONS:
        raise InstanceError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name][1]


def sym_activation(name: str):
    """The activation as a sympy expression of a real v (for the positivity / sign facts)."""
    import sympy as sp

    v = sp.symbols("v", real=True)
    if name == "softplus":
        return v, sp.log(1 + sp.exp(v))
    if name == "sigmoid":
        return v, 1 / (1 + sp.exp(-v))
    if name == "silu":
        return v, v / (1 + sp.exp(-v))
    if name == "gelu":
        return v, v * (1 + sp.erf(v / sp.sqrt(2))) / 2
    if name == "leaky-relu":
        return v, sp.Piecewise((v, v >= 0), (sp.Rational(1, 100) * v, True))
    if name == "relu":
        return v, sp.Max(v, 0)
    if name == "relu6":
        return v, sp.Min(sp.Max(v, 0), 6)
    raise InstanceError(f"unknown activation {name!r}")


def realise_direction(name: str, u: np.ndarray, scale: float = 0.05) -> np.ndarray:
    """Pre-activations v with f(v) = scale * u (u a unit vector) for a "signed" activation: f is increasing on an
    interval around 0 containing [-scale, scale] in its image; bisection per entry to full precision."""
    f, cat = ACTIVATIONS[name]
    u = np.asarray(u, dtype=float)
    target = scale * u
    lo = np.full(u.shape, -0.7 if name != "leaky-relu" else -10.0)
    hi = np.full(u.shape, 1.0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = f(mid) < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


# ---- thread statements (review thread of Kini et al.) -------------------------------------------------------

def sym_thread_distances():
    """Features of squared norm 1/tau: ||mu_c - mu_c'||^2 = (2/tau)(1 - cos). Returns (ETF distance -
    2k/(tau(k-1)), OF distance - 2/tau, OF distance at tau(k-1)/k - ETF distance at tau): all must be 0."""
    import sympy as sp

    k, tau = sp.symbols("k tau", positive=True)
    dist = lambda cos, t: (2 / t) * (1 - cos)
    etf = dist(-1 / (k - 1), tau)
    of = dist(0, tau)
    return (sp.simplify(etf - 2 * k / (tau * (k - 1))), sp.simplify(of - 2 / tau),
            sp.simplify(dist(0, tau * (k - 1) / k) - etf))


def sym_eq1_eq2(m: int = 4):
    """One anchor with m other samples, logits b_1..b_m (b_1 the positive's): Eq (1) -log(e^{b_1} / sum_l e^{b_l})
    minus Eq (2) log(sum_l e^{b_l - b_1}) (its l = 1 term is e^0 = 1). Returns exp(Eq1) - exp(Eq2) (must be 0)."""
    import sympy as sp

    b = sp.symbols(f"b1:{m + 1}", real=True)
    eq1 = -sp.log(sp.exp(b[0]) / sum(sp.exp(x) for x in b))
    eq2 = sp.log(sum(sp.exp(x - b[0]) for x in b))
    return sp.simplify(sp.expand(sp.exp(eq1) - sp.exp(eq2)))


def sym_rank(k: int):
    """Ranks of the collapsed class-mean Grams: OF I_k (rank k) and the simplex ETF I - 11^T/k (rank k - 1)."""
    import sympy as sp

    k = as_int("k", k, minimum=2)
    return sp.eye(k).rank(), (sp.eye(k) - sp.ones(k, k) / k).rank()


def binary_antipodal_value(counts: Sequence[int], tau: float) -> float:
    """Binary UFM (no nonnegativity), full batch: sum over classes with n_c >= 2 of n_c log(n_c - 1 + (N - n_c)
    e^{-2/tau}) (Jensen, negatives at cosine >= -1; equality iff collapsed antipodal class means)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    tau = validate_tau(tau)
    N = sum(counts)
    return float(sum(n * math.log((n - 1) + (N - n) * math.exp(-2.0 / tau)) for n in counts if n >= 2))


def all_combinations_batching(counts: Sequence[int], b: int) -> list[list[int]]:
    """Graf et al.'s batching: every subset of b samples (as sorted index lists)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    N = sum(counts)
    b = as_int("batch size", b, minimum=2, maximum=N)
    return [list(c) for c in itertools.combinations(range(N), b)]
