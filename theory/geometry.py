"""Predicted geometries (simplex ETF, orthogonal frame) and neural-collapse metrics.

Notation follows ``docs/metrics.md``: features are the columns of ``H`` (d x N), labels
``y`` (N,), class means ``mu_c``, global mean ``h_bar`` = unweighted mean of the class means,
centred means ``M = [mu_c - h_bar]`` (d x k), classifier ``W`` (k x d), ``J_k = I - 11^T/k``.

Every metric that does not exist for an input (a ratio with a zero denominator, a cosine
of a zero vector) is returned as ``None``, never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from theory._validate import InputError, InstanceError, as_finite_array, as_float, as_int, as_labels

#: Default tolerance for geometry classification: Frobenius distance between the
#: normalised Gram and the normalised template. 1e-3 separates an optimum found to
#: ~1e-8 in value (geometry error ~ sqrt of value error, ~1e-4) from visibly different
#: geometries (the imbalanced SCL optimum is ~1e-2 away from an ETF).
GEOMETRY_TOL = 1e-3

#: Below this Frobenius norm a Gram matrix counts as zero (trivial phase); an absolute threshold
#: (Grams of class means of order one; callers with another scale pass ``zero_tol=`` to
#: :func:`classify_gram` and read its ``scale``).
ZERO_TOL = 1e-8

#: A Gram matrix must be symmetric up to this relative entry-wise asymmetry (products M^T M are
#: symmetric to rounding, ~1e-16 relative; anything beyond 1e-8 is not a Gram matrix).
SYMMETRY_RTOL = 1e-8

#: Budgets (preamble: refuse before allocating what exceeds ~2 GB or ~2 minutes on 2 cores).
#: Largest dense float64 array a constructor allocates (2 GB).
MAX_ARRAY_BYTES = 2_000_000_000
#: Largest k for which :func:`simplex_etf` runs its k x k symmetric eigendecomposition
#: (measured order: k = 4000 in ~10 s on 2 cores; O(k^3)).
MAX_EIGH_K = 5000
#: Largest number of columns :func:`cosine_matrix` returns a nested Python list for
#: (k^2 Python floats of ~32 bytes each: 7000^2 x 32 B ~ 1.6 GB).
MAX_COSINE_COLUMNS = 7000

GEOMETRY_CLASSES = ("simplex-etf", "orthogonal-frame", "other", "zero")


def _check_bytes(what: str, entries: float) -> None:
    need = 8.0 * float(entries)
    if need > MAX_ARRAY_BYTES:
        raise InputError(f"{what}: needs about {need / 1e9:.3g} GB of memory, above the limit of "
                         f"{MAX_ARRAY_BYTES / 1e9:.3g} GB")


def _as_tol(name: str, value) -> float:
    """A finite tolerance >= 0 (TypeError for non-numbers, InputError otherwise)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number >= 0, got {type(value).__name__} {value!r}")
    return as_float(name, value, nonnegative=True)


def _as_norm(name: str, value) -> float:
    """A vector norm: a finite real number > 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number > 0, got {type(value).__name__} {value!r}")
    return as_float(name, value, positive=True)


def _as_count(name: str, value, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and math.isfinite(float(value)) and float(value).is_integer():
            return as_int(name, value, minimum=minimum)
        raise TypeError(f"{name} must be an integer >= {minimum}, got {type(value).__name__} {value!r}")
    return as_int(name, value, minimum=minimum)


def _as_gram(G, name: str = "G") -> np.ndarray:
    """A Gram matrix: a finite, square, symmetric, non-empty 2-D array with a nonnegative diagonal."""
    if isinstance(G, (str, bytes)) or G is None:
        raise TypeError(f"{name} must be a square numeric matrix (a Gram matrix of class means), got "
                        f"{type(G).__name__}")
    G = as_finite_array(name, G, ndim=2)
    if G.shape[0] != G.shape[1]:
        raise InstanceError(f"{name} must be a square Gram matrix (k x k), got shape {G.shape[0]} x {G.shape[1]}")
    if G.shape[0] == 0:
        raise InstanceError(f"{name} must not be empty (k >= 1 class), got shape {G.shape}")
    big = float(np.max(np.abs(G)))
    asym = float(np.max(np.abs(G - G.T)))
    if asym > SYMMETRY_RTOL * big:
        raise InstanceError(f"{name} must be symmetric (a Gram matrix M^T M): max |G - G^T| = {asym:.3g} > "
                            f"{SYMMETRY_RTOL:g} x max |G| = {SYMMETRY_RTOL * big:.3g}")
    if float(np.min(np.diag(G))) < -SYMMETRY_RTOL * big:
        raise InstanceError(f"{name} must have a nonnegative diagonal (squared norms), got "
                            f"min diagonal {float(np.min(np.diag(G))):.3g}")
    return G


def centering_matrix(k: int) -> np.ndarray:
    """J_k = I_k - 11^T / k.

    Returns the k x k centring matrix (float64). Raises ``TypeError`` when ``k`` is not an
    integer and ``InputError`` (a ValueError) when k < 1 or the matrix exceeds the memory budget."""
    k = _as_count("k", k, 1)
    _check_bytes(f"centering_matrix(k={k})", float(k) * k)
    return np.eye(k) - np.ones((k, k)) / k


def simplex_etf(k: int, d: int | None = None, r: float = 1.0) -> np.ndarray:
    """A simplex ETF: k vectors of norm ``r`` in R^d (columns of a d x k matrix).

    Gram = r^2 k/(k-1) J_k (pairwise cosine -1/(k-1), zero sum). Exists iff d >= k-1
    (docs/metrics.md). Default d = k. ``r`` must be > 0.

    Returns the d x k float64 matrix whose columns are the vectors. Raises ``InstanceError``
    (a ValueError) when d < k-1, ``InputError`` for k < 2, d < 1, r <= 0 or not finite,
    k above ``MAX_EIGH_K`` or a matrix above the memory budget, ``TypeError`` for a
    non-numeric argument.
    """
    k = _as_count("k", k, 2)
    d = k if d is None else _as_count("d", d, 1)
    r = _as_norm("r", r)
    if d < k - 1:
        raise InstanceError(f"d must be >= k-1 = {k - 1} for a simplex ETF of k = {k} vectors, got d = {d}")
    if k > MAX_EIGH_K:
        raise InputError(f"k must be <= {MAX_EIGH_K} for simplex_etf (a k x k eigendecomposition, O(k^3)), got {k}")
    _check_bytes(f"simplex_etf(k={k}, d={d})", float(d) * k + 3.0 * k * k)
    J = centering_matrix(k)
    # Orthonormal basis of the (k-1)-dim range of J_k gives an isometric embedding.
    evals, evecs = np.linalg.eigh(J)
    basis = evecs[:, evals > 0.5]  # k x (k-1), orthonormal, spans 1^perp
    coords = basis.T @ J  # (k-1) x k, Gram = J_k
    out = np.zeros((d, k))
    out[: k - 1, :] = coords
    return out * (r * np.sqrt(k / (k - 1)))


def orthogonal_frame(k: int, d: int | None = None, r: float = 1.0) -> np.ndarray:
    """Orthogonal frame: ``r`` e_1..e_k in R^d (d x k, nonnegative, disjoint supports). Needs d >= k, r > 0.

    Returns the d x k float64 matrix. Raises ``InstanceError`` (a ValueError) when d < k,
    ``InputError`` for k, d < 1, r <= 0 or not finite, or a matrix above the memory budget,
    ``TypeError`` for a non-numeric argument."""
    k = _as_count("k", k, 1)
    d = k if d is None else _as_count("d", d, 1)
    r = _as_norm("r", r)
    if d < k:
        raise InstanceError(f"d must be >= k = {k} for an orthogonal frame, got d = {d}")
    _check_bytes(f"orthogonal_frame(k={k}, d={d})", float(d) * k)
    out = np.zeros((d, k))
    out[np.arange(k), np.arange(k)] = r
    return out


def etf_gram(k: int, r: float = 1.0) -> np.ndarray:
    """Gram matrix of a simplex ETF with vector norm r > 0: r^2 k/(k-1) J_k (k >= 2).

    Returns the k x k float64 Gram matrix. Raises ``TypeError`` for a non-numeric argument and
    ``InputError`` (a ValueError) for k < 2 or r <= 0 or not finite."""
    k = _as_count("k", k, 2)
    r = _as_norm("r", r)
    return r * r * k / (k - 1) * centering_matrix(k)


def _fro(G: np.ndarray) -> float:
    """||G||_F without overflow: entries ~1e200 overflowed the squares to inf (G / inf = 0 was then classified
    "other", with numpy's overflow warning)."""
    with np.errstate(over="ignore"):
        nrm = float(np.linalg.norm(G))
    if np.isfinite(nrm):  # the plain norm wherever it is finite (the same digits as before)
        return nrm
    big = float(np.max(np.abs(G)))
    return big * float(np.linalg.norm(G / big))


#: Arrays with entries above 2**HUGE_EXP are scaled down by a power of two (exact: only the exponents change)
#: before squared norms and products are formed: the squares of entries ~1e200 overflowed (nc_metrics raised
#: "G must contain only finite numbers" for finite features, cosine_matrix returned None for every pair). Every
#: metric that uses the scaled array is scale-invariant (NC1, NC2, NC3, cosines) or invariant under a positive
#: scaling of the logits (NC4, with the bias scaled alike). The scaled entries stay >= 2**HUGE_EXP / 2, so an
#: absolute threshold such as ZERO_TOL sees the same relative structure as before.
HUGE_EXP = 400


def _pow2_scale(A: np.ndarray) -> float:
    """The power of two (<= 1) that brings the largest |entry| of A to [2**(HUGE_EXP-1), 2**HUGE_EXP), or 1.0
    when A is below 2**HUGE_EXP already."""
    amax = float(np.max(np.abs(A), initial=0.0))
    if not amax >= 2.0 ** HUGE_EXP:
        return 1.0
    return math.ldexp(1.0, HUGE_EXP - math.frexp(amax)[1])


def _unit(G: np.ndarray, nrm: float) -> np.ndarray:
    """G / ||G||_F for nrm = _fro(G) > 0, also where the norm itself is above the largest float (entries
    ~1e308: ``nrm`` is inf and G / inf would be 0): then G is first divided by its largest entry."""
    if np.isfinite(nrm):
        return G / nrm
    Gs = G / float(np.max(np.abs(G)))
    return Gs / float(np.linalg.norm(Gs))


def _normalised(G: np.ndarray, zero_tol: float = ZERO_TOL) -> np.ndarray | None:
    nrm = _fro(G)
    if not nrm > zero_tol:
        return None
    return _unit(G, nrm)


def distance_to_etf(G) -> float | None:
    """NC2_etf-style distance || G/||G|| - J_k/||J_k|| ||_F; None for a zero Gram or k = 1.

    Returns a float >= 0, or None when the distance is undefined. Raises ``TypeError`` for a
    non-numeric ``G`` and ``InputError`` (a ValueError) for a bad Gram (see :func:`classify_gram`)."""
    G = _as_gram(G)
    k = G.shape[0]
    Gn = _normalised(G)
    if Gn is None or k < 2:
        return None
    J = centering_matrix(k)
    return float(np.linalg.norm(Gn - J / np.linalg.norm(J)))


def distance_to_of(G) -> float | None:
    """NC2_of-style distance || G/||G|| - I_k/sqrt(k) ||_F; None for a zero Gram.

    Returns a float >= 0, or None when the distance is undefined. Raises ``TypeError`` for a
    non-numeric ``G`` and ``InputError`` (a ValueError) for a bad Gram (see :func:`classify_gram`)."""
    G = _as_gram(G)
    k = G.shape[0]
    Gn = _normalised(G)
    if Gn is None:
        return None
    return float(np.linalg.norm(Gn - np.eye(k) / np.sqrt(k)))


def is_simplex_etf_gram(G, tol: float = GEOMETRY_TOL) -> bool:
    """True when every entry of the normalised Gram matches a simplex ETF's (no shortcut via norms).

    Returns True iff :func:`distance_to_etf` is defined and <= ``tol`` (False for a zero Gram).
    Raises ``TypeError`` for a non-numeric argument and ``InputError`` (a ValueError) for a
    bad ``G`` (see :func:`classify_gram`) or a negative or non-finite ``tol``."""
    tol = _as_tol("tol", tol)
    d = distance_to_etf(G)
    return d is not None and d <= tol


def is_orthogonal_frame_gram(G, tol: float = GEOMETRY_TOL) -> bool:
    """True when the normalised Gram is within ``tol`` of an orthogonal frame's, I_k/sqrt(k).

    Returns True iff :func:`distance_to_of` is defined and <= ``tol`` (False for a zero Gram).
    Raises ``TypeError`` for a non-numeric argument and ``InputError`` (a ValueError) for a
    bad ``G`` (see :func:`classify_gram`) or a negative or non-finite ``tol``."""
    tol = _as_tol("tol", tol)
    d = distance_to_of(G)
    return d is not None and d <= tol


@dataclass(frozen=True)
class GeometryClass:
    """Result of :func:`classify_gram`.

    The distances compare *normalised* Grams, so they say nothing about the size of the class means:
    ``scale`` (the Frobenius norm of the Gram) and ``trace`` (the sum of the squared class-mean norms)
    report it, so that a caller can tell a zero minimiser (classification "zero", scale <= zero_tol)
    from a small ETF. ``scale``/``trace``/``zero_tol`` are None when the object was built by hand.
    """

    classification: str  # "simplex-etf" | "orthogonal-frame" | "other" | "zero"
    distance_etf: float | None
    distance_of: float | None
    tol: float
    scale: float | None = None
    trace: float | None = None
    zero_tol: float | None = None

    def __post_init__(self):
        if self.classification not in GEOMETRY_CLASSES:
            raise InputError(f"classification must be one of {', '.join(GEOMETRY_CLASSES)}, "
                             f"got {self.classification!r}")

    @property
    def is_zero(self) -> bool:
        return self.classification == "zero"

    def to_dict(self) -> dict:
        return {"classification": self.classification, "distance_etf": self.distance_etf,
                "distance_of": self.distance_of, "tol": self.tol, "scale": self.scale, "trace": self.trace,
                "zero_tol": self.zero_tol}


def classify_gram(G, tol: float = GEOMETRY_TOL, *, zero_tol: float = ZERO_TOL) -> GeometryClass:
    """Classify a Gram matrix of class means as simplex-etf, orthogonal-frame, other or zero.

    Distances are Frobenius distances between normalised matrices (docs/metrics.md, NC2).
    A Gram whose Frobenius norm is at most ``zero_tol`` is "zero" (trivial phase: cosines
    undefined), never an ETF or "other". The result reports that norm (``scale``) and the
    trace, which the normalisation removes from the distances.

    Returns a :class:`GeometryClass`. Raises ``TypeError`` for a non-numeric argument and
    ``InputError`` (``InstanceError``, a ValueError) when ``G`` is not a finite, non-empty,
    square, symmetric matrix with a nonnegative diagonal, or ``tol`` / ``zero_tol`` is negative
    or not finite.
    """
    tol = _as_tol("tol", tol)
    zero_tol = _as_tol("zero_tol", zero_tol)
    G = _as_gram(G)
    scale = _fro(G)
    with np.errstate(over="ignore"):
        trace = float(np.trace(G))  # inf where the sum of the diagonal overflows (reported as is)
    if not scale > zero_tol:
        return GeometryClass("zero", None, None, tol, scale, trace, zero_tol)
    k = G.shape[0]
    Gn = _unit(G, scale)
    de = None
    if k >= 2:
        J = centering_matrix(k)
        de = float(np.linalg.norm(Gn - J / np.linalg.norm(J)))
    do = float(np.linalg.norm(Gn - np.eye(k) / np.sqrt(k)))
    if de is not None and de <= tol and de <= do:
        cls = "simplex-etf"
    elif do <= tol:
        cls = "orthogonal-frame"
    else:
        cls = "other"
    return GeometryClass(cls, de, do, tol, scale, trace, zero_tol)


def cosine_matrix(vectors) -> list[list[float | None]]:
    """Pairwise cosines of the columns (vectors as columns, d x k); entries involving a zero column are None.

    Returns a k x k nested list of floats (None where undefined). Raises ``TypeError`` for a
    string or None, ``InputError`` (a ValueError) for an empty, non-finite or non-2-D array or
    more than ``MAX_COSINE_COLUMNS`` columns."""
    if isinstance(vectors, (str, bytes)) or vectors is None:
        raise TypeError(f"vectors must be a numeric d x k array (vectors as columns), got {type(vectors).__name__}")
    V = as_finite_array("vectors", vectors, ndim=2)
    if V.size == 0:
        raise InstanceError(f"vectors must not be empty (d x k with d, k >= 1), got shape {V.shape}")
    if V.shape[1] > MAX_COSINE_COLUMNS:
        raise InputError(f"vectors: at most {MAX_COSINE_COLUMNS} columns (the k x k cosine list), got "
                         f"{V.shape[1]} (shape {V.shape[0]} x {V.shape[1]}; vectors are columns)")
    V = V * _pow2_scale(V)  # cosines are scale-invariant; squares of entries ~1e200 overflowed
    norms = np.linalg.norm(V, axis=0)
    scale = max(1.0, float(norms.max(initial=0.0)))
    # A vector counts as zero when its norm is below sqrt(ZERO_TOL) (relative to max(1, largest norm)):
    # the same threshold classify_gram applies to the Gram matrix (squared norms).
    ok = norms > np.sqrt(ZERO_TOL) * scale
    safe = np.where(ok, norms, 1.0)
    C = (V.T @ V) / np.outer(safe, safe)
    out: list[list[float | None]] = C.tolist()
    bad = np.flatnonzero(~ok)
    if bad.size:
        for i in range(len(out)):
            if not ok[i]:
                out[i] = [None] * len(out)
            else:
                for j in bad:
                    out[i][j] = None
    return out


def _features_and_labels(H, labels) -> tuple[np.ndarray, np.ndarray]:
    """H as a d x N float array (features in columns) and labels (N,), with a message that names the
    expected layout when the shapes only fit the transposed (N x d) layout."""
    if isinstance(H, (str, bytes)) or H is None:
        raise TypeError(f"H must be a numeric d x N array (features in columns), got {type(H).__name__}")
    if isinstance(labels, (str, bytes)) or labels is None:
        raise TypeError(f"labels must be a 1-D array of integer class labels, got {type(labels).__name__}")
    H = as_finite_array("H", H, ndim=2)
    d, N = H.shape
    if H.size == 0:
        raise InstanceError(f"H must not be empty: d x N with d, N >= 1 (features in columns), got {d} x {N}")
    lab = np.asarray(labels)
    if lab.ndim == 2 and 1 in lab.shape:
        raise InstanceError(f"labels must be 1-dimensional (N,), got shape {lab.shape}: pass labels.ravel()")
    if lab.ndim == 1 and lab.size != N:
        if lab.size == d:
            raise InstanceError(f"H must be d x N (features in columns, one column per label); got {d} x {N} with "
                                f"{lab.size} labels: did you pass N x d? transpose it (H.T)")
        raise InstanceError(f"labels must have one entry per column of H (H is d x N = {d} x {N}, features in "
                            f"columns), got {lab.size} labels")
    if lab.ndim == 1 and lab.size and np.issubdtype(lab.dtype, np.number) and np.all(np.isfinite(lab)) \
            and lab.max(initial=0) >= N:
        # every class must be present, so k <= N: refuse before counting up to a huge label
        raise InstanceError(f"labels must be class indices 0..k-1 with every class present (so < N = {N}), "
                            f"got a label {lab.max()}")
    y = as_labels("labels", lab, N)
    return H, y


def class_means(H, labels) -> np.ndarray:
    """Class means as columns (d x k); H is d x N (features in columns), labels (N,) in 0..k-1.

    Returns a d x k float64 array. Raises ``TypeError`` for a string or None, ``InputError``
    (``InstanceError``, a ValueError) for non-finite or empty features, labels that do not
    match the columns of H (with a transpose hint), or a class with no sample."""
    H, y = _features_and_labels(H, labels)
    return _class_means(H, y)


def _class_means(H: np.ndarray, y: np.ndarray) -> np.ndarray:
    k = int(y.max()) + 1
    counts = np.bincount(y, minlength=k).astype(float)
    d = H.shape[0]
    if float(k) * y.size <= 5e7:  # dense one-hot product (fast BLAS path) while it is small
        onehot = np.zeros((k, y.size))
        onehot[y, np.arange(y.size)] = 1.0
        return (H @ onehot.T) / counts
    sums = np.zeros((k, d))
    np.add.at(sums, y, H.T)
    return sums.T / counts


def within_class_max_deviation(H, labels) -> float:
    """max_i ||h_i - mu_{y_i}||: 0 at exact collapse (H is d x N, features in columns).

    Returns a float >= 0. Raises the errors of :func:`class_means` for bad ``H`` / ``labels``."""
    H, y = _features_and_labels(H, labels)
    mu = _class_means(H, y)
    return float(np.max(np.linalg.norm(H - mu[:, y], axis=0)))


@dataclass
class NCMetrics:
    """Neural-collapse metrics of docs/metrics.md; each is 0 at exact collapse, None if undefined."""

    NC1: float | None
    NC1_pinv: float | None
    NC2_etf: float | None
    NC2_of: float | None
    NC3: float | None
    NC4: float | None
    equinorm: float | None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("NC1", "NC1_pinv", "NC2_etf", "NC2_of", "NC3", "NC4", "equinorm")}
        out.update(self.extra)
        return out


def _ratio(num: float, den: float, scale: float) -> float | None:
    if den <= ZERO_TOL * max(scale, 1e-300) or den == 0.0:
        return None
    return float(num / den)


def nc_metrics(H, labels, W=None, b=None, *, center_w: bool = False) -> NCMetrics:
    """All NC metrics of docs/metrics.md.

    ``H`` is d x N (features in columns: one column per label), ``labels`` (N,) in 0..k-1 with every
    class present, ``W`` k x d (row c = classifier of class c), ``b`` (k,).

    NC1 = tr(Sigma_W)/tr(Sigma_B); NC1_pinv = tr(Sigma_W Sigma_B^+)/k (Papyan, Han, Donoho 2020);
    NC2_etf = ||G/||G|| - J/||J|| || with G = M^T M; NC2_of with the uncentred Gram;
    NC3 = ||W^T/||W|| - M/||M|| || (W centred by J_k when ``center_w``);
    NC4 = fraction of samples where argmax(W h + b) differs from the nearest class mean;
    equinorm = std/mean of the centred class-mean norms ||mu_c - h_bar||.

    Returns an :class:`NCMetrics` (each metric a float, or None when undefined). Raises
    ``TypeError`` for arguments of the wrong type, ``InputError`` (``InstanceError``, a
    ValueError) for bad ``H`` / ``labels`` (see :func:`class_means`), ``W`` not k x d, ``b``
    without ``W`` or of the wrong length, or an NC4 computation above the memory budget.
    """
    if not isinstance(center_w, (bool, np.bool_)):
        raise TypeError(f"center_w must be True or False, got {type(center_w).__name__} {center_w!r}")
    H, y = _features_and_labels(H, labels)
    d, N = H.shape
    # huge entries (above 2**HUGE_EXP): H, W (and b with them) scaled by powers of two, exactly, before any sum
    # or product; every metric below is invariant under that (NC4: the logits W H + b scale by a positive factor)
    sH = _pow2_scale(H)
    if sH != 1.0:
        H = H * sH
    mu = _class_means(H, y)
    k = mu.shape[1]
    if W is not None:
        if isinstance(W, (str, bytes)):
            raise TypeError(f"W must be a numeric k x d array (one row per class), got {type(W).__name__}")
        W = as_finite_array("W", W, ndim=2)
        if W.shape != (k, d):
            hint = ": did you pass W^T (d x k)? transpose it" if W.shape == (d, k) else ""
            raise InstanceError(f"W must be k x d = {k} x {d} (one row per class, d = rows of H), got "
                                f"{W.shape[0]} x {W.shape[1]}{hint}")
    if W is not None:  # NC4 holds k x N logits and distances (a few copies)
        _check_bytes(f"W: nc_metrics computes NC4 with k = {k} classes and N = {N} samples (k x N logits and "
                     "distances)",
                     4.0 * k * N)
    if b is not None:
        if W is None:
            raise InstanceError("b is given without W: the bias enters only NC4, which needs the classifier W")
        if isinstance(b, (str, bytes)):
            raise TypeError(f"b must be a numeric vector of length k = {k}, got {type(b).__name__}")
        b = as_finite_array("b", b)
        if b.ndim != 1 or b.shape[0] != k:
            raise InstanceError(f"b must be a vector of length k = {k} (one bias per class), got shape {b.shape}")
    sW = 1.0 if W is None else _pow2_scale(W)
    if sW != 1.0:
        W = W * sW
    if b is not None and sH * sW != 1.0:
        b = b * (sH * sW)
    hbar = mu.mean(axis=1, keepdims=True)
    M = mu - hbar
    dev = H - mu[:, y]
    scale = float(np.sum(H * H)) / N
    tr_w = float(np.sum(dev * dev)) / N
    tr_b = float(np.sum(M * M)) / k
    nc1 = _ratio(tr_w, tr_b, scale)
    nc1_pinv = None
    G = M.T @ M
    if nc1 is not None:
        # tr(Sigma_W Sigma_B^+)/k with Sigma_B = M M^T/k: Sigma_B^+ = k M (G^+)^2 M^T (G = M^T M, the same
        # relative eigenvalue cutoff 1e-10 as pinv(Sigma_B, rcond=1e-10)), so the metric is
        # ||G^+ M^T dev||_F^2 / N: a k x k pseudo-inverse instead of d x d matrices (d can be large).
        evals, evecs = np.linalg.eigh((G + G.T) / 2)
        keep = evals > 1e-10 * max(float(evals.max(initial=0.0)), 0.0)
        Gp = (evecs[:, keep] / evals[keep]) @ evecs[:, keep].T
        A = Gp @ (M.T @ dev)
        nc1_pinv = float(np.sum(A * A)) / N
    nc2_etf = distance_to_etf(G) if k >= 2 else None
    nc2_of = distance_to_of(mu.T @ mu)
    nc3 = nc4 = None
    if W is not None:
        Wc = centering_matrix(k) @ W if center_w else W
        nw, nm = np.linalg.norm(Wc), np.linalg.norm(M)
        if nw > ZERO_TOL and nm > ZERO_TOL:
            nc3 = float(np.linalg.norm(Wc.T / nw - M / nm))
        logits = W @ H
        if b is not None:
            logits = logits + b[:, None]
        if np.linalg.norm(W) > ZERO_TOL:
            pred = np.argmax(logits, axis=0)
            d2 = ((H[:, None, :] - mu[:, :, None]) ** 2).sum(axis=0) if k * N * d <= 5e7 else \
                (np.sum(H * H, axis=0)[None, :] - 2 * mu.T @ H + np.sum(mu * mu, axis=0)[:, None])
            ncc = np.argmin(d2, axis=0)
            nc4 = float(np.mean(pred != ncc))
    norms = np.linalg.norm(M, axis=0)
    equi = None if norms.mean() <= ZERO_TOL else float(norms.std() / norms.mean())
    return NCMetrics(nc1, nc1_pinv, nc2_etf, nc2_of, nc3, nc4, equi)
