"""One pass over the samples (docs/measure.md, "One pass"): :class:`ClassStats`.

Shifted sums, per-class squared norms and the d x d scatter about per-class shifts, accumulated in
float64 with a Kahan-compensated sum of blocks; :meth:`ClassStats.merge` adds the statistics of
disjoint parts exactly when the shifts agree. Re-exported by :mod:`theory.metrics` (which holds the
memory budgets :func:`theory.metrics.one_pass_fits`). This module does not import ``solvers`` or
``proofs_check``.
"""

from __future__ import annotations

import math

import numpy as np

from theory._validate import InputError
from theory.metrics_stream import SQUARE_MAX, _check_underflow, _chunk, _is_torch, _nonfinite, check_state_budget

# ---------------------------------------------------------------------------------------------
# One pass: shifted sums and the within-class scatter about per-class shifts (docs/measure.md)
# ---------------------------------------------------------------------------------------------

#: Rows summed by plain float64 BLAS/numpy accumulation before the block is added to the Kahan-compensated
#: totals (docs/measure.md, "One pass": the block's rounding is at most ~BLOCK_ROWS u relative, the
#: compensated sum of blocks adds O(u)). A Kahan step on d x d per chunk would cost as much as the chunk's
#: products at d = 512 (measured: 10 ms against 16 ms for the B = 2048 syrk).
BLOCK_ROWS = 32768

#: Bytes of float64 shifted rows formed at a time (gather of the shifts, subtraction, row norms): 1 MB (256
#: rows at d = 512) sits inside the 2 MB L2 cache of one core, so the three steps read the block from L2
#: instead of memory: 6-7% less CPU per chunk at d = 512 (docs/benchmarks.md, "measure throughput").
SHIFT_BLOCK_BYTES = 1 << 20

#: Largest d x d scatter (bytes of one float64 matrix) the one-pass accumulator keeps; it holds four
#: (the sum, its compensation, the block sum and a buffer). Above it, measure falls back to two
#: passes (the K x K projection of docs/metrics.md when d > K): docs/measure.md, "One pass".
ONE_PASS_MAX_SCATTER_BYTES = 64_000_000


def _kahan_add(s: np.ndarray, c: np.ndarray, x: np.ndarray, buf: np.ndarray | None = None) -> None:
    """s + x with Kahan's compensation c, in place (true sum ~ s - c). ``x`` is overwritten."""
    np.subtract(x, c, out=x)          # y = x - c
    t = np.add(s, x, out=buf)          # t = s + y
    np.subtract(t, s, out=c)
    np.subtract(c, x, out=c)          # c = (t - s) - y
    s[...] = t


def _numpy_chunk(features, labels, layout: str, d: int, K: int, where: str):
    """A validated chunk (B x d features, B labels) as numpy arrays (torch tensors are brought to the CPU)."""
    X, y = _chunk(features, labels, layout, d, K, where)
    if _is_torch(X):
        X = X.detach().cpu().numpy()
    if _is_torch(y):
        y = y.cpu().numpy()
    return X, y


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
        X, y = _numpy_chunk(features, labels, layout, self.d, self.K, self.where)
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
        rowsq = np.empty(B)
        # a_i = h_i - k_{y_i} in float64 (float32 input converted here), in row blocks that stay in the L2
        # cache between the gather, the subtraction and the row norms (each row's arithmetic is unchanged)
        rows = max(16, SHIFT_BLOCK_BYTES // (8 * self.d))
        # (indexing and ufuncs release the GIL, so the worker threads of measure run this in parallel; np.take
        # with out= holds it)
        # (the conversion first, then the subtraction of the gathered shifts in place: the same float64
        # operations as np.subtract(X, shift[y]) with its mixed-dtype casting loop, 1.2 against 1.8 ms per
        # 2048 x 512 chunk)
        for r0 in range(0, B, rows):
            r1 = min(B, r0 + rows)
            Ab = A[r0:r1]
            Ab[...] = X[r0:r1]
            Ab -= self.shift[y[r0:r1]]
            np.einsum("ij,ij->i", Ab, Ab, out=rowsq[r0:r1])
        self._qb[cls] += np.bincount(inv, weights=rowsq, minlength=cls.size)
        if 2 * cls.size >= self.K:
            # most classes in the chunk: the class sums as a K x d product added contiguously (no gather and
            # scatter of the classes' rows of the accumulator; the same sums in the same order)
            if cls.size < self.K:
                ind = sparse.csc_matrix((np.ones(B), np.asarray(y, dtype=np.int64), np.arange(B + 1)),
                                        shape=(self.K, B))
            self._sb += ind @ A
        else:
            P = ind @ A  # the chunk's class sums (classes of this chunk x d)
            P += self._sb[cls]  # the same sums as self._sb[cls] += P (addition is commutative), one temporary less
            self._sb[cls] = P
        self.counts[cls] += m
        if self.scatter:
            # A^T A through numpy's matmul, which calls BLAS syrk for a product of an array with its own
            # transpose (N d^2 flops, not 2 N d^2) and releases the GIL: scipy.linalg.blas.dsyrk holds it, so
            # measure's two worker threads ran one at a time (docs/benchmarks.md, "measure throughput"). The
            # product is symmetric, so the C-ordered view of the Fortran buffer receives it unchanged.
            np.matmul(A.T, A, out=self._buf.T)
            np.add(self._Tb, self._buf, out=self._Tb)
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
        self._sb[...] = 0.0  # cleared in place (no new K x d array per block)
        self._qb[...] = 0.0
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
        if other.shift is self.shift:  # the same shifts (the driver's segments): no re-shift
            reshift = False
        else:
            delta = np.zeros((self.K, self.d))
            delta[both] = other.shift[both] - self.shift[both]  # a about self's shift = a_other + delta
            reshift = bool(np.any(delta != 0.0))
        if reshift:
            n = other.counts.astype(np.float64)
            if self.scatter:
                U = np.triu(o_T) + np.triu(o_T, 1).T
                X1 = delta.T @ o_s
                U += X1 + X1.T + (delta * n[:, None]).T @ delta
                o_T = np.triu(U)
            o_q = o_q + 2.0 * np.einsum("ij,ij->i", delta, o_s) + n * np.einsum("ij,ij->i", delta, delta)
            o_s = o_s + n[:, None] * delta
        _kahan_add(self.s, self.s_c, o_s)  # o_s, o_q are temporaries (overwritten)
        _kahan_add(self.q, self.q_c, o_q)
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


# ---------------------------------------------------------------------------------------------
# The projected route: a scatter-free first pass, then M_r (N Sigma_W) M_r^T about the final means
# ---------------------------------------------------------------------------------------------

def projected_route_cheaper(d: int, K: int) -> bool:
    """Whether the projected route (:class:`ProjectedScatter`) needs fewer flops per sample than the one-pass
    d x d scatter: its second pass forms A M_r^T (2 d K flops) and the K x K syrk (K^2), the one-pass route the
    d x d syrk (d^2); both pay the gather, subtraction and row norms (~6 d). The projected route reads the data
    twice, so it is chosen only where it saves at least half of the flops (measured on the 2-core VM at d = 512:
    K = 10 and 100 gain 2.6x and 1.6x in wall time, docs/benchmarks.md, "measure throughput")."""
    d, K = int(d), int(K)
    return K < d and 2.0 * d * K + K * K + 6.0 * d <= 0.5 * (d * d + 6.0 * d)


class ProjectedScatter:
    """Second pass of the projected route (docs/measure.md, "Two passes when K is small"): with the final class
    means mu_c of a scatter-free :class:`ClassStats` (``pass1``, ``scatter=False``) and their centred matrix
    M_r (K x d, rows mu_c - mu_G), accumulates

        S = sum_i (M_r a_i)(M_r a_i)^T = M_r (N Sigma_W) M_r^T  (K x K),   a_i = h_i - mu_{y_i},

    in float64 (blocks of :data:`BLOCK_ROWS` rows, Kahan-compensated between blocks). This is the state the
    metrics read when d > K (mode "projected"): NC1 = tr(Sigma_W Sigma_B^+) / K only sees Sigma_W on the span of
    the class means, and the traces come from pass 1's per-class squared norms. Accumulators of disjoint
    samples built from the same ``pass1`` merge by addition (:meth:`merge`). With ``nc4`` (an NC4Pass of the same
    first pass) NC4 and the network's loss are accumulated in the same read."""

    def __init__(self, pass1: ClassStats, nc4=None):
        if not isinstance(pass1, ClassStats) or pass1.scatter:
            raise TypeError("ProjectedScatter needs a finished ClassStats built with scatter=False")
        #: an optional :class:`theory.metrics_stream.NC4Pass` of the same first pass, updated in the same read
        self.nc4 = nc4
        pass1.check_complete()
        self.pass1, self.K, self.d, self.where = pass1, pass1.K, pass1.d, pass1.where
        self.mu = pass1.means()
        self.mu_G = self.mu.mean(axis=0)
        self.Mr = self.mu - self.mu_G
        self._MrT = np.ascontiguousarray(self.Mr.T)
        K = self.K
        self.S, self.S_c, self._Sb, self._buf = (np.zeros((K, K)) for _ in range(4))
        self._A = None
        self._block_rows = 0
        self.N = 0

    def _fresh(self) -> "ProjectedScatter":
        """An empty accumulator that shares this one's means (for a worker's segment)."""
        acc = ProjectedScatter.__new__(ProjectedScatter)
        acc.__dict__.update(self.__dict__)
        K = self.K
        acc.S, acc.S_c, acc._Sb, acc._buf = (np.zeros((K, K)) for _ in range(4))
        acc._A, acc._block_rows, acc.N = None, 0, 0
        if self.nc4 is not None:
            nc4 = type(self.nc4).__new__(type(self.nc4))
            nc4.__dict__.update(self.nc4.__dict__)
            nc4.N = nc4.disagree = 0
            nc4.loss_sum = 0.0
            acc.nc4 = nc4
        return acc

    def update(self, features, labels, layout: str = "nd") -> "ProjectedScatter":
        X, y = _numpy_chunk(features, labels, layout, self.d, self.K, self.where)
        B = int(X.shape[0])
        if B == 0:
            return self
        if self._A is None or self._A.shape[0] < B:
            self._A = np.empty((B, self.d))
        A = self._A[:B]
        rows = max(16, SHIFT_BLOCK_BYTES // (8 * self.d))
        for r0 in range(0, B, rows):  # a_i = h_i - mu_{y_i} in float64, in L2-sized row blocks
            r1 = min(B, r0 + rows)
            np.subtract(X[r0:r1], self.mu[y[r0:r1]], out=A[r0:r1])
        if not np.isfinite(A).all():  # the file changed between the passes, or a non-finite entry
            _nonfinite(np.asarray(X), self.where, self.N)
        Z = A @ self._MrT  # B x K (numpy's matmul releases the GIL)
        np.matmul(Z.T, Z, out=self._buf)  # syrk
        np.add(self._Sb, self._buf, out=self._Sb)
        if self.nc4 is not None:
            self.nc4.update(X, y)
        self.N += B
        self._block_rows += B
        if self._block_rows >= BLOCK_ROWS:
            self._flush()
        return self

    def _flush(self) -> None:
        if self._block_rows:
            _kahan_add(self.S, self.S_c, self._Sb, self._buf)
            self._Sb[...] = 0.0
            self._block_rows = 0

    def merge(self, other: "ProjectedScatter") -> "ProjectedScatter":
        if not isinstance(other, ProjectedScatter) or other.pass1 is not self.pass1:
            raise TypeError("merge needs a ProjectedScatter built from the same first pass")
        self._flush()
        other._flush()
        o = other.S - other.S_c
        _kahan_add(self.S, self.S_c, o, self._buf)
        if self.nc4 is not None:
            self.nc4.merge(other.nc4)
        self.N += other.N
        return self

    def numpy_state(self) -> dict:
        """The state :func:`collapse_metrics` reads (mode "projected")."""
        if self.N != self.pass1.N:
            raise InputError(f"{self.where}features: the second pass saw {self.N} samples, the first pass saw "
                             f"{self.pass1.N} (both passes must read the same samples)")
        self._flush()
        class_sq, _ = self.pass1.within()
        S = self.S - self.S_c
        nc4 = self.nc4
        return {"S": (S + S.T) / 2.0, "class_sq": class_sq, "Mr": self.Mr, "mu_G": self.mu_G, "mode": "projected",
                "N": self.N, "disagree": 0 if nc4 is None else int(nc4.disagree), "W": None if nc4 is None else nc4.W}
