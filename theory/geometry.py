"""Predicted geometries (simplex ETF, orthogonal frame) and neural-collapse metrics.

Notation follows ``spec/geometry.md``: features are the columns of ``H`` (d x N), labels
``y`` (N,), class means ``mu_c``, global mean ``h_bar`` = unweighted mean of the class means,
centred means ``M = [mu_c - h_bar]`` (d x k), classifier ``W`` (k x d), ``J_k = I - 11^T/k``.

Every metric that does not exist for an input (a ratio with a zero denominator, a cosine
of a zero vector) is returned as ``None``, never NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from theory._validate import InstanceError, as_finite_array, as_int, as_labels

#: Default tolerance for geometry classification: Frobenius distance between the
#: normalised Gram and the normalised template. 1e-3 separates an optimum found to
#: ~1e-8 in value (geometry error ~ sqrt of value error, ~1e-4) from visibly different
#: geometries (the imbalanced SCL optimum is ~1e-2 away from an ETF).
GEOMETRY_TOL = 1e-3

#: Below this Frobenius norm a Gram matrix counts as zero (trivial phase); relative to 1.
ZERO_TOL = 1e-8


def centering_matrix(k: int) -> np.ndarray:
    """J_k = I_k - 11^T / k."""
    k = as_int("k", k, minimum=1)
    return np.eye(k) - np.ones((k, k)) / k


def simplex_etf(k: int, d: int | None = None, r: float = 1.0) -> np.ndarray:
    """A simplex ETF: k vectors of norm ``r`` in R^d (columns of a d x k matrix).

    Gram = r^2 k/(k-1) J_k (pairwise cosine -1/(k-1), zero sum). Exists iff d >= k-1
    (spec/geometry.md). Default d = k.
    """
    k = as_int("k", k, minimum=2)
    d = k if d is None else as_int("d", d, minimum=1)
    if d < k - 1:
        raise InstanceError(f"d must be >= k-1 = {k - 1} for a simplex ETF of k = {k} vectors, got d = {d}")
    J = centering_matrix(k)
    # Orthonormal basis of the (k-1)-dim range of J_k gives an isometric embedding.
    evals, evecs = np.linalg.eigh(J)
    basis = evecs[:, evals > 0.5]  # k x (k-1), orthonormal, spans 1^perp
    coords = basis.T @ J  # (k-1) x k, Gram = J_k
    out = np.zeros((d, k))
    out[: k - 1, :] = coords
    return out * (r * np.sqrt(k / (k - 1)))


def orthogonal_frame(k: int, d: int | None = None, r: float = 1.0) -> np.ndarray:
    """Orthogonal frame: ``r`` e_1..e_k in R^d (d x k, nonnegative, disjoint supports). Needs d >= k."""
    k = as_int("k", k, minimum=1)
    d = k if d is None else as_int("d", d, minimum=1)
    if d < k:
        raise InstanceError(f"d must be >= k = {k} for an orthogonal frame, got d = {d}")
    out = np.zeros((d, k))
    out[np.arange(k), np.arange(k)] = r
    return out


def etf_gram(k: int, r: float = 1.0) -> np.ndarray:
    """Gram matrix of a simplex ETF with vector norm r: r^2 k/(k-1) J_k."""
    return r * r * k / (k - 1) * centering_matrix(k)


def _normalised(G: np.ndarray) -> np.ndarray | None:
    nrm = np.linalg.norm(G)
    if nrm <= ZERO_TOL:
        return None
    return G / nrm


def distance_to_etf(G) -> float | None:
    """NC2_etf-style distance || G/||G|| - J_k/||J_k|| ||_F; None for a zero Gram."""
    G = as_finite_array("G", G, ndim=2)
    k = G.shape[0]
    Gn = _normalised(G)
    if Gn is None or k < 2:
        return None
    J = centering_matrix(k)
    return float(np.linalg.norm(Gn - J / np.linalg.norm(J)))


def distance_to_of(G) -> float | None:
    """NC2_of-style distance || G/||G|| - I_k/sqrt(k) ||_F; None for a zero Gram."""
    G = as_finite_array("G", G, ndim=2)
    k = G.shape[0]
    Gn = _normalised(G)
    if Gn is None:
        return None
    return float(np.linalg.norm(Gn - np.eye(k) / np.sqrt(k)))


def is_simplex_etf_gram(G, tol: float = GEOMETRY_TOL) -> bool:
    """True when every entry of the normalised Gram matches a simplex ETF's (no shortcut via norms)."""
    d = distance_to_etf(G)
    return d is not None and d <= tol


def is_orthogonal_frame_gram(G, tol: float = GEOMETRY_TOL) -> bool:
    d = distance_to_of(G)
    return d is not None and d <= tol


@dataclass(frozen=True)
class GeometryClass:
    """Result of :func:`classify_gram`."""

    classification: str  # "simplex-etf" | "orthogonal-frame" | "other" | "zero"
    distance_etf: float | None
    distance_of: float | None
    tol: float

    def to_dict(self) -> dict:
        return {"classification": self.classification, "distance_etf": self.distance_etf,
                "distance_of": self.distance_of, "tol": self.tol}


def classify_gram(G, tol: float = GEOMETRY_TOL) -> GeometryClass:
    """Classify a Gram matrix of class means as simplex-etf, orthogonal-frame, other or zero.

    Distances are Frobenius distances between normalised matrices (spec/geometry.md, NC2).
    A Gram whose norm is below ``ZERO_TOL`` is "zero" (trivial phase: cosines undefined).
    """
    G = as_finite_array("G", G, ndim=2)
    if G.shape[0] != G.shape[1]:
        raise InstanceError(f"G must be square, got shape {G.shape}")
    de, do = distance_to_etf(G), distance_to_of(G)
    if de is None and do is None:
        cls = "zero"
    elif de is not None and de <= tol and (do is None or de <= do):
        cls = "simplex-etf"
    elif do is not None and do <= tol:
        cls = "orthogonal-frame"
    else:
        cls = "other"
    return GeometryClass(cls, de, do, tol)


def cosine_matrix(vectors) -> list[list[float | None]]:
    """Pairwise cosines of the columns; entries involving a zero column are None."""
    V = as_finite_array("vectors", vectors, ndim=2)
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


def class_means(H, labels) -> np.ndarray:
    """Class means as columns (d x k)."""
    H = as_finite_array("H", H, ndim=2)
    y = as_labels("labels", labels, H.shape[1])
    k = int(y.max()) + 1
    onehot = np.zeros((k, y.size))
    onehot[y, np.arange(y.size)] = 1.0
    return (H @ onehot.T) / onehot.sum(axis=1)


def within_class_max_deviation(H, labels) -> float:
    """max_i ||h_i - mu_{y_i}||: 0 at exact collapse."""
    H = as_finite_array("H", H, ndim=2)
    y = as_labels("labels", labels, H.shape[1])
    mu = class_means(H, y)
    return float(np.max(np.linalg.norm(H - mu[:, y], axis=0)))


@dataclass
class NCMetrics:
    """Neural-collapse metrics of spec/geometry.md; each is 0 at exact collapse, None if undefined."""

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
    """All NC metrics of spec/geometry.md.

    NC1 = tr(Sigma_W)/tr(Sigma_B); NC1_pinv = tr(Sigma_W Sigma_B^+)/k (Papyan, Han, Donoho 2020);
    NC2_etf = ||G/||G|| - J/||J|| || with G = M^T M; NC2_of with the uncentred Gram;
    NC3 = ||W^T/||W|| - M/||M|| || (W centred by J_k when ``center_w``);
    NC4 = fraction of samples where argmax(W h + b) differs from the nearest class mean;
    equinorm = std/mean of the centred class-mean norms ||mu_c - h_bar||.
    """
    H = as_finite_array("H", H, ndim=2)
    y = as_labels("labels", labels, H.shape[1])
    d, N = H.shape
    mu = class_means(H, y)
    k = mu.shape[1]
    hbar = mu.mean(axis=1, keepdims=True)
    M = mu - hbar
    dev = H - mu[:, y]
    scale = float(np.sum(H * H)) / N
    tr_w = float(np.sum(dev * dev)) / N
    tr_b = float(np.sum(M * M)) / k
    nc1 = _ratio(tr_w, tr_b, scale)
    nc1_pinv = None
    if nc1 is not None:
        Sw = dev @ dev.T / N
        Sb = M @ M.T / k
        nc1_pinv = float(np.trace(Sw @ np.linalg.pinv(Sb, rcond=1e-10, hermitian=True)) / k)
    G = M.T @ M
    nc2_etf = distance_to_etf(G) if k >= 2 else None
    nc2_of = distance_to_of(mu.T @ mu)
    nc3 = nc4 = None
    if W is not None:
        W = as_finite_array("W", W, ndim=2, shape=(k, d))
        Wc = centering_matrix(k) @ W if center_w else W
        nw, nm = np.linalg.norm(Wc), np.linalg.norm(M)
        if nw > ZERO_TOL and nm > ZERO_TOL:
            nc3 = float(np.linalg.norm(Wc.T / nw - M / nm))
        logits = W @ H
        if b is not None:
            b = as_finite_array("b", b, ndim=1, shape=(k,))
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
