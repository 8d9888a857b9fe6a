"""Cross-entropy UFM with nonnegative features (post-ReLU): closed forms and symbolic steps
(docs/scl.md, "Cross-entropy with ReLU features"). Derived here; pure functions.

Model: f(W, H) = (1/N) sum_i CE(W h_i; y_i) + (lw/2)||W||^2 + (lh/2)||H||^2, H >= 0, no bias.

Orthogonal-frame (OF) restricted minimum (any counts, plain CE). If the class means are pairwise orthogonal and
nonnegative, their supports are disjoint and the problem splits per class; collapse is exact (strict convexity
in h for fixed W), so with h_c = a e_c and z_c = a W e_c the class-c part is
(n_c/N) CE(z_c; c) + sqrt(lw lh n_c) ||z_c|| (minimised over the scale a), and by symmetry and shift invariance
z_c = s (e_c - 1/K): phi_c = min_{s >= 0} w_c log(1 + (K-1) e^{-s}) + beta_c s with w_c = n_c/N and
beta_c = sqrt(lw lh n_c (K-1)/K). With r_c = beta_c/w_c: s_c = log((K-1)(1-r_c)/r_c) when r_c < (K-1)/K, else
s_c = 0 (z_c = 0).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from theory._validate import as_float, as_int_tuple


def of_scales(counts: Sequence[int], lw: float, lh: float) -> list[float]:
    """Optimal logit margins s_c of the OF-restricted problem (0 where the class collapses to z_c = 0)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    lw = as_float("lambda_w", lw, positive=True)
    lh = as_float("lambda_h", lh, positive=True)
    K, N = len(counts), sum(counts)
    out = []
    for n in counts:
        w = n / N
        beta = math.sqrt(lw * lh * n * (K - 1) / K)
        r = beta / w
        out.append(math.log((K - 1) * (1 - r) / r) if r < (K - 1) / K else 0.0)
    return out


def of_restricted_value(counts: Sequence[int], lw: float, lh: float) -> float:
    """min f over every nonnegative configuration whose class means are pairwise orthogonal (any d >= K)."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    K, N = len(counts), sum(counts)
    tot = 0.0
    for n, s in zip(counts, of_scales(counts, lw, lh)):
        w = n / N
        beta = math.sqrt(lw * lh * n * (K - 1) / K)
        tot += w * math.log1p((K - 1) * math.exp(-s)) + beta * s
    return float(tot)


def balanced_value(K: int, n: int, lw: float, lh: float) -> float:
    """Balanced closed form: log(1 + (K-1) e^{-s}) + c s, c = sqrt(lw lh N (K-1)), s = log((K-1)(1-c)/c) when
    c < (K-1)/K (else log K, the zero point). The OF-restricted value at balanced counts; optimal by the DNN
    certificate of docs/scl.md (Cross-entropy with ReLU features)."""
    return of_restricted_value((n,) * K, lw, lh)


def of_point(counts: Sequence[int], d: int, lw: float, lh: float) -> tuple[np.ndarray, np.ndarray]:
    """The OF-restricted minimiser in the solver's class coordinates: (W (K x d), U (d x K)), u_c = sqrt(n_c) h_c.
    Per class: z_c = s_c (e_c - 1/K), h_c = a_c e_c, column c of W = z_c / a_c with a_c^2 = ||z_c|| sqrt(lw/(lh n_c))."""
    counts = as_int_tuple("counts", counts, minimum=1, min_len=2)
    K = len(counts)
    W = np.zeros((K, d))
    U = np.zeros((d, K))
    for c, (n, s) in enumerate(zip(counts, of_scales(counts, lw, lh))):
        if s <= 0:
            continue
        z = s * (np.eye(K)[c] - 1.0 / K)
        a = math.sqrt(float(np.linalg.norm(z)) * math.sqrt(lw / (lh * n)))
        U[c, c] = math.sqrt(n) * a
        W[:, c] = z / a
    return W, U


# ---- symbolic steps (sympy): each must simplify to 0 / True --------------------------------------------------

def sym_balanced_duality_gap():
    """Balanced optimum: with c = sqrt(lw lh N (K-1)), pi = 1 - c, rho = c/(K-1), the dual value (the entropy of the
    dual probability vector p = (pi, rho, ..., rho)) minus the primal value log(1 + (K-1)e^{-s}) + c s at
    s = log(pi/rho): must be 0 (strong duality of the DNN relaxation at the OF)."""
    import sympy as sp

    a, K = sp.symbols("a K", positive=True)  # a = pi = 1 - c in (0, 1)
    c = 1 - a
    pi, rho = a, c / (K - 1)
    s = sp.log(pi / rho)
    primal = sp.log(sp.cancel(1 + (K - 1) * sp.exp(-s))) + c * s
    dual = -pi * sp.log(pi) - (K - 1) * rho * sp.log(rho)
    return sp.simplify(sp.expand(sp.expand_log(primal - dual, force=True)))


def sym_balanced_feasibility():
    """The dual check at the balanced OF: with G = rho (1 1^T - K I) (p - e_c columns) and the multipliers cancelling
    every off-diagonal entry of G^T G, n (G^T G / N^2 + lw m) = n rho^2 K (K-1)/N^2 I; at rho = c/(K-1),
    c^2 = lw lh N (K-1) this equals lw lh I. Returns n rho^2 K (K-1)/N^2 - lw lh with N = n K (must be 0)."""
    import sympy as sp

    lw, lh, n, K = sp.symbols("lw lh n K", positive=True)
    N = n * K
    c = sp.sqrt(lw * lh * N * (K - 1))
    rho = c / (K - 1)
    return sp.simplify(n * rho ** 2 * K * (K - 1) / N ** 2 - lw * lh)


def sym_offdiag_cancel(K: int):
    """G^T G for G = rho (1 1^T - K I) (K x K, explicit K): diagonal rho^2 (K^2 - K), off-diagonal -K rho^2, so
    multipliers 2 lw nu = K rho^2 / N^2 >= 0 cancel it to a multiple of I. Returns G^T G + K rho^2 (1 1^T - I) -
    rho^2 K (K-1) I (must be the zero matrix)."""
    import sympy as sp

    rho = sp.symbols("rho", positive=True)
    one = sp.ones(K, K)
    G = rho * (one - K * sp.eye(K))
    return sp.simplify(G.T * G + K * rho ** 2 * (one - sp.eye(K)) - rho ** 2 * K * (K - 1) * sp.eye(K))


def sym_binary_max_margin():
    """Binary example of the review thread: features fixed at an OF (h = e_1 for class 1, e_2 for class 2),
    one classifier w with ||w|| = 1, margins w_1 (class 1) and -w_2 (class 2). min(w_1, -w_2) <= (w_1 - w_2)/2 <=
    ||w|| / sqrt 2 (Cauchy-Schwarz), with equality iff w = (1, -1)/sqrt 2. Returns (the value of
    (w_1 - w_2)/2 at w = (1,-1)/sqrt2 minus 1/sqrt2, and the Cauchy-Schwarz slack ||w||^2 ||(1,-1)||^2/4 -
    ((w_1 - w_2)/2)^2 written as a square (w_1 + w_2)^2/4 >= 0) -> (expr == 0, relation True)."""
    import sympy as sp

    w1, w2 = sp.symbols("w1 w2", real=True)
    at = ((1 / sp.sqrt(2)) - (-1 / sp.sqrt(2))) / 2 - 1 / sp.sqrt(2)
    slack = (w1 ** 2 + w2 ** 2) * 2 / 4 - ((w1 - w2) / 2) ** 2
    return sp.simplify(at), sp.simplify(slack - (w1 + w2) ** 2 / 4)
