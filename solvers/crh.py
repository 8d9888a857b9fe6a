"""Representation alignment (CRH/PAH): measurement, null baselines, power-law fits, the small MLP
experiment (numpy, vectorised over runs) and exact critical points (L-BFGS).

Conventions: docs/crh.md. Everything here returns data (arrays, dataclasses, ``Solution``), never
verdicts. Conventions: samples are rows (``h_a`` has shape (n, d_a), ``g_b`` (n, d_b)); ``W`` has
shape (d_b, d_a) and ``h_b = W h_a``; ``g_a = W^T g_b``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from solvers.common import Solution, blas_threads
# the dynamics-curve spacing and the work budget (re-exported: solvers.crh.<name> stays the public path)
from solvers.crh_budget import (ALIGNMENT_POINT_EPOCHS, ALIGNMENT_POINTS, CURVE_POINTS, LOSS_POINT_EPOCHS, MEMORY_BUDGET_BYTES, MIN_ALIGNMENT_POINTS,
                              MIN_CURVE_POINTS, REFERENCE_RATE, SAFETY_WALL_S, TIME_BUDGET_S, WORK_BUDGET, _STAT_OVERHEAD,
                              _STAT_SPEEDUP, _STEP_OVERHEAD, curve_point_counts, curve_steps, experiment_budget)  # noqa: F401
from theory._validate import InstanceError, as_finite_array, as_float, as_int
from theory.crh import RELATIONS, CRHExperiment

#: A matrix whose centred entries have norm below DEGENERATE_TOL * (largest |entry|) * sqrt(size)
#: counts as constant (Pearson undefined, None); a zero matrix makes the cosine undefined. Float64
#: rounding is ~1e-16 relative, so 1e-12 is far above noise and far below any real signal.
DEGENERATE_TOL = 1e-12

#: PAH fits use eigen-directions of Z whose eigenvalue exceeds this fraction of the largest one:
#: eigenvalues of Gram matrices of rank-deficient W are ~1e-16 relative; 1e-8 keeps every
#: direction that carries signal and drops rounding noise.
PAH_REL_THRESHOLD = 1e-8

#: Default number of Haar rotations for a null baseline: the standard error of the null mean is
#: std/sqrt(200), a few 1e-3 for the spreads seen here (0.05 - 0.2).
NULL_DRAWS = 200
#: At most this many Haar draws per baseline (memory: six stacks of draws d x d floats).
MAX_NULL_DRAWS = 100_000

MODES = ("raw", "normalized")


# --------------------------------------------------------------------------------------------
# Alignment metrics and null baselines
# --------------------------------------------------------------------------------------------

def _sym_pair(A, B, name_a="A", name_b="B"):
    A = as_finite_array(name_a, A, ndim=2)
    B = as_finite_array(name_b, B, ndim=2)
    if A.shape[0] != A.shape[1]:
        raise InstanceError(f"{name_a} must be square, got shape {A.shape}")
    if A.shape != B.shape:
        raise InstanceError(f"{name_b} must have the shape of {name_a} {A.shape}, got {B.shape}")
    return A, B


def _constant(centred_norm: float, M: np.ndarray) -> bool:
    """Entries constant up to rounding: centred norm <= DEGENERATE_TOL * (largest entry) * sqrt(size)."""
    scale = float(np.abs(M).max(initial=0.0))
    return scale == 0.0 or centred_norm <= DEGENERATE_TOL * scale * np.sqrt(M.size)


def alpha_pearson(A, B) -> float | None:
    """Pearson correlation of the flattened entries of A and B; None when either is constant."""
    A, B = _sym_pair(A, B)
    a, b = A.ravel() - A.mean(), B.ravel() - B.mean()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if _constant(na, A) or _constant(nb, B):
        return None
    return float(np.clip(a @ b / (na * nb), -1.0, 1.0))


def alpha_cosine(A, B) -> float | None:
    """Frobenius cosine tr(A^T B)/(||A||_F ||B||_F) (= tr(AB)/... for symmetric A, B); None when either is zero."""
    A, B = _sym_pair(A, B)
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    if na == 0.0 or nb == 0.0:
        return None
    return float(np.clip(np.sum(A * B) / (na * nb), -1.0, 1.0))


def alpha(A, B, metric: str = "pearson") -> float | None:
    if metric == "pearson":
        return alpha_pearson(A, B)
    if metric == "cosine":
        return alpha_cosine(A, B)
    raise InstanceError(f"metric must be 'pearson' or 'cosine', got {metric!r}")


def haar_orthogonal(d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n Haar-distributed d x d orthogonal matrices (QR of a Gaussian with the sign fix
    Q <- Q diag(sign(diag(R))), which makes the distribution exactly Haar)."""
    d = as_int("d", d, minimum=1, maximum=4096)
    n = as_int("n", n, minimum=1)
    if 3 * 8.0 * n * d * d > 2.5e9:  # G, Q, R (MEMORY_BUDGET_BYTES)
        raise InstanceError(f"n={n} orthogonal {d} x {d} matrices need about {24.0 * n * d * d / 1e9:.3g} GB > "
                            "limit 2.5 GB")
    G = rng.standard_normal((n, d, d))
    Q, R = np.linalg.qr(G)
    sign = np.sign(np.diagonal(R, axis1=1, axis2=2))
    sign[sign == 0] = 1.0
    return Q * sign[:, None, :]


@dataclass
class NullBaseline:
    """alpha(A, Q B Q^T) over Haar-random Q: mean, standard deviation, 95th percentile."""

    metric: str
    mean: float | None
    std: float | None
    q95: float | None
    draws: int

    def to_dict(self) -> dict:
        return {"metric": self.metric, "mean": self.mean, "std": self.std, "q95": self.q95, "draws": self.draws}


def _batch_alpha(A: np.ndarray, Bs: np.ndarray, metric: str) -> np.ndarray:
    """alpha(A, B_i) for a stack B (n, d, d); NaN where undefined (converted by the caller)."""
    n = Bs.shape[0]
    a = A.ravel()
    b = Bs.reshape(n, -1)
    if metric == "pearson":
        a = a - a.mean()
        b = b - b.mean(axis=1, keepdims=True)
    na, nb = np.linalg.norm(a), np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (b @ a) / (na * nb)
    if metric == "pearson":  # _constant per draw, vectorised (the same float comparisons)
        scale = np.abs(Bs.reshape(n, -1)).max(axis=1, initial=0.0)
        bad = (scale == 0.0) | (nb <= DEGENERATE_TOL * scale * np.sqrt(Bs[0].size)) | _constant(na, A)
    else:
        bad = (nb == 0.0) | (na == 0.0)
    out[bad] = np.nan
    return np.clip(out, -1.0, 1.0)


def null_alignment(A, B, *, metric: str = "pearson", draws: int = NULL_DRAWS, seed: int = 0,
                   rng: np.random.Generator | None = None) -> NullBaseline:
    """Null baseline alpha(A, Q B Q^T) with Q Haar-random (it keeps B's spectrum, destroys its
    relation to A). Vectorised over the draws."""
    A, B = _sym_pair(A, B)
    draws = as_int("draws", draws, minimum=2, maximum=MAX_NULL_DRAWS)
    need = 6.0 * 8.0 * draws * A.shape[0] ** 2
    if need > 2.5e9:  # the stacks of Gaussians, Q, R and rotated matrices (MEMORY_BUDGET_BYTES)
        raise InstanceError(f"draws={draws} at d={A.shape[0]} needs about {need / 1e9:.3g} GB > limit 2.5 GB; "
                            "use fewer draws")
    if metric not in ("pearson", "cosine"):
        raise InstanceError(f"metric must be 'pearson' or 'cosine', got {metric!r}")
    rng = rng or np.random.default_rng(seed)
    Q = haar_orthogonal(A.shape[0], draws, rng)
    rotated = Q @ B @ Q.transpose(0, 2, 1)
    vals = _batch_alpha(A, rotated, metric)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return NullBaseline(metric, None, None, None, draws)
    return NullBaseline(metric, float(vals.mean()), float(vals.std(ddof=1)) if vals.size > 1 else None,
                        float(np.quantile(vals, 0.95)), int(vals.size))


# --------------------------------------------------------------------------------------------
# PAH exponent fits
# --------------------------------------------------------------------------------------------

@dataclass
class PAHFit:
    """Least-squares fit log a_i = slope log lambda_i + intercept over eigenpairs of Z."""

    slope: float | None
    intercept: float | None
    loglog_corr: float | None
    n_used: int

    def to_dict(self) -> dict:
        return {"slope": self.slope, "intercept": self.intercept, "loglog_corr": self.loglog_corr,
                "n_used": self.n_used}


def pah_exponent(A, Z, *, rel_threshold: float = PAH_REL_THRESHOLD) -> PAHFit:
    """Power-law exponent of A against Z (A ~ Z^slope): eigenpairs (lambda_i, v_i) of Z with
    lambda_i > rel_threshold * max lambda, a_i = v_i^T A v_i (kept when a_i > 0), slope of the
    least-squares line of log a_i on log lambda_i. None when fewer than two directions remain or
    the eigenvalues used are all equal (slope undefined)."""
    A, Z = _sym_pair(A, Z, "A", "Z")
    rel_threshold = as_float("rel_threshold", rel_threshold, positive=True)
    lam, V = np.linalg.eigh((Z + Z.T) / 2)
    top = lam.max(initial=0.0)
    if top <= 0:
        return PAHFit(None, None, None, 0)
    keep = lam > rel_threshold * top
    a = np.einsum("ij,ik,kj->j", V, (A + A.T) / 2, V)
    a_scale = max(np.abs(a).max(initial=0.0), 1e-300)
    keep &= a > DEGENERATE_TOL * a_scale
    n = int(keep.sum())
    if n < 2:
        return PAHFit(None, None, None, n)
    x, yv = np.log(lam[keep]), np.log(a[keep])
    xc = x - x.mean()
    if np.linalg.norm(xc) <= 1e-12 * max(1.0, np.abs(x).max()):
        return PAHFit(None, None, None, n)
    slope = float(xc @ (yv - yv.mean()) / (xc @ xc))
    intercept = float(yv.mean() - slope * x.mean())
    yc = yv - yv.mean()
    corr = None if np.linalg.norm(yc) <= 1e-12 else float(np.clip(xc @ yc / (np.linalg.norm(xc) * np.linalg.norm(yc)), -1, 1))
    return PAHFit(slope, intercept, corr, n)


# --------------------------------------------------------------------------------------------
# Layer matrices and the one-call alignment report
# --------------------------------------------------------------------------------------------

@dataclass
class LayerMatrices:
    """H_a, H_b, G_a, G_b, Z_a, Z_b of one layer and how the first four were formed."""

    H_a: np.ndarray
    H_b: np.ndarray
    G_a: np.ndarray
    G_b: np.ndarray
    Z_a: np.ndarray
    Z_b: np.ndarray
    mode: str
    n_samples: int

    def get(self, name: str) -> np.ndarray:
        return getattr(self, name)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("H_a", "H_b", "G_a", "G_b", "Z_a", "Z_b")} | \
            {"mode": self.mode, "n_samples": self.n_samples}


def _normalise_rows(X: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm; zero rows stay zero (their direction is undefined)."""
    nrm = np.sqrt(np.add.reduce(X * X, axis=-1, keepdims=True))  # np.linalg.norm(X, axis=-1), its arithmetic
    pos = nrm > 0
    if pos.all():  # the common case: the same quotients without the masked write
        return X / nrm
    return np.divide(X, nrm, out=np.zeros_like(X), where=pos)


#: Row-block size bound for full-data products: OpenBLAS multithreads a GEMM once
#: m * n * k exceeds about 2^18, and on a small shared machine (2 cores, other processes busy)
#: its spinning threads made a 512 x 32 Gram ~50x slower (measured 2.5 ms vs 0.04 ms). Products
#: are split into row blocks under this size so that each stays single-threaded.
_GEMM_BLOCK = 1 << 18


def _block_rows(n: int, k: int, m: int) -> int:
    return max(1, min(n, _GEMM_BLOCK // max(1, k * m)))


def _rows_matmul(X: np.ndarray, M: np.ndarray) -> np.ndarray:
    """X @ M for X (n, k), computed in row blocks (see ``_GEMM_BLOCK``)."""
    n, k = X.shape
    b = _block_rows(n, k, M.shape[1])
    if b >= n:
        return X @ M
    return np.concatenate([X[i:i + b] @ M for i in range(0, n, b)])


def _tmatmul(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """X^T Y for X (n, p), Y (n, q), summed over row blocks (see ``_GEMM_BLOCK``)."""
    n = X.shape[0]
    b = _block_rows(n, X.shape[1], Y.shape[1])
    if b >= n:
        return X.T @ Y
    out = X[:b].T @ Y[:b]
    for i in range(b, n, b):
        out += X[i:i + b].T @ Y[i:i + b]
    return out


def _bmm(X: np.ndarray, M: np.ndarray, trans: bool = False) -> np.ndarray:
    """X[r] @ M[r] (``trans``: X[r]^T M[r]) for stacks: batched when each fits one row block, else in blocks."""
    if _block_rows(*X.shape[-2:], M.shape[-1]) >= X.shape[-2]:
        return np.matmul(X.transpose(0, 2, 1) if trans else X, M)
    return np.stack([_tmatmul(x, m) if trans else _rows_matmul(x, m) for x, m in zip(X, M)])


def _second_moment(X: np.ndarray, mode: str) -> np.ndarray:
    """X^T X / n ("raw") or the covariance of the row-normalised X; for (n, d) or a stack (R, n, d)."""
    n = X.shape[-2]
    if mode != "raw":
        U = _normalise_rows(X)
        X = U - U.mean(axis=-2, keepdims=True)
    return (_tmatmul(X, X) if X.ndim == 2 else _bmm(X, X, trans=True)) / (n if mode == "raw" else n - 1)


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InstanceError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def validate_layer(W, h_a, g_b, *, mode: str = "raw", bias=None):
    """Validated float64 (W, h_a, g_b); errors name the parameter and the constraint. With a
    ``bias`` (shape (d_b,)) the bias becomes an extra column of W and a constant 1 is appended to
    every h_a, which keeps the identities exact (docs/crh.md)."""
    mode = _check_mode(mode)
    W = as_finite_array("W", W, ndim=2)
    h_a = as_finite_array("h_a", h_a, ndim=2)
    if bias is not None:
        b = as_finite_array("bias", bias, ndim=1)
        if b.shape[0] != W.shape[0]:
            raise InstanceError(f"bias must have shape ({W.shape[0]},) to match W of shape {W.shape}, got {b.shape}")
        if h_a.shape[1] != W.shape[1]:
            raise InstanceError(f"h_a must have shape (n_samples, {W.shape[1]}) to match W of shape {W.shape}, "
                                f"got {h_a.shape}")
        W = np.concatenate([W, b[:, None]], axis=1)
        h_a = np.concatenate([h_a, np.ones((h_a.shape[0], 1))], axis=1)
    d_b, d_a = W.shape
    if h_a.shape[1] != d_a:
        raise InstanceError(f"h_a must have shape (n_samples, {d_a}) to match W of shape {W.shape}, "
                            f"got {h_a.shape}")
    g_b = as_finite_array("g_b", g_b, ndim=2)
    if g_b.shape[1] != d_b:
        raise InstanceError(f"g_b must have shape (n_samples, {d_b}) to match W of shape {W.shape}, "
                            f"got {g_b.shape}")
    if g_b.shape[0] != h_a.shape[0]:
        raise InstanceError(f"g_b must have as many samples (rows) as h_a ({h_a.shape[0]}), got {g_b.shape[0]}")
    need = 1 if mode == "raw" else 2
    if h_a.shape[0] < need:
        raise InstanceError(f"h_a must have at least {need} samples for mode={mode!r}"
                            f" ({'a centred covariance needs 2' if need == 2 else 'a second moment needs 1'}),"
                            f" got {h_a.shape[0]}")
    return W, h_a, g_b


def layer_matrices(W, h_a, g_b, *, mode: str = "raw", bias=None) -> LayerMatrices:
    """Second-moment matrices of one layer from samples (rows) of its input h_a and of the
    negative loss gradient g_b at its output.

    ``mode="raw"``: H = E[h h^T] (the theory's raw second moments; H_b = W H_a W^T exactly).
    ``mode="normalized"``: each sample of h_a, h_b = W h_a, g_a = W^T g_b, g_b is divided by its
    norm, then centred covariances (1/(n-1)) are taken (the experiments' convention).
    """
    W, h_a, g_b = validate_layer(W, h_a, g_b, mode=mode, bias=bias)
    h_b = _rows_matmul(h_a, W.T)
    g_a = _rows_matmul(g_b, W)
    return LayerMatrices(_second_moment(h_a, mode), _second_moment(h_b, mode), _second_moment(g_a, mode),
                         _second_moment(g_b, mode), W.T @ W, W @ W.T, mode, h_a.shape[0])


PAH_PAIRS = {"H_a~Z_a": ("H_a", "Z_a"), "G_a~Z_a": ("G_a", "Z_a"),
             "H_b~Z_b": ("H_b", "Z_b"), "G_b~Z_b": ("G_b", "Z_b")}


def _sym(A):
    return (A + A.T) / 2


@dataclass
class AlignmentReport:
    """The six alignments (Pearson and cosine), their Haar null baselines and PAH exponents."""

    alignments: dict  # relation -> {"pearson": x, "cosine": y}
    null: dict  # relation -> {"pearson": NullBaseline, "cosine": NullBaseline}
    pah: dict  # "H_a~Z_a" ... -> PAHFit
    singular_values: list
    mode: str
    n_samples: int | None
    matrices: LayerMatrices | None = field(default=None, repr=False)

    def to_dict(self, *, include_matrices: bool = False) -> dict:
        out = {"mode": self.mode, "n_samples": self.n_samples,
               "alignments": {r: dict(v) for r, v in self.alignments.items()},
               "null": {r: {m: nb.to_dict() for m, nb in v.items()} for r, v in self.null.items()},
               "pah": {k: f.to_dict() for k, f in self.pah.items()},
               "singular_values": list(self.singular_values)}
        if include_matrices and self.matrices is not None:
            out["matrices"] = self.matrices.to_dict()
        return out

    def table(self) -> str:
        def f(x):
            return "  null" if x is None else f"{x:6.3f}"
        lines = [f"relation  pair          pearson  null(mean±std)      cosine  null(mean±std)   [{self.mode}]"]
        for rel, (m1, m2) in RELATIONS.items():
            al, nl = self.alignments[rel], self.null.get(rel, {})
            np_, nc = nl.get("pearson"), nl.get("cosine")
            lines.append(f"{rel:<8}  {m1 + ' ~ ' + m2:<12}  {f(al['pearson'])}   "
                         f"{f(np_.mean if np_ else None)} ± {f(np_.std if np_ else None)}  "
                         f"{f(al['cosine'])}  {f(nc.mean if nc else None)} ± {f(nc.std if nc else None)}")
        lines.append("PAH fits (A ~ Z^slope): " + ", ".join(
            f"{k}: {'null' if v.slope is None else f'{v.slope:.3f}'} (r={f(v.loglog_corr).strip()}, n={v.n_used})"
            for k, v in self.pah.items()))
        sv = ", ".join(f"{s:.3g}" for s in self.singular_values[:8])
        lines.append(f"singular values of W: {sv}{', …' if len(self.singular_values) > 8 else ''}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def report_from_matrices(M: LayerMatrices, *, null_draws: int = NULL_DRAWS, seed: int = 0,
                         pah_threshold: float = PAH_REL_THRESHOLD, keep_matrices: bool = True) -> AlignmentReport:
    """Alignments, null baselines and PAH fits from already-formed layer matrices."""
    rng = np.random.default_rng(seed)
    al, nul = {}, {}
    for rel, (m1, m2) in RELATIONS.items():
        A, B = _sym(M.get(m1)), _sym(M.get(m2))
        al[rel] = {"pearson": alpha_pearson(A, B), "cosine": alpha_cosine(A, B)}
        if null_draws:
            nul[rel] = {m: null_alignment(A, B, metric=m, draws=null_draws, rng=rng) for m in ("pearson", "cosine")}
    pah = {k: pah_exponent(_sym(M.get(a)), _sym(M.get(z)), rel_threshold=pah_threshold)
           for k, (a, z) in PAH_PAIRS.items()}
    sv = np.sqrt(np.clip(np.linalg.eigvalsh(M.Z_b)[::-1], 0, None)).tolist()
    return AlignmentReport(al, nul, pah, sv, M.mode, M.n_samples, M if keep_matrices else None)


def alignment_report(W, h_a, g_b, *, mode: str = "raw", null_draws: int = NULL_DRAWS, seed: int = 0,
                     pah_threshold: float = PAH_REL_THRESHOLD, bias=None) -> AlignmentReport:
    """One call: the six alignments of a layer, their Haar null baselines and PAH exponents.

    ``W`` (d_b, d_a); ``h_a`` (n, d_a) samples of the layer input; ``g_b`` (n, d_b) samples of
    -dl/dh_b (per-sample loss). ``print(report)`` shows a table; ``report.to_dict()`` is JSON-ready.
    """
    null_draws = as_int("null_draws", null_draws, minimum=0, maximum=MAX_NULL_DRAWS)
    if null_draws == 1:
        raise InstanceError("null_draws must be 0 (no baseline) or >= 2, got 1")
    return report_from_matrices(layer_matrices(W, h_a, g_b, mode=mode, bias=bias), null_draws=null_draws,
                                seed=seed, pah_threshold=pah_threshold)


# --------------------------------------------------------------------------------------------
# Neural-collapse geometry at the last layer
# --------------------------------------------------------------------------------------------

def nc_layer(counts, d: int | None = None, scale: float = 1.0):
    """Exact NC geometry at the last layer: features h_i = mu_{y_i} (simplex ETF), W = scale M^T,
    g_b = e_y - softmax(W h) (cross-entropy). Returns (W, h_a, g_b) with samples as rows."""
    from theory.geometry import simplex_etf

    try:
        counts = list(counts)
    except TypeError:
        raise InstanceError(f"counts must be a sequence of class sizes, got {counts!r}") from None
    if not 2 <= len(counts) <= 4096:
        raise InstanceError(f"counts must have between 2 and 4096 classes, got {len(counts)}")
    counts = [as_int(f"counts[{i}]", c, minimum=1, maximum=10 ** 7) for i, c in enumerate(counts)]
    k = len(counts)
    d = k if d is None else as_int("d", d, minimum=k - 1, maximum=4096)
    scale = as_float("scale", scale, positive=True)
    if 8.0 * sum(counts) * (2 * d + 2 * k) > 2.5e9:
        raise InstanceError(f"counts sum to {sum(counts)} samples: the layer needs more than 2.5 GB; use fewer")
    M = simplex_etf(k, d)
    y = np.repeat(np.arange(k), counts)
    H = M[:, y].T
    W = scale * M.T
    logits = H @ W.T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return W, H, np.eye(k)[y] - p


def nc_broken_layer(which: str, k: int = 4, d: int = 6, *, strength: float = 0.5, seed: int = 0):
    """Last layer with one NC property broken (balanced classes, label-only gradients g_b = J e_y):
    "NC1": isotropic within-class scatter (samples mu_c +- strength sqrt(d) e_i, so the within-class
    covariance is exactly strength^2 I); "NC2": random centred class means, W = M^T; "NC3": ETF means,
    W = M^T + E with centred random E; "none": exact collapse. Returns (W, h_a, g_b), samples as rows."""
    from theory.geometry import simplex_etf

    if which not in ("NC1", "NC2", "NC3", "none"):
        raise InstanceError(f"which must be one of NC1, NC2, NC3, none, got {which!r}")
    k = as_int("k", k, minimum=2, maximum=256)
    d = as_int("d", d, minimum=k, maximum=1024)
    strength = as_float("strength", strength, positive=True)
    rng = np.random.default_rng(seed)
    J = np.eye(k) - 1.0 / k
    M = simplex_etf(k, d)
    if which == "NC2":
        M = rng.standard_normal((d, k)) @ J
    W = M.T.copy()
    if which == "NC3":
        W = W + strength * J @ rng.standard_normal((k, d))
    noise = strength if which == "NC1" else 0.0
    rows, labels = [], []
    for c in range(k):
        for i in range(d):
            for sign in (1.0, -1.0):
                rows.append(M[:, c] + sign * noise * np.sqrt(d) * np.eye(d)[i])
                labels.append(c)
    y = np.array(labels)
    return W, np.array(rows), J[y]


# --------------------------------------------------------------------------------------------
# Optional torch path: record h_a and g_b of an nn.Linear through hooks
# --------------------------------------------------------------------------------------------

class LinearRecorder:
    """Record the input h_a and the per-sample output gradient g_b = -dl/dh_b of a torch
    ``nn.Linear`` through hooks (torch is imported lazily; a clear error when it is missing).

    ``loss_reduction``: "mean" if the loss that is back-propagated is the batch mean of the
    per-sample losses (torch's default; the recorded gradient is then multiplied by the batch size
    to get the per-sample gradient), "sum" if it is their sum. Leading dimensions beyond the batch
    (tokens) count as samples. Usage::

        with LinearRecorder(model.fc2) as rec:
            for x, y in loader:
                loss_fn(model(x), y).backward()
        print(rec.report())
    """

    def __init__(self, layer, *, loss_reduction: str = "mean"):
        import importlib.util

        if importlib.util.find_spec("torch") is None:  # pragma: no cover - depends on the environment
            raise ImportError("LinearRecorder needs torch (pip install 'ncproofs[torch]')")
        if loss_reduction not in ("mean", "sum"):
            raise InstanceError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        if not hasattr(layer, "weight") or getattr(layer.weight, "ndim", 0) != 2:
            raise InstanceError("layer must be a torch nn.Linear (a module with a 2-D weight)")
        self.layer, self.loss_reduction = layer, loss_reduction
        self._h, self._g, self._handle = [], [], None

    def _forward_hook(self, module, inputs, output):
        import torch

        x = inputs[0].detach()
        batch = x.shape[0] if x.ndim > 1 else 1
        scale = float(batch) if self.loss_reduction == "mean" else 1.0
        self._h.append(x.reshape(-1, x.shape[-1]).to("cpu", dtype=torch.float64).numpy())
        if output.requires_grad:
            def grad_hook(grad):
                self._g.append((-scale * grad.detach()).reshape(-1, grad.shape[-1])
                               .to("cpu", dtype=torch.float64).numpy())
            output.register_hook(grad_hook)

    def __enter__(self):
        self._handle = self.layer.register_forward_hook(self._forward_hook)
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def samples(self):
        """(W, bias, h_a, g_b) as float64 numpy arrays; only forward passes followed by a backward pass count."""
        if len(self._g) != len(self._h):
            raise InstanceError(f"recorded {len(self._h)} forward passes but {len(self._g)} backward passes: "
                                "call backward() once after every forward pass while recording")
        if not self._h:
            raise InstanceError("nothing recorded: run forward and backward passes inside the recorder")
        import torch

        with torch.no_grad():
            W = self.layer.weight.detach().to("cpu", dtype=torch.float64).numpy()
            b = None if getattr(self.layer, "bias", None) is None else \
                self.layer.bias.detach().to("cpu", dtype=torch.float64).numpy()
        return W, b, np.concatenate(self._h), np.concatenate(self._g)

    def report(self, **kwargs) -> AlignmentReport:
        """alignment_report on the recorded samples (bias folded into W as an extra column)."""
        W, b, h, g = self.samples()
        return alignment_report(W, h, g, bias=b, **kwargs)


# --------------------------------------------------------------------------------------------
# MLP: loss, gradients, per-sample neuron gradients (batched over independent runs)
# --------------------------------------------------------------------------------------------

def _act(z, activation):
    return np.tanh(z) if activation == "tanh" else np.maximum(z, 0.0)


def _act_grad_from(h, z, activation):
    """Derivative of the activation, from its output h (tanh) or input z (relu)."""
    return 1.0 - h * h if activation == "tanh" else (z > 0).astype(z.dtype)


def forward_backward(Ws: list[np.ndarray], X: np.ndarray, Y: np.ndarray, activation: str = "tanh",
                     loss_matrix: np.ndarray | None = None):
    """Per-sample quantities of an MLP f = W_L s(W_{L-1} ... s(W_1 x)), loss l = ||T f - y||^2 / 2
    with T = ``loss_matrix`` (default identity; T = Q^{-1} is the loss that compensates an output
    reparametrisation f' = Q f).

    ``Ws[l]`` has shape (d_out, d_in) or (R, d_out, d_in) (R independent runs; then every output
    has a leading run axis, hs[0] included). Returns (hs, gbs, loss): hs[l] = input of layer l
    (samples as rows; hs[0] = X), gbs[l] = g_b of layer l = -dl/dz_l per sample, loss = mean
    per-sample loss (per run).
    """
    if Ws[0].ndim == 3 and loss_matrix is None:  # stacked products (per run the same BLAS calls as 2-D)
        return _forward_backward_stacked(Ws, X, Y, activation)
    if Ws[0].ndim == 3:  # loop over runs: 2-D products go to BLAS
        per = [forward_backward([W[r] for W in Ws], X[r] if X.ndim == 3 else X, Y[r] if Y.ndim == 3 else Y,
                                activation, loss_matrix) for r in range(Ws[0].shape[0])]
        hs = [np.stack([p[0][l] for p in per]) for l in range(len(Ws))]
        gbs = [np.stack([p[1][l] for p in per]) for l in range(len(Ws))]
        return hs, gbs, np.array([p[2] for p in per])
    L = len(Ws)
    hs, zs = [X], []
    for l, W in enumerate(Ws):
        z = _rows_matmul(hs[-1], W.T)
        zs.append(z)
        if l < L - 1:
            hs.append(_act(z, activation))
    f = zs[-1]
    if loss_matrix is None:
        r = Y - f
        g = r
    else:
        T = np.asarray(loss_matrix, dtype=np.float64)
        r = Y - f @ T.T
        g = r @ T  # -dl/df = T^T (y - T f)
    loss = 0.5 * np.mean(np.sum(r * r, axis=-1), axis=-1)
    gbs = [None] * L
    for l in range(L - 1, -1, -1):
        gbs[l] = g
        if l > 0:
            g = _rows_matmul(g, Ws[l]) * _act_grad_from(hs[l], zs[l - 1], activation)
    return hs, gbs, loss


def _forward_backward_stacked(Ws: list[np.ndarray], X: np.ndarray, Y: np.ndarray, activation: str):
    """:func:`forward_backward` for stacked runs (``Ws[l]`` of shape (R, d_out, d_in)) and the identity loss
    matrix: the per-run arithmetic of the 2-D case, every product and elementwise operation batched over runs."""
    L, R = len(Ws), Ws[0].shape[0]
    hs, zs = [np.array(X) if X.ndim == 3 else np.repeat(X[None], R, axis=0)], []
    for l, W in enumerate(Ws):
        z = _bmm(hs[-1], W.transpose(0, 2, 1))
        zs.append(z)
        if l < L - 1:
            hs.append(_act(z, activation))
    r = (Y if Y.ndim == 3 else Y[None]) - zs[-1]
    loss = 0.5 * np.mean(np.sum(r * r, axis=-1), axis=-1)
    g = r
    gbs = [None] * L
    for l in range(L - 1, -1, -1):
        gbs[l] = g
        if l > 0:
            g = _bmm(g, Ws[l]) * _act_grad_from(hs[l], zs[l - 1], activation)
    return hs, gbs, loss


def input_jacobians(Ws: list[np.ndarray], X: np.ndarray, layer: int, activation: str = "tanh") -> np.ndarray:
    """Per-sample Jacobians J = df/dh_a of the network output with respect to the input h_a of
    ``layer`` (0-based): shape (n, d_out, d_a). Used for the neural-feature-ansatz statistic
    (AGOP = E[J^T J])."""
    hs, zs = [X], []
    for l, W in enumerate(Ws):
        z = hs[-1] @ W.T
        zs.append(z)
        if l < len(Ws) - 1:
            hs.append(_act(z, activation))
    n, d_out = X.shape[0], Ws[-1].shape[0]
    J = np.broadcast_to(np.eye(d_out), (n, d_out, d_out))
    for l in range(len(Ws) - 1, layer - 1, -1):
        J = J @ Ws[l]  # df/dh_{l} (input of layer l)
        if l > layer:
            J = J * _act_grad_from(hs[l], zs[l - 1], activation)[:, None, :]
    return J


def pack(Ws: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([W.ravel() for W in Ws])


def unpack(theta: np.ndarray, widths) -> list[np.ndarray]:
    out, i = [], 0
    for din, dout in zip(widths[:-1], widths[1:]):
        out.append(theta[i:i + din * dout].reshape(dout, din))
        i += din * dout
    return out


def objective(theta, X, Y, widths, gamma: float, activation: str = "tanh"):
    """Full-batch objective E[l] + (gamma/2) ||theta||^2 and its analytic gradient."""
    Ws = unpack(theta, widths)
    hs, gbs, loss = forward_backward(Ws, X, Y, activation)
    n = X.shape[0]
    grads = [-_tmatmul(gbs[l], hs[l]) / n + gamma * Ws[l] for l in range(len(Ws))]
    return float(loss + 0.5 * gamma * theta @ theta), pack(grads)


# --------------------------------------------------------------------------------------------
# The small MLP experiment (docs/crh.md), vectorised over weight decays
# --------------------------------------------------------------------------------------------

def make_task(cfg: CRHExperiment, seed: int | None = None):
    """Data and the initial weights of the experiment (deterministic in ``seed``, default cfg.seed)."""
    rng = np.random.default_rng(cfg.seed if seed is None else seed)
    d_in, d_out = cfg.widths[0], cfg.widths[-1]
    X = rng.standard_normal((cfg.n_samples, d_in))
    B = rng.standard_normal((cfg.task_rank, d_in)) / np.sqrt(d_in)
    A = rng.standard_normal((d_out, cfg.task_rank)) / np.sqrt(cfg.task_rank)
    Y = np.tanh(2.0 * X @ B.T) @ A.T + cfg.noise * rng.standard_normal((cfg.n_samples, d_out))
    W0 = [rng.standard_normal((o, i)) / np.sqrt(i) for i, o in zip(cfg.widths[:-1], cfg.widths[1:])]
    return X, Y, W0, rng


def full_loss(Ws: list[np.ndarray], X: np.ndarray, Y: np.ndarray, activation: str = "tanh") -> np.ndarray:
    """Training loss mean_i ||f(x_i) - y_i||^2 / 2 on the full data, for stacked runs Ws[l] of shape
    (R, out, in): a forward pass only (the loss of :func:`forward_backward`). Returns shape (R,)."""
    h = np.broadcast_to(X, (Ws[0].shape[0],) + X.shape)
    for l, W in enumerate(Ws):
        h = np.matmul(h, W.transpose(0, 2, 1))
        if l < len(Ws) - 1:
            h = _act(h, activation)
    r = Y - h
    return 0.5 * np.mean(np.sum(r * r, axis=-1), axis=-1)


def instant_alignments(Ws: list[np.ndarray], hs: list, gbs: list, layer: int) -> np.ndarray:
    """The six alignments of ``layer`` at one moment (matrices of the current weights, not averaged), for
    stacked runs: array (R, len(MODES), 6 relations in theory.crh order, 2 metrics pearson/cosine); NaN
    where undefined or where a run's weights are not finite. ``hs``/``gbs``: :func:`forward_backward`."""
    W_all = Ws[layer]
    R = W_all.shape[0]
    out = np.full((R, len(MODES), len(RELATIONS), 2), np.nan)
    for r in range(R):
        W, ha, gb = W_all[r], hs[layer][r], gbs[layer][r]
        if not (np.all(np.isfinite(W)) and np.all(np.isfinite(ha)) and np.all(np.isfinite(gb))):
            continue
        hb, ga = _rows_matmul(ha, W.T), _rows_matmul(gb, W)
        Z = {"Z_a": W.T @ W, "Z_b": W @ W.T}
        for i, mode in enumerate(MODES):
            M = {"H_a": _second_moment(ha, mode), "H_b": _second_moment(hb, mode), "G_a": _second_moment(ga, mode),
                 "G_b": _second_moment(gb, mode), **Z}
            for j, (m1, m2) in enumerate(RELATIONS.values()):
                A, B = _sym(M[m1]), _sym(M[m2])
                if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
                    continue
                for k, fn in enumerate((alpha_pearson, alpha_cosine)):
                    v = fn(A, B)
                    out[r, i, j, k] = np.nan if v is None else v
    return out


@dataclass
class Dynamics:
    """What training recorded along the way (data for the dynamics figure; no statement reads it).

    ``steps[p]``: SGD steps done at loss point p (0 = initial weights); ``loss[p]``: full-data training loss
    per run (shape (R,)); ``alignment_steps`` / ``alignments[p]``: :func:`instant_alignments` of
    ``alignment_layer`` (0-based) at those steps."""

    alignment_layer: int
    steps: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    alignment_steps: list = field(default_factory=list)
    alignments: list = field(default_factory=list)
    seconds: float = 0.0

    def loss_array(self) -> np.ndarray:
        """Loss points x runs (empty (0, 0) when nothing was recorded)."""
        return np.array(self.loss, dtype=float) if self.loss else np.zeros((0, 0))

    def alignment_series(self, run: int, mode: str = "normalized", metric: str = "pearson") -> dict:
        """relation -> list of alignments (NaN where undefined) of one run at ``alignment_steps``."""
        i, k = MODES.index(mode), ("pearson", "cosine").index(metric)
        return {rel: [float(a[run, i, j, k]) for a in self.alignments] for j, rel in enumerate(RELATIONS)}


@dataclass
class ExperimentResult:
    """Time-averaged layer statistics of every run (one run per (seed, weight decay), seed-major:
    ``config.runs``).

    ``raw[r][l]`` / ``normalized[r][l]``: LayerMatrices of layer l (0-based; layer l maps hs[l] to
    z_l) in run r, averaged over the recorded checkpoints. ``S[r][l]`` = averaged E[g_b h_a^T],
    ``W_mean[r][l]`` averaged weights, ``W_final[r][l]`` final weights, ``loss[r]`` the averaged
    training loss (without the penalty), ``diverged[r]`` whether the run blew up.

    For the magnitude statements (docs/crh.md, "Magnitudes"): ``first_moment[r][l]`` = the checkpoint
    average of E[g_b h_b^T] = E[g_b h_a^T] W^T (full data, current weights), ``step_outer[r][l]`` = the
    average over every SGD step of the second half of D D^T with D = Delta W / eta the step direction,
    ``W_half[r][l]`` the weights at the start of the second half (the drift of Z_b over the half is
    then W_final W_final^T - W_half W_half^T over ``half_steps`` steps).
    """

    config: CRHExperiment
    raw: list
    normalized: list
    S: list
    W_mean: list
    W_final: list
    loss: list
    diverged: list
    seconds: float
    #: SGD steps actually taken (cfg.steps unless the wall-clock safety limit stopped the loop)
    steps_done: int = -1
    #: True when the wall-clock safety limit stopped training before cfg.steps
    budget_reached: bool = False
    #: checkpoints averaged (0 when training stopped before the first one)
    n_recorded: int = -1
    time_budget_s: float | None = None
    #: loss and alignments recorded along training (:class:`Dynamics`; single-seed experiments only)
    dynamics: Dynamics | None = None
    first_moment: list | None = None
    step_outer: list | None = None
    W_half: list | None = None
    W_init: list | None = None
    half_steps: int = 0

    @property
    def complete(self) -> bool:
        """Training ran all cfg.steps steps (the statistics are those the experiment defines)."""
        return not self.budget_reached

    @property
    def budget_message(self) -> str:
        return (f"stopped by the wall-clock safety limit ({self.time_budget_s:g} s) at step {self.steps_done} of "
                f"{self.config.steps}; the work budget was not reached ({self.n_recorded} of "
                f"{self.config.n_records} checkpoints recorded)")

    def gamma(self, run: int) -> float:
        return self.config.runs[run][1]

    def run_index(self, seed_index: int, gamma_index: int) -> int:
        return seed_index * len(self.config.weight_decays) + gamma_index

    def layer(self, run: int, layer: int, mode: str = "raw") -> LayerMatrices | None:
        return (self.raw if mode == "raw" else self.normalized)[run][layer]

    def stationarity_residual(self, run: int, layer: int) -> float | None:
        """||E[g_b h_a^T] - gamma W|| / ||gamma W|| with time averages; None at gamma = 0."""
        g = self.gamma(run)
        if g == 0 or self.diverged[run] or self.W_mean[run][layer] is None:
            return None
        gW = g * self.W_mean[run][layer]
        den = np.linalg.norm(gW)
        out = float(np.linalg.norm(self.S[run][layer] - gW) / den) if den > 0 else None
        return out if out is not None and np.isfinite(out) else None


#: The SGD loop looks at the clock every this many steps (a clock read costs ~0.1 us, a step >= 30 us).
_CLOCK_EVERY = 16


def _record_dynamics(dyn: Dynamics | None, done: int, Ws, X, Y, act, loss_at, align_at, fb=None) -> None:
    """Add the loss (and, at ``align_at``, the alignments) after ``done`` steps to ``dyn``; ``fb``: a
    :func:`forward_backward` result of the current weights, reused when given."""
    if dyn is None or (done not in loss_at and done not in align_at):
        return
    t0 = time.perf_counter()
    if done in align_at:
        fb = fb or forward_backward(Ws, X, Y, act)
        dyn.alignment_steps.append(done)
        dyn.alignments.append(instant_alignments(Ws, fb[0], fb[1], dyn.alignment_layer))
    if done in loss_at:
        dyn.steps.append(done)
        dyn.loss.append(np.array(fb[2] if fb is not None else full_loss(Ws, X, Y, act), dtype=float))
    dyn.seconds += time.perf_counter() - t0


#: Steps of the second half whose D D^T are summed by one matrix product (:func:`_sgd_loop`).
_DD_CHUNK = 32


def _flush_dd(acc, Dbuf, d_in, k: int) -> None:
    """Add the sum of D D^T over the first ``k`` steps held in ``Dbuf`` to ``acc["DD"]``."""
    if k:
        for l, buf in enumerate(Dbuf):
            D = buf[:, :, :k * d_in[l]]
            acc["DD"][l] += np.matmul(D, D.transpose(0, 2, 1))


def _sgd_loop(cfg, Xs, Ys, Ws, gam, eta, rngs, record_set, acc, deadline: float = float("inf"),
              dyn: Dynamics | None = None, loss_at=frozenset(), align_at=frozenset(), noise_rng=None,
              X_full=None, Y_full=None) -> tuple[int, int]:
    """The SGD loop of :func:`run_experiment` (updates Ws and the accumulators in ``acc`` in place;
    records the dynamics after ``loss_at`` / ``align_at`` steps into ``dyn``).

    ``Xs``/``Ys``: data per seed (n_seeds, N, d); runs are seed-major, ``len(weight_decays)`` per seed;
    every seed has its own minibatch order (``rngs``). The work is fixed by ``cfg.steps``; the loop stops
    early only when ``time.perf_counter()`` passes ``deadline`` (the wall-clock safety net, checked every
    ``_CLOCK_EVERY`` steps). Returns (steps done, checkpoints recorded)."""
    L, N, B = cfg.n_layers, cfg.n_samples, cfg.batch_size
    n_seeds, n_g = Xs.shape[0], len(cfg.weight_decays)
    batches_per_epoch = max(1, N // B)
    tanh = cfg.activation == "tanh"
    act = cfg.activation
    half = cfg.steps // 2
    noise_l, sig = (cfg.noise_layer if cfg.neuron_noise > 0 else None), cfg.neuron_noise
    seed_ix, single = np.arange(n_seeds)[:, None], n_seeds == 1
    Xe = Ye = None
    recorded = 0
    # loop invariants (the same floats as written inline; the transposes are views of Ws, updated in place)
    WT, decay, lr_b, dyn_at = [W.transpose(0, 2, 1) for W in Ws], 1.0 - eta * gam, eta / B, loss_at | align_at
    # E[D D^T] of the second half: the steps' D = S / B - gamma W are written side by side into Dbuf[l]
    # (columns k d_in .. (k+1) d_in) and summed with one product every _DD_CHUNK steps
    Dbuf = [np.empty((W.shape[0], W.shape[1], _DD_CHUNK * W.shape[2])) for W in Ws]
    d_in = [W.shape[2] for W in Ws]
    k = 0
    for t in range(cfg.steps):
        if t % _CLOCK_EVERY == 0 and time.perf_counter() > deadline:
            _flush_dd(acc, Dbuf, d_in, k)
            return t, recorded
        if t == half:
            acc["W_half"] = [W.copy() for W in Ws]
        j = t % batches_per_epoch
        if j == 0:  # the epoch's minibatches, gathered at once (the same rows as one gather per step)
            perms = np.stack([r.permutation(N) for r in rngs])
            if single:
                Xe, Ye = Xs[0][perms[0]], Ys[0][perms[0]]
            else:
                Xe = np.repeat(Xs[seed_ix, perms], n_g, axis=0)
                Ye = np.repeat(Ys[seed_ix, perms], n_g, axis=0)
        if single:
            xb, yb = Xe[j * B:(j + 1) * B], Ye[j * B:(j + 1) * B]
        else:
            xb, yb = Xe[:, j * B:(j + 1) * B], Ye[:, j * B:(j + 1) * B]
        # forward (hs: clean activations for the activation derivative; hu: what the next layer reads)
        hs, hu = [xb], [xb]
        z = None
        for l in range(L):
            z = np.matmul(hu[l], WT[l])
            if l < L - 1:
                h = np.tanh(z) if tanh else np.maximum(z, 0.0)
                hs.append(h)
                hu.append(h + sig * noise_rng.standard_normal(h.shape) if noise_l == l + 1 else h)
        g = yb - z
        second = t >= half
        # backward + update (g_b of layer l; update uses the pre-update W for backprop)
        for l in range(L - 1, -1, -1):
            W = Ws[l]
            S = np.matmul(g.transpose(0, 2, 1), hu[l])
            if second:
                Dk = Dbuf[l][:, :, k * d_in[l]:(k + 1) * d_in[l]]
                np.divide(S, B, out=Dk)
                Dk -= gam * W
            if l > 0:
                g = np.matmul(g, W)
                h = hs[l]
                g *= (1.0 - h * h) if tanh else (h > 0)  # relu: max(z, 0) > 0 iff z > 0
            W *= decay
            S *= lr_b
            W += S
        if second:
            k += 1
            if k == _DD_CHUNK:
                _flush_dd(acc, Dbuf, d_in, k)
                k = 0
        fb = None
        if t in record_set:
            recorded += 1
            fb = fhs, fgbs, loss = forward_backward(Ws, X_full, Y_full, act)
            acc["loss"] += loss
            for l in range(L):
                ha, gb = fhs[l], fgbs[l]
                hb, ga = _bmm(ha, WT[l]), _bmm(gb, Ws[l])
                for mode, a in (("raw", acc["raw"][l]), ("normalized", acc["nrm"][l])):
                    a["H_a"] += _second_moment(ha, mode)
                    a["H_b"] += _second_moment(hb, mode)
                    a["G_a"] += _second_moment(ga, mode)
                    a["G_b"] += _second_moment(gb, mode)
                ZA = np.matmul(Ws[l].transpose(0, 2, 1), Ws[l])
                ZB = np.matmul(Ws[l], Ws[l].transpose(0, 2, 1))
                for a in (acc["raw"][l], acc["nrm"][l]):
                    a["Z_a"] += ZA
                    a["Z_b"] += ZB
                Sl = _bmm(gb, ha, trans=True) / N
                acc["S"][l] += Sl
                acc["SW"][l] += np.matmul(Sl, Ws[l].transpose(0, 2, 1))
                acc["W"][l] += Ws[l]
        if t + 1 in dyn_at:
            _record_dynamics(dyn, t + 1, Ws, X_full, Y_full, act, loss_at, align_at, fb)
    _flush_dd(acc, Dbuf, d_in, k)
    return cfg.steps, recorded


def make_tasks(cfg: CRHExperiment):
    """Per seed of ``cfg.run_seeds``: (X, Y_train, W0, rng) with the lazy targets f_0 + y / S when
    ``cfg.init_scale`` is set (Chizat, Oyallon, Bach 2019; docs/crh.md, "Lazy training")."""
    out = []
    for s in cfg.run_seeds:
        X, Y, W0, rng = make_task(cfg, seed=s)
        if cfg.init_scale is not None:
            f0 = forward_backward(W0, X, np.zeros_like(Y), cfg.activation)[1][-1] * -1.0  # g_b = 0 - f0
            Y = f0 + Y / cfg.init_scale
        out.append((X, Y, W0, rng))
    return out


def run_experiment(cfg: CRHExperiment, *, time_budget_s: float | None = None) -> ExperimentResult:
    """SGD with weight decay on the experiment's MLP, one run per (seed, weight decay), all runs advanced
    together (weights stacked along a leading run axis, batched matmuls). Statistics are formed on
    the full data set at ``n_records`` evenly spaced checkpoints of the second half and averaged.

    Budget: the work of an instance (SGD steps, checkpoint statistics) is fixed by its sizes; it is
    estimated before any allocation (:func:`experiment_budget`, in flop-equivalents) and an instance over
    the work budget is refused (InputError), so the same instance gives the same result at any machine
    load. ``time_budget_s`` (default :data:`SAFETY_WALL_S`, far above the work budget's time at the
    calibrated rate) is only a wall-clock safety net: when it stops training the result has
    ``budget_reached=True`` and says "stopped by the wall-clock safety limit; the work budget was not
    reached", which the claims report as INCONCLUSIVE.
    """
    if not isinstance(cfg, CRHExperiment):
        raise InstanceError(f"cfg must be a theory.crh.CRHExperiment, got {type(cfg).__name__}")
    budget = SAFETY_WALL_S if time_budget_s is None else as_float("time_budget_s", time_budget_s, positive=True,
                                                                  allow_inf=True)
    experiment_budget(cfg, check=True)
    t0 = time.perf_counter()
    tasks = make_tasks(cfg)
    n_seeds, n_g = len(tasks), len(cfg.weight_decays)
    R, L, N = n_seeds * n_g, cfg.n_layers, cfg.n_samples
    gam = np.asarray([g for _, g in cfg.runs], dtype=np.float64)[:, None, None]
    eta = cfg.lr
    Ws = [np.concatenate([np.repeat(t[2][l][None], n_g, axis=0) for t in tasks]) for l in range(L)]
    W_init = [[Ws[l][r].copy() for l in range(L)] for r in range(R)]
    Xs = np.stack([t[0] for t in tasks])
    Ys = np.stack([t[1] for t in tasks])
    rngs = [t[3] for t in tasks]
    if n_seeds == 1:
        X_full, Y_full = Xs[0], Ys[0]
    else:
        X_full, Y_full = np.repeat(Xs, n_g, axis=0), np.repeat(Ys, n_g, axis=0)
    noise_rng = np.random.default_rng([cfg.seed, 0x6E6F697365]) if cfg.neuron_noise > 0 else None
    record_at = np.unique(np.linspace(cfg.steps // 2, cfg.steps - 1, cfg.n_records).round().astype(int))
    record_set = set(record_at.tolist())
    dims = cfg.widths
    raw = [{k: np.zeros((R, dims[l + (k[-1] == "b")], dims[l + (k[-1] == "b")]))
            for k in ("H_a", "H_b", "G_a", "G_b", "Z_a", "Z_b")} for l in range(L)]
    acc = {"raw": raw, "nrm": [{k: np.zeros_like(v) for k, v in d.items()} for d in raw],
           "S": [np.zeros_like(W) for W in Ws], "W": [np.zeros_like(W) for W in Ws],
           "SW": [np.zeros((R, W.shape[1], W.shape[1])) for W in Ws],
           "DD": [np.zeros((R, W.shape[1], W.shape[1])) for W in Ws], "loss": np.zeros(R), "W_half": None}
    dyn = None
    loss_at = align_at = frozenset()
    if n_seeds == 1:
        n_loss, n_align = curve_point_counts(cfg)
        loss_at = frozenset(curve_steps(cfg.steps, n_loss))
        align_at = frozenset(curve_steps(cfg.steps, n_align))
        dyn = Dynamics(alignment_layer=(-2) % L)
    # Single-threaded BLAS: every product of the loop is small (a 256-wide layer at batch 8 is ~1 MFLOP),
    # and threaded OpenBLAS made such steps ~10x slower on the loaded 2-core machine (docs/crh.md, Budgets).
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"), blas_threads(0):
        _record_dynamics(dyn, 0, Ws, X_full, Y_full, cfg.activation, loss_at, align_at)
        steps_done, n_rec = _sgd_loop(cfg, Xs, Ys, Ws, gam, eta, rngs, record_set, acc, deadline=t0 + budget,
                                      dyn=dyn, loss_at=loss_at, align_at=align_at, noise_rng=noise_rng,
                                      X_full=X_full, Y_full=Y_full)
        if dyn is not None and dyn.steps and dyn.steps[-1] != steps_done:  # stopped early: the loss it ends with
            _record_dynamics(dyn, steps_done, Ws, X_full, Y_full, cfg.activation, {steps_done}, frozenset())
    diverged = [not all(np.all(np.isfinite(W[r])) for W in Ws) for r in range(R)]

    def avg(x):
        return None if n_rec == 0 else x / n_rec

    def mats(a, mode, r):
        if n_rec == 0:
            return None
        return LayerMatrices(*(a[k][r] / n_rec for k in ("H_a", "H_b", "G_a", "G_b", "Z_a", "Z_b")), mode, N)

    half_steps = max(0, steps_done - cfg.steps // 2)
    Wh = acc["W_half"]
    res = ExperimentResult(
        cfg, [[mats(acc["raw"][l], "raw", r) for l in range(L)] for r in range(R)],
        [[mats(acc["nrm"][l], "normalized", r) for l in range(L)] for r in range(R)],
        [[avg(acc["S"][l][r]) for l in range(L)] for r in range(R)],
        [[avg(acc["W"][l][r]) for l in range(L)] for r in range(R)],
        [[Ws[l][r].copy() for l in range(L)] for r in range(R)],
        [None] * R if n_rec == 0 else (acc["loss"] / n_rec).tolist(), diverged, time.perf_counter() - t0,
        steps_done=steps_done, budget_reached=steps_done < cfg.steps, n_recorded=n_rec, time_budget_s=budget,
        dynamics=dyn,
        first_moment=[[avg(acc["SW"][l][r]) for l in range(L)] for r in range(R)],
        step_outer=[[acc["DD"][l][r] / half_steps if half_steps else None for l in range(L)] for r in range(R)],
        W_half=None if Wh is None else [[Wh[l][r].copy() for l in range(L)] for r in range(R)],
        W_init=W_init, half_steps=half_steps)
    return res


# --------------------------------------------------------------------------------------------
# Exact critical points (L-BFGS on loss + weight decay)
# --------------------------------------------------------------------------------------------

#: L-BFGS stopping tolerance on the projected gradient (scipy's pgtol): the stationarity identity
#: E[g_b h_a^T] = gamma W then holds to about this accuracy entrywise.
CRITICAL_GTOL = 1e-10


def critical_point(cfg: CRHExperiment, gamma: float, *, max_iter: int = 20_000,
                   gtol: float = CRITICAL_GTOL, time_budget_s: float | None = None) -> Solution:
    """A critical point of E[l] + (gamma/2)||theta||^2 for the experiment's network and data,
    found by L-BFGS from the experiment's initialisation. Returns a Solution with variables
    {"W0", "W1", ...}, diagnostics {"grad_norm", "grad_max", "iterations", "budget_reached"} (the
    gradient at the returned point, recomputed). The work budget is ``max_iter`` iterations (2 max_iter
    evaluations); ``time_budget_s`` (default SAFETY_WALL_S) is only a wall-clock safety net:
    ``budget_reached`` then says "stopped by the wall-clock safety limit" (``message``)."""
    from scipy.optimize import minimize

    gamma = as_float("gamma (weight decay)", gamma, nonnegative=True)
    max_iter = as_int("max_iter", max_iter, minimum=1, maximum=10 ** 6)
    gtol = as_float("gtol", gtol, positive=True)
    budget = SAFETY_WALL_S if time_budget_s is None else as_float("time_budget_s", time_budget_s, positive=True)
    t0 = time.perf_counter()
    X, Y, W0, _ = make_task(cfg)
    theta0 = pack(W0)
    stopped = {"flag": False}

    def callback(intermediate_result):  # scipy >= 1.11: StopIteration ends the run cleanly
        if time.perf_counter() - t0 > budget:
            stopped["flag"] = True
            raise StopIteration

    with np.errstate(over="ignore", invalid="ignore"), blas_threads(0):  # small products: one BLAS thread
        res = minimize(objective, theta0, args=(X, Y, cfg.widths, gamma, cfg.activation), jac=True,
                       method="L-BFGS-B", callback=callback,
                       options={"maxiter": max_iter, "maxfun": 2 * max_iter, "gtol": gtol, "ftol": 1e-300,
                                "maxcor": 30})
        val, grad = objective(res.x, X, Y, cfg.widths, gamma, cfg.activation)
    Ws = unpack(res.x, cfg.widths)
    gmax = float(np.max(np.abs(grad)))
    return Solution(val, "L-BFGS-B (scipy), loss + weight decay", bool(gmax <= 10 * gtol),
                    time.perf_counter() - t0,
                    variables={f"W{l}": W.copy() for l, W in enumerate(Ws)},
                    diagnostics={"grad_norm": float(np.linalg.norm(grad)), "grad_max": gmax,
                                 "iterations": int(res.nit), "gamma": gamma,
                                 "message": (f"stopped by the wall-clock safety limit ({budget:g} s); the work "
                                             f"budget ({max_iter} iterations) was not reached") if stopped["flag"]
                                 else str(res.message),
                                 "budget_reached": stopped["flag"], "time_budget_s": budget})


def per_sample_gradients_fd(Ws: list[np.ndarray], X: np.ndarray, Y: np.ndarray, layer: int,
                            activation: str = "tanh", step: float = 1e-5,
                            loss_matrix: np.ndarray | None = None) -> np.ndarray:
    """g_b = -dl/dz of ``layer`` for every sample by central finite differences of the per-sample
    loss l = ||T f - y||^2 / 2 (T = ``loss_matrix``, default identity) in the pre-activation z of
    that layer: a computation independent of
    the backpropagation in :func:`forward_backward` (it only runs the network forward from z).
    Each coordinate is perturbed in all samples at once (sample i's loss depends only on z_i).
    Shape (n, d_out of ``layer``); error O(step^2) plus rounding ~1e-16 |l| / step."""
    layer = as_int("layer", layer, minimum=0, maximum=len(Ws) - 1)
    step = as_float("step", step, positive=True)
    h = X
    for l in range(layer):
        h = _act(h @ Ws[l].T, activation)
    z0 = h @ Ws[layer].T

    def losses(z):
        out = z
        for l in range(layer + 1, len(Ws)):
            out = _act(out, activation) @ Ws[l].T
        if loss_matrix is not None:
            out = out @ np.asarray(loss_matrix, dtype=np.float64).T
        r = out - Y
        return 0.5 * np.sum(r * r, axis=1)

    g = np.empty_like(z0)
    for j in range(z0.shape[1]):
        e = np.zeros_like(z0)
        e[:, j] = step
        g[:, j] = -(losses(z0 + e) - losses(z0 - e)) / (2 * step)
    return g


def objective_gradient_fd(theta: np.ndarray, X: np.ndarray, Y: np.ndarray, widths, gamma: float,
                          activation: str = "tanh", step: float = 1e-6) -> np.ndarray:
    """Gradient of the full-batch objective by central finite differences of its value only
    (independent of the analytic gradient and of backpropagation): 2 P objective evaluations."""
    theta = np.asarray(theta, dtype=np.float64)
    out = np.empty_like(theta)
    e = np.zeros_like(theta)
    for i in range(theta.size):
        e[i] = step
        out[i] = (objective(theta + e, X, Y, widths, gamma, activation)[0] -
                  objective(theta - e, X, Y, widths, gamma, activation)[0]) / (2 * step)
        e[i] = 0.0
    return out
