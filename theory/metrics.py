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

Modules by concern (every name is importable from here): :mod:`theory.metrics_stream` (chunk
validation, budgets, the two-pass accumulators and the NC4 pass), :mod:`theory.metrics_onepass`
(the one-pass :class:`ClassStats`), this module (the metrics from the accumulators' states, the
K x K tiles, the in-memory driver, regression collapse).

Pure numpy; torch is used only when the caller passes torch tensors. This module does not import
``solvers`` or ``proofs_check``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from theory._validate import InputError
# The accumulators live in two modules by concern; every public name stays importable from here.
from theory.metrics_onepass import (BLOCK_ROWS, ONE_PASS_MAX_SCATTER_BYTES, SHIFT_BLOCK_BYTES, ClassStats, ProjectedScatter,
                                    _kahan_add, projected_route_cheaper)
from theory.metrics_stream import (ALL_KEYS, CHUNK_BYTES, DTYPES, ELEMENTWISE_PER_S, GEMM_FLOPS_PER_S,
                                   MAX_STATE_BYTES, METRIC_KEYS, NC4_STEP_BYTES, PINV_RTOL, SQUARE_MAX, SQUARE_MIN,
                                   TILE_BYTES, VARIANT_KEYS, ZERO_RTOL, ClassMeans, ClassScatter, NC4Pass, _add_by_class,
                                   _as_matrix, _as_vector, _check_underflow, _chunk, _is_torch, _labels_chunk,
                                   _nonfinite, _torch, check_state_budget, check_weights, estimate_seconds,
                                   estimate_work, state_bytes)

__all__ = ["ALL_KEYS", "BLOCK_ROWS", "CHUNK_BYTES", "DTYPES", "ELEMENTWISE_PER_S", "GEMM_FLOPS_PER_S",
           "LOG_KERNEL_MIN_SQ", "MAX_STATE_BYTES", "METRIC_KEYS", "NC4_STEP_BYTES", "ONE_PASS_MAX_SCATTER_BYTES",
           "ONE_PASS_TOTAL_BYTES", "PINV_RTOL", "REGRESSION_KEYS", "SHIFT_BLOCK_BYTES", "SQUARE_MAX", "SQUARE_MIN",
           "TILE_BYTES", "VARIANT_KEYS", "ZERO_RTOL", "ClassMeans", "ClassScatter", "ClassStats", "CollapseMetrics", "InputError",
           "NC4Pass", "PredictedGram", "ProjectedScatter", "projected_route_cheaper", "RegressionStats",
           "check_state_budget", "check_weights", "collapse_metrics",
           "estimate_seconds", "estimate_work", "measure_arrays", "one_pass_bytes", "one_pass_fits",
           "regression_metrics",
           "state_bytes", "_add_by_class", "_as_matrix", "_as_vector", "_check_underflow", "_chunk", "_is_torch",
           "_kahan_add", "_labels_chunk", "_nonfinite", "_torch"]

# ---------------------------------------------------------------------------------------------
# Budgets of the one-pass route (here, so that a test or a caller can lower them in one place)
# ---------------------------------------------------------------------------------------------

#: Bytes all live one-pass accumulators may hold in d x d matrices together (one per worker + the total).
ONE_PASS_TOTAL_BYTES = 1_000_000_000


def one_pass_bytes(d: int, K: int = 0) -> float:
    """Bytes of one one-pass accumulator: four d x d matrices and four K x d (shifts, sums, compensation, block)."""
    return 8.0 * (4.0 * d * d + 4.0 * K * d)


def one_pass_fits(d: int, copies: int = 1, K: int = 0) -> bool:
    """Whether ``copies`` one-pass accumulators for K classes in dimension d fit the budgets."""
    return (8.0 * d * d <= ONE_PASS_MAX_SCATTER_BYTES
            and one_pass_bytes(d, K) * max(1, copies) <= ONE_PASS_TOTAL_BYTES)


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


def _metrics_state(means, scatter) -> tuple[dict, float]:
    """The accumulators' numpy state (:meth:`ClassStats.numpy_state` or :meth:`ClassScatter.numpy_state`) and
    the default tile size, with the pairing of the two checked."""
    if isinstance(scatter, ProjectedScatter):
        if scatter.pass1 is not means:
            raise TypeError("scatter must be the ProjectedScatter built from these ClassStats")
        return scatter.numpy_state(), (TILE_BYTES if scatter.nc4 is None else scatter.nc4.tile_bytes)
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
    return st, default_tile


def _nc1_metrics(m: dict, why: dict, st: dict, K: int, d: int, N: int, tr_w: float, tr_b: float,
                 zero_between: bool, reason_b: str) -> None:
    """NC1 (relative cutoff), the trace ratio and nc1_svd (the top K-1 eigenpairs), into ``m`` / ``why``."""
    Mr, S = st["Mr"], st["S"]
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


def _classifier_metrics(m: dict, why: dict, st: dict, N: int, r: np.ndarray, fro_M: float, zero: float,
                        zero_between: bool, reason_b: str) -> None:
    """NC3, NC4 and the duality cosines (they need the classifier W), into ``m`` / ``why``."""
    Mr = st["Mr"]
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


def _ood_metrics(m: dict, why: dict, ood_mean, Mr: np.ndarray, mu_G: np.ndarray, r: np.ndarray, zero: float,
                 zero_between: bool, reason_b: str) -> None:
    """NC5: orthogonality of the out-of-distribution mean to the class means, into ``m`` / ``why``."""
    if ood_mean is None:
        why["nc5"] = why["nc5_ood_uncentred"] = "no out-of-distribution features given (--ood FILE)"
        return
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


def _pair_metrics(m: dict, why: dict, pair: dict, K: int, zero_between: bool, reason_b: str,
                  predicted: PredictedGram | None, predicted_reason: str | None) -> None:
    """The pairwise metrics (CDNV, cosines, log kernel, Gram distances) from :func:`_pair_statistics`."""
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


def collapse_metrics(means: ClassMeans, scatter: ClassScatter, *, predicted: PredictedGram | None = None,
                     predicted_reason: str | None = None, tile_bytes: float | None = None,
                     ood_mean: np.ndarray | None = None) -> CollapseMetrics:
    """Every metric of docs/metrics.md from the two passes (numpy float64 from here on).

    ``predicted`` is the centred Gram of the predicted class means (``gram_distance_predicted`` is
    None without it, with ``predicted_reason`` or "no prediction requested" as the reason).
    """
    st, default_tile = _metrics_state(means, scatter)
    if predicted is not None and not isinstance(predicted, PredictedGram):
        raise TypeError(f"predicted must be a PredictedGram, got {type(predicted).__name__}")
    tile_bytes = default_tile if tile_bytes is None else float(tile_bytes)
    counts = means.check_complete()
    K, d, N = int(counts.size), int(means.d), int(st["N"])
    Mr, mu_G = st["Mr"], st["mu_G"]
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

    _nc1_metrics(m, why, st, K, d, N, tr_w, tr_b, zero_between, reason_b)
    # --- equinorm -------------------------------------------------------------------------------------
    if K == 1:
        why["equinorm"] = "a single class (K = 1): its centred mean is zero"
    elif not r.mean() > zero:
        why["equinorm"] = reason_b
    else:
        m["equinorm"] = float(r.std() / r.mean())
    _classifier_metrics(m, why, st, N, r, fro_M, zero, zero_between, reason_b)
    _ood_metrics(m, why, ood_mean, Mr, mu_G, r, zero, zero_between, reason_b)
    pair = _pair_statistics(Mr, mu_G, r, sigma2, predicted, zero, tile_bytes)  # tiles of K x K
    _pair_metrics(m, why, pair, K, zero_between, reason_b, predicted, predicted_reason)

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
