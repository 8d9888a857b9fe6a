"""Supervised contrastive loss: the batching compiled for vectorised evaluation and the loss with its gradient
(defined once, any batching). Part of the SCL engine (``solvers.scl`` re-exports every name).

Loss convention (docs/scl.md): unit-norm features, logits h.h'/tau, sum over anchors. For a
batch B and an anchor i whose class has n_{B,y_i} >= 2 members in B,

    term_i = LSE_{l in B, l != i}(G_il / tau) - mean_{j in P_B(i)} G_ij / tau,   G = H^T H,

which is the spec's 1/(n-1) sum_j log sum_l exp((G_il - G_ij)/tau) rewritten (the inner log
is LSE_l(G_il/tau) - G_ij/tau, and averaging over the n-1 positives gives the mean). Anchors
without a positive contribute 0. The loss of a batching is the sum over its batches
(repeats count again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from theory._validate import InstanceError, as_finite_array, as_labels
from theory.scl import validate_batches, validate_tau


# --------------------------------------------------------------------------------------
# Batching compiled into equal-size groups (vectorised over batches of one size)
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchGroup:
    """All batches of one size m: indices (b, m), positive mask (b, m, m), positives per anchor
    (b, m), and which rows are anchors with a positive (b, m)."""

    idx: np.ndarray
    pos: np.ndarray
    npos: np.ndarray
    anchor: np.ndarray


@dataclass(frozen=True)
class CompiledBatching:
    """A batching prepared for repeated loss evaluations (reuse it inside optimisers)."""

    N: int
    groups: tuple[BatchGroup, ...]
    full: bool
    labels: np.ndarray = field(repr=False)

    @property
    def n_anchor_terms(self) -> int:
        return int(sum(g.anchor.sum() for g in self.groups))


def compile_batching(labels, batches=None) -> CompiledBatching:
    """Validate labels and batches (None = full batch) and group the batches by size."""
    y = as_labels("labels", labels)
    N = y.size
    if batches is None:
        blist = (tuple(range(N)),)
        full = True
    else:
        blist = validate_batches(batches, N)
        full = len(blist) == 1 and blist[0] == tuple(range(N))  # the fast path needs the natural order
    by_size: dict[int, list[tuple[int, ...]]] = {}
    for b in blist:
        if len(b) >= 2:  # a batch of one sample has no anchor with a positive
            by_size.setdefault(len(b), []).append(b)
    groups = []
    for m in sorted(by_size):
        idx = np.asarray(by_size[m], dtype=np.int64)
        lab = y[idx]
        pos = (lab[:, :, None] == lab[:, None, :]) & ~np.eye(m, dtype=bool)[None]
        npos = pos.sum(-1)
        groups.append(BatchGroup(idx, pos, npos, npos > 0))
    return CompiledBatching(N, tuple(groups), full, y)


def _as_compiled(labels, batches) -> CompiledBatching:
    if isinstance(batches, CompiledBatching):
        y = as_labels("labels", labels)
        if y.size != batches.N or not np.array_equal(y, batches.labels):
            raise InstanceError("labels must match the labels the batching was compiled with")
        return batches
    return compile_batching(labels, batches)


# --------------------------------------------------------------------------------------
# The loss (defined once) and its gradient
# --------------------------------------------------------------------------------------

def _group_terms(GB: np.ndarray, g: BatchGroup, tau: float, want_grad: bool):
    """Loss of one group from its Gram blocks GB (b, m, m); and dL/dGB (entries independent).

    Works in place on one (b, m, m) buffer (logits -> shifted exponentials -> dL/dGB), so the full
    batch of N samples costs about two N x N float arrays besides GB and the positive mask."""
    b, m, _ = GB.shape
    S = GB / tau  # the one working buffer
    inv = 1.0 / np.maximum(g.npos, 1)
    pos_mean = np.einsum("bij,bij->bi", S, g.pos) * inv  # before the diagonal is masked (-inf * 0)
    S.reshape(b, m * m)[:, :: m + 1] = -np.inf  # l != i
    mx = S.max(-1, keepdims=True)
    S -= mx
    np.exp(S, out=S)
    Z = S.sum(-1, keepdims=True)
    lse = mx[..., 0] + np.log(Z[..., 0])
    value = float(np.sum(np.where(g.anchor, lse - pos_mean, 0.0)))
    if not want_grad:
        return value, None
    S /= Z  # softmax over l != i
    S -= g.pos * inv[..., None]
    S *= g.anchor[..., None] / tau
    return value, S


def _loss_features(H: np.ndarray, cb: CompiledBatching, tau: float, want_grad: bool = True):
    """Loss and gradient in H (d x N), no validation (for optimiser loops)."""
    value = 0.0
    grad = np.zeros_like(H) if want_grad else None
    Ht = H.T  # (N, d)
    for g in cb.groups:
        if cb.full:  # plain 2-D BLAS calls on H, no gathered copy
            v, A = _group_terms((H.T @ H)[None], g, tau, want_grad)
            value += v
            if want_grad:
                A2 = A[0]
                A2 += A2.T.copy()  # A + A^T
                grad += H @ A2  # column i: sum_l (A_il + A_li) h_l
            continue
        HB = Ht[g.idx]  # (b, m, d)
        GB = HB @ HB.transpose(0, 2, 1)
        v, A = _group_terms(GB, g, tau, want_grad)
        value += v
        if want_grad:
            dHB = A @ HB + A.transpose(0, 2, 1) @ HB  # (b, m, d): row i = sum_l (A_il + A_li) h_l
            gT = np.zeros_like(Ht)
            np.add.at(gT, g.idx.ravel(), dHB.reshape(-1, H.shape[0]))  # a sample may sit in many batches
            grad += gT.T
    return value, grad


def _loss_gram(G: np.ndarray, cb: CompiledBatching, tau: float, want_grad: bool = True):
    value = 0.0
    grad = np.zeros_like(G) if want_grad else None
    for g in cb.groups:
        GB = G[None] if cb.full else G[g.idx[:, :, None], g.idx[:, None, :]]
        v, A = _group_terms(GB, g, tau, want_grad)
        value += v
        if want_grad:
            if cb.full:
                grad += A[0]
            else:
                np.add.at(grad, (np.broadcast_to(g.idx[:, :, None], A.shape),
                                 np.broadcast_to(g.idx[:, None, :], A.shape)), A)
    if want_grad:
        grad = 0.5 * (grad + grad.T)  # gradient in the space of symmetric matrices
    return value, grad


def scl_loss(X, labels, batches, tau, *, gram: bool = False, grad: bool = True):
    """The SCL loss of a batching, and its gradient.

    ``X``: features H (d x N, columns = samples) or, with ``gram=True``, a Gram matrix G (N x N).
    ``labels``: class of each sample (0..k-1, every class present). ``batches``: None (full batch),
    a list of index lists, or a :class:`CompiledBatching` (fast path for repeated calls).
    Returns ``value`` or ``(value, gradient)``; the gradient has the shape of X (for G: the
    symmetric gradient, so the directional derivative along symmetric E is <grad, E>).
    Feature norms are not enforced here (the spec's model has unit norms; solvers keep them).
    """
    tau = validate_tau(tau)
    y = as_labels("labels", labels)
    if gram:
        X = as_finite_array("G", X, ndim=2, shape=(y.size, y.size))
    else:
        X = as_finite_array("H", X, ndim=2, shape=(None, y.size))
    cb = _as_compiled(y, batches)
    value, g = (_loss_gram if gram else _loss_features)(X, cb, tau, grad)
    return (value, g) if grad else value


# --------------------------------------------------------------------------------------
# Factored solver on the sphere (UFM) / sphere x nonnegative orthant (UFM+)
