"""Loss objects of the unconstrained-features model (docs/ufm_general.md).

Each loss is ONE object holding all its forms, in the style of a cvxpy atom:

- ``value_grad(U, y)``: per-column loss values (m,) and gradients (K x m) in float64 numpy, for logits U
  (K x m) and target indices y (m,) (a class label, or the index of a regression target column);
- ``conjugate(V, y)``: the convex conjugate in the first argument, per column (``+inf`` outside its
  domain); ``None`` when not known (the certificate then uses the linearisation bound);
- ``dual_point(Gc, t)``: may a scaled centred gradient t Gc be used as a dual point (domain repair);
- ``cvxpy(U, y)``: the sum over columns as a cvxpy expression (optional; used by an auxiliary route);
- ``torch(U, y)``: the per-column loss as a torch expression (optional);
- ``closed_form(K, n, lam)``: the balanced-class optimum when one is known (else None);
- ``infimum``: a lower bound of the loss over logits (per sample), used by the linearisation bound;
- ``gradient_determines``: what equal gradients say about the logits ("logits" for strictly convex losses,
  "logits-mod-constant" for softmax losses, None: nothing), used by the uniqueness certificate.

Certification assumes convexity in the logits. ``UserLoss`` wraps two Python callables and refuses
(InputError) a loss that is visibly non-convex along random lines (``check_convexity``).

Adding a loss: one subclass of :class:`Loss` (value_grad at least; conjugate/cvxpy/closed form where
known) and its tests (gradient against finite differences, conjugate against the Fenchel-Young
inequality, the closed form against a certified solve). See docs/DEVELOPING.md.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from theory._validate import InputError, as_float, as_float_tuple, as_int

#: smallest positive label smoothing eps (q = eps / K stays a normal float64 for any K <= 10^7)
SMOOTHING_MIN = 1e-300
#: most classes a loss object is built for (the smoothing floor above is sized for it)
MAX_LOSS_CLASSES = 10**7

__all__ = ["Loss", "SlotLayout", "CrossEntropy", "SquaredError", "UserLoss", "make_loss", "check_convexity", "xlogx"]


def xlogx(x: np.ndarray) -> np.ndarray:
    """x log x with 0 log 0 = 0 (x >= 0)."""
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    pos = x > 0
    out[pos] = x[pos] * np.log(x[pos])
    return out


def max_shifted_softmax(U: np.ndarray):
    """The stable softmax of the columns of U (K x m), shared by every cross-entropy form.

    Returns ``(am, mx, rest, P)``: the row of each column's largest logit, that logit, the sum of the
    other entries of exp(U - mx) (the largest is exactly 1, so lse = mx + log1p(rest) keeps every
    digit when one logit dominates), and the softmax P.
    """
    cols = np.arange(U.shape[1])
    am = np.argmax(U, axis=0)
    mx = U[am, cols]
    E = np.exp(U - mx)
    E[am, cols] = 0.0
    rest = E.sum(axis=0)
    E[am, cols] = 1.0
    return am, mx, rest, E / (1.0 + rest)


class Loss:
    """Base class: a convex loss of the logits of one sample, loss(u; y)."""

    name = "loss"
    #: certification assumes convexity in the logits; subclasses here are convex by construction
    convex = True
    #: what equal gradients at two logit vectors imply (for the uniqueness certificate)
    gradient_determines: str | None = None
    #: a lower bound of loss(u; y) over u (None: unknown)
    infimum: float | None = None
    #: the logits are shifted by the bias: a loss constant along 1 makes the bias defined up to a constant
    shift_invariant = False

    def value_grad(self, U: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def conjugate(self, V: np.ndarray, y: np.ndarray) -> np.ndarray | None:
        """loss*(v; y) = sup_u <v, u> - loss(u; y), per column; +inf outside the domain; None if unknown."""
        return None

    def cvxpy(self, U, y: np.ndarray):
        return None

    def torch(self, U, y):
        return None

    def closed_form(self, K: int, n: int, lam: float) -> dict | None:
        return None

    def exchangeable_key(self) -> np.ndarray | None:
        """A key per class such that the loss is equivariant under every permutation of the classes that
        preserves the keys (loss(P z; P y) = loss(z; y)), or None when no such symmetry is known (user losses:
        classes are never grouped). Used to group exchangeable classes (docs/ufm_general.md, "Grouping")."""
        return None

    # ---- slot form: one representative class per group of exchangeable classes --------------------------
    # A logit vector of a representative of group a that is invariant under the permutations fixing it takes
    # m + 1 distinct values: slot e < m is the common logit of the members of group e other than the
    # representative (multiplicity Mu[e, a] = m_e - [e == a]), slot m the representative's own logit
    # (multiplicity 1). The generic forms below expand to K-vectors and call value_grad / conjugate;
    # subclasses override them with O(m^2) forms.

    def value_grad_slots(self, Zs: np.ndarray, layout: "SlotLayout") -> tuple[np.ndarray, np.ndarray]:
        """Per-representative values (m,) and per-ENTRY gradients ((m + 1) x m) of slot logits Zs."""
        U = layout.expand(Zs)
        v, G = self.value_grad(U, layout.reps)
        return v, layout.compress(G)

    def conjugate_slots(self, Vs: np.ndarray, layout: "SlotLayout") -> np.ndarray | None:
        out = self.conjugate(layout.expand(Vs), layout.reps)
        return out

    def describe(self) -> dict:
        return {"name": self.name}


class SlotLayout:
    """Groups of exchangeable classes: ``labels`` (K,) group of each class, ``reps`` (m,) one representative
    class per group (its first class), ``sizes`` (m,) the group sizes m_a, ``mult`` ((m + 1) x m) the slot
    multiplicities (slot e < m: m_e - [e == a]; slot m: the representative itself, 1)."""

    def __init__(self, labels: np.ndarray):
        labels = np.asarray(labels, dtype=np.int64)
        m = int(labels.max()) + 1
        self.labels = labels
        self.K = labels.size
        self.m = m
        self.sizes = np.bincount(labels, minlength=m).astype(np.int64)
        if np.any(self.sizes == 0):
            raise ValueError("group labels must be 0..m-1 with every group non-empty")
        first = np.full(m, -1, dtype=np.int64)
        for i in range(labels.size - 1, -1, -1):
            first[labels[i]] = i
        self.reps = first
        mult = np.empty((m + 1, m))
        mult[:m] = self.sizes[:, None].astype(float)
        mult[np.arange(m), np.arange(m)] -= 1.0
        mult[m] = 1.0
        self.mult = mult

    def expand(self, Zs: np.ndarray) -> np.ndarray:
        """Slot values ((m + 1) x m) -> the K x m logit vectors of the representatives."""
        U = np.array(Zs[self.labels, :], dtype=float)
        U[self.reps, np.arange(self.m)] = Zs[self.m, :]
        return U

    def compress(self, G: np.ndarray) -> np.ndarray:
        """K x m per-class gradients -> per-entry slot gradients (the mean over each slot's members)."""
        m = self.m
        S = np.zeros((m, G.shape[1]))
        np.add.at(S, self.labels, G)
        own = G[self.reps, np.arange(m)]
        S[np.arange(m), np.arange(m)] -= own
        mu = self.mult[:m]
        out = np.zeros((m + 1, G.shape[1]))
        out[:m] = np.where(mu > 0, S / np.maximum(mu, 1.0), 0.0)
        out[m] = own
        return out


class CrossEntropy(Loss):
    """Cross-entropy with label smoothing and class weights (docs/ufm_general.md, "Losses").

    loss(z; y) = w_y [logsumexp(z) - <q_y, z>] with the target q_y:
    - ``smoothing = 0``: q_y = e_y (plain cross-entropy);
    - ``convention = "torch"`` (PyTorch's ``label_smoothing``): q_y = (1 - eps) e_y + eps/K 1;
    - ``convention = "others"``: q_y has 1 - eps at y and eps/(K - 1) elsewhere.
    ``weights`` (K, > 0): class weights w_y; the objective keeps the 1/N mean (PyTorch's ``weight=`` with
    reduction "mean" divides by sum_i w_{y_i} instead).

    Conjugate: (w f)*(v) = w f*(v/w) with f*(v) = sum_c (v_c + q_c) log(v_c + q_c) when v + q is in the
    probability simplex, +inf otherwise.
    """

    gradient_determines = "logits-mod-constant"
    shift_invariant = True
    infimum = None  # set in __init__: 0 for plain CE; the entropy of q for smoothing

    def __init__(self, K: int, smoothing: float = 0.0, convention: str = "torch", weights=None):
        # K = 2.7 became 2 and K = '3' was read by int(); K = None / inf / 1e30 and smoothing = None / [0.1] were
        # TypeErrors, OverflowErrors or numpy's 'Maximum allowed dimension exceeded', naming nothing
        K = as_int("classes (K)", K, minimum=2, maximum=MAX_LOSS_CLASSES)
        eps = as_float("smoothing eps", smoothing)
        if not (math.isfinite(eps) and 0.0 <= eps < 1.0):
            raise InputError(f"smoothing eps must be in [0, 1), got {smoothing!r}")
        if 0.0 < eps < SMOOTHING_MIN:  # eps = 1e-320: q = eps / K subnormal, the conjugate overflowed (no certificate)
            raise InputError(f"smoothing eps must be 0 or in [{SMOOTHING_MIN:g}, 1) (below, eps / K underflows "
                             f"float64), got {smoothing!r}")
        if convention not in ("torch", "others"):
            raise InputError(f"smoothing convention must be 'torch' or 'others', got {convention!r}")
        self.K, self.eps, self.convention = K, eps, convention
        if weights is None:
            w = np.ones(K)
        else:
            if isinstance(weights, np.ndarray) and weights.ndim != 1:
                raise InputError(f"class weights must be a 1-D sequence of numbers, got an array of shape {weights.shape}")
            w = np.asarray(as_float_tuple("class weights", weights), dtype=float)
            if w.shape != (K,):
                raise InputError(f"class weights must have one entry per class ({K}), got {w.size}")
            if not (np.all(np.isfinite(w)) and np.all(w > 0)):
                raise InputError("class weights must be finite and > 0")
            if not (np.all(w >= 1e-6) and np.all(w <= 1e6)):
                raise InputError("class weights must lie in [1e-6, 1e6]")
        self.w = w
        self.weighted = weights is not None
        if eps == 0.0:
            self.q_true, self.q_other = 1.0, 0.0
        elif convention == "torch":
            self.q_true, self.q_other = 1.0 - eps + eps / K, eps / K
        else:
            self.q_true, self.q_other = 1.0 - eps, eps / (K - 1)
        # infimum of lse(z) - <q, z> is the entropy of q (attained at softmax(z) = q; approached as q -> e_y)
        ent = -float(xlogx(np.array([self.q_true]))[0] + (K - 1) * xlogx(np.array([self.q_other]))[0])
        self.infimum = float(np.min(w)) * ent
        if eps == 0.0 and not self.weighted:
            self.name = "ce"
        elif self.weighted and eps == 0.0:
            self.name = "weighted-ce"
        else:
            self.name = "ls" if not self.weighted else "weighted-ls"

    def targets(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y)
        Q = np.full((self.K, y.size), self.q_other)
        Q[y, np.arange(y.size)] = self.q_true
        return Q

    def value_grad(self, U, y):
        """Stable: m = max logit, E = exp(U - m) with the max entry exactly 1; lse = m + log1p(rest)."""
        U = np.asarray(U, dtype=float)
        y = np.asarray(y)
        K, m = U.shape
        cols = np.arange(m)
        am, mx, rest, P = max_shifted_softmax(U)
        wy = self.w[y]
        if self.q_other == 0.0:
            # plain CE: loss = (m - u_y) + log1p(rest); label entry p_y - 1 without cancellation when y is the max
            val = (mx - U[y, cols]) + np.log1p(rest)
            G = P
            G[y, cols] = np.where(am == y, -rest / (1.0 + rest), P[y, cols] - 1.0)
        else:
            # lse - <q, z> = sum_c q_c (lse - z_c) = sum_c q_c [(m - z_c) + log1p(rest)]
            val = (self.q_other * (K * mx - U.sum(axis=0)) + (self.q_true - self.q_other) * (mx - U[y, cols])
                   + np.log1p(rest))
            G = P - self.q_other
            G[y, cols] -= self.q_true - self.q_other
        return wy * val, G * wy

    def conjugate(self, V, y):
        V = np.asarray(V, dtype=float)
        y = np.asarray(y)
        wy = self.w[y]
        Pm = V / wy + self.targets(y)  # must be a probability vector
        out = wy * np.sum(xlogx(Pm), axis=0)
        bad = (np.min(Pm, axis=0) < 0.0) | (np.abs(Pm.sum(axis=0) - 1.0) > 1e-12)
        out[bad] = np.inf
        return out

    def exchangeable_key(self):
        # equivariant under permutations of classes with equal weights (the targets are symmetric)
        return self.w.copy()

    def value_grad_slots(self, Zs, layout):
        """Slot form of value_grad (same stable evaluation: max slot, log1p of the rest)."""
        Zs = np.asarray(Zs, dtype=float)
        Mu = layout.mult
        m = layout.m
        cols = np.arange(m)
        live = Mu > 0
        Zl = np.where(live, Zs, -np.inf)
        am = np.argmax(Zl, axis=0)
        mx = Zl[am, cols]
        E = np.where(live, np.exp(np.where(live, Zs, 0.0) - mx), 0.0)
        P1 = E.copy()  # per-entry exp(z - max)
        E = E * Mu
        E[am, cols] -= 1.0  # one entry of the max slot is exactly 1
        rest = E.sum(axis=0)
        P = P1 / (1.0 + rest)
        wy = self.w[layout.reps]
        own = Zs[m]
        if self.q_other == 0.0:
            val = (mx - own) + np.log1p(rest)
            G = P
            G[m] = np.where(am == m, -rest / (1.0 + rest), P[m] - 1.0)
        else:
            tot = np.sum(np.where(live, Mu * Zs, 0.0), axis=0)  # sum of all K logits
            val = (self.q_other * (self.K * mx - tot) + (self.q_true - self.q_other) * (mx - own) + np.log1p(rest))
            G = P - self.q_other
            G[m] -= self.q_true - self.q_other
        G = np.where(live, G, 0.0)
        return wy * val, G * wy

    def conjugate_slots(self, Vs, layout):
        Vs = np.asarray(Vs, dtype=float)
        Mu = layout.mult
        live = Mu > 0
        wy = self.w[layout.reps]
        Q = np.full(Vs.shape, self.q_other)
        Q[layout.m] = self.q_true
        Pm = np.where(live, Vs / wy + Q, 0.0)
        out = wy * np.sum(Mu * xlogx(np.clip(Pm, 0.0, None)), axis=0)
        bad = (np.min(np.where(live, Pm, 0.0), axis=0) < 0.0) | (np.abs(np.sum(Mu * Pm, axis=0) - 1.0) > 1e-12)
        out[bad] = np.inf
        return out

    def cvxpy(self, U, y):
        import cvxpy as cp

        Q = self.targets(y)
        wy = self.w[np.asarray(y)]
        return cp.sum(cp.multiply(wy, cp.log_sum_exp(U, axis=0))) - cp.sum(cp.multiply(Q * wy, U))

    def torch(self, U, y):
        import torch

        Q = torch.as_tensor(self.targets(np.asarray(y)), dtype=U.dtype, device=U.device)
        wy = torch.as_tensor(self.w[np.asarray(y)], dtype=U.dtype, device=U.device)
        return wy * (torch.logsumexp(U, dim=0) - (Q * U).sum(dim=0))

    def closed_form(self, K, n, lam):
        """Balanced classes, equal weights w: by symmetry and convexity Z = c J_K (per class), and
        g(c) = w[log(1 + (K-1) e^-c) + c (1 - q_y)] + lam (K-1) sqrt(n) c (derived, docs/ufm_general.md).
        With a = (1 - q_y) + (K-1) s / w, s = sqrt(n) lam: c* = log((1 - a)(K - 1)/a) when a < (K-1)/K, else
        c* = 0 (Z = 0); f* = w[-log(1 - a) + a c*] (collapse) or w[log K - (1 - q_y) ... ] at Z = 0."""
        if not np.all(self.w == self.w[0]) or K != self.K:
            return None
        w = float(self.w[0])
        s = math.sqrt(n) * lam
        a = (1.0 - self.q_true) + (K - 1) * s / w
        if a >= (K - 1) / K:
            # Z = 0: loss = w [log K - <q, 0>] = w log K
            return {"value": w * math.log(K), "margin": 0.0, "trivial": True, "geometry": "zero"}
        c = math.log((1.0 - a) * (K - 1) / a)
        return {"value": w * (-math.log1p(-a) + a * c), "margin": c, "trivial": False, "geometry": "simplex-etf"}

    def describe(self):
        d = {"name": self.name, "smoothing": self.eps, "target_true": self.q_true, "target_other": self.q_other}
        if self.eps > 0:
            d["smoothing_convention"] = ("torch: target (1 - eps) e_y + eps/K (PyTorch label_smoothing)"
                                         if self.convention == "torch" else
                                         "others: 1 - eps on the true class, eps/(K - 1) on each other class")
        if self.weighted:
            d["class_weights"] = self.w.tolist()
            d["weight_normalisation"] = ("mean over the N samples of w_y CE (PyTorch's weight= with reduction "
                                         "'mean' divides by sum_i w_{y_i} instead)")
        return d


class SquaredError(Loss):
    """loss(u; y) = (1/2) ||u - t_y||^2 with target columns T (K x #targets): one-hot (MSE classification,
    T = I_K) or regression targets. Conjugate: (1/2)||v||^2 + <v, t_y> (everywhere finite)."""

    gradient_determines = "logits"
    infimum = 0.0

    def __init__(self, T: np.ndarray, name: str = "mse"):
        from theory._validate import as_finite_array

        self.T = as_finite_array("targets T", T, ndim=2)  # finite numbers only: a NaN target fails here, not later
        self.T.setflags(write=False)  # the targets are fixed: _one_hot is decided once (it cost 57 of 139 s at K = 1000)
        self.name = name
        self._is_one_hot = (self.T.shape[0] == self.T.shape[1]
                            and bool(np.array_equal(self.T, np.eye(self.T.shape[0]))))

    def value_grad(self, U, y):
        R = np.asarray(U, dtype=float) - self.T[:, np.asarray(y)]
        return 0.5 * np.sum(R * R, axis=0), R

    def conjugate(self, V, y):
        V = np.asarray(V, dtype=float)
        return 0.5 * np.sum(V * V, axis=0) + np.sum(V * self.T[:, np.asarray(y)], axis=0)

    def _one_hot(self) -> bool:
        return self._is_one_hot

    def exchangeable_key(self):
        # one-hot targets: equivariant under every permutation of the classes; other targets: no symmetry
        return np.zeros(self.T.shape[0]) if self._one_hot() else None

    def value_grad_slots(self, Zs, layout):
        if not self._one_hot():
            return Loss.value_grad_slots(self, Zs, layout)
        R = np.where(layout.mult > 0, np.asarray(Zs, dtype=float), 0.0)
        R[layout.m] -= 1.0
        return 0.5 * np.sum(layout.mult * R * R, axis=0), R

    def conjugate_slots(self, Vs, layout):
        if not self._one_hot():
            return Loss.conjugate_slots(self, Vs, layout)
        V = np.where(layout.mult > 0, np.asarray(Vs, dtype=float), 0.0)
        return 0.5 * np.sum(layout.mult * V * V, axis=0) + V[layout.m]

    def cvxpy(self, U, y):
        import cvxpy as cp

        return 0.5 * cp.sum_squares(U - self.T[:, np.asarray(y)])

    def torch(self, U, y):
        import torch

        T = torch.as_tensor(self.T[:, np.asarray(y)], dtype=U.dtype, device=U.device)
        return 0.5 * ((U - T) ** 2).sum(dim=0)

    def closed_form(self, K, n, lam):
        if self.name != "mse" or self.T.shape != (K, K) or not np.array_equal(self.T, np.eye(K)):
            return None
        N = n * K
        rn = math.sqrt(n)
        z = max(rn - N * lam, 0.0)
        return {"value": (K - 1) * ((rn - z) ** 2 / (2 * N) + lam * z), "margin": z, "trivial": z == 0.0,
                "geometry": "zero" if z == 0.0 else "simplex-etf"}


#: Convexity screen of a user loss: random lines per check and points per line; a violation of the
#: midpoint inequality beyond CONVEXITY_RTOL (relative to the values' scale; float64 evaluation error of a
#: smooth loss is ~1e-15 relative) refuses the loss.
CONVEXITY_LINES = 64
CONVEXITY_RTOL = 1e-9


def check_convexity(fun: Callable, K: int, y: np.ndarray, *, seed: int = 0, scales=(1e-2, 1.0, 10.0)) -> dict:
    """Screen a per-column loss for convexity along random lines: f((a + b)/2) <= (f(a) + f(b))/2 and the
    gradient monotonicity <g(a) - g(b), a - b> >= 0. A violation is a proof of non-convexity (a witness);
    passing is NOT a proof of convexity (certification assumes it). Returns the worst violation."""
    rng = np.random.default_rng(seed)
    y = np.asarray(y)
    worst = {"violation": 0.0}
    for sc in scales:
        A = rng.standard_normal((K, CONVEXITY_LINES)) * sc
        B = rng.standard_normal((K, CONVEXITY_LINES)) * sc
        yy = y[rng.integers(0, y.size, CONVEXITY_LINES)]
        fa, ga = fun(A, yy)
        fb, gb = fun(B, yy)
        fm, _ = fun(0.5 * (A + B), yy)
        scale = np.abs(fa) + np.abs(fb) + 1e-300
        mid = (fm - 0.5 * (fa + fb)) / scale
        mono = -np.sum((ga - gb) * (A - B), axis=0) / (np.sum(np.abs((ga - gb) * (A - B)), axis=0) + 1e-300)
        for what, arr in (("midpoint", mid), ("gradient monotonicity", mono)):
            j = int(np.argmax(arr))
            if float(arr[j]) > worst["violation"]:
                worst = {"violation": float(arr[j]), "test": what, "scale": sc}
    worst["convex_screen_passed"] = not worst["violation"] > CONVEXITY_RTOL
    return worst


class UserLoss(Loss):
    """A user-defined loss from Python: ``value_grad(U, y) -> (values (m,), grads (K x m))`` per column,
    optionally ``conjugate(V, y)``, ``infimum`` (a lower bound of the loss; needed by the linearisation
    bound when there is no conjugate) and ``cvxpy``. Certification ASSUMES convexity in the logits; a loss
    that visibly violates it along random lines is refused (InputError), and one whose gradient does not
    match its values (finite differences) too."""

    def __init__(self, name: str, value_grad: Callable, *, conjugate: Callable | None = None,
                 infimum: float | None = None, cvxpy: Callable | None = None, K: int | None = None,
                 y: np.ndarray | None = None, check: bool = True):
        if not callable(value_grad):
            raise InputError("user loss: value_grad must be callable")
        self.name = str(name)
        self._vg, self._conj, self._cvx = value_grad, conjugate, cvxpy
        # infimum 'a' and K = 1.5 / 0 were ValueError / TypeError naming nothing ("high <= 0")
        self.infimum = None if infimum is None else as_float("user loss: infimum", infimum)
        if K is not None:
            K = as_int("user loss: K (classes)", K, minimum=1, maximum=MAX_LOSS_CLASSES)
        self.screen = None
        if check and K is not None:
            self.validate(K, np.arange(K) if y is None else np.asarray(y))

    def _call(self, U, y):
        try:
            v, g = self._vg(U, y)
            v = np.asarray(v, dtype=float).reshape(-1)
            g = np.asarray(g, dtype=float)
        except Exception as exc:  # the user's code: any failure is bad input, named
            raise InputError(f"user loss {self.name!r}: value_grad failed: {type(exc).__name__}: {exc}") from None
        if v.shape != (U.shape[1],) or g.shape != U.shape:
            raise InputError(f"user loss {self.name!r}: value_grad must return shapes ({U.shape[1]},) and "
                             f"{U.shape}, got {v.shape} and {g.shape}")
        return v, g

    def validate(self, K: int, y: np.ndarray) -> dict:
        rng = np.random.default_rng(1)
        U = rng.standard_normal((K, 8))
        yy = y[rng.integers(0, y.size, 8)]
        v, g = self._call(U, yy)
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(g))):
            raise InputError(f"user loss {self.name!r}: values or gradients are not finite at random logits")
        D = rng.standard_normal(U.shape)
        h = 1e-6
        fd = (self._call(U + h * D, yy)[0] - self._call(U - h * D, yy)[0]) / (2 * h)
        an = np.sum(g * D, axis=0)
        err = float(np.max(np.abs(fd - an) / (1.0 + np.abs(an))))
        if err > 1e-5:
            raise InputError(f"user loss {self.name!r}: gradient does not match finite differences "
                             f"(relative error {err:.2e} > 1e-5)")
        scr = check_convexity(self._call, K, y)
        if not scr["convex_screen_passed"]:
            raise InputError(f"user loss {self.name!r} is not convex in the logits ({scr['test']} violated by "
                             f"{scr['violation']:.2e} relative at scale {scr['scale']:g}): certification assumes "
                             f"convexity")
        self.screen = {**scr, "gradient_fd_error": err}
        return self.screen

    def value_grad(self, U, y):
        return self._call(np.asarray(U, dtype=float), np.asarray(y))

    def conjugate(self, V, y):
        if self._conj is None:
            return None
        out = np.asarray(self._conj(np.asarray(V, dtype=float), np.asarray(y)), dtype=float).reshape(-1)
        return np.where(np.isnan(out), np.inf, out)

    def cvxpy(self, U, y):
        return None if self._cvx is None else self._cvx(U, y)

    def describe(self):
        return {"name": self.name, "user_defined": True, "conjugate": self._conj is not None,
                "infimum": self.infimum, "convexity_screen": self.screen,
                "note": "certification assumes the loss is convex in the logits (screened along random lines)"}


def make_loss(name: str, K: int, *, smoothing: float = 0.0, convention: str = "torch", weights=None) -> Loss:
    """The loss object for ``--loss ce|mse|ls|weighted-ce``."""
    if name == "ce":
        if smoothing:
            raise InputError("--smoothing needs --loss ls")
        return CrossEntropy(K, 0.0, convention, weights)
    if name == "ls":
        return CrossEntropy(K, smoothing, convention, weights)
    if name == "weighted-ce":
        if weights is None:
            raise InputError("--loss weighted-ce needs --class-weights")
        return CrossEntropy(K, smoothing, convention, weights)
    if name == "mse":
        if smoothing or weights is not None:
            raise InputError("--smoothing and --class-weights apply to ce, ls, weighted-ce only")
        return SquaredError(np.eye(K), "mse")
    raise InputError(f"loss must be one of ce, mse, ls, weighted-ce, got {name!r}")
