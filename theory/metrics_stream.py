"""Streaming accumulators of the collapse metrics: chunk validation, budgets and the two-pass route.

:class:`ClassMeans` (pass 1: class sums and counts), :class:`ClassScatter` (pass 2: the
within-class scatter about the pass-1 means, the class variances, NC4) and :class:`NC4Pass` (the
NC4 pass after the one-pass :class:`theory.metrics_onepass.ClassStats`) take chunks of samples
(numpy arrays, or torch tensors on any device for the two passes) and accumulate in float64 by
default. The definitions and the metrics computed from these states: :mod:`theory.metrics`
(``docs/metrics.md``). Every name here is re-exported by :mod:`theory.metrics`.

Pure numpy; torch is used only when the caller passes torch tensors. This module does not import
``solvers`` or ``proofs_check``.
"""

from __future__ import annotations

import math

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


#: The routes :func:`estimate_seconds` models: "two" (the general two-pass route, the default), "one" (one pass
#: with the d x d scatter) and "projected" (the K x K projection in a second pass, d > K).
ESTIMATE_ROUTES = ("two", "one", "projected")


def estimate_work(N: int, d: int, K: int, *, weights: bool = False, route: str = "two") -> dict:
    """The cost model of :func:`estimate_seconds` in work: flop-equivalents (a GEMM flop is one, an elementwise
    operation GEMM_FLOPS_PER_S / ELEMENTWISE_PER_S). It depends only on the sizes, never on this machine."""
    est = estimate_seconds(N, d, K, weights=weights, route=route)
    return {k.replace("_s", "_work"): v * GEMM_FLOPS_PER_S for k, v in est.items()}


def estimate_seconds(N: int, d: int, K: int, *, weights: bool = False, route: str = "two") -> dict:
    """Estimated seconds of the passes and of the K x K pairs (docs/measure.md, "Budgets") on the route taken:
    the products per sample are d^2 / 2 multiply-adds for the d x d syrk (routes "two" and "one"; "two" adds the
    K x K projection when d > K), d K + K^2 / 2 for the projected route, and 2 d K for NC4's logits."""
    for name, v, lo in (("N", N, 1), ("d", d, 1), ("K", K, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
    if route not in ESTIMATE_ROUTES:
        raise InputError(f"route must be one of {', '.join(ESTIMATE_ROUTES)}, got {route!r}")
    nc4 = 2.0 * K if weights else 0.0
    if route == "projected":
        gemm_pass = N * (d * K + K * K / 2.0 + d * nc4)
    elif route == "one":
        gemm_pass = N * d * (d / 2.0 + nc4)
    else:
        gemm_pass = N * d * (d / 2.0 + (min(d, K) if d > K else 0) + nc4)
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
        # compared as a Python float: float16 labels turned 2^53 into an overflow warning (inf) on stderr
        if B and float(np.max(np.abs(lab))) > 2.0 ** 53:
            raise InputError(f"{where}labels must be integers below 2^53, got {float(np.max(np.abs(lab))):g}")
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


#: Largest sub-chunk of float64 rows NC4 converts and multiplies at once (its logits and distances are K
#: columns each): 4 MB keeps a worker's NC4 temporaries near one float32 chunk (docs/measure.md, memory).
NC4_STEP_BYTES = 4_000_000


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
        # sub-chunks of at most NC4_STEP_BYTES of float64 rows, converted one at a time (no float64 copy of the
        # whole chunk: with --batch-size 8192 at d = 256 that was 17 MB per worker, twice with Xs - mu_G)
        step = max(1, min(int(self.tile_bytes // (8 * 3 * self.K)), int(NC4_STEP_BYTES // (8 * self.d))))
        for s in range(0, int(X.shape[0]), step):
            Xs = np.asarray(X[s: s + step], dtype=np.float64)
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
