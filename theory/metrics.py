"""Collapse metrics of measured features: definitions and streaming accumulators.

Definitions, normalisations and JSON keys: ``docs/metrics.md`` (sources: Papyan, Han & Donoho,
PNAS 2020 for NC1-NC4; Galanti, Gyorgy & Hutter, ICLR 2022 for the CDNV; Wu & Papyan, 2024 for
the equinorm/equiangularity/max-equiangularity forms). Features h_i in R^d (i = 1..N), labels
y_i in 0..K-1 with every class present, classifier W (K x d, row c = classifier of class c),
bias b (K).

- class means mu_c = (1/n_c) sum_{y_i = c} h_i; centre mu_G = (1/K) sum_c mu_c (the mean of the
  class means, so class imbalance does not move it); centred means M = [mu_c - mu_G].
- Sigma_W = (1/N) sum_i (h_i - mu_{y_i})(h_i - mu_{y_i})^T, Sigma_B = (1/K) M M^T.

The computation streams: :class:`ClassMeans` (pass 1: class sums and counts) and
:class:`ClassScatter` (pass 2: the within-class scatter about the pass-1 means, the class
variances and the NC4 disagreements) take chunks of samples (numpy arrays, or torch tensors on
any device) and accumulate in float64 by default; :func:`collapse_metrics` turns the two into
every metric. Memory is O(K d + min(d, K)^2) plus one chunk and one K-row tile, whatever N is:
K x K quantities (cosines, pairwise distances, the Gram distances) are computed tile by tile and
never stored; NC4 works on sub-chunks of the N x K logits. :func:`measure_arrays` runs both passes
over in-memory arrays.

Pure numpy; torch is used only when the caller passes torch tensors. This module does not import
``solvers`` or ``proofs_check``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from theory._validate import InputError

# ---------------------------------------------------------------------------------------------
# Constants (each with where it comes from)
# ---------------------------------------------------------------------------------------------

#: The pseudo-inverse in NC1 drops eigenvalues of Sigma_B below this fraction of the largest one
#: (docs/metrics.md; the rank-deficient directions of Sigma_B, rank <= K - 1, come out of an
#: eigendecomposition at ~1e-16 relative, far below it).
PINV_RTOL = 1e-12

#: A vector (a centred class mean, the between-class scatter, W) counts as zero when its norm is at
#: most this fraction of the features' root-mean-square norm: class means computed in float64 from
#: the same data differ by ~1e-16 x that scale when they coincide exactly, so 1e-12 leaves four
#: digits of margin for rounding and still accepts every genuinely separated configuration.
ZERO_RTOL = 1e-12

#: Bytes of one K-row tile of the K x K pairwise quantities (about six float64 arrays of t x K are
#: live at once) and of one sub-chunk of N x K logits in NC4.
TILE_BYTES = 96_000_000

#: Largest memory the metrics' state may take (class sums K x d, centred means, W, the d x d or
#: K x K scatter, tiles); above it the computation is refused before allocating (preamble: 2 GB).
MAX_STATE_BYTES = 2_000_000_000

#: Default chunk of samples for :func:`measure_arrays` (bytes of float64 features per chunk).
CHUNK_BYTES = 32_000_000

#: Keys of the metrics object (docs/metrics.md).
METRIC_KEYS = ("nc1", "nc1_trace", "cdnv_mean", "cdnv_max", "equinorm", "equiangularity", "max_equiangularity",
               "gram_distance_etf", "gram_distance_of", "gram_distance_predicted", "nc3", "nc4")

#: The variants of docs/metrics.md ("Variants"): also keys of ``"metrics"``.
VARIANT_KEYS = ("nc1_svd", "cdnv_std", "cdnv_min", "nc2_log_energy", "nc2_log_energy_std", "nc2_uniformity_gap",
                "duality_cos_mean", "uniform_duality", "nc5", "nc5_ood_uncentred")

ALL_KEYS = METRIC_KEYS + VARIANT_KEYS

DTYPES = ("float64", "float32")


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _torch():
    import torch

    return torch


#: Largest |entry| whose square (and sums of ~1e6 squares) stays finite in float64; the smallest nonzero
#: largest |entry| of a chunk whose squares stay normal (below it, squared norms underflow to 0 or lose all
#: precision, and the metrics would be null or wrong: audit, 1e-200 features gave all-null metrics).
SQUARE_MAX = 1e150
SQUARE_MIN = 1e-145


def _check_underflow(amax: float, where: str) -> None:
    if 0.0 < amax < SQUARE_MIN:
        raise InputError(f"{where}features: the largest |entry| of a chunk is {amax:.3g}: squared norms underflow "
                         f"(accepted: a largest |entry| >= {SQUARE_MIN:g} or all zero); rescale the features (the "
                         "collapse metrics do not depend on their scale)")


def state_bytes(K: int, d: int, *, weights: bool = False, tile_bytes: float = TILE_BYTES) -> float:
    """Bytes the accumulators and :func:`collapse_metrics` hold for K classes in dimension d."""
    kd = 8.0 * K * d
    return 2 * kd + (kd if weights else 0.0) + 8.0 * min(K, d) ** 2 * 3 + tile_bytes


def check_state_budget(K: int, d: int, *, weights: bool = False, limit: float = MAX_STATE_BYTES,
                       what: str = "features") -> float:
    """Refuse (InputError naming ``what``) before allocating when the state exceeds ``limit`` bytes."""
    need = state_bytes(K, d, weights=weights)
    if need > limit:
        raise InputError(f"{what}: K = {K} classes in dimension d = {d} need about {need / 1e9:.3g} GB for the "
                         f"metrics (class means K x d{', W' if weights else ''}, a min(d, K)^2 scatter, tiles), "
                         f"above the limit of {limit / 1e9:.3g} GB")
    return need


#: Cost model of :func:`estimate_seconds` (calibrated on the 2-core development VM under load: N = 1e6,
#: d = 256, K = 100 with W measured 30 s; K = 1e4, d = 1024 measured 16 s; docs/benchmarks.md): float64
#: GEMM flops per second, and elementwise float64 operations per second.
GEMM_FLOPS_PER_S = 5e9
ELEMENTWISE_PER_S = 5e8


def estimate_seconds(N: int, d: int, K: int, *, weights: bool = False) -> dict:
    """Estimated seconds of both passes and of the K x K pairs (docs/measure.md, "Budgets")."""
    for name, v, lo in (("N", N, 1), ("d", d, 1), ("K", K, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
    gemm_pass = N * d * (d / 2.0 + (min(d, K) if d > K else 0) + (2.0 * K if weights else 0.0))
    elem_pass = 20.0 * N * d
    gemm_pairs = K * K * d / 2.0
    elem_pairs = 40.0 * K * K / 2.0
    passes = gemm_pass / GEMM_FLOPS_PER_S + elem_pass / ELEMENTWISE_PER_S
    pairs = gemm_pairs / GEMM_FLOPS_PER_S + elem_pairs / ELEMENTWISE_PER_S
    return {"passes_s": passes, "pairs_s": pairs, "total_s": passes + pairs}


# ---------------------------------------------------------------------------------------------
# Chunk validation (both passes)
# ---------------------------------------------------------------------------------------------

def _chunk(features, labels, layout: str, d: int | None, K: int | None, where: str):
    """(X as B x d, y as (B,) int64) in the caller's library (numpy or torch), validated."""
    if layout not in ("nd", "dn"):
        raise InputError(f"layout must be 'nd' (rows are samples) or 'dn' (columns are samples), got {layout!r}")
    if isinstance(features, (str, bytes)) or features is None:
        raise TypeError(f"features must be a numeric array (N x d), got {type(features).__name__}")
    torch_in = _is_torch(features)
    if torch_in:
        torch = _torch()
        X = features
        if X.dtype.is_complex or X.dtype == torch.bool:
            raise InputError(f"{where}features must be real numbers, got dtype {X.dtype}")
        if not X.dtype.is_floating_point:
            X = X.to(torch.float64)
    else:
        X = np.asarray(features)
        if X.dtype.kind not in "fiu":
            raise InputError(f"{where}features must be real numbers, got dtype {X.dtype}")
    if X.ndim != 2:
        raise InputError(f"{where}features must be 2-dimensional (N x d), got shape {tuple(X.shape)}")
    if layout == "dn":
        X = X.T
    B, dd = int(X.shape[0]), int(X.shape[1])
    if d is not None and dd != d:
        raise InputError(f"{where}features have dimension {dd}, expected d = {d} (the dimension of the first chunk "
                         f"or of W)")
    if dd == 0:
        raise InputError(f"{where}features must have dimension d >= 1, got shape {tuple(X.shape)}")
    y = _labels_chunk(labels, B, K, where, torch_in, X)
    return X, y


def _labels_chunk(labels, B: int, K: int | None, where: str, torch_in: bool, X):
    if labels is None or isinstance(labels, (str, bytes)):
        raise TypeError(f"labels must be a 1-D integer array, got {type(labels).__name__}")
    if _is_torch(labels):
        torch = _torch()
        if labels.dtype.is_floating_point:
            lab = labels.detach().cpu().numpy()
        elif labels.dtype == torch.bool or labels.dtype.is_complex:
            raise InputError(f"{where}labels must be integers, got dtype {labels.dtype}")
        else:
            lab = labels.detach().to("cpu", torch.int64).numpy()
    else:
        lab = np.asarray(labels)
    if lab.ndim != 1:
        raise InputError(f"{where}labels must be 1-dimensional (one per sample), got shape {lab.shape}")
    if lab.shape[0] != B:
        raise InputError(f"{where}labels have {lab.shape[0]} entries for {B} samples (one label per sample)")
    if lab.dtype.kind == "b" or lab.dtype.kind not in "iuf":
        raise InputError(f"{where}labels must be integers, got dtype {lab.dtype}")
    if lab.dtype.kind == "f":
        if not np.all(np.isfinite(lab)) or not np.all(lab == np.round(lab)):
            bad = lab[~(np.isfinite(lab) & (lab == np.round(lab)))][0]
            raise InputError(f"{where}labels must be integers, got {bad!r}")
        if B and np.max(np.abs(lab)) > 2 ** 53:
            raise InputError(f"{where}labels must be integers below 2^53, got {np.max(np.abs(lab)):g}")
    y = lab.astype(np.int64, copy=False)
    if B:
        lo, hi = int(y.min()), int(y.max())
        if lo < 0:
            raise InputError(f"{where}labels must be >= 0 (class indices 0..K-1), got {lo}")
        if K is not None and hi >= K:
            raise InputError(f"{where}labels must be < K = {K} (class indices 0..K-1), got {hi}")
    if torch_in:
        torch = _torch()
        return torch.from_numpy(np.ascontiguousarray(y)).to(X.device)
    return y


def _nonfinite(X, where: str, offset: int) -> None:
    """InputError naming the first non-finite entry (called only when a chunk sum is not finite)."""
    if _is_torch(X):
        torch = _torch()
        bad = (~torch.isfinite(X)).nonzero()
        if bad.shape[0] == 0:
            return
        i, j = (int(v) for v in bad[0])
        val = float(X[i, j])
    else:
        bad = np.argwhere(~np.isfinite(X))
        if bad.size == 0:
            return
        i, j = (int(v) for v in bad[0])
        val = float(X[i, j])
    raise InputError(f"{where}features must be finite: sample {offset + i}, coordinate {j} is {val}")


# ---------------------------------------------------------------------------------------------
# Pass 1: class sums and counts
# ---------------------------------------------------------------------------------------------

class ClassMeans:
    """Pass 1: per-class sums (K x d) and counts, the sum of squared feature norms and the smallest entry.

    ``update(features, labels, layout="nd")`` takes a chunk: ``features`` B x d ("nd", rows are
    samples) or d x B ("dn"), a numpy array or a torch tensor (any device), ``labels`` (B,) integers.
    The state lives where the first chunk lives (numpy, or torch on that device) in ``dtype``
    (float64 by default). ``num_classes`` (K) is fixed when given, else it grows with the largest
    label seen (``max_classes`` caps it before anything is allocated).
    """

    def __init__(self, num_classes: int | None = None, dim: int | None = None, *, dtype: str = "float64",
                 max_classes: int | None = None, where: str = ""):
        if dtype not in DTYPES:
            raise InputError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        for name, v in (("num_classes", num_classes), ("dim", dim), ("max_classes", max_classes)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise InputError(f"{name} must be an integer >= 1, got {v!r}")
        self.K = None if num_classes is None else int(num_classes)
        self.fixed_K = num_classes is not None
        self.d = None if dim is None else int(dim)
        self.dtype = dtype
        self.max_classes = max_classes
        self.where = where
        self.sums = None
        self.counts = None
        self.N = 0
        self.sq_sum = 0.0
        self.min_value = math.inf
        self.torch_device = None

    # state helpers -----------------------------------------------------------------------------
    def _alloc(self, K: int, d: int, like) -> None:
        if self.max_classes is not None and K > self.max_classes:
            raise InputError(f"{self.where}labels: class index {K - 1} needs K = {K} classes, above the "
                             f"limit of {self.max_classes}")
        check_state_budget(K, d, what=f"{self.where}labels" if not self.fixed_K else f"{self.where}features")
        if _is_torch(like):
            torch = _torch()
            self.torch_device = like.device
            dt = torch.float64 if self.dtype == "float64" else torch.float32
            sums = torch.zeros((K, d), dtype=dt, device=like.device)
            counts = torch.zeros(K, dtype=torch.int64, device=like.device)
            if self.sums is not None:
                sums[: self.sums.shape[0]] = self.sums
                counts[: self.counts.shape[0]] = self.counts
        else:
            dt = np.float64 if self.dtype == "float64" else np.float32
            sums = np.zeros((K, d), dtype=dt)
            counts = np.zeros(K, dtype=np.int64)
            if self.sums is not None:
                sums[: self.sums.shape[0]] = self.sums
                counts[: self.counts.shape[0]] = self.counts
        self.sums, self.counts, self.K = sums, counts, K

    def _convert(self, X):
        """Bring a chunk to the state's library/device/dtype."""
        if self.torch_device is not None:
            torch = _torch()
            dt = torch.float64 if self.dtype == "float64" else torch.float32
            if not _is_torch(X):
                X = torch.from_numpy(np.ascontiguousarray(X))
            return X.to(self.torch_device, dt)
        if _is_torch(X):
            X = X.detach().cpu().numpy()
        return np.asarray(X, dtype=np.float64 if self.dtype == "float64" else np.float32)

    def update(self, features, labels, layout: str = "nd") -> "ClassMeans":
        X, y = _chunk(features, labels, layout, self.d, self.K if self.fixed_K else None, self.where)
        B, d = int(X.shape[0]), int(X.shape[1])
        if self.d is None:
            self.d = d
        if B == 0:
            return self
        first = self.sums is None
        if first and self.fixed_K:
            self._alloc(self.K, d, X)
        if self.torch_device is None and _is_torch(X) and not first:
            pass  # numpy state, torch chunk: converted below
        Xs = self._convert(X)
        if self.torch_device is not None:
            torch = _torch()
            y = y.to(self.torch_device) if _is_torch(y) else torch.from_numpy(y).to(self.torch_device)
            hi = int(y.max())
            if first or hi >= self.K:
                self._alloc(max(hi + 1, self.K or 0), d, Xs)
            sq = float(torch.sum(Xs * Xs))
            if not math.isfinite(sq):
                _nonfinite(Xs, self.where, self.N)
                raise InputError(f"{self.where}features: the squared norms overflow (entries above ~1e154)")
            _check_underflow(float(torch.max(torch.abs(Xs))) if Xs.numel() else 0.0, self.where)
            self.sums.index_add_(0, y, Xs)
            self.counts += torch.bincount(y, minlength=self.K)
            self.min_value = min(self.min_value, float(Xs.min()))
        else:
            if _is_torch(y):
                y = y.cpu().numpy()
            hi = int(y.max())
            if first or hi >= self.K:
                self._alloc(max(hi + 1, self.K or 0), d, Xs)
            sq = float(np.einsum("ij,ij->", Xs, Xs))
            if not math.isfinite(sq):
                _nonfinite(Xs, self.where, self.N)
                raise InputError(f"{self.where}features: the squared norms overflow (entries above ~1e154)")
            _check_underflow(float(np.max(np.abs(Xs))) if Xs.size else 0.0, self.where)
            _add_by_class(self.sums, Xs, y)
            self.counts += np.bincount(y, minlength=self.K)
            self.min_value = min(self.min_value, float(Xs.min()))
        self.sq_sum += sq
        self.N += B
        return self

    # results -----------------------------------------------------------------------------------
    def counts_numpy(self) -> np.ndarray:
        if self.counts is None:
            raise InputError(f"{self.where}features: no samples were given")
        c = self.counts
        return c.cpu().numpy().astype(np.int64) if _is_torch(c) else np.asarray(c, dtype=np.int64)

    def check_complete(self) -> np.ndarray:
        """Counts, after checking that there is a sample and that every class 0..K-1 has one."""
        if self.N == 0 or self.counts is None:
            raise InputError(f"{self.where}features: no samples were given (N = 0)")
        counts = self.counts_numpy()
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise InputError(f"{self.where}labels: class {int(empty[0])} has no sample ({empty.size} of the K = "
                             f"{counts.size} classes 0..{counts.size - 1} are empty; every class needs a sample)")
        return counts

    def means(self):
        """Class means (K x d) in the state's library and dtype."""
        counts = self.check_complete()
        if self.torch_device is not None:
            torch = _torch()
            return self.sums / torch.from_numpy(counts).to(self.sums.device, self.sums.dtype)[:, None]
        return self.sums / counts[:, None]

    @property
    def rms(self) -> float:
        """Root-mean-square feature norm sqrt((1/N) sum_i ||h_i||^2): the scale of zero tests."""
        return math.sqrt(self.sq_sum / self.N) if self.N else 0.0


def _add_by_class(sums: np.ndarray, X: np.ndarray, y: np.ndarray) -> None:
    """sums[c] += sum of the rows of X with label c (sort + reduceat: O(B d), no B x K one-hot)."""
    if y.size == 0:
        return
    if y.size > 1 and np.any(y[1:] < y[:-1]):
        order = np.argsort(y, kind="stable")
        y = y[order]
        X = X[order]
    starts = np.flatnonzero(np.r_[True, y[1:] != y[:-1]])
    sums[y[starts]] += np.add.reduceat(X, starts, axis=0)


# ---------------------------------------------------------------------------------------------
# One pass: shifted sums and the within-class scatter about per-class shifts (docs/measure.md)
# ---------------------------------------------------------------------------------------------

#: Rows summed by plain float64 BLAS/numpy accumulation before the block is added to the Kahan-compensated
#: totals (docs/measure.md, "One pass": the block's rounding is at most ~BLOCK_ROWS u relative, the
#: compensated sum of blocks adds O(u)). A Kahan step on d x d per chunk would cost as much as the chunk's
#: products at d = 512 (measured: 10 ms against 16 ms for the B = 2048 syrk).
BLOCK_ROWS = 32768

#: Largest d x d scatter (bytes of one float64 matrix) the one-pass accumulator keeps; it holds four
#: (the sum, its compensation, the block sum and a buffer). Above it, measure falls back to two
#: passes (the K x K projection of docs/metrics.md when d > K): docs/measure.md, "One pass".
ONE_PASS_MAX_SCATTER_BYTES = 64_000_000


#: Bytes all live one-pass accumulators may hold in d x d matrices together (one per worker + the total).
ONE_PASS_TOTAL_BYTES = 1_000_000_000


def one_pass_bytes(d: int, K: int = 0) -> float:
    """Bytes of one one-pass accumulator: four d x d matrices and four K x d (shifts, sums, compensation, block)."""
    return 8.0 * (4.0 * d * d + 4.0 * K * d)


def one_pass_fits(d: int, copies: int = 1, K: int = 0) -> bool:
    """Whether ``copies`` one-pass accumulators for K classes in dimension d fit the budgets."""
    return (8.0 * d * d <= ONE_PASS_MAX_SCATTER_BYTES
            and one_pass_bytes(d, K) * max(1, copies) <= ONE_PASS_TOTAL_BYTES)


def _kahan_add(s: np.ndarray, c: np.ndarray, x: np.ndarray, buf: np.ndarray | None = None) -> None:
    """s + x with Kahan's compensation c, in place (true sum ~ s - c). ``x`` is overwritten."""
    np.subtract(x, c, out=x)          # y = x - c
    t = np.add(s, x, out=buf)          # t = s + y
    np.subtract(t, s, out=c)
    np.subtract(c, x, out=c)          # c = (t - s) - y
    s[...] = t


class ClassStats:
    """One pass over the samples: counts, the within-class scatter and the class sums about per-class shifts.

    The shifted-data algorithm (docs/measure.md, "One pass"): for each class c a shift k_c (the mean of
    the class's samples in the first chunk where it appears, or a given row) is fixed once; then, with
    a_i = h_i - k_{y_i},

    - s_c = sum_{y_i = c} a_i (K x d), q_c = sum_{y_i = c} ||a_i||^2, T = sum_i a_i a_i^T (d x d),

    accumulated in float64, each chunk's contribution added with Kahan compensation. At the end,
    with d_c = s_c / n_c: mu_c = k_c + d_c, n_c sigma_c^2 = q_c - n_c ||d_c||^2 and
    N Sigma_W = T - sum_c n_c d_c d_c^T. The subtraction loses at most a factor
    kappa = 1 + sum_c n_c ||d_c||^2 / (N tr Sigma_W) <= 1 + max_c n_c / m_c (m_c: samples of class c in
    its shift chunk) in relative accuracy, whatever the norm of the means (the naive one-pass formula
    sum h h^T - sum n_c mu_c mu_c^T loses ||mu||^2 / sigma^2 instead).

    numpy, float64, rows are samples (``layout`` "dn" transposes). ``shift`` (K x d, optional) fixes
    every shift in advance, so accumulators of disjoint parts of the data can be merged exactly by
    addition (:meth:`merge`). ``scatter=False`` keeps no d x d matrix (only sums, counts, q).
    """

    def __init__(self, num_classes: int, dim: int, *, shift: np.ndarray | None = None, scatter: bool = True,
                 where: str = ""):
        for name, v in (("num_classes", num_classes), ("dim", dim)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise InputError(f"{name} must be an integer >= 1, got {v!r}")
        K, d = int(num_classes), int(dim)
        check_state_budget(K, d, what=f"{where}features")
        self.K, self.d, self.fixed_K, self.where = K, d, True, where
        self.dtype = "float64"
        self.torch_device = None
        self.counts = np.zeros(K, dtype=np.int64)
        if shift is None:
            self.shift = np.zeros((K, d))
            self.has_shift = np.zeros(K, dtype=bool)
        else:
            sh = np.asarray(shift, dtype=np.float64)
            if sh.shape != (K, d) or not np.isfinite(sh).all():
                raise InputError(f"{where}shift must be a finite K x d = {K} x {d} array, got shape {sh.shape}")
            self.shift = sh
            self.has_shift = np.ones(K, dtype=bool)
        self.s = np.zeros((K, d))
        self.s_c = np.zeros((K, d))
        self.q = np.zeros(K)
        self.q_c = np.zeros(K)
        self.scatter = bool(scatter)
        if self.scatter:
            if 8.0 * d * d > ONE_PASS_MAX_SCATTER_BYTES:
                raise InputError(f"{where}features: the one-pass d x d scatter at d = {d} needs "
                                 f"{8.0 * d * d / 1e6:.3g} MB per matrix, above {ONE_PASS_MAX_SCATTER_BYTES / 1e6:.3g} "
                                 "MB (use the two-pass ClassMeans / ClassScatter)")
            self.T = np.zeros((d, d), order="F")
            self.T_c = np.zeros((d, d), order="F")
            self._buf = np.zeros((d, d), order="F")
            self._Tb = np.zeros((d, d), order="F")
        else:
            self.T = self.T_c = self._buf = self._Tb = None
        self._sb = np.zeros((K, d))
        self._qb = np.zeros(K)
        self._block_rows = 0
        self._A = None
        self.N = 0
        self.min_value = math.inf
        self.max_value = -math.inf

    # ------------------------------------------------------------------------------------------
    def update(self, features, labels, layout: str = "nd") -> "ClassStats":
        """Add a chunk (B x d, or d x B with layout "dn"; numpy or torch, any real dtype)."""
        X, y = _chunk(features, labels, layout, self.d, self.K, self.where)
        if _is_torch(X):
            X = X.detach().cpu().numpy()
        if _is_torch(y):
            y = y.cpu().numpy()
        B = int(X.shape[0])
        if B == 0:
            return self
        if X.dtype.kind != "f":
            X = X.astype(np.float64)
        lo, hi = float(X.min()), float(X.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            _nonfinite(X, self.where, self.N)
        amax = max(abs(lo), abs(hi))
        if amax > SQUARE_MAX:
            raise InputError(f"{self.where}features: entries up to {amax:.3g}: the squared norms overflow (accepted: "
                             f"|entries| <= {SQUARE_MAX:g}); rescale the features (the metrics do not depend on their "
                             "scale)")
        _check_underflow(amax, self.where)
        import scipy.sparse as sparse

        cls, inv, m = np.unique(y, return_inverse=True, return_counts=True)
        # the class indicator (classes of this chunk x B): I @ A sums the rows of A by class in O(B d), no sort
        ind = sparse.csc_matrix((np.ones(B), inv.astype(np.int64), np.arange(B + 1)), shape=(cls.size, B))
        new = ~self.has_shift[cls]
        if new.any():
            sums = ind @ np.asarray(X, dtype=np.float64)
            self.shift[cls[new]] = sums[new] / m[new, None]
            self.has_shift[cls[new]] = True
        if self._A is None or self._A.shape[0] < B:
            self._A = np.empty((B, self.d))  # one buffer of shifted rows, reused across chunks
        A = self._A[:B]
        np.take(self.shift, y, axis=0, out=A)
        np.subtract(X, A, out=A)  # a_i = h_i - k_{y_i} in float64 (float32 input converted here, chunk by chunk)
        rowsq = np.einsum("ij,ij->i", A, A)
        self._qb[cls] += np.bincount(inv, weights=rowsq, minlength=cls.size)
        self._sb[cls] += ind @ A
        self.counts[cls] += m
        if self.scatter:
            from scipy.linalg import blas

            # A.T is Fortran-contiguous (d x B): syrk (trans=0) adds the upper triangle of A^T A in place
            self._Tb = blas.dsyrk(1.0, A.T, beta=1.0, c=self._Tb, trans=0, lower=0, overwrite_c=1)
        self.min_value = min(self.min_value, lo)
        self.max_value = max(self.max_value, hi)
        self.N += B
        self._block_rows += B
        if self._block_rows >= BLOCK_ROWS:
            self._flush()
        return self

    def _flush(self) -> None:
        """Add the block accumulators to the compensated totals (Kahan) and clear them."""
        if self._block_rows == 0:
            return
        _kahan_add(self.s, self.s_c, self._sb)
        _kahan_add(self.q, self.q_c, self._qb)
        self._sb = np.zeros((self.K, self.d))
        self._qb = np.zeros(self.K)
        if self.scatter:
            _kahan_add(self.T, self.T_c, self._Tb, self._buf)
            self._Tb[...] = 0.0
        self._block_rows = 0

    def merge(self, other: "ClassStats") -> "ClassStats":
        """Add the statistics of disjoint samples (exact addition when the shifts agree; else re-shifted)."""
        if not isinstance(other, ClassStats) or (other.K, other.d) != (self.K, self.d):
            raise TypeError("merge needs a ClassStats of the same K and d")
        if other.N == 0:
            return self
        self._flush()
        other._flush()
        if self.scatter != other.scatter:
            raise TypeError("merge needs accumulators that both keep (or both omit) the scatter")
        o_s = other.s - other.s_c
        o_q = other.q - other.q_c
        o_T = (other.T - other.T_c) if self.scatter else None
        seen = other.counts > 0
        adopt = seen & ~self.has_shift
        self.shift[adopt] = other.shift[adopt]
        self.has_shift[adopt] = True
        both = seen & ~adopt
        delta = np.zeros((self.K, self.d))
        delta[both] = other.shift[both] - self.shift[both]  # a about self's shift = a_other + delta
        if np.any(delta != 0.0):
            n = other.counts.astype(np.float64)
            if self.scatter:
                U = np.triu(o_T) + np.triu(o_T, 1).T
                X1 = delta.T @ o_s
                U += X1 + X1.T + (delta * n[:, None]).T @ delta
                o_T = np.triu(U)
            o_q = o_q + 2.0 * np.einsum("ij,ij->i", delta, o_s) + n * np.einsum("ij,ij->i", delta, delta)
            o_s = o_s + n[:, None] * delta
        _kahan_add(self.s, self.s_c, o_s.copy())
        _kahan_add(self.q, self.q_c, o_q.copy())
        if self.scatter:
            _kahan_add(self.T, self.T_c, np.asfortranarray(o_T), self._buf)
        self.counts += other.counts
        self.N += other.N
        self.min_value = min(self.min_value, other.min_value)
        self.max_value = max(self.max_value, other.max_value)
        return self

    # results (the ClassMeans interface used by collapse_metrics) --------------------------------
    def counts_numpy(self) -> np.ndarray:
        return self.counts.copy()

    def check_complete(self) -> np.ndarray:
        if self.N == 0:
            raise InputError(f"{self.where}features: no samples were given (N = 0)")
        empty = np.flatnonzero(self.counts == 0)
        if empty.size:
            raise InputError(f"{self.where}labels: class {int(empty[0])} has no sample ({empty.size} of the K = "
                             f"{self.K} classes 0..{self.K - 1} are empty; every class needs a sample)")
        return self.counts.copy()

    def offsets(self) -> np.ndarray:
        """d_c = s_c / n_c: the class means relative to the shifts (K x d)."""
        self._flush()
        counts = self.check_complete()
        return (self.s - self.s_c) / counts[:, None]

    def means(self) -> np.ndarray:
        return self.shift + self.offsets()

    @property
    def sq_sum(self) -> float:
        """sum_i ||h_i||^2 = sum_c (q_c + 2 <k_c, s_c> + n_c ||k_c||^2) (a scale for zero tests only)."""
        self._flush()
        s = self.s - self.s_c
        v = float(np.sum(self.q - self.q_c) + 2.0 * np.einsum("ij,ij->", self.shift, s)
                  + np.dot(self.counts, np.einsum("ij,ij->i", self.shift, self.shift)))
        return max(v, 0.0)

    @property
    def rms(self) -> float:
        return math.sqrt(self.sq_sum / self.N) if self.N else 0.0

    def within(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(n_c sigma_c^2 (K,), N Sigma_W (d x d) or None without the scatter)."""
        counts = self.check_complete()
        D = self.offsets()  # flushes the block
        nd2 = counts * np.einsum("ij,ij->i", D, D)
        class_sq = np.maximum(self.q - self.q_c - nd2, 0.0)
        if not self.scatter:
            return class_sq, None
        T = self.T - self.T_c
        T = np.triu(T) + np.triu(T, 1).T
        Dn = D * np.sqrt(counts.astype(np.float64))[:, None]
        S = T - Dn.T @ Dn
        return class_sq, (S + S.T) / 2.0

    def numpy_state(self, weights=None, disagree: int = 0) -> dict:
        """The state :func:`collapse_metrics` reads (mode "sigma": N Sigma_W when d <= K; else its K x K
        projection M^T (N Sigma_W) M, "projected")."""
        if not self.scatter:
            raise InputError(f"{self.where}features: this one-pass accumulator kept no scatter (scatter=False)")
        mu = self.means()
        mu_G = mu.mean(axis=0)
        Mr = mu - mu_G
        class_sq, S = self.within()
        mode = "sigma" if self.d <= self.K else "projected"
        if mode == "projected":
            S = Mr @ S @ Mr.T
            S = (S + S.T) / 2.0
        return {"S": S, "class_sq": class_sq, "Mr": Mr, "mu_G": mu_G, "mode": mode, "N": self.N,
                "disagree": int(disagree), "W": weights}


def check_weights(weights, bias, K: int, d: int, where: str = ""):
    """(W as K x d float64, b as (K,) float64 or None), validated as in :class:`ClassScatter`."""
    if bias is not None and weights is None:
        raise InputError(f"{where}bias is given without weights: the bias enters only NC4, which needs W")
    if weights is None:
        return None, None
    W = _as_matrix(weights, "weights")
    if W.shape != (K, d):
        hint = " (did you pass W^T, d x K? transpose it)" if W.shape == (d, K) else ""
        raise InputError(f"{where}weights must be K x d = {K} x {d} (one row per class), got "
                         f"{W.shape[0]} x {W.shape[1]}{hint}")
    amax = float(np.max(np.abs(W))) if W.size else 0.0
    if amax > SQUARE_MAX:
        raise InputError(f"weights (--weights): entries up to {amax:.3g} overflow when squared (accepted: "
                         f"|entries| <= {SQUARE_MAX:g}); rescale W (NC3 does not depend on its scale)")
    b = None
    if bias is not None:
        b = _as_vector(bias, "bias")
        if b.shape != (K,):
            raise InputError(f"{where}bias must have K = {K} entries (one per class), got shape {b.shape}")
    return W, b


class NC4Pass:
    """The second pass of NC4 (it needs the final class means): counts argmax (W h + b) != nearest mean.

    ``stats`` is a finished :class:`ClassStats` (or any object with ``means()``)."""

    def __init__(self, stats, weights, bias=None, *, tile_bytes: float = TILE_BYTES, loss: str | None = None):
        if loss not in (None, "ce", "mse"):
            raise InputError(f"loss must be None, 'ce' or 'mse', got {loss!r}")
        self.loss = loss
        self.loss_sum = 0.0
        counts = stats.check_complete()
        self.K, self.d = int(counts.size), int(stats.d)
        self.where = stats.where
        self.W, self.b = check_weights(weights, bias, self.K, self.d, self.where)
        if self.W is None:
            raise InputError(f"{self.where}NC4 needs the classifier weights")
        mu = np.asarray(stats.means(), dtype=np.float64)
        self.mu_G = mu.mean(axis=0)
        self.Mr = mu - self.mu_G
        self.mr_sq = np.einsum("ij,ij->i", self.Mr, self.Mr)
        self.tile_bytes = float(tile_bytes)
        self.N = 0
        self.disagree = 0

    def update(self, features, labels, layout: str = "nd") -> "NC4Pass":
        X, y = _chunk(features, labels, layout, self.d, self.K, self.where)
        if _is_torch(X):
            X = X.detach().cpu().numpy()
        if _is_torch(y):
            y = y.cpu().numpy()
        X = np.asarray(X, dtype=np.float64)
        step = max(1, int(self.tile_bytes // (8 * 3 * self.K)))
        for s in range(0, int(X.shape[0]), step):
            Xs = X[s: s + step]
            logits = Xs @ self.W.T
            if self.b is not None:
                logits += self.b
            d2 = self.mr_sq - 2.0 * ((Xs - self.mu_G) @ self.Mr.T)
            self.disagree += int(np.count_nonzero(np.argmax(logits, axis=1) != np.argmin(d2, axis=1)))
            if self.loss is not None:
                ys = y[s: s + step]
                rows = np.arange(ys.size)
                if self.loss == "ce":  # log sum exp(z) - z_y, shifted by the row maximum
                    zmax = logits.max(axis=1)
                    lse = zmax + np.log(np.exp(logits - zmax[:, None]).sum(axis=1))
                    self.loss_sum += float(np.sum(lse - logits[rows, ys]))
                else:  # (1/2) ||z - e_y||^2
                    logits[rows, ys] -= 1.0
                    self.loss_sum += 0.5 * float(np.einsum("ij,ij->", logits, logits))
        self.N += int(X.shape[0])
        return self

    def merge(self, other: "NC4Pass") -> "NC4Pass":
        self.N += other.N
        self.disagree += other.disagree
        self.loss_sum += other.loss_sum
        return self


# ---------------------------------------------------------------------------------------------
# Pass 2: within-class scatter, class variances, NC4
# ---------------------------------------------------------------------------------------------

class ClassScatter:
    """Pass 2 over the same samples: scatter about the pass-1 class means.

    Accumulates the per-class sums of squared deviations ``n_c sigma_c^2``; the within-class scatter
    N Sigma_W (d x d) when d <= K, else its projection Q = M^T (N Sigma_W) M (K x K) onto the centred
    means (all NC1 needs, docs/metrics.md); and, with ``weights`` (K x d) and optional ``bias`` (K),
    the number of samples where argmax_c (W h + b)_c differs from the nearest class mean.
    """

    def __init__(self, means: ClassMeans, weights=None, bias=None, *, tile_bytes: float = TILE_BYTES):
        if not isinstance(means, ClassMeans):
            raise TypeError(f"means must be a ClassMeans accumulator (pass 1), got {type(means).__name__}")
        self.pass1 = means
        self.where = means.where
        counts = means.check_complete()
        self.K, self.d = int(counts.size), int(means.d)
        mu = means.means()  # a new K x d array, centred in place below (one K x d copy besides the sums)
        self.torch_device = means.torch_device
        self.mu_G = mu.mean(dim=0) if self.torch_device is not None else mu.mean(axis=0)
        mu -= self.mu_G
        self.Mr = mu  # centred means as rows (K x d) = M^T of docs/metrics.md
        self.mode = "sigma" if self.d <= self.K else "projected"
        n = min(self.d, self.K)
        self.S = self._zeros((n, n))
        self.class_sq = self._zeros((self.K,))
        self.N = 0
        self.disagree = 0
        self.tile_bytes = float(tile_bytes)
        self.W = self.b = None
        if bias is not None and weights is None:
            raise InputError(f"{self.where}bias is given without weights: the bias enters only NC4, which needs W")
        if weights is not None:
            W = _as_matrix(weights, "weights")
            if W.shape != (self.K, self.d):
                hint = " (did you pass W^T, d x K? transpose it)" if W.shape == (self.d, self.K) else ""
                raise InputError(f"{self.where}weights must be K x d = {self.K} x {self.d} (one row per class), got "
                                 f"{W.shape[0]} x {W.shape[1]}{hint}")
            amax = float(np.max(np.abs(W))) if W.size else 0.0
            if amax > SQUARE_MAX:  # squared norms of W (NC3) would overflow: refuse, as for the features
                raise InputError(f"weights (--weights): entries up to {amax:.3g} overflow when squared (accepted: "
                                 f"|entries| <= {SQUARE_MAX:g}); rescale W (NC3 does not depend on its scale)")
            self.W_np = W
            self.W = self._to_state(W)
            if bias is not None:
                b = _as_vector(bias, "bias")
                if b.shape != (self.K,):
                    raise InputError(f"{self.where}bias must have K = {self.K} entries (one per class), got shape "
                                     f"{b.shape}")
                self.b = self._to_state(b)
            self.mr_sq = (self.Mr * self.Mr).sum(1) if self.torch_device is not None else \
                np.einsum("ij,ij->i", self.Mr, self.Mr)

    def _zeros(self, shape):
        if self.torch_device is not None:
            torch = _torch()
            return torch.zeros(shape, dtype=self.pass1.sums.dtype, device=self.torch_device)
        return np.zeros(shape, dtype=self.pass1.sums.dtype, order="F")

    def _to_state(self, A: np.ndarray):
        if self.torch_device is not None:
            torch = _torch()
            return torch.from_numpy(np.ascontiguousarray(A)).to(self.torch_device, self.pass1.sums.dtype)
        return A.astype(self.pass1.sums.dtype, copy=False)

    def update(self, features, labels, layout: str = "nd") -> "ClassScatter":
        X, y = _chunk(features, labels, layout, self.d, self.K, self.where)
        B = int(X.shape[0])
        if B == 0:
            return self
        X = self.pass1._convert(X)
        if self.torch_device is not None:
            torch = _torch()
            y = y.to(self.torch_device) if _is_torch(y) else torch.from_numpy(y).to(self.torch_device)
            dev = X - (self.Mr[y] + self.mu_G)  # mu_c = M_c + mu_G
            if not bool(torch.isfinite(dev).all()):
                _nonfinite(X, self.where, self.N)
            self.class_sq.index_add_(0, y, (dev * dev).sum(1))
            if self.mode == "sigma":
                self.S += dev.T @ dev
            else:
                P = dev @ self.Mr.T
                self.S += P.T @ P
            if self.W is not None:
                self.disagree += self._nc4_chunk(X, y)
        else:
            if _is_torch(y):
                y = y.cpu().numpy()
            dev = self.Mr[y]
            dev += self.mu_G  # mu_c = M_c + mu_G (no K x d copy of the uncentred means is kept)
            np.subtract(X, dev, out=dev)
            sq = np.einsum("ij,ij->i", dev, dev)
            if not np.isfinite(sq).all():
                _nonfinite(X, self.where, self.N)
            self.class_sq += np.bincount(y, weights=sq, minlength=self.K)
            self._syrk(dev if self.mode == "sigma" else dev @ self.Mr.T)
            if self.W is not None:
                self.disagree += self._nc4_chunk(X, y)
        self.N += B
        return self

    def _syrk(self, A: np.ndarray) -> None:
        """S += A^T A, upper triangle only (BLAS syrk: half the flops of a GEMM; symmetrised in numpy_state)."""
        from scipy.linalg import blas

        f = blas.dsyrk if self.S.dtype == np.float64 else blas.ssyrk
        A = np.ascontiguousarray(A, dtype=self.S.dtype)
        # A.T is Fortran-contiguous (n x B): syrk with trans=0 computes A.T @ A without copying A
        self.S = f(1.0, A.T, beta=1.0, c=self.S, trans=0, lower=0, overwrite_c=1)

    def _nc4_chunk(self, X, y) -> int:
        """Samples of the chunk where argmax (W h + b) != argmin ||h - mu_c|| (sub-chunks of B_s x K)."""
        K = self.K
        step = max(1, int(self.tile_bytes // (8 * 3 * K)))
        out = 0
        torch_state = self.torch_device is not None
        for s in range(0, int(X.shape[0]), step):
            Xs = X[s: s + step]
            Xc = Xs - self.mu_G
            logits = Xs @ self.W.T
            if self.b is not None:
                logits = logits + self.b
            # ||h - mu_c||^2 = ||h - mu_G||^2 - 2 <h - mu_G, M_c> + ||M_c||^2: the first term is common to every c
            d2 = self.mr_sq - 2.0 * (Xc @ self.Mr.T)
            if torch_state:
                out += int((logits.argmax(1) != d2.argmin(1)).sum())
            else:
                out += int(np.count_nonzero(np.argmax(logits, axis=1) != np.argmin(d2, axis=1)))
        return out

    def numpy_state(self) -> dict:
        def cv(a):
            return a.detach().cpu().numpy().astype(np.float64) if _is_torch(a) else np.asarray(a, dtype=np.float64)

        if self.N != self.pass1.N:
            raise InputError(f"{self.where}features: pass 2 saw {self.N} samples, pass 1 saw {self.pass1.N} (both "
                             "passes must read the same samples)")
        S = cv(self.S)
        if self.torch_device is None:  # syrk filled the upper triangle
            S = np.triu(S) + np.triu(S, 1).T
        return {"S": S, "class_sq": cv(self.class_sq), "Mr": cv(self.Mr), "mu_G": cv(self.mu_G),
                "mode": self.mode, "N": self.N, "disagree": self.disagree,
                "W": self.W_np if self.W is not None else None}


def _as_matrix(A, name: str) -> np.ndarray:
    if _is_torch(A):
        A = A.detach().cpu().numpy()
    A = np.asarray(A)
    if A.dtype.kind not in "fiu" or A.dtype.kind == "b":
        raise InputError(f"{name} must be a real numeric matrix, got dtype {A.dtype}")
    if A.ndim != 2:
        raise InputError(f"{name} must be 2-dimensional (K x d), got shape {A.shape}")
    A = A.astype(np.float64)
    if not np.isfinite(A).all():
        raise InputError(f"{name} must contain only finite numbers (found NaN or inf)")
    return A


def _as_vector(v, name: str) -> np.ndarray:
    if _is_torch(v):
        v = v.detach().cpu().numpy()
    v = np.asarray(v)
    if v.dtype.kind not in "fiu" or v.dtype.kind == "b":
        raise InputError(f"{name} must be a real numeric vector, got dtype {v.dtype}")
    if v.ndim != 1:
        raise InputError(f"{name} must be 1-dimensional (K,), got shape {v.shape}")
    v = v.astype(np.float64)
    if not np.isfinite(v).all():
        raise InputError(f"{name} must contain only finite numbers (found NaN or inf)")
    return v


# ---------------------------------------------------------------------------------------------
# Predicted Grams (structured, so K = 50 000 needs no K x K matrix)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PredictedGram:
    """The centred Gram of predicted class means: ``a I + b 11^T`` (``matrix=None``) or a dense K x K matrix.

    The simplex ETF and the orthogonal frame both have the centred Gram J_K = I - 11^T/K (a = 1,
    b = -1/K): centring an orthogonal frame gives a simplex ETF, which is why the distance to the
    OF is measured on the uncentred Gram (docs/metrics.md).
    """

    name: str
    a: float = 1.0
    b: float = 0.0
    matrix: np.ndarray | None = None

    @staticmethod
    def centred_etf(name: str = "simplex-etf") -> "PredictedGram":
        return PredictedGram(name, 1.0, None)  # b filled by K in tiles

    def rows(self, i0: int, i1: int, K: int) -> np.ndarray:
        if self.matrix is not None:
            return np.asarray(self.matrix[i0:i1], dtype=np.float64)
        b = -1.0 / K if self.b is None else self.b
        P = np.full((i1 - i0, K), b)
        P[np.arange(i1 - i0), np.arange(i0, i1)] += self.a
        return P

    def fro_norm(self, K: int) -> float:
        if self.matrix is not None:
            return float(np.linalg.norm(self.matrix))
        b = -1.0 / K if self.b is None else self.b
        # ||a I + b 11^T||_F^2 = K (a + b)^2 + K (K - 1) b^2
        return math.sqrt(K * (self.a + b) ** 2 + K * (K - 1) * b * b)


# ---------------------------------------------------------------------------------------------
# The metrics
# ---------------------------------------------------------------------------------------------

@dataclass
class CollapseMetrics:
    """Every metric of docs/metrics.md (None where undefined, with the reason in ``reasons``)."""

    metrics: dict
    reasons: dict
    classes: int
    samples: int
    dim: int
    counts: list
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"metrics": dict(self.metrics), "reasons": dict(self.reasons), "classes": self.classes,
                "samples": self.samples, "dim": self.dim, "counts": list(self.counts), **self.extra}


def collapse_metrics(means: ClassMeans, scatter: ClassScatter, *, predicted: PredictedGram | None = None,
                     predicted_reason: str | None = None, tile_bytes: float | None = None,
                     ood_mean: np.ndarray | None = None) -> CollapseMetrics:
    """Every metric of docs/metrics.md from the two passes (numpy float64 from here on).

    ``predicted`` is the centred Gram of the predicted class means (``gram_distance_predicted`` is
    None without it, with ``predicted_reason`` or "no prediction requested" as the reason).
    """
    if isinstance(means, ClassStats):
        if scatter is not None and not isinstance(scatter, NC4Pass):
            raise TypeError("with a one-pass ClassStats, scatter must be None or its NC4Pass (second pass of NC4)")
        if scatter is not None and scatter.N != means.N:
            raise InputError(f"{means.where}features: the NC4 pass saw {scatter.N} samples, the first pass saw "
                             f"{means.N} (both passes must read the same samples)")
        default_tile = TILE_BYTES if scatter is None else scatter.tile_bytes
        st = means.numpy_state(None if scatter is None else scatter.W, 0 if scatter is None else scatter.disagree)
    else:
        if not isinstance(scatter, ClassScatter) or scatter.pass1 is not means:
            raise TypeError("scatter must be the ClassScatter built from these ClassMeans")
        default_tile = scatter.tile_bytes
        st = scatter.numpy_state()
    if predicted is not None and not isinstance(predicted, PredictedGram):
        raise TypeError(f"predicted must be a PredictedGram, got {type(predicted).__name__}")
    tile_bytes = default_tile if tile_bytes is None else float(tile_bytes)
    counts = means.check_complete()
    K, d, N = int(counts.size), int(means.d), int(st["N"])
    Mr, mu_G, S = st["Mr"], st["mu_G"], st["S"]
    scale = means.rms
    zero = ZERO_RTOL * scale
    m: dict = {k: None for k in ALL_KEYS}
    why: dict = {}

    sigma2 = st["class_sq"] / counts  # sigma_c^2
    tr_w = float(st["class_sq"].sum()) / N
    r = np.sqrt(np.einsum("ij,ij->i", Mr, Mr))  # centred class-mean norms (no K x d temporary)
    fro_M = float(np.linalg.norm(r))
    tr_b = fro_M ** 2 / K
    zero_between = not (math.sqrt(tr_b) > zero)
    if K == 1:
        reason_b = "a single class (K = 1): the between-class scatter is zero"
    else:
        reason_b = (f"zero between-class scatter: the class means coincide (tr Sigma_B = {tr_b:.3g}, at most "
                    f"({ZERO_RTOL:g} x the feature RMS norm {scale:.3g})^2)")

    # --- NC1 ----------------------------------------------------------------------------------------
    if zero_between:
        why["nc1"] = why["nc1_trace"] = reason_b
    else:
        m["nc1_trace"] = tr_w / tr_b
        if st["mode"] == "sigma":
            SB = (Mr.T @ Mr) / K
            lam, V = np.linalg.eigh((SB + SB.T) / 2)
            keep = lam > PINV_RTOL * lam.max()
            Vk = V[:, keep]
            SW = S / N
            m["nc1"] = float(np.einsum("ij,ij->j", Vk, SW @ Vk) @ (1.0 / lam[keep])) / K
            lam_v, V_v, scale_v = lam, V, 1.0 / K  # nc1_svd: the top K-1 eigenpairs of Sigma_B
        else:
            G = Mr @ Mr.T
            mu_e, U = np.linalg.eigh((G + G.T) / 2)
            keep = mu_e > PINV_RTOL * mu_e.max()
            Uk = U[:, keep]
            m["nc1"] = float(np.einsum("ij,ij->j", Uk, S @ Uk) @ (1.0 / mu_e[keep] ** 2)) / N
            lam_v, V_v, scale_v = mu_e, U, None

    # --- nc1_svd: Sigma_B^+ from its K-1 largest singular values (no relative cutoff) -----------------
    if zero_between:
        why["nc1_svd"] = reason_b
    else:
        r_svd = min(K - 1, d)
        top = np.argsort(lam_v)[::-1][:r_svd]
        if r_svd < 1 or not lam_v[top].min() > PINV_RTOL * lam_v.max():
            why["nc1_svd"] = (f"Sigma_B has numerical rank below min(K-1, d) = {r_svd} (an eigenvalue among the top "
                              f"{r_svd} is at most {PINV_RTOL:g} x the largest): the rank-{r_svd} pseudo-inverse is "
                              "unbounded; nc1 (relative cutoff) is reported")
        elif scale_v is not None:
            Vt = V_v[:, top]
            m["nc1_svd"] = float(np.einsum("ij,ij->j", Vt, (S / N) @ Vt) @ (1.0 / lam_v[top])) / K
        else:
            Ut = V_v[:, top]
            m["nc1_svd"] = float(np.einsum("ij,ij->j", Ut, S @ Ut) @ (1.0 / lam_v[top] ** 2)) / N

    # --- equinorm -------------------------------------------------------------------------------------
    if K == 1:
        why["equinorm"] = "a single class (K = 1): its centred mean is zero"
    elif not r.mean() > zero:
        why["equinorm"] = reason_b
    else:
        m["equinorm"] = float(r.std() / r.mean())

    # --- NC3 -------------------------------------------------------------------------------------------
    W = st["W"]
    if W is None:
        why["nc3"] = why["nc4"] = "no classifier weights given (--weights or the file key 'weights')"
    else:
        nw = float(np.linalg.norm(W))
        if zero_between:
            why["nc3"] = reason_b
        elif not nw > 0.0:
            why["nc3"] = "the classifier W is zero"
        else:
            m["nc3"] = float(np.linalg.norm(W / nw - Mr / fro_M))
        m["nc4"] = st["disagree"] / N
        wn = np.sqrt(np.einsum("ij,ij->i", W, W))
        if zero_between:
            why["duality_cos_mean"] = why["uniform_duality"] = reason_b
        elif not (wn > 0).all() or not (r > zero).all():
            c0 = int(np.flatnonzero(~((wn > 0) & (r > zero)))[0])
            why["duality_cos_mean"] = why["uniform_duality"] = (
                f"class {c0}: its classifier row or its centred mean is zero, so its duality cosine is undefined")
        else:
            cosd = np.einsum("ij,ij->i", W, Mr) / (wn * r)
            m["duality_cos_mean"] = float(cosd.mean())
            if abs(cosd.mean()) > 0.0:
                m["uniform_duality"] = float(cosd.std() / abs(cosd.mean()))
            else:
                why["uniform_duality"] = "the mean duality cosine is zero: its coefficient of variation is undefined"
    if W is None:
        why["duality_cos_mean"] = why["uniform_duality"] = "no classifier weights given (--weights or the file key 'weights')"

    # --- NC5: orthogonality of OOD features to the class means -----------------------------------------
    if ood_mean is None:
        why["nc5"] = why["nc5_ood_uncentred"] = "no out-of-distribution features given (--ood FILE)"
    else:
        o_raw = np.asarray(ood_mean, dtype=np.float64)
        onr = float(np.linalg.norm(o_raw))
        if zero_between:
            why["nc5_ood_uncentred"] = reason_b
        elif not onr > 0 or not (r > zero).all():
            why["nc5_ood_uncentred"] = "the OOD mean is zero or a centred class mean is zero: a cosine is undefined"
        else:
            m["nc5_ood_uncentred"] = float(np.mean(np.abs(Mr @ o_raw) / (r * onr)))
        o = np.asarray(ood_mean, dtype=np.float64) - mu_G
        on = float(np.linalg.norm(o))
        if zero_between:
            why["nc5"] = reason_b
        elif not on > zero:
            why["nc5"] = "the OOD mean coincides with the centre mu_G: its direction is undefined"
        elif not (r > zero).all():
            why["nc5"] = f"the centred mean of class {int(np.flatnonzero(~(r > zero))[0])} is zero: its cosine is undefined"
        else:
            m["nc5"] = float(np.mean(np.abs(Mr @ o) / (r * on)))

    # --- pairwise quantities (tiles of K x K) ---------------------------------------------------------------
    pair = _pair_statistics(Mr, mu_G, r, sigma2, predicted, zero, tile_bytes)
    if K == 1:
        for key in ("cdnv_mean", "cdnv_max", "cdnv_std", "cdnv_min", "equiangularity", "max_equiangularity",
                    "nc2_log_energy", "nc2_log_energy_std", "nc2_uniformity_gap"):
            why[key] = "a single class (K = 1): there are no class pairs"
        why["gram_distance_etf"] = "a single class (K = 1): the simplex ETF needs K >= 2"
    else:
        if pair["cdnv_ok"]:
            m["cdnv_mean"], m["cdnv_max"] = pair["cdnv_mean"], pair["cdnv_max"]
            m["cdnv_std"], m["cdnv_min"] = pair["cdnv_std"], pair["cdnv_min"]
        else:
            why["cdnv_mean"] = why["cdnv_max"] = why["cdnv_std"] = why["cdnv_min"] = (
                f"classes {pair['cdnv_pair'][0]} and {pair['cdnv_pair'][1]} have the same mean: the CDNV divides by "
                "the distance between means")
        if pair["cos_ok"] and pair["log_ok"]:
            m["nc2_log_energy"], m["nc2_log_energy_std"] = pair["log_mean"], pair["log_std"]
            m["nc2_uniformity_gap"] = pair["log_mean"] + 0.5 * math.log(2.0 * K / (K - 1))
        elif pair["cos_ok"]:
            why["nc2_log_energy"] = why["nc2_log_energy_std"] = why["nc2_uniformity_gap"] = (
                f"classes {pair['log_pair'][0]} and {pair['log_pair'][1]} have the same direction: the log kernel "
                "-log ||u_c - u_c'|| is infinite")
        if pair["cos_ok"]:
            m["equiangularity"], m["max_equiangularity"] = pair["cos_std"], pair["cos_maxeq"]
        else:
            why["equiangularity"] = why["max_equiangularity"] = (
                reason_b if zero_between else f"the centred mean of class {pair['cos_zero']} is zero: its cosines are "
                                              "undefined")
            why["nc2_log_energy"] = why["nc2_log_energy_std"] = why["nc2_uniformity_gap"] = why["equiangularity"]
        if zero_between:
            why["gram_distance_etf"] = reason_b
        else:
            m["gram_distance_etf"] = pair["dist_etf"]
    if pair["dist_of"] is None:
        why["gram_distance_of"] = "the class means are all zero: the uncentred Gram has no direction"
    else:
        m["gram_distance_of"] = pair["dist_of"]
    if predicted is None:
        why["gram_distance_predicted"] = predicted_reason or "no prediction requested (--predict)"
    elif zero_between:
        why["gram_distance_predicted"] = reason_b
    elif pair["dist_pred"] is None:
        why["gram_distance_predicted"] = "the predicted centred Gram is zero: it has no direction"
    else:
        m["gram_distance_predicted"] = pair["dist_pred"]

    extra = {
        "centring": "mu_G = mean of the class means (unweighted)",
        "scale": {"feature_rms_norm": scale, "mean_centred_class_mean_norm": float(r.mean()),
                  "within_class_rms": math.sqrt(tr_w), "tr_sigma_w": tr_w, "tr_sigma_b": tr_b,
                  "min_feature_entry": means.min_value, "zero_rtol": ZERO_RTOL},
        "nc1_route": ("d x d eigendecomposition of Sigma_B" if st["mode"] == "sigma" else
                      "K x K eigendecomposition of G = M^T M (Sigma_W projected on the centred means)"),
    }
    return CollapseMetrics(m, why, K, N, d, counts.tolist(), extra)


#: Smallest squared chordal distance ||u_c - u_c'||^2 between unit centred means for the log kernel (below
#: it the two directions coincide to rounding, ~1e-16 relative, and -log of the distance is meaningless).
LOG_KERNEL_MIN_SQ = 1e-24


def _welford_merge(n_a: int, mean_a: float, m2_a: float, n_b: int, mean_b: float, m2_b: float):
    """Chan et al.'s merge of (count, mean, sum of squared deviations) of two groups."""
    n = n_a + n_b
    if n == 0:
        return 0, 0.0, 0.0
    delta = mean_b - mean_a
    mean = mean_a + delta * n_b / n
    m2 = m2_a + m2_b + delta * delta * n_a * n_b / n
    return n, mean, m2


def _pair_statistics(Mr: np.ndarray, mu_G: np.ndarray, r: np.ndarray, sigma2: np.ndarray,
                     predicted: PredictedGram | None, zero: float, tile_bytes: float) -> dict:
    """One pass over K-row tiles of the K x K Gram G = M^T M: cosines, CDNV, the Gram distances."""
    K, d = Mr.shape
    # Frobenius norms first (they normalise the distances): from d x d products when d < K
    a = Mr @ mu_G  # U = G + a 1^T + 1 a^T + |mu_G|^2 11^T (uncentred Gram)
    gg = float(mu_G @ mu_G)
    if d < K:
        A = Mr.T @ Mr
        s = Mr.sum(axis=0)
        B = A + np.outer(s, mu_G) + np.outer(mu_G, s) + K * np.outer(mu_G, mu_G)
        g_norm, u_norm = float(np.linalg.norm(A)), float(np.linalg.norm(B))
    else:
        G = Mr @ Mr.T
        U = G + a[:, None] + a[None, :] + gg
        g_norm, u_norm = float(np.linalg.norm(G)), float(np.linalg.norm(U))
        del G, U
    e_norm = math.sqrt(K - 1) if K > 1 else 0.0
    p_norm = predicted.fro_norm(K) if predicted is not None else 0.0
    rows = max(1, min(K, int(tile_bytes // (8 * 7 * max(K, 1)))))
    pos = r > zero
    cos_ok = bool(pos.all()) and K > 1
    g_ok = g_norm > 0.0 and K > 1
    acc = {"etf": 0.0, "of": 0.0, "pred": 0.0, "cd_sum": 0.0, "cd_max": -math.inf, "cd_min": math.inf, "maxeq": 0.0}
    cn, cmean, cm2 = 0, 0.0, 0.0
    vn, vmean, vm2 = 0, 0.0, 0.0  # CDNV over pairs (Chan et al.'s merge)
    ln, lmean, lm2 = 0, 0.0, 0.0  # log kernel -log ||u_c - u_c'|| over pairs
    log_ok, log_pair = True, None
    cd_ok, cd_pair = True, None
    r2 = r * r
    inv_r = np.where(pos, 1.0 / np.where(pos, r, 1.0), 0.0)
    # Upper block triangle only: rows [i0, i1) against columns [i0, K). The diagonal block holds both orders
    # of its pairs (weight 1); the columns right of it stand for their mirror images too (weight 2).
    def wsq(A, t):
        return float(np.einsum("ij,ij->", A[:, :t], A[:, :t])) + 2.0 * float(np.einsum("ij,ij->", A[:, t:], A[:, t:]))

    for i0 in range(0, K, rows):
        i1 = min(K, i0 + rows)
        t = i1 - i0
        Gt = Mr[i0:i1] @ Mr[i0:].T  # t x (K - i0)
        idx = np.arange(t)
        # uncentred Gram tile and the OF distance
        Ut = Gt + a[i0:i1, None] + a[None, i0:] + gg
        if u_norm > 0.0:
            Ut /= u_norm
            Ut[idx, idx] -= 1.0 / math.sqrt(K)
            acc["of"] += wsq(Ut, t)
        del Ut
        if K > 1:
            # CDNV on pairs c != c'
            D2 = r2[i0:i1, None] + r2[None, i0:] - 2.0 * Gt
            D2[idx, idx] = np.inf  # the diagonal is no pair: V = 0 there
            if cd_ok:
                good = (D2 > 0.0) & (np.sqrt(np.maximum(D2, 0.0)) > zero)
                if not good.all():
                    cd_ok = False
                    bad = np.argwhere(~good)[0]
                    cd_pair = (int(i0 + bad[0]), int(i0 + bad[1]))
                else:
                    V = (sigma2[i0:i1, None] + sigma2[None, i0:]) / (2.0 * D2)
                    acc["cd_sum"] += float(V[:, :t].sum()) + 2.0 * float(V[:, t:].sum())
                    acc["cd_max"] = max(acc["cd_max"], float(V.max()))
                    offv = np.ones((t, t), dtype=bool)
                    offv[idx, idx] = False
                    for part, w in ((V[:, :t][offv], 1), (V[:, t:].ravel(), 2)):
                        if part.size:
                            acc["cd_min"] = min(acc["cd_min"], float(part.min()))
                            mb = float(part.mean())
                            vn, vmean, vm2 = _welford_merge(vn, vmean, vm2, w * part.size, mb,
                                                            w * float(np.sum((part - mb) ** 2)))
                    del V
            del D2
            if cos_ok:
                C = Gt * inv_r[i0:i1, None] * inv_r[None, i0:]
                off = np.ones((t, t), dtype=bool)
                off[idx, idx] = False
                for part, w in ((C[:, :t][off], 1), (C[:, t:].ravel(), 2)):
                    if part.size:
                        mean_b = float(part.mean())
                        m2_b = float(np.sum((part - mean_b) ** 2))
                        cn, cmean, cm2 = _welford_merge(cn, cmean, cm2, w * part.size, mean_b, w * m2_b)
                        acc["maxeq"] += w * float(np.sum(np.abs(part + 1.0 / (K - 1))))
                        if log_ok:
                            # ||u_c - u_c'||^2 = 2 - 2 cos for unit vectors (u_c = M_c / r_c)
                            q2 = 2.0 - 2.0 * part
                            if not (q2 > LOG_KERNEL_MIN_SQ).all():
                                log_ok = False
                                rr, cc = np.argwhere(np.abs(C - 1.0) <= LOG_KERNEL_MIN_SQ / 2 + 0.0)[0] if \
                                    np.any(np.abs(C - 1.0) <= LOG_KERNEL_MIN_SQ / 2) else (0, 1)
                                log_pair = (int(i0 + rr), int(i0 + cc))
                            else:
                                e = -0.5 * np.log(q2)
                                eb = float(e.mean())
                                ln, lmean, lm2 = _welford_merge(ln, lmean, lm2, w * e.size, eb,
                                                                w * float(np.sum((e - eb) ** 2)))
                del C
        if g_ok:
            Gn = Gt / g_norm
            if predicted is not None and p_norm > 0.0:
                Dp = Gn - predicted.rows(i0, i1, K)[:, i0:] / p_norm
                acc["pred"] += wsq(Dp, t)
                del Dp
            Gn += 1.0 / (K * e_norm)
            Gn[idx, idx] -= 1.0 / e_norm
            acc["etf"] += wsq(Gn, t)
            del Gn
        del Gt
    pairs = K * (K - 1)
    return {
        "dist_etf": math.sqrt(acc["etf"]) if g_ok else None,
        "dist_of": math.sqrt(acc["of"]) if u_norm > 0.0 else None,
        "dist_pred": math.sqrt(acc["pred"]) if (g_ok and predicted is not None and p_norm > 0.0) else None,
        "cdnv_ok": cd_ok and K > 1, "cdnv_pair": cd_pair,
        "cdnv_mean": acc["cd_sum"] / pairs if pairs else None,
        "cdnv_max": acc["cd_max"] if pairs else None,
        "cdnv_std": math.sqrt(vm2 / vn) if vn else None, "cdnv_min": acc["cd_min"] if vn else None,
        "log_ok": log_ok and ln > 0, "log_pair": log_pair, "log_mean": lmean if ln else None,
        "log_std": math.sqrt(lm2 / ln) if ln else None,
        "cos_ok": cos_ok, "cos_zero": int(np.flatnonzero(~pos)[0]) if not pos.all() else None,
        "cos_std": math.sqrt(cm2 / cn) if cn else None,
        "cos_maxeq": acc["maxeq"] / pairs if pairs else None,
    }


# ---------------------------------------------------------------------------------------------
# In-memory convenience
# ---------------------------------------------------------------------------------------------

def measure_arrays(features, labels, weights=None, bias=None, *, layout: str = "nd",
                   batch_size: int | None = None, dtype: str = "float64",
                   predicted: PredictedGram | None = None, predicted_reason: str | None = None,
                   passes="auto") -> CollapseMetrics:
    """The metrics of in-memory arrays (numpy or torch; ``layout`` "nd": rows are samples).

    ``passes``: "auto" (one pass, :class:`ClassStats`, for numpy float64 when the d x d scatter fits;
    a second pass only for NC4 with ``weights``; else the two-pass :class:`ClassMeans` /
    :class:`ClassScatter`), 1 or 2 to force one route.

    ``labels`` must use every class 0..K-1 (K = rows of ``weights`` when given)."""
    if layout not in ("nd", "dn"):
        raise InputError(f"layout must be 'nd' (rows are samples) or 'dn' (columns are samples), got {layout!r}")
    if _is_torch(features) or hasattr(features, "shape"):
        shape = tuple(int(s) for s in features.shape)
    else:
        shape = np.shape(features)
    if len(shape) != 2:
        raise InputError(f"features must be 2-dimensional (N x d), got shape {shape}")
    N, d = shape if layout == "nd" else shape[::-1]
    K = None
    if weights is not None:
        K = int(np.shape(weights)[0]) if not _is_torch(weights) else int(weights.shape[0])
    if batch_size is None:
        batch_size = max(1, int(CHUNK_BYTES // (8 * max(d, 1))))
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InputError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if _is_torch(labels):
        lab = labels
    else:
        lab = np.asarray(labels)
    if getattr(lab, "ndim", 1) != 1 or int(lab.shape[0]) != N:
        raise InputError(f"labels must be 1-dimensional with one entry per sample (N = {N}), got shape "
                         f"{tuple(lab.shape)}")
    def chunks():
        for s in range(0, N, batch_size):
            X = features[s: s + batch_size] if layout == "nd" else features[:, s: s + batch_size]
            yield X, lab[s: s + batch_size]

    if passes not in ("auto", 1, 2):
        raise InputError(f"passes must be 'auto', 1 or 2, got {passes!r}")
    one = (passes != 2 and dtype == "float64" and not _is_torch(features) and one_pass_fits(d, 1, K or 0))
    if passes == 1 and not one:
        raise InputError("passes = 1 needs numpy features, float64 accumulation and a d x d scatter that fits "
                         f"({ONE_PASS_MAX_SCATTER_BYTES / 1e6:.3g} MB)")
    if one:
        if K is None:
            if _is_torch(lab):
                lab = lab.cpu().numpy()
            lab = np.asarray(lab)
            if N == 0:
                raise InputError("features: no samples were given (N = 0)")
            K = int(_labels_chunk(lab, N, None, "", False, None).max()) + 1
        st = ClassStats(K, d)
        for X, y in chunks():
            st.update(X, y, layout)
        nc4 = None
        if weights is not None:
            nc4 = NC4Pass(st, weights, bias)
            for X, y in chunks():
                nc4.update(X, y, layout)
        elif bias is not None:
            raise InputError("bias is given without weights: the bias enters only NC4, which needs W")
        return collapse_metrics(st, nc4, predicted=predicted, predicted_reason=predicted_reason)
    acc = ClassMeans(K, d, dtype=dtype, max_classes=max(N, K or 0))
    for X, y in chunks():
        acc.update(X, y, layout)
    sc = ClassScatter(acc, weights, bias)
    for X, y in chunks():
        sc.update(X, y, layout)
    return collapse_metrics(acc, sc, predicted=predicted, predicted_reason=predicted_reason)


# ---------------------------------------------------------------------------------------------
# Neural regression collapse (NRC1-3; docs/metrics.md, "Regression")
# ---------------------------------------------------------------------------------------------

REGRESSION_KEYS = ("nrc1", "nrc2", "nrc3")


class RegressionStats:
    """Two streaming passes for NRC1-3 (Andriopoulos et al., NeurIPS 2024).

    Pass 1 (``update1``): the feature mean h_G and the target mean and second moments. Pass 2
    (``update2``): C = (1/N) sum_i g_i g_i^T over the centred, normalised features
    g_i = (h_i - h_G) / ||h_i - h_G|| (g_i = 0 when h_i = h_G). Normalising needs h_G, hence two passes."""

    def __init__(self, dim: int, targets_dim: int, where: str = ""):
        self.d, self.n, self.where = int(dim), int(targets_dim), where
        self.N = 0
        self.h_sum = np.zeros(self.d)
        self.y_sum = np.zeros(self.n)
        self.yy = np.zeros((self.n, self.n))
        self.N2 = 0
        self.C = np.zeros((self.d, self.d))
        self.h_G = None

    def update1(self, H, Y) -> "RegressionStats":
        H = np.asarray(H, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64).reshape(H.shape[0], -1)
        if not (np.isfinite(H).all() and np.isfinite(Y).all()):
            raise InputError(f"{self.where}features and targets must be finite (found NaN or inf)")
        self.h_sum += H.sum(axis=0)
        self.y_sum += Y.sum(axis=0)
        self.yy += Y.T @ Y
        self.N += H.shape[0]
        return self

    def update2(self, H) -> "RegressionStats":
        if self.h_G is None:
            if self.N == 0:
                raise InputError(f"{self.where}features: no samples were given (N = 0)")
            self.h_G = self.h_sum / self.N
        G = np.asarray(H, dtype=np.float64) - self.h_G
        nr = np.sqrt(np.einsum("ij,ij->i", G, G))
        G = G / np.where(nr > 0, nr, 1.0)[:, None]
        self.C += G.T @ G
        self.N2 += G.shape[0]
        return self

    def target_covariance(self) -> np.ndarray:
        ym = self.y_sum / self.N
        S = self.yy / self.N - np.outer(ym, ym)
        return (S + S.T) / 2


def regression_metrics(stats: RegressionStats, W) -> CollapseMetrics:
    """NRC1-3 from the two passes and the regressor W (n x d, row j predicts target j)."""
    if stats.N2 != stats.N:
        raise InputError(f"{stats.where}features: pass 2 saw {stats.N2} samples, pass 1 saw {stats.N}")
    d, n, N = stats.d, stats.n, stats.N
    m = {k: None for k in REGRESSION_KEYS}
    why = {}
    C = (stats.C + stats.C.T) / (2.0 * N)
    lam = np.linalg.eigvalsh(C)[::-1]
    if n >= d:
        why["nrc1"] = f"n = {n} targets >= d = {d}: the top-n principal subspace is all of R^d (NRC1 = 0 trivially)"
    else:
        m["nrc1"] = float(max(np.sum(lam[n:]), 0.0))
    if W is None:
        why["nrc2"] = why["nrc3"] = "no regressor weights given (--weights, n x d)"
        return CollapseMetrics(m, why, 0, N, d, [], {"targets_dim": n})
    W = _as_matrix(W, "weights")
    if W.shape != (n, d):
        raise InputError(f"{stats.where}weights must be n x d = {n} x {d} (one row per target), got "
                         f"{W.shape[0]} x {W.shape[1]}")
    U, sv, _ = np.linalg.svd(W.T, full_matrices=False)  # columns of U span the row space of W
    rank = int(np.sum(sv > PINV_RTOL * (sv.max() if sv.size else 0.0)))
    if rank == 0:
        why["nrc2"] = why["nrc3"] = "the regressor W is zero"
        return CollapseMetrics(m, why, 0, N, d, [], {"targets_dim": n})
    Ur = U[:, :rank]
    m["nrc2"] = float(max(np.trace(C) - np.einsum("ij,ij->", Ur, C @ Ur), 0.0))
    S = stats.target_covariance()
    ev, EV = np.linalg.eigh(S)
    if not ev.min() > 0:
        why["nrc3"] = "the target covariance is singular (a constant or collinear target): Sigma^(1/2) - sqrt(g) I degenerates"
        return CollapseMetrics(m, why, 0, N, d, [], {"targets_dim": n})
    A = W @ W.T
    A = A / np.linalg.norm(A)
    root = np.sqrt(ev)

    def f(g: float) -> float:
        B = (EV * (root - math.sqrt(g))) @ EV.T
        nb = np.linalg.norm(B)
        return float(np.sum((A - B / nb) ** 2)) if nb > 0 else math.inf

    hi = float(ev.min()) * (1.0 - 1e-9)
    from scipy.optimize import minimize_scalar

    grid = np.linspace(0.0, hi, 65)
    vals = [f(g) for g in grid]
    j = int(np.argmin(vals))
    lo_b, hi_b = grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]
    best = min(vals[j], f(0.0))
    if hi_b > lo_b:
        r = minimize_scalar(f, bounds=(lo_b, hi_b), method="bounded", options={"xatol": 1e-14 * max(hi, 1e-300)})
        best = min(best, float(r.fun))
    m["nrc3"] = best
    return CollapseMetrics(m, why, 0, N, d, [], {"targets_dim": n, "target_covariance_eigenvalues": ev.tolist()})
